//! Why a call failed, as one typed value on both sides: a service returns it, it travels as
//! an Error frame (its [`StatusCode`] plus, for the variants that carry text, that text and
//! nothing else), and the client gets the same value back.

use std::fmt;

use super::server::error_header;
use crate::frame::{FrameHeader, FrameKind, StatusCode};

/// A failed call.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Status {
    /// No service with this id on the server.
    UnknownService(u32),
    /// The service has no method with this id.
    UnknownMethod {
        /// The service addressed.
        service_id: u32,
        /// The method asked for.
        method_id: u32,
    },
    /// The payload could not be decoded or is semantically invalid.
    BadRequest(String),
    /// The handler failed.
    Internal(String),
    /// Shed before running: queue full, too many in flight.
    Overloaded,
    /// The request's deadline passed before it completed.
    DeadlineExceeded,
    /// The client sent a Cancel for this request.
    Cancelled,
    /// The service ran the call and answered with its own error, as text the caller may show
    /// as is (a KV store's `WRONGTYPE ...`): an outcome of the request, not a fault of the
    /// request (`BadRequest`) or of the server (`Internal`).
    Failed(String),
    /// What the call named does not exist.
    NotFound(String),
    /// What the call would create exists already.
    AlreadyExists(String),
    /// The caller may not do this.
    PermissionDenied(String),
    /// The system is not in the state the call needs (e.g. a directory not empty).
    FailedPrecondition(String),
    /// Aborted by a concurrency conflict; the caller may retry the whole sequence.
    Aborted(String),
    /// Past the valid range (e.g. reading past the end).
    OutOfRange(String),
    /// Not available now (a dependency down, shutting down); the caller may retry.
    Unavailable(String),
    /// Unrecoverable data loss or corruption.
    DataLoss(String),
    /// The caller is not authenticated.
    Unauthenticated(String),
    /// The method exists but does not do this (yet).
    Unimplemented(String),
}

impl Status {
    /// The wire code.
    pub fn code(&self) -> StatusCode {
        match self {
            Self::UnknownService(_) => StatusCode::UnknownService,
            Self::UnknownMethod { .. } => StatusCode::UnknownMethod,
            Self::BadRequest(_) => StatusCode::BadRequest,
            Self::Internal(_) => StatusCode::Internal,
            Self::Overloaded => StatusCode::Overloaded,
            Self::DeadlineExceeded => StatusCode::DeadlineExceeded,
            Self::Cancelled => StatusCode::Cancelled,
            Self::Failed(_) => StatusCode::Failed,
            Self::NotFound(_) => StatusCode::NotFound,
            Self::AlreadyExists(_) => StatusCode::AlreadyExists,
            Self::PermissionDenied(_) => StatusCode::PermissionDenied,
            Self::FailedPrecondition(_) => StatusCode::FailedPrecondition,
            Self::Aborted(_) => StatusCode::Aborted,
            Self::OutOfRange(_) => StatusCode::OutOfRange,
            Self::Unavailable(_) => StatusCode::Unavailable,
            Self::DataLoss(_) => StatusCode::DataLoss,
            Self::Unauthenticated(_) => StatusCode::Unauthenticated,
            Self::Unimplemented(_) => StatusCode::Unimplemented,
        }
    }

    /// The text the service gave (every variant that carries one), exactly as it gave it.
    pub fn detail(&self) -> Option<&str> {
        match self {
            Self::BadRequest(s)
            | Self::Internal(s)
            | Self::Failed(s)
            | Self::NotFound(s)
            | Self::AlreadyExists(s)
            | Self::PermissionDenied(s)
            | Self::FailedPrecondition(s)
            | Self::Aborted(s)
            | Self::OutOfRange(s)
            | Self::Unavailable(s)
            | Self::DataLoss(s)
            | Self::Unauthenticated(s)
            | Self::Unimplemented(s) => Some(s),
            Self::UnknownService(_)
            | Self::UnknownMethod { .. }
            | Self::Overloaded
            | Self::DeadlineExceeded
            | Self::Cancelled => None,
        }
    }

    /// The status of wire code `code` with the text `text` (dropped by the variants that carry
    /// none; the ids of `UnknownService`/`UnknownMethod` come from `service_id`/`method_id`).
    /// `StatusCode::Ok` is no failure: a peer that sends it as one gets `Internal`.
    pub fn from_code(code: StatusCode, text: String, service_id: u32, method_id: u32) -> Status {
        match code {
            StatusCode::UnknownService => Status::UnknownService(service_id),
            StatusCode::UnknownMethod => Status::UnknownMethod {
                service_id,
                method_id,
            },
            StatusCode::BadRequest => Status::BadRequest(text),
            StatusCode::Internal => Status::Internal(text),
            StatusCode::Overloaded => Status::Overloaded,
            StatusCode::DeadlineExceeded => Status::DeadlineExceeded,
            StatusCode::Cancelled => Status::Cancelled,
            StatusCode::Failed => Status::Failed(text),
            StatusCode::NotFound => Status::NotFound(text),
            StatusCode::AlreadyExists => Status::AlreadyExists(text),
            StatusCode::PermissionDenied => Status::PermissionDenied(text),
            StatusCode::FailedPrecondition => Status::FailedPrecondition(text),
            StatusCode::Aborted => Status::Aborted(text),
            StatusCode::OutOfRange => Status::OutOfRange(text),
            StatusCode::Unavailable => Status::Unavailable(text),
            StatusCode::DataLoss => Status::DataLoss(text),
            StatusCode::Unauthenticated => Status::Unauthenticated(text),
            StatusCode::Unimplemented => Status::Unimplemented(text),
            StatusCode::Ok => Status::Internal("error reply carried status ok".into()),
        }
    }

    /// The Error reply for `request`: this status's code, and its detail as the message.
    pub fn to_header(&self, request: &FrameHeader) -> FrameHeader {
        error_header(request, self.code(), self.detail().unwrap_or(""))
    }

    /// The status an Error frame carries (`None` for a successful Response). An Error frame
    /// claiming `Ok` is a peer bug; the call still fails, as `Internal`.
    pub fn from_reply(header: &FrameHeader) -> Option<Status> {
        if header.kind == FrameKind::Response && header.status.is_ok() {
            return None;
        }
        Some(Status::from_code(
            header.status,
            header.error_message.clone().unwrap_or_default(),
            header.service_id,
            header.method_id,
        ))
    }
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::UnknownService(id) => write!(f, "unknown service {id}"),
            Self::UnknownMethod {
                service_id,
                method_id,
            } => write!(f, "unknown method {method_id} of service {service_id}"),
            Self::BadRequest(why) => write!(f, "bad request: {why}"),
            Self::Internal(why) => write!(f, "internal error: {why}"),
            Self::Overloaded => f.write_str("server overloaded"),
            Self::DeadlineExceeded => f.write_str("deadline exceeded"),
            Self::Cancelled => f.write_str("cancelled"),
            Self::Failed(why) => f.write_str(why),
            Self::NotFound(why)
            | Self::AlreadyExists(why)
            | Self::PermissionDenied(why)
            | Self::FailedPrecondition(why)
            | Self::Aborted(why)
            | Self::OutOfRange(why)
            | Self::Unavailable(why)
            | Self::DataLoss(why)
            | Self::Unauthenticated(why)
            | Self::Unimplemented(why) => write!(f, "{}: {why}", self.code()),
        }
    }
}

impl std::error::Error for Status {}
