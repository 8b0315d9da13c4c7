//! Files through the shard's ring.

mod file;
mod open_options;

pub use file::File;
pub use open_options::OpenOptions;
