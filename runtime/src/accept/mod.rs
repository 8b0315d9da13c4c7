//! Sharded TCP accept, with no central accept thread. Two modes:
//! - `ReusePort`: every shard binds its own SO_REUSEPORT listener; the kernel spreads
//!   connections by hash (cheapest, but blind to load).
//! - `Handoff`: acceptor shard(s) accept and hand each connection to the shard a
//!   [`Placement`] policy picks (least-connections by default), like glommio's
//!   `shared_accept` + `bind_to_executor` or Seastar's load balancing.

mod placement;
mod stop;

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::os::fd::OwnedFd;
use std::sync::Arc;

pub use placement::{ConnCounts, ConnGuard, Placement, PlacementFn, PlacementInput};
pub use stop::StopSignal;

use crate::coop::Budget;
use crate::mesh::{self, RemoteHandle};
use crate::net::{self, ListenOptions, TcpListener, TcpStream};
use crate::shard::{context, ShardId};
use crate::{spawn_local, Runtime};

/// How connections reach shards.
#[derive(Debug, Clone)]
pub enum AcceptMode {
    ReusePort,
    Handoff {
        acceptors: Vec<ShardId>,
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
pub struct Accepted {
    pub stream: TcpStream,
    pub peer: Option<SocketAddr>,
    /// The fairness budget configured for this listener.
    pub budget: Budget,
    pub shard: ShardId,
}

/// Configures a sharded TCP server.
pub struct TcpEndpoint {
    addr: SocketAddr,
    mode: AcceptMode,
    budget: Budget,
    backlog: i32,
}

impl TcpEndpoint {
    pub fn bind(addr: SocketAddr) -> TcpEndpoint {
        TcpEndpoint {
            addr,
            mode: AcceptMode::ReusePort,
            budget: Budget::default(),
            backlog: 1024,
        }
    }

    pub fn mode(mut self, mode: AcceptMode) -> Self {
        self.mode = mode;
        self
    }

    /// Per-connection fairness budget (default [`Budget::default`]).
    pub fn budget(mut self, budget: Budget) -> Self {
        self.budget = budget;
        self
    }

    pub fn backlog(mut self, backlog: i32) -> Self {
        self.backlog = backlog;
        self
    }

    /// Start listening and serving on `rt`'s shards: `handler` runs once per connection, as a
    /// task on the shard that owns the connection.
    pub fn serve<H, Fut>(self, rt: &Runtime, handler: H) -> io::Result<ListenerHandle>
    where
        H: Fn(Accepted) -> Fut + Send + Sync + Clone + 'static,
        Fut: Future<Output = ()> + 'static,
    {
        let shards = rt.shard_count();
        let counts = Arc::new(ConnCounts::new(shards));
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
        let opts = ListenOptions {
            reuse_port: listen_on.len() > 1,
            backlog: self.backlog,
        };
        // Bind one after the other: with port 0 the first bind picks the port the rest share.
        let mut addr = self.addr;
        let mut acceptors = Vec::with_capacity(listen_on.len());
        for &shard in &listen_on {
            let listener = net::bind_std(addr, opts)?;
            addr = listener.local_addr()?;
            let ctx = AcceptLoop {
                listener,
                counts: counts.clone(),
                stop: stop.clone(),
                placement: placement.clone(),
                budget: self.budget,
                handler: handler.clone(),
            };
            acceptors.push(rt.spawn_on(shard, move || ctx.run()));
        }
        tracing::info!(%addr, mode = ?self.mode, budget = ?self.budget, "tcp server listening");
        Ok(ListenerHandle {
            local_addr: addr,
            counts,
            stop,
            acceptors,
        })
    }
}

struct AcceptLoop<H> {
    /// Adopted by the acceptor shard when the loop starts there.
    listener: std::net::TcpListener,
    counts: Arc<ConnCounts>,
    stop: Arc<StopSignal>,
    placement: Option<Placement>,
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
            let accepted = match self.stop.run_until_stopped(listener.accept_fd()).await {
                None => break,
                Some(Ok(a)) => a,
                Some(Err(e)) => {
                    // EMFILE/ENFILE and friends: back off instead of spinning on the error.
                    tracing::warn!(error = %e, "accept failed");
                    crate::sleep(std::time::Duration::from_millis(10)).await;
                    continue;
                }
            };
            me.remote.stats.accepted.incr();
            let (fd, peer) = accepted;
            let target = match &self.placement {
                None => me.id,
                Some(p) => self.counts.choose(p, me.id, peer),
            };
            let guard = self.counts.open_guard(target);
            let job = ConnJob {
                handed_off: target != me.id,
                fd,
                peer,
                guard,
                budget: self.budget,
                handler: self.handler.clone(),
            };
            if target == me.id {
                job.start();
            } else {
                me.remote.stats.handoffs_out.incr();
                if mesh::send_to(target, move || job.start()).await.is_err() {
                    tracing::error!(target, "handoff to a missing shard");
                }
            }
        }
        let _ = listener.shutdown();
        tracing::debug!(addr = %listener.local_addr(), "accept loop stopped");
    }
}

/// A connection on its way to its shard: everything in it is `Send`.
struct ConnJob<H> {
    handed_off: bool,
    fd: OwnedFd,
    peer: Option<SocketAddr>,
    guard: ConnGuard,
    budget: Budget,
    handler: H,
}

impl<H, Fut> ConnJob<H>
where
    H: Fn(Accepted) -> Fut + Send + Sync + Clone + 'static,
    Fut: Future<Output = ()> + 'static,
{
    fn start(self) {
        let ctx = context::current();
        let stats = &ctx.remote.stats;
        if self.handed_off {
            stats.handoffs_in.incr();
        }
        stats.open_connections.incr();
        let accepted = Accepted {
            stream: TcpStream::from_fd(self.fd),
            peer: self.peer,
            budget: self.budget,
            shard: ctx.id,
        };
        let guard = self.guard;
        let fut = (self.handler)(accepted);
        let open = OpenConnection;
        spawn_local(async move {
            let _open = open;
            let _guard = guard;
            fut.await;
        });
    }
}

/// Keeps the shard's `open_connections` gauge true however the connection task ends.
struct OpenConnection;

impl Drop for OpenConnection {
    fn drop(&mut self) {
        if let Some(ctx) = context::try_current() {
            ctx.remote.stats.open_connections.sub(1);
        }
    }
}

/// A running server.
pub struct ListenerHandle {
    local_addr: SocketAddr,
    counts: Arc<ConnCounts>,
    stop: Arc<StopSignal>,
    acceptors: Vec<RemoteHandle<()>>,
}

impl ListenerHandle {
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// Open connections of this server per shard.
    pub fn open_connections(&self) -> Vec<usize> {
        self.counts.open()
    }

    /// Connections placed on each shard since start.
    pub fn placed_connections(&self) -> Vec<u64> {
        self.counts.placed()
    }

    pub fn counts(&self) -> Arc<ConnCounts> {
        self.counts.clone()
    }

    /// Stop accepting (listeners close; open connections carry on) and wait for the accept
    /// loops to end. Call from outside the shards.
    pub fn stop(self) {
        self.stop.stop();
        for a in self.acceptors {
            let _ = a.wait();
        }
    }
}
