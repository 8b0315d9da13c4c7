//! Barriers on shard links, the sans-I/O part: the record that marks a transaction's part
//! in an involved shard's stream, and the replica's book of the parts that arrived.
//!
//! # The record
//! On a shard link (never on the single stream, which joins the parts into one MULTI/EXEC
//! on the hub: `server/repl_master/group.rs`), master shard `i`'s part of a transaction,
//! script or multi-key command that ran over several shards is
//!
//! ```text
//! REPLCONF BARRIER <origin> <seq> <involved>
//! MULTI
//! <shard i's commands of it, possibly none>
//! EXEC
//! ```
//!
//! ([`record`]): `<origin>` and `<seq>` name the transaction ([`BarrierId`]: the shard
//! whose connection ran it, and its number there), `<involved>` its shards (a bit per
//! shard, decimal). Every involved shard writes the record, with an empty block when it
//! wrote nothing there, so each replica shard knows which parts to wait for. A replica
//! that knows no barriers skips the REPLCONF and applies the block alone (what a shard
//! link applied before barriers existed).
//!
//! # The replica's book
//! Replica shard `i` that reads a record and its block stops its stream there and puts
//! the block in the node's [`Book`]. The shard that brings the last part gets every part
//! ([`Arrival::Apply`]) and runs them as one transaction over the involved shards (the
//! replica's own two-phase locking: a reader's MULTI/EXEC sees all of it or none); the
//! others wait ([`Book::released`]) until it ran ([`Book::finish`]). Shared transactions
//! are in the same order on every master shard (strict 2PL), so a held shard waits only
//! for parts the others will reach, and each shard holds at most one barrier.
//!
//! A link that breaks while held takes its part back ([`Book::retract`]): its stream
//! resumes before the record and brings the part again. Once the parts were taken for
//! applying, it cannot: the link waits until they ran, then resumes after the block.
//! Every link's stream starts from the same cut of the master (see
//! `server/repl_master/cut.rs`), so no part is missing because one shard's snapshot
//! already holds the transaction.

use std::collections::HashMap;

use bytes::{Bytes, BytesMut};

use super::handshake::request;
pub use super::shards::BarrierId;

const MULTI: &[u8] = b"*1\r\n$5\r\nMULTI\r\n";
const EXEC: &[u8] = b"*1\r\n$4\r\nEXEC\r\n";

/// A part on a shard link: the barrier record, then `body` (commands) as one MULTI/EXEC.
pub fn record(id: BarrierId, involved: u64, body: &[u8]) -> Bytes {
    let (origin, seq, mask) = (
        id.origin.to_string(),
        id.seq.to_string(),
        involved.to_string(),
    );
    let head = request(&[
        b"REPLCONF",
        b"BARRIER",
        origin.as_bytes(),
        seq.as_bytes(),
        mask.as_bytes(),
    ]);
    let mut out = BytesMut::with_capacity(head.len() + MULTI.len() + body.len() + EXEC.len());
    out.extend_from_slice(&head);
    out.extend_from_slice(MULTI);
    out.extend_from_slice(body);
    out.extend_from_slice(EXEC);
    out.freeze()
}

/// `body` as one MULTI/EXEC of its own (nothing when empty): a part of one shard.
pub fn block(body: &[u8]) -> Bytes {
    if body.is_empty() {
        return Bytes::new();
    }
    let mut out = BytesMut::with_capacity(MULTI.len() + body.len() + EXEC.len());
    out.extend_from_slice(MULTI);
    out.extend_from_slice(body);
    out.extend_from_slice(EXEC);
    out.freeze()
}

/// A barrier record's arguments after `REPLCONF BARRIER`; `None` when malformed.
pub fn parse(args: &[Bytes]) -> Option<(BarrierId, u64)> {
    let number = |arg: &Bytes| std::str::from_utf8(arg).ok()?.parse::<u64>().ok();
    match args {
        [origin, seq, involved] => Some((
            BarrierId {
                origin: u16::try_from(number(origin)?).ok()?,
                seq: number(seq)?,
            },
            number(involved)?,
        )),
        _ => None,
    }
}

/// What a shard's arrival at a barrier decided.
#[derive(Debug, PartialEq, Eq)]
pub enum Arrival<P> {
    /// Parts are missing: this shard's stream holds until [`Book::released`].
    Hold,
    /// This part was the last: every part (by shard, ascending), for this shard to apply;
    /// then [`Book::finish`].
    Apply(Vec<(usize, P)>),
}

/// Why an arrival is refused (the stream is not what the master writes: the link drops).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BookError {
    /// The shard is not among the involved ones, or fewer than two are.
    NotInvolved,
    /// The shard is already at a barrier.
    AlreadyHeld,
    /// The same transaction's parts disagree on its shards.
    Mismatch,
}

/// What a breaking link's shard had at a barrier.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Retract {
    /// Nothing: the stream resumes where it stands.
    Nothing,
    /// Its part was taken back: the stream resumes before the record.
    Retracted,
    /// The parts are being applied: wait for [`Book::released`], then resume after it.
    InFlight,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Slot {
    Free,
    Held(BarrierId),
    Applying(BarrierId),
    Applied,
}

struct Pending<P> {
    involved: u64,
    parts: Vec<(usize, P)>,
}

/// The replica's barriers: per transaction the parts arrived, per shard where it stands.
pub struct Book<P> {
    pending: HashMap<BarrierId, Pending<P>>,
    slots: Vec<Slot>,
}

impl<P> Book<P> {
    pub fn new(shards: usize) -> Book<P> {
        Book {
            pending: HashMap::new(),
            slots: vec![Slot::Free; shards.min(64)],
        }
    }

    /// Shard `shard` reached barrier `id` over `involved`, with its `part`.
    pub fn arrive(
        &mut self,
        shard: usize,
        id: BarrierId,
        involved: u64,
        part: P,
    ) -> Result<Arrival<P>, BookError> {
        let bit = 1u64.checked_shl(shard as u32).unwrap_or(0);
        let fits = involved < 1u64.checked_shl(self.slots.len() as u32).unwrap_or(0);
        if bit == 0 || involved & bit == 0 || involved.count_ones() < 2 || !fits {
            return Err(BookError::NotInvolved);
        }
        if self.slots[shard] != Slot::Free {
            return Err(BookError::AlreadyHeld);
        }
        let pending = self.pending.entry(id).or_insert(Pending {
            involved,
            parts: Vec::new(),
        });
        if pending.involved != involved || pending.parts.iter().any(|(s, _)| *s == shard) {
            if pending.parts.is_empty() {
                self.pending.remove(&id);
            }
            return Err(BookError::Mismatch);
        }
        pending.parts.push((shard, part));
        if pending.parts.len() < involved.count_ones() as usize {
            self.slots[shard] = Slot::Held(id);
            return Ok(Arrival::Hold);
        }
        let mut parts = self
            .pending
            .remove(&id)
            .map(|p| p.parts)
            .unwrap_or_default();
        parts.sort_by_key(|(s, _)| *s);
        for (s, _) in &parts {
            self.slots[*s] = Slot::Applying(id);
        }
        Ok(Arrival::Apply(parts))
    }

    /// The applying shard ran barrier `id`'s parts: every involved shard goes on.
    pub fn finish(&mut self, id: BarrierId) {
        for slot in &mut self.slots {
            if *slot == Slot::Applying(id) {
                *slot = Slot::Applied;
            }
        }
    }

    /// Whether `shard`'s barrier was applied (once: its stream goes on after it).
    pub fn released(&mut self, shard: usize) -> bool {
        match self.slots.get_mut(shard) {
            Some(slot @ Slot::Applied) => {
                *slot = Slot::Free;
                true
            }
            _ => false,
        }
    }

    /// Whether `shard` is held at a barrier (waiting for parts, or for them to run).
    pub fn is_held(&self, shard: usize) -> bool {
        self.slots.get(shard).is_some_and(|s| *s != Slot::Free)
    }

    /// `shard`'s link broke: its part is taken back if it still can be.
    pub fn retract(&mut self, shard: usize) -> Retract {
        let Some(slot) = self.slots.get(shard).copied() else {
            return Retract::Nothing;
        };
        match slot {
            Slot::Free => Retract::Nothing,
            Slot::Applying(_) | Slot::Applied => Retract::InFlight,
            Slot::Held(id) => {
                if let Some(pending) = self.pending.get_mut(&id) {
                    pending.parts.retain(|(s, _)| *s != shard);
                    if pending.parts.is_empty() {
                        self.pending.remove(&id);
                    }
                }
                self.slots[shard] = Slot::Free;
                Retract::Retracted
            }
        }
    }

    /// Transactions with parts waiting.
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
    use crate::repl::stream::{Item, StreamReader};
    use crate::resp::ParserLimits;

    const X: BarrierId = BarrierId { origin: 1, seq: 9 };
    const Y: BarrierId = BarrierId { origin: 2, seq: 1 };

    #[test]
    fn a_record_is_a_replconf_then_its_block() {
        let body = b"*2\r\n$4\r\nINCR\r\n$1\r\na\r\n";
        let bytes = record(X, 0b101, body);
        let head = b"*5\r\n$8\r\nREPLCONF\r\n$7\r\nBARRIER\r\n$1\r\n1\r\n$1\r\n9\r\n$1\r\n5\r\n";
        assert!(bytes.starts_with(head));
        assert!(bytes.ends_with(b"*1\r\n$4\r\nEXEC\r\n"));
        let mut input = BytesMut::from(&bytes[..]);
        let mut reader = StreamReader::new(0, ParserLimits::default());
        let first = reader.next(&mut input).unwrap().unwrap();
        assert_eq!(
            first.item,
            Item::Barrier {
                id: X,
                involved: 0b101
            }
        );
        assert_eq!(first.end, head.len() as u64);
        let second = reader.next(&mut input).unwrap().unwrap();
        assert!(
            matches!(second.item, Item::Apply(crate::command::Command::Transaction(t)) if t.items.len() == 1)
        );
        assert_eq!(second.end, bytes.len() as u64);
        // An empty part is an empty block all the same.
        let mut input = BytesMut::from(&record(Y, 0b11, b"")[..]);
        reader.next(&mut input).unwrap().unwrap();
        assert!(matches!(
            reader.next(&mut input).unwrap().unwrap().item,
            Item::Apply(crate::command::Command::Transaction(t)) if t.items.is_empty()
        ));
        assert_eq!(block(b""), Bytes::new());
        assert_eq!(&block(body)[..MULTI.len()], MULTI);
    }

    #[test]
    fn a_malformed_record_is_refused() {
        let args = |a: &[&str]| {
            a.iter()
                .map(|s| Bytes::from(s.to_string()))
                .collect::<Vec<_>>()
        };
        assert_eq!(parse(&args(&["1", "9", "5"])), Some((X, 5)));
        assert_eq!(parse(&args(&["1", "9"])), None);
        assert_eq!(parse(&args(&["70000", "9", "5"])), None);
        assert_eq!(parse(&args(&["1", "x", "5"])), None);
    }

    #[test]
    fn the_last_part_applies_every_part_and_releases_the_others() {
        let mut book = Book::new(4);
        assert_eq!(book.arrive(3, X, 0b1011, "three"), Ok(Arrival::Hold));
        assert_eq!(book.arrive(0, X, 0b1011, "zero"), Ok(Arrival::Hold));
        assert!(book.is_held(0) && book.is_held(3) && !book.is_held(1));
        assert_eq!(
            book.arrive(0, Y, 0b11, "again"),
            Err(BookError::AlreadyHeld)
        );
        assert_eq!(book.arrive(1, X, 0b11, "wrong"), Err(BookError::Mismatch));
        assert_eq!(
            book.arrive(1, X, 0b1011, "one"),
            Ok(Arrival::Apply(vec![(0, "zero"), (1, "one"), (3, "three")]))
        );
        assert!(book.is_empty());
        // Held until the applying shard ran them.
        assert!(!book.released(0) && book.is_held(0));
        book.finish(X);
        assert!(book.released(0) && book.released(1) && book.released(3));
        assert!(!book.released(0), "released once");
        assert!(!(0..4).any(|s| book.is_held(s)));
        assert_eq!(book.arrive(2, X, 0b1011, "x"), Err(BookError::NotInvolved));
        assert_eq!(book.arrive(1, Y, 0b10, "y"), Err(BookError::NotInvolved));
        assert_eq!(book.arrive(1, Y, 0b10011, "y"), Err(BookError::NotInvolved));
    }

    #[test]
    fn a_broken_link_takes_its_part_back_unless_it_is_applying() {
        let mut book = Book::new(3);
        assert_eq!(book.arrive(0, X, 0b111, 0), Ok(Arrival::Hold));
        assert_eq!(book.arrive(1, X, 0b111, 1), Ok(Arrival::Hold));
        assert_eq!(book.retract(1), Retract::Retracted);
        assert_eq!(book.retract(2), Retract::Nothing);
        // Shard 2 arrives: shard 1's part is missing, so nothing applies yet.
        assert_eq!(book.arrive(2, X, 0b111, 2), Ok(Arrival::Hold));
        // Shard 1's stream brings its part again.
        let Ok(Arrival::Apply(parts)) = book.arrive(1, X, 0b111, 1) else {
            panic!("the last part");
        };
        assert_eq!(parts, vec![(0, 0), (1, 1), (2, 2)]);
        assert_eq!(book.retract(0), Retract::InFlight);
        book.finish(X);
        assert_eq!(book.retract(0), Retract::InFlight);
        assert!(book.released(0));
        assert_eq!(book.retract(0), Retract::Nothing);
        assert_eq!(book.len(), 0);
    }

    #[test]
    fn transactions_in_the_same_order_on_every_shard_never_deadlock() {
        // x over {0,1}, then y over {1,2} (shard 1 ran x first); shards reach them in any
        // interleaving.
        let mut book = Book::new(3);
        assert_eq!(book.arrive(2, Y, 0b110, ()), Ok(Arrival::Hold));
        assert_eq!(book.arrive(1, X, 0b011, ()), Ok(Arrival::Hold));
        assert!(matches!(
            book.arrive(0, X, 0b011, ()),
            Ok(Arrival::Apply(_))
        ));
        book.finish(X);
        assert!(book.released(1));
        assert!(matches!(
            book.arrive(1, Y, 0b110, ()),
            Ok(Arrival::Apply(_))
        ));
    }
}
