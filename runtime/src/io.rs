//! Waiting on descriptors the runtime does not own (an RDMA completion channel, an rdma_cm
//! event channel) through the shard's ring, without a thread of their own.

use std::io;
use std::os::fd::{AsFd, AsRawFd};

use crate::driver::op::poll_add::PollAdd;
use crate::driver::op::Op;

/// Resolve once `fd` is readable. The borrow keeps the descriptor open while the wait is
/// pending. Cancel-safe: readiness is not consumed by a dropped wait.
pub async fn wait_readable(fd: &impl AsFd) -> io::Result<()> {
    let raw = fd.as_fd().as_raw_fd();
    Op::submit(PollAdd::readable(raw)).await.map(|_| ())
}
