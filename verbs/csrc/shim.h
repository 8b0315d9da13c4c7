/*
 * Out-of-line wrappers for rdma-core calls that are `static inline` (or macros) in the
 * headers, so they have no symbol bindgen could link against. Each one forwards to the
 * header's own definition, so it always matches the installed rdma-core.
 */
#ifndef COREWIRE_VERBS_SHIM_H
#define COREWIRE_VERBS_SHIM_H
#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

int corewire_ibv_poll_cq(struct ibv_cq *cq, int num_entries, struct ibv_wc *wc);
int corewire_ibv_req_notify_cq(struct ibv_cq *cq, int solicited_only);
int corewire_ibv_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad_wr);
int corewire_ibv_post_recv(struct ibv_qp *qp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad_wr);
int corewire_ibv_post_srq_recv(struct ibv_srq *srq, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad_wr);
/* ibv_query_port is a macro over ___ibv_query_port; the exported symbol is a compat ABI. */
int corewire_ibv_query_port(struct ibv_context *context, uint8_t port_num, struct ibv_port_attr *port_attr);
/* ibv_reg_mr is a macro choosing between ibv_reg_mr and ibv_reg_mr_iova2. */
struct ibv_mr *corewire_ibv_reg_mr(struct ibv_pd *pd, void *addr, size_t length, int access);
/* ibv_query_gid_table is inline over _ibv_query_gid_table (with the entry size). */
ssize_t corewire_ibv_query_gid_table(struct ibv_context *context, struct ibv_gid_entry *entries, size_t max_entries);
struct sockaddr *corewire_rdma_get_local_addr(struct rdma_cm_id *id);
struct sockaddr *corewire_rdma_get_peer_addr(struct rdma_cm_id *id);
#endif
