//! One RESP client connection on its shard: a single task takes received chunks from the
//! stream (multishot receive into the shard's buffer ring), feeds the [`Session`], dispatches
//! requests, and writes replies in request order, one send on the ring at a time, as they
//! complete (locally, from other shards, or out of the durability gate). A connection waiting
//! for its client holds no receive buffer: chunks go back to the ring once copied into the
//! session, and the session's input buffer is freed when it is empty.

use std::cell::{Cell, RefCell};
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll};

use bytes::Bytes;
use corewire::runtime::sync::WakerCell;
use corewire::runtime::timer::{sleep_until, Sleep};
use corewire::runtime::RoundBudget;

use super::introspect::{monotonic_us, unix_us};
use super::resp_io::{RespAccepted, RespIo};
use super::shard::{now_ms, Shard};
use super::shared::ClientSlot;
use super::sink::{Merges, Part, ReplySink, SinkKey};
use super::tracking::TrackingEvent;
use crate::clients::{ClientAddress, ClientLine};
use crate::reply::Reply;
use crate::session::Session;

/// Output held back (see `hold_output`) is written anyway once it reaches this size.
const FLUSH_THRESHOLD: usize = 64 * 1024;

/// A request held by CLIENT PAUSE is retried at least this often (an UNPAUSE, from any
/// connection, wakes no one).
const PAUSE_RECHECK: std::time::Duration = std::time::Duration::from_millis(20);

const MAX_CLIENTS_REPLY: &[u8] = b"-ERR max number of clients reached\r\n";

/// Serves one accepted connection until it closes.
///
/// A plain function returning a hand-written future rather than an `async fn`: an async fn
/// keeps storage for every local it ever held (the session it built, the accepted stream)
/// next to the state it needs while waiting, which made an idle connection's task several
/// times larger than [`Serving`] (see BENCHMARKS.md, idle memory).
pub(crate) fn serve(accepted: impl Into<RespAccepted>, shard: Rc<Shard>) -> Serve {
    let accepted: RespAccepted = accepted.into();
    let Some(slot) = shard.shared.admit_client() else {
        tracing::debug!(peer = ?accepted.peer, "refusing client: maxclients reached");
        // Rare: the refusal may be boxed.
        return Serve::Refusing(Box::pin(accepted.stream.refuse(MAX_CLIENTS_REPLY)));
    };
    let mut session = Session::new(shard.shared.session.clone());
    let denied = match accepted.stream.is_local() {
        true => None,
        false => super::protected::refusal(&shard.shared, accepted.peer),
    };
    if let Some(denied) = denied {
        return Serve::Refusing(Box::pin(accepted.stream.refuse(denied)));
    }
    session.set_peer(
        accepted.peer,
        accepted.stream.local_addr(),
        i64::from(accepted.stream.raw_fd()),
        now_ms(),
    );
    if let Some(gate) = shard.cluster.gate() {
        session.set_cluster(gate);
    }
    let conn = Rc::new(RespConn {
        state: RefCell::new(ConnState {
            session,
            merges: Merges::default(),
        }),
        task: WakerCell::new(),
        slot,
        deferred: RefCell::new(Deferreds::default()),
        broadcaster_acks: Cell::new(0),
    });
    let key = shard.register(conn.clone());
    let id = conn.state.borrow().session.client_id();
    shard.shared.session.clients.register(
        id,
        ClientAddress {
            shard: shard.id,
            handle: key.pack(),
        },
    );
    let io = ConnIo {
        stream: RespIo::new(accepted.stream),
        read_closed: false,
        round: RoundBudget::new(accepted.budget),
        pause: None,
    };
    Serve::Serving(Serving {
        conn,
        io: Some(io),
        shard,
        key,
    })
}

/// The connection's task.
// The large variant is the common one; boxing it would cost an allocation per connection.
#[allow(clippy::large_enum_variant)]
pub(crate) enum Serve {
    Refusing(Pin<Box<dyn Future<Output = ()>>>),
    Serving(Serving),
}

pub(crate) struct Serving {
    conn: Rc<RespConn>,
    /// `None` once finished.
    io: Option<ConnIo>,
    shard: Rc<Shard>,
    key: SinkKey,
}

impl Future for Serve {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        match self.get_mut() {
            Serve::Refusing(refusal) => refusal.as_mut().poll(cx),
            Serve::Serving(serving) => {
                let Some(io) = serving.io.as_mut() else {
                    return Poll::Ready(());
                };
                std::task::ready!(serving.conn.poll(cx, io, &serving.shard, serving.key));
                serving.finish();
                Poll::Ready(())
            }
        }
    }
}

impl Serving {
    /// Dropping an op still in flight cancels it; the socket closes once it has completed.
    fn finish(&mut self) {
        if self.io.take().is_some() {
            let session = &self.conn.state.borrow().session;
            (self.shard.shared.session.clients).unregister(session.client_id());
            if session.is_tracking() {
                let tracking = &self.shard.shared.session.live.hot.tracking_clients;
                tracking.fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
            }
            self.shard.unregister(self.key);
        }
    }
}

impl Drop for Serving {
    // A task dropped before the connection finished (shutdown) still leaves the shard clean.
    fn drop(&mut self) {
        self.finish();
    }
}

struct ConnState {
    session: Session,
    merges: Merges,
}

struct RespConn {
    state: RefCell<ConnState>,
    /// The connection task, parked until a reply or an I/O completion arrives.
    task: WakerCell,
    /// The connection's place among `maxclients` (freed with the connection's state), and
    /// the server's shared state. Here rather than in the task, whose allocation it would
    /// push into the next size class.
    slot: ClientSlot,
    /// Messages pushed while the connection itself was running (a RESP3 client publishing
    /// to a channel it is subscribed to), client tracking's messages (always: an
    /// invalidation may need the shard to go on to a redirect target), and the messages after
    /// those (to keep their order): queued, then handled at its next turn. Bounded like the
    /// output they become (the session kills a subscriber past its output limit).
    deferred: RefCell<Deferreds>,
    /// Other shards yet to confirm this connection's new broadcast prefixes: its output
    /// (the CLIENT TRACKING reply first) waits for them, so a write its client makes after
    /// the reply is invalidated whichever shard it lands on.
    broadcaster_acks: Cell<usize>,
}

enum Deferred {
    Push(Reply, u64),
    ShardMessage(Bytes, Reply, u64),
    Tracking(TrackingEvent, u64),
}

/// The deferred messages: boxed only while there are some (an empty `Vec` in every
/// connection's state would cost 16 bytes more, and few connections ever defer one).
// Boxed on purpose: an empty `Vec` is 24 bytes in every connection's state, the box 8.
#[allow(clippy::box_collection)]
#[derive(Default)]
struct Deferreds(Option<Box<Vec<Deferred>>>);

impl Deferreds {
    fn is_empty(&self) -> bool {
        self.0.is_none()
    }

    fn push(&mut self, deferred: Deferred) {
        self.0.get_or_insert_default().push(deferred);
    }
}

impl IntoIterator for Deferreds {
    type Item = Deferred;
    type IntoIter = std::iter::Flatten<std::option::IntoIter<Vec<Deferred>>>;

    fn into_iter(self) -> Self::IntoIter {
        self.0.map(|queue| *queue).into_iter().flatten()
    }
}

struct ConnIo {
    /// The stream (TCP or TLS) with its send in flight and the rest of a short send.
    stream: RespIo,
    read_closed: bool,
    /// The listener's fairness budget: work (a request's keys or elements, see
    /// `Command::budget_units`, and its bytes) parsed per round before the connection
    /// yields to the rest of its shard.
    round: RoundBudget,
    /// While CLIENT PAUSE holds a request: when to look again (boxed: the task of every
    /// connection carries this field, few ever fill it).
    pause: Option<Box<Sleep>>,
}

impl ReplySink for RespConn {
    fn deliver(&self, seq: u64, part: Part, reply: Reply) {
        {
            let mut state = self.state.borrow_mut();
            let ConnState { session, merges } = &mut *state;
            if let Some(reply) = merges.accept(seq, part, reply, || self.slot.shared().info()) {
                session.set_monotonic(monotonic_us());
                if let Err(error) = session.complete(seq, reply) {
                    tracing::error!(%error, "reply delivered twice");
                }
            }
        }
        self.wake();
    }

    fn push(&self, message: Reply, now_ms: u64) {
        let state = match self.state.try_borrow_mut() {
            Ok(state) if self.deferred.borrow().is_empty() => Some(state),
            _ => None,
        };
        let Some(mut state) = state else {
            // Pushed by this connection's own command (after it), or behind deferred ones.
            self.deferred
                .borrow_mut()
                .push(Deferred::Push(message, now_ms));
            self.wake();
            return;
        };
        let alive = state.session.push_message(message, now_ms);
        drop(state);
        if !alive {
            tracing::warn!("subscriber passed its output limit (client-output-buffer-limit pubsub); closing it");
        }
        self.wake();
    }

    fn push_shard_message(&self, channel: &Bytes, message: Reply, now_ms: u64) {
        let state = match self.state.try_borrow_mut() {
            Ok(state) if self.deferred.borrow().is_empty() => Some(state),
            _ => None,
        };
        let Some(mut state) = state else {
            let deferred = Deferred::ShardMessage(channel.clone(), message, now_ms);
            self.deferred.borrow_mut().push(deferred);
            self.wake();
            return;
        };
        let alive = state.session.push_shard_message(channel, message, now_ms);
        drop(state);
        if !alive {
            tracing::warn!("subscriber passed its output limit (client-output-buffer-limit pubsub); closing it");
        }
        self.wake();
    }

    fn memory(&self) -> usize {
        // Beyond the session and its buffers (CLIENT LIST's `tot-mem`), what every
        // connection allocates: its shared state around the session, with the `Rc`'s
        // counts, and its task, so that INFO's `used_memory_dataset` does not count idle
        // connections as data. The runtime's share of a socket is not counted.
        const FIXED: usize = std::mem::size_of::<RespConn>() - std::mem::size_of::<Session>()
            + 16
            + std::mem::size_of::<Serve>()
            + 16;
        FIXED
            + match self.state.try_borrow() {
                Ok(state) => state.session.memory(),
                // The connection asking: at least its state.
                Err(_) => std::mem::size_of::<Session>(),
            }
    }

    fn client_line(&self, now_ms: u64) -> Option<ClientLine> {
        self.state.try_borrow().ok()?.session.client_line(now_ms)
    }

    fn acl_revoked(&self) -> bool {
        (self.state.try_borrow_mut()).is_ok_and(|mut state| state.session.acl_revoked())
    }

    fn kill(&self) {
        if let Ok(mut state) = self.state.try_borrow_mut() {
            state.session.kill();
        }
        self.wake();
    }

    fn push_raw(&self, bytes: &[u8]) -> Option<usize> {
        let mut state = self.state.try_borrow_mut().ok()?;
        if state.session.is_killed() {
            return None;
        }
        state.session.push_raw(bytes);
        let pending = state.session.pending_output();
        drop(state);
        self.wake();
        Some(pending)
    }

    fn set_replica(&self) {
        if let Ok(mut state) = self.state.try_borrow_mut() {
            state.session.set_replica();
        }
    }

    fn idle_sweep(&self) -> bool {
        // Running now: it is not idle.
        (self.state.try_borrow_mut()).map_or(true, |mut state| state.session.idle_sweep())
    }

    fn tracking(&self, event: TrackingEvent) {
        self.deferred
            .borrow_mut()
            .push(Deferred::Tracking(event, now_ms()));
        self.wake();
    }
}

impl RespConn {
    /// One turn of the connection: collect I/O completions, run what was parsed, start the
    /// next recv and send. `Ready` once the connection is finished.
    fn poll(&self, cx: &mut Context<'_>, io: &mut ConnIo, shard: &Shard, key: SinkKey) -> Poll<()> {
        // Back from a budget yield: a new round (a spent round that has not yielded yet
        // yields here).
        if io.round.poll_proceed(cx).is_pending() {
            self.park(cx);
            return Poll::Pending;
        }
        let mut dispatched = false;
        // The clocks, read at most once per turn of the loop that needs them and kept until
        // requests run (one may have taken a while): a poll's turns take microseconds, and
        // reading both clocks at every turn made nine reads of a request at `-P 1`. A local
        // reply still reads the monotonic clock (its duration, and the start of the next).
        let mut clock: Option<u64> = None;
        // The receive answered `Pending` in this poll: its waker is registered, and nothing
        // this poll does makes input arrive (completions and readiness come from the shard's
        // driver between polls, and would wake this task), so it is not asked again until the
        // next poll. At `-P 1` that spared two of the four receive polls per request.
        let mut recv_pending = false;
        loop {
            let mut progress = false;

            if let Poll::Ready(sent) = io.stream.poll_sent(cx) {
                progress = true;
                if let Err(error) = sent {
                    tracing::debug!(%error, "send failed; closing");
                    return Poll::Ready(());
                }
            }

            let mut state = self.state.borrow_mut();
            let ConnState { session, merges } = &mut *state;
            if session.is_killed() {
                // Past its output limit: dropped at once, unsent output and all.
                return Poll::Ready(());
            }
            let mut handled = 0;
            if session.may_have_request() {
                read_clocks(&mut clock, session);
            }
            // A running EXEC or multi-shard command of this connection: what follows waits.
            // Nothing buffered, nothing to parse: the turns that only send or receive (most
            // of them at `-P 1`) skip the parser.
            while session.may_have_request()
                && !io.round.exhausted()
                && !shard.txn.is_held_back(key)
            {
                let buffered = session.input_buffer().len();
                let next = session.next_request();
                // Subscriptions reach the shard's registry before anything else runs here.
                for change in session.take_pubsub_changes() {
                    shard.apply_sub_change(key, change);
                }
                let Some(request) = next else {
                    break;
                };
                handled += 1;
                io.round.charge_units(
                    request.command.budget_units(),
                    buffered.saturating_sub(session.input_buffer().len()),
                );
                // What was answered before it is in the statistics it may read (INFO; the
                // others' wait for the end of the turn), and MONITOR shows it (and an EXEC or
                // EVAL, which show as they start) first.
                if request.command.may_read_stats() {
                    session.record_calls_with(|calls| shard.record_calls(calls));
                }
                if let Some(lines) = session.take_monitor_lines() {
                    shard.feed_monitors(lines);
                }
                // One clock read per batch of requests.
                let now = read_clocks(&mut clock, session) / 1000;
                if let Some(reply) = shard.dispatch(key, request.seq, request.command, merges, now)
                {
                    session.set_monotonic(monotonic_us());
                    if let Err(error) = session.complete(request.seq, reply) {
                        tracing::error!(%error, "local reply delivered twice");
                    }
                }
            }
            // Handling one may queue another (a redirect to this same connection, a broken
            // redirect): until none is left, as its wake-up would come while this poll runs.
            loop {
                let deferred = self.deferred.take();
                if deferred.is_empty() {
                    break;
                }
                progress = true;
                for deferred in deferred {
                    match deferred {
                        Deferred::Push(message, at) => {
                            session.push_message(message, at);
                        }
                        Deferred::ShardMessage(channel, message, at) => {
                            session.push_shard_message(&channel, message, at);
                        }
                        Deferred::Tracking(event, at) => {
                            self.on_tracking(session, shard, key, event, at);
                        }
                    }
                }
            }
            if let Some(change) = session.take_tracking_change() {
                let acks = shard.tracking_changed(key, change);
                self.broadcaster_acks
                    .set(self.broadcaster_acks.get() + acks);
            }
            session.record_calls_with(|calls| shard.record_calls(calls));
            if let Some(lines) = session.take_monitor_lines() {
                shard.feed_monitors(lines);
            }
            if let Some(on) = session.take_monitor_change() {
                shard.set_monitor(key, on);
            }
            if let Some(reason) = session.take_protocol_error() {
                corewire::runtime::report_protocol_error("resp", session.peer(), &reason);
            }
            let out_of_budget = io.round.exhausted();
            if handled > 0 {
                clock = None;
            }
            progress |= handled > 0;
            dispatched |= handled > 0;

            // Requests just read that wait on other shards will complete together (their
            // replies come back in one batch): hold what is ready until then, so a pipeline
            // is answered with one send instead of one before and one after the hop.
            // Deliveries wake a poll that dispatches nothing, and that one writes.
            let hold_output = (dispatched
                && session.backlog() > 0
                && session.pending_output() < FLUSH_THRESHOLD
                && !io.read_closed)
                || self.broadcaster_acks.get() > 0;
            if !io.stream.sending() {
                // The rest of a short send goes out regardless: it was due already.
                let next = match io.stream.take_unsent() {
                    Some(rest) => Some(rest),
                    None if hold_output => None,
                    None => session.take_output(),
                };
                if let Some(bytes) = next {
                    io.stream.start_send(cx, bytes);
                    progress = true;
                }
            }

            // More input only once everything buffered is parsed (or waits for more bytes).
            // The receive stays armed in between: taking no chunk is the backpressure.
            if !out_of_budget && !recv_pending && !io.read_closed && session.wants_read() {
                let polled = io.stream.poll_recv(cx, |bytes| session.feed(bytes));
                recv_pending = polled.is_pending();
                if let Poll::Ready(received) = polled {
                    progress = true;
                    match received {
                        Ok(true) => {
                            // New input: the clocks as of its arrival (read now unless this
                            // turn read them and ran nothing since).
                            let at = read_clocks(&mut clock, session) / 1000;
                            session.touch(at);
                        }
                        Ok(false) => io.read_closed = true,
                        Err(error) => {
                            tracing::debug!(%error, "recv failed");
                            io.read_closed = true;
                        }
                    }
                }
            }

            let flushed = io.stream.flushed() && session.pending_output() == 0;
            // A client that went away while blocked is done at once, as in Redis: its pop
            // may never be answered, and closing cancels it (see `blocking.rs`).
            let done = !out_of_budget
                && (session.is_closed()
                    || (io.read_closed && (session.backlog() == 0 || shard.may_be_blocked(key))));
            drop(state);
            if flushed && done {
                return Poll::Ready(());
            }
            if out_of_budget {
                // Let the shard's other connections run (counted in `budget_exhausted`); come
                // back after the next ring reap.
                self.park(cx);
                let _ = io.round.poll_proceed(cx);
                return Poll::Pending;
            }
            if !progress {
                if self.wait_for_pause(cx, io) {
                    // The pause ended by the clock: the next turn must see it.
                    clock = None;
                    continue;
                }
                // Waiting: buffers kept now serve the next request; the shard's sweep frees
                // them once the connection has stayed idle (see `session/idle.rs`).
                if self.state.borrow_mut().session.wants_idle_sweep() {
                    shard.list_idle(key);
                }
                // Waiting for I/O or replies gives the shard its turn: a new round.
                io.round.reset();
                self.park(cx);
                return Poll::Pending;
            }
        }
    }

    /// A client tracking message for this connection.
    fn on_tracking(
        &self,
        session: &mut Session,
        shard: &Shard,
        key: SinkKey,
        event: TrackingEvent,
        at: u64,
    ) {
        match event {
            TrackingEvent::Invalidate {
                keys,
                by_self,
                bcast,
            } => {
                if let crate::session::Invalidated::Redirect { id, keys } =
                    session.tracking_invalidate(keys, &by_self, bcast, at)
                {
                    shard.redirect_invalidation(id, keys, key);
                }
            }
            TrackingEvent::Deliver(keys) => session.tracking_deliver(keys, at),
            TrackingEvent::RedirectBroken => session.tracking_redirect_broken(at),
            TrackingEvent::BroadcasterSet => {
                self.broadcaster_acks
                    .set(self.broadcaster_acks.get().saturating_sub(1));
            }
        }
    }

    /// While CLIENT PAUSE holds a request, a timer brings the connection back: `true` when
    /// it already expired (look again now).
    fn wait_for_pause(&self, cx: &mut Context<'_>, io: &mut ConnIo) -> bool {
        let Some(until_ms) = self.state.borrow().session.paused_until() else {
            io.pause = None;
            return false;
        };
        let wait_ms = until_ms.saturating_sub(now_ms());
        let wait = std::time::Duration::from_millis(wait_ms).min(PAUSE_RECHECK);
        let timer = io
            .pause
            .get_or_insert_with(|| Box::new(sleep_until(std::time::Instant::now() + wait)));
        if Pin::new(&mut *timer).poll(cx).is_ready() {
            io.pause = None;
            return true;
        }
        false
    }

    fn wake(&self) {
        self.task.wake();
    }

    fn park(&self, cx: &Context<'_>) {
        self.task.register(cx.waker());
    }
}

/// The Unix time in microseconds as `clock` holds it, reading both clocks into the session
/// first when it holds none.
fn read_clocks(clock: &mut Option<u64>, session: &mut Session) -> u64 {
    *clock.get_or_insert_with(|| {
        let unix = unix_us();
        session.set_clock(monotonic_us(), unix);
        unix
    })
}

// What every connection allocates, pinned (on 64-bit targets): an idle connection holds its
// task (`Serve`) and its shared state (`RespConn`, the session in it) and nothing else of
// its own, so these sizes are most of its memory (BENCHMARKS.md, idle memory). The bounds
// keep the allocator's size classes they fall in now (mimalloc's 512 and 320 bytes: the
// `Rc` adds 16 bytes, the listener's task wrapper the connection's count, 16 more); state
// few connections use goes in a box (see `session/rare.rs`), not in these.
#[cfg(target_pointer_width = "64")]
const _: () = {
    assert!(std::mem::size_of::<Session>() <= 416);
    assert!(std::mem::size_of::<RespConn>() + 16 <= 512);
    assert!(std::mem::size_of::<Serve>() + 16 <= 320);
};
