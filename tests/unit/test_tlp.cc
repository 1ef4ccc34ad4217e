// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
// The tail probe (docs/protocol.md 7.6): when the last frames of a burst or
// their ACK are lost, nothing behind them finds the gap; two round trips
// after the last frame left, it is sent again with ACKREQ -- long before
// the retransmission timeout (20 ms here, the round trip 0.5 ms).
#include <gtest/gtest.h>

#include "harness.h"
#include "pair.h"

using namespace mbcft;

namespace {

class Tlp : public Pair {
protected:
	void SetUp() override
	{
		mbcf_conn_cfg ca = default_cfg(0x11, 0x22, 100, 200);
		mbcf_conn_cfg cb = default_cfg(0x22, 0x11, 200, 100);

		ca.rto_ns = cb.rto_ns = 20 * kMs;
		setup(ca, cb);
		// one write, 0.25 ms each way: srtt 0.5 ms
		post(a, MBCF_OP_WRITE, 8);
		now += kMs / 4;
		pump(a, b, now);
		now += kMs / 4;
		pump(b, a, now);
		EXPECT_EQ(a.conn.srtt, kMs / 2);
		EXPECT_EQ(a.cqes.size(), 1u);
		EXPECT_EQ(a.timer_at, 0u);	// nothing outstanding
	}

	// n one-frame writes in one burst; returns the psn of the first
	uint32_t burst(int n)
	{
		defer = true;
		for (int i = 0; i < n; i++)
			post(a, MBCF_OP_WRITE, 8);
		defer = false;
		mbcf_conn_kick(&a.conn, now);
		EXPECT_EQ(a.out.size(), (size_t)n);
		return frame(a, 0).psn;
	}

	void expect_all_done(size_t n)
	{
		ASSERT_EQ(a.cqes.size(), n);
		for (auto &c : a.cqes)
			EXPECT_EQ(c.status, MBCF_WC_SUCCESS);
		EXPECT_EQ(a.conn.ctr.timeouts, 0u);
		EXPECT_EQ(a.conn.retry_left, a.conn.cfg.retry_cnt);
	}
};

// The last frame (the one asking for the ACK) is lost: the probe, 1 ms
// (2 srtt) after it left, is that frame again, accepted at once.
TEST_F(Tlp, TheLastFrameLost)
{
	uint32_t first = burst(4);
	uint64_t sent = now;

	a.out.pop_back();
	pump(a, b, now);
	EXPECT_TRUE(b.out.empty());		// no ACK asked for, no gap seen
	EXPECT_EQ(a.timer_at, sent + kMs);	// the probe, not the 20 ms timeout
	fire(a);
	ASSERT_EQ(a.out.size(), 1u);
	mbcf_frame f = frame(a, 0);
	EXPECT_EQ(f.psn, first + 3);
	EXPECT_TRUE(f.flags & MBCF_F_ACKREQ);
	settle(a, b, now);
	expect_all_done(5);
	EXPECT_EQ(a.conn.ctr.tail_probes, 1u);
	EXPECT_EQ(a.conn.ctr.retransmits, 1u);
	EXPECT_EQ(b.conn.ctr.drop_duplicate, 0u);
	EXPECT_EQ(a.timer_at, 0u);
}

// Every frame arrived, the ACK was lost: the probe is a duplicate, and the
// receiver acknowledges it again.
TEST_F(Tlp, TheAckLost)
{
	burst(4);
	pump(a, b, now);
	ASSERT_EQ(b.out.size(), 1u);
	b.out.clear();				// the ACK is lost
	fire(a);
	ASSERT_EQ(a.out.size(), 1u);
	settle(a, b, now);
	expect_all_done(5);
	EXPECT_EQ(b.conn.ctr.drop_duplicate, 1u);
	EXPECT_EQ(a.conn.ctr.tail_probes, 1u);
}

// An earlier frame and the LOST its successor caused are lost: the probe
// finds the gap and asks, so LOST comes again and a goes back at once.
TEST_F(Tlp, AnEarlierGapAndItsLostLost)
{
	uint32_t first = burst(4);

	a.out.erase(a.out.begin() + 1);		// psn first + 1
	a.out.pop_back();			// and the last
	pump(a, b, now);
	ASSERT_EQ(b.out.size(), 1u);
	EXPECT_EQ(frame(b, 0).op, MBCF_OP_LOST);
	b.out.clear();				// the LOST is lost
	pump(b, a, now);
	fire(a);
	ASSERT_EQ(a.out.size(), 1u);
	EXPECT_EQ(frame(a, 0).psn, first + 3);
	pump(a, b, now);
	ASSERT_EQ(b.out.size(), 1u);
	EXPECT_EQ(frame(b, 0).op, MBCF_OP_LOST);
	EXPECT_EQ(frame(b, 0).ack_psn, first + 1);
	pump(b, a, now);			// a goes back to first + 1
	ASSERT_EQ(a.out.size(), 3u);
	EXPECT_EQ(frame(a, 0).psn, first + 1);
	settle(a, b, now);
	expect_all_done(5);
}

// One probe per progress: a lost probe leaves the rest to the timeout.
TEST_F(Tlp, OneProbeThenTheTimeout)
{
	burst(2);
	uint64_t sent = now;

	a.out.clear();
	fire(a);
	EXPECT_EQ(a.out.size(), 1u);
	a.out.clear();				// the probe is lost too
	EXPECT_EQ(a.timer_at, sent + 20 * kMs);
	fire(a);
	EXPECT_EQ(a.conn.ctr.timeouts, 1u);
	EXPECT_EQ(a.conn.ctr.tail_probes, 1u);
	EXPECT_EQ(a.out.size(), 1u);		// snd_una's, alone until answered
	settle(a, b, now);
	ASSERT_EQ(a.cqes.size(), 3u);
}

// Progress re-arms it: each burst whose tail is lost gets its probe.
TEST_F(Tlp, EachProgressRearmsIt)
{
	for (int round = 1; round <= 3; round++) {
		burst(4);
		a.out.pop_back();
		pump(a, b, now);
		fire(a);
		ASSERT_EQ(a.out.size(), 1u) << round;
		settle(a, b, now);
		EXPECT_EQ(a.conn.ctr.tail_probes, (uint64_t)round);
		EXPECT_FALSE(a.conn.tlp_sent);
		EXPECT_EQ(a.timer_at, 0u);
	}
	expect_all_done(13);
}

// No round trip measured yet: no probe, the timeout only.
TEST(TlpNoSample, NothingBeforeASample)
{
	Env a;
	mbcf_conn_cfg c = default_cfg(0x11, 0x22, 100, 200);

	c.rto_ns = 20 * kMs;
	ASSERT_EQ(a.init(c), 0);
	a.add_region(kRkey, kBase, 1 << 16, ACC_ALL);
	mbcf_wr w = make_wr(1, MBCF_OP_WRITE, 8, kBase, kRkey);
	a.local[1] = std::vector<uint8_t>(8, 1);
	ASSERT_EQ(mbcf_conn_post(&a.conn, &w, 1000), 0);
	EXPECT_EQ(a.timer_at, 1000 + 20 * kMs);
	EXPECT_EQ(a.conn.tlp_at, 0u);
}

}  // namespace
