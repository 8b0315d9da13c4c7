//! A shard link's full synchronization, on its shard: this shard's part of the
//! point-in-time snapshot (the walk BGSAVE and the single stream's full sync use,
//! `rdb_save.rs`), sent as a diskless RDB of its own, then its stream from the cut.
//!
//! 1. Wait for the replica's cut (`shard_cut.rs`): one for all of its links, taken with
//!    every shard held as a transaction over all shards holds them, where each shard began
//!    its snapshot, started its feed and took its stream's offset in one step: every write
//!    before it is in the snapshot, every one after it goes to the link. The links then
//!    send their parts at once.
//! 2. `+FULLRESYNC <replid> <offset>` (the offset counts this shard's stream), then
//!    `$EOF:<mark>`, the RDB (header, the function libraries on shard 0's link only,
//!    `SELECTDB 0` with this shard's counts, its keys, the checksum) and the mark. A shard
//!    link always asks for `capa eof`.
//! 3. Once the replica shard acknowledged loading it, the link is online and its queued
//!    stream follows.

use std::time::Duration;

use bytes::Bytes;
use corewire::runtime::sleep;

use super::link::Gone;
use super::shard_link::{self, acked, set_state};
use crate::rdb::{crc64, RdbWriter};
use crate::repl::LinkState;
use crate::server::shard::{self, now_ms};
use crate::server::{rdb_file, rdb_save};

/// How often a sync waiting for its replica's acknowledgement looks again.
const RETRY: Duration = Duration::from_millis(5);

/// Synchronizes shard link `id` (of the replica at `replica`) fully.
pub(super) async fn full_sync(id: u64, replica: (String, u16)) -> Result<(), Gone> {
    let here = shard::current();
    let shared = here.shared.clone();
    let with_functions = here.id == 0;
    drop(here);
    // 1. The cut, with the replica's other links.
    let cut = super::shard_cut::wait(id, replica).await?;
    let (snapshot, replid, offset) = (cut.snapshot, cut.replid, cut.offset);
    let (keys, expires, checksum) = (cut.keys, cut.expires, cut.checksum);
    // 2. The RDB.
    shard_link::send(
        id,
        Bytes::from(format!("+FULLRESYNC {replid} {offset}\r\n")),
    )
    .await?;
    set_state(id, LinkState::SendBulk)?;
    let mark = crate::repl::random_replid();
    shard_link::send(id, Bytes::from(format!("$EOF:{mark}\r\n"))).await?;
    let mut head = Vec::new();
    RdbWriter::header(&mut head, now_ms() / 1000, shared.info().used_memory_rss);
    if with_functions {
        for code in rdb_save::library_codes(&shared) {
            RdbWriter::function(&mut head, &code);
        }
    }
    RdbWriter::select_db(&mut head, 0, keys, expires);
    let mut crc = crc64::update(0, &head);
    shard_link::send(id, Bytes::from(head)).await?;
    let hooks = rdb_save::TestHooks::from_env();
    loop {
        if let Some(delay) = hooks.step_delay {
            sleep(delay).await;
        }
        let slice = rdb_save::step_here(hooks.step_keys).await;
        if !slice.bytes.is_empty() {
            crc = rdb_file::checksum(crc, &slice.bytes).await;
            shard_link::send(id, slice.bytes).await?;
        }
        if slice.finished {
            break;
        }
        // The shard serves its clients between two steps.
        corewire::runtime::yield_now().await;
    }
    drop(snapshot);
    let mut tail = Vec::new();
    RdbWriter::finish(&mut tail, crc);
    if !checksum {
        let len = tail.len();
        tail[len - 8..].fill(0);
    }
    shard_link::send(id, Bytes::from(tail)).await?;
    shard_link::send(id, Bytes::from(mark)).await?;
    // 3. Nothing may follow the mark until the replica loaded the RDB (see `repl_sync.rs`).
    while !acked(id)? {
        sleep(RETRY).await;
    }
    set_state(id, LinkState::Online)
}
