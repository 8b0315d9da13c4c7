//! CLIENT's table rows, arguments and requests (Redis 7.0 semantics and errors). Most are
//! answered by the connection (`session/client.rs`); LIST, KILL and UNBLOCK reach every shard
//! (`server/clients.rs`).

use bytes::Bytes;

use super::tracking::TrackingArgs;
use super::{ClientAddress, KillFilter, ListQuery};
use crate::command::table::{spec, CommandKind, CommandSpec};
use crate::command::{Command, CommandError};
use crate::number::parse_i64;

/// A CLIENT subcommand.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClientRequest {
    /// CLIENT SETNAME name; an empty name clears it.
    SetName(Bytes),
    GetName,
    Id,
    /// CLIENT SETINFO LIB-NAME|LIB-VER value.
    SetInfo {
        attribute: LibAttribute,
        value: Bytes,
    },
    /// CLIENT INFO: the connection's own line.
    Info,
    /// CLIENT LIST [TYPE type | ID id ...].
    List(ListQuery),
    /// CLIENT KILL addr:port | CLIENT KILL filter value ...
    Kill(KillFilter),
    /// CLIENT NO-EVICT on|off (a flag only: this server never evicts clients).
    NoEvict(bool),
    /// CLIENT REPLY ON|OFF|SKIP.
    Reply(ReplyMode),
    /// CLIENT PAUSE timeout [WRITE|ALL].
    Pause {
        timeout_ms: u64,
        all: bool,
    },
    Unpause,
    /// CLIENT UNBLOCK id [TIMEOUT|ERROR].
    Unblock {
        id: u64,
        error: bool,
    },
    Tracking(TrackingArgs),
    TrackingInfo,
    GetRedir,
    /// CLIENT CACHING YES|NO.
    Caching(bool),
    Help,
    /// What a tracking connection sends before a read: remember that it read these keys
    /// (built by the session, never parsed).
    Track(Vec<Bytes>),
    /// What CLIENT LIST, KILL and UNBLOCK ask of every shard: built by the session.
    Broadcast(Box<ClientsBroadcast>),
}

/// CLIENT REPLY's modes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReplyMode {
    On,
    Off,
    Skip,
}

/// A CLIENT request as every shard runs it over its own connections. The calling
/// connection answers for itself (the session knows its state): the shards skip it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientsBroadcast {
    /// The caller's client id.
    pub caller: u64,
    pub op: ClientsOp,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClientsOp {
    /// Each shard answers `[id, line, ...]` for its connections the query picks; the
    /// caller's own line is here if the query picks it.
    List {
        query: ListQuery,
        caller_line: Option<(u64, Bytes)>,
    },
    /// Each shard kills its connections the filter picks and answers how many; whether the
    /// caller itself is one (it closes after the reply).
    Kill {
        filter: KillFilter,
        caller_killed: bool,
    },
    /// The users changed (ACL SETUSER, DELUSER, LOAD): each shard closes its connections
    /// whose user went or lost the channels they are subscribed to. The reply is OK, or
    /// `deleted` (ACL DELUSER's count).
    AclRefresh { deleted: Option<i64> },
    /// The shard where the client's pop waits answers it (nil, or the UNBLOCKED error) and
    /// says 1; the others 0.
    Unblock { target: ClientAddress, error: bool },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LibAttribute {
    Name,
    Version,
}

/// Which subcommand a table row parses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sub {
    SetName,
    GetName,
    Id,
    SetInfo,
    Info,
    List,
    Kill,
    NoEvict,
    Reply,
    Pause,
    Unpause,
    Unblock,
    Tracking,
    TrackingInfo,
    GetRedir,
    Caching,
    Help,
}

const FLAGS: &[&str] = &["noscript", "loading", "stale"];
const ADMIN: &[&str] = &["admin", "noscript", "loading", "stale"];

const fn row(
    sub: Sub,
    name: &'static str,
    arity: i64,
    flags: &'static [&'static str],
) -> CommandSpec {
    spec(
        CommandKind::Client(Some(sub)),
        name,
        arity,
        flags,
        (0, 0, 0),
    )
}

/// CLIENT's subcommands.
pub(crate) static SUBCOMMANDS: [CommandSpec; 17] = [
    row(Sub::Caching, "client|caching", 3, FLAGS),
    row(Sub::GetName, "client|getname", 2, FLAGS),
    row(Sub::GetRedir, "client|getredir", 2, FLAGS),
    row(Sub::Help, "client|help", 2, &["loading", "stale"]),
    row(Sub::Id, "client|id", 2, FLAGS),
    row(Sub::Info, "client|info", 2, FLAGS),
    row(Sub::Kill, "client|kill", -3, ADMIN),
    row(Sub::List, "client|list", -2, ADMIN),
    row(Sub::NoEvict, "client|no-evict", 3, ADMIN),
    row(Sub::Pause, "client|pause", -3, ADMIN),
    row(Sub::Reply, "client|reply", 3, FLAGS),
    row(Sub::SetInfo, "client|setinfo", 4, FLAGS),
    row(Sub::SetName, "client|setname", 3, FLAGS),
    row(Sub::Tracking, "client|tracking", -3, FLAGS),
    row(Sub::TrackingInfo, "client|trackinginfo", 2, FLAGS),
    row(Sub::Unblock, "client|unblock", -3, ADMIN),
    row(Sub::Unpause, "client|unpause", 2, ADMIN),
];

const HELP: &[&str] = &[
    "CACHING (YES|NO)",
    "    Enable/disable tracking of the keys for next command in OPTIN/OPTOUT modes.",
    "GETREDIR",
    "    Return the client ID we are redirecting to when tracking is enabled.",
    "GETNAME",
    "    Return the name of the current connection.",
    "ID",
    "    Return the ID of the current connection.",
    "INFO",
    "    Return information about the current client connection.",
    "KILL <ip:port>",
    "    Kill connection made from <ip:port>.",
    "KILL <option> <value> [<option> <value> [...]]",
    "    Kill connections. Options are:",
    "    * ADDR (<ip:port>|<unixsocket>:0)",
    "      Kill connections made from the specified address",
    "    * LADDR (<ip:port>|<unixsocket>:0)",
    "      Kill connections made to specified local address",
    "    * TYPE (NORMAL|MASTER|REPLICA|PUBSUB)",
    "      Kill connections by type.",
    "    * USER <username>",
    "      Kill connections authenticated by <username>.",
    "    * SKIPME (YES|NO)",
    "      Skip killing current connection (default: yes).",
    "LIST [options ...]",
    "    Return information about client connections. Options:",
    "    * TYPE (NORMAL|MASTER|REPLICA|PUBSUB)",
    "      Return clients of specified type.",
    "UNPAUSE",
    "    Stop the current client pause, resuming traffic.",
    "PAUSE <timeout> [WRITE|ALL]",
    "    Suspend all, or just write, clients for <timeout> milliseconds.",
    "REPLY (ON|OFF|SKIP)",
    "    Control the replies sent to the current connection.",
    "SETNAME <name>",
    "    Assign the name <name> to the current connection.",
    "SETINFO <LIB-NAME|LIB-VER> <value>",
    "    Set client meta attr. Options are:",
    "    * LIB-NAME: the client lib name.",
    "    * LIB-VER: the client lib version.",
    "UNBLOCK <clientid> [TIMEOUT|ERROR]",
    "    Unblock the specified blocked client.",
    "TRACKING (ON|OFF) [REDIRECT <id>] [BCAST] [PREFIX <prefix> [...]]",
    "         [OPTIN] [OPTOUT] [NOLOOP]",
    "    Control server assisted client side caching.",
    "TRACKINGINFO",
    "    Report tracking status for the current connection.",
    "NO-EVICT (ON|OFF)",
    "    Protect current client connection from eviction.",
];

fn on_off(arg: &[u8]) -> Option<bool> {
    if arg.eq_ignore_ascii_case(b"on") {
        Some(true)
    } else if arg.eq_ignore_ascii_case(b"off") {
        Some(false)
    } else {
        None
    }
}

/// Parses CLIENT `sub`'s arguments (after the subcommand).
pub(crate) fn parse(sub: Sub, args: Vec<Bytes>) -> Result<Command, CommandError> {
    let first = args.first().cloned().unwrap_or_default();
    let request =
        match sub {
            Sub::SetName => ClientRequest::set_name(first)?,
            Sub::GetName => ClientRequest::GetName,
            Sub::Id => ClientRequest::Id,
            Sub::SetInfo => ClientRequest::set_info(&first, args[1].clone())?,
            Sub::Info => ClientRequest::Info,
            Sub::List => ClientRequest::List(ListQuery::parse(&args)?),
            Sub::Kill => ClientRequest::Kill(KillFilter::parse(&args)?),
            Sub::NoEvict => ClientRequest::NoEvict(on_off(&first).ok_or(CommandError::Syntax)?),
            Sub::Reply => ClientRequest::Reply(match first.to_ascii_lowercase().as_slice() {
                b"on" => ReplyMode::On,
                b"off" => ReplyMode::Off,
                b"skip" => ReplyMode::Skip,
                _ => return Err(CommandError::Syntax),
            }),
            Sub::Pause => {
                // Redis checks the mode before the timeout.
                let all =
                    match &args[1..] {
                        [] => true,
                        [mode] if mode.eq_ignore_ascii_case(b"all") => true,
                        [mode] if mode.eq_ignore_ascii_case(b"write") => false,
                        [_] => {
                            return Err(CommandError::Text(
                                "ERR CLIENT PAUSE mode must be WRITE or ALL".into(),
                            ))
                        }
                        _ => return Err(CommandError::Text(
                            "ERR unknown subcommand or wrong number of arguments for 'pause'. Try \
                         CLIENT HELP."
                                .into(),
                        )),
                    };
                let timeout = parse_i64(&first).ok_or_else(|| {
                    CommandError::Text("ERR timeout is not an integer or out of range".into())
                })?;
                if timeout < 0 {
                    return Err(CommandError::Text("ERR timeout is negative".into()));
                }
                ClientRequest::Pause {
                    timeout_ms: timeout as u64,
                    all,
                }
            }
            Sub::Unpause => ClientRequest::Unpause,
            Sub::Unblock => {
                // Redis checks the reason before the id.
                let error = match &args[1..] {
                    [] => false,
                    [mode] if mode.eq_ignore_ascii_case(b"timeout") => false,
                    [mode] if mode.eq_ignore_ascii_case(b"error") => true,
                    [_] => {
                        return Err(CommandError::Text(
                            "ERR CLIENT UNBLOCK reason should be TIMEOUT or ERROR".into(),
                        ))
                    }
                    _ => return Err(CommandError::Text(
                        "ERR unknown subcommand or wrong number of arguments for 'unblock'. Try \
                         CLIENT HELP."
                            .into(),
                    )),
                };
                let id = parse_i64(&first).ok_or(CommandError::NotAnInteger)?;
                ClientRequest::Unblock {
                    id: id.max(0) as u64,
                    error,
                }
            }
            Sub::Tracking => ClientRequest::Tracking(TrackingArgs::parse(&args)?),
            Sub::TrackingInfo => ClientRequest::TrackingInfo,
            Sub::GetRedir => ClientRequest::GetRedir,
            Sub::Caching => ClientRequest::Caching(match first.to_ascii_lowercase().as_slice() {
                b"yes" => true,
                b"no" => false,
                _ => return Err(CommandError::Syntax),
            }),
            Sub::Help => {
                return Ok(Command::Help {
                    command: "client|help",
                    lines: HELP,
                })
            }
        };
    Ok(Command::Client(request))
}

impl ClientRequest {
    pub fn name(&self) -> &'static str {
        match self {
            ClientRequest::SetName(_) => "client|setname",
            ClientRequest::GetName => "client|getname",
            ClientRequest::Id => "client|id",
            ClientRequest::SetInfo { .. } => "client|setinfo",
            ClientRequest::Info => "client|info",
            ClientRequest::List(_) => "client|list",
            ClientRequest::Kill(_) => "client|kill",
            ClientRequest::NoEvict(_) => "client|no-evict",
            ClientRequest::Reply(_) => "client|reply",
            ClientRequest::Pause { .. } => "client|pause",
            ClientRequest::Unpause => "client|unpause",
            ClientRequest::Unblock { .. } => "client|unblock",
            ClientRequest::Tracking(_) => "client|tracking",
            ClientRequest::TrackingInfo => "client|trackinginfo",
            ClientRequest::GetRedir => "client|getredir",
            ClientRequest::Caching(_) => "client|caching",
            ClientRequest::Help => "client|help",
            ClientRequest::Track(_) => "client|tracking",
            ClientRequest::Broadcast(broadcast) => match broadcast.op {
                ClientsOp::List { .. } => "client|list",
                ClientsOp::Kill { .. } => "client|kill",
                ClientsOp::Unblock { .. } => "client|unblock",
                ClientsOp::AclRefresh { .. } => "acl|setuser",
            },
        }
    }

    /// CLIENT SETNAME: Redis refuses spaces, newlines and anything outside printable ASCII,
    /// because CLIENT LIST prints names unquoted.
    pub(crate) fn set_name(name: Bytes) -> Result<ClientRequest, CommandError> {
        if !is_printable_word(&name) {
            return Err(CommandError::Text(
                "ERR Client names cannot contain spaces, newlines or special characters.".into(),
            ));
        }
        Ok(ClientRequest::SetName(name))
    }

    pub(crate) fn set_info(attribute: &[u8], value: Bytes) -> Result<ClientRequest, CommandError> {
        let attribute = if attribute.eq_ignore_ascii_case(b"lib-name") {
            LibAttribute::Name
        } else if attribute.eq_ignore_ascii_case(b"lib-ver") {
            LibAttribute::Version
        } else {
            return Err(CommandError::Text(format!(
                "ERR Unrecognized option '{}'",
                String::from_utf8_lossy(attribute)
            )));
        };
        if !is_printable_word(&value) {
            let which = match attribute {
                LibAttribute::Name => "lib-name",
                LibAttribute::Version => "lib-ver",
            };
            return Err(CommandError::Text(format!(
                "ERR {which} cannot contain spaces, newlines or special characters."
            )));
        }
        Ok(ClientRequest::SetInfo { attribute, value })
    }
}

/// Redis's rule for client names and library info: bytes `!` through `~` only.
fn is_printable_word(bytes: &[u8]) -> bool {
    bytes.iter().all(|&b| (b'!'..=b'~').contains(&b))
}

/// Where a CLIENT request for every shard (or, to remember keys, for their shards) runs.
pub fn route(request: ClientRequest, shards: usize) -> crate::routing::Route {
    use crate::routing::{broadcast_merged, split_keys_merged, Merger};
    match request {
        ClientRequest::Track(keys) => split_keys_merged(
            keys,
            shards,
            |keys| Command::Client(ClientRequest::Track(keys)),
            |_, parts| Merger::custom(parts, |_, _, _| crate::reply::Reply::ok(), Vec::new()),
        ),
        ClientRequest::Broadcast(broadcast) => {
            let merge: crate::routing::MergeFn = match broadcast.op {
                ClientsOp::List { .. } | ClientsOp::Kill { .. } => {
                    return crate::routing::route_clients(*broadcast, shards)
                }
                ClientsOp::Unblock { .. } => |parts, _, _| {
                    let unblocked = parts
                        .iter()
                        .any(|part| *part == crate::reply::Reply::Integer(1));
                    crate::reply::Reply::Integer(i64::from(unblocked))
                },
                ClientsOp::AclRefresh { deleted } => {
                    let context = deleted.map(|n| vec![bytes::Bytes::from(n.to_string())]);
                    return broadcast_merged(
                        Command::Client(ClientRequest::Broadcast(broadcast)),
                        shards,
                        |_, _, context| match context.first() {
                            Some(n) => crate::reply::Reply::Integer(
                                crate::number::parse_i64(n).unwrap_or(0),
                            ),
                            None => crate::reply::Reply::ok(),
                        },
                        context.unwrap_or_default(),
                    );
                }
            };
            broadcast_merged(
                Command::Client(ClientRequest::Broadcast(broadcast)),
                shards,
                merge,
                Vec::new(),
            )
        }
        other => crate::routing::Route::Single {
            shard: 0,
            command: Command::Client(other),
        },
    }
}
