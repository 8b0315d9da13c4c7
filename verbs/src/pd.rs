//! `ProtectionDomain`.

use std::ptr::NonNull;
use std::rc::Rc;

use crate::device::{Context, ContextInner};
use crate::error::{Result, VerbsError};
use crate::sys;

/// A protection domain (`ibv_pd`): memory regions and queue pairs that may work together.
/// Cheap to clone; keeps its device context open. Not `Send`.
#[derive(Clone)]
pub struct ProtectionDomain {
    pub(crate) inner: Rc<PdInner>,
}

pub(crate) struct PdInner {
    pub(crate) ptr: NonNull<sys::ibv_pd>,
    pub(crate) ctx: Rc<ContextInner>,
}

impl Drop for PdInner {
    fn drop(&mut self) {
        // SAFETY: ptr came from ibv_alloc_pd; MRs, QPs and SRQs hold an Rc to this inner, so
        // all of them are gone by now (dealloc would fail with EBUSY otherwise).
        let rc = unsafe { sys::ibv_dealloc_pd(self.ptr.as_ptr()) };
        if rc != 0 {
            tracing::warn!(rc, "ibv_dealloc_pd failed");
        }
    }
}

impl std::fmt::Debug for ProtectionDomain {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProtectionDomain")
            .field("ptr", &self.inner.ptr)
            .finish()
    }
}

impl ProtectionDomain {
    /// `ibv_alloc_pd` on `ctx`.
    pub fn new(ctx: &Context) -> Result<Self> {
        // SAFETY: the context is open for as long as we hold ctx.inner.
        let pd = unsafe { sys::ibv_alloc_pd(ctx.as_ptr()) };
        let ptr = NonNull::new(pd).ok_or_else(|| VerbsError::last("ibv_alloc_pd"))?;
        Ok(ProtectionDomain {
            inner: Rc::new(PdInner {
                ptr,
                ctx: ctx.inner.clone(),
            }),
        })
    }

    /// The device context this PD belongs to.
    pub fn context(&self) -> Context {
        Context {
            inner: self.inner.ctx.clone(),
        }
    }

    pub(crate) fn as_ptr(&self) -> *mut sys::ibv_pd {
        self.inner.ptr.as_ptr()
    }
}
