//! A script's run on its coroutine: the coroutine's driver, the Lua call, and Redis's error
//! replies.

use super::*;
use crate::scripting::call::Words;

/// What the shard's driver gives the script coroutine.
pub(super) enum Resume {
    /// Run this script.
    Run(Box<(Rc<ScriptHost>, Prepared)>),
    /// Go on after a [`Suspend::Slice`] or [`Suspend::Future`].
    Continue,
    /// End (the coroutine is dropped).
    Stop,
}

type ScriptCoroutine = Coroutine<Resume, Suspend, (), DefaultStack>;

/// A shard's script coroutine: one Lua state's calls, the suspending functions and the hook
/// set up once, then one script after another (each waits for the previous: it holds the
/// shard). If dropped unfinished (the server stops), the script is told to stop at each
/// resume rather than unwound through Lua's C frames.
pub(super) struct Runner {
    coroutine: Option<ScriptCoroutine>,
    engine: Rc<Engine>,
    current: Rc<RefCell<Option<Rc<ScriptHost>>>>,
}

impl Runner {
    pub(super) fn new(engine: Rc<Engine>) -> Runner {
        let current = Rc::new(RefCell::new(None));
        let (body_engine, body_current) = (engine.clone(), current.clone());
        let stack = DefaultStack::new(STACK_BYTES).unwrap_or_default();
        let coroutine = Coroutine::with_stack(stack, move |yielder, first| {
            serve(yielder, &body_engine, &body_current, first)
        });
        Runner {
            coroutine: Some(coroutine),
            engine,
            current,
        }
    }

    pub(super) fn engine(&self) -> &Rc<Engine> {
        &self.engine
    }

    fn resume(&mut self, resume: Resume) -> CoroutineResult<Suspend, ()> {
        match self.coroutine.as_mut() {
            Some(coroutine) if !coroutine.done() => coroutine.resume(resume),
            _ => CoroutineResult::Return(()),
        }
    }
}

impl Drop for Runner {
    fn drop(&mut self) {
        let Some(mut coroutine) = self.coroutine.take() else {
            return;
        };
        if !coroutine.started() {
            return;
        }
        let current = self.current.borrow().clone();
        if let Some(host) = &current {
            host.info.kill.store(true, Ordering::Relaxed);
        }
        for _ in 0..10_000 {
            if coroutine.done() {
                return;
            }
            if let Some(host) = &current {
                *host.result.borrow_mut() = Some(Reply::error(KILLED));
            }
            if let CoroutineResult::Return(()) = coroutine.resume(Resume::Stop) {
                return;
            }
        }
        // A script that keeps catching its own end: its stack is leaked, not unwound.
        std::mem::forget(coroutine);
    }
}

/// Runs one script on the shard's coroutine, serving its suspensions.
pub(super) async fn drive(
    shard: &Rc<Shard>,
    engine: &Rc<Engine>,
    host: &Rc<ScriptHost>,
    prepared: Prepared,
) -> Reply {
    let mut runner = shard.scripts.runner(engine);
    // Each stretch the script runs without waiting is one block of the shard's log: its
    // writes reach the AOF and replicas together (a script that never waits, most of them,
    // as one MULTI/EXEC), and its `redis.call`s here skip a block of their own. A stretch
    // ends at every suspension, before anything is awaited.
    let held = &host.held;
    let mut step = held.in_block(|| runner.resume(Resume::Run(Box::new((host.clone(), prepared)))));
    loop {
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
            CoroutineResult::Yield(Suspend::Done(reply)) => {
                shard.scripts.put_runner(runner);
                return reply;
            }
            CoroutineResult::Return(()) => {
                return Reply::error("ERR internal error: the script coroutine ended");
            }
        }
        step = held.in_block(|| runner.resume(Resume::Continue));
    }
}

/// The coroutine's body: sets up this Lua state's `redis.call` / `redis.pcall` (they suspend
/// the script directly: calling a Lua function to suspend would need stack slots a call with
/// 8000 arguments lacks), the suspending function the hook calls, and the hook; then runs
/// the scripts it is given until told to stop.
fn serve(
    yielder: &Yielder<Resume, Suspend>,
    engine: &Engine,
    current: &Rc<RefCell<Option<Rc<ScriptHost>>>>,
    first: Resume,
) {
    let lua = engine.env.lua.clone();
    let running = Rc::new(Running::default());
    lua.set_app_data(running.clone());
    let suspend_now = |future: bool| {
        // Resumed with `Continue`, or `Stop` when dropped (the kill flag then ends it).
        let _ = yielder.suspend(if future {
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
        let call = scope.create_function(|lua, args: crate::scripting::call::CallArgs| {
            crate::scripting::env::call(lua, &running, args, true, &suspend_now)
        })?;
        let pcall = scope.create_function(|lua, args: crate::scripting::call::CallArgs| {
            crate::scripting::env::call(lua, &running, args, false, &suspend_now)
        })?;
        engine.env.redis.raw_set("call", call)?;
        engine.env.redis.raw_set("pcall", pcall)?;
        let hook_current = current.clone();
        let hook = move |lua: &Lua, _debug: &mlua::debug::Debug<'_>| {
            let host = hook_current.borrow().clone();
            match host {
                Some(host) => host.hook(lua),
                None => Ok(VmState::Continue),
            }
        };
        lua.set_hook(
            HookTriggers::new().every_nth_instruction(HOOK_EVERY),
            hook.clone(),
        )?;
        let mut job = first;
        loop {
            match job {
                Resume::Run(run) => {
                    let (host, prepared) = *run;
                    *current.borrow_mut() = Some(host.clone());
                    running.begin(host.clone());
                    let reply = call_script(&lua, engine, &running, &prepared);
                    running.end();
                    *current.borrow_mut() = None;
                    if host.info.kill.load(Ordering::Relaxed) {
                        // A kill left the hook firing at every instruction: back to normal.
                        lua.set_hook(
                            HookTriggers::new().every_nth_instruction(HOOK_EVERY),
                            hook.clone(),
                        )?;
                    }
                    // Nothing of the run stays referred to while the coroutine waits for
                    // the next one (its program is then free to serve another run).
                    drop(host);
                    job = yielder.suspend(Suspend::Done(reply));
                }
                Resume::Continue => {
                    job = yielder.suspend(Suspend::Done(Reply::error(
                        "ERR internal error: no script to continue",
                    )));
                }
                Resume::Stop => break,
            }
        }
        lua.remove_hook();
        lua.remove_app_data::<Rc<Running>>();
        lua.unset_named_registry_value(SUSPEND)?;
        Ok(())
    });
    if let Err(error) = outcome {
        tracing::error!(error = %lua_message(&error), "the script coroutine failed");
    }
}

pub(super) fn call_script(
    lua: &Lua,
    engine: &Engine,
    running: &Running,
    prepared: &Prepared,
) -> Reply {
    // KEYS and ARGV: new tables per run, built where they are stored or passed.
    let result = match &prepared.what {
        What::Eval { sha, .. } => {
            let Some(function) = engine.scripts.borrow().get(sha).cloned() else {
                return Reply::error("NOSCRIPT No matching script. Please use EVAL.");
            };
            let env = &engine.env;
            let set = |name: &mlua::LuaString, items: &[Bytes]| match Words::fit(items) {
                Some(words) => env.globals.raw_set(name, words),
                None => env.globals.raw_set(name, Words::table(lua, items)?),
            };
            if let Err(error) = set(&env.keys_name, prepared.keys())
                .and_then(|()| set(&env.argv_name, prepared.argv()))
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
            match (Words::fit(prepared.keys()), Words::fit(prepared.argv())) {
                (Some(keys), Some(argv)) => function.call::<Value>((keys, argv)),
                _ => match (
                    Words::table(lua, prepared.keys()),
                    Words::table(lua, prepared.argv()),
                ) {
                    (Ok(keys), Ok(argv)) => function.call::<Value>((keys, argv)),
                    (Err(error), _) | (_, Err(error)) => return lua_failure(error),
                },
            }
        }
    };
    match result {
        Ok(value) => {
            // The protocol the script last chose with `redis.setresp` decides how its
            // booleans reach the caller.
            let mode = match running.resp.get() {
                3 => convert::ReplyMode::Resp3,
                _ => convert::ReplyMode::Resp2,
            };
            convert::script_reply(&value, mode)
        }
        Err(error) => error_reply(&error, prepared),
    }
}

/// A script's error as Redis 7.0 replies it: the error's own text (a Lua error gets `ERR`),
/// then where it happened.
pub(super) fn error_reply(error: &mlua::Error, prepared: &Prepared) -> Reply {
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
            prepared.label()
        )),
        None => Reply::error(text),
    }
}

/// The line in a Lua error message's `user_script:N:` prefix.
pub(super) fn script_line(message: &str) -> Option<u32> {
    let rest = message
        .strip_prefix("user_script:")
        .or_else(|| message.strip_prefix("user_function:"))?;
    rest.split(':').next()?.parse().ok()
}

/// A Redis error table raised by `redis.call` (its text and the line of the call).
pub(super) fn find_error_value(error: &mlua::Error) -> Option<(String, Option<u32>)> {
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
