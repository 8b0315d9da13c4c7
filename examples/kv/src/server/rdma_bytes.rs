//! A byte stream over an RDMA connection, for replication over RDMA (`repl-transport rdma`
//! on the replica, `repl-rdma` on the master): the RESP bytes travel as the payloads of
//! frames of at most [`MAX_FRAME`] bytes, in order, and the receiver concatenates them. The
//! PSYNC protocol above (handshake, snapshot, stream, acknowledgements) sees the same bytes
//! it sees over TCP; this file is the only place that knows they travel as frames.
//!
//! Bounds are the RDMA connection's: a send waits while its send queue is at its byte limit
//! (`RdmaConfig::max_queued_bytes`), and a receiver that stops reading stops granting
//! credits, which stalls the sender's queue (the master then sees its replica's output grow
//! and drops it at `client-output-buffer-limit replica`, as over TCP).

use std::cell::RefCell;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use corewire::transport::frame::{Frame, FrameHeader};
use corewire::transport::rdma::RdmaConnection;
use corewire::transport::{Connection, TransportError};

/// The largest payload one frame carries: under the transport's large-message threshold
/// (256 KiB), so a chunk is copied through the registered pool rather than registered.
pub(crate) const MAX_FRAME: usize = 64 << 10;

type Pending<T> = Pin<Box<dyn Future<Output = Result<T, TransportError>>>>;

/// The stream over RDMA, as replication uses it.
pub(crate) type RdmaBytes = FrameBytes<RdmaConnection>;

/// One frame connection carrying a byte stream (shard-bound, as the connection). Generic so
/// the in-memory pair tests it without a device.
pub(crate) struct FrameBytes<C: Connection> {
    conn: C,
    /// The receive in flight: `recv` is cancel-safe, but kept here so a wake-up that is
    /// not for it does not start it again.
    recv: RefCell<Option<Pending<Option<Frame>>>>,
    /// The frame being queued (the RESP connection's one send in flight).
    send: Option<Pending<()>>,
}

/// Every chunk goes as a request frame with no call behind it (nothing above the stream
/// reads the header).
fn chunk_header() -> FrameHeader {
    FrameHeader::request(0, 0, 0)
}

pub(crate) fn io_error(error: TransportError) -> io::Error {
    match error {
        TransportError::Io(error) => error,
        TransportError::Closed => io::ErrorKind::ConnectionReset.into(),
        error => io::Error::other(error.to_string()),
    }
}

impl<C: Connection> FrameBytes<C> {
    pub fn new(conn: C) -> FrameBytes<C> {
        FrameBytes {
            conn,
            recv: RefCell::new(None),
            send: None,
        }
    }

    /// The next frame's bytes, handed to `feed`: `Ready(Ok(false))` once the peer closed.
    /// Cancel-safe (the receive in flight stays here).
    pub fn poll_recv(
        &self,
        cx: &mut Context<'_>,
        feed: impl FnOnce(&[u8]),
    ) -> Poll<io::Result<bool>> {
        let mut slot = self.recv.borrow_mut();
        loop {
            let recv = slot.get_or_insert_with(|| {
                let conn = self.conn.clone();
                Box::pin(async move { conn.recv().await })
            });
            let received = std::task::ready!(recv.as_mut().poll(cx));
            *slot = None;
            return match received {
                // Nothing sends an empty chunk; one would read as the end to some callers.
                Ok(Some(frame)) if frame.payload.is_empty() => continue,
                Ok(Some(frame)) => {
                    feed(&frame.payload);
                    Poll::Ready(Ok(true))
                }
                Ok(None) | Err(TransportError::Closed) => Poll::Ready(Ok(false)),
                Err(error) => Poll::Ready(Err(io_error(error))),
            };
        }
    }

    /// Queues all of `bytes`, [`MAX_FRAME`] at a time (waits while the send queue is full).
    pub async fn send_all(&self, mut bytes: Bytes) -> io::Result<()> {
        while !bytes.is_empty() {
            let chunk = bytes.split_to(bytes.len().min(MAX_FRAME));
            (self.conn.send(&chunk_header(), chunk, Bytes::new()).await).map_err(io_error)?;
        }
        Ok(())
    }

    /// Starts queueing the head of `bytes` (nothing may be in flight); returns the rest,
    /// which waits for the next send.
    pub fn start_send(&mut self, mut bytes: Bytes) -> Option<Bytes> {
        let chunk = bytes.split_to(bytes.len().min(MAX_FRAME));
        let conn = self.conn.clone();
        self.send = Some(Box::pin(async move {
            conn.send(&chunk_header(), chunk, Bytes::new()).await
        }));
        (!bytes.is_empty()).then_some(bytes)
    }

    pub fn sending(&self) -> bool {
        self.send.is_some()
    }

    /// The send in flight: `Ready` once queued (or failed), `Pending` while it waits for
    /// room or when none is in flight.
    pub fn poll_sent(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let Some(send) = self.send.as_mut() else {
            return Poll::Pending;
        };
        let result = std::task::ready!(send.as_mut().poll(cx));
        self.send = None;
        Poll::Ready(result.map_err(io_error))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use corewire::runtime::Runtime;
    use corewire::transport::mem::{pair, MemOptions};
    use std::future::poll_fn;

    /// Everything one end reads until the other closes.
    async fn read_all(end: &FrameBytes<impl Connection>) -> Vec<u8> {
        let mut got = Vec::new();
        while poll_fn(|cx| end.poll_recv(cx, |bytes| got.extend_from_slice(bytes)))
            .await
            .unwrap()
        {}
        got
    }

    #[test]
    fn bytes_arrive_whole_and_in_order_in_bounded_frames() {
        let rt = Runtime::builder().shards(1).pin(false).build().unwrap();
        rt.run_on(0, || async {
            let (a, b) = pair(MemOptions::default());
            let peer = b.clone();
            let (mut a, b) = (FrameBytes::new(a), FrameBytes::new(b));
            let big: Vec<u8> = (0..3 * MAX_FRAME + 17).map(|i| (i % 251) as u8).collect();
            // `send_all`, then the RESP connection's way: one frame in flight, the rest kept.
            let reader = corewire::runtime::spawn_local(async move {
                let (mut frames, mut bytes) = (Vec::new(), Vec::new());
                while let Some(frame) = peer.recv().await.unwrap() {
                    frames.push(frame.payload.len());
                    bytes.extend_from_slice(&frame.payload);
                }
                (frames, bytes)
            });
            drop(b);
            a.send_all(Bytes::from(big.clone())).await.unwrap();
            let mut rest = Some(Bytes::from(big.clone()));
            while let Some(bytes) = rest.take() {
                rest = a.start_send(bytes);
                assert!(a.sending());
                poll_fn(|cx| a.poll_sent(cx)).await.unwrap();
                assert!(!a.sending());
            }
            drop(a);
            let (frames, bytes) = reader.await.unwrap();
            assert!(
                frames.iter().all(|&n| n > 0 && n <= MAX_FRAME),
                "{frames:?}"
            );
            assert_eq!(bytes, [&big[..], &big[..]].concat());
        })
        .unwrap();
        rt.shutdown();
    }

    #[test]
    fn the_reader_sees_every_byte_then_the_end() {
        let rt = Runtime::builder().shards(1).pin(false).build().unwrap();
        rt.run_on(0, || async {
            let (a, b) = pair(MemOptions::default());
            let (a, b) = (FrameBytes::new(a), FrameBytes::new(b));
            let text: Vec<u8> = b"*1\r\n$4\r\nPING\r\n".repeat(10_000);
            let sent = text.clone();
            let writer = corewire::runtime::spawn_local(async move {
                a.send_all(Bytes::from(sent)).await.unwrap();
            });
            let got = async {
                writer.await.unwrap();
                read_all(&b).await
            };
            assert_eq!(got.await, text);
        })
        .unwrap();
        rt.shutdown();
    }
}
