//! The rdma-core functions corewire-verbs calls through its run-time table, each with the
//! library that exports it and the symbol version whose C signature the headers declare.
//!
//! The versions pin the ABI: libibverbs exports several versions of most calls (1.0 and 1.1
//! for the ones whose structs changed in 2006, later ones for newer calls), and a program
//! linked at build time binds to the default version of the library it was linked against.
//! Resolving with `dlvsym` and these versions gives the same binding a link against
//! rdma-core 44 gives, whatever newer default a later rdma-core adds. The generator checks
//! every entry against the installed libraries.
//!
//! Calls that are `static inline` in the headers (`ibv_post_send`, `ibv_poll_cq`,
//! `ibv_req_notify_cq`, `ibv_post_recv`, `ibv_post_srq_recv`, the `ibv_query_port` and
//! `ibv_reg_mr` macros, `ibv_query_gid_table`, `rdma_get_local_addr`/`rdma_get_peer_addr`)
//! have no symbol: verbs/src/sys/inline.rs writes them in Rust over the symbols listed here
//! (`ibv_query_port` is the compat entry point the macro falls back to, `_ibv_query_gid_table`
//! the one the inline wrapper forwards to).

/// Which shared library exports a symbol.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lib {
    /// `libibverbs.so.1`
    Verbs,
    /// `librdmacm.so.1`
    RdmaCm,
}

impl Lib {
    /// The soname `dlopen` loads.
    pub fn soname(self) -> &'static str {
        match self {
            Lib::Verbs => "libibverbs.so.1",
            Lib::RdmaCm => "librdmacm.so.1",
        }
    }

    /// The variant of the `Library` enum in verbs/src/sys/loader.rs.
    pub fn variant(self) -> &'static str {
        match self {
            Lib::Verbs => "Verbs",
            Lib::RdmaCm => "RdmaCm",
        }
    }
}

/// One function of the table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Symbol {
    pub lib: Lib,
    pub name: &'static str,
    pub version: &'static str,
}

const fn verbs(name: &'static str, version: &'static str) -> Symbol {
    Symbol {
        lib: Lib::Verbs,
        name,
        version,
    }
}

const fn cm(name: &'static str) -> Symbol {
    Symbol {
        lib: Lib::RdmaCm,
        name,
        version: "RDMACM_1.0",
    }
}

/// Every function in the table, in table order.
pub const SYMBOLS: &[Symbol] = &[
    // devices and contexts
    verbs("ibv_get_device_list", "IBVERBS_1.1"),
    verbs("ibv_free_device_list", "IBVERBS_1.1"),
    verbs("ibv_get_device_name", "IBVERBS_1.1"),
    verbs("ibv_open_device", "IBVERBS_1.1"),
    verbs("ibv_close_device", "IBVERBS_1.1"),
    verbs("ibv_query_device", "IBVERBS_1.1"),
    verbs("ibv_query_port", "IBVERBS_1.1"),
    verbs("ibv_query_gid", "IBVERBS_1.1"),
    verbs("_ibv_query_gid_table", "IBVERBS_1.11"),
    verbs("ibv_get_async_event", "IBVERBS_1.1"),
    verbs("ibv_ack_async_event", "IBVERBS_1.1"),
    // protection domains and memory regions
    verbs("ibv_alloc_pd", "IBVERBS_1.1"),
    verbs("ibv_dealloc_pd", "IBVERBS_1.1"),
    verbs("ibv_reg_mr", "IBVERBS_1.1"),
    verbs("ibv_reg_mr_iova2", "IBVERBS_1.8"),
    verbs("ibv_dereg_mr", "IBVERBS_1.1"),
    // completion channels and queues
    verbs("ibv_create_comp_channel", "IBVERBS_1.0"),
    verbs("ibv_destroy_comp_channel", "IBVERBS_1.0"),
    verbs("ibv_create_cq", "IBVERBS_1.1"),
    verbs("ibv_destroy_cq", "IBVERBS_1.1"),
    verbs("ibv_resize_cq", "IBVERBS_1.1"),
    verbs("ibv_get_cq_event", "IBVERBS_1.1"),
    verbs("ibv_ack_cq_events", "IBVERBS_1.1"),
    // shared receive queues and queue pairs
    verbs("ibv_create_srq", "IBVERBS_1.1"),
    verbs("ibv_modify_srq", "IBVERBS_1.1"),
    verbs("ibv_destroy_srq", "IBVERBS_1.1"),
    verbs("ibv_query_qp", "IBVERBS_1.1"),
    verbs("ibv_modify_qp", "IBVERBS_1.1"),
    // the connection manager
    cm("rdma_get_devices"),
    cm("rdma_free_devices"),
    cm("rdma_create_event_channel"),
    cm("rdma_destroy_event_channel"),
    cm("rdma_get_cm_event"),
    cm("rdma_ack_cm_event"),
    cm("rdma_create_id"),
    cm("rdma_destroy_id"),
    cm("rdma_migrate_id"),
    cm("rdma_set_option"),
    cm("rdma_bind_addr"),
    cm("rdma_listen"),
    cm("rdma_resolve_addr"),
    cm("rdma_resolve_route"),
    cm("rdma_create_qp"),
    cm("rdma_destroy_qp"),
    cm("rdma_connect"),
    cm("rdma_accept"),
    cm("rdma_reject"),
    cm("rdma_disconnect"),
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_symbol_is_listed_once() {
        for (i, s) in SYMBOLS.iter().enumerate() {
            assert!(
                SYMBOLS[..i].iter().all(|t| t.name != s.name),
                "{} listed twice",
                s.name
            );
            let prefix = match s.lib {
                Lib::Verbs => "IBVERBS_1.",
                Lib::RdmaCm => "RDMACM_1.",
            };
            assert!(s.version.starts_with(prefix), "{s:?}");
        }
    }
}
