// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* mbcf-needs: ib_device_attr.kernel_cap_flags with IBK_ALLOW_USER_UNREG and IBK_LOCAL_DMA_LKEY (Linux 6.0) */
#include <rdma/ib_verbs.h>

void mbcf_probe(struct ib_device_attr *attr);
void mbcf_probe(struct ib_device_attr *attr)
{
	attr->kernel_cap_flags = IBK_ALLOW_USER_UNREG | IBK_LOCAL_DMA_LKEY;
}
