// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Hostile wire at a real FIFO: forged FIFO_PUSH frames (docs/protocol.md
 * 2.4, 16.3) from a fake peer, as in wire_attack.c, at RC QPs on mbcf0
 * whose PD owns live FIFOs.  The FIFO owner is this program, so the keys
 * the attacker names are the ones it created (as wire_attack.c knows its
 * own MRs' keys).  Each case starts a QP connected to a MAC nobody owns
 * and a QP number we choose, sends frames from an AF_PACKET socket on
 * veth1 (ns1) and catches mbcf0's replies there; then asserts exactly
 *   - the replies (opcode, status, ack_psn), in order, and no other,
 *   - mbcf0's counter deltas (every one in ctr[], 0 where not named),
 *   - every byte of every FIFO region (control block and record area,
 *     against a model: only accepted records change it), the guards
 *     around each, and a plain MR that must not be written,
 *   - the QP's state (ERR after a NAK, else as it was), no completion and
 *     no async event (a NAK raises none: tq_end).
 * Run by tests/vm/wire.sh after wire_attack (mbcf0 idle otherwise).
 *   mbcf_wire_fifo [CASE...]
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/if_packet.h>
#include <net/if.h>
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "vmprog.h"
#include "infiniband/mbcfdv.h"

#define ETH_P_MBCF	0x88B5
#define OP_WRITE	0x01
#define OP_FIFO_PUSH	0x0b
#define OP_ACK		0x10
#define OP_LOST		0x11
#define OP_STOP		0x12
#define FL_ACKREQ	0x01
#define FL_FIRST	0x02
#define FL_LAST		0x04
#define FL_SOL		0x08
#define READY		0x80000000u

static const uint8_t PEER[6] = { 0x02, 0x4d, 0x42, 0x43, 0x46, 0x44 };
static struct vp_dev D;			/* mbcf0 */
static struct ibv_pd *pd2;
static int sock;			/* veth1 in ns1: sends and receives */
static uint64_t rng = 0x44f1f0;
static uint32_t next_fqpn = 0x4400;


/* ---- frames ------------------------------------------------------------------ */

static void put32(uint8_t *p, uint32_t v)
{
	v = htonl(v);
	memcpy(p, &v, 4);
}

static uint32_t get32(const uint8_t *p)
{
	uint32_t v;

	memcpy(&v, p, 4);
	return ntohl(v);
}

struct tq {
	struct ibv_qp *qp;
	struct ibv_cq *cq;
	uint32_t fqpn, rpsn, spsn;	/* its peer; what it expects, sends */
};

/* A FIFO_PUSH of paylen (header) carrying `carry` payload bytes. */
static size_t push_frame(uint8_t *b, const struct tq *q, uint32_t psn,
			 uint8_t flags, uint32_t fkey, uint16_t paylen,
			 const uint8_t *pay, size_t carry)
{
	memcpy(b, D.mac, 6);
	memcpy(b + 6, PEER, 6);
	b[12] = ETH_P_MBCF >> 8;
	b[13] = ETH_P_MBCF & 0xff;
	b += 14;
	memset(b, 0, 28);
	b[0] = 2;
	b[1] = OP_FIFO_PUSH;
	b[2] = flags;
	put32(b + 4, q->qp->qp_num);
	put32(b + 8, q->fqpn);
	put32(b + 12, psn & 0xffffff);
	put32(b + 16, q->spsn);		/* acks nothing it has not sent */
	b[20] = paylen >> 8;
	b[21] = paylen & 0xff;
	put32(b + 24, fkey);
	memcpy(b + 28, pay, carry);
	return 14 + 28 + carry;
}

static void tx(const uint8_t *b, size_t len)
{
	if (send(sock, b, len, 0) != (ssize_t)len)
		vp_die("send: %s", strerror(errno));
}

/* One well-formed push: one frame, FIRST|LAST, flags added. */
static void push(const struct tq *q, uint32_t psn, uint8_t flags, uint32_t fkey,
		 const uint8_t *pay, uint16_t len)
{
	uint8_t b[9100];

	tx(b, push_frame(b, q, psn, FL_FIRST | FL_LAST | flags, fkey, len, pay, len));
}

/* The next reply to q within secs: 0 and op/status/ack, or -1. */
static int reply(const struct tq *q, double secs, uint8_t *op, uint8_t *st, uint32_t *ack)
{
	double end = vp_now() + secs * vp_time_scale();
	uint8_t b[9100];
	ssize_t n;

	while (vp_now() < end) {
		struct pollfd p = { sock, POLLIN, 0 };

		if (poll(&p, 1, 20) <= 0)
			continue;
		n = recv(sock, b, sizeof(b), 0);
		if (n < 14 + 24 || memcmp(b, PEER, 6) || memcmp(b + 6, D.mac, 6) ||
		    get32(b + 14 + 4) != q->fqpn)
			continue;
		*op = b[15];
		*st = b[17];
		*ack = get32(b + 14 + 16);
		return 0;
	}
	return -1;
}

static void expect_reply(const struct tq *q, uint8_t op, uint8_t st, uint32_t ack,
			 const char *what)
{
	uint8_t o, s;
	uint32_t a;

	if (reply(q, 3, &o, &s, &a))
		vc_fail("%s: no reply (expected op %#x status %u ack %u)", what, op, st, ack);
	else if (o != op || s != st || a != (ack & 0xffffff))
		vc_fail("%s: reply op %#x status %u ack %u, expected op %#x status %u ack %u",
			what, o, s, a, op, st, ack & 0xffffff);
}

static void expect_quiet(const struct tq *q, const char *what)
{
	uint8_t o, s;
	uint32_t a;

	if (!reply(q, 0.3, &o, &s, &a))
		vc_fail("%s: unexpected reply op %#x status %u ack %u", what, o, s, a);
}

/* ---- counters (mbcf0, exact) ---------------------------------------------------- */

enum { RX, ACC, ACKT, NAKT, LOSTT, STOPT, GOT, TXF, MALF, TRUNC, BLEN, WQP,
       OOS, DUP, RNR, QPERR, BADACK, REMERR, RCOMP, SCOMP, NCTR };
static const char *const ctr_name[NCTR] = {
	"rx_frames", "rx_accepted", "ack_tx", "nak_tx", "lost_tx", "stop_tx",
	"go_tx", "tx_frames", "drop_malformed", "drop_truncated",
	"drop_bad_length", "drop_wrong_qp", "drop_out_of_sequence",
	"drop_duplicate", "drop_rnr_stopped", "drop_qp_error", "drop_bad_ack",
	"remote_errors", "recv_completions", "send_completions",
};
static uint64_t ctr0[NCTR];
static int64_t want[NCTR];

static void ctr_read(uint64_t *v)
{
	char path[160];
	unsigned long long x;
	FILE *f;
	int i;

	usleep(20000);	/* the RDMA core caches them 10 ms */
	for (i = 0; i < NCTR; i++) {
		snprintf(path, sizeof(path), "/sys/class/infiniband/%s/ports/1/hw_counters/%s",
			 D.name, ctr_name[i]);
		f = fopen(path, "r");
		if (!f || fscanf(f, "%llu", &x) != 1)
			vp_die("read %s", path);
		fclose(f);
		v[i] = x;
	}
}

/* The case's frames moved exactly want[] (and the replies tx_frames). */
static void ctr_check(void)
{
	uint64_t v[NCTR];
	int i;

	want[TXF] = want[ACKT] + want[NAKT] + want[LOSTT] + want[STOPT] + want[GOT];
	ctr_read(v);
	for (i = 0; i < NCTR; i++)
		if ((int64_t)(v[i] - ctr0[i]) != want[i])
			vc_fail("%s: +%lld, expected +%lld", ctr_name[i],
				(long long)(v[i] - ctr0[i]), (long long)want[i]);
	memcpy(ctr0, v, sizeof(v));
	memset(want, 0, sizeof(want));
}

/* ---- FIFOs and their model ---------------------------------------------------- */

struct mf {
	struct vp_gbuf g;
	struct mbcfdv_fifo *f;
	uint8_t *model;
	uint32_t size;
	uint64_t tail;		/* the model's */
};

static struct mf F, FS, FF, FO;	/* main, small (size/2), flood, other PD */
static struct vp_gbuf plain;	/* a plain MR, remote write, on D.pd */
static uint32_t stale_key;	/* a FIFO created and destroyed */

static void mf_new(struct mf *m, struct ibv_pd *pd, uint32_t size)
{
	m->g = vp_gbuf_new(pd, 128 + size, 64, -1);
	m->f = mbcfdv_create_fifo(pd, m->g.p, 128 + size, 0);
	m->model = calloc(1, 128 + size);
	if (!m->f || !m->model)
		vp_die("setup: mbcfdv_create_fifo: %s", strerror(errno));
	m->size = size;
}

/* The model appends what 16.2 says: a record of len at the tail. */
static void mf_append(struct mf *m, uint32_t qpn, const uint8_t *pay, uint32_t len)
{
	uint32_t rec = (8 + len + 7) & ~7u, off = m->tail & (m->size - 1);
	uint32_t word = READY | len;

	if (off + rec > m->size)
		vp_die("model: wrap not modelled");
	memcpy(m->model + 128 + off, &word, 4);
	memcpy(m->model + 128 + off + 4, &qpn, 4);
	memcpy(m->model + 128 + off + 8, pay, len);
	m->tail += rec;
	memcpy(m->model, &m->tail, 8);
}

/* Every byte of every region against the model; the guards; the MR. */
static void mem_check(const char *what)
{
	struct mf *all[] = { &F, &FS, &FF, &FO };
	size_t i, j;

	for (i = 0; i < 4; i++) {
		for (j = 0; j < 128 + all[i]->size; j++)
			if (all[i]->g.p[j] != all[i]->model[j]) {
				vc_fail("%s: FIFO %zu byte %zu is %#x, model %#x", what, i, j,
					all[i]->g.p[j], all[i]->model[j]);
				break;
			}
		vp_gbuf_check_guards(&all[i]->g, 64, what);
	}
	if (vp_diff_byte(plain.p, 4096, 0x5e) >= 0)
		vc_fail("%s: plain MR written", what);
}

/* ---- QPs ---------------------------------------------------------------------- */

static void to(struct ibv_qp *qp, struct ibv_qp_attr *a, int mask)
{
	if (ibv_modify_qp(qp, a, mask))
		vp_die("setup: modify_qp: %s", strerror(errno));
}

/* A QP of pd on D, in state st (RESET, INIT or RTS), peer the fake one. */
static void tq_new(struct tq *q, struct ibv_pd *pd, enum ibv_qp_state st)
{
	struct ibv_qp_init_attr ia = {
		.qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1,
			 .max_recv_sge = 1 },
	};
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .port_num = 1,
				 .qp_access_flags = IBV_ACCESS_REMOTE_WRITE };

	memset(q, 0, sizeof(*q));
	q->cq = ibv_create_cq(D.ctx, 16, NULL, NULL, 0);
	ia.send_cq = ia.recv_cq = q->cq;
	q->qp = q->cq ? ibv_create_qp(pd, &ia) : NULL;
	if (!q->qp)
		vp_die("setup: QP: %s", strerror(errno));
	q->fqpn = next_fqpn++;
	q->rpsn = vp_rand_below(&rng, 1 << 24);
	q->spsn = vp_rand_below(&rng, 1 << 24);
	if (st == IBV_QPS_RESET)
		return;
	to(q->qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
	if (st == IBV_QPS_INIT)
		return;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_4096;
	a.dest_qp_num = q->fqpn;
	a.rq_psn = q->rpsn;
	a.max_dest_rd_atomic = 1;
	a.min_rnr_timer = 1;
	a.ah_attr.is_global = 1;
	a.ah_attr.grh.hop_limit = 1;
	a.ah_attr.port_num = 1;
	a.ah_attr.grh.dgid.raw[0] = 0xfe;
	a.ah_attr.grh.dgid.raw[1] = 0x80;
	a.ah_attr.grh.dgid.raw[8] = PEER[0] ^ 2;
	a.ah_attr.grh.dgid.raw[9] = PEER[1];
	a.ah_attr.grh.dgid.raw[10] = PEER[2];
	a.ah_attr.grh.dgid.raw[11] = 0xff;
	a.ah_attr.grh.dgid.raw[12] = 0xfe;
	memcpy(&a.ah_attr.grh.dgid.raw[13], PEER + 3, 3);
	to(q->qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
	   IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = q->spsn;
	a.timeout = 20;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.max_rd_atomic = 1;
	to(q->qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
	   IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC);
}

/*
 * State, no completion, no async event; then destroy.  A QP failed by a
 * NAK goes to ERR without QP_FATAL: the module raises that only for
 * local faults (docs/design.md, qp->pend; ring_attack.c pins the same).
 */
static void tq_end(struct tq *q, enum ibv_qp_state st, const char *what)
{
	struct ibv_async_event ev;
	struct pollfd p = { D.ctx->async_fd, POLLIN, 0 };
	struct ibv_wc wc;

	vc_expect_qp_state(q->qp, what, st, "after the frames");
	while (poll(&p, 1, (int)(200 * vp_time_scale())) > 0 &&
	       !ibv_get_async_event(D.ctx, &ev)) {
		vc_fail("%s: async event %d", what, ev.event_type);
		ibv_ack_async_event(&ev);
	}
	if (ibv_poll_cq(q->cq, 1, &wc))
		vc_fail("%s: a completion (status %d)", what, wc.status);
	if (ibv_destroy_qp(q->qp) || ibv_destroy_cq(q->cq))
		vc_fail("%s: destroy: %s", what, strerror(errno));
}

/* ---- the cases --------------------------------------------------------------- */

static uint8_t pay[2048];

/* A refused key: NAK REMOTE_ACCESS_ERROR, QP fails; the resend NAKed again. */
static void refused(uint32_t key, struct ibv_pd *pd, const char *what)
{
	struct tq q;

	tq_new(&q, pd, IBV_QPS_RTS);
	push(&q, q.rpsn, 0, key, pay, 40);
	expect_reply(&q, OP_ACK, 1, q.rpsn, what);
	push(&q, q.rpsn, FL_ACKREQ, key, pay, 40);	/* a retransmission */
	expect_reply(&q, OP_ACK, 1, q.rpsn, what);
	expect_quiet(&q, what);
	want[RX] = 2, want[REMERR] = 1, want[NAKT] = 2, want[QPERR] = 1;
	ctr_check();
	mem_check(what);
	tq_end(&q, IBV_QPS_ERR, what);
}

static void case_keys(void)
{
	uint32_t unknown;

	do
		unknown = (uint32_t)vp_rand(&rng);
	while (unknown == F.f->key || unknown == FS.f->key || unknown == FF.f->key ||
	       unknown == FO.f->key || unknown == stale_key || unknown == plain.mr->rkey);
	refused(unknown, D.pd, "unknown key");
	refused(stale_key, D.pd, "destroyed FIFO's key");
	refused(plain.mr->rkey, D.pd, "plain MR's rkey");
	refused(FO.f->key, D.pd, "another PD's FIFO");
	refused(F.f->key, pd2, "FIFO of another PD than the QP's");
	refused(F.f->key ^ 0x01, D.pd, "FIFO key, another generation");
}

/* Accepted pushes, 0 bytes included, and the size/2 bound. */
static void case_accept(void)
{
	struct tq q;
	uint32_t n = 0;

	tq_new(&q, D.pd, IBV_QPS_RTS);
	push(&q, q.rpsn, FL_ACKREQ, F.f->key, pay, 40);
	mf_append(&F, q.qp->qp_num, pay, 40);
	expect_reply(&q, OP_ACK, 0, q.rpsn + 1, "40 bytes");
	push(&q, q.rpsn + 1, FL_ACKREQ, F.f->key, pay, 0);
	mf_append(&F, q.qp->qp_num, pay, 0);
	expect_reply(&q, OP_ACK, 0, q.rpsn + 2, "0 bytes");
	/* FS: 1024 bytes; 504 + 8 = size/2 fits, one more byte does not */
	push(&q, q.rpsn + 2, FL_ACKREQ, FS.f->key, pay + 1, 504);
	mf_append(&FS, q.qp->qp_num, pay + 1, 504);
	expect_reply(&q, OP_ACK, 0, q.rpsn + 3, "size/2");
	n = 3;
	want[RX] = 3, want[ACC] = 3, want[ACKT] = 3;
	ctr_check();
	mem_check("accepted");
	push(&q, q.rpsn + n, 0, FS.f->key, pay, 505);
	expect_reply(&q, OP_ACK, 2, q.rpsn + n, "size/2 + 1");
	expect_quiet(&q, "size/2 + 1");
	want[RX] = 1, want[REMERR] = 1, want[NAKT] = 1;
	ctr_check();
	mem_check("size/2 + 1");
	tq_end(&q, IBV_QPS_ERR, "size/2 + 1");
}

/* Frames the codec drops: nothing changes, the QP takes the next push. */
static void case_codec(void)
{
	uint8_t b[9100];
	struct tq q;
	size_t n;

	tq_new(&q, D.pd, IBV_QPS_RTS);
	/* paylen 100, 60 bytes there; paylen 1472 with 8 there */
	tx(b, push_frame(b, &q, q.rpsn, FL_FIRST | FL_LAST | FL_ACKREQ, F.f->key, 100, pay, 60));
	tx(b, push_frame(b, &q, q.rpsn, FL_FIRST | FL_LAST | FL_ACKREQ, F.f->key, 1472, pay, 8));
	/* 26 bytes: shorter than the 28-byte header (veth pads nothing) */
	n = push_frame(b, &q, q.rpsn, FL_FIRST | FL_LAST | FL_ACKREQ, F.f->key, 0, pay, 0);
	tx(b, n - 2);
	want[TRUNC] = 3;
	/* paylen 10, 100 bytes there; paylen 1 on a frame past 46 */
	tx(b, push_frame(b, &q, q.rpsn, FL_FIRST | FL_LAST | FL_ACKREQ, F.f->key, 10, pay, 100));
	tx(b, push_frame(b, &q, q.rpsn, FL_FIRST | FL_LAST | FL_ACKREQ, F.f->key, 1, pay, 60));
	want[BLEN] = 2;
	/* a record is one frame: FIRST only, LAST only, none; SOLICITED;
	 * a status byte; the top byte of the psn */
	tx(b, push_frame(b, &q, q.rpsn, FL_FIRST | FL_ACKREQ, F.f->key, 40, pay, 40));
	tx(b, push_frame(b, &q, q.rpsn, FL_LAST | FL_ACKREQ, F.f->key, 40, pay, 40));
	tx(b, push_frame(b, &q, q.rpsn, FL_ACKREQ, F.f->key, 40, pay, 40));
	tx(b, push_frame(b, &q, q.rpsn, FL_FIRST | FL_LAST | FL_SOL, F.f->key, 40, pay, 40));
	push_frame(b, &q, q.rpsn, FL_FIRST | FL_LAST | FL_ACKREQ, F.f->key, 40, pay, 40);
	b[14 + 3] = 1;
	tx(b, 14 + 28 + 40);
	push_frame(b, &q, q.rpsn, FL_FIRST | FL_LAST | FL_ACKREQ, F.f->key, 40, pay, 40);
	b[14 + 12] = 1;
	tx(b, 14 + 28 + 40);
	want[MALF] = 6;
	expect_quiet(&q, "codec drops");
	want[RX] = 11;
	ctr_check();
	mem_check("codec drops");
	/* the QP is untouched: psn rpsn is still the next */
	push(&q, q.rpsn, FL_ACKREQ, F.f->key, pay + 2, 24);
	mf_append(&F, q.qp->qp_num, pay + 2, 24);
	expect_reply(&q, OP_ACK, 0, q.rpsn + 1, "push after the drops");
	want[RX] = 1, want[ACC] = 1, want[ACKT] = 1;
	ctr_check();
	mem_check("push after the drops");
	tq_end(&q, IBV_QPS_RTS, "codec drops");
}

/* Sequence: ahead (LOST), duplicates never appended twice, mid-message. */
static void case_seq(void)
{
	uint8_t b[9100];
	struct tq q;

	tq_new(&q, D.pd, IBV_QPS_RTS);
	push(&q, q.rpsn + 5, FL_ACKREQ, F.f->key, pay, 40);
	expect_reply(&q, OP_LOST, 0, q.rpsn, "ahead");
	push(&q, q.rpsn, FL_ACKREQ, F.f->key, pay + 3, 16);
	mf_append(&F, q.qp->qp_num, pay + 3, 16);
	expect_reply(&q, OP_ACK, 0, q.rpsn + 1, "in sequence");
	push(&q, q.rpsn, FL_ACKREQ, F.f->key, pay + 3, 16);	/* replayed */
	expect_reply(&q, OP_ACK, 0, q.rpsn + 1, "replayed");
	push(&q, q.rpsn - 1000, 0, F.f->key, pay, 16);		/* far behind */
	expect_quiet(&q, "duplicates");
	want[RX] = 4, want[OOS] = 1, want[LOSTT] = 1, want[ACC] = 1, want[ACKT] = 2,
	want[DUP] = 2;
	ctr_check();
	mem_check("sequence");
	/* a WRITE's FIRST without LAST, then a push inside that message */
	push_frame(b, &q, q.rpsn + 1, FL_FIRST, 0, 8, pay, 8);
	b[14 + 1] = OP_WRITE;
	memmove(b + 14 + 36, b + 14 + 28, 8);
	memset(b + 14 + 24, 0, 12);
	{
		uint64_t va = (uintptr_t)plain.p;

		put32(b + 14 + 24, (uint32_t)(va >> 32));
		put32(b + 14 + 28, (uint32_t)va);
		put32(b + 14 + 32, plain.mr->rkey);
	}
	memset(b + 14 + 36, 0x5e, 8);		/* the MR's own bytes */
	tx(b, 14 + 36 + 8);
	push(&q, q.rpsn + 2, 0, F.f->key, pay, 16);
	expect_reply(&q, OP_ACK, 2, q.rpsn + 2, "push inside a WRITE");
	expect_quiet(&q, "push inside a WRITE");
	want[RX] = 2, want[ACC] = 1, want[REMERR] = 1, want[NAKT] = 1;
	ctr_check();
	mem_check("push inside a WRITE");
	tq_end(&q, IBV_QPS_ERR, "push inside a WRITE");
}

/* QPs not connected (RESET, INIT, moved to ERR), and the wrong source QP. */
static void case_state(void)
{
	static const enum ibv_qp_state st[] = { IBV_QPS_RESET, IBV_QPS_INIT, IBV_QPS_ERR };
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_ERR };
	struct tq q;
	size_t i;

	for (i = 0; i < 3; i++) {
		tq_new(&q, D.pd, st[i] == IBV_QPS_ERR ? IBV_QPS_RTS : st[i]);
		if (st[i] == IBV_QPS_ERR)
			to(q.qp, &a, IBV_QP_STATE);
		push(&q, q.rpsn, FL_ACKREQ, F.f->key, pay, 40);
		expect_quiet(&q, vp_qp_state_str(st[i]));
		want[RX] = 1, want[WQP] = 1;
		ctr_check();
		mem_check(vp_qp_state_str(st[i]));
		tq_end(&q, st[i], vp_qp_state_str(st[i]));
	}
	tq_new(&q, D.pd, IBV_QPS_RTS);
	q.fqpn ^= 1;
	push(&q, q.rpsn, FL_ACKREQ, F.f->key, pay, 40);
	q.fqpn ^= 1;
	expect_quiet(&q, "wrong source QP");
	want[RX] = 1, want[WQP] = 1;
	ctr_check();
	mem_check("wrong source QP");
	tq_end(&q, IBV_QPS_RTS, "wrong source QP");
}

/*
 * A flood of valid pushes into FF (64 KiB, 72-byte records): 910 fit, the
 * 911th STOPs (wait set), the rest are ahead of a stopped receiver.
 */
#define FLOOD	4000
static void case_flood(void)
{
	static uint8_t frames[64][128];
	struct tq q;
	uint32_t i, j, fit = FF.size / 72;
	double t0;

	tq_new(&q, D.pd, IBV_QPS_RTS);
	t0 = vp_now();
	for (i = 0; i < FLOOD; i += 64) {
		struct mmsghdr mh[64];
		struct iovec iov[64];

		for (j = 0; j < 64 && i + j < FLOOD; j++) {
			uint8_t p[64];

			memcpy(p, pay + (i + j) % 512, 64);
			memcpy(p, &(uint32_t){ i + j }, 4);
			iov[j] = (struct iovec){ frames[j], push_frame(frames[j], &q, q.rpsn + i + j,
					FL_FIRST | FL_LAST, FF.f->key, 64, p, 64) };
			mh[j] = (struct mmsghdr){ .msg_hdr = { .msg_iov = &iov[j], .msg_iovlen = 1 } };
			if (i + j < fit)
				mf_append(&FF, q.qp->qp_num, p, 64);
		}
		if (sendmmsg(sock, mh, j, 0) != (int)j)
			vp_die("sendmmsg: %s", strerror(errno));
	}
	expect_reply(&q, OP_STOP, 0, q.rpsn + fit, "flood: STOP");
	expect_quiet(&q, "flood");
	FF.model[8] = 1;	/* wait */
	want[RX] = FLOOD, want[ACC] = fit, want[RNR] = 1, want[STOPT] = 1,
	want[OOS] = FLOOD - fit - 1;
	ctr_check();
	mem_check("flood");
	vc_note("%u frames in %.2f s, %u records", FLOOD, vp_now() - t0, fit);
	tq_end(&q, IBV_QPS_RTS, "flood");
}

static const struct {
	const char *name, *what;
	void (*fn)(void);
} cases[] = {
	{ "keys", "unknown, destroyed, plain MR, other PD's keys: NAK 1, QP to ERR", case_keys },
	{ "accept", "40, 0 and size/2 bytes appended; size/2 + 1: NAK 2", case_accept },
	{ "codec", "truncated, bad lengths, flags, status, psn: dropped, nothing written", case_codec },
	{ "seq", "ahead: LOST; replays not appended; push inside a WRITE: NAK 2", case_seq },
	{ "state", "RESET, INIT, ERR, wrong source QP: drop_wrong_qp", case_state },
	{ "flood", "4000 pushes: exactly the room's records, one STOP", case_flood },
};

static void setup(void)
{
	struct sockaddr_ll sll = { .sll_family = AF_PACKET, .sll_protocol = htons(ETH_P_MBCF) };
	struct mf tmp;
	int self;

	if (vp_dev_open(&D, "mbcf0"))
		vp_die("setup: open mbcf0: %s", strerror(errno));
	pd2 = ibv_alloc_pd(D.ctx);
	if (!pd2)
		vp_die("setup: pd");
	mf_new(&F, D.pd, 4096);
	mf_new(&FS, D.pd, 1024);
	mf_new(&FF, D.pd, 65536);
	mf_new(&FO, pd2, 4096);
	mf_new(&tmp, D.pd, 64);
	stale_key = tmp.f->key;
	if (mbcfdv_destroy_fifo(tmp.f))
		vp_die("setup: destroy");
	vp_gbuf_free(&tmp.g);
	free(tmp.model);
	plain = vp_gbuf_new(D.pd, 4096, 0, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	memset(plain.p, 0x5e, 4096);
	for (size_t i = 0; i < sizeof(pay); i++)
		pay[i] = vp_pat(0x44, i);
	self = vp_netns_enter("ns1");
	sock = socket(AF_PACKET, SOCK_RAW, htons(ETH_P_MBCF));
	sll.sll_ifindex = (int)if_nametoindex("veth1");
	/* only what arrives: our own frames would crowd out the replies */
	if (sock < 0 || !sll.sll_ifindex ||
	    setsockopt(sock, SOL_PACKET, PACKET_IGNORE_OUTGOING, &(int){ 1 }, sizeof(int)) ||
	    bind(sock, (struct sockaddr *)&sll, sizeof(sll)))
		vp_die("setup: socket on veth1: %s", strerror(errno));
	vp_netns_leave(self);
	fcntl(D.ctx->async_fd, F_SETFL, fcntl(D.ctx->async_fd, F_GETFL) | O_NONBLOCK);
	ctr_read(ctr0);
}

int main(int argc, char **argv)
{
	cpu_set_t cpus;
	int failed = 0, i;
	size_t k;

	setvbuf(stdout, NULL, _IOLBF, 0);
	/* one CPU: the frames reach mbcf0 in the order sent */
	CPU_ZERO(&cpus);
	CPU_SET(0, &cpus);
	sched_setaffinity(0, sizeof(cpus), &cpus);
	setup();
	for (k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
		bool run = argc < 2;
		double t0;

		for (i = 1; i < argc; i++)
			run |= !strcmp(argv[i], cases[k].name);
		if (!run)
			continue;
		vc_start();
		t0 = vp_now();
		cases[k].fn();
		mem_check(cases[k].name);
		failed += vc_end(cases[k].name, "wire", D.name, cases[k].what, t0);
	}
	/* the FIFOs go: destroy returns 0 with the QPs gone */
	{
		struct mf *all[] = { &F, &FS, &FF, &FO };

		for (k = 0; k < 4; k++) {
			if (mbcfdv_destroy_fifo(all[k]->f)) {
				printf("FAIL: destroy FIFO %zu\n", k);
				failed++;
			}
			vp_gbuf_free(&all[k]->g);
			free(all[k]->model);
		}
	}
	vp_gbuf_free(&plain);
	ibv_dealloc_pd(pd2);
	vp_dev_close(&D);
	return failed ? 1 : 0;
}
