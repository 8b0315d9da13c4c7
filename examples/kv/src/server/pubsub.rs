//! Pub/Sub on a shard: the registry of this shard's subscribed connections (mirrored from
//! their sessions), PUBLISH's delivery to them and PUBSUB's answers about them. A PUBLISH
//! goes to every shard (the reply adds their counts); it travels the ordinary forwarding
//! lanes, so the messages one connection publishes reach each subscriber in order.

use std::collections::HashMap;

use bytes::Bytes;
use foldhash::fast::RandomState;

use super::shard::{now_ms, Shard};
use super::sink::SinkKey;
use crate::command::PubSubQuery;
use crate::glob::glob_match;
use crate::reply::Reply;
use crate::session::SubChange;

#[derive(Default)]
pub(crate) struct PubSubRegistry {
    channels: HashMap<Bytes, Vec<SinkKey>, RandomState>,
    patterns: HashMap<Bytes, Vec<SinkKey>, RandomState>,
    /// Each subscribed connection's channels and patterns, to forget it when it closes.
    by_sink: HashMap<SinkKey, Vec<SubChange>, RandomState>,
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
        }
        if mine.is_empty() {
            self.by_sink.remove(&sink);
        }
    }

    /// Connection `sink` closed.
    pub fn forget(&mut self, sink: SinkKey) {
        for change in self.by_sink.remove(&sink).unwrap_or_default() {
            match change {
                SubChange::Subscribe(name) => remove(&mut self.channels, &name, sink),
                SubChange::PSubscribe(name) => remove(&mut self.patterns, &name, sink),
                _ => {}
            }
        }
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
            Vec::new(),
        ]
    }

    /// This shard's part of a PUBSUB query (merged across shards by the router).
    pub fn query(&self, query: &PubSubQuery) -> Reply {
        match query {
            PubSubQuery::Channels(pattern) => Reply::Array(
                self.channels
                    .keys()
                    .filter(|name| {
                        pattern
                            .as_ref()
                            .is_none_or(|pattern| glob_match(pattern, name, false))
                    })
                    .map(|name| Reply::Bulk(name.clone()))
                    .collect(),
            ),
            PubSubQuery::NumSub(channels) => Reply::Array(
                channels
                    .iter()
                    .flat_map(|name| {
                        let count = self.channels.get(name).map_or(0, Vec::len);
                        [Reply::Bulk(name.clone()), Reply::Integer(count as i64)]
                    })
                    .collect(),
            ),
            PubSubQuery::NumPat => Reply::Array(
                self.patterns
                    .keys()
                    .map(|name| Reply::Bulk(name.clone()))
                    .collect(),
            ),
        }
    }
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
