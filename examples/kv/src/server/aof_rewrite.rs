//! AOF rewrite, per shard, in the background: BGREWRITEAOF or growth (`--aof-rewrite-percentage`,
//! `--aof-rewrite-min-size`) starts it; the shard keeps serving throughout.
//!
//! 1. Create the next incremental file and the base file, sync the directory, and name the
//!    new incremental file in the manifest (written to a temporary file, synced, renamed over
//!    the old one, directory synced). A crash from here on replays the old files and then the
//!    new incremental one.
//! 2. In one synchronous step, the switch point: the AOF task sends every record appended
//!    from now on to the new incremental file (after writing out and syncing the old one),
//!    and the store starts a snapshot, the image of the keyspace at this instant.
//! 3. Walk the snapshot a bounded number of keys per step, framing each key as the write
//!    records that recreate it (each value type has its emitter, `store/emit.rs`), and write
//!    them to the base file through the ring, yielding between steps. A write that touches a
//!    key the walk has not reached puts that key's image in first (`AofShard::execute`).
//! 4. Sync the base, then name [base, new incremental] in the manifest: the atomic switch.
//!    From here on a crash replays the base and the new incremental file.
//! 5. Remove the files the manifest no longer names (start-up removes them too if a crash
//!    came first).
//!
//! Every write acknowledged at any point is in the files the manifest on disk names: before
//! 4, in the old files or the new incremental one; after 4, in the base (everything up to the
//! switch point) or the new incremental file (everything after it). `kill -9` at each step
//! is tested in `tests/aof_rewrite.rs`, using the test hooks at the end of this file.
//!
//! Opening files, every write, every sync, renaming and removing go through the shard's ring
//! (`corewire::runtime::fs`). One blocking call is kept: `Unnamed`'s `Drop` removes the files
//! of a rewrite that stopped early with `std::fs::remove_file` (a drop cannot await; it is the
//! error path only, and start-up removes any leftover anyway).

use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use corewire::runtime::fs::{self as ring_fs, File, OpenOptions};
use corewire::runtime::{sleep, yield_now};

use super::aof_io::{AofShard, LogFile};
use super::shard::{now_ms, Shard};
use super::walk_pace::Pace;
use crate::aof::{AofStats, ImageBuffer, Manifest};
use crate::reply::Reply;

/// Keys and image bytes per walk step (one write to the base file) at most.
const STEP_KEYS: usize = 1024;
const STEP_BYTES: usize = 256 << 10;
/// Keys per call into the store within a step, so the byte bound is checked often.
const KEYS_PER_CALL: usize = 32;
/// Longest wait before an automatic rewrite is tried again after a failure.
const MAX_RETRY_DELAY_MS: u64 = 60_000;

/// A shard's rewrite bookkeeping.
#[derive(Debug, Default)]
pub(crate) struct RewriteState {
    /// The image being framed, while the store's snapshot runs (from the switch point until
    /// the walk is done).
    pub image: Option<ImageBuffer>,
    /// When the rewrite in progress was asked for (Unix ms).
    started_ms: Option<u64>,
    rewrites: u64,
    consecutive_failures: u64,
    last_failed: bool,
    last_duration_sec: Option<u64>,
    /// No automatic rewrite before this time (after a failure).
    retry_at_ms: u64,
}

impl RewriteState {
    pub fn in_progress(&self) -> bool {
        self.started_ms.is_some()
    }

    /// The rewrite part of INFO (sizes are filled in by the caller).
    pub fn stats(&self, now: u64) -> AofStats {
        let secs = |s: Option<u64>| s.map_or(-1, |s| s as i64);
        AofStats {
            rewrite_in_progress: self.in_progress(),
            rewrites: self.rewrites,
            rewrites_consecutive_failures: self.consecutive_failures,
            last_rewrite_ok: !self.last_failed,
            last_rewrite_time_sec: secs(self.last_duration_sec),
            current_rewrite_time_sec: secs(self.started_ms.map(|t| now.saturating_sub(t) / 1000)),
            ..AofStats::default()
        }
    }
}

impl AofShard {
    /// BGREWRITEAOF on this shard.
    pub(super) fn request_rewrite(&self, now: u64) -> Reply {
        let mut state = self.rewrite.borrow_mut();
        if state.in_progress() {
            return Reply::error("ERR Background append only file rewriting already in progress");
        }
        state.started_ms = Some(now);
        self.rewrite_kick.notify_one();
        Reply::simple("Background append only file rewriting started")
    }

    /// Starts a rewrite if the log grew past the policy's threshold since the last one.
    pub(super) fn maybe_rewrite_by_growth(&self, now: u64) {
        {
            let state = self.rewrite.borrow();
            if state.in_progress() || now < state.retry_at_ms {
                return;
            }
        }
        let (current, base) = (self.current_size(), self.base_size.get());
        if self.rewrite_policy.due(current, base) {
            tracing::info!(
                shard = self.shard,
                current,
                base,
                "AOF grew past --aof-rewrite-percentage; rewriting"
            );
            let _ = self.request_rewrite(now);
        }
    }
}

/// The shard's rewrite task: runs each requested rewrite to the end, one at a time.
pub(crate) async fn run_rewrites(shard: Rc<Shard>) {
    let Some(aof) = shard.aof.as_ref() else {
        return;
    };
    let hooks = TestHooks::from_env();
    loop {
        aof.rewrite_kick.notified().await;
        if !aof.rewrite.borrow().in_progress() {
            continue;
        }
        // A save holds the store's snapshot: the rewrite takes its turn after it.
        while super::rdb_save::active_here() {
            sleep(Duration::from_millis(10)).await;
        }
        let started = Instant::now();
        tracing::info!(shard = aof.shard, "AOF rewrite started");
        let result = rewrite(&shard, aof, &hooks).await;
        shard.store().snapshot_abort();
        let now = now_ms();
        let mut state = aof.rewrite.borrow_mut();
        state.image = None;
        state.started_ms = None;
        state.last_duration_sec = Some(started.elapsed().as_secs());
        match result {
            Ok(base_len) => {
                state.rewrites += 1;
                state.consecutive_failures = 0;
                state.last_failed = false;
                tracing::info!(
                    shard = aof.shard,
                    base_len,
                    size = aof.current_size(),
                    ms = started.elapsed().as_millis() as u64,
                    "AOF rewrite done"
                );
            }
            Err(error) => {
                state.consecutive_failures += 1;
                state.last_failed = true;
                let delay = 1000u64
                    .saturating_mul(1 << state.consecutive_failures.min(16))
                    .min(MAX_RETRY_DELAY_MS);
                state.retry_at_ms = now + delay;
                tracing::error!(shard = aof.shard, %error, "AOF rewrite failed");
            }
        }
    }
}

/// One rewrite; returns the base file's length.
async fn rewrite(shard: &Shard, aof: &AofShard, hooks: &TestHooks) -> io::Result<u64> {
    let (during, done) = {
        let manifest = aof.manifest.borrow();
        let during = manifest.with_new_incr();
        let done = during.rewritten();
        (during, done)
    };
    let incr_path = aof.dir.join(during.current());
    let base_path = aof.dir.join(done.base().unwrap_or_default());
    let dir = File::open(&aof.dir).await?;
    // Removed again unless the manifest on disk came to name them.
    let mut unnamed = Unnamed(vec![incr_path.clone(), base_path.clone()]);

    // 1. The new files exist (and so do their directory entries) before anything names them.
    let incr = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(&incr_path)
        .await?;
    let base = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .open(&base_path)
        .await?;
    dir.sync_all().await?;
    hooks.pause("created").await;
    install_manifest(aof, &dir, during.clone(), &mut unnamed).await?;
    hooks.pause("manifest").await;

    // 2. The switch point.
    if !aof.begin_next_file(LogFile {
        file: incr,
        path: incr_path,
    }) {
        return Err(io::Error::other(
            "a switch to a new AOF file is already pending",
        ));
    }
    shard.store().snapshot_begin();
    aof.rewrite.borrow_mut().image = Some(ImageBuffer::default());
    // The function libraries as of the switch point (shard 0's log keeps them).
    let functions = super::script::functions_record(shard);

    // 3. The walk.
    let mut base_len = 0u64;
    if let Some(record) = functions {
        let len = record.len() as u64;
        base.write_all_at(record, 0).await?;
        base_len = len;
    }
    loop {
        let (chunk, finished) = walk_step(shard, aof, hooks.step_keys).await?;
        if !chunk.is_empty() {
            let len = chunk.len() as u64;
            base.write_all_at(chunk, base_len).await?;
            base_len += len;
            hooks.pause("walking").await;
        } else if !finished {
            yield_now().await;
        }
        if finished {
            break;
        }
        hooks.step_delay().await;
    }
    aof.rewrite.borrow_mut().image = None;

    // 4. The base is durable, the old file is done with: name [base, new incremental].
    base.sync_data().await?;
    hooks.pause("synced").await;
    while aof.writer.borrow().switch_pending() {
        if let Some(why) = aof.refusal() {
            return Err(io::Error::other(why));
        }
        aof.kick.notify_one();
        aof.switched.notified().await;
    }
    install_manifest(aof, &dir, done.clone(), &mut unnamed).await?;
    aof.closed_len.set(base_len);
    aof.base_size.set(aof.current_size());
    hooks.pause("switched").await;

    // 5. Remove what the manifest no longer names.
    for name in during.files().filter(|f| !done.files().any(|d| d == *f)) {
        if let Err(error) = ring_fs::remove_file(aof.dir.join(name)).await {
            tracing::warn!(file = name, %error, "could not remove an old AOF file");
        }
    }
    if let Err(error) = dir.sync_all().await {
        tracing::warn!(%error, "could not sync the AOF directory after removing old files");
    }
    Ok(base_len)
}

/// One bounded step of the snapshot walk: the image bytes framed so far (by the walk and by
/// writes that touched keys ahead of it), and whether the walk is over. It holds the shard
/// in holds that give way to its requests (`walk_pace.rs`).
async fn walk_step(shard: &Shard, aof: &AofShard, step_keys: usize) -> io::Result<(Bytes, bool)> {
    let mut pace = Pace::default();
    let mut keys = 0;
    while !walk_hold(shard, aof, &mut pace, step_keys, &mut keys) {
        pace.pause().await;
    }
    let finished = !shard.store().snapshot_active();
    let mut state = aof.rewrite.borrow_mut();
    let Some(image) = state.image.as_mut() else {
        return Err(io::Error::other("the rewrite's image went away"));
    };
    if let Some(error) = image.failure() {
        return Err(io::Error::other(format!("rewrite image: {error}")));
    }
    Ok((image.take(), finished))
}

/// One hold of a walk step: true once the step is done (its bounds reached, the walk over,
/// or the image gone), false when the hold gave way first.
fn walk_hold(
    shard: &Shard,
    aof: &AofShard,
    pace: &mut Pace,
    step_keys: usize,
    keys: &mut usize,
) -> bool {
    let mut store = shard.store();
    let mut state = aof.rewrite.borrow_mut();
    let Some(image) = state.image.as_mut() else {
        return true;
    };
    let now = now_ms();
    let mut hold = pace.begin();
    let done = loop {
        if !store.snapshot_active() || *keys >= step_keys || image.len() >= STEP_BYTES {
            break true;
        }
        let progress = store.snapshot_step(now, KEYS_PER_CALL.min(step_keys - *keys), image);
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
}

/// Replaces the shard's manifest on disk with `manifest`: a temporary file, synced, renamed
/// over the old one, and the directory synced. Once the rename succeeded the new manifest is
/// the one in effect, and the files it names are no longer `unnamed` (also if the directory
/// sync then fails).
async fn install_manifest(
    aof: &AofShard,
    dir: &File,
    manifest: Manifest,
    unnamed: &mut Unnamed,
) -> io::Result<()> {
    let name = Manifest::file_name(aof.shard);
    let temp = aof.dir.join(format!("{name}.tmp"));
    let file = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .open(&temp)
        .await?;
    file.write_all_at(Bytes::from(manifest.render()), 0).await?;
    file.sync_all().await?;
    file.close().await?;
    ring_fs::rename(&temp, aof.dir.join(&name)).await?;
    for file in manifest.files() {
        unnamed.named(&aof.dir.join(file));
    }
    *aof.manifest.borrow_mut() = manifest;
    dir.sync_all().await
}

/// Files a rewrite created that no manifest names yet: removed if the rewrite stops first.
struct Unnamed(Vec<PathBuf>);

impl Unnamed {
    fn named(&mut self, path: &Path) {
        self.0.retain(|p| p != path);
    }
}

impl Drop for Unnamed {
    // Blocking on purpose: a drop cannot await (see the module docs).
    fn drop(&mut self) {
        for path in &self.0 {
            let _ = fs::remove_file(path);
        }
    }
}

/// Test hooks, off unless their environment variables are set: tests use them to `kill -9`
/// the server at each step of a rewrite, and to slow the walk down so writes overlap it.
///
/// - `COREWIRE_KV_TEST_REWRITE_PAUSE=created|manifest|walking|synced|switched`: the rewrite
///   stops at that step (logging `AOF rewrite paused at <step>`; `walking` is after the first
///   piece of the image is written) while the shard keeps serving...
/// - `COREWIRE_KV_TEST_REWRITE_RESUME_FILE=PATH`: ... until PATH exists (without it, for
///   good).
/// - `COREWIRE_KV_TEST_REWRITE_STEP_DELAY_MS=N`: sleep N ms after each walk step.
/// - `COREWIRE_KV_TEST_REWRITE_STEP_KEYS=N`: at most N keys per walk step.
struct TestHooks {
    pause_at: Option<String>,
    resume_file: Option<PathBuf>,
    step_delay: Option<Duration>,
    step_keys: usize,
}

impl TestHooks {
    fn from_env() -> TestHooks {
        let number = |name: &str| std::env::var(name).ok().and_then(|v| v.parse::<u64>().ok());
        TestHooks {
            pause_at: std::env::var("COREWIRE_KV_TEST_REWRITE_PAUSE").ok(),
            resume_file: std::env::var_os("COREWIRE_KV_TEST_REWRITE_RESUME_FILE")
                .map(PathBuf::from),
            step_delay: number("COREWIRE_KV_TEST_REWRITE_STEP_DELAY_MS").map(Duration::from_millis),
            step_keys: number("COREWIRE_KV_TEST_REWRITE_STEP_KEYS")
                .map_or(STEP_KEYS, |n| n.max(1) as usize),
        }
    }

    async fn pause(&self, step: &str) {
        if self.pause_at.as_deref() != Some(step) {
            return;
        }
        tracing::warn!("AOF rewrite paused at {step} (COREWIRE_KV_TEST_REWRITE_PAUSE)");
        match &self.resume_file {
            None => std::future::pending::<()>().await,
            Some(path) => {
                while !path.exists() {
                    sleep(Duration::from_millis(10)).await;
                }
                tracing::warn!("AOF rewrite resumed at {step}");
            }
        }
    }

    async fn step_delay(&self) {
        if let Some(delay) = self.step_delay {
            sleep(delay).await;
        }
    }
}
