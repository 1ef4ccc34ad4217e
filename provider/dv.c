// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * mbcf direct verbs (infiniband/mbcfdv.h): the memory-based FIFO of
 * docs/protocol.md 16.  A FIFO is an MR registered with MBCF_MR_FIFO in
 * its driver data; its doorbell is ibv_advise_mr(PREFETCH_WRITE) on its
 * key; the consumer reads the queue in place, as the layout in
 * include/mbcf/fifo.h says.  A FIFO with a signal (16.5) owns an eventfd
 * the kernel adds to as peers append; the consumer polls it.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "mbcf.h"
#include <mbcf/fifo.h>
#include "infiniband/mbcfdv.h"

#define MBCFDV_API __attribute__((visibility("default")))

static_assert(MBCFDV_FIFO_CTRL_LEN == MBCF_FIFO_CTRL_LEN, "control block");
static_assert(MBCFDV_FIFO_FULL_ERROR == MBCF_FIFO_FULL_ERROR, "flags");
static_assert(MBCFDV_FIFO_SIGNAL == MBCF_FIFO_SIGNAL, "flags");
static_assert(MBCFDV_FIFO_SIGNAL_EMPTY == MBCF_FIFO_SIGNAL_EMPTY, "flags");

#define FIFO_SIGNALS	(MBCFDV_FIFO_SIGNAL | MBCFDV_FIFO_SIGNAL_EMPTY)

MBCFDV_API
struct mbcfdv_fifo *mbcfdv_create_fifo(struct ibv_pd *pd, void *addr,
				       size_t length, uint32_t flags)
{
	struct {
		struct ibv_reg_mr ibv_cmd;
		struct mbcf_reg_mr_cmd drv;
	} cmd = {};
	struct ib_uverbs_reg_mr_resp resp = {};
	struct mbcfdv_fifo *f;
	struct verbs_mr *vmr;
	size_t size = length - MBCF_FIFO_CTRL_LEN;
	int ret, efd = -1;

	if (!pd || !addr || length <= MBCF_FIFO_CTRL_LEN ||
	    size < MBCF_FIFO_SIZE_MIN || size > MBCF_FIFO_SIZE_MAX ||
	    (size & (size - 1)) || ((uintptr_t)addr & 63) ||
	    (flags & ~(MBCFDV_FIFO_FULL_ERROR | FIFO_SIGNALS)) ||
	    (flags & FIFO_SIGNALS) == FIFO_SIGNALS) {
		errno = EINVAL;
		return NULL;
	}
	f = calloc(1, sizeof(*f));
	vmr = calloc(1, sizeof(*vmr));
	if (flags & FIFO_SIGNALS)
		efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (!f || !vmr || ((flags & FIFO_SIGNALS) && efd < 0)) {
		ret = f && vmr ? errno : ENOMEM;
		free(f);
		free(vmr);
		errno = ret;
		return NULL;
	}
	memset(addr, 0, length);	/* the queue starts empty (16.1) */
	cmd.drv.flags = MBCF_MR_FIFO;
	cmd.drv.fifo_flags = flags;
	cmd.drv.fifo_size = (uint32_t)size;
	/* no signal: 0, what a kernel without the signal takes (reserved) */
	cmd.drv.fifo_eventfd = efd < 0 ? 0 : efd;
	ret = ibv_cmd_reg_mr(pd, addr, length, (uintptr_t)addr,
			     IBV_ACCESS_LOCAL_WRITE, vmr, &cmd.ibv_cmd,
			     sizeof(cmd), &resp, sizeof(resp));
	if (ret) {
		if (efd >= 0)
			close(efd);
		free(f);
		free(vmr);
		errno = ret;
		return NULL;
	}
	f->mr = &vmr->ibv_mr;
	f->key = f->mr->rkey;
	f->size = (uint32_t)size;
	f->addr = addr;
	f->pd = pd;
	f->event_fd = efd;
	f->flags = flags;
	return f;
}

MBCFDV_API
int mbcfdv_destroy_fifo(struct mbcfdv_fifo *f)
{
	int ret = ibv_cmd_dereg_mr(verbs_get_mr(f->mr));

	if (ret)
		return ret;
	/* after the dereg: the kernel holds its own reference to the
	 * eventfd until the last push is gone, closing is only ours */
	if (f->event_fd >= 0)
		close(f->event_fd);
	free(verbs_get_mr(f->mr));
	free(f);
	return 0;
}

MBCFDV_API
int mbcfdv_fifo_doorbell(struct mbcfdv_fifo *f)
{
	struct ibv_sge sge = {
		.addr = (uintptr_t)f->addr,
		.length = MBCF_FIFO_CTRL_LEN + f->size,
		.lkey = f->key,
	};

	return ibv_cmd_advise_mr(f->pd, IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE, 0,
				 &sge, 1);
}

static uint8_t *fifo_ctrl(struct mbcfdv_fifo *f, uint32_t off)
{
	return (uint8_t *)f->addr + off;
}

/* The record at head is consumed: zero it, publish head, GO if asked. */
static int fifo_consume(struct mbcfdv_fifo *f, uint8_t *rec, uint32_t bytes)
{
	uint32_t *wait = (uint32_t *)fifo_ctrl(f, MBCF_FIFO_OFF_WAIT);

	/* the kernel never clears: a stale word would look READY next lap */
	memset(rec, 0, bytes);
	f->head += bytes;
	__atomic_store_n((uint64_t *)fifo_ctrl(f, MBCF_FIFO_OFF_HEAD), f->head,
			 __ATOMIC_RELEASE);
	/* head before wait: the kernel sets wait before its last look */
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	if (!__atomic_load_n(wait, __ATOMIC_RELAXED))
		return 0;
	__atomic_store_n(wait, 0, __ATOMIC_RELAXED);
	return mbcfdv_fifo_doorbell(f);
}

MBCFDV_API
int mbcfdv_fifo_pop(struct mbcfdv_fifo *f, void *buf, uint32_t cap,
		    uint32_t *len, uint32_t *qpn)
{
	uint8_t *area = fifo_ctrl(f, MBCF_FIFO_CTRL_LEN);
	int tries;

	/* at most one SKIP precedes a record (16.1) */
	for (tries = 0; tries < 2; tries++) {
		uint32_t off = (uint32_t)f->head & (f->size - 1);
		uint8_t *rec = area + off;
		uint32_t word = __atomic_load_n((uint32_t *)rec, __ATOMIC_ACQUIRE);
		uint32_t n = word & MBCF_FIFO_LEN_MASK;
		uint32_t bytes = mbcf_fifo_rec_size(n);
		int err;

		if (!(word & MBCF_FIFO_READY))
			return EAGAIN;
		if (!bytes || bytes > f->size - off)
			return EPROTO;	/* not what the kernel writes */
		if (word & MBCF_FIFO_SKIP) {
			err = fifo_consume(f, rec, bytes);
			if (err)
				return err;
			continue;
		}
		if (len)
			*len = n;
		if (n > cap)
			return EMSGSIZE;
		memcpy(buf, rec + MBCF_FIFO_REC_HDR, n);
		if (qpn)
			memcpy(qpn, rec + 4, sizeof(*qpn));
		return fifo_consume(f, rec, bytes);
	}
	return EAGAIN;
}

/* ---- the signal (docs/protocol.md 16.5) ---------------------------------- */

MBCFDV_API
int mbcfdv_fifo_event_fd(struct mbcfdv_fifo *f)
{
	if (!f || f->event_fd < 0) {
		errno = EINVAL;
		return -1;
	}
	return f->event_fd;
}

/* Is a record (or a SKIP) whole at the head? */
static bool fifo_ready(struct mbcfdv_fifo *f)
{
	uint32_t off = (uint32_t)f->head & (f->size - 1);
	uint32_t *w = (uint32_t *)fifo_ctrl(f, MBCF_FIFO_CTRL_LEN + off);

	return __atomic_load_n(w, __ATOMIC_ACQUIRE) & MBCF_FIFO_READY;
}

MBCFDV_API
int mbcfdv_fifo_dispatch(struct mbcfdv_fifo *f,
			 void (*handler)(void *ctx, const void *rec,
					 uint32_t len, uint32_t qpn),
			 void *ctx, void *buf, uint32_t cap, unsigned max)
{
	unsigned n = 0;
	bool cleared = false;
	int err = 0;

	if (!f || !handler || !max || (!buf && cap))
		return -EINVAL;
	/*
	 * The signal's count is cleared only when the queue looks empty, and
	 * the queue looked at once more after it: a record found there is
	 * taken, and an append from the clear on makes the fd readable
	 * again.  A consumer kept busy by a full queue makes no system call.
	 *
	 * SIGNAL_EMPTY's consumer half: pop stores head, then a full
	 * barrier (fifo_consume), before the next look at the word at head;
	 * the kernel stores the word, then a full barrier, then looks at
	 * head.  One sees the other: EAGAIN after the clear means the next
	 * append signals.
	 */
	while (n < max) {
		uint32_t len = 0, qpn = 0;

		err = mbcfdv_fifo_pop(f, buf, cap, &len, &qpn);
		if (err == EAGAIN && f->event_fd >= 0 && !cleared) {
			uint64_t v;

			/* 0 or the count (EAGAIN when it was 0) */
			if (read(f->event_fd, &v, sizeof(v)) < 0 &&
			    errno != EAGAIN)
				return -errno;
			cleared = true;
			continue;
		}
		if (err)
			break;
		handler(ctx, buf, len, qpn);
		n++;
	}
	if (err == EAGAIN)
		err = 0;
	/* stopped at max without clearing: clear now if the queue is empty
	 * (the look below puts back what came in between), so a caller
	 * taking one record per wake-up does not find the fd readable */
	if (f->event_fd >= 0 && !err && !cleared && !fifo_ready(f)) {
		uint64_t v;

		if (read(f->event_fd, &v, sizeof(v)) < 0 && errno != EAGAIN)
			return -errno;
	}
	/* stopped with records left: readable again, for the next poll */
	if (f->event_fd >= 0 && n && (err || fifo_ready(f))) {
		uint64_t one = 1;

		if (write(f->event_fd, &one, sizeof(one)) < 0)
			return -errno;
	}
	return n ? (int)n : -err;
}
