//! Pub/Sub commands: the subscriptions are the connection's (the session keeps them, the
//! shard's registry mirrors them for delivery), PUBLISH and PUBSUB reach every shard.

use bytes::Bytes;

/// SUBSCRIBE, UNSUBSCRIBE, PSUBSCRIBE, PUNSUBSCRIBE: answered by the session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Subscription {
    Subscribe(Vec<Bytes>),
    /// No channel: every channel of the connection.
    Unsubscribe(Vec<Bytes>),
    PSubscribe(Vec<Bytes>),
    /// No pattern: every pattern of the connection.
    PUnsubscribe(Vec<Bytes>),
}

impl Subscription {
    pub fn name(&self) -> &'static str {
        match self {
            Subscription::Subscribe(_) => "subscribe",
            Subscription::Unsubscribe(_) => "unsubscribe",
            Subscription::PSubscribe(_) => "psubscribe",
            Subscription::PUnsubscribe(_) => "punsubscribe",
        }
    }
}

/// PUBSUB CHANNELS / NUMSUB / NUMPAT: every shard answers for its own connections.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PubSubQuery {
    /// Channels with at least one subscriber, optionally matching a glob pattern.
    Channels(Option<Bytes>),
    NumSub(Vec<Bytes>),
    NumPat,
}

impl PubSubQuery {
    pub fn name(&self) -> &'static str {
        match self {
            PubSubQuery::Channels(_) => "pubsub|channels",
            PubSubQuery::NumSub(_) => "pubsub|numsub",
            PubSubQuery::NumPat => "pubsub|numpat",
        }
    }
}
