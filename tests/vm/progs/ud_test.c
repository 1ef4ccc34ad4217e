// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * mbcf_ud_test: UD queue pairs, exact values and bad input; run in the
 * guest by tests/vm/ud.sh (docs/protocol.md section 15).
 *
 *   mbcf_ud_test [-a DEV] [-b DEV]
 *
 * The senders are UD QPs on device -a (default mbcf1; the process runs in
 * that device's netns, where its GIDs may be used for address handles), the
 * receivers UD QPs on device -b (default mbcf0).  Address handles: is_global,
 * dgid = the peer's GID 0, sgid_index 0.  What it asserts:
 *  1. data: sends of 1, 100 and active_mtu bytes (ibv_query_port; 1024 at
 *     MTU 1500), with and without immediate: the send completes SUCCESS; the
 *     receive completes SUCCESS, opcode RECV, byte_len = 40 + len, GRH flag,
 *     src_qp the sender's, WITH_IMM and imm_data exactly when sent; its first
 *     40 bytes are the GRH (version 6, payload length, next header 0x1B, hop
 *     limit, sgid = the sender's GID 0 at 8..23, dgid = the receiver's at
 *     24..39), then every payload byte, and nothing written past them;
 *  2. size bound = active_mtu, as rxe (IBA C10-93.1.1): active_mtu bytes
 *     (with immediate) arrive with every byte checked; active_mtu + 1 (1025),
 *     MTU - 72 (1428: what one frame could carry), 1429 and 4097 bytes are
 *     accepted by ibv_post_send and complete IBV_WC_SUCCESS, but nothing is
 *     sent: no frame reaches B (its rx_frames unchanged), the sender's
 *     tx_ud_oversize grows by exactly 4, the QP stays in RTS, and the
 *     receive that stayed posted then takes the next active_mtu datagram
 *     from the same QP, intact;
 *  3. wrong Q_Key: nothing arrives, the receiver's drop_bad_qkey grows by
 *     exactly 1 (`rdma statistic`), the send itself completes SUCCESS;
 *     the same receive then takes a datagram with the right Q_Key, and one
 *     sent with a Q_Key whose high bit is set (the sending QP's own);
 *  4. receive too small (40 + 10 bytes) for a 100-byte datagram: the
 *     datagram is dropped (drop_bad_length + 1), the receive stays posted
 *     (no completion) and takes the next datagram that fits (10 bytes),
 *     intact; the QP stays usable;
 *  5. an AH to a GID nobody has (fe80::1234): ibv_create_ah succeeds (the
 *     MAC of a link-local GID is derived from it, 02:00:00:00:12:34), the
 *     send completes SUCCESS, nothing arrives (not even a frame at the
 *     receiving device: rx_frames unchanged); an AH of another PD used on a
 *     QP: the send completes with IBV_WC_LOC_QP_OP_ERR, nothing arrives;
 *  and every object is destroyed without error.
 * Prints "ok: ..." per check and "FAIL: ..." per failure; the exit status is
 * the number of failures (capped at 100), 2 for setup errors.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <infiniband/verbs.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "vmprog.h"

#define WAIT_S		30.0	/* what must come (a loaded TCG host) */
#define QUIET_MS	200	/* what must not come */
#define QKEY		0x11111111u
#define SLOT		8192u	/* receive buffer per receive */
#define NSLOT		8u
#define PAD		0xee
#define NET_MTU		1500u	/* veth0/veth1 (ud.sh checks) */
#define DGRAM_MAX	(NET_MTU - 72)	/* what one DGRAM frame could carry */

struct dev {
	const char *name;
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_mr *mr;
	uint8_t *buf;
	size_t len;
	union ibv_gid gid;
	struct ibv_port_attr port;
};

static struct dev DA, DB;
static uint32_t mtu_bytes;

static void dev_open(struct dev *d, const char *name)
{
	d->name = name;
	d->ctx = vp_open(name);
	d->pd = ibv_alloc_pd(d->ctx);
	if (!d->pd || ibv_query_gid(d->ctx, 1, 0, &d->gid) ||
	    ibv_query_port(d->ctx, 1, &d->port))
		vp_die_errno("ibv_alloc_pd / ibv_query_gid / ibv_query_port");
	d->cq = ibv_create_cq(d->ctx, 256, NULL, NULL, 0);
	if (!d->cq)
		vp_die_errno("ibv_create_cq");
	d->len = NSLOT * SLOT;
	d->buf = aligned_alloc(4096, d->len);
	if (!d->buf)
		vp_die_errno("aligned_alloc");
	memset(d->buf, PAD, d->len);
	d->mr = ibv_reg_mr(d->pd, d->buf, d->len, IBV_ACCESS_LOCAL_WRITE);
	if (!d->mr)
		vp_die_errno("ibv_reg_mr");
}

/*
 * Protocol counter name of d's port: `rdma statistic show link DEV/1` (the
 * sysfs hw_counters are not visible from ns1); -1 if it cannot be read.
 */
static long long counter(const struct dev *d, const char *name)
{
	char cmd[128], tok[128];
	long long v = -1;
	FILE *f;

	snprintf(cmd, sizeof(cmd), "rdma statistic show link %s/1 2>/dev/null",
		 d->name);
	f = popen(cmd, "r");
	if (!f)
		return -1;
	while (fscanf(f, "%127s", tok) == 1)
		if (!strcmp(tok, name) && fscanf(f, "%lld", &v) != 1)
			v = -1;
	pclose(f);
	return v;
}

static struct ibv_qp *ud_qp(struct dev *d)
{
	struct ibv_qp_init_attr ia = {
		.send_cq = d->cq, .recv_cq = d->cq, .qp_type = IBV_QPT_UD,
		.cap = { .max_send_wr = 16, .max_recv_wr = 16,
			 .max_send_sge = 1, .max_recv_sge = 1 },
	};
	struct ibv_qp *qp = ibv_create_qp(d->pd, &ia);
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .port_num = 1,
				 .qkey = QKEY };

	if (!qp)
		vp_die_errno("ibv_create_qp UD");
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX |
			  IBV_QP_PORT | IBV_QP_QKEY))
		vp_die_errno("UD INIT");
	a.qp_state = IBV_QPS_RTR;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE))
		vp_die_errno("UD RTR");
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = 0;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN))
		vp_die_errno("UD RTS");
	return qp;
}

static struct ibv_ah *ah_to(struct ibv_pd *pd, const union ibv_gid *dgid)
{
	struct ibv_ah_attr aa = { .is_global = 1, .port_num = 1,
				  .grh = { .dgid = *dgid, .sgid_index = 0,
					   .hop_limit = 1 } };

	return ibv_create_ah(pd, &aa);
}

/* Receive wr_id into B's slot wr_id % NSLOT, len bytes, the slot padded. */
static void post_recv(struct ibv_qp *qp, uint64_t wr_id, uint32_t len)
{
	uint8_t *p = DB.buf + (wr_id % NSLOT) * SLOT;
	struct ibv_sge sg = { (uintptr_t)p, len, DB.mr->lkey };
	struct ibv_recv_wr wr = { .wr_id = wr_id, .sg_list = &sg, .num_sge = 1 },
			   *bad;

	memset(p, PAD, SLOT);
	if (ibv_post_recv(qp, &wr, &bad))
		vp_die_errno("ibv_post_recv");
}

static uint8_t pat(uint64_t k, uint32_t i)
{
	return (uint8_t)(k * 29 + i * 7 + (i >> 8) + 1);
}

/* Send len bytes of pattern k from A's buffer; ibv_post_send's return. */
static int post_ud(struct ibv_qp *qp, uint64_t wr_id, uint32_t len,
		   struct ibv_ah *ah, uint32_t rqpn, uint32_t qkey,
		   int imm, uint32_t immv)
{
	struct ibv_sge sg = { (uintptr_t)DA.buf, len, DA.mr->lkey };
	struct ibv_send_wr wr = {
		.wr_id = wr_id, .sg_list = &sg, .num_sge = 1,
		.opcode = imm ? IBV_WR_SEND_WITH_IMM : IBV_WR_SEND,
		.send_flags = IBV_SEND_SIGNALED,
		.imm_data = htonl(immv),
	}, *bad;
	uint32_t i;

	for (i = 0; i < len; i++)
		DA.buf[i] = pat(wr_id, i);
	wr.wr.ud.ah = ah;
	wr.wr.ud.remote_qpn = rqpn;
	wr.wr.ud.remote_qkey = qkey;
	return ibv_post_send(qp, &wr, &bad);
}

/* Up to n completions of cq within WAIT_S. */
static int poll_n(struct ibv_cq *cq, struct ibv_wc *wc, int n)
{
	double end = vp_now() + WAIT_S;
	int got = 0, r;

	while (got < n && vp_now() < end) {
		r = ibv_poll_cq(cq, n - got, wc + got);
		if (r < 0)
			return r;
		got += r;
		if (!r)
			usleep(200);
	}
	return got;
}

/* Completions that arrive on cq within QUIET_MS (should be none). */
static int poll_quiet(struct ibv_cq *cq)
{
	double end = vp_now() + QUIET_MS / 1000.0;
	struct ibv_wc wc[8];
	int got = 0, r;

	while (vp_now() < end) {
		r = ibv_poll_cq(cq, 8, wc);
		if (r > 0) {
			got += r;
			printf("  unexpected completion wr_id %llu status %s\n",
			       (unsigned long long)wc[0].wr_id,
			       ibv_wc_status_str(wc[0].status));
		}
		usleep(1000);
	}
	return got;
}

/* The send wr_id on A completes with status st. */
static void expect_send(const char *what, uint64_t wr_id, struct ibv_qp *qp,
			enum ibv_wc_status st)
{
	struct ibv_wc wc;
	int n = poll_n(DA.cq, &wc, 1);

	CHECK(n == 1 && wc.status == st && wc.wr_id == wr_id &&
	      wc.qp_num == qp->qp_num &&
	      (st != IBV_WC_SUCCESS || wc.opcode == IBV_WC_SEND),
	      "%s: send %llu completes %s (n %d status %s wr_id %llu opcode %d)",
	      what, (unsigned long long)wr_id, ibv_wc_status_str(st), n,
	      n == 1 ? ibv_wc_status_str(wc.status) : "-",
	      n == 1 ? (unsigned long long)wc.wr_id : 0ULL,
	      n == 1 ? (int)wc.opcode : -1);
}

/* Receive wr_id on qb holds datagram wr_id (len bytes) from qa, exactly. */
static void expect_dgram(const char *what, uint64_t wr_id, struct ibv_qp *qb,
			 struct ibv_qp *qa, uint64_t pk, uint32_t len, int imm,
			 uint32_t immv)
{
	const uint8_t *p = DB.buf + (wr_id % NSLOT) * SLOT;
	struct ibv_wc wc;
	uint32_t i, bad = 0;
	int n = poll_n(DB.cq, &wc, 1);

	CHECK(n == 1 && wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_RECV &&
	      wc.wr_id == wr_id && wc.qp_num == qb->qp_num &&
	      wc.src_qp == qa->qp_num && wc.byte_len == 40 + len,
	      "%s: receive %llu SUCCESS RECV qp %u src_qp %u byte_len %u "
	      "(n %d status %s opcode %d wr_id %llu qp %u src_qp %u byte_len %u)",
	      what, (unsigned long long)wr_id, qb->qp_num, qa->qp_num, 40 + len,
	      n, n == 1 ? ibv_wc_status_str(wc.status) : "-",
	      n == 1 ? (int)wc.opcode : -1,
	      n == 1 ? (unsigned long long)wc.wr_id : 0ULL,
	      n == 1 ? wc.qp_num : 0, n == 1 ? wc.src_qp : 0,
	      n == 1 ? wc.byte_len : 0);
	if (n != 1)
		return;
	CHECK((wc.wc_flags & IBV_WC_GRH) &&
	      !!(wc.wc_flags & IBV_WC_WITH_IMM) == !!imm &&
	      (!imm || ntohl(wc.imm_data) == immv),
	      "%s: GRH flag, WITH_IMM %s%s (wc_flags 0x%x imm 0x%08x)", what,
	      imm ? "set" : "clear", imm ? ", imm_data exact" : "",
	      wc.wc_flags, ntohl(wc.imm_data));
	CHECK(p[0] >> 4 == 6 && p[4] == (len >> 8) && p[5] == (len & 0xff) &&
	      p[6] == 0x1B && p[7] == 1,
	      "%s: GRH: version 6, payload length %u, next header 0x1B, hop limit 1 "
	      "(%02x .. %02x%02x %02x %02x)", what, len, p[0], p[4], p[5], p[6],
	      p[7]);
	CHECK(!memcmp(p + 8, DA.gid.raw, 16) && !memcmp(p + 24, DB.gid.raw, 16),
	      "%s: GRH sgid (8..23) = %s's GID 0, dgid (24..39) = %s's GID 0",
	      what, DA.name, DB.name);
	for (i = 0; i < len; i++)
		if (p[40 + i] != pat(pk, i))
			bad++;
	for (i = 40 + len; i < SLOT; i++)
		if (p[i] != PAD)
			bad++;
	CHECK(bad == 0, "%s: %u payload bytes exact, nothing written past them "
	      "(%u bytes wrong)", what, len, bad);
}

static void expect_none(const char *what)
{
	int n = poll_quiet(DB.cq);

	CHECK(n == 0, "%s: nothing arrives in %d ms (%d completions)", what,
	      QUIET_MS, n);
}

int main(int argc, char **argv)
{
	const char *da = "mbcf1", *db = "mbcf0";
	static const uint32_t lens[3] = { 1, 100, 0 };
	union ibv_gid nobody = { .raw = { 0xfe, 0x80, [14] = 0x12, [15] = 0x34 } };
	struct ibv_qp *qa, *qb, *qx;
	struct ibv_ah *ah, *ahx;
	struct ibv_pd *pd2;
	long long c0, c1, r0, r1;
	char what[96];
	uint64_t id = 100;
	int c, i, imm, rc;

	setvbuf(stdout, NULL, _IOLBF, 0);
	while ((c = getopt(argc, argv, "a:b:")) != -1) {
		switch (c) {
		case 'a':
			da = optarg;
			break;
		case 'b':
			db = optarg;
			break;
		default:
			fprintf(stderr, "usage: %s [-a DEV] [-b DEV]\n", argv[0]);
			return 2;
		}
	}
	dev_open(&DA, da);
	dev_open(&DB, db);
	mtu_bytes = 128u << DA.port.active_mtu;
	CHECK(DA.port.active_mtu == IBV_MTU_1024 && DB.port.active_mtu == IBV_MTU_1024,
	      "active_mtu 1024 on both ports at MTU 1500 (%u, %u)",
	      128u << DA.port.active_mtu, 128u << DB.port.active_mtu);

	qa = ud_qp(&DA);
	qb = ud_qp(&DB);
	ah = ah_to(DA.pd, &DB.gid);
	if (!ah)
		vp_die_errno("ibv_create_ah");

	/* 1. data */
	for (i = 0; i < 3; i++) {
		uint32_t len = lens[i] ? lens[i] : mtu_bytes;

		for (imm = 0; imm < 2; imm++, id++) {
			snprintf(what, sizeof(what), "data %u bytes%s", len,
				 imm ? " with imm" : "");
			post_recv(qb, id, 40 + 4096);
			if (post_ud(qa, id, len, ah, qb->qp_num, QKEY, imm,
				    0xa5000000u + (uint32_t)id))
				vp_die_errno("ibv_post_send");
			expect_send(what, id, qa, IBV_WC_SUCCESS);
			expect_dgram(what, id, qb, qa, id, len, imm,
				     0xa5000000u + (uint32_t)id);
		}
	}

	/*
	 * 2. size bound: active_mtu, as rxe.  A larger UD message completes
	 * SUCCESS and sends nothing (IBA C10-93.1.1: no packet, no error;
	 * core/dgram.c counts it in tx_ud_oversize); the QP goes on.
	 */
	snprintf(what, sizeof(what), "active_mtu = %u bytes", mtu_bytes);
	post_recv(qb, id, 40 + 4096);
	if (post_ud(qa, id, mtu_bytes, ah, qb->qp_num, QKEY, 1, 0xa5a5a5a5u))
		vp_die_errno("ibv_post_send");
	expect_send(what, id, qa, IBV_WC_SUCCESS);
	expect_dgram(what, id, qb, qa, id, mtu_bytes, 1, 0xa5a5a5a5u);
	id++;
	{
		const uint32_t big[4] = { mtu_bytes + 1, DGRAM_MAX, DGRAM_MAX + 1,
					  4097 };
		long long o0 = counter(&DA, "tx_ud_oversize"), o1;
		long long f0 = counter(&DB, "rx_frames"), f1;

		post_recv(qb, id, 40 + 8192 - 40);
		for (i = 0; i < 4; i++) {
			snprintf(what, sizeof(what), "oversize %u bytes", big[i]);
			rc = post_ud(qa, 200 + i, big[i], ah, qb->qp_num, QKEY,
				     i & 1, 0);
			CHECK(rc == 0, "%s: ibv_post_send accepts it (%d)", what, rc);
			if (!rc)
				expect_send(what, 200 + i, qa, IBV_WC_SUCCESS);
		}
		expect_none("oversize");
		o1 = counter(&DA, "tx_ud_oversize");
		f1 = counter(&DB, "rx_frames");
		CHECK(o0 >= 0 && o1 == o0 + 4,
		      "oversize: %s tx_ud_oversize +4 (%lld -> %lld)", DA.name, o0, o1);
		CHECK(f0 >= 0 && f1 == f0,
		      "oversize: no frame reaches %s (rx_frames %lld -> %lld)",
		      DB.name, f0, f1);
		CHECK(vp_qp_state(qa) == IBV_QPS_RTS, "oversize: sending QP stays RTS (%d)",
		      (int)vp_qp_state(qa));
		snprintf(what, sizeof(what), "active_mtu = %u bytes after oversize",
			 mtu_bytes);
		if (post_ud(qa, 210, mtu_bytes, ah, qb->qp_num, QKEY, 0, 0))
			vp_die_errno("ibv_post_send");
		expect_send(what, 210, qa, IBV_WC_SUCCESS);
		expect_dgram(what, id, qb, qa, 210, mtu_bytes, 0, 0);
		id++;
	}

	/* 3. wrong Q_Key */
	post_recv(qb, id, 40 + 4096);
	c0 = counter(&DB, "drop_bad_qkey");
	if (post_ud(qa, 300, 64, ah, qb->qp_num, QKEY + 1, 0, 0))
		vp_die_errno("ibv_post_send");
	expect_send("wrong qkey", 300, qa, IBV_WC_SUCCESS);
	expect_none("wrong qkey");
	c1 = counter(&DB, "drop_bad_qkey");
	CHECK(c0 >= 0 && c1 == c0 + 1, "wrong qkey: %s drop_bad_qkey +1 (%lld -> %lld)",
	      DB.name, c0, c1);
	if (post_ud(qa, 301, 64, ah, qb->qp_num, QKEY, 0, 0))
		vp_die_errno("ibv_post_send");
	expect_send("right qkey after", 301, qa, IBV_WC_SUCCESS);
	expect_dgram("right qkey after", id, qb, qa, 301, 64, 0, 0);
	id++;
	post_recv(qb, id, 40 + 4096);
	if (post_ud(qa, 302, 77, ah, qb->qp_num, 0x80000000u, 0, 0))
		vp_die_errno("ibv_post_send");
	expect_send("qkey high bit (the QP's own)", 302, qa, IBV_WC_SUCCESS);
	expect_dgram("qkey high bit (the QP's own)", id, qb, qa, 302, 77, 0, 0);
	id++;

	/* 4. receive too small: the datagram is dropped, the receive kept */
	{
		int n;

		r0 = counter(&DB, "drop_bad_length");
		post_recv(qb, id, 40 + 10);
		if (post_ud(qa, 400, 100, ah, qb->qp_num, QKEY, 0, 0))
			vp_die_errno("ibv_post_send");
		expect_send("small receive", 400, qa, IBV_WC_SUCCESS);
		n = poll_quiet(DB.cq);
		CHECK(n == 0, "small receive: no receive completion for a "
		      "100-byte datagram into 50 bytes (%d)", n);
		r1 = counter(&DB, "drop_bad_length");
		CHECK(r0 >= 0 && r1 == r0 + 1,
		      "small receive: %s drop_bad_length +1 (%lld -> %lld)", DB.name,
		      r0, r1);
		CHECK(vp_qp_state(qb) == IBV_QPS_RTS, "small receive: receiving QP "
		      "still RTS (%d)", (int)vp_qp_state(qb));
		/* the receive that stayed posted takes a datagram that fits */
		if (post_ud(qa, 401, 10, ah, qb->qp_num, QKEY, 1, 0xbeef))
			vp_die_errno("ibv_post_send");
		expect_send("after small receive", 401, qa, IBV_WC_SUCCESS);
		expect_dgram("after small receive", id, qb, qa, 401, 10, 1, 0xbeef);
		id++;
	}

	/* 5a. a GID nobody has: created, sent, lost (no frame reaches B) */
	post_recv(qb, id, 40 + 4096);
	ahx = ah_to(DA.pd, &nobody);
	CHECK(ahx != NULL, "nobody: ibv_create_ah to fe80::1234 succeeds (%s)",
	      ahx ? "-" : strerror(errno));
	if (ahx) {
		r0 = counter(&DB, "rx_frames");
		if (post_ud(qa, 500, 64, ahx, qb->qp_num, QKEY, 0, 0))
			vp_die_errno("ibv_post_send");
		expect_send("nobody", 500, qa, IBV_WC_SUCCESS);
		expect_none("nobody");
		r1 = counter(&DB, "rx_frames");
		CHECK(r0 >= 0 && r1 == r0, "nobody: %s rx_frames unchanged "
		      "(%lld -> %lld)", DB.name, r0, r1);
		CHECK(ibv_destroy_ah(ahx) == 0, "nobody: destroy_ah");
	}

	/* 5b. an AH of another PD: LOC_QP_OP_ERR, nothing sent */
	pd2 = ibv_alloc_pd(DA.ctx);
	if (!pd2)
		vp_die_errno("ibv_alloc_pd");
	ahx = ah_to(pd2, &DB.gid);
	if (!ahx)
		vp_die_errno("ibv_create_ah (pd2)");
	qx = ud_qp(&DA);
	rc = post_ud(qx, 510, 64, ahx, qb->qp_num, QKEY, 0, 0);
	CHECK(rc == 0, "other PD's AH: ibv_post_send accepted (%d)", rc);
	if (!rc)
		expect_send("other PD's AH", 510, qx, IBV_WC_LOC_QP_OP_ERR);
	expect_none("other PD's AH");
	CHECK(vp_qp_state(qx) == IBV_QPS_ERR, "other PD's AH: sending QP in ERR (%d)",
	      (int)vp_qp_state(qx));
	/* the receive still posted takes the next good datagram */
	if (post_ud(qa, 511, 1, ah, qb->qp_num, QKEY, 0, 0))
		vp_die_errno("ibv_post_send");
	expect_send("after other PD's AH", 511, qa, IBV_WC_SUCCESS);
	expect_dgram("after other PD's AH", id, qb, qa, 511, 1, 0, 0);
	CHECK(poll_quiet(DA.cq) == 0 && poll_quiet(DB.cq) == 0,
	      "nothing more on either CQ");

	CHECK(ibv_destroy_qp(qx) == 0 && ibv_destroy_ah(ahx) == 0 &&
	      ibv_dealloc_pd(pd2) == 0 && ibv_destroy_ah(ah) == 0 &&
	      ibv_destroy_qp(qa) == 0 && ibv_destroy_qp(qb) == 0,
	      "destroy QPs, AHs, the second PD");
	for (i = 0; i < 2; i++) {
		struct dev *d = i ? &DB : &DA;

		CHECK(ibv_dereg_mr(d->mr) == 0 && ibv_destroy_cq(d->cq) == 0 &&
		      ibv_dealloc_pd(d->pd) == 0 && ibv_close_device(d->ctx) == 0,
		      "%s: destroy MR, CQ, PD, close", d->name);
		free(d->buf);
	}
	printf("ud_test: %d failure(s)\n", vp_fails);
	return vp_fails > 100 ? 100 : vp_fails;
}
