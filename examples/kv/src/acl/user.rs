//! A user: enabled or not, its passwords (SHA-256, hex, as Redis stores them), its root
//! selector and extra selectors; the user-level rules of ACL SETUSER; ACL LIST's and ACL
//! GETUSER's descriptions; and the permission check over its selectors.

use bytes::Bytes;
use sha2::{Digest, Sha256};

use super::catalog::Catalog;
use super::keys::{ChannelPlan, Found};
use super::selector::{ChannelRef, Denied, KeyPattern, Selector};
use super::verdict::Verdicts;
use super::RuleError;
use crate::reply::Reply;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct User {
    pub name: Bytes,
    /// Survives ACL SETUSER; a user made anew (ACL LOAD) gets another one, which tells its
    /// connections they were authenticated as a user that no longer exists.
    pub identity: u64,
    pub enabled: bool,
    pub nopass: bool,
    skip_sanitize: bool,
    sanitize: bool,
    /// SHA-256 of each password, lowercase hex.
    pub passwords: Vec<String>,
    /// `selectors[0]` is the root selector (the rules outside parentheses).
    pub selectors: Vec<Selector>,
    /// Every command, key and channel allowed: the check is skipped.
    pub unrestricted: bool,
    /// Every selector's key patterns, in order: a [`Verdict`](super::verdict::Verdict)
    /// names the ones a command's key may match as bits over this list.
    pub(crate) key_patterns: Vec<KeyPattern>,
    /// Its rules on each command it ran, worked out once.
    pub(crate) verdicts: Verdicts,
}

/// The SHA-256 of `password` in lowercase hex.
pub fn hash_password(password: &[u8]) -> String {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let digest = Sha256::digest(password);
    // Two table lookups per byte: AUTH hashes once per connection, and a formatting call
    // per byte cost several times the hash itself.
    let mut hex = String::with_capacity(2 * digest.len());
    for byte in digest {
        hex.push(char::from(HEX[usize::from(byte >> 4)]));
        hex.push(char::from(HEX[usize::from(byte & 15)]));
    }
    hex
}

fn valid_hash(hash: &[u8]) -> bool {
    hash.len() == 64 && hash.iter().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// Splits a selector's inside (`+get ~k`) into rules, as Redis splits arguments.
fn selector_rules(inside: &[u8]) -> Vec<&[u8]> {
    inside
        .split(|&b| b == b' ' || b == b'\t')
        .filter(|r| !r.is_empty())
        .collect()
}

impl User {
    /// A new user: off, no password, no permissions (channels per `acl-pubsub-default`).
    pub fn new(name: Bytes, identity: u64, allchannels: bool) -> User {
        User {
            name,
            identity,
            enabled: false,
            nopass: false,
            skip_sanitize: false,
            sanitize: false,
            passwords: Vec::new(),
            selectors: vec![Selector::new(allchannels)],
            unrestricted: false,
            key_patterns: Vec::new(),
            verdicts: Verdicts::default(),
        }
    }

    /// The default user as Redis creates it: `on nopass ~* &* +@all`.
    pub fn default_user(identity: u64) -> User {
        let mut user = User::new(Bytes::from_static(b"default"), identity, false);
        for rule in ["+@all", "~*", "&*", "on", "nopass"] {
            // Fixed rules that always apply.
            let _ = user.apply(rule.as_bytes(), false);
        }
        user
    }

    pub fn root(&self) -> &Selector {
        &self.selectors[0]
    }

    /// Applies one rule (selectors in parentheses included); `allchannels` is
    /// `acl-pubsub-default` for `reset` and new selectors.
    pub fn apply(&mut self, op: &[u8], allchannels: bool) -> Result<(), RuleError> {
        let result = self.apply_inner(op, allchannels);
        let root = &self.selectors[0];
        self.unrestricted = root.allcommands && root.allkeys && root.allchannels;
        self.key_patterns = (self.selectors.iter())
            .flat_map(|s| s.keys.iter().cloned())
            .collect();
        self.verdicts = Verdicts::default();
        result
    }

    fn apply_inner(&mut self, op: &[u8], allchannels: bool) -> Result<(), RuleError> {
        match op.to_ascii_lowercase().as_slice() {
            b"on" => self.enabled = true,
            b"off" => self.enabled = false,
            b"skip-sanitize-payload" => {
                self.skip_sanitize = true;
                self.sanitize = false;
            }
            b"sanitize-payload" => {
                self.skip_sanitize = false;
                self.sanitize = true;
            }
            b"nopass" => {
                self.nopass = true;
                self.passwords.clear();
            }
            b"resetpass" => {
                self.nopass = false;
                self.passwords.clear();
            }
            b"clearselectors" => self.selectors.truncate(1),
            b"reset" => {
                for rule in ["resetpass", "resetkeys", "resetchannels"] {
                    self.apply_inner(rule.as_bytes(), allchannels)?;
                }
                if allchannels {
                    self.apply_inner(b"allchannels", allchannels)?;
                }
                for rule in ["off", "sanitize-payload", "clearselectors", "-@all"] {
                    self.apply_inner(rule.as_bytes(), allchannels)?;
                }
            }
            _ => match op.first() {
                Some(b'>') => {
                    let hash = hash_password(&op[1..]);
                    if !self.passwords.contains(&hash) {
                        self.passwords.push(hash);
                    }
                    self.nopass = false;
                }
                Some(b'#') => {
                    if !valid_hash(&op[1..]) {
                        return Err(RuleError::BadHash);
                    }
                    let hash = String::from_utf8_lossy(&op[1..]).into_owned();
                    if !self.passwords.contains(&hash) {
                        self.passwords.push(hash);
                    }
                    self.nopass = false;
                }
                Some(b'<') => self.remove_password(hash_password(&op[1..]))?,
                Some(b'!') => {
                    if !valid_hash(&op[1..]) {
                        return Err(RuleError::BadHash);
                    }
                    self.remove_password(String::from_utf8_lossy(&op[1..]).into_owned())?;
                }
                Some(b'(') if op.last() == Some(&b')') => {
                    let mut selector = Selector::new(allchannels);
                    for rule in selector_rules(&op[1..op.len() - 1]) {
                        selector.apply(rule)?;
                    }
                    self.selectors.push(selector);
                }
                _ => self.selectors[0].apply(op)?,
            },
        }
        Ok(())
    }

    fn remove_password(&mut self, hash: String) -> Result<(), RuleError> {
        let at =
            (self.passwords.iter().position(|p| *p == hash)).ok_or(RuleError::NoSuchPassword)?;
        self.passwords.remove(at);
        Ok(())
    }

    /// Whether `password` opens this user (enabled, and `nopass` or a matching hash).
    pub fn authenticates(&self, password: &[u8]) -> bool {
        if !self.enabled {
            return false;
        }
        if self.nopass {
            return true;
        }
        let hash = hash_password(password);
        // Compared without an early exit, so timing does not reveal a prefix.
        self.passwords.iter().fold(false, |found, stored| {
            found | constant_time_eq(stored.as_bytes(), hash.as_bytes())
        })
    }

    fn flags(&self) -> Vec<&'static str> {
        let mut flags = vec![if self.enabled { "on" } else { "off" }];
        if self.nopass {
            flags.push("nopass");
        }
        if self.skip_sanitize {
            flags.push("skip-sanitize-payload");
        }
        if self.sanitize {
            flags.push("sanitize-payload");
        }
        flags
    }

    /// ACL LIST's line and the ACL file's: `user NAME on #hash ~* &* +@all (...)`.
    pub fn describe(&self) -> Vec<u8> {
        let mut out = b"user ".to_vec();
        out.extend_from_slice(&self.name);
        for flag in self.flags() {
            out.push(b' ');
            out.extend_from_slice(flag.as_bytes());
        }
        for hash in &self.passwords {
            out.extend_from_slice(b" #");
            out.extend_from_slice(hash.as_bytes());
        }
        out.push(b' ');
        out.extend_from_slice(&self.selectors[0].describe());
        for selector in &self.selectors[1..] {
            out.extend_from_slice(b" (");
            out.extend_from_slice(&selector.describe());
            out.push(b')');
        }
        out
    }

    /// ACL GETUSER's map.
    pub fn getuser_reply(&self) -> Reply {
        let bulk = |text: &[u8]| Reply::Bulk(Bytes::copy_from_slice(text));
        let selector_fields = |s: &Selector| {
            vec![
                bulk(b"commands"),
                bulk(s.describe_commands().as_bytes()),
                bulk(b"keys"),
                bulk(&s.keys_text()),
                bulk(b"channels"),
                bulk(&s.channels_text()),
            ]
        };
        let mut fields = vec![
            bulk(b"flags"),
            Reply::Array(self.flags().iter().map(|f| bulk(f.as_bytes())).collect()),
            bulk(b"passwords"),
            Reply::Array(self.passwords.iter().map(|p| bulk(p.as_bytes())).collect()),
        ];
        fields.extend(selector_fields(&self.selectors[0]));
        fields.push(bulk(b"selectors"));
        fields.push(Reply::Array(
            self.selectors[1..]
                .iter()
                .map(|s| Reply::Map(selector_fields(s)))
                .collect(),
        ));
        Reply::Map(fields)
    }

    /// Whether the user may run command `id` with `args`: allowed if any selector allows
    /// it; otherwise Redis's most relevant refusal (see [`Denied::more_relevant`]).
    #[inline]
    pub fn check(&self, id: usize, args: &[Bytes]) -> Result<(), Denied> {
        if self.unrestricted {
            return Ok(());
        }
        let entry = &Catalog::get().entries[id];
        // Found once for every selector, and only when one of them matches keys: through the
        // command's plan, so most requests cost no allocation here.
        let keys = if self.selectors.iter().all(|s| s.allkeys) {
            Found::Many(Vec::new())
        } else {
            super::keys::found(entry.keys, entry.meta, args)
        };
        let found_channels;
        let channels: &[ChannelRef] = if entry.channels == ChannelPlan::None
            || self.selectors.iter().all(|s| s.allchannels)
        {
            &[]
        } else {
            found_channels = super::keys::channels(entry.name(), args);
            &found_channels
        };
        let mut relevant = Denied::Command;
        for selector in &self.selectors {
            match selector.check(id, entry.no_auth, args, keys.as_slice(), channels) {
                Ok(()) => return Ok(()),
                Err(denied) if denied.more_relevant(relevant) => relevant = denied,
                Err(_) => {}
            }
        }
        Err(relevant)
    }

    /// Whether some selector that allows command `id` may read every key (SORT BY/GET).
    pub fn reads_every_key(&self, id: usize, args: &[Bytes]) -> bool {
        let entry = &Catalog::get().entries[id];
        self.selectors
            .iter()
            .any(|s| s.reads_every_key() && s.check(id, false, args, &[], &[]).is_ok())
            || entry.no_auth
    }

    /// Whether the user may stay subscribed to these: the channel rules of every selector
    /// together (checked when the user's rules change).
    pub fn permits_subscriptions<'a>(
        &self,
        channels: impl IntoIterator<Item = &'a [u8]>,
        patterns: impl IntoIterator<Item = &'a [u8]>,
    ) -> bool {
        if self.selectors.iter().any(|s| s.allchannels) {
            return true;
        }
        let all: Vec<Bytes> = (self.selectors.iter())
            .flat_map(|s| s.channels.iter().cloned())
            .collect();
        channels
            .into_iter()
            .all(|c| super::selector::channel_in(&all, c, false))
            && patterns
                .into_iter()
                .all(|p| super::selector::channel_in(&all, p, true))
    }
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// ACL SETUSER's and the ACL file's arguments with selectors joined: `(+get`, `~k)` become
/// one `(+get ~k)`. `Err`: the argument where an unclosed parenthesis starts.
pub fn merge_selector_args(args: &[Bytes]) -> Result<Vec<Bytes>, Bytes> {
    let mut merged = Vec::new();
    let mut open: Option<(Bytes, Vec<u8>)> = None;
    for arg in args {
        if let Some((_, selector)) = &mut open {
            selector.push(b' ');
            selector.extend_from_slice(arg);
            if arg.last() == Some(&b')') {
                let (_, selector) = open.take().unwrap_or_default();
                merged.push(Bytes::from(selector));
            }
            continue;
        }
        if arg.first() == Some(&b'(') && arg.last() != Some(&b')') {
            open = Some((arg.clone(), arg.to_vec()));
            continue;
        }
        merged.push(arg.clone());
    }
    match open {
        Some((start, _)) => Err(start),
        None => Ok(merged),
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A user made by `rules` (ACL SETUSER's words, space-separated).
    pub(crate) fn user(rules: &str) -> User {
        let mut user = User::new(Bytes::from_static(b"u"), 1, false);
        let words: Vec<Bytes> = (rules.split(' ').filter(|r| !r.is_empty()))
            .map(|r| Bytes::from(r.to_owned()))
            .collect();
        for rule in merge_selector_args(&words).unwrap() {
            user.apply(&rule, false).unwrap();
        }
        user
    }

    /// A request's arguments, space-separated.
    pub(crate) fn args(line: &str) -> Vec<Bytes> {
        line.split(' ').map(|a| Bytes::from(a.to_owned())).collect()
    }

    fn check(user: &User, line: &str) -> Result<(), Denied> {
        let args = args(line);
        let id = Catalog::get()
            .lookup(&String::from_utf8_lossy(&args[0]))
            .unwrap();
        user.check(id, &args)
    }

    #[test]
    fn passwords_are_sha256_hex() {
        assert_eq!(
            hash_password(b"passwd4"),
            "34344e4d60c2b6d639b7bd22e18f2b0b91bc34bf0ac5f9952744435093cfb4e6"
        );
        let mut u = user("on >a >b");
        assert!(u.authenticates(b"a") && u.authenticates(b"b") && !u.authenticates(b"c"));
        u.apply(b"<a", false).unwrap();
        assert!(!u.authenticates(b"a"));
        assert_eq!(u.apply(b"<zz", false), Err(RuleError::NoSuchPassword));
        assert_eq!(u.apply(b"#abc", false), Err(RuleError::BadHash));
        u.apply(b"off", false).unwrap();
        assert!(!u.authenticates(b"b"));
        assert!(user("on nopass").authenticates(b"anything"));
    }

    #[test]
    fn describes_as_acl_list() {
        let u = user("on >p +get ~a* %R~b* &ch");
        let text = String::from_utf8(u.describe()).unwrap();
        assert!(text.starts_with("user u on #"));
        assert!(text.ends_with(" ~a* %R~b* resetchannels &ch -@all +get"));
        let mut r = user("");
        r.apply(b"reset", false).unwrap();
        assert_eq!(
            String::from_utf8(r.describe()).unwrap(),
            "user u off sanitize-payload resetchannels -@all"
        );
        assert_eq!(
            String::from_utf8(User::default_user(0).describe()).unwrap(),
            "user default on nopass ~* &* +@all"
        );
        let s = user("on nopass (+set ~x)");
        assert!(String::from_utf8(s.describe())
            .unwrap()
            .ends_with("(~x resetchannels -@all +set)"));
    }

    #[test]
    fn selectors_are_alternatives() {
        let u = user("on nopass (+@write ~write::*) (+@read ~read::*)");
        assert_eq!(check(&u, "ping"), Err(Denied::Command));
        assert_eq!(check(&u, "set write::a b"), Ok(()));
        assert_eq!(check(&u, "get read::a"), Ok(()));
        assert_eq!(check(&u, "get write::a"), Err(Denied::Key(1)));
        // The last key no selector allows is the one reported.
        let m = user("on nopass +mget ~key (+mget ~key ~otherkey)");
        assert_eq!(check(&m, "get key"), Err(Denied::Command));
        assert_eq!(check(&m, "mget otherkey someotherkey"), Err(Denied::Key(2)));
        assert_eq!(
            check(&m, "mget key otherkey someotherkey"),
            Err(Denied::Key(3))
        );
        // AUTH needs no permission.
        assert_eq!(check(&user("on"), "auth a b"), Ok(()));
    }

    #[test]
    fn channels_and_subscriptions() {
        let u = user("on nopass +@all ~* resetchannels &foo:1 &bar:*");
        assert_eq!(check(&u, "publish foo:1 m"), Ok(()));
        assert_eq!(check(&u, "publish zap m"), Err(Denied::Channel(1)));
        assert_eq!(check(&u, "psubscribe bar:baz"), Err(Denied::Channel(1)));
        assert_eq!(check(&u, "psubscribe bar:*"), Ok(()));
        assert!(u.permits_subscriptions([&b"foo:1"[..]], [&b"bar:*"[..]]));
        assert!(!u.permits_subscriptions([&b"zap"[..]], []));
    }

    #[test]
    fn selector_arguments_merge() {
        let merged = merge_selector_args(&args("on (~key5 +get ) ( ~key6 +get ) (~k)")).unwrap();
        let expected: Vec<Bytes> = ["on", "(~key5 +get )", "( ~key6 +get )", "(~k)"]
            .iter()
            .map(|a| Bytes::from(a.to_string()))
            .collect();
        assert_eq!(merged, expected);
        assert_eq!(
            merge_selector_args(&args("on (")),
            Err(Bytes::from_static(b"("))
        );
    }
}
