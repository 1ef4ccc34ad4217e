// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Guest test module for fast registration (kmod/frmr.c), as a kernel
 * consumer would use it -- FRWR is kernel-only, so no user-space program
 * can post REG_MR.  Two RC QPs of one PD on the device named by `dev`,
 * connected to each other (loopback through the device), and:
 *   - REG_MR, an RDMA WRITE under the rkey lands; LOCAL_INV, the same
 *     write is refused (IB_WC_REM_ACCESS_ERR) and the buffer is unchanged;
 *   - re-registration with a new key byte: the old rkey is refused, the
 *     new one works; REG_MR of a valid MR fails (LOC_QP_OP_ERR);
 *   - a write one byte past the registered length is refused, the page
 *     behind the list untouched; a write under the MR's rkey but outside
 *     [iova, iova + length) too;
 *   - SEND_WITH_INV: the receive completes with IB_WC_WITH_INVALIDATE and
 *     the key, and the key is refused afterwards;
 *   - map_mr_sg stops at max_num_sg;
 *   - a SEND under the lkey of a REG_MR chained just before it (iSER's
 *     immediate data) carries the MR's bytes; under the lkey of a
 *     LOCAL_INV chained before it, it fails with IB_WC_LOC_PROT_ERR and
 *     sends nothing.
 * Loading succeeds (0) only if every check passed; each check logs a line
 * "mbcf_frmr_test: ok ..." or "mbcf_frmr_test: FAIL ...".  After a refused
 * access both QPs are in error: they are reset and connected again.
 */
#include <linux/module.h>
#include <linux/scatterlist.h>
#include <linux/slab.h>
#include <linux/delay.h>
#include <linux/netdevice.h>
#include <rdma/ib_cache.h>
#include <rdma/ib_verbs.h>

static char *dev_name_param = "mbcf0";
module_param_named(dev, dev_name_param, charp, 0444);

#define T_PAGES		4
#define T_LEN		(T_PAGES * PAGE_SIZE)

struct t_ctx {
	struct ib_device *dev;
	struct ib_pd *pd;
	struct ib_cq *cq;
	struct ib_qp *a, *b;	/* a: requester; b: owns the MR */
	struct ib_mr *mr;
	struct page *pages[T_PAGES + 1];	/* the last one: never registered */
	void *src;		/* a's local buffer (DMA lkey) */
	u64 src_dma;
	void *rbuf;		/* b's receive buffer */
	u64 rbuf_dma;
	int failed;
};

#define CHECK(c, cond, fmt, ...) do {						\
	if (cond)								\
		pr_info("mbcf_frmr_test: ok " fmt "\n", ##__VA_ARGS__);	\
	else {									\
		pr_err("mbcf_frmr_test: FAIL " fmt "\n", ##__VA_ARGS__);	\
		(c)->failed++;							\
	}									\
} while (0)

/* Poll for one completion of @qp (the CQ is shared; others are dropped). */
static int t_poll(struct t_ctx *c, struct ib_qp *qp, struct ib_wc *wc)
{
	int i;

	for (i = 0; i < 5000; i++) {
		int n = ib_poll_cq(c->cq, 1, wc);

		if (n < 0)
			return n;
		if (n == 1) {
			if (wc->qp == qp)
				return 0;
			continue;
		}
		usleep_range(500, 1000);
	}
	return -ETIMEDOUT;
}

/* Poll until @na completions of a and @nb of b have come, each in order. */
static int t_poll_ab(struct t_ctx *c, struct ib_wc *wa, int na,
		     struct ib_wc *wb, int nb)
{
	int i, ga = 0, gb = 0;

	for (i = 0; (ga < na || gb < nb) && i < 5000; i++) {
		struct ib_wc w;
		int n = ib_poll_cq(c->cq, 1, &w);

		if (n < 0)
			return n;
		if (!n)
			usleep_range(500, 1000);
		else if (w.qp == c->a && ga < na)
			wa[ga++] = w;
		else if (w.qp == c->b && gb < nb)
			wb[gb++] = w;
	}
	return ga == na && gb == nb ? 0 : -ETIMEDOUT;
}

static void t_drain_cq(struct t_ctx *c)
{
	struct ib_wc wc;

	msleep(50);
	while (ib_poll_cq(c->cq, 1, &wc) == 1)
		;
}

static int t_modify(struct ib_qp *qp, struct ib_qp_attr *attr, int mask)
{
	return ib_modify_qp(qp, attr, mask);
}

/* RESET -> INIT -> RTR -> RTS, @qp connected to @peer. */
static int t_connect_one(struct t_ctx *c, struct ib_qp *qp, struct ib_qp *peer)
{
	const struct ib_gid_attr *sgid;
	struct net_device *ndev;
	u8 mac[ETH_ALEN];
	struct ib_qp_attr attr = {};
	union ib_gid gid;
	int err;

	attr.qp_state = IB_QPS_RESET;
	err = t_modify(qp, &attr, IB_QP_STATE);
	if (err) {
		pr_err("mbcf_frmr_test: to RESET: %d\n", err);
		return err;
	}
	memset(&attr, 0, sizeof(attr));
	attr.qp_state = IB_QPS_INIT;
	attr.port_num = 1;
	attr.pkey_index = 0;
	attr.qp_access_flags = IB_ACCESS_REMOTE_WRITE | IB_ACCESS_REMOTE_READ;
	err = t_modify(qp, &attr, IB_QP_STATE | IB_QP_PKEY_INDEX | IB_QP_PORT |
		       IB_QP_ACCESS_FLAGS);
	if (err) {
		pr_err("mbcf_frmr_test: to INIT: %d\n", err);
		return err;
	}
	sgid = rdma_get_gid_attr(c->dev, 1, 0);
	if (IS_ERR(sgid)) {
		pr_err("mbcf_frmr_test: GID 0: %ld\n", PTR_ERR(sgid));
		return PTR_ERR(sgid);
	}
	gid = sgid->gid;
	/* kernel consumers hand modify_qp a resolved address: our own MAC */
	rcu_read_lock();
	ndev = rdma_read_gid_attr_ndev_rcu(sgid);
	if (!IS_ERR(ndev))
		memcpy(mac, ndev->dev_addr, ETH_ALEN);
	rcu_read_unlock();
	rdma_put_gid_attr(sgid);
	if (IS_ERR(ndev))
		return PTR_ERR(ndev);
	memset(&attr, 0, sizeof(attr));
	attr.qp_state = IB_QPS_RTR;
	attr.path_mtu = IB_MTU_1024;
	attr.dest_qp_num = peer->qp_num;
	attr.rq_psn = 1;
	attr.max_dest_rd_atomic = 1;
	attr.min_rnr_timer = 12;
	attr.ah_attr.type = rdma_ah_find_type(c->dev, 1);
	rdma_ah_set_port_num(&attr.ah_attr, 1);
	rdma_ah_set_grh(&attr.ah_attr, &gid, 0, 0, 64, 0);
	memcpy(attr.ah_attr.roce.dmac, mac, ETH_ALEN);
	err = t_modify(qp, &attr, IB_QP_STATE | IB_QP_AV | IB_QP_PATH_MTU |
		       IB_QP_DEST_QPN | IB_QP_RQ_PSN | IB_QP_MAX_DEST_RD_ATOMIC |
		       IB_QP_MIN_RNR_TIMER);
	if (err) {
		pr_err("mbcf_frmr_test: to RTR: %d\n", err);
		return err;
	}
	memset(&attr, 0, sizeof(attr));
	attr.qp_state = IB_QPS_RTS;
	attr.sq_psn = 1;
	attr.timeout = 14;
	attr.retry_cnt = 7;
	attr.rnr_retry = 7;
	attr.max_rd_atomic = 1;
	return t_modify(qp, &attr, IB_QP_STATE | IB_QP_SQ_PSN | IB_QP_TIMEOUT |
			IB_QP_RETRY_CNT | IB_QP_RNR_RETRY | IB_QP_MAX_QP_RD_ATOMIC);
}

static int t_connect(struct t_ctx *c)
{
	int err;

	t_drain_cq(c);
	err = t_connect_one(c, c->a, c->b);
	if (!err)
		err = t_connect_one(c, c->b, c->a);
	t_drain_cq(c);
	if (err)
		pr_err("mbcf_frmr_test: connect: %d\n", err);
	return err;
}

/* Map the first @n pages of the test buffer at byte offset @off. */
static int t_map(struct t_ctx *c, int n, unsigned int off, u32 len)
{
	struct scatterlist sg[T_PAGES + 1];
	int i, mapped;

	sg_init_table(sg, n);
	for (i = 0; i < n; i++)
		sg_set_page(&sg[i], c->pages[i], PAGE_SIZE, 0);
	sg[0].offset = off;
	sg[0].length = PAGE_SIZE - off;
	sg[n - 1].length -= (n * PAGE_SIZE - off) - len;
	if (ib_dma_map_sg(c->dev, sg, n, DMA_BIDIRECTIONAL) != n)
		return -EIO;
	mapped = ib_map_mr_sg(c->mr, sg, n, NULL, PAGE_SIZE);
	ib_dma_unmap_sg(c->dev, sg, n, DMA_BIDIRECTIONAL);
	return mapped;
}

/* Post one WR on @qp and wait for its completion's status. */
static int t_post(struct t_ctx *c, struct ib_qp *qp, struct ib_send_wr *wr,
		  struct ib_wc *wc)
{
	const struct ib_send_wr *bad;
	int err;

	wr->send_flags |= IB_SEND_SIGNALED;
	err = ib_post_send(qp, wr, &bad);
	if (err)
		return err;
	return t_poll(c, qp, wc);
}

static int t_reg(struct t_ctx *c, int access)
{
	struct ib_reg_wr reg = {};
	struct ib_wc wc;
	int err;

	ib_update_fast_reg_key(c->mr, ib_inc_rkey(c->mr->rkey));
	reg.wr.opcode = IB_WR_REG_MR;
	reg.mr = c->mr;
	reg.key = c->mr->rkey;
	reg.access = access;
	err = t_post(c, c->b, &reg.wr, &wc);
	return err ? err : wc.status;
}

static int t_local_inv(struct t_ctx *c, u32 key)
{
	struct ib_send_wr wr = { .opcode = IB_WR_LOCAL_INV };
	struct ib_wc wc;
	int err;

	wr.ex.invalidate_rkey = key;
	err = t_post(c, c->b, &wr, &wc);
	return err ? err : wc.status;
}

/* RDMA WRITE of @len bytes of @byte from a to [va, va + len) under @rkey. */
static int t_write(struct t_ctx *c, u32 rkey, u64 va, u32 len, u8 byte)
{
	struct ib_sge sge = { c->src_dma, len, c->pd->local_dma_lkey };
	struct ib_rdma_wr wr = {};
	struct ib_wc wc;
	int err;

	memset(c->src, byte, len);
	wr.wr.opcode = IB_WR_RDMA_WRITE;
	wr.wr.sg_list = &sge;
	wr.wr.num_sge = 1;
	wr.remote_addr = va;
	wr.rkey = rkey;
	err = t_post(c, c->a, &wr.wr, &wc);
	return err ? err : wc.status;
}

static bool t_page_is(struct t_ctx *c, int i, u8 byte)
{
	return !memchr_inv(page_address(c->pages[i]), byte, PAGE_SIZE);
}

static void t_fill(struct t_ctx *c, u8 byte)
{
	int i;

	for (i = 0; i <= T_PAGES; i++)
		memset(page_address(c->pages[i]), byte, PAGE_SIZE);
}

/*
 * b posts @first (REG_MR or LOCAL_INV of the MR's key) chained to a SEND of
 * 64 bytes at the MR's iova under its lkey; a has a receive into src.
 * Returns the status of the SEND (-errno if anything did not complete).
 */
static int t_chain_send(struct t_ctx *c, struct ib_send_wr *first,
			struct ib_wc *wfirst, struct ib_wc *wrecv)
{
	struct ib_sge rsge = { c->src_dma, 64, c->pd->local_dma_lkey };
	struct ib_recv_wr rwr = { .sg_list = &rsge, .num_sge = 1 };
	struct ib_sge ssge = { c->mr->iova, 64, c->mr->lkey };
	struct ib_send_wr swr = { .opcode = IB_WR_SEND, .sg_list = &ssge,
				  .num_sge = 1, .send_flags = IB_SEND_SIGNALED };
	const struct ib_recv_wr *rbad;
	const struct ib_send_wr *sbad;
	struct ib_wc wb[2];
	int err;

	memset(c->src, 0, 64);
	first->send_flags = IB_SEND_SIGNALED;
	first->next = &swr;
	err = ib_post_recv(c->a, &rwr, &rbad);
	if (!err)
		err = ib_post_send(c->b, first, &sbad);
	if (!err)
		err = t_poll_ab(c, wrecv, wrecv ? 1 : 0, wb, 2);
	if (err)
		return err;
	*wfirst = wb[0];
	return wb[1].status;
}

/* Send SGEs under FRWR lkeys are checked when the SEND runs, in order. */
static void t_send_under_frwr(struct t_ctx *c)
{
	struct ib_reg_wr reg = {};
	struct ib_send_wr inv = { .opcode = IB_WR_LOCAL_INV };
	struct ib_wc wfirst = {}, wrecv = {};
	int n, st;

	t_fill(c, 0x77);
	n = t_map(c, 1, 0, PAGE_SIZE);
	ib_update_fast_reg_key(c->mr, ib_inc_rkey(c->mr->rkey));
	reg.wr.opcode = IB_WR_REG_MR;
	reg.mr = c->mr;
	reg.key = c->mr->rkey;
	reg.access = IB_ACCESS_LOCAL_WRITE;
	st = t_chain_send(c, &reg.wr, &wfirst, &wrecv);
	CHECK(c, n == 1 && st == IB_WC_SUCCESS && wfirst.status == IB_WC_SUCCESS &&
	      wfirst.opcode == IB_WC_REG_MR && wrecv.status == IB_WC_SUCCESS &&
	      wrecv.byte_len == 64 && !memchr_inv(c->src, 0x77, 64),
	      "SEND under the lkey of the REG_MR chained before it carries the MR's bytes (status %d)",
	      st);

	inv.ex.invalidate_rkey = c->mr->lkey;
	st = t_chain_send(c, &inv, &wfirst, NULL);
	CHECK(c, st == IB_WC_LOC_PROT_ERR && wfirst.status == IB_WC_SUCCESS &&
	      wfirst.opcode == IB_WC_LOCAL_INV,
	      "SEND under the lkey of the LOCAL_INV chained before it fails LOC_PROT_ERR (status %d)",
	      st);
	t_connect(c);
	CHECK(c, !memchr_inv(c->src, 0, 64),
	      "the refused SEND delivered nothing");
}

static void t_run(struct t_ctx *c)
{
	int access = IB_ACCESS_LOCAL_WRITE | IB_ACCESS_REMOTE_WRITE |
		     IB_ACCESS_REMOTE_READ;
	u32 old_key;
	int st, n;

	/* map_mr_sg is bounded by max_num_sg */
	n = t_map(c, T_PAGES + 1, 0, (T_PAGES + 1) * PAGE_SIZE);
	CHECK(c, n == T_PAGES, "map_mr_sg of %d pages into max_num_sg %d maps %d",
	      T_PAGES + 1, T_PAGES, n);

	/* registration, access, invalidation, stale key */
	t_fill(c, 0);
	n = t_map(c, T_PAGES, 0, T_LEN);
	st = t_reg(c, access);
	CHECK(c, n == T_PAGES && st == IB_WC_SUCCESS, "REG_MR of %d pages (status %d)", n, st);
	st = t_write(c, c->mr->rkey, c->mr->iova, T_LEN, 0xa5);
	CHECK(c, st == IB_WC_SUCCESS && t_page_is(c, 0, 0xa5) &&
	      t_page_is(c, T_PAGES - 1, 0xa5) && t_page_is(c, T_PAGES, 0),
	      "RDMA WRITE of %lu bytes under the rkey lands, the page behind the list untouched (status %d)",
	      T_LEN, st);
	st = t_reg(c, access);
	CHECK(c, st == IB_WC_LOC_QP_OP_ERR, "REG_MR of a valid MR fails (status %d)", st);
	t_connect(c);
	/* the failed REG_MR above did not change the registration's key */
	ib_update_fast_reg_key(c->mr, (c->mr->rkey - 1) & 0xff);
	st = t_local_inv(c, c->mr->rkey);
	CHECK(c, st == IB_WC_SUCCESS, "LOCAL_INV (status %d)", st);
	st = t_write(c, c->mr->rkey, c->mr->iova, 64, 0x5a);
	CHECK(c, st == IB_WC_REM_ACCESS_ERR && t_page_is(c, 0, 0xa5),
	      "RDMA WRITE under the invalidated rkey refused, memory unchanged (status %d)", st);
	t_connect(c);

	/* a new registration, a new key byte: the old key stays refused */
	old_key = c->mr->rkey;
	n = t_map(c, T_PAGES, 0, T_LEN);
	st = t_reg(c, access);
	CHECK(c, st == IB_WC_SUCCESS && c->mr->rkey != old_key,
	      "re-registration with key 0x%x (was 0x%x, status %d)", c->mr->rkey, old_key, st);
	st = t_write(c, old_key, c->mr->iova, 64, 0x11);
	CHECK(c, st == IB_WC_REM_ACCESS_ERR && t_page_is(c, 0, 0xa5),
	      "RDMA WRITE under the previous registration's rkey refused (status %d)", st);
	t_connect(c);
	st = t_write(c, c->mr->rkey, c->mr->iova, 64, 0x22);
	CHECK(c, st == IB_WC_SUCCESS, "RDMA WRITE under the new rkey (status %d)", st);
	st = t_local_inv(c, c->mr->rkey);
	CHECK(c, st == IB_WC_SUCCESS, "LOCAL_INV (status %d)", st);

	/* bounds: a registration of 2 pages less 100 bytes at offset 100 */
	t_fill(c, 0);
	n = t_map(c, 2, 100, 2 * PAGE_SIZE - 200);
	st = t_reg(c, access);
	CHECK(c, n == 2 && st == IB_WC_SUCCESS && c->mr->length == 2 * PAGE_SIZE - 200,
	      "REG_MR of %llu bytes at offset 100 (status %d)", c->mr->length, st);
	st = t_write(c, c->mr->rkey, c->mr->iova + c->mr->length - 8, 9, 0x33);
	CHECK(c, st == IB_WC_REM_ACCESS_ERR && t_page_is(c, 1, 0) && t_page_is(c, 2, 0),
	      "RDMA WRITE one byte past the registered length refused, memory unchanged (status %d)", st);
	t_connect(c);
	st = t_write(c, c->mr->rkey, c->mr->iova - 8, 8, 0x44);
	CHECK(c, st == IB_WC_REM_ACCESS_ERR && t_page_is(c, 0, 0),
	      "RDMA WRITE before iova refused, memory unchanged (status %d)", st);
	t_connect(c);
	st = t_write(c, c->mr->rkey, c->mr->iova, c->mr->length, 0x55);
	CHECK(c, st == IB_WC_SUCCESS &&
	      !memchr_inv(page_address(c->pages[0]) + 100, 0x55, PAGE_SIZE - 100) &&
	      !memchr_inv(page_address(c->pages[0]), 0, 100) &&
	      !memchr_inv(page_address(c->pages[1]), 0x55, PAGE_SIZE - 100) &&
	      !memchr_inv(page_address(c->pages[1]) + PAGE_SIZE - 100, 0, 100),
	      "RDMA WRITE of exactly the registered range lands in it and nowhere else (status %d)", st);

	/* SEND_WITH_INV invalidates at the responder */
	{
		struct ib_sge rsge = { c->rbuf_dma, 64, c->pd->local_dma_lkey };
		struct ib_recv_wr rwr = { .sg_list = &rsge, .num_sge = 1 };
		struct ib_sge ssge = { c->src_dma, 16, c->pd->local_dma_lkey };
		struct ib_send_wr swr = { .opcode = IB_WR_SEND_WITH_INV,
					  .sg_list = &ssge, .num_sge = 1 };
		const struct ib_recv_wr *rbad;
		struct ib_wc wc, rwc;
		u32 key = c->mr->rkey;
		int err;

		const struct ib_send_wr *sbad;

		swr.ex.invalidate_rkey = key;
		swr.send_flags = IB_SEND_SIGNALED;
		err = ib_post_recv(c->b, &rwr, &rbad);
		if (!err)
			err = ib_post_send(c->a, &swr, &sbad);
		if (!err)
			err = t_poll_ab(c, &wc, 1, &rwc, 1);
		CHECK(c, !err && wc.status == IB_WC_SUCCESS && rwc.status == IB_WC_SUCCESS &&
		      (rwc.wc_flags & IB_WC_WITH_INVALIDATE) && rwc.ex.invalidate_rkey == key,
		      "SEND_WITH_INV: receive completes WITH_INVALIDATE of 0x%x (err %d, flags 0x%x, key 0x%x)",
		      key, err, err ? 0 : rwc.wc_flags, err ? 0 : rwc.ex.invalidate_rkey);
		st = t_write(c, key, c->mr->iova, 8, 0x66);
		CHECK(c, st == IB_WC_REM_ACCESS_ERR,
		      "RDMA WRITE under the remotely invalidated rkey refused (status %d)", st);
		t_connect(c);
	}

	t_send_under_frwr(c);
}

/*
 * The device named `dev`, found as ULPs find theirs: a client's add() sees
 * every registered device (ib_device_get_by_name is not exported to
 * modules on every kernel).  Registered while the checks run, the client
 * keeps the device from going away under them.
 */
static struct ib_device *t_dev;

static int t_client_add(struct ib_device *dev)
{
	if (!strcmp(dev_name(&dev->dev), dev_name_param))
		t_dev = dev;
	return 0;
}

static void t_client_remove(struct ib_device *dev, void *client_data)
{
	if (dev == t_dev)
		t_dev = NULL;
}

static struct ib_client t_client = {
	.name = "mbcf_frmr_test",
	.add = t_client_add,
	.remove = t_client_remove,
};

static int __init t_init(void)
{
	struct ib_qp_init_attr qa = {};
	struct t_ctx *c;
	int i, err = -ENOMEM;

	c = kzalloc(sizeof(*c), GFP_KERNEL);
	if (!c)
		return -ENOMEM;
	err = ib_register_client(&t_client);
	if (err) {
		kfree(c);
		return err;
	}
	c->dev = t_dev;
	if (!c->dev) {
		pr_err("mbcf_frmr_test: no device %s\n", dev_name_param);
		ib_unregister_client(&t_client);
		kfree(c);
		return -ENODEV;
	}
	err = -ENOMEM;
	for (i = 0; i <= T_PAGES; i++) {
		c->pages[i] = alloc_page(GFP_KERNEL | __GFP_ZERO);
		if (!c->pages[i])
			goto out;
	}
	c->src = kzalloc(T_LEN, GFP_KERNEL);
	c->rbuf = kzalloc(64, GFP_KERNEL);
	if (!c->src || !c->rbuf)
		goto out;
	c->src_dma = ib_dma_map_single(c->dev, c->src, T_LEN, DMA_BIDIRECTIONAL);
	c->rbuf_dma = ib_dma_map_single(c->dev, c->rbuf, 64, DMA_BIDIRECTIONAL);
	c->pd = ib_alloc_pd(c->dev, 0);
	if (IS_ERR(c->pd)) {
		err = PTR_ERR(c->pd);
		c->pd = NULL;
		goto out;
	}
	c->cq = ib_alloc_cq(c->dev, NULL, 64, 0, IB_POLL_DIRECT);
	if (IS_ERR(c->cq)) {
		err = PTR_ERR(c->cq);
		c->cq = NULL;
		goto out;
	}
	qa.send_cq = c->cq;
	qa.recv_cq = c->cq;
	qa.qp_type = IB_QPT_RC;
	qa.sq_sig_type = IB_SIGNAL_REQ_WR;
	qa.cap.max_send_wr = 16;
	qa.cap.max_recv_wr = 16;
	qa.cap.max_send_sge = 1;
	qa.cap.max_recv_sge = 1;
	c->a = ib_create_qp(c->pd, &qa);
	if (IS_ERR(c->a)) {
		err = PTR_ERR(c->a);
		c->a = NULL;
		goto out;
	}
	c->b = ib_create_qp(c->pd, &qa);
	if (IS_ERR(c->b)) {
		err = PTR_ERR(c->b);
		c->b = NULL;
		goto out;
	}
	c->mr = ib_alloc_mr(c->pd, IB_MR_TYPE_MEM_REG, T_PAGES);
	if (IS_ERR(c->mr)) {
		err = PTR_ERR(c->mr);
		c->mr = NULL;
		goto out;
	}
	CHECK(c, IS_ERR(ib_alloc_mr(c->pd, IB_MR_TYPE_SG_GAPS, T_PAGES)),
	      "alloc_mr of type SG_GAPS refused");
	err = t_connect(c);
	if (err)
		goto out;
	t_run(c);
	err = c->failed ? -EINVAL : 0;
	pr_info("mbcf_frmr_test: %d check(s) failed\n", c->failed);
out:
	if (c->mr)
		ib_dereg_mr(c->mr);
	if (c->b)
		ib_destroy_qp(c->b);
	if (c->a)
		ib_destroy_qp(c->a);
	if (c->cq)
		ib_free_cq(c->cq);
	if (c->pd)
		ib_dealloc_pd(c->pd);
	if (c->src_dma)
		ib_dma_unmap_single(c->dev, c->src_dma, T_LEN, DMA_BIDIRECTIONAL);
	if (c->rbuf_dma)
		ib_dma_unmap_single(c->dev, c->rbuf_dma, 64, DMA_BIDIRECTIONAL);
	kfree(c->src);
	kfree(c->rbuf);
	for (i = 0; i <= T_PAGES; i++)
		if (c->pages[i])
			__free_page(c->pages[i]);
	ib_unregister_client(&t_client);
	kfree(c);
	/* the work is done at load: never stay loaded */
	return err ? err : -ECANCELED;
}

module_init(t_init);
MODULE_LICENSE("Dual BSD/GPL");
MODULE_DESCRIPTION("mbcf fast registration checks (guest test)");
