/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * mbcf rdma-core provider: objects and the entry points of each file.
 *
 * mbcf.c   device match, context open/close, the ops table
 * verbs.c  thin control-path verbs: query, PD, MR (ibv_cmd_* and return)
 * cq.c     completion queues (stubs until the mmapped rings of issue 4)
 * qp.c     queue pairs and posting (stubs until issue 4)
 */
#ifndef MBCF_PROVIDER_H
#define MBCF_PROVIDER_H

#include <assert.h>
#include <stddef.h>

#include <infiniband/driver.h>
#include <rdma/ib_user_ioctl_verbs.h>

#include <rdma/mbcf-abi.h>

struct mbcf_device {
	struct verbs_device vdev;
};

struct mbcf_context {
	struct verbs_context vctx;
	uint32_t kernel_abi;	/* mbcf_alloc_ucontext_resp.abi_version */
};

/*
 * GET_CONTEXT response as libibverbs sees it: the core response, then our
 * driver data (the kernel writes struct mbcf_alloc_ucontext_resp as udata).
 */
struct mbcf_get_context_resp {
	struct ib_uverbs_get_context_resp ibv_resp;
	struct mbcf_alloc_ucontext_resp drv;
};
static_assert(offsetof(struct mbcf_get_context_resp, drv) ==
	      sizeof(struct ib_uverbs_get_context_resp),
	      "driver data must follow the core response");

static inline struct mbcf_context *to_mctx(struct ibv_context *ibctx)
{
	return container_of(ibctx, struct mbcf_context, vctx.context);
}

/* verbs.c */
int mbcf_verbs_query_device_ex(struct ibv_context *ibctx,
			       const struct ibv_query_device_ex_input *input,
			       struct ibv_device_attr_ex *attr, size_t attr_size);
int mbcf_verbs_query_port(struct ibv_context *ibctx, uint8_t port,
			  struct ibv_port_attr *attr);
struct ibv_pd *mbcf_verbs_alloc_pd(struct ibv_context *ibctx);
int mbcf_verbs_dealloc_pd(struct ibv_pd *pd);
struct ibv_mr *mbcf_verbs_reg_mr(struct ibv_pd *pd, void *addr, size_t len,
				 uint64_t hca_va, int access);
int mbcf_verbs_dereg_mr(struct verbs_mr *vmr);

/* cq.c */
struct ibv_cq *mbcf_cq_create(struct ibv_context *ibctx, int cqe,
			      struct ibv_comp_channel *channel,
			      int comp_vector);
int mbcf_cq_destroy(struct ibv_cq *cq);
int mbcf_cq_poll(struct ibv_cq *cq, int num_entries, struct ibv_wc *wc);
int mbcf_cq_req_notify(struct ibv_cq *cq, int solicited_only);

/* qp.c */
struct ibv_qp *mbcf_qp_create(struct ibv_pd *pd, struct ibv_qp_init_attr *attr);
int mbcf_qp_modify(struct ibv_qp *qp, struct ibv_qp_attr *attr, int attr_mask);
int mbcf_qp_query(struct ibv_qp *qp, struct ibv_qp_attr *attr, int attr_mask,
		  struct ibv_qp_init_attr *init_attr);
int mbcf_qp_destroy(struct ibv_qp *qp);
int mbcf_qp_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr,
		      struct ibv_send_wr **bad_wr);
int mbcf_qp_post_recv(struct ibv_qp *qp, struct ibv_recv_wr *wr,
		      struct ibv_recv_wr **bad_wr);

#endif /* MBCF_PROVIDER_H */
