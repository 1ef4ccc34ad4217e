// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
// Quiet messages (MBCF_WR_QUIET: verbs unsignaled writes and sends) ask for
// no acknowledgement at the end of a burst (docs/protocol.md 6.1 rule 3):
// the next frame that asks, or any frame of the peer's, acknowledges them,
// and the tail probe asks if nothing comes (7.6).  As in test_lazy_ack.cc: the timer slack is the kernel's tick (4 ms), the
// round trip 0.5 ms, the retransmission timeout 20 ms.
#include <gtest/gtest.h>

#include "harness.h"
#include "pair.h"

using namespace mbcft;

namespace {

constexpr uint64_t kSlack = 4 * kMs;

class QuietAck : public Pair {
protected:
	void SetUp() override
	{
		mbcf_conn_cfg ca = default_cfg(0x11, 0x22, 100, 200);
		mbcf_conn_cfg cb = default_cfg(0x22, 0x11, 200, 100);

		ca.rto_ns = cb.rto_ns = 20 * kMs;
		ca.window = cb.window = 64;	// rule 1: ask every 32 frames
		ca.timer_slack_ns = cb.timer_slack_ns = kSlack;
		setup(ca, cb);
		measure_rtt();		// signaled writes
		wr_flags = MBCF_WR_QUIET;
		for (int i = 0; i < 8; i++)
			post_recv(b, 8192);
	}

	size_t asked(Env &e)
	{
		size_t n = 0;

		for (size_t i = 0; i < e.out.size(); i++)
			n += (frame(e, i).flags & MBCF_F_ACKREQ) != 0;
		return n;
	}
};

// UCX's way: fragments posted one by one, each its own burst, none
// signaled.  Not one asks (28 frames: rule 1 would ask at 32), the
// receiver sends nothing, and nothing but a post is due to move the
// connection (the module then takes the next post with a doorbell).  The
// next message someone waits for asks, and one ACK completes them all.
TEST_F(QuietAck, BurstsOfQuietMessagesAskNothing)
{
	for (int i = 0; i < 7; i++) {
		post(a, i % 2 ? MBCF_OP_SEND : MBCF_OP_WRITE, 5000);	// 4 frames
		EXPECT_EQ(a.out.size(), 4u) << i;
		EXPECT_EQ(asked(a), 0u) << i;
		EXPECT_FALSE(mbcf_conn_progress_due(&a.conn)) << i;
		// a probe, should nothing follow, a slack late (6.2, 7.6)
		EXPECT_EQ(a.conn.tlp_at, now + 2 * (kMs / 2) + kSlack) << i;
		now += kMs / 8;
		pump(a, b, now);
		EXPECT_TRUE(b.out.empty()) << i;
		EXPECT_EQ(b.conn.ack_lazy_at, 0u) << i;
		now += kMs / 8;
	}
	EXPECT_EQ(a.conn.ctr.acks_req, 0u);
	EXPECT_EQ(b.rcqes.size(), 3u);	// the sends
	EXPECT_TRUE(a.cqes.empty());
	wr_flags = 0;
	post(a, MBCF_OP_WRITE, 8);
	ASSERT_EQ(a.out.size(), 1u);
	EXPECT_EQ(asked(a), 1u);
	EXPECT_TRUE(mbcf_conn_progress_due(&a.conn));
	now += kMs / 4;
	ASSERT_LT(now, a.conn.tlp_at);
	settle(a, b, now);
	ASSERT_EQ(a.cqes.size(), 8u);
	for (const mbcf_cqe &c : a.cqes)
		EXPECT_EQ(c.status, MBCF_WC_SUCCESS);
	EXPECT_EQ(a.conn.snd_una, a.conn.snd_max);
	EXPECT_FALSE(mbcf_conn_progress_due(&a.conn));
	EXPECT_EQ(a.timer_at, 0u);
	EXPECT_EQ(b.conn.ctr.acks_tx, 1u);
	EXPECT_EQ(a.conn.ctr.tail_probes, 0u);
	EXPECT_EQ(a.conn.ctr.retransmits, 0u);
}

// A frame of the receiver's own acknowledges quiet messages: no ACK frame
// at all (a ping-pong of unsignaled sends: UCX's tag_lat).
TEST_F(QuietAck, TheReceiversNextFrameAcknowledges)
{
	for (int i = 0; i < 4; i++) {
		post(a, MBCF_OP_SEND, 8);
		now += kMs / 4;
		pump(a, b, now);
		EXPECT_TRUE(b.out.empty()) << i;
		post(b, MBCF_OP_SEND, 8);
		post_recv(a, 64);
		post_recv(b, 64);
		now += kMs / 4;
		pump(b, a, now);
		ASSERT_EQ(a.cqes.size(), (size_t)i + 1);
		EXPECT_TRUE(a.out.empty()) << i;
	}
	post(a, MBCF_OP_WRITE, 8);	// acknowledges b's last
	now += kMs / 4;
	pump(a, b, now);
	EXPECT_EQ(b.cqes.size(), 4u);
	EXPECT_EQ(b.conn.ctr.acks_tx, 0u);
	EXPECT_EQ(a.conn.ctr.acks_tx, 0u);
	EXPECT_EQ(a.conn.ctr.acks_req + b.conn.ctr.acks_req, 0u);
}

// A message someone waits for still ends its burst asking, and so does a
// later quiet burst while that message is unacknowledged; once it is
// acknowledged, quiet bursts ask nothing again.
TEST_F(QuietAck, AnUnacknowledgedLoudMessageStillAsks)
{
	wr_flags = 0;
	post(a, MBCF_OP_WRITE, 8);
	ASSERT_EQ(a.out.size(), 1u);
	EXPECT_EQ(asked(a), 1u);
	a.out.clear();				// lost
	wr_flags = MBCF_WR_QUIET;
	post(a, MBCF_OP_WRITE, 8);
	ASSERT_EQ(a.out.size(), 1u);
	EXPECT_EQ(asked(a), 1u);
	now += kMs / 4;
	settle(a, b, now);			// LOST, go-back, ACK
	ASSERT_EQ(a.cqes.size(), 2u);
	EXPECT_EQ(a.conn.snd_una, a.conn.snd_max);
	post(a, MBCF_OP_WRITE, 8);
	ASSERT_EQ(a.out.size(), 1u);
	EXPECT_EQ(asked(a), 0u);
}

// Quiet messages in one burst with a loud one last: only the end asks, as
// before; the frames before it owe nothing late once the ACK has left.
TEST_F(QuietAck, ALoudEndAsksAndNothingIsOwedLate)
{
	defer = true;
	post(a, MBCF_OP_WRITE, 8);
	post(a, MBCF_OP_SEND, 8);
	wr_flags = 0;
	post(a, MBCF_OP_WRITE, 8);
	mbcf_conn_kick(&a.conn, now);
	ASSERT_EQ(a.out.size(), 3u);
	EXPECT_FALSE(frame(a, 0).flags & MBCF_F_ACKREQ);
	EXPECT_FALSE(frame(a, 1).flags & MBCF_F_ACKREQ);
	EXPECT_TRUE(frame(a, 2).flags & MBCF_F_ACKREQ);
	now += kMs / 4;
	pump(a, b, now);
	ASSERT_EQ(b.out.size(), 1u);
	EXPECT_EQ(frame(b, 0).op, MBCF_OP_ACK);
	EXPECT_EQ(b.conn.ack_lazy_at, 0u);
	now += kMs / 4;
	pump(b, a, now);
	EXPECT_EQ(a.cqes.size(), 3u);
	EXPECT_EQ(b.conn.ctr.acks_tx, 1u);
}

// A quiet tail nothing follows: the tail probe asks (a slack late), the
// receiver answers the duplicate, the message completed once.
TEST_F(QuietAck, AQuietTailIsProbed)
{
	post(a, MBCF_OP_WRITE, 8);
	uint64_t sent = now;
	now += kMs / 4;
	pump(a, b, now);
	EXPECT_TRUE(b.out.empty());
	EXPECT_EQ(b.timer_at, 0u);
	fire(a);			// the tail probe
	EXPECT_EQ(now, sent + 2 * (kMs / 2) + kSlack);
	ASSERT_EQ(a.out.size(), 1u);
	EXPECT_TRUE(frame(a, 0).flags & MBCF_F_ACKREQ);
	settle(a, b, now);
	EXPECT_EQ(a.cqes.size(), 1u);
	EXPECT_EQ(b.conn.ctr.drop_duplicate, 1u);
	EXPECT_EQ(a.conn.snd_una, a.conn.snd_max);
	EXPECT_EQ(a.conn.ctr.tail_probes, 1u);
	EXPECT_EQ(a.timer_at, 0u);
}

// A resend after a loss ends asking, quiet or not: its ACK moves the
// recovery on at once (no wait for a probe or the retransmission timeout).
TEST_F(QuietAck, AResendAsks)
{
	defer = true;
	for (int i = 0; i < 3; i++)
		post(a, MBCF_OP_WRITE, 8);
	mbcf_conn_kick(&a.conn, now);
	ASSERT_EQ(a.out.size(), 3u);
	EXPECT_EQ(asked(a), 0u);
	a.out.erase(a.out.begin());	// the first is lost
	now += kMs / 4;
	pump(a, b, now);
	ASSERT_EQ(b.out.size(), 1u);
	EXPECT_EQ(frame(b, 0).op, MBCF_OP_LOST);
	now += kMs / 4;
	pump(b, a, now);		// go back: all three again
	ASSERT_EQ(a.out.size(), 3u);
	EXPECT_FALSE(frame(a, 0).flags & MBCF_F_ACKREQ);
	EXPECT_TRUE(frame(a, 2).flags & MBCF_F_ACKREQ);
	settle(a, b, now);
	EXPECT_EQ(a.cqes.size(), 3u);
	EXPECT_EQ(a.conn.snd_una, a.conn.snd_max);
	EXPECT_EQ(a.conn.ctr.tail_probes, 0u);
	EXPECT_EQ(a.conn.ctr.timeouts, 0u);
}

// Reads and atomics complete by their responses: the flag means nothing
// to them (their bursts ask as before).
TEST_F(QuietAck, ReadsAreNeverQuiet)
{
	post(a, MBCF_OP_READ_REQ, 8);
	ASSERT_EQ(a.out.size(), 1u);
	EXPECT_EQ(asked(a), 1u);
}

}  // namespace
