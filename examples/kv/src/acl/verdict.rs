//! What a user's rules say about one command whatever its arguments, worked out the first
//! time the user runs it and kept with the user ([`Verdicts`]), so checking a request costs
//! at most matching its key. [`Verdict::check`] answers exactly what [`User::check`]
//! answers; where the arguments could change more than the key's match (a `+select|0` rule,
//! several keys, channels), the verdict is [`Verdict::Full`]: the whole check.
//!
//! A user's rules do not change once it is shared (ACL SETUSER, DELUSER, LOAD and
//! `requirepass` replace it with a new `User`, see [`super::Acl::update`]; a connection
//! follows before its next command), so its verdicts need no invalidation: a new user starts
//! with none, and [`User::apply`] drops them.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

use bytes::Bytes;

use super::catalog::Catalog;
use super::keys::{self, ChannelPlan, KeyPlan};
use super::selector::{head_word, Denied, KeyAccess, Selector, ShortHead};
use super::user::User;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// No selector allows the command.
    Denied,
    /// A selector allows the command with any keys and channels it may name.
    Allowed,
    /// One key, `args[1]`, used one way: allowed when it matches one of these patterns (bits
    /// over [`User::key_patterns`]: those of the selectors allowing the command that grant
    /// the access it needs), else refused as `Denied::Key(1)`.
    Key { patterns: u64 },
    /// SET's key: `write` without the GET option, `read_write` with it.
    SetKey { write: u64, read_write: u64 },
    /// The arguments decide more than that: [`User::check`].
    Full,
}

/// How many of a user's key patterns a verdict can name (bits of a [`Verdicts`] cell).
const MAX_PATTERNS: usize = 30;

/// The patterns granting `access` of the selectors that allow a one-key command, as bits
/// over the user's patterns; `None` beyond [`MAX_PATTERNS`].
fn pattern_bits(user: &User, allowing: &[bool], access: KeyAccess) -> Option<u64> {
    let mut bits = 0u64;
    let mut offset = 0;
    for (selector, &allows) in user.selectors.iter().zip(allowing) {
        let end = offset + selector.keys.len();
        if allows {
            if end > MAX_PATTERNS || end > user.key_patterns.len() {
                return None;
            }
            for (i, p) in selector.keys.iter().enumerate() {
                if (p.read || !access.read) && (p.write || !access.write) {
                    bits |= 1 << (offset + i);
                }
            }
        }
        offset = end;
    }
    Some(bits)
}

impl Verdict {
    /// The verdict of `user`'s rules on command `id` (a catalog id).
    pub(crate) fn of(user: &User, id: usize) -> Verdict {
        if user.unrestricted {
            return Verdict::Allowed;
        }
        let entry = &Catalog::get().entries[id];
        // SORT's BY and GET options are checked after the keys, on the arguments.
        if matches!(entry.name(), "sort" | "sort_ro") {
            return Verdict::Full;
        }
        let mut allowing = Vec::with_capacity(user.selectors.len());
        let mut first_args = false;
        for selector in &user.selectors {
            let allows = match selector.allows_command(id, entry.no_auth) {
                Some(allows) => allows,
                None => {
                    first_args = true;
                    false
                }
            };
            if allows && free(selector, entry.keys, entry.channels) {
                return Verdict::Allowed;
            }
            allowing.push(allows);
        }
        if first_args {
            return Verdict::Full;
        }
        if !allowing.contains(&true) {
            return Verdict::Denied;
        }
        // Some selector allows the command but checks its keys or channels: only one key,
        // found without reading the other arguments, is matched here.
        if entry.channels != ChannelPlan::None {
            return Verdict::Full;
        }
        let bits = |access| pattern_bits(user, &allowing, access);
        let verdict = match entry.keys {
            KeyPlan::First(access) => bits(access).map(|patterns| Verdict::Key { patterns }),
            KeyPlan::Set => (bits(keys::WRITE))
                .zip(bits(keys::READ_WRITE))
                .map(|(write, read_write)| Verdict::SetKey { write, read_write }),
            KeyPlan::None | KeyPlan::Bitfield | KeyPlan::Args => None,
        };
        verdict.unwrap_or(Verdict::Full)
    }

    /// The verdict as one number (never 0): a tag in the low 3 bits, the masks above.
    fn pack(self) -> u64 {
        match self {
            Verdict::Denied => 1,
            Verdict::Allowed => 2,
            Verdict::Full => 3,
            Verdict::Key { patterns } => 4 | patterns << 3,
            Verdict::SetKey { write, read_write } => 5 | write << 3 | read_write << 33,
        }
    }

    fn unpack(packed: u64) -> Option<Verdict> {
        let mask = (1 << MAX_PATTERNS) - 1;
        Some(match packed & 7 {
            1 => Verdict::Denied,
            2 => Verdict::Allowed,
            3 => Verdict::Full,
            4 => Verdict::Key {
                patterns: packed >> 3,
            },
            5 => Verdict::SetKey {
                write: (packed >> 3) & mask,
                read_write: packed >> 33,
            },
            _ => return None,
        })
    }

    /// [`User::check`] of `args` (command `id`) by the `user` this verdict was made for.
    #[inline]
    pub(crate) fn check(self, user: &User, id: usize, args: &[Bytes]) -> Result<(), Denied> {
        match self {
            Verdict::Allowed => Ok(()),
            Verdict::Denied => Err(Denied::Command),
            Verdict::Key { patterns } => key_matches(user, patterns, args),
            Verdict::SetKey { write, read_write } => {
                let patterns = if keys::set_reads(args) {
                    read_write
                } else {
                    write
                };
                key_matches(user, patterns, args)
            }
            Verdict::Full => user.check(id, args),
        }
    }
}

/// How many short patterns a [`Compiled`] verdict holds.
const INLINE: usize = 4;

/// A verdict with its key patterns copied in when they are few and short (see
/// [`ShortHead`]): a request's key is then matched without reaching into the user.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Compiled {
    pub(crate) verdict: Verdict,
    /// How many of `heads` are the patterns of a `Key` verdict (a `SetKey`'s `write` ones);
    /// `None`: not copied (more than fit, or one is not short).
    count: Option<u8>,
    heads: [ShortHead; INLINE],
}

impl Compiled {
    /// The full check, nothing copied.
    pub(crate) const FULL: Compiled = Compiled {
        verdict: Verdict::Full,
        count: None,
        heads: [ShortHead::EMPTY; INLINE],
    };

    pub(crate) fn of(user: &User, verdict: Verdict) -> Compiled {
        let mut compiled = Compiled {
            verdict,
            count: None,
            heads: [ShortHead::EMPTY; INLINE],
        };
        let mut bits = match verdict {
            Verdict::Key { patterns } => patterns,
            Verdict::SetKey { write, .. } => write,
            _ => return compiled,
        };
        if bits.count_ones() as usize > INLINE {
            return compiled;
        }
        let mut count = 0;
        while bits != 0 {
            let i = bits.trailing_zeros() as usize;
            let Some(short) = user.key_patterns.get(i).and_then(|p| p.short_head()) else {
                return compiled;
            };
            compiled.heads[count] = short;
            count += 1;
            bits &= bits - 1;
        }
        compiled.count = Some(count as u8);
        compiled
    }

    /// [`Verdict::check`].
    #[inline(always)]
    pub(crate) fn check(&self, user: &User, id: usize, args: &[Bytes]) -> Result<(), Denied> {
        if let Some(count) = self.count {
            if matches!(self.verdict, Verdict::Key { .. }) || !keys::set_reads(args) {
                let Some(key) = args.get(1) else {
                    return Ok(());
                };
                let head = head_word(key);
                for short in &self.heads[..usize::from(count).min(INLINE)] {
                    if short.matches(key, head) {
                        return Ok(());
                    }
                }
                return Err(Denied::Key(1));
            }
        }
        self.verdict.check(user, id, args)
    }
}

/// A user's verdicts, one per catalog id, each worked out on first use. Shared by every
/// shard through the user's `Arc`: a cell is written with the same value by whichever
/// shard gets there first (a relaxed atomic, no lock); 0 is a verdict not worked out yet.
/// Each set of verdicts has its own serial number (never reused), so a verdict copied
/// elsewhere can tell whether it is still the user's (see `session/acl.rs`).
pub(crate) struct Verdicts {
    serial: u64,
    cells: OnceLock<Box<[AtomicU64]>>,
}

impl Default for Verdicts {
    fn default() -> Verdicts {
        static SERIAL: AtomicU64 = AtomicU64::new(1);
        Verdicts {
            serial: SERIAL.fetch_add(1, Ordering::Relaxed),
            cells: OnceLock::new(),
        }
    }
}

impl Verdicts {
    /// Names these verdicts (and so the rules they follow from) among all made.
    #[inline]
    pub(crate) fn serial(&self) -> u64 {
        self.serial
    }

    /// The verdict of `user` (whose verdicts these are) on command `id`.
    #[inline]
    pub(crate) fn get(&self, user: &User, id: usize) -> Verdict {
        let cells = self.cells.get_or_init(|| {
            (0..Catalog::get().len())
                .map(|_| AtomicU64::new(0))
                .collect()
        });
        let cell = &cells[id];
        if let Some(verdict) = Verdict::unpack(cell.load(Ordering::Relaxed)) {
            return verdict;
        }
        let verdict = Verdict::of(user, id);
        cell.store(verdict.pack(), Ordering::Relaxed);
        verdict
    }
}

/// A copy of a user is about to get other rules: it works its verdicts out anew.
impl Clone for Verdicts {
    fn clone(&self) -> Verdicts {
        Verdicts::default()
    }
}

/// Verdicts follow from the rules: users with the same rules are equal whatever they hold.
impl PartialEq for Verdicts {
    fn eq(&self, _: &Verdicts) -> bool {
        true
    }
}

impl Eq for Verdicts {}

impl fmt::Debug for Verdicts {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let known = (self.cells.get().into_iter().flatten())
            .filter(|cell| cell.load(Ordering::Relaxed) != 0)
            .count();
        write!(f, "Verdicts({known} known)")
    }
}

/// Whether a selector allowing a command lets every request of it through: it allows every
/// key the command may name, and every channel.
fn free(selector: &Selector, keys: KeyPlan, channels: ChannelPlan) -> bool {
    (selector.allkeys || keys == KeyPlan::None)
        && (selector.allchannels || channels == ChannelPlan::None)
}

/// `args[1]` against the patterns in `bits` (no key: nothing to refuse).
#[inline]
fn key_matches(user: &User, mut bits: u64, args: &[Bytes]) -> Result<(), Denied> {
    let Some(key) = args.get(1) else {
        return Ok(());
    };
    let head = head_word(key);
    while bits != 0 {
        let i = bits.trailing_zeros() as usize;
        if user.key_patterns[i].matches_head(key, head) {
            return Ok(());
        }
        bits &= bits - 1;
    }
    Err(Denied::Key(1))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::acl::user::tests::{args, user};

    fn id(name: &str) -> usize {
        Catalog::get().lookup(name).unwrap()
    }

    #[test]
    fn verdicts_of_commands() {
        let u = user("on -@all +get +set +ping +publish +select|0 ~counter:* %R~ro:* %W~wo:*");
        assert_eq!(Verdict::of(&u, id("ping")), Verdict::Allowed);
        assert_eq!(Verdict::of(&u, id("del")), Verdict::Denied);
        // AUTH needs no permission.
        assert_eq!(Verdict::of(&u, id("auth")), Verdict::Allowed);
        // The first argument decides; channels; SORT's options.
        assert_eq!(Verdict::of(&u, id("select")), Verdict::Full);
        assert_eq!(Verdict::of(&u, id("publish")), Verdict::Full);
        assert_eq!(Verdict::of(&user("+@all ~a"), id("sort")), Verdict::Full);
        // GET reads: ~counter:* and %R~ro:*; SET writes: ~counter:* and %W~wo:*, and with
        // GET only ~counter:*.
        assert_eq!(Verdict::of(&u, id("get")), Verdict::Key { patterns: 0b011 });
        assert_eq!(
            Verdict::of(&u, id("set")),
            Verdict::SetKey {
                write: 0b101,
                read_write: 0b001
            }
        );
        // Every key: allowed whatever the key.
        assert_eq!(Verdict::of(&user("+get ~*"), id("get")), Verdict::Allowed);
        // Patterns of the selectors that allow the command only, after the root's.
        let s = user("+get ~a (+set ~b ~c) (+get ~d)");
        assert_eq!(
            Verdict::of(&s, id("get")),
            Verdict::Key { patterns: 0b1001 }
        );
        assert_eq!(
            Verdict::of(&s, id("set")),
            Verdict::SetKey {
                write: 0b0110,
                read_write: 0b0110
            }
        );
        // A selector with every key allows the command outright.
        assert_eq!(
            Verdict::of(&user("+get ~a (+get ~*)"), id("get")),
            Verdict::Allowed
        );
        // The bench user's patterns are short: copied in.
        let get = Compiled::of(&u, Verdict::of(&u, id("get")));
        assert_eq!(get.count, Some(2));
        let glob = user("+get ~a?");
        assert_eq!(
            Compiled::of(&glob, Verdict::of(&glob, id("get"))).count,
            None
        );
        // Several keys: the whole check.
        assert_eq!(Verdict::of(&u, id("mget")), Verdict::Denied);
        assert_eq!(Verdict::of(&user("+mget ~a"), id("mget")), Verdict::Full);
    }

    #[test]
    fn more_patterns_than_bits_check_in_full() {
        let fits: String = (0..MAX_PATTERNS).map(|i| format!(" ~k{i}")).collect();
        let u = user(&format!("+set{fits}"));
        let full = (1 << MAX_PATTERNS) - 1;
        let set = Verdict::SetKey {
            write: full,
            read_write: full,
        };
        assert_eq!(Verdict::of(&u, id("set")), set);
        assert_eq!(Verdict::unpack(set.pack()), Some(set));
        let many: String = (0..MAX_PATTERNS + 1).map(|i| format!(" ~k{i}")).collect();
        let u = user(&format!("+get{many}"));
        assert_eq!(Verdict::of(&u, id("get")), Verdict::Full);
        let past = user(&format!("+set{many} (+get ~x)"));
        assert_eq!(Verdict::of(&past, id("get")), Verdict::Full);
    }

    #[test]
    fn verdicts_are_kept_until_the_rules_change() {
        let mut u = user("on +get ~a*");
        let get = id("get");
        assert_eq!(u.verdicts.get(&u, get), Verdict::Key { patterns: 1 });
        // Worked out once: the cell holds it.
        assert_eq!(format!("{:?}", u.verdicts), "Verdicts(1 known)");
        let copy = u.clone();
        assert_eq!(format!("{:?}", copy.verdicts), "Verdicts(0 known)");
        assert_eq!(copy, u);
        assert_ne!(copy.verdicts.serial(), u.verdicts.serial());
        let serial = u.verdicts.serial();
        u.apply(b"~*", false).unwrap();
        assert_ne!(u.verdicts.serial(), serial);
        assert_eq!(u.verdicts.get(&u, get), Verdict::Allowed);
        u.apply(b"-get", false).unwrap();
        assert_eq!(u.verdicts.get(&u, get), Verdict::Denied);
        u.apply(b"(+get ~b)", false).unwrap();
        assert_eq!(u.verdicts.get(&u, get), Verdict::Key { patterns: 1 });
        assert_eq!(u.check(get, &args("get b")), Ok(()));
        assert_eq!(u.check(get, &args("get a1")), Err(Denied::Key(1)));
    }

    /// Every verdict answers what the full check answers, for many rules and requests.
    #[test]
    fn verdicts_answer_as_the_full_check() {
        let rules = [
            "on +@all ~*",
            "on -@all +get +set +ping +config|get ~counter:* ~other:* ~key:*",
            "on +@read ~r* %R~ro* %W~w*",
            "on +@write %W~w* %R~r*",
            "on +get +set %RW~k* (+get ~g*) (+set %W~s*)",
            "on +@all -@dangerous ~app:* &news:*",
            "on +@all resetchannels &news:* ~*",
            "on +select|0 +get ~*",
            "on (+get ~a*) (+get ~b*) (+set ~*)",
            "on +mget +get ~key (+mget ~key ~otherkey)",
            "on +@string ~k? ~[ab]* ~averylongprefix:*",
            "on nocommands ~*",
            "on +sort ~a* %R~*",
            "on +bitfield +publish +subscribe ~b* &c*",
        ];
        let requests = [
            "get key:1",
            "get other:1",
            "get ro1",
            "get w1",
            "get g1",
            "get averylongprefix:1",
            "get kx",
            "get",
            "set key:1 v",
            "set s1 v",
            "set w1 v get",
            "set w1 v EX 10 GET",
            "set ro1 v",
            "set k v",
            "set a1 v",
            "set",
            "ping",
            "mget key otherkey",
            "mget key x",
            "select 0",
            "select 1",
            "publish news:1 m",
            "publish zap m",
            "subscribe cx",
            "bitfield b1 get u8 0",
            "bitfield b1 set u8 0 1",
            "sort a1 by w*",
            "sort a1 store a2",
            "del key:1",
            "flushall",
            "config get maxmemory",
            "auth a b",
            "incr counter:1",
            "exists r1 w1",
        ];
        for rule in rules {
            let u = user(rule);
            for request in requests {
                let a = args(request);
                let Some(id) = Catalog::get().resolve(&a) else {
                    continue;
                };
                let verdict = Verdict::of(&u, id);
                assert_eq!(Verdict::unpack(verdict.pack()), Some(verdict));
                assert_eq!(u.verdicts.get(&u, id), verdict);
                assert_eq!(
                    Compiled::of(&u, verdict).check(&u, id, &a),
                    u.check(id, &a),
                    "{rule:?} on {request:?} (compiled {verdict:?})"
                );
                assert_eq!(
                    verdict.check(&u, id, &a),
                    u.check(id, &a),
                    "{rule:?} on {request:?} ({verdict:?})"
                );
            }
        }
    }
}
