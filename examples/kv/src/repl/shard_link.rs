//! One shard's replication link, the sans-I/O part: how a replica's shard asks for its
//! own connection, what the master answers, and the link's bounded output queue.
//!
//! After the node-level offer was accepted (`+SHARD-STREAMS N`, see [`super::shards`]),
//! replica shard `i` opens a connection of its own and names its shard before PSYNC:
//! `REPLCONF shard-streams <N> key-map <MAP> shard <i>` ([`link_request`]). The master
//! answers `+SHARD-LINK <i>` ([`decide_link`]) when it would accept the offer and `i` is
//! one of its shards; then the connection's PSYNC is shard `i`'s: its part of the
//! point-in-time snapshot and its stream from that point (`+FULLRESYNC <replid>
//! <offset>`, the offset counting shard `i`'s stream bytes only), or `+CONTINUE` from
//! shard `i`'s own backlog. Any other answer (`+SINGLE-STREAM <why>`, an error) means the
//! link is refused: the replica goes back to the single stream.
//!
//! Each link's output is bounded as a replica connection's is (`client-output-buffer-limit
//! replica`, hard and soft): [`OutQueue`] holds what the shard streamed for the link and
//! its connection has not taken yet, and says when the link passed a limit (the master
//! then drops it; the replica reconnects and resynchronizes that shard).
//!
//! # One cut for all of a replica's links
//! A replica's links take their full syncs together, from one cut of the whole node
//! ([`Rounds`]): a transaction over several shards is then either in every involved
//! shard's snapshot part or in every one's stream, never half in each, which the
//! replica's barriers (see [`super::barrier`]) need: a shard held at a barrier waits for
//! the other shards' parts, which must come in their streams. A link whose PSYNC needs a
//! full sync opens a round for its replica (known by its address and listening port);
//! the replica's other links are then dropped, and every link of it that asks meanwhile
//! gets a full sync and joins ([`Rounds::forced`]); the link that completes the round
//! takes the cut for all of them. So a link that cannot resume partially (its shard's
//! backlog no longer has its offset) re-cuts every link of its replica: a partial resync
//! of one link is correct alone (its shard's stream goes on from where the replica shard
//! stood, and every other link's too), a full sync of one link alone is not.

use std::collections::VecDeque;

use bytes::{Bytes, BytesMut};

use super::handshake::request;
use super::shards::{decide, Answer, Decline, Local, KEY_MAP};

/// The request that makes a connection shard `shard`'s link (one of `shards`).
pub fn link_request(shards: usize, shard: usize) -> Bytes {
    let (n, i) = (shards.to_string(), shard.to_string());
    request(&[
        b"REPLCONF",
        b"shard-streams",
        n.as_bytes(),
        b"key-map",
        KEY_MAP.as_bytes(),
        b"shard",
        i.as_bytes(),
    ])
}

/// The master's answer to a link request for shard `shard` (the offer's parts as in
/// [`decide`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LinkAnswer {
    /// `+SHARD-LINK <i>`: the connection's PSYNC is shard `i`'s.
    Link(usize),
    /// The offer itself is declined: one stream.
    Single(Decline),
    /// `-ERR`: no such shard.
    NoSuchShard { shard: u64, shards: usize },
}

/// Decides a link request: the offer must be one the master accepts, and the shard one of
/// its shards.
pub fn decide_link(
    shards: Option<u64>,
    key_map: Option<&[u8]>,
    shard: u64,
    local: &Local,
) -> LinkAnswer {
    match decide(shards, key_map, local) {
        Answer::Single(why) => LinkAnswer::Single(why),
        Answer::PerShard(n) if shard < n as u64 => LinkAnswer::Link(shard as usize),
        Answer::PerShard(n) => LinkAnswer::NoSuchShard { shard, shards: n },
    }
}

impl LinkAnswer {
    /// The reply line (without CRLF): a status line, or an error's.
    pub fn line(&self) -> String {
        match self {
            LinkAnswer::Link(i) => format!("+SHARD-LINK {i}"),
            LinkAnswer::Single(why) => Answer::Single(why.clone()).line(),
            LinkAnswer::NoSuchShard { shard, shards } => {
                format!("-ERR no shard {shard} (this node has {shards})")
            }
        }
    }
}

/// The replica's reading of the master's reply to its link request for `shard`.
pub fn on_link_reply(line: &[u8], shard: usize) -> bool {
    line.strip_prefix(b"+SHARD-LINK ")
        .and_then(|n| std::str::from_utf8(n).ok())
        .and_then(|n| n.trim().parse::<usize>().ok())
        == Some(shard)
}

/// `client-output-buffer-limit replica`: `hard` bytes at once, or more than `soft` bytes
/// for `soft_s` seconds (0: no such limit).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Limits {
    pub hard: u64,
    pub soft: u64,
    pub soft_s: u64,
}

/// The link passed a limit: it is dropped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Over;

/// A link's stream bytes not yet handed to its connection, and what the connection last
/// reported unsent: together they are what the link holds, which the limits bound.
#[derive(Debug, Default)]
pub struct OutQueue {
    out: VecDeque<Bytes>,
    queued: usize,
    conn_pending: usize,
    soft_since_ms: Option<u64>,
}

impl OutQueue {
    /// What the link holds (queued here and unsent on the connection).
    pub fn held(&self) -> u64 {
        (self.queued + self.conn_pending) as u64
    }

    pub fn is_empty(&self) -> bool {
        self.out.is_empty()
    }

    /// Queues `bytes`; `Err(Over)` once the link holds more than the hard limit (the
    /// queue is then emptied: the link is dropped, and nothing more is kept for it).
    pub fn push(&mut self, bytes: Bytes, limits: &Limits) -> Result<(), Over> {
        if !bytes.is_empty() {
            self.queued += bytes.len();
            self.out.push_back(bytes);
        }
        if limits.hard > 0 && self.held() > limits.hard {
            self.clear();
            return Err(Over);
        }
        Ok(())
    }

    /// Up to `max` bytes (more only when one piece is larger) to hand to the connection.
    pub fn take(&mut self, max: usize) -> Bytes {
        match self.out.len() {
            0 => return Bytes::new(),
            1 => {
                let bytes = self.out.pop_front().unwrap_or_default();
                self.queued -= bytes.len();
                return bytes;
            }
            _ => {}
        }
        let mut chunk = BytesMut::new();
        while chunk.len() < max {
            let Some(bytes) = self.out.pop_front() else {
                break;
            };
            self.queued -= bytes.len();
            chunk.extend_from_slice(&bytes);
        }
        chunk.freeze()
    }

    /// The connection's unsent bytes, as it last reported them.
    pub fn set_conn_pending(&mut self, pending: usize) {
        self.conn_pending = pending;
    }

    /// The soft limit at `now_ms`: `Err(Over)` once the link held more than `soft` for
    /// `soft_s` seconds without a break.
    pub fn tick(&mut self, now_ms: u64, limits: &Limits) -> Result<(), Over> {
        if limits.soft == 0 || self.held() <= limits.soft {
            self.soft_since_ms = None;
            return Ok(());
        }
        let since = *self.soft_since_ms.get_or_insert(now_ms);
        if now_ms.saturating_sub(since) >= limits.soft_s * 1000 {
            self.clear();
            return Err(Over);
        }
        Ok(())
    }

    fn clear(&mut self) {
        self.out.clear();
        self.queued = 0;
    }
}

/// A replica, as its links name it: its address and listening port.
pub type ReplicaAddr = (String, u16);

/// The rounds of full syncs gathering, per replica: which shard's link joined (its id).
#[derive(Debug, Default)]
pub struct Rounds {
    gathering: std::collections::HashMap<ReplicaAddr, Vec<Option<u64>>>,
}

/// A link's place in its replica's round.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Joined {
    /// Other links are still to join: wait for the cut.
    Wait,
    /// This link completed the round: take the cut for these links (by shard).
    Cut(Vec<u64>),
}

impl Rounds {
    /// Whether `replica`'s links sync in full now (a round gathers them).
    pub fn forced(&self, replica: &ReplicaAddr) -> bool {
        self.gathering.contains_key(replica)
    }

    /// A link of `replica` needs a full sync: `true` when this opens its round (the
    /// replica's links that stream must then be dropped, to join it).
    pub fn open(&mut self, replica: &ReplicaAddr, shards: usize) -> bool {
        if self.gathering.contains_key(replica) {
            return false;
        }
        self.gathering.insert(replica.clone(), vec![None; shards]);
        true
    }

    /// Shard `shard`'s link `id` of `replica` waits for the cut.
    pub fn join(&mut self, replica: &ReplicaAddr, shards: usize, shard: usize, id: u64) -> Joined {
        let round = (self.gathering)
            .entry(replica.clone())
            .or_insert_with(|| vec![None; shards]);
        if let Some(slot) = round.get_mut(shard) {
            *slot = Some(id);
        }
        if round.iter().all(Option::is_some) {
            let ids = round.iter().flatten().copied().collect();
            self.gathering.remove(replica);
            return Joined::Cut(ids);
        }
        Joined::Wait
    }

    /// Link `id` (of shard `shard`) ended while waiting.
    pub fn leave(&mut self, replica: &ReplicaAddr, shard: usize, id: u64) {
        if let Some(slot) = (self.gathering.get_mut(replica)).and_then(|r| r.get_mut(shard)) {
            if *slot == Some(id) {
                *slot = None;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_round_gathers_every_link_of_its_replica_then_cuts_once() {
        let (a, b): (ReplicaAddr, ReplicaAddr) =
            (("10.0.0.1".into(), 7000), ("10.0.0.1".into(), 7001));
        let mut rounds = Rounds::default();
        assert!(!rounds.forced(&a));
        assert!(rounds.open(&a, 3));
        assert!(!rounds.open(&a, 3), "one round at a time");
        assert!(rounds.forced(&a) && !rounds.forced(&b));
        assert_eq!(rounds.join(&a, 3, 2, 12), Joined::Wait);
        assert_eq!(rounds.join(&a, 3, 0, 10), Joined::Wait);
        // Shard 0's link went away; its next one joins in its place.
        rounds.leave(&a, 0, 10);
        rounds.leave(&a, 2, 99);
        assert_eq!(rounds.join(&a, 3, 1, 11), Joined::Wait);
        assert_eq!(rounds.join(&b, 3, 1, 5), Joined::Wait);
        assert_eq!(rounds.join(&a, 3, 0, 13), Joined::Cut(vec![13, 11, 12]));
        assert!(!rounds.forced(&a) && rounds.forced(&b));
    }

    fn local(serves: bool) -> Local {
        Local {
            shards: 4,
            serves,
            follows_master: false,
        }
    }

    #[test]
    fn a_link_request_names_its_shard() {
        assert_eq!(
            &link_request(4, 2)[..],
            b"*7\r\n$8\r\nREPLCONF\r\n$13\r\nshard-streams\r\n$1\r\n4\r\n$7\r\nkey-map\r\n\
              $14\r\ncrc16-slot-mod\r\n$5\r\nshard\r\n$1\r\n2\r\n"
        );
    }

    #[test]
    fn the_master_links_only_an_offer_it_accepts_and_a_shard_it_has() {
        let map = Some(KEY_MAP.as_bytes());
        assert_eq!(
            decide_link(Some(4), map, 3, &local(true)),
            LinkAnswer::Link(3)
        );
        assert_eq!(
            decide_link(Some(4), map, 4, &local(true)).line(),
            "-ERR no shard 4 (this node has 4)"
        );
        assert_eq!(
            decide_link(Some(4), map, 0, &local(false)).line(),
            "+SINGLE-STREAM not-served"
        );
        assert_eq!(
            decide_link(Some(2), map, 0, &local(true)).line(),
            "+SINGLE-STREAM shard-count 4 (offered 2)"
        );
        assert_eq!(LinkAnswer::Link(1).line(), "+SHARD-LINK 1");
    }

    #[test]
    fn the_replica_takes_only_its_own_shards_link() {
        assert!(on_link_reply(b"+SHARD-LINK 2", 2));
        assert!(!on_link_reply(b"+SHARD-LINK 1", 2));
        assert!(!on_link_reply(b"+SINGLE-STREAM not-served", 2));
        assert!(!on_link_reply(b"+OK", 2));
        assert!(!on_link_reply(
            b"-ERR Unrecognized REPLCONF option: shard",
            2
        ));
    }

    #[test]
    fn the_queue_hands_out_chunks_in_order() {
        let mut queue = OutQueue::default();
        let limits = Limits::default();
        for piece in [&b"ab"[..], b"cd", b"ef"] {
            queue.push(Bytes::copy_from_slice(piece), &limits).unwrap();
        }
        assert_eq!(queue.held(), 6);
        assert_eq!(&queue.take(3)[..], b"abcd");
        assert_eq!(&queue.take(3)[..], b"ef");
        assert!(queue.is_empty());
        assert_eq!(queue.held(), 0);
        assert!(queue.take(3).is_empty());
    }

    #[test]
    fn the_hard_limit_counts_what_the_connection_holds_too() {
        let limits = Limits {
            hard: 10,
            ..Limits::default()
        };
        let mut queue = OutQueue::default();
        queue.push(Bytes::from_static(b"12345"), &limits).unwrap();
        queue.set_conn_pending(5);
        assert_eq!(queue.push(Bytes::from_static(b"6"), &limits), Err(Over));
        assert_eq!(queue.held(), 5, "the queue is emptied once over");
    }

    #[test]
    fn the_soft_limit_needs_its_whole_period() {
        let limits = Limits {
            hard: 0,
            soft: 4,
            soft_s: 2,
        };
        let mut queue = OutQueue::default();
        queue.push(Bytes::from_static(b"12345"), &limits).unwrap();
        assert_eq!(queue.tick(1_000, &limits), Ok(()));
        assert_eq!(queue.tick(2_999, &limits), Ok(()));
        // Back under the limit: the period starts again.
        queue.take(100);
        assert_eq!(queue.tick(3_000, &limits), Ok(()));
        queue.push(Bytes::from_static(b"12345"), &limits).unwrap();
        assert_eq!(queue.tick(3_500, &limits), Ok(()));
        assert_eq!(queue.tick(5_499, &limits), Ok(()));
        assert_eq!(queue.tick(5_500, &limits), Err(Over));
    }
}
