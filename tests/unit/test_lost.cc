// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
// Fast loss recovery with go-back rounds (docs/protocol.md 4.5): a lost
// LOST or a lost resend is repaired by the next LOST, not by the
// retransmission timeout; a LOST from an earlier round never makes the
// sender go back twice.
#include <gtest/gtest.h>

#include "harness.h"
#include "pair.h"

using namespace mbcft;

namespace {

class Lost : public Pair {
protected:
	// 16 frames (a full window; ACKREQ on indexes 7 and 15) queued at once.
	void burst16()
	{
		defer = true;
		for (int i = 0; i < 16; i++)
			post(a, MBCF_OP_WRITE, 8);
		mbcf_conn_kick(&a.conn, now);
		ASSERT_EQ(a.out.size(), 16u);
	}

	// Deliver a's frames to b except the first one (lost).
	void lose_first()
	{
		a.out.pop_front();
		pump(a, b, now);
	}

	void expect_done_without_timeout()
	{
		settle(a, b, now);
		ASSERT_EQ(a.cqes.size(), 16u);
		for (size_t i = 0; i < 16; i++)
			EXPECT_EQ(a.cqes[i].status, MBCF_WC_SUCCESS) << i;
		EXPECT_EQ(a.conn.ctr.timeouts, 0u);
		EXPECT_EQ(b.target_writes, 16);
	}
};

// The first LOST is lost; the ones answering the frames that ask (7, 15)
// arrive: the sender goes back on the first of them, once.
TEST_F(Lost, ALostLostIsRepeatedForFramesThatAsk)
{
	burst16();
	lose_first();
	ASSERT_EQ(b.out.size(), 3u);
	for (size_t i = 0; i < 3; i++) {
		EXPECT_EQ(frame(b, i).op, MBCF_OP_LOST);
		EXPECT_EQ(frame(b, i).ack_psn, 100u);
	}
	b.out.pop_front();
	pump(b, a, now);
	EXPECT_EQ(a.conn.tx_epoch, 1u);
	ASSERT_EQ(a.out.size(), 12u);		// the window cut, resent once
	EXPECT_EQ(frame(a, 0).psn, 100u);
	EXPECT_EQ(frame(a, 0).epoch, 1u);
	expect_done_without_timeout();
}

// The resend of psn 100 is lost as well: the first frame of the new round
// that finds the gap reports it (a frame of round 1 means 100 was resent
// before it), and the sender goes back again at once.
TEST_F(Lost, ALostResendIsReportedByTheNewRound)
{
	burst16();
	lose_first();
	pump(b, a, now);			// LOST(100) x3: one go-back
	ASSERT_EQ(a.conn.tx_epoch, 1u);
	ASSERT_EQ(a.out.size(), 12u);
	uint64_t lost_before = b.conn.ctr.lost_tx;
	lose_first();				// resent 100 lost too
	EXPECT_EQ(b.conn.ctr.lost_tx, lost_before + 3);	// 101 (round 1); 105, 111 ask
	mbcf_frame l = frame(b, 0);
	EXPECT_EQ(l.op, MBCF_OP_LOST);
	EXPECT_EQ(l.ack_psn, 100u);
	EXPECT_EQ(l.epoch, 1u);
	pump(b, a, now);
	EXPECT_EQ(a.conn.tx_epoch, 2u);		// went back again, once
	EXPECT_EQ(frame(a, 0).psn, 100u);
	EXPECT_EQ(frame(a, 0).epoch, 2u);
	expect_done_without_timeout();
}

// A LOST found by a frame of an earlier round says nothing new: the go-back
// since resends that psn already.
TEST_F(Lost, ALostFromAnEarlierRoundIsIgnored)
{
	burst16();
	lose_first();
	auto first = b.out.front();
	pump(b, a, now);
	ASSERT_EQ(a.conn.tx_epoch, 1u);
	a.out.clear();				// the resend, in flight
	deliver(a, first, now);			// the round-0 LOST once more
	EXPECT_TRUE(a.out.empty());
	EXPECT_EQ(a.conn.tx_epoch, 1u);
	EXPECT_EQ(a.conn.ctr.lost_rx, 4u);
}

// Timeouts start a round too: a LOST of the round before is stale.
TEST_F(Lost, ATimeoutStartsARound)
{
	burst16();
	lose_first();
	auto stale = b.out.front();
	b.out.clear();				// every LOST lost
	fire(a);
	EXPECT_EQ(a.conn.ctr.timeouts, 1u);
	EXPECT_EQ(a.conn.tx_epoch, 1u);
	a.out.clear();
	deliver(a, stale, now);
	EXPECT_TRUE(a.out.empty());
	EXPECT_EQ(a.conn.tx_epoch, 1u);
}

}  // namespace
