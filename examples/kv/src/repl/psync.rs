//! What a `PSYNC replid offset` gets: `+CONTINUE` (the backlog has the rest of the
//! replica's history) or a full resynchronization, as Redis's
//! `masterTryPartialResynchronization` decides.

use std::ops::Range;

use super::{Backlog, Identity};

/// The master's answer to a PSYNC.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// `+CONTINUE <replid>`, then the backlog from byte `from` on.
    Continue { from: u64 },
    /// `+FULLRESYNC <replid> <offset>`, an RDB, then the stream.
    Full(FullReason),
}

/// Why a partial resynchronization was refused (the master's log line).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FullReason {
    /// `PSYNC ? -1`: the replica has no history.
    Requested,
    /// Another history, or the second id past the point it was shared.
    ReplidMismatch,
    /// No backlog yet, or the offset is outside it.
    OutOfBacklog,
    /// The offset falls where the stream a full sync sent differs from the backlog (see
    /// [`decide`]'s `unsafe_ranges`).
    InsideFullSyncTail,
}

/// Decides a `PSYNC replid offset`. `unsafe_ranges` are offsets a replica may report but
/// whose bytes it received in another order than the backlog holds them (the tail of a
/// sharded full sync): those resynchronize fully.
pub fn decide(
    identity: &Identity,
    backlog: Option<&Backlog>,
    replid: &[u8],
    offset: i64,
    unsafe_ranges: &[Range<u64>],
) -> Decision {
    if replid == b"?" {
        return Decision::Full(FullReason::Requested);
    }
    let same = replid.eq_ignore_ascii_case(identity.replid.as_bytes());
    let second = replid.eq_ignore_ascii_case(identity.replid2.as_bytes())
        && identity.second_repl_offset >= 0
        && offset <= identity.second_repl_offset;
    if !same && !second {
        return Decision::Full(FullReason::ReplidMismatch);
    }
    let Ok(offset) = u64::try_from(offset) else {
        return Decision::Full(FullReason::OutOfBacklog);
    };
    match backlog {
        Some(backlog) if backlog.covers(offset) => {
            if unsafe_ranges.iter().any(|r| r.contains(&offset)) {
                Decision::Full(FullReason::InsideFullSyncTail)
            } else {
                Decision::Continue { from: offset }
            }
        }
        _ => Decision::Full(FullReason::OutOfBacklog),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn master() -> (Identity, Backlog) {
        let mut id = Identity::new("a".repeat(40));
        let mut backlog = Backlog::new(10, 0);
        backlog.append(&[b'x'; 25]);
        id.master_repl_offset = 25;
        (id, backlog)
    }

    #[test]
    fn continues_inside_the_backlog_with_the_same_id() {
        let (id, backlog) = master();
        let a = "a".repeat(40);
        let decide = |offset| decide(&id, Some(&backlog), a.as_bytes(), offset, &[]);
        assert_eq!(decide(26), Decision::Continue { from: 26 });
        assert_eq!(decide(16), Decision::Continue { from: 16 });
        assert_eq!(decide(15), Decision::Full(FullReason::OutOfBacklog));
        assert_eq!(decide(27), Decision::Full(FullReason::OutOfBacklog));
        assert_eq!(decide(-1), Decision::Full(FullReason::OutOfBacklog));
        // The id compares case-insensitively, as Redis's strcasecmp.
        let upper = a.to_uppercase();
        assert_eq!(
            super::decide(&id, Some(&backlog), upper.as_bytes(), 20, &[]),
            Decision::Continue { from: 20 }
        );
    }

    #[test]
    fn refuses_other_histories_and_no_backlog() {
        let (id, backlog) = master();
        let b = "b".repeat(40);
        assert_eq!(
            decide(&id, Some(&backlog), b"?", -1, &[]),
            Decision::Full(FullReason::Requested)
        );
        assert_eq!(
            decide(&id, Some(&backlog), b.as_bytes(), 20, &[]),
            Decision::Full(FullReason::ReplidMismatch)
        );
        assert_eq!(
            decide(&id, None, id.replid.as_bytes(), 20, &[]),
            Decision::Full(FullReason::OutOfBacklog)
        );
    }

    #[test]
    fn the_second_id_counts_up_to_its_offset() {
        let (mut id, backlog) = master();
        id.shift("c".repeat(40));
        // Shared history: offsets up to 26 (the next byte after the shift point).
        let a = "a".repeat(40);
        assert_eq!(id.second_repl_offset, 26);
        assert_eq!(
            decide(&id, Some(&backlog), a.as_bytes(), 26, &[]),
            Decision::Continue { from: 26 }
        );
        assert_eq!(
            decide(&id, Some(&backlog), a.as_bytes(), 27, &[]),
            Decision::Full(FullReason::ReplidMismatch)
        );
    }

    #[test]
    fn a_full_syncs_reordered_tail_is_not_continued() {
        let (id, backlog) = master();
        let a = id.replid.clone();
        let tail = [18..22, 40..41];
        assert_eq!(
            decide(&id, Some(&backlog), a.as_bytes(), 20, &tail),
            Decision::Full(FullReason::InsideFullSyncTail)
        );
        assert_eq!(
            decide(&id, Some(&backlog), a.as_bytes(), 22, &tail),
            Decision::Continue { from: 22 }
        );
    }
}
