//! A replica's full synchronization, without fork: the point-in-time snapshot BGSAVE uses
//! (`rdb_save.rs`), written to the replica's connection instead of a file.
//!
//! 1. Wait for the snapshot to be free (a BGSAVE or an AOF rewrite holds it), then begin
//!    it on every shard; in the same step each shard starts streaming its writes (if it
//!    was not already) and records its cut (`repl_feed.rs`): its writes before the cut are
//!    in the RDB, the ones after go to the replica after it.
//!    A node that follows a master (a chain) begins it while the master's stream is held
//!    instead, and the replica's stream starts at the node's offset (`repl_master/follow.rs`).
//! 2. Once every shard's stream has reached the hub up to its cut, the replica's stream
//!    starts at `master_repl_offset` less what is already queued for it (its writes after
//!    the cuts): `+FULLRESYNC <replid> <that offset>`. From there on its offset counts the
//!    same bytes as the master's.
//! 3. The RDB: with `capa eof` (what redis-server replicas send) the diskless form
//!    `$EOF:<40 random chars>\r\n<rdb><the same 40 chars>`, walked slice by slice as the
//!    shards produce it; otherwise `$<len>\r\n<rdb>`, buffered first in a temporary file in
//!    `dir` to learn the length.
//! 4. The replica is online (after a diskless RDB, once it acknowledged loading it): its
//!    queued stream follows.

use std::time::Duration;

use bytes::Bytes;
use corewire::runtime::fs as ring_fs;
use corewire::runtime::sleep;

use super::rdb_file;
use super::rdb_save::{self, on_all, on_all_async};
use super::repl_master::{self, send, Gone};
use super::shard::{self, now_ms};
use super::sink::SinkKey;
use crate::rdb::{crc64, RdbWriter};
use crate::repl::LinkState;

/// How often a sync waiting for the snapshot (or for the cuts) looks again.
const RETRY: Duration = Duration::from_millis(5);

/// Where the RDB goes: the connection (diskless), or a temporary file first.
enum Sink {
    Socket,
    File {
        file: ring_fs::File,
        path: std::path::PathBuf,
        len: u64,
    },
}

/// Synchronizes replica `id` (connection `sink` on shard `shard`) fully.
pub(super) async fn full_sync(
    id: u64,
    shard: usize,
    sink: SinkKey,
    eof: bool,
    psync: bool,
) -> Result<(), Gone> {
    let here = shard::current();
    let shared = here.shared.clone();
    let shards = here.count;
    drop(here);
    let all: Vec<usize> = (0..shards).collect();
    // 1. The snapshot, with the cuts.
    let (target, keys, expires) = loop {
        if !repl_master::alive(id) {
            return Err(Gone);
        }
        if !shared.rdb.lock().try_begin() {
            sleep(RETRY).await;
            continue;
        }
        let target = rdb_save::target(&shared);
        let limits = target.limits;
        // A node that follows a master cuts while its master's stream is held: the
        // snapshot is then that stream up to the node's offset.
        let following = repl_master::following();
        let hold = match following {
            true => Some(super::replica::hold_stream(&shard::current()).await),
            false => None,
        };
        let begun = on_all(&all, move || {
            let begun = rdb_save::begin_here(limits);
            (begun, super::repl_feed::start_and_cut())
        })
        .await;
        let mut cuts = Vec::with_capacity(shards);
        let (mut keys, mut expires) = (0, 0);
        let mut refused = false;
        for result in &begun {
            match result {
                Some((Ok((k, e)), cut)) => {
                    keys += k;
                    expires += e;
                    cuts.push(*cut);
                }
                Some((Err(()), cut)) => {
                    refused = true;
                    cuts.push(*cut);
                }
                None => refused = true,
            }
        }
        if refused {
            // An AOF rewrite holds a shard's snapshot: undo and try again later.
            let began: Vec<usize> = (begun.iter().enumerate())
                .filter(|(_, r)| matches!(r, Some((Ok(_), _))))
                .map(|(i, _)| i)
                .collect();
            on_all(&began, || rdb_save::end_here(false)).await;
            shared.rdb.lock().in_progress = false;
            sleep(RETRY * 20).await;
            continue;
        }
        let cut = match following {
            true => repl_master::set_follow_cut(id),
            false => repl_master::set_cuts(id, cuts),
        };
        drop(hold);
        if let Err(gone) = cut {
            on_all(&all, || rdb_save::end_here(false)).await;
            shared.rdb.lock().in_progress = false;
            return Err(gone);
        }
        break (target, keys, expires);
    };
    let result = transfer(
        id, shard, sink, eof, psync, &shared, &all, target, keys, expires,
    )
    .await;
    on_all(&all, || rdb_save::end_here(false)).await;
    shared.rdb.lock().in_progress = false;
    result?;
    if eof {
        // A diskless RDB has no length: the replica finds its end by the mark in the last
        // bytes of a read, so nothing may follow the mark until the replica has loaded the RDB
        // and said so with a `REPLCONF ACK` (Redis's `repl_put_online_on_ack`). Stream bytes
        // read together with the mark (a PING, a write) hide it, and the replica waits forever.
        while !repl_master::acked(id)? {
            sleep(RETRY).await;
        }
    }
    repl_master::set_state(id, LinkState::Online)
}

#[allow(clippy::too_many_arguments)]
async fn transfer(
    id: u64,
    shard: usize,
    sink: SinkKey,
    eof: bool,
    psync: bool,
    shared: &super::shared::ServerShared,
    all: &[usize],
    target: rdb_save::Target,
    keys: u64,
    expires: u64,
) -> Result<(), Gone> {
    // 2. Where its stream starts.
    let (replid, start) = loop {
        if let Some(found) = repl_master::sync_start(id)? {
            break found;
        }
        sleep(Duration::from_millis(1)).await;
    };
    repl_master::clear_acked(id)?;
    if psync {
        let line = format!("+FULLRESYNC {replid} {start}\r\n");
        send(id, shard, sink, Bytes::from(line)).await?;
    }
    repl_master::set_state(id, LinkState::SendBulk)?;
    // 3. The RDB.
    let mark = crate::repl::random_replid();
    let mut out = if eof {
        send(id, shard, sink, Bytes::from(format!("$EOF:{mark}\r\n"))).await?;
        Sink::Socket
    } else {
        let (path, file) = rdb_save::create_temp(&target.dir, &format!("-{id}")).await;
        let file = file.map_err(|error| {
            tracing::error!(%error, path = %path.display(), "replica sync: temporary RDB");
            Gone
        })?;
        Sink::File { file, path, len: 0 }
    };
    let mut crc = 0;
    let mut head = Vec::new();
    RdbWriter::header(&mut head, now_ms() / 1000, shared.info().used_memory_rss);
    for code in rdb_save::library_codes(shared) {
        RdbWriter::function(&mut head, &code);
    }
    RdbWriter::select_db(&mut head, 0, keys, expires);
    crc = crc64::update(crc, &head);
    let written = async {
        out.write(id, shard, sink, Bytes::from(head)).await?;
        let mut walking = all.to_vec();
        let hooks = rdb_save::TestHooks::from_env();
        while !walking.is_empty() {
            if let Some(delay) = hooks.step_delay {
                sleep(delay).await;
            }
            let step_keys = hooks.step_keys;
            let slices = on_all_async(&walking, move || rdb_save::step_here(step_keys)).await;
            // Served what arrived during the step before checksumming its slices.
            corewire::runtime::yield_now().await;
            let mut next = Vec::new();
            for (&s, slice) in walking.iter().zip(slices) {
                let rdb_save::Slice {
                    bytes, finished, ..
                } = slice.ok_or(Gone)?;
                if !bytes.is_empty() {
                    crc = rdb_file::checksum(crc, &bytes).await;
                    out.write(id, shard, sink, bytes).await?;
                }
                if !finished {
                    next.push(s);
                }
            }
            walking = next;
        }
        let mut tail = Vec::new();
        RdbWriter::finish(&mut tail, crc);
        if !target.checksum {
            let len = tail.len();
            tail[len - 8..].fill(0);
        }
        out.write(id, shard, sink, Bytes::from(tail)).await?;
        match &out {
            Sink::Socket => send(id, shard, sink, Bytes::from(mark)).await,
            Sink::File { file, len, .. } => {
                send(id, shard, sink, Bytes::from(format!("${len}\r\n"))).await?;
                let mut offset = 0;
                while offset < *len {
                    let want = (*len - offset).min(256 << 10) as usize;
                    let (read, buf) = file
                        .read_at(bytes::BytesMut::with_capacity(want), offset)
                        .await;
                    let n = read.map_err(|_| Gone)?;
                    if n == 0 {
                        return Err(Gone);
                    }
                    offset += n as u64;
                    send(id, shard, sink, buf.freeze()).await?;
                }
                Ok(())
            }
        }
    }
    .await;
    if let Sink::File { file, path, .. } = out {
        let _ = file.close().await;
        let _ = ring_fs::remove_file(&path).await;
    }
    written
}

impl Sink {
    async fn write(
        &mut self,
        id: u64,
        shard: usize,
        sink: SinkKey,
        bytes: Bytes,
    ) -> Result<(), Gone> {
        match self {
            Sink::Socket => send(id, shard, sink, bytes).await,
            Sink::File { file, len, .. } => {
                let n = bytes.len() as u64;
                file.write_all_at(bytes, *len).await.map_err(|_| Gone)?;
                *len += n;
                if repl_master::alive(id) {
                    Ok(())
                } else {
                    Err(Gone)
                }
            }
        }
    }
}
