// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* ib_device_ops.reg_user_mr takes a struct ib_dmah * (a DMA handle:
 * TPH steering hints) before the udata (Linux 6.17).  -Werror makes the
 * old signature an incompatible-pointer error. */
#include <rdma/ib_verbs.h>

static struct ib_mr *mbcf_probe_reg(struct ib_pd *pd, u64 start, u64 length,
				    u64 iova, int access, struct ib_dmah *dmah,
				    struct ib_udata *udata)
{
	return dmah ? ERR_PTR(-EOPNOTSUPP) : NULL;
}

extern const struct ib_device_ops mbcf_probe_ops;
const struct ib_device_ops mbcf_probe_ops = {
	.reg_user_mr = mbcf_probe_reg,
};
