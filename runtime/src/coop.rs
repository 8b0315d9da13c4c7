//! Per-connection fairness budgets: a connection handles at most `max_messages` messages and
//! `max_bytes` bytes per round, then yields so the rest of its shard (other connections,
//! pollers, the ring) runs before it continues. Like tokio's coop budget, but counted in the
//! units a network server cares about — and, as in tokio, charged in the lowest layer:
//! every frame transport's `Connection::recv` charges each message it hands up and yields
//! when the round is spent, so no service can forget to. Byte-stream glue that parses its own
//! messages (the KV store's RESP connection, the raw echo examples) charges the same
//! [`RoundBudget`] per message it parses.

use std::future::poll_fn;
use std::task::{Context, Poll};

use crate::shard::context;

/// Limits for one round of one connection. `None` means unlimited.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Budget {
    /// Messages handed up per round, at most.
    pub max_messages: Option<u32>,
    /// Bytes handed up per round, at most (a message that crosses it still completes).
    pub max_bytes: Option<usize>,
}

impl Budget {
    /// A budget of these limits (`None`: unlimited).
    pub const fn new(max_messages: Option<u32>, max_bytes: Option<usize>) -> Budget {
        Budget {
            max_messages,
            max_bytes,
        }
    }

    /// No limits.
    pub const UNLIMITED: Budget = Budget {
        max_messages: None,
        max_bytes: None,
    };

    /// The default budget, used by every listener not given one: 32 messages (SPDK's NVMe/TCP
    /// figure) or 256 KiB per round. This is the one place to change it; the fairness suite
    /// (`benches/run.sh fairness`) measures the trade-off per
    /// budget and BENCHMARKS.md ("Fairness") records the figures and why this value.
    pub const DEFAULT: Budget = Budget {
        max_messages: Some(32),
        max_bytes: Some(256 * 1024),
    };

    /// At most `n` messages per round (at least 1), bytes unlimited.
    pub fn messages(n: u32) -> Budget {
        Budget {
            max_messages: Some(n.max(1)),
            max_bytes: None,
        }
    }

    /// At most `n` bytes per round too (at least 1).
    pub fn with_bytes(mut self, n: usize) -> Budget {
        self.max_bytes = Some(n.max(1));
        self
    }

    /// Whether neither messages nor bytes are limited.
    pub fn is_unlimited(&self) -> bool {
        self.max_messages.is_none() && self.max_bytes.is_none()
    }
}

impl Default for Budget {
    /// [`Budget::DEFAULT`].
    fn default() -> Budget {
        Budget::DEFAULT
    }
}

/// What a connection has used of its budget in the current round. A round ends when the
/// connection yields (budget spent) or has to wait for I/O (it gave the shard a turn anyway).
#[derive(Debug)]
pub struct RoundBudget {
    budget: Budget,
    messages: u32,
    bytes: usize,
    /// A yield is under way: the next poll starts a new round.
    yielding: bool,
    /// The connection waited for I/O since it last handed up a message: the next message came
    /// with new bytes, whose arrival is when the task was woken.
    waited: bool,
    /// The shard's [`message_clock`] when the bytes of the last message charged arrived.
    arrived_at: u64,
}

impl RoundBudget {
    /// A fresh round under `budget`.
    pub fn new(budget: Budget) -> RoundBudget {
        RoundBudget {
            budget,
            messages: 0,
            bytes: 0,
            yielding: false,
            waited: true,
            arrived_at: 0,
        }
    }

    /// The budget this round is counted against.
    pub fn budget(&self) -> Budget {
        self.budget
    }

    /// Count one message of `bytes`; true when the round's budget is used up. It also ticks
    /// the shard's [`message_clock`] and stamps the message's arrival ([`Self::arrived_at`]).
    pub fn charge(&mut self, bytes: usize) -> bool {
        self.charge_units(1, bytes)
    }

    /// As [`Self::charge`] for one message that weighs `units` messages of the budget: a
    /// protocol whose messages vary widely in cost (a KV store's MGET of 100 keys against a
    /// GET) charges them by their work, so the budget bounds work, not message count.
    pub fn charge_units(&mut self, units: u32, bytes: usize) -> bool {
        if std::mem::take(&mut self.waited) {
            self.arrived_at = woken_at();
        }
        tick_message_clock();
        self.messages = self.messages.saturating_add(units.max(1));
        self.bytes = self.bytes.saturating_add(bytes);
        self.exhausted()
    }

    /// Messages (units) charged in the current round so far: at most the budget's
    /// `max_messages` once a transport yields on exhaustion (what the RDMA transport's
    /// per-round counter reports).
    pub fn round_messages(&self) -> u32 {
        self.messages
    }

    /// Whether this round has used its budget (time to yield).
    pub fn exhausted(&self) -> bool {
        self.budget.max_messages.is_some_and(|m| self.messages >= m)
            || self.budget.max_bytes.is_some_and(|b| self.bytes >= b)
    }

    /// Start a new round without yielding (the connection had to wait for I/O anyway).
    pub fn reset(&mut self) {
        self.new_round();
        self.waited = true;
    }

    fn new_round(&mut self) {
        self.messages = 0;
        self.bytes = 0;
    }

    /// The shard's [`message_clock`] when the bytes of the last message charged arrived: when
    /// the connection's task was woken by the I/O that brought them (its completion reaped).
    /// Messages that came in one read share it. [`message_clock`] minus this, when the
    /// message's reply is queued, is its head-of-line count ([`crate::head_of_line`]).
    pub fn arrived_at(&self) -> u64 {
        self.arrived_at
    }

    /// For a transport's `recv`, before handing up the next message: `Ready` while the round
    /// has budget left; once it is spent, counts `budget_exhausted`, yields to the rest of
    /// the shard (the task runs again after the next ring reap) and starts a new round.
    pub fn poll_proceed(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        if self.yielding {
            self.yielding = false;
            self.new_round();
            return Poll::Ready(());
        }
        if !self.exhausted() {
            return Poll::Ready(());
        }
        self.yielding = true;
        match context::try_current() {
            Some(ctx) => {
                ctx.remote.stats.budget_exhausted.incr();
                ctx.executor.defer(cx.waker().clone());
            }
            None => cx.waker().wake_by_ref(),
        }
        Poll::Pending
    }

    /// If the budget is used up: count it, yield to the rest of the shard, start a new round.
    pub async fn yield_if_exhausted(&mut self) {
        poll_fn(|cx| self.poll_proceed(cx)).await
    }
}

/// Messages handed up by every connection on the current shard so far (each
/// [`RoundBudget::charge`] ticks it); 0 off a shard. A clock that counts work, not time: the
/// difference between two readings is how many messages the shard handled in between, however
/// fast or slow the CPU was.
pub fn message_clock() -> u64 {
    context::try_with_executor(|e| e.messages()).unwrap_or(0)
}

fn tick_message_clock() {
    context::try_with_executor(|e| e.tick_messages());
}

/// The [`message_clock`] when the task now running was woken (or spawned); 0 off a shard.
pub fn woken_at() -> u64 {
    context::try_with_executor(|e| e.woken_at()).unwrap_or(0)
}

/// When the poll of the task now running began, as the shard read it for its stall detector
/// (on by default): a start time that costs no clock read. `None` with the detector off, off
/// a shard, or outside a task's poll.
pub fn poll_started_at() -> Option<std::time::Instant> {
    context::try_with_executor(|e| e.poll_started()).flatten()
}

/// Told when a task's poll ends (see [`at_poll_end`]).
pub trait PollEnd {
    /// The poll that began at `started` ended at `ended`.
    fn poll_ended(&self, started: std::time::Instant, ended: std::time::Instant);
}

/// Tell `hook` when the poll of the task now running ends, with the time the shard's stall
/// detector reads then anyway: work finished during a poll can be timed to the poll's end
/// without a clock read of its own. False where polls are not timed (the detector off, off a
/// shard, outside a task's poll): read the clock then.
pub fn at_poll_end(hook: std::rc::Rc<dyn PollEnd>) -> bool {
    context::try_with_executor(|e| e.at_poll_end(hook)).unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unlimited_never_exhausts() {
        let mut r = RoundBudget::new(Budget::UNLIMITED);
        for _ in 0..100_000 {
            assert!(!r.charge(1 << 20));
        }
    }

    #[test]
    fn message_limit() {
        let mut r = RoundBudget::new(Budget::messages(4));
        assert!(!r.charge(1));
        assert!(!r.charge(1));
        assert!(!r.charge(1));
        assert!(r.charge(1));
        r.reset();
        assert!(!r.exhausted());
    }

    #[test]
    fn a_spent_round_yields_once_then_starts_over() {
        use std::task::Waker;
        let mut cx = Context::from_waker(Waker::noop());
        let mut r = RoundBudget::new(Budget::messages(2));
        assert!(r.poll_proceed(&mut cx).is_ready());
        r.charge(1);
        assert!(r.poll_proceed(&mut cx).is_ready());
        r.charge(1);
        assert!(r.poll_proceed(&mut cx).is_pending(), "spent: yield");
        assert!(r.poll_proceed(&mut cx).is_ready(), "after the yield");
        assert!(!r.exhausted(), "a new round");
    }

    #[test]
    fn byte_limit_hits_first() {
        let mut r = RoundBudget::new(Budget::messages(100).with_bytes(1000));
        assert!(!r.charge(600));
        assert!(r.charge(600));
        let mut r = RoundBudget::new(Budget::messages(10));
        assert!(!r.charge_units(9, 1));
        assert!(r.charge_units(1, 1), "units add up to the message budget");
        r.reset();
        assert!(r.charge_units(100, 1), "one heavy message spends a round");
    }
}
