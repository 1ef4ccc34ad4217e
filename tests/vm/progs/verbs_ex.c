// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * The extended verbs surface with real traffic and exact values: the
 * work-request API (ibv_wr_*), extended CQs (ibv_start_poll ...), memory
 * windows of type 1 and 2, UC QPs (also under netem loss), RC/UC/UD QPs
 * from every ibv_create_qp_ex mask programs use.  Run inside the guest by
 * tests/vm/verbs_ex.sh.
 *
 *   mbcf_verbs_ex [-a DEV] [-b DEV] [-s SEED] [-L PCT,...] [-E CMD] [-X CMD]
 *                 [-P] CASE|GROUP...
 *
 * Both QPs live in this one process: QP A on device -a (the requester,
 * default mbcf1 in ns1's veth), QP B on device -b (the responder, default
 * mbcf0).  -a mbcf0 -b mbcf0 is the same-device loopback; -a rxe0 -b rxe0
 * runs the same cases on the reference device.  Every QP but
 * qp_create_ex's is created with
 * ibv_create_qp_ex(IBV_QP_INIT_ATTR_SEND_OPS_FLAGS) on CQs made by
 * ibv_create_cq_ex(), and every completion is read with ibv_start_poll /
 * ibv_next_poll / ibv_end_poll and every ibv_wc_read_* the CQ offers.
 *
 * Every case builds fresh QPs and prints one line, "PASS <case> [A-B]: ..."
 * or "FAIL <case> [A-B]: expected ... got ..."; the exit status is the
 * number of failed cases (capped at 100), 2 for usage or setup errors.
 * Groups: wr, cq, mw, uc, all.  `-l` lists the cases.
 *
 *   mbcf_verbs_ex [-a DEV] [-b DEV] hold
 *
 * holds a pair with bound windows of both types and writes through them
 * going on, until killed.
 *
 * uc_loss and uc_reuse turn netem on for the link A sends through with -E
 * (a printf format taking netem's arguments, default: veth1 in ns1) -- loss
 * of each percentage of -L (default 5,20), or a delay -- and off with -X.
 *
 * -P reads completions with ibv_poll_cq instead (cq_poll is skipped): for
 * a reference device whose extended CQ cannot be used, as rxe's in
 * rdma-core 44 (its ibv_next_poll unlocks and moves the consumer index,
 * then ibv_end_poll does both again; fixed upstream later).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <endian.h>
#include <errno.h>
#include <infiniband/verbs.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "vmprog.h"

#define CQ_DEPTH	512
#define SQ_DEPTH	64
#define RQ_DEPTH	256	/* uc_loss posts 132 receives at once */
#define MAX_INLINE	256
#define PAGE		4096

static const char *dev_a = "mbcf1", *dev_b = "mbcf0";
static const char *netem_fmt =
	"ip netns exec ns1 tc qdisc replace dev veth1 root netem %s";
static const char *netem_off_cmd = "ip netns exec ns1 tc qdisc del dev veth1 root";
static const char *loss_list = "5,20";
static unsigned int seed = 1;
static int legacy_poll;		/* -P: ibv_poll_cq instead of ibv_start_poll */

/* ---- result of the current case ----------------------------------------- */

/* An exact value: a failure names what, the expected and the actual. */
#define EXPECT_EQ(what, want, got)					\
	do {								\
		unsigned long long w_ = (unsigned long long)(want);	\
		unsigned long long g_ = (unsigned long long)(got);	\
		if (w_ != g_)						\
			vc_fail("%s: expected %#llx, got %#llx", (what), w_, g_); \
	} while (0)

/* The reference device: a few cases skip what would crash its 6.1 kernel. */
static int on_rxe(void)
{
	return !strncmp(dev_b, "rxe", 3);
}

/* ---- completions, read through the extended CQ ---------------------------- */

/* Everything ibv_wc_read_* offers for one completion. */
struct wcx {
	uint64_t wr_id;
	enum ibv_wc_status status;
	enum ibv_wc_opcode opcode;
	uint32_t vendor_err, byte_len, qp_num, src_qp, slid;
	uint32_t imm_raw;	/* ibv_wc_read_imm_data, as returned (network order) */
	uint32_t inv_rkey;	/* ibv_wc_read_invalidated_rkey */
	unsigned int wc_flags;
	uint8_t sl, dlid_path_bits;
};

/* ---- the two sides --------------------------------------------------------- */

struct side {
	const char *name;
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq_ex *cqx;
	struct ibv_qp *qp;
	struct ibv_qp_ex *qpx;
	enum ibv_qp_type type;
	struct ibv_qp_cap cap;		/* as ibv_create_qp_ex granted it */
	union ibv_gid gid;
	uint32_t psn;
	uint32_t peer_qpn;
	struct wcx q[CQ_DEPTH];		/* taken from the CQ, not yet looked at */
	unsigned int qh, qt;
};

static struct side A, B;

#define RC_OPS (IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM | \
		IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM |		\
		IBV_QP_EX_WITH_RDMA_READ | IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP |	\
		IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD | IBV_QP_EX_WITH_BIND_MW |	\
		IBV_QP_EX_WITH_LOCAL_INV | IBV_QP_EX_WITH_SEND_WITH_INV)
#define UC_OPS (IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM | \
		IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM |		\
		IBV_QP_EX_WITH_BIND_MW | IBV_QP_EX_WITH_SEND_WITH_INV)

#define ALL_REMOTE (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |	\
		    IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC)
#define MW_REMOTE (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |	\
		   IBV_ACCESS_REMOTE_ATOMIC)

static void open_side(struct side *s, const char *name)
{
	memset(s, 0, sizeof(*s));
	s->name = name;
	s->ctx = vp_open(name);
	s->pd = ibv_alloc_pd(s->ctx);
	if (!s->pd)
		vp_die_errno("ibv_alloc_pd");
	if (ibv_query_gid(s->ctx, 1, 0, &s->gid))
		vp_die_errno("ibv_query_gid");
}

static void close_side(struct side *s)
{
	ibv_dealloc_pd(s->pd);
	ibv_close_device(s->ctx);
}

/* A QP of @type with every send op its type allows, on an extended CQ. */
static void make_qp(struct side *s, enum ibv_qp_type type)
{
	struct ibv_cq_init_attr_ex ca = {
		.cqe = CQ_DEPTH,
		.wc_flags = IBV_WC_STANDARD_FLAGS,
	};
	struct ibv_qp_init_attr_ex ia = {
		.qp_type = type,
		.cap = { .max_send_wr = SQ_DEPTH, .max_recv_wr = RQ_DEPTH,
			 .max_send_sge = 4, .max_recv_sge = 4,
			 .max_inline_data = MAX_INLINE },
		.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS,
		.pd = s->pd,
		.send_ops_flags = type == IBV_QPT_RC ? RC_OPS : UC_OPS,
	};

	s->cqx = ibv_create_cq_ex(s->ctx, &ca);
	if (!s->cqx)
		vp_die_errno("ibv_create_cq_ex");
	ia.send_cq = ia.recv_cq = ibv_cq_ex_to_cq(s->cqx);
	s->qp = ibv_create_qp_ex(s->ctx, &ia);
	if (!s->qp)
		vp_die_errno("ibv_create_qp_ex");
	s->qpx = ibv_qp_to_qp_ex(s->qp);
	if (!s->qpx)
		vp_die_errno("ibv_qp_to_qp_ex");
	s->type = type;
	s->cap = ia.cap;
	s->qh = s->qt = 0;
}

static void free_qp(struct side *s)
{
	if (s->qp && ibv_destroy_qp(s->qp))
		vp_die_errno("ibv_destroy_qp");
	s->qp = NULL;
	s->qpx = NULL;
	if (s->cqx && ibv_destroy_cq(ibv_cq_ex_to_cq(s->cqx)))
		vp_die_errno("ibv_destroy_cq");
	s->cqx = NULL;
}

static int to_init(struct side *s)
{
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_INIT,
		.port_num = 1,
		.qp_access_flags = s->type == IBV_QPT_RC ? ALL_REMOTE :
				   IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE,
	};

	return ibv_modify_qp(s->qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX |
			     IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
}

/* RTR with the attributes verbs requires of the QP's type (RC adds the
 * responder's read/atomic depth and RNR timer). */
static int to_rtr(struct side *s, const struct side *peer)
{
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_RTR,
		.path_mtu = IBV_MTU_1024,
		.dest_qp_num = peer->qp->qp_num,
		.rq_psn = peer->psn,
		.max_dest_rd_atomic = 16,
		.min_rnr_timer = 12,
		.ah_attr = {
			.is_global = 1,
			.grh = { .dgid = peer->gid, .sgid_index = 0, .hop_limit = 1 },
			.port_num = 1,
		},
	};
	int mask = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
		   IBV_QP_DEST_QPN | IBV_QP_RQ_PSN;

	if (s->type == IBV_QPT_RC)
		mask |= IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
	s->peer_qpn = peer->qp->qp_num;
	return ibv_modify_qp(s->qp, &a, mask);
}

static int to_rts(struct side *s)
{
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_RTS,
		.sq_psn = s->psn,
		.timeout = 14,		/* 4.096 us * 2^14 = 67 ms */
		.retry_cnt = 7,
		.rnr_retry = 7,
		.max_rd_atomic = 16,
	};
	int mask = IBV_QP_STATE | IBV_QP_SQ_PSN;

	if (s->type == IBV_QPT_RC)
		mask |= IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
			IBV_QP_MAX_QP_RD_ATOMIC;
	return ibv_modify_qp(s->qp, &a, mask);
}

/* Fresh QPs for a and b, connected and in RTS; psns near the 24-bit wrap. */
static void pair_make(struct side *a, struct side *b, enum ibv_qp_type type)
{
	make_qp(a, type);
	make_qp(b, type);
	a->psn = 0xfffff0 - (rand_r(&seed) & 0xff);
	b->psn = 0xffffe0 - (rand_r(&seed) & 0xff);
	if (to_init(a) || to_init(b) || to_rtr(a, b) || to_rtr(b, a) ||
	    to_rts(a) || to_rts(b))
		vp_die_errno("connect (ibv_modify_qp)");
}

static void pair_free(struct side *a, struct side *b)
{
	free_qp(a);
	free_qp(b);
}

static void pair_up(void)
{
	pair_make(&A, &B, IBV_QPT_RC);
}

static void pair_down(void)
{
	pair_free(&A, &B);
}

/* After a remote error both QPs are dead: a fresh pair to go on with. */
static void pair_renew(void)
{
	pair_down();
	pair_up();
}

static void expect_state(struct side *s, enum ibv_qp_state want, const char *what)
{
	vc_expect_qp_state(s->qp, s->name, want, what);
}

/* ---- polling ------------------------------------------------------------------ */

static void wcx_read(struct ibv_cq_ex *cq, struct wcx *w)
{
	w->wr_id = cq->wr_id;
	w->status = cq->status;
	w->opcode = ibv_wc_read_opcode(cq);
	w->vendor_err = ibv_wc_read_vendor_err(cq);
	w->byte_len = ibv_wc_read_byte_len(cq);
	w->imm_raw = (uint32_t)ibv_wc_read_imm_data(cq);
	w->inv_rkey = ibv_wc_read_invalidated_rkey(cq);
	w->qp_num = ibv_wc_read_qp_num(cq);
	w->src_qp = ibv_wc_read_src_qp(cq);
	w->wc_flags = ibv_wc_read_wc_flags(cq);
	w->slid = ibv_wc_read_slid(cq);
	w->sl = ibv_wc_read_sl(cq);
	w->dlid_path_bits = ibv_wc_read_dlid_path_bits(cq);
}

/* -P: the same completions through ibv_poll_cq (a reference device whose
 * extended CQ is broken, as rxe's in rdma-core 44, can still be compared). */
static int cq_take_legacy(struct side *s)
{
	struct ibv_wc wc;
	int ret, n = 0;

	while (s->qt - s->qh < CQ_DEPTH &&
	       (ret = ibv_poll_cq(ibv_cq_ex_to_cq(s->cqx), 1, &wc)) == 1) {
		s->q[s->qt++ % CQ_DEPTH] = (struct wcx){
			.wr_id = wc.wr_id, .status = wc.status, .opcode = wc.opcode,
			.vendor_err = wc.vendor_err, .byte_len = wc.byte_len,
			.imm_raw = wc.imm_data, .inv_rkey = wc.invalidated_rkey,
			.qp_num = wc.qp_num, .src_qp = wc.src_qp, .slid = wc.slid,
			.wc_flags = wc.wc_flags, .sl = wc.sl,
			.dlid_path_bits = wc.dlid_path_bits,
		};
		n++;
	}
	return n;
}

/*
 * Everything the CQ holds now, in one start_poll / next_poll ... /
 * end_poll pass, into s->q.  Returns how many were taken, -1 on error.
 */
static int cq_take(struct side *s)
{
	struct ibv_poll_cq_attr attr = { .comp_mask = 0 };
	int ret, n = 0;

	if (legacy_poll)
		return cq_take_legacy(s);
	ret = ibv_start_poll(s->cqx, &attr);
	if (ret == ENOENT)
		return 0;
	if (ret) {
		vc_fail("ibv_start_poll on %s: %s", s->name, strerror(ret));
		return -1;
	}
	do {
		if (s->qt - s->qh >= CQ_DEPTH) {
			vc_fail("more than %d completions waiting on %s", CQ_DEPTH,
			     s->name);
			break;
		}
		wcx_read(s->cqx, &s->q[s->qt++ % CQ_DEPTH]);
		n++;
		ret = ibv_next_poll(s->cqx);
	} while (!ret);
	ibv_end_poll(s->cqx);
	if (ret && ret != ENOENT) {
		vc_fail("ibv_next_poll on %s: %s", s->name, strerror(ret));
		return -1;
	}
	return n;
}

/* The next completion of s within timeout_s: 1, or 0 if none came. */
static int get_wc(struct side *s, struct wcx *w, double timeout_s)
{
	double end = vp_now() + timeout_s;

	for (;;) {
		if (s->qh != s->qt) {
			*w = s->q[s->qh++ % CQ_DEPTH];
			return 1;
		}
		if (cq_take(s) < 0)
			return 0;
		if (s->qh != s->qt)
			continue;
		if (vp_now() > end)
			return 0;
		vp_sleep_us(200);
	}
}

static void expect_no_wc(struct side *s, double wait_s, const char *what)
{
	struct wcx w;

	if (get_wc(s, &w, wait_s))
		vc_fail("%s: unexpected completion on %s (wr_id %lu, %s, opcode %d)",
		     what, s->name, (unsigned long)w.wr_id,
		     ibv_wc_status_str(w.status), w.opcode);
}

static int is_recv_op(enum ibv_wc_opcode op)
{
	return op & IBV_WC_RECV;
}

/* What mbcf reports in a requester's successful completion: byte_len is
 * the length read, 8 for an atomic, else 0. */
static void check_send_fields(const struct side *s, const struct wcx *w,
			      const char *what)
{
	char buf[160];

	snprintf(buf, sizeof(buf), "%s: wr_id %lu", what, (unsigned long)w->wr_id);
	if (w->wc_flags)
		vc_fail("%s wc_flags %#x, expected 0", buf, w->wc_flags);
	if (w->src_qp || w->slid || w->sl || w->dlid_path_bits || w->vendor_err)
		vc_fail("%s src_qp %u slid %u sl %u dlid_path_bits %u vendor_err %u, expected 0",
		     buf, w->src_qp, w->slid, w->sl, w->dlid_path_bits, w->vendor_err);
	if ((w->opcode == IBV_WC_COMP_SWAP || w->opcode == IBV_WC_FETCH_ADD) &&
	    w->byte_len != 8)
		vc_fail("%s atomic byte_len %u, expected 8", buf, w->byte_len);
	if ((w->opcode == IBV_WC_SEND || w->opcode == IBV_WC_RDMA_WRITE ||
	     w->opcode == IBV_WC_BIND_MW || w->opcode == IBV_WC_LOCAL_INV) &&
	    w->byte_len != 0)
		vc_fail("%s opcode %d byte_len %u, expected 0", buf, w->opcode,
		     w->byte_len);
	(void)s;
}

/*
 * The next completion on s is wr_id with `status` (and opcode `op` unless
 * op < 0; verbs leaves the opcode undefined on errors).  Checks qp_num,
 * and on a successful requester completion every other field.
 */
static int expect_wc(struct side *s, uint64_t wr_id, enum ibv_wc_status status,
		     int op, double timeout_s, struct wcx *out, const char *what)
{
	struct wcx w;

	if (!get_wc(s, &w, timeout_s)) {
		vc_fail("%s: expected %s (wr_id %lu) on %s, got no completion in %.1f s",
		     what, ibv_wc_status_str(status), (unsigned long)wr_id,
		     s->name, timeout_s);
		return -1;
	}
	if (out)
		*out = w;
	if (w.wr_id != wr_id || w.status != status) {
		vc_fail("%s: expected wr_id %lu %s on %s, got wr_id %lu %s (%d)",
		     what, (unsigned long)wr_id, ibv_wc_status_str(status), s->name,
		     (unsigned long)w.wr_id, ibv_wc_status_str(w.status), w.status);
		return -1;
	}
	if (op >= 0 && w.opcode != (enum ibv_wc_opcode)op) {
		vc_fail("%s: wr_id %lu opcode %d, expected %d", what,
		     (unsigned long)wr_id, w.opcode, op);
		return -1;
	}
	if (w.qp_num != s->qp->qp_num) {
		vc_fail("%s: qp_num %u, expected %u", what, w.qp_num, s->qp->qp_num);
		return -1;
	}
	if (status == IBV_WC_SUCCESS && !is_recv_op(w.opcode))
		check_send_fields(s, &w, what);
	return 0;
}

/*
 * A successful receive completion: opcode, byte_len, wc_flags exactly
 * `flags`, the immediate (network order, as sent) or invalidated rkey, the
 * peer as src_qp, no LID/SL fields.
 */
static int expect_recv(struct side *s, uint64_t wr_id, enum ibv_wc_opcode op,
		       uint32_t byte_len, unsigned int flags, uint32_t imm_or_inv,
		       double timeout_s, const char *what)
{
	struct wcx w;

	if (expect_wc(s, wr_id, IBV_WC_SUCCESS, op, timeout_s, &w, what))
		return -1;
	if (w.byte_len != byte_len)
		vc_fail("%s: byte_len %u, expected %u", what, w.byte_len, byte_len);
	if (w.wc_flags != flags)
		vc_fail("%s: wc_flags %#x, expected %#x", what, w.wc_flags, flags);
	if ((flags & IBV_WC_WITH_IMM) && w.imm_raw != imm_or_inv)
		vc_fail("%s: imm_data %#x, expected %#x", what, w.imm_raw, imm_or_inv);
	if ((flags & IBV_WC_WITH_INV) && w.inv_rkey != imm_or_inv)
		vc_fail("%s: invalidated_rkey %#x, expected %#x", what, w.inv_rkey,
		     imm_or_inv);
	if (w.src_qp != s->peer_qpn)
		vc_fail("%s: src_qp %u, expected the peer %u", what, w.src_qp,
		     s->peer_qpn);
	if (w.slid || w.sl || w.dlid_path_bits || w.vendor_err)
		vc_fail("%s: slid %u sl %u dlid_path_bits %u vendor_err %u, expected 0",
		     what, w.slid, w.sl, w.dlid_path_bits, w.vendor_err);
	return vc_fails() ? -1 : 0;
}

/* ---- memory ------------------------------------------------------------------ */

/* len bytes at page offset `off`, guarded, registered if access >= 0 */
static struct vp_gbuf buf_new(struct side *s, size_t len, size_t off, int access)
{
	return vp_gbuf_new(s->pd, len, off, access);
}

/* Registered memory of B and what it must hold, byte for byte. */
struct target {
	struct vp_gbuf b;
	uint8_t *model;
};

static struct target target_new(struct side *s, size_t len, size_t off,
				int access, uint8_t tag)
{
	struct target t = { .b = buf_new(s, len, off, access) };

	t.model = malloc(len);
	if (!t.model)
		vp_die_errno("malloc");
	vp_fill_tag8(t.b.p, len, tag);
	memcpy(t.model, t.b.p, len);
	return t;
}

static void target_free(struct target *t)
{
	vp_gbuf_free(&t->b);
	free(t->model);
}

static uint64_t target_addr(const struct target *t, size_t off)
{
	return (uintptr_t)t->b.p + off;
}

/* Every byte of the target as the model says, the guards untouched. */
static void target_check(const struct target *t, const char *what)
{
	size_t i;

	for (i = 0; i < t->b.len; i++)
		if (t->b.p[i] != t->model[i]) {
			vc_fail("%s: target byte %zu is %#x, expected %#x", what, i,
			     t->b.p[i], t->model[i]);
			break;
		}
	vp_gbuf_check_guards(&t->b, PAGE, what);
}

/* ---- posting through the work-request API --------------------------------------- */

/* One request as the WR API builds it. */
struct xop {
	enum ibv_wr_opcode op;
	uint64_t wr_id;
	unsigned int flags;		/* wr_flags */
	uint32_t rkey;
	uint64_t raddr;
	uint32_t imm;			/* host order; sent as htonl */
	uint64_t cmp_add, swap;
	uint32_t inv;			/* LOCAL_INV / SEND_WITH_INV */
	const struct ibv_sge *sg;	/* set_sge (1) or set_sge_list (else) */
	size_t nsg;
	const struct ibv_data_buf *inl;	/* set_inline_data (1) or _list */
	size_t ninl;
	int use_inline;
	struct ibv_mw *mw;		/* BIND_MW */
	uint32_t new_rkey;
	struct ibv_mw_bind_info bind;
};

static void xop_data(struct ibv_qp_ex *qx, const struct xop *o)
{
	if (o->use_inline && o->ninl == 1)
		ibv_wr_set_inline_data(qx, o->inl[0].addr, o->inl[0].length);
	else if (o->use_inline)
		ibv_wr_set_inline_data_list(qx, o->ninl, o->inl);
	else if (o->nsg == 1)
		ibv_wr_set_sge(qx, o->sg[0].lkey, o->sg[0].addr, o->sg[0].length);
	else
		ibv_wr_set_sge_list(qx, o->nsg, o->sg);
}

static void xop_build(struct ibv_qp_ex *qx, const struct xop *o)
{
	qx->wr_id = o->wr_id;
	qx->wr_flags = o->flags;
	switch (o->op) {
	case IBV_WR_RDMA_WRITE:
		ibv_wr_rdma_write(qx, o->rkey, o->raddr);
		break;
	case IBV_WR_RDMA_WRITE_WITH_IMM:
		ibv_wr_rdma_write_imm(qx, o->rkey, o->raddr, htonl(o->imm));
		break;
	case IBV_WR_RDMA_READ:
		ibv_wr_rdma_read(qx, o->rkey, o->raddr);
		break;
	case IBV_WR_SEND:
		ibv_wr_send(qx);
		break;
	case IBV_WR_SEND_WITH_IMM:
		ibv_wr_send_imm(qx, htonl(o->imm));
		break;
	case IBV_WR_SEND_WITH_INV:
		ibv_wr_send_inv(qx, o->inv);
		break;
	case IBV_WR_ATOMIC_CMP_AND_SWP:
		ibv_wr_atomic_cmp_swp(qx, o->rkey, o->raddr, o->cmp_add, o->swap);
		break;
	case IBV_WR_ATOMIC_FETCH_AND_ADD:
		ibv_wr_atomic_fetch_add(qx, o->rkey, o->raddr, o->cmp_add);
		break;
	case IBV_WR_BIND_MW:
		ibv_wr_bind_mw(qx, o->mw, o->new_rkey, &o->bind);
		return;		/* no data */
	case IBV_WR_LOCAL_INV:
		ibv_wr_local_inv(qx, o->inv);
		return;
	default:
		fprintf(stderr, "xop_build: opcode %d\n", o->op);
		exit(2);
	}
	xop_data(qx, o);
}

/* One batch: ibv_wr_start, n requests, ibv_wr_complete; its return value. */
static int xpost(struct side *s, const struct xop *ops, int n)
{
	int i;

	ibv_wr_start(s->qpx);
	for (i = 0; i < n; i++)
		xop_build(s->qpx, &ops[i]);
	return ibv_wr_complete(s->qpx);
}

/* As xpost, and a failure is a failure of the case. */
static int xpost_ok(struct side *s, const struct xop *ops, int n, const char *what)
{
	int ret = xpost(s, ops, n);

	if (ret)
		vc_fail("%s: ibv_wr_complete on %s: %s", what, s->name, strerror(ret));
	return ret;
}

static int post_recv(struct side *s, const struct ibv_sge *sg, int nsge,
		     uint64_t wr_id)
{
	struct ibv_recv_wr wr = {
		.wr_id = wr_id, .sg_list = (struct ibv_sge *)sg, .num_sge = nsge,
	}, *bad;
	int ret = ibv_post_recv(s->qp, &wr, &bad);

	if (ret)
		vc_fail("ibv_post_recv on %s: %s", s->name, strerror(ret));
	return ret;
}

static int post_send_ok(struct side *s, struct ibv_send_wr *wr, const char *what)
{
	struct ibv_send_wr *bad;
	int ret = ibv_post_send(s->qp, wr, &bad);

	if (ret)
		vc_fail("%s: ibv_post_send on %s: %s", what, s->name, strerror(ret));
	return ret;
}

/* First index where p differs from the pattern of vp_fill_tag8(tag) at offset
 * `start`, or -1. */
static long diff_pat(const uint8_t *p, size_t len, size_t start, uint8_t tag)
{
	size_t i;

	for (i = 0; i < len; i++)
		if (p[i] != vp_tag8(start + i, tag))
			return (long)i;
	return -1;
}

static uint64_t model_u64(const struct target *t, size_t off)
{
	uint64_t v;

	memcpy(&v, t->model + off, 8);
	return v;
}

static void model_set_u64(struct target *t, size_t off, uint64_t v)
{
	memcpy(t->model + off, &v, 8);
}

/* ---- 1. the work-request API ------------------------------------------------------ */

/*
 * Every data opcode once through ibv_wr_*, each data setter, the values of
 * every completion, the bytes of every target and receive buffer.
 */
static void c_wr_ops(void)
{
	struct target t;
	struct vp_gbuf l, r;
	struct ibv_sge sg[3], rsg;
	struct ibv_data_buf db[3];
	uint8_t src[3][MAX_INLINE], keep[MAX_INLINE];
	uint32_t imm = (uint32_t)rand_r(&seed);
	uint64_t old, want;
	struct xop o;
	struct wcx w;

	pair_up();
	t = target_new(&B, 16384, 64, ALL_REMOTE, 0x11);
	l = buf_new(&A, 16384, 0, IBV_ACCESS_LOCAL_WRITE);
	r = buf_new(&B, 8192, 0, IBV_ACCESS_LOCAL_WRITE);
	vp_fill_tag8(l.p, l.len, 0x40);
	vp_fill_tag8(r.p, r.len, 0x99);
	rsg = vp_gbuf_sge(&r, 0, (uint32_t)r.len);

	/* rdma_write + set_sge: 3000 bytes (3 frames) from an odd offset */
	sg[0] = vp_gbuf_sge(&l, 7, 3000);
	o = (struct xop){ .op = IBV_WR_RDMA_WRITE, .wr_id = 1, .flags = IBV_SEND_SIGNALED,
			  .rkey = t.b.mr->rkey, .raddr = target_addr(&t, 100),
			  .sg = sg, .nsg = 1 };
	if (!xpost_ok(&A, &o, 1, "rdma_write") &&
	    !expect_wc(&A, 1, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, 10, NULL, "rdma_write"))
		memcpy(t.model + 100, l.p + 7, 3000);
	target_check(&t, "rdma_write");

	/* rdma_write_imm + set_sge_list (3 SGEs, one of 1 byte) */
	post_recv(&B, &rsg, 1, 100);
	sg[0] = vp_gbuf_sge(&l, 3000, 1000);
	sg[1] = vp_gbuf_sge(&l, 5000, 1);
	sg[2] = vp_gbuf_sge(&l, 6000, 2500);
	o = (struct xop){ .op = IBV_WR_RDMA_WRITE_WITH_IMM, .wr_id = 2,
			  .flags = IBV_SEND_SIGNALED, .rkey = t.b.mr->rkey,
			  .raddr = target_addr(&t, 5000), .imm = imm, .sg = sg, .nsg = 3 };
	if (!xpost_ok(&A, &o, 1, "rdma_write_imm") &&
	    !expect_wc(&A, 2, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, 10, NULL, "rdma_write_imm")) {
		memcpy(t.model + 5000, l.p + 3000, 1000);
		memcpy(t.model + 6000, l.p + 5000, 1);
		memcpy(t.model + 6001, l.p + 6000, 2500);
	}
	expect_recv(&B, 100, IBV_WC_RECV_RDMA_WITH_IMM, 3501, IBV_WC_WITH_IMM,
		    htonl(imm), 10, "rdma_write_imm at the responder");
	target_check(&t, "rdma_write_imm");
	if (diff_pat(r.p, r.len, 0, 0x99) >= 0)
		vc_fail("rdma_write_imm wrote into the receive buffer it consumed");

	/* rdma_read + set_sge_list: scattered into two pieces */
	memset(l.p + 8192, 0, 8192);
	sg[0] = vp_gbuf_sge(&l, 8192, 1500);
	sg[1] = vp_gbuf_sge(&l, 12000, 1500);
	o = (struct xop){ .op = IBV_WR_RDMA_READ, .wr_id = 3, .flags = IBV_SEND_SIGNALED,
			  .rkey = t.b.mr->rkey, .raddr = target_addr(&t, 100),
			  .sg = sg, .nsg = 2 };
	if (!xpost_ok(&A, &o, 1, "rdma_read") &&
	    !expect_wc(&A, 3, IBV_WC_SUCCESS, IBV_WC_RDMA_READ, 10, &w, "rdma_read")) {
		EXPECT_EQ("rdma_read byte_len", 3000, w.byte_len);
		if (memcmp(l.p + 8192, t.model + 100, 1500) ||
		    memcmp(l.p + 12000, t.model + 1600, 1500))
			vc_fail("rdma_read: bytes differ from the target");
		if (vp_diff_byte(l.p + 8192 + 1500, 12000 - 8192 - 1500, 0) >= 0 ||
		    vp_diff_byte(l.p + 13500, 16384 - 13500, 0) >= 0)
			vc_fail("rdma_read wrote outside its SGEs");
	}

	/* send + set_inline_data: the source is reused at once */
	vp_fill_tag8(src[0], MAX_INLINE, 0x61);
	memcpy(keep, src[0], MAX_INLINE);
	post_recv(&B, &rsg, 1, 101);
	db[0] = (struct ibv_data_buf){ .addr = src[0], .length = 200 };
	o = (struct xop){ .op = IBV_WR_SEND, .wr_id = 4, .flags = IBV_SEND_SIGNALED,
			  .inl = db, .ninl = 1, .use_inline = 1 };
	if (!xpost_ok(&A, &o, 1, "send inline")) {
		memset(src[0], 0, MAX_INLINE);	/* copied at post: may change now */
		expect_wc(&A, 4, IBV_WC_SUCCESS, IBV_WC_SEND, 10, NULL, "send inline");
	}
	if (!expect_recv(&B, 101, IBV_WC_RECV, 200, 0, 0, 10, "send inline received") &&
	    (memcmp(r.p, keep, 200) || diff_pat(r.p + 200, r.len - 200, 200, 0x99) >= 0))
		vc_fail("send inline: receive buffer bytes differ");

	/* send_imm + set_inline_data_list (10 + 0 + 90 bytes) */
	vp_fill_tag8(r.p, r.len, 0x99);
	vp_fill_tag8(src[0], MAX_INLINE, 0x71);
	vp_fill_tag8(src[1], MAX_INLINE, 0x72);
	vp_fill_tag8(src[2], MAX_INLINE, 0x73);
	post_recv(&B, &rsg, 1, 102);
	db[0] = (struct ibv_data_buf){ .addr = src[0], .length = 10 };
	db[1] = (struct ibv_data_buf){ .addr = src[1], .length = 0 };
	db[2] = (struct ibv_data_buf){ .addr = src[2] + 5, .length = 90 };
	o = (struct xop){ .op = IBV_WR_SEND_WITH_IMM, .wr_id = 5, .flags = IBV_SEND_SIGNALED,
			  .imm = imm + 1, .inl = db, .ninl = 3, .use_inline = 1 };
	if (!xpost_ok(&A, &o, 1, "send_imm inline list"))
		expect_wc(&A, 5, IBV_WC_SUCCESS, IBV_WC_SEND, 10, NULL, "send_imm inline list");
	if (!expect_recv(&B, 102, IBV_WC_RECV, 100, IBV_WC_WITH_IMM, htonl(imm + 1), 10,
			 "send_imm inline list received") &&
	    (memcmp(r.p, src[0], 10) || memcmp(r.p + 10, src[2] + 5, 90) ||
	     diff_pat(r.p + 100, r.len - 100, 100, 0x99) >= 0))
		vc_fail("send_imm inline list: receive buffer bytes differ");

	/* rdma_write + set_inline_data_list (64 + 100 bytes) */
	db[0] = (struct ibv_data_buf){ .addr = src[0], .length = 64 };
	db[1] = (struct ibv_data_buf){ .addr = src[1], .length = 100 };
	memcpy(t.model + 9000, src[0], 64);
	memcpy(t.model + 9064, src[1], 100);
	o = (struct xop){ .op = IBV_WR_RDMA_WRITE, .wr_id = 6, .flags = IBV_SEND_SIGNALED,
			  .rkey = t.b.mr->rkey, .raddr = target_addr(&t, 9000),
			  .inl = db, .ninl = 2, .use_inline = 1 };
	if (!xpost_ok(&A, &o, 1, "rdma_write inline list")) {
		memset(src, 0, sizeof(src));
		expect_wc(&A, 6, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, 10, NULL,
			  "rdma_write inline list");
	}
	target_check(&t, "rdma_write inline list");

	/* atomic_fetch_add, atomic_cmp_swp (match), atomic_cmp_swp (no match) */
	sg[0] = vp_gbuf_sge(&l, 0, 8);
	old = model_u64(&t, 12288);
	o = (struct xop){ .op = IBV_WR_ATOMIC_FETCH_AND_ADD, .wr_id = 7,
			  .flags = IBV_SEND_SIGNALED, .rkey = t.b.mr->rkey,
			  .raddr = target_addr(&t, 12288),
			  .cmp_add = 0x0101010101010101ull, .sg = sg, .nsg = 1 };
	if (!xpost_ok(&A, &o, 1, "fetch_add") &&
	    !expect_wc(&A, 7, IBV_WC_SUCCESS, IBV_WC_FETCH_ADD, 10, NULL, "fetch_add")) {
		EXPECT_EQ("fetch_add original value", old, *(uint64_t *)l.p);
		model_set_u64(&t, 12288, old + 0x0101010101010101ull);
	}
	old = model_u64(&t, 12288);
	want = 0xfeedfacecafebeefull ^ seed;
	o = (struct xop){ .op = IBV_WR_ATOMIC_CMP_AND_SWP, .wr_id = 8,
			  .flags = IBV_SEND_SIGNALED, .rkey = t.b.mr->rkey,
			  .raddr = target_addr(&t, 12288), .cmp_add = old,
			  .swap = want, .sg = sg, .nsg = 1 };
	if (!xpost_ok(&A, &o, 1, "cmp_swp") &&
	    !expect_wc(&A, 8, IBV_WC_SUCCESS, IBV_WC_COMP_SWAP, 10, NULL, "cmp_swp")) {
		EXPECT_EQ("cmp_swp original value", old, *(uint64_t *)l.p);
		model_set_u64(&t, 12288, want);
	}
	o.wr_id = 9;
	o.cmp_add = ~want;	/* no match: memory unchanged */
	o.swap = 1;
	if (!xpost_ok(&A, &o, 1, "cmp_swp, no match") &&
	    !expect_wc(&A, 9, IBV_WC_SUCCESS, IBV_WC_COMP_SWAP, 10, NULL, "cmp_swp, no match"))
		EXPECT_EQ("cmp_swp (no match) original value", want, *(uint64_t *)l.p);
	target_check(&t, "atomics");

	expect_no_wc(&A, 0.05, "requester after the last one");
	expect_no_wc(&B, 0.01, "responder after the last one");
	expect_state(&A, IBV_QPS_RTS, "requester");
	expect_state(&B, IBV_QPS_RTS, "responder");
	target_free(&t);
	vp_gbuf_free(&l);
	vp_gbuf_free(&r);
	pair_down();
}

/*
 * Zero-length operations (verbs: no key is checked, nothing moves): write
 * and write_imm with a key that names nothing, read with byte_len 0, send
 * and send_imm into a receive that stays untouched.
 */
static void c_wr_zero_len(void)
{
	const uint32_t bogus = 0xabcdef00u | (seed & 0xff);
	struct target t;
	struct vp_gbuf l, r;
	struct ibv_sge sg, rsg;
	struct ibv_data_buf db;
	uint8_t one = 0x5a;
	struct xop o;
	struct wcx w;

	pair_up();
	t = target_new(&B, 4096, 0, ALL_REMOTE, 0x12);
	l = buf_new(&A, 4096, 0, IBV_ACCESS_LOCAL_WRITE);
	r = buf_new(&B, 4096, 0, IBV_ACCESS_LOCAL_WRITE);
	vp_fill_tag8(l.p, l.len, 0x41);
	vp_fill_tag8(r.p, r.len, 0x98);
	rsg = vp_gbuf_sge(&r, 0, 4096);

	sg = vp_gbuf_sge(&l, 0, 0);
	o = (struct xop){ .op = IBV_WR_RDMA_WRITE, .wr_id = 1, .flags = IBV_SEND_SIGNALED,
			  .rkey = bogus, .raddr = 0x1000, .sg = &sg, .nsg = 1 };
	if (!xpost_ok(&A, &o, 1, "0-byte rdma_write (set_sge)"))
		expect_wc(&A, 1, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, 10, NULL,
			  "0-byte rdma_write, no valid key");
	o = (struct xop){ .op = IBV_WR_RDMA_WRITE, .wr_id = 2, .flags = IBV_SEND_SIGNALED,
			  .rkey = t.b.mr->rkey, .raddr = target_addr(&t, 0),
			  .sg = NULL, .nsg = 0 };
	if (!xpost_ok(&A, &o, 1, "0-byte rdma_write (set_sge_list 0)"))
		expect_wc(&A, 2, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, 10, NULL,
			  "0-byte rdma_write, no SGE");
	o = (struct xop){ .op = IBV_WR_RDMA_READ, .wr_id = 3, .flags = IBV_SEND_SIGNALED,
			  .rkey = bogus, .raddr = 0x2000, .sg = &sg, .nsg = 1 };
	if (!xpost_ok(&A, &o, 1, "0-byte rdma_read") &&
	    !expect_wc(&A, 3, IBV_WC_SUCCESS, IBV_WC_RDMA_READ, 10, &w, "0-byte rdma_read"))
		EXPECT_EQ("0-byte rdma_read byte_len", 0, w.byte_len);

	post_recv(&B, &rsg, 1, 100);
	post_recv(&B, &rsg, 1, 101);
	post_recv(&B, &rsg, 1, 102);
	o = (struct xop){ .op = IBV_WR_SEND, .wr_id = 4, .flags = IBV_SEND_SIGNALED,
			  .sg = NULL, .nsg = 0 };
	if (!xpost_ok(&A, &o, 1, "0-byte send"))
		expect_wc(&A, 4, IBV_WC_SUCCESS, IBV_WC_SEND, 10, NULL, "0-byte send");
	expect_recv(&B, 100, IBV_WC_RECV, 0, 0, 0, 10, "0-byte send received");
	db = (struct ibv_data_buf){ .addr = &one, .length = 0 };
	o = (struct xop){ .op = IBV_WR_SEND_WITH_IMM, .wr_id = 5, .flags = IBV_SEND_SIGNALED,
			  .imm = 0x01020304, .inl = &db, .ninl = 1, .use_inline = 1 };
	if (!xpost_ok(&A, &o, 1, "0-byte send_imm (inline)"))
		expect_wc(&A, 5, IBV_WC_SUCCESS, IBV_WC_SEND, 10, NULL, "0-byte send_imm");
	expect_recv(&B, 101, IBV_WC_RECV, 0, IBV_WC_WITH_IMM, htonl(0x01020304), 10,
		    "0-byte send_imm received");
	o = (struct xop){ .op = IBV_WR_RDMA_WRITE_WITH_IMM, .wr_id = 6,
			  .flags = IBV_SEND_SIGNALED, .rkey = bogus, .raddr = 0,
			  .imm = 0x0a0b0c0d, .sg = &sg, .nsg = 1 };
	if (!xpost_ok(&A, &o, 1, "0-byte rdma_write_imm"))
		expect_wc(&A, 6, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, 10, NULL,
			  "0-byte rdma_write_imm");
	expect_recv(&B, 102, IBV_WC_RECV_RDMA_WITH_IMM, 0, IBV_WC_WITH_IMM,
		    htonl(0x0a0b0c0d), 10, "0-byte rdma_write_imm received");

	if (diff_pat(r.p, r.len, 0, 0x98) >= 0)
		vc_fail("a 0-byte message wrote into the receive buffer");
	target_check(&t, "after 0-byte operations");
	expect_state(&A, IBV_QPS_RTS, "requester");
	expect_state(&B, IBV_QPS_RTS, "responder");
	target_free(&t);
	vp_gbuf_free(&l);
	vp_gbuf_free(&r);
	pair_down();
}

/*
 * Eight requests of six opcodes in one batch, signaled and not: exactly the
 * signaled ones complete, in posting order; a read behind a write in the
 * batch sees the write; receives complete in order.
 */
static void c_wr_batch(void)
{
	struct target t;
	struct vp_gbuf l, r;
	struct ibv_sge sg[8], rsg[3];
	struct ibv_data_buf db;
	uint8_t inl[50];
	uint32_t imm = (uint32_t)rand_r(&seed);
	uint64_t old;
	struct xop o[8];
	struct wcx w;
	int i;

	pair_up();
	t = target_new(&B, 16384, 64, ALL_REMOTE, 0x13);
	l = buf_new(&A, 16384, 0, IBV_ACCESS_LOCAL_WRITE);
	r = buf_new(&B, 3 * 1024, 0, IBV_ACCESS_LOCAL_WRITE);
	vp_fill_tag8(l.p, 8192, 0x42);
	memset(l.p + 8192, 0, 8192);
	vp_fill_tag8(inl, sizeof(inl), 0x43);
	memset(r.p, 0, r.len);
	for (i = 0; i < 3; i++) {
		rsg[i] = vp_gbuf_sge(&r, (size_t)i * 1024, 1024);
		post_recv(&B, &rsg[i], 1, 200 + (uint64_t)i);
	}
	old = model_u64(&t, 12288);

	memset(o, 0, sizeof(o));
	sg[0] = vp_gbuf_sge(&l, 0, 1000);
	o[0] = (struct xop){ .op = IBV_WR_RDMA_WRITE, .wr_id = 10, .flags = IBV_SEND_SIGNALED,
			     .rkey = t.b.mr->rkey, .raddr = target_addr(&t, 0), .sg = &sg[0], .nsg = 1 };
	sg[1] = vp_gbuf_sge(&l, 1000, 700);
	sg[2] = vp_gbuf_sge(&l, 3000, 1300);
	o[1] = (struct xop){ .op = IBV_WR_RDMA_WRITE, .wr_id = 11, .flags = 0,
			     .rkey = t.b.mr->rkey, .raddr = target_addr(&t, 1000), .sg = &sg[1], .nsg = 2 };
	sg[3] = vp_gbuf_sge(&l, 5000, 300);
	o[2] = (struct xop){ .op = IBV_WR_SEND_WITH_IMM, .wr_id = 12, .flags = IBV_SEND_SIGNALED,
			     .imm = imm, .sg = &sg[3], .nsg = 1 };
	sg[4] = vp_gbuf_sge(&l, 8192, 500);
	o[3] = (struct xop){ .op = IBV_WR_RDMA_READ, .wr_id = 13, .flags = 0,
			     .rkey = t.b.mr->rkey, .raddr = target_addr(&t, 0), .sg = &sg[4], .nsg = 1 };
	sg[5] = vp_gbuf_sge(&l, 9000, 8);
	o[4] = (struct xop){ .op = IBV_WR_ATOMIC_FETCH_AND_ADD, .wr_id = 14, .flags = IBV_SEND_SIGNALED,
			     .rkey = t.b.mr->rkey, .raddr = target_addr(&t, 12288), .cmp_add = 5,
			     .sg = &sg[5], .nsg = 1 };
	sg[6] = vp_gbuf_sge(&l, 6000, 100);
	o[5] = (struct xop){ .op = IBV_WR_RDMA_WRITE_WITH_IMM, .wr_id = 15, .flags = IBV_SEND_SIGNALED,
			     .rkey = t.b.mr->rkey, .raddr = target_addr(&t, 4000), .imm = imm + 1,
			     .sg = &sg[6], .nsg = 1 };
	db = (struct ibv_data_buf){ .addr = inl, .length = sizeof(inl) };
	o[6] = (struct xop){ .op = IBV_WR_SEND, .wr_id = 16, .flags = 0,
			     .inl = &db, .ninl = 1, .use_inline = 1 };
	sg[7] = vp_gbuf_sge(&l, 10000, 2000);
	o[7] = (struct xop){ .op = IBV_WR_RDMA_READ, .wr_id = 17, .flags = IBV_SEND_SIGNALED,
			     .rkey = t.b.mr->rkey, .raddr = target_addr(&t, 1000), .sg = &sg[7], .nsg = 1 };
	if (!xpost_ok(&A, o, 8, "batch of 8")) {
		memcpy(t.model, l.p, 1000);
		memcpy(t.model + 1000, l.p + 1000, 700);
		memcpy(t.model + 1700, l.p + 3000, 1300);
		memcpy(t.model + 4000, l.p + 6000, 100);
		model_set_u64(&t, 12288, old + 5);
		expect_wc(&A, 10, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, 10, NULL, "batch: write");
		expect_wc(&A, 12, IBV_WC_SUCCESS, IBV_WC_SEND, 10, NULL, "batch: send_imm");
		expect_wc(&A, 14, IBV_WC_SUCCESS, IBV_WC_FETCH_ADD, 10, NULL, "batch: fetch_add");
		expect_wc(&A, 15, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, 10, NULL, "batch: write_imm");
		if (!expect_wc(&A, 17, IBV_WC_SUCCESS, IBV_WC_RDMA_READ, 10, &w, "batch: read"))
			EXPECT_EQ("batch: read byte_len", 2000, w.byte_len);
		expect_no_wc(&A, 0.1, "batch: unsignaled requests");
		if (memcmp(l.p + 8192, t.model, 500))
			vc_fail("batch: the read behind the first write did not see it");
		if (memcmp(l.p + 10000, t.model + 1000, 2000))
			vc_fail("batch: the last read did not see the 2-SGE write");
		EXPECT_EQ("batch: fetch_add original value", old, *(uint64_t *)(l.p + 9000));
		if (!expect_recv(&B, 200, IBV_WC_RECV, 300, IBV_WC_WITH_IMM, htonl(imm), 10,
				 "batch: send_imm received") && memcmp(r.p, l.p + 5000, 300))
			vc_fail("batch: send_imm bytes differ");
		expect_recv(&B, 201, IBV_WC_RECV_RDMA_WITH_IMM, 100, IBV_WC_WITH_IMM,
			    htonl(imm + 1), 10, "batch: write_imm received");
		if (!expect_recv(&B, 202, IBV_WC_RECV, sizeof(inl), 0, 0, 10,
				 "batch: inline send received") &&
		    memcmp(r.p + 2048, inl, sizeof(inl)))
			vc_fail("batch: inline send bytes differ");
	}
	target_check(&t, "batch");
	expect_state(&A, IBV_QPS_RTS, "requester");
	target_free(&t);
	vp_gbuf_free(&l);
	vp_gbuf_free(&r);
	pair_down();
}

/* ibv_wr_abort: nothing of the batch runs; the next batch is unaffected. */
static void c_wr_abort(void)
{
	struct target t;
	struct vp_gbuf l, r;
	struct ibv_sge sg, rsg;
	struct xop o[2];

	pair_up();
	t = target_new(&B, 4096, 0, ALL_REMOTE, 0x14);
	l = buf_new(&A, 4096, 0, IBV_ACCESS_LOCAL_WRITE);
	r = buf_new(&B, 4096, 0, IBV_ACCESS_LOCAL_WRITE);
	vp_fill_tag8(l.p, l.len, 0x44);
	memset(r.p, 0, r.len);
	rsg = vp_gbuf_sge(&r, 0, 4096);
	post_recv(&B, &rsg, 1, 300);
	sg = vp_gbuf_sge(&l, 0, 512);

	o[0] = (struct xop){ .op = IBV_WR_RDMA_WRITE, .wr_id = 1, .flags = IBV_SEND_SIGNALED,
			     .rkey = t.b.mr->rkey, .raddr = target_addr(&t, 0), .sg = &sg, .nsg = 1 };
	o[1] = (struct xop){ .op = IBV_WR_SEND_WITH_IMM, .wr_id = 2, .flags = IBV_SEND_SIGNALED,
			     .imm = 7, .sg = &sg, .nsg = 1 };
	ibv_wr_start(A.qpx);
	xop_build(A.qpx, &o[0]);
	xop_build(A.qpx, &o[1]);
	A.qpx->wr_id = 3;
	A.qpx->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_atomic_fetch_add(A.qpx, t.b.mr->rkey, target_addr(&t, 1024), 1);
	ibv_wr_set_sge(A.qpx, l.mr->lkey, (uintptr_t)l.p + 1024, 8);
	ibv_wr_abort(A.qpx);
	/* and an empty batch aborted */
	ibv_wr_start(A.qpx);
	ibv_wr_abort(A.qpx);

	expect_no_wc(&A, 0.3, "aborted batch");
	expect_no_wc(&B, 0.01, "aborted batch at the responder");
	target_check(&t, "aborted batch");

	/* The next batch: its requests are the first to complete. */
	o[0].wr_id = 4;
	o[1].wr_id = 5;
	o[1].op = IBV_WR_SEND;
	if (!xpost_ok(&A, o, 2, "batch after the abort")) {
		memcpy(t.model, l.p, 512);
		expect_wc(&A, 4, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, 10, NULL, "write after the abort");
		expect_wc(&A, 5, IBV_WC_SUCCESS, IBV_WC_SEND, 10, NULL, "send after the abort");
		if (!expect_recv(&B, 300, IBV_WC_RECV, 512, 0, 0, 10,
				 "send after the abort, into the receive the aborted send_imm did not take") &&
		    memcmp(r.p, l.p, 512))
			vc_fail("send after the abort: bytes differ");
	}
	expect_no_wc(&A, 0.05, "after the batch");
	target_check(&t, "after the abort");
	target_free(&t);
	vp_gbuf_free(&l);
	vp_gbuf_free(&r);
	pair_down();
}

/*
 * A batch with a bad request fails whole: ibv_wr_complete returns the
 * errno, nothing of it runs (its valid first request neither), and the QP
 * goes on with the next batch.
 */
static void c_wr_failed_batch(void)
{
	struct target t;
	struct vp_gbuf l;
	struct ibv_sge sg, many[17];
	uint8_t big[MAX_INLINE + 1];
	struct xop good, o;
	uint32_t i, nsge, ninl, depth;
	int ret;

	pair_up();
	t = target_new(&B, 4096, 0, ALL_REMOTE, 0x15);
	l = buf_new(&A, 4096, 0, IBV_ACCESS_LOCAL_WRITE);
	vp_fill_tag8(l.p, l.len, 0x45);
	memset(big, 1, sizeof(big));
	sg = vp_gbuf_sge(&l, 0, 256);
	good = (struct xop){ .op = IBV_WR_RDMA_WRITE, .wr_id = 1, .flags = IBV_SEND_SIGNALED,
			     .rkey = t.b.mr->rkey, .raddr = target_addr(&t, 0), .sg = &sg, .nsg = 1 };
	nsge = A.cap.max_send_sge + 1;
	ninl = A.cap.max_inline_data + 1;
	depth = A.cap.max_send_wr;
	vc_note("max_send_sge %u, max_inline_data %u, max_send_wr %u",
	     A.cap.max_send_sge, A.cap.max_inline_data, depth);
	if (nsge > 17 || ninl > sizeof(big)) {
		vc_fail("capabilities larger than the test expects");
		goto out;
	}
	for (i = 0; i < nsge; i++)
		many[i] = vp_gbuf_sge(&l, i, 1);

	/* more SGEs than max_send_sge */
	ibv_wr_start(A.qpx);
	xop_build(A.qpx, &good);
	o = good;
	o.wr_id = 2;
	o.sg = many;
	o.nsg = nsge;
	xop_build(A.qpx, &o);
	EXPECT_EQ("ibv_wr_complete, set_sge_list beyond max_send_sge", EINVAL,
		  ibv_wr_complete(A.qpx));

	/* more inline data than max_inline_data */
	ibv_wr_start(A.qpx);
	xop_build(A.qpx, &good);
	A.qpx->wr_id = 3;
	ibv_wr_send(A.qpx);
	ibv_wr_set_inline_data(A.qpx, big, ninl);
	EXPECT_EQ("ibv_wr_complete, inline data beyond max_inline_data", EINVAL,
		  ibv_wr_complete(A.qpx));

	/* inline data for an rdma_read */
	ibv_wr_start(A.qpx);
	xop_build(A.qpx, &good);
	A.qpx->wr_id = 4;
	ibv_wr_rdma_read(A.qpx, t.b.mr->rkey, target_addr(&t, 0));
	ibv_wr_set_inline_data(A.qpx, big, 8);
	EXPECT_EQ("ibv_wr_complete, inline data on an rdma_read", EINVAL,
		  ibv_wr_complete(A.qpx));

	/* a data setter for a local invalidate */
	ibv_wr_start(A.qpx);
	xop_build(A.qpx, &good);
	A.qpx->wr_id = 5;
	ibv_wr_local_inv(A.qpx, t.b.mr->rkey);
	ibv_wr_set_sge(A.qpx, l.mr->lkey, (uintptr_t)l.p, 8);
	EXPECT_EQ("ibv_wr_complete, set_sge on a local_inv", EINVAL,
		  ibv_wr_complete(A.qpx));

	/* a setter before any opcode */
	ibv_wr_start(A.qpx);
	ibv_wr_set_sge(A.qpx, l.mr->lkey, (uintptr_t)l.p, 8);
	xop_build(A.qpx, &good);
	EXPECT_EQ("ibv_wr_complete, set_sge before an opcode", EINVAL,
		  ibv_wr_complete(A.qpx));

	/* more requests than the send queue holds */
	ibv_wr_start(A.qpx);
	for (i = 0; i <= depth; i++)
		xop_build(A.qpx, &good);
	ret = ibv_wr_complete(A.qpx);
	EXPECT_EQ("ibv_wr_complete, max_send_wr + 1 requests", ENOMEM, ret);

	expect_no_wc(&A, 0.3, "failed batches");
	target_check(&t, "failed batches");
	expect_state(&A, IBV_QPS_RTS, "requester after failed batches");

	/* exactly max_send_wr requests fit; the next batch works */
	ibv_wr_start(A.qpx);
	for (i = 0; i < depth; i++) {
		o = good;
		o.wr_id = 100 + i;
		xop_build(A.qpx, &o);
	}
	ret = ibv_wr_complete(A.qpx);
	if (!ret) {
		memcpy(t.model, l.p, 256);
		for (i = 0; i < depth && !vc_fails(); i++)
			expect_wc(&A, 100 + i, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, 10,
				  NULL, "max_send_wr writes after the failed batches");
	} else {
		vc_fail("max_send_wr requests: ibv_wr_complete: %s", strerror(ret));
	}
	expect_no_wc(&A, 0.05, "after the last batch");
	target_check(&t, "after the last batch");
out:
	target_free(&t);
	vp_gbuf_free(&l);
	pair_down();
}

/* One write through the WR API on s; ibv_wr_complete's return value. */
static int xwrite(struct side *s, uint64_t wr_id, struct target *t, struct vp_gbuf *l,
		  uint32_t len)
{
	struct ibv_sge sg = vp_gbuf_sge(l, 0, len);
	struct xop o = { .op = IBV_WR_RDMA_WRITE, .wr_id = wr_id,
			 .flags = IBV_SEND_SIGNALED, .rkey = t->b.mr->rkey,
			 .raddr = target_addr(t, 0), .sg = &sg, .nsg = 1 };

	return xpost(s, &o, 1);
}

/*
 * ibv_wr_complete on a QP not ready to send: EINVAL in RESET, INIT and
 * RTR, and nothing of it runs once the QP reaches RTS; in ERR the request
 * is taken and flushed (verbs).
 */
static void c_wr_not_rts(void)
{
	struct target t;
	struct vp_gbuf l;
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_ERR };

	make_qp(&A, IBV_QPT_RC);
	make_qp(&B, IBV_QPT_RC);
	A.psn = 0x123456;
	B.psn = 0x654321;
	t = target_new(&B, 4096, 0, ALL_REMOTE, 0x16);
	l = buf_new(&A, 4096, 0, IBV_ACCESS_LOCAL_WRITE);
	vp_fill_tag8(l.p, l.len, 0x46);

	EXPECT_EQ("ibv_wr_complete in RESET", EINVAL, xwrite(&A, 1, &t, &l, 64));
	if (to_init(&A) || to_init(&B))
		vp_die_errno("to INIT");
	EXPECT_EQ("ibv_wr_complete in INIT", EINVAL, xwrite(&A, 2, &t, &l, 64));
	if (to_rtr(&A, &B) || to_rtr(&B, &A))
		vp_die_errno("to RTR");
	EXPECT_EQ("ibv_wr_complete in RTR", EINVAL, xwrite(&A, 3, &t, &l, 64));
	if (to_rts(&A) || to_rts(&B))
		vp_die_errno("to RTS");
	expect_no_wc(&A, 0.3, "requests refused before RTS, once in RTS");
	target_check(&t, "requests refused before RTS");

	if (!xwrite(&A, 4, &t, &l, 64)) {
		memcpy(t.model, l.p, 64);
		expect_wc(&A, 4, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, 10, NULL,
			  "first write in RTS");
	} else {
		vc_fail("ibv_wr_complete in RTS failed");
	}
	target_check(&t, "write in RTS");

	if (ibv_modify_qp(A.qp, &a, IBV_QP_STATE))
		vp_die_errno("to ERR");
	vp_fill_tag8(l.p, l.len, 0x47);
	EXPECT_EQ("ibv_wr_complete in ERR", 0, xwrite(&A, 5, &t, &l, 64));
	expect_wc(&A, 5, IBV_WC_WR_FLUSH_ERR, -1, 10, NULL, "write posted in ERR");
	expect_no_wc(&A, 0.05, "after the flush");
	target_check(&t, "write posted in ERR");
	target_free(&t);
	vp_gbuf_free(&l);
	pair_down();
}

/* ---- extended CQs --------------------------------------------------------------- */

/* ibv_create_cq_ex must fail with `err`; a CQ made anyway is destroyed. */
static void cq_refused(struct ibv_cq_init_attr_ex *ca, int err, const char *what)
{
	struct ibv_cq_ex *cq;

	errno = 0;
	cq = ibv_create_cq_ex(A.ctx, ca);
	if (cq) {
		vc_fail("%s: created, expected %s", what, strerror(err));
		ibv_destroy_cq(ibv_cq_ex_to_cq(cq));
	} else if (errno != err) {
		vc_fail("%s: errno %d (%s), expected %d (%s)", what, errno,
		     strerror(errno), err, strerror(err));
	}
}

static void cq_accepted(struct ibv_cq_init_attr_ex *ca, const char *what)
{
	struct ibv_cq_ex *cq = ibv_create_cq_ex(A.ctx, ca);

	if (!cq) {
		vc_fail("%s: %s", what, strerror(errno));
		return;
	}
	if (ibv_cq_ex_to_cq(cq)->cqe < (int)ca->cqe)
		vc_fail("%s: cqe %d, asked %u", what, ibv_cq_ex_to_cq(cq)->cqe, ca->cqe);
	if (ibv_destroy_cq(ibv_cq_ex_to_cq(cq)))
		vc_fail("%s: ibv_destroy_cq: %s", what, strerror(errno));
}

/*
 * What ibv_create_cq_ex refuses, with which errno: every completion field
 * the device cannot fill, flags and attributes it lacks, a comp_vector or
 * depth beyond the device; and what it accepts.
 */
static void c_cq_create(void)
{
	static const struct { uint64_t flag; const char *name; } bad[] = {
		{ IBV_WC_EX_WITH_COMPLETION_TIMESTAMP, "COMPLETION_TIMESTAMP" },
		{ IBV_WC_EX_WITH_CVLAN, "CVLAN" },
		{ IBV_WC_EX_WITH_FLOW_TAG, "FLOW_TAG" },
		{ IBV_WC_EX_WITH_TM_INFO, "TM_INFO" },
		{ IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK,
		  "COMPLETION_TIMESTAMP_WALLCLOCK" },
	};
	struct ibv_device_attr da;
	struct ibv_comp_channel *ch;
	struct ibv_cq_init_attr_ex ca;
	struct ibv_cq *cq;
	char what[128];
	size_t i;

	if (ibv_query_device(A.ctx, &da))
		vp_die_errno("ibv_query_device");
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		ca = (struct ibv_cq_init_attr_ex){ .cqe = 16,
			.wc_flags = IBV_WC_STANDARD_FLAGS | bad[i].flag };
		snprintf(what, sizeof(what), "wc_flags with %s", bad[i].name);
		cq_refused(&ca, EOPNOTSUPP, what);
	}
	ca = (struct ibv_cq_init_attr_ex){ .cqe = 16, .wc_flags = IBV_WC_EX_WITH_BYTE_LEN,
		.comp_mask = IBV_CQ_INIT_ATTR_MASK_FLAGS,
		.flags = IBV_CREATE_CQ_ATTR_IGNORE_OVERRUN };
	cq_refused(&ca, EOPNOTSUPP, "flags IGNORE_OVERRUN");
	ca = (struct ibv_cq_init_attr_ex){ .cqe = 16, .wc_flags = IBV_WC_EX_WITH_BYTE_LEN,
		.comp_mask = IBV_CQ_INIT_ATTR_MASK_PD, .parent_domain = A.pd };
	cq_refused(&ca, EOPNOTSUPP, "comp_mask PD");
	ca = (struct ibv_cq_init_attr_ex){ .cqe = 16, .wc_flags = IBV_WC_STANDARD_FLAGS,
		.comp_vector = (uint32_t)A.ctx->num_comp_vectors };
	cq_refused(&ca, EINVAL, "comp_vector = num_comp_vectors");
	ca.comp_vector = UINT32_MAX;
	cq_refused(&ca, EINVAL, "comp_vector = UINT32_MAX");
	ca = (struct ibv_cq_init_attr_ex){ .cqe = (uint32_t)da.max_cqe + 1,
		.wc_flags = IBV_WC_STANDARD_FLAGS };
	cq_refused(&ca, EINVAL, "cqe = max_cqe + 1");
	errno = 0;
	cq = ibv_create_cq(A.ctx, 16, NULL, NULL, A.ctx->num_comp_vectors);
	if (cq) {
		vc_fail("ibv_create_cq, comp_vector = num_comp_vectors: created");
		ibv_destroy_cq(cq);
	} else {
		EXPECT_EQ("ibv_create_cq, comp_vector = num_comp_vectors: errno",
			  EINVAL, errno);
	}

	ch = ibv_create_comp_channel(A.ctx);
	if (!ch)
		vp_die_errno("ibv_create_comp_channel");
	ca = (struct ibv_cq_init_attr_ex){ .cqe = 16, .wc_flags = IBV_WC_EX_WITH_BYTE_LEN };
	cq_accepted(&ca, "wc_flags BYTE_LEN only");
	ca = (struct ibv_cq_init_attr_ex){ .cqe = 100, .wc_flags = IBV_WC_STANDARD_FLAGS,
		.channel = ch, .comp_vector = (uint32_t)A.ctx->num_comp_vectors - 1,
		.comp_mask = IBV_CQ_INIT_ATTR_MASK_FLAGS,
		.flags = IBV_CREATE_CQ_ATTR_SINGLE_THREADED };
	cq_accepted(&ca, "every standard flag, SINGLE_THREADED, a channel, the last vector");
	ca = (struct ibv_cq_init_attr_ex){ .cqe = (uint32_t)da.max_cqe,
		.wc_flags = IBV_WC_STANDARD_FLAGS };
	cq_accepted(&ca, "cqe = max_cqe");
	ibv_destroy_comp_channel(ch);
	vc_note("num_comp_vectors %d, max_cqe %d", A.ctx->num_comp_vectors, da.max_cqe);
}

/*
 * ibv_start_poll / ibv_next_poll / ibv_end_poll: ENOENT on an empty CQ,
 * EINVAL for an unknown poll attribute (and the CQ still usable), several
 * completions in one pass in order, and ibv_poll_cq on the same CQ.
 */
static void c_cq_poll(void)
{
	struct ibv_poll_cq_attr attr = { .comp_mask = 0 };
	struct target t;
	struct vp_gbuf l;
	struct ibv_sge sg;
	struct ibv_wc wc;
	struct xop o[3];
	int ret, i, got = 0, passes = 0, most = 0, n;
	double end;

	if (legacy_poll) {
		vc_note("skipped: -P (ibv_poll_cq only)");
		return;
	}
	pair_up();
	t = target_new(&B, 4096, 0, ALL_REMOTE, 0x17);
	l = buf_new(&A, 4096, 0, IBV_ACCESS_LOCAL_WRITE);
	vp_fill_tag8(l.p, l.len, 0x48);

	EXPECT_EQ("ibv_start_poll on an empty CQ", ENOENT, ibv_start_poll(A.cqx, &attr));
	attr.comp_mask = 1;
	ret = ibv_start_poll(A.cqx, &attr);
	EXPECT_EQ("ibv_start_poll with poll attr comp_mask 1", EINVAL, ret);
	if (!ret)
		ibv_end_poll(A.cqx);
	attr.comp_mask = 0;
	EXPECT_EQ("ibv_start_poll after the refused one", ENOENT,
		  ibv_start_poll(A.cqx, &attr));

	sg = vp_gbuf_sge(&l, 0, 64);
	for (i = 0; i < 3; i++)
		o[i] = (struct xop){ .op = IBV_WR_RDMA_WRITE, .wr_id = 10 + (uint64_t)i,
				     .flags = IBV_SEND_SIGNALED, .rkey = t.b.mr->rkey,
				     .raddr = target_addr(&t, (size_t)i * 64), .sg = &sg, .nsg = 1 };
	if (xpost_ok(&A, o, 3, "3 writes"))
		goto out;
	for (i = 0; i < 3; i++)
		memcpy(t.model + i * 64, l.p, 64);
	/* let all three complete, then read them in as few passes as they came */
	vp_sleep_us(500000);
	end = vp_now() + 10;
	while (got < 3 && vp_now() < end) {
		ret = ibv_start_poll(A.cqx, &attr);
		if (ret == ENOENT) {
			vp_sleep_us(1000);
			continue;
		}
		if (ret) {
			vc_fail("ibv_start_poll: %s", strerror(ret));
			break;
		}
		n = 0;
		do {
			EXPECT_EQ("pass: wr_id in order", 10 + got, A.cqx->wr_id);
			EXPECT_EQ("pass: status", IBV_WC_SUCCESS, A.cqx->status);
			EXPECT_EQ("pass: opcode", IBV_WC_RDMA_WRITE, ibv_wc_read_opcode(A.cqx));
			EXPECT_EQ("pass: qp_num", A.qp->qp_num, ibv_wc_read_qp_num(A.cqx));
			got++;
			n++;
			ret = ibv_next_poll(A.cqx);
		} while (!ret && got < 10);
		ibv_end_poll(A.cqx);
		EXPECT_EQ("ibv_next_poll after the last", ENOENT, ret);
		passes++;
		if (n > most)
			most = n;
	}
	EXPECT_EQ("completions read", 3, got);
	if (most < 2)
		vc_fail("no pass returned more than one completion (next_poll never used) "
		     "in %d passes", passes);
	vc_note("3 completions in %d pass(es)", passes);

	/* the legacy ibv_poll_cq on the extended CQ */
	o[0].wr_id = 20;
	if (!xpost_ok(&A, o, 1, "write for ibv_poll_cq")) {
		end = vp_now() + 10;
		while ((ret = ibv_poll_cq(ibv_cq_ex_to_cq(A.cqx), 1, &wc)) == 0 &&
		       vp_now() < end)
			vp_sleep_us(200);
		if (ret != 1)
			vc_fail("ibv_poll_cq on the extended CQ: %d", ret);
		else if (wc.wr_id != 20 || wc.status != IBV_WC_SUCCESS ||
			 wc.opcode != IBV_WC_RDMA_WRITE || wc.qp_num != A.qp->qp_num ||
			 wc.wc_flags)
			vc_fail("ibv_poll_cq on the extended CQ: wr_id %lu status %d opcode %d "
			     "qp_num %u wc_flags %#x", (unsigned long)wc.wr_id, wc.status,
			     wc.opcode, wc.qp_num, wc.wc_flags);
	}
	EXPECT_EQ("ibv_start_poll when drained", ENOENT, ibv_start_poll(A.cqx, &attr));
	target_check(&t, "writes");
out:
	target_free(&t);
	vp_gbuf_free(&l);
	pair_down();
}

/* ---- 2. memory windows ------------------------------------------------------------ */

enum pop { P_WRITE, P_READ, P_FADD, P_CSWAP };
static const char *const pop_name[] = { "RDMA_WRITE", "RDMA_READ", "FETCH_ADD",
					"CMP_SWAP" };

static struct vp_gbuf L;		/* the requester's buffer for probes */
static unsigned int probe_no;

/*
 * Requester a's `op` on responder b's target at offset `off` (len bytes, 8
 * for atomics) through `rkey`, which must complete with `want`.  Success:
 * the target changed as the op says (the model too) and a read or atomic
 * returned the model's bytes.  An error: both QPs in ERR, a read left the
 * local buffer alone.  Either way every byte of the target and its guards
 * is checked.  Returns 1 if the pair is dead (a fresh one is needed).
 */
static int probe(struct side *a, struct side *b, struct target *t, enum pop op,
		 uint32_t rkey, size_t off, uint32_t len, enum ibv_wc_status want,
		 const char *why)
{
	struct ibv_sge sg = vp_gbuf_sge(&L, 0, len);
	struct xop o = { .wr_id = 77, .flags = IBV_SEND_SIGNALED, .rkey = rkey,
			 .raddr = target_addr(t, off), .sg = &sg, .nsg = 1 };
	uint8_t tag = (uint8_t)(++probe_no * 29);
	uint64_t arg = 0x0101010101010101ull * (tag | 1), old = 0, got;
	int wcop = 0;
	char what[200];
	struct wcx w;

	snprintf(what, sizeof(what), "%s: %s of %u bytes at +%zu, rkey %#x",
		 why, pop_name[op], len, off, rkey);
	switch (op) {
	case P_WRITE:
		o.op = IBV_WR_RDMA_WRITE;
		vp_fill_tag8(L.p, len, tag);
		wcop = IBV_WC_RDMA_WRITE;
		break;
	case P_READ:
		o.op = IBV_WR_RDMA_READ;
		memset(L.p, 0, len);
		wcop = IBV_WC_RDMA_READ;
		break;
	case P_FADD:
		o.op = IBV_WR_ATOMIC_FETCH_AND_ADD;
		o.cmp_add = arg;
		memset(L.p, 0, 8);
		wcop = IBV_WC_FETCH_ADD;
		break;
	case P_CSWAP:
		o.op = IBV_WR_ATOMIC_CMP_AND_SWP;
		old = model_u64(t, off);
		o.cmp_add = old;
		o.swap = arg;
		memset(L.p, 0, 8);
		wcop = IBV_WC_COMP_SWAP;
		break;
	}
	if (xpost_ok(a, &o, 1, what))
		return 1;
	if (expect_wc(a, 77, want, want == IBV_WC_SUCCESS ? wcop : -1, 10, &w, what)) {
		target_check(t, what);
		return 1;
	}
	if (want != IBV_WC_SUCCESS) {
		expect_state(a, IBV_QPS_ERR, what);
		expect_state(b, IBV_QPS_ERR, what);
		if (op == P_READ && vp_diff_byte(L.p, len, 0) >= 0)
			vc_fail("%s: the failed read wrote the local buffer", what);
		target_check(t, what);
		return 1;
	}
	switch (op) {
	case P_WRITE:
		memcpy(t->model + off, L.p, len);
		break;
	case P_READ:
		if (w.byte_len != len)
			vc_fail("%s: byte_len %u", what, w.byte_len);
		if (memcmp(L.p, t->model + off, len))
			vc_fail("%s: bytes read differ from the target", what);
		break;
	case P_FADD:
		old = model_u64(t, off);
		memcpy(&got, L.p, 8);
		if (got != old)
			vc_fail("%s: original %#llx, expected %#llx", what,
			     (unsigned long long)got, (unsigned long long)old);
		model_set_u64(t, off, old + arg);
		break;
	case P_CSWAP:
		memcpy(&got, L.p, 8);
		if (got != old)
			vc_fail("%s: original %#llx, expected %#llx", what,
			     (unsigned long long)got, (unsigned long long)old);
		model_set_u64(t, off, arg);
		break;
	}
	target_check(t, what);
	return 0;
}

/* probe() between A and B; a dead pair is replaced. */
static void probe_ab(struct target *t, enum pop op, uint32_t rkey, size_t off,
		     uint32_t len, enum ibv_wc_status want, const char *why)
{
	if (probe(&A, &B, t, op, rkey, off, len, want, why))
		pair_renew();
}

/* A work request posted after an error on s completes with WR_FLUSH_ERR. */
static void expect_flushed_after(struct side *s, const char *what)
{
	struct xop o = { .op = IBV_WR_RDMA_WRITE, .wr_id = 900,
			 .flags = IBV_SEND_SIGNALED, .rkey = 0, .raddr = 0,
			 .sg = NULL, .nsg = 0 };
	char buf[160];

	snprintf(buf, sizeof(buf), "%s: a request posted after it", what);
	expect_state(s, IBV_QPS_ERR, what);
	if (!xpost_ok(s, &o, 1, buf))
		expect_wc(s, 900, IBV_WC_WR_FLUSH_ERR, -1, 10, NULL, buf);
	expect_no_wc(s, 0.02, buf);
}

/*
 * Type 1 bind on B's QP with ibv_bind_mw; the bind must complete with
 * `want`.  Returns the key the bind gave the window (mw->rkey right after
 * the call: the index kept, the key byte + 1); after a failed bind mw->rkey
 * is set back, as ibv_bind_mw(3) asks of the caller.
 */
static uint32_t bind1(struct ibv_mw *mw, struct ibv_mr *mr, uint64_t addr,
		      uint64_t len, unsigned int access, enum ibv_wc_status want,
		      const char *what)
{
	struct ibv_mw_bind b = {
		.wr_id = 500, .send_flags = IBV_SEND_SIGNALED,
		.bind_info = { .mr = mr, .addr = addr, .length = len,
			       .mw_access_flags = access },
	};
	uint32_t old = mw->rkey, key;
	int ret = ibv_bind_mw(B.qp, mw, &b);

	if (ret) {
		vc_fail("%s: ibv_bind_mw: %s", what, strerror(ret));
		return old;
	}
	key = mw->rkey;
	if (key >> 8 != old >> 8 || (key & 0xff) != ((old + 1) & 0xff))
		vc_fail("%s: rkey %#x after the bind, was %#x: expected the index kept "
		     "and the key byte + 1", what, key, old);
	expect_wc(&B, 500, want, want == IBV_WC_SUCCESS ? IBV_WC_BIND_MW : -1, 10,
		  NULL, what);
	if (want != IBV_WC_SUCCESS) {
		mw->rkey = old;
		expect_flushed_after(&B, what);
	}
	return key;
}

/*
 * Type 2 bind on s's QP, through ibv_wr_bind_mw or (post_send) an
 * IBV_WR_BIND_MW in ibv_post_send, with the new key `key`; it must
 * complete with `want`.  After a successful one the window's rkey is
 * recorded in mw->rkey (the provider leaves it alone for type 2, as rxe's
 * does; the next bind names the window by it).
 */
static void bind2(struct side *s, struct ibv_mw *mw, uint32_t key, struct ibv_mr *mr,
		  uint64_t addr, uint64_t len, unsigned int access, int post_send,
		  enum ibv_wc_status want, const char *what)
{
	struct ibv_mw_bind_info info = { .mr = mr, .addr = addr, .length = len,
					 .mw_access_flags = access };

	if (post_send) {
		struct ibv_send_wr wr = {
			.wr_id = 501, .opcode = IBV_WR_BIND_MW,
			.send_flags = IBV_SEND_SIGNALED,
			.bind_mw = { .mw = mw, .rkey = key, .bind_info = info },
		};

		if (post_send_ok(s, &wr, what))
			return;
	} else {
		struct xop o = { .op = IBV_WR_BIND_MW, .wr_id = 501,
				 .flags = IBV_SEND_SIGNALED, .mw = mw,
				 .new_rkey = key, .bind = info };

		if (xpost_ok(s, &o, 1, what))
			return;
	}
	if (expect_wc(s, 501, want, want == IBV_WC_SUCCESS ? IBV_WC_BIND_MW : -1,
		      10, NULL, what))
		return;
	if (want == IBV_WC_SUCCESS)
		mw->rkey = key;
	else
		expect_flushed_after(s, what);
}

/* A local invalidate of `key` on s's QP (WR API or ibv_post_send). */
static void local_inv(struct side *s, uint32_t key, int post_send,
		      enum ibv_wc_status want, const char *what)
{
	if (post_send) {
		struct ibv_send_wr wr = {
			.wr_id = 502, .opcode = IBV_WR_LOCAL_INV,
			.send_flags = IBV_SEND_SIGNALED, .invalidate_rkey = key,
		};

		if (post_send_ok(s, &wr, what))
			return;
	} else {
		struct xop o = { .op = IBV_WR_LOCAL_INV, .wr_id = 502,
				 .flags = IBV_SEND_SIGNALED, .inv = key };

		if (xpost_ok(s, &o, 1, what))
			return;
	}
	if (!expect_wc(s, 502, want, want == IBV_WC_SUCCESS ? IBV_WC_LOCAL_INV : -1,
		       10, NULL, what) && want != IBV_WC_SUCCESS)
		expect_flushed_after(s, what);
}

/*
 * A 0-byte IBV_WR_SEND_WITH_INV of @key from A (ibv_post_send) into the
 * receive @recv_id it posts on B (@rsg): the send completes, and the
 * receive with IBV_WC_WITH_INV and the key.
 */
static void send_inv0(const struct ibv_sge *rsg, uint32_t key, uint64_t recv_id,
		      const char *what)
{
	struct ibv_send_wr wr = {
		.wr_id = recv_id + 1, .opcode = IBV_WR_SEND_WITH_INV,
		.send_flags = IBV_SEND_SIGNALED, .invalidate_rkey = key,
	};
	char buf[160];

	post_recv(&B, rsg, 1, recv_id);
	if (!post_send_ok(&A, &wr, what))
		expect_wc(&A, recv_id + 1, IBV_WC_SUCCESS, IBV_WC_SEND, 10, NULL, what);
	snprintf(buf, sizeof(buf), "%s received", what);
	expect_recv(&B, recv_id, IBV_WC_RECV, 0, IBV_WC_WITH_INV, key, 10, buf);
}

static struct ibv_mw *mw_alloc(struct ibv_pd *pd, enum ibv_mw_type type)
{
	struct ibv_mw *mw = ibv_alloc_mw(pd, type);

	if (!mw)
		vp_die_errno("ibv_alloc_mw");
	if (mw->type != type)
		vc_fail("ibv_alloc_mw: type %d, asked %d", mw->type, type);
	return mw;
}

static void mw_free(struct ibv_mw *mw, const char *what)
{
	int ret = ibv_dealloc_mw(mw);

	if (ret)
		vc_fail("%s: ibv_dealloc_mw: %s", what, strerror(ret));
}

/* dereg of an MR a window is bound to: EBUSY, and the MR stays usable. */
static void expect_dereg_busy(struct target *t, const char *what)
{
	int ret = ibv_dereg_mr(t->b.mr);

	if (ret != EBUSY)
		vc_fail("%s: ibv_dereg_mr with a window bound: %s (%d), expected EBUSY",
		     what, ret ? strerror(ret) : "success", ret);
	if (!ret)
		t->b.mr = NULL;
}

/* dereg of an MR no window is bound to any more: success. */
static void expect_dereg_ok(struct target *t, const char *what)
{
	int ret = ibv_dereg_mr(t->b.mr);

	if (ret)
		vc_fail("%s: ibv_dereg_mr: %s (%d), expected success", what,
		     strerror(ret), ret);
	else
		t->b.mr = NULL;
}

/* B's target for windows: 3 pages, an MR with MW_BIND and no remote access
 * of its own, so whatever a peer reaches, a window granted. */
#define W_ACCESS	(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_MW_BIND)
#define W1_OFF		1000	/* 8-aligned in memory: the MR starts 64 in */
#define W1_LEN		5000	/* 4 frames */
#define W2_OFF		8192
#define W2_LEN		2048

static struct target mw_setup(void)
{
	struct target t;

	pair_up();
	t = target_new(&B, 3 * PAGE, 64, W_ACCESS, 0x21);
	L = buf_new(&A, 16384, 0, IBV_ACCESS_LOCAL_WRITE);
	return t;
}

static void mw_teardown(struct target *t)
{
	target_free(t);
	vp_gbuf_free(&L);
	pair_down();
}

/*
 * A type 1 window through its life: unbound, bound (write, read, atomics
 * inside; its edges; the MR's own key and outside the window refused),
 * re-bound elsewhere read-only (the old key dead, access enforced), unbound
 * with length 0 (every key dead).  Remote errors are REM_ACCESS_ERR at the
 * requester, both QPs in ERR, memory untouched.
 */
static void c_mw_type1(void)
{
	struct ibv_device_attr da;
	struct target t = mw_setup();
	struct ibv_mw *mw;
	uint32_t k0, k1, k2, k3;

	if (ibv_query_device(B.ctx, &da))
		vp_die_errno("ibv_query_device");
	if (!(da.device_cap_flags & IBV_DEVICE_MEM_WINDOW) ||
	    !(da.device_cap_flags & IBV_DEVICE_MEM_WINDOW_TYPE_2B) || da.max_mw <= 0)
		vc_fail("device_cap_flags %#x max_mw %d: expected MEM_WINDOW, "
		     "MEM_WINDOW_TYPE_2B and max_mw > 0", da.device_cap_flags, da.max_mw);
	mw = mw_alloc(B.pd, IBV_MW_TYPE_1);
	k0 = mw->rkey;
	if (k0 >> 8 == t.b.mr->rkey >> 8)
		vc_fail("window rkey %#x shares the MR's index (%#x)", k0, t.b.mr->rkey);

	probe_ab(&t, P_WRITE, k0, W1_OFF, 100, IBV_WC_REM_ACCESS_ERR, "before the bind");
	k1 = bind1(mw, t.b.mr, target_addr(&t, W1_OFF), W1_LEN, MW_REMOTE,
		   IBV_WC_SUCCESS, "bind");
	probe_ab(&t, P_WRITE, k1, W1_OFF, W1_LEN, IBV_WC_SUCCESS, "bound, the whole window");
	probe_ab(&t, P_READ, k1, W1_OFF, W1_LEN, IBV_WC_SUCCESS, "bound");
	probe_ab(&t, P_FADD, k1, W1_OFF + 8, 8, IBV_WC_SUCCESS, "bound");
	probe_ab(&t, P_CSWAP, k1, W1_OFF + 16, 8, IBV_WC_SUCCESS, "bound");
	probe_ab(&t, P_WRITE, k1, W1_OFF + W1_LEN - 8, 8, IBV_WC_SUCCESS,
		 "bound, the last 8 bytes");
	expect_dereg_busy(&t, "type 1 bound");
	probe_ab(&t, P_READ, k1, W1_OFF, 64, IBV_WC_SUCCESS, "bound, after the refused dereg");
	probe_ab(&t, P_WRITE, t.b.mr->rkey, W1_OFF, 64, IBV_WC_REM_ACCESS_ERR,
		 "the MR's own key (no remote access)");
	probe_ab(&t, P_WRITE, k1, W1_OFF + W1_LEN - 8, 16, IBV_WC_REM_ACCESS_ERR,
		 "8 bytes past the window's end");
	probe_ab(&t, P_READ, k1, W1_OFF - 8, 16, IBV_WC_REM_ACCESS_ERR,
		 "8 bytes before the window");
	probe_ab(&t, P_FADD, k1, W1_OFF + W1_LEN, 8, IBV_WC_REM_ACCESS_ERR,
		 "atomic just past the window");

	/* re-bind: another range, read only */
	k2 = bind1(mw, t.b.mr, target_addr(&t, W2_OFF), W2_LEN, IBV_ACCESS_REMOTE_READ,
		   IBV_WC_SUCCESS, "re-bind read-only");
	probe_ab(&t, P_WRITE, k1, W1_OFF, 64, IBV_WC_REM_ACCESS_ERR, "the key before the re-bind");
	probe_ab(&t, P_READ, k1, W1_OFF, 64, IBV_WC_REM_ACCESS_ERR, "the key before the re-bind");
	probe_ab(&t, P_READ, k2, W2_OFF, W2_LEN, IBV_WC_SUCCESS, "re-bound");
	probe_ab(&t, P_WRITE, k2, W2_OFF, 8, IBV_WC_REM_ACCESS_ERR, "re-bound read-only");
	probe_ab(&t, P_FADD, k2, W2_OFF, 8, IBV_WC_REM_ACCESS_ERR, "re-bound read-only");
	probe_ab(&t, P_READ, k2, W1_OFF, 8, IBV_WC_REM_ACCESS_ERR, "re-bound, the old range");

	/* unbind: length 0 */
	if (on_rxe()) {
		/* rdma-core 44's librxe reads bind_info.mr->lkey: NULL here */
		vc_note("skipped on rxe (its provider dereferences the NULL MR): unbind");
		k3 = 0;
		mw_free(mw, "type 1");
		expect_dereg_ok(&t, "type 1 deallocated");
	} else {
		k3 = bind1(mw, NULL, 0, 0, 0, IBV_WC_SUCCESS, "unbind (length 0)");
		probe_ab(&t, P_READ, k2, W2_OFF, 8, IBV_WC_REM_ACCESS_ERR,
			 "the key before the unbind");
		probe_ab(&t, P_READ, k3, W2_OFF, 8, IBV_WC_REM_ACCESS_ERR,
			 "the key of the unbind");
		expect_dereg_ok(&t, "type 1 unbound");
		mw_free(mw, "type 1");
	}
	vc_note("keys %#x %#x %#x %#x", k0, k1, k2, k3);
	mw_teardown(&t);
}

/*
 * A type 2 window through its life: bound with ibv_wr_bind_mw, used,
 * invalidated with ibv_wr_local_inv, bound again with IBV_WR_BIND_MW in
 * ibv_post_send (the old key dead), left bound to a QP that is destroyed
 * (serves nobody), freed by IBV_WR_LOCAL_INV from another QP of the PD,
 * invalidated by the peer with ibv_wr_send_inv and with IBV_WR_SEND_WITH_INV
 * (the receive says IBV_WC_WITH_INV and the key).
 */
static void c_mw_type2(void)
{
	struct target t = mw_setup();
	struct vp_gbuf r = buf_new(&B, 4096, 0, IBV_ACCESS_LOCAL_WRITE);
	struct ibv_sge rsg = vp_gbuf_sge(&r, 0, 4096), sg;
	struct ibv_mw *mw = mw_alloc(B.pd, IBV_MW_TYPE_2);
	uint32_t k0 = mw->rkey, k1, k2, k3, k4, k5;
	struct xop o, ob[2];

	probe_ab(&t, P_WRITE, k0, W1_OFF, 100, IBV_WC_REM_ACCESS_ERR, "before the bind");
	k1 = ibv_inc_rkey(k0);
	bind2(&B, mw, k1, t.b.mr, target_addr(&t, W1_OFF), W1_LEN, MW_REMOTE, 0,
	      IBV_WC_SUCCESS, "ibv_wr_bind_mw");
	probe_ab(&t, P_WRITE, k1, W1_OFF, W1_LEN, IBV_WC_SUCCESS, "bound");
	probe_ab(&t, P_READ, k1, W1_OFF, W1_LEN, IBV_WC_SUCCESS, "bound");
	probe_ab(&t, P_FADD, k1, W1_OFF + 8, 8, IBV_WC_SUCCESS, "bound");
	probe_ab(&t, P_CSWAP, k1, W1_OFF + W1_LEN - 8, 8, IBV_WC_SUCCESS, "bound, last 8 bytes");
	expect_dereg_busy(&t, "type 2 bound");
	local_inv(&B, k1, 0, IBV_WC_SUCCESS, "ibv_wr_local_inv");
	probe_ab(&t, P_WRITE, k1, W1_OFF, 64, IBV_WC_REM_ACCESS_ERR, "after LOCAL_INV");

	/* bound again on the new pair, through ibv_post_send */
	k2 = ibv_inc_rkey(k1);
	bind2(&B, mw, k2, t.b.mr, target_addr(&t, W1_OFF), W1_LEN,
	      IBV_ACCESS_REMOTE_WRITE, 1, IBV_WC_SUCCESS, "IBV_WR_BIND_MW in ibv_post_send");
	probe_ab(&t, P_WRITE, k2, W1_OFF + 100, 200, IBV_WC_SUCCESS, "re-bound");
	probe_ab(&t, P_READ, k2, W1_OFF, 8, IBV_WC_REM_ACCESS_ERR, "re-bound write-only");
	/* the pair is new: the window is bound to a destroyed QP now */
	probe_ab(&t, P_WRITE, k2, W1_OFF, 8, IBV_WC_REM_ACCESS_ERR,
		 "bound to a QP that was destroyed");
	probe_ab(&t, P_WRITE, k1, W1_OFF, 8, IBV_WC_REM_ACCESS_ERR, "the key before the re-bind");
	local_inv(&B, k2, 1, IBV_WC_SUCCESS,
		  "IBV_WR_LOCAL_INV in ibv_post_send, from another QP of the PD");

	/* invalidated by the peer: ibv_wr_send_inv */
	k3 = ibv_inc_rkey(k2);
	bind2(&B, mw, k3, t.b.mr, target_addr(&t, W1_OFF), W1_LEN, MW_REMOTE, 0,
	      IBV_WC_SUCCESS, "bind for send_inv");
	probe_ab(&t, P_WRITE, k3, W1_OFF, 64, IBV_WC_SUCCESS, "bound for send_inv");
	vp_fill_tag8(L.p, 64, 0x31);
	memset(r.p, 0, r.len);
	post_recv(&B, &rsg, 1, 600);
	sg = vp_gbuf_sge(&L, 0, 64);
	o = (struct xop){ .op = IBV_WR_SEND_WITH_INV, .wr_id = 601,
			  .flags = IBV_SEND_SIGNALED, .inv = k3, .sg = &sg, .nsg = 1 };
	if (!xpost_ok(&A, &o, 1, "ibv_wr_send_inv"))
		expect_wc(&A, 601, IBV_WC_SUCCESS, IBV_WC_SEND, 10, NULL, "ibv_wr_send_inv");
	if (!expect_recv(&B, 600, IBV_WC_RECV, 64, IBV_WC_WITH_INV, k3, 10,
			 "ibv_wr_send_inv received") && memcmp(r.p, L.p, 64))
		vc_fail("ibv_wr_send_inv: bytes differ");
	probe_ab(&t, P_WRITE, k3, W1_OFF, 64, IBV_WC_REM_ACCESS_ERR, "after SEND_WITH_INV");

	/* and IBV_WR_SEND_WITH_INV in ibv_post_send, 0 bytes */
	k4 = ibv_inc_rkey(k3);
	bind2(&B, mw, k4, t.b.mr, target_addr(&t, W1_OFF), W1_LEN, MW_REMOTE, 1,
	      IBV_WC_SUCCESS, "bind for IBV_WR_SEND_WITH_INV");
	send_inv0(&rsg, k4, 602, "IBV_WR_SEND_WITH_INV");
	probe_ab(&t, P_READ, k4, W1_OFF, 64, IBV_WC_REM_ACCESS_ERR,
		 "after IBV_WR_SEND_WITH_INV");
	expect_dereg_ok(&t, "type 2 invalidated");

	/* bind and send the key in one batch: the send leaves after the bind,
	 * so the peer may use the key at once (ibv_bind_mw(3)) */
	k5 = ibv_inc_rkey(k4);
	t.b.mr = ibv_reg_mr(B.pd, t.b.p, t.b.len, W_ACCESS);
	if (!t.b.mr)
		vp_die_errno("ibv_reg_mr");
	post_recv(&A, NULL, 0, 610);
	ob[0] = (struct xop){ .op = IBV_WR_BIND_MW, .wr_id = 611, .flags = IBV_SEND_SIGNALED,
			      .mw = mw, .new_rkey = k5,
			      .bind = { .mr = t.b.mr, .addr = target_addr(&t, W2_OFF),
					.length = W2_LEN, .mw_access_flags = MW_REMOTE } };
	ob[1] = (struct xop){ .op = IBV_WR_SEND_WITH_IMM, .wr_id = 612,
			      .flags = IBV_SEND_SIGNALED, .imm = k5, .sg = NULL, .nsg = 0 };
	if (!xpost_ok(&B, ob, 2, "bind + send of the key")) {
		if (!expect_wc(&B, 611, IBV_WC_SUCCESS, IBV_WC_BIND_MW, 10, NULL,
			       "bind + send of the key: the bind"))
			mw->rkey = k5;
		expect_wc(&B, 612, IBV_WC_SUCCESS, IBV_WC_SEND, 10, NULL,
			  "bind + send of the key: the send");
	}
	if (!expect_recv(&A, 610, IBV_WC_RECV, 0, IBV_WC_WITH_IMM, htonl(k5), 10,
			 "the key received"))
		probe_ab(&t, P_WRITE, k5, W2_OFF, W2_LEN, IBV_WC_SUCCESS,
			 "with the key just received");
	mw_free(mw, "type 2 bound");
	expect_dereg_ok(&t, "type 2 deallocated");
	vc_note("keys %#x %#x %#x %#x %#x %#x", k0, k1, k2, k3, k4, k5);
	vp_gbuf_free(&r);
	mw_teardown(&t);
}

static struct side A2, B2;	/* a second pair: the same contexts */

/* A second pair A2-B2, B2's QP in pd (B's own or another PD). */
static void pair2_up(struct ibv_pd *pd)
{
	A2 = A;
	B2 = B;
	B2.pd = pd;
	A2.name = "A2";
	B2.name = "B2";
	pair_make(&A2, &B2, IBV_QPT_RC);
}

static void pair2_down(void)
{
	pair_free(&A2, &B2);
}

/*
 * Windows used through the wrong QP or PD: a type 2 window serves only the
 * QP it was bound on; a type 1 window serves every QP of its PD and no
 * other; a type 2 window cannot be bound from a QP of another PD, nor to an
 * MR of another PD.
 */
static void c_mw_other_qp_pd(void)
{
	struct target t = mw_setup();
	struct ibv_pd *pd2 = ibv_alloc_pd(B.ctx);
	struct ibv_mw *m2, *m1, *m2b, *m2p;
	uint32_t k2, k1;

	if (!pd2)
		vp_die_errno("ibv_alloc_pd");
	m2 = mw_alloc(B.pd, IBV_MW_TYPE_2);
	m1 = mw_alloc(B.pd, IBV_MW_TYPE_1);
	m2b = mw_alloc(B.pd, IBV_MW_TYPE_2);
	m2p = mw_alloc(pd2, IBV_MW_TYPE_2);

	k2 = ibv_inc_rkey(m2->rkey);
	bind2(&B, m2, k2, t.b.mr, target_addr(&t, W1_OFF), W1_LEN, MW_REMOTE, 0,
	      IBV_WC_SUCCESS, "type 2 bound on B");
	pair2_up(B.pd);
	probe(&A2, &B2, &t, P_WRITE, k2, W1_OFF, 64, IBV_WC_REM_ACCESS_ERR,
	      "type 2 from another QP of its PD");
	pair2_down();
	probe_ab(&t, P_WRITE, k2, W1_OFF, 64, IBV_WC_SUCCESS, "type 2 from its own QP");
	pair2_up(pd2);
	probe(&A2, &B2, &t, P_READ, k2, W1_OFF, 64, IBV_WC_REM_ACCESS_ERR,
	      "type 2 from a QP of another PD");
	pair2_down();

	k1 = bind1(m1, t.b.mr, target_addr(&t, W2_OFF), W2_LEN, MW_REMOTE,
		   IBV_WC_SUCCESS, "type 1");
	pair2_up(B.pd);
	if (!probe(&A2, &B2, &t, P_WRITE, k1, W2_OFF, 64, IBV_WC_SUCCESS,
		   "type 1 from another QP of its PD"))
		probe(&A2, &B2, &t, P_FADD, k1, W2_OFF + 64, 8, IBV_WC_SUCCESS,
		      "type 1 from another QP of its PD");
	pair2_down();
	pair2_up(pd2);
	probe(&A2, &B2, &t, P_WRITE, k1, W2_OFF, 64, IBV_WC_REM_ACCESS_ERR,
	      "type 1 from a QP of another PD");
	pair2_down();

	/* the responder QP must allow the access too, not only the window */
	{
		struct ibv_qp_attr a = { .qp_access_flags = IBV_ACCESS_REMOTE_READ };

		if (ibv_modify_qp(B.qp, &a, IBV_QP_ACCESS_FLAGS))
			vc_fail("modify_qp RTS->RTS qp_access_flags: %s", strerror(errno));
		probe_ab(&t, P_READ, k1, W2_OFF, 64, IBV_WC_SUCCESS,
			 "type 1 through a QP with remote read only");
		probe_ab(&t, P_WRITE, k1, W2_OFF, 64, IBV_WC_REM_ACCESS_ERR,
			 "type 1 write through a QP without remote write");
	}

	/* a type 1 window bound from a QP of another PD (ibv_bind_mw checks
	 * only the MR's PD against the window's) */
	pair2_up(pd2);
	{
		struct ibv_mw *m1b = mw_alloc(B.pd, IBV_MW_TYPE_1);
		struct ibv_mw_bind b = {
			.wr_id = 520, .send_flags = IBV_SEND_SIGNALED,
			.bind_info = { .mr = t.b.mr, .addr = target_addr(&t, W1_OFF),
				       .length = 64, .mw_access_flags = MW_REMOTE },
		};
		uint32_t before = m1b->rkey;
		int ret = ibv_bind_mw(B2.qp, m1b, &b);

		EXPECT_EQ("ibv_bind_mw on a QP of another PD", 0, ret);
		if (!ret) {
			expect_wc(&B2, 520, IBV_WC_MW_BIND_ERR, -1, 10, NULL,
				  "type 1 window of PD 1 bound on a QP of PD 2");
			m1b->rkey = before;
		}
		mw_free(m1b, "type 1 of the refused bind");
	}
	pair2_down();

	pair2_up(pd2);
	bind2(&B2, m2b, ibv_inc_rkey(m2b->rkey), t.b.mr, target_addr(&t, W1_OFF), 64,
	      MW_REMOTE, 0, IBV_WC_MW_BIND_ERR, "type 2 window of PD 1 bound on a QP of PD 2");
	pair2_down();
	pair2_up(pd2);
	bind2(&B2, m2p, ibv_inc_rkey(m2p->rkey), t.b.mr, target_addr(&t, W1_OFF), 64,
	      MW_REMOTE, 1, IBV_WC_MW_BIND_ERR, "type 2 window of PD 2 bound to an MR of PD 1");
	pair2_down();

	mw_free(m2, "type 2 bound");
	mw_free(m1, "type 1 bound");
	mw_free(m2b, "type 2");
	mw_free(m2p, "type 2 of PD 2");
	expect_dereg_ok(&t, "after the windows were deallocated");
	if (ibv_dealloc_pd(pd2))
		vc_fail("ibv_dealloc_pd of PD 2: %s", strerror(errno));
	mw_teardown(&t);
}

/*
 * Binds that must fail with IBV_WC_MW_BIND_ERR (and the QP in ERR, a later
 * request flushed): an MR without IBV_ACCESS_MW_BIND (type 1 and 2), remote
 * write or atomic on an MR without local write, a range outside the MR, a
 * type 2 window of length 0 or already bound, access flags a window cannot
 * grant; a zero-based type 1 bind is refused at ibv_bind_mw with EINVAL.
 */
static void c_mw_bind_errors(void)
{
	struct target t = mw_setup();
	struct target nb = target_new(&B, PAGE, 0, ALL_REMOTE, 0x22);
	struct target ro = target_new(&B, PAGE, 0, IBV_ACCESS_MW_BIND, 0x23);
	struct ibv_mw *m1 = mw_alloc(B.pd, IBV_MW_TYPE_1);
	struct ibv_mw *m2 = mw_alloc(B.pd, IBV_MW_TYPE_2);
	struct ibv_mw_bind zb = {
		.wr_id = 510, .send_flags = IBV_SEND_SIGNALED,
		.bind_info = { .mr = t.b.mr, .addr = target_addr(&t, W1_OFF),
			       .length = 64,
			       .mw_access_flags = IBV_ACCESS_REMOTE_READ |
						  IBV_ACCESS_ZERO_BASED },
	};
	uint32_t k, before;
	int ret;

	before = m1->rkey;
	k = bind1(m1, nb.b.mr, target_addr(&nb, 0), 512, MW_REMOTE, IBV_WC_MW_BIND_ERR,
		  "type 1 to an MR without MW_BIND");
	pair_renew();
	probe_ab(&nb, P_WRITE, k, 0, 8, IBV_WC_REM_ACCESS_ERR, "the key of the failed bind");
	probe_ab(&nb, P_WRITE, before, 0, 8, IBV_WC_REM_ACCESS_ERR,
		 "the key before the failed bind");
	bind2(&B, m2, ibv_inc_rkey(m2->rkey), nb.b.mr, target_addr(&nb, 0), 512,
	      MW_REMOTE, 0, IBV_WC_MW_BIND_ERR, "type 2 to an MR without MW_BIND");
	pair_renew();
	bind2(&B, m2, ibv_inc_rkey(m2->rkey), ro.b.mr, target_addr(&ro, 0), 512,
	      IBV_ACCESS_REMOTE_WRITE, 0, IBV_WC_MW_BIND_ERR,
	      "remote write to an MR without local write");
	pair_renew();
	bind2(&B, m2, ibv_inc_rkey(m2->rkey), ro.b.mr, target_addr(&ro, 0), 512,
	      IBV_ACCESS_REMOTE_ATOMIC, 1, IBV_WC_MW_BIND_ERR,
	      "remote atomic to an MR without local write");
	pair_renew();
	bind2(&B, m2, ibv_inc_rkey(m2->rkey), ro.b.mr, target_addr(&ro, 0), 512,
	      IBV_ACCESS_REMOTE_READ, 0, IBV_WC_SUCCESS,
	      "remote read to an MR without local write");
	probe_ab(&ro, P_READ, m2->rkey, 0, 512, IBV_WC_SUCCESS, "read-only window");
	local_inv(&B, m2->rkey, 0, IBV_WC_SUCCESS, "free it again");
	bind2(&B, m2, ibv_inc_rkey(m2->rkey), t.b.mr, target_addr(&t, 3 * PAGE - 100),
	      200, MW_REMOTE, 0, IBV_WC_MW_BIND_ERR, "100 bytes past the MR's end");
	pair_renew();
	bind2(&B, m2, ibv_inc_rkey(m2->rkey), t.b.mr, target_addr(&t, 0) - 8, 16,
	      MW_REMOTE, 1, IBV_WC_MW_BIND_ERR, "8 bytes before the MR's start");
	pair_renew();
	bind2(&B, m2, ibv_inc_rkey(m2->rkey), t.b.mr, target_addr(&t, W1_OFF), 0,
	      MW_REMOTE, 0, IBV_WC_MW_BIND_ERR, "type 2 of length 0");
	pair_renew();
	bind2(&B, m2, ibv_inc_rkey(m2->rkey), t.b.mr, target_addr(&t, W1_OFF), 64,
	      IBV_ACCESS_REMOTE_READ | IBV_ACCESS_ZERO_BASED, 0, IBV_WC_MW_BIND_ERR,
	      "type 2 zero-based");
	pair_renew();

	/* a type 2 window already bound */
	bind2(&B, m2, ibv_inc_rkey(m2->rkey), t.b.mr, target_addr(&t, W1_OFF), W1_LEN,
	      MW_REMOTE, 0, IBV_WC_SUCCESS, "type 2");
	bind2(&B, m2, ibv_inc_rkey(m2->rkey), t.b.mr, target_addr(&t, W2_OFF), W2_LEN,
	      MW_REMOTE, 0, IBV_WC_MW_BIND_ERR, "type 2 already bound");
	expect_dereg_busy(&t, "type 2 still bound after the refused second bind");
	pair_renew();

	/* zero-based type 1: refused when posted */
	before = m1->rkey;
	ret = ibv_bind_mw(B.qp, m1, &zb);
	EXPECT_EQ("ibv_bind_mw zero-based type 1", EINVAL, ret);
	EXPECT_EQ("rkey after the refused zero-based bind", before, m1->rkey);
	expect_no_wc(&B, 0.1, "refused zero-based bind");
	expect_state(&B, IBV_QPS_RTS, "after the refused zero-based bind");

	mw_free(m1, "type 1");
	mw_free(m2, "type 2 bound");
	target_free(&nb);
	target_free(&ro);
	mw_teardown(&t);
}

/*
 * LOCAL_INV of anything but a bound type 2 window fails with
 * IBV_WC_LOC_QP_OP_ERR and the QP goes to ERR: an MR's key, a type 1
 * window (still bound afterwards), a type 2 window not bound, a key that
 * names nothing.
 */
static void c_mw_local_inv_errors(void)
{
	struct target t = mw_setup();
	struct ibv_mw *m1 = mw_alloc(B.pd, IBV_MW_TYPE_1);
	struct ibv_mw *m2 = mw_alloc(B.pd, IBV_MW_TYPE_2);
	uint32_t k1;

	k1 = bind1(m1, t.b.mr, target_addr(&t, W1_OFF), W1_LEN, MW_REMOTE,
		   IBV_WC_SUCCESS, "type 1");
	local_inv(&B, t.b.mr->rkey, 0, IBV_WC_LOC_QP_OP_ERR, "LOCAL_INV of an MR's key");
	pair_renew();
	local_inv(&B, k1, 0, IBV_WC_LOC_QP_OP_ERR, "LOCAL_INV of a type 1 window");
	pair_renew();
	probe_ab(&t, P_READ, k1, W1_OFF, 64, IBV_WC_SUCCESS,
		 "type 1 after the refused LOCAL_INV");
	if (on_rxe())
		vc_note("skipped on rxe (its invalidate of a free type 2 window "
		     "dereferences a NULL MR): LOCAL_INV of a type 2 window not bound");
	else
		local_inv(&B, m2->rkey, 1, IBV_WC_LOC_QP_OP_ERR,
			  "LOCAL_INV of a type 2 window not bound");
	pair_renew();
	local_inv(&B, 0xfffffe00u | (seed & 0xff), 1, IBV_WC_LOC_QP_OP_ERR,
		  "LOCAL_INV of a key that names nothing");
	mw_free(m1, "type 1");
	mw_free(m2, "type 2");
	mw_teardown(&t);
}

/*
 * SEND_WITH_INV of a key the responder may not invalidate: REM_INV_REQ_ERR
 * at the requester and on the responder's receive, both QPs in ERR, and
 * what the key names is unchanged (still usable).
 */
static void send_inv_refused(uint32_t key, const char *what)
{
	struct vp_gbuf r = buf_new(&B, 4096, 0, IBV_ACCESS_LOCAL_WRITE);
	struct ibv_sge rsg = vp_gbuf_sge(&r, 0, 4096), sg = vp_gbuf_sge(&L, 0, 32);
	struct xop o = { .op = IBV_WR_SEND_WITH_INV, .wr_id = 701,
			 .flags = IBV_SEND_SIGNALED, .inv = key, .sg = &sg, .nsg = 1 };

	post_recv(&B, &rsg, 1, 700);
	if (!xpost_ok(&A, &o, 1, what)) {
		expect_wc(&A, 701, IBV_WC_REM_INV_REQ_ERR, -1, 10, NULL, what);
		expect_wc(&B, 700, IBV_WC_REM_INV_REQ_ERR, -1, 10, NULL, what);
		expect_state(&A, IBV_QPS_ERR, what);
		expect_state(&B, IBV_QPS_ERR, what);
	}
	vp_gbuf_free(&r);
	pair_renew();
}

static void c_mw_send_inv_errors(void)
{
	struct target t = mw_setup();
	struct target rm = target_new(&B, PAGE, 0, ALL_REMOTE, 0x24);
	struct ibv_mw *m1 = mw_alloc(B.pd, IBV_MW_TYPE_1);
	struct ibv_mw *m2 = mw_alloc(B.pd, IBV_MW_TYPE_2);
	struct ibv_mw *m2f = mw_alloc(B.pd, IBV_MW_TYPE_2);
	uint32_t k1, k2;

	send_inv_refused(rm.b.mr->rkey, "SEND_WITH_INV of an MR's key");
	probe_ab(&rm, P_WRITE, rm.b.mr->rkey, 0, 64, IBV_WC_SUCCESS,
		 "the MR after the refused invalidate");
	k1 = bind1(m1, t.b.mr, target_addr(&t, W1_OFF), W1_LEN, MW_REMOTE,
		   IBV_WC_SUCCESS, "type 1");
	send_inv_refused(k1, "SEND_WITH_INV of a type 1 window");
	probe_ab(&t, P_READ, k1, W1_OFF, 64, IBV_WC_SUCCESS,
		 "type 1 after the refused invalidate");
	pair2_up(B.pd);
	k2 = ibv_inc_rkey(m2->rkey);
	bind2(&B2, m2, k2, t.b.mr, target_addr(&t, W2_OFF), W2_LEN, MW_REMOTE, 0,
	      IBV_WC_SUCCESS, "type 2 bound on another QP");
	send_inv_refused(k2, "SEND_WITH_INV of a type 2 window bound to another QP");
	probe(&A2, &B2, &t, P_WRITE, k2, W2_OFF, 64, IBV_WC_SUCCESS,
	      "type 2 on its QP after the refused invalidate");
	pair2_down();
	if (on_rxe())
		vc_note("skipped on rxe (would dereference a NULL MR): "
		     "SEND_WITH_INV of a type 2 window not bound");
	else
		send_inv_refused(m2f->rkey, "SEND_WITH_INV of a type 2 window not bound");
	send_inv_refused(0xfffffe00u | (seed & 0xff), "SEND_WITH_INV of a key that names nothing");
	mw_free(m1, "type 1");
	mw_free(m2, "type 2");
	mw_free(m2f, "type 2 free");
	target_free(&rm);
	mw_teardown(&t);
}

/*
 * ibv_dereg_mr of an MR with a window bound: EBUSY; ibv_dealloc_mw of the
 * bound window succeeds, its key is dead, and then the MR deregisters.
 */
static void c_mw_dealloc_bound(void)
{
	struct target t = mw_setup();
	struct target t2 = target_new(&B, 3 * PAGE, 64, W_ACCESS, 0x25);
	struct ibv_mw *m1 = mw_alloc(B.pd, IBV_MW_TYPE_1);
	struct ibv_mw *m2 = mw_alloc(B.pd, IBV_MW_TYPE_2);
	uint32_t k1, k2;

	k1 = bind1(m1, t.b.mr, target_addr(&t, W1_OFF), W1_LEN, MW_REMOTE,
		   IBV_WC_SUCCESS, "type 1");
	probe_ab(&t, P_WRITE, k1, W1_OFF, 256, IBV_WC_SUCCESS, "type 1 bound");
	expect_dereg_busy(&t, "type 1 bound");
	mw_free(m1, "type 1 bound");
	probe_ab(&t, P_READ, k1, W1_OFF, 8, IBV_WC_REM_ACCESS_ERR,
		 "type 1 deallocated while bound");
	expect_dereg_ok(&t, "type 1 deallocated");

	k2 = ibv_inc_rkey(m2->rkey);
	bind2(&B, m2, k2, t2.b.mr, target_addr(&t2, W1_OFF), W1_LEN, MW_REMOTE, 1,
	      IBV_WC_SUCCESS, "type 2");
	probe_ab(&t2, P_WRITE, k2, W1_OFF, 256, IBV_WC_SUCCESS, "type 2 bound");
	expect_dereg_busy(&t2, "type 2 bound");
	mw_free(m2, "type 2 bound");
	probe_ab(&t2, P_READ, k2, W1_OFF, 8, IBV_WC_REM_ACCESS_ERR,
		 "type 2 deallocated while bound");
	expect_dereg_ok(&t2, "type 2 deallocated");
	target_free(&t2);
	mw_teardown(&t);
}

/*
 * Windows bound the way programs written for rxe bind them: with
 * IBV_ACCESS_LOCAL_WRITE beside the remote bits (a window grants remote
 * access only: the local bit is ignored).  Type 1 through ibv_bind_mw,
 * invalidated by a zero-length rebind naming the MR; type 2 through
 * ibv_wr_bind_mw and IBV_WR_BIND_MW, invalidated by LOCAL_INV and by the
 * peer's SEND_WITH_INV; both deallocated while bound.  Each bound window
 * takes a remote write (exact bytes) and refuses a read it did not grant.
 */
static void c_mw_local_write(void)
{
	const unsigned int acc = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_LOCAL_WRITE;
	struct target t = mw_setup();
	struct vp_gbuf r = buf_new(&B, 4096, 0, IBV_ACCESS_LOCAL_WRITE);
	struct ibv_sge rsg = vp_gbuf_sge(&r, 0, 4096);
	struct ibv_mw *m1 = mw_alloc(B.pd, IBV_MW_TYPE_1);
	struct ibv_mw *m2 = mw_alloc(B.pd, IBV_MW_TYPE_2);
	uint32_t k1, k0, k2;

	k1 = bind1(m1, t.b.mr, target_addr(&t, W1_OFF), W1_LEN, acc, IBV_WC_SUCCESS,
		   "type 1, REMOTE_WRITE | LOCAL_WRITE");
	probe_ab(&t, P_WRITE, k1, W1_OFF, W1_LEN, IBV_WC_SUCCESS, "type 1 bound with LOCAL_WRITE");
	probe_ab(&t, P_READ, k1, W1_OFF, 64, IBV_WC_REM_ACCESS_ERR,
		 "type 1 bound with LOCAL_WRITE: read not granted");
	k0 = bind1(m1, t.b.mr, target_addr(&t, W1_OFF), 0, acc, IBV_WC_SUCCESS,
		   "type 1 zero-length rebind");
	probe_ab(&t, P_WRITE, k1, W1_OFF, 64, IBV_WC_REM_ACCESS_ERR,
		 "type 1: the key before the zero-length rebind");
	probe_ab(&t, P_WRITE, k0, W1_OFF, 64, IBV_WC_REM_ACCESS_ERR,
		 "type 1: the zero-length rebind's key");
	k1 = bind1(m1, t.b.mr, target_addr(&t, W2_OFF), W2_LEN, acc, IBV_WC_SUCCESS,
		   "type 1 bound again");
	probe_ab(&t, P_WRITE, k1, W2_OFF, W2_LEN, IBV_WC_SUCCESS, "type 1 bound again");
	mw_free(m1, "type 1 bound with LOCAL_WRITE");
	probe_ab(&t, P_WRITE, k1, W2_OFF, 64, IBV_WC_REM_ACCESS_ERR,
		 "type 1 deallocated while bound");

	k2 = ibv_inc_rkey(m2->rkey);
	bind2(&B, m2, k2, t.b.mr, target_addr(&t, W1_OFF), W1_LEN, acc, 0,
	      IBV_WC_SUCCESS, "type 2 by ibv_wr_bind_mw, REMOTE_WRITE | LOCAL_WRITE");
	probe_ab(&t, P_WRITE, k2, W1_OFF, W1_LEN, IBV_WC_SUCCESS, "type 2 bound (WR API)");
	local_inv(&B, k2, 1, IBV_WC_SUCCESS, "type 2 LOCAL_INV");
	probe_ab(&t, P_WRITE, k2, W1_OFF, 64, IBV_WC_REM_ACCESS_ERR, "type 2 after LOCAL_INV");

	k2 = ibv_inc_rkey(k2);
	bind2(&B, m2, k2, t.b.mr, target_addr(&t, W1_OFF), W1_LEN, acc, 1,
	      IBV_WC_SUCCESS, "type 2 by IBV_WR_BIND_MW, REMOTE_WRITE | LOCAL_WRITE");
	probe_ab(&t, P_WRITE, k2, W1_OFF + 8, 256, IBV_WC_SUCCESS, "type 2 bound (post_send)");
	send_inv0(&rsg, k2, 620, "SEND_WITH_INV of the type 2 key");
	probe_ab(&t, P_WRITE, k2, W1_OFF, 64, IBV_WC_REM_ACCESS_ERR,
		 "type 2 after SEND_WITH_INV");

	k2 = ibv_inc_rkey(k2);
	bind2(&B, m2, k2, t.b.mr, target_addr(&t, W2_OFF), W2_LEN, acc, 0,
	      IBV_WC_SUCCESS, "type 2 bound again");
	probe_ab(&t, P_WRITE, k2, W2_OFF, W2_LEN, IBV_WC_SUCCESS, "type 2 bound again");
	mw_free(m2, "type 2 bound with LOCAL_WRITE");
	probe_ab(&t, P_WRITE, k2, W2_OFF, 64, IBV_WC_REM_ACCESS_ERR,
		 "type 2 deallocated while bound");
	expect_dereg_ok(&t, "every window gone");
	vp_gbuf_free(&r);
	mw_teardown(&t);
}

/* ---- 3. UC queue pairs ------------------------------------------------------------ */

static void uc_up(void)
{
	pair_make(&A, &B, IBV_QPT_UC);
}

/* UC writes complete at the requester when sent: wait for the target. */
static void wait_target(const struct target *t, double timeout_s)
{
	double end = vp_now() + timeout_s;

	while (memcmp(t->b.p, t->model, t->b.len) && vp_now() < end)
		vp_sleep_us(1000);
}

/*
 * UC data: write (WR API, 4 frames), write_imm (ibv_post_send), send
 * (set_sge_list) and send_imm (inline) with every byte and completion
 * value checked; sends across frame boundaries.
 */
static void c_uc_data(void)
{
	static const uint32_t sizes[] = { 1, 1000, 1464, 1465, 2929, 20000 };
	struct target t;
	struct vp_gbuf l, r;
	struct ibv_sge sg[2], rsg;
	struct ibv_send_wr wr;
	uint32_t imm = (uint32_t)rand_r(&seed);
	struct xop o;
	size_t i;

	uc_up();
	t = target_new(&B, 16384, 64, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE, 0x31);
	l = buf_new(&A, 32768, 0, IBV_ACCESS_LOCAL_WRITE);
	r = buf_new(&B, 32768, 0, IBV_ACCESS_LOCAL_WRITE);
	vp_fill_tag8(l.p, l.len, 0x51);
	rsg = vp_gbuf_sge(&r, 0, (uint32_t)r.len);

	sg[0] = vp_gbuf_sge(&l, 3, 5000);
	o = (struct xop){ .op = IBV_WR_RDMA_WRITE, .wr_id = 1, .flags = IBV_SEND_SIGNALED,
			  .rkey = t.b.mr->rkey, .raddr = target_addr(&t, 10),
			  .sg = sg, .nsg = 1 };
	if (!xpost_ok(&A, &o, 1, "UC rdma_write"))
		expect_wc(&A, 1, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, 10, NULL, "UC rdma_write");
	memcpy(t.model + 10, l.p + 3, 5000);
	wait_target(&t, 10);
	target_check(&t, "UC rdma_write");
	expect_no_wc(&B, 0.05, "UC rdma_write at the responder");

	post_recv(&B, &rsg, 1, 100);
	memset(&wr, 0, sizeof(wr));
	sg[0] = vp_gbuf_sge(&l, 6000, 3000);
	wr.wr_id = 2;
	wr.sg_list = sg;
	wr.num_sge = 1;
	wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.imm_data = htonl(imm);
	wr.wr.rdma.remote_addr = target_addr(&t, 8000);
	wr.wr.rdma.rkey = t.b.mr->rkey;
	if (!post_send_ok(&A, &wr, "UC rdma_write_imm"))
		expect_wc(&A, 2, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, 10, NULL,
			  "UC rdma_write_imm");
	memcpy(t.model + 8000, l.p + 6000, 3000);
	expect_recv(&B, 100, IBV_WC_RECV_RDMA_WITH_IMM, 3000, IBV_WC_WITH_IMM,
		    htonl(imm), 10, "UC rdma_write_imm received");
	target_check(&t, "UC rdma_write_imm");

	for (i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		uint32_t n = sizes[i], half = n / 2;
		char what[64];

		snprintf(what, sizeof(what), "UC send of %u bytes", n);
		vp_fill_tag8(l.p, n, (uint8_t)(0x60 + i));
		memset(r.p, 0, r.len);
		post_recv(&B, &rsg, 1, 200 + i);
		sg[0] = vp_gbuf_sge(&l, 0, half);
		sg[1] = vp_gbuf_sge(&l, half, n - half);
		o = (struct xop){ .op = i & 1 ? IBV_WR_SEND_WITH_IMM : IBV_WR_SEND,
				  .wr_id = 10 + i, .flags = IBV_SEND_SIGNALED,
				  .imm = imm + (uint32_t)i, .sg = half ? sg : &sg[1],
				  .nsg = half ? 2 : 1 };
		if (!xpost_ok(&A, &o, 1, what))
			expect_wc(&A, 10 + i, IBV_WC_SUCCESS, IBV_WC_SEND, 10, NULL, what);
		if (!expect_recv(&B, 200 + i, IBV_WC_RECV, n, i & 1 ? IBV_WC_WITH_IMM : 0,
				 htonl(imm + (uint32_t)i), 10, what) &&
		    (memcmp(r.p, l.p, n) || vp_diff_byte(r.p + n, r.len - n, 0) >= 0))
			vc_fail("%s: bytes differ", what);
	}

	/* send_imm with inline data through ibv_post_send */
	post_recv(&B, &rsg, 1, 300);
	vp_fill_tag8(l.p, 100, 0x77);
	sg[0] = vp_gbuf_sge(&l, 0, 100);
	memset(&wr, 0, sizeof(wr));
	wr.wr_id = 30;
	wr.sg_list = sg;
	wr.num_sge = 1;
	wr.opcode = IBV_WR_SEND_WITH_IMM;
	wr.send_flags = IBV_SEND_SIGNALED | IBV_SEND_INLINE;
	wr.imm_data = htonl(~imm);
	if (!post_send_ok(&A, &wr, "UC inline send_imm")) {
		memset(l.p, 0, 100);
		expect_wc(&A, 30, IBV_WC_SUCCESS, IBV_WC_SEND, 10, NULL, "UC inline send_imm");
		vp_fill_tag8(l.p, 100, 0x77);
	}
	if (!expect_recv(&B, 300, IBV_WC_RECV, 100, IBV_WC_WITH_IMM, htonl(~imm), 10,
			 "UC inline send_imm received") && memcmp(r.p, l.p, 100))
		vc_fail("UC inline send_imm: bytes differ");
	expect_state(&A, IBV_QPS_RTS, "UC requester");
	expect_state(&B, IBV_QPS_RTS, "UC responder");
	target_free(&t);
	vp_gbuf_free(&l);
	vp_gbuf_free(&r);
	pair_down();
}

/* ibv_create_qp_ex of a UC QP with `op` in send_ops_flags: EOPNOTSUPP. */
static void uc_ops_refused(uint64_t op, const char *name)
{
	struct ibv_qp_init_attr_ex ia = {
		.qp_type = IBV_QPT_UC,
		.send_cq = ibv_cq_ex_to_cq(A.cqx), .recv_cq = ibv_cq_ex_to_cq(A.cqx),
		.cap = { .max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1,
			 .max_recv_sge = 1 },
		.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS,
		.pd = A.pd,
		.send_ops_flags = IBV_QP_EX_WITH_RDMA_WRITE | op,
	};
	struct ibv_qp *qp;

	errno = 0;
	qp = ibv_create_qp_ex(A.ctx, &ia);
	if (qp) {
		vc_fail("UC QP with send_ops_flags %s: created, expected EOPNOTSUPP", name);
		ibv_destroy_qp(qp);
	} else if (errno != EOPNOTSUPP) {
		vc_fail("UC QP with send_ops_flags %s: errno %d (%s), expected EOPNOTSUPP",
		     name, errno, strerror(errno));
	}
}

/*
 * What a UC QP refuses: reads and atomics (they need a response) in its
 * send_ops_flags (EOPNOTSUPP), in ibv_post_send (EINVAL, bad_wr names the
 * request, the ones before it are posted) and through the WR API
 * (ibv_wr_complete: EINVAL, nothing posted).  The QPs stay in RTS.
 */
static void c_uc_refused(void)
{
	static const enum ibv_wr_opcode ops[] = { IBV_WR_RDMA_READ,
		IBV_WR_ATOMIC_CMP_AND_SWP, IBV_WR_ATOMIC_FETCH_AND_ADD };
	struct target t;
	struct vp_gbuf l;
	struct ibv_sge sg;
	struct ibv_send_wr wr[2], *bad;
	size_t i;
	int ret;

	uc_up();
	uc_ops_refused(IBV_QP_EX_WITH_RDMA_READ, "RDMA_READ");
	uc_ops_refused(IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP, "ATOMIC_CMP_AND_SWP");
	uc_ops_refused(IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD, "ATOMIC_FETCH_AND_ADD");
	uc_ops_refused(IBV_QP_EX_WITH_LOCAL_INV, "LOCAL_INV");
	t = target_new(&B, 4096, 0, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE, 0x32);
	l = buf_new(&A, 4096, 0, IBV_ACCESS_LOCAL_WRITE);
	vp_fill_tag8(l.p, l.len, 0x52);
	sg = vp_gbuf_sge(&l, 0, 8);

	for (i = 0; i < sizeof(ops) / sizeof(ops[0]); i++) {
		char what[80];

		snprintf(what, sizeof(what), "ibv_post_send of opcode %d on UC", ops[i]);
		memset(wr, 0, sizeof(wr));
		/* a write the list starts with: posted */
		wr[0].wr_id = 10 + i;
		wr[0].sg_list = &sg;
		wr[0].num_sge = 1;
		wr[0].opcode = IBV_WR_RDMA_WRITE;
		wr[0].send_flags = IBV_SEND_SIGNALED;
		wr[0].wr.rdma.remote_addr = target_addr(&t, i * 8);
		wr[0].wr.rdma.rkey = t.b.mr->rkey;
		wr[0].next = &wr[1];
		wr[1].wr_id = 20 + i;
		wr[1].sg_list = &sg;
		wr[1].num_sge = 1;
		wr[1].opcode = ops[i];
		wr[1].send_flags = IBV_SEND_SIGNALED;
		wr[1].wr.atomic.remote_addr = target_addr(&t, 64);
		wr[1].wr.atomic.rkey = t.b.mr->rkey;
		bad = NULL;
		ret = ibv_post_send(A.qp, wr, &bad);
		EXPECT_EQ(what, EINVAL, ret);
		if (bad != &wr[1])
			vc_fail("%s: bad_wr %p, expected the second request %p", what,
			     (void *)bad, (void *)&wr[1]);
		memcpy(t.model + i * 8, l.p, 8);
		expect_wc(&A, 10 + i, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, 10, NULL,
			  "the write before the refused request");
	}
	wait_target(&t, 10);

	/* the WR API applies the same rule: the batch fails whole */
	if (on_rxe()) {
		/* its provider leaves ibv_wr_rdma_read NULL on a UC QP */
		vc_note("skipped on rxe (NULL wr_rdma_read): the WR API part");
		goto out;
	}
	ibv_wr_start(A.qpx);
	A.qpx->wr_id = 30;
	A.qpx->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_rdma_write(A.qpx, t.b.mr->rkey, target_addr(&t, 128));
	ibv_wr_set_sge(A.qpx, l.mr->lkey, (uintptr_t)l.p, 8);
	A.qpx->wr_id = 31;
	ibv_wr_rdma_read(A.qpx, t.b.mr->rkey, target_addr(&t, 0));
	ibv_wr_set_sge(A.qpx, l.mr->lkey, (uintptr_t)l.p + 64, 8);
	EXPECT_EQ("ibv_wr_complete with an rdma_read on UC", EINVAL, ibv_wr_complete(A.qpx));
	ibv_wr_start(A.qpx);
	A.qpx->wr_id = 32;
	A.qpx->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_atomic_fetch_add(A.qpx, t.b.mr->rkey, target_addr(&t, 64), 1);
	ibv_wr_set_sge(A.qpx, l.mr->lkey, (uintptr_t)l.p + 64, 8);
	EXPECT_EQ("ibv_wr_complete with an atomic_fetch_add on UC", EINVAL,
		  ibv_wr_complete(A.qpx));
out:
	expect_no_wc(&A, 0.3, "refused UC batches");
	target_check(&t, "refused UC requests");
	expect_state(&A, IBV_QPS_RTS, "UC requester after refused requests");
	expect_state(&B, IBV_QPS_RTS, "UC responder");
	target_free(&t);
	vp_gbuf_free(&l);
	pair_down();
}

/*
 * What a UC responder cannot take is dropped whole and silently, and the
 * connection goes on (docs/protocol.md 10): a write with a bad key (the
 * requester sees success, nothing lands), a send with no receive posted, a
 * send larger than the receive (the receive is kept for the next one).
 */
static void c_uc_drops(void)
{
	struct target t;
	struct vp_gbuf l, r;
	struct ibv_sge sg, rsg;
	struct xop o;

	uc_up();
	t = target_new(&B, 8192, 64, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE, 0x33);
	l = buf_new(&A, 8192, 0, IBV_ACCESS_LOCAL_WRITE);
	r = buf_new(&B, 4096, 0, IBV_ACCESS_LOCAL_WRITE);
	vp_fill_tag8(l.p, l.len, 0x53);
	memset(r.p, 0, r.len);

	sg = vp_gbuf_sge(&l, 0, 3000);
	o = (struct xop){ .op = IBV_WR_RDMA_WRITE, .wr_id = 1, .flags = IBV_SEND_SIGNALED,
			  .rkey = t.b.mr->rkey ^ 0x00100000u, .raddr = target_addr(&t, 0),
			  .sg = &sg, .nsg = 1 };
	if (!xpost_ok(&A, &o, 1, "UC write, bad rkey"))
		expect_wc(&A, 1, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, 10, NULL,
			  "UC write, bad rkey (requester)");
	o.wr_id = 2;
	o.rkey = t.b.mr->rkey;
	o.raddr = target_addr(&t, 8192 - 1000);		/* 2000 bytes past the end */
	if (!xpost_ok(&A, &o, 1, "UC write past the end"))
		expect_wc(&A, 2, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, 10, NULL,
			  "UC write past the end (requester)");
	o.wr_id = 3;
	o.raddr = target_addr(&t, 100);
	if (!xpost_ok(&A, &o, 1, "UC write after the dropped ones"))
		expect_wc(&A, 3, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, 10, NULL,
			  "UC write after the dropped ones");
	memcpy(t.model + 100, l.p, 3000);
	wait_target(&t, 10);
	vp_sleep_us(100000);
	target_check(&t, "UC writes: two dropped, one landed");

	/* a send with no receive posted: dropped; the next one arrives */
	sg = vp_gbuf_sge(&l, 0, 2000);
	o = (struct xop){ .op = IBV_WR_SEND, .wr_id = 4, .flags = IBV_SEND_SIGNALED,
			  .sg = &sg, .nsg = 1 };
	if (!xpost_ok(&A, &o, 1, "UC send, no receive"))
		expect_wc(&A, 4, IBV_WC_SUCCESS, IBV_WC_SEND, 10, NULL, "UC send, no receive");
	vp_sleep_us(200000);
	expect_no_wc(&B, 0.05, "UC send with no receive posted");
	rsg = vp_gbuf_sge(&r, 0, 4096);
	post_recv(&B, &rsg, 1, 100);
	sg = vp_gbuf_sge(&l, 2000, 1500);
	o.wr_id = 5;
	if (!xpost_ok(&A, &o, 1, "UC send after the dropped one"))
		expect_wc(&A, 5, IBV_WC_SUCCESS, IBV_WC_SEND, 10, NULL,
			  "UC send after the dropped one");
	if (!expect_recv(&B, 100, IBV_WC_RECV, 1500, 0, 0, 10,
			 "UC send after the dropped one, received") &&
	    memcmp(r.p, l.p + 2000, 1500))
		vc_fail("UC send after the dropped one: bytes differ");

	/* a send larger than the receive: dropped, the receive kept */
	memset(r.p, 0, r.len);
	rsg = vp_gbuf_sge(&r, 0, 100);
	post_recv(&B, &rsg, 1, 101);
	sg = vp_gbuf_sge(&l, 0, 200);
	o.wr_id = 6;
	if (!xpost_ok(&A, &o, 1, "UC send larger than the receive"))
		expect_wc(&A, 6, IBV_WC_SUCCESS, IBV_WC_SEND, 10, NULL,
			  "UC send larger than the receive");
	vp_sleep_us(200000);
	sg = vp_gbuf_sge(&l, 300, 50);
	o.wr_id = 7;
	if (!xpost_ok(&A, &o, 1, "UC send that fits"))
		expect_wc(&A, 7, IBV_WC_SUCCESS, IBV_WC_SEND, 10, NULL, "UC send that fits");
	if (!expect_recv(&B, 101, IBV_WC_RECV, 50, 0, 0, 10,
			 "UC send that fits, into the receive the large one left") &&
	    (memcmp(r.p, l.p + 300, 50) || vp_diff_byte(r.p + 100, r.len - 100, 0) >= 0))
		vc_fail("UC send that fits: bytes differ (or the dropped one wrote past the receive)");
	expect_no_wc(&B, 0.05, "after the UC drops");
	expect_state(&A, IBV_QPS_RTS, "UC requester after the drops");
	expect_state(&B, IBV_QPS_RTS, "UC responder after the drops");
	target_free(&t);
	vp_gbuf_free(&l);
	vp_gbuf_free(&r);
	pair_down();
}

/*
 * Memory windows on UC QPs: a type 2 window bound through a UC QP's send
 * queue serves UC writes; SEND_WITH_INV on UC invalidates it (the receive
 * says so); a write with the dead key, or a SEND_WITH_INV of a key that
 * may not be invalidated, is dropped silently and the connection goes on.
 */
static void c_uc_mw(void)
{
	struct target t;
	struct vp_gbuf r;
	struct ibv_sge sg, rsg;
	struct ibv_mw *mw;
	uint32_t k;
	struct xop o;

	uc_up();
	t = target_new(&B, 3 * PAGE, 64, W_ACCESS, 0x37);
	L = buf_new(&A, 16384, 0, IBV_ACCESS_LOCAL_WRITE);
	r = buf_new(&B, 4096, 0, IBV_ACCESS_LOCAL_WRITE);
	rsg = vp_gbuf_sge(&r, 0, 4096);
	mw = mw_alloc(B.pd, IBV_MW_TYPE_2);
	k = ibv_inc_rkey(mw->rkey);
	bind2(&B, mw, k, t.b.mr, target_addr(&t, W1_OFF), W1_LEN, IBV_ACCESS_REMOTE_WRITE,
	      0, IBV_WC_SUCCESS, "type 2 bound through a UC QP");

	vp_fill_tag8(L.p, W1_LEN, 0x38);
	sg = vp_gbuf_sge(&L, 0, W1_LEN);
	o = (struct xop){ .op = IBV_WR_RDMA_WRITE, .wr_id = 1, .flags = IBV_SEND_SIGNALED,
			  .rkey = k, .raddr = target_addr(&t, W1_OFF), .sg = &sg, .nsg = 1 };
	if (!xpost_ok(&A, &o, 1, "UC write through the window"))
		expect_wc(&A, 1, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, 10, NULL,
			  "UC write through the window");
	memcpy(t.model + W1_OFF, L.p, W1_LEN);
	wait_target(&t, 10);
	target_check(&t, "UC write through the window");

	/* a SEND_WITH_INV of a key that may not be invalidated: dropped */
	post_recv(&B, &rsg, 1, 100);
	sg = vp_gbuf_sge(&L, 0, 16);
	o = (struct xop){ .op = IBV_WR_SEND_WITH_INV, .wr_id = 2, .flags = IBV_SEND_SIGNALED,
			  .inv = t.b.mr->rkey, .sg = &sg, .nsg = 1 };
	if (!xpost_ok(&A, &o, 1, "UC SEND_WITH_INV of an MR's key"))
		expect_wc(&A, 2, IBV_WC_SUCCESS, IBV_WC_SEND, 10, NULL,
			  "UC SEND_WITH_INV of an MR's key (requester)");
	vp_sleep_us(200000);
	expect_no_wc(&B, 0.05, "UC SEND_WITH_INV of an MR's key");

	/* SEND_WITH_INV of the window: the receive left above takes it */
	o.wr_id = 3;
	o.inv = k;
	if (!xpost_ok(&A, &o, 1, "UC SEND_WITH_INV of the window"))
		expect_wc(&A, 3, IBV_WC_SUCCESS, IBV_WC_SEND, 10, NULL,
			  "UC SEND_WITH_INV of the window (requester)");
	expect_recv(&B, 100, IBV_WC_RECV, 16, IBV_WC_WITH_INV, k, 10,
		    "UC SEND_WITH_INV of the window received");

	/* the dead key: the write is dropped, the next one lands */
	vp_fill_tag8(L.p, 64, 0x39);
	sg = vp_gbuf_sge(&L, 0, 64);
	o = (struct xop){ .op = IBV_WR_RDMA_WRITE, .wr_id = 4, .flags = IBV_SEND_SIGNALED,
			  .rkey = k, .raddr = target_addr(&t, W1_OFF), .sg = &sg, .nsg = 1 };
	if (!xpost_ok(&A, &o, 1, "UC write with the invalidated key"))
		expect_wc(&A, 4, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, 10, NULL,
			  "UC write with the invalidated key (requester)");
	post_recv(&B, &rsg, 1, 101);
	o = (struct xop){ .op = IBV_WR_SEND, .wr_id = 5, .flags = IBV_SEND_SIGNALED,
			  .sg = &sg, .nsg = 1 };
	if (!xpost_ok(&A, &o, 1, "UC send after the dropped write"))
		expect_wc(&A, 5, IBV_WC_SUCCESS, IBV_WC_SEND, 10, NULL,
			  "UC send after the dropped write");
	expect_recv(&B, 101, IBV_WC_RECV, 64, 0, 0, 10, "UC send after the dropped write");
	target_check(&t, "UC write with the invalidated key");
	expect_state(&A, IBV_QPS_RTS, "UC requester");
	expect_state(&B, IBV_QPS_RTS, "UC responder");
	mw_free(mw, "type 2 on UC");
	vp_gbuf_free(&r);
	mw_teardown(&t);
}

/* ---- UC under loss ---------------------------------------------------------------- */

#define LOSS_N		100	/* messages sent with loss on */
#define CLEAN_N		32	/* then with loss off, on the same connection */
#define MSG_MIN		4	/* a message starts with its number */
#define MSG_MAX		4400	/* up to 4 frames */
#define SLOT		4608	/* per message in every buffer; the rest stays untouched */
#define UNTOUCHED	0xee
#define BATCH		16

struct uc_run {
	struct vp_gbuf l;			/* A: BATCH source slots, reused */
	struct vp_gbuf r;			/* B: a receive slot per message */
	struct target t;		/* B: a write slot per message */
	uint32_t len[LOSS_N + CLEAN_N];
	int n;				/* messages: LOSS_N lossy, then CLEAN_N */
	/* results */
	int delivered, lost, partial, clean_delivered;
};

/* Message s: its number (4 bytes), then vp_fill_tag8()'s pattern. */
static uint8_t msg_byte(int s, size_t j)
{
	uint32_t v = (uint32_t)s;

	return j < 4 ? ((const uint8_t *)&v)[j] : vp_tag8(j, (uint8_t)(s * 3 + 1));
}

static void msg_fill(uint8_t *p, int s, uint32_t len)
{
	size_t j;

	for (j = 0; j < len; j++)
		p[j] = msg_byte(s, j);
}

static long msg_diff(const uint8_t *p, int s, uint32_t len)
{
	size_t j;

	for (j = 0; j < len; j++)
		if (p[j] != msg_byte(s, j))
			return (long)j;
	return -1;
}

static int run_cmd(const char *cmd)
{
	int rc = system(cmd);

	if (rc)
		vc_fail("command failed (status %d): %s", rc, cmd);
	return rc;
}

/* netem on the link A sends through, with these netem arguments */
static int netem_on(const char *args)
{
	char cmd[512];

	snprintf(cmd, sizeof(cmd), netem_fmt, args);
	return run_cmd(cmd);
}

static int loss_on(const char *pct)
{
	char args[64];

	snprintf(args, sizeof(args), "loss %s%%", pct);
	return netem_on(args);
}

/*
 * Messages [from, to) from A: sends (every other one with an immediate) or
 * writes into slot s (every fourth with an immediate), BATCH per
 * ibv_wr_complete, each batch completed before the next reuses the source
 * slots.  Every requester completion must be a success (UC: complete when
 * sent).  0, or -1 on a failure.
 */
static int uc_send_range(struct uc_run *u, int from, int to, int writes)
{
	struct ibv_sge sg[BATCH];
	struct xop o[BATCH];
	char what[96];
	int i, k, m, s;

	for (i = from; i < to; i += m) {
		m = to - i < BATCH ? to - i : BATCH;
		for (k = 0; k < m; k++) {
			s = i + k;
			msg_fill(u->l.p + (size_t)k * SLOT, s, u->len[s]);
			sg[k] = vp_gbuf_sge(&u->l, (size_t)k * SLOT, u->len[s]);
			o[k] = (struct xop){ .wr_id = (uint64_t)s, .flags = IBV_SEND_SIGNALED,
					     .imm = (uint32_t)s, .sg = &sg[k], .nsg = 1 };
			if (writes) {
				o[k].op = s % 4 == 3 ? IBV_WR_RDMA_WRITE_WITH_IMM :
						       IBV_WR_RDMA_WRITE;
				o[k].rkey = u->t.b.mr->rkey;
				o[k].raddr = target_addr(&u->t, (size_t)s * SLOT);
			} else {
				o[k].op = s & 1 ? IBV_WR_SEND_WITH_IMM : IBV_WR_SEND;
			}
		}
		snprintf(what, sizeof(what), "UC %s %d..%d", writes ? "writes" : "sends",
			 i, i + m - 1);
		if (xpost_ok(&A, o, m, what))
			return -1;
		for (k = 0; k < m; k++)
			if (expect_wc(&A, (uint64_t)(i + k), IBV_WC_SUCCESS,
				      writes ? IBV_WC_RDMA_WRITE : IBV_WC_SEND, 10, NULL, what))
				return -1;
	}
	return 0;
}

/* B's completions until none came for quiet_s (UC gives no other sign). */
static int uc_collect(struct wcx *out, int max, double quiet_s)
{
	double end = vp_now() + 60;
	int n = 0;

	while (n < max && vp_now() < end && get_wc(&B, &out[n], quiet_s))
		n++;
	if (n == max)
		expect_no_wc(&B, quiet_s, "more completions than receives");
	return n;
}

/* B to ERR: the receives no message took complete with WR_FLUSH_ERR. */
static void uc_flush_rest(uint64_t first, int n, const char *what)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_ERR };
	int k;

	if (ibv_modify_qp(B.qp, &a, IBV_QP_STATE)) {
		vc_fail("%s: to ERR: %s", what, strerror(errno));
		return;
	}
	for (k = 0; k < n; k++)
		if (expect_wc(&B, first + (uint64_t)k, IBV_WC_WR_FLUSH_ERR, -1, 10, NULL, what))
			break;
	expect_no_wc(&B, 0.05, what);
}

/*
 * Sends under loss, then without: every receive completion holds one whole
 * message (its number, its length, its bytes, its immediate), in sending
 * order; lost messages took no receive; every message after the loss was
 * turned off arrives; the receives left over are flushed, exactly.
 */
static void uc_sends(struct uc_run *u, const char *pct)
{
	static struct wcx wc[LOSS_N + CLEAN_N];
	int k, s, prev = -1, got, ok = 1;
	struct ibv_sge rsg;
	char what[96];
	long d;

	uc_up();
	memset(u->r.p, 0, u->r.len);
	for (k = 0; k < u->n; k++) {
		rsg = vp_gbuf_sge(&u->r, (size_t)k * SLOT, MSG_MAX);
		post_recv(&B, &rsg, 1, 1000 + (uint64_t)k);
	}
	if (loss_on(pct) || uc_send_range(u, 0, LOSS_N, 0))
		ok = 0;
	vp_sleep_us(300000);		/* the last frames through the qdisc */
	if (run_cmd(netem_off_cmd) || (ok && uc_send_range(u, LOSS_N, u->n, 0)))
		ok = 0;
	got = uc_collect(wc, u->n, 0.5);
	for (k = 0; k < got && ok; k++) {
		const uint8_t *p = u->r.p + (size_t)k * SLOT;

		snprintf(what, sizeof(what), "UC sends, loss %s%%: receive %d", pct, k);
		if (wc[k].wr_id != 1000 + (uint64_t)k || wc[k].status != IBV_WC_SUCCESS ||
		    wc[k].opcode != IBV_WC_RECV || wc[k].qp_num != B.qp->qp_num) {
			vc_fail("%s: wr_id %lu status %s opcode %d qp_num %u", what,
			     (unsigned long)wc[k].wr_id, ibv_wc_status_str(wc[k].status),
			     wc[k].opcode, wc[k].qp_num);
			break;
		}
		memcpy(&s, p, 4);
		if (wc[k].byte_len < MSG_MIN || s <= prev || s >= u->n) {
			vc_fail("%s: byte_len %u, message %d after %d", what, wc[k].byte_len, s, prev);
			break;
		}
		if (wc[k].byte_len != u->len[s])
			vc_fail("%s (message %d): byte_len %u, expected %u", what, s,
			     wc[k].byte_len, u->len[s]);
		d = msg_diff(p, s, u->len[s]);
		if (d >= 0)
			vc_fail("%s (message %d of %u bytes): byte %ld differs", what, s,
			     u->len[s], d);
		if (wc[k].wc_flags != (s & 1 ? IBV_WC_WITH_IMM : 0u) ||
		    ((s & 1) && wc[k].imm_raw != htonl((uint32_t)s)))
			vc_fail("%s (message %d): wc_flags %#x imm %#x", what, s,
			     wc[k].wc_flags, ntohl(wc[k].imm_raw));
		if (vp_diff_byte(p + MSG_MAX, SLOT - MSG_MAX, 0) >= 0)
			vc_fail("%s: written past the receive", what);
		if (s < LOSS_N)
			u->delivered++;
		else
			u->clean_delivered++;
		prev = s;
	}
	u->lost = LOSS_N - u->delivered;
	if (ok && u->clean_delivered != CLEAN_N)
		vc_fail("UC sends, loss %s%%: %d of the %d messages after the loss arrived",
		     pct, u->clean_delivered, CLEAN_N);
	expect_state(&A, IBV_QPS_RTS, "UC requester after the sends");
	expect_state(&B, IBV_QPS_RTS, "UC responder after the sends");
	snprintf(what, sizeof(what), "UC sends, loss %s%%: receives left", pct);
	uc_flush_rest(1000 + (uint64_t)got, u->n - got, what);
	pair_down();
}

/*
 * Writes under loss, then without: each slot holds its whole message, or
 * nothing, or (verbs allows it of a lost UC write) the first part of it and
 * nothing after; never anything else and never a byte outside the slot's
 * message; a write_imm's receive completes only for a whole message; every
 * write after the loss was turned off lands whole.
 */
static void uc_writes(struct uc_run *u, const char *pct, int *whole, int *partial,
		      int *absent)
{
	static struct wcx wc[LOSS_N + CLEAN_N];
	static char has_wc[LOSS_N + CLEAN_N];
	int k, s, nimm = 0, got, prev = -1, ok = 1;
	struct ibv_sge rsg = vp_gbuf_sge(&u->r, 0, MSG_MAX);
	char what[96];
	long d;

	uc_up();
	memset(u->t.b.p, UNTOUCHED, u->t.b.len);
	memset(has_wc, 0, sizeof(has_wc));
	for (s = 0; s < u->n; s++)
		if (s % 4 == 3)
			post_recv(&B, &rsg, 1, 2000 + (uint64_t)nimm++);
	if (loss_on(pct) || uc_send_range(u, 0, LOSS_N, 1))
		ok = 0;
	vp_sleep_us(300000);
	if (run_cmd(netem_off_cmd) || (ok && uc_send_range(u, LOSS_N, u->n, 1)))
		ok = 0;
	got = uc_collect(wc, nimm, 0.5);
	for (k = 0; k < got; k++) {
		snprintf(what, sizeof(what), "UC write_imm, loss %s%%: receive %d", pct, k);
		s = (int)ntohl(wc[k].imm_raw);
		if (wc[k].wr_id != 2000 + (uint64_t)k || wc[k].status != IBV_WC_SUCCESS ||
		    wc[k].opcode != IBV_WC_RECV_RDMA_WITH_IMM ||
		    wc[k].wc_flags != IBV_WC_WITH_IMM || s <= prev || s >= u->n ||
		    s % 4 != 3 || wc[k].byte_len != u->len[s]) {
			vc_fail("%s: wr_id %lu status %s opcode %d flags %#x imm %d (after %d) byte_len %u",
			     what, (unsigned long)wc[k].wr_id, ibv_wc_status_str(wc[k].status),
			     wc[k].opcode, wc[k].wc_flags, s, prev, wc[k].byte_len);
			break;
		}
		has_wc[s] = 1;
		prev = s;
	}
	for (s = 0; s < u->n && ok; s++) {
		const uint8_t *p = u->t.b.p + (size_t)s * SLOT;

		snprintf(what, sizeof(what), "UC write %d of %u bytes, loss %s%%", s,
			 u->len[s], pct);
		d = msg_diff(p, s, u->len[s]);
		if (d >= 0 && vp_diff_byte(p + d, u->len[s] - (size_t)d, UNTOUCHED) >= 0) {
			uint32_t v;

			/* whose bytes are they?  (a message starts with its number) */
			memcpy(&v, p, 4);
			vc_fail("%s: bytes from %ld on are neither the message's nor untouched "
			     "(they start with the number %u)", what, d, v);
			if (v < (uint32_t)u->n && (int)v != s)
				vc_note("write %d landed message %d's bytes%s", s, (int)v,
				     msg_diff(p, (int)v, u->len[s] < u->len[v] ?
					      u->len[s] : u->len[v]) < 0 ? "" : " (in part)");
		}
		if (vp_diff_byte(p + u->len[s], SLOT - u->len[s], UNTOUCHED) >= 0)
			vc_fail("%s: written past its end", what);
		if (d >= 0 && has_wc[s])
			vc_fail("%s: its receive completed but byte %ld is missing", what, d);
		if (d >= 0 && s >= LOSS_N)
			vc_fail("%s: sent after the loss was turned off, byte %ld missing", what, d);
		if (s >= LOSS_N)
			continue;
		if (d < 0)
			(*whole)++;
		else if (d > 0)
			(*partial)++;
		else
			(*absent)++;
	}
	vp_gbuf_check_guards(&u->t.b, PAGE, "UC write slots");
	expect_state(&A, IBV_QPS_RTS, "UC requester after the writes");
	expect_state(&B, IBV_QPS_RTS, "UC responder after the writes");
	snprintf(what, sizeof(what), "UC write_imm, loss %s%%: receives left", pct);
	uc_flush_rest(2000 + (uint64_t)got, nimm - got, what);
	pair_down();
}

static void c_uc_loss(void)
{
	static struct uc_run u;
	char list[64], *pct, *save = NULL;
	int k, whole, partial, absent;

	if (!strcmp(dev_a, dev_b)) {
		vc_note("skipped: loopback has no link to lose frames on");
		return;
	}
	memset(&u, 0, sizeof(u));
	u.n = LOSS_N + CLEAN_N;
	u.l = buf_new(&A, (size_t)BATCH * SLOT, 0, IBV_ACCESS_LOCAL_WRITE);
	u.r = buf_new(&B, (size_t)u.n * SLOT, 0, IBV_ACCESS_LOCAL_WRITE);
	u.t = target_new(&B, (size_t)u.n * SLOT, 0,
			 IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE, 0);
	snprintf(list, sizeof(list), "%s", loss_list);
	for (pct = strtok_r(list, ",", &save); pct && !vc_fails();
	     pct = strtok_r(NULL, ",", &save)) {
		for (k = 0; k < u.n; k++)
			u.len[k] = MSG_MIN + (uint32_t)rand_r(&seed) % (MSG_MAX - MSG_MIN + 1);
		u.delivered = u.lost = u.clean_delivered = 0;
		uc_sends(&u, pct);
		whole = partial = absent = 0;
		uc_writes(&u, pct, &whole, &partial, &absent);
		vc_note("loss %s%%: sends %d/%d delivered, writes %d whole %d partial %d absent",
		     pct, u.delivered, LOSS_N, whole, partial, absent);
		/* the loss must have happened, or nothing above was tested */
		if (!vc_fails() && (u.lost == 0 || whole == LOSS_N))
			vc_fail("loss %s%%: no message was lost (%d sends, %d writes): is netem on?",
			     pct, u.lost, LOSS_N - whole);
		if (!vc_fails() && (u.delivered == 0 || whole == 0))
			vc_fail("loss %s%%: no message got through under loss", pct);
	}
	vp_gbuf_free(&u.l);
	vp_gbuf_free(&u.r);
	target_free(&u.t);
	/* make sure the link is clean for whatever runs next */
	if (vc_fails())
		(void)!system(netem_off_cmd);
}

/*
 * A UC message's buffer may be reused once its send completed (verbs): with
 * every frame held 20 ms in the qdisc after that, the peer must still get
 * the bytes as they were when posted -- a write (4 frames) and a send.
 */
static void c_uc_reuse(void)
{
	struct target t;
	struct vp_gbuf l, r;
	struct ibv_sge sg, rsg;
	uint8_t keep[4000];
	struct xop o;

	if (!strcmp(dev_a, dev_b)) {
		vc_note("skipped: loopback has no link to delay frames on");
		return;
	}
	uc_up();
	t = target_new(&B, 8192, 0, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE, 0x34);
	l = buf_new(&A, 8192, 0, IBV_ACCESS_LOCAL_WRITE);
	r = buf_new(&B, 8192, 0, IBV_ACCESS_LOCAL_WRITE);
	memset(r.p, 0, r.len);
	if (netem_on("delay 20ms"))
		goto out;

	vp_fill_tag8(l.p, 5000, 0x35);
	memcpy(t.model + 100, l.p, 5000);
	sg = vp_gbuf_sge(&l, 0, 5000);
	o = (struct xop){ .op = IBV_WR_RDMA_WRITE, .wr_id = 1, .flags = IBV_SEND_SIGNALED,
			  .rkey = t.b.mr->rkey, .raddr = target_addr(&t, 100), .sg = &sg, .nsg = 1 };
	if (!xpost_ok(&A, &o, 1, "UC write") &&
	    !expect_wc(&A, 1, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, 10, NULL, "UC write"))
		memset(l.p, 0, 5000);	/* reused at once, as verbs allows */
	wait_target(&t, 2);
	target_check(&t, "UC write whose buffer was reused after its completion");

	rsg = vp_gbuf_sge(&r, 0, 8192);
	post_recv(&B, &rsg, 1, 100);
	vp_fill_tag8(l.p, sizeof(keep), 0x36);
	memcpy(keep, l.p, sizeof(keep));
	sg = vp_gbuf_sge(&l, 0, sizeof(keep));
	o = (struct xop){ .op = IBV_WR_SEND, .wr_id = 2, .flags = IBV_SEND_SIGNALED,
			  .sg = &sg, .nsg = 1 };
	if (!xpost_ok(&A, &o, 1, "UC send") &&
	    !expect_wc(&A, 2, IBV_WC_SUCCESS, IBV_WC_SEND, 10, NULL, "UC send"))
		memset(l.p, 0xff, sizeof(keep));
	if (!expect_recv(&B, 100, IBV_WC_RECV, sizeof(keep), 0, 0, 10,
			 "UC send whose buffer was reused after its completion")) {
		long d = diff_pat(r.p, sizeof(keep), 0, 0x36);

		if (d >= 0)
			vc_fail("UC send whose buffer was reused after its completion: "
			     "byte %ld received as %#x, sent as %#x", d, r.p[d], keep[d]);
	}
	run_cmd(netem_off_cmd);
out:
	target_free(&t);
	vp_gbuf_free(&l);
	vp_gbuf_free(&r);
	pair_down();
}

/*
 * `hold`: a connected pair with windows of both types bound and writes
 * through them going on; print "ready" and wait to be killed (verbs_ex.sh
 * checks that the teardown releases everything: a bound window holds its
 * MR, whose dereg fails with EBUSY until the window is gone).
 */
static int hold(void)
{
	struct target t = mw_setup();
	struct ibv_mw *m1 = mw_alloc(B.pd, IBV_MW_TYPE_1);
	struct ibv_mw *m2 = mw_alloc(B.pd, IBV_MW_TYPE_2);
	uint32_t k1, k2 = ibv_inc_rkey(m2->rkey);
	unsigned long n;

	k1 = bind1(m1, t.b.mr, target_addr(&t, W1_OFF), W1_LEN, MW_REMOTE,
		   IBV_WC_SUCCESS, "type 1");
	bind2(&B, m2, k2, t.b.mr, target_addr(&t, W2_OFF), W2_LEN, MW_REMOTE, 0,
	      IBV_WC_SUCCESS, "type 2");
	if (vc_fails()) {
		printf("setup failed: %s\n", vc_message());
		return 2;
	}
	printf("ready\n");
	fflush(stdout);
	for (n = 0;; n++) {
		if (probe(&A, &B, &t, P_WRITE, n & 1 ? k1 : k2, n & 1 ? W1_OFF : W2_OFF,
			  2048, IBV_WC_SUCCESS, "held")) {
			printf("write %lu failed: %s\n", n, vc_message());
			fflush(stdout);
			pause();
		}
	}
	return 0;
}

/* ---- 4. QPs created through ibv_create_qp_ex ------------------------------------- */

#define UD_OPS	(IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM)
#define UD_QKEY	0x11111111u
#define GRH	40

static const char *const qpt_name[] = { [IBV_QPT_RC] = "RC", [IBV_QPT_UC] = "UC",
					[IBV_QPT_UD] = "UD" };

static uint64_t type_ops(enum ibv_qp_type type)
{
	return type == IBV_QPT_RC ? RC_OPS : type == IBV_QPT_UC ? UC_OPS : UD_OPS;
}

/*
 * ibv_create_qp_ex of @type with comp_mask PD | @mask (send ops: every one
 * the type has; create flags: none), then at once ibv_query_qp: RESET, the
 * type, the CQs, no SRQ, and exactly the capabilities create granted, which
 * are at least those asked for.  The QP, or NULL (the case failed).
 */
static struct ibv_qp *qpx_create(struct side *s, struct ibv_cq *cq, enum ibv_qp_type type,
				 uint32_t mask, const char *what)
{
	const struct ibv_qp_cap ask = { .max_send_wr = 32, .max_recv_wr = 32,
					.max_send_sge = 2, .max_recv_sge = 2,
					.max_inline_data = 64 };
	struct ibv_qp_init_attr_ex ia = {
		.qp_type = type, .send_cq = cq, .recv_cq = cq, .cap = ask,
		.comp_mask = IBV_QP_INIT_ATTR_PD | mask, .pd = s->pd,
		.send_ops_flags = mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS ? type_ops(type) : 0,
	};
	struct ibv_qp_init_attr qi;
	struct ibv_qp_attr qa;
	struct ibv_qp *qp = ibv_create_qp_ex(s->ctx, &ia);
	int ret;

	if (!qp) {
		vc_fail("%s: ibv_create_qp_ex: %s", what, strerror(errno));
		return NULL;
	}
	if (ia.cap.max_send_wr < ask.max_send_wr || ia.cap.max_recv_wr < ask.max_recv_wr ||
	    ia.cap.max_send_sge < ask.max_send_sge || ia.cap.max_recv_sge < ask.max_recv_sge ||
	    ia.cap.max_inline_data < ask.max_inline_data)
		vc_fail("%s: granted %u/%u wr, %u/%u sge, %u inline: less than asked", what,
			ia.cap.max_send_wr, ia.cap.max_recv_wr, ia.cap.max_send_sge,
			ia.cap.max_recv_sge, ia.cap.max_inline_data);
	memset(&qa, 0xa5, sizeof(qa));
	memset(&qi, 0xa5, sizeof(qi));
	ret = ibv_query_qp(qp, &qa, IBV_QP_STATE | IBV_QP_CAP, &qi);
	if (ret) {
		vc_fail("%s: ibv_query_qp after create: %s", what, strerror(ret));
		return qp;
	}
	EXPECT_EQ("qp_state after create", IBV_QPS_RESET, qa.qp_state);
	EXPECT_EQ("init_attr.qp_type", type, qi.qp_type);
	if (qi.send_cq != cq || qi.recv_cq != cq || qi.srq)
		vc_fail("%s: query: send_cq %p recv_cq %p srq %p, expected %p %p NULL", what,
			(void *)qi.send_cq, (void *)qi.recv_cq, (void *)qi.srq, (void *)cq,
			(void *)cq);
	if (memcmp(&qi.cap, &ia.cap, sizeof(ia.cap)) || memcmp(&qa.cap, &ia.cap, sizeof(ia.cap)))
		vc_fail("%s: query: cap %u/%u wr %u/%u sge %u inline (attr %u/%u %u/%u %u), "
			"created with %u/%u %u/%u %u", what, qi.cap.max_send_wr,
			qi.cap.max_recv_wr, qi.cap.max_send_sge, qi.cap.max_recv_sge,
			qi.cap.max_inline_data, qa.cap.max_send_wr, qa.cap.max_recv_wr,
			qa.cap.max_send_sge, qa.cap.max_recv_sge, qa.cap.max_inline_data,
			ia.cap.max_send_wr, ia.cap.max_recv_wr, ia.cap.max_send_sge,
			ia.cap.max_recv_sge, ia.cap.max_inline_data);
	if ((mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS) && !ibv_qp_to_qp_ex(qp))
		vc_fail("%s: ibv_qp_to_qp_ex: NULL", what);
	s->cap = ia.cap;
	return qp;
}

/* One completion for @wr_id on @cq within 10 s (scaled); 0 or -1 (failed). */
static int qpx_wc(struct ibv_cq *cq, uint64_t wr_id, struct ibv_wc *wc, const char *what)
{
	double end = vp_now() + 10 * vp_time_scale();
	int n;

	while ((n = ibv_poll_cq(cq, 1, wc)) == 0 && vp_now() < end)
		vp_sleep_us(100);
	if (n != 1) {
		vc_fail("%s: no completion (%d)", what, n);
		return -1;
	}
	if (wc->wr_id != wr_id || wc->status != IBV_WC_SUCCESS) {
		vc_fail("%s: completion wr_id %llu status %s, expected %llu success", what,
			(unsigned long long)wc->wr_id, ibv_wc_status_str(wc->status),
			(unsigned long long)wr_id);
		return -1;
	}
	return 0;
}

/* UD INIT -> RTR -> RTS. */
static int ud_up(struct ibv_qp *qp)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .port_num = 1, .qkey = UD_QKEY };

	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY))
		return -1;
	a.qp_state = IBV_QPS_RTR;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE))
		return -1;
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = 0;
	return ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN);
}

/*
 * A datagram from @sqp (on A) to @rqp (on B): through ibv_wr_send and
 * ibv_wr_set_ud_addr if @wr_api, else ibv_post_send; the receive holds the
 * 40-byte GRH, then exactly the bytes sent, from sqp's number.
 */
static void ud_datagram(struct ibv_qp *sqp, struct ibv_cq *scq, struct ibv_qp *rqp,
			struct ibv_cq *rcq, int wr_api, const char *what)
{
	struct ibv_ah_attr aa = {
		.is_global = 1, .port_num = 1,
		.grh = { .dgid = B.gid, .sgid_index = 0, .hop_limit = 1 },
	};
	struct vp_gbuf sb = buf_new(&A, 4096, 0, IBV_ACCESS_LOCAL_WRITE);
	struct vp_gbuf rb = buf_new(&B, 4096, 0, IBV_ACCESS_LOCAL_WRITE);
	struct ibv_sge rsg = vp_gbuf_sge(&rb, 0, GRH + 512);
	struct ibv_recv_wr rwr = { .wr_id = 700, .sg_list = &rsg, .num_sge = 1 }, *rbad;
	struct ibv_ah *ah = ibv_create_ah(A.pd, &aa);
	struct ibv_wc wc;
	int ret;

	if (!ah) {
		vc_fail("%s: ibv_create_ah: %s", what, strerror(errno));
		goto out;
	}
	vp_fill_tag8(sb.p, 512, 0x44);
	memset(rb.p, 0, rb.len);
	ret = ibv_post_recv(rqp, &rwr, &rbad);
	if (ret) {
		vc_fail("%s: ibv_post_recv: %s", what, strerror(ret));
		goto out;
	}
	if (wr_api) {
		struct ibv_qp_ex *qx = ibv_qp_to_qp_ex(sqp);

		ibv_wr_start(qx);
		qx->wr_id = 701;
		qx->wr_flags = IBV_SEND_SIGNALED;
		ibv_wr_send(qx);
		ibv_wr_set_ud_addr(qx, ah, rqp->qp_num, UD_QKEY);
		ibv_wr_set_sge(qx, sb.mr->lkey, (uintptr_t)sb.p, 512);
		ret = ibv_wr_complete(qx);
	} else {
		struct ibv_sge ssg = vp_gbuf_sge(&sb, 0, 512);
		struct ibv_send_wr swr = {
			.wr_id = 701, .sg_list = &ssg, .num_sge = 1, .opcode = IBV_WR_SEND,
			.send_flags = IBV_SEND_SIGNALED,
			.wr.ud = { .ah = ah, .remote_qpn = rqp->qp_num, .remote_qkey = UD_QKEY },
		}, *sbad;

		ret = ibv_post_send(sqp, &swr, &sbad);
	}
	if (ret) {
		vc_fail("%s: posting the send: %s", what, strerror(ret));
		goto out;
	}
	if (qpx_wc(scq, 701, &wc, what) || qpx_wc(rcq, 700, &wc, what))
		goto out;
	EXPECT_EQ("UD receive byte_len (GRH + payload)", GRH + 512, wc.byte_len);
	EXPECT_EQ("UD receive src_qp", sqp->qp_num, wc.src_qp);
	if (memcmp(rb.p + GRH, sb.p, 512))
		vc_fail("%s: the datagram's bytes differ", what);
out:
	if (ah)
		ibv_destroy_ah(ah);
	vp_gbuf_free(&sb);
	vp_gbuf_free(&rb);
}

/*
 * QPs created as programs that always use ibv_create_qp_ex create them:
 * every type with comp_mask PD, PD | CREATE_FLAGS (no flags), PD |
 * SEND_OPS_FLAGS and all three, each queried at once (qpx_create); then a
 * UC pair made with PD | CREATE_FLAGS carries a send and an RDMA write,
 * and UD pairs carry a datagram through ibv_post_send and through
 * ibv_wr_send + ibv_wr_set_ud_addr; an RTS QP queries as RTS with the same
 * capabilities.
 */
static void c_qp_create_ex(void)
{
	static const uint32_t masks[] = {
		0, IBV_QP_INIT_ATTR_CREATE_FLAGS, IBV_QP_INIT_ATTR_SEND_OPS_FLAGS,
		IBV_QP_INIT_ATTR_CREATE_FLAGS | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS,
	};
	static const enum ibv_qp_type types[] = { IBV_QPT_RC, IBV_QPT_UC, IBV_QPT_UD };
	struct ibv_cq *ca = ibv_create_cq(A.ctx, 64, NULL, NULL, 0);
	struct ibv_cq *cb = ibv_create_cq(B.ctx, 64, NULL, NULL, 0);
	struct ibv_qp *qa, *qb;
	struct ibv_qp_attr at;
	struct ibv_qp_init_attr it;
	char what[160];
	size_t i, j;

	if (!ca || !cb)
		vp_die_errno("ibv_create_cq");
	for (i = 0; i < sizeof(types) / sizeof(types[0]); i++)
		for (j = 0; j < sizeof(masks) / sizeof(masks[0]); j++) {
			snprintf(what, sizeof(what), "%s, comp_mask PD%s%s", qpt_name[types[i]],
				 masks[j] & IBV_QP_INIT_ATTR_CREATE_FLAGS ? " | CREATE_FLAGS" : "",
				 masks[j] & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS ? " | SEND_OPS_FLAGS" : "");
			qa = qpx_create(&A, ca, types[i], masks[j], what);
			if (qa && ibv_destroy_qp(qa))
				vc_fail("%s: ibv_destroy_qp: %s", what, strerror(errno));
		}

	/* a create flag mbcf does not have (rxe has none either) */
	{
		struct ibv_qp_init_attr_ex ia = {
			.qp_type = IBV_QPT_UC, .send_cq = ca, .recv_cq = ca,
			.cap = { .max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1,
				 .max_recv_sge = 1 },
			.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_CREATE_FLAGS,
			.pd = A.pd, .create_flags = IBV_QP_CREATE_SCATTER_FCS,
		};

		errno = 0;
		qa = ibv_create_qp_ex(A.ctx, &ia);
		if (qa) {
			vc_fail("create flag SCATTER_FCS: a QP was created");
			ibv_destroy_qp(qa);
		} else {
			EXPECT_EQ("create flag SCATTER_FCS: errno", EOPNOTSUPP, errno);
		}
	}

	/* UC without send ops: connected, a send and a write */
	A.qp = qpx_create(&A, ca, IBV_QPT_UC, IBV_QP_INIT_ATTR_CREATE_FLAGS, "UC pair (A)");
	B.qp = qpx_create(&B, cb, IBV_QPT_UC, IBV_QP_INIT_ATTR_CREATE_FLAGS, "UC pair (B)");
	if (A.qp && B.qp) {
		struct vp_gbuf sb = buf_new(&A, 4096, 0, IBV_ACCESS_LOCAL_WRITE);
		struct vp_gbuf rb = buf_new(&B, 4096, 0,
					    IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
		struct ibv_sge ssg = vp_gbuf_sge(&sb, 0, 1000), rsg = vp_gbuf_sge(&rb, 0, 1000);
		struct ibv_send_wr wr = { .wr_id = 710, .sg_list = &ssg, .num_sge = 1,
					  .opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED };
		struct ibv_wc wc;

		A.type = B.type = IBV_QPT_UC;
		A.psn = 100;
		B.psn = 200;
		if (to_init(&A) || to_init(&B) || to_rtr(&A, &B) || to_rtr(&B, &A) ||
		    to_rts(&A) || to_rts(&B))
			vc_fail("UC pair: connect: %s", strerror(errno));
		memset(&at, 0, sizeof(at));
		if (ibv_query_qp(A.qp, &at, IBV_QP_STATE | IBV_QP_CAP, &it))
			vc_fail("UC pair: ibv_query_qp in RTS: %s", strerror(errno));
		EXPECT_EQ("UC qp_state after connecting", IBV_QPS_RTS, at.qp_state);
		if (memcmp(&at.cap, &A.cap, sizeof(at.cap)))
			vc_fail("UC pair: ibv_query_qp in RTS: cap %u/%u wr %u/%u sge %u inline, "
				"created with %u/%u %u/%u %u", at.cap.max_send_wr,
				at.cap.max_recv_wr, at.cap.max_send_sge, at.cap.max_recv_sge,
				at.cap.max_inline_data, A.cap.max_send_wr, A.cap.max_recv_wr,
				A.cap.max_send_sge, A.cap.max_recv_sge, A.cap.max_inline_data);
		vp_fill_tag8(sb.p, 1000, 0x55);
		post_recv(&B, &rsg, 1, 711);
		if (!post_send_ok(&A, &wr, "UC send") && !qpx_wc(ca, 710, &wc, "UC send") &&
		    !qpx_wc(cb, 711, &wc, "UC receive")) {
			EXPECT_EQ("UC receive byte_len", 1000, wc.byte_len);
			if (memcmp(rb.p, sb.p, 1000))
				vc_fail("UC send: bytes differ");
		}
		vp_fill_tag8(sb.p, 1000, 0x66);
		wr.wr_id = 712;
		wr.opcode = IBV_WR_RDMA_WRITE;
		wr.wr.rdma.remote_addr = (uintptr_t)rb.p + 1024;
		wr.wr.rdma.rkey = rb.mr->rkey;
		if (!post_send_ok(&A, &wr, "UC write") && !qpx_wc(ca, 712, &wc, "UC write")) {
			double end = vp_now() + 10 * vp_time_scale();

			while (memcmp(rb.p + 1024, sb.p, 1000) && vp_now() < end)
				vp_sleep_us(1000);
			if (memcmp(rb.p + 1024, sb.p, 1000))
				vc_fail("UC write: bytes differ");
		}
		vp_gbuf_free(&sb);
		vp_gbuf_free(&rb);
	}
	if (A.qp)
		ibv_destroy_qp(A.qp);
	if (B.qp)
		ibv_destroy_qp(B.qp);
	A.qp = B.qp = NULL;

	/* UD, with and without send ops */
	for (j = 0; j < 2; j++) {
		uint32_t mask = j ? IBV_QP_INIT_ATTR_SEND_OPS_FLAGS : IBV_QP_INIT_ATTR_CREATE_FLAGS;

		qa = qpx_create(&A, ca, IBV_QPT_UD, mask, "UD sender");
		qb = qpx_create(&B, cb, IBV_QPT_UD, mask, "UD receiver");
		if (qa && qb) {
			if (ud_up(qa) || ud_up(qb))
				vc_fail("UD: to RTS: %s", strerror(errno));
			else
				ud_datagram(qa, ca, qb, cb, (int)j,
					    j ? "UD by ibv_wr_send + ibv_wr_set_ud_addr" :
						"UD by ibv_post_send");
		}
		if (qa)
			ibv_destroy_qp(qa);
		if (qb)
			ibv_destroy_qp(qb);
	}
	ibv_destroy_cq(ca);
	ibv_destroy_cq(cb);
}

/* ---- driver ----------------------------------------------------------------- */

struct tcase {
	const char *name;
	void (*fn)(void);
	const char *group;
	const char *what;
};

static const struct tcase cases[] = {
	{ "wr_ops", c_wr_ops, "wr", "every data opcode through ibv_wr_*, every data setter, exact bytes and completions" },
	{ "wr_zero_len", c_wr_zero_len, "wr", "0-byte write/read/send/send_imm/write_imm, no key checked" },
	{ "wr_batch", c_wr_batch, "wr", "8 requests in one batch, signaled and not, in order" },
	{ "wr_abort", c_wr_abort, "wr", "ibv_wr_abort posts nothing" },
	{ "wr_failed_batch", c_wr_failed_batch, "wr", "a bad request fails the whole batch with its errno" },
	{ "wr_not_rts", c_wr_not_rts, "wr", "ibv_wr_complete in RESET/INIT/RTR: EINVAL; in ERR: flushed" },
	{ "cq_create", c_cq_create, "cq", "ibv_create_cq_ex refusals (errno) and acceptances" },
	{ "cq_poll", c_cq_poll, "cq", "start/next/end_poll, ENOENT, EINVAL, ibv_poll_cq on a cq_ex" },
	{ "mw_type1", c_mw_type1, "mw", "type 1 window: before, bound, edges, re-bound, unbound" },
	{ "mw_type2", c_mw_type2, "mw", "type 2 window: bind, LOCAL_INV, re-bind, SEND_WITH_INV" },
	{ "mw_other_qp_pd", c_mw_other_qp_pd, "mw", "windows from another QP and another PD" },
	{ "mw_bind_errors", c_mw_bind_errors, "mw", "binds that fail with MW_BIND_ERR (or EINVAL)" },
	{ "mw_local_inv_errors", c_mw_local_inv_errors, "mw", "LOCAL_INV of what is no bound type 2 window: LOC_QP_OP_ERR" },
	{ "mw_send_inv_errors", c_mw_send_inv_errors, "mw", "SEND_WITH_INV of a foreign key: REM_INV_REQ_ERR both sides" },
	{ "mw_local_write", c_mw_local_write, "mw", "windows bound with LOCAL_WRITE in their access, as programs for rxe bind them" },
	{ "mw_dealloc_bound", c_mw_dealloc_bound, "mw", "dereg EBUSY while bound, dealloc of a bound window" },
	{ "uc_data", c_uc_data, "uc", "UC write, write_imm, send, send_imm: exact bytes and completions" },
	{ "uc_refused", c_uc_refused, "uc", "UC reads and atomics refused (EOPNOTSUPP, EINVAL)" },
	{ "uc_drops", c_uc_drops, "uc", "UC: what the responder cannot take is dropped silently" },
	{ "uc_mw", c_uc_mw, "uc", "UC: a type 2 window, SEND_WITH_INV, dead keys dropped" },
	{ "uc_loss", c_uc_loss, "uc", "UC under netem loss: whole or absent, later ones intact" },
	{ "qp_create_ex", c_qp_create_ex, "qp", "RC/UC/UD from ibv_create_qp_ex with and without send ops or create flags, queried at once, then used" },
	{ "uc_reuse", c_uc_reuse, "uc", "UC: a buffer reused after its completion does not change what arrives" },
};

#define NCASES (sizeof(cases) / sizeof(cases[0]))

static int run_case(const struct tcase *c)
{
	double t0 = vp_now();

	vc_start();
	c->fn();
	return vc_end(c->name, dev_a, dev_b, c->what, t0);
}

static int selected(const char *arg, const struct tcase *c)
{
	return !strcmp(arg, "all") || !strcmp(arg, c->name) || !strcmp(arg, c->group);
}

static void usage(void)
{
	size_t i;

	fprintf(stderr, "usage: mbcf_verbs_ex [-a DEV] [-b DEV] [-s SEED] [-L PCT,...] "
		"[-E NETEM_FMT] [-X NETEM_OFF_CMD] [-P] CASE|wr|cq|mw|uc|qp|all...\n");
	for (i = 0; i < NCASES; i++)
		fprintf(stderr, "  %-20s %-3s %s\n", cases[i].name, cases[i].group,
			cases[i].what);
	exit(2);
}

int main(int argc, char **argv)
{
	int opt, failed = 0, ran = 0, i;
	size_t k;

	setvbuf(stdout, NULL, _IOLBF, 0);
	seed = (unsigned int)time(NULL);
	while ((opt = getopt(argc, argv, "a:b:s:L:E:X:Pl")) != -1) {
		switch (opt) {
		case 'a': dev_a = optarg; break;
		case 'b': dev_b = optarg; break;
		case 's': seed = (unsigned int)strtoul(optarg, NULL, 0); break;
		case 'L': loss_list = optarg; break;
		case 'E': netem_fmt = optarg; break;
		case 'X': netem_off_cmd = optarg; break;
		case 'P': legacy_poll = 1; break;
		default: usage();
		}
	}
	if (optind >= argc)
		usage();
	if (!strcmp(argv[optind], "hold")) {
		open_side(&A, dev_a);
		open_side(&B, dev_b);
		A.name = "A";
		B.name = "B";
		return hold();
	}
	for (i = optind; i < argc; i++) {
		int known = 0;

		for (k = 0; k < NCASES; k++)
			known |= selected(argv[i], &cases[k]);
		if (!known) {
			fprintf(stderr, "unknown case or group '%s'\n", argv[i]);
			usage();
		}
	}
	printf("verbs_ex [%s-%s]: seed %u (-s %u repeats this run)\n", dev_a, dev_b,
	       seed, seed);
	open_side(&A, dev_a);
	open_side(&B, dev_b);
	A.name = "A";
	B.name = "B";
	for (i = optind; i < argc; i++)
		for (k = 0; k < NCASES; k++)
			if (selected(argv[i], &cases[k])) {
				failed += run_case(&cases[k]);
				ran++;
			}
	close_side(&A);
	close_side(&B);
	printf("verbs_ex [%s-%s]: %d case(s), %d failed\n", dev_a, dev_b, ran, failed);
	return failed > 100 ? 100 : failed;
}
