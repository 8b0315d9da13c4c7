use std::fmt;

use crate::frame::FrameKind;

/// The in-flight window is full; the caller's token is handed back so it can
/// wait for a completion and retry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WindowFull<T>(pub T);

impl<T> fmt::Display for WindowFull<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("in-flight call window is full")
    }
}

impl<T: fmt::Debug> std::error::Error for WindowFull<T> {}

/// A frame the client cannot match to a pending call. Not fatal by itself:
/// typically a late reply to a call that already expired or was cancelled, so
/// the caller usually logs and drops the frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ResponseError {
    /// No pending call has this correlation id.
    UnknownCorrelationId(u64),
    /// A Request or Cancel arrived where only Response/Error are valid.
    NotAResponse {
        /// What arrived instead.
        kind: FrameKind,
        /// The frame's correlation id.
        correlation_id: u64,
    },
}

impl fmt::Display for ResponseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::UnknownCorrelationId(id) => {
                write!(f, "reply for unknown correlation id {id}")
            }
            Self::NotAResponse {
                kind,
                correlation_id,
            } => write!(
                f,
                "{kind:?} frame (correlation id {correlation_id}) received by a client"
            ),
        }
    }
}

impl std::error::Error for ResponseError {}
