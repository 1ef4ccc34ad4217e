// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Protocol counters through `rdma statistic show link mbcfN/1` (and sysfs
 * ports/1/hw_counters/).  The list is include/mbcf/counters.h, defined
 * once; values are the sum of the per-CPU receive-path counters, every
 * live QP's connection counters, and those of QPs already destroyed.
 * And each connected QP's sender state for `rdma res show qp -dd`, from
 * a snapshot qp.c takes.
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

/* ns to us, saturated at U32_MAX. */
static u32 mbcf_stats_us(u64 ns)
{
	return (u32)min_t(u64, ns / NSEC_PER_USEC, U32_MAX);
}

/* Every QP: the most send requests one call took off its ring (wr.c). */
static int mbcf_stats_fill_pull(struct sk_buff *msg, struct mbcf_qp *qp)
{
	struct nlattr *table;
	int err;

	table = nla_nest_start(msg, RDMA_NLDEV_ATTR_DRIVER);
	if (!table)
		return -EMSGSIZE;
	err = rdma_nl_put_driver_u32(msg, "sq_pull_max",
				     READ_ONCE(qp->sq_pull_max));
	if (err) {
		nla_nest_cancel(msg, table);
		return -EMSGSIZE;
	}
	nla_nest_end(msg, table);
	return 0;
}

static int mbcf_stats_fill_qp(struct sk_buff *msg, struct ib_qp *ibqp)
{
	struct mbcf_qp *qp = to_mbcf_qp(ibqp);
	struct mbcf_qp_snap s;
	struct nlattr *table;

	if (ibqp->qp_type != IB_QPT_RC && ibqp->qp_type != IB_QPT_UC)
		return mbcf_stats_fill_pull(msg, qp);
	mbcf_qp_snapshot(qp, &s);

	table = nla_nest_start(msg, RDMA_NLDEV_ATTR_DRIVER);
	if (!table)
		return -EMSGSIZE;
	if (rdma_nl_put_driver_u32(msg, "wnd", s.c.wnd) ||
	    rdma_nl_put_driver_u32(msg, "wnd_max", s.c.wnd_max) ||
	    rdma_nl_put_driver_u32(msg, "srtt_us", mbcf_stats_us(s.c.srtt)) ||
	    rdma_nl_put_driver_u32(msg, "rttvar_us", mbcf_stats_us(s.c.rttvar)) ||
	    rdma_nl_put_driver_u32(msg, "rto_us", mbcf_stats_us(s.c.rto)) ||
	    rdma_nl_put_driver_u64(msg, "tx_frames", s.c.tx_frames) ||
	    rdma_nl_put_driver_u64(msg, "retransmit_frames", s.c.retransmits) ||
	    rdma_nl_put_driver_u64(msg, "retransmit_timeouts", s.c.timeouts) ||
	    rdma_nl_put_driver_u64(msg, "tail_probes", s.c.tail_probes) ||
	    rdma_nl_put_driver_u64(msg, "window_cuts", s.c.window_cuts) ||
	    rdma_nl_put_driver_u64(msg, "selective_repeats", s.c.selective_repeats) ||
	    rdma_nl_put_driver_u32(msg, "sq_pull_max", s.sq_pull_max)) {
		nla_nest_cancel(msg, table);
		return -EMSGSIZE;
	}
	nla_nest_end(msg, table);
	return 0;
}

const struct ib_device_ops mbcf_stats_ops = {
	.alloc_hw_port_stats = mbcf_stats_alloc,
	.get_hw_stats = mbcf_stats_get,
	.fill_res_qp_entry = mbcf_stats_fill_qp,
};
