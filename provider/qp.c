// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Queue pairs (RC only, no SRQ).  CREATE_QP returns two rings, the send
 * and the receive queue, that we mmap() on the context fd and produce work
 * requests into; the kernel consumes them.  Posting is a copy into the ring
 * and, only when the kernel has said it went idle (db_needed), a doorbell:
 * POST_SEND / POST_RECV with an empty work request list, which the kernel
 * answers by draining the ring.  Everything else is one uverbs command.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "mbcf.h"

/*
 * A doorbell: POST_SEND or POST_RECV with no work requests, written straight
 * to the command fd (the fixed parts of the two commands are laid out
 * alike).  ibv_cmd_post_send() sends the same command wrapped in ioctl()
 * INVOKE_WRITE, a longer kernel path for the one system call of the data
 * path.  Returns 0 or an errno.
 */
static int mbcf_doorbell(struct ibv_qp *ibqp, uint32_t command,
			 uint32_t wqe_size)
{
	struct ib_uverbs_post_send_resp resp;
	struct {
		struct ib_uverbs_cmd_hdr hdr;
		struct ib_uverbs_post_send cmd;
	} req = {
		.hdr = {
			.command = command,
			.in_words = sizeof(req) / 4,
			.out_words = sizeof(resp) / 4,
		},
		.cmd = {
			.response = (uintptr_t)&resp,
			.qp_handle = ibqp->handle,
			.wqe_size = wqe_size,
		},
	};

	ssize_t n = write(ibqp->context->cmd_fd, &req, sizeof(req));

	if (n == (ssize_t)sizeof(req))
		return 0;
	return n < 0 ? errno : EIO;
}

/*
 * What a failed doorbell means for a post whose entries are published.
 * EIO: the device is going away.  The kernel may still execute them (it
 * reads the ring without a doorbell while the QP lives) or never (the QP
 * is destroyed first); either way they are posted: each completes, or
 * poll_cq reports the device gone.  Failing the post would tell the
 * caller they never run -- and some do.  Anything else is reported.
 */
static int mbcf_doorbell_status(int db)
{
	return db == EIO ? 0 : db;
}

/* Map one work queue's ring; a ring of 0 entries is "no queue". */
static int mbcf_wq_map(struct ibv_context *ibctx, struct mbcf_wq *wq,
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

static void mbcf_wq_unmap(struct mbcf_wq *wq)
{
	if (wq->map)
		munmap(wq->map, wq->map_len);
	wq->map = NULL;
}

struct ibv_qp *mbcf_qp_create(struct ibv_pd *pd, struct ibv_qp_init_attr *attr)
{
	struct mbcf_create_qp_resp_full resp = {};
	struct ibv_create_qp cmd = {};
	struct mbcf_qp *qp;
	int ret;

	if (attr->qp_type != IBV_QPT_RC || attr->srq) {
		errno = EOPNOTSUPP;
		return NULL;
	}

	qp = calloc(1, sizeof(*qp));
	if (!qp)
		return NULL;

	/* The kernel sizes everything; attr->cap comes back with the truth. */
	ret = ibv_cmd_create_qp(pd, &qp->vqp.qp, attr, &cmd, sizeof(cmd),
				&resp.ibv_resp, sizeof(resp));
	if (ret)
		goto err_free;

	qp->max_inline = attr->cap.max_inline_data;
	ret = mbcf_wq_map(pd->context, &qp->sq, &resp.drv.sq,
			  sizeof(struct mbcf_send_wqe), attr->cap.max_send_sge,
			  qp->max_inline);
	if (ret)
		goto err_destroy;
	ret = mbcf_wq_map(pd->context, &qp->rq, &resp.drv.rq,
			  sizeof(struct mbcf_recv_wqe), attr->cap.max_recv_sge,
			  0);
	if (ret)
		goto err_unmap;

	pthread_spin_init(&qp->sq.lock, PTHREAD_PROCESS_PRIVATE);
	pthread_spin_init(&qp->rq.lock, PTHREAD_PROCESS_PRIVATE);
	return &qp->vqp.qp;

err_unmap:
	mbcf_wq_unmap(&qp->sq);
err_destroy:
	ibv_cmd_destroy_qp(&qp->vqp.qp);
err_free:
	free(qp);
	errno = ret;
	return NULL;
}

int mbcf_qp_modify(struct ibv_qp *ibqp, struct ibv_qp_attr *attr, int attr_mask)
{
	struct ibv_modify_qp cmd = {};

	return ibv_cmd_modify_qp(ibqp, attr, attr_mask, &cmd, sizeof(cmd));
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

/*
 * A free slot of wq's ring, or NULL with *err = ENOMEM (full) or EIO (the
 * kernel's queue is gone: destroyed, or its device removed; nothing is
 * published then, so a post that fails with EIO posted nothing).
 */
static void *mbcf_wq_slot(struct mbcf_wq *wq, int *err)
{
	bool corrupt = false;
	void *slot;

	if (!wq->map) {
		*err = ENOMEM;
		return NULL;
	}
	if (mbcf_ring_load_acquire(mbcf_ring_flags(&wq->ring)) & MBCF_RING_F_DEAD) {
		*err = EIO;
		return NULL;
	}
	slot = mbcf_ring_produce_slot(&wq->ring, &corrupt);
	if (!slot)
		*err = corrupt ? EIO : ENOMEM;
	return slot;
}

/* Check one send WR and copy it into the next SQ slot; 0 or an errno. */
static int mbcf_post_one_send(struct mbcf_qp *qp, const struct ibv_send_wr *wr)
{
	struct mbcf_send_wqe *wqe;
	uint32_t inline_len = 0;
	bool rdma = false, atomic = false;
	int i, err;

	switch (wr->opcode) {
	case IBV_WR_SEND:
	case IBV_WR_SEND_WITH_IMM:
		break;
	case IBV_WR_RDMA_WRITE:
	case IBV_WR_RDMA_WRITE_WITH_IMM:
	case IBV_WR_RDMA_READ:
		rdma = true;
		break;
	case IBV_WR_ATOMIC_CMP_AND_SWP:
	case IBV_WR_ATOMIC_FETCH_AND_ADD:
		atomic = true;
		break;
	default:
		return EINVAL;
	}
	if (wr->num_sge < 0 || (uint32_t)wr->num_sge > qp->sq.max_sge)
		return EINVAL;
	if (wr->send_flags & IBV_SEND_INLINE) {
		/* Inline carries data out of the local buffer: not for reads. */
		if (atomic || wr->opcode == IBV_WR_RDMA_READ)
			return EINVAL;
		for (i = 0; i < wr->num_sge; i++) {
			if (wr->sg_list[i].length > qp->max_inline - inline_len)
				return EINVAL;
			inline_len += wr->sg_list[i].length;
		}
	}

	wqe = mbcf_wq_slot(&qp->sq, &err);
	if (!wqe)
		return err;

	wqe->wr_id = wr->wr_id;
	wqe->opcode = wr->opcode;
	wqe->send_flags = wr->send_flags;
	wqe->imm_data_be = (wr->opcode == IBV_WR_SEND_WITH_IMM ||
			    wr->opcode == IBV_WR_RDMA_WRITE_WITH_IMM) ?
			   wr->imm_data : 0;
	if (rdma) {
		wqe->remote_addr = wr->wr.rdma.remote_addr;
		wqe->rkey = wr->wr.rdma.rkey;
	} else if (atomic) {
		wqe->remote_addr = wr->wr.atomic.remote_addr;
		wqe->rkey = wr->wr.atomic.rkey;
	} else {
		wqe->remote_addr = 0;
		wqe->rkey = 0;
	}
	wqe->compare_add = atomic ? wr->wr.atomic.compare_add : 0;
	wqe->swap = atomic ? wr->wr.atomic.swap : 0;

	if (wr->send_flags & IBV_SEND_INLINE) {
		uint8_t *data = wqe->inline_data;

		/* The caller may reuse its buffers once we return. */
		wqe->num_sge = 0;
		wqe->inline_len = inline_len;
		for (i = 0; i < wr->num_sge; i++) {
			memcpy(data, (const void *)(uintptr_t)wr->sg_list[i].addr,
			       wr->sg_list[i].length);
			data += wr->sg_list[i].length;
		}
	} else {
		struct mbcf_sge *sge = wqe->sge;

		wqe->num_sge = wr->num_sge;
		wqe->inline_len = 0;
		for (i = 0; i < wr->num_sge; i++) {
			sge[i].addr = wr->sg_list[i].addr;
			sge[i].length = wr->sg_list[i].length;
			sge[i].lkey = wr->sg_list[i].lkey;
		}
	}

	mbcf_ring_produce(&qp->sq.ring);
	return 0;
}

int mbcf_qp_post_send(struct ibv_qp *ibqp, struct ibv_send_wr *wr,
		      struct ibv_send_wr **bad_wr)
{
	struct mbcf_qp *qp = to_mqp(ibqp);
	unsigned int posted = 0;
	int ret = 0, db;

	*bad_wr = NULL;
	/*
	 * Immediate errors of the verbs spec: not an RC QP of ours, or a send
	 * queue not yet ready (ibqp->state is kept by ibv_modify_qp()).
	 */
	if (ibqp->qp_type != IBV_QPT_RC || ibqp->state == IBV_QPS_RESET ||
	    ibqp->state == IBV_QPS_INIT || ibqp->state == IBV_QPS_RTR) {
		*bad_wr = wr;
		return EINVAL;
	}

	pthread_spin_lock(&qp->sq.lock);
	for (; wr; wr = wr->next) {
		ret = mbcf_post_one_send(qp, wr);
		if (ret) {
			*bad_wr = wr;
			break;
		}
		posted++;
	}
	pthread_spin_unlock(&qp->sq.lock);

	/*
	 * Every entry is published (mbcf_ring_produce); the full barrier in
	 * mbcf_ring_producer_wants_doorbell() orders that before reading
	 * db_needed, so either the kernel sees our entries or we see its
	 * flag.  The doorbell is POST_SEND with no work requests.
	 */
	if (posted && mbcf_ring_producer_wants_doorbell(&qp->sq.ring)) {
		db = mbcf_doorbell_status(mbcf_doorbell(ibqp, IB_USER_VERBS_CMD_POST_SEND,
							sizeof(struct ib_uverbs_send_wr)));
		if (db && !ret)
			ret = db;
	}
	return ret;
}

/* Check one receive WR and copy it into the next RQ slot; 0 or an errno. */
static int mbcf_post_one_recv(struct mbcf_qp *qp, const struct ibv_recv_wr *wr)
{
	struct mbcf_recv_wqe *wqe;
	struct mbcf_sge *sge;
	int i, err;

	if (wr->num_sge < 0 || (uint32_t)wr->num_sge > qp->rq.max_sge)
		return EINVAL;

	wqe = mbcf_wq_slot(&qp->rq, &err);
	if (!wqe)
		return err;

	wqe->wr_id = wr->wr_id;
	wqe->num_sge = wr->num_sge;
	wqe->reserved = 0;
	sge = wqe->sge;
	for (i = 0; i < wr->num_sge; i++) {
		sge[i].addr = wr->sg_list[i].addr;
		sge[i].length = wr->sg_list[i].length;
		sge[i].lkey = wr->sg_list[i].lkey;
	}

	mbcf_ring_produce(&qp->rq.ring);
	return 0;
}

int mbcf_qp_post_recv(struct ibv_qp *ibqp, struct ibv_recv_wr *wr,
		      struct ibv_recv_wr **bad_wr)
{
	struct mbcf_qp *qp = to_mqp(ibqp);
	unsigned int posted = 0;
	int ret = 0, db;

	*bad_wr = NULL;
	/* A receive queue in RESET takes nothing (verbs: immediate error). */
	if (ibqp->state == IBV_QPS_RESET) {
		*bad_wr = wr;
		return EINVAL;
	}
	pthread_spin_lock(&qp->rq.lock);
	for (; wr; wr = wr->next) {
		ret = mbcf_post_one_recv(qp, wr);
		if (ret) {
			*bad_wr = wr;
			break;
		}
		posted++;
	}
	pthread_spin_unlock(&qp->rq.lock);

	/* Same doorbell protocol as post_send, with POST_RECV. */
	if (posted && mbcf_ring_producer_wants_doorbell(&qp->rq.ring)) {
		db = mbcf_doorbell_status(mbcf_doorbell(ibqp, IB_USER_VERBS_CMD_POST_RECV,
							sizeof(struct ib_uverbs_recv_wr)));
		if (db && !ret)
			ret = db;
	}
	return ret;
}
