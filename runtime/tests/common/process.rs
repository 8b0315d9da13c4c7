//! Process-wide probes: open descriptors and live threads, plus a lock for the tests that
//! compare them with a baseline (tests of one binary run in parallel threads and would
//! otherwise see each other's sockets).

use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

static SERIAL: Mutex<()> = Mutex::new(());

/// Hold while measuring process-wide resources. Tolerates poisoning: a failed test must not
/// fail the others in its binary a second time.
pub fn serial() -> MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// Descriptors open in this process (the directory handle used to count them included,
/// the same way every time).
pub fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd")
        .expect("/proc/self/fd")
        .count()
}

/// What each open descriptor points at ("socket:[..]", "anon_inode:[eventfd]",
/// "anon_inode:[io_uring]", ...), for failure messages.
pub fn fd_targets() -> Vec<String> {
    let mut out: Vec<String> = std::fs::read_dir("/proc/self/fd")
        .expect("/proc/self/fd")
        .filter_map(|e| e.ok())
        .filter_map(|e| std::fs::read_link(e.path()).ok())
        .map(|p| p.display().to_string())
        .collect();
    out.sort();
    out
}

/// Threads of this process whose name starts with `prefix`.
pub fn threads_named(prefix: &str) -> usize {
    std::fs::read_dir("/proc/self/task")
        .expect("/proc/self/task")
        .filter_map(|e| e.ok())
        .filter_map(|e| std::fs::read_to_string(e.path().join("comm")).ok())
        .filter(|name| name.starts_with(prefix))
        .count()
}

/// Whether every thread named `prefix*` has left `/proc/self/task` (waiting up to 10 s: the
/// exiting threads need the CPU to get there, and a loaded machine may not give it at once). A
/// joined thread can still be listed for a moment: `pthread_join` returns when the kernel
/// clears the thread's tid (in `exit_mm`), which comes before the task is released from
/// `/proc` (`release_task`). So "joined" is checked as "gone shortly after", not "gone at once".
pub fn threads_gone(prefix: &str) -> bool {
    wait_until(Duration::from_secs(10), || threads_named(prefix) == 0)
}

/// Poll `cond` until it holds or `limit` passes; returns whether it held. For state that
/// another thread updates with no event to wait on (counters, gauges, fd tables).
pub fn wait_until(limit: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + limit;
    loop {
        if cond() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
}
