//! Per-shard replication streams between corewire nodes, the sans-I/O part: what a
//! replica and its master negotiate, the node-level view of per-shard offsets (INFO's
//! `master_repl_offset`, WAIT, min-replicas-to-write), and the barriers that keep a
//! transaction spanning shards atomic on the replica.
//!
//! # What is negotiated, and why
//! A replica with more than one shard adds `REPLCONF shard-streams <N> key-map <MAP>` to
//! its handshake (after `capa`, before PSYNC). One stream per shard is only correct when
//! a key lands on the same shard number on both nodes: master shard `i`'s writes are
//! applied by replica shard `i` to its own store, with no hop through another shard. So
//! the master accepts only when its shard count equals `N` and its key→shard map is
//! `MAP` ([`KEY_MAP`]: Redis Cluster's CRC16 hash slot, then `slot % N`), answering
//! `+SHARD-STREAMS <N>`. Everything else means one stream, exactly as with redis-server:
//!
//! - redis-server (or an older corewire-kv) answers `-ERR Unrecognized REPLCONF option`;
//! - a master that declines answers `+SINGLE-STREAM <why>` (a status line, not an
//!   error, so the decline does not count in its error statistics);
//! - the replica takes per-shard streams only on the exact `+SHARD-STREAMS <N>` it
//!   asked for ([`on_reply`]): a plain `+OK` from a master that accepts any REPLCONF
//!   option is not taken for consent.
//!
//! A master declines ([`Decline`]) with one shard (nothing to gain), a different shard
//! count or key map, while it follows a master itself (its stream is its master's
//! single stream, passed on byte for byte), and while it cannot serve per-shard streams
//! ([`Local::serves`]): a node only accepts what it can do in full.
//!
//! # Offsets
//! With per-shard links each master shard numbers its own stream from its own cut. The
//! node-level `master_repl_offset` is the sum of the shards' offsets ([`ShardOffsets`]):
//! it grows with every byte any shard streams, as a single stream's does, though it is
//! not a position in any one stream. WAIT and min-replicas-to-write count a replica only
//! when every one of its shard links acknowledged the offset its shard had when the WAIT
//! arrived ([`covers`], [`replicas_covering`], [`replica_ack_ms`]).
//!
//! # Transactions spanning shards
//! The master runs a MULTI/EXEC over several shards with two-phase locking (`server/txn`):
//! strict, so on every shard two transactions that share it run in the same order. Each
//! involved shard's part names the transaction ([`BarrierId`]) and its shards, and is held
//! where it arrives until every involved shard's part did ([`Barriers`]); then the parts
//! apply together. Because shared transactions are in the same order on every shard, a
//! shard waits only for parts the others will reach: no deadlock, and each shard holds at
//! most one barrier at a time (its stream stops there), so the bookkeeping is bounded by
//! the shard count.
//!
//! The single stream joins the parts on the hub into one MULTI/EXEC
//! (`server/repl_master/group.rs`), so redis-server and corewire replicas apply it whole;
//! a program that holds several shards (a script, a multi-key command such as LMOVE over
//! shards) is joined the same way, its steps' writes closed into parts when it lets the
//! shards go. (A fanned-out MSET or DEL is atomic per shard on the master too, and stays
//! one block per shard.) On shard links each involved shard's stream carries a barrier
//! record before its part ([`super::barrier`]), and the replica holds each shard's
//! stream there until every part arrived, then runs them as one transaction. That needs
//! every link of a replica to start from one cut of the whole master (see
//! [`super::shard_link`]'s rounds): otherwise a transaction could be in one shard's
//! snapshot and in another's stream, and that shard would wait for a part that never
//! comes.

use std::collections::HashMap;

use bytes::Bytes;

use super::handshake::request;

/// Whether this build serves and applies per-shard streams: both sides of shard links
/// (the master's, `server/repl_master/shard_link.rs`: one cut for all of a replica's links,
/// each shard's part of the snapshot, stream, backlog, partial resync, output limit, WAIT;
/// the replica's, `server/replica/shard_links.rs`: a link per shard, its part loaded into
/// its shard, its stream applied there, barriers, the sub-replica and promotion rules).
/// A master of a build without them declines every offer with `not-served`.
pub const SERVED: bool = true;

/// The key→shard map this build uses (`routing::slot`): CRC16 hash slot of the key (or
/// of its `{hash tag}`), then `slot % shards`.
pub const KEY_MAP: &str = "crc16-slot-mod";

/// The replica's offer, or `None` with one shard (one shard has one stream anyway).
pub fn offer(shards: usize) -> Option<Bytes> {
    (shards > 1).then(|| {
        let n = shards.to_string();
        request(&[
            b"REPLCONF",
            b"shard-streams",
            n.as_bytes(),
            b"key-map",
            KEY_MAP.as_bytes(),
        ])
    })
}

/// What the master knows of itself when a replica offers per-shard streams.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Local {
    pub shards: usize,
    /// It can serve per-shard streams (full sync, stream, partial resync, WAIT).
    pub serves: bool,
    /// It replicates a master itself (its stream is that master's, passed on).
    pub follows_master: bool,
}

/// Why a master serves one stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decline {
    OneShard,
    ShardCount { ours: usize, theirs: u64 },
    KeyMap,
    FollowsMaster,
    NotServed,
}

/// The master's answer to an offer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    PerShard(usize),
    Single(Decline),
}

/// The master's decision on `REPLCONF shard-streams <shards> key-map <key_map>` (either
/// part may be missing: a malformed offer gets one stream).
pub fn decide(shards: Option<u64>, key_map: Option<&[u8]>, local: &Local) -> Answer {
    let decline = if local.shards <= 1 {
        Some(Decline::OneShard)
    } else if shards != Some(local.shards as u64) {
        Some(Decline::ShardCount {
            ours: local.shards,
            theirs: shards.unwrap_or(0),
        })
    } else if key_map != Some(KEY_MAP.as_bytes()) {
        Some(Decline::KeyMap)
    } else if local.follows_master {
        Some(Decline::FollowsMaster)
    } else if !local.serves {
        Some(Decline::NotServed)
    } else {
        None
    };
    match decline {
        Some(why) => Answer::Single(why),
        None => Answer::PerShard(local.shards),
    }
}

impl Answer {
    /// The status line (without CRLF) the master answers.
    pub fn line(&self) -> String {
        match self {
            Answer::PerShard(n) => format!("+SHARD-STREAMS {n}"),
            Answer::Single(why) => format!(
                "+SINGLE-STREAM {}",
                match why {
                    Decline::OneShard => "one-shard".to_owned(),
                    Decline::ShardCount { ours, theirs } => {
                        format!("shard-count {ours} (offered {theirs})")
                    }
                    Decline::KeyMap => "key-map".to_owned(),
                    Decline::FollowsMaster => "follows-a-master".to_owned(),
                    Decline::NotServed => "not-served".to_owned(),
                }
            ),
        }
    }
}

/// How the link to the master streams.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum StreamMode {
    #[default]
    Single,
    PerShard(usize),
}

impl StreamMode {
    /// Stream links: 1, or one per shard.
    pub fn links(self) -> usize {
        match self {
            StreamMode::Single => 1,
            StreamMode::PerShard(n) => n,
        }
    }
}

/// The replica's reading of the master's reply `line` to its offer for `shards`.
pub fn on_reply(line: &[u8], shards: usize) -> StreamMode {
    let agreed = line
        .strip_prefix(b"+SHARD-STREAMS ")
        .and_then(|n| std::str::from_utf8(n).ok())
        .and_then(|n| n.trim().parse::<usize>().ok());
    match agreed {
        Some(n) if n == shards && n > 1 => StreamMode::PerShard(n),
        _ => StreamMode::Single,
    }
}

/// Per-shard stream offsets, and the node-level one (their sum).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ShardOffsets(pub Vec<u64>);

impl ShardOffsets {
    pub fn new(shards: usize) -> ShardOffsets {
        ShardOffsets(vec![0; shards])
    }

    /// INFO's `master_repl_offset`: every byte any shard streamed.
    pub fn total(&self) -> u64 {
        self.0.iter().sum()
    }

    /// INFO's per-shard detail (`0,120,33,7`).
    pub fn detail(&self) -> String {
        let parts: Vec<String> = self.0.iter().map(u64::to_string).collect();
        parts.join(",")
    }
}

/// Whether a replica whose shard links acknowledged `acks` has every shard's `target`
/// (a replica with a link missing does not).
pub fn covers(acks: &[u64], target: &[u64]) -> bool {
    acks.len() == target.len() && acks.iter().zip(target).all(|(ack, want)| ack >= want)
}

/// WAIT's count: the replicas that acknowledged `target` on every shard link.
pub fn replicas_covering<'a>(
    replicas: impl IntoIterator<Item = &'a [u64]>,
    target: &[u64],
) -> usize {
    (replicas.into_iter())
        .filter(|acks| covers(acks, target))
        .count()
}

/// When a replica last acknowledged, for min-replicas-max-lag: its stalest link's last
/// ACK (a replica with one link stuck is as lagging as that link). `None` without links.
pub fn replica_ack_ms(links_ack_ms: &[u64]) -> Option<u64> {
    links_ack_ms.iter().copied().min()
}

/// INFO's `slaveN:` line of a replica on shard links (one line per replica node): online
/// while every link is there, its offset the sum of what its links acknowledged (as the
/// node-level offsets are sums), its last ACK its stalest link's.
pub fn linked_replica(ip: &str, port: u16, links: &[Option<(u64, u64)>]) -> super::ReplicaInfo {
    let whole = links.iter().all(Option::is_some);
    let acks = links.iter().flatten();
    super::ReplicaInfo {
        ip: ip.to_owned(),
        port,
        state: if whole {
            super::LinkState::Online
        } else {
            super::LinkState::WaitBgsave
        },
        ack_offset: acks.clone().map(|(ack, _)| ack).sum(),
        ack_ms: acks.map(|(_, ms)| *ms).min().unwrap_or(0),
    }
}

/// A transaction spanning shards: the shard whose connection ran it, and its number there.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct BarrierId {
    pub origin: u16,
    pub seq: u64,
}

/// What a barrier decided for the shard that reached it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reached {
    /// Other involved shards have not reached it: this shard's stream holds here.
    Hold,
    /// Every involved shard reached it: these shards' parts apply now (ascending), and
    /// their streams go on after.
    Apply(Vec<usize>),
}

/// Why a barrier record is refused (the link is broken: the stream is not what the
/// master writes).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BarrierError {
    /// The shard is not among the transaction's shards, or the record names one shard.
    NotInvolved,
    /// The shard reached another barrier while held at one.
    AlreadyHeld,
    /// The same transaction's parts disagree on its shards.
    Mismatch,
}

/// A replica's barriers in flight: per transaction, its shards and those held at it.
#[derive(Debug, Default)]
pub struct Barriers {
    pending: HashMap<BarrierId, (u64, u64)>,
    /// The barrier each shard is held at (a bit per shard).
    held: u64,
}

impl Barriers {
    /// Shard `shard` reached barrier `id` of a transaction over `involved` (a bit per
    /// shard; shard numbers below 64).
    pub fn arrive(
        &mut self,
        shard: usize,
        id: BarrierId,
        involved: u64,
    ) -> Result<Reached, BarrierError> {
        let bit = 1u64.checked_shl(shard as u32).unwrap_or(0);
        if bit == 0 || involved & bit == 0 || involved.count_ones() < 2 {
            return Err(BarrierError::NotInvolved);
        }
        if self.held & bit != 0 {
            return Err(BarrierError::AlreadyHeld);
        }
        let entry = self.pending.entry(id).or_insert((involved, 0));
        if entry.0 != involved {
            return Err(BarrierError::Mismatch);
        }
        entry.1 |= bit;
        if entry.1 != involved {
            self.held |= bit;
            return Ok(Reached::Hold);
        }
        self.pending.remove(&id);
        self.held &= !involved;
        Ok(Reached::Apply(
            (0..64).filter(|s| involved & (1 << s) != 0).collect(),
        ))
    }

    /// Whether `shard`'s stream is held at a barrier.
    pub fn is_held(&self, shard: usize) -> bool {
        shard < 64 && self.held & (1 << shard) != 0
    }

    /// A link broke: its partial barriers are forgotten (the stream resumes before them).
    pub fn clear(&mut self) {
        self.pending.clear();
        self.held = 0;
    }

    pub fn len(&self) -> usize {
        self.pending.len()
    }

    pub fn is_empty(&self) -> bool {
        self.pending.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LOCAL: Local = Local {
        shards: 4,
        serves: true,
        follows_master: false,
    };

    #[test]
    fn the_offer_is_pairs_of_replconf_options() {
        assert_eq!(offer(1), None);
        assert_eq!(
            &offer(4).unwrap()[..],
            &b"*5\r\n$8\r\nREPLCONF\r\n$13\r\nshard-streams\r\n$1\r\n4\r\n$7\r\nkey-map\r\n\
               $14\r\ncrc16-slot-mod\r\n"[..]
        );
    }

    #[test]
    fn a_master_accepts_only_the_same_shards_and_map() {
        let map = Some(KEY_MAP.as_bytes());
        assert_eq!(decide(Some(4), map, &LOCAL), Answer::PerShard(4));
        assert_eq!(decide(Some(4), map, &LOCAL).line(), "+SHARD-STREAMS 4");
        let declined = [
            (decide(Some(2), map, &LOCAL), "shard-count 4 (offered 2)"),
            (decide(None, map, &LOCAL), "shard-count 4 (offered 0)"),
            (decide(Some(4), Some(b"jump"), &LOCAL), "key-map"),
            (decide(Some(4), None, &LOCAL), "key-map"),
            (
                decide(Some(1), map, &Local { shards: 1, ..LOCAL }),
                "one-shard",
            ),
            (
                decide(
                    Some(4),
                    map,
                    &Local {
                        follows_master: true,
                        ..LOCAL
                    },
                ),
                "follows-a-master",
            ),
            (
                decide(
                    Some(4),
                    map,
                    &Local {
                        serves: false,
                        ..LOCAL
                    },
                ),
                "not-served",
            ),
        ];
        for (answer, why) in declined {
            assert!(matches!(answer, Answer::Single(_)), "{answer:?}");
            assert_eq!(answer.line(), format!("+SINGLE-STREAM {why}"));
        }
    }

    #[test]
    fn a_replica_takes_per_shard_streams_only_on_the_exact_answer() {
        assert_eq!(on_reply(b"+SHARD-STREAMS 4", 4), StreamMode::PerShard(4));
        assert_eq!(on_reply(b"+SHARD-STREAMS 4", 4).links(), 4);
        for line in [
            &b"+OK"[..],
            b"-ERR Unrecognized REPLCONF option: shard-streams",
            b"+SINGLE-STREAM not-served",
            b"+SHARD-STREAMS 2",
            b"+SHARD-STREAMS x",
            b"+SHARD-STREAMS 1",
        ] {
            assert_eq!(on_reply(line, 4), StreamMode::Single, "{line:?}");
        }
        assert_eq!(StreamMode::default().links(), 1);
    }

    #[test]
    fn the_node_offset_is_the_sum_of_the_shards() {
        let mut offsets = ShardOffsets::new(3);
        assert_eq!((offsets.total(), offsets.detail().as_str()), (0, "0,0,0"));
        offsets.0[0] += 120;
        offsets.0[2] += 7;
        assert_eq!(
            (offsets.total(), offsets.detail().as_str()),
            (127, "120,0,7")
        );
    }

    #[test]
    fn wait_counts_a_replica_only_when_every_link_acknowledged() {
        let target = [100, 0, 50, 7];
        let whole = [100, 3, 60, 7];
        let one_short = [100, 3, 49, 7];
        let link_missing = [100, 3, 60];
        assert!(covers(&whole, &target));
        assert!(!covers(&one_short, &target));
        assert!(!covers(&link_missing, &target));
        let replicas: [&[u64]; 3] = [&whole, &one_short, &link_missing];
        assert_eq!(replicas_covering(replicas, &target), 1);
        // A shard with no writes since the WAIT's offsets asks nothing of its link.
        assert_eq!(replicas_covering([&[0u64, 0][..]], &[0, 0]), 1);
        assert_eq!(replica_ack_ms(&[900, 400, 1000]), Some(400));
        assert_eq!(replica_ack_ms(&[]), None);
    }

    #[test]
    fn a_replica_on_shard_links_is_one_info_line() {
        let line = linked_replica("10.0.0.2", 7000, &[Some((100, 900)), Some((20, 400))]);
        assert_eq!((line.ack_offset, line.ack_ms), (120, 400));
        assert_eq!(line.state, crate::repl::LinkState::Online);
        let missing = linked_replica("10.0.0.2", 7000, &[Some((100, 900)), None]);
        assert_eq!(missing.state, crate::repl::LinkState::WaitBgsave);
        assert_eq!(missing.ack_offset, 100);
    }

    #[test]
    fn a_barrier_holds_each_shard_until_every_part_arrived() {
        let mut barriers = Barriers::default();
        let x = BarrierId { origin: 1, seq: 9 };
        let involved = 0b1011; // shards 0, 1, 3
        assert_eq!(barriers.arrive(3, x, involved), Ok(Reached::Hold));
        assert!(barriers.is_held(3) && !barriers.is_held(0));
        assert_eq!(barriers.arrive(0, x, involved), Ok(Reached::Hold));
        // A held shard cannot reach another barrier: its stream stopped at this one.
        let y = BarrierId { origin: 0, seq: 1 };
        assert_eq!(barriers.arrive(0, y, 0b11), Err(BarrierError::AlreadyHeld));
        assert_eq!(barriers.arrive(1, x, 0b0011), Err(BarrierError::Mismatch));
        assert_eq!(
            barriers.arrive(1, x, involved),
            Ok(Reached::Apply(vec![0, 1, 3]))
        );
        assert!(barriers.is_empty());
        assert!(!(0..4).any(|s| barriers.is_held(s)));
        // Shard 2 was never part of it; a one-shard barrier is no barrier.
        assert_eq!(
            barriers.arrive(2, x, involved),
            Err(BarrierError::NotInvolved)
        );
        assert_eq!(barriers.arrive(1, y, 0b10), Err(BarrierError::NotInvolved));
        assert_eq!(
            barriers.arrive(64, y, u64::MAX),
            Err(BarrierError::NotInvolved)
        );
    }

    #[test]
    fn transactions_in_the_same_order_on_every_shard_never_deadlock() {
        // Two transactions over shards {0,1} and {1,2}, in the order the master's
        // two-phase locking ran them (x then y on shard 1); shards reach them in any
        // interleaving.
        let x = BarrierId { origin: 0, seq: 1 };
        let y = BarrierId { origin: 2, seq: 1 };
        let mut barriers = Barriers::default();
        assert_eq!(barriers.arrive(2, y, 0b110), Ok(Reached::Hold));
        assert_eq!(barriers.arrive(1, x, 0b011), Ok(Reached::Hold));
        assert_eq!(barriers.arrive(0, x, 0b011), Ok(Reached::Apply(vec![0, 1])));
        // Shard 1 goes on past x and reaches y.
        assert_eq!(barriers.arrive(1, y, 0b110), Ok(Reached::Apply(vec![1, 2])));
        assert!(barriers.is_empty());
        barriers.arrive(0, x, 0b011).unwrap();
        barriers.clear();
        assert!(!barriers.is_held(0) && barriers.is_empty());
    }
}
