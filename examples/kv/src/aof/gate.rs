use std::collections::VecDeque;

use super::Lsn;

/// Replies (or anything else) waiting for the log to become durable up to their record.
///
/// Records are appended in order, so items arrive with non-decreasing LSNs and leave from the
/// front. An item held with a smaller LSN than its predecessor simply waits for that one:
/// never released early, possibly a little late.
#[derive(Debug)]
pub struct DurabilityGate<T> {
    held: VecDeque<(Lsn, T)>,
}

impl<T> Default for DurabilityGate<T> {
    fn default() -> Self {
        DurabilityGate {
            held: VecDeque::new(),
        }
    }
}

impl<T> DurabilityGate<T> {
    /// Holds `item` until the log is durable through `lsn`.
    pub fn hold(&mut self, lsn: Lsn, item: T) {
        self.held.push_back((lsn, item));
    }

    /// Releases, in order, every item whose record is now durable.
    pub fn release(&mut self, durable: Lsn) -> impl Iterator<Item = T> + '_ {
        std::iter::from_fn(move || {
            if self.held.front().is_some_and(|(lsn, _)| *lsn <= durable) {
                self.held.pop_front().map(|(_, item)| item)
            } else {
                None
            }
        })
    }

    pub fn len(&self) -> usize {
        self.held.len()
    }

    pub fn is_empty(&self) -> bool {
        self.held.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn releases_in_order_up_to_the_durable_point() {
        let mut gate = DurabilityGate::default();
        gate.hold(10, "a");
        gate.hold(20, "b");
        gate.hold(20, "c");
        gate.hold(30, "d");
        assert_eq!(gate.release(5).count(), 0);
        assert_eq!(gate.release(20).collect::<Vec<_>>(), vec!["a", "b", "c"]);
        assert_eq!(gate.len(), 1);
        assert_eq!(gate.release(100).collect::<Vec<_>>(), vec!["d"]);
        assert!(gate.is_empty());
    }
}
