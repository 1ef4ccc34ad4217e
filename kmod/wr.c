// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * A QP's work requests: the only code that reads the send and receive
 * rings, and the only code that reads the private copies made from them.
 *
 * The rings live in memory the process maps writable and may rewrite at
 * any moment, so nothing here trusts a byte of them twice:
 *  - a ring's producer index is read once per pass and checked against our
 *    own indices (mbcf_wr_avail): behind what we already read, or ahead of
 *    what the ring can hold (it would name a slot still held by a request
 *    in flight), and the ring is broken for good: the QP fails with
 *    IB_EVENT_QP_FATAL and the ring is never read again;
 *  - an entry's header is copied once into a temporary and checked there;
 *    its SGE list or inline data is copied, with the checked count, into
 *    the entry's private slot, and the SGEs are checked in that copy.  Only
 *    a request that passed is handed to the protocol core; the ring entry
 *    is never read again.  A request user space could not have posted
 *    through the provider (unknown opcode, too many SGEs, too much inline
 *    data) fails with IB_WC_LOC_QP_OP_ERR and IB_EVENT_QP_FATAL.
 * Private slot i belongs to ring entry i from the read until the request
 * completes (sq.ring.idx <= i < sq.ring.rd), which is also when user space
 * gets the ring slot back: at most num_entries requests are ever in flight.
 *
 * A shared receive queue (struct mbcf_srq) is read the same way, under its
 * own lock taken inside the claiming QP's: a receive claimed from it moves
 * to that QP's private slot (qp->srq_wr) and its ring slot is given back at
 * once, since the QPs sharing it finish their messages in any order.
 *
 * Everything runs under qp->lock except allocation and teardown.
 */
#include <linux/slab.h>
#include <rdma/ib_user_verbs.h>

#include "mbcf.h"

/* The ring entry layout (include/uapi/rdma/mbcf-abi.h), as user space has it. */
static_assert(sizeof(struct mbcf_send_wqe) == 56);
static_assert(offsetof(struct mbcf_send_wqe, sge) == 56);
static_assert(offsetof(struct mbcf_send_wqe, inline_data) == 56);
static_assert(sizeof(struct mbcf_recv_wqe) == 16);
static_assert(offsetof(struct mbcf_recv_wqe, sge) == 16);

/* A send request as the kernel keeps it while in flight. */
struct mbcf_wr_send {
	u64 wr_id;
	u32 len;		/* message bytes */
	u16 num_sge;		/* entries of sge[]; 0 with MBCF_WR_INLINE */
	u8 wc_op;		/* enum ib_wc_opcode of its completion */
	u8 flags;		/* MBCF_WR_* */
	union {
		DECLARE_FLEX_ARRAY(struct mbcf_sge, sge);
		DECLARE_FLEX_ARRAY(u8, data);	/* MBCF_WR_INLINE: len bytes */
		struct mbcf_mw_bind bind;	/* IB_WC_BIND_MW */
		u32 inv_rkey;			/* IB_WC_LOCAL_INV */
		struct mbcf_frmr_reg reg;	/* IB_WC_REG_MR (frmr.c) */
	};
};

#define MBCF_WR_SIGNALED	0x01	/* completes with a CQE on success too */
#define MBCF_WR_INLINE		0x02

/* A receive request, claimed by a message. */
struct mbcf_wr_recv {
	u64 wr_id;
	u32 num_sge;
	u32 cap;		/* sum of the SGE lengths, at most a message */
	struct mbcf_sge sge[];
};

static struct mbcf_wr_send *mbcf_wr_send_at(const struct mbcf_wq *q, u64 i)
{
	return (struct mbcf_wr_send *)(q->wr +
		(size_t)((u32)i & q->ring.mask) * q->wr_stride);
}

static struct mbcf_wr_recv *mbcf_wr_recv_at(const struct mbcf_wq *q, u64 i)
{
	return (struct mbcf_wr_recv *)(q->wr +
		(size_t)((u32)i & q->ring.mask) * q->wr_stride);
}

/* ---- allocation ----------------------------------------------------------- */

/*
 * The ring user space maps (@n entries of @stride bytes) and the private
 * copies, sized for @max_sge SGEs or @max_inline bytes of inline data.
 * Memory is charged to the caller's memory cgroup.
 */
static int mbcf_wr_alloc_ring(struct mbcf_wq *q, struct ib_ucontext *uctx,
			      u32 n, u32 stride, u32 max_sge)
{
	q->umap = mbcf_umap_create(uctx, MBCF_RING_ENTRIES_OFF + (size_t)n * stride);
	if (IS_ERR(q->umap)) {
		int err = PTR_ERR(q->umap);

		q->umap = NULL;
		return err;
	}
	mbcf_ring_init(&q->ring, q->umap->buf, n, stride, 0);
	/* Idle from the start: the first posts must ring the doorbell. */
	mbcf_ring_consumer_idle(&q->ring);
	q->max_sge = max_sge;
	return 0;
}

int mbcf_wr_alloc(struct mbcf_wq *q, struct ib_ucontext *uctx, bool send,
		  u32 n, u32 stride, u32 max_sge, u32 max_inline)
{
	size_t hdr = send ? sizeof(struct mbcf_wr_send) :
			    sizeof(struct mbcf_wr_recv);
	size_t body = max3((size_t)max_sge * sizeof(struct mbcf_sge),
			   (size_t)max_inline, sizeof(struct mbcf_mw_bind));
	int err;

	err = mbcf_wr_alloc_ring(q, uctx, n, stride, max_sge);
	if (err)
		return err;
	q->wr_stride = ALIGN(hdr + body, 8);
	/* a user's: as much kernel memory as its ring, and as bounded */
	if (uctx) {
		err = mbcf_charge(&q->wr_charge, (size_t)n * q->wr_stride);
		if (err) {
			mbcf_wr_free(q);
			return err;
		}
	}
	q->wr = kvcalloc(n, q->wr_stride, MBCF_GFP_OBJ);
	if (!q->wr) {
		mbcf_wr_free(q);
		return -ENOMEM;
	}
	return 0;
}

/*
 * An SRQ's ring: no private copies here, a claim copies the receive into
 * the claiming QP's slot (mbcf_wr_alloc_srq_slot).
 */
int mbcf_wr_alloc_srq(struct mbcf_wq *q, struct ib_ucontext *uctx, u32 n,
		      u32 stride, u32 max_sge)
{
	return mbcf_wr_alloc_ring(q, uctx, n, stride, max_sge);
}

/*
 * The queue is gone.  A process may keep the mapping (or, after its device
 * was removed, even its QP in libibverbs): mark the ring dead and leave
 * db_needed set, so a later post rings a doorbell that fails.
 */
void mbcf_wr_free(struct mbcf_wq *q)
{
	if (q->umap) {
		mbcf_ring_store(mbcf_ring_db(&q->ring), 1);
		mbcf_ring_store_release(mbcf_ring_flags(&q->ring), MBCF_RING_F_DEAD);
		mbcf_umap_remove(q->umap);
		q->umap = NULL;
	}
	kvfree(q->wr);
	q->wr = NULL;
	mbcf_uncharge(&q->wr_charge);
}

/* The slot a receive claimed from @qp's SRQ moves to (mbcf_wr_claim_srq). */
int mbcf_wr_alloc_srq_slot(struct mbcf_qp *qp)
{
	qp->srq_wr = kzalloc(sizeof(struct mbcf_wr_recv) +
			     qp->srq->rq.max_sge * sizeof(struct mbcf_sge),
			     MBCF_GFP_OBJ);
	return qp->srq_wr ? 0 : -ENOMEM;
}

/* ---- reading the rings ----------------------------------------------------- */

/* A doorbell of @qp's send (@send) or receive ring: it is consumed again. */
void mbcf_wr_doorbell(struct mbcf_qp *qp, bool send)
{
	lockdep_assert_held(&qp->lock);
	mbcf_ring_consumer_busy(send ? &qp->sq.ring : &qp->rq.ring);
}

/* The entries [rd, prod) of @q, read once: false if @prod is impossible. */
static bool mbcf_wq_count(const struct mbcf_wq *q, u32 *n)
{
	u32 prod = mbcf_ring_load_acquire(mbcf_ring_prod(&q->ring));
	u32 posted = prod - q->ring.idx, held = q->ring.rd - q->ring.idx;

	if (unlikely(posted > q->ring.mask + 1 || posted < held))
		return false;
	*n = posted - held;
	return true;
}

/*
 * New entries the producer published, [rd, prod): the producer's index is
 * read once and must lie between what we already read and what the ring
 * can hold.  Otherwise the ring is broken (and stays so until a reset) and
 * the QP fails with IB_EVENT_QP_FATAL.
 */
static int mbcf_wq_avail(struct mbcf_wq *q, u32 *n, bool *broke)
{
	*broke = false;
	if (unlikely(q->broken))
		return -EPROTO;
	if (unlikely(!mbcf_wq_count(q, n))) {
		q->broken = *broke = true;
		return -EPROTO;
	}
	return 0;
}

/*
 * mbcf_wq_avail() for a consumer that stops when the ring is empty: an
 * empty ring is marked idle (the next post rings the doorbell) unless
 * entries came meanwhile.  At most two reads of the producer's index: the
 * index only grows, so one that showed an entry to
 * mbcf_ring_consumer_idle() and none to the second read went back, and
 * the ring is broken.  A producer flipping its index cannot keep us here.
 */
static int mbcf_wq_avail_or_idle(struct mbcf_wq *q, u32 *n, bool *broke)
{
	int err = mbcf_wq_avail(q, n, broke);

	if (err || *n || mbcf_ring_consumer_idle(&q->ring))
		return err;
	err = mbcf_wq_avail(q, n, broke);
	if (!err && !*n) {
		q->broken = *broke = true;
		err = -EPROTO;
	}
	return err;
}

/* mbcf_wq_avail() of one of @qp's own rings: breaking it fails the QP. */
static int mbcf_wr_avail(struct mbcf_qp *qp, struct mbcf_wq *q, u32 *n)
{
	bool broke;
	int err = mbcf_wq_avail(q, n, &broke);

	if (broke)
		qp->pend |= MBCF_QP_PEND_FATAL;
	return err;
}

/*
 * Not an ib_wc_status: a request the provider could not have posted, the
 * ring protocol was broken.  It completes with IB_WC_LOC_QP_OP_ERR and
 * raises IB_EVENT_QP_FATAL (mbcf_wr_fail_head).
 */
#define MBCF_WR_MALFORMED	0xff

static const u8 mbcf_wr_ops[] = {
	[IB_UVERBS_WR_RDMA_WRITE] = MBCF_OP_WRITE,
	[IB_UVERBS_WR_RDMA_WRITE_WITH_IMM] = MBCF_OP_WRITE_IMM,
	[IB_UVERBS_WR_SEND] = MBCF_OP_SEND,
	[IB_UVERBS_WR_SEND_WITH_IMM] = MBCF_OP_SEND_IMM,
	[IB_UVERBS_WR_RDMA_READ] = MBCF_OP_READ_REQ,
	[IB_UVERBS_WR_ATOMIC_CMP_AND_SWP] = MBCF_OP_CMP_SWAP,
	[IB_UVERBS_WR_ATOMIC_FETCH_AND_ADD] = MBCF_OP_FETCH_ADD,
	[IB_UVERBS_WR_LOCAL_INV] = MBCF_OP_LOCAL,
	[IB_UVERBS_WR_BIND_MW] = MBCF_OP_LOCAL,
	[IB_UVERBS_WR_SEND_WITH_INV] = MBCF_OP_SEND_INV,
};

static u8 mbcf_wr_wc_opcode(u32 uverbs_op)
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
	case IB_UVERBS_WR_LOCAL_INV:
		return IB_WC_LOCAL_INV;
	case IB_UVERBS_WR_BIND_MW:
		return IB_WC_BIND_MW;
	case IB_WR_REG_MR:		/* kernel QPs only (frmr.c) */
		return IB_WC_REG_MR;
	default:
		return IB_WC_SEND;
	}
}

/*
 * Reads and atomics need a response: an unreliable QP has none (verbs); a
 * datagram QP only sends.
 */
static bool mbcf_wr_op_allowed(const struct mbcf_qp *qp, u8 op)
{
	if (qp->ud)
		return op == MBCF_OP_SEND || op == MBCF_OP_SEND_IMM;
	return qp->ibqp.qp_type != IB_QPT_UC ||
	       !(op == MBCF_OP_READ_REQ || op == MBCF_OP_CMP_SWAP ||
		 op == MBCF_OP_FETCH_ADD);
}

/*
 * A memory window bind or local invalidate: carried out by the core's
 * ops->local when its turn comes (mbcf_wr_local); a local invalidate
 * waits for every earlier request to complete (IBA 10.6.5.1).
 */
static u8 mbcf_wr_parse_local(const struct mbcf_send_wqe *h,
			      struct mbcf_wr_send *w, struct mbcf_wr *wr)
{
	if (h->send_flags & IB_SEND_INLINE)
		return MBCF_WR_MALFORMED;
	if (h->opcode == IB_UVERBS_WR_BIND_MW) {
		w->bind = (struct mbcf_mw_bind){
			.mw_rkey = h->mw_rkey,
			.new_rkey = h->rkey,
			.mr_lkey = h->bind.mr_lkey,
			.access = h->bind.access,
			.addr = h->remote_addr,
			.length = h->bind.length,
		};
	} else if (h->opcode == IB_WR_REG_MR) {	/* frmr.c */
		w->reg = (struct mbcf_frmr_reg){ h->rkey, h->bind.access };
	} else {
		w->inv_rkey = h->invalidate_rkey;
		wr->flags |= MBCF_WR_FENCE_ALL;
	}
	if (h->send_flags & IB_SEND_FENCE)
		wr->flags |= MBCF_WR_FENCE;
	wr->op = MBCF_OP_LOCAL;
	return IB_WC_SUCCESS;
}

/* Reads and atomics write the local buffer: it needs LOCAL_WRITE. */
static bool mbcf_wr_writes_local(u8 op)
{
	return op == MBCF_OP_READ_REQ || op == MBCF_OP_CMP_SWAP ||
	       op == MBCF_OP_FETCH_ADD;
}

/* Copy the SGE list (count already checked) and check every element. */
static u8 mbcf_wr_take_sges(struct mbcf_qp *qp, struct mbcf_wr_send *w,
			    const struct mbcf_send_wqe *e, u32 num_sge, u8 op,
			    u64 *len)
{
	int need = mbcf_wr_writes_local(op) ? IB_ACCESS_LOCAL_WRITE : 0;
	u32 i;

	memcpy(w->sge, e->sge, num_sge * sizeof(*w->sge));
	w->num_sge = num_sge;
	for (i = 0; i < num_sge; i++) {
		const struct mbcf_sge *s = &w->sge[i];

		*len += s->length;
		if (s->length && mbcf_mr_check_local(qp, s->lkey, s->addr,
						     s->length, need))
			return IB_WC_LOC_PROT_ERR;
	}
	return IB_WC_SUCCESS;
}

/*
 * Check the header copy @h of ring entry @e, fill the private slot @w and
 * the core request @wr.  Returns an ib_wc_status; w->wr_id and w->wc_op are
 * valid whatever it returns (a failed request still completes).
 */
static u8 mbcf_wr_parse_send(struct mbcf_qp *qp, const struct mbcf_send_wqe *h,
			     const struct mbcf_send_wqe *e,
			     struct mbcf_wr_send *w, struct mbcf_wr *wr)
{
	u64 len = 0;
	u8 op, st;

	w->wr_id = h->wr_id;
	w->wc_op = mbcf_wr_wc_opcode(h->opcode);
	w->flags = qp->sq_sig_all || (h->send_flags & IB_SEND_SIGNALED) ?
		   MBCF_WR_SIGNALED : 0;
	w->num_sge = 0;
	w->len = 0;
	op = h->opcode < ARRAY_SIZE(mbcf_wr_ops) ? mbcf_wr_ops[h->opcode] : 0;
	if (h->opcode == IB_WR_REG_MR && qp->kernel)	/* frmr.c */
		op = MBCF_OP_LOCAL;
	if (h->opcode == MBCF_WR_FIFO_PUSH)	/* fkey in rkey (fifo.c) */
		op = MBCF_OP_FIFO_PUSH;
	if (!op || !mbcf_wr_op_allowed(qp, op))
		return MBCF_WR_MALFORMED;
	memset(wr, 0, sizeof(*wr));
	if (op == MBCF_OP_LOCAL)
		return mbcf_wr_parse_local(h, w, wr);

	if (h->send_flags & IB_SEND_INLINE) {
		if (mbcf_wr_writes_local(op) || h->inline_len > qp->max_inline)
			return MBCF_WR_MALFORMED;
		memcpy(w->data, e->inline_data, h->inline_len);
		w->flags |= MBCF_WR_INLINE;
		len = h->inline_len;
	} else {
		if (h->num_sge > qp->sq.max_sge)
			return MBCF_WR_MALFORMED;
		st = mbcf_wr_take_sges(qp, w, e, h->num_sge, op, &len);
		if (st != IB_WC_SUCCESS)
			return st;
	}
	if (len > MBCF_MAX_MSG_SIZE)
		return IB_WC_LOC_LEN_ERR;
	if ((op == MBCF_OP_CMP_SWAP || op == MBCF_OP_FETCH_ADD) && len != 8)
		return IB_WC_LOC_LEN_ERR;
	w->len = len;

	wr->op = op;
	wr->len = len;
	wr->raddr = h->remote_addr;
	wr->rkey = h->rkey;
	if (op == MBCF_OP_SEND_INV)
		wr->imm = h->invalidate_rkey;
	else
		wr->imm = be32_to_cpu((__force __be32)h->imm_data_be);
	if (op == MBCF_OP_CMP_SWAP) {
		wr->compare = h->compare_add;
		wr->swap_add = h->swap;
	} else {
		wr->swap_add = h->compare_add;
	}
	if (h->send_flags & IB_SEND_SOLICITED)
		wr->flags |= MBCF_F_SOLICITED;
	if (h->send_flags & IB_SEND_FENCE)
		wr->flags |= MBCF_WR_FENCE;
	/* no one waits for its completion: its ACK may come late (core.h),
	 * if the quiet_tail parameter allows (kmod/main.c) */
	if (!(w->flags & MBCF_WR_SIGNALED) && READ_ONCE(mbcf_quiet_tail))
		wr->flags |= MBCF_WR_QUIET;
	return IB_WC_SUCCESS;
}

/* Hand a checked request to the core; an ib_wc_status. */
static u8 mbcf_wr_enqueue(struct mbcf_qp *qp, struct mbcf_wr *wr)
{
	switch (mbcf_conn_enqueue(&qp->conn, wr)) {
	case MBCF_POST_OK:
		return IB_WC_SUCCESS;
	case MBCF_POST_INVAL:
		/* everything else was checked: more frames than a message
		 * may have at this MTU (docs/protocol.md 2.6) */
		return IB_WC_LOC_LEN_ERR;
	default:
		return IB_WC_WR_FLUSH_ERR;	/* the connection failed */
	}
}

/*
 * A UD send, now (its slot is read): the address handle's address, the
 * datagram, and its completion, which releases the slot.  A handle that
 * is gone or another PD's fails the request (LOC_QP_OP_ERR, as rxe).  A
 * message larger than the port's active_mtu completes SUCCESS and sends
 * nothing (IBA C10-93.1.1, as rxe; counter tx_ud_oversize).
 */
static void mbcf_wr_send_dgram(struct mbcf_qp *qp, const struct mbcf_send_wqe *h,
			       const struct mbcf_wr *wr)
{
	struct mbcf_ud_dest to = {
		.remote_qpn = h->ud.remote_qpn & MBCF_QPN_MASK,
		.qkey = h->remote_qkey,
	};
	struct mbcf_ud_addr a;
	struct mbcf_cqe c = {
		.cookie = wr->cookie,
		.status = MBCF_WC_LOC_QP_OP_ERR,
	};

	if (mbcf_ah_lookup(qp->dev, h->ud.ah, qp->ibqp.pd, &a)) {
		mbcf_wr_complete(qp, &c);
		return;
	}
	/* a Q_Key with the high bit set stands for the QP's own (IBA 10.2.5) */
	if (to.qkey & 0x80000000)
		to.qkey = qp->attr.qkey;
	to.vtf = a.vtf;
	to.hop_limit = a.hop_limit;
	memcpy(to.sgid, a.sgid, 16);
	memcpy(to.dgid, a.dgid, 16);
	memcpy(qp->ud_dmac, a.dmac, ETH_ALEN);
	/* the bound is the port's active_mtu now, as ibv_query_port shows */
	mbcf_dgram_set_mtu(&qp->dgram, READ_ONCE(qp->dev->ndev->mtu));
	mbcf_dgram_send(&qp->dgram, wr, &to);
}

/*
 * Take the send request at sq.rd.  False if it failed: it stays at sq.rd
 * (its slot taken) and completes with its status after every earlier
 * request (mbcf_wr_fail_head), then the QP goes to the error state.
 */
static bool mbcf_wr_take_send(struct mbcf_qp *qp)
{
	struct mbcf_wq *q = &qp->sq;
	const struct mbcf_send_wqe *e = mbcf_ring_entry(&q->ring, q->ring.rd);
	struct mbcf_wr_send *w = mbcf_wr_send_at(q, q->ring.rd);
	struct mbcf_send_wqe h;
	struct mbcf_wr wr;
	u8 st;

	memcpy(&h, e, sizeof(h));	/* every header field is read here, once */
	st = mbcf_wr_parse_send(qp, &h, e, w, &wr);
	wr.cookie = q->ring.rd;
	if (st == IB_WC_SUCCESS && !qp->ud)
		st = mbcf_wr_enqueue(qp, &wr);
	if (st == IB_WC_SUCCESS && qp->ud) {
		/* sent (or failed) now: its completion releases the slot */
		mbcf_ring_read_next(&q->ring);
		mbcf_wr_send_dgram(qp, &h, &wr);
		return true;
	}
	if (st != IB_WC_SUCCESS) {
		qp->pend |= MBCF_QP_PEND_WQE;
		if (st == MBCF_WR_MALFORMED) {
			qp->pend |= MBCF_QP_PEND_WQE_FATAL;
			st = IB_WC_LOC_QP_OP_ERR;
		}
		qp->pend_status = st;
		return false;
	}
	mbcf_ring_read_next(&q->ring);
	return true;
}

/*
 * New send requests, or none: then the ring is marked idle (the next post
 * rings the doorbell), unless an acknowledgement (or a response, GO) is
 * bound to come soon and settle the QP again: that pulls whatever was
 * posted meanwhile, so a streaming sender costs no system call per
 * request.  Quiet (unsignaled) messages at the end of a burst ask for no
 * acknowledgement (docs/protocol.md 6.1 rule 3), and theirs comes late: a
 * post after them rings the doorbell, else it would wait for that late ACK.
 */
static int mbcf_wr_sq_avail(struct mbcf_qp *qp, u32 *n)
{
	struct mbcf_wq *q = &qp->sq;
	bool broke;
	int err;

	if (mbcf_conn_progress_due(&qp->conn))
		err = mbcf_wq_avail(q, n, &broke);
	else
		err = mbcf_wq_avail_or_idle(q, n, &broke);
	if (broke)
		qp->pend |= MBCF_QP_PEND_FATAL;
	return err;
}

/*
 * Hand the core what the send ring holds; returns how many requests.
 * Bounded by one ring's worth per call whatever the producer does: an RC
 * or UC request keeps its slot until it completes, which cannot happen
 * while we hold the lock, but a datagram completes as it is taken and
 * frees its slot at once, so a producer racing us could refill the ring
 * for ever.  Datagrams also stop at a transmit burst (their frames are
 * queued on qp->txq like the stream's).  *@more says requests were left
 * for the next call (qp.c defers it to process context).  qp->sq_pull_max
 * keeps the most taken by one call, for `rdma res show qp -dd`.
 */
int mbcf_wr_pull_sq(struct mbcf_qp *qp, bool *more)
{
	u32 budget = qp->sq.ring.mask + 1;
	u32 queued = 0, n;

	lockdep_assert_held(&qp->lock);
	while (queued < budget && !mbcf_wr_sq_avail(qp, &n) && n) {
		n = min(n, budget - queued);
		for (; n; n--) {
			if (qp->ud && mbcf_net_queued(qp) >= MBCF_QP_TX_BURST)
				goto out;
			if (!mbcf_wr_take_send(qp))
				goto out_max;
			queued++;
		}
	}
	/*
	 * A ring's worth taken: the producer is ahead, and process context
	 * pulls again later, sparing it doorbells.  Not a one-entry ring
	 * (latency tests): that is every post, and a deferred pull after
	 * each costs a wake-up and two context switches; looked at once,
	 * it has more only if a datagram's freed slot was refilled.
	 */
	if (queued < budget ||
	    (budget == 1 && (mbcf_wr_sq_avail(qp, &n) || !n)))
		goto out_max;
out:
	*more = true;	/* ring left non-empty, or not looked at again */
out_max:
	qp->sq_pull_max = max(qp->sq_pull_max, queued);
	return queued;
}

/* ---- completions ------------------------------------------------------------- */

/* Into @cq, unless the QP is being destroyed (no completions after that). */
static int mbcf_wr_push(struct mbcf_qp *qp, struct ib_cq *cq,
			const struct ib_wc *wc, bool solicited)
{
	if (qp->dying)
		return 0;
	return mbcf_cq_push(to_mbcf_cq(cq), wc, solicited);
}

static int mbcf_wr_push_send(struct mbcf_qp *qp, const struct mbcf_wr_send *w,
			     u8 status, u32 byte_len)
{
	struct ib_wc wc = {
		.wr_id = w->wr_id,
		.status = status,
		.opcode = w->wc_op,
		.byte_len = byte_len,
		.qp = &qp->ibqp,
		.port_num = 1,
	};

	if (status == IB_WC_SUCCESS && !(w->flags & MBCF_WR_SIGNALED))
		return 0;	/* unsignaled: the slot is free, no CQE */
	return mbcf_wr_push(qp, qp->ibqp.send_cq, &wc, false);
}

/*
 * The failed request at sq.rd completes (with WR_FLUSH_ERR if the QP
 * failed meanwhile for another reason) once nothing before it is
 * outstanding; then the QP goes to the error state.
 */
void mbcf_wr_fail_head(struct mbcf_qp *qp)
{
	struct mbcf_wq *q = &qp->sq;
	u8 st = qp->pend_status;
	bool fatal = qp->pend & MBCF_QP_PEND_WQE_FATAL;

	lockdep_assert_held(&qp->lock);
	qp->pend &= ~(MBCF_QP_PEND_WQE | MBCF_QP_PEND_WQE_FATAL);
	if (!qp->ud && qp->conn.state != MBCF_CONN_RTS)
		st = IB_WC_WR_FLUSH_ERR;
	mbcf_wr_push_send(qp, mbcf_wr_send_at(q, q->ring.rd), st, 0);
	mbcf_ring_read_next(&q->ring);
	mbcf_ring_release(&q->ring, 1);
	qp->pend |= fatal && st != IB_WC_WR_FLUSH_ERR ? MBCF_QP_PEND_FATAL :
							MBCF_QP_PEND_ERROR;
}

static const u8 mbcf_wr_wc_status[] = {
	[MBCF_WC_SUCCESS] = IB_WC_SUCCESS,
	[MBCF_WC_REM_ACCESS_ERR] = IB_WC_REM_ACCESS_ERR,
	[MBCF_WC_REM_INV_REQ_ERR] = IB_WC_REM_INV_REQ_ERR,
	[MBCF_WC_REM_OP_ERR] = IB_WC_REM_OP_ERR,
	[MBCF_WC_RETRY_EXC_ERR] = IB_WC_RETRY_EXC_ERR,
	[MBCF_WC_RNR_RETRY_EXC_ERR] = IB_WC_RNR_RETRY_EXC_ERR,
	[MBCF_WC_LOC_LEN_ERR] = IB_WC_LOC_LEN_ERR,
	[MBCF_WC_LOC_PROT_ERR] = IB_WC_LOC_PROT_ERR,
	[MBCF_WC_WR_FLUSH_ERR] = IB_WC_WR_FLUSH_ERR,
	[MBCF_WC_MW_BIND_ERR] = IB_WC_MW_BIND_ERR,
	[MBCF_WC_LOC_QP_OP_ERR] = IB_WC_LOC_QP_OP_ERR,
};

static u8 mbcf_wr_map_status(u8 st)
{
	return st < ARRAY_SIZE(mbcf_wr_wc_status) ? mbcf_wr_wc_status[st] :
						      IB_WC_GENERAL_ERR;
}

/* The core completes requests in posting order: the oldest slot held. */
static int mbcf_wr_complete_send(struct mbcf_qp *qp, const struct mbcf_cqe *c)
{
	struct mbcf_wq *q = &qp->sq;
	const struct mbcf_wr_send *w = mbcf_wr_send_at(q, c->cookie);
	u32 byte_len = 0;

	mbcf_ring_release(&q->ring, 1);
	if (w->wc_op == IB_WC_RDMA_READ)
		byte_len = c->byte_len;
	else if (w->wc_op == IB_WC_COMP_SWAP || w->wc_op == IB_WC_FETCH_ADD)
		byte_len = 8;
	/* a connection fails by itself; a datagram QP by its requests */
	if (qp->ud && c->status != MBCF_WC_SUCCESS)
		qp->pend |= MBCF_QP_PEND_ERROR;
	return mbcf_wr_push_send(qp, w, mbcf_wr_map_status(c->status), byte_len);
}

/* The receive a message claimed: in the RQ's slot, or moved from the SRQ. */
static struct mbcf_wr_recv *mbcf_wr_claimed(struct mbcf_qp *qp, u64 cookie)
{
	if (qp->srq)
		return (struct mbcf_wr_recv *)qp->srq_wr;
	return mbcf_wr_recv_at(&qp->rq, cookie);
}

static int mbcf_wr_complete_recv(struct mbcf_qp *qp, const struct mbcf_cqe *c)
{
	const struct mbcf_wr_recv *w = mbcf_wr_claimed(qp, c->cookie);
	struct ib_wc wc = {
		.wr_id = w->wr_id,
		.status = mbcf_wr_map_status(c->status),
		.opcode = c->op == MBCF_OP_WRITE_IMM ? IB_WC_RECV_RDMA_WITH_IMM :
						      IB_WC_RECV,
		.byte_len = c->byte_len,
		.qp = &qp->ibqp,
		.src_qp = c->flags & MBCF_CQE_GRH ? c->src_qpn : qp->dest_qpn,
		.port_num = 1,
	};

	if (!qp->srq)	/* an SRQ's slot was given back when claimed */
		mbcf_ring_release(&qp->rq.ring, 1);
	if (c->flags & MBCF_CQE_IMM) {
		wc.ex.imm_data = cpu_to_be32(c->imm);
		wc.wc_flags |= IB_WC_WITH_IMM;
	}
	if (c->flags & MBCF_CQE_INV) {
		wc.ex.invalidate_rkey = c->imm;
		wc.wc_flags |= IB_WC_WITH_INVALIDATE;
	}
	/*
	 * A datagram: a GRH in front of the data, RoCE v1 (IB layout), whose
	 * GIDs the MAD layer looks up among the port's RoCE v1 GIDs.
	 */
	if (c->flags & MBCF_CQE_GRH) {
		wc.wc_flags |= IB_WC_GRH | IB_WC_WITH_NETWORK_HDR_TYPE;
		wc.network_hdr_type = RDMA_NETWORK_ROCE_V1;
	}
	return mbcf_wr_push(qp, qp->ibqp.recv_cq, &wc,
			    c->flags & MBCF_CQE_SOLICITED);
}

/* ops->local: the bind or invalidate of request @cookie, now. */
int mbcf_wr_local(struct mbcf_qp *qp, u64 cookie)
{
	const struct mbcf_wr_send *w = mbcf_wr_send_at(&qp->sq, cookie);
	int err;

	lockdep_assert_held(&qp->lock);
	if (w->wc_op == IB_WC_BIND_MW)
		return mbcf_mw_bind(qp, &w->bind) ? MBCF_WC_MW_BIND_ERR :
						    MBCF_WC_SUCCESS;
	if (w->wc_op == IB_WC_REG_MR)		/* frmr.c */
		return mbcf_frmr_reg(qp, &w->reg) ? MBCF_WC_LOC_QP_OP_ERR :
						    MBCF_WC_SUCCESS;
	err = mbcf_frmr_invalidate(qp, w->inv_rkey, false);
	if (err == -ENOENT)			/* no FRWR MR: a window's */
		err = mbcf_mw_invalidate(qp, w->inv_rkey, false);
	return err ? MBCF_WC_LOC_QP_OP_ERR : MBCF_WC_SUCCESS;
}

/* ops->complete: 0, or -ENOSPC when the CQ overran (the core fails). */
int mbcf_wr_complete(struct mbcf_qp *qp, const struct mbcf_cqe *c)
{
	lockdep_assert_held(&qp->lock);
	if (c->flags & MBCF_CQE_RECV)
		return mbcf_wr_complete_recv(qp, c);
	return mbcf_wr_complete_send(qp, c);
}

/* ---- flush and reset ------------------------------------------------------- */

/* Up to a ring's worth of not yet read entries complete with FLUSH_ERR. */
static bool mbcf_wr_flush_queue(struct mbcf_qp *qp, struct mbcf_wq *q,
				bool send)
{
	struct ib_wc wc = {
		.status = IB_WC_WR_FLUSH_ERR,
		.qp = &qp->ibqp,
		.port_num = 1,
	};
	const void *e;
	u32 n;

	if (mbcf_wr_avail(qp, q, &n))
		return false;	/* broken: what it holds is abandoned */
	for (; n; n--) {
		e = mbcf_ring_entry(&q->ring, q->ring.rd);
		if (send) {
			const struct mbcf_send_wqe *s = e;

			wc.wr_id = READ_ONCE(s->wr_id);
			wc.opcode = mbcf_wr_wc_opcode(READ_ONCE(s->opcode));
		} else {
			wc.wr_id = READ_ONCE(((const struct mbcf_recv_wqe *)e)->wr_id);
			wc.opcode = IB_WC_RECV;
		}
		mbcf_ring_consume(&q->ring);
		mbcf_wr_push(qp, send ? qp->ibqp.send_cq : qp->ibqp.recv_cq,
			     &wc, false);
	}
	return !mbcf_ring_consumer_idle(&q->ring);
}

/*
 * In the error state every request still in a ring completes with
 * IB_WC_WR_FLUSH_ERR, including those posted after the error (verbs).
 * One ring's worth per queue and call: a process posting as fast as we
 * flush must not keep us here with bottom halves off.  Returns true if
 * more is left (the caller comes back from process context).
 */
bool mbcf_wr_flush(struct mbcf_qp *qp)
{
	bool more = mbcf_wr_flush_queue(qp, &qp->sq, true);

	lockdep_assert_held(&qp->lock);
	/* an SRQ's receives stay for the other QPs (verbs) */
	if (qp->srq)
		return more;
	return mbcf_wr_flush_queue(qp, &qp->rq, false) || more;
}

/*
 * A reset QP has no requests: consume whatever the rings hold, at the
 * producer's index (never rewind: the provider keeps its own), and forget
 * that a ring was broken.
 */
void mbcf_wr_reset(struct mbcf_qp *qp)
{
	struct mbcf_wq *qs[] = { &qp->sq, &qp->rq };
	unsigned int i;

	lockdep_assert_held(&qp->lock);
	for (i = 0; i < (qp->srq ? 1 : ARRAY_SIZE(qs)); i++) {
		struct mbcf_ring_end *r = &qs[i]->ring;

		r->idx = mbcf_ring_load_acquire(mbcf_ring_prod(r));
		r->rd = r->idx;
		mbcf_ring_store_release(mbcf_ring_cons(r), r->idx);
		qs[i]->broken = false;
	}
	qp->pend = 0;
}

/* ---- receives ---------------------------------------------------------------- */

/*
 * Copy ring entry @e of @q, whose header @h was read once, into @w: at most
 * @q's max_sge SGEs (false if more: not from the provider), and the
 * receive's capacity.
 */
static bool mbcf_wr_take_recv(const struct mbcf_wq *q,
			      const struct mbcf_recv_wqe *e,
			      const struct mbcf_recv_wqe *h,
			      struct mbcf_wr_recv *w)
{
	u64 total = 0;
	u32 i;

	if (h->num_sge > q->max_sge)
		return false;
	w->wr_id = h->wr_id;
	w->num_sge = h->num_sge;
	memcpy(w->sge, e->sge, h->num_sge * sizeof(*w->sge));
	for (i = 0; i < w->num_sge; i++)
		total += w->sge[i].length;
	w->cap = min_t(u64, total, MBCF_MAX_MSG_SIZE);
	return true;
}

/*
 * The oldest receive of @qp's SRQ, moved to qp->srq_wr; its slot goes back
 * to the producer now.  A broken SRQ ring (indices that make no sense, an
 * entry the provider could not have written) fails every claim: the QP
 * answers with a remote operation error and fails with IB_EVENT_QP_FATAL;
 * the claim that finds it broken raises IB_EVENT_SRQ_ERR (once per SRQ)
 * and has the other attached QPs failed from process context (both
 * through qp->pend: qp.c).  Taking the SRQ below its armed limit raises
 * IB_EVENT_SRQ_LIMIT_REACHED.  Events go out after qp->lock is dropped
 * (qp->pend).
 */
static int mbcf_wr_claim_srq(struct mbcf_qp *qp, u32 *cap)
{
	struct mbcf_srq *srq = qp->srq;
	struct mbcf_wr_recv *w = (struct mbcf_wr_recv *)qp->srq_wr;
	struct mbcf_wq *q = &srq->rq;
	const struct mbcf_recv_wqe *e;
	struct mbcf_recv_wqe h;
	int r = MBCF_CLAIM_OK;
	bool broke;
	u32 n;

	spin_lock(&srq->lock);
	if (mbcf_wq_avail_or_idle(q, &n, &broke)) {
		r = MBCF_CLAIM_BAD;
		goto out;
	}
	if (!n) {
		r = MBCF_CLAIM_NONE;	/* a doorbell wakes every QP */
		goto out;
	}
	e = mbcf_ring_entry(&q->ring, q->ring.rd);
	memcpy(&h, e, sizeof(h));
	if (!mbcf_wr_take_recv(q, e, &h, w)) {
		q->broken = broke = true;
		r = MBCF_CLAIM_BAD;
		goto out;
	}
	mbcf_ring_consume(&q->ring);
	*cap = w->cap;
	if (srq->limit && n - 1 < srq->limit) {
		srq->limit = 0;		/* one event per arming (verbs) */
		qp->pend |= MBCF_QP_PEND_SRQ_LIMIT;
	}
out:
	spin_unlock(&srq->lock);
	if (r == MBCF_CLAIM_BAD)
		qp->pend |= MBCF_QP_PEND_FATAL;
	if (broke)	/* qp.c raises it and fails the other QPs */
		qp->pend |= MBCF_QP_PEND_SRQ_ERR;
	return r;
}

/*
 * A doorbell of @srq (process context): the kernel is consuming again, and
 * the ring is checked now, so a producer index user space broke while the
 * SRQ was idle fails its QPs at once.  Returns true if the ring is broken;
 * *broke is set if this call found it so (raise IB_EVENT_SRQ_ERR).
 */
bool mbcf_wr_srq_posted(struct mbcf_srq *srq, bool *broke)
{
	bool broken;
	u32 n;

	spin_lock_bh(&srq->lock);
	mbcf_ring_consumer_busy(&srq->rq.ring);
	broken = mbcf_wq_avail(&srq->rq, &n, broke) != 0;
	spin_unlock_bh(&srq->lock);
	return broken;
}

/* mbcf_wr_peek_recv() on one receive queue, its lock held. */
static int mbcf_wr_peek_ring(struct mbcf_wq *q, u32 *cap)
{
	const struct mbcf_recv_wqe *e;
	u64 total = 0;
	u32 n, i;

	if (q->broken || !mbcf_wq_count(q, &n) || !n)
		return MBCF_CLAIM_NONE;
	e = mbcf_ring_entry(&q->ring, q->ring.rd);
	n = READ_ONCE(e->num_sge);
	if (n > q->max_sge)
		return MBCF_CLAIM_BAD;
	for (i = 0; i < n; i++)
		total += READ_ONCE(e->sge[i].length);
	*cap = min_t(u64, total, MBCF_MAX_MSG_SIZE);
	return MBCF_CLAIM_OK;
}

/*
 * ops->recv_peek: the capacity of the receive a claim would take next,
 * read once from its ring entry and left posted; anything but
 * MBCF_CLAIM_OK (nothing posted, a broken ring or entry) leaves the
 * verdict to the claim, which reads the ring again and acts on it.  User
 * space may rewrite the entry in between: the core checks the length again
 * after the claim.
 */
int mbcf_wr_peek_recv(struct mbcf_qp *qp, u32 *cap)
{
	int r;

	lockdep_assert_held(&qp->lock);
	if (!qp->srq)
		return mbcf_wr_peek_ring(&qp->rq, cap);
	spin_lock(&qp->srq->lock);
	r = mbcf_wr_peek_ring(&qp->srq->rq, cap);
	spin_unlock(&qp->srq->lock);
	return r;
}

/* ops->recv_claim: the oldest posted receive, copied and checked. */
int mbcf_wr_claim_recv(struct mbcf_qp *qp, u64 *cookie, u32 *cap)
{
	struct mbcf_wq *q = &qp->rq;
	const struct mbcf_recv_wqe *e;
	struct mbcf_wr_recv *w;
	struct mbcf_recv_wqe h;
	bool broke;
	int err;
	u32 n;

	lockdep_assert_held(&qp->lock);
	if (qp->srq) {
		*cookie = 0;
		return mbcf_wr_claim_srq(qp, cap);
	}
	err = mbcf_wq_avail_or_idle(q, &n, &broke);
	if (broke)
		qp->pend |= MBCF_QP_PEND_FATAL;
	if (err)
		return MBCF_CLAIM_BAD;
	if (!n)
		return MBCF_CLAIM_NONE;	/* the core sends STOP */
	e = mbcf_ring_entry(&q->ring, q->ring.rd);
	memcpy(&h, e, sizeof(h));
	w = mbcf_wr_recv_at(q, q->ring.rd);
	if (!mbcf_wr_take_recv(q, e, &h, w)) {
		qp->pend |= MBCF_QP_PEND_FATAL;	/* not from the provider */
		return MBCF_CLAIM_BAD;
	}
	*cookie = q->ring.rd;
	*cap = w->cap;
	/* The slot stays taken until the receive completes. */
	mbcf_ring_read_next(&q->ring);
	return MBCF_CLAIM_OK;
}

/* ops->recv_write: within the claimed receive's cap (the core checked). */
int mbcf_wr_scatter_recv(struct mbcf_qp *qp, u64 cookie, u32 offset,
			 const u8 *src, u32 len)
{
	const struct mbcf_wr_recv *w = mbcf_wr_claimed(qp, cookie);

	lockdep_assert_held(&qp->lock);
	/* an SRQ's receives name memory of the SRQ's PD (verbs) */
	return mbcf_mr_scatter(qp, qp->srq ? qp->srq->ibsrq.pd : qp->ibqp.pd,
			       w->sge, w->num_sge, offset, src, len);
}

/* ops->resp_data: read/atomic response data into the request's buffer. */
int mbcf_wr_scatter_resp(struct mbcf_qp *qp, u64 cookie, u32 offset,
			 const u8 *src, u32 len)
{
	const struct mbcf_wr_send *w = mbcf_wr_send_at(&qp->sq, cookie);

	lockdep_assert_held(&qp->lock);
	if (w->flags & MBCF_WR_INLINE)
		return -EINVAL;
	return mbcf_mr_scatter(qp, qp->ibqp.pd, w->sge, w->num_sge,
			       offset, src, len);
}

/* ---- payloads of frames we send ---------------------------------------------- */

/*
 * Can the payload be referenced in registered pages (zero-copy)?  Not a UC
 * message's, nor a datagram's: they complete when their frames are built,
 * long before the netdev or the peer has read them out of our pages (a
 * qdisc, the peer's backlog), and verbs lets the application reuse the
 * buffer at once.  An RC request completes only once acknowledged.
 */
bool mbcf_wr_payload_in_pages(struct mbcf_qp *qp, const struct mbcf_payload *pl)
{
	lockdep_assert_held(&qp->lock);
	if (pl->kind == MBCF_PL_TARGET)
		return true;
	return pl->kind == MBCF_PL_WR && qp->ibqp.qp_type == IB_QPT_RC &&
	       !(mbcf_wr_send_at(&qp->sq, pl->cookie)->flags & MBCF_WR_INLINE);
}

/* Copy the payload to @dst: 0, or an error from the MR lookup. */
int mbcf_wr_payload_copy(struct mbcf_qp *qp, const struct mbcf_payload *pl,
			 u8 *dst)
{
	const struct mbcf_wr_send *w;

	lockdep_assert_held(&qp->lock);
	switch (pl->kind) {
	case MBCF_PL_WR:
		w = mbcf_wr_send_at(&qp->sq, pl->cookie);
		if (!(w->flags & MBCF_WR_INLINE))
			return mbcf_mr_gather(qp, w->sge, w->num_sge,
					      pl->offset, dst, pl->len);
		if (pl->offset > w->len || pl->len > w->len - pl->offset)
			return -EINVAL;
		memcpy(dst, w->data + pl->offset, pl->len);
		return 0;
	case MBCF_PL_TARGET:
		return mbcf_mr_copy_out(qp, pl->rkey, pl->va, dst, pl->len,
					IB_ACCESS_REMOTE_READ);
	default:
		return pl->len ? -EINVAL : 0;
	}
}

/* Reference the payload's pages instead (see mbcf_mr_ref_pages()). */
int mbcf_wr_payload_pages(struct mbcf_qp *qp, const struct mbcf_payload *pl,
			  struct mbcf_spans *sp)
{
	const struct mbcf_wr_send *w;

	lockdep_assert_held(&qp->lock);
	if (pl->kind == MBCF_PL_TARGET)
		return mbcf_mr_ref_pages(qp, pl->rkey, pl->va, pl->len,
					 IB_ACCESS_REMOTE_READ, sp);
	w = mbcf_wr_send_at(&qp->sq, pl->cookie);
	return mbcf_mr_gather_pages(qp, w->sge, w->num_sge, pl->offset, pl->len,
				    sp);
}

/* ---- a kernel consumer's posts --------------------------------------------- */

/*
 * post_send of a kernel QP: the requests become send entries, the same the
 * provider writes, in the QP's kernel ring; tx_work takes them like a
 * doorbell would (post_send may come with interrupts off, so nothing here
 * takes the QP's lock).  The entries go through every check of wr.c too.
 */
static int mbcf_wr_kentry(struct mbcf_qp *qp, const struct ib_send_wr *wr,
			  struct mbcf_send_wqe *e)
{
	u32 i, off = 0;

	if (wr->opcode > IB_WR_ATOMIC_FETCH_AND_ADD &&
	    wr->opcode != IB_WR_LOCAL_INV && wr->opcode != IB_WR_SEND_WITH_INV &&
	    wr->opcode != IB_WR_REG_MR)
		return -EINVAL;		/* integrity and the like: not offered */
	if (wr->num_sge < 0 || (!(wr->send_flags & IB_SEND_INLINE) &&
				wr->num_sge > qp->sq.max_sge))
		return -EINVAL;
	memset(e, 0, sizeof(*e));
	e->wr_id = wr->wr_id;
	e->opcode = wr->opcode;
	e->send_flags = wr->send_flags;
	if (wr->opcode == IB_WR_REG_MR)		/* frmr.c */
		return mbcf_frmr_kentry(qp, reg_wr(wr), e);
	if (wr->opcode == IB_WR_SEND_WITH_IMM ||
	    wr->opcode == IB_WR_RDMA_WRITE_WITH_IMM)
		e->imm_data_be = (__force u32)wr->ex.imm_data;
	else if (wr->opcode == IB_WR_LOCAL_INV ||
		 wr->opcode == IB_WR_SEND_WITH_INV)
		e->invalidate_rkey = wr->ex.invalidate_rkey;
	if (qp->ud) {
		e->ud.ah = mbcf_ah_num(ud_wr(wr)->ah);
		e->ud.remote_qpn = ud_wr(wr)->remote_qpn;
		e->remote_qkey = ud_wr(wr)->remote_qkey;
	} else if (wr->opcode == IB_WR_ATOMIC_CMP_AND_SWP ||
		   wr->opcode == IB_WR_ATOMIC_FETCH_AND_ADD) {
		e->remote_addr = atomic_wr(wr)->remote_addr;
		e->rkey = atomic_wr(wr)->rkey;
		e->compare_add = atomic_wr(wr)->compare_add;
		e->swap = atomic_wr(wr)->swap;
	} else if (wr->opcode != IB_WR_SEND && wr->opcode != IB_WR_SEND_WITH_IMM &&
		   wr->opcode != IB_WR_LOCAL_INV &&
		   wr->opcode != IB_WR_SEND_WITH_INV) {
		e->remote_addr = rdma_wr(wr)->remote_addr;
		e->rkey = rdma_wr(wr)->rkey;
	}
	if (!(wr->send_flags & IB_SEND_INLINE)) {
		e->num_sge = wr->num_sge;
		for (i = 0; i < wr->num_sge; i++)
			e->sge[i] = (struct mbcf_sge){ wr->sg_list[i].addr,
				wr->sg_list[i].length, wr->sg_list[i].lkey };
		return 0;
	}
	/* kernel inline data is kernel memory the caller may reuse at once */
	for (i = 0; i < wr->num_sge; i++) {
		if (wr->sg_list[i].length > qp->max_inline - off)
			return -EINVAL;
		memcpy(e->inline_data + off,
		       (void *)(uintptr_t)wr->sg_list[i].addr,
		       wr->sg_list[i].length);
		off += wr->sg_list[i].length;
	}
	e->inline_len = off;
	return 0;
}

int mbcf_wr_kpost_send(struct mbcf_qp *qp, const struct ib_send_wr *wr,
		       const struct ib_send_wr **bad_wr)
{
	unsigned long irqf;
	bool corrupt;
	void *e;
	int err = 0;

	spin_lock_irqsave(&qp->klock, irqf);
	for (; wr; wr = wr->next) {
		e = mbcf_ring_produce_slot(&qp->ksq, &corrupt);
		err = e ? mbcf_wr_kentry(qp, wr, e) : -ENOMEM;
		if (err) {
			*bad_wr = wr;
			break;
		}
		mbcf_ring_produce(&qp->ksq);
	}
	spin_unlock_irqrestore(&qp->klock, irqf);
	return err;
}

/* Receive entries into a kernel consumer's ring @r (a QP's RQ, an SRQ). */
static int mbcf_wr_kpost_ring(spinlock_t *lock, struct mbcf_ring_end *r,
			      u32 max_sge, const struct ib_recv_wr *wr,
			      const struct ib_recv_wr **bad_wr)
{
	struct mbcf_recv_wqe *e;
	unsigned long irqf;
	bool corrupt;
	int err = 0;
	u32 i;

	spin_lock_irqsave(lock, irqf);
	for (; wr; wr = wr->next) {
		e = mbcf_ring_produce_slot(r, &corrupt);
		if (!e || wr->num_sge < 0 || wr->num_sge > max_sge) {
			err = e ? -EINVAL : -ENOMEM;
			*bad_wr = wr;
			break;
		}
		e->wr_id = wr->wr_id;
		e->num_sge = wr->num_sge;
		e->reserved = 0;
		for (i = 0; i < wr->num_sge; i++)
			e->sge[i] = (struct mbcf_sge){ wr->sg_list[i].addr,
				wr->sg_list[i].length, wr->sg_list[i].lkey };
		mbcf_ring_produce(r);
	}
	spin_unlock_irqrestore(lock, irqf);
	return err;
}

int mbcf_wr_kpost_recv(struct mbcf_qp *qp, const struct ib_recv_wr *wr,
		       const struct ib_recv_wr **bad_wr)
{
	if (qp->srq) {		/* its receives go to the SRQ (verbs) */
		*bad_wr = wr;
		return -EINVAL;
	}
	return mbcf_wr_kpost_ring(&qp->klock, &qp->krq, qp->rq.max_sge, wr,
				  bad_wr);
}

int mbcf_wr_kpost_srq(struct mbcf_srq *srq, const struct ib_recv_wr *wr,
		      const struct ib_recv_wr **bad_wr)
{
	return mbcf_wr_kpost_ring(&srq->klock, &srq->kring, srq->rq.max_sge,
				  wr, bad_wr);
}
