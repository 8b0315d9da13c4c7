//! XCLAIM and XAUTOCLAIM. Both are logged as the per-entry `XCLAIM ... FORCE JUSTID LASTID`
//! records Redis propagates (times absolute), and a lone `XGROUP SETID` when only LASTID
//! moved the group.

use bytes::Bytes;

use super::id::{self, StreamId};
use super::read::{setid_record, xclaim_record};
use super::{entry_reply, err, nogroup_key, stream_mut, stream_ref, STREAM};
use crate::change::{ChangeSink, WriteOp};
use crate::command::CommandError;
use crate::number::parse_i64;
use crate::reply::Reply;
use crate::store::types::args::is;
use crate::store::types::Cx;

fn int_or(arg: &[u8], message: &str) -> Result<i64, CommandError> {
    parse_i64(arg).ok_or_else(|| err(format!("ERR {message}")))
}

impl<S: ChangeSink> Cx<'_, S> {
    fn record_all(&mut self, logs: &[Vec<Bytes>]) {
        for args in logs {
            let name = if &args[0][..] == b"XCLAIM" {
                "XCLAIM"
            } else {
                "XGROUP"
            };
            self.sink.record(WriteOp::Command {
                name,
                key: &args[1],
                args: &args[2..],
            });
        }
    }

    /// XCLAIM key group consumer min-idle id... [IDLE ms] [TIME ms] [RETRYCOUNT n] [FORCE]
    /// [JUSTID] [LASTID id].
    pub fn xclaim(&mut self, a: &[Bytes]) -> Result<Reply, CommandError> {
        let (key, group_name, consumer) = (&a[0], &a[1], &a[2]);
        let value = self.store.view(key, STREAM, self.now, self.sink)?;
        if !stream_ref(value).is_some_and(|s| s.groups.contains_key(group_name)) {
            return Err(nogroup_key(key, group_name));
        }
        let min_idle = int_or(&a[3], "Invalid min-idle-time argument for XCLAIM")?.max(0);
        let mut ids = Vec::new();
        let mut j = 4;
        while j < a.len() {
            match id::strict(&a[j]) {
                Ok(id) => ids.push(id),
                Err(_) => break,
            }
            j += 1;
        }
        let now = self.now as i64;
        let (mut force, mut justid) = (false, false);
        let mut retry: i64 = -1;
        let mut delivery: i64 = -1;
        let mut last_id = StreamId::MIN;
        while j < a.len() {
            let more = j + 1 < a.len();
            let opt = &a[j];
            if is(opt, "force") {
                force = true;
            } else if is(opt, "justid") {
                justid = true;
            } else if is(opt, "idle") && more {
                j += 1;
                delivery = now - int_or(&a[j], "Invalid IDLE option argument for XCLAIM")?;
            } else if is(opt, "time") && more {
                j += 1;
                delivery = int_or(&a[j], "Invalid TIME option argument for XCLAIM")?;
            } else if is(opt, "retrycount") && more {
                j += 1;
                retry = int_or(&a[j], "Invalid RETRYCOUNT option argument for XCLAIM")?;
            } else if is(opt, "lastid") && more {
                j += 1;
                last_id = id::strict(&a[j])?;
            } else {
                return Err(err(format!(
                    "ERR Unrecognized XCLAIM option '{}'",
                    String::from_utf8_lossy(opt)
                )));
            }
            j += 1;
        }
        // Replay (at time 0) keeps the logged times.
        if delivery < 0 || (delivery > now && !self.replaying()) {
            delivery = now;
        }
        let mut logs = Vec::new();
        let existed = self.has_consumer(key, group_name, consumer);
        let reply = self
            .store
            .update(key, STREAM, false, self.now, self.sink, |value| {
                let stream = stream_mut(value);
                let mut group = stream.groups.remove(group_name).unwrap_or_default();
                let mut propagate_last = false;
                if last_id > group.last_id {
                    group.last_id = last_id;
                    propagate_last = true;
                }
                let mut out = Vec::new();
                let mut consumer_ready = false;
                for id in ids {
                    let pending = group.pel.contains_key(&id);
                    if !stream.contains(id) {
                        if pending {
                            logs.push(xclaim_record(key, group_name, &group, id));
                            propagate_last = false;
                            group.ack(id);
                        }
                        continue;
                    }
                    if !pending && !force {
                        continue;
                    }
                    if let Some(nack) = group.pel.get(&id) {
                        if min_idle > 0 && now - (nack.delivery_time as i64) < min_idle {
                            continue;
                        }
                    }
                    if !consumer_ready {
                        group.touch_consumer(consumer, now as u64);
                        consumer_ready = true;
                    }
                    let count = group.pel.get(&id).map_or(1, |nack| nack.delivery_count);
                    let count = if retry >= 0 {
                        retry as u64
                    } else if justid {
                        count
                    } else if pending {
                        count + 1
                    } else {
                        // A forced new entry starts at 1 and this delivery counts.
                        2
                    };
                    group.assign(id, consumer, delivery as u64, count);
                    out.push(if justid {
                        Reply::Bulk(id.to_bytes())
                    } else {
                        entry_reply(id, stream.get(id).unwrap_or_default())
                    });
                    logs.push(xclaim_record(key, group_name, &group, id));
                    propagate_last = false;
                }
                if propagate_last {
                    logs.push(setid_record(key, group_name, &group));
                }
                stream.groups.insert(group_name.clone(), group);
                Reply::Array(out)
            })?
            .unwrap_or(Reply::Array(Vec::new()));
        self.note_consumer(existed, key, group_name, consumer);
        self.record_all(&logs);
        Ok(reply)
    }

    /// XAUTOCLAIM key group consumer min-idle start [COUNT n] [JUSTID]:
    /// `[next start, claimed, deleted IDs]`.
    pub fn xautoclaim(&mut self, a: &[Bytes]) -> Result<Reply, CommandError> {
        let (key, group_name, consumer) = (&a[0], &a[1], &a[2]);
        let min_idle = int_or(&a[3], "Invalid min-idle-time argument for XAUTOCLAIM")?.max(0);
        let start = id::interval(&a[4], true)?;
        let mut count: i64 = 100;
        let mut justid = false;
        let mut j = 5;
        while j < a.len() {
            let more = j + 1 < a.len();
            if is(&a[j], "count") && more {
                let max = i64::MAX / 16;
                count = parse_i64(&a[j + 1])
                    .filter(|n| (1..=max).contains(n))
                    .ok_or_else(|| err("ERR COUNT must be > 0"))?;
                j += 1;
            } else if is(&a[j], "justid") {
                justid = true;
            } else {
                return Err(CommandError::Syntax);
            }
            j += 1;
        }
        let value = self.store.view(key, STREAM, self.now, self.sink)?;
        if !stream_ref(value).is_some_and(|s| s.groups.contains_key(group_name)) {
            return Err(nogroup_key(key, group_name));
        }
        let now = self.now;
        let mut logs = Vec::new();
        let existed = self.has_consumer(key, group_name, consumer);
        let reply = self
            .store
            .update(key, STREAM, false, now, self.sink, |value| {
                let stream = stream_mut(value);
                let mut group = stream.groups.remove(group_name).unwrap_or_default();
                let mut attempts = count * 10;
                let mut left = count;
                let mut claimed = Vec::new();
                let mut deleted = Vec::new();
                let mut consumer_ready = false;
                let mut next = group.pel.range(start..).map(|(id, _)| *id).next();
                while attempts > 0 && left > 0 {
                    let Some(id) = next else { break };
                    attempts -= 1;
                    next = id
                        .next()
                        .and_then(|after| group.pel.range(after..).map(|(id, _)| *id).next());
                    if !stream.contains(id) {
                        logs.push(xclaim_record(key, group_name, &group, id));
                        group.ack(id);
                        deleted.push(Reply::Bulk(id.to_bytes()));
                        left -= 1;
                        continue;
                    }
                    let (time, delivered) = {
                        let nack = &group.pel[&id];
                        (nack.delivery_time, nack.delivery_count)
                    };
                    if min_idle > 0 && (now as i64 - time as i64) < min_idle {
                        continue;
                    }
                    if !consumer_ready {
                        group.touch_consumer(consumer, now);
                        consumer_ready = true;
                    }
                    let count = delivered + u64::from(!justid);
                    group.assign(id, consumer, now, count);
                    claimed.push(if justid {
                        Reply::Bulk(id.to_bytes())
                    } else {
                        entry_reply(id, stream.get(id).unwrap_or_default())
                    });
                    left -= 1;
                    logs.push(xclaim_record(key, group_name, &group, id));
                }
                stream.groups.insert(group_name.clone(), group);
                Reply::Array(vec![
                    Reply::Bulk(next.unwrap_or(StreamId::MIN).to_bytes()),
                    Reply::Array(claimed),
                    Reply::Array(deleted),
                ])
            })?
            .unwrap_or(Reply::Array(Vec::new()));
        self.note_consumer(existed, key, group_name, consumer);
        self.record_all(&logs);
        Ok(reply)
    }
}
