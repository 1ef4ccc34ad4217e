// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Address handles: where a UD datagram goes.  The address (the MAC the RDMA
 * core resolved, both GIDs and the GRH fields) lives in a struct of its own,
 * published in dev->ah_xa under the handle's number and freed after an RCU
 * grace period: user space names a handle by that number in its send
 * entries, the send path copies the address into the request's private
 * copy when it takes the request, and the RDMA core frees struct ib_ah at
 * once on destroy.  Kernel consumers may create handles in atomic context
 * (RDMA_CREATE_AH_SLEEPABLE clear), so nothing here sleeps then.
 */
#include <linux/etherdevice.h>
#include <linux/slab.h>
#include <rdma/ib_cache.h>
#include <rdma/uverbs_ioctl.h>

#include "mbcf.h"

struct mbcf_av {
	struct ib_pd *pd;
	struct mbcf_ud_addr addr;
	struct rcu_head rcu;
};

struct mbcf_ah {
	struct ib_ah ibah;
	u32 num;
	struct mbcf_av *av;
	struct mbcf_user *owner;	/* charged to (limits.c); NULL: kernel */
};

static struct mbcf_ah *to_mbcf_ah(struct ib_ah *ibah)
{
	return container_of(ibah, struct mbcf_ah, ibah);
}

/* The address of @attr (RoCE: a GRH, a resolved MAC, a source GID). */
static int mbcf_ah_fill(const struct rdma_ah_attr *attr, struct mbcf_ud_addr *a)
{
	const struct ib_global_route *grh;

	if (!(rdma_ah_get_ah_flags(attr) & IB_AH_GRH))
		return -EINVAL;
	grh = rdma_ah_read_grh(attr);
	if (!grh->sgid_attr)
		return -EINVAL;
	memcpy(a->dmac, attr->roce.dmac, ETH_ALEN);
	if (!is_valid_ether_addr(a->dmac))
		return -EINVAL;
	memcpy(a->sgid, grh->sgid_attr->gid.raw, 16);
	memcpy(a->dgid, grh->dgid.raw, 16);
	a->vtf = 6u << 28 | (u32)grh->traffic_class << 20 |
		 (grh->flow_label & 0xfffff);
	a->hop_limit = grh->hop_limit;
	return 0;
}

static int mbcf_ah_create(struct ib_ah *ibah, struct rdma_ah_init_attr *init,
			  struct ib_udata *udata)
{
	struct mbcf_dev *dev = to_mbcf_dev(ibah->device);
	bool sleep = init->flags & RDMA_CREATE_AH_SLEEPABLE;
	gfp_t gfp = sleep ? GFP_KERNEL_ACCOUNT : GFP_ATOMIC;
	struct mbcf_create_ah_resp resp = {};
	struct mbcf_ah *ah = to_mbcf_ah(ibah);
	struct mbcf_av *av;
	int err;

	if (udata && udata->outlen < sizeof(resp))
		return -EINVAL;
	err = mbcf_res_get(dev, udata, MBCF_RES_AH, &ah->owner);
	if (err)
		return err;
	av = kzalloc(sizeof(*av), gfp);
	if (!av) {
		err = -ENOMEM;
		goto err_count;
	}
	av->pd = ibah->pd;
	err = mbcf_ah_fill(init->ah_attr, &av->addr);
	if (err)
		goto err_free;
	err = xa_alloc_cyclic(&dev->ah_xa, &ah->num, av, XA_LIMIT(1, U32_MAX),
			      &dev->ah_next, gfp);
	if (err < 0)
		goto err_free;
	ah->av = av;
	if (udata) {
		resp.ah_num = ah->num;
		err = ib_copy_to_udata(udata, &resp, sizeof(resp));
		if (err)
			goto err_erase;
	}
	return 0;

err_erase:
	xa_erase(&dev->ah_xa, ah->num);
err_free:
	kfree(av);
err_count:
	mbcf_res_put(dev, ah->owner, MBCF_RES_AH);
	return err;
}

static int mbcf_ah_destroy(struct ib_ah *ibah, u32 flags)
{
	struct mbcf_dev *dev = to_mbcf_dev(ibah->device);
	struct mbcf_ah *ah = to_mbcf_ah(ibah);

	xa_erase(&dev->ah_xa, ah->num);
	kfree_rcu(ah->av, rcu);
	mbcf_res_put(dev, ah->owner, MBCF_RES_AH);
	return 0;
}

static int mbcf_ah_query(struct ib_ah *ibah, struct rdma_ah_attr *attr)
{
	const struct mbcf_ud_addr *a = &to_mbcf_ah(ibah)->av->addr;
	union ib_gid dgid;

	memcpy(dgid.raw, a->dgid, sizeof(dgid.raw));
	memset(attr, 0, sizeof(*attr));
	attr->type = RDMA_AH_ATTR_TYPE_ROCE;
	rdma_ah_set_port_num(attr, 1);
	rdma_ah_set_grh(attr, &dgid, a->vtf & 0xfffff,
			0, a->hop_limit, (a->vtf >> 20) & 0xff);
	memcpy(attr->roce.dmac, a->dmac, ETH_ALEN);
	return 0;
}

const struct ib_device_ops mbcf_ah_ops = {
	.create_ah = mbcf_ah_create,
	.create_user_ah = mbcf_ah_create,
	.destroy_ah = mbcf_ah_destroy,
	.query_ah = mbcf_ah_query,
	INIT_RDMA_OBJ_SIZE(ib_ah, mbcf_ah, ibah),
};

/* The number a kernel consumer's handle goes by in its send entries. */
u32 mbcf_ah_num(struct ib_ah *ibah)
{
	return to_mbcf_ah(ibah)->num;
}

/*
 * Copy the address of handle @num, if it belongs to @pd (any context):
 * 0, or -ENOENT (no such handle, or another PD's).
 */
int mbcf_ah_lookup(struct mbcf_dev *dev, u32 num, struct ib_pd *pd,
		   struct mbcf_ud_addr *out)
{
	struct mbcf_av *av;
	int err = -ENOENT;

	rcu_read_lock();
	av = xa_load(&dev->ah_xa, num);
	if (av && av->pd == pd) {
		*out = av->addr;
		err = 0;
	}
	rcu_read_unlock();
	return err;
}
