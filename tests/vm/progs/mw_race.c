// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * ibv_dealloc_mw racing a bind of the same window.
 *
 * Each iteration registers a one-page MR (MW_BIND), allocates a window
 * (type 1 on even iterations, type 2 on odd ones) and lets two threads go
 * at once: this one binds the window -- type 1 with ibv_bind_mw, type 2
 * with an IBV_WR_BIND_MW through ibv_post_send -- while a second one
 * deallocates it.  The bind completes SUCCESS (it came first; the dealloc
 * unbinds it) or MW_BIND_ERR (the window was gone; the QP is reset and
 * reconnected).  Then dereg_mr must succeed: a window bound after its
 * dealloc would hold the MR for ever (EBUSY), with its pages pinned.
 *
 * The start of the bind is shifted against the dealloc by a delay that
 * walks towards the point where either may win (a bind that won moves it
 * one step in the dealloc's favour, and back), plus jitter, so most
 * iterations land near the race instead of on one side of it.
 *
 * The binder works on a copy of the struct ibv_mw, taken before the race:
 * the provider frees the original in ibv_dealloc_mw, so reading it while
 * that runs would be the test's own use after free.
 *
 *   mbcf_mw_race -d DEV -n ITERATIONS [-T SECONDS] [-s SEED]
 * Prints "done N iterations: ..." when all N completed; exit status 0 only
 * then.  The first failed dereg_mr is reported with its iteration number.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "vmprog.h"

#define MR_ACCESS	(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_MW_BIND)
#define MW_ACCESS	(IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE)
#define STEP		8	/* spins the delay walks per iteration */
#define JITTER		64	/* +- spins of noise around it */
#define DELAY_MAX	200000

/* One round of the race, shared by the two threads. */
struct race {
	struct ibv_mw *mw;	/* the dealloc thread's to free */
	int delay;		/* > 0: the dealloc starts this many spins late */
	int ret;		/* ibv_dealloc_mw's */
	atomic_uint go;		/* round number the dealloc thread is to run */
	atomic_uint done;	/* round number it finished */
	atomic_bool stop;
};

static void spin(int n)
{
	for (volatile int i = 0; i < n; i++)
		;
}

static void *dealloc_thread(void *arg)
{
	struct race *r = arg;
	unsigned int seen = 0, g;

	for (;;) {
		while ((g = atomic_load_explicit(&r->go, memory_order_acquire)) == seen)
			if (atomic_load_explicit(&r->stop, memory_order_relaxed))
				return NULL;
		seen = g;
		if (r->delay > 0)
			spin(r->delay);
		r->ret = ibv_dealloc_mw(r->mw);
		atomic_store_explicit(&r->done, g, memory_order_release);
	}
}

/* Post the bind of @mw (the binder's copy) on @qp; ibv_post_send's value. */
static int post_bind(struct ibv_qp *qp, struct ibv_mw *mw, struct ibv_mr *mr,
		     void *buf, uint64_t wr_id)
{
	struct ibv_mw_bind_info info = {
		.mr = mr, .addr = (uintptr_t)buf, .length = VP_PAGE,
		.mw_access_flags = MW_ACCESS,
	};

	if (mw->type == IBV_MW_TYPE_1) {
		struct ibv_mw_bind b = {
			.wr_id = wr_id, .send_flags = IBV_SEND_SIGNALED,
			.bind_info = info,
		};

		return ibv_bind_mw(qp, mw, &b);
	}
	struct ibv_send_wr wr = {
		.wr_id = wr_id, .opcode = IBV_WR_BIND_MW,
		.send_flags = IBV_SEND_SIGNALED,
		.bind_mw = { .mw = mw, .rkey = ibv_inc_rkey(mw->rkey),
			     .bind_info = info },
	}, *bad;

	return ibv_post_send(qp, &wr, &bad);
}

/* The one completion of the bind: its status, or -1 (none in time). */
static int bind_status(struct ibv_cq *cq, uint64_t wr_id, double limit)
{
	double end = vp_now() + limit;
	struct ibv_wc wc;
	int n;

	do {
		n = ibv_poll_cq(cq, 1, &wc);
		if (n < 0)
			return -1;
		if (n == 1) {
			if (wc.wr_id != wr_id) {
				vp_fail("completion of wr %llu, expected %llu",
					(unsigned long long)wc.wr_id,
					(unsigned long long)wr_id);
				return -1;
			}
			return wc.status;
		}
	} while (vp_now() < end);
	return -1;
}

/* A bind that failed left the QP in error: back to RTS. */
static int reconnect(struct vp_ep *a, const struct vp_ep *b)
{
	struct ibv_qp_attr attr = { .qp_state = IBV_QPS_RESET };
	struct vp_conn_opts o = vp_scaled_opts(&vp_default_opts);
	int err = ibv_modify_qp(a->qp, &attr, IBV_QP_STATE);

	return err ? err : vp_ep_connect(a, b, &o);
}

struct tally {
	unsigned long bound[2], refused[2];
};

static void usage(void)
{
	fprintf(stderr, "usage: mbcf_mw_race -d DEV -n ITERATIONS [-T SECONDS] [-s SEED]\n");
	exit(2);
}

int main(int argc, char **argv)
{
	const char *devname = NULL;
	unsigned long n = 0, i;
	double limit = 600, t0, wc_limit;
	uint64_t seed = (uint64_t)time(NULL) ^ (uint64_t)getpid() << 32;
	struct vp_conn_opts o = vp_scaled_opts(&vp_default_opts);
	struct race r = { 0 };
	struct tally t = { 0 };
	struct vp_dev d;
	struct vp_ep a, b;
	struct ibv_cq *cq;
	pthread_t th;
	int delay = 0, c, err;
	void *buf;

	while ((c = getopt(argc, argv, "d:n:T:s:")) != -1) {
		switch (c) {
		case 'd': devname = optarg; break;
		case 'n': n = strtoul(optarg, NULL, 0); break;
		case 'T': limit = strtod(optarg, NULL); break;
		case 's': seed = strtoull(optarg, NULL, 0); break;
		default: usage();
		}
	}
	if (!devname || !n)
		usage();
	printf("mw_race: %s, %lu iterations, seed %#llx, uid %u\n", devname, n,
	       (unsigned long long)seed, (unsigned int)getuid());
	fflush(stdout);

	err = vp_dev_open(&d, devname);
	if (err)
		vp_die("open %s: %s", devname, strerror(err));
	cq = ibv_create_cq(d.ctx, 16, NULL, NULL, 0);
	if (!cq)
		vp_die_errno("ibv_create_cq");
	if (vp_ep_create(&a, &d, cq, 4, 1) || vp_ep_create(&b, &d, cq, 4, 1))
		vp_die_errno("ibv_create_qp");
	a.psn = 100;
	b.psn = 200;
	if (vp_ep_connect(&a, &b, &o) || vp_ep_connect(&b, &a, &o))
		vp_die_errno("connect");
	buf = aligned_alloc(VP_PAGE, VP_PAGE);
	if (!buf)
		vp_die_errno("aligned_alloc");
	memset(buf, 0, VP_PAGE);
	if (pthread_create(&th, NULL, dealloc_thread, &r))
		vp_die("pthread_create");

	wc_limit = 10 * vp_time_scale();
	t0 = vp_now();
	for (i = 0; i < n; i++) {
		enum ibv_mw_type type = i & 1 ? IBV_MW_TYPE_2 : IBV_MW_TYPE_1;
		int k = type == IBV_MW_TYPE_2, st, jit;
		struct ibv_mw copy;
		struct ibv_mr *mr;

		if (vp_now() - t0 > limit) {
			printf("FAIL: stopped at iteration %lu of %lu: the %.0f s limit\n",
			       i, n, limit);
			break;
		}
		mr = ibv_reg_mr(d.pd, buf, VP_PAGE, MR_ACCESS);
		if (!mr)
			vp_die("iteration %lu: ibv_reg_mr: %s", i, strerror(errno));
		r.mw = ibv_alloc_mw(d.pd, type);
		if (!r.mw)
			vp_die("iteration %lu: ibv_alloc_mw: %s", i, strerror(errno));
		copy = *r.mw;
		jit = (int)vp_rand_below(&seed, 2 * JITTER + 1) - JITTER;
		r.delay = delay + jit;

		atomic_store_explicit(&r.go, (unsigned int)i + 1, memory_order_release);
		if (delay + jit < 0)
			spin(-(delay + jit));
		err = post_bind(a.qp, &copy, mr, buf, i);
		while (atomic_load_explicit(&r.done, memory_order_acquire) != i + 1)
			;
		if (r.ret)
			vp_die("iteration %lu: ibv_dealloc_mw: %s", i, strerror(r.ret));
		if (err)
			vp_die("iteration %lu: posting the bind: %s", i, strerror(err));

		st = bind_status(cq, i, wc_limit);
		if (st == IBV_WC_SUCCESS) {
			t.bound[k]++;
			delay -= STEP;		/* the bind won: the dealloc earlier */
		} else if (st == IBV_WC_MW_BIND_ERR) {
			t.refused[k]++;
			delay += STEP;
			err = reconnect(&a, &b);
			if (err)
				vp_die("iteration %lu: reconnect: %s", i, strerror(err));
		} else {
			printf("FAIL: iteration %lu: bind completion %s\n", i,
			       st < 0 ? "missing" : vp_wc_status_str(st));
			break;
		}
		if (delay > DELAY_MAX)
			delay = DELAY_MAX;
		if (delay < -DELAY_MAX)
			delay = -DELAY_MAX;

		err = ibv_dereg_mr(mr);
		if (err) {
			printf("FAIL: iteration %lu (type %d, bind %s): ibv_dereg_mr: %s\n",
			       i, type, st == IBV_WC_SUCCESS ? "completed" : "refused",
			       strerror(err));
			break;	/* the window bound after its dealloc holds it */
		}
		if ((i + 1) % 20000 == 0) {
			printf("mw_race: %lu iterations, %.1f s, delay %d\n", i + 1,
			       vp_now() - t0, delay);
			fflush(stdout);
		}
	}
	atomic_store(&r.stop, true);
	pthread_join(th, NULL);

	printf("mw_race: %lu of %lu iterations in %.1f s: type 1 bound %lu refused %lu, "
	       "type 2 bound %lu refused %lu, final delay %d\n", i, n, vp_now() - t0,
	       t.bound[0], t.refused[0], t.bound[1], t.refused[1], delay);
	if (i != n)
		return 1;
	ibv_destroy_qp(a.qp);
	ibv_destroy_qp(b.qp);
	ibv_destroy_cq(cq);
	if (vp_dev_close(&d))
		vp_die("closing %s", devname);
	free(buf);
	printf("done %lu iterations\n", n);
	return 0;
}
