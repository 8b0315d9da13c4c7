//! Blocking calls kept off the shards: a small pool of helper threads for the few calls the
//! ring has no operation for (listing a directory) or that the kernel under it lacks (the
//! fallbacks of `fs`). A shard awaits the result; its loop never blocks.

use std::collections::VecDeque;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Condvar, Mutex, OnceLock};
use std::time::Duration;

use crate::mesh::{oneshot, RemoteHandle};

/// Helper threads at most: blocking calls are rare (start-up, directory changes), so a few
/// threads bound the cost of a burst; more calls wait in line.
const MAX_THREADS: usize = 4;
/// A helper thread with nothing to do for this long exits.
const IDLE_EXIT: Duration = Duration::from_secs(10);

type Job = Box<dyn FnOnce() + Send>;

#[derive(Default)]
struct State {
    jobs: VecDeque<Job>,
    threads: usize,
    idle: usize,
}

struct Pool {
    state: Mutex<State>,
    work: Condvar,
}

fn pool() -> &'static Pool {
    static POOL: OnceLock<Pool> = OnceLock::new();
    POOL.get_or_init(|| Pool {
        state: Mutex::new(State::default()),
        work: Condvar::new(),
    })
}

/// Run `f` on a helper thread (at most four of them, shared by the process) and get its
/// result through the returned handle: await it on a shard, or `wait()` for it elsewhere.
/// A panic in `f` resolves the handle to [`JoinError::Aborted`](crate::JoinError).
///
/// For blocking system calls that would otherwise stall a shard; everything the ring can
/// do should go through the ring instead.
pub fn spawn_blocking<F, T>(f: F) -> RemoteHandle<T>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    let (tx, handle) = oneshot::channel();
    let job: Job = Box::new(move || {
        if let Ok(value) = catch_unwind(AssertUnwindSafe(f)) {
            tx.send(value);
        }
        // On a panic `tx` drops unsent: the handle reports Aborted.
    });
    let pool = pool();
    let mut state = pool.state.lock().unwrap_or_else(|e| e.into_inner());
    state.jobs.push_back(job);
    if state.idle > 0 {
        pool.work.notify_one();
        return handle;
    }
    if state.threads < MAX_THREADS {
        let spawned = std::thread::Builder::new()
            .name("corewire-blocking".into())
            .spawn(move || helper(pool));
        match spawned {
            Ok(_) => state.threads += 1,
            Err(error) if state.threads == 0 => {
                // Nobody will ever run it: fail it (the handle reports Aborted).
                tracing::error!(%error, "no helper thread for a blocking call");
                state.jobs.pop_back();
            }
            Err(error) => tracing::warn!(%error, "helper thread not started; call queued"),
        }
    }
    handle
}

fn helper(pool: &'static Pool) {
    crate::helper_cpus::enter_pool();
    let mut state = pool.state.lock().unwrap_or_else(|e| e.into_inner());
    loop {
        if let Some(job) = state.jobs.pop_front() {
            drop(state);
            job();
            state = pool.state.lock().unwrap_or_else(|e| e.into_inner());
            continue;
        }
        state.idle += 1;
        let (next, timeout) = pool
            .work
            .wait_timeout(state, IDLE_EXIT)
            .unwrap_or_else(|e| e.into_inner());
        state = next;
        state.idle -= 1;
        if timeout.timed_out() && state.jobs.is_empty() {
            state.threads -= 1;
            return;
        }
    }
}
