//! Registered memory of large messages: the per-message registrations (counted per shard,
//! so a test can see every one released) and [`RegisteredBuf`], user memory registered once
//! (brpc's `RegisterMemoryForRdma`) and sent any number of times without a copy.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::{Rc, Weak};

use bytes::Bytes;
use corewire_verbs::{Access, MemoryRegion, VerbsError};

use super::super::device::Device;
use super::super::shard::RdmaShard;
use super::super::RdmaError;

/// A registration made for one large message (the sender's region over the message, or the
/// receiver's read buffer), counted in `RdmaStats::large_registrations` while it lives.
pub(crate) struct Tracked {
    mr: Option<MemoryRegion>,
    shard: Weak<RdmaShard>,
}

impl Tracked {
    pub fn new(shard: &Rc<RdmaShard>, mr: MemoryRegion) -> Tracked {
        let mut st = shard.stats.borrow_mut();
        st.large_registrations += 1;
        st.large_registered_bytes += mr.len() as u64;
        drop(st);
        Tracked {
            mr: Some(mr),
            shard: Rc::downgrade(shard),
        }
    }

    pub fn mr(&self) -> &MemoryRegion {
        self.mr.as_ref().expect("present until dropped or taken")
    }

    /// Deregister a read buffer and take its memory (no copy).
    pub fn into_boxed(mut self) -> Option<Box<[u8]>> {
        let mr = self.mr.take()?;
        self.uncount(mr.len());
        mr.into_boxed().ok()
    }

    fn uncount(&self, len: usize) {
        if let Some(shard) = self.shard.upgrade() {
            let mut st = shard.stats.borrow_mut();
            st.large_registrations -= 1;
            st.large_registered_bytes -= len as u64;
        }
    }
}

impl Drop for Tracked {
    fn drop(&mut self) {
        if let Some(mr) = self.mr.take() {
            self.uncount(mr.len());
        }
    }
}

/// What the sender holds for a large message until the peer is done with it.
pub(crate) enum Held {
    /// Registered for this message alone.
    Own(Tracked),
    /// Part of a [`RegisteredBuf`] (its registration on this connection's device).
    User(Rc<MemoryRegion>),
}

impl Held {
    pub fn rkey(&self) -> u32 {
        match self {
            Held::Own(t) => t.mr().rkey(),
            Held::User(mr) => mr.rkey(),
        }
    }
}

/// Memory registered once for sending without a copy (brpc's `RegisterMemoryForRdma`): make
/// one on a shard with the RDMA transport installed, then send [`bytes`](Self::bytes), or any
/// slice of it, as a payload or attachment on that shard's RDMA connections, as often as you
/// like. Whatever its size it goes by RDMA READ from this memory (no copy into send buffers,
/// no registration per message); elsewhere (TCP, another shard) it is ordinary `Bytes`.
///
/// Cheap to clone; shard-bound (`!Send`). The registration lives as long as a clone or a
/// message in flight does; `Bytes` taken from it stay valid after that, only unregistered.
/// It counts against RLIMIT_MEMLOCK, on each device it is sent through.
#[derive(Clone)]
pub struct RegisteredBuf {
    inner: Rc<UserRegion>,
}

pub(crate) struct UserRegion {
    bytes: Bytes,
    /// The registration on each device of the shard, by device name (made when the buffer is
    /// created for the devices open then, else on first use).
    regions: RefCell<Vec<(String, Rc<MemoryRegion>)>>,
    shard: Weak<RdmaShard>,
}

impl std::fmt::Debug for RegisteredBuf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RegisteredBuf")
            .field("len", &self.inner.bytes.len())
            .field("devices", &self.inner.regions.borrow().len())
            .finish()
    }
}

impl RegisteredBuf {
    /// Register `data` on this shard's RDMA devices. Fails when the transport is not
    /// installed here, the buffer is empty, or registration fails (RLIMIT_MEMLOCK, say).
    pub fn new(data: impl Into<Bytes>) -> Result<RegisteredBuf, RdmaError> {
        let shard = RdmaShard::current()?;
        let bytes = data.into();
        if bytes.is_empty() {
            return Err(RdmaError::Device(VerbsError::InvalidArgument(
                "a registered buffer of 0 bytes",
            )));
        }
        let inner = Rc::new(UserRegion {
            bytes,
            regions: RefCell::new(Vec::new()),
            shard: Rc::downgrade(&shard),
        });
        for device in shard.devices() {
            inner.region_on(&device).map_err(RdmaError::Device)?;
        }
        shard
            .user_regions
            .borrow_mut()
            .insert(inner.bytes.as_ptr() as usize, Rc::downgrade(&inner));
        shard.stats.borrow_mut().registered_bufs += 1;
        Ok(RegisteredBuf { inner })
    }

    /// The registered bytes (shared, not copied): send them, or slices of them.
    pub fn bytes(&self) -> Bytes {
        self.inner.bytes.clone()
    }

    /// Bytes in the buffer.
    pub fn len(&self) -> usize {
        self.inner.bytes.len()
    }

    /// Whether the buffer is empty.
    pub fn is_empty(&self) -> bool {
        self.inner.bytes.is_empty()
    }
}

impl UserRegion {
    fn region_on(&self, device: &Device) -> Result<Rc<MemoryRegion>, VerbsError> {
        let name = device.name();
        if let Some((_, mr)) = self.regions.borrow().iter().find(|(n, _)| *n == name) {
            return Ok(mr.clone());
        }
        let mr = Rc::new(MemoryRegion::from_bytes(
            &device.pd,
            self.bytes.clone(),
            Access::REMOTE_READ,
        )?);
        self.regions.borrow_mut().push((name, mr.clone()));
        Ok(mr)
    }
}

impl Drop for UserRegion {
    fn drop(&mut self) {
        let Some(shard) = self.shard.upgrade() else {
            return;
        };
        let key = self.bytes.as_ptr() as usize;
        let mut map = shard.user_regions.borrow_mut();
        // Another buffer over the same memory may have taken the entry since.
        if map.get(&key).is_some_and(|w| w.strong_count() == 0) {
            map.remove(&key);
        }
        drop(map);
        shard.stats.borrow_mut().registered_bufs -= 1;
    }
}

/// The user registrations of a shard, by start address.
pub(crate) type UserRegions = RefCell<BTreeMap<usize, Weak<UserRegion>>>;

/// The registration on `device` of a [`RegisteredBuf`] that `part` lies in, if any.
pub(crate) fn user_region(
    regions: &UserRegions,
    device: &Device,
    part: &Bytes,
) -> Option<Result<Rc<MemoryRegion>, VerbsError>> {
    let map = regions.borrow();
    if map.is_empty() || part.is_empty() {
        return None;
    }
    let start = part.as_ptr() as usize;
    let (_, weak) = map.range(..=start).next_back()?;
    let region = weak.upgrade()?;
    drop(map);
    let r_start = region.bytes.as_ptr() as usize;
    let inside = start + part.len() <= r_start + region.bytes.len();
    inside.then(|| region.region_on(device))
}
