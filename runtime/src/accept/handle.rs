//! The handle of a running listener, whatever its transport.

use std::net::SocketAddr;
use std::os::fd::OwnedFd;
use std::sync::{Arc, Mutex};

use super::placement::ConnCounts;
use super::stop::StopSignal;
use crate::head_of_line::{HeadOfLine, HeadOfLineSnapshot};
use crate::mesh::RemoteHandle;

/// A running listener (TCP, RDMA, ...): its address, its connections per shard, and the way
/// to stop it. Dropping the handle leaves the listener running.
pub struct ListenerHandle {
    local_addr: SocketAddr,
    counts: Arc<ConnCounts>,
    stop: Arc<StopSignal>,
    acceptors: Vec<RemoteHandle<()>>,
    head_of_line: Arc<HeadOfLine>,
    /// The listening sockets (a descriptor of each, alive while its accept loop runs), for
    /// [`close_now`](ListenerHandle::close_now); empty for transports that give none.
    sockets: Vec<Arc<SocketSlot>>,
}

/// A second descriptor of a listening socket, for [`ListenerHandle::close_now`], that lives
/// only as long as the socket's accept loop: the loop's [`SlotGuard`] empties the slot when
/// the loop ends or its task is dropped (a runtime shut down), so a handle kept afterwards
/// holds no descriptor and the address is free.
pub(crate) struct SocketSlot(Mutex<Option<OwnedFd>>);

impl SocketSlot {
    /// The slot for `fd`, and the guard its accept loop holds.
    pub(crate) fn new(fd: OwnedFd) -> (Arc<SocketSlot>, SlotGuard) {
        let slot = Arc::new(SocketSlot(Mutex::new(Some(fd))));
        (slot.clone(), SlotGuard(slot))
    }

    fn fd(&self) -> std::sync::MutexGuard<'_, Option<OwnedFd>> {
        self.0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// Held by an accept loop: closes its [`SocketSlot`]'s descriptor when dropped.
pub(crate) struct SlotGuard(Arc<SocketSlot>);

impl Drop for SlotGuard {
    fn drop(&mut self) {
        self.0.fd().take();
    }
}

impl ListenerHandle {
    /// For transports: a listener at `local_addr` whose accept loops (`acceptors`) end when
    /// `stop` fires, counting connections in `counts` (its [`Handoff`](super::Handoff)'s).
    pub fn new(
        local_addr: SocketAddr,
        counts: Arc<ConnCounts>,
        stop: Arc<StopSignal>,
        acceptors: Vec<RemoteHandle<()>>,
    ) -> ListenerHandle {
        ListenerHandle {
            local_addr,
            counts,
            stop,
            acceptors,
            head_of_line: Arc::new(HeadOfLine::new()),
            sockets: Vec::new(),
        }
    }

    /// For transports: the listening sockets, which [`close_now`](ListenerHandle::close_now)
    /// shuts (descriptors of the same sockets the accept loops hold, while they run).
    pub(crate) fn with_sockets(mut self, sockets: Vec<Arc<SocketSlot>>) -> ListenerHandle {
        self.sockets = sockets;
        self
    }

    /// Stop accepting from this moment, on any thread: the listening sockets leave the
    /// listening state before this returns (a client that connects afterwards is refused,
    /// and the address can be bound again), while the accept loops end on their shards in
    /// their own time; [`stop`](ListenerHandle::stop) or
    /// [`stop_async`](ListenerHandle::stop_async) still waits for them. Open connections
    /// carry on.
    pub fn close_now(&self) {
        self.stop.stop();
        for slot in &self.sockets {
            // A listening socket shut down leaves the listening state (its queue of
            // connections not yet accepted is reset); ENOTCONN from one its loop already
            // shut is the same outcome, and an empty slot's loop has ended.
            if let Some(socket) = slot.fd().as_ref() {
                let _ = socket2::SockRef::from(socket).shutdown(std::net::Shutdown::Both);
            }
        }
    }

    /// For servers: the histogram this listener's connections record their requests'
    /// head-of-line counts in.
    pub fn with_head_of_line(mut self, head_of_line: Arc<HeadOfLine>) -> ListenerHandle {
        self.head_of_line = head_of_line;
        self
    }

    /// Head-of-line counts of the requests served on this listener (empty for a listener
    /// whose server records none): see [`crate::head_of_line`].
    pub fn head_of_line(&self) -> HeadOfLineSnapshot {
        self.head_of_line.snapshot()
    }

    /// The address the listener is bound to (with the port picked, for port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// Open connections of this listener per shard.
    pub fn open_connections(&self) -> Vec<usize> {
        self.counts.open()
    }

    /// Connections placed on each shard since start.
    pub fn placed_connections(&self) -> Vec<u64> {
        self.counts.placed()
    }

    /// The listener's connection counts, shared (for transports that place connections).
    pub fn counts(&self) -> Arc<ConnCounts> {
        self.counts.clone()
    }

    /// Stop accepting (listeners close; open connections carry on) and wait for the accept
    /// loops to end, blocking this thread.
    ///
    /// # Panics
    /// On a shard thread (see [`assert_can_block`](crate::assert_can_block)): there, await
    /// [`stop_async`](ListenerHandle::stop_async).
    #[track_caller]
    pub fn stop(self) {
        crate::assert_can_block("ListenerHandle::stop");
        self.stop.stop();
        for a in self.acceptors {
            let _ = a.wait_unchecked();
        }
    }

    /// [`stop`](ListenerHandle::stop) for async code: stop accepting and wait, without
    /// blocking the thread, for the accept loops to end. Works on a shard, the listener's own
    /// included.
    pub async fn stop_async(self) {
        self.stop.stop();
        for a in self.acceptors {
            let _ = a.await;
        }
    }
}
