//! A shard's append-only log on disk, written through the shard's io_uring ring: replay at
//! start-up, the AOF task (group commit: one write and, for `always`, one fdatasync per batch
//! of records), and the durability gate that holds `always` replies until their fsync.

use std::cell::RefCell;
use std::fmt;
use std::fs::{File, OpenOptions};
use std::io::{self, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::rc::Rc;

use bytes::BytesMut;
use corewire::runtime::fs::File as RingFile;

use super::config::AofConfig;
use super::forward::Done;
use super::notify::Notify;
use super::shard::{now_ms, Shard};
use super::sink::Origin;
use crate::aof::{
    payload_bound, AofWriter, CorruptTail, Damage, DurabilityGate, FsyncPolicy, LoadPolicy,
    RecordReader, Recovery,
};
use crate::command::Command;
use crate::reply::Reply;
use crate::store::{Store, SweepOutcome};

/// Why a shard's log could not be opened or replayed.
#[derive(Debug)]
pub enum AofStartError {
    Io {
        path: PathBuf,
        error: io::Error,
    },
    /// The log is damaged in a way the policy does not let start-up cut; nothing was
    /// changed on disk.
    Damaged {
        path: PathBuf,
        tail: CorruptTail,
    },
}

impl fmt::Display for AofStartError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AofStartError::Io { path, error } => write!(f, "AOF {}: {error}", path.display()),
            AofStartError::Damaged { path, tail } => {
                let after = tail.file_len - tail.offset;
                write!(f, "AOF {}: {tail}; ", path.display())?;
                match tail.damage {
                    Damage::Corrupt => write!(
                        f,
                        "the {after} bytes from offset {} to the end may hold acknowledged \
                         writes, so the file was left as it is and the server did not start. \
                         Start with --aof-fix to cut the log at offset {} (the cut bytes are \
                         saved to {}.cut-{} first)",
                        tail.offset,
                        tail.offset,
                        path.display(),
                        tail.offset
                    ),
                    Damage::TornTail => write!(
                        f,
                        "not cutting the {after} bytes of the incomplete last record because \
                         of --aof-load-truncated no. Start with {} to cut it at offset {}",
                        LoadPolicy::flag_to_cut(tail.damage),
                        tail.offset
                    ),
                }
            }
        }
    }
}

impl std::error::Error for AofStartError {}

/// What start-up found in a shard's log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReplaySummary {
    pub records: u64,
    pub valid_len: u64,
    /// Bytes cut off the end: a torn last record, or whatever `--aof-fix` cut.
    pub truncated: u64,
}

pub(crate) fn shard_log_path(dir: &Path, shard: usize) -> PathBuf {
    dir.join(format!("shard-{shard}.aof"))
}

pub(crate) struct AofShard {
    file: RingFile,
    path: PathBuf,
    writer: RefCell<AofWriter>,
    gate: RefCell<DurabilityGate<Done>>,
    kick: Notify,
    /// Set when the file could not be written: writes are refused from then on (Redis's
    /// MISCONF), since memory would run ahead of the log.
    broken: RefCell<Option<String>>,
    /// `--aof-max-record-bytes`: see [`Self::admit`].
    max_record_bytes: u64,
}

impl AofShard {
    /// Opens (creating it if needed) shard `shard`'s log in `config.dir`, replays it into
    /// `store`, and cuts a damaged tail if `config.load` allows it (otherwise fails, leaving
    /// the file untouched). Runs on the shard: the file is read through its ring.
    pub async fn open(
        config: &AofConfig,
        shard: usize,
        store: &mut Store,
    ) -> Result<(AofShard, ReplaySummary), AofStartError> {
        let path = shard_log_path(&config.dir, shard);
        let failed = |error: io::Error| AofStartError::Io {
            path: path.clone(),
            error,
        };
        let std_file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(failed)?;
        let len = std_file.metadata().map_err(failed)?.len();
        // Reads and writes go through the ring; metadata, the cut and its copy stay with std.
        let file = RingFile::from_std(std_file.try_clone().map_err(failed)?);
        let data = read_whole(&file, len).await.map_err(failed)?;
        let mut reader = RecordReader::new(data);
        let mut records = 0u64;
        let mut corrupt = None;
        for record in &mut reader {
            match record {
                Ok(command) => {
                    records += 1;
                    let reply = store.apply_replayed(command);
                    if reply.is_error() {
                        tracing::debug!(shard, ?reply, "replayed command failed");
                    }
                }
                Err(tail) => corrupt = Some(tail),
            }
        }
        let valid_len = reader.valid_len() as u64;
        if let Some(tail) = corrupt {
            if config.load.recovery(tail.damage) == Recovery::Refuse {
                return Err(AofStartError::Damaged { path, tail });
            }
            if tail.damage == Damage::Corrupt {
                // Cut only with --aof-fix, and never without keeping what is cut.
                let saved = save_cut(&std_file, &path, tail.offset as u64).map_err(failed)?;
                tracing::warn!(
                    shard,
                    path = %path.display(),
                    saved = %saved.display(),
                    "{tail}; --aof-fix: cutting the AOF to its last good record"
                );
            } else {
                tracing::warn!(
                    shard,
                    path = %path.display(),
                    "{tail}; cutting the incomplete write (aof-load-truncated yes)"
                );
            }
            std_file.set_len(valid_len).map_err(failed)?;
            std_file.sync_all().map_err(failed)?;
        }
        let summary = ReplaySummary {
            records,
            valid_len,
            truncated: len - valid_len,
        };
        let aof = AofShard {
            file,
            path,
            writer: RefCell::new(AofWriter::new(config.fsync, valid_len, now_ms())),
            gate: RefCell::new(DurabilityGate::default()),
            kick: Notify::default(),
            broken: RefCell::new(None),
            max_record_bytes: config.max_record_bytes,
        };
        Ok((aof, summary))
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
    ) -> Option<Reply> {
        if command.is_write() {
            if let Some(why) = self.refusal() {
                return Some(Reply::error(format!(
                    "MISCONF Errors writing to the AOF file: {why}"
                )));
            }
        }
        let mut writer = self.writer.borrow_mut();
        let before = writer.appended_lsn();
        let failed_before = writer.failure().is_some();
        let reply = store.execute(command, now, &mut *writer);
        if !failed_before {
            if let Some(error) = writer.failure() {
                // `admit` should have refused it; from now on every write is refused.
                tracing::error!(path = %self.path.display(), %error, "AOF record not logged");
            }
        }
        let lsn = writer.appended_lsn();
        if lsn > before {
            self.kick.notify();
        }
        if writer.must_hold_reply(lsn) {
            self.gate.borrow_mut().hold(lsn, Done { origin, reply });
            return None;
        }
        Some(reply)
    }

    pub fn sweep(&self, store: &mut Store, now: u64, work: usize) -> SweepOutcome {
        let mut writer = self.writer.borrow_mut();
        let before = writer.appended_lsn();
        let outcome = store.sweep(now, work, &mut *writer);
        if writer.appended_lsn() > before {
            self.kick.notify();
        }
        outcome
    }

    /// Timer tick: `everysec` needs a nudge when its second is up.
    pub fn tick(&self, now: u64) {
        if self.writer.borrow().fsync_due(now) {
            self.kick.notify();
        }
    }

    fn refusal(&self) -> Option<String> {
        if let Some(why) = &*self.broken.borrow() {
            return Some(why.clone());
        }
        self.writer.borrow().failure().map(|e| e.to_string())
    }

    fn fail(&self, what: &str, error: &io::Error) {
        let policy = self.writer.borrow().policy();
        tracing::error!(path = %self.path.display(), %error, "AOF {what} failed");
        if policy == FsyncPolicy::Always {
            // Held replies can never be acknowledged truthfully; Redis exits here too.
            eprintln!(
                "corewire-kv: can't persist AOF {} ({what}: {error}) with appendfsync always; exiting",
                self.path.display()
            );
            std::process::exit(1);
        }
        *self.broken.borrow_mut() = Some(format!("{what}: {error}"));
    }

    /// Writes out and syncs everything appended so far (used at shutdown).
    pub async fn flush(&self) -> io::Result<()> {
        let batch = self.writer.borrow_mut().take_batch();
        if let Some(batch) = batch {
            let end = batch.end();
            self.file.write_all_at(batch.bytes, batch.offset).await?;
            let _ = self.writer.borrow_mut().write_completed(end);
        }
        self.file.sync_data().await
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
    loop {
        aof.kick.notified().await;
        loop {
            let batch = aof.writer.borrow_mut().take_batch();
            if let Some(batch) = batch {
                let end = batch.end();
                if let Err(error) = aof.file.write_all_at(batch.bytes, batch.offset).await {
                    aof.fail("write", &error);
                    break;
                }
                if let Err(error) = aof.writer.borrow_mut().write_completed(end) {
                    tracing::error!(%error, "AOF bookkeeping");
                }
            }
            let ticket = aof.writer.borrow_mut().start_fsync(now_ms());
            let Some(ticket) = ticket else {
                break;
            };
            if let Err(error) = aof.file.sync_data().await {
                aof.fail("fsync", &error);
                break;
            }
            let durable = aof.writer.borrow_mut().fsync_completed(ticket);
            let released: Vec<Done> = aof.gate.borrow_mut().release(durable).collect();
            for done in released {
                shard.deliver(done.origin, done.reply);
            }
        }
    }
}

/// Copies everything from `offset` to the end of `log` to `<path>.cut-<offset>` (synced,
/// directory too), so `--aof-fix` never destroys anything. Blocking I/O, at start-up only.
fn save_cut(log: &File, path: &Path, offset: u64) -> io::Result<PathBuf> {
    let mut name = path.as_os_str().to_owned();
    name.push(format!(".cut-{offset}"));
    let saved = PathBuf::from(name);
    let mut copy = OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&saved)?;
    let mut from = log;
    from.seek(SeekFrom::Start(offset))?;
    io::copy(&mut from, &mut copy)?;
    copy.sync_all()?;
    if let Some(dir) = saved.parent() {
        File::open(dir)?.sync_all()?;
    }
    Ok(saved)
}

/// Reads `len` bytes from the start of the file through the ring.
async fn read_whole(file: &RingFile, len: u64) -> io::Result<BytesMut> {
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
