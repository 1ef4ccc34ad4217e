// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * atomic_counter: one 8-byte counter in the server's memory, incremented
 * by several clients with RDMA fetch-and-add.
 *
 *   server:  atomic_counter [-d mbcf0] [-p 18516] [-c CLIENTS]
 *   client:  atomic_counter [-d mbcf1] [-p 18516] [-n K] [-w DEPTH] SERVER
 *
 * The server registers the counter (initially 0) with REMOTE_ATOMIC, waits
 * for CLIENTS clients (each gets its own QP), then lets them all start at
 * once.  Each client does K fetch-and-add(+1), up to DEPTH in flight, and
 * checks that the values it got back are strictly increasing; it then sends
 * them to the server.  The server checks that the counter equals the total
 * number of operations and that the fetched values of all clients together
 * are exactly 0 .. total-1, each once.  Every process exits 1 on a mismatch.
 */
#include "common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define AC_USAGE "[-d DEV] [-p PORT] [-c CLIENTS] [-n K] [-w DEPTH] [-t SEC] [SERVER]"

/* ---- server --------------------------------------------------------------- */

/* Mark @v in @seen; fail on a value out of range or seen before. */
static int ac_mark(unsigned char *seen, uint64_t total, uint64_t v, int client)
{
	if (v >= total) {
		fprintf(stderr, "client %d fetched %llu, beyond %llu operations\n",
			client, (unsigned long long)v, (unsigned long long)total);
		return -1;
	}
	if (seen[v / 8] & (1u << (v % 8))) {
		fprintf(stderr, "value %llu fetched twice (again by client %d)\n",
			(unsigned long long)v, client);
		return -1;
	}
	seen[v / 8] |= (unsigned char)(1u << (v % 8));
	return 0;
}

/* Each client's fetched values, then the final checks. */
static int ac_server_collect(struct ex_conn *cl, int n, uint64_t total,
			     volatile uint64_t *counter)
{
	unsigned char *seen = calloc(total / 8 + 1, 1);
	uint64_t *vals = calloc(total + 1, sizeof(*vals));
	uint64_t got = 0, k, i, final;
	int c, err = 0;

	if (!seen || !vals) {
		perror("calloc");
		err = -1;
	}
	for (c = 0; c < n && !err; c++) {
		err = ex_recv_u64(cl[c].fd, &k);
		if (!err && k != cl[c].remote.arg) {
			fprintf(stderr, "client %d reports %llu values, want %u\n", c,
				(unsigned long long)k, cl[c].remote.arg);
			err = -1;
		}
		if (!err)
			err = ex_recv_u64s(cl[c].fd, vals, k);
		for (i = 0; !err && i < k; i++, got++)
			err = ac_mark(seen, total, vals[i], c);
	}
	free(seen);
	free(vals);
	if (err)
		return -1;
	/* Every client saw its last completion before reporting. */
	final = __atomic_load_n(counter, __ATOMIC_ACQUIRE);
	printf("atomic_counter: server: counter %llu, expected %llu (%d clients)\n",
	       (unsigned long long)final, (unsigned long long)total, n);
	if (final != total || got != total) {
		fprintf(stderr, "counter %llu, %llu values reported, want %llu\n",
			(unsigned long long)final, (unsigned long long)got,
			(unsigned long long)total);
		return -1;
	}
	printf("atomic_counter: server: fetched values are exactly 0..%llu, each once\n",
	       (unsigned long long)total - 1);
	return 0;
}

static int ac_server(const struct ex_opts *o, struct ex_dev *d)
{
	int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_ATOMIC;
	struct ex_conn *cl = calloc((size_t)o->clients, sizeof(*cl));
	uint64_t *counter = NULL, total = 0;
	struct ibv_mr *mr = NULL;
	int c, err = -1;

	if (!cl || posix_memalign((void **)&counter, 64, 64)) {
		perror("alloc");
		goto out;
	}
	for (c = 0; c < o->clients; c++)
		cl[c].fd = -1;
	counter[0] = 0;
	mr = ex_reg_mr(d, counter, 64, access);
	if (!mr || ex_serve(d, o, cl, o->clients, mr, access, 1, 1))
		goto out;
	for (c = 0; c < o->clients; c++)
		total += cl[c].remote.arg;	/* its K */
	/* All QPs are up: start everybody at once, for real contention. */
	for (c = 0; c < o->clients; c++)
		if (ex_send_u64(cl[c].fd, total))
			goto out;
	err = ac_server_collect(cl, o->clients, total, counter);
	err = ex_send_verdicts(cl, o->clients, err);
out:
	err = ex_serve_close(cl, o->clients, mr, err);
	free(counter);
	free(cl);
	return err;
}

/* ---- client --------------------------------------------------------------- */

/* K fetch-and-adds, up to @depth in flight, each into its own result slot. */
static int ac_client_run(const struct ex_opts *o, struct ex_dev *d, struct ibv_qp *qp,
			 struct ibv_mr *mr, uint64_t *res, const struct ex_peer *srv)
{
	long posted = 0, done = 0, k = o->iters;
	struct ibv_wc wc;

	while (done < k) {
		while (posted < k && posted - done < o->depth) {
			struct ibv_send_wr wr = {
				.wr_id = (uint64_t)posted,
				.opcode = IBV_WR_ATOMIC_FETCH_AND_ADD,
				.send_flags = IBV_SEND_SIGNALED,
				.wr.atomic = {
					.remote_addr = srv->addr,
					.compare_add = 1,
					.rkey = srv->rkey,
				},
			};
			if (ex_post_send(qp, &wr, &res[posted], 8, mr->lkey))
				return -1;
			posted++;
		}
		if (ex_poll_one(d->cq, &wc, o->timeout_s))
			return -1;
		/* An RC send queue completes in posting order. */
		if (wc.opcode != IBV_WC_FETCH_ADD || wc.wr_id != (uint64_t)done ||
		    wc.byte_len != 8) {
			fprintf(stderr, "completion opcode %d wr_id %llu len %u, want "
				"fetch-and-add %ld len 8\n", wc.opcode,
				(unsigned long long)wc.wr_id, wc.byte_len, done);
			return -1;
		}
		done++;
	}
	return 0;
}

static int ac_client_check(const uint64_t *res, long k, uint64_t total)
{
	long i;

	for (i = 0; i < k; i++) {
		if (res[i] >= total || (i && res[i] <= res[i - 1])) {
			fprintf(stderr, "fetched value %ld is %llu after %llu (total %llu)\n",
				i, (unsigned long long)res[i],
				(unsigned long long)(i ? res[i - 1] : 0),
				(unsigned long long)total);
			return -1;
		}
	}
	return 0;
}

static int ac_client(const struct ex_opts *o, struct ex_dev *d)
{
	uint64_t *res = calloc((size_t)o->iters, sizeof(*res));
	struct ex_conn conn = { .fd = -1 };
	struct ibv_mr *mr = NULL;
	uint64_t total, verdict = 1;
	int err = -1;

	if (!res) {
		perror("calloc");
		return -1;
	}
	mr = ex_reg_mr(d, res, (size_t)o->iters * sizeof(*res), IBV_ACCESS_LOCAL_WRITE);
	if (!mr || ex_join(d, o, &conn, NULL, 0, (uint32_t)o->iters, (uint32_t)o->depth, 1) ||
	    ex_recv_u64(conn.fd, &total))	/* the start signal */
		goto out;
	if (ac_client_run(o, d, conn.qp, mr, res, &conn.remote) ||
	    ac_client_check(res, o->iters, total))
		goto out;
	printf("atomic_counter: client %u: %ld fetch-and-add, values strictly increasing"
	       " (first %llu, last %llu)\n", conn.remote.arg, o->iters,
	       (unsigned long long)res[0], (unsigned long long)res[o->iters - 1]);
	if (ex_send_u64(conn.fd, (uint64_t)o->iters) ||
	    ex_send_u64s(conn.fd, res, (size_t)o->iters) ||
	    ex_recv_u64(conn.fd, &verdict))
		goto out;
	if (verdict)
		fprintf(stderr, "the server found a mismatch\n");
	err = verdict ? -1 : 0;
out:
	if (ex_conn_close(&conn))
		err = -1;
	if (mr && ibv_dereg_mr(mr)) {
		fprintf(stderr, "ibv_dereg_mr failed\n");
		err = -1;
	}
	free(res);
	return err;
}

int main(int argc, char **argv)
{
	struct ex_opts o = {
		.dev = "mbcf0",
		.port = 18516,
		.iters = 100,
		.clients = 1,
		.depth = 4,
		.timeout_s = 30,
	};
	struct ex_dev d;
	int err;

	if (ex_parse_opts(argc, argv, &o, AC_USAGE))
		return 2;
	if (ex_dev_open(&d, o.dev, 4 * o.depth))
		return 1;
	if (d.max_rd_atomic && o.depth > (int)d.max_rd_atomic)
		o.depth = (int)d.max_rd_atomic;	/* atomics in flight per QP */
	err = o.host ? ac_client(&o, &d) : ac_server(&o, &d);
	ex_dev_close(&d);
	if (err)
		fprintf(stderr, "atomic_counter: FAILED\n");
	return err ? 1 : 0;
}
