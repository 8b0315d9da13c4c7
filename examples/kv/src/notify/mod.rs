//! Keyspace notifications (Redis's `notify.c`): the store tags each change it makes with the
//! event Redis emits for it (`set`, `lpush`, `expired`, `del`, ...; see the store's command
//! code), collected per command while some consumer wants them ([`EventLog`]). The shard that
//! owns the key publishes them through the ordinary Pub/Sub fan-out, so a subscriber on any
//! shard receives them: `__keyspace@0__:<key>` carries the event, `__keyevent@0__:<event>`
//! the key, for the classes `notify-keyspace-events` enables. Client tracking reads the same
//! log for the keys a command modified.

mod flags;

use bytes::Bytes;

pub use flags::{Class, EventFlags};

/// One change to one key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyEvent {
    pub class: Class,
    /// Redis's event name (`set`, `rename_from`, ...).
    pub event: &'static str,
    pub key: Bytes,
}

impl KeyEvent {
    /// Whether the event means the key's value changed (what invalidates a cached copy):
    /// every event but a new key's (which comes with its own write event) and a key miss.
    pub fn modifies(&self) -> bool {
        !matches!(self.class, Class::New | Class::KeyMiss)
    }
}

/// The events a shard's store records while a command runs, when anything consumes them.
/// Off (and free) otherwise.
#[derive(Debug, Default)]
pub struct EventLog {
    on: bool,
    events: Vec<KeyEvent>,
    /// Events were dropped past [`MAX_EVENTS`] since the last take.
    overflowed: bool,
}

/// The events one command recorded.
#[derive(Debug, Default)]
pub struct Events {
    pub events: Vec<KeyEvent>,
    /// Some were dropped (past [`MAX_EVENTS`]): their keys are unknown.
    pub overflowed: bool,
}

/// At most this many events are kept per command: a command touching more keys (FLUSHALL of
/// a huge keyspace emits none; a DEL of a million keys would) keeps the first ones and marks
/// the log as overflowed: the later notifications are lost (counted in a log line) and
/// client tracking falls back to invalidating every key it tracks on the shard.
pub const MAX_EVENTS: usize = 1 << 16;

impl EventLog {
    pub fn set_enabled(&mut self, on: bool) {
        self.on = on;
        if !on {
            self.events = Vec::new();
        }
    }

    pub fn is_enabled(&self) -> bool {
        self.on
    }

    /// Records an event (a copy of the key) when the log is on.
    #[inline]
    pub fn record(&mut self, class: Class, event: &'static str, key: &[u8]) {
        if !self.on {
            return;
        }
        if self.events.len() < MAX_EVENTS {
            self.events.push(KeyEvent {
                class,
                event,
                key: Bytes::copy_from_slice(key),
            });
        } else {
            self.overflowed = true;
        }
    }

    /// How many events are recorded (to drop later ones with [`Self::truncate`]).
    pub fn mark(&self) -> usize {
        self.events.len()
    }

    /// Drops the events recorded after `mark` (a command made of others reports its own).
    pub fn truncate(&mut self, mark: usize) {
        self.events.truncate(mark);
    }

    /// The events recorded since the last call.
    pub fn take(&mut self) -> Events {
        Events {
            events: std::mem::take(&mut self.events),
            overflowed: std::mem::take(&mut self.overflowed),
        }
    }
}

/// The Pub/Sub messages `event` publishes under `flags`: `(channel, message)` pairs.
pub fn messages(flags: EventFlags, event: &KeyEvent) -> Vec<(Bytes, Bytes)> {
    let mut out = Vec::new();
    if !flags.wants(event.class) {
        return out;
    }
    if flags.keyspace() {
        let mut channel = b"__keyspace@0__:".to_vec();
        channel.extend_from_slice(&event.key);
        out.push((
            Bytes::from(channel),
            Bytes::from_static(event.event.as_bytes()),
        ));
    }
    if flags.keyevent() {
        let channel = format!("__keyevent@0__:{}", event.event);
        out.push((Bytes::from(channel), event.key.clone()));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn channels_follow_the_flags() {
        let event = KeyEvent {
            class: Class::String,
            event: "set",
            key: Bytes::from("foo"),
        };
        let all = EventFlags::parse("KEA").unwrap();
        assert_eq!(
            messages(all, &event),
            vec![
                (Bytes::from("__keyspace@0__:foo"), Bytes::from("set")),
                (Bytes::from("__keyevent@0__:set"), Bytes::from("foo")),
            ]
        );
        assert!(messages(EventFlags::parse("KEl").unwrap(), &event).is_empty());
        assert_eq!(messages(EventFlags::parse("E$").unwrap(), &event).len(), 1);
        let mut log = EventLog::default();
        log.record(Class::String, "set", b"k");
        assert!(log.take().events.is_empty(), "off: nothing kept");
        log.set_enabled(true);
        log.record(Class::String, "set", b"k");
        assert_eq!(log.take().events.len(), 1);
        for _ in 0..=MAX_EVENTS {
            log.record(Class::String, "set", b"k");
        }
        let taken = log.take();
        assert!(taken.overflowed && taken.events.len() == MAX_EVENTS);
        assert!(!log.take().overflowed);
    }
}
