// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * mbcf module: init/exit ladder, `rdma link add ... type mbcf`, and the
 * netdev notifier that keeps each device's port in step with its netdev.
 */
#include <linux/module.h>
#include <rdma/rdma_netlink.h>

#include "mbcf.h"

unsigned int mbcf_window;
module_param_named(window, mbcf_window, uint, 0644);
MODULE_PARM_DESC(window, "Send-ahead window in frames for new connections (0 = from link speed)");

bool mbcf_window_adapt = true;
module_param_named(window_adapt, mbcf_window_adapt, bool, 0644);
MODULE_PARM_DESC(window_adapt, "Adapt the send-ahead window to loss (default); N keeps it fixed, for comparison");

unsigned int mbcf_ack_interval;
module_param_named(ack_interval, mbcf_ack_interval, uint, 0644);
MODULE_PARM_DESC(ack_interval, "Ask for an acknowledgement every N frames (0 = as the window needs)");

/*
 * Off by default: a burst that ends in unsignaled writes or sends asks for
 * its ACK, whose arrival takes what the application posted meanwhile.
 * With it (docs/protocol.md 6.1 rule 3) the ring goes idle at the end of
 * such a burst, so a streaming sender's next post costs a doorbell system
 * call (docs/performance.md).
 */
bool mbcf_quiet_tail;
module_param_named(quiet_tail, mbcf_quiet_tail, bool, 0644);
MODULE_PARM_DESC(quiet_tail, "Unsignaled writes/sends ending a burst ask for no ACK: fewer ACK frames, a system call for the next post (default N)");

unsigned int mbcf_pace_slack_us = 2000;
module_param_named(pace_slack_us, mbcf_pace_slack_us, uint, 0644);
MODULE_PARM_DESC(pace_slack_us, "Pacing: how late (us) the pacer's timer may be without costing a paced QP rate; made up for in bursts (0 = never: bursts of at most 2 frames)");

static struct rdma_link_ops mbcf_main_link_ops = {
	.type = MBCF_DRV_NAME,
	.newlink = mbcf_device_create,
};

/*
 * Runs under RTNL, so it may only queue the unregistration; and, for
 * NETDEV_UP and NETDEV_CHANGE, under the netdev's instance lock where the
 * kernel has one and the driver's ops are locked, so it may only queue the
 * speed update (device.c).  Port events: the RDMA core's own notifier
 * raises them where it does (MBCF_CORE_PORT_EVENTS, compat.h), else we do,
 * once per change of state.
 */
static int mbcf_main_netdev_event(struct notifier_block *nb,
				  unsigned long event, void *ptr)
{
	struct net_device *ndev = netdev_notifier_info_to_dev(ptr);
	struct mbcf_dev *dev = mbcf_device_get_by_netdev(ndev);

	if (!dev)
		return NOTIFY_DONE;

	switch (event) {
	case NETDEV_UNREGISTER:
		/* nothing leaves any more: fail the QPs before the RDMA
		 * core asks their consumers to let go (qp.c) */
		mbcf_qp_fail_all(dev);
		mbcf_device_queue_unregister(dev);
		break;
	case NETDEV_UP:
	case NETDEV_DOWN:
	case NETDEV_CHANGE:
		mbcf_device_queue_speed(dev);
		if (!MBCF_CORE_PORT_EVENTS)
			mbcf_device_port_event(dev);
		break;
	default:
		break;
	}
	ib_device_put(&dev->ibdev);
	return NOTIFY_DONE;
}

static struct notifier_block mbcf_main_netdev_nb = {
	.notifier_call = mbcf_main_netdev_event,
};

static int __init mbcf_main_init(void)
{
	int err;

	mbcf_stats_init();
	err = register_netdevice_notifier(&mbcf_main_netdev_nb);
	if (err)
		return err;
	rdma_link_register(&mbcf_main_link_ops);
	pr_info("mbcf: loaded\n");
	return 0;
}

static void __exit mbcf_main_exit(void)
{
	rdma_link_unregister(&mbcf_main_link_ops);
	unregister_netdevice_notifier(&mbcf_main_netdev_nb);
	mbcf_device_unregister_all();
	mbcf_zc_unpark_all();
	mbcf_net_heads_free();
	pr_info("mbcf: unloaded\n");
}

module_init(mbcf_main_init);
module_exit(mbcf_main_exit);

MODULE_AUTHOR("mbcf developers");
MODULE_DESCRIPTION("MBCF (Memory-Based Communication Facility) software RDMA over Ethernet");
MODULE_LICENSE("Dual BSD/GPL");
MODULE_VERSION(MBCF_VERSION);
MODULE_ALIAS_RDMA_LINK("mbcf");
