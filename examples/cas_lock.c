// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * cas_lock: a spin lock built on RDMA compare-and-swap, guarding a plain
 * read-modify-write of a value in the server's memory.
 *
 *   server:  cas_lock [-d mbcf0] [-p 18517] [-c CLIENTS]
 *   client:  cas_lock [-d mbcf1] [-p 18517] [-n K] [-m l|u] SERVER
 *
 * The server registers two 8-byte words, lock and value, both 0, and waits
 * for CLIENTS clients (one QP each; client i gets id i + 1), then starts
 * them at once.  Each client runs K critical sections:
 *
 *   acquire  CAS(lock, 0 -> id), again while it returns nonzero
 *   read     RDMA_READ value
 *   write    RDMA_WRITE value + 1 (not atomic: only the lock protects it)
 *   release  CAS(lock, id -> 0), which must return id
 *
 * At the end the server checks value == the number of critical sections of
 * all clients, and lock == 0.  Without mutual exclusion two clients could
 * read the same value and one increment would be lost: `-m u` (unlocked)
 * skips acquire and release to show it (the server then usually fails).
 * Every process exits 1 on a mismatch.
 */
#include "common.h"

#include <stdio.h>
#include <stdlib.h>

#define CL_USAGE "[-d DEV] [-p PORT] [-c CLIENTS] [-n K] [-m l|u] [-t SEC] [SERVER]"

enum { CL_LOCK, CL_VALUE };	/* the server's words */

/* ---- server --------------------------------------------------------------- */

static int cl_server(const struct ex_opts *o, struct ex_dev *d)
{
	int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ |
		     IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC;
	struct ex_conn *cl = calloc((size_t)o->clients, sizeof(*cl));
	uint64_t *word = NULL, total = 0, spins = 0, v[2], lock, value;
	struct ibv_mr *mr = NULL;
	int c, err = -1;

	if (!cl || posix_memalign((void **)&word, 64, 64)) {
		perror("alloc");
		goto out;
	}
	for (c = 0; c < o->clients; c++)
		cl[c].fd = -1;
	word[CL_LOCK] = word[CL_VALUE] = 0;
	mr = ex_reg_mr(d, word, 64, access);
	if (!mr || ex_serve(d, o, cl, o->clients, mr, access, 1, 1))
		goto out;
	for (c = 0; c < o->clients; c++)
		total += cl[c].remote.arg;	/* its K */
	for (c = 0; c < o->clients; c++)
		if (ex_send_u64(cl[c].fd, total))	/* start */
			goto out;
	/* Each client reports its critical sections and failed acquires. */
	for (c = 0; c < o->clients; c++) {
		if (ex_recv_u64s(cl[c].fd, v, 2))
			goto out;
		if (v[0] != cl[c].remote.arg) {
			fprintf(stderr, "client %d ran %llu critical sections, want %u\n",
				c, (unsigned long long)v[0], cl[c].remote.arg);
			goto out;
		}
		spins += v[1];
	}
	lock = __atomic_load_n(&word[CL_LOCK], __ATOMIC_ACQUIRE);
	value = __atomic_load_n(&word[CL_VALUE], __ATOMIC_ACQUIRE);
	printf("cas_lock: server: value %llu, expected %llu (%d clients); lock %llu;"
	       " %llu failed acquires\n", (unsigned long long)value,
	       (unsigned long long)total, o->clients, (unsigned long long)lock,
	       (unsigned long long)spins);
	err = value == total && lock == 0 ? 0 : -1;
	if (err)
		fprintf(stderr, "value %llu lock %llu, want %llu and 0\n",
			(unsigned long long)value, (unsigned long long)lock,
			(unsigned long long)total);
	err = ex_send_verdicts(cl, o->clients, err);
out:
	err = ex_serve_close(cl, o->clients, mr, err);
	free(word);
	free(cl);
	return err;
}

/* ---- client --------------------------------------------------------------- */

struct cl_client {
	const struct ex_opts *o;
	struct ex_dev *d;
	struct ex_conn conn;
	struct ibv_mr *mr;
	uint64_t *buf;		/* local: CAS result, READ result, WRITE source */
	uint64_t id;
	uint64_t spins;		/* acquires that found the lock taken */
};

/* One work request on the server's word @w, waited for; its 8 bytes land
 * in (or come from) buf[@slot]. */
static int cl_op(struct cl_client *c, enum ibv_wr_opcode op, int w, int slot,
		 uint64_t compare, uint64_t swap)
{
	uint64_t addr = c->conn.remote.addr + (uint64_t)w * 8;
	struct ibv_send_wr wr = {
		.wr_id = (uint64_t)op,
		.opcode = op,
		.send_flags = IBV_SEND_SIGNALED,
	};
	static const enum ibv_wc_opcode done[] = {
		[IBV_WR_RDMA_WRITE] = IBV_WC_RDMA_WRITE,
		[IBV_WR_RDMA_READ] = IBV_WC_RDMA_READ,
		[IBV_WR_ATOMIC_CMP_AND_SWP] = IBV_WC_COMP_SWAP,
	};
	struct ibv_wc wc;

	if (op == IBV_WR_ATOMIC_CMP_AND_SWP) {
		wr.wr.atomic.remote_addr = addr;
		wr.wr.atomic.compare_add = compare;
		wr.wr.atomic.swap = swap;
		wr.wr.atomic.rkey = c->conn.remote.rkey;
	} else {
		wr.wr.rdma.remote_addr = addr;
		wr.wr.rdma.rkey = c->conn.remote.rkey;
	}
	if (ex_post_send(c->conn.qp, &wr, &c->buf[slot], 8, c->mr->lkey) ||
	    ex_poll_one(c->d->cq, &wc, c->o->timeout_s))
		return -1;
	if (wc.opcode != done[op] || wc.wr_id != (uint64_t)op) {
		fprintf(stderr, "completion opcode %d wr_id %llu, want opcode %d\n",
			wc.opcode, (unsigned long long)wc.wr_id, done[op]);
		return -1;
	}
	return 0;
}

enum { CL_SLOT_CAS, CL_SLOT_READ, CL_SLOT_WRITE };

static int cl_critical_section(struct cl_client *c, uint64_t *last)
{
	int locked = c->o->mode != 'u';

	while (locked) {	/* acquire */
		if (cl_op(c, IBV_WR_ATOMIC_CMP_AND_SWP, CL_LOCK, CL_SLOT_CAS, 0, c->id))
			return -1;
		if (c->buf[CL_SLOT_CAS] == 0)
			break;
		if (c->buf[CL_SLOT_CAS] == c->id) {
			fprintf(stderr, "client %llu: lock already ours\n",
				(unsigned long long)c->id);
			return -1;
		}
		c->spins++;
	}
	if (cl_op(c, IBV_WR_RDMA_READ, CL_VALUE, CL_SLOT_READ, 0, 0))
		return -1;
	/* Others only add: the value never goes below what we wrote last. */
	if (locked && c->buf[CL_SLOT_READ] < *last) {
		fprintf(stderr, "client %llu read %llu after writing %llu\n",
			(unsigned long long)c->id,
			(unsigned long long)c->buf[CL_SLOT_READ],
			(unsigned long long)*last);
		return -1;
	}
	*last = c->buf[CL_SLOT_WRITE] = c->buf[CL_SLOT_READ] + 1;
	/* Completed = placed at the server, before the release below. */
	if (cl_op(c, IBV_WR_RDMA_WRITE, CL_VALUE, CL_SLOT_WRITE, 0, 0))
		return -1;
	if (!locked)
		return 0;
	if (cl_op(c, IBV_WR_ATOMIC_CMP_AND_SWP, CL_LOCK, CL_SLOT_CAS, c->id, 0))
		return -1;
	if (c->buf[CL_SLOT_CAS] != c->id) {
		fprintf(stderr, "client %llu: released a lock holding %llu\n",
			(unsigned long long)c->id,
			(unsigned long long)c->buf[CL_SLOT_CAS]);
		return -1;
	}
	return 0;
}

static int cl_client(const struct ex_opts *o, struct ex_dev *d)
{
	struct cl_client c = { .o = o, .d = d, .conn = { .fd = -1 } };
	uint64_t total, verdict = 1, last = 0, report[2];
	int err = -1;
	long i;

	if (posix_memalign((void **)&c.buf, 64, 64)) {
		perror("posix_memalign");
		return -1;
	}
	c.mr = ex_reg_mr(d, c.buf, 64, IBV_ACCESS_LOCAL_WRITE);
	if (!c.mr || ex_join(d, o, &c.conn, NULL, 0, (uint32_t)o->iters, 1, 1) ||
	    ex_recv_u64(c.conn.fd, &total))	/* the start signal */
		goto out;
	c.id = c.conn.remote.arg + 1;
	for (i = 0; i < o->iters; i++)
		if (cl_critical_section(&c, &last))
			goto out;
	printf("cas_lock: client %llu: %ld critical sections, %llu failed acquires\n",
	       (unsigned long long)c.id, o->iters, (unsigned long long)c.spins);
	report[0] = (uint64_t)o->iters;
	report[1] = c.spins;
	if (ex_send_u64s(c.conn.fd, report, 2) || ex_recv_u64(c.conn.fd, &verdict))
		goto out;
	if (verdict)
		fprintf(stderr, "the server found a mismatch\n");
	err = verdict ? -1 : 0;
out:
	if (ex_conn_close(&c.conn))
		err = -1;
	if (c.mr && ibv_dereg_mr(c.mr)) {
		fprintf(stderr, "ibv_dereg_mr failed\n");
		err = -1;
	}
	free(c.buf);
	return err;
}

int main(int argc, char **argv)
{
	struct ex_opts o = {
		.dev = "mbcf0",
		.port = 18517,
		.iters = 50,
		.clients = 1,
		.timeout_s = 30,
		.mode = 'l',
	};
	struct ex_dev d;
	int err;

	if (ex_parse_opts(argc, argv, &o, CL_USAGE))
		return 2;
	if (o.mode != 'l' && o.mode != 'u') {
		fprintf(stderr, "usage: %s %s\n", argv[0], CL_USAGE);
		return 2;
	}
	if (ex_dev_open(&d, o.dev, 16))
		return 1;
	err = o.host ? cl_client(&o, &d) : cl_server(&o, &d);
	ex_dev_close(&d);
	if (err)
		fprintf(stderr, "cas_lock: FAILED\n");
	return err ? 1 : 0;
}
