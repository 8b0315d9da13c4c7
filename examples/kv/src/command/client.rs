//! CLIENT subcommands: the connection's own identity (Redis 7 semantics).

use bytes::Bytes;

use super::CommandError;
use crate::clients::{KillFilter, ListQuery};

/// A CLIENT subcommand the connection answers itself.
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
    /// What CLIENT LIST and KILL ask of every shard: built by the session, never parsed.
    Broadcast(Box<ClientsBroadcast>),
}

/// CLIENT LIST or KILL as every shard runs it over its own connections. The calling
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
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LibAttribute {
    Name,
    Version,
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
            ClientRequest::Broadcast(broadcast) => match broadcast.op {
                ClientsOp::List { .. } => "client|list",
                ClientsOp::Kill { .. } => "client|kill",
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

    /// CLIENT NO-EVICT on|off.
    pub(crate) fn no_evict(mode: &[u8]) -> Result<ClientRequest, CommandError> {
        if mode.eq_ignore_ascii_case(b"on") {
            Ok(ClientRequest::NoEvict(true))
        } else if mode.eq_ignore_ascii_case(b"off") {
            Ok(ClientRequest::NoEvict(false))
        } else {
            Err(CommandError::Syntax)
        }
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
