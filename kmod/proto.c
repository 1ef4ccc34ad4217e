// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * The protocol core's environment: struct mbcf_ops for one QP.  `env` is
 * the struct mbcf_qp; every callback runs inside a core call made by qp.c
 * under qp->lock, and must not call back into the core: what a callback
 * makes necessary (an error, a failed request) it records in qp->pend, and
 * qp.c acts on it once the core call has returned.
 *
 * Target memory is reached through mr.c, which checks key, PD, access and
 * bounds before touching a byte; this is where MBCF's "the receiving CPU
 * completes the operation while it receives the frame" happens.  The
 * requests' own buffers are reached through wr.c.  A frame is built by
 * net.c, its payload copied in or, if zc.c says it is worth it, attached
 * as the pages that hold it.
 */
#include <linux/jiffies.h>
#include <linux/ktime.h>
#include <linux/lockdep.h>

#include "mbcf.h"
#include "zc.h"

static struct mbcf_qp *mbcf_proto_qp(void *env)
{
	struct mbcf_qp *qp = env;

	lockdep_assert_held(&qp->lock);
	return qp;
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

/* A payload's bytes, copied into the frame (net.c's fill callback). */
struct mbcf_proto_payload {
	struct mbcf_qp *qp;
	const struct mbcf_payload *pl;
};

static int mbcf_proto_fill(void *from, u8 *to, u32 off, u32 len)
{
	struct mbcf_proto_payload *p = from;
	struct mbcf_payload piece = *p->pl;

	if (off || len != piece.len) {	/* a piece of it (net.c) */
		piece.offset += off;
		piece.va += off;
		piece.len = len;
	}
	return mbcf_wr_payload_copy(p->qp, &piece, to) ? -EFAULT : 0;
}

/*
 * A payload's pages as the frame's fragments (zc.c), if they are one
 * MR's and few enough: 0, -ENOMEM (nothing queued), or anything else to
 * copy instead (too many pieces, or an access error the copy reports).
 */
static int mbcf_proto_xmit_pages(struct mbcf_qp *qp, const u8 *hdr,
				 u32 hdr_len, const struct mbcf_payload *pl)
{
	struct mbcf_spans sp;
	int err;

	mbcf_zc_spans_init(&sp);
	err = mbcf_wr_payload_pages(qp, pl, &sp);
	if (!err && sp.zc)
		err = mbcf_net_xmit_pages(qp, hdr, hdr_len, &sp, pl->len);
	else
		err = err ?: -E2BIG;
	mbcf_zc_spans_put(&sp);		/* what no frame took */
	return err;
}

/*
 * A frame for the netdev, queued on the QP and sent by qp.c once the lock
 * is dropped.  Sequenced frames are refused as busy beyond a burst: the
 * core holds them back until qp.c kicks it from process context.  A frame
 * whose payload cannot be read any more (its memory was deregistered under
 * a request or a read response in flight) is not sent at all, and the QP
 * fails (MBCF_XMIT_FAULT): the core completes the request it belongs to
 * with LOC_PROT_ERR, or NAKs the read whose response it was (remote
 * access error: the requester learns at once) -- a header-only frame.
 * Running out of memory loses the frame (go-back-N recovers).
 */
static int mbcf_proto_xmit(void *env, const u8 *hdr, u32 hdr_len,
			   const struct mbcf_payload *pl)
{
	struct mbcf_qp *qp = mbcf_proto_qp(env);
	struct mbcf_proto_payload from = { qp, pl };
	u32 plen = pl ? pl->len : 0;
	int err;

	if (mbcf_net_queued(qp) >= MBCF_QP_TX_BURST &&
	    mbcf_wire_op_sequenced(hdr[MBCF_OFF_OPCODE]))
		return -EBUSY;
	if (plen && mbcf_zc_worth(qp->dev, plen) &&
	    mbcf_wr_payload_in_pages(qp, pl)) {
		err = mbcf_proto_xmit_pages(qp, hdr, hdr_len, pl);
		if (!err || err == -ENOMEM)
			return 0;	/* sent, or lost like a dropped frame */
	}
	err = mbcf_net_xmit_fill(qp, hdr, hdr_len, plen, mbcf_proto_fill, &from);
	if (err == -EFAULT) {
		qp->pend |= MBCF_QP_PEND_ERROR;
		return MBCF_XMIT_FAULT;
	}
	return 0;	/* sent, or lost like a dropped frame */
}

static int mbcf_proto_target_write(void *env, u32 rkey, u64 va, const u8 *src,
				   u32 len)
{
	struct mbcf_qp *qp = mbcf_proto_qp(env);

	if (!mbcf_proto_qp_allows(qp, IB_ACCESS_REMOTE_WRITE))
		return MBCF_ST_REMOTE_ACCESS_ERROR;
	return mbcf_proto_status(mbcf_mr_copy_in(qp, rkey, va, src, len,
						 IB_ACCESS_REMOTE_WRITE));
}

static int mbcf_proto_target_check_write(void *env, u32 rkey, u64 va, u32 len)
{
	struct mbcf_qp *qp = mbcf_proto_qp(env);

	if (!mbcf_proto_qp_allows(qp, IB_ACCESS_REMOTE_WRITE))
		return MBCF_ST_REMOTE_ACCESS_ERROR;
	/* the key resolved and checked as mbcf_mr_copy_in() does (memory
	 * windows too): pages pinned without write access are never written */
	return mbcf_proto_status(mbcf_mr_check(qp, rkey, va, len,
					       IB_ACCESS_REMOTE_WRITE |
					       IB_ACCESS_LOCAL_WRITE));
}

static int mbcf_proto_target_check_read(void *env, u32 rkey, u64 va, u32 len)
{
	struct mbcf_qp *qp = mbcf_proto_qp(env);

	if (!mbcf_proto_qp_allows(qp, IB_ACCESS_REMOTE_READ))
		return MBCF_ST_REMOTE_ACCESS_ERROR;
	return mbcf_proto_status(mbcf_mr_check(qp, rkey, va, len,
					       IB_ACCESS_REMOTE_READ));
}

static int mbcf_proto_target_atomic(void *env, u8 op, u32 rkey, u64 va,
				    u64 swap_add, u64 compare, u64 *orig)
{
	struct mbcf_qp *qp = mbcf_proto_qp(env);
	int err;

	if (!mbcf_proto_qp_allows(qp, IB_ACCESS_REMOTE_ATOMIC))
		return MBCF_ST_REMOTE_ACCESS_ERROR;
	err = mbcf_mr_atomic(qp, rkey, va, op == MBCF_OP_CMP_SWAP, swap_add,
			     compare, orig);
	if (err == -EINVAL)
		return MBCF_ST_REMOTE_INVALID_REQUEST;	/* misaligned */
	return mbcf_proto_status(err);
}

static int mbcf_proto_recv_claim(void *env, u64 *cookie, u32 *cap)
{
	return mbcf_wr_claim_recv(mbcf_proto_qp(env), cookie, cap);
}

static int mbcf_proto_recv_peek(void *env, u32 *cap)
{
	return mbcf_wr_peek_recv(mbcf_proto_qp(env), cap);
}

static int mbcf_proto_recv_write(void *env, u64 cookie, u32 offset,
				 const u8 *src, u32 len)
{
	return mbcf_wr_scatter_recv(mbcf_proto_qp(env), cookie, offset, src, len);
}

static int mbcf_proto_resp_data(void *env, u64 cookie, u32 offset,
				const u8 *src, u32 len)
{
	return mbcf_wr_scatter_resp(mbcf_proto_qp(env), cookie, offset, src, len);
}

static int mbcf_proto_complete(void *env, const struct mbcf_cqe *c)
{
	return mbcf_wr_complete(mbcf_proto_qp(env), c);
}

/*
 * The core's deadlines -- the retransmission timeout, the tail probe, the
 * end of an RNR wait -- are lower bounds, and a tick late still beats the
 * verbs timeout by far.  With a tick of slack the timer expires with the
 * interrupt already programmed for the tick, instead of becoming the next
 * event and reprogramming the clock event device twice per message in a
 * ping-pong (the tail probe, ~100 us ahead, is armed with the request and
 * dropped by the answer).  docs/performance.md has what exact arming
 * cost.
 */
static void mbcf_proto_timer_arm(void *env, u64 at)
{
	struct mbcf_qp *qp = mbcf_proto_qp(env);

	/*
	 * The core takes an early or spurious call calmly (mbcf_conn_timeout
	 * forgets its deadline and re-arms for what is still due), so a
	 * timer already queued no later than @at is left as it is, and one
	 * no longer needed is not cancelled: with requests in flight every
	 * answer moves the deadline later, and each move was a dequeue and
	 * an enqueue (three per NVMe-oF 4 KiB read, three per atomic).  An
	 * idle QP's timer fires once more and stays off; destroy cancels it
	 * (qp.c).
	 */
	if (!at || (hrtimer_is_queued(&qp->timer) &&
		    ktime_to_ns(hrtimer_get_softexpires(&qp->timer)) <= at))
		return;
	hrtimer_start_range_ns(&qp->timer, ns_to_ktime(at), TICK_NSEC,
			       HRTIMER_MODE_ABS_SOFT);
}

/* The core entered its error state: qp.c moves the QP and flushes. */
static void mbcf_proto_error(void *env, u8 wc_status)
{
	mbcf_proto_qp(env)->pend |= MBCF_QP_PEND_ERROR;
}

/* A memory window bind or a local invalidate, when its turn comes. */
static int mbcf_proto_local(void *env, u64 cookie)
{
	return mbcf_wr_local(mbcf_proto_qp(env), cookie);
}

/* SEND_INV at the responder. */
static int mbcf_proto_invalidate(void *env, u32 rkey)
{
	struct mbcf_qp *qp = mbcf_proto_qp(env);
	int err = mbcf_frmr_invalidate(qp, rkey, true);	/* an FRWR MR's */

	if (err == -ENOENT)
		err = mbcf_mw_invalidate(qp, rkey, true);
	return err ? MBCF_ST_REMOTE_INVALID_REQUEST : MBCF_ST_OK;
}

/* FIFO_PUSH at the responder: fifo.c finds and holds the FIFO. */
static int mbcf_proto_fifo_get(void *env, u32 fkey, struct mbcf_fifo *f)
{
	return mbcf_fifo_get(mbcf_proto_qp(env), fkey, f);
}

static void mbcf_proto_fifo_put(void *env, struct mbcf_fifo *f)
{
	mbcf_fifo_put(mbcf_proto_qp(env));
}

const struct mbcf_ops mbcf_proto_ops = {
	.xmit = mbcf_proto_xmit,
	.target_write = mbcf_proto_target_write,
	.target_check_write = mbcf_proto_target_check_write,
	.target_check_read = mbcf_proto_target_check_read,
	.target_atomic = mbcf_proto_target_atomic,
	.recv_claim = mbcf_proto_recv_claim,
	.recv_peek = mbcf_proto_recv_peek,
	.recv_write = mbcf_proto_recv_write,
	.resp_data = mbcf_proto_resp_data,
	.complete = mbcf_proto_complete,
	.timer = mbcf_proto_timer_arm,
	.error = mbcf_proto_error,
	.local = mbcf_proto_local,
	.invalidate = mbcf_proto_invalidate,
	.fifo_get = mbcf_proto_fifo_get,
	.fifo_put = mbcf_proto_fifo_put,
};
