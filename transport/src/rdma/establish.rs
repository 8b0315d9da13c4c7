//! The rdma_cm steps both ends of a connection share: the handshake each side offers, the
//! queue pair created on the shard's CQ (its CQ entries reserved first), rejections that
//! carry their reason, waiting for one event, and forwarding an established connection's
//! events to it. [`super::connect`] is the client's side, [`super::listen`] the server's.

use std::rc::Rc;
use std::time::Duration;

use corewire_runtime::timeout;
use corewire_verbs::{CmEventKind, CmId, QpInit, QueuePair, MAX_REJECT_PRIVATE_DATA};

use super::cm_events::EventQueue;
use super::conn::{cq_entries_needed, queue_sizes, ConnCore};
use super::handshake::{self, Handshake};
use super::shard::{CqReservation, RdmaShard};
use super::RdmaError;

pub(crate) const RESOLVE_TIMEOUT: Duration = Duration::from_secs(5);
/// Soft-RoCE under emulation is slow to establish; generous, but bounded.
const ESTABLISH_TIMEOUT: Duration = Duration::from_secs(20);

pub(crate) fn handshake_of(shard: &RdmaShard) -> Handshake {
    let c = shard.config.get();
    Handshake {
        window: c.window,
        chunk_size: c.chunk_size as u32,
    }
}

pub(crate) fn create_qp(
    shard: &Rc<RdmaShard>,
    id: CmId,
) -> Result<(QueuePair, CqReservation), RdmaError> {
    create_qp_or_give_back(shard, id).map_err(|(e, _id)| e)
}

/// Like `create_qp`, but hands the id back on failure so the caller can reject it. The
/// queue pair's CQ entries are reserved first: a connection the shard's CQ cannot hold is
/// refused rather than allowed to overrun it.
pub(crate) fn create_qp_or_give_back(
    shard: &Rc<RdmaShard>,
    id: CmId,
) -> Result<(QueuePair, CqReservation), (RdmaError, CmId)> {
    let caps = queue_sizes(&shard.config.get());
    let mut reservation = match shard.reserve_cq(cq_entries_needed(&caps)) {
        Ok(r) => r,
        Err(e) => return Err((RdmaError::CqFull(e), id)),
    };
    let qp = QueuePair::create(
        id,
        &shard.pd,
        QpInit {
            send_cq: &shard.cq,
            recv_cq: &shard.cq,
            srq: None,
            caps,
            sq_sig_all: false,
        },
    )
    .map_err(|e| (RdmaError::Device(e.error), e.id))?;
    reservation.mark_used();
    Ok((qp, reservation))
}

/// Refuse a connect request, telling the client why.
pub(crate) fn reject_with_reason(id: &CmId, reason: &str) {
    let _ = id.reject(&handshake::encode_reject(reason, MAX_REJECT_PRIVATE_DATA));
}

pub(crate) async fn expect_event(
    queue: &EventQueue,
    want: CmEventKind,
    what: &str,
) -> Result<corewire_verbs::CmEvent, RdmaError> {
    match timeout(ESTABLISH_TIMEOUT, queue.next()).await {
        Err(_) => Err(RdmaError::Connect(format!("timed out waiting for {what}"))),
        Ok(None) => Err(RdmaError::Connect(format!(
            "closed while waiting for {what}"
        ))),
        Ok(Some(ev)) if ev.kind() == want => Ok(ev),
        Ok(Some(ev)) if ev.kind() == CmEventKind::Rejected => Err(RdmaError::Rejected(
            handshake::decode_reject(ev.private_data())
                .unwrap_or_else(|| format!("no reason given (reject status {})", ev.status())),
        )),
        Ok(Some(ev)) => Err(RdmaError::Connect(format!(
            "{what} failed: {:?} (status {})",
            ev.kind(),
            ev.status()
        ))),
    }
}

/// Forward rdma_cm events of an established connection (disconnects) to it.
pub(crate) async fn watch_events(core: std::rc::Weak<ConnCore>, queue: Rc<EventQueue>) {
    while let Some(ev) = queue.next().await {
        let Some(core) = core.upgrade() else { return };
        match ev.kind() {
            CmEventKind::Disconnected | CmEventKind::DeviceRemoval => {
                core.peer_disconnected();
                return;
            }
            CmEventKind::TimewaitExit => {}
            other => tracing::debug!(?other, "rdma_cm event on an open connection"),
        }
    }
}
