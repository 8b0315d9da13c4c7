//! Owned, plain-Rust view of a frame header, decoupled from the flatbuffers
//! accessors so callers never hold borrows into the receive buffer.

use std::fmt;
use std::time::Duration;

/// What a frame is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum FrameKind {
    /// A call: the server answers with a Response or an Error.
    Request,
    /// The successful reply to the Request with the same correlation id.
    Response,
    /// The failed reply to the Request with the same correlation id (see `status`).
    Error,
    /// Client asks the server to stop working on a request; no reply is owed.
    Cancel,
    /// One message of a streamed reply: the call goes on until the Response that ends the
    /// stream (or an Error).
    StreamItem,
    /// The client took messages of a streamed reply; the payload is the `u32` little-endian
    /// number of further messages the server may send (see `rpc::StreamCredit`).
    Credit,
}

impl FrameKind {
    /// The kind's byte on the wire (the schema's enum values).
    pub(crate) fn code(self) -> u8 {
        match self {
            Self::Request => 0,
            Self::Response => 1,
            Self::Error => 2,
            Self::Cancel => 3,
            Self::StreamItem => 4,
            Self::Credit => 5,
        }
    }

    /// `None` for values a newer peer may send but this build does not know.
    pub(crate) fn from_code(code: u8) -> Option<Self> {
        match code {
            0 => Some(Self::Request),
            1 => Some(Self::Response),
            2 => Some(Self::Error),
            3 => Some(Self::Cancel),
            4 => Some(Self::StreamItem),
            5 => Some(Self::Credit),
            _ => None,
        }
    }
}

/// Outcome of a call as carried on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
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
    /// What the call named does not exist.
    NotFound,
    /// What the call would create exists already.
    AlreadyExists,
    /// The caller may not do this.
    PermissionDenied,
    /// The system is not in the state the call needs.
    FailedPrecondition,
    /// Aborted by a concurrency conflict; the caller may retry the whole sequence.
    Aborted,
    /// Past the valid range.
    OutOfRange,
    /// Not available now; the caller may retry.
    Unavailable,
    /// Unrecoverable data loss or corruption.
    DataLoss,
    /// The caller is not authenticated.
    Unauthenticated,
    /// The method exists but is not implemented.
    Unimplemented,
}

impl StatusCode {
    pub(crate) const ALL: [StatusCode; 19] = [
        Self::Ok,
        Self::UnknownService,
        Self::UnknownMethod,
        Self::BadRequest,
        Self::Internal,
        Self::Overloaded,
        Self::DeadlineExceeded,
        Self::Cancelled,
        Self::Failed,
        Self::NotFound,
        Self::AlreadyExists,
        Self::PermissionDenied,
        Self::FailedPrecondition,
        Self::Aborted,
        Self::OutOfRange,
        Self::Unavailable,
        Self::DataLoss,
        Self::Unauthenticated,
        Self::Unimplemented,
    ];

    /// The status's byte on the wire (the schema's enum values, in declaration order).
    pub(crate) fn code(self) -> u8 {
        self as u8
    }

    /// `None` for values a newer peer may send but this build does not know.
    pub(crate) fn from_code(code: u8) -> Option<Self> {
        Self::ALL.get(usize::from(code)).copied()
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
            Self::NotFound => "not found",
            Self::AlreadyExists => "already exists",
            Self::PermissionDenied => "permission denied",
            Self::FailedPrecondition => "failed precondition",
            Self::Aborted => "aborted",
            Self::OutOfRange => "out of range",
            Self::Unavailable => "unavailable",
            Self::DataLoss => "data loss",
            Self::Unauthenticated => "unauthenticated",
            Self::Unimplemented => "unimplemented",
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
