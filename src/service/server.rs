//! Building and running a server: services registered once, instantiated per shard, served
//! over any listener.

use std::cell::RefCell;
use std::collections::HashMap;
use std::io;
use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use corewire_runtime::accept::{self, Accepted, TcpEndpoint};
use corewire_runtime::{shard_id, Runtime};
use corewire_transport::frame::FrameLimits;
use corewire_transport::rdma::{RdmaAccepted, RdmaEndpoint, RdmaError, RdmaServerHandle};
use corewire_transport::tcp::{ConnOptions, TcpConnection};

use super::dispatch;
use super::registry::{factory, Factory, ServiceSet};
use super::Service;

/// Per-connection server settings.
#[derive(Debug, Clone, Copy)]
pub struct ServerOptions {
    /// Requests running at once on one connection, each counted until its reply is queued;
    /// while they are all running the server reads nothing more from the connection
    /// (default 1024).
    pub max_in_flight_per_conn: usize,
    pub limits: FrameLimits,
    /// Reply bytes queued per connection (a true bound): past it handlers wait to queue
    /// their replies and the server reads nothing more from the connection (default 4 MiB).
    pub max_queued_bytes: usize,
}

impl Default for ServerOptions {
    fn default() -> Self {
        ServerOptions {
            max_in_flight_per_conn: 1024,
            limits: FrameLimits::default(),
            max_queued_bytes: 4 << 20,
        }
    }
}

#[derive(Default)]
pub struct ServerBuilder {
    factories: Vec<Factory>,
    options: ServerOptions,
}

impl ServerBuilder {
    /// Register a service; `make(shard)` creates its instance on each shard.
    pub fn service<S, F>(mut self, make: F) -> Self
    where
        S: Service,
        F: Fn(corewire_runtime::ShardId) -> S + Send + Sync + 'static,
    {
        self.factories.push(factory(make));
        self
    }

    pub fn options(mut self, options: ServerOptions) -> Self {
        self.options = options;
        self
    }

    pub fn build(self) -> Server {
        static NEXT_ID: AtomicU64 = AtomicU64::new(1);
        Server {
            inner: Arc::new(ServerInner {
                id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
                factories: self.factories,
                options: self.options,
            }),
        }
    }

    /// Build and serve on `addr` over TCP with default accept settings (SO_REUSEPORT).
    pub fn serve_tcp(self, rt: &Runtime, addr: SocketAddr) -> io::Result<ServerHandle> {
        self.build().serve_tcp(rt, TcpEndpoint::bind(addr))
    }
}

struct ServerInner {
    id: u64,
    factories: Vec<Factory>,
    options: ServerOptions,
}

/// A set of services. Cheap to clone; `Send + Sync`, so it can be given to every listener.
#[derive(Clone)]
pub struct Server {
    inner: Arc<ServerInner>,
}

corewire_runtime::shard_local! {
    /// Service instances of each server on this shard, created on first use, dropped with
    /// the shard.
    static INSTANCES: RefCell<HashMap<u64, Rc<ServiceSet>>> = RefCell::new(HashMap::new());
}

impl Server {
    pub fn builder() -> ServerBuilder {
        ServerBuilder::default()
    }

    pub fn options(&self) -> ServerOptions {
        self.inner.options
    }

    /// This server's service instances on the current shard.
    pub(crate) fn services_here(&self) -> Rc<ServiceSet> {
        INSTANCES.with(|m| {
            m.borrow_mut()
                .entry(self.inner.id)
                .or_insert_with(|| Rc::new(ServiceSet::build(&self.inner.factories, shard_id())))
                .clone()
        })
    }

    /// Serve over TCP with `listener`'s accept mode and fairness budget.
    pub fn serve_tcp(&self, rt: &Runtime, listener: TcpEndpoint) -> io::Result<ServerHandle> {
        let server = self.clone();
        let handle = listener.serve(rt, move |accepted: Accepted| {
            let server = server.clone();
            async move {
                let options = server.options();
                let conn = TcpConnection::new(
                    accepted.stream,
                    ConnOptions {
                        limits: options.limits,
                        max_queued_bytes: options.max_queued_bytes,
                        budget: accepted.budget,
                        ..ConnOptions::default()
                    },
                );
                dispatch::serve(conn, server.services_here(), options).await;
            }
        })?;
        Ok(ServerHandle { tcp: handle })
    }
}

impl Server {
    /// Serve over RDMA (the transport must be installed on `rt`, see
    /// [`corewire_transport::rdma::install`]). The same service instances answer TCP and RDMA
    /// callers on each shard.
    pub fn serve_rdma(
        &self,
        rt: &Runtime,
        listener: RdmaEndpoint,
    ) -> Result<RdmaServerHandle, RdmaError> {
        let server = self.clone();
        listener.serve(rt, move |accepted: RdmaAccepted| {
            let server = server.clone();
            async move {
                dispatch::serve(accepted.conn, server.services_here(), server.options()).await;
            }
        })
    }
}

/// A server listening on TCP.
pub struct ServerHandle {
    tcp: accept::ListenerHandle,
}

impl ServerHandle {
    pub fn local_addr(&self) -> SocketAddr {
        self.tcp.local_addr()
    }

    pub fn open_connections(&self) -> Vec<usize> {
        self.tcp.open_connections()
    }

    pub fn placed_connections(&self) -> Vec<u64> {
        self.tcp.placed_connections()
    }

    /// Stop accepting; open connections carry on.
    pub fn stop(self) {
        self.tcp.stop()
    }
}
