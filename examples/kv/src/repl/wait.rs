//! WAIT's bookkeeping (which clients wait for which offset, answered when enough replicas
//! acknowledged it or at their deadline) and min-replicas-to-write's count of good
//! replicas.

/// Replicas whose last ACK is at most `max_lag_s` seconds old at `now_ms` (Redis's
/// `repl_good_slaves_count`); `ack_ms` are the times of each replica's last ACK.
pub fn good_replicas(ack_ms: impl IntoIterator<Item = u64>, now_ms: u64, max_lag_s: u64) -> usize {
    ack_ms
        .into_iter()
        .filter(|&at| now_ms.saturating_sub(at) / 1000 <= max_lag_s)
        .count()
}

/// How many of the acknowledged offsets reached `target`.
pub fn acked(acks: &[u64], target: u64) -> usize {
    acks.iter().filter(|&&ack| ack >= target).count()
}

/// What a WAIT waits for: the single stream's offset, and each shard's stream offset
/// (empty, or zeros, where no shard streams on its own) when it arrived.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Target {
    pub offset: u64,
    pub shards: Vec<u64>,
}

impl From<u64> for Target {
    fn from(offset: u64) -> Target {
        Target {
            offset,
            shards: Vec::new(),
        }
    }
}

/// What the replicas acknowledged: a single-stream replica's offset each, and per replica
/// on shard links, its links' offsets by shard.
#[derive(Debug, Clone, Copy, Default)]
pub struct Acks<'a> {
    pub single: &'a [u64],
    pub shard_links: &'a [Vec<u64>],
}

impl<'a> From<&'a [u64]> for Acks<'a> {
    fn from(single: &'a [u64]) -> Acks<'a> {
        Acks {
            single,
            shard_links: &[],
        }
    }
}

impl Acks<'_> {
    /// The replicas that have `target`: a replica on shard links only when every one of
    /// its links acknowledged its shard's offset (see `shards::covers`).
    pub fn count(&self, target: &Target) -> usize {
        let shards = target.shards.len();
        let covering = (self.shard_links.iter()).filter(|acks| {
            acks.len() == shards && acks.iter().zip(&target.shards).all(|(a, t)| a >= t)
        });
        acked(self.single, target.offset) + covering.count()
    }
}

#[derive(Debug)]
struct Waiter<T> {
    token: T,
    target: Target,
    wanted: usize,
    /// Unix ms; `None`: no timeout.
    deadline: Option<u64>,
}

/// Clients blocked in WAIT, each with the offset its writes reached.
#[derive(Debug)]
pub struct WaitQueue<T> {
    waiters: Vec<Waiter<T>>,
}

impl<T> Default for WaitQueue<T> {
    fn default() -> Self {
        WaitQueue {
            waiters: Vec::new(),
        }
    }
}

impl<T> WaitQueue<T> {
    /// `WAIT wanted timeout` for writes up to `target`: `Err(count)` when it is answered at
    /// once (enough replicas already acknowledged it), else it waits (`deadline` in Unix
    /// ms, `None` for timeout 0).
    pub fn add(
        &mut self,
        token: T,
        target: impl Into<Target>,
        wanted: usize,
        deadline: Option<u64>,
        acks: Acks<'_>,
    ) -> Result<(), (T, usize)> {
        let target = target.into();
        let count = acks.count(&target);
        if count >= wanted {
            return Err((token, count));
        }
        self.waiters.push(Waiter {
            token,
            target,
            wanted,
            deadline,
        });
        Ok(())
    }

    pub fn len(&self) -> usize {
        self.waiters.len()
    }

    pub fn is_empty(&self) -> bool {
        self.waiters.is_empty()
    }

    /// The waiters answered now, with their counts: enough ACKs arrived, or the deadline
    /// passed.
    pub fn ready(&mut self, acks: Acks<'_>, now_ms: u64) -> Vec<(T, usize)> {
        let mut out = Vec::new();
        let mut i = 0;
        while i < self.waiters.len() {
            let waiter = &self.waiters[i];
            let count = acks.count(&waiter.target);
            if count >= waiter.wanted || waiter.deadline.is_some_and(|d| now_ms >= d) {
                let waiter = self.waiters.swap_remove(i);
                out.push((waiter.token, count));
            } else {
                i += 1;
            }
        }
        out
    }

    /// The soonest deadline of those waiting.
    pub fn next_deadline(&self) -> Option<u64> {
        self.waiters.iter().filter_map(|w| w.deadline).min()
    }

    /// Drops the waiters `gone` says went away (their clients closed).
    pub fn retain(&mut self, mut keep: impl FnMut(&T) -> bool) {
        self.waiters.retain(|w| keep(&w.token));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_at_once_when_enough_acked() {
        let mut queue = WaitQueue::default();
        assert_eq!(
            queue.add("a", 10, 2, None, (&[10, 12, 3][..]).into()),
            Err(("a", 2))
        );
        assert_eq!(queue.add("b", 10, 0, None, Acks::default()), Err(("b", 0)));
        assert!(queue.is_empty());
    }

    #[test]
    fn waits_for_acks_or_its_deadline() {
        let mut queue = WaitQueue::default();
        queue
            .add("acks", 10, 2, None, (&[5, 5][..]).into())
            .unwrap();
        queue
            .add("timeout", 20, 1, Some(1_000), (&[5, 5][..]).into())
            .unwrap();
        assert_eq!(queue.len(), 2);
        assert_eq!(queue.next_deadline(), Some(1_000));
        assert!(queue.ready((&[10, 5][..]).into(), 500).is_empty());
        assert_eq!(queue.ready((&[10, 11][..]).into(), 600), vec![("acks", 2)]);
        assert_eq!(
            queue.ready((&[10, 11][..]).into(), 1_000),
            vec![("timeout", 0)]
        );
        assert!(queue.is_empty());
    }

    #[test]
    fn forgets_closed_clients() {
        let mut queue = WaitQueue::default();
        queue.add(1, 10, 1, None, Acks::default()).unwrap();
        queue.add(2, 10, 1, None, Acks::default()).unwrap();
        queue.retain(|&t| t != 1);
        assert_eq!(queue.ready((&[10][..]).into(), 0), vec![(2, 1)]);
    }

    #[test]
    fn a_replica_on_shard_links_counts_once_every_link_has_its_shards_offset() {
        let target = Target {
            offset: 50,
            shards: vec![10, 0, 7],
        };
        let links = [vec![10, 3, 6], vec![12, 0, 7], vec![10, 0]];
        let acks = Acks {
            single: &[50, 49],
            shard_links: &links,
        };
        // One single-stream replica, and the one replica whose every link has its offset
        // (a replica missing a link never counts).
        assert_eq!(acks.count(&target), 2);
        let mut queue = WaitQueue::default();
        queue.add("w", target.clone(), 3, None, acks).unwrap();
        let links = [vec![10, 3, 7], vec![12, 0, 7]];
        let acks = Acks {
            single: &[50],
            shard_links: &links,
        };
        assert_eq!(queue.ready(acks, 0), vec![("w", 3)]);
    }

    #[test]
    fn good_replicas_acked_within_the_lag() {
        assert_eq!(good_replicas([10_000, 8_000, 3_000], 10_500, 2), 2);
        assert_eq!(good_replicas([10_000], 13_999, 3), 1);
        assert_eq!(good_replicas([10_000], 14_000, 3), 0);
        assert_eq!(good_replicas([], 0, 10), 0);
    }
}
