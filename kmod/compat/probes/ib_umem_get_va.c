// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* ib_umem_get(device, addr, size, access) is ib_umem_get_va() (same
 * arguments) since the umem getters for uverbs buffer descriptors came. */
#include <rdma/ib_umem.h>

struct ib_umem *mbcf_probe(struct ib_device *dev, unsigned long addr,
			   size_t size, int access);
struct ib_umem *mbcf_probe(struct ib_device *dev, unsigned long addr,
			   size_t size, int access)
{
	return ib_umem_get_va(dev, addr, size, access);
}
