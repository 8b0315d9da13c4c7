//! A shard held by one transaction: while it is held, everything else that would run on the
//! shard (other clients' commands, other transactions' lock requests) waits here in arrival
//! order, and runs in that order once the transaction lets go. Transactions take the shards
//! they touch in ascending order, so two of them never wait on each other (no cycle).
//!
//! Bound: what waits here is requests clients have already sent and not been answered for,
//! so it is bounded by every connection's backlog limit (`SessionConfig::max_backlog`) and
//! the mesh inboxes, not by anything this queue could let grow on its own.

use std::collections::VecDeque;

use crate::server::sink::SinkKey;

/// A transaction: its coordinator's shard and its sink there.
pub(crate) type TxnId = (usize, SinkKey);

pub(crate) struct ShardLock<T> {
    holder: Option<TxnId>,
    waiting: VecDeque<T>,
}

impl<T> Default for ShardLock<T> {
    fn default() -> Self {
        ShardLock {
            holder: None,
            waiting: VecDeque::new(),
        }
    }
}

impl<T> ShardLock<T> {
    pub fn is_held(&self) -> bool {
        self.holder.is_some()
    }

    pub fn holder(&self) -> Option<TxnId> {
        self.holder
    }

    /// Takes the shard for `txn` if it is free (a lock request taken from the waiting work
    /// takes it ahead of the work behind it, which is what arrival order means).
    pub fn try_hold(&mut self, txn: TxnId) -> bool {
        if self.holder.is_some() {
            return false;
        }
        self.holder = Some(txn);
        true
    }

    /// Work that must wait for the holder.
    pub fn defer(&mut self, item: T) {
        self.waiting.push_back(item);
    }

    /// `txn` lets go; `false` if it did not hold the shard.
    pub fn release(&mut self, txn: TxnId) -> bool {
        if self.holder != Some(txn) {
            return false;
        }
        self.holder = None;
        true
    }

    /// The next waiting work, while the shard is free.
    pub fn next_ready(&mut self) -> Option<T> {
        if self.holder.is_some() {
            return None;
        }
        self.waiting.pop_front()
    }

    pub fn waiting(&self) -> usize {
        self.waiting.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::server::sink::test_keys;

    fn ids(n: usize) -> Vec<TxnId> {
        test_keys(n).into_iter().enumerate().collect()
    }

    #[test]
    fn work_waits_in_order_while_held() {
        let t = ids(2);
        let mut lock = ShardLock::default();
        assert!(lock.try_hold(t[0]));
        assert!(!lock.try_hold(t[1]));
        lock.defer("a");
        lock.defer("b");
        assert_eq!(lock.next_ready(), None);
        assert!(!lock.release(t[1]), "only the holder releases");
        assert!(lock.release(t[0]));
        assert_eq!(lock.next_ready(), Some("a"));
        assert!(lock.try_hold(t[1]));
        assert_eq!(lock.next_ready(), None, "b waits for the new holder");
        assert_eq!(lock.waiting(), 1);
        assert!(lock.release(t[1]));
        assert_eq!(lock.next_ready(), Some("b"));
        assert_eq!(lock.next_ready(), None);
    }
}
