//! The RDMA connection manager: event channels and ids (`rdma_cm_id`).

use std::marker::PhantomData;
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, RawFd};
use std::ptr::{null_mut, NonNull};
use std::sync::Arc;
use std::time::Duration;

use crate::addr::{self, RawSockAddr};
use crate::cm_event::{CmEvent, CmEventKind};
use crate::error::{check_ret, last_errno, Result, VerbsError};
use crate::fd::set_nonblocking;
use crate::sys;

/// Private data a connect request can carry over the IB CM (RoCE included).
pub const MAX_CONNECT_PRIVATE_DATA: usize = 56;
/// Private data an accept can carry.
pub const MAX_ACCEPT_PRIVATE_DATA: usize = 196;
/// Private data a reject can carry.
pub const MAX_REJECT_PRIVATE_DATA: usize = 148;

/// An rdma_cm event channel: a non-blocking fd that becomes readable when one of its ids has
/// an event. Cheap to clone. Not `Send` (a shard owns it); ids that live on it keep it open
/// (see [`CmId`]).
#[derive(Clone)]
pub struct CmEventChannel {
    inner: Arc<ChannelInner>,
    _shard_owned: PhantomData<*const ()>,
}

pub(crate) struct ChannelInner {
    ptr: NonNull<sys::rdma_event_channel>,
}

// SAFETY: an rdma_event_channel is an fd plus that int; librdmacm does not tie it to a
// thread. It is shared between threads only through CmId (which may migrate) holding this
// Arc to keep the channel open for rdma_destroy_id; concurrent get_event calls are reads of
// the fd, which the kernel serialises, and each returned event is owned by its caller.
unsafe impl Send for ChannelInner {}
// SAFETY: see Send; no method takes &mut or mutates Rust-visible state.
unsafe impl Sync for ChannelInner {}

impl Drop for ChannelInner {
    fn drop(&mut self) {
        // SAFETY: created by rdma_create_event_channel; every CmId on it holds this Arc, so
        // no id uses it any more.
        unsafe { sys::rdma_destroy_event_channel(self.ptr.as_ptr()) };
    }
}

impl CmEventChannel {
    /// `rdma_create_event_channel`, with its fd set non-blocking.
    pub fn new() -> Result<Self> {
        sys::load()?;
        // SAFETY: no arguments; returns NULL (errno set) on failure.
        let ch = unsafe { sys::rdma_create_event_channel() };
        let ptr = NonNull::new(ch).ok_or_else(|| VerbsError::last("rdma_create_event_channel"))?;
        let channel = CmEventChannel {
            inner: Arc::new(ChannelInner { ptr }),
            _shard_owned: PhantomData,
        };
        set_nonblocking(channel.as_raw_fd())?;
        Ok(channel)
    }

    /// The next event, or `None` when none is pending. See [`CmEvent`] for why the event
    /// is acknowledged here already.
    pub fn get_event(&self) -> Result<Option<CmEvent>> {
        let mut ev: *mut sys::rdma_cm_event = null_mut();
        // SAFETY: the channel is live; ev is an out-pointer.
        let rc = unsafe { sys::rdma_get_cm_event(self.inner.ptr.as_ptr(), &mut ev) };
        if rc != 0 {
            let errno = last_errno();
            if errno == libc::EAGAIN {
                return Ok(None);
            }
            return Err(VerbsError::Call {
                call: "rdma_get_cm_event",
                errno,
            });
        }
        // SAFETY: on success ev points to a valid event until rdma_ack_cm_event below. For
        // ids with RDMA_PS_TCP (the only kind this crate creates) `param.conn` is the live
        // union member, and private_data points to private_data_len readable bytes.
        let event = unsafe {
            let e = &*ev;
            let kind = CmEventKind::from_raw(e.event);
            let conn = &e.param.conn;
            let private_data = if conn.private_data.is_null() || conn.private_data_len == 0 {
                Vec::new()
            } else {
                std::slice::from_raw_parts(
                    conn.private_data.cast::<u8>(),
                    usize::from(conn.private_data_len),
                )
                .to_vec()
            };
            // A connect request's id is new and ours to accept or destroy. librdmacm put
            // it on the listener's channel, which is this one.
            let conn_request = (kind == CmEventKind::ConnectRequest)
                .then(|| NonNull::new(e.id))
                .flatten()
                .map(|ptr| CmId {
                    ptr,
                    channel: self.inner.clone(),
                });
            CmEvent {
                kind,
                status: e.status,
                read_depths: ReadDepths {
                    responder_resources: conn.responder_resources,
                    initiator_depth: conn.initiator_depth,
                },
                id: CmIdKey(e.id as usize),
                listen_id: NonNull::new(e.listen_id).map(|p| CmIdKey(p.as_ptr() as usize)),
                private_data,
                conn_request,
            }
        };
        // SAFETY: ev came from rdma_get_cm_event and is acked exactly once; nothing above
        // kept a pointer into it.
        let rc = unsafe { sys::rdma_ack_cm_event(ev) };
        check_ret("rdma_ack_cm_event", rc)?;
        Ok(Some(event))
    }
}

impl std::os::fd::AsFd for CmEventChannel {
    fn as_fd(&self) -> std::os::fd::BorrowedFd<'_> {
        // SAFETY: the channel owns this descriptor until it is destroyed, which cannot happen
        // while `self` is borrowed.
        unsafe { std::os::fd::BorrowedFd::borrow_raw(self.as_raw_fd()) }
    }
}

impl AsRawFd for CmEventChannel {
    fn as_raw_fd(&self) -> RawFd {
        // SAFETY: the channel is live; fd is a plain field.
        unsafe { (*self.inner.ptr.as_ptr()).fd }
    }
}

impl std::fmt::Debug for CmEventChannel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CmEventChannel")
            .field("fd", &self.as_raw_fd())
            .finish()
    }
}

/// Identifies an rdma_cm id in events (compare with [`CmId::key`]). Unique among live ids;
/// a destroyed id's key may be reused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct CmIdKey(usize);

/// How many RDMA READs may be outstanding on a connection, each way: what a connect request
/// offers ([`CmEvent::read_depths`]) and what [`ConnParams`] asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct ReadDepths {
    /// Outstanding RDMA READs the peer may issue to us (our `max_dest_rd_atomic`).
    pub responder_resources: u8,
    /// Outstanding RDMA READs we may issue (our `max_rd_atomic`).
    pub initiator_depth: u8,
}

impl ReadDepths {
    /// The same depth both ways.
    pub fn both(depth: u8) -> ReadDepths {
        ReadDepths {
            responder_resources: depth,
            initiator_depth: depth,
        }
    }

    /// What the passive side may accept when a connect request allows `offered` (as
    /// [`CmEvent::read_depths`](crate::CmEvent::read_depths) reports it: already from the
    /// passive side's point of view, the IB CM swaps the request's fields, so its
    /// `responder_resources` is the READs the peer will issue and its `initiator_depth` the
    /// READs the peer serves). Never more than that either way: a READ past the peer's
    /// resources breaks the connection.
    pub fn accept(self, offered: ReadDepths) -> ReadDepths {
        ReadDepths {
            responder_resources: self.responder_resources.min(offered.responder_resources),
            initiator_depth: self.initiator_depth.min(offered.initiator_depth),
        }
    }
}

/// Connection parameters for [`CmId::connect`] / [`CmId::accept`].
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub struct ConnParams<'a> {
    /// At most [`MAX_CONNECT_PRIVATE_DATA`] (connect) / [`MAX_ACCEPT_PRIVATE_DATA`] (accept).
    pub private_data: &'a [u8],
    /// Outstanding RDMA READs the peer may issue to us.
    pub responder_resources: u8,
    /// Outstanding RDMA READs we may issue.
    pub initiator_depth: u8,
    /// Transport retries (0..=7).
    pub retry_count: u8,
    /// Receiver-not-ready retries (0..=7; 7 = retry forever).
    pub rnr_retry_count: u8,
}

impl Default for ConnParams<'_> {
    fn default() -> Self {
        ConnParams {
            private_data: &[],
            responder_resources: 1,
            initiator_depth: 1,
            retry_count: 7,
            rnr_retry_count: 7,
        }
    }
}

impl ConnParams<'_> {
    pub(crate) fn to_raw(self, max_private_data: usize) -> Result<sys::rdma_conn_param> {
        let len = self.private_data.len();
        if len > max_private_data {
            return Err(VerbsError::PrivateDataTooLong {
                len,
                max: max_private_data,
            });
        }
        if self.retry_count > 7 || self.rnr_retry_count > 7 {
            return Err(VerbsError::InvalidArgument(
                "retry_count and rnr_retry_count are 3-bit fields (0..=7)",
            ));
        }
        Ok(sys::rdma_conn_param {
            private_data: if len == 0 {
                std::ptr::null()
            } else {
                self.private_data.as_ptr().cast()
            },
            // len <= 196 was checked above
            private_data_len: len as u8,
            responder_resources: self.responder_resources,
            initiator_depth: self.initiator_depth,
            flow_control: 1,
            retry_count: self.retry_count,
            rnr_retry_count: self.rnr_retry_count,
            // librdmacm fills qp_num and srq from the id's QP when it has one.
            srq: 0,
            qp_num: 0,
        })
    }
}

fn timeout_ms(timeout: Duration) -> i32 {
    i32::try_from(timeout.as_millis()).unwrap_or(i32::MAX)
}

/// An rdma_cm id (`rdma_cm_id`, reliable-connected, RDMA_PS_TCP): a listener or one side of
/// a connection. Dropping it destroys it (after its QP: a [`QueuePair`](crate::QueuePair)
/// owns its id and destroys the QP first).
///
/// `CmId` is `Send` so that a listening shard can hand an accepted id to the shard that
/// will own the connection, which then calls [`CmId::migrate`] to move its events to its
/// own channel. That is sound because:
/// - librdmacm ids are not tied to a thread: every call takes the id's own mutex and talks
///   to the kernel through the channel fd, and the kernel routes later events to whichever
///   channel the id is on;
/// - a `CmId` is the unique owner of its id (not `Clone`, not `Sync`), so moving it moves
///   all access; events already copied out on the old thread are plain data;
/// - the channel it lives on is kept open by an `Arc` whose inner is `Send + Sync`, so the
///   id can still be destroyed after the old shard dropped its channel.
///
/// Once a QP exists on it the id is inside a `QueuePair`, which is not `Send`.
pub struct CmId {
    ptr: NonNull<sys::rdma_cm_id>,
    channel: Arc<ChannelInner>,
}

// SAFETY: see the type's documentation.
unsafe impl Send for CmId {}

impl Drop for CmId {
    fn drop(&mut self) {
        // SAFETY: ptr is a live id we own. Its QP (if any) was destroyed by QueuePair before
        // this runs, and all its events were acknowledged in get_event, so destroy_id does
        // not block. Its channel is kept open by self.channel until after this call.
        let rc = unsafe { sys::rdma_destroy_id(self.ptr.as_ptr()) };
        if rc != 0 {
            tracing::warn!(errno = last_errno(), "rdma_destroy_id failed");
        }
    }
}

impl CmId {
    /// `rdma_create_id` on `channel` for reliable-connected (TCP port space) use.
    pub fn new(channel: &CmEventChannel) -> Result<CmId> {
        let mut id: *mut sys::rdma_cm_id = null_mut();
        // SAFETY: the channel is live; id is an out-pointer.
        let rc = unsafe {
            sys::rdma_create_id(
                channel.inner.ptr.as_ptr(),
                &mut id,
                null_mut(),
                sys::rdma_port_space::RDMA_PS_TCP,
            )
        };
        check_ret("rdma_create_id", rc)?;
        let ptr = NonNull::new(id).ok_or(VerbsError::Call {
            call: "rdma_create_id",
            errno: libc::EIO,
        })?;
        Ok(CmId {
            ptr,
            channel: channel.inner.clone(),
        })
    }

    /// `rdma_bind_addr` (port 0 picks a free port). Binding to an RDMA device's IP address
    /// also attaches the id to that device.
    pub fn bind_addr(&self, addr: SocketAddr) -> Result<()> {
        let mut raw = RawSockAddr::new(addr);
        // SAFETY: live id; raw is a complete sockaddr that the call only reads.
        let rc = unsafe { sys::rdma_bind_addr(self.as_ptr(), raw.as_mut_ptr()) };
        check_ret("rdma_bind_addr", rc)
    }

    /// `rdma_listen`: connect requests arrive as `ConnectRequest` events on this id's channel.
    pub fn listen(&self, backlog: i32) -> Result<()> {
        // SAFETY: live id.
        let rc = unsafe { sys::rdma_listen(self.as_ptr(), backlog) };
        check_ret("rdma_listen", rc)
    }

    /// `rdma_resolve_addr`: completes with an `AddrResolved` (or `AddrError`) event.
    pub fn resolve_addr(
        &self,
        src: Option<SocketAddr>,
        dst: SocketAddr,
        timeout: Duration,
    ) -> Result<()> {
        let mut src = src.map(RawSockAddr::new);
        let mut dst = RawSockAddr::new(dst);
        let src_ptr = src.as_mut().map_or(null_mut(), |s| s.as_mut_ptr());
        // SAFETY: live id; the sockaddrs live on our stack during the call, which copies them.
        let rc = unsafe {
            sys::rdma_resolve_addr(
                self.as_ptr(),
                src_ptr,
                dst.as_mut_ptr(),
                timeout_ms(timeout),
            )
        };
        check_ret("rdma_resolve_addr", rc)
    }

    /// `rdma_resolve_route`: completes with a `RouteResolved` (or `RouteError`) event.
    pub fn resolve_route(&self, timeout: Duration) -> Result<()> {
        // SAFETY: live id.
        let rc = unsafe { sys::rdma_resolve_route(self.as_ptr(), timeout_ms(timeout)) };
        check_ret("rdma_resolve_route", rc)
    }

    /// `rdma_connect` (after `RouteResolved` and creating the QP): `Established`, or
    /// `Rejected`/`Unreachable`/`ConnectError`, follows.
    pub fn connect(&self, params: &ConnParams<'_>) -> Result<()> {
        let mut raw = params.to_raw(MAX_CONNECT_PRIVATE_DATA)?;
        // SAFETY: live id; raw and the private data it points to outlive the call, which
        // copies them.
        let rc = unsafe { sys::rdma_connect(self.as_ptr(), &mut raw) };
        check_ret("rdma_connect", rc)
    }

    /// `rdma_accept` a connect request (after creating the QP): `Established` follows.
    pub fn accept(&self, params: &ConnParams<'_>) -> Result<()> {
        let mut raw = params.to_raw(MAX_ACCEPT_PRIVATE_DATA)?;
        // SAFETY: as in connect.
        let rc = unsafe { sys::rdma_accept(self.as_ptr(), &mut raw) };
        check_ret("rdma_accept", rc)
    }

    /// `rdma_reject` a connect request.
    pub fn reject(&self, private_data: &[u8]) -> Result<()> {
        let len = private_data.len();
        if len > MAX_REJECT_PRIVATE_DATA {
            return Err(VerbsError::PrivateDataTooLong {
                len,
                max: MAX_REJECT_PRIVATE_DATA,
            });
        }
        let data = if len == 0 {
            std::ptr::null()
        } else {
            private_data.as_ptr().cast()
        };
        // SAFETY: live id; data points to len (<= 148) readable bytes or is null.
        let rc = unsafe { sys::rdma_reject(self.as_ptr(), data, len as u8) };
        check_ret("rdma_reject", rc)
    }

    /// `rdma_set_option(RDMA_OPTION_ID_ACK_TIMEOUT)`: the queue pair's local ACK timeout,
    /// 4.096 µs × 2^`exponent` (0..=31), instead of the one rdma_cm derives from the path
    /// (~2 s for RoCE on Linux 6.1). Set it before `connect`/`accept`: rdma_cm applies it
    /// when it moves the queue pair to RTS. With the retry count it bounds how long a send to
    /// a dead peer is retried.
    pub fn set_ack_timeout(&self, exponent: u8) -> Result<()> {
        if exponent > 31 {
            return Err(VerbsError::InvalidArgument(
                "the ACK timeout exponent is a 5-bit field (0..=31)",
            ));
        }
        let mut value = exponent;
        // SAFETY: live id; optval points at a u8 that lives through the call and optlen is
        // its size (librdmacm copies the value to the kernel).
        let rc = unsafe {
            sys::rdma_set_option(
                self.as_ptr(),
                sys::RDMA_OPTION_ID as i32,
                sys::RDMA_OPTION_ID_ACK_TIMEOUT as i32,
                (&mut value as *mut u8).cast(),
                std::mem::size_of::<u8>(),
            )
        };
        check_ret("rdma_set_option(RDMA_OPTION_ID_ACK_TIMEOUT)", rc)
    }

    /// `rdma_disconnect`: moves the QP to the error state (outstanding work requests flush
    /// with `WrFlushError`) and tells the peer; both sides get `Disconnected`.
    pub fn disconnect(&self) -> Result<()> {
        // SAFETY: live id.
        let rc = unsafe { sys::rdma_disconnect(self.as_ptr()) };
        check_ret("rdma_disconnect", rc)
    }

    /// `rdma_migrate_id`: from now on this id's events arrive on `channel` (another
    /// shard's). Blocks until the id's events delivered on the old channel are acknowledged,
    /// which [`CmEventChannel::get_event`] always has done already.
    pub fn migrate(&mut self, channel: &CmEventChannel) -> Result<()> {
        // SAFETY: live id and channel.
        let rc = unsafe { sys::rdma_migrate_id(self.as_ptr(), channel.inner.ptr.as_ptr()) };
        check_ret("rdma_migrate_id", rc)?;
        self.channel = channel.inner.clone();
        Ok(())
    }

    /// The local address (`None` before bind/resolve).
    pub fn local_addr(&self) -> Option<SocketAddr> {
        // SAFETY: live id; the returned pointer is into the id's route.addr union, which
        // is large enough for any sockaddr family.
        unsafe { addr::from_raw(sys::rdma_get_local_addr(self.as_ptr()).cast()) }
    }

    /// The peer's address (`None` before resolve / connect request).
    pub fn peer_addr(&self) -> Option<SocketAddr> {
        // SAFETY: as in local_addr.
        unsafe { addr::from_raw(sys::rdma_get_peer_addr(self.as_ptr()).cast()) }
    }

    /// The device port the id is bound to (0 before bind/resolve).
    pub fn port_num(&self) -> u8 {
        // SAFETY: live id; plain field.
        unsafe { (*self.as_ptr()).port_num }
    }

    /// The key events for this id carry.
    pub fn key(&self) -> CmIdKey {
        CmIdKey(self.ptr.as_ptr() as usize)
    }

    /// Whether this id's events arrive on `channel`.
    pub fn is_on(&self, channel: &CmEventChannel) -> bool {
        Arc::ptr_eq(&self.channel, &channel.inner)
    }

    pub(crate) fn verbs_ptr(&self) -> Option<NonNull<sys::ibv_context>> {
        // SAFETY: live id; plain field, set by librdmacm at bind/resolve/connect request.
        NonNull::new(unsafe { (*self.as_ptr()).verbs })
    }

    pub(crate) fn as_ptr(&self) -> *mut sys::rdma_cm_id {
        self.ptr.as_ptr()
    }
}

impl std::fmt::Debug for CmId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CmId")
            .field("key", &self.key())
            .field("local", &self.local_addr())
            .field("peer", &self.peer_addr())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn assert_send<T: Send>() {}

    #[test]
    fn cm_id_is_send_for_handoff() {
        assert_send::<CmId>();
        assert_send::<CmEvent>();
    }

    #[test]
    fn private_data_limits_are_enforced() {
        let data = [7u8; 57];
        let p = ConnParams {
            private_data: &data,
            ..Default::default()
        };
        assert_eq!(
            p.to_raw(MAX_CONNECT_PRIVATE_DATA).unwrap_err(),
            VerbsError::PrivateDataTooLong { len: 57, max: 56 }
        );
        let raw = p.to_raw(MAX_ACCEPT_PRIVATE_DATA).unwrap();
        assert_eq!(raw.private_data_len, 57);
        assert_eq!(raw.private_data, data.as_ptr().cast());
    }

    #[test]
    fn retry_counts_must_fit_three_bits() {
        let p = ConnParams {
            rnr_retry_count: 8,
            ..Default::default()
        };
        assert!(matches!(
            p.to_raw(MAX_CONNECT_PRIVATE_DATA),
            Err(VerbsError::InvalidArgument(_))
        ));
        let raw = ConnParams::default().to_raw(0).unwrap();
        assert!(raw.private_data.is_null());
        assert_eq!((raw.retry_count, raw.rnr_retry_count), (7, 7));
    }

    #[test]
    fn timeouts_saturate() {
        assert_eq!(timeout_ms(Duration::from_millis(2000)), 2000);
        assert_eq!(timeout_ms(Duration::from_secs(u64::MAX)), i32::MAX);
    }

    #[test]
    fn an_accept_never_exceeds_what_the_request_offered() {
        let ours = ReadDepths::both(4);
        // A peer that offers more gets ours; one that offers less caps each way on its own.
        assert_eq!(ours.accept(ReadDepths::both(16)), ours);
        let offered = ReadDepths {
            responder_resources: 2,
            initiator_depth: 1,
        };
        assert_eq!(ours.accept(offered), offered, "each way capped on its own");
        // A peer that takes no READs gets none issued to it.
        assert_eq!(ours.accept(ReadDepths::both(0)), ReadDepths::both(0));
    }
}
