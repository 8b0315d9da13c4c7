use std::io;
use std::os::fd::OwnedFd;
use std::path::Path;

use bytes::{Buf, Bytes, BytesMut};

use super::paths::ring_has;
use super::{fallback, Metadata, OpenOptions};
use crate::driver::fd::SharedFd;
use crate::driver::op::fsync::Fsync;
use crate::driver::op::ftruncate::Ftruncate;
use crate::driver::op::read::Read;
use crate::driver::op::statx::Statx;
use crate::driver::op::write::Write;
use crate::driver::op::Op;

/// A file whose reads, writes and syncs go through the shard's ring. Positional I/O only
/// (`read_at`/`write_at`): there is no shared cursor to race on.
///
/// Owns its descriptor jointly with its operations in flight; dropping the file closes it
/// (through the ring) once they have completed. `!Send`: it belongs to its shard.
pub struct File {
    pub(super) fd: SharedFd,
}

impl File {
    pub(crate) fn from_fd(fd: OwnedFd) -> File {
        File {
            fd: SharedFd::new(fd),
        }
    }

    /// Adopt a file opened with std (for instance to keep using its metadata calls).
    pub fn from_std(file: std::fs::File) -> File {
        File::from_fd(file.into())
    }

    /// Open read-only.
    pub async fn open(path: impl AsRef<Path>) -> io::Result<File> {
        OpenOptions::new().read(true).open(path).await
    }

    /// Open write-only, creating the file or truncating it.
    pub async fn create(path: impl AsRef<Path>) -> io::Result<File> {
        OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .open(path)
            .await
    }

    /// Read into `buf`'s spare capacity at `offset`; `Ok(0)` at end of file (or when `buf`
    /// has no spare capacity). Dropping the future drops the buffer.
    pub async fn read_at(&self, buf: BytesMut, offset: u64) -> (io::Result<usize>, BytesMut) {
        Op::submit(Read::new(self.fd.clone(), buf, offset)).await
    }

    /// One write of `buf` at `offset`; may write only part of it. A full disk is an error
    /// value (`ErrorKind::StorageFull`, ENOSPC), as is every other failure.
    pub async fn write_at(&self, buf: Bytes, offset: u64) -> (io::Result<usize>, Bytes) {
        Op::submit(Write::new(self.fd.clone(), buf, offset)).await
    }

    /// Write all of `buf` at `offset`. Not cancel-safe: dropped midway, an unknown prefix
    /// was written.
    pub async fn write_all_at(&self, mut buf: Bytes, mut offset: u64) -> io::Result<()> {
        while !buf.is_empty() {
            let (result, rest) = self.write_at(buf, offset).await;
            buf = rest;
            let written = result?;
            if written == 0 {
                return Err(io::ErrorKind::WriteZero.into());
            }
            buf.advance(written);
            offset += written as u64;
        }
        Ok(())
    }

    /// fdatasync(2): the data and what is needed to read it back reach stable storage.
    pub async fn sync_data(&self) -> io::Result<()> {
        Op::submit(Fsync::new(self.fd.clone(), true)).await
    }

    /// fsync(2): data and all metadata. On a directory opened with [`File::open`], this
    /// makes the entries created, renamed or removed in it durable.
    pub async fn sync_all(&self) -> io::Result<()> {
        Op::submit(Fsync::new(self.fd.clone(), false)).await
    }

    /// The file's metadata (statx(2) on the open file).
    pub async fn metadata(&self) -> io::Result<Metadata> {
        if !ring_has(|f| f.statx) {
            return fallback::file_metadata(&self.fd).await;
        }
        let stx = Op::submit(Statx::file(self.fd.clone())).await?;
        Ok(Metadata::from_statx(&stx))
    }

    /// Truncate or extend (with zeros) the file to `len` bytes (ftruncate(2)). Through the
    /// ring on Linux 6.9 and later; on an older kernel on a helper thread (the shard keeps
    /// running). Needs a file opened for writing.
    pub async fn set_len(&self, len: u64) -> io::Result<()> {
        if !ring_has(|f| f.ftruncate) {
            return fallback::set_len(&self.fd, len).await;
        }
        Op::submit(Ftruncate::new(self.fd.clone(), len)).await
    }

    /// Close through the ring once every operation in flight on the file has completed, and
    /// report the close's result (dropping the file closes it without a report).
    pub async fn close(self) -> io::Result<()> {
        self.fd.close().await
    }
}
