// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Kernel buffers that user space mmap()s: the CQ, SQ and RQ rings.
 *
 * The buffer belongs to its rdma_user_mmap_entry, not to the CQ or QP: a
 * process may keep the mapping after destroying the object, so the memory
 * is freed only by mbcf_umap_free() once the entry is removed and the last
 * mapping is gone.
 */
#include <linux/mm.h>
#include <linux/slab.h>
#include <linux/vmalloc.h>

#include "mbcf.h"

static struct mbcf_umap *to_umap(struct rdma_user_mmap_entry *e)
{
	return container_of(e, struct mbcf_umap, rdma);
}

/* A zeroed, page-rounded buffer of at least @len bytes, offered to mmap. */
struct mbcf_umap *mbcf_umap_create(struct ib_ucontext *uctx, size_t len)
{
	struct mbcf_umap *m;
	int err;

	m = kzalloc(sizeof(*m), GFP_KERNEL);
	if (!m)
		return ERR_PTR(-ENOMEM);
	m->len = PAGE_ALIGN(len);
	m->buf = vmalloc_user(m->len);
	if (!m->buf) {
		err = -ENOMEM;
		goto err_free;
	}
	err = rdma_user_mmap_entry_insert(uctx, &m->rdma, m->len);
	if (err)
		goto err_vfree;
	return m;

err_vfree:
	vfree(m->buf);
err_free:
	kfree(m);
	return ERR_PTR(err);
}

u64 mbcf_umap_offset(const struct mbcf_umap *m)
{
	return rdma_user_mmap_get_offset(&m->rdma);
}

/* No new mappings; the buffer goes when the last one does. */
void mbcf_umap_remove(struct mbcf_umap *m)
{
	if (m)
		rdma_user_mmap_entry_remove(&m->rdma);
}

int mbcf_umap_mmap(struct ib_ucontext *uctx, struct vm_area_struct *vma)
{
	struct rdma_user_mmap_entry *e;
	struct mbcf_umap *m;
	int err;

	e = rdma_user_mmap_entry_get(uctx, vma);
	if (!e)
		return -EINVAL;
	m = to_umap(e);
	if (vma->vm_end - vma->vm_start != m->len)
		err = -EINVAL;
	else
		err = remap_vmalloc_range(vma, m->buf, 0);
	rdma_user_mmap_entry_put(e);
	return err;
}

void mbcf_umap_free(struct rdma_user_mmap_entry *e)
{
	struct mbcf_umap *m = to_umap(e);

	vfree(m->buf);
	kfree(m);
}
