//! RDMA verbs and rdma_cm for corewire: bindings generated at build time from the installed
//! rdma-core headers ([`sys`]), and a small safe layer on top. All `unsafe` of the project's
//! RDMA path lives in this crate.
//!
//! Ownership mirrors rdma-core's rules: each object keeps its parents alive (reference
//! counted) and is destroyed before them — MR/QP/SRQ before their PD, QP before its CQs and
//! its rdma_cm id, CQs before their completion channel, everything before the device
//! context. Objects that belong to one shard are not `Send`; a [`CmId`] is, so an accepted
//! connection can be handed to another shard and [`CmId::migrate`]d to its event channel.
//!
//! Shard-owned handles cannot cross threads (checked at compile time):
//!
//! ```compile_fail
//! fn send<T: Send>() {}
//! send::<corewire_verbs::QueuePair>();
//! ```
//! ```compile_fail
//! fn send<T: Send>() {}
//! send::<corewire_verbs::CompletionQueue>();
//! ```
//! ```compile_fail
//! fn send<T: Send>() {}
//! send::<corewire_verbs::CmEventChannel>();
//! ```
//! while an accepted id can be handed over:
//! ```
//! fn send<T: Send>() {}
//! send::<corewire_verbs::CmId>();
//! ```
//!
//! Typical server flow (one shard): [`CmEventChannel::new`] → [`CmId::new`] →
//! [`CmId::bind_addr`] → [`CmId::listen`] → on [`CmEventKind::ConnectRequest`] take the new
//! id → [`Context::from_cm_id`], [`ProtectionDomain`], [`CompletionQueue`] →
//! [`QueuePair::create`] → post receives → [`CmId::accept`] → `Established`.

pub mod sys {
    //! Raw bindgen output over `<infiniband/verbs.h>` and `<rdma/rdma_cma.h>` (ibv_*,
    //! rdma_*, IBV_*, RDMA_* items), plus `corewire_*` wrappers of the header-inline calls
    //! (csrc/shim.c). C enums are modules of constants (`ibv_wc_status::IBV_WC_SUCCESS`).
    #![allow(
        non_upper_case_globals,
        non_camel_case_types,
        non_snake_case,
        dead_code,
        clippy::all,
        // bindgen's layout tests: generated, not reviewed by hand
        clippy::undocumented_unsafe_blocks
    )]
    include!(concat!(env!("OUT_DIR"), "/sys.rs"));
}

mod addr;
mod async_event;
mod cm;
mod cm_event;
mod cq;
mod device;
mod error;
mod fd;
mod listing;
mod mr;
mod pd;
mod qp;
mod srq;
pub mod testing;
mod wc;

pub use async_event::AsyncEvent;
pub use cm::{
    CmEventChannel, CmId, CmIdKey, ConnParams, ReadDepths, MAX_ACCEPT_PRIVATE_DATA,
    MAX_CONNECT_PRIVATE_DATA, MAX_REJECT_PRIVATE_DATA,
};
pub use cm_event::{CmEvent, CmEventKind};
pub use cq::{CompletionChannel, CompletionQueue, CqKey};
pub use device::{Context, DeviceAttr, PortAttr, PortState};
pub use error::{Result, VerbsError};
pub use listing::{list_devices, DeviceInfo, GidInfo, GidKind, PortInfo};
pub use mr::{Access, MemoryRegion, Sge};
pub use pd::ProtectionDomain;
pub use qp::{QpCaps, QpCreateError, QpInit, QueuePair, SendOp, SendWr, MAX_SGE};
pub use srq::{SharedReceiveQueue, SrqKey};
pub use wc::{WcOpcode, WcStatus, WorkCompletion};
