//! `notify-keyspace-events`: which event classes are published, and on which channels.

use std::fmt;

/// An event's class (Redis's `NOTIFY_*`), as the store tags each event.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u32)]
pub enum Class {
    Generic = 1 << 2,
    String = 1 << 3,
    List = 1 << 4,
    Set = 1 << 5,
    Hash = 1 << 6,
    Zset = 1 << 7,
    Expired = 1 << 8,
    Evicted = 1 << 9,
    Stream = 1 << 10,
    /// A read of a missing key (`keymiss`).
    KeyMiss = 1 << 11,
    Module = 1 << 12,
    /// A key added to the keyspace (`new`).
    New = 1 << 13,
}

const KEYSPACE: u32 = 1 << 0;
const KEYEVENT: u32 = 1 << 1;
/// `A`: every class but key misses, modules and new keys.
const ALL: u32 = Class::Generic as u32
    | Class::String as u32
    | Class::List as u32
    | Class::Set as u32
    | Class::Hash as u32
    | Class::Zset as u32
    | Class::Expired as u32
    | Class::Evicted as u32
    | Class::Stream as u32;

/// The configured classes plus `K` (keyspace channel) and `E` (keyevent channel).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct EventFlags(u32);

impl EventFlags {
    pub fn from_bits(bits: u32) -> EventFlags {
        EventFlags(bits)
    }

    pub fn bits(self) -> u32 {
        self.0
    }

    /// Redis's `keyspaceEventsStringToFlags`; `None` for an unknown character.
    pub fn parse(classes: &str) -> Option<EventFlags> {
        let mut flags = 0;
        for c in classes.chars() {
            flags |= match c {
                'A' => ALL,
                'g' => Class::Generic as u32,
                '$' => Class::String as u32,
                'l' => Class::List as u32,
                's' => Class::Set as u32,
                'h' => Class::Hash as u32,
                'z' => Class::Zset as u32,
                'x' => Class::Expired as u32,
                'e' => Class::Evicted as u32,
                'K' => KEYSPACE,
                'E' => KEYEVENT,
                't' => Class::Stream as u32,
                'm' => Class::KeyMiss as u32,
                'd' => Class::Module as u32,
                'n' => Class::New as u32,
                _ => return None,
            };
        }
        Some(EventFlags(flags))
    }

    /// Whether events of `class` are published at all (a class and a channel are on).
    pub fn wants(self, class: Class) -> bool {
        self.0 & class as u32 != 0 && self.0 & (KEYSPACE | KEYEVENT) != 0
    }

    pub fn keyspace(self) -> bool {
        self.0 & KEYSPACE != 0
    }

    pub fn keyevent(self) -> bool {
        self.0 & KEYEVENT != 0
    }

    /// Whether any event is published.
    pub fn any(self) -> bool {
        self.0 & !(KEYSPACE | KEYEVENT) != 0 && self.0 & (KEYSPACE | KEYEVENT) != 0
    }
}

/// Redis's `keyspaceEventsFlagsToString`.
impl fmt::Display for EventFlags {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let flags = self.0;
        let mut out = String::new();
        if flags & ALL == ALL {
            out.push('A');
        } else {
            for (class, c) in [
                (Class::Generic, 'g'),
                (Class::String, '$'),
                (Class::List, 'l'),
                (Class::Set, 's'),
                (Class::Hash, 'h'),
                (Class::Zset, 'z'),
                (Class::Expired, 'x'),
                (Class::Evicted, 'e'),
                (Class::Stream, 't'),
                (Class::Module, 'd'),
                (Class::New, 'n'),
            ] {
                if flags & class as u32 != 0 {
                    out.push(c);
                }
            }
        }
        if flags & KEYSPACE != 0 {
            out.push('K');
        }
        if flags & KEYEVENT != 0 {
            out.push('E');
        }
        if flags & Class::KeyMiss as u32 != 0 {
            out.push('m');
        }
        f.write_str(&out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round(text: &str) -> String {
        EventFlags::parse(text).unwrap().to_string()
    }

    #[test]
    fn flags_print_as_redis_prints_them() {
        assert_eq!(round("gKE"), "gKE");
        assert_eq!(round("$lshzxeKE"), "$lshzxeKE");
        assert_eq!(round("KA"), "AK");
        assert_eq!(round("EA"), "AE");
        assert_eq!(round("nmdE"), "dnEm");
        assert_eq!(round(""), "");
        assert!(EventFlags::parse("Q").is_none());
        let flags = EventFlags::parse("El").unwrap();
        assert!(flags.wants(Class::List) && !flags.wants(Class::Set));
        assert!(
            !EventFlags::parse("l").unwrap().any(),
            "no channel: nothing published"
        );
    }
}
