//! Start-up of a shard's log: read its manifest (or the single `shard-<i>.aof` of a shard
//! that never rewrote), remove files a finished or interrupted rewrite left behind, and
//! replay every file in order through the shard's ring, cutting damage only as the load
//! policy allows.

use std::fmt;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use corewire::runtime::fs::File as RingFile;

use super::aof_io::{read_whole, LogFile};
use super::config::AofConfig;
use crate::aof::{
    is_log_file_of, CorruptTail, Damage, LoadPolicy, Manifest, RecordReader, Recovery,
};
use crate::command::Command;
use crate::store::Store;

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
    /// The shard's manifest cannot be read or names a file that is not there.
    Manifest {
        path: PathBuf,
        why: String,
    },
}

impl fmt::Display for AofStartError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AofStartError::Io { path, error } => write!(f, "AOF {}: {error}", path.display()),
            AofStartError::Manifest { path, why } => {
                write!(f, "AOF manifest {}: {why}", path.display())
            }
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

/// What start-up found in a shard's log (all its files together).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReplaySummary {
    pub files: u64,
    pub records: u64,
    /// Bytes replayed.
    pub valid_len: u64,
    /// Bytes cut off: a torn last record, or whatever `--aof-fix` cut.
    pub truncated: u64,
    /// The function libraries as the log last recorded them (shard 0's log holds them).
    pub functions: Option<bytes::Bytes>,
}

/// A shard's log as start-up leaves it.
pub(crate) struct Loaded {
    pub manifest: Manifest,
    /// The file to append to (the manifest's last), positioned by `current_len`.
    pub current: LogFile,
    pub current_len: u64,
    /// Bytes of every other file (the base and older incremental files).
    pub closed_len: u64,
    pub summary: ReplaySummary,
}

/// Reads shard `shard`'s log from `config.dir` into `store`.
pub(crate) async fn load(
    config: &AofConfig,
    shard: usize,
    store: &mut Store,
) -> Result<Loaded, AofStartError> {
    let dir = &config.dir;
    let manifest_path = dir.join(Manifest::file_name(shard));
    let (manifest, named) = match fs::read_to_string(&manifest_path) {
        Ok(text) => match Manifest::parse(shard, &text) {
            Ok(manifest) => (manifest, true),
            Err(why) => {
                return Err(AofStartError::Manifest {
                    path: manifest_path,
                    why: why.to_string(),
                })
            }
        },
        Err(e) if e.kind() == io::ErrorKind::NotFound => (Manifest::initial(shard), false),
        Err(error) => {
            return Err(AofStartError::Io {
                path: manifest_path,
                error,
            })
        }
    };
    remove_leftovers(dir, shard, &manifest).map_err(|error| AofStartError::Io {
        path: dir.clone(),
        error,
    })?;

    let names: Vec<String> = manifest.files().map(str::to_owned).collect();
    let mut summary = ReplaySummary::default();
    let mut closed_len = 0;
    let mut current = None;
    for (i, name) in names.iter().enumerate() {
        let last = i + 1 == names.len();
        let path = dir.join(name);
        let failed = |error: io::Error| AofStartError::Io {
            path: path.clone(),
            error,
        };
        // Only the single log of a shard that never rewrote may be created here; a file a
        // manifest names was created (and synced) before the manifest named it.
        let file = match OpenOptions::new()
            .read(true)
            .write(true)
            .create(!named)
            .truncate(false)
            .open(&path)
        {
            Ok(file) => file,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                return Err(AofStartError::Manifest {
                    path: manifest_path,
                    why: format!("{name} is named but missing"),
                })
            }
            Err(error) => return Err(failed(error)),
        };
        let valid_len = replay_file(&file, &path, last, config.load, store, &mut summary).await?;
        summary.files += 1;
        if last {
            // Appends and syncs go through the ring; std kept the metadata calls and the cut.
            let file = RingFile::from_std(file);
            current = Some((LogFile { file, path }, valid_len));
        } else {
            closed_len += valid_len;
        }
    }
    let (current, current_len) = current.expect("a manifest names at least one file");
    Ok(Loaded {
        manifest,
        current,
        current_len,
        closed_len,
        summary,
    })
}

/// Replays one file; returns its length after any cut.
async fn replay_file(
    file: &File,
    path: &Path,
    last: bool,
    policy: LoadPolicy,
    store: &mut Store,
    summary: &mut ReplaySummary,
) -> Result<u64, AofStartError> {
    let failed = |error: io::Error| AofStartError::Io {
        path: path.to_owned(),
        error,
    };
    let len = file.metadata().map_err(failed)?.len();
    let ring = RingFile::from_std(file.try_clone().map_err(failed)?);
    let data = read_whole(&ring, len).await;
    // Closed through the ring; the std handle keeps the metadata calls and the cut.
    let _ = ring.close().await;
    let data = data.map_err(failed)?;
    let mut reader = RecordReader::new(data);
    let mut corrupt = None;
    for record in &mut reader {
        match record {
            Ok(Command::Script(script))
                if script.op == crate::scripting::ScriptOp::FunctionRestore =>
            {
                // The libraries are the node's, not the store's: the glue loads the last.
                summary.records += 1;
                summary.functions = script.args.first().cloned();
            }
            Ok(command) => {
                summary.records += 1;
                let reply = store.apply_replayed(command);
                if reply.is_error() {
                    tracing::debug!(path = %path.display(), ?reply, "replayed command failed");
                }
            }
            Err(tail) => corrupt = Some(tail),
        }
    }
    let valid_len = reader.valid_len() as u64;
    summary.valid_len += valid_len;
    let Some(mut tail) = corrupt else {
        return Ok(valid_len);
    };
    if !last {
        // Only the last file is ever appended to; the others were synced whole before the
        // next one took over, so no crash can have torn them.
        tail.damage = Damage::Corrupt;
    }
    if policy.recovery(tail.damage) == Recovery::Refuse {
        return Err(AofStartError::Damaged {
            path: path.to_owned(),
            tail,
        });
    }
    if tail.damage == Damage::Corrupt {
        // Cut only with --aof-fix, and never without keeping what is cut.
        let saved = save_cut(file, path, tail.offset as u64).map_err(failed)?;
        tracing::warn!(
            path = %path.display(),
            saved = %saved.display(),
            "{tail}; --aof-fix: cutting the AOF to its last good record"
        );
    } else {
        tracing::warn!(
            path = %path.display(),
            "{tail}; cutting the incomplete write (aof-load-truncated yes)"
        );
    }
    file.set_len(valid_len).map_err(failed)?;
    file.sync_all().map_err(failed)?;
    summary.truncated += len - valid_len;
    Ok(valid_len)
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

/// Removes shard `shard`'s log files that `manifest` does not name, and a manifest a crash
/// left half-written. Such files hold nothing the named ones lack: a rewrite names its new
/// incremental file before anything is written to it, and drops the old files only once its
/// base (which holds everything they did) is named. Blocking I/O, at start-up only.
fn remove_leftovers(dir: &Path, shard: usize, manifest: &Manifest) -> io::Result<()> {
    let temp = format!("{}.tmp", Manifest::file_name(shard));
    let mut removed = false;
    for entry in fs::read_dir(dir)? {
        let entry = entry?;
        let Ok(name) = entry.file_name().into_string() else {
            continue;
        };
        let leftover = name == temp
            || (is_log_file_of(shard, &name) && !manifest.files().any(|named| named == name));
        if leftover {
            tracing::info!(shard, file = %name, "removing a file an AOF rewrite left behind");
            fs::remove_file(entry.path())?;
            removed = true;
        }
    }
    if removed {
        File::open(dir)?.sync_all()?;
    }
    Ok(())
}
