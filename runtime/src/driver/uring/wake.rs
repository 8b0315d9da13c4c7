//! Wake-ups: a read of the shard's eventfd stays armed in the ring (other threads write the
//! eventfd), and other shards post completions into this ring with MSG_RING.

use std::io;
use std::os::fd::RawFd;

use io_uring::{opcode, squeue, types};

use super::Uring;
use crate::driver::Reaped;

/// `user_data` of the read that waits on the shard's wake-up eventfd.
const WAKE_TOKEN: u64 = u64::MAX - 1;
/// `user_data` of the wake-ups other shards post into this ring with MSG_RING.
const MSG_WAKE_TOKEN: u64 = u64::MAX - 3;
/// `user_data` of the MSG_RING wake-ups this ring sends, plus the target shard's id: only a
/// failure posts a completion (SKIP_SUCCESS), and the target is then woken by its eventfd.
/// Slot keys (a slab's indices) never come near it.
pub(super) const MSG_SENT_BASE: u64 = 1 << 62;

impl Uring {
    pub(super) fn arm_wake_read(&mut self) -> io::Result<()> {
        let buf: *mut u64 = &mut *self.wake_buf;
        let sqe = opcode::Read::new(types::Fd(self.wake_fd), buf.cast(), 8)
            .build()
            .user_data(WAKE_TOKEN);
        self.push(&sqe)?;
        self.wake_armed = true;
        Ok(())
    }

    /// The ring's own descriptor (other shards post MSG_RING wake-ups into it).
    pub(crate) fn ring_fd(&self) -> std::os::fd::BorrowedFd<'_> {
        let raw = std::os::fd::AsRawFd::as_raw_fd(&self.ring);
        // SAFETY: the ring owns this descriptor and keeps it open as long as `self`, which
        // the borrow outlives not.
        unsafe { std::os::fd::BorrowedFd::borrow_raw(raw) }
    }

    /// Keep the ring's kernel workers (io-wq: the file writes, fsyncs and renames the kernel
    /// cannot do without blocking) on `cpus` (`crate::helper_cpus`); empty: leave them where
    /// they start, the shard's own CPU mask. A kernel without the setting keeps that too.
    pub(crate) fn set_worker_cpus(&self, cpus: &[usize]) {
        if cpus.is_empty() {
            return;
        }
        // SAFETY: `cpu_set_t` is a plain bit array; all zeroes is the empty set.
        let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
        for &cpu in cpus {
            if cpu < libc::CPU_SETSIZE as usize {
                // SAFETY: `cpu` is below the set's size, checked above.
                unsafe { libc::CPU_SET(cpu, &mut set) };
            }
        }
        if let Err(error) = self.ring.submitter().register_iowq_aff(&set) {
            tracing::debug!(%error, ?cpus, "io_uring workers left on the shard's CPUs");
        }
    }

    /// Post a wake-up completion into `target`, the ring of shard `shard` (kept open by its
    /// `ShardRemote` for as long as any shard can reach it). It goes out with this ring's
    /// next submit; a failure comes back as shard `shard` in `msg_ring_failed`.
    pub(crate) fn post_wake(&mut self, target: RawFd, shard: usize) -> io::Result<()> {
        let sqe = opcode::MsgRingData::new(types::Fd(target), 0, MSG_WAKE_TOKEN, None)
            .build()
            .flags(squeue::Flags::SKIP_SUCCESS)
            .user_data(MSG_SENT_BASE + shard as u64);
        self.push(&sqe)
    }
}

/// A wake-up's completion (the eventfd read, a MSG_RING wake-up received or failed):
/// whether `ud` was one.
pub(super) fn completion(
    ud: u64,
    result: i32,
    wake_armed: &mut bool,
    msg_ring_failed: &mut Vec<usize>,
    reaped: &mut Reaped,
) -> bool {
    match ud {
        WAKE_TOKEN => {
            *wake_armed = false;
            reaped.woke_by_eventfd = true;
        }
        MSG_WAKE_TOKEN => reaped.woke_by_msg_ring = true,
        ud if ud >= MSG_SENT_BASE => {
            tracing::debug!(error = %io::Error::from_raw_os_error(-result), "MSG_RING wake-up failed; using the eventfd");
            msg_ring_failed.push((ud - MSG_SENT_BASE) as usize);
        }
        _ => return false,
    }
    true
}
