// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
// The retransmission timeout follows the measured round trip
// (docs/protocol.md 7.1): never below the verbs timeout (1 ms here), above
// it when acknowledgements take longer, at most rto_max; a frame that was
// sent twice gives no sample (Karn).
#include <gtest/gtest.h>

#include "harness.h"
#include "pair.h"

using namespace mbcft;

namespace {

class Rto : public Pair {
protected:
	// One write, its frame reaching b after `there`, b's ACK reaching a
	// `back` later; returns a's completions so far.
	size_t round_trip(uint64_t there, uint64_t back)
	{
		post(a, MBCF_OP_WRITE, 8);
		now += there;
		pump(a, b, now);
		now += back;
		pump(b, a, now);
		return a.cqes.size();
	}
};

TEST_F(Rto, StaysAtTheVerbsTimeoutWhileTheRoundTripIsShort)
{
	for (int i = 0; i < 8; i++)
		ASSERT_EQ(round_trip(kMs / 20, kMs / 20), i + 1u);
	EXPECT_EQ(a.conn.srtt, kMs / 10);
	EXPECT_EQ(a.conn.rto_base, kMs);
	EXPECT_EQ(a.conn.rto_cur, kMs);
}

// ACKs that take 5 ms (queues shared by many QPs) against a verbs timeout
// of 1 ms.  The first frames time out and are resent (no sample: Karn);
// the backoff is kept through their acknowledgement until the timeout
// exceeds the round trip and a frame is timed.  From then on the timeout is
// srtt + 4 rttvar, and a frame acknowledged after 4 ms is not resent.
TEST_F(Rto, FollowsALongRoundTrip)
{
	for (int i = 0; i < 16; i++) {
		post(a, MBCF_OP_WRITE, 8);
		now += 5 * kMs / 2;
		mbcf_conn_timeout(&a.conn, now);	// resends if it is due
		pump(a, b, now);
		now += 5 * kMs / 2;
		pump(b, a, now);
	}
	EXPECT_EQ(a.conn.ctr.timeouts, 2u);	// 1 ms, then 2 ms: 4 ms holds
	EXPECT_EQ(a.conn.srtt, 5 * kMs);	// every sample was 5 ms
	EXPECT_GT(a.conn.rto_base, 5 * kMs);
	EXPECT_LT(a.conn.rto_base, 6 * kMs);
	EXPECT_EQ(a.conn.rto_cur, a.conn.rto_base);

	uint64_t rtx = a.conn.ctr.retransmits;
	post(a, MBCF_OP_WRITE, 8);
	ASSERT_EQ(a.out.size(), 1u);
	now += 4 * kMs;
	mbcf_conn_timeout(&a.conn, now);
	EXPECT_EQ(a.out.size(), 1u);		// nothing resent
	pump(a, b, now);
	pump(b, a, now);
	EXPECT_EQ(a.conn.ctr.timeouts, 2u);
	EXPECT_EQ(a.conn.ctr.retransmits, rtx);
	ASSERT_EQ(a.cqes.size(), 17u);
	for (auto &c : a.cqes)
		EXPECT_EQ(c.status, MBCF_WC_SUCCESS);
}

// A lost frame is still resent: after the learnt timeout, not before; the
// backoff lasts until the next sample.
TEST_F(Rto, ALossIsResentAfterTheLearntTimeout)
{
	for (int i = 0; i < 12; i++)
		round_trip(2 * kMs, 2 * kMs);	// srtt 4 ms
	uint64_t base = a.conn.rto_base;
	ASSERT_EQ(a.conn.srtt, 4 * kMs);
	ASSERT_GT(base, 4 * kMs);
	post(a, MBCF_OP_WRITE, 8);
	a.out.clear();				// lost
	uint64_t sent = now;
	EXPECT_EQ(a.timer_at, sent + base);
	fire(a);
	ASSERT_EQ(a.out.size(), 1u);		// resent once the timeout passed
	EXPECT_EQ(a.conn.rto_cur, 2 * base);	// and backed off from it
	pump(a, b, now);
	pump(b, a, now);
	EXPECT_EQ(a.cqes.size(), 13u);
	EXPECT_EQ(a.conn.rto_cur, 2 * base);	// no sample yet: kept
	round_trip(2 * kMs, 2 * kMs);
	EXPECT_EQ(a.cqes.size(), 14u);
	EXPECT_EQ(a.conn.rto_cur, a.conn.rto_base);	// sampled: back
	EXPECT_LT(a.conn.rto_cur, 2 * base);
}

// Karn: the ACK of a frame sent twice says nothing about the round trip.
TEST_F(Rto, NoSampleFromAFrameSentTwice)
{
	post(a, MBCF_OP_WRITE, 8);
	a.out.clear();				// lost
	fire(a);				// 1 ms: resent
	ASSERT_EQ(a.out.size(), 1u);
	now += 30 * kMs;			// its ACK takes long
	pump(a, b, now);
	pump(b, a, now);
	ASSERT_EQ(a.cqes.size(), 1u);
	EXPECT_EQ(a.conn.srtt, 0u);		// no sample taken
	EXPECT_EQ(a.conn.rto_base, kMs);
	EXPECT_EQ(a.conn.rto_cur, 2 * kMs);	// the backoff is kept
	round_trip(kMs / 8, kMs / 8);		// until a frame is timed
	EXPECT_EQ(a.conn.srtt, kMs / 4);
	EXPECT_EQ(a.conn.rto_cur, kMs);
}

TEST_F(Rto, NeverAboveRtoMax)
{
	for (int i = 0; i < 4; i++)
		round_trip(0, 200 * kMs);	// far above 64 x 1 ms
	EXPECT_EQ(a.conn.rto_base, a.conn.cfg.rto_max_ns);
	EXPECT_EQ(a.conn.cfg.rto_max_ns, 64 * kMs);
}

// The verbs timeout given at RTS starts the measurement afresh.
TEST_F(Rto, SetSendStartsAfresh)
{
	mbcf_conn_cfg cfg = default_cfg(0x11, 0x22, 100, 200);
	Env c;

	ASSERT_EQ(c.init(cfg), 0);
	cfg.rto_ns = 3 * kMs;
	ASSERT_EQ(mbcf_conn_set_send(&c.conn, &cfg), 0);
	EXPECT_EQ(c.conn.rto_base, 3 * kMs);
	EXPECT_EQ(c.conn.rto_cur, 3 * kMs);
	EXPECT_EQ(c.conn.srtt, 0u);
}

}  // namespace
