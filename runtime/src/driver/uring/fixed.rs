//! The registered file table (`IORING_REGISTER_FILES`, sparse): streams that get a slot are
//! named by it in their SQEs (`IOSQE_FIXED_FILE`). A slot is free again only once the close
//! of its file through the ring completed.

use std::io;
use std::os::fd::RawFd;

use io_uring::{opcode, types, IoUring};

use super::Uring;

/// `user_data` of the closes of registered file slots, plus the slot: the slot is free again
/// at the completion (not before: a slot reused before its close ran would lose its new
/// file). Below `wake::MSG_SENT_BASE`; slot keys never come near either.
pub(super) const FIXED_CLOSE_BASE: u64 = 1 << 61;

/// The table of `slots` entries, handed out from slot 0 up; `None` when there is none (0
/// asked for, `COREWIRE_IO_URING=plain`, or the kernel refused).
pub(super) fn register_table(ring: &IoUring, slots: u32) -> Option<Vec<u32>> {
    if slots == 0 || super::features::forced_plain() {
        return None;
    }
    match ring.submitter().register_files_sparse(slots) {
        Ok(()) => Some((0..slots).rev().collect()),
        Err(e) => {
            tracing::info!(
                error = %e,
                "{}; plain descriptors",
                super::features::why_not("no registered file table", &e)
            );
            None
        }
    }
}

impl Uring {
    /// Whether the shard has a registered file table.
    pub(crate) fn has_fixed_table(&self) -> bool {
        self.fixed.is_some()
    }

    /// Put `raw` into a free slot of the registered file table: the slot, or `None` when
    /// there is no table, it is full, or the kernel refused.
    pub(crate) fn register_fd(&mut self, raw: RawFd) -> Option<u32> {
        let slot = self.fixed.as_mut()?.pop()?;
        match self.ring.submitter().register_files_update(slot, &[raw]) {
            Ok(_) => Some(slot),
            Err(e) => {
                tracing::debug!(error = %e, "registering a descriptor failed");
                if let Some(free) = self.fixed.as_mut() {
                    free.push(slot);
                }
                None
            }
        }
    }

    /// Queue the close of registered slot `slot` (its last holder dropped).
    pub(super) fn close_fixed(&mut self, slot: u32) -> io::Result<()> {
        let sqe = opcode::Close::new(types::Fixed(slot))
            .build()
            .user_data(FIXED_CLOSE_BASE + u64::from(slot));
        self.push(&sqe)
    }
}

/// Whether `ud` is the completion of a slot's close (the slot is free again).
pub(super) fn close_completed(ud: u64, result: i32, fixed: &mut Option<Vec<u32>>) -> bool {
    if !(FIXED_CLOSE_BASE..super::wake::MSG_SENT_BASE).contains(&ud) {
        return false;
    }
    if result < 0 {
        tracing::debug!(error = %io::Error::from_raw_os_error(-result), "closing a registered slot failed");
    }
    if let Some(free) = fixed.as_mut() {
        free.push((ud - FIXED_CLOSE_BASE) as u32);
    }
    true
}
