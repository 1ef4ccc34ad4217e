/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * mbcf kernel module: the objects every kmod/ file shares.
 *
 * One struct mbcf_dev per netdev (created by `rdma link add ... type mbcf`),
 * embedding its ib_device.  Files and what they own:
 *   main.c    module init/exit ladder, `rdma link` ops, netdev notifier
 *   device.c  ib_device creation, registration, port state and attributes
 *   verbs.c   the thin verbs entry points (argument checks, hand-off)
 */
#ifndef MBCF_KMOD_H
#define MBCF_KMOD_H

#include <linux/list.h>
#include <linux/netdevice.h>
#include <rdma/ib_verbs.h>

#define MBCF_DRV_NAME		"mbcf"
#define MBCF_FW_VERSION		"0.1.0"

/* Limits reported by query_device; verbs.c enforces each of them. */
#define MBCF_MAX_QP		4096
#define MBCF_MAX_QP_WR		4096
#define MBCF_MAX_SGE		16
#define MBCF_MAX_CQ		4096
#define MBCF_MAX_CQE		(64 * 1024)
#define MBCF_MAX_MR		(64 * 1024)
#define MBCF_MAX_PD		(64 * 1024)
#define MBCF_MAX_RD_ATOMIC	16
#define MBCF_MAX_INLINE		256
#define MBCF_MAX_MSG_SIZE	(1U << 31)

/* Bits of mbcf_dev.flags. */
enum mbcf_dev_flag {
	MBCF_DEV_DYING,		/* unregistration has been queued or done */
};

struct mbcf_dev {
	struct ib_device ibdev;		/* must be first: ib_alloc_device() */
	struct net_device *ndev;	/* held (netdev_hold) while we live */
	netdevice_tracker ndev_tracker;
	struct list_head list;		/* on mbcf_main_devices */
	unsigned long flags;		/* enum mbcf_dev_flag */
	atomic_t pd_count;		/* live objects, for limits + leak checks */
	atomic_t ucontext_count;
};

struct mbcf_ucontext {
	struct ib_ucontext ibuc;
};

struct mbcf_pd {
	struct ib_pd ibpd;
};

static inline struct mbcf_dev *to_mbcf_dev(struct ib_device *ibdev)
{
	return container_of(ibdev, struct mbcf_dev, ibdev);
}

static inline struct mbcf_dev *mbcf_pd_dev(struct ib_pd *ibpd)
{
	return to_mbcf_dev(ibpd->device);
}

/* main.c */
struct mbcf_dev *mbcf_main_get_by_netdev(struct net_device *ndev);
void mbcf_main_track(struct mbcf_dev *dev);
void mbcf_main_untrack(struct mbcf_dev *dev);

/* device.c */
int mbcf_device_create(const char *ibdev_name, struct net_device *ndev);
void mbcf_device_queue_unregister(struct mbcf_dev *dev);
void mbcf_device_port_event(struct mbcf_dev *dev, enum ib_event_type type);
bool mbcf_device_port_active(const struct mbcf_dev *dev);
enum ib_mtu mbcf_device_active_mtu(const struct mbcf_dev *dev);

/* verbs.c */
extern const struct ib_device_ops mbcf_verbs_ops;

#endif /* MBCF_KMOD_H */
