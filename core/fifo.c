// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * The memory-based FIFO: one record appended at the tail of a queue in
 * the owner's memory (docs/protocol.md 16.2).  Room is reserved by a
 * bounded compare-and-swap loop on the tail, the payload written, the
 * record's word published last.  Many receive paths call this at once for
 * one FIFO; its memory is reached only through struct mbcf_fifo_mem, and
 * no byte outside the record area is ever asked for, whatever the owner
 * wrote into the control block.
 */
#include <mbcf/fifo.h>

bool mbcf_fifo_size_ok(u32 size)
{
	return size >= MBCF_FIFO_SIZE_MIN && size <= MBCF_FIFO_SIZE_MAX &&
	       !(size & (size - 1));
}

/* A reservation: tail -> next, a SKIP of pad bytes at off first if pad. */
struct fifo_slot {
	u64 tail, next;
	u32 off, pad;
};

/* Room for rec bytes with head and tail as read: OK (*s set), FULL or
 * BAD_CTRL (16.2 steps 1-2). */
static int fifo_room(const struct mbcf_fifo *f, u64 head, u64 tail, u32 rec,
		     struct fifo_slot *s)
{
	u64 used = tail - head;

	if ((head | tail) & (MBCF_FIFO_ALIGN - 1) || (s64)used < 0)
		return MBCF_FIFO_BAD_CTRL;
	s->off = (u32)tail & (f->size - 1);
	s->pad = s->off + rec > f->size ? f->size - s->off : 0;
	/* used > size: a stale head, or an owner that lies; wait either way */
	if (used > f->size || used + s->pad + rec > f->size)
		return MBCF_FIFO_FULL;
	s->tail = tail;
	s->next = tail + s->pad + rec;
	return MBCF_FIFO_OK;
}

/* 16.2 steps 1-3: OK with *s reserved, or why not. */
static int fifo_reserve(const struct mbcf_fifo *f, u32 rec, struct fifo_slot *s)
{
	const struct mbcf_fifo_mem *m = f->mem;
	bool waited = false;
	int i, st;

	for (i = 0; i < MBCF_FIFO_TRIES; i++) {
		u64 head = m->head(f->env);	/* first: head never passes tail */

		st = fifo_room(f, head, m->tail(f->env), rec, s);
		if (st == MBCF_FIFO_FULL && !waited) {
			/* tell the owner, then look again: a consumer that
			 * freed room before it saw wait rings no doorbell */
			m->set_wait(f->env);
			waited = true;
			continue;
		}
		if (st)
			return st;
		if (m->tail_cmpxchg(f->env, s->tail, s->next) == s->tail)
			return MBCF_FIFO_OK;
	}
	return MBCF_FIFO_BUSY;
}

/* The qpn and the payload of the record at off; nonzero: memory gone. */
static int fifo_fill(const struct mbcf_fifo *f, u32 off, u32 qpn,
		     const struct mbcf_iov *iov, u32 niov)
{
	u32 q = qpn & MBCF_QPN_MASK, i;
	int r;

	r = f->mem->write(f->env, off + 4, (const u8 *)&q, sizeof(q));
	off += MBCF_FIFO_REC_HDR;
	for (i = 0; i < niov && !r; i++) {
		if (iov[i].len)
			r = f->mem->write(f->env, off, iov[i].base, iov[i].len);
		off += iov[i].len;
	}
	return r;
}

/*
 * 16.5: the record at s (after its wrap SKIP, if any) is published; fault:
 * it was published as a SKIP.  SIGNAL_EMPTY: the consumer stores head,
 * then (full barrier) reads the word at head; we store the word, then
 * (full barrier) read head: one of the two sees the other, so a consumer
 * that found this record missing and went to sleep is woken.  head past
 * tail + pad: the consumer has already taken it (no event needed); before
 * tail: it has earlier records to take first, whose own appends woke it.
 */
static void fifo_signal(const struct mbcf_fifo *f, const struct fifo_slot *s,
			bool fault)
{
	const struct mbcf_fifo_mem *m = f->mem;

	if (!m->signal)
		return;
	if (f->flags & MBCF_FIFO_SIGNAL) {
		if (!fault)
			m->signal(f->env);
	} else if ((f->flags & MBCF_FIFO_SIGNAL_EMPTY) && m->mb) {
		/* a FAULT's SKIP too: the consumer may wait at it, and a
		 * later record would not find the queue empty */
		m->mb(f->env);
		if (m->head(f->env) - s->tail <= s->pad)
			m->signal(f->env);
	}
}

int mbcf_fifo_push(const struct mbcf_fifo *f, u32 qpn,
		   const struct mbcf_iov *iov, u32 niov)
{
	struct fifo_slot s;
	u64 len = 0;
	u32 i, rec, off;
	int st;

	if (!f || !f->mem || !mbcf_fifo_size_ok(f->size))
		return MBCF_FIFO_BAD_KEY;
	for (i = 0; i < niov; i++)
		len += iov[i].len;
	rec = len > MBCF_FIFO_LEN_MASK ? 0 : mbcf_fifo_rec_size((u32)len);
	if (!rec || rec > f->size / 2)
		return MBCF_FIFO_TOO_BIG;
	st = fifo_reserve(f, rec, &s);
	if (st)
		return st;
	off = s.off;
	if (s.pad) {
		u32 zero = 0;

		/* a SKIP's qpn is 0 (16.1); a failure here fails the
		 * record's own write below */
		f->mem->write(f->env, off + 4, (const u8 *)&zero, sizeof(zero));
		f->mem->publish(f->env, off, MBCF_FIFO_READY | MBCF_FIFO_SKIP |
				(s.pad - MBCF_FIFO_REC_HDR));
		off = 0;
	}
	if (fifo_fill(f, off, qpn, iov, niov)) {
		/* keep the queue moving: the consumer skips it */
		f->mem->publish(f->env, off, MBCF_FIFO_READY | MBCF_FIFO_SKIP |
				(u32)len);
		fifo_signal(f, &s, true);
		return MBCF_FIFO_FAULT;
	}
	f->mem->publish(f->env, off, MBCF_FIFO_READY | (u32)len);
	fifo_signal(f, &s, false);
	return MBCF_FIFO_OK;
}
