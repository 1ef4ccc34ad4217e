// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Resource limits (tests/vm/limits.sh).
 *
 *   mbcf_limits [-L MIB] hog cq|qp|mr|mrpage HOLD_S
 *       Create objects on -a (mbcf0) until creation fails: CQs of 65536
 *       entries (3 MiB rings), QPs with 4096-deep queues of 16 SGEs, MRs
 *       over fresh 1 MiB buffers, or MRs over one and the same page.
 *       -L: first set RLIMIT_MEMLOCK to MIB MiB and drop CAP_IPC_LOCK.
 *       Prints "HOG kind=K created=N errno=E", holds everything HOLD_S
 *       seconds ("holding"), then exits (the kernel tears down).
 *   mbcf_limits stream SECONDS [PAIRS]
 *       PAIRS (4) pairs -a <-> -b streaming checked writes, reads and sends
 *       for SECONDS or until SIGTERM; prints "STREAM ops=N max_gap_ms=G"
 *       (the longest time without a completion), fails on any error or
 *       wrong byte.
 *   mbcf_limits destroy N
 *       N QPs (N/2 connected pairs -a <-> -b, each moved data) destroyed
 *       one by one, then N MRs deregistered.  Writes trace markers
 *       "gp-begin L" / "gp-end L" around five membarrier(GLOBAL) calls
 *       (L = probe: each is one synchronize_rcu(), so a probe that counts
 *       grace-period waits must see them) and around each batch (L = qp,
 *       mr): limits.sh counts the waits in between.  Prints each batch's
 *       time beside N grace periods' worth, for the report only: on a
 *       debug kernel the CPU work slows ~17x and grace periods do not.
 *   mbcf_limits hold N
 *       The same N QPs and N MRs, "ready", then wait to be killed.
 *   mbcf_limits bigio MIB
 *       One RDMA READ of MIB MiB, then one RDMA WRITE of MIB MiB, -a <- -b,
 *       every byte checked (limits.sh counts the frames each received frame
 *       makes the receive softirq build, with kprobes).
 *   mbcf_limits memlock cq|qp|srq
 *       Create objects on -a until refused, under the RLIMIT_MEMLOCK the
 *       process was given (userlimits.sh: 8 MiB, an unprivileged user):
 *       CQs of 4096 entries, RC QPs of 256 + 256 entries (one SGE, one
 *       shared CQ), SRQs of 1024 entries.  After each, the process's VmPin
 *       (mm->pinned_vm, where the kernel charges ring pages) must have grown
 *       by the same number of pages: for CQs and SRQs exactly the ring
 *       (256 header bytes + entries, page-rounded), for QPs at least both
 *       rings.  Asserted: refusal with ENOMEM after exactly
 *       (limit - VmPin before) / per-object pages, VmPin never above the
 *       limit.  Stops (failing) once it got one object more than that.
 *       Prints "MEMLOCK kind=K created=N errno=E pages_each=P base=B
 *       vmpin=V limit=L" (pages) and exits 1 if a check failed.
 *   mbcf_limits objs ah|qp HOLD_S
 *       Create AHs (to the device's own GID 0) or RC QPs (1 + 1 entries,
 *       one shared CQ) on -a until refused or the device maximum is passed,
 *       print "OBJS kind=K created=N errno=E", "holding", then hold them
 *       HOLD_S seconds or until SIGTERM.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/capability.h>
#include <linux/membarrier.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <rdma/mbcf-abi.h>

#include "stream.h"
#include "vmprog.h"

static const char *dev_a = "mbcf0", *dev_b = "mbcf1";
static uint64_t seed;
static long memlock_mib = -1;	/* -L: RLIMIT_MEMLOCK, and no CAP_IPC_LOCK */
static volatile sig_atomic_t stop;

static void on_term(int sig)
{
	(void)sig;
	stop = 1;
}

static struct ibv_cq *cq_new(struct vp_dev *d, int cqe)
{
	struct ibv_cq *cq = ibv_create_cq(d->ctx, cqe, NULL, NULL, 0);

	if (!cq)
		vp_die("ibv_create_cq(%d) on %s: %s", cqe, d->name, strerror(errno));
	return cq;
}

static void open_both(struct vp_dev *da, struct vp_dev *db)
{
	if (vp_dev_open(da, dev_a))
		vp_die("open %s", dev_a);
	if (db && vp_dev_open(db, dev_b))
		vp_die("open %s", dev_b);
}

/* ---- hog ------------------------------------------------------------------- */

/* One more object of @kind; 0 or the errno of the failure. */
static int hog_one(struct vp_dev *d, const char *kind, struct ibv_cq *qcq,
		   uint8_t *page)
{
	if (!strcmp(kind, "cq")) {
		return ibv_create_cq(d->ctx, 65536, NULL, NULL, 0) ? 0 : errno;
	} else if (!strcmp(kind, "qp")) {
		struct ibv_qp_init_attr ia = {
			.send_cq = qcq, .recv_cq = qcq, .qp_type = IBV_QPT_RC,
			.cap = { .max_send_wr = 4096, .max_recv_wr = 4096,
				 .max_send_sge = 16, .max_recv_sge = 16,
				 .max_inline_data = 256 },
		};

		return ibv_create_qp(d->pd, &ia) ? 0 : errno;
	} else if (!strcmp(kind, "mr")) {
		/* fresh, untouched memory: the registration faults it in */
		void *p = mmap(NULL, 1 << 20, PROT_READ | PROT_WRITE,
			       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

		if (p == MAP_FAILED)
			return errno;
		return ibv_reg_mr(d->pd, p, 1 << 20, VP_ACCESS_ALL) ? 0 : errno;
	}
	return ibv_reg_mr(d->pd, page, VP_PAGE, VP_ACCESS_ALL) ? 0 : errno;
}

/*
 * Be an ordinary process for pinning: RLIMIT_MEMLOCK of @mib MiB and no
 * CAP_IPC_LOCK, which would bypass it (ib_umem_get checks both).
 */
static void limit_memlock(long mib)
{
	struct __user_cap_header_struct h = { .version = _LINUX_CAPABILITY_VERSION_3 };
	struct __user_cap_data_struct d[2];
	struct rlimit rl = { (rlim_t)mib << 20, (rlim_t)mib << 20 };

	if (setrlimit(RLIMIT_MEMLOCK, &rl))
		vp_die("setrlimit: %s", strerror(errno));
	if (syscall(SYS_capget, &h, d))
		vp_die("capget: %s", strerror(errno));
	d[CAP_IPC_LOCK / 32].effective &= ~(1u << (CAP_IPC_LOCK % 32));
	d[CAP_IPC_LOCK / 32].permitted &= ~(1u << (CAP_IPC_LOCK % 32));
	d[CAP_IPC_LOCK / 32].inheritable &= ~(1u << (CAP_IPC_LOCK % 32));
	if (syscall(SYS_capset, &h, d))
		vp_die("capset: %s", strerror(errno));
	printf("RLIMIT_MEMLOCK %ld MiB, CAP_IPC_LOCK dropped\n", mib);
}

static int run_hog(const char *kind, int hold_s)
{
	struct vp_dev d;
	struct ibv_cq *qcq = NULL;
	struct vp_buf page;
	double t0 = vp_now();
	long n = 0;
	int err;

	if (strcmp(kind, "cq") && strcmp(kind, "qp") && strcmp(kind, "mr") &&
	    strcmp(kind, "mrpage"))
		vp_die("hog cq|qp|mr|mrpage");
	if (memlock_mib >= 0)
		limit_memlock(memlock_mib);
	open_both(&d, NULL);
	vp_buf_alloc(&page, VP_PAGE);
	if (!strcmp(kind, "qp"))
		qcq = cq_new(&d, 16);
	while (!(err = hog_one(&d, kind, qcq, page.p))) {
		n++;
		if (n % 1000 == 0)
			printf("hog: %ld %s so far (%.1f s)\n", n, kind, vp_now() - t0);
	}
	printf("HOG kind=%s created=%ld errno=%d (%s) in %.1f s\n", kind, n, err,
	       strerror(err), vp_now() - t0);
	printf("holding\n");
	fflush(stdout);
	vp_sleep_us((long)hold_s * 1000000);
	return 0;	/* exit: the kernel destroys everything */
}

/* ---- memlock: ring memory against RLIMIT_MEMLOCK -------------------------------- */

/* This process's VmPin (mm->pinned_vm), in pages. */
static long vmpin_pages(void)
{
	FILE *f = fopen("/proc/self/status", "r");
	char line[256];
	long kb = -1;

	if (!f)
		vp_die("/proc/self/status: %s", strerror(errno));
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "VmPin: %ld kB", &kb) == 1)
			break;
	fclose(f);
	if (kb < 0)
		vp_die("no VmPin in /proc/self/status");
	return kb / (VP_PAGE / 1024);
}

/* Pages of a ring of @n entries of @stride bytes (kmod/umap.c). */
static long ring_pages(long n, long stride)
{
	return (MBCF_RING_ENTRIES_OFF + n * stride + VP_PAGE - 1) / VP_PAGE;
}

#define ALIGN16(x)	(((x) + 15) & ~15L)

/* One more object of @kind for the memlock test; 0 or the errno. */
static int memlock_one(struct vp_dev *d, const char *kind, struct ibv_cq *qcq)
{
	if (!strcmp(kind, "cq"))
		return ibv_create_cq(d->ctx, 4096, NULL, NULL, 0) ? 0 : errno;
	if (!strcmp(kind, "srq")) {
		struct ibv_srq_init_attr sa = { .attr = { .max_wr = 1024, .max_sge = 1 } };

		return ibv_create_srq(d->pd, &sa) ? 0 : errno;
	} else {
		struct ibv_qp_init_attr ia = {
			.send_cq = qcq, .recv_cq = qcq, .qp_type = IBV_QPT_RC,
			.cap = { .max_send_wr = 256, .max_recv_wr = 256,
				 .max_send_sge = 1, .max_recv_sge = 1 },
		};

		return ibv_create_qp(d->pd, &ia) ? 0 : errno;
	}
}

static int run_memlock(const char *kind)
{
	long sq = ring_pages(256, ALIGN16(sizeof(struct mbcf_send_wqe) + sizeof(struct mbcf_sge)));
	long rq = ring_pages(256, ALIGN16(sizeof(struct mbcf_recv_wqe) + sizeof(struct mbcf_sge)));
	long want, limit, base, v, prev, each = -1, n = 0, bad = 0, expect;
	struct ibv_cq *qcq = NULL;
	struct rlimit rl;
	struct vp_dev d;
	int err;

	if (!strcmp(kind, "cq"))
		want = ring_pages(4096, MBCF_CQE_SIZE);
	else if (!strcmp(kind, "srq"))
		want = ring_pages(1024, ALIGN16(sizeof(struct mbcf_recv_wqe) + sizeof(struct mbcf_sge)));
	else if (!strcmp(kind, "qp"))
		want = sq + rq;		/* at least: plus the request copies */
	else
		vp_die("memlock cq|qp|srq");
	if (getrlimit(RLIMIT_MEMLOCK, &rl) || rl.rlim_cur == RLIM_INFINITY)
		vp_die("memlock: needs a finite RLIMIT_MEMLOCK");
	limit = (long)(rl.rlim_cur / VP_PAGE);
	open_both(&d, NULL);
	if (!strcmp(kind, "qp"))
		qcq = cq_new(&d, 16);
	base = prev = vmpin_pages();
	expect = (limit - base) / want;	/* an upper bound for QPs */
	while (!(err = memlock_one(&d, kind, qcq))) {
		v = vmpin_pages();
		if (each < 0)
			each = v - prev;
		if (v - prev != each || v - prev < want) {
			printf("FAIL: %s %ld charged %ld pages (the first %ld; the ring%s %ld)\n",
			       kind, n + 1, v - prev, each, strcmp(kind, "qp") ? "" : "s", want);
			bad++;
		}
		prev = v;
		if (++n > expect)
			break;	/* over the limit: stop before memory runs out */
	}
	v = vmpin_pages();
	if (each > 0)
		expect = (limit - base) / each;
	printf("MEMLOCK kind=%s created=%ld errno=%d (%s) pages_each=%ld base=%ld vmpin=%ld limit=%ld rings=%ld\n",
	       kind, n, err, strerror(err), each, base, v, limit, want);
	if (n != expect || err != ENOMEM || v > limit || (strcmp(kind, "qp") && each != want)) {
		printf("FAIL: want created=%ld errno=%d pages_each=%s%ld vmpin<=%ld\n", expect,
		       ENOMEM, strcmp(kind, "qp") ? "" : ">=", want, limit);
		bad++;
	}
	return bad ? 1 : 0;
}

/* ---- objs: hold every object of a kind the process may -------------------------- */

static int run_objs(const char *kind, int hold_s)
{
	long n = 0, max;
	struct ibv_cq *qcq = NULL;
	struct ibv_device_attr da;
	struct vp_dev d;
	double end;
	int err = 0;

	open_both(&d, NULL);
	if (ibv_query_device(d.ctx, &da))
		vp_die("ibv_query_device");
	max = !strcmp(kind, "ah") ? da.max_ah : da.max_qp;
	if (!strcmp(kind, "qp"))
		qcq = cq_new(&d, 16);
	else if (strcmp(kind, "ah"))
		vp_die("objs ah|qp");
	while (n <= max) {
		if (!strcmp(kind, "ah")) {
			struct ibv_ah_attr aa = { .is_global = 1, .port_num = 1,
						  .grh = { .dgid = d.gid, .hop_limit = 1 } };

			err = ibv_create_ah(d.pd, &aa) ? 0 : errno;
		} else {
			struct ibv_qp_init_attr ia = {
				.send_cq = qcq, .recv_cq = qcq, .qp_type = IBV_QPT_RC,
				.cap = { .max_send_wr = 1, .max_recv_wr = 1,
					 .max_send_sge = 1, .max_recv_sge = 1 },
			};

			err = ibv_create_qp(d.pd, &ia) ? 0 : errno;
		}
		if (err)
			break;
		n++;
	}
	printf("OBJS kind=%s created=%ld errno=%d (%s)\n", kind, n, err, strerror(err));
	printf("holding\n");
	fflush(stdout);
	signal(SIGTERM, on_term);
	end = vp_now() + hold_s;
	while (!stop && vp_now() < end)
		vp_sleep_us(100000);
	return 0;	/* exit: the kernel destroys everything */
}

/* ---- stream ------------------------------------------------------------------- */

static int run_stream(double seconds, int npairs)
{
	struct vp_dev da, db;
	struct vp_ep *ea = calloc((size_t)npairs, sizeof(*ea));
	struct vp_ep *eb = calloc((size_t)npairs, sizeof(*eb));
	struct vp_buf *ba = calloc((size_t)npairs, sizeof(*ba));
	struct vp_buf *bb = calloc((size_t)npairs, sizeof(*bb));
	struct st_stream *s = calloc((size_t)npairs * 2, sizeof(*s));
	double t0, last, gap = 0, end;
	uint64_t ops = 0;
	int i;

	if (!ea || !eb || !ba || !bb || !s)
		vp_die("calloc");
	open_both(&da, &db);
	for (i = 0; i < npairs; i++) {
		if (vp_ep_create(&ea[i], &da, cq_new(&da, 64), 16, 16) ||
		    vp_ep_create(&eb[i], &db, cq_new(&db, 64), 16, 16))
			vp_die("ibv_create_qp: %s", strerror(errno));
		ea[i].psn = vp_rand_below(&seed, 1u << 24);
		eb[i].psn = vp_rand_below(&seed, 1u << 24);
		if (vp_ep_connect(&ea[i], &eb[i], &vp_default_opts) ||
		    vp_ep_connect(&eb[i], &ea[i], &vp_default_opts))
			vp_die("connect");
		vp_buf_alloc(&ba[i], st_side_len(4096, 4, 4));
		vp_buf_alloc(&bb[i], st_side_len(4096, 4, 4));
		if (vp_buf_reg(&ba[i], &da, VP_ACCESS_ALL) || vp_buf_reg(&bb[i], &db, VP_ACCESS_ALL))
			vp_die("ibv_reg_mr");
		st_init(&s[2 * i], "A", &ea[i], &ba[i], 0x10 + i, &bb[i], 0x20 + i, 4096, 4, 4,
			ST_WRITE | ST_READ | ST_SEND);
		st_init(&s[2 * i + 1], "B", &eb[i], &bb[i], 0x20 + i, &ba[i], 0x10 + i, 4096, 4, 4,
			ST_WRITE | ST_READ | ST_SEND);
	}
	signal(SIGTERM, on_term);	/* SIGTERM ends the stream early */
	printf("streaming %d pairs for %.0f s\n", npairs, seconds);
	fflush(stdout);
	t0 = last = vp_now();
	end = t0 + seconds;
	while (vp_now() < end && !vp_fails && !stop) {
		int got = 0;

		for (i = 0; i < 2 * npairs; i++) {
			st_fill(&s[i]);
			got += st_poll(&s[i]) > 0;
		}
		if (got) {
			double now = vp_now();

			if (now - last > gap)
				gap = now - last;
			last = now;
		}
	}
	for (i = 0; i < 2 * npairs; i++)
		s[i].posting = false;
	for (i = 0; i < 2 * npairs; i++) {
		vp_check(!st_drain_sends(&s[i], 30), "stream %d: requests outstanding at the end", i);
		vp_check(!s[i].post_err && s[i].first_err < 0,
			 "stream %d: post error %d, first error %d", i, s[i].post_err, s[i].first_err);
		ops += s[i].ok + s[i].rok;
	}
	printf("STREAM ops=%llu max_gap_ms=%.0f seconds=%.1f fails=%d\n",
	       (unsigned long long)ops, gap * 1e3, vp_now() - t0, vp_fails);
	return vp_fails;
}

/* ---- destroy / hold --------------------------------------------------------------- */

struct many {
	struct vp_dev da, db;
	struct vp_ep *a, *b;
	struct ibv_cq *cqa, *cqb;
	struct vp_buf mrs;		/* n pages, one MR each */
	struct ibv_mr **mr;
	int npairs, nmr;
};

/* Median of five synchronize_rcu() (membarrier GLOBAL on > 1 CPU). */
static double grace_period(void)
{
	double t[5], x;
	int i, j;

	for (i = 0; i < 5; i++) {
		double t0 = vp_now();

		if (syscall(__NR_membarrier, MEMBARRIER_CMD_GLOBAL, 0, 0))
			vp_die("membarrier: %s", strerror(errno));
		t[i] = vp_now() - t0;
	}
	for (i = 0; i < 5; i++)
		for (j = i + 1; j < 5; j++)
			if (t[j] < t[i]) {
				x = t[i];
				t[i] = t[j];
				t[j] = x;
			}
	return t[2];
}

/*
 * A line in the kernel's trace buffer (limits.sh reads it); without tracefs
 * mounted this does nothing.
 */
static void trace_mark(const char *what, const char *label)
{
	FILE *f = fopen("/sys/kernel/tracing/trace_marker", "w");

	if (!f)
		return;
	fprintf(f, "gp-%s %s\n", what, label);
	fclose(f);
}

/* Wait for one completion on @cq: its status, or -1 after @timeout_s. */
static int wait_one(struct ibv_cq *cq, double timeout_s)
{
	double end = vp_now() + timeout_s;
	struct ibv_wc wc;
	int n;

	while (!(n = ibv_poll_cq(cq, 1, &wc)))
		if (vp_now() > end)
			return -1;
	return n < 0 ? -1 : (int)wc.status;
}

/* n QPs as n/2 connected pairs, each pair wrote 8 bytes; n MRs. */
static void many_setup(struct many *m, int n)
{
	struct vp_buf lb;
	double t0 = vp_now();
	int i, st;

	memset(m, 0, sizeof(*m));
	open_both(&m->da, &m->db);
	m->npairs = n / 2;
	m->nmr = n;
	m->a = calloc((size_t)m->npairs, sizeof(*m->a));
	m->b = calloc((size_t)m->npairs, sizeof(*m->b));
	m->mr = calloc((size_t)n, sizeof(*m->mr));
	if (!m->a || !m->b || !m->mr)
		vp_die("calloc");
	m->cqa = cq_new(&m->da, 4096);
	m->cqb = cq_new(&m->db, 4096);
	vp_buf_alloc(&m->mrs, (size_t)n * VP_PAGE);
	for (i = 0; i < n; i++) {
		m->mr[i] = ibv_reg_mr(i % 2 ? m->db.pd : m->da.pd, m->mrs.p + (size_t)i * VP_PAGE,
				      VP_PAGE, VP_ACCESS_ALL);
		if (!m->mr[i])
			vp_die("ibv_reg_mr %d: %s", i, strerror(errno));
	}
	vp_buf_alloc(&lb, VP_PAGE);
	if (vp_buf_reg(&lb, &m->da, VP_ACCESS_ALL))
		vp_die("ibv_reg_mr");
	for (i = 0; i < m->npairs; i++) {
		if (vp_ep_create(&m->a[i], &m->da, m->cqa, 4, 4) ||
		    vp_ep_create(&m->b[i], &m->db, m->cqb, 4, 4))
			vp_die("ibv_create_qp %d: %s", i, strerror(errno));
		m->a[i].psn = vp_rand_below(&seed, 1u << 24);
		m->b[i].psn = vp_rand_below(&seed, 1u << 24);
		if (vp_ep_connect(&m->a[i], &m->b[i], &vp_default_opts) ||
		    vp_ep_connect(&m->b[i], &m->a[i], &vp_default_opts))
			vp_die("connect %d", i);
		/* pair i writes 8 bytes into MR 2i+1 (on mbcf1) */
		memcpy(lb.p, &i, sizeof(i));
		if (vp_post_rdma(&m->a[i], IBV_WR_RDMA_WRITE, lb.p, 8, lb.mr->lkey,
				 (uintptr_t)m->mrs.p + (size_t)(2 * i + 1) * VP_PAGE,
				 m->mr[2 * i + 1]->rkey, (uint64_t)i))
			vp_die("post");
		st = wait_one(m->cqa, 30);
		if (st != IBV_WC_SUCCESS)
			vp_die("pair %d: write did not complete: %d", i, st);
		vp_check(!memcmp(m->mrs.p + (size_t)(2 * i + 1) * VP_PAGE, &i, sizeof(i)),
			 "pair %d: written bytes differ", i);
	}
	vp_buf_free(&lb);
	printf("set up %d QPs (%d pairs, each wrote) and %d MRs in %.1f s\n", 2 * m->npairs,
	       m->npairs, n, vp_now() - t0);
	fflush(stdout);
}

static int run_destroy(int n)
{
	double gp, tq, tm, t0;
	struct many m;
	int i, err = 0;

	many_setup(&m, n);
	trace_mark("begin", "probe");
	gp = grace_period();
	trace_mark("end", "probe");
	trace_mark("begin", "qp");
	t0 = vp_now();
	for (i = 0; i < m.npairs; i++) {
		err |= ibv_destroy_qp(m.a[i].qp);
		err |= ibv_destroy_qp(m.b[i].qp);
	}
	tq = vp_now() - t0;
	trace_mark("end", "qp");
	vp_check(!err, "a destroy_qp failed");
	vp_check(!ibv_destroy_cq(m.cqa) && !ibv_destroy_cq(m.cqb), "destroy_cq");
	trace_mark("begin", "mr");
	t0 = vp_now();
	for (i = 0; i < m.nmr; i++)
		err |= ibv_dereg_mr(m.mr[i]);
	tm = vp_now() - t0;
	trace_mark("end", "mr");
	vp_check(!err, "a dereg_mr failed");
	printf("DESTROY qps=%d qp_s=%.3f mrs=%d mr_s=%.3f grace_period_ms=%.2f "
	       "(%d grace periods would take %.1f s)\n", 2 * m.npairs, tq, m.nmr, tm,
	       gp * 1e3, n, n * gp);
	vp_check(!vp_dev_close(&m.da) && !vp_dev_close(&m.db), "close");
	return vp_fails;
}

static int run_hold(int n)
{
	struct many m;

	many_setup(&m, n);
	printf("ready grace_period_ms=%.2f\n", grace_period() * 1e3);
	fflush(stdout);
	for (;;)
		pause();
	return 0;
}

/* ---- bigio ---------------------------------------------------------------------- */

static int run_bigio(size_t mib)
{
	size_t len = mib << 20;
	struct vp_dev da, db;
	struct vp_ep a, b;
	struct vp_buf la, rb;
	double t0;
	long d;
	int st;

	if (len > (1ull << 31) - 4096)
		vp_die("at most 2047 MiB");
	open_both(&da, &db);
	if (vp_ep_create(&a, &da, cq_new(&da, 16), 4, 4) ||
	    vp_ep_create(&b, &db, cq_new(&db, 16), 4, 4))
		vp_die("ibv_create_qp");
	a.psn = vp_rand_below(&seed, 1u << 24);
	b.psn = vp_rand_below(&seed, 1u << 24);
	if (vp_ep_connect(&a, &b, &vp_default_opts) || vp_ep_connect(&b, &a, &vp_default_opts))
		vp_die("connect");
	vp_buf_alloc(&la, len);
	vp_buf_alloc(&rb, len);
	vp_fill_pat(rb.p, len, 0x51, 0);
	if (vp_buf_reg(&la, &da, VP_ACCESS_ALL) || vp_buf_reg(&rb, &db, VP_ACCESS_ALL))
		vp_die("ibv_reg_mr: %s", strerror(errno));
	printf("bigio: %zu MiB buffers registered\n", mib);
	fflush(stdout);

	t0 = vp_now();
	if (vp_post_rdma(&a, IBV_WR_RDMA_READ, la.p, (uint32_t)len, la.mr->lkey,
			 (uintptr_t)rb.p, rb.mr->rkey, 1))
		vp_die("post read");
	st = wait_one(a.cq, 600);
	t0 = vp_now() - t0;
	d = vp_diff_pat(la.p, len, 0x51, 0);
	vp_check(st == IBV_WC_SUCCESS && d < 0, "read of %zu MiB: status %d, first wrong byte %ld",
		 mib, st, d);
	printf("READ %zu MiB in %.2f s (%.1f MB/s)\n", mib, t0, len / t0 / 1e6);

	vp_fill_pat(la.p, len, 0x52, 0);
	t0 = vp_now();
	if (vp_post_rdma(&a, IBV_WR_RDMA_WRITE, la.p, (uint32_t)len, la.mr->lkey,
			 (uintptr_t)rb.p, rb.mr->rkey, 2))
		vp_die("post write");
	st = wait_one(a.cq, 600);
	t0 = vp_now() - t0;
	d = vp_diff_pat(rb.p, len, 0x52, 0);
	vp_check(st == IBV_WC_SUCCESS && d < 0, "write of %zu MiB: status %d, first wrong byte %ld",
		 mib, st, d);
	printf("WRITE %zu MiB in %.2f s (%.1f MB/s)\n", mib, t0, len / t0 / 1e6);
	fflush(stdout);
	vp_check(!ibv_destroy_qp(a.qp) && !ibv_destroy_qp(b.qp), "destroy_qp");
	vp_check(!ibv_destroy_cq(a.cq) && !ibv_destroy_cq(b.cq), "destroy_cq");
	vp_check(!vp_buf_free(&la) && !vp_buf_free(&rb), "dereg");
	vp_check(!vp_dev_close(&da) && !vp_dev_close(&db), "close");
	return vp_fails;
}

static void usage(void)
{
	fprintf(stderr, "usage: mbcf_limits [-a DEV] [-b DEV] [-s SEED] [-L MIB] hog KIND HOLD_S |\n"
		"       stream SECONDS [PAIRS] | destroy N | hold N | bigio MIB |\n"
		"       memlock cq|qp|srq | objs ah|qp HOLD_S\n");
	exit(2);
}

int main(int argc, char **argv)
{
	const char *mode;
	int opt, ret;

	setvbuf(stdout, NULL, _IOLBF, 0);
	seed = (uint64_t)time(NULL) ^ (uint64_t)getpid() << 16;
	while ((opt = getopt(argc, argv, "a:b:s:L:")) != -1) {
		switch (opt) {
		case 'L': memlock_mib = atol(optarg); break;
		case 'a': dev_a = optarg; break;
		case 'b': dev_b = optarg; break;
		case 's': seed = strtoull(optarg, NULL, 0); break;
		default: usage();
		}
	}
	if (optind + 2 > argc)
		usage();
	mode = argv[optind];
	printf("seed %llu\n", (unsigned long long)seed);
	if (!strcmp(mode, "hog") && optind + 3 == argc)
		ret = run_hog(argv[optind + 1], atoi(argv[optind + 2]));
	else if (!strcmp(mode, "stream"))
		ret = run_stream(atof(argv[optind + 1]),
				 optind + 3 == argc ? atoi(argv[optind + 2]) : 4);
	else if (!strcmp(mode, "destroy"))
		ret = run_destroy(atoi(argv[optind + 1]));
	else if (!strcmp(mode, "hold"))
		ret = run_hold(atoi(argv[optind + 1]));
	else if (!strcmp(mode, "memlock"))
		ret = run_memlock(argv[optind + 1]);
	else if (!strcmp(mode, "objs") && optind + 3 == argc)
		ret = run_objs(argv[optind + 1], atoi(argv[optind + 2]));
	else if (!strcmp(mode, "bigio"))
		ret = run_bigio((size_t)atol(argv[optind + 1]));
	else
		usage();
	return ret > 100 ? 100 : ret;
}
