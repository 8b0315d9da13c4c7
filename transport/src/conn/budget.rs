//! The fairness budget, charged where the messages are: every frame transport's `recv` goes
//! through [`poll_charged`], so whoever reads a connection (a service, the client, the KV
//! store's binary protocol) gets its shard's fairness without doing anything.

use std::task::{Context, Poll};

use corewire_runtime::RoundBudget;

use super::TransportError;
use crate::frame::Frame;

/// One step of a budgeted `recv`: yield first if the round is spent; charge the frame handed
/// up (payload and attachment bytes); start a new round when the transport has to wait for
/// I/O (waiting gave the rest of the shard its turn anyway).
pub fn poll_charged(
    round: &mut RoundBudget,
    cx: &mut Context<'_>,
    poll_frame: impl FnOnce(&mut Context<'_>) -> Poll<Result<Option<Frame>, TransportError>>,
) -> Poll<Result<Option<Frame>, TransportError>> {
    if round.poll_proceed(cx).is_pending() {
        return Poll::Pending;
    }
    match poll_frame(cx) {
        Poll::Ready(Ok(Some(frame))) => {
            round.charge(frame.payload.len() + frame.attachment.len());
            Poll::Ready(Ok(Some(frame)))
        }
        Poll::Pending => {
            round.reset();
            Poll::Pending
        }
        other => other,
    }
}
