//! XADD, XRANGE, XREVRANGE, XLEN, XDEL, XTRIM and XSETID.

use bytes::Bytes;

use super::super::args::is;
use super::id::{self, next_auto, StreamId};
use super::trim::{self, AddTrimArgs, Strategy};
use super::{err, stream_mut, stream_ref, Stream, STREAM};
use crate::change::ChangeSink;
use crate::command::CommandError;
use crate::number::parse_i64;
use crate::reply::Reply;
use crate::store::types::Cx;

/// The argument that makes an approximate trim exact on replay: the length kept, or the
/// first ID kept (`streamRewriteTrimArgument`).
fn exact_trim_arg(stream: &Stream, strategy: Strategy) -> Bytes {
    match strategy {
        Strategy::MinId(_) => stream.first_live().unwrap_or(StreamId::MAX).to_bytes(),
        _ => Bytes::from(stream.len().to_string()),
    }
}

/// `~ n` rewritten as `= exact` in a copy of the arguments.
fn rewrite_trim(logged: &mut [Bytes], args: &AddTrimArgs, stream: &Stream) {
    if args.approx {
        logged[args.strategy_arg - 1] = Bytes::from_static(b"=");
        logged[args.strategy_arg] = exact_trim_arg(stream, args.strategy);
    }
}

impl<S: ChangeSink> Cx<'_, S> {
    pub fn xadd(&mut self, a: &[Bytes]) -> Result<Reply, CommandError> {
        let limits = self.node_limits();
        let parsed = trim::parse(a, true, limits.max_entries, self.replaying())?;
        let fields_at = parsed.id_at + 1;
        let n = a.len().saturating_sub(fields_at);
        if n < 2 || n % 2 == 1 {
            return Err(CommandError::WrongArity { command: "xadd" });
        }
        if parsed.id == Some(StreamId::MIN) && parsed.seq_given {
            return Err(err("ERR The ID specified in XADD must be greater than 0-0"));
        }
        let now = self.now;
        let pairs: Vec<(&[u8], &[u8])> = a[fields_at..]
            .chunks(2)
            .map(|pair| (&pair[0][..], &pair[1][..]))
            .collect();
        let outcome = self
            .store
            .update(&a[0], STREAM, !parsed.no_mkstream, now, self.sink, |value| {
                let stream = stream_mut(value);
                if stream.last_id == StreamId::MAX {
                    return Err(err(
                        "ERR The stream has exhausted the last possible ID, unable to add more items",
                    ));
                }
                let id = match parsed.id {
                    None => next_auto(stream.last_id, now),
                    Some(given) if parsed.seq_given => Some(given),
                    // The sequence never wraps into the next millisecond.
                    Some(given) if given.ms == stream.last_id.ms => {
                        Some(stream.last_id).filter(|last| last.seq < u64::MAX).and_then(StreamId::next)
                    }
                    Some(given) => Some(given),
                }
                .filter(|id| *id > stream.last_id)
                .ok_or_else(|| {
                    err("ERR The ID specified in XADD is equal or smaller than the target stream top item")
                })?;
                stream.append(id, &pairs, limits);
                let trimmed = trim::trim(stream, parsed.strategy, parsed.approx, parsed.limit);
                // What is logged, only where something reads the log (the copy of the
                // arguments and the formatted ID were most of an XADD's own cost).
                let mut logged = Vec::new();
                if S::ENABLED {
                    logged = a.to_vec();
                    if parsed.strategy != Strategy::None {
                        rewrite_trim(&mut logged, &parsed, stream);
                    }
                    logged[parsed.id_at] = id.to_bytes();
                }
                Ok((id, trimmed, logged))
            })?;
        let Some(outcome) = outcome else {
            return Ok(Reply::NullBulk);
        };
        let (id, trimmed, logged) = outcome?;
        if S::ENABLED {
            self.log("XADD", &logged);
        }
        self.event("xadd", &a[0]);
        if trimmed > 0 {
            self.event("xtrim", &a[0]);
        }
        Ok(Reply::Bulk(id.to_bytes()))
    }

    /// XRANGE key start end [COUNT n], XREVRANGE key end start [COUNT n].
    pub fn xrange(&mut self, a: &[Bytes]) -> Result<Reply, CommandError> {
        let rev = self.op == crate::command::TypedOp::XRevRange;
        let (start_arg, end_arg) = if rev { (&a[2], &a[1]) } else { (&a[1], &a[2]) };
        let start = id::interval(start_arg, true)?;
        let end = id::interval(end_arg, false)?;
        let mut count: Option<usize> = None;
        let mut i = 3;
        while i < a.len() {
            if is(&a[i], "count") && i + 1 < a.len() {
                let n = parse_i64(&a[i + 1]).ok_or(CommandError::NotAnInteger)?;
                count = Some(n.max(0) as usize);
                i += 2;
            } else {
                return Err(CommandError::Syntax);
            }
        }
        let value = self.store.view(&a[0], STREAM, self.now, self.sink)?;
        let Some(stream) = stream_ref(value) else {
            return Ok(Reply::Array(Vec::new()));
        };
        if count == Some(0) {
            return Ok(Reply::NullArray);
        }
        let entries = stream
            .range_replies(start, end, rev)
            .take(count.unwrap_or(usize::MAX))
            .collect();
        Ok(Reply::Array(entries))
    }

    pub fn xlen(&mut self, a: &[Bytes]) -> Result<Reply, CommandError> {
        let value = self.store.view(&a[0], STREAM, self.now, self.sink)?;
        Ok(Reply::Integer(
            stream_ref(value).map_or(0, Stream::len) as i64
        ))
    }

    pub fn xdel(&mut self, a: &[Bytes]) -> Result<Reply, CommandError> {
        // Redis looks the key up before it parses the IDs.
        if self
            .store
            .view(&a[0], STREAM, self.now, self.sink)?
            .is_none()
        {
            return Ok(Reply::Integer(0));
        }
        let ids = a[1..]
            .iter()
            .map(|arg| id::strict(arg))
            .collect::<Result<Vec<_>, _>>()?;
        let deleted = self
            .store
            .update(&a[0], STREAM, false, self.now, self.sink, |value| {
                let stream = stream_mut(value);
                let mut deleted = 0;
                let mut first = false;
                for id in ids {
                    if stream.delete(id) {
                        first |= id == stream.first_id;
                        if id > stream.max_deleted_entry_id {
                            stream.max_deleted_entry_id = id;
                        }
                        deleted += 1;
                    }
                }
                if deleted > 0 && (stream.is_empty() || first) {
                    stream.refresh_first_id();
                }
                deleted
            })?
            .unwrap_or(0);
        if deleted > 0 {
            self.log_as_written(a);
            self.event("xdel", &a[0]);
        }
        Ok(Reply::Integer(deleted))
    }

    pub fn xtrim(&mut self, a: &[Bytes]) -> Result<Reply, CommandError> {
        let limits = self.node_limits();
        let parsed = trim::parse(a, false, limits.max_entries, self.replaying())?;
        let outcome = self
            .store
            .update(&a[0], STREAM, false, self.now, self.sink, |value| {
                let stream = stream_mut(value);
                let trimmed = trim::trim(stream, parsed.strategy, parsed.approx, parsed.limit);
                let mut logged = a.to_vec();
                rewrite_trim(&mut logged, &parsed, stream);
                (trimmed, logged)
            })?;
        let Some((trimmed, logged)) = outcome else {
            return Ok(Reply::Integer(0));
        };
        if trimmed > 0 {
            self.log("XTRIM", &logged);
            self.event("xtrim", &a[0]);
        }
        Ok(Reply::Integer(trimmed as i64))
    }

    /// XSETID key last-id [ENTRIESADDED n] [MAXDELETEDID id].
    pub fn xsetid(&mut self, a: &[Bytes]) -> Result<Reply, CommandError> {
        let new_last = id::strict(&a[1])?;
        let mut entries_added: Option<u64> = None;
        let mut max_deleted = StreamId::MIN;
        let mut i = 2;
        while i < a.len() {
            let more = i + 1 < a.len();
            if is(&a[i], "entriesadded") && more {
                let n = parse_i64(&a[i + 1]).ok_or(CommandError::NotAnInteger)?;
                if n < 0 {
                    return Err(err("ERR entries_added must be positive"));
                }
                entries_added = Some(n as u64);
            } else if is(&a[i], "maxdeletedid") && more {
                max_deleted = id::strict(&a[i + 1])?;
                if new_last < max_deleted {
                    return Err(err("ERR The ID specified in XSETID is smaller than the provided max_deleted_entry_id"));
                }
            } else {
                return Err(CommandError::Syntax);
            }
            i += 2;
        }
        if self
            .store
            .view(&a[0], STREAM, self.now, self.sink)?
            .is_none()
        {
            return Err(err("ERR no such key"));
        }
        self.store
            .update(&a[0], STREAM, false, self.now, self.sink, |value| {
                let stream = stream_mut(value);
                if let Some(top) = stream.last_live() {
                    if new_last < top {
                        return Err(err("ERR The ID specified in XSETID is smaller than the target stream top item"));
                    }
                    if entries_added.is_some_and(|n| (stream.len() as u64) > n) {
                        return Err(err("ERR The entries_added specified in XSETID is smaller than the target stream length"));
                    }
                }
                stream.last_id = new_last;
                if let Some(n) = entries_added {
                    stream.entries_added = n;
                }
                if !max_deleted.is_zero() {
                    stream.max_deleted_entry_id = max_deleted;
                }
                Ok(())
            })?
            .transpose()?;
        self.log_as_written(a);
        self.event("xsetid", &a[0]);
        Ok(Reply::ok())
    }
}
