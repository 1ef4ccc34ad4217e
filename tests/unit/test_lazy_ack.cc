// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
// Responses acknowledged late (docs/protocol.md 6.1 rule 3, 6.2): a burst
// of read or atomic responses ends without ACKREQ; the requester's next
// frame carries ack_psn, or, when none leaves MBCF_ACK_LAZY_NS after the
// response, an ACK does.  The responder's tail probe waits for that ACK
// even when both timers fire a whole timer slack late (the kernel's tick:
// 4 ms here; the round trip 0.5 ms, the retransmission timeout 20 ms).
#include <gtest/gtest.h>

#include "harness.h"
#include "pair.h"

using namespace mbcft;

namespace {

constexpr uint64_t kSlack = 4 * kMs;

class LazyAck : public Pair {
protected:
	void SetUp() override { setup_rto(20 * kMs); }

	void setup_rto(uint64_t rto)
	{
		mbcf_conn_cfg ca = default_cfg(0x11, 0x22, 100, 200);
		mbcf_conn_cfg cb = default_cfg(0x22, 0x11, 200, 100);

		ca.rto_ns = cb.rto_ns = rto;
		ca.timer_slack_ns = cb.timer_slack_ns = kSlack;
		setup(ca, cb);
		measure_rtt();
	}

	// A posts a read of len bytes; it reaches B, B's response reaches A.
	uint64_t read_once(uint32_t len)
	{
		uint64_t c = post(a, MBCF_OP_READ_REQ, len);
		now += kMs / 4;
		pump(a, b, now);
		now += kMs / 4;
		pump(b, a, now);
		return c;
	}

	void expect_all_asked_nothing(Env &e)
	{
		for (size_t i = 0; i < e.out.size(); i++)
			EXPECT_FALSE(frame(e, i).flags & MBCF_F_ACKREQ) << i;
	}
};

// A ping-pong of reads and atomics: no response asks, no ACK frame is
// sent -- each request acknowledges the response before it -- and the
// responder's ring is freed as the requests come.
TEST_F(LazyAck, APingPongSendsNoAckFrame)
{
	for (int i = 0; i < 10; i++) {
		uint8_t op = i % 2 ? MBCF_OP_FETCH_ADD : MBCF_OP_READ_REQ;
		post(a, op, 8);
		now += kMs / 4;
		pump(a, b, now);
		ASSERT_EQ(b.out.size(), 1u) << i;
		EXPECT_FALSE(frame(b, 0).flags & MBCF_F_ACKREQ) << i;
		// the request acknowledged every earlier response
		EXPECT_EQ(mbcf_seq_diff(b.conn.snd_max, b.conn.snd_una), 1) << i;
		now += kMs / 4;
		pump(b, a, now);
		ASSERT_EQ(a.cqes.size(), (size_t)i + 1);
		EXPECT_EQ(a.cqes[i].status, MBCF_WC_SUCCESS);
		EXPECT_EQ(a.conn.ack_lazy_at, now + MBCF_ACK_LAZY_NS) << i;
		EXPECT_TRUE(a.out.empty()) << i;
		now += MBCF_ACK_LAZY_NS / 2;	// the application's turn
	}
	EXPECT_EQ(a.conn.ctr.acks_tx, 0u);
	EXPECT_EQ(b.conn.ctr.acks_req, 0u);
	EXPECT_EQ(b.atomics, 5);
	// the end: one ACK, and nothing is left to probe or resend
	idle_acks();
	EXPECT_EQ(a.conn.ctr.acks_tx, 1u);
	EXPECT_EQ(b.conn.snd_una, b.conn.snd_max);
	EXPECT_EQ(b.conn.resp.head, b.conn.resp.tail);
	EXPECT_EQ(a.conn.ack_lazy_at, 0u);
	EXPECT_EQ(b.timer_at, 0u);
	EXPECT_EQ(b.conn.ctr.tail_probes, 0u);
	EXPECT_EQ(b.conn.ctr.retransmits, 0u);
}

// The requester goes idle: its late ACK, even a whole slack late, reaches
// the responder before the tail probe would leave (itself no sooner than
// 2 srtt plus the slack after the response).
TEST_F(LazyAck, AnIdleEndIsAcknowledgedBeforeTheTailProbe)
{
	uint64_t c = post(a, MBCF_OP_READ_REQ, 64);
	now += kMs / 4;
	pump(a, b, now);
	uint64_t sent = now;
	ASSERT_EQ(b.out.size(), 1u);
	expect_all_asked_nothing(b);
	EXPECT_EQ(b.conn.tlp_at, sent + 2 * (kMs / 2) + kSlack);
	now += kMs / 4;
	pump(b, a, now);
	ASSERT_EQ(a.cqes.size(), 1u);
	EXPECT_EQ(a.cqes[0].cookie, c);
	EXPECT_EQ(a.timer_at, now + MBCF_ACK_LAZY_NS);
	now = a.timer_at + kSlack;	// as late as the timer may be
	a.timer_at = 0;
	mbcf_conn_timeout(&a.conn, now);
	ASSERT_EQ(a.out.size(), 1u);
	EXPECT_EQ(frame(a, 0).op, MBCF_OP_ACK);
	now += kMs / 4;
	ASSERT_LT(now, b.conn.tlp_at);
	pump(a, b, now);
	EXPECT_EQ(b.conn.snd_una, b.conn.snd_max);
	EXPECT_EQ(b.timer_at, 0u);
	EXPECT_TRUE(b.out.empty());
	EXPECT_EQ(b.conn.ctr.tail_probes, 0u);
	EXPECT_EQ(a.conn.ctr.acks_tx, 1u);
}

// The late ACK is lost: the tail probe asks, the requester answers the
// duplicate, and the read completed once.
TEST_F(LazyAck, TheLateAckLostTheTailProbeAsks)
{
	read_once(64);
	ASSERT_EQ(a.cqes.size(), 1u);
	fire(a);
	ASSERT_EQ(a.out.size(), 1u);
	a.out.clear();			// the ACK is lost
	fire(b);			// the tail probe
	ASSERT_EQ(b.out.size(), 1u);
	EXPECT_EQ(frame(b, 0).op, MBCF_OP_READ_RESP);
	EXPECT_TRUE(frame(b, 0).flags & MBCF_F_ACKREQ);
	settle(a, b, now);
	EXPECT_EQ(a.cqes.size(), 1u);
	EXPECT_EQ(a.conn.ctr.drop_duplicate, 1u);
	EXPECT_EQ(b.conn.snd_una, b.conn.snd_max);
	EXPECT_EQ(b.conn.ctr.tail_probes, 1u);
	EXPECT_EQ(b.timer_at, 0u);
	EXPECT_EQ(a.conn.ack_lazy_at, 0u);
}

// The response's last frame is lost: nothing is owed to an unfinished
// response, the tail probe resends that frame asking, and the read
// completes with its data.
TEST_F(LazyAck, TheLastResponseFrameLost)
{
	uint8_t *t = b.target(kRkey, kBase);
	for (int i = 0; i < 5000; i++)
		t[i] = (uint8_t)(i * 3);
	uint64_t c = post(a, MBCF_OP_READ_REQ, 5000);
	now += kMs / 4;
	pump(a, b, now);
	ASSERT_GE(b.out.size(), 2u);
	expect_all_asked_nothing(b);
	b.out.pop_back();
	now += kMs / 4;
	pump(b, a, now);
	EXPECT_TRUE(a.cqes.empty());
	EXPECT_EQ(a.conn.ack_lazy_at, 0u);
	EXPECT_TRUE(a.out.empty());
	fire(b);
	ASSERT_EQ(b.out.size(), 1u);
	EXPECT_TRUE(frame(b, 0).flags & MBCF_F_LAST);
	EXPECT_TRUE(frame(b, 0).flags & MBCF_F_ACKREQ);
	settle(a, b, now);
	ASSERT_EQ(a.cqes.size(), 1u);
	EXPECT_EQ(a.cqes[0].status, MBCF_WC_SUCCESS);
	EXPECT_EQ(memcmp(a.local[c].data(), t, 5000), 0);
	EXPECT_EQ(b.conn.snd_una, b.conn.snd_max);
	EXPECT_EQ(a.conn.ctr.drop_duplicate, 0u);
}

// Reads in flight: the rules that keep the window moving still ask (every
// half window, 8 frames here); only the burst's end asks nothing.
TEST_F(LazyAck, ABurstStillAsksEveryHalfWindow)
{
	defer = true;
	for (int i = 0; i < 3; i++)
		post(a, MBCF_OP_READ_REQ, 5000);	// 4 frames each
	mbcf_conn_kick(&a.conn, now);
	pump(a, b, now);
	ASSERT_EQ(b.out.size(), 12u);
	std::vector<size_t> asked;
	for (size_t i = 0; i < b.out.size(); i++)
		if (frame(b, i).flags & MBCF_F_ACKREQ)
			asked.push_back(i);
	EXPECT_EQ(asked, (std::vector<size_t>{7}));
	settle(a, b, now);
	EXPECT_EQ(a.cqes.size(), 3u);
	idle_acks();
	EXPECT_EQ(b.conn.snd_una, b.conn.snd_max);
	EXPECT_EQ(b.conn.resp.head, b.conn.resp.tail);
}

// A verbs timeout too short to outwait a late ACK and the timers' slack:
// the burst's end asks, as any other, and is acknowledged at once.
TEST_F(LazyAck, AShortTimeoutAsksAtTheEnd)
{
	setup_rto(2 * (MBCF_TLP_MIN_NS + kSlack) - 1);
	read_once(64);
	ASSERT_EQ(a.cqes.size(), 1u);
	EXPECT_EQ(a.conn.ack_lazy_at, 0u);
	EXPECT_EQ(a.conn.ctr.acks_tx, 1u);
	EXPECT_EQ(b.conn.ctr.acks_req, 1u);
	pump(a, b, now);
	EXPECT_EQ(b.conn.snd_una, b.conn.snd_max);
}

// The QP is reset right after the read completed: the owed ACK leaves
// first, like one held by the environment.
TEST_F(LazyAck, AFlushSendsTheOwedAck)
{
	read_once(64);
	ASSERT_NE(a.conn.ack_lazy_at, 0u);
	mbcf_conn_flush(&a.conn);
	ASSERT_EQ(a.out.size(), 1u);
	EXPECT_EQ(frame(a, 0).op, MBCF_OP_ACK);
	EXPECT_EQ(a.conn.ack_lazy_at, 0u);
	pump(a, b, now);
	EXPECT_EQ(b.conn.snd_una, b.conn.snd_max);
}

}  // namespace
