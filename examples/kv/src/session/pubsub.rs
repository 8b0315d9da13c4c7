//! The connection's Pub/Sub state (RESP2, Redis 7 semantics):
//!
//! - (P)SUBSCRIBE and (P)UNSUBSCRIBE are answered here, one confirmation per channel or
//!   pattern (`[kind, name, count]`, count = channels + patterns of the connection); the
//!   changes are queued for the glue, which mirrors them into the shard's registry (the one
//!   PUBLISH reaches) before anything else runs on the shard;
//! - S(UN)SUBSCRIBE too (count = shard channels), but a shard channel's subscribers are kept
//!   on the channel's shard: the session sends the (un)registration there, silently, and the
//!   confirmations follow it, so they are written once it is done;
//! - while subscribed, only (P)SUBSCRIBE, (P)UNSUBSCRIBE, PING (answered `[pong, message]`),
//!   QUIT and RESET are allowed;
//! - messages are pushed in order behind the replies already owed, and the output they fill
//!   is bounded like Redis's `client-output-buffer-limit pubsub 32mb 8mb 60`: past the hard
//!   limit, or above the soft one for longer than its time, the connection is dropped at once
//!   (its unsent output with it).

use std::collections::HashSet;

use bytes::Bytes;

use super::resp3::Shape;
use super::{Admission, Lifecycle, Session};
use crate::command::{Command, Subscription};
use crate::reply::Reply;

/// A subscription change the glue applies to the shard's registry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SubChange {
    Subscribe(Bytes),
    Unsubscribe(Bytes),
    PSubscribe(Bytes),
    PUnsubscribe(Bytes),
    /// A shard channel: the glue only remembers it (to unregister it at close); the
    /// registration itself went to the channel's shard as a request.
    SSubscribe(Bytes),
    /// A shard channel left (SUNSUBSCRIBE, RESET): the glue tells the channel's shard.
    SUnsubscribe(Bytes),
}

/// Redis's `client-output-buffer-limit` for one class of clients.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OutputLimit {
    /// Dropped at once past this many bytes of pending output (0: no limit).
    pub hard: usize,
    /// Dropped when above this for `soft_ms` (0: no soft limit).
    pub soft: usize,
    pub soft_ms: u64,
}

impl OutputLimit {
    /// Redis's default for Pub/Sub clients: `32mb 8mb 60`.
    pub const PUBSUB_DEFAULT: OutputLimit = OutputLimit {
        hard: 32 * 1024 * 1024,
        soft: 8 * 1024 * 1024,
        soft_ms: 60_000,
    };
}

/// Boxed, and only once the connection uses Pub/Sub: most connections never do, and every
/// byte of a connection's fixed state counts when there are many idle ones.
#[derive(Debug, Default)]
pub(super) struct PubSubState(Option<Box<Subscribed>>);

#[derive(Debug, Default)]
struct Subscribed {
    channels: HashSet<Bytes>,
    patterns: HashSet<Bytes>,
    shard_channels: HashSet<Bytes>,
    changes: Vec<SubChange>,
    /// Since when the output has been above the soft limit.
    above_soft_since: Option<u64>,
    /// The output limit was passed: the connection is dropped.
    killed: bool,
}

impl PubSubState {
    /// Whether `user`'s channel rules still allow every subscription.
    pub(super) fn permitted_by(&self, user: &crate::acl::User) -> bool {
        self.0.as_ref().is_none_or(|s| {
            user.permits_subscriptions(
                s.channels
                    .iter()
                    .chain(&s.shard_channels)
                    .map(|c| c.as_ref()),
                s.patterns.iter().map(|p| p.as_ref()),
            )
        })
    }

    pub(super) fn active(&self) -> bool {
        self.0.as_ref().is_some_and(|s| {
            !s.channels.is_empty() || !s.patterns.is_empty() || !s.shard_channels.is_empty()
        })
    }

    /// (channels, patterns, shard channels) subscribed to.
    pub(super) fn counts(&self) -> (usize, usize, usize) {
        self.0.as_ref().map_or((0, 0, 0), |s| {
            (s.channels.len(), s.patterns.len(), s.shard_channels.len())
        })
    }

    /// Whether a shard channel's message is still wanted (one already on its way when
    /// SUNSUBSCRIBE ran is dropped).
    pub(super) fn has_shard_channel(&self, channel: &[u8]) -> bool {
        self.0
            .as_ref()
            .is_some_and(|s| s.shard_channels.contains(channel))
    }

    fn killed(&self) -> bool {
        self.0.as_ref().is_some_and(|s| s.killed)
    }

    fn get(&mut self) -> &mut Subscribed {
        self.0.get_or_insert_with(Box::default)
    }
}

impl Subscribed {
    fn count(&self) -> i64 {
        (self.channels.len() + self.patterns.len()) as i64
    }
}

fn confirmation(kind: &'static str, name: Option<Bytes>, count: i64) -> Reply {
    Reply::Array(vec![
        Reply::Bulk(Bytes::from_static(kind.as_bytes())),
        name.map_or(Reply::NullBulk, Reply::Bulk),
        Reply::Integer(count),
    ])
}

/// The commands a subscribed RESP2 connection may send.
fn allowed_while_subscribed(name: &str) -> bool {
    matches!(
        name,
        "subscribe"
            | "unsubscribe"
            | "psubscribe"
            | "punsubscribe"
            | "ssubscribe"
            | "sunsubscribe"
            | "ping"
            | "quit"
            | "reset"
    )
}

impl Session {
    /// Subscription changes since the last call; the glue applies them to the shard's
    /// registry right away.
    pub fn take_pubsub_changes(&mut self) -> Vec<SubChange> {
        match self.pubsub.0.as_mut() {
            Some(state) => std::mem::take(&mut state.changes),
            None => Vec::new(),
        }
    }

    /// Whether the connection is subscribed to anything.
    pub fn is_subscribed(&self) -> bool {
        self.pubsub.active()
    }

    /// The output limit was passed: close the connection now, without writing what is left.
    /// Also after CLIENT KILL.
    pub fn is_killed(&self) -> bool {
        self.killed || self.pubsub.killed()
    }

    /// A published message for this connection (at `now_ms`), queued behind the replies
    /// already owed. Returns `false` if it made the connection pass its output limit (it is
    /// then killed: see [`Session::is_killed`]).
    pub fn push_message(&mut self, message: Reply, now_ms: u64) -> bool {
        if self.pubsub.killed() || self.lifecycle == Lifecycle::Closed {
            return !self.pubsub.killed();
        }
        let seq = self.replies.push_pending(self.encoding(Shape::Push));
        self.answer(seq, message);
        let limit = self.config.live.pubsub_output_limit();
        // Messages stuck behind an unanswered reply count too, at the backlog limit.
        let pending = self.output.len();
        let over_hard = (limit.hard > 0 && pending > limit.hard)
            || self.replies.len() > self.config.max_backlog.saturating_mul(16);
        let over_soft = limit.soft > 0 && pending > limit.soft;
        let state = self.pubsub.get();
        let since = if over_soft {
            *state.above_soft_since.get_or_insert(now_ms)
        } else {
            state.above_soft_since = None;
            now_ms
        };
        if over_hard || (over_soft && now_ms.saturating_sub(since) > limit.soft_ms) {
            state.killed = true;
            self.lifecycle = Lifecycle::Closed;
            self.output.clear();
            return false;
        }
        true
    }

    /// In subscribed mode, the error for a command that is not allowed (`name` as the table
    /// spells it).
    pub(super) fn refuse_while_subscribed(&self, name: &str) -> Option<Reply> {
        // RESP3 connections may run any command while subscribed.
        (!self.resp3 && self.pubsub.active() && !allowed_while_subscribed(name)).then(|| {
            Reply::error(format!(
                "ERR Can't execute '{name}': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / \
                 QUIT / RESET are allowed in this context"
            ))
        })
    }

    /// (P)SUBSCRIBE and (P)UNSUBSCRIBE: one confirmation per name, each its own reply.
    pub(super) fn subscription(&mut self, command: Subscription, seq: u64) -> Admission {
        let encoding = self.encoding(Shape::Push);
        self.replies.set_encoding(seq, encoding);
        let state = self.pubsub.get();
        let mut replies = Vec::new();
        // Shard channels (un)registered on their shards first.
        let mut register = None;
        match command {
            Subscription::Subscribe(channels) => {
                for channel in channels {
                    if state.channels.insert(channel.clone()) {
                        state.changes.push(SubChange::Subscribe(channel.clone()));
                    }
                    replies.push(confirmation("subscribe", Some(channel), state.count()));
                }
            }
            Subscription::PSubscribe(patterns) => {
                for pattern in patterns {
                    if state.patterns.insert(pattern.clone()) {
                        state.changes.push(SubChange::PSubscribe(pattern.clone()));
                    }
                    replies.push(confirmation("psubscribe", Some(pattern), state.count()));
                }
            }
            Subscription::Unsubscribe(channels) => {
                let channels = if channels.is_empty() {
                    sorted(&state.channels)
                } else {
                    channels
                };
                for channel in channels {
                    if state.channels.remove(&channel) {
                        state.changes.push(SubChange::Unsubscribe(channel.clone()));
                    }
                    replies.push(confirmation("unsubscribe", Some(channel), state.count()));
                }
                if replies.is_empty() {
                    replies.push(confirmation("unsubscribe", None, state.count()));
                }
            }
            Subscription::PUnsubscribe(patterns) => {
                let patterns = if patterns.is_empty() {
                    sorted(&state.patterns)
                } else {
                    patterns
                };
                for pattern in patterns {
                    if state.patterns.remove(&pattern) {
                        state.changes.push(SubChange::PUnsubscribe(pattern.clone()));
                    }
                    replies.push(confirmation("punsubscribe", Some(pattern), state.count()));
                }
                if replies.is_empty() {
                    replies.push(confirmation("punsubscribe", None, state.count()));
                }
            }
            Subscription::SSubscribe(channels) => {
                let mut added = Vec::new();
                for channel in channels {
                    if state.shard_channels.insert(channel.clone()) {
                        state.changes.push(SubChange::SSubscribe(channel.clone()));
                        added.push(channel.clone());
                    }
                    let count = state.shard_channels.len() as i64;
                    replies.push(confirmation("ssubscribe", Some(channel), count));
                }
                register = (!added.is_empty()).then_some((added, true));
            }
            Subscription::SUnsubscribe(channels) => {
                let channels = if channels.is_empty() {
                    sorted(&state.shard_channels)
                } else {
                    channels
                };
                let mut removed = Vec::new();
                for channel in channels {
                    if state.shard_channels.remove(&channel) {
                        state.changes.push(SubChange::SUnsubscribe(channel.clone()));
                        removed.push(channel.clone());
                    }
                    let count = state.shard_channels.len() as i64;
                    replies.push(confirmation("sunsubscribe", Some(channel), count));
                }
                if replies.is_empty() {
                    let count = state.shard_channels.len() as i64;
                    replies.push(confirmation("sunsubscribe", None, count));
                }
                register = (!removed.is_empty()).then_some((removed, false));
            }
        }
        if let Some((channels, on)) = register {
            // This request's own reply (the shards' OK) is not written; every confirmation
            // follows it.
            if let Some(slot) = self.replies.slot(seq) {
                slot.silent = true;
            }
            for reply in replies {
                let extra = self.replies.push_pending(self.encoding(Shape::Push));
                self.answer(extra, reply);
            }
            return Admission::Forward(Command::ShardPubSub(
                crate::command::ShardPubSub::Register { channels, on },
            ));
        }
        let mut replies = replies.into_iter();
        let first = replies.next().unwrap_or(Reply::NullArray);
        // The other confirmations follow as replies of their own, right behind this one.
        for reply in replies {
            let extra = self.replies.push_pending(self.encoding(Shape::Push));
            self.answer(extra, reply);
        }
        Admission::Answered(first)
    }

    /// RESET: every subscription goes, without confirmations.
    pub(super) fn reset_pubsub(&mut self) {
        let Some(state) = self.pubsub.0.as_mut() else {
            return;
        };
        for channel in state.channels.drain() {
            state.changes.push(SubChange::Unsubscribe(channel));
        }
        for pattern in state.patterns.drain() {
            state.changes.push(SubChange::PUnsubscribe(pattern));
        }
        for channel in state.shard_channels.drain() {
            state.changes.push(SubChange::SUnsubscribe(channel));
        }
    }

    /// A shard channel's message for this connection: pushed while it is still subscribed.
    pub fn push_shard_message(&mut self, channel: &[u8], message: Reply, now_ms: u64) -> bool {
        if !self.pubsub.has_shard_channel(channel) {
            return true;
        }
        self.push_message(message, now_ms)
    }
}

fn sorted(names: &HashSet<Bytes>) -> Vec<Bytes> {
    let mut names: Vec<Bytes> = names.iter().cloned().collect();
    names.sort();
    names
}

/// PING while subscribed (RESP2) answers `[pong, message]`.
pub(super) fn subscribed_pong(message: Option<Bytes>) -> Reply {
    Reply::Array(vec![
        Reply::Bulk(Bytes::from_static(b"pong")),
        Reply::Bulk(message.unwrap_or_default()),
    ])
}
