//! The rdma-core calls that are `static inline` functions or macros in the headers, so no
//! library exports them: each is written here as rdma-core 44's `<infiniband/verbs.h>` and
//! `<rdma/rdma_cma.h>` write it. The data-path ones (`ibv_post_send`, `ibv_post_recv`,
//! `ibv_post_srq_recv`, `ibv_poll_cq`, `ibv_req_notify_cq`) call the provider through the ops
//! table in the device context, as a C program compiled against the headers does; where the
//! C would call a NULL op, these return `ENOSYS` (a negative count for `ibv_poll_cq`).
//!
//! # Safety
//! Each function takes the same pointers as its C counterpart and has the same
//! requirements: live objects from this process's rdma-core, and out-parameters valid for
//! writing.

use std::ffi::{c_int, c_void};
use std::mem::{offset_of, size_of};
use std::ptr::addr_of_mut;

use super::bindings::{
    self, _compat_ibv_port_attr, _ibv_query_gid_table, ib_uverbs_access_flags, ibv_context, ibv_cq,
    ibv_gid_entry, ibv_mr, ibv_pd, ibv_port_attr, ibv_qp, ibv_recv_wr, ibv_reg_mr_iova2,
    ibv_send_wr, ibv_srq, ibv_wc, rdma_cm_id, sockaddr, verbs_context,
};

/// `ibv_post_send`: `qp->context->ops.post_send(qp, wr, bad_wr)`.
///
/// # Safety
/// See the [module](self).
#[inline]
pub unsafe fn ibv_post_send(
    qp: *mut ibv_qp,
    wr: *mut ibv_send_wr,
    bad_wr: *mut *mut ibv_send_wr,
) -> c_int {
    // SAFETY: the caller passes a live QP; its context (and the ops table in it) outlives it.
    match unsafe { (*(*qp).context).ops.post_send } {
        // SAFETY: the provider's own entry point, called with the caller's arguments.
        Some(op) => unsafe { op(qp, wr, bad_wr) },
        None => libc::ENOSYS,
    }
}

/// `ibv_post_recv`: `qp->context->ops.post_recv(qp, wr, bad_wr)`.
///
/// # Safety
/// See the [module](self).
#[inline]
pub unsafe fn ibv_post_recv(
    qp: *mut ibv_qp,
    wr: *mut ibv_recv_wr,
    bad_wr: *mut *mut ibv_recv_wr,
) -> c_int {
    // SAFETY: as in ibv_post_send.
    match unsafe { (*(*qp).context).ops.post_recv } {
        // SAFETY: as in ibv_post_send.
        Some(op) => unsafe { op(qp, wr, bad_wr) },
        None => libc::ENOSYS,
    }
}

/// `ibv_post_srq_recv`: `srq->context->ops.post_srq_recv(srq, recv_wr, bad_recv_wr)`.
///
/// # Safety
/// See the [module](self).
#[inline]
pub unsafe fn ibv_post_srq_recv(
    srq: *mut ibv_srq,
    recv_wr: *mut ibv_recv_wr,
    bad_recv_wr: *mut *mut ibv_recv_wr,
) -> c_int {
    // SAFETY: the caller passes a live SRQ; its context outlives it.
    match unsafe { (*(*srq).context).ops.post_srq_recv } {
        // SAFETY: as in ibv_post_send.
        Some(op) => unsafe { op(srq, recv_wr, bad_recv_wr) },
        None => libc::ENOSYS,
    }
}

/// `ibv_poll_cq`: `cq->context->ops.poll_cq(cq, num_entries, wc)`.
///
/// # Safety
/// See the [module](self); `wc` has room for `num_entries` completions.
#[inline]
pub unsafe fn ibv_poll_cq(cq: *mut ibv_cq, num_entries: c_int, wc: *mut ibv_wc) -> c_int {
    // SAFETY: the caller passes a live CQ; its context outlives it.
    match unsafe { (*(*cq).context).ops.poll_cq } {
        // SAFETY: as in ibv_post_send.
        Some(op) => unsafe { op(cq, num_entries, wc) },
        None => -libc::ENOSYS,
    }
}

/// `ibv_req_notify_cq`: `cq->context->ops.req_notify_cq(cq, solicited_only)`.
///
/// # Safety
/// See the [module](self).
#[inline]
pub unsafe fn ibv_req_notify_cq(cq: *mut ibv_cq, solicited_only: c_int) -> c_int {
    // SAFETY: as in ibv_poll_cq.
    match unsafe { (*(*cq).context).ops.req_notify_cq } {
        // SAFETY: as in ibv_post_send.
        Some(op) => unsafe { op(cq, solicited_only) },
        None => libc::ENOSYS,
    }
}

/// `__VERBS_ABI_IS_EXTENDED`: the `abi_compat` value of a context embedded in a
/// `verbs_context` (`((void *)UINTPTR_MAX)`).
const VERBS_ABI_IS_EXTENDED: *mut c_void = usize::MAX as *mut c_void;

/// `verbs_get_ctx`: the extended context around `ctx`, when it has one.
///
/// # Safety
/// `ctx` is a live device context.
unsafe fn verbs_get_ctx(ctx: *mut ibv_context) -> Option<*mut verbs_context> {
    // SAFETY: the caller passes a live context; abi_compat is a plain field.
    if unsafe { (*ctx).abi_compat } != VERBS_ABI_IS_EXTENDED {
        return None;
    }
    // The header's open-coded container_of: `context` is the last field of verbs_context.
    Some(
        ctx.cast::<u8>()
            .wrapping_sub(offset_of!(verbs_context, context))
            .cast(),
    )
}

/// `verbs_get_ctx_op(ctx, query_port)`: the extended context when it is large enough to hold
/// `query_port` (it grows downwards: older providers allocate less of it) and sets it.
///
/// # Safety
/// `ctx` is a live device context.
unsafe fn query_port_op(
    ctx: *mut ibv_context,
) -> Option<unsafe extern "C" fn(*mut ibv_context, u8, *mut ibv_port_attr, usize) -> c_int> {
    // SAFETY: the caller passes a live context.
    let vctx = unsafe { verbs_get_ctx(ctx) }?;
    let needed = size_of::<verbs_context>() - offset_of!(verbs_context, query_port);
    // SAFETY: an extended context is embedded in a verbs_context whose `sz` (just before
    // `context`) says how much of it the provider allocated; `query_port` is read only when
    // that covers it, as the header does.
    unsafe {
        if (*vctx).sz < needed {
            return None;
        }
        (*vctx).query_port
    }
}

/// `ibv_query_port` (a macro over `___ibv_query_port`): the provider's extended `query_port`
/// with the size of our `ibv_port_attr`, or, for a context without one, the zeroed struct
/// filled by the exported compat symbol.
///
/// # Safety
/// See the [module](self).
pub unsafe fn ibv_query_port(
    context: *mut ibv_context,
    port_num: u8,
    port_attr: *mut ibv_port_attr,
) -> c_int {
    // SAFETY: the caller passes a live context and a writable port_attr.
    unsafe {
        match query_port_op(context) {
            Some(op) => op(context, port_num, port_attr, size_of::<ibv_port_attr>()),
            None => {
                port_attr.write_bytes(0, 1);
                bindings::ibv_query_port(
                    context,
                    port_num,
                    port_attr.cast::<_compat_ibv_port_attr>(),
                )
            }
        }
    }
}

/// `ibv_reg_mr` (a macro over `__ibv_reg_mr`): the exported `ibv_reg_mr` unless `access` has
/// a flag of the optional range, which only `ibv_reg_mr_iova2` (with `iova` = `addr`)
/// accepts. That is the header's choice for the usual compile-time-constant `access`.
///
/// # Safety
/// See the [module](self); `addr..addr + length` stays allocated while registered.
pub unsafe fn ibv_reg_mr(
    pd: *mut ibv_pd,
    addr: *mut c_void,
    length: usize,
    access: c_int,
) -> *mut ibv_mr {
    let optional = ib_uverbs_access_flags::IB_UVERBS_ACCESS_OPTIONAL_RANGE;
    // SAFETY: the caller's arguments, forwarded.
    unsafe {
        if access as u32 & optional == 0 {
            bindings::ibv_reg_mr(pd, addr, length, access)
        } else {
            ibv_reg_mr_iova2(pd, addr, length, addr as u64, access as u32)
        }
    }
}

/// `ibv_query_gid_table`: `_ibv_query_gid_table` with the size of our `ibv_gid_entry`.
///
/// # Safety
/// See the [module](self); `entries` has room for `max_entries`.
pub unsafe fn ibv_query_gid_table(
    context: *mut ibv_context,
    entries: *mut ibv_gid_entry,
    max_entries: usize,
    flags: u32,
) -> isize {
    // SAFETY: the caller's arguments, forwarded.
    unsafe {
        _ibv_query_gid_table(
            context,
            entries,
            max_entries,
            flags,
            size_of::<ibv_gid_entry>(),
        )
    }
}

/// `rdma_get_local_addr`: `&id->route.addr.src_addr`.
///
/// # Safety
/// `id` is a live rdma_cm id.
pub unsafe fn rdma_get_local_addr(id: *mut rdma_cm_id) -> *mut sockaddr {
    // SAFETY: a place inside the live id; no reference is made.
    unsafe { addr_of_mut!((*id).route.addr.__bindgen_anon_1.src_addr) }
}

/// `rdma_get_peer_addr`: `&id->route.addr.dst_addr`.
///
/// # Safety
/// `id` is a live rdma_cm id.
pub unsafe fn rdma_get_peer_addr(id: *mut rdma_cm_id) -> *mut sockaddr {
    // SAFETY: as in rdma_get_local_addr.
    unsafe { addr_of_mut!((*id).route.addr.__bindgen_anon_2.dst_addr) }
}

#[cfg(test)]
mod tests {
    //! The dispatch, over hand-made contexts whose ops are test functions: no rdma-core
    //! needed. The VM's RDMA tests run them against a real provider.

    use super::*;
    use std::cell::Cell;
    use std::mem::MaybeUninit;
    use std::ptr::null_mut;

    thread_local! {
        static CALLED: Cell<&'static str> = const { Cell::new("") };
    }

    unsafe extern "C" fn post_send(
        _: *mut ibv_qp,
        _: *mut ibv_send_wr,
        _: *mut *mut ibv_send_wr,
    ) -> c_int {
        CALLED.set("post_send");
        7
    }
    unsafe extern "C" fn post_recv(
        _: *mut ibv_qp,
        _: *mut ibv_recv_wr,
        _: *mut *mut ibv_recv_wr,
    ) -> c_int {
        CALLED.set("post_recv");
        8
    }
    unsafe extern "C" fn poll_cq(_: *mut ibv_cq, n: c_int, _: *mut ibv_wc) -> c_int {
        CALLED.set("poll_cq");
        n - 1
    }
    unsafe extern "C" fn req_notify_cq(_: *mut ibv_cq, solicited: c_int) -> c_int {
        CALLED.set("req_notify_cq");
        solicited + 40
    }
    unsafe extern "C" fn query_port(
        _: *mut ibv_context,
        port: u8,
        attr: *mut ibv_port_attr,
        len: usize,
    ) -> c_int {
        CALLED.set("query_port");
        // SAFETY: the test passes a live attr.
        unsafe { (*attr).lid = u16::from(port) };
        i32::try_from(len).unwrap()
    }

    /// An all-zero verbs_context (every op NULL, every pointer null) on the heap.
    fn zeroed_vctx() -> Box<verbs_context> {
        // SAFETY: verbs_context is plain C data (pointers, integers, optional fn pointers,
        // pthread types) for which all-zero is a valid value.
        Box::new(unsafe { MaybeUninit::<verbs_context>::zeroed().assume_init() })
    }

    #[test]
    fn data_path_calls_go_through_the_context_ops() {
        let mut vctx = zeroed_vctx();
        vctx.context.ops.post_send = Some(post_send);
        vctx.context.ops.post_recv = Some(post_recv);
        vctx.context.ops.poll_cq = Some(poll_cq);
        vctx.context.ops.req_notify_cq = Some(req_notify_cq);
        let ctx: *mut ibv_context = &mut vctx.context;
        // SAFETY: all-zero QP/CQ with their context pointing at ours.
        let mut qp: ibv_qp = unsafe { MaybeUninit::zeroed().assume_init() };
        qp.context = ctx;
        // SAFETY: as above.
        let mut cq: ibv_cq = unsafe { MaybeUninit::zeroed().assume_init() };
        cq.context = ctx;
        // SAFETY: the ops above ignore the request pointers.
        unsafe {
            assert_eq!(ibv_post_send(&mut qp, null_mut(), null_mut()), 7);
            assert_eq!(CALLED.get(), "post_send");
            assert_eq!(ibv_post_recv(&mut qp, null_mut(), null_mut()), 8);
            assert_eq!(CALLED.get(), "post_recv");
            assert_eq!(ibv_poll_cq(&mut cq, 16, null_mut()), 15);
            assert_eq!(CALLED.get(), "poll_cq");
            assert_eq!(ibv_req_notify_cq(&mut cq, 1), 41);
            assert_eq!(CALLED.get(), "req_notify_cq");
        }
        // A provider without the op: an error, not a call through NULL.
        vctx.context.ops.post_send = None;
        vctx.context.ops.poll_cq = None;
        // SAFETY: as above.
        unsafe {
            assert_eq!(ibv_post_send(&mut qp, null_mut(), null_mut()), libc::ENOSYS);
            assert_eq!(ibv_poll_cq(&mut cq, 16, null_mut()), -libc::ENOSYS);
        }
    }

    #[test]
    fn query_port_takes_the_extended_op_only_when_the_header_would() {
        let mut vctx = zeroed_vctx();
        vctx.query_port = Some(query_port);
        vctx.sz = size_of::<verbs_context>();
        vctx.context.abi_compat = VERBS_ABI_IS_EXTENDED;
        let ctx: *mut ibv_context = &mut vctx.context;
        let mut attr = ibv_port_attr::default();
        // SAFETY: ctx is inside a complete verbs_context.
        unsafe {
            assert!(query_port_op(ctx).is_some());
            let len = ibv_query_port(ctx, 3, &mut attr);
            assert_eq!(CALLED.get(), "query_port");
            assert_eq!(len as usize, size_of::<ibv_port_attr>());
            assert_eq!(attr.lid, 3);
        }
        // An older provider allocated less of the extended context than reaches query_port.
        vctx.sz = size_of::<verbs_context>() - offset_of!(verbs_context, query_port) - 8;
        // SAFETY: as above.
        assert!(unsafe { query_port_op(ctx) }.is_none());
        // A context that is not extended: the compat path.
        vctx.sz = size_of::<verbs_context>();
        vctx.context.abi_compat = null_mut();
        // SAFETY: as above.
        assert!(unsafe { query_port_op(ctx) }.is_none());
        // Extended, but the provider left the op NULL.
        vctx.context.abi_compat = VERBS_ABI_IS_EXTENDED;
        vctx.query_port = None;
        // SAFETY: as above.
        assert!(unsafe { query_port_op(ctx) }.is_none());
    }

    #[test]
    fn cm_addresses_point_into_the_route() {
        // SAFETY: an all-zero rdma_cm_id is valid plain data.
        let mut id: rdma_cm_id = unsafe { MaybeUninit::zeroed().assume_init() };
        let base = &mut id as *mut rdma_cm_id as usize;
        // SAFETY: id is live.
        let (src, dst) = unsafe { (rdma_get_local_addr(&mut id), rdma_get_peer_addr(&mut id)) };
        let route = offset_of!(rdma_cm_id, route);
        assert_eq!(src as usize - base, route);
        // dst_addr follows the source union (a sockaddr_storage).
        assert_eq!(
            dst as usize - base,
            route + size_of::<libc::sockaddr_storage>()
        );
    }
}
