//! Client-side caching (CLIENT TRACKING), sans-I/O: a connection's tracking mode with
//! Redis 7.0's option checks, errors and TRACKINGINFO; a shard's table of which connections
//! read which keys (bounded by `tracking-table-max-keys` over the whole node), its registry of
//! broadcast prefixes, and the invalidation messages in both protocols.
//!
//! Default mode: before a read-only command of a tracking connection runs, its keys are
//! remembered on the shards that own them (the connection sends them there first, on the
//! same lane as the command, so no write in between is missed); a later write to one of them
//! sends an invalidation to the reader's shard, whose connection pushes it (RESP3) or hands
//! it to the connection it redirects to. BCAST mode: every shard knows every broadcasting
//! connection's prefixes, and sends the keys written under them, gathered per turn.

use std::collections::HashMap;

use bytes::Bytes;

use crate::command::CommandError;
use crate::reply::Reply;

/// A connection's CLIENT TRACKING state.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Tracking {
    pub on: bool,
    pub bcast: bool,
    pub optin: bool,
    pub optout: bool,
    pub noloop: bool,
    /// The client id invalidations go to (0: this connection).
    pub redirect: u64,
    pub prefixes: Vec<Bytes>,
    /// CLIENT CACHING was sent for the next command.
    pub caching: bool,
    /// The redirect target was gone when an invalidation came.
    pub broken_redirect: bool,
}

/// CLIENT TRACKING's arguments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TrackingArgs {
    pub on: bool,
    pub redirect: u64,
    pub bcast: bool,
    pub optin: bool,
    pub optout: bool,
    pub noloop: bool,
    pub prefixes: Vec<Bytes>,
}

fn text(message: &str) -> CommandError {
    CommandError::Text(message.into())
}

impl TrackingArgs {
    /// `ON|OFF [REDIRECT id] [PREFIX p]... [BCAST] [OPTIN] [OPTOUT] [NOLOOP]`, parsed as
    /// Redis's `clientCommand` parses it (the redirect's existence is checked when applied).
    pub fn parse(args: &[Bytes]) -> Result<TrackingArgs, CommandError> {
        let mut parsed = TrackingArgs {
            on: false,
            redirect: 0,
            bcast: false,
            optin: false,
            optout: false,
            noloop: false,
            prefixes: Vec::new(),
        };
        let mut i = 1;
        while i < args.len() {
            let more = i + 1 < args.len();
            let arg = args[i].to_ascii_lowercase();
            match arg.as_slice() {
                b"redirect" if more => {
                    i += 1;
                    if parsed.redirect != 0 {
                        return Err(text(
                            "ERR A client can only redirect to a single other client",
                        ));
                    }
                    parsed.redirect = crate::number::parse_i64(&args[i])
                        .ok_or(CommandError::NotAnInteger)?
                        as u64;
                }
                b"bcast" => parsed.bcast = true,
                b"optin" => parsed.optin = true,
                b"optout" => parsed.optout = true,
                b"noloop" => parsed.noloop = true,
                b"prefix" if more => {
                    i += 1;
                    parsed.prefixes.push(args[i].clone());
                }
                _ => return Err(CommandError::Syntax),
            }
            i += 1;
        }
        parsed.on = if args[0].eq_ignore_ascii_case(b"on") {
            true
        } else if args[0].eq_ignore_ascii_case(b"off") {
            false
        } else {
            return Err(CommandError::Syntax);
        };
        Ok(parsed)
    }
}

/// Whether one prefix is a prefix of the other.
fn overlap(a: &[u8], b: &[u8]) -> bool {
    a.starts_with(b) || b.starts_with(a)
}

impl Tracking {
    /// Off, as every connection starts.
    pub const OFF: Tracking = Tracking {
        on: false,
        bcast: false,
        optin: false,
        optout: false,
        noloop: false,
        redirect: 0,
        prefixes: Vec::new(),
        caching: false,
        broken_redirect: false,
    };

    /// Applies CLIENT TRACKING with Redis 7.0's checks (`redirect_exists` says whether the
    /// redirect target is connected). Whether tracking was turned on or off by it.
    pub fn apply(
        &mut self,
        args: TrackingArgs,
        redirect_exists: impl FnOnce(u64) -> bool,
    ) -> Result<(), CommandError> {
        if args.redirect != 0 && !redirect_exists(args.redirect) {
            return Err(text(
                "ERR The client ID you want redirect to does not exist",
            ));
        }
        if !args.on {
            *self = Tracking::default();
            return Ok(());
        }
        if !args.bcast && !args.prefixes.is_empty() {
            return Err(text("ERR PREFIX option requires BCAST mode to be enabled"));
        }
        if self.on && self.bcast != args.bcast {
            return Err(text(
                "ERR You can't switch BCAST mode on/off before disabling tracking for this client, \
                 and then re-enabling it with a different mode.",
            ));
        }
        if args.bcast && (args.optin || args.optout) {
            return Err(text("ERR OPTIN and OPTOUT are not compatible with BCAST"));
        }
        if args.optin && args.optout {
            return Err(text(
                "ERR You can't specify both OPTIN mode and OPTOUT mode",
            ));
        }
        if (args.optin && self.optout) || (args.optout && self.optin) {
            return Err(text(
                "ERR You can't switch OPTIN/OPTOUT mode before disabling tracking for this \
                 client, and then re-enabling it with a different mode.",
            ));
        }
        if args.bcast {
            for (i, prefix) in args.prefixes.iter().enumerate() {
                if let Some(existing) = self.prefixes.iter().find(|p| overlap(p, prefix)) {
                    return Err(CommandError::Text(format!(
                        "ERR Prefix '{}' overlaps with an existing prefix '{}'. Prefixes for a \
                         single client must not overlap.",
                        String::from_utf8_lossy(prefix),
                        String::from_utf8_lossy(existing)
                    )));
                }
                if let Some(other) = args.prefixes[i + 1..].iter().find(|p| overlap(p, prefix)) {
                    return Err(CommandError::Text(format!(
                        "ERR Prefix '{}' overlaps with another provided prefix '{}'. Prefixes \
                         for a single client must not overlap.",
                        String::from_utf8_lossy(prefix),
                        String::from_utf8_lossy(other)
                    )));
                }
            }
        }
        self.on = true;
        self.bcast = args.bcast;
        self.optin = args.optin;
        self.optout = args.optout;
        self.noloop = args.noloop;
        self.redirect = args.redirect;
        self.broken_redirect = false;
        self.caching = false;
        if args.bcast {
            self.prefixes.extend(args.prefixes);
            if self.prefixes.is_empty() {
                // BCAST without PREFIX: every key.
                self.prefixes.push(Bytes::new());
            }
        }
        Ok(())
    }

    /// CLIENT CACHING yes|no.
    pub fn caching(&mut self, yes: bool) -> Result<(), CommandError> {
        if !self.on {
            return Err(text(
                "ERR CLIENT CACHING can be called only when the client is in tracking mode with \
                 OPTIN or OPTOUT mode enabled",
            ));
        }
        if yes && !self.optin {
            return Err(text(
                "ERR CLIENT CACHING YES is only valid when tracking is enabled in OPTIN mode.",
            ));
        }
        if !yes && !self.optout {
            return Err(text(
                "ERR CLIENT CACHING NO is only valid when tracking is enabled in OPTOUT mode.",
            ));
        }
        self.caching = true;
        Ok(())
    }

    /// Whether the keys of a read-only command are to be tracked now.
    pub fn tracks_reads(&self) -> bool {
        self.on && !self.bcast && !((self.optin && !self.caching) || (self.optout && self.caching))
    }

    /// CLIENT TRACKINGINFO.
    pub fn info(&self) -> Reply {
        let status = |s: &'static str| Reply::Bulk(Bytes::from_static(s.as_bytes()));
        let mut flags = Vec::new();
        if !self.on {
            flags.push(status("off"));
        } else {
            flags.push(status("on"));
            if self.bcast {
                flags.push(status("bcast"));
            }
            if self.optin {
                flags.push(status("optin"));
                if self.caching {
                    flags.push(status("caching-yes"));
                }
            }
            if self.optout {
                flags.push(status("optout"));
                if self.caching {
                    flags.push(status("caching-no"));
                }
            }
            if self.noloop {
                flags.push(status("noloop"));
            }
            if self.broken_redirect {
                flags.push(status("broken_redirect"));
            }
        }
        Reply::Map(vec![
            status("flags"),
            Reply::Set(flags),
            status("redirect"),
            Reply::Integer(self.redirect_reply()),
            status("prefixes"),
            Reply::Array(self.prefixes.iter().cloned().map(Reply::Bulk).collect()),
        ])
    }

    /// CLIENT GETREDIR (and CLIENT LIST's `redir`): -1 when off, 0 for no redirect.
    pub fn redirect_reply(&self) -> i64 {
        if self.on {
            self.redirect as i64
        } else {
            -1
        }
    }
}

/// An invalidation's keys (`None`: everything, after FLUSHALL).
pub type Keys = Option<Vec<Bytes>>;

/// The RESP3 push: `["invalidate", [keys] | null]`.
pub fn push_message(keys: &Keys) -> Reply {
    Reply::Array(vec![
        Reply::Bulk(Bytes::from_static(b"invalidate")),
        keys_reply(keys),
    ])
}

/// The RESP2 Pub/Sub message a redirect target subscribed to `__redis__:invalidate` gets
/// (everything: a null bulk string, as Redis writes its RESP2 null).
pub fn pubsub_message(keys: &Keys) -> Reply {
    Reply::Array(vec![
        Reply::Bulk(Bytes::from_static(b"message")),
        Reply::Bulk(Bytes::from_static(b"__redis__:invalidate")),
        match keys {
            Some(_) => keys_reply(keys),
            None => Reply::NullBulk,
        },
    ])
}

fn keys_reply(keys: &Keys) -> Reply {
    match keys {
        Some(keys) => Reply::Array(keys.iter().cloned().map(Reply::Bulk).collect()),
        None => Reply::NullArray,
    }
}

/// `["tracking-redir-broken", id]`.
pub fn redir_broken_message(id: u64) -> Reply {
    Reply::Array(vec![
        Reply::Bulk(Bytes::from_static(b"tracking-redir-broken")),
        Reply::Integer(id as i64),
    ])
}

/// A reading connection, as a shard knows it: where it lives. `T` is the glue's address of
/// a connection.
pub trait Reader: Copy + Eq + std::hash::Hash {}
impl<T: Copy + Eq + std::hash::Hash> Reader for T {}

/// A broadcasting connection on a shard's registry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Broadcaster<R> {
    pub reader: R,
    pub prefixes: Vec<Bytes>,
}

/// One shard's tracking state.
#[derive(Debug)]
pub struct TrackingTable<R: Reader> {
    /// Keys read by tracking connections, and who read them.
    keys: HashMap<Bytes, Vec<R>>,
    items: usize,
    broadcasters: Vec<Broadcaster<R>>,
    /// Keys written under broadcast prefixes this turn: per broadcaster and prefix, the keys
    /// and who wrote them.
    pending: HashMap<(R, Bytes), Vec<Written<R>>>,
}

/// A key written, and by whom (`None`: the server itself, expiring or evicting it).
type Written<R> = (Bytes, Option<R>);

impl<R: Reader> Default for TrackingTable<R> {
    fn default() -> Self {
        TrackingTable {
            keys: HashMap::new(),
            items: 0,
            broadcasters: Vec::new(),
            pending: HashMap::new(),
        }
    }
}

/// An invalidation to send: to `reader`, these keys, and whether its own write caused each.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Invalidation<R> {
    pub reader: R,
    pub keys: Vec<Bytes>,
    /// Per key: written by the reader itself (what NOLOOP filters).
    pub by_self: Vec<bool>,
    /// Sent for a broadcast prefix (a connection out of BCAST mode ignores it, and one in
    /// BCAST mode ignores the others).
    pub bcast: bool,
}

impl<R: Reader> TrackingTable<R> {
    /// Whether writes here must be looked at.
    pub fn is_active(&self) -> bool {
        !self.keys.is_empty() || !self.broadcasters.is_empty()
    }

    pub fn keys(&self) -> usize {
        self.keys.len()
    }

    pub fn items(&self) -> usize {
        self.items
    }

    /// Distinct broadcast prefixes.
    pub fn prefixes(&self) -> usize {
        let mut all: Vec<&Bytes> = self.broadcasters.iter().flat_map(|b| &b.prefixes).collect();
        all.sort();
        all.dedup();
        all.len()
    }

    /// `reader` read `keys`: how many keys are new to the table.
    pub fn remember(&mut self, reader: R, keys: &[Bytes]) -> usize {
        let mut added = 0;
        for key in keys {
            let readers = self.keys.entry(key.clone()).or_insert_with(|| {
                added += 1;
                Vec::new()
            });
            if !readers.contains(&reader) {
                readers.push(reader);
                self.items += 1;
            }
        }
        added
    }

    /// `key` was written by `writer`: the invalidations of its readers (one message per key
    /// and reader, as Redis sends them), and the key dropped from the table. Broadcast
    /// prefixes matching it gather it for [`Self::take_pending`]. Returns how many keys left
    /// the table.
    pub fn written(
        &mut self,
        key: &Bytes,
        writer: Option<R>,
        out: &mut Vec<Invalidation<R>>,
    ) -> usize {
        let removed = self.forget(key, writer, out);
        for broadcaster in &self.broadcasters {
            for prefix in &broadcaster.prefixes {
                if key.starts_with(prefix) {
                    self.pending
                        .entry((broadcaster.reader, prefix.clone()))
                        .or_default()
                        .push((key.clone(), writer));
                }
            }
        }
        removed
    }

    /// `key` leaves the table: its readers' invalidations. How many keys left (0 or 1).
    fn forget(&mut self, key: &Bytes, writer: Option<R>, out: &mut Vec<Invalidation<R>>) -> usize {
        let Some(readers) = self.keys.remove(key) else {
            return 0;
        };
        self.items -= readers.len();
        for reader in readers {
            out.push(Invalidation {
                reader,
                keys: vec![key.clone()],
                by_self: vec![writer == Some(reader)],
                bcast: false,
            });
        }
        1
    }

    /// The broadcast invalidations gathered since the last call: one message per
    /// broadcaster and prefix, with every key written under it.
    pub fn take_pending(&mut self) -> Vec<Invalidation<R>> {
        let mut out: Vec<Invalidation<R>> = self
            .pending
            .drain()
            .map(|((reader, _), keys)| Invalidation {
                reader,
                by_self: keys
                    .iter()
                    .map(|(_, writer)| *writer == Some(reader))
                    .collect(),
                keys: keys.into_iter().map(|(key, _)| key).collect(),
                bcast: true,
            })
            .collect();
        out.sort_by(|a, b| a.keys.cmp(&b.keys));
        out
    }

    pub fn has_pending(&self) -> bool {
        !self.pending.is_empty()
    }

    /// A connection's broadcast registration (replacing any earlier one); none when
    /// `prefixes` is empty.
    pub fn set_broadcaster(&mut self, reader: R, prefixes: Vec<Bytes>) {
        self.broadcasters.retain(|b| b.reader != reader);
        self.pending.retain(|(r, _), _| *r != reader);
        if !prefixes.is_empty() {
            self.broadcasters.push(Broadcaster { reader, prefixes });
        }
    }

    /// FLUSHALL: every key forgotten; how many there were.
    pub fn clear(&mut self) -> usize {
        let keys = self.keys.len();
        self.keys.clear();
        self.items = 0;
        keys
    }

    /// Every key forgotten because the writes that changed them are unknown: how many keys
    /// there were, and every connection that must now drop its whole cache (the readers and
    /// the broadcasters, each once).
    pub fn forget_all(&mut self) -> (usize, Vec<R>) {
        let mut everyone: Vec<R> = self.keys.values().flatten().copied().collect();
        everyone.extend(self.broadcasters.iter().map(|b| b.reader));
        let mut seen = std::collections::HashSet::new();
        everyone.retain(|reader| seen.insert(*reader));
        self.pending.clear();
        (self.clear(), everyone)
    }

    /// One key to forget (the table is over its limit): its readers' invalidations (not the
    /// broadcasters': the key did not change).
    pub fn evict_one(&mut self, out: &mut Vec<Invalidation<R>>) -> bool {
        let Some(key) = self.keys.keys().next().cloned() else {
            return false;
        };
        self.forget(&key, None, out);
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b(s: &str) -> Bytes {
        Bytes::from(s.to_owned())
    }

    fn args(line: &str) -> Result<TrackingArgs, CommandError> {
        TrackingArgs::parse(&line.split(' ').map(b).collect::<Vec<_>>())
    }

    fn message(error: CommandError) -> String {
        String::from_utf8(error.message()).unwrap()
    }

    #[test]
    fn modes_follow_redis() {
        let mut t = Tracking::default();
        assert_eq!(t.redirect_reply(), -1);
        t.apply(args("on redirect 5 noloop").unwrap(), |id| id == 5)
            .unwrap();
        assert_eq!(t.redirect_reply(), 5);
        assert!(t.tracks_reads());
        let err = t.apply(args("on bcast").unwrap(), |_| true).unwrap_err();
        assert!(message(err).contains("BCAST mode on/off"));
        t.apply(args("off").unwrap(), |_| true).unwrap();
        assert_eq!(t, Tracking::default());
        assert!(
            message(t.apply(args("on prefix a").unwrap(), |_| true).unwrap_err())
                .contains("PREFIX option requires BCAST")
        );
        t.apply(args("on bcast prefix FOO prefix BAR").unwrap(), |_| true)
            .unwrap();
        assert!(!t.tracks_reads());
        let err = t
            .apply(args("on bcast prefix FO").unwrap(), |_| true)
            .unwrap_err();
        assert!(message(err).starts_with("ERR Prefix 'FO' overlaps with an existing prefix 'FOO'"));
        let mut fresh = Tracking::default();
        let err = fresh
            .apply(args("on bcast prefix FOOBAR prefix FOO").unwrap(), |_| true)
            .unwrap_err();
        assert!(message(err)
            .starts_with("ERR Prefix 'FOOBAR' overlaps with another provided prefix 'FOO'"));
        assert!(args("on redirect 1 redirect 2").is_err());
        assert!(args("maybe").is_err());
        let mut optin = Tracking::default();
        optin.apply(args("on optin").unwrap(), |_| true).unwrap();
        assert!(!optin.tracks_reads());
        assert!(optin.caching(false).is_err());
        optin.caching(true).unwrap();
        assert!(optin.tracks_reads());
        assert!(Tracking::default().caching(true).is_err());
    }

    #[test]
    fn the_table_invalidates_readers_and_prefixes() {
        let mut table: TrackingTable<u32> = TrackingTable::default();
        assert_eq!(table.remember(1, &[b("a"), b("b")]), 2);
        assert_eq!(table.remember(2, &[b("a")]), 0);
        assert_eq!((table.keys(), table.items()), (2, 3));
        table.set_broadcaster(3, vec![b("a"), b("x:")]);
        let mut out = Vec::new();
        assert_eq!(table.written(&b("a"), Some(2), &mut out), 1);
        assert_eq!(out.len(), 2);
        assert_eq!(out[1].by_self, vec![true]);
        assert_eq!((table.keys(), table.items()), (1, 1));
        table.written(&b("x:1"), None, &mut out);
        let pending = table.take_pending();
        assert_eq!(pending.len(), 2);
        assert!(pending.iter().all(|inv| inv.bcast && inv.reader == 3));
        assert_eq!(table.prefixes(), 2);
        assert!(table.evict_one(&mut out));
        assert_eq!(table.keys(), 0);
        assert!(!table.has_pending(), "an evicted key did not change");
        table.remember(1, &[b("c")]);
        assert_eq!(table.forget_all(), (1, vec![1, 3]));
        table.set_broadcaster(3, Vec::new());
        assert!(!table.is_active());
    }
}
