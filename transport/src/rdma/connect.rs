//! The client's side of connection set-up: resolve the address and route, create the queue
//! pair on this shard's CQ, post its receive buffers, connect, and learn the server's window
//! from its accept.

use std::net::SocketAddr;
use std::rc::Rc;

use corewire_runtime::spawn_local;
use corewire_verbs::{CmEventKind, CmId, ConnParams};

use super::conn::{ConnCore, Failure, RdmaConnection, Setup};
use super::establish::{expect_event, open_connection, watch_events, RESOLVE_TIMEOUT};
use super::handshake::Handshake;
use super::shard::RdmaShard;
use super::RdmaError;

/// Connect to an RDMA listener from the current shard.
pub async fn connect(addr: SocketAddr) -> Result<RdmaConnection, RdmaError> {
    let shard = RdmaShard::current()?;
    let id = CmId::new(&shard.cm_channel).map_err(RdmaError::Device)?;
    let key = id.key();
    let queue = shard.cm.register(key);
    let result = async {
        // From the chosen device's address, if one was chosen: rdma_cm routes by it.
        let source = shard.selected.source.map(|ip| SocketAddr::new(ip, 0));
        id.resolve_addr(source, addr, RESOLVE_TIMEOUT)
            .map_err(RdmaError::Device)?;
        expect_event(&queue, CmEventKind::AddrResolved, "address resolution").await?;
        id.resolve_route(RESOLVE_TIMEOUT).map_err(RdmaError::Device)?;
        expect_event(&queue, CmEventKind::RouteResolved, "route resolution").await?;
        // The peer's window is unknown until it accepts: start with none, set it below.
        let chunk_size = shard.config().chunk_size;
        let (core, hello) =
            open_connection(&shard, id, 0, chunk_size).map_err(|(e, _refusal)| e)?;
        let hello = hello.encode();
        let depths = core.read_depths_wanted();
        let params = {
 let mut o = ConnParams::default();
 o.private_data = &hello;
 o.retry_count = shard.config().retry_count;
 o.responder_resources = depths.responder_resources;
 o.initiator_depth = depths.initiator_depth;
 o
};
        if let Some(Err(e)) = set_ack_timeout(&shard, &core) {
            core.fail(Failure::Setup(Setup::AckTimeout(e.clone())));
            return Err(RdmaError::Device(e));
        }
        if let Some(Err(e)) = core.qp_do(|qp| qp.cm_id().connect(&params)) {
            core.fail(Failure::Setup(Setup::Connect(e.clone())));
            return Err(RdmaError::Device(e));
        }
        let ev = match expect_event(&queue, CmEventKind::Established, "connection").await {
            Ok(ev) => ev,
            Err(e) => {
                core.fail(Failure::Setup(Setup::NotEstablished(e.to_string())));
                return Err(e);
            }
        };
        let peer = match Handshake::decode(ev.private_data()) {
            Ok(h) => h,
            Err(e) => {
                core.fail(Failure::Setup(Setup::Handshake(e.clone())));
                return Err(RdmaError::Handshake(e));
            }
        };
        if (peer.chunk_size as usize) < chunk_size {
            let e = RdmaError::connect(format!(
                "server buffers ({} B) are smaller than ours; both ends must use the same chunk size",
                peer.chunk_size
            ));
            core.fail(Failure::Setup(Setup::ServerChunk {
                bytes: peer.chunk_size,
            }));
            return Err(e);
        }
        core.set_peer(peer.window);
        Ok(core)
    }
    .await;
    match result {
        Ok(core) => {
            core.run();
            spawn_local(watch_events(Rc::downgrade(&core), queue));
            Ok(RdmaConnection::new(core))
        }
        Err(e) => {
            shard.cm.unregister(key);
            Err(e)
        }
    }
}

/// Apply `RdmaConfig::ack_timeout` to a connection's queue pair before it connects or accepts.
pub(crate) fn set_ack_timeout(
    shard: &RdmaShard,
    core: &ConnCore,
) -> Option<Result<(), corewire_verbs::VerbsError>> {
    let exponent = shard.config().ack_timeout?;
    core.qp_do(|qp| qp.cm_id().set_ack_timeout(exponent))
}
