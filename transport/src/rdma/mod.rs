//! The RDMA transport: per-shard verbs resources, a completion-queue poller with polling,
//! event and adaptive modes, rdma_cm connection setup with a shard handoff, credit flow
//! control, and [`RdmaConnection`], which implements the same
//! [`Connection`](crate::Connection) interface as TCP.

mod cm_events;
mod config;
mod conn;
mod connect;
mod cq_slots;
pub mod credits;
mod device;
mod establish;
mod fallback;
pub mod flow;
pub mod grants;
pub mod handshake;
mod keepalive;
pub mod large;
mod listen;
mod poll_tally;
mod poller;
mod pool;
pub mod select;
mod shard;
mod wakeups;
pub mod wr_id;

use std::fmt;

use corewire_runtime::Runtime;
use corewire_verbs::VerbsError;

pub use config::{PollerMode, RdmaConfig, ReceiveQueues};
pub use conn::RdmaConnection;
pub use connect::connect;
pub use cq_slots::CqFull;
pub use fallback::{connect_or_tcp, tcp_fallbacks, FallbackError, RdmaOrTcp, TcpFallback};
pub use large::registered::RegisteredBuf;
pub use listen::{RdmaAccepted, RdmaEndpoint};
pub use pool::PoolError;
pub use select::DeviceSelector;
pub use shard::RdmaStats;

use shard::RdmaShard;

/// Why an RDMA operation failed.
#[derive(Debug)]
pub enum RdmaError {
    /// `install` was not called on this runtime.
    NotInstalled,
    /// A verbs or rdma_cm call failed (no device, memory registration, ...).
    Device(VerbsError),
    Pool(PoolError),
    /// The device, port or GID asked for is not there (the error lists what is).
    NoSuchDevice(Box<select::SelectError>),
    /// The shard's completion queue has no room for another queue pair.
    CqFull(CqFull),
    Handshake(handshake::HandshakeError),
    /// The server refused the connection; its reason, when it gave one.
    Rejected(String),
    /// Connection set-up failed (resolution, rejection, timeout, ...).
    Connect(String),
}

impl fmt::Display for RdmaError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RdmaError::NotInstalled => f.write_str(
                "the RDMA transport is not installed on this shard (call rdma::install(&runtime, config))",
            ),
            RdmaError::Device(e) => write!(f, "rdma: {e}"),
            RdmaError::Pool(e) => write!(f, "{e}"),
            RdmaError::NoSuchDevice(e) => write!(f, "rdma: {e}"),
            RdmaError::CqFull(e) => write!(f, "{e}"),
            RdmaError::Rejected(why) => write!(f, "rdma connection rejected by the server: {why}"),
            RdmaError::Handshake(e) => write!(f, "rdma handshake: {e}"),
            RdmaError::Connect(e) => write!(f, "rdma connect: {e}"),
        }
    }
}

impl std::error::Error for RdmaError {}

/// Create each shard's RDMA resources (device context, PD, CQ + completion channel, buffer
/// pool, rdma_cm channel) and register its CQ poller. Fails with a clear error when there is
/// no RDMA device.
pub fn install(rt: &Runtime, config: RdmaConfig) -> Result<(), RdmaError> {
    for h in rt.spawn_on_all(move |_| {
        let config = config.clone();
        async move { RdmaShard::install(config).map(|_| ()) }
    }) {
        h.wait().map_err(|e| RdmaError::Connect(e.to_string()))??;
    }
    // Release the thread-local handles at shutdown so device objects are freed in order.
    Ok(())
}

/// Change the poller mode of every shard (takes effect on each shard's next iteration).
pub fn set_mode(rt: &Runtime, mode: PollerMode) -> Result<(), RdmaError> {
    for h in rt.spawn_on_all(move |_| async move { RdmaShard::current()?.set_mode(mode) }) {
        h.wait().map_err(|e| RdmaError::Connect(e.to_string()))??;
    }
    Ok(())
}

/// Each shard's RDMA counters.
pub fn stats(rt: &Runtime) -> Vec<RdmaStats> {
    rt.spawn_on_all(|_| async { RdmaShard::current().map(|s| s.stats()).unwrap_or_default() })
        .into_iter()
        .map(|h| h.wait().unwrap_or_default())
        .collect()
}

/// The counters of the shard this is called on (all zero where the transport is not
/// installed).
pub fn stats_here() -> RdmaStats {
    RdmaShard::current().map(|s| s.stats()).unwrap_or_default()
}

/// Free this runtime's RDMA resources (every connection must be closed first). Nothing calls
/// it for you: call it before `Runtime::shutdown` to free device objects in order (otherwise
/// they go with each shard thread's thread-locals).
pub fn uninstall(rt: &Runtime) {
    for h in rt.spawn_on_all(|_| async { shard::uninstall() }) {
        let _ = h.wait();
    }
}
