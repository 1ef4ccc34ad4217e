// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Memory windows: an rkey that grants remote access to a range of a memory
 * region, only while the window is bound (docs/protocol.md, "Memory
 * windows", has the state machine).
 *
 * A window's state lives in a struct mbcf_window of its own, published in
 * the device's key xarray (tagged MBCF_MR_TAG_MW) and freed after an RCU
 * grace period: the receive path may be looking a key up while the window
 * is deallocated, and the RDMA core frees struct ib_mw at once.  The
 * window's lock guards its binding; a bound window holds a reference on
 * its MR and counts in mr->windows, so the MR cannot be deregistered under
 * it (EBUSY).  Lock order: a QP's lock, then a window's, then an MR's.
 *
 * Lookups find a window under RCU and then take its lock, so one may get
 * the lock after dealloc has unbound the window and unpublished it: dealloc
 * marks the window dead under that lock, and every lookup re-checks it
 * there (mbcf_mw_current), or a bind would bind a window nobody can reach
 * and pin its MR for ever.
 *
 * Type 1 windows are bound with ibv_bind_mw (re-binding changes the rkey,
 * length 0 unbinds) and serve every QP of their PD; type 2 windows are
 * bound through a QP's send queue, serve that QP only, and are freed by a
 * local invalidate (any QP of the PD) or a send with invalidate received
 * on their QP.  QPs are named by a device-unique id, never reused, so a
 * window bound to a destroyed QP serves nobody.
 */
#include <linux/slab.h>

#include "mbcf.h"

#define MBCF_MW_ACCESS	(IB_ACCESS_REMOTE_READ | IB_ACCESS_REMOTE_WRITE | \
			 IB_ACCESS_REMOTE_ATOMIC)

struct mbcf_window {
	spinlock_t lock;		/* everything below but type and pd */
	bool dead;			/* deallocated: never bound again */
	u32 rkey;			/* the current key (the low 8 bits change) */
	u8 type;			/* IB_MW_TYPE_1 / _2 */
	struct ib_pd *pd;
	struct mbcf_mr *mr;		/* bound: referenced, in mr->windows */
	u64 addr, length;		/* the range, in the MR's addresses */
	int access;			/* IB_ACCESS_REMOTE_* granted */
	u64 qp_id;			/* type 2: the QP it is bound to */
	struct rcu_head rcu;
};

struct mbcf_mw {
	struct ib_mw ibmw;
	struct mbcf_window *win;
	struct mbcf_user *owner;	/* charged to (limits.c) */
};

static struct mbcf_mw *to_mbcf_mw(struct ib_mw *ibmw)
{
	return container_of(ibmw, struct mbcf_mw, ibmw);
}

/*
 * Is @win still the window of @rkey: not deallocated, key unchanged?  Under
 * win->lock, which dealloc and every bind hold, so the answer stays true
 * until the caller unlocks.
 */
static bool mbcf_mw_current(const struct mbcf_window *win, u32 rkey)
{
	lockdep_assert_held(&win->lock);
	return !win->dead && win->rkey == rkey;
}

/* Drop the binding (caller holds win->lock). */
static void mbcf_mw_unbind(struct mbcf_window *win)
{
	struct mbcf_mr *mr = win->mr;

	lockdep_assert_held(&win->lock);
	if (!mr)
		return;
	spin_lock(&mr->lock);
	mr->windows--;
	spin_unlock(&mr->lock);
	mbcf_mr_put(mr);
	win->mr = NULL;
	win->addr = win->length = 0;
	win->access = 0;
	win->qp_id = 0;
}

static int mbcf_mw_alloc(struct ib_mw *ibmw, struct ib_udata *udata)
{
	struct mbcf_dev *dev = to_mbcf_dev(ibmw->device);
	struct mbcf_mw *mw = to_mbcf_mw(ibmw);
	struct mbcf_window *win;
	int err;

	if (ibmw->type != IB_MW_TYPE_1 && ibmw->type != IB_MW_TYPE_2)
		return -EINVAL;
	err = mbcf_res_get(dev, udata, MBCF_RES_MW, &mw->owner);
	if (err)
		return err;
	win = kzalloc(sizeof(*win), MBCF_GFP_OBJ);
	if (!win) {
		err = -ENOMEM;
		goto err_count;
	}
	spin_lock_init(&win->lock);
	win->type = ibmw->type;
	win->pd = ibmw->pd;
	err = mbcf_mr_alloc_key(dev, &win->rkey);
	if (err)
		goto err_free;
	mw->win = win;
	ibmw->rkey = win->rkey;
	xa_store(&dev->mr_xa, win->rkey >> 8, xa_tag_pointer(win, MBCF_MR_TAG_MW),
		 GFP_KERNEL);
	return 0;

err_free:
	kfree(win);
err_count:
	mbcf_res_put(dev, mw->owner, MBCF_RES_MW);
	return err;
}

static int mbcf_mw_dealloc(struct ib_mw *ibmw)
{
	struct mbcf_dev *dev = to_mbcf_dev(ibmw->device);
	struct mbcf_window *win = to_mbcf_mw(ibmw)->win;

	/* dead before the binding goes: a lookup that still finds the window
	 * sees it under the lock and binds nothing */
	spin_lock_bh(&win->lock);
	win->dead = true;
	mbcf_mw_unbind(win);
	spin_unlock_bh(&win->lock);
	xa_erase(&dev->mr_xa, win->rkey >> 8);
	kfree_rcu(win, rcu);
	mbcf_res_put(dev, to_mbcf_mw(ibmw)->owner, MBCF_RES_MW);
	return 0;
}

const struct ib_device_ops mbcf_mw_ops = {
	.alloc_mw = mbcf_mw_alloc,
	.dealloc_mw = mbcf_mw_dealloc,
	INIT_RDMA_OBJ_SIZE(ib_mw, mbcf_mw, ibmw),
};

/*
 * The window behind @rkey's index (caller holds rcu_read_lock(): it is not
 * freed under the caller), or NULL.  The caller locks it and checks
 * mbcf_mw_current() under the lock, so what it checks next cannot change.
 */
static struct mbcf_window *mbcf_mw_find(struct mbcf_dev *dev, u32 rkey)
{
	void *e = xa_load(&dev->mr_xa, rkey >> 8);

	RCU_LOCKDEP_WARN(!rcu_read_lock_held(), "mbcf_mw_find without RCU");
	if (xa_pointer_tag(e) != MBCF_MR_TAG_MW)
		return NULL;
	return xa_untag_pointer(e);
}

/*
 * mr.c's lookup of a window's rkey (caller holds rcu_read_lock()): the MR
 * it is bound to, referenced, if the window is bound, grants @access (a
 * remote one) over [va, va + len), lies in @qp's PD and, type 2, is bound
 * to @qp.  -ENOKEY for a stale or unbound key, -EACCES, -ERANGE.
 */
struct mbcf_mr *mbcf_mw_resolve(struct mbcf_window *win, struct mbcf_qp *qp,
				u32 rkey, u64 va, u64 len, int access)
{
	struct mbcf_mr *mr = ERR_PTR(-ENOKEY);

	spin_lock_bh(&win->lock);
	if (!mbcf_mw_current(win, rkey) || !win->mr)
		goto out;
	mr = ERR_PTR(-EACCES);
	if (!(access & MBCF_MW_ACCESS) || win->pd != qp->ibqp.pd ||
	    (win->access & access & MBCF_MW_ACCESS) != (access & MBCF_MW_ACCESS) ||
	    (win->type == IB_MW_TYPE_2 && win->qp_id != qp->id))
		goto out;
	mr = ERR_PTR(-ERANGE);
	if (va < win->addr || len > win->length || va - win->addr > win->length - len)
		goto out;
	mr = win->mr;
	refcount_inc(&mr->ref);		/* the binding holds one: never zero */
out:
	spin_unlock_bh(&win->lock);
	return mr;
}

/*
 * A BIND_MW request of @qp, when its turn comes: 0, or -EINVAL and the
 * request completes with IB_WC_MW_BIND_ERR.
 */
int mbcf_mw_bind(struct mbcf_qp *qp, const struct mbcf_mw_bind *b)
{
	/* a window grants remote access only: local bits mean nothing on
	 * it and are ignored (verbs programs pass LOCAL_WRITE, rxe binds) */
	int access = b->access & MBCF_MW_ACCESS;
	struct mbcf_mr *mr = NULL;
	struct mbcf_window *win;
	int err = -EINVAL;

	if (b->access & IB_ZERO_BASED)
		return -EINVAL;		/* zero-based windows: not supported */
	if (b->length && b->addr + b->length < b->addr)
		return -EINVAL;
	rcu_read_lock();
	win = mbcf_mw_find(qp->dev, b->mw_rkey);
	if (!win)
		goto out_rcu;
	spin_lock_bh(&win->lock);
	if (!mbcf_mw_current(win, b->mw_rkey) || win->pd != qp->ibqp.pd)
		goto out;
	if (win->type == IB_MW_TYPE_2 && (win->mr || !b->length))
		goto out;	/* must be free; length 0 is no invalidate */
	if (b->length) {
		/* remote write and atomic write the memory: so must the MR */
		mr = mbcf_mr_get_bindable(qp, b->mr_lkey, b->addr, b->length,
					  access & (IB_ACCESS_REMOTE_WRITE |
						    IB_ACCESS_REMOTE_ATOMIC) ?
					  IB_ACCESS_LOCAL_WRITE : 0);
		if (IS_ERR(mr)) {
			mr = NULL;
			goto out;
		}
	}
	mbcf_mw_unbind(win);		/* type 1: re-bind or unbind */
	win->rkey = (win->rkey & ~0xffu) | (b->new_rkey & 0xff);
	if (mr) {
		win->mr = mr;		/* keeps the reference */
		win->addr = b->addr;
		win->length = b->length;
		win->access = access;
		win->qp_id = win->type == IB_MW_TYPE_2 ? qp->id : 0;
	}
	err = 0;
out:
	spin_unlock_bh(&win->lock);
out_rcu:
	rcu_read_unlock();
	return err;
}

/*
 * Invalidate the type 2 window @rkey: a local invalidate posted on @qp
 * (any QP of the window's PD), or, @remote, a send with invalidate that
 * @qp received (the window must be bound to @qp).  0 or -EINVAL.
 */
int mbcf_mw_invalidate(struct mbcf_qp *qp, u32 rkey, bool remote)
{
	struct mbcf_window *win;
	int err = -EINVAL;

	rcu_read_lock();
	win = mbcf_mw_find(qp->dev, rkey);
	if (!win)
		goto out_rcu;
	spin_lock_bh(&win->lock);
	if (mbcf_mw_current(win, rkey) && win->type == IB_MW_TYPE_2 && win->mr &&
	    win->pd == qp->ibqp.pd && (!remote || win->qp_id == qp->id)) {
		mbcf_mw_unbind(win);
		err = 0;
	}
	spin_unlock_bh(&win->lock);
out_rcu:
	rcu_read_unlock();
	return err;
}
