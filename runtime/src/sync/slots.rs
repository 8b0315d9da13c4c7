//! A keyed slab of one-value result slots: many one-reply waits without an allocation each
//! (the calls in flight on a pipelined connection, each waiting for its reply).

use std::cell::RefCell;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};

/// Names one reservation in a [`Slots`]. A key outlives its reservation harmlessly: once the
/// reservation ended (its value taken or its [`Slot`] dropped), [`Slots::fill`] with the key
/// fails, even after the slot was reserved again for someone else.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SlotKey {
    index: u32,
    generation: u32,
}

enum State<T> {
    Free,
    /// Reserved, no value yet; the task to wake when one comes.
    Waiting(Option<Waker>),
    Filled(T),
}

struct Entry<T> {
    /// Bumped each time the slot is freed, so an old key never matches a new reservation
    /// (it would take 2^32 reservations of the same slot while a filler holds the old key).
    generation: u32,
    state: State<T>,
}

struct Table<T> {
    entries: Vec<Entry<T>>,
    /// Free slots, reused last-freed first (a warm one).
    free: Vec<u32>,
    reserved: usize,
}

/// One-value result slots of one shard, reused without allocating: the allocation-free
/// replacement for one [`oneshot`](super::oneshot) channel per request when one producer (a
/// connection's reader) answers many waiting tasks.
///
/// [`reserve`](Slots::reserve) a slot, hand its [`SlotKey`] to whoever produces the value,
/// and await the [`Slot`]; the producer calls [`fill`](Slots::fill) with the key, which wakes
/// the waiting task. The table grows to the most reservations alive at once and keeps that
/// memory for reuse.
///
/// **Cancel safety:** dropping a [`Slot`] (before or after its value came) frees the slot and
/// drops a value not taken; a later `fill` with its key fails and hands the value back, so
/// a late value is never delivered to the slot's next reservation.
///
/// ```
/// use corewire_runtime::sync::Slots;
/// use std::rc::Rc;
/// # let rt = corewire_runtime::Runtime::builder().shards(1).pin(false).build().unwrap();
/// # rt.run_on(0, || async {
/// let replies = Rc::new(Slots::new());
/// let slot = replies.reserve();
/// let key = slot.key();
/// corewire_runtime::spawn_local({
///     let replies = replies.clone();
///     async move { replies.fill(key, "reply").unwrap() }
/// });
/// assert_eq!(slot.await, "reply");
/// // The reservation ended: the key is stale now.
/// assert_eq!(replies.fill(key, "late"), Err("late"));
/// # }).unwrap();
/// ```
pub struct Slots<T> {
    table: RefCell<Table<T>>,
}

impl<T> Default for Slots<T> {
    fn default() -> Self {
        Slots::new()
    }
}

impl<T> fmt::Debug for Slots<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let table = self.table.borrow();
        f.debug_struct("Slots")
            .field("reserved", &table.reserved)
            .field("capacity", &table.entries.len())
            .finish()
    }
}

impl<T> Slots<T> {
    /// An empty table.
    pub const fn new() -> Slots<T> {
        Slots {
            table: RefCell::new(Table {
                entries: Vec::new(),
                free: Vec::new(),
                reserved: 0,
            }),
        }
    }

    /// An empty table with room for `n` reservations before it allocates.
    pub fn with_capacity(n: usize) -> Slots<T> {
        Slots {
            table: RefCell::new(Table {
                entries: Vec::with_capacity(n),
                free: Vec::with_capacity(n),
                reserved: 0,
            }),
        }
    }

    /// Reserve a slot. Await the returned [`Slot`] for its value; drop it to give up.
    pub fn reserve(&self) -> Slot<'_, T> {
        let mut table = self.table.borrow_mut();
        let index = match table.free.pop() {
            Some(index) => index,
            None => {
                let index = u32::try_from(table.entries.len())
                    .expect("sync::Slots: more than 2^32 reservations alive");
                table.entries.push(Entry {
                    generation: 0,
                    state: State::Free,
                });
                index
            }
        };
        table.reserved += 1;
        let entry = &mut table.entries[index as usize];
        entry.state = State::Waiting(None);
        let key = SlotKey {
            index,
            generation: entry.generation,
        };
        Slot {
            slots: self,
            key,
            done: false,
        }
    }

    /// Give reservation `key` its value and wake its task. Hands the value back when the
    /// reservation has ended (its [`Slot`] was dropped or already took a value) or was
    /// already filled: a value is delivered at most once, and only to the reservation the
    /// key names.
    pub fn fill(&self, key: SlotKey, value: T) -> Result<(), T> {
        let waker = {
            let mut table = self.table.borrow_mut();
            let Some(entry) = table.entries.get_mut(key.index as usize) else {
                return Err(value);
            };
            if entry.generation != key.generation {
                return Err(value);
            }
            match std::mem::replace(&mut entry.state, State::Free) {
                State::Waiting(waker) => {
                    entry.state = State::Filled(value);
                    waker
                }
                other => {
                    entry.state = other;
                    return Err(value);
                }
            }
        };
        if let Some(w) = waker {
            w.wake();
        }
        Ok(())
    }

    /// Whether `key` names a reservation that is alive and not filled yet.
    pub fn is_waiting(&self, key: SlotKey) -> bool {
        let table = self.table.borrow();
        table
            .entries
            .get(key.index as usize)
            .is_some_and(|e| e.generation == key.generation && matches!(e.state, State::Waiting(_)))
    }

    /// Reservations alive now (filled or not).
    pub fn reserved(&self) -> usize {
        self.table.borrow().reserved
    }

    /// The value of reservation `key` if it came: takes it, ending the reservation. Otherwise
    /// remembers `cx`'s waker for [`fill`](Slots::fill).
    fn poll_take(&self, key: SlotKey, cx: &mut Context<'_>) -> Poll<T> {
        let mut table = self.table.borrow_mut();
        let entry = &mut table.entries[key.index as usize];
        debug_assert_eq!(entry.generation, key.generation);
        match &mut entry.state {
            State::Waiting(waker) => {
                match waker {
                    Some(w) if w.will_wake(cx.waker()) => {}
                    _ => *waker = Some(cx.waker().clone()),
                }
                Poll::Pending
            }
            State::Filled(_) => {
                let State::Filled(value) = release(&mut table, key.index) else {
                    unreachable!("the state was just matched")
                };
                Poll::Ready(value)
            }
            State::Free => unreachable!("sync::Slots: a live Slot's entry is free"),
        }
    }

    /// Ends reservation `key`, dropping a value not taken (outside the borrow: its drop may
    /// use this table).
    fn cancel(&self, key: SlotKey) {
        let state = {
            let mut table = self.table.borrow_mut();
            debug_assert_eq!(table.entries[key.index as usize].generation, key.generation);
            release(&mut table, key.index)
        };
        drop(state);
    }
}

/// Frees slot `index` and returns what it held.
fn release<T>(table: &mut Table<T>, index: u32) -> State<T> {
    let entry = &mut table.entries[index as usize];
    entry.generation = entry.generation.wrapping_add(1);
    let state = std::mem::replace(&mut entry.state, State::Free);
    table.free.push(index);
    table.reserved -= 1;
    state
}

/// One reservation in a [`Slots`]: a future of its value. Dropped before the value was
/// taken, it frees the slot (see [`Slots`]'s cancel safety). Completes once; polling it again
/// after that panics.
#[must_use = "a slot waits for nothing unless awaited"]
pub struct Slot<'a, T> {
    slots: &'a Slots<T>,
    key: SlotKey,
    /// The value was taken (the reservation ended).
    done: bool,
}

impl<T> Slot<'_, T> {
    /// The key that [`Slots::fill`] takes for this reservation.
    pub fn key(&self) -> SlotKey {
        self.key
    }
}

impl<T> Future for Slot<'_, T> {
    type Output = T;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<T> {
        let this = self.get_mut();
        assert!(!this.done, "sync::Slot polled after it completed");
        let value = std::task::ready!(this.slots.poll_take(this.key, cx));
        this.done = true;
        Poll::Ready(value)
    }
}

impl<T> Drop for Slot<'_, T> {
    fn drop(&mut self) {
        if !self.done {
            self.slots.cancel(self.key);
        }
    }
}

impl<T> fmt::Debug for Slot<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Slot")
            .field("key", &self.key)
            .field("done", &self.done)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sync::test_util::{poll, CountingWaker};
    use std::cell::Cell;
    use std::rc::Rc;

    #[test]
    fn fill_wakes_the_waiting_task_once_and_the_value_is_taken() {
        let slots = Slots::new();
        let mut slot = slots.reserve();
        let w = CountingWaker::new();
        assert!(poll(&mut slot, &w).is_pending());
        assert!(poll(&mut slot, &w).is_pending());
        assert!(slots.is_waiting(slot.key()));
        slots.fill(slot.key(), 7).unwrap();
        assert_eq!(w.count(), 1);
        assert!(!slots.is_waiting(slot.key()));
        assert_eq!(poll(&mut slot, &w), Poll::Ready(7));
        assert_eq!(slots.reserved(), 0);
        drop(slot);
        assert_eq!(slots.reserved(), 0);
    }

    #[test]
    fn a_value_filled_before_the_first_poll_is_ready() {
        let slots = Slots::new();
        let mut slot = slots.reserve();
        slots.fill(slot.key(), "v").unwrap();
        assert_eq!(poll(&mut slot, &CountingWaker::new()), Poll::Ready("v"));
    }

    #[test]
    fn a_slot_is_filled_at_most_once() {
        let slots = Slots::new();
        let mut slot = slots.reserve();
        slots.fill(slot.key(), 1).unwrap();
        assert_eq!(slots.fill(slot.key(), 2), Err(2));
        assert_eq!(poll(&mut slot, &CountingWaker::new()), Poll::Ready(1));
        assert_eq!(slots.fill(slot.key(), 3), Err(3));
    }

    #[test]
    fn dropping_a_waiting_slot_frees_it_and_refuses_its_value() {
        let slots = Slots::new();
        let mut slot = slots.reserve();
        let key = slot.key();
        let w = CountingWaker::new();
        assert!(poll(&mut slot, &w).is_pending());
        drop(slot);
        assert_eq!(slots.reserved(), 0);
        assert!(!slots.is_waiting(key));
        assert_eq!(slots.fill(key, 5), Err(5));
        assert_eq!(w.count(), 0);
    }

    #[test]
    fn a_late_value_never_reaches_the_slots_next_reservation() {
        let slots = Slots::new();
        let old = slots.reserve();
        let old_key = old.key();
        drop(old);
        // The same slot, reserved again (last freed, first reused).
        let mut new = slots.reserve();
        assert_eq!(new.key().index, old_key.index);
        assert_ne!(new.key(), old_key);
        let w = CountingWaker::new();
        assert!(poll(&mut new, &w).is_pending());
        assert_eq!(slots.fill(old_key, "late"), Err("late"));
        assert_eq!(w.count(), 0);
        assert!(poll(&mut new, &w).is_pending());
        slots.fill(new.key(), "mine").unwrap();
        assert_eq!(poll(&mut new, &w), Poll::Ready("mine"));
    }

    #[test]
    fn a_key_whose_value_was_taken_is_stale() {
        let slots = Slots::new();
        let mut first = slots.reserve();
        let key = first.key();
        slots.fill(key, 1).unwrap();
        assert_eq!(poll(&mut first, &CountingWaker::new()), Poll::Ready(1));
        let mut second = slots.reserve();
        assert_eq!(slots.fill(key, 2), Err(2));
        slots.fill(second.key(), 3).unwrap();
        assert_eq!(poll(&mut second, &CountingWaker::new()), Poll::Ready(3));
    }

    /// Counts its drops, to check a value is dropped exactly once wherever it ends up.
    struct Tracked(Rc<Cell<usize>>);

    impl Drop for Tracked {
        fn drop(&mut self) {
            self.0.set(self.0.get() + 1);
        }
    }

    #[test]
    fn a_value_never_taken_is_dropped_with_its_slot() {
        let drops = Rc::new(Cell::new(0));
        let slots = Slots::new();
        let slot = slots.reserve();
        assert!(slots.fill(slot.key(), Tracked(drops.clone())).is_ok());
        assert_eq!(drops.get(), 0);
        drop(slot);
        assert_eq!(drops.get(), 1);
        assert_eq!(slots.reserved(), 0);
    }

    #[test]
    fn the_waker_of_the_last_poll_is_woken() {
        let slots = Slots::new();
        let mut slot = slots.reserve();
        let (a, b) = (CountingWaker::new(), CountingWaker::new());
        assert!(poll(&mut slot, &a).is_pending());
        assert!(poll(&mut slot, &b).is_pending());
        slots.fill(slot.key(), ()).unwrap();
        assert_eq!((a.count(), b.count()), (0, 1));
    }

    #[test]
    fn many_reservations_in_any_order_reuse_the_table() {
        let slots = Slots::new();
        let w = CountingWaker::new();
        for round in 0..4u32 {
            let mut waiting: Vec<_> = (0..64).map(|_| slots.reserve()).collect();
            for slot in &mut waiting {
                assert!(poll(slot, &w).is_pending());
            }
            assert_eq!(slots.reserved(), 64);
            // Fill the odd ones in reverse, drop every fourth before its value comes.
            let keys: Vec<_> = waiting.iter().map(Slot::key).collect();
            for (i, key) in keys.iter().enumerate().rev() {
                if i % 2 == 1 {
                    slots.fill(*key, round * 1000 + i as u32).unwrap();
                }
            }
            let mut kept = Vec::new();
            for (i, slot) in waiting.into_iter().enumerate() {
                if i % 4 == 0 {
                    drop(slot);
                } else {
                    kept.push((i, slot));
                }
            }
            for &(i, _) in &kept {
                if i % 2 == 0 {
                    slots.fill(keys[i], round * 1000 + i as u32).unwrap();
                }
            }
            for (i, mut slot) in kept {
                assert_eq!(poll(&mut slot, &w), Poll::Ready(round * 1000 + i as u32));
            }
            for (i, key) in keys.iter().enumerate() {
                assert_eq!(slots.fill(*key, 0), Err(0), "slot {i} of round {round}");
            }
            assert_eq!(slots.reserved(), 0);
            assert_eq!(slots.table.borrow().entries.len(), 64);
        }
    }
}
