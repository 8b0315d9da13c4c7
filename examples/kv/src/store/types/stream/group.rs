//! Consumer groups: the last delivered ID, the entries-read counter, the pending entries
//! list (PEL: who was delivered what, when, how often) and the consumers, each with the
//! IDs pending for it. Sans-I/O bookkeeping: the commands decide when; times are given.

use std::collections::{BTreeMap, BTreeSet};

use bytes::Bytes;

use super::id::StreamId;

/// A delivered, not yet acknowledged entry (Redis's `streamNACK`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Nack {
    pub consumer: Bytes,
    /// Unix ms of the last delivery.
    pub delivery_time: u64,
    pub delivery_count: u64,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Consumer {
    /// Unix ms of the consumer's last read or claim attempt.
    pub seen_time: u64,
    pub pending: BTreeSet<StreamId>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Group {
    pub last_id: StreamId,
    /// Entries read by the group (-1: unknown, Redis's `SCG_INVALID_ENTRIES_READ`).
    pub entries_read: i64,
    pub pel: BTreeMap<StreamId, Nack>,
    pub consumers: BTreeMap<Bytes, Consumer>,
}

/// Per pending entry: its slots in the group's and the consumer's trees.
const NACK_COST: usize = 16 + 40 + 16;

impl Group {
    pub fn new(last_id: StreamId, entries_read: i64) -> Group {
        Group {
            last_id,
            entries_read,
            ..Group::default()
        }
    }

    pub fn payload_len(&self) -> usize {
        let consumers: usize = self.consumers.keys().map(|name| name.len() + 48).sum();
        self.pel.len() * NACK_COST + consumers
    }

    /// Creates consumer `name` seen at `now`; false if it exists.
    pub fn create_consumer(&mut self, name: &[u8], now: u64) -> bool {
        if self.consumers.contains_key(name) {
            return false;
        }
        self.consumers.insert(
            Bytes::copy_from_slice(name),
            Consumer {
                seen_time: now,
                pending: BTreeSet::new(),
            },
        );
        true
    }

    /// Looks consumer `name` up, refreshing its seen time (`streamLookupConsumer`), creating
    /// it when missing; returns whether it was created.
    pub fn touch_consumer(&mut self, name: &[u8], now: u64) -> bool {
        match self.consumers.get_mut(name) {
            Some(consumer) => {
                consumer.seen_time = now;
                false
            }
            None => self.create_consumer(name, now),
        }
    }

    /// Deletes consumer `name` and its pending entries; how many it had.
    pub fn delete_consumer(&mut self, name: &[u8]) -> Option<usize> {
        let consumer = self.consumers.remove(name)?;
        for id in &consumer.pending {
            self.pel.remove(id);
        }
        Some(consumer.pending.len())
    }

    /// Acknowledges `id`; whether it was pending.
    pub fn ack(&mut self, id: StreamId) -> bool {
        let Some(nack) = self.pel.remove(&id) else {
            return false;
        };
        if let Some(consumer) = self.consumers.get_mut(&nack.consumer) {
            consumer.pending.remove(&id);
        }
        true
    }

    /// Delivers `id` to `consumer` (which exists) at `now` from a new read: a new pending
    /// entry, or one taken over from whoever had it, delivered once (as Redis's
    /// `streamReplyWithRange`).
    pub fn deliver_new(&mut self, id: StreamId, consumer: &Bytes, now: u64) -> &Nack {
        if let Some(old) = self.pel.get(&id).map(|nack| nack.consumer.clone()) {
            if let Some(owner) = self.consumers.get_mut(&old) {
                owner.pending.remove(&id);
            }
        }
        self.pel.insert(
            id,
            Nack {
                consumer: consumer.clone(),
                delivery_time: now,
                delivery_count: 1,
            },
        );
        if let Some(owner) = self.consumers.get_mut(consumer) {
            owner.pending.insert(id);
        }
        &self.pel[&id]
    }

    /// Gives pending `id` to `consumer` (which exists) with the delivery time and count set;
    /// creates the pending entry if missing (XCLAIM FORCE).
    pub fn assign(&mut self, id: StreamId, consumer: &Bytes, time: u64, count: u64) -> &Nack {
        if let Some(nack) = self.pel.get(&id) {
            if nack.consumer != *consumer {
                let old = nack.consumer.clone();
                if let Some(owner) = self.consumers.get_mut(&old) {
                    owner.pending.remove(&id);
                }
            }
        }
        self.pel.insert(
            id,
            Nack {
                consumer: consumer.clone(),
                delivery_time: time,
                delivery_count: count,
            },
        );
        if let Some(owner) = self.consumers.get_mut(consumer) {
            owner.pending.insert(id);
        }
        &self.pel[&id]
    }

    /// Moves the group's last delivered ID forward for a read of `id` (entries-read as
    /// Redis counts it: exact while no deletion lies after it, estimated otherwise).
    pub fn advance(&mut self, id: StreamId, stream: &super::model::Stream) {
        if id <= self.last_id {
            return;
        }
        if self.entries_read >= 0 && !stream.range_has_tombstones(id) {
            self.entries_read += 1;
        } else if stream.entries_added > 0 {
            self.entries_read = stream.entries_read_at(id).map_or(-1, |n| n as i64);
        }
        self.last_id = id;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(ms: u64) -> StreamId {
        StreamId::new(ms, 0)
    }

    #[test]
    fn delivery_claim_and_ack_keep_both_pels_in_step() {
        let mut group = Group::new(StreamId::MIN, 0);
        let (alice, bob) = (Bytes::from("alice"), Bytes::from("bob"));
        assert!(group.touch_consumer(b"alice", 10));
        assert!(!group.touch_consumer(b"alice", 20));
        assert_eq!(group.consumers[&alice].seen_time, 20);
        group.deliver_new(id(1), &alice, 20);
        group.deliver_new(id(2), &alice, 20);
        group.create_consumer(b"bob", 30);
        let nack = group.assign(id(1), &bob, 30, 5).clone();
        assert_eq!((nack.consumer, nack.delivery_count), (bob.clone(), 5));
        assert_eq!(group.consumers[&alice].pending.len(), 1);
        assert_eq!(group.consumers[&bob].pending.len(), 1);
        // A new read of a pending entry moves it and counts one delivery.
        group.deliver_new(id(1), &alice, 40);
        assert!(group.consumers[&bob].pending.is_empty());
        assert_eq!(group.pel[&id(1)].delivery_count, 1);
        assert!(group.ack(id(1)) && !group.ack(id(1)));
        assert_eq!(group.delete_consumer(b"alice"), Some(1));
        assert!(group.pel.is_empty());
        assert_eq!(group.delete_consumer(b"alice"), None);
    }
}
