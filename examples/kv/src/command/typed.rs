//! The commands of the collection types (lists, hashes, sets, sorted sets) and TYPE: one
//! table row each, and one typed request shape. Their options are parsed by the store when
//! the command runs, which is also where Redis parses them: a syntax error in a queued
//! MULTI command surfaces at EXEC, as in Redis, and the parse order (options, then the key's
//! type) follows each command's Redis implementation.

use bytes::Bytes;

use super::table::{spec, CommandKind, CommandSpec};
use crate::number::parse_i64;

/// A collection command: which one, and its arguments after the name (the first is a key).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TypedCommand {
    pub op: TypedOp,
    pub args: Vec<Bytes>,
}

/// How a command's keys sit among its arguments (after the name).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum KeyShape {
    /// `args[0]`
    One,
    /// `args[0]` and `args[1]` (LMOVE, SMOVE, ZRANGESTORE)
    Two,
    /// every argument (SINTER, SINTERSTORE, ...)
    All,
    /// `numkeys key...` (SINTERCARD, LMPOP)
    Counted,
    /// `timeout numkeys key...` (BLMPOP)
    TimeoutCounted,
    /// every argument but the last (BLPOP, BRPOP: `key... timeout`)
    AllButLast,
    /// `dest numkeys key...` (ZUNIONSTORE, ZINTERSTORE)
    DestCounted,
    /// `args[0]`, and the key of a STORE or STOREDIST option (GEORADIUS,
    /// GEORADIUSBYMEMBER), whose options start at `args[n]`
    OneAndStore(usize),
}

const RO: &[&str] = &["readonly"];
const RO_FAST: &[&str] = &["readonly", "fast"];
const W: &[&str] = &["write"];
const W_FAST: &[&str] = &["write", "fast"];
const WD: &[&str] = &["write", "denyoom"];
const WD_FAST: &[&str] = &["write", "denyoom", "fast"];
const W_BLOCKING: &[&str] = &["write", "blocking"];
const WD_BLOCKING: &[&str] = &["write", "denyoom", "blocking"];
const RO_MOVABLE: &[&str] = &["readonly", "movablekeys"];
const W_MOVABLE: &[&str] = &["write", "movablekeys"];
const W_BLOCKING_MOVABLE: &[&str] = &["write", "blocking", "movablekeys"];
const WD_MOVABLE: &[&str] = &["write", "denyoom", "movablekeys"];
const W_BLOCKING_FAST_NOSCRIPT: &[&str] = &["write", "noscript", "blocking", "fast"];

macro_rules! typed_ops {
    ($($op:ident $name:literal $arity:literal $flags:ident $shape:ident $(($at:literal))?;)*) => {
        /// One variant per command name.
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub enum TypedOp { $($op,)* }

        impl TypedOp {
            /// The lowercase Redis name.
            pub fn name(self) -> &'static str {
                match self { $(TypedOp::$op => $name,)* }
            }

            fn flags(self) -> &'static [&'static str] {
                match self { $(TypedOp::$op => $flags,)* }
            }

            fn shape(self) -> KeyShape {
                match self { $(TypedOp::$op => KeyShape::$shape $(($at))?,)* }
            }
        }

        pub(crate) static TYPED_COMMANDS: &[CommandSpec] = &[
            $(spec(CommandKind::Typed(TypedOp::$op), $name, $arity, $flags, table_keys(KeyShape::$shape $(($at))?)),)*
        ];
    };
}

/// The table's (first, last, step) for a shape; movable keys list only the fixed ones, as in
/// Redis's legacy key positions.
const fn table_keys(shape: KeyShape) -> (i64, i64, i64) {
    match shape {
        KeyShape::One | KeyShape::DestCounted | KeyShape::OneAndStore(_) => (1, 1, 1),
        KeyShape::Two => (1, 2, 1),
        KeyShape::All => (1, -1, 1),
        KeyShape::AllButLast => (1, -2, 1),
        KeyShape::Counted | KeyShape::TimeoutCounted => (0, 0, 0),
    }
}

typed_ops! {
    Type "type" 2 RO_FAST One;
    // Lists
    LPush "lpush" -3 WD_FAST One;
    RPush "rpush" -3 WD_FAST One;
    LPushX "lpushx" -3 WD_FAST One;
    RPushX "rpushx" -3 WD_FAST One;
    LPop "lpop" -2 W_FAST One;
    RPop "rpop" -2 W_FAST One;
    LRange "lrange" 4 RO One;
    LLen "llen" 2 RO_FAST One;
    LIndex "lindex" 3 RO One;
    LSet "lset" 4 WD One;
    LInsert "linsert" 5 WD One;
    LRem "lrem" 4 W One;
    LTrim "ltrim" 4 W One;
    LPos "lpos" -3 RO One;
    LMove "lmove" 5 WD Two;
    RPopLPush "rpoplpush" 3 WD Two;
    BLPop "blpop" -3 W_BLOCKING AllButLast;
    BRPop "brpop" -3 W_BLOCKING AllButLast;
    BLMove "blmove" 6 WD_BLOCKING Two;
    BRPopLPush "brpoplpush" 4 WD_BLOCKING Two;
    LMPop "lmpop" -4 W_MOVABLE Counted;
    BLMPop "blmpop" -5 W_BLOCKING_MOVABLE TimeoutCounted;
    // Hashes
    HSet "hset" -4 WD_FAST One;
    HMSet "hmset" -4 WD_FAST One;
    HSetNx "hsetnx" 4 WD_FAST One;
    HGet "hget" 3 RO_FAST One;
    HMGet "hmget" -3 RO_FAST One;
    HGetAll "hgetall" 2 RO One;
    HDel "hdel" -3 W_FAST One;
    HExists "hexists" 3 RO_FAST One;
    HLen "hlen" 2 RO_FAST One;
    HKeys "hkeys" 2 RO One;
    HVals "hvals" 2 RO One;
    HIncrBy "hincrby" 4 WD_FAST One;
    HIncrByFloat "hincrbyfloat" 4 WD_FAST One;
    HStrLen "hstrlen" 3 RO_FAST One;
    HRandField "hrandfield" -2 RO One;
    HScan "hscan" -3 RO One;
    // Sets
    SAdd "sadd" -3 WD_FAST One;
    SRem "srem" -3 W_FAST One;
    SMembers "smembers" 2 RO One;
    SIsMember "sismember" 3 RO_FAST One;
    SMIsMember "smismember" -3 RO_FAST One;
    SCard "scard" 2 RO_FAST One;
    SPop "spop" -2 W_FAST One;
    SRandMember "srandmember" -2 RO One;
    SMove "smove" 4 W_FAST Two;
    SInter "sinter" -2 RO All;
    SUnion "sunion" -2 RO All;
    SDiff "sdiff" -2 RO All;
    SInterStore "sinterstore" -3 WD All;
    SUnionStore "sunionstore" -3 WD All;
    SDiffStore "sdiffstore" -3 WD All;
    SInterCard "sintercard" -3 RO_MOVABLE Counted;
    SScan "sscan" -3 RO One;
    // Sorted sets
    ZAdd "zadd" -4 WD_FAST One;
    ZRem "zrem" -3 W_FAST One;
    ZScore "zscore" 3 RO_FAST One;
    ZMScore "zmscore" -3 RO_FAST One;
    ZIncrBy "zincrby" 4 WD_FAST One;
    ZCard "zcard" 2 RO_FAST One;
    ZCount "zcount" 4 RO_FAST One;
    ZLexCount "zlexcount" 4 RO_FAST One;
    ZRange "zrange" -4 RO One;
    ZRangeByScore "zrangebyscore" -4 RO One;
    ZRevRangeByScore "zrevrangebyscore" -4 RO One;
    ZRangeByLex "zrangebylex" -4 RO One;
    ZRevRangeByLex "zrevrangebylex" -4 RO One;
    ZRevRange "zrevrange" -4 RO One;
    ZRank "zrank" 3 RO_FAST One;
    ZRevRank "zrevrank" 3 RO_FAST One;
    ZPopMin "zpopmin" -2 W_FAST One;
    ZPopMax "zpopmax" -2 W_FAST One;
    ZRangeStore "zrangestore" -5 WD Two;
    ZUnionStore "zunionstore" -4 WD_MOVABLE DestCounted;
    ZInterStore "zinterstore" -4 WD_MOVABLE DestCounted;
    ZScan "zscan" -3 RO One;
    ZRemRangeByScore "zremrangebyscore" 4 W One;
    ZRemRangeByRank "zremrangebyrank" 4 W One;
    ZRemRangeByLex "zremrangebylex" 4 W One;
    ZRandMember "zrandmember" -2 RO One;
    ZUnion "zunion" -3 RO_MOVABLE Counted;
    ZInter "zinter" -3 RO_MOVABLE Counted;
    ZDiff "zdiff" -3 RO_MOVABLE Counted;
    ZDiffStore "zdiffstore" -4 WD_MOVABLE DestCounted;
    ZInterCard "zintercard" -3 RO_MOVABLE Counted;
    ZMPop "zmpop" -4 W_MOVABLE Counted;
    BZMPop "bzmpop" -5 W_BLOCKING_MOVABLE TimeoutCounted;
    BZPopMin "bzpopmin" -3 W_BLOCKING_FAST_NOSCRIPT AllButLast;
    BZPopMax "bzpopmax" -3 W_BLOCKING_FAST_NOSCRIPT AllButLast;
    // Geo (sorted sets of geohash scores)
    GeoAdd "geoadd" -5 WD One;
    GeoDist "geodist" -4 RO One;
    GeoHash "geohash" -2 RO One;
    GeoPos "geopos" -2 RO One;
    GeoSearch "geosearch" -7 RO One;
    GeoSearchStore "geosearchstore" -8 WD Two;
    GeoRadius "georadius" -6 WD_MOVABLE OneAndStore(5);
    GeoRadiusRo "georadius_ro" -6 RO One;
    GeoRadiusByMember "georadiusbymember" -5 WD_MOVABLE OneAndStore(4);
    GeoRadiusByMemberRo "georadiusbymember_ro" -5 RO One;
}

/// Which end LMPOP / BLMPOP pop from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ListEnd {
    Left,
    Right,
}

/// LMPOP's `numkeys key... LEFT|RIGHT [COUNT count]` (BLMPOP's after its timeout), checked
/// in Redis 7.0's order (`lmpopGenericCommand`): numkeys, the end, COUNT. BLMPOP's timeout is
/// checked after these, by the caller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MPopArgs<'a> {
    pub keys: &'a [Bytes],
    pub end: ListEnd,
    pub count: usize,
}

pub fn mpop_args(a: &[Bytes]) -> Result<MPopArgs<'_>, super::CommandError> {
    mpop_parse(a, (b"left", b"right"))
}

/// ZMPOP's `numkeys key... MIN|MAX [COUNT count]` (BZMPOP's after its timeout), checked as
/// LMPOP's (Redis 7.0's `zmpopGenericCommand` has the same order and wording); MIN is
/// [`ListEnd::Left`].
pub fn zmpop_args(a: &[Bytes]) -> Result<MPopArgs<'_>, super::CommandError> {
    mpop_parse(a, (b"min", b"max"))
}

fn mpop_parse<'a>(
    a: &'a [Bytes],
    (first, second): (&[u8], &[u8]),
) -> Result<MPopArgs<'a>, super::CommandError> {
    use super::CommandError;
    let numkeys = a
        .first()
        .and_then(|n| parse_i64(n))
        .filter(|&n| n > 0)
        .ok_or_else(|| CommandError::Text("ERR numkeys should be greater than 0".into()))?
        as usize;
    let end_at = numkeys.checked_add(1).filter(|&at| at < a.len());
    let Some(end_at) = end_at else {
        return Err(CommandError::Syntax);
    };
    let end = if a[end_at].eq_ignore_ascii_case(first) {
        ListEnd::Left
    } else if a[end_at].eq_ignore_ascii_case(second) {
        ListEnd::Right
    } else {
        return Err(CommandError::Syntax);
    };
    let mut count = None;
    let mut rest = &a[end_at + 1..];
    while let [option, tail @ ..] = rest {
        match tail {
            [n, tail @ ..] if count.is_none() && option.eq_ignore_ascii_case(b"count") => {
                let n = parse_i64(n).filter(|&n| n > 0).ok_or_else(|| {
                    CommandError::Text("ERR count should be greater than 0".into())
                })?;
                count = Some(n as usize);
                rest = tail;
            }
            _ => return Err(CommandError::Syntax),
        }
    }
    Ok(MPopArgs {
        keys: &a[1..end_at],
        end,
        count: count.unwrap_or(1),
    })
}

fn mpop_keys(args: &[Bytes], zset: bool) -> Vec<&[u8]> {
    let parsed = if zset {
        zmpop_args(args)
    } else {
        mpop_args(args)
    };
    parsed.map_or_else(
        |_| Vec::new(),
        |mpop| mpop.keys.iter().map(|k| &k[..]).collect(),
    )
}

/// SINTERCARD's `numkeys key... [LIMIT n]`: the number of keys and the limit (0 = none), with
/// Redis's errors. Shared by the store and the router (which gathers over shards).
pub fn sintercard_args(a: &[Bytes]) -> Result<(usize, usize), super::CommandError> {
    use super::CommandError;
    let numkeys = parse_i64(&a[0])
        .filter(|&n| n > 0)
        .ok_or_else(|| CommandError::Text("ERR numkeys should be greater than 0".into()))?
        as usize;
    if numkeys > a.len() - 1 {
        return Err(CommandError::Text(
            "ERR Number of keys can't be greater than number of args".into(),
        ));
    }
    let mut limit = 0usize;
    let mut i = 1 + numkeys;
    while i < a.len() {
        if a[i].eq_ignore_ascii_case(b"limit") && i + 1 < a.len() {
            let n = parse_i64(&a[i + 1])
                .filter(|&n| n >= 0)
                .ok_or_else(|| CommandError::Text("ERR LIMIT can't be negative".into()))?;
            limit = n as usize;
            i += 2;
        } else {
            return Err(CommandError::Syntax);
        }
    }
    Ok((numkeys, limit))
}

impl TypedOp {
    pub fn is_write(self) -> bool {
        self.flags().contains(&"write")
    }

    /// BLPOP, BRPOP, BLMOVE, BRPOPLPUSH, BLMPOP: may wait for an item.
    pub fn is_blocking(self) -> bool {
        self.flags().contains(&"blocking")
    }

    /// The class of the keyspace events this command's writes send (the type it works on).
    pub fn event_class(self) -> crate::notify::Class {
        use crate::notify::Class;
        let name = self.name();
        let starts = |prefix: &str| name.starts_with(prefix);
        if starts("h") {
            Class::Hash
        } else if starts("z") || starts("bz") || starts("geo") {
            Class::Zset
        } else if starts("x") {
            Class::Stream
        } else if starts("l")
            || starts("rpop")
            || starts("rpush")
            || starts("blm")
            || starts("blp")
            || starts("brp")
        {
            Class::List
        } else if starts("s") && !starts("sort") {
            Class::Set
        } else {
            Class::Generic
        }
    }
}

impl TypedCommand {
    /// The keys, in request order (movable keys included; a malformed count yields the keys
    /// it can, and the command's own parse reports the error).
    pub fn keys(&self) -> Vec<&[u8]> {
        let args = &self.args;
        let counted = |from: usize| -> Vec<&[u8]> {
            let count = args
                .get(from)
                .and_then(|n| parse_i64(n))
                .filter(|&n| n > 0)
                .map_or(0, |n| n as usize);
            args.iter()
                .skip(from + 1)
                .take(count)
                .map(|k| &k[..])
                .collect()
        };
        match self.op.shape() {
            KeyShape::One => args.iter().take(1).map(|k| &k[..]).collect(),
            KeyShape::Two => args.iter().take(2).map(|k| &k[..]).collect(),
            KeyShape::All => args.iter().map(|k| &k[..]).collect(),
            KeyShape::AllButLast => args[..args.len().saturating_sub(1)]
                .iter()
                .map(|k| &k[..])
                .collect(),
            // LMPOP / BLMPOP: none when the arguments are wrong (the store reports them).
            KeyShape::Counted if self.op == TypedOp::LMPop => mpop_keys(args, false),
            KeyShape::Counted if self.op == TypedOp::ZMPop => mpop_keys(args, true),
            KeyShape::TimeoutCounted => mpop_keys(
                args.get(1..).unwrap_or_default(),
                self.op == TypedOp::BZMPop,
            ),
            KeyShape::Counted => counted(0),
            KeyShape::DestCounted => {
                let mut keys: Vec<&[u8]> = args.iter().take(1).map(|k| &k[..]).collect();
                keys.extend(counted(1));
                keys
            }
            KeyShape::OneAndStore(options) => {
                let mut keys: Vec<&[u8]> = args.iter().take(1).map(|k| &k[..]).collect();
                keys.extend(store_key(args.get(options..).unwrap_or_default()));
                keys
            }
        }
    }
}

/// The key of GEORADIUS's STORE or STOREDIST option (the last one given), walking the
/// options as the command reads them (Redis's `georadiusGeneric`): COUNT takes a value, the
/// other words none.
fn store_key(options: &[Bytes]) -> Option<&[u8]> {
    let mut key = None;
    let mut i = 0;
    while i < options.len() {
        let word = &options[i];
        let valued = word.eq_ignore_ascii_case(b"store") || word.eq_ignore_ascii_case(b"storedist");
        if valued && i + 1 < options.len() {
            key = Some(&options[i + 1][..]);
            i += 2;
        } else if word.eq_ignore_ascii_case(b"count") {
            i += 2;
        } else {
            i += 1;
        }
    }
    key
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::command::CommandError;

    fn args(parts: &[&str]) -> Vec<Bytes> {
        parts
            .iter()
            .map(|p| Bytes::copy_from_slice(p.as_bytes()))
            .collect()
    }

    #[test]
    fn event_classes_follow_the_command_groups() {
        use crate::notify::Class;
        for spec in TYPED_COMMANDS {
            let super::super::table::CommandKind::Typed(op) = spec.kind else {
                continue;
            };
            let Some(meta) = crate::introspect::meta::find(spec.name) else {
                continue;
            };
            let expected = match meta.group {
                "list" => Class::List,
                "hash" => Class::Hash,
                "set" => Class::Set,
                "sorted-set" | "geo" => Class::Zset,
                "stream" => Class::Stream,
                _ => Class::Generic,
            };
            assert_eq!(op.event_class(), expected, "{}", spec.name);
        }
    }

    #[test]
    fn mpop_arguments_in_redis_order() {
        let a = args(&["2", "k1", "k2", "right", "COUNT", "3"]);
        let parsed = mpop_args(&a).unwrap();
        assert_eq!(parsed.keys, &a[1..3]);
        assert_eq!((parsed.end, parsed.count), (ListEnd::Right, 3));
        assert_eq!(mpop_args(&args(&["1", "k", "LEFT"])).unwrap().count, 1);
        let text = |parts: &[&str]| match mpop_args(&args(parts)) {
            Err(CommandError::Text(text)) => text,
            Err(CommandError::Syntax) => "syntax".into(),
            other => panic!("{parts:?}: {other:?}"),
        };
        assert_eq!(
            text(&["0", "k", "left"]),
            "ERR numkeys should be greater than 0"
        );
        assert_eq!(
            text(&["x", "k", "left"]),
            "ERR numkeys should be greater than 0"
        );
        assert_eq!(text(&["2", "k", "left"]), "syntax");
        assert_eq!(text(&["1", "k", "up", "count", "0"]), "syntax");
        assert_eq!(
            text(&["1", "k", "left", "count", "0"]),
            "ERR count should be greater than 0"
        );
        assert_eq!(text(&["1", "k", "left", "count"]), "syntax");
        assert_eq!(
            text(&["1", "k", "left", "count", "1", "count", "1"]),
            "syntax"
        );
    }

    #[test]
    fn mpop_keys_follow_numkeys_and_none_when_malformed() {
        let lmpop = TypedCommand {
            op: TypedOp::LMPop,
            args: args(&["2", "a", "b", "LEFT"]),
        };
        assert_eq!(lmpop.keys(), vec![&b"a"[..], b"b"]);
        let blmpop = TypedCommand {
            op: TypedOp::BLMPop,
            args: args(&["0", "1", "a", "RIGHT", "COUNT", "2"]),
        };
        assert_eq!(blmpop.keys(), vec![&b"a"[..]]);
        let wrong = TypedCommand {
            op: TypedOp::LMPop,
            args: args(&["2", "a", "LEFT"]),
        };
        assert!(wrong.keys().is_empty());
        assert!(TypedOp::BLMPop.is_blocking() && !TypedOp::LMPop.is_blocking());
    }
}
