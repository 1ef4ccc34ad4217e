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

// The device's shared round trip (7.1): a connection whose own rto is
// shorter (the verbs timeout before its first sample) waits as long as the
// device's other connections measure; a stale share, a wait past the
// shared rto or a timeout ends that.
class RtoShare : public Rto {
protected:
	mbcf_rtt_share share{};

	void SetUp() override
	{
		mbcf_conn_cfg ca = default_cfg(0x11, 0x22, 100, 200);
		mbcf_conn_cfg cb = default_cfg(0x22, 0x11, 200, 100);

		ca.rtt_share = &share;
		setup(ca, cb);
	}

	// Another QP of the device measured srtt/rttvar just now.
	void others(uint64_t srtt, uint64_t rttvar)
	{
		share.srtt = srtt;
		share.rttvar = rttvar;
		share.at = now;
	}
};

TEST_F(RtoShare, ANewQpWaitsAsLongAsTheOthersMeasure)
{
	others(5 * kMs, kMs / 4);		// shared rto 6 ms
	uint64_t sent = now;
	post(a, MBCF_OP_WRITE, 8);
	ASSERT_EQ(a.out.size(), 1u);
	EXPECT_EQ(a.timer_at, sent + kMs);	// the verbs timeout
	fire(a);
	EXPECT_EQ(a.conn.ctr.timeouts, 0u);
	EXPECT_EQ(a.conn.ctr.rto_shared, 1u);
	EXPECT_EQ(a.out.size(), 1u);		// nothing resent
	EXPECT_EQ(a.timer_at, sent + 6 * kMs);
	EXPECT_EQ(a.conn.rto_cur, kMs);		// no backoff either
	now = sent + 5 * kMs;			// it was queued, not lost
	pump(a, b, now);
	pump(b, a, now);
	ASSERT_EQ(a.cqes.size(), 1u);
	EXPECT_EQ(a.cqes[0].status, MBCF_WC_SUCCESS);
	EXPECT_EQ(a.conn.ctr.retransmits, 0u);
	EXPECT_EQ(a.conn.srtt, 5 * kMs);	// its own sample from now on
	EXPECT_EQ(a.conn.rto_share_since, 0u);
}

TEST_F(RtoShare, ALostFrameTimesOutAfterTheSharedRto)
{
	others(5 * kMs, kMs / 4);
	uint64_t sent = now;
	post(a, MBCF_OP_WRITE, 8);
	a.out.clear();				// lost
	fire(a);				// 1 ms: waits
	ASSERT_EQ(a.timer_at, sent + 6 * kMs);
	share.at = now;				// the others still measure
	fire(a);				// 6 ms: waited the shared rto
	EXPECT_EQ(a.conn.ctr.timeouts, 1u);
	EXPECT_EQ(a.conn.ctr.rto_shared, 1u);
	ASSERT_EQ(a.out.size(), 1u);		// resent
	EXPECT_EQ(a.conn.rto_cur, 2 * kMs);	// backed off from its own
	fire(a);				// and no more waits on the share
	EXPECT_EQ(a.conn.ctr.timeouts, 2u);
	EXPECT_EQ(a.conn.ctr.rto_shared, 1u);
	pump(a, b, now);
	pump(b, a, now);
	ASSERT_EQ(a.cqes.size(), 1u);
	EXPECT_EQ(a.cqes[0].status, MBCF_WC_SUCCESS);
}

// The queue grows while the QPs ahead measure it: each move is at least
// twice the wait so far, so a deadline does not fire at every new sample.
TEST_F(RtoShare, EachMoveAtLeastDoublesTheWait)
{
	uint64_t sent = now;
	post(a, MBCF_OP_WRITE, 8);
	others(3 * kMs / 2, 0);			// 1.5 ms
	fire(a);				// at 1 ms
	EXPECT_EQ(a.timer_at, sent + 2 * kMs);	// not 1.5
	others(3 * kMs, 0);			// the queue grew
	fire(a);				// at 2 ms
	EXPECT_EQ(a.timer_at, sent + 4 * kMs);	// not 3
	others(10 * kMs, 0);
	fire(a);				// at 4 ms
	EXPECT_EQ(a.timer_at, sent + 10 * kMs);
	EXPECT_EQ(a.conn.ctr.rto_shared, 3u);
	EXPECT_EQ(a.conn.ctr.timeouts, 0u);
	EXPECT_EQ(a.out.size(), 1u);
}

TEST_F(RtoShare, AStaleShareSaysNothing)
{
	others(5 * kMs, kMs / 4);
	now += 7 * kMs;				// no sample within its 6 ms
	post(a, MBCF_OP_WRITE, 8);
	a.out.clear();
	fire(a);
	EXPECT_EQ(a.conn.ctr.timeouts, 1u);
	EXPECT_EQ(a.conn.ctr.rto_shared, 0u);
	EXPECT_EQ(a.out.size(), 1u);
}

// What a QP measured before a burst is no better than no sample: a short
// own rto waits for the device's longer one too.
TEST_F(RtoShare, AShortOwnRoundTripWaitsToo)
{
	round_trip(kMs / 4, kMs / 4);		// srtt 0.5 ms: rto 1 ms
	others(5 * kMs, kMs / 4);		// the queue is long now
	uint64_t sent = now;
	post(a, MBCF_OP_WRITE, 8);
	a.out.clear();				// lost
	fire(a);				// at its own 1 ms: waits
	EXPECT_EQ(a.conn.ctr.timeouts, 0u);
	EXPECT_EQ(a.conn.ctr.rto_shared, 1u);
	EXPECT_EQ(a.timer_at, sent + 6 * kMs);
	share.at = now;
	fire(a);				// 6 ms: resent
	EXPECT_EQ(a.conn.ctr.timeouts, 1u);
	EXPECT_EQ(a.out.size(), 1u);
}

// A QP whose own rto is the longer one is not made to wait more.
TEST_F(RtoShare, ALongerOwnRtoIsItsOwn)
{
	round_trip(2 * kMs, 2 * kMs);		// srtt 4 ms: rto 12 ms
	uint64_t rto = a.conn.rto_cur;
	ASSERT_GT(rto, 6 * kMs);
	others(5 * kMs, kMs / 4);		// rto 6 ms
	uint64_t sent = now;
	post(a, MBCF_OP_WRITE, 8);
	a.out.clear();
	fire(a);
	EXPECT_EQ(now, sent + rto);
	EXPECT_EQ(a.conn.ctr.timeouts, 1u);
	EXPECT_EQ(a.conn.ctr.rto_shared, 0u);
	EXPECT_EQ(a.out.size(), 1u);
}

// Every sample is folded into the share as into the connection's own.
TEST_F(RtoShare, SamplesFeedTheShare)
{
	round_trip(kMs, kMs);
	EXPECT_EQ(share.srtt, 2 * kMs);
	EXPECT_EQ(share.rttvar, kMs);
	EXPECT_EQ(share.at, now);
	round_trip(2 * kMs, 2 * kMs);
	EXPECT_EQ(share.srtt, a.conn.srtt);
	EXPECT_EQ(share.rttvar, a.conn.rttvar);
	EXPECT_EQ(share.at, now);
}

}  // namespace
