// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * The pacing clock of one flow (PSPacer's byte clock, docs/design.md
 * "Pacing"): when the flow's next frame may leave, in nanoseconds.  After a
 * frame of s bytes at r kbit/s the clock advances by s * 8e6 / r ns -- the
 * frame's own time on a link of rate r, i.e. on a faster link the frame
 * plus the gap behind it.  The division's remainder is carried, so over any
 * stream the clock is exact to the nanosecond (no drift, whatever the frame
 * sizes).  Times are serial numbers mod 2^64: they may wrap.
 *
 * Pure arithmetic: the environment owns the clock (`now`) and the timer
 * that comes back when a flow is due.
 */
#include "internal.h"

#define PACE_NS_PER_KBIT_BYTE	8000000ull	/* 8 bits * 1e9 ns / 1000 */

/* a >= b in serial time (a is not before b) */
static bool pace_after_eq(u64 a, u64 b)
{
	return (s64)(a - b) >= 0;
}

u64 mbcf_pace_ns(u32 kbps, u32 bytes, u32 *rem)
{
	u32 r = rem ? *rem : 0;
	u64 ns;

	if (!kbps)
		return 0;
	if (r >= kbps)
		r = 0;	/* not one of ours */
	/* <= (2^32 - 1) * 8e6 + 2^32: no overflow */
	ns = mbcf_div_u64_rem((u64)bytes * PACE_NS_PER_KBIT_BYTE + r, kbps, &r);
	if (rem)
		*rem = r;
	return ns;
}

/* a * b / c, saturating; exact while a * b fits 64 bits. */
static u64 pace_muldiv(u64 a, u32 b, u32 c)
{
	u32 r;
	u64 q = mbcf_div_u64_rem(a, c, &r);

	if (b && q > ~0ull / b)
		return ~0ull;
	return q * b + mbcf_div_u64_rem((u64)r * b, c, &r);
}

void mbcf_pace_set(struct mbcf_pace *p, u32 kbps, u64 now)
{
	if (kbps == p->kbps)
		return;
	if (!kbps || !p->kbps || !p->primed) {
		/* unpaced, or paced afresh: the first frame leaves at once */
		p->primed = false;
		p->held = false;
	} else if (!pace_after_eq(now, p->next)) {
		/*
		 * A frame sent at the old rate is still "on the wire": what
		 * remains of its time, at the new rate (a flow slowed from a
		 * fast rate waits longer, one sped up from a crawl does not
		 * wait out the crawl).
		 */
		p->next = now + pace_muldiv(p->next - now, p->kbps, kbps);
	}
	p->kbps = kbps;
	p->rem = 0;
}

bool mbcf_pace_ready(const struct mbcf_pace *p, u64 now)
{
	return !p->kbps || !p->primed || pace_after_eq(now, p->next);
}

/*
 * Where the clock starts for a frame of cost ns sent at now: where it
 * stands, but never more than one frame's time in the past -- a flow that
 * was idle gets one frame of credit, so at most two frames leave back to
 * back (PSPacer's bound of 2 MTU).  A flow the clock held back (held) and
 * that was served late by the environment's timer keeps up to slack_ns of
 * the lateness: it sends what it owes now, the average rate stays exact,
 * and the burst is as long as the timer was late (never longer than
 * slack_ns worth of frames).
 */
static u64 pace_start(const struct mbcf_pace *p, u64 cost, u64 now, bool *clamped)
{
	u64 lag = p->held && p->slack_ns > cost ? p->slack_ns : cost;

	*clamped = !p->primed || (s64)(now - p->next) > (s64)lag;
	return *clamped ? now - lag : p->next;
}

void mbcf_pace_hold(struct mbcf_pace *p)
{
	if (p->kbps)
		p->held = true;
}

u64 mbcf_pace_peek(const struct mbcf_pace *p, u32 bytes, u64 now)
{
	u32 rem = p->rem;
	u64 cost;
	bool clamped;

	if (!p->kbps)
		return now;
	cost = mbcf_pace_ns(p->kbps, bytes, &rem);
	return pace_start(p, cost, now, &clamped) + cost;
}

void mbcf_pace_sent(struct mbcf_pace *p, u32 bytes, u64 now)
{
	u64 cost, start;
	bool clamped;

	if (!p->kbps)
		return;
	cost = mbcf_pace_ns(p->kbps, bytes, &p->rem);
	start = pace_start(p, cost, now, &clamped);
	if (clamped)
		p->rem = 0;	/* the credit restarts the fraction too */
	p->next = start + cost;
	p->primed = true;
	if ((s64)(p->next - now) > 0)
		p->held = false;	/* caught up: owes nothing any more */
}

/*
 * Frames worth bytes that the clock counted never left (the link refused
 * them, docs/protocol.md 7.7): the clock goes back by their time, so the
 * resend is what the flow pays for them, once.  The remainder carried is
 * left as is (at most a nanosecond).
 */
void mbcf_pace_refund(struct mbcf_pace *p, u64 bytes)
{
	u64 ns;

	if (!p->kbps || !p->primed || !bytes)
		return;
	/* bytes * 8e6 may not fit 64 bits for a window of huge frames at a
	 * crawl: refund frame by frame of at most 2^32 - 1 bytes */
	while (bytes) {
		u32 b = bytes > 0xffffffffull ? 0xffffffffu : (u32)bytes;

		ns = mbcf_pace_ns(p->kbps, b, NULL);
		p->next -= ns;
		bytes -= b;
	}
}
