// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Producers racing the kernel's consumer, run in the
 * guest by tests/vm/race.sh as an unprivileged user.
 *
 *   mbcf_ring_race [-a DEV] [-b DEV] [-t SECONDS] CASE...
 *
 * Cases, each on a fresh QP A on device -a (default mbcf1) with its peer B
 * on device -b (default mbcf0):
 *   rc_sq, uc_sq, ud_sq  a thread posts unsignaled 64-byte writes (RC, UC)
 *       or datagrams (UD) through the provider as fast as the 256-entry
 *       send ring takes them, for SECONDS, while this thread rings the send
 *       doorbell without pause.  A datagram frees its slot as the kernel
 *       takes it, so for UD the producer can refill the ring while the
 *       kernel is still pulling.  Asserted: the most requests one call took
 *       off the ring (`rdma -dd res show qp`, sq_pull_max) lies in
 *       [1, 256], and for UD in [1, 64] (a transmit burst); a last signaled
 *       request completes with IBV_WC_SUCCESS and, for RC, B's buffer holds
 *       its exact bytes; A is still in RTS.
 *   rq_flip, srq_flip  16 receives posted, then B streams SENDs to A while
 *       a thread flips the producer index of A's receive ring (or its
 *       SRQ's) between its last two values: an index that goes back.
 *       Asserted: the case ends (the kernel's claim reads the index at most
 *       twice per frame), A is in RTS or, once the kernel saw the index go
 *       back, in ERR with exactly one IBV_EVENT_QP_FATAL (and for the SRQ
 *       one IBV_EVENT_SRQ_ERR and one IBV_EVENT_QP_LAST_WQE_REACHED).
 * Each case prints "PASS case: ..." or "FAIL case: ...".  The kernel log is
 * scanned by the rig.
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <infiniband/verbs.h>
#include <rdma/ib_user_verbs.h>

#include "mbcf.h"	/* the provider's view of the rings */
#include "vmprog.h"

#define RING	256	/* send ring entries (max_send_wr, a power of two) */
#define BURST	64	/* MBCF_QP_TX_BURST */
#define MSG	64

static const char *dev_a = "mbcf1", *dev_b = "mbcf0";
static double secs = 5;
static struct vp_dev DA, DB;

struct side {
	struct vp_dev *d;
	struct ibv_cq *cq;
	struct ibv_srq *srq;
	struct ibv_qp *qp;
	struct vp_buf buf;
	enum ibv_qp_type type;
};

static int modify(struct side *s, struct ibv_qp_attr *a, int mask)
{
	int ret = ibv_modify_qp(s->qp, a, mask);

	if (ret)
		vp_die("ibv_modify_qp (%d): %s", a->qp_state, strerror(ret));
	return 0;
}

static void side_make(struct side *s, struct vp_dev *d, enum ibv_qp_type t,
		      bool srq)
{
	struct ibv_qp_init_attr ia = {
		.qp_type = t,
		.cap = { .max_send_wr = RING, .max_recv_wr = 16,
			 .max_send_sge = 1, .max_recv_sge = 1,
			 .max_inline_data = MSG },
	};

	memset(s, 0, sizeof(*s));
	s->d = d;
	s->type = t;
	s->cq = ibv_create_cq(d->ctx, 4096, NULL, NULL, 0);
	if (!s->cq)
		vp_die_errno("ibv_create_cq");
	if (srq) {
		struct ibv_srq_init_attr sa = {
			.attr = { .max_wr = 16, .max_sge = 1 },
		};

		s->srq = ibv_create_srq(d->pd, &sa);
		if (!s->srq)
			vp_die_errno("ibv_create_srq");
		ia.srq = s->srq;
	}
	ia.send_cq = ia.recv_cq = s->cq;
	s->qp = ibv_create_qp(d->pd, &ia);
	if (!s->qp)
		vp_die_errno("ibv_create_qp");
	vp_buf_alloc(&s->buf, 1 << 16);
	if (vp_buf_reg(&s->buf, d, VP_ACCESS_ALL))
		vp_die_errno("ibv_reg_mr");
}

static void side_free(struct side *s)
{
	if (ibv_destroy_qp(s->qp) || (s->srq && ibv_destroy_srq(s->srq)) ||
	    ibv_destroy_cq(s->cq) || vp_buf_free(&s->buf))
		vp_die("teardown failed");
}

/* RESET -> RTS towards @peer; UD needs no peer, Q_Key 0x11111111. */
static void side_connect(struct side *s, const struct side *peer)
{
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_INIT, .port_num = 1, .qkey = 0x11111111,
		.qp_access_flags = IBV_ACCESS_REMOTE_WRITE,
	};
	int mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT;

	modify(s, &a, mask | (s->type == IBV_QPT_UD ? IBV_QP_QKEY :
					       IBV_QP_ACCESS_FLAGS));
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	mask = IBV_QP_STATE;
	if (s->type != IBV_QPT_UD) {
		a.path_mtu = IBV_MTU_1024;
		a.dest_qp_num = peer->qp->qp_num;
		a.ah_attr = (struct ibv_ah_attr){
			.is_global = 1, .port_num = 1,
			.grh = { .dgid = peer->d->gid, .hop_limit = 1 },
		};
		mask |= IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
			IBV_QP_RQ_PSN;
		if (s->type == IBV_QPT_RC) {
			a.max_dest_rd_atomic = 1;
			a.min_rnr_timer = 1;
			mask |= IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
		}
	}
	modify(s, &a, mask);
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	mask = IBV_QP_STATE | IBV_QP_SQ_PSN;
	if (s->type == IBV_QPT_RC) {
		a.timeout = 14;
		a.retry_cnt = 7;
		a.rnr_retry = 7;
		a.max_rd_atomic = 1;
		mask |= IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
			IBV_QP_MAX_QP_RD_ATOMIC;
	}
	modify(s, &a, mask);
}

/* The send doorbell exactly as the provider rings it. */
static int doorbell(struct ibv_qp *qp)
{
	return vp_doorbell(qp->context, qp->handle, IB_USER_VERBS_CMD_POST_SEND);
}

/* sq_pull_max of QP @qpn from `rdma -dd res show qp`, or -1. */
static long pull_max(const char *dev, uint32_t qpn)
{
	char cmd[128], line[4096];
	long v = -1;
	FILE *p;

	snprintf(cmd, sizeof(cmd), "rdma -dd res show qp link %s/1 lqpn %u",
		 dev, qpn);
	p = popen(cmd, "r");
	if (!p)
		return -1;
	while (fgets(line, sizeof(line), p)) {
		char *at = strstr(line, "sq_pull_max ");

		if (at)
			v = strtol(at + strlen("sq_pull_max "), NULL, 10);
	}
	pclose(p);
	return v;
}

/* ---- the send ring: a producer refilling it while the kernel pulls ------- */

struct racer {
	pthread_t t;
	struct side *a, *b;
	struct ibv_ah *ah;
	atomic_bool stop;
	unsigned long posted, full;
	int err;
};

static void sq_wr(struct racer *r, struct ibv_send_wr *wr, struct ibv_sge *sge,
		  uint64_t id)
{
	*sge = (struct ibv_sge){ .addr = (uintptr_t)r->a->buf.p + (id % 64) * MSG,
				 .length = MSG, .lkey = r->a->buf.mr->lkey };
	*wr = (struct ibv_send_wr){ .wr_id = id, .sg_list = sge, .num_sge = 1,
				    .send_flags = IBV_SEND_INLINE };
	if (r->a->type == IBV_QPT_UD) {
		wr->opcode = IBV_WR_SEND;
		wr->wr.ud.ah = r->ah;
		wr->wr.ud.remote_qpn = r->b->qp->qp_num;
		wr->wr.ud.remote_qkey = 0x11111111;
	} else {
		wr->opcode = IBV_WR_RDMA_WRITE;
		wr->wr.rdma.remote_addr = (uintptr_t)r->b->buf.p + (id % 64) * MSG;
		wr->wr.rdma.rkey = r->b->buf.mr->rkey;
	}
}

static void *sq_racer(void *arg)
{
	struct racer *r = arg;
	struct ibv_send_wr wr, *bad;
	struct ibv_sge sge;
	int ret;

	while (!atomic_load(&r->stop)) {
		sq_wr(r, &wr, &sge, r->posted);
		ret = ibv_post_send(r->a->qp, &wr, &bad);
		if (ret == ENOMEM) {
			r->full++;	/* the kernel has not released a slot yet */
			continue;
		}
		if (ret) {
			r->err = ret;
			break;
		}
		r->posted++;
	}
	return NULL;
}

static bool wait_wc(struct ibv_cq *cq, struct ibv_wc *wc, double timeout)
{
	double end = vp_now() + timeout * vp_time_scale();

	while (vp_now() < end) {
		int n = ibv_poll_cq(cq, 1, wc);

		if (n)
			return n == 1;
		vp_sleep_us(100);
	}
	return false;
}

static void case_sq(const char *name, enum ibv_qp_type t)
{
	struct side a, b;
	struct racer r = { .a = &a, .b = &b };
	struct ibv_send_wr wr, *bad;
	struct ibv_sge sge;
	struct ibv_wc wc;
	unsigned long bells = 0;
	double end, t0 = vp_now();
	long max, bound = t == IBV_QPT_UD ? BURST : RING;

	vc_start();
	side_make(&a, &DA, t, false);
	side_make(&b, &DB, t, false);
	side_connect(&a, &b);
	side_connect(&b, &a);
	if (t == IBV_QPT_UD) {
		struct ibv_ah_attr ah = {
			.is_global = 1, .port_num = 1,
			.grh = { .dgid = DB.gid, .hop_limit = 1 },
		};

		r.ah = ibv_create_ah(DA.pd, &ah);
		if (!r.ah)
			vp_die_errno("ibv_create_ah");
	}
	vp_fill_pat(a.buf.p, a.buf.len, 0x5ace, 0);
	if (pthread_create(&r.t, NULL, sq_racer, &r))
		vp_die_errno("pthread_create");
	end = vp_now() + secs;
	while (vp_now() < end) {
		int err = doorbell(a.qp);

		if (err) {
			vc_fail("doorbell: %s", strerror(err));
			break;
		}
		bells++;
	}
	atomic_store(&r.stop, true);
	pthread_join(r.t, NULL);
	if (r.err)
		vc_fail("post_send: %s", strerror(r.err));

	/* the last request, signaled: everything before it was taken */
	sq_wr(&r, &wr, &sge, 0xfeed);
	wr.send_flags |= IBV_SEND_SIGNALED;
	while ((errno = ibv_post_send(a.qp, &wr, &bad)) == ENOMEM)
		vp_sleep_us(100);
	if (errno)
		vc_fail("last post_send: %s", strerror(errno));
	else if (!wait_wc(a.cq, &wc, 30))
		vc_fail("no completion of the last request");
	else if (wc.wr_id != 0xfeed || wc.status != IBV_WC_SUCCESS)
		vc_fail("last completion: wr_id %#llx status %s",
			(unsigned long long)wc.wr_id, vp_wc_status_str(wc.status));
	if (t == IBV_QPT_RC && !vc_fails() &&
	    memcmp(b.buf.p + (0xfeed % 64) * MSG, a.buf.p + (0xfeed % 64) * MSG,
		   MSG))
		vc_fail("B's buffer does not hold the last write");
	vc_expect_qp_state(a.qp, "A", IBV_QPS_RTS, name);

	max = pull_max(dev_a, a.qp->qp_num);
	if (max < 1 || max > bound)
		vc_fail("sq_pull_max %ld, not in [1, %ld]", max, bound);
	vc_note("%lu requests, %lu doorbells, ring full %lu times, sq_pull_max %ld (bound %ld)",
		r.posted + 1, bells, r.full, max, bound);
	if (r.ah)
		ibv_destroy_ah(r.ah);
	side_free(&a);
	side_free(&b);
	vc_end(name, dev_a, dev_b, "one call took at most a bound's worth", t0);
}

/* ---- a receive ring whose producer index goes back and forth ------------- */

struct flipper {
	pthread_t t;
	uint32_t *prod;
	uint32_t base;
	atomic_bool stop;
	unsigned long flips;
};

static void *flip_thread(void *arg)
{
	struct flipper *f = arg;

	while (!atomic_load(&f->stop)) {
		__atomic_store_n(f->prod, f->base, __ATOMIC_RELEASE);
		__atomic_store_n(f->prod, f->base + 1, __ATOMIC_RELEASE);
		f->flips++;
	}
	return NULL;
}

/* @n receives of MSG bytes, through the provider: valid ring entries. */
static void post_recvs(struct side *s, int n)
{
	struct ibv_sge sge = { .addr = (uintptr_t)s->buf.p, .length = MSG,
			       .lkey = s->buf.mr->lkey };
	struct ibv_recv_wr wr = { .sg_list = &sge, .num_sge = 1 }, *bad;
	int i, ret;

	for (i = 0; i < n; i++) {
		wr.wr_id = i;
		ret = s->srq ? ibv_post_srq_recv(s->srq, &wr, &bad) :
			       ibv_post_recv(s->qp, &wr, &bad);
		if (ret)
			vp_die("post_recv: %s", strerror(ret));
	}
}

/* One signaled 64-byte SEND from @s's buffer. */
static int post_send(struct side *s, uint64_t id)
{
	struct ibv_sge sge = { .addr = (uintptr_t)s->buf.p, .length = MSG,
			       .lkey = s->buf.mr->lkey };
	struct ibv_send_wr wr = { .wr_id = id, .sg_list = &sge, .num_sge = 1,
				  .opcode = IBV_WR_SEND,
				  .send_flags = IBV_SEND_SIGNALED }, *bad;

	return ibv_post_send(s->qp, &wr, &bad);
}

/*
 * Async events of @d until none for @quiet s: counts of QP_FATAL, SRQ_ERR
 * and LAST_WQE_REACHED (an SRQ's QP in ERR).
 */
static void count_events(struct vp_dev *d, double quiet, int *fatal,
			 int *srq_err, int *last)
{
	struct pollfd p = { .fd = d->ctx->async_fd, .events = POLLIN };
	struct ibv_async_event ev;

	while (poll(&p, 1, (int)(quiet * 1000 * vp_time_scale())) == 1) {
		if (ibv_get_async_event(d->ctx, &ev))
			break;
		if (ev.event_type == IBV_EVENT_QP_FATAL)
			(*fatal)++;
		else if (ev.event_type == IBV_EVENT_SRQ_ERR)
			(*srq_err)++;
		else if (ev.event_type == IBV_EVENT_QP_LAST_WQE_REACHED)
			(*last)++;
		else
			vc_fail("unexpected async event %s",
				ibv_event_type_str(ev.event_type));
		ibv_ack_async_event(&ev);
	}
}

static void case_flip(const char *name, bool srq)
{
	struct side a, b;
	struct flipper f = {};
	struct mbcf_wq *q;
	unsigned long sent = 0;
	int fatal = 0, srq_err = 0, last = 0, st;
	struct ibv_wc wc;
	double end, t0 = vp_now();

	vc_start();
	side_make(&a, &DA, IBV_QPT_RC, srq);
	side_make(&b, &DB, IBV_QPT_RC, false);
	side_connect(&a, &b);
	side_connect(&b, &a);
	post_recvs(&a, 16);
	q = srq ? &to_msrq(a.srq)->rq : &to_mqp(a.qp)->rq;
	f.prod = mbcf_ring_prod(&q->ring);
	f.base = __atomic_load_n(f.prod, __ATOMIC_ACQUIRE) - 1;
	if (pthread_create(&f.t, NULL, flip_thread, &f))
		vp_die_errno("pthread_create");
	/* B's SENDs make A's softirq claim receives from the flipping ring;
	 * no receive is ever complete, so each waits for RNR retries */
	end = vp_now() + secs;
	while (vp_now() < end) {
		if (post_send(&b, sent))
			break;
		sent++;
		while (vp_now() < end && ibv_poll_cq(b.cq, 1, &wc) == 0)
			vp_sleep_us(200);
		if (vp_now() >= end)
			break;
	}
	atomic_store(&f.stop, true);
	pthread_join(f.t, NULL);
	count_events(&DA, 1, &fatal, &srq_err, &last);
	st = vp_qp_state(a.qp);
	if (st == IBV_QPS_RTS) {
		if (fatal || srq_err || last)
			vc_fail("RTS with %d QP_FATAL, %d SRQ_ERR, %d LAST_WQE",
				fatal, srq_err, last);
	} else if (st == IBV_QPS_ERR) {
		if (fatal != 1 || srq_err != srq || last != srq)
			vc_fail("ERR with %d QP_FATAL, %d SRQ_ERR, %d LAST_WQE",
				fatal, srq_err, last);
	} else {
		vc_fail("A in state %s", vp_qp_state_str(st));
	}
	vc_note("%lu flips, %lu sends, A %s", f.flips, sent, vp_qp_state_str(st));
	side_free(&a);
	side_free(&b);
	vc_end(name, dev_a, dev_b, "the claim ended, the QP in a state it may be in", t0);
}

int main(int argc, char **argv)
{
	int opt, i, fails = 0;

	while ((opt = getopt(argc, argv, "a:b:t:")) != -1) {
		switch (opt) {
		case 'a': dev_a = optarg; break;
		case 'b': dev_b = optarg; break;
		case 't': secs = atof(optarg); break;
		default: vp_die("usage: %s [-a DEV] [-b DEV] [-t S] CASE...", argv[0]);
		}
	}
	if (vp_dev_open(&DA, dev_a) || vp_dev_open(&DB, dev_b))
		vp_die_errno("open devices");
	for (i = optind; i < argc; i++) {
		const char *c = argv[i];

		if (!strcmp(c, "rc_sq"))
			case_sq(c, IBV_QPT_RC);
		else if (!strcmp(c, "uc_sq"))
			case_sq(c, IBV_QPT_UC);
		else if (!strcmp(c, "ud_sq"))
			case_sq(c, IBV_QPT_UD);
		else if (!strcmp(c, "rq_flip"))
			case_flip(c, false);
		else if (!strcmp(c, "srq_flip"))
			case_flip(c, true);
		else
			vp_die("unknown case %s", c);
		fails += vc_fails() != 0;
	}
	vp_dev_close(&DA);
	vp_dev_close(&DB);
	return fails ? 1 : 0;
}
