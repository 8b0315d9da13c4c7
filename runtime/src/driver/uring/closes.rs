//! The close queue: descriptors whose last holder dropped are closed through the ring at the
//! next submit, fire and forget (a failed close has nobody to report to, and the descriptor
//! is gone either way).

use std::io;

use io_uring::{opcode, squeue, types};

use super::Uring;
use crate::driver::fd;

/// `user_data` of the closes the driver issues for dropped descriptors.
const CLOSE_TOKEN: u64 = u64::MAX - 2;

pub(super) fn is_close(ud: u64) -> bool {
    ud == CLOSE_TOKEN
}

/// Only failures post a completion (SKIP_SUCCESS).
pub(super) fn completed(result: i32) {
    tracing::debug!(error = %io::Error::from_raw_os_error(-result), "close failed");
}

impl Uring {
    pub(super) fn flush_closes(&mut self) -> io::Result<()> {
        for slot in fd::take_pending_slot_closes() {
            self.close_fixed(slot)?;
        }
        fd::take_pending_closes(&mut self.closing);
        let mut closing = std::mem::take(&mut self.closing);
        for raw in closing.drain(..) {
            let sqe = opcode::Close::new(types::Fd(raw))
                .build()
                .flags(squeue::Flags::SKIP_SUCCESS)
                .user_data(CLOSE_TOKEN);
            self.push(&sqe)?;
        }
        self.closing = closing;
        Ok(())
    }
}
