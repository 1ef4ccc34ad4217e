// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
// The pacing clock (core/pace.c) and a paced connection (core/send.c):
// exact due times, no drift, rate changes, 0 = unpaced, extreme rates,
// wrap of the clock, the burst bound, and go-back-N under pacing.
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>

#include "harness.h"

using namespace mbcft;

namespace {

constexpr uint64_t kNs = 8000000;	// ns per byte at 1 kbit/s

mbcf_pace paced(uint32_t kbps)
{
	mbcf_pace p{};
	mbcf_pace_set(&p, kbps, 0);
	return p;
}

}  // namespace

TEST(PaceClock, FrameTimeIsExact)
{
	// 1500 B at 1 Gbit/s: 12 us; at 8 kbit/s: 1.5 s
	EXPECT_EQ(mbcf_pace_ns(1000000, 1500, nullptr), 12000u);
	EXPECT_EQ(mbcf_pace_ns(8, 1500, nullptr), 1500000000u);
	EXPECT_EQ(mbcf_pace_ns(0, 1500, nullptr), 0u);	// unpaced
	EXPECT_EQ(mbcf_pace_ns(3, 1, nullptr), 2666666u);
}

TEST(PaceClock, RemainderIsCarriedSoTheClockNeverDrifts)
{
	// 1 byte at 3 kbit/s is 2666666.67 ns: the fraction comes back
	uint32_t rem = 0;
	EXPECT_EQ(mbcf_pace_ns(3, 1, &rem), 2666666u);
	EXPECT_EQ(mbcf_pace_ns(3, 1, &rem), 2666667u);
	EXPECT_EQ(mbcf_pace_ns(3, 1, &rem), 2666667u);
	EXPECT_EQ(rem, 0u);

	// Over a long stream of odd sizes at an odd rate the clock is exactly
	// floor(total bytes * 8e6 / kbps) past its start.
	const uint32_t kbps = 999983;	// a prime
	mbcf_pace p = paced(kbps);
	uint64_t now = 1000, bytes = 0;
	mbcf_pace_sent(&p, 77, now);	// first frame: starts one frame back
	uint64_t start = p.next;
	for (uint32_t i = 0; i < 100000; i++) {
		uint32_t b = 64 + (i * 7919) % 1451;
		now = p.next;
		ASSERT_TRUE(mbcf_pace_ready(&p, now));
		mbcf_pace_sent(&p, b, now);
		bytes += b;
	}
	EXPECT_EQ(p.next - start, bytes * kNs / kbps);
}

TEST(PaceClock, UnpacedIsAlwaysReady)
{
	mbcf_pace p{};
	EXPECT_TRUE(mbcf_pace_ready(&p, 0));
	mbcf_pace_sent(&p, 1500, 0);
	EXPECT_TRUE(mbcf_pace_ready(&p, 0));
	EXPECT_FALSE(p.primed);
	EXPECT_EQ(mbcf_pace_peek(&p, 1500, 77), 77u);
}

TEST(PaceClock, DueTimesAndTheTwoFrameBurstBound)
{
	// 8000 kbit/s = 1 byte per us: a 1000-byte frame takes 1 ms
	mbcf_pace p = paced(8000);
	const uint64_t t0 = 5000000000ull, ms = 1000000;

	// idle flow: two frames back to back, then one per millisecond
	EXPECT_TRUE(mbcf_pace_ready(&p, t0));
	EXPECT_EQ(mbcf_pace_peek(&p, 1000, t0), t0);
	mbcf_pace_sent(&p, 1000, t0);
	EXPECT_EQ(p.next, t0);
	EXPECT_TRUE(mbcf_pace_ready(&p, t0));
	mbcf_pace_sent(&p, 1000, t0);
	EXPECT_EQ(p.next, t0 + ms);
	EXPECT_FALSE(mbcf_pace_ready(&p, t0));
	EXPECT_FALSE(mbcf_pace_ready(&p, t0 + ms - 1));
	EXPECT_TRUE(mbcf_pace_ready(&p, t0 + ms));

	// served 0.4 ms late: the lateness is not lost (next frame at +2 ms)
	mbcf_pace_sent(&p, 1000, t0 + ms + 400000);
	EXPECT_EQ(p.next, t0 + 2 * ms);
	// served 5 ms late: one frame of credit only, never a longer burst
	mbcf_pace_sent(&p, 1000, t0 + 7 * ms);
	EXPECT_EQ(p.next, t0 + 7 * ms);
	mbcf_pace_sent(&p, 1000, t0 + 7 * ms);
	EXPECT_EQ(p.next, t0 + 8 * ms);
	EXPECT_FALSE(mbcf_pace_ready(&p, t0 + 7 * ms));
}

TEST(PaceClock, BurstsAreAtMostTwoFramesWhateverTheService)
{
	// serve at random (late) times: never more than 2 frames ready at once
	// and never more than the rate allows over the run, plus that burst
	mbcf_pace p = paced(12000);
	const uint64_t t0 = 7;
	uint64_t now = t0, frames = 0;
	uint32_t seed = 1;
	int bursts2 = 0;
	for (int i = 0; i < 10000; i++) {
		seed = seed * 1103515245 + 12345;
		now += (seed >> 8) % 5000000;	// up to 5 ms of idleness/lateness
		int burst = 0;
		while (mbcf_pace_ready(&p, now)) {
			mbcf_pace_sent(&p, 1514, now);
			burst++;
		}
		ASSERT_LE(burst, 2);
		bursts2 += burst == 2;
		frames += burst;
		ASSERT_LE(frames, (now - t0) / mbcf_pace_ns(12000, 1514, nullptr) + 2);
	}
	EXPECT_GT(bursts2, 0);
}

TEST(PaceClock, ABackloggedFlowServedLateKeepsItsRateWithinTheSlack)
{
	// 8000 kbit/s, 1000-byte frames: 1 ms each; the timer may be 3 ms late
	const uint64_t ms = 1000000;
	mbcf_pace p = paced(8000);
	p.slack_ns = 3 * ms;
	mbcf_pace_sent(&p, 1000, 0);
	mbcf_pace_sent(&p, 1000, 0);
	ASSERT_FALSE(mbcf_pace_ready(&p, 0));
	mbcf_pace_hold(&p);	// a frame waits: the flow is backlogged
	// served 2.5 ms late: it owes the frames of those 2.5 ms and sends
	// them now (a burst as long as the lateness), then it is on time again
	uint64_t now = ms + 2500000;
	int burst = 0;
	while (mbcf_pace_ready(&p, now)) {
		mbcf_pace_sent(&p, 1000, now);
		burst++;
	}
	EXPECT_EQ(burst, 3);
	EXPECT_EQ(p.next, 4 * ms);	// exactly where the rate says
	EXPECT_FALSE(p.held);		// caught up
	// served 10 ms late: only the slack is made up for
	mbcf_pace_hold(&p);
	now = 14 * ms;
	burst = 0;
	while (mbcf_pace_ready(&p, now)) {
		mbcf_pace_sent(&p, 1000, now);
		burst++;
	}
	EXPECT_EQ(burst, 4);		// 3 ms of slack + the frame itself
	EXPECT_EQ(p.next, now + ms);
	// an idle flow gets one frame of credit whatever the slack
	now += 50 * ms;
	burst = 0;
	while (mbcf_pace_ready(&p, now)) {
		mbcf_pace_sent(&p, 1000, now);
		burst++;
	}
	EXPECT_EQ(burst, 2);
	// slack 0: a held flow is treated like an idle one
	mbcf_pace q = paced(8000);
	mbcf_pace_sent(&q, 1000, 0);
	mbcf_pace_sent(&q, 1000, 0);
	mbcf_pace_hold(&q);
	burst = 0;
	while (mbcf_pace_ready(&q, 10 * ms)) {
		mbcf_pace_sent(&q, 1000, 10 * ms);
		burst++;
	}
	EXPECT_EQ(burst, 2);
}

TEST(PaceClock, RateChangeMidStreamRescalesTheWait)
{
	const uint64_t ms = 1000000;
	mbcf_pace p = paced(8000);
	mbcf_pace_sent(&p, 1000, 0);
	mbcf_pace_sent(&p, 1000, 0);
	ASSERT_EQ(p.next, ms);

	// half way through, twice as fast: the other half takes 0.25 ms
	mbcf_pace_set(&p, 16000, ms / 2);
	EXPECT_EQ(p.next, ms / 2 + ms / 4);
	EXPECT_EQ(p.kbps, 16000u);
	mbcf_pace_sent(&p, 1000, p.next);
	EXPECT_EQ(p.next, ms / 2 + ms / 4 + ms / 2);

	// slower: the wait left grows
	uint64_t at = p.next - 100000;
	mbcf_pace_set(&p, 4000, at);
	EXPECT_EQ(p.next, at + 400000);

	// setting the same rate changes nothing
	uint64_t before = p.next;
	mbcf_pace_set(&p, 4000, 0);
	EXPECT_EQ(p.next, before);

	// a rate change after the due time: the next frame still leaves at once
	mbcf_pace_set(&p, 8000, before + 5 * ms);
	EXPECT_TRUE(mbcf_pace_ready(&p, before + 5 * ms));
}

TEST(PaceClock, ZeroRemovesTheLimitAndANewRateStartsAfresh)
{
	mbcf_pace p = paced(8);
	mbcf_pace_sent(&p, 1500, 0);
	mbcf_pace_sent(&p, 1500, 0);
	EXPECT_FALSE(mbcf_pace_ready(&p, 1));
	mbcf_pace_set(&p, 0, 1);
	EXPECT_TRUE(mbcf_pace_ready(&p, 1));
	EXPECT_EQ(p.kbps, 0u);
	mbcf_pace_sent(&p, 1500, 1);	// unpaced: the clock stays unprimed
	EXPECT_FALSE(p.primed);
	mbcf_pace_set(&p, 8000, 2);
	EXPECT_TRUE(mbcf_pace_ready(&p, 2));
	mbcf_pace_sent(&p, 1000, 2);
	EXPECT_EQ(p.next, 2u);	// the credit of an idle flow
}

TEST(PaceClock, ARefundGivesTheTimeOfFramesThatNeverLeftBack)
{
	const uint64_t ms = 1000000;
	mbcf_pace p = paced(8000);	// 1000 bytes = 1 ms
	mbcf_pace_sent(&p, 1000, 0);
	mbcf_pace_sent(&p, 1000, 0);
	mbcf_pace_sent(&p, 500, ms);
	EXPECT_EQ(p.next, 3 * ms / 2);
	mbcf_pace_refund(&p, 1500);	// the last two frames were refused
	EXPECT_EQ(p.next, 0u);
	EXPECT_TRUE(mbcf_pace_ready(&p, 0));
	// unpaced, or no frame counted yet: nothing to give back
	mbcf_pace q{};
	mbcf_pace_refund(&q, 1000);
	EXPECT_EQ(q.next, 0u);
	mbcf_pace r = paced(8000);
	mbcf_pace_refund(&r, 1000);
	EXPECT_EQ(r.next, 0u);
	EXPECT_FALSE(r.primed);
}

TEST(PaceClock, HugeAndTinyRatesDoNotOverflow)
{
	const uint32_t kmax = std::numeric_limits<uint32_t>::max();
	const uint32_t bmax = std::numeric_limits<uint32_t>::max();

	// the largest frame at the smallest rate: 2^32 * 8e6 ns fits
	EXPECT_EQ(mbcf_pace_ns(1, bmax, nullptr), (uint64_t)bmax * kNs);
	// the smallest frame at the largest rate: 0 ns, but the fraction adds up
	uint32_t rem = 0;
	uint64_t sum = 0;
	for (int i = 0; i < 1000; i++)
		sum += mbcf_pace_ns(kmax, 64, &rem);
	EXPECT_EQ(sum, 64000ull * kNs / kmax);

	// rescaling a crawl's wait to the top rate and back, saturating
	mbcf_pace p = paced(1);
	mbcf_pace_sent(&p, bmax, 0);
	mbcf_pace_sent(&p, bmax, 0);
	EXPECT_EQ(p.next, (uint64_t)bmax * kNs);
	mbcf_pace_set(&p, kmax, 0);
	EXPECT_EQ(p.next, (uint64_t)bmax * kNs / kmax);
	mbcf_pace_set(&p, 1, 0);
	EXPECT_LE(p.next, (uint64_t)bmax * kNs);
	EXPECT_GE(p.next, (uint64_t)bmax * kNs - kmax);

	// an impossible remainder (not one of ours) is ignored
	rem = 77;
	EXPECT_EQ(mbcf_pace_ns(10, 1, &rem), 800000u);
}

TEST(PaceClock, TheClockMayWrap)
{
	// start just below 2^64 and cross it: due times compare serially
	const uint64_t ms = 1000000;
	uint64_t now = std::numeric_limits<uint64_t>::max() - 2 * ms + 1;
	mbcf_pace p = paced(8000);
	mbcf_pace_sent(&p, 1000, now);
	mbcf_pace_sent(&p, 1000, now);
	for (int i = 0; i < 5; i++) {
		uint64_t due = p.next;
		EXPECT_FALSE(mbcf_pace_ready(&p, due - 1)) << i;
		EXPECT_TRUE(mbcf_pace_ready(&p, due)) << i;
		EXPECT_EQ(mbcf_pace_peek(&p, 1000, due), due + ms);
		mbcf_pace_sent(&p, 1000, due);
		EXPECT_EQ(p.next, due + ms);	// mod 2^64
	}
	EXPECT_LT(p.next, now);	// it wrapped
	// a late service across the wrap still gets one frame of credit only
	uint64_t late = p.next + 10 * ms;
	mbcf_pace_sent(&p, 1000, late);
	EXPECT_EQ(p.next, late);
}

// ---- a paced connection ------------------------------------------------------

namespace {

constexpr uint32_t kRkey = 0x77;
constexpr uint64_t kBase = 0x10000;
constexpr uint32_t kEth = 14;

struct PacedPair : ::testing::Test {
	Env a, b;
	uint64_t now = 1000000000;

	void SetUp() override
	{
		mbcf_conn_cfg ca = default_cfg(10, 20, 100, 200);
		mbcf_conn_cfg cb = default_cfg(20, 10, 200, 100);
		ca.frame_overhead = cb.frame_overhead = kEth;
		ca.window = cb.window = 64;
		ca.rto_ns = cb.rto_ns = 50000000;	// 50 ms
		ASSERT_EQ(a.init(ca), 0);
		ASSERT_EQ(b.init(cb), 0);
		// b's send side settled, as at RTS: a frame placed early must
		// acknowledge b's stream (docs/protocol.md 5.1)
		ASSERT_EQ(mbcf_conn_set_send(&b.conn, &cb), 0);
		b.add_region(kRkey, kBase, 1 << 20, ACC_ALL);
	}

	void post_write(uint64_t cookie, uint32_t len)
	{
		a.local[cookie] = std::vector<uint8_t>(len, (uint8_t)cookie);
		mbcf_wr w = make_wr(cookie, MBCF_OP_WRITE, len, kBase, kRkey);
		ASSERT_EQ(mbcf_conn_post(&a.conn, &w, now), 0);
	}
};

}  // namespace

TEST_F(PacedPair, FramesLeaveExactlyWhenDue)
{
	const uint32_t kbps = 12000;	// 1514-byte frame ~ 1 ms
	mbcf_conn_set_rate(&a.conn, kbps, now);
	post_write(1, 20 * 1440);

	std::vector<uint64_t> at;	// when each frame left
	std::vector<uint32_t> size;
	uint64_t due;
	int acks_req = 0;
	for (int guard = 0; guard < 1000; guard++) {
		while (!a.out.empty()) {
			at.push_back(now);
			size.push_back((uint32_t)a.out.front().size() + kEth);
			mbcf_frame f;
			ASSERT_TRUE(parse(a.out.front(), &f));
			acks_req += !!(f.flags & MBCF_F_ACKREQ);
			deliver(b, a.out.front(), now);
			a.out.pop_front();
		}
		pump(b, a, now);	// ACKs: unpaced, immediate
		if (!mbcf_conn_pace_due(&a.conn, &due))
			break;
		ASSERT_GT(due, now);
		now = due;
		mbcf_conn_kick(&a.conn, now);
	}
	ASSERT_EQ(a.cqes.size(), 1u);
	EXPECT_EQ(a.cqes[0].status, MBCF_WC_SUCCESS);
	ASSERT_GE(at.size(), 20u);
	// two back to back (the idle credit), then each frame at the exact
	// time the previous one's bytes take at the rate
	EXPECT_EQ(at[0], at[1]);
	uint32_t rem = 0;
	uint64_t clock = at[1];
	mbcf_pace_ns(kbps, size[0], &rem);	// the credit frame
	rem = 0;
	for (size_t i = 2; i < at.size(); i++) {
		clock += mbcf_pace_ns(kbps, size[i - 1], &rem);
		EXPECT_EQ(at[i], clock) << i;
	}
	// a quarter of the 50 ms RTO is ~12 frames: acks are asked for often
	// enough that none is ever late, and not for every frame
	EXPECT_GE(acks_req, 2);
	EXPECT_LT(acks_req, (int)at.size());
	EXPECT_EQ(a.conn.ctr.timeouts, 0u);
	EXPECT_EQ(a.conn.ctr.retransmits, 0u);
}

TEST_F(PacedPair, UnpacedAfterZeroAndControlFramesAreNeverHeld)
{
	mbcf_conn_set_rate(&a.conn, 8, now);	// 1.5 s per frame
	post_write(1, 4 * 1440);
	EXPECT_EQ(a.out.size(), 2u);	// the idle credit
	uint64_t due;
	ASSERT_TRUE(mbcf_conn_pace_due(&a.conn, &due));
	EXPECT_GT(due, now + 1000000000ull);
	// the receiver's ACK is a control frame: it leaves whatever the rate
	mbcf_conn_set_rate(&b.conn, 8, now);
	settle(a, b, now);
	EXPECT_EQ(b.conn.ctr.acks_tx, 1u);
	// 0 removes the limit: the rest leaves at once, no kick needed
	mbcf_conn_set_rate(&a.conn, 0, now);
	EXPECT_FALSE(mbcf_conn_pace_due(&a.conn, &due));
	settle(a, b, now);
	ASSERT_EQ(a.cqes.size(), 1u);
	EXPECT_EQ(a.cqes[0].status, MBCF_WC_SUCCESS);
}

TEST_F(PacedPair, RetransmissionsArePacedAndTheWaitIsNoTimeout)
{
	const uint32_t kbps = 100;	// 1514 bytes: 121 ms, longer than the RTO
	const uint64_t cost = mbcf_pace_ns(kbps, 1400, nullptr);
	mbcf_conn_set_rate(&a.conn, kbps, now);
	post_write(1, 3 * 1440);
	ASSERT_EQ(a.out.size(), 2u);	// the idle credit: two frames
	a.out.pop_front();		// the first is lost
	deliver(b, a.out.front(), now);	// the second arrives: a gap
	a.out.pop_front();
	EXPECT_EQ(b.conn.ctr.rx_early, 1u);	// ... and is placed early
	pump(b, a, now);		// LOST(100): resend 100 alone
	EXPECT_EQ(a.conn.ctr.lost_rx, 1u);
	EXPECT_TRUE(a.out.empty());	// the resend waits for the clock
	uint64_t due;
	ASSERT_TRUE(mbcf_conn_pace_due(&a.conn, &due));
	EXPECT_GT(due, now + cost);

	// The RTO comes first, while the clock still holds the resend: no
	// timeout is counted and no retry spent; the timer waits for the clock.
	ASSERT_NE(a.timer_at, 0u);
	ASSERT_LT(a.timer_at, due);
	now = a.timer_at;
	mbcf_conn_timeout(&a.conn, now);
	EXPECT_EQ(a.conn.ctr.timeouts, 0u);
	EXPECT_EQ(a.conn.retry_left, 3u);
	EXPECT_TRUE(a.out.empty());
	EXPECT_EQ(a.timer_at, due + 50000000);

	// the resend and the last frame leave one by one at the rate
	std::vector<uint64_t> at;
	for (int guard = 0; guard < 100 && a.cqes.empty(); guard++) {
		while (!a.out.empty()) {
			at.push_back(now);
			deliver(b, a.out.front(), now);
			a.out.pop_front();
		}
		pump(b, a, now);
		if (!a.cqes.empty() || !mbcf_conn_pace_due(&a.conn, &due))
			break;
		if (a.timer_at && a.timer_at < due) {
			// the RTO between two paced frames: nothing to resend yet
			now = a.timer_at;
			mbcf_conn_timeout(&a.conn, now);
			EXPECT_TRUE(a.out.empty());
			continue;
		}
		now = due;
		mbcf_conn_kick(&a.conn, now);
	}
	ASSERT_EQ(a.cqes.size(), 1u);
	EXPECT_EQ(a.cqes[0].status, MBCF_WC_SUCCESS);
	EXPECT_EQ(a.conn.ctr.timeouts, 0u);
	EXPECT_EQ(a.conn.ctr.retransmits, 1u);
	EXPECT_EQ(a.conn.ctr.selective_repeats, 1u);	// 101 not resent
	ASSERT_EQ(at.size(), 2u);
	for (size_t i = 1; i < at.size(); i++)
		EXPECT_GE(at[i] - at[i - 1], cost) << i;
}

TEST_F(PacedPair, ReadResponsesArePacedByTheResponder)
{
	mbcf_conn_set_rate(&b.conn, 12000, now);
	a.local[1] = std::vector<uint8_t>(10 * 1440);
	mbcf_wr w = make_wr(1, MBCF_OP_READ_REQ, 10 * 1440, kBase, kRkey);
	ASSERT_EQ(mbcf_conn_post(&a.conn, &w, now), 0);
	pump(a, b, now);
	EXPECT_EQ(b.out.size(), 2u);	// two responses, then the clock
	uint64_t due;
	int kicks = 0;
	for (int guard = 0; guard < 100 && a.cqes.empty(); guard++) {
		settle(a, b, now);
		if (!mbcf_conn_pace_due(&b.conn, &due))
			continue;
		now = due;
		mbcf_conn_kick(&b.conn, now);
		kicks++;
	}
	ASSERT_EQ(a.cqes.size(), 1u);
	EXPECT_EQ(a.cqes[0].status, MBCF_WC_SUCCESS);
	EXPECT_GE(kicks, 8);
}

TEST_F(PacedPair, UnreliableConnectionsArePacedToo)
{
	Env u, v;
	mbcf_conn_cfg cu = default_cfg(30, 40, 1, 1);
	mbcf_conn_cfg cv = default_cfg(40, 30, 1, 1);
	cu.uc = cv.uc = true;
	cu.frame_overhead = kEth;
	ASSERT_EQ(u.init(cu), 0);
	ASSERT_EQ(v.init(cv), 0);
	v.add_region(kRkey, kBase, 1 << 16, ACC_ALL);
	mbcf_conn_set_rate(&u.conn, 12000, now);
	u.local[1] = std::vector<uint8_t>(5 * 1440, 1);
	mbcf_wr w = make_wr(1, MBCF_OP_WRITE, 5 * 1440, kBase, kRkey);
	ASSERT_EQ(mbcf_conn_post(&u.conn, &w, now), 0);
	EXPECT_EQ(u.out.size(), 2u);
	EXPECT_TRUE(u.cqes.empty());
	uint64_t due;
	while (mbcf_conn_pace_due(&u.conn, &due)) {
		now = due;
		mbcf_conn_kick(&u.conn, now);
	}
	EXPECT_EQ(u.out.size(), 5u);
	ASSERT_EQ(u.cqes.size(), 1u);
}
