// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * A destroyed connection's last words (docs/protocol.md 8.4).  Sans-I/O:
 * the environment serialises calls, supplies the time and sends the ACK.
 */
#include "internal.h"

static bool linger_older(const struct mbcf_linger_ent *a,
			 const struct mbcf_linger_ent *b)
{
	return !b || (s64)(a->until - b->until) < 0;
}

static u32 linger_held(const struct mbcf_linger *l, u64 owner)
{
	u32 i, n = 0;

	for (i = 0; i < MBCF_LINGER_N; i++)
		n += l->e[i].owner == owner;
	return n;
}

/*
 * The entry a new one takes (core.h): a free or expired one, else the
 * oldest of the owner that holds the most.  At most MBCF_LINGER_N^2 steps
 * (4096 comparisons): a constant, under the environment's lock.
 */
static struct mbcf_linger_ent *linger_slot(struct mbcf_linger *l, u64 now)
{
	struct mbcf_linger_ent *e, *best = NULL;
	u32 i, n, most = 0;

	for (i = 0; i < MBCF_LINGER_N; i++) {
		e = &l->e[i];
		if (!e->until || (s64)(now - e->until) >= 0)
			return e;
	}
	for (i = 0; i < MBCF_LINGER_N; i++) {
		e = &l->e[i];
		n = linger_held(l, e->owner);
		if (n > most || (n == most && linger_older(e, best))) {
			most = n;
			best = e;
		}
	}
	return best;
}

void mbcf_linger_add(struct mbcf_linger *l, const struct mbcf_conn *c,
		     const u8 *peer, u64 owner, u64 now)
{
	struct mbcf_linger_ent *e;

	/* in ERROR it answers nothing anyway; RESET never accepted a frame */
	if (c->state != MBCF_CONN_RTS || c->cfg.uc)
		return;
	mbcf_linger_forget(l, c->cfg.local_qpn);
	e = linger_slot(l, now);
	e->until = now + MBCF_LINGER_NS;
	e->owner = owner;
	e->qpn = c->cfg.local_qpn;
	e->remote_qpn = c->cfg.remote_qpn;
	e->rcv_nxt = c->rcv_nxt;
	e->snd_max = c->snd_max;
	memcpy(e->peer, peer, sizeof(e->peer));
}

void mbcf_linger_forget(struct mbcf_linger *l, u32 qpn)
{
	u32 i;

	for (i = 0; i < MBCF_LINGER_N; i++)
		if (l->e[i].until && l->e[i].qpn == (qpn & MBCF_QPN_MASK))
			l->e[i].until = 0;
}

u32 mbcf_linger_answer(struct mbcf_linger *l, const struct mbcf_frame *f,
		       const u8 *peer, u64 now, u8 *hdr)
{
	struct mbcf_linger_ent *e = NULL;
	struct mbcf_frame ack;
	u32 i;

	/* only the sender's own question: a resend asking for an answer */
	if (!mbcf_wire_op_sequenced(f->op) || !(f->flags & MBCF_F_ACKREQ))
		return 0;
	for (i = 0; i < MBCF_LINGER_N && !e; i++)
		if (l->e[i].until && l->e[i].qpn == f->dst_qpn)
			e = &l->e[i];
	if (!e)
		return 0;
	if ((s64)(now - e->until) >= 0) {
		e->until = 0;
		return 0;
	}
	/* from its peer, and a frame it had accepted: nothing new is taken */
	if (f->src_qpn != e->remote_qpn || memcmp(peer, e->peer, sizeof(e->peer)) ||
	    !mbcf_seq_lt(f->psn, e->rcv_nxt))
		return 0;
	memset(&ack, 0, sizeof(ack));
	ack.op = MBCF_OP_ACK;
	ack.dst_qpn = e->remote_qpn;
	ack.src_qpn = e->qpn;
	ack.psn = e->snd_max;
	ack.ack_psn = e->rcv_nxt;
	return mbcf_codec_build(&ack, hdr);
}
