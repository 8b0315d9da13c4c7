use std::fmt;

use bytes::Bytes;

use crate::clients::{KillFilter, ListQuery};
use crate::command::ClientsOp;
use crate::info::{self, ServerInfo};
use crate::reply::Reply;

/// Collects the replies of a fanned-out command's parts and builds the client's reply.
#[derive(Debug)]
pub struct Merger {
    kind: MergeKind,
    replies: Vec<Option<Reply>>,
    missing: usize,
}

#[derive(Debug)]
enum MergeKind {
    /// DEL, EXISTS, DBSIZE: add the integers.
    Sum,
    /// MSET, FLUSHALL: OK once every part said OK.
    AllOk,
    /// Every part gave the same reply, which is the client's.
    Same,
    /// MGET: `owners[i]` is the part that holds the i-th requested key. Each part lists its
    /// keys in request order, so taking values from the parts in `owners` order restores it.
    Gather { owners: Vec<u32> },
    /// KEYS: every part's array, concatenated.
    Concat,
    /// RANDOMKEY: one of the parts' non-null replies, picked at random.
    AnyOf,
    /// SCAN on one shard: its cursor becomes the client's
    /// ([`super::keyops::join_cursor`]).
    Scan { shard: usize, shards: usize },
    /// INFO: part `i` carries shard `i`'s [`ShardStats`].
    Info { sections: Vec<Bytes> },
    /// PUBSUB CHANNELS: every part's array, each name once.
    Distinct,
    /// PUBSUB NUMPAT: how many distinct names the parts' arrays hold.
    CountDistinct,
    /// PUBSUB NUMSUB: flat `[name, count, ...]` arrays in the same order; counts added.
    SumPairs,
    /// CLIENT LIST: flat `[id, line, ...]` arrays, plus the caller's own line.
    ClientList {
        query: ListQuery,
        caller_line: Option<(u64, Bytes)>,
    },
    /// CLIENT KILL: the parts' counts, plus the caller if it killed itself.
    ClientKill {
        filter: KillFilter,
        caller_killed: bool,
    },
    /// A merge a command family defines (see [`Merger::custom`]).
    Custom { merge: MergeFn, context: Vec<Bytes> },
}

/// A family's own merge: the parts' replies in part order (none an error: the first error
/// is the reply), the process's facts, and the request's context (its own arguments).
pub type MergeFn = fn(Vec<Reply>, &ServerInfo, &[Bytes]) -> Reply;

/// A mismatch between the merger and what the glue fed it: a bug in the glue or a shard.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MergeError {
    PartOutOfRange { part: usize, parts: usize },
    DuplicateReply { part: usize },
    Incomplete { missing: usize },
    UnexpectedReply { part: usize },
}

impl fmt::Display for MergeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MergeError::PartOutOfRange { part, parts } => {
                write!(f, "reply for part {part} of a {parts}-part command")
            }
            MergeError::DuplicateReply { part } => write!(f, "second reply for part {part}"),
            MergeError::Incomplete { missing } => write!(f, "{missing} part replies missing"),
            MergeError::UnexpectedReply { part } => {
                write!(f, "part {part} replied with an unexpected shape")
            }
        }
    }
}

impl std::error::Error for MergeError {}

impl Merger {
    fn new(kind: MergeKind, parts: usize) -> Merger {
        Merger {
            kind,
            replies: vec![None; parts],
            missing: parts,
        }
    }

    pub(super) fn sum(parts: usize) -> Merger {
        Merger::new(MergeKind::Sum, parts)
    }

    pub(super) fn all_ok(parts: usize) -> Merger {
        Merger::new(MergeKind::AllOk, parts)
    }

    pub(super) fn same(parts: usize) -> Merger {
        Merger::new(MergeKind::Same, parts)
    }

    pub(super) fn gather(owners: Vec<u32>, parts: usize) -> Merger {
        Merger::new(MergeKind::Gather { owners }, parts)
    }

    pub(super) fn concat(parts: usize) -> Merger {
        Merger::new(MergeKind::Concat, parts)
    }

    pub(super) fn any_of(parts: usize) -> Merger {
        Merger::new(MergeKind::AnyOf, parts)
    }

    pub(super) fn scan(shard: usize, shards: usize) -> Merger {
        Merger::new(MergeKind::Scan { shard, shards }, 1)
    }

    pub(super) fn distinct(parts: usize) -> Merger {
        Merger::new(MergeKind::Distinct, parts)
    }

    pub(super) fn count_distinct(parts: usize) -> Merger {
        Merger::new(MergeKind::CountDistinct, parts)
    }

    pub(super) fn sum_pairs(parts: usize) -> Merger {
        Merger::new(MergeKind::SumPairs, parts)
    }

    pub(super) fn clients(op: ClientsOp, parts: usize) -> Merger {
        let kind = match op {
            ClientsOp::List { query, caller_line } => MergeKind::ClientList { query, caller_line },
            ClientsOp::Kill {
                filter,
                caller_killed,
            } => MergeKind::ClientKill {
                filter,
                caller_killed,
            },
            // Merged by their own functions (see `clients::command::route`).
            ClientsOp::Unblock { .. } | ClientsOp::AclRefresh { .. } => MergeKind::AllOk,
        };
        Merger::new(kind, parts)
    }

    pub(super) fn info(sections: Vec<Bytes>, parts: usize) -> Merger {
        Merger::new(MergeKind::Info { sections }, parts)
    }

    /// Merges `parts` replies with `merge`, given `context`.
    pub fn custom(parts: usize, merge: MergeFn, context: Vec<Bytes>) -> Merger {
        Merger::new(MergeKind::Custom { merge, context }, parts)
    }

    pub fn parts(&self) -> usize {
        self.replies.len()
    }

    /// Records part `part`'s reply; they may arrive in any order.
    pub fn accept(&mut self, part: usize, reply: Reply) -> Result<(), MergeError> {
        let parts = self.replies.len();
        let slot = self
            .replies
            .get_mut(part)
            .ok_or(MergeError::PartOutOfRange { part, parts })?;
        if slot.is_some() {
            return Err(MergeError::DuplicateReply { part });
        }
        *slot = Some(reply);
        self.missing -= 1;
        Ok(())
    }

    pub fn is_complete(&self) -> bool {
        self.missing == 0
    }

    /// The client's reply. If any part failed, its error (the lowest part's) is the reply.
    /// `server` is only read for INFO. An `Err` means the glue fed the merger wrongly; reply
    /// with an error and log it.
    pub fn finish(self, server: &ServerInfo) -> Result<Reply, MergeError> {
        if self.missing > 0 {
            return Err(MergeError::Incomplete {
                missing: self.missing,
            });
        }
        let replies: Vec<Reply> = self.replies.into_iter().flatten().collect();
        if let Some(error) = replies.iter().find(|r| r.is_error()) {
            return Ok(error.clone());
        }
        match self.kind {
            MergeKind::Custom { merge, context } => Ok(merge(replies, server, &context)),
            MergeKind::Sum => {
                let mut total = 0i64;
                for (part, reply) in replies.iter().enumerate() {
                    let Reply::Integer(n) = reply else {
                        return Err(MergeError::UnexpectedReply { part });
                    };
                    total = total.saturating_add(*n);
                }
                Ok(Reply::Integer(total))
            }
            MergeKind::AllOk => {
                if let Some(part) = replies.iter().position(|r| *r != Reply::ok()) {
                    return Err(MergeError::UnexpectedReply { part });
                }
                Ok(Reply::ok())
            }
            MergeKind::Same => {
                if let Some(part) = replies.iter().position(|r| *r != replies[0]) {
                    return Err(MergeError::UnexpectedReply { part });
                }
                replies
                    .into_iter()
                    .next()
                    .ok_or(MergeError::Incomplete { missing: 0 })
            }
            MergeKind::Gather { owners } => gather(owners, replies),
            MergeKind::Concat => {
                let mut all = Vec::new();
                for (part, reply) in replies.into_iter().enumerate() {
                    let Reply::Array(items) = reply else {
                        return Err(MergeError::UnexpectedReply { part });
                    };
                    all.extend(items);
                }
                Ok(Reply::Array(all))
            }
            MergeKind::Distinct | MergeKind::CountDistinct => {
                let mut seen = std::collections::HashSet::new();
                let mut all = Vec::new();
                for (part, reply) in replies.into_iter().enumerate() {
                    let Reply::Array(items) = reply else {
                        return Err(MergeError::UnexpectedReply { part });
                    };
                    all.extend(items.into_iter().filter(|item| seen.insert(item.clone())));
                }
                Ok(match self.kind {
                    MergeKind::Distinct => Reply::Array(all),
                    _ => Reply::Integer(all.len() as i64),
                })
            }
            MergeKind::SumPairs => sum_pairs(replies),
            MergeKind::ClientList { query, caller_line } => {
                let mut lines: Vec<(u64, Bytes)> = caller_line.into_iter().collect();
                for (part, reply) in replies.into_iter().enumerate() {
                    let Reply::Array(items) = reply else {
                        return Err(MergeError::UnexpectedReply { part });
                    };
                    let mut items = items.into_iter();
                    while let Some(id) = items.next() {
                        match (id, items.next()) {
                            (Reply::Integer(id), Some(Reply::Bulk(line))) => {
                                lines.push((id as u64, line))
                            }
                            _ => return Err(MergeError::UnexpectedReply { part }),
                        }
                    }
                }
                Ok(Reply::Bulk(query.render(lines)))
            }
            MergeKind::ClientKill {
                filter,
                caller_killed,
            } => {
                let mut killed = i64::from(caller_killed);
                for (part, reply) in replies.iter().enumerate() {
                    let Reply::Integer(n) = reply else {
                        return Err(MergeError::UnexpectedReply { part });
                    };
                    killed += n;
                }
                Ok(filter.reply(killed))
            }
            MergeKind::AnyOf => {
                let mut found: Vec<Reply> = replies
                    .into_iter()
                    .filter(|reply| *reply != Reply::NullBulk)
                    .collect();
                if found.is_empty() {
                    return Ok(Reply::NullBulk);
                }
                Ok(found.swap_remove(fastrand::usize(..found.len())))
            }
            MergeKind::Scan { shard, shards } => scan_reply(shard, shards, replies),
            MergeKind::Info { sections } => {
                let mut parts = Vec::with_capacity(replies.len());
                for (part, reply) in replies.iter().enumerate() {
                    parts.push(
                        info::ShardPart::from_reply(reply)
                            .ok_or(MergeError::UnexpectedReply { part })?,
                    );
                }
                let text = info::render(&sections, server, &parts);
                Ok(Reply::Bulk(Bytes::from(text)))
            }
        }
    }
}

fn scan_reply(shard: usize, shards: usize, replies: Vec<Reply>) -> Result<Reply, MergeError> {
    let unexpected = MergeError::UnexpectedReply { part: 0 };
    let Some(Reply::Array(mut pair)) = replies.into_iter().next() else {
        return Err(unexpected);
    };
    let next = match pair.first() {
        Some(Reply::Bulk(cursor)) if pair.len() == 2 => std::str::from_utf8(cursor)
            .ok()
            .and_then(|text| text.parse::<u64>().ok())
            .ok_or(unexpected)?,
        _ => return Err(unexpected),
    };
    let cursor = super::keyops::join_cursor(shard, next, shards);
    pair[0] = Reply::Bulk(Bytes::from(cursor.to_string()));
    Ok(Reply::Array(pair))
}

fn gather(owners: Vec<u32>, replies: Vec<Reply>) -> Result<Reply, MergeError> {
    let mut values = Vec::with_capacity(replies.len());
    for (part, reply) in replies.into_iter().enumerate() {
        let Reply::Array(items) = reply else {
            return Err(MergeError::UnexpectedReply { part });
        };
        values.push(items.into_iter());
    }
    let mut merged = Vec::with_capacity(owners.len());
    for owner in owners {
        let part = owner as usize;
        let value = values
            .get_mut(part)
            .and_then(Iterator::next)
            .ok_or(MergeError::UnexpectedReply { part })?;
        merged.push(value);
    }
    if let Some(part) = values.iter_mut().position(|rest| rest.next().is_some()) {
        return Err(MergeError::UnexpectedReply { part });
    }
    Ok(Reply::Array(merged))
}

/// `[name, count, ...]` from every part, names in the same order: the counts added.
fn sum_pairs(replies: Vec<Reply>) -> Result<Reply, MergeError> {
    let mut merged: Option<Vec<Reply>> = None;
    for (part, reply) in replies.into_iter().enumerate() {
        let Reply::Array(items) = reply else {
            return Err(MergeError::UnexpectedReply { part });
        };
        let Some(total) = merged.as_mut() else {
            merged = Some(items);
            continue;
        };
        if total.len() != items.len() {
            return Err(MergeError::UnexpectedReply { part });
        }
        for (sum, item) in total.iter_mut().zip(items).skip(1).step_by(2) {
            match (sum, item) {
                (Reply::Integer(sum), Reply::Integer(n)) => *sum += n,
                _ => return Err(MergeError::UnexpectedReply { part }),
            }
        }
    }
    Ok(Reply::Array(merged.unwrap_or_default()))
}
