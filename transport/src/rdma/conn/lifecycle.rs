//! Where one RDMA connection is in its life and why it ended, sans-I/O: the connection
//! posts and releases (see `mod.rs`), this decides. A connection is connecting until it
//! carries frames, running until it ends, and ends once, with the first reason that comes:
//! our side closed it, the peer disconnected, it was dropped at shutdown, or it failed. Only
//! a failure makes a later `recv` an error instead of an orderly end of stream.

use std::fmt;

use corewire_verbs::{VerbsError, WcStatus};

use super::super::handshake::HandshakeError;
use super::super::large::control::{BadControl, Descriptor};
use super::super::large::incoming::AssemblyError;
use super::super::pool::PoolError;
use crate::conn::TransportError;
use crate::frame::{Frame, FrameError};

/// The connection's phase.
#[derive(Debug)]
pub(crate) enum Lifecycle {
    /// Its queue pair is being connected: no frames, no keepalive probes yet.
    Connecting,
    /// Established and carrying frames.
    Running,
    /// Ended: nothing more is posted, and its resources were released when it got here.
    Ended(EndReason),
}

impl Lifecycle {
    pub fn is_running(&self) -> bool {
        matches!(self, Lifecycle::Running)
    }

    pub fn is_ended(&self) -> bool {
        matches!(self, Lifecycle::Ended(_))
    }

    /// Why it ended, once it has.
    pub fn reason(&self) -> Option<&EndReason> {
        match self {
            Lifecycle::Ended(why) => Some(why),
            _ => None,
        }
    }

    /// It carries frames from now on, unless it ended while connecting.
    pub fn start_running(&mut self) {
        if matches!(self, Lifecycle::Connecting) {
            *self = Lifecycle::Running;
        }
    }

    /// Ends it with `reason` unless it already ended (the first reason wins). True when this
    /// call ended it: the caller releases the resources, exactly once.
    pub fn end(&mut self, reason: EndReason) -> bool {
        if self.is_ended() {
            return false;
        }
        *self = Lifecycle::Ended(reason);
        true
    }
}

/// Why a connection ended.
#[derive(Debug)]
pub(crate) enum EndReason {
    /// Our side closed it, and every send completed.
    Closed,
    /// The peer disconnected (rdma_cm DISCONNECTED or the device went away).
    PeerDisconnected,
    /// Dropped without an orderly close (its tasks went with the runtime).
    Dropped,
    /// Something broke: `recv` reports it rather than an orderly end of stream.
    Failed(Failure),
}

impl EndReason {
    pub fn is_failure(&self) -> bool {
        matches!(self, EndReason::Failed(_))
    }
}

impl fmt::Display for EndReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EndReason::Closed => f.write_str("closed"),
            EndReason::PeerDisconnected => f.write_str("disconnected by peer"),
            EndReason::Dropped => f.write_str("dropped"),
            EndReason::Failed(why) => write!(f, "{why}"),
        }
    }
}

/// What broke a connection.
#[derive(Debug)]
pub(crate) enum Failure {
    /// A work request completed with an error (a dead peer or link ends as RetryExceeded).
    Completion { status: WcStatus, vendor_err: u32 },
    /// Posting a work request failed.
    Post(Posting, VerbsError),
    /// The device reported the queue pair in error (async event of this kind).
    QpError { kind: u32 },
    /// Setting the connection up failed.
    Setup(Setup),
    /// The peer sent bytes that are not a valid frame.
    Protocol(FrameError),
    /// The peer's large-message control records are malformed.
    BadControl(BadControl),
    /// A descriptor with an id outside the table or a length past the frame limit.
    BadDescriptor(Descriptor),
    /// A large message does not line up with the stream.
    Misplaced(AssemblyError),
    /// Registering a buffer to read a large message into failed.
    ReadRegistration { len: usize, error: VerbsError },
    /// No send buffer can be registered and none is in flight to come back.
    SendBuffers(PoolError),
}

/// Which post failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Posting {
    /// The receive buffers posted when the connection starts.
    FirstReceives,
    /// A receive buffer posted again.
    Repost,
    /// A data or control message.
    Data,
    /// A pure credit ack.
    Ack,
    /// A keepalive probe.
    Keepalive,
    /// The RDMA READ of a large message.
    Read,
}

/// The step of connection set-up that failed.
#[derive(Debug)]
pub(crate) enum Setup {
    AckTimeout(VerbsError),
    Connect(VerbsError),
    Accept(VerbsError),
    /// rdma_cm reported something other than an established connection (its text).
    NotEstablished(String),
    /// The server's accept carried a handshake we cannot read.
    Handshake(HandshakeError),
    /// The server's buffers are smaller than ours.
    ServerChunk {
        bytes: u32,
    },
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Failure::Completion { status, vendor_err } => write!(
                f,
                "work completion failed: {status:?} (vendor error {vendor_err:#x})"
            ),
            Failure::Post(what, e) => {
                let what = match what {
                    Posting::FirstReceives => "posting receive buffers failed",
                    Posting::Repost => "reposting a receive buffer failed",
                    Posting::Data => "ibv_post_send failed",
                    Posting::Ack => "posting a credit ack failed",
                    Posting::Keepalive => "posting a keepalive probe failed",
                    Posting::Read => "posting an RDMA READ failed",
                };
                write!(f, "{what}: {e}")
            }
            Failure::QpError { kind } => write!(f, "queue pair error (async event {kind})"),
            Failure::Setup(step) => write!(f, "{step}"),
            Failure::Protocol(e) => write!(f, "protocol error: {e}"),
            Failure::BadControl(e) => write!(f, "{e}"),
            Failure::BadDescriptor(d) => write!(f, "bad large-message descriptor {d:?}"),
            Failure::Misplaced(e) => write!(f, "{e}"),
            Failure::ReadRegistration { len, error } => write!(
                f,
                "registering {len} bytes to read a large message failed: {error}"
            ),
            Failure::SendBuffers(e) => write!(f, "{e}"),
        }
    }
}

impl fmt::Display for Setup {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Setup::AckTimeout(e) => write!(f, "setting the ACK timeout failed: {e}"),
            Setup::Connect(e) => write!(f, "rdma_connect failed: {e}"),
            Setup::Accept(e) => write!(f, "rdma_accept failed: {e}"),
            Setup::NotEstablished(why) => f.write_str(why),
            Setup::Handshake(e) => write!(f, "bad handshake from server: {e}"),
            Setup::ServerChunk { bytes } => write!(
                f,
                "rdma connect: server buffers ({bytes} B) are smaller than ours; both ends must \
                 use the same chunk size"
            ),
        }
    }
}

/// What `recv` returns once the connection has ended with `buffered` bytes of an unfinished
/// frame left: an orderly end of stream, the failure (a dead peer or link is an error, not
/// a close: callers see why), or a truncated frame.
pub(crate) fn end_of_stream(
    reason: &EndReason,
    buffered: usize,
) -> Result<Option<Frame>, TransportError> {
    if buffered > 0 {
        Err(TransportError::Truncated { buffered })
    } else if reason.is_failure() {
        Err(TransportError::other(reason.to_string()))
    } else {
        Ok(None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn failed() -> EndReason {
        EndReason::Failed(Failure::Completion {
            status: WcStatus::RetryExceeded,
            vendor_err: 0x81,
        })
    }

    #[test]
    fn a_connection_runs_once_connected_and_ends_once() {
        let mut life = Lifecycle::Connecting;
        assert!(!life.is_running() && !life.is_ended());
        life.start_running();
        assert!(life.is_running());
        assert!(life.end(EndReason::PeerDisconnected));
        assert!(life.is_ended() && !life.is_running());
        // The first reason wins; later ones release nothing again.
        assert!(!life.end(failed()));
        assert!(!life.end(EndReason::Dropped));
        assert_eq!(life.reason().unwrap().to_string(), "disconnected by peer");
    }

    #[test]
    fn ended_while_connecting_never_runs() {
        let mut life = Lifecycle::Connecting;
        assert!(
            life.end(EndReason::Failed(Failure::Setup(Setup::ServerChunk {
                bytes: 4096
            })))
        );
        life.start_running();
        assert!(!life.is_running());
        assert!(life.reason().unwrap().is_failure());
    }

    #[test]
    fn reasons_read_as_before() {
        assert_eq!(
            failed().to_string(),
            "work completion failed: RetryExceeded (vendor error 0x81)"
        );
        assert_eq!(EndReason::Closed.to_string(), "closed");
        assert_eq!(EndReason::Dropped.to_string(), "dropped");
        let post = Failure::Post(
            Posting::Ack,
            VerbsError::Call {
                call: "ibv_post_send",
                errno: 12, // ENOMEM
            },
        );
        assert!(post
            .to_string()
            .starts_with("posting a credit ack failed: ibv_post_send failed: "));
        assert_eq!(
            Failure::QpError { kind: 1 }.to_string(),
            "queue pair error (async event 1)"
        );
        assert!(!EndReason::PeerDisconnected.is_failure());
        assert!(failed().is_failure());
    }

    #[test]
    fn the_end_of_stream_says_how_it_ended() {
        assert!(matches!(end_of_stream(&EndReason::Closed, 0), Ok(None)));
        assert!(matches!(
            end_of_stream(&EndReason::PeerDisconnected, 0),
            Ok(None)
        ));
        match end_of_stream(&failed(), 0) {
            Err(TransportError::Other(why)) => {
                assert!(why.to_string().contains("RetryExceeded"), "{why}")
            }
            other => panic!("{other:?}"),
        }
        // Bytes of an unfinished frame make it truncated, however it ended.
        for reason in [EndReason::Closed, failed()] {
            assert!(matches!(
                end_of_stream(&reason, 7),
                Err(TransportError::Truncated { buffered: 7 })
            ));
        }
    }
}
