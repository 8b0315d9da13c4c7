//! Starting, using and stopping a set of shards from outside them.

use std::future::Future;
use std::io;
use std::panic::Location;
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use crate::driver::{self, Backend, Features};
use crate::mesh::{self, RemoteHandle};
use crate::net::RecvBuffers;
use crate::shard::stall::{StallHook, StallReport};
use crate::shard::{
    run_shard, ShardConfig, ShardHook, ShardHooks, ShardId, ShardRemote, ShardStatsSnapshot,
};

/// Configures and starts a [`Runtime`].
///
/// # Settings worth knowing
///
/// - `RuntimeBuilder::spin_before_park` (default 50 µs): the longest an idle shard keeps
///   polling before sleeping in its driver. These VMs pay a long wake-up tail, so a spin buys
///   latency: a lone client's 1 × 1 echo p50 is 40–70 % of tokio's. The spin adapts
///   (`spin_adaptive`, default on) so it costs next to nothing where it does not pay: it stops
///   once spins run out more often than they find work (a score, up one per spin that found
///   work, down one per spin that ran out, capped at 8; at zero one idle period in 16 still
///   probes with a spin), and is skipped while the shard spent over 60 % of the last 2 ms
///   working — its idle gaps are then the tails between batches from many clients, which come
///   whether or not it spins (a fixed 50 µs spin cost 11–12 % of the server's CPU per request
///   at 256 connections × depth 4 on both backends). Counters: `idle_spins`,
///   `idle_spin_hits`, `idle_spins_skipped`. `spin_yields` (default on) makes each spin
///   iteration a `sched_yield`, so a thread sharing the core runs instead of waiting out the
///   spin: measured here with client and server on one core, p99 went from 58 µs to 8 µs and
///   QPS up 1.5×. corewire-kv turns the spin off by default (`--idle-spin-us`; 10–25 % less CPU
///   per request against redis-server at `-P 1` and `-P 16` with 50 clients, a lone client's
///   p50 47 µs instead of 31 µs, measured with the fixed spin).
/// - `RuntimeBuilder::task_budget` (default 128 task polls per loop iteration).
/// - Per-connection fairness budgets (`Budget::messages(n).with_bytes(b)`, default `Budget::DEFAULT`:
///   32 messages or 256 KiB per round, chosen from `benches/run.sh fairness` (BENCHMARKS.md);
///   `Budget::UNLIMITED` is valid), per listener: a connection that used up its
///   round yields so its shard's other connections and pollers run. `budget_exhausted` counts it.
///   The budget is charged where the messages are: every frame transport's `Connection::recv`
///   charges each frame it hands up (so services and clients cannot forget it), and the KV
///   store's RESP connection charges each request it parses by its keys or elements
///   (`RoundBudget::charge_units`: an MGET of 100 keys weighs 100 GETs); a round also ends when the
///   connection waits for I/O. What a budget buys is counted, not timed: each request's
///   *head-of-line count* is how many messages its shard handed up between the completion that
///   brought the request's bytes and its reply being queued (`corewire_runtime::head_of_line`;
///   a service listener's histogram is `ListenerHandle::head_of_line()`). With budget B and H
///   busy connections it stays near B × H; unlimited, it grows with their backlog
///   (`src/service/head_of_line_tests.rs`).
/// - Sharded accept: `AcceptMode::ReusePort` (a listener per shard) or
///   `AcceptMode::Handoff { acceptors, placement }` with least-connections, round-robin, fixed or
///   a user function.
/// - Receiving (`TcpStream::recv_chunk`, `UnixStream::recv_chunk`, cancel-safe): where the
///   kernel has it (6.0+), one multishot receive stays armed per stream and every chunk lands in
///   the shard's provided-buffer ring (`RuntimeBuilder::recv_buffers`, default 256 × 4 KiB =
///   1 MiB a shard, sized to stay in cache; ordinary memory, not locked: only the 16 KiB ring of descriptors is pinned),
///   so a stream waiting for data holds no buffer. The chunk (`RecvBuf`) goes back to the ring
///   when dropped. When the ring runs dry (ENOBUFS) the stream receives single-shot into its own
///   buffer until the ring has an eighth of its buffers free again, then re-arms: no busy loop,
///   no lost bytes. On 6.10+ the receive is bundled (`IORING_RECVSEND_BUNDLE`): one completion
///   (one `tcp_recvmsg`) carries whatever arrived over as many ring buffers as it fills, where a
///   plain multishot receive posts one per buffer; the driver hands the buffers out one by one,
///   so nothing above it changes (`COREWIRE_IO_URING=nobundle` turns it off; `cargo xtask test`
///   runs every suite that does I/O once more that way). A bundle takes as many buffers as
///   data is waiting, so one connection with a large backlog can hold much of the ring until its
///   reader consumes it; the others then receive single-shot into their own buffers (counted in
///   `recv_buffers_exhausted`), losing nothing. The fairness suite's targets still hold with
///   bundles (BENCHMARKS.md, fifth run). Counters: `recv_multishot_arms`,
///   `recv_buffers_exhausted`, `recv_single_shot`, `recv_bundles`, gauge `recv_buffers_free`. `recv_available(&mut BytesMut)` appends the
///   next chunk and every chunk already received behind it (up to 64 KiB) in one call, for
///   request/response loops: requests that arrived together span several 4 KiB chunks, and
///   answering chunk by chunk costs one send, hence one TCP segment, per chunk (that was the
///   4 KiB echo regression: 1.00 sends per request at 64 connections × depth 4, 0.27 with
///   `recv_available`; see BENCHMARKS.md).
/// - Split streams: `TcpStream::into_split()` / `UnixStream::into_split()` give an owned read
///   half and write half (`net::OwnedReadHalf`, `net::OwnedWriteHalf`, both `!Send`) for two tasks
///   of the stream's shard, so a receive and a send are in flight at once; `split(&mut self)`
///   borrows them for two futures of one task; `OwnedReadHalf::reunite` puts the stream back.
///   Dropping the write half shuts the write direction down; dropping the read half cancels its
///   receive, so the stream holds no ring buffer for bytes nobody reads (`runtime/tests/split.rs`).
/// - Registered descriptors: `RuntimeBuilder::registered_fds(slots)` gives each shard a sparse
///   registered file table; each new TCP/Unix stream takes a free slot (a synchronous
///   `io_uring_register` at creation) and its receives and sends name the slot
///   (`IOSQE_FIXED_FILE`); a full table leaves streams on plain descriptors. The slot is closed
///   through the ring when the last holder of the stream's descriptor goes (after every
///   operation on it completed) and reused only after that close completed. Counters
///   `fds_registered`, `fds_not_registered`. **Off by default**: a `perf record` of the echo
///   server (64 connections × depth 4, 64 B) put `fget` + `io_file_get_normal` at 0.7 % of its
///   samples without it and 0.04 % with it, so that is all it can save here; the lead's quiet
///   run decides (`echo_server --registered-fds 4096`). Tests: `runtime/tests/registered_fds.rs`.
/// - Accepting: each TCP listener keeps one multishot accept armed (5.19+; counted in
///   `accept_multishot_arms`), feeding the same handoff and placement; at 64 connections queued
///   and not yet taken the accept is cancelled and re-armed once they are (meanwhile clients
///   wait in the listen backlog). Single-shot accepts otherwise.
/// - Sending: a frame transport's writer sends every queued frame in one `writev`, and the KV
///   store's connection every reply ready in one send (corking); `sends` and `send_buffers`
///   count them (`send_buffers / sends` is the buffers per flush).
///   `RuntimeBuilder::send_zc_threshold(Some(bytes))` makes sends of at least that size
///   zero-copy (`SEND_ZC`, 6.0+; counted in `send_zc`): the kernel keeps a share of the buffer until its notification,
///   even when the stream closed first. Off by default: not measured yet, and over loopback the
///   pages stay pinned until the peer reads.
/// - Cross-shard wake-ups: a shard that finds a peer parked posts a completion into the peer's
///   ring (`IORING_OP_MSG_RING`, 5.18+; counted in the peer's `msg_ring_wakeups`), which goes
///   out with the sender's next submit instead of costing an eventfd `write` syscall on the
///   spot; `RuntimeBuilder::msg_ring_wakeups(false)` turns it off. Threads that are not shards,
///   and a failed MSG_RING, use the eventfd (`wakeups_sent`).
/// - `COREWIRE_IO_URING=coop|plain|nobundle` (`nobundle`: bundled receives off) skips the most capable ring set-up (SINGLE_ISSUER +
///   DEFER_TASKRUN); `plain` also turns off every optional mechanism (buffer ring, multishot
///   receive and accept, zero-copy send, MSG_RING wake-ups), as on an old kernel. `cargo xtask test` runs the
///   host tests of every package that does I/O (corewire's services and adapters, the runtime,
///   the transports, the KV store) again with `plain` and again with `nobundle`. Features are probed at
///   start and fall back on older kernels.
/// - Per-shard counters (`Runtime::stats()`): loop iterations, task polls, task and poller
///   panics (a panicking poller is dropped, the shard carries on), completions, parks,
///   wake-ups, mesh traffic and backpressure, accepts, handoffs, open connections, budget
///   exhaustion, protocol errors (every one counted; the log line is sampled, at most 10 per second
///   per shard, through `corewire::runtime::report_protocol_error`), and gauges for live tasks,
///   in-flight ops and timers.
///   `corewire::runtime::metrics::MetricsServer::serve(&rt, shard, addr)` serves them in
///   Prometheus text format (`GET /metrics`, one `corewire_<name>` family per counter, labelled by
///   shard, documented in its `# HELP` line); the KV store takes `--metrics ADDR:PORT`.
/// - Stall detector (`RuntimeBuilder::stall_threshold`, default 10 ms, like Seastar's blocked
///   reactor notice): a task poll, poller call or cross-shard message that holds its shard longer
///   is counted (`stalls`, `stall_longest_us`) and logged at most once a second per shard, with
///   the task's spawn location; `on_stall` gets every report.
/// - `corewire::sync`: `Notify`, `Semaphore`, `oneshot`, bounded and unbounded `mpsc`, `Mutex`
///   and `RwLock` between the tasks of one shard (FIFO, cancel-safe, no atomics, `!Sync`), and
///   `shard_local!` for per-shard state owned by the shard.
/// - `corewire::runtime::net`: TCP, UDP (`UdpSocket`: bind, connect, `send_to`/`recv_from`) and
///   Unix sockets (`UnixListener`, `UnixStream`, `UnixDatagram`), each owning its descriptor with
///   its operations in flight. A datagram longer than the buffer comes back cut and marked
///   `truncated` (never silently); binding a Unix path that exists fails with `AddrInUse`.
/// - `corewire::runtime::fs`: `File` (positional `read_at`/`write_at`, `sync_data`/`sync_all`,
///   `metadata` by statx, `set_len`), `OpenOptions`, and `metadata`, `remove_file`, `rename`,
///   `create_dir_all`, `read_dir`, `read`, `write`, all through the ring. Operations the kernel
///   lacks (mkdirat before 5.15, ftruncate before 6.9; probed at start, see `Features`) and
///   directory listing (no io_uring op) run with std on a helper thread, never blocking the
///   shard: `corewire::runtime::spawn_blocking` (at most 4 threads) is that helper. A full disk is
///   an error value (`StorageFull`) from the write.
/// - `#[corewire::main]` / `#[corewire::test]` (crate `macros/`): an `async fn` as the root task
///   on shard 0 of a fresh runtime (one shard unless `shards = N`).
pub struct RuntimeBuilder {
    backend: Backend,
    shards: Option<usize>,
    cpus: Option<Vec<usize>>,
    pin: bool,
    config: ShardConfig,
    inbox_capacity: usize,
    hooks: ShardHooks,
    name: String,
}

impl Default for RuntimeBuilder {
    fn default() -> Self {
        RuntimeBuilder {
            backend: Backend::Auto,
            shards: None,
            cpus: None,
            pin: true,
            config: ShardConfig {
                backend: driver::Wanted {
                    backend: Backend::Auto,
                    by: String::new(),
                },
                ring_entries: 256,
                recv_buffers: RecvBuffers::default(),
                registered_fds: 0,
                send_zc_threshold: None,
                msg_ring_wakeups: true,
                task_budget: 128,
                inbox_batch: 256,
                spin_before_park: Duration::from_micros(50),
                spin_adaptive: true,
                spin_yields: true,
                stall_threshold: Some(Duration::from_millis(10)),
                helper_cpus: Vec::new(),
            },
            inbox_capacity: 1024,
            hooks: ShardHooks::default(),
            name: "corewire".into(),
        }
    }
}

impl RuntimeBuilder {
    /// The I/O backend of every shard (default [`Backend::Auto`]).
    ///
    /// - `Auto`: io_uring, unless setting up a ring fails with ENOSYS, EPERM (seccomp, as
    ///   Docker's default profile does, or `kernel.io_uring_disabled`), EACCES (a security
    ///   module) or ENOMEM (RLIMIT_MEMLOCK, before Linux 5.12), or the kernel lacks what
    ///   corewire needs from io_uring (Linux 5.11): then epoll. `build` logs one INFO line
    ///   naming the backend and why, e.g. `io_uring_setup: EPERM — blocked by seccomp or
    ///   kernel.io_uring_disabled; using epoll`.
    /// - `IoUring`: io_uring, or `build` fails with that reason in its error.
    /// - `Epoll`: epoll with non-blocking syscalls; file operations run on the blocking
    ///   pool ([`spawn_blocking`](crate::spawn_blocking)). The io_uring-only mechanisms
    ///   (buffer ring, multishot receive and accept, bundles, zero-copy send, MSG_RING,
    ///   registered files) are off, and [`Runtime::features`] reports none.
    ///
    /// Operators override it with the environment variable `COREWIRE_BACKEND=auto|io_uring|
    /// epoll`, which wins over this setting (an unknown value makes `build` fail). Which
    /// backend runs: [`Runtime::backend`], the `corewire_backend_info` metric.
    pub fn backend(mut self, backend: Backend) -> Self {
        self.backend = backend;
        self
    }

    /// Number of shards (default: one per CPU this process may run on).
    pub fn shards(mut self, n: usize) -> Self {
        self.shards = Some(n.max(1));
        self
    }

    /// CPUs to pin shards to, shard `i` on `cpus[i % len]` (default: the CPUs this process
    /// may run on, in order).
    pub fn cpus(mut self, cpus: Vec<usize>) -> Self {
        self.cpus = Some(cpus);
        self
    }

    /// Pin each shard thread to its CPU (default true). With pinned shards, the threads that
    /// do their blocking work (io_uring's kernel workers, the blocking pool) run on the
    /// allowed CPUs no shard is pinned to, where there are any, instead of taking a shard's
    /// core from it.
    pub fn pin(mut self, pin: bool) -> Self {
        self.pin = pin;
        self
    }

    /// Submission queue size of each shard's ring (default 256).
    pub fn ring_entries(mut self, n: u32) -> Self {
        self.config.ring_entries = n.max(8);
        self
    }

    /// Each shard's receive-buffer ring, which multishot receives of every stream of the
    /// shard draw from (default 256 buffers × 4 KiB = 1 MiB a shard, not locked memory).
    /// The count must be a power of two ≤ 32768 (else `build` fails). Unused where the kernel
    /// lacks multishot receive, or under `COREWIRE_IO_URING=plain`.
    pub fn recv_buffers(mut self, buffers: RecvBuffers) -> Self {
        self.config.recv_buffers = buffers;
        self
    }

    /// Slots in each shard's registered file table (`IORING_REGISTER_FILES` sparse, kernel
    /// 5.19+). While a slot is free, each new TCP or Unix stream gets one, and its receives
    /// and sends name the slot (`IOSQE_FIXED_FILE`) instead of the descriptor: the kernel
    /// skips the file-table lookup and the reference count of each operation. A stream that
    /// finds the table full uses its descriptor as before. Counted in `fds_registered` and
    /// `fds_not_registered`. Default 0 (off): not measured yet. Unused under
    /// `COREWIRE_IO_URING=plain`.
    pub fn registered_fds(mut self, slots: u32) -> Self {
        self.config.registered_fds = slots;
        self
    }

    /// Sends of at least this many bytes go zero-copy (`IORING_OP_SEND_ZC`, where the kernel
    /// has it): no copy into the socket, at the price of a second completion, and the buffer
    /// stays alive until the kernel lets go of it. Default `None` (off): not yet measured
    /// here, and over loopback the kernel copies anyway.
    pub fn send_zc_threshold(mut self, threshold: Option<usize>) -> Self {
        self.config.send_zc_threshold = threshold;
        self
    }

    /// Whether a shard wakes a parked peer by posting a completion into the peer's ring
    /// (`IORING_OP_MSG_RING`, where the kernel has it; counted in `msg_ring_wakeups`) rather
    /// than by writing its eventfd (counted in `wakeups_sent`). Default on. Wake-ups from
    /// threads that are not shards always use the eventfd.
    pub fn msg_ring_wakeups(mut self, on: bool) -> Self {
        self.config.msg_ring_wakeups = on;
        self
    }

    /// Tasks polled per loop iteration before the shard looks at its pollers and ring again
    /// (default 128, tokio's coop budget).
    pub fn task_budget(mut self, n: usize) -> Self {
        self.config.task_budget = n.max(1);
        self
    }

    /// The longest an idle shard keeps polling before it sleeps in its driver (default 50 µs;
    /// zero: never spin). Longer cuts wake-up latency on machines with a slow wake-up path and
    /// costs idle CPU; with [`spin_adaptive`](Self::spin_adaptive) on, the shard spins less
    /// where a spin does not pay.
    pub fn spin_before_park(mut self, d: Duration) -> Self {
        self.config.spin_before_park = d;
        self
    }

    /// Whether the idle spin adapts (default true). A shard then skips the spin (parks at
    /// once) where recent spins ran out more often than they found work (a score: +1 for each
    /// spin that found work, −1 for each that ran out, within 0..=8; at zero one idle period
    /// in 16 still probes with a spin), and while it was busy over 60 % of the last 2 ms (many
    /// clients: their next batch comes whether or not it spins). A spin, when it runs, lasts
    /// up to [`spin_before_park`](Self::spin_before_park). Off, every idle period spins the
    /// full bound.
    pub fn spin_adaptive(mut self, on: bool) -> Self {
        self.config.spin_adaptive = on;
        self
    }

    /// Whether an idle shard gives its CPU away (sched_yield) while it spins (default true).
    /// With shards on dedicated cores the yield returns at once; on a core shared with other
    /// threads it lets them run instead of waiting out the spin. A yield that gets the CPU back
    /// only after a whole spin window (a thread that keeps the core for its time slice) ends
    /// the spin and, with [`spin_adaptive`](Self::spin_adaptive), stops spinning until a probe
    /// finds the core free: the shard then sleeps in its driver, where its I/O wakes it.
    pub fn spin_yields(mut self, yields: bool) -> Self {
        self.config.spin_yields = yields;
        self
    }

    /// Capacity of each shard's cross-shard inbox; senders wait when it is full (default 1024).
    pub fn inbox_capacity(mut self, n: usize) -> Self {
        self.inbox_capacity = n.max(1);
        self
    }

    /// Runs on each shard thread after its ring exists, before any task.
    pub fn on_shard_start(mut self, f: impl Fn(ShardId) + Send + Sync + 'static) -> Self {
        self.hooks.on_start = Some(Arc::new(f) as ShardHook);
        self
    }

    /// Runs on each shard thread after its tasks and pollers were dropped.
    pub fn on_shard_stop(mut self, f: impl Fn(ShardId) + Send + Sync + 'static) -> Self {
        self.hooks.on_stop = Some(Arc::new(f) as ShardHook);
        self
    }

    /// Report any task poll, poller call or cross-shard message that holds a shard longer
    /// than `threshold` (default 10 ms; `None` turns the detector off and saves its clock read
    /// per poll). See [`shard::stall`](crate::shard::stall).
    pub fn stall_threshold(mut self, threshold: Option<Duration>) -> Self {
        self.config.stall_threshold = threshold;
        self
    }

    /// Called on the shard thread for every stall the detector reports (not rate-limited,
    /// unlike the log line). Keep it short: it runs on the stalled shard.
    pub fn on_stall(mut self, f: impl Fn(&StallReport) + Send + Sync + 'static) -> Self {
        self.hooks.on_stall = Some(Arc::new(f) as StallHook);
        self
    }

    /// Thread name prefix (default "corewire").
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }

    /// Start the shards.
    pub fn build(mut self) -> io::Result<Runtime> {
        self.config.backend = driver::select(self.backend)?;
        let allowed = allowed_cpus();
        let count = self.shards.unwrap_or(allowed.len().max(1));
        let cpus = self.cpus.clone().unwrap_or_else(|| allowed.clone());
        let remotes: Vec<Arc<ShardRemote>> = (0..count)
            .map(|i| ShardRemote::new(i, self.inbox_capacity))
            .collect::<io::Result<_>>()?;
        let peers: Arc<[Arc<ShardRemote>]> = remotes.clone().into();
        let mut runtime = Runtime {
            shards: remotes.clone(),
            threads: Vec::with_capacity(count),
            features: Features::default(),
            backend: Backend::Auto,
        };
        let mut why = String::new();
        let shard_cpus: Vec<usize> = if self.pin && !cpus.is_empty() {
            (0..count).map(|i| cpus[i % cpus.len()]).collect()
        } else {
            Vec::new()
        };
        let worker_cpus = if shard_cpus.is_empty() {
            Vec::new()
        } else {
            crate::helper_cpus::set_pool_cpus(crate::helper_cpus::for_pool(&allowed, &shard_cpus));
            crate::helper_cpus::for_workers(&allowed, &shard_cpus)
        };
        for (i, remote) in remotes.into_iter().enumerate() {
            let peers = peers.clone();
            let mut config = self.config.clone();
            config.helper_cpus = worker_cpus.clone();
            let hooks = self.hooks.clone();
            let cpu = (!cpus.is_empty() && self.pin).then(|| cpus[i % cpus.len()]);
            let (ready_tx, ready_rx) = std::sync::mpsc::channel();
            let thread = thread::Builder::new()
                .name(format!("{}-shard-{i}", self.name))
                .spawn(move || {
                    if let Some(cpu) = cpu {
                        if let Err(e) = affinity::set_thread_affinity([cpu]) {
                            tracing::warn!(shard = i, cpu, error = %e, "could not pin shard");
                        }
                    }
                    run_shard(remote, peers, config, hooks, ready_tx)
                })?;
            runtime.threads.push(thread);
            match ready_rx.recv() {
                Ok(Ok(started)) => {
                    runtime.features = started.features;
                    runtime.backend = started.backend;
                    if i == 0 {
                        // The first shard decides `Auto`; the others take what it got.
                        why = started.why;
                        self.config.backend.backend = started.backend;
                    }
                }
                Ok(Err(e)) => return Err(e),
                Err(_) => return Err(io::Error::other(format!("shard {i} died during start-up"))),
            }
        }
        let backend = runtime.backend;
        match driver::limits(backend) {
            Some(limits) => tracing::info!(
                shards = count,
                %backend,
                %why,
                %limits,
                "runtime started on {backend}"
            ),
            None => tracing::info!(shards = count, %backend, %why, "runtime started on {backend}"),
        }
        tracing::debug!(features = ?runtime.features, "io_uring features");
        Ok(runtime)
    }
}

fn allowed_cpus() -> Vec<usize> {
    match affinity::get_thread_affinity() {
        Ok(cpus) if !cpus.is_empty() => cpus,
        _ => (0..thread::available_parallelism().map_or(1, |n| n.get())).collect(),
    }
}

/// A running set of shards. Dropping it stops them (see [`Runtime::shutdown`]).
pub struct Runtime {
    shards: Vec<Arc<ShardRemote>>,
    threads: Vec<thread::JoinHandle<()>>,
    features: Features,
    backend: Backend,
}

impl Runtime {
    /// A builder with the defaults.
    pub fn builder() -> RuntimeBuilder {
        RuntimeBuilder::default()
    }

    /// How many shards the runtime has.
    pub fn shard_count(&self) -> usize {
        self.shards.len()
    }

    /// The io_uring features the shards' rings got (none on epoll).
    pub fn features(&self) -> Features {
        self.features
    }

    /// The backend the shards run on: [`Backend::IoUring`] or [`Backend::Epoll`] (see
    /// [`RuntimeBuilder::backend`]).
    pub fn backend(&self) -> Backend {
        self.backend
    }

    /// Run `f` on shard `shard` (its future may be `!Send`: it is created there).
    /// Panics if `shard` is out of range.
    #[track_caller]
    pub fn spawn_on<F, Fut, T>(&self, shard: ShardId, f: F) -> RemoteHandle<T>
    where
        F: FnOnce() -> Fut + Send + 'static,
        Fut: Future<Output = T> + 'static,
        T: Send + 'static,
    {
        self.spawn_on_at(shard, f, Location::caller())
    }

    fn spawn_on_at<F, Fut, T>(
        &self,
        shard: ShardId,
        f: F,
        spawned_at: &'static Location<'static>,
    ) -> RemoteHandle<T>
    where
        F: FnOnce() -> Fut + Send + 'static,
        Fut: Future<Output = T> + 'static,
        T: Send + 'static,
    {
        let remote = &self.shards[shard];
        let (tx, rx) = mesh::channel();
        let mut msg = mesh::task_message(f, tx, spawned_at);
        // Off-shard callers have no waker to park on: back off while the inbox is full.
        loop {
            match remote.try_send(msg) {
                Ok(()) => return rx,
                Err(m) => {
                    remote.stats.mesh_full.incr();
                    msg = m;
                    thread::sleep(Duration::from_micros(50));
                }
            }
        }
    }

    /// Run `f(shard)` on every shard; one handle per shard, in shard order.
    #[track_caller]
    pub fn spawn_on_all<F, Fut, T>(&self, f: F) -> Vec<RemoteHandle<T>>
    where
        F: Fn(ShardId) -> Fut + Send + Sync + Clone + 'static,
        Fut: Future<Output = T> + 'static,
        T: Send + 'static,
    {
        let spawned_at = Location::caller();
        (0..self.shards.len())
            .map(|i| {
                let f = f.clone();
                self.spawn_on_at(i, move || f(i), spawned_at)
            })
            .collect()
    }

    /// Run the task `f` makes on shard `shard` and wait, on this (non-shard) thread, for its
    /// output. (Not tokio's `block_on(future)`: the future is built on the shard by `f`,
    /// because shard tasks are `!Send`.)
    ///
    /// # Panics
    /// On a shard thread (see [`assert_can_block`](crate::assert_can_block)): there, await
    /// [`submit_to`](crate::submit_to) instead.
    #[track_caller]
    pub fn run_on<F, Fut, T>(&self, shard: ShardId, f: F) -> Result<T, crate::JoinError>
    where
        F: FnOnce() -> Fut + Send + 'static,
        Fut: Future<Output = T> + 'static,
        T: Send + 'static,
    {
        crate::assert_can_block("Runtime::run_on");
        self.spawn_on_at(shard, f, Location::caller())
            .wait_unchecked()
    }

    /// Each shard's counters now, in shard order.
    pub fn stats(&self) -> Vec<ShardStatsSnapshot> {
        self.shards.iter().map(|s| s.stats.snapshot()).collect()
    }

    /// Stop every shard: their tasks and pollers are dropped (cancelling in-flight I/O and
    /// closing their sockets), hooks run, rings drain, threads are joined.
    ///
    /// # Panics
    /// On a shard thread, which would wait for itself to stop.
    #[track_caller]
    pub fn shutdown(mut self) {
        crate::assert_can_block("Runtime::shutdown");
        self.stop_and_join();
    }

    fn stop_and_join(&mut self) {
        for s in &self.shards {
            s.request_stop();
        }
        for t in self.threads.drain(..) {
            if t.join().is_err() {
                tracing::error!("a shard thread panicked");
            }
        }
    }
}

impl Drop for Runtime {
    fn drop(&mut self) {
        self.stop_and_join();
    }
}
