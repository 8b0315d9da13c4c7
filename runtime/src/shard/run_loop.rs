//! The loop every shard runs: tasks → timers → pollers (and the tasks their completions woke)
//! → cross-shard inbox → driver (io_uring or epoll), and a park in the driver only when none
//! of them has work and the idle spin has run out.

use std::cell::RefCell;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::rc::Rc;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::context::{self, ShardContext};
use super::idle_spin::{IdleEnd, IdleSpin};
use super::stall::{StallDetector, StallHook, StallSource};
use super::{ShardId, ShardRemote};
use crate::driver::{Backend, Driver, DriverConfig, Features, Wanted};
use crate::executor::{panic_message, Executor};
use crate::poller::Pollers;
use crate::timer::Timers;

/// Settings of every shard of a runtime (see `RuntimeBuilder` for what each one means).
#[derive(Debug, Clone)]
pub(crate) struct ShardConfig {
    /// The backend asked for; `RuntimeBuilder::build` sets what the first shard got for the
    /// others.
    pub backend: Wanted,
    pub ring_entries: u32,
    pub recv_buffers: crate::net::RecvBuffers,
    pub registered_fds: u32,
    pub send_zc_threshold: Option<usize>,
    pub msg_ring_wakeups: bool,
    pub task_budget: usize,
    pub inbox_batch: usize,
    pub spin_before_park: Duration,
    /// Skip the spin where it does not pay (`IdleSpin`); off: every idle period spins the bound.
    pub spin_adaptive: bool,
    /// Yield the CPU (sched_yield) on each idle spin iteration, so a thread sharing the core
    /// (a client, another process) runs instead of waiting out the spin.
    pub spin_yields: bool,
    /// Report work that holds the shard longer than this (`None`: detector off).
    pub stall_threshold: Option<Duration>,
    /// CPUs for the ring's kernel workers (`helper_cpus.rs`); empty: where they start.
    pub helper_cpus: Vec<usize>,
}

/// What a shard reports once its driver exists.
pub(crate) struct Started {
    pub backend: Backend,
    /// Why it is that backend (for the start-up log line).
    pub why: String,
    pub features: Features,
}

/// Per-shard init/release hooks (brpc's `init_fn`/`release_fn`), run on the shard thread.
pub type ShardHook = Arc<dyn Fn(ShardId) + Send + Sync>;

#[derive(Clone, Default)]
pub(crate) struct ShardHooks {
    pub on_start: Option<ShardHook>,
    pub on_stop: Option<ShardHook>,
    pub on_stall: Option<StallHook>,
}

/// Run shard `remote.id` on the current thread until it is asked to stop. `ready` receives the
/// backend it got and why, with the io_uring features (or the set-up error), once the driver
/// exists.
pub(crate) fn run_shard(
    remote: Arc<ShardRemote>,
    peers: Arc<[Arc<ShardRemote>]>,
    config: ShardConfig,
    hooks: ShardHooks,
    ready: std::sync::mpsc::Sender<std::io::Result<Started>>,
) {
    let id = remote.id;
    let span = tracing::info_span!("shard", id);
    let _entered = span.enter();
    let driver_config = DriverConfig {
        backend: config.backend.clone(),
        ring_entries: config.ring_entries,
        recv_buffers: config.recv_buffers,
        registered_fds: config.registered_fds,
    };
    let (mut driver, why) = match Driver::new(&driver_config, &remote) {
        Ok(d) => d,
        Err(e) => {
            let _ = ready.send(Err(e));
            return;
        }
    };
    let features = driver.features();
    if let Some(uring) = driver.uring() {
        uring.set_worker_cpus(&config.helper_cpus);
        uring.send_zc_threshold = config.send_zc_threshold.filter(|_| features.send_zc);
        if features.msg_ring && config.msg_ring_wakeups {
            match uring.ring_fd().try_clone_to_owned() {
                Ok(fd) => remote.accept_msg_ring_wakeups(fd),
                Err(e) => tracing::warn!(error = %e, "no MSG_RING wake-ups: eventfd only"),
            }
        }
    }
    let ctx = Rc::new(ShardContext {
        id,
        remote: remote.clone(),
        peers,
        executor: Executor::new(remote.clone()),
        driver: RefCell::new(driver),
        timers: RefCell::new(Timers::default()),
        pollers: Pollers::default(),
        locals: Default::default(),
        stall: config
            .stall_threshold
            .map(|t| StallDetector::new(t, hooks.on_stall.clone())),
    });
    context::enter(ctx.clone());
    if let Some(hook) = &hooks.on_start {
        hook(id);
    }
    tracing::debug!(?features, "shard started");
    let _ = ready.send(Ok(Started {
        backend: ctx.driver.borrow().backend(),
        why,
        features,
    }));

    // The loop catches every panic of user code (tasks, messages, pollers); one escaping
    // anyway is a bug of ours, but the shard still must not die with work queued for it.
    loop {
        match catch_unwind(AssertUnwindSafe(|| run(&ctx, &config))) {
            Ok(()) => break,
            Err(panic) => {
                ctx.remote.stats.task_panics.incr();
                tracing::error!(panic = %panic_message(&panic), "shard loop panicked; resuming");
            }
        }
    }

    tracing::debug!("shard stopping");
    // Each step runs user destructors or hooks; a panic in one must not skip the driver
    // drain, or the ring's buffers would be freed while the kernel may still use them.
    let step = |what: &str, f: &dyn Fn()| {
        if let Err(panic) = catch_unwind(AssertUnwindSafe(f)) {
            tracing::error!(panic = %panic_message(&panic), "{what} panicked at shutdown");
        }
    };
    step("dropping tasks", &|| ctx.executor.drop_all());
    step("dropping pollers", &|| ctx.pollers.drop_all());
    step("dropping queued messages", &|| {
        while ctx.remote.inbox.pop().is_some() {}
    });
    ctx.remote.wake_senders();
    if let Some(hook) = &hooks.on_stop {
        step("the on_shard_stop hook", &|| hook(id));
    }
    ctx.locals.clear();
    ctx.driver.borrow_mut().drain(Duration::from_secs(2));
    context::exit();
    // Descriptors dropped after the drain (by the context's own destructors) close at once.
    drop(ctx);
    Driver::close_pending_now();
}

fn run(ctx: &ShardContext, config: &ShardConfig) {
    let stats = &ctx.remote.stats;
    let mut spin = IdleSpin::new(
        config.spin_before_park,
        config.spin_adaptive,
        Instant::now(),
    );
    // Whether the open idle period slept in the driver.
    let mut parked = false;
    loop {
        if ctx.remote.stop.load(Ordering::Acquire) {
            return;
        }
        stats.loop_iterations.incr();
        // Where an idle period is open, the work this pass may find ends it here.
        let pass_start = spin.is_idle().then(Instant::now);
        // Whether this pass found work (which ends an open idle period), and whether it found
        // work the tasks did not yet see: only that is worth another pass before the shard
        // idles. Tasks that ran and then waited for I/O are not: the reap below (or the park
        // that stands for it) looks for what they wait for.
        let mut did_work = false;
        let mut new_work = false;

        // Tasks woken from other threads join the local run queue.
        ctx.remote
            .take_remote_wakes(|key| ctx.executor.schedule(key));
        stats.run_queue_max.max(ctx.executor.ready_len() as u64);

        let (polled, _panicked) = ctx
            .executor
            .run_ready(config.task_budget, ctx.stall.as_ref());
        if polled > 0 {
            did_work = true;
            // A poller a task registered runs at the next pass, not after a park.
            new_work = ctx.pollers.len() > 0;
            stats.tasks_polled.add(polled as u64);
        }

        let now = Instant::now();
        let fired = ctx.timers.borrow_mut().fire(now);
        if fired > 0 {
            did_work = true;
            new_work = true;
            stats.timers_fired.add(fired as u64);
        }

        if ctx.pollers.len() > 0 {
            stats.poller_polls.incr();
            let progress = ctx.pollers.run(ctx.stall.as_ref(), ctx.id, stats);
            if progress > 0 {
                did_work = true;
                new_work = true;
                stats.poller_completions.add(progress as u64);
                // Run the tasks those completions woke now, not after the inbox, the ring
                // and the next pass's timers: a message an RDMA poller hands to its reader
                // is then answered (and the reply posted) in the pass that found it. That
                // pass was on every round trip's critical path (BENCHMARKS.md).
                if ctx.executor.has_ready() {
                    let (polled, _panicked) = ctx
                        .executor
                        .run_ready(config.task_budget, ctx.stall.as_ref());
                    stats.tasks_polled.add(polled as u64);
                }
            }
        }

        let received = drain_inbox(ctx, config.inbox_batch);
        if received > 0 {
            did_work = true;
            new_work = true;
        }

        // Work found so far ends an open idle period now, before the idle decision below.
        if did_work {
            end_idle(&mut spin, pass_start, &mut parked, stats);
        }
        // A pass that parks unless the reap finds work lets the park's wait be its reap, where
        // that wait collects what the reap would (epoll: one `epoll_wait` per idle period, not
        // an `epoll_wait(0)` and then the park's).
        let park_now = !new_work
            && !ctx.executor.has_ready()
            && !ctx.executor.has_yielded()
            && ctx.pollers.may_park()
            && ctx.driver.borrow().park_reaps()
            && spin.parks_at(now);
        if !park_now {
            let reaped = match ctx.driver.borrow_mut().submit_and_reap() {
                Ok(r) => r,
                Err(e) => {
                    tracing::error!(error = %e, "the I/O driver failed; stopping the shard");
                    return;
                }
            };
            wake_where_msg_ring_failed(ctx);
            if reaped.completions > 0 {
                did_work = true;
                new_work = true;
                stats.completions.add(reaped.completions as u64);
            }
            // Yielded tasks go behind the completions just reaped.
            if ctx.executor.wake_yielded() > 0 {
                did_work = true;
                new_work = true;
            }
            if did_work {
                end_idle(&mut spin, pass_start, &mut parked, stats);
            }
        }

        stats.tasks_live.set(ctx.executor.task_count() as u64);
        {
            let driver = ctx.driver.borrow();
            stats.ops_in_flight.set(driver.in_flight() as u64);
            if let Some(ring) = driver.buf_ring() {
                stats.recv_buffers_free.set(u64::from(ring.available()));
                stats.recv_bundles.set(driver.recv_bundles());
            }
        }
        stats.timers_pending.set(ctx.timers.borrow().len() as u64);

        if !park_now && (new_work || ctx.executor.has_ready() || !ctx.pollers.may_park()) {
            continue;
        }
        if !spin.is_idle() {
            if spin.begin(now).is_zero() {
                stats.idle_spins_skipped.incr();
            } else {
                stats.idle_spins.incr();
            }
        }
        if !park_now && spin.keep_spinning(now) {
            if config.spin_yields {
                let gave = Instant::now();
                std::thread::yield_now();
                spin.yielded(gave, Instant::now());
            } else {
                std::hint::spin_loop();
            }
            continue;
        }
        // A wake-up that brings no work (a spurious one) parks again without a new spin.
        park(ctx);
        parked = true;
    }
}

/// The open idle period (if any) ended at `pass_start` with work found; `parked` says how.
fn end_idle(
    spin: &mut IdleSpin,
    pass_start: Option<Instant>,
    parked: &mut bool,
    stats: &super::ShardStats,
) {
    let Some(start) = pass_start else {
        return;
    };
    let how = if *parked {
        IdleEnd::Parked
    } else {
        IdleEnd::Spun
    };
    if spin.end(start, how) && how == IdleEnd::Spun {
        stats.idle_spin_hits.incr();
    }
    *parked = false;
}

/// Run the closures other shards sent, at most `batch` per iteration so a flood of messages
/// cannot starve this shard's own tasks and I/O.
fn drain_inbox(ctx: &ShardContext, batch: usize) -> usize {
    let mut n = 0;
    let mut mark = ctx.stall.as_ref().map(|_| Instant::now());
    while n < batch {
        let Some(msg) = ctx.remote.inbox.pop() else {
            break;
        };
        n += 1;
        if let Err(panic) = catch_unwind(AssertUnwindSafe(msg)) {
            ctx.remote.stats.task_panics.incr();
            tracing::error!(panic = %panic_message(&panic), "cross-shard message panicked");
        }
        if let (Some(detector), Some(start)) = (&ctx.stall, mark.as_mut()) {
            let now = Instant::now();
            let stats = &ctx.remote.stats;
            detector.check(ctx.id, stats, *start, now, || StallSource::Message);
            *start = now;
        }
    }
    if n > 0 {
        ctx.remote.stats.mesh_received.add(n as u64);
        ctx.remote.stats.inbox_max.max(n as u64);
        ctx.remote.wake_senders();
    }
    n
}

fn park(ctx: &ShardContext) {
    ctx.remote.set_parked(true);
    // Re-check after publishing `parked`: a sender that pushed before seeing it did not write
    // the eventfd, so its work must be visible now.
    if ctx.remote.has_pending_work() || ctx.executor.has_ready() {
        ctx.remote.set_parked(false);
        return;
    }
    let timeout = ctx
        .timers
        .borrow()
        .next_deadline()
        .map(|d| d.saturating_duration_since(Instant::now()));
    ctx.remote.stats.parks.incr();
    let reaped = ctx.driver.borrow_mut().park(timeout);
    ctx.remote.set_parked(false);
    match reaped {
        Ok(r) => ctx.remote.stats.completions.add(r.completions as u64),
        Err(e) => tracing::error!(error = %e, "parking in the driver failed"),
    }
    wake_where_msg_ring_failed(ctx);
}

/// Shards this one failed to wake through their ring get an eventfd write instead.
fn wake_where_msg_ring_failed(ctx: &ShardContext) {
    let failed = ctx.driver.borrow_mut().take_msg_ring_failed();
    for shard in failed {
        if let Some(peer) = ctx.peers.get(shard) {
            peer.write_eventfd();
        }
    }
}
