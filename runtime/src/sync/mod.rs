//! Synchronisation between the tasks of **one shard**: no atomics, no locks, no syscalls.
//!
//! Every task of a shard runs on the shard's thread, so these primitives are plain
//! `RefCell`s and FIFO wait queues. They are `!Sync` (the channel handles, which share state
//! through an `Rc`, are `!Send` as well): the compiler stops them from reaching another
//! shard. To talk to another shard, send it a message ([`send_to`](crate::send_to),
//! [`submit_to`](crate::submit_to)).
//!
//! | primitive | for | cancel-safe |
//! |---|---|---|
//! | [`Notify`] | "something changed" wake-ups, one stored permit | `notified()`: yes (a picked notification passes on) |
//! | [`Semaphore`] | limiting concurrency, FIFO | `acquire()`: yes |
//! | [`oneshot`] | one reply from one task to another | awaiting the receiver: yes |
//! | [`Slots`] | many one-value replies from one producer (calls in flight on a connection), no allocation per reply | awaiting a [`Slot`]: no (dropping it frees the slot and refuses its value) |
//! | [`mpsc::channel`] | bounded queue, senders wait for room (FIFO) | `recv()`, `reserve()`: yes; `send()`: drops its message |
//! | [`mpsc::unbounded_channel`] | queue whose bound comes from elsewhere | `recv()`: yes |
//! | [`Mutex`], [`RwLock`] | state held across `.await` (FIFO, writer-fair) | `lock()`, `read()`, `write()`: yes |
//! | [`WakerCell`] | poll-based code with exactly one waiting task and no future kept between polls | (no future) |
//!
//! State that is only touched between awaits needs none of these: a `Cell` or `RefCell` in
//! the task, or per-shard state in [`shard_local!`](crate::shard_local).
//!
//! What the compiler refuses:
//!
//! ```compile_fail
//! // A channel handle cannot move to another thread (or shard).
//! let (tx, _rx) = corewire_runtime::sync::mpsc::channel::<u8>(1);
//! std::thread::spawn(move || drop(tx));
//! ```
//!
//! ```compile_fail
//! // Nor can a primitive be shared with one.
//! let n = std::sync::Arc::new(corewire_runtime::sync::Notify::new());
//! std::thread::spawn(move || n.notify_one());
//! ```
//!
//! ```compile_fail
//! let (tx, _rx) = corewire_runtime::sync::oneshot::channel::<u8>();
//! std::thread::spawn(move || tx.send(1));
//! ```
//!
//! ```compile_fail
//! let m = std::sync::Arc::new(corewire_runtime::sync::Mutex::new(0));
//! std::thread::spawn(move || drop(m));
//! ```

pub mod mpsc;
mod mutex;
mod notify;
pub mod oneshot;
mod rwlock;
mod semaphore;
mod slots;
mod wait_queue;
mod waker_cell;

#[cfg(test)]
mod test_util;

pub use mutex::{Mutex, MutexGuard, TryLockError};
pub use notify::{Notified, Notify};
pub use rwlock::{RwLock, RwLockReadGuard, RwLockWriteGuard};
pub use semaphore::{
    Acquire, AcquireError, AcquireOwned, OwnedPermit, Permit, Semaphore, TryAcquireError,
};
pub use slots::{Slot, SlotKey, Slots};
pub use waker_cell::WakerCell;
