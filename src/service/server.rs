//! Building and running a server: services registered once, instantiated per shard, served
//! over any listener.

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use corewire_runtime::accept::ListenerHandle;
use corewire_runtime::head_of_line::HeadOfLine;
use corewire_runtime::{shard_id, Runtime};
use corewire_transport::frame::FrameLimits;
use corewire_transport::{ConnSettings, Listener};

use super::dispatch;
#[cfg(feature = "grpc")]
use super::registry::Route;
use super::registry::{self, registration, Registration, ServiceSet};
use super::Service;

/// Per-connection server settings.
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub struct ServerOptions {
    /// Requests running at once on one connection, each counted until its reply is queued;
    /// while they are all running the server reads nothing more from the connection
    /// (default 1024).
    pub max_in_flight_per_conn: usize,
    /// Frame size limits of each connection.
    pub limits: FrameLimits,
    /// Reply bytes queued per connection (a true bound): past it handlers wait to queue
    /// their replies and the server reads nothing more from the connection (default 4 MiB).
    pub max_queued_bytes: usize,
    /// Settings of [`serve_grpc`](Server::serve_grpc) listeners.
    #[cfg(feature = "grpc")]
    pub grpc: crate::grpc::GrpcOptions,
}

impl Default for ServerOptions {
    fn default() -> Self {
        ServerOptions {
            max_in_flight_per_conn: 1024,
            limits: FrameLimits::default(),
            max_queued_bytes: 4 << 20,
            #[cfg(feature = "grpc")]
            grpc: crate::grpc::GrpcOptions::default(),
        }
    }
}

/// Builds a [`Server`]: its services and options.
#[derive(Default)]
pub struct ServerBuilder {
    registrations: Vec<Registration>,
    options: ServerOptions,
}

impl ServerBuilder {
    /// Register a service; `make(shard)` creates its instance on each shard.
    pub fn service<S, F>(mut self, make: F) -> Self
    where
        S: Service,
        F: Fn(corewire_runtime::ShardId) -> S + Send + Sync + 'static,
    {
        self.registrations.push(registration(make));
        self
    }

    /// Per-connection settings (default: [`ServerOptions::default`]).
    pub fn options(mut self, options: ServerOptions) -> Self {
        self.options = options;
        self
    }

    /// The server. A service registered twice under the same name is served by the later
    /// registration.
    ///
    /// # Panics
    ///
    /// When two services' names give the same id, or two methods of one service do: a naming
    /// mistake better found at start-up than as misrouted calls ([`try_build`] returns it).
    ///
    /// [`try_build`]: ServerBuilder::try_build
    pub fn build(self) -> Server {
        self.try_build().unwrap_or_else(|e| panic!("{e}"))
    }

    /// The server, or why its services cannot be told apart by id.
    pub fn try_build(self) -> Result<Server, String> {
        static NEXT_ID: AtomicU64 = AtomicU64::new(1);
        let registrations = registry::check(self.registrations)?;
        Ok(Server {
            inner: Arc::new(ServerInner {
                id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
                #[cfg(feature = "grpc")]
                routes: registry::routes(&registrations),
                registrations,
                options: self.options,
            }),
        })
    }
}

struct ServerInner {
    id: u64,
    registrations: Vec<Registration>,
    /// Named methods by their gRPC name.
    #[cfg(feature = "grpc")]
    routes: HashMap<&'static str, Route>,
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
    /// A builder: register services, then `build`.
    pub fn builder() -> ServerBuilder {
        ServerBuilder::default()
    }

    /// The server's per-connection settings.
    pub fn options(&self) -> ServerOptions {
        self.inner.options
    }

    /// This server's service instances on the current shard.
    pub(crate) fn services_here(&self) -> Rc<ServiceSet> {
        INSTANCES.with(|m| {
            m.borrow_mut()
                .entry(self.inner.id)
                .or_insert_with(|| {
                    Rc::new(ServiceSet::build(&self.inner.registrations, shard_id()))
                })
                .clone()
        })
    }

    /// The method named `path` (`/package.Service/Method`), if a registered service has it.
    #[cfg(feature = "grpc")]
    pub(crate) fn route(&self, path: &str) -> Option<Route> {
        self.inner.routes.get(path).copied()
    }

    /// Serve on `listener` — a [`TcpEndpoint`](corewire_runtime::accept::TcpEndpoint), an
    /// [`RdmaEndpoint`](corewire_transport::rdma::RdmaEndpoint) (the RDMA transport installed
    /// on `rt` first), or any other [`Listener`]. The same service instances answer every
    /// listener's callers on each shard. Serve as many listeners as you like; each returns its
    /// own handle, which also holds the listener's head-of-line counts
    /// ([`ListenerHandle::head_of_line`]).
    pub fn serve<L: Listener>(
        &self,
        rt: &Runtime,
        listener: L,
    ) -> Result<ListenerHandle, L::Error> {
        let server = self.clone();
        let options = self.options();
        let settings = ConnSettings::new(options.limits, options.max_queued_bytes);
        let head_of_line = Arc::new(HeadOfLine::new());
        let recorder = head_of_line.clone();
        let handle = listener.listen(rt, settings, move |conn| {
            let server = server.clone();
            let recorder = recorder.clone();
            async move {
                let services = server.services_here();
                dispatch::serve(conn, services, server.options(), Some(recorder)).await
            }
        })?;
        Ok(handle.with_head_of_line(head_of_line))
    }
}
