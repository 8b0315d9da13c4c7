//! Active expiry: bounded passes over the keys that have a TTL, so keys nobody reads again
//! still get freed.

use super::Store;
use crate::change::ChangeSink;

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SweepOutcome {
    /// Keys with a TTL that were looked at.
    pub examined: usize,
    /// Of those, how many had expired and were removed.
    pub removed: usize,
}

impl SweepOutcome {
    /// Redis's heuristic: if more than a quarter of the sample had expired, there is likely
    /// more to reclaim, so the glue should sweep again soon rather than at the next tick.
    pub fn should_continue(&self) -> bool {
        self.removed * 4 > self.examined
    }
}

impl Store {
    /// Examines up to `max_work` keys that carry a TTL, removing the expired ones (reported to
    /// `sink` as deletions, like lazy expiry).
    ///
    /// A cursor persists between calls, so repeated small sweeps visit every key with a TTL
    /// in turn: a key that expired is reclaimed within `expires / max_work` sweeps, unlike
    /// random sampling which gives no such bound. The glue calls this from a periodic timer
    /// (Redis uses 10 Hz) with a budget that keeps the pause short.
    pub fn sweep<S: ChangeSink>(
        &mut self,
        now_ms: u64,
        max_work: usize,
        sink: &mut S,
    ) -> SweepOutcome {
        let mut outcome = SweepOutcome::default();
        let budget = max_work.min(self.expiring.len());
        // The TTLs left on the keys examined that stay, for INFO's `avg_ttl`.
        let (mut ttl_sum, mut ttl_samples) = (0u64, 0u64);
        while outcome.examined < budget && !self.expiring.is_empty() {
            let slot = self.expiring.cursor % self.expiring.len();
            let Some(key) = self.expiring.key(slot).cloned() else {
                break;
            };
            outcome.examined += 1;
            let at = (self.map.get(&key[..])).and_then(|entry| self.expiring.of(&key, entry));
            if let Some(at) = at {
                if at > now_ms {
                    ttl_sum = ttl_sum.saturating_add(at - now_ms);
                    ttl_samples += 1;
                }
            }
            if at.is_some_and(|at| now_ms > at) {
                // The last key moves into `slot`, so the cursor stays put to examine it next.
                self.remove_expired(&key, sink);
                outcome.removed += 1;
                self.expiring.cursor = slot;
            } else {
                self.expiring.cursor = slot + 1;
            }
        }
        // Redis forgets the estimate when no key has a TTL.
        self.avg_ttl_ms = if self.expiring.is_empty() {
            0
        } else {
            super::stats::running_avg_ttl(self.avg_ttl_ms, ttl_sum, ttl_samples)
        };
        outcome
    }
}
