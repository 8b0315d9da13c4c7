//! The cluster's commands, parsed: CLUSTER and its subcommands, ASKING, READONLY,
//! READWRITE, MIGRATE, DUMP and RESTORE (RESTORE-ASKING). Arity is the command table's;
//! the checks here follow Redis 7.0's order and wording.

use bytes::Bytes;

use super::slots::parse_slot;
pub use super::topology::FailoverMode;
use crate::command::CommandError;
use crate::number::parse_i64;
use crate::reply::Reply;

/// A cluster-related request. [`ClusterRequest::MigrateCommit`] is never parsed: the glue
/// builds it to finish a MIGRATE on the shard that holds the keys.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClusterRequest {
    /// Subcommands answered from the node's configuration (on shard 0).
    Node(NodeCommand),
    KeySlot(Bytes),
    CountKeysInSlot(u16),
    GetKeysInSlot {
        slot: u16,
        count: usize,
    },
    Asking,
    ReadOnly,
    ReadWrite,
    /// Boxed, as is `Restore`: rare and large, they would make every `Command` (moved several
    /// times per request) as large as they are.
    Migrate(Box<Migrate>),
    Dump(Bytes),
    Restore(Box<Restore>),
    /// Deletes the keys the target acknowledged (logged as DEL) and answers `reply`.
    MigrateCommit {
        keys: Vec<Bytes>,
        reply: Reply,
    },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NodeCommand {
    Info,
    MyId,
    Nodes,
    Slots,
    Shards,
    Links,
    Help,
    /// ADDSLOTS, ADDSLOTSRANGE (`delete: false`), DELSLOTS, DELSLOTSRANGE: as ranges.
    UpdateSlots {
        ranges: Vec<(u16, u16)>,
        delete: bool,
    },
    FlushSlots,
    SetSlot {
        slot: u16,
        action: SetSlot,
    },
    Meet {
        ip: Bytes,
        port: i64,
        cport: i64,
    },
    Forget(Bytes),
    Reset {
        hard: bool,
    },
    SaveConfig,
    SetConfigEpoch(i64),
    BumpEpoch,
    CountFailureReports(Bytes),
    Replicas(Bytes),
    Replicate(Bytes),
    Failover(FailoverMode),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SetSlot {
    Migrating(Bytes),
    Importing(Bytes),
    Stable,
    Node(Bytes),
}

/// `MIGRATE host port key|"" db timeout [COPY] [REPLACE] [AUTH pw | AUTH2 user pw] [KEYS ...]`
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Migrate {
    pub host: Bytes,
    pub port: Bytes,
    pub keys: Vec<Bytes>,
    /// Milliseconds for each step (connect, write, each reply); Redis's 1000 when `<= 0`.
    pub timeout_ms: u64,
    pub copy: bool,
    pub replace: bool,
    /// `(username, password)` sent as AUTH before the keys.
    pub auth: Option<(Option<Bytes>, Bytes)>,
}

/// `RESTORE key ttl payload [REPLACE] [ABSTTL] [IDLETIME s] [FREQ f]`
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Restore {
    pub key: Bytes,
    /// Milliseconds to live (0: none), or a Unix time in ms with `absolute`.
    pub ttl_ms: u64,
    pub absolute: bool,
    pub payload: Bytes,
    pub replace: bool,
}

fn err(text: impl Into<String>) -> CommandError {
    CommandError::Text(format!("ERR {}", text.into()))
}

fn is(arg: &[u8], word: &str) -> bool {
    arg.eq_ignore_ascii_case(word.as_bytes())
}

fn integer(arg: &[u8]) -> Result<i64, CommandError> {
    parse_i64(arg).ok_or(CommandError::NotAnInteger)
}

fn slot(arg: &[u8]) -> Result<u16, CommandError> {
    parse_slot(arg).ok_or_else(|| err("Invalid or out of range slot"))
}

impl ClusterRequest {
    /// Lowercase Redis name, for errors and stats.
    pub fn name(&self) -> &'static str {
        match self {
            ClusterRequest::Node(_)
            | ClusterRequest::KeySlot(_)
            | ClusterRequest::CountKeysInSlot(_)
            | ClusterRequest::GetKeysInSlot { .. } => "cluster",
            ClusterRequest::Asking => "asking",
            ClusterRequest::ReadOnly => "readonly",
            ClusterRequest::ReadWrite => "readwrite",
            ClusterRequest::Migrate(_) | ClusterRequest::MigrateCommit { .. } => "migrate",
            ClusterRequest::Dump(_) => "dump",
            ClusterRequest::Restore(_) => "restore",
        }
    }

    /// The keys it reads or writes.
    pub fn keys(&self) -> Vec<&[u8]> {
        match self {
            ClusterRequest::Migrate(m) => m.keys.iter().map(|k| &k[..]).collect(),
            ClusterRequest::Dump(key) => vec![key],
            ClusterRequest::Restore(r) => vec![&r.key],
            ClusterRequest::MigrateCommit { keys, .. } => keys.iter().map(|k| &k[..]).collect(),
            _ => Vec::new(),
        }
    }

    pub fn is_write(&self) -> bool {
        matches!(
            self,
            ClusterRequest::Migrate(_)
                | ClusterRequest::Restore(_)
                | ClusterRequest::MigrateCommit { .. }
        )
    }

    /// Refused without `--cluster-enabled` (MIGRATE, DUMP and RESTORE work either way).
    pub fn needs_cluster_mode(&self) -> bool {
        !matches!(
            self,
            ClusterRequest::Migrate(_)
                | ClusterRequest::Dump(_)
                | ClusterRequest::Restore(_)
                | ClusterRequest::MigrateCommit { .. }
        )
    }

    /// Answered by the connection itself.
    pub fn is_connection_level(&self) -> bool {
        matches!(
            self,
            ClusterRequest::KeySlot(_)
                | ClusterRequest::Asking
                | ClusterRequest::ReadOnly
                | ClusterRequest::ReadWrite
        )
    }

    /// The shard that runs it among `shards`: the keys' shard, the slot's shard for the
    /// slot queries, shard 0 (which holds the node's configuration) for the rest.
    pub fn shard(&self, shards: usize) -> usize {
        let shards = shards.max(1);
        match self {
            ClusterRequest::CountKeysInSlot(slot) | ClusterRequest::GetKeysInSlot { slot, .. } => {
                usize::from(*slot) % shards
            }
            other => other
                .keys()
                .first()
                .map_or(0, |key| crate::routing::shard_of(key, shards)),
        }
    }
}

/// Parses a request whose command table entry is `name` (`cluster|nodes`, `migrate`, ...)
/// from its arguments after the name (and the subcommand). Arity was checked against the
/// table.
pub fn parse(name: &str, args: Vec<Bytes>) -> Result<ClusterRequest, CommandError> {
    let request = match name.split_once('|') {
        Some(("cluster", sub)) => parse_cluster(sub, &args)?,
        _ => match name {
            "asking" => ClusterRequest::Asking,
            "readonly" => ClusterRequest::ReadOnly,
            "readwrite" => ClusterRequest::ReadWrite,
            "dump" => ClusterRequest::Dump(args[0].clone()),
            "restore" | "restore-asking" => {
                ClusterRequest::Restore(Box::new(parse_restore(&args)?))
            }
            "migrate" => ClusterRequest::Migrate(Box::new(parse_migrate(&args)?)),
            _ => return Err(CommandError::Syntax),
        },
    };
    Ok(request)
}

fn parse_cluster(sub: &str, args: &[Bytes]) -> Result<ClusterRequest, CommandError> {
    let node = |command| Ok(ClusterRequest::Node(command));
    match sub {
        "info" => node(NodeCommand::Info),
        "myid" => node(NodeCommand::MyId),
        "nodes" => node(NodeCommand::Nodes),
        "slots" => node(NodeCommand::Slots),
        "shards" => node(NodeCommand::Shards),
        "links" => node(NodeCommand::Links),
        "help" => node(NodeCommand::Help),
        "saveconfig" => node(NodeCommand::SaveConfig),
        "bumpepoch" => node(NodeCommand::BumpEpoch),
        "flushslots" => node(NodeCommand::FlushSlots),
        "replicate" => node(NodeCommand::Replicate(args[0].clone())),
        "failover" => {
            let mode = match args {
                [] => FailoverMode::Coordinated,
                [mode] if is(mode, "force") => FailoverMode::Force,
                [mode] if is(mode, "takeover") => FailoverMode::Takeover,
                _ => return Err(CommandError::Syntax),
            };
            node(NodeCommand::Failover(mode))
        }
        "keyslot" => Ok(ClusterRequest::KeySlot(args[0].clone())),
        "countkeysinslot" => {
            let slot = integer(&args[0])?;
            let slot = u16::try_from(slot)
                .ok()
                .filter(|&s| s < 16384)
                .ok_or_else(|| err("Invalid slot"))?;
            Ok(ClusterRequest::CountKeysInSlot(slot))
        }
        "getkeysinslot" => {
            let (slot, count) = (integer(&args[0])?, integer(&args[1])?);
            match (u16::try_from(slot), usize::try_from(count)) {
                (Ok(slot), Ok(count)) if slot < 16384 => {
                    Ok(ClusterRequest::GetKeysInSlot { slot, count })
                }
                _ => Err(err("Invalid slot or number of keys")),
            }
        }
        "addslots" | "delslots" => {
            let ranges = args
                .iter()
                .map(|a| slot(a).map(|s| (s, s)))
                .collect::<Result<_, _>>()?;
            node(NodeCommand::UpdateSlots {
                ranges,
                delete: sub == "delslots",
            })
        }
        "addslotsrange" | "delslotsrange" => {
            if !args.len().is_multiple_of(2) {
                return Err(CommandError::WrongArity {
                    command: if sub == "addslotsrange" {
                        "cluster|addslotsrange"
                    } else {
                        "cluster|delslotsrange"
                    },
                });
            }
            let ranges = args
                .chunks(2)
                .map(|pair| Ok((slot(&pair[0])?, slot(&pair[1])?)))
                .collect::<Result<_, CommandError>>()?;
            node(NodeCommand::UpdateSlots {
                ranges,
                delete: sub == "delslotsrange",
            })
        }
        "setslot" => {
            let slot = slot(&args[0])?;
            let action =
                match (&args[1..], args.len()) {
                    ([action, id], 3) if is(action, "migrating") => SetSlot::Migrating(id.clone()),
                    ([action, id], 3) if is(action, "importing") => SetSlot::Importing(id.clone()),
                    ([action, id], 3) if is(action, "node") => SetSlot::Node(id.clone()),
                    ([action], 2) if is(action, "stable") => SetSlot::Stable,
                    _ => return Err(err(
                        "Invalid CLUSTER SETSLOT action or number of arguments. Try CLUSTER HELP",
                    )),
                };
            node(NodeCommand::SetSlot { slot, action })
        }
        "meet" => {
            if args.len() > 3 {
                return Err(CommandError::Syntax);
            }
            let port = parse_i64(&args[1]).ok_or_else(|| {
                err(format!(
                    "Invalid TCP base port specified: {}",
                    String::from_utf8_lossy(&args[1])
                ))
            })?;
            let cport = match args.get(2) {
                None => port + 10000,
                Some(cport) => parse_i64(cport).ok_or_else(|| {
                    err(format!(
                        "Invalid TCP bus port specified: {}",
                        String::from_utf8_lossy(cport)
                    ))
                })?,
            };
            node(NodeCommand::Meet {
                ip: args[0].clone(),
                port,
                cport,
            })
        }
        "forget" => node(NodeCommand::Forget(args[0].clone())),
        "count-failure-reports" => node(NodeCommand::CountFailureReports(args[0].clone())),
        "replicas" | "slaves" => node(NodeCommand::Replicas(args[0].clone())),
        "reset" => {
            let hard = match args {
                [] => false,
                [mode] if is(mode, "hard") => true,
                [mode] if is(mode, "soft") => false,
                _ => return Err(CommandError::Syntax),
            };
            node(NodeCommand::Reset { hard })
        }
        "set-config-epoch" => node(NodeCommand::SetConfigEpoch(integer(&args[0])?)),
        _ => Err(err(format!(
            "unknown subcommand '{sub}'. Try CLUSTER HELP."
        ))),
    }
}

/// Redis's `migrateCommand` option parsing. `args` starts at the host.
fn parse_migrate(args: &[Bytes]) -> Result<Migrate, CommandError> {
    let mut migrate = Migrate {
        host: args[0].clone(),
        port: args[1].clone(),
        keys: vec![args[2].clone()],
        timeout_ms: 0,
        copy: false,
        replace: false,
        auth: None,
    };
    let mut i = 5;
    while i < args.len() {
        let option = &args[i];
        let rest = args.len() - i - 1;
        if is(option, "copy") {
            migrate.copy = true;
        } else if is(option, "replace") {
            migrate.replace = true;
        } else if is(option, "auth") {
            if rest < 1 {
                return Err(CommandError::Syntax);
            }
            migrate.auth = Some((None, args[i + 1].clone()));
            i += 1;
        } else if is(option, "auth2") {
            if rest < 2 {
                return Err(CommandError::Syntax);
            }
            migrate.auth = Some((Some(args[i + 1].clone()), args[i + 2].clone()));
            i += 2;
        } else if is(option, "keys") {
            if !args[2].is_empty() {
                return Err(err(
                    "When using MIGRATE KEYS option, the key argument must be set to the empty \
                     string",
                ));
            }
            migrate.keys = args[i + 1..].to_vec();
            break;
        } else {
            return Err(CommandError::Syntax);
        }
        i += 1;
    }
    let timeout = integer(&args[4])?;
    let db = integer(&args[3])?;
    if db != 0 {
        return Err(CommandError::DbIndexOutOfRange);
    }
    migrate.timeout_ms = if timeout <= 0 { 1000 } else { timeout as u64 };
    Ok(migrate)
}

/// Redis's `restoreCommand` option parsing. `args` starts at the key.
fn parse_restore(args: &[Bytes]) -> Result<Restore, CommandError> {
    let mut restore = Restore {
        key: args[0].clone(),
        ttl_ms: 0,
        absolute: false,
        payload: args[2].clone(),
        replace: false,
    };
    let (mut idletime, mut freq) = (false, false);
    let mut i = 3;
    while i < args.len() {
        let option = &args[i];
        let value = args.get(i + 1);
        if is(option, "replace") {
            restore.replace = true;
        } else if is(option, "absttl") {
            restore.absolute = true;
        } else if is(option, "idletime") && value.is_some() && !freq {
            // Accepted and checked; this store keeps no access times to set.
            if integer(&args[i + 1])? < 0 {
                return Err(err("Invalid IDLETIME value, must be >= 0"));
            }
            idletime = true;
            i += 1;
        } else if is(option, "freq") && value.is_some() && !idletime {
            let f = integer(&args[i + 1])?;
            if !(0..=255).contains(&f) {
                return Err(err("Invalid FREQ value, must be >= 0 and <= 255"));
            }
            freq = true;
            i += 1;
        } else {
            return Err(CommandError::Syntax);
        }
        i += 1;
    }
    let ttl = integer(&args[1])?;
    if ttl < 0 {
        return Err(err("Invalid TTL value, must be >= 0"));
    }
    restore.ttl_ms = ttl as u64;
    Ok(restore)
}

/// CLUSTER HELP's text, one line per element (Redis 7.0's).
pub const HELP: &[&str] = &[
    "ADDSLOTS <slot> [<slot> ...]",
    "    Assign slots to current node.",
    "ADDSLOTSRANGE <start slot> <end slot> [<start slot> <end slot> ...]",
    "    Assign slots which are between <start-slot> and <end-slot> to current node.",
    "BUMPEPOCH",
    "    Advance the cluster config epoch.",
    "COUNT-FAILURE-REPORTS <node-id>",
    "    Return number of failure reports for <node-id>.",
    "COUNTKEYSINSLOT <slot>",
    "    Return the number of keys in <slot>.",
    "DELSLOTS <slot> [<slot> ...]",
    "    Delete slots information from current node.",
    "DELSLOTSRANGE <start slot> <end slot> [<start slot> <end slot> ...]",
    "    Delete slots information which are between <start-slot> and <end-slot> from current node.",
    "FAILOVER [FORCE|TAKEOVER]",
    "    Promote current replica node to being a master.",
    "FORGET <node-id>",
    "    Remove a node from the cluster.",
    "GETKEYSINSLOT <slot> <count>",
    "    Return key names stored by current node in a slot.",
    "FLUSHSLOTS",
    "    Delete current node own slots information.",
    "INFO",
    "    Return information about the cluster.",
    "KEYSLOT <key>",
    "    Return the hash slot for <key>.",
    "MEET <ip> <port> [<bus-port>]",
    "    Connect nodes into a working cluster.",
    "MYID",
    "    Return the node id.",
    "NODES",
    "    Return cluster configuration seen by node. Output format:",
    "    <id> <ip:port> <flags> <master> <pings> <pongs> <epoch> <link> <slot> ...",
    "REPLICATE <node-id>",
    "    Configure current node as replica to <node-id>.",
    "RESET [HARD|SOFT]",
    "    Reset current node (default: soft).",
    "SET-CONFIG-EPOCH <epoch>",
    "    Set config epoch of current node.",
    "SETSLOT <slot> (IMPORTING <node-id>|MIGRATING <node-id>|STABLE|NODE <node-id>)",
    "    Set slot state.",
    "REPLICAS <node-id>",
    "    Return <node-id> replicas.",
    "SAVECONFIG",
    "    Force saving cluster configuration on disk.",
    "SLOTS",
    "    Return information about slots range mappings. Each range is made of:",
    "    start, end, master and replicas IP addresses, ports and ids",
    "SHARDS",
    "    Return information about slot range mappings and the nodes associated with them.",
    "LINKS",
    "    Return information about all network links between this node and its peers.",
    "    Output format is an array where each array element is a map containing attributes of a link",
];

#[cfg(test)]
mod tests {
    use super::*;

    fn args(line: &str) -> Vec<Bytes> {
        line.split(' ')
            .map(|s| Bytes::from(if s == "''" { "" } else { s }.to_owned()))
            .collect()
    }

    fn cluster(line: &str) -> Result<ClusterRequest, CommandError> {
        let args = args(line);
        let sub = String::from_utf8(args[1].to_ascii_lowercase()).unwrap();
        parse(&format!("cluster|{sub}"), args[2..].to_vec())
    }

    fn text(e: CommandError) -> String {
        String::from_utf8(e.message()).unwrap()
    }

    #[test]
    fn slots_and_ranges() {
        assert_eq!(
            cluster("CLUSTER ADDSLOTS 1 2"),
            Ok(ClusterRequest::Node(NodeCommand::UpdateSlots {
                ranges: vec![(1, 1), (2, 2)],
                delete: false
            }))
        );
        assert_eq!(
            cluster("cluster delslotsrange 0 5"),
            Ok(ClusterRequest::Node(NodeCommand::UpdateSlots {
                ranges: vec![(0, 5)],
                delete: true
            }))
        );
        assert_eq!(
            text(cluster("cluster addslots 16384").unwrap_err()),
            "ERR Invalid or out of range slot"
        );
        assert_eq!(
            text(cluster("cluster addslotsrange 1 2 3").unwrap_err()),
            "ERR wrong number of arguments for 'cluster|addslotsrange' command"
        );
        assert_eq!(
            text(cluster("cluster countkeysinslot 20000").unwrap_err()),
            "ERR Invalid slot"
        );
        assert_eq!(
            text(cluster("cluster getkeysinslot 1 -1").unwrap_err()),
            "ERR Invalid slot or number of keys"
        );
    }

    #[test]
    fn setslot_and_meet() {
        assert_eq!(
            cluster("cluster setslot 7 stable"),
            Ok(ClusterRequest::Node(NodeCommand::SetSlot {
                slot: 7,
                action: SetSlot::Stable
            }))
        );
        assert_eq!(
            text(cluster("cluster setslot 7 node").unwrap_err()),
            "ERR Invalid CLUSTER SETSLOT action or number of arguments. Try CLUSTER HELP"
        );
        assert_eq!(
            cluster("cluster meet 127.0.0.1 7000"),
            Ok(ClusterRequest::Node(NodeCommand::Meet {
                ip: Bytes::from("127.0.0.1"),
                port: 7000,
                cport: 17000
            }))
        );
        assert_eq!(
            text(cluster("cluster meet 127.0.0.1 x").unwrap_err()),
            "ERR Invalid TCP base port specified: x"
        );
    }

    #[test]
    fn replicate_and_failover() {
        assert_eq!(
            cluster("cluster replicate abc"),
            Ok(ClusterRequest::Node(NodeCommand::Replicate(Bytes::from(
                "abc"
            ))))
        );
        assert_eq!(
            cluster("CLUSTER FAILOVER"),
            Ok(ClusterRequest::Node(NodeCommand::Failover(
                FailoverMode::Coordinated
            )))
        );
        assert_eq!(
            cluster("cluster failover TAKEOVER"),
            Ok(ClusterRequest::Node(NodeCommand::Failover(
                FailoverMode::Takeover
            )))
        );
        assert_eq!(
            text(cluster("cluster failover soon").unwrap_err()),
            "ERR syntax error"
        );
    }

    #[test]
    fn migrate_options() {
        let m = |line: &str| match parse("migrate", args(line)[1..].to_vec()) {
            Ok(ClusterRequest::Migrate(m)) => Ok(*m),
            Ok(other) => panic!("{other:?}"),
            Err(e) => Err(text(e)),
        };
        let one = m("MIGRATE h 7000 k 0 5000").unwrap();
        assert_eq!(one.keys, vec![Bytes::from("k")]);
        assert_eq!(one.timeout_ms, 5000);
        let many = m("migrate h 7000 '' 0 0 REPLACE AUTH pw KEYS a b").unwrap();
        assert_eq!(many.keys, vec![Bytes::from("a"), Bytes::from("b")]);
        assert!(many.replace && !many.copy);
        assert_eq!(many.timeout_ms, 1000);
        assert_eq!(many.auth, Some((None, Bytes::from("pw"))));
        assert_eq!(
            m("migrate h 1 k 0 0 KEYS a").unwrap_err(),
            "ERR When using MIGRATE KEYS option, the key argument must be set to the empty \
             string"
        );
        assert_eq!(
            m("migrate h 1 k 0 0 bogus").unwrap_err(),
            "ERR syntax error"
        );
        assert_eq!(
            m("migrate h 1 k 1 0").unwrap_err(),
            "ERR DB index is out of range"
        );
    }

    #[test]
    fn restore_options() {
        let r = |line: &str| match parse("restore", args(line)[1..].to_vec()) {
            Ok(ClusterRequest::Restore(r)) => Ok(*r),
            Ok(other) => panic!("{other:?}"),
            Err(e) => Err(text(e)),
        };
        let plain = r("RESTORE k 0 payload").unwrap();
        assert_eq!(
            (plain.ttl_ms, plain.replace, plain.absolute),
            (0, false, false)
        );
        let all = r("restore k 5 p REPLACE ABSTTL IDLETIME 3").unwrap();
        assert_eq!((all.ttl_ms, all.replace, all.absolute), (5, true, true));
        assert_eq!(
            r("restore k -1 p").unwrap_err(),
            "ERR Invalid TTL value, must be >= 0"
        );
        assert_eq!(
            r("restore k 1 p idletime 1 freq 2").unwrap_err(),
            "ERR syntax error"
        );
        assert_eq!(
            r("restore k 1 p freq 256").unwrap_err(),
            "ERR Invalid FREQ value, must be >= 0 and <= 255"
        );
    }

    #[test]
    fn requests_run_where_their_data_is() {
        let migrate = parse("migrate", args("h 1 '' 0 0 KEYS {x}a {x}b")).unwrap();
        let shard = crate::routing::shard_of(b"x", 4);
        assert_eq!(migrate.shard(4), shard);
        assert_eq!(ClusterRequest::CountKeysInSlot(10).shard(4), 2);
        assert_eq!(ClusterRequest::Node(NodeCommand::Nodes).shard(4), 0);
    }
}
