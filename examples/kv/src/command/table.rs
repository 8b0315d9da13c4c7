//! The commands this server knows: names, arities and the metadata `COMMAND` reports.

use bytes::Bytes;

/// Which parser handles a command; one per name in [`COMMANDS`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CommandKind {
    Ping,
    Echo,
    Get,
    Set,
    GetSet,
    Del,
    Exists,
    Incr,
    IncrBy,
    Decr,
    DecrBy,
    Append,
    Strlen,
    MGet,
    MSet,
    Expire,
    PExpire,
    ExpireAt,
    PExpireAt,
    Ttl,
    PTtl,
    Persist,
    DbSize,
    FlushAll,
    Info,
    /// A container named without subcommand (its arity forbids that; see the parser).
    Container,
    /// A CONFIG subcommand (see [`crate::config`]).
    Config(crate::config::Sub),
    /// A command of the introspection family (see [`crate::introspect`]).
    Introspect(crate::introspect::Sub),
    /// CLIENT (`None`: the container itself) and its subcommands (see [`crate::clients`]).
    Client(Option<crate::clients::command::Sub>),
    Auth,
    Quit,
    Reset,
    Select,
    BgRewriteAof,
    Multi,
    Exec,
    Discard,
    Watch,
    Unwatch,
    /// A Pub/Sub command (see [`super::pubsub`]).
    PubSub(super::pubsub::Sub),
    Hello,
    /// CLUSTER and its subcommands, ASKING, READONLY, READWRITE, MIGRATE, DUMP, RESTORE:
    /// parsed by [`crate::cluster::command::parse`] on the spec's name.
    Cluster,
    /// A collection command or TYPE (see [`super::typed`]).
    Typed(super::typed::TypedOp),
    /// A keyspace or string command of [`super::keyops`].
    Key(super::keyops::KeyOp),
    /// A command of the scripting family ([`crate::scripting`]).
    Script(crate::scripting::ScriptOp),
    /// An ACL subcommand ([`crate::acl`]).
    Acl(crate::acl::AclSub),
    /// REPLICAOF, SLAVEOF, ROLE ([`crate::repl`]).
    Replica(crate::repl::replicaof::ReplicaSub),
    /// A replication command ([`crate::repl::command`]).
    Repl(crate::repl::command::Sub),
}

/// Static description of one command (or `container|subcommand`), as in Redis 7's table.
#[derive(Debug, Clone, Copy)]
pub(crate) struct CommandSpec {
    pub kind: CommandKind,
    /// Full lowercase name used in error messages, e.g. `get` or `config|get`.
    pub name: &'static str,
    /// Redis arity: positive = exact argument count (name included), negative = minimum.
    pub arity: i64,
    pub flags: &'static [&'static str],
    pub first_key: i64,
    pub last_key: i64,
    pub key_step: i64,
    pub subcommands: &'static [CommandSpec],
}

impl CommandSpec {
    pub fn accepts_arg_count(&self, argc: usize) -> bool {
        let argc = argc as i64;
        if self.arity >= 0 {
            argc == self.arity
        } else {
            argc >= -self.arity
        }
    }
}

pub(crate) const fn spec(
    kind: CommandKind,
    name: &'static str,
    arity: i64,
    flags: &'static [&'static str],
    keys: (i64, i64, i64),
) -> CommandSpec {
    CommandSpec {
        kind,
        name,
        arity,
        flags,
        first_key: keys.0,
        last_key: keys.1,
        key_step: keys.2,
        subcommands: &[],
    }
}

const READ_FAST: &[&str] = &["readonly", "fast"];
const WRITE: &[&str] = &["write", "denyoom"];
const WRITE_FAST: &[&str] = &["write", "denyoom", "fast"];
const NO_KEYS: (i64, i64, i64) = (0, 0, 0);

/// MULTI, DISCARD, WATCH and UNWATCH, as Redis 7 flags them.
const TXN_FLAGS: &[&str] = &["noscript", "loading", "stale", "fast", "allow_busy"];
const ONE_KEY: (i64, i64, i64) = (1, 1, 1);
const ALL_KEYS: (i64, i64, i64) = (1, -1, 1);

use CommandKind as K;

const ADMIN: &[&str] = &["admin", "stale", "no_async_loading"];
const STALE: &[&str] = &["stale"];

static CLUSTER_SUBCOMMANDS: [CommandSpec; 27] = [
    spec(K::Cluster, "cluster|addslots", -3, ADMIN, NO_KEYS),
    spec(K::Cluster, "cluster|addslotsrange", -4, ADMIN, NO_KEYS),
    spec(K::Cluster, "cluster|bumpepoch", 2, ADMIN, NO_KEYS),
    spec(
        K::Cluster,
        "cluster|count-failure-reports",
        3,
        &["admin", "stale"],
        NO_KEYS,
    ),
    spec(K::Cluster, "cluster|countkeysinslot", 3, STALE, NO_KEYS),
    spec(K::Cluster, "cluster|delslots", -3, ADMIN, NO_KEYS),
    spec(K::Cluster, "cluster|delslotsrange", -4, ADMIN, NO_KEYS),
    spec(K::Cluster, "cluster|failover", -2, ADMIN, NO_KEYS),
    spec(K::Cluster, "cluster|flushslots", 2, ADMIN, NO_KEYS),
    spec(K::Cluster, "cluster|forget", 3, ADMIN, NO_KEYS),
    spec(K::Cluster, "cluster|getkeysinslot", 4, STALE, NO_KEYS),
    spec(
        K::Cluster,
        "cluster|help",
        2,
        &["loading", "stale"],
        NO_KEYS,
    ),
    spec(K::Cluster, "cluster|info", 2, STALE, NO_KEYS),
    spec(K::Cluster, "cluster|keyslot", 3, STALE, NO_KEYS),
    spec(K::Cluster, "cluster|links", 2, STALE, NO_KEYS),
    spec(K::Cluster, "cluster|meet", -4, ADMIN, NO_KEYS),
    spec(K::Cluster, "cluster|myid", 2, STALE, NO_KEYS),
    spec(K::Cluster, "cluster|nodes", 2, STALE, NO_KEYS),
    spec(
        K::Cluster,
        "cluster|replicas",
        3,
        &["admin", "stale"],
        NO_KEYS,
    ),
    spec(K::Cluster, "cluster|replicate", 3, ADMIN, NO_KEYS),
    spec(
        K::Cluster,
        "cluster|reset",
        -2,
        &["admin", "noscript", "stale"],
        NO_KEYS,
    ),
    spec(K::Cluster, "cluster|saveconfig", 2, ADMIN, NO_KEYS),
    spec(K::Cluster, "cluster|set-config-epoch", 3, ADMIN, NO_KEYS),
    spec(K::Cluster, "cluster|setslot", -4, ADMIN, NO_KEYS),
    spec(K::Cluster, "cluster|shards", 2, STALE, NO_KEYS),
    spec(
        K::Cluster,
        "cluster|slaves",
        3,
        &["admin", "stale"],
        NO_KEYS,
    ),
    spec(K::Cluster, "cluster|slots", 2, STALE, NO_KEYS),
];

pub(crate) static COMMANDS: [CommandSpec; 46] = [
    spec(K::Ping, "ping", -1, &["fast"], NO_KEYS),
    spec(K::Echo, "echo", 2, &["fast"], NO_KEYS),
    spec(K::Get, "get", 2, READ_FAST, ONE_KEY),
    spec(K::Set, "set", -3, WRITE, ONE_KEY),
    spec(K::GetSet, "getset", 3, WRITE_FAST, ONE_KEY),
    spec(K::Del, "del", -2, &["write"], ALL_KEYS),
    spec(K::Exists, "exists", -2, READ_FAST, ALL_KEYS),
    spec(K::Incr, "incr", 2, WRITE_FAST, ONE_KEY),
    spec(K::IncrBy, "incrby", 3, WRITE_FAST, ONE_KEY),
    spec(K::Decr, "decr", 2, WRITE_FAST, ONE_KEY),
    spec(K::DecrBy, "decrby", 3, WRITE_FAST, ONE_KEY),
    spec(K::Append, "append", 3, WRITE, ONE_KEY),
    spec(K::Strlen, "strlen", 2, READ_FAST, ONE_KEY),
    spec(K::MGet, "mget", -2, READ_FAST, ALL_KEYS),
    spec(K::MSet, "mset", -3, WRITE, (1, -1, 2)),
    spec(K::Expire, "expire", -3, &["write", "fast"], ONE_KEY),
    spec(K::PExpire, "pexpire", -3, &["write", "fast"], ONE_KEY),
    spec(K::ExpireAt, "expireat", -3, &["write", "fast"], ONE_KEY),
    spec(K::PExpireAt, "pexpireat", -3, &["write", "fast"], ONE_KEY),
    spec(K::Ttl, "ttl", 2, READ_FAST, ONE_KEY),
    spec(K::PTtl, "pttl", 2, READ_FAST, ONE_KEY),
    spec(K::Persist, "persist", 2, &["write", "fast"], ONE_KEY),
    spec(K::DbSize, "dbsize", 1, READ_FAST, NO_KEYS),
    spec(K::FlushAll, "flushall", -1, &["write"], NO_KEYS),
    spec(K::Info, "info", -1, &["loading", "stale"], NO_KEYS),
    spec(
        K::BgRewriteAof,
        "bgrewriteaof",
        1,
        &["admin", "noscript", "no_async_loading"],
        NO_KEYS,
    ),
    CommandSpec {
        subcommands: &crate::config::SUBCOMMANDS,
        ..spec(K::Container, "config", -2, &[], NO_KEYS)
    },
    CommandSpec {
        subcommands: &crate::clients::command::SUBCOMMANDS,
        ..spec(K::Client(None), "client", -2, &[], NO_KEYS)
    },
    spec(
        K::Auth,
        "auth",
        -2,
        &[
            "noscript",
            "loading",
            "stale",
            "fast",
            "no_auth",
            "allow_busy",
        ],
        NO_KEYS,
    ),
    spec(
        K::Quit,
        "quit",
        -1,
        &[
            "allow_busy",
            "noscript",
            "loading",
            "stale",
            "fast",
            "no_auth",
        ],
        NO_KEYS,
    ),
    spec(
        K::Reset,
        "reset",
        1,
        &[
            "noscript",
            "loading",
            "stale",
            "fast",
            "no_auth",
            "allow_busy",
        ],
        NO_KEYS,
    ),
    spec(
        K::Select,
        "select",
        2,
        &["loading", "stale", "fast"],
        NO_KEYS,
    ),
    spec(K::Multi, "multi", 1, TXN_FLAGS, NO_KEYS),
    spec(
        K::Exec,
        "exec",
        1,
        &["noscript", "loading", "stale", "skip_slowlog"],
        NO_KEYS,
    ),
    spec(K::Discard, "discard", 1, TXN_FLAGS, NO_KEYS),
    spec(K::Watch, "watch", -2, TXN_FLAGS, (1, -1, 1)),
    spec(K::Unwatch, "unwatch", 1, TXN_FLAGS, NO_KEYS),
    spec(
        K::Hello,
        "hello",
        -1,
        &[
            "noscript",
            "loading",
            "stale",
            "fast",
            "no_auth",
            "allow_busy",
        ],
        NO_KEYS,
    ),
    CommandSpec {
        subcommands: &CLUSTER_SUBCOMMANDS,
        ..spec(K::Cluster, "cluster", -2, &[], NO_KEYS)
    },
    spec(K::Cluster, "asking", 1, &["fast"], NO_KEYS),
    spec(
        K::Cluster,
        "readonly",
        1,
        &["loading", "stale", "fast"],
        NO_KEYS,
    ),
    spec(
        K::Cluster,
        "readwrite",
        1,
        &["loading", "stale", "fast"],
        NO_KEYS,
    ),
    // MIGRATE's keys may also follow KEYS (movablekeys); the cluster gate finds them.
    spec(
        K::Cluster,
        "migrate",
        -6,
        &["write", "movablekeys"],
        (3, 3, 1),
    ),
    spec(K::Cluster, "dump", 2, &["readonly"], ONE_KEY),
    spec(K::Cluster, "restore", -4, WRITE, ONE_KEY),
    spec(
        K::Cluster,
        "restore-asking",
        -4,
        &["write", "denyoom", "asking"],
        ONE_KEY,
    ),
];

/// The command named `name` (case-insensitive), from either table.
///
/// Every request goes through here, so it looks among the few names of the same length and
/// first letter rather than scanning ~200 names case-insensitively (SADD and HSET sat near the
/// end), and compares each by its [`prefix`] first: a name of up to 8 bytes (most)
/// in one comparison, not byte by byte. The buckets keep the tables' order, so the first table
/// still wins.
pub(crate) fn find(name: &[u8]) -> Option<&'static CommandSpec> {
    type Buckets = Vec<Vec<(u64, &'static CommandSpec)>>;
    static BY_SHAPE: std::sync::OnceLock<Buckets> = std::sync::OnceLock::new();
    let buckets = BY_SHAPE.get_or_init(|| {
        let mut buckets = vec![Vec::new(); (MAX_NAME_LEN + 1) * 32];
        for spec in all() {
            if let Some(bucket) = shape(spec.name.as_bytes()) {
                buckets[bucket].push((prefix(spec.name.as_bytes()), spec));
            }
        }
        buckets
    });
    let candidates = buckets.get(shape(name)?)?;
    let wanted = prefix(name);
    // A bucket's names all have `name`'s length: up to 8 bytes the prefix is the whole name.
    let longer = name.len() > 8;
    (candidates.iter()).find_map(|&(prefix, spec)| {
        (prefix == wanted && (!longer || spec.name.as_bytes().eq_ignore_ascii_case(name)))
            .then_some(spec)
    })
}

/// The first 8 bytes of `name` lowercased (ASCII), as one number, zero-padded.
fn prefix(name: &[u8]) -> u64 {
    let mut bytes = [0; 8];
    for (to, from) in bytes.iter_mut().zip(name) {
        *to = from.to_ascii_lowercase();
    }
    u64::from_le_bytes(bytes)
}

/// Names are lowercase ASCII in the tables and none is longer than this (checked by a test),
/// so a longer name is unknown without a look.
const MAX_NAME_LEN: usize = 32;

/// The bucket of names of `name`'s length and first letter (any case); `None` for an empty or
/// too long name.
fn shape(name: &[u8]) -> Option<usize> {
    let first = *name.first()?;
    (name.len() <= MAX_NAME_LEN)
        .then(|| name.len() * 32 + usize::from(first.to_ascii_lowercase() & 31))
}

/// Every top-level command, as `COMMAND` lists them.
pub(crate) fn all() -> impl Iterator<Item = &'static CommandSpec> {
    COMMANDS
        .iter()
        .chain(super::typed::TYPED_COMMANDS)
        .chain(super::keyops::KEY_COMMANDS)
        .chain(crate::introspect::COMMANDS.iter())
        .chain(super::pubsub::COMMANDS.iter())
        .chain(crate::scripting::COMMANDS)
        .chain(crate::acl::command::COMMANDS.iter())
        .chain(crate::repl::replicaof::COMMANDS.iter())
        .chain(crate::repl::command::COMMANDS.iter())
}

/// Positions of the keys in a request (`args[0]` is the command name), from the table's
/// first key, last key and step: what the cluster check hashes. Errors for unknown commands
/// and wrong arity, as the parser reports them.
pub fn key_positions(args: &[Bytes]) -> Result<Vec<usize>, super::CommandError> {
    let spec = super::parse::resolve(args)?;
    if let CommandKind::Script(op) = spec.kind {
        return Ok(if op.runs_script() {
            crate::scripting::key_positions(args)
        } else {
            Vec::new()
        });
    }
    if spec.first_key <= 0 {
        return Ok(Vec::new());
    }
    let argc = args.len() as i64;
    let last = if spec.last_key < 0 {
        argc + spec.last_key
    } else {
        spec.last_key.min(argc - 1)
    };
    Ok((spec.first_key..=last)
        .step_by(spec.key_step.max(1) as usize)
        .map(|i| i as usize)
        .collect())
}

/// Case-insensitive lookup among `specs` (a command table or a container's subcommands, whose
/// names are matched after the `|`).
pub(crate) fn lookup<'a>(specs: &'a [CommandSpec], name: &[u8]) -> Option<&'a CommandSpec> {
    specs.iter().find(|spec| {
        let full = spec.name.as_bytes();
        let Some(start) = full.len().checked_sub(name.len()) else {
            return false;
        };
        (start == 0 || full[start - 1] == b'|') && full[start..].eq_ignore_ascii_case(name)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn find_matches_the_scan_of_every_table() {
        for spec in all() {
            let name = spec.name.as_bytes();
            assert!(name.len() <= MAX_NAME_LEN && !name.iter().any(u8::is_ascii_uppercase));
            assert!(!name.contains(&b'|'), "a subcommand in a top-level table");
            let scanned = lookup(&COMMANDS, name)
                .or_else(|| lookup(super::super::typed::TYPED_COMMANDS, name))
                .or_else(|| lookup(super::super::keyops::KEY_COMMANDS, name))
                .or_else(|| lookup(&crate::introspect::COMMANDS, name))
                .or_else(|| lookup(&super::super::pubsub::COMMANDS, name))
                .or_else(|| lookup(crate::scripting::COMMANDS, name))
                .or_else(|| lookup(&crate::acl::command::COMMANDS, name))
                .or_else(|| lookup(&crate::repl::command::COMMANDS, name))
                .or_else(|| lookup(&crate::repl::replicaof::COMMANDS, name));
            let upper = name.to_ascii_uppercase();
            assert!(std::ptr::eq(find(&upper).unwrap(), scanned.unwrap()));
        }
        assert!(find(b"nope").is_none() && find(&[b'a'; 40]).is_none() && find(b"").is_none());
    }

    #[test]
    fn subcommand_names_say_their_container() {
        // The parser skips two arguments for a spec found among a container's subcommands.
        for spec in all() {
            assert!(spec.subcommands.iter().all(|sub| sub.name.contains('|')));
        }
        let long = find(b"ZRANGEBYSCORE").unwrap();
        assert_eq!(long.name, "zrangebyscore");
        assert!(find(b"ZRANGEBYSCORX").is_none() && find(b"hsex").is_none());
    }

    #[test]
    fn lookup_ignores_case() {
        assert_eq!(lookup(&COMMANDS, b"gEt").map(|s| s.kind), Some(K::Get));
        assert_eq!(lookup(&COMMANDS, b"nope").map(|s| s.kind), None);
        assert_eq!(
            lookup(&crate::config::SUBCOMMANDS, b"GET").map(|s| s.kind),
            Some(K::Config(crate::config::Sub::Get))
        );
    }

    #[test]
    fn arity_follows_redis_convention() {
        let get = lookup(&COMMANDS, b"get").unwrap();
        assert!(get.accepts_arg_count(2));
        assert!(!get.accepts_arg_count(3));
        let del = lookup(&COMMANDS, b"del").unwrap();
        assert!(!del.accepts_arg_count(1));
        assert!(del.accepts_arg_count(5));
    }
}
