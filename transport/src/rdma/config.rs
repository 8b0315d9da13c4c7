use std::time::Duration;

use corewire_runtime::Budget;

use super::select::DeviceSelector;
use crate::frame::FrameLimits;

/// How a shard learns about RDMA completions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum PollerMode {
    /// Busy-poll the completion queue every loop iteration (the shard never sleeps). With
    /// `yield_when_idle`, an empty poll gives the CPU to other threads (brpc's
    /// `rdma_poller_yield`).
    Polling {
        /// Give the CPU away after an empty poll.
        yield_when_idle: bool,
    },
    /// Arm the CQ and wait on the completion channel's fd through the shard's ring; drain,
    /// re-arm and poll once more after every event.
    Event,
    /// Poll while completions keep coming; after `idle` without one, arm the CQ and let the
    /// shard sleep until the next event.
    Adaptive {
        /// How long without a completion before the shard sleeps.
        idle: Duration,
    },
}

impl PollerMode {
    /// Adaptive mode with a 200 µs idle time.
    pub fn adaptive() -> PollerMode {
        PollerMode::Adaptive {
            idle: Duration::from_micros(200),
        }
    }
}

impl std::str::FromStr for PollerMode {
    type Err = String;

    fn from_str(s: &str) -> Result<PollerMode, String> {
        match s {
            "polling" | "poll" => Ok(PollerMode::Polling {
                yield_when_idle: false,
            }),
            "polling-yield" => Ok(PollerMode::Polling {
                yield_when_idle: true,
            }),
            "event" => Ok(PollerMode::Event),
            "adaptive" => Ok(PollerMode::adaptive()),
            other => match other.strip_prefix("adaptive:") {
                Some(us) => us
                    .parse()
                    .map(|us| PollerMode::Adaptive {
                        idle: Duration::from_micros(us),
                    })
                    .map_err(|_| format!("bad adaptive idle time {us:?} (microseconds)")),
                None => Err(format!(
                    "unknown poller mode {other:?} (polling, polling-yield, event, adaptive[:US])"
                )),
            },
        }
    }
}

/// Where a shard's connections receive.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ReceiveQueues {
    /// One shared receive queue per shard and device (the default): `buffers` chunks of the
    /// pool stay posted for every connection together, refilled by the CQ poller (early, on
    /// the queue's limit event, when the poller falls behind), and credits are granted from
    /// that shared budget. Connections then cost no receive memory: a shard holds thousands.
    Shared {
        /// Chunks kept posted on each shared receive queue.
        buffers: u32,
    },
    /// Each connection posts `window + 3` receive buffers of its own.
    PerConnection,
}

impl Default for ReceiveQueues {
    fn default() -> ReceiveQueues {
        ReceiveQueues::Shared { buffers: 256 }
    }
}

/// Settings of the RDMA transport on every shard.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct RdmaConfig {
    /// How the shard's poller waits for completions (default: polling).
    pub mode: PollerMode,
    /// Data messages a peer may send before we return credits (with a shared receive queue,
    /// the most grants one peer holds, as the shard's budget allows).
    pub window: u32,
    /// Where connections receive (default: a shared receive queue per shard).
    pub receive: ReceiveQueues,
    /// Bytes per buffer: the largest single RDMA message. Frames larger than this are split.
    pub chunk_size: usize,
    /// Registered memory per shard, at most (buffers for all its connections). The default
    /// fits the 8 MiB RLIMIT_MEMLOCK with two shards; a bigger pool needs a higher limit.
    pub pool_bytes: usize,
    /// Bytes registered at a time as the pool grows.
    pub slab_bytes: usize,
    /// Completions handled per poll.
    pub poll_batch: usize,
    /// Entries each shard's completion queue starts with; it grows (`ibv_resize_cq`) as
    /// connections need, up to `cq_max_entries` and the device's limit, and a connection
    /// that would not fit is refused.
    pub cq_entries: u32,
    /// The most entries the completion queue grows to (also capped by the device).
    pub cq_max_entries: u32,
    /// Which device, port and GID to use (by default whatever rdma_cm resolves each
    /// connection to; a shard then serves every device it is handed).
    pub device: DeviceSelector,
    /// The device port to use (by default the one rdma_cm resolves to).
    pub port: Option<u8>,
    /// The GID table entry whose address connections resolve from (and listeners bind).
    pub gid_index: Option<u32>,
    /// Frame size limits of each connection.
    pub limits: FrameLimits,
    /// Received bytes a connection buffers before it stops reposting receive buffers (and so
    /// stops granting credits): a reader that falls behind slows its sender, nothing else.
    pub max_rx_buffered: usize,
    /// Bytes queued for sending before `send` waits.
    pub max_queued_bytes: usize,
    /// The fairness budget of each connection.
    pub budget: Budget,
    /// Event and adaptive modes: arm the completion queue for solicited completions only
    /// while nothing waits for a send to complete, so a send's own completion wakes nobody
    /// (the reply that follows does): one wake-up per round trip instead of two. Failed
    /// sends then raise no event: the CQ is drained every 50 ms meanwhile, so an idle shard
    /// with open connections wakes 20 times a second. Off by default.
    pub solicited_wakeups: bool,
    /// Transport retries (0..=7) before a send that the peer never acknowledges fails and
    /// ends the connection: how a connection to a dead or cut-off peer learns it. Asked for
    /// by the connecting side (rdma_cm carries it to the server's queue pair too). Not 7:
    /// soft-RoCE (rxe) retries forever at 7, so a dead peer would never be noticed; at 6 the
    /// budget is 7 ACK timeouts.
    pub retry_count: u8,
    /// The local ACK timeout, as the exponent of 4.096 µs × 2^n (0..=31), set on both ends'
    /// queue pairs; `None` keeps rdma_cm's (for RoCE on Linux 6.1 about 2 s: in the soft-RoCE VM
    /// 6 retries gave up on a dead peer after ~16 s). 16 is ~0.27 s.
    pub ack_timeout: Option<u8>,
    /// Payloads and attachments of at least this many bytes go without copies: the peer
    /// RDMA READs them from where they lie (registered for the occasion) into one buffer
    /// that becomes the received `Bytes` (see `rdma::large`). `None` copies everything
    /// through the send chunks (a [`RegisteredBuf`](super::RegisteredBuf) still goes by
    /// READ). Each large message costs a registration on both sides, a READ round trip and
    /// a "done" more than a SEND: in the soft-RoCE VM it lost to copying at 64 KiB in every
    /// round measured and won at 1 MiB on a quiet machine (BENCHMARKS.md), hence 256 KiB.
    pub large_message_threshold: Option<usize>,
    /// Large messages per connection that the peer may be reading at once: the sender keeps
    /// that many registered at most (then waits), the receiver reads that many at most (the
    /// rest wait their turn). Each takes a slot of the send queue on the reading side.
    pub large_in_flight: u32,
    /// A connection that completed nothing for this long sends a keepalive probe (a zero-byte
    /// RDMA WRITE: no receive buffer or CPU on the peer), so that a peer that died or was cut
    /// off while nothing was being sent is noticed once the probe's transport retries run
    /// out (`retry_count`, `ack_timeout`), and every pending call then fails. `None`: no
    /// probes (a dead peer then goes unnoticed until something is sent). Each shard with
    /// open connections wakes once per interval to look.
    pub keepalive: Option<Duration>,
}

impl Default for RdmaConfig {
    fn default() -> RdmaConfig {
        RdmaConfig {
            mode: PollerMode::Polling {
                yield_when_idle: false,
            },
            window: 16,
            receive: ReceiveQueues::default(),
            chunk_size: 8 * 1024,
            pool_bytes: 3 << 20,
            slab_bytes: 512 << 10,
            poll_batch: 32,
            cq_entries: 4096,
            cq_max_entries: u32::MAX,
            device: DeviceSelector::Any,
            port: None,
            gid_index: None,
            limits: FrameLimits::default(),
            max_rx_buffered: 1 << 20,
            max_queued_bytes: 4 << 20,
            budget: Budget::default(),
            solicited_wakeups: false,
            retry_count: 6,
            ack_timeout: None,
            large_message_threshold: Some(256 << 10),
            large_in_flight: 4,
            keepalive: Some(Duration::from_secs(5)),
        }
    }
}
