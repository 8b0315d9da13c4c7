//! SCRIPT and FUNCTION subcommands, and the function libraries' persistence in shard 0's AOF.

use super::*;

/// SCRIPT and FUNCTION subcommands (answered on the connection's shard).
pub(super) fn admin(shard: &Shard, command: ScriptCommand) -> Reply {
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
            let sha = Sha1::of(&body);
            if let Ok(mut cache) = scripting.cache.lock() {
                cache.bodies.insert(sha, body);
            }
            Reply::Bulk(Bytes::from(sha.hex()))
        }
        ScriptOp::ScriptExists => {
            let Ok(cache) = scripting.cache.lock() else {
                return poisoned();
            };
            Reply::Array(
                args.iter()
                    .map(|sha| {
                        let known =
                            Sha1::from_hex(sha).is_some_and(|sha| cache.bodies.contains_key(&sha));
                        Reply::Integer(i64::from(known))
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
                    scripting.generation.fetch_add(1, Ordering::Release);
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

pub(super) fn bulk(text: &str) -> Reply {
    Reply::Bulk(Bytes::copy_from_slice(text.as_bytes()))
}

pub(super) fn stats(scripting: &ScriptingShared) -> Reply {
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
                Reply::Array(
                    std::iter::once(Bytes::from_static(info.op.name().as_bytes()))
                        .chain(info.words.iter().cloned())
                        .map(Reply::Bulk)
                        .collect(),
                ),
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
pub(super) fn kill(shard: &Shard, function: bool) -> Reply {
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

pub(super) fn help(op: ScriptOp) -> Reply {
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
pub(super) fn functions_op(payload: &[u8], out: &mut bytes::BytesMut) {
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
/// a log rewrite) restores them, and streams them whole to replicas. Shard 0 dumps them when
/// it records, so its last record is always the newest state whatever order changes from
/// several shards arrive in (forwarding the commands themselves, as Redis does with one
/// thread, could reorder two shards' FUNCTION LOADs); and a replica can take the record
/// twice (a full sync's RDB already holds what follows its cut).
pub(super) fn log_functions(shard: &Shard) {
    if shard.id == 0 {
        log_functions_here(shard);
    } else {
        shard
            .forward
            .push_work(0, crate::server::forward::Work::LogFunctions);
    }
}

/// On shard 0: logs the libraries as they are now, and streams them to replicas, as
/// `FUNCTION RESTORE <payload> FLUSH` (Redis's payload: redis-server replicas take it).
pub(crate) fn log_functions_here(shard: &Shard) {
    let streaming = crate::server::repl_feed::feeding();
    if shard.aof.is_none() && !streaming {
        return;
    }
    let Ok(payload) = shard.shared.scripting.libraries.lock().map(|l| l.dump()) else {
        return;
    };
    let op = crate::change::WriteOp::Command {
        name: "FUNCTION",
        key: b"RESTORE",
        args: &[payload, Bytes::from_static(b"FLUSH")],
    };
    if let Some(aof) = &shard.aof {
        aof.log(op);
    }
    if streaming {
        crate::server::repl_feed::stream(op);
    }
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
pub(crate) fn restore_logged(shared: &crate::server::shared::ServerShared, payload: &[u8]) {
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
