//! What one shard owns for RDMA: the device context and protection domain, ONE completion
//! queue shared by all its queue pairs (as SPDK's poll groups), its completion channel, its
//! registered buffer pool, its connection table and its rdma_cm event channel.

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::os::fd::AsRawFd;
use std::rc::{Rc, Weak};

use corewire_runtime::driver::op::poll_add::PollAdd;
use corewire_runtime::{register_poller, spawn_local, Op};
use corewire_verbs::{
    CmEventChannel, CompletionChannel, CompletionQueue, Context, ProtectionDomain,
};
use slab::Slab;

use super::cm_events::{run_router, CmRouter};
use super::conn::ConnCore;
use super::cq_slots::{CqFull, CqSlots};
use super::poller::CqPoller;
use super::pool::BufferPool;
use super::{PollerMode, RdmaConfig, RdmaError};

/// Counters of a shard's RDMA transport.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct RdmaStats {
    pub cq_polls: u64,
    pub completions: u64,
    pub cq_events: u64,
    pub acks_sent: u64,
    /// Times a sender had to wait for credits.
    pub credit_waits: u64,
    pub connections_opened: u64,
    pub connections_open: u64,
    pub connection_errors: u64,
    /// Adaptive mode: switches between spinning and sleeping on the completion channel.
    pub mode_switches: u64,
    pub pool_registered_bytes: u64,
    pub pool_free_chunks: u64,
    /// Chunks held as receive buffers, and lent to sends in flight.
    pub pool_recv_chunks: u64,
    pub pool_send_chunks: u64,
    /// Times a sender found every send buffer in use and waited for one.
    pub pool_waits: u64,
    /// Completion queue entries, and those reserved by open queue pairs.
    pub cq_capacity: u64,
    pub cq_reserved: u64,
    /// Connections refused (buffers or CQ entries exhausted, set-up failures).
    pub connections_refused: u64,
}

pub(crate) struct RdmaShard {
    pub config: Cell<RdmaConfig>,
    pub ctx: Context,
    pub pd: ProtectionDomain,
    pub channel: CompletionChannel,
    pub cq: CompletionQueue,
    pub pool: RefCell<BufferPool>,
    /// Connections waiting for a send buffer, in arrival order.
    send_waiters: RefCell<VecDeque<(u32, u16)>>,
    cq_slots: RefCell<CqSlots>,
    conns: RefCell<Slab<(u16, Weak<ConnCore>)>>,
    generation: Cell<u16>,
    pub cm_channel: CmEventChannel,
    pub cm: Rc<CmRouter>,
    /// Set by the completion-channel task when the CQ signalled an event.
    pub event_pending: Cell<bool>,
    pub stats: RefCell<RdmaStats>,
}

thread_local! {
    static SHARD: RefCell<Option<Rc<RdmaShard>>> = const { RefCell::new(None) };
}

impl RdmaShard {
    /// This shard's RDMA resources, if the transport is installed on it.
    pub fn current() -> Result<Rc<RdmaShard>, RdmaError> {
        SHARD
            .with(|s| s.borrow().clone())
            .ok_or(RdmaError::NotInstalled)
    }

    /// Create the shard's resources and start its poller and event tasks.
    pub fn install(config: RdmaConfig) -> Result<Rc<RdmaShard>, RdmaError> {
        if let Some(existing) = SHARD.with(|s| s.borrow().clone()) {
            existing.config.set(config);
            return Ok(existing);
        }
        let ctx = Context::from_rdma_cm(None).map_err(RdmaError::Device)?;
        let pd = ProtectionDomain::new(&ctx).map_err(RdmaError::Device)?;
        let channel = CompletionChannel::new(&ctx).map_err(RdmaError::Device)?;
        let cq = CompletionQueue::new(&ctx, config.cq_entries, Some(&channel))
            .map_err(RdmaError::Device)?;
        // Receive buffers never take the last window's worth of chunks: one connection can
        // always stream at its full window, and every sender can wait for a buffer.
        let pool = BufferPool::new(
            pd.clone(),
            config.chunk_size,
            config.slab_bytes,
            config.pool_bytes,
            config.window as usize,
        );
        let cm_channel = CmEventChannel::new().map_err(RdmaError::Device)?;
        let cq_capacity = cq.capacity();
        let shard = Rc::new(RdmaShard {
            config: Cell::new(config),
            ctx,
            pd,
            channel,
            cq,
            pool: RefCell::new(pool),
            send_waiters: RefCell::new(VecDeque::new()),
            cq_slots: RefCell::new(CqSlots::new(cq_capacity)),
            conns: RefCell::new(Slab::new()),
            generation: Cell::new(0),
            cm_channel,
            cm: Rc::new(CmRouter::default()),
            event_pending: Cell::new(false),
            stats: RefCell::new(RdmaStats::default()),
        });
        if !matches!(config.mode, PollerMode::Polling { .. }) {
            shard.cq.req_notify(false).map_err(RdmaError::Device)?;
        }
        spawn_local(run_router(shard.cm_channel.clone(), shard.cm.clone()));
        spawn_local(wait_for_cq_events(Rc::downgrade(&shard)));
        register_poller(Box::new(CqPoller::new(shard.clone())));
        SHARD.with(|s| *s.borrow_mut() = Some(shard.clone()));
        tracing::info!(device = %shard.ctx.device_name(), mode = ?config.mode, "rdma transport installed");
        Ok(shard)
    }

    /// Switch the poller mode of this shard.
    pub fn set_mode(&self, mode: PollerMode) -> Result<(), RdmaError> {
        let mut c = self.config.get();
        c.mode = mode;
        self.config.set(c);
        if !matches!(mode, PollerMode::Polling { .. }) {
            self.cq.req_notify(false).map_err(RdmaError::Device)?;
        }
        Ok(())
    }

    pub fn add_conn(&self, make: impl FnOnce(u32, u16) -> Rc<ConnCore>) -> Rc<ConnCore> {
        let generation = self.generation.get().wrapping_add(1);
        self.generation.set(generation);
        let mut conns = self.conns.borrow_mut();
        let entry = conns.vacant_entry();
        let slot = entry.key() as u32;
        let conn = make(slot, generation);
        entry.insert((generation, Rc::downgrade(&conn)));
        let mut st = self.stats.borrow_mut();
        st.connections_opened += 1;
        st.connections_open += 1;
        conn
    }

    pub fn remove_conn(&self, slot: u32, generation: u16) {
        let mut conns = self.conns.borrow_mut();
        if conns
            .get(slot as usize)
            .is_some_and(|(g, _)| *g == generation)
        {
            conns.remove(slot as usize);
            self.stats.borrow_mut().connections_open -= 1;
        }
    }

    pub fn stats(&self) -> RdmaStats {
        let pool = self.pool.borrow();
        let cq = self.cq_slots.borrow();
        RdmaStats {
            pool_registered_bytes: pool.registered_bytes() as u64,
            pool_free_chunks: pool.free_chunks() as u64,
            pool_recv_chunks: pool.recv_in_use() as u64,
            pool_send_chunks: pool.send_in_use() as u64,
            cq_capacity: u64::from(cq.capacity()),
            cq_reserved: u64::from(cq.in_use()),
            ..*self.stats.borrow()
        }
    }

    /// Reserve CQ entries for a queue pair that can post `n` work requests at once.
    pub fn reserve_cq(self: &Rc<Self>, n: u32) -> Result<CqReservation, CqFull> {
        self.cq_slots.borrow_mut().reserve(n)?;
        Ok(CqReservation {
            shard: Rc::downgrade(self),
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

    /// Queue a connection's writer for the next send buffer that comes back.
    pub fn wait_for_send_buffer(&self, slot: u32, generation: u16) {
        let mut w = self.send_waiters.borrow_mut();
        if !w.contains(&(slot, generation)) {
            w.push_back((slot, generation));
        }
    }

    /// A send buffer came back: wake the first live connection waiting for one.
    pub fn send_buffer_freed(&self) {
        loop {
            let Some((slot, generation)) = self.send_waiters.borrow_mut().pop_front() else {
                return;
            };
            match self.conn(slot, generation) {
                Some(conn) if !conn.is_ended() => {
                    conn.wake_writer();
                    return;
                }
                _ => {}
            }
        }
    }

    pub fn conn(&self, slot: u32, generation: u16) -> Option<Rc<ConnCore>> {
        let conns = self.conns.borrow();
        match conns.get(slot as usize) {
            Some((g, c)) if *g == generation => c.upgrade(),
            _ => None,
        }
    }
}

/// CQ entries held for one queue pair; given back when it drops (after the next drain, as
/// the destroyed queue pair's flushed completions may still be queued).
pub(crate) struct CqReservation {
    shard: Weak<RdmaShard>,
    n: u32,
    /// Whether a queue pair was created on it (else its entries are free at once).
    used: bool,
}

impl CqReservation {
    pub fn mark_used(&mut self) {
        self.used = true;
    }
}

impl Drop for CqReservation {
    fn drop(&mut self) {
        let Some(shard) = self.shard.upgrade() else {
            return;
        };
        let mut slots = shard.cq_slots.borrow_mut();
        if self.used {
            slots.release(self.n);
            // Event mode: make the poller drain (and so free these entries) soon.
            shard.event_pending.set(true);
        } else {
            slots.cancel(self.n);
        }
    }
}

/// Turn completion-channel readiness into `event_pending` for the poller.
async fn wait_for_cq_events(shard: Weak<RdmaShard>) {
    let fd = match shard.upgrade() {
        Some(s) => s.channel.as_raw_fd(),
        None => return,
    };
    loop {
        if let Err(e) = Op::submit(PollAdd::readable(fd)).await {
            tracing::error!(error = %e, "waiting on the completion channel failed");
            corewire_runtime::sleep(std::time::Duration::from_millis(10)).await;
            continue;
        }
        let Some(shard) = shard.upgrade() else { return };
        let mut got = false;
        loop {
            match shard.channel.get_cq_event() {
                Ok(Some(_)) => got = true,
                Ok(None) => break,
                Err(e) => {
                    tracing::error!(error = %e, "ibv_get_cq_event failed");
                    break;
                }
            }
        }
        if got {
            shard.event_pending.set(true);
            shard.stats.borrow_mut().cq_events += 1;
        }
    }
}

/// Drop this shard's RDMA state (the runtime drops tasks and pollers at shutdown; this
/// releases the thread-local handle so the device objects are freed in order).
pub(crate) fn uninstall() {
    SHARD.with(|s| s.borrow_mut().take());
}
