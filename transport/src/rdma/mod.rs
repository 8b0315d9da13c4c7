//! The RDMA transport: per-shard verbs resources, a completion-queue poller with polling,
//! event and adaptive modes, rdma_cm connection setup with a shard handoff, credit flow
//! control, and [`RdmaConnection`], which implements the same
//! [`Connection`](crate::Connection) interface as TCP.

mod cm_events;
mod config;
mod conn;
mod connect;
mod cq_slots;
mod credits;
mod device;
mod error;
mod establish;
mod fallback;
mod flow;
mod grants;
mod handshake;
mod keepalive;
mod large;
mod listen;
mod poll_tally;
mod poller;
mod pool;
mod select;
mod shard;
mod wakeups;
mod wr_id;

use corewire_runtime::{assert_can_block, shard_count, submit_to, Runtime};

pub use config::{PollerMode, RdmaConfig, ReceiveQueues};
pub use conn::RdmaConnection;
pub use connect::connect;
pub use cq_slots::CqFull;
pub use error::{RdmaError, Rejection};
pub use fallback::{
    connect_or_tcp, tcp_fallbacks, tcp_fallbacks_async, FallbackError, RdmaOrTcp, TcpFallback,
};
pub use handshake::HandshakeError;
pub use large::registered::RegisteredBuf;
pub use listen::{RdmaAccepted, RdmaEndpoint};
pub use pool::PoolError;
pub use select::{DeviceSelector, SelectError};
pub use shard::RdmaStats;

use shard::RdmaShard;

/// Create each shard's RDMA resources (device context, PD, CQ + completion channel, buffer
/// pool, rdma_cm channel) and register its CQ poller. Fails with a clear error when there is
/// no RDMA device.
///
/// # Panics
/// On a shard thread, where it would block the shard: await [`install_async`] there.
#[track_caller]
pub fn install(rt: &Runtime, config: RdmaConfig) -> Result<(), RdmaError> {
    assert_can_block("rdma::install");
    for h in rt.spawn_on_all(move |_| {
        let config = config.clone();
        async move { RdmaShard::install(config).map(|_| ()) }
    }) {
        h.wait().map_err(|e| RdmaError::Shard(e.into()))??;
    }
    Ok(())
}

/// [`install`] from a shard: every shard of the current runtime, awaited. Panics off a shard.
pub async fn install_async(config: RdmaConfig) -> Result<(), RdmaError> {
    for shard in 0..shard_count() {
        let config = config.clone();
        submit_to(shard, move || async move {
            RdmaShard::install(config).map(|_| ())
        })
        .await
        .map_err(RdmaError::Shard)??;
    }
    Ok(())
}

/// Change the poller mode of every shard (takes effect on each shard's next iteration).
///
/// # Panics
/// On a shard thread, where it would block the shard: await [`set_mode_async`] there.
#[track_caller]
pub fn set_mode(rt: &Runtime, mode: PollerMode) -> Result<(), RdmaError> {
    assert_can_block("rdma::set_mode");
    for h in rt.spawn_on_all(move |_| async move { RdmaShard::current()?.set_mode(mode) }) {
        h.wait().map_err(|e| RdmaError::Shard(e.into()))??;
    }
    Ok(())
}

/// [`set_mode`] from a shard: every shard of the current runtime, awaited. Panics off a
/// shard.
pub async fn set_mode_async(mode: PollerMode) -> Result<(), RdmaError> {
    for shard in 0..shard_count() {
        submit_to(shard, move || async move {
            RdmaShard::current()?.set_mode(mode)
        })
        .await
        .map_err(RdmaError::Shard)??;
    }
    Ok(())
}

/// Each shard's RDMA counters.
///
/// # Panics
/// On a shard thread, where it would block the shard: await [`stats_async`] there (or read
/// [`stats_here`]).
#[track_caller]
pub fn stats(rt: &Runtime) -> Vec<RdmaStats> {
    assert_can_block("rdma::stats");
    rt.spawn_on_all(|_| async { stats_here() })
        .into_iter()
        .map(|h| h.wait().unwrap_or_default())
        .collect()
}

/// [`stats`] from a shard: each shard's counters, in shard order. Panics off a shard.
pub async fn stats_async() -> Vec<RdmaStats> {
    let mut all = Vec::with_capacity(shard_count());
    for shard in 0..shard_count() {
        all.push(
            submit_to(shard, || async { stats_here() })
                .await
                .unwrap_or_default(),
        );
    }
    all
}

/// The counters of the shard this is called on (all zero where the transport is not
/// installed).
pub fn stats_here() -> RdmaStats {
    RdmaShard::current().map(|s| s.stats()).unwrap_or_default()
}

/// Free this runtime's RDMA resources (every connection must be closed first). Nothing calls
/// it for you: call it before `Runtime::shutdown` to free device objects in order (otherwise
/// they go with each shard thread's thread-locals).
///
/// # Panics
/// On a shard thread, where it would block the shard: await [`uninstall_async`] there.
#[track_caller]
pub fn uninstall(rt: &Runtime) {
    assert_can_block("rdma::uninstall");
    for h in rt.spawn_on_all(|_| async { shard::uninstall() }) {
        let _ = h.wait();
    }
}

/// [`uninstall`] from a shard: every shard of the current runtime, awaited. Panics off a
/// shard.
pub async fn uninstall_async() {
    for shard in 0..shard_count() {
        let _ = submit_to(shard, || async { shard::uninstall() }).await;
    }
}
