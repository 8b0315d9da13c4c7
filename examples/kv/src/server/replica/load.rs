//! A full resync's snapshot into the shards: clients get `-LOADING` meanwhile (until then
//! they were served the old data), every shard is flushed, then the snapshot is decoded
//! once, here, and each key goes to the shard that owns it in bounded batches, one batch
//! in flight at a time; each shard rebuilds its keys as start-up does (`rdb_load::apply`).
//! Keys already past their TTL are kept: the master deletes them when it sees fit, as on a
//! Redis replica. With the AOF on, each shard then rewrites its log, which did not see the
//! load.

use std::rc::Rc;

use super::super::rdb_load::{self, LoadedKey};
use super::super::shard::{self, now_ms, Shard};
use super::super::sink::{Origin, SinkKey};
use crate::command::Command;
use crate::rdb::{Decoder, Item};
use crate::routing::shard_of;

/// Keys per batch sent to a shard.
const BATCH: usize = 1024;

/// Loads `snapshot` in place of every shard's data; the keys loaded.
pub(super) async fn full_sync(
    shard: &Rc<Shard>,
    link: SinkKey,
    snapshot: Vec<u8>,
) -> Result<u64, String> {
    let gate = shard.shared.replica.gate.clone();
    gate.set_loading(true);
    let loaded = load(shard, link, &snapshot).await;
    gate.set_loading(false);
    loaded
}

async fn load(shard: &Rc<Shard>, link: SinkKey, snapshot: &[u8]) -> Result<u64, String> {
    let count = shard.count;
    let origin = Origin {
        shard: 0,
        sink: link,
        seq: 0,
        part: None,
    };
    for target in 0..count {
        on_shard(target, move || {
            shard::with(|s| {
                let _ = s
                    .store()
                    .execute(Command::FlushAll, now_ms(), &mut crate::change::NoLog);
                s.tracking_flushed();
            })
        })
        .await?;
    }
    let mut decoder = Decoder::new(snapshot).map_err(|e| e.to_string())?;
    let mut batches: Vec<Vec<LoadedKey>> = (0..count).map(|_| Vec::new()).collect();
    let mut codes = Vec::new();
    let (mut db, mut keys, mut skipped) = (0, 0u64, 0u64);
    loop {
        match decoder.next_item().map_err(|e| e.to_string())? {
            Item::End => break,
            Item::SelectDb(index) => db = index,
            Item::Function(code) => codes.push(code),
            Item::Key {
                key,
                value,
                expire_at_ms,
            } => {
                if db != 0 {
                    skipped += 1;
                    continue;
                }
                if value.is_empty_collection() {
                    continue;
                }
                keys += 1;
                let target = shard_of(&key, count);
                batches[target].push(LoadedKey::new(key, value, expire_at_ms)?);
                if batches[target].len() >= BATCH {
                    let batch = std::mem::take(&mut batches[target]);
                    apply(target, batch).await?;
                }
            }
            Item::ResizeDb { .. } | Item::Aux(..) => {}
        }
    }
    for (target, batch) in batches.into_iter().enumerate() {
        if !batch.is_empty() {
            apply(target, batch).await?;
        }
    }
    if skipped > 0 {
        tracing::error!(
            skipped,
            "the master's snapshot has keys in databases other than 0, which corewire-kv \
             does not have: they were not loaded"
        );
    }
    // The master's libraries replace ours, none included (Redis empties them too).
    let payload = crate::scripting::functions::payload_of(codes.iter().map(|c| &c[..]));
    super::super::script::restore_logged(&shard.shared, &payload);
    if shard.shared.aof_enabled {
        for target in 0..count {
            on_shard(target, move || {
                shard::with(|s| {
                    let _ = s.execute_store(origin, Command::BgRewriteAof, now_ms());
                })
            })
            .await?;
        }
    }
    Ok(keys)
}

async fn apply(target: usize, batch: Vec<LoadedKey>) -> Result<(), String> {
    on_shard(target, move || {
        shard::with(|s| rdb_load::apply(&mut s.store(), batch))
    })
    .await
}

/// Runs `f` on shard `target` (here, when it is this one) and waits for it.
async fn on_shard<F>(target: usize, f: F) -> Result<(), String>
where
    F: FnOnce() + Send + 'static,
{
    if target == shard::current().id {
        f();
        return Ok(());
    }
    corewire::runtime::submit_to(target, move || async move { f() })
        .await
        .map_err(|_| format!("shard {target} is gone"))
}
