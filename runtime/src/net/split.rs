//! A stream's receive side and send side as two handles, so one task can wait for input
//! while another sends: [`TcpStream::into_split`] / [`UnixStream::into_split`] (owned halves,
//! each movable into its own task of the same shard) and `split(&mut self)` (borrowed halves,
//! for two futures of one task, e.g. under `join`).
//!
//! Both halves are `!Send`, like the stream: they live on the stream's shard. A receive and a
//! send can be in flight at the same time (they are separate operations on one descriptor);
//! receiving stays cancel-safe, as on the whole stream.

use std::fmt;
use std::io;
use std::rc::Rc;
use std::task::{Context, Poll};

use bytes::{Bytes, BytesMut};
use socket2::SockRef;

use super::receiver::{RecvAvailable, RecvChunk};
use super::{RecvBuf, RecvFuture, SendFuture, TcpStream, UnixAddr, UnixStream};

/// A stream that splits into a receive half and a send half: [`TcpStream`] or
/// [`UnixStream`]. Sealed.
pub trait SplitStream: sealed::Sealed {
    /// The type of the stream's addresses.
    type Addr;
}

impl SplitStream for TcpStream {
    type Addr = std::net::SocketAddr;
}

impl SplitStream for UnixStream {
    type Addr = UnixAddr;
}

pub(crate) mod sealed {
    use crate::driver::fd::SharedFd;
    use crate::net::receiver::Receiver;

    /// What the halves reach of their stream (not nameable outside the crate).
    pub struct Parts<'a> {
        pub(crate) rx: &'a Receiver,
        pub(crate) fd: &'a SharedFd,
    }

    pub trait Sealed {
        fn parts(&self) -> Parts<'_>;
        fn addr(&self, peer: bool) -> std::io::Result<<Self as super::SplitStream>::Addr>
        where
            Self: super::SplitStream;
    }
}

/// Methods of both read halves; `$stream` gives the `&S` they work on.
macro_rules! read_half_methods {
    () => {
        /// The next chunk received; see [`TcpStream::recv_chunk`]. Cancel-safe.
        pub fn recv_chunk(&self) -> RecvChunk<'_> {
            let parts = self.stream().parts();
            RecvChunk {
                rx: parts.rx,
                fd: parts.fd,
            }
        }

        /// Append every chunk already received (waiting for the first); see
        /// [`TcpStream::recv_available`]. Cancel-safe.
        pub fn recv_available<'b>(&'b self, buf: &'b mut BytesMut) -> RecvAvailable<'b> {
            let parts = self.stream().parts();
            RecvAvailable {
                rx: parts.rx,
                fd: parts.fd,
                buf,
            }
        }

        /// [`recv_chunk`](Self::recv_chunk) as a poll function.
        pub fn poll_recv_chunk(&self, cx: &mut Context<'_>) -> Poll<io::Result<Option<RecvBuf>>> {
            let parts = self.stream().parts();
            parts.rx.poll_recv(parts.fd, cx)
        }

        /// Receive into `buf`'s spare capacity; see [`TcpStream::recv`]. Not cancel-safe.
        pub fn recv(&self, buf: BytesMut, min_spare: usize) -> RecvFuture {
            RecvFuture::submit(self.stream().parts().fd, buf, min_spare)
        }

        /// The peer's address.
        pub fn peer_addr(&self) -> io::Result<S::Addr> {
            self.stream().addr(true)
        }

        /// This end's address.
        pub fn local_addr(&self) -> io::Result<S::Addr> {
            self.stream().addr(false)
        }
    };
}

/// Methods of both write halves.
macro_rules! write_half_methods {
    () => {
        /// One send; may write only part of `buf` (see [`TcpStream::send`]).
        pub fn send(&self, buf: Bytes) -> SendFuture {
            super::send::send(self.stream().parts().fd, buf)
        }

        /// Send all of `buf`. Not cancel-safe: dropped midway, an unknown prefix was sent.
        pub async fn send_all(&self, buf: Bytes) -> io::Result<()> {
            super::send::send_all(self.stream().parts().fd, buf).await
        }

        /// Send all of several buffers with as few syscalls as the socket allows. Not
        /// cancel-safe.
        pub async fn send_all_vectored(&self, bufs: Vec<Bytes>) -> io::Result<()> {
            super::send::send_all_vectored(self.stream().parts().fd, bufs).await
        }

        /// Stop sending (the peer reads end-of-stream); the read half keeps receiving.
        pub fn shutdown_write(&self) -> io::Result<()> {
            SockRef::from(self.stream().parts().fd).shutdown(std::net::Shutdown::Write)
        }

        /// The peer's address.
        pub fn peer_addr(&self) -> io::Result<S::Addr> {
            self.stream().addr(true)
        }

        /// This end's address.
        pub fn local_addr(&self) -> io::Result<S::Addr> {
            self.stream().addr(false)
        }
    };
}

/// The receive half of a stream split with `into_split`. Dropping it stops receiving: the
/// multishot receive is cancelled, so a connection whose reader went away holds no buffer
/// of the shard's ring; bytes that arrive later stay in the socket.
pub struct OwnedReadHalf<S: SplitStream = TcpStream> {
    /// `None` only while [`OwnedReadHalf::reunite`] takes the stream back.
    stream: Option<Rc<S>>,
}

/// The send half of a stream split with `into_split`. Dropping it shuts the stream's write
/// direction down (the peer reads end-of-stream), as with tokio's owned write half; the
/// socket closes once both halves are gone.
pub struct OwnedWriteHalf<S: SplitStream = TcpStream> {
    /// `None` only while [`OwnedReadHalf::reunite`] takes the stream back.
    stream: Option<Rc<S>>,
}

/// The receive half of a stream borrowed by `split(&mut self)`.
pub struct ReadHalf<'a, S: SplitStream = TcpStream> {
    stream: &'a S,
}

/// The send half of a stream borrowed by `split(&mut self)`. Dropping it does nothing.
pub struct WriteHalf<'a, S: SplitStream = TcpStream> {
    stream: &'a S,
}

pub(crate) fn into_split<S: SplitStream>(stream: S) -> (OwnedReadHalf<S>, OwnedWriteHalf<S>) {
    let stream = Rc::new(stream);
    (
        OwnedReadHalf {
            stream: Some(stream.clone()),
        },
        OwnedWriteHalf {
            stream: Some(stream),
        },
    )
}

pub(crate) fn split<S: SplitStream>(stream: &mut S) -> (ReadHalf<'_, S>, WriteHalf<'_, S>) {
    let stream = &*stream;
    (ReadHalf { stream }, WriteHalf { stream })
}

impl<S: SplitStream> OwnedReadHalf<S> {
    fn stream(&self) -> &S {
        self.stream
            .as_deref()
            .expect("the stream is there until reunite")
    }

    read_half_methods!();

    /// Put the stream back together from its two halves. Fails (handing both back) if
    /// `write` is the half of another stream.
    pub fn reunite(mut self, mut write: OwnedWriteHalf<S>) -> Result<S, ReuniteError<S>> {
        let same = match (&self.stream, &write.stream) {
            (Some(r), Some(w)) => Rc::ptr_eq(r, w),
            _ => false,
        };
        if !same {
            return Err(ReuniteError(self, write));
        }
        // Taken out of both halves, so neither drop stops receiving or shuts down sending.
        drop(write.stream.take());
        let rc = self.stream.take().expect("checked above");
        Ok(Rc::into_inner(rc).expect("the two halves held the only references"))
    }
}

impl<S: SplitStream> Drop for OwnedReadHalf<S> {
    fn drop(&mut self) {
        if let Some(stream) = &self.stream {
            stream.parts().rx.stop();
        }
    }
}

impl<S: SplitStream> OwnedWriteHalf<S> {
    fn stream(&self) -> &S {
        self.stream
            .as_deref()
            .expect("the stream is there until reunite")
    }

    write_half_methods!();
}

impl<S: SplitStream> Drop for OwnedWriteHalf<S> {
    fn drop(&mut self) {
        if let Some(stream) = &self.stream {
            // A socket the peer already reset may refuse; there is nobody to tell.
            let _ = SockRef::from(stream.parts().fd).shutdown(std::net::Shutdown::Write);
        }
    }
}

impl<S: SplitStream> ReadHalf<'_, S> {
    fn stream(&self) -> &S {
        self.stream
    }

    read_half_methods!();
}

impl<S: SplitStream> WriteHalf<'_, S> {
    fn stream(&self) -> &S {
        self.stream
    }

    write_half_methods!();
}

/// [`OwnedReadHalf::reunite`] was given halves of two different streams; here they are back.
pub struct ReuniteError<S: SplitStream = TcpStream>(pub OwnedReadHalf<S>, pub OwnedWriteHalf<S>);

impl<S: SplitStream> fmt::Debug for ReuniteError<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ReuniteError(..)")
    }
}

impl<S: SplitStream> fmt::Display for ReuniteError<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("tried to reunite halves of two different streams")
    }
}

impl<S: SplitStream> std::error::Error for ReuniteError<S> {}

impl<S: SplitStream> fmt::Debug for OwnedReadHalf<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("OwnedReadHalf(..)")
    }
}

impl<S: SplitStream> fmt::Debug for OwnedWriteHalf<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("OwnedWriteHalf(..)")
    }
}
