//! Client-side state for one pipelined echo connection: keeps `depth` requests outstanding,
//! matches responses to requests in FIFO order, and yields each request's latency.
//!
//! Time is passed in as nanoseconds so the state machine is tested without clocks or sockets.

use std::collections::VecDeque;
use std::fmt;

use crate::byte_queue::ByteQueue;
use crate::frame::{self, FrameError};

/// Bytes at the start of each payload that carry the request's sequence number (when the
/// payload is that large), so reordered or duplicated echoes are caught.
const SEQ_LEN: usize = 8;

/// An echo that does not match what was sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PipelineError {
    /// A response arrived with nothing outstanding.
    Unsolicited,
    /// The response's payload length differs from the request's.
    WrongLength { expected: usize, got: usize },
    /// The response carries another request's sequence number.
    WrongSequence { expected: u64, got: u64 },
    /// The payload bytes differ from what was sent.
    Corrupt,
    /// The response header is over the frame limit.
    Frame(FrameError),
}

impl fmt::Display for PipelineError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PipelineError::Unsolicited => write!(f, "response with no request outstanding"),
            PipelineError::WrongLength { expected, got } => {
                write!(f, "response payload is {got} bytes, expected {expected}")
            }
            PipelineError::WrongSequence { expected, got } => {
                write!(f, "response for request #{got}, expected #{expected}")
            }
            PipelineError::Corrupt => write!(f, "response payload differs from the request"),
            PipelineError::Frame(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for PipelineError {}

/// Pipelined request/response bookkeeping for one connection.
#[derive(Debug)]
pub struct Pipeline {
    depth: usize,
    payload: Vec<u8>,
    out: ByteQueue,
    input: ByteQueue,
    in_flight: VecDeque<(u64, u64)>,
    next_seq: u64,
}

impl Pipeline {
    /// A connection that sends `size`-byte payloads with `depth` outstanding (at least 1).
    pub fn new(size: usize, depth: usize) -> Pipeline {
        let payload = (0..size).map(|i| (i % 251) as u8).collect();
        let depth = depth.max(1);
        Pipeline {
            depth,
            payload,
            out: ByteQueue::with_capacity((frame::HEADER_LEN + size) * depth),
            input: ByteQueue::with_capacity(64 * 1024),
            in_flight: VecDeque::with_capacity(depth),
            next_seq: 0,
        }
    }

    /// Queues new requests, stamped `now_ns`, until `depth` are outstanding.
    pub fn refill(&mut self, now_ns: u64) {
        while self.in_flight.len() < self.depth {
            let seq = self.next_seq;
            self.next_seq += 1;
            self.out.extend(&frame::header(self.payload.len()));
            let seq_bytes = seq.to_le_bytes();
            let n = SEQ_LEN.min(self.payload.len());
            self.out.extend(&seq_bytes[..n]);
            self.out.extend(&self.payload[n..]);
            self.in_flight.push_back((seq, now_ns));
        }
    }

    /// Bytes waiting to be written to the socket.
    pub fn output(&self) -> &[u8] {
        self.out.filled()
    }

    /// Records that `n` bytes of `output` were written.
    pub fn wrote(&mut self, n: usize) {
        self.out.consume(n);
    }

    /// Requests sent (or queued) and not yet answered.
    pub fn in_flight(&self) -> usize {
        self.in_flight.len()
    }

    /// Space to read responses into.
    pub fn read_space(&mut self) -> &mut [u8] {
        let min = (frame::HEADER_LEN + self.payload.len()).max(16 * 1024);
        self.input.spare(min)
    }

    /// Records `n` bytes read at `now_ns`; calls `done` with each completed request's latency in
    /// nanoseconds and returns how many completed.
    pub fn received(
        &mut self,
        n: usize,
        now_ns: u64,
        mut done: impl FnMut(u64),
    ) -> Result<usize, PipelineError> {
        self.input.commit(n);
        let mut completed = 0;
        loop {
            let filled = self.input.filled();
            let Some(len) = frame::payload_len(filled, frame::MAX_PAYLOAD) else {
                break;
            };
            let len = len.map_err(PipelineError::Frame)?;
            let end = frame::HEADER_LEN + len;
            if filled.len() < end {
                break;
            }
            let (seq, sent_ns) = self
                .in_flight
                .pop_front()
                .ok_or(PipelineError::Unsolicited)?;
            check_echo(&filled[frame::HEADER_LEN..end], &self.payload, seq)?;
            self.input.consume(end);
            done(now_ns.saturating_sub(sent_ns));
            completed += 1;
        }
        Ok(completed)
    }
}

/// Compares an echoed payload with the request: length, sequence number and last byte (a full
/// compare would make the client, not the server, the bottleneck at large sizes).
fn check_echo(got: &[u8], payload: &[u8], seq: u64) -> Result<(), PipelineError> {
    if got.len() != payload.len() {
        return Err(PipelineError::WrongLength {
            expected: payload.len(),
            got: got.len(),
        });
    }
    if got.len() >= SEQ_LEN {
        let mut seq_bytes = [0u8; SEQ_LEN];
        seq_bytes.copy_from_slice(&got[..SEQ_LEN]);
        let got_seq = u64::from_le_bytes(seq_bytes);
        if got_seq != seq {
            return Err(PipelineError::WrongSequence {
                expected: seq,
                got: got_seq,
            });
        }
        if got.len() > SEQ_LEN && got.last() != payload.last() {
            return Err(PipelineError::Corrupt);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Feeds `bytes` into the pipeline as if read from the socket.
    fn deliver(p: &mut Pipeline, bytes: &[u8], now: u64) -> Result<Vec<u64>, PipelineError> {
        let mut lats = Vec::new();
        p.read_space()[..bytes.len()].copy_from_slice(bytes);
        p.received(bytes.len(), now, |l| lats.push(l))?;
        Ok(lats)
    }

    #[test]
    fn keeps_depth_outstanding_and_measures_each_request() {
        let mut p = Pipeline::new(16, 3);
        p.refill(100);
        assert_eq!(p.in_flight(), 3);
        let sent = p.output().to_vec();
        assert_eq!(sent.len(), 3 * 20);
        p.wrote(sent.len());
        // Echo the first request and a half of the second.
        assert_eq!(deliver(&mut p, &sent[..30], 150).unwrap(), vec![50]);
        assert_eq!(p.in_flight(), 2);
        p.refill(160);
        assert_eq!(p.in_flight(), 3);
        assert_eq!(deliver(&mut p, &sent[30..60], 200).unwrap(), vec![100, 100]);
        let next = p.output().to_vec();
        assert_eq!(deliver(&mut p, &next, 260).unwrap(), vec![100]);
    }

    #[test]
    fn detects_reordered_and_wrong_sized_echoes() {
        let mut p = Pipeline::new(16, 2);
        p.refill(0);
        let sent = p.output().to_vec();
        let mut swapped = sent[20..40].to_vec();
        swapped.extend_from_slice(&sent[..20]);
        assert_eq!(
            deliver(&mut p, &swapped, 1),
            Err(PipelineError::WrongSequence {
                expected: 0,
                got: 1
            })
        );

        let mut p = Pipeline::new(16, 1);
        p.refill(0);
        let mut short = frame::header(2).to_vec();
        short.extend_from_slice(b"xy");
        assert_eq!(
            deliver(&mut p, &short, 1),
            Err(PipelineError::WrongLength {
                expected: 16,
                got: 2
            })
        );
    }

    #[test]
    fn rejects_unsolicited_and_corrupt_responses() {
        let mut p = Pipeline::new(16, 1);
        p.refill(0);
        let mut sent = p.output().to_vec();
        let mut twice = sent.clone();
        twice.extend_from_slice(&sent);
        assert_eq!(deliver(&mut p, &twice, 1), Err(PipelineError::Unsolicited));

        let mut p = Pipeline::new(16, 1);
        p.refill(0);
        *sent.last_mut().unwrap() ^= 0xff;
        assert_eq!(deliver(&mut p, &sent, 1), Err(PipelineError::Corrupt));
    }

    #[test]
    fn tiny_payloads_are_checked_by_length_only() {
        let mut p = Pipeline::new(0, 1);
        p.refill(5);
        let sent = p.output().to_vec();
        assert_eq!(sent, frame::header(0));
        assert_eq!(deliver(&mut p, &sent, 9).unwrap(), vec![4]);
    }
}
