// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Completion queues: a ring the kernel produces into and the provider polls
 * without a system call (include/mbcf/ring.h).  Several QPs may complete
 * into one CQ from different CPUs, hence the CQ's own lock, always taken
 * inside a QP's lock, never the other way round.
 */
#include <linux/log2.h>
#include <rdma/ib_user_verbs.h>
#include <rdma/uverbs_ioctl.h>

#include "mbcf.h"

static_assert(sizeof(struct ib_uverbs_wc) == MBCF_CQE_SIZE);

/* A ring of @n entries user space maps, described in @ri. */
static struct mbcf_umap *mbcf_cq_umap(struct ib_udata *udata, u32 n,
				      struct mbcf_ring_info *ri)
{
	struct mbcf_ucontext *uc =
		rdma_udata_to_drv_context(udata, struct mbcf_ucontext, ibuc);
	struct mbcf_umap *m;

	m = mbcf_umap_create(&uc->ibuc,
			     MBCF_RING_ENTRIES_OFF + (size_t)n * MBCF_CQE_SIZE);
	if (IS_ERR(m))
		return m;
	ri->mmap_offset = mbcf_umap_offset(m);
	ri->mmap_len = m->len;
	ri->num_entries = n;
	ri->stride = MBCF_CQE_SIZE;
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

	if (!udata)
		return -EOPNOTSUPP;	/* user-space CQs only */
	if (attr->flags || attr->cqe < 1 || attr->cqe > MBCF_MAX_CQE)
		return -EINVAL;
	if (udata->outlen < sizeof(resp))
		return -EINVAL;
	if (atomic_inc_return(&dev->cq_count) > MBCF_MAX_CQ) {
		err = -ENOMEM;
		goto err_count;
	}

	n = roundup_pow_of_two(attr->cqe);
	cq->umap = mbcf_cq_umap(udata, n, &resp.ring);
	if (IS_ERR(cq->umap)) {
		err = PTR_ERR(cq->umap);
		cq->umap = NULL;
		goto err_count;
	}
	spin_lock_init(&cq->lock);
	mbcf_ring_init(&cq->ring, cq->umap->buf, n, MBCF_CQE_SIZE, 0);
	ibcq->cqe = n;
	err = ib_copy_to_udata(udata, &resp, sizeof(resp));
	if (err)
		goto err_umap;
	return 0;

err_umap:
	mbcf_umap_remove(cq->umap);
err_count:
	atomic_dec(&dev->cq_count);
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
	m = mbcf_cq_umap(udata, n, &resp.ring);
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
	atomic_dec(&to_mbcf_dev(ibcq->device)->cq_count);
	return 0;
}

int mbcf_cq_req_notify(struct ib_cq *ibcq, enum ib_cq_notify_flags flags)
{
	struct mbcf_cq *cq = to_mbcf_cq(ibcq);
	unsigned long irqf;

	spin_lock_irqsave(&cq->lock, irqf);
	/* NEXT_COMP covers SOLICITED; never weaken an armed request. */
	if (cq->notify != IB_CQ_NEXT_COMP)
		cq->notify = flags & IB_CQ_SOLICITED_MASK;
	spin_unlock_irqrestore(&cq->lock, irqf);
	return 0;
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
 * Post one completion.  Returns -ENOSPC when the CQ is full (or its
 * consumer index is garbage): the completion is lost and the CQ reports
 * IB_EVENT_CQ_ERR once, as verbs specifies for an overrun.
 */
int mbcf_cq_push(struct mbcf_cq *cq, const struct ib_uverbs_wc *wc,
		 bool solicited)
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
		memcpy(slot, wc, sizeof(*wc));
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

	if (fire && cq->ibcq.comp_handler)
		cq->ibcq.comp_handler(&cq->ibcq, cq->ibcq.cq_context);
	if (overflow)
		mbcf_cq_overflow(cq);
	return slot ? 0 : -ENOSPC;
}
