/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * The one single-producer/single-consumer ring both sides compile: the
 * kernel module (CQ producer, SQ/RQ consumer) and the provider (CQ consumer,
 * SQ/RQ producer).  Layout: include/uapi/rdma/mbcf-abi.h.
 *
 * Each side keeps its own index privately (struct mbcf_ring_end.idx) and
 * only *publishes* it; it reads the other side's index with acquire
 * semantics and never trusts it further than mbcf_ring_used() allows: a
 * peer index that claims more than num_entries is reported as corrupt.
 */
#ifndef MBCF_RING_H
#define MBCF_RING_H

#ifdef __KERNEL__
#include <linux/types.h>
#include <asm/barrier.h>
#define mbcf_ring_load_acquire(p)	smp_load_acquire(p)
#define mbcf_ring_store_release(p, v)	smp_store_release(p, v)
#define mbcf_ring_load(p)		READ_ONCE(*(p))
#define mbcf_ring_store(p, v)		WRITE_ONCE(*(p), v)
#define mbcf_ring_full_barrier()	smp_mb()
#else
#include <stdbool.h>
#include <stdint.h>
#include <linux/types.h>
#define mbcf_ring_load_acquire(p)	__atomic_load_n(p, __ATOMIC_ACQUIRE)
#define mbcf_ring_store_release(p, v)	__atomic_store_n(p, v, __ATOMIC_RELEASE)
#define mbcf_ring_load(p)		__atomic_load_n(p, __ATOMIC_RELAXED)
#define mbcf_ring_store(p, v)		__atomic_store_n(p, v, __ATOMIC_RELAXED)
#define mbcf_ring_full_barrier()	__atomic_thread_fence(__ATOMIC_SEQ_CST)
#endif

#include <rdma/mbcf-abi.h>

/*
 * One side's view of a ring.  A consumer may read entries ahead of
 * releasing them (rd runs ahead of idx): the kernel keeps a send or receive
 * entry's slot taken until the request completes, so the provider can never
 * have more than num_entries requests outstanding (verbs max_send_wr).
 */
struct mbcf_ring_end {
	__u8 *base;		/* start of the mapping */
	__u32 mask;		/* num_entries - 1 */
	__u32 stride;
	__u32 idx;		/* our own index: prod if we produce, else cons */
	__u32 rd;		/* consumer: next entry to read (idx <= rd) */
};

static inline __u32 *mbcf_ring_prod(const struct mbcf_ring_end *r)
{
	return (__u32 *)(r->base + MBCF_RING_PROD_OFF);
}

static inline __u32 *mbcf_ring_cons(const struct mbcf_ring_end *r)
{
	return (__u32 *)(r->base + MBCF_RING_CONS_OFF);
}

static inline __u32 *mbcf_ring_db(const struct mbcf_ring_end *r)
{
	return (__u32 *)(r->base + MBCF_RING_DB_OFF);
}

static inline __u32 *mbcf_ring_flags(const struct mbcf_ring_end *r)
{
	return (__u32 *)(r->base + MBCF_RING_FLAGS_OFF);
}

static inline void *mbcf_ring_entry(const struct mbcf_ring_end *r, __u32 i)
{
	return r->base + MBCF_RING_ENTRIES_OFF + (__u64)(i & r->mask) * r->stride;
}

static inline void mbcf_ring_init(struct mbcf_ring_end *r, void *base,
				  __u32 num_entries, __u32 stride, __u32 idx)
{
	r->base = (__u8 *)base;
	r->mask = num_entries - 1;
	r->stride = stride;
	r->idx = idx;
	r->rd = idx;
}

/*
 * Producer: the slot to fill next, or NULL if the ring is full (or the
 * consumer's index is impossible: *corrupt is then set).
 */
static inline void *mbcf_ring_produce_slot(const struct mbcf_ring_end *r,
					   bool *corrupt)
{
	__u32 cons = mbcf_ring_load_acquire(mbcf_ring_cons(r));
	__u32 used = r->idx - cons;

	*corrupt = used > r->mask + 1;
	if (used >= r->mask + 1)
		return (void *)0;
	return mbcf_ring_entry(r, r->idx);
}

/* Producer: publish the slot filled after mbcf_ring_produce_slot(). */
static inline void mbcf_ring_produce(struct mbcf_ring_end *r)
{
	r->idx++;
	mbcf_ring_store_release(mbcf_ring_prod(r), r->idx);
}

/*
 * Consumer: the oldest entry not yet read, or NULL if none (or the
 * producer's index is impossible: *corrupt is then set).
 */
static inline void *mbcf_ring_consume_slot(const struct mbcf_ring_end *r,
					   bool *corrupt)
{
	__u32 prod = mbcf_ring_load_acquire(mbcf_ring_prod(r));

	*corrupt = prod - r->idx > r->mask + 1;
	if (prod == r->rd || *corrupt)
		return (void *)0;
	return mbcf_ring_entry(r, r->rd);
}

/* Consumer: read and release at once (nothing may be held: rd == idx). */
static inline void mbcf_ring_consume(struct mbcf_ring_end *r)
{
	r->rd++;
	r->idx = r->rd;
	mbcf_ring_store_release(mbcf_ring_cons(r), r->idx);
}

/* Consumer: done reading the entry, but keep its slot taken. */
static inline void mbcf_ring_read_next(struct mbcf_ring_end *r)
{
	r->rd++;
}

/* Consumer: give back the @n oldest slots read with mbcf_ring_read_next(). */
static inline void mbcf_ring_release(struct mbcf_ring_end *r, __u32 n)
{
	r->idx += n;
	mbcf_ring_store_release(mbcf_ring_cons(r), r->idx);
}

/*
 * Doorbell protocol (send and receive queues).  The kernel, about to stop
 * consuming because the ring is empty, calls mbcf_ring_consumer_idle(): it
 * sets db_needed and returns true only if the ring is still empty after a
 * full barrier (else it must go on consuming).  The provider, after
 * publishing entries, calls mbcf_ring_producer_wants_doorbell(): a full
 * barrier, then db_needed.  One of the two always sees the other's write,
 * so an entry is never left unnoticed.
 */
static inline bool mbcf_ring_consumer_idle(struct mbcf_ring_end *r)
{
	mbcf_ring_store(mbcf_ring_db(r), 1);
	mbcf_ring_full_barrier();
	if (mbcf_ring_load_acquire(mbcf_ring_prod(r)) != r->rd) {
		mbcf_ring_store(mbcf_ring_db(r), 0);
		return false;
	}
	return true;
}

/* Kernel: it is consuming again (a doorbell or its own progress). */
static inline void mbcf_ring_consumer_busy(struct mbcf_ring_end *r)
{
	mbcf_ring_store(mbcf_ring_db(r), 0);
}

static inline bool mbcf_ring_producer_wants_doorbell(const struct mbcf_ring_end *r)
{
	mbcf_ring_full_barrier();
	return mbcf_ring_load(mbcf_ring_db(r)) != 0;
}

#endif /* MBCF_RING_H */
