//! `SharedReceiveQueue`: one pool of posted receives for many QPs.

use std::ptr::{null_mut, NonNull};
use std::rc::Rc;

use crate::error::{check_ret, Result, VerbsError};
use crate::mr::Sge;
use crate::pd::{PdInner, ProtectionDomain};
use crate::qp::build_sges;
use crate::sys;

/// Identifies a shared receive queue in an [`AsyncEvent`](crate::AsyncEvent).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SrqKey(usize);

impl SrqKey {
    pub(crate) fn from_ptr(srq: *mut sys::ibv_srq) -> SrqKey {
        SrqKey(srq as usize)
    }
}

/// A shared receive queue (`ibv_srq`). Cheap to clone; QPs created with it keep it alive.
/// Not `Send`.
#[derive(Clone)]
pub struct SharedReceiveQueue {
    pub(crate) inner: Rc<SrqInner>,
}

pub(crate) struct SrqInner {
    pub(crate) ptr: NonNull<sys::ibv_srq>,
    max_sge: u32,
    max_wr: u32,
    pub(crate) pd: Rc<PdInner>,
}

impl Drop for SrqInner {
    fn drop(&mut self) {
        // SAFETY: created by ibv_create_srq; QPs attached to it hold an Rc to this inner, so
        // they were destroyed first.
        let rc = unsafe { sys::ibv_destroy_srq(self.ptr.as_ptr()) };
        if rc != 0 {
            tracing::warn!(rc, "ibv_destroy_srq failed");
        }
    }
}

impl std::fmt::Debug for SharedReceiveQueue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SharedReceiveQueue")
            .field("ptr", &self.inner.ptr)
            .finish()
    }
}

impl SharedReceiveQueue {
    /// `ibv_create_srq` with room for `max_wr` receives of up to `max_sge` entries each.
    pub fn new(pd: &ProtectionDomain, max_wr: u32, max_sge: u32) -> Result<Self> {
        let mut attr = sys::ibv_srq_init_attr {
            srq_context: null_mut(),
            attr: sys::ibv_srq_attr {
                max_wr,
                max_sge,
                srq_limit: 0,
            },
        };
        // SAFETY: live PD; attr is read (and updated with actual sizes) during the call.
        let srq = unsafe { sys::ibv_create_srq(pd.as_ptr(), &mut attr) };
        let ptr = NonNull::new(srq).ok_or_else(|| VerbsError::last("ibv_create_srq"))?;
        Ok(SharedReceiveQueue {
            inner: Rc::new(SrqInner {
                ptr,
                max_sge: attr.attr.max_sge.max(max_sge),
                max_wr: attr.attr.max_wr.max(max_wr),
                pd: pd.inner.clone(),
            }),
        })
    }

    /// Receives it can hold (at least what was asked for).
    pub fn capacity(&self) -> u32 {
        self.inner.max_wr
    }

    /// The key async events about this SRQ carry.
    pub fn key(&self) -> SrqKey {
        SrqKey(self.inner.ptr.as_ptr() as usize)
    }

    /// Arms the limit event: when fewer than `limit` receives remain posted, the device
    /// raises [`AsyncEvent::SrqLimitReached`](crate::AsyncEvent::SrqLimitReached) once (then
    /// it must be armed again). `limit` 0 disarms it.
    pub fn arm_limit(&self, limit: u32) -> Result<()> {
        let mut attr = sys::ibv_srq_attr {
            max_wr: 0,
            max_sge: 0,
            srq_limit: limit,
        };
        // SAFETY: live SRQ; attr is read for the fields named in the mask.
        let rc = unsafe {
            sys::ibv_modify_srq(
                self.inner.ptr.as_ptr(),
                &mut attr,
                sys::ibv_srq_attr_mask::IBV_SRQ_LIMIT as i32,
            )
        };
        check_ret("ibv_modify_srq(limit)", rc)
    }

    /// Posts one receive whose buffer is `sges` (each checked to be in this SRQ's PD).
    pub fn post_recv(&self, wr_id: u64, sges: &[Sge<'_>]) -> Result<()> {
        let mut list = build_sges(sges, self.inner.max_sge, self.inner.pd.ptr.as_ptr())?;
        let mut wr = sys::ibv_recv_wr {
            wr_id,
            next: null_mut(),
            sg_list: list.as_mut_ptr(),
            num_sge: sges.len() as i32,
        };
        let mut bad: *mut sys::ibv_recv_wr = null_mut();
        // SAFETY: live SRQ; wr and its SGE list live on our stack for the call (the
        // provider copies them); the SGEs were validated against their regions.
        let rc = unsafe { sys::ibv_post_srq_recv(self.inner.ptr.as_ptr(), &mut wr, &mut bad) };
        check_ret("ibv_post_srq_recv", rc)
    }
}
