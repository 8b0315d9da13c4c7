//! The echo server's per-connection task, in two styles.
//!
//! [`serve_echo`] does what any echo server must: it takes every chunk received so far
//! (`recv_available`: on io_uring the multishot receive's chunks from the shard's buffer
//! ring, on epoll one receive), finds where the whole frames in it end, and sends those bytes
//! back as they are in one send, keeping a partial frame for the next receive. No frame is
//! copied or allocated on its own: per receive there is one buffer, handed to the send.
//! [`serve_echo_decoded`] hands each frame up on its own (`FrameReader`) and gathers the
//! replies (`FrameBatch`), as a server that must look at every message does; it costs an
//! allocation and a copy or two per frame, and the benchmarks compare the first style with
//! the other runtimes' echo servers, which do the same work.
//!
//! Both send what arrived together in one send: answering one 4 KiB chunk at a time instead
//! cost one send, hence one TCP segment, per 4 KiB frame, which on loopback tripled the kernel
//! time per request. Because the send is awaited first, a client that stops reading stalls
//! its own connection: the server's send waits for socket buffer space, no more is taken, and
//! the client's own sends back up. What one connection holds in user space is therefore
//! bounded by the input buffer (one frame of at most `max_msg` plus 64 KiB received) and, when
//! decoding, one batch of replies (`FrameBatch` asks to be sent at 256 KiB), most of which
//! are slices of the input buffer rather than copies. A connection waiting for its client
//! holds no buffer: the chunk went back to the ring and an empty input buffer is freed.

use std::fmt;
use std::io;

use bytes::BytesMut;
use corewire::runtime::accept::Accepted;
use corewire::runtime::net::TcpStream;
use corewire::runtime::{report_protocol_error, RoundBudget};
use corewire::transport::length_prefixed::PREFIX_LEN;
use corewire::Budget;

use super::frame_batch::FrameBatch;
use super::frame_reader::{whole_frames, FrameReader, ProtocolError};

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

/// Serve one connection until the peer closes it or breaks the protocol, echoing the whole
/// frames of each receive in one send. A protocol error is counted in the shard's
/// `protocol_errors` and logged (rate-limited).
pub async fn serve_echo(accepted: Accepted, limits: EchoLimits) {
    serve(accepted, limits, Style::WholeFrames).await
}

/// [`serve_echo`], handing every frame up on its own and sending the replies gathered.
pub async fn serve_echo_decoded(accepted: Accepted, limits: EchoLimits) {
    serve(accepted, limits, Style::Decoded).await
}

enum Style {
    WholeFrames,
    Decoded,
}

async fn serve(accepted: Accepted, limits: EchoLimits, style: Style) {
    let Accepted {
        stream,
        peer,
        budget,
        shard,
        ..
    } = accepted;
    let served = match style {
        Style::WholeFrames => echo_whole_frames(&stream, budget, limits).await,
        Style::Decoded => echo_decoded(&stream, budget, limits).await,
    };
    match served {
        Ok(()) => tracing::debug!(?peer, shard, "echo connection closed by peer"),
        Err(ConnError::Protocol(e)) => report_protocol_error("echo", peer, &e),
        Err(ConnError::Io(e)) => {
            tracing::debug!(?peer, shard, error = %e, "echo connection failed")
        }
    }
}

async fn echo_whole_frames(
    stream: &TcpStream,
    budget: Budget,
    limits: EchoLimits,
) -> Result<(), ConnError> {
    let mut round = RoundBudget::new(budget);
    let mut inbound = BytesMut::new();
    loop {
        if inbound.is_empty() {
            // Nothing partial to keep while waiting for the client.
            inbound = BytesMut::new();
        }
        if stream.recv_available(&mut inbound).await? == 0 {
            return match inbound.len() {
                0 => Ok(()),
                pending => Err(ProtocolError::ClosedMidFrame {
                    pending: pending as u64,
                }
                .into()),
            };
        }
        let whole = whole_frames(&inbound, limits.max_msg)?;
        if whole.frames == 0 {
            continue;
        }
        // The bytes go out as they came in: the buffer itself when it holds whole frames
        // only (the usual case), else the head split off it, the partial frame staying.
        let replies = if whole.bytes == inbound.len() {
            std::mem::take(&mut inbound)
        } else {
            inbound.split_to(whole.bytes)
        };
        stream.send_all(replies.freeze()).await?;
        // One charge for the receive's frames: the round ends, as when decoding, once its
        // messages or bytes are spent.
        round.charge_units(whole.frames, whole.bytes);
        round.yield_if_exhausted().await;
    }
}

async fn echo_decoded(
    stream: &TcpStream,
    budget: Budget,
    limits: EchoLimits,
) -> Result<(), ConnError> {
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
