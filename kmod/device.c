// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * mbcf ib_device: creation, registration, port state, and the registry
 * of live devices (by netdev).
 *
 * A device lives from `rdma link add` until `rdma link delete`, the removal
 * of its netdev, or module unload.  Unregistration always ends in
 * mbcf_device_dealloc_driver(), which the RDMA core calls once.
 */
#include <linux/ethtool.h>
#include <linux/module.h>
#include <linux/mutex.h>
#include <linux/spinlock.h>
#include <linux/random.h>
#include <linux/rtnetlink.h>
#include <net/addrconf.h>
#include <rdma/ib_cache.h>

#include "mbcf.h"
#include "mbcf/wire.h"

/*
 * All live devices.  The spinlock guards the list (the netdev notifier
 * runs under RTNL and must not sleep on anything the RDMA core may hold);
 * the mutex serialises `rdma link add` so two adds cannot both pass the
 * duplicate check for one netdev.
 */
static LIST_HEAD(mbcf_device_list);
static DEFINE_SPINLOCK(mbcf_device_list_lock);
static DEFINE_MUTEX(mbcf_device_add_mutex);

/*
 * Returns the registered device on @ndev with a registration reference
 * (release with ib_device_put()), or NULL.  A device still on the list has
 * not reached dealloc_driver, so its memory is valid for the try-get; a
 * device being unregistered fails the try-get and is skipped.
 */
struct mbcf_dev *mbcf_device_get_by_netdev(struct net_device *ndev)
{
	struct mbcf_dev *dev, *found = NULL;

	spin_lock(&mbcf_device_list_lock);
	list_for_each_entry(dev, &mbcf_device_list, list) {
		if (dev->ndev == ndev && ib_device_try_get(&dev->ibdev)) {
			found = dev;
			break;
		}
	}
	spin_unlock(&mbcf_device_list_lock);
	return found;
}

static void mbcf_device_track(struct mbcf_dev *dev)
{
	spin_lock(&mbcf_device_list_lock);
	list_add_tail(&dev->list, &mbcf_device_list);
	spin_unlock(&mbcf_device_list_lock);
}

static void mbcf_device_untrack(struct mbcf_dev *dev)
{
	spin_lock(&mbcf_device_list_lock);
	list_del_init(&dev->list);
	spin_unlock(&mbcf_device_list_lock);
}

bool mbcf_device_port_active(const struct mbcf_dev *dev)
{
	return netif_running(dev->ndev) && netif_carrier_ok(dev->ndev);
}

/*
 * The largest IB MTU one frame carries whole (payload = netdev MTU minus
 * the largest MBCF header): 1024 on a 1500-byte netdev, 4096 on a jumbo
 * one.  It bounds a UD datagram, which is one frame (the MAD layer, UCX's
 * ud_verbs and perftest -c UD size their messages by it; a larger UD
 * send sends nothing, core/dgram.c).  RC and UC
 * messages are cut by the netdev MTU whatever path MTU a QP is given.
 */
enum ib_mtu mbcf_device_active_mtu(const struct mbcf_dev *dev)
{
	u32 payload = mbcf_dgram_max_msg(READ_ONCE(dev->ndev->mtu));

	if (payload >= 4096)
		return IB_MTU_4096;
	if (payload >= 2048)
		return IB_MTU_2048;
	if (payload >= 1024)
		return IB_MTU_1024;
	if (payload >= 512)
		return IB_MTU_512;
	return IB_MTU_256;
}

/*
 * PORT_ACTIVE or PORT_ERR for the netdev's state (running with carrier:
 * active), once per change, under RTNL (which orders port_last): from the
 * netdev notifier where the RDMA core raises none itself, and at
 * registration.  Through the core where it keeps the last state (compat.h),
 * which then filters its own notifier's duplicates alike.
 */
void mbcf_device_port_event(struct mbcf_dev *dev)
{
	enum ib_port_state state = mbcf_device_port_active(dev) ?
				   IB_PORT_ACTIVE : IB_PORT_DOWN;
	struct ib_event ev = {
		.device = &dev->ibdev,
		.element.port_num = 1,
	};

	ASSERT_RTNL();
	if (mbcf_core_port_state_event(&dev->ibdev, dev->ndev))
		return;
	if (dev->port_last == state)
		return;
	dev->port_last = state;
	ev.event = state == IB_PORT_ACTIVE ? IB_EVENT_PORT_ACTIVE :
					     IB_EVENT_PORT_ERR;
	ib_dispatch_event(&ev);
}

/*
 * The netdev's speed (under RTNL), which sizes the send-ahead window.
 * Never from the netdev notifier: __ethtool_get_link_ksettings() takes the
 * netdev's instance lock (netdev_lock_ops) on kernels that have one, and
 * for drivers with locked ops (queue management or shaper API: bnxt, mlx5,
 * gve, iavf, ...) the notifier's NETDEV_UP and NETDEV_CHANGE already run
 * under it.  The notifier queues mbcf_device_speed_work() instead.
 */
void mbcf_device_update_speed(struct mbcf_dev *dev)
{
	struct ethtool_link_ksettings ks;
	u32 mbps = 0;

	ASSERT_RTNL();
	if (!__ethtool_get_link_ksettings(dev->ndev, &ks) &&
	    ks.base.speed != SPEED_UNKNOWN)
		mbps = ks.base.speed;
	WRITE_ONCE(dev->link_mbps, mbps);	/* 0: the core assumes GbE */
}

/*
 * The notifier's speed update, in process context with RTNL taken the
 * usual way (RTNL, then the instance lock).  A netdev on its way out has
 * no speed to read (ENODEV); it keeps the last one.  dealloc_driver
 * cancels it: the notifier only queues while it holds a registration
 * reference, and every such reference is gone before dealloc_driver.
 */
static void mbcf_device_speed_work(struct work_struct *work)
{
	struct mbcf_dev *dev = container_of(work, struct mbcf_dev, speed_work);

	rtnl_lock();
	if (READ_ONCE(dev->ndev->reg_state) == NETREG_REGISTERED)
		mbcf_device_update_speed(dev);
	rtnl_unlock();
}

/* From the netdev notifier: read the speed soon, outside the notifier. */
void mbcf_device_queue_speed(struct mbcf_dev *dev)
{
	schedule_work(&dev->speed_work);
}

/*
 * Called from the netdev notifier (under RTNL) and from module exit.  The
 * RDMA core may need RTNL itself while unregistering, so the notifier must
 * only queue; DYING makes sure we queue at most once.
 */
void mbcf_device_queue_unregister(struct mbcf_dev *dev)
{
	if (!test_and_set_bit(MBCF_DEV_DYING, &dev->flags))
		ib_unregister_device_queued(&dev->ibdev);
}

static void mbcf_device_dealloc_driver(struct ib_device *ibdev)
{
	struct mbcf_dev *dev = to_mbcf_dev(ibdev);

	mbcf_device_untrack(dev);
	cancel_work_sync(&dev->speed_work);
	WARN_ON_ONCE(atomic_read(&dev->pd_count));
	WARN_ON_ONCE(atomic_read(&dev->ucontext_count));
	WARN_ON_ONCE(atomic_read(&dev->cq_count));
	WARN_ON_ONCE(atomic_read(&dev->qp_count));
	mbcf_net_stop(dev);
	mbcf_pacer_fini(&dev->pacer);
	WARN_ON_ONCE(!xa_empty(&dev->qp_xa));
	xa_destroy(&dev->qp_xa);
	free_percpu(dev->rx_ctr);
	mbcf_mr_dev_fini(dev);
	mbcf_res_dev_fini(dev);
	WARN_ON_ONCE(atomic_read(&dev->ah_count));
	WARN_ON_ONCE(atomic_read(&dev->srq_count));
	WARN_ON_ONCE(!xa_empty(&dev->ah_xa));
	xa_destroy(&dev->ah_xa);
	netdev_put(dev->ndev, &dev->ndev_tracker);
}

static const struct ib_device_ops mbcf_device_ops = {
	.owner = THIS_MODULE,
	.driver_id = RDMA_DRIVER_UNKNOWN,
	.dealloc_driver = mbcf_device_dealloc_driver,
};

static void mbcf_device_set_guid(struct mbcf_dev *dev)
{
	u8 eui[8];

	addrconf_addr_eui48(eui, dev->ndev->dev_addr);
	memcpy(&dev->ibdev.node_guid, eui, sizeof(eui));
}

static struct mbcf_dev *mbcf_device_alloc(struct net_device *ndev)
{
	struct mbcf_dev *dev;

	dev = ib_alloc_device(mbcf_dev, ibdev);
	if (!dev)
		return NULL;
	dev->rx_ctr = alloc_percpu(struct mbcf_counters);
	if (!dev->rx_ctr) {
		ib_dealloc_device(&dev->ibdev);
		return NULL;
	}
	if (mbcf_pacer_init(&dev->pacer, ndev->name)) {
		free_percpu(dev->rx_ctr);
		ib_dealloc_device(&dev->ibdev);
		return NULL;
	}
	/* Dropped by mbcf_device_dealloc_driver(), on every path. */
	dev->ndev = ndev;
	netdev_hold(ndev, &dev->ndev_tracker, GFP_KERNEL);
	INIT_LIST_HEAD(&dev->list);
	INIT_WORK(&dev->speed_work, mbcf_device_speed_work);
	atomic_set(&dev->pd_count, 0);
	atomic_set(&dev->ucontext_count, 0);
	atomic_set(&dev->cq_count, 0);
	atomic_set(&dev->qp_count, 0);
	atomic64_set(&dev->qp_ids, 0);
	xa_init_flags(&dev->qp_xa, XA_FLAGS_ALLOC);
	/* QP numbers are not predictable from one device to the next (qp.c) */
	dev->qp_next = get_random_u32_inclusive(MBCF_QPN_FIRST, MBCF_QPN_MASK);
	dev->zc_retry_at = jiffies;	/* zero-copy from the start (zc.c) */
	spin_lock_init(&dev->retired_lock);
	spin_lock_init(&dev->linger_lock);
	mbcf_mr_dev_init(dev);
	mbcf_res_dev_init(dev);
	xa_init_flags(&dev->ah_xa, XA_FLAGS_ALLOC1);
	atomic_set(&dev->ah_count, 0);
	atomic_set(&dev->srq_count, 0);

	/*
	 * A channel adapter, as rxe: libibverbs derives transport_type from
	 * node_type, and librdmacm only speaks IB CM on IBV_TRANSPORT_IB.
	 * With RDMA_NODE_UNSPECIFIED rdma_disconnect() fails with EINVAL
	 * before it moves the QP to error or sends a DREQ: no receive is
	 * flushed, the peer never hears of it, and programs that wait for a
	 * flushed completion or a DISCONNECTED event (rping, ucmatose) hang.
	 * libfabric's verbs provider lists no domain for an unknown transport.
	 * The link layer is still Ethernet: get_link_layer says so, and the
	 * port caps say RoCE (verbs.c).
	 */
	dev->ibdev.node_type = RDMA_NODE_IB_CA;
	dev->ibdev.phys_port_cnt = 1;
	dev->ibdev.num_comp_vectors = 1;
	/* kernel consumers (the MAD layer, rdma_cm): see mr.c */
	dev->ibdev.local_dma_lkey = MBCF_DMA_LKEY;
	/*
	 * POST_SEND/POST_RECV/POST_SRQ_RECV with no work request are our
	 * doorbells (write() commands the core leaves off by default).
	 */
	dev->ibdev.uverbs_cmd_mask |= BIT_ULL(IB_USER_VERBS_CMD_POST_SEND) |
				      BIT_ULL(IB_USER_VERBS_CMD_POST_RECV) |
				      BIT_ULL(IB_USER_VERBS_CMD_POST_SRQ_RECV) |
				      BIT_ULL(IB_USER_VERBS_CMD_REQ_NOTIFY_CQ);
	strscpy(dev->ibdev.node_desc, "mbcf", sizeof(dev->ibdev.node_desc));
	mbcf_device_set_guid(dev);

	ib_set_device_ops(&dev->ibdev, &mbcf_device_ops);
	ib_set_device_ops(&dev->ibdev, &mbcf_verbs_ops);
	ib_set_device_ops(&dev->ibdev, &mbcf_mr_ops);
	ib_set_device_ops(&dev->ibdev, &mbcf_fifo_ops);
	ib_set_device_ops(&dev->ibdev, &mbcf_mw_ops);
	ib_set_device_ops(&dev->ibdev, &mbcf_frmr_ops);
	ib_set_device_ops(&dev->ibdev, &mbcf_ah_ops);
	ib_set_device_ops(&dev->ibdev, &mbcf_srq_ops);
	ib_set_device_ops(&dev->ibdev, &mbcf_stats_ops);
	return dev;
}

static int mbcf_device_add(const char *ibdev_name, struct net_device *ndev)
{
	struct mbcf_dev *dev;
	int err;

	if (ndev->type != ARPHRD_ETHER || (ndev->flags & IFF_LOOPBACK))
		return -EINVAL;
	if (ndev->mtu < MBCF_HDR_MAX + 256)
		return -EINVAL;
	dev = mbcf_device_get_by_netdev(ndev);
	if (dev) {
		ib_device_put(&dev->ibdev);
		return -EEXIST;
	}

	dev = mbcf_device_alloc(ndev);
	if (!dev)
		return -ENOMEM;

	err = ib_device_set_netdev(&dev->ibdev, ndev, 1);
	if (err)
		goto err_dealloc;

	err = ib_register_device(&dev->ibdev, ibdev_name, NULL);
	if (err)
		goto err_dealloc;

	rtnl_lock();
	mbcf_device_update_speed(dev);
	rtnl_unlock();
	mbcf_net_start(dev);
	mbcf_device_track(dev);
	/*
	 * A NETDEV_UNREGISTER that ran before we were tracked found nothing
	 * to remove; reg_state tells us it happened (it is set before the
	 * notifier chain runs).
	 */
	if (READ_ONCE(ndev->reg_state) != NETREG_REGISTERED) {
		mbcf_device_queue_unregister(dev);
		return 0;
	}
	/* An active port says so; a down one waits for its netdev's events. */
	rtnl_lock();
	if (mbcf_device_port_active(dev))
		mbcf_device_port_event(dev);
	rtnl_unlock();
	return 0;

err_dealloc:
	ib_dealloc_device(&dev->ibdev);
	return err;
}

/* `rdma link add NAME type mbcf netdev NDEV` */
int mbcf_device_create(const char *ibdev_name, struct net_device *ndev)
{
	int err;

	mutex_lock(&mbcf_device_add_mutex);
	err = mbcf_device_add(ibdev_name, ndev);
	mutex_unlock(&mbcf_device_add_mutex);
	return err;
}

/*
 * Unregister every device synchronously.  ib_unregister_device() waits for
 * an unregistration already queued by the notifier, and the reference we
 * take keeps the memory valid until it returns.
 */
void mbcf_device_unregister_all(void)
{
	struct mbcf_dev *dev;

	for (;;) {
		spin_lock(&mbcf_device_list_lock);
		dev = list_first_entry_or_null(&mbcf_device_list,
					       struct mbcf_dev, list);
		if (dev) {
			get_device(&dev->ibdev.dev);
			/* ib_unregister_device() calls dealloc_driver,
			 * which untracks; do it here too so a device whose
			 * unregistration already ran cannot loop forever. */
			list_del_init(&dev->list);
			set_bit(MBCF_DEV_DYING, &dev->flags);
		}
		spin_unlock(&mbcf_device_list_lock);
		if (!dev)
			break;
		ib_unregister_device(&dev->ibdev);
		put_device(&dev->ibdev.dev);
	}
}
