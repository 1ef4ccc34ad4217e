// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Half of the provider.abi test, compiled against the *installed* public
 * libibverbs headers only (no rdma-core private include path): reports the
 * layout the installed libibverbs was built with.
 */
#include <stddef.h>
#include <infiniband/verbs.h>

#include "abi-check.h"

void mbcf_abi_sys_layout(struct mbcf_abi_layout *l)
{
	l->verbs_context_size = sizeof(struct verbs_context);
	l->context_offset = offsetof(struct verbs_context, context);
	l->ops_offset = offsetof(struct ibv_context, ops);
	l->ops_size = sizeof(struct ibv_context_ops);
	l->post_send_offset = offsetof(struct ibv_context_ops, post_send);
	l->poll_cq_offset = offsetof(struct ibv_context_ops, poll_cq);
	l->qp_size = sizeof(struct ibv_qp);
	l->cq_size = sizeof(struct ibv_cq);
	l->mr_size = sizeof(struct ibv_mr);
	l->pd_size = sizeof(struct ibv_pd);
	l->wc_size = sizeof(struct ibv_wc);
	l->send_wr_size = sizeof(struct ibv_send_wr);
	l->port_attr_size = sizeof(struct ibv_port_attr);
}
