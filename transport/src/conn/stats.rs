use std::cell::Cell;

/// Counters of one connection at one instant (plain data: the transport makes it).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ConnStats {
    /// Frames received.
    pub frames_in: u64,
    /// Frames sent.
    pub frames_out: u64,
    /// Bytes received.
    pub bytes_in: u64,
    /// Bytes sent.
    pub bytes_out: u64,
    /// Bytes queued for sending, not yet handed to the kernel (or the NIC).
    pub queued_bytes: u64,
}

/// Shard-local cells behind [`ConnStats`]: a connection counts into them with `add_in` and
/// `add_out`, and reads them with `snapshot`.
#[derive(Debug, Default)]
pub struct ConnStatsCells {
    frames_in: Cell<u64>,
    frames_out: Cell<u64>,
    bytes_in: Cell<u64>,
    bytes_out: Cell<u64>,
}

impl ConnStatsCells {
    /// Counts one received frame of `bytes` bytes.
    pub fn add_in(&self, bytes: usize) {
        self.frames_in.set(self.frames_in.get() + 1);
        self.bytes_in.set(self.bytes_in.get() + bytes as u64);
    }

    /// Counts one sent frame of `bytes` bytes.
    pub fn add_out(&self, bytes: usize) {
        self.frames_out.set(self.frames_out.get() + 1);
        self.bytes_out.set(self.bytes_out.get() + bytes as u64);
    }

    /// The counters now, with the send queue's current `queued_bytes`.
    pub fn snapshot(&self, queued_bytes: usize) -> ConnStats {
        ConnStats {
            frames_in: self.frames_in.get(),
            frames_out: self.frames_out.get(),
            bytes_in: self.bytes_in.get(),
            bytes_out: self.bytes_out.get(),
            queued_bytes: queued_bytes as u64,
        }
    }
}
