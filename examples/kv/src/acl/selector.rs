//! A selector: which commands (a bitmap over the `Catalog`), keys and channels a user may
//! use. Rules apply in order (`+@read -keys ~app:* &news`), with Redis 7.0's semantics and
//! error causes; [`Selector::describe`] translates the bitmap back into rules.

use std::collections::BTreeMap;

use bytes::Bytes;

use super::catalog::{category_bit, Catalog, CATEGORIES};
use super::RuleError;
use crate::glob::glob_match;

/// A key pattern and what it grants: `~p` both, `%R~p` reads, `%W~p` writes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyPattern {
    pub pattern: Bytes,
    pub read: bool,
    pub write: bool,
    /// How `pattern` is matched, decided once when the rule is added.
    matcher: Matcher,
    /// The pattern's first literal bytes (up to 8, see [`head_word`]) and the mask of them:
    /// a key whose first bytes differ is rejected by one comparison (a glob's mask is 0).
    head: u64,
    head_mask: u64,
}

/// The first 8 bytes of `bytes` as one little-endian number, zero-padded: one load for a key
/// of 8 bytes or more, two (overlapping) or three for a shorter one, without a loop.
#[inline]
pub(crate) fn head_word(bytes: &[u8]) -> u64 {
    let n = bytes.len();
    if let Some(head) = bytes.first_chunk::<8>() {
        u64::from_le_bytes(*head)
    } else if let (Some(first), Some(last)) = (bytes.first_chunk::<4>(), bytes.last_chunk::<4>()) {
        // Bytes n-4..n shifted into place over the first four: overlaps hold the same bytes.
        u64::from(u32::from_le_bytes(*first))
            | u64::from(u32::from_le_bytes(*last)) << (8 * (n - 4))
    } else if n > 0 {
        u64::from(bytes[0])
            | u64::from(bytes[n / 2]) << (8 * (n / 2))
            | u64::from(bytes[n - 1]) << (8 * (n - 1))
    } else {
        0
    }
}

/// The mask of the first `n` bytes of a [`head_word`].
fn head_mask(n: usize) -> u64 {
    if n >= 8 {
        u64::MAX
    } else {
        (1 << (8 * n)) - 1
    }
}

/// Most key patterns are a literal (`~config`) or a literal prefix and `*` (`~app:*`): those
/// are compared as bytes, without the glob matcher; the rest go through it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Matcher {
    Literal,
    /// The first `n` bytes of the pattern, then anything.
    Prefix(usize),
    Glob,
}

impl Matcher {
    fn of(pattern: &[u8]) -> Matcher {
        let body = pattern.len() - pattern.iter().rev().take_while(|&&b| b == b'*').count();
        if (pattern[..body].iter()).any(|b| matches!(b, b'*' | b'?' | b'[' | b'\\')) {
            Matcher::Glob
        } else if body == pattern.len() {
            Matcher::Literal
        } else {
            Matcher::Prefix(body)
        }
    }
}

impl KeyPattern {
    fn new(pattern: &[u8], read: bool, write: bool) -> KeyPattern {
        let matcher = Matcher::of(pattern);
        let literal = match matcher {
            Matcher::Literal => pattern.len(),
            Matcher::Prefix(n) => n,
            Matcher::Glob => 0,
        };
        let head_mask = head_mask(literal);
        KeyPattern {
            pattern: Bytes::copy_from_slice(pattern),
            read,
            write,
            matcher,
            head: head_word(&pattern[..literal.min(8)]) & head_mask,
            head_mask,
        }
    }

    /// Whether `key` matches the pattern (as Redis's glob would).
    pub fn matches(&self, key: &[u8]) -> bool {
        self.matches_head(key, head_word(key))
    }

    /// [`matches`](Self::matches), given `key`'s [`head_word`]: the first bytes decide
    /// most patterns (a literal or prefix of up to 8 bytes entirely, with the length).
    #[inline]
    pub(crate) fn matches_head(&self, key: &[u8], key_head: u64) -> bool {
        if key_head & self.head_mask != self.head {
            return false;
        }
        match self.matcher {
            Matcher::Literal => {
                key.len() == self.pattern.len() && (key.len() <= 8 || key[8..] == self.pattern[8..])
            }
            Matcher::Prefix(n) => {
                key.len() >= n && (n <= 8 || has_prefix(&key[8..], &self.pattern[8..n]))
            }
            Matcher::Glob => glob_match(&self.pattern, key, false),
        }
    }

    /// The pattern as a [`ShortHead`], if it is a literal or a literal prefix and `*` of up
    /// to 8 bytes (`~app:*`, `~config`).
    pub(crate) fn short_head(&self) -> Option<ShortHead> {
        let (len, exact) = match self.matcher {
            Matcher::Literal => (self.pattern.len(), true),
            Matcher::Prefix(n) => (n, false),
            Matcher::Glob => return None,
        };
        (len <= 8).then_some(ShortHead {
            head: self.head,
            mask: self.head_mask,
            len,
            exact,
        })
    }

    /// `~p`, `%R~p` or `%W~p`.
    fn describe(&self, out: &mut Vec<u8>) {
        match (self.read, self.write) {
            (true, false) => out.extend_from_slice(b"%R~"),
            (false, true) => out.extend_from_slice(b"%W~"),
            _ => out.push(b'~'),
        }
        out.extend_from_slice(&self.pattern);
    }
}

/// A key pattern decided by a key's [`head_word`] and length alone: a literal of up to 8
/// bytes (`exact`), or a literal prefix of up to 8 bytes and `*`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ShortHead {
    head: u64,
    mask: u64,
    len: usize,
    exact: bool,
}

impl ShortHead {
    pub(crate) const EMPTY: ShortHead = ShortHead {
        head: 0,
        mask: 0,
        len: 0,
        exact: false,
    };

    /// [`KeyPattern::matches`] of the pattern this was made from.
    #[inline]
    pub(crate) fn matches(&self, key: &[u8], key_head: u64) -> bool {
        key_head & self.mask == self.head
            && if self.exact {
                key.len() == self.len
            } else {
                key.len() >= self.len
            }
    }
}

/// Whether `key` starts with `prefix`, byte by byte: key prefixes are short and most keys
/// differ from most patterns in their first byte, where this stops (a `memcmp` call per
/// pattern costs more than the comparison itself).
fn has_prefix(key: &[u8], prefix: &[u8]) -> bool {
    key.len() >= prefix.len() && key.iter().zip(prefix).all(|(k, p)| k == p)
}

/// How a command uses a key, from its key spec's flags (Redis's ACL reading of them:
/// `access` needs read permission; `insert`, `update` and `delete` need write permission;
/// neither, e.g. EXISTS or TYPE, needs only the pattern to match).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct KeyAccess {
    pub read: bool,
    pub write: bool,
}

/// A key or channel argument of a request: its position in the arguments and how it is used.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeyRef {
    pub pos: usize,
    pub access: KeyAccess,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChannelRef {
    pub pos: usize,
    /// PSUBSCRIBE's patterns match a rule only literally.
    pub pattern: bool,
}

/// Why a selector refused a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Denied {
    Command,
    /// The key at this argument position.
    Key(usize),
    /// The channel at this argument position.
    Channel(usize),
}

impl Denied {
    /// Redis's order of relevance when no selector allows a request: command < key <
    /// channel, and among equals the later argument.
    fn rank(self) -> (u8, usize) {
        match self {
            Denied::Command => (1, 0),
            Denied::Key(pos) => (2, pos),
            Denied::Channel(pos) => (4, pos),
        }
    }

    pub fn more_relevant(self, other: Denied) -> bool {
        self.rank() > other.rank()
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Selector {
    /// One bit per catalog id.
    bits: Vec<u64>,
    /// Set by `+@all` only, cleared by `-@all`: the user gets commands added later (and
    /// its rules are described from `+@all`).
    future: bool,
    /// Every command allowed (`+@all` and nothing removed since): the check's fast path.
    pub allcommands: bool,
    /// `+select|0`: first arguments allowed for a command whose bit is clear.
    first_args: BTreeMap<usize, Vec<String>>,
    pub allkeys: bool,
    pub keys: Vec<KeyPattern>,
    pub allchannels: bool,
    pub channels: Vec<Bytes>,
}

impl Selector {
    /// Nothing allowed; every channel if `acl-pubsub-default` is `allchannels`.
    pub fn new(allchannels: bool) -> Selector {
        Selector {
            bits: vec![0; Catalog::get().len().div_ceil(64)],
            future: false,
            allcommands: false,
            first_args: BTreeMap::new(),
            allkeys: false,
            keys: Vec::new(),
            allchannels,
            channels: Vec::new(),
        }
    }

    pub fn bit(&self, id: usize) -> bool {
        self.bits[id / 64] & (1 << (id % 64)) != 0
    }

    /// Whether the command part of [`check`](Self::check) allows command `id` whatever its
    /// arguments (`Some(true)`), refuses it whatever they are (`Some(false)`), or depends
    /// on its first argument (`None`: a `+select|0` rule).
    pub(crate) fn allows_command(&self, id: usize, no_auth: bool) -> Option<bool> {
        if self.allcommands || no_auth || self.bit(id) {
            Some(true)
        } else if self.first_args.contains_key(&id) {
            None
        } else {
            Some(false)
        }
    }

    fn set_bit(&mut self, id: usize, on: bool) {
        if on {
            self.bits[id / 64] |= 1 << (id % 64);
        } else {
            self.bits[id / 64] &= !(1 << (id % 64));
            self.allcommands = false;
        }
    }

    /// `+cmd` / `-cmd`: the command and, for a container, every subcommand.
    fn change(&mut self, id: usize, on: bool) {
        self.set_bit(id, on);
        self.first_args.remove(&id);
        for &child in &Catalog::get().entries[id].children {
            self.set_bit(child, on);
        }
    }

    fn set_all(&mut self, on: bool) {
        let fill = if on { u64::MAX } else { 0 };
        self.bits.iter_mut().for_each(|word| *word = fill);
        self.future = on;
        self.allcommands = on;
        self.first_args.clear();
    }

    fn category(&mut self, name: &str, on: bool) -> Result<(), RuleError> {
        let mask = category_bit(name).ok_or(RuleError::UnknownCommand)?;
        let catalog = Catalog::get();
        for id in catalog.in_category(mask).collect::<Vec<_>>() {
            self.change(id, on);
        }
        Ok(())
    }

    /// Applies one rule (not a user-level one such as `on` or `>pass`).
    pub fn apply(&mut self, op: &[u8]) -> Result<(), RuleError> {
        let lower = op.to_ascii_lowercase();
        match lower.as_slice() {
            b"allkeys" | b"~*" => {
                self.allkeys = true;
                self.keys.clear();
                return Ok(());
            }
            b"resetkeys" => {
                self.allkeys = false;
                self.keys.clear();
                return Ok(());
            }
            b"allchannels" | b"&*" => {
                self.allchannels = true;
                self.channels.clear();
                return Ok(());
            }
            b"resetchannels" => {
                self.allchannels = false;
                self.channels.clear();
                return Ok(());
            }
            b"allcommands" | b"+@all" => {
                self.set_all(true);
                return Ok(());
            }
            b"nocommands" | b"-@all" => {
                self.set_all(false);
                return Ok(());
            }
            _ => {}
        }
        match op.first() {
            Some(b'~' | b'%') => self.add_key_pattern(op),
            Some(b'&') => {
                if self.allchannels {
                    return Err(RuleError::ChannelsAfterAll);
                }
                let channel = Bytes::copy_from_slice(&op[1..]);
                if !self.channels.contains(&channel) {
                    self.channels.push(channel);
                }
                Ok(())
            }
            Some(&sign @ (b'+' | b'-')) => {
                let on = sign == b'+';
                let rest = std::str::from_utf8(&op[1..]).map_err(|_| RuleError::UnknownCommand)?;
                if let Some(category) = rest.strip_prefix('@') {
                    return self.category(category, on);
                }
                let catalog = Catalog::get();
                if !on || !rest.contains('|') {
                    let id = catalog.lookup(rest).ok_or(RuleError::UnknownCommand)?;
                    self.change(id, on);
                    return Ok(());
                }
                let (command, sub) = rest.rsplit_once('|').unwrap_or((rest, ""));
                let id = catalog.lookup(command).ok_or(RuleError::UnknownCommand)?;
                let entry = &catalog.entries[id];
                if entry.parent.is_some() {
                    return Err(RuleError::FirstArgOfSubcommand);
                }
                if sub.is_empty() {
                    return Err(RuleError::Syntax);
                }
                if entry.children.is_empty() {
                    // SELECT|0, DEBUG|OBJECT: a first argument allowed on its own.
                    let args = self.first_args.entry(id).or_default();
                    let sub = sub.to_ascii_lowercase();
                    if !args.contains(&sub) {
                        args.push(sub);
                    }
                } else {
                    let id = catalog.lookup(rest).ok_or(RuleError::UnknownCommand)?;
                    self.change(id, true);
                }
                Ok(())
            }
            _ => Err(RuleError::Syntax),
        }
    }

    fn add_key_pattern(&mut self, op: &[u8]) -> Result<(), RuleError> {
        if self.allkeys {
            return Err(RuleError::KeysAfterAll);
        }
        let (mut read, mut write) = (false, false);
        let mut offset = 1;
        if op[0] == b'%' {
            let mut tilde = false;
            while offset < op.len() {
                match op[offset].to_ascii_uppercase() {
                    b'R' if !read => read = true,
                    b'W' if !write => write = true,
                    b'~' => {
                        offset += 1;
                        tilde = true;
                        break;
                    }
                    _ => return Err(RuleError::Syntax),
                }
                offset += 1;
            }
            let _ = tilde;
            if !read && !write {
                return Err(RuleError::Syntax);
            }
        } else {
            (read, write) = (true, true);
        }
        let pattern = &op[offset.min(op.len())..];
        if pattern == b"*" && read && write {
            self.allkeys = true;
            self.keys.clear();
            return Ok(());
        }
        match self.keys.iter_mut().find(|k| k.pattern == pattern) {
            Some(existing) => {
                existing.read |= read;
                existing.write |= write;
            }
            None => self.keys.push(KeyPattern::new(pattern, read, write)),
        }
        Ok(())
    }

    /// Whether the selector lets a request run: the command (or its first argument), then
    /// each key, then each channel (the request's, as `keys` finds them).
    #[inline]
    pub fn check(
        &self,
        id: usize,
        no_auth: bool,
        args: &[Bytes],
        keys: &[KeyRef],
        channels: &[ChannelRef],
    ) -> Result<(), Denied> {
        if !self.allcommands && !no_auth && !self.bit(id) {
            let entry = &Catalog::get().entries[id];
            let at = if entry.parent.is_some() { 2 } else { 1 };
            let allowed =
                (self.first_args.get(&id))
                    .zip(args.get(at))
                    .is_some_and(|(allowed, arg)| {
                        allowed
                            .iter()
                            .any(|a| arg.eq_ignore_ascii_case(a.as_bytes()))
                    });
            if !allowed {
                return Err(Denied::Command);
            }
        }
        if !self.allkeys {
            for key in keys {
                if !self.key_allowed(&args[key.pos], key.access) {
                    return Err(Denied::Key(key.pos));
                }
            }
        }
        if !self.allchannels {
            for channel in channels {
                if !self.channel_allowed(&args[channel.pos], channel.pattern) {
                    return Err(Denied::Channel(channel.pos));
                }
            }
        }
        Ok(())
    }

    #[inline]
    pub fn key_allowed(&self, key: &[u8], access: KeyAccess) -> bool {
        if self.allkeys {
            return true;
        }
        let head = head_word(key);
        (self.keys.iter()).any(|p| {
            (p.read || !access.read) && (p.write || !access.write) && p.matches_head(key, head)
        })
    }

    /// Whether every key may be read (SORT's BY and GET options need it).
    pub fn reads_every_key(&self) -> bool {
        self.allkeys
            || self
                .keys
                .iter()
                .any(|p| p.read && p.pattern.as_ref() == b"*")
    }

    pub fn channel_allowed(&self, channel: &[u8], pattern: bool) -> bool {
        self.allchannels || channel_in(&self.channels, channel, pattern)
    }

    /// `~a %R~b resetchannels &c +@all -get`: the rules that rebuild this selector.
    pub fn describe(&self) -> Vec<u8> {
        let mut out = Vec::new();
        if self.allkeys {
            out.extend_from_slice(b"~* ");
        } else {
            for key in &self.keys {
                key.describe(&mut out);
                out.push(b' ');
            }
        }
        if self.allchannels {
            out.extend_from_slice(b"&* ");
        } else {
            out.extend_from_slice(b"resetchannels ");
            for channel in &self.channels {
                out.push(b'&');
                out.extend_from_slice(channel);
                out.push(b' ');
            }
        }
        out.extend_from_slice(self.describe_commands().as_bytes());
        out
    }

    /// GETUSER's `keys`: the patterns, space-separated (`~*` for allkeys).
    pub fn keys_text(&self) -> Vec<u8> {
        if self.allkeys {
            return b"~*".to_vec();
        }
        let mut out = Vec::new();
        for (i, key) in self.keys.iter().enumerate() {
            if i > 0 {
                out.push(b' ');
            }
            key.describe(&mut out);
        }
        out
    }

    /// GETUSER's `channels`.
    pub fn channels_text(&self) -> Vec<u8> {
        if self.allchannels {
            return b"&*".to_vec();
        }
        let mut out = Vec::new();
        for (i, channel) in self.channels.iter().enumerate() {
            if i > 0 {
                out.push(b' ');
            }
            out.push(b'&');
            out.extend_from_slice(channel);
        }
        out
    }

    /// The command rules: `+@all` or `-@all`, then the categories that bring a copy closest
    /// to this bitmap (best first), then single commands and first arguments for the rest.
    pub fn describe_commands(&self) -> String {
        let catalog = Catalog::get();
        let mut fake = Selector::new(false);
        let mut rules = vec![if self.future { "+@all" } else { "-@all" }.to_owned()];
        fake.set_all(self.future);
        let sign = if self.future { '-' } else { '+' };
        let mismatches = |fake: &Selector| {
            (self.bits.iter().zip(&fake.bits))
                .map(|(a, b)| (a ^ b).count_ones())
                .sum::<u32>()
        };
        let mut used = [false; CATEGORIES.len()];
        loop {
            let now = mismatches(&fake);
            let mut best: Option<(u32, usize, Selector)> = None;
            for (i, name) in CATEGORIES.iter().enumerate() {
                if used[i] {
                    continue;
                }
                let mut trial = fake.clone();
                if trial.category(name, !self.future).is_err() {
                    continue;
                }
                let left = mismatches(&trial);
                if left < now && best.as_ref().is_none_or(|(b, _, _)| left < *b) {
                    best = Some((left, i, trial));
                }
            }
            let Some((_, i, trial)) = best else { break };
            used[i] = true;
            fake = trial;
            rules.push(format!("{sign}@{}", CATEGORIES[i]));
        }
        for (id, entry) in catalog.entries.iter().enumerate() {
            let mine = self.bit(id);
            if mine != fake.bit(id) {
                rules.push(format!("{}{}", if mine { '+' } else { '-' }, entry.name()));
                fake.change(id, mine);
            }
            if !mine {
                for arg in self.first_args.get(&id).into_iter().flatten() {
                    rules.push(format!("+{}|{arg}", entry.name()));
                }
            }
        }
        rules.join(" ")
    }
}

/// Whether `channel` is in `list`: a pattern rule matches a channel, and a pattern (what
/// PSUBSCRIBE asks for) only the same pattern.
pub fn channel_in(list: &[Bytes], channel: &[u8], pattern: bool) -> bool {
    list.iter().any(|rule| {
        if pattern {
            rule.as_ref() == channel
        } else {
            glob_match(rule, channel, false)
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn selector(rules: &str) -> Selector {
        let mut s = Selector::new(false);
        for rule in rules.split(' ').filter(|r| !r.is_empty()) {
            s.apply(rule.as_bytes()).unwrap();
        }
        s
    }

    fn id(name: &str) -> usize {
        Catalog::get().id(name).unwrap()
    }

    #[test]
    fn commands_categories_and_subcommands() {
        let s = selector("+@read -mget +config|get");
        assert!(s.bit(id("get")) && !s.bit(id("mget")) && !s.bit(id("set")));
        assert!(s.bit(id("config|get")) && !s.bit(id("config|set")) && !s.bit(id("config")));
        let all = selector("+@all -client|kill");
        assert!(!all.allcommands && all.future && all.bit(id("client|id")));
        assert_eq!(all.describe_commands(), "+@all -client|kill");
        assert_eq!(
            selector("+memory|doctor").describe_commands(),
            "-@all +memory|doctor"
        );
        assert_eq!(
            selector("+memory|doctor +memory").describe_commands(),
            "-@all +memory"
        );
        assert_eq!(selector("+@all +client|id").describe_commands(), "+@all");
    }

    #[test]
    fn single_categories_describe_as_themselves() {
        for category in CATEGORIES {
            let plus = selector(&format!("+@{category}"));
            assert_eq!(plus.describe_commands(), format!("-@all +@{category}"));
            let minus = selector(&format!("+@all -@{category}"));
            assert_eq!(minus.describe_commands(), format!("+@all -@{category}"));
        }
    }

    #[test]
    fn first_args_and_their_description() {
        let s = selector("-@all +select|0 +debug|object");
        assert!(s.describe_commands().contains("+select|0"));
        let args = |line: &str| -> Vec<Bytes> {
            line.split(' ').map(|a| Bytes::from(a.to_owned())).collect()
        };
        let check = |line: &str| {
            let args = args(line);
            let name = String::from_utf8_lossy(&args[0]).to_lowercase();
            s.check(id(&name), false, &args, &[], &[])
        };
        assert_eq!(check("SELECT 0"), Ok(()));
        assert_eq!(check("SELECT 1"), Err(Denied::Command));
        let mut bad = Selector::new(false);
        assert_eq!(
            bad.apply(b"+config|get|x"),
            Err(RuleError::FirstArgOfSubcommand)
        );
        assert_eq!(bad.apply(b"+config|asdf"), Err(RuleError::UnknownCommand));
        assert_eq!(bad.apply(b"+get|a|b"), Err(RuleError::UnknownCommand));
        assert_eq!(bad.apply(b"-select|0"), Err(RuleError::UnknownCommand));
        assert_eq!(bad.apply(b"+@nope"), Err(RuleError::UnknownCommand));
        assert_eq!(bad.apply(b"bogus"), Err(RuleError::Syntax));
    }

    #[test]
    fn key_patterns_with_read_and_write() {
        let s = selector("%R~read* %W~write* ~rw*");
        let read = KeyAccess {
            read: true,
            write: false,
        };
        let write = KeyAccess {
            read: false,
            write: true,
        };
        assert!(s.key_allowed(b"read1", read) && !s.key_allowed(b"read1", write));
        assert!(s.key_allowed(b"write1", write) && !s.key_allowed(b"write1", read));
        assert!(s.key_allowed(
            b"rw",
            KeyAccess {
                read: true,
                write: true
            }
        ));
        assert!(s.key_allowed(b"write1", KeyAccess::default()));
        assert!(!s.key_allowed(b"nothing", KeyAccess::default()));
        assert_eq!(selector("%R~foo %W~foo %RW~bar").keys_text(), b"~foo ~bar");
        let mut all = selector("allkeys");
        assert_eq!(all.apply(b"~foo"), Err(RuleError::KeysAfterAll));
        assert_eq!(Selector::new(false).apply(b"%X~a"), Err(RuleError::Syntax));
        assert_eq!(Selector::new(false).apply(b"%~a"), Err(RuleError::Syntax));
        assert_eq!(selector("%R").keys_text(), b"%R~");
    }

    #[test]
    fn compiled_key_patterns_match_as_the_glob_does() {
        let patterns: [&[u8]; 19] = [
            b"key:*",
            b"key:**",
            b"key",
            b"",
            b"*",
            b"k?y",
            b"k[ae]y*",
            b"\\*x",
            b"a*b",
            b"%",
            b"key:",
            b"**",
            b"counter:*",
            b"averylongprefix:*",
            b"averylongliteral",
            b"\0*",
            b"\0\0",
            b"key:1234*",
            b"12345678",
        ];
        let keys: [&[u8]; 19] = [
            b"key:1",
            b"key:",
            b"key",
            b"ke",
            b"",
            b"kay:9",
            b"*x",
            b"a-b",
            b"KEY:1",
            b"counter:",
            b"counter",
            b"averylongprefix:1",
            b"averylongprefix",
            b"averylongliteral",
            b"averylongliteraL",
            b"\0",
            b"\0\0",
            b"key:12345678",
            b"12345678",
        ];
        for pattern in patterns {
            let compiled = KeyPattern::new(pattern, true, true);
            let short = compiled.short_head();
            for key in keys {
                if let Some(short) = short {
                    assert_eq!(short.matches(key, head_word(key)), compiled.matches(key));
                }
                assert_eq!(
                    compiled.matches(key),
                    glob_match(pattern, key, false),
                    "{:?} against {:?}",
                    String::from_utf8_lossy(pattern),
                    String::from_utf8_lossy(key)
                );
            }
        }
        assert_eq!(head_word(b"ab"), 0x6261);
        let bytes: Vec<u8> = (1..=17).collect();
        for n in 0..=bytes.len() {
            let slow =
                (bytes[..n.min(8)].iter().rev()).fold(0, |word, &b| (word << 8) | u64::from(b));
            assert_eq!(head_word(&bytes[..n]), slow, "{n} bytes");
        }
        assert_eq!(head_word(b"abcdefghij"), u64::from_le_bytes(*b"abcdefgh"));
        assert_eq!(Matcher::of(b"app:*"), Matcher::Prefix(4));
        assert_eq!(Matcher::of(b"app"), Matcher::Literal);
        assert_eq!(Matcher::of(b"a?p*"), Matcher::Glob);
        let short = |p: &[u8]| KeyPattern::new(p, true, true).short_head().is_some();
        assert!(short(b"key:*") && short(b"12345678") && short(b"counter:*") && short(b""));
        assert!(!short(b"averylongprefix:*") && !short(b"k?y") && !short(b"123456789"));
    }

    #[test]
    fn channels_and_patterns() {
        let s = selector("&foo:1 &bar:*");
        assert!(s.channel_allowed(b"bar:2", false) && !s.channel_allowed(b"bar:2", true));
        assert!(s.channel_allowed(b"bar:*", true) && !s.channel_allowed(b"zap", false));
        let mut all = selector("allchannels");
        assert_eq!(all.apply(b"&x"), Err(RuleError::ChannelsAfterAll));
        assert_eq!(
            String::from_utf8(s.describe()).unwrap(),
            "resetchannels &foo:1 &bar:* -@all"
        );
    }
}
