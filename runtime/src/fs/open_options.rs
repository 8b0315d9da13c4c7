use std::io;
use std::path::Path;

use super::paths::c_path;
use super::File;
use crate::driver::op::open::Open;
use crate::driver::op::Op;

/// How to open a [`File`], like `std::fs::OpenOptions`; the open itself goes through the ring.
#[derive(Debug, Clone)]
pub struct OpenOptions {
    read: bool,
    write: bool,
    append: bool,
    truncate: bool,
    create: bool,
    create_new: bool,
    mode: u32,
    custom_flags: i32,
}

impl Default for OpenOptions {
    fn default() -> Self {
        OpenOptions::new()
    }
}

impl OpenOptions {
    /// Nothing set (an open with these options fails until `read` or `write` is set).
    pub fn new() -> OpenOptions {
        OpenOptions {
            read: false,
            write: false,
            append: false,
            truncate: false,
            create: false,
            create_new: false,
            mode: 0o666,
            custom_flags: 0,
        }
    }

    /// Open for reading.
    pub fn read(&mut self, on: bool) -> &mut Self {
        self.read = on;
        self
    }

    /// Open for writing.
    pub fn write(&mut self, on: bool) -> &mut Self {
        self.write = on;
        self
    }

    /// O_APPEND (implies write).
    pub fn append(&mut self, on: bool) -> &mut Self {
        self.append = on;
        self
    }

    /// Truncate the file to zero length on open (needs `write`).
    pub fn truncate(&mut self, on: bool) -> &mut Self {
        self.truncate = on;
        self
    }

    /// Create the file if it does not exist (needs `write` or `append`).
    pub fn create(&mut self, on: bool) -> &mut Self {
        self.create = on;
        self
    }

    /// Fail if the file exists (O_CREAT | O_EXCL).
    pub fn create_new(&mut self, on: bool) -> &mut Self {
        self.create_new = on;
        self
    }

    /// Permission bits of a created file, before the umask (default 0o666).
    pub fn mode(&mut self, mode: u32) -> &mut Self {
        self.mode = mode;
        self
    }

    /// Extra open(2) flags (O_DIRECT, O_NOATIME, ...). The access mode and creation flags are
    /// the ones set above.
    pub fn custom_flags(&mut self, flags: i32) -> &mut Self {
        self.custom_flags = flags;
        self
    }

    fn flags(&self) -> io::Result<i32> {
        let writes = self.write || self.append;
        let access = match (self.read, writes) {
            (true, false) => libc::O_RDONLY,
            (false, true) => libc::O_WRONLY,
            (true, true) => libc::O_RDWR,
            (false, false) => return Err(io::Error::from_raw_os_error(libc::EINVAL)),
        };
        if (self.truncate || self.create || self.create_new) && !writes {
            return Err(io::Error::from_raw_os_error(libc::EINVAL));
        }
        let mut flags = access;
        if self.append {
            flags |= libc::O_APPEND;
        }
        if self.truncate && !self.append {
            flags |= libc::O_TRUNC;
        }
        if self.create_new {
            flags |= libc::O_CREAT | libc::O_EXCL;
        } else if self.create {
            flags |= libc::O_CREAT;
        }
        let mode_bits = libc::O_ACCMODE | libc::O_CREAT | libc::O_EXCL | libc::O_TRUNC;
        Ok(flags | (self.custom_flags & !mode_bits))
    }

    /// Open `path` through the ring. Cancel-safe in the sense that a file opened for a
    /// dropped future is closed, never leaked.
    pub async fn open(&self, path: impl AsRef<Path>) -> io::Result<File> {
        let flags = self.flags()?;
        let fd = Op::submit(Open::new(c_path(path.as_ref())?, flags, self.mode)).await?;
        Ok(File::from_fd(fd))
    }
}
