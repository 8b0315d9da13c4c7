//! Where replies go: every client-facing request waiter (a RESP connection, one binary call)
//! registers as a [`ReplySink`] on its shard and is addressed by a [`SinkKey`], so a reply can
//! find it from another shard's message or from the durability gate without holding a pointer
//! that crosses threads.

use std::collections::HashMap;
use std::rc::Rc;

use foldhash::fast::RandomState;
use slab::Slab;

use crate::clients::ClientLine;
use crate::info::ServerInfo;
use crate::reply::Reply;
use crate::routing::Merger;

/// A registered sink on its shard: slab index plus a generation, so a reply for a sink that
/// went away never reaches the one that reused its slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct SinkKey {
    index: u32,
    generation: u32,
}

impl SinkKey {
    /// The key as one number (what the client directory keeps).
    pub(crate) fn pack(self) -> u64 {
        u64::from(self.index) << 32 | u64::from(self.generation)
    }

    pub(crate) fn unpack(packed: u64) -> SinkKey {
        SinkKey {
            index: (packed >> 32) as u32,
            generation: packed as u32,
        }
    }

    #[cfg(test)]
    pub(crate) fn for_test(index: u32, generation: u32) -> SinkKey {
        SinkKey { index, generation }
    }
}

/// Which part of a request a reply answers: the whole request, or part `i` of a fan-out.
pub(crate) type Part = Option<u32>;

/// Where the reply to one command (or one part of a fanned-out command) must go.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Origin {
    pub shard: usize,
    pub sink: SinkKey,
    pub seq: u64,
    pub part: Part,
}

pub(crate) trait ReplySink {
    /// The reply (or a part reply) for request `seq`. Called on the sink's shard, never while
    /// the sink itself is running (the glue keeps no borrow across an await).
    fn deliver(&self, seq: u64, part: Part, reply: Reply);

    /// A Pub/Sub message (at `now_ms`), outside the request/reply order. Only RESP
    /// connections subscribe, so the others never get one.
    fn push(&self, _message: Reply, _now_ms: u64) {}

    /// A shard channel's message: pushed like [`Self::push`] while the connection is still
    /// subscribed to `channel`.
    fn push_shard_message(&self, _channel: &bytes::Bytes, _message: Reply, _now_ms: u64) {}

    /// This client's CLIENT LIST line at `now_ms`. `None` for sinks that are not RESP
    /// connections, for a killed connection, and for the connection whose turn is running
    /// (the one asking: its session answers for itself).
    fn client_line(&self, _now_ms: u64) -> Option<ClientLine> {
        None
    }

    /// The connection's memory (INFO's `mem_clients_normal`); 0 for sinks that are not RESP
    /// connections.
    fn memory(&self) -> usize {
        0
    }

    /// CLIENT KILL: the connection closes at its next turn, which this wakes.
    fn kill(&self) {}

    /// The users changed: whether this connection must close (see `session/acl.rs`).
    fn acl_revoked(&self) -> bool {
        false
    }

    /// Client tracking's message for this connection (only RESP connections track).
    fn tracking(&self, _event: super::tracking::TrackingEvent) {}

    /// Replication: bytes written to the connection as they are (a replica's stream),
    /// after the replies already queued. Returns the bytes not yet sent, or `None` if the
    /// connection is gone (only RESP connections become replicas).
    fn push_raw(&self, _bytes: &[u8]) -> Option<usize> {
        None
    }

    /// The connection became a replica (PSYNC or SYNC).
    fn set_replica(&self) {}

    /// The shard's sweep, for a connection that listed itself as waiting with buffers
    /// ([`super::shard::Shard::list_idle`]): frees them if it stayed idle; `true` keeps it
    /// listed.
    fn idle_sweep(&self) -> bool {
        false
    }
}

#[derive(Default)]
pub(crate) struct SinkRegistry {
    sinks: Slab<(u32, Rc<dyn ReplySink>)>,
    next_generation: u32,
}

impl SinkRegistry {
    pub fn insert(&mut self, sink: Rc<dyn ReplySink>) -> SinkKey {
        self.next_generation = self.next_generation.wrapping_add(1);
        let generation = self.next_generation;
        let index = self.sinks.insert((generation, sink)) as u32;
        SinkKey { index, generation }
    }

    pub fn remove(&mut self, key: SinkKey) {
        if self.get(key).is_some() {
            self.sinks.remove(key.index as usize);
        }
    }

    /// Every registered sink with its key (cloned out, so callers may register or remove
    /// sinks meanwhile).
    pub fn all(&self) -> Vec<(SinkKey, Rc<dyn ReplySink>)> {
        self.sinks
            .iter()
            .map(|(index, (generation, sink))| {
                let key = SinkKey {
                    index: index as u32,
                    generation: *generation,
                };
                (key, sink.clone())
            })
            .collect()
    }

    pub fn get(&self, key: SinkKey) -> Option<Rc<dyn ReplySink>> {
        match self.sinks.get(key.index as usize) {
            Some((generation, sink)) if *generation == key.generation => Some(sink.clone()),
            _ => None,
        }
    }
}

/// The fanned-out requests of one sink whose parts are still arriving: boxed, and only
/// while some are (every connection has one, most never fan out).
#[derive(Default)]
pub(crate) struct Merges {
    // Boxed on purpose: the empty map itself (40 B) would sit in every connection's state.
    #[allow(clippy::box_collection)]
    pending: Option<Box<HashMap<u64, Merger, RandomState>>>,
}

impl Merges {
    pub fn start(&mut self, seq: u64, merger: Merger) {
        self.pending.get_or_insert_default().insert(seq, merger);
    }

    /// Feeds one reply; returns the client's reply once request `seq` is complete. A merge
    /// that fails (a glue bug, never client input) becomes an error reply.
    pub fn accept(
        &mut self,
        seq: u64,
        part: Part,
        reply: Reply,
        server: impl FnOnce() -> ServerInfo,
    ) -> Option<Reply> {
        let Some(part) = part else {
            return Some(reply);
        };
        let Some(merger) = self.pending.as_mut().and_then(|p| p.get_mut(&seq)) else {
            tracing::error!(
                seq,
                part,
                "part reply for a request with no merge in progress"
            );
            return None;
        };
        if let Err(error) = merger.accept(part as usize, reply) {
            tracing::error!(seq, %error, "bad part reply");
        }
        if !merger.is_complete() {
            return None;
        }
        let pending = self.pending.as_mut()?;
        let merger = pending.remove(&seq)?;
        if pending.is_empty() {
            self.pending = None;
        }
        Some(merger.finish(&server()).unwrap_or_else(|error| {
            tracing::error!(seq, %error, "merging part replies failed");
            Reply::error(format!("ERR internal error: {error}"))
        }))
    }
}

/// Distinct keys of sinks that are never delivered to, for tests of the structures keyed by
/// them (the watch registry, the shard lock, the Pub/Sub registry).
#[cfg(test)]
pub(crate) fn test_keys(n: usize) -> Vec<SinkKey> {
    struct Nobody;
    impl ReplySink for Nobody {
        fn deliver(&self, _: u64, _: Part, _: Reply) {}
    }
    let mut registry = SinkRegistry::default();
    (0..n).map(|_| registry.insert(Rc::new(Nobody))).collect()
}

#[cfg(test)]
mod tests {
    use std::cell::RefCell;

    use bytes::Bytes;

    use super::*;
    use crate::command::Command;
    use crate::routing::{route, Route};

    #[derive(Default)]
    struct Recorder(RefCell<Vec<(u64, Part)>>);

    impl ReplySink for Recorder {
        fn deliver(&self, seq: u64, part: Part, _reply: Reply) {
            self.0.borrow_mut().push((seq, part));
        }
    }

    #[test]
    fn a_reused_slot_does_not_get_the_old_sinks_replies() {
        let mut registry = SinkRegistry::default();
        let old = registry.insert(Rc::new(Recorder::default()));
        registry.remove(old);
        let new = registry.insert(Rc::new(Recorder::default()));
        assert_eq!(old.index, new.index, "the slab reuses the slot");
        assert!(registry.get(old).is_none());
        assert!(registry.get(new).is_some());
        // Removing with a stale key leaves the new sink alone.
        registry.remove(old);
        assert!(registry.get(new).is_some());
    }

    #[test]
    fn merges_complete_when_every_part_arrived() {
        let keys: Vec<Bytes> = (0..20).map(|i| Bytes::from(format!("k{i}"))).collect();
        let Route::FanOut(fan_out) = route(Command::Del(keys), 3) else {
            panic!("20 keys over 3 shards fan out");
        };
        let parts = fan_out.parts.len();
        let mut merges = Merges::default();
        merges.start(7, fan_out.merger);
        for part in 0..parts - 1 {
            let reply = merges.accept(7, Some(part as u32), Reply::Integer(1), ServerInfo::default);
            assert_eq!(reply, None);
        }
        let last = merges.accept(
            7,
            Some(parts as u32 - 1),
            Reply::Integer(2),
            ServerInfo::default,
        );
        assert_eq!(last, Some(Reply::Integer(parts as i64 + 1)));
        assert!(merges.pending.is_none(), "the box goes with the last merge");

        // A whole reply needs no merge; a stray part is dropped, not a panic.
        assert_eq!(
            merges.accept(8, None, Reply::ok(), ServerInfo::default),
            Some(Reply::ok())
        );
        assert_eq!(
            merges.accept(9, Some(0), Reply::ok(), ServerInfo::default),
            None
        );
    }
}
