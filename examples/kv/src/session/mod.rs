//! Per-connection protocol state: parsing with backpressure, authentication, connection-level
//! commands, and strictly ordered replies.
//!
//! Glue loop for one connection (all on the connection's shard):
//! ```text
//! on readable (only while session.wants_read()):  read into session.input_buffer()
//! after reading, and after each complete():
//!     while let Some(req) = session.next_request() { route + dispatch req.command, remember req.seq }
//! when a (merged) reply for seq arrives:          session.complete(seq, reply)
//! when no write is in flight:                      if let Some(b) = session.take_output() { write b }
//! after the write finishes:                        if session.is_closed() && nothing pending { close }
//! ```

mod acl;
mod calls;
mod client;
mod config;
mod ends;
mod hello;
mod idle;
mod local;
pub(crate) use local::select_reply;
mod multi;
mod order;
mod pubsub;
mod rare;
pub(crate) mod resp3;

use std::fmt;
use std::sync::Arc;

use bytes::{Bytes, BytesMut};

use crate::cluster::ClusterGate;
use crate::command::{self, argv, Command, CommandError, Scope, TxnItem};
use crate::reply::Reply;
use crate::resp::RequestParser;

pub(crate) use calls::error_code;
pub use calls::{monitor_line, CallRecord, SlowEntry};
pub use client::{Invalidated, TrackingChange};
pub use config::{PortCheck, SessionConfig, TlsReload};
use order::ReplyQueue;
pub use pubsub::{OutputLimit, SubChange};

/// A request the glue must execute on the shard(s) owning its keys.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    /// Hand this back with the reply to [`Session::complete`].
    pub seq: u64,
    pub command: Command,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SessionError {
    /// No request with this sequence number is waiting for a reply.
    UnknownSequence(u64),
    AlreadyAnswered(u64),
}

impl fmt::Display for SessionError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SessionError::UnknownSequence(seq) => write!(f, "no request {seq} awaits a reply"),
            SessionError::AlreadyAnswered(seq) => write!(f, "request {seq} was already answered"),
        }
    }
}

impl std::error::Error for SessionError {}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Lifecycle {
    Open,
    /// QUIT or a protocol error: nothing more is parsed; close once reply `seq` is emitted.
    ClosingAfter(u64),
    /// The final reply is in the output; write it and close.
    Closed,
}

#[derive(Debug)]
pub struct Session {
    config: Arc<SessionConfig>,
    input: BytesMut,
    /// The parser found no complete request in `input` (or it is empty): only then is more
    /// read. Requests already buffered are parsed first, at the pace the backlog and the
    /// output bound allow, so a client writing far ahead fills its own socket buffer, not
    /// this one (Redis likewise reads again only once its query buffer is processed).
    needs_input: bool,
    parser: RequestParser,
    replies: ReplyQueue,
    output: BytesMut,
    authenticated: bool,
    /// The ACL user (the default one until AUTH), and the users' version it was found in.
    user: Arc<crate::acl::User>,
    acl_version: u64,
    lifecycle: Lifecycle,
    /// What few connections ever use (see `rare.rs`): `None` while empty.
    rare: Option<Box<rare::Rare>>,
    /// Cluster mode: redirections and the ASKING flag.
    cluster: Option<ClusterGate>,
    /// CLIENT ID, SETNAME, SETINFO.
    identity: client::ClientIdentity,
    /// MULTI's queue and the watches (see `multi.rs`).
    txn: multi::TxnState,
    /// Channels and patterns subscribed to (see `pubsub.rs`).
    pubsub: pubsub::PubSubState,
    /// HELLO 3 was asked: replies are RESP3 (see `resp3.rs`).
    resp3: bool,
    /// CLIENT KILL closed it.
    killed: bool,
    /// The glue's clocks, microseconds: monotonic (durations) and Unix time.
    clock_us: u64,
    unix_us: u64,
    /// Commands answered, for the glue (see `calls.rs`).
    calls: Vec<CallRecord>,
    /// CLIENT REPLY.
    reply_mode: ReplyMode,
    /// The request being admitted was refused before it could run (see `calls.rs`).
    rejecting: bool,
    /// When the buffers of a waiting connection go (see `idle.rs`).
    idle: idle::IdleState,
    /// CLIENT REPLY, TRACKING, MONITOR and other per-connection modes the glue must mirror.
    pub(crate) modes: client::Modes,
}

/// CLIENT REPLY ON / OFF / SKIP.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
enum ReplyMode {
    #[default]
    On,
    Off,
    /// The next command's reply is not sent.
    SkipNext,
}

enum Admission {
    Answered(Reply),
    Forward(Command),
}

impl Session {
    pub fn new(config: Arc<SessionConfig>) -> Session {
        let acl_version = config.acl.version();
        let user = config.acl.users().default_user().clone();
        Session {
            parser: RequestParser::new(config.parser_limits),
            authenticated: Session::default_authenticates(&user),
            user,
            acl_version,
            config,
            input: BytesMut::new(),
            needs_input: true,
            replies: ReplyQueue::default(),
            output: BytesMut::new(),
            lifecycle: Lifecycle::Open,
            rare: None,
            cluster: None,
            identity: client::ClientIdentity::new(),
            txn: multi::TxnState::default(),
            pubsub: pubsub::PubSubState::default(),
            resp3: false,
            killed: false,
            clock_us: 0,
            unix_us: 0,
            calls: Vec::new(),
            reply_mode: ReplyMode::On,
            rejecting: false,
            idle: idle::IdleState::default(),
            modes: client::Modes::default(),
        }
    }

    /// Cluster mode: every request is checked against the node's slots before it runs.
    pub fn set_cluster(&mut self, gate: ClusterGate) {
        self.cluster = Some(gate);
    }

    /// Appends bytes read from the socket.
    pub fn feed(&mut self, data: &[u8]) {
        self.input.extend_from_slice(data);
        self.needs_input = false;
        self.idle.note_input();
    }

    /// Frees the buffers an idle connection does not need (input, output, the reply queue's
    /// slots, the answered calls' room, the rare state's box) when they are empty: an idle
    /// connection then holds only its fixed state. The cost is a reallocation when the next
    /// request comes, so the glue calls it only once the connection has waited a while (see
    /// `idle.rs`).
    pub fn release_idle_buffers(&mut self) {
        if self.calls.is_empty() && self.calls.capacity() > 0 {
            self.calls = Vec::new();
        }

        self.release_rare();
        if self.input.is_empty() && self.input.capacity() > 0 {
            self.input = BytesMut::new();
        }
        // An empty output may still share the allocation of replies already sent.
        if self.output.is_empty() && self.output.capacity() > 0 {
            self.output = BytesMut::new();
        }
        self.replies.release_if_empty();
    }

    /// The unparsed input, for reading into its spare capacity without an extra copy.
    pub fn input_buffer(&mut self) -> &mut BytesMut {
        &mut self.input
    }

    /// Whether the glue should keep reading from the socket. False while a complete request
    /// is still buffered, while the backlog or the pending output is at its limit
    /// (backpressure: the client's own socket buffer then fills and TCP slows it down) and
    /// once the connection is closing. The buffered input is then at most one request and
    /// one receive's bytes, however far ahead a pipelining client writes.
    pub fn wants_read(&self) -> bool {
        self.lifecycle == Lifecycle::Open
            && (self.needs_input || self.input.is_empty())
            && self.has_capacity()
    }

    /// Whether [`Session::next_request`] may find a request: buffered input, or a request
    /// held aside (queued, postponed). False means it certainly finds none.
    pub fn may_have_request(&self) -> bool {
        // The rare state's box alone is not a request: a restricted user's connection keeps
        // one from its AUTH until the idle sweep, and each turn would parse nothing again.
        !self.input.is_empty()
            || (self.rare.as_ref())
                .is_some_and(|rare| !rare.queued.is_empty() || rare.postponed.is_some())
    }

    /// Parses the next request that needs a shard. Connection-level commands and errors met
    /// on the way are answered internally (their replies still wait for earlier ones).
    /// `None`: no complete request buffered, the backlog or output is full, or closing.
    pub fn next_request(&mut self) -> Option<Request> {
        // A request held back stays counted while it is tried again (INFO's
        // `blocked_clients` should not flicker); the hold ends with this call unless renewed.
        let mut held = None;
        if let Some(rare) = &mut self.rare {
            if let Some(request) = rare.queued.pop_front() {
                return Some(request);
            }
            held = rare.paused_until.take();
        }
        // Nothing is dispatched behind an EXEC in flight (see `multi.rs`).
        while self.lifecycle == Lifecycle::Open && self.has_capacity() && !self.txn.exec_in_flight()
        {
            // The users changed and this connection's user went: it closes unanswered.
            if !self.acl_sync() {
                self.kill();
                return None;
            }
            self.parser.set_unauthenticated(!self.authenticated);
            let mut args = argv::take();
            let parsed = match self.rare.as_mut().and_then(|rare| rare.postponed.take()) {
                Some((postponed, frame)) => {
                    args = postponed;
                    Ok(Some(frame))
                }
                None => self.parser.parse_into(&mut self.input, &mut args),
            };
            let frame = match parsed {
                Ok(Some(frame)) => {
                    if let Some(until) = self.pause_hold(&args) {
                        let hold = match held {
                            Some(mut hold) => {
                                hold.until_ms = until;
                                hold
                            }
                            None => self.config.clients.hold(until),
                        };
                        let rare = self.rare();
                        rare.postponed = Some((args, frame));
                        rare.paused_until = Some(hold);
                        return None;
                    }
                    frame
                }
                Ok(None) => {
                    argv::give_back(args);
                    self.needs_input = true;
                    return None;
                }
                Err(error) => {
                    // The stream cannot be resynchronised: answer, then close, like Redis.
                    let seq = self.replies.push_pending(self.encoding(Default::default()));
                    self.lifecycle = Lifecycle::ClosingAfter(seq);
                    self.input.clear();
                    self.rare().protocol_error = Some(error.to_string());
                    self.answer(seq, Reply::error(format!("ERR {error}")));
                    return None;
                }
            };
            let frame = match frame {
                _ if !self.keeps_requests() => calls::Frame::None,
                Some(frame) => calls::Frame::Whole(frame),
                None => calls::Frame::Args(args.clone()),
            };
            // The slot is made whole here (written once, not defaulted and then filled).
            let (call, silent) = (self.begin_call(frame), self.silence());
            let encoding = self.encoding(Default::default());
            let seq = self.replies.push_call(encoding, call, silent);
            self.rejecting = false;
            let admission = self.admit(&mut args, seq);
            argv::give_back(args);
            self.name_call(seq, self.identity.last_command, self.rejecting);
            self.monitor_at_start(seq);
            let track = match &admission {
                Admission::Forward(command) => self.track_before(command),
                Admission::Answered(_) => None,
            };
            // CLIENT CACHING counts for the one command after it.
            if self.identity.last_command != Some("client|caching") && !self.txn.in_multi() {
                self.modes.tracking.clear_caching();
            }
            match admission {
                Admission::Forward(command) => {
                    if command.is_blocking() {
                        self.rare().blocking.push(seq);
                    }
                    // PSYNC and SYNC write their own answer; REPLCONF ACK gets none.
                    if matches!(&command, Command::Repl(r) if r.is_unanswered()) {
                        if let Some(slot) = self.replies.slot(seq) {
                            slot.silent = true;
                        }
                    }
                    if matches!(
                        command,
                        Command::Introspect(crate::introspect::Request::Shutdown {
                            abort: false,
                            ..
                        })
                    ) {
                        self.rare().shutdown = Some(seq);
                    }
                    let request = Request { seq, command };
                    // A tracking connection's read: its keys are remembered first.
                    return Some(match track {
                        Some(track) => {
                            self.rare().queued.push_back(request);
                            track
                        }
                        None => request,
                    });
                }
                Admission::Answered(reply) => self.answer(seq, reply),
            }
        }
        None
    }

    /// CONFIG SET: all or nothing on the node's configuration; what the shards apply goes to
    /// every shard.
    fn config_set(&mut self, pairs: Vec<(Bytes, Bytes)>) -> Admission {
        use crate::config::live::Glue;
        // TLS parameters take effect together (certificates re-read, new connections get
        // them) or not at all; without TLS they are only recorded.
        let glue = |step: Glue<'_>| match step {
            Glue::Tls(changes) => match &self.config.tls_reload {
                Some(reload) => reload.apply(changes),
                None => Ok(()),
            },
            Glue::Listen { bind, port } => match &self.config.port_check {
                Some(check) => check.check(bind, port),
                None => Err("can't set immutable config".into()),
            },
        };
        let set = crate::config::set(&self.config.live, &pairs, &glue);
        if set.is_ok() {
            self.config.sync_script_busy();
            self.config.replica.configure(&self.config.live);
            // `requirepass` is the default user's password.
            if let Some((_, password)) =
                (pairs.iter().rev()).find(|(name, _)| name.eq_ignore_ascii_case(b"requirepass"))
            {
                self.config.acl.set_requirepass(password);
            }
        }
        match set {
            Ok(settings) if settings.is_empty() => Admission::Answered(Reply::ok()),
            Ok(settings) => Admission::Forward(Command::ConfigApply(settings)),
            Err(reply) => Admission::Answered(reply),
        }
    }

    /// DEBUG is a protected command: refused unless `enable-debug-command` is `yes`, or
    /// `local` and the client is on this host (Redis's check, before the command's own).
    fn protected_refusal(&self, args: &[Bytes]) -> Option<Reply> {
        if !args.first()?.eq_ignore_ascii_case(b"debug") {
            return None;
        }
        let allowed = match self.config.live.get("enable-debug-command").as_deref() {
            Some("yes") => true,
            Some("local") => (self.identity.ends.peer()).is_none_or(|peer| peer.ip().is_loopback()),
            _ => false,
        };
        (!allowed).then(|| {
            Reply::error(
                "ERR DEBUG command not allowed. If the enable-debug-command option is set to \
                 \"local\", you can run it from a local connection, otherwise you need to set \
                 this option in the configuration file, and then restart the server.",
            )
        })
    }

    /// The request that remembers the keys a tracking connection reads with `command`
    /// (sent before it, on the same lanes): `None` when nothing is to be tracked.
    fn track_before(&mut self, command: &Command) -> Option<Request> {
        if !self.modes.tracking.tracks_reads() {
            return None;
        }
        // The read-only scripts are not reads themselves: what they read is tracked as they
        // read it (see `server/tracking.rs`), as Redis does.
        let readonly = |command: &Command| {
            let name = command.name();
            !matches!(name, "eval_ro" | "evalsha_ro" | "fcall_ro")
                && crate::introspect::meta::find(name).is_some_and(|m| m.has_flag("readonly"))
        };
        let keys: Vec<Bytes> = match command {
            Command::Transaction(transaction) => transaction
                .items
                .iter()
                .filter_map(|item| match item {
                    TxnItem::Run(command) if readonly(command) => Some(command.keys()),
                    _ => None,
                })
                .flatten()
                .map(Bytes::copy_from_slice)
                .collect(),
            command if readonly(command) => command
                .keys()
                .into_iter()
                .map(Bytes::copy_from_slice)
                .collect(),
            _ => Vec::new(),
        };
        if keys.is_empty() {
            return None;
        }
        let seq = self.replies.push_pending(self.encoding(Default::default()));
        if let Some(slot) = self.replies.slot(seq) {
            slot.silent = true;
        }
        Some(Request {
            seq,
            command: Command::Client(crate::command::ClientRequest::Track(keys)),
        })
    }

    /// The length of request `seq` as it arrived (0 when it was not kept).
    fn request_len(&mut self, seq: u64) -> usize {
        self.replies
            .slot(seq)
            .map_or(0, |slot| slot.call.frame.len())
    }

    /// Delivers the reply for request `seq`; replies may arrive in any order.
    pub fn complete(&mut self, seq: u64, reply: Reply) -> Result<(), SessionError> {
        let reply = self.txn.client_reply(seq, reply);
        if let Some(rare) = self.rare.as_mut().filter(|rare| rare.shutdown == Some(seq)) {
            rare.shutdown = None;
            if !reply.is_error() {
                if let Some(slot) = self.replies.slot(seq) {
                    slot.silent = true;
                }
                self.lifecycle = Lifecycle::ClosingAfter(seq);
            }
        }
        if let Some(rare) = &mut self.rare {
            rare.blocking.retain(|&blocked| blocked != seq);
        }
        self.account(seq, &reply);
        if let Some((encoding, reply)) = self.replies.fill_front(seq, reply)? {
            self.emit(seq, encoding, &reply);
        }
        self.flush_ready();
        Ok(())
    }

    /// Reply bytes ready to write, in request order. Take them when a write can be issued;
    /// bytes left here count against `max_pending_output`.
    pub fn take_output(&mut self) -> Option<Bytes> {
        (!self.output.is_empty()).then(|| self.output.split().freeze())
    }

    pub fn pending_output(&self) -> usize {
        self.output.len()
    }

    /// Replication: bytes for a replica's connection, written as they are after the
    /// replies already emitted (the glue bounds how much it pushes).
    pub fn push_raw(&mut self, bytes: &[u8]) {
        self.output.extend_from_slice(bytes);
    }

    /// The connection is a replica from now on (CLIENT LIST's `S`, CLIENT KILL TYPE
    /// replica).
    pub fn set_replica(&mut self) {
        self.modes.replica = true;
    }

    /// Requests parsed but whose replies have not been emitted yet.
    pub fn backlog(&self) -> usize {
        self.replies.len()
    }

    /// The last reply (to QUIT or a protocol error) has been emitted: once the output is
    /// written, close the connection.
    pub fn is_closed(&self) -> bool {
        self.lifecycle == Lifecycle::Closed
    }

    /// The protocol error that is closing this connection, once: the glue reports it
    /// (`corewire::runtime::report_protocol_error`).
    pub fn take_protocol_error(&mut self) -> Option<String> {
        self.rare.as_mut()?.protocol_error.take()
    }

    pub fn is_authenticated(&self) -> bool {
        self.authenticated
    }

    fn has_capacity(&self) -> bool {
        self.replies.len() < self.config.max_backlog
            && self.output.len() < self.config.max_pending_output
    }

    /// Parses and authorises one request, answering it here unless it needs a shard.
    /// Redis's order: unknown command and arity errors, then NOAUTH, then everything else.
    fn admit(&mut self, args: &mut Vec<Bytes>, seq: u64) -> Admission {
        let permitted = self.authenticated
            || args
                .first()
                .is_some_and(|name| command::allowed_without_auth(name));
        if let Some(rare) = &mut self.rare {
            rare.acl_queued_args = None;
            // Only the AUTH or HELLO being admitted (or queued by MULTI) reads it.
            if !self.txn.in_multi() {
                rare.auth_name = None;
            }
            // AUTH's name is most connections' only use of the box: it goes now rather than
            // at the idle sweep, so the requests after AUTH do not pass through it.
            self.release_rare();
        }
        if args[0].eq_ignore_ascii_case(b"auth") || args[0].eq_ignore_ascii_case(b"hello") {
            self.rare().auth_name = Some(args[0].clone());
        }
        // Redis's order: the table's checks and NOAUTH, then the ACL, then the rest.
        if self.authenticated {
            if let Some(refusal) = self.acl_refusal(args) {
                self.rejecting = true;
                if args[0].eq_ignore_ascii_case(b"exec") {
                    // A refused EXEC discards the transaction, as Redis's rejectCommand does.
                    self.identity.last_command = Some("exec");
                    let Reply::Error(text) = refusal else {
                        return Admission::Answered(refusal);
                    };
                    let reply = Reply::error(format!(
                        "EXECABORT Transaction discarded because of: {}",
                        String::from_utf8_lossy(&text)
                    ));
                    if !self.txn.in_multi() {
                        return Admission::Answered(reply);
                    }
                    return self.reset_txn(seq, reply);
                }
                let (name, parsed) = Command::parse_named(args);
                self.identity.last_command = name;
                if self.txn.in_multi() {
                    return self.admit_queued(parsed, Some(refusal), seq);
                }
                return Admission::Answered(refusal);
            }
        }
        // Before parsing, as Redis: a misdirected request gets MOVED, not its own error.
        let redirect = match self.cluster.as_mut().filter(|_| permitted) {
            Some(gate) => gate.check(args),
            None => None,
        };
        if self.pubsub.active() {
            let name = Command::table_name(args);
            self.identity.last_command = name.as_ref().ok().copied();
            let refusal = match name {
                Err(error) => Some(error.into()),
                Ok(name) => self.refuse_while_subscribed(name),
            };
            if let Some(refusal) = refusal {
                self.rejecting = true;
                return Admission::Answered(refusal);
            }
        }
        // A cluster redirect comes first, as in Redis: a write sent to a replica gets MOVED.
        let replica_refusal = self
            .config
            .replica
            .refusal(args)
            .filter(|_| permitted && redirect.is_none());
        if let Some(refusal) = replica_refusal {
            // A replica's refusals (READONLY, MASTERDOWN, LOADING); inside MULTI the
            // transaction is then discarded at EXEC, as Redis flags it.
            self.rejecting = true;
            if !self.txn.in_multi() {
                self.identity.last_command = Command::table_name(args).ok();
                return Admission::Answered(refusal);
            }
            return self.refuse_in_multi(std::mem::take(args), refusal, seq);
        }
        if let Some(busy) = self.config.script_busy.refusal() {
            // A script past the busy threshold runs: only `allow_busy` commands get through.
            // Inside MULTI the refusal aborts the transaction, and EXEC discards it.
            if permitted && !Command::allows_busy(args) {
                if !self.txn.in_multi() {
                    return Admission::Answered(busy);
                }
                return self.refuse_in_multi(std::mem::take(args), busy, seq);
            }
        }
        if self.txn.in_multi() {
            // Redis's order: the table's checks, then NOAUTH, then the cluster redirect.
            let rejected = match Command::check_table(args) {
                Err(error) => Some(error.into()),
                Ok(()) if !permitted => Some(CommandError::NoAuth.into()),
                Ok(()) if no_multi(args) => {
                    Some(Reply::error("ERR Command not allowed inside a transaction"))
                }
                Ok(()) => self.protected_refusal(args).or(redirect),
            };
            if rejected.is_none() && !self.user.unrestricted {
                self.rare().acl_queued_args = Some(args.to_vec());
            }
            let (name, parsed) = Command::parse_named(args);
            self.identity.last_command = name;
            self.rejecting = rejected.is_some();
            return self.admit_queued(parsed, rejected, seq);
        }
        if let Some(redirect) = redirect {
            self.rejecting = true;
            return Admission::Answered(redirect);
        }
        // Only DEBUG can be refused here: the table is not looked up twice for the rest.
        if permitted && args[0].eq_ignore_ascii_case(b"debug") && Command::check_table(args).is_ok()
        {
            if let Some(refusal) = self.protected_refusal(args) {
                self.identity.last_command = Command::table_name(args).ok();
                self.rejecting = true;
                return Admission::Answered(refusal);
            }
        }
        let (name, parsed) = Command::parse_named(args);
        self.identity.last_command = name;
        let command = match parsed {
            Ok(command) if permitted => command,
            Err(error) if permitted || error.is_checked_before_auth() => {
                self.rejecting = error.is_checked_before_auth();
                return Admission::Answered(error.into());
            }
            _ => {
                self.rejecting = true;
                return Admission::Answered(CommandError::NoAuth.into());
            }
        };
        if let Command::Cluster(request) = &command {
            if self.cluster.is_none() && request.needs_cluster_mode() {
                return Admission::Answered(CommandError::ClusterDisabled.into());
            }
        }
        if self.resp3 {
            self.replies
                .set_encoding(seq, resp3::Encoding::Resp3(resp3::shape_of(&command)));
        }
        // One match on the command's kind: the commands the session answers or adjusts
        // itself are few, and a data command reaches its scope after a single jump rather
        // than a test (and a move of the command) per special case.
        match command {
            Command::Hello(hello) => Admission::Answered(self.hello(*hello, seq)),
            command @ (Command::Multi
            | Command::Exec
            | Command::Discard
            | Command::Watch(_)
            | Command::Unwatch) => self.admit_txn_control(command, seq),
            Command::Reset => {
                let reply = self.reset();
                self.reset_txn(seq, reply)
            }
            Command::Ping(message) if self.pubsub.active() && !self.resp3 => {
                Admission::Answered(pubsub::subscribed_pong(message))
            }
            Command::ConfigSet(pairs) => self.config_set(pairs),
            Command::Subscription(subscription) => {
                // Confirmations are pushed even while CLIENT REPLY is off, as in Redis.
                if let Some(slot) = self.replies.slot(seq) {
                    slot.silent = false;
                }
                self.subscription(subscription, seq)
            }
            Command::Client(request) => self.client_request(request, seq),
            Command::Acl(request) => self.acl_command(request, seq),
            command @ Command::Script(_) => match command.scope() {
                Scope::Connection => Admission::Answered(self.run_local(command, seq)),
                Scope::Keyed | Scope::AllShards => {
                    Admission::Forward(self.with_script_user(command))
                }
            },
            command => self.admit_scoped(command, seq),
        }
    }

    /// A command past the session's own: answered here if it concerns the connection only,
    /// else forwarded to a shard.
    #[inline]
    fn admit_scoped(&mut self, command: Command, seq: u64) -> Admission {
        match command.scope() {
            Scope::Connection => Admission::Answered(self.run_local(command, seq)),
            Scope::Keyed | Scope::AllShards => Admission::Forward(command),
        }
    }

    /// CLIENT REPLY OFF / SKIP: request `seq`'s reply is not sent.
    /// Whether the next request's reply is silent (CLIENT REPLY OFF or SKIP).
    fn silence(&mut self) -> bool {
        match self.reply_mode {
            ReplyMode::On => false,
            ReplyMode::Off => true,
            ReplyMode::SkipNext => {
                self.reply_mode = ReplyMode::On;
                true
            }
        }
    }

    /// Whether request `seq`'s reply counts as a call (not while it is only queued).
    fn uncount(&mut self, seq: u64) {
        if let Some(slot) = self.replies.slot(seq) {
            slot.call.counted = false;
        }
    }

    fn answer(&mut self, seq: u64, reply: Reply) {
        self.account(seq, &reply);
        // `seq` was just pushed and nothing else can fill it, so this cannot fail.
        if let Ok(front) = self.replies.fill_front(seq, reply) {
            if let Some((encoding, reply)) = front {
                self.emit(seq, encoding, &reply);
            }
            self.flush_ready();
        }
    }

    fn flush_ready(&mut self) {
        while let Some((seq, encoding, reply)) = self.replies.pop_ready() {
            self.emit(seq, encoding, &reply);
        }
    }

    /// Writes reply `seq`, the oldest owed (`encoding` `None`: silent).
    #[inline]
    fn emit(&mut self, seq: u64, encoding: Option<resp3::Encoding>, reply: &Reply) {
        if let Some(encoding) = encoding {
            resp3::write(reply, &encoding, &mut self.output);
        }
        if self.lifecycle == Lifecycle::ClosingAfter(seq) {
            self.lifecycle = Lifecycle::Closed;
        }
    }
}

/// Whether Redis refuses the command between MULTI and EXEC (flagged `no_multi`: SHUTDOWN,
/// SAVE, ...).
fn no_multi(args: &[Bytes]) -> bool {
    Command::table_name(args)
        .ok()
        .and_then(crate::introspect::meta::find)
        .is_some_and(|meta| meta.has_flag("no_multi"))
}

#[cfg(test)]
mod acl_tests;
#[cfg(test)]
mod tests;
