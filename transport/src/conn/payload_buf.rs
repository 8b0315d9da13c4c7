//! [`PayloadBuf`]: where a frame's payload is written in place.

use bytes::buf::UninitSlice;
use bytes::{BufMut, BytesMut};

/// Where [`Connection::try_send_with`](super::Connection::try_send_with)'s `write` appends a
/// frame's payload: the connection's send buffer, behind the frame's header. It only appends
/// (a [`BufMut`], which `prost`'s `encode_raw` writes into), so the writer cannot read,
/// change or cut the header or the frames queued before it; and it costs nothing beside
/// the buffer it appends to (no buffer of its own to split off and join back).
pub struct PayloadBuf<'a> {
    buf: &'a mut BytesMut,
    start: usize,
}

impl<'a> PayloadBuf<'a> {
    /// Appends to `buf` from its end.
    pub fn new(buf: &'a mut BytesMut) -> PayloadBuf<'a> {
        let start = buf.len();
        PayloadBuf { buf, start }
    }

    /// Bytes appended so far.
    pub fn written(&self) -> usize {
        self.buf.len() - self.start
    }
}

impl std::fmt::Debug for PayloadBuf<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PayloadBuf")
            .field("written", &self.written())
            .finish()
    }
}

// The transport's only `unsafe`: `BufMut` is an unsafe trait, and an append-only view of the
// send buffer needs an implementation of its own (a `&mut BytesMut` would let the writer cut
// the frames queued before its own).
// SAFETY: every method forwards to `BytesMut`'s own `BufMut` implementation, which upholds
// the trait's contract (`chunk_mut` is spare capacity past the initialised bytes,
// `advance_mut` only marks bytes the caller initialised); the bytes before `start` are
// initialised already and nothing here exposes them.
#[allow(unsafe_code)]
unsafe impl BufMut for PayloadBuf<'_> {
    #[inline]
    fn remaining_mut(&self) -> usize {
        self.buf.remaining_mut()
    }

    #[inline]
    unsafe fn advance_mut(&mut self, cnt: usize) {
        // SAFETY: the caller initialised `cnt` bytes of `chunk_mut`, which is the
        // `BytesMut`'s own (this method's contract, passed on).
        unsafe { self.buf.advance_mut(cnt) }
    }

    #[inline]
    fn chunk_mut(&mut self) -> &mut UninitSlice {
        self.buf.chunk_mut()
    }

    #[inline]
    fn put_slice(&mut self, src: &[u8]) {
        self.buf.extend_from_slice(src);
    }

    #[inline]
    fn put_bytes(&mut self, val: u8, cnt: usize) {
        self.buf.put_bytes(val, cnt);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn appends_behind_what_was_there_and_counts_only_its_own_bytes() {
        let mut buf = BytesMut::from(&b"head"[..]);
        let mut payload = PayloadBuf::new(&mut buf);
        assert_eq!(payload.written(), 0);
        payload.put_slice(b"abc");
        payload.put_u8(b'd');
        payload.put_bytes(b'e', 2);
        payload.put_u32(0x6667_6869);
        assert_eq!(payload.written(), 10);
        assert_eq!(&buf[..], b"headabcdeefghi");
    }
}
