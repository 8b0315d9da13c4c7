//! The connection's identity for CLIENT: its id, the name it set and its library info.

use std::sync::atomic::{AtomicU64, Ordering};

use bytes::Bytes;

use crate::command::{ClientRequest, LibAttribute};
use crate::reply::Reply;

/// Ids are unique and increasing over the whole process, as Redis's are per server.
static NEXT_ID: AtomicU64 = AtomicU64::new(1);

#[derive(Debug)]
pub(super) struct ClientIdentity {
    id: u64,
    name: Option<Bytes>,
    lib_name: Option<Bytes>,
    lib_ver: Option<Bytes>,
}

impl ClientIdentity {
    pub(super) fn new() -> ClientIdentity {
        ClientIdentity {
            // Relaxed: only uniqueness matters, not ordering with other memory.
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            name: None,
            lib_name: None,
            lib_ver: None,
        }
    }

    pub(super) fn id(&self) -> u64 {
        self.id
    }

    /// What RESET clears: the name (Redis keeps the id and the library info).
    pub(super) fn reset(&mut self) {
        self.name = None;
    }

    pub(super) fn run(&mut self, request: ClientRequest) -> Reply {
        match request {
            // An empty name clears it (GETNAME then answers nil).
            ClientRequest::SetName(name) => {
                self.name = Some(name).filter(|name| !name.is_empty());
                Reply::ok()
            }
            ClientRequest::GetName => self.name.clone().map_or(Reply::NullBulk, Reply::Bulk),
            ClientRequest::Id => Reply::Integer(self.id as i64),
            ClientRequest::SetInfo { attribute, value } => {
                let slot = match attribute {
                    LibAttribute::Name => &mut self.lib_name,
                    LibAttribute::Version => &mut self.lib_ver,
                };
                *slot = Some(value).filter(|value| !value.is_empty());
                Reply::ok()
            }
        }
    }
}
