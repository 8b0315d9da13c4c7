//! Shard-local storage: one value per shard, created on first use on that shard and dropped
//! when the shard stops (after its tasks, before its ring is drained). Unlike a
//! `thread_local!`, it belongs to the shard of one runtime: it is unreachable off a shard,
//! and a second runtime started on the same thread would get fresh values.

use std::any::Any;
use std::cell::RefCell;
use std::rc::Rc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::OnceLock;

use super::context;

/// Index source for every `ShardLocal` of the process (taken once per key, on first use).
static NEXT_INDEX: AtomicUsize = AtomicUsize::new(0);

/// A key to a per-shard value; declare it with [`shard_local!`](crate::shard_local).
pub struct ShardLocal<T: 'static> {
    init: fn() -> T,
    index: OnceLock<usize>,
}

impl<T: 'static> ShardLocal<T> {
    #[doc(hidden)]
    pub const fn new(init: fn() -> T) -> ShardLocal<T> {
        ShardLocal {
            init,
            index: OnceLock::new(),
        }
    }

    fn index(&'static self) -> usize {
        *self
            .index
            .get_or_init(|| NEXT_INDEX.fetch_add(1, Ordering::Relaxed))
    }

    /// Run `f` with this shard's value (created by the initialiser on first use). Panics off
    /// a shard thread.
    pub fn with<R>(&'static self, f: impl FnOnce(&T) -> R) -> R {
        self.try_with(f)
            .expect("shard-local value used off a corewire shard thread")
    }

    /// Like [`with`](ShardLocal::with), `None` off a shard thread.
    pub fn try_with<R>(&'static self, f: impl FnOnce(&T) -> R) -> Option<R> {
        let ctx = context::try_current()?;
        let index = self.index();
        let value = match ctx.locals.get(index) {
            Some(v) => v,
            // The borrow is released while `init` runs: it may use other shard-locals.
            None => ctx.locals.insert_if_empty(index, Rc::new((self.init)())),
        };
        let value = value
            .downcast_ref::<T>()
            .expect("a shard-local slot holds its key's type");
        Some(f(value))
    }
}

/// The values of one shard, indexed by key.
#[derive(Default)]
pub(crate) struct LocalStorage {
    slots: RefCell<Vec<Option<Rc<dyn Any>>>>,
}

impl LocalStorage {
    fn get(&self, index: usize) -> Option<Rc<dyn Any>> {
        self.slots.borrow().get(index).and_then(Clone::clone)
    }

    fn insert_if_empty(&self, index: usize, value: Rc<dyn Any>) -> Rc<dyn Any> {
        let mut slots = self.slots.borrow_mut();
        if slots.len() <= index {
            slots.resize(index + 1, None);
        }
        slots[index].get_or_insert(value).clone()
    }

    /// Drop every value. Destructors may use shard-locals again (creating fresh values), so
    /// repeat a few times; anything still left after that is dropped with the shard context.
    pub(crate) fn clear(&self) {
        for _ in 0..4 {
            let values = std::mem::take(&mut *self.slots.borrow_mut());
            if values.iter().all(Option::is_none) {
                return;
            }
            drop(values);
        }
    }
}

/// Declare per-shard values, like `thread_local!` but owned by the shard:
///
/// ```
/// use std::cell::Cell;
/// corewire_runtime::shard_local! {
///     /// Requests this shard served.
///     static HITS: Cell<u64> = Cell::new(0);
/// }
/// # let rt = corewire_runtime::Runtime::builder().shards(2).pin(false).build().unwrap();
/// # rt.run_on(1, || async {
/// HITS.with(|h| h.set(h.get() + 1));
/// assert_eq!(HITS.with(Cell::get), 1);
/// # }).unwrap();
/// ```
///
/// Each shard gets its own value, created on first use there and dropped when the shard stops.
#[macro_export]
macro_rules! shard_local {
    () => {};
    ($(#[$attr:meta])* $vis:vis static $name:ident : $t:ty = $init:expr; $($rest:tt)*) => {
        $(#[$attr])*
        $vis static $name: $crate::shard::ShardLocal<$t> = $crate::shard::ShardLocal::new({
            fn __shard_local_init() -> $t {
                $init
            }
            __shard_local_init
        });
        $crate::shard_local!($($rest)*);
    };
}
