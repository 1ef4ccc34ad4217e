// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Shared receive queues: the verbs, and waking the QPs that wait on one.
 *
 * An SRQ is a receive ring like a QP's (struct mbcf_recv_wqe entries the
 * provider produces, or kernel entries from post_srq_recv), read by wr.c on
 * behalf of whichever attached QP receives a message.  A QP that found the
 * SRQ empty has told its peer to STOP (verbs RNR) and set the ring's
 * db_needed; the provider's next post rings the doorbell (POST_SRQ_RECV
 * with no work request) and every attached QP is told that receives were
 * posted, so the stopped ones send GO.  That costs one pass over the
 * attached QPs per doorbell, and doorbells come only after the SRQ ran dry.
 *
 * A broken ring (user space rewound its producer index, or moved it further
 * ahead than the ring holds, or wrote an entry the provider could not have
 * written) is found by a claim or by the next doorbell: IB_EVENT_SRQ_ERR
 * once, and every attached QP fails (IB_EVENT_QP_FATAL, then
 * IB_EVENT_QP_LAST_WQE_REACHED); the ring is never read again.
 *
 * Lock order: srq->qps_lock (a mutex, process context), then a QP's lock,
 * then srq->lock.
 */
#include <linux/log2.h>
#include <linux/slab.h>
#include <rdma/uverbs_ioctl.h>

#include "mbcf.h"
#include "rdma/mbcf-abi.h"

void mbcf_srq_event(struct mbcf_srq *srq, enum ib_event_type type)
{
	struct ib_event ev = {
		.device = srq->ibsrq.device,
		.element.srq = &srq->ibsrq,
		.event = type,
	};

	if (srq->ibsrq.event_handler)
		srq->ibsrq.event_handler(&ev, srq->ibsrq.srq_context);
}

/*
 * Tell every attached QP that receives were posted (process context), or,
 * if the ring is broken, fail them all.
 */
static void mbcf_srq_wake(struct mbcf_srq *srq)
{
	struct mbcf_qp *qp;
	bool broken, broke;

	broken = mbcf_wr_srq_posted(srq, &broke);
	if (broke)
		mbcf_srq_event(srq, IB_EVENT_SRQ_ERR);
	mutex_lock(&srq->qps_lock);
	list_for_each_entry(qp, &srq->qps, srq_node)
		mbcf_qp_recv_posted(qp, broken);
	mutex_unlock(&srq->qps_lock);
}

static void mbcf_srq_wake_work(struct work_struct *work)
{
	mbcf_srq_wake(container_of(work, struct mbcf_srq, wake));
}

/*
 * A QP found the ring broken (wr.c, told through qp->pend: qp.c calls this
 * once the QP's lock is dropped, maybe in softirq): the other attached QPs
 * fail from process context.
 */
void mbcf_srq_broken(struct mbcf_srq *srq)
{
	/* a user's broken ring: ordinary priority (qp.c, mbcf_qp_defer) */
	queue_work(srq->kernel ? system_highpri_wq : system_wq, &srq->wake);
}

void mbcf_srq_attach(struct mbcf_srq *srq, struct mbcf_qp *qp)
{
	mutex_lock(&srq->qps_lock);
	list_add_tail(&qp->srq_node, &srq->qps);
	mutex_unlock(&srq->qps_lock);
}

/* After this returns, no wake-up reaches @qp. */
void mbcf_srq_detach(struct mbcf_srq *srq, struct mbcf_qp *qp)
{
	mutex_lock(&srq->qps_lock);
	list_del(&qp->srq_node);
	mutex_unlock(&srq->qps_lock);
}

static int mbcf_srq_create(struct ib_srq *ibsrq,
			   struct ib_srq_init_attr *init,
			   struct ib_udata *udata)
{
	struct mbcf_dev *dev = to_mbcf_dev(ibsrq->device);
	struct mbcf_srq *srq = to_mbcf_srq(ibsrq);
	struct ib_srq_attr *a = &init->attr;
	struct mbcf_create_srq_resp resp = {};
	struct mbcf_ucontext *uc = NULL;
	u32 n, stride;
	int err;

	if (init->srq_type != IB_SRQT_BASIC)
		return -EOPNOTSUPP;	/* no XRC, no tag matching */
	if (!a->max_wr || a->max_wr > MBCF_MAX_SRQ_WR ||
	    a->max_sge > MBCF_MAX_SGE)
		return -EINVAL;
	if (udata && udata->outlen < sizeof(resp))
		return -EINVAL;
	err = mbcf_res_get(dev, udata, MBCF_RES_SRQ, &srq->owner);
	if (err)
		return err;
	srq->dev = dev;
	srq->kernel = !udata;
	spin_lock_init(&srq->lock);
	spin_lock_init(&srq->klock);
	mutex_init(&srq->qps_lock);
	INIT_LIST_HEAD(&srq->qps);
	INIT_WORK(&srq->wake, mbcf_srq_wake_work);

	n = roundup_pow_of_two(a->max_wr);
	stride = ALIGN(sizeof(struct mbcf_recv_wqe) +
		       max(a->max_sge, 1u) * sizeof(struct mbcf_sge), 16);
	if (udata)
		uc = rdma_udata_to_drv_context(udata, struct mbcf_ucontext, ibuc);
	err = mbcf_wr_alloc_srq(&srq->rq, uc ? &uc->ibuc : NULL, n, stride,
				max(a->max_sge, 1u));
	if (err)
		goto err_count;
	srq->kring = srq->rq.ring;
	/* the true sizes (verbs); srq_limit is not armed at create */
	a->max_wr = n;
	a->max_sge = srq->rq.max_sge;
	srq->limit = 0;
	if (udata) {
		resp.ring.mmap_offset = mbcf_umap_offset(srq->rq.umap);
		resp.ring.mmap_len = srq->rq.umap->len;
		resp.ring.num_entries = n;
		resp.ring.stride = stride;
		err = ib_copy_to_udata(udata, &resp, sizeof(resp));
		if (err)
			goto err_free;
	}
	return 0;

err_free:
	mbcf_wr_free(&srq->rq);
err_count:
	mbcf_res_put(dev, srq->owner, MBCF_RES_SRQ);
	return err;
}

/*
 * Arm (or, with 0, disarm) the limit: IB_EVENT_SRQ_LIMIT_REACHED once a
 * claim leaves fewer receives than that, then disarmed (verbs).  Resizing
 * is not offered (no IB_DEVICE_SRQ_RESIZE).
 */
static int mbcf_srq_modify(struct ib_srq *ibsrq, struct ib_srq_attr *attr,
			   enum ib_srq_attr_mask mask, struct ib_udata *udata)
{
	struct mbcf_srq *srq = to_mbcf_srq(ibsrq);

	if (mask & ~(IB_SRQ_MAX_WR | IB_SRQ_LIMIT))
		return -EINVAL;
	if (mask & IB_SRQ_MAX_WR)
		return -EOPNOTSUPP;
	if (udata && udata->inlen)
		return -EINVAL;
	if (mask & IB_SRQ_LIMIT) {
		if (attr->srq_limit > srq->rq.ring.mask + 1)
			return -EINVAL;
		spin_lock_bh(&srq->lock);
		srq->limit = attr->srq_limit;
		spin_unlock_bh(&srq->lock);
	}
	return 0;
}

static int mbcf_srq_query(struct ib_srq *ibsrq, struct ib_srq_attr *attr)
{
	struct mbcf_srq *srq = to_mbcf_srq(ibsrq);

	attr->max_wr = srq->rq.ring.mask + 1;
	attr->max_sge = srq->rq.max_sge;
	spin_lock_bh(&srq->lock);
	attr->srq_limit = srq->limit;
	spin_unlock_bh(&srq->lock);
	return 0;
}

/* The RDMA core destroys an SRQ only once no QP uses it. */
static int mbcf_srq_destroy(struct ib_srq *ibsrq, struct ib_udata *udata)
{
	struct mbcf_srq *srq = to_mbcf_srq(ibsrq);

	WARN_ON_ONCE(!list_empty(&srq->qps));
	cancel_work_sync(&srq->wake);
	mbcf_wr_free(&srq->rq);
	mbcf_res_put(srq->dev, srq->owner, MBCF_RES_SRQ);
	return 0;
}

/*
 * A kernel consumer's receives go into the ring; the wake-up comes from
 * process context (this may be called with interrupts off).  For a user
 * SRQ this is the doorbell: no work requests, they are in the ring.
 */
static int mbcf_srq_post_recv(struct ib_srq *ibsrq, const struct ib_recv_wr *wr,
			      const struct ib_recv_wr **bad_wr)
{
	struct mbcf_srq *srq = to_mbcf_srq(ibsrq);
	int err;

	if (srq->kernel) {
		err = mbcf_wr_kpost_srq(srq, wr, bad_wr);
		queue_work(system_highpri_wq, &srq->wake);
		return err;
	}
	if (wr) {
		*bad_wr = wr;
		return -EOPNOTSUPP;
	}
	mbcf_srq_wake(srq);
	return 0;
}

const struct ib_device_ops mbcf_srq_ops = {
	.create_srq = mbcf_srq_create,
	.modify_srq = mbcf_srq_modify,
	.query_srq = mbcf_srq_query,
	.destroy_srq = mbcf_srq_destroy,
	.post_srq_recv = mbcf_srq_post_recv,
	INIT_RDMA_OBJ_SIZE(ib_srq, mbcf_srq, ibsrq),
};
