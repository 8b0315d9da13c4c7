//! The keys and channels of a request as ACL checks them: from the command's key specs
//! (skipping `not_key` ones), with Redis's own key finders where the specs are incomplete
//! (MIGRATE, SORT) or their flags depend on the arguments (SET, BITFIELD).

use bytes::Bytes;

use super::selector::{ChannelRef, KeyAccess, KeyRef};
use crate::introspect::meta::Meta;

fn is(arg: &[u8], word: &str) -> bool {
    arg.eq_ignore_ascii_case(word.as_bytes())
}

fn access(flags: &[&str]) -> KeyAccess {
    KeyAccess {
        read: flags.contains(&"access"),
        write: flags
            .iter()
            .any(|f| matches!(*f, "insert" | "update" | "delete")),
    }
}

const READ: KeyAccess = KeyAccess {
    read: true,
    write: false,
};
pub(crate) const WRITE: KeyAccess = KeyAccess {
    read: false,
    write: true,
};
pub(crate) const READ_WRITE: KeyAccess = KeyAccess {
    read: true,
    write: true,
};

/// How a command's keys are found, decided once per command (see [`KeyPlan::of`]) so that
/// the check of a request does no string comparison and, for most commands, no allocation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum KeyPlan {
    /// No key specs: never a key.
    None,
    /// One key spec, `args[1]` used one way whatever the arguments (GET, INCR, HSET...).
    First(KeyAccess),
    /// SET: `args[1]`, read as well with the GET option.
    Set,
    /// BITFIELD: `args[1]`, written only with a SET or INCRBY operation.
    Bitfield,
    /// The arguments decide: [`keys`] finds them.
    Args,
}

impl KeyPlan {
    pub(crate) fn of(meta: &Meta) -> KeyPlan {
        use crate::introspect::meta::{Begin, Find};
        match meta.name {
            "set" => return KeyPlan::Set,
            "bitfield" => return KeyPlan::Bitfield,
            "migrate" | "sort" | "sort_ro" => return KeyPlan::Args,
            _ => {}
        }
        match meta.key_specs {
            [] => KeyPlan::None,
            [spec]
                if !spec.flags.contains(&"not_key")
                    && matches!(spec.begin, Begin::Index(1))
                    && matches!(spec.find, Find::Range { lastkey: 0, .. }) =>
            {
                KeyPlan::First(access(spec.flags))
            }
            _ => KeyPlan::Args,
        }
    }
}

/// The keys of one request: one key without an allocation (the common case), else a list.
#[derive(Debug)]
pub(crate) enum Found {
    One(KeyRef),
    Many(Vec<KeyRef>),
}

impl Found {
    pub(crate) fn as_slice(&self) -> &[KeyRef] {
        match self {
            Found::One(key) => std::slice::from_ref(key),
            Found::Many(keys) => keys,
        }
    }
}

/// [`keys`] through the command's plan: what the permission check asks per request.
#[inline]
pub(crate) fn found(plan: KeyPlan, meta: &Meta, args: &[Bytes]) -> Found {
    match plan {
        KeyPlan::None => Found::Many(Vec::new()),
        KeyPlan::First(access) if args.len() > 1 => Found::One(KeyRef { pos: 1, access }),
        KeyPlan::Set if args.len() > 1 => Found::One(set_key(args)),
        KeyPlan::Bitfield if args.len() > 1 => Found::One(bitfield_key(args)),
        KeyPlan::First(_) | KeyPlan::Set | KeyPlan::Bitfield => Found::Many(Vec::new()),
        KeyPlan::Args => by_args(meta, args),
    }
}

/// SET's key: `SET key value ... GET` reads the old value as well.
fn set_key(args: &[Bytes]) -> KeyRef {
    KeyRef {
        pos: 1,
        access: if set_reads(args) { READ_WRITE } else { WRITE },
    }
}

/// Whether a SET request has the GET option (its key is read as well as written).
#[inline]
pub(crate) fn set_reads(args: &[Bytes]) -> bool {
    (args.get(3..).unwrap_or_default().iter()).any(|a| is(a, "get"))
}

/// BITFIELD's key: written only with SET or INCRBY.
fn bitfield_key(args: &[Bytes]) -> KeyRef {
    let writes = args[2..].iter().any(|a| is(a, "set") || is(a, "incrby"));
    KeyRef {
        pos: 1,
        access: if writes { READ_WRITE } else { READ },
    }
}

/// The keys `args` (`args[0]`: the command name) name for command `meta`, as a list (what
/// [`found`] finds; the tests compare the two).
#[cfg(test)]
pub(crate) fn keys(meta: &Meta, args: &[Bytes]) -> Vec<KeyRef> {
    match by_args(meta, args) {
        Found::One(key) => vec![key],
        Found::Many(keys) => keys,
    }
}

fn by_args(meta: &Meta, args: &[Bytes]) -> Found {
    let key = |pos: usize, access: KeyAccess| KeyRef { pos, access };
    match meta.name {
        "set" if args.len() > 1 => Found::One(set_key(args)),
        "bitfield" if args.len() > 1 => Found::One(bitfield_key(args)),
        "migrate" => Found::Many(migrate_keys(args)),
        "sort" | "sort_ro" => Found::Many(sort_keys(args)),
        _ => Found::Many(match meta.keys_of(args) {
            Ok(found) => found
                .into_iter()
                .filter(|(_, spec)| !spec.flags.contains(&"not_key"))
                .map(|(pos, spec)| key(pos, access(spec.flags)))
                .collect(),
            // Arguments that cannot hold the keys: the command fails on its own.
            Err(()) => Vec::new(),
        }),
    }
}

/// MIGRATE host port key|"" db timeout [COPY] [REPLACE] [AUTH pw] [AUTH2 user pw] [KEYS k...].
fn migrate_keys(args: &[Bytes]) -> Vec<KeyRef> {
    let rw = KeyAccess {
        read: true,
        write: true,
    };
    let mut i = 6;
    while i < args.len() {
        if is(&args[i], "auth") {
            i += 2;
        } else if is(&args[i], "auth2") {
            i += 3;
        } else if is(&args[i], "keys") {
            if args.get(3).is_some_and(|k| k.is_empty()) {
                return (i + 1..args.len())
                    .map(|pos| KeyRef { pos, access: rw })
                    .collect();
            }
            break;
        } else {
            i += 1;
        }
    }
    if args.len() > 3 {
        vec![KeyRef { pos: 3, access: rw }]
    } else {
        Vec::new()
    }
}

/// SORT key [BY p] [LIMIT o c] [GET p ...] [ASC|DESC] [ALPHA] [STORE dest].
fn sort_keys(args: &[Bytes]) -> Vec<KeyRef> {
    let mut keys = Vec::new();
    if args.len() > 1 {
        keys.push(KeyRef {
            pos: 1,
            access: READ,
        });
    }
    let mut i = 2;
    let mut store = None;
    while i < args.len() {
        let skip = if is(&args[i], "limit") {
            2
        } else if is(&args[i], "get") || is(&args[i], "by") {
            1
        } else if is(&args[i], "store") {
            store = Some(i + 1);
            1
        } else {
            0
        };
        i += 1 + skip;
    }
    if let Some(pos) = store.filter(|&pos| pos < args.len()) {
        keys.push(KeyRef { pos, access: WRITE });
    }
    keys
}

/// Which of a command's arguments are channels, decided once per command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ChannelPlan {
    None,
    /// PUBLISH, SPUBLISH, SUBSCRIBE, SSUBSCRIBE, PSUBSCRIBE: [`channels`] finds them.
    Args,
}

impl ChannelPlan {
    pub(crate) fn of(name: &str) -> ChannelPlan {
        match name {
            "publish" | "spublish" | "subscribe" | "ssubscribe" | "psubscribe" => ChannelPlan::Args,
            _ => ChannelPlan::None,
        }
    }
}

/// The channels a Pub/Sub command publishes or subscribes to (unsubscribing needs none).
pub(crate) fn channels(name: &str, args: &[Bytes]) -> Vec<ChannelRef> {
    let from = |start: usize, pattern: bool| -> Vec<ChannelRef> {
        (start..args.len())
            .map(|pos| ChannelRef { pos, pattern })
            .collect()
    };
    match name {
        "publish" | "spublish" if args.len() > 1 => vec![ChannelRef {
            pos: 1,
            pattern: false,
        }],
        "subscribe" | "ssubscribe" => from(1, false),
        "psubscribe" => from(1, true),
        _ => Vec::new(),
    }
}

/// Whether SORT uses BY or GET (what needs read access to every key).
pub(crate) fn sort_reads_patterns(args: &[Bytes]) -> Option<&'static str> {
    let mut i = 2;
    while i < args.len() {
        if is(&args[i], "by") {
            return Some("BY");
        }
        if is(&args[i], "get") {
            return Some("GET");
        }
        i += if is(&args[i], "limit") {
            3
        } else if is(&args[i], "store") {
            2
        } else {
            1
        };
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::introspect::meta::find;

    fn args(line: &str) -> Vec<Bytes> {
        line.split(' ').map(|a| Bytes::from(a.to_owned())).collect()
    }

    fn positions(line: &str) -> Vec<(usize, bool, bool)> {
        let args = args(line);
        let meta = find(&String::from_utf8_lossy(&args[0])).unwrap();
        keys(meta, &args)
            .into_iter()
            .map(|k| (k.pos, k.access.read, k.access.write))
            .collect()
    }

    #[test]
    fn key_specs_and_their_flags() {
        assert_eq!(positions("get a"), vec![(1, true, false)]);
        assert_eq!(positions("set a b"), vec![(1, false, true)]);
        assert_eq!(positions("set a b ex 10 get"), vec![(1, true, true)]);
        assert_eq!(
            positions("exists a b"),
            vec![(1, false, false), (2, false, false)]
        );
        assert_eq!(
            positions("copy a b"),
            vec![(1, true, false), (2, false, true)]
        );
        assert_eq!(positions("bitfield a get u4 0"), vec![(1, true, false)]);
        assert_eq!(positions("eval s 1 k"), vec![(3, true, true)]);
        assert_eq!(positions("eval s -1 k"), vec![]);
        assert_eq!(
            positions("sort a store b"),
            vec![(1, true, false), (3, false, true)]
        );
        assert_eq!(positions("migrate h p k 0 500"), vec![(3, true, true)]);
        assert_eq!(
            positions("migrate h p  0 5000 AUTH2 u p KEYS a b"),
            vec![(10, true, true), (11, true, true)]
        );
        assert_eq!(positions("spublish ch m"), vec![]);
        assert_eq!(
            positions("georadius k 1 2 3 m store d"),
            vec![(1, true, false), (7, false, true)]
        );
    }

    #[test]
    fn plans_find_what_the_key_specs_find() {
        let catalog = crate::acl::catalog::Catalog::get();
        let mut first = 0;
        for entry in &catalog.entries {
            if matches!(entry.keys, KeyPlan::First(_)) {
                first += 1;
            }
            for argc in 1..7 {
                let mut args = vec![Bytes::from_static(entry.name().as_bytes())];
                args.extend((1..argc).map(|i| Bytes::from(format!("{i}"))));
                assert_eq!(
                    found(entry.keys, entry.meta, &args).as_slice(),
                    keys(entry.meta, &args).as_slice(),
                    "{} with {argc} arguments",
                    entry.name()
                );
            }
            assert_eq!(
                entry.channels == ChannelPlan::None,
                channels(entry.name(), &args("x a b")).is_empty(),
                "{}",
                entry.name()
            );
        }
        // Most commands take one key, first: those cost no allocation.
        assert!(first > 100, "{first}");
        let get = catalog.id("get").unwrap();
        assert!(matches!(
            catalog.entries[get].keys,
            KeyPlan::First(KeyAccess {
                read: true,
                write: false
            })
        ));
    }

    #[test]
    fn set_and_bitfield_plans_read_the_options() {
        let catalog = crate::acl::catalog::Catalog::get();
        let access = |line: &str| {
            let a = args(line);
            let entry = &catalog.entries[catalog.id(&line[..line.find(' ').unwrap()]).unwrap()];
            let found = found(entry.keys, entry.meta, &a);
            assert_eq!(found.as_slice(), keys(entry.meta, &a).as_slice(), "{line}");
            let key = found.as_slice()[0];
            assert_eq!(key.pos, 1);
            (key.access.read, key.access.write)
        };
        assert_eq!(access("set k v"), (false, true));
        assert_eq!(access("set k v ex 10 get"), (true, true));
        assert_eq!(access("set k v GET"), (true, true));
        assert_eq!(access("bitfield k get u8 0"), (true, false));
        assert_eq!(access("bitfield k incrby u8 0 1"), (true, true));
        assert_eq!(access("bitfield k SET u8 0 1"), (true, true));
    }

    #[test]
    fn channels_of_pubsub_commands() {
        let a = args("psubscribe a* b*");
        let found = channels("psubscribe", &a);
        assert_eq!(found.len(), 2);
        assert!(found.iter().all(|c| c.pattern));
        assert_eq!(channels("publish", &args("publish ch m"))[0].pos, 1);
        assert!(channels("unsubscribe", &args("unsubscribe a")).is_empty());
        assert_eq!(sort_reads_patterns(&args("sort l by w*")), Some("BY"));
        assert_eq!(sort_reads_patterns(&args("sort l limit 0 1")), None);
    }
}
