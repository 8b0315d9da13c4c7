use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::future::poll_fn;
use std::task::{Context, Poll};

use bytes::{Bytes, BytesMut};
use corewire_runtime::sync::{Notify, Semaphore, TryAcquireError, WakerCell};

use super::payload_buf::InFrame;
use super::{ConnStatsCells, PayloadBuf, TransportError};
use crate::frame::{FrameEncoder, FrameHeader};

/// The send side shared by every task writing to one connection and the one writer task that
/// drains it: buffers queue here and leave in batches (one `sendmsg` or one RDMA post list for
/// many replies).
///
/// **The limit is a true bound.** Admission is a FIFO [`Semaphore`] with one permit per byte:
/// a frame takes as many permits as it has bytes (at most `limit`, so one frame larger than
/// the limit still goes out, alone, once the queue is empty), and gives them back as its
/// bytes are sent. Writers that do not fit wait in line and newcomers queue behind them, so
/// admitted bytes never exceed `max(limit, largest frame)` however many tasks are waiting. A
/// waiting writer that is dropped leaves the line and hands its turn on. Only the few small
/// control frames of [`push`](OutQueue::push) come on top.
///
/// **Small frames are copied together.** A frame of at most [`OutQueue::COPY_MAX`] bytes is
/// encoded straight into a staging buffer behind the last one, so the replies to a batch of
/// pipelined small requests leave as one buffer (one iovec), with no header allocation and no
/// reference counts per frame; larger frames keep their payload and attachment buffers (sent
/// vectored, never copied).
pub struct OutQueue {
    bufs: RefCell<VecDeque<Bytes>>,
    /// Small frames, queued after everything in `bufs`.
    staged: RefCell<BytesMut>,
    /// The staging buffer before `staged`, kept while the writer may still be sending frames
    /// cut from it, to be taken up again once they are sent instead of allocating a new one.
    spare: RefCell<BytesMut>,
    /// Frames up to this size are staged (0: none, for transports that copy anyway).
    copy_max: usize,
    bytes: Cell<usize>,
    /// Queued bytes that hold no permit: control frames, and the part of a frame beyond
    /// `limit`. Counted as sent first, which keeps permits held longer than their bytes,
    /// never shorter: the bound stays true.
    uncharged: Cell<usize>,
    limit: usize,
    closed: Cell<bool>,
    admission: Semaphore,
    /// The writer task, waiting for buffers.
    writer: WakerCell,
    /// Tasks waiting in [`OutQueue::wait_for_room`] (readers applying backpressure).
    room: Notify,
}

impl OutQueue {
    /// Frames up to this many bytes are copied into the staging buffer. Below it a copy costs
    /// less than the iovec, the header buffer and the reference counts it replaces (a 64 B
    /// echo's replies: BENCHMARKS.md); above it the copy would dominate.
    pub const COPY_MAX: usize = 1024;
    /// The staging buffer grows by at least this much (what an idle connection may keep, twice:
    /// the buffer and its spare, see [`grow_stage`](Self::grow_stage)).
    const STAGE_CHUNK: usize = 4096;
    /// Frames written in place ([`try_push_frame_with`](Self::try_push_frame_with)) up to
    /// this many bytes are staged: above it, a frame's own buffer costs little beside its
    /// encoding, and the staging buffers (which an idle connection keeps) stay small.
    pub const IN_PLACE_STAGE_MAX: usize = 8 * 1024;
    /// The most the staging buffer grows by at once (what an idle connection keeps after
    /// frames of up to [`IN_PLACE_STAGE_MAX`](Self::IN_PLACE_STAGE_MAX), twice at most).
    const STAGE_GROW_MAX: usize = 32 * 1024;

    /// A queue that holds at most `limit` bytes.
    pub fn new(limit: usize) -> OutQueue {
        Self::with_copy_max(limit, Self::COPY_MAX)
    }

    /// A queue that never copies frames together: for a transport whose writer copies every
    /// byte anyway (RDMA into registered chunks).
    pub fn without_copies(limit: usize) -> OutQueue {
        Self::with_copy_max(limit, 0)
    }

    fn with_copy_max(limit: usize, copy_max: usize) -> OutQueue {
        let limit = limit.clamp(1, Semaphore::MAX_PERMITS);
        OutQueue {
            bufs: RefCell::new(VecDeque::new()),
            staged: RefCell::new(BytesMut::new()),
            spare: RefCell::new(BytesMut::new()),
            copy_max,
            bytes: Cell::new(0),
            uncharged: Cell::new(0),
            limit,
            closed: Cell::new(false),
            admission: Semaphore::new(limit),
            writer: WakerCell::new(),
            room: Notify::new(),
        }
    }

    /// The most bytes the queue holds.
    pub fn limit(&self) -> usize {
        self.limit
    }

    /// Bytes queued and not yet sent.
    pub fn queued_bytes(&self) -> usize {
        self.bytes.get()
    }

    /// Whether the queue was closed (nothing more is accepted).
    pub fn is_closed(&self) -> bool {
        self.closed.get()
    }

    /// Under the limit with nobody waiting to queue: a new frame would be admitted at once.
    pub fn has_room(&self) -> bool {
        self.bytes.get() < self.limit && !self.admission.has_waiters()
    }

    /// Wait until [`has_room`](Self::has_room) (a reader calls this before reading more
    /// requests, so a peer that stops reading replies makes the server stop reading from it).
    /// Returns false if the queue closed. Cancel-safe.
    pub async fn wait_for_room(&self) -> bool {
        loop {
            // No await between the checks and `notified()`: no wake-up falls in between.
            if self.closed.get() {
                return false;
            }
            if self.has_room() {
                return true;
            }
            self.room.notified().await;
        }
    }

    /// Wait until `len` more bytes may be queued (see the type's docs), and take their
    /// permits: the caller must queue them with [`push_admitted`](Self::push_admitted) before
    /// it next awaits. Returns false if the queue closed. Cancel-safe: dropping it gives up
    /// its place in line.
    async fn admit(&self, len: usize) -> bool {
        match self.admission.acquire(len.min(self.limit)).await {
            Ok(permit) => {
                // Given back byte by byte in `sent`.
                permit.forget();
                true
            }
            Err(_closed) => false,
        }
    }

    /// Encode `header` and queue the frame once it is admitted: the send path every
    /// transport shares. All or nothing: dropped before it returns, nothing was queued.
    pub async fn push_frame(
        &self,
        encoder: &RefCell<FrameEncoder>,
        stats: &ConnStatsCells,
        header: &FrameHeader,
        payload: Bytes,
        attachment: Bytes,
    ) -> Result<(), TransportError> {
        let total = encoder
            .borrow()
            .frame_len(header, payload.len(), attachment.len())?;
        if total <= self.copy_max {
            if !self.admit(total).await {
                return Err(TransportError::Closed);
            }
            // Encoded only once admitted: a future dropped while waiting queued nothing.
            let mut staged = self.staged.borrow_mut();
            if staged.capacity() - staged.len() < total {
                self.grow_stage(&mut staged, total);
            }
            encoder
                .borrow_mut()
                .encode_frame(header, &payload, &attachment, &mut staged)?;
            drop(staged);
            // Its permits come back as its bytes are sent (only a part beyond the limit
            // holds none, as in `push_admitted`).
            self.bytes.set(self.bytes.get() + total);
            self.uncharged
                .set(self.uncharged.get() + total.saturating_sub(self.limit));
            self.writer.wake();
            stats.add_out(total);
            return Ok(());
        }
        // Encoded first, so admission waits for the frame's exact size; a future dropped
        // while waiting just drops the encoded header.
        let head = encoder
            .borrow_mut()
            .encode_header(header, payload.len(), attachment.len())?;
        if !self.admit(total).await {
            return Err(TransportError::Closed);
        }
        self.push_admitted([head, payload, attachment], total);
        stats.add_out(total);
        Ok(())
    }

    /// Queue a frame whose payload `write` appends (`payload_len` bytes) straight into the
    /// queue's own buffer, behind the frame's header, if the frame is admitted now: the send
    /// path of [`Connection::try_send_with`](super::Connection::try_send_with), for a payload
    /// that would otherwise be encoded into a buffer of its own first (a protobuf message).
    /// `Ok(false)`, `write` not called: not admitted now (over the limit, or others wait in
    /// line, whose turn comes first). The frame's bytes count against the limit and hold
    /// permits until sent, like [`push_frame`](Self::push_frame)'s.
    ///
    /// Up to [`IN_PLACE_STAGE_MAX`](Self::IN_PLACE_STAGE_MAX) bytes it is written into the
    /// staging buffer behind the frames before it (no allocation, and it leaves in their
    /// iovec); a larger one into a buffer of its own, still in place. `write` gets a buffer of
    /// its own that starts where the payload goes, so it cannot touch the header or other
    /// frames; if it does not append exactly `payload_len` bytes, or panics, nothing is
    /// queued and the permits go back.
    pub fn try_push_frame_with(
        &self,
        encoder: &RefCell<FrameEncoder>,
        stats: &ConnStatsCells,
        header: &FrameHeader,
        payload_len: usize,
        attachment: &[u8],
        write: impl FnOnce(&mut PayloadBuf<'_>),
    ) -> Result<bool, TransportError> {
        let total = encoder
            .borrow()
            .frame_len(header, payload_len, attachment.len())?;
        let charged = total.min(self.limit);
        match self.admission.try_acquire(charged) {
            // Given back byte by byte in `sent`, or by `undo` below if nothing is queued.
            Ok(permit) => permit.forget(),
            Err(TryAcquireError::NoPermits) => return Ok(false),
            Err(_closed) => return Err(TransportError::Closed),
        }
        // Gives the permits back unless the frame was queued (a failed or panicking `write`).
        let undo = Unadmit {
            admission: &self.admission,
            permits: charged,
        };
        let encoder = encoder.borrow();
        if total <= Self::IN_PLACE_STAGE_MAX {
            let mut staged = self.staged.borrow_mut();
            if staged.capacity() - staged.len() < total {
                self.grow_stage(&mut staged, total);
            }
            // Large `Bytes` in the payload go into the queue by reference, behind the frames
            // staged so far (vectored writers only: `copy_max` 0 copies every byte anyway).
            let mut q = self.bufs.borrow_mut();
            let queue = (self.copy_max > 0).then_some(&mut *q);
            write_frame(
                &encoder,
                header,
                payload_len,
                attachment,
                &mut staged,
                queue,
                write,
            )?;
            drop((staged, q));
            self.bytes.set(self.bytes.get() + total);
            self.uncharged
                .set(self.uncharged.get() + total.saturating_sub(self.limit));
            self.writer.wake();
        } else {
            let mut own = BytesMut::with_capacity(total);
            write_frame(
                &encoder,
                header,
                payload_len,
                attachment,
                &mut own,
                None,
                write,
            )?;
            self.push_admitted([own.freeze()], total);
        }
        std::mem::forget(undo);
        stats.add_out(total);
        Ok(true)
    }

    /// Queue a frame of `total` bytes whose permits [`admit`](Self::admit) took.
    fn push_admitted(&self, bufs: impl IntoIterator<Item = Bytes>, total: usize) {
        self.uncharged
            .set(self.uncharged.get() + total.saturating_sub(self.limit));
        self.enqueue(bufs);
    }

    /// Queue buffers that must go out together and in order, without waiting and without
    /// admission: for the few small control frames a transport must be able to queue from a
    /// context that cannot wait.
    pub fn push(&self, bufs: impl IntoIterator<Item = Bytes>) {
        let before = self.bytes.get();
        self.enqueue(bufs);
        self.uncharged
            .set(self.uncharged.get() + (self.bytes.get() - before));
    }

    fn enqueue(&self, bufs: impl IntoIterator<Item = Bytes>) {
        let mut q = self.bufs.borrow_mut();
        // Staged frames came first.
        self.unstage(&mut q);
        for b in bufs {
            if !b.is_empty() {
                self.bytes.set(self.bytes.get() + b.len());
                q.push_back(b);
            }
        }
        drop(q);
        self.writer.wake();
    }

    /// For the writer task: the next batch (at most `max_bufs` buffers), waiting for one if
    /// the queue is empty. `None` once the queue is closed and empty.
    pub async fn next_batch(&self, max_bufs: usize) -> Option<Vec<Bytes>> {
        poll_fn(|cx| self.poll_next_batch(cx, max_bufs)).await
    }

    /// [`next_batch`](Self::next_batch) for poll-based readers (the in-memory connection):
    /// the task stays registered between polls, no future need be kept.
    pub fn poll_next_batch(
        &self,
        cx: &mut Context<'_>,
        max_bufs: usize,
    ) -> Poll<Option<Vec<Bytes>>> {
        let mut q = self.bufs.borrow_mut();
        self.unstage(&mut q);
        if q.is_empty() {
            if self.closed.get() {
                return Poll::Ready(None);
            }
            self.writer.register(cx.waker());
            return Poll::Pending;
        }
        let n = q.len().min(max_bufs.max(1));
        Poll::Ready(Some(q.drain(..n).collect()))
    }

    /// Room for a frame of `total` bytes in the staging buffer, which is short of it. The
    /// frames staged so far are queued as they are first (behind everything queued before
    /// them: the order holds), not copied into a larger buffer, which growing it would do.
    /// The new room holds a few frames of this size (a pipelined batch's replies share one
    /// buffer), up to [`STAGE_GROW_MAX`](Self::STAGE_GROW_MAX).
    ///
    /// The room is taken, without allocating, from this buffer or the spare (the one before
    /// it) once every frame cut from it has been sent: a writer that sends asynchronously
    /// (io_uring) still holds the last batch while the next replies are staged, so the two
    /// take turns. Only when both are still in flight is a new one allocated. A connection
    /// thus keeps at most two staging buffers of [`STAGE_GROW_MAX`](Self::STAGE_GROW_MAX)
    /// (or one frame) each.
    #[cold]
    fn grow_stage(&self, staged: &mut BytesMut, total: usize) {
        if !staged.is_empty() {
            self.bufs.borrow_mut().push_back(staged.split().freeze());
        }
        let room = (4 * total)
            .clamp(Self::STAGE_CHUNK, Self::STAGE_GROW_MAX)
            .max(total);
        if staged.try_reclaim(room) {
            return;
        }
        let mut spare = self.spare.borrow_mut();
        if spare.try_reclaim(room) {
            std::mem::swap(staged, &mut *spare);
            return;
        }
        // Both still in flight: a new one, and this one becomes the spare.
        *spare = std::mem::replace(staged, BytesMut::with_capacity(room));
    }

    /// Moves the staged frames to the end of the queue, as one buffer.
    fn unstage(&self, q: &mut VecDeque<Bytes>) {
        let mut staged = self.staged.borrow_mut();
        if !staged.is_empty() {
            q.push_back(staged.split().freeze());
        }
    }

    /// For the writer task: `n` bytes of a batch left; their permits go back (waking the
    /// writers in line that fit now), then the readers waiting for room if there is some.
    pub fn sent(&self, n: usize) {
        let n = n.min(self.bytes.get());
        self.bytes.set(self.bytes.get() - n);
        let free = n.min(self.uncharged.get());
        self.uncharged.set(self.uncharged.get() - free);
        if n > free {
            self.admission.add_permits(n - free);
        }
        if self.has_room() {
            self.room.notify_waiters();
        }
    }

    /// No more buffers will be accepted; what is queued may still be flushed.
    pub fn close(&self) {
        self.closed.set(true);
        self.admission.close();
        self.writer.wake();
        self.room.notify_waiters();
    }

    /// Drop what is queued (after a send error nothing more can go out).
    pub fn discard(&self) {
        self.bufs.borrow_mut().clear();
        *self.staged.borrow_mut() = BytesMut::new();
        *self.spare.borrow_mut() = BytesMut::new();
        self.bytes.set(0);
        self.uncharged.set(0);
        self.close();
    }
}

/// Permits taken for a frame that was not queued after all: given back on drop (the
/// queueing path forgets it once the frame is in).
struct Unadmit<'a> {
    admission: &'a Semaphore,
    permits: usize,
}

impl Drop for Unadmit<'_> {
    fn drop(&mut self) {
        self.admission.add_permits(self.permits);
    }
}

/// Appends a frame to `dst`: its header, then the payload `write` appends in place, then
/// `attachment`; a large `Bytes` in the payload goes into `queue` by reference, if given (see
/// [`PayloadBuf`]), behind what `dst` held before (cut off into `queue` then). On an error or
/// a panic in `write`, `dst` and `queue` are left holding what they held before the frame.
fn write_frame(
    encoder: &FrameEncoder,
    header: &FrameHeader,
    payload_len: usize,
    attachment: &[u8],
    dst: &mut BytesMut,
    queue: Option<&mut VecDeque<Bytes>>,
    write: impl FnOnce(&mut PayloadBuf<'_>),
) -> Result<(), TransportError> {
    let start = dst.len();
    encoder.encode_header_into(header, payload_len, attachment.len(), dst)?;
    // Takes the frame back out when dropped before `finish`: `write` only appends behind
    // the header, it sees no other bytes.
    let mut frame = InFrame::new(dst, start, queue);
    write(frame.payload());
    let written = frame.payload().written();
    if written != payload_len {
        return Err(TransportError::other(format!(
            "a payload written in place is {written} bytes, not the {payload_len} declared"
        )));
    }
    frame.finish(attachment);
    Ok(())
}

#[cfg(test)]
mod tests;
