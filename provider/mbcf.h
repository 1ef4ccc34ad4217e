/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * mbcf rdma-core provider: objects and the entry points of each file.
 *
 * mbcf.c   device match, context open/close, the ops table
 * verbs.c  thin control-path verbs: query, PD, MR, MW, AH (ibv_cmd_* and
 *          return)
 * cq.c     completion queues: create/destroy, and poll_cq / the extended
 *          polling API (ibv_start_poll ...) on the mmapped CQ ring without
 *          a system call
 * qp.c     queue pairs (RC, UC, UD): create (also ibv_create_qp_ex), modify, query,
 *          destroy; maps the SQ/RQ rings (no RQ ring with an SRQ)
 * srq.c    shared receive queues: create (ibv_create_srq_ex for basic SRQs
 *          comes here through libibverbs), modify, query, destroy; maps
 *          the SRQ's receive ring
 * wr.c     work requests into the rings: post_send / post_recv and the
 *          extended work-request API (ibv_wr_start ... ibv_wr_complete),
 *          post_srq_recv,
 *          with one set of checks; a system call only to ring the doorbell
 *          when the kernel has gone idle
 *
 * compat.h the differences between rdma-core's private provider ABIs
 *
 * The rings themselves (layout, indices, barriers, doorbell protocol) are
 * include/mbcf/ring.h, compiled unchanged by the kernel module.
 */
#ifndef MBCF_PROVIDER_H
#define MBCF_PROVIDER_H

#include <assert.h>
#include <pthread.h>
#include <stddef.h>

#include <infiniband/driver.h>
#include <rdma/ib_user_ioctl_verbs.h>

#include "compat.h"

#include <rdma/mbcf-abi.h>
#include <mbcf/ring.h>

struct mbcf_device {
	struct verbs_device vdev;
};

struct mbcf_context {
	struct verbs_context vctx;
	uint32_t kernel_abi;	/* mbcf_alloc_ucontext_resp.abi_version */
	uint32_t max_inline;	/* mbcf_alloc_ucontext_resp.max_inline */
	/* MBCF_QP_RATE_LIMIT (kbit/s): every RC/UC QP of the context is
	 * paced at this rate from RTS, unless it sets its own (0: none) */
	uint32_t default_rate;
};

/* A completion queue: the kernel produces ib_uverbs_wc entries, we consume. */
struct mbcf_cq {
	struct verbs_cq vcq;		/* ibv_cq, or ibv_cq_ex when extended */
	pthread_spinlock_t lock;	/* serialises pollers */
	struct mbcf_ring_end ring;	/* consumer end */
	void *map;
	size_t map_len;
	struct ib_uverbs_wc cur;	/* ibv_start_poll: the entry being read */
};

/* One work queue of a QP (send or receive): we produce, the kernel consumes. */
struct mbcf_wq {
	pthread_spinlock_t lock;	/* serialises posters */
	struct mbcf_ring_end ring;	/* producer end */
	void *map;			/* NULL: a queue of 0 entries */
	size_t map_len;
	uint32_t max_sge;		/* the QP's cap, checked per WR */
};

/*
 * vqp, not a bare ibv_qp: ibv_qp_ex lives in it.  Its comp_mask is never
 * written through the struct: its offset differs between the private
 * headers (56.1: ibv_qp_ex grew) and Debian 12's libibverbs 44.0, so
 * qp.c marks a QP extended at the offset the running libibverbs reads.
 */
struct mbcf_qp {
	struct verbs_qp vqp;
	struct mbcf_wq sq;
	struct mbcf_wq rq;
	uint32_t max_inline;		/* bytes of IBV_SEND_INLINE data per WR */
	/* ibv_wr_start .. ibv_wr_complete (wr.c), under sq.lock */
	struct mbcf_send_wqe *wr_cur;	/* the entry being built, at sq idx */
	uint32_t wr_first;		/* sq idx at ibv_wr_start */
	int wr_err;			/* first error of the batch */
};

/*
 * A shared receive queue: one receive ring like a QP's, which the kernel
 * reads for whichever attached QP receives a message.
 */
struct mbcf_srq {
	struct verbs_srq vsrq;
	struct mbcf_wq rq;
};

/* An address handle: the kernel's number for it goes in UD send entries. */
struct mbcf_ah {
	struct ibv_ah ibv_ah;
	uint32_t num;
};

/* EX_QUERY_DEVICE response: the core response, then the packet pacing caps. */
struct mbcf_query_device_resp_full {
	struct ib_uverbs_ex_query_device_resp ibv_resp;
	struct mbcf_query_device_resp drv;
};
static_assert(offsetof(struct mbcf_query_device_resp_full, drv) ==
	      sizeof(struct ib_uverbs_ex_query_device_resp),
	      "driver data must follow the core response");

/* CREATE_AH response: the core response, then struct mbcf_create_ah_resp. */
struct mbcf_create_ah_resp_full {
	struct ib_uverbs_create_ah_resp ibv_resp;
	struct mbcf_create_ah_resp drv;
};
static_assert(offsetof(struct mbcf_create_ah_resp_full, drv) ==
	      sizeof(struct ib_uverbs_create_ah_resp),
	      "driver data must follow the core response");

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

/* CREATE_CQ response: the core response, then struct mbcf_create_cq_resp. */
struct mbcf_create_cq_resp_full {
	struct ib_uverbs_create_cq_resp ibv_resp;
	struct mbcf_create_cq_resp drv;
};
static_assert(offsetof(struct mbcf_create_cq_resp_full, drv) ==
	      sizeof(struct ib_uverbs_create_cq_resp),
	      "driver data must follow the core response");

/* EX_CREATE_CQ response: the same driver data behind the extended one. */
struct mbcf_create_cq_ex_resp_full {
	struct ib_uverbs_ex_create_cq_resp ibv_resp;
	struct mbcf_create_cq_resp drv;
};
static_assert(offsetof(struct mbcf_create_cq_ex_resp_full, drv) ==
	      sizeof(struct ib_uverbs_ex_create_cq_resp),
	      "driver data must follow the core response");

/* RESIZE_CQ response: the core response, then struct mbcf_resize_cq_resp. */
struct mbcf_resize_cq_resp_full {
	struct ib_uverbs_resize_cq_resp ibv_resp;
	struct mbcf_resize_cq_resp drv;
};
static_assert(offsetof(struct mbcf_resize_cq_resp_full, drv) ==
	      sizeof(struct ib_uverbs_resize_cq_resp),
	      "driver data must follow the core response");

/*
 * CREATE_QP response: the core response, then struct mbcf_create_qp_resp.
 * Only drv is meaningful after ibv_cmd_create_qp(): on the ioctl path the
 * core fields are not filled (the true caps come back in attr->cap).
 */
struct mbcf_create_qp_resp_full {
	struct ib_uverbs_create_qp_resp ibv_resp;
	struct mbcf_create_qp_resp drv;
};
static_assert(offsetof(struct mbcf_create_qp_resp_full, drv) ==
	      sizeof(struct ib_uverbs_create_qp_resp),
	      "driver data must follow the core response");

/* CREATE_SRQ response: the core response, then struct mbcf_create_srq_resp. */
struct mbcf_create_srq_resp_full {
	struct ib_uverbs_create_srq_resp ibv_resp;
	struct mbcf_create_srq_resp drv;
};
static_assert(offsetof(struct mbcf_create_srq_resp_full, drv) ==
	      sizeof(struct ib_uverbs_create_srq_resp),
	      "driver data must follow the core response");

/* Ring entries: the layout the kernel checks (kmod/wr.c) too. */
static_assert(sizeof(struct mbcf_send_wqe) == 56 &&
	      offsetof(struct mbcf_send_wqe, sge) == 56 &&
	      sizeof(struct mbcf_recv_wqe) == 16 &&
	      offsetof(struct mbcf_recv_wqe, sge) == 16, "ring entry layout");

/* A CQ entry is the kernel's struct ib_uverbs_wc, byte for byte. */
static_assert(sizeof(struct ib_uverbs_wc) == MBCF_CQE_SIZE,
	      "MBCF_CQE_SIZE is sizeof(struct ib_uverbs_wc)");

static inline struct mbcf_context *to_mctx(struct ibv_context *ibctx)
{
	return container_of(ibctx, struct mbcf_context, vctx.context);
}

static inline struct mbcf_cq *to_mcq(struct ibv_cq *ibcq)
{
	return container_of(ibcq, struct mbcf_cq, vcq.cq);
}

static inline struct mbcf_qp *to_mqp(struct ibv_qp *ibqp)
{
	return container_of(ibqp, struct mbcf_qp, vqp.qp);
}

static inline struct mbcf_srq *to_msrq(struct ibv_srq *ibsrq)
{
	return container_of(ibsrq, struct mbcf_srq, vsrq.srq);
}

static inline struct mbcf_ah *to_mah(struct ibv_ah *ibah)
{
	return container_of(ibah, struct mbcf_ah, ibv_ah);
}

/*
 * cq.c / qp.c: check a kernel-supplied ring description (power-of-two
 * entries, stride at least min_stride, the mapping large enough for every
 * entry) and map it on the context fd; returns 0 or an errno.
 */
int mbcf_ring_map(struct ibv_context *ibctx, const struct mbcf_ring_info *info,
		  uint32_t min_stride, void **map);

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
struct ibv_mw *mbcf_verbs_alloc_mw(struct ibv_pd *pd, enum ibv_mw_type type);
int mbcf_verbs_dealloc_mw(struct ibv_mw *mw);
int mbcf_verbs_bind_mw(struct ibv_qp *qp, struct ibv_mw *mw,
		       struct ibv_mw_bind *mw_bind);
struct ibv_ah *mbcf_verbs_create_ah(struct ibv_pd *pd, struct ibv_ah_attr *attr);
int mbcf_verbs_destroy_ah(struct ibv_ah *ah);

/* cq.c */
struct ibv_cq *mbcf_cq_create(struct ibv_context *ibctx, int cqe,
			      struct ibv_comp_channel *channel,
			      int comp_vector);
struct ibv_cq_ex *mbcf_cq_create_ex(struct ibv_context *ibctx,
				    struct ibv_cq_init_attr_ex *attr);
void mbcf_cq_set_ex_ops(struct ibv_cq_ex *cqx);
int mbcf_cq_destroy(struct ibv_cq *cq);
int mbcf_cq_resize(struct ibv_cq *cq, int cqe);
int mbcf_cq_poll(struct ibv_cq *cq, int num_entries, struct ibv_wc *wc);
int mbcf_cq_req_notify(struct ibv_cq *cq, int solicited_only);

/* qp.c */
struct ibv_qp *mbcf_qp_create(struct ibv_pd *pd, struct ibv_qp_init_attr *attr);
struct ibv_qp *mbcf_qp_create_ex(struct ibv_context *ibctx,
				 struct ibv_qp_init_attr_ex *attr);
int mbcf_qp_modify(struct ibv_qp *qp, struct ibv_qp_attr *attr, int attr_mask);
int mbcf_qp_modify_rate_limit(struct ibv_qp *qp,
			      struct ibv_qp_rate_limit_attr *attr);
int mbcf_qp_query(struct ibv_qp *qp, struct ibv_qp_attr *attr, int attr_mask,
		  struct ibv_qp_init_attr *init_attr);
int mbcf_qp_destroy(struct ibv_qp *qp);
int mbcf_qp_enable_ex(struct mbcf_qp *qp);

/* qp.c, srq.c: map / unmap one work queue's ring (0 entries: no ring) */
int mbcf_wq_map(struct ibv_context *ibctx, struct mbcf_wq *wq,
		const struct mbcf_ring_info *info, uint32_t hdr,
		uint32_t max_sge, uint32_t max_inline);
void mbcf_wq_unmap(struct mbcf_wq *wq);

/* srq.c */
struct ibv_srq *mbcf_srq_create(struct ibv_pd *pd,
				struct ibv_srq_init_attr *attr);
int mbcf_srq_modify(struct ibv_srq *srq, struct ibv_srq_attr *attr,
		    int attr_mask);
int mbcf_srq_query(struct ibv_srq *srq, struct ibv_srq_attr *attr);
int mbcf_srq_destroy(struct ibv_srq *srq);

/* wr.c */
/* The ibv_wr_* operations mbcf offers (IBV_QP_EX_WITH_*), per QP type (as
 * rxe: an unreliable QP has no reads, atomics or local invalidate). */
#define MBCF_UC_SEND_OPS_FLAGS (IBV_QP_EX_WITH_RDMA_WRITE |			\
				IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM |		\
				IBV_QP_EX_WITH_SEND |				\
				IBV_QP_EX_WITH_SEND_WITH_IMM |			\
				IBV_QP_EX_WITH_BIND_MW |			\
				IBV_QP_EX_WITH_SEND_WITH_INV)
#define MBCF_RC_SEND_OPS_FLAGS (MBCF_UC_SEND_OPS_FLAGS |			\
				IBV_QP_EX_WITH_RDMA_READ |			\
				IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP |		\
				IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD |		\
				IBV_QP_EX_WITH_LOCAL_INV)
#define MBCF_UD_SEND_OPS_FLAGS (IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM)
int mbcf_qp_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr,
		      struct ibv_send_wr **bad_wr);
int mbcf_qp_post_recv(struct ibv_qp *qp, struct ibv_recv_wr *wr,
		      struct ibv_recv_wr **bad_wr);
int mbcf_srq_post_recv(struct ibv_srq *srq, struct ibv_recv_wr *wr,
		       struct ibv_recv_wr **bad_wr);
void mbcf_wr_set_ops(struct mbcf_qp *qp);

#endif /* MBCF_PROVIDER_H */
