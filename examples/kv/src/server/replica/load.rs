//! A full resync's snapshot into the shards: clients get `-LOADING` meanwhile (until then
//! they were served the old data), every shard is flushed, then the snapshot is read from
//! its spool file piece by piece and decoded once, here (memory: a piece and the item being
//! read), and each key goes to the shard that owns it in bounded batches, one batch in
//! flight at a time; each shard rebuilds its keys as start-up does (`rdb_load::apply`).
//! Keys already past their TTL are kept: the master deletes them when it sees fit, as on a
//! Redis replica. With the AOF on, each shard then rewrites its log, which did not see the
//! load.
//!
//! On shard links each shard loads its own part ([`shard_part`]) into its own store only,
//! on its own thread: only that shard is flushed, and a key that does not map to it is
//! refused (the master's part is not what the negotiated key map promised: the link
//! drops, and the part is asked again).

use std::rc::Rc;

use super::super::rdb_load::{self, LoadedKey};
use super::super::shard::{self, now_ms, Shard};
use super::super::sink::{Origin, SinkKey};
use crate::command::Command;
use crate::rdb::{IncrementalDecoder, Item};
use crate::routing::shard_of;
use bytes::BytesMut;
use corewire::runtime::fs::File;

/// Keys per batch sent to a shard.
const BATCH: usize = 1024;
/// Snapshot bytes decoded into batches before all of them go to their shards (so large
/// values do not pile up in batches).
const BATCH_BYTES: usize = 8 << 20;
/// Bytes read from the spool file at a time.
const PIECE: usize = 1 << 20;
/// The largest single item (a key with its value) accepted.
const MAX_ITEM: usize = 1 << 32;

/// Loads the snapshot in `file` (`len` bytes) in place of every shard's data; the keys
/// loaded.
pub(super) async fn full_sync(
    shard: &Rc<Shard>,
    link: SinkKey,
    file: &File,
    len: u64,
) -> Result<u64, String> {
    let gate = shard.shared.replica.gate.clone();
    gate.set_loading(true);
    let loaded = load(shard, link, file, len).await;
    gate.set_loading(false);
    loaded
}

/// The snapshot's items, read from the file as needed.
struct Items<'a> {
    file: &'a File,
    len: u64,
    read: u64,
    decoder: IncrementalDecoder,
}

impl Items<'_> {
    async fn next(&mut self) -> Result<Item, String> {
        loop {
            if let Some(item) = self.decoder.next_item().map_err(|e| e.to_string())? {
                return Ok(item);
            }
            if self.read == self.len {
                self.decoder.end_input();
                continue;
            }
            let want = (self.len - self.read).min(PIECE as u64) as usize;
            let (result, buf) = self
                .file
                .read_at(BytesMut::with_capacity(want), self.read)
                .await;
            let n = result.map_err(|e| format!("reading the snapshot: {e}"))?;
            if n == 0 {
                return Err("the snapshot file is shorter than received".into());
            }
            self.read += n as u64;
            self.decoder.push(&buf);
        }
    }
}

async fn load(shard: &Rc<Shard>, link: SinkKey, file: &File, len: u64) -> Result<u64, String> {
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
    let mut items = Items {
        file,
        len,
        read: 0,
        decoder: IncrementalDecoder::new(MAX_ITEM),
    };
    let mut batches: Vec<Vec<LoadedKey>> = (0..count).map(|_| Vec::new()).collect();
    let mut codes = Vec::new();
    let (mut db, mut keys, mut skipped) = (0, 0u64, 0u64);
    let mut flushed_at = 0;
    loop {
        if items.decoder.offset() - flushed_at > BATCH_BYTES {
            flushed_at = items.decoder.offset();
            for (target, batch) in batches.iter_mut().enumerate() {
                if !batch.is_empty() {
                    apply(target, std::mem::take(batch)).await?;
                }
            }
        }
        match items.next().await? {
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

/// Loads shard `shard.id`'s part of the master's snapshot in `file` (`len` bytes) in place
/// of this shard's data; the keys loaded. The function libraries come with shard 0's part
/// only, which replaces the node's.
pub(super) async fn shard_part(
    shard: &Rc<Shard>,
    link: SinkKey,
    file: &File,
    len: u64,
) -> Result<u64, String> {
    let gate = shard.shared.replica.gate.clone();
    gate.set_loading(true);
    let loaded = load_part(shard, link, file, len).await;
    gate.set_loading(false);
    loaded
}

async fn load_part(shard: &Rc<Shard>, link: SinkKey, file: &File, len: u64) -> Result<u64, String> {
    let (here, count) = (shard.id, shard.count);
    let origin = Origin {
        shard: here,
        sink: link,
        seq: 0,
        part: None,
    };
    let _ = shard
        .store()
        .execute(Command::FlushAll, now_ms(), &mut crate::change::NoLog);
    shard.tracking_flushed();
    let mut items = Items {
        file,
        len,
        read: 0,
        decoder: IncrementalDecoder::new(MAX_ITEM),
    };
    let mut batch = Vec::new();
    let mut codes = Vec::new();
    let (mut db, mut keys, mut skipped) = (0, 0u64, 0u64);
    loop {
        match items.next().await? {
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
                let owner = shard_of(&key, count);
                if owner != here {
                    return Err(format!(
                        "shard {here}'s snapshot part holds a key of shard {owner} \
                         ({} bytes): the master's key map is not this node's",
                        key.len()
                    ));
                }
                if value.is_empty_collection() {
                    continue;
                }
                keys += 1;
                batch.push(LoadedKey::new(key, value, expire_at_ms)?);
                if batch.len() >= BATCH {
                    rdb_load::apply(&mut shard.store(), std::mem::take(&mut batch));
                }
            }
            Item::ResizeDb { .. } | Item::Aux(..) => {}
        }
    }
    if !batch.is_empty() {
        rdb_load::apply(&mut shard.store(), batch);
    }
    if skipped > 0 {
        tracing::error!(
            skipped,
            shard = here,
            "the master's snapshot has keys in databases other than 0, which corewire-kv \
             does not have: they were not loaded"
        );
    }
    if here == 0 {
        let payload = crate::scripting::functions::payload_of(codes.iter().map(|c| &c[..]));
        super::super::script::restore_logged(&shard.shared, &payload);
    }
    if shard.shared.aof_enabled {
        let _ = shard.execute_store(origin, Command::BgRewriteAof, now_ms());
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
