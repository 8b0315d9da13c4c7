use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::Wake;

use super::TaskKey;
use crate::shard::{context, ShardRemote};

/// The waker of one task. Wakes on the owning shard go straight to its run queue; wakes from
/// other threads go through the shard's remote queue and only cost a syscall when the shard is
/// parked in its ring.
pub(crate) struct TaskWaker {
    key: TaskKey,
    /// Set while the task sits in a run queue, so repeated wakes queue it once.
    pub(super) scheduled: AtomicBool,
    remote: Arc<ShardRemote>,
}

impl TaskWaker {
    pub(super) fn new(key: TaskKey, remote: Arc<ShardRemote>) -> TaskWaker {
        TaskWaker {
            key,
            scheduled: AtomicBool::new(false),
            remote,
        }
    }

    pub(super) fn mark_scheduled(&self) {
        self.scheduled.store(true, Ordering::Release);
    }
}

impl Wake for TaskWaker {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        if self.scheduled.swap(true, Ordering::AcqRel) {
            return;
        }
        if !context::schedule_if_current(&self.remote, self.key) {
            self.remote.wake_remote(self.key);
        }
    }
}
