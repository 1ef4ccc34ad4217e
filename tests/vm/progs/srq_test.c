// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * mbcf_srq_test: shared receive queues, run in the guest by tests/vm/srq.sh.
 *
 *   mbcf_srq_test [-a DEV] [-b DEV] check    every check below
 *   mbcf_srq_test [-a DEV] [-b DEV] hold     build SRQs with receives posted,
 *                                           QPs attached and a sender held
 *                                           by RNR, print "ready", wait to
 *                                           be killed
 *
 * Senders are RC/UD QPs on device -a (default mbcf1), the SRQs and the QPs
 * attached to them on device -b (default mbcf0).  What `check` asserts:
 *  - limits: ibv_query_device's max_srq/max_srq_wr/max_srq_sge exactly,
 *    creation at and one past each (EINVAL), max_wr 0 (EINVAL), a receive
 *    with one SGE too many (EINVAL, bad_wr the one, those before posted),
 *    ibv_query_srq, IBV_SRQ_MAX_WR (EOPNOTSUPP), a limit above max_wr
 *    (EINVAL), ibv_create_srq_ex basic (works) and XRC (EOPNOTSUPP),
 *    ibv_post_recv on a QP with an SRQ (EINVAL), ibv_query_qp of one;
 *  - sharing: 4 RC QPs on one SRQ, messages of 1..3 frames into receives
 *    of two SGEs each; first one message at a time (each completion has
 *    exactly the next wr_id, the receiving QP's qp_num, the length, every
 *    byte), then all at once (every wr_id exactly once, per QP in posting
 *    order and in message order, qp_num matching the sender the data
 *    names, every byte), and nothing more;
 *  - a dry stream: 4 QPs send 40 messages each into an SRQ that has 2
 *    receives posted and gets one more per completion (RNR all the time):
 *    every message once, in order per QP, every byte;
 *  - the limit: IBV_EVENT_SRQ_LIMIT_REACHED exactly once per arming, when
 *    the count of posted receives goes below the limit (not at it), the
 *    limit reading 0 afterwards;
 *  - RNR: sends into a dry SRQ from two QPs complete only once receives are
 *    posted (one per receive, the right data); a sender with rnr_retry 0
 *    gets IBV_WC_RNR_RETRY_EXC_ERR and takes nothing from the SRQ;
 *  - a QP to error: IBV_EVENT_QP_LAST_WQE_REACHED once and nothing else,
 *    no receive of the SRQ flushed, the next QP takes the next receive;
 *    ibv_destroy_srq with QPs attached: EBUSY until the last is destroyed;
 *  - UD: a UD QP and an RC QP on one SRQ, receives in order, the GRH and
 *    src_qp of each datagram; a datagram into a dry SRQ is lost;
 *  - hostile rings (this process writes its SRQ's ring directly, as any
 *    process may): the producer index rewound (found by the next message),
 *    ahead by more than the ring holds (found by the doorbell, while
 *    idle), an entry with more SGEs than the SRQ has: the sender gets
 *    IBV_WC_REM_OP_ERR where a message was sent, IBV_EVENT_SRQ_ERR once,
 *    every attached QP fails (QP_FATAL and LAST_WQE_REACHED once each, its
 *    state ERR), doorbells afterwards raise nothing, and another SRQ of the
 *    process still works.
 * Prints "ok: ..." per check and "FAIL: ..." per failure; the exit status is
 * the number of failures (capped at 100), 2 for setup errors.
 *
 * White box for the hostile rings only: it includes the provider's header
 * (provider/mbcf.h) to find the SRQ's ring, as tests/vm/progs/ring_attack.c
 * does for QPs.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <rdma/ib_user_verbs.h>

#include "vmprog.h"

#include "mbcf.h"	/* provider/mbcf.h: to_msrq(), the SRQ's ring end */

#define WAIT_S		30.0	/* what must come (a loaded TCG host) */
#define QUIET_MS	300	/* what must not come */
#define SLOT		4096u	/* receive buffer per receive */
#define HEAD		64u	/* its first SGE (a separate area) */
#define NSLOT		256u
#define MAXMSG		3000u	/* up to 3 frames at MTU 1500 */


/* ---- devices ----------------------------------------------------------------- */

struct dev {
	const char *name;
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;	/* every QP of the device completes here */
	struct ibv_mr *mr;
	uint8_t *buf;		/* A: send data; B: receive heads + slots */
	size_t len;
	union ibv_gid gid;
	struct ibv_device_attr attr;
};

static struct dev DA, DB;

static void dev_open(struct dev *d, const char *name)
{
	d->name = name;
	d->ctx = vp_open(name);
	if (fcntl(d->ctx->async_fd, F_SETFL,
		  fcntl(d->ctx->async_fd, F_GETFL) | O_NONBLOCK))
		vp_die_errno("fcntl(async_fd)");
	d->pd = ibv_alloc_pd(d->ctx);
	if (!d->pd || ibv_query_gid(d->ctx, 1, 0, &d->gid) ||
	    ibv_query_device(d->ctx, &d->attr))
		vp_die_errno("ibv_alloc_pd / ibv_query_gid / ibv_query_device");
	d->cq = ibv_create_cq(d->ctx, 4096, NULL, NULL, 0);
	if (!d->cq)
		vp_die_errno("ibv_create_cq");
	d->len = NSLOT * HEAD + NSLOT * SLOT;
	d->buf = aligned_alloc(4096, d->len);
	if (!d->buf)
		vp_die_errno("aligned_alloc");
	memset(d->buf, 0, d->len);
	d->mr = ibv_reg_mr(d->pd, d->buf, d->len, IBV_ACCESS_LOCAL_WRITE);
	if (!d->mr)
		vp_die_errno("ibv_reg_mr");
}

/* ---- asynchronous events ------------------------------------------------------- */

struct ev_rec {
	int type;
	const void *obj;
	int n;
};

static struct ev_rec evs[64];
static int nevs, nev_total;

static const void *ev_obj(const struct ibv_async_event *e)
{
	switch (e->event_type) {
	case IBV_EVENT_SRQ_ERR:
	case IBV_EVENT_SRQ_LIMIT_REACHED:
		return e->element.srq;
	case IBV_EVENT_CQ_ERR:
		return e->element.cq;
	case IBV_EVENT_QP_FATAL:
	case IBV_EVENT_QP_REQ_ERR:
	case IBV_EVENT_QP_ACCESS_ERR:
	case IBV_EVENT_COMM_EST:
	case IBV_EVENT_SQ_DRAINED:
	case IBV_EVENT_PATH_MIG:
	case IBV_EVENT_PATH_MIG_ERR:
	case IBV_EVENT_QP_LAST_WQE_REACHED:
		return e->element.qp;
	default:
		return NULL;
	}
}

static void ev_read(struct dev *d)
{
	struct ibv_async_event e;
	int i;

	while (!ibv_get_async_event(d->ctx, &e)) {
		const void *obj = ev_obj(&e);

		nev_total++;
		for (i = 0; i < nevs; i++)
			if (evs[i].type == (int)e.event_type && evs[i].obj == obj)
				break;
		if (i == nevs && nevs < (int)(sizeof(evs) / sizeof(evs[0])))
			evs[nevs++] = (struct ev_rec){ e.event_type, obj, 0 };
		if (i < nevs)
			evs[i].n++;
		ibv_ack_async_event(&e);
	}
}

/* Collect events until none came for quiet_ms. */
static void ev_collect(int quiet_ms)
{
	struct pollfd pf[2] = {
		{ .fd = DA.ctx->async_fd, .events = POLLIN },
		{ .fd = DB.ctx->async_fd, .events = POLLIN },
	};

	do {
		ev_read(&DA);
		ev_read(&DB);
	} while (poll(pf, 2, quiet_ms) > 0);
}

static void ev_reset(void)
{
	ev_collect(0);
	nevs = nev_total = 0;
}

static int ev_count(int type, const void *obj)
{
	int i;

	for (i = 0; i < nevs; i++)
		if (evs[i].type == type && evs[i].obj == obj)
			return evs[i].n;
	return 0;
}

/* Wait until (type, obj) was seen at least once (or WAIT_S passed). */
static void ev_wait(int type, const void *obj)
{
	double end = vp_now() + WAIT_S;

	while (!ev_count(type, obj) && vp_now() < end)
		ev_collect(50);
}

/* ---- QPs ------------------------------------------------------------------------ */

struct qp_opts {
	uint8_t rnr_retry, min_rnr_timer, retry_cnt;
};

static const struct qp_opts dflt = { .rnr_retry = 7, .min_rnr_timer = 12,
				     .retry_cnt = 7 };

static uint32_t psn_next = 0x1000;

static struct ibv_qp *qp_make(struct dev *d, enum ibv_qp_type type,
			      struct ibv_srq *srq)
{
	struct ibv_qp_init_attr ia = {
		.send_cq = d->cq, .recv_cq = d->cq, .srq = srq,
		.cap = { .max_send_wr = 64, .max_recv_wr = 16,
			 .max_send_sge = 2, .max_recv_sge = 2 },
		.qp_type = type, .sq_sig_all = 1,
	};
	struct ibv_qp *qp = ibv_create_qp(d->pd, &ia);

	if (!qp)
		vp_die_errno("ibv_create_qp");
	return qp;
}

static void rc_connect(struct ibv_qp *x, struct dev *dx, struct ibv_qp *y,
		       struct dev *dy, const struct qp_opts *ox,
		       const struct qp_opts *oy)
{
	struct ibv_qp *q[2] = { x, y };
	struct dev *pd[2] = { dy, dx };
	const struct qp_opts *o[2] = { ox, oy };
	uint32_t psn[2] = { psn_next++, psn_next++ };
	int i;

	for (i = 0; i < 2; i++) {
		struct ibv_qp_attr a = {
			.qp_state = IBV_QPS_INIT, .port_num = 1,
			.qp_access_flags = IBV_ACCESS_LOCAL_WRITE |
					   IBV_ACCESS_REMOTE_WRITE,
		};

		if (ibv_modify_qp(q[i], &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX |
				  IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
			vp_die_errno("modify_qp INIT");
	}
	for (i = 0; i < 2; i++) {
		struct ibv_qp_attr a = {
			.qp_state = IBV_QPS_RTR, .path_mtu = IBV_MTU_1024,
			.dest_qp_num = q[1 - i]->qp_num, .rq_psn = psn[1 - i],
			.max_dest_rd_atomic = 1,
			.min_rnr_timer = o[i]->min_rnr_timer,
			.ah_attr = { .is_global = 1, .port_num = 1,
				     .grh = { .dgid = pd[i]->gid, .hop_limit = 1 } },
		};

		if (ibv_modify_qp(q[i], &a, IBV_QP_STATE | IBV_QP_AV |
				  IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
				  IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
				  IBV_QP_MIN_RNR_TIMER))
			vp_die_errno("modify_qp RTR");
	}
	for (i = 0; i < 2; i++) {
		struct ibv_qp_attr a = {
			.qp_state = IBV_QPS_RTS, .sq_psn = psn[i],
			.timeout = 14, .retry_cnt = o[i]->retry_cnt,
			.rnr_retry = o[i]->rnr_retry, .max_rd_atomic = 1,
		};

		if (ibv_modify_qp(q[i], &a, IBV_QP_STATE | IBV_QP_SQ_PSN |
				  IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
				  IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC))
			vp_die_errno("modify_qp RTS");
	}
}

#define UD_QKEY 0x11111111u

static void ud_up(struct ibv_qp *qp)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .port_num = 1,
				 .qkey = UD_QKEY };

	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX |
			  IBV_QP_PORT | IBV_QP_QKEY))
		vp_die_errno("UD INIT");
	a.qp_state = IBV_QPS_RTR;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE))
		vp_die_errno("UD RTR");
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = 0;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN))
		vp_die_errno("UD RTS");
}

/* ---- SRQs, receives, messages ------------------------------------------------------ */

static struct ibv_srq *srq_make(uint32_t max_wr, uint32_t max_sge)
{
	struct ibv_srq_init_attr ia = { .attr = { .max_wr = max_wr,
						  .max_sge = max_sge } };
	struct ibv_srq *srq = ibv_create_srq(DB.pd, &ia);

	if (!srq)
		vp_die_errno("ibv_create_srq");
	return srq;
}

/* Receive n: wr_id base + n, two SGEs: HEAD bytes, then its slot. */
static uint32_t rx_slot(uint64_t wr_id)
{
	return (uint32_t)(wr_id % NSLOT);
}

static int post_srq(struct ibv_srq *srq, uint64_t wr_id, uint32_t n)
{
	struct ibv_recv_wr wr[64], *bad;
	struct ibv_sge sg[64][2];
	uint32_t i;

	for (i = 0; i < n; i++) {
		uint32_t s = rx_slot(wr_id + i);

		sg[i][0] = (struct ibv_sge){
			(uintptr_t)DB.buf + s * HEAD, HEAD, DB.mr->lkey };
		sg[i][1] = (struct ibv_sge){
			(uintptr_t)DB.buf + NSLOT * HEAD + (size_t)s * SLOT,
			SLOT - HEAD, DB.mr->lkey };
		memset(DB.buf + s * HEAD, 0xee, HEAD);
		memset(DB.buf + NSLOT * HEAD + (size_t)s * SLOT, 0xee, SLOT);
		wr[i] = (struct ibv_recv_wr){ .wr_id = wr_id + i,
			.next = i + 1 < n ? &wr[i + 1] : NULL,
			.sg_list = sg[i], .num_sge = 2 };
	}
	return ibv_post_srq_recv(srq, wr, &bad);
}

static void post_srq_n(struct ibv_srq *srq, uint64_t wr_id, uint32_t n)
{
	while (n) {
		uint32_t k = n < 64 ? n : 64;

		if (post_srq(srq, wr_id, k))
			vp_die_errno("ibv_post_srq_recv");
		wr_id += k;
		n -= k;
	}
}

/* Message (k, j): its length and bytes; the first 4 bytes say (k, j). */
static uint32_t msg_len(uint32_t k, uint32_t j)
{
	return 8 + (k * 977 + j * 1231) % (MAXMSG - 8);
}

static uint8_t msg_byte(uint32_t k, uint32_t j, uint32_t i)
{
	return (uint8_t)(k * 31 + j * 7 + i * 13 + (i >> 8));
}

/* Build message (k, j) in A's buffer at slot s. */
static uint8_t *msg_build(uint32_t k, uint32_t j, uint32_t s)
{
	uint8_t *p = DA.buf + NSLOT * HEAD + (size_t)(s % NSLOT) * SLOT;
	uint32_t i, n = msg_len(k, j);

	for (i = 0; i < n; i++)
		p[i] = msg_byte(k, j, i);
	p[0] = (uint8_t)k;
	p[1] = (uint8_t)(k >> 8);
	p[2] = (uint8_t)j;
	p[3] = (uint8_t)(j >> 8);
	return p;
}

static int post_send_buf(struct ibv_qp *qp, uint64_t wr_id, const void *p,
			 uint32_t len, struct ibv_ah *ah, uint32_t rqpn)
{
	struct ibv_sge sg = { (uintptr_t)p, len, DA.mr->lkey };
	struct ibv_send_wr wr = { .wr_id = wr_id, .sg_list = &sg, .num_sge = 1,
				  .opcode = IBV_WR_SEND,
				  .send_flags = IBV_SEND_SIGNALED }, *bad;

	if (ah) {
		wr.wr.ud.ah = ah;
		wr.wr.ud.remote_qpn = rqpn;
		wr.wr.ud.remote_qkey = UD_QKEY;
	}
	return ibv_post_send(qp, &wr, &bad);
}

static void send_msg(struct ibv_qp *qp, uint32_t k, uint32_t j, uint32_t s)
{
	if (post_send_buf(qp, ((uint64_t)k << 32) | j, msg_build(k, j, s),
			  msg_len(k, j), NULL, 0))
		vp_die_errno("ibv_post_send");
}

/* The bytes receive wr_id holds, reassembled from its two SGEs. */
static void rx_bytes(uint64_t wr_id, uint8_t *out, uint32_t len)
{
	uint32_t s = rx_slot(wr_id), h = len < HEAD ? len : HEAD;

	memcpy(out, DB.buf + s * HEAD, h);
	if (len > h)
		memcpy(out + h, DB.buf + NSLOT * HEAD + (size_t)s * SLOT, len - h);
}

/* Does receive wr_id hold message (k, j) at offset off (0; UD: the GRH)? */
static int rx_holds(uint64_t wr_id, uint32_t off, uint32_t k, uint32_t j)
{
	static uint8_t got[SLOT];
	uint32_t i, n = msg_len(k, j);

	rx_bytes(wr_id, got, off + n);
	if (got[off] != (uint8_t)k || got[off + 1] != (uint8_t)(k >> 8) ||
	    got[off + 2] != (uint8_t)j || got[off + 3] != (uint8_t)(j >> 8))
		return 0;
	for (i = 4; i < n; i++)
		if (got[off + i] != msg_byte(k, j, i))
			return 0;
	return 1;
}

/* Poll cq until n completions (or WAIT_S); returns how many. */
static int poll_n(struct ibv_cq *cq, struct ibv_wc *wc, int n)
{
	double end = vp_now() + WAIT_S;
	int got = 0, r;

	while (got < n) {
		r = ibv_poll_cq(cq, n - got, wc + got);
		if (r < 0)
			vp_die_errno("ibv_poll_cq");
		got += r;
		if (!r && vp_now() > end)
			break;
		if (!r)
			usleep(200);
	}
	return got;
}

/* Completions that arrive within QUIET_MS (they should not). */
static int poll_quiet(struct ibv_cq *cq, struct ibv_wc *wc, int max)
{
	double end = vp_now() + QUIET_MS / 1000.0;
	int got = 0, r;

	while (vp_now() < end && got < max) {
		r = ibv_poll_cq(cq, max - got, wc + got);
		if (r < 0)
			vp_die_errno("ibv_poll_cq");
		got += r;
		usleep(1000);
	}
	return got;
}

/* One send completion on A: success, the wr_id. */
static void expect_send_ok(const char *what, uint64_t wr_id)
{
	struct ibv_wc wc;
	int n = poll_n(DA.cq, &wc, 1);

	CHECK(n == 1 && wc.status == IBV_WC_SUCCESS && wc.wr_id == wr_id &&
	      wc.opcode == IBV_WC_SEND,
	      "%s: send completes (n %d status %s wr_id %#llx)", what, n,
	      n ? ibv_wc_status_str(wc.status) : "-",
	      n ? (unsigned long long)wc.wr_id : 0ULL);
}

/* One receive completion on B: exactly wr_id, on qp, message (k, j). */
static void expect_recv(const char *what, uint64_t wr_id, struct ibv_qp *qp,
			uint32_t k, uint32_t j)
{
	struct ibv_wc wc;
	int n = poll_n(DB.cq, &wc, 1);

	CHECK(n == 1 && wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_RECV &&
	      wc.wr_id == wr_id && wc.qp_num == qp->qp_num &&
	      wc.byte_len == msg_len(k, j) && rx_holds(wr_id, 0, k, j),
	      "%s: receive wr_id %llu on qp %u, %u bytes of message (%u,%u) "
	      "(n %d status %s wr_id %llu qp %u len %u)", what,
	      (unsigned long long)wr_id, qp->qp_num, msg_len(k, j), k, j, n,
	      n ? ibv_wc_status_str(wc.status) : "-",
	      n ? (unsigned long long)wc.wr_id : 0ULL, n ? wc.qp_num : 0,
	      n ? wc.byte_len : 0);
}

static void expect_quiet(const char *what)
{
	struct ibv_wc wc[8];
	int a = poll_quiet(DA.cq, wc, 8), b = poll_quiet(DB.cq, wc, 8);

	CHECK(a == 0 && b == 0, "%s: no more completions (A %d, B %d)", what, a, b);
}

/* ---- limits and refusals ------------------------------------------------------ */

static int srq_create_errno(uint32_t max_wr, uint32_t max_sge)
{
	struct ibv_srq_init_attr ia = { .attr = { .max_wr = max_wr,
						  .max_sge = max_sge } };
	struct ibv_srq *srq;

	errno = 0;
	srq = ibv_create_srq(DB.pd, &ia);
	if (!srq)
		return errno ? errno : -1;
	if (ia.attr.max_wr < max_wr || ia.attr.max_sge < max_sge)
		printf("  create_srq(%u, %u) gave (%u, %u)\n", max_wr, max_sge,
		       ia.attr.max_wr, ia.attr.max_sge);
	ibv_destroy_srq(srq);
	return ia.attr.max_wr < max_wr || ia.attr.max_sge < max_sge ? -1 : 0;
}

static void check_limits(void)
{
	struct ibv_device_attr *d = &DB.attr;
	struct ibv_srq_init_attr_ex iax = {};
	struct ibv_srq_attr sa;
	struct ibv_recv_wr wr[3], *bad = NULL;
	struct ibv_sge sg[32];
	struct ibv_qp_init_attr qia;
	struct ibv_qp_attr qa;
	struct ibv_srq *srq, *x;
	struct ibv_qp *qp;
	int i, r;

	CHECK(d->max_srq == 4096 && d->max_srq_wr == 65536 &&
	      d->max_srq_sge == d->max_sge && d->max_sge == 16,
	      "limits: max_srq %d, max_srq_wr %d, max_srq_sge %d (max_sge %d)",
	      d->max_srq, d->max_srq_wr, d->max_srq_sge, d->max_sge);
	CHECK(srq_create_errno(d->max_srq_wr, d->max_srq_sge) == 0,
	      "limits: an SRQ of max_srq_wr entries, max_srq_sge SGEs");
	CHECK(srq_create_errno(d->max_srq_wr + 1, 1) == EINVAL,
	      "limits: max_wr = max_srq_wr + 1: EINVAL");
	CHECK(srq_create_errno(16, d->max_srq_sge + 1) == EINVAL,
	      "limits: max_sge = max_srq_sge + 1: EINVAL");
	CHECK(srq_create_errno(0, 1) == EINVAL, "limits: max_wr 0: EINVAL");

	srq = srq_make(100, 3);
	memset(&sa, 0x5a, sizeof(sa));
	CHECK(ibv_query_srq(srq, &sa) == 0 && sa.max_wr == 128 && sa.max_sge == 3 &&
	      sa.srq_limit == 0, "query_srq: max_wr %u (100 asked), max_sge %u, "
	      "srq_limit %u", sa.max_wr, sa.max_sge, sa.srq_limit);
	sa.max_wr = 256;
	CHECK(ibv_modify_srq(srq, &sa, IBV_SRQ_MAX_WR) == EOPNOTSUPP,
	      "modify_srq IBV_SRQ_MAX_WR: EOPNOTSUPP (no resizing)");
	sa.srq_limit = 129;
	CHECK(ibv_modify_srq(srq, &sa, IBV_SRQ_LIMIT) == EINVAL,
	      "modify_srq srq_limit 129 > max_wr 128: EINVAL");
	sa.srq_limit = 128;
	r = ibv_modify_srq(srq, &sa, IBV_SRQ_LIMIT);
	CHECK(r == 0 && !ibv_query_srq(srq, &sa) && sa.srq_limit == 128,
	      "modify_srq srq_limit = max_wr: armed (%u)", sa.srq_limit);
	sa.srq_limit = 0;
	CHECK(ibv_modify_srq(srq, &sa, IBV_SRQ_LIMIT) == 0 &&
	      !ibv_query_srq(srq, &sa) && sa.srq_limit == 0,
	      "modify_srq srq_limit 0: disarmed");

	/* SGEs: 3 is fine, 4 is not; a list stops at the bad one */
	for (i = 0; i < 32; i++)
		sg[i] = (struct ibv_sge){ (uintptr_t)DB.buf, 8, DB.mr->lkey };
	wr[0] = (struct ibv_recv_wr){ .wr_id = 1, .next = &wr[1], .sg_list = sg,
				      .num_sge = 3 };
	wr[1] = (struct ibv_recv_wr){ .wr_id = 2, .next = &wr[2], .sg_list = sg,
				      .num_sge = 4 };
	wr[2] = (struct ibv_recv_wr){ .wr_id = 3, .sg_list = sg, .num_sge = 1 };
	r = ibv_post_srq_recv(srq, wr, &bad);
	CHECK(r == EINVAL && bad == &wr[1],
	      "post_srq_recv: num_sge 4 > max_sge 3: EINVAL, bad_wr the second "
	      "(r %d, bad %ld)", r, bad ? (long)(bad - wr) : -1L);
	wr[1].num_sge = -1;
	r = ibv_post_srq_recv(srq, &wr[1], &bad);
	CHECK(r == EINVAL && bad == &wr[1], "post_srq_recv: num_sge -1: EINVAL");

	/* a QP on it: no receive queue of its own */
	qp = qp_make(&DB, IBV_QPT_RC, srq);
	memset(&qia, 0x5a, sizeof(qia));
	CHECK(!ibv_query_qp(qp, &qa, IBV_QP_CAP, &qia) && qia.srq == srq &&
	      qia.cap.max_recv_wr == 0 && qia.cap.max_recv_sge == 0 &&
	      qa.cap.max_recv_wr == 0, "query_qp of a QP on an SRQ: srq, "
	      "max_recv_wr %u, max_recv_sge %u", qia.cap.max_recv_wr,
	      qia.cap.max_recv_sge);
	{
		struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .port_num = 1 };

		if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX |
				  IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
			vp_die_errno("modify_qp INIT");
	}
	wr[2].next = NULL;
	r = ibv_post_recv(qp, &wr[2], &bad);
	CHECK(r == EINVAL && bad == &wr[2], "post_recv on a QP with an SRQ: EINVAL (%d)", r);
	CHECK(ibv_destroy_srq(srq) == EBUSY, "destroy_srq with a QP attached: EBUSY");
	CHECK(ibv_destroy_qp(qp) == 0 && ibv_destroy_srq(srq) == 0,
	      "destroy the QP, then the SRQ (with a receive posted)");

	/* ibv_create_srq_ex: basic works (libibverbs hands it to create_srq),
	 * XRC does not */
	iax.comp_mask = IBV_SRQ_INIT_ATTR_PD | IBV_SRQ_INIT_ATTR_TYPE;
	iax.pd = DB.pd;
	iax.srq_type = IBV_SRQT_BASIC;
	iax.attr.max_wr = 8;
	iax.attr.max_sge = 1;
	x = ibv_create_srq_ex(DB.ctx, &iax);
	CHECK(x && iax.attr.max_wr == 8, "create_srq_ex basic (max_wr %u)",
	      iax.attr.max_wr);
	if (x)
		ibv_destroy_srq(x);
	iax.comp_mask = IBV_SRQ_INIT_ATTR_PD | IBV_SRQ_INIT_ATTR_TYPE |
			IBV_SRQ_INIT_ATTR_XRCD | IBV_SRQ_INIT_ATTR_CQ;
	iax.srq_type = IBV_SRQT_XRC;
	iax.cq = DB.cq;
	errno = 0;
	x = ibv_create_srq_ex(DB.ctx, &iax);
	CHECK(!x && errno == EOPNOTSUPP, "create_srq_ex XRC: EOPNOTSUPP (%s)",
	      strerror(errno));
	if (x)
		ibv_destroy_srq(x);
}

/* ---- several RC QPs on one SRQ --------------------------------------------------- */

#define NQ 4
#define NM 24	/* messages per QP */

static void check_shared(void)
{
	struct ibv_srq *srq = srq_make(256, 2);
	struct ibv_qp *qa[NQ], *qb[NQ];
	static struct ibv_wc wc[NQ * NM];
	uint64_t base = 5000, next = base;
	uint32_t k, j, s = 0, lastj[NQ];
	uint64_t lastw[NQ];
	int n, i, bad = 0;
	static uint8_t seen[NQ * NM];

	for (k = 0; k < NQ; k++) {
		qa[k] = qp_make(&DA, IBV_QPT_RC, NULL);
		qb[k] = qp_make(&DB, IBV_QPT_RC, srq);
		rc_connect(qa[k], &DA, qb[k], &DB, &dflt, &dflt);
	}
	post_srq_n(srq, base, NQ * NM);

	/* one at a time: each takes exactly the next receive */
	for (j = 0; j < NM / 2; j++)
		for (k = 0; k < NQ; k++) {
			char what[64];

			snprintf(what, sizeof(what), "shared: msg (%u,%u)", k, j);
			send_msg(qa[k], k, j, s++);
			expect_send_ok(what, ((uint64_t)k << 32) | j);
			expect_recv(what, next++, qb[k], k, j);
		}

	/* all at once */
	for (j = NM / 2; j < NM; j++)
		for (k = 0; k < NQ; k++)
			send_msg(qa[k], k, j, s++);
	n = poll_n(DA.cq, wc, NQ * NM / 2);
	for (i = 0; i < n; i++)
		if (wc[i].status != IBV_WC_SUCCESS)
			bad++;
	CHECK(n == NQ * NM / 2 && !bad, "shared: %d of %d sends complete, %d "
	      "in error", n, NQ * NM / 2, bad);
	n = poll_n(DB.cq, wc, NQ * NM / 2);
	memset(seen, 0, sizeof(seen));
	for (k = 0; k < NQ; k++) {
		lastj[k] = NM / 2 - 1;
		lastw[k] = 0;
	}
	bad = 0;
	for (i = 0; i < n; i++) {
		uint64_t w = wc[i].wr_id;
		uint8_t head[4];

		if (wc[i].status != IBV_WC_SUCCESS || w < next ||
		    w >= base + NQ * NM || seen[w - base]++) {
			printf("  wc %d: status %s wr_id %llu\n", i,
			       ibv_wc_status_str(wc[i].status),
			       (unsigned long long)w);
			bad++;
			continue;
		}
		rx_bytes(w, head, 4);
		k = head[0] | head[1] << 8;
		j = head[2] | head[3] << 8;
		if (k >= NQ || wc[i].qp_num != qb[k]->qp_num ||
		    j != lastj[k] + 1 || w <= lastw[k] ||
		    wc[i].byte_len != msg_len(k, j) || !rx_holds(w, 0, k, j)) {
			printf("  wc %d: wr_id %llu qp %u len %u holds (%u,%u)\n",
			       i, (unsigned long long)w, wc[i].qp_num,
			       wc[i].byte_len, k, j);
			bad++;
			continue;
		}
		lastj[k] = j;
		lastw[k] = w;
	}
	CHECK(n == NQ * NM / 2 && !bad,
	      "shared: %d of %d receives, every wr_id %llu..%llu once, per QP "
	      "in order, qp_num of the sender's peer, every byte (%d bad)", n,
	      NQ * NM / 2, (unsigned long long)next,
	      (unsigned long long)(base + NQ * NM - 1), bad);
	expect_quiet("shared");

	for (k = 0; k < NQ; k++)
		if (ibv_destroy_qp(qa[k]) || ibv_destroy_qp(qb[k]))
			vp_die_errno("destroy_qp");
	CHECK(ibv_destroy_srq(srq) == 0, "shared: destroy_srq");
}

/*
 * Four QPs stream into an SRQ that keeps running dry: 2 receives posted,
 * one more posted per completion.  Every message arrives (STOP, GO and the
 * SRQ doorbell racing the claims of four QPs), each exactly once, in order
 * per QP, every byte.
 */
#define DRY_NM 40

static void check_dry_stream(void)
{
	struct ibv_srq *srq = srq_make(4, 2);
	struct ibv_qp *qa[NQ], *qb[NQ];
	static struct ibv_wc wc[64];
	static uint8_t seen[NQ * DRY_NM + 2];
	uint32_t k, j, lastj[NQ], s = 0;
	uint64_t posted = 2;
	int got = 0, sent = 0, bad = 0, n, i;
	double end;

	for (k = 0; k < NQ; k++) {
		qa[k] = qp_make(&DA, IBV_QPT_RC, NULL);
		qb[k] = qp_make(&DB, IBV_QPT_RC, srq);
		rc_connect(qa[k], &DA, qb[k], &DB, &dflt, &dflt);
		lastj[k] = (uint32_t)-1;
	}
	post_srq_n(srq, 0, 2);
	for (j = 0; j < DRY_NM; j++)
		for (k = 0; k < NQ; k++)
			send_msg(qa[k], k, j, s++);
	memset(seen, 0, sizeof(seen));
	end = vp_now() + 4 * WAIT_S;
	while ((got < NQ * DRY_NM || sent < NQ * DRY_NM) && vp_now() < end) {
		n = ibv_poll_cq(DA.cq, 64, wc);
		for (i = 0; i < n; i++)
			if (wc[i].status != IBV_WC_SUCCESS)
				bad++;
		sent += n > 0 ? n : 0;
		n = ibv_poll_cq(DB.cq, 64, wc);
		for (i = 0; i < n; i++) {
			uint64_t w = wc[i].wr_id;
			uint8_t head[4];

			got++;
			if (wc[i].status != IBV_WC_SUCCESS || w >= posted ||
			    seen[w]++) {
				bad++;
				continue;
			}
			rx_bytes(w, head, 4);
			k = head[0] | head[1] << 8;
			j = head[2] | head[3] << 8;
			if (k >= NQ || wc[i].qp_num != qb[k]->qp_num ||
			    j != lastj[k] + 1 || wc[i].byte_len != msg_len(k, j) ||
			    !rx_holds(w, 0, k, j)) {
				bad++;
				continue;
			}
			lastj[k] = j;
			if (posted < NQ * DRY_NM)
				post_srq_n(srq, posted++, 1);
		}
		if (n <= 0)
			usleep(100);
	}
	CHECK(got == NQ * DRY_NM && sent == NQ * DRY_NM && !bad,
	      "dry stream: %d of %d sends, %d of %d receives through an SRQ kept "
	      "at 2 posted, each once, in order per QP, every byte (%d bad)",
	      sent, NQ * DRY_NM, got, NQ * DRY_NM, bad);
	expect_quiet("dry stream");
	for (k = 0; k < NQ; k++)
		if (ibv_destroy_qp(qa[k]) || ibv_destroy_qp(qb[k]))
			vp_die_errno("destroy_qp");
	CHECK(ibv_destroy_srq(srq) == 0, "dry stream: destroy_srq");
}

/* ---- the limit event ---------------------------------------------------------------- */

static void check_limit(void)
{
	struct ibv_srq *srq = srq_make(16, 2);
	struct ibv_qp *a = qp_make(&DA, IBV_QPT_RC, NULL);
	struct ibv_qp *b = qp_make(&DB, IBV_QPT_RC, srq);
	struct ibv_srq_attr sa = {};
	uint64_t w = 100;
	uint32_t j = 0, i;
	char what[64];

	rc_connect(a, &DA, b, &DB, &dflt, &dflt);
	ev_reset();
	post_srq_n(srq, 100, 10);
	sa.srq_limit = 5;
	CHECK(ibv_modify_srq(srq, &sa, IBV_SRQ_LIMIT) == 0 &&
	      !ibv_query_srq(srq, &sa) && sa.srq_limit == 5,
	      "limit: armed at 5 with 10 posted");
	/* 10 -> 5: not below */
	for (i = 0; i < 5; i++, j++) {
		snprintf(what, sizeof(what), "limit: msg %u", j);
		send_msg(a, 0, j, j);
		expect_send_ok(what, j);
		expect_recv(what, w++, b, 0, j);
	}
	ev_collect(QUIET_MS);
	CHECK(nev_total == 0, "limit: 5 left (not below 5): no event (%d)", nev_total);
	/* 5 -> 4: below */
	send_msg(a, 0, j, j);
	expect_send_ok("limit: 6th", j);
	expect_recv("limit: 6th", w++, b, 0, j);
	j++;
	ev_wait(IBV_EVENT_SRQ_LIMIT_REACHED, srq);
	ev_collect(QUIET_MS);
	CHECK(ev_count(IBV_EVENT_SRQ_LIMIT_REACHED, srq) == 1 && nev_total == 1,
	      "limit: 4 left: SRQ_LIMIT_REACHED once on the SRQ (%d, %d events)",
	      ev_count(IBV_EVENT_SRQ_LIMIT_REACHED, srq), nev_total);
	CHECK(!ibv_query_srq(&*srq, &sa) && sa.srq_limit == 0,
	      "limit: disarmed after the event (srq_limit %u)", sa.srq_limit);
	/* the rest: no event, disarmed */
	for (i = 0; i < 4; i++, j++) {
		snprintf(what, sizeof(what), "limit: msg %u", j);
		send_msg(a, 0, j, j);
		expect_send_ok(what, j);
		expect_recv(what, w++, b, 0, j);
	}
	ev_collect(QUIET_MS);
	CHECK(nev_total == 1, "limit: drained while disarmed: no more events (%d)",
	      nev_total);

	/* armed again at 3 with 8 posted: at 2 left, once */
	post_srq_n(srq, w, 8);
	sa.srq_limit = 3;
	CHECK(ibv_modify_srq(srq, &sa, IBV_SRQ_LIMIT) == 0, "limit: rearmed at 3");
	for (i = 0; i < 5; i++, j++) {
		snprintf(what, sizeof(what), "limit: msg %u", j);
		send_msg(a, 0, j, j);
		expect_send_ok(what, j);
		expect_recv(what, w++, b, 0, j);
	}
	ev_collect(QUIET_MS);
	CHECK(nev_total == 1, "limit: 3 left: no event (%d)", nev_total);
	send_msg(a, 0, j, j);
	expect_send_ok("limit: rearmed, 6th", j);
	expect_recv("limit: rearmed, 6th", w++, b, 0, j);
	j++;
	ev_wait(IBV_EVENT_SRQ_LIMIT_REACHED, srq);
	ev_collect(QUIET_MS);
	CHECK(ev_count(IBV_EVENT_SRQ_LIMIT_REACHED, srq) == 2 && nev_total == 2,
	      "limit: 2 left: the second SRQ_LIMIT_REACHED (%d events)", nev_total);
	expect_quiet("limit");
	if (ibv_destroy_qp(a) || ibv_destroy_qp(b))
		vp_die_errno("destroy_qp");
	CHECK(ibv_destroy_srq(srq) == 0, "limit: destroy_srq with 2 receives posted");
}

/* ---- RNR: a dry SRQ, then refilled -------------------------------------------------- */

static void check_rnr(void)
{
	struct ibv_srq *srq = srq_make(16, 2);
	struct qp_opts once = dflt;
	struct ibv_qp *a[3], *b[3];
	struct ibv_wc wc[4];
	int n, i, k0;

	once.rnr_retry = 0;
	for (i = 0; i < 3; i++) {
		a[i] = qp_make(&DA, IBV_QPT_RC, NULL);
		b[i] = qp_make(&DB, IBV_QPT_RC, srq);
		rc_connect(a[i], &DA, b[i], &DB, i == 2 ? &once : &dflt, &dflt);
	}
	ev_reset();
	send_msg(a[0], 0, 0, 0);
	send_msg(a[1], 1, 0, 1);
	n = poll_quiet(DA.cq, wc, 4) + poll_quiet(DB.cq, wc, 4);
	CHECK(n == 0, "rnr: two sends into a dry SRQ wait (%d completions)", n);

	/* one receive: one of them lands; which is the first to retry */
	post_srq_n(srq, 300, 1);
	n = poll_n(DB.cq, wc, 1);
	k0 = n == 1 && wc[0].qp_num == b[1]->qp_num ? 1 : 0;
	CHECK(n == 1 && wc[0].status == IBV_WC_SUCCESS && wc[0].wr_id == 300 &&
	      wc[0].qp_num == b[k0]->qp_num && wc[0].byte_len == msg_len(k0, 0) &&
	      rx_holds(300, 0, k0, 0),
	      "rnr: one receive posted: message %d lands in it", k0);
	n = poll_n(DA.cq, wc, 1);
	CHECK(n == 1 && wc[0].status == IBV_WC_SUCCESS &&
	      wc[0].wr_id == ((uint64_t)k0 << 32),
	      "rnr: its send completes, the other still waits");
	n = poll_quiet(DA.cq, wc, 4);
	CHECK(n == 0, "rnr: the other send waits (%d)", n);
	post_srq_n(srq, 301, 1);
	expect_recv("rnr: second receive", 301, b[1 - k0], 1 - k0, 0);
	expect_send_ok("rnr: second send", (uint64_t)(1 - k0) << 32);

	/* rnr_retry 0: the first STOP ends it */
	send_msg(a[2], 2, 0, 2);
	n = poll_n(DA.cq, wc, 1);
	CHECK(n == 1 && wc[0].status == IBV_WC_RNR_RETRY_EXC_ERR &&
	      wc[0].wr_id == (2ULL << 32), "rnr: rnr_retry 0 into a dry SRQ: %s",
	      n ? ibv_wc_status_str(wc[0].status) : "no completion");
	n = poll_quiet(DB.cq, wc, 4);
	CHECK(n == 0, "rnr: the SRQ gave nothing to it (%d)", n);
	/* the SRQ serves the others still */
	post_srq_n(srq, 302, 1);
	send_msg(a[0], 0, 1, 3);
	expect_send_ok("rnr: after refill", 1);
	expect_recv("rnr: after refill", 302, b[0], 0, 1);
	ev_collect(QUIET_MS);
	CHECK(nev_total == 0, "rnr: no asynchronous event (%d)", nev_total);
	for (i = 0; i < 3; i++)
		if (ibv_destroy_qp(a[i]) || ibv_destroy_qp(b[i]))
			vp_die_errno("destroy_qp");
	CHECK(ibv_destroy_srq(srq) == 0, "rnr: destroy_srq");
}

/* ---- a QP to error, destroy order ------------------------------------------------------- */

static void check_last_wqe(void)
{
	struct ibv_srq *srq = srq_make(16, 2);
	struct ibv_qp *a[3], *b[3];
	struct ibv_qp_attr qa = { .qp_state = IBV_QPS_ERR };
	struct ibv_wc wc[4];
	int i, n;

	for (i = 0; i < 3; i++) {
		a[i] = qp_make(&DA, IBV_QPT_RC, NULL);
		b[i] = qp_make(&DB, IBV_QPT_RC, srq);
		rc_connect(a[i], &DA, b[i], &DB, &dflt, &dflt);
	}
	post_srq_n(srq, 400, 6);
	send_msg(a[0], 0, 0, 0);
	expect_send_ok("last_wqe: before", 0);
	expect_recv("last_wqe: before", 400, b[0], 0, 0);
	ev_reset();
	CHECK(ibv_modify_qp(b[1], &qa, IBV_QP_STATE) == 0, "last_wqe: QP 1 to ERR");
	ev_wait(IBV_EVENT_QP_LAST_WQE_REACHED, b[1]);
	ev_collect(QUIET_MS);
	CHECK(ev_count(IBV_EVENT_QP_LAST_WQE_REACHED, b[1]) == 1 && nev_total == 1,
	      "last_wqe: LAST_WQE_REACHED once on QP 1, nothing else (%d events)",
	      nev_total);
	n = poll_quiet(DB.cq, wc, 4);
	CHECK(n == 0, "last_wqe: no receive of the SRQ flushed (%d completions)", n);
	send_msg(a[2], 2, 0, 1);
	expect_send_ok("last_wqe: QP 2 after", 2ULL << 32);
	expect_recv("last_wqe: QP 2 after", 401, b[2], 2, 0);
	send_msg(a[0], 0, 1, 2);
	expect_send_ok("last_wqe: QP 0 after", 1);
	expect_recv("last_wqe: QP 0 after", 402, b[0], 0, 1);

	CHECK(ibv_destroy_srq(srq) == EBUSY, "last_wqe: destroy_srq with 3 QPs: EBUSY");
	CHECK(ibv_destroy_qp(b[1]) == 0, "last_wqe: destroy the QP in error");
	CHECK(ibv_destroy_srq(srq) == EBUSY, "last_wqe: destroy_srq with 2 QPs: EBUSY");
	CHECK(ibv_destroy_qp(b[0]) == 0, "last_wqe: destroy QP 0");
	/* QP 2 still takes from it */
	send_msg(a[2], 2, 1, 3);
	expect_send_ok("last_wqe: QP 2 alone", (2ULL << 32) | 1);
	expect_recv("last_wqe: QP 2 alone", 403, b[2], 2, 1);
	CHECK(ibv_destroy_srq(srq) == EBUSY, "last_wqe: destroy_srq with 1 QP: EBUSY");
	CHECK(ibv_destroy_qp(b[2]) == 0 && ibv_destroy_srq(srq) == 0,
	      "last_wqe: destroy the last QP, then the SRQ (2 receives posted)");
	ev_collect(QUIET_MS);
	CHECK(nev_total == 1, "last_wqe: no event from the destroys (%d)", nev_total);
	for (i = 0; i < 3; i++)
		if (ibv_destroy_qp(a[i]))
			vp_die_errno("destroy_qp");
	expect_quiet("last_wqe");
}

/* ---- UD (and RC) on one SRQ -------------------------------------------------------------- */

static void expect_ud(const char *what, uint64_t wr_id, struct ibv_qp *qp,
		      struct ibv_qp *src, uint32_t k, uint32_t j)
{
	struct ibv_wc wc;
	int n = poll_n(DB.cq, &wc, 1);

	CHECK(n == 1 && wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_RECV &&
	      wc.wr_id == wr_id && wc.qp_num == qp->qp_num &&
	      wc.src_qp == src->qp_num && (wc.wc_flags & IBV_WC_GRH) &&
	      wc.byte_len == 40 + msg_len(k, j) && rx_holds(wr_id, 40, k, j),
	      "%s: datagram in receive %llu on UD qp %u from %u, GRH + %u bytes "
	      "(n %d status %s wr_id %llu qp %u src %u len %u)", what,
	      (unsigned long long)wr_id, qp->qp_num, src->qp_num, msg_len(k, j),
	      n, n ? ibv_wc_status_str(wc.status) : "-",
	      n ? (unsigned long long)wc.wr_id : 0ULL, n ? wc.qp_num : 0,
	      n ? wc.src_qp : 0, n ? wc.byte_len : 0);
}

static void check_ud(void)
{
	struct ibv_srq *srq = srq_make(16, 2);
	struct ibv_qp *ua = qp_make(&DA, IBV_QPT_UD, NULL);
	struct ibv_qp *ub = qp_make(&DB, IBV_QPT_UD, srq);
	struct ibv_qp *ra = qp_make(&DA, IBV_QPT_RC, NULL);
	struct ibv_qp *rb = qp_make(&DB, IBV_QPT_RC, srq);
	struct ibv_ah_attr aa = { .is_global = 1, .port_num = 1,
				  .grh = { .dgid = DB.gid, .hop_limit = 1 } };
	struct ibv_ah *ah = ibv_create_ah(DA.pd, &aa);
	struct ibv_wc wc[4];
	uint32_t k = 7, j, len;
	int n;

	if (!ah)
		vp_die_errno("ibv_create_ah");
	ud_up(ua);
	ud_up(ub);
	rc_connect(ra, &DA, rb, &DB, &dflt, &dflt);

	/* a datagram into the dry SRQ is lost */
	len = 200;
	memset(DA.buf, 0x42, len);
	if (post_send_buf(ua, 77, DA.buf, len, ah, ub->qp_num))
		vp_die_errno("post_send UD");
	expect_send_ok("ud: into a dry SRQ", 77);
	n = poll_quiet(DB.cq, wc, 4);
	CHECK(n == 0, "ud: a datagram into a dry SRQ is lost (%d completions)", n);

	post_srq_n(srq, 600, 5);
	for (j = 0; j < 5; j++) {
		char what[64];

		snprintf(what, sizeof(what), "ud: message %u", j);
		if (j == 2) {		/* the RC QP takes the next in line */
			send_msg(ra, 3, j, j);
			expect_send_ok(what, (3ULL << 32) | j);
			expect_recv(what, 600 + j, rb, 3, j);
			continue;
		}
		/* a datagram carries at most 1024 bytes here (active_mtu) */
		while (msg_len(k, j) > 1000)
			k++;
		if (post_send_buf(ua, j, msg_build(k, j, j), msg_len(k, j), ah,
				  ub->qp_num))
			vp_die_errno("post_send UD");
		expect_send_ok(what, j);
		expect_ud(what, 600 + j, ub, ua, k, j);
	}
	expect_quiet("ud");
	if (ibv_destroy_qp(ua) || ibv_destroy_qp(ub) || ibv_destroy_qp(ra) ||
	    ibv_destroy_qp(rb) || ibv_destroy_ah(ah))
		vp_die_errno("destroy");
	CHECK(ibv_destroy_srq(srq) == 0, "ud: destroy_srq");
}

/* ---- hostile SRQ rings ------------------------------------------------------------------- */

/* The SRQ doorbell as the provider rings it: POST_SRQ_RECV, no WR. */
static int srq_doorbell(struct ibv_srq *srq)
{
	struct ib_uverbs_post_srq_recv_resp resp;
	struct {
		struct ib_uverbs_cmd_hdr hdr;
		struct ib_uverbs_post_srq_recv cmd;
	} req;
	ssize_t n;

	memset(&req, 0, sizeof(req));
	req.hdr.command = IB_USER_VERBS_CMD_POST_SRQ_RECV;
	req.hdr.in_words = sizeof(req) / 4;
	req.hdr.out_words = sizeof(resp) / 4;
	req.cmd.response = (uintptr_t)&resp;
	req.cmd.srq_handle = srq->handle;
	req.cmd.wqe_size = sizeof(struct ib_uverbs_recv_wr);
	n = write(srq->context->cmd_fd, &req, sizeof(req));
	return n == (ssize_t)sizeof(req) ? 0 : n < 0 ? errno : EIO;
}

enum hostile { REWIND, AHEAD, BAD_ENTRY };

static void check_hostile(enum hostile how)
{
	static const char *names[] = { "rewound producer", "producer too far ahead",
				       "entry with too many SGEs" };
	const char *nm = names[how];
	struct ibv_srq *srq = srq_make(16, 2), *good = srq_make(4, 2);
	struct mbcf_ring_end *r = &to_msrq(srq)->rq.ring;
	struct ibv_qp *a[2], *b[2], *ga, *gb;
	struct ibv_wc wc[4];
	uint32_t prod;
	int i, n;

	for (i = 0; i < 2; i++) {
		a[i] = qp_make(&DA, IBV_QPT_RC, NULL);
		b[i] = qp_make(&DB, IBV_QPT_RC, srq);
		rc_connect(a[i], &DA, b[i], &DB, &dflt, &dflt);
	}
	ga = qp_make(&DA, IBV_QPT_RC, NULL);
	gb = qp_make(&DB, IBV_QPT_RC, good);
	rc_connect(ga, &DA, gb, &DB, &dflt, &dflt);
	post_srq_n(srq, 700, 4);
	send_msg(a[0], 0, 0, 0);
	expect_send_ok(nm, 0);
	expect_recv(nm, 700, b[0], 0, 0);
	send_msg(a[1], 1, 0, 1);
	expect_send_ok(nm, 1ULL << 32);
	expect_recv(nm, 701, b[1], 1, 0);
	ev_reset();

	/* the kernel has read 2 of 4 */
	prod = __atomic_load_n(mbcf_ring_prod(r), __ATOMIC_ACQUIRE);
	if (prod != r->idx || prod != 4)
		printf("  note: producer index %u, provider's %u\n", prod, r->idx);
	switch (how) {
	case REWIND:
		__atomic_store_n(mbcf_ring_prod(r), prod - 3, __ATOMIC_RELEASE);
		break;
	case AHEAD:
		/* idle: both pending receives taken first */
		send_msg(a[0], 0, 1, 2);
		expect_send_ok(nm, 1);
		expect_recv(nm, 702, b[0], 0, 1);
		send_msg(a[0], 0, 2, 3);
		expect_send_ok(nm, 2);
		expect_recv(nm, 703, b[0], 0, 2);
		ev_reset();
		__atomic_store_n(mbcf_ring_prod(r), prod + 17, __ATOMIC_RELEASE);
		CHECK(srq_doorbell(srq) == 0, "%s: the doorbell", nm);
		break;
	case BAD_ENTRY: {
		/* the next unread entry (2) claims one SGE more than max_sge */
		struct mbcf_recv_wqe *e = mbcf_ring_entry(r, prod - 2);

		e->num_sge = 3;
		break;
	}
	}
	if (how != AHEAD) {
		send_msg(a[0], 0, 1, 2);
		n = poll_n(DA.cq, wc, 1);
		CHECK(n == 1 && wc[0].status == IBV_WC_REM_OP_ERR && wc[0].wr_id == 1,
		      "%s: the message finds it broken: the sender gets %s", nm,
		      n ? ibv_wc_status_str(wc[0].status) : "no completion");
	}
	for (i = 0; i < 2; i++) {
		ev_wait(IBV_EVENT_QP_FATAL, b[i]);
		ev_wait(IBV_EVENT_QP_LAST_WQE_REACHED, b[i]);
	}
	ev_collect(QUIET_MS);
	CHECK(ev_count(IBV_EVENT_SRQ_ERR, srq) == 1 &&
	      ev_count(IBV_EVENT_QP_FATAL, b[0]) == 1 &&
	      ev_count(IBV_EVENT_QP_FATAL, b[1]) == 1 &&
	      ev_count(IBV_EVENT_QP_LAST_WQE_REACHED, b[0]) == 1 &&
	      ev_count(IBV_EVENT_QP_LAST_WQE_REACHED, b[1]) == 1 && nev_total == 5,
	      "%s: SRQ_ERR once, QP_FATAL and LAST_WQE_REACHED once on each "
	      "attached QP, nothing else (%d events: srq_err %d fatal %d/%d "
	      "last_wqe %d/%d)", nm, nev_total, ev_count(IBV_EVENT_SRQ_ERR, srq),
	      ev_count(IBV_EVENT_QP_FATAL, b[0]), ev_count(IBV_EVENT_QP_FATAL, b[1]),
	      ev_count(IBV_EVENT_QP_LAST_WQE_REACHED, b[0]),
	      ev_count(IBV_EVENT_QP_LAST_WQE_REACHED, b[1]));
	CHECK(vp_qp_state(b[0]) == IBV_QPS_ERR && vp_qp_state(b[1]) == IBV_QPS_ERR,
	      "%s: both attached QPs in ERR", nm);
	n = poll_quiet(DB.cq, wc, 4);
	CHECK(n == 0, "%s: no receive completion (%d)", nm, n);
	/* again and again: nothing more */
	for (i = 0; i < 100; i++)
		srq_doorbell(srq);
	ev_collect(QUIET_MS);
	CHECK(nev_total == 5, "%s: 100 doorbells later: no more events (%d)", nm,
	      nev_total);
	/* another SRQ of the process works */
	post_srq_n(good, 800, 1);
	send_msg(ga, 9, 0, 9);
	expect_send_ok("hostile: another SRQ", 9ULL << 32);
	expect_recv("hostile: another SRQ", 800, gb, 9, 0);

	/* the senders: a[0]'s connection failed with the NAK (REWIND,
	 * BAD_ENTRY) or will time out; destroy all */
	for (i = 0; i < 2; i++)
		if (ibv_destroy_qp(a[i]) || ibv_destroy_qp(b[i]))
			vp_die_errno("destroy_qp");
	if (ibv_destroy_qp(ga) || ibv_destroy_qp(gb))
		vp_die_errno("destroy_qp");
	CHECK(ibv_destroy_srq(srq) == 0 && ibv_destroy_srq(good) == 0,
	      "%s: destroy both SRQs", nm);
	ev_collect(0);
	/* what the errored QPs flushed on A (a[1]'s nothing) */
	while (ibv_poll_cq(DA.cq, 4, wc) > 0)
		;
}

/* ---- hold: resources for SIGKILL ------------------------------------------------------------ */

static void hold(void)
{
	struct ibv_srq *srq = srq_make(1024, 2), *dry = srq_make(16, 1);
	struct ibv_qp *a[5], *b[5];
	int i;

	for (i = 0; i < 5; i++) {
		a[i] = qp_make(&DA, IBV_QPT_RC, NULL);
		b[i] = qp_make(&DB, IBV_QPT_RC, i < 4 ? srq : dry);
		rc_connect(a[i], &DA, b[i], &DB, &dflt, &dflt);
	}
	post_srq_n(srq, 0, 1000);
	/* some taken, one message held by RNR on the dry SRQ */
	for (i = 0; i < 4; i++) {
		send_msg(a[i], i, 0, i);
		expect_send_ok("hold", (uint64_t)i << 32);
	}
	send_msg(a[4], 4, 0, 4);
	printf("ready srq 2 qp 5\n");
	fflush(stdout);
	for (;;)
		pause();
}

int main(int argc, char **argv)
{
	const char *da = "mbcf1", *db = "mbcf0";
	int c;

	setvbuf(stdout, NULL, _IOLBF, 0);
	while ((c = getopt(argc, argv, "a:b:")) != -1) {
		switch (c) {
		case 'a':
			da = optarg;
			break;
		case 'b':
			db = optarg;
			break;
		default:
			fprintf(stderr, "usage: %s [-a DEV] [-b DEV] check|hold\n",
				argv[0]);
			return 2;
		}
	}
	if (optind != argc - 1) {
		fprintf(stderr, "usage: %s [-a DEV] [-b DEV] check|hold\n", argv[0]);
		return 2;
	}
	dev_open(&DA, da);
	dev_open(&DB, db);
	if (!strcmp(argv[optind], "hold")) {
		hold();
		return 0;
	}
	if (strcmp(argv[optind], "check")) {
		fprintf(stderr, "unknown mode %s\n", argv[optind]);
		return 2;
	}
	check_limits();
	check_shared();
	check_dry_stream();
	check_limit();
	check_rnr();
	check_last_wqe();
	check_ud();
	check_hostile(REWIND);
	check_hostile(AHEAD);
	check_hostile(BAD_ENTRY);
	ev_collect(QUIET_MS);
	printf("srq_test: %d failure(s)\n", vp_fails);
	return vp_fails > 100 ? 100 : vp_fails;
}
