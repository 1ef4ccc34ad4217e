// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Acknowledgement, loss and retransmission of our stream (the sender's
 * other half, beside send.c): the cumulative ack, the window, RTT and
 * timeout, go-back rounds and selective refill after LOST, STOP/GO, frames
 * the link refused, the tail probe.  snd_una advances here only (but for
 * UC, whose frames are done when sent) and snd_nxt goes back here only,
 * never before snd_una; frames leave through send.c alone.
 * docs/protocol.md sections 4.3, 4.5 and 6.3-7.
 */
#include "internal.h"

/*
 * docs/protocol.md 4.3: the window adapts to loss.  A plain go-back resends
 * everything after a lost frame, so such a loss costs about a window of
 * frames: a window tuned to the link turns 1 % random loss into ~50 %
 * retransmissions (a loss repaired selectively costs a frame and cuts
 * nothing: mbcf_send_lost).  A loss cuts it by a
 * quarter, once per episode (the frames in flight when it was cut), not
 * below a quarter of cfg.window; each quarter window's worth of frames
 * acknowledged after the episode grows it by one, up to cfg.window.  A
 * timeout always halves it.  At random loss p this settles near
 * sqrt(18/p) frames (halving and +1 per window: sqrt(2.7/p), which at
 * 0.1 % loss was half the window the link wanted).
 */
static void send_wnd_cut(struct mbcf_conn *c, u32 psn, bool timeout)
{
	u32 floor = MBCF_WINDOW_MIN, w;

	if (c->cfg.window_fixed)
		return;
	if (!timeout && c->wnd_cut_valid && mbcf_seq_lt(psn, c->wnd_cut_psn))
		return;
	/* A loss: by a quarter, not below a quarter of the configured window
	 * (random loss says nothing of the link's capacity; below that the
	 * idle link costs more than the frames a go-back saves).  A timeout:
	 * the ACK clock stopped, halved down to the minimum. */
	if (timeout) {
		w = c->wnd / 2;
	} else {
		w = c->wnd - c->wnd / 4;
		if (c->cfg.window / 4 > floor)
			floor = c->cfg.window / 4;
	}
	if (w < floor)
		w = floor;
	if (!timeout && w >= c->wnd)
		return;		/* at or below the floor already */
	c->wnd = w;
	c->wnd_acked = 0;
	c->wnd_cut_psn = c->snd_max;
	c->wnd_cut_valid = true;
	c->ctr.window_cuts++;
}

/* n more frames acknowledged, up to ack_psn. */
static void send_wnd_grow(struct mbcf_conn *c, u32 ack_psn, u32 n)
{
	if (c->wnd_cut_valid) {
		if (mbcf_seq_lt(ack_psn, c->wnd_cut_psn))
			return;		/* still recovering */
		c->wnd_cut_valid = false;	/* count what came after it */
		n = (u32)mbcf_seq_diff(ack_psn, c->wnd_cut_psn);
	}
	if (c->wnd >= c->cfg.window)
		return;
	c->wnd_acked += n;
	/* four per window acknowledged (wnd >= MBCF_WINDOW_MIN = 4) */
	while (c->wnd < c->cfg.window && c->wnd_acked >= c->wnd / 4) {
		c->wnd_acked -= c->wnd / 4;
		c->wnd++;
	}
}

/* RFC 6298's smoothing of one sample r into srtt and rttvar. */
static void rtt_fold(u64 *srtt, u64 *rttvar, u64 r)
{
	u64 d;

	if (!*srtt) {
		*srtt = r ? r : 1;
		*rttvar = r / 2;
		return;
	}
	d = *srtt > r ? *srtt - r : r - *srtt;
	*rttvar = *rttvar - *rttvar / 4 + d / 4;
	*srtt = *srtt - *srtt / 8 + r / 8;
	if (!*srtt)
		*srtt = 1;
}

/* srtt + 4 rttvar, never below the verbs timeout, at most rto_max */
static u64 rtt_rto(const struct mbcf_conn *c, u64 srtt, u64 rttvar)
{
	u64 rto = srtt + 4 * rttvar;

	if (rto < c->cfg.rto_ns)
		rto = c->cfg.rto_ns;
	if (rto > c->cfg.rto_max_ns)
		rto = c->cfg.rto_max_ns;
	return rto;
}

/*
 * docs/protocol.md 7.1: the timeout follows the measured round trip (RFC
 * 6298's smoothing), never below the verbs timeout, which InfiniBand
 * defines as a minimum.  What it measures is mostly queueing: a soft device
 * shares the host's transmit and receive queues (the netdev's, the peer's
 * backlog) among all its QPs, and with many QPs streaming, a window's
 * frames wait there longer than a short verbs timeout -- spurious timeouts,
 * each resending a window that was not lost and halving it (64 QPs: 3183
 * timeouts against 135 real losses, a quarter of the throughput).
 */
static void send_rtt_sample(struct mbcf_conn *c, u64 r, u64 now)
{
	struct mbcf_rtt_share *s = c->cfg.rtt_share;
	u64 srtt, rttvar;

	rtt_fold(&c->srtt, &c->rttvar, r);
	c->rto_base = rtt_rto(c, c->srtt, c->rttvar);
	c->rto_cur = c->rto_base;
	c->rto_backoff = false;
	if (!s)
		return;
	srtt = mbcf_read_once(s->srtt);
	rttvar = mbcf_read_once(s->rttvar);
	rtt_fold(&srtt, &rttvar, r);
	mbcf_write_once(s->srtt, srtt);
	mbcf_write_once(s->rttvar, rttvar);
	mbcf_write_once(s->at, now);
}

/*
 * A connection times out after its own rto -- the verbs timeout until it
 * has measured a round trip, and what it measured may be from before a
 * burst -- but its frames wait in the same queues as those of the
 * device's other connections: when thousands of QPs post at once
 * (vm.scale), the last ones' frames sit behind ~28 k others at the peer
 * for longer than 67 ms, and such timeouts are spurious.  While the
 * device's shared round trip (7.1) gives an rto longer than this wait has
 * lasted, the deadline moves out, with no penalty: to the shared rto from
 * when the wait began, but at least twice as far from it as now -- the
 * queue grows while the QPs ahead measure it, and a deadline that chased
 * each new sample would fire every few ms.  A share with no sample within
 * its own rto says nothing: a burst long over must not slow the repair of
 * a real loss.  The wait ends, a timeout at last, by 2 x the shared rto;
 * after a timeout the connection's own backoff rules (Karn).
 */
static bool send_rto_from_share(struct mbcf_conn *c, u64 now, u64 due)
{
	const struct mbcf_rtt_share *s = c->cfg.rtt_share;
	u64 srtt, rttvar, at, rto, since, until;

	if (!s || c->rto_backoff)
		return false;
	srtt = mbcf_read_once(s->srtt);
	rttvar = mbcf_read_once(s->rttvar);
	at = mbcf_read_once(s->at);
	if (!srtt)
		return false;
	rto = rtt_rto(c, srtt, rttvar);
	if ((s64)(now - at) > (s64)rto)
		return false;
	since = c->rto_share_since ? c->rto_share_since : due - c->rto_cur;
	if ((s64)(now - since) >= (s64)rto)
		return false;
	until = since + rto;
	if ((s64)(until - (2 * now - since)) < 0)
		until = 2 * now - since;
	c->rto_share_since = since;
	c->rto_at = until;
	c->ctr.rto_shared++;
	return true;
}

/*
 * Cumulative acknowledgement: every psn before ack_psn was accepted.  Stale
 * acks are ignored; an ack of a psn we never sent makes the frame invalid,
 * except while nothing is outstanding: between RTR and RTS the peer may
 * already know the sq_psn we have not been given yet (verbs).
 */
bool mbcf_send_ack(struct mbcf_conn *c, u32 ack_psn, u64 now)
{
	if (mbcf_seq_diff(ack_psn, c->snd_una) <= 0)
		return true;
	if (mbcf_seq_diff(ack_psn, c->snd_max) > 0)
		return c->snd_una == c->snd_max;
	send_wnd_grow(c, ack_psn, (u32)mbcf_seq_diff(ack_psn, c->snd_una));
	if (c->rtt_timing && mbcf_seq_lt(c->rtt_psn, ack_psn)) {
		c->rtt_timing = false;
		send_rtt_sample(c, now - c->rtt_at, now);
	}
	c->snd_una = ack_psn;
	c->sel_bonus = 0;	/* the cumulative ack speaks for them now */
	c->rto_probe = false;
	c->rto_share_since = 0;
	if (mbcf_seq_lt(c->snd_nxt, ack_psn))
		c->snd_nxt = ack_psn;
	/* rule 1 counts frames in flight unasked: none now (6.1) */
	if (c->snd_una == c->snd_max)
		c->since_ackreq = 0;
	c->retry_left = c->cfg.retry_cnt;
	c->rnr_left = c->cfg.rnr_retry;
	c->hold_ns = 0;		/* the link takes our frames again */
	/*
	 * Karn: after a timeout only a sample ends the backoff.  Frames that
	 * were delayed, not lost, are acknowledged; resetting to a timeout
	 * that is too short would time out every window again, and the
	 * resends give no sample to learn from.
	 */
	if (!c->rto_backoff)
		c->rto_cur = c->rto_base;
	c->rto_at = mbcf_send_waiting(c) && !c->stopped ? now + c->rto_cur : 0;
	c->tlp_sent = false;
	mbcf_send_tlp_arm(c, now);
	mbcf_send_complete(c);
	return true;
}

/*
 * Only responses are owed and a frame came from the peer: it is alive, and
 * its own go-back-N delivers them.  Restart the wait with fresh retries.
 */
void mbcf_send_alive(struct mbcf_conn *c, u64 now)
{
	if (c->snd_una != c->snd_max || !c->rd_out || c->stopped)
		return;
	/* no timer re-arm per response frame: the timeout looks at alive_at */
	c->alive_at = now;
	c->retry_left = c->cfg.retry_cnt;
	c->rto_cur = c->rto_base;
	if (!c->rto_at)
		c->rto_at = now + c->rto_cur;
}

/* Send again from psn: a new round (4.5). */
static void send_new_round(struct mbcf_conn *c, u32 psn)
{
	c->snd_nxt = psn;
	c->tx_epoch++;
	/* Karn: the frame being timed may be sent again, and an ack after
	 * that cannot tell which copy it answers */
	c->rtt_timing = false;
}

/* Restart transmission at psn (go-back-N), plainly. */
static void send_goback(struct mbcf_conn *c, u32 psn)
{
	if (mbcf_seq_lt(psn, c->snd_una) || mbcf_seq_lt(c->snd_max, psn))
		return;
	send_new_round(c, psn);
	c->sel_skip = false;
	c->sel_bonus = 0;
}

/*
 * The distance from sel_base to psn, as a step of the refill walk: 0 when
 * psn is not after the gap, at most MBCF_EARLY_SPAN (past the span).
 */
static u32 send_sel_clip(const struct mbcf_conn *c, u32 psn)
{
	s32 d = mbcf_seq_diff(psn, c->sel_base);

	if (d <= 0)
		return 0;
	return (u32)d < MBCF_EARLY_SPAN ? (u32)d : MBCF_EARLY_SPAN;
}

static u32 send_min3(u32 a, u32 b, u32 c)
{
	u32 m = a < b ? a : b;

	return m < c ? m : c;
}

/*
 * A LOST of an earlier round told more of what the peer placed behind the
 * gap being repaired: up to seen now, from old_seen.  A frame in between
 * that the resends skipped on the prediction (mbcf_send_was_placed: a WRITE
 * frame whose run reaches back to the gap) but that the map does not hold
 * was lost too.  Go back to the first such frame now -- a new round,
 * selectively, over everything sent so far -- rather than a round trip
 * later, when the repaired gap's jump stops at it and its LOST comes
 * (7.2).  Each stretch of the map is looked at once (seen only grows), so
 * no frame is refilled twice for one map.  A LOST of the current round is
 * acted on as a go-back instead (its frame left after the resends: their
 * map is older).
 *
 * Runs in softirq under the QP lock: the walk covers only the span the map
 * describes, d = 1 .. MBCF_EARLY_SPAN - 1 after sel_base, so it takes at
 * most MBCF_EARLY_SPAN - 1 steps whatever seen says (a seen far
 * behind once walked ~2^23 psns).
 */
static void send_sel_refill(struct mbcf_conn *c, u32 old_seen)
{
	const struct mbcf_msg *m = NULL;
	u32 d = send_sel_clip(c, mbcf_seq_add(old_seen, 1));
	u32 end = send_min3(send_sel_clip(c, mbcf_seq_add(c->sel_seen, 1)),
			    send_sel_clip(c, c->snd_nxt),
			    send_sel_clip(c, c->sel_end));
	u32 q, i;

	for (d = d ? d : 1; d < end; d++) {
		c->ctr.sel_refill_steps++;
		q = mbcf_seq_add(c->sel_base, d);
		if (!m || !mbcf_seq_in(q, m->first_psn, m->nframes))
			m = mbcf_send_find(c, q);
		if (!m)
			return;
		if (c->sel_placed[d / 64] >> (d % 64) & 1)
			continue;
		i = (u32)mbcf_seq_diff(q, m->first_psn);
		if (!mbcf_send_placed_early(m, i, d))
			continue;	/* resent in this round: in flight */
		if (mbcf_seq_lt(c->sel_rewalk, c->snd_nxt))
			c->sel_rewalk = c->snd_nxt;
		c->sel_end = c->snd_max;
		send_new_round(c, q);	/* the selective state stays */
		c->ctr.selective_refills++;
		return;
	}
}

/* Was the frame after the lost one at psn placed early (7.2)? */
static bool send_next_placed(struct mbcf_conn *c, u32 psn, u32 was_nxt,
			     u32 seen, const u64 *map)
{
	u32 next = mbcf_seq_add(psn, 1);
	const struct mbcf_msg *m;

	if (!mbcf_seq_lt(next, was_nxt))
		return false;
	m = mbcf_send_find(c, next);
	return m && mbcf_send_was_placed(m,
					 (u32)mbcf_seq_diff(next, m->first_psn),
					 1, next, seen, map);
}

/* ack_psn names a psn of ours the peer may have: snd_una .. snd_max. */
bool mbcf_send_ack_ours(const struct mbcf_conn *c, u32 ack_psn)
{
	return mbcf_seq_in(ack_psn, c->snd_una,
			   (u32)mbcf_seq_diff(c->snd_max, c->snd_una) + 1);
}

/* No bit of map at d >= from (psns never sent). */
static bool send_map_below(const u64 *map, u32 from)
{
	u32 w;

	for (w = 0; w < MBCF_EARLY_SPAN / 64; w++) {
		if (from <= 64 * w) {
			if (map[w])
				return false;
		} else if (from < 64 * (w + 1) && map[w] >> (from - 64 * w)) {
			return false;
		}
	}
	return true;
}

/*
 * docs/protocol.md 6.4: a LOST's own fields against our stream, its
 * ack_psn k already found not after snd_max.  Its round is one we have
 * had (not after tx_epoch, 16-bit serial); seen, a frame we sent that found
 * the gap at k, lies in k + 1 .. snd_max - 1; its map places neither k
 * itself nor a psn we never sent.  Anything else no honest receiver sends.
 */
bool mbcf_send_lost_ok(const struct mbcf_conn *c, const struct mbcf_frame *f)
{
	u64 map[MBCF_EARLY_SPAN / 64];
	u16 back = (u16)(c->tx_epoch - f->epoch);

	if (back & 0x8000)
		return false;
	if (mbcf_seq_diff(f->seen, f->ack_psn) <= 0 ||
	    !mbcf_seq_lt(f->seen, c->snd_max))
		return false;
	mbcf_early_map_in(f->placed, map);
	return !(map[0] & 1) &&
	       send_map_below(map, (u32)mbcf_seq_diff(c->snd_max, f->ack_psn));
}

/*
 * LOST(psn, epoch): a frame we sent in round `epoch` found the gap at psn
 * (docs/protocol.md 4.5).  Acted on only if that frame left in the current
 * round: then everything from psn was sent again before it (frames leave
 * in order), so the resend of psn was lost too -- go back again now, not
 * after a timeout.  A LOST from an earlier round is stale: the go-back
 * since already resends psn.
 */
void mbcf_send_lost(struct mbcf_conn *c, u32 psn, u16 epoch, u32 seen,
		    const u8 *placed)
{
	u32 was_nxt = c->snd_nxt;
	u64 map[MBCF_EARLY_SPAN / 64];

	/* the peer's map, read once from the frame */
	mbcf_early_map_in(placed, map);
	/* any LOST of the gap being repaired says more of what the peer
	 * placed: facts, whatever the round */
	if (c->sel_skip && psn == c->sel_base && psn == c->snd_una &&
	    mbcf_seq_lt(c->sel_seen, seen)) {
		u32 old_seen = c->sel_seen;

		c->sel_seen = seen;
		memcpy(c->sel_placed, map, sizeof(map));
		if (epoch != c->tx_epoch && !c->stopped)
			send_sel_refill(c, old_seen);
	}
	if (psn != c->snd_una || psn == c->snd_max || c->stopped ||
	    epoch != c->tx_epoch)
		return;
	/* a loss repaired by resending little is no reason to send less
	 * (4.3): only one that costs a go-back cuts the window */
	if (!send_next_placed(c, psn, was_nxt, seen, map))
		send_wnd_cut(c, psn, false);
	send_goback(c, psn);
	/* selective repeat (7.2): what went out before is resent only if the
	 * peer did not place it early */
	if (mbcf_seq_diff(was_nxt, psn) > 1) {
		c->sel_skip = true;
		c->sel_counted = false;
		c->sel_base = psn;
		c->sel_end = was_nxt;
		c->sel_rewalk = psn;
		c->sel_seen = seen;
		memcpy(c->sel_placed, map, sizeof(map));
	}
}

/* STOP(psn): the peer could not accept psn (receiver not ready). */
void mbcf_send_stop(struct mbcf_conn *c, u32 psn, u64 now)
{
	if (psn != c->snd_una || psn == c->snd_max || c->stopped)
		return;
	if (c->cfg.rnr_retry != 7) {
		if (!c->rnr_left) {
			c->ctr.rnr_exceeded++;
			mbcf_conn_enter_error(c, true, psn,
					      MBCF_WC_RNR_RETRY_EXC_ERR);
			return;
		}
		c->rnr_left--;
	}
	/* the peer answered: timeouts so far were lost STOPs, not a dead link */
	c->retry_left = c->cfg.retry_cnt;
	c->rto_cur = c->rto_base;
	c->rto_probe = false;
	c->rto_share_since = 0;
	c->stopped = true;
	c->rnr_at = now + c->cfg.min_rnr_ns;
	c->rto_at = 0;
	c->tlp_at = 0;
	send_goback(c, psn);
}

static void send_resume(struct mbcf_conn *c, u64 now)
{
	c->stopped = false;
	c->rnr_at = 0;
	send_goback(c, c->snd_una);
	c->rto_at = now + c->rto_cur;
}

/* GO(psn): the peer can accept psn again. */
void mbcf_send_go(struct mbcf_conn *c, u32 psn, u64 now)
{
	if (c->stopped && psn == c->snd_una)
		send_resume(c, now);
}

/*
 * Pacing bytes of the frames psn..snd_nxt: the ones the clock counted in
 * this round (a frame skipped as placed early was not sent, not counted).
 */
static u64 send_counted_bytes(struct mbcf_conn *c, u32 psn)
{
	const struct mbcf_msg *m;
	u64 bytes = 0;
	u32 q, i;
	s32 d;

	for (q = psn; q != c->snd_nxt; q = mbcf_seq_add(q, 1)) {
		m = mbcf_send_find(c, q);
		if (!m)
			break;
		i = (u32)mbcf_seq_diff(q, m->first_psn);
		d = mbcf_seq_diff(q, c->sel_base);
		if (c->sel_skip && d > 0 && mbcf_seq_lt(q, c->sel_end) &&
		    mbcf_send_was_placed(m, i, (u32)d, q, c->sel_seen,
					 c->sel_placed))
			continue;
		bytes += mbcf_send_frame_bytes(c, m, i);
	}
	return bytes;
}

/*
 * docs/protocol.md 7.7: the link refused frame psn of round epoch after
 * xmit had taken it (a full receive queue at the peer's end of a veth, a
 * qdisc's limit), and nothing of our stream left after it.  Nothing behind
 * it arrived to report the gap with a LOST, so only the timeout would:
 * go back to it now.  Sending into the full queue at once would be refused
 * again, so the stream holds a while -- MBCF_HOLD_MIN_NS, doubled by every
 * refusal until progress, at most the retransmission timeout -- and the
 * window is halved as after a timeout: a full queue is congestion, and
 * what it says is certain.  When nothing older is in flight the deadline
 * restarts from the end of the hold (the frame has not left: nothing to
 * time out yet), and a hold as long as the timeout uses a retry as the
 * timeout would have: a link that refuses everything fails the connection
 * with RETRY_EXC_ERR after about as long as one that loses everything.
 * Acted on only for a frame of the current round still counted as sent:
 * an older round's was sent again by the go-back that ended it; one before
 * snd_una has arrived (an earlier copy); UC (snd_una follows snd_nxt)
 * never goes back.  A paced stream's clock gets the time of the frames
 * that never left back (they are sent again, and paid for then).
 */
void mbcf_send_refused(struct mbcf_conn *c, u32 psn, u16 epoch, u64 now)
{
	u64 cap = c->rto_cur > MBCF_HOLD_MIN_NS ? c->rto_cur : MBCF_HOLD_MIN_NS;

	c->ctr.tx_refused++;
	if (epoch != c->tx_epoch || c->stopped || mbcf_seq_lt(psn, c->snd_una) ||
	    !mbcf_seq_lt(psn, c->snd_nxt))
		return;
	if (c->hold_ns >= cap) {
		if (!c->retry_left) {
			c->ctr.retry_exceeded++;
			mbcf_conn_enter_error(c, true, psn, MBCF_WC_RETRY_EXC_ERR);
			return;
		}
		c->retry_left--;
	}
	send_wnd_cut(c, psn, true);
	/* psn and all after it never left: the resend is their only cost */
	if (c->pace.kbps)
		mbcf_pace_refund(&c->pace, send_counted_bytes(c, psn));
	send_goback(c, psn);
	c->hold_ns = c->hold_ns ? c->hold_ns * 2 : MBCF_HOLD_MIN_NS;
	if (c->hold_ns > cap)
		c->hold_ns = cap;
	c->hold_at = now + c->hold_ns;
	if (psn == c->snd_una)
		c->rto_at = c->hold_at + c->rto_cur;
}

/*
 * docs/protocol.md 7.6: the last frames of a burst, or their ACK, were
 * lost: nothing follows them to find the gap, and only the retransmission
 * timeout -- the verbs timeout at least, 67 ms for perftest -- would repair
 * it.  Resend the last frame sent, asking for an answer: the receiver
 * accepts it (only it was missing), or re-acknowledges it (the ACK was
 * lost), or answers LOST for an earlier gap (it asks), which sends us back
 * at once.  Once per progress; no retry is used; nothing else changes.
 */
static void send_tail_probe(struct mbcf_conn *c)
{
	u32 psn = mbcf_seq_add(c->snd_max, MBCF_PSN_MASK);	/* snd_max - 1 */
	struct mbcf_msg *m;
	int err;

	if (c->tlp_sent || c->stopped || c->tx_busy || c->snd_una == c->snd_max ||
	    c->snd_nxt != c->snd_max)
		return;
	m = mbcf_send_find(c, psn);
	if (!m)
		return;
	c->tlp_sent = true;
	err = mbcf_send_frame(c, m, (u32)mbcf_seq_diff(psn, m->first_psn),
			      MBCF_F_ACKREQ);
	if (err == MBCF_XMIT_FAULT) {
		mbcf_send_fault(c, m, psn);
		return;
	}
	if (err) {
		c->ctr.tx_busy++;	/* as good as lost: the timeout remains */
		return;
	}
	c->ctr.tx_frames++;
	c->ctr.retransmits++;
	c->ctr.tail_probes++;
	c->ctr.acks_req++;
	c->ack_due = false;	/* it carries ack_psn */
	c->ack_lazy_at = 0;
	c->tail_lazy = false;
	/* Karn: an ack of psn may now answer either copy */
	if (c->rtt_timing && c->rtt_psn == psn)
		c->rtt_timing = false;
}

/* The connection timer fired: RNR wait over, xmit retry, or retransmit. */
void mbcf_send_timeout(struct mbcf_conn *c, u64 now)
{
	u64 due;

	if (c->stopped) {
		if (c->rnr_at && now >= c->rnr_at)
			send_resume(c, now);
		return;
	}
	if (c->tlp_at && now >= c->tlp_at) {
		c->tlp_at = 0;
		send_tail_probe(c);
	}
	if (c->hold_at && now >= c->hold_at)
		c->hold_at = 0;		/* the push that follows resends */
	if (!c->rto_at || now < c->rto_at)
		return;
	if (c->tx_busy) {
		/* the environment never kicked us: try again, no penalty */
		c->tx_busy = false;
		c->rto_at = 0;
		return;
	}
	due = c->rto_at;
	c->rto_at = 0;
	if (!mbcf_send_waiting(c))
		return;
	/*
	 * Go-back-N already rewound to the oldest frame and the pacing clock
	 * still holds its resend: that frame has not left again, so there is
	 * nothing to time out yet.  Wait from when it may leave, no penalty.
	 */
	if (c->snd_nxt == c->snd_una && c->snd_una != c->snd_max &&
	    !mbcf_pace_ready(&c->pace, now)) {
		c->rto_at = c->pace.next + c->rto_cur;
		return;
	}
	if (c->snd_una == c->snd_max && now < c->alive_at + c->rto_cur) {
		c->rto_at = c->alive_at + c->rto_cur;	/* heard from it since */
		return;
	}
	if (send_rto_from_share(c, now, due))
		return;
	c->ctr.timeouts++;
	if (!c->retry_left) {
		c->ctr.retry_exceeded++;
		mbcf_conn_enter_error(c, false, 0, MBCF_WC_RETRY_EXC_ERR);
		return;
	}
	c->retry_left--;
	c->rto_cur = c->rto_cur * 2 > c->cfg.rto_max_ns ?
		     c->cfg.rto_max_ns : c->rto_cur * 2;
	c->rto_backoff = true;
	c->rto_at = now + c->rto_cur;
	if (c->snd_una == c->snd_max) {
		/* only a response is owed: is the peer still there? */
		mbcf_send_control_flags(c, MBCF_OP_ACK, 0, MBCF_F_ACKREQ,
					c->rcv_nxt, 0);
		return;
	}
	send_wnd_cut(c, c->snd_una, true);
	/*
	 * Resend one frame, not the window, until the peer answers (TCP's
	 * loss window after a timeout, RFC 5681).  What times out on a soft
	 * device is mostly frames still queued in the peer's backlog behind
	 * other QPs' (4096 QPs posting at once: seconds); resending every
	 * window put 8 copies of each in that queue and QPs ran out of
	 * retries behind their own copies.  A real loss pays one round trip
	 * more, after a timeout that cost far more than that.
	 */
	c->rto_probe = !c->cfg.window_fixed;
	send_goback(c, c->snd_una);
}
