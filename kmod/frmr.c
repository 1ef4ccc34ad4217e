// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Fast memory registration (FRWR) for kernel consumers: alloc_mr,
 * map_mr_sg, and the IB_WR_REG_MR / IB_WR_LOCAL_INV / IB_WR_SEND_WITH_INV
 * work requests that make an MR's key valid and invalid again in send
 * queue order.  NVMe over Fabrics, iSER, NFS/RDMA, SRP and RDS refuse a
 * device without it.
 *
 * The memory is the consumer's kernel memory: our DMA addresses are kernel
 * virtual addresses (the device has no DMA device, ib_uses_virt_dma()), so
 * map_mr_sg turns each page address ib_sg_to_pages() hands us into its
 * struct page.  Nothing is pinned: the consumer owns the pages, and may
 * free them as soon as it has seen the invalidation complete.  Hence:
 *
 *  - An FRWR MR is published in the device's key xarray from alloc_mr to
 *    dereg_mr, tagged MBCF_MR_TAG_FRMR, under an index of its own; its key
 *    resolves (mbcf_frmr_resolve, from mr.c's lookup) only while it is
 *    valid -- between the REG_MR that set the key and the invalidation --
 *    and only with the exact key, PD, access and [iova, iova + length) of
 *    that registration.  Each REG_MR brings the consumer's key byte
 *    (ib_update_fast_reg_key), so a key of an earlier registration is
 *    refused like any stale key: -ENOKEY, a remote access error, the QP
 *    goes to error.
 *  - Every access resolves the key afresh and holds a reference on the
 *    embedded struct mbcf_mr for one walk (at most one frame's payload,
 *    never sleeping, no lock taken inside).  The embedded MR's own key is
 *    0, a key no lookup ever matches, so mr.c never keeps it as the lock
 *    hold's MR (qp->mr_hot) and puts the reference right after the walk.
 *  - Invalidation (LOCAL_INV, or SEND_WITH_INV at the responder) marks the
 *    MR invalid under its lock -- no new access starts -- then waits for
 *    the accesses in flight on other CPUs to put their references (a few
 *    microseconds), so when the invalidation completes nothing touches
 *    the pages any more.  Zero-copy transmission is refused for these MRs
 *    (mr.c copies instead): a frame's fragments would outlive that.
 *  - map_mr_sg fills a staged page list (bounded by max_num_sg); REG_MR
 *    copies it into the live list when it executes, and only into an
 *    invalid MR, so a map_mr_sg on a valid MR (a consumer bug) changes
 *    nothing that an access reads.  REG_MR checks that the page list holds
 *    every byte of [0, length) at the recorded in-page offset, so the walk
 *    (mr.c, page by page, index (offset + page_offset) >> PAGE_SHIFT) never
 *    leaves the list.
 *
 * The work requests reach us through the kernel QP's ring (wr.c) as send
 * entries that name the MR by key, never by pointer: a REG_MR whose MR was
 * deregistered before its turn fails (LOC_QP_OP_ERR) instead of touching
 * freed memory.  Lock order: a QP's lock, then an FRWR MR's (irqsave: a
 * consumer may map with interrupts off).
 */
#include <linux/mm.h>
#include <linux/slab.h>
#include <linux/xarray.h>

#include "mbcf.h"

/* The access a registration may grant (verbs' optional bits are ignored). */
#define MBCF_FRMR_ACCESS	(IB_ACCESS_LOCAL_WRITE | IB_ACCESS_REMOTE_WRITE | \
				 IB_ACCESS_REMOTE_READ | IB_ACCESS_REMOTE_ATOMIC)

struct mbcf_frmr {
	/*
	 * The live registration as mr.c reads it: pages, npages, iova,
	 * length, page_offset, access, pd; key is always 0.  mr.ref is 1
	 * (ours) + one per access in flight.  ibmr is what the core sees.
	 */
	struct mbcf_mr mr;
	spinlock_t lock;		/* everything below, and mr's fields */
	bool valid;			/* between REG_MR and invalidation */
	bool dead;			/* being deregistered */
	u32 key;			/* the key of the last registration */
	u32 max_pages;			/* max_num_sg of alloc_mr */
	struct page **staged;		/* map_mr_sg's list, max_pages long */
	u32 nstaged;
	u32 staged_offset;		/* in-page offset of byte 0 in staged[0] */
};

static struct mbcf_frmr *to_mbcf_frmr(struct ib_mr *ibmr)
{
	return container_of(ibmr, struct mbcf_frmr, mr.ibmr);
}

/* The FRWR MR behind @key's index (caller holds rcu_read_lock()), or NULL. */
static struct mbcf_frmr *mbcf_frmr_lookup(struct mbcf_dev *dev, u32 key)
{
	void *e = xa_load(&dev->mr_xa, key >> 8);

	if (xa_pointer_tag(e) != MBCF_MR_TAG_FRMR)
		return NULL;
	return xa_untag_pointer(e);
}

/*
 * Wait until no access holds a reference (the caller made the MR invalid
 * or dead first, so no new one starts).  Each holder is a walk of at most
 * one frame's payload on another CPU that takes no lock: this spins for
 * microseconds.  The caller holds no reference of its own (mr.c never
 * keeps an FRWR MR beyond one walk).
 */
static void mbcf_frmr_quiesce(struct mbcf_frmr *f)
{
	while (refcount_read(&f->mr.ref) > 1)
		cpu_relax();
}

/* --- verbs ------------------------------------------------------------------ */

static struct ib_mr *mbcf_frmr_alloc(struct ib_pd *ibpd, enum ib_mr_type type,
				     u32 max_num_sg)
{
	struct mbcf_dev *dev = mbcf_pd_dev(ibpd);
	struct mbcf_frmr *f;
	int err;

	if (type != IB_MR_TYPE_MEM_REG || ibpd->uobject)
		return ERR_PTR(-EINVAL);
	if (!max_num_sg || max_num_sg > MBCF_FRMR_MAX_PAGES)
		return ERR_PTR(-EINVAL);
	f = kzalloc(sizeof(*f), GFP_KERNEL);
	if (!f)
		return ERR_PTR(-ENOMEM);
	err = mbcf_res_get(dev, NULL, MBCF_RES_MR, &f->mr.owner);
	if (err)
		goto err_free;
	err = -ENOMEM;
	f->staged = kvcalloc(max_num_sg, sizeof(*f->staged), GFP_KERNEL);
	f->mr.pages = kvcalloc(max_num_sg, sizeof(*f->mr.pages), GFP_KERNEL);
	if (!f->staged || !f->mr.pages)
		goto err_pages;
	err = mbcf_mr_alloc_key(dev, &f->key);
	if (err)
		goto err_pages;
	spin_lock_init(&f->lock);
	spin_lock_init(&f->mr.lock);
	f->max_pages = max_num_sg;
	f->mr.pd = ibpd;
	f->mr.key = 0;		/* never matches a lookup: see the top */
	refcount_set(&f->mr.ref, 1);
	init_completion(&f->mr.released);
	f->mr.ibmr.type = IB_MR_TYPE_MEM_REG;	/* the core sets it too */
	f->mr.ibmr.lkey = f->key;
	f->mr.ibmr.rkey = f->key;
	/* Release semantics; cannot fail: the slot is reserved. */
	xa_store(&dev->mr_xa, f->key >> 8, xa_tag_pointer(f, MBCF_MR_TAG_FRMR),
		 GFP_KERNEL);
	return &f->mr.ibmr;

err_pages:
	kvfree(f->mr.pages);
	kvfree(f->staged);
	mbcf_res_put(dev, f->mr.owner, MBCF_RES_MR);
err_free:
	kfree(f);
	return ERR_PTR(err);
}

/* From mr.c's dereg_mr for an MR of type IB_MR_TYPE_MEM_REG. */
int mbcf_frmr_dereg(struct ib_mr *ibmr)
{
	struct mbcf_frmr *f = to_mbcf_frmr(ibmr);
	struct mbcf_dev *dev = mbcf_pd_dev(f->mr.pd);
	unsigned long irqf;

	spin_lock_irqsave(&f->lock, irqf);
	f->dead = true;
	f->valid = false;
	spin_unlock_irqrestore(&f->lock, irqf);
	xa_erase(&dev->mr_xa, f->key >> 8);
	/* accesses that resolved the key before: wait for them to end */
	mbcf_mr_put(&f->mr);
	wait_for_completion(&f->mr.released);
	kvfree(f->mr.pages);
	kvfree(f->staged);
	mbcf_res_put(dev, f->mr.owner, MBCF_RES_MR);
	/* late lookups may still read the struct (and take its lock) */
	kfree_rcu(f, mr.rcu);
	return 0;
}

/* ib_sg_to_pages()'s callback: @addr is a page's kernel virtual address. */
static int mbcf_frmr_set_page(struct ib_mr *ibmr, u64 addr)
{
	struct mbcf_frmr *f = to_mbcf_frmr(ibmr);
	void *va = (void *)(uintptr_t)addr;

	if (f->nstaged >= f->max_pages)
		return -ENOMEM;
	if (!PAGE_ALIGNED(addr) || !virt_addr_valid(va))
		return -EINVAL;
	f->staged[f->nstaged++] = virt_to_page(va);
	return 0;
}

/*
 * The page list of the next registration.  Pages of PAGE_SIZE only (every
 * kernel ULP asks for 4 KiB or PAGE_SIZE); ib_sg_to_pages() stops at the
 * first element that does not fit (a gap, or max_num_sg reached) and
 * returns how many it mapped, as verbs has it.
 */
static int mbcf_frmr_map_sg(struct ib_mr *ibmr, struct scatterlist *sg,
			    int sg_nents, unsigned int *sg_offset)
{
	struct mbcf_frmr *f = to_mbcf_frmr(ibmr);
	unsigned long irqf;
	int n;

	if (ibmr->page_size != PAGE_SIZE)
		return -EINVAL;
	spin_lock_irqsave(&f->lock, irqf);
	f->nstaged = 0;
	n = ib_sg_to_pages(ibmr, sg, sg_nents, sg_offset, mbcf_frmr_set_page);
	/* ib_sg_to_pages set iova to byte 0's address (a ULP may rebase
	 * it later, ib_map_mr_sg_zbva): its offset in staged[0] */
	f->staged_offset = offset_in_page(ibmr->iova);
	spin_unlock_irqrestore(&f->lock, irqf);
	return n;
}

const struct ib_device_ops mbcf_frmr_ops = {
	.alloc_mr = mbcf_frmr_alloc,
	.map_mr_sg = mbcf_frmr_map_sg,
};

/* --- work requests ------------------------------------------------------------ */

/*
 * post_send of IB_WR_REG_MR on a kernel QP: the send entry names the MR by
 * its key (the new key byte included), never by pointer.  The key's index
 * must be the MR's (ib_update_fast_reg_key changes the low byte only).
 */
int mbcf_frmr_kentry(struct mbcf_qp *qp, const struct ib_reg_wr *wr,
		     struct mbcf_send_wqe *e)
{
	if (!qp->kernel || qp->ud || !wr->mr || wr->mr->type != IB_MR_TYPE_MEM_REG ||
	    wr->mr->device != qp->ibqp.device ||
	    (to_mbcf_frmr(wr->mr)->key >> 8) != (wr->key >> 8))
		return -EINVAL;
	e->rkey = wr->key;
	e->bind.access = wr->access;
	e->num_sge = 0;
	return 0;
}

/*
 * REG_MR, when its turn in @qp's send queue comes (ops->local, under the
 * QP's lock): the MR must be invalid, in the QP's PD, and its staged list
 * must hold [0, length) from the recorded offset.  0 or -EINVAL (the
 * request completes with LOC_QP_OP_ERR and the QP fails).
 */
int mbcf_frmr_reg(struct mbcf_qp *qp, const struct mbcf_frmr_reg *r)
{
	int access = r->access & ~IB_ACCESS_OPTIONAL;
	struct mbcf_frmr *f;
	unsigned long irqf;
	u64 iova, length;
	int err = -EINVAL;

	if (access & ~MBCF_FRMR_ACCESS)
		return -EINVAL;
	/* verbs: remote write and atomic imply the memory is writable */
	if ((access & (IB_ACCESS_REMOTE_WRITE | IB_ACCESS_REMOTE_ATOMIC)) &&
	    !(access & IB_ACCESS_LOCAL_WRITE))
		return -EINVAL;
	rcu_read_lock();
	f = mbcf_frmr_lookup(qp->dev, r->key);
	if (!f)
		goto out_rcu;
	spin_lock_irqsave(&f->lock, irqf);
	if (f->dead || f->valid || f->mr.pd != qp->ibqp.pd)
		goto out;
	iova = READ_ONCE(f->mr.ibmr.iova);
	length = READ_ONCE(f->mr.ibmr.length);
	if (!f->nstaged || f->nstaged > f->max_pages || !length ||
	    iova + length < iova ||
	    f->staged_offset + length > (u64)f->nstaged << PAGE_SHIFT)
		goto out;
	/* an aligned atomic target must be aligned in memory (one page) */
	if ((access & IB_ACCESS_REMOTE_ATOMIC) &&
	    !IS_ALIGNED(iova - f->staged_offset, sizeof(u64)))
		goto out;
	/* invalid: nobody resolves it, and the invalidation waited for
	 * those who had */
	if (WARN_ON_ONCE(refcount_read(&f->mr.ref) != 1))
		goto out;
	memcpy(f->mr.pages, f->staged, f->nstaged * sizeof(*f->staged));
	f->mr.npages = f->nstaged;
	f->mr.page_offset = f->staged_offset;
	f->mr.iova = iova;
	f->mr.length = length;
	f->mr.access = access;
	f->key = r->key;
	f->valid = true;
	err = 0;
out:
	spin_unlock_irqrestore(&f->lock, irqf);
out_rcu:
	rcu_read_unlock();
	return err;
}

/*
 * Invalidate the FRWR MR @key: a LOCAL_INV posted on @qp, or (@remote) a
 * SEND_WITH_INV @qp received.  The key must be the MR's current one and
 * the MR in @qp's PD; invalidating an MR that is already invalid is no
 * error (verbs).  -ENOENT if @key is no FRWR MR's (the caller tries memory
 * windows), -EINVAL otherwise.  Returns once no access uses the pages.
 */
int mbcf_frmr_invalidate(struct mbcf_qp *qp, u32 key, bool remote)
{
	struct mbcf_frmr *f;
	unsigned long irqf;
	int err = -EINVAL;

	rcu_read_lock();
	f = mbcf_frmr_lookup(qp->dev, key);
	if (!f) {
		rcu_read_unlock();
		return -ENOENT;
	}
	spin_lock_irqsave(&f->lock, irqf);
	if (!f->dead && f->key == key && f->mr.pd == qp->ibqp.pd) {
		f->valid = false;
		err = 0;
	}
	spin_unlock_irqrestore(&f->lock, irqf);
	if (!err)
		mbcf_frmr_quiesce(f);
	rcu_read_unlock();
	return err;
}

/*
 * mr.c's lookup of an FRWR MR's key (caller holds rcu_read_lock()): the
 * live registration, referenced for one access, if it is valid under
 * exactly @key, in @pd, grants @access and holds [va, va + len).  -ENOKEY
 * for a stale or invalidated key, -EACCES, -ERANGE.
 */
struct mbcf_mr *mbcf_frmr_resolve(struct mbcf_frmr *f, struct ib_pd *pd,
				  u32 key, u64 va, u64 len, int access)
{
	struct mbcf_mr *mr = &f->mr;
	unsigned long irqf;

	spin_lock_irqsave(&f->lock, irqf);
	if (f->dead || !f->valid || f->key != key) {
		mr = ERR_PTR(-ENOKEY);
	} else if (mr->pd != pd || (mr->access & access) != access) {
		mr = ERR_PTR(-EACCES);
	} else if (va < mr->iova || len > mr->length ||
		   va - mr->iova > mr->length - len) {
		mr = ERR_PTR(-ERANGE);
	} else {
		refcount_inc(&mr->ref);	/* ours holds it above zero */
	}
	spin_unlock_irqrestore(&f->lock, irqf);
	return mr;
}
