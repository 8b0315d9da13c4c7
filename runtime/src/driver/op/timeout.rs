use std::io;
use std::time::Duration;

use io_uring::{opcode, squeue, types};

use super::OpData;

/// A kernel-side timeout. Shard timers (`sleep`) do not need it — the loop parks with the
/// nearest deadline — but it is useful to bound a linked operation.
pub struct Timeout {
    ts: Box<types::Timespec>,
}

impl Timeout {
    pub fn new(after: Duration) -> Timeout {
        Timeout {
            ts: Box::new(types::Timespec::from(after)),
        }
    }
}

impl OpData for Timeout {
    type Output = io::Result<()>;

    fn sqe(&mut self) -> squeue::Entry {
        opcode::Timeout::new(&*self.ts).build()
    }

    fn complete(self, result: io::Result<u32>, _flags: u32) -> io::Result<()> {
        match result {
            Err(e) if e.raw_os_error() == Some(libc::ETIME) => Ok(()),
            other => other.map(|_| ()),
        }
    }
}
