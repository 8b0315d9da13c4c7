//! Typed client commands, parsed from a request's arguments with Redis 7's validation order
//! and error wording.

pub(crate) mod argv;
mod error;
mod hello;
pub(crate) mod keyops;
mod keys;
mod parse;
pub(crate) mod pubsub;
mod sort;
pub(crate) mod table;
mod typed;

use bytes::Bytes;

pub use crate::clients::{ClientRequest, ClientsBroadcast, ClientsOp, LibAttribute};
pub use crate::config::Setting;
pub use error::CommandError;
pub use hello::Hello;
pub(crate) use keyops::KeyShape;
pub use keyops::{KeyCommand, KeyOp};
pub use pubsub::{PubSubQuery, ShardPubSub, Subscription};
pub use sort::{parse_sort, pattern_target, sort_store_key, SortArgs};
pub use table::key_positions;
pub use typed::{mpop_args, sintercard_args, zmpop_args, ListEnd, MPopArgs, TypedCommand, TypedOp};

use crate::cluster::ClusterRequest;
use crate::reply::Reply;

/// A parsed request. Keys and values are binary-safe `Bytes`, usually slices of the
/// connection's input buffer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    Ping(Option<Bytes>),
    Echo(Bytes),
    Get(Bytes),
    Set(SetCommand),
    GetSet {
        key: Bytes,
        value: Bytes,
    },
    Del(Vec<Bytes>),
    Exists(Vec<Bytes>),
    /// INCR, INCRBY, DECR and DECRBY (DECRBY's operand is negated at parse time).
    IncrBy {
        key: Bytes,
        delta: i64,
    },
    Append {
        key: Bytes,
        value: Bytes,
    },
    Strlen(Bytes),
    MGet(Vec<Bytes>),
    MSet(Vec<(Bytes, Bytes)>),
    /// EXPIRE, PEXPIRE, EXPIREAT and PEXPIREAT.
    Expire(ExpireCommand),
    /// TTL and PTTL.
    Ttl {
        key: Bytes,
        unit: TimeUnit,
    },
    Persist(Bytes),
    DbSize,
    /// FLUSHALL [ASYNC|SYNC]; both modes flush synchronously.
    FlushAll,
    /// INFO [section ...], sections as the client sent them.
    Info(Vec<Bytes>),
    /// CONFIG GET pattern [pattern ...].
    ConfigGet(Vec<Bytes>),
    /// CONFIG SET parameter value [parameter value ...] (validated by the session).
    ConfigSet(Vec<(Bytes, Bytes)>),
    /// What a validated CONFIG SET asks every shard to apply.
    ConfigApply(Vec<Setting>),
    /// CONFIG RESETSTAT: every shard zeroes the counters INFO reports.
    ConfigResetStat,
    /// CONFIG REWRITE: the configuration file, rewritten with the current values.
    ConfigRewrite,
    /// A HELP subcommand: its lines, answered by the connection.
    Help {
        command: &'static str,
        lines: &'static [&'static str],
    },
    /// The introspection family: COMMAND, SLOWLOG, LATENCY, MEMORY, MONITOR, TIME, ... (see
    /// [`crate::introspect`]).
    Introspect(crate::introspect::Request),
    /// CLIENT SETNAME/GETNAME/ID/SETINFO/INFO/LIST/KILL/NO-EVICT.
    Client(ClientRequest),
    Auth {
        username: Option<Bytes>,
        password: Bytes,
    },
    Quit,
    /// RESET: the connection back to its state right after connecting.
    Reset,
    Select(i64),
    /// BGREWRITEAOF: every shard rewrites its append-only log in the background.
    BgRewriteAof,
    /// CLUSTER, ASKING, READONLY, READWRITE, MIGRATE, DUMP, RESTORE (see [`crate::cluster`]).
    Cluster(ClusterRequest),
    /// A command of the collection types, or TYPE.
    Typed(TypedCommand),
    /// A keyspace or string command ([`KeyOp`]).
    Key(KeyCommand),
    /// EVAL, FCALL, SCRIPT, FUNCTION: the scripting family ([`crate::scripting`]).
    Script(crate::scripting::ScriptCommand),
    /// MULTI, EXEC, DISCARD: the session queues and submits (see `session/multi.rs`).
    Multi,
    Exec,
    Discard,
    /// WATCH key [key ...]: registered on the shards owning the keys.
    Watch(Vec<Bytes>),
    /// UNWATCH (also what DISCARD, EXEC and RESET do to a connection's watches).
    Unwatch,
    /// What EXEC submits: the queued commands, run without any other client's command in
    /// between on the keys they touch (see `server/txn`). Built by the session, never parsed.
    Transaction(Box<Transaction>),
    /// ACL and its subcommands: the connection answers them (see `session/acl.rs`).
    Acl(crate::acl::AclRequest),
    /// PSYNC, SYNC, REPLCONF, WAIT, ROLE (see [`crate::repl`]).
    Repl(crate::repl::ReplRequest),
    /// (P)SUBSCRIBE and (P)UNSUBSCRIBE: the connection's own state (see `session/pubsub.rs`).
    Subscription(Subscription),
    /// PUBLISH channel message: every shard delivers to its subscribers and counts them.
    Publish {
        channel: Bytes,
        message: Bytes,
    },
    PubSub(PubSubQuery),
    /// SPUBLISH, and a connection's shard-channel registrations: on the channel's shard.
    ShardPubSub(ShardPubSub),
    /// HELLO: the protocol version, and optionally AUTH and SETNAME (see `session/hello.rs`).
    /// Boxed: large and once per connection (see `ClusterRequest::Migrate`).
    Hello(Box<Hello>),
    /// REPLICAOF / SLAVEOF and ROLE: on shard 0, which owns the link to a master (see
    /// [`crate::repl`]).
    Replica(crate::repl::replicaof::ReplicaRequest),
}

/// A transaction EXEC submits, in the order the client queued it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Transaction {
    pub items: Vec<TxnItem>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TxnItem {
    /// Runs on the shard(s) owning its keys.
    Run(Command),
    /// Already answered at EXEC time: a connection-level command, or a command whose
    /// arguments Redis rejects only when it runs (so it does not abort the transaction).
    Answered(Reply),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SetCommand {
    pub key: Bytes,
    pub value: Bytes,
    pub condition: SetCondition,
    pub expiry: SetExpiry,
    /// The GET option: reply with the old value instead of OK.
    pub get: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SetCondition {
    Always,
    /// NX
    IfAbsent,
    /// XX
    IfPresent,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SetExpiry {
    /// No option: a plain SET discards any previous TTL.
    Clear,
    /// KEEPTTL
    Keep,
    /// EX / PX, converted to milliseconds (positive, at most `i64::MAX`).
    AfterMs(u64),
    /// EXAT / PXAT, as a Unix time in milliseconds (positive).
    AtMs(u64),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExpireCommand {
    pub key: Bytes,
    pub kind: ExpireKind,
    /// The client's time already converted to milliseconds; relative or absolute per `kind`.
    /// May be negative (the key is then deleted).
    pub time_ms: i64,
    pub condition: ExpireCondition,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExpireKind {
    Expire,
    PExpire,
    ExpireAt,
    PExpireAt,
}

impl ExpireKind {
    pub fn name(self) -> &'static str {
        match self {
            ExpireKind::Expire => "expire",
            ExpireKind::PExpire => "pexpire",
            ExpireKind::ExpireAt => "expireat",
            ExpireKind::PExpireAt => "pexpireat",
        }
    }

    pub fn is_relative(self) -> bool {
        matches!(self, ExpireKind::Expire | ExpireKind::PExpire)
    }
}

/// EXPIRE's NX / XX / GT / LT options. Redis allows XX together with GT or LT, so these are
/// flags rather than one choice; parsing rejects the incompatible combinations.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ExpireCondition {
    /// NX: only if the key has no TTL.
    pub if_no_ttl: bool,
    /// XX: only if the key has a TTL.
    pub if_has_ttl: bool,
    /// GT: only if the new expiry is later (no TTL counts as infinite).
    pub if_later: bool,
    /// LT: only if the new expiry is earlier (no TTL counts as infinite).
    pub if_earlier: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimeUnit {
    Seconds,
    Millis,
}

/// Where a command executes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// Answered by the connection's session; touches no shard.
    Connection,
    /// Touches the shards owning its keys (one or several).
    Keyed,
    /// Touches every shard (DBSIZE, FLUSHALL, INFO).
    AllShards,
}

/// A request's entry in the command table (the subcommand's for a container), as
/// [`Command::resolve`] found it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Resolved {
    pub spec: &'static table::CommandSpec,
    /// How many arguments name the command (2 for a subcommand).
    skip: usize,
}

impl Command {
    /// Parses a request (`args[0]` is the command name). Errors come out in Redis's order:
    /// unknown command, arity, then the command's own syntax checks.
    pub fn parse(args: Vec<Bytes>) -> Result<Command, CommandError> {
        parse::parse(args)
    }

    /// [`Command::parse`], also giving the table's name for the request when the command is
    /// known and its arity right (CLIENT LIST's `cmd`). The request's vector is borrowed:
    /// what the command keeps is moved out, the rest is left for the caller to clear.
    pub fn parse_named(
        args: &mut Vec<Bytes>,
    ) -> (Option<&'static str>, Result<Command, CommandError>) {
        parse::parse_named(args)
    }

    /// Whether it is a blocking pop (BLPOP, BRPOP, BLMOVE, BRPOPLPUSH, BLMPOP) or a stream
    /// read with BLOCK.
    pub fn is_blocking(&self) -> bool {
        matches!(self, Command::Typed(typed) if typed.blocks())
    }

    /// The checks Redis makes before it queues a command inside MULTI (the command table's:
    /// unknown command or subcommand, arity); the command's own checks come when it runs.
    pub fn check_table(args: &[Bytes]) -> Result<(), CommandError> {
        parse::resolve(args).map(|_| ())
    }

    /// The table's entry for the request, after the same checks as
    /// [`Command::check_table`], for [`Command::parse_resolved`]: a caller that needs the
    /// entry (flags, name) and the command looks the name up once.
    pub(crate) fn resolve(args: &[Bytes]) -> Result<Resolved, CommandError> {
        parse::resolve_counted(args).map(|(spec, skip)| Resolved { spec, skip })
    }

    /// [`Command::parse`] of a request [`Command::resolve`] found.
    pub(crate) fn parse_resolved(
        resolved: Resolved,
        args: &mut Vec<Bytes>,
    ) -> Result<Command, CommandError> {
        parse::parse_spec(resolved.spec, resolved.skip, args)
    }

    /// The table's flags for the request (none for an unknown command).
    pub fn flags(args: &[Bytes]) -> &'static [&'static str] {
        parse::resolve(args).map_or(&[], |spec| spec.flags)
    }

    /// Whether the command is flagged `allow_busy` (runs while a script is busy).
    pub fn allows_busy(args: &[Bytes]) -> bool {
        parse::resolve(args).is_ok_and(|spec| spec.flags.contains(&"allow_busy"))
    }

    /// The table's name for the request (`get`, `config|get`), after the same checks as
    /// [`Command::check_table`].
    pub fn table_name(args: &[Bytes]) -> Result<&'static str, CommandError> {
        parse::resolve(args).map(|spec| spec.name)
    }

    /// The command's weight against a connection's fairness budget: its keys or elements
    /// (an MSET of 100 pairs weighs 100, a GET 1), so the budget bounds work per round.
    pub fn budget_units(&self) -> u32 {
        let units = match self {
            Command::MSet(pairs) => pairs.len(),
            Command::MGet(keys) | Command::Del(keys) | Command::Exists(keys) => keys.len(),
            Command::Typed(typed) => typed.args.len(),
            Command::Key(key) => key.args.len(),
            Command::Transaction(transaction) => transaction.items.len(),
            _ => 1,
        };
        u32::try_from(units).unwrap_or(u32::MAX).max(1)
    }

    /// Lowercase Redis name of the command (INCR and friends report `incrby`).
    pub fn name(&self) -> &'static str {
        match self {
            Command::Ping(_) => "ping",
            Command::Echo(_) => "echo",
            Command::Get(_) => "get",
            Command::Set(_) => "set",
            Command::GetSet { .. } => "getset",
            Command::Del(_) => "del",
            Command::Exists(_) => "exists",
            Command::IncrBy { .. } => "incrby",
            Command::Append { .. } => "append",
            Command::Strlen(_) => "strlen",
            Command::MGet(_) => "mget",
            Command::MSet(_) => "mset",
            Command::Expire(expire) => expire.kind.name(),
            Command::Ttl {
                unit: TimeUnit::Seconds,
                ..
            } => "ttl",
            Command::Ttl {
                unit: TimeUnit::Millis,
                ..
            } => "pttl",
            Command::Persist(_) => "persist",
            Command::DbSize => "dbsize",
            Command::FlushAll => "flushall",
            Command::Info(_) => "info",
            Command::ConfigGet(_) => "config|get",
            Command::ConfigSet(_) | Command::ConfigApply(_) => "config|set",
            Command::ConfigResetStat => "config|resetstat",
            Command::ConfigRewrite => "config|rewrite",
            Command::Help { command, .. } => command,
            Command::Introspect(request) => request.name(),
            Command::Client(request) => request.name(),
            Command::Auth { .. } => "auth",
            Command::Quit => "quit",
            Command::Reset => "reset",
            Command::Select(_) => "select",
            Command::BgRewriteAof => "bgrewriteaof",
            Command::Cluster(request) => request.name(),
            Command::Typed(typed) => typed.op.name(),
            Command::Key(key) => key.op.name(),
            Command::Script(script) => script.op.name(),
            Command::Multi => "multi",
            Command::Exec | Command::Transaction(_) => "exec",
            Command::Discard => "discard",
            Command::Watch(_) => "watch",
            Command::Unwatch => "unwatch",
            Command::Subscription(subscription) => subscription.name(),
            Command::Publish { .. } => "publish",
            Command::PubSub(query) => query.name(),
            Command::ShardPubSub(request) => request.name(),
            Command::Hello(_) => "hello",
            Command::Acl(request) => request.name(),
            Command::Replica(request) => request.name(),
            Command::Repl(request) => request.name(),
        }
    }

    /// Whether the command may read or reset the server's statistics (INFO, SLOWLOG, LATENCY,
    /// CONFIG RESETSTAT, a script or a transaction that may run those): the glue records the
    /// commands answered before it first. The data commands listed read none, so theirs
    /// wait for the end of the connection's turn.
    pub fn may_read_stats(&self) -> bool {
        !matches!(
            self,
            Command::Get(_)
                | Command::Set(_)
                | Command::GetSet { .. }
                | Command::Del(_)
                | Command::Exists(_)
                | Command::IncrBy { .. }
                | Command::Append { .. }
                | Command::Strlen(_)
                | Command::MGet(_)
                | Command::MSet(_)
                | Command::Expire(_)
                | Command::Ttl { .. }
                | Command::Persist(_)
                | Command::Typed(_)
                | Command::Key(_)
        )
    }

    pub fn scope(&self) -> Scope {
        match self {
            Command::Ping(_)
            | Command::Echo(_)
            | Command::ConfigGet(_)
            | Command::ConfigSet(_)
            | Command::ConfigRewrite
            | Command::Help { .. }
            | Command::Auth { .. }
            | Command::Quit
            | Command::Reset
            | Command::Select(_)
            | Command::Multi
            | Command::Exec
            | Command::Discard
            | Command::Subscription(_)
            | Command::Hello(_)
            | Command::Acl(_) => Scope::Connection,
            Command::Publish { .. }
            | Command::PubSub(_)
            | Command::ConfigApply(_)
            | Command::ConfigResetStat => Scope::AllShards,
            Command::DbSize | Command::FlushAll | Command::Info(_) | Command::BgRewriteAof => {
                Scope::AllShards
            }
            Command::Cluster(request) if request.is_connection_level() => Scope::Connection,
            Command::Client(ClientRequest::Broadcast(_)) => Scope::AllShards,
            Command::Client(ClientRequest::Track(_)) | Command::ShardPubSub(_) => Scope::Keyed,
            Command::Introspect(request) => request.scope(),
            Command::Client(_) => Scope::Connection,
            // SORT's BY and GET patterns may read a key on any shard.
            Command::Key(key) if key.sort_reads_patterns() => Scope::AllShards,
            _ => Scope::Keyed,
        }
    }

    /// Whether the command may modify the keyspace (and so may produce AOF records).
    pub fn is_write(&self) -> bool {
        matches!(
            self,
            Command::Set(_)
                | Command::GetSet { .. }
                | Command::Del(_)
                | Command::IncrBy { .. }
                | Command::Append { .. }
                | Command::MSet(_)
                | Command::Expire(_)
                | Command::Persist(_)
                | Command::FlushAll
        ) || matches!(self, Command::Cluster(request) if request.is_write())
            || matches!(self, Command::Typed(typed) if typed.op.is_write())
            || matches!(self, Command::Key(key) if key.op.is_write())
            // FUNCTION LOAD and friends change the libraries (logged for restart).
            || matches!(self, Command::Script(script) if script.op.is_function_write())
    }
}

/// Whether the command named `name` is flagged `no_auth` (AUTH, QUIT): usable before a
/// successful AUTH. Decided on the name so that even its argument errors reach the client.
pub fn allowed_without_auth(name: &[u8]) -> bool {
    table::find(name).is_some_and(|spec| spec.flags.contains(&"no_auth"))
}
