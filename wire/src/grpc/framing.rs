//! gRPC's length-prefixed messages: each is a 1-byte compressed flag, a 4-byte big-endian
//! length and that many bytes. [`MessageDecoder`] takes body bytes in whatever pieces HTTP/2
//! delivers them and hands out whole messages; it never holds more than one message plus the
//! piece being read, and refuses a message over its limit before buffering it.

use std::fmt;

use bytes::{Buf, Bytes, BytesMut};

/// Bytes before each message: the compressed flag and the length.
pub const PREFIX_LEN: usize = 5;

/// The prefix of a message of `len` bytes.
pub fn encode_prefix(compressed: bool, len: u32) -> [u8; PREFIX_LEN] {
    let l = len.to_be_bytes();
    [u8::from(compressed), l[0], l[1], l[2], l[3]]
}

/// One message, still compressed if `compressed`.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Message {
    /// The sender set the compressed flag (the bytes are in the call's `grpc-encoding`).
    pub compressed: bool,
    /// The message's bytes.
    pub data: Bytes,
}

/// Why a body is not a sequence of gRPC messages.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum GrpcFrameError {
    /// The compressed flag is neither 0 nor 1.
    BadFlag(u8),
    /// A message longer than the limit.
    TooLong {
        /// The length its prefix declares.
        len: u32,
        /// The decoder's limit.
        limit: usize,
    },
    /// The body ended inside a message.
    Truncated {
        /// Bytes of the unfinished message (prefix included) that arrived.
        have: usize,
    },
}

impl fmt::Display for GrpcFrameError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::BadFlag(b) => write!(f, "gRPC message flag {b} (only 0 and 1 exist)"),
            Self::TooLong { len, limit } => {
                write!(
                    f,
                    "gRPC message of {len} bytes exceeds the limit of {limit}"
                )
            }
            Self::Truncated { have } => {
                write!(f, "body ended {have} bytes into a gRPC message")
            }
        }
    }
}

impl std::error::Error for GrpcFrameError {}

/// Splits a body into messages.
#[derive(Debug)]
pub struct MessageDecoder {
    limit: usize,
    /// Bytes received and not yet handed out (at most one prefix plus one message, plus the
    /// rest of the piece that completed it).
    buf: BytesMut,
    /// Pieces kept without copying while no message is split across them.
    whole: Option<Bytes>,
    failed: Option<GrpcFrameError>,
}

impl MessageDecoder {
    /// Messages longer than `limit` bytes are refused.
    pub fn new(limit: usize) -> MessageDecoder {
        MessageDecoder {
            limit,
            buf: BytesMut::new(),
            whole: None,
            failed: None,
        }
    }

    /// Add the next piece of the body. Call [`next_message`](Self::next_message) until it
    /// returns `Ok(None)` before pushing again.
    pub fn push(&mut self, piece: Bytes) {
        if piece.is_empty() {
            return;
        }
        if self.buf.is_empty() && self.whole.is_none() {
            // The usual case: a piece that holds whole messages is sliced, not copied.
            self.whole = Some(piece);
        } else {
            if let Some(rest) = self.whole.take() {
                self.buf.extend_from_slice(&rest);
            }
            self.buf.extend_from_slice(&piece);
        }
    }

    /// The next whole message, `Ok(None)` until one has arrived. After an error the decoder
    /// stays failed.
    pub fn next_message(&mut self) -> Result<Option<Message>, GrpcFrameError> {
        if let Some(e) = &self.failed {
            return Err(e.clone());
        }
        let result = self.decode();
        if let Err(e) = &result {
            self.failed = Some(e.clone());
            self.buf = BytesMut::new();
            self.whole = None;
        }
        result
    }

    fn decode(&mut self) -> Result<Option<Message>, GrpcFrameError> {
        let pending: &[u8] = match &self.whole {
            Some(w) => w,
            None => &self.buf,
        };
        if pending.len() < PREFIX_LEN {
            return Ok(None);
        }
        let flag = pending[0];
        let compressed = match flag {
            0 => false,
            1 => true,
            other => return Err(GrpcFrameError::BadFlag(other)),
        };
        let len = u32::from_be_bytes([pending[1], pending[2], pending[3], pending[4]]);
        let n = len as usize;
        if n > self.limit {
            return Err(GrpcFrameError::TooLong {
                len,
                limit: self.limit,
            });
        }
        if pending.len() < PREFIX_LEN + n {
            // Keep the partial message in `buf` so the next piece appends to it.
            if let Some(w) = self.whole.take() {
                self.buf.extend_from_slice(&w);
            }
            self.buf.reserve(PREFIX_LEN + n - self.buf.len());
            return Ok(None);
        }
        let data = match &mut self.whole {
            Some(w) => {
                w.advance(PREFIX_LEN);
                let data = w.split_to(n);
                if w.is_empty() {
                    self.whole = None;
                }
                data
            }
            None => {
                self.buf.advance(PREFIX_LEN);
                self.buf.split_to(n).freeze()
            }
        };
        Ok(Some(Message { compressed, data }))
    }

    /// The body ended: `Err` if it ended inside a message.
    pub fn finish(&self) -> Result<(), GrpcFrameError> {
        let have = self.whole.as_ref().map_or(self.buf.len(), Bytes::len);
        match have {
            0 => Ok(()),
            have => Err(GrpcFrameError::Truncated { have }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn framed(messages: &[(bool, &[u8])]) -> Vec<u8> {
        let mut out = Vec::new();
        for (compressed, data) in messages {
            out.extend_from_slice(&encode_prefix(*compressed, data.len() as u32));
            out.extend_from_slice(data);
        }
        out
    }

    fn decode_in_pieces(body: &[u8], piece: usize) -> Result<Vec<Message>, GrpcFrameError> {
        let mut d = MessageDecoder::new(1 << 20);
        let mut out = Vec::new();
        for chunk in body.chunks(piece.max(1)) {
            d.push(Bytes::copy_from_slice(chunk));
            while let Some(m) = d.next_message()? {
                out.push(m);
            }
        }
        d.finish()?;
        Ok(out)
    }

    #[test]
    fn messages_come_out_whole_however_the_body_is_cut() {
        let body = framed(&[(false, b"hello"), (true, b""), (false, &[7u8; 300])]);
        for piece in [1, 2, 4, 5, 6, 7, 13, 64, body.len()] {
            let got = decode_in_pieces(&body, piece).unwrap();
            assert_eq!(got.len(), 3, "pieces of {piece}");
            assert_eq!(&got[0].data[..], b"hello");
            assert!(!got[0].compressed);
            assert!(got[1].compressed && got[1].data.is_empty());
            assert_eq!(got[2].data.len(), 300);
        }
    }

    #[test]
    fn a_bad_flag_a_long_message_and_a_cut_body_are_errors() {
        let mut body = framed(&[(false, b"x")]);
        body[0] = 2;
        assert_eq!(decode_in_pieces(&body, 64), Err(GrpcFrameError::BadFlag(2)));

        let mut d = MessageDecoder::new(10);
        d.push(Bytes::copy_from_slice(&encode_prefix(false, 11)));
        assert_eq!(
            d.next_message(),
            Err(GrpcFrameError::TooLong { len: 11, limit: 10 })
        );
        // Failed for good.
        assert!(d.next_message().is_err());

        let body = framed(&[(false, b"hello")]);
        assert_eq!(
            decode_in_pieces(&body[..7], 3),
            Err(GrpcFrameError::Truncated { have: 7 })
        );
    }

    #[test]
    fn a_huge_declared_length_allocates_nothing_before_it_is_refused() {
        let mut d = MessageDecoder::new(4 << 20);
        d.push(Bytes::copy_from_slice(&encode_prefix(false, u32::MAX)));
        assert!(matches!(
            d.next_message(),
            Err(GrpcFrameError::TooLong { .. })
        ));
    }

    #[test]
    fn whole_pieces_are_sliced_not_copied() {
        let body = Bytes::from(framed(&[(false, b"abc"), (false, b"def")]));
        let mut d = MessageDecoder::new(64);
        d.push(body.clone());
        let m = d.next_message().unwrap().unwrap();
        // Same allocation as the piece pushed.
        assert_eq!(m.data.as_ptr(), body[PREFIX_LEN..].as_ptr());
        assert_eq!(&d.next_message().unwrap().unwrap().data[..], b"def");
        assert_eq!(d.next_message(), Ok(None));
        d.finish().unwrap();
    }
}
