// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* The RDMA core's own netdev notifier raises IB_EVENT_PORT_ACTIVE and
 * IB_EVENT_PORT_ERR for every ib_device bound to the netdev (on NETDEV_UP,
 * NETDEV_DOWN, NETDEV_CHANGE, deduplicated by the port's last state);
 * ib_dispatch_port_state_event() came with that and is exported for
 * drivers to raise the same event, deduplicated alike. */
#include <rdma/ib_verbs.h>

void mbcf_probe(struct ib_device *ibdev, struct net_device *ndev);
void mbcf_probe(struct ib_device *ibdev, struct net_device *ndev)
{
	ib_dispatch_port_state_event(ibdev, ndev);
}
