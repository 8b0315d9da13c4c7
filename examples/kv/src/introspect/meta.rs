//! Redis 7.0's description of each command (generated into `commands_generated.rs` by
//! `tools/gen_command_meta.py`), and the replies COMMAND builds from it: COMMAND INFO's
//! ten fields, COMMAND DOCS's map, and the keys a request names according to the key specs
//! (COMMAND GETKEYS and GETKEYSANDFLAGS).

use bytes::Bytes;

use crate::reply::Reply;

/// One command (or `container|subcommand`).
#[derive(Debug)]
pub(crate) struct Meta {
    pub name: &'static str,
    pub arity: i32,
    /// COMMAND's flags, in Redis's order (`movablekeys` included).
    pub flags: &'static [&'static str],
    /// ACL categories with their `@`, the implicit ones included.
    pub acl: &'static [&'static str],
    pub tips: &'static [&'static str],
    pub key_specs: &'static [KeySpec],
    pub first_key: i32,
    pub last_key: i32,
    pub key_step: i32,
    pub group: &'static str,
    pub summary: &'static str,
    pub since: &'static str,
    pub complexity: &'static str,
    pub doc_flags: &'static [&'static str],
    pub deprecated_since: &'static str,
    pub replaced_by: &'static str,
    pub history: &'static [(&'static str, &'static str)],
    pub args: &'static [Arg],
    pub subcommands: &'static [Meta],
}

#[derive(Debug)]
pub(crate) struct KeySpec {
    pub notes: &'static str,
    pub flags: &'static [&'static str],
    pub begin: Begin,
    pub find: Find,
}

#[derive(Debug)]
pub(crate) enum Begin {
    Index(i32),
    Keyword {
        keyword: &'static str,
        startfrom: i32,
    },
    Unknown,
}

#[derive(Debug)]
pub(crate) enum Find {
    Range {
        lastkey: i32,
        keystep: i32,
        limit: i32,
    },
    Keynum {
        keynumidx: i32,
        firstkey: i32,
        keystep: i32,
    },
    Unknown,
}

#[derive(Debug)]
pub(crate) struct Arg {
    pub name: &'static str,
    pub kind: &'static str,
    pub key_spec_index: i32,
    /// `None`: no token (MIGRATE has an empty one).
    pub token: Option<&'static str>,
    pub summary: &'static str,
    pub since: &'static str,
    pub deprecated_since: &'static str,
    pub flags: &'static [&'static str],
    pub args: &'static [Arg],
}

/// Every command's description, sorted by name (ACL rules name them all).
pub(crate) fn all() -> &'static [Meta] {
    super::commands_generated::COMMANDS
}

/// The description of `name` (`get`, `client|kill`), case-insensitively.
pub(crate) fn find(name: &str) -> Option<&'static Meta> {
    let name = name.to_ascii_lowercase();
    let (container, sub) = match name.split_once('|') {
        Some((container, sub)) => (container, Some(sub)),
        None => (name.as_str(), None),
    };
    let commands = super::commands_generated::COMMANDS;
    let top = commands
        .binary_search_by(|meta| meta.name.cmp(container))
        .ok()
        .map(|i| &commands[i])?;
    match sub {
        None => Some(top),
        Some(sub) => top
            .subcommands
            .iter()
            .find(|meta| meta.name.rsplit('|').next() == Some(sub)),
    }
}

fn bulk(text: &str) -> Reply {
    Reply::Bulk(Bytes::copy_from_slice(text.as_bytes()))
}

/// A set of status strings (flags, ACL categories).
fn statuses(items: &[&'static str]) -> Reply {
    Reply::Set(items.iter().map(|item| Reply::simple(item)).collect())
}

fn bulks(items: &[&'static str]) -> Reply {
    Reply::Set(items.iter().map(|item| bulk(item)).collect())
}

/// `[key, value, ...]` (a map in RESP3).
fn map(pairs: Vec<(&str, Reply)>) -> Reply {
    Reply::Map(
        pairs
            .into_iter()
            .flat_map(|(key, value)| [bulk(key), value])
            .collect(),
    )
}

impl Meta {
    /// COMMAND INFO's entry, with the subcommands this server has (`has` says which).
    pub fn info_reply(&self, has: &dyn Fn(&str) -> bool) -> Reply {
        Reply::Array(vec![
            bulk(self.name),
            Reply::Integer(i64::from(self.arity)),
            statuses(self.flags),
            Reply::Integer(i64::from(self.first_key)),
            Reply::Integer(i64::from(self.last_key)),
            Reply::Integer(i64::from(self.key_step)),
            statuses(self.acl),
            bulks(self.tips),
            Reply::Set(self.key_specs.iter().map(KeySpec::reply).collect()),
            Reply::Set(
                self.subcommands
                    .iter()
                    .filter(|sub| has(sub.name))
                    .map(|sub| sub.info_reply(has))
                    .collect(),
            ),
        ])
    }

    /// COMMAND DOCS's map for this command.
    pub fn docs_reply(&self, has: &dyn Fn(&str) -> bool) -> Reply {
        let mut fields = Vec::new();
        let mut text = |key, value: &str| {
            if !value.is_empty() {
                fields.push((key, bulk(value)));
            }
        };
        text("summary", self.summary);
        text("since", self.since);
        text("group", self.group);
        text("complexity", self.complexity);
        if !self.doc_flags.is_empty() {
            fields.push(("doc_flags", statuses(self.doc_flags)));
        }
        let mut text = |key, value: &str| {
            if !value.is_empty() {
                fields.push((key, bulk(value)));
            }
        };
        text("deprecated_since", self.deprecated_since);
        text("replaced_by", self.replaced_by);
        if !self.history.is_empty() {
            fields.push((
                "history",
                Reply::Set(
                    self.history
                        .iter()
                        .map(|(since, change)| Reply::Array(vec![bulk(since), bulk(change)]))
                        .collect(),
                ),
            ));
        }
        if !self.args.is_empty() {
            fields.push(("arguments", args_reply(self.args)));
        }
        let subs: Vec<&Meta> = self.subcommands.iter().filter(|s| has(s.name)).collect();
        if !subs.is_empty() {
            fields.push((
                "subcommands",
                Reply::Map(
                    subs.into_iter()
                        .flat_map(|sub| [bulk(sub.name), sub.docs_reply(has)])
                        .collect(),
                ),
            ));
        }
        map(fields)
    }

    pub fn has_flag(&self, flag: &str) -> bool {
        self.flags.contains(&flag)
    }

    /// The positions (in `args`, where `args[0]` is the command name) of the keys the key
    /// specs name, each with its spec: COMMAND GETKEYS. `Err` when the arguments cannot hold
    /// the keys the specs ask for (Redis's "Invalid arguments specified").
    pub fn keys_of(&self, args: &[Bytes]) -> Result<Vec<(usize, &'static KeySpec)>, ()> {
        let argc = args.len() as i64;
        let mut keys = Vec::new();
        for spec in self.key_specs {
            let start = match spec.begin {
                Begin::Index(pos) => i64::from(pos),
                Begin::Keyword { keyword, startfrom } => {
                    let found = if startfrom >= 0 {
                        (i64::from(startfrom)..argc).find(|&i| is(&args[i as usize], keyword))
                    } else {
                        let from = (argc + i64::from(startfrom)).max(1);
                        (1..=from).rev().find(|&i| is(&args[i as usize], keyword))
                    };
                    match found {
                        Some(i) => i + 1,
                        None => continue,
                    }
                }
                Begin::Unknown => continue,
            };
            if start >= argc {
                continue;
            }
            let (first, last, step) = match spec.find {
                Find::Range {
                    lastkey,
                    keystep,
                    limit,
                } => {
                    let last = if lastkey >= 0 {
                        start + i64::from(lastkey)
                    } else if limit <= 1 {
                        argc + i64::from(lastkey)
                    } else {
                        let span = argc - 1 - start;
                        start + span / i64::from(limit)
                    };
                    (start, last, i64::from(keystep))
                }
                Find::Keynum {
                    keynumidx,
                    firstkey,
                    keystep,
                } => {
                    let index = start + i64::from(keynumidx);
                    let count = args
                        .get(index as usize)
                        .and_then(|n| crate::number::parse_i64(n))
                        .filter(|&n| n >= 0)
                        .ok_or(())?;
                    let first = start + i64::from(firstkey);
                    (
                        first,
                        first + (count - 1) * i64::from(keystep),
                        i64::from(keystep),
                    )
                }
                Find::Unknown => continue,
            };
            if last >= argc {
                return Err(());
            }
            let mut i = first;
            while i <= last {
                keys.push((i as usize, spec));
                i += step.max(1);
            }
        }
        Ok(keys)
    }
}

fn is(arg: &[u8], word: &str) -> bool {
    arg.eq_ignore_ascii_case(word.as_bytes())
}

impl KeySpec {
    fn reply(&self) -> Reply {
        let mut fields = Vec::new();
        if !self.notes.is_empty() {
            fields.push(("notes", bulk(self.notes)));
        }
        fields.push(("flags", statuses(self.flags)));
        let begin = match self.begin {
            Begin::Index(pos) => map(vec![
                ("type", bulk("index")),
                ("spec", map(vec![("index", Reply::Integer(i64::from(pos)))])),
            ]),
            Begin::Keyword { keyword, startfrom } => map(vec![
                ("type", bulk("keyword")),
                (
                    "spec",
                    map(vec![
                        ("keyword", bulk(keyword)),
                        ("startfrom", Reply::Integer(i64::from(startfrom))),
                    ]),
                ),
            ]),
            Begin::Unknown => map(vec![("type", bulk("unknown")), ("spec", map(vec![]))]),
        };
        fields.push(("begin_search", begin));
        let find = match self.find {
            Find::Range {
                lastkey,
                keystep,
                limit,
            } => map(vec![
                ("type", bulk("range")),
                (
                    "spec",
                    map(vec![
                        ("lastkey", Reply::Integer(i64::from(lastkey))),
                        ("keystep", Reply::Integer(i64::from(keystep))),
                        ("limit", Reply::Integer(i64::from(limit))),
                    ]),
                ),
            ]),
            Find::Keynum {
                keynumidx,
                firstkey,
                keystep,
            } => map(vec![
                ("type", bulk("keynum")),
                (
                    "spec",
                    map(vec![
                        ("keynumidx", Reply::Integer(i64::from(keynumidx))),
                        ("firstkey", Reply::Integer(i64::from(firstkey))),
                        ("keystep", Reply::Integer(i64::from(keystep))),
                    ]),
                ),
            ]),
            Find::Unknown => map(vec![("type", bulk("unknown")), ("spec", map(vec![]))]),
        };
        fields.push(("find_keys", find));
        map(fields)
    }

    /// GETKEYSANDFLAGS's flags of a key.
    pub fn flags_reply(&self) -> Reply {
        statuses(self.flags)
    }
}

fn args_reply(args: &[Arg]) -> Reply {
    Reply::Array(
        args.iter()
            .map(|arg| {
                let mut fields = vec![("name", bulk(arg.name)), ("type", bulk(arg.kind))];
                if arg.key_spec_index >= 0 {
                    fields.push((
                        "key_spec_index",
                        Reply::Integer(i64::from(arg.key_spec_index)),
                    ));
                }
                if let Some(token) = arg.token {
                    fields.push(("token", bulk(token)));
                }
                for (key, value) in [
                    ("summary", arg.summary),
                    ("since", arg.since),
                    ("deprecated_since", arg.deprecated_since),
                ] {
                    if !value.is_empty() {
                        fields.push((key, bulk(value)));
                    }
                }
                if !arg.flags.is_empty() {
                    fields.push(("flags", statuses(arg.flags)));
                }
                if matches!(arg.kind, "oneof" | "block") {
                    fields.push(("arguments", args_reply(arg.args)));
                }
                map(fields)
            })
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(line: &str) -> Vec<Bytes> {
        line.split(' ').map(|a| Bytes::from(a.to_owned())).collect()
    }

    fn keys(line: &str) -> Vec<String> {
        let args = args(line);
        let mut meta = find(std::str::from_utf8(&args[0]).unwrap()).unwrap();
        if !meta.subcommands.is_empty() {
            let name = format!("{}|{}", meta.name, String::from_utf8_lossy(&args[1]));
            meta = find(&name.to_ascii_lowercase()).unwrap();
        }
        meta.keys_of(&args)
            .unwrap()
            .into_iter()
            .map(|(i, _)| String::from_utf8_lossy(&args[i]).into_owned())
            .collect()
    }

    #[test]
    fn the_table_is_sorted_and_complete() {
        let commands = super::super::commands_generated::COMMANDS;
        assert!(commands.windows(2).all(|w| w[0].name < w[1].name));
        assert_eq!(commands.len(), 240);
        let set = find("SET").unwrap();
        assert_eq!(set.arity, -3);
        assert_eq!(set.flags, ["write", "denyoom"]);
        assert_eq!((set.first_key, set.last_key, set.key_step), (1, 1, 1));
        assert_eq!(set.acl, ["@write", "@string", "@slow"]);
        assert_eq!(find("client|KILL").unwrap().name, "client|kill");
        assert!(find("get|key").is_none() && find("nosuch").is_none());
        for movable in [
            "zunionstore",
            "xread",
            "eval",
            "sort",
            "migrate",
            "georadius",
        ] {
            assert!(find(movable).unwrap().has_flag("movablekeys"), "{movable}");
        }
        for fixed in [
            "set",
            "get",
            "mset",
            "bitfield",
            "lmove",
            "memory|usage",
            "rename",
        ] {
            assert!(!find(fixed).unwrap().has_flag("movablekeys"), "{fixed}");
        }
    }

    #[test]
    fn keys_follow_the_specs() {
        assert_eq!(keys("get k"), ["k"]);
        assert_eq!(keys("mset a 1 b 2"), ["a", "b"]);
        assert_eq!(keys("memory usage k"), ["k"]);
        assert_eq!(keys("lmove a b left right"), ["a", "b"]);
        assert_eq!(keys("eval s 2 k1 k2 arg"), ["k1", "k2"]);
        assert_eq!(keys("eval s 0"), Vec::<String>::new());
        assert_eq!(keys("zunionstore d 2 a b weights 1 2"), ["d", "a", "b"]);
        assert_eq!(keys("xread count 1 streams a b 0 0"), ["a", "b"]);
        assert_eq!(keys("lcs a b"), ["a", "b"]);
        // STORE's key spec is "unknown": COMMAND GETKEYS applies SORT's own rule instead.
        assert_eq!(keys("sort k store d"), ["k"]);
        let migrate = args("migrate h 1 \"\" 0 5000 keys a b");
        let meta = find("migrate").unwrap();
        let found: Vec<usize> = meta
            .keys_of(&migrate)
            .unwrap()
            .iter()
            .map(|k| k.0)
            .collect();
        assert_eq!(found, [3, 7, 8]);
    }
}
