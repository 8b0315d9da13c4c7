//! A shard's append-only log on disk, written through the shard's io_uring ring: the AOF
//! task (group commit: one write and, for `always`, one fdatasync per batch of records; the
//! move to a new file at a rewrite's switch point), the durability gate that holds `always`
//! replies until their fsync, and the hooks a rewrite needs on the write path. Start-up is
//! in `aof_load.rs`, the rewrite in `aof_rewrite.rs`.

use super::txn::watch::{Tap, WatchRegistry};
use std::cell::{Cell, RefCell};
use std::io;
use std::path::PathBuf;
use std::rc::Rc;
use std::time::Duration;

use bytes::BytesMut;
use corewire::runtime::fs::File;
use corewire::runtime::sleep;
use corewire::sync::Notify;

use super::aof_load::{self, AofStartError, ReplaySummary};
use super::aof_rewrite::RewriteState;
use super::config::AofConfig;
use super::forward::Done;
use super::repl_feed::Feed;
use super::shard::{now_ms, Shard};
use super::sink::Origin;
use crate::aof::{
    for_each_image_key, payload_bound, AofStats, AofWriter, DurabilityGate, FsyncPolicy, Manifest,
    RewritePolicy,
};
use crate::command::Command;
use crate::reply::Reply;
use crate::store::{ShardStats, Store, SweepOutcome};

/// An open log file (reads, writes and syncs through the ring) and its name.
pub(crate) struct LogFile {
    pub file: File,
    pub path: PathBuf,
}

pub(crate) struct AofShard {
    pub(super) dir: PathBuf,
    pub(super) shard: usize,
    /// The incremental file being appended to. Shared with the op in flight on it, so it
    /// stays open until that op completes even if a switch replaces it here.
    log: RefCell<Rc<LogFile>>,
    /// The next incremental file, from a rewrite's switch point until the AOF task moves to
    /// it (after syncing the old one).
    next_log: RefCell<Option<Rc<LogFile>>>,
    /// The shard's manifest as it is on disk.
    pub(super) manifest: RefCell<Manifest>,
    pub(super) writer: RefCell<AofWriter>,
    gate: RefCell<DurabilityGate<Done>>,
    pub(super) kick: Notify,
    /// Told when the AOF task has moved to the next file.
    pub(super) switched: Notify,
    /// Set when the file could not be written: writes are refused from then on (Redis's
    /// MISCONF), since memory would run ahead of the log.
    broken: RefCell<Option<String>>,
    /// `--aof-max-record-bytes`: see [`Self::admit`].
    max_record_bytes: u64,
    /// Bytes of the log files other than the one being appended to.
    pub(super) closed_len: Cell<u64>,
    /// The log's size after the last rewrite, or at start-up (Redis's `aof_base_size`).
    pub(super) base_size: Cell<u64>,
    pub(super) rewrite_policy: RewritePolicy,
    pub(super) rewrite: RefCell<RewriteState>,
    /// Wakes the shard's rewrite task.
    pub(super) rewrite_kick: Notify,
}

impl AofShard {
    /// Opens shard `shard`'s log in `config.dir` and replays it into `store` (see
    /// `aof_load.rs`). Runs on the shard: the files are read through its ring.
    pub async fn open(
        config: &AofConfig,
        shard: usize,
        store: &mut Store,
    ) -> Result<(AofShard, ReplaySummary), AofStartError> {
        let loaded = aof_load::load(config, shard, store).await?;
        let total = loaded.closed_len + loaded.current_len;
        let aof = AofShard {
            dir: config.dir.clone(),
            shard,
            log: RefCell::new(Rc::new(loaded.current)),
            next_log: RefCell::new(None),
            manifest: RefCell::new(loaded.manifest),
            writer: RefCell::new(AofWriter::new(config.fsync, loaded.current_len, now_ms())),
            gate: RefCell::new(DurabilityGate::default()),
            kick: Notify::default(),
            switched: Notify::default(),
            broken: RefCell::new(None),
            max_record_bytes: config.max_record_bytes,
            closed_len: Cell::new(loaded.closed_len),
            base_size: Cell::new(total),
            rewrite_policy: config.rewrite,
            rewrite: RefCell::new(RewriteState::default()),
            rewrite_kick: Notify::default(),
        };
        Ok((aof, loaded.summary))
    }

    /// Refuses a write whose log record could exceed the record limit, before it is routed
    /// anywhere (so no shard applies a part of it). Checked on the whole command: see
    /// [`payload_bound`].
    pub fn admit(&self, command: &Command) -> Result<(), Reply> {
        if !command.is_write() {
            return Ok(());
        }
        let bound = payload_bound(command);
        if bound <= self.max_record_bytes {
            return Ok(());
        }
        Err(Reply::error(format!(
            "ERR this write could need an AOF record of up to {bound} bytes, over the \
             {}-byte record limit; split it into smaller writes",
            self.max_record_bytes
        )))
    }

    /// Runs `command` with the log as the store's change sink. `None`: the reply waits in the
    /// durability gate (policy `always`).
    pub fn execute(
        &self,
        store: &mut Store,
        origin: Origin,
        command: Command,
        now: u64,
        watches: Option<&mut WatchRegistry>,
    ) -> Option<Reply> {
        match command {
            Command::BgRewriteAof => return Some(self.request_rewrite(now)),
            Command::Info(_) => {
                let reply = store.execute(command, now, &mut crate::change::NoLog);
                return Some(match ShardStats::from_reply(&reply) {
                    Some(mut stats) => {
                        stats.aof = self.stats(now);
                        stats.to_reply()
                    }
                    None => reply,
                });
            }
            _ => {}
        }
        if command.is_write() {
            if let Some(why) = self.refusal() {
                return Some(Reply::error(format!(
                    "MISCONF Errors writing to the AOF file: {why}"
                )));
            }
            // A rewrite's image must hold these keys as they are before this write.
            if let Some(image) = self.rewrite.borrow_mut().image.as_mut() {
                for_each_image_key(&command, |key| store.snapshot_touch(key, now, image));
            }
        }
        let mut writer = self.writer.borrow_mut();
        let before = writer.appended_lsn();
        let failed_before = writer.failure().is_some();
        // Replication streams what the log records (`repl_feed.rs`).
        let mut sink = Feed {
            inner: &mut *writer,
        };
        let reply = match watches {
            None => store.execute(command, now, &mut sink),
            Some(watches) => store.execute(
                command,
                now,
                &mut Tap {
                    inner: &mut sink,
                    watches,
                },
            ),
        };
        if !failed_before {
            if let Some(error) = writer.failure() {
                // `admit` should have refused it; from now on every write is refused.
                tracing::error!(path = %self.log.borrow().path.display(), %error, "AOF record not logged");
            }
        }
        let lsn = writer.appended_lsn();
        if lsn > before {
            self.kick.notify_one();
        }
        if writer.must_hold_reply(lsn) {
            self.gate.borrow_mut().hold(lsn, Done { origin, reply });
            return None;
        }
        Some(reply)
    }

    /// Appends one record that no store command makes (the function libraries).
    pub fn log(&self, op: crate::change::WriteOp<'_>) {
        self.writer.borrow_mut().append(op);
        self.kick.notify_one();
    }

    /// Log what runs until [`Self::end_transaction`] as one transaction block, replayed all
    /// or nothing (see `AofWriter::begin_block`). No await in between.
    pub fn begin_transaction(&self) {
        self.writer.borrow_mut().begin_block();
    }

    pub fn end_transaction(&self) {
        let mut writer = self.writer.borrow_mut();
        let before = writer.appended_lsn();
        writer.end_block();
        if writer.appended_lsn() > before {
            self.kick.notify_one();
        }
    }

    pub fn sweep(&self, store: &mut Store, now: u64, work: usize) -> SweepOutcome {
        let mut writer = self.writer.borrow_mut();
        let before = writer.appended_lsn();
        let outcome = store.sweep(
            now,
            work,
            &mut Feed {
                inner: &mut *writer,
            },
        );
        if writer.appended_lsn() > before {
            self.kick.notify_one();
        }
        outcome
    }

    /// Timer tick: `everysec` needs a nudge when its second is up, and the log may have
    /// grown enough for an automatic rewrite.
    pub fn tick(&self, now: u64) {
        if self.writer.borrow().fsync_due(now) {
            self.kick.notify_one();
        }
        self.maybe_rewrite_by_growth(now);
    }

    /// Bytes of all the log's files, counting what is appended but not yet written.
    pub(super) fn current_size(&self) -> u64 {
        let writer = self.writer.borrow();
        self.closed_len.get() + (writer.appended_lsn() - writer.file_start())
    }

    /// This shard's numbers for INFO's persistence section.
    pub fn stats(&self, now: u64) -> AofStats {
        let mut stats = self.rewrite.borrow().stats(now);
        stats.enabled = true;
        stats.current_size = self.current_size();
        stats.base_size = self.base_size.get();
        stats.buffer_length = self.writer.borrow().pending_len() as u64;
        stats.last_write_ok = self.refusal().is_none();
        stats
    }

    /// Makes `next` the file that records go to from this moment on (a rewrite's switch
    /// point); the AOF task moves to it once the current file is written out and synced.
    pub(super) fn begin_next_file(&self, next: LogFile) -> bool {
        if self.writer.borrow_mut().begin_next_file().is_none() {
            return false;
        }
        *self.next_log.borrow_mut() = Some(Rc::new(next));
        self.kick.notify_one();
        true
    }

    /// Why writes are refused (Redis's MISCONF), if they are.
    pub(super) fn refusal(&self) -> Option<String> {
        if let Some(why) = &*self.broken.borrow() {
            return Some(why.clone());
        }
        self.writer.borrow().failure().map(|e| e.to_string())
    }

    fn fail(&self, what: &str, error: &io::Error) {
        let policy = self.writer.borrow().policy();
        let path = self.log.borrow().path.clone();
        tracing::error!(path = %path.display(), %error, "AOF {what} failed");
        if policy == FsyncPolicy::Always {
            // Held replies can never be acknowledged truthfully; Redis exits here too.
            eprintln!(
                "corewire-kv: can't persist AOF {} ({what}: {error}) with appendfsync always; exiting",
                path.display()
            );
            std::process::exit(1);
        }
        *self.broken.borrow_mut() = Some(format!("{what}: {error}"));
    }

    /// Writes out what was appended, moves to the next file when a switch is due, and
    /// fsyncs as the policy says, handing each reply the gate releases to `deliver`. Returns
    /// once nothing more is due (or after a failure, which [`Self::fail`] recorded).
    async fn pump(&self, deliver: &impl Fn(Done)) {
        loop {
            let log = self.log.borrow().clone();
            let batch = self.writer.borrow_mut().take_batch();
            let wrote = batch.is_some();
            if let Some(batch) = batch {
                let end = batch.end();
                if let Err(error) = log.file.write_all_at(batch.bytes, batch.offset).await {
                    self.fail("write", &error);
                    return;
                }
                if let Err(error) = self.writer.borrow_mut().write_completed(end) {
                    tracing::error!(%error, "AOF bookkeeping");
                }
            }
            let switch = self.writer.borrow_mut().start_switch_fsync(now_ms());
            if let Some(ticket) = switch {
                if let Err(error) = log.file.sync_data().await {
                    self.fail("fsync", &error);
                    return;
                }
                self.fsynced(ticket, deliver);
                let next = self.next_log.borrow_mut().take();
                let mut writer = self.writer.borrow_mut();
                let old_len = writer.written_lsn() - writer.file_start();
                writer.switch_completed();
                if let Some(next) = next {
                    self.closed_len.set(self.closed_len.get() + old_len);
                    *self.log.borrow_mut() = next;
                }
                drop(writer);
                self.switched.notify_one();
                continue;
            }
            let ticket = self.writer.borrow_mut().start_fsync(now_ms());
            match ticket {
                Some(ticket) => {
                    if let Err(error) = log.file.sync_data().await {
                        self.fail("fsync", &error);
                        return;
                    }
                    self.fsynced(ticket, deliver);
                }
                None if wrote => {}
                None => return,
            }
        }
    }

    fn fsynced(&self, ticket: crate::aof::FsyncTicket, deliver: &impl Fn(Done)) {
        let durable = self.writer.borrow_mut().fsync_completed(ticket);
        let released: Vec<Done> = self.gate.borrow_mut().release(durable).collect();
        for done in released {
            deliver(done);
        }
    }

    /// Writes out and syncs everything appended so far (used at shutdown): waits for the
    /// AOF task to write it (including a pending switch to a rewrite's new file), then syncs.
    pub async fn flush(&self) -> io::Result<()> {
        loop {
            if let Some(why) = self.refusal() {
                return Err(io::Error::other(why));
            }
            if self.writer.borrow().is_idle() {
                break;
            }
            self.kick.notify_one();
            sleep(Duration::from_millis(1)).await;
        }
        let log = self.log.borrow().clone();
        log.file.sync_data().await
    }
}

/// The shard's AOF task: whenever records were appended (or `everysec`'s second is up), write
/// the batch at the end of the file and fsync as the policy says; replies the gate held are
/// released once the fsync covering them completes. Everything appended while a write or
/// fsync is in flight goes out together next: that is the group commit.
pub(crate) async fn run_aof(shard: Rc<Shard>) {
    let Some(aof) = shard.aof.as_ref() else {
        return;
    };
    let deliver = |done: Done| shard.deliver(done.origin, done.reply);
    loop {
        aof.kick.notified().await;
        aof.pump(&deliver).await;
    }
}

/// Reads `len` bytes from the start of the file through the ring.
pub(super) async fn read_whole(file: &File, len: u64) -> io::Result<BytesMut> {
    let len = usize::try_from(len).map_err(|_| io::Error::other("AOF larger than memory"))?;
    let mut buf = BytesMut::with_capacity(len);
    while buf.len() < len {
        let offset = buf.len() as u64;
        let (result, back) = file.read_at(buf, offset).await;
        buf = back;
        if result? == 0 {
            // The file shrank under us; replay what there is.
            break;
        }
    }
    Ok(buf)
}
