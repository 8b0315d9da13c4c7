//! Poll-based I/O for the Rust ecosystem: [`Compat`] wraps a corewire stream (a `TcpStream` or
//! a `UnixStream`) and implements `futures-io` (feature `futures-io`), `tokio::io` (feature
//! `tokio-io`) and `hyper::rt` (feature `hyper`) reads and writes over the ring's owned-buffer
//! operations, and `compat::hyper` (feature `hyper`) has the executor and timer hyper needs to
//! serve on every shard.
//!
//! **Cancel-safe**: the receive and send in flight belong to the `Compat`, not to the read or
//! write future. Dropping a read future (a `select!` branch that lost, a timeout) leaves the
//! receive running; the bytes it brings are kept for the next read. No byte is lost or
//! duplicated.
//!
//! **Bounded**: at most [`READ_CHUNK`] bytes are read ahead, and writes are accepted into a
//! buffer of at most [`WRITE_BUFFER`] bytes; past that a writer waits (`Poll::Pending`) until
//! the kernel took some, so a peer that stops reading stops the writer instead of growing a
//! buffer.
//!
//! Writes are write-behind, like a `BufWriter`: `poll_write` returns as soon as the bytes are
//! in the buffer, a send error shows up on a later write or flush, and `poll_flush` /
//! `poll_close` (`poll_shutdown`) wait until everything is with the kernel.

#![warn(missing_docs)]

#[cfg(feature = "hyper")]
pub mod hyper;
mod stream;

pub use stream::{Compat, Stream, READ_CHUNK, WRITE_BUFFER};
