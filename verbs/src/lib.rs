//! RDMA verbs and rdma_cm for corewire: a small safe layer over rdma-core's API. All `unsafe` of the project's RDMA path lives in this crate.
//!
//! # No rdma-core at build time
//!
//! Building this crate needs no rdma-core headers, no `pkg-config` and no libclang, and
//! compiles no C: the bindings are generated ahead of time and committed
//! (`src/sys/bindings.rs`), and `libibverbs.so.1` and `librdmacm.so.1` are loaded with
//! `dlopen` the first time RDMA is used — [`Context::open`], [`Context::from_rdma_cm`],
//! [`CmEventChannel::new`], [`list_devices`] or an explicit [`load`]. On a host without
//! them those calls return
//! [`VerbsError::LibraryUnavailable`], which names the missing library and the packages to
//! install (`apt-get install libibverbs1 librdmacm1 ibverbs-providers` on Debian/Ubuntu), and
//! nothing else in the program is affected. Every function is resolved once, with `dlvsym`,
//! at the symbol version the bindings were generated for (the version a program linked
//! against that rdma-core would bind to). The calls that are `static inline` in the headers —
//! `ibv_post_send`, `ibv_post_recv`, `ibv_post_srq_recv`, `ibv_poll_cq`, `ibv_req_notify_cq`,
//! and the `ibv_query_port` and `ibv_reg_mr` macros — are written in Rust in `src/sys/inline.rs`
//! as the headers write them: the data path calls the provider through the context's ops
//! table, with no extra hop.
//!
//! The bindings come from rdma-core 44 (Debian 12) on x86_64. Their structs use fixed-width
//! C types, and `libc`'s pthread types for the mutexes some objects embed, so they hold on
//! every 64-bit Linux target; the layout assertions bindgen wrote are compiled on x86_64.
//! rdma-core keeps these structs ABI-stable (new fields only grow the extended context), so
//! the bindings work with older and newer libraries that export the symbol versions used.
//!
//! Regenerate them with `cargo xtask gen-verbs` (the `verbs/gen` tool: bindgen over the
//! installed `<infiniband/verbs.h>` and `<rdma/rdma_cma.h>`, which needs `libclang-dev`,
//! `libibverbs-dev` and `librdmacm-dev`); `cargo xtask test` runs `cargo xtask gen-verbs
//! --check`, which fails when the committed file differs from what the installed headers
//! give or when the installed libraries lack a symbol version the table uses.
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
#![deny(missing_docs)]

// Raw rdma-core (generated bindings, the loader, the header's inline calls): the safe layer
// is the API; `load` and `Library` are re-exported below.
mod sys;

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
// Test helpers shared by the workspace's RDMA integration tests (the facade's, kv's, the
// greeter's and the examples'), which are other crates and so need it public. Not part of the
// API: hidden from the docs and not covered by semver.
#[doc(hidden)]
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
pub use sys::{load, Library};
pub use wc::{WcOpcode, WcStatus, WorkCompletion};
