// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Queue pairs (RC, UC, UD): create (also ibv_create_qp_ex with the
 * work-request API), modify, query, destroy.  CREATE_QP returns two rings,
 * the send and the receive queue, that we mmap() on the context fd; wr.c
 * produces work requests into them.  A QP on a shared receive queue has no
 * receive ring (0 entries): its receives come from the SRQ (srq.c).
 * Everything here is one uverbs command.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "mbcf.h"

/* Map one work queue's ring; a ring of 0 entries is "no queue". */
int mbcf_wq_map(struct ibv_context *ibctx, struct mbcf_wq *wq,
		       const struct mbcf_ring_info *info, uint32_t hdr,
		       uint32_t max_sge, uint32_t max_inline)
{
	uint64_t body = (uint64_t)max_sge * sizeof(struct mbcf_sge);
	uint64_t min_stride;
	void *map;
	int ret;

	wq->max_sge = max_sge;
	if (!info->num_entries)
		return 0;	/* posting fails with ENOMEM: no room, ever */

	/* An entry must hold the header and the largest body allowed. */
	if (body < max_inline)
		body = max_inline;
	min_stride = hdr + body;
	if (min_stride > UINT32_MAX)
		return EPROTO;

	ret = mbcf_ring_map(ibctx, info, (uint32_t)min_stride, &map);
	if (ret)
		return ret;
	mbcf_ring_init(&wq->ring, map, info->num_entries, info->stride, 0);
	/* We produce: continue from the index the kernel published. */
	wq->ring.idx = mbcf_ring_load(mbcf_ring_prod(&wq->ring));
	wq->map = map;
	wq->map_len = info->mmap_len;
	return 0;
}

void mbcf_wq_unmap(struct mbcf_wq *wq)
{
	if (wq->map)
		munmap(wq->map, wq->map_len);
	wq->map = NULL;
}

/*
 * Where the libibverbs we run under looks for VERBS_QP_EX.  Its
 * ibv_qp_to_qp_ex() reads verbs_qp.comp_mask, right after struct
 * ibv_qp_ex, a struct that grew by one function pointer (rdma-core 45:
 * wr_flush) while the private ABI stayed 34: we may be built with 56.1's
 * headers and run under Debian 12's 44.0, or the other way round.  So ask
 * the library, once, with a probe object: the offset it reads, or 0 if
 * neither candidate works (then the extended QP API is not offered).
 */
static size_t mbcf_qp_ex_mask_offset(void)
{
	static size_t off = SIZE_MAX;
	size_t cand[] = { offsetof(struct verbs_qp, comp_mask) - sizeof(void *),
			  offsetof(struct verbs_qp, comp_mask) };
	struct verbs_qp probe;
	size_t i;

	if (off != SIZE_MAX)
		return off;
	off = 0;
	for (i = 0; i < sizeof(cand) / sizeof(cand[0]); i++) {
		memset(&probe, 0, sizeof(probe));
		*(uint32_t *)((uint8_t *)&probe + cand[i]) = VERBS_QP_EX;
		if (ibv_qp_to_qp_ex(&probe.qp) == &probe.qp_ex) {
			off = cand[i];
			break;
		}
	}
	return off;
}

/* Offer ibv_qp_ex on @qp: the ibv_wr_* entry points, and VERBS_QP_EX where
 * libibverbs looks for it.  EOPNOTSUPP if the probe found no such place. */
int mbcf_qp_enable_ex(struct mbcf_qp *qp)
{
	size_t off = mbcf_qp_ex_mask_offset();

	if (!off)
		return EOPNOTSUPP;
	mbcf_wr_set_ops(qp);
	*(uint32_t *)((uint8_t *)&qp->vqp + off) |= VERBS_QP_EX;
	return 0;
}

/*
 * What create_qp_ex understands; anything else is EOPNOTSUPP (as rxe).
 * Create flags: none is supported, but programs pass the mask with 0.
 */
#define MBCF_QP_INIT_ATTR_MASK	(IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_CREATE_FLAGS | \
				 IBV_QP_INIT_ATTR_SEND_OPS_FLAGS)

static int mbcf_qp_check_ex(const struct ibv_qp_init_attr_ex *attr)
{
	if (attr->comp_mask & ~MBCF_QP_INIT_ATTR_MASK)
		return EOPNOTSUPP;
	if ((attr->comp_mask & IBV_QP_INIT_ATTR_CREATE_FLAGS) && attr->create_flags)
		return EOPNOTSUPP;
	if (!(attr->comp_mask & IBV_QP_INIT_ATTR_PD) || !attr->pd)
		return EINVAL;
	if (attr->qp_type != IBV_QPT_RC && attr->qp_type != IBV_QPT_UC &&
	    attr->qp_type != IBV_QPT_UD)
		return EOPNOTSUPP;
	/* a basic SRQ of ours (an XRC SRQ cannot be made here) */
	if (attr->srq && attr->srq->context != attr->pd->context)
		return EINVAL;
	if (attr->comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS) {
		uint64_t ok = attr->qp_type == IBV_QPT_RC ? MBCF_RC_SEND_OPS_FLAGS :
			      attr->qp_type == IBV_QPT_UC ? MBCF_UC_SEND_OPS_FLAGS :
							    MBCF_UD_SEND_OPS_FLAGS;

		if (attr->send_ops_flags & ~ok)
			return EOPNOTSUPP;
		if (!mbcf_qp_ex_mask_offset())
			return EOPNOTSUPP;
	}
	return 0;
}

/* Map the two rings the kernel described and set up the queues. */
static int mbcf_qp_map(struct mbcf_qp *qp, struct ibv_context *ibctx,
		       const struct mbcf_create_qp_resp *drv,
		       const struct ibv_qp_cap *cap)
{
	int ret;

	qp->max_inline = cap->max_inline_data;
	ret = mbcf_wq_map(ibctx, &qp->sq, &drv->sq, sizeof(struct mbcf_send_wqe),
			  cap->max_send_sge, qp->max_inline);
	if (ret)
		return ret;
	ret = mbcf_wq_map(ibctx, &qp->rq, &drv->rq, sizeof(struct mbcf_recv_wqe),
			  cap->max_recv_sge, 0);
	if (ret) {
		mbcf_wq_unmap(&qp->sq);
		return ret;
	}
	pthread_spin_init(&qp->sq.lock, PTHREAD_PROCESS_PRIVATE);
	pthread_spin_init(&qp->rq.lock, PTHREAD_PROCESS_PRIVATE);
	return 0;
}

/*
 * ibv_create_qp_ex(); ibv_create_qp() comes here too.  The kernel sizes
 * everything; attr->cap comes back with the truth.
 */
struct ibv_qp *mbcf_qp_create_ex(struct ibv_context *ibctx,
				 struct ibv_qp_init_attr_ex *attr)
{
	struct mbcf_create_qp_resp_full resp = {};
	struct ibv_create_qp cmd = {};
	struct mbcf_qp *qp;
	uint32_t mask;
	int ret;

	ret = mbcf_qp_check_ex(attr);
	if (ret) {
		errno = ret;
		return NULL;
	}
	qp = calloc(1, sizeof(*qp));
	if (!qp)
		return NULL;
	/* no create flags (checked): the command would refuse the mask bit */
	mask = attr->comp_mask;
	attr->comp_mask &= ~IBV_QP_INIT_ATTR_CREATE_FLAGS;
	ret = ibv_cmd_create_qp_ex(ibctx, &qp->vqp, attr, &cmd, sizeof(cmd),
				   &resp.ibv_resp, sizeof(resp));
	attr->comp_mask = mask;
	if (ret)
		goto err_free;
	ret = mbcf_qp_map(qp, ibctx, &resp.drv, &attr->cap);
	if (ret)
		goto err_destroy;
	if (attr->comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS)
		mbcf_qp_enable_ex(qp);
	return &qp->vqp.qp;

err_destroy:
	ibv_cmd_destroy_qp(&qp->vqp.qp);
err_free:
	free(qp);
	errno = ret;
	return NULL;
}

struct ibv_qp *mbcf_qp_create(struct ibv_pd *pd, struct ibv_qp_init_attr *attr)
{
	struct ibv_qp_init_attr_ex ex = {
		.qp_context = attr->qp_context,
		.send_cq = attr->send_cq,
		.recv_cq = attr->recv_cq,
		.srq = attr->srq,
		.cap = attr->cap,
		.qp_type = attr->qp_type,
		.sq_sig_all = attr->sq_sig_all,
		.comp_mask = IBV_QP_INIT_ATTR_PD,
		.pd = pd,
	};
	struct ibv_qp *qp = mbcf_qp_create_ex(pd->context, &ex);

	if (qp)
		attr->cap = ex.cap;
	return qp;
}

int mbcf_qp_modify(struct ibv_qp *ibqp, struct ibv_qp_attr *attr, int attr_mask)
{
	struct ib_uverbs_ex_modify_qp_resp resp = {};
	struct ibv_modify_qp_ex cmd_ex = {};
	struct ibv_modify_qp cmd = {};

	struct mbcf_context *ctx = to_mctx(ibqp->context);
	struct ibv_qp_attr with_rate;

	/*
	 * MBCF_QP_RATE_LIMIT: pace an application that knows nothing of
	 * ibv_modify_qp_rate_limit() (perftest's HW rate limit is the IB
	 * static rate, for InfiniBand links only): the rate goes in with the
	 * transition to RTS.
	 */
	if (ctx->default_rate && (attr_mask & IBV_QP_STATE) &&
	    attr->qp_state == IBV_QPS_RTS && ibqp->state != IBV_QPS_RTS &&
	    !(attr_mask & IBV_QP_RATE_LIMIT) &&
	    (ibqp->qp_type == IBV_QPT_RC || ibqp->qp_type == IBV_QPT_UC)) {
		with_rate = *attr;
		with_rate.rate_limit = ctx->default_rate;
		attr = &with_rate;
		attr_mask |= IBV_QP_RATE_LIMIT;
	}
	/* IBV_QP_RATE_LIMIT travels in the extended command only */
	if (attr_mask & IBV_QP_RATE_LIMIT)
		return ibv_cmd_modify_qp_ex(ibqp, attr, attr_mask, &cmd_ex,
					    sizeof(cmd_ex), &resp, sizeof(resp));
	return ibv_cmd_modify_qp(ibqp, attr, attr_mask, &cmd, sizeof(cmd));
}

/*
 * ibv_modify_qp_rate_limit(): the QP's pacing rate in kbit/s (0 = unpaced),
 * checked by the kernel against packet_pacing_caps.  The burst is the
 * pacer's own (at most two frames back to back): a burst size or typical
 * packet size to configure is not supported.
 */
int mbcf_qp_modify_rate_limit(struct ibv_qp *ibqp,
			      struct ibv_qp_rate_limit_attr *attr)
{
	struct ibv_qp_attr qp_attr = {};

	if (attr->comp_mask || attr->max_burst_sz || attr->typical_pkt_sz)
		return EINVAL;
	qp_attr.rate_limit = attr->rate_limit;
	return mbcf_qp_modify(ibqp, &qp_attr, IBV_QP_RATE_LIMIT);
}

int mbcf_qp_query(struct ibv_qp *ibqp, struct ibv_qp_attr *attr, int attr_mask,
		  struct ibv_qp_init_attr *init_attr)
{
	struct ibv_query_qp cmd = {};

	return ibv_cmd_query_qp(ibqp, attr, attr_mask, init_attr, &cmd,
				sizeof(cmd));
}

int mbcf_qp_destroy(struct ibv_qp *ibqp)
{
	struct mbcf_qp *qp = to_mqp(ibqp);
	int ret;

	ret = ibv_cmd_destroy_qp(ibqp);
	if (ret)
		return ret;
	mbcf_wq_unmap(&qp->sq);
	mbcf_wq_unmap(&qp->rq);
	pthread_spin_destroy(&qp->sq.lock);
	pthread_spin_destroy(&qp->rq.lock);
	free(qp);
	return 0;
}
