// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Kernel buffers that user space mmap()s: the CQ, SQ and RQ rings.
 *
 * A buffer is a set of pages, mapped into the kernel with vmap() and into
 * the process by inserting the same pages into its VMA.  The pages are
 * charged to the creating process's memory cgroup and allocated without
 * retrying hard, so a process that creates objects until memory runs out
 * gets ENOMEM from its own limit instead of the OOM killer taking others.
 *
 * The buffer belongs to its rdma_user_mmap_entry, not to the CQ or QP: it
 * is freed by mbcf_umap_free() once the entry is removed (object destroyed
 * or device gone).  A mapping the process still holds keeps its own page
 * references, so it stays valid memory that the kernel no longer reads.
 *
 * Kernel consumers' objects (no user context) use the same buffers with no
 * mmap entry: mbcf_umap_remove() frees them at once.
 *
 * A user buffer's pages are also charged to the creating process's
 * RLIMIT_MEMLOCK, in the same counter and with the same rule as the pages
 * ib_umem_get() pins for its MRs (mm->pinned_vm, "VmPin" in
 * /proc/PID/status; CAP_IPC_LOCK lifts the limit, not the count): hardware
 * providers' rings are user memory pinned that way, and without it a
 * process could hold 4096 CQs of 48 MiB that no limit but the memory
 * cgroup sees, and that are not in its RSS once it unmaps them, so the
 * global OOM killer would take other processes.  The charge lasts as long
 * as the buffer: from before its pages are allocated until they are put
 * (mbcf_umap_release), which happens when the object is destroyed,
 * whichever path destroys it (the verb, the process's exit, the device's
 * removal).  Pages the process still maps after that are in its RSS.
 */
#include <linux/capability.h>
#include <linux/mm.h>
#include <linux/sched/mm.h>
#include <linux/sched/signal.h>
#include <linux/slab.h>
#include <linux/vmalloc.h>

#include "mbcf.h"

#define MBCF_UMAP_GFP	(GFP_KERNEL_ACCOUNT | __GFP_ZERO | __GFP_NORETRY | \
			 __GFP_NOWARN)

static struct mbcf_umap *to_umap(struct rdma_user_mmap_entry *e)
{
	return container_of(e, struct mbcf_umap, rdma);
}

/*
 * Charge @bytes, in pages, to the calling process's locked memory, as
 * ib_umem_get() does: ENOMEM over RLIMIT_MEMLOCK without CAP_IPC_LOCK.
 * Also used for the other per-entry kernel memory a user queue sizes
 * (wr.c: the private copies of its requests).
 */
int mbcf_charge(struct mbcf_charge *c, size_t bytes)
{
	unsigned long limit = rlimit(RLIMIT_MEMLOCK) >> PAGE_SHIFT;
	unsigned long npages = PAGE_ALIGN(bytes) >> PAGE_SHIFT;
	struct mm_struct *mm = current->mm;

	if (WARN_ON_ONCE(!mm || c->mm))
		return -EINVAL;
	if (atomic64_add_return(npages, &mm->pinned_vm) > limit &&
	    !capable(CAP_IPC_LOCK)) {
		atomic64_sub(npages, &mm->pinned_vm);
		return -ENOMEM;
	}
	mmgrab(mm);		/* the process may be gone when we uncharge */
	c->mm = mm;
	c->npages = npages;
	return 0;
}

/* Give back what mbcf_charge() took, if anything; any process context. */
void mbcf_uncharge(struct mbcf_charge *c)
{
	if (!c->mm)
		return;
	atomic64_sub(c->npages, &c->mm->pinned_vm);
	mmdrop(c->mm);
	c->mm = NULL;
}

static void mbcf_umap_release(struct mbcf_umap *m)
{
	unsigned int i;

	if (m->buf)
		vunmap(m->buf);
	for (i = 0; m->pages && i < m->npages && m->pages[i]; i++)
		put_page(m->pages[i]);
	kvfree(m->pages);
	mbcf_uncharge(&m->charge);
	kfree(m);
}

/*
 * A zeroed, page-rounded buffer of at least @len bytes, offered to mmap in
 * @uctx (NULL: a kernel consumer's, never mapped).
 */
struct mbcf_umap *mbcf_umap_create(struct ib_ucontext *uctx, size_t len)
{
	struct mbcf_umap *m;
	unsigned int i;
	int err;

	m = kzalloc(sizeof(*m), MBCF_GFP_OBJ);
	if (!m)
		return ERR_PTR(-ENOMEM);
	m->len = PAGE_ALIGN(len);
	m->npages = m->len >> PAGE_SHIFT;
	if (uctx) {
		err = mbcf_charge(&m->charge, m->len);
		if (err)
			goto err_release;
	}
	m->pages = kvcalloc(m->npages, sizeof(*m->pages), MBCF_UMAP_GFP);
	if (!m->pages)
		goto err_nomem;
	for (i = 0; i < m->npages; i++) {
		m->pages[i] = alloc_page(MBCF_UMAP_GFP);
		if (!m->pages[i])
			goto err_nomem;
	}
	m->buf = vmap(m->pages, m->npages, VM_MAP, PAGE_KERNEL);
	if (!m->buf)
		goto err_nomem;
	m->kernel = !uctx;
	if (m->kernel)
		return m;
	err = rdma_user_mmap_entry_insert(uctx, &m->rdma, m->len);
	if (err)
		goto err_release;
	return m;

err_nomem:
	err = -ENOMEM;
err_release:
	mbcf_umap_release(m);
	return ERR_PTR(err);
}

u64 mbcf_umap_offset(const struct mbcf_umap *m)
{
	return rdma_user_mmap_get_offset(&m->rdma);
}

/* No new mappings; the buffer goes when its entry does (mbcf_umap_free). */
void mbcf_umap_remove(struct mbcf_umap *m)
{
	if (m && m->kernel)
		mbcf_umap_release(m);
	else if (m)
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
	if (vma->vm_end - vma->vm_start != m->len) {
		err = -EINVAL;
	} else {
		mbcf_vm_flags_set(vma, VM_DONTEXPAND | VM_DONTDUMP);
		err = vm_map_pages_zero(vma, m->pages, m->npages);
	}
	rdma_user_mmap_entry_put(e);
	return err;
}

void mbcf_umap_free(struct rdma_user_mmap_entry *e)
{
	mbcf_umap_release(to_umap(e));
}
