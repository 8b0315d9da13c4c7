//! SAVE, BGSAVE and the save points: one RDB file for the whole node, written while every
//! shard keeps serving, holding each shard's keys as they were when the save began.
//!
//! There is no fork. Each shard takes a point-in-time image of its own keys with the same
//! snapshot the AOF rewrite uses (`store/snapshot.rs`): the snapshot marks where a walk over
//! the keyspace stands, the walk encodes a bounded slice of keys per step (as RDB key
//! records), and a write to a key the walk has not reached yet first encodes that key as it
//! still is (copy-on-write per key, Dragonfly's approach), so the image never sees a write
//! made after the save began. A key is encoded exactly once.
//!
//! One coordinator task, on shard 0, owns the file:
//!
//! 1. It begins the snapshot on every shard (one message each) and only then answers
//!    BGSAVE: a write acknowledged before BGSAVE was sent is in the file, a write sent after
//!    its reply is not. (A multi-shard write that runs while the snapshots begin may be in
//!    the file on some shards and not others, as for any cross-shard write in flight.)
//! 2. It writes the header (`REDIS0010`, AUX fields, the function libraries, `SELECTDB 0`,
//!    `RESIZEDB` with the key counts the snapshots began with) to `temp-<pid>.rdb` in `dir`.
//! 3. Round by round it asks every shard still walking for its next slice (the records its
//!    walk encoded plus the ones writes pushed ahead; about 192 KiB or 4096 keys), all
//!    shards at once, and appends the slices to the file through the ring, keeping a running
//!    CRC-64. A shard encodes its slice in holds that give way to its requests
//!    (`walk_pace.rs`), and the coordinator's checksum gives way the same way. Key records
//!    from different shards interleave freely: an RDB file's keys are in no particular
//!    order.
//! 4. `EOF` and the checksum, fsync, rename over `dir/dbfilename`, fsync of the directory.
//!    Only then is the save a success (LASTSAVE, `rdb_changes_since_last_save` reset to what
//!    was written after the save began). A failure removes the temporary file; the previous
//!    dump stays as it was.
//!
//! SAVE is the same save with its reply held until the file is in place (the shards keep
//! serving meanwhile, unlike Redis's SAVE, and the file is still point-in-time). The AOF
//! rewrite and a save share the store's snapshot, so they take turns: a rewrite waits for a
//! save to end; SAVE waits for a rewrite; BGSAVE during a rewrite is refused, or scheduled
//! with `BGSAVE SCHEDULE` (the save-point timer runs it once the rewrite is over).
//! FLUSHALL/FLUSHDB during a save first finish that shard's walk (the image keeps the keys
//! they remove). Keys removed by `maxmemory` eviction before the walk reaches them are not
//! in the image (they are removed, as after the save).

use std::cell::RefCell;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::Poll;
use std::time::{Duration, Instant};

use bytes::Bytes;
use corewire::runtime::fs::{self as ring_fs, File, OpenOptions};
use corewire::runtime::{mesh, sleep};

use super::rdb_file::{both, FileWriter};
use super::shard::{self, now_ms};
use super::shared::ServerShared;
use super::walk_pace::{HoldStats, Pace, WalkFigures};
use crate::command::{Command, KeyOp};
use crate::rdb::{Limits, RdbWriter};
use crate::reply::Reply;
use crate::store::Store;

/// Keys and bytes per walk step (one slice for the file) at most: a step stops at whichever
/// bound comes first. It holds its shard in shorter holds (`walk_pace.rs`).
const STEP_KEYS: usize = 4096;
const STEP_BYTES: usize = 192 << 10;
/// Keys encoded between two looks at the clock and at the shard's waiting work.
const KEYS_PER_CALL: usize = 32;

/// The node's save state (one per server, in [`ServerShared`]).
#[derive(Debug, Default)]
pub(crate) struct RdbShared {
    pub(super) state: Mutex<SaveState>,
    /// Unix seconds of the last successful save (LASTSAVE): start-up until one.
    pub(super) last_save_s: AtomicU64,
    /// Shard parts of FLUSHALL run so far (the last of each FLUSHALL saves).
    pub(super) flush_parts: AtomicU64,
}

#[derive(Debug, Default)]
pub(super) struct SaveState {
    pub(super) in_progress: bool,
    /// `BGSAVE SCHEDULE` during an AOF rewrite: run once it allows.
    pub(super) scheduled: bool,
    pub(super) started_ms: u64,
    pub(super) last_failed: bool,
    pub(super) last_try_ms: u64,
    pub(super) last_duration_s: Option<u64>,
    pub(super) saves: u64,
    pub(super) loaded_keys: u64,
    pub(super) loaded_expired: u64,
    /// SHUTDOWN saved (or was told not to): the process's own stop does not save again.
    pub(super) shutdown_handled: bool,
    /// The last successful save's walk.
    pub(super) last_walk: Option<WalkFigures>,
}

impl SaveState {
    /// Takes the node's one snapshot slot when it is free (a replica's full sync, which
    /// waits and asks again rather than failing as BGSAVE does).
    pub(super) fn try_begin(&mut self) -> bool {
        if self.in_progress {
            return false;
        }
        self.in_progress = true;
        self.started_ms = now_ms();
        true
    }
}

/// The `rdb_*` fields of INFO persistence.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RdbInfo {
    pub bgsave_in_progress: bool,
    pub last_save_time: u64,
    pub last_bgsave_ok: bool,
    pub last_bgsave_time_sec: i64,
    pub current_bgsave_time_sec: i64,
    pub saves: u64,
    pub last_load_keys_loaded: u64,
    pub last_load_keys_expired: u64,
    pub last_walk: Option<WalkFigures>,
}

impl Default for RdbInfo {
    fn default() -> Self {
        RdbInfo {
            bgsave_in_progress: false,
            last_save_time: 0,
            last_bgsave_ok: true,
            last_bgsave_time_sec: -1,
            current_bgsave_time_sec: -1,
            saves: 0,
            last_load_keys_loaded: 0,
            last_load_keys_expired: 0,
            last_walk: None,
        }
    }
}

impl RdbShared {
    pub fn new(started_unix_s: u64) -> RdbShared {
        RdbShared {
            state: Mutex::default(),
            last_save_s: AtomicU64::new(started_unix_s),
            flush_parts: AtomicU64::new(0),
        }
    }

    pub(super) fn lock(&self) -> MutexGuard<'_, SaveState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn info(&self) -> RdbInfo {
        let state = self.lock();
        let now = now_ms();
        RdbInfo {
            bgsave_in_progress: state.in_progress,
            last_save_time: self.last_save_s.load(Ordering::Relaxed),
            last_bgsave_ok: !state.last_failed,
            last_bgsave_time_sec: state.last_duration_s.map_or(-1, |s| s as i64),
            current_bgsave_time_sec: if state.in_progress {
                (now.saturating_sub(state.started_ms) / 1000) as i64
            } else {
                -1
            },
            saves: state.saves,
            last_load_keys_loaded: state.loaded_keys,
            last_load_keys_expired: state.loaded_expired,
            last_walk: state.last_walk,
        }
    }

    pub fn loaded(&self, keys: u64, expired: u64) {
        let mut state = self.lock();
        state.loaded_keys = keys;
        state.loaded_expired = expired;
    }

    /// Whether the process's stop should still save (SHUTDOWN did not settle it).
    pub fn shutdown_handled(&self) -> bool {
        self.lock().shutdown_handled
    }
}

/// Where and how a save writes, read from the live configuration when it starts.
pub(super) struct Target {
    pub(super) dir: PathBuf,
    file: String,
    pub(super) limits: Limits,
    pub(super) checksum: bool,
}

pub(super) fn target(shared: &ServerShared) -> Target {
    let live = &shared.session.live;
    let get = |name: &str| live.get(name).unwrap_or_default();
    let dir = get("dir");
    Target {
        dir: if dir.is_empty() {
            std::env::current_dir().unwrap_or_default()
        } else {
            PathBuf::from(dir)
        },
        file: get("dbfilename"),
        limits: Limits {
            compression: get("rdbcompression") != "no",
            ..Limits::default()
        },
        checksum: get("rdbchecksum") != "no",
    }
}

/// The save points (`save "3600 1 300 100"`): (seconds, changes) pairs.
pub(crate) fn save_points(shared: &ServerShared) -> Vec<(u64, u64)> {
    parse_save_points(&shared.session.live.get("save").unwrap_or_default())
}

pub(crate) fn parse_save_points(text: &str) -> Vec<(u64, u64)> {
    let numbers: Vec<u64> = text
        .split_whitespace()
        .filter_map(|n| n.parse().ok())
        .collect();
    numbers.chunks_exact(2).map(|p| (p[0], p[1])).collect()
}

/// The path of the dump start-up loads (`dir/dbfilename`).
pub(crate) fn dump_path(dir: &Path, file: &str) -> PathBuf {
    dir.join(file)
}

// ---------------------------------------------------------------------------------------
// Each shard's part.

/// A shard's save in progress: the records encoded and not yet taken by the coordinator.
#[derive(Debug, Default)]
struct ShardImage {
    buf: Vec<u8>,
    limits: Limits,
    /// Writes counted (`dirty`) when the snapshot began.
    dirty_at_begin: u64,
}

#[derive(Debug, Default)]
struct ShardRdb {
    image: Option<ShardImage>,
    /// `dirty` as of the last successful save's start: INFO's changes since last save
    /// count from here.
    dirty_base: u64,
}

corewire::runtime::shard_local! {
    static SHARD_RDB: RefCell<ShardRdb> = RefCell::new(ShardRdb::default());
}

/// Whether this shard is in the middle of a save (the AOF rewrite waits for it).
pub(crate) fn active_here() -> bool {
    SHARD_RDB.with(|s| s.borrow().image.is_some())
}

/// Before `command` runs on this shard: a save in progress encodes the keys it will change
/// (as they are now) if the walk has not reached them; a flush first finishes the walk.
pub(crate) fn before_write(store: &mut Store, command: &Command, now: u64) {
    // The common case costs one check: no snapshot, no save here.
    if !store.snapshot_active() {
        return;
    }
    SHARD_RDB.with(|s| {
        let mut s = s.borrow_mut();
        let Some(image) = s.image.as_mut() else {
            return;
        };
        let limits = image.limits;
        let flush = matches!(command, Command::FlushAll)
            || matches!(command, Command::Key(k) if k.op == KeyOp::FlushDb);
        if flush {
            while !store
                .rdb_image_step(now, usize::MAX, &mut image.buf, &limits)
                .finished
            {}
            return;
        }
        if !command.is_write() {
            return;
        }
        let buf = &mut image.buf;
        crate::aof::for_each_image_key(command, |key| {
            store.rdb_image_touch(key, now, buf, &limits)
        });
        match command {
            Command::Del(keys) => {
                for key in keys {
                    store.rdb_image_touch(key, now, buf, &limits);
                }
            }
            Command::Cluster(crate::cluster::command::ClusterRequest::MigrateCommit {
                keys,
                ..
            }) => {
                for key in keys {
                    store.rdb_image_touch(key, now, buf, &limits);
                }
            }
            _ => {}
        }
    });
}

/// Begins this shard's snapshot: the key and expiry counts it holds, or why not (the AOF
/// rewrite holds the snapshot).
pub(super) fn begin_here(limits: Limits) -> Result<(u64, u64), ()> {
    let shard = shard::current();
    let mut store = shard.store();
    if store.snapshot_active() {
        return Err(());
    }
    store.snapshot_begin();
    let stats = store.stats();
    SHARD_RDB.with(|s| {
        s.borrow_mut().image = Some(ShardImage {
            buf: Vec::with_capacity(STEP_BYTES + (STEP_BYTES >> 2)),
            limits,
            dirty_at_begin: stats.dirty,
        })
    });
    Ok((store.key_count() as u64, stats.expires))
}

/// One walk step's output.
#[derive(Debug, Default)]
pub(super) struct Slice {
    /// Key records: the walk's and those writes pushed ahead since the last step.
    pub(super) bytes: Bytes,
    /// Whether the walk is over.
    pub(super) finished: bool,
    /// Keys the walk passed.
    pub(super) keys: usize,
    /// The step's holds of the shard.
    pub(super) holds: HoldStats,
}

/// The next slice of this shard's image: it stops once it has encoded `step_keys` keys or
/// [`STEP_BYTES`], or the walk is over; its holds give way to the shard's other work.
pub(super) async fn step_here(step_keys: usize) -> Slice {
    let mut pace = Pace::default();
    let mut keys = 0;
    while !hold_here(&mut pace, step_keys, &mut keys) {
        pace.pause().await;
    }
    let finished = !shard::current().store().snapshot_active();
    // The next step's buffer is allocated once at about its final size (growing it by
    // doubling would copy it several times).
    let next = Vec::with_capacity(STEP_BYTES + (STEP_BYTES >> 2));
    let bytes = SHARD_RDB.with(|s| {
        (s.borrow_mut().image.as_mut())
            .map(|image| Bytes::from(std::mem::replace(&mut image.buf, next)))
    });
    Slice {
        finished: finished || bytes.is_none(),
        bytes: bytes.unwrap_or_default(),
        keys,
        holds: pace.stats,
    }
}

/// One hold of a step: true once the step is done (its slice full, the walk over, or the
/// save gone), false when the hold gave way first.
fn hold_here(pace: &mut Pace, step_keys: usize, keys: &mut usize) -> bool {
    let shard = shard::current();
    let mut store = shard.store();
    let now = now_ms();
    SHARD_RDB.with(|s| {
        let mut s = s.borrow_mut();
        let Some(image) = s.image.as_mut() else {
            return true;
        };
        let limits = image.limits;
        let mut hold = pace.begin();
        let done = loop {
            if !store.snapshot_active() || *keys >= step_keys || image.buf.len() >= STEP_BYTES {
                break true;
            }
            let batch = KEYS_PER_CALL.min(step_keys - *keys);
            let progress = store.rdb_image_step(now, batch, &mut image.buf, &limits);
            *keys += progress.keys;
            if progress.finished {
                break true;
            }
            if !hold.go_on() {
                break false;
            }
        };
        pace.end(hold);
        done
    })
}

/// Ends this shard's part: on success its changes count from the save's start.
pub(super) fn end_here(saved: bool) {
    let shard = shard::current();
    SHARD_RDB.with(|s| {
        let mut s = s.borrow_mut();
        if let Some(image) = s.image.take() {
            if saved {
                s.dirty_base = image.dirty_at_begin;
            }
        }
    });
    let mut store = shard.store();
    // The walk normally ended it; a failed save leaves it to drop.
    if store.snapshot_active() && !saved {
        store.snapshot_abort();
    }
}

/// Writes since the last successful save, on this shard.
pub(super) fn changes_here() -> u64 {
    let dirty = shard::current().with_store(|store| store.stats().dirty);
    SHARD_RDB.with(|s| dirty.saturating_sub(s.borrow().dirty_base))
}

/// FLUSHALL with save points: the empty dump is saved and one change counts (Redis's
/// `flushAllDataAndResetRDB`): every change so far is forgotten.
pub(super) fn reset_changes_here(extra: u64) {
    let dirty = shard::current().with_store(|store| store.stats().dirty);
    SHARD_RDB.with(|s| s.borrow_mut().dirty_base = dirty.saturating_sub(extra));
}

/// INFO's store part with `dirty` as changes since the last save.
pub(crate) fn adjust_info(stats: Reply) -> Reply {
    let Some(mut parsed) = crate::store::ShardStats::from_reply(&stats) else {
        return stats;
    };
    let base = SHARD_RDB.with(|s| s.borrow().dirty_base);
    parsed.dirty = parsed.dirty.saturating_sub(base);
    parsed.to_reply()
}

// ---------------------------------------------------------------------------------------
// The coordinator (shard 0).

/// Runs `f` on every shard at once and collects the results in shard order.
pub(super) async fn on_all<T: Send + 'static, F>(shards: &[usize], f: F) -> Vec<Option<T>>
where
    F: Fn() -> T + Send + Sync + Clone + 'static,
{
    on_all_async(shards, move || std::future::ready(f())).await
}

/// [`on_all`] for a task: `f` makes it on each shard, and runs there.
pub(super) async fn on_all_async<T: Send + 'static, F, Fut>(
    shards: &[usize],
    f: F,
) -> Vec<Option<T>>
where
    F: Fn() -> Fut + Send + Sync + Clone + 'static,
    Fut: Future<Output = T> + 'static,
{
    let mut pending: Vec<Pin<Box<mesh::SubmitTo<T>>>> = shards
        .iter()
        .map(|&i| Box::pin(corewire::runtime::submit_to(i, f.clone())))
        .collect();
    let mut out: Vec<Option<Option<T>>> = shards.iter().map(|_| None).collect();
    std::future::poll_fn(|cx| {
        let mut waiting = false;
        for (fut, slot) in pending.iter_mut().zip(out.iter_mut()) {
            if slot.is_none() {
                match fut.as_mut().poll(cx) {
                    Poll::Ready(result) => *slot = Some(result.ok()),
                    Poll::Pending => waiting = true,
                }
            }
        }
        if waiting {
            Poll::Pending
        } else {
            Poll::Ready(())
        }
    })
    .await;
    out.into_iter().map(Option::flatten).collect()
}

/// Why a save did not start or did not finish.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum SaveError {
    InProgress,
    /// The AOF rewrite holds a shard's snapshot.
    RewriteRunning,
    Failed(String),
}

/// Begins a save: every shard's snapshot. `Ok` once all began (the point in time).
async fn begin(shared: &ServerShared, shards: usize) -> Result<(Target, u64, u64), SaveError> {
    {
        let mut state = shared.rdb.lock();
        if state.in_progress {
            return Err(SaveError::InProgress);
        }
        state.in_progress = true;
        state.started_ms = now_ms();
        state.last_try_ms = state.started_ms;
    }
    let target = target(shared);
    let limits = target.limits;
    let all: Vec<usize> = (0..shards).collect();
    let begun = on_all(&all, move || begin_here(limits)).await;
    let (mut keys, mut expires) = (0, 0);
    let mut refused = false;
    for result in &begun {
        match result {
            Some(Ok((k, e))) => {
                keys += k;
                expires += e;
            }
            _ => refused = true,
        }
    }
    if refused {
        // Undo the shards that did begin (theirs is the only snapshot running there).
        let began: Vec<usize> = (begun.iter().enumerate())
            .filter(|(_, r)| matches!(r, Some(Ok(_))))
            .map(|(i, _)| i)
            .collect();
        on_all(&began, || end_here(false)).await;
        shared.rdb.lock().in_progress = false;
        return Err(SaveError::RewriteRunning);
    }
    Ok((target, keys, expires))
}

/// Walks every shard and writes the file; ends the save either way.
async fn write(
    shared: &ServerShared,
    shards: usize,
    target: Target,
    keys: u64,
    expires: u64,
) -> Result<(), SaveError> {
    let started = Instant::now();
    let all: Vec<usize> = (0..shards).collect();
    let result = write_file(shared, &all, &target, keys, expires).await;
    let ok = result.is_ok();
    on_all(&all, move || end_here(ok)).await;
    let mut state = shared.rdb.lock();
    state.in_progress = false;
    state.last_failed = !ok;
    state.last_duration_s = Some(started.elapsed().as_secs());
    match &result {
        Ok(()) => {
            state.saves += 1;
            let now_s = now_ms() / 1000;
            shared.rdb.last_save_s.store(now_s, Ordering::Relaxed);
            tracing::info!(
                keys,
                ms = started.elapsed().as_millis() as u64,
                path = %dump_path(&target.dir, &target.file).display(),
                "DB saved on disk"
            );
        }
        Err(error) => tracing::error!(?error, "RDB save failed"),
    }
    result.map_err(SaveError::Failed)
}

/// A new, empty `temp-<pid><tag>.rdb` in `dir`, open for writing and reading back (a save,
/// a disk-based full sync, a replica's received snapshot), and its path.
pub(super) async fn create_temp(dir: &Path, tag: &str) -> (PathBuf, std::io::Result<File>) {
    let path = dir.join(format!("temp-{}{tag}.rdb", std::process::id()));
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(&path)
        .await;
    (path, file)
}

async fn write_file(
    shared: &ServerShared,
    all: &[usize],
    target: &Target,
    keys: u64,
    expires: u64,
) -> Result<(), String> {
    let (temp, file) = create_temp(&target.dir, "").await;
    let fail = |what: &str, e: std::io::Error| format!("{what} {}: {e}", temp.display());
    let file = file.map_err(|e| fail("creating", e))?;
    let mut writer = FileWriter::new(&file);
    let mut stats = StepStats::default();
    let written = async {
        let mut head = Vec::new();
        let used = shared.info().used_memory_rss;
        RdbWriter::header(&mut head, now_ms() / 1000, used);
        for code in library_codes(shared) {
            RdbWriter::function(&mut head, &code);
        }
        RdbWriter::select_db(&mut head, 0, keys, expires);
        writer.write(vec![Bytes::from(head)]).await?;
        let mut walking: Vec<usize> = all.to_vec();
        let hooks = TestHooks::from_env();
        while !walking.is_empty() {
            if let Some(delay) = hooks.step_delay {
                sleep(delay).await;
            }
            let step_keys = hooks.step_keys;
            // The shards encode the next slices while the last ones are being written: the
            // disk never holds up a shard, and at most one round's slices wait in memory.
            let steps = on_all_async(&walking, move || step_here(step_keys));
            let (slices, wrote) = both(steps, writer.settle()).await;
            wrote?;
            let mut next = Vec::new();
            let mut round = Vec::new();
            for (&shard, slice) in walking.iter().zip(slices) {
                let slice = slice.ok_or_else(|| {
                    std::io::Error::other(format!("shard {shard} did not answer"))
                })?;
                stats.step(&slice);
                if !slice.bytes.is_empty() {
                    round.push(slice.bytes);
                }
                if !slice.finished {
                    next.push(shard);
                }
            }
            // The step just held the shard; the loop serves what arrived meanwhile before
            // this task checksums the slices (one hold is a step or a checksum, not both).
            corewire::runtime::yield_now().await;
            let crc_started = Instant::now();
            writer.write(round).await?;
            stats.crc += crc_started.elapsed();
            walking = next;
        }
        writer.settle().await?;
        let mut tail = Vec::new();
        RdbWriter::finish(&mut tail, writer.crc);
        if !target.checksum {
            let len = tail.len();
            tail[len - 8..].fill(0);
        }
        writer.write_raw(vec![Bytes::from(tail)]);
        writer.settle().await?;
        let synced = Instant::now();
        let result = file.sync_all().await;
        stats.fsync = synced.elapsed();
        result
    }
    .await;
    // A failed write leaves nothing in flight worth waiting for.
    let bytes_written = writer.offset;
    drop(writer);
    if let Err(e) = written {
        let _ = ring_fs::remove_file(&temp).await;
        return Err(fail("writing", e));
    }
    let _ = file.close().await;
    let path = dump_path(&target.dir, &target.file);
    if let Err(e) = ring_fs::rename(&temp, &path).await {
        let _ = ring_fs::remove_file(&temp).await;
        return Err(format!(
            "renaming {} to {}: {e}",
            temp.display(),
            path.display()
        ));
    }
    match File::open(&target.dir).await {
        Ok(dir) => {
            if let Err(error) = dir.sync_all().await {
                tracing::warn!(%error, "could not sync the dump's directory");
            }
        }
        Err(error) => tracing::warn!(%error, "could not open the dump's directory to sync it"),
    }
    tracing::info!(
        bytes = bytes_written,
        steps = stats.steps,
        step_keys_max = stats.keys_max,
        holds = stats.holds.held.count,
        hold_us_p99 = stats.holds.held.quantile_us(0.99),
        hold_us_max = stats.holds.held.max_us(),
        held_ms = stats.holds.held.total.as_millis() as u64,
        waits = stats.holds.waited.count,
        wait_us_p50 = stats.holds.waited.quantile_us(0.5),
        wait_us_p99 = stats.holds.waited.quantile_us(0.99),
        wait_us_max = stats.holds.waited.max_us(),
        crc_ms = stats.crc.as_millis() as u64,
        fsync_ms = stats.fsync.as_millis() as u64,
        "RDB save steps"
    );
    shared.rdb.lock().last_walk = Some(stats.holds.figures());
    Ok(())
}

/// Where a save's time went: its walk steps, their holds of the shards, and the
/// coordinator's own work.
#[derive(Debug, Default)]
struct StepStats {
    steps: u64,
    keys_max: usize,
    holds: HoldStats,
    /// Checksumming and submitting the writes (with the turns the checksum gave way).
    crc: Duration,
    fsync: Duration,
}

impl StepStats {
    fn step(&mut self, slice: &Slice) {
        self.steps += 1;
        self.keys_max = self.keys_max.max(slice.keys);
        self.holds.merge(&slice.holds);
    }
}

/// The function libraries' code (FUNCTION2 records).
pub(super) fn library_codes(shared: &ServerShared) -> Vec<Bytes> {
    match shared.scripting.libraries.lock() {
        Ok(libraries) => libraries.all().map(|l| l.code.clone()).collect(),
        Err(_) => Vec::new(),
    }
}

/// A whole save: begin, then write. `began` is told once every shard's snapshot began.
pub(super) async fn save(
    shared: Arc<ServerShared>,
    shards: usize,
    began: impl FnOnce(Result<(), &SaveError>),
) -> Result<(), SaveError> {
    match begin(&shared, shards).await {
        Ok((target, keys, expires)) => {
            began(Ok(()));
            write(&shared, shards, target, keys, expires).await
        }
        Err(error) => {
            began(Err(&error));
            Err(error)
        }
    }
}

/// Test hooks, off unless set: `COREWIRE_KV_TEST_RDB_STEP_DELAY_MS=N` sleeps N ms before
/// each round of walk steps and `COREWIRE_KV_TEST_RDB_STEP_KEYS=N` walks at most N keys a
/// step, so tests can write while a save runs.
pub(super) struct TestHooks {
    pub(super) step_delay: Option<Duration>,
    pub(super) step_keys: usize,
}

impl TestHooks {
    pub(super) fn from_env() -> TestHooks {
        let number = |name: &str| std::env::var(name).ok().and_then(|v| v.parse::<u64>().ok());
        TestHooks {
            step_delay: number("COREWIRE_KV_TEST_RDB_STEP_DELAY_MS").map(Duration::from_millis),
            step_keys: number("COREWIRE_KV_TEST_RDB_STEP_KEYS")
                .map_or(STEP_KEYS, |n| n.max(1) as usize),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn save_points_parse_as_pairs() {
        assert_eq!(
            parse_save_points("3600 1 300 100 60 10000"),
            vec![(3600, 1), (300, 100), (60, 10000)]
        );
        assert!(parse_save_points("").is_empty());
    }
}
