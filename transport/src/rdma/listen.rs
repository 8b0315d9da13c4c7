//! The server's side of connection set-up: one rdma_cm listening id on an acceptor shard;
//! each connect request goes to the shard a placement policy picks, which migrates the id to
//! its own event channel, creates the queue pair on its own CQ, posts its receive buffers
//! and accepts.

use std::future::Future;
use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::Arc;

use corewire_runtime::accept::{Arrived, Handoff, ListenerHandle, Placement, StopSignal};
use corewire_runtime::{report_protocol_error, shard_id, spawn_local, Runtime, ShardId};
use corewire_verbs::{CmEventKind, CmId, ConnParams, Context, ReadDepths};

use super::cm_events::EventQueue;
use super::conn::{Failure, RdmaConnection, Setup};
use super::establish::{expect_event, open_connection, reject_with_reason, watch_events};
use super::handshake::Handshake;
use super::shard::RdmaShard;
use super::RdmaError;
use crate::listen::{ConnSettings, Listener};

/// A new connection, as its handler receives it on the shard that owns it.
#[non_exhaustive]
pub struct RdmaAccepted {
    /// The connection, on the shard it runs on.
    pub conn: RdmaConnection,
    /// The peer's address, when known.
    pub peer: Option<SocketAddr>,
    /// The shard the connection runs on.
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
    /// An endpoint at `addr`, accepting on shard 0.
    pub fn bind(addr: SocketAddr) -> RdmaEndpoint {
        RdmaEndpoint {
            addr,
            acceptor: 0,
            placement: Placement::LeastConnections,
        }
    }

    /// The shard that accepts (rdma_cm events arrive there).
    pub fn acceptor(mut self, shard: ShardId) -> Self {
        self.acceptor = shard;
        self
    }

    /// Where accepted connections go (default: the shard with the fewest).
    pub fn placement(mut self, placement: Placement) -> Self {
        self.placement = placement;
        self
    }

    /// Listen, and run `handler` for each established connection on its shard. The RDMA
    /// transport must be installed on `rt` ([`super::install`]). Blocks until the acceptor
    /// shard listens.
    ///
    /// # Panics
    /// On a shard thread, where waiting for the acceptor would stall the shard (and
    /// deadlock when it is the acceptor).
    #[track_caller]
    pub fn serve<H, Fut>(self, rt: &Runtime, handler: H) -> Result<ListenerHandle, RdmaError>
    where
        H: Fn(RdmaAccepted) -> Fut + Send + Sync + Clone + 'static,
        Fut: Future<Output = ()> + 'static,
    {
        corewire_runtime::assert_can_block("RdmaEndpoint::serve");
        let handoff = Handoff::new(rt.shard_count(), Some(self.placement));
        let stop = Arc::new(StopSignal::default());
        let (handoff2, stop2, addr) = (handoff.clone(), stop.clone(), self.addr);
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let acceptor = rt.spawn_on(self.acceptor, move || async move {
            let listening = listen(addr);
            let (id, queue) = match listening {
                Ok(l) => {
                    let bound = l.0.local_addr().unwrap_or(addr);
                    let _ = ready_tx.send(Ok(bound));
                    l
                }
                Err(e) => {
                    let _ = ready_tx.send(Err(e));
                    return;
                }
            };
            accept_loop(id, queue, handoff2, stop2, handler).await;
        });
        let addr = match ready_rx.recv() {
            Ok(Ok(bound)) => bound,
            Ok(Err(e)) => return Err(e),
            Err(_) => return Err(RdmaError::connect("the acceptor shard stopped")),
        };
        tracing::info!(%addr, "rdma listener ready");
        Ok(ListenerHandle::new(
            addr,
            handoff.counts().clone(),
            stop,
            vec![acceptor],
        ))
    }
}

fn listen(addr: SocketAddr) -> Result<(CmId, Rc<EventQueue>), RdmaError> {
    let shard = RdmaShard::current()?;
    let id = CmId::new(&shard.cm_channel).map_err(RdmaError::Device)?;
    // A wildcard address listens on every device: with a device chosen, on its address only.
    let addr = match shard.selected.source {
        Some(ip) if addr.ip().is_unspecified() => SocketAddr::new(ip, addr.port()),
        _ => addr,
    };
    id.bind_addr(addr).map_err(RdmaError::Device)?;
    if let Some(chosen) = &shard.selected.device {
        let bound = Context::from_cm_id(&id).map(|c| c.device_name());
        if bound.as_ref().is_ok_and(|name| name != chosen) {
            return Err(RdmaError::connect(format!(
                "{addr} is on RDMA device {:?}, not the chosen {chosen:?} (RdmaConfig::device)",
                bound.unwrap_or_default()
            )));
        }
    }
    id.listen(128).map_err(RdmaError::Device)?;
    let queue = shard.cm.register(id.key());
    Ok((id, queue))
}

async fn accept_loop<H, Fut>(
    id: CmId,
    queue: Rc<EventQueue>,
    handoff: Handoff,
    stop: Arc<StopSignal>,
    handler: H,
) where
    H: Fn(RdmaAccepted) -> Fut + Send + Sync + Clone + 'static,
    Fut: Future<Output = ()> + 'static,
{
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
        let offered = ev.read_depths();
        let placed = handoff.place(new_id.peer_addr());
        let handler = handler.clone();
        handoff
            .deliver(placed, move |arrived| {
                spawn_local(accept_on_this_shard(
                    new_id, hello, offered, arrived, handler,
                ));
            })
            .await;
    }
    if let Ok(s) = RdmaShard::current() {
        s.cm.unregister(id.key());
    }
    drop(id);
}

async fn accept_on_this_shard<H, Fut>(
    mut id: CmId,
    hello: Handshake,
    offered: ReadDepths,
    arrived: Arrived,
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
    // READs each way: no more than the peer offered to serve and to issue.
    let depths = core.read_depths_wanted().accept(offered);
    let params = {
        let mut o = ConnParams::default();
        o.private_data = &reply;
        o.retry_count = shard.config().retry_count;
        o.responder_resources = depths.responder_resources;
        o.initiator_depth = depths.initiator_depth;
        o
    };
    if let Some(Err(e)) = super::connect::set_ack_timeout(&shard, &core) {
        core.fail(Failure::Setup(Setup::AckTimeout(e)));
        return;
    }
    if let Some(Err(e)) = core.qp_do(|qp| qp.cm_id().accept(&params)) {
        core.fail(Failure::Setup(Setup::Accept(e)));
        return;
    }
    if let Err(e) = expect_event(&queue, CmEventKind::Established, "establishment").await {
        core.fail(Failure::Setup(Setup::NotEstablished(e.to_string())));
        return;
    }
    core.run();
    spawn_local(watch_events(Rc::downgrade(&core), queue));
    let conn = RdmaConnection::new(core);
    let _arrived = arrived;
    handler(RdmaAccepted {
        conn,
        peer,
        shard: shard_id(),
    })
    .await;
}

/// RDMA connections take their frame limits and send-queue bound from the [`super::RdmaConfig`]
/// the transport was installed with, not from the server's [`ConnSettings`].
impl Listener for RdmaEndpoint {
    type Conn = RdmaConnection;
    type Error = RdmaError;

    fn listen<H, Fut>(
        self,
        rt: &Runtime,
        _settings: ConnSettings,
        handler: H,
    ) -> Result<ListenerHandle, RdmaError>
    where
        H: Fn(RdmaConnection) -> Fut + Send + Sync + Clone + 'static,
        Fut: Future<Output = ()> + 'static,
    {
        self.serve(rt, move |accepted: RdmaAccepted| handler(accepted.conn))
    }
}
