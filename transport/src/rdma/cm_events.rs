//! Per-shard rdma_cm event routing: the shard's event channel fd is waited on through the
//! ring; each event goes to the queue of the id (or listener) it concerns.

use std::cell::RefCell;
use std::collections::{HashMap, VecDeque};
use std::rc::Rc;

use corewire_runtime::sync::Notify;
use corewire_verbs::{CmEvent, CmEventChannel, CmEventKind, CmIdKey};

/// Events of one id, in arrival order (a handful per connection: set-up and tear-down).
#[derive(Default)]
pub struct EventQueue {
    events: RefCell<VecDeque<CmEvent>>,
    ready: Notify,
    closed: std::cell::Cell<bool>,
}

impl EventQueue {
    fn push(&self, ev: CmEvent) {
        self.events.borrow_mut().push_back(ev);
        self.ready.notify_one();
    }

    /// The next event; `None` once the queue is closed and empty. Cancel-safe.
    pub async fn next(&self) -> Option<CmEvent> {
        loop {
            if let Some(ev) = self.events.borrow_mut().pop_front() {
                return Some(ev);
            }
            if self.closed.get() {
                return None;
            }
            self.ready.notified().await;
        }
    }

    pub fn close(&self) {
        self.closed.set(true);
        self.ready.notify_one();
    }
}

/// Routes a shard's rdma_cm events.
#[derive(Default)]
pub struct CmRouter {
    by_id: RefCell<HashMap<CmIdKey, Rc<EventQueue>>>,
}

impl CmRouter {
    pub fn register(&self, key: CmIdKey) -> Rc<EventQueue> {
        self.by_id.borrow_mut().entry(key).or_default().clone()
    }

    pub fn unregister(&self, key: CmIdKey) {
        if let Some(q) = self.by_id.borrow_mut().remove(&key) {
            q.close();
        }
    }

    fn dispatch(&self, ev: CmEvent) {
        // Connect requests are addressed to the listening id.
        let key = match ev.kind() {
            CmEventKind::ConnectRequest => ev.listen_id_key().unwrap_or(ev.id_key()),
            _ => ev.id_key(),
        };
        let queue = self.by_id.borrow().get(&key).cloned();
        match queue {
            Some(q) => q.push(ev),
            None => tracing::debug!(kind = ?ev.kind(), "rdma_cm event for an id nobody waits on"),
        }
    }
}

/// Drain `channel` whenever its fd is readable, forever (the task is dropped at shutdown).
pub async fn run_router(channel: CmEventChannel, router: Rc<CmRouter>) {
    loop {
        loop {
            match channel.get_event() {
                Ok(Some(ev)) => router.dispatch(ev),
                Ok(None) => break,
                Err(e) => {
                    tracing::error!(error = %e, "reading rdma_cm events failed");
                    break;
                }
            }
        }
        if let Err(e) = corewire_runtime::io::wait_readable(&channel).await {
            tracing::error!(error = %e, "waiting on the rdma_cm channel failed");
            corewire_runtime::sleep(std::time::Duration::from_millis(10)).await;
        }
    }
}
