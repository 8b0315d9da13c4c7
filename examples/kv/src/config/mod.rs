//! Configuration, one place for all of it: the option table ([`table`]), Redis's file format
//! and command line ([`file`](mod@file), [`cli`], [`load`]), the running server's values ([`live`]), and the
//! CONFIG command family (GET, SET, RESETSTAT, REWRITE, HELP), whose table entries and
//! argument parsing are here; the connection answers GET, SET, REWRITE and HELP from the
//! shared [`LiveConfig`], and RESETSTAT and a SET's [`Setting`]s go to every shard.

pub mod bind;
pub mod cli;
pub mod file;
pub mod live;
pub mod load;
pub mod options;
pub mod rewrite;
pub mod table;
pub mod value;

use bytes::Bytes;

pub use live::LiveConfig;
pub use load::{Loaded, Values};

use crate::command::table::{spec, CommandKind, CommandSpec};
use crate::command::{Command, CommandError};
use crate::glob::glob_match;
use crate::notify::EventFlags;
use crate::reply::Reply;
use crate::store::{EncodingLimits, EvictionPolicy};

/// A setting that changes what the shards do, sent to every shard by CONFIG SET.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Setting {
    /// `maxmemory`, bytes for the whole server (0: no limit); each shard takes its share.
    MaxMemory(u64),
    MaxMemoryPolicy(EvictionPolicy),
    MaxClients(usize),
    MaxMemorySamples(usize),
    /// Which keyspace events the shards publish.
    Notify(EventFlags),
    /// The thresholds OBJECT ENCODING reports against.
    Encoding(EncodingLimits),
    /// `tracking-table-max-keys`: the shards forget tracked keys down to it.
    TrackingMaxKeys(u64),
    /// `protected-mode yes|no`.
    ProtectedMode(bool),
}

const FLAGS: &[&str] = &["admin", "noscript", "loading", "stale"];

/// CONFIG's subcommands, as Redis 7.0 declares them.
pub(crate) static SUBCOMMANDS: [CommandSpec; 5] = [
    spec(
        CommandKind::Config(Sub::Get),
        "config|get",
        -3,
        FLAGS,
        (0, 0, 0),
    ),
    spec(
        CommandKind::Config(Sub::Set),
        "config|set",
        -4,
        FLAGS,
        (0, 0, 0),
    ),
    spec(
        CommandKind::Config(Sub::ResetStat),
        "config|resetstat",
        2,
        FLAGS,
        (0, 0, 0),
    ),
    spec(
        CommandKind::Config(Sub::Rewrite),
        "config|rewrite",
        2,
        FLAGS,
        (0, 0, 0),
    ),
    spec(
        CommandKind::Config(Sub::Help),
        "config|help",
        2,
        &["loading", "stale"],
        (0, 0, 0),
    ),
];

/// Which CONFIG subcommand a table entry parses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sub {
    Get,
    Set,
    ResetStat,
    Rewrite,
    Help,
}

const HELP: &[&str] = &[
    "GET <pattern>",
    "    Return parameters matching the glob-like <pattern> and their values.",
    "SET <directive> <value>",
    "    Set the configuration <directive> to <value>.",
    "RESETSTAT",
    "    Reset statistics reported by the INFO command.",
    "REWRITE",
    "    Rewrite the configuration file.",
];

/// Parses CONFIG `sub`'s arguments (after the subcommand).
pub(crate) fn parse(sub: Sub, args: Vec<Bytes>) -> Result<Command, CommandError> {
    Ok(match sub {
        Sub::Get => Command::ConfigGet(args),
        Sub::Set => {
            if !args.len().is_multiple_of(2) {
                return Err(CommandError::WrongArity {
                    command: "config|set",
                });
            }
            let mut pairs = Vec::with_capacity(args.len() / 2);
            let mut args = args.into_iter();
            while let (Some(name), Some(value)) = (args.next(), args.next()) {
                pairs.push((name, value));
            }
            Command::ConfigSet(pairs)
        }
        Sub::ResetStat => Command::ConfigResetStat,
        Sub::Rewrite => Command::ConfigRewrite,
        Sub::Help => Command::Help {
            command: "config|help",
            lines: HELP,
        },
    })
}

/// CONFIG GET: every option whose name or alias a pattern matches (an exact name also finds
/// the hidden ones), each once, as `[name, value, ...]`.
pub fn get(live: &LiveConfig, patterns: &[Bytes]) -> Reply {
    let values = live.values();
    let mut items = Vec::new();
    let mut seen: Vec<&str> = Vec::new();
    for pattern in patterns {
        let exact = !pattern.iter().any(|b| matches!(b, b'*' | b'?' | b'['));
        for (index, option) in table::OPTIONS.iter().enumerate() {
            let names = std::iter::once(option.name).chain(option.alias);
            for name in names {
                let matched = if exact {
                    pattern.eq_ignore_ascii_case(name.as_bytes())
                } else {
                    !option.has(table::HIDDEN) && glob_match(pattern, name.as_bytes(), true)
                };
                if matched && !seen.contains(&name) {
                    seen.push(name);
                    items.push(Reply::Bulk(Bytes::from_static(name.as_bytes())));
                    items.push(Reply::Bulk(Bytes::from(values.get(index).to_owned())));
                }
            }
        }
    }
    Reply::Array(items)
}

/// CONFIG SET: all or nothing; `Ok` holds what the shards must apply.
pub fn set(
    live: &LiveConfig,
    pairs: &[(Bytes, Bytes)],
    glue: &live::GlueApply<'_>,
) -> Result<Vec<Setting>, Reply> {
    live.config_set_with(pairs, glue).map_err(Reply::error)
}

/// CONFIG REWRITE.
pub fn rewrite_command(live: &LiveConfig) -> Reply {
    let Some(path) = &live.config_file else {
        return Reply::error("ERR The server is running without a config file");
    };
    match rewrite::rewrite_file(path, &live.values()) {
        Ok(()) => Reply::ok(),
        Err(error) => {
            tracing::warn!(path = %path.display(), %error, "CONFIG REWRITE failed");
            Reply::error(format!("ERR Rewriting config file: {error}"))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(reply: Reply) -> Vec<String> {
        let Reply::Array(items) = reply else {
            panic!("not an array")
        };
        items
            .chunks(2)
            .map(|pair| match &pair[0] {
                Reply::Bulk(name) => String::from_utf8_lossy(name).into_owned(),
                _ => panic!(),
            })
            .collect()
    }

    #[test]
    fn get_matches_names_aliases_and_hidden_only_exactly() {
        let live = LiveConfig::default();
        let got = names(get(
            &live,
            &[
                Bytes::from("maxmemory"),
                Bytes::from("maxmemory*"),
                Bytes::from("bind"),
                Bytes::from("*of"),
            ],
        ));
        assert!(got.contains(&"maxmemory-samples".into()));
        assert!(got.contains(&"maxmemory-clients".into()));
        assert!(got.contains(&"replicaof".into()) && got.contains(&"slaveof".into()));
        assert_eq!(got.iter().filter(|n| *n == "maxmemory").count(), 1);
        assert!(!names(get(&live, &[Bytes::from("*")])).contains(&"key-load-delay".into()));
        assert_eq!(
            names(get(&live, &[Bytes::from("key-load-delay")])),
            vec!["key-load-delay"]
        );
    }
}
