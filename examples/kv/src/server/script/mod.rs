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
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
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
use crate::scripting::{ScriptCommand, ScriptOp, Sha1};
use crate::session::resp3::shape_of;

mod admin;
mod host;
mod run;

use admin::admin;
pub(crate) use admin::{functions_record, log_functions_here, restore_logged};
use host::ScriptHost;
use run::drive;

/// Running time after which a script lets its shard have a turn.
const SLICE: Duration = Duration::from_millis(2);
/// Lua instructions between two looks at the clock.
const HOOK_EVERY: u32 = 1000;
/// The coroutine's stack: Lua's C recursion is bounded (200 C calls), and so are the
/// conversions' depths.
const STACK_BYTES: usize = 1 << 20;

const KILLED: &str = "ERR Script killed by user with SCRIPT KILL...";
const KILLED_FUNCTION: &str = "ERR Script killed by user with FUNCTION KILL...";
const SUSPEND: &str = "__kv_suspend";

/// The node's scripting state, shared by every shard.
#[derive(Default)]
pub(crate) struct ScriptingShared {
    cache: Mutex<ScriptCache>,
    /// Bumped by SCRIPT FLUSH, under `cache`'s lock: shards then start a fresh Lua state and
    /// forget the scripts they looked up (read without the lock on every run).
    generation: AtomicU64,
    pub libraries: Mutex<Libraries>,
    /// The scripts running past the busy threshold.
    running: Mutex<Vec<Arc<RunInfo>>>,
}

impl ScriptingShared {
    pub fn cached_scripts(&self) -> usize {
        self.cache.lock().map_or(0, |cache| cache.bodies.len())
    }

    /// Whether `command` (EVAL, EVALSHA or FCALL with `first`, its body, SHA1 or function
    /// name) may write: a script that declares flags writes unless `no-writes` is among
    /// them; one without flags, or one not known here, may (Redis keeps the command's
    /// `may_replicate` then).
    pub fn writes(&self, command: &str, first: &[u8]) -> bool {
        let declared_no_writes = |body: &[u8]| {
            shebang_flags(body).is_ok_and(|flags| flags.is_some_and(|flags| flags.no_writes))
        };
        match command {
            "eval" => !declared_no_writes(first),
            "evalsha" => {
                let body = Sha1::from_hex(first)
                    .and_then(|sha| self.cache.lock().ok()?.bodies.get(&sha).cloned());
                !body.is_some_and(|body| declared_no_writes(&body))
            }
            "fcall" => {
                let name = String::from_utf8_lossy(first);
                let libraries = self.libraries.lock();
                !libraries.is_ok_and(|l| l.library_of(&name).is_some_and(|(_, f)| f.no_writes()))
            }
            _ => true,
        }
    }
}

#[derive(Default)]
struct ScriptCache {
    bodies: HashMap<Sha1, Bytes, Sha1Hasher>,
}

/// The script maps are keyed by SHA1 digests, looked up on every EVALSHA: foldhash over the
/// digest's first eight bytes, not SipHash over the hex text.
type Sha1Hasher = foldhash::fast::RandomState;

/// The scripts of the node's cache a shard has looked up, with their shebang flags parsed
/// once: EVALSHA finds its script here without the node's lock. It holds only what the
/// node's cache holds (filled from it, emptied when SCRIPT FLUSH bumps the generation).
#[derive(Default)]
struct KnownScripts {
    generation: u64,
    scripts: HashMap<Sha1, Known, Sha1Hasher>,
}

/// A cached script as a shard knows it.
#[derive(Clone)]
struct Known {
    body: Bytes,
    declared: Option<Declared>,
}

/// A script running somewhere in the node; once past the busy threshold it is listed for
/// SCRIPT KILL and FUNCTION STATS.
struct RunInfo {
    function: Option<String>,
    /// The run's command (its name is `op`'s), for FUNCTION STATS.
    op: ScriptOp,
    words: Arc<Vec<Bytes>>,
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
/// SCRIPT LOAD and FUNCTION LOAD, and the coroutine scripts run on.
#[derive(Default)]
pub(crate) struct ScriptShard {
    engine: RefCell<Option<Rc<Engine>>>,
    checker: RefCell<Option<Rc<Checker>>>,
    runner: RefCell<Option<run::Runner>>,
    known: RefCell<KnownScripts>,
}

struct Engine {
    env: Env,
    libraries: LibraryEnv,
    generation: u64,
    scripts: RefCell<HashMap<Sha1, Function, Sha1Hasher>>,
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
            scripts: RefCell::new(HashMap::default()),
            functions: RefCell::new(Loaded::default()),
        });
        *slot = Some(engine.clone());
        Ok(engine)
    }

    /// The shard's script coroutine, for `engine` (a new one if the state changed). Taken
    /// while a script runs; scripts on a shard run one at a time (each holds the shard).
    fn runner(&self, engine: &Rc<Engine>) -> run::Runner {
        match self.runner.borrow_mut().take() {
            Some(runner) if Rc::ptr_eq(runner.engine(), engine) => runner,
            _ => run::Runner::new(engine.clone()),
        }
    }

    fn put_runner(&self, runner: run::Runner) {
        *self.runner.borrow_mut() = Some(runner);
    }

    /// The node's cached script `sha`, from what this shard looked up before when it can.
    fn known(&self, scripting: &ScriptingShared, sha: Sha1) -> Option<Known> {
        let generation = scripting.generation.load(Ordering::Acquire);
        let mut known = self.known.borrow_mut();
        if known.generation != generation {
            known.scripts.clear();
            known.generation = generation;
        }
        if let Some(script) = known.scripts.get(&sha) {
            return Some(script.clone());
        }
        let body = scripting.cache.lock().ok()?.bodies.get(&sha).cloned()?;
        // Only bodies with a valid shebang (or none) enter the node's cache.
        let declared = shebang_flags(&body).ok()?;
        let script = Known { body, declared };
        known.scripts.insert(sha, script.clone());
        Some(script)
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
    /// On a read-only replica (for a client, not the master): a write in a legacy script
    /// fails with `-READONLY`, as Redis.
    replica_read_only: bool,
    /// Refused at start when the shard is past its memory limit: a script that declares
    /// flags (shebang or function) and neither `no-writes` nor `allow-oom`, as Redis 7.
    deny_oom: bool,
    /// Refused at start while `min-replicas-to-write` is not met: a script that declares
    /// flags without `no-writes` is a write command, as in Redis 7 (one without flags is
    /// refused at its first write instead).
    may_write: bool,
    op: ScriptOp,
    /// The command's words after its name: the body, SHA1 or function name, `numkeys`, the
    /// keys, the arguments (shared with the run's listing, not copied).
    words: Arc<Vec<Bytes>>,
    numkeys: usize,
    /// The shards to hold, ascending, and where the script runs.
    lock: Vec<usize>,
    exec: usize,
    /// The caller's ACL user, when restricted.
    user: Option<Arc<crate::acl::User>>,
}

impl Prepared {
    fn keys(&self) -> &[Bytes] {
        &self.words[2..2 + self.numkeys]
    }

    fn argv(&self) -> &[Bytes] {
        &self.words[2 + self.numkeys..]
    }

    /// Redis's name for the run in errors: the script's SHA1 or the function's name.
    fn label(&self) -> String {
        match &self.what {
            What::Eval { sha, .. } => sha.hex(),
            What::Function { name } => name.clone(),
        }
    }

    /// The command again, to run where its first key lives.
    fn into_command(self) -> ScriptCommand {
        ScriptCommand {
            op: self.op,
            args: Arc::unwrap_or_clone(self.words),
            user: self.user,
        }
    }
}

#[derive(Clone)]
enum What {
    Eval { sha: Sha1, body: Bytes },
    Function { name: String },
}

impl What {
    fn is_function(&self) -> bool {
        matches!(self, What::Function { .. })
    }
}

/// The flags a script declares (EVAL's shebang, a function's registration) that change how
/// it may run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Declared {
    no_writes: bool,
    allow_oom: bool,
}

impl Declared {
    fn of_names(flags: &[String]) -> Declared {
        Declared {
            no_writes: flags.iter().any(|f| f == "no-writes"),
            allow_oom: flags.iter().any(|f| f == "allow-oom"),
        }
    }
}

/// A script body's `#!lua flags=...` line: Redis 7's EVAL shebang.
fn shebang_flags(body: &[u8]) -> Result<Option<Declared>, Reply> {
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
    let mut declared = Declared::default();
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
            declared.no_writes |= flag == "no-writes";
            declared.allow_oom |= flag == "allow-oom";
        }
    }
    Ok(Some(declared))
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

/// Checks a script run and finds where it runs; the command moves into the run (a
/// forwarded one is taken back with [`Prepared::into_command`]).
fn prepare(
    shard: &Shard,
    command: ScriptCommand,
    exec_override: Option<usize>,
    from_master: bool,
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
    let mut may_write = false;
    let replica_read_only = !from_master && shard.shared.replica.gate.refuses_writes();
    // A script that declares flags without `no-writes` counts as a write command, which a
    // read-only replica refuses before it starts (Redis's `scriptFlagsToCmdFlags`).
    let mut declared = |flags: Declared, read_only: &mut bool, deny_oom: &mut bool| {
        if !flags.no_writes && replica_read_only {
            return Err(Reply::error(crate::repl::gate::READONLY));
        }
        *read_only |= flags.no_writes;
        *deny_oom = !flags.no_writes && !flags.allow_oom;
        may_write = !flags.no_writes;
        Ok(())
    };
    let what = match command.op {
        ScriptOp::Eval | ScriptOp::EvalRo => {
            let body = command.args[0].clone();
            if let Some(flags) = shebang_flags(&body)? {
                declared(flags, &mut read_only, &mut deny_oom)?;
            }
            What::Eval {
                sha: Sha1::of(&body),
                body,
            }
        }
        ScriptOp::EvalSha | ScriptOp::EvalShaRo => {
            let (sha, known) = Sha1::from_hex(&command.args[0])
                .and_then(|sha| Some((sha, shard.scripts.known(scripting, sha)?)))
                .ok_or_else(|| Reply::error("NOSCRIPT No matching script. Please use EVAL."))?;
            if let Some(flags) = known.declared {
                declared(flags, &mut read_only, &mut deny_oom)?;
            }
            What::Eval {
                sha,
                body: known.body,
            }
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
            declared(
                Declared::of_names(&meta.flags),
                &mut read_only,
                &mut deny_oom,
            )?;
            What::Function { name }
        }
    };
    let keys = &command.args[2..2 + numkeys];
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
    Ok(Prepared {
        what,
        read_only,
        replica_read_only,
        deny_oom,
        may_write,
        op: command.op,
        words: Arc::new(command.args),
        numkeys,
        lock,
        exec,
        user: command.user,
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
    let from_master = shard.shared.replica.is_master_origin(&origin);
    let prepared = match prepare(shard, command, None, from_master) {
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
            command: Command::Script(prepared.into_command()),
        },
    );
    None
}

/// A SCRIPT or FUNCTION subcommand run here (queued in a transaction).
pub(crate) fn admin_command(shard: &Shard, command: ScriptCommand) -> Reply {
    admin(shard, command)
}

/// A script run forwarded to this shard (its first key's).
pub(crate) fn run_here(shard: &Shard, origin: Origin, command: ScriptCommand) -> Option<Reply> {
    let from_master = shard.shared.replica.is_master_origin(&origin);
    match prepare(shard, command, Some(shard.id), from_master) {
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
            let held = take_program(&shard);
            held.lock(&prepared.lock, None).await;
            let caller = shard.script_caller(origin, &held, prepared.keys());
            let reply = run_held(&shard, &held, prepared, caller.clone()).await;
            if let Some(caller) = caller {
                shard.script_ended(&caller);
            }
            held.release();
            keep_program(held);
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

corewire::runtime::shard_local! {
    /// A program an earlier run on this shard let go of, idle: the next run takes it rather
    /// than registering one of its own (kept here, not in the shard, which it refers to).
    static SPARE_PROGRAM: RefCell<Option<Rc<Held>>> = RefCell::new(None);
}

/// A program for a run on `shard` (holding nothing).
fn take_program(shard: &Rc<Shard>) -> Rc<Held> {
    SPARE_PROGRAM
        .with(|spare| spare.borrow_mut().take())
        .unwrap_or_else(|| Rc::new(Held::new(shard.clone())))
}

/// A run's program after it let go of every shard: kept for the next run when nothing
/// else refers to it and it is idle, else dropped (and unregistered).
fn keep_program(held: Rc<Held>) {
    if Rc::strong_count(&held) == 1 && held.idle() {
        // One kept: one a run started meanwhile kept goes (dropped outside the borrow).
        let _dropped = SPARE_PROGRAM.with(|spare| spare.borrow_mut().replace(held));
    }
}

/// Runs a script inside a transaction's program (`held` holds every shard it declared, and
/// this shard, where it runs).
pub(crate) async fn run_in_transaction(
    shard: &Rc<Shard>,
    held: &Rc<Held>,
    command: ScriptCommand,
) -> Reply {
    // The master's stream carries a script's effects, never the script: only clients' runs
    // come here.
    let prepared = match prepare(shard, command, Some(shard.id), false) {
        Ok(prepared) => prepared,
        Err(reply) => return reply,
    };
    run_held(shard, held, prepared, None).await
}

/// The shards a script run inside a transaction needs held (with the transaction's shard).
pub(crate) fn transaction_shards(shard: &Shard, command: &ScriptCommand) -> Vec<usize> {
    match prepare(shard, command.clone(), Some(shard.id), false) {
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
    /// The script ended with this reply; the coroutine waits for the next one.
    Done(Reply),
}

async fn run_held(
    shard: &Rc<Shard>,
    held: &Rc<Held>,
    prepared: Prepared,
    caller: Option<crate::server::tracking::ScriptCaller>,
) -> Reply {
    let scripting = &shard.shared.scripting;
    let generation = scripting.generation.load(Ordering::Acquire);
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
    if prepared.may_write {
        let min = (shard.shared.session.live.hot.min_replicas_to_write)
            .load(std::sync::atomic::Ordering::Relaxed);
        if let Some(refusal) = shard.shared.repl.write_refusal(min) {
            return refusal;
        }
    }
    let info = Arc::new(RunInfo {
        function: match &prepared.what {
            What::Function { name } => Some(name.clone()),
            What::Eval { .. } => None,
        },
        // Only the run's listing (FUNCTION STATS) reads them.
        op: prepared.op,
        words: prepared.words.clone(),
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
        replica_read_only: prepared.replica_read_only,
        pending: RefCell::new(None),
        result: RefCell::new(None),
        run_started: Cell::new(Instant::now()),
        caller,
        user: prepared.user.clone(),
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
                self.scripts.borrow_mut().insert(*sha, function);
                if let Ok(mut cache) = scripting.cache.lock() {
                    cache.bodies.entry(*sha).or_insert_with(|| body.clone());
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
/// Whether `command` is a script run (it needs the glue, not a store).
pub(crate) fn is_run(command: &Command) -> bool {
    matches!(command, Command::Script(script) if script.op.runs_script())
}
