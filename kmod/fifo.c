// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Memory-based FIFOs (docs/protocol.md 16): a user MR registered with
 * MBCF_MR_FIFO in its driver data.  Pinning, the PD, the key, limits and
 * dereg are the MR's (mr.c); its key is published tagged
 * MBCF_MR_TAG_FIFO, so no RDMA access, lkey or window binding takes it,
 * only a FIFO_PUSH (fifo_get, here).  A push holds the MR's reference
 * from fifo_get to fifo_put, so dereg_mr waits for the pushes running on
 * other CPUs before it unpins, as for a copy in flight.  mr.c touches the
 * bytes (mbcf_mr_fifo_*), never outside [addr, addr + 128 + size); the
 * core decides what to write (core/fifo.c).
 *
 * A QP the core STOPs because the FIFO had no room is remembered in the
 * FIFO's waiter set (by QP number, at most MBCF_FIFO_WAITERS of them);
 * the owner's doorbell -- ibv_advise_mr(PREFETCH_WRITE) on the key, after
 * it consumed and found `wait` set -- sends GO to each and empties the
 * set.  A QP not remembered (the set full, no memory) resends after its
 * min_rnr_timer: nothing is lost either way, a GO is only sooner.
 *
 * The signal (16.5): a FIFO created with MBCF_FIFO_SIGNAL(_EMPTY) holds the
 * owner's eventfd context, taken at reg in process context and put when
 * the FIFO is freed (after dereg waited out every push's reference); the
 * core's mem->signal adds 1 to it from the receive path, after the record
 * is published.  Local only: nothing on the wire changes.
 */
#include <linux/eventfd.h>
#include <linux/highmem.h>
#include <linux/slab.h>
#include <linux/vmalloc.h>
#include <linux/xarray.h>

#include "mbcf.h"
#include "mbcf/fifo.h"
#include "rdma/mbcf-abi.h"

/* QPs one FIFO remembers for its doorbell: bounds the set and one ring. */
#define MBCF_FIFO_WAITERS	1024

struct mbcf_kfifo {
	u8 *ctrl;			/* the control block, in map */
	u8 *area;			/* the record area: ctrl + 128 */
	void *map;			/* vmap of the MR's pinned pages */
	u32 size;			/* record area, bytes */
	u32 flags;			/* MBCF_FIFO_FULL_ERROR, _SIGNAL(_EMPTY) */
	struct xarray waiters;		/* qpn -> value 0: STOPped for room */
	atomic_t nwait;			/* entries in waiters */
	struct eventfd_ctx *ev;		/* the signal's, or NULL */
};

/* reg_user_mr's FIFO arguments (mr.c parsed them). */
int mbcf_fifo_check(u64 start, u64 length, int access,
		    const struct mbcf_reg_mr_cmd *c)
{
	u32 sig = c->fifo_flags & (MBCF_FIFO_SIGNAL | MBCF_FIFO_SIGNAL_EMPTY);

	if (!mbcf_fifo_size_ok(c->fifo_size) ||
	    (c->fifo_flags & ~MBCF_FIFO_FLAGS) ||
	    sig == (MBCF_FIFO_SIGNAL | MBCF_FIFO_SIGNAL_EMPTY))
		return -EINVAL;
	/* no signal: the old reserved field, 0 (or -1, "none") */
	if (!sig && c->fifo_eventfd != 0 && c->fifo_eventfd != -1)
		return -EINVAL;
	if (sig && c->fifo_eventfd < 0)
		return -EBADF;
	if (length != MBCF_FIFO_CTRL_LEN + (u64)c->fifo_size ||
	    !IS_ALIGNED(start, 64))
		return -EINVAL;
	/* writable for the kernel, nothing for a peer but pushes */
	if (access != IB_ACCESS_LOCAL_WRITE)
		return -EINVAL;
	return 0;
}

/*
 * In process context (reg_user_mr, mbcf_fifo_check passed): the FIFO over
 * the MR's @npages pinned @pages, byte 0 at @page_offset in the first, or
 * an ERR_PTR (EBADF: the signal's fd is not open, EINVAL: not an eventfd,
 * ENOMEM).
 */
struct mbcf_kfifo *mbcf_fifo_create(const struct mbcf_reg_mr_cmd *c,
				    struct page **pages, unsigned long npages,
				    u32 page_offset)
{
	struct mbcf_kfifo *k;
	u64 len = MBCF_FIFO_CTRL_LEN + (u64)c->fifo_size;

	if (page_offset >= PAGE_SIZE ||
	    npages != DIV_ROUND_UP(page_offset + len, PAGE_SIZE))
		return ERR_PTR(-EINVAL);
	k = kzalloc(sizeof(*k), MBCF_GFP_OBJ);
	if (!k)
		return ERR_PTR(-ENOMEM);
	k->map = vmap(pages, npages, VM_MAP, PAGE_KERNEL);
	if (!k->map) {
		kfree(k);
		return ERR_PTR(-ENOMEM);
	}
	k->ctrl = (u8 *)k->map + page_offset;
	k->area = k->ctrl + MBCF_FIFO_CTRL_LEN;
	if (c->fifo_flags & (MBCF_FIFO_SIGNAL | MBCF_FIFO_SIGNAL_EMPTY)) {
		k->ev = eventfd_ctx_fdget(c->fifo_eventfd);
		if (IS_ERR(k->ev)) {
			long err = PTR_ERR(k->ev);

			vunmap(k->map);
			kfree(k);
			return ERR_PTR(err);
		}
	}
	k->size = c->fifo_size;
	k->flags = c->fifo_flags;
	/* pushes insert in softirq, the doorbell erases in process context */
	xa_init_flags(&k->waiters, XA_FLAGS_LOCK_BH);
	return k;
}

/* From dereg_mr once no push or doorbell holds the MR (or a failed reg). */
void mbcf_fifo_free(struct mbcf_kfifo *k)
{
	if (!k)
		return;
	if (k->ev)
		eventfd_ctx_put(k->ev);
	vunmap(k->map);
	xa_destroy(&k->waiters);
	kfree(k);
}

/* ---- the core's view of the memory (under the pushing QP's lock) ----------- */

static struct mbcf_kfifo *mbcf_fifo_k(void *env)
{
	struct mbcf_qp *qp = env;

	lockdep_assert_held(&qp->lock);
	return qp->fifo_hold->fifo;
}

static u64 mbcf_fifo_head(void *env)
{
	struct mbcf_kfifo *k = mbcf_fifo_k(env);

	return smp_load_acquire((u64 *)(k->ctrl + MBCF_FIFO_OFF_HEAD));
}

static u64 mbcf_fifo_tail(void *env)
{
	struct mbcf_kfifo *k = mbcf_fifo_k(env);

	return READ_ONCE(*(u64 *)(k->ctrl + MBCF_FIFO_OFF_TAIL));
}

static u64 mbcf_fifo_tail_cmpxchg(void *env, u64 old, u64 new_tail)
{
	struct mbcf_kfifo *k = mbcf_fifo_k(env);

	/* a full barrier either way */
	return atomic64_cmpxchg((atomic64_t *)(k->ctrl + MBCF_FIFO_OFF_TAIL),
				old, new_tail);
}

/*
 * No room: remember the QP for the doorbell, then wait = 1 and a full
 * barrier (the core reads head once more after it).  Remembered first, so
 * a doorbell rung for this wait finds the QP.  If room turns up at the
 * second look the entry costs one spurious GO, which does nothing.
 */
static void mbcf_fifo_set_wait(void *env)
{
	struct mbcf_qp *qp = env;
	struct mbcf_kfifo *k = mbcf_fifo_k(env);
	u32 qpn = qp->ibqp.qp_num;

	/* only this QP (its lock held) inserts its number */
	if (!xa_load(&k->waiters, qpn) &&
	    (atomic_inc_return(&k->nwait) > MBCF_FIFO_WAITERS ||
	     xa_insert_bh(&k->waiters, qpn, xa_mk_value(0),
			  GFP_ATOMIC | __GFP_NOWARN)))
		atomic_dec(&k->nwait);	/* the set is full, or no memory */
	smp_store_release((u32 *)(k->ctrl + MBCF_FIFO_OFF_WAIT), 1);
	smp_mb();
}

/* The core asks only inside the record area; checked again all the same. */
static int mbcf_fifo_write(void *env, u32 off, const u8 *src, u32 len)
{
	struct mbcf_kfifo *k = mbcf_fifo_k(env);

	if (off > k->size || len > k->size - off)
		return -ERANGE;
	memcpy(k->area + off, src, len);
	flush_kernel_vmap_range(k->area + off, len);
	return 0;
}

static void mbcf_fifo_publish(void *env, u32 off, u32 word)
{
	struct mbcf_kfifo *k = mbcf_fifo_k(env);

	if (WARN_ON_ONCE(off > k->size - 4 || (off & 3)))
		return;
	smp_store_release((u32 *)(k->area + off), word);
	flush_kernel_vmap_range(k->area + off, 4);
}

static void mbcf_fifo_mb(void *env)
{
	smp_mb();
}

/* One event: the core calls it only for a FIFO with a signal flag, whose
 * ev reg set; the push's MR reference keeps it (freed after dereg). */
static void mbcf_fifo_signal(void *env)
{
	struct mbcf_kfifo *k = mbcf_fifo_k(env);

	if (k->ev)
		mbcf_eventfd_signal(k->ev);
}

static const struct mbcf_fifo_mem mbcf_fifo_mem = {
	.head = mbcf_fifo_head,
	.tail = mbcf_fifo_tail,
	.tail_cmpxchg = mbcf_fifo_tail_cmpxchg,
	.set_wait = mbcf_fifo_set_wait,
	.write = mbcf_fifo_write,
	.publish = mbcf_fifo_publish,
	.mb = mbcf_fifo_mb,
	.signal = mbcf_fifo_signal,
};

/*
 * ops->fifo_get for @qp (its lock held): the FIFO of @fkey in the QP's
 * PD, held until mbcf_fifo_put.  One push at a time per QP (the lock).
 */
int mbcf_fifo_get(struct mbcf_qp *qp, u32 fkey, struct mbcf_fifo *f)
{
	struct mbcf_mr *mr;

	lockdep_assert_held(&qp->lock);
	mr = mbcf_mr_get_fifo(qp->dev, qp->ibqp.pd, fkey);
	if (!mr)
		return MBCF_FIFO_BAD_KEY;
	qp->fifo_hold = mr;
	f->size = mr->fifo->size;
	f->flags = mr->fifo->flags;
	f->mem = &mbcf_fifo_mem;
	f->env = qp;
	return MBCF_FIFO_OK;
}

void mbcf_fifo_put(struct mbcf_qp *qp)
{
	lockdep_assert_held(&qp->lock);
	if (qp->fifo_hold) {
		mbcf_mr_put(qp->fifo_hold);
		qp->fifo_hold = NULL;
	}
}

/* ---- the doorbell --------------------------------------------------------- */

/* GO to every QP remembered now; at most MBCF_FIFO_WAITERS of them. */
static void mbcf_fifo_ring(struct mbcf_dev *dev, struct mbcf_kfifo *k)
{
	unsigned long qpn, n = 0;
	void *e;

	xa_for_each(&k->waiters, qpn, e) {
		if (n++ == MBCF_FIFO_WAITERS)
			break;	/* newcomers behind: their own wait rings */
		if (xa_erase_bh(&k->waiters, qpn))
			atomic_dec(&k->nwait);
		mbcf_qp_go(dev, qpn);
		cond_resched();
	}
}

/*
 * ibv_advise_mr on a FIFO's key (the owner's PD): PREFETCH_WRITE of one
 * SGE is the doorbell.  Any other advice, or a key that names no FIFO of
 * this PD: EOPNOTSUPP (MRs take no advice here).
 */
static int mbcf_fifo_advise(struct ib_pd *pd,
			    enum ib_uverbs_advise_mr_advice advice, u32 flags,
			    struct ib_sge *sg_list, u32 num_sge,
			    struct uverbs_attr_bundle *attrs)
{
	struct mbcf_dev *dev = mbcf_pd_dev(pd);
	struct mbcf_mr *mr;

	if (advice != IB_UVERBS_ADVISE_MR_ADVICE_PREFETCH_WRITE || num_sge != 1)
		return -EOPNOTSUPP;
	mr = mbcf_mr_get_fifo(dev, pd, sg_list[0].lkey);
	if (!mr)
		return -EINVAL;
	mbcf_fifo_ring(dev, mr->fifo);
	mbcf_mr_put(mr);
	return 0;
}

const struct ib_device_ops mbcf_fifo_ops = {
	.advise_mr = mbcf_fifo_advise,
};
