//! Files and directories through the ring: open options, positional I/O, metadata (statx),
//! set_len, syncs, path operations, whole-file helpers, a full disk as an error value, and
//! spawn_blocking (where the ring has no operation).

use std::io::ErrorKind;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use bytes::{Bytes, BytesMut};
use corewire_runtime::fs::{self, File, FileType, OpenOptions};
use corewire_runtime::{sleep, spawn_blocking, spawn_local, JoinError};

/// A fresh directory for one test, removed at the end.
struct TempDir(PathBuf);

impl TempDir {
    fn new(name: &str) -> TempDir {
        let dir = std::env::temp_dir().join(format!("corewire-fs-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }

    fn join(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

async fn read_all(file: &File) -> Vec<u8> {
    let mut buf = BytesMut::with_capacity(1 << 16);
    loop {
        let offset = buf.len() as u64;
        let (n, back) = file.read_at(buf, offset).await;
        buf = back;
        if n.unwrap() == 0 {
            return buf.to_vec();
        }
        if buf.capacity() == buf.len() {
            buf.reserve(1 << 16);
        }
    }
}

#[corewire_runtime::test]
async fn open_options_write_read_and_metadata() {
    let dir = TempDir::new("open");
    let path = dir.join("data");
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .mode(0o640)
        .open(&path)
        .await
        .unwrap();
    file.write_all_at(Bytes::from_static(b"hello, ring"), 0)
        .await
        .unwrap();
    file.write_all_at(Bytes::from_static(b"RING"), 7)
        .await
        .unwrap();
    assert_eq!(read_all(&file).await, b"hello, RING");
    file.sync_data().await.unwrap();
    file.sync_all().await.unwrap();

    let meta = file.metadata().await.unwrap();
    assert_eq!(meta.len(), 11);
    assert!(meta.is_file() && !meta.is_dir());
    assert_eq!(meta.file_type(), FileType::File);
    assert_eq!(meta.permissions() & 0o600, 0o600, "mode {:o}", meta.mode());
    let std_meta = std::fs::metadata(&path).unwrap();
    assert_eq!(meta.ino(), std::os::unix::fs::MetadataExt::ino(&std_meta));
    assert_eq!(meta.modified(), std_meta.modified().unwrap());
    let age = SystemTime::now().duration_since(meta.modified()).unwrap();
    assert!(age < Duration::from_secs(600), "modified {age:?} ago");
    // By path, the same file.
    assert_eq!(fs::metadata(&path).await.unwrap(), meta);

    // create_new on an existing file fails; append writes at the end.
    let err = OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&path)
        .await
        .err()
        .expect("exists");
    assert_eq!(err.kind(), ErrorKind::AlreadyExists);
    let appender = OpenOptions::new().append(true).open(&path).await.unwrap();
    appender
        .write_all_at(Bytes::from_static(b"!"), 0)
        .await
        .unwrap();
    appender.close().await.unwrap();
    assert_eq!(fs::read(&path).await.unwrap(), b"hello, RING!");
    // Reading needs read access; nothing set is refused before any syscall.
    let err = OpenOptions::new()
        .open(&path)
        .await
        .err()
        .expect("no access");
    assert_eq!(err.kind(), ErrorKind::InvalidInput);
    file.close().await.unwrap();
}

#[corewire_runtime::test]
async fn set_len_truncates_and_extends_with_zeros() {
    let dir = TempDir::new("set-len");
    let path = dir.join("sized");
    fs::write(&path, Bytes::from(vec![7u8; 10_000]))
        .await
        .unwrap();
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .open(&path)
        .await
        .unwrap();
    file.set_len(100).await.unwrap();
    assert_eq!(file.metadata().await.unwrap().len(), 100);
    file.set_len(300).await.unwrap();
    let data = read_all(&file).await;
    assert_eq!(data.len(), 300);
    assert!(data[..100].iter().all(|&b| b == 7));
    assert!(data[100..].iter().all(|&b| b == 0));
    // A read-only file cannot change length: an error value.
    let ro = File::open(&path).await.unwrap();
    assert!(ro.set_len(0).await.is_err());
    assert_eq!(fs::metadata(&path).await.unwrap().len(), 300);
}

#[corewire_runtime::test]
async fn path_operations() {
    let dir = TempDir::new("paths");
    // create_dir_all: nested, then again (exists), then through a file (refused).
    let nested = dir.join("a/b/c");
    fs::create_dir_all(&nested).await.unwrap();
    assert!(fs::metadata(&nested).await.unwrap().is_dir());
    fs::create_dir_all(&nested).await.unwrap();
    fs::create_dir_all(dir.join("a")).await.unwrap();
    fs::write(dir.join("a/file"), Bytes::from_static(b"x"))
        .await
        .unwrap();
    let err = fs::create_dir_all(dir.join("a/file/d"))
        .await
        .expect_err("a file is in the way");
    assert_eq!(err.kind(), ErrorKind::NotADirectory);
    let err = fs::create_dir(dir.join("a/file"))
        .await
        .expect_err("exists");
    assert_eq!(err.kind(), ErrorKind::AlreadyExists);

    // rename replaces the target atomically.
    fs::write(dir.join("new"), Bytes::from_static(b"new"))
        .await
        .unwrap();
    fs::write(dir.join("old"), Bytes::from_static(b"old"))
        .await
        .unwrap();
    fs::rename(dir.join("new"), dir.join("old")).await.unwrap();
    assert_eq!(fs::read(dir.join("old")).await.unwrap(), b"new");
    assert_eq!(
        fs::metadata(dir.join("new")).await.err().unwrap().kind(),
        ErrorKind::NotFound
    );

    // A symlink: metadata follows it, symlink_metadata does not.
    std::os::unix::fs::symlink(dir.join("old"), dir.join("link")).unwrap();
    assert!(fs::metadata(dir.join("link")).await.unwrap().is_file());
    assert!(fs::symlink_metadata(dir.join("link"))
        .await
        .unwrap()
        .is_symlink());

    // read_dir lists names and types.
    let mut listed: Vec<(String, Option<FileType>)> = fs::read_dir(&dir.0)
        .await
        .unwrap()
        .iter()
        .map(|e| {
            assert_eq!(e.path(), dir.0.join(e.file_name()));
            (e.file_name().to_string_lossy().into_owned(), e.file_type())
        })
        .collect();
    listed.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(
        listed,
        [
            ("a".to_string(), Some(FileType::Dir)),
            ("link".to_string(), Some(FileType::Symlink)),
            ("old".to_string(), Some(FileType::File)),
        ]
    );

    // Removing: files and links with remove_file, empty directories with remove_dir.
    fs::remove_file(dir.join("link")).await.unwrap();
    fs::remove_file(dir.join("a/file")).await.unwrap();
    assert_eq!(
        fs::remove_file(dir.join("a/file"))
            .await
            .unwrap_err()
            .kind(),
        ErrorKind::NotFound
    );
    assert!(fs::remove_file(dir.join("a")).await.is_err());
    assert_eq!(
        fs::remove_dir(dir.join("a/b")).await.unwrap_err().kind(),
        ErrorKind::DirectoryNotEmpty
    );
    for d in ["a/b/c", "a/b", "a"] {
        fs::remove_dir(dir.join(d)).await.unwrap();
    }
    // The directory's entries are made durable by syncing it.
    File::open(&dir.0).await.unwrap().sync_all().await.unwrap();
    let left: Vec<_> = fs::read_dir(&dir.0).await.unwrap();
    assert_eq!(left.len(), 1, "{left:?}");
}

/// A 64 KiB tmpfs mounted for one test (needs root: CAP_SYS_ADMIN), unmounted on drop.
struct SmallDisk(TempDir);

impl SmallDisk {
    fn mount(name: &str) -> SmallDisk {
        let dir = TempDir::new(name);
        let status = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", "size=64k", "corewire-test"])
            .arg(&dir.0)
            .status();
        match status {
            Ok(s) if s.success() => SmallDisk(dir),
            other => panic!(
                "mounting a 64 KiB tmpfs at {} failed ({other:?}): this test fills a disk \
                 and needs root (CAP_SYS_ADMIN) to mount a small one; run the tests as root",
                dir.0.display()
            ),
        }
    }

    fn path(&self) -> &Path {
        &self.0 .0
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount")
            .arg(&self.0 .0)
            .status();
    }
}

#[corewire_runtime::test]
async fn a_full_disk_is_an_error_value_from_write_at() {
    let disk = SmallDisk::mount("enospc");
    let path = disk.path().join("filler");
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .open(&path)
        .await
        .unwrap();
    let chunk = Bytes::from(vec![b'x'; 16 * 1024]);
    let mut offset = 0u64;
    let full = loop {
        assert!(offset < 1 << 20, "wrote {offset} bytes to a 64 KiB disk");
        let (result, _) = file.write_at(chunk.clone(), offset).await;
        match result {
            Ok(n) => offset += n as u64,
            Err(e) => break e,
        }
    };
    assert_eq!(full.raw_os_error(), Some(libc::ENOSPC), "{full}");
    assert_eq!(full.kind(), ErrorKind::StorageFull);
    // write_all_at reports the same, as a value.
    let err = file
        .write_all_at(chunk.clone(), offset)
        .await
        .expect_err("still full");
    assert_eq!(err.raw_os_error(), Some(libc::ENOSPC));
    // The file is intact and usable: what was written is there, and freeing space lets
    // writes succeed again.
    assert_eq!(file.metadata().await.unwrap().len(), offset);
    assert!(read_all(&file).await.iter().all(|&b| b == b'x'));
    file.set_len(0).await.unwrap();
    file.write_all_at(chunk, 0).await.unwrap();
    file.sync_all().await.unwrap();
    file.close().await.unwrap();
    // Creating a directory on the full disk is an error value too, or succeeds: never a
    // panic. (tmpfs counts inodes, not blocks, for directories.)
    let _ = fs::create_dir_all(disk.path().join("d/e")).await;
}

#[corewire_runtime::test]
async fn spawn_blocking_runs_off_the_shard_while_it_keeps_running() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let shard_thread = std::thread::current().id();
    let ticks = std::sync::Arc::new(AtomicUsize::new(0));
    let ticker = spawn_local({
        let ticks = ticks.clone();
        async move {
            loop {
                sleep(Duration::from_millis(2)).await;
                ticks.fetch_add(1, Ordering::SeqCst);
            }
        }
    });
    // The blocking work waits for the shard's timer to tick 5 times: it can only see that if
    // the shard keeps running meanwhile (bounded, so a shard held by it fails instead of
    // hanging).
    let watched = ticks.clone();
    let (thread, name, seen) = spawn_blocking(move || {
        let start = watched.load(Ordering::SeqCst);
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        while watched.load(Ordering::SeqCst) < start + 5 && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(1));
        }
        let t = std::thread::current();
        (
            t.id(),
            t.name().map(str::to_owned),
            watched.load(Ordering::SeqCst) - start,
        )
    })
    .await
    .unwrap();
    assert_ne!(thread, shard_thread);
    assert_eq!(name.as_deref(), Some("corewire-blocking"));
    assert!(
        seen >= 5,
        "the shard ran {seen} timer ticks while the blocking work ran"
    );
    ticker.abort();
    // A panic is reported, not propagated into the shard.
    let panicked = spawn_blocking(|| -> u32 { panic!("on purpose") }).await;
    assert_eq!(panicked, Err(JoinError::Aborted));
    // Many at once: all complete (more than the helper threads, which take turns).
    let handles: Vec<_> = (0..20u64).map(|i| spawn_blocking(move || i * 2)).collect();
    let mut sum = 0;
    for h in handles {
        sum += h.await.unwrap();
    }
    assert_eq!(sum, (0..20u64).map(|i| i * 2).sum());
}
