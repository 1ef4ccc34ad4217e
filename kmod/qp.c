// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * RC queue pairs: the verbs (create/modify/query/destroy), the doorbells,
 * and the kernel side of the send and receive rings.
 *
 * The provider writes work requests into the rings; we copy each one out
 * (user space can rewrite the ring at any time) into a private FIFO that
 * lives until the request completes, validate the copy, and hand it to the
 * protocol core.  Everything runs under qp->lock.  Core callbacks must not
 * call back into the core, so work they make necessary (draining the send
 * ring after completions freed room, flushing after an error) is done by
 * mbcf_qp_settle() once the core call has returned.
 */
#include <linux/log2.h>
#include <linux/slab.h>
#include <rdma/uverbs_ioctl.h>

#include "mbcf.h"

#define MBCF_QP_RESP_SLOTS	roundup_pow_of_two(MBCF_MAX_RD_ATOMIC)

static void mbcf_qp_default_attrs(struct mbcf_qp *qp);
static enum ib_wc_opcode mbcf_qp_wc_opcode(u32 uverbs_op);

struct mbcf_send_wqe *mbcf_qp_sq_wqe(struct mbcf_qp *qp, u64 cookie)
{
	return (struct mbcf_send_wqe *)(qp->sq_copy +
		(size_t)((u32)cookie & qp->sq.mask) * qp->sq.stride);
}

struct mbcf_recv_wqe *mbcf_qp_rq_wqe(struct mbcf_qp *qp, u64 cookie)
{
	return (struct mbcf_recv_wqe *)(qp->rq_copy +
		(size_t)((u32)cookie & qp->rq.mask) * qp->rq.stride);
}

static struct mbcf_sge *mbcf_qp_send_sges(struct mbcf_send_wqe *w)
{
	return (struct mbcf_sge *)(w + 1);
}

/* ---- completions that never reach the core --------------------------- */

static void mbcf_qp_push_send(struct mbcf_qp *qp, const struct mbcf_send_wqe *w,
			      enum ib_wc_status status, enum ib_wc_opcode op)
{
	struct ib_uverbs_wc wc = {
		.wr_id = w->wr_id,
		.status = status,
		.opcode = op,
		.qp_num = qp->ibqp.qp_num,
	};

	mbcf_cq_push(to_mbcf_cq(qp->ibqp.send_cq), &wc, false);
}

static void mbcf_qp_push_recv_flush(struct mbcf_qp *qp,
				    const struct mbcf_recv_wqe *w)
{
	struct ib_uverbs_wc wc = {
		.wr_id = w->wr_id,
		.status = IB_WC_WR_FLUSH_ERR,
		.opcode = IB_WC_RECV,
		.qp_num = qp->ibqp.qp_num,
	};

	mbcf_cq_push(to_mbcf_cq(qp->ibqp.recv_cq), &wc, false);
}

/*
 * In the error state every request still in a ring completes with
 * IB_WC_WR_FLUSH_ERR, including those posted after the error (verbs).
 * One ring's worth per call: a process posting as fast as we flush must
 * not keep us here with bottom halves off; its next doorbell continues.
 */
static void mbcf_qp_flush_rings(struct mbcf_qp *qp)
{
	struct mbcf_send_wqe sw;
	struct mbcf_recv_wqe rw;
	bool corrupt;
	u32 n;
	void *e;

	for (n = 0; n <= qp->sq.mask &&
	     (e = mbcf_ring_consume_slot(&qp->sq, &corrupt)); n++) {
		memcpy(&sw, e, sizeof(sw));
		mbcf_ring_consume(&qp->sq);
		mbcf_qp_push_send(qp, &sw, IB_WC_WR_FLUSH_ERR,
				  mbcf_qp_wc_opcode(sw.opcode));
	}
	for (n = 0; n <= qp->rq.mask &&
	     (e = mbcf_ring_consume_slot(&qp->rq, &corrupt)); n++) {
		memcpy(&rw, e, sizeof(rw));
		mbcf_ring_consume(&qp->rq);
		mbcf_qp_push_recv_flush(qp, &rw);
	}
	mbcf_ring_consumer_idle(&qp->sq);
	mbcf_ring_consumer_idle(&qp->rq);
}

/* Move to the error state (under qp->lock, not from a core callback). */
void mbcf_qp_to_error(struct mbcf_qp *qp)
{
	if (qp->state == IB_QPS_RESET)
		return;
	if (qp->conn.state == MBCF_CONN_RTS)
		mbcf_conn_flush(&qp->conn);	/* FLUSH for everything queued */
	qp->state = IB_QPS_ERR;
	mbcf_qp_flush_rings(qp);
}

/* ---- the send ring ----------------------------------------------------- */

static const u8 mbcf_qp_wr_ops[] = {
	[IB_UVERBS_WR_RDMA_WRITE] = MBCF_OP_WRITE,
	[IB_UVERBS_WR_RDMA_WRITE_WITH_IMM] = MBCF_OP_WRITE_IMM,
	[IB_UVERBS_WR_SEND] = MBCF_OP_SEND,
	[IB_UVERBS_WR_SEND_WITH_IMM] = MBCF_OP_SEND_IMM,
	[IB_UVERBS_WR_RDMA_READ] = MBCF_OP_READ_REQ,
	[IB_UVERBS_WR_ATOMIC_CMP_AND_SWP] = MBCF_OP_CMP_SWAP,
	[IB_UVERBS_WR_ATOMIC_FETCH_AND_ADD] = MBCF_OP_FETCH_ADD,
};

static bool mbcf_qp_op_writes_local(u8 op)
{
	return op == MBCF_OP_READ_REQ || op == MBCF_OP_CMP_SWAP ||
	       op == MBCF_OP_FETCH_ADD;
}

/*
 * Turn our private copy of a send WQE into a core work request.  Returns
 * an ib_wc_status: anything but IB_WC_SUCCESS fails the request locally.
 */
static enum ib_wc_status mbcf_qp_parse_wqe(struct mbcf_qp *qp,
					   struct mbcf_send_wqe *w,
					   struct mbcf_wr *wr)
{
	struct mbcf_dev *dev = qp->dev;
	struct mbcf_sge *sge = mbcf_qp_send_sges(w);
	bool inl = w->send_flags & IB_SEND_INLINE;
	u64 len = 0;
	u32 i;

	if (w->opcode >= ARRAY_SIZE(mbcf_qp_wr_ops) || !mbcf_qp_wr_ops[w->opcode])
		return IB_WC_LOC_QP_OP_ERR;
	memset(wr, 0, sizeof(*wr));
	wr->op = mbcf_qp_wr_ops[w->opcode];

	if (inl) {
		if (mbcf_qp_op_writes_local(wr->op) || w->inline_len > qp->max_inline)
			return IB_WC_LOC_QP_OP_ERR;
		len = w->inline_len;
	} else {
		if (w->num_sge > qp->max_send_sge)
			return IB_WC_LOC_QP_OP_ERR;
		for (i = 0; i < w->num_sge; i++) {
			int need = mbcf_qp_op_writes_local(wr->op) ?
				   IB_ACCESS_LOCAL_WRITE : 0;

			len += sge[i].length;
			if (sge[i].length &&
			    mbcf_mr_check(dev, qp->ibqp.pd, sge[i].lkey,
					  sge[i].addr, sge[i].length, need))
				return IB_WC_LOC_PROT_ERR;
		}
	}
	if (len > MBCF_MAX_MSG_SIZE)
		return IB_WC_LOC_LEN_ERR;
	if ((wr->op == MBCF_OP_CMP_SWAP || wr->op == MBCF_OP_FETCH_ADD) && len != 8)
		return IB_WC_LOC_LEN_ERR;

	wr->len = len;
	wr->raddr = w->remote_addr;
	wr->rkey = w->rkey;
	wr->imm = be32_to_cpu((__force __be32)w->imm_data_be);
	if (wr->op == MBCF_OP_CMP_SWAP) {
		wr->compare = w->compare_add;
		wr->swap_add = w->swap;
	} else {
		wr->swap_add = w->compare_add;
	}
	if (w->send_flags & IB_SEND_SOLICITED)
		wr->flags |= MBCF_F_SOLICITED;
	if (w->send_flags & IB_SEND_FENCE)
		wr->flags |= MBCF_WR_FENCE;
	return IB_WC_SUCCESS;
}

static enum ib_wc_opcode mbcf_qp_wc_opcode(u32 uverbs_op)
{
	switch (uverbs_op) {
	case IB_UVERBS_WR_RDMA_WRITE:
	case IB_UVERBS_WR_RDMA_WRITE_WITH_IMM:
		return IB_WC_RDMA_WRITE;
	case IB_UVERBS_WR_RDMA_READ:
		return IB_WC_RDMA_READ;
	case IB_UVERBS_WR_ATOMIC_CMP_AND_SWP:
		return IB_WC_COMP_SWAP;
	case IB_UVERBS_WR_ATOMIC_FETCH_AND_ADD:
		return IB_WC_FETCH_ADD;
	default:
		return IB_WC_SEND;
	}
}

enum ib_wc_opcode mbcf_qp_send_wc_opcode(struct mbcf_qp *qp, u64 cookie)
{
	return mbcf_qp_wc_opcode(mbcf_qp_sq_wqe(qp, cookie)->opcode);
}

/*
 * Copy send WQEs out of the ring and queue them in the core.  A WQE's slot
 * stays taken until it completes (proto.c releases it), so the provider
 * sees the ring full exactly when max_send_wr requests are outstanding.
 * Returns true if any was queued.
 *
 * When the ring is empty we tell the provider to ring the doorbell next
 * time, unless requests are still outstanding: then an acknowledgement or
 * the connection timer is bound to come and settle the QP again, and that
 * pulls whatever was posted meanwhile.  A streaming sender thus costs no
 * system call per work request, only one when its pipeline has drained.
 */
static bool mbcf_qp_pull_sq(struct mbcf_qp *qp)
{
	bool queued = false, corrupt;
	struct mbcf_send_wqe *w;
	struct mbcf_wr wr;
	enum ib_wc_status st;
	void *e;

	for (;;) {
		e = mbcf_ring_consume_slot(&qp->sq, &corrupt);
		if (unlikely(corrupt)) {
			qp->conn_failed = IB_WC_LOC_QP_OP_ERR;
			break;
		}
		if (!e) {
			if (qp->conn.state == MBCF_CONN_RTS &&
			    mbcf_conn_outstanding(&qp->conn))
				break;
			if (mbcf_ring_consumer_idle(&qp->sq))
				break;
			continue;
		}
		w = mbcf_qp_sq_wqe(qp, qp->sq.rd);
		memcpy(w, e, qp->sq.stride);

		st = mbcf_qp_parse_wqe(qp, w, &wr);
		if (st == IB_WC_SUCCESS) {
			wr.cookie = qp->sq.rd;
			if (WARN_ON_ONCE(mbcf_conn_enqueue(&qp->conn, &wr)))
				st = IB_WC_LOC_QP_OP_ERR;
		}
		if (st != IB_WC_SUCCESS) {
			/* Left in the ring: see mbcf_qp_fail_wqe(). */
			qp->failed_status = st;
			qp->failed_valid = true;
			break;
		}
		mbcf_ring_read_next(&qp->sq);
		queued = true;
	}
	return queued;
}

/*
 * A WQE failed local checks: it waits at the ring's read cursor until every
 * request before it has completed normally, then completes with its own
 * status, and the QP goes to error (what follows is flushed).  If the QP
 * failed meanwhile for another reason, it is simply flushed.
 */
static void mbcf_qp_fail_wqe(struct mbcf_qp *qp)
{
	enum ib_wc_status st = qp->failed_status;
	struct mbcf_send_wqe w;
	bool corrupt;
	void *e;

	qp->failed_valid = false;
	if (qp->conn.state != MBCF_CONN_RTS)
		st = IB_WC_WR_FLUSH_ERR;
	e = mbcf_ring_consume_slot(&qp->sq, &corrupt);
	if (e) {
		memcpy(&w, e, sizeof(w));
		mbcf_ring_consume(&qp->sq);
		mbcf_qp_push_send(qp, &w, st, mbcf_qp_wc_opcode(w.opcode));
	}
	mbcf_qp_to_error(qp);
}

/*
 * After every call into the core (and on doorbells): act on what the
 * callbacks recorded, then feed the core from the send ring.
 */
void mbcf_qp_settle(struct mbcf_qp *qp, u64 now)
{
	if (qp->state == IB_QPS_RTS && !qp->failed_valid && mbcf_qp_pull_sq(qp))
		mbcf_conn_kick(&qp->conn, now);

	if (unlikely(qp->failed_valid) &&
	    (qp->conn.state != MBCF_CONN_RTS || !mbcf_conn_outstanding(&qp->conn)))
		mbcf_qp_fail_wqe(qp);
	if (unlikely(qp->conn_failed)) {
		qp->conn_failed = 0;
		mbcf_qp_to_error(qp);
	}
	if (qp->state == IB_QPS_ERR)
		mbcf_qp_flush_rings(qp);
}

/* ---- doorbells ------------------------------------------------------- */

int mbcf_qp_post_send(struct ib_qp *ibqp, const struct ib_send_wr *wr,
		      const struct ib_send_wr **bad_wr)
{
	struct mbcf_qp *qp = to_mbcf_qp(ibqp);

	/* User QPs only: work requests arrive through the ring. */
	if (wr) {
		*bad_wr = wr;
		return -EOPNOTSUPP;
	}
	spin_lock_bh(&qp->lock);
	mbcf_ring_consumer_busy(&qp->sq);
	mbcf_qp_settle(qp, mbcf_proto_now());
	mbcf_net_unlock(qp, true);
	return 0;
}

int mbcf_qp_post_recv(struct ib_qp *ibqp, const struct ib_recv_wr *wr,
		      const struct ib_recv_wr **bad_wr)
{
	struct mbcf_qp *qp = to_mbcf_qp(ibqp);
	u64 now = mbcf_proto_now();

	if (wr) {
		*bad_wr = wr;
		return -EOPNOTSUPP;
	}
	spin_lock_bh(&qp->lock);
	mbcf_ring_consumer_busy(&qp->rq);
	if (qp->conn.state == MBCF_CONN_RTS)
		mbcf_conn_recv_posted(&qp->conn, now);	/* GO after a STOP */
	mbcf_qp_settle(qp, now);
	mbcf_net_unlock(qp, true);
	return 0;
}

/* ---- create / destroy -------------------------------------------------- */

static int mbcf_qp_check_init(struct ib_qp_init_attr *init)
{
	struct ib_qp_cap *cap = &init->cap;

	if (init->qp_type != IB_QPT_RC || init->srq || init->create_flags)
		return -EOPNOTSUPP;
	if (cap->max_send_wr > MBCF_MAX_QP_WR || cap->max_recv_wr > MBCF_MAX_QP_WR ||
	    cap->max_send_sge > MBCF_MAX_SGE || cap->max_recv_sge > MBCF_MAX_SGE ||
	    cap->max_inline_data > MBCF_MAX_INLINE)
		return -EINVAL;
	return 0;
}

/* Ring geometry; reports the real capacities back in @cap (verbs). */
static void mbcf_qp_size(struct ib_qp_cap *cap, u32 *sq_n, u32 *sq_stride,
			 u32 *rq_n, u32 *rq_stride)
{
	u32 sq_data = max(max(cap->max_send_sge, 1u) * (u32)sizeof(struct mbcf_sge),
			  cap->max_inline_data);
	u32 rq_data = max(cap->max_recv_sge, 1u) * (u32)sizeof(struct mbcf_sge);

	*sq_n = roundup_pow_of_two(max(cap->max_send_wr, 1u));
	*rq_n = roundup_pow_of_two(max(cap->max_recv_wr, 1u));
	*sq_stride = ALIGN(sizeof(struct mbcf_send_wqe) + sq_data, 16);
	*rq_stride = ALIGN(sizeof(struct mbcf_recv_wqe) + rq_data, 16);

	sq_data = *sq_stride - sizeof(struct mbcf_send_wqe);
	rq_data = *rq_stride - sizeof(struct mbcf_recv_wqe);
	cap->max_send_wr = *sq_n;
	cap->max_recv_wr = *rq_n;
	cap->max_send_sge = min_t(u32, sq_data / sizeof(struct mbcf_sge), MBCF_MAX_SGE);
	cap->max_recv_sge = min_t(u32, rq_data / sizeof(struct mbcf_sge), MBCF_MAX_SGE);
	cap->max_inline_data = min_t(u32, sq_data, MBCF_MAX_INLINE);
}

static void mbcf_qp_free_mem(struct mbcf_qp *qp)
{
	mbcf_umap_remove(qp->sq_umap);
	mbcf_umap_remove(qp->rq_umap);
	kvfree(qp->sq_copy);
	kvfree(qp->rq_copy);
	kvfree(qp->req_msgs);
	kfree(qp->resp_msgs);
}

static int mbcf_qp_alloc_mem(struct mbcf_qp *qp, struct ib_ucontext *uctx,
			     u32 sq_n, u32 sq_stride, u32 rq_n, u32 rq_stride)
{
	qp->sq_umap = mbcf_umap_create(uctx, MBCF_RING_ENTRIES_OFF + (size_t)sq_n * sq_stride);
	if (IS_ERR(qp->sq_umap))
		goto err;
	qp->rq_umap = mbcf_umap_create(uctx, MBCF_RING_ENTRIES_OFF + (size_t)rq_n * rq_stride);
	if (IS_ERR(qp->rq_umap))
		goto err;
	mbcf_ring_init(&qp->sq, qp->sq_umap->buf, sq_n, sq_stride, 0);
	mbcf_ring_init(&qp->rq, qp->rq_umap->buf, rq_n, rq_stride, 0);
	/* Idle from the start: the first posts must ring the doorbell. */
	mbcf_ring_consumer_idle(&qp->sq);
	mbcf_ring_consumer_idle(&qp->rq);

	qp->sq_copy = kvcalloc(sq_n, sq_stride, GFP_KERNEL);
	qp->rq_copy = kvcalloc(rq_n, rq_stride, GFP_KERNEL);
	qp->req_msgs = kvcalloc(sq_n, sizeof(*qp->req_msgs), GFP_KERNEL);
	qp->resp_size = MBCF_QP_RESP_SLOTS;
	qp->resp_msgs = kcalloc(qp->resp_size, sizeof(*qp->resp_msgs), GFP_KERNEL);
	if (!qp->sq_copy || !qp->rq_copy || !qp->req_msgs || !qp->resp_msgs)
		goto err;
	return 0;

err:
	if (IS_ERR(qp->sq_umap))
		qp->sq_umap = NULL;
	if (IS_ERR(qp->rq_umap))
		qp->rq_umap = NULL;
	mbcf_qp_free_mem(qp);
	return -ENOMEM;
}

static void mbcf_qp_ring_info(struct mbcf_ring_info *ri, struct mbcf_umap *m,
			      const struct mbcf_ring_end *r)
{
	ri->mmap_offset = mbcf_umap_offset(m);
	ri->mmap_len = m->len;
	ri->num_entries = r->mask + 1;
	ri->stride = r->stride;
}

int mbcf_qp_create(struct ib_qp *ibqp, struct ib_qp_init_attr *init,
		   struct ib_udata *udata)
{
	struct mbcf_dev *dev = to_mbcf_dev(ibqp->device);
	struct mbcf_qp *qp = to_mbcf_qp(ibqp);
	struct mbcf_create_qp_resp resp = {};
	struct mbcf_ucontext *uc;
	u32 sq_n, sq_stride, rq_n, rq_stride, qpn;
	int err;

	if (!udata)
		return -EOPNOTSUPP;	/* user-space QPs only */
	if (udata->outlen < sizeof(resp))
		return -EINVAL;
	err = mbcf_qp_check_init(init);
	if (err)
		return err;
	if (atomic_inc_return(&dev->qp_count) > MBCF_MAX_QP) {
		err = -ENOMEM;
		goto err_count;
	}

	qp->dev = dev;
	spin_lock_init(&qp->lock);
	mbcf_net_qp_init(qp);
	qp->state = IB_QPS_RESET;
	qp->sq_sig_all = init->sq_sig_type == IB_SIGNAL_ALL_WR;
	mbcf_qp_default_attrs(qp);
	hrtimer_init(&qp->timer, CLOCK_MONOTONIC, HRTIMER_MODE_ABS_SOFT);
	qp->timer.function = mbcf_proto_timer;

	mbcf_qp_size(&init->cap, &sq_n, &sq_stride, &rq_n, &rq_stride);
	qp->max_send_sge = init->cap.max_send_sge;
	qp->max_recv_sge = init->cap.max_recv_sge;
	qp->max_inline = init->cap.max_inline_data;

	uc = rdma_udata_to_drv_context(udata, struct mbcf_ucontext, ibuc);
	err = mbcf_qp_alloc_mem(qp, &uc->ibuc, sq_n, sq_stride, rq_n, rq_stride);
	if (err)
		goto err_count;

	/* QPN 0 and 1 are special in verbs; 24 bits on the wire. */
	err = xa_alloc_cyclic(&dev->qp_xa, &qpn, NULL, XA_LIMIT(2, MBCF_QPN_MASK),
			      &dev->qp_next, GFP_KERNEL);
	if (err < 0)
		goto err_mem;
	ibqp->qp_num = qpn;

	mbcf_qp_ring_info(&resp.sq, qp->sq_umap, &qp->sq);
	mbcf_qp_ring_info(&resp.rq, qp->rq_umap, &qp->rq);
	err = ib_copy_to_udata(udata, &resp, sizeof(resp));
	if (err)
		goto err_xa;
	/* Visible to the receive path only now, fully built (RCU). */
	xa_store(&dev->qp_xa, qpn, qp, GFP_KERNEL);
	return 0;

err_xa:
	xa_erase(&dev->qp_xa, qpn);
err_mem:
	mbcf_qp_free_mem(qp);
err_count:
	atomic_dec(&dev->qp_count);
	return err;
}

int mbcf_qp_destroy(struct ib_qp *ibqp, struct ib_udata *udata)
{
	struct mbcf_qp *qp = to_mbcf_qp(ibqp);
	struct mbcf_dev *dev = qp->dev;

	spin_lock_bh(&qp->lock);
	qp->dying = true;
	if (qp->conn.state != MBCF_CONN_RESET)
		mbcf_conn_flush(&qp->conn);
	mbcf_net_unlock(qp, true);	/* sends the ACK the flush may owe */

	hrtimer_cancel(&qp->timer);
	xa_erase(&dev->qp_xa, ibqp->qp_num);
	synchronize_rcu();	/* no frame handler still holds qp */
	mbcf_net_qp_purge(qp);	/* nothing should be left; never leak */
	mbcf_stats_retire(dev, &qp->conn.ctr);

	mbcf_qp_free_mem(qp);
	atomic_dec(&dev->qp_count);
	return 0;
}

/* ---- modify / query ---------------------------------------------------- */

/*
 * A verbs responder may stay in RTR and never get the RTS attributes, yet
 * its read and atomic responses travel on its own reliable stream: give
 * that stream sane retransmission defaults until RTS sets the real ones.
 */
static void mbcf_qp_default_attrs(struct mbcf_qp *qp)
{
	memset(&qp->attr, 0, sizeof(qp->attr));
	qp->attr.timeout = 14;		/* 67 ms */
	qp->attr.retry_cnt = 7;
	qp->attr.rnr_retry = 7;
}

/* IB spec 9.7.6.1.2: the RNR NAK timer field, in microseconds. */
static const u32 mbcf_qp_rnr_us[32] = {
	655360, 10, 20, 30, 40, 60, 80, 120, 160, 240, 320, 480, 640, 960,
	1280, 1920, 2560, 3840, 5120, 7680, 10240, 15360, 20480, 30720,
	40960, 61440, 81920, 122880, 163840, 245760, 327680, 491520,
};

/* Local ACK timeout: 4.096 us * 2^timeout; 0 (infinite) -> about 1 s. */
static u64 mbcf_qp_rto_ns(u8 timeout)
{
	if (!timeout)
		timeout = 18;
	return 4096ull << min_t(u8, timeout, 31);
}

static int mbcf_qp_save_attrs(struct mbcf_qp *qp, struct ib_qp_attr *attr,
			      int mask)
{
	struct ib_qp_attr *a = &qp->attr;

	if (mask & IB_QP_ACCESS_FLAGS)
		a->qp_access_flags = attr->qp_access_flags;
	if (mask & IB_QP_PKEY_INDEX && attr->pkey_index)
		return -EINVAL;
	if (mask & IB_QP_PORT && attr->port_num != 1)
		return -EINVAL;
	if (mask & IB_QP_PATH_MTU)
		a->path_mtu = attr->path_mtu;
	if (mask & IB_QP_AV) {
		a->ah_attr = attr->ah_attr;
		memcpy(qp->dmac, rdma_ah_retrieve_dmac(&attr->ah_attr), ETH_ALEN);
	}
	if (mask & IB_QP_DEST_QPN)
		qp->dest_qpn = a->dest_qp_num = attr->dest_qp_num & MBCF_QPN_MASK;
	if (mask & IB_QP_RQ_PSN)
		a->rq_psn = attr->rq_psn & MBCF_PSN_MASK;
	if (mask & IB_QP_SQ_PSN)
		a->sq_psn = attr->sq_psn & MBCF_PSN_MASK;
	if (mask & IB_QP_MAX_DEST_RD_ATOMIC) {
		if (attr->max_dest_rd_atomic > MBCF_MAX_RD_ATOMIC)
			return -EINVAL;
		a->max_dest_rd_atomic = attr->max_dest_rd_atomic;
	}
	if (mask & IB_QP_MAX_QP_RD_ATOMIC) {
		if (attr->max_rd_atomic > MBCF_MAX_RD_ATOMIC)
			return -EINVAL;
		a->max_rd_atomic = attr->max_rd_atomic;
	}
	if (mask & IB_QP_MIN_RNR_TIMER)
		a->min_rnr_timer = attr->min_rnr_timer & 31;
	if (mask & IB_QP_TIMEOUT)
		a->timeout = attr->timeout;
	if (mask & IB_QP_RETRY_CNT)
		a->retry_cnt = min_t(u8, attr->retry_cnt, 7);
	if (mask & IB_QP_RNR_RETRY)
		a->rnr_retry = min_t(u8, attr->rnr_retry, 7);
	return 0;
}

/* The core's view of the connection, from the verbs attributes. */
static void mbcf_qp_conn_cfg(struct mbcf_qp *qp, struct mbcf_conn_cfg *cfg)
{
	const struct ib_qp_attr *a = &qp->attr;

	memset(cfg, 0, sizeof(*cfg));
	cfg->local_qpn = qp->ibqp.qp_num;
	cfg->remote_qpn = qp->dest_qpn;
	cfg->sq_psn = a->sq_psn;
	cfg->rq_psn = a->rq_psn;
	cfg->mtu = READ_ONCE(qp->dev->ndev->mtu);
	cfg->window = mbcf_window;
	cfg->link_mbps = qp->dev->link_mbps;
	cfg->ack_interval = mbcf_ack_interval;
	cfg->retry_cnt = a->retry_cnt;
	cfg->rnr_retry = a->rnr_retry;
	cfg->max_rd_atomic = max_t(u32, a->max_rd_atomic, 1);
	cfg->max_dest_rd_atomic = clamp_t(u32, a->max_dest_rd_atomic, 1, qp->resp_size);
	cfg->rto_ns = mbcf_qp_rto_ns(a->timeout);
	cfg->min_rnr_ns = (u64)mbcf_qp_rnr_us[a->min_rnr_timer] * NSEC_PER_USEC;
}

static int mbcf_qp_transition(struct mbcf_qp *qp, enum ib_qp_state next)
{
	struct mbcf_conn_cfg cfg;
	int err;

	switch (next) {
	case IB_QPS_RESET:
		if (qp->conn.state != MBCF_CONN_RESET)
			mbcf_conn_flush(&qp->conn);
		/* Discard what the rings hold, as a reset QP has no WQEs. */
		/* Consume, never rewind: the provider keeps its own index. */
		qp->sq.idx = mbcf_ring_load_acquire(mbcf_ring_prod(&qp->sq));
		qp->rq.idx = mbcf_ring_load_acquire(mbcf_ring_prod(&qp->rq));
		mbcf_ring_store_release(mbcf_ring_cons(&qp->sq), qp->sq.idx);
		mbcf_ring_store_release(mbcf_ring_cons(&qp->rq), qp->rq.idx);
		qp->sq.rd = qp->sq.idx;
		qp->rq.rd = qp->rq.idx;
		qp->failed_valid = false;
		mbcf_qp_default_attrs(qp);
		break;
	case IB_QPS_INIT:
		break;
	case IB_QPS_RTR:
		/* The receive side starts now; the send side at RTS. */
		mbcf_qp_conn_cfg(qp, &cfg);
		err = mbcf_conn_init(&qp->conn, &cfg, &mbcf_proto_ops, qp,
				     qp->req_msgs, qp->sq.mask + 1,
				     qp->resp_msgs, qp->resp_size);
		if (err)
			return -EINVAL;
		break;
	case IB_QPS_RTS:
		mbcf_qp_conn_cfg(qp, &cfg);
		if (mbcf_conn_set_send(&qp->conn, &cfg))
			return -EINVAL;
		break;
	case IB_QPS_ERR:
		mbcf_qp_to_error(qp);
		break;
	default:
		return -EOPNOTSUPP;	/* SQD, SQE: not implemented */
	}
	qp->state = next;
	return 0;
}

int mbcf_qp_modify(struct ib_qp *ibqp, struct ib_qp_attr *attr, int mask,
		   struct ib_udata *udata)
{
	struct mbcf_qp *qp = to_mbcf_qp(ibqp);
	enum ib_qp_state cur, next;
	int err;

	if (mask & ~IB_QP_ATTR_STANDARD_BITS)
		return -EOPNOTSUPP;
	if (udata && udata->inlen)
		return -EINVAL;
	if (mask & IB_QP_RATE_LIMIT)
		return -EOPNOTSUPP;	/* pacing comes later */

	spin_lock_bh(&qp->lock);
	cur = mask & IB_QP_CUR_STATE ? attr->cur_qp_state : qp->state;
	next = mask & IB_QP_STATE ? attr->qp_state : cur;
	err = -EINVAL;
	if (cur != qp->state ||
	    !ib_modify_qp_is_ok(cur, next, IB_QPT_RC, mask))
		goto out;
	if (mask & IB_QP_MAX_DEST_RD_ATOMIC && cur != IB_QPS_INIT)
		goto out;	/* the responder ring is sized at RTR */
	err = mbcf_qp_save_attrs(qp, attr, mask);
	if (err)
		goto out;
	if (next != cur || next == IB_QPS_RESET)
		err = mbcf_qp_transition(qp, next);
	if (!err)
		mbcf_qp_settle(qp, mbcf_proto_now());
out:
	mbcf_net_unlock(qp, true);
	return err;
}

int mbcf_qp_query(struct ib_qp *ibqp, struct ib_qp_attr *attr, int mask,
		  struct ib_qp_init_attr *init)
{
	struct mbcf_qp *qp = to_mbcf_qp(ibqp);

	spin_lock_bh(&qp->lock);
	*attr = qp->attr;
	attr->qp_state = attr->cur_qp_state = qp->state;
	attr->port_num = 1;
	attr->cap.max_send_wr = qp->sq.mask + 1;
	attr->cap.max_recv_wr = qp->rq.mask + 1;
	attr->cap.max_send_sge = qp->max_send_sge;
	attr->cap.max_recv_sge = qp->max_recv_sge;
	attr->cap.max_inline_data = qp->max_inline;
	spin_unlock_bh(&qp->lock);

	memset(init, 0, sizeof(*init));
	init->qp_type = IB_QPT_RC;
	init->send_cq = ibqp->send_cq;
	init->recv_cq = ibqp->recv_cq;
	init->cap = attr->cap;
	init->sq_sig_type = qp->sq_sig_all ? IB_SIGNAL_ALL_WR : IB_SIGNAL_REQ_WR;
	return 0;
}
