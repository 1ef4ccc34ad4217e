// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * mbcf_verbs_query: what the device reports is what it does.
 *
 *  - ibv_query_device_ex: every limit it reports is enforced exactly at its
 *    boundary (at the limit works, one past fails with EINVAL);
 *  - ibv_query_port: the port's state, MTUs, link layer, table sizes;
 *  - ibv_query_qp: after each transition of an RC and a UC QP, every
 *    attribute that was set comes back as set, the capabilities as created;
 *  - ibv_resize_cq: up and down with completions waiting (below their
 *    number: EINVAL, nothing lost) and while a stream of completions is
 *    being polled by another thread (every completion exactly once, in
 *    order).
 *
 *   mbcf_verbs_query -a DEV -b DEV [-s SEED]
 * Prints "ok: ..." per check and "FAIL: ..." per failure; the exit status is
 * the number of failures (capped at 100), 2 for setup errors.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <infiniband/verbs.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "vmprog.h"

static unsigned int seed = 1;

struct side {
	const char *name;
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	union ibv_gid gid;
	uint32_t psn;
};

static struct side A, B;

static void open_side(struct side *s, const char *name)
{
	s->name = name;
	s->ctx = vp_open(name);
	s->pd = ibv_alloc_pd(s->ctx);
	if (!s->pd || ibv_query_gid(s->ctx, 1, 0, &s->gid))
		vp_die_errno("ibv_alloc_pd / ibv_query_gid");
}

/* ---- device limits, probed at their boundaries ------------------------------- */

/* errno of creating a QP with @cap (0: it worked, and was destroyed). */
static int qp_create_errno(struct side *s, struct ibv_qp_cap cap)
{
	struct ibv_qp_init_attr ia = {
		.send_cq = s->cq, .recv_cq = s->cq, .cap = cap,
		.qp_type = IBV_QPT_RC,
	};
	struct ibv_qp *qp = ibv_create_qp(s->pd, &ia);

	if (!qp)
		return errno;
	ibv_destroy_qp(qp);
	return 0;
}

static void check_device(struct side *s)
{
	struct ibv_device_attr_ex dx = {};
	struct ibv_device_attr *d = &dx.orig_attr;
	struct ibv_qp_cap cap = { 1, 1, 1, 1, 0 };
	struct ibv_cq *cq;
	struct ibv_mw *mw;

	CHECK(ibv_query_device_ex(s->ctx, NULL, &dx) == 0, "%s: ibv_query_device_ex", s->name);
	CHECK(d->max_qp_wr > 0 && d->max_sge > 0 && d->max_cqe > 0 &&
	      d->max_qp_rd_atom > 0 && d->max_mr > 0 && d->max_pd > 0,
	      "%s: limits reported (qp_wr %d sge %d cqe %d rd_atom %d mr %d mw %d)",
	      s->name, d->max_qp_wr, d->max_sge, d->max_cqe, d->max_qp_rd_atom,
	      d->max_mr, d->max_mw);
	CHECK((d->device_cap_flags & (IBV_DEVICE_MEM_WINDOW | IBV_DEVICE_MEM_WINDOW_TYPE_2B)) ==
	      (IBV_DEVICE_MEM_WINDOW | IBV_DEVICE_MEM_WINDOW_TYPE_2B) && d->max_mw > 0,
	      "%s: memory windows type 1 and 2 offered", s->name);
	CHECK(d->phys_port_cnt == 1 && d->max_pkeys == 1, "%s: one port, one pkey", s->name);
	CHECK(dx.completion_timestamp_mask == 0 && dx.hca_core_clock == 0,
	      "%s: no completion timestamps offered", s->name);

	s->cq = ibv_create_cq(s->ctx, 16, NULL, NULL, 0);
	if (!s->cq)
		vp_die_errno("ibv_create_cq");
	cap.max_send_wr = d->max_qp_wr;
	CHECK(qp_create_errno(s, cap) == 0, "%s: max_send_wr = max_qp_wr %d", s->name, d->max_qp_wr);
	cap.max_send_wr++;
	CHECK(qp_create_errno(s, cap) == EINVAL, "%s: max_send_wr = max_qp_wr + 1: EINVAL", s->name);
	cap.max_send_wr = 1;
	cap.max_recv_wr = d->max_qp_wr + 1;
	CHECK(qp_create_errno(s, cap) == EINVAL, "%s: max_recv_wr = max_qp_wr + 1: EINVAL", s->name);
	cap.max_recv_wr = 1;
	cap.max_send_sge = cap.max_recv_sge = d->max_sge;
	CHECK(qp_create_errno(s, cap) == 0, "%s: max_send/recv_sge = max_sge %d", s->name, d->max_sge);
	cap.max_send_sge++;
	CHECK(qp_create_errno(s, cap) == EINVAL, "%s: max_send_sge = max_sge + 1: EINVAL", s->name);
	cap.max_send_sge = 1;
	cap.max_recv_sge++;
	CHECK(qp_create_errno(s, cap) == EINVAL, "%s: max_recv_sge = max_sge + 1: EINVAL", s->name);

	cq = ibv_create_cq(s->ctx, d->max_cqe, NULL, NULL, 0);
	CHECK(cq != NULL && cq->cqe >= d->max_cqe, "%s: a CQ of max_cqe %d", s->name, d->max_cqe);
	if (cq)
		ibv_destroy_cq(cq);
	errno = 0;
	cq = ibv_create_cq(s->ctx, d->max_cqe + 1, NULL, NULL, 0);
	CHECK(!cq && errno == EINVAL, "%s: a CQ of max_cqe + 1: EINVAL (%s)", s->name, strerror(errno));
	if (cq)
		ibv_destroy_cq(cq);
	errno = 0;
	cq = ibv_create_cq(s->ctx, 4, NULL, NULL, s->ctx->num_comp_vectors);
	CHECK(!cq && errno == EINVAL, "%s: comp_vector = num_comp_vectors: EINVAL", s->name);
	if (cq)
		ibv_destroy_cq(cq);

	mw = ibv_alloc_mw(s->pd, IBV_MW_TYPE_1);
	CHECK(mw && mw->type == IBV_MW_TYPE_1, "%s: ibv_alloc_mw type 1", s->name);
	if (mw)
		ibv_dealloc_mw(mw);
	mw = ibv_alloc_mw(s->pd, IBV_MW_TYPE_2);
	CHECK(mw && mw->type == IBV_MW_TYPE_2, "%s: ibv_alloc_mw type 2", s->name);
	if (mw)
		ibv_dealloc_mw(mw);
}

static void check_port(struct side *s)
{
	struct ibv_port_attr p = {};

	CHECK(ibv_query_port(s->ctx, 1, &p) == 0, "%s: ibv_query_port", s->name);
	CHECK(p.state == IBV_PORT_ACTIVE && p.phys_state == 5 /* LinkUp */,
	      "%s: port active, link up (%d/%d)", s->name, p.state, p.phys_state);
	CHECK(p.link_layer == IBV_LINK_LAYER_ETHERNET, "%s: Ethernet link layer", s->name);
	CHECK(p.max_mtu == IBV_MTU_4096, "%s: max_mtu 4096", s->name);
	/* the largest IB MTU one frame carries whole (a datagram) at 1500 */
	CHECK(p.active_mtu == IBV_MTU_1024, "%s: active_mtu 1024 on a 1500-byte netdev (%d)",
	      s->name, p.active_mtu);
	CHECK(p.pkey_tbl_len == 1 && p.gid_tbl_len > 0 && p.max_msg_sz == 1u << 31,
	      "%s: pkey_tbl_len 1, gid_tbl_len %d, max_msg_sz 2^31", s->name, p.gid_tbl_len);
	CHECK(ibv_query_port(s->ctx, 2, &p) != 0, "%s: port 2 does not exist", s->name);
}

/* ---- query_qp returns what was set --------------------------------------------- */

static struct ibv_qp *make_qp(struct side *s, enum ibv_qp_type type,
			      struct ibv_qp_cap *cap)
{
	struct ibv_qp_init_attr ia = {
		.send_cq = s->cq, .recv_cq = s->cq, .cap = *cap,
		.qp_type = type, .sq_sig_all = 1,
	};
	struct ibv_qp *qp = ibv_create_qp(s->pd, &ia);

	if (!qp)
		vp_die_errno("ibv_create_qp");
	*cap = ia.cap;		/* what the device made of it */
	return qp;
}

static void expect_qp(struct ibv_qp *qp, const struct ibv_qp_attr *want, int mask,
		      const struct ibv_qp_cap *cap, enum ibv_qp_type type,
		      const char *what)
{
	struct ibv_qp_attr a;
	struct ibv_qp_init_attr ia;
	int bad = 0;

	memset(&a, 0x5a, sizeof(a));
	memset(&ia, 0x5a, sizeof(ia));
	if (ibv_query_qp(qp, &a, IBV_QP_STATE | mask, &ia)) {
		CHECK(0, "%s: ibv_query_qp: %s", what, strerror(errno));
		return;
	}
#define SAME(field) do { if (a.field != want->field) { bad++; \
	printf("  %s: " #field " %lld, set %lld\n", what, (long long)a.field, \
	       (long long)want->field); } } while (0)
	SAME(qp_state);
	if (mask & IBV_QP_ACCESS_FLAGS)
		SAME(qp_access_flags);
	if (mask & IBV_QP_PKEY_INDEX)
		SAME(pkey_index);
	if (mask & IBV_QP_PORT)
		SAME(port_num);
	if (mask & IBV_QP_PATH_MTU)
		SAME(path_mtu);
	if (mask & IBV_QP_DEST_QPN)
		SAME(dest_qp_num);
	if (mask & IBV_QP_RQ_PSN)
		SAME(rq_psn);
	if (mask & IBV_QP_SQ_PSN)
		SAME(sq_psn);
	if (mask & IBV_QP_MAX_DEST_RD_ATOMIC)
		SAME(max_dest_rd_atomic);
	if (mask & IBV_QP_MAX_QP_RD_ATOMIC)
		SAME(max_rd_atomic);
	if (mask & IBV_QP_MIN_RNR_TIMER)
		SAME(min_rnr_timer);
	if (mask & IBV_QP_TIMEOUT)
		SAME(timeout);
	if (mask & IBV_QP_RETRY_CNT)
		SAME(retry_cnt);
	if (mask & IBV_QP_RNR_RETRY)
		SAME(rnr_retry);
	if (mask & IBV_QP_AV) {
		SAME(ah_attr.is_global);
		SAME(ah_attr.port_num);
		SAME(ah_attr.sl);
		SAME(ah_attr.grh.sgid_index);
		SAME(ah_attr.grh.hop_limit);
		SAME(ah_attr.grh.traffic_class);
		SAME(ah_attr.grh.flow_label);
		if (memcmp(&a.ah_attr.grh.dgid, &want->ah_attr.grh.dgid, 16)) {
			bad++;
			printf("  %s: ah_attr.grh.dgid differs\n", what);
		}
	}
#undef SAME
	if (memcmp(&a.cap, cap, sizeof(*cap)) || memcmp(&ia.cap, cap, sizeof(*cap)) ||
	    ia.qp_type != type || ia.send_cq != qp->send_cq ||
	    ia.recv_cq != qp->recv_cq || ia.sq_sig_all != 1) {
		bad++;
		printf("  %s: init attributes/caps differ (type %d, sq_sig_all %d)\n",
		       what, ia.qp_type, ia.sq_sig_all);
	}
	CHECK(bad == 0, "%s: ibv_query_qp returns what was set", what);
}

static int max_rd_atom(struct side *s)
{
	struct ibv_device_attr d;

	if (ibv_query_device(s->ctx, &d))
		vp_die_errno("ibv_query_device");
	return d.max_qp_rd_atom;
}

static void check_query_qp(enum ibv_qp_type type)
{
	const char *tn = type == IBV_QPT_RC ? "RC" : "UC";
	struct ibv_qp_cap cap = { .max_send_wr = 33, .max_recv_wr = 17,
				  .max_send_sge = 3, .max_recv_sge = 2,
				  .max_inline_data = 100 };
	struct ibv_qp_attr a = {};
	struct ibv_qp *qp = make_qp(&A, type, &cap), *peer;
	struct ibv_qp_cap pcap = cap;
	char what[64];
	int m;

	peer = make_qp(&B, type, &pcap);
	CHECK(cap.max_send_wr >= 33 && cap.max_recv_wr >= 17 && cap.max_send_sge >= 3 &&
	      cap.max_recv_sge >= 2 && cap.max_inline_data >= 100,
	      "%s: created caps hold what was asked (%u %u %u %u %u)", tn, cap.max_send_wr,
	      cap.max_recv_wr, cap.max_send_sge, cap.max_recv_sge, cap.max_inline_data);

	a.qp_state = IBV_QPS_INIT;
	a.pkey_index = 0;
	a.port_num = 1;
	a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_LOCAL_WRITE |
			    (type == IBV_QPT_RC ? IBV_ACCESS_REMOTE_READ : 0);
	m = IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS;
	CHECK(ibv_modify_qp(qp, &a, IBV_QP_STATE | m) == 0, "%s: to INIT", tn);
	snprintf(what, sizeof(what), "%s INIT", tn);
	expect_qp(qp, &a, m, &cap, type, what);

	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_1024;
	a.dest_qp_num = peer->qp_num;
	a.rq_psn = 0xabcdef;
	a.ah_attr.is_global = 1;
	a.ah_attr.grh.dgid = B.gid;
	a.ah_attr.grh.sgid_index = 0;
	a.ah_attr.grh.hop_limit = 7;
	a.ah_attr.grh.traffic_class = 0x20;
	a.ah_attr.grh.flow_label = 0x12345;
	a.ah_attr.sl = 0;
	a.ah_attr.port_num = 1;
	m = IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN;
	if (type == IBV_QPT_RC) {
		a.max_dest_rd_atomic = max_rd_atom(&A) + 1;
		a.min_rnr_timer = 9;
		m |= IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
		CHECK(ibv_modify_qp(qp, &a, IBV_QP_STATE | m) == EINVAL,
		      "RC: max_dest_rd_atomic = max_qp_rd_atom + 1: EINVAL");
		a.max_dest_rd_atomic = 5;
	}
	CHECK(ibv_modify_qp(qp, &a, IBV_QP_STATE | m) == 0, "%s: to RTR", tn);
	snprintf(what, sizeof(what), "%s RTR", tn);
	expect_qp(qp, &a, m | IBV_QP_ACCESS_FLAGS | IBV_QP_PORT, &cap, type, what);

	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = 0x123456;
	m = IBV_QP_SQ_PSN;
	if (type == IBV_QPT_RC) {
		a.timeout = 13;
		a.retry_cnt = 6;
		a.rnr_retry = 5;
		a.max_rd_atomic = max_rd_atom(&A) + 1;
		m |= IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
		     IBV_QP_MAX_QP_RD_ATOMIC;
		CHECK(ibv_modify_qp(qp, &a, IBV_QP_STATE | m) == EINVAL,
		      "RC: max_rd_atomic = max_qp_rd_atom + 1: EINVAL");
		a.max_rd_atomic = 3;
	}
	CHECK(ibv_modify_qp(qp, &a, IBV_QP_STATE | m) == 0, "%s: to RTS", tn);
	snprintf(what, sizeof(what), "%s RTS", tn);
	expect_qp(qp, &a, m | IBV_QP_AV | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
		  IBV_QP_PATH_MTU | IBV_QP_ACCESS_FLAGS, &cap, type, what);

	a.qp_state = IBV_QPS_ERR;
	CHECK(ibv_modify_qp(qp, &a, IBV_QP_STATE) == 0, "%s: to ERR", tn);
	snprintf(what, sizeof(what), "%s ERR", tn);
	expect_qp(qp, &a, 0, &cap, type, what);
	ibv_destroy_qp(qp);
	ibv_destroy_qp(peer);
}

/* ---- resize_cq ----------------------------------------------------------------- */

/* Connect A's and B's QPs (RC) on their CQs, for the resize tests. */
static void connect_pair(void)
{
	struct side *s[2] = { &A, &B };
	struct ibv_qp_cap cap = { .max_send_wr = 1024, .max_recv_wr = 1024,
				  .max_send_sge = 1, .max_recv_sge = 1 };
	struct ibv_qp_attr a;
	int i;

	for (i = 0; i < 2; i++)
		s[i]->qp = make_qp(s[i], IBV_QPT_RC, &cap);
	for (i = 0; i < 2; i++) {
		struct side *me = s[i], *peer = s[1 - i];

		memset(&a, 0, sizeof(a));
		a.qp_state = IBV_QPS_INIT;
		a.port_num = 1;
		a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_LOCAL_WRITE;
		if (ibv_modify_qp(me->qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX |
				  IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
			vp_die_errno("INIT");
		memset(&a, 0, sizeof(a));
		a.qp_state = IBV_QPS_RTR;
		a.path_mtu = IBV_MTU_1024;
		a.dest_qp_num = peer->qp->qp_num;
		a.rq_psn = peer->psn = 0x100 * (i + 1);
		a.max_dest_rd_atomic = 1;
		a.min_rnr_timer = 12;
		a.ah_attr.is_global = 1;
		a.ah_attr.grh.dgid = peer->gid;
		a.ah_attr.grh.hop_limit = 1;
		a.ah_attr.port_num = 1;
		if (ibv_modify_qp(me->qp, &a, IBV_QP_STATE | IBV_QP_AV |
				  IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
				  IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
			vp_die_errno("RTR");
	}
	for (i = 0; i < 2; i++) {
		memset(&a, 0, sizeof(a));
		a.qp_state = IBV_QPS_RTS;
		a.sq_psn = s[i]->psn;
		a.timeout = 14;
		a.retry_cnt = 7;
		a.rnr_retry = 7;
		a.max_rd_atomic = 1;
		if (ibv_modify_qp(s[i]->qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN |
				  IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
				  IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC))
			vp_die_errno("RTS");
	}
}

static uint64_t target[8];
static struct ibv_mr *src_mr, *dst_mr;

static int post_write(uint64_t wr_id)
{
	struct ibv_sge sge = { (uintptr_t)&target[0], 8, src_mr->lkey };
	struct ibv_send_wr wr = {
		.wr_id = wr_id, .sg_list = &sge, .num_sge = 1,
		.opcode = IBV_WR_RDMA_WRITE, .send_flags = IBV_SEND_SIGNALED,
		.wr.rdma = { (uintptr_t)&target[4], dst_mr->rkey },
	}, *bad;

	return ibv_post_send(A.qp, &wr, &bad);
}

/*
 * Completions waiting in a CQ of 8 + ... cannot be counted without polling
 * them; a resize to 8 (a ring of 8) fails exactly when more than 8 wait,
 * so retry it until it does.
 */
static void check_resize_waiting(void)
{
	struct timespec ts = { 0, 10000000 };
	struct ibv_wc wc[64];
	int i, n, got = 0, inorder = 1, tries;
	int rc = 0;

	for (i = 0; i < 12; i++)
		if (post_write(1000 + i))
			vp_die_errno("post_write");
	for (tries = 0; tries < 1000; tries++) {
		rc = ibv_resize_cq(A.cq, 8);
		if (rc)
			break;
		nanosleep(&ts, NULL);
	}
	CHECK(rc == EINVAL, "resize to 8 below the completions waiting: EINVAL");
	CHECK(ibv_resize_cq(A.cq, 64) == 0 && A.cq->cqe >= 64,
	      "resize up to 64 with completions waiting (cqe %d)", A.cq->cqe);
	CHECK(ibv_resize_cq(A.cq, 12) == 0 && A.cq->cqe >= 12,
	      "resize down to 12 with completions waiting (cqe %d)", A.cq->cqe);
	for (tries = 0; got < 12 && tries < 1000; tries++) {
		n = ibv_poll_cq(A.cq, 64, wc);
		if (n < 0)
			break;
		for (i = 0; i < n; i++, got++)
			inorder &= wc[i].wr_id == 1000u + got &&
				   wc[i].status == IBV_WC_SUCCESS &&
				   wc[i].opcode == IBV_WC_RDMA_WRITE;
		if (!n)
			nanosleep(&ts, NULL);
	}
	CHECK(got == 12 && inorder && ibv_poll_cq(A.cq, 64, wc) == 0,
	      "all 12 completions survive the resizes, once each, in order (%d)", got);
}

struct stream {
	volatile int done;
	unsigned int resizes, fails;
};

static void *resizer(void *arg)
{
	struct stream *st = arg;
	struct timespec ts = { 0, 1000000 };
	int sizes[] = { 1024, 2048, 4096, 1536, 1100 };

	while (!st->done) {
		if (ibv_resize_cq(A.cq, sizes[rand_r(&seed) % 5]))
			st->fails++;
		else
			st->resizes++;
		nanosleep(&ts, NULL);
	}
	return NULL;
}

/*
 * 20000 signaled writes, at most 512 in flight (so no size below is ever
 * too small), polled by this thread while another resizes the CQ up and
 * down: every completion exactly once, in order.
 */
static void check_resize_stream(void)
{
	struct stream st = {};
	struct ibv_wc wc[32];
	pthread_t t;
	uint64_t posted = 0, seen = 0, total = 20000;
	int n, i, bad = 0, poll_err = 0;
	time_t end = time(NULL) + 240;

	if (ibv_resize_cq(A.cq, 1024))
		vp_die_errno("resize 1024");
	pthread_create(&t, NULL, resizer, &st);
	while (seen < total && time(NULL) < end) {
		while (posted < total && posted - seen < 512)
			if (post_write(posted++))
				vp_die_errno("post_write");
		n = ibv_poll_cq(A.cq, 32, wc);
		if (n < 0) {
			poll_err = errno;
			break;
		}
		for (i = 0; i < n; i++, seen++)
			bad += wc[i].wr_id != seen || wc[i].status != IBV_WC_SUCCESS;
	}
	st.done = 1;
	pthread_join(t, NULL);
	/* a poll racing a resize once read the old ring's DEAD flag: EIO */
	CHECK(seen == total && bad == 0 && st.fails == 0 && st.resizes > 0 && !poll_err,
	      "%llu of %llu completions, in order (%d out of place) across %u resizes "
	      "(%u failed), ibv_poll_cq: %s", (unsigned long long)seen,
	      (unsigned long long)total, bad, st.resizes, st.fails,
	      poll_err ? strerror(poll_err) : "never failed");
}

static void check_resize(void)
{
	connect_pair();
	src_mr = ibv_reg_mr(A.pd, target, sizeof(target), IBV_ACCESS_LOCAL_WRITE);
	dst_mr = ibv_reg_mr(B.pd, target, sizeof(target),
			    IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	if (!src_mr || !dst_mr)
		vp_die_errno("ibv_reg_mr");
	if (ibv_resize_cq(A.cq, 64))
		vp_die_errno("resize");
	check_resize_waiting();
	check_resize_stream();
	ibv_destroy_qp(A.qp);
	ibv_destroy_qp(B.qp);
	ibv_dereg_mr(src_mr);
	ibv_dereg_mr(dst_mr);
}

int main(int argc, char **argv)
{
	const char *a = "mbcf1", *b = "mbcf0";
	int opt;

	while ((opt = getopt(argc, argv, "a:b:s:")) != -1) {
		switch (opt) {
		case 'a': a = optarg; break;
		case 'b': b = optarg; break;
		case 's': seed = strtoul(optarg, NULL, 0); break;
		default:
			fprintf(stderr, "usage: %s -a DEV -b DEV [-s SEED]\n", argv[0]);
			return 2;
		}
	}
	printf("verbs_query: %s -> %s, seed %u\n", a, b, seed);
	open_side(&A, a);
	open_side(&B, b);
	check_device(&A);
	check_port(&A);
	B.cq = ibv_create_cq(B.ctx, 16, NULL, NULL, 0);
	if (!B.cq)
		vp_die_errno("ibv_create_cq");
	check_query_qp(IBV_QPT_RC);
	check_query_qp(IBV_QPT_UC);
	check_resize();
	ibv_destroy_cq(A.cq);
	ibv_destroy_cq(B.cq);
	ibv_dealloc_pd(A.pd);
	ibv_dealloc_pd(B.pd);
	ibv_close_device(A.ctx);
	ibv_close_device(B.ctx);
	printf("verbs_query: %d failure(s)\n", vp_fails);
	return vp_fails > 100 ? 100 : vp_fails;
}
