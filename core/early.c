// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Early placement (docs/protocol.md 5.1): WRITE frames that arrive after a
 * gap in the peer's stream, carried out at once instead of dropped, and
 * what that asks of every WRITE placed until the gap is filled -- bytes a
 * later frame already wrote are not written again (the later write wins).
 *
 * The receiver's record: bit d of c->rx_early is psn rcv_nxt + d; slot
 * psn % MBCF_EARLY_SPAN holds that frame's va and length.  Every frame
 * placed early is under one rkey (its run reaches back to the gap through
 * frames under its own rkey, and the gap is the same for all of them).
 */
#include "internal.h"

#define EARLY_SLOT(psn)	((psn) & (MBCF_EARLY_SPAN - 1))

bool mbcf_early_has(const struct mbcf_conn *c, u32 d)
{
	return d < MBCF_EARLY_SPAN && (c->rx_early[d / 64] >> (d % 64) & 1);
}

/* rcv_nxt moves up by one: every bit moves down by one. */
static void early_shift(struct mbcf_conn *c)
{
	u32 w;

	for (w = 0; w + 1 < MBCF_EARLY_SPAN / 64; w++)
		c->rx_early[w] = c->rx_early[w] >> 1 | c->rx_early[w + 1] << 63;
	c->rx_early[w] >>= 1;
}

/* Bytes [from, to) of f's payload to f->va + from. */
static int early_put(struct mbcf_conn *c, const struct mbcf_frame *f,
		     u32 from, u32 to)
{
	const u8 *p;
	u32 k, n, off, lo, hi;
	int st;

	for (k = 0, off = 0; mbcf_frame_piece(f, k, &p, &n); k++, off += n) {
		lo = off > from ? off : from;
		hi = off + n < to ? off + n : to;
		if (lo >= hi)
			continue;
		st = c->ops->target_write(c->env, f->rkey, f->va + lo,
					  p + (lo - off), hi - lo);
		if (st)
			return st;
	}
	return 0;
}

/*
 * Place WRITE frame f, d psns after rcv_nxt (0: in order), around the
 * bytes of frames placed early after it.  Returns 0 or a NAK status.  The
 * whole range is checked first: a frame in pieces, or one written around
 * others, must not leave part of itself behind (section 9).
 */
int mbcf_early_write(struct mbcf_conn *c, const struct mbcf_frame *f, u32 d)
{
	u64 pos = f->va, end = f->va + f->paylen, next, skip, s, e;
	u32 x, slot;
	int st;

	if (!f->paylen)
		return 0;
	if (!c->early_n || f->rkey != c->early_rkey) {
		/* the common case, one piece: one call, which checks it */
		if (f->payload)
			return c->ops->target_write(c->env, f->rkey, f->va,
						    f->payload, f->paylen);
		st = c->ops->target_check_write(c->env, f->rkey, f->va,
						f->paylen);
		if (st)
			return st;
		return early_put(c, f, 0, f->paylen);
	}
	st = c->ops->target_check_write(c->env, f->rkey, f->va, f->paylen);
	if (st)
		return st;
	/* sweep: write up to the next byte a later frame holds, skip what
	 * it holds; at most two steps per frame placed early */
	while (pos < end) {
		next = end;
		skip = pos;
		for (x = d + 1; x < MBCF_EARLY_SPAN; x++) {
			if (!mbcf_early_has(c, x))
				continue;
			slot = EARLY_SLOT(c->rcv_nxt + x);
			s = c->early_va[slot];
			e = s + c->early_len[slot];
			if (s <= pos && pos < e && e > skip)
				skip = e;
			else if (s > pos && s < next)
				next = s;
		}
		if (skip > pos) {
			pos = skip < end ? skip : end;
			continue;
		}
		st = early_put(c, f, (u32)(pos - f->va), (u32)(next - f->va));
		if (st)
			return st;
		pos = next;
	}
	return 0;
}

/*
 * Frame f came d psns after the gap at rcv_nxt: place it now if the
 * protocol lets it (5.1), and record it.  Its run (the frames right
 * before it that are WRITEs under its rkey) reaches back to the gap, so
 * nothing in between reads, sends, or writes under another key; bytes
 * shared with a frame in between are written by whichever comes later in
 * the stream (mbcf_early_write).  Never a message's LAST frame: that one
 * lands in order, so a reader watching a write's last byte (or a flag
 * written after the data) sees everything before it, and a WRITE_IMM
 * completes in order.  A frame that fails its checks is dropped, to be
 * rejected in order.
 *
 * A frame placed early must also acknowledge what we sent (rx_ack_ours):
 * a blind spoofer who guessed a psn in the span must guess our stream as
 * well, or its frame would be placed and the honest one with that psn
 * dropped as a duplicate -- and acknowledged.  An honest
 * frame refused so is sent again, as any frame after a gap.
 */
bool mbcf_early_place(struct mbcf_conn *c, const struct mbcf_frame *f, u32 d)
{
	u32 slot = EARLY_SLOT(f->psn);

	if (f->op != MBCF_OP_WRITE || (f->flags & MBCF_F_LAST) ||
	    d >= MBCF_EARLY_SPAN || f->run < d || c->stop_sent ||
	    (c->early_n && f->rkey != c->early_rkey))
		return false;
	if (!c->rx_ack_ours) {
		c->ctr.rx_early_refused++;
		return false;
	}
	if (mbcf_early_write(c, f, d))
		return false;
	if (!c->early_n)
		c->early_rkey = f->rkey;
	c->early_n++;
	c->rx_early[d / 64] |= 1ull << (d % 64);
	c->early_va[slot] = f->va;
	c->early_len[slot] = (u16)f->paylen;
	c->ctr.rx_accepted++;
	c->ctr.rx_bytes += f->paylen;
	c->ctr.rx_early++;
	return true;
}

/*
 * rcv_nxt was accepted and advanced by one: step over the frames placed
 * early that follow it (counted when they were placed).  The jump is
 * acknowledged at once: the sender holds those frames unacknowledged.
 */
void mbcf_early_join(struct mbcf_conn *c)
{
	early_shift(c);
	while (c->rx_early[0] & 1) {
		early_shift(c);
		c->early_n--;
		c->rcv_nxt = mbcf_seq_add(c->rcv_nxt, 1);
		/* a WRITE frame before its LAST: a WRITE message is in
		 * progress after it (its FIRST flag is not checked against
		 * the frame before: a peer lying about it only disorders
		 * its own writes, within its key) */
		c->rx_msg = MBCF_OP_WRITE;
	}
	c->ack_due = true;
}

/* The map for a LOST: bit d is bit d % 8 of byte d / 8 (wire.h). */
void mbcf_early_map_out(const struct mbcf_conn *c, u8 *placed)
{
	u32 j;

	for (j = 0; j < MBCF_PLACED_LEN; j++)
		placed[j] = (u8)(c->rx_early[j / 8] >> (8 * (j % 8)));
}

/* A LOST's map (NULL: none placed) as words, bit d of the map bit d % 64
 * of word d / 64. */
void mbcf_early_map_in(const u8 *placed, u64 *map)
{
	u32 j;

	for (j = 0; j < MBCF_EARLY_SPAN / 64; j++)
		map[j] = 0;
	for (j = 0; placed && j < MBCF_PLACED_LEN; j++)
		map[j / 8] |= (u64)placed[j] << (8 * (j % 8));
}
