// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * write_pingpong: remote-write ping-pong between two processes.
 *
 *   server:  write_pingpong [-d mbcf0] [-p 18515] [-n 1000] [-s 64] [-m i|p]
 *   client:  write_pingpong [-d mbcf1] [-p 18515] [-n 1000] [-s 64] [-m i|p] SERVER
 *
 * Each side registers one buffer: the first SIZE bytes receive the peer's
 * messages, the next SIZE bytes hold the message it sends.  Message i is
 * the sequence number i (8 bytes, big endian) at both ends of a byte
 * pattern that depends on i and on the sender.  The client writes message
 * i into the server's buffer; the server waits for it, checks every byte
 * and writes its own message i back; the client checks that one and starts
 * i + 1.  The client prints the round-trip latencies.
 *
 * Mode -m i (default): RDMA_WRITE_WITH_IMM, the receiver learns of the
 * message from a receive completion carrying i.  Mode -m p: plain
 * RDMA_WRITE, the receiver polls the last 8 bytes of its buffer for i (mbcf
 * places a message's bytes in order).  Both sides exit 1 on any mismatch.
 */
#include "common.h"

#include <arpa/inet.h>
#include <endian.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define PP_USAGE "[-d DEV] [-p PORT] [-n ITERS] [-s SIZE>=16] [-m i|p] [-t SEC] [SERVER]"
#define PP_RECV_DEPTH 16
#define PP_SEND_DEPTH 16

struct pp {
	struct ex_opts o;
	struct ex_dev dev;
	struct ibv_mr *mr;
	unsigned char *buf;	/* recv area, then send area */
	struct ex_conn conn;	/* socket and QP to the peer */
	int side;		/* 0 server, 1 client: part of the pattern */
	long sends_pending;	/* signaled writes not completed yet */
	long got_seq;		/* highest message seen from the peer, -1: none */
};

static unsigned char pp_byte(long seq, int side, size_t j)
{
	return (unsigned char)(seq * 131 + (long)j * 7 + side * 61 + (long)(j >> 8));
}

/* Message @seq of @side: seq, pattern, seq. */
static void pp_fill(unsigned char *m, size_t size, long seq, int side)
{
	uint64_t be = htobe64((uint64_t)seq);
	size_t j;

	memcpy(m, &be, 8);
	for (j = 8; j < size - 8; j++)
		m[j] = pp_byte(seq, side, j);
	memcpy(m + size - 8, &be, 8);
}

static unsigned char pp_want(size_t size, long seq, int side, size_t j)
{
	uint64_t be = htobe64((uint64_t)seq);
	const unsigned char *b = (const unsigned char *)&be;

	if (j < 8)
		return b[j];
	if (j >= size - 8)
		return b[j - (size - 8)];
	return pp_byte(seq, side, j);
}

/* Bytes of @m that differ from message @seq; the first and last in @lo, @hi. */
static size_t pp_diff(const volatile unsigned char *m, size_t size, long seq, int side,
		      size_t *lo, size_t *hi)
{
	size_t j, bad = 0;

	for (j = 0; j < size; j++) {
		if (m[j] == pp_want(size, seq, side, j))
			continue;
		if (!bad++)
			*lo = j;
		*hi = j;
	}
	return bad;
}

/* Check every byte of the received message; describe any difference. */
static int pp_verify(const unsigned char *m, size_t size, long seq, int side)
{
	size_t lo = 0, hi = 0, bad = pp_diff(m, size, seq, side, &lo, &hi);

	if (!bad)
		return 0;
	fprintf(stderr, "message %ld: %zu bytes differ, first at %zu (got 0x%02x, want 0x%02x;"
		" 0x%02x would be message %ld), last at %zu; buffer at page offset %lu\n",
		seq, bad, lo, m[lo], pp_want(size, seq, side, lo),
		pp_want(size, seq - 1, side, lo), seq - 1, hi,
		(unsigned long)((uintptr_t)m & 4095));
	usleep(100 * 1000);
	bad = pp_diff(m, size, seq, side, &lo, &hi);
	fprintf(stderr, "message %ld: 100 ms later %zu bytes differ\n", seq, bad);
	return -1;
}

static int pp_post_recv(struct pp *p)
{
	struct ibv_recv_wr wr = { .wr_id = 0, .num_sge = 0 }, *bad;
	int err = ibv_post_recv(p->conn.qp, &wr, &bad);

	if (err)
		fprintf(stderr, "ibv_post_recv: %s\n", strerror(err));
	return err ? -1 : 0;
}

static int pp_post_write(struct pp *p, long seq)
{
	size_t size = (size_t)p->o.size;
	struct ibv_send_wr wr = {
		.wr_id = (uint64_t)seq,
		.opcode = p->o.mode == 'p' ? IBV_WR_RDMA_WRITE : IBV_WR_RDMA_WRITE_WITH_IMM,
		.send_flags = IBV_SEND_SIGNALED,
		.imm_data = htonl((uint32_t)seq),
		.wr.rdma = { .remote_addr = p->conn.remote.addr, .rkey = p->conn.remote.rkey },
	};

	pp_fill(p->buf + size, size, seq, p->side);
	if (ex_post_send(p->conn.qp, &wr, p->buf + size, (uint32_t)size, p->mr->lkey))
		return -1;
	p->sends_pending++;
	return 0;
}

/* Handle one completion that is there already; 0 if none, 1 if one, -1. */
static int pp_reap(struct pp *p)
{
	struct ibv_wc wc;
	int n = ibv_poll_cq(p->dev.cq, 1, &wc);

	if (n <= 0) {
		if (n < 0)
			fprintf(stderr, "ibv_poll_cq failed\n");
		return n;
	}
	if (wc.status != IBV_WC_SUCCESS) {
		fprintf(stderr, "completion wr_id %llu opcode %d: %s\n",
			(unsigned long long)wc.wr_id, wc.opcode,
			ibv_wc_status_str(wc.status));
		return -1;
	}
	if (wc.opcode == IBV_WC_RDMA_WRITE) {
		p->sends_pending--;
		return 1;
	}
	if (p->o.mode == 'p' || wc.opcode != IBV_WC_RECV_RDMA_WITH_IMM ||
	    !(wc.wc_flags & IBV_WC_WITH_IMM)) {
		fprintf(stderr, "unexpected completion opcode %d flags 0x%x\n",
			wc.opcode, wc.wc_flags);
		return -1;
	}
	if (ntohl(wc.imm_data) != (uint32_t)(p->got_seq + 1) || wc.byte_len != p->o.size) {
		fprintf(stderr, "write with immediate %u of %u bytes, want %ld of %ld\n",
			ntohl(wc.imm_data), wc.byte_len, p->got_seq + 1, p->o.size);
		return -1;
	}
	p->got_seq++;
	return pp_post_recv(p) ? -1 : 1;
}

/* Last 8 bytes of the receive area, as the peer's write leaves them. */
static long pp_tail_seq(struct pp *p)
{
	const volatile unsigned char *tail = p->buf + p->o.size - 8;
	unsigned char b[8];
	uint64_t be;
	int i;

	for (i = 0; i < 8; i++)		/* volatile: the device writes it */
		b[i] = tail[i];
	__atomic_thread_fence(__ATOMIC_ACQUIRE);
	memcpy(&be, b, 8);
	return (long)be64toh(be);
}

/* Make progress until message @seq has arrived and at most @max_pending
 * of our writes are outstanding; verify the message. */
static int pp_wait(struct pp *p, long seq, long max_pending)
{
	double deadline = ex_now_us() + p->o.timeout_s * 1e6;
	unsigned int spins = 0;

	while (p->got_seq < seq || p->sends_pending > max_pending) {
		int n = pp_reap(p);

		if (n < 0)
			return -1;
		if (p->o.mode == 'p' && p->got_seq < seq && pp_tail_seq(p) == seq)
			p->got_seq = seq;
		if (n || ++spins % 64)
			continue;
		if (ex_now_us() > deadline) {
			fprintf(stderr, "timed out waiting for message %ld (%ld writes pending)\n",
				seq, p->sends_pending);
			return -1;
		}
		sched_yield();	/* the peer may be waiting for this CPU */
	}
	return seq < 0 ? 0 : pp_verify(p->buf, (size_t)p->o.size, seq, !p->side);
}

static int pp_cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static int pp_run(struct pp *p)
{
	long i, n = p->o.iters;
	double *rtt = calloc((size_t)n, sizeof(*rtt));
	uint64_t peer_count;

	if (!rtt) {
		perror("calloc");
		return -1;
	}
	for (i = 0; i < n; i++) {
		double t0 = ex_now_us();

		if (p->side == 1) {	/* client: ping, then wait for the pong */
			if (pp_post_write(p, i) || pp_wait(p, i, PP_SEND_DEPTH - 1))
				goto fail;
		} else {		/* server: wait for the ping, pong */
			if (pp_wait(p, i, PP_SEND_DEPTH - 1) || pp_post_write(p, i))
				goto fail;
		}
		rtt[i] = ex_now_us() - t0;
	}
	/* Our last write must have landed before the peer may tear down. */
	if (pp_wait(p, n - 1, 0))
		goto fail;
	if (ex_send_u64(p->conn.fd, (uint64_t)n) || ex_recv_u64(p->conn.fd, &peer_count))
		goto fail;
	if (peer_count != (uint64_t)n) {
		fprintf(stderr, "peer verified %llu messages, want %ld\n",
			(unsigned long long)peer_count, n);
		goto fail;
	}
	printf("write_pingpong: %s verified %ld messages of %ld bytes (mode %s)\n",
	       p->side ? "client" : "server", n, p->o.size,
	       p->o.mode == 'p' ? "write+poll" : "write_with_imm");
	if (p->side == 1) {
		qsort(rtt, (size_t)n, sizeof(*rtt), pp_cmp_double);
		printf("write_pingpong: round trip min %.1f us median %.1f us max %.1f us\n",
		       rtt[0], rtt[n / 2], rtt[n - 1]);
	}
	free(rtt);
	return 0;
fail:
	free(rtt);
	return -1;
}

static int pp_setup(struct pp *p)
{
	int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
	size_t size = (size_t)p->o.size;
	uint64_t ready;
	int i, err;

	if (ex_dev_open(&p->dev, p->o.dev, 2 * (PP_RECV_DEPTH + PP_SEND_DEPTH)))
		return -1;
	p->buf = calloc(2, size);
	if (!p->buf) {
		perror("calloc");
		return -1;
	}
	/* Nothing received yet: the tail must not look like message 0. */
	memset(p->buf, 0xff, size);
	p->mr = ex_reg_mr(&p->dev, p->buf, 2 * size, access);
	if (!p->mr)
		return -1;
	if (p->side == 0)
		err = ex_serve(&p->dev, &p->o, &p->conn, 1, p->mr, access,
			       PP_SEND_DEPTH, PP_RECV_DEPTH);
	else
		err = ex_join(&p->dev, &p->o, &p->conn, p->mr, access, 0,
			      PP_SEND_DEPTH, PP_RECV_DEPTH);
	if (err)
		return -1;
	for (i = 0; p->o.mode != 'p' && i < PP_RECV_DEPTH; i++)
		if (pp_post_recv(p))
			return -1;
	/* Both QPs ready and receives posted before anyone writes. */
	return ex_send_u64(p->conn.fd, 1) || ex_recv_u64(p->conn.fd, &ready) ? -1 : 0;
}

static int pp_teardown(struct pp *p)
{
	int err = ex_conn_close(&p->conn);

	if (p->mr && ibv_dereg_mr(p->mr)) {
		fprintf(stderr, "ibv_dereg_mr failed\n");
		err = -1;
	}
	ex_dev_close(&p->dev);
	free(p->buf);
	return err;
}

int main(int argc, char **argv)
{
	struct pp p = {
		.o = {
			.dev = "mbcf0",
			.port = 18515,
			.iters = 1000,
			.size = 64,
			.timeout_s = 20,
			.mode = 'i',
		},
		.conn = { .fd = -1 },
		.got_seq = -1,
	};
	int err;

	if (ex_parse_opts(argc, argv, &p.o, PP_USAGE))
		return 2;
	if (p.o.size < 16 || (p.o.mode != 'i' && p.o.mode != 'p')) {
		fprintf(stderr, "usage: %s %s\n", argv[0], PP_USAGE);
		return 2;
	}
	p.side = p.o.host != NULL;
	err = pp_setup(&p) || pp_run(&p);
	err |= pp_teardown(&p);
	if (err)
		fprintf(stderr, "write_pingpong: FAILED\n");
	return err ? 1 : 0;
}
