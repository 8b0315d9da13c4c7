//! `Context`: an open RDMA device.

use std::ffi::CStr;
use std::ptr::NonNull;
use std::rc::Rc;

use crate::cm::CmId;
use crate::error::{check_ret, Result, VerbsError};
use crate::sys;

/// An open RDMA device (`ibv_context`). Cheap to clone (reference counted); every object
/// created from it keeps it open. Not `Send`: a shard opens its own.
#[derive(Clone)]
pub struct Context {
    pub(crate) inner: Rc<ContextInner>,
}

pub(crate) struct ContextInner {
    pub(crate) ptr: NonNull<sys::ibv_context>,
    owner: Owner,
}

enum Owner {
    /// From `ibv_open_device`: ours to close.
    Verbs,
    /// One of librdmacm's device contexts. librdmacm keeps them open for the process and
    /// hands the same one to every rdma_cm id on that device; we hold the
    /// `rdma_get_devices` list, which holds librdmacm's reference on the device.
    RdmaCm(NonNull<*mut sys::ibv_context>),
}

impl Drop for ContextInner {
    fn drop(&mut self) {
        match self.owner {
            Owner::Verbs => {
                // SAFETY: ptr came from ibv_open_device and every child object (PD, CQ,
                // channel) holds an Rc to this inner, so none is left when it drops.
                let rc = unsafe { sys::ibv_close_device(self.ptr.as_ptr()) };
                if rc != 0 {
                    tracing::warn!(rc, "ibv_close_device failed");
                }
            }
            Owner::RdmaCm(list) => {
                // SAFETY: list came from rdma_get_devices and is freed exactly once, here.
                unsafe { sys::rdma_free_devices(list.as_ptr()) };
            }
        }
    }
}

/// Port attributes that matter to this project.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct PortAttr {
    /// Whether the port is up.
    pub state: PortState,
    /// Active path MTU in bytes (256..4096).
    pub active_mtu: u32,
    /// Largest path MTU the port supports, in bytes.
    pub max_mtu: u32,
    /// Entries of the port's GID table.
    pub gid_table_len: u32,
    /// Largest message the port carries, in bytes.
    pub max_msg_size: u32,
    /// True for RoCE (Ethernet link layer), false for InfiniBand.
    pub is_ethernet: bool,
}

/// Device limits that matter to this project (`ibv_query_device`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct DeviceAttr {
    /// Queue pairs, at most.
    pub max_qp: u32,
    /// Work requests per queue (send or receive) of one queue pair.
    pub max_qp_wr: u32,
    /// Scatter/gather entries per work request.
    pub max_sge: u32,
    /// Completion queues, at most.
    pub max_cq: u32,
    /// Entries of one completion queue.
    pub max_cqe: u32,
    /// Bytes one memory region may cover.
    pub max_mr_size: u64,
    /// Shared receive queues, at most.
    pub max_srq: u32,
    /// Work requests per shared receive queue.
    pub max_srq_wr: u32,
    /// RDMA READs a queue pair may have outstanding as the target / as the initiator.
    pub max_qp_rd_atom: u32,
    /// RDMA READs a queue pair may have outstanding as the initiator.
    pub max_qp_init_rd_atom: u32,
    /// Physical ports of the device.
    pub phys_port_cnt: u8,
}

/// `ibv_port_state`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum PortState {
    /// The link is down.
    Down,
    /// The link is up, the subnet manager has not configured it yet.
    Init,
    /// Configured, not yet active.
    Armed,
    /// Carrying traffic.
    Active,
    /// Active, deferring to a recovering link.
    ActiveDefer,
    /// A state this crate does not know (its raw value).
    Other(u32),
}

impl PortState {
    fn from_raw(raw: u32) -> Self {
        use sys::ibv_port_state::*;
        match raw {
            IBV_PORT_DOWN => PortState::Down,
            IBV_PORT_INIT => PortState::Init,
            IBV_PORT_ARMED => PortState::Armed,
            IBV_PORT_ACTIVE => PortState::Active,
            IBV_PORT_ACTIVE_DEFER => PortState::ActiveDefer,
            other => PortState::Other(other),
        }
    }
}

fn mtu_bytes(raw: u32) -> u32 {
    // IBV_MTU_256 = 1 .. IBV_MTU_4096 = 5
    if (1..=5).contains(&raw) {
        128 << raw
    } else {
        0
    }
}

impl Context {
    /// Opens a device with `ibv_open_device`: the one named `name`, or the first one.
    /// Use this for verbs-only work; for QPs made with rdma_cm use [`Context::from_cm_id`].
    pub fn open(name: Option<&str>) -> Result<Context> {
        sys::load()?;
        let mut n = 0;
        // SAFETY: ibv_get_device_list writes the count to n and returns a NULL-terminated
        // array (or NULL), which we free below after opening the device we want.
        let list = unsafe { sys::ibv_get_device_list(&mut n) };
        if list.is_null() {
            // With no rdma subsystem at all it fails (ENOSYS) instead of returning 0 devices.
            return Err(VerbsError::NoDevice {
                name: name.map(str::to_owned),
            });
        }
        let mut found = None;
        for i in 0..usize::try_from(n).unwrap_or(0) {
            // SAFETY: i < n, the array has n valid device pointers.
            let dev = unsafe { *list.add(i) };
            // SAFETY: dev is valid while the list is; the name is a NUL-terminated string.
            let dev_name = unsafe { CStr::from_ptr(sys::ibv_get_device_name(dev)) };
            if name.is_none_or(|want| dev_name.to_bytes() == want.as_bytes()) {
                found = Some(dev);
                break;
            }
        }
        let result = match found {
            None => Err(VerbsError::NoDevice {
                name: name.map(str::to_owned),
            }),
            Some(dev) => {
                // SAFETY: dev is a valid device from the list, which is still alive.
                let ctx = unsafe { sys::ibv_open_device(dev) };
                NonNull::new(ctx)
                    .map(|ptr| Context {
                        inner: Rc::new(ContextInner {
                            ptr,
                            owner: Owner::Verbs,
                        }),
                    })
                    .ok_or_else(|| VerbsError::last("ibv_open_device"))
            }
        };
        // SAFETY: list came from ibv_get_device_list; an opened context stays valid after.
        unsafe { sys::ibv_free_device_list(list) };
        result
    }

    /// The device context librdmacm uses for `id` (set once the id is bound or has resolved
    /// an address). Protection domains for `QueuePair::create` must come from this context.
    pub fn from_cm_id(id: &CmId) -> Result<Context> {
        let verbs = id.verbs_ptr().ok_or(VerbsError::NotBound)?;
        Self::rdma_cm_device(|ctx| ctx == verbs.as_ptr())
    }

    /// librdmacm's context for the device named `name` (or the first device): the same
    /// context that ids bound to that device will use, so a shard can allocate its PD before
    /// any connection arrives.
    pub fn from_rdma_cm(name: Option<&str>) -> Result<Context> {
        Self::rdma_cm_device(|ctx| {
            // SAFETY: ctx is a live context from rdma_get_devices; device and its name are
            // valid while the context is open.
            let dev_name = unsafe { CStr::from_ptr(sys::ibv_get_device_name((*ctx).device)) };
            name.is_none_or(|want| dev_name.to_bytes() == want.as_bytes())
        })
        .map_err(|e| match e {
            VerbsError::NoDevice { .. } => VerbsError::NoDevice {
                name: name.map(str::to_owned),
            },
            e => e,
        })
    }

    fn rdma_cm_device(mut pick: impl FnMut(*mut sys::ibv_context) -> bool) -> Result<Context> {
        sys::load()?;
        let mut n = 0;
        // SAFETY: writes the count to n; returns a NULL-terminated array or NULL.
        let list = unsafe { sys::rdma_get_devices(&mut n) };
        let Some(list) = NonNull::new(list) else {
            return Err(VerbsError::NoDevice { name: None });
        };
        for i in 0..usize::try_from(n).unwrap_or(0) {
            // SAFETY: i < n entries are valid context pointers.
            let ctx = unsafe { *list.as_ptr().add(i) };
            if let Some(ptr) = NonNull::new(ctx).filter(|p| pick(p.as_ptr())) {
                return Ok(Context {
                    inner: Rc::new(ContextInner {
                        ptr,
                        owner: Owner::RdmaCm(list),
                    }),
                });
            }
        }
        // SAFETY: not handed to any ContextInner, so freed exactly once here.
        unsafe { sys::rdma_free_devices(list.as_ptr()) };
        Err(VerbsError::NoDevice { name: None })
    }

    /// The device name (e.g. `rxe0`).
    pub fn device_name(&self) -> String {
        // SAFETY: the context is open (we hold it); its device and name outlive it.
        unsafe { CStr::from_ptr(sys::ibv_get_device_name((*self.as_ptr()).device)) }
            .to_string_lossy()
            .into_owned()
    }

    /// `ibv_query_port` (ports are numbered from 1).
    pub fn query_port(&self, port: u8) -> Result<PortAttr> {
        let mut attr = sys::ibv_port_attr::default();
        // SAFETY: context is open; attr is a properly sized out-parameter on our stack.
        let rc = unsafe { sys::ibv_query_port(self.as_ptr(), port, &mut attr) };
        check_ret("ibv_query_port", rc)?;
        Ok(PortAttr {
            state: PortState::from_raw(attr.state),
            active_mtu: mtu_bytes(attr.active_mtu),
            max_mtu: mtu_bytes(attr.max_mtu),
            gid_table_len: u32::try_from(attr.gid_tbl_len).unwrap_or(0),
            max_msg_size: attr.max_msg_sz,
            is_ethernet: u32::from(attr.link_layer) == sys::IBV_LINK_LAYER_ETHERNET,
        })
    }

    /// `ibv_query_device`.
    pub fn query_device(&self) -> Result<DeviceAttr> {
        let mut a = sys::ibv_device_attr::default();
        // SAFETY: context is open; a is a properly sized out-parameter on our stack.
        let rc = unsafe { sys::ibv_query_device(self.as_ptr(), &mut a) };
        check_ret("ibv_query_device", rc)?;
        let n = |v: i32| u32::try_from(v).unwrap_or(0);
        Ok(DeviceAttr {
            max_qp: n(a.max_qp),
            max_qp_wr: n(a.max_qp_wr),
            max_sge: n(a.max_sge),
            max_cq: n(a.max_cq),
            max_cqe: n(a.max_cqe),
            max_mr_size: a.max_mr_size,
            max_srq: n(a.max_srq),
            max_srq_wr: n(a.max_srq_wr),
            max_qp_rd_atom: n(a.max_qp_rd_atom),
            max_qp_init_rd_atom: n(a.max_qp_init_rd_atom),
            phys_port_cnt: a.phys_port_cnt,
        })
    }

    /// `ibv_query_gid`: the 16 raw bytes of GID `index` on `port`.
    pub fn query_gid(&self, port: u8, index: u32) -> Result<[u8; 16]> {
        let index = i32::try_from(index).map_err(|_| VerbsError::InvalidArgument("gid index"))?;
        let mut gid = sys::ibv_gid::default();
        // SAFETY: context is open; gid is an out-parameter of the right type.
        let rc = unsafe { sys::ibv_query_gid(self.as_ptr(), port, index, &mut gid) };
        check_ret("ibv_query_gid", rc)?;
        // SAFETY: ibv_gid is a union of [u8; 16] and two u64s; every bit pattern is valid.
        Ok(unsafe { gid.raw })
    }

    pub(crate) fn as_ptr(&self) -> *mut sys::ibv_context {
        self.inner.ptr.as_ptr()
    }
}

impl std::fmt::Debug for Context {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Context")
            .field("device", &self.device_name())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mtu_enum_maps_to_bytes() {
        assert_eq!(mtu_bytes(sys::ibv_mtu::IBV_MTU_256), 256);
        assert_eq!(mtu_bytes(sys::ibv_mtu::IBV_MTU_1024), 1024);
        assert_eq!(mtu_bytes(sys::ibv_mtu::IBV_MTU_4096), 4096);
        assert_eq!(mtu_bytes(0), 0);
    }

    #[test]
    fn port_state_maps_known_and_unknown_values() {
        assert_eq!(
            PortState::from_raw(sys::ibv_port_state::IBV_PORT_ACTIVE),
            PortState::Active
        );
        assert_eq!(PortState::from_raw(77), PortState::Other(77));
    }
}
