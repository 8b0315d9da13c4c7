//! ACL LOG: the latest denials, newest first, similar ones (same reason, context, object and
//! user within a minute) counted in one entry, at most `acllog-max-len` entries.

use std::collections::VecDeque;

use bytes::Bytes;

use crate::reply::Reply;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reason {
    Command,
    Key,
    Channel,
    Auth,
}

impl Reason {
    fn name(self) -> &'static str {
        match self {
            Reason::Command => "command",
            Reason::Key => "key",
            Reason::Channel => "channel",
            Reason::Auth => "auth",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Context {
    Toplevel,
    Multi,
    Lua,
}

impl Context {
    fn name(self) -> &'static str {
        match self {
            Context::Toplevel => "toplevel",
            Context::Multi => "multi",
            Context::Lua => "lua",
        }
    }
}

/// One denial, as the glue reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Denial {
    pub reason: Reason,
    pub context: Context,
    /// The command's name, the key, the channel, or the command that authenticated.
    pub object: Bytes,
    pub username: Bytes,
    /// CLIENT LIST's line of the connection.
    pub client_info: Bytes,
}

#[derive(Debug, Clone)]
struct Entry {
    denial: Denial,
    count: u64,
    created_ms: u64,
}

/// Entries closer than this in time are counted together.
const GROUPING_MS: u64 = 60_000;
/// How many of the newest entries a denial is compared with.
const SCAN: usize = 10;

#[derive(Debug, Default)]
pub struct AclLog {
    entries: VecDeque<Entry>,
}

impl AclLog {
    pub fn add(&mut self, denial: Denial, now_ms: u64, max_len: usize) {
        let similar = self.entries.iter().take(SCAN).position(|e| {
            let d = &e.denial;
            d.reason == denial.reason
                && d.context == denial.context
                && d.object == denial.object
                && d.username == denial.username
                && now_ms.abs_diff(e.created_ms) <= GROUPING_MS
        });
        if let Some(at) = similar {
            if let Some(mut entry) = self.entries.remove(at) {
                entry.count += 1;
                entry.created_ms = now_ms;
                entry.denial.client_info = denial.client_info;
                self.entries.push_front(entry);
            }
            return;
        }
        self.entries.push_front(Entry {
            denial,
            count: 1,
            created_ms: now_ms,
        });
        self.entries.truncate(max_len);
    }

    pub fn reset(&mut self) {
        self.entries.clear();
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// ACL LOG \[count\]: the newest `count` entries (all when `None`).
    pub fn reply(&self, count: Option<usize>, now_ms: u64) -> Reply {
        let bulk = |text: &[u8]| Reply::Bulk(Bytes::copy_from_slice(text));
        Reply::Array(
            self.entries
                .iter()
                .take(count.unwrap_or(usize::MAX))
                .map(|e| {
                    let d = &e.denial;
                    let age = now_ms.saturating_sub(e.created_ms) as f64 / 1000.0;
                    Reply::Map(vec![
                        bulk(b"count"),
                        Reply::Integer(e.count as i64),
                        bulk(b"reason"),
                        bulk(d.reason.name().as_bytes()),
                        bulk(b"context"),
                        bulk(d.context.name().as_bytes()),
                        bulk(b"object"),
                        Reply::Bulk(d.object.clone()),
                        bulk(b"username"),
                        Reply::Bulk(d.username.clone()),
                        bulk(b"age-seconds"),
                        Reply::Double(crate::store::format_double(age)),
                        bulk(b"client-info"),
                        Reply::Bulk(d.client_info.clone()),
                    ])
                })
                .collect(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn denial(object: &'static str) -> Denial {
        Denial {
            reason: Reason::Command,
            context: Context::Toplevel,
            object: Bytes::from_static(object.as_bytes()),
            username: Bytes::from_static(b"u"),
            client_info: Bytes::new(),
        }
    }

    fn counts(log: &AclLog) -> Vec<(String, u64)> {
        (log.entries.iter())
            .map(|e| {
                (
                    String::from_utf8_lossy(&e.denial.object).into_owned(),
                    e.count,
                )
            })
            .collect()
    }

    #[test]
    fn similar_denials_count_together_within_a_minute() {
        let mut log = AclLog::default();
        log.add(denial("get"), 0, 128);
        log.add(denial("set"), 10, 128);
        log.add(denial("get"), 20, 128);
        assert_eq!(counts(&log), vec![("get".into(), 2), ("set".into(), 1)]);
        log.add(denial("get"), 20 + GROUPING_MS + 1, 128);
        assert_eq!(log.len(), 3);
        let Reply::Array(entries) = log.reply(Some(2), 0) else {
            panic!("not an array")
        };
        assert_eq!(entries.len(), 2);
    }

    #[test]
    fn the_oldest_entries_go_past_the_limit() {
        let mut log = AclLog::default();
        for i in 0..10 {
            log.add(
                denial(["a", "b", "c", "d", "e", "f", "g", "h", "i", "j"][i]),
                0,
                5,
            );
        }
        assert_eq!(log.len(), 5);
        assert_eq!(counts(&log)[0].0, "j");
        log.reset();
        assert!(log.is_empty());
    }
}
