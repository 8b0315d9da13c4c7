//! What one shard owns for RDMA: its settings, the devices it has opened ([`Device`]: PD,
//! CQ, pool and shared receive queue per device), its connection table, its rdma_cm event
//! channel, and its counters.

use std::cell::{Cell, RefCell};
use std::net::SocketAddr;
use std::rc::{Rc, Weak};
use std::time::Instant;

use corewire_runtime::protocol_error::{LogSampler, Sample, LOG_LINES_PER_WINDOW, LOG_WINDOW};
use corewire_runtime::spawn_local;
use corewire_verbs::{CmEventChannel, Context, VerbsError};
use slab::Slab;

use super::cm_events::{run_router, CmRouter};
use super::conn::ConnCore;
use super::device::Device;
use super::large::registered::UserRegions;
use super::select::{select, DeviceSelector, SelectError, Selected};
use super::{PollerMode, RdmaConfig, RdmaError};

/// Counters of a shard's RDMA transport (summed over the devices it uses).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct RdmaStats {
    /// Completion queue polls.
    pub cq_polls: u64,
    /// Work completions handled.
    pub completions: u64,
    /// Completion channel events (event and adaptive modes).
    pub cq_events: u64,
    /// Credit acknowledgements sent.
    pub acks_sent: u64,
    /// Keepalive probes posted (connections idle for a whole `RdmaConfig::keepalive`).
    pub keepalives_sent: u64,
    /// Times a sender had to wait for credits.
    pub credit_waits: u64,
    /// Messages posted straight from the sending task (an idle connection: no writer-task
    /// hop), out of all data messages.
    pub sends_inline: u64,
    /// Connections set up.
    pub connections_opened: u64,
    /// Connections open now.
    pub connections_open: u64,
    /// Connections ended by an error.
    pub connection_errors: u64,
    /// Adaptive mode: switches between spinning and sleeping on the completion channel.
    pub mode_switches: u64,
    /// Bytes of the pool registered.
    pub pool_registered_bytes: u64,
    /// Chunks of the pool free.
    pub pool_free_chunks: u64,
    /// Chunks held as receive buffers, and lent to sends in flight.
    pub pool_recv_chunks: u64,
    /// Chunks lent to sends in flight.
    pub pool_send_chunks: u64,
    /// Times a sender found every send buffer in use and waited for one.
    pub pool_waits: u64,
    /// Completion queue entries, and those reserved by open queue pairs.
    pub cq_capacity: u64,
    /// Entries reserved by open queue pairs.
    pub cq_reserved: u64,
    /// Connections refused (buffers or CQ entries exhausted, set-up failures).
    pub connections_refused: u64,
    /// Devices this shard has opened.
    pub devices: u64,
    /// Buffers posted on the shared receive queues, and the grants peers hold against them.
    pub srq_posted: u64,
    /// Grants peers hold against the shared receive queues.
    pub srq_grants_outstanding: u64,
    /// Shared receive queue limit events (the poller fell behind; refilled early).
    pub srq_limit_events: u64,
    /// Polls armed on completion channels: one per device for as long as a multishot poll
    /// serves every event (else one per event).
    pub cq_channel_arms: u64,
    /// Times the CQ was armed for solicited completions only (`RdmaConfig::solicited_wakeups`).
    pub solicited_arms: u64,
    /// The most receive completions one connection got in one pass of the CQ poller
    /// (bounded by `RdmaConfig::poll_batch` in polling mode and by the connection's credit
    /// window; not by the fairness budget, which applies when frames are handed up).
    pub max_conn_recvs_per_poll: u64,
    /// The most frames one connection's `recv` handed up in one budget round (between two
    /// yields or waits): at most the budget's message limit.
    pub max_round_frames: u64,
    /// Large messages sent by descriptor, and received by RDMA READ.
    pub large_sent: u64,
    /// Large messages received.
    pub large_received: u64,
    /// Of `large_sent`, those sent from a `RegisteredBuf` (no registration of their own).
    pub large_sent_registered: u64,
    /// Registrations made for single large messages that are still alive (sender side until
    /// the peer's "done", receiver side until the read completes), and their bytes: back to
    /// 0 once transfers finish or their connections end.
    pub large_registrations: u64,
    /// Bytes registered for large messages now.
    pub large_registered_bytes: u64,
    /// Large messages sent by copy because registering them failed (RLIMIT_MEMLOCK, say).
    pub large_copied: u64,
    /// Live [`RegisteredBuf`](super::RegisteredBuf)s made on this shard.
    pub registered_bufs: u64,
}

pub(crate) struct RdmaShard {
    /// The device, port and source address chosen by `RdmaConfig::device` (all `None`:
    /// rdma_cm picks per connection).
    pub selected: Selected,
    config: RefCell<Rc<RdmaConfig>>,
    mode: Cell<PollerMode>,
    devices: RefCell<Vec<Rc<Device>>>,
    conns: RefCell<Slab<(u16, Weak<ConnCore>)>>,
    generation: Cell<u16>,
    pub cm_channel: CmEventChannel,
    pub cm: Rc<CmRouter>,
    pub stats: RefCell<RdmaStats>,
    /// Refused connections are logged as a sample.
    refusals: RefCell<LogSampler>,
    /// The `RegisteredBuf`s of this shard, by address: a part sent on a connection is looked
    /// up here.
    pub user_regions: UserRegions,
}

corewire_runtime::shard_local! {
    /// This shard's RDMA resources, once installed.
    static SHARD: RefCell<Option<Rc<RdmaShard>>> = RefCell::new(None);
}

impl RdmaShard {
    /// This shard's RDMA resources, if the transport is installed on it.
    pub fn current() -> Result<Rc<RdmaShard>, RdmaError> {
        SHARD
            .try_with(|s| s.borrow().clone())
            .flatten()
            .ok_or(RdmaError::NotInstalled)
    }

    /// Create the shard's state and open the first device (so a missing device is reported
    /// at install, not at the first connection).
    pub fn install(config: RdmaConfig) -> Result<Rc<RdmaShard>, RdmaError> {
        if let Some(existing) = SHARD.with(|s| s.borrow().clone()) {
            existing.mode.set(config.mode);
            *existing.config.borrow_mut() = Rc::new(config);
            return Ok(existing);
        }
        let selected = choose_device(&config)?;
        let ctx = Context::from_rdma_cm(selected.device.as_deref()).map_err(|e| match e {
            // Say what is there instead.
            VerbsError::NoDevice { .. } => match corewire_verbs::list_devices() {
                Ok(present) => RdmaError::NoSuchDevice(Box::new(SelectError {
                    wanted: match &selected.device {
                        Some(n) => format!("rdma_cm has no device named {n:?}"),
                        None => "no RDMA device found".into(),
                    },
                    present,
                })),
                Err(_) => RdmaError::Device(e),
            },
            e => RdmaError::Device(e),
        })?;
        let cm_channel = CmEventChannel::new().map_err(RdmaError::Device)?;
        let shard = Rc::new(RdmaShard {
            selected,
            mode: Cell::new(config.mode),
            config: RefCell::new(Rc::new(config)),
            devices: RefCell::new(Vec::new()),
            conns: RefCell::new(Slab::new()),
            generation: Cell::new(0),
            cm_channel,
            cm: Rc::new(CmRouter::default()),
            stats: RefCell::new(RdmaStats::default()),
            refusals: RefCell::new(LogSampler::new(LOG_LINES_PER_WINDOW, LOG_WINDOW)),
            user_regions: UserRegions::default(),
        });
        shard.device(ctx)?;
        spawn_local(run_router(shard.cm_channel.clone(), shard.cm.clone()));
        if let Some(interval) = shard.config().keepalive {
            spawn_local(super::keepalive::sweep(Rc::downgrade(&shard), interval));
        }
        SHARD.with(|s| *s.borrow_mut() = Some(shard.clone()));
        tracing::info!(mode = ?shard.mode.get(), "rdma transport installed");
        Ok(shard)
    }

    pub fn config(&self) -> Rc<RdmaConfig> {
        self.config.borrow().clone()
    }

    pub fn mode(&self) -> PollerMode {
        self.mode.get()
    }

    /// This shard's resources on `ctx`'s device, opened on first use. With a device
    /// chosen in the settings, any other is refused (a route that leaves it).
    pub fn device(self: &Rc<Self>, ctx: Context) -> Result<Rc<Device>, RdmaError> {
        let name = ctx.device_name();
        if let Some(chosen) = &self.selected.device {
            if *chosen != name {
                return Err(RdmaError::connect(format!(
                    "rdma_cm resolved this connection to device {name:?}, not the chosen                      {chosen:?} (RdmaConfig::device): the peer is not reachable from it"
                )));
            }
        }
        if let Some(d) = self.devices.borrow().iter().find(|d| d.name() == name) {
            return Ok(d.clone());
        }
        let device = Device::open(self, ctx, &self.config())?;
        self.devices.borrow_mut().push(device.clone());
        Ok(device)
    }

    /// The devices this shard has opened.
    pub fn devices(&self) -> Vec<Rc<Device>> {
        self.devices.borrow().clone()
    }

    /// Switch the poller mode of this shard.
    pub fn set_mode(&self, mode: PollerMode) -> Result<(), RdmaError> {
        self.mode.set(mode);
        let mut c = (*self.config()).clone();
        c.mode = mode;
        *self.config.borrow_mut() = Rc::new(c);
        if !matches!(mode, PollerMode::Polling { .. }) {
            for d in self.devices.borrow().iter() {
                d.arm(false).map_err(RdmaError::Device)?;
            }
        }
        Ok(())
    }

    /// Log a refused connection, as a sample (the caller counts every one).
    pub fn log_refusal(&self, peer: Option<SocketAddr>, why: &RdmaError) {
        if let Sample::Log { suppressed } = self.refusals.borrow_mut().admit(Instant::now()) {
            tracing::warn!(?peer, error = %why, suppressed, "refusing rdma connection");
        }
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
        let mut st = *self.stats.borrow();
        for d in self.devices.borrow().iter() {
            let pool = d.pool.borrow();
            st.pool_registered_bytes += pool.registered_bytes() as u64;
            st.pool_free_chunks += pool.free_chunks() as u64;
            st.pool_recv_chunks += pool.recv_in_use() as u64;
            st.pool_send_chunks += pool.send_in_use() as u64;
            let (cap, used) = d.cq_slots();
            st.cq_capacity += u64::from(cap);
            st.cq_reserved += u64::from(used);
            st.devices += 1;
            st.srq_posted += u64::from(d.srq_posted());
            if let Some(s) = &d.srq {
                st.srq_grants_outstanding += u64::from(s.grants.borrow().outstanding());
            }
        }
        st
    }

    /// Every open connection of the shard.
    pub fn live_conns(&self) -> Vec<Rc<ConnCore>> {
        self.conns
            .borrow()
            .iter()
            .filter_map(|(_, (_, c))| c.upgrade())
            .collect()
    }

    pub fn conn(&self, slot: u32, generation: u16) -> Option<Rc<ConnCore>> {
        let conns = self.conns.borrow();
        match conns.get(slot as usize) {
            Some((g, c)) if *g == generation => c.upgrade(),
            _ => None,
        }
    }
}

/// Resolve `RdmaConfig::device`, `port` and `gid_index` against the host's devices.
fn choose_device(config: &RdmaConfig) -> Result<Selected, RdmaError> {
    if config.device == DeviceSelector::Any && config.port.is_none() && config.gid_index.is_none() {
        return Ok(Selected::default());
    }
    let present = corewire_verbs::list_devices().map_err(RdmaError::Device)?;
    select(&present, &config.device, config.port, config.gid_index)
        .map_err(|e| RdmaError::NoSuchDevice(Box::new(e)))
}

/// Drop this shard's RDMA state (the runtime drops tasks and pollers at shutdown; this
/// releases the shard-local handle so the device objects are freed in order, before the
/// shard's own teardown).
pub(crate) fn uninstall() {
    SHARD.with(|s| s.borrow_mut().take());
}
