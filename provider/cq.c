// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Completion queues.  Not supported yet: issue 4 brings CQ rings mmapped
 * from the kernel and polled here without a system call.  Until then every
 * entry point fails with EOPNOTSUPP, so no CQ can exist and the others are
 * never reached with a CQ of ours.
 */
#include <errno.h>

#include "mbcf.h"

struct ibv_cq *mbcf_cq_create(struct ibv_context *ibctx, int cqe,
			      struct ibv_comp_channel *channel,
			      int comp_vector)
{
	errno = EOPNOTSUPP;
	return NULL;
}

int mbcf_cq_destroy(struct ibv_cq *cq)
{
	return EOPNOTSUPP;
}

int mbcf_cq_poll(struct ibv_cq *cq, int num_entries, struct ibv_wc *wc)
{
	/* ibv_poll_cq(): a negative value is an error. */
	errno = EOPNOTSUPP;
	return -1;
}

int mbcf_cq_req_notify(struct ibv_cq *cq, int solicited_only)
{
	return EOPNOTSUPP;
}
