/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * mbcf direct verbs: MBCF's memory-based FIFO (docs/protocol.md 16).
 *
 * A FIFO is a queue in its owner's memory to which peers append records
 * through their RC or UC QPs, each record carried out by the owner's
 * kernel as it receives it: no receive is posted per record.  The owner
 * creates it on memory of its own, gives its key to the senders (like an
 * rkey), and pops records; a sender posts mbcfdv_wr_fifo_push() through
 * the extended work-request API.  A full FIFO stops the sender (the QP
 * waits, nothing is lost) until the owner has consumed.
 *
 * The functions live in libmbcf.so.1, version MBCF_1.0 (the signal's:
 * MBCF_1.1), the library that is also the provider libibverbs loads for
 * mbcf devices: link with -lmbcf (pkg-config libmbcf; mbcfdv(3)).
 */
#ifndef MBCFDV_H
#define MBCFDV_H

#include <stddef.h>
#include <stdint.h>
#include <infiniband/verbs.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Bytes before the record area: the control block. */
#define MBCFDV_FIFO_CTRL_LEN	128
/* Flags of mbcfdv_create_fifo: a push that finds no room fails the
 * sender's QP (REMOTE_OP_ERROR) instead of stopping it. */
#define MBCFDV_FIFO_FULL_ERROR	0x1
/* The memory-based signal (MBCF_1.1), at most one of the two: the FIFO
 * gets an eventfd (mbcfdv_fifo_event_fd) the kernel adds 1 to for every
 * record appended (SIGNAL), or only for a record appended into an empty
 * queue, one the consumer may be waiting for (SIGNAL_EMPTY). */
#define MBCFDV_FIFO_SIGNAL	0x2
#define MBCFDV_FIFO_SIGNAL_EMPTY	0x4

struct mbcfdv_fifo {
	uint32_t key;		/* what senders push to (mbcfdv_wr_fifo_push) */
	uint32_t size;		/* bytes of the record area */
	void *addr;		/* the control block; records from addr + 128 */
	/* the consumer's, private */
	uint64_t head;
	struct ibv_mr *mr;
	struct ibv_pd *pd;
	int event_fd;		/* the signal's eventfd, or -1 (MBCF_1.1) */
	uint32_t flags;
};

/*
 * A FIFO on [addr, addr + length): addr 64-byte aligned, length 128 plus
 * a power of two from 64 B to 1 GiB; the memory is zeroed and pinned.
 * NULL with errno set on failure.
 */
struct mbcfdv_fifo *mbcfdv_create_fifo(struct ibv_pd *pd, void *addr,
				       size_t length, uint32_t flags);
/* Pushes in progress end first; after it the memory is the caller's. */
int mbcfdv_destroy_fifo(struct mbcfdv_fifo *fifo);

/*
 * Pop the record at the head: its payload copied to buf (at most cap
 * bytes), its length to *len, the number of the QP it came through to
 * *qpn (either may be NULL).  Returns 0, EAGAIN (nothing whole at the
 * head), EMSGSIZE (*len set, cap too small, the record stays), EPROTO
 * (the control block or a record was corrupted), or the doorbell's error.
 * Rings the doorbell when a sender waits for room.
 */
int mbcfdv_fifo_pop(struct mbcfdv_fifo *fifo, void *buf, uint32_t cap,
		    uint32_t *len, uint32_t *qpn);
/* Send GO to the QPs stopped on this FIFO (mbcfdv_fifo_pop does it). */
int mbcfdv_fifo_doorbell(struct mbcfdv_fifo *fifo);

/*
 * The signal (MBCF_1.1).  The FIFO's eventfd (nonblocking, close-on-exec,
 * owned by the FIFO: closed by mbcfdv_destroy_fifo) for poll/epoll:
 * readable when peers appended; -1 with errno EINVAL for a FIFO created
 * without MBCFDV_FIFO_SIGNAL or MBCFDV_FIFO_SIGNAL_EMPTY.
 */
int mbcfdv_fifo_event_fd(struct mbcfdv_fifo *fifo);
/*
 * Pop up to max records (max >= 1) into buf (cap bytes), calling
 * handler(ctx, buf, len, qpn) for each, in queue order; on finding the
 * queue empty, clear the eventfd's counter and look once more (an append
 * after that look makes the eventfd readable).  Returns the number handled (0: none whole at the head),
 * or, when none was handled, a negative errno of mbcfdv_fifo_pop (-EMSGSIZE
 * and the record stays, -EPROTO, ...) or -EINVAL for bad arguments.  When
 * it stops with records left (max reached, or an error after some), it
 * makes the eventfd readable again, so the next poll returns at once.
 */
int mbcfdv_fifo_dispatch(struct mbcfdv_fifo *fifo,
			 void (*handler)(void *ctx, const void *rec,
					 uint32_t len, uint32_t qpn),
			 void *ctx, void *buf, uint32_t cap, unsigned max);

/*
 * Extended work request (between ibv_wr_start and ibv_wr_complete): one
 * record onto the FIFO of key fifo_key at the peer, its payload given by
 * ibv_wr_set_sge / _sge_list / _inline_data*; at most one frame (the
 * path MTU minus 28 bytes).  Completes as IBV_WC_SEND once the record is
 * in the peer's queue.
 */
void mbcfdv_wr_fifo_push(struct ibv_qp_ex *qpx, uint32_t fifo_key);

#ifdef __cplusplus
}
#endif

#endif /* MBCFDV_H */
