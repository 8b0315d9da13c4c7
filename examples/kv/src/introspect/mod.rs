//! The introspection family: COMMAND, SLOWLOG, LATENCY, MEMORY, MONITOR, TIME, LASTSAVE,
//! DEBUG, SHUTDOWN, and Redis Cluster's answers to MOVE and SWAPDB. Its table rows, argument
//! parsing, routing and the merges of what every shard holds are here; the per-shard tables
//! are in [`stats`], the shard's side in `server/introspect.rs`, and the connection answers
//! COMMAND, TIME, LASTSAVE and MONITOR itself.
//!
//! SLOWLOG and LATENCY are per node as in Redis: each shard keeps what its connections ran
//! (SLOWLOG entries carry node-wide increasing ids), and a query merges the shards' parts in
//! time order.

pub mod command;
#[rustfmt::skip]
#[allow(clippy::all)]
mod commands_generated;
pub mod meta;
pub mod stats;

use bytes::Bytes;

pub use command::{CommandQuery, ListFilter};

use crate::command::table::{spec, CommandKind, CommandSpec};
use crate::command::{Command, CommandError, Scope};
use crate::info::ServerInfo;
use crate::reply::Reply;
use crate::routing::{broadcast_merged, Route};

/// A request of this family.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Request {
    Command(CommandQuery),
    Time,
    LastSave,
    Monitor,
    SlowlogGet(usize),
    SlowlogLen,
    SlowlogReset,
    LatencyLatest,
    LatencyHistory(Bytes),
    LatencyReset(Vec<Bytes>),
    LatencyHistogram(Vec<Bytes>),
    LatencyDoctor,
    LatencyGraph(Bytes),
    MemoryStats,
    MemoryDoctor,
    MemoryMallocStats,
    MemoryPurge,
    DebugSleep(u64),
    DebugActiveExpire(bool),
    Shutdown {
        abort: bool,
        /// SAVE (`Some(true)`), NOSAVE (`Some(false)`), or save if save points are set.
        save: Option<bool>,
    },
    /// SAVE: the dataset to `dir/dbfilename`, answered once the file is in place.
    Save,
    /// BGSAVE \[SCHEDULE\]
    BgSave {
        schedule: bool,
    },
    /// A HELP subcommand: the container's name and its lines.
    Help(&'static str, &'static [&'static str]),
}

impl Request {
    /// The command table's name (what INFO commandstats counts).
    pub fn name(&self) -> &'static str {
        match self {
            Request::Command(query) => match query {
                CommandQuery::All => "command",
                CommandQuery::Count => "command|count",
                CommandQuery::Info(_) => "command|info",
                CommandQuery::Docs(_) => "command|docs",
                CommandQuery::List(_) => "command|list",
                CommandQuery::GetKeys { flags: false, .. } => "command|getkeys",
                CommandQuery::GetKeys { flags: true, .. } => "command|getkeysandflags",
            },
            Request::Time => "time",
            Request::LastSave => "lastsave",
            Request::Monitor => "monitor",
            Request::SlowlogGet(_) => "slowlog|get",
            Request::SlowlogLen => "slowlog|len",
            Request::SlowlogReset => "slowlog|reset",
            Request::LatencyLatest => "latency|latest",
            Request::LatencyHistory(_) => "latency|history",
            Request::LatencyReset(_) => "latency|reset",
            Request::LatencyHistogram(_) => "latency|histogram",
            Request::LatencyDoctor => "latency|doctor",
            Request::LatencyGraph(_) => "latency|graph",
            Request::MemoryStats => "memory|stats",
            Request::MemoryDoctor => "memory|doctor",
            Request::MemoryMallocStats => "memory|malloc-stats",
            Request::MemoryPurge => "memory|purge",
            Request::DebugSleep(_) | Request::DebugActiveExpire(_) => "debug",
            Request::Shutdown { .. } => "shutdown",
            Request::Save => "save",
            Request::BgSave { .. } => "bgsave",
            Request::Help(container, _) => match *container {
                "SLOWLOG" => "slowlog|help",
                "LATENCY" => "latency|help",
                "MEMORY" => "memory|help",
                "COMMAND" => "command|help",
                _ => "debug",
            },
        }
    }

    pub fn scope(&self) -> Scope {
        match self {
            Request::Command(_) | Request::Time | Request::Monitor | Request::Help(..) => {
                Scope::Connection
            }
            Request::Shutdown { .. }
            | Request::Save
            | Request::BgSave { .. }
            | Request::LastSave => Scope::Keyed,
            _ => Scope::AllShards,
        }
    }
}

/// Which subcommand a table row parses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sub {
    CommandAll,
    CommandCount,
    CommandDocs,
    CommandGetKeys,
    CommandGetKeysAndFlags,
    CommandInfo,
    CommandList,
    CommandHelp,
    Time,
    LastSave,
    Save,
    BgSave,
    Monitor,
    Shutdown,
    Debug,
    Move,
    SwapDb,
    SlowlogGet,
    SlowlogLen,
    SlowlogReset,
    SlowlogHelp,
    LatencyDoctor,
    LatencyGraph,
    LatencyHistogram,
    LatencyHistory,
    LatencyLatest,
    LatencyReset,
    LatencyHelp,
    MemoryDoctor,
    MemoryMallocStats,
    MemoryPurge,
    MemoryStats,
    MemoryHelp,
}

use Sub as S;

const fn row(
    sub: Sub,
    name: &'static str,
    arity: i64,
    flags: &'static [&'static str],
) -> CommandSpec {
    spec(CommandKind::Introspect(sub), name, arity, flags, (0, 0, 0))
}

const STALE: &[&str] = &["loading", "stale"];
const ADMIN: &[&str] = &["admin", "noscript", "loading", "stale"];

static COMMAND_SUBCOMMANDS: [CommandSpec; 7] = [
    row(S::CommandCount, "command|count", 2, STALE),
    row(S::CommandDocs, "command|docs", -2, STALE),
    row(S::CommandGetKeys, "command|getkeys", -4, STALE),
    row(
        S::CommandGetKeysAndFlags,
        "command|getkeysandflags",
        -4,
        STALE,
    ),
    row(S::CommandHelp, "command|help", 2, STALE),
    row(S::CommandInfo, "command|info", -2, STALE),
    row(S::CommandList, "command|list", -2, STALE),
];

static SLOWLOG_SUBCOMMANDS: [CommandSpec; 4] = [
    row(S::SlowlogGet, "slowlog|get", -2, ADMIN),
    row(S::SlowlogHelp, "slowlog|help", 2, STALE),
    row(S::SlowlogLen, "slowlog|len", 2, ADMIN),
    row(S::SlowlogReset, "slowlog|reset", 2, ADMIN),
];

static LATENCY_SUBCOMMANDS: [CommandSpec; 7] = [
    row(S::LatencyDoctor, "latency|doctor", 2, ADMIN),
    row(S::LatencyGraph, "latency|graph", 3, ADMIN),
    row(S::LatencyHelp, "latency|help", 2, STALE),
    row(S::LatencyHistogram, "latency|histogram", -2, ADMIN),
    row(S::LatencyHistory, "latency|history", 3, ADMIN),
    row(S::LatencyLatest, "latency|latest", 2, ADMIN),
    row(S::LatencyReset, "latency|reset", -2, ADMIN),
];

static MEMORY_SUBCOMMANDS: [CommandSpec; 6] = [
    row(S::MemoryDoctor, "memory|doctor", 2, &[]),
    row(S::MemoryHelp, "memory|help", 2, STALE),
    row(S::MemoryMallocStats, "memory|malloc-stats", 2, &[]),
    row(S::MemoryPurge, "memory|purge", 2, &[]),
    row(S::MemoryStats, "memory|stats", 2, &[]),
    crate::command::keyops::MEMORY_KEY_SUBCOMMANDS[0],
];

/// This family's rows of the command table.
pub(crate) static COMMANDS: [CommandSpec; 13] = [
    CommandSpec {
        subcommands: &COMMAND_SUBCOMMANDS,
        ..row(S::CommandAll, "command", -1, STALE)
    },
    row(S::Time, "time", 1, &["loading", "stale", "fast"]),
    row(S::LastSave, "lastsave", 1, &["loading", "stale", "fast"]),
    row(
        S::Save,
        "save",
        1,
        &["admin", "noscript", "no_async_loading", "no_multi"],
    ),
    row(
        S::BgSave,
        "bgsave",
        -1,
        &["admin", "noscript", "no_async_loading"],
    ),
    row(S::Monitor, "monitor", 1, ADMIN),
    row(
        S::Shutdown,
        "shutdown",
        -1,
        &[
            "admin",
            "noscript",
            "loading",
            "stale",
            "no_multi",
            "allow_busy",
        ],
    ),
    row(S::Debug, "debug", -2, ADMIN),
    spec(
        CommandKind::Introspect(S::Move),
        "move",
        3,
        &["write", "fast"],
        (1, 1, 1),
    ),
    row(S::SwapDb, "swapdb", 3, &["write", "fast"]),
    CommandSpec {
        subcommands: &SLOWLOG_SUBCOMMANDS,
        ..row(S::SlowlogHelp, "slowlog", -2, &[])
    },
    CommandSpec {
        subcommands: &LATENCY_SUBCOMMANDS,
        ..row(S::LatencyHelp, "latency", -2, &[])
    },
    CommandSpec {
        subcommands: &MEMORY_SUBCOMMANDS,
        ..row(S::MemoryHelp, "memory", -2, &[])
    },
];

const SLOWLOG_HELP: &[&str] = &[
    "GET [<count>]",
    "    Return top <count> entries from the slowlog (default: 10, -1 mean all).",
    "    Entries are made of:",
    "    id, timestamp, time in microseconds, arguments array, client IP and port,",
    "    client name",
    "LEN",
    "    Return the length of the slowlog.",
    "RESET",
    "    Reset the slowlog.",
];

const LATENCY_HELP: &[&str] = &[
    "DOCTOR",
    "    Return a human readable latency analysis report.",
    "GRAPH <event>",
    "    Return an ASCII latency graph for the <event> class.",
    "HISTORY <event>",
    "    Return time-latency samples for the <event> class.",
    "LATEST",
    "    Return the latest latency samples for all events.",
    "RESET [<event> ...]",
    "    Reset latency data of one or more <event> classes.",
    "    (default: reset all data for all event classes)",
    "HISTOGRAM [COMMAND ...]",
    "    Return a cumulative distribution of latencies in the format of a histogram for the \
     specified command names.",
    "    If no commands are specified then all histograms are replied.",
];

const MEMORY_HELP: &[&str] = &[
    "DOCTOR",
    "    Return memory problems reports.",
    "MALLOC-STATS",
    "    Return internal statistics report from the memory allocator.",
    "PURGE",
    "    Attempt to purge dirty pages for reclamation by the allocator.",
    "STATS",
    "    Return information about the memory usage of the server.",
    "USAGE <key> [SAMPLES <count>]",
    "    Return memory in bytes used by <key> and its value. Nested values are",
    "    sampled up to <count> times (default: 5, 0 means sample all).",
];

const COMMAND_HELP: &[&str] = &[
    "(no subcommand)",
    "    Return details about all Redis commands.",
    "COUNT",
    "    Return the total number of commands in this Redis server.",
    "LIST",
    "    Return a list of all commands in this Redis server.",
    "INFO [<command-name> ...]",
    "    Return details about multiple Redis commands.",
    "    If no command names are given, documentation details for all",
    "    commands are returned.",
    "DOCS [<command-name> ...]",
    "    Return documentation details about multiple Redis commands.",
    "    If no command names are given, documentation details for all",
    "    commands are returned.",
    "GETKEYS <full-command>",
    "    Return the keys from a full Redis command.",
    "GETKEYSANDFLAGS <full-command>",
    "    Return the keys and the access flags from a full Redis command.",
];

const DEBUG_HELP: &[&str] = &[
    "SLEEP <seconds>",
    "    Stop the server for <seconds> (every shard at once). Decimals allowed.",
    "SET-ACTIVE-EXPIRE <0|1>",
    "    Setting it to 0 disables expiring keys in background when they are not accessed",
    "    (otherwise the Redis behavior). Setting it to 1 reenables back the default.",
    "(Redis's other DEBUG subcommands are not supported: corewire-kv has no RDB to reload,",
    "no allocator map to dump, and no internal encodings to force.)",
];

fn float(arg: &[u8]) -> Result<f64, CommandError> {
    std::str::from_utf8(arg)
        .ok()
        .and_then(|text| text.parse::<f64>().ok())
        .filter(|value| value.is_finite())
        .ok_or(CommandError::NotAFloat)
}

/// Parses `sub`'s arguments (those after the name, or after the subcommand).
pub(crate) fn parse(sub: Sub, args: Vec<Bytes>) -> Result<Command, CommandError> {
    let request = match sub {
        S::CommandAll => Request::Command(CommandQuery::All),
        S::CommandCount => Request::Command(CommandQuery::Count),
        S::CommandInfo if args.is_empty() => Request::Command(CommandQuery::All),
        S::CommandInfo => Request::Command(CommandQuery::Info(args)),
        S::CommandDocs => Request::Command(CommandQuery::Docs(args)),
        S::CommandList => Request::Command(CommandQuery::List(command::list_filter(&args)?)),
        S::CommandGetKeys => Request::Command(CommandQuery::GetKeys { args, flags: false }),
        S::CommandGetKeysAndFlags => Request::Command(CommandQuery::GetKeys { args, flags: true }),
        S::CommandHelp => Request::Help("COMMAND", COMMAND_HELP),
        S::Time => Request::Time,
        S::LastSave => Request::LastSave,
        S::Save => Request::Save,
        S::BgSave => match args.as_slice() {
            [] => Request::BgSave { schedule: false },
            [arg] if arg.eq_ignore_ascii_case(b"schedule") => Request::BgSave { schedule: true },
            _ => return Err(CommandError::Syntax),
        },
        S::Monitor => Request::Monitor,
        S::Move => {
            return Err(CommandError::Text(
                "ERR MOVE is not allowed in cluster mode".into(),
            ))
        }
        S::SwapDb => {
            return Err(CommandError::Text(
                "ERR SWAPDB is not allowed in cluster mode".into(),
            ))
        }
        S::Shutdown => parse_shutdown(&args)?,
        S::Debug => parse_debug(&args)?,
        S::SlowlogGet => match args.first() {
            None => Request::SlowlogGet(10),
            Some(count) => match crate::number::parse_i64(count) {
                Some(-1) => Request::SlowlogGet(usize::MAX),
                Some(n) if n >= 0 => Request::SlowlogGet(n as usize),
                _ => {
                    return Err(CommandError::Text(
                        "ERR count should be greater than or equal to -1".into(),
                    ))
                }
            },
        },
        S::SlowlogLen => Request::SlowlogLen,
        S::SlowlogReset => Request::SlowlogReset,
        S::SlowlogHelp => Request::Help("SLOWLOG", SLOWLOG_HELP),
        S::LatencyDoctor => Request::LatencyDoctor,
        S::LatencyGraph => Request::LatencyGraph(args.into_iter().next().unwrap_or_default()),
        S::LatencyHistogram => Request::LatencyHistogram(args),
        S::LatencyHistory => Request::LatencyHistory(args.into_iter().next().unwrap_or_default()),
        S::LatencyLatest => Request::LatencyLatest,
        S::LatencyReset => Request::LatencyReset(args),
        S::LatencyHelp => Request::Help("LATENCY", LATENCY_HELP),
        S::MemoryDoctor => Request::MemoryDoctor,
        S::MemoryMallocStats => Request::MemoryMallocStats,
        S::MemoryPurge => Request::MemoryPurge,
        S::MemoryStats => Request::MemoryStats,
        S::MemoryHelp => Request::Help("MEMORY", MEMORY_HELP),
    };
    Ok(Command::Introspect(request))
}

/// SHUTDOWN [NOSAVE|SAVE] [NOW] [FORCE] [ABORT]: the log is flushed whatever the options;
/// SAVE and NOSAVE decide the RDB save (by default, a save if save points are set).
fn parse_shutdown(args: &[Bytes]) -> Result<Request, CommandError> {
    let (mut save, mut nosave, mut abort, mut other) = (false, false, false, false);
    for arg in args {
        match arg.to_ascii_lowercase().as_slice() {
            b"save" => save = true,
            b"nosave" => nosave = true,
            b"abort" => abort = true,
            b"now" | b"force" => other = true,
            _ => return Err(CommandError::Syntax),
        }
    }
    if (save && nosave) || (abort && (save || nosave || other)) {
        return Err(CommandError::Syntax);
    }
    let save = if save {
        Some(true)
    } else if nosave {
        Some(false)
    } else {
        None
    };
    Ok(Request::Shutdown { abort, save })
}

fn parse_debug(args: &[Bytes]) -> Result<Request, CommandError> {
    let sub = args[0].to_ascii_lowercase();
    match (sub.as_slice(), &args[1..]) {
        (b"help", []) => Ok(Request::Help("DEBUG", DEBUG_HELP)),
        (b"sleep", [seconds]) => {
            let seconds = float(seconds)?;
            Ok(Request::DebugSleep((seconds.max(0.0) * 1_000_000.0) as u64))
        }
        (b"set-active-expire", [flag]) => Ok(Request::DebugActiveExpire(
            crate::number::parse_i64(flag).ok_or(CommandError::NotAnInteger)? != 0,
        )),
        (b"reload" | b"loadaof" | b"jmap" | b"object" | b"digest" | b"digest-value", _) => {
            Err(CommandError::Text(format!(
                "ERR DEBUG {} is not supported by corewire-kv (no RDB, no allocator map, no \
                 internal encodings); see DEBUG HELP",
                String::from_utf8_lossy(&args[0]).to_uppercase()
            )))
        }
        _ => Err(CommandError::Text(format!(
            "ERR unknown subcommand or wrong number of arguments for '{}'. Try DEBUG HELP.",
            String::from_utf8_lossy(&args[0])
        ))),
    }
}

/// Where a request of this family runs: every shard, its parts merged here.
pub fn route(request: Request, shards: usize) -> Route {
    let (merge, context): (crate::routing::MergeFn, Vec<Bytes>) = match &request {
        Request::SlowlogGet(count) => (merge_slowlog_get, vec![Bytes::from(count.to_string())]),
        Request::SlowlogLen => (merge_slowlog_len, Vec::new()),
        Request::LatencyLatest => (merge_latency_latest, Vec::new()),
        Request::LatencyHistory(_) => (merge_latency_history, Vec::new()),
        Request::LatencyReset(_) => (merge_latency_reset, Vec::new()),
        Request::LatencyDoctor => (merge_latency_doctor, Vec::new()),
        Request::LatencyGraph(event) => (merge_latency_graph, vec![event.clone()]),
        Request::LatencyHistogram(names) => (merge_histogram, names.clone()),
        Request::MemoryStats => (merge_memory_stats, Vec::new()),
        Request::MemoryDoctor => (merge_memory_doctor, Vec::new()),
        Request::Shutdown { .. } | Request::Save | Request::BgSave { .. } | Request::LastSave => {
            // Shard 0 asks the server's owner to stop it, and coordinates saves.
            return Route::Single {
                shard: 0,
                command: Command::Introspect(request),
            };
        }
        _ => (merge_first, Vec::new()),
    };
    broadcast_merged(Command::Introspect(request), shards, merge, context)
}

fn merge_first(parts: Vec<Reply>, _: &ServerInfo, _: &[Bytes]) -> Reply {
    parts.into_iter().next().unwrap_or(Reply::ok())
}

fn merge_slowlog_get(parts: Vec<Reply>, _: &ServerInfo, context: &[Bytes]) -> Reply {
    let count = context
        .first()
        .and_then(|c| std::str::from_utf8(c).ok()?.parse().ok())
        .unwrap_or(10);
    stats::merge_slowlog(parts, count)
}

/// Each part: `[len, max_len]`; the node's log holds the newest `max_len` of them all.
fn merge_slowlog_len(parts: Vec<Reply>, _: &ServerInfo, _: &[Bytes]) -> Reply {
    let mut total = 0i64;
    let mut max_len = i64::MAX;
    for part in parts {
        if let Reply::Array(fields) = part {
            if let [Reply::Integer(len), Reply::Integer(max)] = fields[..] {
                total += len;
                max_len = max_len.min(max);
            }
        }
    }
    Reply::Integer(total.min(max_len))
}

fn merge_latency_latest(parts: Vec<Reply>, _: &ServerInfo, _: &[Bytes]) -> Reply {
    Reply::Array(
        stats::merge_latency(&parts)
            .into_iter()
            .filter_map(|(name, history)| {
                let (time, latest) = history.latest()?;
                Some(Reply::Array(vec![
                    Reply::Bulk(Bytes::from(name)),
                    Reply::Integer(time as i64),
                    Reply::Integer(latest as i64),
                    Reply::Integer(history.max_ms() as i64),
                ]))
            })
            .collect(),
    )
}

/// Each part is the shard's events restricted to the one asked about.
fn merge_latency_history(parts: Vec<Reply>, _: &ServerInfo, _: &[Bytes]) -> Reply {
    Reply::Array(
        stats::merge_latency(&parts)
            .into_iter()
            .flat_map(|(_, history)| history.samples().collect::<Vec<_>>())
            .map(|(time, latency)| {
                Reply::Array(vec![
                    Reply::Integer(time as i64),
                    Reply::Integer(latency as i64),
                ])
            })
            .collect(),
    )
}

/// Each part: the events the shard reset; the reply counts distinct ones.
fn merge_latency_reset(parts: Vec<Reply>, _: &ServerInfo, _: &[Bytes]) -> Reply {
    let mut names: Vec<Bytes> = parts
        .into_iter()
        .flat_map(|part| match part {
            Reply::Array(items) => items,
            _ => Vec::new(),
        })
        .filter_map(|item| match item {
            Reply::Bulk(name) => Some(name),
            _ => None,
        })
        .collect();
    names.sort();
    names.dedup();
    Reply::Integer(names.len() as i64)
}

fn merge_latency_doctor(parts: Vec<Reply>, _: &ServerInfo, _: &[Bytes]) -> Reply {
    let events = stats::merge_latency(&parts);
    let mut text = String::new();
    if events.is_empty() {
        text.push_str(
            "Dave, no latency spike was observed during the lifetime of this Redis instance, \
             not in the slightest bit. I honestly think you ought to sleep a bit more. (If \
             latency-monitor-threshold is 0, events are not recorded: CONFIG SET it to a \
             number of milliseconds.)\n",
        );
    } else {
        text.push_str(
            "Dave, I have observed latency spikes in this Redis instance. You don't mind \
             talking about it, do you Dave?\n\n",
        );
        for (i, (name, history)) in events.iter().enumerate() {
            let samples: Vec<u64> = history.samples().map(|(_, l)| l).collect();
            let avg = samples.iter().sum::<u64>() / samples.len().max(1) as u64;
            text.push_str(&format!(
                "{}. {name}: {} latency spikes (average {avg}ms, worst {}ms).\n",
                i + 1,
                samples.len(),
                history.max_ms()
            ));
        }
        text.push_str(
            "\nI have a few advices for you:\n\n- The shards of corewire-kv run commands to \
             completion: a slow command (KEYS, a big DEL or SUNIONSTORE) holds its shard. Check \
             SLOWLOG GET for the commands and keys involved.\n",
        );
    }
    Reply::Bulk(Bytes::from(text))
}

fn merge_latency_graph(parts: Vec<Reply>, _: &ServerInfo, context: &[Bytes]) -> Reply {
    let event = context.first().cloned().unwrap_or_default();
    let events = stats::merge_latency(&parts);
    let Some((name, history)) = events
        .into_iter()
        .find(|(name, _)| name.as_bytes() == &event[..])
    else {
        return Reply::error(format!(
            "ERR No samples available for event '{}'",
            String::from_utf8_lossy(&event)
        ));
    };
    let samples: Vec<(u64, u64)> = history.samples().collect();
    let max = history.max_ms().max(1);
    let mut text = format!(
        "{name} - high {} ms, low {} ms (all time high {} ms)\n",
        samples.iter().map(|s| s.1).max().unwrap_or(0),
        samples.iter().map(|s| s.1).min().unwrap_or(0),
        history.max_ms()
    );
    text.push_str(&"-".repeat(80));
    text.push('\n');
    for row in (1..=4).rev() {
        for (_, latency) in &samples {
            text.push(if latency * 4 >= max * row { '#' } else { ' ' });
        }
        text.push('\n');
    }
    Reply::Bulk(Bytes::from(text))
}

/// Each part: the shard's call statistics; the reply: each asked (or every) command with
/// calls, its histogram.
fn merge_histogram(parts: Vec<Reply>, _: &ServerInfo, names: &[Bytes]) -> Reply {
    let mut merged = stats::CallStats::default();
    for part in &parts {
        merged.merge_reply(part);
    }
    let mut wanted: Vec<&'static str> = Vec::new();
    if names.is_empty() {
        wanted.extend(merged.commands().map(|(name, _)| name));
        wanted.sort_unstable();
    } else {
        for name in names {
            let Some(name) = std::str::from_utf8(name).ok() else {
                continue;
            };
            let Some(meta) = meta::find(name) else {
                continue;
            };
            // A container asks for its subcommands.
            if meta.subcommands.is_empty() {
                wanted.push(meta.name);
            } else {
                wanted.extend(meta.subcommands.iter().map(|sub| sub.name));
            }
        }
    }
    let mut items = Vec::new();
    for name in wanted {
        let Some(histogram) = merged
            .command(name)
            .and_then(|stat| stat.histogram.as_ref())
        else {
            continue;
        };
        if items
            .iter()
            .any(|item| *item == Reply::Bulk(Bytes::from_static(name.as_bytes())))
        {
            continue;
        }
        items.push(Reply::Bulk(Bytes::from_static(name.as_bytes())));
        items.push(stats::histogram_reply(histogram));
    }
    Reply::Map(items)
}

/// Each part: `[keys, expires, data_bytes, used_memory, table_bytes, clients_bytes]` of the
/// shard: its keyspace's counts and estimate, the heap its key table holds and its
/// connections' buffers.
fn memory_totals(parts: &[Reply]) -> [u64; 6] {
    let mut totals = [0u64; 6];
    for part in parts {
        if let Reply::Array(fields) = part {
            for (total, field) in totals.iter_mut().zip(fields) {
                if let Reply::Integer(n) = field {
                    *total += *n as u64;
                }
            }
        }
    }
    totals
}

/// MEMORY STATS, with Redis 7.0's fields. Where `corewire-kv`'s allocator counts the heap
/// (`crate::heap`), `total.allocated` is that count and the parts are measured: the heap at
/// start-up, the connections' buffers (`clients.normal`), the key table with its spare
/// capacity (`overhead.hashtable.main`); `dataset.bytes` is the rest (keys, values and
/// their allocations). The `allocator.*`, `rss-overhead.*` and `fragmentation*` fields
/// compare the count with the process's RSS: the allocator's free pages not yet given back,
/// the code and the runtime's rings. Without that allocator the figures are the keyspace's
/// estimate (what `--maxmemory` limits).
fn merge_memory_stats(parts: Vec<Reply>, server: &ServerInfo, _: &[Bytes]) -> Reply {
    let [keys, expires, data, estimate, table, clients] = memory_totals(&parts);
    let int = |n: u64| Reply::Integer(n as i64);
    let bulk = |s: &'static str| Reply::Bulk(Bytes::from_static(s.as_bytes()));
    let double = |value: f64| Reply::Double(crate::store::format_double(value));
    let ratio = |part: u64, whole: u64| {
        double(if whole == 0 {
            0.0
        } else {
            part as f64 / whole as f64
        })
    };
    let percent = |part: u64, whole: u64| {
        double(if whole == 0 {
            0.0
        } else {
            part as f64 * 100.0 / whole as f64
        })
    };
    let expires_overhead = expires * 32;
    let (total, peak, startup, overhead, dataset) = match server.heap {
        Some(heap) => {
            let overhead = heap.startup + clients + table + expires_overhead;
            let dataset = heap.allocated.saturating_sub(overhead);
            (
                heap.allocated,
                heap.peak.max(heap.allocated),
                heap.startup,
                overhead,
                dataset,
            )
        }
        None => {
            let used = estimate + clients;
            (used, used, 0, used.saturating_sub(data), data)
        }
    };
    let rss = server.used_memory_rss;
    Reply::Map(vec![
        bulk("peak.allocated"),
        int(peak),
        bulk("total.allocated"),
        int(total),
        bulk("startup.allocated"),
        int(startup),
        bulk("replication.backlog"),
        int(0),
        bulk("clients.slaves"),
        int(0),
        bulk("clients.normal"),
        int(clients),
        bulk("cluster.links"),
        int(0),
        bulk("aof.buffer"),
        int(0),
        bulk("lua.caches"),
        int(0),
        bulk("functions.caches"),
        int(0),
        bulk("db.0"),
        Reply::Map(vec![
            bulk("overhead.hashtable.main"),
            int(table),
            bulk("overhead.hashtable.expires"),
            int(expires_overhead),
        ]),
        bulk("overhead.total"),
        int(overhead),
        bulk("keys.count"),
        int(keys),
        bulk("keys.bytes-per-key"),
        int(total.saturating_sub(startup).checked_div(keys).unwrap_or(0)),
        bulk("dataset.bytes"),
        int(dataset),
        bulk("dataset.percentage"),
        percent(dataset, total.saturating_sub(startup)),
        bulk("peak.percentage"),
        percent(total, peak),
        bulk("allocator.allocated"),
        int(total),
        bulk("allocator.resident"),
        int(rss),
        bulk("allocator.rss-ratio"),
        ratio(rss, total),
        bulk("allocator.rss-bytes"),
        int(rss.saturating_sub(total)),
        bulk("fragmentation"),
        ratio(rss, total),
        bulk("fragmentation.bytes"),
        int(rss.saturating_sub(total)),
    ])
}

fn merge_memory_doctor(parts: Vec<Reply>, _: &ServerInfo, _: &[Bytes]) -> Reply {
    let [keys, _, _, used, _, _] = memory_totals(&parts);
    let text = if keys == 0 {
        "Hi Sam, this instance is empty or is using very little memory, my issues detector \
         can't be used in these conditions. Please, leave for your mission on Earth and fill \
         it with some data. The new Sam and I will be back to our programming as soon as I \
         finished rebooting."
            .to_owned()
    } else {
        format!(
            "Hi Sam, I can't find any memory issue in your instance. I can only account for \
             what occurs on this base: {keys} keys in about {used} bytes (corewire-kv estimates \
             its keyspace's memory from the keys and values it holds; --maxmemory limits that \
             estimate)."
        )
    };
    Reply::Bulk(Bytes::from(text))
}

/// TIME: seconds and microseconds of the Unix time.
pub fn time_reply(unix_us: u64) -> Reply {
    Reply::Array(vec![
        Reply::Bulk(Bytes::from((unix_us / 1_000_000).to_string())),
        Reply::Bulk(Bytes::from((unix_us % 1_000_000).to_string())),
    ])
}

/// A HELP subcommand's reply (Redis's `addReplyHelp`).
pub fn help_reply(container: &str, lines: &[&'static str]) -> Reply {
    let mut out = vec![Reply::Simple(Bytes::from(format!(
        "{container} <subcommand> [<arg> [value] [opt] ...]. Subcommands are:"
    )))];
    out.extend(lines.iter().map(|line| Reply::simple(line)));
    out.push(Reply::simple("HELP"));
    out.push(Reply::simple("    Prints this help."));
    Reply::Array(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_line(line: &str) -> Result<Command, CommandError> {
        Command::parse(line.split(' ').map(|s| Bytes::from(s.to_owned())).collect())
    }

    #[test]
    fn parse_errors_as_redis() {
        assert_eq!(
            parse_line("slowlog get -2").unwrap_err().message(),
            b"ERR count should be greater than or equal to -1".to_vec()
        );
        assert_eq!(
            parse_line("slowlog get -1"),
            Ok(Command::Introspect(Request::SlowlogGet(usize::MAX)))
        );
        assert!(parse_line("latency help xxx")
            .unwrap_err()
            .message()
            .ends_with(b"wrong number of arguments for 'latency|help' command"));
        assert_eq!(
            parse_line("command list filterby bad_arg").unwrap_err(),
            CommandError::Syntax
        );
        assert_eq!(
            parse_line("move k 1").unwrap_err().message(),
            b"ERR MOVE is not allowed in cluster mode".to_vec()
        );
        assert_eq!(
            parse_line("debug sleep 0.2"),
            Ok(Command::Introspect(Request::DebugSleep(200_000)))
        );
        assert!(parse_line("debug reload").is_err());
        assert_eq!(
            parse_line("shutdown save nosave"),
            Err(CommandError::Syntax)
        );
        assert_eq!(
            time_reply(1_000_002_000_003),
            Reply::Array(vec![
                Reply::Bulk(Bytes::from("1000002")),
                Reply::Bulk(Bytes::from("3")),
            ])
        );
    }
}
