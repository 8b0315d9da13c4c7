//! Poll-based I/O for the Rust ecosystem: [`Compat`] wraps a corewire stream (a `TcpStream` or
//! a `UnixStream`) and implements `futures-io` (feature `futures-io`), `tokio::io` (feature
//! `tokio-io`) and `hyper::rt` (feature `hyper`) reads and writes over the ring's owned-buffer
//! operations, and `compat::hyper` (feature `hyper`) has the executor and timer hyper needs to
//! serve on every shard.
//!
//! **Reads** take the chunks of the stream's multishot receive into the shard's buffer ring
//! ([`TcpStream::recv_chunk`](crate::net::TcpStream::recv_chunk)): one armed receive per
//! connection instead of one receive submitted per read, and no receive buffer while a
//! connection is idle. A read copies out of the chunk; a chunk read to its end goes back to the
//! ring at once.
//!
//! **Cancel-safe**: the receive state lives in the stream and the send in flight belongs to
//! the `Compat`, not to the read or write future. Dropping a read future (a `select!` branch
//! that lost, a timeout) loses nothing; the bytes that arrive are kept for the next read. No
//! byte is lost or duplicated.
//!
//! **Bounded**: read-ahead is what the kernel delivered into the shard's buffer ring (a ring
//! left empty makes the stream fall back to one single-shot receive at a time, which waits
//! for the reader), and writes are accepted into a buffer of at most [`WRITE_BUFFER`] bytes;
//! past that a writer waits (`Poll::Pending`) until the kernel took some, so a peer that stops
//! reading stops the writer instead of growing a buffer.
//!
//! Writes are write-behind, like a `BufWriter`: `poll_write` returns as soon as the bytes are
//! in the buffer, a send error shows up on a later write or flush, and `poll_flush` /
//! `poll_close` (`poll_shutdown`) wait until everything is with the kernel.
//!
//! With the `tls` feature, [`TlsStream`](crate::tls::TlsStream) implements the same traits
//! itself (no wrapper), so hyper and h2 serve over TLS the same way.

#[cfg(feature = "hyper")]
pub mod hyper;
mod stream;
#[cfg(all(
    feature = "tls",
    any(feature = "futures-io", feature = "tokio-io", feature = "hyper")
))]
mod tls;

pub use stream::{Compat, Stream, WRITE_BUFFER};
