// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* ib_device_ops.resize_cq became .resize_user_cq (the only resize there is
 * is ibv_resize_cq's), with an unsigned int cqe.  Compiled with -Werror:
 * without the member, or with the old int, this fails. */
#include <rdma/ib_verbs.h>

static int mbcf_probe_resize(struct ib_cq *cq, unsigned int cqe,
			     struct ib_udata *udata)
{
	return udata && cqe ? 0 : -EINVAL;
}

extern const struct ib_device_ops mbcf_probe_ops;
const struct ib_device_ops mbcf_probe_ops = {
	.resize_user_cq = mbcf_probe_resize,
};
