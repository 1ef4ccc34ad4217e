// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * A destroyed connection's last words (docs/protocol.md 8.4).  Sans-I/O:
 * the environment serialises calls, supplies the time and sends the ACK.
 */
#include "internal.h"

void mbcf_linger_add(struct mbcf_linger *l, const struct mbcf_conn *c,
		     const u8 *peer, u64 now)
{
	struct mbcf_linger_ent *e;

	/* in ERROR it answers nothing anyway; RESET never accepted a frame */
	if (c->state != MBCF_CONN_RTS || c->cfg.uc)
		return;
	mbcf_linger_forget(l, c->cfg.local_qpn);
	e = &l->e[l->next++ % MBCF_LINGER_N];
	e->until = now + MBCF_LINGER_NS;
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
