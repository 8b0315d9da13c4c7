//! Pollers: work a shard checks on every loop iteration, between its tasks and its ring — the
//! RDMA completion-queue poller is one. A poller that busy-polls keeps the shard from parking,
//! but it never blocks the loop, so tasks, timers and ring I/O on the same shard keep running.

use std::cell::{Cell, RefCell};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::Instant;

use crate::executor::panic_message;
use crate::shard::context;
use crate::shard::stall::{StallDetector, StallSource};
use crate::shard::{ShardId, ShardStats};

/// What one call to [`Poller::poll`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum PollOutcome {
    /// Nothing to do.
    Idle,
    /// Handled this many items (completions, messages...).
    Progress(usize),
}

/// Work a shard runs every loop iteration besides its tasks (a completion queue to poll, ...): see [`register_poller`].
pub trait Poller {
    /// Shown in logs and traces.
    fn name(&self) -> &str;

    /// Called once per loop iteration. Must not block.
    fn poll(&mut self) -> PollOutcome;

    /// Whether the shard may sleep in its ring while this poller is idle. A busy-polling
    /// poller says `false`; an event-driven one waits on an fd through the ring and says `true`.
    fn may_park(&self) -> bool {
        true
    }
}

/// Identifies a registered poller, to remove it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct PollerId(u64);

#[derive(Default)]
pub(crate) struct Pollers {
    active: RefCell<Vec<(PollerId, Box<dyn Poller>)>>,
    /// Registered while the active list was being polled.
    added: RefCell<Vec<(PollerId, Box<dyn Poller>)>>,
    removed: RefCell<Vec<PollerId>>,
    next_id: Cell<u64>,
    may_park: Cell<bool>,
}

impl Pollers {
    /// Poll every poller once, timing each call when `stall` is on; returns the total
    /// progress. A poller that panics is counted, logged and dropped; the shard and its other
    /// pollers carry on.
    pub(crate) fn run(
        &self,
        stall: Option<&StallDetector>,
        shard: ShardId,
        stats: &ShardStats,
    ) -> usize {
        let mut progress = 0;
        let mut may_park = true;
        let mut gone = Vec::new();
        if let Ok(mut active) = self.active.try_borrow_mut() {
            let mut mark = stall.map(|_| Instant::now());
            let mut panicked = Vec::new();
            for (id, p) in active.iter_mut() {
                let outcome = catch_unwind(AssertUnwindSafe(|| (p.poll(), p.may_park())));
                match outcome {
                    Ok((outcome, parks)) => {
                        if let PollOutcome::Progress(n) = outcome {
                            progress += n;
                        }
                        may_park &= parks;
                    }
                    Err(panic) => {
                        stats.poller_panics.incr();
                        let name = catch_unwind(AssertUnwindSafe(|| p.name().to_string()))
                            .unwrap_or_else(|_| "?".into());
                        tracing::error!(
                            poller = %name,
                            panic = %panic_message(&panic),
                            "poller panicked; dropped it"
                        );
                        panicked.push(*id);
                        continue;
                    }
                }
                if let (Some(detector), Some(start)) = (stall, mark.as_mut()) {
                    let now = Instant::now();
                    detector.check(shard, stats, *start, now, || StallSource::Poller {
                        name: p.name().to_string(),
                    });
                    *start = now;
                }
            }
            active.append(&mut self.added.borrow_mut());
            let mut removed = std::mem::take(&mut *self.removed.borrow_mut());
            removed.extend(panicked);
            let mut i = 0;
            while i < active.len() && !removed.is_empty() {
                if removed.contains(&active[i].0) {
                    gone.push(active.swap_remove(i));
                } else {
                    i += 1;
                }
            }
        }
        // Dropped outside the borrow: a poller's destructor may touch the shard (and may panic
        // too, which must not take the shard down either).
        for p in gone {
            if let Err(panic) = catch_unwind(AssertUnwindSafe(|| drop(p))) {
                stats.poller_panics.incr();
                tracing::error!(panic = %panic_message(&panic), "dropping a poller panicked");
            }
        }
        self.may_park.set(may_park);
        progress
    }

    pub(crate) fn may_park(&self) -> bool {
        // `may_park` is only meaningful once the active list has been polled.
        (self.active.borrow().is_empty() || self.may_park.get())
            && self.added.borrow().iter().all(|(_, p)| p.may_park())
    }

    pub(crate) fn len(&self) -> usize {
        self.active.borrow().len() + self.added.borrow().len()
    }

    pub(crate) fn drop_all(&self) {
        let active = std::mem::take(&mut *self.active.borrow_mut());
        let added = std::mem::take(&mut *self.added.borrow_mut());
        for (_, p) in active.into_iter().chain(added) {
            if let Err(panic) = catch_unwind(AssertUnwindSafe(|| drop(p))) {
                tracing::error!(panic = %panic_message(&panic), "dropping a poller panicked");
            }
        }
    }
}

/// Register a poller on the current shard.
pub fn register_poller(poller: Box<dyn Poller>) -> PollerId {
    let ctx = context::current();
    let id = PollerId(ctx.pollers.next_id.get() + 1);
    ctx.pollers.next_id.set(id.0);
    ctx.pollers.added.borrow_mut().push((id, poller));
    id
}

/// Remove a poller from the current shard; it is dropped at the end of the next iteration.
pub fn unregister_poller(id: PollerId) {
    let ctx = context::current();
    let mut added = ctx.pollers.added.borrow_mut();
    if let Some(pos) = added.iter().position(|(i, _)| *i == id) {
        let p = added.remove(pos);
        drop(added);
        drop(p);
        return;
    }
    drop(added);
    ctx.pollers.removed.borrow_mut().push(id);
}
