// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Work requests into the rings: ibv_post_send / ibv_post_recv /
 * ibv_post_srq_recv, and the
 * extended work-request API (ibv_wr_start, ibv_wr_rdma_write, ...,
 * ibv_wr_set_sge, ibv_wr_complete).  Both build send entries with the same
 * helpers and the same checks, and make a batch visible to the kernel with
 * one release store of the producer index; a doorbell (POST_SEND /
 * POST_RECV / POST_SRQ_RECV with an empty list, which the kernel answers by
 * draining the ring, or for an SRQ by telling its QPs) only when the kernel
 * has said it went idle (db_needed).
 *
 * An entry is built in the slot at the ring's private index and becomes
 * visible only when the index is published, so an aborted or failed batch
 * leaves nothing behind: the index is simply set back.
 */
#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "mbcf.h"
#include "infiniband/mbcfdv.h"

/*
 * A doorbell: POST_SEND, POST_RECV or POST_SRQ_RECV with no work requests,
 * written straight to the command fd (the fixed parts of the three
 * commands are laid out alike: response, the QP's or SRQ's handle,
 * wr_count, sge_count, wqe_size).  ibv_cmd_post_send() sends the same
 * command wrapped in ioctl() INVOKE_WRITE, a longer kernel path for the
 * one system call of the data path.  Returns 0 or an errno (EIO once the
 * device is gone).
 */
static int mbcf_doorbell(struct ibv_context *ibctx, uint32_t handle,
			 uint32_t command, uint32_t wqe_size)
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
			.qp_handle = handle,
			.wqe_size = wqe_size,
		},
	};
	ssize_t n;

	static_assert(offsetof(struct ib_uverbs_post_srq_recv, srq_handle) ==
		      offsetof(struct ib_uverbs_post_send, qp_handle) &&
		      offsetof(struct ib_uverbs_post_srq_recv, wqe_size) ==
		      offsetof(struct ib_uverbs_post_send, wqe_size) &&
		      sizeof(struct ib_uverbs_post_srq_recv) ==
		      sizeof(struct ib_uverbs_post_send) &&
		      sizeof(struct ib_uverbs_post_srq_recv_resp) ==
		      sizeof(resp), "doorbell commands laid out alike");
	n = write(ibctx->cmd_fd, &req, sizeof(req));
	if (n == (ssize_t)sizeof(req))
		return 0;
	return n < 0 ? errno : EIO;
}

/*
 * A free slot at the ring's private index, or NULL with *err set: EIO if
 * the kernel's queue is gone (destroyed, or its device removed), before
 * anything is published, so a post that fails with EIO posted nothing.
 */
static void *mbcf_wq_slot(struct mbcf_wq *wq, int *err)
{
	bool corrupt = false;
	void *slot;

	if (!wq->map) {
		*err = ENOMEM;	/* a queue of 0 entries: no room, ever */
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

/*
 * Make entries [first, idx) visible; ring the doorbell if the kernel went
 * idle.  The full barrier in mbcf_ring_producer_wants_doorbell() orders the
 * publication before reading db_needed, so either the kernel sees our
 * entries or we see its flag.
 *
 * A doorbell failing with EIO (the device is going away) does not fail the
 * post: the entries are published, and the kernel may still execute them
 * (it reads the ring without a doorbell while the QP lives) or never (the
 * QP is destroyed first); each completes, or poll_cq reports the device
 * gone.  Failing the post would tell the caller they never run -- and some
 * do (tests/vm/lifetimes.sh saw them complete with SUCCESS).
 */
static int mbcf_wq_publish(struct ibv_context *ibctx, uint32_t handle,
			   struct mbcf_wq *wq, uint32_t first, uint32_t command,
			   uint32_t wqe_size)
{
	int db;

	if (wq->ring.idx == first)
		return 0;
	mbcf_ring_store_release(mbcf_ring_prod(&wq->ring), wq->ring.idx);
	if (!mbcf_ring_producer_wants_doorbell(&wq->ring))
		return 0;
	db = mbcf_doorbell(ibctx, handle, command, wqe_size);
	return db == EIO ? 0 : db;
}

/* The send queue takes requests in RTS and later (verbs: else EINVAL). */
static bool mbcf_sq_ready(const struct ibv_qp *ibqp)
{
	return ibqp->state != IBV_QPS_RESET && ibqp->state != IBV_QPS_INIT &&
	       ibqp->state != IBV_QPS_RTR;
}

/* ---- building send entries -------------------------------------------- */

static bool mbcf_op_reads_remote(uint32_t opcode)
{
	return opcode == IBV_WR_RDMA_READ || opcode == IBV_WR_ATOMIC_CMP_AND_SWP ||
	       opcode == IBV_WR_ATOMIC_FETCH_AND_ADD;
}

/* Inline data is data out of the local buffer: not for these. */
static bool mbcf_op_takes_inline(uint32_t opcode)
{
	return !mbcf_op_reads_remote(opcode) && opcode != IBV_WR_BIND_MW &&
	       opcode != IBV_WR_LOCAL_INV;
}

/* The header of a new entry; IBV_SEND_INLINE is set by the inline setters. */
static void mbcf_sq_header(struct mbcf_send_wqe *e, uint32_t opcode,
			   uint64_t wr_id, unsigned int flags)
{
	memset(e, 0, sizeof(*e));
	e->wr_id = wr_id;
	e->opcode = opcode;
	e->send_flags = flags & ~IBV_SEND_INLINE;
}

static int mbcf_sq_set_sges(const struct mbcf_qp *qp, struct mbcf_send_wqe *e,
			    const struct ibv_sge *sg, size_t n)
{
	size_t i;

	if (n > qp->sq.max_sge)
		return EINVAL;
	e->send_flags &= ~IBV_SEND_INLINE;
	e->inline_len = 0;
	e->num_sge = n;
	for (i = 0; i < n; i++) {
		e->sge[i].addr = sg[i].addr;
		e->sge[i].length = sg[i].length;
		e->sge[i].lkey = sg[i].lkey;
	}
	return 0;
}

/* Inline data is copied now: the caller may reuse its buffers at once. */
static int mbcf_sq_add_inline(const struct mbcf_qp *qp, struct mbcf_send_wqe *e,
			      const void *p, size_t len)
{
	if (!mbcf_op_takes_inline(e->opcode) || len > qp->max_inline - e->inline_len)
		return EINVAL;
	memcpy(e->inline_data + e->inline_len, p, len);
	e->inline_len += len;
	e->num_sge = 0;
	e->send_flags |= IBV_SEND_INLINE;
	return 0;
}

/* A memory window bind (carried out by the kernel in send-queue order). */
static void mbcf_sq_bind(struct mbcf_send_wqe *e, const struct ibv_mw *mw,
			 uint32_t rkey, const struct ibv_mw_bind_info *info)
{
	e->mw_rkey = mw->rkey;
	e->rkey = rkey;
	e->remote_addr = info->addr;
	e->bind.length = info->length;
	e->bind.mr_lkey = info->mr ? info->mr->lkey : 0;
	e->bind.access = info->mw_access_flags;
}

/*
 * Opcodes an unreliable connection cannot carry: they need a response
 * (verbs).  A datagram QP only sends.
 */
static bool mbcf_sq_op_ok(const struct ibv_qp *ibqp, uint32_t opcode)
{
	if (ibqp->qp_type == IBV_QPT_UD)
		return opcode == IBV_WR_SEND || opcode == IBV_WR_SEND_WITH_IMM;
	return ibqp->qp_type != IBV_QPT_UC || !mbcf_op_reads_remote(opcode);
}

/* Where a UD send goes: the handle's number, the QP, the Q_Key. */
static void mbcf_sq_ud(struct mbcf_send_wqe *e, struct ibv_ah *ah,
		       uint32_t remote_qpn, uint32_t remote_qkey)
{
	e->ud.ah = ah ? to_mah(ah)->num : 0;	/* 0 names no handle */
	e->ud.remote_qpn = remote_qpn;
	e->remote_qkey = remote_qkey;
}

/* ---- ibv_post_send / ibv_post_recv ------------------------------------------ */

/* Fill the header of one post_send WR; EINVAL for an opcode we lack. */
static int mbcf_sq_header_of(struct mbcf_send_wqe *e, const struct ibv_send_wr *wr)
{
	mbcf_sq_header(e, wr->opcode, wr->wr_id, wr->send_flags);
	switch (wr->opcode) {
	case IBV_WR_SEND_WITH_IMM:
		e->imm_data_be = wr->imm_data;
		return 0;
	case IBV_WR_SEND:
		return 0;
	case IBV_WR_RDMA_WRITE_WITH_IMM:
		e->imm_data_be = wr->imm_data;
		/* fallthrough */
	case IBV_WR_RDMA_WRITE:
	case IBV_WR_RDMA_READ:
		e->remote_addr = wr->wr.rdma.remote_addr;
		e->rkey = wr->wr.rdma.rkey;
		return 0;
	case IBV_WR_ATOMIC_CMP_AND_SWP:
	case IBV_WR_ATOMIC_FETCH_AND_ADD:
		e->remote_addr = wr->wr.atomic.remote_addr;
		e->rkey = wr->wr.atomic.rkey;
		e->compare_add = wr->wr.atomic.compare_add;
		e->swap = wr->wr.atomic.swap;
		return 0;
	case IBV_WR_SEND_WITH_INV:
		e->invalidate_rkey = wr->invalidate_rkey;
		return 0;
	case IBV_WR_LOCAL_INV:
		e->invalidate_rkey = wr->invalidate_rkey;
		return wr->num_sge ? EINVAL : 0;
	case IBV_WR_BIND_MW:
		if (!wr->bind_mw.mw || wr->num_sge)
			return EINVAL;
		mbcf_sq_bind(e, wr->bind_mw.mw, wr->bind_mw.rkey,
			     &wr->bind_mw.bind_info);
		return 0;
	default:
		return EINVAL;
	}
}

/* Check one send WR and build it in the next SQ slot; 0 or an errno. */
static int mbcf_post_one_send(struct mbcf_qp *qp, const struct ibv_send_wr *wr)
{
	struct mbcf_send_wqe *e;
	int i, err;

	if (wr->num_sge < 0 || !mbcf_sq_op_ok(&qp->vqp.qp, wr->opcode))
		return EINVAL;
	e = mbcf_wq_slot(&qp->sq, &err);
	if (!e)
		return err;
	err = mbcf_sq_header_of(e, wr);
	if (!err && qp->vqp.qp.qp_type == IBV_QPT_UD)
		mbcf_sq_ud(e, wr->wr.ud.ah, wr->wr.ud.remote_qpn,
			   wr->wr.ud.remote_qkey);
	if (!err && (wr->send_flags & IBV_SEND_INLINE)) {
		for (i = 0; !err && i < wr->num_sge; i++)
			err = mbcf_sq_add_inline(qp, e,
				(const void *)(uintptr_t)wr->sg_list[i].addr,
				wr->sg_list[i].length);
	} else if (!err) {
		err = mbcf_sq_set_sges(qp, e, wr->sg_list, wr->num_sge);
	}
	if (!err)
		qp->sq.ring.idx++;	/* taken; published with the batch */
	return err;
}

int mbcf_qp_post_send(struct ibv_qp *ibqp, struct ibv_send_wr *wr,
		      struct ibv_send_wr **bad_wr)
{
	struct mbcf_qp *qp = to_mqp(ibqp);
	uint32_t first;
	int ret = 0, db;

	*bad_wr = NULL;
	/* Immediate errors of the verbs spec (ibqp->state is kept by
	 * ibv_modify_qp()). */
	if (!mbcf_sq_ready(ibqp)) {
		*bad_wr = wr;
		return EINVAL;
	}
	pthread_spin_lock(&qp->sq.lock);
	first = qp->sq.ring.idx;
	for (; wr; wr = wr->next) {
		ret = mbcf_post_one_send(qp, wr);
		if (ret) {
			*bad_wr = wr;
			break;
		}
	}
	/* Those before a failed WR are posted (verbs). */
	db = mbcf_wq_publish(ibqp->context, ibqp->handle, &qp->sq, first, IB_USER_VERBS_CMD_POST_SEND,
			     sizeof(struct ib_uverbs_send_wr));
	pthread_spin_unlock(&qp->sq.lock);
	return ret ? ret : db;
}

/*
 * Check one receive WR and build it in the next slot of @wq (a QP's RQ or
 * an SRQ); 0 or an errno.
 */
static int mbcf_post_one_recv(struct mbcf_wq *wq, const struct ibv_recv_wr *wr)
{
	struct mbcf_recv_wqe *e;
	int i, err;

	if (wr->num_sge < 0 || (uint32_t)wr->num_sge > wq->max_sge)
		return EINVAL;
	e = mbcf_wq_slot(wq, &err);
	if (!e)
		return err;
	e->wr_id = wr->wr_id;
	e->num_sge = wr->num_sge;
	e->reserved = 0;
	for (i = 0; i < wr->num_sge; i++) {
		e->sge[i].addr = wr->sg_list[i].addr;
		e->sge[i].length = wr->sg_list[i].length;
		e->sge[i].lkey = wr->sg_list[i].lkey;
	}
	wq->ring.idx++;
	return 0;
}

/* A list of receives into @wq; those before a failed one are posted. */
static int mbcf_post_recv_list(struct ibv_context *ibctx, uint32_t handle,
			       struct mbcf_wq *wq, uint32_t command,
			       struct ibv_recv_wr *wr, struct ibv_recv_wr **bad_wr)
{
	uint32_t first;
	int ret = 0, db;

	pthread_spin_lock(&wq->lock);
	first = wq->ring.idx;
	for (; wr; wr = wr->next) {
		ret = mbcf_post_one_recv(wq, wr);
		if (ret) {
			*bad_wr = wr;
			break;
		}
	}
	db = mbcf_wq_publish(ibctx, handle, wq, first, command,
			     sizeof(struct ib_uverbs_recv_wr));
	pthread_spin_unlock(&wq->lock);
	return ret ? ret : db;
}

int mbcf_qp_post_recv(struct ibv_qp *ibqp, struct ibv_recv_wr *wr,
		      struct ibv_recv_wr **bad_wr)
{
	struct mbcf_qp *qp = to_mqp(ibqp);

	*bad_wr = NULL;
	/* A receive queue in RESET takes nothing (verbs: immediate error);
	 * a QP on an SRQ has no receive queue of its own. */
	if (ibqp->state == IBV_QPS_RESET || ibqp->srq) {
		*bad_wr = wr;
		return EINVAL;
	}
	return mbcf_post_recv_list(ibqp->context, ibqp->handle, &qp->rq,
				   IB_USER_VERBS_CMD_POST_RECV, wr, bad_wr);
}

int mbcf_srq_post_recv(struct ibv_srq *ibsrq, struct ibv_recv_wr *wr,
		       struct ibv_recv_wr **bad_wr)
{
	struct mbcf_srq *srq = to_msrq(ibsrq);

	*bad_wr = NULL;
	return mbcf_post_recv_list(ibsrq->context, ibsrq->handle, &srq->rq,
				   IB_USER_VERBS_CMD_POST_SRQ_RECV, wr, bad_wr);
}

/* ---- the extended work-request API (ibv_qp_ex) -------------------------------- */

static struct mbcf_qp *qpx_to_mqp(struct ibv_qp_ex *qpx)
{
	return container_of(qpx, struct mbcf_qp, vqp.qp_ex);
}

static void mbcf_wr_start(struct ibv_qp_ex *qpx)
{
	struct mbcf_qp *qp = qpx_to_mqp(qpx);

	pthread_spin_lock(&qp->sq.lock);
	qp->wr_first = qp->sq.ring.idx;
	qp->wr_cur = NULL;
	qp->wr_err = 0;
}

/*
 * Close the entry being built and open the next one: the slot at the
 * private index, with the batch's wr_id and wr_flags.  NULL once the batch
 * has failed (the error is reported by ibv_wr_complete).
 */
static struct mbcf_send_wqe *mbcf_wr_open(struct ibv_qp_ex *qpx, uint32_t opcode)
{
	struct mbcf_qp *qp = qpx_to_mqp(qpx);
	struct mbcf_send_wqe *e;

	if (qp->wr_err)
		return NULL;
	if (qp->wr_cur)
		qp->sq.ring.idx++;
	qp->wr_cur = NULL;
	if (!mbcf_sq_op_ok(&qp->vqp.qp, opcode)) {
		qp->wr_err = EINVAL;	/* as ibv_post_send: a UC read or atomic */
		return NULL;
	}
	e = mbcf_wq_slot(&qp->sq, &qp->wr_err);
	if (!e)
		return NULL;
	mbcf_sq_header(e, opcode, qpx->wr_id, qpx->wr_flags);
	qp->wr_cur = e;
	return e;
}

static void mbcf_wr_remote(struct ibv_qp_ex *qpx, uint32_t opcode,
			   uint32_t rkey, uint64_t remote_addr, __be32 imm)
{
	struct mbcf_send_wqe *e = mbcf_wr_open(qpx, opcode);

	if (!e)
		return;
	e->rkey = rkey;
	e->remote_addr = remote_addr;
	e->imm_data_be = imm;
}

static void mbcf_wr_rdma_write(struct ibv_qp_ex *qpx, uint32_t rkey,
			       uint64_t remote_addr)
{
	mbcf_wr_remote(qpx, IBV_WR_RDMA_WRITE, rkey, remote_addr, 0);
}

static void mbcf_wr_rdma_write_imm(struct ibv_qp_ex *qpx, uint32_t rkey,
				   uint64_t remote_addr, __be32 imm)
{
	mbcf_wr_remote(qpx, IBV_WR_RDMA_WRITE_WITH_IMM, rkey, remote_addr, imm);
}

static void mbcf_wr_rdma_read(struct ibv_qp_ex *qpx, uint32_t rkey,
			      uint64_t remote_addr)
{
	mbcf_wr_remote(qpx, IBV_WR_RDMA_READ, rkey, remote_addr, 0);
}

static void mbcf_wr_send(struct ibv_qp_ex *qpx)
{
	mbcf_wr_remote(qpx, IBV_WR_SEND, 0, 0, 0);
}

/* mbcfdv_wr_fifo_push (infiniband/mbcfdv.h): the FIFO's key in rkey. */
__attribute__((visibility("default")))
void mbcfdv_wr_fifo_push(struct ibv_qp_ex *qpx, uint32_t fifo_key)
{
	mbcf_wr_remote(qpx, MBCF_WR_FIFO_PUSH, fifo_key, 0, 0);
}

static void mbcf_wr_send_imm(struct ibv_qp_ex *qpx, __be32 imm)
{
	mbcf_wr_remote(qpx, IBV_WR_SEND_WITH_IMM, 0, 0, imm);
}

static void mbcf_wr_atomic(struct ibv_qp_ex *qpx, uint32_t opcode,
			   uint32_t rkey, uint64_t remote_addr,
			   uint64_t compare_add, uint64_t swap)
{
	struct mbcf_send_wqe *e = mbcf_wr_open(qpx, opcode);

	if (!e)
		return;
	e->rkey = rkey;
	e->remote_addr = remote_addr;
	e->compare_add = compare_add;
	e->swap = swap;
}

static void mbcf_wr_atomic_cmp_swp(struct ibv_qp_ex *qpx, uint32_t rkey,
				   uint64_t remote_addr, uint64_t compare,
				   uint64_t swap)
{
	mbcf_wr_atomic(qpx, IBV_WR_ATOMIC_CMP_AND_SWP, rkey, remote_addr,
		       compare, swap);
}

static void mbcf_wr_atomic_fetch_add(struct ibv_qp_ex *qpx, uint32_t rkey,
				     uint64_t remote_addr, uint64_t add)
{
	mbcf_wr_atomic(qpx, IBV_WR_ATOMIC_FETCH_AND_ADD, rkey, remote_addr,
		       add, 0);
}

static void mbcf_wr_send_inv(struct ibv_qp_ex *qpx, uint32_t invalidate_rkey)
{
	struct mbcf_send_wqe *e = mbcf_wr_open(qpx, IBV_WR_SEND_WITH_INV);

	if (e)
		e->invalidate_rkey = invalidate_rkey;
}

static void mbcf_wr_local_inv(struct ibv_qp_ex *qpx, uint32_t invalidate_rkey)
{
	struct mbcf_send_wqe *e = mbcf_wr_open(qpx, IBV_WR_LOCAL_INV);

	if (e)
		e->invalidate_rkey = invalidate_rkey;
}

static void mbcf_wr_bind_mw(struct ibv_qp_ex *qpx, struct ibv_mw *mw,
			    uint32_t rkey, const struct ibv_mw_bind_info *info)
{
	struct mbcf_send_wqe *e = mbcf_wr_open(qpx, IBV_WR_BIND_MW);

	if (e)
		mbcf_sq_bind(e, mw, rkey, info);
}

static void mbcf_wr_set_ud_addr(struct ibv_qp_ex *qpx, struct ibv_ah *ah,
				uint32_t remote_qpn, uint32_t remote_qkey)
{
	struct mbcf_qp *qp = qpx_to_mqp(qpx);

	if (!qp->wr_err && !qp->wr_cur)
		qp->wr_err = EINVAL;
	if (!qp->wr_err)
		mbcf_sq_ud(qp->wr_cur, ah, remote_qpn, remote_qkey);
}

/* The entry the setters fill; a setter before any opcode fails the batch. */
static struct mbcf_send_wqe *mbcf_wr_cur(struct mbcf_qp *qp)
{
	uint32_t op = qp->wr_cur ? qp->wr_cur->opcode : 0;

	/* local operations carry no data */
	if (!qp->wr_err && (!qp->wr_cur || op == IBV_WR_BIND_MW ||
			    op == IBV_WR_LOCAL_INV))
		qp->wr_err = EINVAL;
	return qp->wr_err ? NULL : qp->wr_cur;
}

static void mbcf_wr_set_sge_list(struct ibv_qp_ex *qpx, size_t num_sge,
				 const struct ibv_sge *sg_list)
{
	struct mbcf_qp *qp = qpx_to_mqp(qpx);
	struct mbcf_send_wqe *e = mbcf_wr_cur(qp);

	if (e)
		qp->wr_err = mbcf_sq_set_sges(qp, e, sg_list, num_sge);
}

static void mbcf_wr_set_sge(struct ibv_qp_ex *qpx, uint32_t lkey,
			    uint64_t addr, uint32_t length)
{
	struct ibv_sge sge = { .addr = addr, .length = length, .lkey = lkey };

	mbcf_wr_set_sge_list(qpx, 1, &sge);
}

static void mbcf_wr_set_inline_data_list(struct ibv_qp_ex *qpx, size_t num_buf,
					 const struct ibv_data_buf *buf_list)
{
	struct mbcf_qp *qp = qpx_to_mqp(qpx);
	struct mbcf_send_wqe *e = mbcf_wr_cur(qp);
	size_t i;

	if (!e)
		return;
	e->inline_len = 0;
	for (i = 0; i < num_buf && !qp->wr_err; i++)
		qp->wr_err = mbcf_sq_add_inline(qp, e, buf_list[i].addr,
						buf_list[i].length);
}

static void mbcf_wr_set_inline_data(struct ibv_qp_ex *qpx, void *addr,
				    size_t length)
{
	struct ibv_data_buf buf = { .addr = addr, .length = length };

	mbcf_wr_set_inline_data_list(qpx, 1, &buf);
}

/*
 * Post the batch, or none of it: a failed batch (ring full, bad argument,
 * a send queue not ready) is discarded and its first error returned.
 */
static int mbcf_wr_complete(struct ibv_qp_ex *qpx)
{
	struct mbcf_qp *qp = qpx_to_mqp(qpx);
	int err = qp->wr_err;

	if (!err && !mbcf_sq_ready(&qp->vqp.qp))
		err = EINVAL;
	if (!err && qp->wr_cur)
		qp->sq.ring.idx++;
	if (err)
		qp->sq.ring.idx = qp->wr_first;
	else
		err = mbcf_wq_publish(qp->vqp.qp.context, qp->vqp.qp.handle,
				      &qp->sq, qp->wr_first,
				      IB_USER_VERBS_CMD_POST_SEND,
				      sizeof(struct ib_uverbs_send_wr));
	qp->wr_cur = NULL;
	pthread_spin_unlock(&qp->sq.lock);
	return err;
}

static void mbcf_wr_abort(struct ibv_qp_ex *qpx)
{
	struct mbcf_qp *qp = qpx_to_mqp(qpx);

	qp->sq.ring.idx = qp->wr_first;
	qp->wr_cur = NULL;
	pthread_spin_unlock(&qp->sq.lock);
}

/* Install the ibv_wr_* entry points (every one in MBCF_SEND_OPS_FLAGS). */
void mbcf_wr_set_ops(struct mbcf_qp *qp)
{
	struct ibv_qp_ex *qpx = &qp->vqp.qp_ex;

	qpx->wr_start = mbcf_wr_start;
	qpx->wr_complete = mbcf_wr_complete;
	qpx->wr_abort = mbcf_wr_abort;
	qpx->wr_rdma_write = mbcf_wr_rdma_write;
	qpx->wr_rdma_write_imm = mbcf_wr_rdma_write_imm;
	qpx->wr_rdma_read = mbcf_wr_rdma_read;
	qpx->wr_send = mbcf_wr_send;
	qpx->wr_send_imm = mbcf_wr_send_imm;
	qpx->wr_atomic_cmp_swp = mbcf_wr_atomic_cmp_swp;
	qpx->wr_atomic_fetch_add = mbcf_wr_atomic_fetch_add;
	qpx->wr_send_inv = mbcf_wr_send_inv;
	qpx->wr_local_inv = mbcf_wr_local_inv;
	qpx->wr_bind_mw = mbcf_wr_bind_mw;
	qpx->wr_set_sge = mbcf_wr_set_sge;
	qpx->wr_set_sge_list = mbcf_wr_set_sge_list;
	qpx->wr_set_inline_data = mbcf_wr_set_inline_data;
	qpx->wr_set_inline_data_list = mbcf_wr_set_inline_data_list;
	if (qp->vqp.qp.qp_type == IBV_QPT_UD)
		qpx->wr_set_ud_addr = mbcf_wr_set_ud_addr;
}
