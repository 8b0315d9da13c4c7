//! A chained replica's proxying of its master's stream (Redis's
//! `replicationFeedStreamFromMasterStream`): the bytes read from the master go on to this
//! node's backlog and its own replicas only once this node applied them, exactly as they
//! came and numbered with the master's offsets. A snapshot for a sub-replica is then cut at
//! an offset both its data and its stream agree on, and after a broken link the node's
//! offset is where the new link continues (bytes read but not applied are dropped: the
//! master sends them again).

use bytes::{Bytes, BytesMut};

/// The master's bytes read and not yet passed on.
#[derive(Debug)]
pub struct Forwarder {
    /// Offset of the last byte passed on (the next one is `passed + 1`).
    passed: u64,
    held: BytesMut,
}

impl Forwarder {
    /// A link whose stream continues after offset `offset`.
    pub fn new(offset: u64) -> Forwarder {
        Forwarder {
            passed: offset,
            held: BytesMut::new(),
        }
    }

    /// The offset passed on so far.
    pub fn passed(&self) -> u64 {
        self.passed
    }

    /// Bytes read and not passed on.
    pub fn held(&self) -> usize {
        self.held.len()
    }

    /// Bytes read from the master, in order.
    pub fn read(&mut self, bytes: &[u8]) {
        self.held.extend_from_slice(bytes);
    }

    /// The stream is applied up to `applied`: the bytes to pass on now (empty when none).
    pub fn applied(&mut self, applied: u64) -> Bytes {
        let wanted = applied.saturating_sub(self.passed);
        let take = usize::try_from(wanted)
            .unwrap_or(usize::MAX)
            .min(self.held.len());
        self.passed += take as u64;
        self.held.split_to(take).freeze()
    }

    /// The link ended with the stream applied up to `resume` (where the next link
    /// continues): the bytes still to pass on, and what was read past it is forgotten.
    pub fn end(&mut self, resume: u64) -> Bytes {
        let rest = self.applied(resume);
        self.held.clear();
        rest
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passes_on_only_what_was_applied() {
        let mut f = Forwarder::new(100);
        f.read(b"*1\r\n$4\r\nPING\r\n*1\r\n$4");
        assert!(f.applied(100).is_empty());
        assert_eq!(&f.applied(114)[..], b"*1\r\n$4\r\nPING\r\n");
        assert_eq!(f.passed(), 114);
        assert_eq!(f.held(), 6);
        f.read(b"\r\nPING\r\n");
        assert_eq!(&f.applied(128)[..], b"*1\r\n$4\r\nPING\r\n");
        assert_eq!(f.held(), 0);
    }

    #[test]
    fn never_passes_on_bytes_not_read() {
        let mut f = Forwarder::new(0);
        f.read(b"abc");
        assert_eq!(&f.applied(10)[..], b"abc");
        assert_eq!(f.passed(), 3);
        assert!(f.applied(2).is_empty(), "an older offset passes nothing");
    }

    #[test]
    fn a_broken_link_forgets_what_was_read_past_its_resume_point() {
        let mut f = Forwarder::new(0);
        f.read(b"*1\r\n$5\r\nMULTI\r\n*2\r\n$4\r\nINCR");
        // The open MULTI block is sent again by the next link: nothing of it passes.
        assert!(f.end(0).is_empty());
        assert_eq!((f.passed(), f.held()), (0, 0));
        f.read(b"xyz");
        assert_eq!(&f.end(2)[..], b"xy");
        assert_eq!((f.passed(), f.held()), (2, 0));
    }
}
