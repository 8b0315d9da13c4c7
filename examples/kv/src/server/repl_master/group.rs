//! A transaction over several shards, on the hub: each involved shard's part arrives on
//! that shard's channel (`FeedItem::Part`); the shard's later items wait behind it until
//! every part arrived, then the parts go out as one MULTI/EXEC and the shards go on. A
//! program's steps arrive as pieces before its parts (`FeedItem::Piece`) and wait here
//! with them; a program that held one shard has its pieces streamed at that part. The
//! master's two-phase locking runs transactions that share a shard in the same order on
//! every shard, so the parts a shard waits for are on their way and the wait ends (see
//! [`crate::repl::shards`]). What a held shard sends meanwhile waits in the hub's memory,
//! bounded by what the shard writes while the other parts are on their way.

use bytes::Bytes;

use crate::repl::cut::transaction;
use crate::repl::shards::{BarrierId, Reached};
use crate::repl::GroupPart;

use super::hub::Hub;

impl Hub {
    /// Shard `from`'s part of transaction `id` over the shards `involved`.
    pub(super) fn part(
        &mut self,
        from: usize,
        id: BarrierId,
        involved: u64,
        part: GroupPart,
        now: u64,
    ) {
        let bit = 1u64.checked_shl(from as u32).unwrap_or(0);
        if involved.count_ones() < 2 || involved & bit == 0 {
            // One shard's part (a program that held only this shard, or past 64 shards).
            let mut parts = self.take_pieces(id, from);
            parts.push(part);
            self.stream_group(parts);
            return;
        }
        match self.barriers.arrive(from, id, involved) {
            Ok(Reached::Hold) => self.group_parts.entry(id).or_default().push(part),
            Ok(Reached::Apply(shards)) => {
                let mut parts = self.group_parts.remove(&id).unwrap_or_default();
                parts.push(part);
                self.stream_group(parts);
                for shard in shards {
                    self.release(shard, now);
                }
            }
            Err(error) => {
                // Not a part the bookkeeping can place (it cannot happen): streamed on its
                // own rather than lost.
                tracing::error!(?error, ?id, from, "a transaction's part out of place");
                self.stream_group(vec![part]);
            }
        }
    }

    /// The pieces shard `from` sent for `id`.
    fn take_pieces(&mut self, id: BarrierId, from: usize) -> Vec<GroupPart> {
        let Some(all) = self.group_parts.get_mut(&id) else {
            return Vec::new();
        };
        let (mine, others): (Vec<GroupPart>, Vec<GroupPart>) =
            std::mem::take(all).into_iter().partition(|p| p.0 == from);
        if others.is_empty() {
            self.group_parts.remove(&id);
        } else {
            *all = others;
        }
        mine
    }

    /// The shard's items held behind a transaction, until it is held again.
    fn release(&mut self, shard: usize, now: u64) {
        while !self.barriers.is_held(shard) {
            let Some(item) = self.held[shard].pop_front() else {
                break;
            };
            self.take(shard, item, now);
        }
    }

    /// Streams the parts as one MULTI/EXEC (in shard order, each shard's pieces in their
    /// order: the shards' parts touch different keys).
    fn stream_group(&mut self, mut parts: Vec<GroupPart>) {
        parts.sort_by_key(|(shard, start, _)| (*shard, *start));
        for (shard, start, bytes) in &mut parts {
            let end = *start + bytes.len() as u64;
            self.received[*shard] = self.received[*shard].max(end);
            // As `local_writes_skipped`: a follower streams its master's bytes instead.
            if self.following || *start < self.floor[*shard] {
                *bytes = Bytes::new();
            }
        }
        let Some(whole) = transaction(parts.iter().map(|(_, _, body)| body)) else {
            return;
        };
        self.ensure_backlog();
        let (size, offset) = (self.backlog_size, self.identity.master_repl_offset);
        let backlog = (self.backlog).get_or_insert_with(|| crate::repl::Backlog::new(size, offset));
        backlog.append(&whole);
        self.identity.master_repl_offset += whole.len() as u64;
        let hard = self.limits.replica.0;
        for replica in &mut self.replicas {
            replica.offer_group(&parts, &whole, hard);
        }
    }
}
