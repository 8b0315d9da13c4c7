//! The FIFO of waiting tasks every primitive in this module shares: a doubly linked list over
//! a slab (no unsafe, O(1) push, unlink and removal). A waiter's future holds its key and
//! removes its node when it completes or is dropped, so a cancelled waiter never lingers.
//!
//! A node can be *unlinked* (taken out of the FIFO by whoever granted it something) and still
//! live in the slab until its future looks at the outcome: that is how a grant survives
//! between the wake-up and the next poll.

use std::task::Waker;

use slab::Slab;

struct Node<S> {
    prev: Option<usize>,
    next: Option<usize>,
    linked: bool,
    waker: Option<Waker>,
    state: S,
}

pub(crate) struct WaitQueue<S> {
    nodes: Slab<Node<S>>,
    head: Option<usize>,
    tail: Option<usize>,
}

impl<S> Default for WaitQueue<S> {
    fn default() -> Self {
        WaitQueue {
            nodes: Slab::new(),
            head: None,
            tail: None,
        }
    }
}

impl<S> WaitQueue<S> {
    /// Append a waiter at the back; returns its key.
    pub(crate) fn push_back(&mut self, state: S, waker: &Waker) -> usize {
        let key = self.nodes.insert(Node {
            prev: self.tail,
            next: None,
            linked: true,
            waker: Some(waker.clone()),
            state,
        });
        match self.tail {
            Some(t) => self.nodes[t].next = Some(key),
            None => self.head = Some(key),
        }
        self.tail = Some(key);
        key
    }

    /// The first linked waiter.
    pub(crate) fn front(&self) -> Option<usize> {
        self.head
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.head.is_none()
    }

    pub(crate) fn state(&self, key: usize) -> &S {
        &self.nodes[key].state
    }

    pub(crate) fn state_mut(&mut self, key: usize) -> &mut S {
        &mut self.nodes[key].state
    }

    /// Remember the waker of the task polling waiter `key` (replacing a stale one).
    pub(crate) fn set_waker(&mut self, key: usize, waker: &Waker) {
        let slot = &mut self.nodes[key].waker;
        match slot {
            Some(w) if w.will_wake(waker) => {}
            _ => *slot = Some(waker.clone()),
        }
    }

    /// Take waiter `key` out of the FIFO (it stays in the slab) and return its waker, for the
    /// caller to wake once it has released its borrow of the primitive.
    pub(crate) fn unlink(&mut self, key: usize) -> Option<Waker> {
        let node = &mut self.nodes[key];
        if !node.linked {
            return None;
        }
        node.linked = false;
        let (prev, next) = (node.prev.take(), node.next.take());
        let waker = node.waker.take();
        match prev {
            Some(p) => self.nodes[p].next = next,
            None => self.head = next,
        }
        match next {
            Some(n) => self.nodes[n].prev = prev,
            None => self.tail = prev,
        }
        waker
    }

    /// Remove waiter `key` for good (unlinking it first if needed); returns its state.
    pub(crate) fn remove(&mut self, key: usize) -> S {
        self.unlink(key);
        self.nodes.remove(key).state
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::task::Waker;

    #[test]
    fn fifo_order_and_unlink_in_the_middle() {
        let w = Waker::noop();
        let mut q = WaitQueue::default();
        let a = q.push_back('a', w);
        let b = q.push_back('b', w);
        let c = q.push_back('c', w);
        assert_eq!(q.front(), Some(a));
        q.unlink(b);
        assert_eq!(q.remove(a), 'a');
        assert_eq!(q.front(), Some(c));
        // b is unlinked but still readable until removed.
        assert_eq!(*q.state(b), 'b');
        assert_eq!(q.remove(c), 'c');
        assert!(q.is_empty());
        assert_eq!(q.remove(b), 'b');
        let d = q.push_back('d', w);
        assert_eq!(q.front(), Some(d));
    }
}
