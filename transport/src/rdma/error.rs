//! Why an RDMA operation failed: [`RdmaError`], which keeps the error underneath it
//! (`source()`), and [`Rejection`], the server's answer to a refused connection.

use std::error::Error;
use std::fmt;

use corewire_runtime::MeshError;
use corewire_verbs::VerbsError;

use super::cq_slots::CqFull;
use super::handshake::HandshakeError;
use super::pool::PoolError;
use super::select::SelectError;

/// Why an RDMA operation failed. [`source`](Error::source) gives the error underneath, where
/// there is one (a verbs call's, a timer's, a shard's, the server's rejection).
#[derive(Debug)]
#[non_exhaustive]
pub enum RdmaError {
    /// `install` was not called on this runtime.
    NotInstalled,
    /// A verbs or rdma_cm call failed (no device, memory registration, ...).
    Device(VerbsError),
    /// The shard's buffer pool had no room (see [`PoolError`]).
    Pool(PoolError),
    /// The device, port or GID asked for is not there (the error lists what is).
    NoSuchDevice(Box<SelectError>),
    /// The shard's completion queue has no room for another queue pair.
    CqFull(CqFull),
    /// The peer's handshake (rdma_cm private data) is not a corewire one.
    Handshake(HandshakeError),
    /// The server refused the connection.
    Rejected(Rejection),
    /// Connection set-up failed (address or route resolution, a timeout, a device other
    /// than the chosen one, ...).
    Connect {
        /// What failed.
        context: String,
        /// The error underneath, when there is one.
        source: Option<Box<dyn Error + Send + Sync>>,
    },
    /// A shard could not run the operation (it stopped, or the task panicked).
    Shard(MeshError),
}

impl RdmaError {
    /// A set-up failure with nothing underneath.
    pub(crate) fn connect(context: impl Into<String>) -> RdmaError {
        RdmaError::Connect {
            context: context.into(),
            source: None,
        }
    }

    /// A set-up failure caused by `source`.
    pub(crate) fn connect_because(
        context: impl Into<String>,
        source: impl Into<Box<dyn Error + Send + Sync>>,
    ) -> RdmaError {
        RdmaError::Connect {
            context: context.into(),
            source: Some(source.into()),
        }
    }
}

impl fmt::Display for RdmaError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RdmaError::NotInstalled => f.write_str(
                "the RDMA transport is not installed on this shard (call rdma::install(&runtime, config))",
            ),
            RdmaError::Device(e) => write!(f, "rdma: {e}"),
            RdmaError::Pool(e) => write!(f, "{e}"),
            RdmaError::NoSuchDevice(e) => write!(f, "rdma: {e}"),
            RdmaError::CqFull(e) => write!(f, "{e}"),
            RdmaError::Rejected(r) => write!(f, "rdma connection rejected by the server: {r}"),
            RdmaError::Handshake(e) => write!(f, "rdma handshake: {e}"),
            RdmaError::Connect { context, .. } => write!(f, "rdma connect: {context}"),
            RdmaError::Shard(e) => write!(f, "rdma: a shard could not run the operation: {e}"),
        }
    }
}

impl Error for RdmaError {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        match self {
            RdmaError::NotInstalled => None,
            RdmaError::Device(e) => Some(e),
            RdmaError::Pool(e) => Some(e),
            RdmaError::NoSuchDevice(e) => Some(&**e),
            RdmaError::CqFull(e) => Some(e),
            RdmaError::Handshake(e) => Some(e),
            RdmaError::Rejected(r) => Some(r),
            RdmaError::Connect { source, .. } => {
                source.as_deref().map(|e| e as &(dyn Error + 'static))
            }
            RdmaError::Shard(e) => Some(e),
        }
    }
}

/// A server's refusal of a connection: the reason a corewire server gives, and rdma_cm's
/// reject status.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rejection {
    reason: Option<String>,
    status: i32,
}

impl Rejection {
    pub(crate) fn new(reason: Option<String>, status: i32) -> Rejection {
        Rejection { reason, status }
    }

    /// The server's reason (a corewire server sends one; other peers may not).
    pub fn reason(&self) -> Option<&str> {
        self.reason.as_deref()
    }

    /// rdma_cm's status of the rejection event (the InfiniBand reject reason code).
    pub fn status(&self) -> i32 {
        self.status
    }
}

impl fmt::Display for Rejection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.reason {
            Some(why) => f.write_str(why),
            None => write!(f, "no reason given (reject status {})", self.status),
        }
    }
}

impl Error for Rejection {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn source_is_the_error_underneath() {
        let e = RdmaError::connect_because(
            "timed out waiting for route resolution",
            std::io::Error::from(std::io::ErrorKind::TimedOut),
        );
        assert_eq!(
            e.to_string(),
            "rdma connect: timed out waiting for route resolution"
        );
        let io = e
            .source()
            .unwrap()
            .downcast_ref::<std::io::Error>()
            .unwrap();
        assert_eq!(io.kind(), std::io::ErrorKind::TimedOut);
        assert!(RdmaError::connect("closed").source().is_none());

        let e = RdmaError::Rejected(Rejection::new(Some("completion queue full".into()), 28));
        assert!(e
            .to_string()
            .ends_with("rejected by the server: completion queue full"));
        let r = e.source().unwrap().downcast_ref::<Rejection>().unwrap();
        assert_eq!(
            (r.reason(), r.status()),
            (Some("completion queue full"), 28)
        );

        let e = RdmaError::Shard(MeshError::Aborted);
        assert!(e.source().unwrap().is::<MeshError>());
        let e = RdmaError::Device(VerbsError::NoDevice { name: None });
        assert!(e.source().unwrap().is::<VerbsError>());
        assert!(RdmaError::NotInstalled.source().is_none());
        // Send + Sync, so it fits `Box<dyn Error + Send + Sync>` and crosses threads.
        fn send_sync<T: Send + Sync + 'static>(_: &T) {}
        send_sync(&e);
    }
}
