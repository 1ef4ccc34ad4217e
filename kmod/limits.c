// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Object limits: how many PDs, CQs, QPs, SRQs, AHs, MRs and MWs the device
 * holds, and how many of them user space may take.
 *
 * Three bounds, checked in this order by mbcf_res_get():
 *   device   every object, the kernel's too: the MBCF_MAX_* of query_device
 *   users    all user objects together: the device max less a reserve of
 *            1/16 (MBCF_RES_RESERVE), which only kernel consumers (the CM's
 *            QP1 and AHs, kernel ULPs) may use, so no process, root's
 *            included, can stop the kernel from answering connections
 *   per user the objects of one user (real uid) on this device, over all
 *            its contexts: user_pct percent of the device max (module
 *            parameter, default 50), so one user cannot take the whole
 *            user share from others; CAP_SYS_RESOURCE lifts this bound
 *            only
 * Each refusal is ENOMEM, as for the device max (and as ib_umem_get()
 * refuses a pin over RLIMIT_MEMLOCK).  Ring memory is bounded separately,
 * by RLIMIT_MEMLOCK (umap.c).
 *
 * A user's counts live in a struct mbcf_user per (device, uid), shared by
 * that user's contexts; an object keeps the mbcf_user it was charged to and
 * is always destroyed before its context, so the counts are back at zero
 * when the last context goes.
 */
#include <linux/capability.h>
#include <linux/cred.h>
#include <linux/module.h>
#include <linux/slab.h>
#include <rdma/uverbs_ioctl.h>

#include "mbcf.h"

static unsigned int mbcf_user_pct = 50;
module_param_named(user_pct, mbcf_user_pct, uint, 0644);
MODULE_PARM_DESC(user_pct,
		 "objects of each type one user may hold, in percent of the device's maximum (50; CAP_SYS_RESOURCE exempt)");

static const u32 mbcf_res_max[MBCF_RES_NUM] = {
	[MBCF_RES_PD] = MBCF_MAX_PD,
	[MBCF_RES_CQ] = MBCF_MAX_CQ,
	[MBCF_RES_QP] = MBCF_MAX_QP,
	[MBCF_RES_SRQ] = MBCF_MAX_SRQ,
	[MBCF_RES_AH] = MBCF_MAX_AH,
	[MBCF_RES_MR] = MBCF_MAX_MR,
	[MBCF_RES_MW] = MBCF_MAX_MW,
};

/* The device's count of @r: all objects, the kernel's included. */
static atomic_t *mbcf_res_all(struct mbcf_dev *dev, enum mbcf_res r)
{
	switch (r) {
	case MBCF_RES_PD:
		return &dev->pd_count;
	case MBCF_RES_CQ:
		return &dev->cq_count;
	case MBCF_RES_QP:
		return &dev->qp_count;
	case MBCF_RES_SRQ:
		return &dev->srq_count;
	case MBCF_RES_AH:
		return &dev->ah_count;
	case MBCF_RES_MR:
		return &dev->mr_count;
	default:
		return &dev->mw_count;
	}
}

/* All user objects of @r may take this many: the device max less the reserve. */
u32 mbcf_res_users_max(enum mbcf_res r)
{
	return mbcf_res_max[r] - mbcf_res_max[r] / MBCF_RES_RESERVE;
}

/* One user may take this many (the parameter is read once per call). */
u32 mbcf_res_user_max(enum mbcf_res r)
{
	u32 pct = min(READ_ONCE(mbcf_user_pct), 100u);

	return (u64)mbcf_res_max[r] * pct / 100;
}

/*
 * Charge one object of type @r created with @udata (NULL: a kernel
 * consumer's) to the device, the users' share and its user.  Returns 0
 * and sets *@owner (NULL for a kernel object), to be passed to
 * mbcf_res_put(), or -ENOMEM.
 */
int mbcf_res_get(struct mbcf_dev *dev, struct ib_udata *udata,
		 enum mbcf_res r, struct mbcf_user **owner)
{
	struct mbcf_user *u = NULL;

	if (udata)
		u = rdma_udata_to_drv_context(udata, struct mbcf_ucontext,
					      ibuc)->user;
	if (atomic_inc_return(mbcf_res_all(dev, r)) > mbcf_res_max[r])
		goto err_all;
	if (u) {
		if (atomic_inc_return(&dev->user_objs[r]) > mbcf_res_users_max(r))
			goto err_users;
		if (atomic_inc_return(&u->objs[r]) > mbcf_res_user_max(r) &&
		    !capable(CAP_SYS_RESOURCE))
			goto err_user;
	}
	*owner = u;
	return 0;

err_user:
	atomic_dec(&u->objs[r]);
err_users:
	atomic_dec(&dev->user_objs[r]);
err_all:
	atomic_dec(mbcf_res_all(dev, r));
	return -ENOMEM;
}

void mbcf_res_put(struct mbcf_dev *dev, struct mbcf_user *owner,
		  enum mbcf_res r)
{
	if (owner) {
		atomic_dec(&owner->objs[r]);
		atomic_dec(&dev->user_objs[r]);
	}
	atomic_dec(mbcf_res_all(dev, r));
}

/* The calling process's user on @dev, shared with its other contexts. */
struct mbcf_user *mbcf_user_get(struct mbcf_dev *dev)
{
	u32 uid = from_kuid(&init_user_ns, current_uid());
	struct mbcf_user *u, *n;

	n = kzalloc(sizeof(*n), MBCF_GFP_OBJ);
	if (!n)
		return ERR_PTR(-ENOMEM);
	mutex_lock(&dev->users_lock);
	u = xa_load(&dev->users, uid);
	if (u) {
		u->contexts++;
	} else if (xa_err(xa_store(&dev->users, uid, n, MBCF_GFP_OBJ))) {
		u = ERR_PTR(-ENOMEM);
	} else {
		u = n;
		n = NULL;
		u->uid = uid;
		u->contexts = 1;
	}
	mutex_unlock(&dev->users_lock);
	kfree(n);
	return u;
}

/* A context of @u is gone; with the last one, every object of @u is too. */
void mbcf_user_put(struct mbcf_dev *dev, struct mbcf_user *u)
{
	int r;

	mutex_lock(&dev->users_lock);
	if (--u->contexts) {
		mutex_unlock(&dev->users_lock);
		return;
	}
	xa_erase(&dev->users, u->uid);
	mutex_unlock(&dev->users_lock);
	for (r = 0; r < MBCF_RES_NUM; r++)
		WARN_ON_ONCE(atomic_read(&u->objs[r]));
	kfree(u);
}

void mbcf_res_dev_init(struct mbcf_dev *dev)
{
	int r;

	mutex_init(&dev->users_lock);
	xa_init(&dev->users);
	for (r = 0; r < MBCF_RES_NUM; r++)
		atomic_set(&dev->user_objs[r], 0);
}

/* From dealloc_driver: every context is gone by now. */
void mbcf_res_dev_fini(struct mbcf_dev *dev)
{
	int r;

	WARN_ON_ONCE(!xa_empty(&dev->users));
	xa_destroy(&dev->users);
	for (r = 0; r < MBCF_RES_NUM; r++)
		WARN_ON_ONCE(atomic_read(&dev->user_objs[r]));
}
