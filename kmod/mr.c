// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * mbcf memory regions: user memory pinned for remote and local access, and
 * the only code in the module that touches its pages.
 *
 * A key (lkey == rkey) is the MR's index in the device's xarray shifted left
 * by 8, or'ed with a generation, so a stale key whose index was reused fails.
 * Memory windows (mw.c) share the key space: their xarray entries are
 * tagged, and a window's rkey resolves to the MR it is bound to.
 * The receive path (softirq, under a QP spinlock) finds the MR under
 * rcu_read_lock() and checks key, PD, access and bounds before it touches a
 * byte; a copy also holds a reference, kept to the end of the QP's lock
 * hold for the next access to the same MR (mbcf_mr_use).
 *
 * Frames we send may carry an MR's pages as fragments instead of a copy,
 * which the stack reads later: each MR embeds its zero-copy state, and
 * zc.c holds the whole life cycle of those frames.
 *
 * dereg_mr unpublishes the MR, drops the registry's reference and waits
 * for the copies in flight (short, never sleeping) -- after which no new
 * frame can take the MR -- then for the frames that still carry its pages,
 * then unpins: once it returns the device reads and writes none of that
 * memory (verbs).  The struct itself is freed after a grace period
 * (kfree_rcu) for lookups that raced with the unpublish.  Waiting for a
 * grace period in each dereg_mr instead (synchronize_rcu, ~20 ms) made a
 * process exit with thousands of MRs take minutes.
 */
#include <linux/highmem.h>
#include <linux/mm.h>
#include <linux/random.h>
#include <linux/rcupdate.h>
#include <linux/slab.h>
#include <linux/xarray.h>
#include <rdma/ib_umem.h>

#include "mbcf.h"
#include "zc.h"
#include "rdma/mbcf-abi.h"

#define MBCF_MR_GEN_BITS	8
#define MBCF_MR_INDEX_MAX	((1U << (32 - MBCF_MR_GEN_BITS)) - 1)

/* The access an MR may grant; anything else is refused. */
#define MBCF_MR_ACCESS		(IB_ACCESS_LOCAL_WRITE | IB_ACCESS_REMOTE_WRITE | \
				 IB_ACCESS_REMOTE_READ | IB_ACCESS_REMOTE_ATOMIC | \
				 IB_ACCESS_MW_BIND)

/*
 * What mbcf_mr_walk() does with each piece of a range.  MBCF_MR_POSTED is
 * MBCF_MR_CHECK of a send SGE being posted: an FRWR key passes it
 * unchecked (see mbcf_mr_check_local).
 */
enum mbcf_mr_op {
	MBCF_MR_CHECK, MBCF_MR_POSTED, MBCF_MR_LOAD, MBCF_MR_STORE, MBCF_MR_REF
};

static inline struct mbcf_mr *to_mbcf_mr(struct ib_mr *ibmr)
{
	return container_of(ibmr, struct mbcf_mr, ibmr);
}

static inline u32 mbcf_mr_key_index(u32 key)
{
	return key >> MBCF_MR_GEN_BITS;
}

/*
 * Keys are not predictable from one device to the next (a spoofed frame
 * must guess one): the cyclic cursor starts at a random index and the
 * generation at a random byte.  Allocation then goes on exactly as it did
 * from index 1, generation 0.
 */
void mbcf_mr_dev_init(struct mbcf_dev *dev)
{
	xa_init_flags(&dev->mr_xa, XA_FLAGS_ALLOC1);
	dev->mr_next = get_random_u32_inclusive(1, MBCF_MR_INDEX_MAX);
	dev->mr_gen = get_random_u32_below(1U << MBCF_MR_GEN_BITS);
	atomic_set(&dev->mr_count, 0);
	atomic_set(&dev->mw_count, 0);
	atomic_long_set(&dev->mr_pinned_pages, 0);
}

/* From dealloc_driver: every ucontext, hence every MR, is gone by now. */
void mbcf_mr_dev_fini(struct mbcf_dev *dev)
{
	WARN_ON_ONCE(atomic_read(&dev->mr_count));
	WARN_ON_ONCE(atomic_read(&dev->mw_count));
	WARN_ON_ONCE(atomic_long_read(&dev->mr_pinned_pages));
	WARN_ON_ONCE(!xa_empty(&dev->mr_xa));
	xa_destroy(&dev->mr_xa);
}

/* --- registration ---------------------------------------------------------- */

static int mbcf_mr_check_args(u64 start, u64 length, u64 iova, int access)
{
	if (!length || iova + length < iova)
		return -EINVAL;
	/*
	 * Target address iova + n is user address start + n.  Equal page
	 * offsets (uverbs insists too) keep an 8-byte aligned target address
	 * aligned in memory, so an atomic never straddles a page.
	 */
	if (offset_in_page(start) != offset_in_page(iova))
		return -EINVAL;
	if (access & ~MBCF_MR_ACCESS)
		return -EINVAL;
	/* Verbs: remote write and atomic imply the memory is writable. */
	if ((access & (IB_ACCESS_REMOTE_WRITE | IB_ACCESS_REMOTE_ATOMIC)) &&
	    !(access & IB_ACCESS_LOCAL_WRITE))
		return -EINVAL;
	return 0;
}

/* An array of the pinned pages, so a byte's page is found in O(1). */
static int mbcf_mr_fill_pages(struct mbcf_mr *mr)
{
	struct sg_page_iter iter;
	unsigned long i = 0;

	mr->npages = ib_umem_num_pages(mr->umem);
	/* NOWARN (in MBCF_GFP_OBJ): kvmalloc WARNs on > INT_MAX bytes, a
	 * size user space picks. */
	mr->pages = kvmalloc_array(mr->npages, sizeof(*mr->pages), MBCF_GFP_OBJ);
	if (!mr->pages)
		return -ENOMEM;
	for_each_sgtable_page(&mr->umem->sgt_append.sgt, &iter, 0) {
		if (WARN_ON_ONCE(i == mr->npages))
			goto err_count;
		mr->pages[i++] = sg_page_iter_page(&iter);
	}
	if (WARN_ON_ONCE(i != mr->npages))
		goto err_count;
	return 0;

err_count:
	kvfree(mr->pages);
	return -EFAULT;
}

/*
 * Reserve an index (xa_load() returns NULL for it until the MR is
 * published) and make the key.  An index comes back only after the cyclic
 * cursor wrapped, so bumping the generation on each wrap makes every key
 * of a reused index differ from its old ones (for 256 wraps).
 */
int mbcf_mr_alloc_key(struct mbcf_dev *dev, u32 *key)
{
	u32 index;
	int err;

	xa_lock(&dev->mr_xa);
	err = __xa_alloc_cyclic(&dev->mr_xa, &index, NULL,
				XA_LIMIT(1, MBCF_MR_INDEX_MAX), &dev->mr_next,
				GFP_KERNEL);
	if (err == 1)
		dev->mr_gen++;
	*key = index << MBCF_MR_GEN_BITS | dev->mr_gen;
	xa_unlock(&dev->mr_xa);
	return err < 0 ? err : 0;
}

static void mbcf_mr_unpin(struct mbcf_dev *dev, struct mbcf_mr *mr)
{
	atomic_long_sub(mr->npages, &dev->mr_pinned_pages);
	kvfree(mr->pages);
	ib_umem_release(mr->umem);
}

/* Make a fully set up MR visible to lookups (a FIFO's tagged: fifo.c). */
static void mbcf_mr_publish(struct mbcf_dev *dev, struct mbcf_mr *mr)
{
	void *e = mr->fifo ? xa_tag_pointer(mr, MBCF_MR_TAG_FIFO) : mr;

	refcount_set(&mr->ref, 1);		/* the registry's */
	init_completion(&mr->released);
	mbcf_zc_init(&mr->zc, dev);
	spin_lock_init(&mr->lock);
	mr->ibmr.lkey = mr->key;
	mr->ibmr.rkey = mr->key;
	atomic_long_add(mr->npages, &dev->mr_pinned_pages);
	/* Release semantics; cannot fail: the slot is reserved. */
	xa_store(&dev->mr_xa, mbcf_mr_key_index(mr->key), e, GFP_KERNEL);
}

/*
 * The driver data of reg_user_mr: none (a plain MR), or a FIFO's
 * (struct mbcf_reg_mr_cmd, exactly): *fifo set then, checked by fifo.c.
 */
static int mbcf_mr_udata(struct ib_udata *udata, u64 start, u64 length,
			 int access, struct mbcf_reg_mr_cmd *fifo)
{
	int err;

	memset(fifo, 0, sizeof(*fifo));
	if (!udata || !udata->inlen)
		return 0;
	if (udata->inlen != sizeof(*fifo))
		return -EINVAL;
	err = ib_copy_from_udata(fifo, udata, sizeof(*fifo));
	if (err)
		return err;
	if (fifo->flags != MBCF_MR_FIFO)
		return -EINVAL;
	return mbcf_fifo_check(start, length, access, fifo);
}

static struct ib_mr *mbcf_mr_reg_user_va(struct ib_pd *ibpd, u64 start,
					 u64 length, u64 iova, int access,
					 struct ib_udata *udata)
{
	struct mbcf_dev *dev = mbcf_pd_dev(ibpd);
	struct mbcf_reg_mr_cmd fifo;
	struct mbcf_mr *mr;
	int err;

	/* Optional flags (relaxed ordering) are hints; they mean nothing here. */
	access &= ~IB_ACCESS_OPTIONAL;
	err = mbcf_mr_check_args(start, length, iova, access);
	if (err)
		return ERR_PTR(err);
	err = mbcf_mr_udata(udata, start, length, access, &fifo);
	if (err)
		return ERR_PTR(err);

	mr = kzalloc(sizeof(*mr), MBCF_GFP_OBJ);
	if (!mr)
		return ERR_PTR(-ENOMEM);
	err = mbcf_res_get(dev, udata, MBCF_RES_MR, &mr->owner);
	if (err)
		goto err_count;
	/* Pins (writable if any write access) and charges RLIMIT_MEMLOCK. */
	mr->umem = mbcf_umem_get(ibpd->device, start, length, access);
	if (IS_ERR(mr->umem)) {
		err = PTR_ERR(mr->umem);
		goto err_alloc;
	}
	err = mbcf_mr_fill_pages(mr);
	if (err)
		goto err_pin;
	if (fifo.flags) {
		mr->fifo = mbcf_fifo_create(&fifo, mr->pages, mr->npages,
					    offset_in_page(start));
		if (IS_ERR(mr->fifo)) {
			err = PTR_ERR(mr->fifo);
			mr->fifo = NULL;
			goto err_pages;
		}
	}
	err = mbcf_mr_alloc_key(dev, &mr->key);
	if (err)
		goto err_fifo;
	/* ibmr.pd is set by the core only after we return: keep our own. */

	mr->pd = ibpd;
	mr->iova = iova;
	mr->length = length;
	mr->page_offset = offset_in_page(start);
	mr->access = access;
	mbcf_mr_publish(dev, mr);
	return &mr->ibmr;

err_fifo:
	mbcf_fifo_free(mr->fifo);
err_pages:
	kvfree(mr->pages);
err_pin:
	ib_umem_release(mr->umem);
err_alloc:
	mbcf_res_put(dev, mr->owner, MBCF_RES_MR);
err_count:
	kfree(mr);
	return ERR_PTR(err);
}

/* reg_user_mr's signature differs by kernel (compat.h): a DMA handle, refused. */
MBCF_REG_USER_MR_OP(mbcf_mr_reg_user, mbcf_mr_reg_user_va)

void mbcf_mr_put(struct mbcf_mr *mr)
{
	if (refcount_dec_and_test(&mr->ref))
		complete(&mr->released);
}

/*
 * Also called for each live MR when a process dies.  EBUSY while memory
 * windows are bound to it (verbs); the RDMA core retries after it has
 * deallocated the windows, so teardown always completes.
 */
static int mbcf_mr_dereg(struct ib_mr *ibmr, struct ib_udata *udata)
{
	struct mbcf_mr *mr = to_mbcf_mr(ibmr);
	struct mbcf_dev *dev = mbcf_pd_dev(mr->pd);

	if (ibmr->type == IB_MR_TYPE_MEM_REG)	/* FRWR: frmr.c */
		return mbcf_frmr_dereg(ibmr);
	if (!mr->umem) {	/* a DMA MR: nothing published, nothing pinned */
		kfree(mr);
		return 0;
	}
	spin_lock_bh(&mr->lock);
	if (mr->windows) {
		spin_unlock_bh(&mr->lock);
		return -EBUSY;
	}
	mr->dead = true;	/* no window binds to it from now on */
	spin_unlock_bh(&mr->lock);
	xa_erase(&dev->mr_xa, mbcf_mr_key_index(mr->key));
	/*
	 * No new copy can start now: a lookup that loaded the MR before the
	 * erase fails refcount_inc_not_zero() once the count hits zero.
	 * Wait for the copies in flight (short, never sleeping) to end.
	 */
	mbcf_mr_put(mr);
	wait_for_completion(&mr->released);
	/* No new frame takes the pages now (that needs mr->ref); wait for
	 * those in flight, before the pages are unpinned. */
	mbcf_zc_drain(&mr->zc, mr->key);
	mbcf_fifo_free(mr->fifo);	/* no push holds it: mr->ref is 0 */
	mbcf_mr_unpin(dev, mr);
	mbcf_res_put(dev, mr->owner, MBCF_RES_MR);
	kfree_rcu(mr, rcu);
	return 0;
}

/*
 * The DMA MR of a kernel PD: its lkey is the device's local DMA lkey (SGEs
 * hold kernel virtual addresses), which only kernel QPs may use and only
 * for local access.  A remote key to all of kernel memory
 * (IB_PD_UNSAFE_GLOBAL_RKEY) is refused.  Nothing is published or pinned.
 */
static struct ib_mr *mbcf_mr_get_dma(struct ib_pd *ibpd, int access)
{
	struct mbcf_mr *mr;

	if (ibpd->uobject || (access & ~IB_ACCESS_LOCAL_WRITE))
		return ERR_PTR(-EOPNOTSUPP);
	mr = kzalloc(sizeof(*mr), GFP_KERNEL);
	if (!mr)
		return ERR_PTR(-ENOMEM);
	mr->pd = ibpd;
	mr->key = MBCF_DMA_LKEY;
	mr->access = access;
	mr->ibmr.lkey = MBCF_DMA_LKEY;
	mr->ibmr.rkey = MBCF_DMA_LKEY;	/* no MR has it: remote access fails */
	return &mr->ibmr;
}

const struct ib_device_ops mbcf_mr_ops = {
	.get_dma_mr = mbcf_mr_get_dma,
	.reg_user_mr = mbcf_mr_reg_user,
	.dereg_mr = mbcf_mr_dereg,
};

/* --- lookup and access (any context, never sleeps) ------------------------- */

/*
 * @mr (the xarray entry of key's index), if it is key's MR and grants
 * access to [va, va + len) in pd.  Caller holds rcu_read_lock(), which
 * keeps the struct (not its pages) valid.
 */
static struct mbcf_mr *mbcf_mr_find(struct mbcf_mr *mr, struct ib_pd *pd,
				    u32 key, u64 va, u64 len, int access)
{
	if (!mr || mr->key != key)
		return ERR_PTR(-ENOKEY);
	if (mr->pd != pd || (mr->access & access) != access)
		return ERR_PTR(-EACCES);
	/* Overflow-safe form of iova <= va && va + len <= iova + length. */
	if (va < mr->iova || len > mr->length || va - mr->iova > mr->length - len)
		return ERR_PTR(-ERANGE);
	return mr;
}

/*
 * The MR that holds [va, va + len) under @key for an access on behalf of
 * @qp (its PD; a type 2 window's QP), with a reference that keeps the
 * pages pinned (mbcf_mr_put).  A window's rkey resolves to the MR it is
 * bound to, with the window's access and bounds (remote access only).
 * NULL, with @frmr_later, if @key is an FRWR MR's: not to be checked yet.
 */
static struct mbcf_mr *mbcf_mr_get(struct mbcf_qp *qp, struct ib_pd *pd,
				   u32 key, u64 va, u64 len, int access,
				   bool frmr_later)
{
	void *e;
	struct mbcf_mr *mr;

	rcu_read_lock();
	e = xa_load(&qp->dev->mr_xa, mbcf_mr_key_index(key));
	if (xa_pointer_tag(e) == MBCF_MR_TAG_MW) {
		mr = mbcf_mw_resolve(xa_untag_pointer(e), qp, key, va, len,
				     access);
	} else if (xa_pointer_tag(e) == MBCF_MR_TAG_FRMR) {	/* frmr.c */
		mr = frmr_later ? NULL :
		     mbcf_frmr_resolve(xa_untag_pointer(e), pd, key, va, len,
				       access);
	} else if (xa_pointer_tag(e) == MBCF_MR_TAG_FIFO) {
		mr = ERR_PTR(-EACCES);	/* a FIFO's key: pushes only */
	} else {
		mr = mbcf_mr_find(e, pd, key, va, len, access);
		if (!IS_ERR(mr) && !refcount_inc_not_zero(&mr->ref))
			mr = ERR_PTR(-ENOKEY);	/* being deregistered */
	}
	rcu_read_unlock();
	return mr;
}

/*
 * The MR for an access by @qp (its lock held): the one this lock hold
 * found last if @key names it (no xarray walk, no atomic), else looked up
 * and kept in its place (its reference moves to qp->mr_hot).  *@own says
 * the caller holds a reference of its own to put: a window's rkey
 * resolves afresh each time (it may be invalidated or rebound any time).
 * A hold that found the MR before dereg_mr unpublished it may go on
 * using it until the lock is dropped, as a copy in flight goes on to its
 * end: dereg_mr waits for that reference too, and no access starts after
 * it returns.
 */
static struct mbcf_mr *mbcf_mr_use(struct mbcf_qp *qp, struct ib_pd *pd,
				   u32 key, u64 va, u64 len, int access,
				   enum mbcf_mr_op op, bool *own)
{
	struct mbcf_mr *mr = qp->mr_hot;

	lockdep_assert_held(&qp->lock);
	*own = false;
	if (mr && mr->key == key)	/* never an FRWR MR: its mr.key is 0 */
		return mbcf_mr_find(mr, pd, key, va, len, access);
	mr = mbcf_mr_get(qp, pd, key, va, len, access, op == MBCF_MR_POSTED);
	if (IS_ERR_OR_NULL(mr))
		return mr;
	if (mr->key != key) {
		*own = true;
		return mr;
	}
	mbcf_mr_forget(qp);
	qp->mr_hot = mr;
	return mr;
}

/* Before @qp's lock is dropped: the MR kept for the hold goes. */
void mbcf_mr_forget(struct mbcf_qp *qp)
{
	lockdep_assert_held(&qp->lock);
	if (qp->mr_hot) {
		mbcf_mr_put(qp->mr_hot);
		qp->mr_hot = NULL;
	}
}

/*
 * Store @n bytes so that the last 8 become visible last.  The kernel's
 * memcpy may copy backwards (x86 memcpy_orig does, to dodge false store
 * dependences), and applications poll the last bytes of an RDMA write to
 * see it has landed (perftest's ib_write_lat does): once they see them,
 * every earlier byte of the message must be there.  Frames are applied in
 * order and pages front to back, so ordering each chunk's tail suffices.
 */
static void mbcf_mr_store_ordered(struct page *page, u32 in_page,
				  const void *buf, u32 n)
{
	u8 *dst = kmap_local_page(page) + in_page;

	if (n > 8) {
		memcpy(dst, buf, n - 8);
		smp_wmb();
		memcpy(dst + n - 8, buf + n - 8, 8);
	} else {
		memcpy(dst, buf, n);
	}
	flush_dcache_page(page);
	kunmap_local(dst);
}

/*
 * Walk len bytes at offset off of a checked range, page by page: copy them
 * in or out, or (MBCF_MR_REF) take a page reference per piece for a frame
 * that will carry them without a copy.  Returns -E2BIG if the pieces do
 * not fit the caller's span array (references taken so far are kept; the
 * caller drops them).
 */
static int mbcf_mr_walk(struct mbcf_mr *mr, u64 off, u32 len,
			enum mbcf_mr_op op, void *arg)
{
	u64 pos = off + mr->page_offset;
	struct mbcf_spans *sp = arg;
	u8 *buf = arg;

	while (len) {
		struct page *page = mr->pages[pos >> PAGE_SHIFT];
		u32 in_page = offset_in_page(pos);
		u32 n = min_t(u32, len, PAGE_SIZE - in_page);

		switch (op) {
		case MBCF_MR_STORE:
			mbcf_mr_store_ordered(page, in_page, buf, n);
			buf += n;
			break;
		case MBCF_MR_LOAD:
			memcpy_from_page(buf, page, in_page, n);
			buf += n;
			break;
		case MBCF_MR_REF:
			if (mbcf_zc_add(sp, page, in_page, n))
				return -E2BIG;
			break;
		case MBCF_MR_CHECK:
		case MBCF_MR_POSTED:
			break;
		}
		pos += n;
		len -= n;
	}
	return 0;
}

/*
 * The MR @lkey names, for a window that @qp binds: in @qp's PD, registered
 * with MW_BIND (and @access), holding [addr, addr + length), not being
 * deregistered.  Referenced and counted in mr->windows: the window's
 * binding owns both (mw.c drops them when it unbinds).
 */
struct mbcf_mr *mbcf_mr_get_bindable(struct mbcf_qp *qp, u32 lkey, u64 addr,
				     u64 length, int access)
{
	struct mbcf_mr *mr;
	void *e;

	rcu_read_lock();
	e = xa_load(&qp->dev->mr_xa, mbcf_mr_key_index(lkey));
	if (xa_pointer_tag(e))
		e = NULL;	/* a window's key names no MR; no window on FRWR */
	mr = mbcf_mr_find(e, qp->ibqp.pd, lkey, addr, length,
			  access | IB_ACCESS_MW_BIND);
	if (!IS_ERR(mr)) {
		spin_lock_bh(&mr->lock);
		if (mr->dead || !refcount_inc_not_zero(&mr->ref))
			mr = ERR_PTR(-ENOKEY);
		else
			mr->windows++;
		spin_unlock_bh(&mr->lock);
	}
	rcu_read_unlock();
	return mr;
}

static int mbcf_mr_access(struct mbcf_qp *qp, struct ib_pd *pd, u32 key,
			  u64 va, u32 len, int access, enum mbcf_mr_op op,
			  void *arg)
{
	struct mbcf_mr *mr;
	bool own;
	int err;

	/* Verbs: a zero-length operation needs no valid key. */
	if (!len)
		return 0;
	mr = mbcf_mr_use(qp, pd, key, va, len, access, op, &own);
	if (IS_ERR(mr))
		return PTR_ERR(mr);
	if (!mr)
		return 0;	/* MBCF_MR_POSTED of an FRWR key */
	/* frmr.c: the consumer's pages must not outlive an invalidation
	 * in a frame's fragments: copy */
	if (op == MBCF_MR_REF && mr->ibmr.type == IB_MR_TYPE_MEM_REG) {
		if (own)
			mbcf_mr_put(mr);
		return -E2BIG;
	}
	if (op == MBCF_MR_REF) {
		struct mbcf_spans *sp = arg;

		/* One MR a frame.  The reference on mr->ref (ours, or
		 * qp->mr_hot's) keeps the zero-copy count above zero
		 * (dereg drops the registry's only once mr->ref hit zero). */
		if (mbcf_zc_hold(sp, &mr->zc)) {
			if (own)
				mbcf_mr_put(mr);
			return -E2BIG;
		}
	}
	err = mbcf_mr_walk(mr, va - mr->iova, len, op, arg);
	if (own)
		mbcf_mr_put(mr);
	return err;
}

int mbcf_mr_copy_in(struct mbcf_qp *qp, u32 key, u64 va, const void *src,
		    u32 len, int access)
{
	/* Pages pinned without FOLL_WRITE (no write access) are never written. */
	return mbcf_mr_access(qp, qp->ibqp.pd, key, va, len,
			      access | IB_ACCESS_LOCAL_WRITE, MBCF_MR_STORE,
			      (void *)src);
}

int mbcf_mr_copy_out(struct mbcf_qp *qp, u32 key, u64 va, void *dst, u32 len,
		     int access)
{
	return mbcf_mr_access(qp, qp->ibqp.pd, key, va, len, access,
			      MBCF_MR_LOAD, dst);
}

int mbcf_mr_ref_pages(struct mbcf_qp *qp, u32 key, u64 va, u32 len, int access,
		      struct mbcf_spans *sp)
{
	return mbcf_mr_access(qp, qp->ibqp.pd, key, va, len, access,
			      MBCF_MR_REF, sp);
}

int mbcf_mr_check(struct mbcf_qp *qp, u32 key, u64 va, u32 len, int access)
{
	return mbcf_mr_access(qp, qp->ibqp.pd, key, va, len, access,
			      MBCF_MR_CHECK, NULL);
}

/*
 * A real atomic instruction on the target memory, so it is atomic against
 * the target CPU's own accesses too, with no lock.  The 8 aligned bytes lie
 * in one page (equal page offsets of iova and start, see check_args).
 */
static u64 mbcf_mr_atomic_op(struct mbcf_mr *mr, u64 off, bool cmp_swap,
			     u64 swap_add, u64 compare)
{
	u64 pos = off + mr->page_offset;
	struct page *page = mr->pages[pos >> PAGE_SHIFT];
	atomic64_t *p = kmap_local_page(page) + offset_in_page(pos);
	u64 orig;

	if (cmp_swap)
		orig = atomic64_cmpxchg(p, compare, swap_add);
	else
		orig = atomic64_fetch_add(swap_add, p);
	flush_dcache_page(page);
	kunmap_local(p);
	return orig;
}

int mbcf_mr_atomic(struct mbcf_qp *qp, u32 key, u64 va, bool cmp_swap,
		   u64 swap_add, u64 compare, u64 *orig)
{
	struct mbcf_mr *mr;

	if (!IS_ALIGNED(va, sizeof(u64)))
		return -EINVAL;
	mr = mbcf_mr_get(qp, qp->ibqp.pd, key, va, sizeof(u64),
			 IB_ACCESS_REMOTE_ATOMIC | IB_ACCESS_LOCAL_WRITE, false);
	if (IS_ERR(mr))
		return PTR_ERR(mr);
	*orig = mbcf_mr_atomic_op(mr, va - mr->iova, cmp_swap, swap_add, compare);
	mbcf_mr_put(mr);
	return 0;
}

/*
 * A kernel QP's SGE under the local DMA lkey: @va is a kernel virtual
 * address the consumer handed us (it owns that memory, as with any DMA
 * address).  Frames copy it rather than reference its pages (-E2BIG): it
 * may be slab memory.  Nobody else gets past the key check: user QPs and
 * remote keys see key 0 as no MR at all (-ENOKEY).
 */
static int mbcf_mr_kva(struct mbcf_qp *qp, u64 va, u32 len,
		       enum mbcf_mr_op op, void *arg)
{
	void *p = (void *)(uintptr_t)va;

	if (!qp->kernel)
		return -ENOKEY;
	switch (op) {
	case MBCF_MR_STORE:
		memcpy(p, arg, len);
		return 0;
	case MBCF_MR_LOAD:
		memcpy(arg, p, len);
		return 0;
	case MBCF_MR_REF:
		return -E2BIG;
	default:
		return 0;
	}
}

/*
 * mbcf_mr_check() of one of @qp's own send SGEs when it is posted (local
 * access: DMA lkey too).  Not an FRWR MR's lkey: a REG_MR posted before
 * this request on the same send queue makes it valid only when its turn
 * comes (send-queue order, the core's ops->local), after this check (iSER
 * sends immediate data under the lkey it has just registered); the one key
 * lookup of MBCF_MR_POSTED tells.  The access itself resolves the key
 * afresh, in order (mbcf_mr_copy_out, _in); a key not valid then fails the
 * request with IB_WC_LOC_PROT_ERR there.
 */
int mbcf_mr_check_local(struct mbcf_qp *qp, u32 lkey, u64 va, u32 len,
			int access)
{
	if (lkey == MBCF_DMA_LKEY)
		return mbcf_mr_kva(qp, va, len, MBCF_MR_CHECK, NULL);
	return mbcf_mr_access(qp, qp->ibqp.pd, lkey, va, len, access,
			      MBCF_MR_POSTED, NULL);
}

/*
 * Bytes [offset, offset + len) of the concatenation of an SGL: skip the
 * SGEs before offset, then one MR access per SGE touched (one in the
 * common single-SGE case).
 */
static int mbcf_mr_sgl_access(struct mbcf_qp *qp, struct ib_pd *pd,
			      const struct mbcf_sge *sge, u32 num_sge,
			      u32 offset, u32 len, int access,
			      enum mbcf_mr_op op, void *arg)
{
	const struct mbcf_sge *end = sge + num_sge;
	u64 skip = offset;
	int err;

	for (; len; sge++) {
		u64 va;
		u32 n;

		if (sge == end)
			return -ERANGE;
		if (skip >= sge->length) {
			skip -= sge->length;
			continue;
		}
		va = sge->addr + skip;
		if (va < sge->addr)
			return -ERANGE;
		n = min_t(u64, len, sge->length - skip);
		if (sge->lkey == MBCF_DMA_LKEY)
			err = mbcf_mr_kva(qp, va, n, op, arg);
		else
			err = mbcf_mr_access(qp, pd, sge->lkey, va, n, access,
					     op, arg);
		if (err)
			return err;
		if (op != MBCF_MR_REF)
			arg = (u8 *)arg + n;
		len -= n;
		skip = 0;
	}
	return 0;
}

/* Reading one's own registered memory needs no access flag. */
int mbcf_mr_gather(struct mbcf_qp *qp, const struct mbcf_sge *sge, u32 num_sge,
		   u32 offset, void *dst, u32 len)
{
	return mbcf_mr_sgl_access(qp, qp->ibqp.pd, sge, num_sge, offset, len,
				  0, MBCF_MR_LOAD, dst);
}

int mbcf_mr_gather_pages(struct mbcf_qp *qp, const struct mbcf_sge *sge,
			 u32 num_sge, u32 offset, u32 len, struct mbcf_spans *sp)
{
	return mbcf_mr_sgl_access(qp, qp->ibqp.pd, sge, num_sge, offset, len,
				  0, MBCF_MR_REF, sp);
}

/* Into SGEs of @pd's memory: @qp's own, or its SRQ's receives. */
int mbcf_mr_scatter(struct mbcf_qp *qp, struct ib_pd *pd,
		    const struct mbcf_sge *sge, u32 num_sge, u32 offset,
		    const void *src, u32 len)
{
	return mbcf_mr_sgl_access(qp, pd, sge, num_sge, offset, len,
				  IB_ACCESS_LOCAL_WRITE, MBCF_MR_STORE,
				  (void *)src);
}

/* --- FIFOs (fifo.c): their lookup ----------------------------------------- */

/*
 * The FIFO of @key in @pd, referenced (mbcf_mr_put) as a copy is: dereg
 * waits for the reference.  Any context; NULL if the key names none.
 */
struct mbcf_mr *mbcf_mr_get_fifo(struct mbcf_dev *dev, struct ib_pd *pd,
				 u32 key)
{
	struct mbcf_mr *mr = NULL;
	void *e;

	rcu_read_lock();
	e = xa_load(&dev->mr_xa, mbcf_mr_key_index(key));
	if (xa_pointer_tag(e) == MBCF_MR_TAG_FIFO) {
		mr = xa_untag_pointer(e);
		if (mr->key != key || mr->pd != pd ||
		    !refcount_inc_not_zero(&mr->ref))
			mr = NULL;
	}
	rcu_read_unlock();
	return mr;
}
