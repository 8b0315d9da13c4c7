//! Generated command scripts: random but reproducible (seeded) commands over a small pool of
//! keys, so commands collide on keys, types clash (WRONGTYPE), and multi-key commands span
//! shards. Values are binary-safe and include the edge cases Redis treats specially (integer
//! look-alikes, overflow, empty strings, CR/LF/NUL bytes, long values that change encodings).

use std::time::{SystemTime, UNIX_EPOCH};

use super::{Cmp, Step};

/// splitmix64: tiny, seedable, good enough for choosing commands.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (`n` > 0).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }

    pub fn range(&mut self, lo: i64, hi: i64) -> i64 {
        lo + (self.next_u64() % (hi - lo + 1) as u64) as i64
    }

    /// True with probability `percent` / 100.
    pub fn chance(&mut self, percent: u32) -> bool {
        self.below(100) < percent as usize
    }

    pub fn pick<T: Copy>(&mut self, items: &[T]) -> T {
        items[self.below(items.len())]
    }

    /// An index into `weights`, chosen with probability proportional to its weight.
    pub fn weighted(&mut self, weights: &[u32]) -> usize {
        let total: u32 = weights.iter().sum();
        let mut x = self.below(total as usize) as u32;
        for (i, &w) in weights.iter().enumerate() {
            if x < w {
                return i;
            }
            x -= w;
        }
        weights.len() - 1
    }
}

pub fn exact(parts: Vec<Vec<u8>>) -> Step {
    Step::new(parts, Cmp::Exact)
}

pub fn b(s: &str) -> Vec<u8> {
    s.as_bytes().to_vec()
}

fn num(n: i64) -> Vec<u8> {
    n.to_string().into_bytes()
}

/// Keys in the pool: plain ones (spread over shards), hash-tagged ones (one shard), and odd
/// ones (binary, empty, long).
pub const KEYS: &[&[u8]] = &[
    b"a",
    b"b",
    b"c",
    b"d",
    b"{t}x",
    b"{t}y",
    b"{t}z",
    b"k:1",
    b"k:2",
    b"\x00bin\xff\r\n",
    b"",
    b"key with spaces",
];

/// Strings Redis parses specially somewhere: integers at the edges, things that almost are.
const NUMBERISH: &[&str] = &[
    "0",
    "1",
    "-1",
    "42",
    "100",
    "9223372036854775807",
    "-9223372036854775808",
    "9223372036854775808",
    "007",
    "-0",
    " 1",
    "1 ",
    "+1",
    "1.5",
    "-2.25",
    "1e3",
    "0x10",
    "inf",
    "-inf",
    "nan",
    "",
    "abc",
];

pub struct Gen {
    pub rng: Rng,
    now_s: i64,
}

impl Gen {
    pub fn new(seed: u64) -> Gen {
        let now_s = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs() as i64);
        Gen {
            rng: Rng::new(seed),
            now_s,
        }
    }

    pub fn key(&mut self) -> Vec<u8> {
        self.rng.pick(KEYS).to_vec()
    }

    pub fn keys(&mut self, max: usize) -> Vec<Vec<u8>> {
        let n = 1 + self.rng.below(max);
        (0..n).map(|_| self.key()).collect()
    }

    /// Random bytes from an alphabet that includes the protocol's special bytes.
    pub fn bytes(&mut self, max_len: usize) -> Vec<u8> {
        const ALPHABET: &[u8] = b"abcxyz019 -.\r\n\x00\xff*$:";
        let len = self.rng.below(max_len + 1);
        (0..len).map(|_| self.rng.pick(ALPHABET)).collect()
    }

    /// A value: short binary, integer-like, or long (past the compact encodings' limits).
    pub fn value(&mut self) -> Vec<u8> {
        match self.rng.weighted(&[6, 4, 1, 1]) {
            0 => self.bytes(12),
            1 => b(self.rng.pick(NUMBERISH)),
            2 => self.bytes(120),
            _ => {
                let len = 60 + self.rng.below(300);
                (0..len).map(|i| b'a' + (i % 26) as u8).collect()
            }
        }
    }

    /// An integer argument: usually small, sometimes at or past the i64 edges, sometimes not
    /// a number at all.
    pub fn int_arg(&mut self) -> Vec<u8> {
        match self.rng.weighted(&[10, 2, 2]) {
            0 => num(self.rng.range(-10, 20)),
            1 => b(self.rng.pick(NUMBERISH)),
            _ => num(self
                .rng
                .pick(&[i64::MAX, i64::MIN, i64::MAX - 1, i64::MIN + 1, 1 << 40])),
        }
    }

    /// A TTL argument in seconds that cannot expire during the test (or is in the past).
    pub fn seconds(&mut self) -> Vec<u8> {
        match self.rng.weighted(&[6, 2, 1, 1]) {
            0 => num(self.rng.range(1_000, 100_000)),
            1 => num(self.rng.range(-5, 0)),
            2 => {
                // Not a short positive TTL: with PX, "1" or "42" expire while the script runs,
                // at a moment that differs between the servers by a millisecond.
                let arg = self.rng.pick(NUMBERISH);
                match arg.parse::<i64>() {
                    Ok(n) if (1..1_000_000).contains(&n) => num(n * 1_000_000),
                    _ => b(arg),
                }
            }
            _ => num(i64::MAX / 100),
        }
    }

    /// An absolute Unix time in seconds: far future or past.
    pub fn unix_seconds(&mut self) -> Vec<u8> {
        match self.rng.weighted(&[6, 2, 1]) {
            0 => num(self.now_s + self.rng.range(1_000, 100_000)),
            1 => num(self.rng.range(1, 1_000_000)),
            _ => b(self.rng.pick(NUMBERISH)),
        }
    }

    /// String commands.
    pub fn strings(&mut self) -> Step {
        let key = self.key();
        let r = &mut self.rng;
        match r.weighted(&[14, 10, 4, 4, 8, 3, 4, 2, 3, 2, 3]) {
            0 => {
                let mut parts = vec![b("SET"), key, self.value()];
                parts.extend(self.set_options());
                exact(parts)
            }
            1 => exact(vec![b("GET"), key]),
            2 => {
                let mut parts = vec![b("MGET")];
                parts.extend(self.keys(5));
                exact(parts)
            }
            3 => {
                let mut parts = vec![b("MSET")];
                for k in self.keys(4) {
                    parts.push(k);
                    parts.push(self.value());
                }
                if self.rng.chance(5) {
                    parts.pop();
                }
                exact(parts)
            }
            4 => {
                let name = self.rng.pick(&["INCR", "DECR", "INCRBY", "DECRBY"]);
                let mut parts = vec![b(name), key];
                if name.ends_with("BY") {
                    parts.push(self.int_arg());
                }
                exact(parts)
            }
            5 => exact(vec![b("APPEND"), key, self.value()]),
            6 => exact(vec![b("STRLEN"), key]),
            7 => exact(vec![b("GETSET"), key, self.value()]),
            8 => exact(vec![b(self.rng.pick(&["ECHO", "PING"])), self.value()]),
            9 => exact(vec![b("PING")]),
            _ => exact(vec![b("SET"), key, b(self.rng.pick(NUMBERISH))]),
        }
    }

    /// SET's options, valid and not.
    fn set_options(&mut self) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        for _ in 0..self.rng.below(3) {
            match self.rng.below(9) {
                0 => out.push(b("NX")),
                1 => out.push(b("XX")),
                2 => out.push(b("GET")),
                3 => out.push(b("KEEPTTL")),
                4 => out.extend([b("EX"), self.seconds()]),
                5 => out.extend([b("PX"), self.seconds()]),
                6 => out.extend([b("EXAT"), self.unix_seconds()]),
                7 => out.extend([b("PXAT"), self.unix_seconds()]),
                _ => out.push(b(self.rng.pick(&["BOGUS", "EX", "px"]))),
            }
        }
        out
    }

    /// Generic key commands.
    pub fn keyspace(&mut self) -> Step {
        let key = self.key();
        match self.rng.weighted(&[6, 6, 8, 6, 3, 3, 2]) {
            0 => {
                let mut parts = vec![b("DEL")];
                parts.extend(self.keys(4));
                exact(parts)
            }
            1 => {
                let mut parts = vec![b("EXISTS")];
                parts.extend(self.keys(4));
                exact(parts)
            }
            2 => {
                let name = self
                    .rng
                    .pick(&["EXPIRE", "PEXPIRE", "EXPIREAT", "PEXPIREAT"]);
                let time = if name.ends_with("AT") {
                    self.unix_seconds()
                } else {
                    self.seconds()
                };
                let mut parts = vec![b(name), key, time];
                for _ in 0..self.rng.below(3) {
                    parts.push(b(self.rng.pick(&["NX", "XX", "GT", "LT", "nx", "bad"])));
                }
                exact(parts)
            }
            3 => {
                let name = self.rng.pick(&["TTL", "PTTL"]);
                let tolerance = if name == "TTL" { 1 } else { 1_500 };
                Step::new(vec![b(name), key], Cmp::Ttl { tolerance })
            }
            4 => exact(vec![b("PERSIST"), key]),
            // DBSIZE counts expired keys not yet reclaimed, which depends on when each
            // server's active expiry ran: `Pair::settle` compares it after a full EXISTS.
            5 => exact(vec![b("EXISTS"), key]),
            _ => exact(vec![b("SELECT"), b(self.rng.pick(&["0", "x"]))]),
        }
    }

    /// Malformed requests: unknown commands, wrong arity, bad subcommands.
    pub fn errors(&mut self) -> Step {
        let key = self.key();
        let parts = match self.rng.below(8) {
            0 => vec![b("NOSUCHCOMMAND"), key],
            1 => vec![b("GET")],
            2 => vec![b("GET"), key.clone(), key],
            3 => vec![b("SET"), key],
            4 => vec![b("EXPIRE"), key],
            5 => vec![b("MSET"), key],
            6 => vec![b("INCRBY"), key],
            _ => vec![b("CONFIG"), b("NOSUCH")],
        };
        exact(parts)
    }

    /// Elements for collections: few distinct ones so commands collide, a binary one, and
    /// integer look-alikes (the compact encodings' cases).
    pub fn elem(&mut self) -> Vec<u8> {
        match self.rng.weighted(&[8, 2, 1]) {
            0 => b(self
                .rng
                .pick(&["a", "b", "c", "d", "e", "1", "2", "10", "-3"])),
            1 => self.bytes(6),
            _ => self.value(),
        }
    }

    fn elems(&mut self, max: usize) -> Vec<Vec<u8>> {
        let n = 1 + self.rng.below(max);
        (0..n).map(|_| self.elem()).collect()
    }

    /// A key for commands over several keys: plain keys (on different shards, which such a
    /// command must hold together) and the hash-tagged group (one shard).
    pub fn multi(&mut self) -> Vec<u8> {
        b(self
            .rng
            .pick(&["a", "b", "c", "d", "k:1", "{t}x", "{t}y", "{t}z"]))
    }

    fn small_int(&mut self) -> Vec<u8> {
        match self.rng.weighted(&[10, 1]) {
            0 => num(self.rng.range(-6, 6)),
            _ => b(self.rng.pick(NUMBERISH)),
        }
    }

    fn score(&mut self) -> Vec<u8> {
        match self.rng.weighted(&[8, 3, 1, 1]) {
            0 => num(self.rng.range(-3, 5)),
            1 => b(self.rng.pick(&["1.5", "-2.25", "0.1", "1e3", "3.0", "-0"])),
            2 => b(self.rng.pick(&["inf", "-inf", "+inf"])),
            _ => b(self.rng.pick(&["abc", "nan", "", "1x"])),
        }
    }

    fn score_bound(&mut self) -> Vec<u8> {
        match self.rng.weighted(&[6, 3, 2, 1]) {
            0 => num(self.rng.range(-3, 5)),
            1 => {
                let mut bound = b("(");
                bound.extend(num(self.rng.range(-3, 5)));
                bound
            }
            2 => b(self.rng.pick(&["-inf", "+inf", "(1.5"])),
            _ => b(self.rng.pick(&["x", "(", "[1"])),
        }
    }

    fn lex_bound(&mut self) -> Vec<u8> {
        match self.rng.weighted(&[6, 2, 1]) {
            0 => {
                let mut bound = b(self.rng.pick(&["[", "("]));
                bound.extend(b(self.rng.pick(&["a", "b", "c", "1", ""])));
                bound
            }
            1 => b(self.rng.pick(&["-", "+"])),
            _ => b(self.rng.pick(&["a", "x"])),
        }
    }

    /// Commands of the collection types (and TYPE), clashing with strings and each other.
    pub fn collections(&mut self) -> Step {
        match self.rng.weighted(&[5, 4, 4, 4, 1]) {
            0 => self.lists(),
            1 => self.hashes(),
            2 => self.sets(),
            3 => self.zsets(),
            _ => exact(vec![b("TYPE"), self.key()]),
        }
    }

    fn lists(&mut self) -> Step {
        let key = self.key();
        match self.rng.below(16) {
            0 | 1 => {
                let name = self.rng.pick(&["LPUSH", "RPUSH", "LPUSHX", "RPUSHX"]);
                let mut parts = vec![b(name), key];
                parts.extend(self.elems(4));
                exact(parts)
            }
            2 => {
                let mut parts = vec![b(self.rng.pick(&["LPOP", "RPOP"])), key];
                if self.rng.chance(40) {
                    parts.push(self.small_int());
                }
                exact(parts)
            }
            3 | 4 => exact(vec![b("LRANGE"), key, self.small_int(), self.small_int()]),
            5 => exact(vec![b("LLEN"), key]),
            6 => exact(vec![b("LINDEX"), key, self.small_int()]),
            7 => exact(vec![b("LSET"), key, self.small_int(), self.elem()]),
            8 => {
                let place = b(self.rng.pick(&["BEFORE", "AFTER", "after", "nowhere"]));
                exact(vec![b("LINSERT"), key, place, self.elem(), self.elem()])
            }
            9 => exact(vec![b("LREM"), key, self.small_int(), self.elem()]),
            10 => exact(vec![b("LTRIM"), key, self.small_int(), self.small_int()]),
            11 => {
                let mut parts = vec![b("LPOS"), key, self.elem()];
                for _ in 0..self.rng.below(3) {
                    let option = self.rng.pick(&["RANK", "COUNT", "MAXLEN", "BAD"]);
                    parts.push(b(option));
                    parts.push(self.small_int());
                }
                exact(parts)
            }
            12 => {
                let ends = ["LEFT", "RIGHT", "left", "middle"];
                let (from, to) = (self.rng.pick(&ends), self.rng.pick(&ends));
                exact(vec![b("LMOVE"), self.multi(), self.multi(), b(from), b(to)])
            }
            13 => exact(vec![b("RPOPLPUSH"), self.multi(), self.multi()]),
            14 if self.rng.chance(50) => {
                // LMPOP over keys of several shards.
                let n = 1 + self.rng.below(3);
                let mut parts = vec![b("LMPOP"), num(n as i64)];
                parts.extend((0..n).map(|_| self.multi()));
                parts.push(b(self.rng.pick(&["LEFT", "RIGHT", "up"])));
                if self.rng.chance(50) {
                    parts.push(b("COUNT"));
                    parts.push(self.small_int());
                }
                exact(parts)
            }
            _ => exact(vec![b("LRANGE"), key, b("0"), b("-1")]),
        }
    }

    fn hashes(&mut self) -> Step {
        let key = self.key();
        match self.rng.below(15) {
            0..=2 => {
                let mut parts = vec![b(self.rng.pick(&["HSET", "HMSET"])), key];
                for _ in 0..1 + self.rng.below(3) {
                    parts.push(self.elem());
                    parts.push(self.value());
                }
                if self.rng.chance(5) {
                    parts.pop();
                }
                exact(parts)
            }
            3 => exact(vec![b("HSETNX"), key, self.elem(), self.value()]),
            4 => exact(vec![b("HGET"), key, self.elem()]),
            5 => {
                let mut parts = vec![b("HMGET"), key];
                parts.extend(self.elems(3));
                exact(parts)
            }
            6 => Step::new(vec![b("HGETALL"), key], Cmp::UnorderedPairs),
            7 => Step::new(
                vec![b(self.rng.pick(&["HKEYS", "HVALS"])), key],
                Cmp::Unordered,
            ),
            8 => {
                let mut parts = vec![b("HDEL"), key];
                parts.extend(self.elems(3));
                exact(parts)
            }
            9 => exact(vec![
                b(self.rng.pick(&["HEXISTS", "HSTRLEN"])),
                key,
                self.elem(),
            ]),
            10 => exact(vec![b("HLEN"), key]),
            11 => exact(vec![b("HINCRBY"), key, self.elem(), self.int_arg()]),
            12 => {
                let by = b(self
                    .rng
                    .pick(&["1.5", "2", "-0.25", "10", "abc", "1e2", "inf"]));
                // Its own field: corewire computes in f64 where Redis uses a long double, so
                // fields near 2^63 (from HSET of integer edge cases) would differ (README).
                exact(vec![b("HINCRBYFLOAT"), key, b("fl"), by])
            }
            13 => {
                let mut parts = vec![b("HRANDFIELD"), key];
                if self.rng.chance(60) {
                    parts.push(num(self.rng.range(-4, 4)));
                    if self.rng.chance(50) {
                        parts.push(b("WITHVALUES"));
                    }
                }
                Step::new(parts, Cmp::SameShape)
            }
            _ => Step::new(vec![b("HGETALL"), key], Cmp::UnorderedPairs),
        }
    }

    fn sets(&mut self) -> Step {
        let key = self.key();
        match self.rng.below(15) {
            0..=2 => {
                let mut parts = vec![b("SADD"), key];
                parts.extend(self.elems(4));
                exact(parts)
            }
            3 => {
                let mut parts = vec![b("SREM"), key];
                parts.extend(self.elems(3));
                exact(parts)
            }
            4 => Step::new(vec![b("SMEMBERS"), key], Cmp::Unordered),
            5 => exact(vec![b("SISMEMBER"), key, self.elem()]),
            6 => {
                let mut parts = vec![b("SMISMEMBER"), key];
                parts.extend(self.elems(3));
                exact(parts)
            }
            7 => exact(vec![b("SCARD"), key]),
            // Popping everything keeps both servers' sets equal.
            8 => Step::new(vec![b("SPOP"), key, b("1000")], Cmp::Unordered),
            9 => Step::new(
                vec![b("SRANDMEMBER"), key, num(self.rng.range(-3, 3))],
                Cmp::SameShape,
            ),
            10 => exact(vec![b("SMOVE"), self.multi(), self.multi(), self.elem()]),
            11 => {
                // Any keys: corewire-kv gathers these across shards.
                let name = self.rng.pick(&["SINTER", "SUNION", "SDIFF"]);
                let mut parts = vec![b(name)];
                for _ in 0..1 + self.rng.below(3) {
                    parts.push(self.key());
                }
                Step::new(parts, Cmp::Unordered)
            }
            12 => {
                let name = self.rng.pick(&["SINTERSTORE", "SUNIONSTORE", "SDIFFSTORE"]);
                let mut parts = vec![b(name)];
                for _ in 0..2 + self.rng.below(2) {
                    parts.push(self.multi());
                }
                exact(parts)
            }
            13 => {
                let n = 1 + self.rng.below(3);
                let mut parts = vec![b("SINTERCARD"), num(n as i64)];
                for _ in 0..n {
                    parts.push(self.key());
                }
                if self.rng.chance(40) {
                    parts.push(b("LIMIT"));
                    parts.push(self.small_int());
                }
                exact(parts)
            }
            _ => Step::new(vec![b("SMEMBERS"), key], Cmp::Unordered),
        }
    }

    fn zsets(&mut self) -> Step {
        let key = self.key();
        match self.rng.below(16) {
            0..=2 => {
                let mut parts = vec![b("ZADD"), key];
                for _ in 0..self.rng.below(3) {
                    let flag = self.rng.pick(&["NX", "XX", "GT", "LT", "CH", "INCR"]);
                    parts.push(b(flag));
                }
                for _ in 0..1 + self.rng.below(3) {
                    parts.push(self.score());
                    parts.push(self.elem());
                }
                exact(parts)
            }
            3 => exact(vec![b("ZINCRBY"), key, self.score(), self.elem()]),
            4 => {
                let mut parts = vec![b("ZREM"), key];
                parts.extend(self.elems(3));
                exact(parts)
            }
            5 => exact(vec![b("ZSCORE"), key, self.elem()]),
            6 => {
                let mut parts = vec![b("ZMSCORE"), key];
                parts.extend(self.elems(3));
                exact(parts)
            }
            7 => exact(vec![b("ZCARD"), key]),
            8 => exact(vec![
                b("ZCOUNT"),
                key,
                self.score_bound(),
                self.score_bound(),
            ]),
            // Lex ranges mean something only when every score is equal (Redis's answer
            // otherwise depends on its skiplist's random levels): they run on `zlex`, whose
            // members all score 0.
            9 => match self.rng.below(3) {
                0 => exact(vec![b("ZADD"), b("zlex"), b("0"), self.elem()]),
                1 => exact(vec![
                    b("ZLEXCOUNT"),
                    b("zlex"),
                    self.lex_bound(),
                    self.lex_bound(),
                ]),
                _ => {
                    let name = self.rng.pick(&["ZRANGEBYLEX", "ZREVRANGEBYLEX"]);
                    let mut parts = vec![b(name), b("zlex"), self.lex_bound(), self.lex_bound()];
                    if self.rng.chance(30) {
                        parts.extend([b("LIMIT"), self.small_int(), self.small_int()]);
                    }
                    exact(parts)
                }
            },
            10 | 11 => {
                let by = self.rng.below(3);
                let key = if by == 2 { b("zlex") } else { key };
                let (lo, hi) = match by {
                    0 => (self.small_int(), self.small_int()),
                    1 => (self.score_bound(), self.score_bound()),
                    _ => (self.lex_bound(), self.lex_bound()),
                };
                let mut parts = vec![b("ZRANGE"), key, lo, hi];
                match by {
                    1 => parts.push(b("BYSCORE")),
                    2 => parts.push(b("BYLEX")),
                    _ => {}
                }
                if self.rng.chance(30) {
                    parts.push(b("REV"));
                }
                if self.rng.chance(30) {
                    parts.extend([b("LIMIT"), self.small_int(), self.small_int()]);
                }
                if self.rng.chance(40) {
                    parts.push(b("WITHSCORES"));
                }
                exact(parts)
            }
            12 => {
                let name = self
                    .rng
                    .pick(&["ZRANGEBYSCORE", "ZREVRANGEBYSCORE", "ZREVRANGE"]);
                let (lo, hi) = if name == "ZREVRANGE" {
                    (self.small_int(), self.small_int())
                } else {
                    (self.score_bound(), self.score_bound())
                };
                let mut parts = vec![b(name), key, lo, hi];
                if self.rng.chance(40) {
                    parts.push(b("WITHSCORES"));
                }
                exact(parts)
            }
            13 => exact(vec![
                b(self.rng.pick(&["ZRANK", "ZREVRANK"])),
                key,
                self.elem(),
            ]),
            14 => {
                let mut parts = vec![b(self.rng.pick(&["ZPOPMIN", "ZPOPMAX"])), key];
                if self.rng.chance(40) {
                    parts.push(self.small_int());
                }
                exact(parts)
            }
            _ => {
                let name = self
                    .rng
                    .pick(&["ZUNIONSTORE", "ZINTERSTORE", "ZRANGESTORE"]);
                if name == "ZRANGESTORE" {
                    return exact(vec![
                        b(name),
                        self.multi(),
                        self.multi(),
                        b("0"),
                        self.small_int(),
                    ]);
                }
                let n = 1 + self.rng.below(3);
                let mut parts = vec![b(name), self.multi(), num(n as i64)];
                for _ in 0..n {
                    parts.push(self.multi());
                }
                if self.rng.chance(30) {
                    parts.push(b("WEIGHTS"));
                    for _ in 0..n {
                        parts.push(self.score());
                    }
                }
                if self.rng.chance(30) {
                    parts.push(b("AGGREGATE"));
                    parts.push(b(self.rng.pick(&["SUM", "MIN", "MAX", "AVG"])));
                }
                exact(parts)
            }
        }
    }
}
