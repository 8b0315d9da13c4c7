//! The echo server's per-connection task.
//!
//! It takes every chunk received so far (multishot receive into the shard's buffer ring,
//! `recv_available`), answers every whole frame buffered in one (vectored) send, and only
//! then takes more. Taking one 4 KiB chunk at a time instead cost one send, hence one TCP
//! segment, per 4 KiB frame: on loopback that tripled the kernel time per request. Because the send is awaited first, a client that stops reading stalls its own
//! connection: the server's send waits for socket buffer space, no more is taken, and the
//! client's own sends back up. What one connection holds in user space is therefore bounded
//! by the input buffer (one frame of at most `max_msg` plus 64 KiB of chunks) and one batch of
//! replies (`FrameBatch` asks to be sent at 256 KiB), most of which are slices of the input
//! buffer rather than copies. A connection waiting for its client holds no buffer: the chunk
//! went back to the ring and an empty input buffer is freed.

use std::fmt;
use std::io;

use bytes::BytesMut;
use corewire::runtime::accept::Accepted;
use corewire::runtime::net::TcpStream;
use corewire::runtime::{report_protocol_error, RoundBudget};
use corewire::transport::length_prefixed::PREFIX_LEN;
use corewire::Budget;

use super::frame_batch::FrameBatch;
use super::frame_reader::{FrameReader, ProtocolError};

/// Spare room each recv of the load generator asks for.
pub const READ_CHUNK: usize = 64 * 1024;

/// Per-server settings of the echo handler.
#[derive(Debug, Clone, Copy)]
pub struct EchoLimits {
    /// Largest payload accepted; a longer declared length closes the connection.
    pub max_msg: usize,
}

impl Default for EchoLimits {
    fn default() -> Self {
        EchoLimits { max_msg: 16 << 20 }
    }
}

/// Why a connection ended early.
#[derive(Debug)]
pub enum ConnError {
    Protocol(ProtocolError),
    /// The socket failed (typically a reset by the peer).
    Io(io::Error),
}

impl fmt::Display for ConnError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConnError::Protocol(e) => write!(f, "protocol error: {e}"),
            ConnError::Io(e) => write!(f, "i/o error: {e}"),
        }
    }
}

impl std::error::Error for ConnError {}

impl From<ProtocolError> for ConnError {
    fn from(e: ProtocolError) -> Self {
        ConnError::Protocol(e)
    }
}

impl From<io::Error> for ConnError {
    fn from(e: io::Error) -> Self {
        ConnError::Io(e)
    }
}

/// Serve one connection until the peer closes it or breaks the protocol. A protocol error
/// is counted in the shard's `protocol_errors` and logged (rate-limited).
pub async fn serve_echo(accepted: Accepted, limits: EchoLimits) {
    let Accepted {
        stream,
        peer,
        budget,
        shard,
        ..
    } = accepted;
    match echo(&stream, budget, limits).await {
        Ok(()) => tracing::debug!(?peer, shard, "echo connection closed by peer"),
        Err(ConnError::Protocol(e)) => report_protocol_error("echo", peer, &e),
        Err(ConnError::Io(e)) => {
            tracing::debug!(?peer, shard, error = %e, "echo connection failed")
        }
    }
}

async fn echo(stream: &TcpStream, budget: Budget, limits: EchoLimits) -> Result<(), ConnError> {
    let mut reader = FrameReader::new(limits.max_msg);
    let mut round = RoundBudget::new(budget);
    let mut inbound = BytesMut::new();
    let mut replies = FrameBatch::new();
    loop {
        if inbound.is_empty() {
            // Nothing partial to keep while waiting for the client.
            inbound = BytesMut::new();
        }
        replies.release_idle();
        // Everything that arrived together, so the replies to it go out in one send.
        let n = stream.recv_available(&mut inbound).await?;
        if n == 0 {
            reader.finish()?;
            return Ok(());
        }
        reader.received(n);
        while let Some(payload) = reader.next(&mut inbound)? {
            let cost = PREFIX_LEN + payload.len();
            replies.push(payload);
            if replies.is_full() {
                stream.send_all_vectored(replies.take()).await?;
            }
            round.charge(cost);
            round.yield_if_exhausted().await;
        }
        if !replies.is_empty() {
            stream.send_all_vectored(replies.take()).await?;
        }
    }
}
