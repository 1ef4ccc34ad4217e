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

struct ibv_cq *mbcf_cq_create(struct ibv_context *ibctx, int cqe,
			      struct ibv_comp_channel *channel,
			      int comp_vector)
{
	struct mbcf_create_cq_resp_full resp = {};
	struct ibv_create_cq cmd = {};
	struct mbcf_cq *cq;
	void *map;
	int ret;

	cq = calloc(1, sizeof(*cq));
	if (!cq)
		return NULL;

	/* No driver input (the core command only): the kernel sizes the
	 * ring from cqe and reports the true depth in cq->cqe. */
	ret = ibv_cmd_create_cq(ibctx, cqe, channel, comp_vector, &cq->ibcq,
				&cmd, sizeof(cmd), &resp.ibv_resp, sizeof(resp));
	if (ret)
		goto err_free;

	ret = mbcf_ring_map(ibctx, &resp.drv.ring, MBCF_CQE_SIZE, &map);
	if (ret)
		goto err_destroy;

	/*
	 * We consume: start from the index the kernel published (0 for a
	 * fresh ring), and from then on trust only our own copy.
	 */
	mbcf_ring_init(&cq->ring, map, resp.drv.ring.num_entries,
		       resp.drv.ring.stride, 0);
	cq->ring.idx = mbcf_ring_load(mbcf_ring_cons(&cq->ring));
	cq->map = map;
	cq->map_len = resp.drv.ring.mmap_len;
	pthread_spin_init(&cq->lock, PTHREAD_PROCESS_PRIVATE);
	return &cq->ibcq;

err_destroy:
	ibv_cmd_destroy_cq(&cq->ibcq);
err_free:
	free(cq);
	errno = ret;
	return NULL;
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

int mbcf_cq_poll(struct ibv_cq *ibcq, int num_entries, struct ibv_wc *wc)
{
	struct mbcf_cq *cq = to_mcq(ibcq);
	struct ib_uverbs_wc e;
	bool corrupt = false;
	int n;

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
	pthread_spin_unlock(&cq->lock);

	/*
	 * The kernel's index is impossible, or the CQ is gone (its device was
	 * removed while we hold it): nothing more will come.  Checked only
	 * when the ring is empty, so a busy poller pays nothing for it.
	 */
	if (n == 0 && (corrupt ||
		       mbcf_ring_load_acquire(mbcf_ring_flags(&cq->ring)) & MBCF_RING_F_DEAD)) {
		errno = EIO;
		return -1;
	}
	/* Entries already consumed are returned; the next poll reports EIO. */
	return n;
}

int mbcf_cq_req_notify(struct ibv_cq *ibcq, int solicited_only)
{
	return ibv_cmd_req_notify_cq(ibcq, solicited_only);
}
