/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * The memory-based FIFO: its layout in the owner's memory and the core's
 * placement of one record (core/fifo.c).  Normative text: docs/protocol.md
 * section 16.
 *
 * Memory of a FIFO (the owner's, host byte order): a control block of
 * MBCF_FIFO_CTRL_LEN bytes, then the record area of `size` bytes (a power
 * of two).  Offsets below are from the control block / the record area.
 *
 *   control block
 *     0  8  tail  bytes reserved since creation, a multiple of 8; only the
 *                 kernel changes it, by compare-and-swap
 *     8  4  wait  1: a push was refused for lack of room; the owner clears
 *                 it and rings the FIFO's doorbell after consuming
 *    64  8  head  bytes consumed, a multiple of 8; the owner writes it
 *                 (release), after zeroing what it consumed
 *   record (at tail mod size, never across the end of the area)
 *     0  4  word  MBCF_FIFO_READY | MBCF_FIFO_SKIP? | payload length;
 *                 written last, with release order
 *     4  4  qpn   the receiving QP's number (0 on a SKIP record)
 *     8  -  payload, then padding to MBCF_FIFO_ALIGN (not written: zero,
 *           as the consumer left it)
 */
#ifndef MBCF_FIFO_H
#define MBCF_FIFO_H

#include <mbcf/compat.h>
#include <mbcf/core.h>	/* struct mbcf_iov */

#define MBCF_FIFO_CTRL_LEN	128
#define MBCF_FIFO_OFF_TAIL	0
#define MBCF_FIFO_OFF_WAIT	8
#define MBCF_FIFO_OFF_HEAD	64

#define MBCF_FIFO_ALIGN		8u
#define MBCF_FIFO_REC_HDR	8u	/* word + qpn */
#define MBCF_FIFO_READY		0x80000000u	/* the record is whole */
#define MBCF_FIFO_SKIP		0x40000000u	/* nothing for the consumer */
#define MBCF_FIFO_LEN_MASK	0x3fffffffu

#define MBCF_FIFO_SIZE_MIN	64u
#define MBCF_FIFO_SIZE_MAX	(1u << 30)
/* compare-and-swap attempts on the tail per push (bounded: receive path) */
#define MBCF_FIFO_TRIES		16

/* FIFO flags (at creation). */
#define MBCF_FIFO_FULL_ERROR	0x01	/* no room: NAK, not STOP (16.3) */
/* The memory-based signal (16.5), at most one of the two: mem->signal for
 * every record appended, or only for one the consumer may be waiting for
 * (appended into an empty queue). */
#define MBCF_FIFO_SIGNAL	0x02
#define MBCF_FIFO_SIGNAL_EMPTY	0x04
#define MBCF_FIFO_FLAGS		(MBCF_FIFO_FULL_ERROR | MBCF_FIFO_SIGNAL | \
				 MBCF_FIFO_SIGNAL_EMPTY)

enum mbcf_fifo_status {
	MBCF_FIFO_OK = 0,
	MBCF_FIFO_FULL,		/* no room now: STOP (or NAK, FULL_ERROR) */
	MBCF_FIFO_BUSY,		/* MBCF_FIFO_TRIES lost races: STOP */
	MBCF_FIFO_TOO_BIG,	/* never fits: REMOTE_INVALID_REQUEST */
	MBCF_FIFO_BAD_KEY,	/* no usable FIFO: REMOTE_ACCESS_ERROR */
	MBCF_FIFO_BAD_CTRL,	/* malformed control block: REMOTE_OP_ERROR */
	MBCF_FIFO_FAULT,	/* payload not written (SKIP published):
				 * REMOTE_OP_ERROR */
};

/*
 * The FIFO's memory as the environment reaches it (the kernel: pinned user
 * pages; the host tests: a buffer).  Offsets of the record area are below
 * the FIFO's size; the core never asks for a byte outside it.
 */
struct mbcf_fifo_mem {
	u64 (*head)(void *env);		/* load-acquire of head */
	u64 (*tail)(void *env);		/* load of tail */
	/* atomically: if tail == old, tail = new; returns tail before */
	u64 (*tail_cmpxchg)(void *env, u64 old, u64 new_tail);
	/* wait = 1, then a full barrier (before head is read again) */
	void (*set_wait)(void *env);
	/* copy into the record area at off; nonzero: memory gone */
	int (*write)(void *env, u32 off, const u8 *src, u32 len);
	/* store the 32-bit word at off with release order */
	void (*publish)(void *env, u32 off, u32 word);
	/*
	 * The signal (16.5); used only for a FIFO with MBCF_FIFO_SIGNAL or
	 * MBCF_FIFO_SIGNAL_EMPTY in its flags (NULL: none is ever sent).
	 * mb: a full barrier (SIGNAL_EMPTY: between the record's word and
	 * the look at head after it; NULL: SIGNAL_EMPTY sends none, as
	 * without the barrier the look could miss a consumer gone to sleep).  signal: one event to the owner,
	 * bounded, callable in atomic context.
	 */
	void (*mb)(void *env);
	void (*signal)(void *env);
};

/* A FIFO as the environment found it by its key, checked at creation. */
struct mbcf_fifo {
	u32 size;		/* record area: power of two, SIZE_MIN..MAX */
	u32 flags;		/* MBCF_FIFO_FULL_ERROR, _SIGNAL(_EMPTY) */
	const struct mbcf_fifo_mem *mem;
	void *env;
};

/* Bytes a record of len payload bytes occupies (0 if absurdly long). */
static inline u32 mbcf_fifo_rec_size(u32 len)
{
	if (len > MBCF_FIFO_LEN_MASK)
		return 0;
	return (MBCF_FIFO_REC_HDR + len + MBCF_FIFO_ALIGN - 1) &
	       ~(MBCF_FIFO_ALIGN - 1);
}

/* A size the core accepts for a FIFO's record area. */
bool mbcf_fifo_size_ok(u32 size);

/*
 * Append one record, its payload in niov pieces (in order), that came
 * through QP qpn: an enum mbcf_fifo_status.  Safe against concurrent calls
 * for the same FIFO from any number of CPUs (docs/protocol.md 16.2); calls
 * f->mem at most MBCF_FIFO_TRIES times around the tail, then writes,
 * then signals at most once (16.5): MBCF_FIFO_SIGNAL after a record
 * published whole (OK); MBCF_FIFO_SIGNAL_EMPTY after a record (OK, or
 * the SKIP of a FAULT) when head, read after a full barrier, shows the
 * consumer at it (at most its wrap SKIP before it).  Nothing is signalled
 * for a push that published nothing (FULL, BUSY, TOO_BIG, BAD_*).
 */
int mbcf_fifo_push(const struct mbcf_fifo *f, u32 qpn,
		   const struct mbcf_iov *iov, u32 niov);

#endif /* MBCF_FIFO_H */
