//! The shard a thread runs, reachable from anywhere on that thread.

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;

use super::local::LocalStorage;
use super::stall::StallDetector;
use super::{ShardId, ShardRemote};
use crate::driver::Driver;
use crate::executor::{Executor, TaskKey};
use crate::poller::Pollers;
use crate::timer::Timers;

pub(crate) struct ShardContext {
    pub(crate) id: ShardId,
    pub(crate) remote: Arc<ShardRemote>,
    /// Every shard of the runtime, indexed by id: the mesh.
    pub(crate) peers: Arc<[Arc<ShardRemote>]>,
    pub(crate) executor: Executor,
    pub(crate) driver: RefCell<Driver>,
    pub(crate) timers: RefCell<Timers>,
    pub(crate) pollers: Pollers,
    /// `shard_local!` values.
    pub(crate) locals: LocalStorage,
    /// `None` when the stall detector is off.
    pub(crate) stall: Option<StallDetector>,
}

thread_local! {
    static CURRENT: RefCell<Option<Rc<ShardContext>>> = const { RefCell::new(None) };
}

pub(crate) fn enter(ctx: Rc<ShardContext>) {
    CURRENT.with(|c| *c.borrow_mut() = Some(ctx));
}

pub(crate) fn exit() -> Option<Rc<ShardContext>> {
    CURRENT.with(|c| c.borrow_mut().take())
}

pub(crate) fn try_current() -> Option<Rc<ShardContext>> {
    CURRENT.try_with(|c| c.borrow().clone()).ok().flatten()
}

/// The current shard. Panics off a shard thread: shard-local APIs (spawn_local, I/O ops,
/// timers) only make sense on a shard, and calling them elsewhere is a programming error.
pub(crate) fn current() -> Rc<ShardContext> {
    try_current().expect("not on a corewire shard thread (use Runtime::spawn_on)")
}

pub(crate) fn with_driver<R>(f: impl FnOnce(&mut Driver) -> R) -> R {
    let ctx = current();
    let mut d = ctx.driver.borrow_mut();
    f(&mut d)
}

pub(crate) fn try_with_driver<R>(f: impl FnOnce(&mut Driver) -> R) -> Option<R> {
    let ctx = try_current()?;
    let mut d = ctx.driver.try_borrow_mut().ok()?;
    Some(f(&mut d))
}

pub(crate) fn with_executor<R>(f: impl FnOnce(&Executor) -> R) -> R {
    f(&current().executor)
}

/// `f` on the current shard's executor, without taking a reference to the shard; `None` off a
/// shard thread.
pub(crate) fn try_with_executor<R>(f: impl FnOnce(&Executor) -> R) -> Option<R> {
    CURRENT
        .try_with(|c| c.borrow().as_ref().map(|ctx| f(&ctx.executor)))
        .ok()
        .flatten()
}

/// Queue `key` locally when this thread runs the shard `remote` belongs to.
pub(crate) fn schedule_if_current(remote: &Arc<ShardRemote>, key: TaskKey) -> bool {
    CURRENT
        .try_with(|c| match &*c.borrow() {
            Some(ctx) if Arc::ptr_eq(&ctx.remote, remote) => {
                ctx.executor.schedule(key);
                true
            }
            _ => false,
        })
        .unwrap_or(false)
}

/// The id of the shard this thread runs. Panics off a shard thread.
pub fn shard_id() -> ShardId {
    current().id
}

/// The id of the shard this thread runs, `None` off a shard thread.
pub fn try_shard_id() -> Option<ShardId> {
    try_current().map(|c| c.id)
}

/// How many shards the runtime of this thread has. Panics off a shard thread.
pub fn shard_count() -> usize {
    current().peers.len()
}

/// Whether anything besides the running task waits for this shard: ready or yielded tasks,
/// other shards' messages and wake-ups, completions or readiness the driver has not reaped
/// yet, and (io_uring) ops queued and not yet submitted, such as a reply just sent. (Timers
/// and pollers are not looked at.) For long work a task does in bounded pieces, such as a
/// snapshot walk: it ends a piece early when this is true, so what waits runs before the
/// next piece. Cheap: loads on io_uring; on epoll a `poll` of the set at most every 10 µs.
/// `false` off a shard thread.
pub fn work_waiting() -> bool {
    let Some(ctx) = try_current() else {
        return false;
    };
    if ctx.executor.has_ready() || ctx.executor.has_yielded() || ctx.remote.has_pending_work() {
        return true;
    }
    // Borrowed only while the loop itself reaps, when no task runs.
    ctx.driver
        .try_borrow_mut()
        .is_ok_and(|mut driver| driver.work_waiting())
}
