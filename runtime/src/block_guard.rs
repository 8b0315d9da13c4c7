//! Blocking calls are refused on shard threads. A shard runs every task of its core on one
//! thread: a call that blocks it stalls them all, and deadlocks outright when it waits for
//! work queued on that same shard. Each blocking call of the API (`RemoteHandle::wait`,
//! `Runtime::run_on`, `ListenerHandle::stop`, ...) checks first and panics with a message
//! that names it and its async form, as tokio does for `block_on` inside a runtime.

use crate::shard::try_shard_id;

/// Panic when called on a shard thread: `operation` (a blocking call, named in the message)
/// may only run on threads outside the runtime. Blocking APIs built on corewire call it
/// first, so misuse fails at once instead of stalling or deadlocking the shard.
#[track_caller]
pub fn assert_can_block(operation: &str) {
    if let Some(shard) = try_shard_id() {
        panic!(
            "Cannot block the current thread from within a corewire shard: {operation} would \
             stall shard {shard} (and deadlock if it waits for work of that shard). Use its \
             async form on a shard, or call it from a thread outside the runtime."
        );
    }
}
