// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Verbs error paths and data integrity on two connected RC QPs, with exact
 * values.  Run inside the guest by tests/vm/errors.sh and tests/vm/netem.sh.
 *
 *   mbcf_verbs_errors [-a DEV] [-b DEV] [-n ITER] CASE|GROUP...
 *
 * Both QPs live in this one process: QP A on device -a (default mbcf0), QP B
 * on device -b (default mbcf1).  RDMA devices are shared across network
 * namespaces, so a process in the initial namespace opens mbcf1 too, and
 * the frames still cross the veth pair.  -a mbcf0 -b mbcf0 is the
 * same-device loopback.  A is always the requester, B the responder.
 *
 * Every case builds a fresh pair of QPs and prints one result line,
 * "PASS <case> [A-B]: ..." or "FAIL <case> [A-B]: expected ... got ...";
 * the exit status is the number of failed cases (capped at 100), 0 if all
 * passed, 2 for usage or setup errors.  `-l` lists the cases.
 *
 * Groups: errors (every error case), data (immediates, SGEs, inline, the
 * integrity loop, the RTR responder), events, all.
 *
 *   mbcf_verbs_errors [-a DEV] [-b DEV] hold N
 *
 * holds N connected pairs with traffic in flight until killed.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <infiniband/verbs.h>
#include <poll.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "vmprog.h"

#define CQ_DEPTH	256
#define PAGE		4096

static const char *dev_a = "mbcf0", *dev_b = "mbcf1";
static const char *link_down_cmd = "ip netns exec ns1 ip link set veth1 down";
static const char *link_up_cmd = "ip netns exec ns1 ip link set veth1 up";
static int iterations = 3;
static unsigned int seed = 1;

/* ---- result of the current case ----------------------------------------- */

/* ---- the two sides --------------------------------------------------------- */

struct side {
	const char *name;
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_comp_channel *ch;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	union ibv_gid gid;
	uint32_t psn;
};

static struct side A, B;

struct conn_opts {
	uint8_t timeout, retry_cnt, rnr_retry, min_rnr_timer;
	int access;		/* qp_access_flags of both QPs */
};

static const struct conn_opts default_opts = {
	.timeout = 14,		/* 4.096 us * 2^14 = 67 ms */
	.retry_cnt = 7,
	.rnr_retry = 7,
	.min_rnr_timer = 12,	/* 0.64 ms */
	.access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
		  IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC,
};

static void open_side(struct side *s, const char *name)
{
	s->name = name;
	s->ctx = vp_open(name);
	s->pd = ibv_alloc_pd(s->ctx);
	if (!s->pd)
		vp_die_errno("ibv_alloc_pd");
	if (ibv_query_gid(s->ctx, 1, 0, &s->gid))
		vp_die_errno("ibv_query_gid");
}

static void close_side(struct side *s)
{
	ibv_dealloc_pd(s->pd);
	ibv_close_device(s->ctx);
}

static void make_qp(struct side *s)
{
	struct ibv_qp_init_attr ia = {
		.qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 64, .max_recv_wr = 64,
			 .max_send_sge = 4, .max_recv_sge = 4,
			 .max_inline_data = 256 },
	};

	s->ch = ibv_create_comp_channel(s->ctx);
	if (!s->ch)
		vp_die_errno("ibv_create_comp_channel");
	if (fcntl(s->ch->fd, F_SETFL, fcntl(s->ch->fd, F_GETFL) | O_NONBLOCK))
		vp_die_errno("fcntl");
	s->cq = ibv_create_cq(s->ctx, CQ_DEPTH, NULL, s->ch, 0);
	if (!s->cq)
		vp_die_errno("ibv_create_cq");
	ia.send_cq = ia.recv_cq = s->cq;
	s->qp = ibv_create_qp(s->pd, &ia);
	if (!s->qp)
		vp_die_errno("ibv_create_qp");
}

static void free_qp(struct side *s)
{
	if (s->qp && ibv_destroy_qp(s->qp))
		vp_die_errno("ibv_destroy_qp");
	s->qp = NULL;
	if (ibv_destroy_cq(s->cq))
		vp_die_errno("ibv_destroy_cq");
	if (ibv_destroy_comp_channel(s->ch))
		vp_die_errno("ibv_destroy_comp_channel");
	s->cq = NULL;
	s->ch = NULL;
}

static int to_rtr(struct side *s, const struct side *peer,
		  const struct conn_opts *o, int rtr_only)
{
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_INIT,
		.pkey_index = 0,
		.port_num = 1,
		.qp_access_flags = o->access,
	};

	if (ibv_modify_qp(s->qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX |
			  IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
		return -1;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_1024;
	a.dest_qp_num = peer->qp->qp_num;
	a.rq_psn = peer->psn;
	a.max_dest_rd_atomic = 16;
	a.min_rnr_timer = o->min_rnr_timer;
	a.ah_attr.is_global = 1;
	a.ah_attr.grh.dgid = peer->gid;
	a.ah_attr.grh.sgid_index = 0;
	a.ah_attr.grh.hop_limit = 1;
	a.ah_attr.port_num = 1;
	if (ibv_modify_qp(s->qp, &a, IBV_QP_STATE | IBV_QP_AV |
			  IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
			  IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
		return -1;
	if (rtr_only)
		return 0;	/* a pure responder, as perftest's BW servers */
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = s->psn;
	a.timeout = o->timeout;
	a.retry_cnt = o->retry_cnt;
	a.rnr_retry = o->rnr_retry;
	a.max_rd_atomic = 16;
	return ibv_modify_qp(s->qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN |
			     IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
			     IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC);
}

/*
 * A fresh connected pair.  psns near the 24-bit wrap, so data crosses it.
 * B_rtr_only: B stays in RTR (verbs allows a responder that never sends).
 */
static void pair_up2(const struct conn_opts *o, int b_rtr_only)
{
	make_qp(&A);
	make_qp(&B);
	A.psn = 0xfffff0 - (rand_r(&seed) & 0xff);
	B.psn = 0xffffe0 - (rand_r(&seed) & 0xff);
	if (to_rtr(&A, &B, o, 0) || to_rtr(&B, &A, o, b_rtr_only))
		vp_die_errno("connect (ibv_modify_qp)");
}

static void pair_up(const struct conn_opts *o)
{
	pair_up2(o, 0);
}

static void pair_down(void)
{
	free_qp(&A);
	free_qp(&B);
}

/* ---- memory ------------------------------------------------------------------ */

/* len bytes at page offset `off`, guarded, registered if access >= 0 */
static struct vp_gbuf buf_new(struct side *s, size_t len, size_t off, int access)
{
	return vp_gbuf_new(s->pd, len, off, access);
}

/* First index where p differs from the pattern vp_fill_tag8(tag), or -1. */
static long diff_fill(const uint8_t *p, size_t len, uint8_t tag)
{
	size_t i;

	for (i = 0; i < len; i++)
		if (p[i] != vp_tag8(i, tag))
			return (long)i;
	return -1;
}

/* ---- posting and polling ----------------------------------------------------- */

static int post(struct side *s, enum ibv_wr_opcode op, struct ibv_sge *sg,
		int nsge, uint64_t raddr, uint32_t rkey, uint64_t wr_id,
		unsigned int flags)
{
	struct ibv_send_wr wr = {
		.wr_id = wr_id, .sg_list = sg, .num_sge = nsge, .opcode = op,
		.send_flags = flags | IBV_SEND_SIGNALED,
	}, *bad;
	int ret;

	if (op == IBV_WR_ATOMIC_CMP_AND_SWP || op == IBV_WR_ATOMIC_FETCH_AND_ADD) {
		wr.wr.atomic.remote_addr = raddr;
		wr.wr.atomic.rkey = rkey;
	} else {
		wr.wr.rdma.remote_addr = raddr;
		wr.wr.rdma.rkey = rkey;
	}
	ret = ibv_post_send(s->qp, &wr, &bad);
	if (ret)
		vc_fail("ibv_post_send(wr_id %lu) on %s: %s", (unsigned long)wr_id,
		     s->name, strerror(ret));
	return ret;
}

static int post_wr(struct side *s, struct ibv_send_wr *wr)
{
	struct ibv_send_wr *bad;
	int ret = ibv_post_send(s->qp, wr, &bad);

	if (ret)
		vc_fail("ibv_post_send on %s: %s", s->name, strerror(ret));
	return ret;
}

static int post_recv(struct side *s, struct ibv_sge *sg, int nsge, uint64_t wr_id)
{
	struct ibv_recv_wr wr = { .wr_id = wr_id, .sg_list = sg, .num_sge = nsge }, *bad;
	int ret = ibv_post_recv(s->qp, &wr, &bad);

	if (ret)
		vc_fail("ibv_post_recv on %s: %s", s->name, strerror(ret));
	return ret;
}

/* One completion from s's CQ within timeout_s; 1 if got, 0 if none. */
static int get_wc(struct side *s, struct ibv_wc *wc, double timeout_s)
{
	double end = vp_now() + timeout_s;
	int n;

	for (;;) {
		n = ibv_poll_cq(s->cq, 1, wc);
		if (n < 0) {
			vc_fail("ibv_poll_cq on %s: %d", s->name, n);
			return 0;
		}
		if (n == 1)
			return 1;
		if (vp_now() > end)
			return 0;
		vp_sleep_us(200);
	}
}

/* No completion arrives on s's CQ for `wait_s` seconds. */
static void expect_no_wc(struct side *s, double wait_s, const char *what)
{
	struct ibv_wc wc;

	if (get_wc(s, &wc, wait_s))
		vc_fail("%s: unexpected completion on %s (wr_id %lu, %s)", what,
		     s->name, (unsigned long)wc.wr_id, ibv_wc_status_str(wc.status));
}

/*
 * The next completion on s's CQ is wr_id with `status` (and opcode `op`
 * unless op < 0; verbs leaves the opcode undefined on errors).
 */
static int expect_wc(struct side *s, uint64_t wr_id, enum ibv_wc_status status,
		     int op, double timeout_s, struct ibv_wc *out, const char *what)
{
	struct ibv_wc wc;

	if (!get_wc(s, &wc, timeout_s)) {
		vc_fail("%s: expected %s (wr_id %lu) on %s, got no completion in %.1f s",
		     what, ibv_wc_status_str(status), (unsigned long)wr_id,
		     s->name, timeout_s);
		return -1;
	}
	if (out)
		*out = wc;
	if (wc.wr_id != wr_id || wc.status != status) {
		vc_fail("%s: expected wr_id %lu %s on %s, got wr_id %lu %s (%d)",
		     what, (unsigned long)wr_id, ibv_wc_status_str(status), s->name,
		     (unsigned long)wc.wr_id, ibv_wc_status_str(wc.status),
		     wc.status);
		return -1;
	}
	if (op >= 0 && wc.opcode != (enum ibv_wc_opcode)op) {
		vc_fail("%s: wr_id %lu opcode %d, expected %d", what,
		     (unsigned long)wr_id, wc.opcode, op);
		return -1;
	}
	if (wc.qp_num != s->qp->qp_num) {
		vc_fail("%s: qp_num %u, expected %u", what, wc.qp_num, s->qp->qp_num);
		return -1;
	}
	return 0;
}

static void expect_state(struct side *s, enum ibv_qp_state want, const char *what)
{
	vc_expect_qp_state(s->qp, s->name, want, what);
}

/*
 * After an error completion on the requester: it is in ERR, and a WR
 * posted now completes with WR_FLUSH_ERR.
 */
static void expect_flushed_after(struct side *s, struct vp_gbuf *lb)
{
	struct ibv_sge sg = vp_gbuf_sge(lb, 0, 8);

	expect_state(s, IBV_QPS_ERR, "requester after the error");
	if (!post(s, IBV_WR_SEND, &sg, 1, 0, 0, 900, 0))
		expect_wc(s, 900, IBV_WC_WR_FLUSH_ERR, -1, 5, NULL,
			  "send posted in ERR");
	expect_no_wc(s, 0.05, "after the flush");
}

/* ---- remote errors -------------------------------------------------------- */

enum rcase { R_BAD_RKEY, R_PAST_END, R_PAST_END_MULTI, R_BEFORE_START,
	     R_READ_NO_RREAD, R_WRITE_NO_RWRITE, R_ATOMIC_MISALIGNED,
	     R_ATOMIC_NO_RATOMIC, R_READ_PAST_END };

/*
 * One bad remote operation from A into B's MR, followed in the same list by
 * a good write (which must be flushed).  Checks the requester status, both
 * QP states, the responder's posted receive flushed, and B's memory: the
 * target region unchanged (single frame) and every guard byte intact.
 */
static void remote_case(enum rcase rc)
{
	const int all = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
			IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
	int taccess = all, op = IBV_WR_RDMA_WRITE, region_intact = 1;
	enum ibv_wc_status want = IBV_WC_REM_ACCESS_ERR;
	size_t tlen = 4096, llen = 16;
	uint64_t raddr;
	uint32_t rkey;
	struct vp_gbuf t, l, r;
	struct ibv_sge sg, sg2, rsg;
	struct ibv_send_wr wr[2];
	struct ibv_wc wc;
	double t0;

	switch (rc) {
	case R_READ_NO_RREAD:
		taccess = all & ~IBV_ACCESS_REMOTE_READ;
		op = IBV_WR_RDMA_READ;
		break;
	case R_WRITE_NO_RWRITE:
		taccess = all & ~IBV_ACCESS_REMOTE_WRITE;
		break;
	case R_ATOMIC_NO_RATOMIC:
		taccess = all & ~IBV_ACCESS_REMOTE_ATOMIC;
		op = IBV_WR_ATOMIC_CMP_AND_SWP;
		llen = 8;
		break;
	case R_ATOMIC_MISALIGNED:
		op = IBV_WR_ATOMIC_FETCH_AND_ADD;
		want = IBV_WC_REM_INV_REQ_ERR;
		llen = 8;
		break;
	case R_PAST_END_MULTI:
		llen = 8192;	/* several frames: only the guards must hold */
		region_intact = 0;
		break;
	case R_READ_PAST_END:
		op = IBV_WR_RDMA_READ;
		break;
	default:
		break;
	}

	pair_up(&default_opts);
	/* The target MR starts 64 bytes into a page: guards on both sides. */
	t = buf_new(&B, tlen, 64, taccess);
	l = buf_new(&A, llen, 0, IBV_ACCESS_LOCAL_WRITE);
	r = buf_new(&B, 64, 0, IBV_ACCESS_LOCAL_WRITE);
	vp_fill_tag8(t.p, tlen, 0x11);
	vp_fill_tag8(l.p, llen, 0x55);
	raddr = (uintptr_t)t.p;
	rkey = t.mr->rkey;
	switch (rc) {
	case R_BAD_RKEY:
		rkey ^= 0x00100000;	/* another index, same generation */
		break;
	case R_PAST_END:
	case R_READ_PAST_END:
		raddr += tlen - 8;	/* 8 bytes in, 8 beyond the end */
		break;
	case R_PAST_END_MULTI:
		raddr += tlen - 4096;	/* frames 1-2 in bounds, then beyond */
		break;
	case R_BEFORE_START:
		raddr -= 1;		/* one byte before the start */
		break;
	case R_ATOMIC_MISALIGNED:
		raddr += 4;
		break;
	default:
		break;
	}

	rsg = vp_gbuf_sge(&r, 0, 64);
	post_recv(&B, &rsg, 1, 500);

	sg = vp_gbuf_sge(&l, 0, (uint32_t)llen);
	memset(wr, 0, sizeof(wr));
	wr[0].wr_id = 1;
	wr[0].sg_list = &sg;
	wr[0].num_sge = 1;
	wr[0].opcode = op;
	wr[0].send_flags = IBV_SEND_SIGNALED;
	if (op == IBV_WR_ATOMIC_CMP_AND_SWP || op == IBV_WR_ATOMIC_FETCH_AND_ADD) {
		wr[0].wr.atomic.remote_addr = raddr;
		wr[0].wr.atomic.rkey = rkey;
		wr[0].wr.atomic.compare_add = 0;
		wr[0].wr.atomic.swap = 0x4242424242424242ull;
		if (rc == R_ATOMIC_MISALIGNED)
			wr[0].wr.atomic.compare_add = 0x0101010101010101ull;
	} else {
		wr[0].wr.rdma.remote_addr = raddr;
		wr[0].wr.rdma.rkey = rkey;
	}
	wr[0].next = &wr[1];
	/* A good write to the start of the region, queued behind: flushed. */
	sg2 = vp_gbuf_sge(&l, 0, 8);
	wr[1].wr_id = 2;
	wr[1].sg_list = &sg2;
	wr[1].num_sge = 1;
	wr[1].opcode = IBV_WR_RDMA_WRITE;
	wr[1].send_flags = IBV_SEND_SIGNALED;
	wr[1].wr.rdma.remote_addr = (uintptr_t)t.p;
	wr[1].wr.rdma.rkey = t.mr->rkey;

	t0 = vp_now();
	if (!post_wr(&A, wr)) {
		if (!expect_wc(&A, 1, want, -1, 10, &wc, "bad request"))
			vc_note("%s in %.0f ms", ibv_wc_status_str(wc.status),
			     (vp_now() - t0) * 1e3);
		expect_wc(&A, 2, IBV_WC_WR_FLUSH_ERR, -1, 5, NULL,
			  "write queued behind");
		expect_flushed_after(&A, &l);
	}
	/* The responder NAKed: it is in ERR too and flushes its receive. */
	expect_state(&B, IBV_QPS_ERR, "responder after the NAK");
	expect_wc(&B, 500, IBV_WC_WR_FLUSH_ERR, -1, 5, NULL,
		  "responder's posted receive");
	if (region_intact) {
		long i = diff_fill(t.p, tlen, 0x11);

		if (i >= 0)
			vc_fail("target byte %ld changed (%#x)", i, t.p[i]);
	} else {
		/* Frames before the bad one may land (verbs allows it). */
		long i = diff_fill(t.p, tlen - 4096, 0x11);

		if (i >= 0)
			vc_fail("target byte %ld below the write changed (%#x)",
			     i, t.p[i]);
	}
	vp_gbuf_check_guards(&t, 64, "target MR");
	if (op == IBV_WR_RDMA_READ && diff_fill(l.p, llen, 0x55) >= 0)
		vc_fail("local read buffer changed by a failed read");
	vp_gbuf_free(&t);
	vp_gbuf_free(&l);
	vp_gbuf_free(&r);
	pair_down();
}

static void c_write_bad_rkey(void) { remote_case(R_BAD_RKEY); }
static void c_write_past_end(void) { remote_case(R_PAST_END); }
static void c_write_past_end_multi(void) { remote_case(R_PAST_END_MULTI); }
static void c_write_before_start(void) { remote_case(R_BEFORE_START); }
static void c_read_past_end(void) { remote_case(R_READ_PAST_END); }
static void c_read_no_remote_read(void) { remote_case(R_READ_NO_RREAD); }
static void c_write_no_remote_write(void) { remote_case(R_WRITE_NO_RWRITE); }
static void c_atomic_misaligned(void) { remote_case(R_ATOMIC_MISALIGNED); }
static void c_atomic_no_remote_atomic(void) { remote_case(R_ATOMIC_NO_RATOMIC); }

/* ---- local protection error ------------------------------------------------ */

static void lkey_case(int good_first)
{
	struct vp_gbuf t, l;
	struct ibv_sge sg[3];
	struct ibv_send_wr wr[3];
	int i, n = good_first ? 3 : 2, bad = good_first ? 1 : 0;
	uint64_t id;

	pair_up(&default_opts);
	t = buf_new(&B, 4096, 0, default_opts.access);
	l = buf_new(&A, 4096, 0, IBV_ACCESS_LOCAL_WRITE);
	vp_fill_tag8(t.p, 4096, 0x11);
	vp_fill_tag8(l.p, 4096, 0x77);
	memset(wr, 0, sizeof(wr));
	for (i = 0; i < n; i++) {
		/* WR i writes 64 bytes at target offset i * 1024. */
		sg[i] = vp_gbuf_sge(&l, (size_t)i * 1024, 64);
		wr[i].wr_id = (uint64_t)i + 1;
		wr[i].sg_list = &sg[i];
		wr[i].num_sge = 1;
		wr[i].opcode = IBV_WR_RDMA_WRITE;
		wr[i].send_flags = IBV_SEND_SIGNALED;
		wr[i].wr.rdma.remote_addr = (uintptr_t)t.p + (size_t)i * 1024;
		wr[i].wr.rdma.rkey = t.mr->rkey;
		wr[i].next = i + 1 < n ? &wr[i + 1] : NULL;
	}
	sg[bad].lkey ^= 0x00100000;
	if (good_first == 2) {
		/* the good WR in a call of its own, the bad one right after */
		wr[0].next = NULL;
		if (post_wr(&A, &wr[0]))
			goto out;
		wr[0].next = &wr[1];
	}
	if (!post_wr(&A, good_first == 2 ? &wr[1] : wr)) {
		id = 1;
		if (good_first) {
			expect_wc(&A, id, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, 10,
				  NULL, "good write before the bad lkey");
			id++;
		}
		expect_wc(&A, id, IBV_WC_LOC_PROT_ERR, -1, 10, NULL, "bad lkey");
		id++;
		expect_wc(&A, id, IBV_WC_WR_FLUSH_ERR, -1, 5, NULL,
			  "write queued behind");
		expect_flushed_after(&A, &l);
	}
	/* Nothing of the bad and the later WRs reached the target. */
	for (i = 0; i < n; i++) {
		if (i < bad) {
			if (memcmp(t.p + (size_t)i * 1024, l.p + (size_t)i * 1024, 64))
				vc_fail("good write %d did not land", i + 1);
		} else if (memcmp(t.p + (size_t)i * 1024, l.p + (size_t)i * 1024, 64) == 0) {
			vc_fail("write %d (bad lkey or flushed) landed", i + 1);
		}
	}
	/* A local error is not the responder's: it stays connected. */
	expect_state(&B, IBV_QPS_RTS, "responder after a local error");
out:
	vp_gbuf_free(&t);
	vp_gbuf_free(&l);
	pair_down();
}

/* RDMA_READ into a local MR without LOCAL_WRITE: LOC_PROT_ERR, nothing read. */
static void c_read_into_readonly(void)
{
	struct vp_gbuf t, l;
	struct ibv_sge sg;

	pair_up(&default_opts);
	t = buf_new(&B, 4096, 0, default_opts.access);
	l = buf_new(&A, 4096, 0, IBV_ACCESS_REMOTE_READ);	/* no LOCAL_WRITE */
	vp_fill_tag8(t.p, 4096, 0x13);
	memset(l.p, 0, 4096);
	sg = vp_gbuf_sge(&l, 0, 4096);
	if (!post(&A, IBV_WR_RDMA_READ, &sg, 1, (uintptr_t)t.p, t.mr->rkey, 1, 0) &&
	    !post(&A, IBV_WR_RDMA_READ, &sg, 1, (uintptr_t)t.p, t.mr->rkey, 2, 0)) {
		expect_wc(&A, 1, IBV_WC_LOC_PROT_ERR, -1, 10, NULL,
			  "read into a read-only MR");
		expect_wc(&A, 2, IBV_WC_WR_FLUSH_ERR, -1, 5, NULL, "read queued behind");
		expect_state(&A, IBV_QPS_ERR, "requester after the error");
	}
	if (vp_diff_byte(l.p, 4096, 0) >= 0)
		vc_fail("the read-only local MR was written");
	vp_gbuf_free(&t);
	vp_gbuf_free(&l);
	pair_down();
}

static void c_bad_lkey(void) { lkey_case(0); }
static void c_bad_lkey_after_good(void) { lkey_case(1); }
static void c_bad_lkey_after_good_2posts(void) { lkey_case(2); }

/* ---- receiver not ready ---------------------------------------------------- */

static void c_rnr_zero(void)
{
	struct conn_opts o = default_opts;
	struct vp_gbuf l, r;
	struct ibv_sge sg;
	double t0;
	struct ibv_wc wc;

	o.rnr_retry = 0;
	pair_up(&o);
	l = buf_new(&A, 64, 0, IBV_ACCESS_LOCAL_WRITE);
	r = buf_new(&B, 64, 0, IBV_ACCESS_LOCAL_WRITE);
	vp_fill_tag8(l.p, 64, 0x21);
	sg = vp_gbuf_sge(&l, 0, 64);
	t0 = vp_now();
	if (!post(&A, IBV_WR_SEND, &sg, 1, 0, 0, 1, 0) &&
	    !post(&A, IBV_WR_SEND, &sg, 1, 0, 0, 2, 0)) {
		if (!expect_wc(&A, 1, IBV_WC_RNR_RETRY_EXC_ERR, -1, 10, &wc,
			       "send with no receive, rnr_retry 0"))
			vc_note("%s in %.0f ms", ibv_wc_status_str(wc.status),
			     (vp_now() - t0) * 1e3);
		expect_wc(&A, 2, IBV_WC_WR_FLUSH_ERR, -1, 5, NULL, "send queued behind");
		expect_flushed_after(&A, &l);
	}
	/* RNR is not an error of the responder. */
	expect_state(&B, IBV_QPS_RTS, "responder after RNR");
	expect_no_wc(&B, 0.05, "responder");
	vp_gbuf_free(&l);
	vp_gbuf_free(&r);
	pair_down();
}

static void c_rnr_infinite(void)
{
	struct conn_opts o = default_opts;
	struct vp_gbuf l, r;
	struct ibv_sge sg, rsg;
	struct ibv_wc wc;

	o.rnr_retry = 7;
	o.min_rnr_timer = 20;	/* 10.24 ms between resends while stopped */
	pair_up(&o);
	l = buf_new(&A, 3000, 0, IBV_ACCESS_LOCAL_WRITE);
	r = buf_new(&B, 4096, 0, IBV_ACCESS_LOCAL_WRITE);
	vp_fill_tag8(l.p, 3000, 0x31);
	memset(r.p, 0, 4096);
	sg = vp_gbuf_sge(&l, 0, 3000);
	if (!post(&A, IBV_WR_SEND, &sg, 1, 0, 0, 1, 0)) {
		/* Waits for a receive as long as it takes (7 = infinite). */
		expect_no_wc(&A, 0.5, "send while no receive is posted");
		expect_state(&A, IBV_QPS_RTS, "requester while RNR");
		rsg = vp_gbuf_sge(&r, 0, 4096);
		post_recv(&B, &rsg, 1, 77);
		expect_wc(&A, 1, IBV_WC_SUCCESS, IBV_WC_SEND, 10, NULL,
			  "send after the receive was posted");
		if (!expect_wc(&B, 77, IBV_WC_SUCCESS, IBV_WC_RECV, 10, &wc,
			       "receive")) {
			if (wc.byte_len != 3000)
				vc_fail("byte_len %u, expected 3000", wc.byte_len);
			if (memcmp(r.p, l.p, 3000))
				vc_fail("received bytes differ");
			if (vp_diff_byte(r.p + 3000, 4096 - 3000, 0) >= 0)
				vc_fail("bytes beyond byte_len written");
		}
	}
	expect_state(&A, IBV_QPS_RTS, "requester after");
	vp_gbuf_free(&l);
	vp_gbuf_free(&r);
	pair_down();
}

/* ---- receive too small --------------------------------------------------- */

static void c_recv_too_small(void)
{
	struct vp_gbuf l, r;
	struct ibv_sge sg, rsg;
	struct ibv_wc wc;

	pair_up(&default_opts);
	l = buf_new(&A, 64, 0, IBV_ACCESS_LOCAL_WRITE);
	r = buf_new(&B, 32, 64, IBV_ACCESS_LOCAL_WRITE);
	vp_fill_tag8(l.p, 64, 0x41);
	memset(r.p, 0, 32);
	rsg = vp_gbuf_sge(&r, 0, 32);
	post_recv(&B, &rsg, 1, 70);
	post_recv(&B, &rsg, 1, 71);
	sg = vp_gbuf_sge(&l, 0, 64);
	if (!post(&A, IBV_WR_SEND, &sg, 1, 0, 0, 1, 0) &&
	    !post(&A, IBV_WR_SEND, &sg, 1, 0, 0, 2, 0)) {
		/* IB: the responder NAKs with Invalid Request. */
		if (!expect_wc(&A, 1, IBV_WC_REM_INV_REQ_ERR, -1, 10, &wc,
			       "requester of a too long send"))
			vc_note("requester %s", ibv_wc_status_str(wc.status));
		expect_wc(&A, 2, IBV_WC_WR_FLUSH_ERR, -1, 5, NULL, "send queued behind");
		expect_flushed_after(&A, &l);
	}
	if (!expect_wc(&B, 70, IBV_WC_LOC_LEN_ERR, -1, 10, &wc, "receiver"))
		vc_note("receiver %s", ibv_wc_status_str(wc.status));
	expect_wc(&B, 71, IBV_WC_WR_FLUSH_ERR, -1, 5, NULL, "second receive");
	expect_state(&B, IBV_QPS_ERR, "receiver after LOC_LEN_ERR");
	vp_gbuf_check_guards(&r, 64, "receive buffer");
	vp_gbuf_free(&l);
	vp_gbuf_free(&r);
	pair_down();
}

/* ---- the peer goes away ---------------------------------------------------- */

/* Bounds of the time to RETRY_EXC_ERR: (retry_cnt + 1) timeouts. */
static void retry_bounds(const struct conn_opts *o, double *lo, double *hi)
{
	double rto = 4.096e-6 * (double)(1ull << o->timeout), sum = 0;
	int i;

	for (i = 0; i <= o->retry_cnt; i++)
		sum += rto * (double)(1u << (i < 6 ? i : 6));	/* backoff, max 64 x */
	*lo = rto * (o->retry_cnt + 1) * 0.9;
	*hi = sum + 3.0;	/* slack: TCG, timer slack */
}

static int wait_port(struct side *s, enum ibv_port_state want, double timeout_s)
{
	struct ibv_port_attr pa;
	double end = vp_now() + timeout_s;

	do {
		if (!ibv_query_port(s->ctx, 1, &pa) && pa.state == want)
			return 0;
		vp_sleep_us(50000);
	} while (vp_now() < end);
	return -1;
}

static void peer_case(int link_down)
{
	struct conn_opts o = default_opts;
	struct vp_gbuf t, l;
	struct ibv_sge sg;
	struct ibv_wc wc;
	double lo, hi, t0, dt;

	o.timeout = 14;		/* 67 ms */
	o.retry_cnt = 3;
	retry_bounds(&o, &lo, &hi);
	pair_up(&o);
	t = buf_new(&B, 4096, 0, default_opts.access);
	l = buf_new(&A, 4096, 0, IBV_ACCESS_LOCAL_WRITE);
	vp_fill_tag8(l.p, 4096, 0x61);
	memset(t.p, 0, 4096);
	sg = vp_gbuf_sge(&l, 0, 4096);

	/* It works first. */
	if (!post(&A, IBV_WR_RDMA_WRITE, &sg, 1, (uintptr_t)t.p, t.mr->rkey, 1, 0))
		expect_wc(&A, 1, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, 10, NULL,
			  "write before the peer went away");
	if (link_down) {
		if (system(link_down_cmd) != 0)
			vc_fail("'%s' failed", link_down_cmd);
	} else {
		if (ibv_destroy_qp(B.qp))
			vc_fail("destroy peer QP: %s", strerror(errno));
		B.qp = NULL;
	}
	t0 = vp_now();
	if (!post(&A, IBV_WR_RDMA_WRITE, &sg, 1, (uintptr_t)t.p, t.mr->rkey, 2, 0) &&
	    !post(&A, IBV_WR_RDMA_WRITE, &sg, 1, (uintptr_t)t.p, t.mr->rkey, 3, 0)) {
		if (!expect_wc(&A, 2, IBV_WC_RETRY_EXC_ERR, -1, hi + 5, &wc,
			       "write to a vanished peer")) {
			dt = vp_now() - t0;
			vc_note("%s after %.2f s (bounds %.2f..%.2f s)",
			     ibv_wc_status_str(wc.status), dt, lo, hi);
			if (dt < lo || dt > hi)
				vc_fail("RETRY_EXC_ERR after %.2f s, outside %.2f..%.2f s "
				     "(timeout %u, retry_cnt %u)", dt, lo, hi,
				     o.timeout, o.retry_cnt);
		}
		expect_wc(&A, 3, IBV_WC_WR_FLUSH_ERR, -1, 5, NULL, "write queued behind");
		expect_flushed_after(&A, &l);
	}
	if (link_down) {
		if (system(link_up_cmd) != 0)
			vc_fail("'%s' failed", link_up_cmd);
		if (wait_port(&A, IBV_PORT_ACTIVE, 20) || wait_port(&B, IBV_PORT_ACTIVE, 20))
			vc_fail("ports not ACTIVE again 20 s after link up");
	}
	vp_gbuf_free(&t);
	vp_gbuf_free(&l);
	pair_down();
}

static void c_peer_destroyed(void) { peer_case(0); }

/*
 * RTR towards a GID whose MAC is a group address: the multicast GID ff02::1
 * (33:33:00:00:00:01) and a link-local GID whose EUI-64 carries the
 * multicast MAC 01:00:00:00:00:01.  A connection's peer is one host:
 * modify_qp fails with EINVAL and the QP stays in INIT; the peer's own GID
 * then takes it to RTR.
 */
static void c_av_group_mac(void)
{
	static const uint8_t group[2][16] = {
		{ 0xff, 0x02, [15] = 0x01 },
		{ 0xfe, 0x80, [8] = 0x03, 0x00, 0x00, 0xff, 0xfe, 0x00, 0x00, 0x01 },
	};
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_INIT, .port_num = 1,
		.qp_access_flags = IBV_ACCESS_REMOTE_WRITE,
	};
	int i, ret;

	make_qp(&A);
	make_qp(&B);
	if (ibv_modify_qp(A.qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX |
			  IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
		vp_die_errno("modify_qp INIT");
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_1024;
	a.dest_qp_num = B.qp->qp_num;
	a.max_dest_rd_atomic = 1;
	a.ah_attr.is_global = 1;
	a.ah_attr.grh.hop_limit = 1;
	a.ah_attr.port_num = 1;
	for (i = 0; i < 2; i++) {
		memcpy(a.ah_attr.grh.dgid.raw, group[i], 16);
		ret = ibv_modify_qp(A.qp, &a, IBV_QP_STATE | IBV_QP_AV |
				    IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
				    IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
				    IBV_QP_MIN_RNR_TIMER);
		if (ret != EINVAL)
			vc_fail("RTR to group GID %d: %s, want EINVAL", i,
				ret ? strerror(ret) : "accepted");
		expect_state(&A, IBV_QPS_INIT, "after the refused RTR");
	}
	a.ah_attr.grh.dgid = B.gid;
	ret = ibv_modify_qp(A.qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
			    IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
			    IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
	if (ret)
		vc_fail("RTR to the peer's GID: %s", strerror(ret));
	expect_state(&A, IBV_QPS_RTR, "after RTR to the peer");
	pair_down();
}

static void c_peer_link_down(void)
{
	if (!strcmp(dev_a, dev_b)) {
		vc_note("skipped: loopback has no link to take down");
		return;
	}
	peer_case(1);
}

/* ---- completion events --------------------------------------------------- */

/* An event on s's channel within timeout_s: 1, else 0. Acks it. */
static int get_event(struct side *s, double timeout_s)
{
	struct pollfd pfd = { .fd = s->ch->fd, .events = POLLIN };
	struct ibv_cq *cq;
	void *ctx;

	if (poll(&pfd, 1, (int)(timeout_s * 1000)) != 1)
		return 0;
	if (ibv_get_cq_event(s->ch, &cq, &ctx)) {
		vc_fail("ibv_get_cq_event: %s", strerror(errno));
		return 0;
	}
	if (cq != s->cq)
		vc_fail("event for another CQ");
	ibv_ack_cq_events(cq, 1);
	return 1;
}

static void c_events(void)
{
	struct vp_gbuf l, r;
	struct ibv_sge sg, rsg;
	struct ibv_wc wc;
	int i;

	pair_up(&default_opts);
	l = buf_new(&A, 64, 0, IBV_ACCESS_LOCAL_WRITE);
	r = buf_new(&B, 64 * 8, 0, IBV_ACCESS_LOCAL_WRITE);
	vp_fill_tag8(l.p, 64, 0x71);
	for (i = 0; i < 8; i++) {
		rsg = vp_gbuf_sge(&r, (size_t)i * 64, 64);
		post_recv(&B, &rsg, 1, 100 + (uint64_t)i);
	}
	sg = vp_gbuf_sge(&l, 0, 64);

	/* Armed (any completion): one event for the send completion. */
	if (ibv_req_notify_cq(A.cq, 0))
		vc_fail("ibv_req_notify_cq(A, 0)");
	if (ibv_req_notify_cq(B.cq, 0))
		vc_fail("ibv_req_notify_cq(B, 0)");
	post(&A, IBV_WR_SEND, &sg, 1, 0, 0, 1, 0);
	if (!get_event(&A, 10))
		vc_fail("no event on the armed send CQ");
	if (!get_event(&B, 10))
		vc_fail("no event on the armed receive CQ");
	expect_wc(&A, 1, IBV_WC_SUCCESS, IBV_WC_SEND, 5, NULL, "send 1");
	expect_wc(&B, 100, IBV_WC_SUCCESS, IBV_WC_RECV, 5, NULL, "recv 1");

	/* Not re-armed: no event, the completion is still there. */
	post(&A, IBV_WR_SEND, &sg, 1, 0, 0, 2, 0);
	expect_wc(&A, 2, IBV_WC_SUCCESS, IBV_WC_SEND, 10, NULL, "send 2");
	expect_wc(&B, 101, IBV_WC_SUCCESS, IBV_WC_RECV, 10, NULL, "recv 2");
	if (get_event(&A, 0.2) || get_event(&B, 0.2))
		vc_fail("event on a CQ that was not re-armed");

	/* Solicited only: an unsolicited send raises none ... */
	if (ibv_req_notify_cq(B.cq, 1))
		vc_fail("ibv_req_notify_cq(B, solicited)");
	post(&A, IBV_WR_SEND, &sg, 1, 0, 0, 3, 0);
	expect_wc(&A, 3, IBV_WC_SUCCESS, IBV_WC_SEND, 10, NULL, "send 3");
	if (!expect_wc(&B, 102, IBV_WC_SUCCESS, IBV_WC_RECV, 10, &wc, "recv 3 (unsolicited)")
	    && (wc.wc_flags & IBV_WC_WITH_IMM))
		vc_fail("recv 3 has WITH_IMM");
	if (get_event(&B, 0.3))
		vc_fail("event for an unsolicited receive with solicited-only armed");
	/* ... a solicited one does (and a solicited WRITE_WITH_IMM too, below). */
	post(&A, IBV_WR_SEND, &sg, 1, 0, 0, 4, IBV_SEND_SOLICITED);
	if (!get_event(&B, 10))
		vc_fail("no event for a solicited receive");
	expect_wc(&A, 4, IBV_WC_SUCCESS, IBV_WC_SEND, 10, NULL, "send 4");
	expect_wc(&B, 103, IBV_WC_SUCCESS, IBV_WC_RECV, 10, NULL, "recv 4 (solicited)");

	if (ibv_req_notify_cq(B.cq, 1))
		vc_fail("ibv_req_notify_cq(B, solicited)");
	{
		struct ibv_send_wr wr = {
			.wr_id = 5, .sg_list = &sg, .num_sge = 1,
			.opcode = IBV_WR_SEND_WITH_IMM,
			.send_flags = IBV_SEND_SIGNALED | IBV_SEND_SOLICITED,
			.imm_data = htonl(0xabcd0123),
		};
		post_wr(&A, &wr);
	}
	if (!get_event(&B, 10))
		vc_fail("no event for a solicited SEND_WITH_IMM");
	expect_wc(&A, 5, IBV_WC_SUCCESS, IBV_WC_SEND, 10, NULL, "send 5");
	expect_wc(&B, 104, IBV_WC_SUCCESS, IBV_WC_RECV, 10, NULL, "recv 5");

	/* Solicited-only armed: an error completion raises an event (verbs). */
	if (ibv_req_notify_cq(A.cq, 1))
		vc_fail("ibv_req_notify_cq(A, solicited)");
	post(&A, IBV_WR_RDMA_WRITE, &sg, 1, 0x1000, 0xdead00, 6, 0);
	if (!get_event(&A, 10))
		vc_fail("no event for an error completion with solicited-only armed");
	expect_wc(&A, 6, IBV_WC_REM_ACCESS_ERR, -1, 10, NULL, "bad write");
	vp_gbuf_free(&l);
	vp_gbuf_free(&r);
	pair_down();
}

/* ---- data integrity ---------------------------------------------------------- */

static void c_write_imm(void)
{
	static const uint32_t sizes[] = { 0, 1, 1456, 1457, 4096, 65536 + 3 };
	struct vp_gbuf t, l, r;
	struct ibv_sge sg, rsg;
	struct ibv_wc wc;
	size_t i;

	pair_up(&default_opts);
	t = buf_new(&B, 65536 + 64, 0, default_opts.access);
	l = buf_new(&A, 65536 + 64, 0, IBV_ACCESS_LOCAL_WRITE);
	r = buf_new(&B, 16, 0, IBV_ACCESS_LOCAL_WRITE);
	for (i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		uint32_t n = sizes[i], imm = 0x80000001u + (uint32_t)i * 0x01010101u;
		struct ibv_send_wr wr = {
			.wr_id = i + 1, .sg_list = &sg, .num_sge = 1,
			.opcode = IBV_WR_RDMA_WRITE_WITH_IMM,
			.send_flags = IBV_SEND_SIGNALED,
			.imm_data = htonl(imm),
		};

		memset(t.p, 0, t.len);
		memset(r.p, 0xcc, 16);
		vp_fill_tag8(l.p, n, (uint8_t)(0x10 + i));
		sg = vp_gbuf_sge(&l, 0, n);
		wr.wr.rdma.remote_addr = (uintptr_t)t.p + 32;
		wr.wr.rdma.rkey = t.mr->rkey;
		rsg = vp_gbuf_sge(&r, 0, 16);
		post_recv(&B, &rsg, 1, 200 + i);
		if (post_wr(&A, &wr))
			break;
		expect_wc(&A, i + 1, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, 20, NULL,
			  "write_with_imm");
		if (expect_wc(&B, 200 + i, IBV_WC_SUCCESS, IBV_WC_RECV_RDMA_WITH_IMM,
			      20, &wc, "write_with_imm receive"))
			continue;
		if (!(wc.wc_flags & IBV_WC_WITH_IMM))
			vc_fail("size %u: IBV_WC_WITH_IMM not set", n);
		if (ntohl(wc.imm_data) != imm)
			vc_fail("size %u: imm %#x, expected %#x", n, ntohl(wc.imm_data), imm);
		if (wc.byte_len != n)
			vc_fail("size %u: byte_len %u", n, wc.byte_len);
		if (vp_diff_byte(r.p, 16, 0xcc) >= 0)
			vc_fail("size %u: the receive buffer was written", n);
		if (memcmp(t.p + 32, l.p, n))
			vc_fail("size %u: target bytes differ", n);
		if (vp_diff_byte(t.p, 32, 0) >= 0 ||
		    vp_diff_byte(t.p + 32 + n, t.len - 32 - n, 0) >= 0)
			vc_fail("size %u: bytes outside the write changed", n);
	}
	vc_note("%zu sizes", sizeof(sizes) / sizeof(sizes[0]));
	vp_gbuf_free(&t);
	vp_gbuf_free(&l);
	vp_gbuf_free(&r);
	pair_down();
}

static void c_send_imm(void)
{
	static const uint32_t sizes[] = { 0, 1, 1440, 1441, 8192 + 5 };
	struct vp_gbuf l, r;
	struct ibv_sge sg, rsg;
	struct ibv_wc wc;
	size_t i;

	pair_up(&default_opts);
	l = buf_new(&A, 8192 + 64, 0, IBV_ACCESS_LOCAL_WRITE);
	r = buf_new(&B, 8192 + 64, 0, IBV_ACCESS_LOCAL_WRITE);
	for (i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		uint32_t n = sizes[i], imm = 0xfedcba98u - (uint32_t)i;
		struct ibv_send_wr wr = {
			.wr_id = i + 1, .sg_list = &sg, .num_sge = 1,
			.opcode = IBV_WR_SEND_WITH_IMM,
			.send_flags = IBV_SEND_SIGNALED,
			.imm_data = htonl(imm),
		};

		memset(r.p, 0, r.len);
		vp_fill_tag8(l.p, n, (uint8_t)(0x20 + i));
		sg = vp_gbuf_sge(&l, 0, n);
		rsg = vp_gbuf_sge(&r, 0, (uint32_t)r.len);
		post_recv(&B, &rsg, 1, 300 + i);
		if (post_wr(&A, &wr))
			break;
		expect_wc(&A, i + 1, IBV_WC_SUCCESS, IBV_WC_SEND, 20, NULL,
			  "send_with_imm");
		if (expect_wc(&B, 300 + i, IBV_WC_SUCCESS, IBV_WC_RECV, 20, &wc,
			      "send_with_imm receive"))
			continue;
		if (!(wc.wc_flags & IBV_WC_WITH_IMM))
			vc_fail("size %u: IBV_WC_WITH_IMM not set", n);
		if (ntohl(wc.imm_data) != imm)
			vc_fail("size %u: imm %#x, expected %#x", n, ntohl(wc.imm_data), imm);
		if (wc.byte_len != n)
			vc_fail("size %u: byte_len %u", n, wc.byte_len);
		if (wc.src_qp != A.qp->qp_num)
			vc_fail("size %u: src_qp %u, expected %u", n, wc.src_qp, A.qp->qp_num);
		if (memcmp(r.p, l.p, n))
			vc_fail("size %u: received bytes differ", n);
		if (vp_diff_byte(r.p + n, r.len - n, 0) >= 0)
			vc_fail("size %u: bytes beyond byte_len written", n);
	}
	/* A plain SEND has no immediate. */
	sg = vp_gbuf_sge(&l, 0, 10);
	rsg = vp_gbuf_sge(&r, 0, 64);
	post_recv(&B, &rsg, 1, 399);
	post(&A, IBV_WR_SEND, &sg, 1, 0, 0, 99, 0);
	expect_wc(&A, 99, IBV_WC_SUCCESS, IBV_WC_SEND, 20, NULL, "plain send");
	if (!expect_wc(&B, 399, IBV_WC_SUCCESS, IBV_WC_RECV, 20, &wc, "plain receive") &&
	    (wc.wc_flags & IBV_WC_WITH_IMM))
		vc_fail("plain SEND: IBV_WC_WITH_IMM set");
	vp_gbuf_free(&l);
	vp_gbuf_free(&r);
	pair_down();
}

/* Gather 3 SGEs from 2 MRs, scatter into 4 receive SGEs of odd sizes. */
static void c_multi_sge(void)
{
	static const uint32_t slen[3] = { 1000, 1, 3100 }, rlen[4] = { 7, 1500, 2000, 1000 };
	uint32_t total = 1000 + 1 + 3100, off;
	struct vp_gbuf l1, l2, r, t, rd;
	struct ibv_sge sg[3], rsg[4];
	struct ibv_wc wc;
	uint8_t want[4101];
	int i;

	pair_up(&default_opts);
	l1 = buf_new(&A, 8192, 0, IBV_ACCESS_LOCAL_WRITE);
	l2 = buf_new(&A, 4096, 100, IBV_ACCESS_LOCAL_WRITE);
	r = buf_new(&B, 8192, 0, IBV_ACCESS_LOCAL_WRITE);
	t = buf_new(&B, 8192, 0, default_opts.access);
	rd = buf_new(&A, 8192, 0, IBV_ACCESS_LOCAL_WRITE);
	vp_fill_tag8(l1.p, 8192, 0x91);
	vp_fill_tag8(l2.p, 4096, 0x19);
	memset(r.p, 0, 8192);
	sg[0] = vp_gbuf_sge(&l1, 5000, slen[0]);
	sg[1] = vp_gbuf_sge(&l2, 17, slen[1]);
	sg[2] = vp_gbuf_sge(&l1, 11, slen[2]);
	memcpy(want, l1.p + 5000, 1000);
	memcpy(want + 1000, l2.p + 17, 1);
	memcpy(want + 1001, l1.p + 11, 3100);
	/* Receive SGEs scattered over the buffer, with gaps between them. */
	rsg[0] = vp_gbuf_sge(&r, 8000, rlen[0]);
	rsg[1] = vp_gbuf_sge(&r, 0, rlen[1]);
	rsg[2] = vp_gbuf_sge(&r, 1600, rlen[2]);
	rsg[3] = vp_gbuf_sge(&r, 4000, rlen[3]);
	post_recv(&B, rsg, 4, 400);
	{
		struct ibv_send_wr wr = {
			.wr_id = 1, .sg_list = sg, .num_sge = 3,
			.opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED,
		};
		post_wr(&A, &wr);
	}
	expect_wc(&A, 1, IBV_WC_SUCCESS, IBV_WC_SEND, 20, NULL, "3-SGE send");
	if (!expect_wc(&B, 400, IBV_WC_SUCCESS, IBV_WC_RECV, 20, &wc, "4-SGE receive")) {
		uint8_t got[4101];
		uint32_t k = 0, left = total;

		if (wc.byte_len != total)
			vc_fail("byte_len %u, expected %u", wc.byte_len, total);
		for (i = 0; i < 4 && left; i++) {
			uint32_t n = rlen[i] < left ? rlen[i] : left;

			memcpy(got + k, (void *)(uintptr_t)rsg[i].addr, n);
			k += n;
			left -= n;
		}
		if (memcmp(got, want, total))
			vc_fail("scattered bytes differ from the gathered ones");
		/* Untouched: the gaps, and SGE 3 beyond what the message filled. */
		off = total - 7 - 1500 - 2000;	/* bytes that went into SGE 3 */
		if (vp_diff_byte(r.p + 1500, 100, 0) >= 0 ||
		    vp_diff_byte(r.p + 3600, 400, 0) >= 0 ||
		    vp_diff_byte(r.p + 4000 + off, 8000 - 4000 - off, 0) >= 0 ||
		    vp_diff_byte(r.p + 8007, 8192 - 8007, 0) >= 0)
			vc_fail("receive bytes outside the scatter list changed");
	}
	/* The same gather list as an RDMA WRITE, then READ back into 2 SGEs. */
	memset(t.p, 0, 8192);
	post(&A, IBV_WR_RDMA_WRITE, sg, 3, (uintptr_t)t.p + 3, t.mr->rkey, 2, 0);
	expect_wc(&A, 2, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, 20, NULL, "3-SGE write");
	if (memcmp(t.p + 3, want, total) || vp_diff_byte(t.p, 3, 0) >= 0 ||
	    vp_diff_byte(t.p + 3 + total, 8192 - 3 - total, 0) >= 0)
		vc_fail("3-SGE write: target bytes differ");
	memset(rd.p, 0, 8192);
	{
		struct ibv_sge rs[2] = { vp_gbuf_sge(&rd, 4096, 2000), vp_gbuf_sge(&rd, 0, total - 2000) };

		post(&A, IBV_WR_RDMA_READ, rs, 2, (uintptr_t)t.p + 3, t.mr->rkey, 3, 0);
		if (!expect_wc(&A, 3, IBV_WC_SUCCESS, IBV_WC_RDMA_READ, 20, &wc,
			       "2-SGE read")) {
			if (wc.byte_len != total)
				vc_fail("read byte_len %u, expected %u", wc.byte_len, total);
			if (memcmp(rd.p + 4096, want, 2000) ||
			    memcmp(rd.p, want + 2000, total - 2000))
				vc_fail("2-SGE read: bytes differ");
			if (vp_diff_byte(rd.p + total - 2000, 4096 - (total - 2000), 0) >= 0 ||
			    vp_diff_byte(rd.p + 6096, 8192 - 6096, 0) >= 0)
				vc_fail("2-SGE read: bytes outside the scatter list changed");
		}
	}
	vp_gbuf_free(&l1);
	vp_gbuf_free(&l2);
	vp_gbuf_free(&r);
	vp_gbuf_free(&t);
	vp_gbuf_free(&rd);
	pair_down();
}

/* Inline SEND and WRITE from unregistered memory, reused right after post. */
static void c_inline(void)
{
	static const uint32_t sizes[] = { 1, 64, 100, 256 };
	struct vp_gbuf src, r, t;
	struct ibv_sge sg[2], rsg;
	struct ibv_wc wc;
	uint8_t want[256];
	size_t i;

	pair_up(&default_opts);
	src = buf_new(&A, 512, 0, -1);		/* not registered */
	r = buf_new(&B, 512, 0, IBV_ACCESS_LOCAL_WRITE);
	t = buf_new(&B, 512, 0, default_opts.access);
	for (i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		uint32_t n = sizes[i], h = n / 3;
		struct ibv_send_wr wr = {
			.wr_id = 10 + i, .sg_list = sg, .num_sge = h ? 2 : 1,
			.opcode = IBV_WR_SEND,
			.send_flags = IBV_SEND_SIGNALED | IBV_SEND_INLINE,
		};

		vp_fill_tag8(src.p, 512, (uint8_t)(0x50 + i));
		/* Two pieces, out of order in memory. */
		sg[0] = vp_gbuf_sge(&src, 300, h ? h : n);
		sg[1] = vp_gbuf_sge(&src, 0, n - h);
		memcpy(want, src.p + 300, h ? h : n);
		if (h)
			memcpy(want + h, src.p, n - h);
		memset(r.p, 0, 512);
		rsg = vp_gbuf_sge(&r, 0, 512);
		post_recv(&B, &rsg, 1, 500 + i);
		if (post_wr(&A, &wr))
			break;
		memset(src.p, 0xff, 512);	/* inline: ours again at once */
		expect_wc(&A, 10 + i, IBV_WC_SUCCESS, IBV_WC_SEND, 20, NULL, "inline send");
		if (!expect_wc(&B, 500 + i, IBV_WC_SUCCESS, IBV_WC_RECV, 20, &wc,
			       "inline receive")) {
			if (wc.byte_len != n)
				vc_fail("inline send %u: byte_len %u", n, wc.byte_len);
			if (memcmp(r.p, want, n) || vp_diff_byte(r.p + n, 512 - n, 0) >= 0)
				vc_fail("inline send %u: received bytes differ", n);
		}
		/* The same as an inline RDMA WRITE. */
		vp_fill_tag8(src.p, 512, (uint8_t)(0x60 + i));
		memcpy(want, src.p + 300, h ? h : n);
		if (h)
			memcpy(want + h, src.p, n - h);
		memset(t.p, 0, 512);
		wr.wr_id = 20 + i;
		wr.opcode = IBV_WR_RDMA_WRITE;
		wr.wr.rdma.remote_addr = (uintptr_t)t.p + 1;
		wr.wr.rdma.rkey = t.mr->rkey;
		if (post_wr(&A, &wr))
			break;
		memset(src.p, 0xff, 512);
		expect_wc(&A, 20 + i, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, 20, NULL,
			  "inline write");
		if (memcmp(t.p + 1, want, n) || t.p[0] ||
		    vp_diff_byte(t.p + 1 + n, 511 - n, 0) >= 0)
			vc_fail("inline write %u: target bytes differ", n);
	}
	vp_gbuf_free(&src);
	vp_gbuf_free(&r);
	vp_gbuf_free(&t);
	pair_down();
}

/*
 * The integrity loop netem.sh runs over lossy links: every operation, sizes
 * across frame boundaries, exact bytes and atomic results.
 */
static void c_integrity(void)
{
	static const uint32_t sizes[] = { 1, 1464, 1465, 4096, 65536, 200000 };
	const size_t max = 200000 + 64;
	struct vp_gbuf l, t, r, at, ar;
	struct ibv_sge sg, rsg;
	struct ibv_wc wc;
	uint64_t counter = 0, *tgt, expect_sum = 0;
	int it, ops = 0;
	size_t i;

	pair_up(&default_opts);
	l = buf_new(&A, max, 0, IBV_ACCESS_LOCAL_WRITE);
	t = buf_new(&B, max, 0, default_opts.access);
	r = buf_new(&B, max, 0, IBV_ACCESS_LOCAL_WRITE);
	at = buf_new(&B, 64, 0, default_opts.access);
	ar = buf_new(&A, 64, 0, IBV_ACCESS_LOCAL_WRITE);
	tgt = (uint64_t *)at.p;
	*tgt = 1000;
	for (it = 0; it < iterations && !vc_fails(); it++) {
		for (i = 0; i < sizeof(sizes) / sizeof(sizes[0]) && !vc_fails(); i++) {
			uint32_t n = sizes[i];
			uint8_t tag = (uint8_t)(it * 16 + i);

			/* WRITE */
			vp_fill_tag8(l.p, n, tag);
			memset(t.p, 0, max);
			sg = vp_gbuf_sge(&l, 0, n);
			post(&A, IBV_WR_RDMA_WRITE, &sg, 1, (uintptr_t)t.p + 5, t.mr->rkey, 1, 0);
			expect_wc(&A, 1, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, 60, NULL, "write");
			if (diff_fill(t.p + 5, n, tag) >= 0 || vp_diff_byte(t.p, 5, 0) >= 0 ||
			    vp_diff_byte(t.p + 5 + n, max - 5 - n, 0) >= 0)
				vc_fail("write %u (iteration %d): bytes differ", n, it);
			/* READ it back */
			memset(l.p, 0, max);
			post(&A, IBV_WR_RDMA_READ, &sg, 1, (uintptr_t)t.p + 5, t.mr->rkey, 2, 0);
			if (!expect_wc(&A, 2, IBV_WC_SUCCESS, IBV_WC_RDMA_READ, 60, &wc, "read") &&
			    (wc.byte_len != n || diff_fill(l.p, n, tag) >= 0 ||
			     vp_diff_byte(l.p + n, max - n, 0) >= 0))
				vc_fail("read %u (iteration %d): byte_len %u, bytes %s", n,
				     it, wc.byte_len,
				     diff_fill(l.p, n, tag) >= 0 ? "differ" : "ok");
			/* SEND */
			vp_fill_tag8(l.p, n, (uint8_t)~tag);
			memset(r.p, 0, max);
			rsg = vp_gbuf_sge(&r, 0, (uint32_t)max);
			post_recv(&B, &rsg, 1, 3);
			post(&A, IBV_WR_SEND, &sg, 1, 0, 0, 4, 0);
			expect_wc(&A, 4, IBV_WC_SUCCESS, IBV_WC_SEND, 60, NULL, "send");
			if (!expect_wc(&B, 3, IBV_WC_SUCCESS, IBV_WC_RECV, 60, &wc, "receive") &&
			    (wc.byte_len != n || diff_fill(r.p, n, (uint8_t)~tag) >= 0 ||
			     vp_diff_byte(r.p + n, max - n, 0) >= 0))
				vc_fail("send %u (iteration %d): byte_len %u, bytes differ",
				     n, it, wc.byte_len);
			/* FETCH_ADD then CMP_SWAP on one counter */
			sg = vp_gbuf_sge(&ar, 0, 8);
			{
				struct ibv_send_wr wr = {
					.wr_id = 5, .sg_list = &sg, .num_sge = 1,
					.opcode = IBV_WR_ATOMIC_FETCH_AND_ADD,
					.send_flags = IBV_SEND_SIGNALED,
				};
				uint64_t before = *tgt;

				wr.wr.atomic.remote_addr = (uintptr_t)tgt;
				wr.wr.atomic.rkey = at.mr->rkey;
				wr.wr.atomic.compare_add = n;
				post_wr(&A, &wr);
				expect_wc(&A, 5, IBV_WC_SUCCESS, IBV_WC_FETCH_ADD, 60, NULL, "fetch_add");
				if (*(uint64_t *)ar.p != before || *tgt != before + n)
					vc_fail("fetch_add: orig %lu target %lu, expected %lu %lu",
					     (unsigned long)*(uint64_t *)ar.p,
					     (unsigned long)*tgt, (unsigned long)before,
					     (unsigned long)(before + n));
				expect_sum += n;
				wr.wr_id = 6;
				wr.opcode = IBV_WR_ATOMIC_CMP_AND_SWP;
				wr.wr.atomic.compare_add = before + n;
				wr.wr.atomic.swap = before + n + 1;
				post_wr(&A, &wr);
				expect_wc(&A, 6, IBV_WC_SUCCESS, IBV_WC_COMP_SWAP, 60, NULL, "cmp_swap");
				if (*(uint64_t *)ar.p != before + n || *tgt != before + n + 1)
					vc_fail("cmp_swap: orig %lu target %lu",
					     (unsigned long)*(uint64_t *)ar.p,
					     (unsigned long)*tgt);
				expect_sum += 1;
			}
			counter++;
			ops += 5;
		}
	}
	if (*tgt != 1000 + expect_sum)
		vc_fail("atomic counter %lu, expected %lu", (unsigned long)*tgt,
		     (unsigned long)(1000 + expect_sum));
	/* A burst: 32 writes posted at once, all must land in order. */
	{
		struct ibv_send_wr wr[32];
		struct ibv_sge s32[32];
		int k;

		vp_fill_tag8(l.p, 32 * 4096, 0xa5);
		memset(t.p, 0, max);
		for (k = 0; k < 32; k++) {
			s32[k] = vp_gbuf_sge(&l, (size_t)k * 4096, 4096);
			memset(&wr[k], 0, sizeof(wr[k]));
			wr[k].wr_id = 1000 + (uint64_t)k;
			wr[k].sg_list = &s32[k];
			wr[k].num_sge = 1;
			wr[k].opcode = IBV_WR_RDMA_WRITE;
			wr[k].send_flags = k == 31 || k % 8 == 0 ? IBV_SEND_SIGNALED : 0;
			wr[k].wr.rdma.remote_addr = (uintptr_t)t.p + (size_t)k * 4096;
			wr[k].wr.rdma.rkey = t.mr->rkey;
			wr[k].next = k < 31 ? &wr[k + 1] : NULL;
		}
		if (!post_wr(&A, wr)) {
			for (k = 0; k < 32; k++)
				if (wr[k].send_flags & IBV_SEND_SIGNALED)
					expect_wc(&A, 1000 + (uint64_t)k, IBV_WC_SUCCESS,
						  IBV_WC_RDMA_WRITE, 60, NULL, "burst write");
			if (diff_fill(t.p, 32 * 4096, 0xa5) >= 0)
				vc_fail("burst of 32 writes: bytes differ");
			ops += 32;
		}
	}
	expect_state(&A, IBV_QPS_RTS, "requester after the loop");
	expect_state(&B, IBV_QPS_RTS, "responder after the loop");
	vc_note("%d iterations, %d operations", iterations, ops);
	(void)counter;
	vp_gbuf_free(&l);
	vp_gbuf_free(&t);
	vp_gbuf_free(&r);
	vp_gbuf_free(&at);
	vp_gbuf_free(&ar);
	pair_down();
}

/*
 * Reads and atomics from a responder left in RTR (perftest's ib_read_bw and
 * ib_atomic_bw servers do that).  Its responses are a stream of its own,
 * retransmitted by its own go-back-N: it must survive losses like an RTS
 * QP (netem.sh runs this under loss).
 */
static void c_rtr_responder(void)
{
	static const uint32_t sizes[] = { 4096, 65536 };
	struct vp_gbuf l, t, ar;
	struct ibv_sge sg;
	struct ibv_wc wc;
	int it, k, ops = 0;
	size_t i;

	pair_up2(&default_opts, 1);
	l = buf_new(&A, 65536 * 4, 0, IBV_ACCESS_LOCAL_WRITE);
	t = buf_new(&B, 65536, 0, default_opts.access);
	ar = buf_new(&A, 64, 0, IBV_ACCESS_LOCAL_WRITE);
	vp_fill_tag8(t.p, 65536, 0x3c);
	*(uint64_t *)t.p = 0;
	vp_fill_tag8(t.p + 8, 65536 - 8, 0x3c);
	for (it = 0; it < iterations * 4 && !vc_fails(); it++) {
		for (i = 0; i < sizeof(sizes) / sizeof(sizes[0]) && !vc_fails(); i++) {
			uint32_t n = sizes[i];

			/* 4 reads in flight, like perftest's outstanding reads */
			memset(l.p, 0, 65536 * 4);
			for (k = 0; k < 4; k++) {
				sg = vp_gbuf_sge(&l, (size_t)k * 65536, n - 8);
				post(&A, IBV_WR_RDMA_READ, &sg, 1, (uintptr_t)t.p + 8,
				     t.mr->rkey, 10 + (uint64_t)k, 0);
			}
			for (k = 0; k < 4; k++)
				if (!expect_wc(&A, 10 + (uint64_t)k, IBV_WC_SUCCESS,
					       IBV_WC_RDMA_READ, 60, &wc, "read from an RTR responder") &&
				    (wc.byte_len != n - 8 ||
				     memcmp(l.p + (size_t)k * 65536, t.p + 8, n - 8)))
					vc_fail("read %u: byte_len %u or bytes differ", n - 8,
					     wc.byte_len);
			/* and an atomic: its response is a one-frame message */
			sg = vp_gbuf_sge(&ar, 0, 8);
			{
				struct ibv_send_wr wr = {
					.wr_id = 20, .sg_list = &sg, .num_sge = 1,
					.opcode = IBV_WR_ATOMIC_FETCH_AND_ADD,
					.send_flags = IBV_SEND_SIGNALED,
				};
				uint64_t before = *(volatile uint64_t *)t.p;

				wr.wr.atomic.remote_addr = (uintptr_t)t.p;
				wr.wr.atomic.rkey = t.mr->rkey;
				wr.wr.atomic.compare_add = 1;
				post_wr(&A, &wr);
				if (!expect_wc(&A, 20, IBV_WC_SUCCESS, IBV_WC_FETCH_ADD, 60,
					       NULL, "fetch_add at an RTR responder") &&
				    (*(uint64_t *)ar.p != before || *(uint64_t *)t.p != before + 1))
					vc_fail("fetch_add: orig %lu target %lu, expected %lu",
					     (unsigned long)*(uint64_t *)ar.p,
					     (unsigned long)*(uint64_t *)t.p,
					     (unsigned long)before);
			}
			ops += 5;
			if (vc_fails())
				break;
		}
	}
	expect_state(&B, IBV_QPS_RTR, "responder");
	vc_note("%d reads and atomics", ops);
	vp_gbuf_free(&l);
	vp_gbuf_free(&t);
	vp_gbuf_free(&ar);
	pair_down();
}

/*
 * `hold N`: N connected pairs (2N QPs, 2N CQs, 2N MRs of 64 KiB) with
 * traffic in flight; print "ready QPS CQS MRS" and wait to be killed
 * (tests/vm/hygiene.sh checks that everything is released).
 */
static void hold_write(struct side *s, struct vp_gbuf *l, struct vp_gbuf *t)
{
	struct ibv_sge sg = vp_gbuf_sge(l, 0, 65536);
	struct ibv_send_wr wr = {
		.sg_list = &sg, .num_sge = 1, .opcode = IBV_WR_RDMA_WRITE,
		.send_flags = IBV_SEND_SIGNALED,
	}, *bad;

	wr.wr.rdma.remote_addr = (uintptr_t)t->p;
	wr.wr.rdma.rkey = t->mr->rkey;
	ibv_post_send(s->qp, &wr, &bad);
}

static int hold(int n)
{
	struct side *pa = calloc((size_t)n, sizeof(*pa)), *pb = calloc((size_t)n, sizeof(*pb));
	struct vp_gbuf *ba = calloc((size_t)n, sizeof(*ba)), *bb = calloc((size_t)n, sizeof(*bb));
	int i, k;

	if (!pa || !pb || !ba || !bb)
		vp_die_errno("calloc");
	for (i = 0; i < n; i++) {
		pa[i] = A;
		pb[i] = B;
		make_qp(&pa[i]);
		make_qp(&pb[i]);
		pa[i].psn = (uint32_t)i * 1000;
		pb[i].psn = (uint32_t)i * 1000 + 7;
		if (to_rtr(&pa[i], &pb[i], &default_opts, 0) ||
		    to_rtr(&pb[i], &pa[i], &default_opts, 0))
			vp_die_errno("connect");
		ba[i] = buf_new(&pa[i], 65536, 0, default_opts.access);
		bb[i] = buf_new(&pb[i], 65536, 0, default_opts.access);
	}
	/* Writes keep flowing on every pair until we are killed. */
	for (i = 0; i < n; i++) {
		struct ibv_sge rsg = vp_gbuf_sge(&bb[i], 0, 65536);

		for (k = 0; k < 4; k++) {
			struct ibv_recv_wr rw = { .wr_id = (uint64_t)k, .sg_list = &rsg, .num_sge = 1 }, *bad;

			ibv_post_recv(pb[i].qp, &rw, &bad);
			hold_write(&pa[i], &ba[i], &bb[i]);
		}
	}
	printf("ready %d %d %d\n", 2 * n, 2 * n, 2 * n);
	fflush(stdout);
	for (;;) {
		for (i = 0; i < n; i++) {
			struct ibv_wc wc[8];
			int got = ibv_poll_cq(pa[i].cq, 8, wc);

			for (k = 0; k < got; k++)
				if (wc[k].status == IBV_WC_SUCCESS)
					hold_write(&pa[i], &ba[i], &bb[i]);
		}
		vp_sleep_us(1000);
	}
	return 0;
}

/* ---- driver ----------------------------------------------------------------- */

struct tcase {
	const char *name;
	void (*fn)(void);
	const char *group;
	const char *what;
};

static const struct tcase cases[] = {
	{ "write_bad_rkey", c_write_bad_rkey, "errors", "RDMA_WRITE, wrong rkey -> REM_ACCESS_ERR" },
	{ "write_past_end", c_write_past_end, "errors", "RDMA_WRITE across the MR's end -> REM_ACCESS_ERR, nothing written" },
	{ "write_past_end_multi", c_write_past_end_multi, "errors", "multi-frame RDMA_WRITE across the end -> REM_ACCESS_ERR, guards intact" },
	{ "write_before_start", c_write_before_start, "errors", "RDMA_WRITE from 1 byte before the MR -> REM_ACCESS_ERR" },
	{ "read_past_end", c_read_past_end, "errors", "RDMA_READ across the MR's end -> REM_ACCESS_ERR" },
	{ "read_no_remote_read", c_read_no_remote_read, "errors", "RDMA_READ from an MR without REMOTE_READ -> REM_ACCESS_ERR" },
	{ "write_no_remote_write", c_write_no_remote_write, "errors", "RDMA_WRITE into an MR without REMOTE_WRITE -> REM_ACCESS_ERR" },
	{ "atomic_misaligned", c_atomic_misaligned, "errors", "FETCH_ADD at va % 8 == 4 -> REM_INV_REQ_ERR" },
	{ "atomic_no_remote_atomic", c_atomic_no_remote_atomic, "errors", "CMP_SWAP into an MR without REMOTE_ATOMIC -> REM_ACCESS_ERR" },
	{ "bad_lkey", c_bad_lkey, "errors", "local SGE with a bad lkey -> LOC_PROT_ERR" },
	{ "read_into_readonly", c_read_into_readonly, "errors", "RDMA_READ into a local MR without LOCAL_WRITE -> LOC_PROT_ERR" },
	{ "bad_lkey_after_good", c_bad_lkey_after_good, "errors", "good WR, bad lkey, good WR -> SUCCESS, LOC_PROT_ERR, FLUSH" },
	{ "bad_lkey_after_good_2posts", c_bad_lkey_after_good_2posts, "errors", "as bad_lkey_after_good, the good WR posted by an earlier call" },
	{ "rnr_zero", c_rnr_zero, "errors", "SEND, no receive, rnr_retry 0 -> RNR_RETRY_EXC_ERR" },
	{ "rnr_infinite", c_rnr_infinite, "errors", "SEND, no receive, rnr_retry 7 -> completes once a receive is posted" },
	{ "recv_too_small", c_recv_too_small, "errors", "SEND longer than the receive -> LOC_LEN_ERR / REM_INV_REQ_ERR" },
	{ "peer_destroyed", c_peer_destroyed, "errors", "peer QP destroyed -> RETRY_EXC_ERR within bounds" },
	{ "av_group_mac", c_av_group_mac, "errors", "RTR to a multicast/broadcast-MAC GID -> EINVAL, QP stays INIT" },
	{ "peer_link_down", c_peer_link_down, "errors", "peer link down -> RETRY_EXC_ERR within bounds" },
	{ "events", c_events, "events", "completion channel, solicited-only" },
	{ "write_imm", c_write_imm, "data", "RDMA_WRITE_WITH_IMM: imm, byte_len, flags, bytes" },
	{ "send_imm", c_send_imm, "data", "SEND_WITH_IMM: imm, byte_len, flags, bytes" },
	{ "multi_sge", c_multi_sge, "data", "3-SGE gather, 4-SGE scatter, SGE write/read" },
	{ "inline", c_inline, "data", "inline SEND and WRITE, exact bytes" },
	{ "integrity", c_integrity, "data", "WRITE/READ/SEND/atomics over sizes, burst" },
	{ "rtr_responder", c_rtr_responder, "data", "RDMA_READ from a responder left in RTR, exact bytes" },
};

#define NCASES (sizeof(cases) / sizeof(cases[0]))

static int run_case(const struct tcase *c)
{
	double t0 = vp_now();

	vc_start();
	c->fn();
	return vc_end(c->name, dev_a, dev_b, c->what, t0);
}

static void usage(void)
{
	size_t i;

	fprintf(stderr, "usage: mbcf_verbs_errors [-a DEV] [-b DEV] [-n ITER] "
		"[-D DOWN_CMD] [-U UP_CMD] CASE|errors|data|events|all...\n");
	for (i = 0; i < NCASES; i++)
		fprintf(stderr, "  %-24s %-7s %s\n", cases[i].name, cases[i].group,
			cases[i].what);
	exit(2);
}

int main(int argc, char **argv)
{
	int opt, failed = 0, ran = 0, i;
	size_t k;

	setvbuf(stdout, NULL, _IOLBF, 0);
	while ((opt = getopt(argc, argv, "a:b:n:D:U:s:l")) != -1) {
		switch (opt) {
		case 'a': dev_a = optarg; break;
		case 'b': dev_b = optarg; break;
		case 'n': iterations = atoi(optarg); break;
		case 'D': link_down_cmd = optarg; break;
		case 'U': link_up_cmd = optarg; break;
		case 's': seed = (unsigned int)strtoul(optarg, NULL, 0); break;
		default: usage();
		}
	}
	if (optind >= argc)
		usage();
	for (i = optind; i < argc && strcmp(argv[optind], "hold"); i++) {
		int known = !strcmp(argv[i], "all");

		for (k = 0; k < NCASES; k++)
			known |= !strcmp(argv[i], cases[k].name) ||
				 !strcmp(argv[i], cases[k].group);
		if (!known) {
			fprintf(stderr, "unknown case or group '%s'\n", argv[i]);
			usage();
		}
	}
	if (!strcmp(argv[optind], "hold") && optind + 1 < argc) {
		open_side(&A, dev_a);
		open_side(&B, dev_b);
		return hold(atoi(argv[optind + 1]));
	}
	open_side(&A, dev_a);
	open_side(&B, dev_b);
	for (i = optind; i < argc; i++)
		for (k = 0; k < NCASES; k++)
			if (!strcmp(argv[i], "all") || !strcmp(argv[i], cases[k].name) ||
			    !strcmp(argv[i], cases[k].group)) {
				failed += run_case(&cases[k]);
				ran++;
			}
	close_side(&A);
	close_side(&B);
	printf("verbs_errors [%s-%s]: %d case(s), %d failed\n", dev_a, dev_b, ran, failed);
	return failed > 100 ? 100 : failed;
}
