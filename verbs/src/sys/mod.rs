//! Raw rdma-core: the types and constants of `<infiniband/verbs.h>` and `<rdma/rdma_cma.h>`
//! (ibv_*, rdma_*, IBV_*, RDMA_* items; C enums are modules of constants,
//! `ibv_wc_status::IBV_WC_SUCCESS`), and the calls, with their C names and signatures.
//!
//! Nothing here is linked at build time. `bindings.rs` is generated ahead of time by
//! `cargo xtask gen-verbs` (bindgen over rdma-core 44's headers, checked in CI against the
//! installed headers); its functions go through a table resolved from `libibverbs.so.1` and
//! `librdmacm.so.1` when [`load`] first runs ([`loader`]). The calls that are `static inline`
//! in the headers (posting, polling, arming a CQ, the `ibv_query_port` and `ibv_reg_mr`
//! macros, ...) are written in Rust in [`inline`] exactly as the headers write them, over the
//! provider's ops table in the device context.
//!
//! The safe layer calls [`load`] when its first object is made (a device context, an event
//! channel, a device listing) and returns its error; every later call comes from an object
//! that exists only because loading succeeded. A raw call made before [`load`] loads the
//! libraries itself and panics when they are missing.

// Generated (prettyplease's layout, which rustfmt must leave alone so the CI check compares
// like with like): C names, and unsafe blocks without SAFETY comments in the calls through
// the table and bindgen's `Default` impls.
#[rustfmt::skip]
#[allow(
    non_upper_case_globals,
    non_camel_case_types,
    non_snake_case,
    dead_code,
    clippy::all,
    clippy::undocumented_unsafe_blocks
)]
mod bindings;
pub mod inline;
pub mod loader;

pub use bindings::*;
// The inline calls shadow the glob: `sys::ibv_query_port` is the header's macro, and the
// exported compat symbol it falls back to stays `bindings::ibv_query_port`.
pub use inline::{
    ibv_poll_cq, ibv_post_recv, ibv_post_send, ibv_post_srq_recv, ibv_query_gid_table,
    ibv_query_port, ibv_reg_mr, ibv_req_notify_cq, rdma_get_local_addr, rdma_get_peer_addr,
};
pub use loader::{load, Library};

/// The loaded table; loads the libraries on first use.
///
/// # Panics
/// When they cannot be loaded: the safe layer calls [`load`] first and reports that as an
/// error instead, so only a raw call made without it can get here.
fn fns() -> &'static Fns {
    match loader::loaded() {
        Ok(fns) => fns,
        Err(e) => panic!("corewire-verbs: {e}"),
    }
}
