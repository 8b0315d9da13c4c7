//! # corewire
//!
//! A thread-per-core runtime on io_uring and RDMA for services that want run-to-completion
//! latency. One shard per core, each owning its ring, its RDMA completion queue, its
//! connections and its slice of service state; shards talk by explicit messages.
//!
//! - [`runtime`]: shards, tasks, timers, pollers, cross-shard calls, sharded TCP accept.
//! - [`sync`]: `Notify`, `Semaphore`, `oneshot`, `mpsc`, `Mutex`, `RwLock` between the tasks
//!   of one shard (no atomics); [`shard_local!`] for per-shard state.
//! - [`transport`]: the sans-I/O frame codec and RPC state, and the [`transport::Connection`]
//!   interface that TCP (and RDMA) implement.
//! - [`service`]: write a [`Service`] once; a [`Server`] runs one instance per shard on every
//!   listener; a [`Client`] pipelines calls over one connection.
//!
//! A complete service:
//!
//! ```no_run
//! use corewire::{service_id, Client, Request, Response, Runtime, Server, Service, Status};
//! use corewire::TcpEndpoint;
//!
//! struct Echo;
//! impl Service for Echo {
//!     const ID: u32 = service_id("echo");
//!     async fn call(&self, req: Request) -> Result<Response, Status> {
//!         Ok(Response::new(req.payload))
//!     }
//! }
//!
//! let rt = Runtime::builder().shards(2).build().unwrap();
//! let server = Server::builder().service(|_shard| Echo).build();
//! let tcp = server.serve(&rt, TcpEndpoint::bind("127.0.0.1:7000".parse().unwrap())).unwrap();
//! let addr = tcp.local_addr();
//! let reply = rt.run_on(0, move || async move {
//!     let client = Client::connect_tcp(addr, Default::default()).await.unwrap();
//!     client.call(Echo::ID, 0, "hi".into()).await.unwrap()
//! });
//! assert_eq!(&reply.unwrap()[..], b"hi");
//! ```

pub mod service;

#[doc = include_str!("../docs/guide.md")]
pub mod guide {}

/// README.md's code, compiled (and run) as doc tests so it stays true.
#[doc = include_str!("../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;

pub use corewire_runtime as runtime;
pub use corewire_transport as transport;

pub use corewire_runtime::accept::{ListenerHandle, TcpEndpoint};
#[cfg(feature = "tls")]
pub use corewire_runtime::tls::{TlsAcceptor, TlsConnector, TlsEndpoint};
pub use corewire_runtime::{
    main, shard_count, shard_id, shard_local, sleep, spawn_local, submit_to, sync, test, timeout,
    Budget, Runtime, ShardId,
};
pub use service::{
    service_id, CallBuilder, CallNow, Client, ClientError, ClientOptions, ClientPool, Request,
    Response, Server, ServerBuilder, Service, Status,
};
