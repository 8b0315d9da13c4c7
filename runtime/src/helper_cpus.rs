//! Where the threads that do a shard's blocking work run: io_uring's kernel workers (`io-wq`,
//! which take file writes the kernel cannot do without blocking, fsync, rename, ...) and the
//! blocking pool (`blocking.rs`: the epoll backend's file I/O, `spawn_blocking`).
//!
//! Both inherit the CPU mask of the thread that starts them, and that is a pinned shard: a
//! snapshot's file writes then run on the shard's own core and take it from the shard in
//! time slices (a 1 M-key BGSAVE preempted its shard dozens of times for the writes' copies
//! into the page cache) while a CPU no shard uses may sit idle. So where the process may use
//! CPUs no shard is pinned to, helpers run there. Where shards cover every allowed CPU, a
//! shard's kernel workers stay on its own core: moving them would make one shard's
//! blocking work another shard's stall. The blocking pool serves every shard, so it runs on
//! any allowed CPU rather than on whichever shard happened to start its thread.

use std::sync::Mutex;

/// CPUs for a shard's kernel workers, given the CPUs this process may use and those shards
/// are pinned to: the free ones. Empty: leave the workers on the shard's own core.
pub(crate) fn for_workers(allowed: &[usize], shard_cpus: &[usize]) -> Vec<usize> {
    allowed
        .iter()
        .copied()
        .filter(|c| !shard_cpus.contains(c))
        .collect()
}

/// CPUs for the blocking pool: the free ones, or any allowed one.
pub(crate) fn for_pool(allowed: &[usize], shard_cpus: &[usize]) -> Vec<usize> {
    match for_workers(allowed, shard_cpus) {
        free if free.is_empty() => allowed.to_vec(),
        free => free,
    }
}

/// The blocking pool's CPUs, set when a runtime with pinned shards starts (the last one
/// started wins: runtimes in one process share the pool).
static POOL_CPUS: Mutex<Vec<usize>> = Mutex::new(Vec::new());

pub(crate) fn set_pool_cpus(cpus: Vec<usize>) {
    *POOL_CPUS.lock().unwrap_or_else(|e| e.into_inner()) = cpus;
}

/// Moves the calling blocking-pool thread to the pool's CPUs (none set: stays where it was
/// started).
pub(crate) fn enter_pool() {
    let cpus = POOL_CPUS.lock().unwrap_or_else(|e| e.into_inner()).clone();
    if !cpus.is_empty() {
        if let Err(error) = affinity::set_thread_affinity(&cpus) {
            tracing::debug!(%error, ?cpus, "blocking-pool thread left on its parent's CPUs");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{for_pool, for_workers};

    #[test]
    fn helpers_take_the_cpus_no_shard_is_pinned_to() {
        assert_eq!(for_workers(&[0, 1, 2, 3], &[0, 1]), vec![2, 3]);
        assert_eq!(for_pool(&[0, 1, 2, 3], &[0, 1]), vec![2, 3]);
    }

    #[test]
    fn with_every_cpu_a_shard_keeps_its_workers() {
        assert!(for_workers(&[0, 1], &[0, 1]).is_empty());
        assert!(for_workers(&[0], &[0]).is_empty());
        // The pool serves every shard: anywhere allowed.
        assert_eq!(for_pool(&[0, 1], &[0, 1]), vec![0, 1]);
    }
}
