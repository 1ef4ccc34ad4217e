// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* Linux 6.11: ib_device_ops.create_cq takes a struct uverbs_attr_bundle *
 * (NULL for kernel CQs) instead of a struct ib_udata *.  Probes compile
 * with -Werror: on older kernels the initializer is an incompatible pointer. */
#include <rdma/ib_verbs.h>
#include <rdma/uverbs_ioctl.h>

static int mbcf_probe_create_cq(struct ib_cq *cq,
				const struct ib_cq_init_attr *attr,
				struct uverbs_attr_bundle *attrs)
{
	return attrs && attrs->driver_udata.outlen ? 0 : -EINVAL;
}

extern const struct ib_device_ops mbcf_probe_ops;
const struct ib_device_ops mbcf_probe_ops = {
	.create_cq = mbcf_probe_create_cq,
};
