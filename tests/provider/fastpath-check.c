// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * provider.fastpath: the provider's post_send / post_recv / poll_cq (cq.c,
 * qp.c, compiled into this program) against rings in ordinary memory whose
 * other end this test drives with include/mbcf/ring.h, as the kernel does.
 * The context's command fd is a pipe, so a doorbell shows up as a
 * POST_SEND / POST_RECV command to read back.  No RDMA device needed.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "mbcf.h"

#include "test-check.h"

static int pipe_rd;
static struct verbs_context *vctx;

static void *ring_mem(uint32_t n, uint32_t stride)
{
	size_t len = MBCF_RING_ENTRIES_OFF + (size_t)n * stride;
	void *p = aligned_alloc(64, (len + 63) & ~(size_t)63);

	memset(p, 0, len);
	return p;
}

/*
 * The command the last doorbell wrote, or 0 if none.  Every field is
 * checked the way the kernel's write() path (ib_uverbs_write) and
 * ib_uverbs_post_send/recv judge it: a command with zero work requests.
 */
static uint32_t doorbell(uint32_t *qp_handle)
{
	struct {
		struct ib_uverbs_cmd_hdr hdr;
		struct ib_uverbs_post_send cmd;	/* post_recv: same layout */
	} c;
	unsigned char buf[256];
	ssize_t n = read(pipe_rd, buf, sizeof(buf));

	if (n <= 0)
		return 0;
	CHECK(n == (ssize_t)sizeof(c));
	if (n < (ssize_t)sizeof(c))
		return 0;
	memcpy(&c, buf, sizeof(c));
	CHECK(c.hdr.in_words * 4u == (size_t)n);
	CHECK(c.hdr.out_words * 4u == sizeof(struct ib_uverbs_post_send_resp));
	CHECK(c.cmd.response != 0);
	CHECK(c.cmd.wr_count == 0 && c.cmd.sge_count == 0);
	CHECK(c.cmd.wqe_size == (c.hdr.command == IB_USER_VERBS_CMD_POST_SEND ?
				 sizeof(struct ib_uverbs_send_wr) :
				 sizeof(struct ib_uverbs_recv_wr)));
	*qp_handle = c.cmd.qp_handle;
	return c.hdr.command;
}

static struct mbcf_qp *make_qp(uint32_t n, uint32_t max_sge,
			       uint32_t max_inline, struct mbcf_ring_end *ksq,
			       struct mbcf_ring_end *krq)
{
	struct mbcf_qp *qp = calloc(1, sizeof(*qp));
	uint32_t body = max_sge * 16 > max_inline ? max_sge * 16 : max_inline;
	uint32_t sstride = (sizeof(struct mbcf_send_wqe) + body + 15) & ~15u;
	uint32_t rstride = sizeof(struct mbcf_recv_wqe) + max_sge * 16;

	qp->vqp.qp.context = &vctx->context;
	qp->vqp.qp.qp_type = IBV_QPT_RC;
	qp->vqp.qp.handle = 0x77;
	qp->vqp.qp.state = IBV_QPS_RTS;
	qp->max_inline = max_inline;
	qp->sq.map = ring_mem(n, sstride);
	qp->rq.map = ring_mem(n, rstride);
	qp->sq.max_sge = qp->rq.max_sge = max_sge;
	mbcf_ring_init(&qp->sq.ring, qp->sq.map, n, sstride, 0);
	mbcf_ring_init(&qp->rq.ring, qp->rq.map, n, rstride, 0);
	mbcf_ring_init(ksq, qp->sq.map, n, sstride, 0);
	mbcf_ring_init(krq, qp->rq.map, n, rstride, 0);
	pthread_spin_init(&qp->sq.lock, PTHREAD_PROCESS_PRIVATE);
	pthread_spin_init(&qp->rq.lock, PTHREAD_PROCESS_PRIVATE);
	return qp;
}

static void free_qp(struct mbcf_qp *qp)
{
	free(qp->sq.map);
	free(qp->rq.map);
	free(qp);
}

/* Kernel side: take the next SQ entry (NULL if none). */
static const struct mbcf_send_wqe *ktake(struct mbcf_ring_end *k,
					 unsigned char *copy, size_t len)
{
	bool corrupt;
	void *slot = mbcf_ring_consume_slot(k, &corrupt);

	CHECK(!corrupt);
	if (!slot)
		return NULL;
	memcpy(copy, slot, len);
	mbcf_ring_consume(k);
	return (const struct mbcf_send_wqe *)copy;
}

static void test_send(void)
{
	struct mbcf_ring_end ksq, krq;
	struct mbcf_qp *qp = make_qp(4, 3, 32, &ksq, &krq);
	unsigned char copy[512];
	const struct mbcf_send_wqe *w;
	const struct mbcf_sge *sg;
	struct ibv_sge sge[4] = {
		{ .addr = 0x1000, .length = 100, .lkey = 11 },
		{ .addr = 0x2000, .length = 200, .lkey = 22 },
		{ .addr = 0x3000, .length = 300, .lkey = 33 },
		{ .addr = 0x4000, .length = 400, .lkey = 44 },
	};
	struct ibv_send_wr wr[6], *bad;
	uint32_t h = 0;
	char a[40] = "hello ", b[] = "world";
	int i;

	/* The installed libibverbs must see no extended QP in ours. */
	CHECK(ibv_qp_to_qp_ex(&qp->vqp.qp) == NULL);

	/* SEND, 2 SGEs, kernel busy: no doorbell. */
	memset(wr, 0, sizeof(wr));
	wr[0].wr_id = 42;
	wr[0].opcode = IBV_WR_SEND;
	wr[0].send_flags = IBV_SEND_SIGNALED;
	wr[0].sg_list = sge;
	wr[0].num_sge = 2;
	wr[0].imm_data = 0xdeadbeef;	/* ignored: no immediate */
	bad = (void *)1;
	CHECK(mbcf_qp_post_send(&qp->vqp.qp, &wr[0], &bad) == 0);
	CHECK(doorbell(&h) == 0);
	w = ktake(&ksq, copy, ksq.stride);
	CHECK(w && w->wr_id == 42 && w->opcode == IBV_WR_SEND &&
	      w->send_flags == IBV_SEND_SIGNALED && w->num_sge == 2 &&
	      w->inline_len == 0 && w->imm_data_be == 0 && w->rkey == 0);
	sg = w->sge;
	CHECK(sg[0].addr == 0x1000 && sg[0].length == 100 && sg[0].lkey == 11);
	CHECK(sg[1].addr == 0x2000 && sg[1].length == 200 && sg[1].lkey == 22);

	/* RDMA WRITE with immediate, kernel idle: exactly one doorbell. */
	*mbcf_ring_db(&ksq) = 1;
	wr[0].opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
	wr[0].imm_data = htobe32(0x01020304);
	wr[0].wr.rdma.remote_addr = 0xabcdef00;
	wr[0].wr.rdma.rkey = 0x55;
	wr[0].num_sge = 3;
	CHECK(mbcf_qp_post_send(&qp->vqp.qp, &wr[0], &bad) == 0);
	CHECK(doorbell(&h) == IB_USER_VERBS_CMD_POST_SEND && h == 0x77);
	CHECK(doorbell(&h) == 0);
	w = ktake(&ksq, copy, ksq.stride);
	CHECK(w && w->opcode == IBV_WR_RDMA_WRITE_WITH_IMM &&
	      w->imm_data_be == htobe32(0x01020304) &&
	      w->remote_addr == 0xabcdef00 && w->rkey == 0x55 &&
	      w->num_sge == 3);
	*mbcf_ring_db(&ksq) = 0;

	/* Atomics carry compare/swap and the atomic rkey. */
	wr[0].opcode = IBV_WR_ATOMIC_CMP_AND_SWP;
	wr[0].num_sge = 1;
	wr[0].wr.atomic.remote_addr = 0x8000;
	wr[0].wr.atomic.compare_add = 5;
	wr[0].wr.atomic.swap = 6;
	wr[0].wr.atomic.rkey = 9;
	CHECK(mbcf_qp_post_send(&qp->vqp.qp, &wr[0], &bad) == 0);
	w = ktake(&ksq, copy, ksq.stride);
	CHECK(w && w->remote_addr == 0x8000 && w->compare_add == 5 &&
	      w->swap == 6 && w->rkey == 9 && w->imm_data_be == 0);

	/* Inline: gathered at post time, num_sge 0, inline_len bytes. */
	sge[0].addr = (uintptr_t)a;
	sge[0].length = 6;
	sge[1].addr = (uintptr_t)b;
	sge[1].length = 5;
	wr[0].opcode = IBV_WR_SEND;
	wr[0].send_flags = IBV_SEND_INLINE;
	wr[0].num_sge = 2;
	CHECK(mbcf_qp_post_send(&qp->vqp.qp, &wr[0], &bad) == 0);
	memset(a, 'X', 6);	/* the caller may reuse its buffer at once */
	w = ktake(&ksq, copy, ksq.stride);
	CHECK(w && w->num_sge == 0 && w->inline_len == 11 &&
	      !memcmp(w->inline_data, "hello world", 11));

	/* Rejections: nothing enters the ring, *bad_wr is the culprit. */
	sge[0].length = 30;	/* 30 + 5 > max_inline 32 */
	bad = NULL;
	CHECK(mbcf_qp_post_send(&qp->vqp.qp, &wr[0], &bad) == EINVAL && bad == &wr[0]);
	sge[0].length = 27;	/* exactly 32: fits */
	CHECK(mbcf_qp_post_send(&qp->vqp.qp, &wr[0], &bad) == 0);
	w = ktake(&ksq, copy, ksq.stride);
	CHECK(w && w->inline_len == 32);
	sge[0].length = 1;
	wr[0].opcode = IBV_WR_RDMA_READ;	/* inline READ */
	CHECK(mbcf_qp_post_send(&qp->vqp.qp, &wr[0], &bad) == EINVAL);
	wr[0].opcode = IBV_WR_ATOMIC_FETCH_AND_ADD;
	CHECK(mbcf_qp_post_send(&qp->vqp.qp, &wr[0], &bad) == EINVAL);
	wr[0].send_flags = 0;
	wr[0].opcode = IBV_WR_LOCAL_INV;	/* unsupported opcode */
	CHECK(mbcf_qp_post_send(&qp->vqp.qp, &wr[0], &bad) == EINVAL);
	wr[0].opcode = IBV_WR_SEND;
	wr[0].num_sge = 4;			/* > max_send_sge 3 */
	CHECK(mbcf_qp_post_send(&qp->vqp.qp, &wr[0], &bad) == EINVAL);
	wr[0].num_sge = -1;
	CHECK(mbcf_qp_post_send(&qp->vqp.qp, &wr[0], &bad) == EINVAL);
	CHECK(ktake(&ksq, copy, ksq.stride) == NULL);

	/* A chain longer than the ring: 4 go in, the 5th is *bad_wr, and
	 * the 4 posted still get their doorbell. */
	for (i = 0; i < 6; i++) {
		memset(&wr[i], 0, sizeof(wr[i]));
		wr[i].wr_id = 100 + i;
		wr[i].opcode = IBV_WR_SEND;
		wr[i].next = i < 5 ? &wr[i + 1] : NULL;
	}
	*mbcf_ring_db(&ksq) = 1;
	CHECK(mbcf_qp_post_send(&qp->vqp.qp, &wr[0], &bad) == ENOMEM && bad == &wr[4]);
	CHECK(doorbell(&h) == IB_USER_VERBS_CMD_POST_SEND);
	for (i = 0; i < 4; i++) {
		w = ktake(&ksq, copy, ksq.stride);
		CHECK(w && w->wr_id == 100u + i && w->num_sge == 0);
	}
	CHECK(ktake(&ksq, copy, ksq.stride) == NULL);
	/* Nothing posted (ring is free but the first WR is bad): no doorbell. */
	wr[0].opcode = 99;
	CHECK(mbcf_qp_post_send(&qp->vqp.qp, &wr[0], &bad) == EINVAL && bad == &wr[0]);
	CHECK(doorbell(&h) == 0);
	wr[0].opcode = IBV_WR_SEND;

	/* A kernel index that cannot be: EIO, never a write out of bounds. */
	*mbcf_ring_cons(&ksq) = ksq.idx + 1;
	wr[0].next = NULL;
	CHECK(mbcf_qp_post_send(&qp->vqp.qp, &wr[0], &bad) == EIO && bad == &wr[0]);
	CHECK(doorbell(&h) == 0);
	*mbcf_ring_cons(&ksq) = ksq.idx;

	/* Not ready to send: immediate EINVAL, nothing queued. */
	qp->vqp.qp.state = IBV_QPS_RTR;
	CHECK(mbcf_qp_post_send(&qp->vqp.qp, &wr[0], &bad) == EINVAL && bad == &wr[0]);
	qp->vqp.qp.state = IBV_QPS_ERR;	/* accepted: the kernel flushes it */
	CHECK(mbcf_qp_post_send(&qp->vqp.qp, &wr[0], &bad) == 0);
	CHECK(ktake(&ksq, copy, ksq.stride) != NULL);
	CHECK(doorbell(&h) == IB_USER_VERBS_CMD_POST_SEND);	/* still idle */

	free_qp(qp);
}

static void test_recv(void)
{
	struct mbcf_ring_end ksq, krq;
	struct mbcf_qp *qp = make_qp(2, 2, 0, &ksq, &krq);
	struct ibv_sge sge[2] = {
		{ .addr = 0x9000, .length = 4096, .lkey = 3 },
		{ .addr = 0xa000, .length = 8, .lkey = 4 },
	};
	struct ibv_recv_wr wr[3], *bad;
	struct mbcf_recv_wqe *w;
	struct mbcf_sge *sg;
	bool corrupt;
	uint32_t h;
	int i;

	memset(wr, 0, sizeof(wr));
	for (i = 0; i < 3; i++) {
		wr[i].wr_id = 500 + i;
		wr[i].sg_list = sge;
		wr[i].num_sge = 2;
		wr[i].next = i < 2 ? &wr[i + 1] : NULL;
	}
	*mbcf_ring_db(&krq) = 1;
	CHECK(mbcf_qp_post_recv(&qp->vqp.qp, &wr[0], &bad) == ENOMEM && bad == &wr[2]);
	CHECK(doorbell(&h) == IB_USER_VERBS_CMD_POST_RECV && h == 0x77);
	for (i = 0; i < 2; i++) {
		w = mbcf_ring_consume_slot(&krq, &corrupt);
		CHECK(w && !corrupt);
		if (!w)
			break;
		sg = w->sge;
		CHECK(w->wr_id == 500u + i && w->num_sge == 2 && w->reserved == 0);
		CHECK(sg[0].addr == 0x9000 && sg[0].length == 4096 && sg[0].lkey == 3);
		CHECK(sg[1].addr == 0xa000 && sg[1].length == 8 && sg[1].lkey == 4);
		mbcf_ring_consume(&krq);
	}
	*mbcf_ring_db(&krq) = 0;
	wr[2].num_sge = 3;	/* > max_recv_sge */
	CHECK(mbcf_qp_post_recv(&qp->vqp.qp, &wr[2], &bad) == EINVAL && bad == &wr[2]);
	wr[2].num_sge = 0;
	CHECK(mbcf_qp_post_recv(&qp->vqp.qp, &wr[2], &bad) == 0);
	CHECK(doorbell(&h) == 0);
	mbcf_ring_consume_slot(&krq, &corrupt);
	mbcf_ring_consume(&krq);
	qp->vqp.qp.state = IBV_QPS_RESET;
	CHECK(mbcf_qp_post_recv(&qp->vqp.qp, &wr[2], &bad) == EINVAL && bad == &wr[2]);
	qp->vqp.qp.state = IBV_QPS_INIT;	/* receives may be posted from INIT */
	CHECK(mbcf_qp_post_recv(&qp->vqp.qp, &wr[2], &bad) == 0);
	free_qp(qp);
}

/* Produce one success CQE with wr_id at the kernel end @k. */
static void slot_fill(struct mbcf_ring_end *k, uint64_t wr_id)
{
	struct ib_uverbs_wc e = { .wr_id = wr_id };
	bool corrupt;
	void *slot = mbcf_ring_produce_slot(k, &corrupt);

	CHECK(slot && !corrupt);
	if (!slot)
		return;
	memcpy(slot, &e, sizeof(e));
	mbcf_ring_produce(k);
}

static void test_poll(void)
{
	struct mbcf_cq *cq = calloc(1, sizeof(*cq));
	struct mbcf_ring_end k;
	struct ib_uverbs_wc e;
	struct ibv_wc wc[8];
	bool corrupt;
	int i;

	cq->vcq.cq.context = &vctx->context;
	cq->map = ring_mem(4, MBCF_CQE_SIZE);
	mbcf_ring_init(&cq->ring, cq->map, 4, MBCF_CQE_SIZE, 0);
	mbcf_ring_init(&k, cq->map, 4, MBCF_CQE_SIZE, 0);
	pthread_spin_init(&cq->lock, PTHREAD_PROCESS_PRIVATE);

	CHECK(mbcf_cq_poll(&cq->vcq.cq, 8, wc) == 0);
	for (i = 0; i < 3; i++) {
		void *slot = mbcf_ring_produce_slot(&k, &corrupt);

		memset(&e, 0, sizeof(e));
		e.wr_id = 700 + i;
		e.status = i == 2 ? IBV_WC_REM_ACCESS_ERR : IBV_WC_SUCCESS;
		e.opcode = i == 1 ? IBV_WC_RECV_RDMA_WITH_IMM : IBV_WC_RDMA_READ;
		e.vendor_err = i;
		e.byte_len = 1000 + i;
		e.ex.imm_data = htobe32(0xcafe0000 + i);
		e.qp_num = 0x11;
		e.src_qp = 0x22;
		e.wc_flags = i == 1 ? IBV_WC_WITH_IMM : 0;
		e.pkey_index = 1;
		e.slid = 2;
		e.sl = 3;
		e.dlid_path_bits = 4;
		CHECK(slot && !corrupt);
		memcpy(slot, &e, sizeof(e));
		mbcf_ring_produce(&k);
	}
	CHECK(mbcf_cq_poll(&cq->vcq.cq, 2, wc) == 2);
	CHECK(mbcf_cq_poll(&cq->vcq.cq, 8, wc + 2) == 1);
	CHECK(mbcf_cq_poll(&cq->vcq.cq, 8, wc + 3) == 0);
	for (i = 0; i < 3; i++) {
		CHECK(wc[i].wr_id == 700u + i);
		CHECK(wc[i].status == (i == 2 ? IBV_WC_REM_ACCESS_ERR : IBV_WC_SUCCESS));
		CHECK(wc[i].opcode == (i == 1 ? IBV_WC_RECV_RDMA_WITH_IMM : IBV_WC_RDMA_READ));
		CHECK(wc[i].vendor_err == (uint32_t)i && wc[i].byte_len == 1000u + i);
		CHECK(wc[i].imm_data == htobe32(0xcafe0000 + i));
		CHECK(wc[i].qp_num == 0x11 && wc[i].src_qp == 0x22);
		CHECK(wc[i].wc_flags == (i == 1 ? IBV_WC_WITH_IMM : 0u));
		CHECK(wc[i].pkey_index == 1 && wc[i].slid == 2 && wc[i].sl == 3 &&
		      wc[i].dlid_path_bits == 4);
	}
	/* The consumer index is published: the producer may reuse slots. */
	CHECK(*mbcf_ring_cons(&k) == 3);

	/* A producer index beyond the ring: -1 / EIO, repeatedly. */
	*mbcf_ring_prod(&k) = 3 + 5;
	errno = 0;
	CHECK(mbcf_cq_poll(&cq->vcq.cq, 8, wc) == -1 && errno == EIO);
	CHECK(mbcf_cq_poll(&cq->vcq.cq, 8, wc) == -1 && errno == EIO);
	*mbcf_ring_prod(&k) = 2;	/* behind the consumer */
	CHECK(mbcf_cq_poll(&cq->vcq.cq, 8, wc) == -1 && errno == EIO);

	/* A dead CQ (device removed): what is left is returned, then EIO. */
	*mbcf_ring_prod(&k) = 3;
	slot_fill(&k, 710);
	*mbcf_ring_flags(&k) = MBCF_RING_F_DEAD;
	CHECK(mbcf_cq_poll(&cq->vcq.cq, 8, wc) == 1 && wc[0].wr_id == 710);
	errno = 0;
	CHECK(mbcf_cq_poll(&cq->vcq.cq, 8, wc) == -1 && errno == EIO);

	free(cq->map);
	free(cq);
}

/* The extended work-request API builds exactly what post_send would. */
static void test_wr_api(void)
{
	struct mbcf_ring_end ksq, krq;
	struct mbcf_qp *qp = make_qp(4, 2, 16, &ksq, &krq);
	struct ibv_qp_ex *qpx = &qp->vqp.qp_ex;
	unsigned char copy[512];
	const struct mbcf_send_wqe *w;
	struct ibv_sge sg[3] = {
		{ .addr = 0x1000, .length = 10, .lkey = 1 },
		{ .addr = 0x2000, .length = 20, .lkey = 2 },
		{ .addr = 0x3000, .length = 30, .lkey = 3 },
	};
	struct ibv_data_buf bufs[2] = {
		{ .addr = "abcd", .length = 4 }, { .addr = "efghij", .length = 6 },
	};
	uint32_t h;

	/* The installed libibverbs finds the extended QP where we put it. */
	CHECK(ibv_qp_to_qp_ex(&qp->vqp.qp) == NULL);
	CHECK(mbcf_qp_enable_ex(qp) == 0);
	CHECK(ibv_qp_to_qp_ex(&qp->vqp.qp) == qpx);

	/* Three requests, one batch, one doorbell (the kernel is idle). */
	*mbcf_ring_db(&ksq) = 1;
	ibv_wr_start(qpx);
	qpx->wr_id = 1;
	qpx->wr_flags = IBV_SEND_SIGNALED | IBV_SEND_INLINE;	/* INLINE: ignored */
	ibv_wr_rdma_write(qpx, 0x55, 0xabc0);
	ibv_wr_set_sge_list(qpx, 2, sg);
	qpx->wr_id = 2;
	qpx->wr_flags = IBV_SEND_SOLICITED;
	ibv_wr_send_imm(qpx, htobe32(0x0a0b0c0d));
	ibv_wr_set_inline_data_list(qpx, 2, bufs);
	qpx->wr_id = 3;
	qpx->wr_flags = 0;
	ibv_wr_atomic_cmp_swp(qpx, 0x66, 0x8000, 7, 9);
	ibv_wr_set_sge(qpx, 4, 0x4000, 8);
	CHECK(*mbcf_ring_prod(&ksq) == 0);	/* nothing visible before complete */
	CHECK(ibv_wr_complete(qpx) == 0);
	CHECK(doorbell(&h) == IB_USER_VERBS_CMD_POST_SEND && h == 0x77);
	CHECK(doorbell(&h) == 0);
	w = ktake(&ksq, copy, ksq.stride);
	CHECK(w && w->wr_id == 1 && w->opcode == IBV_WR_RDMA_WRITE &&
	      w->send_flags == IBV_SEND_SIGNALED && w->rkey == 0x55 &&
	      w->remote_addr == 0xabc0 && w->num_sge == 2 && w->inline_len == 0 &&
	      w->sge[1].addr == 0x2000 && w->sge[1].length == 20 && w->sge[1].lkey == 2);
	w = ktake(&ksq, copy, ksq.stride);
	CHECK(w && w->wr_id == 2 && w->opcode == IBV_WR_SEND_WITH_IMM &&
	      w->send_flags == (IBV_SEND_SOLICITED | IBV_SEND_INLINE) &&
	      w->imm_data_be == htobe32(0x0a0b0c0d) && w->num_sge == 0 &&
	      w->inline_len == 10 && !memcmp(w->inline_data, "abcdefghij", 10));
	w = ktake(&ksq, copy, ksq.stride);
	CHECK(w && w->wr_id == 3 && w->opcode == IBV_WR_ATOMIC_CMP_AND_SWP &&
	      w->rkey == 0x66 && w->remote_addr == 0x8000 && w->compare_add == 7 &&
	      w->swap == 9 && w->num_sge == 1 && w->sge[0].length == 8);
	CHECK(ktake(&ksq, copy, ksq.stride) == NULL);

	/* Zero-length send: no SGE at all; the kernel is busy: no doorbell. */
	*mbcf_ring_db(&ksq) = 0;
	ibv_wr_start(qpx);
	ibv_wr_send(qpx);
	CHECK(ibv_wr_complete(qpx) == 0 && doorbell(&h) == 0);
	w = ktake(&ksq, copy, ksq.stride);
	CHECK(w && w->opcode == IBV_WR_SEND && w->num_sge == 0 && w->inline_len == 0);

	/* A failed batch posts nothing and reports its first error. */
	ibv_wr_start(qpx);
	ibv_wr_rdma_write(qpx, 1, 2);
	ibv_wr_set_sge_list(qpx, 3, sg);		/* > max_send_sge 2 */
	ibv_wr_send(qpx);
	CHECK(ibv_wr_complete(qpx) == EINVAL);
	ibv_wr_start(qpx);
	ibv_wr_rdma_read(qpx, 1, 2);
	ibv_wr_set_inline_data(qpx, "x", 1);		/* inline READ */
	CHECK(ibv_wr_complete(qpx) == EINVAL);
	ibv_wr_start(qpx);
	ibv_wr_send(qpx);
	ibv_wr_set_inline_data_list(qpx, 2, bufs);
	ibv_wr_set_inline_data(qpx, "0123456789abcdefg", 17);	/* > max_inline */
	CHECK(ibv_wr_complete(qpx) == EINVAL);
	ibv_wr_start(qpx);
	ibv_wr_set_sge(qpx, 1, 2, 3);			/* no opcode yet */
	CHECK(ibv_wr_complete(qpx) == EINVAL);
	ibv_wr_start(qpx);
	for (h = 0; h < 5; h++)				/* 5 > 4 slots */
		ibv_wr_send(qpx);
	CHECK(ibv_wr_complete(qpx) == ENOMEM);
	ibv_wr_start(qpx);
	ibv_wr_send(qpx);
	ibv_wr_abort(qpx);
	qp->vqp.qp.state = IBV_QPS_RTR;
	ibv_wr_start(qpx);
	ibv_wr_send(qpx);
	CHECK(ibv_wr_complete(qpx) == EINVAL);
	qp->vqp.qp.state = IBV_QPS_RTS;
	CHECK(ktake(&ksq, copy, ksq.stride) == NULL && doorbell(&h) == 0);

	/* And the ring is intact: a full batch of 4 still goes in. */
	ibv_wr_start(qpx);
	for (h = 0; h < 4; h++) {
		qpx->wr_id = 40 + h;
		ibv_wr_send(qpx);
	}
	CHECK(ibv_wr_complete(qpx) == 0);
	for (h = 0; h < 4; h++) {
		w = ktake(&ksq, copy, ksq.stride);
		CHECK(w && w->wr_id == 40 + h);
	}
	free_qp(qp);
}

/* ibv_start_poll / ibv_next_poll / ibv_wc_read_* over the same ring. */
static void test_poll_ex(void)
{
	struct mbcf_cq *cq = calloc(1, sizeof(*cq));
	struct ibv_cq_ex *cqx = &cq->vcq.cq_ex;
	struct ibv_poll_cq_attr attr = {};
	struct mbcf_ring_end k;
	struct ib_uverbs_wc e = {
		.wr_id = 900, .status = IBV_WC_SUCCESS,
		.opcode = IBV_WC_RECV_RDMA_WITH_IMM, .vendor_err = 5,
		.byte_len = 4096, .qp_num = 0x11, .src_qp = 0x22,
		.wc_flags = IBV_WC_WITH_IMM, .slid = 7, .sl = 3,
		.dlid_path_bits = 2,
	};
	bool corrupt;
	void *slot;
	int i;

	cq->map = ring_mem(4, MBCF_CQE_SIZE);
	mbcf_ring_init(&cq->ring, cq->map, 4, MBCF_CQE_SIZE, 0);
	mbcf_ring_init(&k, cq->map, 4, MBCF_CQE_SIZE, 0);
	pthread_spin_init(&cq->lock, PTHREAD_PROCESS_PRIVATE);
	mbcf_cq_set_ex_ops(cqx);

	CHECK(ibv_start_poll(cqx, &attr) == ENOENT);
	e.ex.imm_data = htobe32(0x01020304);
	for (i = 0; i < 2; i++) {
		slot = mbcf_ring_produce_slot(&k, &corrupt);
		CHECK(slot && !corrupt);
		if (!slot)
			return;
		e.wr_id = 900 + i;
		e.status = i ? IBV_WC_REM_ACCESS_ERR : IBV_WC_SUCCESS;
		memcpy(slot, &e, sizeof(e));
		mbcf_ring_produce(&k);
	}
	CHECK(ibv_start_poll(cqx, &attr) == 0);
	CHECK(cqx->wr_id == 900 && cqx->status == IBV_WC_SUCCESS);
	CHECK(ibv_wc_read_opcode(cqx) == IBV_WC_RECV_RDMA_WITH_IMM &&
	      ibv_wc_read_vendor_err(cqx) == 5 && ibv_wc_read_byte_len(cqx) == 4096 &&
	      ibv_wc_read_imm_data(cqx) == htobe32(0x01020304) &&
	      ibv_wc_read_qp_num(cqx) == 0x11 && ibv_wc_read_src_qp(cqx) == 0x22 &&
	      ibv_wc_read_wc_flags(cqx) == IBV_WC_WITH_IMM &&
	      ibv_wc_read_slid(cqx) == 7 && ibv_wc_read_sl(cqx) == 3 &&
	      ibv_wc_read_dlid_path_bits(cqx) == 2);
	CHECK(ibv_next_poll(cqx) == 0);
	CHECK(cqx->wr_id == 901 && cqx->status == IBV_WC_REM_ACCESS_ERR);
	CHECK(ibv_next_poll(cqx) == ENOENT);
	ibv_end_poll(cqx);
	CHECK(*mbcf_ring_cons(&k) == 2);	/* both slots given back */
	attr.comp_mask = 1;
	CHECK(ibv_start_poll(cqx, &attr) == EINVAL);
	attr.comp_mask = 0;
	/* A dead CQ: EIO, and the lock is not left held (a second call works). */
	*mbcf_ring_flags(&k) = MBCF_RING_F_DEAD;
	CHECK(ibv_start_poll(cqx, &attr) == EIO);
	CHECK(ibv_start_poll(cqx, &attr) == EIO);
	free(cq->map);
	free(cq);
}

/* mbcf_ring_map() refuses any description that could reach past the map. */
static void test_ring_map(void)
{
	struct mbcf_ring_info ok = {
		.mmap_offset = 0, .mmap_len = 4096,
		.num_entries = 64, .stride = 48,
	}, bad;
	int fd = memfd_create("mbcf-ring", 0);
	int saved = vctx->context.cmd_fd;
	void *map = (void *)1;

	CHECK(fd >= 0 && ftruncate(fd, 8192) == 0);
	vctx->context.cmd_fd = fd;

	CHECK(mbcf_ring_map(&vctx->context, &ok, 48, &map) == 0 && map);
	if (map)
		munmap(map, ok.mmap_len);

	bad = ok;
	bad.num_entries = 0;
	CHECK(mbcf_ring_map(&vctx->context, &bad, 48, &map) == EPROTO && !map);
	bad.num_entries = 48;	/* not a power of two */
	CHECK(mbcf_ring_map(&vctx->context, &bad, 48, &map) == EPROTO);
	bad = ok;
	bad.stride = 32;	/* smaller than an entry */
	CHECK(mbcf_ring_map(&vctx->context, &bad, 48, &map) == EPROTO);
	bad.stride = 56;	/* not a multiple of 16 */
	CHECK(mbcf_ring_map(&vctx->context, &bad, 48, &map) == EPROTO);
	bad = ok;
	bad.mmap_len = 256 + 64 * 48 - 1;	/* last entry outside */
	CHECK(mbcf_ring_map(&vctx->context, &bad, 48, &map) == EPROTO);
	bad = ok;
	bad.num_entries = 1u << 31;
	bad.stride = 1u << 31;	/* 2^62 bytes: no overflow to a small need */
	CHECK(mbcf_ring_map(&vctx->context, &bad, 48, &map) == EPROTO);

	vctx->context.cmd_fd = saved;
	close(fd);
}

int main(void)
{
	int fds[2];

	if (pipe2(fds, O_NONBLOCK)) {
		perror("pipe2");
		return 1;
	}
	pipe_rd = fds[0];
	/* priv zeroed: libibverbs writes commands to cmd_fd (the pipe). */
	vctx = calloc(1, sizeof(*vctx));
	vctx->priv = calloc(1, 1 << 16);
	vctx->context.cmd_fd = fds[1];

	test_send();
	test_recv();
	test_poll();
	test_wr_api();
	test_poll_ex();
	test_ring_map();

	free(vctx->priv);
	free(vctx);
	if (failures) {
		printf("provider.fastpath: %d failure(s)\n", failures);
		return 1;
	}
	printf("provider.fastpath: post_send, post_recv, the ibv_wr_* API, poll_cq, the ibv_start_poll API and ring mapping behave\n");
	return 0;
}
