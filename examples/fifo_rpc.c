// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * fifo_rpc: a tiny RPC over MBCF's memory-based signal (the mbcf direct
 * verbs, infiniband/mbcfdv.h; link with -lmbcf).
 *
 *   server:  fifo_rpc [-d mbcf0] [-p 18519] [-c CLIENTS]
 *   client:  fifo_rpc [-d mbcf1] [-p 18519] [-n CALLS] SERVER
 *
 * Every process owns one FIFO with a signal (an eventfd its kernel adds to
 * as records arrive) and one RC QP per peer; the two ends swap FIFO keys.
 * A call is a record pushed into the server's FIFO: the client's number,
 * the call's sequence number and an argument x.  The server sleeps in
 * epoll_wait on mbcfdv_fifo_event_fd, hands every request to a handler
 * with mbcfdv_fifo_dispatch, and the handler answers by pushing the reply
 * (the sequence number and x * x + 1) into the caller's FIFO through the
 * QP the request came through.  The client takes its request's
 * completion (the request is in the server's queue), then sleeps in poll
 * on its own FIFO's eventfd for the reply.  Both ends check every field
 * and that each call is answered exactly once, in order; every process
 * exits 1 on a mismatch.
 *
 * The same RPC with plain verbs is SEND/RECV with a completion channel
 * (docs/porting.md, "The examples").
 */
#include "common.h"

#include <endian.h>
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include <infiniband/mbcfdv.h>

#define RPC_USAGE "[-d DEV] [-p PORT] [-c CLIENTS] [-n CALLS] [-t SEC] [SERVER]"
#define RPC_AREA 4096		/* record area of each FIFO */
#define RPC_BATCH 64		/* records per mbcfdv_fifo_dispatch */

/* A request and a reply, big endian on the wire. */
struct rpc_msg {
	uint32_t client;	/* request: the caller's number */
	uint32_t pad;
	uint64_t seq;
	uint64_t val;		/* request: x; reply: x * x + 1 */
};

static uint64_t rpc_arg(uint32_t client, uint64_t seq)
{
	return seq * 2654435761u + client * 40503u + 1;
}

/* Push @m (copied at post time: inline data) into @key through @qp. */
static int rpc_push(struct ibv_qp *qp, uint32_t key, const struct rpc_msg *m, uint64_t wr_id)
{
	struct ibv_qp_ex *qx = ibv_qp_to_qp_ex(qp);
	int err;

	ibv_wr_start(qx);
	qx->wr_id = wr_id;
	qx->wr_flags = IBV_SEND_SIGNALED;
	mbcfdv_wr_fifo_push(qx, key);
	ibv_wr_set_inline_data(qx, (void *)m, sizeof(*m));
	err = ibv_wr_complete(qx);
	if (err)
		fprintf(stderr, "push: %s\n", strerror(err));
	return err ? -1 : 0;
}

/* A FIFO with a signal on fresh memory of d->pd. */
static struct mbcfdv_fifo *rpc_fifo(struct ex_dev *d, uint32_t flags, void **mem)
{
	struct mbcfdv_fifo *f;

	if (posix_memalign(mem, 64, MBCFDV_FIFO_CTRL_LEN + RPC_AREA)) {
		perror("posix_memalign");
		return NULL;
	}
	f = mbcfdv_create_fifo(d->pd, *mem, MBCFDV_FIFO_CTRL_LEN + RPC_AREA, flags);
	if (!f)
		fprintf(stderr, "mbcfdv_create_fifo: %s\n", strerror(errno));
	return f;
}

/* ---- server ------------------------------------------------------------------ */

struct rpc_server {
	struct ex_conn *cl;	/* remote.rkey unused: the FIFO keys are below */
	uint32_t *key;		/* each client's FIFO */
	uint64_t *next;		/* each client's next sequence number */
	int n, err;
	uint64_t answered, total, pushes;
};

/* mbcfdv_fifo_dispatch's handler: check a request, push its reply. */
static void rpc_handle(void *ctx, const void *rec, uint32_t len, uint32_t qpn)
{
	struct rpc_server *s = ctx;
	struct rpc_msg req, rep = { 0 };
	uint32_t c;

	if (s->err)
		return;
	if (len != sizeof(req)) {
		fprintf(stderr, "request of %u bytes, want %zu\n", len, sizeof(req));
		s->err = -1;
		return;
	}
	memcpy(&req, rec, sizeof(req));
	c = be32toh(req.client);
	/* The QP it came through tells the caller; it must agree with the record. */
	if (c >= (uint32_t)s->n || s->cl[c].qp->qp_num != qpn ||
	    be64toh(req.seq) != s->next[c] ||
	    be64toh(req.val) != rpc_arg(c, s->next[c])) {
		fprintf(stderr, "request (client %u, seq %llu) through QP %u: unexpected\n",
			c, (unsigned long long)be64toh(req.seq), qpn);
		s->err = -1;
		return;
	}
	rep.seq = req.seq;
	rep.val = htobe64(be64toh(req.val) * be64toh(req.val) + 1);
	if (rpc_push(s->cl[c].qp, s->key[c], &rep, s->next[c])) {
		s->err = -1;
		return;
	}
	s->next[c]++;
	s->answered++;
	s->pushes++;
}

/* Reap the replies' completions that are there; each must be a success. */
static int rpc_reap(struct rpc_server *s, struct ibv_cq *cq)
{
	struct ibv_wc wc[16];
	int i, k;

	while ((k = ibv_poll_cq(cq, 16, wc)) > 0)
		for (i = 0; i < k; i++, s->pushes--)
			if (wc[i].status != IBV_WC_SUCCESS || wc[i].opcode != IBV_WC_SEND) {
				fprintf(stderr, "reply completion: %s\n",
					ibv_wc_status_str(wc[i].status));
				return -1;
			}
	return k < 0 ? -1 : 0;
}

/* Sleep in epoll until requests arrive; dispatch them; until all are done. */
static int rpc_serve(struct rpc_server *s, struct ex_dev *d, struct mbcfdv_fifo *f,
		     int timeout_s)
{
	struct epoll_event ev = { .events = EPOLLIN }, out;
	unsigned char buf[sizeof(struct rpc_msg)];
	uint64_t wakeups = 0;
	int ep = epoll_create1(EPOLL_CLOEXEC), n, err = -1;

	if (ep < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, mbcfdv_fifo_event_fd(f), &ev)) {
		perror("epoll");
		goto out;
	}
	while (s->answered < s->total) {
		n = epoll_wait(ep, &out, 1, timeout_s * 1000);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			fprintf(stderr, "epoll_wait: %s after %llu of %llu calls\n",
				n ? strerror(errno) : "timed out",
				(unsigned long long)s->answered, (unsigned long long)s->total);
			goto out;
		}
		wakeups++;
		n = mbcfdv_fifo_dispatch(f, rpc_handle, s, buf, sizeof(buf), RPC_BATCH);
		if (n < 0) {
			fprintf(stderr, "mbcfdv_fifo_dispatch: %s\n", strerror(-n));
			goto out;
		}
		if (s->err || rpc_reap(s, d->cq))
			goto out;
	}
	/* The last replies' completions (each reply is in its caller's FIFO). */
	while (s->pushes) {
		struct ibv_wc wc;

		if (ex_poll_one(d->cq, &wc, timeout_s))
			goto out;
		s->pushes--;
	}
	printf("fifo_rpc: server: %llu calls from %d clients answered, each exactly once,"
	       " in order\n", (unsigned long long)s->answered, s->n);
	printf("fifo_rpc: server: %llu wake-ups\n", (unsigned long long)wakeups);
	err = 0;
out:
	if (ep >= 0)
		close(ep);
	return err;
}

static int rpc_server(const struct ex_opts *o, struct ex_dev *d)
{
	struct rpc_server s = { .n = o->clients };
	struct mbcfdv_fifo *f = NULL;
	void *mem = NULL;
	uint64_t key;
	int c, err = -1;

	s.cl = calloc((size_t)s.n, sizeof(*s.cl));
	s.key = calloc((size_t)s.n, sizeof(*s.key));
	s.next = calloc((size_t)s.n, sizeof(*s.next));
	if (!s.cl || !s.key || !s.next) {
		perror("calloc");
		goto out;
	}
	for (c = 0; c < s.n; c++)
		s.cl[c].fd = -1;
	/* One signal per burst: a wake-up when a request lands in an empty
	 * queue; dispatch then takes everything there. */
	f = rpc_fifo(d, MBCFDV_FIFO_SIGNAL_EMPTY, &mem);
	d->send_ops_flags = IBV_QP_EX_WITH_SEND;
	d->max_inline_data = sizeof(struct rpc_msg);
	if (!f || ex_serve(d, o, s.cl, s.n, NULL, 0, 4, 1))
		goto out;
	for (c = 0; c < s.n; c++) {
		s.total += s.cl[c].remote.arg;	/* its CALLS */
		if (ex_send_u64(s.cl[c].fd, f->key) || ex_recv_u64(s.cl[c].fd, &key))
			goto out;
		s.key[c] = (uint32_t)key;
	}
	err = rpc_serve(&s, d, f, o->timeout_s);
	err = ex_send_verdicts(s.cl, s.n, err);
out:
	err = ex_serve_close(s.cl, s.n, NULL, err);
	if (f && mbcfdv_destroy_fifo(f)) {
		fprintf(stderr, "mbcfdv_destroy_fifo failed\n");
		err = -1;
	}
	free(mem);
	free(s.next);
	free(s.key);
	free(s.cl);
	return err;
}

/* ---- client ------------------------------------------------------------------ */

/* Sleep in poll on @f's eventfd until one record is there; pop it. */
static int rpc_wait_reply(struct mbcfdv_fifo *f, struct rpc_msg *rep, int timeout_s)
{
	struct pollfd p = { .fd = mbcfdv_fifo_event_fd(f), .events = POLLIN };
	uint32_t len;
	uint64_t count;
	int err;

	for (;;) {
		/* MBCFDV_FIFO_SIGNAL counts every record: clear, then pop. */
		if (read(p.fd, &count, sizeof(count)) < 0 && errno != EAGAIN) {
			perror("read eventfd");
			return -1;
		}
		err = mbcfdv_fifo_pop(f, rep, sizeof(*rep), &len, NULL);
		if (!err && len != sizeof(*rep))
			fprintf(stderr, "reply of %u bytes, want %zu\n", len, sizeof(*rep));
		if (!err)
			return len == sizeof(*rep) ? 0 : -1;
		if (err != EAGAIN) {
			fprintf(stderr, "mbcfdv_fifo_pop: %s\n", strerror(err));
			return -1;
		}
		err = poll(&p, 1, timeout_s * 1000);
		if (err < 0 && errno != EINTR) {
			perror("poll");
			return -1;
		}
		if (!err) {
			fprintf(stderr, "no reply within %d s\n", timeout_s);
			return -1;
		}
	}
}

static int rpc_calls(const struct ex_opts *o, struct ex_dev *d, struct ex_conn *conn,
		     struct mbcfdv_fifo *f, uint32_t key, double *worst_us)
{
	uint32_t me = conn->remote.arg;
	struct rpc_msg req = { .client = htobe32(me) }, rep;
	struct ibv_wc wc;
	uint64_t i, x;

	for (i = 0; i < (uint64_t)o->iters; i++) {
		double t0 = ex_now_us();

		x = rpc_arg(me, i);
		req.seq = htobe64(i);
		req.val = htobe64(x);
		if (rpc_push(conn->qp, key, &req, i))
			return -1;
		/* The request's completion: it is in the server's queue. */
		if (ex_poll_one(d->cq, &wc, o->timeout_s))
			return -1;
		if (wc.opcode != IBV_WC_SEND || wc.wr_id != i) {
			fprintf(stderr, "completion opcode %d wr_id %llu, want request %llu\n",
				wc.opcode, (unsigned long long)wc.wr_id, (unsigned long long)i);
			return -1;
		}
		if (rpc_wait_reply(f, &rep, o->timeout_s))
			return -1;
		if (be64toh(rep.seq) != i || be64toh(rep.val) != x * x + 1) {
			fprintf(stderr, "call %llu: reply (seq %llu, %llu), want (%llu, %llu)\n",
				(unsigned long long)i, (unsigned long long)be64toh(rep.seq),
				(unsigned long long)be64toh(rep.val),
				(unsigned long long)i, (unsigned long long)(x * x + 1));
			return -1;
		}
		if (ex_now_us() - t0 > *worst_us)
			*worst_us = ex_now_us() - t0;
	}
	return 0;
}

static int rpc_client(const struct ex_opts *o, struct ex_dev *d)
{
	struct ex_conn conn = { .fd = -1 };
	struct mbcfdv_fifo *f;
	uint64_t key, verdict = 1;
	double worst = 0;
	void *mem = NULL;
	int err = -1;

	f = rpc_fifo(d, MBCFDV_FIFO_SIGNAL, &mem);
	d->send_ops_flags = IBV_QP_EX_WITH_SEND;
	d->max_inline_data = sizeof(struct rpc_msg);
	if (!f || ex_join(d, o, &conn, NULL, 0, (uint32_t)o->iters, 4, 1) ||
	    ex_recv_u64(conn.fd, &key) || ex_send_u64(conn.fd, f->key))
		goto out;
	if (rpc_calls(o, d, &conn, f, (uint32_t)key, &worst))
		goto out;
	printf("fifo_rpc: client %u: %ld calls, every reply checked\n", conn.remote.arg, o->iters);
	printf("fifo_rpc: client %u: slowest call %.1f us\n", conn.remote.arg, worst);
	if (ex_recv_u64(conn.fd, &verdict))
		goto out;
	if (verdict)
		fprintf(stderr, "the server found a mismatch\n");
	err = verdict ? -1 : 0;
out:
	if (ex_conn_close(&conn))
		err = -1;
	if (f && mbcfdv_destroy_fifo(f)) {
		fprintf(stderr, "mbcfdv_destroy_fifo failed\n");
		err = -1;
	}
	free(mem);
	return err;
}

int main(int argc, char **argv)
{
	struct ex_opts o = {
		.dev = "mbcf0",
		.port = 18519,
		.iters = 200,
		.clients = 1,
		.timeout_s = 30,
	};
	struct ex_dev d;
	int err;

	if (ex_parse_opts(argc, argv, &o, RPC_USAGE))
		return 2;
	/*
	 * The server reaps its replies' completions after each dispatch,
	 * which may answer RPC_BATCH requests (its clients answer fast), so
	 * the CQ holds that many besides a few per client: an overrun would
	 * lose a completion and put every QP on the CQ in error (verbs).
	 */
	if (ex_dev_open(&d, o.dev, RPC_BATCH + 4 * o.clients + 16))
		return 1;
	err = o.host ? rpc_client(&o, &d) : rpc_server(&o, &d);
	ex_dev_close(&d);
	if (err)
		fprintf(stderr, "fifo_rpc: FAILED\n");
	return err ? 1 : 0;
}
