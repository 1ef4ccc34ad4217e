// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
// Writes and sends in a ping-pong (docs/protocol.md 6.2): after
// MBCF_PP_STREAK messages that asked for an acknowledgement were answered
// by a frame of the receiver's within MBCF_ACK_LAZY_NS, the receiver owes
// the next one late and its answer carries ack_psn: no ACK frame either
// way.  A message left unanswered gets its ACK from the timer and ends the
// streak; an end whose own frames wait for the window acknowledges at once.
#include <gtest/gtest.h>

#include "harness.h"
#include "pair.h"

using namespace mbcft;

namespace {

constexpr uint64_t kReact = MBCF_ACK_LAZY_NS / 5;	// the application's turn

class PingPongAck : public Pair {
protected:
	// e writes (or sends) to o, which sees it; kReact later o answers.
	void half(Env &e, Env &o, uint8_t op)
	{
		post(e, op, 8);
		pump(e, o, now);
		now += kReact;
	}

	// rounds of a ping-pong; returns nothing, the counters tell
	void rounds(int n, uint8_t op)
	{
		for (int i = 0; i < n; i++) {
			if (op == MBCF_OP_SEND) {
				post_recv(b, 64);
				post_recv(a, 64);
			}
			half(a, b, op);
			half(b, a, op);
		}
		pump(a, b, now);	// a's last answer, ack_psn only
	}
};

TEST_F(PingPongAck, WritesAcknowledgeEachOtherWithoutAckFrames)
{
	rounds(10, MBCF_OP_WRITE);
	// the first MBCF_PP_STREAK messages each way were acknowledged at once
	EXPECT_EQ(a.conn.ctr.acks_tx, (uint64_t)MBCF_PP_STREAK);
	EXPECT_EQ(b.conn.ctr.acks_tx, (uint64_t)MBCF_PP_STREAK);
	EXPECT_EQ(a.conn.pp_streak, MBCF_PP_STREAK);
	EXPECT_EQ(b.conn.pp_streak, MBCF_PP_STREAK);
	// every write of a's completed, acknowledged by b's answer
	ASSERT_EQ(a.cqes.size(), 10u);
	for (auto &c : a.cqes)
		EXPECT_EQ(c.status, MBCF_WC_SUCCESS);
	// b's last write waits for a's late ACK
	EXPECT_EQ(b.cqes.size(), 9u);
	EXPECT_EQ(a.conn.ack_lazy_at, now - kReact + MBCF_ACK_LAZY_NS);
	EXPECT_EQ(a.timer_at, a.conn.ack_lazy_at);
	idle_acks();
	EXPECT_EQ(b.cqes.size(), 10u);
	EXPECT_EQ(a.conn.ctr.acks_tx, (uint64_t)MBCF_PP_STREAK + 1);
	// the ACK came late, not a probe: nothing was sent twice
	EXPECT_EQ(a.conn.ctr.retransmits + b.conn.ctr.retransmits, 0u);
	EXPECT_EQ(b.conn.ctr.tail_probes, 0u);
	EXPECT_EQ(b.conn.snd_una, b.conn.snd_max);
}

TEST_F(PingPongAck, SendsToo)
{
	rounds(8, MBCF_OP_SEND);
	EXPECT_EQ(a.conn.ctr.acks_tx, (uint64_t)MBCF_PP_STREAK);
	EXPECT_EQ(b.conn.ctr.acks_tx, (uint64_t)MBCF_PP_STREAK);
	idle_acks();
	// 8 sends and 8 receives at each end, all good
	for (auto *e : {&a, &b}) {
		ASSERT_EQ(e->cqes.size(), 8u);
		ASSERT_EQ(e->rcqes.size(), 8u);
		for (auto &c : e->cqes)
			EXPECT_EQ(c.status, MBCF_WC_SUCCESS);
		for (auto &c : e->rcqes)
			EXPECT_EQ(c.status, MBCF_WC_SUCCESS);
	}
}

// Once b stops answering, its ACK comes from the timer, MBCF_ACK_LAZY_NS
// after the write, and the next writes are acknowledged at once again.
TEST_F(PingPongAck, AOneWayStreamAfterAPingPongIsAcknowledgedAtOnce)
{
	rounds(4, MBCF_OP_WRITE);
	idle_acks();
	a.cqes.clear();
	uint64_t acks = b.conn.ctr.acks_tx;
	post(a, MBCF_OP_WRITE, 8);
	pump(a, b, now);
	uint64_t arrived = now;
	EXPECT_TRUE(b.out.empty());		// owed late: b may answer
	ASSERT_EQ(b.timer_at, arrived + MBCF_ACK_LAZY_NS);
	fire(b);
	ASSERT_EQ(b.out.size(), 1u);
	EXPECT_EQ(frame(b, 0).op, MBCF_OP_ACK);
	pump(b, a, now);
	ASSERT_EQ(a.cqes.size(), 1u);
	EXPECT_EQ(b.conn.pp_streak, 0);
	for (int i = 0; i < 5; i++) {
		now += kReact;
		post(a, MBCF_OP_WRITE, 8);
		pump(a, b, now);
		ASSERT_EQ(b.out.size(), 1u) << i;	// at once
		EXPECT_EQ(frame(b, 0).op, MBCF_OP_ACK) << i;
		pump(b, a, now);
	}
	EXPECT_EQ(a.cqes.size(), 6u);
	EXPECT_EQ(b.conn.ctr.acks_tx, acks + 6);
	EXPECT_EQ(a.conn.ctr.tail_probes, 0u);
}

// In a ping-pong, b's own writes fill its window (a has not acknowledged
// them): a write of a's that asks is acknowledged at once, as a may be
// waiting for that ACK just as b waits for a's.
TEST_F(PingPongAck, AnEndWaitingForTheWindowAcknowledgesAtOnce)
{
	setup_window(2);
	rounds(4, MBCF_OP_WRITE);
	idle_acks();
	ASSERT_EQ(b.conn.pp_streak, MBCF_PP_STREAK);
	// b writes until one waits for the window
	size_t sent = 0;
	for (int i = 0; i < 32 && (i == 0 || b.out.size() > sent); i++) {
		sent = b.out.size();
		post(b, MBCF_OP_WRITE, 8);
	}
	ASSERT_EQ(b.out.size(), sent);
	ASSERT_GE(sent, 2u);
	std::deque<std::vector<uint8_t>> held;
	held.swap(b.out);
	uint64_t acks = b.conn.ctr.acks_tx;
	post(a, MBCF_OP_WRITE, 8);
	pump(a, b, now);
	ASSERT_EQ(b.out.size(), 1u);
	EXPECT_EQ(frame(b, 0).op, MBCF_OP_ACK);
	EXPECT_EQ(b.conn.ctr.acks_tx, acks + 1);
	// the held writes arrive; everything completes
	b.out.insert(b.out.begin(), held.begin(), held.end());
	settle(a, b, now);
	idle_acks();
	EXPECT_EQ(b.conn.snd_una, b.conn.snd_max);
	EXPECT_EQ(a.conn.snd_una, a.conn.snd_max);
}

}  // namespace
