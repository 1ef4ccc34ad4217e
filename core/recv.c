// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Receiver side of a connection: in-order acceptance of the peer's stream,
 * LOST/STOP/GO, duplicate handling, and the operations at the target
 * (responder) and at the requester (responses).  docs/protocol.md
 * sections 5, 7 and 9.  Only frames that passed mbcf_codec_parse get here.
 */
#include "internal.h"
#include <mbcf/fifo.h>

static void recv_complete(struct mbcf_conn *c, u8 op, u8 st, u32 byte_len,
			  const struct mbcf_frame *f)
{
	struct mbcf_cqe cqe;

	memset(&cqe, 0, sizeof(cqe));
	cqe.cookie = c->rx_cookie;
	cqe.op = op;
	cqe.status = st;
	cqe.byte_len = byte_len;
	cqe.flags = MBCF_CQE_RECV;
	if (f && (f->op == MBCF_OP_SEND_IMM || f->op == MBCF_OP_WRITE_IMM)) {
		cqe.imm = f->imm;
		cqe.flags |= MBCF_CQE_IMM;
	}
	if (f && f->op == MBCF_OP_SEND_INV) {
		cqe.imm = f->rkey;
		cqe.flags |= MBCF_CQE_INV;
	}
	if (f && (f->flags & MBCF_F_SOLICITED))
		cqe.flags |= MBCF_CQE_SOLICITED;
	c->rx_claimed = false;
	c->ctr.recv_completions++;
	if (c->ops->complete(c->env, &cqe))
		c->cqe_lost = true;
}

/*
 * Claim a posted receive for the message starting now (once): ACCEPT,
 * RNR (none posted: STOP), or REMOTE_OP_ERROR (the receive queue is broken).
 */
static int recv_claim(struct mbcf_conn *c)
{
	int r;

	if (c->rx_claimed)
		return MBCF_RX_ACCEPT;
	r = c->ops->recv_claim(c->env, &c->rx_cookie, &c->rx_cap);
	if (r == MBCF_CLAIM_NONE)
		return MBCF_RX_RNR;
	if (r != MBCF_CLAIM_OK)
		return MBCF_ST_REMOTE_OP_ERROR;
	c->rx_claimed = true;
	c->rx_off = 0;
	return MBCF_RX_ACCEPT;
}

/* FIRST/LAST must bracket each segmented message (section 2.4). */
static int recv_segment(const struct mbcf_conn *c, const struct mbcf_frame *f,
			u8 kind)
{
	bool first = f->flags & MBCF_F_FIRST;

	if (first != (c->rx_msg == 0))
		return MBCF_ST_REMOTE_INVALID_REQUEST;
	if (!first && c->rx_msg != kind)
		return MBCF_ST_REMOTE_INVALID_REQUEST;
	return MBCF_RX_ACCEPT;
}

static void recv_segment_done(struct mbcf_conn *c, const struct mbcf_frame *f,
			      u8 kind)
{
	c->rx_msg = f->flags & MBCF_F_LAST ? 0 : kind;
}

static int recv_write(struct mbcf_conn *c, const struct mbcf_frame *f)
{
	bool imm = f->op == MBCF_OP_WRITE_IMM;
	int st = recv_segment(c, f, MBCF_OP_WRITE);

	if (st)
		return st;
	if (imm && !(f->flags & MBCF_F_LAST))
		return MBCF_ST_REMOTE_INVALID_REQUEST;
	/* claim before writing: a STOP must leave nothing half done */
	if (imm) {
		st = recv_claim(c);
		if (st)
			return st;
	}
	/* in pieces, and around what frames placed early after it hold
	 * (section 5.1): the whole range is checked first, or a frame
	 * crossing the end of its region would leave a part behind (9) */
	st = mbcf_early_write(c, f, 0);
	if (st)
		return st;
	recv_segment_done(c, f, MBCF_OP_WRITE);
	if (imm)
		recv_complete(c, MBCF_OP_WRITE_IMM, MBCF_WC_SUCCESS, f->len, f);
	return MBCF_RX_ACCEPT;
}

/*
 * The claimed receive fails with @st, and the frame is rejected.  UC
 * completes it now (the message is dropped, nothing else happens).  RC
 * NAKs, maybe after draining its responses (section 8.3), and until then
 * requests of ours the peer acknowledges still complete successfully: the
 * receive's error waits for the connection to enter ERROR
 * (recv_fail_complete), or it would come before those successes -- and
 * after an error completion a QP completes nothing successfully (verbs).
 */
static void recv_fail(struct mbcf_conn *c, u8 op, u8 st, u32 byte_len)
{
	if (c->cfg.uc) {
		recv_complete(c, op, st, byte_len, NULL);
		return;
	}
	c->rx_err = st;
	c->rx_err_op = op;
	c->rx_err_len = byte_len;
}

/* Complete the receive recv_fail() held back, if any. */
static void recv_fail_complete(struct mbcf_conn *c)
{
	if (c->rx_err && c->rx_claimed)
		recv_complete(c, c->rx_err_op, c->rx_err, c->rx_err_len, NULL);
	c->rx_err = 0;
}

static int recv_send(struct mbcf_conn *c, const struct mbcf_frame *f)
{
	int st = recv_segment(c, f, MBCF_OP_SEND);
	const u8 *p;
	u32 k, n, off;

	if (st)
		return st;
	if (f->flags & MBCF_F_FIRST) {
		st = recv_claim(c);
		if (st)
			return st;
	}
	if (!c->rx_claimed || f->offset != c->rx_off)
		return MBCF_ST_REMOTE_INVALID_REQUEST;
	if (f->paylen > c->rx_cap - c->rx_off) {
		/* UC drops the message and keeps the receive (verbs) */
		if (!c->cfg.uc)
			recv_fail(c, f->op, MBCF_WC_LOC_LEN_ERR, c->rx_off);
		return MBCF_ST_REMOTE_INVALID_REQUEST;
	}
	for (k = 0, off = c->rx_off; f->paylen && mbcf_frame_piece(f, k, &p, &n);
	     k++, off += n) {
		/* a receive buffer we may not write: ours to report, theirs
		 * to learn as a remote operational error (verbs) */
		if (c->ops->recv_write(c->env, c->rx_cookie, off, p, n)) {
			recv_fail(c, f->op, MBCF_WC_LOC_PROT_ERR, off);
			return MBCF_ST_REMOTE_OP_ERROR;
		}
	}
	c->rx_off += f->paylen;
	if (!(f->flags & MBCF_F_LAST)) {
		recv_segment_done(c, f, MBCF_OP_SEND);
		return MBCF_RX_ACCEPT;
	}
	/* SEND_INV: the key goes with the message (verbs send with invalidate) */
	if (f->op == MBCF_OP_SEND_INV && c->ops->invalidate(c->env, f->rkey)) {
		if (!c->cfg.uc)
			recv_fail(c, f->op, MBCF_WC_REM_INV_REQ_ERR, c->rx_off);
		return MBCF_ST_REMOTE_INVALID_REQUEST;
	}
	recv_segment_done(c, f, MBCF_OP_SEND);
	recv_complete(c, f->op, MBCF_WC_SUCCESS, c->rx_off, f);
	return MBCF_RX_ACCEPT;
}

static int recv_read_req(struct mbcf_conn *c, const struct mbcf_frame *f)
{
	struct mbcf_msg *m;
	int st;

	if (c->rx_msg)
		return MBCF_ST_REMOTE_INVALID_REQUEST;
	if (c->resp.tail - c->resp.head >= c->cfg.max_dest_rd_atomic)
		return MBCF_ST_REMOTE_INVALID_REQUEST;
	if (f->len) {
		st = c->ops->target_check_read(c->env, f->rkey, f->va, f->len);
		if (st)
			return st;
	}
	m = mbcf_send_respond(c, MBCF_OP_READ_RESP, f->psn, f->len);
	m->raddr = f->va;
	m->rkey = f->rkey;
	return MBCF_RX_ACCEPT;
}

static int recv_atomic(struct mbcf_conn *c, const struct mbcf_frame *f)
{
	struct mbcf_msg *m;
	u64 orig = 0;
	int st;

	if (c->rx_msg)
		return MBCF_ST_REMOTE_INVALID_REQUEST;
	if (c->resp.tail - c->resp.head >= c->cfg.max_dest_rd_atomic)
		return MBCF_ST_REMOTE_INVALID_REQUEST;
	if (f->va & 7)
		return MBCF_ST_REMOTE_INVALID_REQUEST;
	st = c->ops->target_atomic(c->env, f->op, f->rkey, f->va,
				   f->operand[0], f->operand[1], &orig);
	if (st)
		return st;
	/* the response descriptor is the duplicate cache: it keeps orig */
	m = mbcf_send_respond(c, MBCF_OP_ATOMIC_RESP, f->psn, 0);
	m->operand[0] = orig;
	return MBCF_RX_ACCEPT;
}

/* Requester side: data for our oldest outstanding read. */
static int recv_read_resp(struct mbcf_conn *c, const struct mbcf_frame *f)
{
	struct mbcf_msg *m = mbcf_send_pending_rd(c);
	const u8 *p;
	u32 k, n, off;
	bool last;

	if (!m || m->op != MBCF_OP_READ_REQ || f->req_psn != m->first_psn ||
	    f->offset != m->rcvd || f->paylen > m->len - m->rcvd)
		return MBCF_RX_DROP;
	last = f->offset + f->paylen == m->len;
	if (!(f->flags & MBCF_F_FIRST) != !!f->offset ||
	    !(f->flags & MBCF_F_LAST) != !last)
		return MBCF_RX_DROP;
	for (k = 0, off = f->offset; f->paylen && mbcf_frame_piece(f, k, &p, &n);
	     k++, off += n)
		if (c->ops->resp_data(c->env, m->cookie, off, p, n))
			return MBCF_RX_LOCAL_ERR;
	m->rcvd += f->paylen;
	if (last)
		m->flags |= MBCF_MSG_GOT_RESP;
	return MBCF_RX_ACCEPT;
}

static int recv_atomic_resp(struct mbcf_conn *c, const struct mbcf_frame *f)
{
	struct mbcf_msg *m = mbcf_send_pending_rd(c);
	u64 orig = f->operand[0];

	if (!m || m->op == MBCF_OP_READ_REQ || f->req_psn != m->first_psn)
		return MBCF_RX_DROP;
	/* host order, as the target's memory held it */
	if (c->ops->resp_data(c->env, m->cookie, 0, (const u8 *)&orig, 8))
		return MBCF_RX_LOCAL_ERR;
	m->flags |= MBCF_MSG_GOT_RESP;
	return MBCF_RX_ACCEPT;
}

/* A push's enum mbcf_fifo_status as the receiver acts on it (16.3). */
static int recv_fifo_verdict(int st, u32 flags)
{
	switch (st) {
	case MBCF_FIFO_OK:
		return MBCF_RX_ACCEPT;
	case MBCF_FIFO_FULL:
		return flags & MBCF_FIFO_FULL_ERROR ? MBCF_ST_REMOTE_OP_ERROR :
						      MBCF_RX_RNR;
	case MBCF_FIFO_BUSY:
		return MBCF_RX_RNR;
	case MBCF_FIFO_TOO_BIG:
		return MBCF_ST_REMOTE_INVALID_REQUEST;
	case MBCF_FIFO_BAD_KEY:
		return MBCF_ST_REMOTE_ACCESS_ERROR;
	default:	/* BAD_CTRL, FAULT */
		return MBCF_ST_REMOTE_OP_ERROR;
	}
}

/* FIFO_PUSH: one record, appended now or refused whole (16.3). */
static int recv_fifo_push(struct mbcf_conn *c, const struct mbcf_frame *f)
{
	struct mbcf_fifo fifo = { 0 };
	struct mbcf_iov one = { f->payload, f->paylen };
	int st = recv_segment(c, f, MBCF_OP_FIFO_PUSH);

	if (st)
		return st;
	if (!c->ops->fifo_get)
		return MBCF_ST_REMOTE_ACCESS_ERROR;
	st = c->ops->fifo_get(c->env, f->rkey, &fifo);
	if (st == MBCF_FIFO_OK) {
		st = mbcf_fifo_push(&fifo, c->cfg.local_qpn,
				    f->payload ? &one : f->iov,
				    f->payload ? 1 : f->niov);
		if (c->ops->fifo_put)
			c->ops->fifo_put(c->env, &fifo);
	} else {
		st = MBCF_FIFO_BAD_KEY;
	}
	return recv_fifo_verdict(st, fifo.flags);
}

typedef int (*recv_handler)(struct mbcf_conn *c, const struct mbcf_frame *f);

static const recv_handler recv_handlers[MBCF_OP_CONTROL_MIN] = {
	[MBCF_OP_WRITE]		= recv_write,
	[MBCF_OP_WRITE_IMM]	= recv_write,
	[MBCF_OP_READ_REQ]	= recv_read_req,
	[MBCF_OP_READ_RESP]	= recv_read_resp,
	[MBCF_OP_CMP_SWAP]	= recv_atomic,
	[MBCF_OP_FETCH_ADD]	= recv_atomic,
	[MBCF_OP_ATOMIC_RESP]	= recv_atomic_resp,
	[MBCF_OP_SEND]		= recv_send,
	[MBCF_OP_SEND_IMM]	= recv_send,
	[MBCF_OP_SEND_INV]	= recv_send,
	[MBCF_OP_FIFO_PUSH]	= recv_fifo_push,
};

/*
 * psn != rcv_nxt: a duplicate is re-acked; a gap is reported with LOST
 * (docs/protocol.md 5): once per gap and round (a frame of a newer round
 * means the resend of rcv_nxt was lost too), and again whenever the sender
 * asks for an answer (ACKREQ: our LOST may have been lost).  A frame after
 * the gap may still be placed early (core/early.c), the gap is reported all
 * the same.
 */
static void recv_unexpected(struct mbcf_conn *c, const struct mbcf_frame *f)
{
	u32 d;

	if (mbcf_seq_lt(f->psn, c->rcv_nxt)) {
		c->ctr.drop_duplicate++;
		if ((f->flags & MBCF_F_ACKREQ) || !c->dup_acked) {
			c->dup_acked = true;
			c->ack_due = true;
		}
		return;
	}
	d = (u32)mbcf_seq_diff(f->psn, c->rcv_nxt);
	if (mbcf_early_has(c, d))
		c->ctr.drop_duplicate++;	/* placed early already */
	else if (!mbcf_early_place(c, f, d))
		c->ctr.drop_out_of_seq++;
	if (c->stop_sent)
		return;
	if (!c->lost_sent || f->epoch != c->lost_epoch ||
	    (f->flags & MBCF_F_ACKREQ)) {
		c->lost_sent = true;
		c->lost_epoch = f->epoch;
		mbcf_send_control_lost(c, f->epoch, f->psn);
	}
}

/*
 * docs/protocol.md 6.2, a ping-pong: the last frame of a write or send
 * asked for its acknowledgement, and the messages before it that asked
 * were answered -- a frame of ours left within MBCF_ACK_LAZY_NS, carrying
 * ack_psn -- MBCF_PP_STREAK times in a row.  The application will answer
 * this one too: owe the ACK late, its answer pays it (no ACK frame each
 * way).  A message left unanswered that long ends the streak: a one-way
 * stream is acknowledged at once again after at most one late ACK.
 */
static bool recv_ack_lazy(struct mbcf_conn *c, const struct mbcf_frame *f,
			  u64 now)
{
	if (!(f->flags & MBCF_F_LAST) ||
	    (f->op != MBCF_OP_WRITE && f->op != MBCF_OP_WRITE_IMM &&
	     f->op != MBCF_OP_SEND && f->op != MBCF_OP_SEND_IMM &&
	     f->op != MBCF_OP_SEND_INV))
		return false;
	if (mbcf_pp_unanswered(c, now))
		c->pp_streak = 0;
	c->pp_rx_at = now;
	if (c->pp_streak < MBCF_PP_STREAK)
		return false;
	if (!c->ack_lazy_at)
		c->ack_lazy_at = now + MBCF_ACK_LAZY_NS;
	return true;
}

static void recv_accept(struct mbcf_conn *c, const struct mbcf_frame *f,
			u64 now)
{
	c->rcv_nxt = mbcf_seq_add(c->rcv_nxt, 1);
	if (c->early_n)
		mbcf_early_join(c);
	c->lost_sent = false;
	c->stop_sent = false;
	c->dup_acked = false;
	c->ctr.rx_accepted++;
	c->ctr.rx_bytes += f->paylen;
	if ((f->flags & MBCF_F_ACKREQ) && !c->cfg.uc) {
		if (!recv_ack_lazy(c, f, now))
			c->ack_due = true;
	} else if (!c->ack_lazy_at && (f->op == MBCF_OP_ATOMIC_RESP ||
		 (f->op == MBCF_OP_READ_RESP && (f->flags & MBCF_F_LAST))))
		/* a response unasked: our next frame acknowledges it, or
		 * an ACK does when none left a while later (6.2) */
		c->ack_lazy_at = now + MBCF_ACK_LAZY_NS;
	if (f->op == MBCF_OP_READ_RESP || f->op == MBCF_OP_ATOMIC_RESP) {
		/*
		 * Progress, like an acknowledgement: the peer carries out our
		 * requests in order.  Frames of ours after the read may wait
		 * unacknowledged meanwhile (the peer sends its responses
		 * before it rejects one of them, section 8.3); their
		 * timeouts still resend, but use up no retry.
		 */
		c->retry_left = c->cfg.retry_cnt;
		mbcf_send_complete(c);
	}
}

static void recv_sequenced(struct mbcf_conn *c, const struct mbcf_frame *f,
			   u64 now)
{
	recv_handler h = recv_handlers[f->op];
	int st;

	/* rejected rcv_nxt, NAK pending (section 8.3): nothing from it on */
	if (c->nak_drain && !mbcf_seq_lt(f->psn, c->rcv_nxt)) {
		c->ctr.drop_error_state++;
		return;
	}
	if (f->psn != c->rcv_nxt) {
		recv_unexpected(c, f);
		return;
	}
	/* the common case called directly (and inlined) */
	if (f->op == MBCF_OP_WRITE)
		st = recv_write(c, f);
	else
		st = h ? h(c, f) : MBCF_ST_REMOTE_INVALID_REQUEST;
	if (st == MBCF_RX_ACCEPT) {
		recv_accept(c, f, now);
	} else if (st == MBCF_RX_RNR) {
		/* every retry of psn gets its STOP: the last one may be lost */
		c->ctr.drop_stopped++;
		c->stop_sent = true;
		mbcf_send_control(c, MBCF_OP_STOP, 0);
	} else if (st == MBCF_RX_DROP) {
		c->ctr.drop_bad_resp++;
	} else if (st == MBCF_RX_LOCAL_ERR) {
		/*
		 * The read's or atomic's own buffer is gone (its MR was
		 * deregistered): the request fails now, with LOC_PROT_ERR, as
		 * in verbs -- not after the rest of a long response arrived
		 * for nothing.  The frame is not accepted; the rest of the
		 * response is dropped in ERROR (section 9).
		 */
		c->ctr.drop_local_err++;
		mbcf_conn_enter_error(c, true, mbcf_send_pending_rd(c)->first_psn,
				      MBCF_WC_LOC_PROT_ERR);
	} else {
		c->nak_status = (u8)st;
		c->nak_psn = c->rcv_nxt;
		c->ctr.remote_errors++;
		/*
		 * Requests before this one were carried out: their responses
		 * reach the requester before the NAK, as in verbs, where a
		 * read before a failed write completes successfully.  Until
		 * they are acknowledged we take nothing more (section 8.3).
		 */
		if (c->resp.head != c->resp.tail)
			c->nak_drain = true;
		else
			mbcf_recv_nak_now(c);
	}
}

/* NAK what we rejected and enter ERROR (section 8.3). */
void mbcf_recv_nak_now(struct mbcf_conn *c)
{
	c->nak_drain = false;
	/* what the peer acknowledged meanwhile completed; then the receive
	 * that failed with the rejected frame, ahead of the flushes */
	mbcf_send_complete(c);
	recv_fail_complete(c);
	mbcf_send_nak(c, c->nak_psn, c->nak_status);
	/* the error is the peer's: none of our own requests failed, they are
	 * flushed (section 8.2) */
	mbcf_conn_enter_error(c, false, 0, MBCF_WC_WR_FLUSH_ERR);
}

/* Does psn name the oldest read/atomic still waiting for its response? */
static bool recv_nak_names_pending_rd(struct mbcf_conn *c, u32 psn)
{
	struct mbcf_msg *m = mbcf_send_pending_rd(c);

	return m && m->first_psn == psn;
}

/*
 * docs/protocol.md 6.4: a control frame's ack_psn k is ours: not after
 * snd_max (never sent) nor more than MBCF_WINDOW_MAX before snd_una.  One
 * before snd_una is stale -- overtaken on the link by a later frame that
 * acknowledged more -- and acts on nothing; further back it is no frame of
 * this connection's.
 */
static bool recv_ack_in_state(const struct mbcf_conn *c, u32 k)
{
	return mbcf_seq_le(k, c->snd_max) &&
	       mbcf_seq_diff(k, c->snd_una) >= -(s32)MBCF_WINDOW_MAX;
}

/*
 * docs/protocol.md 6.4: every field of a control frame against our own
 * state, before anything is taken from it.  psn is the peer's snd_max: at
 * most MBCF_WINDOW_MAX after our rcv_nxt (its frames in flight never
 * exceed its window), and as far before it at most (a control frame
 * overtaken by the peer's later frames).  ack_psn: recv_ack_in_state(),
 * or, on a NAK, the read whose response we wait on next (8.3).  A LOST's
 * round, seen and map: mbcf_send_lost_ok().
 */
static bool recv_control_ok(struct mbcf_conn *c, const struct mbcf_frame *f)
{
	s32 ahead = mbcf_seq_diff(f->psn, c->rcv_nxt);

	if (ahead < -(s32)MBCF_WINDOW_MAX || ahead > (s32)MBCF_WINDOW_MAX)
		return false;
	if (!recv_ack_in_state(c, f->ack_psn) &&
	    !(f->op == MBCF_OP_ACK && f->status &&
	      recv_nak_names_pending_rd(c, f->ack_psn)))
		return false;
	return f->op != MBCF_OP_LOST || mbcf_send_lost_ok(c, f);
}

static void recv_control(struct mbcf_conn *c, const struct mbcf_frame *f,
			 u64 now)
{
	/* a probe from a requester waiting for our responses (section 7.5) */
	if (f->flags & MBCF_F_ACKREQ)
		c->ack_due = true;
	switch (f->op) {
	case MBCF_OP_ACK:
		if (!f->status) {
			c->ctr.acks_rx++;
			break;
		}
		/*
		 * A NAK ends the connection only when it names a psn we are
		 * waiting on (section 8.3): the one to be acknowledged, or
		 * the read or atomic whose response is next to come (its
		 * responder could not build the response); a stale or
		 * made-up one is dropped.
		 */
		if ((f->ack_psn != c->snd_una || c->snd_una == c->snd_max) &&
		    !recv_nak_names_pending_rd(c, f->ack_psn)) {
			c->ctr.drop_bad_ack++;
			break;
		}
		c->ctr.naks_rx++;
		mbcf_conn_enter_error(c, true, f->ack_psn,
				      mbcf_conn_wc_from_status(f->status));
		break;
	case MBCF_OP_LOST:
		c->ctr.lost_rx++;
		mbcf_send_lost(c, f->ack_psn, f->epoch, f->seen, f->placed);
		break;
	case MBCF_OP_STOP:
		c->ctr.stop_rx++;
		mbcf_send_stop(c, f->ack_psn, now);
		break;
	case MBCF_OP_GO:
		c->ctr.go_rx++;
		mbcf_send_go(c, f->ack_psn, now);
		break;
	default:
		break;
	}
}

/*
 * UC (docs/protocol.md 10): nothing is acknowledged or retransmitted.  A
 * frame after a gap means frames were lost: the message they belonged to
 * is lost with them (the receive it claimed is kept for the next message),
 * and frames are dropped up to the next FIRST.  A message the responder
 * cannot take (no receive, a bad key, too long) is dropped whole, silently.
 */
static void recv_uc_drop_msg(struct mbcf_conn *c)
{
	c->uc_skip = true;
	c->rx_msg = 0;
	c->rx_off = 0;
}

/*
 * UC (10): a frame at most MBCF_UC_REACH - 1 psns after rcv_nxt is taken,
 * whatever was lost before it; one further ahead only if it acknowledges
 * our own stream as it stood before the frame (its ack_psn in snd_max -
 * MBCF_UC_REACH .. snd_max: the peer's rcv_nxt, our start settled before
 * it), which a blind spoofer cannot guess.  So a
 * spoofed frame must guess the psn within MBCF_UC_REACH (not 2^23), and an
 * honest stream that lost more than that in a row still resynchronises.
 */
static bool recv_uc_in_reach(const struct mbcf_conn *c,
			     const struct mbcf_frame *f)
{
	u32 from = mbcf_seq_add(c->snd_max, MBCF_PSN_MASK + 1 - MBCF_UC_REACH);

	if ((u32)mbcf_seq_diff(f->psn, c->rcv_nxt) < MBCF_UC_REACH)
		return true;
	return c->rx_snd_settled &&
	       mbcf_seq_in(f->ack_psn, from, MBCF_UC_REACH + 1);
}

static void recv_uc(struct mbcf_conn *c, const struct mbcf_frame *f)
{
	recv_handler h = recv_handlers[f->op];
	int st;

	if (mbcf_seq_lt(f->psn, c->rcv_nxt)) {
		c->ctr.drop_duplicate++;	/* reordered: already past it */
		return;
	}
	if (!recv_uc_in_reach(c, f)) {
		c->ctr.drop_out_of_seq++;	/* changes nothing */
		return;
	}
	if (f->psn != c->rcv_nxt)
		recv_uc_drop_msg(c);		/* frames were lost */
	c->rcv_nxt = mbcf_seq_add(f->psn, 1);
	if (c->uc_skip && !(f->flags & MBCF_F_FIRST)) {
		c->ctr.drop_out_of_seq++;
		return;
	}
	c->uc_skip = false;
	st = h ? h(c, f) : MBCF_ST_REMOTE_INVALID_REQUEST;
	if (st == MBCF_RX_ACCEPT) {
		c->ctr.rx_accepted++;
		c->ctr.rx_bytes += f->paylen;
		return;
	}
	if (st == MBCF_RX_RNR)
		c->ctr.drop_stopped++;
	else
		c->ctr.remote_errors++;
	recv_uc_drop_msg(c);
}

/*
 * We abandoned our responses when a read could not be answered: the psn
 * the peer waits on, as its ack_psn (how far it has our stream) shows it:
 * the request of the first response it lacks a frame of, or, lacking
 * none, rcv_nxt, the first request we never took (section 8.3).
 */
static u32 recv_nak_read_psn(const struct mbcf_conn *c, u32 ack_psn)
{
	const struct mbcf_msg *m;
	u32 i;

	for (i = c->nak_rhead; i != c->nak_rend; i++) {
		m = mbcf_msgq_at(&c->resp, i);
		if (i - c->nak_rhead >= c->nak_rnext - c->nak_rhead ||
		    mbcf_seq_diff(ack_psn, m->first_psn) < (s32)m->nframes)
			return m->req_psn;
	}
	return c->rcv_nxt;
}

/*
 * After an error we execute nothing; our NAK is repeated to the peer's
 * retries (section 8.3): of the frame we rejected (it stays at rcv_nxt)
 * and of an earlier one that asks (a timeout resends only the oldest
 * frame the peer has no acknowledgement for, 7.1: its ACK was lost); or,
 * when we could not answer a read we had accepted, to any frame asking
 * for an acknowledgement (a retransmission burst, a probe for the
 * response) and to a retransmission of rcv_nxt, naming what the peer
 * still waits on.
 */
static void recv_in_error(struct mbcf_conn *c, const struct mbcf_frame *f)
{
	bool seq = mbcf_wire_op_sequenced(f->op);

	c->ctr.drop_error_state++;
	if (c->state != MBCF_CONN_ERROR || !c->nak_status)
		return;
	if (!c->nak_read) {
		if (seq && (f->psn == c->rcv_nxt ||
			    (mbcf_seq_lt(f->psn, c->rcv_nxt) &&
			     (f->flags & MBCF_F_ACKREQ))))
			mbcf_send_nak(c, c->nak_psn, c->nak_status);
		return;
	}
	if ((seq && f->psn == c->rcv_nxt) || (f->flags & MBCF_F_ACKREQ))
		mbcf_send_nak(c, recv_nak_read_psn(c, f->ack_psn), c->nak_status);
}

/* Exactly one verdict counter per frame (include/mbcf/counters.h). */
void mbcf_recv_frame(struct mbcf_conn *c, const struct mbcf_frame *f, u64 now)
{
	if (f->dst_qpn != c->cfg.local_qpn || f->src_qpn != c->cfg.remote_qpn) {
		c->ctr.drop_wrong_qp++;
		return;
	}
	if (c->state != MBCF_CONN_RTS) {
		recv_in_error(c, f);
		return;
	}
	if (c->cfg.uc) {
		/* no acknowledgements either way: control frames are moot */
		if (mbcf_wire_op_sequenced(f->op))
			recv_uc(c, f);
		else
			c->ctr.drop_bad_ack++;
		return;
	}
	/* a control frame no honest peer could send changes nothing */
	if (!mbcf_wire_op_sequenced(f->op) && !recv_control_ok(c, f)) {
		c->ctr.drop_bad_ack++;
		return;
	}
	/* most frames a responder takes in acknowledge nothing new: no call */
	if (mbcf_seq_diff(f->ack_psn, c->snd_una) > 0) {
		if (!mbcf_send_ack(c, f->ack_psn, now)) {
			c->ctr.drop_bad_ack++;
			return;
		}
		/* it completed a request that failed locally */
		if (c->state != MBCF_CONN_RTS) {
			c->ctr.drop_error_state++;
			return;
		}
	}
	if (c->rd_out)
		mbcf_send_alive(c, now);
	if (mbcf_wire_op_sequenced(f->op))
		recv_sequenced(c, f, now);
	else
		recv_control(c, f, now);
}

/* A receive was posted: lift our STOP. */
void mbcf_recv_posted(struct mbcf_conn *c)
{
	if (c->state != MBCF_CONN_RTS || !c->stop_sent)
		return;
	c->stop_sent = false;
	mbcf_send_control(c, MBCF_OP_GO, 0);
}

/* A receive claimed by a message that will never finish is flushed. */
void mbcf_recv_flush(struct mbcf_conn *c)
{
	recv_fail_complete(c);	/* failed: its own status, not a flush */
	if (c->rx_claimed)
		recv_complete(c, c->rx_msg ? c->rx_msg : MBCF_OP_SEND,
			      MBCF_WC_WR_FLUSH_ERR, c->rx_off, NULL);
	c->rx_msg = 0;
}
