//! `QueuePair`: a reliable-connected QP created through rdma_cm, owning its `CmId`.

use std::fmt;
use std::ptr::{null_mut, NonNull};
use std::rc::Rc;

use crate::cm::CmId;
use crate::cq::{CompletionQueue, CqInner};
use crate::error::{check_ret, Result, VerbsError};
use crate::mr::Sge;
use crate::pd::{PdInner, ProtectionDomain};
use crate::srq::{SharedReceiveQueue, SrqInner};
use crate::sys;

/// Most scatter/gather entries one work request may carry (they are built on the stack).
pub const MAX_SGE: usize = 16;

/// Queue sizes requested at creation; [`QueuePair::caps`] reports what the device granted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct QpCaps {
    /// Send work requests outstanding at once.
    pub max_send_wr: u32,
    /// Receive work requests outstanding at once (0 with a shared receive queue).
    pub max_recv_wr: u32,
    /// Scatter/gather entries per send request.
    pub max_send_sge: u32,
    /// Scatter/gather entries per receive request.
    pub max_recv_sge: u32,
    /// Bytes a send may carry inline (copied into the request, no memory region needed).
    pub max_inline_data: u32,
}

impl Default for QpCaps {
    fn default() -> Self {
        QpCaps {
            max_send_wr: 64,
            max_recv_wr: 64,
            max_send_sge: 1,
            max_recv_sge: 1,
            max_inline_data: 0,
        }
    }
}

/// What a new QP is attached to.
pub struct QpInit<'a> {
    /// Where send completions go.
    pub send_cq: &'a CompletionQueue,
    /// Where receive completions go.
    pub recv_cq: &'a CompletionQueue,
    /// Receives come from this SRQ instead of the QP's own receive queue.
    pub srq: Option<&'a SharedReceiveQueue>,
    /// The queue sizes asked for.
    pub caps: QpCaps,
    /// Every send produces a completion (otherwise only those marked `signaled`).
    pub sq_sig_all: bool,
}

/// The operation of a send work request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum SendOp {
    /// A plain SEND: consumes one receive on the peer.
    Send,
    /// SEND with 32 bits of immediate data (host byte order; the receiver's
    /// `WorkCompletion::imm_data` gets the same value).
    SendWithImm(u32),
    /// RDMA READ: fill the local `sges` from the peer's registered memory at `remote_addr`
    /// (its region must allow remote reads, and the queue pairs must have been connected
    /// with a nonzero initiator depth and responder resources).
    RdmaRead {
        /// The peer's address to read from.
        remote_addr: u64,
        /// The key of the peer's memory region.
        rkey: u32,
    },
    /// A zero-byte RDMA WRITE (no SGEs): it moves nothing and touches no memory on either
    /// side, needs no address or key (IB spec C9-88) and no receive buffer or CPU on the
    /// peer, whose adapter still acknowledges it. Its completion says the peer is there; to
    /// a dead peer it fails once the transport retries run out (a keepalive probe).
    ZeroLengthWrite,
}

/// A send work request.
#[derive(Debug, Clone, Copy)]
pub struct SendWr<'a> {
    /// Returned in the request's completion.
    pub wr_id: u64,
    /// The local memory the request sends from (or a READ fills).
    pub sges: &'a [Sge<'a>],
    /// What the request does.
    pub op: SendOp,
    /// Produce a completion for this request (always true if the QP has `sq_sig_all`).
    pub signaled: bool,
    /// Set the solicited-event bit (wakes a receiver armed with `solicited_only`).
    pub solicited: bool,
    /// Copy the data into the work request at post time (up to `max_inline_data` bytes);
    /// the buffers may be reused as soon as the post returns.
    pub inline: bool,
}

impl<'a> SendWr<'a> {
    /// A signaled SEND of `sges`.
    pub fn send(wr_id: u64, sges: &'a [Sge<'a>]) -> Self {
        SendWr {
            wr_id,
            sges,
            op: SendOp::Send,
            signaled: true,
            solicited: false,
            inline: false,
        }
    }
}

/// A reliable-connected queue pair made with `rdma_create_qp`. It owns its rdma_cm id
/// (reach it with [`QueuePair::cm_id`] to connect, accept or disconnect) and keeps its PD,
/// CQs and SRQ alive. Dropping it destroys the QP, then the id. Not `Send`.
pub struct QueuePair {
    qp: NonNull<sys::ibv_qp>,
    caps: QpCaps,
    // Drop order: `Drop::drop` destroys the QP, then `id` is destroyed, then the rest.
    id: CmId,
    pd: Rc<PdInner>,
    _send_cq: Rc<CqInner>,
    _recv_cq: Rc<CqInner>,
    srq: Option<Rc<SrqInner>>,
}

/// Creating a QP failed; the id is handed back (to reject the peer, or retry).
#[non_exhaustive]
pub struct QpCreateError {
    /// Why creation failed.
    pub error: VerbsError,
    /// The rdma_cm id the queue pair was to be created on.
    pub id: CmId,
}

impl fmt::Debug for QpCreateError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("QpCreateError")
            .field("error", &self.error)
            .finish()
    }
}

impl fmt::Display for QpCreateError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "creating the queue pair failed: {}", self.error)
    }
}

impl std::error::Error for QpCreateError {}

impl From<QpCreateError> for VerbsError {
    fn from(e: QpCreateError) -> Self {
        e.error
    }
}

impl Drop for QueuePair {
    fn drop(&mut self) {
        // SAFETY: the id's QP was made by rdma_create_qp and is destroyed once, here, before
        // the id itself (field drop) and before the PD/CQs/SRQ it uses (Rc fields).
        unsafe { sys::rdma_destroy_qp(self.id.as_ptr()) };
    }
}

impl QueuePair {
    /// `rdma_create_qp` (RC) on `id`, which must be on `pd`'s device: use a PD from
    /// [`Context::from_cm_id`](crate::Context::from_cm_id) or
    /// [`Context::from_rdma_cm`](crate::Context::from_rdma_cm).
    pub fn create(
        id: CmId,
        pd: &ProtectionDomain,
        init: QpInit<'_>,
    ) -> std::result::Result<QueuePair, QpCreateError> {
        match id.verbs_ptr() {
            None => {
                return Err(QpCreateError {
                    error: VerbsError::NotBound,
                    id,
                })
            }
            Some(v) if v != pd.inner.ctx.ptr => {
                return Err(QpCreateError {
                    error: VerbsError::DeviceMismatch,
                    id,
                })
            }
            Some(_) => {}
        }
        let caps = init.caps;
        let mut attr = sys::ibv_qp_init_attr {
            qp_context: null_mut(),
            send_cq: init.send_cq.inner.ptr.as_ptr(),
            recv_cq: init.recv_cq.inner.ptr.as_ptr(),
            srq: init.srq.map_or(null_mut(), |s| s.inner.ptr.as_ptr()),
            cap: sys::ibv_qp_cap {
                max_send_wr: caps.max_send_wr,
                max_recv_wr: caps.max_recv_wr,
                max_send_sge: caps.max_send_sge,
                max_recv_sge: caps.max_recv_sge,
                max_inline_data: caps.max_inline_data,
            },
            qp_type: sys::ibv_qp_type::IBV_QPT_RC,
            sq_sig_all: i32::from(init.sq_sig_all),
        };
        // SAFETY: live id, PD and CQs (the QueuePair keeps them alive); attr is read and
        // updated with the granted capacities.
        let rc = unsafe { sys::rdma_create_qp(id.as_ptr(), pd.as_ptr(), &mut attr) };
        if let Err(error) = check_ret("rdma_create_qp", rc) {
            return Err(QpCreateError { error, id });
        }
        // SAFETY: on success rdma_create_qp stored the new QP in id->qp.
        let Some(qp) = NonNull::new(unsafe { (*id.as_ptr()).qp }) else {
            return Err(QpCreateError {
                error: VerbsError::Call {
                    call: "rdma_create_qp",
                    errno: libc::EIO,
                },
                id,
            });
        };
        // Providers may round up; never report less than was asked for and granted.
        let granted = QpCaps {
            max_send_wr: attr.cap.max_send_wr.max(caps.max_send_wr),
            max_recv_wr: attr.cap.max_recv_wr.max(caps.max_recv_wr),
            max_send_sge: attr.cap.max_send_sge.max(caps.max_send_sge),
            max_recv_sge: attr.cap.max_recv_sge.max(caps.max_recv_sge),
            max_inline_data: attr.cap.max_inline_data.max(caps.max_inline_data),
        };
        Ok(QueuePair {
            qp,
            caps: granted,
            id,
            pd: pd.inner.clone(),
            _send_cq: init.send_cq.inner.clone(),
            _recv_cq: init.recv_cq.inner.clone(),
            srq: init.srq.map(|s| s.inner.clone()),
        })
    }

    /// The rdma_cm id: `connect`, `accept`, `disconnect`, addresses.
    pub fn cm_id(&self) -> &CmId {
        &self.id
    }

    /// The queue pair's number.
    pub fn qp_num(&self) -> u32 {
        // SAFETY: the QP is live; plain field.
        unsafe { (*self.qp.as_ptr()).qp_num }
    }

    /// The queue sizes the device granted.
    pub fn caps(&self) -> QpCaps {
        self.caps
    }

    /// `ibv_post_send` of one work request.
    pub fn post_send(&self, wr: &SendWr<'_>) -> Result<()> {
        if matches!(wr.op, SendOp::ZeroLengthWrite) && !wr.sges.is_empty() {
            return Err(VerbsError::InvalidArgument(
                "a zero-length RDMA WRITE carries no SGEs",
            ));
        }
        let mut list = build_sges(wr.sges, self.caps.max_send_sge, self.pd.ptr.as_ptr())?;
        if wr.inline {
            let len: usize = wr.sges.iter().map(|s| s.len() as usize).sum();
            if len > self.caps.max_inline_data as usize {
                return Err(VerbsError::InlineTooLarge {
                    len,
                    max: self.caps.max_inline_data,
                });
            }
        }
        let mut raw = sys::ibv_send_wr {
            wr_id: wr.wr_id,
            next: null_mut(),
            sg_list: list.as_mut_ptr(),
            num_sge: wr.sges.len() as i32,
            send_flags: send_flags(wr),
            ..Default::default()
        };
        match wr.op {
            SendOp::Send => raw.opcode = sys::ibv_wr_opcode::IBV_WR_SEND,
            SendOp::SendWithImm(imm) => {
                raw.opcode = sys::ibv_wr_opcode::IBV_WR_SEND_WITH_IMM;
                raw.__bindgen_anon_1.imm_data = imm.to_be();
            }
            SendOp::RdmaRead { remote_addr, rkey } => {
                raw.opcode = sys::ibv_wr_opcode::IBV_WR_RDMA_READ;
                raw.wr.rdma = sys::ibv_send_wr__bindgen_ty_2__bindgen_ty_1 { remote_addr, rkey };
            }
            SendOp::ZeroLengthWrite => {
                raw.opcode = sys::ibv_wr_opcode::IBV_WR_RDMA_WRITE;
                raw.wr.rdma = sys::ibv_send_wr__bindgen_ty_2__bindgen_ty_1 {
                    remote_addr: 0,
                    rkey: 0,
                };
            }
        }
        let mut bad: *mut sys::ibv_send_wr = null_mut();
        // SAFETY: live QP; raw and its SGE list live on our stack for the call (providers
        // copy them into the send queue); each SGE was range-checked against a live MR of
        // this QP's PD.
        let rc = unsafe { sys::ibv_post_send(self.qp.as_ptr(), &mut raw, &mut bad) };
        check_ret("ibv_post_send", rc)
    }

    /// `ibv_post_recv` of one receive whose buffer is `sges`.
    pub fn post_recv(&self, wr_id: u64, sges: &[Sge<'_>]) -> Result<()> {
        if self.srq.is_some() {
            return Err(VerbsError::UsesSrq);
        }
        let mut list = build_sges(sges, self.caps.max_recv_sge, self.pd.ptr.as_ptr())?;
        let mut raw = sys::ibv_recv_wr {
            wr_id,
            next: null_mut(),
            sg_list: list.as_mut_ptr(),
            num_sge: sges.len() as i32,
        };
        let mut bad: *mut sys::ibv_recv_wr = null_mut();
        // SAFETY: as in post_send.
        let rc = unsafe { sys::ibv_post_recv(self.qp.as_ptr(), &mut raw, &mut bad) };
        check_ret("ibv_post_recv", rc)
    }

    /// The READ depths the queue pair runs with (`ibv_query_qp`): what the connection
    /// settled, whatever either side asked for.
    pub fn read_depths(&self) -> Result<crate::ReadDepths> {
        let mut attr = sys::ibv_qp_attr::default();
        let mut init = sys::ibv_qp_init_attr::default();
        let mask = sys::ibv_qp_attr_mask::IBV_QP_MAX_QP_RD_ATOMIC as i32
            | sys::ibv_qp_attr_mask::IBV_QP_MAX_DEST_RD_ATOMIC as i32;
        // SAFETY: live QP; both out-structs are locals the call fills.
        let rc = unsafe { sys::ibv_query_qp(self.qp.as_ptr(), &mut attr, mask, &mut init) };
        check_ret("ibv_query_qp", rc)?;
        Ok(crate::ReadDepths {
            responder_resources: attr.max_dest_rd_atomic,
            initiator_depth: attr.max_rd_atomic,
        })
    }

    /// Moves the QP to the error state: every outstanding work request completes with
    /// `WrFlushError` (used to drain a connection before tearing it down).
    pub fn set_error(&self) -> Result<()> {
        let mut attr = sys::ibv_qp_attr {
            qp_state: sys::ibv_qp_state::IBV_QPS_ERR,
            ..Default::default()
        };
        // SAFETY: live QP; attr is read for the fields named in the mask.
        let rc = unsafe {
            sys::ibv_modify_qp(
                self.qp.as_ptr(),
                &mut attr,
                sys::ibv_qp_attr_mask::IBV_QP_STATE as i32,
            )
        };
        check_ret("ibv_modify_qp(ERR)", rc)
    }
}

impl fmt::Debug for QueuePair {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("QueuePair")
            .field("qp_num", &self.qp_num())
            .field("id", &self.id)
            .field("caps", &self.caps)
            .finish()
    }
}

fn send_flags(wr: &SendWr<'_>) -> u32 {
    use sys::ibv_send_flags::*;
    let mut flags = 0;
    if wr.signaled {
        flags |= IBV_SEND_SIGNALED;
    }
    if wr.solicited {
        flags |= IBV_SEND_SOLICITED;
    }
    if wr.inline {
        flags |= IBV_SEND_INLINE;
    }
    flags
}

/// Copies `sges` into a stack array, checking their count against the queue's limit and
/// that each one's region is in protection domain `pd`.
pub(crate) fn build_sges(
    sges: &[Sge<'_>],
    max_sge: u32,
    pd: *mut sys::ibv_pd,
) -> Result<[sys::ibv_sge; MAX_SGE]> {
    let max = (max_sge as usize).min(MAX_SGE);
    if sges.len() > max {
        return Err(VerbsError::TooManySges {
            given: sges.len(),
            max,
        });
    }
    if sges.iter().any(|s| s.pd != pd) {
        return Err(VerbsError::ForeignProtectionDomain);
    }
    let mut list = [sys::ibv_sge::default(); MAX_SGE];
    for (dst, src) in list.iter_mut().zip(sges) {
        *dst = src.raw;
    }
    Ok(list)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn send_flags_follow_the_request() {
        use sys::ibv_send_flags::*;
        let mut wr = SendWr::send(1, &[]);
        assert_eq!(send_flags(&wr), IBV_SEND_SIGNALED);
        wr.signaled = false;
        wr.inline = true;
        wr.solicited = true;
        assert_eq!(send_flags(&wr), IBV_SEND_INLINE | IBV_SEND_SOLICITED);
    }

    #[test]
    fn sge_lists_are_checked_for_count_and_protection_domain() {
        let pd = std::ptr::NonNull::<sys::ibv_pd>::dangling().as_ptr();
        let other = pd.wrapping_add(1);
        let sges = [
            Sge::unchecked_for_test(pd, 8),
            Sge::unchecked_for_test(pd, 4),
        ];
        let list = build_sges(&sges, 2, pd).unwrap();
        assert_eq!((list[0].length, list[1].length), (8, 4));
        assert!(build_sges(&[], 1, pd).is_ok());
        assert_eq!(
            build_sges(&sges, 1, pd).unwrap_err(),
            VerbsError::TooManySges { given: 2, max: 1 }
        );
        assert_eq!(
            build_sges(&sges, 2, other).unwrap_err(),
            VerbsError::ForeignProtectionDomain
        );
        let many = [Sge::unchecked_for_test(pd, 1); MAX_SGE + 1];
        assert_eq!(
            build_sges(&many, u32::MAX, pd).unwrap_err(),
            VerbsError::TooManySges {
                given: MAX_SGE + 1,
                max: MAX_SGE
            }
        );
    }
}
