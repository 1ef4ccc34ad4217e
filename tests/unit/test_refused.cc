// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
// Frames the link refused (docs/protocol.md 7.7): the environment reports
// the first one; the sender goes back to it after a hold that doubles until
// progress, halves the window, restarts the deadline of a frame that never
// left, and a link that refuses everything still fails the connection with
// RETRY_EXC_ERR: a hold as long as the timeout uses a retry.
#include <gtest/gtest.h>

#include "harness.h"
#include "pair.h"

using namespace mbcft;

namespace {

class Refused : public Pair {
protected:
	// n 8-byte writes queued at once: n frames, psn 100 on.
	void burst(int n)
	{
		defer = true;
		for (int i = 0; i < n; i++)
			post(a, MBCF_OP_WRITE, 8);
		mbcf_conn_kick(&a.conn, now);
		ASSERT_EQ(a.out.size(), (size_t)n);
	}

	// e's frames from index i on were refused (the first) or never
	// handed over (the rest): report the first, as the module does.
	void refuse_from(Env &e, size_t i)
	{
		mbcf_frame f = frame(e, i);

		e.out.erase(e.out.begin() + (long)i, e.out.end());
		mbcf_conn_refused(&e.conn, f.psn, f.epoch, now);
	}
};

TEST_F(Refused, GoesBackToTheRefusedFrameAfterTheHold)
{
	burst(4);
	refuse_from(a, 1);
	EXPECT_EQ(a.conn.ctr.tx_refused, 1u);
	EXPECT_EQ(a.conn.tx_epoch, 1u);
	EXPECT_EQ(a.conn.snd_nxt, 101u);
	EXPECT_EQ(a.conn.ctr.window_cuts, 1u);
	EXPECT_EQ(a.conn.wnd, 8u);		// halved, as by a timeout
	EXPECT_EQ(a.timer_at, now + MBCF_HOLD_MIN_NS);	// before the 1 ms rto
	EXPECT_EQ(a.conn.rto_at, 1000 + kMs);	// 100 is in flight: unchanged
	pump(a, b, now);			// psn 100 arrives
	now += MBCF_HOLD_MIN_NS / 2;
	mbcf_conn_kick(&a.conn, now);		// held: nothing leaves yet
	EXPECT_TRUE(a.out.empty());
	fire(a);
	ASSERT_EQ(a.out.size(), 3u);
	for (size_t i = 0; i < 3; i++) {
		EXPECT_EQ(frame(a, i).psn, 101u + i);
		EXPECT_EQ(frame(a, i).epoch, 1u);
	}
	EXPECT_EQ(a.conn.ctr.retransmits, 3u);
	settle(a, b, now);
	ASSERT_EQ(a.cqes.size(), 4u);
	for (size_t i = 0; i < 4; i++)
		EXPECT_EQ(a.cqes[i].status, MBCF_WC_SUCCESS) << i;
	EXPECT_EQ(b.target_writes, 4);
	EXPECT_EQ(b.conn.ctr.lost_tx, 0u);	// the receiver saw no gap
	EXPECT_EQ(a.conn.ctr.timeouts, 0u);
	EXPECT_EQ(a.conn.hold_at, 0u);
}

TEST_F(Refused, HoldDoublesUntilProgress)
{
	post(a, MBCF_OP_WRITE, 8);
	for (uint64_t hold = MBCF_HOLD_MIN_NS; hold <= 4 * MBCF_HOLD_MIN_NS;
	     hold *= 2) {
		ASSERT_EQ(a.out.size(), 1u);
		refuse_from(a, 0);
		EXPECT_EQ(a.timer_at, now + hold);
		fire(a);
	}
	EXPECT_EQ(a.conn.ctr.tx_refused, 3u);
	EXPECT_EQ(a.conn.ctr.retransmits, 3u);
	settle(a, b, now);
	ASSERT_EQ(a.cqes.size(), 1u);
	EXPECT_EQ(a.cqes[0].status, MBCF_WC_SUCCESS);
	EXPECT_EQ(a.conn.hold_ns, 0u);		// progress: the next starts over
	post(a, MBCF_OP_WRITE, 8);
	refuse_from(a, 0);
	EXPECT_EQ(a.timer_at, now + MBCF_HOLD_MIN_NS);
}

TEST_F(Refused, StaleOrSettledReportsChangeNothing)
{
	burst(4);
	refuse_from(a, 2);			// 102 of round 0
	ASSERT_EQ(a.conn.tx_epoch, 1u);
	uint64_t hold_at = a.conn.hold_at;
	// a second batch's report of round 0 (sent before the go-back)
	mbcf_conn_refused(&a.conn, 103, 0, now);
	// a psn not counted as sent since the go-back
	mbcf_conn_refused(&a.conn, 103, 1, now);
	EXPECT_EQ(a.conn.ctr.tx_refused, 3u);
	EXPECT_EQ(a.conn.tx_epoch, 1u);
	EXPECT_EQ(a.conn.snd_nxt, 102u);
	EXPECT_EQ(a.conn.hold_at, hold_at);
	EXPECT_EQ(a.conn.ctr.window_cuts, 1u);
	fire(a);
	settle(a, b, now);
	ASSERT_EQ(a.cqes.size(), 4u);
	// a report for a psn already acknowledged (an earlier copy arrived)
	mbcf_conn_refused(&a.conn, 101, 1, now);
	EXPECT_EQ(a.conn.hold_at, 0u);
	EXPECT_EQ(a.conn.tx_epoch, 1u);
	EXPECT_EQ(a.timer_at, 0u);
}

// A read's response refused at the responder is sent again after the hold:
// the requester gets every byte, with no timeout on either side.
TEST_F(Refused, RefusedResponseIsResent)
{
	uint8_t *t = b.target(kRkey, kBase);
	for (int i = 0; i < 3000; i++)
		t[i] = (uint8_t)(i * 13);
	uint64_t c = post(a, MBCF_OP_READ_REQ, 3000, kBase);
	pump(a, b, now);
	ASSERT_EQ(b.out.size(), 3u);		// 3000 B: three response frames
	EXPECT_EQ(frame(b, 1).op, MBCF_OP_READ_RESP);
	refuse_from(b, 1);
	EXPECT_EQ(b.conn.ctr.tx_refused, 1u);
	pump(b, a, now);
	fire(b);
	ASSERT_EQ(b.out.size(), 2u);
	settle(a, b, now);
	ASSERT_EQ(a.cqes.size(), 1u);
	EXPECT_EQ(a.cqes[0].status, MBCF_WC_SUCCESS);
	EXPECT_EQ(memcmp(a.local[c].data(), t, 3000), 0);
	EXPECT_EQ(a.conn.ctr.timeouts + b.conn.ctr.timeouts, 0u);
}

// The oldest frame refused: nothing of ours is in flight, so the deadline
// starts again when it may leave.
TEST_F(Refused, ARefusedOldestFrameRestartsTheDeadline)
{
	post(a, MBCF_OP_WRITE, 8);
	now += kMs / 2;
	refuse_from(a, 0);
	EXPECT_EQ(a.conn.hold_at, now + MBCF_HOLD_MIN_NS);
	EXPECT_EQ(a.conn.rto_at, now + MBCF_HOLD_MIN_NS + kMs);
	fire(a);				// the hold ends, not the rto
	EXPECT_EQ(a.conn.ctr.timeouts, 0u);
	settle(a, b, now);
	ASSERT_EQ(a.cqes.size(), 1u);
	EXPECT_EQ(a.cqes[0].status, MBCF_WC_SUCCESS);
}

// Every frame refused, forever: the holds double up to the rto (1 ms);
// from then on each refusal uses a retry, and with none left the
// connection fails as on a dead link -- never by a timeout, since the
// frame never left.
TEST_F(Refused, ALinkThatRefusesEverythingFailsWithRetryExceeded)
{
	const uint64_t start = now;

	post(a, MBCF_OP_WRITE, 8);
	for (int i = 0; i < 1000 && a.conn.state == MBCF_CONN_RTS; i++) {
		if (!a.out.empty())
			refuse_from(a, 0);
		if (a.conn.state == MBCF_CONN_RTS)
			fire(a);
	}
	ASSERT_EQ(a.conn.state, MBCF_CONN_ERROR);
	ASSERT_EQ(a.cqes.size(), 1u);
	EXPECT_EQ(a.cqes[0].status, MBCF_WC_RETRY_EXC_ERR);
	// holds of 50, 100, 200, 400, 800 us, then 1 ms four times: the
	// last three used retry_cnt (3), the tenth refusal found none left
	EXPECT_EQ(a.conn.ctr.tx_refused, 10u);
	EXPECT_EQ(now - start, 1550000u + 4 * kMs);
	EXPECT_EQ(a.conn.hold_ns, kMs);
	EXPECT_EQ(a.conn.ctr.retry_exceeded, 1u);
	EXPECT_EQ(a.conn.ctr.timeouts, 0u);
	EXPECT_EQ(b.target_writes, 0);
}

// A paced stream: the refused frame and those behind it never left, so the
// clock gives their time back -- the resend leaves when the hold ends, not
// a frame's time later, and the rate over the stream is what was asked.
TEST_F(Refused, APacedStreamGetsTheTimeOfRefusedFramesBack)
{
	const uint32_t kbps = 4000;	// half a byte per microsecond
	mbcf_conn_set_rate(&a.conn, kbps, now);
	defer = true;
	for (int i = 0; i < 4; i++)
		post(a, MBCF_OP_WRITE, 8);
	mbcf_conn_kick(&a.conn, now);
	// an idle flow's credit: two frames back to back, the clock a
	// frame ahead
	ASSERT_EQ(a.out.size(), 2u);
	uint64_t cost = a.conn.pace.next - now;
	ASSERT_GT(cost, MBCF_HOLD_MIN_NS);
	const uint64_t t0 = now;
	refuse_from(a, 1);
	EXPECT_EQ(a.conn.pace.next, t0);	// frame 101's time back
	fire(a);
	EXPECT_EQ(now, t0 + MBCF_HOLD_MIN_NS);	// the hold's end
	ASSERT_EQ(a.out.size(), 2u);		// 101 leaves at once (after 100)
	EXPECT_EQ(frame(a, 1).psn, 101u);
	EXPECT_EQ(a.conn.pace.next, t0 + cost);	// 102 a frame later
	// the pacer (the environment's timer) kicks when the clock comes
	uint64_t due;
	for (int guard = 0; guard < 10 && a.cqes.size() < 4; guard++) {
		settle(a, b, now);
		if (mbcf_conn_pace_due(&a.conn, &due)) {
			now = due;
			mbcf_conn_kick(&a.conn, now);
		}
	}
	ASSERT_EQ(a.cqes.size(), 4u);
	EXPECT_EQ(now, t0 + 2 * cost);		// 103 left when due
	EXPECT_EQ(b.target_writes, 4);
}

}  // namespace
