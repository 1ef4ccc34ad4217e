// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * The memory-based FIFO through the mbcf direct verbs (infiniband/mbcfdv.h,
 * docs/protocol.md 16), with exact values: the owner creates a FIFO on
 * device B (the responder), senders on device A push records through RC
 * QPs with mbcfdv_wr_fifo_push, the owner pops them with mbcfdv_fifo_pop.
 *
 *   order     several senders, assorted lengths, a FIFO far smaller than
 *             the traffic: every record exactly once, per-sender order,
 *             the receiving QP's number; a full FIFO stops the senders
 *             (`wait` set, completions stall) until the owner consumes
 *   badkey    unknown key, a plain MR's rkey, another PD's FIFO:
 *             REM_ACCESS_ERR
 *   rdma      the FIFO's key for RDMA WRITE and READ: REM_ACCESS_ERR; as
 *             a local SGE's lkey: LOC_PROT_ERR; reg of a FIFO with remote
 *             access, misaligned or sized wrong: EINVAL
 *   reg       the kernel's checks of MBCF_MR_FIFO, the provider bypassed
 *   toobig    a record larger than size/2: REM_INV_REQ_ERR; larger than a
 *             frame: LOC_LEN_ERR
 *   fullerr   MBCFDV_FIFO_FULL_ERROR: a full FIFO NAKs REM_OP_ERR
 *   scribble  the owner writes garbage into tail and head: REM_OP_ERR,
 *             extreme but consistent values wrap inside the area; guard
 *             bytes either side of the region unchanged
 *   destroy   the FIFO destroyed while a peer pushes: the pushes after it
 *             REM_ACCESS_ERR, the rest flushed; destroy returns 0
 *   midpush   destroy while 4 senders (2 on each device) push in a loop:
 *             destroy 0; each sender SUCCESS for exactly its records in
 *             memory, then one REM_ACCESS_ERR, then flushes; every record
 *             whole; nothing written after destroy returned
 *   signal    MBCFDV_FIFO_SIGNAL: N pushes make the eventfd read N; a
 *             thread asleep in poll() on it wakes with POLLIN at a push;
 *             destroy with an unread count closes the eventfd
 *   sigempty  MBCFDV_FIFO_SIGNAL_EMPTY: k pushes unpopped read 1, pushes
 *             behind them nothing, into the emptied queue 1 more;
 *             mbcfdv_fifo_dispatch hands every record over once, in
 *             order, clears the count, re-arms it when stopped at max
 *   sigflags  both signal flags, unknown flags: EINVAL; event_fd of a
 *             FIFO without a signal -1/EINVAL; the kernel's checks of the
 *             eventfd field (raw REG_MR): EBADF, EINVAL, old layout works
 *
 * Linked with -lmbcf (libmbcf.so.1: the mbcfdv functions at version
 * MBCF_1.0, the signal's at MBCF_1.1), as any program using them is.
 *   mbcf_fifo_test [-a SENDER_DEV] [-b OWNER_DEV] [-s SEED] [CASE...]
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include <rdma/ib_user_verbs.h>

#include "vmprog.h"
#include "infiniband/mbcfdv.h"
#include "rdma/mbcf-abi.h"

static const char *dev_a = "mbcf1", *dev_b = "mbcf0";
static uint64_t rng;

static struct vp_dev A, B;	/* senders, owner */

/* ---- connected pairs ------------------------------------------------------ */

struct pair {
	struct vp_ep s, r;	/* sender on A (extended QP), receiver on B */
	struct ibv_qp_ex *qx;
	struct ibv_cq *scq, *rcq;
};

/* A pair whose sender is on sd (A, or B itself: loopback). */
static void pair_new_on(struct pair *p, struct vp_dev *sd, struct ibv_pd *rpd,
			uint32_t depth)
{
	struct ibv_qp_init_attr_ex ia = {
		.qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = depth, .max_recv_wr = 1,
			 .max_send_sge = 2, .max_recv_sge = 1,
			 .max_inline_data = 64 },
		.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS,
		.pd = sd->pd,
		.send_ops_flags = IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_RDMA_WRITE |
				  IBV_QP_EX_WITH_RDMA_READ,
	};
	struct ibv_qp_init_attr ra = {
		.qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1,
			 .max_recv_sge = 1 },
	};
	struct vp_conn_opts o = vp_scaled_opts(&vp_default_opts);

	memset(p, 0, sizeof(*p));
	p->scq = ibv_create_cq(sd->ctx, 2 * depth + 8, NULL, NULL, 0);
	p->rcq = ibv_create_cq(B.ctx, 16, NULL, NULL, 0);
	if (!p->scq || !p->rcq)
		vp_die_errno("ibv_create_cq");
	ia.send_cq = ia.recv_cq = p->scq;
	p->s.dev = sd;
	p->s.cq = p->scq;
	p->s.qp = ibv_create_qp_ex(sd->ctx, &ia);
	if (!p->s.qp)
		vp_die_errno("ibv_create_qp_ex");
	p->qx = ibv_qp_to_qp_ex(p->s.qp);
	ra.send_cq = ra.recv_cq = p->rcq;
	p->r.dev = &B;
	p->r.cq = p->rcq;
	p->r.qp = ibv_create_qp(rpd, &ra);
	if (!p->r.qp)
		vp_die_errno("ibv_create_qp");
	p->s.psn = vp_rand_below(&rng, 1 << 24);
	p->r.psn = vp_rand_below(&rng, 1 << 24);
	/* a stopped sender waits as long as it takes (rnr_retry 7) */
	if (vp_ep_connect(&p->s, &p->r, &o) || vp_ep_connect(&p->r, &p->s, &o))
		vp_die("setup: connect: %s", strerror(errno));
}

static void pair_new(struct pair *p, struct ibv_pd *rpd, uint32_t depth)
{
	pair_new_on(p, &A, rpd, depth);
}

static void pair_free(struct pair *p)
{
	if (ibv_destroy_qp(p->s.qp) || ibv_destroy_qp(p->r.qp) ||
	    ibv_destroy_cq(p->scq) || ibv_destroy_cq(p->rcq))
		vc_fail("destroy pair: %s", strerror(errno));
}

/* One push of sge (lkey, addr, len) to fkey; 0 or the post's error. */
static int push(struct pair *p, uint32_t fkey, uint32_t lkey, const void *addr,
		uint32_t len, uint64_t wr_id)
{
	ibv_wr_start(p->qx);
	p->qx->wr_id = wr_id;
	p->qx->wr_flags = IBV_SEND_SIGNALED;
	mbcfdv_wr_fifo_push(p->qx, fkey);
	ibv_wr_set_sge(p->qx, lkey, (uintptr_t)addr, len);
	return ibv_wr_complete(p->qx);
}

static int rdma_op(struct pair *p, int write, uint32_t rkey, uint64_t raddr,
		   uint32_t lkey, void *laddr, uint32_t len, uint64_t wr_id)
{
	ibv_wr_start(p->qx);
	p->qx->wr_id = wr_id;
	p->qx->wr_flags = IBV_SEND_SIGNALED;
	if (write)
		ibv_wr_rdma_write(p->qx, rkey, raddr);
	else
		ibv_wr_rdma_read(p->qx, rkey, raddr);
	ibv_wr_set_sge(p->qx, lkey, (uintptr_t)laddr, len);
	return ibv_wr_complete(p->qx);
}

/* The next completion on cq within secs: its status, or -1 on timeout. */
static int wait_wc(struct ibv_cq *cq, double secs, struct ibv_wc *out)
{
	double end = vp_now() + secs * vp_time_scale();
	struct ibv_wc wc;
	int n;

	while (vp_now() < end) {
		n = ibv_poll_cq(cq, 1, &wc);
		if (n < 0)
			return -2;
		if (n == 1) {
			if (out)
				*out = wc;
			return wc.status;
		}
		vp_sleep_us(200);
	}
	return -1;
}

static void expect_wc(struct ibv_cq *cq, int want, const char *what)
{
	int st = wait_wc(cq, 20, NULL);

	if (st != want)
		vc_fail("%s: completion %s, expected %s", what,
			st == -1 ? "none (timeout)" : vp_wc_status_str(st),
			vp_wc_status_str(want));
	else
		vc_note("%s: %s", what, vp_wc_status_str(st));
}

/* A FIFO of record area size on guarded memory (64 B in a page). */
struct gfifo {
	struct vp_gbuf g;
	struct mbcfdv_fifo *f;
};

static int gfifo_new(struct gfifo *q, struct ibv_pd *pd, uint32_t size,
		     uint32_t flags)
{
	q->g = vp_gbuf_new(pd, MBCFDV_FIFO_CTRL_LEN + size, 64, -1);
	q->f = mbcfdv_create_fifo(pd, q->g.p, MBCFDV_FIFO_CTRL_LEN + size, flags);
	return q->f ? 0 : errno;
}

static void gfifo_free(struct gfifo *q, const char *what)
{
	if (q->f && mbcfdv_destroy_fifo(q->f))
		vc_fail("mbcfdv_destroy_fifo: %s", strerror(errno));
	vp_gbuf_check_guards(&q->g, 64, what);
	vp_gbuf_free(&q->g);
}

static uint64_t *ctl64(struct gfifo *q, uint32_t off)
{
	return (uint64_t *)(q->g.p + off);
}

/* ---- order: several senders, one FIFO --------------------------------------- */

#define NSEND		3
#define NREC		150
#define REC_MAX		700

struct rec_hdr {
	uint32_t sender, seq, len, tag;
};

static uint32_t rec_len(uint32_t sender, uint32_t seq)
{
	/* assorted, deterministic: 16..REC_MAX */
	return 16 + (sender * 7919u + seq * 104729u) % (REC_MAX - 15);
}

static void case_order(void)
{
	struct pair p[NSEND];
	struct gfifo q;
	struct vp_buf sb[NSEND];
	uint32_t next[NSEND] = { 0 }, posted[NSEND] = { 0 }, done[NSEND] = { 0 };
	uint8_t buf[4096];
	uint32_t got = 0, size = 4096, len, qpn, i, s;
	double t_end;
	int err, stalled_wait = 0, total_done = 0;

	if (gfifo_new(&q, B.pd, size, 0)) {
		vc_fail("mbcfdv_create_fifo: %s", strerror(errno));
		return;
	}
	for (s = 0; s < NSEND; s++) {
		pair_new(&p[s], B.pd, 32);
		vp_buf_alloc(&sb[s], NREC * REC_MAX);
		if (vp_buf_reg(&sb[s], &A, IBV_ACCESS_LOCAL_WRITE))
			vp_die_errno("reg");
		for (i = 0; i < NREC; i++) {
			uint8_t *r = sb[s].p + i * REC_MAX;
			struct rec_hdr h = { s, i, rec_len(s, i), (uint32_t)vp_rand(&rng) };

			memcpy(r, &h, sizeof(h));
			vp_fill_pat(r + sizeof(h), h.len - sizeof(h), h.tag, 0);
		}
	}
	/* phase 1: post everything, consume nothing: the FIFO fills (4 KiB
	 * against ~160 KiB), the senders are stopped */
	for (s = 0; s < NSEND; s++)
		for (; posted[s] < 32; posted[s]++)
			if (push(&p[s], q.f->key, sb[s].mr->lkey,
				 sb[s].p + posted[s] * REC_MAX,
				 rec_len(s, posted[s]), s << 16 | posted[s]))
				vc_fail("post %u/%u", s, posted[s]);
	vp_sleep_us((long)(500000 * vp_time_scale()));
	for (s = 0; s < NSEND; s++) {
		struct ibv_wc wc;

		while (ibv_poll_cq(p[s].scq, 1, &wc) == 1) {
			if (wc.status != IBV_WC_SUCCESS)
				vc_fail("sender %u: %s while full", s,
					vp_wc_status_str(wc.status));
			done[s]++;
			total_done++;
		}
	}
	stalled_wait = (int)*(volatile uint32_t *)(q.g.p + 8);
	if (total_done >= NSEND * 32 || !stalled_wait)
		vc_fail("full FIFO: %d of %d pushes completed, wait %d (expected fewer, wait 1)",
			total_done, NSEND * 32, stalled_wait);
	else
		vc_note("full: %d/%d completed, wait=1", total_done, NSEND * 32);

	/* phase 2: consume while the senders keep posting */
	t_end = vp_now() + 120 * vp_time_scale();
	while (got < NSEND * NREC && vp_now() < t_end && !vc_fails()) {
		err = mbcfdv_fifo_pop(q.f, buf, sizeof(buf), &len, &qpn);
		if (err == 0) {
			struct rec_hdr h;

			memcpy(&h, buf, sizeof(h));
			if (h.sender >= NSEND || len != rec_len(h.sender, h.seq) ||
			    h.len != len) {
				vc_fail("record %u: sender %u seq %u len %u (header len %u)",
					got, h.sender, h.seq, len, h.len);
				break;
			}
			if (h.seq != next[h.sender])
				vc_fail("sender %u: record seq %u, expected %u",
					h.sender, h.seq, next[h.sender]);
			if (qpn != p[h.sender].r.qp->qp_num)
				vc_fail("sender %u: qpn %u, expected %u", h.sender,
					qpn, p[h.sender].r.qp->qp_num);
			if (vp_diff_pat(buf + sizeof(h), len - sizeof(h), h.tag, 0) >= 0)
				vc_fail("sender %u seq %u: payload differs", h.sender, h.seq);
			next[h.sender] = h.seq + 1;
			got++;
		} else if (err != EAGAIN) {
			vc_fail("mbcfdv_fifo_pop: %s", strerror(err));
			break;
		}
		for (s = 0; s < NSEND; s++) {
			struct ibv_wc wc;

			while (ibv_poll_cq(p[s].scq, 1, &wc) == 1) {
				if (wc.status != IBV_WC_SUCCESS)
					vc_fail("sender %u: %s", s,
						vp_wc_status_str(wc.status));
				done[s]++;
			}
			while (posted[s] < NREC && posted[s] - done[s] < 32) {
				if (push(&p[s], q.f->key, sb[s].mr->lkey,
					 sb[s].p + posted[s] * REC_MAX,
					 rec_len(s, posted[s]), s << 16 | posted[s]))
					vc_fail("post %u/%u", s, posted[s]);
				posted[s]++;
			}
		}
		if (err == EAGAIN)
			vp_sleep_us(100);
	}
	if (got != NSEND * NREC)
		vc_fail("%u of %u records popped", got, NSEND * NREC);
	for (s = 0; s < NSEND; s++) {
		while (done[s] < NREC && wait_wc(p[s].scq, 5, NULL) == IBV_WC_SUCCESS)
			done[s]++;
		if (done[s] != NREC || next[s] != NREC)
			vc_fail("sender %u: %u completions, %u records in order",
				s, done[s], next[s]);
	}
	if (mbcfdv_fifo_pop(q.f, buf, sizeof(buf), &len, &qpn) != EAGAIN)
		vc_fail("a record more than was pushed");
	vc_note("%u records, tail %llu", got,
		(unsigned long long)*ctl64(&q, 0));
	for (s = 0; s < NSEND; s++) {
		pair_free(&p[s]);
		vp_buf_free(&sb[s]);
	}
	gfifo_free(&q, "order");
}

/* ---- hostile cases ------------------------------------------------------------ */

static void case_badkey(void)
{
	struct ibv_pd *pd2 = ibv_alloc_pd(B.ctx);
	struct vp_gbuf mr = vp_gbuf_new(B.pd, 4096, 0, VP_ACCESS_ALL);
	struct gfifo other, q;
	struct vp_gbuf src = vp_gbuf_new(A.pd, 64, 0, IBV_ACCESS_LOCAL_WRITE);
	struct pair p;
	uint32_t bogus;

	if (!pd2 || gfifo_new(&other, pd2, 1024, 0) || gfifo_new(&q, B.pd, 1024, 0)) {
		vc_fail("setup: %s", strerror(errno));
		return;
	}
	/* a key no FIFO has: the real one with another generation byte */
	bogus = q.f->key ^ 0x5a;
	pair_new(&p, B.pd, 4);
	push(&p, bogus, src.mr->lkey, src.p, 32, 1);
	expect_wc(p.scq, IBV_WC_REM_ACCESS_ERR, "unknown key");
	pair_free(&p);
	pair_new(&p, B.pd, 4);
	push(&p, mr.mr->rkey, src.mr->lkey, src.p, 32, 1);
	expect_wc(p.scq, IBV_WC_REM_ACCESS_ERR, "plain MR's rkey");
	pair_free(&p);
	pair_new(&p, B.pd, 4);
	push(&p, other.f->key, src.mr->lkey, src.p, 32, 1);
	expect_wc(p.scq, IBV_WC_REM_ACCESS_ERR, "another PD's FIFO");
	pair_free(&p);
	if (vp_diff_byte(mr.p, 4096, VP_GUARD) >= 0 ||
	    vp_diff_byte(other.g.p + 128, 1024, 0) >= 0 ||
	    vp_diff_byte(q.g.p, 128 + 1024, 0) >= 0)
		vc_fail("memory written by a refused push");
	gfifo_free(&q, "badkey");
	gfifo_free(&other, "badkey other");
	vp_gbuf_free(&mr);
	vp_gbuf_free(&src);
	if (ibv_dealloc_pd(pd2))
		vc_fail("dealloc pd2");
}

static void case_rdma(void)
{
	struct vp_gbuf src = vp_gbuf_new(A.pd, 256, 0, IBV_ACCESS_LOCAL_WRITE);
	struct gfifo q;
	struct pair p;
	struct ibv_mr *mr;
	void *al;

	if (gfifo_new(&q, B.pd, 1024, 0)) {
		vc_fail("setup: %s", strerror(errno));
		return;
	}
	vp_fill_tag8(src.p, 256, 7);
	pair_new(&p, B.pd, 4);
	rdma_op(&p, 1, q.f->key, (uintptr_t)q.g.p + 128, src.mr->lkey, src.p, 64, 1);
	expect_wc(p.scq, IBV_WC_REM_ACCESS_ERR, "RDMA WRITE with the FIFO key");
	pair_free(&p);
	pair_new(&p, B.pd, 4);
	rdma_op(&p, 0, q.f->key, (uintptr_t)q.g.p, src.mr->lkey, src.p, 64, 1);
	expect_wc(p.scq, IBV_WC_REM_ACCESS_ERR, "RDMA READ with the FIFO key");
	pair_free(&p);
	if (vp_diff_byte(q.g.p, 128 + 1024, 0) >= 0)
		vc_fail("FIFO memory written by a refused WRITE");
	if (src.p[0] != vp_tag8(0, 7))
		vc_fail("READ delivered data through the FIFO key");
	gfifo_free(&q, "rdma");

	/* the FIFO's key as an lkey of the owner's own send: refused */
	if (gfifo_new(&q, A.pd, 1024, 0)) {
		vc_fail("setup: %s", strerror(errno));
		return;
	}
	pair_new(&p, B.pd, 4);
	push(&p, 0x100, q.f->key, q.g.p + 128, 16, 1);
	expect_wc(p.scq, IBV_WC_LOC_PROT_ERR, "FIFO key as a local lkey");
	pair_free(&p);
	gfifo_free(&q, "rdma lkey");

	/* the provider's checks (the kernel's: case reg) */
	al = aligned_alloc(4096, 8192);
	errno = 0;
	if (mbcfdv_create_fifo(B.pd, (uint8_t *)al + 8, 128 + 1024, 0) || errno != EINVAL)
		vc_fail("misaligned FIFO: %s", strerror(errno));
	if (mbcfdv_create_fifo(B.pd, al, 128 + 1000, 0) || errno != EINVAL)
		vc_fail("size not a power of two: %s", strerror(errno));
	if (mbcfdv_create_fifo(B.pd, al, 128 + 32, 0) || errno != EINVAL)
		vc_fail("size below 64: %s", strerror(errno));
	if (mbcfdv_create_fifo(B.pd, al, 128 + 1024, 0x80) || errno != EINVAL)
		vc_fail("unknown flag: %s", strerror(errno));
	/* a plain MR still registers (no driver data) */
	mr = ibv_reg_mr(B.pd, al, 8192, IBV_ACCESS_LOCAL_WRITE);
	if (!mr || ibv_dereg_mr(mr))
		vc_fail("plain MR after the FIFO checks: %s", strerror(errno));
	free(al);
}

/*
 * REG_MR straight to the command fd with FIFO driver data of inlen bytes,
 * as a user who bypasses the provider would: 0 (the MR deregistered at
 * once) or the errno.
 */
static int raw_reg(void *addr, uint64_t len, uint32_t access,
		   const struct mbcf_reg_mr_cmd *c, uint32_t inlen)
{
	struct ib_uverbs_reg_mr_resp resp = { 0 };
	struct {
		struct ib_uverbs_cmd_hdr hdr;
		struct ib_uverbs_reg_mr cmd;
		uint8_t drv[sizeof(*c)];
	} req = {
		.hdr = { .command = IB_USER_VERBS_CMD_REG_MR,
			 .out_words = sizeof(resp) / 4 },
		.cmd = { .response = (uintptr_t)&resp, .start = (uintptr_t)addr,
			 .length = len, .hca_va = (uintptr_t)addr,
			 .pd_handle = B.pd->handle, .access_flags = access },
	};
	struct {
		struct ib_uverbs_cmd_hdr hdr;
		struct ib_uverbs_dereg_mr cmd;
	} dreq = { .hdr = { .command = IB_USER_VERBS_CMD_DEREG_MR,
			    .in_words = sizeof(dreq) / 4 } };
	size_t n = sizeof(req.hdr) + sizeof(req.cmd) + inlen;

	memcpy(req.drv, c, sizeof(*c));
	req.hdr.in_words = (uint16_t)(n / 4);
	if (write(B.ctx->cmd_fd, &req, n) != (ssize_t)n)
		return errno;
	dreq.cmd.mr_handle = resp.mr_handle;
	if (write(B.ctx->cmd_fd, &dreq, sizeof(dreq)) != (ssize_t)sizeof(dreq))
		vc_fail("raw DEREG_MR: %s", strerror(errno));
	return 0;
}

/* Fail the case unless raw_reg(ARGS...) answers @want (0 or an errno). */
#define REG_EXPECT(want, what, ...)					\
	do {								\
		int e_ = raw_reg(__VA_ARGS__);				\
		if (e_ != (want))					\
			vc_fail("%s: %s, expected %s", what, strerror(e_),	\
				strerror(want));			\
	} while (0)

/* The kernel's checks of a FIFO's registration, without the provider's. */
static void case_reg(void)
{
	uint8_t *m = aligned_alloc(4096, 8192);
	const struct mbcf_reg_mr_cmd ok = { MBCF_MR_FIFO, 0, 1024, 0 };
	struct mbcf_reg_mr_cmd c;
	const uint32_t lw = IBV_ACCESS_LOCAL_WRITE;

	REG_EXPECT(0, "valid FIFO", m, 128 + 1024, lw, &ok, sizeof(ok));
	REG_EXPECT(0, "plain MR (no driver data)", m, 8192, lw, &ok, 0);
	REG_EXPECT(EINVAL, "FIFO with REMOTE_WRITE", m, 128 + 1024,
		   lw | IBV_ACCESS_REMOTE_WRITE, &ok, sizeof(ok));
	REG_EXPECT(EINVAL, "FIFO with REMOTE_READ", m, 128 + 1024,
		   IBV_ACCESS_REMOTE_READ, &ok, sizeof(ok));
	REG_EXPECT(EINVAL, "FIFO without LOCAL_WRITE", m, 128 + 1024, 0, &ok,
		   sizeof(ok));
	REG_EXPECT(EINVAL, "length not 128 + size", m, 128 + 2048, lw, &ok,
		   sizeof(ok));
	REG_EXPECT(EINVAL, "address not 64-byte aligned", m + 8, 128 + 1024,
		   lw, &ok, sizeof(ok));
	REG_EXPECT(EINVAL, "driver data short", m, 128 + 1024, lw, &ok, 8);
	c = ok;
	c.fifo_size = 1000;
	REG_EXPECT(EINVAL, "size not a power of two", m, 128 + 1000, lw, &c,
		   sizeof(c));
	c = ok;
	c.fifo_size = 32;
	REG_EXPECT(EINVAL, "size 32", m, 128 + 32, lw, &c, sizeof(c));
	c = ok;
	c.flags = 0x3;
	REG_EXPECT(EINVAL, "unknown MR flag", m, 128 + 1024, lw, &c, sizeof(c));
	c = ok;
	c.fifo_flags = 0x8;
	REG_EXPECT(EINVAL, "unknown FIFO flag", m, 128 + 1024, lw, &c, sizeof(c));
	c = ok;
	c.fifo_eventfd = 1;
	REG_EXPECT(EINVAL, "eventfd field 1 without a signal flag", m,
		   128 + 1024, lw, &c, sizeof(c));
	c = ok;
	c.fifo_eventfd = -1;
	REG_EXPECT(0, "eventfd field -1 without a signal flag", m, 128 + 1024,
		   lw, &c, sizeof(c));
	c = ok;
	c.flags = 0;
	REG_EXPECT(EINVAL, "driver data without MBCF_MR_FIFO", m, 128 + 1024,
		   lw, &c, sizeof(c));
	free(m);
}

static void case_toobig(void)
{
	struct vp_gbuf src = vp_gbuf_new(A.pd, 4096, 0, IBV_ACCESS_LOCAL_WRITE);
	struct gfifo q;
	struct pair p;

	if (gfifo_new(&q, B.pd, 1024, 0)) {
		vc_fail("setup: %s", strerror(errno));
		return;
	}
	pair_new(&p, B.pd, 4);
	/* 8 + 504 = 512 = size/2 fits; 8 + 505 rounds to 520 > 512 */
	push(&p, q.f->key, src.mr->lkey, src.p, 504, 1);
	expect_wc(p.scq, IBV_WC_SUCCESS, "record of size/2");
	push(&p, q.f->key, src.mr->lkey, src.p, 505, 2);
	expect_wc(p.scq, IBV_WC_REM_INV_REQ_ERR, "record over size/2");
	pair_free(&p);
	gfifo_free(&q, "toobig");
	/* one frame at the veth's MTU 1500 carries 1472 bytes of a push */
	if (gfifo_new(&q, B.pd, 4096, 0)) {
		vc_fail("setup: %s", strerror(errno));
		return;
	}
	pair_new(&p, B.pd, 4);
	push(&p, q.f->key, src.mr->lkey, src.p, 1472, 3);
	expect_wc(p.scq, IBV_WC_SUCCESS, "push of one full frame");
	push(&p, q.f->key, src.mr->lkey, src.p, 1473, 4);
	expect_wc(p.scq, IBV_WC_LOC_LEN_ERR, "push over one frame");
	pair_free(&p);
	gfifo_free(&q, "toobig frame");
	vp_gbuf_free(&src);
}

static void case_fullerr(void)
{
	struct vp_gbuf src = vp_gbuf_new(A.pd, 4096, 0, IBV_ACCESS_LOCAL_WRITE);
	struct gfifo q;
	struct pair p;
	int i;

	if (gfifo_new(&q, B.pd, 256, MBCFDV_FIFO_FULL_ERROR)) {
		vc_fail("setup: %s", strerror(errno));
		return;
	}
	pair_new(&p, B.pd, 8);
	/* 4 records of 64 bytes fill 256; the fifth finds no room */
	for (i = 0; i < 4; i++) {
		push(&p, q.f->key, src.mr->lkey, src.p, 56, i);
		expect_wc(p.scq, IBV_WC_SUCCESS, "push into room");
	}
	push(&p, q.f->key, src.mr->lkey, src.p, 56, 9);
	expect_wc(p.scq, IBV_WC_REM_OP_ERR, "push into a full FULL_ERROR FIFO");
	pair_free(&p);
	gfifo_free(&q, "fullerr");
	vp_gbuf_free(&src);
}

/* Push once with the control block set as given: the completion's status. */
static int scribbled_push(struct gfifo *q, uint64_t tail, uint64_t head,
			  struct vp_gbuf *src, uint32_t len)
{
	struct pair p;
	int st;

	*ctl64(q, 0) = tail;
	*ctl64(q, 64) = head;
	pair_new(&p, B.pd, 4);
	push(&p, q->f->key, src->mr->lkey, src->p, len, 1);
	st = wait_wc(p.scq, 20, NULL);
	pair_free(&p);
	return st;
}

static void case_scribble(void)
{
	struct vp_gbuf src = vp_gbuf_new(A.pd, 4096, 0, IBV_ACCESS_LOCAL_WRITE);
	struct gfifo q;
	int st;
	uint64_t big = 0x7ffffffffffffc00ull;	/* a multiple of 8 and of 1024 */

	if (gfifo_new(&q, B.pd, 1024, 0)) {
		vc_fail("setup: %s", strerror(errno));
		return;
	}
	vp_fill_tag8(src.p, 4096, 3);
	st = scribbled_push(&q, 5, 0, &src, 40);
	if (st != IBV_WC_REM_OP_ERR)
		vc_fail("odd tail: %s, expected REM_OP_ERR", vp_wc_status_str(st));
	st = scribbled_push(&q, 0, 1ull << 40, &src, 40);
	if (st != IBV_WC_REM_OP_ERR)
		vc_fail("head after tail: %s, expected REM_OP_ERR", vp_wc_status_str(st));
	st = scribbled_push(&q, 16, 20, &src, 40);
	if (st != IBV_WC_REM_OP_ERR)
		vc_fail("odd head: %s, expected REM_OP_ERR", vp_wc_status_str(st));
	if (vp_diff_byte(q.g.p + 128, 1024, 0) >= 0)
		vc_fail("record area written after a malformed control block");
	/* consistent but huge: the record lands at tail mod size, inside */
	st = scribbled_push(&q, big + 1000, big + 1000, &src, 40);
	if (st != IBV_WC_SUCCESS)
		vc_fail("huge consistent tail: %s", vp_wc_status_str(st));
	else {
		uint8_t buf[64];
		uint32_t len = 0, word;

		/* 1000 mod 1024 = 1000: 48 bytes do not fit before the end,
		 * a SKIP of 24 there, the record at 0 */
		memcpy(&word, q.g.p + 128 + 1000, 4);
		if (word != (0x80000000u | 0x40000000u | 16))
			vc_fail("SKIP word at 1000: %#x", word);
		if (*ctl64(&q, 0) != big + 1000 + 24 + 48)
			vc_fail("tail %#llx", (unsigned long long)*ctl64(&q, 0));
		q.f->head = big + 1000;
		if (mbcfdv_fifo_pop(q.f, buf, sizeof(buf), &len, NULL) || len != 40 ||
		    memcmp(buf, src.p, 40))
			vc_fail("record after the wrap: len %u", len);
	}
	gfifo_free(&q, "scribble");
	vp_gbuf_free(&src);
}

static void case_destroy(void)
{
	struct vp_gbuf src = vp_gbuf_new(A.pd, 4096, 0, IBV_ACCESS_LOCAL_WRITE);
	struct gfifo q;
	struct pair p;
	int ok = 0, acc = 0, flush = 0, other = 0, posted = 0, st, i;
	uint32_t key;

	if (gfifo_new(&q, B.pd, 1 << 16, 0)) {
		vc_fail("setup: %s", strerror(errno));
		return;
	}
	pair_new(&p, B.pd, 256);	/* room for all 216 */
	/* pushes stream while the owner pops, then destroys mid-stream */
	for (i = 0; i < 200; i++)
		posted += !push(&p, q.f->key, src.mr->lkey, src.p, 100, i);
	/* destroy at once: pushes are on the wire or in the receive path on
	 * the other CPU (how many got in first is the scheduler's) */
	key = q.f->key;
	if (mbcfdv_destroy_fifo(q.f))
		vc_fail("destroy while pushed to: %s", strerror(errno));
	q.f = NULL;
	/* and the sender goes on pushing to the key */
	for (i = 0; i < 16; i++)
		posted += !push(&p, key, src.mr->lkey, src.p, 100, 100 + i);
	while ((st = wait_wc(p.scq, 5, NULL)) >= 0) {
		if (st == IBV_WC_SUCCESS)
			ok++;
		else if (st == IBV_WC_REM_ACCESS_ERR)
			acc++;
		else if (st == IBV_WC_WR_FLUSH_ERR)
			flush++;
		else
			other++;
	}
	if (acc != 1 || other || ok + acc + flush != posted || posted != 216)
		vc_fail("after destroy: %d SUCCESS, %d REM_ACCESS_ERR, %d FLUSH, %d other of %d posted",
			ok, acc, flush, other, posted);
	else
		vc_note("%d SUCCESS, then REM_ACCESS_ERR, %d flushed", ok, flush);
	pair_free(&p);
	gfifo_free(&q, "destroy");
	vp_gbuf_free(&src);
}

/* ---- midpush: destroy with pushes really in flight --------------------------- */

#define MP_SEND		4	/* senders: 2 on A, 2 on B (loopback) */
#define MP_LEN		56	/* payload: a record of 64 bytes */
#define MP_DEPTH	16	/* pushes outstanding per sender */
#define MP_SIZE		(1u << 20)	/* 16384 records: never full here */

struct mp_sender {
	struct pair p;
	struct vp_buf buf;		/* MP_DEPTH payload slots */
	uint32_t key, idx;
	pthread_t th;
	/* results, read by the owner after the join */
	uint32_t posted, done, ok, acc, flush, other, ok_after, bad_order;
	atomic_int finished;
};

static _Atomic double mp_t_destroy;	/* 0 until the owner calls destroy */
static atomic_int mp_quit;

static uint32_t mp_tag(uint32_t s, uint32_t seq)
{
	return 0x9e3779b9u * (s + 1) ^ seq * 2654435761u;
}

/* Payload of push seq: sender, seq, then the pattern of (sender, seq). */
static void mp_fill(uint8_t *p, uint32_t s, uint32_t seq)
{
	memcpy(p, &s, 4);
	memcpy(p + 4, &seq, 4);
	vp_fill_pat(p + 8, MP_LEN - 8, mp_tag(s, seq), 0);
}

/*
 * Push continuously until the first error; completions are in order
 * (RC): SUCCESS*, then exactly one REM_ACCESS_ERR, then WR_FLUSH_ERR.
 */
static void *mp_run(void *arg)
{
	struct mp_sender *m = arg;
	struct ibv_wc wc;
	bool err = false;

	while (!atomic_load(&mp_quit) && !(err && m->done == m->posted)) {
		while (ibv_poll_cq(m->p.scq, 1, &wc) == 1) {
			double t = vp_now(), td = atomic_load(&mp_t_destroy);

			if (wc.wr_id != m->done)
				m->bad_order++;
			m->done++;
			if (wc.status == IBV_WC_SUCCESS) {
				m->bad_order += err;
				m->ok++;
				m->ok_after += td != 0 && t >= td;
			} else if (wc.status == IBV_WC_REM_ACCESS_ERR) {
				m->bad_order += err;
				err = true;
				m->acc++;
			} else if (wc.status == IBV_WC_WR_FLUSH_ERR) {
				m->bad_order += !err;
				m->flush++;
			} else {
				m->bad_order += err;
				err = true;	/* stop posting: the QP failed */
				m->other++;
			}
		}
		while (!err && m->posted - m->done < MP_DEPTH) {
			uint8_t *slot = m->buf.p + (m->posted % MP_DEPTH) * 64;

			/* the slot's previous push completed (in order) */
			mp_fill(slot, m->idx, m->posted);
			if (push(&m->p, m->key, m->buf.mr->lkey, slot, MP_LEN, m->posted))
				break;
			m->posted++;
		}
		sched_yield();
	}
	atomic_store(&m->finished, 1);
	return NULL;
}

/*
 * Check the owner's memory after destroy: head 0 and wait 0, records
 * from 0 to tail each whole (READY, length, the receiving QP of its
 * sender, payload in sender order), zero after the tail.  Returns the
 * records found per sender in got[].
 */
static void mp_check_mem(const uint8_t *r, struct mp_sender *ms, uint32_t *got)
{
	uint64_t tail, head;
	uint32_t off, word, qpn, s, seq;

	memcpy(&tail, r, 8);
	memcpy(&head, r + 64, 8);
	if (head || *(const uint32_t *)(r + 8) || tail % 64 || tail > MP_SIZE) {
		vc_fail("control block: tail %llu head %llu wait %u",
			(unsigned long long)tail, (unsigned long long)head,
			*(const uint32_t *)(r + 8));
		return;
	}
	for (off = 0; off < tail; off += 64) {
		const uint8_t *rec = r + 128 + off;

		memcpy(&word, rec, 4);
		memcpy(&qpn, rec + 4, 4);
		memcpy(&s, rec + 8, 4);
		memcpy(&seq, rec + 12, 4);
		if (word != (0x80000000u | MP_LEN) || s >= MP_SEND ||
		    qpn != ms[s].p.r.qp->qp_num || seq != got[s] ||
		    vp_diff_pat(rec + 16, MP_LEN - 8, mp_tag(s, seq), 0) >= 0 ||
		    vp_diff_byte(rec + 8 + MP_LEN, 64 - 8 - MP_LEN, 0) >= 0) {
			vc_fail("record at %u: word %#x qpn %u sender %u seq %u (expected %u)",
				off, word, qpn, s, seq, s < MP_SEND ? got[s] : 0);
			return;
		}
		got[s]++;
	}
	if (vp_diff_byte(r + 128 + tail, MP_SIZE - tail, 0) >= 0)
		vc_fail("bytes after the tail %llu written", (unsigned long long)tail);
}

static void case_midpush(void)
{
	struct mp_sender ms[MP_SEND];
	uint32_t got[MP_SEND] = { 0 }, s, ok = 0, ok_after = 0, acc = 0;
	uint64_t tail0, tail1;
	struct gfifo q;
	uint8_t *snap;
	double t_end, t_dest;
	int rc;

	if (gfifo_new(&q, B.pd, MP_SIZE, 0) || !(snap = malloc(128 + MP_SIZE))) {
		vc_fail("setup: %s", strerror(errno));
		return;
	}
	atomic_store(&mp_t_destroy, 0);
	atomic_store(&mp_quit, 0);
	for (s = 0; s < MP_SEND; s++) {
		memset(&ms[s], 0, sizeof(ms[s]));
		ms[s].idx = s;
		ms[s].key = q.f->key;
		pair_new_on(&ms[s].p, s < MP_SEND / 2 ? &A : &B, B.pd, MP_DEPTH);
		vp_buf_alloc(&ms[s].buf, MP_DEPTH * 64);
		if (vp_buf_reg(&ms[s].buf, ms[s].p.s.dev, IBV_ACCESS_LOCAL_WRITE))
			vp_die_errno("reg");
	}
	for (s = 0; s < MP_SEND; s++)
		if (pthread_create(&ms[s].th, NULL, mp_run, &ms[s]))
			vp_die("setup: pthread_create");
	/* destroy once the pushes stream: 400 records in */
	t_end = vp_now() + 60 * vp_time_scale();
	while (*(volatile uint64_t *)ctl64(&q, 0) < 400 * 64 && vp_now() < t_end)
		vp_sleep_us(1000);
	tail0 = __atomic_load_n(ctl64(&q, 0), __ATOMIC_ACQUIRE);
	t_dest = vp_now();
	atomic_store(&mp_t_destroy, t_dest);
	rc = mbcfdv_destroy_fifo(q.f);
	tail1 = __atomic_load_n(ctl64(&q, 0), __ATOMIC_ACQUIRE);
	if (rc)
		vc_fail("destroy while pushed to: %d (%s)", rc, strerror(errno));
	q.f = NULL;
	/* nothing may land after destroy returned: the senders go on */
	memcpy(snap, q.g.p, 128 + MP_SIZE);
	vp_sleep_us((long)(1000000 * vp_time_scale()));
	if (memcmp(snap, q.g.p, 128 + MP_SIZE))
		vc_fail("FIFO memory changed after destroy returned");
	t_end = vp_now() + 60 * vp_time_scale();
	for (s = 0; s < MP_SEND; s++)
		while (vp_now() < t_end && !atomic_load(&ms[s].finished))
			vp_sleep_us(10000);
	atomic_store(&mp_quit, 1);
	for (s = 0; s < MP_SEND; s++)
		pthread_join(ms[s].th, NULL);
	mp_check_mem(snap, ms, got);
	for (s = 0; s < MP_SEND; s++) {
		struct mp_sender *m = &ms[s];

		/* each sender: SUCCESS exactly for its records in memory,
		 * one REM_ACCESS_ERR, the rest flushed, nothing else */
		if (m->acc != 1 || m->other || m->bad_order || m->done != m->posted ||
		    m->ok + m->acc + m->flush != m->posted || m->ok != got[s])
			vc_fail("sender %u (%s): %u posted, %u done: %u SUCCESS (%u records), %u REM_ACCESS_ERR, %u FLUSH, %u other, %u out of order",
				s, m->p.s.dev->name, m->posted, m->done, m->ok, got[s],
				m->acc, m->flush, m->other, m->bad_order);
		ok += m->ok;
		ok_after += m->ok_after;
		acc += m->acc;
	}
	/* the overlap is real: successes polled after destroy was called
	 * and refusals in the same run */
	if (!ok_after || acc != MP_SEND)
		vc_fail("no overlap: %u SUCCESS after destroy called, %u REM_ACCESS_ERR",
			ok_after, acc);
	vc_note("%u records, %u SUCCESS (%u polled after destroy called), %llu appended while destroy ran, %u REM_ACCESS_ERR",
		(unsigned)(tail1 / 64), ok, ok_after,
		(unsigned long long)((tail1 - tail0) / 64), acc);
	for (s = 0; s < MP_SEND; s++) {
		pair_free(&ms[s].p);
		vp_buf_free(&ms[s].buf);
	}
	free(snap);
	gfifo_free(&q, "midpush");
}

/* ---- the signal (docs/protocol.md 16.5) ------------------------------------ */

/* The eventfd's count: read once (0 if none: EAGAIN); -1 on another error. */
static int64_t ev_read(int fd)
{
	uint64_t v = 0;

	if (read(fd, &v, sizeof(v)) == (ssize_t)sizeof(v))
		return (int64_t)v;
	return errno == EAGAIN ? 0 : -1;
}

static void expect_count(int fd, int64_t want, const char *what)
{
	int64_t got = ev_read(fd);

	if (got != want)
		vc_fail("%s: eventfd read %lld, expected %lld", what,
			(long long)got, (long long)want);
	else
		vc_note("%s: eventfd %lld", what, (long long)got);
}

/* Record seq of the signal cases: 16 + seq % 50 bytes, the seq first. */
static uint32_t sig_len(uint32_t seq)
{
	return 16 + seq % 50;
}

static void sig_push(struct pair *p, struct gfifo *q, struct vp_gbuf *src,
		     uint32_t seq)
{
	uint8_t *r = src->p + (seq % 32) * 128;

	vp_fill_pat(r, sig_len(seq), seq * 2654435761u, 0);
	memcpy(r, &seq, sizeof(seq));
	if (push(p, q->f->key, src->mr->lkey, r, sig_len(seq), seq))
		vc_fail("post push %u", seq);
	else if (wait_wc(p->scq, 20, NULL) != IBV_WC_SUCCESS)
		vc_fail("push %u did not complete", seq);
}

/* A record as sig_push made it: 0, or a failure reported. */
static int sig_check(const void *rec, uint32_t len, uint32_t want_seq)
{
	uint8_t tmp[128];
	uint32_t seq;

	memcpy(&seq, rec, sizeof(seq));
	if (seq != want_seq || len != sig_len(seq)) {
		vc_fail("record seq %u len %u, expected seq %u len %u", seq, len,
			want_seq, sig_len(want_seq));
		return -1;
	}
	vp_fill_pat(tmp, len, seq * 2654435761u, 0);
	memcpy(tmp, &seq, sizeof(seq));
	if (memcmp(tmp, rec, len)) {
		vc_fail("record %u: payload differs", seq);
		return -1;
	}
	return 0;
}

static void sig_pop(struct gfifo *q, uint32_t seq)
{
	uint8_t buf[128];
	uint32_t len = 0;
	int err = mbcfdv_fifo_pop(q->f, buf, sizeof(buf), &len, NULL);

	if (err)
		vc_fail("pop %u: %s", seq, strerror(err));
	else
		sig_check(buf, len, seq);
}

struct poller {
	int fd, ret, revents;
	atomic_int done;
	double secs;
};

static void *poller_run(void *arg)
{
	struct poller *w = arg;
	struct pollfd pfd = { .fd = w->fd, .events = POLLIN };

	w->ret = poll(&pfd, 1, (int)(w->secs * 1000));
	w->revents = pfd.revents;
	atomic_store(&w->done, 1);
	return NULL;
}

#define SIG_N	10

static void case_signal(void)
{
	struct vp_gbuf src = vp_gbuf_new(A.pd, 32 * 128, 0, IBV_ACCESS_LOCAL_WRITE);
	struct poller w = { .secs = 20 * vp_time_scale() };
	struct gfifo q;
	struct pair p;
	pthread_t th;
	uint32_t i, seq = 0;
	int fd;

	if (gfifo_new(&q, B.pd, 4096, MBCFDV_FIFO_SIGNAL)) {
		vc_fail("mbcfdv_create_fifo(SIGNAL): %s", strerror(errno));
		return;
	}
	fd = mbcfdv_fifo_event_fd(q.f);
	if (fd < 0 || fd != q.f->event_fd) {
		vc_fail("event_fd %d (field %d): %s", fd, q.f->event_fd,
			strerror(errno));
		gfifo_free(&q, "signal");
		return;
	}
	if ((fcntl(fd, F_GETFL) & O_NONBLOCK) == 0 ||
	    (fcntl(fd, F_GETFD) & FD_CLOEXEC) == 0)
		vc_fail("eventfd flags %#x fd flags %#x: not NONBLOCK|CLOEXEC",
			fcntl(fd, F_GETFL), fcntl(fd, F_GETFD));
	expect_count(fd, 0, "new FIFO");
	pair_new(&p, B.pd, 32);
	for (i = 0; i < SIG_N; i++)
		sig_push(&p, &q, &src, seq++);
	expect_count(fd, SIG_N, "10 pushes");
	expect_count(fd, 0, "read again");
	for (i = 0; i < SIG_N; i++)
		sig_pop(&q, i);

	/* a thread asleep in poll() wakes at the next push, not before */
	w.fd = fd;
	if (pthread_create(&th, NULL, poller_run, &w))
		vp_die("pthread_create");
	vp_sleep_us((long)(300000 * vp_time_scale()));
	if (atomic_load(&w.done))
		vc_fail("poll returned %d (revents %#x) before any push", w.ret,
			w.revents);
	sig_push(&p, &q, &src, seq++);
	pthread_join(th, NULL);
	if (w.ret != 1 || w.revents != POLLIN)
		vc_fail("poll after a push: %d, revents %#x (expected 1, POLLIN)",
			w.ret, w.revents);
	else
		vc_note("poll woke: POLLIN");
	expect_count(fd, 1, "the push that woke poll");
	sig_pop(&q, SIG_N);

	/* destroyed with a count nobody read and records nobody popped */
	sig_push(&p, &q, &src, seq++);
	sig_push(&p, &q, &src, seq++);
	pair_free(&p);
	gfifo_free(&q, "signal");
	if (fcntl(fd, F_GETFD) != -1 || errno != EBADF)
		vc_fail("eventfd %d still open after destroy", fd);
	vp_gbuf_free(&src);
}

struct disp {
	uint32_t next, calls, want_qpn;
	int bad;
};

static void disp_handler(void *ctx, const void *rec, uint32_t len, uint32_t qpn)
{
	struct disp *d = ctx;

	d->calls++;
	if (qpn != d->want_qpn) {
		vc_fail("handler: qpn %u, expected %u", qpn, d->want_qpn);
		d->bad++;
	}
	if (sig_check(rec, len, d->next))
		d->bad++;
	d->next++;
}

static void case_sigempty(void)
{
	struct vp_gbuf src = vp_gbuf_new(A.pd, 32 * 128, 0, IBV_ACCESS_LOCAL_WRITE);
	struct disp d = { 0 };
	struct pollfd pfd;
	struct gfifo q;
	struct pair p;
	uint8_t buf[128];
	uint32_t i, seq = 0;
	int fd, n;

	if (gfifo_new(&q, B.pd, 4096, MBCFDV_FIFO_SIGNAL_EMPTY)) {
		vc_fail("mbcfdv_create_fifo(SIGNAL_EMPTY): %s", strerror(errno));
		return;
	}
	fd = mbcfdv_fifo_event_fd(q.f);
	if (fd < 0) {
		vc_fail("event_fd: %s", strerror(errno));
		gfifo_free(&q, "sigempty");
		return;
	}
	pair_new(&p, B.pd, 32);
	d.want_qpn = p.r.qp->qp_num;
	for (i = 0; i < 5; i++)
		sig_push(&p, &q, &src, seq++);
	expect_count(fd, 1, "5 pushes into an empty FIFO, none popped");
	sig_push(&p, &q, &src, seq++);
	expect_count(fd, 0, "a push behind unpopped records");
	for (i = 0; i < 6; i++)
		sig_pop(&q, i);
	sig_push(&p, &q, &src, seq++);
	expect_count(fd, 1, "a push into the emptied FIFO");
	sig_push(&p, &q, &src, seq++);
	sig_push(&p, &q, &src, seq++);
	expect_count(fd, 0, "2 pushes behind it");

	/* dispatch: every record once, in order; the count cleared */
	sig_push(&p, &q, &src, seq++);	/* queue not empty: no event */
	if (eventfd_write(fd, 2))	/* stand in for a pending count */
		vc_fail("eventfd_write: %s", strerror(errno));
	d.next = 6;
	n = mbcfdv_fifo_dispatch(q.f, disp_handler, &d, buf, sizeof(buf), 64);
	if (n != 4 || d.calls != 4 || d.next != seq || d.bad)
		vc_fail("dispatch: %d, %u calls, next %u (expected 4, 4, %u)",
			n, d.calls, d.next, seq);
	expect_count(fd, 0, "after dispatch");
	n = mbcfdv_fifo_dispatch(q.f, disp_handler, &d, buf, sizeof(buf), 64);
	if (n != 0 || d.calls != 4)
		vc_fail("dispatch of an empty FIFO: %d, %u calls", n, d.calls);

	/* stopped at max with records left: readable again */
	for (i = 0; i < 5; i++)
		sig_push(&p, &q, &src, seq++);
	pfd = (struct pollfd){ .fd = fd, .events = POLLIN };
	if (poll(&pfd, 1, 0) != 1 || pfd.revents != POLLIN)
		vc_fail("5 pushes into the empty FIFO: not readable");
	n = mbcfdv_fifo_dispatch(q.f, disp_handler, &d, buf, sizeof(buf), 3);
	if (n != 3 || d.calls != 7 || d.bad)
		vc_fail("dispatch max 3: %d, %u calls", n, d.calls);
	pfd.revents = 0;
	if (poll(&pfd, 1, 0) != 1 || pfd.revents != POLLIN)
		vc_fail("dispatch stopped at max: eventfd not readable again");
	n = mbcfdv_fifo_dispatch(q.f, disp_handler, &d, buf, sizeof(buf), 3);
	if (n != 2 || d.calls != 9 || d.next != seq || d.bad)
		vc_fail("dispatch of the rest: %d, %u calls, next %u/%u", n,
			d.calls, d.next, seq);
	expect_count(fd, 0, "all dispatched");
	/* too small a buffer: the record stays, -EMSGSIZE */
	sig_push(&p, &q, &src, seq++);
	n = mbcfdv_fifo_dispatch(q.f, disp_handler, &d, buf, 8, 4);
	if (n != -EMSGSIZE || d.calls != 9)
		vc_fail("dispatch into 8 bytes: %d (expected %d), %u calls", n,
			-EMSGSIZE, d.calls);
	n = mbcfdv_fifo_dispatch(q.f, disp_handler, &d, buf, sizeof(buf), 4);
	if (n != 1 || d.calls != 10 || d.next != seq || d.bad)
		vc_fail("dispatch after EMSGSIZE: %d, %u calls", n, d.calls);
	if (mbcfdv_fifo_dispatch(q.f, NULL, &d, buf, sizeof(buf), 4) != -EINVAL ||
	    mbcfdv_fifo_dispatch(q.f, disp_handler, &d, buf, sizeof(buf), 0) != -EINVAL)
		vc_fail("dispatch without a handler or with max 0: not -EINVAL");
	vc_note("dispatch: %u records in order", d.calls);
	pair_free(&p);
	gfifo_free(&q, "sigempty");
	vp_gbuf_free(&src);
}

static void case_sigflags(void)
{
	uint8_t *m = aligned_alloc(4096, 8192);
	const struct mbcf_reg_mr_cmd ok = { MBCF_MR_FIFO, 0, 1024, 0 };
	const uint32_t lw = IBV_ACCESS_LOCAL_WRITE;
	struct mbcf_reg_mr_cmd c;
	struct mbcfdv_fifo *f;
	int efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	int nul = open("/dev/null", O_RDONLY | O_CLOEXEC);
	int e;

	if (efd < 0 || nul < 0)
		vp_die_errno("eventfd / /dev/null");
	errno = 0;
	f = mbcfdv_create_fifo(B.pd, m, 128 + 1024,
		      MBCFDV_FIFO_SIGNAL | MBCFDV_FIFO_SIGNAL_EMPTY);
	if (f || errno != EINVAL)
		vc_fail("SIGNAL|SIGNAL_EMPTY: %s, expected EINVAL",
			f ? "created" : strerror(errno));
	errno = 0;
	f = mbcfdv_create_fifo(B.pd, m, 128 + 1024, MBCFDV_FIFO_SIGNAL | 0x8);
	if (f || errno != EINVAL)
		vc_fail("unknown flag 0x8: %s, expected EINVAL",
			f ? "created" : strerror(errno));
	f = mbcfdv_create_fifo(B.pd, m, 128 + 1024, 0);
	if (!f) {
		vc_fail("FIFO without a signal: %s", strerror(errno));
	} else {
		errno = 0;
		e = mbcfdv_fifo_event_fd(f);
		if (e != -1 || errno != EINVAL)
			vc_fail("event_fd without a signal: %d, %s (expected -1, EINVAL)",
				e, strerror(errno));
		if (mbcfdv_fifo_dispatch(f, disp_handler, NULL, NULL, 0, 4) != 0)
			vc_fail("dispatch of an empty FIFO without a signal");
		if (mbcfdv_destroy_fifo(f))
			vc_fail("destroy: %s", strerror(errno));
	}
	f = mbcfdv_create_fifo(B.pd, m, 128 + 1024,
		      MBCFDV_FIFO_FULL_ERROR | MBCFDV_FIFO_SIGNAL_EMPTY);
	if (!f || mbcfdv_fifo_event_fd(f) < 0)
		vc_fail("FULL_ERROR|SIGNAL_EMPTY: %s", strerror(errno));
	else if (mbcfdv_destroy_fifo(f))
		vc_fail("destroy: %s", strerror(errno));

	/* the old layout (an older provider): field 0, no flag, no signal */
	REG_EXPECT(0, "no signal, field 0", m, 128 + 1024, lw, &ok, sizeof(ok));
	c = ok;
	c.fifo_flags = MBCFDV_FIFO_SIGNAL;
	c.fifo_eventfd = efd;
	REG_EXPECT(0, "SIGNAL with an eventfd", m, 128 + 1024, lw, &c, sizeof(c));
	c.fifo_flags = MBCFDV_FIFO_SIGNAL_EMPTY;
	REG_EXPECT(0, "SIGNAL_EMPTY with an eventfd", m, 128 + 1024, lw, &c,
		   sizeof(c));
	c.fifo_flags = MBCFDV_FIFO_SIGNAL | MBCFDV_FIFO_SIGNAL_EMPTY;
	REG_EXPECT(EINVAL, "both signal flags", m, 128 + 1024, lw, &c, sizeof(c));
	c.fifo_flags = MBCFDV_FIFO_SIGNAL | 0x8;
	REG_EXPECT(EINVAL, "unknown flag with SIGNAL", m, 128 + 1024, lw, &c,
		   sizeof(c));
	c.fifo_flags = MBCFDV_FIFO_SIGNAL;
	c.fifo_eventfd = -1;
	REG_EXPECT(EBADF, "SIGNAL, eventfd -1", m, 128 + 1024, lw, &c, sizeof(c));
	c.fifo_eventfd = 1000;	/* not open */
	REG_EXPECT(EBADF, "SIGNAL, fd not open", m, 128 + 1024, lw, &c, sizeof(c));
	c.fifo_eventfd = nul;
	REG_EXPECT(EINVAL, "SIGNAL, fd not an eventfd", m, 128 + 1024, lw, &c,
		   sizeof(c));
	c.fifo_flags = 0;
	c.fifo_eventfd = efd;
	REG_EXPECT(EINVAL, "an eventfd without a signal flag", m, 128 + 1024, lw,
		   &c, sizeof(c));
#undef REG_EXPECT
	close(nul);
	close(efd);
	free(m);
}

static const struct {
	const char *name, *what;
	void (*fn)(void);
} cases[] = {
	{ "order", "3 senders x 150 records, one 4 KiB FIFO: once each, in order, STOP/GO", case_order },
	{ "badkey", "unknown key, plain MR rkey, other PD: REM_ACCESS_ERR", case_badkey },
	{ "rdma", "FIFO key for WRITE/READ/lkey refused; creation checks", case_rdma },
	{ "reg", "the kernel's checks of a FIFO registration (raw REG_MR)", case_reg },
	{ "toobig", "record over size/2: REM_INV_REQ_ERR; over a frame: LOC_LEN_ERR", case_toobig },
	{ "fullerr", "FULL_ERROR FIFO full: REM_OP_ERR", case_fullerr },
	{ "scribble", "garbage tail/head: REM_OP_ERR, writes inside the area", case_scribble },
	{ "destroy", "FIFO destroyed while pushed to", case_destroy },
	{ "midpush", "destroy with 4 senders (both devices) pushing: whole records, nothing after", case_midpush },
	{ "signal", "SIGNAL: N pushes read N from the eventfd, poll() wakes", case_signal },
	{ "sigempty", "SIGNAL_EMPTY: one event per empty queue; dispatch", case_sigempty },
	{ "sigflags", "signal flags and eventfd checked (provider, kernel)", case_sigflags },
};

int main(int argc, char **argv)
{
	int opt, failed = 0, i;
	size_t k;

	setvbuf(stdout, NULL, _IOLBF, 0);
	rng = (uint64_t)time(NULL);
	while ((opt = getopt(argc, argv, "a:b:s:")) != -1) {
		switch (opt) {
		case 'a': dev_a = optarg; break;
		case 'b': dev_b = optarg; break;
		case 's': rng = strtoull(optarg, NULL, 0); break;
		default:
			fprintf(stderr, "usage: %s [-a DEV] [-b DEV] [-s SEED] [CASE...]\n",
				argv[0]);
			return 2;
		}
	}
	printf("fifo_test [%s-%s]: seed %llu\n", dev_a, dev_b,
	       (unsigned long long)rng);
	if (vp_dev_open(&A, dev_a) || vp_dev_open(&B, dev_b))
		vp_die("setup: open %s/%s: %s", dev_a, dev_b, strerror(errno));
	for (k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
		bool run = optind >= argc;
		double t0;

		for (i = optind; i < argc; i++)
			run |= !strcmp(argv[i], cases[k].name);
		if (!run)
			continue;
		vc_start();
		t0 = vp_now();
		cases[k].fn();
		failed += vc_end(cases[k].name, dev_a, dev_b, cases[k].what, t0);
	}
	vp_dev_close(&A);
	vp_dev_close(&B);
	return failed ? 1 : 0;
}
