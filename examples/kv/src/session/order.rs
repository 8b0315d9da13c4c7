use std::collections::VecDeque;

use super::calls::Call;
use super::resp3::Encoding;
use super::SessionError;
use crate::reply::Reply;

/// One request's place in the reply order.
#[derive(Debug)]
pub(super) struct Slot {
    pub encoding: Encoding,
    pub reply: Option<Reply>,
    /// What the request was, for the statistics and SLOWLOG (see `calls.rs`).
    pub call: Call,
    /// CLIENT REPLY OFF or SKIP: the reply is not written.
    pub silent: bool,
}

/// Reorder buffer: one slot per parsed request, filled in any order, drained in order.
#[derive(Debug, Default)]
pub(super) struct ReplyQueue {
    /// Sequence number of `slots[0]`.
    first_seq: u64,
    slots: VecDeque<Slot>,
}

impl ReplyQueue {
    /// A slot for the next reply, to be written with `encoding`.
    pub fn push_pending(&mut self, encoding: Encoding) -> u64 {
        self.push_call(encoding, Call::default(), false)
    }

    /// A slot for a request's reply, with its accounting and whether it is silent.
    pub fn push_call(&mut self, encoding: Encoding, call: Call, silent: bool) -> u64 {
        self.slots.push_back(Slot {
            encoding,
            reply: None,
            call,
            silent,
        });
        self.first_seq + self.slots.len() as u64 - 1
    }

    /// Sets how reply `seq` is written (once its request is parsed).
    pub fn set_encoding(&mut self, seq: u64, encoding: Encoding) {
        if let Some(slot) = self.slot(seq) {
            slot.encoding = encoding;
        }
    }

    /// The slot of request `seq`, while its reply is owed.
    pub fn slot(&mut self, seq: u64) -> Option<&mut Slot> {
        let index = usize::try_from(seq.checked_sub(self.first_seq)?).ok()?;
        self.slots.get_mut(index)
    }

    pub fn fill(&mut self, seq: u64, reply: Reply) -> Result<(), SessionError> {
        let slot = self.slot(seq).ok_or(SessionError::UnknownSequence(seq))?;
        if slot.reply.is_some() {
            return Err(SessionError::AlreadyAnswered(seq));
        }
        slot.reply = Some(reply);
        Ok(())
    }

    /// [`Self::fill`], except that the reply of the oldest request owed (nothing waits
    /// before it: the common case) is not stored: its slot goes at once and the reply comes
    /// back, with how it is written (`None`: not at all), to be written now. Stored and
    /// popped again, it was moved twice more, with the whole slot.
    #[inline]
    pub fn fill_front(
        &mut self,
        seq: u64,
        reply: Reply,
    ) -> Result<Option<(Option<Encoding>, Reply)>, SessionError> {
        let front = match self.slots.front() {
            Some(slot) if seq == self.first_seq => slot,
            _ => return self.fill(seq, reply).map(|()| None),
        };
        if front.reply.is_some() {
            return Err(SessionError::AlreadyAnswered(seq));
        }
        let encoding = (!front.silent).then(|| front.encoding.clone());
        self.slots.pop_front();
        self.first_seq += 1;
        Ok(Some((encoding, reply)))
    }

    /// The oldest reply, if it has arrived: its sequence number, how it is written (`None`:
    /// not at all) and the reply.
    pub fn pop_ready(&mut self) -> Option<(u64, Option<Encoding>, Reply)> {
        if !matches!(self.slots.front(), Some(slot) if slot.reply.is_some()) {
            return None;
        }
        let slot = self.slots.pop_front()?;
        let seq = self.first_seq;
        self.first_seq += 1;
        let encoding = (!slot.silent).then_some(slot.encoding);
        Some((seq, encoding, slot.reply?))
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

    /// Slots allocated (0 once released).
    pub fn capacity(&self) -> usize {
        self.slots.capacity()
    }
}
