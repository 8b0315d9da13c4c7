//! BLOCKING FALLBACKS. Where the kernel under a shard's ring lacks an operation (probed at
//! start: `Features::{statx, unlinkat, renameat, mkdirat, ftruncate}`; mkdirat arrived in
//! 5.15, ftruncate in 6.9), the call is made with std on a helper thread
//! ([`spawn_blocking`](crate::spawn_blocking)) and awaited: it blocks that thread, never the
//! shard's loop. Listing a directory has no io_uring operation at all, so it always comes
//! here.

use std::io;
use std::os::fd::AsFd;
use std::path::PathBuf;

use super::{DirEntry, FileType, Metadata};
use crate::driver::fd::SharedFd;

/// Run a blocking file-system call on a helper thread.
async fn unblock<T: Send + 'static>(
    f: impl FnOnce() -> io::Result<T> + Send + 'static,
) -> io::Result<T> {
    crate::spawn_blocking(f)
        .await
        .map_err(|_| io::Error::other("blocking file-system call panicked or had no thread"))?
}

/// A descriptor of our own for the helper thread (dup(2), a quick call): the shard's
/// `SharedFd` cannot leave the shard.
fn dup_file(fd: &SharedFd) -> io::Result<std::fs::File> {
    Ok(std::fs::File::from(fd.as_fd().try_clone_to_owned()?))
}

pub(super) async fn metadata(path: PathBuf, follow: bool) -> io::Result<Metadata> {
    unblock(move || {
        let m = if follow {
            std::fs::metadata(path)?
        } else {
            std::fs::symlink_metadata(path)?
        };
        Ok(Metadata::from_std(&m))
    })
    .await
}

pub(super) async fn file_metadata(fd: &SharedFd) -> io::Result<Metadata> {
    let file = dup_file(fd)?;
    unblock(move || Ok(Metadata::from_std(&file.metadata()?))).await
}

pub(super) async fn set_len(fd: &SharedFd, len: u64) -> io::Result<()> {
    let file = dup_file(fd)?;
    unblock(move || file.set_len(len)).await
}

pub(super) async fn remove_file(path: PathBuf) -> io::Result<()> {
    unblock(move || std::fs::remove_file(path)).await
}

pub(super) async fn remove_dir(path: PathBuf) -> io::Result<()> {
    unblock(move || std::fs::remove_dir(path)).await
}

pub(super) async fn rename(from: PathBuf, to: PathBuf) -> io::Result<()> {
    unblock(move || std::fs::rename(from, to)).await
}

pub(super) async fn create_dir(path: PathBuf) -> io::Result<()> {
    unblock(move || std::fs::create_dir(path)).await
}

pub(super) async fn read_dir(path: PathBuf) -> io::Result<Vec<DirEntry>> {
    unblock(move || {
        let mut entries = Vec::new();
        for entry in std::fs::read_dir(path)? {
            let entry = entry?;
            entries.push(DirEntry {
                path: entry.path(),
                file_name: entry.file_name(),
                file_type: entry.file_type().ok().map(FileType::from_std),
            });
        }
        Ok(entries)
    })
    .await
}

/// The fallbacks against the ring on this kernel (which has every operation): the same
/// answers, and the shard never blocks.
#[cfg(test)]
mod tests {
    use std::io::ErrorKind;
    use std::path::Path;

    use bytes::Bytes;

    use crate::fs::{self, File, OpenOptions};
    use crate::Runtime;

    fn on_a_shard<F: std::future::Future<Output = ()> + 'static>(
        f: impl FnOnce() -> F + Send + 'static,
    ) {
        let rt = Runtime::builder().shards(1).pin(false).build().unwrap();
        rt.run_on(0, f).unwrap();
    }

    fn temp_dir(name: &str) -> std::path::PathBuf {
        let dir =
            std::env::temp_dir().join(format!("corewire-fallback-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn fallbacks_answer_like_the_ring() {
        let dir = temp_dir("same");
        let d = dir.clone();
        on_a_shard(move || async move {
            let d: &Path = &d;
            let file = OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .open(d.join("f"))
                .await
                .unwrap();
            file.write_all_at(Bytes::from_static(b"0123456789"), 0)
                .await
                .unwrap();
            // Metadata, by path (following or not) and of the open file.
            let ring = fs::metadata(d.join("f")).await.unwrap();
            assert_eq!(super::metadata(d.join("f"), true).await.unwrap(), ring);
            assert_eq!(super::metadata(d.join("f"), false).await.unwrap(), ring);
            assert_eq!(super::file_metadata(&file.fd).await.unwrap(), ring);
            assert_eq!(ring.len(), 10);
            let missing = super::metadata(d.join("nope"), true).await.unwrap_err();
            assert_eq!(missing.kind(), ErrorKind::NotFound);
            // set_len.
            super::set_len(&file.fd, 4).await.unwrap();
            assert_eq!(file.metadata().await.unwrap().len(), 4);
            let ro = File::open(d.join("f")).await.unwrap();
            assert!(super::set_len(&ro.fd, 0).await.is_err());
            // Directories, rename, remove.
            super::create_dir(d.join("sub")).await.unwrap();
            let exists = super::create_dir(d.join("sub")).await.unwrap_err();
            assert_eq!(exists.kind(), ErrorKind::AlreadyExists);
            super::rename(d.join("f"), d.join("sub/g")).await.unwrap();
            assert!(fs::metadata(d.join("sub/g")).await.unwrap().is_file());
            let busy = super::remove_dir(d.join("sub")).await.unwrap_err();
            assert_eq!(busy.kind(), ErrorKind::DirectoryNotEmpty);
            super::remove_file(d.join("sub/g")).await.unwrap();
            let gone = super::remove_file(d.join("sub/g")).await.unwrap_err();
            assert_eq!(gone.kind(), ErrorKind::NotFound);
            super::remove_dir(d.join("sub")).await.unwrap();
            assert!(super::read_dir(d.to_owned()).await.unwrap().is_empty());
        });
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
