//! Pub/Sub on a shard: the registry of this shard's subscribed connections (mirrored from
//! their sessions), PUBLISH's delivery to them and PUBSUB's answers about them. A PUBLISH
//! goes to every shard (the reply adds their counts); it travels the ordinary forwarding
//! lanes, so the messages one connection publishes reach each subscriber in order.
//!
//! Shard channels are kept by the shard that owns their slot, with subscribers from every
//! shard: SPUBLISH runs there alone and sends each remote subscriber's message to its shard.

use std::collections::HashMap;

use bytes::Bytes;
use foldhash::fast::RandomState;

use super::forward::Work;
use super::notify::Note;
use super::shard::{now_ms, Shard};
use super::sink::{Origin, SinkKey};
use super::tracking::Reader;
use crate::command::{PubSubQuery, ShardPubSub};
use crate::glob::glob_match;
use crate::reply::Reply;
use crate::session::SubChange;

#[derive(Default)]
pub(crate) struct PubSubRegistry {
    channels: HashMap<Bytes, Vec<SinkKey>, RandomState>,
    patterns: HashMap<Bytes, Vec<SinkKey>, RandomState>,
    /// Each subscribed connection's channels, patterns and shard channels, to forget it
    /// when it closes.
    by_sink: HashMap<SinkKey, Vec<SubChange>, RandomState>,
    /// The shard channels this shard owns, and their subscribers on every shard.
    shard_channels: HashMap<Bytes, Vec<Reader>, RandomState>,
}

fn add(map: &mut HashMap<Bytes, Vec<SinkKey>, RandomState>, name: Bytes, sink: SinkKey) {
    let sinks = map.entry(name).or_default();
    if !sinks.contains(&sink) {
        sinks.push(sink);
    }
}

fn remove(map: &mut HashMap<Bytes, Vec<SinkKey>, RandomState>, name: &[u8], sink: SinkKey) {
    if let Some(sinks) = map.get_mut(name) {
        sinks.retain(|s| *s != sink);
        if sinks.is_empty() {
            map.remove(name);
        }
    }
}

impl PubSubRegistry {
    pub fn apply(&mut self, sink: SinkKey, change: SubChange) {
        let mine = self.by_sink.entry(sink).or_default();
        match &change {
            SubChange::Subscribe(name) => {
                add(&mut self.channels, name.clone(), sink);
                mine.push(change);
            }
            SubChange::PSubscribe(name) => {
                add(&mut self.patterns, name.clone(), sink);
                mine.push(change);
            }
            SubChange::Unsubscribe(name) => {
                remove(&mut self.channels, name, sink);
                mine.retain(|c| !matches!(c, SubChange::Subscribe(n) if n == name));
            }
            SubChange::PUnsubscribe(name) => {
                remove(&mut self.patterns, name, sink);
                mine.retain(|c| !matches!(c, SubChange::PSubscribe(n) if n == name));
            }
            // Registered on the channel's shard: only remembered here.
            SubChange::SSubscribe(_) => mine.push(change),
            SubChange::SUnsubscribe(name) => {
                mine.retain(|c| !matches!(c, SubChange::SSubscribe(n) if n == name));
            }
        }
        if mine.is_empty() {
            self.by_sink.remove(&sink);
        }
    }

    /// Connection `sink` closed: its shard channels (to unregister on their shards).
    pub fn forget(&mut self, sink: SinkKey) -> Vec<Bytes> {
        let mut shard_channels = Vec::new();
        for change in self.by_sink.remove(&sink).unwrap_or_default() {
            match change {
                SubChange::Subscribe(name) => remove(&mut self.channels, &name, sink),
                SubChange::PSubscribe(name) => remove(&mut self.patterns, &name, sink),
                SubChange::SSubscribe(name) => shard_channels.push(name),
                _ => {}
            }
        }
        shard_channels
    }

    /// A connection of any shard subscribes to shard channels this shard owns.
    pub fn register_shard(&mut self, reader: Reader, channels: Vec<Bytes>) {
        for channel in channels {
            let readers = self.shard_channels.entry(channel).or_default();
            if !readers.contains(&reader) {
                readers.push(reader);
            }
        }
    }

    pub fn unregister_shard(&mut self, reader: Reader, channels: &[Bytes]) {
        for channel in channels {
            if let Some(readers) = self.shard_channels.get_mut(channel) {
                readers.retain(|r| *r != reader);
                if readers.is_empty() {
                    self.shard_channels.remove(channel);
                }
            }
        }
    }

    /// SPUBLISH's receivers.
    pub fn shard_subscribers(&self, channel: &[u8]) -> &[Reader] {
        self.shard_channels.get(channel).map_or(&[], Vec::as_slice)
    }

    /// Who gets `message` on `channel`, and what: `["message", channel, message]` for each
    /// channel subscriber, `["pmessage", pattern, channel, message]` for each matching pattern.
    pub fn deliveries(&self, channel: &Bytes, message: &Bytes) -> Vec<(SinkKey, Reply)> {
        let mut out = Vec::new();
        if let Some(sinks) = self.channels.get(channel) {
            let reply = Reply::Array(vec![
                Reply::Bulk(Bytes::from_static(b"message")),
                Reply::Bulk(channel.clone()),
                Reply::Bulk(message.clone()),
            ]);
            out.extend(sinks.iter().map(|&sink| (sink, reply.clone())));
        }
        for (pattern, sinks) in &self.patterns {
            if glob_match(pattern, channel, false) {
                let reply = Reply::Array(vec![
                    Reply::Bulk(Bytes::from_static(b"pmessage")),
                    Reply::Bulk(pattern.clone()),
                    Reply::Bulk(channel.clone()),
                    Reply::Bulk(message.clone()),
                ]);
                out.extend(sinks.iter().map(|&sink| (sink, reply.clone())));
            }
        }
        out
    }

    /// The channels, patterns and shard channels subscribed here (INFO's counts).
    pub fn names(&self) -> [Vec<Bytes>; 3] {
        [
            self.channels.keys().cloned().collect(),
            self.patterns.keys().cloned().collect(),
            self.shard_channels.keys().cloned().collect(),
        ]
    }

    /// This shard's part of a PUBSUB query (merged across shards by the router).
    pub fn query(&self, query: &PubSubQuery) -> Reply {
        match query {
            PubSubQuery::Channels(pattern) => names(self.channels.keys(), pattern.as_ref()),
            PubSubQuery::ShardChannels(pattern) => {
                names(self.shard_channels.keys(), pattern.as_ref())
            }
            PubSubQuery::NumSub(channels) => {
                counts(channels, |name| self.channels.get(name).map_or(0, Vec::len))
            }
            PubSubQuery::ShardNumSub(channels) => {
                counts(channels, |name| self.shard_subscribers(name).len())
            }
            PubSubQuery::NumPat => Reply::Array(
                self.patterns
                    .keys()
                    .map(|name| Reply::Bulk(name.clone()))
                    .collect(),
            ),
        }
    }
}

/// The names matching `pattern` (all without one).
fn names<'a>(names: impl Iterator<Item = &'a Bytes>, pattern: Option<&Bytes>) -> Reply {
    Reply::Array(
        names
            .filter(|name| pattern.is_none_or(|pattern| glob_match(pattern, name, false)))
            .map(|name| Reply::Bulk(name.clone()))
            .collect(),
    )
}

/// `[name, count]...` for each of `names`.
fn counts(names: &[Bytes], count: impl Fn(&Bytes) -> usize) -> Reply {
    Reply::Array(
        names
            .iter()
            .flat_map(|name| {
                [
                    Reply::Bulk(name.clone()),
                    Reply::Integer(count(name) as i64),
                ]
            })
            .collect(),
    )
}

impl Shard {
    /// PUBLISH's part on this shard: delivers to the subscribers here, returns how many.
    pub(crate) fn publish(&self, channel: &Bytes, message: &Bytes) -> Reply {
        let deliveries = self.pubsub.borrow().deliveries(channel, message);
        let count = deliveries.len();
        if count > 0 {
            let now = now_ms();
            for (sink, reply) in deliveries {
                if let Some(sink) = self.sink(sink) {
                    sink.push(reply, now);
                }
            }
        }
        Reply::Integer(count as i64)
    }

    /// A connection of this shard changed its subscriptions (see [`SubChange`]).
    pub(crate) fn apply_sub_change(&self, sink: SinkKey, change: SubChange) {
        let left = match &change {
            SubChange::SUnsubscribe(channel) => Some(channel.clone()),
            _ => None,
        };
        self.pubsub.borrow_mut().apply(sink, change);
        if let Some(channel) = left {
            // SUNSUBSCRIBE unregistered it already (a repeat is harmless); RESET did not.
            self.unregister_shard_channels(sink, vec![channel]);
        }
    }

    /// Connection `sink` of this shard closed: its subscriptions go, here and on the shards
    /// of its shard channels.
    pub(crate) fn forget_subscriber(&self, sink: SinkKey) {
        let shard_channels = self.pubsub.borrow_mut().forget(sink);
        if !shard_channels.is_empty() {
            self.unregister_shard_channels(sink, shard_channels);
        }
    }

    fn unregister_shard_channels(&self, sink: SinkKey, channels: Vec<Bytes>) {
        let mut by_owner: HashMap<usize, Vec<Bytes>> = HashMap::new();
        for channel in channels {
            let owner = crate::routing::shard_of(&channel, self.count);
            by_owner.entry(owner).or_default().push(channel);
        }
        let reader = (self.id, sink);
        for (owner, channels) in by_owner {
            if owner == self.id {
                self.pubsub.borrow_mut().unregister_shard(reader, &channels);
            } else {
                let note = Note::ShardUnsubscribe { reader, channels };
                self.forward.push_work(owner, Work::Note(note));
            }
        }
    }

    /// SPUBLISH and shard-channel registrations, on the channels' shard.
    pub(crate) fn shard_pubsub(&self, origin: Origin, request: ShardPubSub) -> Reply {
        match request {
            ShardPubSub::Register { channels, on } => {
                let reader = (origin.shard, origin.sink);
                let mut registry = self.pubsub.borrow_mut();
                if on {
                    registry.register_shard(reader, channels);
                } else {
                    registry.unregister_shard(reader, &channels);
                }
                Reply::ok()
            }
            ShardPubSub::Publish { channel, message } => {
                let readers = self.pubsub.borrow().shard_subscribers(&channel).to_vec();
                for &(shard, sink) in &readers {
                    if shard == self.id {
                        self.push_shard_message(sink, &channel, &message);
                    } else {
                        let note = Note::ShardMessage {
                            sink,
                            channel: channel.clone(),
                            message: message.clone(),
                        };
                        self.forward.push_work(shard, Work::Note(note));
                    }
                }
                Reply::Integer(readers.len() as i64)
            }
        }
    }

    /// `["smessage", channel, message]` for connection `sink` of this shard.
    pub(crate) fn push_shard_message(&self, sink: SinkKey, channel: &Bytes, message: &Bytes) {
        if let Some(sink) = self.sink(sink) {
            let reply = Reply::Array(vec![
                Reply::Bulk(Bytes::from_static(b"smessage")),
                Reply::Bulk(channel.clone()),
                Reply::Bulk(message.clone()),
            ]);
            sink.push_shard_message(channel, reply, now_ms());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::server::sink::test_keys;

    fn sinks(n: usize) -> Vec<SinkKey> {
        test_keys(n)
    }

    fn b(s: &str) -> Bytes {
        Bytes::copy_from_slice(s.as_bytes())
    }

    #[test]
    fn channels_and_patterns_deliver_and_forget() {
        let s = sinks(2);
        let mut reg = PubSubRegistry::default();
        reg.apply(s[0], SubChange::Subscribe(b("news")));
        reg.apply(s[1], SubChange::PSubscribe(b("n*")));
        reg.apply(s[1], SubChange::Subscribe(b("news")));
        let out = reg.deliveries(&b("news"), &b("hi"));
        assert_eq!(out.len(), 3);
        assert_eq!(reg.deliveries(&b("nope"), &b("hi")).len(), 1);
        assert_eq!(
            reg.query(&PubSubQuery::NumSub(vec![b("news"), b("x")])),
            Reply::Array(vec![
                Reply::Bulk(b("news")),
                Reply::Integer(2),
                Reply::Bulk(b("x")),
                Reply::Integer(0)
            ])
        );
        reg.apply(s[0], SubChange::Unsubscribe(b("news")));
        assert_eq!(reg.deliveries(&b("news"), &b("hi")).len(), 2);
        reg.forget(s[1]);
        assert!(reg.deliveries(&b("news"), &b("hi")).is_empty());
        assert!(reg.channels.is_empty() && reg.patterns.is_empty() && reg.by_sink.is_empty());
    }
}
