//! The master's side of per-shard links, driven by hand: the test speaks as replica shard
//! `i` (`REPLCONF shard-streams 4 key-map M shard i`, PSYNC), as a replica of this build
//! does. A replica's links sync in full together (one cut for all of them): the test's
//! links, from one address without a listening port, are one replica's, so a full sync
//! needs all four ([`Link::open_all`], or [`Link::start`] each, then [`Link::began`]).

use std::collections::BTreeSet;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use super::common::{request, Resp, Server};
use corewire_kv::rdb::{Decoder, Item};
use corewire_kv::repl::shards::KEY_MAP;
use corewire_kv::routing::shard_of;

pub fn master() -> (Server, Resp) {
    let server = Server::start(&["--shards", "4"]);
    let conn = server.connect();
    (server, conn)
}

/// One command of a stream.
pub type Args = Vec<Vec<u8>>;

/// A replica shard's link to the master.
pub struct Link {
    raw: TcpStream,
    buf: Vec<u8>,
    pub shard: usize,
    pub replid: String,
    /// The stream's offset: bytes of the shard's stream taken so far.
    pub offset: u64,
    /// The keys its stream's writes named.
    pub written: BTreeSet<Vec<u8>>,
}

/// How a link began.
pub enum Began {
    /// The keys of its part of the snapshot.
    Full(BTreeSet<Vec<u8>>),
    Continue,
}

impl Link {
    fn read_more(&mut self) {
        let mut chunk = [0u8; 65536];
        let n = self.raw.read(&mut chunk).expect("reading the link");
        assert!(n > 0, "shard {}: the master closed the link", self.shard);
        self.buf.extend_from_slice(&chunk[..n]);
    }

    fn line(&mut self) -> String {
        loop {
            if let Some(at) = self.buf.windows(2).position(|w| w == b"\r\n") {
                let line = String::from_utf8_lossy(&self.buf[..at]).into_owned();
                self.buf.drain(..at + 2);
                return line;
            }
            self.read_more();
        }
    }

    /// Connects as shard `shard`'s link and sends PSYNC (`?` and -1 for a full sync);
    /// waits for the master's answer (a full sync needs the other three links started).
    pub fn open(port: u16, shard: usize, replid: &str, offset: i64) -> (Link, Began) {
        let mut link = Link::start(port, shard, replid, offset);
        let began = link.began();
        (link, began)
    }

    /// All four links, synced in full together.
    pub fn open_all(port: u16) -> Vec<(Link, Began)> {
        let mut links: Vec<Link> = (0..4).map(|s| Link::start(port, s, "?", -1)).collect();
        let began: Vec<Began> = links.iter_mut().map(Link::began).collect();
        links.into_iter().zip(began).collect()
    }

    /// Connects as shard `shard`'s link and sends PSYNC, answered at [`Link::began`].
    pub fn start(port: u16, shard: usize, replid: &str, offset: i64) -> Link {
        let raw = TcpStream::connect(("127.0.0.1", port)).unwrap();
        raw.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        let mut link = Link {
            raw,
            buf: Vec::new(),
            shard,
            replid: replid.to_owned(),
            offset: 0,
            written: BTreeSet::new(),
        };
        let i = shard.to_string();
        let mut send = |args: &[&str]| link.raw.write_all(&request(args)).unwrap();
        send(&["REPLCONF", "capa", "eof", "capa", "psync2"]);
        send(&[
            "REPLCONF",
            "shard-streams",
            "4",
            "key-map",
            KEY_MAP,
            "shard",
            &i,
        ]);
        send(&["PSYNC", replid, &offset.to_string()]);
        link.offset = offset.max(1) as u64 - 1;
        link
    }

    /// The master's answer to [`Link::start`]'s PSYNC (and the snapshot's keys).
    pub fn began(&mut self) -> Began {
        let shard = self.shard;
        assert_eq!(self.line(), "+OK");
        assert_eq!(self.line(), format!("+SHARD-LINK {shard}"));
        let answer = self.line();
        let fields: Vec<&str> = answer.split(' ').collect();
        match fields[..] {
            ["+CONTINUE", id] => {
                assert_eq!(id, self.replid, "the same history goes on");
                Began::Continue
            }
            ["+FULLRESYNC", id, at] => {
                self.replid = id.to_owned();
                self.offset = at.parse().unwrap();
                Began::Full(self.snapshot())
            }
            _ => panic!("shard {shard}: PSYNC answered {answer:?}"),
        }
    }

    /// The diskless RDB: its keys. Then the link acknowledges, as a replica that
    /// loaded it.
    fn snapshot(&mut self) -> BTreeSet<Vec<u8>> {
        let head = self.line();
        let mark = head
            .strip_prefix("$EOF:")
            .expect("a diskless RDB")
            .as_bytes();
        let mark = mark.to_vec();
        let end = loop {
            if let Some(at) = self.buf.windows(mark.len()).position(|w| w == &mark[..]) {
                break at;
            }
            self.read_more();
        };
        let rdb: Vec<u8> = self.buf.drain(..end + mark.len()).take(end).collect();
        let mut decoder = Decoder::new(&rdb).expect("an RDB");
        let mut keys = BTreeSet::new();
        loop {
            match decoder.next_item().expect("a valid RDB") {
                Item::Key { key, .. } => assert!(keys.insert(key.to_vec())),
                Item::End => break,
                _ => {}
            }
        }
        self.ack();
        keys
    }

    pub fn ack(&mut self) {
        let offset = self.offset.to_string();
        (self.raw.write_all(&request(&["REPLCONF", "ACK", &offset]))).unwrap();
    }

    /// The stream's next command, read within `deadline`.
    pub fn next(&mut self, deadline: Instant) -> Option<Args> {
        loop {
            if let Some((args, used)) = parse_command(&self.buf) {
                self.buf.drain(..used);
                self.offset += used as u64;
                return Some(args);
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return None;
            }
            self.raw.set_read_timeout(Some(left)).unwrap();
            let mut chunk = [0u8; 65536];
            match self.raw.read(&mut chunk) {
                Ok(0) => panic!("shard {}: the master closed the link", self.shard),
                Ok(n) => self.buf.extend_from_slice(&chunk[..n]),
                Err(_) => return None,
            }
        }
    }

    /// Reads the stream until `want` keys were written (SET) in it; every write's
    /// keys are checked to be this shard's. The SET keys seen, in order.
    pub fn sets_until(&mut self, want: usize) -> Vec<Vec<u8>> {
        let sets = self.sets_while(|sets| sets.len() < want);
        self.ack();
        sets
    }

    /// Takes what the stream brings until it is quiet for a moment, then acknowledges
    /// it all (a replica answers the master's GETACK so).
    pub fn catch_up(&mut self) {
        while self
            .next(Instant::now() + Duration::from_millis(300))
            .is_some()
        {}
        self.ack();
    }

    /// [`Link::sets_until`] without acknowledging them.
    pub fn sets_unacknowledged(&mut self, want: usize) -> Vec<Vec<u8>> {
        self.sets_while(|sets| sets.len() < want)
    }

    /// [`Link::sets_until`] a SET of `key` arrived.
    pub fn sets_through(&mut self, key: &str) -> Vec<Vec<u8>> {
        let sets = self.sets_while(|sets| sets.last().is_none_or(|last| last != key.as_bytes()));
        self.ack();
        sets
    }

    fn sets_while(&mut self, more: impl Fn(&[Vec<u8>]) -> bool) -> Vec<Vec<u8>> {
        let deadline = Instant::now() + Duration::from_secs(20);
        let mut sets = Vec::new();
        while more(&sets) {
            let Some(args) = self.next(deadline) else {
                panic!("shard {}: {} SETs arrived, not all", self.shard, sets.len());
            };
            for key in keys_of(&args) {
                assert_eq!(
                    shard_of(key, 4),
                    self.shard,
                    "shard {}'s stream has {:?}",
                    self.shard,
                    String::from_utf8_lossy(&args.concat())
                );
                self.written.insert(key.to_vec());
            }
            if args[0].eq_ignore_ascii_case(b"SET") {
                sets.push(args[1].clone());
            }
        }
        sets
    }

    /// Whether the master closed the link within 20 s (reading what it sent before).
    pub fn closed_by_master(&mut self) -> bool {
        let deadline = Instant::now() + Duration::from_secs(20);
        let mut chunk = [0u8; 65536];
        while let Some(left) =
            Some(deadline.saturating_duration_since(Instant::now())).filter(|left| !left.is_zero())
        {
            self.raw.set_read_timeout(Some(left)).unwrap();
            match self.raw.read(&mut chunk) {
                Ok(0) => return true,
                Ok(_) => {}
                Err(e) => return e.kind() == std::io::ErrorKind::ConnectionReset,
            }
        }
        false
    }
}

/// The keys a stream's write names (none for SELECT, PING, MULTI, EXEC).
fn keys_of(args: &Args) -> Vec<&[u8]> {
    let name = String::from_utf8_lossy(&args[0]).to_ascii_uppercase();
    match name.as_str() {
        "SELECT" | "PING" | "MULTI" | "EXEC" | "FLUSHALL" | "FUNCTION" | "REPLCONF" => vec![],
        "DEL" | "UNLINK" => args[1..].iter().map(Vec::as_slice).collect(),
        "MSET" => args[1..].iter().step_by(2).map(Vec::as_slice).collect(),
        _ => vec![&args[1][..]],
    }
}

/// One RESP array of bulk strings from the front of `buf`, and its length.
fn parse_command(buf: &[u8]) -> Option<(Args, usize)> {
    let line = |from: usize| -> Option<(usize, usize)> {
        let end = from + buf[from..].windows(2).position(|w| w == b"\r\n")?;
        let n = std::str::from_utf8(&buf[from + 1..end])
            .ok()?
            .parse()
            .ok()?;
        Some((n, end + 2))
    };
    assert_eq!(buf.first().copied().unwrap_or(b'*'), b'*', "{buf:?}");
    let (count, mut at) = line(0)?;
    let mut args = Vec::with_capacity(count);
    for _ in 0..count {
        let (len, start) = line(at)?;
        if buf.len() < start + len + 2 {
            return None;
        }
        args.push(buf[start..start + len].to_vec());
        at = start + len + 2;
    }
    Some((args, at))
}

/// A key on shard `shard` (of 4), numbered `n`.
pub fn key_on(shard: usize, n: usize) -> String {
    (0..)
        .map(|m| format!("k{n}:{m}"))
        .find(|key| shard_of(key.as_bytes(), 4) == shard)
        .unwrap()
}
