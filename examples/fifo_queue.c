// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * fifo_queue: many producers, one consumer, through MBCF's memory-based
 * FIFO (the mbcf direct verbs, infiniband/mbcfdv.h; link with -lmbcf).
 *
 *   consumer:  fifo_queue [-d mbcf0] [-p 18518] [-c PRODUCERS] [-s AREA]
 *   producer:  fifo_queue [-d mbcf1] [-p 18518] [-n RECORDS] [-w DEPTH] SERVER
 *
 * The consumer makes one FIFO (a record area of AREA bytes, default 4096,
 * a power of two) in its own memory, connects one RC QP per producer and
 * hands each the FIFO's key.  Each producer pushes RECORDS records, up to
 * DEPTH in flight, with mbcfdv_wr_fifo_push: record i of producer p is 16
 * to 64 bytes, p and i (big endian) then a byte pattern of p and i.  The
 * consumer's kernel appends each record as it arrives; no receive is
 * posted for it.  The consumer pops them with mbcfdv_fifo_pop and checks
 * each byte, that the QP it came through is producer p's, and that each
 * producer's records arrive exactly once and in order; the queue must be
 * empty afterwards.  The area is far smaller than the traffic: a full
 * FIFO stops the producers until the consumer has popped (nothing lost).
 * Every process exits 1 on a mismatch.
 *
 * The same queue with plain verbs is an SRQ that every producer's QP
 * SENDs into (docs/porting.md, "The examples").
 */
#include "common.h"

#include <endian.h>
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <infiniband/mbcfdv.h>

#define FQ_USAGE "[-d DEV] [-p PORT] [-c PRODUCERS] [-s AREA] [-n RECORDS] [-w DEPTH] [-t SEC] [SERVER]"
#define FQ_MAX_REC 64

/* Record @seq of producer @id: its length, and its bytes into @r. */
static uint32_t fq_record(unsigned char *r, uint32_t id, uint64_t seq)
{
	uint32_t len = 16 + (uint32_t)((seq * 7 + id * 13) % (FQ_MAX_REC - 16 + 1));
	uint32_t id_be = htobe32(id), j;
	uint64_t seq_be = htobe64(seq);

	memcpy(r, &id_be, 4);
	memcpy(r + 4, &seq_be, 8);
	for (j = 12; j < len; j++)
		r[j] = (unsigned char)(seq * 31 + id * 101 + j);
	return len;
}

/* ---- consumer ---------------------------------------------------------------- */

struct fq_consumer {
	struct ex_conn *cl;
	int n;
	uint64_t *next;		/* per producer: the sequence number due */
	uint64_t total, popped;
};

/* Check one popped record against what producer @c must send next. */
static int fq_check(struct fq_consumer *q, const unsigned char *rec, uint32_t len,
		    uint32_t qpn)
{
	unsigned char want[FQ_MAX_REC];
	uint32_t id_be, wlen;
	uint64_t seq_be;
	int c;

	for (c = 0; c < q->n && q->cl[c].qp->qp_num != qpn; c++)
		;
	if (c == q->n || len < 12) {
		fprintf(stderr, "record of %u bytes through QP %u: no producer's\n", len, qpn);
		return -1;
	}
	memcpy(&id_be, rec, 4);
	memcpy(&seq_be, rec + 4, 8);
	if (be32toh(id_be) != (uint32_t)c || be64toh(seq_be) != q->next[c]) {
		fprintf(stderr, "through producer %d's QP: record %llu of producer %u,"
			" want record %llu of producer %d\n", c,
			(unsigned long long)be64toh(seq_be), be32toh(id_be),
			(unsigned long long)q->next[c], c);
		return -1;
	}
	wlen = fq_record(want, (uint32_t)c, q->next[c]);
	if (len != wlen || memcmp(rec, want, len)) {
		fprintf(stderr, "producer %d record %llu: %u bytes, want %u, or bytes differ\n",
			c, (unsigned long long)q->next[c], len, wlen);
		return -1;
	}
	if (q->next[c] >= q->cl[c].remote.arg) {
		fprintf(stderr, "producer %d: record beyond its %u\n", c, q->cl[c].remote.arg);
		return -1;
	}
	q->next[c]++;
	q->popped++;
	return 0;
}

/* Pop until every producer's records are in, then find the queue empty. */
static int fq_consume(struct fq_consumer *q, struct mbcfdv_fifo *f, int timeout_s)
{
	unsigned char rec[FQ_MAX_REC];
	double idle_since = ex_now_us();
	uint32_t len, qpn;
	int err, c;

	while (q->popped < q->total) {
		err = mbcfdv_fifo_pop(f, rec, sizeof(rec), &len, &qpn);
		if (!err) {
			if (fq_check(q, rec, len, qpn))
				return -1;
			idle_since = ex_now_us();
			continue;
		}
		if (err != EAGAIN) {
			fprintf(stderr, "mbcfdv_fifo_pop: %s\n", strerror(err));
			return -1;
		}
		if (ex_now_us() - idle_since > timeout_s * 1e6) {
			fprintf(stderr, "timed out with %llu of %llu records\n",
				(unsigned long long)q->popped, (unsigned long long)q->total);
			return -1;
		}
		sched_yield();	/* a producer may be waiting for this CPU */
	}
	/* Each producer saw its last completion (its record in the queue)
	 * before reporting: nothing more may be there. */
	for (c = 0; c < q->n; c++) {
		uint64_t pushed;

		if (ex_recv_u64(q->cl[c].fd, &pushed))
			return -1;
		if (pushed != q->cl[c].remote.arg) {
			fprintf(stderr, "producer %d pushed %llu records, announced %u\n", c,
				(unsigned long long)pushed, q->cl[c].remote.arg);
			return -1;
		}
	}
	err = mbcfdv_fifo_pop(f, rec, sizeof(rec), &len, &qpn);
	if (err != EAGAIN) {
		fprintf(stderr, "after the last record: pop %s, want EAGAIN\n", strerror(err));
		return -1;
	}
	printf("fifo_queue: consumer: %llu records from %d producers, each exactly once,"
	       " in order per producer\n", (unsigned long long)q->popped, q->n);
	return 0;
}

static int fq_consumer(const struct ex_opts *o, struct ex_dev *d)
{
	struct fq_consumer q = { .n = o->clients };
	size_t length = MBCFDV_FIFO_CTRL_LEN + (size_t)o->size;
	struct mbcfdv_fifo *f = NULL;
	void *mem = NULL;
	int c, err = -1;

	q.cl = calloc((size_t)q.n, sizeof(*q.cl));
	q.next = calloc((size_t)q.n, sizeof(*q.next));
	if (!q.cl || !q.next || posix_memalign(&mem, 64, length)) {
		perror("alloc");
		goto out;
	}
	for (c = 0; c < q.n; c++)
		q.cl[c].fd = -1;
	/* The FIFO belongs to d->pd: pushes through QPs of that PD reach it. */
	f = mbcfdv_create_fifo(d->pd, mem, length, 0);
	if (!f) {
		fprintf(stderr, "mbcfdv_create_fifo(%zu bytes): %s\n", length, strerror(errno));
		goto out;
	}
	if (ex_serve(d, o, q.cl, q.n, NULL, 0, 1, 1))
		goto out;
	for (c = 0; c < q.n; c++)
		q.total += q.cl[c].remote.arg;	/* its RECORDS */
	/* The key is the producers' start signal. */
	for (c = 0; c < q.n; c++)
		if (ex_send_u64(q.cl[c].fd, f->key))
			goto out;
	err = fq_consume(&q, f, o->timeout_s);
	err = ex_send_verdicts(q.cl, q.n, err);
out:
	err = ex_serve_close(q.cl, q.n, NULL, err);
	if (f && mbcfdv_destroy_fifo(f)) {
		fprintf(stderr, "mbcfdv_destroy_fifo failed\n");
		err = -1;
	}
	free(mem);
	free(q.next);
	free(q.cl);
	return err;
}

/* ---- producer ---------------------------------------------------------------- */

/* Push RECORDS records to @key, up to DEPTH in flight, each from its own
 * slot of @buf (a slot is reused once its push has completed). */
static int fq_produce(const struct ex_opts *o, struct ex_dev *d, struct ibv_qp *qp,
		      struct ibv_mr *mr, uint32_t id, uint32_t key)
{
	struct ibv_qp_ex *qx = ibv_qp_to_qp_ex(qp);
	unsigned char *buf = mr->addr;
	long posted = 0, done = 0;
	struct ibv_wc wc;

	while (done < o->iters) {
		while (posted < o->iters && posted - done < o->depth) {
			unsigned char *slot = buf + (posted % o->depth) * FQ_MAX_REC;
			uint32_t len = fq_record(slot, id, (uint64_t)posted);
			int err;

			ibv_wr_start(qx);
			qx->wr_id = (uint64_t)posted;
			qx->wr_flags = IBV_SEND_SIGNALED;
			mbcfdv_wr_fifo_push(qx, key);
			ibv_wr_set_sge(qx, mr->lkey, (uintptr_t)slot, len);
			err = ibv_wr_complete(qx);
			if (err) {
				fprintf(stderr, "push %ld: %s\n", posted, strerror(err));
				return -1;
			}
			posted++;
		}
		/* A full FIFO stops this QP: completions pause, then resume. */
		if (ex_poll_one(d->cq, &wc, o->timeout_s))
			return -1;
		if (wc.opcode != IBV_WC_SEND || wc.wr_id != (uint64_t)done) {
			fprintf(stderr, "completion opcode %d wr_id %llu, want push %ld\n",
				wc.opcode, (unsigned long long)wc.wr_id, done);
			return -1;
		}
		done++;
	}
	return 0;
}

static int fq_producer(const struct ex_opts *o, struct ex_dev *d)
{
	size_t len = (size_t)o->depth * FQ_MAX_REC;
	struct ex_conn conn = { .fd = -1 };
	struct ibv_mr *mr = NULL;
	uint64_t key, verdict = 1;
	void *buf = calloc(1, len);
	int err = -1;

	if (!buf) {
		perror("calloc");
		return -1;
	}
	mr = ex_reg_mr(d, buf, len, IBV_ACCESS_LOCAL_WRITE);
	/* mbcfdv_wr_fifo_push goes through the work-request API. */
	d->send_ops_flags = IBV_QP_EX_WITH_SEND;
	if (!mr || ex_join(d, o, &conn, NULL, 0, (uint32_t)o->iters, (uint32_t)o->depth, 1) ||
	    ex_recv_u64(conn.fd, &key))
		goto out;
	if (fq_produce(o, d, conn.qp, mr, conn.remote.arg, (uint32_t)key))
		goto out;
	printf("fifo_queue: producer %u: %ld records pushed, every push completed\n",
	       conn.remote.arg, o->iters);
	if (ex_send_u64(conn.fd, (uint64_t)o->iters) || ex_recv_u64(conn.fd, &verdict))
		goto out;
	if (verdict)
		fprintf(stderr, "the consumer found a mismatch\n");
	err = verdict ? -1 : 0;
out:
	if (ex_conn_close(&conn))
		err = -1;
	if (mr && ibv_dereg_mr(mr)) {
		fprintf(stderr, "ibv_dereg_mr failed\n");
		err = -1;
	}
	free(buf);
	return err;
}

int main(int argc, char **argv)
{
	struct ex_opts o = {
		.dev = "mbcf0",
		.port = 18518,
		.iters = 500,
		.size = 4096,
		.clients = 1,
		.depth = 8,
		.timeout_s = 30,
	};
	struct ex_dev d;
	int err;

	if (ex_parse_opts(argc, argv, &o, FQ_USAGE))
		return 2;
	/* A record (8 bytes of header, up to 64 of payload) may take at most
	 * half the area. */
	if (o.size < 256 || (o.size & (o.size - 1))) {
		fprintf(stderr, "usage: %s %s (AREA a power of two, at least 256)\n",
			argv[0], FQ_USAGE);
		return 2;
	}
	if (ex_dev_open(&d, o.dev, 2 * o.depth + 2 * o.clients + 8))
		return 1;
	err = o.host ? fq_producer(&o, &d) : fq_consumer(&o, &d);
	ex_dev_close(&d);
	if (err)
		fprintf(stderr, "fifo_queue: FAILED\n");
	return err ? 1 : 0;
}
