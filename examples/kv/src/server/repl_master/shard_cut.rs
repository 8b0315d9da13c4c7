//! One cut for all of a replica's shard links (the rounds: `repl::shard_link::Rounds`).
//!
//! A link that needs a full sync joins its replica's round and waits; the link that
//! completes it takes the cut for all of them ([`take`]): the node's snapshot slot, then
//! every shard held as a transaction over all shards does (`server/txn/held.rs`: ascending
//! order, the lock requests EXEC sends, so the cut serialises with every transaction and
//! program over several shards), and on each shard in one step its snapshot begun, its
//! feed started and its link's stream offset taken. Then the shards are let go and each
//! link sends its part of the snapshot and its stream, all at once (the node's snapshot
//! slot is held until the last part is sent).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::Duration;

use corewire::runtime::sleep;

use super::link::Gone;
use super::shard_link::{self, alive};
use crate::repl::shard_link::{Joined, ReplicaAddr, Rounds};
use crate::server::rdb_save;
use crate::server::shard;
use crate::server::shared::ServerShared;
use crate::server::txn::held::Held;

/// How often a link waiting for its cut looks again.
const RETRY: Duration = Duration::from_millis(5);

/// The node's snapshot slot, held for a cut's parts until the last one is sent.
struct SlotHold(Arc<ServerShared>);

impl Drop for SlotHold {
    fn drop(&mut self) {
        self.0.rdb.lock().in_progress = false;
    }
}

/// A link's part of a cut: its shard's snapshot began (its keys and expiring keys), and
/// its stream from `offset` under `replid`.
struct Cut {
    replid: String,
    offset: u64,
    keys: u64,
    expires: u64,
    checksum: bool,
    slot: Arc<SlotHold>,
}

/// Releases this shard's snapshot and (with the last part) the node's, however the sync
/// ends.
pub(super) struct Snapshot {
    _slot: Arc<SlotHold>,
}

impl Drop for Snapshot {
    fn drop(&mut self) {
        rdb_save::end_here(false);
    }
}

/// What the link's full sync needs of its cut.
pub(super) struct Taken {
    pub snapshot: Snapshot,
    pub replid: String,
    pub offset: u64,
    pub keys: u64,
    pub expires: u64,
    pub checksum: bool,
}

#[derive(Default)]
struct State {
    rounds: Rounds,
    /// Cuts taken, by (shard, link id), until their links take them.
    cuts: HashMap<(usize, u64), Cut>,
}

fn state() -> MutexGuard<'static, State> {
    static STATE: OnceLock<Mutex<State>> = OnceLock::new();
    let state = STATE.get_or_init(Mutex::default);
    // Every update is a few map operations: a panic while holding it leaves it usable.
    state.lock().unwrap_or_else(|p| p.into_inner())
}

/// Whether `replica`'s links sync in full now (its round gathers).
pub(super) fn forced(replica: &ReplicaAddr) -> bool {
    state().rounds.forced(replica)
}

/// A link of `replica` syncs in full: its round opens if none gathers (`true`: drop the
/// replica's streaming links, so they join it).
pub(super) fn open(replica: &ReplicaAddr, shards: usize) -> bool {
    state().rounds.open(replica, shards)
}

/// On link `id`'s shard: waits for the replica's cut (taking it when this link completes
/// the round).
pub(super) async fn wait(id: u64, replica: ReplicaAddr) -> Result<Taken, Gone> {
    let here = shard::current();
    let (at, shards, shared) = (here.id, here.count, here.shared.clone());
    drop(here);
    let joined = state().rounds.join(&replica, shards, at, id);
    if let Joined::Cut(ids) = joined {
        take(&shared, ids).await;
    }
    loop {
        // A part taken is ended here even when its link went meanwhile.
        if let Some(cut) = state().cuts.remove(&(at, id)) {
            let taken = Taken {
                snapshot: Snapshot { _slot: cut.slot },
                replid: cut.replid,
                offset: cut.offset,
                keys: cut.keys,
                expires: cut.expires,
                checksum: cut.checksum,
            };
            return if alive(id) { Ok(taken) } else { Err(Gone) };
        }
        if !alive(id) {
            state().rounds.leave(&replica, at, id);
            // A cut may have been taken with this link meanwhile: end its part.
            if let Some(cut) = state().cuts.remove(&(at, id)) {
                drop(Snapshot { _slot: cut.slot });
            }
            return Err(Gone);
        }
        sleep(RETRY).await;
    }
}

/// What one shard's step of a cut found.
enum Step {
    Cut(String, u64, u64, u64),
    /// The link is gone (nothing begun).
    Gone,
    /// An AOF rewrite holds this shard's snapshot.
    Busy,
}

/// Takes the cut for links `ids` (shard `i`'s link is `ids[i]`).
async fn take(shared: &Arc<ServerShared>, ids: Vec<u64>) {
    loop {
        if !shared.rdb.lock().try_begin() {
            sleep(RETRY).await;
            continue;
        }
        let slot = Arc::new(SlotHold(shared.clone()));
        let target = rdb_save::target(shared);
        let (limits, checksum) = (target.limits, target.checksum);
        // A transaction over several shards decides whether it is grouped (gets barriers)
        // when it is planned, before it takes its shards: one planned before grouping
        // began may still be waiting for them. Holding every shard once and letting go
        // lets those run before the cut (into the snapshot); every one the cut's hold
        // serialises after is grouped.
        crate::server::repl_feed::start_grouping();
        let all: Vec<usize> = (0..ids.len()).collect();
        {
            let settle = Held::new(shard::current());
            settle.lock(&all, None).await;
        }
        let held = Held::new(shard::current());
        held.lock(&all, None).await;
        let mut steps = Vec::with_capacity(ids.len());
        for (s, &id) in ids.iter().enumerate() {
            steps.push(on_shard(s, move || step(id, limits)).await);
        }
        held.release();
        drop(held);
        let busy = steps
            .iter()
            .any(|s| matches!(s, Some(Step::Busy)) || s.is_none());
        if busy {
            for (s, step) in steps.iter().enumerate() {
                if let Some(Step::Cut(..)) = step {
                    on_shard(s, || rdb_save::end_here(false)).await;
                }
            }
            drop(slot);
            sleep(RETRY * 20).await;
            continue;
        }
        let mut state = state();
        for (s, (step, &id)) in steps.into_iter().zip(&ids).enumerate() {
            if let Some(Step::Cut(replid, offset, keys, expires)) = step {
                let cut = Cut {
                    replid,
                    offset,
                    keys,
                    expires,
                    checksum,
                    slot: slot.clone(),
                };
                state.cuts.insert((s, id), cut);
            }
        }
        return;
    }
}

/// On link `id`'s shard, held: its snapshot begins, its feed starts and its stream's
/// offset is taken, in one step.
fn step(id: u64, limits: crate::rdb::Limits) -> Step {
    if !alive(id) {
        return Step::Gone;
    }
    let Ok((keys, expires)) = rdb_save::begin_here(limits) else {
        return Step::Busy;
    };
    crate::server::repl_feed::start_and_cut();
    match shard_link::cut(id) {
        Ok((replid, offset)) => Step::Cut(replid, offset, keys, expires),
        Err(Gone) => {
            rdb_save::end_here(false);
            Step::Gone
        }
    }
}

/// Runs `f` on shard `target` and returns what it returned (`None`: the shard is gone).
async fn on_shard<R, F>(target: usize, f: F) -> Option<R>
where
    F: FnOnce() -> R + Send + 'static,
    R: Send + 'static,
{
    if target == shard::current().id {
        return Some(f());
    }
    corewire::runtime::submit_to(target, move || async move { f() })
        .await
        .ok()
}
