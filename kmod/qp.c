// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Queue pairs: the verbs (create/modify/query/destroy), the doorbells, and
 * every other way into a QP's protocol core: frames from the wire, the
 * retransmit timer, the transmit work.  This is the one file that takes
 * and releases qp->lock.
 *
 * Each entry point takes the lock, calls the core, then mbcf_qp_settle():
 * core callbacks (proto.c) cannot call back into the core, so what they
 * make necessary is recorded in qp->pend and done there, after the core
 * call returned -- moving to the error state, completing a request that
 * failed its checks, pulling more requests from the send ring (wr.c).
 * mbcf_qp_unlock() then sends the frames the core built (net.c) with the
 * lock dropped, and raises the QP's asynchronous event if one is due.
 *
 * Lifetime: the receive path finds a QP through dev->qp_xa under RCU and
 * holds a reference (struct mbcf_qp_ref) while it uses it; destroy
 * unpublishes the QP and waits for those users only, never for an RCU
 * grace period, so tearing down thousands of QPs stays fast.
 */
#include <linux/etherdevice.h>
#include <linux/log2.h>
#include <linux/slab.h>
#include <linux/workqueue.h>
#include <rdma/uverbs_ioctl.h>

#include "mbcf.h"

#define MBCF_QP_RESP_SLOTS	roundup_pow_of_two(MBCF_MAX_RD_ATOMIC)
#define MBCF_QP_LOOP_MTU	9000	/* frames to this device itself */

static void mbcf_qp_default_attrs(struct mbcf_qp *qp);

/* ---- the lock, and what happens around every core call ------------------- */

static void mbcf_qp_event(struct mbcf_qp *qp, enum ib_event_type type)
{
	struct ib_event ev = {
		.device = qp->ibqp.device,
		.element.qp = &qp->ibqp,
		.event = type,
	};

	if (qp->ibqp.event_handler)
		qp->ibqp.event_handler(&ev, qp->ibqp.qp_context);
}

/*
 * The asynchronous events recorded in qp->pend (no lock held).  A broken
 * SRQ ring (wr.c) also fails the SRQ's other QPs, from process context
 * (srq.c), even if this QP is being destroyed.
 */
static void mbcf_qp_raise(struct mbcf_qp *qp, u8 events, bool dying)
{
	if (events & MBCF_QP_PEND_SRQ_ERR)
		mbcf_srq_broken(qp->srq);
	if (dying)
		return;
	if (events & MBCF_QP_PEND_SRQ_ERR)
		mbcf_srq_event(qp->srq, IB_EVENT_SRQ_ERR);
	if (events & MBCF_QP_PEND_SRQ_LIMIT)
		mbcf_srq_event(qp->srq, IB_EVENT_SRQ_LIMIT_REACHED);
	if (events & MBCF_QP_PEND_EVENT)
		mbcf_qp_event(qp, IB_EVENT_QP_FATAL);
	if (events & MBCF_QP_PEND_LAST_WQE)
		mbcf_qp_event(qp, IB_EVENT_QP_LAST_WQE_REACHED);
}

/*
 * Work the lock holder leaves for process context (tx_work).  A user's QP
 * (what its posts, its errors, its datagrams leave to do) queues it on the
 * ordinary system_wq, at normal priority beside everyone's tasks; only
 * kernel consumers' QPs (the CM's QP1, kernel ULPs) use system_highpri_wq.
 */
static void mbcf_qp_defer(struct mbcf_qp *qp)
{
	if (!qp->dying)
		queue_work(qp->kernel ? system_highpri_wq : system_wq,
			   &qp->tx_work);
}

/*
 * Move to the error state: whatever the core still holds completes (with
 * IB_WC_WR_FLUSH_ERR) unless the core failed by itself -- then it keeps
 * its ERROR state, to repeat its NAK to a peer that missed it (protocol.md
 * 8.3).  A request that failed its checks completes after those.
 */
static void mbcf_qp_to_error(struct mbcf_qp *qp)
{
	lockdep_assert_held(&qp->lock);
	if (qp->conn.state == MBCF_CONN_RTS)
		mbcf_conn_flush(&qp->conn);
	if (qp->pend & MBCF_QP_PEND_WQE)
		mbcf_wr_fail_head(qp);
	if (qp->pend & MBCF_QP_PEND_FATAL)
		qp->pend |= MBCF_QP_PEND_EVENT;
	qp->pend &= MBCF_QP_PEND_EVENTS;
	/* nothing more is taken from the SRQ: the claimed receive was
	 * flushed with the connection (verbs: last WQE reached) */
	if (qp->srq && qp->state != IB_QPS_ERR && qp->state != IB_QPS_RESET)
		qp->pend |= MBCF_QP_PEND_LAST_WQE;
	if (qp->state != IB_QPS_RESET)
		qp->state = IB_QPS_ERR;
}

/*
 * After every call into the core: act on what the callbacks recorded, then
 * feed the core from the send ring.
 */
static void mbcf_qp_settle(struct mbcf_qp *qp, u64 now)
{
	bool more = false;

	lockdep_assert_held(&qp->lock);
	if (qp->state == IB_QPS_RTS && !(qp->pend & ~MBCF_QP_PEND_EVENTS) &&
	    mbcf_wr_pull_sq(qp, &more) > 0 && !qp->ud) {
		mbcf_conn_kick(&qp->conn, now);
		/*
		 * Local requests and UC messages can all complete within the
		 * kick, and a burst of quiet (unsignaled) messages asks for no
		 * acknowledgement: then no ACK comes soon to pull the ring
		 * again.  Pull now, so an empty ring is marked idle (the next
		 * post rings the doorbell); requests posted meanwhile are
		 * kicked from process context.
		 */
		if (!(qp->pend & ~MBCF_QP_PEND_EVENTS) &&
		    !mbcf_conn_progress_due(&qp->conn) &&
		    mbcf_wr_pull_sq(qp, &more) > 0)
			mbcf_qp_defer(qp);
	}
	if (more)	/* a ring's worth, or a burst of datagrams, was taken */
		mbcf_qp_defer(qp);
	if (unlikely(qp->pend & MBCF_QP_PEND_WQE) &&
	    !mbcf_conn_outstanding(&qp->conn))
		mbcf_wr_fail_head(qp);
	if (unlikely(qp->pend & (MBCF_QP_PEND_ERROR | MBCF_QP_PEND_FATAL)))
		mbcf_qp_to_error(qp);
	if (qp->state == IB_QPS_ERR && mbcf_wr_flush(qp))
		mbcf_qp_defer(qp);
}

/* Let the core send what it held back, then settle. */
static void mbcf_qp_kick(struct mbcf_qp *qp)
{
	u64 now = mbcf_proto_now();

	lockdep_assert_held(&qp->lock);
	if (!qp->dying && qp->conn.state == MBCF_CONN_RTS)
		mbcf_conn_kick(&qp->conn, now);
	mbcf_qp_settle(qp, now);
}

/*
 * The link refused a frame of the stream (docs/protocol.md 7.7; qp->lock
 * held again): the core goes back to it after a hold, and what was queued
 * meanwhile from the round it left is dropped (net.c).
 */
static void mbcf_qp_refused(struct mbcf_qp *qp,
			    const struct mbcf_net_refused *ref)
{
	u64 now = mbcf_proto_now();

	lockdep_assert_held(&qp->lock);
	if (qp->dying || qp->conn.state != MBCF_CONN_RTS)
		return;
	mbcf_conn_refused(&qp->conn, ref->psn, ref->epoch, now);
	mbcf_net_drop_stale(qp);
	mbcf_qp_settle(qp, now);
}

/*
 * Drop qp->lock and hand the frames the core queued under it to the netdev.
 * One context at a time sends (tx_owner) and also sends what others queue
 * meanwhile, so frames leave in the order they were built.  When the core
 * held frames back (a burst was queued), @task contexts (process context)
 * kick it and go on sending; softirq contexts leave that to tx_work, so
 * a frame received never costs more than a burst.  Nor does a softirq
 * send for ever what other contexts keep queueing while it owns the
 * transmit: after MBCF_QP_TX_ROUNDS batches, tx_work sends the rest.  The
 * MR the hold kept (mr.c, mbcf_mr_use) is let go before each release of
 * the lock.
 */
static void mbcf_qp_unlock(struct mbcf_qp *qp, bool task)
	__releases(&qp->lock)
{
	struct mbcf_frames batch;
	unsigned int rounds = 0;
	bool dying;
	u8 events;
	u64 due;

	lockdep_assert_held(&qp->lock);
	while (!qp->tx_owner && mbcf_net_queued(qp)) {
		struct mbcf_net_refused ref = {};

		if (!task && rounds++ == MBCF_QP_TX_ROUNDS) {
			mbcf_qp_defer(qp);
			break;
		}
		qp->tx_owner = true;
		mbcf_net_take(qp, &batch);
		mbcf_mr_forget(qp);
		spin_unlock_bh(&qp->lock);
		mbcf_net_send(qp, &batch, &ref);
		if (task)
			cond_resched();
		spin_lock_bh(&qp->lock);
		qp->tx_owner = false;
		if (unlikely(ref.any))
			mbcf_qp_refused(qp, &ref);
		if (!qp->conn.tx_busy)
			continue;
		if (!task) {
			mbcf_qp_defer(qp);
			break;
		}
		mbcf_qp_kick(qp);
	}
	/* paced, and the next frame is not due yet: the pacer kicks us */
	if (qp->rate_kbps && mbcf_conn_pace_due(&qp->conn, &due))
		mbcf_pacer_wait(qp, due);
	events = qp->pend & MBCF_QP_PEND_EVENTS;
	dying = qp->dying;
	qp->pend &= ~MBCF_QP_PEND_EVENTS;
	mbcf_mr_forget(qp);
	spin_unlock_bh(&qp->lock);
	if (unlikely(events))
		mbcf_qp_raise(qp, events, dying);
}

/*
 * What a lock holder in softirq left for process context, and a kernel
 * consumer's posts (which may have been receives: GO after a STOP).
 */
static void mbcf_qp_tx_work(struct work_struct *work)
{
	struct mbcf_qp *qp = container_of(work, struct mbcf_qp, tx_work);

	spin_lock_bh(&qp->lock);
	if (qp->kernel && !qp->dying && qp->conn.state == MBCF_CONN_RTS)
		mbcf_conn_recv_posted(&qp->conn, mbcf_proto_now());
	mbcf_qp_kick(qp);
	mbcf_qp_unlock(qp, true);
}

static enum hrtimer_restart mbcf_qp_timer(struct hrtimer *t)
{
	struct mbcf_qp *qp = container_of(t, struct mbcf_qp, timer);
	u64 now = mbcf_proto_now();

	spin_lock_bh(&qp->lock);
	if (!qp->dying && qp->conn.state == MBCF_CONN_RTS) {
		mbcf_conn_timeout(&qp->conn, now);
		mbcf_qp_settle(qp, now);
	}
	mbcf_qp_unlock(qp, false);
	return HRTIMER_NORESTART;
}

/* ---- lookup by QP number ------------------------------------------------------ */

static void mbcf_qp_ref_put(struct mbcf_qp_ref *ref)
{
	if (refcount_dec_and_test(&ref->users))
		complete(&ref->idle);
}

/*
 * The device's pacing thread found the QP's clock come: send what it
 * allows.  The pacer took a reference on the QP (while the QP was in its
 * tree, so still published); it is dropped here.  Destroy may have marked
 * the QP dying since: re-checked under the lock, as every lookup does.
 */
void mbcf_qp_paced(struct mbcf_qp *qp)
{
	struct mbcf_qp_ref *ref = qp->ref;

	spin_lock_bh(&qp->lock);
	if (!qp->dying)
		mbcf_qp_kick(qp);
	mbcf_qp_unlock(qp, true);
	mbcf_qp_ref_put(ref);
}

/*
 * A frame for a QP this device does not have: if it was destroyed a moment
 * ago and this is its peer's resend asking for the ACK that was lost, give
 * that ACK (core/linger.c).  The frame's verdict stays drop_wrong_qp.
 */
static void mbcf_qp_rx_closed(struct mbcf_dev *dev, const struct mbcf_frame *f,
			      const u8 *src_mac)
{
	u8 hdr[MBCF_HDR_MAX];
	u32 n;

	if (!mbcf_wire_op_sequenced(f->op) || !(f->flags & MBCF_F_ACKREQ))
		return;		/* the common case: no lock */
	spin_lock_bh(&dev->linger_lock);
	n = mbcf_linger_answer(&dev->linger, f, src_mac, mbcf_proto_now(), hdr);
	spin_unlock_bh(&dev->linger_lock);
	if (n && !mbcf_net_send_ctl(dev, src_mac, hdr, n))
		this_cpu_inc(dev->rx_ctr->closed_acks);
}

/*
 * A parsed frame from the wire (NET_RX softirq).  It must name a QP of
 * this device that is past INIT and connected to the frame's sender.
 */
void mbcf_qp_rx(struct mbcf_dev *dev, const struct mbcf_frame *f,
		const u8 *src_mac)
{
	struct mbcf_qp_ref *ref;
	struct mbcf_qp *qp;
	bool owed = false;
	u64 now;

	rcu_read_lock();
	ref = xa_load(&dev->qp_xa, f->dst_qpn);
	if (ref && !refcount_inc_not_zero(&ref->users))
		ref = NULL;	/* being destroyed */
	rcu_read_unlock();
	if (unlikely(!ref)) {
		this_cpu_inc(dev->rx_ctr->drop_wrong_qp);
		mbcf_qp_rx_closed(dev, f, src_mac);
		return;
	}
	qp = ref->qp;

	spin_lock_bh(&qp->lock);
	/*
	 * A conn in ERROR still answers (a lost NAK is repeated).  The core
	 * checks (and counts) the QP numbers; only the MAC is ours to check.
	 * A datagram may come from anyone, to a UD QP past INIT.
	 */
	if (unlikely(qp->ud || f->op == MBCF_OP_DGRAM)) {
		if (qp->ud && f->op == MBCF_OP_DGRAM && !qp->dying &&
		    (qp->state == IB_QPS_RTR || qp->state == IB_QPS_RTS)) {
			mbcf_dgram_rx(&qp->dgram, f);
			mbcf_qp_settle(qp, mbcf_proto_now());
		} else {
			this_cpu_inc(dev->rx_ctr->drop_wrong_qp);
		}
	} else if (unlikely(qp->dying || qp->conn.state == MBCF_CONN_RESET ||
			    !ether_addr_equal(src_mac, qp->dmac))) {
		this_cpu_inc(dev->rx_ctr->drop_wrong_qp);
	} else {
		now = mbcf_proto_now();
		owed = mbcf_conn_rx_hold_ack(&qp->conn, f, now);
		mbcf_qp_settle(qp, now);
	}
	mbcf_qp_unlock(qp, false);
	/*
	 * The ACK goes out only now, if still owed: a doorbell that was
	 * spinning on the lock -- in a ping-pong, the application reacting
	 * to the data just placed -- got it first, and its frame carries the
	 * acknowledgement.  Saves an ACK frame each way, and shortens the
	 * time the lock is held after the data became visible.
	 */
	if (owed) {
		spin_lock_bh(&qp->lock);
		mbcf_qp_kick(qp);
		mbcf_qp_unlock(qp, false);
	}
	mbcf_qp_ref_put(ref);
}

/*
 * Counters of the live QPs (stats.c adds the device's and the retired
 * ones).  A QP being destroyed is skipped: its counters are retired.
 */
void mbcf_qp_stats_sum(struct mbcf_dev *dev, struct mbcf_counters *sum)
{
	struct mbcf_qp_ref *ref;
	unsigned long idx;

	rcu_read_lock();
	xa_for_each(&dev->qp_xa, idx, ref) {
		if (!refcount_inc_not_zero(&ref->users))
			continue;
		spin_lock_bh(&ref->qp->lock);
		if (!ref->qp->dying) {
			mbcf_counters_add(sum, &ref->qp->conn.ctr);
			mbcf_counters_add(sum, &ref->qp->dgram.ctr);
		}
		spin_unlock_bh(&ref->qp->lock);
		mbcf_qp_ref_put(ref);
	}
	rcu_read_unlock();
}

/*
 * One connected QP's sender state, for `rdma res show qp -dd` (stats.c):
 * what the device-wide counters cannot tell -- which QP retransmits, at
 * what window and timeout (docs/protocol.md 4.3, 7.1).
 */
void mbcf_qp_snapshot(struct mbcf_qp *qp, struct mbcf_qp_snap *s)
{
	spin_lock_bh(&qp->lock);
	mbcf_conn_snapshot(&qp->conn, &s->c);
	s->sq_pull_max = qp->sq_pull_max;
	spin_unlock_bh(&qp->lock);
}

/* ---- doorbells ------------------------------------------------------- */

/*
 * A kernel consumer posted (its entries are in the QP's kernel rings):
 * take them at once, in the caller's context, as a user's doorbell does --
 * a work item per post cost a wake-up and two context switches each
 * (NVMe-oF: three per 4 KiB read; docs/performance.md).  Not where the
 * QP's lock may not be taken or waited for: hard interrupts off (post_send
 * may come so), the lock held (trylock: by this CPU -- a completion
 * handler that posts, called under it -- or by another, which is busy in
 * the QP and would leave our entries to the next pass), or a completion
 * handler of any QP running on this CPU (its QP's lock is held: a frame
 * we deliver at once could need it).  There tx_work takes them, as
 * before.  @recv: receives were posted (GO after a STOP).
 */
static void mbcf_qp_kposted(struct mbcf_qp *qp, bool recv)
{
	if (irqs_disabled() || in_hardirq() || in_nmi() ||
	    mbcf_cq_in_handler() || !spin_trylock_bh(&qp->lock)) {
		mbcf_qp_defer(qp);
		return;
	}
	if (recv && !qp->dying && qp->conn.state == MBCF_CONN_RTS)
		mbcf_conn_recv_posted(&qp->conn, mbcf_proto_now());
	mbcf_qp_kick(qp);
	/*
	 * As softirq does: what a burst held back goes to tx_work.  The
	 * caller may be in an RCU read-side section that must not sleep
	 * (blk-mq's queue_rq), so no cond_resched() here.
	 */
	mbcf_qp_unlock(qp, false);
}

int mbcf_qp_post_send(struct ib_qp *ibqp, const struct ib_send_wr *wr,
		      const struct ib_send_wr **bad_wr)
{
	struct mbcf_qp *qp = to_mbcf_qp(ibqp);

	if (qp->kernel) {
		int err = mbcf_wr_kpost_send(qp, wr, bad_wr);

		mbcf_qp_kposted(qp, false);	/* those before a failed one are posted */
		return err;
	}
	/* A user QP's requests arrive through its ring: this is a doorbell. */
	if (wr) {
		*bad_wr = wr;
		return -EOPNOTSUPP;
	}
	this_cpu_inc(qp->dev->rx_ctr->sq_doorbells);
	spin_lock_bh(&qp->lock);
	mbcf_wr_doorbell(qp, true);
	mbcf_qp_settle(qp, mbcf_proto_now());
	mbcf_qp_unlock(qp, true);
	return 0;
}

int mbcf_qp_post_recv(struct ib_qp *ibqp, const struct ib_recv_wr *wr,
		      const struct ib_recv_wr **bad_wr)
{
	struct mbcf_qp *qp = to_mbcf_qp(ibqp);
	u64 now = mbcf_proto_now();

	if (qp->kernel) {
		int err = mbcf_wr_kpost_recv(qp, wr, bad_wr);

		mbcf_qp_kposted(qp, true);
		return err;
	}
	if (wr || qp->srq) {	/* no receive queue of its own with an SRQ */
		*bad_wr = wr;
		return wr ? -EOPNOTSUPP : -EINVAL;
	}
	spin_lock_bh(&qp->lock);
	mbcf_wr_doorbell(qp, false);
	if (qp->conn.state == MBCF_CONN_RTS)
		mbcf_conn_recv_posted(&qp->conn, now);	/* GO after a STOP */
	mbcf_qp_settle(qp, now);
	mbcf_qp_unlock(qp, true);
	return 0;
}

/*
 * Receives were posted to @qp's SRQ (srq.c): GO if we sent STOP.  Or its
 * ring broke: a QP that takes receives from it fails.
 */
void mbcf_qp_recv_posted(struct mbcf_qp *qp, bool srq_broken)
{
	u64 now = mbcf_proto_now();

	spin_lock_bh(&qp->lock);
	if (srq_broken) {
		if (!qp->dying && qp->state != IB_QPS_RESET &&
		    qp->state != IB_QPS_ERR)
			qp->pend |= MBCF_QP_PEND_FATAL;
	} else if (!qp->dying && qp->conn.state == MBCF_CONN_RTS) {
		mbcf_conn_recv_posted(&qp->conn, now);
	}
	mbcf_qp_settle(qp, now);
	mbcf_qp_unlock(qp, true);
}

/*
 * A FIFO's doorbell (fifo.c): GO to the QP numbered @qpn if the device
 * still has it; a QP that is not stopped ignores it.
 */
void mbcf_qp_go(struct mbcf_dev *dev, u32 qpn)
{
	struct mbcf_qp_ref *ref;

	rcu_read_lock();
	ref = xa_load(&dev->qp_xa, qpn);
	if (ref && !refcount_inc_not_zero(&ref->users))
		ref = NULL;	/* being destroyed */
	rcu_read_unlock();
	if (!ref)
		return;
	mbcf_qp_recv_posted(ref->qp, false);
	mbcf_qp_ref_put(ref);
}

/*
 * The device's netdev is being unregistered: every QP to ERROR now, its
 * requests flushed, as when hardware is unplugged (no QP event: the RDMA
 * core raises IB_EVENT_DEVICE_FATAL for the device as a whole).  Frames can no longer leave, so otherwise a consumer would
 * wait out its retransmission and command timeouts before the RDMA core
 * could remove it from the device (nvme-rdma: ~95 s).  Process context
 * (the netdev notifier); one QP lock at a time, bounded by the QP count.
 */
void mbcf_qp_fail_all(struct mbcf_dev *dev)
{
	unsigned long qpn = 0;
	struct mbcf_qp_ref *ref;
	struct mbcf_qp *qp;

	for (;;) {
		rcu_read_lock();
		ref = xa_find(&dev->qp_xa, &qpn, ULONG_MAX, XA_PRESENT);
		if (ref && !refcount_inc_not_zero(&ref->users))
			ref = ERR_PTR(-ENOENT);	/* being destroyed: skip */
		rcu_read_unlock();
		if (!ref)
			break;
		if (!IS_ERR(ref)) {
			qp = ref->qp;
			spin_lock_bh(&qp->lock);
			if (!qp->dying && qp->state != IB_QPS_RESET &&
			    qp->state != IB_QPS_ERR)
				qp->pend |= MBCF_QP_PEND_ERROR;
			mbcf_qp_settle(qp, mbcf_proto_now());
			mbcf_qp_unlock(qp, true);
			mbcf_qp_ref_put(ref);
		}
		if (qpn == ULONG_MAX)
			break;
		qpn++;
		cond_resched();
	}
}

/* ---- create / destroy -------------------------------------------------- */

static int mbcf_qp_check_init(struct ib_qp_init_attr *init, bool kernel)
{
	struct ib_qp_cap *cap = &init->cap;

	switch (init->qp_type) {
	case IB_QPT_RC:
	case IB_QPT_UC:
	case IB_QPT_UD:
		break;
	case IB_QPT_GSI:	/* the MAD layer's QP1, a kernel consumer */
		if (!kernel || init->port_num != 1)
			return -EOPNOTSUPP;
		break;
	default:
		return -EOPNOTSUPP;
	}
	if (init->create_flags || (init->srq && init->qp_type == IB_QPT_GSI))
		return -EOPNOTSUPP;
	if (init->srq) {	/* verbs: the receive queue's caps are ignored */
		cap->max_recv_wr = 0;
		cap->max_recv_sge = 0;
	}
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
	mbcf_wr_free(&qp->sq);
	mbcf_wr_free(&qp->rq);
	kfree(qp->srq_wr);
	kvfree(qp->req_msgs);
	kfree(qp->resp_msgs);
}

/* Everything a QP needs, charged to the creating process's memory cgroup. */
static int mbcf_qp_alloc_mem(struct mbcf_qp *qp, struct ib_ucontext *uctx,
			     const struct ib_qp_cap *cap, u32 sq_n, u32 sq_stride,
			     u32 rq_n, u32 rq_stride)
{
	int err;

	err = mbcf_wr_alloc(&qp->sq, uctx, true, sq_n, sq_stride,
			    cap->max_send_sge, cap->max_inline_data);
	if (err)
		return err;
	if (qp->srq)
		err = mbcf_wr_alloc_srq_slot(qp);
	else
		err = mbcf_wr_alloc(&qp->rq, uctx, false, rq_n, rq_stride,
				    cap->max_recv_sge, 0);
	if (err)
		goto err_free;
	qp->req_msgs = kvcalloc(sq_n, sizeof(*qp->req_msgs), MBCF_GFP_OBJ);
	qp->resp_size = MBCF_QP_RESP_SLOTS;
	qp->resp_msgs = kcalloc(qp->resp_size, sizeof(*qp->resp_msgs),
				MBCF_GFP_OBJ);
	err = -ENOMEM;
	if (!qp->req_msgs || !qp->resp_msgs)
		goto err_free;
	return 0;

err_free:
	mbcf_qp_free_mem(qp);
	return err;
}

static void mbcf_qp_ring_info(struct mbcf_ring_info *ri, const struct mbcf_wq *q)
{
	if (!q->umap)
		return;		/* no ring (an SRQ's QP): 0 entries */
	ri->mmap_offset = mbcf_umap_offset(q->umap);
	ri->mmap_len = q->umap->len;
	ri->num_entries = q->ring.mask + 1;
	ri->stride = q->ring.stride;
}

/*
 * The QP's number: 1 for the GSI QP (QP1, one per device), else the next
 * free one in MBCF_QPN_FIRST..MBCF_QPN_MASK (0 and 1 are special in verbs;
 * 24 bits on the wire), cyclically from a random start per device
 * (device.c), so that a spoofer cannot predict them.  Reserved now,
 * published when the QP is fully built.
 */
static int mbcf_qp_alloc_qpn(struct mbcf_dev *dev, struct ib_qp *ibqp)
{
	u32 qpn;
	int err;

	if (ibqp->qp_type == IB_QPT_GSI) {
		err = xa_insert(&dev->qp_xa, 1, NULL, GFP_KERNEL);
		qpn = 1;
	} else {
		err = xa_alloc_cyclic(&dev->qp_xa, &qpn, NULL,
				      XA_LIMIT(MBCF_QPN_FIRST, MBCF_QPN_MASK),
				      &dev->qp_next,
				      GFP_KERNEL);
	}
	if (err < 0)
		return err;
	ibqp->qp_num = qpn;
	return 0;
}

int mbcf_qp_create(struct ib_qp *ibqp, struct ib_qp_init_attr *init,
		   struct ib_udata *udata)
{
	struct mbcf_dev *dev = to_mbcf_dev(ibqp->device);
	struct mbcf_qp *qp = to_mbcf_qp(ibqp);
	struct mbcf_create_qp_resp resp = {};
	struct mbcf_ucontext *uc = NULL;
	u32 sq_n, sq_stride, rq_n, rq_stride;
	int err;

	if (udata && udata->outlen < sizeof(resp))
		return -EINVAL;
	err = mbcf_qp_check_init(init, !udata);
	if (err)
		return err;
	err = mbcf_res_get(dev, udata, MBCF_RES_QP, &qp->owner);
	if (err)
		return err;

	qp->dev = dev;
	qp->id = atomic64_inc_return(&dev->qp_ids);
	qp->kernel = !udata;
	qp->ud = init->qp_type == IB_QPT_UD || init->qp_type == IB_QPT_GSI;
	spin_lock_init(&qp->lock);
	spin_lock_init(&qp->klock);
	mbcf_net_init_qp(qp);
	INIT_WORK(&qp->tx_work, mbcf_qp_tx_work);
	qp->tx_cpu = raw_smp_processor_id();
	qp->state = IB_QPS_RESET;
	qp->sq_sig_all = init->sq_sig_type == IB_SIGNAL_ALL_WR;
	mbcf_qp_default_attrs(qp);
	mbcf_hrtimer_setup(&qp->timer, mbcf_qp_timer, CLOCK_MONOTONIC, HRTIMER_MODE_ABS_SOFT);

	mbcf_qp_size(&init->cap, &sq_n, &sq_stride, &rq_n, &rq_stride);
	qp->max_inline = init->cap.max_inline_data;
	if (init->srq) {
		qp->srq = to_mbcf_srq(init->srq);
		init->cap.max_recv_wr = 0;
		init->cap.max_recv_sge = 0;
	}
	qp->ref = kzalloc(sizeof(*qp->ref), MBCF_GFP_OBJ);
	if (!qp->ref) {
		err = -ENOMEM;
		goto err_count;
	}
	qp->ref->qp = qp;
	refcount_set(&qp->ref->users, 1);
	init_completion(&qp->ref->idle);

	if (udata)
		uc = rdma_udata_to_drv_context(udata, struct mbcf_ucontext, ibuc);
	err = mbcf_qp_alloc_mem(qp, uc ? &uc->ibuc : NULL, &init->cap, sq_n,
				sq_stride, rq_n, rq_stride);
	if (err)
		goto err_ref;
	/* a kernel consumer's posts produce into the rings from here */
	qp->ksq = qp->sq.ring;
	qp->krq = qp->rq.ring;	/* unused with an SRQ */

	err = mbcf_qp_alloc_qpn(dev, ibqp);
	if (err)
		goto err_mem;
	if (udata) {
		mbcf_qp_ring_info(&resp.sq, &qp->sq);
		mbcf_qp_ring_info(&resp.rq, &qp->rq);
		err = ib_copy_to_udata(udata, &resp, sizeof(resp));
		if (err)
			goto err_xa;
	}
	/* Visible to the receive path only now, fully built (RCU). */
	xa_store(&dev->qp_xa, ibqp->qp_num, qp->ref, GFP_KERNEL);
	if (qp->srq)
		mbcf_srq_attach(qp->srq, qp);
	return 0;

err_xa:
	xa_erase(&dev->qp_xa, ibqp->qp_num);
err_mem:
	mbcf_qp_free_mem(qp);
err_ref:
	kfree(qp->ref);
err_count:
	mbcf_res_put(dev, qp->owner, MBCF_RES_QP);
	return err;
}

/*
 * Also called for every QP of a process that died or of a device being
 * removed; must not fail.  After it returns no context uses the QP: the
 * frames in flight to it have dropped their references, the timer and the
 * transmit work are cancelled, and user space may only keep a dead ring.
 */
/* Whose linger entry a QP leaves (core/linger.c): its user context's, or
 * the kernel's (0). */
static u64 mbcf_qp_owner(const struct mbcf_qp *qp)
{
	const struct ib_uobject *pd = qp->ibqp.pd->uobject;

	return pd ? (uintptr_t)pd->context : 0;
}

int mbcf_qp_destroy(struct ib_qp *ibqp, struct ib_udata *udata)
{
	struct mbcf_qp *qp = to_mbcf_qp(ibqp);
	struct mbcf_dev *dev = qp->dev;

	if (qp->srq)	/* no SRQ doorbell wakes it from here on */
		mbcf_srq_detach(qp->srq, qp);
	spin_lock_bh(&qp->lock);
	qp->dying = true;
	if (!qp->ud) {		/* its last words, before the flush resets it */
		spin_lock(&dev->linger_lock);
		mbcf_linger_add(&dev->linger, &qp->conn, qp->dmac,
				mbcf_qp_owner(qp), mbcf_proto_now());
		spin_unlock(&dev->linger_lock);
	}
	if (qp->conn.state != MBCF_CONN_RESET)
		mbcf_conn_flush(&qp->conn);
	mbcf_qp_unlock(qp, true);	/* sends the ACK the flush may owe */

	mbcf_pacer_remove(qp);		/* dying: never queued again */
	hrtimer_cancel(&qp->timer);
	cancel_work_sync(&qp->tx_work);
	xa_erase(&dev->qp_xa, ibqp->qp_num);
	mbcf_qp_ref_put(qp->ref);
	wait_for_completion(&qp->ref->idle);
	kfree_rcu(qp->ref, rcu);	/* lookups may still read it */

	mbcf_net_purge(qp);		/* nothing should be left; never leak */
	mbcf_stats_retire(dev, &qp->conn.ctr);
	mbcf_stats_retire(dev, &qp->dgram.ctr);
	mbcf_qp_free_mem(qp);
	mbcf_res_put(dev, qp->owner, MBCF_RES_QP);
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

/*
 * A connection's peer is one host: a group MAC (broadcast, multicast) or
 * none would send its stream to every host on the segment (AHs refuse
 * them too, ah.c).
 */
static bool mbcf_qp_unicast_av(const struct rdma_ah_attr *ah)
{
	const u8 *mac = rdma_ah_retrieve_dmac((struct rdma_ah_attr *)ah);

	return mac && is_valid_ether_addr(mac);
}

/* All or nothing: nothing of a modify_qp is applied unless all of it is valid. */
static int mbcf_qp_check_attrs(const struct ib_qp_attr *attr, int mask)
{
	if ((mask & IB_QP_PKEY_INDEX && attr->pkey_index) ||
	    (mask & IB_QP_PORT && attr->port_num != 1) ||
	    (mask & IB_QP_MAX_DEST_RD_ATOMIC &&
	     attr->max_dest_rd_atomic > MBCF_MAX_RD_ATOMIC) ||
	    (mask & IB_QP_MAX_QP_RD_ATOMIC &&
	     attr->max_rd_atomic > MBCF_MAX_RD_ATOMIC) ||
	    (mask & IB_QP_MIN_RNR_TIMER && attr->min_rnr_timer > 31) ||
	    (mask & IB_QP_TIMEOUT && attr->timeout > 31) ||
	    (mask & IB_QP_RETRY_CNT && attr->retry_cnt > 7) ||
	    (mask & IB_QP_RNR_RETRY && attr->rnr_retry > 7) ||
	    (mask & IB_QP_AV && !mbcf_qp_unicast_av(&attr->ah_attr)))
		return -EINVAL;
	return 0;
}

static void mbcf_qp_save_attrs(struct mbcf_qp *qp, struct ib_qp_attr *attr,
			       int mask)
{
	struct ib_qp_attr *a = &qp->attr;

	if (mask & IB_QP_ACCESS_FLAGS)
		a->qp_access_flags = attr->qp_access_flags;
	if (mask & IB_QP_PATH_MTU)
		a->path_mtu = attr->path_mtu;
	if (mask & IB_QP_AV) {
		a->ah_attr = attr->ah_attr;
		/* a reference the core holds only during modify_qp */
		a->ah_attr.grh.sgid_attr = NULL;
		memcpy(qp->dmac, rdma_ah_retrieve_dmac(&attr->ah_attr), ETH_ALEN);
	}
	if (mask & IB_QP_DEST_QPN)
		qp->dest_qpn = a->dest_qp_num = attr->dest_qp_num & MBCF_QPN_MASK;
	if (mask & IB_QP_RQ_PSN)
		a->rq_psn = attr->rq_psn & MBCF_PSN_MASK;
	if (mask & IB_QP_SQ_PSN)
		a->sq_psn = attr->sq_psn & MBCF_PSN_MASK;
	if (mask & IB_QP_MAX_DEST_RD_ATOMIC)
		a->max_dest_rd_atomic = attr->max_dest_rd_atomic;
	if (mask & IB_QP_MAX_QP_RD_ATOMIC)
		a->max_rd_atomic = attr->max_rd_atomic;
	if (mask & IB_QP_MIN_RNR_TIMER)
		a->min_rnr_timer = attr->min_rnr_timer;
	if (mask & IB_QP_TIMEOUT)
		a->timeout = attr->timeout;
	if (mask & IB_QP_RETRY_CNT)
		a->retry_cnt = attr->retry_cnt;
	if (mask & IB_QP_RNR_RETRY)
		a->rnr_retry = attr->rnr_retry;
	if (mask & IB_QP_QKEY)
		a->qkey = attr->qkey;
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
	/*
	 * A connection between two QPs of this device: its frames never
	 * reach the netdev (net.c delivers them at once), so they are cut as
	 * on a jumbo link, whatever the netdev's MTU -- at 1500 a 4 KiB
	 * NVMe-oF read took three data frames, each built, delivered and
	 * parsed; TCP over lo moves 64 KiB segments.  Both ends see their
	 * peer at this device's MAC, so both cut (and count a read's
	 * response frames) alike.
	 */
	if (ether_addr_equal(qp->dmac, qp->dev->ndev->dev_addr) &&
	    cfg->mtu < MBCF_QP_LOOP_MTU)
		cfg->mtu = MBCF_QP_LOOP_MTU;
	cfg->window = mbcf_window;
	cfg->window_fixed = !READ_ONCE(mbcf_window_adapt);
	cfg->link_mbps = qp->dev->link_mbps;
	cfg->ack_interval = mbcf_ack_interval;
	cfg->retry_cnt = a->retry_cnt;
	cfg->rnr_retry = a->rnr_retry;
	cfg->max_rd_atomic = max_t(u32, a->max_rd_atomic, 1);
	cfg->max_dest_rd_atomic = clamp_t(u32, a->max_dest_rd_atomic, 1, qp->resp_size);
	cfg->rto_ns = mbcf_qp_rto_ns(a->timeout);
	cfg->min_rnr_ns = (u64)mbcf_qp_rnr_us[a->min_rnr_timer] * NSEC_PER_USEC;
	cfg->uc = qp->ibqp.qp_type == IB_QPT_UC;
	cfg->frame_overhead = ETH_HLEN;	/* pacing counts whole frames */
	cfg->timer_slack_ns = TICK_NSEC;	/* kmod/proto.c: the timer's range */
	cfg->rtt_share = &qp->dev->rtt_share;
}

static int mbcf_qp_transition(struct mbcf_qp *qp, enum ib_qp_state next)
{
	struct mbcf_conn_cfg cfg;
	int err;

	switch (next) {
	case IB_QPS_RESET:
		if (qp->conn.state != MBCF_CONN_RESET)
			mbcf_conn_flush(&qp->conn);
		/*
		 * The next RTR starts a connection with zeroed counters
		 * (mbcf_conn_init): what this one counted stays in the
		 * device's totals, or rx_frames would outgrow its verdicts.
		 */
		mbcf_stats_retire(qp->dev, &qp->conn.ctr);
		memset(&qp->conn.ctr, 0, sizeof(qp->conn.ctr));
		mbcf_stats_retire(qp->dev, &qp->dgram.ctr);
		memset(&qp->dgram, 0, sizeof(qp->dgram));
		mbcf_wr_reset(qp);	/* a reset QP has no requests */
		mbcf_qp_default_attrs(qp);
		WRITE_ONCE(qp->rate_kbps, 0);
		break;
	case IB_QPS_INIT:
		break;
	case IB_QPS_RTR:
		if (qp->ud) {	/* datagrams are taken from now on */
			if (mbcf_dgram_init(&qp->dgram, qp->ibqp.qp_num,
					    qp->attr.qkey,
					    READ_ONCE(qp->dev->ndev->mtu),
					    &mbcf_proto_ops, qp))
				return -EINVAL;
			break;
		}
		/* The receive side starts now; the send side at RTS. */
		mbcf_qp_conn_cfg(qp, &cfg);
		err = mbcf_conn_init(&qp->conn, &cfg, &mbcf_proto_ops, qp,
				     qp->req_msgs, qp->sq.ring.mask + 1,
				     qp->resp_msgs, qp->resp_size);
		if (err)
			return -EINVAL;
		/* a rate set in INIT paces the connection from its start */
		mbcf_conn_set_pace_slack(&qp->conn, (u64)READ_ONCE(mbcf_pace_slack_us) *
					 NSEC_PER_USEC);
		mbcf_conn_set_rate(&qp->conn, qp->rate_kbps, mbcf_proto_now());
		break;
	case IB_QPS_RTS:
		if (qp->ud)
			break;
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

/*
 * IB_QP_RATE_LIMIT (ibv_modify_qp_rate_limit): kbit/s, 0 = unpaced.  RC and
 * UC QPs only (their connection's stream is what is paced); a rate outside
 * what query_device reports in packet_pacing_caps is EINVAL.
 */
static int mbcf_qp_check_rate(struct mbcf_qp *qp, u32 kbps)
{
	if (qp->ibqp.qp_type != IB_QPT_RC && qp->ibqp.qp_type != IB_QPT_UC)
		return -EOPNOTSUPP;
	if (kbps && (kbps < MBCF_PACE_MIN_KBPS ||
		     kbps > mbcf_pacer_max_kbps(qp->dev)))
		return -EINVAL;
	return 0;
}

/*
 * A modify that changes nothing but the rate (ibv_modify_qp_rate_limit) is
 * no state transition: allowed in INIT, RTR and RTS.
 */
static bool mbcf_qp_rate_only(int mask, enum ib_qp_state cur)
{
	return (mask & IB_QP_RATE_LIMIT) &&
	       !(mask & ~(IB_QP_RATE_LIMIT | IB_QP_CUR_STATE)) &&
	       (cur == IB_QPS_INIT || cur == IB_QPS_RTR || cur == IB_QPS_RTS);
}

int mbcf_qp_modify(struct ib_qp *ibqp, struct ib_qp_attr *attr, int mask,
		   struct ib_udata *udata)
{
	struct mbcf_qp *qp = to_mbcf_qp(ibqp);
	enum ib_qp_state cur, next;
	struct ib_qp_attr saved;
	u8 saved_dmac[ETH_ALEN];
	int err;

	if (mask & ~(IB_QP_ATTR_STANDARD_BITS | IB_QP_RATE_LIMIT))
		return -EOPNOTSUPP;
	if (udata && udata->inlen)
		return -EINVAL;
	if (mask & IB_QP_RATE_LIMIT) {
		err = mbcf_qp_check_rate(qp, attr->rate_limit);
		if (err)
			return err;
	}

	spin_lock_bh(&qp->lock);
	cur = mask & IB_QP_CUR_STATE ? attr->cur_qp_state : qp->state;
	next = mask & IB_QP_STATE ? attr->qp_state : cur;
	err = -EINVAL;
	if (cur != qp->state)
		goto out;
	/* the core's table knows the rate for raw packet QPs only */
	if (!mbcf_qp_rate_only(mask, cur) &&
	    !ib_modify_qp_is_ok(cur, next, qp->ibqp.qp_type,
				mask & ~IB_QP_RATE_LIMIT))
		goto out;
	if (mask & IB_QP_RATE_LIMIT &&
	    (next == IB_QPS_RESET || next == IB_QPS_ERR))
		goto out;
	if (mask & IB_QP_MAX_DEST_RD_ATOMIC && cur != IB_QPS_INIT)
		goto out;	/* the responder ring is sized at RTR */
	err = mbcf_qp_check_attrs(attr, mask);
	if (err)
		goto out;
	saved = qp->attr;
	memcpy(saved_dmac, qp->dmac, ETH_ALEN);
	mbcf_qp_save_attrs(qp, attr, mask);
	if (next != cur || next == IB_QPS_RESET)
		err = mbcf_qp_transition(qp, next);
	if (err) {	/* the transition refused: nothing changes */
		qp->attr = saved;
		qp->dest_qpn = saved.dest_qp_num;
		memcpy(qp->dmac, saved_dmac, ETH_ALEN);
	}
	if (!err && mask & IB_QP_RATE_LIMIT) {
		WRITE_ONCE(qp->rate_kbps, attr->rate_limit);
		qp->attr.rate_limit = attr->rate_limit;
		if (qp->conn.state == MBCF_CONN_RTS)	/* sends what it now may */
			mbcf_conn_set_rate(&qp->conn, attr->rate_limit,
					   mbcf_proto_now());
	}
	if (!err)
		mbcf_qp_settle(qp, mbcf_proto_now());
out:
	mbcf_qp_unlock(qp, true);
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
	attr->cap.max_send_wr = qp->sq.ring.mask + 1;
	attr->cap.max_recv_wr = qp->srq ? 0 : qp->rq.ring.mask + 1;
	attr->cap.max_send_sge = qp->sq.max_sge;
	attr->cap.max_recv_sge = qp->srq ? 0 : qp->rq.max_sge;
	attr->cap.max_inline_data = qp->max_inline;
	spin_unlock_bh(&qp->lock);

	memset(init, 0, sizeof(*init));
	init->qp_type = qp->ibqp.qp_type;
	init->send_cq = ibqp->send_cq;
	init->recv_cq = ibqp->recv_cq;
	init->srq = ibqp->srq;
	init->cap = attr->cap;
	init->sq_sig_type = qp->sq_sig_all ? IB_SIGNAL_ALL_WR : IB_SIGNAL_REQ_WR;
	return 0;
}
