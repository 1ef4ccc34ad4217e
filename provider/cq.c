// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Completion queues.  CREATE_CQ returns a ring (struct mbcf_ring_info) that
 * we mmap() on the context fd; the kernel produces struct ib_uverbs_wc
 * entries into it and poll_cq consumes them with no system call.  Only
 * req_notify_cq (arming) goes to the kernel.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "mbcf.h"

int mbcf_ring_map(struct ibv_context *ibctx, const struct mbcf_ring_info *info,
		  uint32_t min_stride, void **map)
{
	uint64_t need;
	void *p;

	*map = NULL;
	/* Everything below bounds where mbcf_ring_entry() may point. */
	if (!info->num_entries || (info->num_entries & (info->num_entries - 1)))
		return EPROTO;
	if (info->stride < min_stride || info->stride % 16)
		return EPROTO;
	need = MBCF_RING_ENTRIES_OFF +
	       (uint64_t)info->num_entries * info->stride;
	if (info->mmap_len < need || (size_t)info->mmap_len != info->mmap_len)
		return EPROTO;

	p = mmap(NULL, info->mmap_len, PROT_READ | PROT_WRITE, MAP_SHARED,
		 ibctx->cmd_fd, info->mmap_offset);
	if (p == MAP_FAILED)
		return errno;
	*map = p;
	return 0;
}

/*
 * Map the ring the kernel described.  We consume: start from the index
 * the kernel published (0 for a fresh ring), and from then on trust only
 * our own copy.
 */
static int mbcf_cq_map(struct mbcf_cq *cq, struct ibv_context *ibctx,
		       const struct mbcf_create_cq_resp *drv)
{
	void *map;
	int ret;

	ret = mbcf_ring_map(ibctx, &drv->ring, MBCF_CQE_SIZE, &map);
	if (ret)
		return ret;
	mbcf_ring_init(&cq->ring, map, drv->ring.num_entries, drv->ring.stride, 0);
	cq->ring.idx = mbcf_ring_load(mbcf_ring_cons(&cq->ring));
	cq->map = map;
	cq->map_len = drv->ring.mmap_len;
	pthread_spin_init(&cq->lock, PTHREAD_PROCESS_PRIVATE);
	return 0;
}

struct ibv_cq *mbcf_cq_create(struct ibv_context *ibctx, int cqe,
			      struct ibv_comp_channel *channel,
			      int comp_vector)
{
	struct mbcf_create_cq_resp_full resp = {};
	struct ibv_create_cq cmd = {};
	struct mbcf_cq *cq;
	int ret;

	cq = calloc(1, sizeof(*cq));
	if (!cq)
		return NULL;

	/* No driver input (the core command only): the kernel sizes the
	 * ring from cqe and reports the true depth in cq->cqe. */
	ret = ibv_cmd_create_cq(ibctx, cqe, channel, comp_vector, &cq->vcq.cq,
				&cmd, sizeof(cmd), &resp.ibv_resp, sizeof(resp));
	if (ret)
		goto err_free;
	ret = mbcf_cq_map(cq, ibctx, &resp.drv);
	if (ret)
		goto err_destroy;
	return &cq->vcq.cq;

err_destroy:
	ibv_cmd_destroy_cq(&cq->vcq.cq);
err_free:
	free(cq);
	errno = ret;
	return NULL;
}

/*
 * ibv_resize_cq: the kernel moves the completions not yet polled to a new
 * ring (our consumer index in the old one is final: pollers are held off
 * by the lock) and marks the old ring dead; we switch to the new mapping.
 */
int mbcf_cq_resize(struct ibv_cq *ibcq, int cqe)
{
	struct mbcf_resize_cq_resp_full resp = {};
	struct mbcf_cq *cq = to_mcq(ibcq);
	struct ibv_resize_cq cmd = {};
	void *map = NULL;
	int ret;

	pthread_spin_lock(&cq->lock);
	ret = ibv_cmd_resize_cq(ibcq, cqe, &cmd, sizeof(cmd), &resp.ibv_resp,
				sizeof(resp));
	if (!ret)
		ret = mbcf_ring_map(ibcq->context, &resp.drv.ring, MBCF_CQE_SIZE,
				    &map);
	if (!ret) {
		munmap(cq->map, cq->map_len);
		mbcf_ring_init(&cq->ring, map, resp.drv.ring.num_entries,
			       resp.drv.ring.stride, 0);
		cq->ring.idx = mbcf_ring_load(mbcf_ring_cons(&cq->ring));
		cq->map = map;
		cq->map_len = resp.drv.ring.mmap_len;
	}
	pthread_spin_unlock(&cq->lock);
	return ret;
}

int mbcf_cq_destroy(struct ibv_cq *ibcq)
{
	struct mbcf_cq *cq = to_mcq(ibcq);
	int ret;

	ret = ibv_cmd_destroy_cq(ibcq);
	if (ret)
		return ret;
	munmap(cq->map, cq->map_len);
	pthread_spin_destroy(&cq->lock);
	free(cq);
	return 0;
}

/* struct ib_uverbs_wc and struct ibv_wc share every numeric encoding. */
static void mbcf_cqe_to_wc(const struct ib_uverbs_wc *e, struct ibv_wc *wc)
{
	wc->wr_id = e->wr_id;
	wc->status = (enum ibv_wc_status)e->status;
	wc->opcode = (enum ibv_wc_opcode)e->opcode;
	wc->vendor_err = e->vendor_err;
	wc->byte_len = e->byte_len;
	/* imm_data stays in network order; invalidated_rkey shares it. */
	wc->imm_data = e->ex.imm_data;
	wc->qp_num = e->qp_num;
	wc->src_qp = e->src_qp;
	wc->wc_flags = e->wc_flags;
	wc->pkey_index = e->pkey_index;
	wc->slid = e->slid;
	wc->sl = e->sl;
	wc->dlid_path_bits = e->dlid_path_bits;
}

/*
 * Nothing to read: ENOENT, or EIO when the kernel's index is impossible or
 * the CQ is gone (its device was removed while we hold it) -- nothing more
 * will come.  Looked at only when the ring is empty, so a busy poller pays
 * nothing for it.
 */
static int mbcf_cq_empty(struct mbcf_cq *cq, bool corrupt)
{
	if (corrupt ||
	    mbcf_ring_load_acquire(mbcf_ring_flags(&cq->ring)) & MBCF_RING_F_DEAD)
		return EIO;
	return ENOENT;
}

int mbcf_cq_poll(struct ibv_cq *ibcq, int num_entries, struct ibv_wc *wc)
{
	struct mbcf_cq *cq = to_mcq(ibcq);
	struct ib_uverbs_wc e;
	bool corrupt = false;
	int n, err = 0;

	pthread_spin_lock(&cq->lock);
	for (n = 0; n < num_entries; n++) {
		const void *slot = mbcf_ring_consume_slot(&cq->ring, &corrupt);

		if (!slot)
			break;
		/* One copy out of shared memory, then release the slot. */
		memcpy(&e, slot, sizeof(e));
		mbcf_ring_consume(&cq->ring);
		mbcf_cqe_to_wc(&e, &wc[n]);
	}
	/*
	 * Entries already consumed are returned; the next poll reports EIO.
	 * Under the lock: a resize swaps the ring (and marks the old one
	 * dead, then unmaps it) while holding it.
	 */
	if (n == 0)
		err = mbcf_cq_empty(cq, corrupt);
	pthread_spin_unlock(&cq->lock);

	if (err == EIO) {
		errno = EIO;
		return -1;
	}
	return n;
}

int mbcf_cq_req_notify(struct ibv_cq *ibcq, int solicited_only)
{
	return ibv_cmd_req_notify_cq(ibcq, solicited_only);
}

/* ---- the extended CQ (ibv_create_cq_ex, ibv_start_poll ...) ------------------- */

/* What a completion can tell: every field of struct ib_uverbs_wc.  There
 * is no completion timestamp (the kernel stamps none). */
#define MBCF_CQ_WC_FLAGS	(IBV_WC_EX_WITH_BYTE_LEN | IBV_WC_EX_WITH_IMM | \
				 IBV_WC_EX_WITH_QP_NUM | IBV_WC_EX_WITH_SRC_QP | \
				 IBV_WC_EX_WITH_SLID | IBV_WC_EX_WITH_SL | \
				 IBV_WC_EX_WITH_DLID_PATH_BITS)

static struct mbcf_cq *cqx_to_mcq(struct ibv_cq_ex *cqx)
{
	return container_of(cqx, struct mbcf_cq, vcq.cq_ex);
}

/* Copy the next entry out of the ring into cq->cur: 0, ENOENT or EIO. */
static int mbcf_cq_take(struct mbcf_cq *cq)
{
	bool corrupt = false;
	const void *slot = mbcf_ring_consume_slot(&cq->ring, &corrupt);

	if (!slot)
		return mbcf_cq_empty(cq, corrupt);
	memcpy(&cq->cur, slot, sizeof(cq->cur));
	mbcf_ring_consume(&cq->ring);
	cq->vcq.cq_ex.wr_id = cq->cur.wr_id;
	cq->vcq.cq_ex.status = (enum ibv_wc_status)cq->cur.status;
	return 0;
}

/* The poll lock is held from a successful start_poll until end_poll. */
static int mbcf_cq_start_poll(struct ibv_cq_ex *cqx, struct ibv_poll_cq_attr *attr)
{
	struct mbcf_cq *cq = cqx_to_mcq(cqx);
	int ret;

	if (attr->comp_mask)
		return EINVAL;
	pthread_spin_lock(&cq->lock);
	ret = mbcf_cq_take(cq);
	if (ret)
		pthread_spin_unlock(&cq->lock);
	return ret;
}

static int mbcf_cq_next_poll(struct ibv_cq_ex *cqx)
{
	return mbcf_cq_take(cqx_to_mcq(cqx));
}

static void mbcf_cq_end_poll(struct ibv_cq_ex *cqx)
{
	pthread_spin_unlock(&cqx_to_mcq(cqx)->lock);
}

static enum ibv_wc_opcode mbcf_cq_read_opcode(struct ibv_cq_ex *cqx)
{
	return (enum ibv_wc_opcode)cqx_to_mcq(cqx)->cur.opcode;
}

static uint32_t mbcf_cq_read_vendor_err(struct ibv_cq_ex *cqx)
{
	return cqx_to_mcq(cqx)->cur.vendor_err;
}

static uint32_t mbcf_cq_read_byte_len(struct ibv_cq_ex *cqx)
{
	return cqx_to_mcq(cqx)->cur.byte_len;
}

/* Network order as the sender gave it; invalidated rkeys share the field. */
static __be32 mbcf_cq_read_imm_data(struct ibv_cq_ex *cqx)
{
	return (__be32)cqx_to_mcq(cqx)->cur.ex.imm_data;
}

static uint32_t mbcf_cq_read_qp_num(struct ibv_cq_ex *cqx)
{
	return cqx_to_mcq(cqx)->cur.qp_num;
}

static uint32_t mbcf_cq_read_src_qp(struct ibv_cq_ex *cqx)
{
	return cqx_to_mcq(cqx)->cur.src_qp;
}

static unsigned int mbcf_cq_read_wc_flags(struct ibv_cq_ex *cqx)
{
	return cqx_to_mcq(cqx)->cur.wc_flags;
}

static uint32_t mbcf_cq_read_slid(struct ibv_cq_ex *cqx)
{
	return cqx_to_mcq(cqx)->cur.slid;
}

static uint8_t mbcf_cq_read_sl(struct ibv_cq_ex *cqx)
{
	return cqx_to_mcq(cqx)->cur.sl;
}

static uint8_t mbcf_cq_read_dlid_path_bits(struct ibv_cq_ex *cqx)
{
	return cqx_to_mcq(cqx)->cur.dlid_path_bits;
}

void mbcf_cq_set_ex_ops(struct ibv_cq_ex *cqx)
{
	cqx->start_poll = mbcf_cq_start_poll;
	cqx->next_poll = mbcf_cq_next_poll;
	cqx->end_poll = mbcf_cq_end_poll;
	cqx->read_opcode = mbcf_cq_read_opcode;
	cqx->read_vendor_err = mbcf_cq_read_vendor_err;
	cqx->read_byte_len = mbcf_cq_read_byte_len;
	cqx->read_imm_data = mbcf_cq_read_imm_data;
	cqx->read_qp_num = mbcf_cq_read_qp_num;
	cqx->read_src_qp = mbcf_cq_read_src_qp;
	cqx->read_wc_flags = mbcf_cq_read_wc_flags;
	cqx->read_slid = mbcf_cq_read_slid;
	cqx->read_sl = mbcf_cq_read_sl;
	cqx->read_dlid_path_bits = mbcf_cq_read_dlid_path_bits;
}

/* comp_mask and flags create_cq_ex honours; the rest is EOPNOTSUPP. */
static int mbcf_cq_check_ex(const struct ibv_cq_init_attr_ex *attr)
{
	if (attr->comp_mask & ~(uint32_t)IBV_CQ_INIT_ATTR_MASK_FLAGS)
		return EOPNOTSUPP;
	if ((attr->comp_mask & IBV_CQ_INIT_ATTR_MASK_FLAGS) &&
	    (attr->flags & ~(uint32_t)IBV_CREATE_CQ_ATTR_SINGLE_THREADED))
		return EOPNOTSUPP;
	if (attr->wc_flags & ~(uint64_t)MBCF_CQ_WC_FLAGS)
		return EOPNOTSUPP;
	return 0;
}

struct ibv_cq_ex *mbcf_cq_create_ex(struct ibv_context *ibctx,
				    struct ibv_cq_init_attr_ex *attr)
{
	struct mbcf_create_cq_ex_resp_full resp = {};
	struct mbcf_cq *cq;
	int ret;

	ret = mbcf_cq_check_ex(attr);
	if (ret) {
		errno = ret;
		return NULL;
	}
	cq = calloc(1, sizeof(*cq));
	if (!cq)
		return NULL;
	/* The kernel checks cqe and comp_vector (EINVAL). */
	ret = mbcf_cmd_create_cq_ex(ibctx, attr, &cq->vcq, NULL, 0,
				    &resp.ibv_resp, sizeof(resp), 0);
	if (ret)
		goto err_free;
	ret = mbcf_cq_map(cq, ibctx, &resp.drv);
	if (ret)
		goto err_destroy;
	mbcf_cq_set_ex_ops(&cq->vcq.cq_ex);
	return &cq->vcq.cq_ex;

err_destroy:
	ibv_cmd_destroy_cq(&cq->vcq.cq);
err_free:
	free(cq);
	errno = ret;
	return NULL;
}
