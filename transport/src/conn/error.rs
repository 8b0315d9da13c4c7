use std::fmt;
use std::io;

use crate::frame::FrameError;

/// Why a connection operation failed. Every variant ends the connection except `Busy`.
#[derive(Debug)]
pub enum TransportError {
    /// The connection was closed (by us, by the peer, or after an earlier error).
    Closed,
    /// An I/O error from the socket or the ring.
    Io(io::Error),
    /// The peer sent bytes that are not a valid frame.
    Protocol(FrameError),
    /// The peer closed in the middle of a frame.
    Truncated {
        /// Bytes of the unfinished frame that had arrived.
        buffered: usize,
    },
    /// A second task tried to receive while another one was receiving.
    Busy,
    /// A transport-specific failure (e.g. an RDMA work completion error).
    Other(String),
}

impl fmt::Display for TransportError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TransportError::Closed => f.write_str("connection closed"),
            TransportError::Io(e) => write!(f, "i/o error: {e}"),
            TransportError::Protocol(e) => write!(f, "protocol error: {e}"),
            TransportError::Truncated { buffered } => {
                write!(
                    f,
                    "peer closed mid-frame ({buffered} bytes of a frame buffered)"
                )
            }
            TransportError::Busy => f.write_str("another task is already receiving"),
            TransportError::Other(s) => f.write_str(s),
        }
    }
}

impl std::error::Error for TransportError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            TransportError::Io(e) => Some(e),
            TransportError::Protocol(e) => Some(e),
            _ => None,
        }
    }
}

impl From<io::Error> for TransportError {
    fn from(e: io::Error) -> Self {
        TransportError::Io(e)
    }
}

impl From<FrameError> for TransportError {
    fn from(e: FrameError) -> Self {
        TransportError::Protocol(e)
    }
}
