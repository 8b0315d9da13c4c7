use std::collections::VecDeque;

use super::resp3::Encoding;
use super::SessionError;
use crate::reply::Reply;

/// Reorder buffer: one slot per parsed request, filled in any order, drained in order.
#[derive(Debug, Default)]
pub(super) struct ReplyQueue {
    /// Sequence number of `slots[0]`.
    first_seq: u64,
    slots: VecDeque<(Encoding, Option<Reply>)>,
}

impl ReplyQueue {
    /// A slot for the next reply, to be written with `encoding`.
    pub fn push_pending(&mut self, encoding: Encoding) -> u64 {
        self.slots.push_back((encoding, None));
        self.first_seq + self.slots.len() as u64 - 1
    }

    /// Sets how reply `seq` is written (once its request is parsed).
    pub fn set_encoding(&mut self, seq: u64, encoding: Encoding) {
        if let Some(slot) = self.slot(seq) {
            slot.0 = encoding;
        }
    }

    fn slot(&mut self, seq: u64) -> Option<&mut (Encoding, Option<Reply>)> {
        let index = usize::try_from(seq.checked_sub(self.first_seq)?).ok()?;
        self.slots.get_mut(index)
    }

    pub fn fill(&mut self, seq: u64, reply: Reply) -> Result<(), SessionError> {
        let slot = self.slot(seq).ok_or(SessionError::UnknownSequence(seq))?;
        if slot.1.is_some() {
            return Err(SessionError::AlreadyAnswered(seq));
        }
        slot.1 = Some(reply);
        Ok(())
    }

    /// The oldest reply, if it has arrived.
    pub fn pop_ready(&mut self) -> Option<(u64, Encoding, Reply)> {
        if !matches!(self.slots.front(), Some((_, Some(_)))) {
            return None;
        }
        let (encoding, reply) = self.slots.pop_front()?;
        let seq = self.first_seq;
        self.first_seq += 1;
        Some((seq, encoding, reply?))
    }

    /// Frees the slots' memory when no reply is owed.
    pub fn release_if_empty(&mut self) {
        if self.slots.is_empty() && self.slots.capacity() > 0 {
            self.slots = VecDeque::new();
        }
    }

    pub fn len(&self) -> usize {
        self.slots.len()
    }
}
