//! Helpers for the server side of a call and for forming Request headers.
//! Both directions share one convention for deadlines: the wire carries the
//! remaining budget at send time, each side converts to/from its own `Instant`.

use std::time::Instant;

use crate::frame::{FrameHeader, FrameKind, StatusCode};

/// Error messages are cut to this many bytes (at a char boundary) so an Error
/// header always fits the default 1 KiB header limit.
pub const MAX_ERROR_MESSAGE_LEN: usize = 512;

/// A Request header whose deadline budget is `deadline - now` (zero if the
/// deadline already passed: the server will reject it as expired).
pub fn request_header(
    service_id: u32,
    method_id: u32,
    correlation_id: u64,
    deadline: Option<Instant>,
    now: Instant,
) -> FrameHeader {
    FrameHeader {
        deadline: deadline.map(|at| at.saturating_duration_since(now)),
        ..FrameHeader::request(service_id, method_id, correlation_id)
    }
}

/// The success reply to `request`: same service, method and correlation id.
pub fn response_header(request: &FrameHeader) -> FrameHeader {
    FrameHeader {
        kind: FrameKind::Response,
        service_id: request.service_id,
        method_id: request.method_id,
        correlation_id: request.correlation_id,
        status: StatusCode::Ok,
        deadline: None,
        error_message: None,
    }
}

/// The failure reply to `request`. `StatusCode::Ok` is not a failure and is
/// sent as `Internal` so the client cannot mistake the reply for success.
pub fn error_header(request: &FrameHeader, status: StatusCode, message: &str) -> FrameHeader {
    let status = if status.is_ok() {
        StatusCode::Internal
    } else {
        status
    };
    FrameHeader {
        kind: FrameKind::Error,
        status,
        error_message: (!message.is_empty()).then(|| truncate_message(message).to_owned()),
        ..response_header(request)
    }
}

/// The instant by which the server should answer `request`, anchored at the
/// time it was received. `None` if the request has no deadline (or one so far
/// away that `Instant` cannot represent it).
pub fn request_deadline(request: &FrameHeader, received_at: Instant) -> Option<Instant> {
    request
        .deadline
        .and_then(|budget| received_at.checked_add(budget))
}

/// `Err(DeadlineExceeded)` once `now` has reached the deadline: work started
/// after that point cannot be used by the client.
pub fn check_deadline(deadline: Option<Instant>, now: Instant) -> Result<(), StatusCode> {
    match deadline {
        Some(at) if now >= at => Err(StatusCode::DeadlineExceeded),
        _ => Ok(()),
    }
}

pub(crate) fn truncate_message(message: &str) -> &str {
    if message.len() <= MAX_ERROR_MESSAGE_LEN {
        return message;
    }
    let mut end = MAX_ERROR_MESSAGE_LEN;
    while !message.is_char_boundary(end) {
        end -= 1;
    }
    &message[..end]
}
