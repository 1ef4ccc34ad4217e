// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Hostile user space against mbcf's mapped rings, run in
 * the guest by tests/vm/rings.sh.
 *
 *   mbcf_ring_attack [-a DEV] [-b DEV] [-s SEED] [-k KEYFILE] [-D N] CASE|GROUP|all...
 *   mbcf_ring_attack [-a DEV] [-b DEV] [-s SEED] good KEYFILE STATUSFILE
 *
 * White box: the program includes the provider's header (provider/mbcf.h)
 * to reach the send, receive and completion rings the provider mapped, and
 * writes them directly, as any process may -- the rings are mapped
 * writable.  The doorbell is what the provider sends: a POST_SEND /
 * POST_RECV with no work request, written to the context's command fd.
 *
 * Every case builds a fresh connected pair: QP A (the one under attack) on
 * device -a (default mbcf1), its honest peer B on device -b (default
 * mbcf0); -a mbcf0 -b mbcf0 is the same-device loopback.  A case prints
 * "PASS <case> [A-B]: ..." or "FAIL <case> [A-B]: ..."; what it asserts:
 *  - the exact completions (wr_id, status, order) on both sides, and none
 *    beyond them;
 *  - both QPs' states (ibv_query_qp);
 *  - the exact asynchronous events of the case (QP_FATAL on A exactly when
 *    docs/design.md "Trust boundaries" promises it, CQ_ERR on a CQ overrun,
 *    nothing else on any object), counted after the case has also posted
 *    on the errored QP (every post after an error rings a doorbell);
 *  - every byte of every buffer both QPs can reach, and of the unregistered
 *    guard pages around them: each holds its own fill pattern except where
 *    the case expects the exact bytes of a registered source to land;
 *  - a witness pair in this process (the same devices, other QPs) still
 *    moves data (write + read back, every byte).
 * The exit status is the number of failed cases (capped at 100), 2 for
 * usage or setup errors.  `-l` lists cases and groups.
 *
 * Randomness (psns, fill patterns, sizes, garbage values) comes from the
 * seed (-s, printed at start); each case reseeds from (seed, case name), so
 * one case rerun alone with the same seed does the same thing.
 *
 * `good` is the other process of tests/vm/rings.sh: an honest pair moving
 * data (write, read back, send/receive; every byte compared) until SIGTERM,
 * publishing one of its MR keys and addresses on each device in KEYFILE
 * (the attacker tries them as lkeys) and its progress in STATUSFILE.  It
 * exits 0 only if every transfer was exact and it saw no error and no
 * asynchronous event.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <rdma/ib_user_verbs.h>

#include "vmprog.h"

#include "mbcf.h"	/* provider/mbcf.h: to_mqp(), to_mcq(), the ring ends */

#define PAGE		4096u
#define MIB		(1024u * 1024u)
#define WAIT_S		20.0	/* completions that must come (busy host) */
#define QUIET_S		0.2	/* completions that must not come */

static const char *dev_a = "mbcf1", *dev_b = "mbcf0";
static unsigned int seed;
static const char *keyfile;
static unsigned long storm_total = 1000000;	/* doorbells per storm */
static double storm_max_s = 40;			/* ... or this long */

/* ---- result of the current case -------------------------------------------- */

/* ---- randomness: one stream per case, from (seed, case name) ---------------- */

static unsigned int rs;

static uint32_t rnd(void)
{
	return (uint32_t)rand_r(&rs) ^ ((uint32_t)rand_r(&rs) << 16);
}

static void reseed(const char *name)
{
	uint32_t h = 2166136261u ^ seed;

	for (; *name; name++)
		h = (h ^ (uint8_t)*name) * 16777619u;
	rs = h;
}

/* ---- memory with known contents --------------------------------------------- */

/*
 * A registered buffer between two unregistered guard pages, with the image
 * every byte of the whole mapping must have: its fill pattern, except where
 * a case expects bytes to land.  Checking the image checks the guards too.
 */
struct region {
	const char *name;
	uint8_t *map;		/* guard page | len bytes | guard page */
	size_t map_len;
	uint8_t *p;		/* the registered bytes */
	size_t len;
	struct ibv_mr *mr;
	uint8_t *want;		/* expected image of map */
};

static uint8_t pat(uint32_t tag, size_t i)
{
	return (uint8_t)(tag + i * 7 + (i >> 8) + (i >> 16) * 13);
}

static void pat_fill(uint8_t *p, size_t len, uint32_t tag)
{
	size_t i;

	for (i = 0; i < len; i++)
		p[i] = pat(tag, i);
}

static void region_fill(struct region *r, uint32_t tag)
{
	size_t g = (size_t)(r->p - r->map);

	pat_fill(r->map, g, tag ^ 0xa5);
	pat_fill(r->p, r->len, tag);
	pat_fill(r->p + r->len, r->map_len - g - r->len, tag ^ 0x5a);
	memcpy(r->want, r->map, r->map_len);
}

static void region_new(struct region *r, const char *name, struct ibv_pd *pd,
		       size_t len, int access)
{
	r->name = name;
	r->len = len;
	r->map_len = (len + 2 * PAGE + PAGE - 1) & ~(size_t)(PAGE - 1);
	r->map = mmap(NULL, r->map_len, PROT_READ | PROT_WRITE,
		      MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (r->map == MAP_FAILED)
		vp_die_errno("mmap");
	r->p = r->map + PAGE;
	r->want = malloc(r->map_len);
	if (!r->want)
		vp_die_errno("malloc");
	region_fill(r, rnd());
	r->mr = ibv_reg_mr(pd, r->p, len, access);
	if (!r->mr)
		vp_die_errno("ibv_reg_mr");
}

static void region_free(struct region *r)
{
	if (!r->map)
		return;
	if (r->mr && ibv_dereg_mr(r->mr))
		vp_die_errno("ibv_dereg_mr");
	munmap(r->map, r->map_len);
	free(r->want);
	memset(r, 0, sizeof(*r));
}

/* n bytes from src must now be at offset off of the registered bytes. */
static void region_expect(struct region *r, size_t off, const void *src, size_t n)
{
	memcpy(r->want + (r->p - r->map) + off, src, n);
}

static uint64_t region_addr(const struct region *r, size_t off)
{
	return (uintptr_t)(r->p + off);
}

/* Every byte of the mapping against the image; reports the first diff. */
static void region_check(const struct region *r, const char *what)
{
	size_t i, g = (size_t)(r->p - r->map), bad = 0, first = 0;

	if (!r->map || !memcmp(r->map, r->want, r->map_len))
		return;
	for (i = 0; i < r->map_len; i++)
		if (r->map[i] != r->want[i] && !bad++)
			first = i;
	vc_fail("%s: %s: %zu byte(s) differ, first at %s%ld (got %02x want %02x; "
	     "got %02x %02x %02x %02x %02x %02x %02x %02x)", what, r->name, bad,
	     first < g ? "guard " : first >= g + r->len ? "end guard +" : "",
	     first < g ? (long)first - (long)g : first >= g + r->len ?
	     (long)(first - g - r->len) : (long)(first - g),
	     r->map[first], r->want[first], r->map[first],
	     first + 1 < r->map_len ? r->map[first + 1] : 0,
	     first + 2 < r->map_len ? r->map[first + 2] : 0,
	     first + 3 < r->map_len ? r->map[first + 3] : 0,
	     first + 4 < r->map_len ? r->map[first + 4] : 0,
	     first + 5 < r->map_len ? r->map[first + 5] : 0,
	     first + 6 < r->map_len ? r->map[first + 6] : 0,
	     first + 7 < r->map_len ? r->map[first + 7] : 0);
}

/*
 * A message from src whose transfer was cut short (flushed mid-way): the
 * receiver accepts frames in order, so what landed at off is a prefix of
 * the message and the rest is untouched.  Accepts exactly that (returns the
 * prefix length) and records it in the image.
 */
/*
 * Wait until the n bytes at r+off stop changing (two looks 0.2 s apart, the
 * gap × VM_TIME_SCALE, within WAIT_S × VM_TIME_SCALE): frames a sender put
 * on the wire before its request was flushed may still land at the
 * responder after the flush completion (a debug kernel under TCG drains its
 * receive backlog slowly).  Whatever landed is then checked exactly.
 */
static void region_settle(struct region *r, size_t off, size_t n, const char *what)
{
	uint8_t *snap = malloc(n);
	double end = vp_now() + WAIT_S * vp_time_scale();

	if (!snap)
		vp_die_errno("malloc");
	for (;;) {
		memcpy(snap, r->p + off, n);
		vp_sleep_us((long)(200000 * vp_time_scale()));
		if (!memcmp(snap, r->p + off, n))
			break;
		if (vp_now() > end) {
			vc_fail("%s: %s still changing after %.0f s", what, r->name,
			     WAIT_S * vp_time_scale());
			break;
		}
	}
	free(snap);
}

static size_t region_expect_prefix(struct region *r, size_t off,
				   const uint8_t *src, size_t n)
{
	size_t k = 0;

	while (k < n && r->p[off + k] == src[k])
		k++;
	region_expect(r, off, src, k);
	return k;
}

/* ---- devices, QPs, connections ------------------------------------------------ */

struct dev {
	const char *name;
	struct ibv_context *ctx;
	struct ibv_pd *pd, *pd2;	/* pd2: "another PD" for lkey cases */
	union ibv_gid gid;
};

static struct dev DA, DB;

static void dev_open(struct dev *d, const char *name)
{
	d->name = name;
	d->ctx = vp_open(name);
	/* Events are read with poll() + non-blocking ibv_get_async_event. */
	if (fcntl(d->ctx->async_fd, F_SETFL,
		  fcntl(d->ctx->async_fd, F_GETFL) | O_NONBLOCK))
		vp_die_errno("fcntl(async_fd)");
	d->pd = ibv_alloc_pd(d->ctx);
	d->pd2 = ibv_alloc_pd(d->ctx);
	if (!d->pd || !d->pd2)
		vp_die_errno("ibv_alloc_pd");
	if (ibv_query_gid(d->ctx, 1, 0, &d->gid))
		vp_die_errno("ibv_query_gid");
}

static void dev_close(struct dev *d)
{
	if (ibv_dealloc_pd(d->pd2) || ibv_dealloc_pd(d->pd))
		vp_die_errno("ibv_dealloc_pd");
	if (ibv_close_device(d->ctx))
		vp_die_errno("ibv_close_device");
	memset(d, 0, sizeof(*d));
}

struct qp_opts {
	uint32_t send_wr, recv_wr, send_sge, recv_sge, inline_data;
	int cqe;
	uint8_t timeout, retry_cnt, rnr_retry, min_rnr_timer;
};

static const struct qp_opts dflt = {
	.send_wr = 16, .recv_wr = 16, .send_sge = 4, .recv_sge = 4,
	.inline_data = 64, .cqe = 64,
	.timeout = 14,		/* 67 ms */
	.retry_cnt = 7, .rnr_retry = 7,	/* 7: RNR holds requests forever */
	.min_rnr_timer = 14,	/* 1.28 ms between RNR retries */
};

struct side {
	const char *name;
	struct dev *d;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct ibv_qp_cap cap;	/* what the kernel granted */
	int cqe;		/* CQ ring entries */
	uint32_t psn;
	struct qp_opts o;
};

static struct side A, B;

static void side_make(struct side *s, const char *name, struct dev *d,
		      const struct qp_opts *o)
{
	struct ibv_qp_init_attr ia = {
		.qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = o->send_wr, .max_recv_wr = o->recv_wr,
			 .max_send_sge = o->send_sge, .max_recv_sge = o->recv_sge,
			 .max_inline_data = o->inline_data },
	};

	s->name = name;
	s->d = d;
	s->o = *o;
	s->cq = ibv_create_cq(d->ctx, o->cqe, NULL, NULL, 0);
	if (!s->cq)
		vp_die_errno("ibv_create_cq");
	s->cqe = s->cq->cqe;
	ia.send_cq = ia.recv_cq = s->cq;
	s->qp = ibv_create_qp(d->pd, &ia);
	if (!s->qp)
		vp_die_errno("ibv_create_qp");
	s->cap = ia.cap;
	s->psn = rnd() & 0xffffff;
}

static void side_free(struct side *s)
{
	if (s->qp && ibv_destroy_qp(s->qp))
		vp_die_errno("ibv_destroy_qp");
	if (s->cq && ibv_destroy_cq(s->cq))
		vp_die_errno("ibv_destroy_cq");
	s->qp = NULL;
	s->cq = NULL;
}

static int side_modify(struct side *s, struct ibv_qp_attr *a, int mask)
{
	int ret = ibv_modify_qp(s->qp, a, mask);

	if (ret)
		errno = ret;
	return ret;
}

static int to_init(struct side *s)
{
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_INIT, .port_num = 1,
		.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
				   IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC,
	};

	return side_modify(s, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX |
			   IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
}

static int to_rtr(struct side *s, const struct side *peer)
{
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_RTR, .path_mtu = IBV_MTU_1024,
		.dest_qp_num = peer->qp->qp_num, .rq_psn = peer->psn,
		.max_dest_rd_atomic = 16, .min_rnr_timer = s->o.min_rnr_timer,
		.ah_attr = { .is_global = 1, .port_num = 1,
			     .grh = { .dgid = peer->d->gid, .hop_limit = 1 } },
	};

	return side_modify(s, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
			   IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
			   IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
}

static int to_rts(struct side *s)
{
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_RTS, .sq_psn = s->psn,
		.timeout = s->o.timeout, .retry_cnt = s->o.retry_cnt,
		.rnr_retry = s->o.rnr_retry, .max_rd_atomic = 16,
	};

	return side_modify(s, &a, IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT |
			   IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
			   IBV_QP_MAX_QP_RD_ATOMIC);
}

static void connect_pair(struct side *x, struct side *y)
{
	if (to_init(x) || to_init(y) || to_rtr(x, y) || to_rtr(y, x) ||
	    to_rts(x) || to_rts(y))
		vp_die_errno("connect (ibv_modify_qp)");
}

/* A fresh pair: A (attacked) on DA, B (its honest peer) on DB. */
static void pair_up2(const struct qp_opts *oa, const struct qp_opts *ob)
{
	side_make(&A, "A", &DA, oa);
	side_make(&B, "B", &DB, ob);
	connect_pair(&A, &B);
}

static void pair_up(void)
{
	pair_up2(&dflt, &dflt);
}

static void pair_down(void)
{
	side_free(&A);
	side_free(&B);
}

/* ---- asynchronous events ------------------------------------------------------- */

/* Events seen since ev_reset(), by (type, object). */
struct ev_rec {
	int type;
	const void *obj;	/* ibv_qp, ibv_cq, or NULL (port, device) */
	int n;
};

static struct ev_rec evs[32];
static int nevs;

static const void *ev_obj(const struct ibv_async_event *e)
{
	switch (e->event_type) {
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

static void ev_tally(int type, const void *obj)
{
	int i;

	for (i = 0; i < nevs; i++)
		if (evs[i].type == type && evs[i].obj == obj) {
			evs[i].n++;
			return;
		}
	if (nevs < (int)(sizeof(evs) / sizeof(evs[0])))
		evs[nevs++] = (struct ev_rec){ type, obj, 1 };
}

/* Read (and acknowledge) what is queued on d, at most `max` events. */
static long ev_read(struct dev *d, long max)
{
	struct ibv_async_event e;
	long n = 0;

	while (n < max && !ibv_get_async_event(d->ctx, &e)) {
		ev_tally(e.event_type, ev_obj(&e));
		ibv_ack_async_event(&e);
		n++;
	}
	return n;
}

/*
 * Collect events until neither device reported one for quiet_s.  A flood
 * is cut at 10^6 events (each read is a system call); the counts then say
 * "at least".
 */
static void ev_collect(double quiet_s)
{
	struct pollfd pf[2] = {
		{ .fd = DA.ctx->async_fd, .events = POLLIN },
		{ .fd = DB.ctx->async_fd, .events = POLLIN },
	};
	long total = 0;

	while (total < 1000000 && poll(pf, 2, (int)(quiet_s * 1000)) > 0) {
		total += ev_read(&DA, 1000000 - total);
		total += ev_read(&DB, 1000000 - total);
	}
}

static void ev_reset(void)
{
	ev_collect(0);
	nevs = 0;
}

static int ev_count(int type, const void *obj)
{
	int i;

	for (i = 0; i < nevs; i++)
		if (evs[i].type == type && evs[i].obj == obj)
			return evs[i].n;
	return 0;
}

/* Wait up to timeout_s until at least n events (type, obj) were seen. */
static void ev_wait(int type, const void *obj, int n, double timeout_s)
{
	double end = vp_now() + timeout_s * vp_time_scale();

	while (ev_count(type, obj) < n && vp_now() < end)
		ev_collect(0.01);
}

static const char *ev_name(const void *obj)
{
	if (obj && (obj == A.qp || obj == A.cq))
		return "A";
	if (obj && (obj == B.qp || obj == B.cq))
		return "B";
	return obj ? "another object" : "the device/port";
}

/*
 * Exactly these events and no other: QP_FATAL on A `fatal` times, CQ_ERR
 * on A's CQ `a_cq_err` times, on B's CQ `b_cq_err` times.
 */
static void ev_expect(int fatal, int a_cq_err, int b_cq_err, const char *what)
{
	int i, want;

	ev_collect(0.05);
	for (i = 0; i < nevs; i++) {
		want = 0;
		if (evs[i].type == IBV_EVENT_QP_FATAL && evs[i].obj == A.qp)
			want = fatal;
		else if (evs[i].type == IBV_EVENT_CQ_ERR && evs[i].obj == A.cq)
			want = a_cq_err;
		else if (evs[i].type == IBV_EVENT_CQ_ERR && evs[i].obj == B.cq)
			want = b_cq_err;
		if (evs[i].n != want)
			vc_fail("%s: %d x %s on %s, expected %d", what, evs[i].n,
			     ibv_event_type_str(evs[i].type), ev_name(evs[i].obj),
			     want);
	}
	if (fatal && !ev_count(IBV_EVENT_QP_FATAL, A.qp))
		vc_fail("%s: no QP_FATAL on A, expected %d", what, fatal);
	if (a_cq_err && !ev_count(IBV_EVENT_CQ_ERR, A.cq))
		vc_fail("%s: no CQ_ERR on A's CQ, expected %d", what, a_cq_err);
	if (b_cq_err && !ev_count(IBV_EVENT_CQ_ERR, B.cq))
		vc_fail("%s: no CQ_ERR on B's CQ, expected %d", what, b_cq_err);
}

/* ---- posting through the provider (the honest way) -------------------------------- */

static struct ibv_sge sge_of(const struct region *r, size_t off, uint32_t len)
{
	return (struct ibv_sge){ .addr = region_addr(r, off), .length = len,
				 .lkey = r->mr->lkey };
}

static int post_wr(struct side *s, struct ibv_send_wr *wr, const char *what)
{
	struct ibv_send_wr *bad;
	int ret = ibv_post_send(s->qp, wr, &bad);

	if (ret)
		vc_fail("%s: ibv_post_send on %s: %s", what, s->name, strerror(ret));
	return ret;
}

/* One signaled RDMA WRITE of len bytes, local (l, loff) -> remote (r, roff). */
static int post_write(struct side *s, uint64_t wr_id, const struct region *l,
		      size_t loff, const struct region *r, size_t roff,
		      uint32_t len, const char *what)
{
	struct ibv_sge sg = sge_of(l, loff, len);
	struct ibv_send_wr wr = {
		.wr_id = wr_id, .sg_list = &sg, .num_sge = 1,
		.opcode = IBV_WR_RDMA_WRITE, .send_flags = IBV_SEND_SIGNALED,
		.wr.rdma = { .remote_addr = region_addr(r, roff), .rkey = r->mr->rkey },
	};

	return post_wr(s, &wr, what);
}

static int post_read(struct side *s, uint64_t wr_id, const struct region *l,
		     size_t loff, const struct region *r, size_t roff,
		     uint32_t len, const char *what)
{
	struct ibv_sge sg = sge_of(l, loff, len);
	struct ibv_send_wr wr = {
		.wr_id = wr_id, .sg_list = &sg, .num_sge = 1,
		.opcode = IBV_WR_RDMA_READ, .send_flags = IBV_SEND_SIGNALED,
		.wr.rdma = { .remote_addr = region_addr(r, roff), .rkey = r->mr->rkey },
	};

	return post_wr(s, &wr, what);
}

static int post_send_sg(struct side *s, uint64_t wr_id, struct ibv_sge *sg,
			int nsge, unsigned int flags, const char *what)
{
	struct ibv_send_wr wr = {
		.wr_id = wr_id, .sg_list = sg, .num_sge = nsge,
		.opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED | flags,
	};

	return post_wr(s, &wr, what);
}

static int post_send1(struct side *s, uint64_t wr_id, const struct region *l,
		      size_t loff, uint32_t len, const char *what)
{
	struct ibv_sge sg = sge_of(l, loff, len);

	return post_send_sg(s, wr_id, &sg, 1, 0, what);
}

static int post_recv1(struct side *s, uint64_t wr_id, const struct region *l,
		      size_t loff, uint32_t len, const char *what)
{
	struct ibv_sge sg = sge_of(l, loff, len);
	struct ibv_recv_wr wr = { .wr_id = wr_id, .sg_list = &sg, .num_sge = 1 }, *bad;
	int ret = ibv_post_recv(s->qp, &wr, &bad);

	if (ret)
		vc_fail("%s: ibv_post_recv on %s: %s", what, s->name, strerror(ret));
	return ret;
}

/* ---- completions and states ------------------------------------------------------- */

/* One completion from s's CQ within timeout_s: 1, else 0. */
static int get_wc(struct side *s, struct ibv_wc *wc, double timeout_s)
{
	double end = vp_now() + timeout_s * vp_time_scale();
	int n;

	for (;;) {
		n = ibv_poll_cq(s->cq, 1, wc);
		if (n < 0) {
			vc_fail("ibv_poll_cq on %s: %s", s->name, strerror(errno));
			return 0;
		}
		if (n == 1)
			return 1;
		if (vp_now() > end)
			return 0;
		vp_sleep_us(100);
	}
}

static void expect_no_wc(struct side *s, double wait_s, const char *what)
{
	struct ibv_wc wc;

	if (get_wc(s, &wc, wait_s))
		vc_fail("%s: unexpected completion on %s (wr_id %#" PRIx64 ", %s)",
		     what, s->name, wc.wr_id, ibv_wc_status_str(wc.status));
}

/* The next completion on s is wr_id with status (and opcode op if >= 0). */
static int expect_wc(struct side *s, uint64_t wr_id, enum ibv_wc_status status,
		     int op, const char *what)
{
	struct ibv_wc wc;

	if (!get_wc(s, &wc, WAIT_S)) {
		vc_fail("%s: expected wr_id %#" PRIx64 " %s on %s, got no completion "
		     "in %.0f s", what, wr_id, ibv_wc_status_str(status), s->name,
		     WAIT_S);
		return -1;
	}
	if (wc.wr_id != wr_id || wc.status != status || wc.qp_num != s->qp->qp_num ||
	    (op >= 0 && wc.opcode != (enum ibv_wc_opcode)op)) {
		vc_fail("%s: expected wr_id %#" PRIx64 " %s (op %d) on %s, got wr_id "
		     "%#" PRIx64 " %s (op %d, qp %u)", what, wr_id,
		     ibv_wc_status_str(status), op, s->name, wc.wr_id,
		     ibv_wc_status_str(wc.status), wc.opcode, wc.qp_num);
		return -1;
	}
	return 0;
}

static void expect_state(struct side *s, enum ibv_qp_state want, const char *what)
{
	vc_expect_qp_state(s->qp, s->name, want, what);
}

/* ---- the rings, written directly (the attack surface) --------------------------- */

static struct mbcf_wq *sq_of(const struct side *s)
{
	return &to_mqp(s->qp)->sq;
}

static struct mbcf_wq *rq_of(const struct side *s)
{
	return &to_mqp(s->qp)->rq;
}

static struct mbcf_ring_end *cq_of(const struct side *s)
{
	return &to_mcq(s->cq)->ring;
}

static uint32_t ring_n(const struct mbcf_ring_end *r)
{
	return r->mask + 1;
}

static uint32_t ld32(uint32_t *p)
{
	return __atomic_load_n(p, __ATOMIC_ACQUIRE);
}

static void st32(uint32_t *p, uint32_t v)
{
	__atomic_store_n(p, v, __ATOMIC_RELEASE);
}

/* The kernel's consumer index of a send/receive ring (what it released). */
static uint32_t kcons(const struct mbcf_wq *q)
{
	return ld32(mbcf_ring_cons(&q->ring));
}

/* The hostile store: a producer index the provider would never publish. */
static void set_prod(struct mbcf_wq *q, uint32_t v)
{
	st32(mbcf_ring_prod(&q->ring), v);
}

/*
 * The provider keeps its own producer index; after the test moved the
 * ring's, make the provider continue from there (or the provider, not the
 * kernel, would refuse the next post).
 */
static void sync_provider(struct mbcf_wq *q)
{
	q->ring.idx = ld32(mbcf_ring_prod(&q->ring));
}

static int doorbell(const struct side *s, uint32_t command)
{
	return vp_doorbell(s->qp->context, s->qp->handle, command);
}

static void ring_sq(const struct side *s, const char *what)
{
	int err = doorbell(s, IB_USER_VERBS_CMD_POST_SEND);

	if (err)
		vc_fail("%s: send doorbell on %s: %s", what, s->name, strerror(err));
}

/* A send entry exactly as the test wants it in the slot. */
struct raw_send {
	uint64_t wr_id;
	uint32_t opcode, flags, num_sge, inline_len, imm;
	uint64_t raddr, compare_add, swap;
	uint32_t rkey;
	uint32_t nsg;			/* SGEs to store (as many as fit) */
	struct mbcf_sge sg[16];
	const uint8_t *inl;		/* bytes to store as inline data */
	uint32_t inl_len;
};

/* Bytes of SGEs or inline data a slot of this ring holds after the header. */
static uint32_t send_room(const struct mbcf_wq *q)
{
	return q->ring.stride - (uint32_t)sizeof(struct mbcf_send_wqe);
}

static void raw_fill_send(struct mbcf_wq *q, uint32_t idx, const struct raw_send *r)
{
	struct mbcf_send_wqe *w = mbcf_ring_entry(&q->ring, idx);
	uint32_t room = send_room(q);

	memset(w, 0, q->ring.stride);
	w->wr_id = r->wr_id;
	w->opcode = r->opcode;
	w->send_flags = r->flags;
	w->imm_data_be = r->imm;
	w->num_sge = r->num_sge;
	w->remote_addr = r->raddr;
	w->rkey = r->rkey;
	w->inline_len = r->inline_len;
	w->compare_add = r->compare_add;
	w->swap = r->swap;
	if (r->inl)
		memcpy(w->inline_data, r->inl, r->inl_len < room ? r->inl_len : room);
	else
		memcpy(w->sge, r->sg, (r->nsg * 16 < room ? r->nsg * 16 : room));
}

/* Store r at the provider's producer index and publish it (no doorbell). */
static void raw_post_send(struct side *s, const struct raw_send *r)
{
	struct mbcf_wq *q = sq_of(s);

	if (q->ring.idx - kcons(q) >= ring_n(&q->ring))
		vc_fail("raw_post_send: %s's send ring is full", s->name);
	raw_fill_send(q, q->ring.idx, r);
	mbcf_ring_produce(&q->ring);
}

struct raw_recv {
	uint64_t wr_id;
	uint32_t num_sge;
	uint32_t nsg;
	struct mbcf_sge sg[16];
};

static void raw_fill_recv(struct mbcf_wq *q, uint32_t idx, const struct raw_recv *r)
{
	struct mbcf_recv_wqe *w = mbcf_ring_entry(&q->ring, idx);
	uint32_t room = q->ring.stride - (uint32_t)sizeof(*w);

	memset(w, 0, q->ring.stride);
	w->wr_id = r->wr_id;
	w->num_sge = r->num_sge;
	memcpy(w->sge, r->sg, r->nsg * 16 < room ? r->nsg * 16 : room);
}

static void raw_post_recv(struct side *s, const struct raw_recv *r)
{
	struct mbcf_wq *q = rq_of(s);

	if (q->ring.idx - kcons(q) >= ring_n(&q->ring))
		vc_fail("raw_post_recv: %s's receive ring is full", s->name);
	raw_fill_recv(q, q->ring.idx, r);
	mbcf_ring_produce(&q->ring);
}

static struct mbcf_sge msge(const struct region *r, size_t off, uint32_t len)
{
	return (struct mbcf_sge){ .addr = region_addr(r, off), .length = len,
				  .lkey = r->mr->lkey };
}

/* ---- /proc/self/maps ------------------------------------------------------------ */

/* The file offset of the mapping that starts at addr (the ring's mmap offset). */
static int map_offset(const void *addr, uint64_t *off)
{
	FILE *f = fopen("/proc/self/maps", "r");
	unsigned long s, e;
	unsigned long long o;
	char line[512], perms[8];
	int found = 0;

	if (!f)
		return 0;
	while (!found && fgets(line, sizeof(line), f))
		if (sscanf(line, "%lx-%lx %7s %llx", &s, &e, perms, &o) == 4 &&
		    s == (unsigned long)addr) {
			*off = o;
			found = 1;
		}
	fclose(f);
	return found;
}

/* How many mappings of uverbs devices the process has. */
static int uverbs_maps(void)
{
	FILE *f = fopen("/proc/self/maps", "r");
	char line[512];
	int n = 0;

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		n += strstr(line, "/dev/infiniband/uverbs") != NULL;
	fclose(f);
	return n;
}

/* ---- the buffers of a pass --------------------------------------------------------- */

#define RW_ALL	(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | \
		 IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC)
#define BIG	(16 * MIB)

/* A's side (device -a): sources, receive buffers, an MR of another PD, a
 * read-only MR; B's side (device -b): the target of writes, its sources and
 * receive buffers.  Refilled with fresh patterns before every case. */
static struct region RA_src, RA_rcv, RA_pd2, RA_ro, RB_dst, RB_src, RB_rcv;
static struct region RA_big, RB_big;	/* 16 MiB each, made on first use */
/* Refilled and checked around every case (the big ones only by theirs). */
static struct region *all_regions[] = {
	&RA_src, &RA_rcv, &RA_pd2, &RA_ro, &RB_dst, &RB_src, &RB_rcv,
};

#define NREGIONS (sizeof(all_regions) / sizeof(all_regions[0]))

static void regions_make(void)
{
	region_new(&RA_src, "A src", DA.pd, MIB, RW_ALL);
	region_new(&RA_rcv, "A rcv", DA.pd, MIB, RW_ALL);
	region_new(&RA_pd2, "A pd2", DA.pd2, 64 * 1024, IBV_ACCESS_LOCAL_WRITE);
	region_new(&RA_ro, "A read-only", DA.pd, 64 * 1024, 0);
	region_new(&RB_dst, "B dst", DB.pd, 2 * MIB, RW_ALL);
	region_new(&RB_src, "B src", DB.pd, MIB, IBV_ACCESS_LOCAL_WRITE);
	region_new(&RB_rcv, "B rcv", DB.pd, MIB, RW_ALL);
}

/* The 16 MiB buffers, fresh patterns (a case that uses them checks them). */
static void regions_big(void)
{
	if (!RA_big.map) {
		region_new(&RA_big, "A big", DA.pd, BIG, RW_ALL);
		region_new(&RB_big, "B big", DB.pd, BIG, RW_ALL);
	} else {
		region_fill(&RA_big, rnd());
		region_fill(&RB_big, rnd());
	}
}

static void regions_big_check(const char *what)
{
	region_check(&RA_big, what);
	region_check(&RB_big, what);
}

static void regions_refill(void)
{
	size_t i;

	for (i = 0; i < NREGIONS; i++)
		if (all_regions[i]->map)
			region_fill(all_regions[i], rnd());
}

static void regions_check(const char *what)
{
	size_t i;

	for (i = 0; i < NREGIONS; i++)
		region_check(all_regions[i], what);
}

static void regions_free(void)
{
	size_t i;

	for (i = 0; i < NREGIONS; i++)
		region_free(all_regions[i]);
	region_free(&RA_big);
	region_free(&RB_big);
}

/* ---- the witness: another pair on the same devices keeps moving data -------------- */

static struct side W, X;		/* W on DA, X on DB */
static struct region RW_src, RW_back, RX_dst;
static unsigned int wit_rs;		/* the witness's own random stream */
static unsigned long wit_ok;

/*
 * One exact round trip: fresh random bytes in W's buffer, RDMA WRITE to X,
 * RDMA READ back into another buffer of W; both copies compared.  Runs in
 * the main thread between cases and in a thread during storms.
 */
static int witness_once(const char *what)
{
	size_t len = 1 + (size_t)rand_r(&wit_rs) % (64 * 1024);
	size_t off = (size_t)rand_r(&wit_rs) % (RW_src.len - len);
	struct ibv_wc wc;
	size_t i;

	for (i = 0; i < len; i++)
		RW_src.p[off + i] = (uint8_t)rand_r(&wit_rs);
	memset(RW_back.p + off, 0, len);
	if (post_write(&W, 1, &RW_src, off, &RX_dst, off, (uint32_t)len, what) ||
	    post_read(&W, 2, &RW_back, off, &RX_dst, off, (uint32_t)len, what))
		return 0;
	for (i = 1; i <= 2; i++) {
		if (!get_wc(&W, &wc, WAIT_S)) {
			vc_fail("%s: witness: no completion in %.0f s", what, WAIT_S);
			return 0;
		}
		if (wc.status != IBV_WC_SUCCESS || wc.wr_id != i) {
			vc_fail("%s: witness: wr_id %" PRIu64 " %s", what, wc.wr_id,
			     ibv_wc_status_str(wc.status));
			return 0;
		}
	}
	if (memcmp(RX_dst.p + off, RW_src.p + off, len) ||
	    memcmp(RW_back.p + off, RW_src.p + off, len)) {
		vc_fail("%s: witness: %zu bytes at %zu came back different", what,
		     len, off);
		return 0;
	}
	wit_ok++;
	return 1;
}

static void witness_make(void)
{
	side_make(&W, "W", &DA, &dflt);
	side_make(&X, "X", &DB, &dflt);
	connect_pair(&W, &X);
	region_new(&RW_src, "W src", DA.pd, 256 * 1024, IBV_ACCESS_LOCAL_WRITE);
	region_new(&RW_back, "W back", DA.pd, 256 * 1024, IBV_ACCESS_LOCAL_WRITE);
	region_new(&RX_dst, "X dst", DB.pd, 256 * 1024, RW_ALL);
	wit_rs = seed ^ 0x77177;
}

static void witness_free(void)
{
	side_free(&W);
	side_free(&X);
	region_free(&RW_src);
	region_free(&RW_back);
	region_free(&RX_dst);
}

struct witness_run {
	pthread_t t;
	volatile int stop;
	unsigned long ok;
	const char *what;
};

static void *witness_thread(void *arg)
{
	struct witness_run *w = arg;

	while (!w->stop && witness_once(w->what))
		w->ok++;
	return NULL;
}

static void witness_start(struct witness_run *w, const char *what)
{
	memset(w, 0, sizeof(*w));
	w->what = what;
	if (pthread_create(&w->t, NULL, witness_thread, w))
		vp_die_errno("pthread_create");
}

/* Stop it; it must have completed at least `min` round trips meanwhile. */
static void witness_stop(struct witness_run *w, unsigned long min)
{
	w->stop = 1;
	pthread_join(w->t, NULL);
	if (w->ok < min)
		vc_fail("%s: the witness pair completed %lu round trips meanwhile, "
		     "expected at least %lu", w->what, w->ok, min);
	vc_note("witness %lu round trips meanwhile", w->ok);
}

/* ---- threads that write slots while the kernel works --------------------------------- */

struct scribbler {
	pthread_t t;
	volatile int stop;
	uint8_t *slot[4];
	size_t len;		/* bytes per slot */
	int n;			/* slots to rewrite (0: only the trigger) */
	unsigned int rs;
	volatile unsigned long iters;
	/*
	 * Optional trigger: wait until the 8 bytes at `watch` equal `seen`
	 * (a message's first bytes have landed, so the kernel has taken the
	 * request), then store `prod_val` at `prod`, then start rewriting.
	 * A request is attacked while the kernel moves it, even when the
	 * whole transfer runs inside one doorbell system call.
	 */
	const uint8_t *watch;
	uint8_t seen[8];
	uint32_t *prod, prod_val;
	volatile int fired;
};

/*
 * Rewrite the slots over and over: random bytes, then the values that hurt
 * most if the kernel read them again (all-ones counts and lengths, the
 * inline flag, kernel addresses, an unknown opcode).
 */
static void *scribble_thread(void *arg)
{
	struct scribbler *s = arg;
	uint64_t words[64];
	int i, k;

	while (s->watch && !s->stop &&
	       memcmp((const void *)s->watch, s->seen, sizeof(s->seen)))
		__atomic_thread_fence(__ATOMIC_ACQUIRE);
	if (s->stop)
		return NULL;
	if (s->prod)
		st32(s->prod, s->prod_val);
	s->fired = 1;
	while (!s->stop && s->n) {
		for (i = 0; i < s->n; i++) {
			uint8_t *p = s->slot[i];
			size_t n = s->len < sizeof(words) ? s->len : sizeof(words);

			for (k = 0; k < 64; k++)
				words[k] = (uint64_t)rand_r(&s->rs) << 33 ^
					   (uint64_t)rand_r(&s->rs);
			if (s->iters & 1) {
				/* a send header, hostile field by field */
				words[1] = 0xffffffff00000000ull | 0x8;	/* flags INLINE, opcode 0 */
				words[2] = 0xffffffff00000000ull;	/* num_sge */
				words[4] = 0xffffffff00000000ull;	/* inline_len */
				words[7] = 0xffff888000000000ull;	/* sge[0].addr */
				words[8] = 0xffffffffffffffffull;	/* sge[0] length, lkey */
			}
			memcpy(p, words, n);
			if (s->len > n)
				memset(p + n, (int)s->iters, s->len - n);
		}
		__atomic_thread_fence(__ATOMIC_SEQ_CST);
		s->iters++;
	}
	return NULL;
}

static void scribble_start(struct scribbler *s)
{
	s->stop = 0;
	s->iters = 0;
	s->fired = 0;
	s->rs = rnd();
	if (pthread_create(&s->t, NULL, scribble_thread, s))
		vp_die_errno("pthread_create");
}

static unsigned long scribble_stop(struct scribbler *s)
{
	s->stop = 1;
	pthread_join(s->t, NULL);
	return s->iters;
}

/* Doorbells as fast as a thread can write them. */
struct storm {
	pthread_t t;
	struct ibv_context *ctx;
	uint32_t handle;
	unsigned long count;	/* doorbells to ring */
	double deadline;
	unsigned long done, errs;
	int last_err;
	int *finished;		/* threads done, shared */
};

static void *storm_thread(void *arg)
{
	struct storm *s = arg;
	int err;

	while (s->done < s->count) {
		err = vp_doorbell(s->ctx, s->handle, s->done & 1 ?
				 IB_USER_VERBS_CMD_POST_RECV :
				 IB_USER_VERBS_CMD_POST_SEND);
		if (err) {
			s->errs++;
			s->last_err = err;
		}
		s->done++;
		if (!(s->done & 1023) && vp_now() > s->deadline)
			break;
	}
	__atomic_add_fetch(s->finished, 1, __ATOMIC_RELEASE);
	return NULL;
}

/*
 * Two threads ring `total` doorbells on A (send and receive alternately,
 * at most storm_max_s) while this thread calls step() over and over;
 * returns the doorbells rung.
 */
static unsigned long storm_run(unsigned long total, void (*step)(void),
			       const char *what)
{
	struct storm st[2];
	int finished = 0, i;
	double t0 = vp_now();
	unsigned long done = 0;

	for (i = 0; i < 2; i++) {
		st[i] = (struct storm){
			.ctx = A.qp->context, .handle = A.qp->handle,
			.count = total / 2, .deadline = t0 + storm_max_s,
			.finished = &finished,
		};
		if (pthread_create(&st[i].t, NULL, storm_thread, &st[i]))
			vp_die_errno("pthread_create");
	}
	while (__atomic_load_n(&finished, __ATOMIC_ACQUIRE) < 2) {
		if (step)
			step();
		else
			vp_sleep_us(10000);
	}
	for (i = 0; i < 2; i++) {
		pthread_join(st[i].t, NULL);
		done += st[i].done;
		if (st[i].errs)
			vc_fail("%s: %lu doorbell(s) failed (%s)", what, st[i].errs,
			     strerror(st[i].last_err));
	}
	vc_note("%lu doorbells in %.1f s", done, vp_now() - t0);
	return done;
}

/* ---- after an error ------------------------------------------------------------------ */

/*
 * A is in the error state.  Post once more on each queue, as applications
 * do (the provider rings a doorbell when the kernel asks for one): a queue
 * whose ring is intact flushes the request with WR_FLUSH_ERR; a broken ring
 * is never read again (docs/design.md), so its request never completes.
 * Either doorbell is also a chance to raise QP_FATAL once more, which the
 * case's event count catches.
 */
static void probe_errored(int sq_broken, int rq_broken, const char *what)
{
	char w[160];

	snprintf(w, sizeof(w), "%s: post after the error", what);
	expect_state(&A, IBV_QPS_ERR, w);
	if (!post_recv1(&A, 0xe1, &RA_rcv, MIB - 4096, 64, w)) {
		if (rq_broken)
			expect_no_wc(&A, QUIET_S, w);
		else
			expect_wc(&A, 0xe1, IBV_WC_WR_FLUSH_ERR, -1, w);
	}
	if (!post_write(&A, 0xe2, &RA_src, 0, &RB_dst, MIB - 64, 64, w)) {
		if (sq_broken)
			expect_no_wc(&A, QUIET_S, w);
		else
			expect_wc(&A, 0xe2, IBV_WC_WR_FLUSH_ERR, -1, w);
	}
	expect_no_wc(&A, 0.02, w);
}

/* B has no completion left and is in state st (its buffers: regions_check). */
static void expect_b_quiet(enum ibv_qp_state st, const char *what)
{
	expect_no_wc(&B, 0.02, what);
	expect_state(&B, st, what);
}

/* ---- the send ring's producer index --------------------------------------------------- */

#define HELD 3

/*
 * A posts HELD signaled SENDs (wr_id 0x100 + i, 3000 bytes each) to B,
 * which has no receive posted: B answers STOP and A, with rnr_retry 7,
 * keeps them in flight until B posts receives.  The kernel has read them
 * (it cleared db_needed and released nothing).
 */
static void hold_sends(const char *what)
{
	struct mbcf_wq *q = sq_of(&A);
	int i;

	for (i = 0; i < HELD; i++)
		post_send1(&A, 0x100 + i, &RA_src, (size_t)i * 4096, 3000, what);
	expect_no_wc(&A, 0.05, what);
	if (ld32(mbcf_ring_db(&q->ring)))
		vc_fail("%s: db_needed still set: the kernel did not take the sends", what);
	if (kcons(q) != q->ring.idx - HELD)
		vc_fail("%s: kernel released %u sends, expected none held back",
		     what, kcons(q) - (q->ring.idx - HELD));
}

/* B posts receives for the held sends now: which complete, and with what. */
static void release_held(int delivered, const char *what)
{
	int i;

	for (i = 0; i < HELD; i++)
		post_recv1(&B, 0x200 + i, &RB_rcv, (size_t)i * 4096, 4096, what);
	if (!delivered) {
		expect_no_wc(&B, QUIET_S, what);
		return;
	}
	for (i = 0; i < HELD; i++) {
		expect_wc(&A, 0x100 + i, IBV_WC_SUCCESS, IBV_WC_SEND, what);
		expect_wc(&B, 0x200 + i, IBV_WC_SUCCESS, IBV_WC_RECV, what);
		region_expect(&RB_rcv, (size_t)i * 4096, RA_src.p + i * 4096, 3000);
	}
}

/* A producer index outside [lo, hi] (ring arithmetic), at random. */
static uint32_t rnd_outside(uint32_t lo, uint32_t hi)
{
	uint32_t v;

	do
		v = rnd();
	while (v - lo <= hi - lo);
	return v;
}

enum sq_attack { SQA_REWIND_HELD, SQA_REWIND_RELEASED, SQA_REWIND_BEHIND,
		 SQA_ADVANCE_PAST, SQA_ADVANCE_FAR, SQA_GARBAGE };

static uint32_t sq_attack_value(enum sq_attack a, uint32_t cons, uint32_t rd,
				uint32_t n)
{
	switch (a) {
	case SQA_REWIND_HELD:	return rd - 1;		/* behind what was read */
	case SQA_REWIND_RELEASED: return cons;		/* == released, < read */
	case SQA_REWIND_BEHIND:	return cons - 1;	/* behind both */
	case SQA_ADVANCE_PAST:	return cons + n + 1;	/* names a held slot */
	case SQA_ADVANCE_FAR:	return cons + 0x80000000u;
	default:		return rnd_outside(rd, cons + n);
	}
}

/*
 * Requests in flight (held by RNR), then the producer index is moved where
 * no provider would put it, and the held slots are rewritten with what used
 * to make the kernel send its own heap (inline, inline_len 2^32-1).  The
 * ring is broken: the held requests flush, A goes to ERR with exactly one
 * QP_FATAL, B receives nothing.
 */
static void sq_held_case(enum sq_attack a, const char *what)
{
	struct mbcf_wq *q;
	struct raw_send g = {
		.wr_id = 0xbad, .opcode = IBV_WR_SEND,
		.flags = IBV_SEND_INLINE | IBV_SEND_SIGNALED,
		.num_sge = 0xffffffff, .inline_len = 0xffffffff,
	};
	uint32_t cons, rd, i;

	pair_up();
	q = sq_of(&A);
	hold_sends(what);
	cons = kcons(q);
	rd = q->ring.idx;
	for (i = cons; i != rd; i++)
		raw_fill_send(q, i, &g);
	set_prod(q, sq_attack_value(a, cons, rd, ring_n(&q->ring)));
	ring_sq(&A, what);
	for (i = 0; i < HELD; i++)
		expect_wc(&A, 0x100 + i, IBV_WC_WR_FLUSH_ERR, -1, what);
	expect_no_wc(&A, 0.02, what);
	expect_state(&A, IBV_QPS_ERR, what);
	release_held(0, what);
	expect_b_quiet(IBV_QPS_RTS, what);
	probe_errored(1, 0, what);
	ev_expect(1, 0, 0, what);
	pair_down();
}

static void c_sq_rewind_held(void) { sq_held_case(SQA_REWIND_HELD, "rewind into held"); }
static void c_sq_rewind_released(void) { sq_held_case(SQA_REWIND_RELEASED, "rewind to released"); }
static void c_sq_rewind_behind(void) { sq_held_case(SQA_REWIND_BEHIND, "rewind behind released"); }
static void c_sq_advance_past(void) { sq_held_case(SQA_ADVANCE_PAST, "advance past the ring"); }
static void c_sq_advance_far(void) { sq_held_case(SQA_ADVANCE_FAR, "advance by 2^31"); }
static void c_sq_garbage_held(void) { sq_held_case(SQA_GARBAGE, "garbage producer index"); }

/* Nothing in flight (two writes completed), then an impossible index. */
static void sq_idle_case(enum sq_attack a, const char *what)
{
	struct mbcf_wq *q;
	uint32_t cons;
	int i;

	pair_up();
	q = sq_of(&A);
	for (i = 0; i < 2; i++) {
		post_write(&A, 0x10 + i, &RA_src, (size_t)i * 8192, &RB_dst,
			   (size_t)i * 8192, 8192, what);
		expect_wc(&A, 0x10 + i, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, what);
		region_expect(&RB_dst, (size_t)i * 8192, RA_src.p + i * 8192, 8192);
	}
	cons = kcons(q);
	if (cons != q->ring.idx)
		vc_fail("%s: kernel released %u of %u", what, cons, q->ring.idx);
	set_prod(q, sq_attack_value(a, cons, cons, ring_n(&q->ring)));
	ring_sq(&A, what);
	expect_no_wc(&A, QUIET_S, what);
	expect_state(&A, IBV_QPS_ERR, what);
	expect_b_quiet(IBV_QPS_RTS, what);
	probe_errored(1, 0, what);
	ev_expect(1, 0, 0, what);
	pair_down();
}

static void c_sq_idle_rewind(void) { sq_idle_case(SQA_REWIND_BEHIND, "idle, rewind"); }
static void c_sq_idle_advance(void) { sq_idle_case(SQA_ADVANCE_PAST, "idle, advance past the ring"); }
static void c_sq_idle_garbage(void) { sq_idle_case(SQA_GARBAGE, "idle, garbage"); }

/*
 * At the limit, not past it: with HELD requests in flight, the test writes
 * the other n - HELD slots itself (valid signaled writes) and publishes
 * prod = released + n, the most the ring can hold.  Nothing is wrong: every
 * request completes in order, every byte lands, no event.
 */
static void c_sq_at_limit(void)
{
	const char *what = "prod = released + n";
	struct mbcf_wq *q;
	uint32_t cons, n, i, k;

	pair_up();
	q = sq_of(&A);
	n = ring_n(&q->ring);
	hold_sends(what);
	cons = kcons(q);
	for (i = HELD; i < n; i++) {
		struct raw_send w = {
			.wr_id = 0x300 + i, .opcode = IBV_WR_RDMA_WRITE,
			.flags = IBV_SEND_SIGNALED, .num_sge = 1,
			.raddr = region_addr(&RB_dst, (size_t)i * 1024),
			.rkey = RB_dst.mr->rkey, .nsg = 1,
			.sg = { msge(&RA_src, 65536 + (size_t)i * 1024, 1000) },
		};

		raw_fill_send(q, cons + i, &w);
		region_expect(&RB_dst, (size_t)i * 1024,
			      RA_src.p + 65536 + i * 1024, 1000);
	}
	set_prod(q, cons + n);
	sync_provider(q);
	ring_sq(&A, what);
	expect_no_wc(&A, 0.05, what);	/* all behind the held sends */
	release_held(1, what);
	for (k = HELD; k < n; k++)
		expect_wc(&A, 0x300 + k, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, what);
	expect_no_wc(&A, 0.02, what);
	expect_state(&A, IBV_QPS_RTS, what);
	expect_b_quiet(IBV_QPS_RTS, what);
	ev_expect(0, 0, 0, what);
	pair_down();
}

/*
 * A 16 MiB write in flight: as soon as its first bytes land at B, a thread
 * rewinds the producer index behind it.  The kernel notices at its next
 * pass (an acknowledgement) and flushes the write mid-way (or, if it was
 * already done, at the next doorbell); B holds a prefix of exactly the
 * registered bytes, nothing else; one QP_FATAL.
 */
static void c_sq_rewind_write(void)
{
	const char *what = "rewind under a 16 MiB write";
	struct scribbler sc = { .n = 0 };
	struct mbcf_wq *q;
	struct ibv_sge sg[4];
	struct ibv_send_wr wr = {
		.wr_id = 0x400, .sg_list = sg, .num_sge = 4,
		.opcode = IBV_WR_RDMA_WRITE, .send_flags = IBV_SEND_SIGNALED,
	};
	struct ibv_wc wc;
	uint8_t *msg;
	double end;
	size_t k;
	int i;

	regions_big();
	pair_up();
	q = sq_of(&A);
	msg = malloc(BIG);
	if (!msg)
		vp_die_errno("malloc");
	/* the message is the 4 SGEs in order */
	for (i = 0; i < 4; i++) {
		sg[i] = sge_of(&RA_big, (size_t)(3 - i) * (BIG / 4), BIG / 4);
		memcpy(msg + (size_t)i * (BIG / 4),
		       RA_big.p + (size_t)(3 - i) * (BIG / 4), BIG / 4);
	}
	wr.wr.rdma.remote_addr = region_addr(&RB_big, 0);
	wr.wr.rdma.rkey = RB_big.mr->rkey;
	sc.watch = RB_big.p;
	memcpy(sc.seen, msg, 8);
	sc.prod = mbcf_ring_prod(&q->ring);
	sc.prod_val = q->ring.idx;	/* once posted: behind what was read */
	scribble_start(&sc);
	if (post_wr(&A, &wr, what)) {
		scribble_stop(&sc);
		goto out;
	}
	for (end = vp_now() + WAIT_S; !sc.fired && vp_now() < end;)
		vp_sleep_us(100);
	scribble_stop(&sc);
	if (!sc.fired)
		vc_fail("%s: no byte of the write reached B", what);
	ring_sq(&A, what);
	if (!get_wc(&A, &wc, WAIT_S) || wc.wr_id != 0x400 ||
	    (wc.status != IBV_WC_WR_FLUSH_ERR && wc.status != IBV_WC_SUCCESS)) {
		vc_fail("%s: expected wr 0x400 flushed (or done), got %s", what,
		     ibv_wc_status_str(wc.status));
		goto out;
	}
	region_settle(&RB_big, 0, BIG, what);
	if (wc.status == IBV_WC_SUCCESS)
		region_expect(&RB_big, 0, msg, BIG);
	k = region_expect_prefix(&RB_big, 0, msg, BIG);
	vc_note("%s, %zu of %u bytes had landed", ibv_wc_status_str(wc.status), k, BIG);
	regions_big_check(what);
	expect_no_wc(&A, 0.02, what);
	expect_state(&A, IBV_QPS_ERR, what);
	expect_b_quiet(IBV_QPS_RTS, what);
	probe_errored(1, 0, what);
	ev_expect(1, 0, 0, what);
out:
	free(msg);
	pair_down();
}

/* ---- the receive ring ----------------------------------------------------------------- */

/* B sends len bytes of its source at soff; the receive lands in A. */
static void b_sends(uint64_t wr_id, size_t soff, uint32_t len, const char *what)
{
	post_send1(&B, wr_id, &RB_src, soff, len, what);
}

/*
 * A has posted receives 0x400.. (4096 bytes apart in RA_rcv); B's first
 * `ok` sends (1000 bytes each) are delivered, then A's receive ring is
 * broken (`attack`), then B's next send meets it: B gets REM_OP_ERR, A goes
 * to ERR with one QP_FATAL and completes nothing more.
 */
static void rq_case(uint32_t (*attack)(struct mbcf_wq *q), int posted, int ok,
		    const char *what)
{
	int i;

	pair_up();
	for (i = 0; i < posted; i++)
		post_recv1(&A, 0x400 + i, &RA_rcv, (size_t)i * 4096, 4096, what);
	for (i = 0; i < ok; i++) {
		b_sends(0x500 + i, (size_t)i * 1000, 1000, what);
		expect_wc(&B, 0x500 + i, IBV_WC_SUCCESS, IBV_WC_SEND, what);
		expect_wc(&A, 0x400 + i, IBV_WC_SUCCESS, IBV_WC_RECV, what);
		region_expect(&RA_rcv, (size_t)i * 4096, RB_src.p + i * 1000, 1000);
	}
	set_prod(rq_of(&A), attack(rq_of(&A)));
	b_sends(0x5ff, 64 * 1024, 1000, what);
	expect_wc(&B, 0x5ff, IBV_WC_REM_OP_ERR, -1, what);
	expect_no_wc(&A, QUIET_S, what);
	expect_state(&A, IBV_QPS_ERR, what);
	expect_b_quiet(IBV_QPS_ERR, what);
	probe_errored(0, 1, what);
	ev_expect(1, 0, 0, what);
	pair_down();
}

static uint32_t rqa_rewind(struct mbcf_wq *q) { return kcons(q) - 1; }
static uint32_t rqa_advance(struct mbcf_wq *q) { return kcons(q) + ring_n(&q->ring) + 1; }
static uint32_t rqa_far(struct mbcf_wq *q) { return kcons(q) + 0x80000000u; }

static uint32_t rqa_garbage(struct mbcf_wq *q)
{
	return rnd_outside(kcons(q), kcons(q) + ring_n(&q->ring));
}

static void c_rq_rewind(void) { rq_case(rqa_rewind, 4, 2, "rewind behind consumed"); }
static void c_rq_advance_past(void) { rq_case(rqa_advance, 1, 1, "advance past the ring"); }
static void c_rq_advance_far(void) { rq_case(rqa_far, 0, 0, "advance by 2^31"); }
static void c_rq_garbage(void) { rq_case(rqa_garbage, 2, 1, "garbage producer index"); }

/* prod = n with every slot written by the test: n messages, all exact. */
static void c_rq_at_limit(void)
{
	const char *what = "prod = consumed + n";
	struct mbcf_wq *q;
	uint32_t n, i, len;

	pair_up();
	q = rq_of(&A);
	n = ring_n(&q->ring);
	for (i = 0; i < n; i++) {
		struct raw_recv r = {
			.wr_id = 0x600 + i, .num_sge = 1, .nsg = 1,
			.sg = { msge(&RA_rcv, (size_t)i * 4096, 4096) },
		};

		raw_fill_recv(q, kcons(q) + i, &r);
	}
	set_prod(q, kcons(q) + n);
	sync_provider(q);
	for (i = 0; i < n; i++)
		b_sends(0x700 + i, (size_t)i * 4096, 1000 + i, what);
	for (i = 0; i < n; i++) {
		len = 1000 + i;
		expect_wc(&B, 0x700 + i, IBV_WC_SUCCESS, IBV_WC_SEND, what);
		expect_wc(&A, 0x600 + i, IBV_WC_SUCCESS, IBV_WC_RECV, what);
		region_expect(&RA_rcv, (size_t)i * 4096, RB_src.p + i * 4096, len);
	}
	expect_state(&A, IBV_QPS_RTS, what);
	expect_b_quiet(IBV_QPS_RTS, what);
	ev_expect(0, 0, 0, what);
	pair_down();
}

/* raw_recv.num_sge: "the QP's max_recv_sge + 1", known once the QP exists */
#define NUM_SGE_MAX_PLUS_1	0xfffffffeu

/*
 * One receive entry written by the test, then B sends 1000 bytes.
 * a_st/b_st: the completions; fatal: QP_FATAL on A expected.
 */
static void rq_entry_case(struct raw_recv *r, enum ibv_wc_status a_st,
			  enum ibv_wc_status b_st, int fatal, const char *what)
{
	pair_up();
	if (r->num_sge == NUM_SGE_MAX_PLUS_1)
		r->num_sge = A.cap.max_recv_sge + 1;
	raw_post_recv(&A, r);
	if (doorbell(&A, IB_USER_VERBS_CMD_POST_RECV))
		vc_fail("%s: receive doorbell failed", what);
	b_sends(0x800, 4096, 1000, what);
	expect_wc(&B, 0x800, b_st, b_st == IBV_WC_SUCCESS ? IBV_WC_SEND : -1, what);
	expect_wc(&A, r->wr_id, a_st, a_st == IBV_WC_SUCCESS ? IBV_WC_RECV : -1, what);
	expect_no_wc(&A, 0.02, what);
	if (a_st == IBV_WC_SUCCESS) {
		expect_state(&A, IBV_QPS_RTS, what);
		expect_b_quiet(IBV_QPS_RTS, what);
	} else {
		expect_b_quiet(IBV_QPS_ERR, what);
		probe_errored(0, 0, what);
	}
	ev_expect(fatal, 0, 0, what);
	pair_down();
}

/* num_sge the provider would refuse: the receiver fails, fatally. */
static void rq_num_sge(uint32_t num_sge, const char *what)
{
	struct raw_recv r = { .wr_id = 0x801, .num_sge = num_sge, .nsg = 16 };
	int i;

	for (i = 0; i < 16; i++)
		r.sg[i] = msge(&RA_rcv, (size_t)i * 4096, 64);
	rq_entry_case(&r, IBV_WC_WR_FLUSH_ERR, IBV_WC_REM_OP_ERR, 1, what);
}

static void c_rq_num_sge_over(void)
{
	rq_num_sge(NUM_SGE_MAX_PLUS_1, "num_sge = max_recv_sge + 1");
}

static void c_rq_num_sge_17(void) { rq_num_sge(17, "num_sge = 17"); }
static void c_rq_num_sge_ffffffff(void) { rq_num_sge(0xffffffff, "num_sge = 2^32-1"); }

static void c_rq_num_sge_0(void)
{
	struct raw_recv r = { .wr_id = 0x802, .num_sge = 0 };

	/* room for nothing: the message is too long for it (no fatal) */
	rq_entry_case(&r, IBV_WC_LOC_LEN_ERR, IBV_WC_REM_INV_REQ_ERR, 0,
		      "num_sge = 0");
}

static void c_rq_num_sge_max(void)
{
	struct raw_recv r = { .wr_id = 0x803, .num_sge = 4, .nsg = 4 };
	int i;

	for (i = 0; i < 4; i++) {
		r.sg[i] = msge(&RA_rcv, (size_t)(3 - i) * 8192 + 7, 250);
		region_expect(&RA_rcv, (size_t)(3 - i) * 8192 + 7,
			      RB_src.p + 4096 + i * 250, 250);
	}
	rq_entry_case(&r, IBV_WC_SUCCESS, IBV_WC_SUCCESS, 0, "4 SGEs of 250");
}

/* A bad local buffer: a protection error at the receiver, no fatal. */
static void rq_bad_sge(uint64_t addr, uint32_t len, uint32_t lkey, const char *what)
{
	struct raw_recv r = { .wr_id = 0x804, .num_sge = 1, .nsg = 1,
			      .sg = { { .addr = addr, .length = len, .lkey = lkey } } };

	rq_entry_case(&r, IBV_WC_LOC_PROT_ERR, IBV_WC_REM_OP_ERR, 0, what);
}

static void c_rq_lkey_0(void) { rq_bad_sge(region_addr(&RA_rcv, 0), 4096, 0, "lkey 0"); }
static void c_rq_lkey_pd2(void)
{
	rq_bad_sge(region_addr(&RA_pd2, 0), 4096, RA_pd2.mr->lkey, "another PD's MR");
}
static void c_rq_lkey_readonly(void)
{
	rq_bad_sge(region_addr(&RA_ro, 0), 4096, RA_ro.mr->lkey, "MR without LOCAL_WRITE");
}
static void c_rq_kernel_addr(void)
{
	rq_bad_sge(0xffff888000000000ull, 4096, RA_rcv.mr->lkey, "kernel address");
}
static void c_rq_wrap_addr(void)
{
	rq_bad_sge(0xfffffffffffff000ull, 0x2000, RA_rcv.mr->lkey, "address wraps");
}
static void c_rq_past_end(void)
{
	rq_bad_sge(region_addr(&RA_rcv, RA_rcv.len - 999), 4096, RA_rcv.mr->lkey,
		   "999 bytes before the MR's end");
}

/* Zero-length SGEs need no valid key or address: the bytes go around them. */
static void c_rq_zero_len_garbage(void)
{
	struct raw_recv r = { .wr_id = 0x805, .num_sge = 4, .nsg = 4, .sg = {
		{ .addr = 0, .length = 0, .lkey = 0xdeadbeef },
		msge(&RA_rcv, 100, 300),
		{ .addr = 0xffff888000000000ull, .length = 0, .lkey = 0 },
		msge(&RA_rcv, 50000, 700),
	} };

	region_expect(&RA_rcv, 100, RB_src.p + 4096, 300);
	region_expect(&RA_rcv, 50000, RB_src.p + 4096 + 300, 700);
	rq_entry_case(&r, IBV_WC_SUCCESS, IBV_WC_SUCCESS, 0,
		      "zero-length SGEs with garbage keys and addresses");
}

/* Lengths of 2^32-1: a cap, not a promise; only what arrives is checked. */
static void c_rq_huge_lengths(void)
{
	struct raw_recv r = { .wr_id = 0x806, .num_sge = 4, .nsg = 4 };
	int i;

	for (i = 0; i < 4; i++)
		r.sg[i] = (struct mbcf_sge){ .addr = region_addr(&RA_rcv, 8192),
					     .length = 0xffffffff,
					     .lkey = RA_rcv.mr->lkey };
	region_expect(&RA_rcv, 8192, RB_src.p + 4096, 1000);
	rq_entry_case(&r, IBV_WC_SUCCESS, IBV_WC_SUCCESS, 0, "4 SGEs of 2^32-1");
}

/*
 * A 16 MiB SEND into A: as soon as its first bytes land (its receive was
 * claimed), a thread rewinds A's receive producer index behind it and
 * rewrites the claimed slot and the next one over and over.  The message
 * lands exactly in the buffer that was posted; B's next send meets the
 * broken ring (REM_OP_ERR, one QP_FATAL), and the receive posted after the
 * claimed one is never taken.
 */
static void c_rq_rewind_inflight(void)
{
	const char *what = "rewind + scribble under a 16 MiB receive";
	struct scribbler sc = { .n = 2 };
	struct mbcf_wq *q;

	regions_big();
	pair_up();
	q = rq_of(&A);
	sc.len = q->ring.stride;
	sc.slot[0] = mbcf_ring_entry(&q->ring, q->ring.idx);
	sc.slot[1] = mbcf_ring_entry(&q->ring, q->ring.idx + 1);
	sc.prod = mbcf_ring_prod(&q->ring);
	sc.prod_val = q->ring.idx - 1;	/* behind the claimed one, done or not */
	sc.watch = RA_big.p;
	memcpy(sc.seen, RB_big.p, 8);
	post_recv1(&A, 0x900, &RA_big, 0, BIG, what);
	post_recv1(&A, 0x901, &RA_rcv, 0, 4096, what);
	scribble_start(&sc);
	post_send1(&B, 0x910, &RB_big, 0, BIG, what);
	expect_wc(&B, 0x910, IBV_WC_SUCCESS, IBV_WC_SEND, what);
	expect_wc(&A, 0x900, IBV_WC_SUCCESS, IBV_WC_RECV, what);
	vc_note("%lu scribbles by the completion", sc.iters);
	scribble_stop(&sc);
	if (!sc.fired)
		vc_fail("%s: the trigger never saw the message land", what);
	region_expect(&RA_big, 0, RB_big.p, BIG);
	regions_big_check(what);
	b_sends(0x911, 0, 1000, what);
	expect_wc(&B, 0x911, IBV_WC_REM_OP_ERR, -1, what);
	expect_no_wc(&A, QUIET_S, what);
	expect_b_quiet(IBV_QPS_ERR, what);
	probe_errored(0, 1, what);
	ev_expect(1, 0, 0, what);
	pair_down();
}

/* ---- the completion ring's consumer index ---------------------------------------------- */

/* The kernel's producer index of A's CQ (what it wrote so far). */
static uint32_t cq_kprod(void)
{
	return ld32(mbcf_ring_prod(cq_of(&A)));
}

static void set_cq_cons(uint32_t v)
{
	st32(mbcf_ring_cons(cq_of(&A)), v);
}

/* Give the provider's consumer index back to the ring (undo the attack). */
static void restore_cq_cons(void)
{
	set_cq_cons(cq_of(&A)->idx);
}

/* One signaled write from A, completed and polled: the CQ has a history. */
static void cq_warm_up(const char *what)
{
	post_write(&A, 0xa0, &RA_src, 0, &RB_dst, 0, 4096, what);
	expect_wc(&A, 0xa0, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, what);
	region_expect(&RB_dst, 0, RA_src.p, 4096);
	if (cq_kprod() != cq_of(&A)->idx)
		vc_fail("%s: CQ prod %u, provider consumed %u", what, cq_kprod(),
		     cq_of(&A)->idx);
}

enum cq_attack { CQA_ADVANCE, CQA_REWIND_FULL, CQA_REWIND_PAST, CQA_GARBAGE };

/*
 * An impossible consumer index on A's CQ, then a signaled write: the write
 * lands at B (it was acknowledged), its completion overruns the CQ: one
 * CQ_ERR, A to ERR without QP_FATAL, the completion lost.  With the index
 * given back, later posts flush into the CQ.
 */
static void cq_case(enum cq_attack a, const char *what)
{
	uint32_t kp, n;

	pair_up();
	cq_warm_up(what);
	kp = cq_kprod();
	n = ring_n(cq_of(&A));
	switch (a) {
	case CQA_ADVANCE:	set_cq_cons(kp + 1); break;
	case CQA_REWIND_FULL:	set_cq_cons(kp - n); break;	/* "full" */
	case CQA_REWIND_PAST:	set_cq_cons(kp - n - 1); break;
	default:		set_cq_cons(rnd_outside(kp - n + 1, kp)); break;
	}
	post_write(&A, 0xa1, &RA_src, 8192, &RB_dst, 8192, 4096, what);
	region_expect(&RB_dst, 8192, RA_src.p + 8192, 4096);
	ev_wait(IBV_EVENT_CQ_ERR, A.cq, 1, WAIT_S);
	expect_no_wc(&A, 0.05, what);	/* its ring makes no sense now */
	restore_cq_cons();
	expect_no_wc(&A, 0.05, what);	/* the completion was lost */
	expect_state(&A, IBV_QPS_ERR, what);
	expect_b_quiet(IBV_QPS_RTS, what);
	probe_errored(0, 0, what);
	ev_expect(0, 1, 0, what);
	pair_down();
}

static void c_cq_advance(void) { cq_case(CQA_ADVANCE, "cons = prod + 1"); }
static void c_cq_rewind_full(void) { cq_case(CQA_REWIND_FULL, "cons = prod - n (full)"); }
static void c_cq_rewind_past(void) { cq_case(CQA_REWIND_PAST, "cons = prod - n - 1"); }
static void c_cq_garbage(void) { cq_case(CQA_GARBAGE, "garbage cons"); }

/*
 * cons = prod - (n - 1): room for exactly one more completion.  It arrives
 * (seen in the ring, not consumed: polling would repair the index), the
 * next one overruns.
 */
static void c_cq_one_slot(void)
{
	const char *what = "cons = prod - (n - 1)";
	uint32_t kp, n;
	double end;

	pair_up();
	cq_warm_up(what);
	kp = cq_kprod();
	n = ring_n(cq_of(&A));
	set_cq_cons(kp - (n - 1));
	post_write(&A, 0xa2, &RA_src, 8192, &RB_dst, 8192, 4096, what);
	region_expect(&RB_dst, 8192, RA_src.p + 8192, 4096);
	for (end = vp_now() + WAIT_S; cq_kprod() == kp && vp_now() < end;)
		vp_sleep_us(100);
	if (cq_kprod() != kp + 1)
		vc_fail("%s: CQ prod %u, expected %u", what, cq_kprod(), kp + 1);
	post_write(&A, 0xa3, &RA_src, 16384, &RB_dst, 16384, 4096, what);
	region_expect(&RB_dst, 16384, RA_src.p + 16384, 4096);
	ev_wait(IBV_EVENT_CQ_ERR, A.cq, 1, WAIT_S);
	restore_cq_cons();
	expect_wc(&A, 0xa2, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, what);
	expect_no_wc(&A, 0.05, what);	/* 0xa3's completion was lost */
	expect_state(&A, IBV_QPS_ERR, what);
	expect_b_quiet(IBV_QPS_RTS, what);
	probe_errored(0, 0, what);
	ev_expect(0, 1, 0, what);
	pair_down();
}

/* cons = prod - 1 looks like one unconsumed entry: legal, nothing happens. */
static void c_cq_rewind_legal(void)
{
	const char *what = "cons = prod - 1";

	pair_up();
	cq_warm_up(what);
	set_cq_cons(cq_kprod() - 1);
	post_write(&A, 0xa4, &RA_src, 8192, &RB_dst, 8192, 4096, what);
	region_expect(&RB_dst, 8192, RA_src.p + 8192, 4096);
	expect_wc(&A, 0xa4, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, what);
	expect_state(&A, IBV_QPS_RTS, what);
	expect_b_quiet(IBV_QPS_RTS, what);
	ev_expect(0, 0, 0, what);
	pair_down();
}

/*
 * The receive completion overruns: the SEND was placed in A's buffer but A
 * fails before acknowledging it, so B, retrying into a QP in error, ends
 * with RETRY_EXC_ERR (B's timeout is short here).
 */
static void c_cq_recv_overrun(void)
{
	const char *what = "receive completion overruns";
	struct qp_opts ob = dflt;

	ob.timeout = 8;		/* 1 ms */
	ob.retry_cnt = 1;
	pair_up2(&dflt, &ob);
	cq_warm_up(what);
	post_recv1(&A, 0xa5, &RA_rcv, 0, 4096, what);
	set_cq_cons(cq_kprod() + 1);
	b_sends(0xa6, 0, 1000, what);
	region_expect(&RA_rcv, 0, RB_src.p, 1000);
	expect_wc(&B, 0xa6, IBV_WC_RETRY_EXC_ERR, -1, what);
	restore_cq_cons();
	expect_no_wc(&A, 0.05, what);	/* 0xa5's completion was lost */
	expect_state(&A, IBV_QPS_ERR, what);
	expect_b_quiet(IBV_QPS_ERR, what);
	probe_errored(0, 0, what);
	ev_expect(0, 1, 0, what);
	pair_down();
}

/* ---- rewriting slots the kernel has taken -------------------------------------------------- */

/*
 * A 16 MiB write (4 SGEs, in reverse order): from the moment its first
 * bytes land at B (the kernel has taken it), a thread rewrites its slot
 * over and over while the kernel is still sending it.  B gets exactly the
 * bytes that were posted.
 */
static void c_scribble_write(void)
{
	const char *what = "scribble under a 16 MiB write";
	struct scribbler sc = { .n = 1 };
	struct ibv_sge sg[4];
	struct ibv_send_wr wr = {
		.wr_id = 0xb00, .sg_list = sg, .num_sge = 4,
		.opcode = IBV_WR_RDMA_WRITE, .send_flags = IBV_SEND_SIGNALED,
	};
	struct mbcf_wq *q;
	int i;

	regions_big();
	pair_up();
	q = sq_of(&A);
	for (i = 0; i < 4; i++) {
		sg[i] = sge_of(&RA_big, (size_t)(3 - i) * (BIG / 4), BIG / 4);
		region_expect(&RB_big, (size_t)i * (BIG / 4),
			      RA_big.p + (size_t)(3 - i) * (BIG / 4), BIG / 4);
	}
	wr.wr.rdma.remote_addr = region_addr(&RB_big, 0);
	wr.wr.rdma.rkey = RB_big.mr->rkey;
	sc.slot[0] = mbcf_ring_entry(&q->ring, q->ring.idx);
	sc.len = q->ring.stride;
	sc.watch = RB_big.p;
	memcpy(sc.seen, RA_big.p + 3 * (BIG / 4), 8);
	scribble_start(&sc);
	if (!post_wr(&A, &wr, what)) {
		expect_wc(&A, 0xb00, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, what);
		vc_note("%lu scribbles by the completion", sc.iters);
	}
	scribble_stop(&sc);
	if (!sc.fired)
		vc_fail("%s: the trigger never saw the write land", what);
	regions_big_check(what);
	expect_state(&A, IBV_QPS_RTS, what);
	expect_b_quiet(IBV_QPS_RTS, what);
	ev_expect(0, 0, 0, what);
	pair_down();
}

/*
 * Two SENDs held by RNR (an inline one of max_inline bytes, and a 4-SGE
 * one of 65000 bytes): their slots are rewritten for 0.3 s while A retries
 * every 1.28 ms, rebuilding frames; then B posts receives and gets exactly
 * the bytes that were posted.
 */
static void c_scribble_held(void)
{
	const char *what = "scribble under SENDs held by RNR";
	struct scribbler sc = { .n = 2 };
	uint8_t inl[256];
	struct ibv_sge sg[4] = {
		sge_of(&RA_src, 300000, 20000), sge_of(&RA_src, 100000, 30000),
		sge_of(&RA_src, 7, 10000), sge_of(&RA_src, 500001, 5000),
	};
	struct ibv_sge isg;
	struct mbcf_wq *q;
	uint32_t inl_len, i, off;
	double end;

	pair_up();
	q = sq_of(&A);
	inl_len = A.cap.max_inline_data;
	for (i = 0; i < inl_len; i++)
		inl[i] = (uint8_t)rnd();
	isg = (struct ibv_sge){ .addr = (uintptr_t)inl, .length = inl_len };
	post_send_sg(&A, 0xb10, &isg, 1, IBV_SEND_INLINE, what);
	memset(inl, 0, sizeof(inl));	/* the caller may reuse it at once */
	post_send_sg(&A, 0xb11, sg, 4, 0, what);
	expect_no_wc(&A, 0.05, what);
	if (ld32(mbcf_ring_db(&q->ring)) || kcons(q) != q->ring.idx - 2)
		vc_fail("%s: the kernel did not take both sends", what);
	sc.slot[0] = mbcf_ring_entry(&q->ring, q->ring.idx - 2);
	sc.slot[1] = mbcf_ring_entry(&q->ring, q->ring.idx - 1);
	sc.len = q->ring.stride;
	/* what the inline send carries: the bytes as they were at post time */
	for (i = 0; i < inl_len; i++)
		inl[i] = ((uint8_t *)sc.slot[0])[sizeof(struct mbcf_send_wqe) + i];
	region_expect(&RB_rcv, 0, inl, inl_len);
	for (i = 0, off = 0; i < 4; off += sg[i].length, i++)
		region_expect(&RB_rcv, 8192 + off,
			      (const uint8_t *)(uintptr_t)sg[i].addr, sg[i].length);
	scribble_start(&sc);
	for (end = vp_now() + 0.3; vp_now() < end;)
		vp_sleep_us(10000);
	vc_note("%lu scribbles", scribble_stop(&sc));
	post_recv1(&B, 0xb20, &RB_rcv, 0, 4096, what);
	post_recv1(&B, 0xb21, &RB_rcv, 8192, 65536, what);
	expect_wc(&A, 0xb10, IBV_WC_SUCCESS, IBV_WC_SEND, what);
	expect_wc(&A, 0xb11, IBV_WC_SUCCESS, IBV_WC_SEND, what);
	expect_wc(&B, 0xb20, IBV_WC_SUCCESS, IBV_WC_RECV, what);
	expect_wc(&B, 0xb21, IBV_WC_SUCCESS, IBV_WC_RECV, what);
	expect_state(&A, IBV_QPS_RTS, what);
	expect_b_quiet(IBV_QPS_RTS, what);
	ev_expect(0, 0, 0, what);
	pair_down();
}

/* ---- doorbell storms --------------------------------------------------------------------- */

static unsigned long storm_writes, storm_flushes;

/* During a storm on a live A: one write at a time, every byte checked. */
static void step_live_write(void)
{
	size_t off = (size_t)(storm_writes % 256) * 4096;

	if (post_write(&A, 0xc00 + storm_writes, &RA_src, off, &RB_dst, off,
		       4096, "storm write"))
		return;
	if (!expect_wc(&A, 0xc00 + storm_writes, IBV_WC_SUCCESS,
		       IBV_WC_RDMA_WRITE, "storm write"))
		region_expect(&RB_dst, off, RA_src.p + off, 4096);
	storm_writes++;
}

/* During a storm on an errored A: posts on both queues, each flushed. */
static void step_errored_posts(void)
{
	if (!post_recv1(&A, 0xd00 + storm_flushes, &RA_rcv, 0, 64, "storm recv"))
		expect_wc(&A, 0xd00 + storm_flushes, IBV_WC_WR_FLUSH_ERR, -1,
			  "storm recv");
	if (!post_write(&A, 0xe00 + storm_flushes, &RA_src, 0, &RB_dst, 0, 64,
			"storm write"))
		expect_wc(&A, 0xe00 + storm_flushes, IBV_WC_WR_FLUSH_ERR, -1,
			  "storm write");
	storm_flushes++;
}

static void c_storm_live(void)
{
	const char *what = "doorbell storm on a live QP";
	struct witness_run w;

	pair_up();
	storm_writes = 0;
	witness_start(&w, what);
	storm_run(storm_total, step_live_write, what);
	witness_stop(&w, 3);
	vc_note("%lu writes meanwhile", storm_writes);
	if (storm_writes < 3)
		vc_fail("%s: only %lu writes completed meanwhile", what, storm_writes);
	expect_state(&A, IBV_QPS_RTS, what);
	expect_b_quiet(IBV_QPS_RTS, what);
	ev_expect(0, 0, 0, what);
	pair_down();
}

/* A to the error state by the application (modify): no QP_FATAL, ever. */
static void c_storm_errored(void)
{
	const char *what = "doorbell storm on a QP the application moved to ERR";
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_ERR };
	struct witness_run w;

	pair_up();
	if (side_modify(&A, &a, IBV_QP_STATE))
		vc_fail("%s: modify to ERR: %s", what, strerror(errno));
	storm_flushes = 0;
	witness_start(&w, what);
	/* a quarter: storm_fatal storms an errored QP with the full count */
	storm_run(storm_total / 4, step_errored_posts, what);
	witness_stop(&w, 3);
	vc_note("%lu flushed pairs meanwhile", storm_flushes);
	expect_state(&A, IBV_QPS_ERR, what);
	expect_b_quiet(IBV_QPS_RTS, what);
	probe_errored(0, 0, what);
	ev_expect(0, 0, 0, what);
	pair_down();
}

/* A failed by a malformed request (one QP_FATAL): the storm adds none. */
static void c_storm_fatal(void)
{
	const char *what = "doorbell storm after a malformed request";
	struct raw_send g = { .wr_id = 0xc0, .opcode = 0xff, .flags = IBV_SEND_SIGNALED };
	struct witness_run w;

	pair_up();
	raw_post_send(&A, &g);
	ring_sq(&A, what);
	expect_wc(&A, 0xc0, IBV_WC_LOC_QP_OP_ERR, -1, what);
	storm_flushes = 0;
	witness_start(&w, what);
	storm_run(storm_total, step_errored_posts, what);
	witness_stop(&w, 3);
	expect_b_quiet(IBV_QPS_RTS, what);
	probe_errored(0, 0, what);
	ev_expect(1, 0, 0, what);
	pair_down();
}

/* Unreclaimable kernel slab memory, kB (where queued events live). */
static long sunreclaim_kb(void)
{
	FILE *f = fopen("/proc/meminfo", "r");
	char line[128];
	long kb = -1;

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "SUnreclaim: %ld kB", &kb) == 1)
			break;
	fclose(f);
	return kb;
}

/*
 * A's send ring broken (one QP_FATAL), then doorbells: the kernel never
 * reads the ring again and says so once.  Fewer doorbells here: if each
 * raised the event again, each would queue one more event in the kernel
 * (the slab growth meanwhile is noted).
 */
static void c_storm_broken(void)
{
	const char *what = "doorbells on a broken send ring";
	struct mbcf_wq *q;
	long kb;

	pair_up();
	q = sq_of(&A);
	set_prod(q, kcons(q) - 1);
	ring_sq(&A, what);
	ev_wait(IBV_EVENT_QP_FATAL, A.qp, 1, WAIT_S);
	kb = sunreclaim_kb();
	storm_run(storm_total < 20000 ? storm_total : 20000, NULL, what);
	vc_note("unreclaimable slab %+ld kB over the doorbells", sunreclaim_kb() - kb);
	expect_state(&A, IBV_QPS_ERR, what);
	expect_b_quiet(IBV_QPS_RTS, what);
	probe_errored(1, 0, what);
	ev_expect(1, 0, 0, what);
	pair_down();
}

/*
 * A in ERR, a 4096-entry send ring: a thread publishes a full ring of
 * requests (prod = released + n) and rings, over and over, so every
 * doorbell has the kernel flush 4096 requests -- at most a ring per call,
 * the rest from its work item -- into a 64-entry CQ that overruns once.
 * The witness keeps moving data; afterwards the CQ holds exactly 64 flush
 * completions and the QP still flushes what the provider posts.
 */
struct flush_spin {
	pthread_t t;
	volatile int stop;
	unsigned long rounds;
};

static void *flush_spin_thread(void *arg)
{
	struct flush_spin *f = arg;
	struct mbcf_wq *q = sq_of(&A);

	while (!f->stop) {
		set_prod(q, kcons(q) + ring_n(&q->ring));
		if (doorbell(&A, IB_USER_VERBS_CMD_POST_SEND))
			vc_fail("flush spin: doorbell failed");
		f->rounds++;
	}
	return NULL;
}

static void c_storm_flush_spin(void)
{
	const char *what = "full send rings flushed in a loop";
	struct qp_opts oa = dflt;
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_ERR };
	struct flush_spin f = { 0 };
	struct witness_run w;
	struct ibv_wc wc[64];
	double end;
	int n, got = 0, i;

	oa.send_wr = 4096;
	pair_up2(&oa, &dflt);
	if (side_modify(&A, &a, IBV_QP_STATE))
		vc_fail("%s: modify to ERR: %s", what, strerror(errno));
	witness_start(&w, what);
	if (pthread_create(&f.t, NULL, flush_spin_thread, &f))
		vp_die_errno("pthread_create");
	for (end = vp_now() + 3; vp_now() < end;)
		vp_sleep_us(10000);
	f.stop = 1;
	pthread_join(f.t, NULL);
	witness_stop(&w, 3);
	vc_note("%lu rings of 4096 published", f.rounds);
	ev_wait(IBV_EVENT_CQ_ERR, A.cq, 1, WAIT_S);
	/* the work item may still be flushing the last ring */
	for (end = vp_now() + WAIT_S; vp_now() < end &&
	     kcons(sq_of(&A)) != ld32(mbcf_ring_prod(&sq_of(&A)->ring));)
		vp_sleep_us(1000);
	if (kcons(sq_of(&A)) != ld32(mbcf_ring_prod(&sq_of(&A)->ring)))
		vc_fail("%s: the kernel left %u published requests unflushed", what,
		     ld32(mbcf_ring_prod(&sq_of(&A)->ring)) - kcons(sq_of(&A)));
	while ((n = ibv_poll_cq(A.cq, 64, wc)) > 0) {
		for (i = 0; i < n; i++)
			if (wc[i].status != IBV_WC_WR_FLUSH_ERR ||
			    wc[i].qp_num != A.qp->qp_num)
				vc_fail("%s: completion %d: %s, qp %u", what, got + i,
				     ibv_wc_status_str(wc[i].status), wc[i].qp_num);
		got += n;
	}
	if (got != A.cqe)
		vc_fail("%s: %d flush completions in the CQ, expected %d (full)",
		     what, got, A.cqe);
	sync_provider(sq_of(&A));
	expect_b_quiet(IBV_QPS_RTS, what);
	probe_errored(0, 0, what);
	ev_expect(0, 1, 0, what);
	pair_down();
}

/* ---- after destroy, and the mmap offsets ---------------------------------------------------- */

/* A second mapping of the ring the provider mapped at `map` (same pages). */
struct shadow {
	uint8_t *p;
	size_t len;
	uint64_t off;
};

static void shadow_map(struct shadow *s, void *map, size_t len, const char *what)
{
	s->len = len;
	s->p = NULL;
	if (!map_offset(map, &s->off)) {
		vc_fail("%s: ring mapping not in /proc/self/maps", what);
		return;
	}
	s->p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED,
		    A.qp ? A.qp->context->cmd_fd : DA.ctx->cmd_fd, (off_t)s->off);
	if (s->p == MAP_FAILED) {
		vc_fail("%s: second mmap of offset %#" PRIx64 ": %s", what, s->off,
		     strerror(errno));
		s->p = NULL;
	} else if (memcmp(s->p, map, len)) {
		vc_fail("%s: second mapping of %#" PRIx64 " differs", what, s->off);
	}
}

static void shadow_unmap(struct shadow *s)
{
	if (s->p)
		munmap(s->p, s->len);
	s->p = NULL;
}

/* Garbage over the whole ring, indices included. */
static void shadow_trash(struct shadow *s)
{
	size_t i;

	if (s->p)
		for (i = 0; i < s->len; i += 4)
			*(uint32_t *)(s->p + i) = rnd();
}

/* mmap(off, len, flags) on A's command fd fails with `err`, maps nothing. */
static void expect_mmap_fails(uint64_t off, size_t len, int flags, int err,
			      const char *what)
{
	int before = uverbs_maps();
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, flags,
		       DA.ctx->cmd_fd, (off_t)off);

	if (p != MAP_FAILED) {
		vc_fail("%s: mmap(offset %#" PRIx64 ", len %zu) succeeded", what, off, len);
		munmap(p, len);
		return;
	}
	if (errno != err)
		vc_fail("%s: mmap(offset %#" PRIx64 ", len %zu): %s, expected %s", what,
		     off, len, strerror(errno), strerror(err));
	if (uverbs_maps() != before)
		vc_fail("%s: mmap(offset %#" PRIx64 ") failed but left a mapping", what, off);
}

/*
 * Keep second mappings of A's three rings, destroy A: the kernel marked
 * the send and receive rings dead with db_needed set, the CQ ring dead.
 * Then write garbage into all of them and ring A's old doorbells: the
 * handle is gone (ENOENT).  A new QP on the same context (which may get the
 * old handle) moves data exactly while a thread keeps trashing the old
 * mappings and the old doorbells are rung again; the old offsets cannot be
 * mapped again.
 */
static void c_destroy_post_after(void)
{
	const char *what = "post after destroy";
	struct shadow sq, rq, cq;
	uint32_t h;
	int err, i, want;

	pair_up();
	post_write(&A, 0xf0, &RA_src, 0, &RB_dst, 0, 4096, what);
	expect_wc(&A, 0xf0, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, what);
	region_expect(&RB_dst, 0, RA_src.p, 4096);
	shadow_map(&sq, sq_of(&A)->map, sq_of(&A)->map_len, what);
	shadow_map(&rq, rq_of(&A)->map, rq_of(&A)->map_len, what);
	shadow_map(&cq, to_mcq(A.cq)->map, to_mcq(A.cq)->map_len, what);
	h = A.qp->handle;
	ev_expect(0, 0, 0, what);
	side_free(&A);
	if (sq.p && rq.p && cq.p) {
		if (*(uint32_t *)(sq.p + MBCF_RING_FLAGS_OFF) != MBCF_RING_F_DEAD ||
		    *(uint32_t *)(sq.p + MBCF_RING_DB_OFF) != 1 ||
		    *(uint32_t *)(rq.p + MBCF_RING_FLAGS_OFF) != MBCF_RING_F_DEAD ||
		    *(uint32_t *)(rq.p + MBCF_RING_DB_OFF) != 1)
			vc_fail("%s: a destroyed QP's rings are not marked dead "
			     "with db_needed set", what);
		if (*(uint32_t *)(cq.p + MBCF_RING_FLAGS_OFF) != MBCF_RING_F_DEAD)
			vc_fail("%s: a destroyed CQ's ring is not marked dead", what);
	}
	shadow_trash(&sq);
	shadow_trash(&rq);
	shadow_trash(&cq);
	for (i = 0; i < 2; i++) {
		err = vp_doorbell(DA.ctx, h, i ? IB_USER_VERBS_CMD_POST_RECV :
				 IB_USER_VERBS_CMD_POST_SEND);
		if (err != ENOENT)
			vc_fail("%s: doorbell of the destroyed QP: %s, expected %s",
			     what, strerror(err), strerror(ENOENT));
	}
	expect_mmap_fails(sq.off, sq.len, MAP_SHARED, EINVAL, what);
	expect_mmap_fails(cq.off, cq.len, MAP_SHARED, EINVAL, what);

	/* a new A on the same context, while the old mappings are trashed */
	side_free(&B);
	pair_up();
	want = h == A.qp->handle ? 0 : h == A.cq->handle ? EINVAL : ENOENT;
	for (i = 0; i < 8; i++) {
		shadow_trash(&sq);
		shadow_trash(&rq);
		shadow_trash(&cq);
		err = vp_doorbell(DA.ctx, h, IB_USER_VERBS_CMD_POST_SEND);
		if (err != want)
			vc_fail("%s: old handle %u: %s, expected %s", what, h,
			     strerror(err), strerror(want));
		post_write(&A, 0xf1 + i, &RA_src, (size_t)i * 8192, &RB_dst,
			   65536 + (size_t)i * 8192, 8192, what);
		expect_wc(&A, 0xf1 + i, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, what);
		region_expect(&RB_dst, 65536 + (size_t)i * 8192,
			      RA_src.p + i * 8192, 8192);
	}
	shadow_unmap(&sq);
	shadow_unmap(&rq);
	shadow_unmap(&cq);
	expect_state(&A, IBV_QPS_RTS, what);
	expect_b_quiet(IBV_QPS_RTS, what);
	ev_expect(0, 0, 0, what);
	pair_down();
}

/* Offsets and lengths no ring has: EINVAL (EOVERFLOW where the VFS decides). */
static void c_destroy_mmap_bad(void)
{
	const char *what = "mmap of bad offsets";
	struct qp_opts oa = dflt;
	uint64_t sqo, cqo;
	size_t sql, cql;
	void *p;

	oa.cqe = 256;		/* a 4-page CQ ring */
	pair_up2(&oa, &dflt);
	sql = sq_of(&A)->map_len;
	cql = to_mcq(A.cq)->map_len;
	if (!map_offset(sq_of(&A)->map, &sqo) || !map_offset(to_mcq(A.cq)->map, &cqo)) {
		vc_fail("%s: ring mappings not found in /proc/self/maps", what);
		goto out;
	}
	if (cql < 2 * PAGE)
		vc_fail("%s: CQ ring of %zu bytes, expected several pages", what, cql);
	expect_mmap_fails(cqo, cql + PAGE, MAP_SHARED, EINVAL, what);
	expect_mmap_fails(cqo, cql - PAGE, MAP_SHARED, EINVAL, what);
	expect_mmap_fails(cqo + PAGE, cql - PAGE, MAP_SHARED, EINVAL, what);
	expect_mmap_fails(cqo, 0, MAP_SHARED, EINVAL, what);
	expect_mmap_fails(sqo, sql, MAP_PRIVATE, EINVAL, what);
	expect_mmap_fails(1ull << 40, PAGE, MAP_SHARED, EINVAL, what);
	expect_mmap_fails(1ull << 45, PAGE, MAP_SHARED, EINVAL, what);	/* pgoff > 2^32 */
	expect_mmap_fails(0x7ffffffffffff000ull, PAGE, MAP_SHARED, EINVAL, what);
	/* a negative offset: the VFS refuses before the driver sees it */
	expect_mmap_fails(0xfffffffffffff000ull, PAGE, MAP_SHARED, EOVERFLOW, what);
	expect_mmap_fails(sqo + 1000 * PAGE, sql, MAP_SHARED, EINVAL, what);
	/* the control: the right offset and length map */
	p = mmap(NULL, sql, PROT_READ | PROT_WRITE, MAP_SHARED, DA.ctx->cmd_fd,
		 (off_t)sqo);
	if (p == MAP_FAILED)
		vc_fail("%s: the SQ ring's own offset does not map: %s", what,
		     strerror(errno));
	else
		munmap(p, sql);
	post_write(&A, 0xf9, &RA_src, 0, &RB_dst, 0, 4096, what);
	expect_wc(&A, 0xf9, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, what);
	region_expect(&RB_dst, 0, RA_src.p, 4096);
	expect_state(&A, IBV_QPS_RTS, what);
	ev_expect(0, 0, 0, what);
out:
	pair_down();
}

/* A POST_SEND/POST_RECV carrying wr_count work requests (a SEND, no SGE). */
static int post_cmd(uint32_t command, uint32_t handle, uint32_t wr_count,
		    uint32_t wqe_size)
{
	struct {
		struct ib_uverbs_cmd_hdr hdr;
		struct ib_uverbs_post_send cmd;
		struct ib_uverbs_send_wr wr;
	} req;
	struct ib_uverbs_post_send_resp resp;

	memset(&req, 0, sizeof(req));
	req.hdr.command = command;
	req.hdr.in_words = sizeof(req) / 4;
	req.hdr.out_words = sizeof(resp) / 4;
	req.cmd.response = (uintptr_t)&resp;
	req.cmd.qp_handle = handle;
	req.cmd.wr_count = wr_count;
	req.cmd.wqe_size = wqe_size;
	if (command == IB_USER_VERBS_CMD_POST_SEND) {
		req.wr.wr_id = 0x1234;
		req.wr.opcode = IB_UVERBS_WR_SEND;
	}
	if (write(DA.ctx->cmd_fd, &req, sizeof(req)) >= 0)
		return 0;
	return errno;
}

static void c_destroy_doorbell_cmds(void)
{
	const char *what = "doorbells with work requests or bad fields";
	int err;

	pair_up();
	/* work requests through uverbs: user QPs post through the ring only */
	err = post_cmd(IB_USER_VERBS_CMD_POST_SEND, A.qp->handle, 1,
		       sizeof(struct ib_uverbs_send_wr));
	if (err != EOPNOTSUPP)
		vc_fail("%s: POST_SEND with a WR: %s, expected %s", what,
		     strerror(err), strerror(EOPNOTSUPP));
	err = post_cmd(IB_USER_VERBS_CMD_POST_RECV, A.qp->handle, 1,
		       sizeof(struct ib_uverbs_recv_wr));
	if (err != EOPNOTSUPP)
		vc_fail("%s: POST_RECV with a WR: %s, expected %s", what,
		     strerror(err), strerror(EOPNOTSUPP));
	err = vp_doorbell(DA.ctx, 0x7fffffff, IB_USER_VERBS_CMD_POST_SEND);
	if (err != ENOENT)
		vc_fail("%s: doorbell of handle 2^31-1: %s, expected %s", what,
		     strerror(err), strerror(ENOENT));
	err = vp_doorbell(DA.ctx, A.cq->handle, IB_USER_VERBS_CMD_POST_SEND);
	if (err != EINVAL)
		vc_fail("%s: doorbell with a CQ's handle: %s, expected %s", what,
		     strerror(err), strerror(EINVAL));
	post_write(&A, 0xfa, &RA_src, 0, &RB_dst, 0, 4096, what);
	expect_wc(&A, 0xfa, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, what);
	region_expect(&RB_dst, 0, RA_src.p, 4096);
	expect_state(&A, IBV_QPS_RTS, what);
	expect_b_quiet(IBV_QPS_RTS, what);
	ev_expect(0, 0, 0, what);
	pair_down();
}

/*
 * "Broken until a reset": after a broken send ring and its one QP_FATAL,
 * the index given back and both QPs reset and reconnected, data moves
 * exactly again.  (A write before the attack makes the QPs count frames
 * before the reset: tests/vm/rings.sh checks every frame's verdict counter
 * is still there at the end.)
 */
static void c_reset_after_broken(void)
{
	const char *what = "reset after a broken ring";
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_RESET };
	struct mbcf_wq *q;
	int i;

	pair_up();
	q = sq_of(&A);
	post_write(&A, 0xfa, &RA_src, 65536, &RB_dst, 65536, 8192, what);
	expect_wc(&A, 0xfa, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, what);
	region_expect(&RB_dst, 65536, RA_src.p + 65536, 8192);
	set_prod(q, kcons(q) - 1);
	ring_sq(&A, what);
	expect_state(&A, IBV_QPS_ERR, what);
	set_prod(q, q->ring.idx);
	if (side_modify(&A, &a, IBV_QP_STATE) || side_modify(&B, &a, IBV_QP_STATE))
		vc_fail("%s: modify to RESET: %s", what, strerror(errno));
	A.psn = rnd() & 0xffffff;
	B.psn = rnd() & 0xffffff;
	connect_pair(&A, &B);
	for (i = 0; i < 3; i++) {
		post_write(&A, 0xfb + i, &RA_src, (size_t)i * 4096, &RB_dst,
			   (size_t)i * 4096, 4096, what);
		expect_wc(&A, 0xfb + i, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, what);
		region_expect(&RB_dst, (size_t)i * 4096, RA_src.p + i * 4096, 4096);
	}
	post_recv1(&B, 0xfe, &RB_rcv, 0, 4096, what);
	post_send1(&A, 0xff, &RA_src, 12345, 2000, what);
	expect_wc(&A, 0xff, IBV_WC_SUCCESS, IBV_WC_SEND, what);
	expect_wc(&B, 0xfe, IBV_WC_SUCCESS, IBV_WC_RECV, what);
	region_expect(&RB_rcv, 0, RA_src.p + 12345, 2000);
	expect_state(&A, IBV_QPS_RTS, what);
	ev_expect(1, 0, 0, what);
	pair_down();
}

/* ---- garbage in a send slot, field by field ------------------------------------------------- */

/*
 * Every sub-case: a fresh pair; A posts a good signaled write (0x11), then
 * the test's entry (0x6a) straight into the ring, then another good write
 * (0x22).  Expected: 0x11 succeeds; the entry completes with its status
 * after it; 0x22 succeeds if the entry did, else is flushed and A is in
 * ERR, with QP_FATAL exactly for LOC_QP_OP_ERR of a request the provider
 * could not have written (a failed bind or invalidate, G_LOCAL, is an
 * ordinary error).  B's memory: 0x11's bytes, the entry's bytes only if it
 * succeeded, 0x22's only then.
 */
enum gkind {
	G_OPCODE, G_LOCAL, G_FLAGS, G_INLINE, G_NUM_SGE, G_LKEY, G_ADDR, G_LEN, G_MULTI,
	G_ATOMIC, G_READ_RO, G_REMOTE, G_HUGE,
};

/* Values that depend on the QP's caps, resolved once it exists. */
#define V_MAX_SGE	0x100000001ull	/* max_send_sge */
#define V_MAX_SGE1	0x100000002ull	/* max_send_sge + 1 */
#define V_MAX_INL	0x100000003ull	/* max_inline_data */
#define V_MAX_INL1	0x100000004ull	/* max_inline_data + 1 */

struct gcase {
	const char *name;
	enum gkind kind;
	uint64_t v;		/* the garbage value (kind-specific) */
	uint32_t opcode;	/* G_FLAGS, G_INLINE: the entry's opcode */
	enum ibv_wc_status st;	/* the entry's completion */
};

#define GT	0		/* where the entry writes in B's buffer */
#define G1	MIB		/* where 0x11 writes */
#define G2	(MIB + 65536)	/* where 0x22 writes */

static uint8_t land[MIB];	/* the bytes the entry should land at GT */
static uint32_t land_len;

static uint32_t resolve(uint64_t v)
{
	switch (v) {
	case V_MAX_SGE:	return A.cap.max_send_sge;
	case V_MAX_SGE1: return A.cap.max_send_sge + 1;
	case V_MAX_INL:	return A.cap.max_inline_data;
	case V_MAX_INL1: return A.cap.max_inline_data + 1;
	default:	return (uint32_t)v;
	}
}

/* A write entry of one SGE: len bytes of A's source at soff. */
static void g_write1(struct raw_send *r, size_t soff, uint32_t len)
{
	r->opcode = IBV_WR_RDMA_WRITE;
	r->num_sge = 1;
	r->nsg = 1;
	r->sg[0] = msge(&RA_src, soff, len);
	r->raddr = region_addr(&RB_dst, GT);
	r->rkey = RB_dst.mr->rkey;
}

/* Another process's MR on A's device, from the `good` process's key file. */
static int other_process_key(uint32_t *key, uint64_t *addr)
{
	char name[64];
	unsigned long long a, len;
	unsigned int k;
	FILE *f;
	int found = 0;

	if (!keyfile || !(f = fopen(keyfile, "r")))
		return 0;
	while (!found && fscanf(f, "%63s %x %llx %llx", name, &k, &a, &len) == 4)
		if (!strcmp(name, DA.name)) {
			*key = k;
			*addr = a;
			found = 1;
		}
	fclose(f);
	return found;
}

/* Build the entry of g; returns 0 if it cannot be built (a failure). */
static int g_build(const struct gcase *g, struct raw_send *r, struct region *huge)
{
	uint32_t v = resolve(g->v), i, room = send_room(sq_of(&A));
	static uint8_t inl[4096];

	memset(r, 0, sizeof(*r));
	r->wr_id = 0x6a;
	r->flags = IBV_SEND_SIGNALED;
	land_len = 0;
	switch (g->kind) {
	case G_OPCODE:
	case G_LOCAL:		/* a bind / invalidate made of a write's fields */
		g_write1(r, 0, 64);
		r->opcode = v;
		break;
	case G_FLAGS:		/* every flag bit; inline when it is set */
		g_write1(r, 0, 100);
		r->opcode = g->opcode;
		r->flags = v;
		if (r->flags & IBV_SEND_INLINE) {
			for (i = 0; i < 16; i++)
				inl[i] = (uint8_t)rnd();
			r->inl = inl;
			r->inl_len = 16;
			r->inline_len = 16;
			r->num_sge = 0;
			memcpy(land, inl, 16);
			land_len = 16;
		} else {
			memcpy(land, RA_src.p, 100);
			land_len = 100;
		}
		break;
	case G_INLINE:
		g_write1(r, 0, 0);
		r->opcode = g->opcode;
		r->flags |= IBV_SEND_INLINE;
		r->num_sge = 0xffffffff;	/* ignored with inline */
		r->inline_len = v;
		for (i = 0; i < sizeof(inl); i++)
			inl[i] = (uint8_t)rnd();
		r->inl = inl;
		r->inl_len = room;
		if (g->st == IBV_WC_SUCCESS) {
			memcpy(land, inl, v);
			land_len = v;
		}
		break;
	case G_NUM_SGE:		/* the stored SGEs are all valid, 64 bytes each */
		g_write1(r, 0, 64);
		r->num_sge = v;
		r->nsg = 16;
		for (i = 0; i < 16; i++)
			r->sg[i] = msge(&RA_src, (size_t)i * 4096 + i, 64);
		if (g->st == IBV_WC_SUCCESS)
			for (i = 0; i < v; i++) {
				memcpy(land + i * 64, RA_src.p + i * 4096 + i, 64);
				land_len += 64;
			}
		break;
	case G_LKEY:
		g_write1(r, 4096, 64);
		switch (g->v) {
		case 0: r->sg[0].lkey = 0; break;
		case 1: r->sg[0].lkey = 0xffffffff; break;
		case 2: r->sg[0].lkey = rnd() | 0x80000000u; break;	/* no such index */
		case 3: r->sg[0] = msge(&RA_pd2, 0, 64); break;		/* another PD */
		case 4: r->sg[0].lkey ^= 1; break;			/* another generation */
		case 5:		/* B's MR: another context (and maybe device) */
			r->sg[0] = msge(&RB_dst, 4096, 64);
			break;
		case 6: {	/* another process's MR and address */
			uint32_t k;
			uint64_t a;

			if (!other_process_key(&k, &a)) {
				vc_fail("no key of another process (-k KEYFILE)");
				return 0;
			}
			r->sg[0].lkey = k;
			r->sg[0].addr = a;
			break;
		}
		}
		break;
	case G_ADDR: {
		uint64_t s = region_addr(&RA_src, 0), e = s + RA_src.len;
		static const uint64_t kaddr[] = { 0, 0, 0, 0, 0xffffffffffffffffull,
			0xfffffffffffff000ull, 0xffff888000000000ull,
			0xffffffff81000000ull, 0 };
		static const uint32_t klen[] = { 64, 2, 2, 1, 1, 0x2000, 64, 64, 64 };

		g_write1(r, 0, klen[g->v]);
		r->sg[0].addr = g->v == 1 ? s - 1 : g->v == 2 ? e - 1 : g->v == 3 ? e :
				g->v == 8 ? s - PAGE : kaddr[g->v];
		break;
	}
	case G_LEN:
		g_write1(r, 0, v);
		if (g->st == IBV_WC_SUCCESS) {
			if (!v) {	/* zero length: no key or address needed */
				r->sg[0].addr = 0;
				r->sg[0].lkey = 0xdeadbeef;
			}
			memcpy(land, RA_src.p, v);
			land_len = v;
		}
		break;
	case G_MULTI:		/* zero-length garbage SGEs between real ones */
		g_write1(r, 0, 0);
		r->num_sge = 4;
		r->nsg = 4;
		r->sg[0] = msge(&RA_src, 1000, 100);
		r->sg[1] = (struct mbcf_sge){ .addr = 0, .length = 0, .lkey = 0xdeadbeef };
		r->sg[2] = msge(&RA_src, 70000, 200);
		r->sg[3] = (struct mbcf_sge){ .addr = 0xffff888000000000ull,
					      .length = g->v ? 10 : 0, .lkey = 0 };
		if (g->st == IBV_WC_SUCCESS) {
			memcpy(land, RA_src.p + 1000, 100);
			memcpy(land + 100, RA_src.p + 70000, 200);
			land_len = 300;
		}
		break;
	case G_ATOMIC:		/* local buffer in A's rcv region; v: the SGEs */
		r->opcode = g->opcode;
		r->raddr = region_addr(&RB_dst, 0x1000);
		r->rkey = RB_dst.mr->rkey;
		r->compare_add = 0x0102030405060708ull;
		r->swap = 0x1111111111111111ull;
		/* 0: none; 1: one of 4; 2: two of 8; 3: one of 7; 4: two of 4 */
		r->num_sge = g->v == 0 ? 0 : g->v == 1 || g->v == 3 ? 1 : 2;
		r->nsg = 2;
		r->sg[0] = msge(&RA_rcv, 0x100, g->v == 2 ? 8 : g->v == 3 ? 7 : 4);
		r->sg[1] = msge(&RA_rcv, 0x200, g->v == 2 ? 8 : 4);
		break;
	case G_READ_RO:		/* a read into an MR without LOCAL_WRITE */
		g_write1(r, 0, 64);
		r->opcode = IBV_WR_RDMA_READ;
		r->sg[0] = msge(&RA_ro, 0, 64);
		break;
	case G_REMOTE:
		g_write1(r, 0, 64);
		if (g->v == 0) {
			r->raddr = region_addr(&RB_dst, RB_dst.len - 1);
			r->sg[0].length = 2;
		} else {
			r->rkey = rnd() | 0x80000000u;
		}
		break;
	case G_HUGE:		/* SGEs over the 2^28 + 4 KiB read-only MR */
		g_write1(r, 0, 0);
		r->nsg = 16;
		for (i = 0; i < 16; i++)
			r->sg[i] = (struct mbcf_sge){
				.addr = (uintptr_t)huge->p + i * 16, .lkey = huge->mr->lkey,
				.length = (1u << 28) + (g->v == 0 ? 1 : 0) };
		r->num_sge = g->v <= 1 ? 16 : 8;
		if (g->v == 2) {		/* 8 x 2^28 + 1 */
			r->num_sge = 9;
			r->sg[8].length = 1;
		}
		if (g->v == 3)			/* 8 x 2^28 = 2^31 exactly */
			r->rkey = rnd() | 0x80000000u;
		if (g->v == 4) {		/* one SGE of 2^31 */
			r->num_sge = 1;
			r->sg[0].length = 1u << 31;
		}
		break;
	}
	return 1;
}

/* The atomic that succeeds over 2 x 4 bytes: B's word and A's two halves. */
static void g_expect_atomic(const struct gcase *g)
{
	uint64_t orig, now;

	memcpy(&orig, RB_dst.p + 0x1000, 8);
	now = g->opcode == IBV_WR_ATOMIC_FETCH_AND_ADD ?
	      orig + 0x0102030405060708ull :
	      orig == 0x0102030405060708ull ? 0x1111111111111111ull : orig;
	region_expect(&RB_dst, 0x1000, &now, 8);
	region_expect(&RA_rcv, 0x100, &orig, 4);
	region_expect(&RA_rcv, 0x200, (uint8_t *)&orig + 4, 4);
}

static void g_run(const struct gcase *g, const struct qp_opts *oa, struct region *huge)
{
	struct raw_send r;
	/* a bind or local invalidate that fails is a request like any other */
	int fatal = g->st == IBV_WC_LOC_QP_OP_ERR && g->kind != G_LOCAL;
	int remote = g->st == IBV_WC_REM_ACCESS_ERR;
	int ok = g->st == IBV_WC_SUCCESS;
	int wc_op = g->kind == G_ATOMIC ? (g->opcode == IBV_WR_ATOMIC_FETCH_AND_ADD ?
					   IBV_WC_FETCH_ADD : IBV_WC_COMP_SWAP) :
					  IBV_WC_RDMA_WRITE;

	pair_up2(oa, &dflt);
	if (!g_build(g, &r, huge))
		goto out;
	post_write(&A, 0x11, &RA_src, 0x80000, &RB_dst, G1, 4096, g->name);
	region_expect(&RB_dst, G1, RA_src.p + 0x80000, 4096);
	if (ok && g->kind == G_ATOMIC)
		g_expect_atomic(g);
	else if (ok)
		region_expect(&RB_dst, GT, land, land_len);
	raw_post_send(&A, &r);
	ring_sq(&A, g->name);
	post_write(&A, 0x22, &RA_src, 0x90000, &RB_dst, G2, 4096, g->name);
	expect_wc(&A, 0x11, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, g->name);
	expect_wc(&A, 0x6a, g->st, ok ? wc_op : -1, g->name);
	if (ok) {
		expect_wc(&A, 0x22, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, g->name);
		region_expect(&RB_dst, G2, RA_src.p + 0x90000, 4096);
		expect_no_wc(&A, 0.02, g->name);
		expect_state(&A, IBV_QPS_RTS, g->name);
	} else {
		expect_wc(&A, 0x22, IBV_WC_WR_FLUSH_ERR, -1, g->name);
		probe_errored(0, 0, g->name);
	}
	expect_b_quiet(remote ? IBV_QPS_ERR : IBV_QPS_RTS, g->name);
	ev_expect(fatal, 0, 0, g->name);
out:
	pair_down();
}

#define OP_ERR	IBV_WC_LOC_QP_OP_ERR
#define PROT	IBV_WC_LOC_PROT_ERR
#define LEN	IBV_WC_LOC_LEN_ERR
#define OK	IBV_WC_SUCCESS
#define WRITE	IBV_WR_RDMA_WRITE
#define READ	IBV_WR_RDMA_READ
#define FADD	IBV_WR_ATOMIC_FETCH_AND_ADD
#define CSWAP	IBV_WR_ATOMIC_CMP_AND_SWP

static const struct gcase gcases[] = {
	/* 7 LOCAL_INV of key 0 (no window), 8 BIND_MW of window 0: valid
	 * requests that fail; 9 SEND_WITH_INV is a send (tests/vm/verbs_ex) */
	{ "opcode_7_local_inv", G_LOCAL, 7, 0, OP_ERR },
	{ "opcode_8_bind_mw", G_LOCAL, 8, 0, IBV_WC_MW_BIND_ERR },
	{ "opcode_10", G_OPCODE, 10, 0, OP_ERR },
	{ "opcode_11", G_OPCODE, 11, 0, OP_ERR },
	{ "opcode_12", G_OPCODE, 12, 0, OP_ERR },
	{ "opcode_13", G_OPCODE, 13, 0, OP_ERR },
	{ "opcode_0x7f", G_OPCODE, 0x7f, 0, OP_ERR },
	{ "opcode_0x80", G_OPCODE, 0x80, 0, OP_ERR },
	{ "opcode_0xff", G_OPCODE, 0xff, 0, OP_ERR },
	{ "opcode_0x100", G_OPCODE, 0x100, 0, OP_ERR },
	{ "opcode_0x10000", G_OPCODE, 0x10000, 0, OP_ERR },
	{ "opcode_2^31-1", G_OPCODE, 0x7fffffff, 0, OP_ERR },
	{ "opcode_2^31", G_OPCODE, 0x80000000, 0, OP_ERR },
	{ "opcode_2^32-1", G_OPCODE, 0xffffffff, 0, OP_ERR },
	{ "flags_all_write", G_FLAGS, 0xffffffff, WRITE, OK },
	{ "flags_all_but_inline_write", G_FLAGS, ~(uint32_t)IBV_SEND_INLINE, WRITE, OK },
	{ "flags_all_read", G_FLAGS, 0xffffffff, READ, OP_ERR },
	{ "flags_all_fetch_add", G_FLAGS, 0xffffffff, FADD, OP_ERR },
	{ "flags_all_cmp_swap", G_FLAGS, 0xffffffff, CSWAP, OP_ERR },
	{ "inline_0", G_INLINE, 0, WRITE, OK },
	{ "inline_1", G_INLINE, 1, WRITE, OK },
	{ "inline_max", G_INLINE, V_MAX_INL, WRITE, OK },
	{ "inline_max+1", G_INLINE, V_MAX_INL1, WRITE, OP_ERR },
	{ "inline_256", G_INLINE, 256, WRITE, OP_ERR },
	{ "inline_4096", G_INLINE, 4096, WRITE, OP_ERR },
	{ "inline_2^31", G_INLINE, 0x80000000, WRITE, OP_ERR },
	{ "inline_2^32-1", G_INLINE, 0xffffffff, WRITE, OP_ERR },
	{ "inline_read_0", G_INLINE, 0, READ, OP_ERR },
	{ "inline_read_8", G_INLINE, 8, READ, OP_ERR },
	{ "inline_fetch_add_8", G_INLINE, 8, FADD, OP_ERR },
	{ "inline_cmp_swap_8", G_INLINE, 8, CSWAP, OP_ERR },
	{ "num_sge_0", G_NUM_SGE, 0, 0, OK },
	{ "num_sge_max", G_NUM_SGE, V_MAX_SGE, 0, OK },
	{ "num_sge_max+1", G_NUM_SGE, V_MAX_SGE1, 0, OP_ERR },
	{ "num_sge_16", G_NUM_SGE, 16, 0, OP_ERR },
	{ "num_sge_17", G_NUM_SGE, 17, 0, OP_ERR },
	{ "num_sge_2^31", G_NUM_SGE, 0x80000000, 0, OP_ERR },
	{ "num_sge_2^32-1", G_NUM_SGE, 0xffffffff, 0, OP_ERR },
	{ "lkey_0", G_LKEY, 0, 0, PROT },
	{ "lkey_2^32-1", G_LKEY, 1, 0, PROT },
	{ "lkey_random", G_LKEY, 2, 0, PROT },
	{ "lkey_other_pd", G_LKEY, 3, 0, PROT },
	{ "lkey_other_generation", G_LKEY, 4, 0, PROT },
	{ "lkey_peer_mr", G_LKEY, 5, 0, PROT },
	{ "lkey_other_process", G_LKEY, 6, 0, PROT },
	{ "addr_0", G_ADDR, 0, 0, PROT },
	{ "addr_before_mr", G_ADDR, 1, 0, PROT },
	{ "addr_across_end", G_ADDR, 2, 0, PROT },
	{ "addr_at_end", G_ADDR, 3, 0, PROT },
	{ "addr_2^64-1", G_ADDR, 4, 0, PROT },
	{ "addr_wraps", G_ADDR, 5, 0, PROT },
	{ "addr_kernel_direct_map", G_ADDR, 6, 0, PROT },
	{ "addr_kernel_text", G_ADDR, 7, 0, PROT },
	{ "addr_guard_page", G_ADDR, 8, 0, PROT },
	{ "len_0_garbage_key", G_LEN, 0, 0, OK },
	{ "len_1", G_LEN, 1, 0, OK },
	{ "len_mr", G_LEN, MIB, 0, OK },
	{ "len_mr+1", G_LEN, MIB + 1, 0, PROT },
	{ "len_2^31", G_LEN, 0x80000000, 0, PROT },
	{ "len_2^31+1", G_LEN, 0x80000001, 0, PROT },
	{ "len_2^32-1", G_LEN, 0xffffffff, 0, PROT },
	{ "sge_zero_len_garbage", G_MULTI, 0, 0, OK },
	{ "sge_bad_in_list", G_MULTI, 1, 0, PROT },
	{ "fetch_add_4_bytes", G_ATOMIC, 1, FADD, LEN },
	{ "fetch_add_no_sge", G_ATOMIC, 0, FADD, LEN },
	{ "fetch_add_16_bytes", G_ATOMIC, 2, FADD, LEN },
	{ "cmp_swap_7_bytes", G_ATOMIC, 3, CSWAP, LEN },
	{ "fetch_add_2x4_bytes", G_ATOMIC, 4, FADD, OK },
	{ "cmp_swap_2x4_bytes", G_ATOMIC, 4, CSWAP, OK },
	{ "read_into_readonly", G_READ_RO, 0, 0, PROT },
	{ "remote_across_end", G_REMOTE, 0, 0, IBV_WC_REM_ACCESS_ERR },
	{ "remote_bad_rkey", G_REMOTE, 1, 0, IBV_WC_REM_ACCESS_ERR },
};

/* 16 SGEs over one 2^28 + 4 KiB MR: sums past 2^31 and 2^32. */
static const struct gcase hcases[] = {
	{ "sum_2^32+16", G_HUGE, 0, 0, LEN },
	{ "sum_2^32", G_HUGE, 1, 0, LEN },
	{ "sum_2^31+1", G_HUGE, 2, 0, LEN },
	{ "sum_2^31_bad_rkey", G_HUGE, 3, 0, IBV_WC_REM_ACCESS_ERR },
	{ "one_sge_2^31", G_HUGE, 4, 0, PROT },
};

#define NG(a) (sizeof(a) / sizeof((a)[0]))

/* The read-only 2^28 + 4 KiB MR of the huge cases (pinned only meanwhile). */
static struct region RA_huge;

static void huge_make(void)
{
	size_t len = (1u << 28) + PAGE;

	if (RA_huge.map)
		return;
	RA_huge.name = "A huge";
	RA_huge.len = len;
	RA_huge.map_len = len + 2 * PAGE;
	RA_huge.map = mmap(NULL, RA_huge.map_len, PROT_READ,
			   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (RA_huge.map == MAP_FAILED)
		vp_die_errno("mmap (huge)");
	RA_huge.p = RA_huge.map + PAGE;
	RA_huge.mr = ibv_reg_mr(DA.pd, RA_huge.p, len, 0);
	if (!RA_huge.mr)
		vp_die_errno("ibv_reg_mr (huge)");
}

static void huge_free(void)
{
	if (!RA_huge.map)
		return;
	if (ibv_dereg_mr(RA_huge.mr))
		vp_die_errno("ibv_dereg_mr (huge)");
	munmap(RA_huge.map, RA_huge.map_len);
	memset(&RA_huge, 0, sizeof(RA_huge));
}

/* ---- the cases -------------------------------------------------------------------------------- */

struct tcase {
	const char *name;
	void (*fn)(void);
	const char *group;
	const char *what;
};

static const struct tcase cases[] = {
	{ "sq_rewind_held", c_sq_rewind_held, "sq", "3 SENDs held by RNR, prod rewound into them -> flushed, QP_FATAL" },
	{ "sq_rewind_released", c_sq_rewind_released, "sq", "held SENDs, prod = what the kernel released -> flushed, QP_FATAL" },
	{ "sq_rewind_behind", c_sq_rewind_behind, "sq", "held SENDs, prod behind what was released -> flushed, QP_FATAL" },
	{ "sq_advance_past", c_sq_advance_past, "sq", "held SENDs, prod = released + n + 1 -> flushed, QP_FATAL" },
	{ "sq_advance_far", c_sq_advance_far, "sq", "held SENDs, prod + 2^31 -> flushed, QP_FATAL" },
	{ "sq_garbage_held", c_sq_garbage_held, "sq", "held SENDs, random prod -> flushed, QP_FATAL" },
	{ "sq_idle_rewind", c_sq_idle_rewind, "sq", "idle, prod - 1 -> QP_FATAL" },
	{ "sq_idle_advance", c_sq_idle_advance, "sq", "idle, prod + n + 1 -> QP_FATAL" },
	{ "sq_idle_garbage", c_sq_idle_garbage, "sq", "idle, random prod -> QP_FATAL" },
	{ "sq_at_limit", c_sq_at_limit, "sq", "held SENDs + n-3 raw writes, prod = released + n -> all succeed" },
	{ "sq_rewind_write", c_sq_rewind_write, "sq", "16 MiB write in flight, prod rewound -> prefix of it at B, QP_FATAL" },
	{ "rq_rewind", c_rq_rewind, "rq", "receive prod behind consumed -> B REM_OP_ERR, A QP_FATAL" },
	{ "rq_advance_past", c_rq_advance_past, "rq", "receive prod + n + 1 -> B REM_OP_ERR, A QP_FATAL" },
	{ "rq_advance_far", c_rq_advance_far, "rq", "receive prod + 2^31 -> B REM_OP_ERR, A QP_FATAL" },
	{ "rq_garbage", c_rq_garbage, "rq", "random receive prod -> B REM_OP_ERR, A QP_FATAL" },
	{ "rq_at_limit", c_rq_at_limit, "rq", "n raw receives, prod = n -> n messages exact" },
	{ "rq_num_sge_over", c_rq_num_sge_over, "rq", "receive num_sge = max + 1 -> FLUSH, B REM_OP_ERR, QP_FATAL" },
	{ "rq_num_sge_17", c_rq_num_sge_17, "rq", "receive num_sge = 17 -> QP_FATAL" },
	{ "rq_num_sge_ffffffff", c_rq_num_sge_ffffffff, "rq", "receive num_sge = 2^32-1 -> QP_FATAL" },
	{ "rq_num_sge_0", c_rq_num_sge_0, "rq", "receive num_sge = 0 -> LOC_LEN_ERR / REM_INV_REQ_ERR" },
	{ "rq_num_sge_max", c_rq_num_sge_max, "rq", "receive with max SGEs -> exact scatter" },
	{ "rq_lkey_0", c_rq_lkey_0, "rq", "receive lkey 0 -> LOC_PROT_ERR / REM_OP_ERR" },
	{ "rq_lkey_pd2", c_rq_lkey_pd2, "rq", "receive into another PD's MR -> LOC_PROT_ERR" },
	{ "rq_lkey_readonly", c_rq_lkey_readonly, "rq", "receive into an MR without LOCAL_WRITE -> LOC_PROT_ERR" },
	{ "rq_kernel_addr", c_rq_kernel_addr, "rq", "receive at a kernel address -> LOC_PROT_ERR" },
	{ "rq_wrap_addr", c_rq_wrap_addr, "rq", "receive range wrapping 2^64 -> LOC_PROT_ERR" },
	{ "rq_past_end", c_rq_past_end, "rq", "receive range past the MR -> LOC_PROT_ERR" },
	{ "rq_zero_len_garbage", c_rq_zero_len_garbage, "rq", "zero-length garbage SGEs -> exact scatter" },
	{ "rq_huge_lengths", c_rq_huge_lengths, "rq", "SGE lengths 2^32-1 -> exact 1000 bytes" },
	{ "rq_rewind_inflight", c_rq_rewind_inflight, "rq", "16 MiB receive: rewind + scribble -> exact, then QP_FATAL" },
	{ "cq_advance", c_cq_advance, "cq", "CQ cons = prod + 1 -> CQ_ERR, QP to ERR" },
	{ "cq_rewind_full", c_cq_rewind_full, "cq", "CQ cons = prod - n -> CQ_ERR" },
	{ "cq_rewind_past", c_cq_rewind_past, "cq", "CQ cons = prod - n - 1 -> CQ_ERR" },
	{ "cq_garbage", c_cq_garbage, "cq", "random CQ cons -> CQ_ERR" },
	{ "cq_one_slot", c_cq_one_slot, "cq", "CQ cons = prod - (n-1) -> one more fits, the next overruns" },
	{ "cq_rewind_legal", c_cq_rewind_legal, "cq", "CQ cons = prod - 1 -> nothing happens" },
	{ "cq_recv_overrun", c_cq_recv_overrun, "cq", "receive completion overruns -> CQ_ERR, sender RETRY_EXC_ERR" },
	{ "scribble_write", c_scribble_write, "scribble", "slot rewritten under a 16 MiB write -> exact bytes" },
	{ "scribble_held", c_scribble_held, "scribble", "slots rewritten under RNR-held SENDs (inline, 4 SGEs) -> exact bytes" },
	{ "storm_live", c_storm_live, "storm", "doorbell storm on a live QP + writes + witness" },
	{ "storm_errored", c_storm_errored, "storm", "doorbell storm on a QP in ERR (modify) + flushed posts" },
	{ "storm_fatal", c_storm_fatal, "storm", "doorbell storm after LOC_QP_OP_ERR: one QP_FATAL" },
	{ "storm_broken", c_storm_broken, "storm", "doorbells on a broken ring: one QP_FATAL" },
	{ "storm_flush_spin", c_storm_flush_spin, "storm", "4096-entry rings flushed in a loop into a 64-entry CQ" },
	{ "destroy_post_after", c_destroy_post_after, "destroy", "rings kept mapped past destroy: dead, old doorbells ENOENT" },
	{ "destroy_mmap_bad", c_destroy_mmap_bad, "destroy", "mmap of bad offsets/lengths: EINVAL, nothing mapped" },
	{ "destroy_doorbell_cmds", c_destroy_doorbell_cmds, "destroy", "POST_SEND/RECV with WRs or bad handles" },
	{ "reset_after_broken", c_reset_after_broken, "reset", "broken ring, reset, reconnect -> data moves" },
};

#define NCASES NG(cases)

static const struct qp_opts *huge_opts(void)
{
	static struct qp_opts o;

	o = dflt;
	o.send_sge = 16;
	return &o;
}

static int failed, ran;

static void case_start(const char *name)
{
	vc_start();
	reseed(name);
	regions_refill();
	ev_reset();
}

static void case_end(const char *name, const char *what, double t0)
{
	regions_check(name);
	witness_once(name);
	failed += vc_end(name, dev_a, dev_b, what, t0);
	ran++;
}

static void run_case(const struct tcase *c)
{
	double t0 = vp_now();

	case_start(c->name);
	c->fn();
	case_end(c->name, c->what, t0);
}

static void run_gcase(const char *group, const struct gcase *g, int huge)
{
	char name[96], what[160];
	double t0 = vp_now();

	snprintf(name, sizeof(name), "%s.%s", group, g->name);
	snprintf(what, sizeof(what), "-> %s%s", ibv_wc_status_str(g->st),
		 g->st == IBV_WC_LOC_QP_OP_ERR ? " + QP_FATAL" : "");
	case_start(name);
	if (huge)
		huge_make();
	g_run(g, huge ? huge_opts() : &dflt, huge ? &RA_huge : NULL);
	case_end(name, what, t0);
}

static int selected(int argc, char **argv, const char *name, const char *group)
{
	int i;

	for (i = 0; i < argc; i++)
		if (!strcmp(argv[i], "all") || !strcmp(argv[i], name) ||
		    !strcmp(argv[i], group))
			return 1;
	return 0;
}

static void run_selected(int argc, char **argv)
{
	char name[96];
	size_t k;

	for (k = 0; k < NCASES; k++)
		if (selected(argc, argv, cases[k].name, cases[k].group))
			run_case(&cases[k]);
	for (k = 0; k < NG(gcases); k++) {
		snprintf(name, sizeof(name), "garbage.%s", gcases[k].name);
		if (selected(argc, argv, name, "garbage"))
			run_gcase("garbage", &gcases[k], 0);
	}
	for (k = 0; k < NG(hcases); k++) {
		snprintf(name, sizeof(name), "huge.%s", hcases[k].name);
		if (selected(argc, argv, name, "huge"))
			run_gcase("huge", &hcases[k], 1);
	}
	huge_free();
}

static int known(const char *arg)
{
	char name[96];
	size_t k;

	if (!strcmp(arg, "all") || !strcmp(arg, "garbage") || !strcmp(arg, "huge"))
		return 1;
	for (k = 0; k < NCASES; k++)
		if (!strcmp(arg, cases[k].name) || !strcmp(arg, cases[k].group))
			return 1;
	for (k = 0; k < NG(gcases); k++) {
		snprintf(name, sizeof(name), "garbage.%s", gcases[k].name);
		if (!strcmp(arg, name))
			return 1;
	}
	for (k = 0; k < NG(hcases); k++) {
		snprintf(name, sizeof(name), "huge.%s", hcases[k].name);
		if (!strcmp(arg, name))
			return 1;
	}
	return 0;
}

/* ---- the other process: an honest pair, every byte checked ------------------------------------ */

static volatile sig_atomic_t good_stop;

static void on_term(int sig)
{
	(void)sig;
	good_stop = 1;
}

static struct region RX_rcv;

/* W sends fresh random bytes to X: the receive holds exactly them. */
static int good_send_once(void)
{
	size_t len = 1 + (size_t)rand_r(&wit_rs) % (64 * 1024), i;
	struct ibv_sge sg = sge_of(&RW_src, 0, (uint32_t)len);
	struct ibv_wc wc;

	for (i = 0; i < len; i++)
		RW_src.p[i] = (uint8_t)rand_r(&wit_rs);
	if (post_recv1(&X, 3, &RX_rcv, 0, 64 * 1024, "good") ||
	    post_send_sg(&W, 4, &sg, 1, 0, "good"))
		return 0;
	if (expect_wc(&W, 4, IBV_WC_SUCCESS, IBV_WC_SEND, "good") ||
	    !get_wc(&X, &wc, WAIT_S) || wc.status != IBV_WC_SUCCESS ||
	    wc.wr_id != 3 || wc.byte_len != len) {
		vc_fail("good: send/receive of %zu bytes failed", len);
		return 0;
	}
	if (memcmp(RX_rcv.p, RW_src.p, len)) {
		vc_fail("good: %zu bytes received differ", len);
		return 0;
	}
	return 1;
}

static void good_status(const char *path, unsigned long n)
{
	char tmp[512];
	FILE *f;

	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	f = fopen(tmp, "w");
	if (!f)
		return;
	fprintf(f, "%lu %d\n", n, vc_fails());
	fclose(f);
	rename(tmp, path);
}

static int good_main(const char *kf, const char *statusf)
{
	char tmp[512];
	unsigned long n = 0;
	double last = 0;
	FILE *f;

	dev_open(&DA, dev_a);
	dev_open(&DB, dev_b);
	reseed("good");
	witness_make();
	region_new(&RX_rcv, "X rcv", DB.pd, 64 * 1024, IBV_ACCESS_LOCAL_WRITE);
	snprintf(tmp, sizeof(tmp), "%s.tmp", kf);
	f = fopen(tmp, "w");
	if (!f)
		vp_die_errno(tmp);
	fprintf(f, "%s %x %llx %llx\n%s %x %llx %llx\n", DA.name, RW_src.mr->lkey,
		(unsigned long long)region_addr(&RW_src, 0),
		(unsigned long long)RW_src.len, DB.name, RX_dst.mr->lkey,
		(unsigned long long)region_addr(&RX_dst, 0),
		(unsigned long long)RX_dst.len);
	fclose(f);
	if (rename(tmp, kf))
		vp_die_errno("rename");
	signal(SIGTERM, on_term);
	printf("good [%s-%s]: ready, seed %u\n", dev_a, dev_b, seed);
	fflush(stdout);
	while (!good_stop && !vc_fails()) {
		if (!witness_once("good") || !good_send_once())
			break;
		n++;
		ev_collect(0);
		if (nevs) {
			vc_fail("good: %d x %s", evs[0].n, ibv_event_type_str(evs[0].type));
			break;
		}
		if (vp_now() - last > 0.5) {
			good_status(statusf, n);
			last = vp_now();
		}
	}
	good_status(statusf, n);
	printf("good [%s-%s]: %lu round trips (write, read back, send), %s%s\n",
	       dev_a, dev_b, n, vc_fails() ? "FAILED: " : "every byte right",
	       vc_message());
	region_free(&RX_rcv);
	witness_free();
	dev_close(&DA);
	dev_close(&DB);
	return vc_fails() ? 1 : 0;
}

/* ---- main -------------------------------------------------------------------------------------- */

static void usage(void)
{
	size_t k;

	fprintf(stderr,
		"usage: mbcf_ring_attack [-a DEV] [-b DEV] [-s SEED] [-k KEYFILE] "
		"[-D DOORBELLS] [-T SECONDS] CASE|GROUP|all...\n"
		"       mbcf_ring_attack [-a DEV] [-b DEV] [-s SEED] good KEYFILE STATUSFILE\n"
		"groups: sq rq cq scribble storm destroy reset garbage huge\n");
	for (k = 0; k < NCASES; k++)
		fprintf(stderr, "  %-24s %-8s %s\n", cases[k].name, cases[k].group,
			cases[k].what);
	for (k = 0; k < NG(gcases); k++)
		fprintf(stderr, "  garbage.%-32s -> %s\n", gcases[k].name,
			ibv_wc_status_str(gcases[k].st));
	for (k = 0; k < NG(hcases); k++)
		fprintf(stderr, "  huge.%-35s -> %s\n", hcases[k].name,
			ibv_wc_status_str(hcases[k].st));
	exit(2);
}

int main(int argc, char **argv)
{
	int opt, i, seeded = 0;
	double t0 = vp_now();

	setvbuf(stdout, NULL, _IOLBF, 0);
	while ((opt = getopt(argc, argv, "a:b:s:k:D:T:l")) != -1) {
		switch (opt) {
		case 'a': dev_a = optarg; break;
		case 'b': dev_b = optarg; break;
		case 's': seed = (unsigned int)strtoul(optarg, NULL, 0); seeded = 1; break;
		case 'k': keyfile = optarg; break;
		case 'D': storm_total = strtoul(optarg, NULL, 0); break;
		case 'T': storm_max_s = atof(optarg); break;
		default: usage();
		}
	}
	if (!seeded)
		seed = (unsigned int)time(NULL) ^ ((unsigned int)getpid() << 16);
	if (optind >= argc)
		usage();
	if (!strcmp(argv[optind], "good")) {
		if (optind + 3 != argc)
			usage();
		return good_main(argv[optind + 1], argv[optind + 2]);
	}
	for (i = optind; i < argc; i++)
		if (!known(argv[i])) {
			fprintf(stderr, "unknown case or group '%s'\n", argv[i]);
			usage();
		}
	printf("ring_attack [%s-%s]: seed %u (rerun: -s %u)\n", dev_a, dev_b, seed, seed);
	dev_open(&DA, dev_a);
	dev_open(&DB, dev_b);
	reseed("setup");
	regions_make();
	witness_make();
	/* The garbage table assumes these caps of the default QP. */
	if (W.cap.max_send_sge != 4 || W.cap.max_recv_sge != 4 ||
	    W.cap.max_inline_data < 64 || W.cap.max_send_wr != 16) {
		fprintf(stderr, "setup: default QP caps sge %u/%u inline %u wr %u\n",
			W.cap.max_send_sge, W.cap.max_recv_sge,
			W.cap.max_inline_data, W.cap.max_send_wr);
		exit(2);
	}
	run_selected(argc - optind, argv + optind);
	witness_free();
	regions_free();
	dev_close(&DA);
	dev_close(&DB);
	printf("ring_attack [%s-%s]: %d case(s), %d failed, witness %lu round trips, "
	       "%.1f s, seed %u\n", dev_a, dev_b, ran, failed, wit_ok, vp_now() - t0,
	       seed);
	return failed > 100 ? 100 : failed;
}
