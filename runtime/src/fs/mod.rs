//! Files and directories through the shard's ring: [`File`] (positional reads and writes,
//! syncs, metadata, `set_len`), [`OpenOptions`], and path operations ([`metadata`],
//! [`remove_file`], [`rename`], [`create_dir_all`], ...).
//!
//! No call here blocks the shard's loop. Every operation goes through the ring where the
//! kernel has it (probed at start, see `Features`); on an older kernel the few that are
//! missing (mkdirat before 5.15, ftruncate before 6.9) run with std on a helper thread
//! ([`spawn_blocking`](crate::spawn_blocking)), as does [`read_dir`], which io_uring cannot
//! do at all.
//!
//! Errors are values: a full disk is `Err` (`ErrorKind::StorageFull`) from the write, never a
//! panic.

mod fallback;
mod file;
mod metadata;
mod open_options;
mod paths;

pub use file::File;
pub use metadata::{FileType, Metadata};
pub use open_options::OpenOptions;
pub use paths::{
    create_dir, create_dir_all, metadata, read, read_dir, remove_dir, remove_file, rename,
    symlink_metadata, write, DirEntry,
};
