//! Owned, plain-Rust view of a frame header, decoupled from the flatbuffers
//! accessors so callers never hold borrows into the receive buffer.

use std::fmt;
use std::time::Duration;

use super::header_generated::corewire::wire;

/// What a frame is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FrameKind {
    /// A call: the server answers with a Response or an Error.
    Request,
    /// The successful reply to the Request with the same correlation id.
    Response,
    /// The failed reply to the Request with the same correlation id (see `status`).
    Error,
    /// Client asks the server to stop working on a request; no reply is owed.
    Cancel,
}

impl FrameKind {
    pub(crate) fn to_wire(self) -> wire::FrameKind {
        match self {
            Self::Request => wire::FrameKind::Request,
            Self::Response => wire::FrameKind::Response,
            Self::Error => wire::FrameKind::Error,
            Self::Cancel => wire::FrameKind::Cancel,
        }
    }

    /// `None` for values a newer peer may send but this build does not know.
    pub(crate) fn from_wire(kind: wire::FrameKind) -> Option<Self> {
        match kind {
            wire::FrameKind::Request => Some(Self::Request),
            wire::FrameKind::Response => Some(Self::Response),
            wire::FrameKind::Error => Some(Self::Error),
            wire::FrameKind::Cancel => Some(Self::Cancel),
            _ => None,
        }
    }
}

/// Outcome of a call as carried on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum StatusCode {
    /// The call succeeded.
    Ok,
    /// No service with this id on the server.
    UnknownService,
    /// The service has no method with this id.
    UnknownMethod,
    /// The payload could not be decoded or is invalid.
    BadRequest,
    /// The handler failed.
    Internal,
    /// Shed before running (queue full, too many in flight).
    Overloaded,
    /// The request's deadline passed before it completed.
    DeadlineExceeded,
    /// The client cancelled the request.
    Cancelled,
    /// The service answered with its own error (see `rpc::Status::Failed`).
    Failed,
}

impl StatusCode {
    pub(crate) fn to_wire(self) -> wire::StatusCode {
        match self {
            Self::Ok => wire::StatusCode::Ok,
            Self::UnknownService => wire::StatusCode::UnknownService,
            Self::UnknownMethod => wire::StatusCode::UnknownMethod,
            Self::BadRequest => wire::StatusCode::BadRequest,
            Self::Internal => wire::StatusCode::Internal,
            Self::Overloaded => wire::StatusCode::Overloaded,
            Self::DeadlineExceeded => wire::StatusCode::DeadlineExceeded,
            Self::Cancelled => wire::StatusCode::Cancelled,
            Self::Failed => wire::StatusCode::Failed,
        }
    }

    pub(crate) fn from_wire(status: wire::StatusCode) -> Option<Self> {
        match status {
            wire::StatusCode::Ok => Some(Self::Ok),
            wire::StatusCode::UnknownService => Some(Self::UnknownService),
            wire::StatusCode::UnknownMethod => Some(Self::UnknownMethod),
            wire::StatusCode::BadRequest => Some(Self::BadRequest),
            wire::StatusCode::Internal => Some(Self::Internal),
            wire::StatusCode::Overloaded => Some(Self::Overloaded),
            wire::StatusCode::DeadlineExceeded => Some(Self::DeadlineExceeded),
            wire::StatusCode::Cancelled => Some(Self::Cancelled),
            wire::StatusCode::Failed => Some(Self::Failed),
            _ => None,
        }
    }

    /// Whether this is [`StatusCode::Ok`].
    pub fn is_ok(self) -> bool {
        self == Self::Ok
    }
}

impl fmt::Display for StatusCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = match self {
            Self::Ok => "ok",
            Self::UnknownService => "unknown service",
            Self::UnknownMethod => "unknown method",
            Self::BadRequest => "bad request",
            Self::Internal => "internal error",
            Self::Overloaded => "overloaded",
            Self::DeadlineExceeded => "deadline exceeded",
            Self::Cancelled => "cancelled",
            Self::Failed => "failed",
        };
        f.write_str(name)
    }
}

/// A frame header. Payload and attachment lengths are not stored here: on
/// decode they are the lengths of `Frame::payload`/`Frame::attachment`, on
/// encode they are passed alongside, so the two can never disagree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FrameHeader {
    /// What the frame is for.
    pub kind: FrameKind,
    /// The service addressed (see `service_id` in the service framework).
    pub service_id: u32,
    /// The method within the service.
    pub method_id: u32,
    /// Pairs a Response/Error/Cancel with its Request; chosen by the client.
    pub correlation_id: u64,
    /// Outcome; [`StatusCode::Ok`] except on Error frames.
    pub status: StatusCode,
    /// Remaining time budget, as measured by the sender when it sent the frame;
    /// the receiver anchors it to its own receive time (no shared clock needed,
    /// transit time is not accounted). Carried in whole microseconds, so finer
    /// precision is truncated and budgets beyond `u64::MAX` µs saturate.
    pub deadline: Option<Duration>,
    /// Human-readable detail, normally only on Error frames.
    pub error_message: Option<String>,
}

impl FrameHeader {
    /// A Request with no deadline.
    pub fn request(service_id: u32, method_id: u32, correlation_id: u64) -> Self {
        Self {
            kind: FrameKind::Request,
            service_id,
            method_id,
            correlation_id,
            status: StatusCode::Ok,
            deadline: None,
            error_message: None,
        }
    }

    /// A Cancel for the request `correlation_id`.
    pub fn cancel(service_id: u32, method_id: u32, correlation_id: u64) -> Self {
        Self {
            kind: FrameKind::Cancel,
            ..Self::request(service_id, method_id, correlation_id)
        }
    }

    /// Sets the remaining time budget the receiver should honour.
    pub fn with_deadline(mut self, budget: Duration) -> Self {
        self.deadline = Some(budget);
        self
    }
}

pub(crate) fn deadline_to_micros(budget: Duration) -> u64 {
    u64::try_from(budget.as_micros()).unwrap_or(u64::MAX)
}

/// Lengths the header declares for the body that follows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct BodyLens {
    pub payload: u32,
    pub attachment: u32,
}

impl BodyLens {
    pub fn total(self) -> u64 {
        u64::from(self.payload) + u64::from(self.attachment)
    }
}

pub(crate) fn from_wire(
    w: &wire::WireHeader<'_>,
) -> Result<(FrameHeader, BodyLens), super::FrameError> {
    use super::FrameError;

    if w.version() != super::VERSION {
        return Err(FrameError::UnsupportedVersion(w.version()));
    }
    let kind = FrameKind::from_wire(w.kind()).ok_or(FrameError::UnknownKind(w.kind().0))?;
    let status =
        StatusCode::from_wire(w.status()).ok_or(FrameError::UnknownStatus(w.status().0))?;
    let header = FrameHeader {
        kind,
        service_id: w.service_id(),
        method_id: w.method_id(),
        correlation_id: w.correlation_id(),
        status,
        deadline: w.deadline_us().map(Duration::from_micros),
        error_message: w.error_message().map(str::to_owned),
    };
    let lens = BodyLens {
        payload: w.payload_len(),
        attachment: w.attachment_len(),
    };
    Ok((header, lens))
}
