//! The server's side of connection set-up: one rdma_cm listening id on an acceptor shard;
//! each connect request goes to the shard a placement policy picks, which migrates the id to
//! its own event channel, creates the queue pair on its own CQ, posts its receive buffers
//! and accepts.

use std::future::Future;
use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::Arc;

use corewire_runtime::accept::{ConnCounts, ConnGuard, Placement, StopSignal};
use corewire_runtime::{report_protocol_error, send_to, shard_id, spawn_local, Runtime, ShardId};
use corewire_verbs::{CmEventKind, CmId, ConnParams};

use super::cm_events::EventQueue;
use super::conn::RdmaConnection;
use super::establish::{expect_event, open_connection, reject_with_reason, watch_events};
use super::handshake::Handshake;
use super::shard::RdmaShard;
use super::RdmaError;

/// A new connection, as its handler receives it on the shard that owns it.
pub struct RdmaAccepted {
    pub conn: RdmaConnection,
    pub peer: Option<SocketAddr>,
    pub shard: ShardId,
}

/// An RDMA listener: one rdma_cm listening id on an acceptor shard, connections placed on
/// shards by a [`Placement`] policy (rdma_cm has no SO_REUSEPORT; the handoff is the only
/// mode, least-connections by default).
pub struct RdmaEndpoint {
    addr: SocketAddr,
    acceptor: ShardId,
    placement: Placement,
}

impl RdmaEndpoint {
    pub fn bind(addr: SocketAddr) -> RdmaEndpoint {
        RdmaEndpoint {
            addr,
            acceptor: 0,
            placement: Placement::LeastConnections,
        }
    }

    pub fn acceptor(mut self, shard: ShardId) -> Self {
        self.acceptor = shard;
        self
    }

    pub fn placement(mut self, placement: Placement) -> Self {
        self.placement = placement;
        self
    }

    /// Listen, and run `handler` for each established connection on its shard. The RDMA
    /// transport must be installed on `rt` ([`super::install`]).
    pub fn serve<H, Fut>(self, rt: &Runtime, handler: H) -> Result<RdmaServerHandle, RdmaError>
    where
        H: Fn(RdmaAccepted) -> Fut + Send + Sync + Clone + 'static,
        Fut: Future<Output = ()> + 'static,
    {
        let counts = Arc::new(ConnCounts::new(rt.shard_count()));
        let stop = Arc::new(StopSignal::default());
        let (counts2, stop2, placement, addr) =
            (counts.clone(), stop.clone(), self.placement, self.addr);
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let acceptor = rt.spawn_on(self.acceptor, move || async move {
            let listening = listen(addr);
            let (id, queue) = match listening {
                Ok(l) => {
                    let _ = ready_tx.send(Ok(()));
                    l
                }
                Err(e) => {
                    let _ = ready_tx.send(Err(e));
                    return;
                }
            };
            accept_loop(id, queue, counts2, stop2, placement, handler).await;
        });
        match ready_rx.recv() {
            Ok(Ok(())) => {}
            Ok(Err(e)) => return Err(e),
            Err(_) => return Err(RdmaError::Connect("the acceptor shard stopped".into())),
        }
        tracing::info!(%addr, "rdma listener ready");
        Ok(RdmaServerHandle {
            addr,
            counts,
            stop,
            acceptor,
        })
    }
}

fn listen(addr: SocketAddr) -> Result<(CmId, Rc<EventQueue>), RdmaError> {
    let shard = RdmaShard::current()?;
    let id = CmId::new(&shard.cm_channel).map_err(RdmaError::Device)?;
    id.bind_addr(addr).map_err(RdmaError::Device)?;
    id.listen(128).map_err(RdmaError::Device)?;
    let queue = shard.cm.register(id.key());
    Ok((id, queue))
}

async fn accept_loop<H, Fut>(
    id: CmId,
    queue: Rc<EventQueue>,
    counts: Arc<ConnCounts>,
    stop: Arc<StopSignal>,
    placement: Placement,
    handler: H,
) where
    H: Fn(RdmaAccepted) -> Fut + Send + Sync + Clone + 'static,
    Fut: Future<Output = ()> + 'static,
{
    let me = shard_id();
    while let Some(Some(mut ev)) = stop.run_until_stopped(queue.next()).await {
        if ev.kind() != CmEventKind::ConnectRequest {
            tracing::debug!(kind = ?ev.kind(), "listener event");
            continue;
        }
        let Some(new_id) = ev.take_conn_request() else {
            continue;
        };
        let hello = match Handshake::decode(ev.private_data()) {
            Ok(h) => h,
            Err(e) => {
                // Not a corewire peer (or a broken one): counted, and logged as a sample.
                report_protocol_error("rdma-handshake", new_id.peer_addr(), &e);
                reject_with_reason(&new_id, &e.to_string());
                continue;
            }
        };
        let target = counts.choose(&placement, me, new_id.peer_addr());
        let guard = counts.open_guard(target);
        let handler = handler.clone();
        let job = move || {
            spawn_local(accept_on_this_shard(
                new_id,
                hello,
                guard,
                target != me,
                handler,
            ));
        };
        if target != me {
            corewire_runtime::with_local_stats(|s| s.handoffs_out.incr());
        }
        if send_to(target, job).await.is_err() {
            tracing::error!(target, "rdma handoff to a missing shard");
        }
    }
    if let Ok(s) = RdmaShard::current() {
        s.cm.unregister(id.key());
    }
    drop(id);
}

async fn accept_on_this_shard<H, Fut>(
    mut id: CmId,
    hello: Handshake,
    guard: ConnGuard,
    handed_off: bool,
    handler: H,
) where
    H: Fn(RdmaAccepted) -> Fut,
    Fut: Future<Output = ()> + 'static,
{
    let shard = match RdmaShard::current() {
        Ok(s) => s,
        Err(e) => {
            tracing::error!(error = %e, "rdma connection handed to a shard without RDMA");
            reject_with_reason(&id, &e.to_string());
            return;
        }
    };
    if handed_off {
        corewire_runtime::with_local_stats(|s| s.handoffs_in.incr());
    }
    if !id.is_on(&shard.cm_channel) {
        if let Err(e) = id.migrate(&shard.cm_channel) {
            tracing::error!(error = %e, "rdma_migrate_id failed");
            reject_with_reason(&id, &format!("rdma_migrate_id failed: {e}"));
            return;
        }
    }
    let key = id.key();
    let queue = shard.cm.register(key);
    let peer = id.peer_addr();
    let refuse = |e: &RdmaError| {
        // A storm of connections past the shard's resources must not become a storm of log
        // lines: every refusal is counted, a sample is logged.
        shard.log_refusal(peer, e);
        let mut st = shard.stats.borrow_mut();
        st.connection_errors += 1;
        st.connections_refused += 1;
        drop(st);
        shard.cm.unregister(key);
    };
    let (core, reply) = match open_connection(&shard, id, hello.window, hello.chunk_size as usize) {
        Ok(opened) => opened,
        Err((e, refusal)) => {
            refuse(&e);
            refusal.reject(&e.to_string());
            return;
        }
    };
    let reply = reply.encode();
    let params = ConnParams {
        private_data: &reply,
        ..ConnParams::default()
    };
    if let Some(Err(e)) = core.qp_do(|qp| qp.cm_id().accept(&params)) {
        core.fail(format!("rdma_accept failed: {e}"));
        return;
    }
    if let Err(e) = expect_event(&queue, CmEventKind::Established, "establishment").await {
        core.fail(e.to_string());
        return;
    }
    core.run();
    spawn_local(watch_events(Rc::downgrade(&core), queue));
    // Counted by hand until the handoff shared with TCP (runtime/src/accept) serves RDMA.
    corewire_runtime::with_local_stats(|s| s.open_connections.incr());
    let conn = RdmaConnection::new(core);
    let _guard = guard;
    handler(RdmaAccepted {
        conn,
        peer,
        shard: shard_id(),
    })
    .await;
    corewire_runtime::with_local_stats(|s| s.open_connections.sub(1));
}

/// A running RDMA listener.
pub struct RdmaServerHandle {
    addr: SocketAddr,
    counts: Arc<ConnCounts>,
    stop: Arc<StopSignal>,
    acceptor: corewire_runtime::RemoteHandle<()>,
}

impl RdmaServerHandle {
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    pub fn open_connections(&self) -> Vec<usize> {
        self.counts.open()
    }

    pub fn placed_connections(&self) -> Vec<u64> {
        self.counts.placed()
    }

    /// Stop accepting (the listening id is destroyed); open connections carry on.
    pub fn stop(self) {
        self.stop.stop();
        let _ = self.acceptor.wait();
    }
}
