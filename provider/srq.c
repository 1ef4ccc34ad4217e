// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Shared receive queues (basic SRQs): create, modify (the limit), query,
 * destroy.  CREATE_SRQ returns one receive ring, laid out like a QP's
 * receive queue, that we mmap() on the context fd; wr.c posts into it
 * (mbcf_srq_post_recv) and rings its doorbell, POST_SRQ_RECV with no work
 * request, when the kernel went idle.
 *
 * ibv_create_srq_ex() of a basic SRQ reaches mbcf_srq_create() through
 * libibverbs; other types (XRC, tag matching) need create_srq_ex, which we
 * do not offer, so libibverbs answers them with EOPNOTSUPP.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "mbcf.h"

struct ibv_srq *mbcf_srq_create(struct ibv_pd *pd,
				struct ibv_srq_init_attr *attr)
{
	struct mbcf_create_srq_resp_full resp = {};
	struct ibv_create_srq cmd = {};
	struct mbcf_srq *srq;
	int ret;

	srq = calloc(1, sizeof(*srq));
	if (!srq)
		return NULL;
	ret = ibv_cmd_create_srq(pd, &srq->vsrq.srq, attr, &cmd, sizeof(cmd),
				 &resp.ibv_resp, sizeof(resp));
	if (ret)
		goto err_free;
	/* a ring of 0 entries would be no SRQ at all */
	ret = EPROTO;
	if (!resp.drv.ring.num_entries)
		goto err_destroy;
	ret = mbcf_wq_map(pd->context, &srq->rq, &resp.drv.ring,
			  sizeof(struct mbcf_recv_wqe), attr->attr.max_sge, 0);
	if (ret)
		goto err_destroy;
	pthread_spin_init(&srq->rq.lock, PTHREAD_PROCESS_PRIVATE);
	return &srq->vsrq.srq;

err_destroy:
	ibv_cmd_destroy_srq(&srq->vsrq.srq);
err_free:
	free(srq);
	errno = ret;
	return NULL;
}

/* IBV_SRQ_LIMIT arms the limit event; resizing (IBV_SRQ_MAX_WR) is refused. */
int mbcf_srq_modify(struct ibv_srq *srq, struct ibv_srq_attr *attr,
		    int attr_mask)
{
	struct ibv_modify_srq cmd = {};

	return ibv_cmd_modify_srq(srq, attr, attr_mask, &cmd, sizeof(cmd));
}

int mbcf_srq_query(struct ibv_srq *srq, struct ibv_srq_attr *attr)
{
	struct ibv_query_srq cmd = {};

	return ibv_cmd_query_srq(srq, attr, &cmd, sizeof(cmd));
}

/* EBUSY (from the RDMA core) while a QP uses it. */
int mbcf_srq_destroy(struct ibv_srq *ibsrq)
{
	struct mbcf_srq *srq = to_msrq(ibsrq);
	int ret;

	ret = ibv_cmd_destroy_srq(ibsrq);
	if (ret)
		return ret;
	mbcf_wq_unmap(&srq->rq);
	pthread_spin_destroy(&srq->rq.lock);
	free(srq);
	return 0;
}
