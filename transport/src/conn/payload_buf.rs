//! [`PayloadBuf`]: where a frame's payload is written in place.

use std::collections::VecDeque;

use bytes::buf::UninitSlice;
use bytes::{Buf, BufMut, Bytes, BytesMut};

/// Where [`Connection::try_send_with`](super::Connection::try_send_with)'s `write` appends a
/// frame's payload: the connection's send buffer, behind the frame's header. It only appends
/// (a [`BufMut`], which `prost`'s `encode_raw` writes into), so the writer cannot read,
/// change or cut the header or the frames queued before it; and it costs nothing beside
/// the buffer it appends to (no buffer of its own to split off and join back).
///
/// Where the transport sends its queue vectored (TCP, in memory), a [`Bytes`] of at least
/// [`BY_REFERENCE_MIN`](PayloadBuf::BY_REFERENCE_MIN) bytes given to [`put`](BufMut::put) (a
/// protobuf `bytes` field held as `Bytes`) is queued by reference, not copied: the send
/// buffer so far is cut off and queued, then the `Bytes`, and writing goes on behind them,
/// as a frame sent with [`Connection::send`](super::Connection::send) keeps its payload.
pub struct PayloadBuf<'a> {
    buf: &'a mut BytesMut,
    /// Where the payload's bytes still in `buf` begin.
    start: usize,
    /// Where queued by reference, if anywhere.
    parts: Option<Parts<'a>>,
}

/// The queue a [`PayloadBuf`] cuts its frame's parts into, and what it put there.
struct Parts<'a> {
    /// `None`: nothing goes by reference (the frame has a buffer of its own, or the
    /// transport copies every byte anyway).
    queue: Option<&'a mut VecDeque<Bytes>>,
    /// Where the frame begins in the send buffer (its header, then the payload).
    frame_start: usize,
    /// Payload bytes queued so far.
    moved: usize,
    /// Buffers queued so far; the first holds the frames staged before this one, then its
    /// header.
    pushed: usize,
}

impl<'a> PayloadBuf<'a> {
    /// A [`Bytes`] given to [`put`](BufMut::put) is queued by reference from this size up:
    /// below it the copy costs less than the buffer's reference count and iovec (as for
    /// frames, [`OutQueue::COPY_MAX`](super::OutQueue::COPY_MAX)).
    pub const BY_REFERENCE_MIN: usize = 1024;

    /// Appends to `buf` from its end.
    pub fn new(buf: &'a mut BytesMut) -> PayloadBuf<'a> {
        let start = buf.len();
        PayloadBuf {
            buf,
            start,
            parts: None,
        }
    }

    /// Bytes appended so far.
    #[inline]
    pub fn written(&self) -> usize {
        let moved = self.parts.as_ref().map_or(0, |p| p.moved);
        moved + self.buf.len() - self.start
    }

    /// Queues `bytes` behind what was written so far.
    #[inline(never)]
    fn push_by_reference(&mut self, bytes: Bytes) {
        let Some(Parts {
            queue: Some(queue),
            moved,
            pushed,
            ..
        }) = &mut self.parts
        else {
            unreachable!("only called with a queue")
        };
        let head = self.buf.split().freeze();
        *moved += head.len() - self.start;
        self.start = 0;
        if !head.is_empty() {
            queue.push_back(head);
            *pushed += 1;
        }
        *moved += bytes.len();
        queue.push_back(bytes);
        *pushed += 1;
    }
}

/// A frame's payload being written in place (see [`PayloadBuf`]): unless
/// [`finish`](InFrame::finish)ed, dropping it (a failed or panicking `write`) leaves the send
/// buffer and the queue as they were before the frame, save that the frames staged before it
/// may have been queued.
pub(crate) struct InFrame<'a>(PayloadBuf<'a>);

impl<'a> InFrame<'a> {
    /// Appends to `buf`, the send buffer that stages frames for `queue`, in which this frame
    /// began at `frame_start` (its header already written); large `Bytes` go to `queue` (if
    /// any) by reference.
    #[inline]
    pub(crate) fn new(
        buf: &'a mut BytesMut,
        frame_start: usize,
        queue: Option<&'a mut VecDeque<Bytes>>,
    ) -> InFrame<'a> {
        let start = buf.len();
        InFrame(PayloadBuf {
            buf,
            start,
            parts: Some(Parts {
                queue,
                frame_start,
                moved: 0,
                pushed: 0,
            }),
        })
    }

    /// Where the payload is written.
    #[inline]
    pub(crate) fn payload(&mut self) -> &mut PayloadBuf<'a> {
        &mut self.0
    }

    /// The frame is whole: `attachment` follows the payload, and the frame stays queued.
    #[inline]
    pub(crate) fn finish(self, attachment: &[u8]) {
        // Kept: it holds only references, nothing to drop.
        let mut whole = std::mem::ManuallyDrop::new(self);
        whole.0.buf.extend_from_slice(attachment);
    }

    /// Takes the unfinished frame back out.
    #[cold]
    fn undo(&mut self) {
        let PayloadBuf { buf, parts, .. } = &mut self.0;
        let Some(p) = parts else {
            return;
        };
        let (Some(queue), true) = (&mut p.queue, p.pushed > 0) else {
            buf.truncate(p.frame_start);
            return;
        };
        // Its parts come back out of the queue (nothing else was queued meanwhile: `write`
        // must not send on the connection); the frames staged before it stay queued.
        buf.clear();
        let mut first = None;
        for _ in 0..p.pushed {
            first = queue.pop_back();
        }
        if let Some(first) = first.filter(|_| p.frame_start > 0) {
            queue.push_back(first.slice(..p.frame_start));
        }
    }
}

impl Drop for InFrame<'_> {
    /// Only an unfinished frame is dropped (see [`finish`](InFrame::finish)).
    fn drop(&mut self) {
        self.undo();
    }
}

/// Whether `T` is [`Bytes`], whose [`Buf::copy_to_bytes`] takes a reference rather than a
/// copy. Only what is fastest depends on it, never what is written: any other `Buf` is
/// copied, as it would be anyway. (`T` need not be `'static`, so `TypeId` cannot say; the
/// comparison of two constant names folds away.)
fn is_bytes<T: Buf>() -> bool {
    std::any::type_name::<T>() == std::any::type_name::<Bytes>()
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
// SAFETY: every unsafe method forwards to `BytesMut`'s own `BufMut` implementation, which upholds
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

    #[inline]
    fn put<T: Buf>(&mut self, mut src: T)
    where
        Self: Sized,
    {
        let n = src.remaining();
        let by_reference = self.parts.as_ref().is_some_and(|p| p.queue.is_some());
        if n >= Self::BY_REFERENCE_MIN && by_reference && is_bytes::<T>() {
            self.push_by_reference(src.copy_to_bytes(n));
            return;
        }
        while src.has_remaining() {
            let chunk = src.chunk();
            let len = chunk.len();
            self.buf.extend_from_slice(chunk);
            src.advance(len);
        }
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
