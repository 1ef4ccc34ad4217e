// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Connection lifecycle and the public entry points.  Every entry point ends
 * in conn_settle(): push what the window allows, send an owed ACK, re-arm
 * the single timer.  docs/protocol.md sections 6 and 8.
 */
#include "internal.h"

static const char *const conn_state_names[] = {
	[MBCF_CONN_RESET] = "RESET",
	[MBCF_CONN_RTS] = "RTS",
	[MBCF_CONN_ERROR] = "ERROR",
};

const char *mbcf_conn_state_name(u8 state)
{
	return state <= MBCF_CONN_ERROR ? conn_state_names[state] : "?";
}

u8 mbcf_conn_wc_from_status(u8 status)
{
	switch (status) {
	case MBCF_ST_OK:
		return MBCF_WC_SUCCESS;
	case MBCF_ST_REMOTE_ACCESS_ERROR:
		return MBCF_WC_REM_ACCESS_ERR;
	case MBCF_ST_REMOTE_INVALID_REQUEST:
		return MBCF_WC_REM_INV_REQ_ERR;
	default:
		return MBCF_WC_REM_OP_ERR;
	}
}

/*
 * Send-ahead window from the link: one bandwidth x 200 us of frames.  Too
 * small starves fast links (MBCF/Linux reached 600 MB/s on 100GbE); too big
 * overruns slow ones, where every loss costs a go-back of the whole window
 * (the window adapts to loss below this ceiling, 4.3).  Never fewer than
 * MBCF_WINDOW_PIPE frames, though: what keeps a stream going is
 * acknowledgements in flight, and bytes per frame do not change what a
 * frame costs to send, place and acknowledge (the byte rule alone would
 * give a 10 Gbit/s link with 9000-byte frames 27 frames: two ACK requests
 * in flight; docs/performance.md).
 * GbE/1500: 128 frames, 10GbE/1500: 166, 100GbE/1500: 1666 (the paper's 100x).
 */
u32 mbcf_conn_window_from_link(u32 link_mbps, u32 mtu)
{
	u32 frames;

	if (!mtu)
		mtu = 1500;
	if (!link_mbps)
		link_mbps = 1000;
	if (link_mbps > 1000000)
		link_mbps = 1000000;
	/* Mbit/s * 200 us / 8 = bytes in flight */
	frames = link_mbps * 25 / mtu;
	if (frames < MBCF_WINDOW_PIPE)
		frames = MBCF_WINDOW_PIPE;
	return frames > 4096 ? 4096 : frames;
}

static bool conn_pow2(u32 n)
{
	return n && !(n & (n - 1));
}

static int conn_check(const struct mbcf_conn_cfg *cfg, const struct mbcf_ops *ops,
		      u32 req_size, u32 resp_size)
{
	if (!ops->xmit || !ops->target_write || !ops->target_check_write ||
	    !ops->target_check_read ||
	    !ops->target_atomic || !ops->recv_claim || !ops->recv_write ||
	    !ops->resp_data || !ops->complete || !ops->timer || !ops->error ||
	    !ops->local || !ops->invalidate)
		return MBCF_POST_INVAL;
	if (!conn_pow2(req_size) || !conn_pow2(resp_size) ||
	    req_size > (1u << 20) || resp_size > (1u << 20))
		return MBCF_POST_INVAL;
	if (cfg->mtu < MBCF_MTU_MIN || cfg->retry_cnt > 7 || cfg->rnr_retry > 7)
		return MBCF_POST_INVAL;
	if (!cfg->max_rd_atomic || !cfg->max_dest_rd_atomic ||
	    cfg->max_dest_rd_atomic > resp_size || !cfg->rto_ns)
		return MBCF_POST_INVAL;
	return MBCF_POST_OK;
}

int mbcf_conn_init(struct mbcf_conn *c, const struct mbcf_conn_cfg *cfg,
		   const struct mbcf_ops *ops, void *env,
		   struct mbcf_msg *req_ring, u32 req_size,
		   struct mbcf_msg *resp_ring, u32 resp_size)
{
	int err = conn_check(cfg, ops, req_size, resp_size);

	if (err)
		return err;
	memset(c, 0, sizeof(*c));
	c->ops = ops;
	c->env = env;
	c->cfg = *cfg;
	c->cfg.local_qpn &= MBCF_QPN_MASK;
	c->cfg.remote_qpn &= MBCF_QPN_MASK;
	if (c->cfg.mtu > MBCF_MAX_PAYLEN)
		c->cfg.mtu = MBCF_MAX_PAYLEN;
	if (!c->cfg.window)
		c->cfg.window = mbcf_conn_window_from_link(cfg->link_mbps,
							   c->cfg.mtu);
	if (c->cfg.window < MBCF_WINDOW_MIN)
		c->cfg.window = MBCF_WINDOW_MIN;
	if (c->cfg.window > MBCF_WINDOW_MAX)
		c->cfg.window = MBCF_WINDOW_MAX;
	if (!c->cfg.rto_max_ns || c->cfg.rto_max_ns < c->cfg.rto_ns)
		c->cfg.rto_max_ns = c->cfg.rto_ns * 64;
	c->req.m = req_ring;
	c->req.mask = req_size - 1;
	c->resp.m = resp_ring;
	c->resp.mask = resp_size - 1;
	c->snd_una = c->snd_nxt = c->snd_max = cfg->sq_psn & MBCF_PSN_MASK;
	c->ackreq_next = c->snd_una;
	c->wnd = c->cfg.window;
	c->rcv_nxt = cfg->rq_psn & MBCF_PSN_MASK;
	c->retry_left = cfg->retry_cnt;
	c->rnr_left = cfg->rnr_retry;
	c->rto_cur = c->rto_base = cfg->rto_ns;
	c->state = MBCF_CONN_RTS;
	return MBCF_POST_OK;
}

/*
 * Verbs gives the send side (sq_psn, timeout, retry counts, max_rd_atomic)
 * only at RTS, after the receive side started at RTR (mbcf_conn_init).
 * Allowed while no work request has been posted.
 */
int mbcf_conn_set_send(struct mbcf_conn *c, const struct mbcf_conn_cfg *cfg)
{
	if (c->state != MBCF_CONN_RTS || c->req.tail != c->req.head)
		return MBCF_POST_STATE;
	if (cfg->retry_cnt > 7 || cfg->rnr_retry > 7 || !cfg->max_rd_atomic ||
	    !cfg->rto_ns)
		return MBCF_POST_INVAL;
	/* Already fixed by the peer's first frame: that is what it expects. */
	if (!c->snd_fixed) {
		c->snd_fixed = true;
		c->cfg.sq_psn = cfg->sq_psn & MBCF_PSN_MASK;
		c->snd_una = c->snd_nxt = c->snd_max = c->cfg.sq_psn;
		c->ackreq_next = c->snd_una;
	}
	c->cfg.retry_cnt = cfg->retry_cnt;
	c->cfg.rnr_retry = cfg->rnr_retry;
	c->cfg.max_rd_atomic = cfg->max_rd_atomic;
	c->cfg.rto_ns = cfg->rto_ns;
	c->cfg.rto_max_ns = cfg->rto_max_ns >= cfg->rto_ns ? cfg->rto_max_ns :
							     cfg->rto_ns * 64;
	c->cfg.min_rnr_ns = cfg->min_rnr_ns;
	c->retry_left = cfg->retry_cnt;
	c->rnr_left = cfg->rnr_retry;
	c->rto_cur = c->rto_base = cfg->rto_ns;
	c->srtt = c->rttvar = 0;
	c->rtt_timing = c->rto_backoff = c->rto_probe = false;
	c->rto_share_since = 0;
	return MBCF_POST_OK;
}

static void conn_timer_update(struct mbcf_conn *c)
{
	u64 at = 0;

	if (c->state == MBCF_CONN_RTS)
		at = c->stopped ? c->rnr_at : c->rto_at;
	/* the tail probe comes before the retransmission timeout */
	if (c->state == MBCF_CONN_RTS && !c->stopped && c->tlp_at &&
	    (!at || c->tlp_at < at))
		at = c->tlp_at;
	/* the end of a hold after a refusal (7.7) */
	if (c->state == MBCF_CONN_RTS && !c->stopped && c->hold_at &&
	    (!at || c->hold_at < at))
		at = c->hold_at;
	if (c->state == MBCF_CONN_RTS && c->ack_lazy_at &&
	    (!at || c->ack_lazy_at < at))
		at = c->ack_lazy_at;
	if (at != c->timer_at) {
		c->timer_at = at;
		c->ops->timer(c->env, at);
	}
}

/*
 * What conn_settle() would find to do, nothing: a connected responder
 * between frames of the peer's stream -- nothing to send, owed or
 * awaited, no deadline armed or due.  Checked first, as every received
 * frame settles the connection (bench/core).
 */
static bool conn_nothing_due(const struct mbcf_conn *c)
{
	return c->state == MBCF_CONN_RTS && !c->ack_due && !c->ack_lazy_at &&
	       !c->tx_unflushed &&
	       !c->tx_busy && !c->stopped && !c->cqe_lost && !c->nak_drain &&
	       !c->rto_at && !c->tlp_at && !c->hold_at && !c->timer_at &&
	       !mbcf_send_waiting(c) && mbcf_send_idle(c);
}

static void conn_settle(struct mbcf_conn *c, u64 now)
{
	if (conn_nothing_due(c)) {
		c->pace_wait = false;
		return;
	}
	/* a completion that could not be delivered: nothing is reliable now */
	if (c->cqe_lost && c->state == MBCF_CONN_RTS)
		mbcf_conn_enter_error(c, false, 0, MBCF_WC_WR_FLUSH_ERR);
	/* the responses before the request we rejected are acknowledged */
	if (c->nak_drain && c->state == MBCF_CONN_RTS &&
	    c->resp.head == c->resp.tail)
		mbcf_recv_nak_now(c);
	if (c->state == MBCF_CONN_RTS) {
		mbcf_send_push(c, now);
		/*
		 * A late ACK waits for our answer; when our own frames wait
		 * for the window instead, the peer may be waiting for this
		 * ACK to open its own (both streaming): send it now.
		 */
		if (c->ack_lazy_at && c->pp_rx_at && !mbcf_send_idle(c))
			c->ack_due = true;
		if (c->ack_due && !c->ack_hold && !c->cfg.uc)
			mbcf_send_control(c, MBCF_OP_ACK, 0);
	}
	if (c->tx_unflushed) {
		c->tx_unflushed = false;
		if (c->ops->xmit_flush)
			c->ops->xmit_flush(c->env);
	}
	conn_timer_update(c);
}

/* Fatal for the connection (verbs: QP to error); see send_flush for order. */
void mbcf_conn_enter_error(struct mbcf_conn *c, bool psn_valid, u32 psn,
			   u8 wc_status)
{
	if (c->state != MBCF_CONN_RTS)
		return;
	c->state = MBCF_CONN_ERROR;
	mbcf_send_flush(c, psn_valid, psn, wc_status);
	mbcf_recv_flush(c);
	c->ack_due = false;
	c->ack_lazy_at = 0;
	c->ops->error(c->env, wc_status);
}

/*
 * Queue one work request without sending: a post_send of a list of work
 * requests enqueues each and kicks once, so the burst ends (and asks for
 * its acknowledgement) at the end of the list, not after every request.
 */
int mbcf_conn_enqueue(struct mbcf_conn *c, const struct mbcf_wr *wr)
{
	if (c->state != MBCF_CONN_RTS)
		return MBCF_POST_STATE;
	return mbcf_send_enqueue(c, wr);
}

/* Queue one work request and send what the window allows. */
int mbcf_conn_post(struct mbcf_conn *c, const struct mbcf_wr *wr, u64 now)
{
	int err = mbcf_conn_enqueue(c, wr);

	if (!err)
		conn_settle(c, now);
	return err;
}

/*
 * Where our stream starts is what the peer expects: its rq_psn, which it
 * reports in the ack_psn of every frame.  A verbs responder may stay in
 * RTR (no sq_psn given) and still answer reads and atomics on our stream,
 * so until mbcf_conn_set_send() fixed the start, the first frame from the
 * peer fixes it (docs/protocol.md, "stream start").
 */
static void conn_adopt_send_start(struct mbcf_conn *c, const struct mbcf_frame *f)
{
	if (c->snd_fixed || c->state != MBCF_CONN_RTS ||
	    f->dst_qpn != c->cfg.local_qpn || f->src_qpn != c->cfg.remote_qpn)
		return;
	c->snd_fixed = true;
	if (c->snd_max != c->snd_una || c->req.tail != c->req.head ||
	    c->resp.tail != c->resp.head)
		return;		/* cannot happen before the start is fixed */
	c->snd_una = c->snd_nxt = c->snd_max = f->ack_psn & MBCF_PSN_MASK;
	c->ackreq_next = c->snd_una;
	c->cfg.sq_psn = c->snd_max;
}

/* One parsed frame whose dst_qpn selected this connection. */
void mbcf_conn_rx(struct mbcf_conn *c, const struct mbcf_frame *f, u64 now)
{
	/* a datagram is for a UD QP (mbcf_dgram_rx): a connection takes none,
	 * and its ack_psn (0) must acknowledge or fix nothing here */
	if (f->op == MBCF_OP_DGRAM) {
		c->ctr.drop_wrong_qp++;
		return;
	}
	/* before the frame moves snd_una or settles the start (5.1) */
	c->rx_snd_settled = c->snd_fixed;
	c->rx_ack_ours = c->snd_fixed && mbcf_send_ack_ours(c, f->ack_psn);
	conn_adopt_send_start(c, f);
	mbcf_recv_frame(c, f, now);
	conn_settle(c, now);
}

bool mbcf_conn_rx_hold_ack(struct mbcf_conn *c, const struct mbcf_frame *f,
			   u64 now)
{
	c->ack_hold = true;
	mbcf_conn_rx(c, f, now);
	c->ack_hold = false;
	return c->ack_due && c->state == MBCF_CONN_RTS;
}

/* The environment's timer fired (early or spurious calls are harmless). */
void mbcf_conn_timeout(struct mbcf_conn *c, u64 now)
{
	c->timer_at = 0;
	/* responses accepted unasked and no frame of ours since: ACK them
	 * (ack_lazy_at is set only in RTS, cleared on leaving it) */
	if (c->ack_lazy_at && now >= c->ack_lazy_at) {
		c->ack_lazy_at = 0;
		c->ack_due = true;
	}
	/* a message that asked went unanswered: no ping-pong (6.2) */
	if (mbcf_pp_unanswered(c, now)) {
		c->pp_rx_at = 0;
		c->pp_streak = 0;
	}
	if (c->state == MBCF_CONN_RTS)
		mbcf_send_timeout(c, now);
	conn_settle(c, now);
}

/* A receive was posted; if we had said STOP, say GO. */
void mbcf_conn_recv_posted(struct mbcf_conn *c, u64 now)
{
	mbcf_recv_posted(c);
	conn_settle(c, now);
}

/* xmit can take frames again after returning busy. */
void mbcf_conn_set_rate(struct mbcf_conn *c, u32 kbps, u64 now)
{
	if (kbps && !c->pace.kbps)
		c->ackreq_at = now;
	mbcf_pace_set(&c->pace, kbps, now);
	if (c->state == MBCF_CONN_RTS)
		conn_settle(c, now);
}

void mbcf_conn_set_pace_slack(struct mbcf_conn *c, u64 slack_ns)
{
	c->pace.slack_ns = slack_ns;
}

bool mbcf_conn_pace_due(const struct mbcf_conn *c, u64 *due)
{
	if (c->state != MBCF_CONN_RTS || !c->pace_wait || !c->pace.kbps)
		return false;
	*due = c->pace.next;
	return true;
}

void mbcf_conn_kick(struct mbcf_conn *c, u64 now)
{
	c->tx_busy = false;
	conn_settle(c, now);
}

void mbcf_conn_refused(struct mbcf_conn *c, u32 psn, u16 epoch, u64 now)
{
	if (c->state == MBCF_CONN_RTS)
		mbcf_send_refused(c, psn, epoch, now);
	conn_settle(c, now);
}

/*
 * Reset/destroy: complete everything still outstanding with FLUSH, cancel
 * the timer.  The conn may be re-initialised afterwards.
 */
void mbcf_conn_flush(struct mbcf_conn *c)
{
	/*
	 * Data already placed is acknowledged first: an ACK held by
	 * mbcf_conn_rx_hold_ack() must not die with a QP the application
	 * destroys as soon as it sees the receive completion.
	 */
	if (c->state == MBCF_CONN_RTS && (c->ack_due || c->ack_lazy_at))
		mbcf_send_control(c, MBCF_OP_ACK, 0);
	c->ack_lazy_at = 0;
	if (c->state == MBCF_CONN_RTS) {
		c->state = MBCF_CONN_ERROR;
		mbcf_send_flush(c, false, 0, MBCF_WC_WR_FLUSH_ERR);
		mbcf_recv_flush(c);
	}
	c->state = MBCF_CONN_RESET;
	conn_timer_update(c);
}

/* Requests posted and not yet completed. */
u32 mbcf_conn_outstanding(const struct mbcf_conn *c)
{
	return c->req.tail - c->req.head;
}

void mbcf_conn_snapshot(const struct mbcf_conn *c, struct mbcf_conn_snap *s)
{
	*s = (struct mbcf_conn_snap){
		.wnd = c->wnd, .wnd_max = c->cfg.window,
		.srtt = c->srtt, .rttvar = c->rttvar, .rto = c->rto_cur,
		.tx_frames = c->ctr.tx_frames, .retransmits = c->ctr.retransmits,
		.timeouts = c->ctr.timeouts, .tail_probes = c->ctr.tail_probes,
		.window_cuts = c->ctr.window_cuts,
		.selective_repeats = c->ctr.selective_repeats,
	};
}

bool mbcf_conn_progress_due(const struct mbcf_conn *c)
{
	if (c->req.tail == c->req.head)
		return false;
	/* a frame that asked is unacknowledged: its ACK (or a probe) comes */
	if (mbcf_seq_lt(c->snd_una, c->ackreq_next))
		return true;
	/* responses due, requests waiting for the window (whose frames
	 * asked: 6.1 rule 2), for GO, or for the transmit queue */
	return c->state != MBCF_CONN_RTS || c->rd_out || c->stopped ||
	       c->tx_busy || c->req.next != c->req.tail || c->cur;
}
