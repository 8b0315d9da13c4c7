use std::collections::VecDeque;

use super::SessionError;
use crate::reply::Reply;

/// Reorder buffer: one slot per parsed request, filled in any order, drained in order.
#[derive(Debug, Default)]
pub(super) struct ReplyQueue {
    /// Sequence number of `slots[0]`.
    first_seq: u64,
    slots: VecDeque<Option<Reply>>,
}

impl ReplyQueue {
    pub fn push_pending(&mut self) -> u64 {
        self.slots.push_back(None);
        self.first_seq + self.slots.len() as u64 - 1
    }

    pub fn fill(&mut self, seq: u64, reply: Reply) -> Result<(), SessionError> {
        let slot = seq
            .checked_sub(self.first_seq)
            .and_then(|index| self.slots.get_mut(usize::try_from(index).ok()?))
            .ok_or(SessionError::UnknownSequence(seq))?;
        if slot.is_some() {
            return Err(SessionError::AlreadyAnswered(seq));
        }
        *slot = Some(reply);
        Ok(())
    }

    /// The oldest reply, if it has arrived.
    pub fn pop_ready(&mut self) -> Option<(u64, Reply)> {
        if !matches!(self.slots.front(), Some(Some(_))) {
            return None;
        }
        let reply = self.slots.pop_front().flatten()?;
        let seq = self.first_seq;
        self.first_seq += 1;
        Some((seq, reply))
    }

    pub fn len(&self) -> usize {
        self.slots.len()
    }
}
