// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Queue pairs.  Not supported yet: issue 4 brings send/receive rings
 * mmapped from the kernel, with a doorbell (POST_SEND) only when the
 * kernel is idle.  Until then every entry point fails with EOPNOTSUPP.
 */
#include <errno.h>

#include "mbcf.h"

struct ibv_qp *mbcf_qp_create(struct ibv_pd *pd, struct ibv_qp_init_attr *attr)
{
	errno = EOPNOTSUPP;
	return NULL;
}

int mbcf_qp_modify(struct ibv_qp *qp, struct ibv_qp_attr *attr, int attr_mask)
{
	return EOPNOTSUPP;
}

int mbcf_qp_query(struct ibv_qp *qp, struct ibv_qp_attr *attr, int attr_mask,
		  struct ibv_qp_init_attr *init_attr)
{
	return EOPNOTSUPP;
}

int mbcf_qp_destroy(struct ibv_qp *qp)
{
	return EOPNOTSUPP;
}

int mbcf_qp_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr,
		      struct ibv_send_wr **bad_wr)
{
	*bad_wr = wr;
	return EOPNOTSUPP;
}

int mbcf_qp_post_recv(struct ibv_qp *qp, struct ibv_recv_wr *wr,
		      struct ibv_recv_wr **bad_wr)
{
	*bad_wr = wr;
	return EOPNOTSUPP;
}
