//! The thread's argument vector: requests are parsed into it, and a command that keeps its
//! arguments as a vector (the collection commands) borrows it until the store has run it.
//! In the steady state of a pipeline no request allocates an argument vector.

use bytes::Bytes;

/// Most arguments whose vector the thread keeps for the next request (an MSET of 32 pairs
/// and less): a bigger request's vector is freed with it.
const MAX_REUSED_ARGS: usize = 65;

/// Most unused places a command may take with the vector it borrows: a command that waits
/// (queued in MULTI, deferred) keeps them that long, so a vector much bigger than its
/// arguments is not lent (they are copied into one of their own).
const MAX_LENT_SLACK: usize = 8;

thread_local! {
    /// Kept between requests, one per thread rather than per connection: a shard's
    /// connections parse one at a time on its thread, and an idle connection holds none (the
    /// session's size is pinned, see `resp_conn.rs`). Empty between requests; a nested parse
    /// finds it taken (or lent) and uses a vector of its own.
    static ARGS: std::cell::Cell<Vec<Bytes>> = const { std::cell::Cell::new(Vec::new()) };
}

/// The thread's argument vector (empty), or a new one while it is taken or lent.
pub(crate) fn take() -> Vec<Bytes> {
    ARGS.try_with(std::cell::Cell::take).unwrap_or_default()
}

/// Gives a vector back, emptied (the request's, or one a command borrowed): the thread keeps
/// the bigger of it and the one it holds, unless it grew past [`MAX_REUSED_ARGS`].
pub(crate) fn give_back(mut args: Vec<Bytes>) {
    // No place (the request's vector went to its command), or too many.
    if args.capacity() == 0 || args.capacity() > MAX_REUSED_ARGS {
        return;
    }
    args.clear();
    // A thread being torn down frees it instead.
    let _ = ARGS.try_with(|cell| {
        let capacity = args.capacity();
        let held = cell.replace(args);
        if held.capacity() > capacity {
            cell.set(held);
        }
    });
}

/// `args[taken..]` as a vector of the command's own: the request's vector itself when it
/// has few unused places (what the store gives back with [`give_back`] once it ran the
/// command, left empty here), otherwise a copy of exact size (`args` keeps its place and the
/// names, for the request's [`give_back`]).
pub(crate) fn lend_rest(args: &mut Vec<Bytes>, taken: usize) -> Vec<Bytes> {
    if args.capacity() - args.len() + taken <= MAX_LENT_SLACK {
        let mut lent = std::mem::take(args);
        // One or two names: `remove` shifts the rest down, cheaper than a `Drain`.
        for _ in 0..taken.min(lent.len()) {
            lent.remove(0);
        }
        lent
    } else {
        args.drain(taken.min(args.len())..).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(n: usize, capacity: usize) -> Vec<Bytes> {
        let mut v = Vec::with_capacity(capacity);
        v.extend((0..n).map(|i| Bytes::from(i.to_string())));
        v
    }

    #[test]
    fn lends_a_vector_that_fits_and_copies_one_that_does_not() {
        let mut small = args(4, 4);
        let ptr = small.as_ptr();
        let lent = lend_rest(&mut small, 1);
        assert_eq!(lent, args(4, 4)[1..].to_vec());
        assert_eq!(lent.as_ptr(), ptr, "the request's vector itself");
        assert!(small.is_empty() && small.capacity() == 0);

        let mut big = args(3, 64);
        let copied = lend_rest(&mut big, 1);
        assert_eq!(copied, args(3, 3)[1..].to_vec());
        assert_eq!(copied.capacity(), 2, "a copy of exact size");
        assert_eq!(
            big.len(),
            1,
            "the name, dropped when the vector is given back"
        );
        assert_eq!(big.capacity(), 64, "the big one stays");
    }

    #[test]
    fn the_thread_keeps_the_bigger_vector_within_the_bound() {
        let _ = take();
        give_back(args(2, 4));
        give_back(Vec::new());
        assert_eq!(take().capacity(), 4);
        give_back(args(1, MAX_REUSED_ARGS + 1));
        assert_eq!(take().capacity(), 0, "past the bound: freed");
    }
}
