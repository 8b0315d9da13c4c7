//! Generated keyspace and string commands (SETNX ... OBJECT ENCODING):
//! commands over several keys (RENAME, COPY, MSETNX, TOUCH, UNLINK) take plain keys, which
//! live on different shards, as well as hash-tagged ones.

use super::gen::{b, exact, Gen};
use super::{Cmp, Step};

fn num(n: i64) -> Vec<u8> {
    n.to_string().into_bytes()
}

/// INCRBYFLOAT operands for keys of the pool, which may hold any string: integers (exact
/// in both servers up to 2^64) and things that are not floats.
const INT_DELTAS: &[&str] = &[
    "1", "-1", "10", "0", "-0", "+3", "007", "abc", "", " 1", "1.5x", "inf", "-inf", "nan",
];

/// Fractions for the key `float`, which only INCRBYFLOAT writes: binary fractions, exact in
/// `f64` and in Redis's `long double` alike (corewire-kv adds in `f64`; README).
const FRACTIONS: &[&str] = &["0.5", "1.25", "-2.75", "0.125", "3e2", "-7", "1e1"];

const PATTERNS: &[&str] = &[
    "*", "k:*", "{t}*", "?", "[ab]", "[^a]*", "*spaces", "\\{t\\}x",
];

impl Gen {
    pub fn keyops(&mut self) -> Step {
        let key = self.key();
        match self
            .rng
            .weighted(&[4, 3, 3, 3, 4, 4, 3, 3, 3, 3, 3, 3, 2, 2, 2, 1])
        {
            0 => exact(vec![b("SETNX"), key, self.value()]),
            1 => {
                let name = self.rng.pick(&["SETEX", "PSETEX"]);
                exact(vec![b(name), key, self.seconds(), self.value()])
            }
            2 => exact(vec![b("GETDEL"), key]),
            3 => {
                let mut parts = vec![b("GETEX"), key];
                for _ in 0..self.rng.below(3) {
                    match self.rng.below(6) {
                        0 => parts.push(b("PERSIST")),
                        1 => parts.extend([b("EX"), self.seconds()]),
                        2 => parts.extend([b("PX"), self.seconds()]),
                        3 => parts.extend([b("EXAT"), self.unix_seconds()]),
                        4 => parts.extend([b("PXAT"), self.unix_seconds()]),
                        _ => parts.push(b(self.rng.pick(&["KEEPTTL", "EX", "nx"]))),
                    }
                }
                exact(parts)
            }
            4 => {
                let name = self.rng.pick(&["GETRANGE", "SUBSTR"]);
                let (start, end) = (self.range_bound(), self.range_bound());
                exact(vec![b(name), key, start, end])
            }
            5 => {
                let offset = match self.rng.weighted(&[8, 1, 1, 1]) {
                    0 => num(self.rng.range(0, 40)),
                    1 => num(-1),
                    2 => num(536_870_912),
                    _ => b("x"),
                };
                let value = if self.rng.chance(10) {
                    Vec::new()
                } else {
                    self.value()
                };
                exact(vec![b("SETRANGE"), key, offset, value])
            }
            6 if self.rng.chance(50) => exact(vec![
                b("INCRBYFLOAT"),
                b("float"),
                b(self.rng.pick(FRACTIONS)),
            ]),
            6 => exact(vec![b("INCRBYFLOAT"), key, b(self.rng.pick(INT_DELTAS))]),
            7 => {
                let name = self.rng.pick(&["EXPIRETIME", "PEXPIRETIME"]);
                let tolerance = if name == "EXPIRETIME" { 1 } else { 1_500 };
                Step::new(vec![b(name), key], Cmp::Ttl { tolerance })
            }
            8 => {
                let name = self.rng.pick(&["TOUCH", "UNLINK"]);
                let mut parts = vec![b(name)];
                parts.extend(self.keys(4));
                exact(parts)
            }
            9 => {
                let name = self.rng.pick(&["RENAME", "RENAMENX"]);
                exact(vec![b(name), self.multi(), self.multi()])
            }
            10 => {
                let mut parts = vec![b("COPY"), self.multi(), self.multi()];
                for _ in 0..self.rng.below(3) {
                    match self.rng.below(4) {
                        0 | 1 => parts.push(b("REPLACE")),
                        2 => parts.extend([b("DB"), b(self.rng.pick(&["0", "x"]))]),
                        _ => parts.push(b("BOGUS")),
                    }
                }
                exact(parts)
            }
            11 => {
                let mut parts = vec![b("MSETNX")];
                for _ in 0..1 + self.rng.below(3) {
                    parts.push(self.multi());
                    parts.push(self.value());
                }
                if self.rng.chance(5) {
                    parts.pop();
                }
                exact(parts)
            }
            12 => Step::new(vec![b("KEYS"), b(self.rng.pick(PATTERNS))], Cmp::Unordered),
            13 => Step::new(vec![b("RANDOMKEY")], Cmp::SameShape),
            14 => Step::new(vec![b("OBJECT"), b("ENCODING"), key], Cmp::SameShape),
            _ => exact(vec![b("FLUSHDB")]),
        }
    }

    fn range_bound(&mut self) -> Vec<u8> {
        match self.rng.weighted(&[10, 1]) {
            0 => num(self.rng.range(-8, 12)),
            _ => self.int_arg(),
        }
    }
}
