// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * The forward path of our stream: sequenced frames built on demand from
 * message descriptors (no frame is ever copied or kept) and sent from
 * snd_nxt as the window, STOP and the environment allow; control frames;
 * requester completions.  It never calls into rtx.c: acknowledgement, loss
 * and retransmission steer it only through the connection's state.
 * docs/protocol.md sections 4, 6.1 and 7.2.
 */
#include "internal.h"

static u32 send_seg(const struct mbcf_conn *c, u8 op)
{
	return mbcf_codec_max_payload(c->cfg.mtu, op);
}

static bool send_has_data(u8 op)
{
	return op == MBCF_OP_WRITE || op == MBCF_OP_WRITE_IMM ||
	       op == MBCF_OP_SEND || op == MBCF_OP_SEND_IMM ||
	       op == MBCF_OP_SEND_INV || op == MBCF_OP_READ_RESP ||
	       op == MBCF_OP_FIFO_PUSH;
}

static bool send_is_send(u8 op)
{
	return op == MBCF_OP_SEND || op == MBCF_OP_SEND_IMM ||
	       op == MBCF_OP_SEND_INV;
}

/* Frames a message of len bytes needs: at least one, even when empty. */
static u32 send_nframes(u32 len, u32 seg)
{
	if (!len || !seg)
		return 1;
	return len / seg + (len % seg ? 1 : 0);
}

static void send_init_msg(struct mbcf_conn *c, struct mbcf_msg *m, u8 op,
			  u32 len)
{
	memset(m, 0, sizeof(*m));
	m->op = op;
	m->len = len;
	m->seg = send_has_data(op) ? send_seg(c, op) : 0;
	m->nframes = send_has_data(op) ? send_nframes(len, m->seg) : 1;
	if (op == MBCF_OP_LOCAL)
		m->nframes = 0;
}

int mbcf_send_enqueue(struct mbcf_conn *c, const struct mbcf_wr *wr)
{
	struct mbcf_msg *m;
	bool atomic = wr->op == MBCF_OP_CMP_SWAP || wr->op == MBCF_OP_FETCH_ADD;
	bool local = wr->op == MBCF_OP_LOCAL;

	if (!send_has_data(wr->op) && wr->op != MBCF_OP_READ_REQ && !atomic &&
	    !local)
		return MBCF_POST_INVAL;
	if (wr->op == MBCF_OP_READ_RESP || wr->len > MBCF_MSG_MAX ||
	    (wr->flags & ~(MBCF_F_SOLICITED | MBCF_WR_FENCE | MBCF_WR_FENCE_ALL |
			   MBCF_WR_QUIET)))
		return MBCF_POST_INVAL;
	/* an unreliable connection carries no responses (verbs UC) */
	if (c->cfg.uc && mbcf_op_is_rd(wr->op))
		return MBCF_POST_INVAL;
	if (c->req.tail - c->req.head > c->req.mask)
		return MBCF_POST_FULL;

	m = mbcf_msgq_at(&c->req, c->req.tail);
	send_init_msg(c, m, wr->op, atomic ? 8 : local ? 0 : wr->len);
	/* psn distances inside one message must stay far below 2^23; a
	 * FIFO record is one frame (docs/protocol.md 16.3) */
	if (m->nframes > (1u << 22) ||
	    (wr->op == MBCF_OP_FIFO_PUSH && m->nframes != 1))
		return MBCF_POST_INVAL;
	m->cookie = wr->cookie;
	m->raddr = wr->raddr;
	m->rkey = wr->rkey;
	m->imm = wr->imm;
	m->operand[0] = wr->swap_add;
	m->operand[1] = wr->compare;
	/* only messages that complete a receive can solicit an event */
	if ((wr->flags & MBCF_F_SOLICITED) &&
	    (send_is_send(wr->op) || wr->op == MBCF_OP_WRITE_IMM))
		m->flags |= MBCF_MSG_SOLICITED;
	if (wr->flags & MBCF_WR_FENCE)
		m->flags |= MBCF_MSG_FENCE;
	if (wr->flags & MBCF_WR_FENCE_ALL)
		m->flags |= MBCF_MSG_FENCE_ALL;
	/* reads and atomics complete by their responses: never quiet */
	if ((wr->flags & MBCF_WR_QUIET) && send_has_data(wr->op))
		m->flags |= MBCF_MSG_QUIET;
	c->req.tail++;
	return MBCF_POST_OK;
}

/* Queue a response (READ_RESP or ATOMIC_RESP) in our stream. */
struct mbcf_msg *mbcf_send_respond(struct mbcf_conn *c, u8 op, u32 req_psn,
				    u32 len)
{
	struct mbcf_msg *m;

	if (c->resp.tail - c->resp.head >= c->cfg.max_dest_rd_atomic)
		return NULL;
	m = mbcf_msgq_at(&c->resp, c->resp.tail++);
	send_init_msg(c, m, op, len);
	m->req_psn = req_psn;
	return m;
}

static bool send_rd_gate_open(const struct mbcf_conn *c)
{
	return c->rd_out < c->cfg.max_rd_atomic;
}

/*
 * Carry out the local requests (memory window bind, invalidate) next in
 * posting order when their turn comes: every earlier request started, for
 * FENCE_ALL every earlier one completed, for FENCE every earlier read and
 * atomic completed.  They occupy no psn; done at once, they complete in
 * order with the status ops->local gave.  Completing them may open the
 * fence of the next one (a chain of invalidates, each FENCE_ALL): then it
 * runs now too -- nothing else would come to run it.  Each round starts at
 * least one request, so the rounds are bounded by the queue.
 */
static void send_locals(struct mbcf_conn *c)
{
	struct mbcf_msg *m;
	bool ran;

	do {
		ran = false;
		while (c->req.next != c->req.tail && !c->local_failed) {
			m = mbcf_msgq_at(&c->req, c->req.next);
			if (m->op != MBCF_OP_LOCAL ||
			    ((m->flags & MBCF_MSG_FENCE_ALL) &&
			     c->req.head != c->req.next) ||
			    ((m->flags & MBCF_MSG_FENCE) && c->rd_out))
				break;
			m->status = (u8)c->ops->local(c->env, m->cookie);
			/* it fails the connection when it completes, in
			 * order; what was posted after it must not start
			 * meanwhile */
			if (m->status != MBCF_WC_SUCCESS)
				c->local_failed = true;
			m->first_psn = c->snd_max; /* keeps started ones in psn order */
			m->flags |= MBCF_MSG_ACKED;
			c->req.next++;
			ran = true;
		}
		if (ran)
			mbcf_send_complete(c);
	} while (ran && c->state == MBCF_CONN_RTS);
}

/*
 * The next message to start.  Responses go first: they are never gated, so
 * reads in both directions cannot deadlock on each other's max_rd_atomic.
 */
static struct mbcf_msg *send_pick(struct mbcf_conn *c, bool peek)
{
	struct mbcf_msg *m;

	if (c->resp.next != c->resp.tail) {
		m = mbcf_msgq_at(&c->resp, c->resp.next);
		if (!peek)
			c->resp.next++;
		return m;
	}
	/* rejecting a request of the peer's: ours are flushed after */
	if (c->nak_drain)
		return NULL;
	if (!peek)
		send_locals(c);
	if (c->req.next == c->req.tail || c->local_failed)
		return NULL;
	m = mbcf_msgq_at(&c->req, c->req.next);
	if (m->op == MBCF_OP_LOCAL)
		return NULL;	/* waits for its fence */
	if ((m->flags & MBCF_MSG_FENCE) && c->rd_out)
		return NULL;
	if (mbcf_op_is_rd(m->op)) {
		if (!send_rd_gate_open(c))
			return NULL;
		if (!peek) {
			m->flags |= MBCF_MSG_RD;
			c->rd_out++;
		}
	}
	if (!peek)
		c->req.next++;
	return m;
}

/*
 * The started message of ring r that holds psn.  Started messages have
 * increasing first_psns, so a binary search finds it; a linear scan backs
 * it up for the pathological case of a message so old (a read waiting for
 * its response over 2^23 frames) that serial order no longer holds.
 */
static struct mbcf_msg *send_find_in(const struct mbcf_msgq *r, u32 psn)
{
	u32 lo = r->head, n = r->next - r->head, i;
	struct mbcf_msg *m;

	while (n > 1) {
		u32 half = n / 2;

		m = mbcf_msgq_at(r, lo + half);
		if (mbcf_seq_le(m->first_psn, psn)) {
			lo += half;
			n -= half;
		} else {
			n = half;
		}
	}
	if (n) {
		m = mbcf_msgq_at(r, lo);
		if (mbcf_seq_in(psn, m->first_psn, m->nframes))
			return m;
	}
	for (i = r->head; i != r->next; i++) {
		m = mbcf_msgq_at(r, i);
		if (mbcf_seq_in(psn, m->first_psn, m->nframes))
			return m;
	}
	return NULL;
}

/* The started message that owns an unacknowledged psn (retransmission). */
struct mbcf_msg *mbcf_send_find(struct mbcf_conn *c, u32 psn)
{
	struct mbcf_msg *m = c->rtx;

	if (m && mbcf_seq_in(psn, m->first_psn, m->nframes))
		return m;
	m = send_find_in(&c->req, psn);
	if (!m)
		m = send_find_in(&c->resp, psn);
	c->rtx = m;
	return m;
}

/* Could another frame follow the one at snd_nxt in this burst? */
static bool send_more_after(struct mbcf_conn *c)
{
	u32 after = mbcf_seq_add(c->snd_nxt, 1);

	if (after != c->snd_max && c->snd_nxt != c->snd_max)
		return true;
	if (c->cur && mbcf_seq_in(after, c->cur->first_psn, c->cur->nframes))
		return true;
	return send_pick(c, true) != NULL;
}

static bool send_is_resp(const struct mbcf_msg *m)
{
	return m->op == MBCF_OP_READ_RESP || m->op == MBCF_OP_ATOMIC_RESP;
}

/*
 * A burst may end without asking only if its acknowledgement may come
 * late: not while our NAK waits for acknowledgements (8.3), nor when our
 * retransmit timeout could come before a late ACK does (a verbs timeout
 * this short is rare: perftest's is 67 ms).
 */
static bool send_late_ack_ok(const struct mbcf_conn *c)
{
	return !c->nak_drain &&
	       c->rto_cur >= 2 * (MBCF_TLP_MIN_NS + c->cfg.timer_slack_ns);
}

/*
 * Rule 3 for a burst of responses: the requester acknowledges them
 * unasked (6.2) -- its next request carries ack_psn, and in a ping-pong
 * of reads the ACK frame per read cost ~6 us of latency.
 */
static bool send_lazy_end(const struct mbcf_conn *c, const struct mbcf_msg *m)
{
	return send_is_resp(m) && send_late_ack_ok(c);
}

/*
 * Rule 3 for a burst of quiet messages (MBCF_WR_QUIET, verbs unsignaled):
 * no one waits for their completions, so their acknowledgement may come
 * with the next frame that asks, or with any frame of the peer's (every
 * frame carries ack_psn).  The ACK at the end of each burst had cost a
 * frame each way per burst: UCX posts its fragments one by one,
 * unsignaled, and each became a burst that asked.  Still asked while a
 * message someone waits for is unacknowledged, on the same terms as for
 * responses (send_late_ack_ok), and while we recover from a loss (a resend,
 * or a timeout since the last progress): the ACK moves the recovery on.
 * A quiet tail nothing follows is asked for by the tail probe (7.6).
 */
static bool send_quiet_end(struct mbcf_conn *c, const struct mbcf_msg *m)
{
	if (c->loud_unacked && mbcf_seq_lt(c->loud_end, c->snd_una))
		c->loud_unacked = false;
	return (m->flags & MBCF_MSG_QUIET) && !c->loud_unacked &&
	       c->snd_nxt == c->snd_max && !c->rto_backoff &&
	       send_late_ack_ok(c);
}

/*
 * psns that may be unacknowledged now: the window, and, while a gap is
 * repaired selectively, the frames skipped as placed early (delivered,
 * though the cumulative ack cannot say so yet), as far as the peer can
 * place frames after its gap (7.2).
 */
static u32 send_wnd_open(const struct mbcf_conn *c)
{
	u32 w = c->wnd + c->sel_bonus, cap = MBCF_EARLY_SPAN - 1;

	if (c->rto_probe)
		return 1;
	if (!c->sel_bonus)
		return c->wnd;
	if (cap < c->wnd)
		cap = c->wnd;
	return w < cap ? w : cap;
}

/*
 * docs/protocol.md 6.1: when the sender asks for an acknowledgement.  With
 * no explicit interval: every half window, but at least every
 * MBCF_ACK_EVERY_MAX frames -- completions, and the send-queue slots they
 * free, must flow back while a large window is still in flight, or an
 * application that keeps a bounded number of requests posted stalls.
 */
static u8 send_ackreq(struct mbcf_conn *c, const struct mbcf_msg *m,
		      u32 bytes, u64 now)
{
	u32 every = c->cfg.ack_interval;
	s32 inflight = mbcf_seq_diff(c->snd_nxt, c->snd_una) + 1;
	u32 wnd = send_wnd_open(c);

	if (c->cfg.uc)
		return 0;	/* nothing is ever acknowledged */
	if (!every)
		every = c->wnd / 2 < MBCF_ACK_EVERY_MAX ?
			c->wnd / 2 : MBCF_ACK_EVERY_MAX;
	if (c->since_ackreq + 1 >= every)
		return MBCF_F_ACKREQ;
	/*
	 * The frame fills the window: ask, unless a frame asking already is
	 * in flight (its answer opens the window).  Asking with every frame
	 * that refills a window opened one frame at a time (acknowledgements
	 * piggy-backed on a read requester's requests) makes the receiver
	 * answer every frame, and each answer again opens one frame.
	 */
	if ((u32)inflight >= wnd &&
	    !(mbcf_seq_lt(c->snd_una, c->ackreq_next) &&
	      mbcf_seq_le(c->ackreq_next, c->snd_nxt)))
		return MBCF_F_ACKREQ;
	/*
	 * Paced: frames leave one by one, so "the end of a burst" never
	 * comes; ask once the frames since the last ACKREQ span a quarter of
	 * the retransmit timeout in pacing time, so the oldest of them is
	 * acknowledged long before the timer would resend it.
	 */
	if (c->pace.kbps &&
	    (s64)(mbcf_pace_peek(&c->pace, bytes, now) - c->ackreq_at) >=
	    (s64)(c->rto_cur / 4))
		return MBCF_F_ACKREQ;
	return send_more_after(c) || send_lazy_end(c, m) ||
	       send_quiet_end(c, m) ? 0 : MBCF_F_ACKREQ;
}

/* Bytes frame i of m occupies on the wire (what pacing counts). */
u32 mbcf_send_frame_bytes(const struct mbcf_conn *c, const struct mbcf_msg *m,
			  u32 i)
{
	u8 op = m->op;
	u32 pay = 0, left;

	if (op == MBCF_OP_WRITE_IMM && i + 1 < m->nframes)
		op = MBCF_OP_WRITE;	/* as send_fill_ext() builds it */
	if (send_has_data(m->op)) {
		left = m->len - i * m->seg;
		pay = left < m->seg ? left : m->seg;
	}
	return mbcf_codec_hdr_len(op) + pay + c->cfg.frame_overhead;
}

static void send_fill_data(const struct mbcf_msg *m, u32 off,
			   struct mbcf_frame *f, struct mbcf_payload *pl)
{
	u32 left = m->len - off;

	f->paylen = left < m->seg ? left : m->seg;
	pl->len = f->paylen;
	if (m->op == MBCF_OP_READ_RESP) {
		pl->kind = f->paylen ? MBCF_PL_TARGET : MBCF_PL_NONE;
		pl->va = m->raddr + off;
		pl->rkey = m->rkey;
	} else {
		pl->kind = f->paylen ? MBCF_PL_WR : MBCF_PL_NONE;
		pl->cookie = m->cookie;
		pl->offset = off;
	}
}

static void send_fill_ext(const struct mbcf_msg *m, u32 i, u32 off,
			  struct mbcf_frame *f)
{
	switch (m->op) {
	case MBCF_OP_WRITE_IMM:
		/* only the last segment carries the immediate */
		if (i + 1 < m->nframes)
			f->op = MBCF_OP_WRITE;
		f->imm = m->imm;
		f->len = m->len;
		mbcf_fallthrough;
	case MBCF_OP_WRITE:
		f->va = m->raddr + off;
		f->rkey = m->rkey;
		break;
	case MBCF_OP_READ_REQ:
		f->va = m->raddr;
		f->rkey = m->rkey;
		f->len = m->len;
		break;
	case MBCF_OP_CMP_SWAP:
	case MBCF_OP_FETCH_ADD:
		f->va = m->raddr;
		f->rkey = m->rkey;
		f->operand[0] = m->operand[0];
		f->operand[1] = m->operand[1];
		break;
	case MBCF_OP_ATOMIC_RESP:
		f->operand[0] = m->operand[0];
		mbcf_fallthrough;
	case MBCF_OP_READ_RESP:
		f->req_psn = m->req_psn;
		f->offset = off;
		break;
	case MBCF_OP_SEND_INV:
		f->rkey = m->imm;
		f->offset = off;
		break;
	case MBCF_OP_FIFO_PUSH:
		f->rkey = m->rkey;
		break;
	default: /* SEND, SEND_IMM */
		f->imm = m->imm;
		f->offset = off;
		break;
	}
}

/* Frame i of m (a WRITE or WRITE_IMM): its run, wire byte 3 (5.1). */
static u8 send_run(const struct mbcf_msg *m, u32 i)
{
	u32 run = m->run0 + i;

	return run < MBCF_RUN_MAX ? (u8)run : MBCF_RUN_MAX;
}

/*
 * m starts: a WRITE continues the run of WRITE frames under its rkey that
 * came right before it; anything else ends it.  Frames of one message are
 * consecutive psns, so the run after m is known now.
 */
static void send_run_start(struct mbcf_conn *c, struct mbcf_msg *m)
{
	u32 run = 0;

	if (m->op != MBCF_OP_WRITE && m->op != MBCF_OP_WRITE_IMM) {
		c->run_len = 0;
		return;
	}
	if (c->run_len && c->run_rkey == m->rkey)
		run = c->run_len;
	m->run0 = (u8)run;
	c->run_rkey = m->rkey;
	run += m->nframes;
	c->run_len = run < MBCF_RUN_MAX ? run : MBCF_RUN_MAX;
}

/*
 * Did the peer place frame i of m early, d psns after its gap, had it
 * arrived (5.1)?  A WRITE frame, not its message's LAST, whose run reaches
 * back to the gap.
 */
bool mbcf_send_placed_early(const struct mbcf_msg *m, u32 i, u32 d)
{
	if ((m->op != MBCF_OP_WRITE && m->op != MBCF_OP_WRITE_IMM) ||
	    i + 1 >= m->nframes)
		return false;
	return d < MBCF_EARLY_SPAN && send_run(m, i) >= d;
}

/*
 * Frame i of m, psn, d after the gap: placed early?  Up to the frame that
 * found the gap the peer said so in its map; after it, what it could
 * place, unless lost too (its next LOST says so).
 */
bool mbcf_send_was_placed(const struct mbcf_msg *m, u32 i, u32 d, u32 psn,
			  u32 seen, const u64 *map)
{
	if (d < MBCF_EARLY_SPAN && mbcf_seq_le(psn, seen))
		return map[d / 64] >> (d % 64) & 1;
	return mbcf_send_placed_early(m, i, d);
}

/* Build frame i of m from its descriptor and hand it to the environment. */
int mbcf_send_frame(struct mbcf_conn *c, const struct mbcf_msg *m, u32 i,
		    u8 flags)
{
	struct mbcf_frame f;
	struct mbcf_payload pl;
	u8 hdr[MBCF_HDR_MAX];
	u32 off = i * m->seg;
	u32 hl;

	memset(&f, 0, sizeof(f));
	memset(&pl, 0, sizeof(pl));
	f.op = m->op;
	f.flags = flags;
	f.dst_qpn = c->cfg.remote_qpn;
	f.src_qpn = c->cfg.local_qpn;
	f.psn = mbcf_seq_add(m->first_psn, i);
	f.ack_psn = c->rcv_nxt;
	f.epoch = c->tx_epoch;
	if (send_has_data(m->op)) {
		send_fill_data(m, off, &f, &pl);
		f.flags |= i == 0 ? MBCF_F_FIRST : 0;
		f.flags |= i + 1 == m->nframes ? MBCF_F_LAST : 0;
		if (i + 1 == m->nframes && (m->flags & MBCF_MSG_SOLICITED))
			f.flags |= MBCF_F_SOLICITED;
	}
	send_fill_ext(m, i, off, &f);
	if (f.op == MBCF_OP_WRITE)
		f.run = send_run(m, i);
	hl = mbcf_codec_build(&f, hdr);
	c->tx_unflushed = true;
	return c->ops->xmit(c->env, hdr, hl, &pl);
}

/* The message and frame index for snd_nxt; starts a new message if needed. */
static struct mbcf_msg *send_next_msg(struct mbcf_conn *c, bool *fresh)
{
	struct mbcf_msg *m;

	*fresh = c->snd_nxt == c->snd_max;
	if (!*fresh)
		return mbcf_send_find(c, c->snd_nxt);
	if (mbcf_send_cur_unfinished(c))
		return c->cur;
	m = send_pick(c, false);
	if (m) {
		m->first_psn = c->snd_max;
		c->cur = m;
		send_run_start(c, m);
	}
	return m;
}

/* Frame psn of m could not be built: the memory it comes from is gone. */
void mbcf_send_fault(struct mbcf_conn *c, const struct mbcf_msg *m, u32 psn)
{
	if (m->op == MBCF_OP_READ_RESP) {
		/*
		 * The target memory a read response comes from is gone (its
		 * region was deregistered after we accepted the read): as
		 * for a read refused at once, the requester gets
		 * REMOTE_ACCESS_ERROR, in a NAK naming the read request, and
		 * we enter ERROR (section 8.3).  No byte of the frame left.
		 */
		c->nak_status = MBCF_ST_REMOTE_ACCESS_ERROR;
		c->nak_psn = m->req_psn;
		c->nak_read = true;
		c->nak_rhead = c->resp.head;
		c->nak_rnext = c->resp.next;
		c->nak_rend = c->resp.tail;
		mbcf_send_nak(c, c->nak_psn, c->nak_status);
		mbcf_conn_enter_error(c, false, 0, MBCF_WC_WR_FLUSH_ERR);
		return;
	}
	/* the local memory of a request is gone: it completes with a local
	 * protection error, everything after it is flushed */
	mbcf_conn_enter_error(c, true, psn, MBCF_WC_LOC_PROT_ERR);
}

/*
 * Selective repeat (docs/protocol.md 7.2): a resend of frame i of m, after
 * LOST(sel_base), is skipped if the peer placed it early when it first
 * came (5.1); if it was lost instead, the peer's next LOST says so.
 */
static bool send_sel_skip(struct mbcf_conn *c, const struct mbcf_msg *m, u32 i)
{
	s32 d = mbcf_seq_diff(c->snd_nxt, c->sel_base);

	if (!mbcf_seq_lt(c->snd_nxt, c->sel_end)) {
		c->sel_skip = false;
		return false;
	}
	if (d <= 0 || !mbcf_send_was_placed(m, i, (u32)d, c->snd_nxt,
					    c->sel_seen, c->sel_placed))
		return false;
	/* walked again after a refill (send_sel_refill): counted already,
	 * or sent once in the round and so counted in the window */
	if (!mbcf_seq_lt(c->snd_nxt, c->sel_rewalk))
		c->sel_bonus++;
	c->snd_nxt = mbcf_seq_add(c->snd_nxt, 1);
	if (!c->sel_counted) {
		c->sel_counted = true;
		c->ctr.selective_repeats++;
	}
	return true;
}

static bool send_one(struct mbcf_conn *c, u64 now)
{
	struct mbcf_msg *m;
	bool fresh;
	u32 i, bytes;
	int err;
	u8 fl;

	m = send_next_msg(c, &fresh);
	if (!m) {
		/* a hole in our own stream cannot be; never spin on it */
		if (!fresh)
			c->snd_nxt = c->snd_max;
		return false;
	}
	i = (u32)mbcf_seq_diff(c->snd_nxt, m->first_psn);
	if (c->sel_skip && !fresh && send_sel_skip(c, m, i))
		return true;
	/* paced: not before the clock, a first send or a go-back-N resend */
	if (!mbcf_pace_ready(&c->pace, now)) {
		c->pace_wait = true;
		mbcf_pace_hold(&c->pace);
		return false;
	}
	bytes = c->pace.kbps ? mbcf_send_frame_bytes(c, m, i) : 0;
	fl = send_ackreq(c, m, bytes, now);
	err = mbcf_send_frame(c, m, i, fl);
	if (err == MBCF_XMIT_FAULT) {
		mbcf_send_fault(c, m, c->snd_nxt);
		return false;
	}
	if (err) {
		c->tx_busy = true;
		c->ctr.tx_busy++;
		return false;
	}
	mbcf_pace_sent(&c->pace, bytes, now);
	c->ctr.tx_frames++;
	if (!(m->flags & MBCF_MSG_QUIET) && !send_is_resp(m)) {
		u32 end = mbcf_seq_add(m->first_psn, m->nframes - 1);

		if (!c->loud_unacked || mbcf_seq_lt(c->loud_end, end))
			c->loud_end = end;
		c->loud_unacked = true;
	}
	if (m->seg)
		c->ctr.tx_bytes += i + 1 == m->nframes ?
				   m->len - i * m->seg : m->seg;
	if (fl) {
		c->since_ackreq = 0;
		c->ackreq_next = mbcf_seq_add(c->snd_nxt, 1);
		c->ackreq_at = now;
		c->ctr.acks_req++;
		/* time its acknowledgement: asked for, so it comes at once */
		if (fresh && !c->rtt_timing && !c->cfg.uc) {
			c->rtt_timing = true;
			c->rtt_psn = c->snd_nxt;
			c->rtt_at = now;
		}
	} else {
		c->since_ackreq++;
	}
	c->tail_lazy = !fl && (send_is_resp(m) || (m->flags & MBCF_MSG_QUIET));
	/* an answer to a message that asked (6.2): the ping-pong goes on */
	if (c->pp_rx_at) {
		if (!mbcf_pp_unanswered(c, now) &&
		    c->pp_streak < MBCF_PP_STREAK)
			c->pp_streak++;
		c->pp_rx_at = 0;
	}
	c->ack_due = false;	/* every frame carries ack_psn */
	c->ack_lazy_at = 0;
	if (fresh) {
		c->snd_max = mbcf_seq_add(c->snd_max, 1);
		if (i + 1 == m->nframes)
			c->cur = NULL;
	} else {
		c->ctr.retransmits++;
	}
	c->snd_nxt = mbcf_seq_add(c->snd_nxt, 1);
	/* UC: a frame sent is done with; its message completes when sent */
	if (c->cfg.uc)
		c->snd_una = c->snd_nxt;
	return true;
}

/*
 * docs/protocol.md 7.6: when to probe the tail -- two measured round trips
 * after the last frame left, if that is well before the retransmission
 * timeout.  Not before a round trip was measured, nor on a paced (its
 * frames leave by the clock) or unreliable connection.
 */
void mbcf_send_tlp_arm(struct mbcf_conn *c, u64 now)
{
	u64 pto = 2 * c->srtt;

	c->tlp_at = 0;
	if (c->tlp_sent || !c->srtt || c->pace.kbps || c->cfg.uc || c->stopped ||
	    c->snd_una == c->snd_max)
		return;
	if (pto < MBCF_TLP_MIN_NS)
		pto = MBCF_TLP_MIN_NS;
	/* the peer's late ACK may ride its timer's slack (6.2) */
	if (c->tail_lazy)
		pto += c->cfg.timer_slack_ns;
	if (pto < c->rto_cur / 2)
		c->tlp_at = now + pto;
}

static mbcf_noinline void send_burst(struct mbcf_conn *c, u64 now)
{
	u32 sent = 0;

	/* the link refused a frame: let its queue drain first (7.7) */
	if (c->hold_at) {
		if (now < c->hold_at)
			return;
		c->hold_at = 0;
	}
	while (c->state == MBCF_CONN_RTS && !c->stopped && !c->tx_busy &&
	       (u32)mbcf_seq_diff(c->snd_nxt, c->snd_una) < send_wnd_open(c)) {
		if (!send_one(c, now))
			break;
		sent++;
	}
	if (c->cfg.uc && sent)
		mbcf_send_complete(c);
	if (sent)
		mbcf_send_tlp_arm(c, now);
}

/* Send as much as the window, STOP and the environment allow. */
void mbcf_send_push(struct mbcf_conn *c, u64 now)
{
	c->pace_wait = false;
	if (!mbcf_send_idle(c))
		send_burst(c, now);
	/* keep a deadline while the peer owes us something or xmit is busy */
	if (!c->rto_at && !c->stopped && (mbcf_send_waiting(c) || c->tx_busy))
		c->rto_at = now + c->rto_cur;
}

static bool send_msg_acked(const struct mbcf_conn *c, struct mbcf_msg *m)
{
	if (m->flags & MBCF_MSG_ACKED)
		return true;
	if (mbcf_seq_diff(c->snd_una, m->first_psn) < (s32)m->nframes ||
	    (c->cur == m))
		return false;
	m->flags |= MBCF_MSG_ACKED;
	return true;
}

static bool send_msg_done(const struct mbcf_conn *c, struct mbcf_msg *m)
{
	if (m->flags & MBCF_MSG_RD)
		return m->flags & MBCF_MSG_GOT_RESP;
	return send_msg_acked(c, m);
}

static void send_complete_msg(struct mbcf_conn *c, struct mbcf_msg *m, u8 st)
{
	struct mbcf_cqe cqe;

	if (m->flags & MBCF_MSG_RD)
		c->rd_out--;
	memset(&cqe, 0, sizeof(cqe));
	cqe.cookie = m->cookie;
	cqe.op = m->op;
	cqe.status = st;
	cqe.byte_len = m->len;	/* verbs reports it for reads (8 for atomics) */
	c->ctr.send_completions++;
	if (c->ops->complete(c->env, &cqe))
		c->cqe_lost = true;
}

/*
 * Mark acknowledged messages behind a head that waits for its response, so
 * that their psns may wrap long after the ack without being misread.
 */
static void send_mark_acked(struct mbcf_conn *c, u32 from)
{
	u32 i;

	for (i = from; i != c->req.next; i++)
		if (!send_msg_acked(c, mbcf_msgq_at(&c->req, i)))
			break;
}

/* Release acknowledged responses; complete finished requests in order. */
void mbcf_send_complete(struct mbcf_conn *c)
{
	struct mbcf_msg *m;
	u8 st;

	while (c->resp.head != c->resp.next) {
		m = mbcf_msgq_at(&c->resp, c->resp.head);
		if (!send_msg_acked(c, m))
			break;
		if (c->rtx == m)
			c->rtx = NULL;	/* the slot will be reused */
		c->resp.head++;
	}
	while (c->state == MBCF_CONN_RTS && c->req.head != c->req.next) {
		m = mbcf_msgq_at(&c->req, c->req.head);
		if (!send_msg_done(c, m)) {
			send_mark_acked(c, c->req.head + 1);
			return;
		}
		st = m->status;
		/* a request that failed completes with its status in the
		 * flush, and everything after it with WR_FLUSH_ERR, even what
		 * the peer already acknowledged; a local request has no psn of
		 * its own to name */
		if (st != MBCF_WC_SUCCESS) {
			mbcf_conn_enter_error(c, m->op != MBCF_OP_LOCAL,
					      m->first_psn,
					      m->op == MBCF_OP_LOCAL ?
					      MBCF_WC_WR_FLUSH_ERR : st);
			return;
		}
		c->req.head++;
		if (c->rtx == m)
			c->rtx = NULL;
		send_complete_msg(c, m, st);
	}
}

/* The oldest started read/atomic still waiting for its response. */
struct mbcf_msg *mbcf_send_pending_rd(struct mbcf_conn *c)
{
	u32 i;

	for (i = c->req.head; i != c->req.next; i++) {
		struct mbcf_msg *m = mbcf_msgq_at(&c->req, i);

		if ((m->flags & MBCF_MSG_RD) && !(m->flags & MBCF_MSG_GOT_RESP))
			return m;
	}
	return NULL;
}

/* A control frame: ACK (status = NAK when nonzero), LOST, STOP or GO. */
void mbcf_send_control(struct mbcf_conn *c, u8 op, u8 status)
{
	mbcf_send_control_flags(c, op, status, 0, c->rcv_nxt, 0);
}

static void send_control_xmit(struct mbcf_conn *c, struct mbcf_frame *f);

/*
 * LOST(rcv_nxt), reporting the frame that found the gap (its psn and its
 * round) and what we placed early so far (5.1).
 */
void mbcf_send_control_lost(struct mbcf_conn *c, u16 epoch, u32 seen)
{
	struct mbcf_frame f;
	u8 placed[MBCF_PLACED_LEN];

	memset(&f, 0, sizeof(f));
	mbcf_early_map_out(c, placed);
	f.op = MBCF_OP_LOST;
	f.ack_psn = c->rcv_nxt;
	f.epoch = epoch;
	f.seen = seen;
	f.placed = placed;
	send_control_xmit(c, &f);
}

/*
 * A NAK naming psn: the frame rejected (psn = rcv_nxt), or a read request
 * accepted earlier whose response can no longer be built (section 8.3).
 * Its ack_psn acknowledges no more than psn: every frame before it was
 * accepted, which is true either way.
 */
void mbcf_send_nak(struct mbcf_conn *c, u32 psn, u8 status)
{
	mbcf_send_control_flags(c, MBCF_OP_ACK, status, 0, psn, 0);
}

void mbcf_send_control_flags(struct mbcf_conn *c, u8 op, u8 status, u8 flags,
			     u32 ack_psn, u16 epoch)
{
	struct mbcf_frame f;

	memset(&f, 0, sizeof(f));
	f.op = op;
	f.status = status;
	f.flags = flags;
	f.ack_psn = ack_psn;
	f.epoch = epoch;
	send_control_xmit(c, &f);
}

/* Address control frame f (its own fields set) and send it. */
static void send_control_xmit(struct mbcf_conn *c, struct mbcf_frame *f)
{
	struct mbcf_payload pl;
	u8 hdr[MBCF_HDR_MAX];
	u8 op = f->op, status = f->status;
	u32 hl;

	memset(&pl, 0, sizeof(pl));
	f->dst_qpn = c->cfg.remote_qpn;
	f->src_qpn = c->cfg.local_qpn;
	f->psn = c->snd_max;
	hl = mbcf_codec_build(f, hdr);
	c->tx_unflushed = true;
	/* a control frame that cannot leave is as good as lost: recoverable */
	if (c->ops->xmit(c->env, hdr, hl, &pl)) {
		c->ctr.tx_busy++;
		return;
	}
	c->ctr.tx_frames++;
	c->ack_due = false;
	c->ack_lazy_at = 0;
	if (op == MBCF_OP_ACK && status)
		c->ctr.naks_tx++;
	else if (op == MBCF_OP_ACK)
		c->ctr.acks_tx++;
	else if (op == MBCF_OP_LOST)
		c->ctr.lost_tx++;
	else if (op == MBCF_OP_STOP)
		c->ctr.stop_tx++;
	else if (op == MBCF_OP_GO)
		c->ctr.go_tx++;
}

/*
 * Connection error: complete every outstanding request in order.  Finished
 * ones complete with their own status (success, or the error that made
 * the connection fail) until one completed in error: after that, nothing
 * succeeds (verbs: completions of a send queue are in order, and every
 * request after an error is flushed, even one the peer acknowledged).  The
 * one holding psn (or, without one, the oldest unfinished) gets wc; the
 * rest are flushed.  Queued responses are abandoned.
 */
void mbcf_send_flush(struct mbcf_conn *c, bool psn_valid, u32 psn, u8 wc)
{
	u32 started = c->req.next - c->req.head;
	bool assigned = false, failed = false;
	struct mbcf_msg *m;
	u8 st;

	for (; c->req.head != c->req.tail; started -= started ? 1 : 0) {
		m = mbcf_msgq_at(&c->req, c->req.head++);
		st = MBCF_WC_WR_FLUSH_ERR;
		if (started && send_msg_done(c, m)) {
			if (!failed)
				st = m->status;
		} else if (!assigned && (!psn_valid || (started &&
			   mbcf_seq_in(psn, m->first_psn, m->nframes)))) {
			st = wc;
			assigned = true;
		}
		send_complete_msg(c, m, st);
		failed |= st != MBCF_WC_SUCCESS;
	}
	c->req.next = c->req.tail;
	c->resp.head = c->resp.next = c->resp.tail;
	c->cur = NULL;
	c->rtx = NULL;
	c->rd_out = 0;
	c->stopped = false;
	c->rto_at = 0;
	c->rnr_at = 0;
	c->tlp_at = 0;
	c->rto_probe = false;
	c->rto_share_since = 0;
}
