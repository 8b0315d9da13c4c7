//! What a shard owns on one RDMA device: the protection domain, ONE completion queue shared
//! by all its queue pairs there (as SPDK's poll groups) with its completion channel, the
//! registered buffer pool, and (by default) the shared receive queue every connection on the
//! device receives into, with the receive budget that credits are granted from. A shard
//! makes one of these per device it touches: rdma_cm picks the device for each connection
//! from its addresses.

use std::cell::{Cell, RefCell};
use std::collections::{HashMap, VecDeque};
use std::os::fd::{AsFd, OwnedFd};
use std::rc::{Rc, Weak};
use std::time::Duration;

use corewire_runtime::io::{wait_readable, ReadableEvents};
use corewire_runtime::{register_poller, sleep, spawn_local};
use corewire_verbs::{
    AsyncEvent, CompletionChannel, CompletionQueue, Context, ProtectionDomain, QueuePair,
    SharedReceiveQueue,
};

use super::conn::Failure;
use super::cq_slots::{CqFull, CqSlots};
use super::grants::{ConnKey, SharedGrants};
use super::poller::CqPoller;
use super::pool::{BufferPool, ChunkId};
use super::shard::RdmaShard;
use super::wakeups::{self, Wakeups};
use super::wr_id::{WrId, WrKind};
use super::{PollerMode, RdmaConfig, RdmaError, ReceiveQueues};

/// How long a queue pair attached to the shared receive queue may take to report its last
/// receive (`IBV_EVENT_QP_LAST_WQE_REACHED`) before it is destroyed anyway.
const RETIRE_TIMEOUT: Duration = Duration::from_secs(2);

pub(crate) struct Device {
    pub ctx: Context,
    pub pd: ProtectionDomain,
    pub channel: CompletionChannel,
    pub cq: CompletionQueue,
    cq_slots: RefCell<CqSlots>,
    /// The most entries the CQ may grow to.
    cq_max: u32,
    pub pool: RefCell<BufferPool>,
    /// Connections waiting for a send buffer, in arrival order.
    send_waiters: RefCell<VecDeque<ConnKey>>,
    /// The shared receive queue, when connections use one (the default).
    pub srq: Option<SharedRecv>,
    /// Queue pairs on this device, by number: receive completions from the shared queue
    /// name only their queue pair.
    by_qp_num: RefCell<HashMap<u32, ConnKey>>,
    /// Queue pairs of closed connections waiting for their last shared receive.
    retiring: RefCell<HashMap<u32, Retiring>>,
    /// Set by the completion-channel task when the CQ signalled an event (and to force a
    /// drain and re-arm: see `wakeups`).
    pub event_pending: Cell<bool>,
    /// The completion channel became readable and its events are not read yet: the poller
    /// reads them just before it re-arms (see [`Device::read_channel_events`]).
    channel_ready: Cell<bool>,
    /// RDMA READs a queue pair asks to have in flight each way: `large_in_flight`, within
    /// the device's `max_qp_rd_atom` and `max_qp_init_rd_atom` (a depth of 1 serialised the
    /// READs of concurrent large messages).
    pub read_depth: u8,
    /// Arms of the CQ whose event may still sit unread in the channel: each arming raises
    /// at most one event, so the poller reads this many (at least one) per readiness and
    /// never pays an EAGAIN read in event mode, where every arm follows a read.
    arms_unread: Cell<u32>,
    /// Which completions wake the shard (solicited-only arming and its sweep).
    pub wakeups: Rc<Wakeups>,
    shard: Weak<RdmaShard>,
}

/// A closed connection's queue pair on its way out, with what the device may still touch.
struct Retiring {
    qp: QueuePair,
    cq: Option<CqReservation>,
    send_chunks: Vec<ChunkId>,
}

/// A shard's shared receive queue: `target` buffers kept posted, refilled as the poller
/// copies messages out; up to `capacity` when its limit event asks for an early refill.
pub(crate) struct SharedRecv {
    pub srq: SharedReceiveQueue,
    target: u32,
    posted: Cell<u32>,
    /// The low-water mark armed on the SRQ.
    limit: u32,
    pub grants: RefCell<SharedGrants>,
}

impl Device {
    /// Open the shard's resources on `ctx`'s device and start its poller and event tasks.
    pub fn open(
        shard: &Rc<RdmaShard>,
        ctx: Context,
        config: &RdmaConfig,
    ) -> Result<Rc<Device>, RdmaError> {
        let attr = ctx.query_device().map_err(RdmaError::Device)?;
        let pd = ProtectionDomain::new(&ctx).map_err(RdmaError::Device)?;
        let channel = CompletionChannel::new(&ctx).map_err(RdmaError::Device)?;
        let cq_max = config.cq_max_entries.min(attr.max_cqe).max(1);
        let cq = CompletionQueue::new(&ctx, config.cq_entries.min(cq_max), Some(&channel))
            .map_err(RdmaError::Device)?;
        let chunks = (config.pool_bytes / config.chunk_size.max(1)) as u32;
        // A shared queue keeps `n` buffers posted, and may take a quarter more for an early
        // refill; at least a third of the pool is left for sends.
        let srq_buffers = match config.receive {
            ReceiveQueues::Shared { buffers } => Some(buffers.min(chunks * 2 / 3).max(1)),
            ReceiveQueues::PerConnection => None,
        };
        // Receive buffers never take every chunk: what is left always serves sends, so a
        // sender can wait for a buffer. Per-connection queues keep a window's worth.
        let send_reserve = match srq_buffers {
            Some(n) => chunks.saturating_sub(n + n / 4).max(1) as usize,
            None => config.window as usize,
        };
        let pool = BufferPool::new(
            pd.clone(),
            config.chunk_size,
            config.slab_bytes,
            config.pool_bytes,
            send_reserve,
        );
        let srq = match srq_buffers {
            None => None,
            Some(n) => {
                // Room beyond the target for an early refill when the poller falls behind.
                let srq = SharedReceiveQueue::new(&pd, n + n / 4, 1).map_err(RdmaError::Device)?;
                Some(SharedRecv {
                    srq,
                    target: n,
                    posted: Cell::new(0),
                    limit: (n / 4).max(1),
                    // A slack for pure acks, which take a buffer without a grant.
                    grants: RefCell::new(SharedGrants::new(n - n / 8)),
                })
            }
        };
        let cq_capacity = cq.capacity();
        let device = Rc::new(Device {
            ctx,
            pd,
            channel,
            cq,
            cq_slots: RefCell::new(CqSlots::new(cq_capacity)),
            cq_max,
            pool: RefCell::new(pool),
            send_waiters: RefCell::new(VecDeque::new()),
            srq,
            by_qp_num: RefCell::new(HashMap::new()),
            retiring: RefCell::new(HashMap::new()),
            event_pending: Cell::new(false),
            channel_ready: Cell::new(false),
            read_depth: read_depth(config.large_in_flight, &attr),
            arms_unread: Cell::new(0),
            wakeups: Rc::new(Wakeups::default()),
            shard: Rc::downgrade(shard),
        });
        if let Some(s) = &device.srq {
            // Every buffer of the shared queue may complete at once.
            device
                .reserve_cq(s.srq.capacity())
                .map_err(RdmaError::CqFull)?
                .keep();
            device.refill(s.target)?;
            s.srq.arm_limit(s.limit).map_err(RdmaError::Device)?;
        }
        if !matches!(config.mode, PollerMode::Polling { .. }) {
            // For every completion: the solicited setting applies from the poller's arming.
            device.arm(false).map_err(RdmaError::Device)?;
        }
        spawn_local(wait_for_cq_events(Rc::downgrade(&device)));
        spawn_local(wakeups::sweep(
            Rc::downgrade(&device),
            device.wakeups.clone(),
        ));
        // A duplicate owned by the watching task (it holds the device only weakly).
        match device
            .ctx
            .async_event_fd()
            .map_err(|e| e.to_string())
            .and_then(|fd| fd.try_clone_to_owned().map_err(|e| e.to_string()))
        {
            Ok(fd) => {
                spawn_local(watch_async_events(Rc::downgrade(&device), fd));
            }
            Err(e) => tracing::warn!(error = %e, "rdma async events unavailable"),
        }
        register_poller(Box::new(CqPoller::new(shard.clone(), device.clone())));
        tracing::info!(
            device = %device.ctx.device_name(),
            srq = ?device.srq.as_ref().map(|s| s.target),
            cq = cq_capacity,
            "rdma device opened on this shard"
        );
        Ok(device)
    }

    pub fn name(&self) -> String {
        self.ctx.device_name()
    }

    /// Reserve CQ entries for a queue pair that can post `n` work requests at once, growing
    /// the CQ (up to `RdmaConfig::cq_max_entries` and the device's limit) when it is full.
    pub fn reserve_cq(self: &Rc<Self>, n: u32) -> Result<CqReservation, CqFull> {
        let first = self.cq_slots.borrow_mut().reserve(n);
        if let Err(full) = first {
            let cap = full.capacity;
            if cap >= self.cq_max {
                return Err(full);
            }
            let want = (cap.saturating_mul(2))
                .max(full.in_use + n)
                .min(self.cq_max);
            if let Err(e) = self.cq.resize(want) {
                tracing::warn!(error = %e, want, "ibv_resize_cq failed");
                return Err(full);
            }
            self.cq_slots.borrow_mut().set_capacity(self.cq.capacity());
            tracing::debug!(capacity = self.cq.capacity(), "completion queue grown");
            self.cq_slots.borrow_mut().reserve(n)?;
        }
        Ok(CqReservation {
            device: Rc::downgrade(self),
            n,
            used: false,
        })
    }

    /// The poller found the CQ empty.
    pub fn cq_drained(&self) {
        let mut slots = self.cq_slots.borrow_mut();
        if slots.has_draining() {
            slots.drained();
        }
    }

    pub fn cq_slots(&self) -> (u32, u32) {
        let s = self.cq_slots.borrow();
        (s.capacity(), s.in_use())
    }

    /// Queue a connection's writer for the next send buffer that comes back.
    pub fn wait_for_send_buffer(&self, key: ConnKey) {
        let mut w = self.send_waiters.borrow_mut();
        if !w.contains(&key) {
            w.push_back(key);
        }
    }

    /// A send buffer came back: wake the first live connection waiting for one.
    pub fn send_buffer_freed(&self) {
        let Some(shard) = self.shard.upgrade() else {
            return;
        };
        loop {
            let Some((slot, generation)) = self.send_waiters.borrow_mut().pop_front() else {
                return;
            };
            match shard.conn(slot, generation) {
                Some(conn) if !conn.is_ended() => {
                    conn.wake_writer();
                    return;
                }
                _ => {}
            }
        }
    }

    pub fn register_qp(&self, qp_num: u32, key: ConnKey) {
        self.by_qp_num.borrow_mut().insert(qp_num, key);
    }

    pub fn conn_of_qp(&self, qp_num: u32) -> Option<ConnKey> {
        self.by_qp_num.borrow().get(&qp_num).copied()
    }

    /// Whether any queue pair is open on this device.
    pub fn has_connections(&self) -> bool {
        !self.by_qp_num.borrow().is_empty()
    }

    /// Arm the CQ for the next completion: solicited ones only when the setting allows and
    /// nothing waits for a send completion (see `wakeups`).
    pub fn arm(&self, solicited_wakeups: bool) -> corewire_verbs::Result<()> {
        let solicited_only = self.wakeups.solicited_only(solicited_wakeups);
        self.cq.req_notify(solicited_only)?;
        self.arms_unread.set(self.arms_unread.get() + 1);
        self.wakeups.armed(solicited_only);
        if solicited_only {
            if let Some(shard) = self.shard.upgrade() {
                shard.stats.borrow_mut().solicited_arms += 1;
            }
        }
        Ok(())
    }

    /// Read the completion channel's unread events, if it signalled readiness since the last
    /// read: as many as armings could have raised (at least one), not until EAGAIN. The
    /// channel serves this device's one CQ and each arming raises at most one event, so in
    /// event mode (one arm per read) a last read until EAGAIN would be a fifth of a
    /// wake-up's syscalls (counted under strace in the VM); reading up to the count also
    /// covers wake-ups the ring coalesced. Events must be read (and so acknowledged in
    /// batches) for the CQ to be destroyed; reading them late is harmless: a CQ armed again
    /// with an event unread still raises the next one.
    pub fn read_channel_events(&self) {
        if !self.channel_ready.replace(false) {
            return;
        }
        let mut got = false;
        for _ in 0..self.arms_unread.get().max(1) {
            match self.channel.get_cq_event() {
                Ok(Some(_)) => {
                    got = true;
                    self.arms_unread
                        .set(self.arms_unread.get().saturating_sub(1));
                }
                Ok(None) => {
                    // Nothing raised is unread: the CQ is armed at most once now.
                    self.arms_unread.set(0);
                    break;
                }
                Err(e) => {
                    tracing::error!(error = %e, "ibv_get_cq_event failed");
                    break;
                }
            }
        }
        if got {
            if let Some(shard) = self.shard.upgrade() {
                shard.stats.borrow_mut().cq_events += 1;
            }
        }
    }

    /// Post shared receive buffers until `upto` are posted (or the pool has no more).
    pub fn refill(&self, upto: u32) -> Result<(), RdmaError> {
        let Some(s) = &self.srq else { return Ok(()) };
        let upto = upto.min(s.srq.capacity());
        while s.posted.get() < upto {
            let chunk = match self.pool.borrow_mut().alloc_recv(1) {
                Ok(mut c) => c.pop().expect("one chunk"),
                Err(e) if s.posted.get() > 0 => {
                    tracing::debug!(error = %e, posted = s.posted.get(), "shared receive queue not refilled");
                    return Ok(());
                }
                Err(e) => return Err(RdmaError::Pool(e)),
            };
            if let Err(e) = self.post_shared_recv(chunk) {
                self.pool.borrow_mut().free_recv(chunk);
                return Err(RdmaError::Device(e));
            }
        }
        Ok(())
    }

    fn post_shared_recv(&self, chunk: ChunkId) -> corewire_verbs::Result<()> {
        let Some(s) = &self.srq else { return Ok(()) };
        let pool = self.pool.borrow();
        let sge = pool.sge(chunk, pool.chunk_size());
        let wr = WrId {
            conn_slot: 0,
            generation: 0,
            kind: WrKind::SharedRecv,
            buffer: chunk,
        };
        s.srq.post_recv(wr.encode(), &[sge])?;
        s.posted.set(s.posted.get() + 1);
        Ok(())
    }

    /// A shared receive buffer completed (its data already copied out): post it again, or
    /// give it back to the pool if an early refill left more than the target posted.
    pub fn shared_recv_done(&self, chunk: ChunkId) {
        let Some(s) = &self.srq else { return };
        s.posted.set(s.posted.get().saturating_sub(1));
        if s.posted.get() >= s.target {
            self.pool.borrow_mut().free_recv(chunk);
            return;
        }
        if let Err(e) = self.post_shared_recv(chunk) {
            tracing::error!(error = %e, "reposting a shared receive buffer failed");
            self.pool.borrow_mut().free_recv(chunk);
        }
    }

    /// The SRQ ran low (its limit event): the poller is behind, so post extra buffers from
    /// the pool now, up to the queue's capacity, and arm the event again.
    fn srq_low(&self, shard: &RdmaShard) {
        let Some(s) = &self.srq else { return };
        shard.stats.borrow_mut().srq_limit_events += 1;
        if let Err(e) = self.refill(s.srq.capacity()) {
            tracing::warn!(error = %e, "early refill of the shared receive queue failed");
        }
        if let Err(e) = s.srq.arm_limit(s.limit) {
            tracing::warn!(error = %e, "arming the shared receive queue's limit failed");
        }
    }

    pub fn srq_posted(&self) -> u32 {
        self.srq.as_ref().map_or(0, |s| s.posted.get())
    }

    /// A connection's queue pair is done: with a shared receive queue it may still be
    /// taking a receive from it, so it is moved to the error state and destroyed once the
    /// device reports its last receive (or after a timeout); then its CQ entries and send
    /// buffers come back. Without one it is destroyed at once.
    pub fn retire(
        self: &Rc<Self>,
        qp: QueuePair,
        cq: Option<CqReservation>,
        send_chunks: Vec<ChunkId>,
    ) {
        let qp_num = qp.qp_num();
        self.by_qp_num.borrow_mut().remove(&qp_num);
        if self.srq.is_none() {
            drop(qp);
            self.release(cq, send_chunks);
            return;
        }
        let _ = qp.set_error();
        self.retiring.borrow_mut().insert(
            qp_num,
            Retiring {
                qp,
                cq,
                send_chunks,
            },
        );
        let weak = Rc::downgrade(self);
        spawn_local(async move {
            sleep(RETIRE_TIMEOUT).await;
            if let Some(d) = weak.upgrade() {
                if d.finish_retire(qp_num) {
                    tracing::debug!(qp_num, "queue pair destroyed without its last-WQE event");
                }
            }
        });
    }

    /// Destroy a retiring queue pair; false if it was already gone.
    fn finish_retire(&self, qp_num: u32) -> bool {
        let Some(r) = self.retiring.borrow_mut().remove(&qp_num) else {
            return false;
        };
        drop(r.qp);
        self.release(r.cq, r.send_chunks);
        true
    }

    fn release(&self, cq: Option<CqReservation>, send_chunks: Vec<ChunkId>) {
        drop(cq);
        let n = send_chunks.len();
        {
            let mut pool = self.pool.borrow_mut();
            for c in send_chunks {
                pool.free_send(c);
            }
        }
        for _ in 0..n {
            self.send_buffer_freed();
        }
    }

    /// The grants a new connection's handshake offers its peer: the window, or with a
    /// shared receive queue what the shard's budget has (never none).
    pub fn initial_grants(&self, window: u32) -> u32 {
        match &self.srq {
            Some(s) => s.grants.borrow_mut().initial(window),
            None => window,
        }
    }

    /// A connection that never started gives its initial grants back.
    pub fn return_grants(&self, n: u32) {
        if let Some(s) = &self.srq {
            s.grants.borrow_mut().closed((u32::MAX, 0), n);
        }
    }

    /// Serve connections waiting for grants from the shared receive budget.
    pub fn serve_grant_waiters(&self, shard: &RdmaShard) {
        let Some(s) = &self.srq else { return };
        loop {
            let next = s.grants.borrow_mut().next_waiting();
            let Some((slot, generation)) = next else {
                return;
            };
            if let Some(conn) = shard.conn(slot, generation) {
                conn.top_up_grants();
            }
        }
    }
}

/// CQ entries held for one queue pair; given back when it drops (after the next drain, as
/// the destroyed queue pair's flushed completions may still be queued).
pub(crate) struct CqReservation {
    device: Weak<Device>,
    n: u32,
    /// Whether a queue pair was created on it (else its entries are free at once).
    used: bool,
}

impl CqReservation {
    pub fn mark_used(&mut self) {
        self.used = true;
    }

    /// Held for the device's lifetime (the shared receive queue's entries).
    fn keep(self) {
        std::mem::forget(self);
    }
}

impl Drop for Device {
    fn drop(&mut self) {
        self.wakeups.close();
    }
}

impl Drop for CqReservation {
    fn drop(&mut self) {
        let Some(device) = self.device.upgrade() else {
            return;
        };
        let mut slots = device.cq_slots.borrow_mut();
        if self.used {
            slots.release(self.n);
            // Event mode: make the poller drain (and so free these entries) soon.
            device.event_pending.set(true);
        } else {
            slots.cancel(self.n);
        }
    }
}

/// Turn completion-channel readiness into `event_pending` for the poller.
async fn wait_for_cq_events(device: Weak<Device>) {
    // A duplicate of the channel's descriptor, owned by this task: the wait must not keep the
    // device alive (it holds a Weak), and readiness is shared by duplicates.
    let fd = match device
        .upgrade()
        .map(|d| d.channel.as_fd().try_clone_to_owned())
    {
        Some(Ok(fd)) => fd,
        Some(Err(e)) => {
            tracing::error!(error = %e, "cannot watch the completion channel");
            return;
        }
        None => return,
    };
    // One multishot poll stays armed on the channel: a wake-up costs no re-arming syscall.
    let mut events = ReadableEvents::new(fd);
    let mut arms_counted = 0;
    loop {
        if let Err(e) = events.readable().await {
            tracing::error!(error = %e, "waiting on the completion channel failed");
            sleep(Duration::from_millis(10)).await;
            continue;
        }
        let Some(device) = device.upgrade() else {
            return;
        };
        // The events themselves are read by the poller just before it re-arms, not here:
        // in event mode that puts the read after the sends of the tasks this wake-up's
        // completions woke, off the round trip's critical path (see `poller`).
        device.channel_ready.set(true);
        device.event_pending.set(true);
        if let Some(shard) = device.shard.upgrade() {
            let mut st = shard.stats.borrow_mut();
            st.cq_channel_arms += events.arms() - arms_counted;
            arms_counted = events.arms();
        }
    }
}

/// Drain the device's asynchronous events whenever its fd is readable: refill the shared
/// receive queue early, finish retiring queue pairs, fail connections whose queue pair broke.
async fn watch_async_events(device: Weak<Device>, fd: OwnedFd) {
    loop {
        {
            let Some(device) = device.upgrade() else {
                return;
            };
            let Some(shard) = device.shard.upgrade() else {
                return;
            };
            loop {
                match device.ctx.get_async_event() {
                    Ok(Some(ev)) => device.on_async_event(&shard, ev),
                    Ok(None) => break,
                    Err(e) => {
                        tracing::error!(error = %e, "reading rdma async events failed");
                        break;
                    }
                }
            }
        }
        if let Err(e) = wait_readable(&fd).await {
            tracing::error!(error = %e, "waiting on the rdma async event fd failed");
            sleep(Duration::from_millis(10)).await;
        }
    }
}

impl Device {
    fn on_async_event(&self, shard: &RdmaShard, ev: AsyncEvent) {
        match ev {
            AsyncEvent::SrqLimitReached(_) => self.srq_low(shard),
            AsyncEvent::QpLastWqeReached { qp_num } => {
                self.finish_retire(qp_num);
            }
            AsyncEvent::QpError { qp_num, kind } => {
                let key = self.conn_of_qp(qp_num);
                if let Some(conn) = key.and_then(|(s, g)| shard.conn(s, g)) {
                    conn.fail(Failure::QpError { kind });
                }
            }
            AsyncEvent::CommEstablished { .. } => {}
            other => tracing::warn!(event = ?other, device = %self.name(), "rdma async event"),
        }
    }
}

/// The READ depth a queue pair on a device with `attr` asks for.
fn read_depth(large_in_flight: u32, attr: &corewire_verbs::DeviceAttr) -> u8 {
    let depth = large_in_flight
        .min(attr.max_qp_rd_atom)
        .min(attr.max_qp_init_rd_atom)
        .max(1);
    u8::try_from(depth).unwrap_or(u8::MAX)
}
