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
                spin_yields: true,
                stall_threshold: Some(Duration::from_millis(10)),
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

    /// Pin each shard thread to its CPU (default true).
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

    /// How long an idle shard keeps polling before it sleeps in its ring (default 50 µs).
    /// Longer cuts wake-up latency on machines with a slow wake-up path and costs idle CPU.
    pub fn spin_before_park(mut self, d: Duration) -> Self {
        self.config.spin_before_park = d;
        self
    }

    /// Whether an idle shard gives its CPU away (sched_yield) while it spins (default true).
    /// With shards on dedicated cores the yield returns at once; on a core shared with other
    /// threads it lets them run instead of waiting out the spin.
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
        let cpus = self.cpus.unwrap_or(allowed);
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
        for (i, remote) in remotes.into_iter().enumerate() {
            let peers = peers.clone();
            let config = self.config.clone();
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
