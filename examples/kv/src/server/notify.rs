//! What a shard does with the keyspace events its store records (see [`crate::notify`]):
//! publishes them as keyspace notifications to the subscribers of every shard (the local
//! ones at once, the others' through their job lanes, in order), and hands the keys they
//! modified to client tracking. Also the shard side of the messages that answer no request
//! ([`Note`]).

use std::cell::{Cell, RefCell};

use bytes::Bytes;

use super::forward::Work;
use super::shard::Shard;
use super::sink::{Origin, SinkKey};
use super::tracking::Reader;
use crate::clients::tracking::Keys;
use crate::notify::{self, Class, EventFlags, KeyEvent};

/// A message for a shard that answers no request.
pub(crate) enum Note {
    /// A keyspace notification: deliver it to this shard's subscribers.
    Publish { channel: Bytes, message: Bytes },
    /// MONITOR lines: deliver them to this shard's monitors.
    Monitor(Vec<Bytes>),
    /// Client tracking: an invalidation for connection `sink` here (see `tracking.rs`).
    Invalidate {
        sink: SinkKey,
        keys: Keys,
        by_self: Vec<bool>,
        bcast: bool,
    },
    /// Client tracking: an invalidation redirected to connection `sink` here, from `reader`.
    TrackingDeliver {
        sink: SinkKey,
        keys: Keys,
        reader: Reader,
    },
    /// Client tracking: the redirect target of connection `sink` here is gone.
    RedirectBroken { sink: SinkKey },
    /// A shard channel's message for connection `sink` here.
    ShardMessage {
        sink: SinkKey,
        channel: Bytes,
        message: Bytes,
    },
    /// A connection of another shard left shard channels this shard owns.
    ShardUnsubscribe {
        reader: Reader,
        channels: Vec<Bytes>,
    },
    /// Client tracking: a script's caller read through it; it tracks the script's keys here.
    TrackFor { reader: Reader, keys: Vec<Bytes> },
    /// Client tracking: a broadcasting connection's prefixes (none: it stopped).
    Broadcaster {
        reader: Reader,
        prefixes: Vec<Bytes>,
    },
    /// Client tracking: a shard has set connection `sink`'s `Broadcaster` note.
    BroadcasterSet { sink: SinkKey },
}

/// A shard's part of keyspace notifications.
#[derive(Default)]
pub(crate) struct ShardNotes {
    /// `notify-keyspace-events`.
    flags: Cell<EventFlags>,
    /// Whether the store records events (mirrors the store's switch, read per command).
    logging: Cell<bool>,
    /// Notifications lost to a command's event cap (see [`notify::MAX_EVENTS`]).
    lost: Cell<u64>,
    /// While a multi-key command's write-backs run here: the keys whose `restore` and `del`
    /// events are replaced by the command's own (see [`Shard::replace_events`]).
    replaced: RefCell<Vec<Bytes>>,
}

impl Shard {
    /// CONFIG SET notify-keyspace-events, on this shard.
    pub(crate) fn set_notify(&self, flags: EventFlags) {
        self.notes.flags.set(flags);
    }

    /// Turns the store's event log on while anything consumes events here (notifications or
    /// client tracking).
    pub(crate) fn refresh_event_log(&self) {
        let on = self.notes.flags.get().any() || self.tracking_active();
        if on != self.notes.logging.get() {
            self.notes.logging.set(on);
            self.store().set_event_log(on);
        }
    }

    /// After the store ran a command (`writer` is whose; `None` for the expiry sweep): its
    /// events go out.
    pub(crate) fn after_change(&self, writer: Option<Origin>, _now: u64) {
        if !self.notes.logging.get() {
            return;
        }
        let mut events = self.store().take_events();
        {
            let replaced = self.notes.replaced.borrow();
            if !replaced.is_empty() {
                events.events.retain(|event| {
                    let write_back =
                        event.class == Class::Generic && matches!(event.event, "restore" | "del");
                    !(write_back && replaced.contains(&event.key))
                });
            }
        }
        self.emit(events, writer);
    }

    /// Whether keyspace notifications are on (any class on any channel).
    pub(crate) fn notifies(&self) -> bool {
        self.notes.flags.get().any()
    }

    /// A multi-key command's write-backs are about to run here: the `restore` and `del`
    /// events they cause for the keys of `events` are dropped; [`Self::publish_replaced`]
    /// publishes `events` instead, as the command emitted them.
    pub(crate) fn replace_events(&self, events: &[KeyEvent]) {
        let mut replaced = self.notes.replaced.borrow_mut();
        replaced.clear();
        for event in events {
            if !replaced.contains(&event.key) {
                replaced.push(event.key.clone());
            }
        }
    }

    /// The write-backs ran: the command's own events go out (from `writer`).
    pub(crate) fn publish_replaced(&self, events: Vec<KeyEvent>, writer: Option<Origin>) {
        self.notes.replaced.borrow_mut().clear();
        if events.is_empty() || !self.notes.logging.get() {
            return;
        }
        self.emit(
            notify::Events {
                events,
                overflowed: false,
            },
            writer,
        );
    }

    /// Publishes a command's events and hands the keys they modified to client tracking.
    fn emit(&self, events: notify::Events, writer: Option<Origin>) {
        if events.overflowed {
            let lost = self.notes.lost.get() + 1;
            self.notes.lost.set(lost);
            // Rare (a command touching more than `MAX_EVENTS` keys): a line per power of two.
            if lost.is_power_of_two() {
                tracing::warn!(
                    times = lost,
                    "a command emitted more keyspace events than are kept; the rest were not published"
                );
            }
        }
        if events.events.is_empty() && !events.overflowed {
            return;
        }
        let flags = self.notes.flags.get();
        if flags.any() {
            for event in &events.events {
                for (channel, message) in notify::messages(flags, event) {
                    self.publish_everywhere(channel, message);
                }
            }
        }
        if self.tracking_active() {
            if events.overflowed {
                self.tracking_invalidate_all();
            } else {
                self.tracking_written(&events.events, writer);
            }
        }
    }

    /// Delivers a message to the subscribers of every shard: this shard's now, the others'
    /// through the job lanes (so one shard's notifications arrive in order everywhere).
    pub(crate) fn publish_everywhere(&self, channel: Bytes, message: Bytes) {
        for target in (0..self.count).filter(|&target| target != self.id) {
            self.forward.push_work(
                target,
                Work::Note(Note::Publish {
                    channel: channel.clone(),
                    message: message.clone(),
                }),
            );
        }
        self.publish(&channel, &message);
    }

    /// A [`Note`] from another shard.
    pub(crate) fn on_note(&self, note: Note, _now: u64) {
        match note {
            Note::Publish { channel, message } => {
                self.publish(&channel, &message);
            }
            Note::Monitor(lines) => self.deliver_monitor_lines(&lines),
            Note::Invalidate {
                sink,
                keys,
                by_self,
                bcast,
            } => self.invalidate_local(sink, keys, by_self, bcast),
            Note::TrackingDeliver { sink, keys, reader } => {
                self.deliver_redirected(sink, keys, reader)
            }
            Note::RedirectBroken { sink } => self.redirect_broken(sink),
            Note::Broadcaster { reader, prefixes } => self.set_remote_broadcaster(reader, prefixes),
            Note::BroadcasterSet { sink } => self.broadcaster_set(sink),
            Note::TrackFor { reader, keys } => self.track_reader(reader, &keys),
            Note::ShardMessage {
                sink,
                channel,
                message,
            } => self.push_shard_message(sink, &channel, &message),
            Note::ShardUnsubscribe { reader, channels } => {
                self.pubsub.borrow_mut().unregister_shard(reader, &channels)
            }
        }
    }
}
