// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Object lifetimes under fire, with exact checks (tests/vm/lifetimes.sh).
 *
 *   mbcf_lifetimes [-a DEV] [-b DEV] [-s SEED] [-f RATE] destroy ROUNDS
 *   mbcf_lifetimes [-a DEV] [-b DEV] [-s SEED] [-f RATE] dereg|deregbig|lastwords ROUNDS
 *   mbcf_lifetimes [-a DEV] [-b DEV] [-s SEED] [-f RATE] holder PAIRS
 *                  [-E DEV=EVENT,EVENT...]... [-I EVENT]... [-w SECONDS]
 *
 * QP A lives on device -a (mbcf0), its peer B on -b (mbcf1); both in this
 * process.  Traffic is stream.c: writes, reads and sends both ways, every
 * completion and every byte checked.  -f RATE adds a raw-frame flood
 * (vmprog.h) at RATE frames/s aimed at the live QPs: frames that are
 * dropped or counted, never acted on, so they race with the QPs' lifetimes
 * without changing what the test may expect.
 *
 * destroy: each round connects a fresh pair, streams a random 0-40 ms,
 *   then (round % 4) destroys A while B streams (B must end with exactly
 *   one RETRY_EXC_ERR, then flushes -- or only flushes, see holder below
 *   -- and B in ERR), destroys A then B, B
 *   then A, or moves A to ERR (every request of A completes once, SUCCESS
 *   or FLUSH) and destroys it.  Target memory only ever holds zeroes or
 *   the sender's pattern.
 * dereg: each round deregisters, mid-stream, the remote target of B's
 *   writes and reads (even rounds: B's first error must be REM_ACCESS_ERR,
 *   also when the dereg caught A building a response it had accepted: A
 *   NAKs that read; B and A end in ERR; the time from dereg to B's error
 *   is printed) or the local memory of A's writes and reads (odd
 *   rounds: A's first error must be LOC_PROT_ERR, A ends in ERR).  The pinned-page count is back to its
 *   value before registration the moment dereg returns, and after it
 *   returned the memory is filled with a marker byte: no later write may
 *   change it, and no later frame may carry it (a read of the target, or a
 *   write gathered from the local memory).
 * deregbig: 64 MiB operations whose memory is deregistered once the
 *   first bytes arrived: (a) a write's source (it must fail with
 *   LOC_PROT_ERR), (b) a read's sink, with a write posted after it (the
 *   read must fail with LOC_PROT_ERR, the write be flushed), (c) a remote
 *   read's source (the read must fail with REM_ACCESS_ERR: the responder
 *   NAKs it); no byte written into the memory
 *   after dereg returned may reach the peer or land.
 * lastwords: B accepts A's write but every ACK of B is dropped (a tc
 *   filter on veth1); B's QP is destroyed, the filter removed: A's next
 *   resend must be answered from B's last words (docs/protocol.md 8.4) and
 *   the write complete with SUCCESS, not RETRY_EXC_ERR.  The write must
 *   still be unacknowledged when B goes (the filter did drop the ACKs).
 * holder: PAIRS pairs stream until the devices named by -E die under us
 *   (rdma link delete, netdev removal, rmmod: the script does that, after
 *   sending SIGUSR1 -- from then on a QP's first error may be RETRY_EXC_ERR,
 *   as its peer or its link may go first).  A dead device's context must
 *   deliver exactly the events listed (EV* = any number of EV there),
 *   ending with DEVICE_FATAL; its CQs then give what is left (SUCCESS or
 *   FLUSH, each request once, in order -- or one LOC_PROT_ERR among them,
 *   see note_deaths) and -1/EIO; posting fails with EIO;
 *   reg_mr, create_cq/qp, alloc_pd, query_qp, req_notify_cq fail with EIO;
 *   every destroy and close succeeds.  A device not named must deliver no
 *   event, and each of its QPs must end in ERR, its requests completing
 *   with SUCCESS, then one RETRY_EXC_ERR (its peer is gone), then flushes
 *   -- or only flushes: when the connection died of its own responses
 *   going unacknowledged, no request carries the cause (see the report).
 *   -I EVENT: events of that type are printed, not checked.
 *
 * Output: PASS/FAIL lines, a summary; exit status = failed checks (max
 * 100), 2 for setup errors.  Prints "seed N": rerun with -s N.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <linux/netlink.h>
#include <linux/pkt_sched.h>
#include <linux/rtnetlink.h>
#include <sys/socket.h>

#include "stream.h"
#include "vmprog.h"

#define SIZE		4096
#define DSIZE		16384	/* dereg: 12 frames per operation in flight */
#define WIN		4
#define RWIN		4
#define CQ_DEPTH	256

static const char *dev_a = "mbcf0", *dev_b = "mbcf1";
static uint64_t seed;
static int flushed_only;	/* QPs whose peer vanished, failed with flushes only */
static int peer_mr_first;	/* ... whose first error was the NAK of a peer being torn down */
/* first errors of a QP whose peer device is being removed (note_deaths) */
#define PEER_TORN_DOWN	(1 << IBV_WC_REM_ACCESS_ERR | 1 << IBV_WC_REM_OP_ERR)
static unsigned int flood_rate;
static struct vp_flood flood;
static int sock_a = -1, sock_b = -1;	/* flood sockets reaching dev_a, dev_b */

/* Fast failure detection where a test waits for RETRY_EXC_ERR. */
static const struct vp_conn_opts race_opts = {
	.timeout = 13,		/* 33.5 ms, doubling: 4 retries ~1 s */
	.retry_cnt = 4,
	.rnr_retry = 7,
	.min_rnr_timer = 12,
};

/*
 * race_opts on a kernel VM_TIME_SCALE times slower (the debug lane): every
 * retry waits that much longer.  The holder's 16 pairs and a perftest
 * stream kept the debug kernel's queues busy past race_opts' ~1 s, and
 * every pair failed with RETRY_EXC_ERR before the removal began.
 */
static struct vp_conn_opts scaled_race_opts(void)
{
	return vp_scaled_opts(&race_opts);
}

struct pair {
	struct vp_ep a, b;
	struct st_stream sa, sb;
};

static struct ibv_cq *cq_new(struct vp_dev *d)
{
	struct ibv_cq *cq = ibv_create_cq(d->ctx, CQ_DEPTH, NULL, NULL, 0);

	if (!cq)
		vp_die("ibv_create_cq on %s: %s", d->name, strerror(errno));
	return cq;
}

/* A connected pair A (on da) - B (on db), each with its own CQ. */
static void pair_connect(struct pair *p, struct vp_dev *da, struct vp_dev *db,
			 const struct vp_conn_opts *o)
{
	int err;

	memset(p, 0, sizeof(*p));
	err = vp_ep_create(&p->a, da, cq_new(da), 32, 32);
	if (!err)
		err = vp_ep_create(&p->b, db, cq_new(db), 32, 32);
	if (err)
		vp_die("ibv_create_qp: %s", strerror(err));
	p->a.psn = vp_rand_below(&seed, 1u << 24);
	p->b.psn = vp_rand_below(&seed, 1u << 24);
	if (vp_ep_connect(&p->a, &p->b, o) || vp_ep_connect(&p->b, &p->a, o))
		vp_die("connect: %s", strerror(errno));
	vp_flood_aim(&flood, sock_a, &p->a, &p->b);
	vp_flood_aim(&flood, sock_b, &p->b, &p->a);
}

/* Destroy a QP (timed); frames the flood aims at it keep coming meanwhile. */
static double qp_destroy(struct vp_ep *e, const char *what)
{
	double t0;
	int err;

	if (!e->qp)
		return 0;
	t0 = vp_now();
	err = ibv_destroy_qp(e->qp);
	t0 = vp_now() - t0;
	vp_check(!err, "ibv_destroy_qp(%s): %s", what, strerror(err));
	e->qp = NULL;
	return t0;
}

static void cq_destroy(struct vp_ep *e, const char *what)
{
	int err = ibv_destroy_cq(e->cq);

	vp_check(!err, "ibv_destroy_cq(%s): %s", what, strerror(err));
	e->cq = NULL;
}

/* Stream both ways for @ms milliseconds. */
static void pump(struct st_stream *const *s, int n, double ms)
{
	double end = vp_now() + ms / 1000;
	int i;

	do {
		for (i = 0; i < n; i++) {
			st_fill(s[i]);
			st_poll(s[i]);
		}
	} while (vp_now() < end);
}

/* What is left in a destroyed QP's CQ: checked, nothing awaited. */
static void leftovers(struct st_stream *s)
{
	s->err_ok |= 1 << IBV_WC_WR_FLUSH_ERR;
	s->posting = false;
	while (st_poll(s) > 0)
		;
}

/* Wait for a free send slot (or an error), then post at least one more request. */
static void post_after(struct st_stream *s)
{
	double end = vp_now() + 10;

	while (s->next - s->done >= (uint64_t)s->window && s->first_err < 0 &&
	       vp_now() < end)
		st_poll(s);
	s->posting = true;
	st_fill(s);
	s->posting = false;
}

/* Every request of @s completes within @timeout_s (no new posts). */
static bool drain_checked(struct st_stream *s, double timeout_s, const char *after)
{
	if (!st_drain(s, timeout_s))
		return true;
	vp_fail("%s: %llu requests still outstanding %.0f s after %s", s->name,
		(unsigned long long)st_outstanding(s), timeout_s, after);
	return false;
}

/*
 * A stream that hangs: say what the kernel knows.  A further post rings
 * the doorbell if the kernel asked for one; moving the QP to ERR flushes
 * whatever it took from the rings.
 */
static void hang_probe(struct st_stream *s)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_ERR };
	uint64_t done = s->done, rdone = s->rdone;
	int st = vp_ep_state(s->e);
	char cmd[128];

	printf("hang: %s qpn %u state %d, sends %llu..%llu, receives %llu..%llu outstanding\n",
	       s->name, s->e->qp->qp_num, st, (unsigned long long)s->done,
	       (unsigned long long)s->next, (unsigned long long)s->rdone,
	       (unsigned long long)s->rnext);
	/* is the device still sending or timing out for it? */
	snprintf(cmd, sizeof(cmd), "rdma statistic show link %s/1", s->e->dev->name);
	if (system(cmd) || (vp_sleep_us(2000000), system(cmd)))
		printf("hang: %s failed\n", cmd);
	s->posting = true;
	st_fill(s);
	s->posting = false;
	st_drain(s, 3);
	printf("hang: after one more post: %llu sends and %llu receives completed, first error %d\n",
	       (unsigned long long)(s->done - done), (unsigned long long)(s->rdone - rdone),
	       s->first_err);
	s->err_ok |= 1 << IBV_WC_WR_FLUSH_ERR;
	vp_check(!ibv_modify_qp(s->e->qp, &a, IBV_QP_STATE), "%s: modify to ERR", s->name);
	st_drain(s, 5);
	printf("hang: after modify to ERR: %llu sends and %llu receives completed in all, %llu outstanding\n",
	       (unsigned long long)(s->done - done), (unsigned long long)(s->rdone - rdone),
	       (unsigned long long)st_outstanding(s));
}

/*
 * After its peer vanished: one more request, then exactly one
 * RETRY_EXC_ERR -- or, if @flush_ok, possibly only flushes (the connection
 * may have failed on responses it owed before a request of its own met the
 * dead peer).  The QP ends in ERR.
 */
static void expect_peer_gone(struct st_stream *s, const char *why, bool flush_ok)
{
	int st;

	/* keep what note_deaths allowed for a peer device being removed */
	s->err_ok = 1 << IBV_WC_RETRY_EXC_ERR | (s->err_ok & PEER_TORN_DOWN);
	if (flush_ok)
		s->err_ok |= 1 << IBV_WC_WR_FLUSH_ERR;
	/*
	 * At least one request must meet the dead peer: requests in flight
	 * may all have been acknowledged before it died, and posted receives
	 * alone never learn that it did.
	 */
	post_after(s);
	if (st_drain(s, 30 * vp_time_scale())) {
		vp_fail("%s: %llu requests still outstanding 30 s after %s",
			s->name, (unsigned long long)st_outstanding(s), why);
		hang_probe(s);
		return;
	}
	vp_check(s->first_err >= 0 && (s->err_ok & 1 << s->first_err),
		 "%s after %s: first error %s, expected RETRY_EXC_ERR%s%s", s->name, why,
		 s->first_err < 0 ? "none" : vp_wc_status_str(s->first_err),
		 flush_ok ? " or WR_FLUSH_ERR" : "",
		 s->err_ok & PEER_TORN_DOWN ? " (or REM_ACCESS_ERR/REM_OP_ERR: "
		 "the peer's MRs went before its QP)" : "");
	peer_mr_first += s->first_err == IBV_WC_REM_ACCESS_ERR ||
			 s->first_err == IBV_WC_REM_OP_ERR;
	flushed_only += s->first_err == IBV_WC_WR_FLUSH_ERR;
	st = vp_ep_state(s->e);
	vp_check(st == IBV_QPS_ERR, "%s after %s: state %d, expected ERR", s->name, why, st);
}

/* ---- destroy ------------------------------------------------------------- */

struct dstats {
	int n, slow;
	double max, sum;
	uint64_t ok;
	int variants[4];
};

static void dstat(struct dstats *ds, double t)
{
	ds->n++;
	ds->sum += t;
	ds->slow += t > 0.1;
	if (t > ds->max)
		ds->max = t;
}

static void destroy_round(int r, struct vp_dev *da, struct vp_dev *db,
			  struct vp_buf *ba, struct vp_buf *bb, struct dstats *ds)
{
	struct st_stream *both[2];
	int variant = r % 4, st;
	struct pair p;

	pair_connect(&p, da, db, &race_opts);
	memset(ba->p, 0, ba->len);
	memset(bb->p, 0, bb->len);
	st_init(&p.sa, "A", &p.a, ba, 0x100 + r, bb, 0x200 + r, SIZE, WIN, RWIN,
		ST_WRITE | ST_READ | ST_SEND);
	st_init(&p.sb, "B", &p.b, bb, 0x200 + r, ba, 0x100 + r, SIZE, WIN, RWIN,
		ST_WRITE | ST_READ | ST_SEND);
	snprintf(p.sa.name, sizeof(p.sa.name), "round %d/%d A", r, variant);
	snprintf(p.sb.name, sizeof(p.sb.name), "round %d/%d B", r, variant);
	both[0] = &p.sa;
	both[1] = &p.sb;
	pump(both, 2, vp_rand_below(&seed, 41));
	ds->variants[variant]++;

	switch (variant) {
	case 0:		/* A goes while B streams at it */
	case 3:		/* A to ERR first: everything of A completes once */
		vp_flood_unaim(&flood, p.b.qp->qp_num);
		if (variant == 3) {
			struct ibv_qp_attr a = { .qp_state = IBV_QPS_ERR };

			vp_check(!ibv_modify_qp(p.a.qp, &a, IBV_QP_STATE),
				 "round %d: modify A to ERR", r);
			p.sa.posting = false;
			p.sa.err_ok = 1 << IBV_WC_WR_FLUSH_ERR;
			drain_checked(&p.sa, 20, "A moved to ERR");
		}
		dstat(ds, qp_destroy(&p.a, "A"));
		leftovers(&p.sa);
		expect_peer_gone(&p.sb, "its peer was destroyed", true);
		dstat(ds, qp_destroy(&p.b, "B"));
		break;
	case 1:
		dstat(ds, qp_destroy(&p.a, "A"));
		dstat(ds, qp_destroy(&p.b, "B"));
		break;
	case 2:
		dstat(ds, qp_destroy(&p.b, "B"));
		dstat(ds, qp_destroy(&p.a, "A"));
		break;
	}
	vp_flood_unaim(&flood, 0);
	leftovers(&p.sa);
	leftovers(&p.sb);
	ds->ok += p.sa.ok + p.sa.rok + p.sb.ok + p.sb.rok;
	cq_destroy(&p.a, "A");
	cq_destroy(&p.b, "B");

	st = (int)st_check_target(ba, SIZE, WIN, RWIN, 0x200 + r);
	vp_check(st < 0, "round %d: A's write target byte %d is neither 0 nor B's pattern", r, st);
	st = (int)st_check_target(bb, SIZE, WIN, RWIN, 0x100 + r);
	vp_check(st < 0, "round %d: B's write target byte %d is neither 0 nor A's pattern", r, st);
}

static int run_destroy(int rounds)
{
	struct vp_dev da, db;
	struct vp_buf ba, bb;
	struct dstats ds = { 0 };
	double t0 = vp_now();
	int r, f0 = vp_fails;

	if (vp_dev_open(&da, dev_a) || vp_dev_open(&db, dev_b))
		vp_die("open %s / %s", dev_a, dev_b);
	vp_buf_alloc(&ba, st_side_len(SIZE, WIN, RWIN));
	vp_buf_alloc(&bb, st_side_len(SIZE, WIN, RWIN));
	if (vp_buf_reg(&ba, &da, VP_ACCESS_ALL) || vp_buf_reg(&bb, &db, VP_ACCESS_ALL))
		vp_die("ibv_reg_mr");
	for (r = 0; r < rounds; r++) {
		destroy_round(r, &da, &db, &ba, &bb, &ds);
		if (vp_fails - f0 > 20)
			break;
	}
	vp_check(ds.ok > 0, "destroy: no operation completed in %d rounds", r);
	vp_check(!vp_buf_free(&ba) && !vp_buf_free(&bb), "dereg the stream buffers");
	vp_check(!vp_dev_close(&da) && !vp_dev_close(&db), "close the devices");
	printf("%s destroy: %d rounds (variants %d/%d/%d/%d), %llu operations completed, "
	       "%d destroys: max %.1f ms, mean %.2f ms, %d over 100 ms; B failed with "
	       "flushes only in %d rounds; %.1f s\n",
	       vp_fails == f0 ? "PASS" : "FAIL", r, ds.variants[0], ds.variants[1],
	       ds.variants[2], ds.variants[3], (unsigned long long)ds.ok, ds.n,
	       ds.max * 1e3, ds.n ? ds.sum / ds.n * 1e3 : 0, ds.slow, flushed_only,
	       vp_now() - t0);
	return vp_fails - f0;
}

/* ---- dereg ----------------------------------------------------------------- */

/*
 * The dereg rounds' pairs: race_opts, scaled (run_dereg).  On the debug
 * lane (first run of 2026-11-26) the dereg-to-REM_ACCESS_ERR time was
 * 751 ms on average, 1610 ms at most (stock kernel: 26 and 144 ms), under
 * the flood and the ib_read_bw stream: seven of the 60 remote rounds' B
 * ran out of race_opts' ~1 s of retries before A's NAK came.  Likewise the
 * streaming before each dereg (0-30 ms) is scaled: on the stock kernel
 * ~5 operations per round completed within it, on the debug one none in
 * 120 rounds ("no operation completed").  Scale 1: race_opts, 0-30 ms.
 */
static struct vp_conn_opts dereg_opts;

struct gstats {
	int rounds[2];
	double err_max, err_sum;	/* remote rounds: dereg to B's error (s) */
	int err_n;
	int flush_first;	/* local rounds whose A failed with flushes only */
	int rflush_first;	/* remote rounds whose B flushed before its error */
	double max;
	uint64_t ok;
	uint64_t late_reads, late_writes, late_landing, late_gather;
	int a_state[8];
};

/* Bytes of [p, p + len) equal to @v. */
static size_t count_byte(const uint8_t *p, size_t len, uint8_t v)
{
	size_t i, n = 0;

	for (i = 0; i < len; i++)
		n += p[i] == v;
	return n;
}

/* Deregister @b (timed) and check the pins are back at once. */
static void dereg_checked(struct vp_buf *b, long pins0, struct gstats *gs, int r)
{
	double t0 = vp_now();
	int err = ibv_dereg_mr(b->mr);
	long pins;

	t0 = vp_now() - t0;
	pins = vp_pins_held();
	b->mr = NULL;
	if (t0 > gs->max)
		gs->max = t0;
	vp_check(!err, "round %d: ibv_dereg_mr: %s", r, strerror(err));
	vp_check(pins == pins0, "round %d: %ld pages pinned when dereg returned, %ld before reg",
		 r, pins, pins0);
}

/* Even rounds: B writes into and reads from A's memory T, which A deregisters. */
static void dereg_remote(int r, struct vp_dev *da, struct vp_dev *db,
			 struct vp_buf *bb, struct gstats *gs)
{
	struct st_stream *one[1];
	struct vp_buf t;
	struct pair p;
	long pins0, pins1;
	double t0;
	int st;

	pair_connect(&p, da, db, &dereg_opts);
	vp_buf_alloc(&t, st_side_len(DSIZE, WIN, 0));
	memset(bb->p, 0, bb->len);
	pins0 = vp_pins_held();
	if (vp_buf_reg(&t, da, VP_ACCESS_ALL))
		vp_die("ibv_reg_mr T: %s", strerror(errno));
	pins1 = vp_pins_held();
	vp_check(pins1 - pins0 == (long)(t.len / VP_PAGE),
		 "round %d: registering %zu pages pinned %ld", r, t.len / VP_PAGE,
		 pins1 - pins0);
	/* sa only lays out T's patterns; it never posts */
	st_init(&p.sa, "A", &p.a, &t, 0x300 + r, bb, 0x400 + r, DSIZE, WIN, 0, ST_WRITE);
	p.sa.posting = false;
	st_init(&p.sb, "B", &p.b, bb, 0x400 + r, &t, 0x300 + r, DSIZE, WIN, 0,
		ST_WRITE | ST_READ);
	snprintf(p.sb.name, sizeof(p.sb.name), "round %d B", r);
	one[0] = &p.sb;
	pump(one, 1, vp_rand_below(&seed, 31) * vp_time_scale());

	/*
	 * REM_ACCESS_ERR: A refused a request naming T, or the dereg caught
	 * A building a response from T it had accepted before: A NAKs that
	 * read (docs/protocol.md 8.3), rather than B's retries running out
	 * (dereg_opts: ~1 s on the stock kernel); the time from the dereg call is printed.
	 * Nothing is flushed before it: when A refuses a write while the
	 * response to a read B posted before it is still queued, A sends
	 * that response first and NAKs after (8.3), so the read completes.
	 * (rflush_first counts the rounds that broke this: 0.)
	 */
	p.sb.err_ok = 1 << IBV_WC_REM_ACCESS_ERR | 1 << IBV_WC_WR_FLUSH_ERR;
	t0 = vp_now();
	dereg_checked(&t, pins0, gs, r);
	memset(t.p, 0x5e, t.len);
	p.sb.late_marker = 0x5e;
	post_after(&p.sb);
	drain_checked(&p.sb, 30, "the dereg");
	t0 = p.sb.first_err_at > 0 ? p.sb.first_err_at - t0 : -1;
	if (t0 >= 0) {
		gs->err_n++;
		gs->err_sum += t0;
		if (t0 > gs->err_max)
			gs->err_max = t0;
	}
	gs->rflush_first += p.sb.first_err == IBV_WC_WR_FLUSH_ERR;
	vp_check(p.sb.hard_err == IBV_WC_REM_ACCESS_ERR &&
		 p.sb.first_err == IBV_WC_REM_ACCESS_ERR,
		 "round %d: B's first error %s after %.1f ms, then %s; expected REM_ACCESS_ERR "
		 "(no flush before it)", r,
		 p.sb.first_err < 0 ? "none" : vp_wc_status_str(p.sb.first_err), t0 * 1e3,
		 p.sb.hard_err < 0 ? "none" : vp_wc_status_str(p.sb.hard_err));
	st = vp_ep_state(&p.b);
	vp_check(st == IBV_QPS_ERR, "round %d: B in state %d after REM_ACCESS_ERR", r, st);
	/* the responder that refused the access fails too (IB: QP to error) */
	st = vp_ep_state(&p.a);
	gs->a_state[st >= 0 && st < 8 ? st : 7]++;
	vp_check(st == IBV_QPS_ERR, "round %d: A in state %d after refusing B's access", r, st);

	gs->late_reads += p.sb.late_bytes;
	gs->late_writes += t.len - count_byte(t.p, t.len, 0x5e);
	vp_check(!p.sb.late_bytes, "round %d: B's successful reads hold %llu bytes A wrote after dereg returned",
		 r, (unsigned long long)p.sb.late_bytes);
	vp_check(count_byte(t.p, t.len, 0x5e) == t.len,
		 "round %d: %zu bytes of A's memory changed after dereg returned", r,
		 t.len - count_byte(t.p, t.len, 0x5e));
	gs->ok += p.sb.ok;
	qp_destroy(&p.a, "A");
	qp_destroy(&p.b, "B");
	vp_flood_unaim(&flood, 0);
	cq_destroy(&p.a, "A");
	cq_destroy(&p.b, "B");
	vp_buf_free(&t);
}

/* Odd rounds: A writes from and reads into its memory L, which it deregisters. */
static void dereg_local(int r, struct vp_dev *da, struct vp_dev *db,
			struct vp_buf *bb, struct gstats *gs)
{
	struct st_stream *one[1];
	struct vp_buf l;
	struct pair p;
	size_t gather;
	long pins0, pins1, d;
	int st;

	pair_connect(&p, da, db, &dereg_opts);
	vp_buf_alloc(&l, st_side_len(DSIZE, WIN, 0));
	memset(bb->p, 0, bb->len);
	pins0 = vp_pins_held();
	if (vp_buf_reg(&l, da, VP_ACCESS_ALL))
		vp_die("ibv_reg_mr L: %s", strerror(errno));
	pins1 = vp_pins_held();
	vp_check(pins1 - pins0 == (long)(l.len / VP_PAGE),
		 "round %d: registering %zu pages pinned %ld", r, l.len / VP_PAGE,
		 pins1 - pins0);
	st_init(&p.sb, "B", &p.b, bb, 0x600 + r, &l, 0x500 + r, DSIZE, WIN, 0, ST_WRITE);
	p.sb.posting = false;
	st_init(&p.sa, "A", &p.a, &l, 0x500 + r, bb, 0x600 + r, DSIZE, WIN, 0,
		ST_WRITE | ST_READ);
	snprintf(p.sa.name, sizeof(p.sa.name), "round %d A", r);
	one[0] = &p.sa;
	pump(one, 1, vp_rand_below(&seed, 31) * vp_time_scale());

	/*
	 * LOC_PROT_ERR: a request named L.  WR_FLUSH_ERR first: the dereg
	 * caught a write whose frames were still to be built while a read
	 * before it still waited for its response; the write fails with
	 * LOC_PROT_ERR, and the read, unfinished, is flushed ahead of it
	 * (counted; deregbig asserts the LOC_PROT_ERR of a lone write).
	 */
	p.sa.err_ok = 1 << IBV_WC_LOC_PROT_ERR | 1 << IBV_WC_WR_FLUSH_ERR;
	dereg_checked(&l, pins0, gs, r);
	memset(l.p, 0x77, l.len);
	p.sa.land_unchecked = true;	/* L now holds 0x77: nothing may land */
	post_after(&p.sa);
	drain_checked(&p.sa, 30, "the dereg");
	gs->flush_first += p.sa.first_err == IBV_WC_WR_FLUSH_ERR;
	vp_check(p.sa.first_err == IBV_WC_LOC_PROT_ERR || p.sa.first_err == IBV_WC_WR_FLUSH_ERR,
		 "round %d: A's first error %s, expected LOC_PROT_ERR (or WR_FLUSH_ERR)", r,
		 p.sa.first_err < 0 ? "none" : vp_wc_status_str(p.sa.first_err));
	st = vp_ep_state(&p.a);
	vp_check(st == IBV_QPS_ERR, "round %d: A in state %d after LOC_PROT_ERR", r, st);

	/* no read response may land in L, no frame may carry L's new bytes */
	gs->late_landing += l.len - count_byte(l.p, l.len, 0x77);
	vp_check(count_byte(l.p, l.len, 0x77) == l.len,
		 "round %d: %zu bytes of A's memory changed after dereg returned", r,
		 l.len - count_byte(l.p, l.len, 0x77));
	gather = count_byte(bb->p + (size_t)DSIZE * (1 + WIN), (size_t)DSIZE * WIN, 0x77);
	gs->late_gather += gather;
	vp_check(!gather, "round %d: B's memory received %zu bytes A wrote after dereg returned",
		 r, gather);
	d = st_check_target(bb, DSIZE, WIN, 0, 0x500 + r);
	vp_check(d < 0 || bb->p[(size_t)DSIZE * (1 + WIN) + (size_t)d] == 0x77,
		 "round %d: B's write target byte %ld is neither 0 nor A's pattern", r, d);
	gs->ok += p.sa.ok;
	qp_destroy(&p.a, "A");
	qp_destroy(&p.b, "B");
	vp_flood_unaim(&flood, 0);
	cq_destroy(&p.a, "A");
	cq_destroy(&p.b, "B");
	vp_buf_free(&l);
}

static int run_dereg(int rounds)
{
	struct gstats gs;
	struct vp_dev da, db;
	struct vp_buf bb;
	double t0 = vp_now();
	int r, f0 = vp_fails;

	memset(&gs, 0, sizeof(gs));
	dereg_opts = scaled_race_opts();
	if (vp_dev_open(&da, dev_a) || vp_dev_open(&db, dev_b))
		vp_die("open %s / %s", dev_a, dev_b);
	vp_buf_alloc(&bb, st_side_len(DSIZE, WIN, 0));
	if (vp_buf_reg(&bb, &db, VP_ACCESS_ALL))
		vp_die("ibv_reg_mr");
	for (r = 0; r < rounds; r++) {
		gs.rounds[r % 2]++;
		if (r % 2)
			dereg_local(r, &da, &db, &bb, &gs);
		else
			dereg_remote(r, &da, &db, &bb, &gs);
		if (vp_fails - f0 > 20)
			break;
	}
	vp_check(gs.ok > 0, "dereg: no operation completed in %d rounds", r);
	vp_check(!vp_buf_free(&bb), "dereg the stream buffer");
	vp_check(!vp_dev_close(&da) && !vp_dev_close(&db), "close the devices");
	printf("%s dereg: %d remote + %d local rounds, %llu operations completed, "
	       "dereg max %.1f ms; dereg to B's REM_ACCESS_ERR mean %.1f ms, max %.1f ms "
	       "(%d remote rounds, %d of them with a flushed read first), "
	       "A's WR_FLUSH_ERR in %d local rounds "
	       "(LOC_PROT_ERR in the others); after dereg returned: %llu bytes read, %llu written "
	       "(remote), %llu landed, %llu gathered (local); A after remote dereg: "
	       "RTS %d ERR %d; %.1f s\n",
	       vp_fails == f0 ? "PASS" : "FAIL", gs.rounds[0], gs.rounds[1],
	       (unsigned long long)gs.ok, gs.max * 1e3,
	       gs.err_n ? gs.err_sum / gs.err_n * 1e3 : 0, gs.err_max * 1e3, gs.err_n,
	       gs.rflush_first, gs.flush_first,
	       (unsigned long long)gs.late_reads, (unsigned long long)gs.late_writes,
	       (unsigned long long)gs.late_landing, (unsigned long long)gs.late_gather,
	       gs.a_state[IBV_QPS_RTS], gs.a_state[IBV_QPS_ERR], vp_now() - t0);
	return vp_fails - f0;
}

/* ---- deregbig: dereg while one large operation is half done ----------------- */

#define BIG	(64u << 20)

/* The next completion on @cq within @timeout_s: its status (-1 none), wr_id. */
static int next_wc(struct ibv_cq *cq, double timeout_s, uint64_t *wr_id)
{
	double end = vp_now() + timeout_s;
	struct ibv_wc wc;
	int n;

	while (!(n = ibv_poll_cq(cq, 1, &wc)))
		if (vp_now() > end)
			return -1;
	if (n < 0)
		return -1;
	*wr_id = wc.wr_id;
	return (int)wc.status;
}

static const char *st_str(int st)
{
	return st < 0 ? "nothing" : vp_wc_status_str(st);
}

/* Bytes of @p holding @marker (written after a dereg). */
static size_t marker_bytes(const uint8_t *p, size_t len, uint8_t marker)
{
	return count_byte(p, len, marker);
}

/* Wait until the 8 bytes at @p are no longer zero: the transfer is under way. */
static bool under_way(const uint8_t *p)
{
	double end = vp_now() + 30;

	while (!*(volatile const uint64_t *)p)
		if (vp_now() > end)
			return false;
	return true;
}

/* Have the 8 bytes at @p + @off arrived (they are never all zero when they have)? */
static bool landed(const uint8_t *p, size_t off)
{
	return *(volatile const uint64_t *)(p + off) != 0;
}

/*
 * The dereg came in time if the middle of the transfer had not arrived
 * just before it: then the operation was at most half done, and cannot
 * succeed without bytes placed (or read) after dereg returned.  Else the
 * round proves nothing but the safety checks (counted as late).
 */
struct bigstat {
	int res[32];		/* by completion status; 31: none */
	int late;		/* rounds whose dereg came after the middle */
	double err_max;		/* (c): longest dereg call to error (s) */
};

/*
 * ibv_post_send from another thread: it may not return before the data
 * left, or (a read) before most of the response arrived -- from 6.5 on a
 * softirq runs at each local_bh_enable(), so both devices' receive paths
 * can run inside the poster's system call.  wr_id 1, and an optional
 * second request (len2) with wr_id 2.
 */
struct poster {
	pthread_t th;
	struct vp_ep *e;
	enum ibv_wr_opcode op, op2;
	void *laddr, *laddr2;
	uint32_t len, lkey, rkey, len2, lkey2, rkey2;
	uint64_t raddr, raddr2;
	int err;
	double took;
};

static void *poster_main(void *arg)
{
	struct poster *w = arg;
	struct ibv_sge sg[2] = {
		{ .addr = (uintptr_t)w->laddr, .length = w->len, .lkey = w->lkey },
		{ .addr = (uintptr_t)w->laddr2, .length = w->len2, .lkey = w->lkey2 },
	};
	struct ibv_send_wr wr[2], *bad;
	double t0 = vp_now();
	int i;

	/* one call: both requests are queued before either can fail */
	memset(wr, 0, sizeof(wr));
	for (i = 0; i < 2; i++) {
		wr[i].wr_id = i + 1;
		wr[i].sg_list = &sg[i];
		wr[i].num_sge = 1;
		wr[i].send_flags = IBV_SEND_SIGNALED;
	}
	wr[0].opcode = w->op;
	wr[0].wr.rdma.remote_addr = w->raddr;
	wr[0].wr.rdma.rkey = w->rkey;
	wr[1].opcode = w->op2;
	wr[1].wr.rdma.remote_addr = w->raddr2;
	wr[1].wr.rdma.rkey = w->rkey2;
	wr[0].next = w->len2 ? &wr[1] : NULL;
	w->err = ibv_post_send(w->e->qp, wr, &bad);
	w->took = vp_now() - t0;
	return NULL;
}

static void post_async(struct poster *w)
{
	if (pthread_create(&w->th, NULL, poster_main, w))
		vp_die("pthread_create");
}

/*
 * Deregister @b, check its pins are gone at once, then overwrite it with
 * @marker.  Returns when the dereg returned (vp_now()).
 */
static double dereg_fill(struct vp_buf *b, long pins_after, uint8_t marker, int r,
			 const char *what)
{
	double at;
	long pins;

	vp_check(!ibv_dereg_mr(b->mr), "big %d: dereg %s", r, what);
	at = vp_now();
	b->mr = NULL;
	pins = vp_pins_held();
	vp_check(pins == pins_after, "big %d: %ld pages pinned after dereg of %s, expected %ld",
		 r, pins, what, pins_after);
	memset(b->p, marker, b->len);
	return at;
}

/*
 * (a) A writes 64 MiB from L; once the first bytes reached B, A
 * deregisters L.  The write must fail with LOC_PROT_ERR (verbs: its local
 * memory is gone), A ends in ERR, and no byte A put into L after dereg
 * returned may reach B.
 */
static void big_write_local(int r, struct vp_dev *da, struct vp_dev *db, struct bigstat *bs)
{
	struct vp_buf l, t;
	struct poster w;
	struct pair p;
	uint64_t id;
	size_t late;
	bool half;
	long pins;
	int st;

	pair_connect(&p, da, db, &race_opts);
	vp_buf_alloc(&l, BIG);
	vp_buf_alloc(&t, BIG);
	vp_fill_pat(l.p, BIG, 0x900 + r, 0);
	if (vp_buf_reg(&t, db, VP_ACCESS_ALL))
		vp_die("ibv_reg_mr: %s", strerror(errno));
	pins = vp_pins_held();
	if (vp_buf_reg(&l, da, VP_ACCESS_ALL))
		vp_die("ibv_reg_mr: %s", strerror(errno));
	w = (struct poster){ .e = &p.a, .op = IBV_WR_RDMA_WRITE, .laddr = l.p, .len = BIG,
			     .lkey = l.mr->lkey, .raddr = (uintptr_t)t.p, .rkey = t.mr->rkey };
	post_async(&w);
	vp_check(under_way(t.p), "big %d: the write never started", r);
	half = landed(t.p, BIG / 2);
	dereg_fill(&l, pins, 0x77, r, "L (write source)");
	pthread_join(w.th, NULL);
	st = next_wc(p.a.cq, 30, &id);
	late = marker_bytes(t.p, BIG, 0x77);
	printf("big %d (a): 64 MiB write, source deregistered under way%s: %s; ibv_post_send "
	       "took %.2f s; %zu bytes of B hold L's bytes from after the dereg\n", r,
	       half ? " (past half: late)" : "", st_str(st), w.took, late);
	vp_check(!w.err, "big %d: post: %s", r, strerror(w.err));
	vp_check(!late, "big %d: B received %zu bytes A wrote into L after dereg returned", r, late);
	if (half) {
		bs->late++;
	} else {
		bs->res[st >= 0 && st < 32 ? st : 31]++;
		vp_check(st == IBV_WC_LOC_PROT_ERR, "big %d: the write whose source was "
			 "deregistered completed with %s, expected LOC_PROT_ERR", r, st_str(st));
		st = vp_ep_state(&p.a);
		vp_check(st == IBV_QPS_ERR, "big %d: A in state %d after the failed write", r, st);
	}
	qp_destroy(&p.a, "A");
	qp_destroy(&p.b, "B");
	vp_flood_unaim(&flood, 0);
	cq_destroy(&p.a, "A");
	cq_destroy(&p.b, "B");
	vp_buf_free(&l);
	vp_buf_free(&t);
}

/*
 * (b) A reads 64 MiB from B into L, then writes 4 KiB from another MR;
 * once the first bytes landed, A deregisters L.  The read must fail with
 * LOC_PROT_ERR and the write after it must be flushed (verbs: after an
 * error completion every later request completes with WR_FLUSH_ERR, even
 * one the peer already acknowledged); nothing may land in L after dereg.
 */
static void big_read_local(int r, struct vp_dev *da, struct vp_dev *db, struct bigstat *bs)
{
	struct vp_buf l, src, m, mt;
	struct poster w;
	struct pair p;
	uint64_t id1 = 0, id2 = 0;
	int st1, st2;
	size_t changed;
	bool half;
	long pins;

	pair_connect(&p, da, db, &race_opts);
	vp_buf_alloc(&l, BIG);
	vp_buf_alloc(&src, BIG);
	vp_buf_alloc(&m, VP_PAGE);
	vp_buf_alloc(&mt, VP_PAGE);
	vp_fill_pat(src.p, BIG, 0xb00 + r, 0);
	if (vp_buf_reg(&src, db, VP_ACCESS_ALL) || vp_buf_reg(&m, da, VP_ACCESS_ALL) ||
	    vp_buf_reg(&mt, db, VP_ACCESS_ALL))
		vp_die("ibv_reg_mr: %s", strerror(errno));
	pins = vp_pins_held();
	if (vp_buf_reg(&l, da, VP_ACCESS_ALL))
		vp_die("ibv_reg_mr: %s", strerror(errno));
	w = (struct poster){ .e = &p.a, .op = IBV_WR_RDMA_READ, .laddr = l.p, .len = BIG,
			     .lkey = l.mr->lkey, .raddr = (uintptr_t)src.p, .rkey = src.mr->rkey,
			     .op2 = IBV_WR_RDMA_WRITE, .laddr2 = m.p, .len2 = VP_PAGE,
			     .lkey2 = m.mr->lkey, .raddr2 = (uintptr_t)mt.p, .rkey2 = mt.mr->rkey };
	post_async(&w);
	vp_check(under_way(l.p), "big %d: the read never started", r);
	half = landed(l.p, BIG / 2);
	dereg_fill(&l, pins, 0x77, r, "L (read sink)");
	pthread_join(w.th, NULL);
	vp_check(!w.err, "big %d: post: %s", r, strerror(w.err));
	st1 = next_wc(p.a.cq, 30, &id1);
	st2 = next_wc(p.a.cq, 30, &id2);
	changed = l.len - marker_bytes(l.p, l.len, 0x77);
	printf("big %d (b): 64 MiB read, sink deregistered under way%s, then a 4 KiB write: "
	       "%s, %s; %zu bytes of L changed after the dereg\n", r,
	       half ? " (past half: late)" : "", st_str(st1), st_str(st2), changed);
	vp_check(id1 == 1 && id2 == 2, "big %d: completions for wr %llu, %llu", r,
		 (unsigned long long)id1, (unsigned long long)id2);
	vp_check(!changed, "big %d: %zu bytes landed in L after dereg returned", r, changed);
	if (half) {
		bs->late++;
	} else {
		bs->res[st2 >= 0 && st2 < 32 ? st2 : 31]++;
		vp_check(st1 == IBV_WC_LOC_PROT_ERR, "big %d: the read whose sink was deregistered "
			 "completed with %s, expected LOC_PROT_ERR", r, st_str(st1));
		vp_check(st2 == IBV_WC_WR_FLUSH_ERR, "big %d: the write after the failed read "
			 "completed with %s, expected WR_FLUSH_ERR", r, st_str(st2));
	}
	qp_destroy(&p.a, "A");
	qp_destroy(&p.b, "B");
	vp_flood_unaim(&flood, 0);
	cq_destroy(&p.a, "A");
	cq_destroy(&p.b, "B");
	vp_buf_free(&l);
	vp_buf_free(&src);
	vp_buf_free(&m);
	vp_buf_free(&mt);
}

/*
 * (c) B reads 64 MiB from A's T; once the first bytes landed, A
 * deregisters T and overwrites it.  B's read must fail with
 * REM_ACCESS_ERR (A cannot build the rest of the response and NAKs the
 * read, docs/protocol.md 8.3; before, B's retries ran out: RETRY_EXC_ERR),
 * and B must never receive a byte A put into T after dereg returned.  The
 * time from the dereg call to the error is printed (in TCG under the
 * perftest load still ~1 s: not understood yet, no check on it).
 */
static void big_read_remote(int r, struct vp_dev *da, struct vp_dev *db, struct bigstat *bs)
{
	struct vp_buf t, land;
	struct poster w;
	struct pair p;
	double t0, t1, t2;
	uint64_t id;
	size_t late;
	bool half;
	long pins;
	int st;

	pair_connect(&p, da, db, &race_opts);
	vp_buf_alloc(&t, BIG);
	vp_buf_alloc(&land, BIG);
	vp_fill_pat(t.p, BIG, 0xa00 + r, 0);
	if (vp_buf_reg(&land, db, VP_ACCESS_ALL))
		vp_die("ibv_reg_mr: %s", strerror(errno));
	pins = vp_pins_held();
	if (vp_buf_reg(&t, da, VP_ACCESS_ALL))
		vp_die("ibv_reg_mr: %s", strerror(errno));
	w = (struct poster){ .e = &p.b, .op = IBV_WR_RDMA_READ, .laddr = land.p, .len = BIG,
			     .lkey = land.mr->lkey, .raddr = (uintptr_t)t.p, .rkey = t.mr->rkey };
	post_async(&w);
	vp_check(under_way(land.p), "big %d: the read never started", r);
	half = landed(land.p, BIG / 2);
	t0 = vp_now();
	t1 = dereg_fill(&t, pins, 0x5e, r, "T (read source)");
	t2 = vp_now();
	pthread_join(w.th, NULL);
	vp_check(!w.err, "big %d: post: %s", r, strerror(w.err));
	st = next_wc(p.b.cq, 60, &id);
	/* polled only once T was overwritten: the time is an upper bound */
	late = marker_bytes(land.p, BIG, 0x5e);
	printf("big %d (c): 64 MiB read, its source deregistered under way%s: %s %.1f ms after "
	       "the dereg call (dereg %.1f ms, marker fill %.1f ms, then %.1f ms polling); "
	       "%zu bytes landed from T after the dereg\n", r, half ? " (past half: late)" : "",
	       st_str(st), (vp_now() - t0) * 1e3, (t1 - t0) * 1e3, (t2 - t1) * 1e3,
	       (vp_now() - t2) * 1e3, late);
	t0 = vp_now() - t0;
	vp_check(!late, "big %d: B received %zu bytes A put into T after dereg returned", r, late);
	if (half) {
		bs->late++;
	} else {
		bs->res[st >= 0 && st < 32 ? st : 31]++;
		if (t0 > bs->err_max)
			bs->err_max = t0;
		vp_check(st == IBV_WC_REM_ACCESS_ERR, "big %d: the read whose source was "
			 "deregistered completed with %s, expected REM_ACCESS_ERR", r, st_str(st));
	}
	qp_destroy(&p.a, "A");
	qp_destroy(&p.b, "B");
	vp_flood_unaim(&flood, 0);
	cq_destroy(&p.a, "A");
	cq_destroy(&p.b, "B");
	vp_buf_free(&t);
	vp_buf_free(&land);
}

static void res_str(const struct bigstat *bs, char *buf, size_t len)
{
	size_t k = 0;
	int i;

	buf[0] = 0;
	for (i = 0; i < 32 && k < len; i++)
		if (bs->res[i])
			k += (size_t)snprintf(buf + k, len - k, "%s%s %d", k ? ", " : "",
					      i == 31 ? "none" : vp_wc_status_str(i), bs->res[i]);
	if (k < len)
		snprintf(buf + k, len - k, "%slate %d", k ? ", " : "", bs->late);
}

static int run_deregbig(int rounds)
{
	struct bigstat ba, bb, bc;
	char a[160], b[160], c[160];
	struct vp_dev da, db;
	int r, f0 = vp_fails;

	memset(&ba, 0, sizeof(ba));
	memset(&bb, 0, sizeof(bb));
	memset(&bc, 0, sizeof(bc));
	if (vp_dev_open(&da, dev_a) || vp_dev_open(&db, dev_b))
		vp_die("open %s / %s", dev_a, dev_b);
	for (r = 0; r < rounds; r++) {
		big_write_local(r, &da, &db, &ba);
		big_read_local(r, &da, &db, &bb);
		big_read_remote(r, &da, &db, &bc);
	}
	vp_check(!vp_dev_close(&da) && !vp_dev_close(&db), "close the devices");
	/* a case whose dereg always came late proved nothing */
	vp_check(ba.late < rounds && bb.late < rounds && bc.late < rounds,
		 "deregbig: a case never caught its operation before the middle (%d/%d/%d of %d late)",
		 ba.late, bb.late, bc.late, rounds);
	res_str(&ba, a, sizeof(a));
	res_str(&bb, b, sizeof(b));
	res_str(&bc, c, sizeof(c));
	printf("%s deregbig: %d rounds; (a) write: %s; (b) write after the failed read: %s; "
	       "(c) remote read: %s, dereg call to its error max %.1f ms\n",
	       vp_fails == f0 ? "PASS" : "FAIL", rounds, a, b, c, bc.err_max * 1e3);
	return vp_fails - f0;
}

/* ---- lastwords: an ACK lost, then its QP destroyed ------------------------------ */

/* B's ACKs leave through veth1 (in ns1): drop every MBCF ACK (opcode 0x10,
 * the byte after the version; u32 counts from the network header).  The
 * prio qdisc stays for all rounds; each round adds the filter and
 * ack_drop_off() removes it. */
#define ACK_QDISC_ON	"ip netns exec ns1 tc qdisc add dev veth1 root handle 1: prio"
#define ACK_QDISC_OFF	"ip netns exec ns1 tc qdisc del dev veth1 root"
#define ACK_DROP_ON	"ip netns exec ns1 tc filter add dev veth1 parent 1: protocol all " \
			"u32 match u8 0x10 0xff at 1 action drop"

/*
 * The filter goes through an rtnetlink socket opened in ns1 beforehand:
 * B's last words last 2 s (MBCF_LINGER_NS) from its destroy, and under TCG
 * `ip netns exec ns1 tc qdisc del dev veth1 root` (a fork and exec, and a
 * root qdisc's removal waits for an RCU grace period in dev_deactivate)
 * took 0.4-2.75 s on the stock kernel with a busy host: in one round of
 * three the filter went after the last words had, and A's write failed
 * with RETRY_EXC_ERR (the debug lane: all three rounds, 11 last-words ACKs
 * sent into the filter).  Flushing the filters of 1: this way takes well
 * under a millisecond (stock and debug kernel).
 */
static int ns1_rtnl = -1;
static unsigned int ns1_veth1;

static void ns1_rtnl_open(void)
{
	int self = vp_netns_enter("ns1");

	ns1_rtnl = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
	ns1_veth1 = if_nametoindex("veth1");
	vp_netns_leave(self);
	if (ns1_rtnl < 0 || !ns1_veth1)
		vp_die("rtnetlink socket / veth1 in ns1: %s", strerror(errno));
}

/* `tc filter del dev veth1 parent 1:` in ns1 (every filter of chain 0). */
static void ack_drop_off(void)
{
	static unsigned int seq;
	struct {
		struct nlmsghdr n;
		struct tcmsg t;
	} req = {
		.n = {
			.nlmsg_len = sizeof(req),
			.nlmsg_type = RTM_DELTFILTER,
			.nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK,
			.nlmsg_seq = ++seq,
		},
		.t = {
			.tcm_family = AF_UNSPEC,
			.tcm_ifindex = (int)ns1_veth1,
			.tcm_parent = TC_H_MAKE(1U << 16, 0),
			.tcm_info = 0,	/* prio 0, protocol 0: flush */
		},
	};
	struct sockaddr_nl kernel = { .nl_family = AF_NETLINK };
	char buf[4096];
	struct nlmsghdr *h = (struct nlmsghdr *)buf;
	ssize_t n;

	if (sendto(ns1_rtnl, &req, sizeof(req), 0, (struct sockaddr *)&kernel,
		   sizeof(kernel)) != (ssize_t)sizeof(req))
		vp_die("RTM_DELTFILTER: %s", strerror(errno));
	for (;;) {
		n = recv(ns1_rtnl, buf, sizeof(buf), 0);
		if (n < 0)
			vp_die("RTM_DELTFILTER answer: %s", strerror(errno));
		if (!NLMSG_OK(h, (size_t)n) || h->nlmsg_seq != seq || h->nlmsg_type != NLMSG_ERROR)
			continue;
		if (((struct nlmsgerr *)NLMSG_DATA(h))->error)
			vp_die("RTM_DELTFILTER: %s",
			       strerror(-((struct nlmsgerr *)NLMSG_DATA(h))->error));
		return;
	}
}

/* 16.8 ms doubling, 7 retries: ~2.1 s in all, the resends after the
 * destroy well inside the 2 s the last words are kept */
static const struct vp_conn_opts lastwords_opts = {
	.timeout = 12, .retry_cnt = 7, .rnr_retry = 7, .min_rnr_timer = 12,
};

static int run_lastwords(int rounds)
{
	struct vp_dev da, db;
	struct vp_buf src, dst;
	struct pair p;
	uint64_t id;
	int r, st, f0 = vp_fails;
	double t0, t_land, t_gone, t_off;

	if (vp_dev_open(&da, dev_a) || vp_dev_open(&db, dev_b))
		vp_die("open %s / %s", dev_a, dev_b);
	vp_buf_alloc(&src, SIZE);
	vp_buf_alloc(&dst, SIZE);
	if (vp_buf_reg(&src, &da, VP_ACCESS_ALL) || vp_buf_reg(&dst, &db, VP_ACCESS_ALL))
		vp_die("ibv_reg_mr: %s", strerror(errno));
	ns1_rtnl_open();
	if (system(ACK_QDISC_ON))
		vp_die("tc: %s", ACK_QDISC_ON);
	for (r = 0; r < rounds; r++) {
		pair_connect(&p, &da, &db, &lastwords_opts);
		memset(dst.p, 0, 64);
		vp_fill_pat(src.p, 64, 0x700 + r, 0);
		if (system(ACK_DROP_ON))
			vp_die("tc: %s", ACK_DROP_ON);
		if (vp_post_rdma(&p.a, IBV_WR_RDMA_WRITE, src.p, 64, src.mr->lkey,
				 (uintptr_t)dst.p, dst.mr->rkey, 1))
			vp_die("post");
		t0 = vp_now();
		while (vp_diff_pat(dst.p, 64, 0x700 + r, 0) >= 0 && vp_now() < t0 + 5)
			vp_sleep_us(100);
		t_land = vp_now();
		vp_check(vp_diff_pat(dst.p, 64, 0x700 + r, 0) < 0,
			 "lastwords %d: the write never landed at B", r);
		vp_sleep_us(100000);	/* a few of A's resends, their ACKs dropped */
		st = next_wc(p.a.cq, 0, &id);
		vp_check(st < 0, "lastwords %d: the write completed (%s) while every ACK "
			 "was dropped: the filter did not work", r, st_str(st));
		qp_destroy(&p.b, "B");
		t_gone = vp_now();
		ack_drop_off();
		t_off = vp_now();
		st = next_wc(p.a.cq, 10 * vp_time_scale(), &id);
		printf("lastwords %d: A's write, its ACK lost and B destroyed: %s %.0f ms after "
		       "the post (landed at %.0f ms, B destroyed at %.0f ms, filter off at %.0f ms)\n",
		       r, st_str(st), (vp_now() - t0) * 1e3, (t_land - t0) * 1e3,
		       (t_gone - t0) * 1e3, (t_off - t0) * 1e3);
		vp_check(st == IBV_WC_SUCCESS, "lastwords %d: A's write completed with %s, "
			 "expected SUCCESS (B's last words)", r, st_str(st));
		qp_destroy(&p.a, "A");
		cq_destroy(&p.a, "A");
		cq_destroy(&p.b, "B");
	}
	if (system(ACK_QDISC_OFF))
		vp_die("tc: %s", ACK_QDISC_OFF);
	close(ns1_rtnl);
	vp_check(!vp_buf_free(&src) && !vp_buf_free(&dst), "ibv_dereg_mr");
	vp_check(!vp_dev_close(&da) && !vp_dev_close(&db), "close the devices");
	printf("%s lastwords: %d rounds\n", vp_fails == f0 ? "PASS" : "FAIL", rounds);
	return vp_fails - f0;
}

/* ---- holder ------------------------------------------------------------------ */

#define MAX_EVENTS	8

struct hdev {
	struct vp_dev d;
	/* -E: the events DEV must deliver; star = any number of it, here */
	int expect[MAX_EVENTS], nexpect;
	bool star[MAX_EVENTS];
	int got[MAX_EVENTS], ngot;
	bool dead;				/* DEVICE_FATAL seen */
	bool ready;				/* events count from now on */
	double dead_at;
};

static struct hdev hdevs[2];
static double hold_wait = 120;
static int ignored_events;	/* -I: bitmask of event types not recorded */
static volatile sig_atomic_t removal_announced;

static void on_usr1(int sig)
{
	(void)sig;
	removal_announced = 1;
}

static const struct { const char *name; int ev; } ev_names[] = {
	{ "DEVICE_FATAL", IBV_EVENT_DEVICE_FATAL },
	{ "PORT_ERR", IBV_EVENT_PORT_ERR },
	{ "PORT_ACTIVE", IBV_EVENT_PORT_ACTIVE },
	{ "QP_FATAL", IBV_EVENT_QP_FATAL },
	{ "CQ_ERR", IBV_EVENT_CQ_ERR },
	{ "GID_CHANGE", IBV_EVENT_GID_CHANGE },
	{ "LID_CHANGE", IBV_EVENT_LID_CHANGE },
};

static int ev_parse(const char *s)
{
	size_t i;

	for (i = 0; i < sizeof(ev_names) / sizeof(ev_names[0]); i++)
		if (!strcmp(s, ev_names[i].name))
			return ev_names[i].ev;
	vp_die("unknown event %s", s);
}

/* -E DEV=EV,EV*,...: the events DEV must deliver, in order; EV* = any number. */
static void expect_arg(char *arg)
{
	char *eq = strchr(arg, '='), *tok, *save;
	struct hdev *h;

	if (!eq)
		vp_die("-E DEV=EVENT[,EVENT...]");
	*eq = 0;
	h = !strcmp(arg, dev_a) ? &hdevs[0] : !strcmp(arg, dev_b) ? &hdevs[1] : NULL;
	if (!h)
		vp_die("-E %s: not one of %s, %s (give -a/-b first)", arg, dev_a, dev_b);
	for (tok = strtok_r(eq + 1, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		size_t n = strlen(tok);

		if (h->nexpect == MAX_EVENTS)
			vp_die("too many events");
		h->star[h->nexpect] = n && tok[n - 1] == '*';
		if (h->star[h->nexpect])
			tok[n - 1] = 0;
		h->expect[h->nexpect++] = ev_parse(tok);
	}
}

/*
 * Does the event list @got match the expectation?  A run of starred
 * events absorbs any number of those events, in any order, before the
 * next plain one.
 */
static bool events_match(const struct hdev *h)
{
	int pos = 0, i, j;

	for (i = 0; i < h->ngot; i++) {
		bool absorbed = false;

		for (j = pos; j < h->nexpect && h->star[j]; j++)
			absorbed |= h->expect[j] == h->got[i];
		if (absorbed)
			continue;
		if (j == h->nexpect || h->expect[j] != h->got[i])
			return false;
		pos = j + 1;
	}
	for (; pos < h->nexpect; pos++)
		if (!h->star[pos])
			return false;
	return true;
}

static void events_str(const int *ev, const bool *star, int n, char *buf,
		       size_t len)
{
	size_t k = 0;
	int i;

	buf[0] = 0;
	for (i = 0; i < n && k < len; i++)
		k += (size_t)snprintf(buf + k, len - k, "%s%s%s", i ? "," : "",
				      ibv_event_type_str((enum ibv_event_type)ev[i]),
				      star && star[i] ? "*" : "");
}

/* Read every pending async event of @h (non-blocking fd). */
static void read_events(struct hdev *h)
{
	struct ibv_async_event ev;

	while (!ibv_get_async_event(h->d.ctx, &ev)) {
		/* before ready: the port coming up after `rdma link add` */
		printf("event on %s%s: %s\n", h->d.name,
		       !h->ready ? " (before ready)" :
		       ignored_events & (1 << ev.event_type) ? " (ignored)" : "",
		       ibv_event_type_str(ev.event_type));
		if (!h->ready || (ignored_events & (1 << ev.event_type))) {
			ibv_ack_async_event(&ev);
			continue;
		}
		if (h->ngot < MAX_EVENTS)
			h->got[h->ngot++] = ev.event_type;
		if (ev.event_type == IBV_EVENT_DEVICE_FATAL && !h->dead) {
			h->dead = true;
			h->dead_at = vp_now();
		}
		ibv_ack_async_event(&ev);
	}
}

static void wait_events(int ms)
{
	struct pollfd pfd[2];
	int i;

	for (i = 0; i < 2; i++) {
		pfd[i].fd = hdevs[i].d.ctx->async_fd;
		pfd[i].events = POLLIN;
		pfd[i].revents = 0;
	}
	if (poll(pfd, 2, ms) <= 0)
		return;
	for (i = 0; i < 2; i++)
		if (pfd[i].revents)
			read_events(&hdevs[i]);
}

static bool holder_done(void)
{
	int i;

	for (i = 0; i < 2; i++)
		if (hdevs[i].nexpect && !hdevs[i].dead)
			return false;
	return true;
}

/* Every verb but destroy fails with EIO on a dead device. */
static void dead_verbs(struct hdev *h, struct vp_ep *e, struct st_stream *s)
{
	struct ibv_qp_init_attr ia = { .qp_type = IBV_QPT_RC, .send_cq = e->cq,
				       .recv_cq = e->cq, .cap = { 1, 1, 1, 1, 0 } };
	struct ibv_qp_attr qa;
	struct ibv_wc wc;
	void *q;
	int ret;

	ret = vp_post_rdma(e, IBV_WR_RDMA_WRITE, s->src, s->size, s->lkey,
			   s->rw_addr, s->rkey, 999999);
	vp_check(ret == EIO, "%s: ibv_post_send on a dead QP returned %d (%s), expected EIO",
		 h->d.name, ret, strerror(ret));
	ret = vp_post_recv(e, s->rslot, s->size, s->lkey, ST_RECV_FLAG | 999999);
	vp_check(ret == EIO, "%s: ibv_post_recv on a dead QP returned %d (%s), expected EIO",
		 h->d.name, ret, strerror(ret));
	errno = 0;
	ret = ibv_poll_cq(e->cq, 1, &wc);
	vp_check(ret == -1 && errno == EIO, "%s: ibv_poll_cq again: %d errno %d, expected -1 EIO",
		 h->d.name, ret, errno);
	ret = ibv_query_qp(e->qp, &qa, IBV_QP_STATE, &ia);
	vp_check(ret == EIO, "%s: ibv_query_qp returned %d (%s), expected EIO",
		 h->d.name, ret, strerror(ret));
	ret = ibv_req_notify_cq(e->cq, 0);
	vp_check(ret == EIO, "%s: ibv_req_notify_cq returned %d (%s), expected EIO",
		 h->d.name, ret, strerror(ret));
	errno = 0;
	q = ibv_reg_mr(h->d.pd, s->src, s->size, IBV_ACCESS_LOCAL_WRITE);
	vp_check(!q && errno == EIO, "%s: ibv_reg_mr: %p errno %d, expected NULL EIO",
		 h->d.name, q, errno);
	errno = 0;
	q = ibv_create_qp(h->d.pd, &ia);
	vp_check(!q && errno == EIO, "%s: ibv_create_qp: %p errno %d, expected NULL EIO",
		 h->d.name, q, errno);
	errno = 0;
	q = ibv_create_cq(h->d.ctx, 4, NULL, NULL, 0);
	vp_check(!q && errno == EIO, "%s: ibv_create_cq: %p errno %d, expected NULL EIO",
		 h->d.name, q, errno);
	errno = 0;
	q = ibv_alloc_pd(h->d.ctx);
	vp_check(!q && errno == EIO, "%s: ibv_alloc_pd: %p errno %d, expected NULL EIO",
		 h->d.name, q, errno);
}

/*
 * A QP of a dead device: what its CQ still holds is SUCCESS or FLUSH (the
 * stream checks order and once-only; see note_deaths for the one other
 * error it may hold), then -1 with EIO.
 */
static void dead_drain(struct hdev *h, struct st_stream *s)
{
	double end = vp_now() + 5;

	s->posting = false;
	/* what note_death allowed before this device died stays allowed: a
	 * NAK from the other device's teardown may have come first */
	s->err_ok = 1 << IBV_WC_WR_FLUSH_ERR |
		    (s->err_ok & (1 << IBV_WC_LOC_PROT_ERR | PEER_TORN_DOWN));
	while (s->polling && vp_now() < end)
		st_poll(s);
	vp_check(!s->polling && s->poll_err == EIO,
		 "%s %s: ibv_poll_cq did not fail with EIO once drained (polling %d errno %d)",
		 h->d.name, s->name, s->polling, s->poll_err);
	vp_check(!s->post_err || s->post_err == EIO,
		 "%s %s: a post failed with %s before DEVICE_FATAL was read",
		 h->d.name, s->name, strerror(s->post_err));
	vp_check(s->first_err < 0 || (s->err_ok & (1 << s->first_err)),
		 "%s %s: error completion %s on a removed device",
		 h->d.name, s->name, vp_wc_status_str(s->first_err));
}

static struct hdev *hdev_of(const struct st_stream *s)
{
	return s->e->dev == &hdevs[0].d ? &hdevs[0] : &hdevs[1];
}

static struct hdev *peer_hdev(const struct st_stream *s)
{
	return hdev_of(s) == &hdevs[0] ? &hdevs[1] : &hdevs[0];
}

/*
 * Once a device died, the QPs of the other one lost their peers: from
 * then on their first error may be RETRY_EXC_ERR (that device may die
 * later too, in the same removal).  So may every QP's once the script
 * announced a removal (SIGUSR1): a netdev removal takes the link away
 * before the devices go.
 */
static void note_death(struct st_stream *s)
{
	if (removal_announced || peer_hdev(s)->dead)
		s->err_ok |= 1 << IBV_WC_RETRY_EXC_ERR;
	/*
	 * A device about to die: uverbs queues DEVICE_FATAL, then
	 * destroys the context's objects newest first, so an MR may go
	 * before the QP that uses it.  A request with frames still to
	 * build from it then fails with LOC_PROT_ERR, as after any
	 * dereg_mr (an unfinished one before it flushed ahead of it),
	 * and we may poll that before we read the event.
	 */
	if (removal_announced && hdev_of(s)->nexpect)
		s->err_ok |= 1 << IBV_WC_LOC_PROT_ERR |
			 1 << IBV_WC_WR_FLUSH_ERR;
	/*
	 * The same teardown seen from the peer: a request reaching a QP
	 * whose MR is already gone is NAKed, REM_ACCESS_ERR for a write
	 * or read, REM_OP_ERR for a send whose receive buffer was in it.
	 */
	if (removal_announced && peer_hdev(s)->nexpect)
		s->err_ok |= PEER_TORN_DOWN;
}

static void note_deaths(struct st_stream **all, int n)
{
	int i;

	for (i = 0; i < n; i++)
		note_death(all[i]);
}

static void check_events(struct hdev *h)
{
	char want[128], got[128];

	events_str(h->expect, h->star, h->nexpect, want, sizeof(want));
	events_str(h->got, NULL, h->ngot, got, sizeof(got));
	if (vp_check(events_match(h), "%s: async events [%s], expected [%s]",
		     h->d.name, got, want))
		printf("ok: %s: async events [%s] match [%s]\n", h->d.name, got, want);
}

static int run_holder(int npairs)
{
	struct pair *p = calloc((size_t)npairs, sizeof(*p));
	struct vp_buf *ba = calloc((size_t)npairs, sizeof(*ba));
	struct vp_buf *bb = calloc((size_t)npairs, sizeof(*bb));
	struct st_stream **all = calloc((size_t)npairs * 2, sizeof(*all));
	struct vp_conn_opts hopts;
	double t_ready, end;
	uint64_t ok_ready = 0, ok_dead = 0;
	int i, k, f0 = vp_fails;

	if (!p || !ba || !bb || !all)
		vp_die("calloc");
	if (vp_dev_open(&hdevs[0].d, dev_a) || vp_dev_open(&hdevs[1].d, dev_b))
		vp_die("open %s / %s", dev_a, dev_b);
	for (k = 0; k < 2; k++) {
		int fd = hdevs[k].d.ctx->async_fd;

		if (fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK))
			vp_die("fcntl");
	}
	hopts = scaled_race_opts();
	for (i = 0; i < npairs; i++) {
		pair_connect(&p[i], &hdevs[0].d, &hdevs[1].d, &hopts);
		vp_buf_alloc(&ba[i], st_side_len(SIZE, WIN, RWIN));
		vp_buf_alloc(&bb[i], st_side_len(SIZE, WIN, RWIN));
		if (vp_buf_reg(&ba[i], &hdevs[0].d, VP_ACCESS_ALL) ||
		    vp_buf_reg(&bb[i], &hdevs[1].d, VP_ACCESS_ALL))
			vp_die("ibv_reg_mr: %s", strerror(errno));
		st_init(&p[i].sa, "A", &p[i].a, &ba[i], 0x700 + i, &bb[i], 0x800 + i,
			SIZE, WIN, RWIN, ST_WRITE | ST_READ | ST_SEND);
		st_init(&p[i].sb, "B", &p[i].b, &bb[i], 0x800 + i, &ba[i], 0x700 + i,
			SIZE, WIN, RWIN, ST_WRITE | ST_READ | ST_SEND);
		snprintf(p[i].sa.name, sizeof(p[i].sa.name), "A%d", i);
		snprintf(p[i].sb.name, sizeof(p[i].sb.name), "B%d", i);
		all[2 * i] = &p[i].sa;
		all[2 * i + 1] = &p[i].sb;
	}
	/* warm up: every stream has moved data before we say ready */
	end = vp_now() + 60;
	for (;;) {
		bool warm = true;

		pump(all, 2 * npairs, 10);
		for (i = 0; i < 2 * npairs; i++)
			warm &= all[i]->ok >= 3;
		if (warm || vp_now() > end)
			break;
	}
	for (i = 0; i < 2 * npairs; i++)
		ok_ready += all[i]->ok + all[i]->rok;
	printf("ready %d QPs %d CQs %d MRs, %llu operations done\n", 2 * npairs,
	       2 * npairs, 2 * npairs, (unsigned long long)ok_ready);
	fflush(stdout);
	t_ready = vp_now();
	if (vp_fails != f0) {
		/* the failed pairs' sender state (window, RTO, retransmits) and
		 * the devices' verdicts, while they still exist: a failure in
		 * warm-up comes before the race this test is about */
		fflush(stdout);
		if (system("rdma -dd resource show qp; rdma statistic show link") == -1)
			perror("system");
	}
	vp_check(!vp_fails, "errors during warm-up");
	wait_events(0);
	hdevs[0].ready = hdevs[1].ready = true;

	/* stream until every device we expect to die has said so */
	end = t_ready + hold_wait;
	while (!holder_done() && vp_now() < end) {
		for (i = 0; i < 2 * npairs; i++) {
			if (hdev_of(all[i])->dead)
				continue;
			st_fill(all[i]);
			note_death(all[i]);	/* a signal may have come since */
			st_poll(all[i]);
		}
		wait_events(1);
		note_deaths(all, 2 * npairs);
	}
	wait_events(200);	/* events racing with the last one */
	note_deaths(all, 2 * npairs);
	for (i = 0; i < 2 * npairs; i++)
		ok_dead += all[i]->ok + all[i]->rok;
	for (k = 0; k < 2; k++) {
		check_events(&hdevs[k]);
		if (hdevs[k].dead)
			printf("%s: DEVICE_FATAL %.2f s after ready\n", hdevs[k].d.name,
			       hdevs[k].dead_at - t_ready);
	}
	vp_check(ok_dead > ok_ready, "no operation completed between ready and the removal");

	/* the devices' QPs: dead ones drain to EIO, live ones lost their peer */
	vp_flood_unaim(&flood, 0);
	for (i = 0; i < 2 * npairs; i++) {
		struct hdev *h = hdev_of(all[i]);

		if (h->dead)
			dead_drain(h, all[i]);
		else
			expect_peer_gone(all[i], "the other device was removed", true);
	}
	for (k = 0; k < 2; k++)
		if (hdevs[k].dead)
			dead_verbs(&hdevs[k], k ? &p[0].b : &p[0].a, k ? &p[0].sb : &p[0].sa);

	/* everything is destroyed and closed without an error */
	for (i = 0; i < npairs; i++) {
		qp_destroy(&p[i].a, "A");
		qp_destroy(&p[i].b, "B");
		cq_destroy(&p[i].a, "A");
		cq_destroy(&p[i].b, "B");
		vp_check(!vp_buf_free(&ba[i]) && !vp_buf_free(&bb[i]), "ibv_dereg_mr of pair %d", i);
	}
	for (k = 0; k < 2; k++)
		vp_check(!vp_dev_close(&hdevs[k].d), "dealloc_pd/close of %s", hdevs[k].d.name);
	printf("%s holder: %d pairs, %llu operations before ready, %llu until the removal; "
	       "%d surviving QPs failed with flushes only, %d with a NAK from the peer's "
	       "teardown\n",
	       vp_fails == f0 ? "PASS" : "FAIL", npairs, (unsigned long long)ok_ready,
	       (unsigned long long)(ok_dead - ok_ready), flushed_only, peer_mr_first);
	free(all);
	free(p);
	free(ba);
	free(bb);
	return vp_fails - f0;
}

/* ---- driver -------------------------------------------------------------------- */

static void usage(void)
{
	fprintf(stderr,
		"usage: mbcf_lifetimes [-a DEV] [-b DEV] [-s SEED] [-f RATE] destroy|dereg|deregbig|lastwords ROUNDS\n"
		"       mbcf_lifetimes [-a DEV] [-b DEV] [-s SEED] [-f RATE] [-w SEC]\n"
		"                      [-E DEV=EVENT,...]... [-I EVENT]... holder PAIRS\n");
	exit(2);
}

int main(int argc, char **argv)
{
	char *expects[4];
	int opt, n, nexp = 0, fails, i;

	setvbuf(stdout, NULL, _IOLBF, 0);
	signal(SIGUSR1, on_usr1);
	seed = (uint64_t)time(NULL) ^ (uint64_t)getpid() << 16;
	while ((opt = getopt(argc, argv, "a:b:s:f:E:w:I:")) != -1) {
		switch (opt) {
		case 'a': dev_a = optarg; break;
		case 'b': dev_b = optarg; break;
		case 's': seed = strtoull(optarg, NULL, 0); break;
		case 'f': flood_rate = (unsigned int)atoi(optarg); break;
		case 'w': hold_wait = atof(optarg); break;
		case 'I': ignored_events |= 1 << ev_parse(optarg); break;
		case 'E':
			if (nexp == 4)
				usage();
			expects[nexp++] = optarg;
			break;
		default: usage();
		}
	}
	if (optind + 2 != argc || (n = atoi(argv[optind + 1])) < 1)
		usage();
	for (i = 0; i < nexp; i++)
		expect_arg(expects[i]);
	printf("seed %llu (rerun with -s %llu)\n", (unsigned long long)seed,
	       (unsigned long long)seed);
	if (flood_rate) {
		vp_flood_default_sockets(&flood, &sock_a, &sock_b);
		vp_flood_start(&flood, flood_rate, seed);
	}
	if (!strcmp(argv[optind], "destroy"))
		fails = run_destroy(n);
	else if (!strcmp(argv[optind], "dereg"))
		fails = run_dereg(n);
	else if (!strcmp(argv[optind], "deregbig"))
		fails = run_deregbig(n);
	else if (!strcmp(argv[optind], "holder"))
		fails = run_holder(n);
	else if (!strcmp(argv[optind], "lastwords"))
		fails = run_lastwords(n);
	else
		usage();
	if (flood_rate) {
		vp_flood_stop(&flood);
		printf("flood: %llu frames sent (%llu duplicate writes, %llu acks, %llu wrong source)\n",
		       (unsigned long long)flood.sent, (unsigned long long)flood.sent_dup,
		       (unsigned long long)flood.sent_ack, (unsigned long long)flood.sent_wrong);
		vp_check(flood.sent > 0, "the flood sent nothing");
	}
	return fails > 100 ? 100 : fails;
}
