//! A running script's side of `redis.call`: Redis's checks, the shards the command touches,
//! and waiting (off the script's stack) for replies from other shards.

use super::*;
use crate::scripting::call::CallReply;
use crate::session::error_code;
use crate::session::resp3::Shape;
use std::time::Duration;

pub(super) type LocalFuture = Pin<Box<dyn Future<Output = Reply>>>;

/// An undeclared key's shard below those a script holds is tried again after this pause,
/// doubling up to [`TRY_LOCK_LAST_PAUSE`] (about 8 ms of waiting in all) before the script
/// gets an error.
const TRY_LOCK_FIRST_PAUSE: Duration = Duration::from_micros(125);
const TRY_LOCK_LAST_PAUSE: Duration = Duration::from_millis(4);

/// A running script's side of `redis.call`.
pub(super) struct ScriptHost {
    pub(super) shard: Rc<Shard>,
    pub(super) held: Rc<Held>,
    pub(super) info: Arc<RunInfo>,
    pub(super) read_only: bool,
    /// A read-only replica running a client's script: writes fail with `-READONLY`.
    pub(super) replica_read_only: bool,
    /// What the coroutine waits for, and what it got.
    pub(super) pending: RefCell<Option<LocalFuture>>,
    pub(super) result: RefCell<Option<Reply>>,
    /// When the current slice of running time began.
    pub(super) run_started: Cell<Instant>,
    /// For client tracking: who ran the script, and its declared keys (remembered for the
    /// caller once the script reads, as Redis does).
    pub(super) caller: Option<crate::server::tracking::ScriptCaller>,
    /// The caller's ACL user, when restricted: each command is checked against it.
    pub(super) user: Option<Arc<crate::acl::User>>,
}

/// The command table's flags a script's command is checked against, read in one pass over
/// them (a command runs several checks, each a search of the flag names otherwise).
#[derive(Default)]
struct CallFlags {
    blocking: bool,
    noscript: bool,
    write: bool,
    readonly: bool,
    admin: bool,
    skip_monitor: bool,
}

impl CallFlags {
    fn of(names: &[&str]) -> CallFlags {
        let mut flags = CallFlags::default();
        for name in names {
            match *name {
                "blocking" => flags.blocking = true,
                "noscript" => flags.noscript = true,
                "write" => flags.write = true,
                "readonly" => flags.readonly = true,
                "admin" => flags.admin = true,
                "skip_monitor" => flags.skip_monitor = true,
                _ => {}
            }
        }
        flags
    }
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
    pub(super) fn hook(&self, lua: &Lua) -> mlua::Result<VmState> {
        if self.info.kill.load(Ordering::Relaxed) {
            return Err(self.killed(lua));
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
                return Err(self.killed(lua));
            }
        }
        Ok(VmState::Continue)
    }

    /// The killed script's error. As Redis does, the hook then fires at every instruction
    /// (until the run ends): a `pcall` loop catching the error cannot keep the script alive,
    /// whatever the loop's length against the hook's period.
    fn killed(&self, lua: &Lua) -> mlua::Error {
        let text = self.killed_text().trim_start_matches("ERR ");
        let every = HookTriggers::new().every_nth_instruction(1);
        let _ = lua.set_hook(every, move |_, _| {
            Err(mlua::Error::RuntimeError(text.into()))
        });
        mlua::Error::RuntimeError(text.into())
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

    /// One command for the script: Redis's checks, then on the shard(s) of its keys; the
    /// reply, and the RESP3 shape of the command's reply (for its conversion to Lua).
    fn run(&self, suspend: &dyn Fn(bool), args: &mut Vec<Bytes>) -> (Reply, Shape) {
        // One table lookup serves the checks, the flags, the stats' name and the parse.
        let resolved = match Command::resolve(args) {
            Ok(resolved) => resolved,
            Err(error) => {
                let text = match error {
                    CommandError::WrongArity { .. } => {
                        "ERR Wrong number of args calling Redis command from script"
                    }
                    _ => "ERR Unknown Redis command called from script",
                };
                return (Reply::error(text), Shape::default());
            }
        };
        let spec = resolved.spec;
        let flags = CallFlags::of(spec.flags);
        // Redis 7.0 flags its blocking pops `noscript`; the table here has them as
        // `blocking` (as XREAD, which a script may run without BLOCK). BLMPOP and BZMPOP are
        // not: in a script they answer at once (nil when there is nothing to pop).
        let blocking = flags.blocking;
        let blocking_pop = blocking && {
            use crate::command::{table::CommandKind, TypedOp};
            matches!(spec.kind, CommandKind::Typed(op)
                if !op.is_stream_read() && !matches!(op, TypedOp::BLMPop | TypedOp::BZMPop))
        };
        if flags.noscript || blocking_pop {
            return self.rejected(
                spec.name,
                Reply::error("ERR This Redis command is not allowed from script"),
            );
        }
        if blocking && args[1..].iter().any(|a| a.eq_ignore_ascii_case(b"block")) {
            return self.rejected(
                spec.name,
                Reply::error(format!(
                    "ERR {} command is not allowed with BLOCK option from scripts",
                    // The name as the script wrote it, as Redis prints `argv[0]`.
                    String::from_utf8_lossy(&args[0])
                )),
            );
        }
        if let Some(user) = &self.user {
            if let Some(refusal) = self.acl_refusal(user, args) {
                return self.rejected(spec.name, refusal);
            }
        }
        let writes = flags.write;
        // A read-only script may not propagate anything either (Redis counts `may_replicate`
        // as a write here): what lets it run during CLIENT PAUSE WRITE.
        if self.read_only && (writes || crate::clients::may_replicate(spec.name)) {
            return self.rejected(
                spec.name,
                Reply::error("ERR Write commands are not allowed from read-only scripts."),
            );
        }
        if writes && self.replica_read_only {
            return self.rejected(spec.name, Reply::error(crate::repl::gate::READONLY));
        }
        // Redis's `scriptVerifyWriteCommandAllow`: a script's first write is refused while
        // `min-replicas-to-write` is not met; once it wrote, it is not failed half way.
        if writes && !self.info.wrote.load(Ordering::Relaxed) {
            let min =
                (self.shard.shared.session.live.hot.min_replicas_to_write).load(Ordering::Relaxed);
            if let Some(refusal) = self.shard.shared.repl.write_refusal(min) {
                return self.rejected(spec.name, refusal);
            }
        }
        if (self.shard.shared.session.live.hot.monitors).load(Ordering::Relaxed) > 0
            && !flags.admin
            && !flags.skip_monitor
        {
            // As Redis shows a script's commands: after its EVAL or FCALL, from "lua".
            let line =
                crate::session::monitor_line(super::super::introspect::unix_us(), "lua", args);
            self.shard.feed_monitors(vec![line]);
        }
        let name = Some(spec.name);
        let command = match Command::parse_resolved(resolved, args) {
            Ok(command) => command,
            Err(error) => {
                // A syntax error is the command's own: a failed call, as Redis counts it.
                let reply = error.into();
                self.record_call(name, std::time::Instant::now(), &reply);
                return (reply, Shape::default());
            }
        };
        if let Command::Select(db) = command {
            let shared = &self.shard.shared;
            let reply =
                crate::session::select_reply(db, &shared.session.live, shared.cluster_enabled);
            self.record_call(name, std::time::Instant::now(), &reply);
            return (reply, Shape::default());
        }
        let keyless = match self.reach(suspend, &command) {
            Ok(keyless) => keyless,
            Err(refusal) => return self.rejected(spec.name, refusal),
        };
        if flags.readonly {
            if let Some(caller) = &self.caller {
                self.shard.track_for_script(caller);
            }
        }
        let shape = shape_of(&command);
        let started = std::time::Instant::now();
        let reply = self.execute(suspend, command, keyless);
        self.record_call(name, started, &reply);
        if writes && !reply.is_error() {
            self.info.wrote.store(true, Ordering::Relaxed);
        }
        (reply, shape)
    }

    /// A command refused before it ran (Redis's `scriptCall` checks): a rejected call in INFO
    /// commandstats.
    fn rejected(&self, name: &'static str, reply: Reply) -> (Reply, Shape) {
        self.shard.record_call(crate::session::CallRecord {
            name: Some(name),
            duration_us: 0,
            error: error_code(&reply),
            rejected: true,
            errorstat: false,
            slow: None,
        });
        (reply, Shape::default())
    }

    /// As Redis, a script's commands count in INFO commandstats as calls of their own (a
    /// failure too; errorstats counts a `redis.call` error as the script's reply, a
    /// `redis.pcall` one in `call`).
    fn record_call(&self, name: Option<&'static str>, started: std::time::Instant, reply: &Reply) {
        let error = error_code(reply);
        // An OOM comes from the memory check before the command runs (`store/memory.rs`): a
        // rejected call, as Redis counts it, not a failed one.
        let rejected = error.as_deref() == Some(&b"OOM"[..]);
        let record = crate::session::CallRecord {
            name,
            duration_us: started.elapsed().as_micros() as u64,
            error,
            rejected,
            errorstat: false,
            slow: None,
        };
        self.shard.record_call(record);
    }

    /// Makes sure every shard the command touches is held: a key the script did not
    /// declare, on a shard it does not hold, is taken now (standalone mode): waited for
    /// when the lock order allows, else only when that shard is free within
    /// [`TRY_LOCK_LAST_PAUSE`]'s retries, else refused. `Ok(true)`: the command has no keys
    /// and runs on the script's shard.
    fn reach(&self, suspend: &dyn Fn(bool), command: &Command) -> Result<bool, Reply> {
        let count = self.shard.count;
        // A string command's one key (most of a script's calls): no vector of keys.
        if let Some(key) = command.single_key() {
            if self.held.holds(shard_of(key, count)) {
                return Ok(false);
            }
        }
        let keys = command.keys();
        let all_shards = matches!(command.scope(), crate::command::Scope::AllShards);
        let keyless = keys.is_empty() && !all_shards;
        // The common case (every key on a held shard) allocates nothing more.
        if !all_shards && keys.iter().all(|key| self.held.holds(shard_of(key, count))) {
            return Ok(keyless);
        }
        let mut needed: Vec<usize> = keys.iter().map(|key| shard_of(key, count)).collect();
        if all_shards {
            needed.extend(0..count);
        }
        needed.sort_unstable();
        needed.dedup();
        let missing: Vec<usize> = needed
            .into_iter()
            .filter(|&s| !self.held.holds(s))
            .collect();
        if missing.is_empty() {
            return Ok(keyless);
        }
        if self.shard.shared.cluster_enabled {
            return Err(Reply::error(
                "ERR Script attempted to access a non local key in a cluster node script",
            ));
        }
        let highest = self.held.held().last().copied().unwrap_or(0);
        // Above every shard held: waited for in order. Below one: taken only when free,
        // retried for a bounded time (a program holding it may be waiting for ours), then
        // refused.
        let (below, above): (Vec<usize>, Vec<usize>) = missing.iter().partition(|&&s| s < highest);
        let held = self.held.clone();
        let reply = self.wait(
            suspend,
            Box::pin(async move {
                for target in below {
                    let mut pause = TRY_LOCK_FIRST_PAUSE;
                    while !held.try_lock(target).await {
                        if pause > TRY_LOCK_LAST_PAUSE {
                            return Reply::error(
                                "ERR Script attempted to access a key on a shard busy with another script or transaction: declare the keys it uses in KEYS",
                            );
                        }
                        corewire::runtime::sleep(pause).await;
                        pause *= 2;
                    }
                }
                if !above.is_empty() {
                    held.lock(&above, None).await;
                }
                Reply::ok()
            }),
        );
        if reply.is_error() {
            return Err(reply);
        }
        Ok(keyless)
    }

    /// Runs `command` (`keyless`: it has no keys and touches one shard).
    fn execute(&self, suspend: &dyn Fn(bool), command: Command, keyless: bool) -> Reply {
        let count = self.shard.count;
        let route = if keyless {
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
            Route::Single { shard, command } if shard == self.shard.id => {
                match self.held.step_here(command) {
                    Ok(reply) => reply,
                    Err(seq) => {
                        let held = self.held.clone();
                        self.wait(suspend, Box::pin(async move { held.reply(seq).await }))
                    }
                }
            }
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

impl ScriptHost {
    /// The ACL check of a script's command (logged in the `lua` context), with Redis's
    /// wording for scripts.
    fn acl_refusal(&self, user: &crate::acl::User, args: &[Bytes]) -> Option<Reply> {
        use crate::acl::{Context, Denial, Denied, Reason};
        let name = Command::table_name(args).ok()?;
        let id = crate::acl::catalog::Catalog::get().id(name)?;
        let denied = user.check(id, args).err()?;
        let (reason, object, text) = match denied {
            Denied::Command => (
                Reason::Command,
                Bytes::copy_from_slice(name.as_bytes()),
                "ERR The user executing the script can't run this command or subcommand",
            ),
            Denied::Key(pos) => (
                Reason::Key,
                args[pos].clone(),
                "ERR The user executing the script can't access at least one of the keys \
                 mentioned in the command arguments",
            ),
            Denied::Channel(pos) => (
                Reason::Channel,
                args[pos].clone(),
                "ERR The user executing the script can't publish to the channel mentioned in \
                 the command",
            ),
        };
        let session = &self.shard.shared.session;
        let max_len = (session.live.get("acllog-max-len"))
            .and_then(|n| n.parse().ok())
            .unwrap_or(128);
        let now_ms = super::super::introspect::unix_us() / 1000;
        session.acl.log().add(
            Denial {
                reason,
                context: Context::Lua,
                object,
                username: user.name.clone(),
                client_info: Bytes::new(),
            },
            now_ms,
            max_len,
        );
        Some(Reply::error(text))
    }
}

impl Host for ScriptHost {
    fn call(
        &self,
        lua: &Lua,
        args: Vec<Bytes>,
        raise: bool,
        resp3: bool,
        suspend: &dyn Fn(bool),
    ) -> mlua::Result<CallReply> {
        if self.info.kill.load(Ordering::Relaxed) {
            return Err(mlua::Error::RuntimeError(
                self.killed_text().trim_start_matches("ERR ").into(),
            ));
        }
        let mut args = args;
        let (reply, shape) = self.run(suspend, &mut args);
        // The words a command did not keep go, and the vector back to the thread's reuse.
        crate::command::argv::give_back(args);
        let mode = if resp3 {
            ReplyMode::Resp3
        } else {
            ReplyMode::Resp2
        };
        if let Reply::Error(text) = &reply {
            if !raise {
                // A `redis.pcall` error stays in the script: it counts in errorstats here, as
                // in Redis (a `redis.call` error is counted once, as the script's reply).
                let record = crate::session::CallRecord {
                    name: None,
                    duration_us: 0,
                    error: error_code(&reply),
                    rejected: false,
                    errorstat: true,
                    slow: None,
                };
                self.shard.record_call(record);
            }
            let mut dashed = b"-".to_vec();
            dashed.extend_from_slice(text);
            let table = error_table(lua, &dashed)?;
            return if raise {
                Err(crate::scripting::env::raise_table(lua, table)?)
            } else {
                // Counted above: returned as the script's reply, it is not counted again
                // (Redis 7.0 marks the table with this field, scripts see it too).
                table.raw_set(convert::COUNTED_ERROR_FIELD, true)?;
                Ok(CallReply::Value(Value::Table(table)))
            };
        }
        convert::reply_to_call(lua, &reply, &shape, mode)
    }

    fn acl_allows(&self, id: usize, args: &[Bytes]) -> bool {
        self.user
            .as_ref()
            .is_none_or(|user| user.check(id, args).is_ok())
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
