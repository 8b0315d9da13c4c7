//! Redis 7.0 functions: libraries of Lua code (`#!lua name=lib`) that register functions
//! with `redis.register_function`, kept per node (every shard sees the same libraries) and
//! called with FCALL / FCALL_RO.
//!
//! A library's code runs once to be checked (FUNCTION LOAD, in a state of its own), and again
//! in each shard's Lua state when that shard next runs a script (the [`Libraries`]'
//! generation tells it something changed). While it loads, its globals hold only the library
//! API (`redis.register_function`, `redis.log`, the log levels, the version); the functions
//! it registers later see the scripts' globals, and `redis.register_function` refuses to run
//! outside a load. Both as Redis 7.0 does it, with its error texts.

use std::collections::BTreeMap;
use std::rc::Rc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use mlua::{Function, HookTriggers, Lua, MultiValue, Table, Value, VmState};

use super::env::{lua_message, Env};
use crate::reply::Reply;

/// How long a library's load may run.
const LOAD_TIMEOUT: Duration = Duration::from_millis(500);

/// The flags a function may declare.
const FLAGS: &[&str] = &[
    "no-writes",
    "allow-oom",
    "allow-stale",
    "no-cluster",
    "allow-cross-slot-keys",
];

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FunctionMeta {
    pub name: String,
    pub description: Option<String>,
    pub flags: Vec<String>,
}

impl FunctionMeta {
    pub fn no_writes(&self) -> bool {
        self.flags.iter().any(|f| f == "no-writes")
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Library {
    pub name: String,
    pub code: Bytes,
    pub functions: Vec<FunctionMeta>,
}

/// The node's libraries.
#[derive(Debug, Default)]
pub struct Libraries {
    /// Bumped on every change: shards reload when theirs is older.
    pub generation: u64,
    libraries: BTreeMap<String, Library>,
}

/// FUNCTION RESTORE's policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RestorePolicy {
    Flush,
    Append,
    Replace,
}

impl Libraries {
    /// The library holding `function` (function names are case-insensitive, as in Redis).
    pub fn library_of(&self, function: &str) -> Option<(&Library, &FunctionMeta)> {
        self.libraries.values().find_map(|library| {
            (library.functions.iter())
                .find(|f| f.name.eq_ignore_ascii_case(function))
                .map(|f| (library, f))
        })
    }

    pub fn all(&self) -> impl Iterator<Item = &Library> {
        self.libraries.values()
    }

    pub fn function_count(&self) -> usize {
        self.libraries.values().map(|l| l.functions.len()).sum()
    }

    pub fn library_count(&self) -> usize {
        self.libraries.len()
    }

    /// Adds `library` (already checked); with `replace` an old one of that name goes.
    pub fn add(&mut self, library: Library, replace: bool) -> Result<(), String> {
        let old = self.libraries.get(&library.name);
        if old.is_some() && !replace {
            return Err(format!("ERR Library '{}' already exists", library.name));
        }
        for function in &library.functions {
            if let Some((other, _)) = self.library_of(&function.name) {
                if other.name != library.name {
                    return Err(format!("ERR Function {} already exists", function.name));
                }
            }
        }
        self.libraries.insert(library.name.clone(), library);
        self.generation += 1;
        Ok(())
    }

    pub fn delete(&mut self, name: &str) -> Result<(), String> {
        self.libraries
            .remove(name)
            .map(|_| self.generation += 1)
            .ok_or_else(|| "ERR Library not found".to_string())
    }

    pub fn flush(&mut self) {
        self.libraries.clear();
        self.generation += 1;
    }

    /// FUNCTION DUMP's payload: the libraries' code, versioned and checksummed.
    pub fn dump(&self) -> Bytes {
        payload_of(self.libraries.values().map(|library| &library.code[..]))
    }

    /// FUNCTION RESTORE: the payload's libraries are checked in `checker`, then added with
    /// `policy`; nothing changes if any fails.
    pub fn restore(
        &mut self,
        payload: &[u8],
        policy: RestorePolicy,
        checker: &Checker,
    ) -> Result<(), String> {
        let codes = decode_payload(payload)
            .ok_or_else(|| "ERR payload version or checksum are wrong".to_string())?;
        let mut libraries = Vec::new();
        for code in codes {
            libraries.push(checker.check(&code)?);
        }
        let mut next = match policy {
            RestorePolicy::Flush => Libraries::default(),
            _ => Libraries {
                generation: 0,
                libraries: self.libraries.clone(),
            },
        };
        for library in libraries {
            if policy == RestorePolicy::Append && next.libraries.contains_key(&library.name) {
                return Err(format!("ERR Library {} already exists", library.name));
            }
            if policy == RestorePolicy::Replace {
                // A replaced library's functions may move to the new one.
                next.libraries.remove(&library.name);
            }
            next.add(library, true)?;
        }
        self.libraries = next.libraries;
        self.generation += 1;
        Ok(())
    }

    /// `FUNCTION LIST [WITHCODE] [LIBRARYNAME pattern]`'s reply (RESP2 shape).
    pub fn list(&self, with_code: bool, pattern: Option<&[u8]>) -> Reply {
        let bulk = |s: &str| Reply::Bulk(Bytes::copy_from_slice(s.as_bytes()));
        let mut items = Vec::new();
        for library in self.libraries.values() {
            if let Some(pattern) = pattern {
                if !crate::glob::glob_match(pattern, library.name.as_bytes(), false) {
                    continue;
                }
            }
            let functions = library
                .functions
                .iter()
                .map(|f| {
                    Reply::Array(vec![
                        bulk("name"),
                        bulk(&f.name),
                        bulk("description"),
                        f.description.as_deref().map_or(Reply::NullBulk, bulk),
                        bulk("flags"),
                        // Status strings, as Redis writes them.
                        Reply::Array(
                            f.flags
                                .iter()
                                .map(|flag| Reply::Simple(Bytes::copy_from_slice(flag.as_bytes())))
                                .collect(),
                        ),
                    ])
                })
                .collect();
            let mut entry = vec![
                bulk("library_name"),
                bulk(&library.name),
                bulk("engine"),
                bulk("LUA"),
                bulk("functions"),
                Reply::Array(functions),
            ];
            if with_code {
                entry.push(bulk("library_code"));
                entry.push(Reply::Bulk(library.code.clone()));
            }
            items.push(Reply::Array(entry));
        }
        Reply::Array(items)
    }
}

/// The first byte of the payload corewire-kv wrote before it wrote Redis's (an AOF may hold
/// one): a version byte, then each code with its u32 LE length, then a CRC-32C.
const LEGACY_PAYLOAD_VERSION: u8 = 1;

/// The FUNCTION DUMP payload of libraries with these codes, in Redis 7.0's form (what
/// redis-server's FUNCTION RESTORE takes; also how the libraries are logged and replicated,
/// and how an RDB file's are restored).
pub fn payload_of<'a>(codes: impl IntoIterator<Item = &'a [u8]>) -> Bytes {
    Bytes::from(crate::rdb::function_payload(codes))
}

fn decode_payload(payload: &[u8]) -> Option<Vec<Bytes>> {
    crate::rdb::decode_function_payload(payload).or_else(|| decode_legacy_payload(payload))
}

fn decode_legacy_payload(payload: &[u8]) -> Option<Vec<Bytes>> {
    let (body, crc) = payload.split_at_checked(payload.len().checked_sub(4)?)?;
    if u32::from_le_bytes(crc.try_into().ok()?) != crc32c::crc32c(body) {
        return None;
    }
    let (&version, mut rest) = body.split_first()?;
    if version != LEGACY_PAYLOAD_VERSION {
        return None;
    }
    let mut codes = Vec::new();
    while !rest.is_empty() {
        let (len, tail) = rest.split_at_checked(4)?;
        let len = u32::from_le_bytes(len.try_into().ok()?) as usize;
        let (code, tail) = tail.split_at_checked(len)?;
        codes.push(Bytes::copy_from_slice(code));
        rest = tail;
    }
    Some(codes)
}

/// A library's first line, `#!<engine> name=<name>`.
pub fn parse_metadata(code: &[u8]) -> Result<String, String> {
    let Some(rest) = code.strip_prefix(b"#!") else {
        return Err("ERR Missing library metadata".into());
    };
    let line_end = rest.iter().position(|&b| b == b'\n').unwrap_or(rest.len());
    let line = String::from_utf8_lossy(&rest[..line_end]).into_owned();
    // The engine is what follows `#!` directly; the options follow, space-separated.
    let (engine, options) = line.split_once(' ').unwrap_or((&line, ""));
    if !engine.eq_ignore_ascii_case("lua") {
        return Err(format!("ERR Engine '{engine}' not found"));
    }
    let mut name = None;
    for part in options.split(' ').filter(|p| !p.is_empty()) {
        match part.split_once('=') {
            Some(("name", _)) if name.is_some() => {
                return Err(
                    "ERR Invalid metadata value, name argument was given multiple times".into(),
                )
            }
            Some(("name", value)) => {
                let value = value
                    .strip_prefix('"')
                    .and_then(|v| v.strip_suffix('"'))
                    .unwrap_or(value);
                name = Some(value.to_string())
            }
            _ => return Err(format!("ERR Invalid metadata value given: {part}")),
        }
    }
    let name = name.ok_or_else(|| "ERR Library name was not given".to_string())?;
    if !valid_name(&name) {
        return Err("ERR Library names can only contain letters, numbers, or underscores(_) and must be at least one character long".into());
    }
    Ok(name)
}

fn valid_name(name: &str) -> bool {
    !name.is_empty() && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

/// The functions a load registered, as it registers them.
#[derive(Default)]
struct Registering {
    functions: Vec<(FunctionMeta, Function)>,
}

/// The library API's Lua side: a load environment whose globals are only `redis` (the
/// library API), and a runtime environment (the scripts' globals) for what it registers.
const LIBRARY_ENV: &str = r#"
local view, api, mode = ...
local error, tostring, rawget, setmetatable = error, tostring, rawget, setmetatable
local function refuse() error("Attempt to modify a readonly table", 2) end
local function missing(name)
    error("Script attempted to access nonexistent global variable '" .. tostring(name) .. "'", 3)
end
local api_view = setmetatable({}, {
    __index = function(_, name)
        local value = rawget(api, name)
        if value == nil then missing(name) end
        return value
    end,
    __newindex = refuse,
    __metatable = false,
})
local load_globals = {redis = api_view}
return setmetatable({}, {
    __index = function(_, name)
        if mode.loading then
            local value = load_globals[name]
            if value == nil then missing(name) end
            return value
        end
        return view[name]
    end,
    __newindex = refuse,
    __metatable = false,
})
"#;

/// The library environment of one Lua state: the switchable globals and the load flag.
pub struct LibraryEnv {
    env: Table,
    mode: Table,
}

impl LibraryEnv {
    pub fn new(base: &Env) -> mlua::Result<LibraryEnv> {
        let lua = &base.lua;
        let api = lua.create_table()?;
        api.raw_set("register_function", lua.create_function(register_function)?)?;
        let redis: Table = lua.globals().raw_get("redis")?;
        // `redis` in the globals is the read-only proxy: read through it.
        for name in [
            "log",
            "LOG_DEBUG",
            "LOG_VERBOSE",
            "LOG_NOTICE",
            "LOG_WARNING",
            "REDIS_VERSION",
            "REDIS_VERSION_NUM",
        ] {
            api.raw_set(name, redis.get::<Value>(name)?)?;
        }
        let mode = lua.create_table()?;
        mode.raw_set("loading", false)?;
        let env: Table = lua.load(LIBRARY_ENV).set_name("=library").call((
            base.view.clone(),
            api,
            mode.clone(),
        ))?;
        Ok(LibraryEnv { env, mode })
    }

    /// Runs `code` (a library, metadata line included: Lua reads `#!...` as a comment only
    /// on the first line of a file, so it is blanked) and returns its functions.
    pub fn load(
        &self,
        lua: &Lua,
        code: &[u8],
        timeout: Option<Duration>,
    ) -> Result<Vec<(FunctionMeta, Function)>, String> {
        let body = strip_shebang(code);
        let chunk = lua
            .load(&body[..])
            .set_name("@user_function")
            .set_environment(self.env.clone())
            .into_function()
            .map_err(|e| format!("ERR Error compiling function: {}", lua_message(&e)))?;
        lua.set_app_data(Registering::default());
        let _ = self.mode.raw_set("loading", true);
        if let Some(limit) = timeout {
            let started = Instant::now();
            lua.set_hook(
                HookTriggers::new().every_nth_instruction(10_000),
                move |_, _| {
                    if started.elapsed() > limit {
                        return Err(mlua::Error::RuntimeError("FUNCTION LOAD timeout".into()));
                    }
                    Ok(VmState::Continue)
                },
            )
            .ok();
        }
        let result = chunk.call::<()>(());
        if timeout.is_some() {
            lua.remove_hook();
        }
        let _ = self.mode.raw_set("loading", false);
        let registered = lua.remove_app_data::<Registering>().unwrap_or_default();
        if let Err(error) = result {
            let message = lua_message(&error);
            if message.contains("FUNCTION LOAD timeout") {
                return Err("ERR FUNCTION LOAD timeout".into());
            }
            return Err(format!("ERR Error registering functions: {message}"));
        }
        if registered.functions.is_empty() {
            return Err("ERR No functions registered".into());
        }
        Ok(registered.functions)
    }
}

/// The library code with its first line blanked (kept as a line, so line numbers stay).
fn strip_shebang(code: &[u8]) -> Vec<u8> {
    let end = code.iter().position(|&b| b == b'\n').unwrap_or(code.len());
    let mut body = Vec::with_capacity(code.len());
    body.extend_from_slice(&code[end..]);
    body
}

fn reg_error(text: &str) -> mlua::Error {
    mlua::Error::RuntimeError(text.into())
}

/// `redis.register_function(name, callback)` or `redis.register_function{function_name=...,
/// callback=..., flags={...}, description=...}`.
fn register_function(lua: &Lua, args: MultiValue) -> mlua::Result<()> {
    if lua.app_data_ref::<Registering>().is_none() {
        return Err(reg_error(
            "redis.register_function can only be called on FUNCTION LOAD command",
        ));
    }
    let (name, callback, description, flags) = match args.len() {
        1 => {
            let Value::Table(named) = &args[0] else {
                return Err(reg_error("calling redis.register_function with a single argument is only applicable to Lua table (representing named arguments)."));
            };
            let mut name = None;
            let mut callback = None;
            let mut description = None;
            let mut flags = Vec::new();
            for pair in named.pairs::<Value, Value>() {
                let (key, value) = pair?;
                let Value::String(key) = key else {
                    return Err(reg_error(
                        "named argument key given to redis.register_function is not a string",
                    ));
                };
                match &*key.to_string_lossy() {
                    "function_name" => match value {
                        Value::String(s) => name = Some(s.to_string_lossy()),
                        _ => return Err(reg_error("function_name argument given to redis.register_function must be a string")),
                    },
                    "description" => match value {
                        Value::String(s) => description = Some(s.to_string_lossy()),
                        _ => return Err(reg_error("description argument given to redis.register_function must be a string")),
                    },
                    "callback" => match value {
                        Value::Function(f) => callback = Some(f),
                        _ => return Err(reg_error("callback argument given to redis.register_function must be a function")),
                    },
                    "flags" => match value {
                        Value::Table(t) => flags = read_flags(&t)?,
                        _ => return Err(reg_error("flags argument to redis.register_function must be a table representing function flags")),
                    },
                    _ => return Err(reg_error("unknown argument given to redis.register_function")),
                }
            }
            let name = name.ok_or_else(|| {
                reg_error("redis.register_function must get a function name argument")
            })?;
            let callback = callback
                .ok_or_else(|| reg_error("redis.register_function must get a callback argument"))?;
            (name, callback, description, flags)
        }
        2 => {
            let Value::String(name) = &args[0] else {
                return Err(reg_error(
                    "first argument to redis.register_function must be a string",
                ));
            };
            let Value::Function(callback) = &args[1] else {
                return Err(reg_error(
                    "second argument to redis.register_function must be a function",
                ));
            };
            (name.to_string_lossy(), callback.clone(), None, Vec::new())
        }
        _ => {
            return Err(reg_error(
                "wrong number of arguments to redis.register_function",
            ))
        }
    };
    if !valid_name(&name) {
        return Err(reg_error("Library names can only contain letters, numbers, or underscores(_) and must be at least one character long"));
    }
    let mut registering = lua.app_data_mut::<Registering>().ok_or_else(|| {
        reg_error("redis.register_function can only be called on FUNCTION LOAD command")
    })?;
    if (registering.functions.iter()).any(|(meta, _)| meta.name.eq_ignore_ascii_case(&name)) {
        return Err(reg_error("Function already exists in the library"));
    }
    registering.functions.push((
        FunctionMeta {
            name,
            description,
            flags,
        },
        callback,
    ));
    Ok(())
}

fn read_flags(table: &Table) -> mlua::Result<Vec<String>> {
    let mut flags = Vec::new();
    for i in 1..=table.raw_len() {
        match table.raw_get::<Value>(i)? {
            Value::String(flag) if FLAGS.contains(&&*flag.to_string_lossy()) => {
                flags.push(flag.to_string_lossy())
            }
            _ => return Err(reg_error("unknown flag given")),
        }
    }
    Ok(flags)
}

/// Checks libraries for FUNCTION LOAD and RESTORE in a Lua state of its own, never one a
/// script may be suspended in.
pub struct Checker {
    env: Env,
    libraries: LibraryEnv,
}

impl Checker {
    pub fn new() -> mlua::Result<Checker> {
        let env = Env::new()?;
        let libraries = LibraryEnv::new(&env)?;
        Ok(Checker { env, libraries })
    }

    /// Runs the library's code as FUNCTION LOAD does; its name and functions, or Redis's
    /// error.
    pub fn check(&self, code: &Bytes) -> Result<Library, String> {
        let name = parse_metadata(code)?;
        let functions = self
            .libraries
            .load(&self.env.lua, code, Some(LOAD_TIMEOUT))?;
        Ok(Library {
            name,
            code: code.clone(),
            functions: functions.into_iter().map(|(meta, _)| meta).collect(),
        })
    }

    /// SCRIPT LOAD's check: the body compiles.
    pub fn compile(&self, body: &[u8]) -> Result<(), String> {
        self.env.compile(body).map(|_| ())
    }
}

/// A shard's loaded copy of the libraries: callable functions by name.
#[derive(Default)]
pub struct Loaded {
    pub generation: u64,
    /// By lowercase name.
    pub functions: std::collections::HashMap<String, (Rc<FunctionMeta>, Function)>,
}

impl Loaded {
    /// Loads every library of `libraries` into `lua` (through `env`).
    pub fn load(env: &LibraryEnv, lua: &Lua, libraries: &Libraries) -> Loaded {
        let mut loaded = Loaded {
            generation: libraries.generation,
            functions: Default::default(),
        };
        for library in libraries.all() {
            match env.load(lua, &library.code, None) {
                Ok(functions) => {
                    for (meta, function) in functions {
                        loaded
                            .functions
                            .insert(meta.name.to_ascii_lowercase(), (Rc::new(meta), function));
                    }
                }
                Err(error) => {
                    tracing::error!(library = %library.name, %error, "a checked library did not load");
                }
            }
        }
        loaded
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn payloads_are_redis_s_and_the_legacy_form_still_reads() {
        let long = "#!lua name=long\n".to_string() + &"-- padding\n".repeat(20);
        let codes = [code("#!lua name=a\nreturn 1"), code(&long)];
        let payload = payload_of(codes.iter().map(|c| &c[..]));
        // FUNCTION2, the code as an RDB string, RDB version 10, CRC-64.
        assert_eq!(payload[0], crate::rdb::opcode::FUNCTION2);
        assert_eq!(&payload[payload.len() - 10..payload.len() - 8], &[10, 0]);
        assert_eq!(decode_payload(&payload), Some(codes.to_vec()));
        let empty = payload_of([]);
        assert_eq!(empty.len(), 10);
        assert_eq!(decode_payload(&empty), Some(Vec::new()));
        let mut bad = payload.to_vec();
        bad[3] ^= 1;
        assert_eq!(decode_payload(&bad), None);
        // What earlier versions logged: a version byte, u32-prefixed codes, a CRC-32C.
        let mut legacy = vec![LEGACY_PAYLOAD_VERSION];
        legacy.extend_from_slice(&(codes[0].len() as u32).to_le_bytes());
        legacy.extend_from_slice(&codes[0]);
        let crc = crc32c::crc32c(&legacy);
        legacy.extend_from_slice(&crc.to_le_bytes());
        assert_eq!(decode_payload(&legacy), Some(vec![codes[0].clone()]));
    }

    fn code(text: &str) -> Bytes {
        Bytes::from(text.to_owned())
    }

    #[test]
    fn metadata_is_checked_as_redis_checks_it() {
        assert_eq!(parse_metadata(b"#!lua name=mylib\n"), Ok("mylib".into()));
        assert_eq!(parse_metadata(b"#!LUA name=x"), Ok("x".into()));
        assert!(parse_metadata(b"#!bad_engine name=x")
            .unwrap_err()
            .contains("Engine 'bad_engine' not found"));
        assert!(parse_metadata(b"return 1")
            .unwrap_err()
            .contains("Missing library metadata"));
        assert!(parse_metadata(b"#!lua name=bad\0name")
            .unwrap_err()
            .contains("Library names can only contain"));
    }

    #[test]
    fn a_library_loads_checks_and_round_trips() {
        let checker = Checker::new().unwrap();
        let library = checker
            .check(&code(
                "#!lua name=lib1\nlocal function add1(a) return a + 1 end\nredis.register_function('f1', function(keys, args) return add1(1) end)\nredis.register_function{function_name='f2', callback=function() return 2 end, flags={'no-writes'}, description='d'}",
            ))
            .unwrap();
        assert_eq!(library.name, "lib1");
        assert_eq!(library.functions.len(), 2);
        assert!(library.functions[1].no_writes());
        for (body, wanted) in [
            ("#!lua name=l\nreturn 1", "No functions registered"),
            (
                "#!lua name=l\nreturn math.random()",
                "nonexistent global variable 'math'",
            ),
            (
                "#!lua name=l\nreturn redis.call('ping')",
                "nonexistent global variable 'call'",
            ),
            ("#!lua name=l\na = 1", "Attempt to modify a readonly table"),
            (
                "#!lua name=l\nredis.register_function('f', 1)",
                "second argument to redis.register_function must be a function",
            ),
            ("#!lua name=l\nbad script", "Error compiling function"),
            (
                "#!lua name=l\nlocal a = 1 while 1 do a = a + 1 end",
                "FUNCTION LOAD timeout",
            ),
        ] {
            let error = checker.check(&code(body)).unwrap_err();
            assert!(error.contains(wanted), "{body}: {error}");
        }
        let mut libraries = Libraries::default();
        libraries.add(library.clone(), false).unwrap();
        assert!(libraries
            .add(library.clone(), false)
            .unwrap_err()
            .contains("already exists"));
        let payload = libraries.dump();
        let mut restored = Libraries::default();
        restored
            .restore(&payload, RestorePolicy::Append, &checker)
            .unwrap();
        assert_eq!(restored.library_of("f2").unwrap().0.name, "lib1");
        assert!(restored
            .restore(b"bad", RestorePolicy::Flush, &checker)
            .unwrap_err()
            .contains("payload version or checksum are wrong"));
    }
}
