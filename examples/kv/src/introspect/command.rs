//! COMMAND and its subcommands, from Redis 7.0's description of every command
//! ([`super::meta`]) restricted to the commands this server has: COMMAND (INFO), COUNT,
//! DOCS, LIST [FILTERBY MODULE|ACLCAT|PATTERN], GETKEYS, GETKEYSANDFLAGS.

use bytes::Bytes;

use super::meta::{self, Meta};
use crate::command::table;
use crate::glob::glob_match;
use crate::reply::Reply;

/// A COMMAND request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CommandQuery {
    /// `COMMAND` and `COMMAND INFO` without names.
    All,
    Count,
    Info(Vec<Bytes>),
    Docs(Vec<Bytes>),
    List(Option<ListFilter>),
    /// GETKEYS (`flags`: GETKEYSANDFLAGS) of the request in `args`.
    GetKeys {
        args: Vec<Bytes>,
        flags: bool,
    },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ListFilter {
    Module(Bytes),
    AclCat(Bytes),
    Pattern(Bytes),
}

/// Whether this server has the command `full_name` (`get`, `client|kill`).
pub(crate) fn has(full_name: &str) -> bool {
    let (container, sub) = match full_name.split_once('|') {
        Some((container, sub)) => (container, Some(sub)),
        None => (full_name, None),
    };
    let Some(spec) = table::find(container.as_bytes()) else {
        return false;
    };
    match sub {
        None => true,
        Some(sub) => table::lookup(spec.subcommands, sub.as_bytes()).is_some(),
    }
}

/// The description of an implemented command, by the name a client gives.
fn implemented(name: &[u8]) -> Option<&'static Meta> {
    let name = std::str::from_utf8(name).ok()?;
    has(&name.to_ascii_lowercase())
        .then(|| meta::find(name))
        .flatten()
}

/// Every implemented top-level command's description, in the table's order.
fn all() -> impl Iterator<Item = &'static Meta> {
    table::all().filter_map(|spec| meta::find(spec.name))
}

fn info(meta: &Meta) -> Reply {
    meta.info_reply(&has)
}

/// Parses COMMAND LIST's options.
pub(crate) fn list_filter(args: &[Bytes]) -> Result<Option<ListFilter>, crate::CommandError> {
    match args {
        [] => Ok(None),
        [filterby, kind, value] if filterby.eq_ignore_ascii_case(b"filterby") => {
            let value = value.clone();
            if kind.eq_ignore_ascii_case(b"module") {
                Ok(Some(ListFilter::Module(value)))
            } else if kind.eq_ignore_ascii_case(b"aclcat") {
                Ok(Some(ListFilter::AclCat(value)))
            } else if kind.eq_ignore_ascii_case(b"pattern") {
                Ok(Some(ListFilter::Pattern(value)))
            } else {
                Err(crate::CommandError::Syntax)
            }
        }
        _ => Err(crate::CommandError::Syntax),
    }
}

/// Answers a COMMAND request.
pub fn answer(query: CommandQuery) -> Reply {
    match query {
        CommandQuery::All => Reply::Array(all().map(info).collect()),
        CommandQuery::Count => Reply::Integer(table::all().count() as i64),
        CommandQuery::Info(names) => Reply::Array(
            names
                .iter()
                .map(|name| implemented(name).map_or(Reply::NullBulk, info))
                .collect(),
        ),
        CommandQuery::Docs(names) => {
            let metas: Vec<&Meta> = if names.is_empty() {
                all().collect()
            } else {
                names.iter().filter_map(|name| implemented(name)).collect()
            };
            Reply::Map(
                metas
                    .into_iter()
                    .flat_map(|meta| {
                        [
                            Reply::Bulk(Bytes::from_static(meta.name.as_bytes())),
                            meta.docs_reply(&has),
                        ]
                    })
                    .collect(),
            )
        }
        CommandQuery::List(filter) => {
            let wanted = |meta: &Meta| match &filter {
                None => true,
                // No modules here.
                Some(ListFilter::Module(_)) => false,
                Some(ListFilter::AclCat(category)) => meta.acl.iter().any(|c| {
                    c.trim_start_matches('@')
                        .as_bytes()
                        .eq_ignore_ascii_case(category)
                }),
                Some(ListFilter::Pattern(pattern)) => {
                    glob_match(pattern, meta.name.as_bytes(), true)
                }
            };
            let mut names = Vec::new();
            for meta in all() {
                if wanted(meta) {
                    names.push(Reply::Bulk(Bytes::from_static(meta.name.as_bytes())));
                }
                for sub in meta.subcommands.iter().filter(|sub| has(sub.name)) {
                    if wanted(sub) {
                        names.push(Reply::Bulk(Bytes::from_static(sub.name.as_bytes())));
                    }
                }
            }
            Reply::Array(names)
        }
        CommandQuery::GetKeys { args, flags } => get_keys(&args, flags),
    }
}

/// Redis's `getKeysSubcommandImpl`, over Redis 7.0's command table: a pure function of the
/// arguments, so it answers for every Redis command, also those this server does not run.
fn get_keys(args: &[Bytes], with_flags: bool) -> Reply {
    let lower = |arg: &Bytes| String::from_utf8_lossy(arg).to_ascii_lowercase();
    let Some(top) = meta::find(&lower(&args[0])) else {
        return Reply::error("ERR Invalid command specified");
    };
    let meta = match args.get(1).filter(|_| !top.subcommands.is_empty()) {
        Some(sub) => meta::find(&format!("{}|{}", top.name, lower(sub))),
        None => Some(top),
    };
    let Some(meta) = meta else {
        return Reply::error("ERR Invalid command specified");
    };
    if meta.key_specs.is_empty() {
        return Reply::error("ERR The command has no key arguments");
    }
    let argc = args.len() as i32;
    if (meta.arity > 0 && meta.arity != argc) || argc < -meta.arity {
        return Reply::error("ERR Invalid number of arguments specified for command");
    }
    let keys = match meta.name {
        // Their key specs cannot find every key (Redis uses its own functions for them).
        "sort" | "sort_ro" => Ok(sort_keys(meta, args)),
        "migrate" => Ok(migrate_keys(meta, args)),
        // Their one key spec has VARIABLE_FLAGS: the arguments decide the flags.
        "set" => Ok(vec![(1, set_key_flags(args))]),
        "bitfield" => Ok(vec![(1, bitfield_key_flags(args))]),
        _ => meta.keys_of(args),
    };
    let keys = match keys {
        Ok(keys) if !keys.is_empty() => keys,
        _ if meta.has_flag("no_mandatory_keys") => Vec::new(),
        _ => return Reply::error("ERR Invalid arguments specified for command"),
    };
    Reply::Array(
        keys.into_iter()
            .map(|(i, spec)| {
                let key = Reply::Bulk(args[i].clone());
                if with_flags {
                    Reply::Array(vec![key, spec.flags_reply()])
                } else {
                    key
                }
            })
            .collect(),
    )
}

type KeyAt = (usize, &'static super::meta::KeySpec);

/// SORT's keys (Redis's `sortGetKeys`): the sorted key, and STORE's destination.
fn sort_keys(meta: &'static Meta, args: &[Bytes]) -> Vec<KeyAt> {
    let mut keys = vec![(1, &meta.key_specs[0])];
    let mut i = 2;
    while i < args.len() {
        let arg = &args[i];
        if arg.eq_ignore_ascii_case(b"limit") {
            i += 2;
        } else if arg.eq_ignore_ascii_case(b"get") || arg.eq_ignore_ascii_case(b"by") {
            i += 1;
        } else if arg.eq_ignore_ascii_case(b"store") && i + 1 < args.len() {
            if let Some(spec) = meta.key_specs.get(2) {
                keys.truncate(1);
                keys.push((i + 1, spec));
            }
            i += 1;
        }
        i += 1;
    }
    keys
}

const fn flagged(flags: &'static [&'static str]) -> super::meta::KeySpec {
    super::meta::KeySpec {
        notes: "",
        flags,
        begin: super::meta::Begin::Index(1),
        find: super::meta::Find::Range {
            lastkey: 0,
            keystep: 1,
            limit: 0,
        },
    }
}

static OVERWRITE: super::meta::KeySpec = flagged(&["OW", "update"]);
static READ_WRITE: super::meta::KeySpec = flagged(&["RW", "access", "update"]);
static READ_ONLY: super::meta::KeySpec = flagged(&["RO", "access"]);

/// SET's key flags (Redis's `setGetKeys`): GET reads the old value, else it overwrites.
fn set_key_flags(args: &[Bytes]) -> &'static super::meta::KeySpec {
    if args
        .iter()
        .skip(3)
        .any(|arg| arg.eq_ignore_ascii_case(b"get"))
    {
        &READ_WRITE
    } else {
        &OVERWRITE
    }
}

/// BITFIELD's key flags (Redis's `bitfieldGetKeys`): read-only when every operation is GET.
fn bitfield_key_flags(args: &[Bytes]) -> &'static super::meta::KeySpec {
    let mut i = 2;
    while i < args.len() {
        let rest = args.len() - i - 1;
        let arg = &args[i];
        if arg.eq_ignore_ascii_case(b"get") && rest >= 2 {
            i += 3;
        } else if arg.eq_ignore_ascii_case(b"overflow") && rest >= 1 {
            i += 2;
        } else {
            return &READ_WRITE;
        }
    }
    &READ_ONLY
}

/// MIGRATE's keys (Redis's `migrateGetKeys`): the key argument, or those after KEYS when it
/// is empty.
fn migrate_keys(meta: &'static Meta, args: &[Bytes]) -> Vec<KeyAt> {
    if args.get(3).is_some_and(|key| key.is_empty()) {
        if let Some(at) = (6..args.len()).find(|&i| args[i].eq_ignore_ascii_case(b"keys")) {
            let spec = &meta.key_specs[1];
            return (at + 1..args.len()).map(|i| (i, spec)).collect();
        }
    }
    vec![(3, &meta.key_specs[0])]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(line: &str) -> Vec<Bytes> {
        line.split(' ').map(|a| Bytes::from(a.to_owned())).collect()
    }

    #[test]
    fn info_and_getkeys() {
        assert_eq!(
            answer(CommandQuery::Info(vec![Bytes::from("get|key")])),
            Reply::Array(vec![Reply::NullBulk])
        );
        assert_eq!(
            answer(CommandQuery::GetKeys {
                args: args("get key"),
                flags: false
            }),
            Reply::Array(vec![Reply::Bulk(Bytes::from("key"))])
        );
        let flagged = answer(CommandQuery::GetKeys {
            args: args("set k1 v1"),
            flags: true,
        });
        assert_eq!(
            flagged,
            Reply::Array(vec![Reply::Array(vec![
                Reply::Bulk(Bytes::from("k1")),
                Reply::Set(vec![Reply::simple("OW"), Reply::simple("update")])
            ])])
        );
        let flags_of = |line: &str| match answer(CommandQuery::GetKeys {
            args: args(line),
            flags: true,
        }) {
            Reply::Array(keys) => match &keys[0] {
                Reply::Array(pair) => pair[1].clone(),
                other => panic!("{other:?}"),
            },
            other => panic!("{other:?}"),
        };
        let statuses =
            |flags: &[&'static str]| Reply::Set(flags.iter().map(|f| Reply::simple(f)).collect());
        assert_eq!(
            flags_of("set k v get"),
            statuses(&["RW", "access", "update"])
        );
        let bitfield = |line: &str| bitfield_key_flags(&args(line)).flags;
        assert_eq!(
            bitfield("bitfield k get u8 0 overflow sat"),
            ["RO", "access"]
        );
        assert_eq!(
            bitfield("bitfield k get u8 0 incrby u8 0 1"),
            ["RW", "access", "update"]
        );
        let sort = meta::find("sort").unwrap();
        let found = sort_keys(sort, &args("sort k by w_* limit 0 1 store d"));
        let found: Vec<_> = found.iter().map(|(at, spec)| (*at, spec.flags)).collect();
        assert_eq!(
            found,
            [(1, &["RO", "access"][..]), (8, &["OW", "update"][..])]
        );
        assert!(answer(CommandQuery::GetKeys {
            args: args("ping"),
            flags: false
        })
        .is_error());
        let Reply::Array(list) = answer(CommandQuery::List(Some(ListFilter::Pattern(
            Bytes::from("config|*re*"),
        )))) else {
            panic!()
        };
        assert!(list.contains(&Reply::Bulk(Bytes::from("config|rewrite"))));
        assert!(list.contains(&Reply::Bulk(Bytes::from("config|resetstat"))));
    }
}

#[cfg(test)]
mod table_tests {
    use super::*;

    /// The dispatch table's arities and legacy key ranges are Redis 7.0's (what the parser
    /// checks and the cluster check hashes must agree with what COMMAND INFO says).
    #[test]
    fn the_table_agrees_with_redis_metadata() {
        let mut mismatches = Vec::new();
        let mut check = |spec: &crate::command::table::CommandSpec| {
            let Some(meta) = meta::find(spec.name) else {
                return;
            };
            let ours = (spec.arity, spec.first_key, spec.last_key, spec.key_step);
            let redis = (
                i64::from(meta.arity),
                i64::from(meta.first_key),
                i64::from(meta.last_key),
                i64::from(meta.key_step),
            );
            if ours != redis {
                mismatches.push(format!("{}: ours {ours:?}, Redis {redis:?}", spec.name));
            }
        };
        for spec in table::all() {
            check(spec);
            spec.subcommands.iter().for_each(&mut check);
        }
        assert!(mismatches.is_empty(), "{}", mismatches.join("\n"));
    }
}
