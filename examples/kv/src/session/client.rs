//! The connection's identity for CLIENT: its id, the name it set, its library info, where it
//! is connected from, and its line in CLIENT LIST / INFO (see [`crate::clients`]).

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};

use bytes::Bytes;

use super::ends::Ends;
use super::{Admission, Lifecycle, Session};
use crate::clients::command::ReplyMode;
use crate::clients::tracking::{self, Tracking};
use crate::clients::{ClientFlags, ClientLine};
use crate::command::{ClientRequest, ClientsBroadcast, ClientsOp, Command, LibAttribute};
use crate::reply::Reply;

/// Ids are unique and increasing over the whole process, as Redis's are per server.
static NEXT_ID: AtomicU64 = AtomicU64::new(1);

#[derive(Debug)]
pub(super) struct ClientIdentity {
    id: u64,
    /// CLIENT SETNAME and SETINFO's: boxed, since most clients set none.
    names: Option<Box<Names>>,
    no_evict: bool,
    /// The socket's ends and descriptor, as the glue reported them.
    pub(super) ends: Ends,
    fd: i32,
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
            names: None,
            no_evict: false,
            ends: Ends::Unknown,
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
        self.set_names(|names| names.name = None);
    }

    /// The name CLIENT SETNAME gave, if any.
    pub(super) fn name(&self) -> Option<&Bytes> {
        self.names.as_ref()?.name.as_ref()
    }

    /// Changes the names; the box goes when none is left.
    fn set_names(&mut self, change: impl FnOnce(&mut Names)) {
        let mut names = self.names.take().unwrap_or_default();
        change(&mut names);
        if *names != Names::default() {
            self.names = Some(names);
        }
    }

    pub(super) fn run(&mut self, request: ClientRequest) -> Reply {
        match request {
            // An empty name clears it (GETNAME then answers nil).
            ClientRequest::SetName(name) => {
                self.set_names(|names| names.name = Some(name).filter(|name| !name.is_empty()));
                Reply::ok()
            }
            ClientRequest::GetName => self.name().cloned().map_or(Reply::NullBulk, Reply::Bulk),
            ClientRequest::Id => Reply::Integer(self.id as i64),
            ClientRequest::SetInfo { attribute, value } => {
                self.set_names(|names| {
                    let slot = match attribute {
                        LibAttribute::Name => &mut names.lib_name,
                        LibAttribute::Version => &mut names.lib_ver,
                    };
                    *slot = Some(value).filter(|value| !value.is_empty());
                });
                Reply::ok()
            }
            ClientRequest::NoEvict(on) => {
                self.no_evict = on;
                Reply::ok()
            }
            // The session answers the others itself (they need more than the identity).
            _ => Reply::error("ERR internal error: misrouted CLIENT"),
        }
    }
}

/// CLIENT SETNAME's name and CLIENT SETINFO's library name and version.
#[derive(Debug, Default, PartialEq, Eq)]
struct Names {
    name: Option<Bytes>,
    lib_name: Option<Bytes>,
    lib_ver: Option<Bytes>,
}

fn address(addr: Option<SocketAddr>) -> String {
    addr.map_or_else(|| "?:0".to_owned(), |addr| addr.to_string())
}

/// Per-connection modes the glue mirrors into its shard (as it mirrors subscriptions).
#[derive(Debug, Default)]
pub(crate) struct Modes {
    /// MONITOR was sent (and not undone by RESET).
    pub monitor: bool,
    /// The monitor mode changed since the glue last looked.
    pub monitor_changed: bool,
    /// CLIENT TRACKING.
    pub tracking: TrackingMode,
    /// Tracking changed since the glue last looked (on/off, broadcast prefixes).
    pub tracking_changed: bool,
    /// A replica's link (after PSYNC or SYNC).
    pub replica: bool,
}

/// A connection's CLIENT TRACKING state, boxed while it differs from the default (off): every
/// connection's session holds it, few connections track. Reads see the default when unboxed.
#[derive(Debug, Default)]
pub(crate) struct TrackingMode(Option<Box<Tracking>>);

static TRACKING_OFF: Tracking = Tracking::OFF;

impl std::ops::Deref for TrackingMode {
    type Target = Tracking;

    fn deref(&self) -> &Tracking {
        self.0.as_deref().unwrap_or(&TRACKING_OFF)
    }
}

impl TrackingMode {
    /// Changes the state; the box goes once it is back to the default.
    pub fn change<R>(&mut self, f: impl FnOnce(&mut Tracking) -> R) -> R {
        let tracking = self.0.get_or_insert_default();
        let out = f(tracking);
        if **tracking == Tracking::OFF {
            self.0 = None;
        }
        out
    }

    /// CLIENT CACHING's yes/no applies to one command: cleared after the next (without
    /// boxing anything for a connection that does not track).
    #[inline]
    pub fn clear_caching(&mut self) {
        if self.0.as_ref().is_some_and(|tracking| tracking.caching) {
            self.change(|tracking| tracking.caching = false);
        }
    }
}

/// What the glue mirrors of a connection's tracking: whether it is on, and the prefixes
/// every shard must know when it broadcasts (empty otherwise).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TrackingChange {
    pub on: bool,
    pub prefixes: Vec<Bytes>,
    pub noloop: bool,
}

/// Where an invalidation a connection received goes next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Invalidated {
    /// Pushed to this connection, or dropped (tracking off, NOLOOP, RESP2 without redirect).
    Done,
    /// To the connection with this id.
    Redirect { id: u64, keys: tracking::Keys },
}

impl Session {
    /// The client's address as CLIENT LIST shows it (`ip:port`).
    pub(super) fn peer_text(&self) -> String {
        address(self.identity.ends.peer())
    }

    /// The name CLIENT SETNAME gave (empty: none).
    pub(super) fn client_name(&self) -> Bytes {
        self.identity.name().cloned().unwrap_or_default()
    }
}

impl Session {
    /// The glue's facts about the socket (at accept time, `now_ms` Unix ms).
    /// The client's address, as the glue reported it.
    pub fn peer(&self) -> Option<SocketAddr> {
        self.identity.ends.peer()
    }

    pub fn set_peer(
        &mut self,
        peer: Option<SocketAddr>,
        local: Option<SocketAddr>,
        fd: i64,
        now_ms: u64,
    ) {
        let identity = &mut self.identity;
        identity.ends = Ends::new(peer, local);
        // Descriptors are C ints.
        identity.fd = i32::try_from(fd).unwrap_or(-1);
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

    /// The connection's memory: its state and its buffers (CLIENT LIST's `tot-mem`).
    pub fn memory(&self) -> usize {
        std::mem::size_of::<Session>() + self.input.capacity() + self.output.capacity()
    }

    /// The connection's CLIENT LIST line at `now_ms`; `None` once it is killed (it is gone
    /// for other clients even before its task has closed the socket).
    pub fn client_line(&self, now_ms: u64) -> Option<ClientLine> {
        if self.is_killed() {
            return None;
        }
        let identity = &self.identity;
        let (sub, psub, ssub) = self.pubsub.counts();
        let queued = self.txn.queued();
        Some(ClientLine {
            id: identity.id,
            addr: address(identity.ends.peer()),
            laddr: address(identity.ends.local()),
            fd: i64::from(identity.fd),
            name: identity.name().cloned().unwrap_or_default(),
            age_s: now_ms.saturating_sub(identity.connected_ms) / 1000,
            idle_s: now_ms.saturating_sub(identity.last_input_ms) / 1000,
            flags: ClientFlags {
                pubsub: sub + psub + ssub > 0,
                multi: queued.is_some(),
                // A request CLIENT PAUSE holds back is blocked too, as Redis shows it.
                blocked: self
                    .rare
                    .as_ref()
                    .is_some_and(|rare| !rare.blocking.is_empty() || rare.paused_until.is_some()),
                no_evict: identity.no_evict,
                monitor: self.modes.monitor,
                tracking: self.modes.tracking.on,
                broken_redirect: self.modes.tracking.broken_redirect,
                bcast: self.modes.tracking.bcast,
                replica: self.modes.replica,
            },
            sub,
            psub,
            ssub,
            multi: queued.map_or(-1, |n| n as i64),
            qbuf: self.input.len(),
            qbuf_free: self.input.capacity() - self.input.len(),
            omem: self.output.len(),
            tot_mem: self.memory(),
            cmd: identity.last_command,
            resp: if self.resp3 { 3 } else { 2 },
            lib_name: (identity.names.as_ref())
                .and_then(|names| names.lib_name.clone())
                .unwrap_or_default(),
            lib_ver: (identity.names.as_ref())
                .and_then(|names| names.lib_ver.clone())
                .unwrap_or_default(),
            redir: self.modes.tracking.redirect_reply(),
            user: self.user.name.clone(),
        })
    }

    /// The caller's own line, as of its last input (the command being answered came in it;
    /// as in Redis, its query buffer still holds that command).
    fn own_line(&mut self, seq: u64) -> ClientLine {
        let mut line = self
            .client_line(self.identity.last_input_ms)
            .unwrap_or_default();
        line.qbuf += self.request_len(seq);
        line
    }

    /// CLIENT INFO, LIST and KILL: INFO is answered here; LIST and KILL become the request
    /// every shard runs over its connections, with the caller's own part decided here (a
    /// KILL that picks the caller closes it after the reply, as Redis does).
    pub(super) fn client_request(&mut self, request: ClientRequest, seq: u64) -> Admission {
        let own = self.own_line(seq);
        let op = match request {
            ClientRequest::List(query) => ClientsOp::List {
                caller_line: query
                    .matches(&own)
                    .then(|| (own.id, Bytes::from(own.format()))),
                query,
            },
            ClientRequest::Kill(filter) => {
                if let Some(user) = &filter.user {
                    if self.config.acl.users().get(user).is_none() {
                        return Admission::Answered(Reply::error(format!(
                            "ERR No such user '{}'",
                            String::from_utf8_lossy(user)
                        )));
                    }
                }
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
            ClientRequest::Unblock { id, error } => match self.config.clients.find(id) {
                Some(target) => ClientsOp::Unblock { target, error },
                None => return Admission::Answered(Reply::Integer(0)),
            },
            other => return Admission::Answered(self.client_mode(other, seq)),
        };
        Admission::Forward(Command::Client(ClientRequest::Broadcast(Box::new(
            ClientsBroadcast { caller: own.id, op },
        ))))
    }
}

impl Session {
    /// The CLIENT subcommands that change this connection's modes or the server's pause.
    fn client_mode(&mut self, request: ClientRequest, seq: u64) -> Reply {
        match request {
            ClientRequest::Reply(mode) => {
                let silent = match mode {
                    ReplyMode::On => {
                        self.reply_mode = super::ReplyMode::On;
                        false
                    }
                    ReplyMode::Off => {
                        self.reply_mode = super::ReplyMode::Off;
                        true
                    }
                    ReplyMode::Skip => {
                        if self.reply_mode != super::ReplyMode::Off {
                            self.reply_mode = super::ReplyMode::SkipNext;
                        }
                        true
                    }
                };
                if let Some(slot) = self.replies.slot(seq) {
                    slot.silent = silent;
                }
                Reply::ok()
            }
            ClientRequest::Pause { timeout_ms, all } => {
                let now = self.unix_us / 1000;
                self.config
                    .clients
                    .pause(now.saturating_add(timeout_ms), all);
                Reply::ok()
            }
            ClientRequest::Unpause => {
                self.config.clients.unpause();
                Reply::ok()
            }
            ClientRequest::Tracking(args) => {
                let clients = self.config.clients.clone();
                let was = (*self.modes.tracking).clone();
                let applied = (self.modes.tracking)
                    .change(|tracking| tracking.apply(args, |id| clients.find(id).is_some()));
                match applied {
                    Ok(()) => {
                        self.tracking_transition(&was);
                        Reply::ok()
                    }
                    Err(error) => error.into(),
                }
            }
            ClientRequest::TrackingInfo => self.modes.tracking.info(),
            ClientRequest::GetRedir => Reply::Integer(self.modes.tracking.redirect_reply()),
            ClientRequest::Caching(yes) => match self.modes.tracking.change(|t| t.caching(yes)) {
                Ok(()) => Reply::ok(),
                Err(error) => error.into(),
            },
            other => self.identity.run(other),
        }
    }

    /// Tracking went from `was` to the current state: the server-wide count and what the
    /// glue must mirror.
    fn tracking_transition(&mut self, was: &Tracking) {
        let now = &self.modes.tracking;
        let counter = &self.config.live.hot.tracking_clients;
        match (was.on, now.on) {
            (false, true) => {
                counter.fetch_add(1, Ordering::Relaxed);
            }
            (true, false) => {
                counter.fetch_sub(1, Ordering::Relaxed);
            }
            _ => {}
        }
        if was.on != now.on || was.prefixes != now.prefixes || was.noloop != now.noloop {
            self.modes.tracking_changed = true;
        }
    }

    /// RESET's part: tracking off.
    pub(super) fn reset_tracking(&mut self) {
        let was = std::mem::take(&mut self.modes.tracking);
        self.tracking_transition(&was);
    }

    /// Tracking changed since the last call: what the glue mirrors.
    pub fn take_tracking_change(&mut self) -> Option<TrackingChange> {
        if !std::mem::take(&mut self.modes.tracking_changed) {
            return None;
        }
        let tracking = &self.modes.tracking;
        Some(TrackingChange {
            on: tracking.on,
            prefixes: if tracking.bcast {
                tracking.prefixes.clone()
            } else {
                Vec::new()
            },
            noloop: tracking.noloop,
        })
    }

    /// Whether the connection has tracking on (the glue's count at close).
    pub fn is_tracking(&self) -> bool {
        self.modes.tracking.on
    }

    /// An invalidation for keys this connection read (`keys` `None`: everything, after
    /// FLUSHALL): pushed here, or to be sent to the redirect target. `by_self[i]`: this
    /// connection wrote `keys[i]` itself; `bcast`: sent for a broadcast prefix.
    pub fn tracking_invalidate(
        &mut self,
        keys: tracking::Keys,
        by_self: &[bool],
        bcast: bool,
        now_ms: u64,
    ) -> Invalidated {
        let tracking = &self.modes.tracking;
        if !tracking.on {
            return Invalidated::Done;
        }
        let keys = match keys {
            None => None,
            // Keys read before a switch to (or from) BCAST no longer concern it.
            Some(_) if bcast != tracking.bcast => return Invalidated::Done,
            Some(keys) => {
                let kept: Vec<Bytes> = keys
                    .into_iter()
                    .zip(by_self.iter().chain(std::iter::repeat(&false)))
                    .filter(|(_, by_self)| !(tracking.noloop && **by_self))
                    .map(|(key, _)| key)
                    .collect();
                if kept.is_empty() {
                    return Invalidated::Done;
                }
                Some(kept)
            }
        };
        if tracking.redirect != 0 {
            return Invalidated::Redirect {
                id: tracking.redirect,
                keys,
            };
        }
        if self.resp3 {
            self.push_message(tracking::push_message(&keys), now_ms);
        }
        Invalidated::Done
    }

    /// Another connection's invalidation, redirected here: pushed in RESP3, or as a Pub/Sub
    /// message in RESP2 while subscribed (as Redis sends it; dropped otherwise).
    pub fn tracking_deliver(&mut self, keys: tracking::Keys, now_ms: u64) {
        if self.resp3 {
            self.push_message(tracking::push_message(&keys), now_ms);
        } else if self.pubsub.active() {
            self.push_message(tracking::pubsub_message(&keys), now_ms);
        }
    }

    /// The redirect target was gone when an invalidation came.
    pub fn tracking_redirect_broken(&mut self, now_ms: u64) {
        let id = self.modes.tracking.redirect;
        if !self.modes.tracking.on || id == 0 {
            return;
        }
        self.modes
            .tracking
            .change(|tracking| tracking.broken_redirect = true);
        if self.resp3 {
            self.push_message(tracking::redir_broken_message(id), now_ms);
        }
    }
}
