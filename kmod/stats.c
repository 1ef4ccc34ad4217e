// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Protocol counters through `rdma statistic show link mbcfN/1` (and sysfs
 * ports/1/hw_counters/).  The list is include/mbcf/counters.h, defined
 * once; values are the sum of the per-CPU receive-path counters, every
 * live QP's connection counters, and those of QPs already destroyed.
 */
#include "mbcf.h"

static struct rdma_stat_desc mbcf_stats_descs[MBCF_CTR_COUNT];

/* Called once at module init: the names come from the X-macro list. */
void mbcf_stats_init(void)
{
	unsigned int i;

	for (i = 0; i < MBCF_CTR_COUNT; i++)
		mbcf_stats_descs[i].name = mbcf_counters_name(i);
}

/* A destroyed QP's counters live on in the device totals. */
void mbcf_stats_retire(struct mbcf_dev *dev, const struct mbcf_counters *c)
{
	spin_lock_bh(&dev->retired_lock);
	mbcf_counters_add(&dev->retired, c);
	spin_unlock_bh(&dev->retired_lock);
}

static void mbcf_stats_sum(struct mbcf_dev *dev, struct mbcf_counters *sum)
{
	int cpu;

	memset(sum, 0, sizeof(*sum));
	for_each_possible_cpu(cpu)
		mbcf_counters_add(sum, per_cpu_ptr(dev->rx_ctr, cpu));
	spin_lock_bh(&dev->retired_lock);
	mbcf_counters_add(sum, &dev->retired);
	spin_unlock_bh(&dev->retired_lock);
	mbcf_qp_stats_sum(dev, sum);
}

static struct rdma_hw_stats *mbcf_stats_alloc(struct ib_device *ibdev,
					      u32 port_num)
{
	return rdma_alloc_hw_stats_struct(mbcf_stats_descs, MBCF_CTR_COUNT,
					  RDMA_HW_STATS_DEFAULT_LIFESPAN);
}

static int mbcf_stats_get(struct ib_device *ibdev, struct rdma_hw_stats *stats,
			  u32 port, int index)
{
	struct mbcf_counters sum;
	unsigned int i;

	mbcf_stats_sum(to_mbcf_dev(ibdev), &sum);
	for (i = 0; i < MBCF_CTR_COUNT; i++)
		stats->value[i] = mbcf_counters_get(&sum, i);
	return MBCF_CTR_COUNT;
}

const struct ib_device_ops mbcf_stats_ops = {
	.alloc_hw_port_stats = mbcf_stats_alloc,
	.get_hw_stats = mbcf_stats_get,
};
