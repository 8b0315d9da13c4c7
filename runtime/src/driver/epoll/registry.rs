//! The readiness state of every descriptor in the shard's epoll set, and the tasks waiting
//! on it: a pure state machine (no syscalls), so its rules are unit-tested on their own.
//!
//! The set is edge-triggered (EPOLLET): a descriptor is added once, with every interest, and
//! the kernel reports each change of its state (new data, room to send, the peer's close)
//! once. The registry remembers what was reported as bits; an operation that gets
//! `WouldBlock` clears its bit (nothing more to take until the next report) and waits. So no
//! wake-up is lost: the bit is cleared only after the syscall that found nothing, and any
//! report after that syscall arrives at a later `epoll_wait`, which sets the bit again and
//! wakes the waiter. Level-triggered would report a descriptor nobody reads (a backpressured
//! connection) on every wait, or cost an `epoll_ctl` per wait to disarm it; edge-triggered
//! costs one `epoll_ctl` per descriptor's life.
//!
//! The peer's close and errors are sticky (`READ_CLOSED`, `WRITE_CLOSED`): once reported,
//! the descriptor stays ready in that direction, so a receive that emptied the socket just
//! before the end still finds the end.

use std::os::fd::RawFd;
use std::task::Waker;

use slab::Slab;

/// Which readiness an operation waits for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Interest {
    /// Data to receive, a connection to accept, the peer's end.
    Read,
    /// Room to send, a connect that finished.
    Write,
}

const READABLE: u8 = 1;
const WRITABLE: u8 = 2;
const READ_CLOSED: u8 = 4;
const WRITE_CLOSED: u8 = 8;

impl Interest {
    /// The bits that make a descriptor ready for this interest.
    fn ready_mask(self) -> u8 {
        match self {
            Interest::Read => READABLE | READ_CLOSED,
            Interest::Write => WRITABLE | WRITE_CLOSED,
        }
    }

    /// The bit a `WouldBlock` clears (the closed bits stay).
    fn clear_mask(self) -> u8 {
        match self {
            Interest::Read => READABLE,
            Interest::Write => WRITABLE,
        }
    }
}

/// The readiness bits an epoll event reports.
pub(crate) fn bits_of(events: u32) -> u8 {
    let mut bits = 0;
    if events & libc::EPOLLIN as u32 != 0 {
        bits |= READABLE;
    }
    if events & libc::EPOLLOUT as u32 != 0 {
        bits |= WRITABLE;
    }
    if events & libc::EPOLLRDHUP as u32 != 0 {
        bits |= READABLE | READ_CLOSED;
    }
    if events & libc::EPOLLHUP as u32 != 0 {
        bits |= READABLE | WRITABLE | READ_CLOSED | WRITE_CLOSED;
    }
    if events & libc::EPOLLERR as u32 != 0 {
        // The error is taken by the next syscall in either direction.
        bits |= READABLE | WRITABLE;
    }
    bits
}

struct Entry {
    fd: RawFd,
    generation: u32,
    ready: u8,
    readers: Vec<(u32, Waker)>,
    writers: Vec<(u32, Waker)>,
}

impl Entry {
    fn waiters(&mut self, interest: Interest) -> &mut Vec<(u32, Waker)> {
        match interest {
            Interest::Read => &mut self.readers,
            Interest::Write => &mut self.writers,
        }
    }
}

/// The shard's registrations, by token (slab key in the low 32 bits, a generation in the
/// high 32: a token of a registration that is gone never reaches its slot's next owner).
#[derive(Default)]
pub(crate) struct Registry {
    entries: Slab<Entry>,
    generation: u32,
    next_waiter: u32,
    /// Waiters across every entry (the driver's `in_flight`).
    waiting: usize,
}

impl Registry {
    /// Add `fd`, not ready for anything until an event says so; its token.
    pub(crate) fn insert(&mut self, fd: RawFd) -> u64 {
        self.generation = self.generation.wrapping_add(1);
        let generation = self.generation;
        let key = self.entries.insert(Entry {
            fd,
            generation,
            ready: 0,
            readers: Vec::new(),
            writers: Vec::new(),
        });
        key as u64 | u64::from(generation) << 32
    }

    fn get(&mut self, token: u64) -> Option<&mut Entry> {
        let (key, generation) = ((token & 0xffff_ffff) as usize, (token >> 32) as u32);
        self.entries
            .get_mut(key)
            .filter(|e| e.generation == generation)
    }

    /// Drop registration `token`: its descriptor (to take out of the epoll set), waking
    /// whoever still waits on it (they find the descriptor gone when they try).
    pub(crate) fn remove(&mut self, token: u64) -> Option<RawFd> {
        let entry = self.get(token)?;
        let fd = entry.fd;
        let waiters: Vec<(u32, Waker)> = entry
            .readers
            .drain(..)
            .chain(entry.writers.drain(..))
            .collect();
        self.waiting -= waiters.len();
        self.entries.remove((token & 0xffff_ffff) as usize);
        for (_, w) in waiters {
            w.wake();
        }
        Some(fd)
    }

    /// An epoll event for `token`: remember what it reports and wake the tasks waiting for
    /// it. Returns how many it woke (none for a token that is gone, and for the usual
    /// report of room to send that nobody waited for).
    pub(crate) fn event(&mut self, token: u64, events: u32) -> usize {
        let bits = bits_of(events);
        let Some(entry) = self.get(token) else {
            return 0;
        };
        entry.ready |= bits;
        let mut woken = 0;
        for interest in [Interest::Read, Interest::Write] {
            if bits & interest.ready_mask() != 0 {
                for (_, w) in entry.waiters(interest).drain(..) {
                    w.wake();
                    woken += 1;
                }
            }
        }
        self.waiting -= woken;
        woken
    }

    /// Whether `token` is ready for `interest`. If not, the task of `waker` waits for it:
    /// `waiter` names its place among the waiters (0: none yet; given one here).
    pub(crate) fn poll_ready(
        &mut self,
        token: u64,
        interest: Interest,
        waiter: &mut u32,
        waker: &Waker,
    ) -> bool {
        if *waiter == 0 {
            self.next_waiter = self.next_waiter.wrapping_add(1).max(1);
        }
        let fresh = self.next_waiter;
        let Some(entry) = self.get(token) else {
            // Gone: let the operation try and find out.
            return true;
        };
        let ready = entry.ready & interest.ready_mask() != 0;
        let waiters = entry.waiters(interest);
        let at = waiters
            .iter()
            .position(|(id, _)| *waiter != 0 && *id == *waiter);
        match (ready, at) {
            (true, Some(i)) => {
                waiters.swap_remove(i);
                self.waiting -= 1;
            }
            (true, None) => {}
            (false, Some(i)) => {
                if !waiters[i].1.will_wake(waker) {
                    waiters[i].1 = waker.clone();
                }
            }
            (false, None) => {
                if *waiter == 0 {
                    *waiter = fresh;
                }
                // Usually the only waiter: room for one, not the four a first push reserves
                // (an idle connection's whole cost here).
                waiters.reserve_exact(1);
                waiters.push((*waiter, waker.clone()));
                self.waiting += 1;
            }
        }
        ready
    }

    /// An operation found nothing to do (`WouldBlock`): `token` is no longer ready for
    /// `interest` until the next event says so.
    pub(crate) fn clear(&mut self, token: u64, interest: Interest) {
        if let Some(entry) = self.get(token) {
            entry.ready &= !interest.clear_mask();
        }
    }

    /// The operation that waited as `waiter` went away.
    pub(crate) fn forget_waiter(&mut self, token: u64, interest: Interest, waiter: u32) {
        let Some(entry) = self.get(token) else {
            return;
        };
        let waiters = entry.waiters(interest);
        if let Some(i) = waiters.iter().position(|(id, _)| *id == waiter) {
            waiters.swap_remove(i);
            self.waiting -= 1;
        }
    }

    /// Tasks waiting for readiness.
    pub(crate) fn waiting(&self) -> usize {
        self.waiting
    }

    /// Registrations.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    use std::task::Wake;

    use super::*;

    struct Count(AtomicUsize);

    impl Wake for Count {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    fn waker() -> (Arc<Count>, Waker) {
        let c = Arc::new(Count(AtomicUsize::new(0)));
        (c.clone(), Waker::from(c))
    }

    const IN: u32 = libc::EPOLLIN as u32;
    const OUT: u32 = libc::EPOLLOUT as u32;

    #[test]
    fn a_new_registration_waits_for_its_first_event() {
        let mut r = Registry::default();
        let t = r.insert(5);
        let (woken, w) = waker();
        let mut id = 0;
        assert!(!r.poll_ready(t, Interest::Read, &mut id, &w));
        assert_ne!(id, 0);
        assert_eq!(r.waiting(), 1);
        assert_eq!(r.event(t, IN), 1);
        assert_eq!(woken.0.load(Ordering::SeqCst), 1);
        assert_eq!(r.waiting(), 0);
        assert!(r.poll_ready(t, Interest::Read, &mut id, &w));
    }

    #[test]
    fn would_block_clears_and_the_next_event_sets_again() {
        let mut r = Registry::default();
        let t = r.insert(5);
        r.event(t, IN | OUT);
        let (woken, w) = waker();
        let mut id = 0;
        assert!(r.poll_ready(t, Interest::Read, &mut id, &w));
        // The receive found nothing: cleared, and the task waits.
        r.clear(t, Interest::Read);
        assert!(!r.poll_ready(t, Interest::Read, &mut id, &w));
        // Writing is still ready: clearing one direction leaves the other.
        let mut wid = 0;
        assert!(r.poll_ready(t, Interest::Write, &mut wid, &w));
        // Data arriving after the receive: the event wakes the waiter, the bit is back.
        r.event(t, IN);
        assert_eq!(woken.0.load(Ordering::SeqCst), 1);
        assert!(r.poll_ready(t, Interest::Read, &mut id, &w));
    }

    #[test]
    fn an_event_for_the_other_direction_wakes_nobody() {
        let mut r = Registry::default();
        let t = r.insert(5);
        let (woken, w) = waker();
        let mut id = 0;
        assert!(!r.poll_ready(t, Interest::Read, &mut id, &w));
        assert_eq!(r.event(t, OUT), 0, "known, but nobody waits to send");
        assert_eq!(woken.0.load(Ordering::SeqCst), 0);
        assert_eq!(r.waiting(), 1);
    }

    #[test]
    fn the_peers_close_stays_ready_after_a_clear() {
        let mut r = Registry::default();
        let t = r.insert(5);
        r.event(t, IN | libc::EPOLLRDHUP as u32);
        r.clear(t, Interest::Read);
        let (_, w) = waker();
        let mut id = 0;
        assert!(
            r.poll_ready(t, Interest::Read, &mut id, &w),
            "a receive that emptied the socket must still see the end"
        );
        // HUP makes both directions ready for good.
        let t2 = r.insert(6);
        r.event(t2, libc::EPOLLHUP as u32);
        r.clear(t2, Interest::Write);
        let mut id2 = 0;
        assert!(r.poll_ready(t2, Interest::Write, &mut id2, &w));
    }

    #[test]
    fn repeated_polls_keep_one_waiter_and_forgetting_removes_it() {
        let mut r = Registry::default();
        let t = r.insert(5);
        let (_, w) = waker();
        let (_, w2) = waker();
        let mut id = 0;
        for _ in 0..3 {
            assert!(!r.poll_ready(t, Interest::Read, &mut id, &w));
        }
        assert!(!r.poll_ready(t, Interest::Read, &mut id, &w2));
        assert_eq!(r.waiting(), 1, "one op, one waiter, whatever its waker");
        let mut other = 0;
        assert!(!r.poll_ready(t, Interest::Read, &mut other, &w));
        assert_eq!(r.waiting(), 2);
        r.forget_waiter(t, Interest::Read, id);
        r.forget_waiter(t, Interest::Read, other);
        assert_eq!(r.waiting(), 0);
    }

    #[test]
    fn a_stale_token_reaches_nobody() {
        let mut r = Registry::default();
        let t = r.insert(5);
        let (woken, w) = waker();
        let mut id = 0;
        assert!(!r.poll_ready(t, Interest::Read, &mut id, &w));
        assert_eq!(r.remove(t), Some(5));
        assert_eq!(
            woken.0.load(Ordering::SeqCst),
            1,
            "a waiter is told it is gone"
        );
        assert_eq!(r.waiting(), 0);
        // The slot is reused; the old token no longer names it.
        let t2 = r.insert(7);
        assert_eq!(t & 0xffff_ffff, t2 & 0xffff_ffff);
        assert_eq!(r.event(t, IN), 0);
        let mut id2 = 0;
        assert!(!r.poll_ready(t2, Interest::Read, &mut id2, &w));
        assert_eq!(r.remove(t), None);
        assert_eq!(r.len(), 1);
    }
}
