//! The receiver's side of large messages, sans-I/O: where each one stands in the frame byte
//! stream, which are being read (at most `max` at once, read and not yet handed up), and the
//! assembly of frames whose payload or attachment is one of them. The connection appends
//! stream bytes to its buffer and tells [`Incoming::stream_bytes`]; it posts the RDMA READs
//! this asks for and reports them with [`Incoming::read_done`].

use std::collections::VecDeque;
use std::fmt;

use bytes::{Bytes, BytesMut};

use super::control::Descriptor;
use crate::frame::{Frame, FrameDecoder, FrameError};

/// The stream and its large messages disagree: the peer is broken or hostile.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AssemblyError {
    Frame(FrameError),
    /// A large message does not line up with a payload or attachment of the same length.
    Misplaced(String),
}

impl fmt::Display for AssemblyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AssemblyError::Frame(e) => write!(f, "{e}"),
            AssemblyError::Misplaced(why) => write!(f, "large message out of place: {why}"),
        }
    }
}

#[derive(Debug)]
struct Blob {
    desc: Descriptor,
    /// Stream position: the stream bytes before it.
    at: u64,
    /// A read was asked for.
    started: bool,
    data: Option<Bytes>,
}

/// A body part, and the id of the large message it was.
type Part = (Bytes, Option<u32>);

/// A frame handed up, with what the connection must do next.
#[derive(Debug)]
pub struct Taken {
    pub frame: Frame,
    /// Large messages it took: tell the sender they are done.
    pub done: Vec<u32>,
    /// Reads to start now (room was made).
    pub start: Vec<Descriptor>,
}

#[derive(Debug)]
pub struct Incoming {
    /// Stream bytes received and consumed so far.
    received: u64,
    consumed: u64,
    blobs: VecDeque<Blob>,
    /// Reads started and not yet handed up.
    active: usize,
    max: usize,
    /// The payload of the frame being assembled, once taken (with its large message's id).
    payload: Option<Part>,
}

impl Incoming {
    pub fn new(max: usize) -> Incoming {
        Incoming {
            received: 0,
            consumed: 0,
            blobs: VecDeque::new(),
            active: 0,
            max: max.max(1),
            payload: None,
        }
    }

    /// `n` stream bytes were appended to the connection's buffer.
    pub fn stream_bytes(&mut self, n: usize) {
        self.received += n as u64;
    }

    /// Large messages announced and not yet handed up.
    // Only the unit tests look at it.
    #[cfg(test)]
    pub fn pending(&self) -> usize {
        self.blobs.len()
    }

    /// A descriptor arrived (at the current end of the stream): whether to start its read
    /// now (else it waits for room).
    pub fn descriptor(&mut self, desc: Descriptor) -> Option<Descriptor> {
        let start = self.active < self.max;
        if start {
            self.active += 1;
        }
        self.blobs.push_back(Blob {
            desc,
            at: self.received,
            started: start,
            data: None,
        });
        start.then_some(desc)
    }

    /// The read of `id` completed with `data`. False for an id we are not reading.
    pub fn read_done(&mut self, id: u32, data: Bytes) -> bool {
        match self
            .blobs
            .iter_mut()
            .find(|b| b.desc.id == id && b.started && b.data.is_none())
        {
            Some(b) => {
                b.data = Some(data);
                true
            }
            None => false,
        }
    }

    /// Reads started and not handed up (the connection drops their buffers when it ends).
    // Only the unit tests look at it.
    #[cfg(test)]
    pub fn active(&self) -> usize {
        self.active
    }

    /// The next whole frame from `rx` (the stream bytes not yet consumed) and the large
    /// messages; `Ok(None)` until it is complete.
    pub fn next_frame(
        &mut self,
        decoder: &mut FrameDecoder,
        rx: &mut BytesMut,
    ) -> Result<Option<Taken>, AssemblyError> {
        if self.blobs.is_empty() && self.payload.is_none() {
            // No large message in sight: the plain decoder, as without this feature.
            let before = rx.len();
            let frame = decoder.decode(rx).map_err(AssemblyError::Frame)?;
            self.consumed += (before - rx.len()) as u64;
            return Ok(frame.map(|frame| Taken {
                frame,
                done: Vec::new(),
                start: Vec::new(),
            }));
        }
        let before = rx.len();
        let lens = decoder.decode_header(rx).map_err(AssemblyError::Frame)?;
        self.consumed += (before - rx.len()) as u64;
        let Some((payload_len, attachment_len)) = lens else {
            return Ok(None);
        };
        if let Some(b) = self.blobs.front() {
            if b.at < self.consumed {
                return Err(AssemblyError::Misplaced(format!(
                    "{} bytes inside a frame header",
                    b.desc.len
                )));
            }
        }
        if self.payload.is_none() {
            match self.part(payload_len, rx)? {
                Some(p) => self.payload = Some(p),
                None => return Ok(None),
            }
        }
        let Some((attachment, attachment_id)) = self.part(attachment_len, rx)? else {
            return Ok(None);
        };
        let (payload, payload_id) = self.payload.take().unwrap_or_default();
        let frame = decoder
            .finish(payload, attachment)
            .expect("parts of the declared lengths");
        let done: Vec<u32> = payload_id.into_iter().chain(attachment_id).collect();
        self.active -= done.len();
        let mut start = Vec::new();
        for b in self.blobs.iter_mut().filter(|b| !b.started) {
            if self.active == self.max {
                break;
            }
            b.started = true;
            self.active += 1;
            start.push(b.desc);
        }
        Ok(Some(Taken { frame, done, start }))
    }

    /// One body part of `len` bytes: the large message at the current position if there is
    /// one (its length must match), else stream bytes (which must not run into one).
    fn part(&mut self, len: usize, rx: &mut BytesMut) -> Result<Option<Part>, AssemblyError> {
        if len == 0 {
            return Ok(Some((Bytes::new(), None)));
        }
        match self.blobs.front() {
            Some(b) if b.at == self.consumed => {
                if b.desc.len as usize != len {
                    return Err(AssemblyError::Misplaced(format!(
                        "{} bytes where a part of {len} bytes starts",
                        b.desc.len
                    )));
                }
                if b.data.is_none() {
                    return Ok(None);
                }
                let b = self.blobs.pop_front().expect("front");
                Ok(b.data.map(|d| (d, Some(b.desc.id))))
            }
            Some(b) if b.at < self.consumed + len as u64 => Err(AssemblyError::Misplaced(format!(
                "{} bytes inside a part of {len} stream bytes",
                b.desc.len
            ))),
            _ if rx.len() < len => Ok(None),
            _ => {
                self.consumed += len as u64;
                Ok(Some((rx.split_to(len).freeze(), None)))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frame::{FrameEncoder, FrameHeader, FrameLimits};

    fn header(id: u64) -> FrameHeader {
        FrameHeader::request(1, 2, id)
    }

    /// The connection's side: a stream buffer, the decoder and the state machine.
    struct Rx {
        buf: BytesMut,
        dec: FrameDecoder,
        inc: Incoming,
        enc: FrameEncoder,
    }

    impl Rx {
        fn new(max: usize) -> Rx {
            Rx {
                buf: BytesMut::new(),
                dec: FrameDecoder::new(FrameLimits::default()),
                inc: Incoming::new(max),
                enc: FrameEncoder::new(FrameLimits::default()),
            }
        }

        fn stream(&mut self, b: &[u8]) {
            self.buf.extend_from_slice(b);
            self.inc.stream_bytes(b.len());
        }

        /// The header (and inline payload) of a frame whose parts' lengths are given.
        fn head(&mut self, id: u64, payload: usize, attachment: usize) {
            let h = self
                .enc
                .encode_header(&header(id), payload, attachment)
                .unwrap();
            self.stream(&h);
        }

        fn desc(&mut self, id: u32, len: usize) -> Option<Descriptor> {
            self.inc.descriptor(Descriptor {
                id,
                addr: 0x1000,
                len: len as u32,
                rkey: 9,
            })
        }

        fn next(&mut self) -> Result<Option<Taken>, AssemblyError> {
            self.inc.next_frame(&mut self.dec, &mut self.buf)
        }
    }

    #[test]
    fn large_attachments_and_payloads_take_their_place_in_the_stream() {
        let mut rx = Rx::new(4);
        // 1: all inline. 2: inline payload, large attachment. 3: large payload, inline
        // attachment. 4: inline again.
        rx.head(1, 2, 0);
        rx.stream(b"p1");
        rx.head(2, 3, 100);
        rx.stream(b"p2!");
        assert!(rx.desc(20, 100).is_some());
        rx.head(3, 50, 2);
        assert!(rx.desc(30, 50).is_some());
        rx.stream(b"a3");
        rx.head(4, 1, 0);
        rx.stream(b"4");

        let t = rx.next().unwrap().unwrap();
        assert_eq!(t.frame.header.correlation_id, 1);
        assert!(t.done.is_empty());
        // Frame 2 waits for its read, and frame 3 behind it.
        assert!(rx.next().unwrap().is_none());
        assert!(rx.next().unwrap().is_none(), "asking again changes nothing");
        // Frame 3's read finishing first does not let it overtake.
        assert!(rx.inc.read_done(30, Bytes::from(vec![3u8; 50])));
        assert!(rx.next().unwrap().is_none());
        assert!(rx.inc.read_done(20, Bytes::from(vec![2u8; 100])));
        let t = rx.next().unwrap().unwrap();
        assert_eq!(t.frame.header.correlation_id, 2);
        assert_eq!(&t.frame.payload[..], b"p2!");
        assert_eq!(t.frame.attachment, vec![2u8; 100]);
        assert_eq!(t.done, [20]);
        let t = rx.next().unwrap().unwrap();
        assert_eq!(t.frame.payload, vec![3u8; 50]);
        assert_eq!(&t.frame.attachment[..], b"a3");
        assert_eq!(t.done, [30]);
        let t = rx.next().unwrap().unwrap();
        assert_eq!(&t.frame.payload[..], b"4");
        assert!(rx.next().unwrap().is_none());
        assert_eq!((rx.inc.pending(), rx.inc.active()), (0, 0));
    }

    #[test]
    fn a_frame_waits_for_its_inline_bytes_after_a_large_payload() {
        let mut rx = Rx::new(4);
        rx.head(1, 10, 3);
        rx.desc(1, 10);
        assert!(rx.inc.read_done(1, Bytes::from(vec![1u8; 10])));
        // The payload is here, the attachment's stream bytes are not yet.
        assert!(rx.next().unwrap().is_none());
        rx.stream(b"ab");
        assert!(rx.next().unwrap().is_none());
        rx.stream(b"c");
        let t = rx.next().unwrap().unwrap();
        assert_eq!(t.frame.payload, vec![1u8; 10]);
        assert_eq!(&t.frame.attachment[..], b"abc");
        assert_eq!(t.done, [1], "reported with the finished frame");
    }

    #[test]
    fn reads_beyond_the_bound_start_as_frames_are_handed_up() {
        let mut rx = Rx::new(2);
        for id in 0..4u32 {
            rx.head(u64::from(id), 0, 8);
            let started = rx.desc(id, 8);
            assert_eq!(started.is_some(), id < 2, "read {id}");
        }
        assert_eq!(rx.inc.active(), 2);
        assert!(
            !rx.inc.read_done(2, Bytes::from(vec![0u8; 8])),
            "not started"
        );
        assert!(rx.inc.read_done(0, Bytes::from(vec![0u8; 8])));
        let t = rx.next().unwrap().unwrap();
        assert_eq!(t.done, [0]);
        assert_eq!(t.start.iter().map(|d| d.id).collect::<Vec<_>>(), [2]);
        assert_eq!(rx.inc.active(), 2);
    }

    #[test]
    fn misplaced_large_messages_are_errors() {
        // Inside an inline part.
        let mut rx = Rx::new(4);
        rx.head(1, 10, 0);
        rx.stream(b"12345");
        rx.desc(1, 5);
        rx.stream(b"67890");
        assert!(matches!(rx.next(), Err(AssemblyError::Misplaced(_))));
        // Of another length than the part it stands for.
        let mut rx = Rx::new(4);
        rx.head(1, 0, 10);
        rx.desc(1, 9);
        assert!(matches!(rx.next(), Err(AssemblyError::Misplaced(_))));
        // Where a header should be.
        let mut rx = Rx::new(4);
        rx.desc(1, 9);
        rx.head(1, 0, 0);
        assert!(matches!(rx.next(), Err(AssemblyError::Misplaced(_))));
    }
}
