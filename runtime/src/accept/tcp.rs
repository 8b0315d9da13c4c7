//! Sharded TCP accept: [`TcpEndpoint`] binds one listener per accepting shard and hands each
//! connection through the listener's [`Handoff`].

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::os::fd::OwnedFd;
use std::sync::Arc;

use super::handle::{ListenerHandle, SlotGuard, SocketSlot};
use super::handoff::{Arrived, Handoff};
use super::placement::Placement;
use super::stop::StopSignal;
use crate::coop::Budget;
use crate::mesh::RemoteHandle;
use crate::net::{self, ListenOptions, TcpListener, TcpStream};
use crate::shard::{context, ShardId};
use crate::Runtime;

/// How connections reach shards.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum AcceptMode {
    /// Every shard listens on the same port (`SO_REUSEPORT`); the kernel spreads connections.
    ReusePort,
    /// The `acceptors` listen, and hand each connection to the shard `placement` picks.
    Handoff {
        /// The shards that accept.
        acceptors: Vec<ShardId>,
        /// Where each accepted connection goes.
        placement: Placement,
    },
}

impl AcceptMode {
    /// One acceptor (shard 0), least-connections placement.
    pub fn handoff(placement: Placement) -> AcceptMode {
        AcceptMode::Handoff {
            acceptors: vec![0],
            placement,
        }
    }
}

/// A connection as its handler receives it, on the shard that will own it.
#[non_exhaustive]
pub struct Accepted {
    /// The connection, adopted by the shard it runs on.
    pub stream: TcpStream,
    /// The peer's address, when known.
    pub peer: Option<SocketAddr>,
    /// The fairness budget configured for this listener.
    pub budget: Budget,
    /// The shard the connection runs on.
    pub shard: ShardId,
}

/// Configures a sharded TCP server.
pub struct TcpEndpoint {
    addr: SocketAddr,
    mode: AcceptMode,
    budget: Budget,
    backlog: i32,
    only_v6: bool,
}

impl TcpEndpoint {
    /// An endpoint at `addr`, every shard listening (`AcceptMode::ReusePort`).
    pub fn bind(addr: SocketAddr) -> TcpEndpoint {
        TcpEndpoint {
            addr,
            mode: AcceptMode::ReusePort,
            budget: Budget::default(),
            backlog: 1024,
            only_v6: false,
        }
    }

    /// How connections are accepted and placed.
    pub fn mode(mut self, mode: AcceptMode) -> Self {
        self.mode = mode;
        self
    }

    /// Per-connection fairness budget (default [`Budget::default`]).
    pub fn budget(mut self, budget: Budget) -> Self {
        self.budget = budget;
        self
    }

    /// The listen backlog of each listening socket (default 1024).
    pub fn backlog(mut self, backlog: i32) -> Self {
        self.backlog = backlog;
        self
    }

    /// An IPv6 address takes IPv6 only (IPV6_V6ONLY; default off: `[::]` takes IPv4 too),
    /// so that an IPv4 address can listen on the same port beside it.
    pub fn only_v6(mut self, only_v6: bool) -> Self {
        self.only_v6 = only_v6;
        self
    }

    /// Start listening and serving on `rt`'s shards: `handler` runs once per connection, as a
    /// task on the shard that owns the connection.
    pub fn serve<H, Fut>(self, rt: &Runtime, handler: H) -> io::Result<ListenerHandle>
    where
        H: Fn(Accepted) -> Fut + Send + Sync + Clone + 'static,
        Fut: Future<Output = ()> + 'static,
    {
        self.start(rt.shard_count(), handler, |shard, accept| {
            rt.spawn_on(shard, move || accept.run())
        })
    }

    /// [`serve`](TcpEndpoint::serve) started from one of the shards that are to serve it
    /// (a server moving its port while it runs, for one): the listening sockets are bound
    /// and listening when this returns, and the accept loops reach the other shards as
    /// messages. Panics off a shard thread.
    pub fn serve_from_shard<H, Fut>(self, handler: H) -> io::Result<ListenerHandle>
    where
        H: Fn(Accepted) -> Fut + Send + Sync + Clone + 'static,
        Fut: Future<Output = ()> + 'static,
    {
        self.start(context::shard_count(), handler, |shard, accept| {
            crate::mesh::spawn_on_peer(shard, move || accept.run())
        })
    }

    fn start<H, Fut>(
        self,
        shards: usize,
        handler: H,
        mut spawn: impl FnMut(ShardId, AcceptLoop<H>) -> RemoteHandle<()>,
    ) -> io::Result<ListenerHandle>
    where
        H: Fn(Accepted) -> Fut + Send + Sync + Clone + 'static,
        Fut: Future<Output = ()> + 'static,
    {
        let stop = Arc::new(StopSignal::default());
        let (listen_on, placement): (Vec<ShardId>, Option<Placement>) = match &self.mode {
            AcceptMode::ReusePort => ((0..shards).collect(), None),
            AcceptMode::Handoff {
                acceptors,
                placement,
            } => {
                if acceptors.is_empty() || acceptors.iter().any(|&a| a >= shards) {
                    return Err(io::Error::new(
                        io::ErrorKind::InvalidInput,
                        "handoff acceptors must be existing shards",
                    ));
                }
                (acceptors.clone(), Some(placement.clone()))
            }
        };
        let handoff = Handoff::new(shards, placement);
        let opts = ListenOptions {
            reuse_port: listen_on.len() > 1,
            backlog: self.backlog,
            only_v6: self.only_v6,
        };
        // Bind one after the other: with port 0 the first bind picks the port the rest share.
        // All are bound before any accept loop starts, so a failed bind leaves none running.
        let mut addr = self.addr;
        let mut listeners = Vec::with_capacity(listen_on.len());
        for _ in &listen_on {
            let listener = net::bind_std(addr, opts)?;
            addr = listener.local_addr()?;
            listeners.push(listener);
        }
        // Kept by the handle while the loops run, to close the listening sockets at once
        // (`close_now`).
        let mut slots = Vec::with_capacity(listeners.len());
        let mut guards = Vec::with_capacity(listeners.len());
        for listener in &listeners {
            let (slot, guard) = SocketSlot::new(OwnedFd::from(listener.try_clone()?));
            slots.push(slot);
            guards.push(guard);
        }
        let mut acceptors = Vec::with_capacity(listen_on.len());
        for ((&shard, listener), socket) in listen_on.iter().zip(listeners).zip(guards) {
            let ctx = AcceptLoop {
                listener,
                _socket: socket,
                handoff: handoff.clone(),
                stop: stop.clone(),
                budget: self.budget,
                handler: handler.clone(),
            };
            acceptors.push(spawn(shard, ctx));
        }
        tracing::info!(%addr, mode = ?self.mode, budget = ?self.budget, "tcp listener ready");
        Ok(
            ListenerHandle::new(addr, handoff.counts().clone(), stop, acceptors)
                .with_sockets(slots),
        )
    }
}

struct AcceptLoop<H> {
    /// Adopted by the acceptor shard when the loop starts there.
    listener: std::net::TcpListener,
    /// The handle's descriptor of the same socket, closed when this loop ends.
    _socket: SlotGuard,
    handoff: Handoff,
    stop: Arc<StopSignal>,
    budget: Budget,
    handler: H,
}

impl<H, Fut> AcceptLoop<H>
where
    H: Fn(Accepted) -> Fut + Send + Sync + Clone + 'static,
    Fut: Future<Output = ()> + 'static,
{
    async fn run(self) {
        let me = context::current();
        let listener = match TcpListener::from_std(self.listener) {
            Ok(l) => l,
            Err(e) => {
                tracing::error!(error = %e, "cannot accept on the listener");
                return;
            }
        };
        loop {
            let (fd, peer) = match self.stop.run_until_stopped(listener.accept_fd()).await {
                None => break,
                Some(Ok(a)) => a,
                // Closed by `ListenerHandle::close_now`: the stop is already signalled.
                Some(Err(_)) if self.stop.is_stopped() => break,
                Some(Err(e)) => {
                    // EMFILE/ENFILE and friends: back off instead of spinning on the error.
                    tracing::warn!(error = %e, "accept failed");
                    crate::sleep(std::time::Duration::from_millis(10)).await;
                    continue;
                }
            };
            me.remote.stats.accepted.incr();
            let placed = self.handoff.place(peer);
            let (budget, handler) = (self.budget, self.handler.clone());
            self.handoff
                .deliver(placed, move |arrived| {
                    start(fd, peer, budget, handler, arrived)
                })
                .await;
        }
        let _ = listener.shutdown();
        tracing::debug!(addr = %listener.local_addr(), "accept loop stopped");
    }
}

/// On the connection's shard: run its handler as a task that holds the connection's count.
fn start<H, Fut>(
    fd: OwnedFd,
    peer: Option<SocketAddr>,
    budget: Budget,
    handler: H,
    arrived: Arrived,
) where
    H: Fn(Accepted) -> Fut,
    Fut: Future<Output = ()> + 'static,
{
    let accepted = Accepted {
        stream: TcpStream::from_fd(fd),
        peer,
        budget,
        shard: context::current().id,
    };
    crate::spawn_detached(crate::executor::Holding::new(handler(accepted), arrived));
}
