//! Large messages without copies. A payload or attachment of at least
//! `RdmaConfig::large_message_threshold` bytes (or any part of a [`RegisteredBuf`](registered::RegisteredBuf)) is not
//! copied into the send chunks: its memory is registered where it lies (REMOTE_READ) and a
//! small descriptor goes in its place; the peer RDMA READs it into one buffer of its own,
//! deregisters that buffer and hands it up as the frame's `Bytes` (no copy on either side),
//! then says "done" so the sender deregisters. Both sides drop everything when the
//! connection ends, whatever was in flight.
//!
//! The state machines are sans-I/O: [`control`] (the records), [`outgoing`] (the sender's
//! table), [`incoming`] (positions in the stream, bounded reads, frame assembly).

pub mod control;
pub mod incoming;
pub mod outgoing;
pub mod registered;
