//! What a server listens on: any transport's endpoint that accepts connections on a
//! runtime's shards and hands each one over as a [`Connection`] on the shard that owns it.

#![deny(missing_docs)]

use std::future::Future;

use corewire_runtime::accept::ListenerHandle;
use corewire_runtime::Runtime;

use crate::frame::FrameLimits;
use crate::Connection;

/// Per-connection settings a server asks of the listener.
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub struct ConnSettings {
    /// Frame size limits each connection enforces.
    pub limits: FrameLimits,
    /// Bound of each connection's send queue.
    pub max_queued_bytes: usize,
}

impl ConnSettings {
    /// Settings of `limits` and a send queue bound of `max_queued_bytes`.
    pub fn new(limits: FrameLimits, max_queued_bytes: usize) -> ConnSettings {
        ConnSettings {
            limits,
            max_queued_bytes,
        }
    }
}

/// A listening endpoint of some transport (TCP's [`TcpEndpoint`], RDMA's `RdmaEndpoint`,
/// ...): `listen` starts accepting and runs `handler` once per connection, as a task on the
/// shard that owns it, with the connection's fairness budget set by the endpoint.
///
/// [`TcpEndpoint`]: corewire_runtime::accept::TcpEndpoint
pub trait Listener {
    /// The connection type the listener hands to `handler`.
    type Conn: Connection;
    /// Why the listener could not start.
    type Error: std::error::Error + 'static;

    /// Starts accepting on `rt`'s shards; the handle stops it.
    fn listen<H, Fut>(
        self,
        rt: &Runtime,
        settings: ConnSettings,
        handler: H,
    ) -> Result<ListenerHandle, Self::Error>
    where
        H: Fn(Self::Conn) -> Fut + Send + Sync + Clone + 'static,
        Fut: Future<Output = ()> + 'static;
}
