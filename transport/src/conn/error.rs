use std::fmt;
use std::io;

use crate::frame::FrameError;

/// Why a connection operation failed. Every variant ends the connection except `Busy`.
#[derive(Debug)]
#[non_exhaustive]
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
    /// A transport-specific failure (e.g. an RDMA work completion error, a verbs call), with
    /// the error underneath (also given by [`source`](std::error::Error::source)).
    Other(Box<dyn std::error::Error + Send + Sync>),
}

impl TransportError {
    /// A transport-specific failure caused by `e` (a message is fine too: `other("why")`).
    pub fn other(e: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> TransportError {
        TransportError::Other(e.into())
    }
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
            TransportError::Other(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for TransportError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            TransportError::Io(e) => Some(e),
            TransportError::Protocol(e) => Some(e),
            TransportError::Other(e) => Some(&**e),
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

#[cfg(test)]
mod tests {
    use std::error::Error;

    use super::*;

    #[test]
    fn source_is_the_error_underneath() {
        let e = TransportError::from(io::Error::from(io::ErrorKind::ConnectionReset));
        let io = e.source().unwrap().downcast_ref::<io::Error>().unwrap();
        assert_eq!(io.kind(), io::ErrorKind::ConnectionReset);
        let e = TransportError::other(io::Error::other("work completion: RetryExceeded"));
        assert_eq!(e.to_string(), "work completion: RetryExceeded");
        assert!(e.source().unwrap().is::<io::Error>());
        assert!(TransportError::Closed.source().is_none());
    }
}
