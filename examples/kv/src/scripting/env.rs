//! Redis 7.0's Lua environment on an mlua Lua 5.1 state: the base, table, string and math
//! libraries plus `cjson`, `cmsgpack`, `bit` and `struct`; the `redis` table; the sandbox
//! (no `print`, `loadfile`, `dofile`, `newproxy`, `getfenv`, `setfenv`, no binary chunks;
//! globals read-only, with Redis's error texts); scripts compiled under the name
//! `@user_script` with the read-only view of the globals as their environment.
//!
//! Redis 7.0 patches its Lua with read-only tables; the vendored Lua here has no such patch,
//! so the protected tables are proxies: empty tables whose metatable reads through to the real
//! table and refuses writes ("Attempt to modify a readonly table"), with `setmetatable` and
//! `rawset` refusing them too.
//!
//! What `redis.call` does depends on where the script runs: the glue installs a [`Host`] in
//! the state's app data for the duration of a run.

use std::rc::Rc;

use bytes::Bytes;
use mlua::{Function, Lua, LuaOptions, MultiValue, StdLib, Table, Value};

use super::call::{CallArgs, CallReply};

/// What the running script's `redis.call`, `redis.pcall` and `redis.setresp` reach: the
/// glue's side of a run.
pub trait Host {
    /// Runs one command for the script: its reply converted for Lua (`resp3`: as
    /// `redis.setresp(3)` asked), or the error table `redis.call` raises (`Err`: already
    /// converted to the Lua error value). `suspend` switches off the script's stack until
    /// the glue resumes it (`true`: to await what the host left pending).
    fn call(
        &self,
        lua: &Lua,
        args: Vec<Bytes>,
        raise: bool,
        resp3: bool,
        suspend: &dyn Fn(bool),
    ) -> mlua::Result<CallReply>;
    /// `redis.log(level, message)`.
    fn log(&self, level: i64, message: &str);
    /// `redis.acl_check_cmd`: whether the caller's user may run command `id` (an
    /// `Catalog` id) with `args`.
    fn acl_allows(&self, _id: usize, _args: &[Bytes]) -> bool {
        true
    }
}

/// The host of the run in progress, if any, and its RESP mode (`redis.setresp`). Installed
/// once in a state's app data by whoever runs scripts in it; `redis.call` gets it directly
/// from its closure (no app-data lookup per call).
#[derive(Default)]
pub(crate) struct Running {
    host: std::cell::RefCell<Option<Rc<dyn Host>>>,
    pub resp: std::cell::Cell<u8>,
}

impl Running {
    /// A run starts with `host`, in RESP2.
    pub fn begin(&self, host: Rc<dyn Host>) {
        *self.host.borrow_mut() = Some(host);
        self.resp.set(2);
    }

    pub fn end(&self) {
        self.host.borrow_mut().take();
    }

    /// The running script's host; an error outside a run.
    pub fn host(&self) -> mlua::Result<Rc<dyn Host>> {
        self.host
            .borrow()
            .clone()
            .ok_or_else(|| mlua::Error::RuntimeError("redis API used outside a script run".into()))
    }
}

/// The globals' read-only view and the tables behind it.
pub struct Env {
    pub lua: Lua,
    /// The environment scripts run in (a read-only view of the globals).
    pub view: Table,
    /// The `redis` table behind its read-only proxy: a run installs its own `call` and
    /// `pcall` here.
    pub redis: Table,
    /// The real globals and the names of the two a run sets, kept to set them without
    /// looking them up or making the names again on every run.
    pub globals: Table,
    pub keys_name: mlua::LuaString,
    pub argv_name: mlua::LuaString,
}

const SANDBOX: &str = r#"
local real_G, error, tostring, rawget, rawset, setmetatable, getmetatable, type, loadstring, string_sub =
    _G, error, tostring, rawget, rawset, setmetatable, getmetatable, type, loadstring, string.sub
local readonly = setmetatable({}, {__mode = "k"})
local function refuse()
    error("Attempt to modify a readonly table", 2)
end
local function protect(t, index)
    local proxy = {}
    local mt = {__index = index or t, __newindex = refuse}
    local shown = setmetatable({}, {__index = mt, __newindex = refuse, __metatable = false})
    readonly[shown] = true
    mt.__metatable = shown
    readonly[proxy] = true
    setmetatable(proxy, mt)
    return proxy
end
for _, name in ipairs({"redis", "cjson", "cmsgpack", "bit", "struct"}) do
    if type(real_G[name]) == "table" then
        rawset(real_G, name, protect(real_G[name]))
    end
end
rawset(real_G, "setmetatable", function(t, mt)
    if readonly[t] then refuse() end
    return setmetatable(t, mt)
end)
rawset(real_G, "rawset", function(t, k, v)
    if readonly[t] then refuse() end
    return rawset(t, k, v)
end)
rawset(real_G, "loadstring", function(s, name)
    if type(s) == "string" and string_sub(s, 1, 1) == "\27" then
        return nil, "binary chunks are not allowed"
    end
    return loadstring(s, name)
end)
rawset(real_G, "print", nil)
rawset(real_G, "loadfile", nil)
rawset(real_G, "dofile", nil)
-- Not in Redis's environment either: `newproxy` makes userdata with a `__gc`, whose error
-- Lua 5.1 raises from inside whatever allocation ran the collector (a string pushed for a
-- reply included); `getfenv`/`setfenv` reach the environments of functions the sandbox gave.
rawset(real_G, "newproxy", nil)
rawset(real_G, "getfenv", nil)
rawset(real_G, "setfenv", nil)
-- The view reads through to the real globals as a table (no Lua call per global read);
-- a name missing there reaches the real globals' own metatable, which raises Redis's error.
local view = protect(real_G)
rawset(real_G, "_G", view)
setmetatable(real_G, {__index = function(_, name)
    error("Script attempted to access nonexistent global variable '" .. tostring(name) .. "'", 2)
end, __metatable = false})
return view, protect
"#;

impl Env {
    /// A fresh state with Redis's environment.
    pub fn new() -> mlua::Result<Env> {
        let lua = Lua::new_with(
            StdLib::TABLE | StdLib::STRING | StdLib::MATH,
            LuaOptions::new(),
        )?;
        let globals = lua.globals();
        let redis = redis_table(&lua)?;
        globals.raw_set("redis", redis.clone())?;
        super::libs::install(&lua)?;
        install_random(&lua)?;
        let (view, _protect): (Table, Function) = lua.load(SANDBOX).set_name("=sandbox").eval()?;
        let keys_name = lua.create_string("KEYS")?;
        let argv_name = lua.create_string("ARGV")?;
        Ok(Env {
            lua,
            view,
            redis,
            globals,
            keys_name,
            argv_name,
        })
    }

    /// Compiles a script body (EVAL) as Redis does: named `@user_script`, run in the view.
    pub fn compile(&self, body: &[u8]) -> Result<Function, String> {
        self.lua
            .load(body)
            .set_name("@user_script")
            .set_environment(self.view.clone())
            .into_function()
            .map_err(|error| {
                format!(
                    "ERR Error compiling script (new function): {}",
                    lua_message(&error)
                )
            })
    }
}

/// The message of a Lua error as Lua would print it (without mlua's decoration).
pub fn lua_message(error: &mlua::Error) -> String {
    match error {
        mlua::Error::SyntaxError { message, .. } => message.clone(),
        // mlua appends a traceback Redis does not show.
        mlua::Error::RuntimeError(message) => match message.find("\nstack traceback:") {
            Some(end) => message[..end].to_string(),
            None => message.clone(),
        },
        mlua::Error::CallbackError { cause, .. } => lua_message(cause),
        mlua::Error::MemoryError(message) => message.clone(),
        mlua::Error::ExternalError(error) => error.to_string(),
        other => other.to_string(),
    }
}

/// The current run's host; an error outside a run.
pub(crate) fn running(lua: &Lua) -> mlua::Result<Rc<Running>> {
    lua.app_data_ref::<Rc<Running>>()
        .map(|r| r.clone())
        .ok_or_else(|| mlua::Error::RuntimeError("redis API used outside a script run".into()))
}

/// `redis.error_reply`'s table, as Redis 7.0's `luaPushErrorBuff` builds it: `-CODE msg`
/// keeps its code, anything else gets `ERR`.
pub fn error_table(lua: &Lua, text: &[u8]) -> mlua::Result<Table> {
    let table = lua.create_table()?;
    table.raw_set("err", lua.create_string(error_text(text))?)?;
    Ok(table)
}

pub fn error_text(text: &[u8]) -> Vec<u8> {
    let (code, message): (&[u8], &[u8]) = match text.strip_prefix(b"-") {
        Some(rest) => match rest.iter().position(|&b| b == b' ') {
            Some(space) => (&rest[..space], &rest[space + 1..]),
            None => (b"ERR", rest),
        },
        None => (b"ERR", text),
    };
    let message = trim_newlines(message);
    let mut out = code.to_vec();
    if !message.is_empty() {
        out.push(b' ');
        out.extend_from_slice(message);
    }
    out
}

fn trim_newlines(mut text: &[u8]) -> &[u8] {
    while let [b'\r' | b'\n', rest @ ..] = text {
        text = rest;
    }
    while let [rest @ .., b'\r' | b'\n'] = text {
        text = rest;
    }
    text
}

fn redis_table(lua: &Lua) -> mlua::Result<Table> {
    let redis = lua.create_table()?;
    // Outside a run (a run installs its own).
    for name in ["call", "pcall"] {
        redis.raw_set(
            name,
            lua.create_function(|_, _: MultiValue| -> mlua::Result<()> {
                Err(mlua::Error::RuntimeError(
                    "redis.call is available only while a script runs".into(),
                ))
            })?,
        )?;
    }
    redis.raw_set(
        "sha1hex",
        lua.create_function(|lua, args: MultiValue| {
            if args.len() != 1 {
                return Err(mlua::Error::RuntimeError(
                    "wrong number of arguments".into(),
                ));
            }
            let body = match &args[0] {
                Value::String(s) => s.as_bytes().to_vec(),
                Value::Integer(n) => n.to_string().into_bytes(),
                Value::Number(n) => super::convert::number_text(*n).into_bytes(),
                _ => Vec::new(),
            };
            lua.create_string(super::sha1_hex(&body))
        })?,
    )?;
    redis.raw_set(
        "error_reply",
        lua.create_function(|lua, args: MultiValue| match args.front() {
            Some(Value::String(text)) if args.len() == 1 => {
                // Redis 7.0 makes the text `-text` first: its first word is the code.
                let text = text.as_bytes();
                let mut dashed = Vec::with_capacity(text.len() + 1);
                if !text.starts_with(b"-") {
                    dashed.push(b'-');
                }
                dashed.extend_from_slice(&text);
                error_table(lua, &dashed)
            }
            _ => Err(mlua::Error::RuntimeError(
                "wrong number or type of arguments".into(),
            )),
        })?,
    )?;
    redis.raw_set(
        "status_reply",
        lua.create_function(|lua, args: MultiValue| match args.front() {
            Some(Value::String(text)) if args.len() == 1 => {
                let table = lua.create_table()?;
                table.raw_set("ok", text.clone())?;
                Ok(table)
            }
            _ => Err(mlua::Error::RuntimeError(
                "wrong number or type of arguments".into(),
            )),
        })?,
    )?;
    redis.raw_set(
        "log",
        lua.create_function(|lua, args: MultiValue| {
            if args.len() < 2 {
                return Err(mlua::Error::RuntimeError(
                    "redis.log() requires two arguments or more.".into(),
                ));
            }
            let level = match &args[0] {
                Value::Integer(n) => *n,
                Value::Number(n) => *n as i64,
                _ => {
                    return Err(mlua::Error::RuntimeError(
                        "First argument must be a number (log level).".into(),
                    ))
                }
            };
            if !(0..=3).contains(&level) {
                return Err(mlua::Error::RuntimeError("Invalid debug level.".into()));
            }
            let message: Vec<String> = args
                .iter()
                .skip(1)
                .map(|v| match v {
                    Value::String(s) => s.to_string_lossy(),
                    Value::Integer(n) => n.to_string(),
                    Value::Number(n) => super::convert::number_text(*n),
                    _ => String::new(),
                })
                .collect();
            if let Ok(host) = running(lua).and_then(|run| run.host()) {
                host.log(level, &message.join(" "));
            }
            Ok(())
        })?,
    )?;
    redis.raw_set(
        "setresp",
        lua.create_function(|lua, args: MultiValue| {
            if args.len() != 1 {
                return Err(mlua::Error::RuntimeError(
                    "redis.setresp() requires one argument.".into(),
                ));
            }
            let resp = match &args[0] {
                Value::Integer(n) => *n,
                Value::Number(n) => *n as i64,
                _ => 0,
            };
            if resp != 2 && resp != 3 {
                return Err(mlua::Error::RuntimeError(
                    "RESP version must be 2 or 3.".into(),
                ));
            }
            if let Ok(run) = running(lua) {
                run.resp.set(resp as u8);
            }
            Ok(())
        })?,
    )?;
    redis.raw_set(
        "set_repl",
        lua.create_function(|_, args: MultiValue| {
            if args.len() != 1 {
                return Err(mlua::Error::RuntimeError(
                    "redis.set_repl() requires one argument.".into(),
                ));
            }
            let flags = match &args[0] {
                Value::Integer(n) => *n,
                Value::Number(n) => *n as i64,
                _ => -1,
            };
            if !(0..=3).contains(&flags) {
                return Err(mlua::Error::RuntimeError(
                    "Invalid replication flags. Use REPL_AOF, REPL_REPLICA, REPL_ALL or REPL_NONE."
                        .into(),
                ));
            }
            // Writes are logged by effect on each shard; there are no replicas to choose.
            Ok(())
        })?,
    )?;
    redis.raw_set("replicate_commands", lua.create_function(|_, ()| Ok(true))?)?;
    // The debugger (LDB) is not available: as Redis outside a debugging session, no-ops.
    redis.raw_set("breakpoint", lua.create_function(|_, ()| Ok(false))?)?;
    redis.raw_set("debug", lua.create_function(|_, _: MultiValue| Ok(()))?)?;
    redis.raw_set(
        "acl_check_cmd",
        lua.create_function(|lua, args: MultiValue| {
            if !matches!(args.front(), Some(Value::String(_))) {
                return Err(mlua::Error::RuntimeError(
                    "Please specify at least one argument for this redis lib call".into(),
                ));
            }
            let command: Vec<Bytes> = args
                .iter()
                .map(super::call::arg_word)
                .collect::<Option<_>>()
                .ok_or_else(|| mlua::Error::RuntimeError(super::call::BAD_ARGUMENT.into()))?;
            // Any Redis command may be asked about, implemented here or not.
            let Some(id) = crate::acl::catalog::Catalog::get().resolve(&command) else {
                return Err(mlua::Error::RuntimeError(
                    "Invalid command passed to redis.acl_check_cmd()".into(),
                ));
            };
            // The caller's user decides; outside a run every command is allowed.
            Ok(running(lua)
                .and_then(|run| run.host())
                .map_or(true, |host| host.acl_allows(id, &command)))
        })?,
    )?;
    for (name, value) in [
        ("LOG_DEBUG", 0),
        ("LOG_VERBOSE", 1),
        ("LOG_NOTICE", 2),
        ("LOG_WARNING", 3),
        ("REPL_NONE", 0),
        ("REPL_AOF", 1),
        ("REPL_SLAVE", 2),
        ("REPL_REPLICA", 2),
        ("REPL_ALL", 3),
    ] {
        redis.raw_set(name, value)?;
    }
    redis.raw_set("REDIS_VERSION", "7.0.15")?;
    redis.raw_set("REDIS_VERSION_NUM", 0x07000f)?;
    Ok(redis)
}

/// `redis.call` / `redis.pcall`: arguments checked as Redis checks them, then the host runs
/// the command.
pub(crate) fn call(
    lua: &Lua,
    run: &Running,
    args: CallArgs,
    raise: bool,
    suspend: &dyn Fn(bool),
) -> mlua::Result<CallReply> {
    let fail = |text: &str| -> mlua::Result<CallReply> {
        let table = error_table(lua, text.as_bytes())?;
        if raise {
            Err(raise_table(lua, table)?)
        } else {
            Ok(CallReply::Value(Value::Table(table)))
        }
    };
    let command = match args.0 {
        Ok(command) if command.is_empty() => {
            return fail("Please specify at least one argument for this redis lib call")
        }
        Ok(command) => command,
        Err(text) => return fail(text),
    };
    run.host()?
        .call(lua, command, raise, run.resp.get() == 3, suspend)
}

/// The error `redis.call` raises for a Redis error table: the table, with the line of the
/// script that called (Redis's error handler adds it; the reply names it).
pub fn raise_table(lua: &Lua, table: Table) -> mlua::Result<mlua::Error> {
    if let Some(line) = lua.inspect_stack(1, |debug| debug.current_line()).flatten() {
        table.raw_set("line", line)?;
    }
    Ok(mlua::Error::external(LuaErrorValue(Value::Table(table))))
}

/// A Lua value to raise as the error itself (a Redis error table), not as a message.
#[derive(Debug, Clone)]
pub struct LuaErrorValue(pub Value);

impl std::fmt::Display for LuaErrorValue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.0 {
            Value::Table(table) => match table.raw_get::<Option<mlua::LuaString>>("err") {
                Ok(Some(err)) => write!(f, "{}", err.to_string_lossy()),
                _ => write!(f, "error"),
            },
            other => write!(f, "{other:?}"),
        }
    }
}

impl std::error::Error for LuaErrorValue {}

/// `math.random` and `math.randomseed` on Redis's own generator (`redis_lrand48`): the
/// state persists between scripts (random now, as in Redis 7) and a seed replays exactly.
fn install_random(lua: &Lua) -> mlua::Result<()> {
    let state = Rc::new(std::cell::Cell::new(lrand48_seed(now_seed())));
    let math: Table = lua.globals().raw_get("math")?;
    let random_state = state.clone();
    math.raw_set(
        "random",
        lua.create_function(move |_, args: MultiValue| {
            let next = lrand48_next(&random_state);
            let r = (next % 2_147_483_647) as f64 / 2_147_483_647.0;
            let arg = |v: &Value| match v {
                Value::Integer(n) => Ok(*n as f64),
                Value::Number(n) => Ok(*n),
                _ => Err(mlua::Error::RuntimeError(
                    "bad argument to 'random' (number expected)".into(),
                )),
            };
            match args.len() {
                0 => Ok(Value::Number(r)),
                1 => {
                    let u = arg(&args[0])?;
                    if u < 1.0 {
                        return Err(mlua::Error::RuntimeError(
                            "bad argument #1 to 'random' (interval is empty)".into(),
                        ));
                    }
                    Ok(Value::Number((r * u).floor() + 1.0))
                }
                2 => {
                    let (l, u) = (arg(&args[0])?, arg(&args[1])?);
                    if l > u {
                        return Err(mlua::Error::RuntimeError(
                            "bad argument #2 to 'random' (interval is empty)".into(),
                        ));
                    }
                    Ok(Value::Number((r * (u - l + 1.0)).floor() + l))
                }
                _ => Err(mlua::Error::RuntimeError(
                    "wrong number of arguments".into(),
                )),
            }
        })?,
    )?;
    math.raw_set(
        "randomseed",
        lua.create_function(move |_, seed: Value| {
            let seed = match seed {
                Value::Integer(n) => n,
                Value::Number(n) => n as i64,
                Value::String(s) => s
                    .to_str()
                    .ok()
                    .and_then(|s| s.trim().parse().ok())
                    .unwrap_or(0),
                _ => 0,
            };
            state.set(lrand48_seed(seed as u32));
            Ok(())
        })?,
    )?;
    Ok(())
}

fn now_seed() -> u32 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos() ^ d.as_secs() as u32)
}

/// `srand48`: the 48-bit state from a 32-bit seed.
fn lrand48_seed(seed: u32) -> u64 {
    (u64::from(seed) << 16) | 0x330e
}

/// `lrand48`: the next 31-bit number.
fn lrand48_next(state: &std::cell::Cell<u64>) -> u64 {
    let next = (state.get().wrapping_mul(0x5_deec_e66d).wrapping_add(0xb)) & ((1 << 48) - 1);
    state.set(next);
    next >> 17
}

#[cfg(test)]
mod tests {
    use super::*;

    fn eval(env: &Env, body: &str) -> Result<Value, String> {
        let f = env.compile(body.as_bytes())?;
        f.call::<Value>(()).map_err(|e| lua_message(&e))
    }

    #[test]
    fn the_sandbox_refuses_globals_and_writes_to_protected_tables() {
        let env = Env::new().unwrap();
        let err = eval(&env, "return a").unwrap_err();
        assert!(
            err.contains("Script attempted to access nonexistent global variable 'a'"),
            "{err}"
        );
        for body in [
            "a = 10",
            "setmetatable(_G, {})",
            "local g = getmetatable(_G); g.__index = {}",
            "redis = function() return 1 end",
            "_G = {}",
            "redis.call = function() return 1 end",
            "cjson.encode = function() return 1 end",
            "bit.lshift = function() return 1 end",
        ] {
            let err = eval(&env, body).unwrap_err();
            assert!(
                err.contains("Attempt to modify a readonly table"),
                "{body}: {err}"
            );
        }
        for name in [
            "print", "loadfile", "dofile", "newproxy", "getfenv", "setfenv",
        ] {
            let err = eval(&env, &format!("{name}('x')")).unwrap_err();
            assert!(err.contains(&format!("variable '{name}'")), "{err}");
        }
        let err = eval(
            &env,
            "return loadstring(string.dump(function() return 1 end))()",
        )
        .unwrap_err();
        assert!(err.contains("attempt to call a nil value"), "{err}");
        assert!(matches!(
            eval(&env, "local t = {} t.x = 1 return t.x"),
            Ok(Value::Integer(1))
        ));
    }

    #[test]
    fn error_reply_texts_get_a_code() {
        assert_eq!(error_text(b"My Error"), b"ERR My Error");
        assert_eq!(error_text(b"-MY_CODE my msg\r\n"), b"MY_CODE my msg");
        assert_eq!(error_text(b"-CODE"), b"ERR CODE");
        assert_eq!(error_text(b"-"), b"ERR");
    }

    #[test]
    fn seeded_random_replays() {
        let env = Env::new().unwrap();
        let body = "math.randomseed(10); return tostring(math.random())";
        let a = eval(&env, body).unwrap();
        let b = eval(&env, body).unwrap();
        assert_eq!(format!("{a:?}"), format!("{b:?}"));
    }
}
