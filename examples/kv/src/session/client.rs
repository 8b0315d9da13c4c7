//! The connection's identity for CLIENT: its id, the name it set, its library info, where it
//! is connected from, and its line in CLIENT LIST / INFO (see [`crate::clients`]).

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};

use bytes::Bytes;

use super::{Admission, Lifecycle, Session};
use crate::clients::{ClientFlags, ClientLine};
use crate::command::{ClientRequest, ClientsBroadcast, ClientsOp, Command, LibAttribute};
use crate::reply::Reply;

/// Ids are unique and increasing over the whole process, as Redis's are per server.
static NEXT_ID: AtomicU64 = AtomicU64::new(1);

#[derive(Debug)]
pub(super) struct ClientIdentity {
    id: u64,
    name: Option<Bytes>,
    lib_name: Option<Bytes>,
    lib_ver: Option<Bytes>,
    no_evict: bool,
    /// The socket's ends and descriptor, as the glue reported them.
    peer: Option<SocketAddr>,
    local: Option<SocketAddr>,
    fd: i64,
    /// Unix ms: when the connection was accepted, and when its input last arrived.
    connected_ms: u64,
    last_input_ms: u64,
    /// The command table's name of the last command admitted (`None` for an unknown one).
    pub(super) last_command: Option<&'static str>,
}

impl ClientIdentity {
    pub(super) fn new() -> ClientIdentity {
        ClientIdentity {
            // Relaxed: only uniqueness matters, not ordering with other memory.
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            name: None,
            lib_name: None,
            lib_ver: None,
            no_evict: false,
            peer: None,
            local: None,
            fd: -1,
            connected_ms: 0,
            last_input_ms: 0,
            last_command: None,
        }
    }

    pub(super) fn id(&self) -> u64 {
        self.id
    }

    /// What RESET clears: the name (Redis 7.0 keeps the id, the library info and NO-EVICT).
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
            ClientRequest::NoEvict(on) => {
                self.no_evict = on;
                Reply::ok()
            }
            // The session answers these itself (they need more than the identity).
            ClientRequest::Info
            | ClientRequest::List(_)
            | ClientRequest::Kill(_)
            | ClientRequest::Broadcast(_) => Reply::error("ERR internal error: misrouted CLIENT"),
        }
    }
}

fn address(addr: Option<SocketAddr>) -> String {
    addr.map_or_else(|| "?:0".to_owned(), |addr| addr.to_string())
}

impl Session {
    /// The glue's facts about the socket (at accept time, `now_ms` Unix ms).
    pub fn set_peer(
        &mut self,
        peer: Option<SocketAddr>,
        local: Option<SocketAddr>,
        fd: i64,
        now_ms: u64,
    ) {
        let identity = &mut self.identity;
        identity.peer = peer;
        identity.local = local;
        identity.fd = fd;
        identity.connected_ms = now_ms;
        identity.last_input_ms = now_ms;
    }

    /// Input arrived at `now_ms` (CLIENT LIST's `idle` counts from it).
    pub fn touch(&mut self, now_ms: u64) {
        self.identity.last_input_ms = now_ms;
    }

    pub fn client_id(&self) -> u64 {
        self.identity.id
    }

    /// CLIENT KILL from another connection: close at once, unsent output and all.
    pub fn kill(&mut self) {
        self.killed = true;
        self.lifecycle = Lifecycle::Closed;
        self.output.clear();
    }

    /// The connection's CLIENT LIST line at `now_ms`; `None` once it is killed (it is gone
    /// for other clients even before its task has closed the socket).
    pub fn client_line(&self, now_ms: u64) -> Option<ClientLine> {
        if self.is_killed() {
            return None;
        }
        let identity = &self.identity;
        let (sub, psub) = self.pubsub.counts();
        let queued = self.txn.queued();
        Some(ClientLine {
            id: identity.id,
            addr: address(identity.peer),
            laddr: address(identity.local),
            fd: identity.fd,
            name: identity.name.clone().unwrap_or_default(),
            age_s: now_ms.saturating_sub(identity.connected_ms) / 1000,
            idle_s: now_ms.saturating_sub(identity.last_input_ms) / 1000,
            flags: ClientFlags {
                pubsub: sub + psub > 0,
                multi: queued.is_some(),
                blocked: !self.blocking.is_empty(),
                no_evict: identity.no_evict,
            },
            sub,
            psub,
            multi: queued.map_or(-1, |n| n as i64),
            qbuf: self.input.len(),
            qbuf_free: self.input.capacity() - self.input.len(),
            omem: self.output.len(),
            tot_mem: std::mem::size_of::<Session>()
                + self.input.capacity()
                + self.output.capacity(),
            cmd: identity.last_command,
            resp: if self.resp3 { 3 } else { 2 },
            lib_name: identity.lib_name.clone().unwrap_or_default(),
            lib_ver: identity.lib_ver.clone().unwrap_or_default(),
        })
    }

    /// The caller's own line, as of its last input (the command being answered came in it).
    fn own_line(&self) -> ClientLine {
        self.client_line(self.identity.last_input_ms)
            .unwrap_or_default()
    }

    /// CLIENT INFO, LIST and KILL: INFO is answered here; LIST and KILL become the request
    /// every shard runs over its connections, with the caller's own part decided here (a
    /// KILL that picks the caller closes it after the reply, as Redis does).
    pub(super) fn client_request(&mut self, request: ClientRequest, seq: u64) -> Admission {
        let own = self.own_line();
        let op = match request {
            ClientRequest::List(query) => ClientsOp::List {
                caller_line: query
                    .matches(&own)
                    .then(|| (own.id, Bytes::from(own.format()))),
                query,
            },
            ClientRequest::Kill(filter) => {
                let caller_killed = filter.matches(&own, true);
                if caller_killed {
                    self.lifecycle = Lifecycle::ClosingAfter(seq);
                }
                ClientsOp::Kill {
                    filter,
                    caller_killed,
                }
            }
            ClientRequest::Info => {
                let mut line = own.format();
                line.push('\n');
                return Admission::Answered(Reply::Bulk(Bytes::from(line)));
            }
            other => return Admission::Answered(self.identity.run(other)),
        };
        Admission::Forward(Command::Client(ClientRequest::Broadcast(Box::new(
            ClientsBroadcast { caller: own.id, op },
        ))))
    }
}
