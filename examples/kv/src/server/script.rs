//! Scripts on a shard (EVAL, FCALL and friends; the family is [`crate::scripting`]).
//!
//! A script runs on the shard of its first key (without keys: the connection's shard),
//! as a program holding the shards of its keys ([`Held`], the transaction lock protocol, so
//! nothing interleaves with it on those shards). The Lua code itself runs on a stack of its
//! own (a stackful coroutine), which lets two things suspend it without Lua knowing: a
//! `redis.call` whose reply comes from another shard, or from the AOF's durability gate,
//! waits for it while the shard serves everyone else; and an instruction-count hook gives
//! the shard a turn every [`SLICE`] of running time, so a long script does not freeze its
//! shard: other connections there are answered (BUSY once the script runs past
//! `busy-reply-threshold`, as Redis answers) and SCRIPT KILL / FUNCTION KILL reach it. Lua
//! 5.1 cannot yield from a hook (and mlua refuses it), hence the separate stack: the hook
//! simply switches back to the shard's stack and is resumed later.
//!
//! The script cache and the function libraries are the node's ([`ScriptingShared`]): every
//! shard compiles from them into its own Lua state, and a shard whose state is older than
//! SCRIPT FLUSH, FUNCTION LOAD/DELETE/FLUSH/RESTORE starts a fresh one (or reloads the
//! libraries) before its next script.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use bytes::Bytes;
use corewire::runtime::{spawn_local, yield_now};
use corosensei::stack::DefaultStack;
use corosensei::{Coroutine, CoroutineResult, Yielder};
use mlua::{Function, HookTriggers, Lua, Value, VmState};

use super::forward::Job;
use super::shard::{current, Shard};
use super::sink::Origin;
use super::txn::held::Held;
use super::txn::multikey;
use crate::command::{Command, CommandError};
use crate::reply::Reply;
use crate::routing::{route, shard_of, FanOut, Route};
use crate::scripting::convert::{self, ReplyMode};
use crate::scripting::env::{error_table, lua_message, Env, Host, LuaErrorValue, Running};
use crate::scripting::functions::{Checker, Libraries, LibraryEnv, Loaded};
use crate::scripting::{sha1_hex, ScriptCommand, ScriptOp};
use crate::session::resp3::shape_of;

/// Running time after which a script lets its shard have a turn.
const SLICE: Duration = Duration::from_millis(2);
/// Lua instructions between two looks at the clock.
const HOOK_EVERY: u32 = 1000;
/// The coroutine's stack: Lua's C recursion is bounded (200 C calls), and so are the
/// conversions' depths.
const STACK_BYTES: usize = 1 << 20;
/// Stacks kept for reuse per shard.
const SPARE_STACKS: usize = 4;

const KILLED: &str = "ERR Script killed by user with SCRIPT KILL...";
const KILLED_FUNCTION: &str = "ERR Script killed by user with FUNCTION KILL...";
const SUSPEND: &str = "__kv_suspend";

/// The node's scripting state, shared by every shard.
#[derive(Default)]
pub(crate) struct ScriptingShared {
    cache: Mutex<ScriptCache>,
    pub libraries: Mutex<Libraries>,
    /// The scripts running past the busy threshold.
    running: Mutex<Vec<Arc<RunInfo>>>,
}

impl ScriptingShared {
    pub fn cached_scripts(&self) -> usize {
        self.cache.lock().map_or(0, |cache| cache.bodies.len())
    }
}

#[derive(Default)]
struct ScriptCache {
    /// Bumped by SCRIPT FLUSH: shards start a fresh Lua state.
    generation: u64,
    bodies: HashMap<String, Bytes>,
}

/// A script running somewhere in the node; once past the busy threshold it is listed for
/// SCRIPT KILL and FUNCTION STATS.
struct RunInfo {
    function: Option<String>,
    args: Vec<Bytes>,
    started: Instant,
    kill: AtomicBool,
    wrote: AtomicBool,
    busy: AtomicBool,
}

impl RunInfo {
    fn elapsed_ms(&self) -> u64 {
        self.started.elapsed().as_millis() as u64
    }
}

/// A shard's scripting state: its Lua state (made on first use), a separate one for checking
/// SCRIPT LOAD and FUNCTION LOAD, and spare coroutine stacks.
#[derive(Default)]
pub(crate) struct ScriptShard {
    engine: RefCell<Option<Rc<Engine>>>,
    checker: RefCell<Option<Rc<Checker>>>,
    stacks: RefCell<Vec<DefaultStack>>,
}

struct Engine {
    env: Env,
    libraries: LibraryEnv,
    generation: u64,
    scripts: RefCell<HashMap<String, Function>>,
    functions: RefCell<Loaded>,
}

impl ScriptShard {
    fn checker(&self) -> Result<Rc<Checker>, Reply> {
        let mut slot = self.checker.borrow_mut();
        if slot.is_none() {
            *slot = Some(Rc::new(Checker::new().map_err(lua_failure)?));
        }
        Ok(slot.clone().expect("just set"))
    }

    /// This shard's Lua state, fresh if SCRIPT FLUSH ran since it was made. Only a script
    /// holding this shard calls it, so no other script is suspended in the state it drops.
    fn engine(&self, generation: u64) -> Result<Rc<Engine>, Reply> {
        let mut slot = self.engine.borrow_mut();
        if let Some(engine) = slot.as_ref().filter(|e| e.generation == generation) {
            return Ok(engine.clone());
        }
        let env = Env::new().map_err(lua_failure)?;
        let libraries = LibraryEnv::new(&env).map_err(lua_failure)?;
        let engine = Rc::new(Engine {
            env,
            libraries,
            generation,
            scripts: RefCell::new(HashMap::new()),
            functions: RefCell::new(Loaded::default()),
        });
        *slot = Some(engine.clone());
        Ok(engine)
    }

    fn take_stack(&self) -> DefaultStack {
        self.stacks
            .borrow_mut()
            .pop()
            .or_else(|| DefaultStack::new(STACK_BYTES).ok())
            .unwrap_or_default()
    }

    fn put_stack(&self, stack: DefaultStack) {
        let mut stacks = self.stacks.borrow_mut();
        if stacks.len() < SPARE_STACKS {
            stacks.push(stack);
        }
    }
}

fn lua_failure(error: mlua::Error) -> Reply {
    Reply::error(format!("ERR Lua: {}", lua_message(&error)))
}

/// What a script run needs, checked on the connection's shard and again where it runs.
#[derive(Clone)]
struct Prepared {
    what: What,
    read_only: bool,
    /// Refused at start when the shard is past its memory limit: a script that declares
    /// flags (shebang or function) and neither `no-writes` nor `allow-oom`, as Redis 7.
    deny_oom: bool,
    keys: Vec<Bytes>,
    argv: Vec<Bytes>,
    /// The shards to hold, ascending, and where the script runs.
    lock: Vec<usize>,
    exec: usize,
    /// Redis's name for the run in errors: the script's SHA1 or the function's name.
    label: String,
    args: Vec<Bytes>,
}

#[derive(Clone)]
enum What {
    Eval { sha: String, body: Bytes },
    Function { name: String },
}

impl What {
    fn is_function(&self) -> bool {
        matches!(self, What::Function { .. })
    }
}

/// A script body's `#!lua flags=...` line: Redis 7's EVAL shebang.
fn shebang_flags(body: &[u8]) -> Result<Option<Vec<String>>, Reply> {
    let Some(rest) = body.strip_prefix(b"#!") else {
        return Ok(None);
    };
    let end = rest.iter().position(|&b| b == b'\n').unwrap_or(rest.len());
    let line = String::from_utf8_lossy(&rest[..end]).into_owned();
    let mut parts = line.split(' ').filter(|p| !p.is_empty());
    let engine = parts.next().unwrap_or("");
    if engine != "lua" {
        return Err(Reply::error(format!(
            "ERR Unexpected engine in script shebang: {engine}"
        )));
    }
    let mut flags = Vec::new();
    for part in parts {
        let Some(list) = part.strip_prefix("flags=") else {
            return Err(Reply::error(format!(
                "ERR Unknown lua shebang option: {part}"
            )));
        };
        for flag in list.split(',').filter(|f| !f.is_empty()) {
            if !matches!(
                flag,
                "no-writes" | "allow-oom" | "allow-stale" | "no-cluster" | "allow-cross-slot-keys"
            ) {
                return Err(Reply::error(format!(
                    "ERR Unexpected flag in script shebang: {flag}"
                )));
            }
            flags.push(flag.to_string());
        }
    }
    Ok(Some(flags))
}

/// The body Lua compiles: a shebang line blanked (kept as a line for line numbers).
fn lua_body(body: &[u8]) -> Vec<u8> {
    if body.starts_with(b"#!") {
        let end = body.iter().position(|&b| b == b'\n').unwrap_or(body.len());
        body[end..].to_vec()
    } else {
        body.to_vec()
    }
}

fn prepare(
    shard: &Shard,
    command: &ScriptCommand,
    exec_override: Option<usize>,
) -> Result<Prepared, Reply> {
    let is_function = matches!(command.op, ScriptOp::FCall | ScriptOp::FCallRo);
    let numkeys = match command.numkeys() {
        Err(CommandError::Text(text)) if is_function && text.contains("not an integer") => {
            return Err(Reply::error("ERR Bad number of keys provided"))
        }
        other => other.map_err(Reply::from)?,
    };
    let scripting = &shard.shared.scripting;
    let mut read_only = command.op.is_read_only();
    let mut deny_oom = false;
    let declared = |flags: &[String], read_only: &mut bool, deny_oom: &mut bool| {
        let no_writes = flags.iter().any(|f| f == "no-writes");
        *read_only |= no_writes;
        *deny_oom = !no_writes && !flags.iter().any(|f| f == "allow-oom");
    };
    let (what, label) = match command.op {
        ScriptOp::Eval | ScriptOp::EvalRo => {
            let body = command.args[0].clone();
            if let Some(flags) = shebang_flags(&body)? {
                declared(&flags, &mut read_only, &mut deny_oom);
            }
            let sha = sha1_hex(&body);
            (
                What::Eval {
                    sha: sha.clone(),
                    body,
                },
                sha,
            )
        }
        ScriptOp::EvalSha | ScriptOp::EvalShaRo => {
            let sha = String::from_utf8_lossy(&command.args[0]).to_ascii_lowercase();
            let body = (sha.len() == 40)
                .then(|| scripting.cache.lock().ok()?.bodies.get(&sha).cloned())
                .flatten()
                .ok_or_else(|| Reply::error("NOSCRIPT No matching script. Please use EVAL."))?;
            if let Some(flags) = shebang_flags(&body)? {
                declared(&flags, &mut read_only, &mut deny_oom);
            }
            (
                What::Eval {
                    sha: sha.clone(),
                    body,
                },
                sha,
            )
        }
        _ => {
            let name = String::from_utf8_lossy(&command.args[0]).into_owned();
            let libraries = scripting.libraries.lock().map_err(|_| poisoned())?;
            let (_, meta) = libraries
                .library_of(&name)
                .ok_or_else(|| Reply::error("ERR Function not found"))?;
            if command.op == ScriptOp::FCallRo && !meta.no_writes() {
                return Err(Reply::error(
                    "ERR Can not execute a script with write flag using *_ro command.",
                ));
            }
            declared(&meta.flags, &mut read_only, &mut deny_oom);
            (What::Function { name: name.clone() }, name)
        }
    };
    let keys: Vec<Bytes> = command.args[2..2 + numkeys].to_vec();
    let argv: Vec<Bytes> = command.args[2 + numkeys..].to_vec();
    let count = shard.count;
    let mut lock: Vec<usize> = keys.iter().map(|key| shard_of(key, count)).collect();
    let exec = exec_override.unwrap_or_else(|| lock.first().copied().unwrap_or(shard.id));
    if keys.is_empty() && !shard.shared.cluster_enabled {
        // It may touch any key: it holds every shard, as a script runs alone in Redis.
        lock = (0..count).collect();
    }
    lock.push(exec);
    lock.sort_unstable();
    lock.dedup();
    let mut args = vec![Bytes::from_static(command.op.name().as_bytes())];
    args.extend(command.args.iter().cloned());
    Ok(Prepared {
        what,
        read_only,
        deny_oom,
        keys,
        argv,
        lock,
        exec,
        label,
        args,
    })
}

fn poisoned() -> Reply {
    Reply::error("ERR internal error: scripting state poisoned")
}

/// A scripting command from a connection of `shard` (request `origin`): answered now, or
/// (a script run) later through the connection's sink.
pub(crate) fn dispatch(shard: &Shard, origin: Origin, command: ScriptCommand) -> Option<Reply> {
    if !command.op.runs_script() {
        return Some(admin(shard, command));
    }
    let prepared = match prepare(shard, &command, None) {
        Ok(prepared) => prepared,
        Err(reply) => return Some(reply),
    };
    if prepared.exec == shard.id {
        let reply = start(current(), origin, prepared);
        if reply.is_none() {
            shard.txn.hold_back(origin.sink, origin.seq);
        }
        return reply;
    }
    // It runs where its first key lives; this connection reads nothing more until it ends.
    shard.txn.hold_back(origin.sink, origin.seq);
    shard.forward.push_job(
        prepared.exec,
        Job {
            origin,
            command: Command::Script(command),
        },
    );
    None
}

/// A script run forwarded to this shard (its first key's).
pub(crate) fn run_here(shard: &Shard, origin: Origin, command: ScriptCommand) -> Option<Reply> {
    match prepare(shard, &command, Some(shard.id)) {
        Ok(prepared) => start(current(), origin, prepared),
        Err(reply) => Some(reply),
    }
}

/// Starts a run on this shard: its reply at once if it finished without waiting, else
/// delivered to `origin` when done.
fn start(shard: Rc<Shard>, origin: Origin, prepared: Prepared) -> Option<Reply> {
    let mut task: Pin<Box<dyn Future<Output = Reply>>> = Box::pin({
        let shard = shard.clone();
        async move {
            let held = Rc::new(Held::new(shard.clone()));
            held.lock(&prepared.lock, None).await;
            let reply = run_held(&shard, &held, prepared).await;
            held.release();
            reply
        }
    });
    // Most scripts hold only this shard and find it free: they finish in this first poll.
    let mut cx = Context::from_waker(Waker::noop());
    if let Poll::Ready(reply) = task.as_mut().poll(&mut cx) {
        return Some(reply);
    }
    spawn_local(async move {
        let reply = task.await;
        shard.deliver(origin, reply);
    });
    None
}

/// Runs a script inside a transaction's program (`held` holds every shard it declared, and
/// this shard, where it runs).
pub(crate) async fn run_in_transaction(
    shard: &Rc<Shard>,
    held: &Rc<Held>,
    command: ScriptCommand,
) -> Reply {
    let prepared = match prepare(shard, &command, Some(shard.id)) {
        Ok(prepared) => prepared,
        Err(reply) => return reply,
    };
    run_held(shard, held, prepared).await
}

/// The shards a script run inside a transaction needs held (with the transaction's shard).
pub(crate) fn transaction_shards(shard: &Shard, command: &ScriptCommand) -> Vec<usize> {
    match prepare(shard, command, Some(shard.id)) {
        Ok(prepared) => prepared.lock,
        Err(_) => vec![shard.id],
    }
}

/// What the coroutine asks of the task driving it.
enum Suspend {
    /// Give the shard a turn, then resume.
    Slice,
    /// Await the host's pending future, then resume with its reply in the host.
    Future,
}

async fn run_held(shard: &Rc<Shard>, held: &Rc<Held>, prepared: Prepared) -> Reply {
    let scripting = &shard.shared.scripting;
    let generation = match scripting.cache.lock() {
        Ok(cache) => cache.generation,
        Err(_) => return poisoned(),
    };
    let engine = match shard.scripts.engine(generation) {
        Ok(engine) => engine,
        Err(reply) => return reply,
    };
    if let Err(reply) = engine.prepare(scripting, &prepared) {
        return reply;
    }
    if prepared.deny_oom && shard.with_store(|store| store.over_memory_limit()) {
        return CommandError::OutOfMemory.into();
    }
    let info = Arc::new(RunInfo {
        function: match &prepared.what {
            What::Function { name } => Some(name.clone()),
            What::Eval { .. } => None,
        },
        args: prepared.args.clone(),
        started: Instant::now(),
        kill: AtomicBool::new(false),
        wrote: AtomicBool::new(false),
        busy: AtomicBool::new(false),
    });
    let host = Rc::new(ScriptHost {
        shard: shard.clone(),
        held: held.clone(),
        info: info.clone(),
        read_only: prepared.read_only,
        pending: RefCell::new(None),
        result: RefCell::new(None),
        run_started: Cell::new(Instant::now()),
    });
    let reply = drive(shard, &engine, &host, prepared).await;
    if info.busy.load(Ordering::Relaxed) {
        if let Ok(mut running) = scripting.running.lock() {
            running.retain(|other| !Arc::ptr_eq(other, &info));
        }
        shard
            .shared
            .session
            .script_busy
            .leave(info.function.is_some());
    }
    reply
}

impl Engine {
    /// Compiles the script (caching it, and the body node-wide for EVALSHA) or loads the
    /// libraries if they changed.
    fn prepare(&self, scripting: &ScriptingShared, prepared: &Prepared) -> Result<(), Reply> {
        match &prepared.what {
            What::Eval { sha, body } => {
                if self.scripts.borrow().contains_key(sha) {
                    return Ok(());
                }
                let function = self.env.compile(&lua_body(body)).map_err(Reply::error)?;
                self.scripts.borrow_mut().insert(sha.clone(), function);
                if let Ok(mut cache) = scripting.cache.lock() {
                    cache
                        .bodies
                        .entry(sha.clone())
                        .or_insert_with(|| body.clone());
                }
                Ok(())
            }
            What::Function { .. } => {
                let libraries = scripting.libraries.lock().map_err(|_| poisoned())?;
                if self.functions.borrow().generation != libraries.generation {
                    let loaded = Loaded::load(&self.libraries, &self.env.lua, &libraries);
                    *self.functions.borrow_mut() = loaded;
                }
                Ok(())
            }
        }
    }
}

/// A coroutine that finishes the script if it is dropped unfinished (the server stops): it
/// is told to stop at each resume rather than unwound through Lua's C frames.
struct Run {
    coroutine: Option<Coroutine<(), Suspend, Reply, DefaultStack>>,
    host: Rc<ScriptHost>,
}

impl Drop for Run {
    fn drop(&mut self) {
        let Some(mut coroutine) = self.coroutine.take() else {
            return;
        };
        self.host.info.kill.store(true, Ordering::Relaxed);
        for _ in 0..10_000 {
            if coroutine.done() {
                return;
            }
            *self.host.result.borrow_mut() = Some(Reply::error(KILLED));
            if let CoroutineResult::Return(_) = coroutine.resume(()) {
                return;
            }
        }
        // A script that keeps catching its own end: its stack is leaked, not unwound.
        std::mem::forget(coroutine);
    }
}

async fn drive(
    shard: &Rc<Shard>,
    engine: &Rc<Engine>,
    host: &Rc<ScriptHost>,
    prepared: Prepared,
) -> Reply {
    let stack = shard.scripts.take_stack();
    let body_engine = engine.clone();
    let body_host = host.clone();
    let coroutine = Coroutine::with_stack(stack, move |yielder: &Yielder<(), Suspend>, ()| {
        run_script(yielder, &body_engine, &body_host, &prepared)
    });
    let mut run = Run {
        coroutine: Some(coroutine),
        host: host.clone(),
    };
    loop {
        let step = match run.coroutine.as_mut() {
            Some(coroutine) => coroutine.resume(()),
            None => return Reply::error("ERR internal error: script ended twice"),
        };
        match step {
            CoroutineResult::Yield(Suspend::Slice) => {
                yield_now().await;
                host.run_started.set(Instant::now());
            }
            CoroutineResult::Yield(Suspend::Future) => {
                let pending = host.pending.borrow_mut().take();
                let reply = match pending {
                    Some(future) => future.await,
                    None => Reply::error("ERR internal error: nothing to wait for"),
                };
                *host.result.borrow_mut() = Some(reply);
                host.run_started.set(Instant::now());
            }
            CoroutineResult::Return(reply) => {
                if let Some(coroutine) = run.coroutine.take() {
                    shard.scripts.put_stack(coroutine.into_stack());
                }
                return reply;
            }
        }
    }
}

/// The script itself, on the coroutine's stack.
fn run_script(
    yielder: &Yielder<(), Suspend>,
    engine: &Engine,
    host: &Rc<ScriptHost>,
    prepared: &Prepared,
) -> Reply {
    let lua = engine.env.lua.clone();
    lua.set_app_data(Rc::new(Running {
        host: host.clone() as Rc<dyn Host>,
        resp: Cell::new(2),
    }));
    let suspend_now = |future: bool| {
        yielder.suspend(if future {
            Suspend::Future
        } else {
            Suspend::Slice
        });
    };
    let outcome = lua.scope(|scope| {
        let suspend = scope.create_function(|_, future: bool| {
            suspend_now(future);
            Ok(())
        })?;
        lua.set_named_registry_value(SUSPEND, suspend)?;
        // This run's redis.call / redis.pcall: they suspend the script directly (calling a
        // Lua function to suspend would need stack slots a call with 8000 arguments lacks).
        let call = scope.create_function(|lua, args: mlua::MultiValue| {
            crate::scripting::env::call(lua, args, true, &suspend_now)
        })?;
        let pcall = scope.create_function(|lua, args: mlua::MultiValue| {
            crate::scripting::env::call(lua, args, false, &suspend_now)
        })?;
        engine.env.redis.raw_set("call", call)?;
        engine.env.redis.raw_set("pcall", pcall)?;
        let hook_host = host.clone();
        lua.set_hook(
            HookTriggers::new().every_nth_instruction(HOOK_EVERY),
            move |lua, _debug| hook_host.hook(lua),
        )?;
        let result = call_script(&lua, engine, prepared);
        lua.remove_hook();
        lua.unset_named_registry_value(SUSPEND)?;
        Ok(result)
    });
    lua.remove_app_data::<Rc<Running>>();
    match outcome {
        Ok(reply) => reply,
        Err(error) => lua_failure(error),
    }
}

fn call_script(lua: &Lua, engine: &Engine, prepared: &Prepared) -> Reply {
    let make_array = |items: &[Bytes]| -> mlua::Result<mlua::Table> {
        let table = lua.create_table_with_capacity(items.len(), 0)?;
        for (i, item) in items.iter().enumerate() {
            table.raw_set(i + 1, lua.create_string(item)?)?;
        }
        Ok(table)
    };
    let (keys, argv) = match (make_array(&prepared.keys), make_array(&prepared.argv)) {
        (Ok(keys), Ok(argv)) => (keys, argv),
        (Err(error), _) | (_, Err(error)) => return lua_failure(error),
    };
    let result = match &prepared.what {
        What::Eval { sha, .. } => {
            let Some(function) = engine.scripts.borrow().get(sha).cloned() else {
                return Reply::error("NOSCRIPT No matching script. Please use EVAL.");
            };
            let globals = lua.globals();
            if let Err(error) = globals
                .raw_set("KEYS", keys)
                .and_then(|()| globals.raw_set("ARGV", argv))
            {
                return lua_failure(error);
            }
            function.call::<Value>(())
        }
        What::Function { name } => {
            let key = name.to_ascii_lowercase();
            let Some((_, function)) = engine.functions.borrow().functions.get(&key).cloned() else {
                return Reply::error("ERR Function not found");
            };
            function.call::<Value>((keys, argv))
        }
    };
    match result {
        Ok(value) => convert::script_reply(&value),
        Err(error) => error_reply(&error, prepared),
    }
}

/// A script's error as Redis 7.0 replies it: the error's own text (a Lua error gets `ERR`),
/// then where it happened.
fn error_reply(error: &mlua::Error, prepared: &Prepared) -> Reply {
    let (mut text, line) = match find_error_value(error) {
        Some((text, line)) => (text, line),
        None => {
            let message = lua_message(error);
            let line = script_line(&message);
            (format!("ERR {message}"), line)
        }
    };
    text = text.replace(['\r', '\n'], " ");
    let source = if prepared.what.is_function() {
        "@user_function"
    } else {
        "@user_script"
    };
    match line {
        Some(line) => Reply::error(format!(
            "{text} script: {}, on {source}:{line}.",
            prepared.label
        )),
        None => Reply::error(text),
    }
}

/// The line in a Lua error message's `user_script:N:` prefix.
fn script_line(message: &str) -> Option<u32> {
    let rest = message
        .strip_prefix("user_script:")
        .or_else(|| message.strip_prefix("user_function:"))?;
    rest.split(':').next()?.parse().ok()
}

/// A Redis error table raised by `redis.call` (its text and the line of the call).
fn find_error_value(error: &mlua::Error) -> Option<(String, Option<u32>)> {
    match error {
        mlua::Error::CallbackError { cause, .. } => find_error_value(cause),
        mlua::Error::ExternalError(external) => {
            let value = external.downcast_ref::<LuaErrorValue>()?;
            let Value::Table(table) = &value.0 else {
                return None;
            };
            let text = table
                .raw_get::<mlua::LuaString>("err")
                .ok()?
                .to_string_lossy();
            let line = table.raw_get::<Option<u32>>("line").ok().flatten();
            Some((text, line))
        }
        mlua::Error::WithContext { cause, .. } => find_error_value(cause),
        _ => None,
    }
}

type LocalFuture = Pin<Box<dyn Future<Output = Reply>>>;

/// A running script's side of `redis.call`.
struct ScriptHost {
    shard: Rc<Shard>,
    held: Rc<Held>,
    info: Arc<RunInfo>,
    read_only: bool,
    /// What the coroutine waits for, and what it got.
    pending: RefCell<Option<LocalFuture>>,
    result: RefCell<Option<Reply>>,
    /// When the current slice of running time began.
    run_started: Cell<Instant>,
}

impl ScriptHost {
    fn killed_text(&self) -> &'static str {
        if self.info.function.is_some() {
            KILLED_FUNCTION
        } else {
            KILLED
        }
    }

    /// The instruction-count hook: a kill ends the script (and `redis.call` fails from then
    /// on, so a `pcall` loop cannot keep it alive for long); past the busy threshold the node answers BUSY; every
    /// [`SLICE`] the shard gets a turn.
    fn hook(&self, lua: &Lua) -> mlua::Result<VmState> {
        if self.info.kill.load(Ordering::Relaxed) {
            return Err(mlua::Error::RuntimeError(
                self.killed_text().trim_start_matches("ERR ").into(),
            ));
        }
        let busy = &self.shard.shared.session.script_busy;
        if !self.info.busy.load(Ordering::Relaxed) && self.info.started.elapsed() > busy.threshold()
        {
            // Only a busy script is listed: SCRIPT KILL and FUNCTION STATS see it.
            self.info.busy.store(true, Ordering::Relaxed);
            if let Ok(mut running) = self.shard.shared.scripting.running.lock() {
                running.push(self.info.clone());
            }
            busy.enter(self.info.function.is_some());
        }
        if self.run_started.get().elapsed() > SLICE {
            self.suspend(lua, false)?;
            if self.info.kill.load(Ordering::Relaxed) {
                return Err(mlua::Error::RuntimeError(
                    self.killed_text().trim_start_matches("ERR ").into(),
                ));
            }
        }
        Ok(VmState::Continue)
    }

    /// Switches to the shard's stack from the hook (the scoped function in the registry
    /// suspends).
    fn suspend(&self, lua: &Lua, future: bool) -> mlua::Result<()> {
        let suspend: Function = lua.named_registry_value(SUSPEND)?;
        suspend.call::<()>(future)
    }

    /// Waits (off the script's stack) for `future`.
    fn wait(&self, suspend: &dyn Fn(bool), future: LocalFuture) -> Reply {
        *self.pending.borrow_mut() = Some(future);
        suspend(true);
        self.result
            .borrow_mut()
            .take()
            .unwrap_or_else(|| Reply::error("ERR internal error: no reply"))
    }

    /// One command for the script: Redis's checks, then on the shard(s) of its keys.
    fn run(&self, suspend: &dyn Fn(bool), args: Vec<Bytes>) -> (Reply, Option<Command>) {
        if let Err(error) = Command::check_table(&args) {
            let text = match error {
                CommandError::WrongArity { .. } => {
                    "ERR Wrong number of args calling Redis command from script"
                }
                _ => "ERR Unknown Redis command called from script",
            };
            return (Reply::error(text), None);
        }
        let flags = Command::flags(&args);
        if flags.contains(&"noscript") || flags.contains(&"blocking") {
            return (
                Reply::error("ERR This Redis command is not allowed from script"),
                None,
            );
        }
        let writes = flags.contains(&"write");
        if writes && self.read_only {
            return (
                Reply::error("ERR Write commands are not allowed from read-only scripts."),
                None,
            );
        }
        let command = match Command::parse(args) {
            Ok(command) => command,
            Err(error) => return (error.into(), None),
        };
        if let Command::Select(db) = command {
            return (
                if db == 0 {
                    Reply::ok()
                } else {
                    CommandError::SelectInCluster.into()
                },
                None,
            );
        }
        if let Err(refusal) = self.reach(suspend, &command) {
            return (refusal, None);
        }
        let reply = self.execute(suspend, command.clone());
        if writes && !reply.is_error() {
            self.info.wrote.store(true, Ordering::Relaxed);
        }
        (reply, Some(command))
    }

    /// Makes sure every shard the command touches is held: a key the script did not
    /// declare, on a shard it does not hold, is taken now when the lock order allows
    /// (standalone mode), else refused.
    fn reach(&self, suspend: &dyn Fn(bool), command: &Command) -> Result<(), Reply> {
        let count = self.shard.count;
        let mut needed: Vec<usize> = command
            .keys()
            .into_iter()
            .map(|key| shard_of(key, count))
            .collect();
        if matches!(command.scope(), crate::command::Scope::AllShards) {
            needed.extend(0..count);
        }
        needed.sort_unstable();
        needed.dedup();
        let missing: Vec<usize> = needed
            .into_iter()
            .filter(|&s| !self.held.holds(s))
            .collect();
        if missing.is_empty() {
            return Ok(());
        }
        if self.shard.shared.cluster_enabled {
            return Err(Reply::error(
                "ERR Script attempted to access a non local key in a cluster node script",
            ));
        }
        let highest = self.held.held().last().copied().unwrap_or(0);
        if missing.iter().any(|&s| s < highest) {
            return Err(Reply::error(
                "ERR Script attempted to access a key on a shard it does not hold: declare the keys it uses in KEYS",
            ));
        }
        let held = self.held.clone();
        let reply = self.wait(
            suspend,
            Box::pin(async move {
                held.lock(&missing, None).await;
                Reply::ok()
            }),
        );
        if reply.is_error() {
            return Err(reply);
        }
        Ok(())
    }

    fn execute(&self, suspend: &dyn Fn(bool), command: Command) -> Reply {
        let count = self.shard.count;
        let route = if command.keys().is_empty()
            && !matches!(command.scope(), crate::command::Scope::AllShards)
        {
            // Keyless commands (PING, ECHO, ...) run where the script runs.
            Route::Single {
                shard: self.shard.id,
                command,
            }
        } else {
            route(command, count)
        };
        match route {
            Route::Refused(reply) => reply,
            Route::Single { shard, command } => {
                let seqs = self.held.send_step(shard, vec![command]);
                let seq = seqs.start;
                if let Some(reply) = self.held.try_reply(seq) {
                    return reply;
                }
                let held = self.held.clone();
                self.wait(suspend, Box::pin(async move { held.reply(seq).await }))
            }
            Route::FanOut(FanOut { parts, mut merger }) => {
                let held = self.held.clone();
                let server = self.shard.shared.clone();
                self.wait(
                    suspend,
                    Box::pin(async move {
                        for (i, part) in parts.into_iter().enumerate() {
                            let reply = held.call(part.shard, part.command).await;
                            if let Err(error) = merger.accept(i, reply) {
                                tracing::error!(%error, "bad part reply in a script");
                            }
                        }
                        merger.finish(&server.info()).unwrap_or_else(|error| {
                            Reply::error(format!("ERR internal error: {error}"))
                        })
                    }),
                )
            }
            Route::Atomic { command, .. } => {
                let held = self.held.clone();
                self.wait(
                    suspend,
                    Box::pin(async move { multikey::apply_held(&held, command).await }),
                )
            }
        }
    }
}

impl Host for ScriptHost {
    fn call(
        &self,
        lua: &Lua,
        args: Vec<Bytes>,
        raise: bool,
        suspend: &dyn Fn(bool),
    ) -> mlua::Result<Value> {
        if self.info.kill.load(Ordering::Relaxed) {
            return Err(mlua::Error::RuntimeError(
                self.killed_text().trim_start_matches("ERR ").into(),
            ));
        }
        let (reply, command) = self.run(suspend, args);
        let mode = match crate::scripting::env::running(lua).map(|r| r.resp.get()) {
            Ok(3) => ReplyMode::Resp3,
            _ => ReplyMode::Resp2,
        };
        if let Reply::Error(text) = &reply {
            let mut dashed = b"-".to_vec();
            dashed.extend_from_slice(text);
            let table = error_table(lua, &dashed)?;
            return if raise {
                Err(crate::scripting::env::raise_table(lua, table)?)
            } else {
                Ok(Value::Table(table))
            };
        }
        let shape = command.as_ref().map(shape_of).unwrap_or_default();
        convert::reply_to_lua(lua, &reply, &shape, mode)
    }

    fn log(&self, level: i64, message: &str) {
        match level {
            0 => tracing::debug!(target: "script", "{message}"),
            1 => tracing::debug!(target: "script", "{message}"),
            2 => tracing::info!(target: "script", "{message}"),
            _ => tracing::warn!(target: "script", "{message}"),
        }
    }
}

/// SCRIPT and FUNCTION subcommands (answered on the connection's shard).
fn admin(shard: &Shard, command: ScriptCommand) -> Reply {
    let scripting = &shard.shared.scripting;
    let args = &command.args;
    let arg = |i: usize| args.get(i).map(|a| a.to_ascii_uppercase());
    match command.op {
        ScriptOp::ScriptLoad => {
            let body = args[0].clone();
            if let Err(reply) = shebang_flags(&body) {
                return reply;
            }
            let checker = match shard.scripts.checker() {
                Ok(checker) => checker,
                Err(reply) => return reply,
            };
            if let Err(text) = checker.compile(&lua_body(&body)) {
                return Reply::error(text);
            }
            let sha = sha1_hex(&body);
            if let Ok(mut cache) = scripting.cache.lock() {
                cache.bodies.insert(sha.clone(), body);
            }
            Reply::Bulk(Bytes::from(sha))
        }
        ScriptOp::ScriptExists => {
            let Ok(cache) = scripting.cache.lock() else {
                return poisoned();
            };
            Reply::Array(
                args.iter()
                    .map(|sha| {
                        let sha = String::from_utf8_lossy(sha).to_ascii_lowercase();
                        Reply::Integer(i64::from(cache.bodies.contains_key(&sha)))
                    })
                    .collect(),
            )
        }
        ScriptOp::ScriptFlush | ScriptOp::FunctionFlush => {
            let name = if command.op == ScriptOp::ScriptFlush {
                "SCRIPT"
            } else {
                "FUNCTION"
            };
            match (args.len(), arg(0).as_deref()) {
                (0, _) | (1, Some(b"ASYNC" | b"SYNC")) => {}
                (1, _) if command.op == ScriptOp::ScriptFlush => {
                    return Reply::error("ERR SCRIPT FLUSH only support SYNC|ASYNC option")
                }
                (1, _) => return Reply::error("ERR FUNCTION FLUSH only supports SYNC|ASYNC option"),
                _ => {
                    return Reply::error(format!(
                        "ERR unknown subcommand or wrong number of arguments for 'flush'. Try {name} HELP."
                    ))
                }
            }
            if command.op == ScriptOp::ScriptFlush {
                if let Ok(mut cache) = scripting.cache.lock() {
                    cache.bodies.clear();
                    cache.generation += 1;
                }
            } else if let Ok(mut libraries) = scripting.libraries.lock() {
                libraries.flush();
                drop(libraries);
                log_functions(shard);
            }
            Reply::ok()
        }
        ScriptOp::ScriptKill | ScriptOp::FunctionKill => {
            kill(shard, command.op == ScriptOp::FunctionKill)
        }
        ScriptOp::FunctionLoad => {
            let (replace, code) = match args.len() {
                1 => (false, args[0].clone()),
                2 if args[0].eq_ignore_ascii_case(b"replace") => (true, args[1].clone()),
                _ => {
                    return Reply::error(format!(
                        "ERR Unknown option given: {}",
                        String::from_utf8_lossy(&args[0])
                    ))
                }
            };
            let checker = match shard.scripts.checker() {
                Ok(checker) => checker,
                Err(reply) => return reply,
            };
            let library = match checker.check(&code) {
                Ok(library) => library,
                Err(text) => return Reply::error(text),
            };
            let name = library.name.clone();
            let Ok(mut libraries) = scripting.libraries.lock() else {
                return poisoned();
            };
            match libraries.add(library, replace) {
                Ok(()) => {
                    drop(libraries);
                    log_functions(shard);
                    Reply::Bulk(Bytes::from(name))
                }
                Err(text) => Reply::error(text),
            }
        }
        ScriptOp::FunctionDelete => {
            let name = String::from_utf8_lossy(&args[0]).into_owned();
            let Ok(mut libraries) = scripting.libraries.lock() else {
                return poisoned();
            };
            match libraries.delete(&name) {
                Ok(()) => {
                    drop(libraries);
                    log_functions(shard);
                    Reply::ok()
                }
                Err(text) => Reply::error(text),
            }
        }
        ScriptOp::FunctionList => {
            let mut with_code = false;
            let mut pattern = None;
            let mut i = 0;
            while i < args.len() {
                match arg(i).as_deref() {
                    Some(b"WITHCODE") if !with_code => with_code = true,
                    Some(b"LIBRARYNAME") if pattern.is_none() => {
                        let Some(p) = args.get(i + 1) else {
                            return Reply::error("ERR library name argument was not given");
                        };
                        pattern = Some(p.clone());
                        i += 1;
                    }
                    _ => {
                        return Reply::error(format!(
                            "ERR Unknown argument {}",
                            String::from_utf8_lossy(&args[i])
                        ))
                    }
                }
                i += 1;
            }
            match scripting.libraries.lock() {
                Ok(libraries) => libraries.list(with_code, pattern.as_deref()),
                Err(_) => poisoned(),
            }
        }
        ScriptOp::FunctionDump => match scripting.libraries.lock() {
            Ok(libraries) => Reply::Bulk(libraries.dump()),
            Err(_) => poisoned(),
        },
        ScriptOp::FunctionRestore => {
            use crate::scripting::functions::RestorePolicy;
            let policy = match (args.len(), arg(1).as_deref()) {
                (1, _) => RestorePolicy::Append,
                (2, Some(b"FLUSH")) => RestorePolicy::Flush,
                (2, Some(b"APPEND")) => RestorePolicy::Append,
                (2, Some(b"REPLACE")) => RestorePolicy::Replace,
                (2, _) => {
                    return Reply::error(
                        "ERR Wrong restore policy given, value should be either FLUSH, APPEND or REPLACE.",
                    )
                }
                _ => {
                    return Reply::error(
                        "ERR unknown subcommand or wrong number of arguments for 'restore'. Try FUNCTION HELP.",
                    )
                }
            };
            let checker = match shard.scripts.checker() {
                Ok(checker) => checker,
                Err(reply) => return reply,
            };
            let Ok(mut libraries) = scripting.libraries.lock() else {
                return poisoned();
            };
            match libraries.restore(&args[0], policy, &checker) {
                Ok(()) => {
                    drop(libraries);
                    log_functions(shard);
                    Reply::ok()
                }
                Err(text) => Reply::error(text),
            }
        }
        ScriptOp::FunctionStats => stats(scripting),
        ScriptOp::ScriptHelp | ScriptOp::FunctionHelp => help(command.op),
        ScriptOp::Container => Reply::error("ERR unknown subcommand. Try SCRIPT HELP."),
        _ => Reply::error("ERR internal error: not an admin command"),
    }
}

fn bulk(text: &str) -> Reply {
    Reply::Bulk(Bytes::copy_from_slice(text.as_bytes()))
}

fn stats(scripting: &ScriptingShared) -> Reply {
    let running = scripting
        .running
        .lock()
        .ok()
        .and_then(|running| {
            running
                .iter()
                .find(|info| info.busy.load(Ordering::Relaxed))
                .cloned()
        })
        .map_or(Reply::NullBulk, |info| {
            Reply::Array(vec![
                bulk("name"),
                bulk(info.function.as_deref().unwrap_or("")),
                bulk("command"),
                Reply::Array(info.args.iter().cloned().map(Reply::Bulk).collect()),
                bulk("duration_ms"),
                Reply::Integer(info.elapsed_ms() as i64),
            ])
        });
    let (libraries, functions) = scripting
        .libraries
        .lock()
        .map(|l| (l.library_count(), l.function_count()))
        .unwrap_or((0, 0));
    Reply::Array(vec![
        bulk("running_script"),
        running,
        bulk("engines"),
        Reply::Array(vec![
            bulk("LUA"),
            Reply::Array(vec![
                bulk("libraries_count"),
                Reply::Integer(libraries as i64),
                bulk("functions_count"),
                Reply::Integer(functions as i64),
            ]),
        ]),
    ])
}

/// SCRIPT KILL / FUNCTION KILL: the script running past the busy threshold, if it wrote
/// nothing.
fn kill(shard: &Shard, function: bool) -> Reply {
    let Ok(running) = shard.shared.scripting.running.lock() else {
        return poisoned();
    };
    // Only a script past the busy threshold: Redis could not read SCRIPT KILL before.
    let Some(info) = running
        .iter()
        .find(|info| info.busy.load(Ordering::Relaxed))
    else {
        return Reply::error("NOTBUSY No scripts in execution right now.");
    };
    if !function && info.function.is_some() {
        return Reply::error(crate::scripting::BUSY_FUNCTION);
    }
    if function && info.function.is_none() {
        return Reply::error(crate::scripting::BUSY_EVAL);
    }
    if info.wrote.load(Ordering::Relaxed) {
        return Reply::error("UNKILLABLE Sorry the script already executed write commands against the dataset. You can either wait the script termination or kill the server in a hard way using the SHUTDOWN NOSAVE command.");
    }
    info.kill.store(true, Ordering::Relaxed);
    Reply::ok()
}

fn help(op: ScriptOp) -> Reply {
    let lines: &[&str] = if op == ScriptOp::ScriptHelp {
        &[
            "SCRIPT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
            "DEBUG (YES|SYNC|NO)",
            "    Set the debug mode for subsequent scripts executed.",
            "EXISTS <sha1> [<sha1> ...]",
            "    Return information about the existence of the scripts in the script cache.",
            "FLUSH [ASYNC|SYNC]",
            "    Flush the Lua scripts cache. Very dangerous on replicas.",
            "KILL",
            "    Kill the currently executing Lua script.",
            "LOAD <script>",
            "    Load a script into the scripts cache without executing it.",
            "HELP",
            "    Print this help.",
        ]
    } else {
        &[
            "FUNCTION <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
            "LOAD [REPLACE] <FUNCTION CODE>",
            "DELETE <LIBRARY NAME>",
            "LIST [LIBRARYNAME PATTERN] [WITHCODE]",
            "FLUSH [ASYNC|SYNC]",
            "KILL",
            "STATS",
            "DUMP",
            "RESTORE <PAYLOAD> [FLUSH|APPEND|REPLACE]",
            "HELP",
            "    Print this help.",
        ]
    };
    Reply::Array(lines.iter().map(|line| Reply::simple(line)).collect())
}

/// The record that restores the function libraries: `FUNCTION RESTORE payload FLUSH`.
fn functions_op(payload: &[u8], out: &mut bytes::BytesMut) {
    crate::change::WriteOp::Command {
        name: "FUNCTION",
        key: b"RESTORE",
        args: &[
            Bytes::copy_from_slice(payload),
            Bytes::from_static(b"FLUSH"),
        ],
    }
    .encode(out);
}

/// The function libraries changed (on `shard`): shard 0 logs them whole, so a restart (and
/// a log rewrite) restores them. Shard 0 dumps them when it logs, so its log's last record
/// is always the newest state whatever order changes from several shards arrive in.
fn log_functions(shard: &Shard) {
    if !shard.shared.aof_enabled {
        return;
    }
    if shard.id == 0 {
        log_functions_here(shard);
    } else {
        shard
            .forward
            .push_work(0, super::forward::Work::LogFunctions);
    }
}

/// On shard 0: logs the libraries as they are now.
pub(crate) fn log_functions_here(shard: &Shard) {
    let Some(aof) = &shard.aof else { return };
    let Ok(payload) = shard.shared.scripting.libraries.lock().map(|l| l.dump()) else {
        return;
    };
    aof.log(crate::change::WriteOp::Command {
        name: "FUNCTION",
        key: b"RESTORE",
        args: &[payload, Bytes::from_static(b"FLUSH")],
    });
}

/// Shard 0's base file starts with the libraries (one record), or `None` elsewhere.
pub(crate) fn functions_record(shard: &Shard) -> Option<Bytes> {
    if shard.id != 0 {
        return None;
    }
    let payload = shard.shared.scripting.libraries.lock().ok()?.dump();
    let mut record = bytes::BytesMut::new();
    crate::aof::record::encode_record_with(&mut record, |out| functions_op(&payload, out)).ok()?;
    Some(record.freeze())
}

/// At start-up: the libraries shard 0's log recorded last.
pub(crate) fn restore_logged(shared: &super::shared::ServerShared, payload: &[u8]) {
    use crate::scripting::functions::RestorePolicy;
    let restored = Checker::new()
        .map_err(|e| lua_message(&e))
        .and_then(|checker| {
            let mut libraries = shared
                .scripting
                .libraries
                .lock()
                .map_err(|_| "poisoned".to_string())?;
            libraries.restore(payload, RestorePolicy::Flush, &checker)
        });
    if let Err(error) = restored {
        tracing::error!(%error, "the function libraries in the AOF did not load");
    }
}

/// Whether `command` is a script run (it needs the glue, not a store).
pub(crate) fn is_run(command: &Command) -> bool {
    matches!(command, Command::Script(script) if script.op.runs_script())
}
