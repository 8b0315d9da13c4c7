//! CLIENT subcommands: the connection's own identity (Redis 7 semantics).

use bytes::Bytes;

use super::CommandError;

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
