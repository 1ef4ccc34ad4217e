// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * The protocol core's environment: struct mbcf_ops for one QP.  `env` is
 * the struct mbcf_qp; every callback runs inside a core call, under
 * qp->lock, and must not call back into the core (mbcf_qp_settle() does
 * the follow-up work afterwards).
 *
 * Target memory is reached through mr.c, which checks key, PD, access and
 * bounds before touching a byte; this is where MBCF's "the receiving CPU
 * completes the operation while it receives the frame" happens.
 */
#include <linux/etherdevice.h>
#include <linux/ktime.h>

#include "mbcf.h"

u64 mbcf_proto_now(void)
{
	return ktime_get_ns();
}

static int mbcf_proto_status(int err)
{
	return err ? MBCF_ST_REMOTE_ACCESS_ERROR : MBCF_ST_OK;
}

/* The QP must allow the remote operation too, not only the MR (verbs). */
static bool mbcf_proto_qp_allows(struct mbcf_qp *qp, int access)
{
	return (qp->attr.qp_access_flags & access) == access;
}

static int mbcf_proto_xmit(void *env, const u8 *hdr, u32 hdr_len,
			   const struct mbcf_payload *pl)
{
	return mbcf_net_xmit(env, hdr, hdr_len, pl);
}

static int mbcf_proto_target_write(void *env, u32 rkey, u64 va, const u8 *src,
				   u32 len)
{
	struct mbcf_qp *qp = env;

	if (!mbcf_proto_qp_allows(qp, IB_ACCESS_REMOTE_WRITE))
		return MBCF_ST_REMOTE_ACCESS_ERROR;
	return mbcf_proto_status(mbcf_mr_copy_in(qp->dev, qp->ibqp.pd, rkey, va,
						 src, len, IB_ACCESS_REMOTE_WRITE));
}

static int mbcf_proto_target_check_read(void *env, u32 rkey, u64 va, u32 len)
{
	struct mbcf_qp *qp = env;

	if (!mbcf_proto_qp_allows(qp, IB_ACCESS_REMOTE_READ))
		return MBCF_ST_REMOTE_ACCESS_ERROR;
	return mbcf_proto_status(mbcf_mr_check(qp->dev, qp->ibqp.pd, rkey, va,
					       len, IB_ACCESS_REMOTE_READ));
}

static int mbcf_proto_target_atomic(void *env, u8 op, u32 rkey, u64 va,
				    u64 swap_add, u64 compare, u64 *orig)
{
	struct mbcf_qp *qp = env;
	int err;

	if (!mbcf_proto_qp_allows(qp, IB_ACCESS_REMOTE_ATOMIC))
		return MBCF_ST_REMOTE_ACCESS_ERROR;
	err = mbcf_mr_atomic(qp->dev, qp->ibqp.pd, rkey, va,
			     op == MBCF_OP_CMP_SWAP, swap_add, compare, orig);
	if (err == -EINVAL)
		return MBCF_ST_REMOTE_INVALID_REQUEST;	/* misaligned */
	return mbcf_proto_status(err);
}

/* Take the oldest posted receive out of the ring into our private FIFO. */
static int mbcf_proto_recv_claim(void *env, u64 *cookie, u32 *cap)
{
	struct mbcf_qp *qp = env;
	struct mbcf_recv_wqe *w;
	struct mbcf_sge *sge;
	bool corrupt;
	u64 total = 0;
	void *e;
	u32 i;

	for (;;) {
		e = mbcf_ring_consume_slot(&qp->rq, &corrupt);
		if (e)
			break;
		if (corrupt || mbcf_ring_consumer_idle(&qp->rq))
			return -ENOENT;	/* the core sends STOP */
	}
	/* The slot stays taken until the receive completes. */
	w = mbcf_qp_rq_wqe(qp, qp->rq.rd);
	memcpy(w, e, qp->rq.stride);
	*cookie = qp->rq.rd;
	mbcf_ring_read_next(&qp->rq);

	if (w->num_sge > qp->max_recv_sge) {
		w->num_sge = 0;		/* nothing can land; LOC_LEN on use */
		qp->rx_bad = true;
	}
	sge = (struct mbcf_sge *)(w + 1);
	for (i = 0; i < w->num_sge; i++)
		total += sge[i].length;
	*cap = min_t(u64, total, MBCF_MAX_MSG_SIZE);
	return 0;
}

static void mbcf_proto_recv_write(void *env, u64 cookie, u32 offset,
				  const u8 *src, u32 len)
{
	struct mbcf_qp *qp = env;
	struct mbcf_recv_wqe *w = mbcf_qp_rq_wqe(qp, cookie);

	if (mbcf_mr_scatter(qp->dev, qp->ibqp.pd, (struct mbcf_sge *)(w + 1),
			    w->num_sge, offset, src, len))
		qp->rx_bad = true;	/* completes with LOC_PROT_ERR */
}

static int mbcf_proto_resp_data(void *env, u64 cookie, u32 offset,
				const u8 *src, u32 len)
{
	struct mbcf_qp *qp = env;
	struct mbcf_send_wqe *w = mbcf_qp_sq_wqe(qp, cookie);

	return mbcf_mr_scatter(qp->dev, qp->ibqp.pd, (struct mbcf_sge *)(w + 1),
			       w->num_sge, offset, src, len);
}

static const u8 mbcf_proto_wc_status[] = {
	[MBCF_WC_SUCCESS] = IB_WC_SUCCESS,
	[MBCF_WC_REM_ACCESS_ERR] = IB_WC_REM_ACCESS_ERR,
	[MBCF_WC_REM_INV_REQ_ERR] = IB_WC_REM_INV_REQ_ERR,
	[MBCF_WC_REM_OP_ERR] = IB_WC_REM_OP_ERR,
	[MBCF_WC_RETRY_EXC_ERR] = IB_WC_RETRY_EXC_ERR,
	[MBCF_WC_RNR_RETRY_EXC_ERR] = IB_WC_RNR_RETRY_EXC_ERR,
	[MBCF_WC_LOC_LEN_ERR] = IB_WC_LOC_LEN_ERR,
	[MBCF_WC_LOC_PROT_ERR] = IB_WC_LOC_PROT_ERR,
	[MBCF_WC_WR_FLUSH_ERR] = IB_WC_WR_FLUSH_ERR,
};

static u8 mbcf_proto_map_status(u8 st)
{
	return st < ARRAY_SIZE(mbcf_proto_wc_status) ?
	       mbcf_proto_wc_status[st] : IB_WC_GENERAL_ERR;
}

static void mbcf_proto_complete_send(struct mbcf_qp *qp,
				     const struct mbcf_cqe *c,
				     struct ib_uverbs_wc *wc)
{
	struct mbcf_send_wqe *w = mbcf_qp_sq_wqe(qp, c->cookie);

	/* The core completes in posting order: the oldest slot held. */
	WARN_ON_ONCE((u32)c->cookie != qp->sq.idx);
	mbcf_ring_release(&qp->sq, 1);
	wc->wr_id = w->wr_id;
	wc->opcode = mbcf_qp_send_wc_opcode(qp, c->cookie);
	if (wc->opcode == IB_WC_RDMA_READ)
		wc->byte_len = c->byte_len;
	else if (wc->opcode == IB_WC_COMP_SWAP || wc->opcode == IB_WC_FETCH_ADD)
		wc->byte_len = 8;
	if (wc->status == IB_WC_SUCCESS && !qp->sq_sig_all &&
	    !(w->send_flags & IB_SEND_SIGNALED))
		return;		/* unsignaled: the slot is free, no CQE */
	if (!qp->dying)
		mbcf_cq_push(to_mbcf_cq(qp->ibqp.send_cq), wc, false);
}

static void mbcf_proto_complete_recv(struct mbcf_qp *qp,
				     const struct mbcf_cqe *c,
				     struct ib_uverbs_wc *wc)
{
	struct mbcf_recv_wqe *w = mbcf_qp_rq_wqe(qp, c->cookie);

	WARN_ON_ONCE((u32)c->cookie != qp->rq.idx);
	mbcf_ring_release(&qp->rq, 1);
	wc->wr_id = w->wr_id;
	wc->byte_len = c->byte_len;
	wc->opcode = c->op == MBCF_OP_WRITE_IMM ? IB_WC_RECV_RDMA_WITH_IMM :
						  IB_WC_RECV;
	if (c->flags & MBCF_CQE_IMM) {
		wc->ex.imm_data = (__force __u32)cpu_to_be32(c->imm);
		wc->wc_flags |= IB_WC_WITH_IMM;
	}
	wc->src_qp = qp->dest_qpn;
	if (wc->status == IB_WC_SUCCESS && qp->rx_bad) {
		wc->status = IB_WC_LOC_PROT_ERR;
		qp->conn_failed = IB_WC_LOC_PROT_ERR;	/* QP to error after */
	}
	qp->rx_bad = false;
	if (!qp->dying)
		mbcf_cq_push(to_mbcf_cq(qp->ibqp.recv_cq), wc,
			     c->flags & MBCF_CQE_SOLICITED);
}

static void mbcf_proto_complete(void *env, const struct mbcf_cqe *c)
{
	struct mbcf_qp *qp = env;
	struct ib_uverbs_wc wc = {
		.status = mbcf_proto_map_status(c->status),
		.qp_num = qp->ibqp.qp_num,
	};

	if (c->flags & MBCF_CQE_RECV)
		mbcf_proto_complete_recv(qp, c, &wc);
	else
		mbcf_proto_complete_send(qp, c, &wc);
}

static void mbcf_proto_timer_arm(void *env, u64 at)
{
	struct mbcf_qp *qp = env;

	if (!at)
		hrtimer_try_to_cancel(&qp->timer);
	else
		hrtimer_start(&qp->timer, ns_to_ktime(at), HRTIMER_MODE_ABS_SOFT);
}

/* The core entered its error state; mbcf_qp_settle() flushes the rings. */
static void mbcf_proto_error(void *env, u8 wc_status)
{
	struct mbcf_qp *qp = env;

	qp->state = IB_QPS_ERR;
}

const struct mbcf_ops mbcf_proto_ops = {
	.xmit = mbcf_proto_xmit,
	.target_write = mbcf_proto_target_write,
	.target_check_read = mbcf_proto_target_check_read,
	.target_atomic = mbcf_proto_target_atomic,
	.recv_claim = mbcf_proto_recv_claim,
	.recv_write = mbcf_proto_recv_write,
	.resp_data = mbcf_proto_resp_data,
	.complete = mbcf_proto_complete,
	.timer = mbcf_proto_timer_arm,
	.error = mbcf_proto_error,
};

enum hrtimer_restart mbcf_proto_timer(struct hrtimer *t)
{
	struct mbcf_qp *qp = container_of(t, struct mbcf_qp, timer);
	u64 now = mbcf_proto_now();

	spin_lock_bh(&qp->lock);
	if (!qp->dying && qp->conn.state == MBCF_CONN_RTS) {
		mbcf_conn_timeout(&qp->conn, now);
		mbcf_qp_settle(qp, now);
	}
	mbcf_net_unlock(qp, true);
	return HRTIMER_NORESTART;
}

/*
 * A parsed frame from the wire (NET_RX softirq).  It must name a QP of
 * this device that is past INIT and connected to the frame's sender.
 */
void mbcf_proto_rx(struct mbcf_dev *dev, const struct mbcf_frame *f,
		   const u8 *src_mac)
{
	struct mbcf_qp *qp;
	bool owed = false;
	u64 now;

	rcu_read_lock();
	qp = xa_load(&dev->qp_xa, f->dst_qpn);
	if (unlikely(!qp)) {
		this_cpu_inc(dev->rx_ctr->drop_wrong_qp);
		goto out;
	}
	spin_lock(&qp->lock);
	/*
	 * A conn in ERROR still answers (a lost NAK is repeated).  The core
	 * checks (and counts) the QP numbers; only the MAC is ours to check.
	 */
	if (unlikely(qp->dying || qp->conn.state == MBCF_CONN_RESET ||
		     !ether_addr_equal(src_mac, qp->dmac))) {
		this_cpu_inc(dev->rx_ctr->drop_wrong_qp);
	} else {
		now = mbcf_proto_now();
		owed = mbcf_conn_rx_hold_ack(&qp->conn, f, now);
		mbcf_qp_settle(qp, now);
	}
	mbcf_net_unlock(qp, false);
	/*
	 * The ACK goes out only now, if still owed: a doorbell that was
	 * spinning on the lock -- in a ping-pong, the application reacting
	 * to the data just placed -- got it first, and its frame carries the
	 * acknowledgement.  Saves an ACK frame each way, and shortens the
	 * time the lock is held after the data became visible.
	 */
	if (owed) {
		spin_lock(&qp->lock);
		if (!qp->dying && qp->conn.state == MBCF_CONN_RTS) {
			now = mbcf_proto_now();
			mbcf_conn_kick(&qp->conn, now);
			mbcf_qp_settle(qp, now);
		}
		mbcf_net_unlock(qp, false);
	}
out:
	rcu_read_unlock();
}
