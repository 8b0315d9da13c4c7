use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};

/// A counter only its shard increments (others read it): relaxed atomics, no contention.
#[derive(Default)]
pub(crate) struct Counter(AtomicU64);

impl Counter {
    #[inline]
    pub(crate) fn incr(&self) {
        self.add(1);
    }
    #[inline]
    pub(crate) fn add(&self, n: u64) {
        self.0.fetch_add(n, Ordering::Relaxed);
    }
    #[inline]
    pub(crate) fn sub(&self, n: u64) {
        self.0.fetch_sub(n, Ordering::Relaxed);
    }
    #[inline]
    pub(crate) fn set(&self, n: u64) {
        self.0.store(n, Ordering::Relaxed);
    }
    #[inline]
    pub(crate) fn max(&self, n: u64) {
        self.0.fetch_max(n, Ordering::Relaxed);
    }
    #[inline]
    pub(crate) fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

/// How a stat behaves, for exporters: a counter only grows; a gauge goes up and down or is a
/// high-water mark.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum StatKind {
    /// Only grows (exported as a Prometheus counter, `_total`).
    Counter,
    /// Goes up and down, or is a high-water mark.
    Gauge,
}

/// A stat whose documentation starts with "Gauge" or "Most" (a high-water mark) is a gauge;
/// every other one is a counter.
const fn kind_of(doc: &str) -> StatKind {
    const fn starts(d: &[u8], at: usize, p: &[u8]) -> bool {
        if d.len() < at + p.len() {
            return false;
        }
        let mut i = 0;
        while i < p.len() {
            if d[at + i] != p[i] {
                return false;
            }
            i += 1;
        }
        true
    }
    let d = doc.as_bytes();
    let mut at = 0;
    while at < d.len() && d[at] == b' ' {
        at += 1;
    }
    if starts(d, at, b"Gauge") || starts(d, at, b"Most ") {
        StatKind::Gauge
    } else {
        StatKind::Counter
    }
}

// Every stat must be documented (`///`): the documentation is also its exported help text.
macro_rules! shard_stats {
    ($($(#[doc = $doc:literal])+ $name:ident,)*) => {
        /// Per-shard counters, readable from any thread while the shard runs. Only the
        /// runtime writes them: each is read by the method of its name.
        #[derive(Default)]
        pub struct ShardStats {
            $($(#[doc = $doc])+ pub(crate) $name: Counter,)*
        }

        impl ShardStats {
            $(
                $(#[doc = $doc])+
                #[inline]
                pub fn $name(&self) -> u64 {
                    self.$name.get()
                }
            )*
        }

        /// A copy of a shard's counters at one instant: plain data to read (the runtime makes
        /// it; more counters may come, so it cannot be built or destructured outside).
        #[derive(Debug, Default, Clone, PartialEq, Eq)]
        #[non_exhaustive]
        pub struct ShardStatsSnapshot {
            $($(#[doc = $doc])+ pub $name: u64,)*
        }

        impl ShardStats {
            /// Read every counter (each read is atomic; together they are not one instant).
            pub fn snapshot(&self) -> ShardStatsSnapshot {
                ShardStatsSnapshot { $($name: self.$name.get(),)* }
            }
        }

        impl ShardStatsSnapshot {
            /// Every stat as (name, documentation, kind), in the order of
            /// [`values`](ShardStatsSnapshot::values).
            pub const FIELDS: &'static [(&'static str, &'static str, StatKind)] = &[
                $((
                    stringify!($name),
                    concat!($($doc),+),
                    kind_of(concat!($($doc),+)),
                ),)*
            ];

            /// Every stat's value, in the order of [`FIELDS`](ShardStatsSnapshot::FIELDS).
            pub fn values(&self) -> Vec<u64> {
                vec![$(self.$name,)*]
            }
        }

        impl fmt::Display for ShardStatsSnapshot {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                let mut first = true;
                $(
                    if !first { f.write_str(" ")?; }
                    first = false;
                    write!(f, concat!(stringify!($name), "={}"), self.$name)?;
                )*
                let _ = first;
                Ok(())
            }
        }
    };
}

shard_stats! {
    /// Iterations of the shard loop.
    loop_iterations,
    /// Task polls.
    tasks_polled,
    /// Tasks that panicked (each was dropped; the shard carried on).
    task_panics,
    /// Most tasks ever waiting in the run queue at once.
    run_queue_max,
    /// io_uring completions reaped (on epoll: readiness events and finished blocking calls).
    completions,
    /// Times the shard went to sleep in its ring (on epoll: in `epoll_wait`, which also
    /// stands for the reap of the pass before it, so it returns at once where readiness was
    /// already waiting).
    parks,
    /// Idle periods in which the shard polled (spun) before sleeping
    /// (`RuntimeBuilder::spin_before_park`).
    idle_spins,
    /// Those spins that found work before their window ran out.
    idle_spin_hits,
    /// Idle periods that slept at once: the adaptive spin judged a spin would not pay (recent
    /// spins ran out, or the shard was busy most of the time), or spinning is off.
    idle_spins_skipped,
    /// Eventfd writes other threads made to wake this shard.
    wakeups_sent,
    /// Wake-ups other shards posted into this shard's ring with MSG_RING instead of an
    /// eventfd write (`RuntimeBuilder::msg_ring_wakeups`).
    msg_ring_wakeups,
    /// Timers that fired.
    timers_fired,
    /// Registered poller invocations.
    poller_polls,
    /// Pollers that panicked (each was dropped; the shard carried on).
    poller_panics,
    /// Work items (e.g. RDMA completions) pollers reported.
    poller_completions,
    /// Cross-shard messages this shard sent.
    mesh_sent,
    /// Cross-shard messages this shard ran.
    mesh_received,
    /// Times a sender found this shard's inbox full and had to wait.
    mesh_full,
    /// Most messages ever drained from the inbox in one iteration.
    inbox_max,
    /// Connections this shard accepted from its own listener.
    accepted,
    /// Connections an acceptor shard handed to another shard.
    handoffs_out,
    /// Connections this shard received from an acceptor.
    handoffs_in,
    /// Connections open on this shard now.
    open_connections,
    /// Times a connection used up its per-round budget and yielded.
    budget_exhausted,
    /// Connections closed for a protocol error (bad frame, oversize, ...), and calls failed
    /// for bad input on a connection that goes on (a malformed gRPC message or protobuf).
    protocol_errors,
    /// Gauge: live tasks on the shard.
    tasks_live,
    /// Gauge: io_uring operations in flight (on epoll: operations waiting for readiness and
    /// blocking calls running).
    ops_in_flight,
    /// Gauge: armed timers.
    timers_pending,
    /// Task polls, poller calls or cross-shard messages that held the shard longer than the
    /// stall threshold (`RuntimeBuilder::stall_threshold`).
    stalls,
    /// Most microseconds one stall held the shard.
    stall_longest_us,
    /// Multishot receives armed (a stream's first receive, and each re-arm after one ended:
    /// end of a buffer-ring shortage, or the kernel stopping it).
    recv_multishot_arms,
    /// Multishot receives ended by an empty buffer ring (ENOBUFS): the stream's next receive
    /// went single-shot into its own buffer until the ring had buffers again.
    recv_buffers_exhausted,
    /// Single-shot receives into a stream's own buffer (the fallback: no buffer ring, or the
    /// ring short of buffers).
    recv_single_shot,
    /// Gauge: buffers in the shard's receive ring the kernel can take now.
    recv_buffers_free,
    /// Receive completions that filled several ring buffers at once (bundles, kernel 6.10+;
    /// `Features::recv_bundle`).
    recv_bundles,
    /// Multishot accepts armed on TCP listeners (the first accept, and each re-arm after
    /// the kernel ended one, e.g. after an error).
    accept_multishot_arms,
    /// Streams whose descriptor got a slot of the shard's registered file table
    /// (`RuntimeBuilder::registered_fds`); their receives and sends name the slot.
    fds_registered,
    /// Streams that found the table full (or its registration failing) and use their plain
    /// descriptor.
    fds_not_registered,
    /// Sends (send or writev operations) TCP and Unix streams submitted.
    sends,
    /// Buffers those sends carried: `send_buffers / sends` is the buffers per flush (a
    /// frame transport's writer sends every queued frame in one writev).
    send_buffers,
    /// Zero-copy sends (SEND_ZC): sends of at least `RuntimeBuilder::send_zc_threshold`
    /// bytes, whose buffers stay alive until the kernel's notification.
    send_zc,
}
