//! Operations on paths, through the ring where the kernel has the operation (else on a
//! helper thread: see `fallback`). Relative paths are relative to the working directory.

use std::ffi::{CString, OsString};
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use bytes::{Bytes, BytesMut};

use super::{fallback, File, FileType, Metadata};
use crate::driver::features::Features;
use crate::driver::op::mkdir_at::MkDirAt;
use crate::driver::op::rename_at::RenameAt;
use crate::driver::op::statx::Statx;
use crate::driver::op::unlink_at::UnlinkAt;
use crate::driver::op::Op;
use crate::shard::context;

/// Whether the current shard's ring has an operation (see `Features`).
pub(super) fn ring_has(op: fn(&Features) -> bool) -> bool {
    context::with_driver(|d| op(&d.features()))
}

pub(super) fn c_path(path: &Path) -> io::Result<CString> {
    CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "path contains a NUL"))
}

/// Metadata of the file at `path`, following symbolic links (statx(2)).
pub async fn metadata(path: impl AsRef<Path>) -> io::Result<Metadata> {
    stat(path.as_ref(), true).await
}

/// Metadata of `path` itself, not following a symbolic link there.
pub async fn symlink_metadata(path: impl AsRef<Path>) -> io::Result<Metadata> {
    stat(path.as_ref(), false).await
}

async fn stat(path: &Path, follow: bool) -> io::Result<Metadata> {
    if !ring_has(|f| f.statx) {
        return fallback::metadata(path.to_owned(), follow).await;
    }
    let stx = Op::submit(Statx::path(c_path(path)?, follow)).await?;
    Ok(Metadata::from_statx(&stx))
}

/// Remove a file (or a symbolic link; not a directory).
pub async fn remove_file(path: impl AsRef<Path>) -> io::Result<()> {
    let path = path.as_ref();
    if !ring_has(|f| f.unlinkat) {
        return fallback::remove_file(path.to_owned()).await;
    }
    Op::submit(UnlinkAt::file(c_path(path)?)).await
}

/// Remove an empty directory.
pub async fn remove_dir(path: impl AsRef<Path>) -> io::Result<()> {
    let path = path.as_ref();
    if !ring_has(|f| f.unlinkat) {
        return fallback::remove_dir(path.to_owned()).await;
    }
    Op::submit(UnlinkAt::dir(c_path(path)?)).await
}

/// Rename `from` to `to`, replacing `to` atomically if it exists (rename(2)). Make it
/// durable by syncing the directory afterwards (`File::open(dir)` then `sync_all`).
pub async fn rename(from: impl AsRef<Path>, to: impl AsRef<Path>) -> io::Result<()> {
    let (from, to) = (from.as_ref(), to.as_ref());
    if !ring_has(|f| f.renameat) {
        return fallback::rename(from.to_owned(), to.to_owned()).await;
    }
    Op::submit(RenameAt::new(c_path(from)?, c_path(to)?)).await
}

/// Create a directory (mode 0o777 before the umask). Fails if its parent is missing or
/// `path` exists.
pub async fn create_dir(path: impl AsRef<Path>) -> io::Result<()> {
    let path = path.as_ref();
    if !ring_has(|f| f.mkdirat) {
        return fallback::create_dir(path.to_owned()).await;
    }
    Op::submit(MkDirAt::new(c_path(path)?, 0o777)).await
}

/// Create a directory and every missing parent. Succeeds if `path` is already a directory
/// (also when another task or process creates it meanwhile); fails if something else is
/// in the way.
pub async fn create_dir_all(path: impl AsRef<Path>) -> io::Result<()> {
    let path = path.as_ref();
    // Walk up until a directory exists (or is made), then create the rest downwards.
    let mut missing = Vec::new();
    let mut at = path;
    loop {
        if at.as_os_str().is_empty() {
            break;
        }
        match create_dir(at).await {
            Ok(()) => break,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                missing.push(at);
                match at.parent() {
                    Some(parent) => at = parent,
                    None => return Err(e),
                }
            }
            Err(e) => {
                if is_dir(at).await {
                    break;
                }
                return Err(e);
            }
        }
    }
    for dir in missing.into_iter().rev() {
        if let Err(e) = create_dir(dir).await {
            if !is_dir(dir).await {
                return Err(e);
            }
        }
    }
    Ok(())
}

async fn is_dir(path: &Path) -> bool {
    metadata(path).await.is_ok_and(|m| m.is_dir())
}

/// One entry of a directory listing ([`read_dir`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DirEntry {
    pub(super) path: PathBuf,
    pub(super) file_name: OsString,
    pub(super) file_type: Option<FileType>,
}

impl DirEntry {
    /// The directory's path joined with the entry's name.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The entry's name.
    pub fn file_name(&self) -> &OsString {
        &self.file_name
    }

    /// The entry's type as the listing reported it (`None`: the file system did not say and
    /// it could not be looked up; ask [`symlink_metadata`]).
    pub fn file_type(&self) -> Option<FileType> {
        self.file_type
    }
}

/// The entries of a directory (without `.` and `..`), in the order the file system returns
/// them. io_uring has no operation for listing a directory, so this one runs on a helper
/// thread ([`spawn_blocking`](crate::spawn_blocking)); the shard keeps running.
pub async fn read_dir(path: impl AsRef<Path>) -> io::Result<Vec<DirEntry>> {
    fallback::read_dir(path.as_ref().to_owned()).await
}

/// The whole contents of a file.
pub async fn read(path: impl AsRef<Path>) -> io::Result<Vec<u8>> {
    let file = File::open(path).await?;
    let size_hint = file.metadata().await.map_or(0, |m| m.len() as usize);
    let mut buf = BytesMut::with_capacity(size_hint.max(64));
    loop {
        if buf.capacity() == buf.len() {
            buf.reserve(buf.len().max(4096));
        }
        let offset = buf.len() as u64;
        let (result, back) = file.read_at(buf, offset).await;
        buf = back;
        if result? == 0 {
            break;
        }
    }
    file.close().await?;
    Ok(buf.into())
}

/// Write `contents` to `path`, creating the file or truncating it first (not synced: call
/// [`File::sync_all`] on a file you open yourself when it must reach the disk).
pub async fn write(path: impl AsRef<Path>, contents: impl Into<Bytes>) -> io::Result<()> {
    let file = File::create(path).await?;
    file.write_all_at(contents.into(), 0).await?;
    file.close().await
}
