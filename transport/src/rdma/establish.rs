//! The rdma_cm steps both ends of a connection share: the handshake each side offers, the
//! queue pair created on the shard's CQ (its CQ entries reserved first), rejections that
//! carry their reason, waiting for one event, and forwarding an established connection's
//! events to it. [`super::connect`] is the client's side, [`super::listen`] the server's.

use std::rc::Rc;
use std::time::Duration;

use corewire_runtime::timeout;
use corewire_verbs::{CmEventKind, CmId, Context, QpInit, QueuePair, MAX_REJECT_PRIVATE_DATA};

use super::cm_events::EventQueue;
use super::conn::{cq_entries_needed, queue_sizes, ConnCore, ConnParts};
use super::handshake::{self, Handshake};
use super::shard::RdmaShard;
use super::{RdmaError, Rejection};

pub(crate) const RESOLVE_TIMEOUT: Duration = Duration::from_secs(5);
/// Soft-RoCE under emulation is slow to establish; generous, but bounded.
const ESTABLISH_TIMEOUT: Duration = Duration::from_secs(20);

/// The handshake we send: the grants the peer starts with and our buffer size.
pub(crate) fn handshake_of(shard: &RdmaShard, granted: u32) -> Handshake {
    Handshake {
        window: granted,
        chunk_size: shard.config().chunk_size as u32,
    }
}

/// What is left to refuse a peer through when set-up fails.
pub(crate) enum Refusal {
    Id(CmId),
    Qp(Box<QueuePair>),
    /// The connection started and was torn down already (it disconnected the peer).
    Gone,
}

impl Refusal {
    /// Refuse the peer, telling it why (a server's refusal; a client just drops it).
    pub(crate) fn reject(self, reason: &str) {
        match self {
            Refusal::Id(id) => reject_with_reason(&id, reason),
            Refusal::Qp(qp) => reject_with_reason(qp.cm_id(), reason),
            Refusal::Gone => {}
        }
    }
}

/// Open a connection on the device rdma_cm bound `id` to (this shard opens it on first
/// use): reserve the queue pair's CQ entries (a connection the CQ cannot hold is refused
/// rather than allowed to overrun it), create it on the device's CQ and shared receive
/// queue, grant the peer its first credits and start the connection. Returns it with the
/// handshake to send.
pub(crate) fn open_connection(
    shard: &Rc<RdmaShard>,
    id: CmId,
    peer_window: u32,
    peer_chunk: usize,
) -> Result<(Rc<ConnCore>, Handshake), (RdmaError, Refusal)> {
    let device = match Context::from_cm_id(&id)
        .map_err(RdmaError::Device)
        .and_then(|ctx| shard.device(ctx))
    {
        Ok(d) => d,
        Err(e) => return Err((e, Refusal::Id(id))),
    };
    let config = shard.config();
    let caps = queue_sizes(&config);
    let mut cq = match device.reserve_cq(cq_entries_needed(&caps)) {
        Ok(r) => r,
        Err(e) => return Err((RdmaError::CqFull(e), Refusal::Id(id))),
    };
    let qp = QueuePair::create(
        id,
        &device.pd,
        QpInit {
            send_cq: &device.cq,
            recv_cq: &device.cq,
            srq: device.srq.as_ref().map(|s| &s.srq),
            caps,
            sq_sig_all: false,
        },
    )
    .map_err(|e| (RdmaError::Device(e.error), Refusal::Id(e.id)))?;
    cq.mark_used();
    let granted = device.initial_grants(config.window);
    let parts = ConnParts {
        device: device.clone(),
        qp,
        cq,
        granted,
        peer_window,
        peer_chunk,
    };
    match ConnCore::start(shard, parts) {
        Ok(core) => Ok((core, handshake_of(shard, granted))),
        Err((e, Some(qp))) => {
            device.return_grants(granted);
            Err((e, Refusal::Qp(Box::new(qp))))
        }
        Err((e, None)) => Err((e, Refusal::Gone)),
    }
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
        Err(elapsed) => Err(RdmaError::connect_because(
            format!("timed out waiting for {what}"),
            elapsed,
        )),
        Ok(None) => Err(RdmaError::connect(format!(
            "closed while waiting for {what}"
        ))),
        Ok(Some(ev)) if ev.kind() == want => Ok(ev),
        Ok(Some(ev)) if ev.kind() == CmEventKind::Rejected => Err(RdmaError::Rejected(
            Rejection::new(handshake::decode_reject(ev.private_data()), ev.status()),
        )),
        Ok(Some(ev)) => {
            let context = format!("{what} failed: {:?} (status {})", ev.kind(), ev.status());
            // rdma_cm reports a failed resolution or connection as a negative errno.
            Err(match ev.status() {
                s if s < 0 => {
                    RdmaError::connect_because(context, std::io::Error::from_raw_os_error(-s))
                }
                _ => RdmaError::connect(context),
            })
        }
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
