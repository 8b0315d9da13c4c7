//! The message-oriented connection interface: TCP and RDMA both implement it, and services and
//! clients only ever see it.

#![deny(missing_docs)]

mod budget;
mod error;
mod out_queue;
mod payload_buf;
mod stats;

use std::future::Future;
use std::net::SocketAddr;

use bytes::Bytes;
use corewire_runtime::Budget;

pub use budget::poll_charged;
pub use error::TransportError;
pub use out_queue::OutQueue;
pub use payload_buf::PayloadBuf;
pub use stats::{ConnStats, ConnStatsCells};

use crate::frame::{Frame, FrameHeader};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
/// Which transport a connection runs over.
#[non_exhaustive]
pub enum TransportKind {
    /// TCP on the shard's ring.
    Tcp,
    /// TLS over TCP (the `tls` feature).
    Tls,
    /// RDMA (the `rdma` module).
    Rdma,
    /// An in-memory pair ([`crate::mem::pair`]), for tests.
    Memory,
}

/// A connection carrying frames, owned by one shard (`!Send`). Cloning gives another handle to
/// the same connection: the reader and every in-flight handler can hold one. The connection
/// closes when the last handle is dropped, or on `close`.
///
/// # Cancel safety
///
/// Dropping a future of this trait before it completes loses nothing:
/// - [`send`](Connection::send) is all or nothing: dropped before it returns, the frame was
///   not queued (and its place in the queue's line is given up).
/// - [`recv`](Connection::recv) keeps every byte already received in the connection; the next
///   `recv` continues where the dropped one stopped (so `timeout(d, conn.recv())` is fine),
///   over TCP and RDMA alike.
/// - [`ready_to_send`](Connection::ready_to_send) only waits.
/// - [`try_send_with`](Connection::try_send_with) does not wait.
pub trait Connection: Clone + 'static {
    /// Queue a frame for sending. Returns once it is queued, not sent: replies of a pipelined
    /// connection go out together. Waits while the frame does not fit under the queue's byte
    /// limit (a true bound: see [`OutQueue`]), so a peer that stops reading only slows the
    /// tasks writing to it.
    fn send(
        &self,
        header: &FrameHeader,
        payload: Bytes,
        attachment: Bytes,
    ) -> impl Future<Output = Result<(), TransportError>>;

    /// Queue a frame whose payload `write` appends straight into the connection's send
    /// buffer, behind the frame's header, if the frame can be queued at once: for a payload
    /// that would otherwise be encoded into a buffer of its own and then sent (a protobuf
    /// message: `|buf| message.encode_raw(buf)`). `write` must append exactly `payload_len`
    /// bytes to the buffer it gets, which holds nothing else; it must not send on this
    /// connection. The frame counts against the send queue's limit like any other, and it is
    /// admitted only when [`send`](Connection::send) would not wait (under the limit, nobody
    /// in line before it), so nothing overtakes a waiting sender.
    ///
    /// `Ok(true)`: queued. `Ok(false)`: not admitted now, or this transport cannot write in
    /// place; `write` was not called, nothing was queued: send the frame with
    /// [`send`](Connection::send), which waits for room. `Err`: the connection is closed,
    /// the frame is over the peer's limits, or `write` appended the wrong number of bytes;
    /// nothing was queued. A panic in `write` queues nothing either.
    ///
    /// The default writes nothing in place (`Ok(false)`).
    fn try_send_with(
        &self,
        header: &FrameHeader,
        payload_len: usize,
        attachment: &[u8],
        write: impl FnOnce(&mut PayloadBuf<'_>),
    ) -> Result<bool, TransportError> {
        let _ = (header, payload_len, attachment, write);
        Ok(false)
    }

    /// Wait until the send queue is under its limit with nobody waiting to queue. A server
    /// calls it before reading the next request, so a peer that stops reading replies makes
    /// the server stop reading from it (rather than buffering replies without end).
    /// `Err(Closed)` once the connection is closed.
    fn ready_to_send(&self) -> impl Future<Output = Result<(), TransportError>>;

    /// The next frame; `Ok(None)` when the peer closed cleanly between frames. One reader at a
    /// time (a second concurrent call fails with `TransportError::Busy`).
    fn recv(&self) -> impl Future<Output = Result<Option<Frame>, TransportError>>;

    /// Flush what is queued, then close. Pending and later calls fail with `Closed`.
    fn close(&self);

    /// Whether the connection is closed (by either side or after an error).
    fn is_closed(&self) -> bool;

    /// The peer's address, when the transport knows one.
    fn peer_addr(&self) -> Option<SocketAddr>;

    /// Which transport this is.
    fn kind(&self) -> TransportKind;

    /// The fairness budget of this connection (its listener's). `recv` charges it: after a
    /// round's worth of messages it yields to the rest of the shard before handing up more.
    fn budget(&self) -> Budget;

    /// The shard's message clock when the bytes of the frame `recv` last handed up arrived
    /// ([`RoundBudget::arrived_at`](corewire_runtime::RoundBudget::arrived_at)): a server
    /// records its request's head-of-line count from it when the reply is queued.
    fn arrived_at(&self) -> u64;

    /// This connection's counters now.
    fn stats(&self) -> ConnStats;
}
