//! `CmEvent`: an owned copy of one `rdma_cm_event`.

use crate::cm::{CmId, CmIdKey};
use crate::sys;

/// `rdma_cm_event_type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum CmEventKind {
    /// `resolve_addr` finished: the id is bound to a device.
    AddrResolved,
    /// Address resolution failed.
    AddrError,
    /// `resolve_route` finished: the id can connect.
    RouteResolved,
    /// Route resolution failed.
    RouteError,
    /// A peer wants to connect: [`CmEvent::take_conn_request`] holds the new id.
    ConnectRequest,
    /// A reply to a connect on an id without a queue pair.
    ConnectResponse,
    /// Connecting failed (a protocol error during set-up).
    ConnectError,
    /// The peer did not answer the connect.
    Unreachable,
    /// The peer refused the connection (its private data may say why).
    Rejected,
    /// The connection is up.
    Established,
    /// The connection ended (either side).
    Disconnected,
    /// The id's device is going away.
    DeviceRemoval,
    /// A multicast join finished.
    MulticastJoin,
    /// A multicast join failed.
    MulticastError,
    /// The id's network address changed.
    AddrChange,
    /// The queue pair left the time-wait state and may be reused.
    TimewaitExit,
    /// An event this crate does not know (its raw value).
    Other(u32),
}

impl CmEventKind {
    /// The kind of a raw `rdma_cm_event_type` value.
    pub fn from_raw(raw: u32) -> Self {
        use sys::rdma_cm_event_type::*;
        match raw {
            RDMA_CM_EVENT_ADDR_RESOLVED => CmEventKind::AddrResolved,
            RDMA_CM_EVENT_ADDR_ERROR => CmEventKind::AddrError,
            RDMA_CM_EVENT_ROUTE_RESOLVED => CmEventKind::RouteResolved,
            RDMA_CM_EVENT_ROUTE_ERROR => CmEventKind::RouteError,
            RDMA_CM_EVENT_CONNECT_REQUEST => CmEventKind::ConnectRequest,
            RDMA_CM_EVENT_CONNECT_RESPONSE => CmEventKind::ConnectResponse,
            RDMA_CM_EVENT_CONNECT_ERROR => CmEventKind::ConnectError,
            RDMA_CM_EVENT_UNREACHABLE => CmEventKind::Unreachable,
            RDMA_CM_EVENT_REJECTED => CmEventKind::Rejected,
            RDMA_CM_EVENT_ESTABLISHED => CmEventKind::Established,
            RDMA_CM_EVENT_DISCONNECTED => CmEventKind::Disconnected,
            RDMA_CM_EVENT_DEVICE_REMOVAL => CmEventKind::DeviceRemoval,
            RDMA_CM_EVENT_MULTICAST_JOIN => CmEventKind::MulticastJoin,
            RDMA_CM_EVENT_MULTICAST_ERROR => CmEventKind::MulticastError,
            RDMA_CM_EVENT_ADDR_CHANGE => CmEventKind::AddrChange,
            RDMA_CM_EVENT_TIMEWAIT_EXIT => CmEventKind::TimewaitExit,
            other => CmEventKind::Other(other),
        }
    }

    /// An attempt to connect failed (the client may retry with a new id).
    pub fn is_connect_failure(self) -> bool {
        matches!(
            self,
            CmEventKind::AddrError
                | CmEventKind::RouteError
                | CmEventKind::ConnectError
                | CmEventKind::Unreachable
                | CmEventKind::Rejected
        )
    }
}

/// One connection-manager event, already acknowledged.
///
/// The event is copied out and acknowledged (`rdma_ack_cm_event`) inside
/// [`CmEventChannel::get_event`](crate::CmEventChannel::get_event), not when this value
/// drops: `rdma_destroy_id` and `rdma_migrate_id` block until every event of their id has
/// been acknowledged, so an unacknowledged event kept alive past a drop or migrate of its
/// id would hang the shard.
#[derive(Debug)]
pub struct CmEvent {
    pub(crate) kind: CmEventKind,
    pub(crate) status: i32,
    pub(crate) read_depths: crate::cm::ReadDepths,
    pub(crate) id: CmIdKey,
    pub(crate) listen_id: Option<CmIdKey>,
    pub(crate) private_data: Vec<u8>,
    pub(crate) conn_request: Option<CmId>,
}

impl CmEvent {
    /// What happened.
    pub fn kind(&self) -> CmEventKind {
        self.kind
    }

    /// The event's status: 0, a negative errno, or (for `Rejected`) the IB CM reject reason.
    pub fn status(&self) -> i32 {
        self.status
    }

    /// For `ConnectRequest`: the most READs each way the request allows, from this (the
    /// passive) side's point of view (the IB CM swapped the peer's fields: our
    /// `responder_resources` is its initiator depth); settle the accept's with
    /// [`ReadDepths::accept`](crate::ReadDepths::accept).
    pub fn read_depths(&self) -> crate::cm::ReadDepths {
        self.read_depths
    }

    /// The id the event is about (for `ConnectRequest`, the new id).
    pub fn id_key(&self) -> CmIdKey {
        self.id
    }

    /// For `ConnectRequest`: the listening id that received it.
    pub fn listen_id_key(&self) -> Option<CmIdKey> {
        self.listen_id
    }

    /// Private data sent with a connect request, accept or reject. The IB CM transports it
    /// in fixed-size fields, so it may come back zero-padded (e.g. to 56 bytes for a
    /// request): protocols must carry their own length.
    pub fn private_data(&self) -> &[u8] {
        &self.private_data
    }

    /// For `ConnectRequest`: the new id, to accept (after creating its QP) or reject.
    /// Dropping it unaccepted destroys it, which rejects the peer.
    pub fn take_conn_request(&mut self) -> Option<CmId> {
        self.conn_request.take()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn event_types_map_and_unknown_is_kept() {
        assert_eq!(
            CmEventKind::from_raw(sys::rdma_cm_event_type::RDMA_CM_EVENT_ESTABLISHED),
            CmEventKind::Established
        );
        assert_eq!(
            CmEventKind::from_raw(sys::rdma_cm_event_type::RDMA_CM_EVENT_CONNECT_REQUEST),
            CmEventKind::ConnectRequest
        );
        assert_eq!(CmEventKind::from_raw(1234), CmEventKind::Other(1234));
    }

    #[test]
    fn connect_failures_are_classified() {
        assert!(CmEventKind::Rejected.is_connect_failure());
        assert!(CmEventKind::Unreachable.is_connect_failure());
        assert!(!CmEventKind::Established.is_connect_failure());
        assert!(!CmEventKind::Disconnected.is_connect_failure());
    }
}
