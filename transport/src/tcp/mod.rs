//! Frames over TCP on the shard's ring: one reader at a time decodes from a reused buffer; one
//! writer task per connection drains the shared [`OutQueue`] with vectored sends.

use std::cell::{Cell, RefCell};
use std::net::SocketAddr;
use std::rc::Rc;

use bytes::{Bytes, BytesMut};
use corewire_runtime::net::TcpStream;
use corewire_runtime::{spawn_local, Budget};

use crate::conn::{ConnStats, ConnStatsCells, Connection, OutQueue, TransportError, TransportKind};
use crate::frame::{Frame, FrameDecoder, FrameEncoder, FrameHeader, FrameLimits};

/// Settings of one frame connection.
#[derive(Debug, Clone, Copy)]
pub struct ConnOptions {
    pub limits: FrameLimits,
    /// Bytes queued for sending before `send` waits (default 4 MiB).
    pub max_queued_bytes: usize,
    /// Spare room kept in the receive buffer for each recv (default 64 KiB).
    pub read_chunk: usize,
    pub budget: Budget,
}

impl Default for ConnOptions {
    fn default() -> Self {
        ConnOptions {
            limits: FrameLimits::default(),
            max_queued_bytes: 4 << 20,
            read_chunk: 64 << 10,
            budget: Budget::default(),
        }
    }
}

/// Buffers per sendmsg; Linux's IOV_MAX is 1024.
const MAX_IOVECS: usize = 1024;

struct Shared {
    stream: TcpStream,
    peer: Option<SocketAddr>,
    options: ConnOptions,
    out: OutQueue,
    encoder: RefCell<FrameEncoder>,
    decoder: RefCell<FrameDecoder>,
    /// `None` while a recv is in flight (the buffer is lent to the kernel).
    read_buf: RefCell<Option<BytesMut>>,
    stats: ConnStatsCells,
    failed: Cell<bool>,
}

/// Closes the connection when the last user handle goes away (the writer task holds only
/// `Shared`, so it cannot keep the connection open by itself).
struct Owner(Rc<Shared>);

impl Drop for Owner {
    fn drop(&mut self) {
        self.0.out.close();
    }
}

/// A frame connection over TCP.
#[derive(Clone)]
pub struct TcpConnection {
    owner: Rc<Owner>,
}

impl TcpConnection {
    /// Wrap a connected stream and start its writer task on the current shard.
    pub fn new(stream: TcpStream, options: ConnOptions) -> TcpConnection {
        let peer = stream.peer_addr().ok();
        let shared = Rc::new(Shared {
            stream,
            peer,
            options,
            out: OutQueue::new(options.max_queued_bytes),
            encoder: RefCell::new(FrameEncoder::new(options.limits)),
            decoder: RefCell::new(FrameDecoder::new(options.limits)),
            read_buf: RefCell::new(Some(BytesMut::with_capacity(options.read_chunk))),
            stats: ConnStatsCells::default(),
            failed: Cell::new(false),
        });
        spawn_local(write_loop(shared.clone()));
        TcpConnection {
            owner: Rc::new(Owner(shared)),
        }
    }

    /// Connect to `addr` from the current shard.
    pub async fn connect(
        addr: SocketAddr,
        options: ConnOptions,
    ) -> Result<TcpConnection, TransportError> {
        let stream = TcpStream::connect(addr).await?;
        Ok(TcpConnection::new(stream, options))
    }

    fn shared(&self) -> &Rc<Shared> {
        &self.owner.0
    }

    /// Drop queued output and close at once (after a protocol error).
    pub fn abort(&self) {
        let s = self.shared();
        s.failed.set(true);
        s.out.discard();
        let _ = s.stream.shutdown_both();
    }
}

async fn write_loop(shared: Rc<Shared>) {
    while let Some(batch) = shared.out.next_batch(MAX_IOVECS).await {
        let n: usize = batch.iter().map(Bytes::len).sum();
        if let Err(e) = shared.stream.send_all_vectored(batch).await {
            tracing::debug!(peer = ?shared.peer, error = %e, "send failed; closing");
            shared.failed.set(true);
            shared.out.discard();
            break;
        }
        shared.out.sent(n);
    }
    // Flushed and closed: the peer reads end-of-stream, and a pending local recv returns.
    let _ = shared.stream.shutdown_both();
}

impl Connection for TcpConnection {
    async fn send(
        &self,
        header: &FrameHeader,
        payload: Bytes,
        attachment: Bytes,
    ) -> Result<(), TransportError> {
        let s = self.shared();
        s.out
            .push_frame(&s.encoder, &s.stats, header, payload, attachment)
            .await
    }

    async fn recv(&self) -> Result<Option<Frame>, TransportError> {
        let s = self.shared();
        let Some(mut buf) = s.read_buf.borrow_mut().take() else {
            return Err(TransportError::Busy);
        };
        let result = loop {
            if s.failed.get() {
                break Err(TransportError::Closed);
            }
            match s.decoder.borrow_mut().decode(&mut buf) {
                Ok(Some(frame)) => {
                    s.stats.add_in(frame.payload.len() + frame.attachment.len());
                    break Ok(Some(frame));
                }
                Ok(None) => {}
                Err(e) => break Err(TransportError::Protocol(e)),
            }
            let (res, b) = s.stream.recv(buf, s.options.read_chunk).await;
            buf = b;
            match res {
                Ok(0) if buf.is_empty() => break Ok(None),
                Ok(0) => {
                    break Err(TransportError::Truncated {
                        buffered: buf.len(),
                    })
                }
                Ok(_) => {}
                Err(e) => break Err(TransportError::Io(e)),
            }
        };
        *s.read_buf.borrow_mut() = Some(buf);
        if result.is_err() {
            s.failed.set(true);
            s.out.close();
        }
        result
    }

    fn close(&self) {
        self.shared().out.close();
    }

    fn is_closed(&self) -> bool {
        let s = self.shared();
        s.failed.get() || s.out.is_closed()
    }

    fn peer_addr(&self) -> Option<SocketAddr> {
        self.shared().peer
    }

    fn kind(&self) -> TransportKind {
        TransportKind::Tcp
    }

    fn budget(&self) -> Budget {
        self.shared().options.budget
    }

    fn stats(&self) -> ConnStats {
        let s = self.shared();
        s.stats.snapshot(s.out.queued_bytes())
    }
}
