// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* mbcf-needs: netdev_hold() with a netdevice_tracker (Linux 6.0) */
#include <linux/netdevice.h>

void mbcf_probe(struct net_device *ndev, netdevice_tracker *t);
void mbcf_probe(struct net_device *ndev, netdevice_tracker *t)
{
	netdev_hold(ndev, t, GFP_KERNEL);
	netdev_put(ndev, t);
}
