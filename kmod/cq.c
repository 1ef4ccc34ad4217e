// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Completion queues: a ring the kernel produces into.  A user CQ's ring is
 * mapped by the provider, which polls it without a system call; its entries
 * are struct ib_uverbs_wc.  A kernel consumer's CQ (the MAD layer, kernel
 * ULPs) keeps struct ib_wc entries in a ring of kernel memory, read by
 * poll_cq.  Several QPs may complete into one CQ from different CPUs,
 * hence the CQ's own lock, always taken inside a QP's lock, never the
 * other way round.
 */
#include <linux/log2.h>
#include <rdma/ib_user_verbs.h>
#include <rdma/uverbs_ioctl.h>

#include "mbcf.h"

static_assert(sizeof(struct ib_uverbs_wc) == MBCF_CQE_SIZE);

/* A kernel CQ's entries: struct ib_wc, with the ring's alignment. */
#define MBCF_KCQE_SIZE	ALIGN(sizeof(struct ib_wc), 16)

/* libibverbs' IBV_WC_* flag values, which a user CQE carries. */
#define MBCF_UWC_GRH		(1 << 0)
#define MBCF_UWC_WITH_IMM	(1 << 1)
#define MBCF_UWC_WITH_INV	(1 << 3)

/*
 * A ring of @n entries: mapped by user space (@udata, described in @ri),
 * or a kernel consumer's (NULL @udata).
 */
static struct mbcf_umap *mbcf_cq_umap(struct ib_udata *udata, u32 n, u32 stride,
				      struct mbcf_ring_info *ri)
{
	struct mbcf_ucontext *uc = udata ?
		rdma_udata_to_drv_context(udata, struct mbcf_ucontext, ibuc) : NULL;
	struct mbcf_umap *m;

	m = mbcf_umap_create(uc ? &uc->ibuc : NULL,
			     MBCF_RING_ENTRIES_OFF + (size_t)n * stride);
	if (IS_ERR(m) || !uc)
		return m;
	ri->mmap_offset = mbcf_umap_offset(m);
	ri->mmap_len = m->len;
	ri->num_entries = n;
	ri->stride = stride;
	return m;
}

int mbcf_cq_create(struct ib_cq *ibcq, const struct ib_cq_init_attr *attr,
		   struct ib_udata *udata)
{
	struct mbcf_dev *dev = to_mbcf_dev(ibcq->device);
	struct mbcf_cq *cq = to_mbcf_cq(ibcq);
	struct mbcf_create_cq_resp resp = {};
	u32 n;
	int err;

	if (attr->flags || attr->cqe < 1 || attr->cqe > MBCF_MAX_CQE)
		return -EINVAL;
	if (udata && udata->outlen < sizeof(resp))
		return -EINVAL;
	err = mbcf_res_get(dev, udata, MBCF_RES_CQ, &cq->owner);
	if (err)
		return err;

	n = roundup_pow_of_two(attr->cqe);
	cq->kernel = !udata;
	cq->umap = mbcf_cq_umap(udata, n, cq->kernel ? MBCF_KCQE_SIZE :
						       MBCF_CQE_SIZE, &resp.ring);
	if (IS_ERR(cq->umap)) {
		err = PTR_ERR(cq->umap);
		cq->umap = NULL;
		goto err_count;
	}
	spin_lock_init(&cq->lock);
	mbcf_ring_init(&cq->ring, cq->umap->buf, n,
		       cq->kernel ? MBCF_KCQE_SIZE : MBCF_CQE_SIZE, 0);
	cq->poll = cq->ring;	/* a kernel CQ's consumer end */
	ibcq->cqe = n;
	if (udata) {
		err = ib_copy_to_udata(udata, &resp, sizeof(resp));
		if (err)
			goto err_umap;
	}
	return 0;

err_umap:
	mbcf_umap_remove(cq->umap);
err_count:
	mbcf_res_put(dev, cq->owner, MBCF_RES_CQ);
	return err;
}

/*
 * ibv_resize_cq: a new ring holding the completions not yet polled, in
 * order, at its start.  The provider calls this with its pollers stopped,
 * so the consumer index in the old ring is final; completions that come
 * meanwhile wait for cq->lock and land in the new ring.  EINVAL below the
 * number of completions waiting (verbs), or when the consumer index makes
 * no sense.
 */
int mbcf_cq_resize(struct ib_cq *ibcq, int cqe, struct ib_udata *udata)
{
	struct mbcf_cq *cq = to_mbcf_cq(ibcq);
	struct mbcf_resize_cq_resp resp = {};
	struct mbcf_ring_end next;
	struct mbcf_umap *m, *old;
	unsigned long irqf;
	u32 n, cons, waiting, i;

	if (!udata || udata->outlen < sizeof(resp))
		return -EINVAL;
	if (cqe < 1 || cqe > MBCF_MAX_CQE)
		return -EINVAL;
	n = roundup_pow_of_two(cqe);
	m = mbcf_cq_umap(udata, n, MBCF_CQE_SIZE, &resp.ring);
	if (IS_ERR(m))
		return PTR_ERR(m);
	mbcf_ring_init(&next, m->buf, n, MBCF_CQE_SIZE, 0);

	spin_lock_irqsave(&cq->lock, irqf);
	cons = mbcf_ring_load_acquire(mbcf_ring_cons(&cq->ring));
	waiting = cq->ring.idx - cons;
	if (waiting > cq->ring.mask + 1 || waiting > n) {
		spin_unlock_irqrestore(&cq->lock, irqf);
		mbcf_umap_remove(m);
		return -EINVAL;
	}
	for (i = 0; i < waiting; i++)
		memcpy(mbcf_ring_entry(&next, i),
		       mbcf_ring_entry(&cq->ring, cons + i), MBCF_CQE_SIZE);
	next.idx = waiting;
	mbcf_ring_store(mbcf_ring_prod(&next), waiting);
	old = cq->umap;
	cq->ring = next;
	cq->umap = m;
	ibcq->cqe = n;
	spin_unlock_irqrestore(&cq->lock, irqf);

	/* nothing lands in the old ring any more: polling it fails */
	mbcf_ring_store_release((u32 *)((u8 *)old->buf + MBCF_RING_FLAGS_OFF),
				MBCF_RING_F_DEAD);
	mbcf_umap_remove(old);
	return ib_copy_to_udata(udata, &resp, sizeof(resp));
}

/*
 * The process may keep the mapping (after its device was removed, even the
 * CQ in libibverbs): mark the ring dead so that polling it fails.  No QP
 * completes into the CQ any more (the core destroys QPs first).
 */
int mbcf_cq_destroy(struct ib_cq *ibcq, struct ib_udata *udata)
{
	struct mbcf_cq *cq = to_mbcf_cq(ibcq);

	mbcf_ring_store_release(mbcf_ring_flags(&cq->ring), MBCF_RING_F_DEAD);
	mbcf_umap_remove(cq->umap);
	mbcf_res_put(to_mbcf_dev(ibcq->device), cq->owner, MBCF_RES_CQ);
	return 0;
}

/* A kernel CQ: the completions waiting, copied out (any context). */
int mbcf_cq_poll(struct ib_cq *ibcq, int num_entries, struct ib_wc *wc)
{
	struct mbcf_cq *cq = to_mbcf_cq(ibcq);
	unsigned long irqf;
	bool corrupt;
	void *slot;
	int n;

	spin_lock_irqsave(&cq->lock, irqf);
	for (n = 0; n < num_entries; n++) {
		slot = mbcf_ring_consume_slot(&cq->poll, &corrupt);
		if (!slot)
			break;
		memcpy(&wc[n], slot, sizeof(*wc));
		mbcf_ring_consume(&cq->poll);
	}
	spin_unlock_irqrestore(&cq->lock, irqf);
	return n;
}

int mbcf_cq_req_notify(struct ib_cq *ibcq, enum ib_cq_notify_flags flags)
{
	struct mbcf_cq *cq = to_mbcf_cq(ibcq);
	unsigned long irqf;
	int missed = 0;

	spin_lock_irqsave(&cq->lock, irqf);
	/* NEXT_COMP covers SOLICITED; never weaken an armed request. */
	if (cq->notify != IB_CQ_NEXT_COMP)
		cq->notify = flags & IB_CQ_SOLICITED_MASK;
	/* a kernel consumer asks whether completions are already waiting */
	if (cq->kernel && (flags & IB_CQ_REPORT_MISSED_EVENTS))
		missed = mbcf_ring_load(mbcf_ring_prod(&cq->poll)) != cq->poll.idx;
	spin_unlock_irqrestore(&cq->lock, irqf);
	return missed;
}

static void mbcf_cq_overflow(struct mbcf_cq *cq)
{
	struct ib_event ev = {
		.device = cq->ibcq.device,
		.element.cq = &cq->ibcq,
		.event = IB_EVENT_CQ_ERR,
	};

	if (cq->ibcq.event_handler)
		cq->ibcq.event_handler(&ev, cq->ibcq.cq_context);
}

/*
 * Handlers a completion calls run under the completing QP's lock (the core
 * completes inside it): while they run, this CPU must not go into a QP
 * (mbcf_cq_in_handler(): a kernel consumer's post from its handler is left
 * to the QP's transmit work, qp.c).  Per CPU; bottom halves are off here.
 */
static DEFINE_PER_CPU(u32, mbcf_cq_handler_depth);

bool mbcf_cq_in_handler(void)
{
	return this_cpu_read(mbcf_cq_handler_depth) != 0;
}

static void mbcf_cq_handlers(struct mbcf_cq *cq, bool fire, bool overflow)
{
	this_cpu_inc(mbcf_cq_handler_depth);
	if (fire && cq->ibcq.comp_handler)
		cq->ibcq.comp_handler(&cq->ibcq, cq->ibcq.cq_context);
	if (overflow)
		mbcf_cq_overflow(cq);
	this_cpu_dec(mbcf_cq_handler_depth);
}

/* A user CQE: struct ib_uverbs_wc, flags in libibverbs' values. */
static void mbcf_cq_to_user(const struct ib_wc *wc, struct ib_uverbs_wc *u)
{
	*u = (struct ib_uverbs_wc){
		.wr_id = wc->wr_id,
		.status = wc->status,
		.opcode = wc->opcode,
		.vendor_err = wc->vendor_err,
		.byte_len = wc->byte_len,
		.ex.imm_data = wc->ex.imm_data,
		.qp_num = wc->qp->qp_num,
		.src_qp = wc->src_qp,
		.wc_flags = (wc->wc_flags & IB_WC_GRH ? MBCF_UWC_GRH : 0) |
			    (wc->wc_flags & IB_WC_WITH_IMM ? MBCF_UWC_WITH_IMM : 0) |
			    (wc->wc_flags & IB_WC_WITH_INVALIDATE ?
			     MBCF_UWC_WITH_INV : 0),
		.pkey_index = wc->pkey_index,
		.slid = wc->slid,
		.sl = wc->sl,
		.dlid_path_bits = wc->dlid_path_bits,
		.port_num = wc->port_num,
	};
}

/*
 * Post one completion.  Returns -ENOSPC when the CQ is full (or its
 * consumer index is garbage): the completion is lost and the CQ reports
 * IB_EVENT_CQ_ERR once, as verbs specifies for an overrun.
 */
int mbcf_cq_push(struct mbcf_cq *cq, const struct ib_wc *wc, bool solicited)
{
	unsigned long irqf;
	bool corrupt, fire = false, overflow = false;
	void *slot;

	spin_lock_irqsave(&cq->lock, irqf);
	slot = mbcf_ring_produce_slot(&cq->ring, &corrupt);
	if (unlikely(!slot)) {
		overflow = !cq->overflowed;
		cq->overflowed = true;
	} else {
		if (cq->kernel)
			memcpy(slot, wc, sizeof(*wc));
		else
			mbcf_cq_to_user(wc, slot);
		mbcf_ring_produce(&cq->ring);
		/* An unsuccessful completion counts as solicited (verbs). */
		if (cq->notify == IB_CQ_NEXT_COMP ||
		    (cq->notify == IB_CQ_SOLICITED &&
		     (solicited || wc->status != IB_WC_SUCCESS))) {
			cq->notify = 0;
			fire = true;
		}
	}
	spin_unlock_irqrestore(&cq->lock, irqf);

	if (fire || overflow)
		mbcf_cq_handlers(cq, fire, overflow);
	return slot ? 0 : -ENOSPC;
}
