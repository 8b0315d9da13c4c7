//! The RDMA transport: per-shard verbs resources, a completion-queue poller with polling,
//! event and adaptive modes, rdma_cm connection setup with a shard handoff, credit flow
//! control, and [`RdmaConnection`], which implements the same
//! [`Connection`](crate::Connection) interface as TCP.
//!
//! # How it works
//!
//! On each device it uses, a shard owns one CQ shared by its queue pairs (grown with
//! `ibv_resize_cq` as connections arrive), a completion channel, a registered buffer pool
//! (fixed-size chunks carved from a few memory regions) and a shared receive queue, plus one
//! rdma_cm event channel. The CQ
//! poller runs in one of three modes (`RdmaConfig::mode`, switchable at run time with
//! `rdma::set_mode`):
//!
//! - `polling` — busy-poll the CQ every loop iteration (optionally yielding the CPU when empty);
//! - `event` — arm the CQ and wait on the completion channel fd through the shard's own ring
//!   (one multishot poll stays armed on it, `io::ReadableEvents`; a poll per wake-up on kernels
//!   without), then drain; the tasks those completions woke run (and post their sends) before
//!   the channel is read and the CQ re-armed and polled once more (the CQE brpc once lost), so
//!   neither syscall sits between a wake-up and the reply it sends; CQ events are acknowledged
//!   32 at a time;
//! - `adaptive` — poll while completions keep coming, arm and sleep after an idle spin.
//!
//! With `RdmaConfig::solicited_wakeups` (off by default; `rdma_perf --solicited on`) every message
//! is sent solicited and the CQ is armed for solicited completions only while nothing waits for a
//! send to complete, so a request's own send completion wakes nobody and a round trip costs one
//! wake-up instead of two (`tests/rdma_transport.rs` pins it: 101 events for 200 completions,
//! 189 without). A failed send raises no event then: the CQ is swept every 50 ms while armed that
//! way with connections open, which is also the idle cost (20 wake-ups a second).
//!
//! Connections are RC queue pairs set up with rdma_cm; a listener hands each connect request to
//! a shard picked by the same placement policies as TCP (least-connections by default), which
//! migrates the id to its own event channel and creates the QP on its own CQ. Messages go as
//! SEND/RECV through the pool, large frames split across buffers, with credit-based flow control
//! (a reader that falls behind stops granting credits). By default every connection of a shard
//! receives into its shared receive queue (`ReceiveQueues::Shared`, 256 buffers, refilled by the
//! poller and early on the queue's limit event): credits are granted from that shared budget, so a
//! connection costs no receive memory — `tests/rdma_scale.rs` runs 1,000 connections on one
//! shard with the default 3 MiB pool. `ReceiveQueues::PerConnection` gives each connection
//! `window + 3` buffers of its own instead (a sender then never overruns them; with the shared
//! queue a burst past the budget is retried by the sender's hardware, never lost).
//!
//! **Large messages** go without copies: a payload or attachment of at least
//! `RdmaConfig::large_message_threshold` (256 KiB by default; `None` copies everything) is
//! registered where it lies (REMOTE_READ) and only a small descriptor goes down the connection, in
//! its place in the byte stream; the peer RDMA READs it into one buffer of its own, deregisters it
//! and hands it up as the frame's `Bytes`, then sends "done" so the sender deregisters. At most
//! `large_in_flight` (4) per connection are registered on the sender and being read on the
//! receiver (the queue pairs settle on that many RDMA READs in flight each way, within what the
//! devices allow and the connect request offered); a connection that ends drops everything on
//! both sides (`RdmaStats::large_registrations` goes back to 0). `rdma::RegisteredBuf::new(bytes)` registers user memory once (brpc's
//! `RegisterMemoryForRdma`): its `bytes()`, or any slice of them, sent on that shard's
//! connections go by READ from that one registration whatever their size.
//! `tests/rdma_large.rs` covers order and integrity mixed with small frames, `RegisteredBuf`, the
//! registrations going back to zero, and a peer vanishing mid-transfer on either side.
//!
//! **Dead peers:** a send to a peer that died or was cut off fails once its transport retries run
//! out (`RdmaConfig::retry_count`, 6; `ack_timeout`), ending the connection and every call on it.
//! A connection with nothing to send would never learn it (rdma_cm has no keepalive), so
//! `RdmaConfig::keepalive` (5 s by default, `None` off) probes every established connection that
//! completed no work request for a whole interval with a zero-byte RDMA WRITE (no receive buffer,
//! key or CPU on the peer); each shard with open connections wakes once per interval to look.
//! The two-VM fault suite checks that an idle connection ends when its server's VM is killed or
//! its link is cut.
//!
//! **Devices:** by default rdma_cm picks the device of each connection from its addresses, and a
//! shard opens a PD, CQ, pool and shared receive queue on every device it is handed (one process
//! can serve several). `RdmaConfig::device` chooses one instead — by name
//! (`DeviceSelector::Name("mlx5_0")`), network device (`Netdev("eth1")`) or IP address — with
//! `port` and `gid_index` (the GID whose address connections resolve from and wildcard listeners
//! bind, as containers need); a choice that is not there fails at `install` with the devices,
//! ports and GIDs that are.
//!
//! **Memory:** the default pool is 3 MiB of registered memory per shard, sized so two shards fit
//! Debian's default `RLIMIT_MEMLOCK` of 8 MiB. A bigger `RdmaConfig::pool_bytes` needs a higher
//! limit (`ulimit -l`); registration failures end only the connection that needed the memory,
//! with an error naming the limit. The test VM runs with `ulimit -l unlimited`. Receive buffers
//! never take the last window's worth of the pool: a sender that finds every buffer in use waits
//! for one to come back (`pool_waits` counts it), and a connection whose receive buffers, or
//! whose queue pair's entries in the shard's completion queue (`RdmaConfig::cq_entries`), do not
//! fit is refused, the client's error carrying the server's reason. `tests/rdma_memlock.rs` checks
//! this for real in the VM: it runs itself again as `nobody` (root's `CAP_IPC_LOCK` ignores the
//! limit) under `ulimit -l 1024`; the server's pool grows until registering the next 64 KiB
//! fails, that connection is refused with `RLIMIT_MEMLOCK is 1048576 bytes` in its error, and the
//! 27 opened before it keep working.
//!
//! **TCP fallback** (off by default): `Client::connect_rdma_or_tcp` with
//! `ClientOptions::tcp_fallback` set connects over TCP to that address when RDMA set-up fails —
//! no device or transport on this host, address or route unresolvable, the server refusing — and
//! the client carries on over the same `Connection` interface (`RdmaOrTcp`; its `kind()` says
//! which). Each fallback logs a warning with the RDMA error and counts in `rdma::tcp_fallbacks`;
//! a connection that fails after it was established does not fall back. Tests:
//! `tests/rdma_fallback.rs` (refused, unreachable, in the VM), `tests/tcp_fallback.rs` (a host
//! without a device).
//!
//! `rdma_perf` (like brpc's `rdma_performance`) measures it:
//! `cargo build --release --example rdma_perf && cargo xtask vm -- vm/bench/rdma-bench.sh`.
//! Its bandwidth mode (`--bandwidth on`: requests of `--size` bytes, empty replies, 16 in flight)
//! reports one-way MiB/s beside perftest's `ib_send_bw -R` and `ib_write_bw -R` at 64 KiB–1 MiB:
//! `cargo build --release --example rdma_perf && cargo xtask vm -- vm/bench/rdma-bw.sh`.
//! The fairness layout (8 hot connections × depth 256 + a depth-1 probe on one server shard,
//! budgets unlimited to 4) over RDMA: `benches/run.sh rdma-fairness` (or
//! `cargo build --release --example rdma_fairness && cargo xtask vm -- vm/bench/rdma-fairness.sh`).

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

/// Whether the transport is installed on the shard this is called on (a process that
/// needs RDMA only sometimes installs it on first use with [`install_async`]).
pub fn installed_here() -> bool {
    RdmaShard::current().is_ok()
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
