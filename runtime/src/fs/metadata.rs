use std::os::unix::fs::MetadataExt;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// What kind of file an entry is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum FileType {
    /// A regular file.
    File,
    /// A directory.
    Dir,
    /// A symbolic link (only from [`symlink_metadata`](super::symlink_metadata) or
    /// [`read_dir`](super::read_dir)).
    Symlink,
    /// A socket, FIFO or device.
    Other,
}

impl FileType {
    fn from_mode(mode: u32) -> FileType {
        match mode & libc::S_IFMT {
            libc::S_IFREG => FileType::File,
            libc::S_IFDIR => FileType::Dir,
            libc::S_IFLNK => FileType::Symlink,
            _ => FileType::Other,
        }
    }

    pub(crate) fn from_std(t: std::fs::FileType) -> FileType {
        if t.is_file() {
            FileType::File
        } else if t.is_dir() {
            FileType::Dir
        } else if t.is_symlink() {
            FileType::Symlink
        } else {
            FileType::Other
        }
    }

    /// A regular file.
    pub fn is_file(self) -> bool {
        self == FileType::File
    }

    /// A directory.
    pub fn is_dir(self) -> bool {
        self == FileType::Dir
    }

    /// A symbolic link.
    pub fn is_symlink(self) -> bool {
        self == FileType::Symlink
    }
}

/// A file's metadata, from statx(2) through the ring ([`metadata`](super::metadata),
/// [`File::metadata`](super::File::metadata)).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Metadata {
    len: u64,
    mode: u32,
    ino: u64,
    nlink: u64,
    uid: u32,
    gid: u32,
    blocks: u64,
    blksize: u64,
    accessed: SystemTime,
    modified: SystemTime,
    created: Option<SystemTime>,
}

impl Metadata {
    pub(crate) fn from_statx(s: &libc::statx) -> Metadata {
        let created = (s.stx_mask & libc::STATX_BTIME != 0).then(|| time(&s.stx_btime));
        Metadata {
            len: s.stx_size,
            mode: u32::from(s.stx_mode),
            ino: s.stx_ino,
            nlink: u64::from(s.stx_nlink),
            uid: s.stx_uid,
            gid: s.stx_gid,
            blocks: s.stx_blocks,
            blksize: u64::from(s.stx_blksize),
            accessed: time(&s.stx_atime),
            modified: time(&s.stx_mtime),
            created,
        }
    }

    /// From std's metadata (the helper-thread fallback).
    pub(crate) fn from_std(m: &std::fs::Metadata) -> Metadata {
        Metadata {
            len: m.len(),
            mode: m.mode(),
            ino: m.ino(),
            nlink: m.nlink(),
            uid: m.uid(),
            gid: m.gid(),
            blocks: m.blocks(),
            blksize: m.blksize(),
            accessed: m.accessed().unwrap_or(UNIX_EPOCH),
            modified: m.modified().unwrap_or(UNIX_EPOCH),
            created: m.created().ok(),
        }
    }

    /// Size in bytes.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Size zero.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The kind of file.
    pub fn file_type(&self) -> FileType {
        FileType::from_mode(self.mode)
    }

    /// A regular file.
    pub fn is_file(&self) -> bool {
        self.file_type().is_file()
    }

    /// A directory.
    pub fn is_dir(&self) -> bool {
        self.file_type().is_dir()
    }

    /// A symbolic link.
    pub fn is_symlink(&self) -> bool {
        self.file_type().is_symlink()
    }

    /// Permission bits (`0o7777` of the mode).
    pub fn permissions(&self) -> u32 {
        self.mode & 0o7777
    }

    /// The whole `st_mode`: file type and permission bits.
    pub fn mode(&self) -> u32 {
        self.mode
    }

    /// Inode number.
    pub fn ino(&self) -> u64 {
        self.ino
    }

    /// Number of hard links.
    pub fn nlink(&self) -> u64 {
        self.nlink
    }

    /// Owner's user id.
    pub fn uid(&self) -> u32 {
        self.uid
    }

    /// Owner's group id.
    pub fn gid(&self) -> u32 {
        self.gid
    }

    /// 512-byte blocks allocated (less than `len` for a sparse file).
    pub fn blocks(&self) -> u64 {
        self.blocks
    }

    /// The file system's preferred I/O size for this file.
    pub fn blksize(&self) -> u64 {
        self.blksize
    }

    /// Last access.
    pub fn accessed(&self) -> SystemTime {
        self.accessed
    }

    /// Last modification of the contents.
    pub fn modified(&self) -> SystemTime {
        self.modified
    }

    /// Creation, where the file system records it.
    pub fn created(&self) -> Option<SystemTime> {
        self.created
    }
}

fn time(t: &libc::statx_timestamp) -> SystemTime {
    let nanos = Duration::from_nanos(u64::from(t.tv_nsec));
    if t.tv_sec >= 0 {
        UNIX_EPOCH + Duration::from_secs(t.tv_sec as u64) + nanos
    } else {
        UNIX_EPOCH - Duration::from_secs(t.tv_sec.unsigned_abs()) + nanos
    }
}
