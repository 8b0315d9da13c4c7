//! The Pub/Sub family: its table entries, parsing and routing.
//!
//! Channels and patterns are the connection's (the session keeps them, its shard's registry
//! mirrors them for delivery): PUBLISH and PUBSUB reach every shard. Shard channels (Redis
//! 7's sharded Pub/Sub) live where their slot does: SSUBSCRIBE registers the connection on the
//! channel's shard (before its confirmation is written, so a later SPUBLISH finds it), and
//! SPUBLISH goes to that one shard, which delivers to its subscribers on every shard.

use bytes::Bytes;

use super::table::{spec, CommandKind, CommandSpec};
use super::{Command, CommandError};
use crate::routing::{shard_of, split_keys_merged, Merger, Route};

/// SUBSCRIBE, UNSUBSCRIBE, PSUBSCRIBE, PUNSUBSCRIBE, SSUBSCRIBE, SUNSUBSCRIBE: answered by
/// the session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Subscription {
    Subscribe(Vec<Bytes>),
    /// No channel: every channel of the connection.
    Unsubscribe(Vec<Bytes>),
    PSubscribe(Vec<Bytes>),
    /// No pattern: every pattern of the connection.
    PUnsubscribe(Vec<Bytes>),
    SSubscribe(Vec<Bytes>),
    /// No channel: every shard channel of the connection.
    SUnsubscribe(Vec<Bytes>),
}

impl Subscription {
    pub fn name(&self) -> &'static str {
        match self {
            Subscription::Subscribe(_) => "subscribe",
            Subscription::Unsubscribe(_) => "unsubscribe",
            Subscription::PSubscribe(_) => "psubscribe",
            Subscription::PUnsubscribe(_) => "punsubscribe",
            Subscription::SSubscribe(_) => "ssubscribe",
            Subscription::SUnsubscribe(_) => "sunsubscribe",
        }
    }
}

/// PUBSUB's subcommands: every shard answers for its own connections (CHANNELS, NUMSUB,
/// NUMPAT) or for the shard channels it owns (SHARDCHANNELS, SHARDNUMSUB).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PubSubQuery {
    /// Channels with at least one subscriber, optionally matching a glob pattern.
    Channels(Option<Bytes>),
    NumSub(Vec<Bytes>),
    NumPat,
    ShardChannels(Option<Bytes>),
    ShardNumSub(Vec<Bytes>),
}

impl PubSubQuery {
    pub fn name(&self) -> &'static str {
        match self {
            PubSubQuery::Channels(_) => "pubsub|channels",
            PubSubQuery::NumSub(_) => "pubsub|numsub",
            PubSubQuery::NumPat => "pubsub|numpat",
            PubSubQuery::ShardChannels(_) => "pubsub|shardchannels",
            PubSubQuery::ShardNumSub(_) => "pubsub|shardnumsub",
        }
    }
}

/// What runs on a shard channel's shard.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ShardPubSub {
    /// SPUBLISH: to the channel's subscribers; the reply counts them.
    Publish { channel: Bytes, message: Bytes },
    /// The connection that sent it (un)subscribes to these channels (the session sends it
    /// ahead of SSUBSCRIBE's and SUNSUBSCRIBE's confirmations, which wait for it).
    Register { channels: Vec<Bytes>, on: bool },
}

impl ShardPubSub {
    pub fn name(&self) -> &'static str {
        match self {
            ShardPubSub::Publish { .. } => "spublish",
            ShardPubSub::Register { on: true, .. } => "ssubscribe",
            ShardPubSub::Register { on: false, .. } => "sunsubscribe",
        }
    }

    /// The channels it names (what the cluster check hashes, like keys).
    pub fn channels(&self) -> Vec<&[u8]> {
        match self {
            ShardPubSub::Publish { channel, .. } => vec![channel],
            ShardPubSub::Register { channels, .. } => channels.iter().map(|c| &c[..]).collect(),
        }
    }
}

/// The family's commands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
// Named after the commands (NUMSUB, SHARDNUMSUB).
#[allow(clippy::enum_variant_names)]
pub enum Sub {
    Subscribe,
    Unsubscribe,
    PSubscribe,
    PUnsubscribe,
    SSubscribe,
    SUnsubscribe,
    Publish,
    SPublish,
    /// PUBSUB without subcommand (its arity forbids that).
    Container,
    Channels,
    NumSub,
    NumPat,
    ShardChannels,
    ShardNumSub,
    Help,
}

const SUBSCRIBE_FLAGS: &[&str] = &["pubsub", "noscript", "loading", "stale"];
const PUBSUB_FLAGS: &[&str] = &["pubsub", "loading", "stale"];
const PUBLISH_FLAGS: &[&str] = &["pubsub", "loading", "stale", "fast", "may_replicate"];
const NO_KEYS: (i64, i64, i64) = (0, 0, 0);
/// Shard channels hash like keys (Redis's key specs mark them NOT_KEY).
const CHANNELS: (i64, i64, i64) = (1, -1, 1);

const fn row(
    sub: Sub,
    name: &'static str,
    arity: i64,
    flags: &'static [&'static str],
) -> CommandSpec {
    spec(CommandKind::PubSub(sub), name, arity, flags, NO_KEYS)
}

static PUBSUB_SUBCOMMANDS: [CommandSpec; 6] = [
    row(Sub::Channels, "pubsub|channels", -2, PUBSUB_FLAGS),
    row(Sub::NumSub, "pubsub|numsub", -2, PUBSUB_FLAGS),
    row(Sub::NumPat, "pubsub|numpat", 2, PUBSUB_FLAGS),
    row(Sub::ShardChannels, "pubsub|shardchannels", -2, PUBSUB_FLAGS),
    row(Sub::ShardNumSub, "pubsub|shardnumsub", -2, PUBSUB_FLAGS),
    row(Sub::Help, "pubsub|help", 2, &["loading", "stale"]),
];

/// PUBSUB HELP's lines (Redis's).
const HELP: &[&str] = &[
    "CHANNELS [<pattern>]",
    "    Return the currently active channels matching a <pattern> (default: '*').",
    "NUMPAT",
    "    Return number of subscriptions to patterns.",
    "NUMSUB [<channel> ...]",
    "    Return the number of subscribers for the specified channels, excluding",
    "    pattern subscriptions(default: no channels).",
    "SHARDCHANNELS [<pattern>]",
    "    Return the currently active shard level channels matching a <pattern> (default: '*').",
    "SHARDNUMSUB [<shardchannel> ...]",
    "    Return the number of subscribers for the specified shard level channel(s)",
];

pub(crate) static COMMANDS: [CommandSpec; 9] = [
    row(Sub::Subscribe, "subscribe", -2, SUBSCRIBE_FLAGS),
    row(Sub::Unsubscribe, "unsubscribe", -1, SUBSCRIBE_FLAGS),
    row(Sub::PSubscribe, "psubscribe", -2, SUBSCRIBE_FLAGS),
    row(Sub::PUnsubscribe, "punsubscribe", -1, SUBSCRIBE_FLAGS),
    CommandSpec {
        first_key: CHANNELS.0,
        last_key: CHANNELS.1,
        key_step: CHANNELS.2,
        ..row(Sub::SSubscribe, "ssubscribe", -2, SUBSCRIBE_FLAGS)
    },
    CommandSpec {
        first_key: CHANNELS.0,
        last_key: CHANNELS.1,
        key_step: CHANNELS.2,
        ..row(Sub::SUnsubscribe, "sunsubscribe", -1, SUBSCRIBE_FLAGS)
    },
    row(Sub::Publish, "publish", 3, PUBLISH_FLAGS),
    CommandSpec {
        first_key: 1,
        last_key: 1,
        key_step: 1,
        ..row(Sub::SPublish, "spublish", 3, PUBLISH_FLAGS)
    },
    CommandSpec {
        subcommands: &PUBSUB_SUBCOMMANDS,
        ..row(Sub::Container, "pubsub", -2, &[])
    },
];

/// Parses one of the family's commands (arity already checked).
pub(crate) fn parse(sub: Sub, args: Vec<Bytes>) -> Result<Command, CommandError> {
    // CHANNELS and SHARDCHANNELS take one pattern at most (Redis's own check, worded so).
    let pattern_count = |name: &str| {
        CommandError::Text(format!(
            "ERR unknown subcommand or wrong number of arguments for '{name}'. Try PUBSUB HELP."
        ))
    };
    if args.len() > 1 && matches!(sub, Sub::Channels | Sub::ShardChannels) {
        let name = if sub == Sub::Channels {
            "channels"
        } else {
            "shardchannels"
        };
        return Err(pattern_count(name));
    }
    let mut args = args.into_iter();
    Ok(match sub {
        Sub::Subscribe => Command::Subscription(Subscription::Subscribe(args.collect())),
        Sub::Unsubscribe => Command::Subscription(Subscription::Unsubscribe(args.collect())),
        Sub::PSubscribe => Command::Subscription(Subscription::PSubscribe(args.collect())),
        Sub::PUnsubscribe => Command::Subscription(Subscription::PUnsubscribe(args.collect())),
        Sub::SSubscribe => Command::Subscription(Subscription::SSubscribe(args.collect())),
        Sub::SUnsubscribe => Command::Subscription(Subscription::SUnsubscribe(args.collect())),
        Sub::Publish | Sub::SPublish => {
            let (Some(channel), Some(message)) = (args.next(), args.next()) else {
                return Err(CommandError::WrongArity {
                    command: if sub == Sub::Publish {
                        "publish"
                    } else {
                        "spublish"
                    },
                });
            };
            if sub == Sub::Publish {
                Command::Publish { channel, message }
            } else {
                Command::ShardPubSub(ShardPubSub::Publish { channel, message })
            }
        }
        Sub::Container => return Err(CommandError::WrongArity { command: "pubsub" }),
        Sub::Channels => Command::PubSub(PubSubQuery::Channels(args.next())),
        Sub::NumSub => Command::PubSub(PubSubQuery::NumSub(args.collect())),
        Sub::NumPat => Command::PubSub(PubSubQuery::NumPat),
        Sub::ShardChannels => Command::PubSub(PubSubQuery::ShardChannels(args.next())),
        Sub::ShardNumSub => Command::PubSub(PubSubQuery::ShardNumSub(args.collect())),
        Sub::Help => Command::Help {
            command: "pubsub|help",
            lines: HELP,
        },
    })
}

/// Where a shard channel's command runs: its channel's shard (REGISTER: each channel's).
pub(crate) fn route(request: ShardPubSub, shards: usize) -> Route {
    match request {
        ShardPubSub::Publish { channel, message } => Route::Single {
            shard: shard_of(&channel, shards.max(1)),
            command: Command::ShardPubSub(ShardPubSub::Publish { channel, message }),
        },
        ShardPubSub::Register { channels, on } => {
            let rebuild = if on {
                |channels| Command::ShardPubSub(ShardPubSub::Register { channels, on: true })
            } else {
                |channels| {
                    Command::ShardPubSub(ShardPubSub::Register {
                        channels,
                        on: false,
                    })
                }
            };
            split_keys_merged(channels, shards, rebuild, |_, parts| {
                Merger::custom(parts, |_, _, _| crate::reply::Reply::ok(), Vec::new())
            })
        }
    }
}
