//! Blocking list pops (BLPOP, BRPOP, BLMOVE, BRPOPLPUSH), sans-I/O: the timeout argument as
//! Redis 7.0 reads it, and the wait queues a shard keeps for the keys it owns.
//!
//! A blocked client waits on the shard that owns its keys without blocking the shard: the
//! shard records a [`WaiterId`] per blocked request here. When a write makes a list
//! non-empty, the shard calls [`WaitQueues::serve`] for that key, which offers the key to its
//! waiters in arrival order (the client blocked longest is served first, as Redis) until one
//! declines (the list is empty again). Timeouts come back from [`WaitQueues::expire`] in
//! deadline order; a client that disconnects is dropped with [`WaitQueues::remove`]. Time
//! comes from the caller (Unix milliseconds), so tests control it exactly.
//!
//! Bounded: at most `capacity` waiters at once; [`WaitQueues::block`] refuses beyond that.
//! A waiter blocked on several keys sits in each key's queue and leaves all of them together.

use std::collections::{BTreeSet, HashMap, VecDeque};

use bytes::Bytes;

use crate::command::CommandError;

/// When a blocked pop gives up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Deadline {
    /// Timeout 0: wait until served or disconnected.
    Never,
    /// Unix milliseconds.
    At(u64),
}

/// Reads a blocking command's timeout (float seconds, 0 = forever) as Redis 7.0's
/// `getTimeoutFromObjectOrReply`: milliseconds rounded up, errors with Redis's text.
pub fn parse_timeout(arg: &[u8], now_ms: u64) -> Result<Deadline, CommandError> {
    let seconds = parse_seconds(arg)
        .ok_or_else(|| CommandError::Text("ERR timeout is not a float or out of range".into()))?;
    let millis = (seconds * 1000.0).ceil();
    if millis > i64::MAX as f64 {
        return Err(out_of_range());
    }
    if millis < 0.0 {
        return Err(CommandError::Text("ERR timeout is negative".into()));
    }
    if millis == 0.0 {
        return Ok(Deadline::Never);
    }
    let at = now_ms.checked_add(millis as u64).ok_or_else(out_of_range)?;
    if at > i64::MAX as u64 {
        return Err(out_of_range());
    }
    Ok(Deadline::At(at))
}

fn out_of_range() -> CommandError {
    CommandError::Text("ERR timeout is out of range".into())
}

/// `strtold` syntax without leading spaces; never NaN.
fn parse_seconds(arg: &[u8]) -> Option<f64> {
    let text = std::str::from_utf8(arg).ok()?;
    if text.is_empty() || text.starts_with(|c: char| c.is_whitespace()) {
        return None;
    }
    let lower = text.to_ascii_lowercase();
    let value = match lower.trim_start_matches(['+', '-']) {
        "inf" | "infinity" if lower.starts_with('-') => f64::NEG_INFINITY,
        "inf" | "infinity" => f64::INFINITY,
        _ => text.parse::<f64>().ok()?,
    };
    (!value.is_nan()).then_some(value)
}

/// One blocked request on this shard. Ids grow with arrival, so they order waiters FIFO.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct WaiterId(u64);

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Waiter<T> {
    /// The keys in the order the client named them, without repeats.
    pub keys: Vec<Bytes>,
    pub deadline: Deadline,
    /// Who to answer (the glue's reply address) and what to pop.
    pub client: T,
}

/// [`WaitQueues::block`] beyond the capacity.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QueuesFull;

/// A shard's blocked pops, per key, in arrival order; `T` is the glue's per-waiter data.
#[derive(Debug)]
pub struct WaitQueues<T> {
    by_key: HashMap<Bytes, VecDeque<WaiterId>>,
    waiters: HashMap<WaiterId, Waiter<T>>,
    deadlines: BTreeSet<(u64, WaiterId)>,
    next_id: u64,
    capacity: usize,
}

impl<T> WaitQueues<T> {
    pub fn new(capacity: usize) -> WaitQueues<T> {
        WaitQueues {
            by_key: HashMap::new(),
            waiters: HashMap::new(),
            deadlines: BTreeSet::new(),
            next_id: 0,
            capacity,
        }
    }

    pub fn len(&self) -> usize {
        self.waiters.len()
    }

    pub fn is_empty(&self) -> bool {
        self.waiters.is_empty()
    }

    /// Keys with at least one waiter.
    pub fn blocked_keys(&self) -> usize {
        self.by_key.len()
    }

    /// Queues a request blocked on `keys` (repeats are waited on once, as Redis).
    pub fn block(
        &mut self,
        keys: &[Bytes],
        deadline: Deadline,
        client: T,
    ) -> Result<WaiterId, QueuesFull> {
        if self.waiters.len() >= self.capacity {
            return Err(QueuesFull);
        }
        let id = WaiterId(self.next_id);
        self.next_id += 1;
        let mut unique: Vec<Bytes> = Vec::with_capacity(keys.len());
        for key in keys {
            if !unique.contains(key) {
                unique.push(key.clone());
                self.by_key.entry(key.clone()).or_default().push_back(id);
            }
        }
        if let Deadline::At(at) = deadline {
            self.deadlines.insert((at, id));
        }
        self.waiters.insert(
            id,
            Waiter {
                keys: unique,
                deadline,
                client,
            },
        );
        Ok(id)
    }

    pub fn get(&self, id: WaiterId) -> Option<&Waiter<T>> {
        self.waiters.get(&id)
    }

    /// The waiter blocked longest on `key`.
    pub fn first_on(&self, key: &[u8]) -> Option<WaiterId> {
        self.by_key
            .get(key)
            .and_then(|queue| queue.front().copied())
    }

    /// The waiter blocked longest on `key` among those `ready` accepts (a key of one type
    /// serves the waiters for that type, in their order, past waiters for another).
    pub fn first_ready_on(
        &self,
        key: &[u8],
        mut ready: impl FnMut(&Waiter<T>) -> bool,
    ) -> Option<WaiterId> {
        self.by_key
            .get(key)?
            .iter()
            .copied()
            .find(|id| self.waiters.get(id).is_some_and(&mut ready))
    }

    /// Takes a waiter out of every queue (served, timed out or disconnected); `None` if it
    /// already left, so a late disconnect after a reply is harmless.
    pub fn remove(&mut self, id: WaiterId) -> Option<Waiter<T>> {
        let waiter = self.waiters.remove(&id)?;
        for key in &waiter.keys {
            if let Some(queue) = self.by_key.get_mut(key) {
                queue.retain(|&queued| queued != id);
                if queue.is_empty() {
                    self.by_key.remove(key);
                }
            }
        }
        if let Deadline::At(at) = waiter.deadline {
            self.deadlines.remove(&(at, id));
        }
        Some(waiter)
    }

    /// Offers `key` (just made non-empty) to its waiters, longest blocked first. `pop` does
    /// the waiter's pop and returns true when it served it (the waiter leaves every queue),
    /// false when the list is empty again, which ends the round. Returns how many were served.
    pub fn serve(
        &mut self,
        key: &[u8],
        mut pop: impl FnMut(WaiterId, &Waiter<T>) -> bool,
    ) -> usize {
        let mut served = 0;
        while let Some(id) = self.first_on(key) {
            let waiter = &self.waiters[&id];
            if !pop(id, waiter) {
                break;
            }
            self.remove(id);
            served += 1;
        }
        served
    }

    /// The earliest deadline, for the shard's timer.
    pub fn next_deadline(&self) -> Option<u64> {
        self.deadlines.first().map(|&(at, _)| at)
    }

    /// Removes and returns the waiters whose deadline is at or before `now_ms`, earliest
    /// first; each gets the nil reply.
    pub fn expire(&mut self, now_ms: u64) -> Vec<Waiter<T>> {
        let mut expired = Vec::new();
        while let Some(&(at, id)) = self.deadlines.first() {
            if at > now_ms {
                break;
            }
            expired.extend(self.remove(id));
        }
        expired
    }

    /// Removes the waiters whose client is gone (a closed connection), so none is served
    /// a pop nobody receives. Returns how many left.
    pub fn remove_clients(&mut self, mut gone: impl FnMut(&T) -> bool) -> usize {
        let ids: Vec<WaiterId> = self
            .waiters
            .iter()
            .filter(|(_, waiter)| gone(&waiter.client))
            .map(|(&id, _)| id)
            .collect();
        for &id in &ids {
            self.remove(id);
        }
        ids.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(names: &[&'static str]) -> Vec<Bytes> {
        names
            .iter()
            .map(|name| Bytes::from_static(name.as_bytes()))
            .collect()
    }

    fn error_text(result: Result<Deadline, CommandError>) -> String {
        match result {
            Err(CommandError::Text(text)) => text,
            other => panic!("expected an error, got {other:?}"),
        }
    }

    #[test]
    fn timeouts_read_as_redis() {
        assert_eq!(parse_timeout(b"0", 1000), Ok(Deadline::Never));
        assert_eq!(parse_timeout(b"0.0", 1000), Ok(Deadline::Never));
        assert_eq!(parse_timeout(b"1", 1000), Ok(Deadline::At(2000)));
        assert_eq!(parse_timeout(b"0.01", 1000), Ok(Deadline::At(1010)));
        // Milliseconds round up: a tiny positive timeout still waits.
        assert_eq!(parse_timeout(b"0.0001", 1000), Ok(Deadline::At(1001)));
        assert_eq!(parse_timeout(b"1e1", 0), Ok(Deadline::At(10_000)));
        for bad in [&b"abc"[..], b"", b" 1", b"1 ", b"nan", b"1x"] {
            assert_eq!(
                error_text(parse_timeout(bad, 0)),
                "ERR timeout is not a float or out of range"
            );
        }
        assert_eq!(
            error_text(parse_timeout(b"-1", 0)),
            "ERR timeout is negative"
        );
        assert_eq!(
            error_text(parse_timeout(b"-0.5", 0)),
            "ERR timeout is negative"
        );
        assert_eq!(
            error_text(parse_timeout(b"inf", 0)),
            "ERR timeout is out of range"
        );
        assert_eq!(
            error_text(parse_timeout(b"1e300", 0)),
            "ERR timeout is out of range"
        );
    }

    #[test]
    fn serves_waiters_in_arrival_order_while_the_list_has_items() {
        let mut queues: WaitQueues<u32> = WaitQueues::new(16);
        let a = queues.block(&keys(&["k"]), Deadline::Never, 0).unwrap();
        let b = queues.block(&keys(&["k"]), Deadline::Never, 0).unwrap();
        let c = queues.block(&keys(&["k"]), Deadline::Never, 0).unwrap();
        let mut items = 2;
        let mut order = Vec::new();
        let served = queues.serve(b"k", |id, _| {
            if items == 0 {
                return false;
            }
            items -= 1;
            order.push(id);
            true
        });
        assert_eq!(served, 2);
        assert_eq!(order, vec![a, b]);
        assert_eq!(queues.first_on(b"k"), Some(c));
        assert_eq!(queues.len(), 1);
    }

    #[test]
    fn a_waiter_on_several_keys_leaves_all_queues_when_served() {
        let mut queues: WaitQueues<u32> = WaitQueues::new(16);
        let a = queues
            .block(&keys(&["x", "y", "x"]), Deadline::Never, 0)
            .unwrap();
        let b = queues.block(&keys(&["y"]), Deadline::Never, 0).unwrap();
        assert_eq!(queues.get(a).unwrap().keys, keys(&["x", "y"]));
        assert_eq!(queues.serve(b"x", |_, _| true), 1);
        assert_eq!(queues.first_on(b"x"), None);
        assert_eq!(queues.first_on(b"y"), Some(b));
        assert_eq!(queues.blocked_keys(), 1);
    }

    #[test]
    fn the_first_ready_waiter_is_found_past_others() {
        let mut queues: WaitQueues<&str> = WaitQueues::new(16);
        let _zset = queues
            .block(&keys(&["k"]), Deadline::Never, "zset")
            .unwrap();
        let list = queues
            .block(&keys(&["k"]), Deadline::Never, "list")
            .unwrap();
        let _later = queues
            .block(&keys(&["k"]), Deadline::Never, "list")
            .unwrap();
        assert_eq!(
            queues.first_ready_on(b"k", |w| w.client == "list"),
            Some(list)
        );
        assert_eq!(queues.first_ready_on(b"k", |_| false), None);
        assert_eq!(queues.first_ready_on(b"other", |_| true), None);
    }

    #[test]
    fn a_declined_offer_keeps_the_waiter_first() {
        let mut queues: WaitQueues<u32> = WaitQueues::new(16);
        let a = queues.block(&keys(&["k"]), Deadline::Never, 0).unwrap();
        assert_eq!(queues.serve(b"k", |_, _| false), 0);
        assert_eq!(queues.first_on(b"k"), Some(a));
        assert_eq!(queues.serve(b"other", |_, _| true), 0);
    }

    #[test]
    fn expiry_in_deadline_order_and_never_for_timeout_zero() {
        let mut queues: WaitQueues<u32> = WaitQueues::new(16);
        let late = queues.block(&keys(&["k"]), Deadline::At(300), 0).unwrap();
        let forever = queues.block(&keys(&["k"]), Deadline::Never, 0).unwrap();
        let early = queues.block(&keys(&["j"]), Deadline::At(100), 0).unwrap();
        assert_eq!(queues.next_deadline(), Some(100));
        assert_eq!(queues.expire(99), vec![]);
        let expired = queues.expire(100);
        assert_eq!(expired.len(), 1);
        assert_eq!(expired[0].keys, keys(&["j"]));
        assert_eq!(queues.get(early), None);
        assert_eq!(queues.next_deadline(), Some(300));
        assert_eq!(queues.expire(u64::MAX).len(), 1);
        assert_eq!(queues.get(late), None);
        assert_eq!(queues.next_deadline(), None);
        assert_eq!(queues.first_on(b"k"), Some(forever));
        assert_eq!(queues.first_on(b"j"), None);
    }

    #[test]
    fn disconnect_leaves_nothing_behind() {
        let mut queues: WaitQueues<u32> = WaitQueues::new(16);
        let a = queues
            .block(&keys(&["x", "y"]), Deadline::At(50), 0)
            .unwrap();
        assert!(queues.remove(a).is_some());
        assert!(queues.is_empty());
        assert_eq!(queues.blocked_keys(), 0);
        assert_eq!(queues.next_deadline(), None);
        // A second removal (disconnect after the reply) is a no-op.
        assert_eq!(queues.remove(a), None);
    }

    #[test]
    fn a_closed_connection_loses_all_its_waiters_and_only_those() {
        let mut queues: WaitQueues<u32> = WaitQueues::new(16);
        queues.block(&keys(&["x"]), Deadline::At(10), 7).unwrap();
        let other = queues.block(&keys(&["x"]), Deadline::Never, 8).unwrap();
        queues.block(&keys(&["y"]), Deadline::Never, 7).unwrap();
        assert_eq!(queues.remove_clients(|&client| client == 7), 2);
        assert_eq!(queues.len(), 1);
        assert_eq!(queues.first_on(b"x"), Some(other));
        assert_eq!(queues.first_on(b"y"), None);
        assert_eq!(queues.next_deadline(), None);
    }

    #[test]
    fn capacity_is_a_true_bound() {
        let mut queues: WaitQueues<u32> = WaitQueues::new(2);
        let a = queues.block(&keys(&["k"]), Deadline::Never, 0).unwrap();
        queues.block(&keys(&["k"]), Deadline::Never, 0).unwrap();
        assert_eq!(
            queues.block(&keys(&["k"]), Deadline::Never, 0),
            Err(QueuesFull)
        );
        queues.remove(a);
        assert!(queues.block(&keys(&["k"]), Deadline::Never, 0).is_ok());
    }
}
