//! `MemoryRegion`: memory the region owns, registered with a protection domain, and the
//! checked scatter/gather entries (`Sge`) that work requests use to point into it.

use std::alloc::{self, Layout};
use std::marker::PhantomData;
use std::ops::BitOr;
use std::ptr::NonNull;
use std::rc::Rc;

use bytes::Bytes;

use crate::error::{last_errno, memlock_limit, Result, VerbsError};
use crate::pd::{PdInner, ProtectionDomain};
use crate::sys;

/// Registration access flags (`ibv_access_flags`); combine with `|`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Access(u32);

impl Access {
    /// Only the local HCA reads it (send buffers).
    pub const LOCAL_READ: Access = Access(0);
    /// The local HCA may write it (receive buffers).
    pub const LOCAL_WRITE: Access = Access(sys::ibv_access_flags::IBV_ACCESS_LOCAL_WRITE);
    /// The peer may RDMA WRITE into it.
    pub const REMOTE_WRITE: Access = Access(sys::ibv_access_flags::IBV_ACCESS_REMOTE_WRITE);
    /// The peer may RDMA READ from it.
    pub const REMOTE_READ: Access = Access(sys::ibv_access_flags::IBV_ACCESS_REMOTE_READ);

    /// The raw `ibv_access_flags`.
    pub fn bits(self) -> u32 {
        self.0
    }
}

impl BitOr for Access {
    type Output = Access;
    fn bitor(self, rhs: Access) -> Access {
        Access(self.0 | rhs.0)
    }
}

/// Page size used for aligned region buffers.
const PAGE: usize = 4096;

/// The memory behind a region: freed only after deregistration.
enum Buffer {
    /// Zeroed, page-aligned, from `std::alloc`.
    Aligned { ptr: NonNull<u8>, layout: Layout },
    /// A caller's boxed slice (stored raw so no `&mut` to it exists while the HCA may write).
    Boxed(NonNull<[u8]>),
    /// A caller's immutable bytes, registered for the HCA to read only (never written).
    Shared(Bytes),
    /// Handed back by [`MemoryRegion::into_boxed`] after deregistration.
    Taken,
}

impl Buffer {
    fn aligned(len: usize) -> Result<Buffer> {
        let layout = Layout::from_size_align(len, PAGE).map_err(|_| VerbsError::Alloc { len })?;
        // SAFETY: len > 0 is checked by the caller, so the layout is not zero-sized.
        let ptr = unsafe { alloc::alloc_zeroed(layout) };
        let ptr = NonNull::new(ptr).ok_or(VerbsError::Alloc { len })?;
        Ok(Buffer::Aligned { ptr, layout })
    }

    fn ptr(&self) -> *mut u8 {
        match self {
            Buffer::Aligned { ptr, .. } => ptr.as_ptr(),
            Buffer::Boxed(b) => b.as_ptr().cast(),
            // The HCA only reads it: registered without write access (see from_bytes).
            Buffer::Shared(b) => b.as_ptr().cast_mut(),
            Buffer::Taken => NonNull::dangling().as_ptr(),
        }
    }

    fn len(&self) -> usize {
        match self {
            Buffer::Aligned { layout, .. } => layout.size(),
            Buffer::Boxed(b) => b.len(),
            Buffer::Shared(b) => b.len(),
            Buffer::Taken => 0,
        }
    }
}

impl Drop for Buffer {
    fn drop(&mut self) {
        match self {
            // SAFETY: allocated in Buffer::aligned with exactly this layout.
            Buffer::Aligned { ptr, layout } => unsafe { alloc::dealloc(ptr.as_ptr(), *layout) },
            // SAFETY: came from Box::into_raw in MemoryRegion::from_boxed; freed once.
            Buffer::Boxed(b) => drop(unsafe { Box::from_raw(b.as_ptr()) }),
            Buffer::Shared(_) | Buffer::Taken => {}
        }
    }
}

/// A registered memory region (`ibv_mr`) that owns its memory. Dropping it deregisters the
/// region first and frees the memory after, so the HCA can never write into freed memory.
/// Not `Send`.
///
/// The contents of a range that a posted work request still uses are unspecified until
/// its completion has been polled: the HCA reads or writes it asynchronously.
pub struct MemoryRegion {
    /// `None` once [`into_boxed`](Self::into_boxed) deregistered it.
    mr: Option<NonNull<sys::ibv_mr>>,
    // Field order matters: `buf` drops after `Drop::drop` deregistered the MR.
    buf: Buffer,
    pd: Rc<PdInner>,
}

impl Drop for MemoryRegion {
    fn drop(&mut self) {
        self.deregister();
    }
}

impl MemoryRegion {
    fn deregister(&mut self) {
        let Some(mr) = self.mr.take() else { return };
        // SAFETY: mr came from ibv_reg_mr and is deregistered once (taken out of the
        // option), before `buf` frees or hands back the memory. Any WR still referencing it
        // completes with an error instead.
        let rc = unsafe { sys::ibv_dereg_mr(mr.as_ptr()) };
        if rc != 0 {
            tracing::warn!(rc, "ibv_dereg_mr failed");
        }
    }

    fn raw(&self) -> *mut sys::ibv_mr {
        // Only into_boxed clears it, and that consumes the region.
        self.mr.expect("a live region is registered").as_ptr()
    }

    /// Registers `bytes` in place, without copying, for the HCA to read only: local reads
    /// (send from it) and, with [`Access::REMOTE_READ`], a peer's RDMA READ. Write access is
    /// refused (the bytes are shared and immutable). The region keeps them alive.
    pub fn from_bytes(pd: &ProtectionDomain, bytes: Bytes, access: Access) -> Result<Self> {
        if bytes.is_empty() {
            return Err(VerbsError::InvalidArgument("memory region of 0 bytes"));
        }
        if access.0 & !Access::REMOTE_READ.0 != 0 {
            return Err(VerbsError::InvalidArgument(
                "shared bytes may only be registered for reading",
            ));
        }
        Self::register(pd, Buffer::Shared(bytes), access)
    }

    /// Deregisters the region and hands back the boxed slice it was made from
    /// ([`from_boxed`](Self::from_boxed)), with whatever the HCA wrote into it: memory filled
    /// by an RDMA READ becomes the caller's without a copy. `Err(self)` for other regions.
    /// Only call it once every work request using the region has completed.
    pub fn into_boxed(mut self) -> std::result::Result<Box<[u8]>, Self> {
        let Buffer::Boxed(raw) = self.buf else {
            return Err(self);
        };
        self.deregister();
        // Not dropped: the box below takes over the allocation.
        std::mem::forget(std::mem::replace(&mut self.buf, Buffer::Taken));
        // SAFETY: came from Box::leak in from_boxed; the region is deregistered, so the HCA
        // no longer touches it, and `buf` no longer owns it (replaced by Taken and forgotten,
        // never dropped): freed once, by the box.
        Ok(unsafe { Box::from_raw(raw.as_ptr()) })
    }

    /// Allocates `len` zeroed, page-aligned bytes and registers them with `pd`.
    /// ENOMEM here usually means RLIMIT_MEMLOCK: see [`VerbsError::MemlockLimit`].
    pub fn new(pd: &ProtectionDomain, len: usize, access: Access) -> Result<Self> {
        if len == 0 {
            return Err(VerbsError::InvalidArgument("memory region of 0 bytes"));
        }
        Self::register(pd, Buffer::aligned(len)?, access)
    }

    /// Registers a caller's buffer (not page-aligned in general; the HCA does not care, but
    /// pinning whole pages can pin neighbouring heap memory too).
    pub fn from_boxed(pd: &ProtectionDomain, buf: Box<[u8]>, access: Access) -> Result<Self> {
        if buf.is_empty() {
            return Err(VerbsError::InvalidArgument("memory region of 0 bytes"));
        }
        let raw = NonNull::from(Box::leak(buf));
        Self::register(pd, Buffer::Boxed(raw), access)
    }

    fn register(pd: &ProtectionDomain, buf: Buffer, access: Access) -> Result<Self> {
        let len = buf.len();
        let access = i32::try_from(access.0).map_err(|_| VerbsError::InvalidArgument("access"))?;
        // SAFETY: buf is a live allocation of len bytes that this MemoryRegion will own and
        // keep alive until after ibv_dereg_mr; pd is a live PD.
        let mr = unsafe { sys::ibv_reg_mr(pd.as_ptr(), buf.ptr().cast(), len, access) };
        match NonNull::new(mr) {
            Some(mr) => Ok(MemoryRegion {
                mr: Some(mr),
                buf,
                pd: pd.inner.clone(),
            }),
            None => Err(VerbsError::from_reg_mr(last_errno(), len, memlock_limit())),
        }
    }

    /// Local key, for scatter/gather entries.
    pub fn lkey(&self) -> u32 {
        // SAFETY: mr is live while self is; lkey is a plain field.
        unsafe { (*self.raw()).lkey }
    }

    /// Remote key, for a peer's RDMA READ/WRITE.
    pub fn rkey(&self) -> u32 {
        // SAFETY: as in lkey.
        unsafe { (*self.raw()).rkey }
    }

    /// The registered address (what a peer uses for RDMA READ/WRITE).
    pub fn addr(&self) -> u64 {
        self.buf.ptr() as u64
    }

    /// The region's length in bytes.
    pub fn len(&self) -> usize {
        self.buf.len()
    }

    /// Whether the region is empty.
    pub fn is_empty(&self) -> bool {
        self.buf.len() == 0
    }

    /// The region's bytes.
    pub fn as_slice(&self) -> &[u8] {
        // SAFETY: the buffer is a live, initialised allocation of len bytes owned by self;
        // the shared borrow of self prevents as_mut_slice from aliasing it.
        unsafe { std::slice::from_raw_parts(self.buf.ptr(), self.buf.len()) }
    }

    /// Panics for a region registered from shared bytes ([`from_bytes`](Self::from_bytes)):
    /// they are immutable.
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        assert!(
            !matches!(self.buf, Buffer::Shared(_)),
            "a region of shared bytes is read-only"
        );
        // SAFETY: as in as_slice; &mut self makes this the only Rust reference.
        unsafe { std::slice::from_raw_parts_mut(self.buf.ptr(), self.buf.len()) }
    }

    /// Copy `data` into the region at `offset`. `&mut self`, so no slice handed out by
    /// `read_at`/`as_slice` can be alive while safe code writes. The device may still be
    /// writing other parts of the region (posted receive buffers): only write ranges that are
    /// not posted for receive.
    pub fn write_at(&mut self, offset: usize, data: &[u8]) -> Result<()> {
        if matches!(self.buf, Buffer::Shared(_)) {
            return Err(VerbsError::InvalidArgument(
                "a region of shared bytes is read-only",
            ));
        }
        check_range(self.len(), offset, data.len())?;
        // SAFETY: the range was checked to lie inside the registered buffer we own; the
        // source is a distinct Rust slice, so the ranges cannot overlap.
        unsafe {
            std::ptr::copy_nonoverlapping(data.as_ptr(), self.buf.ptr().add(offset), data.len())
        };
        Ok(())
    }

    /// Copies the `out.len()` bytes at `offset` into `out` (a completed receive, say).
    pub fn read_into(&self, offset: usize, out: &mut [u8]) -> Result<()> {
        check_range(self.len(), offset, out.len())?;
        // SAFETY: the range lies inside the buffer we own; `out` is a distinct Rust slice.
        unsafe {
            std::ptr::copy_nonoverlapping(self.buf.ptr().add(offset), out.as_mut_ptr(), out.len())
        };
        Ok(())
    }

    /// The `len` bytes at `offset` (a completed receive, for example). The caller must not
    /// repost that range for receive while holding the slice.
    pub fn read_at(&self, offset: usize, len: usize) -> Result<&[u8]> {
        check_range(self.len(), offset, len)?;
        // SAFETY: the range lies inside the buffer we own, which lives as long as `self`.
        Ok(unsafe { std::slice::from_raw_parts(self.buf.ptr().add(offset), len) })
    }

    /// A scatter/gather entry for `len` bytes at `offset`, checked to lie inside the region.
    pub fn sge(&self, offset: usize, len: usize) -> Result<Sge<'_>> {
        check_range(self.len(), offset, len)?;
        Ok(Sge {
            raw: sys::ibv_sge {
                addr: self.addr() + offset as u64,
                // check_range guarantees len <= u32::MAX
                length: len as u32,
                lkey: self.lkey(),
            },
            pd: self.pd.ptr.as_ptr(),
            _region: PhantomData,
        })
    }
}

impl std::fmt::Debug for MemoryRegion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemoryRegion")
            .field("addr", &format_args!("{:#x}", self.addr()))
            .field("len", &self.len())
            .field("lkey", &self.lkey())
            .field("rkey", &self.rkey())
            .finish()
    }
}

/// One scatter/gather entry: a checked range of a [`MemoryRegion`]. Borrowing the region
/// keeps it registered while the work request is built and posted.
#[derive(Clone, Copy)]
pub struct Sge<'a> {
    pub(crate) raw: sys::ibv_sge,
    pub(crate) pd: *mut sys::ibv_pd,
    _region: PhantomData<&'a MemoryRegion>,
}

impl Sge<'_> {
    /// An entry that points nowhere, for checks that never reach the device.
    #[cfg(test)]
    pub(crate) fn unchecked_for_test(pd: *mut sys::ibv_pd, length: u32) -> Sge<'static> {
        Sge {
            raw: sys::ibv_sge {
                addr: 0,
                length,
                lkey: 0,
            },
            pd,
            _region: PhantomData,
        }
    }

    /// The entry's length in bytes.
    pub fn len(&self) -> u32 {
        self.raw.length
    }

    /// Whether the entry covers no bytes.
    pub fn is_empty(&self) -> bool {
        self.raw.length == 0
    }
}

impl std::fmt::Debug for Sge<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sge")
            .field("addr", &format_args!("{:#x}", self.raw.addr))
            .field("len", &self.raw.length)
            .field("lkey", &self.raw.lkey)
            .finish()
    }
}

/// `offset..offset+len` must lie inside a region of `region_len` bytes, and a single SGE
/// carries at most `u32::MAX` bytes.
pub(crate) fn check_range(region_len: usize, offset: usize, len: usize) -> Result<()> {
    let fits = offset.checked_add(len).is_some_and(|end| end <= region_len);
    if !fits || u32::try_from(len).is_err() {
        return Err(VerbsError::InvalidRange {
            offset,
            len,
            region_len,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_inside_the_region_are_accepted() {
        assert!(check_range(4096, 0, 4096).is_ok());
        assert!(check_range(4096, 4000, 96).is_ok());
        assert!(check_range(4096, 4096, 0).is_ok());
    }

    #[test]
    fn ranges_past_the_end_or_overflowing_are_rejected() {
        assert_eq!(
            check_range(4096, 4000, 97),
            Err(VerbsError::InvalidRange {
                offset: 4000,
                len: 97,
                region_len: 4096
            })
        );
        assert!(check_range(4096, 4097, 0).is_err());
        assert!(check_range(usize::MAX, usize::MAX, 2).is_err());
        assert!(check_range(usize::MAX, 0, 1 << 32).is_err());
    }

    #[test]
    fn access_flags_combine() {
        let a = Access::LOCAL_WRITE | Access::REMOTE_READ;
        assert_eq!(
            a.bits(),
            sys::ibv_access_flags::IBV_ACCESS_LOCAL_WRITE
                | sys::ibv_access_flags::IBV_ACCESS_REMOTE_READ
        );
    }
}
