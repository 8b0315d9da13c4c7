//! A sharded full sync's cut. Each shard begins its snapshot at its own moment and records
//! how many bytes of its write stream it had produced then (its cut): its writes before
//! the cut are in the RDB, the ones after must reach the replica after it. The hub sees
//! the shards' streams interleaved, so for one replica it keeps only what comes after each
//! shard's cut (the hub's own records, PING and the like, always), and the replica's
//! stream starts once every shard's stream has reached its cut: at the master's offset
//! less the bytes already kept for it. From there on the replica's offset counts the same
//! bytes as the master's.
//!
//! Until the cuts are known (the snapshots are still beginning) everything is held with
//! its numbers and filtered when they arrive.
//!
//! A transaction that ran on several shards reaches the hub as one part per shard and
//! goes out as one MULTI/EXEC of the parts ([`transaction`]); a shard's part before its
//! cut is in the snapshot, so a replica whose sync straddles the transaction gets only
//! the other parts ([`SyncCut::offer_group`]).

use std::ops::Range;

use bytes::Bytes;

/// One shard's part of a transaction over several shards: the shard, where the part
/// starts in its stream, and its commands (without MULTI/EXEC; empty when it wrote
/// nothing).
pub type GroupPart = (usize, u64, Bytes);

const MULTI: &[u8] = b"*1\r\n$5\r\nMULTI\r\n";
const EXEC: &[u8] = b"*1\r\n$4\r\nEXEC\r\n";

/// The parts' commands as one MULTI/EXEC, in the parts' order; `None` when none wrote.
pub fn transaction<'a>(bodies: impl IntoIterator<Item = &'a Bytes>) -> Option<Bytes> {
    let mut out = bytes::BytesMut::new();
    for body in bodies.into_iter().filter(|b| !b.is_empty()) {
        if out.is_empty() {
            out.extend_from_slice(MULTI);
        }
        out.extend_from_slice(body);
    }
    if out.is_empty() {
        return None;
    }
    out.extend_from_slice(EXEC);
    Some(out.freeze())
}

/// A piece of the stream held while the cuts are unknown.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Held {
    /// From `shard` (`None`: the hub's own records), numbered from `start` there.
    One(Option<usize>, u64, Bytes),
    /// A transaction's parts.
    Group(Vec<GroupPart>),
}

/// One replica's cut while its full sync begins.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SyncCut {
    /// The snapshots are beginning: stream pieces are held with their numbers.
    Unknown(Vec<Held>),
    /// Each shard's cut, in its own numbering.
    Known(Vec<u64>),
}

impl Default for SyncCut {
    fn default() -> Self {
        SyncCut::Unknown(Vec::new())
    }
}

impl SyncCut {
    /// A piece of the stream from `shard` (numbered from `start` in that shard's stream):
    /// what goes to the replica now, if anything.
    pub fn offer(&mut self, shard: Option<usize>, start: u64, bytes: &Bytes) -> Option<Bytes> {
        match self {
            SyncCut::Unknown(held) => {
                held.push(Held::One(shard, start, bytes.clone()));
                None
            }
            // Before its shard's cut: the RDB has it.
            SyncCut::Known(cuts) if shard.is_some_and(|s| start < cuts[s]) => None,
            SyncCut::Known(_) => Some(bytes.clone()),
        }
    }

    /// A transaction's parts: what goes to the replica now, if anything (the parts after
    /// their shards' cuts, as one MULTI/EXEC).
    pub fn offer_group(&mut self, parts: &[GroupPart]) -> Option<Bytes> {
        match self {
            SyncCut::Unknown(held) => {
                held.push(Held::Group(parts.to_vec()));
                None
            }
            SyncCut::Known(cuts) => kept_group(parts, cuts),
        }
    }

    /// The cuts are known: the held pieces that go to the replica, in order.
    pub fn set_cuts(&mut self, cuts: Vec<u64>) -> Vec<Bytes> {
        let held = match std::mem::replace(self, SyncCut::Known(Vec::new())) {
            SyncCut::Unknown(held) => held,
            SyncCut::Known(_) => Vec::new(),
        };
        let kept = (held.into_iter())
            .filter_map(|piece| match piece {
                Held::One(shard, start, bytes) => {
                    shard.is_none_or(|s| start >= cuts[s]).then_some(bytes)
                }
                Held::Group(parts) => kept_group(&parts, &cuts),
            })
            .collect();
        *self = SyncCut::Known(cuts);
        kept
    }

    /// Whether every shard's stream reached the hub up to its cut (`received[s]`: bytes
    /// of shard `s`'s stream the hub has).
    pub fn reached(&self, received: &[u64]) -> bool {
        match self {
            SyncCut::Unknown(_) => false,
            SyncCut::Known(cuts) => cuts.iter().zip(received).all(|(cut, got)| got >= cut),
        }
    }
}

fn kept_group(parts: &[GroupPart], cuts: &[u64]) -> Option<Bytes> {
    transaction(
        (parts.iter())
            .filter(|(shard, start, _)| *start >= cuts[*shard])
            .map(|(_, _, body)| body),
    )
}

/// Where a replica's stream starts (the `+FULLRESYNC` offset) given the master's offset
/// once the cuts are reached and the bytes already kept for it; and the PSYNC offsets a
/// replica that processed only part of those bytes would ask for (they differ from the
/// backlog's bytes there, so they must not be continued).
pub fn stream_start(master_offset: u64, kept: u64) -> (u64, Option<Range<u64>>) {
    let start = master_offset - kept;
    let unsafe_range = (kept > 0).then(|| start + 1..master_offset + 1);
    (start, unsafe_range)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b(s: &str) -> Bytes {
        Bytes::from(s.to_owned())
    }

    #[test]
    fn keeps_what_each_shard_streamed_after_its_cut() {
        let mut cut = SyncCut::default();
        // Arrives while the snapshots begin: shard 0 before its cut (at 10), shard 1 after
        // its cut (at 4), the hub's PING.
        assert_eq!(cut.offer(Some(0), 5, &b("s0-old")), None);
        assert_eq!(cut.offer(Some(1), 4, &b("s1-new")), None);
        assert_eq!(cut.offer(None, 0, &b("ping")), None);
        assert!(!cut.reached(&[20, 20]));
        assert_eq!(cut.set_cuts(vec![10, 4]), vec![b("s1-new"), b("ping")]);
        assert!(!cut.reached(&[9, 10]));
        // Shard 0's last bytes before its cut, then its first after it.
        assert_eq!(cut.offer(Some(0), 6, &b("s0-mid")), None);
        assert!(cut.reached(&[10, 10]));
        assert_eq!(cut.offer(Some(0), 10, &b("s0-new")), Some(b("s0-new")));
    }

    #[test]
    fn a_transactions_parts_go_out_as_one_multi_exec_after_their_cuts() {
        let multi = |body: &str| b(&format!("*1\r\n$5\r\nMULTI\r\n{body}*1\r\n$4\r\nEXEC\r\n"));
        assert_eq!(transaction(&[b(""), b("")]), None);
        assert_eq!(transaction(&[b("a;"), b(""), b("c;")]), Some(multi("a;c;")));
        let parts = vec![(0, 8, b("zero;")), (1, 2, b("one;")), (2, 0, b(""))];
        let mut cut = SyncCut::default();
        assert_eq!(cut.offer_group(&parts), None);
        assert_eq!(cut.offer(Some(1), 7, &b("s1-new")), None);
        // Shard 0's part is in the snapshot (its cut is at 9); shard 1's is not.
        assert_eq!(
            cut.set_cuts(vec![9, 2, 0]),
            vec![multi("one;"), b("s1-new")]
        );
        assert_eq!(cut.offer_group(&parts), Some(multi("one;")));
        let mut known = SyncCut::Known(vec![100, 100, 100]);
        assert_eq!(known.offer_group(&parts), None);
        let mut known = SyncCut::Known(vec![0, 0, 0]);
        assert_eq!(known.offer_group(&parts), Some(multi("zero;one;")));
    }

    #[test]
    fn the_stream_starts_before_what_was_kept() {
        assert_eq!(stream_start(100, 0), (100, None));
        // 12 bytes kept: the replica's offset starts at 88 and reaches 100 with them; a
        // PSYNC for bytes 89..=100 would get other bytes from the backlog.
        assert_eq!(stream_start(100, 12), (88, Some(89..101)));
    }
}
