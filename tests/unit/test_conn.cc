// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
// Connection state machine, one mechanism per test, with exact frames,
// counters and a fake clock.
#include <gtest/gtest.h>

#include "harness.h"
#include "pair.h"

using namespace mbcft;

namespace {


TEST(Conn, InitRejectsBadConfig)
{
	Env e;
	mbcf_conn_cfg c = default_cfg(1, 2);

	EXPECT_EQ(e.init(c, 48, 16), MBCF_POST_INVAL);	// not a power of two
	c.mtu = 100;
	EXPECT_EQ(e.init(c), MBCF_POST_INVAL);
	c = default_cfg(1, 2);
	c.max_dest_rd_atomic = 32;
	EXPECT_EQ(e.init(c, 64, 16), MBCF_POST_INVAL);
	c = default_cfg(1, 2);
	c.retry_cnt = 8;
	EXPECT_EQ(e.init(c), MBCF_POST_INVAL);
	c = default_cfg(1, 2);
	c.window = 0;
	c.link_mbps = 100000;
	ASSERT_EQ(e.init(c), 0);
	EXPECT_EQ(e.conn.state, MBCF_CONN_RTS);
	EXPECT_EQ(e.conn.cfg.window, mbcf_conn_window_from_link(100000, 1500));
	EXPECT_STREQ(mbcf_conn_state_name(e.conn.state), "RTS");
}

TEST(Conn, WindowFromLinkScalesWithSpeed)
{
	EXPECT_EQ(mbcf_conn_window_from_link(10000, 1500), 166u);
	EXPECT_EQ(mbcf_conn_window_from_link(100000, 1500), 1666u);
	EXPECT_EQ(mbcf_conn_window_from_link(100000, 9000), 277u);
	EXPECT_EQ(mbcf_conn_window_from_link(400000, 1500), 4096u);
	EXPECT_EQ(mbcf_conn_window_from_link(0, 0), 128u);	// unknown: GbE
}

// Below four acknowledgement requests in flight the byte rule would starve
// the stream: jumbo frames on 10GbE (27 frames by bytes), slow links.
TEST(Conn, WindowFromLinkHoldsFourAckRequests)
{
	EXPECT_EQ(MBCF_WINDOW_PIPE, 4u * MBCF_ACK_EVERY_MAX);
	EXPECT_EQ(mbcf_conn_window_from_link(10000, 9000), (uint32_t)MBCF_WINDOW_PIPE);
	EXPECT_EQ(mbcf_conn_window_from_link(1000, 1500), (uint32_t)MBCF_WINDOW_PIPE);
	EXPECT_EQ(mbcf_conn_window_from_link(10, 1500), (uint32_t)MBCF_WINDOW_PIPE);
	EXPECT_EQ(mbcf_conn_window_from_link(12000, 1500), 200u);	// bytes rule above it
}

TEST_F(Pair, WriteIsAppliedAckedAndCompleted)
{
	post(a, MBCF_OP_WRITE, 100);
	ASSERT_EQ(a.out.size(), 1u);
	mbcf_frame f = frame(a, 0);
	EXPECT_EQ(f.op, MBCF_OP_WRITE);
	EXPECT_EQ(f.psn, 100u);
	EXPECT_EQ(f.ack_psn, 200u);
	EXPECT_EQ(f.flags, MBCF_F_ACKREQ | MBCF_F_FIRST | MBCF_F_LAST);
	EXPECT_EQ(a.timer_at, now + 1 * kMs);
	EXPECT_EQ(a.flushes, 1);
	settle(a, b, now);
	EXPECT_EQ(b.target(kRkey, kBase)[99], 0xab);
	ASSERT_EQ(a.cqes.size(), 1u);
	EXPECT_EQ(a.cqes[0].status, MBCF_WC_SUCCESS);
	EXPECT_EQ(a.cqes[0].op, MBCF_OP_WRITE);
	EXPECT_EQ(a.timer_at, 0u);
	EXPECT_EQ(b.conn.ctr.acks_tx, 1u);
	EXPECT_EQ(a.conn.ctr.acks_rx, 1u);
	EXPECT_EQ(b.conn.rcv_nxt, 101u);
	EXPECT_EQ(mbcf_conn_outstanding(&a.conn), 0u);
}

TEST_F(Pair, LargeWriteIsSegmented)
{
	const uint32_t seg = mbcf_codec_max_payload(1500, MBCF_OP_WRITE_IMM);

	b.recvs.push_back({900, 0});
	post(a, MBCF_OP_WRITE_IMM, 3 * seg + 10);
	ASSERT_EQ(a.out.size(), 4u);
	for (int i = 0; i < 4; i++) {
		mbcf_frame f = frame(a, i);
		EXPECT_EQ(f.op, i < 3 ? MBCF_OP_WRITE : MBCF_OP_WRITE_IMM);
		EXPECT_EQ(f.va, kBase + i * seg);
		EXPECT_EQ(!!(f.flags & MBCF_F_FIRST), i == 0);
		EXPECT_EQ(!!(f.flags & MBCF_F_LAST), i == 3);
		EXPECT_EQ(f.paylen, i < 3 ? seg : 10u);
		EXPECT_LE(a.out[i].size(), 1500u);
	}
	settle(a, b, now);
	ASSERT_EQ(b.rcqes.size(), 1u);
	EXPECT_EQ(b.rcqes[0].cookie, 900u);
	EXPECT_EQ(b.rcqes[0].byte_len, 3 * seg + 10);
	EXPECT_EQ(b.rcqes[0].imm, 0x1234u);
	EXPECT_EQ(b.rcqes[0].flags, MBCF_CQE_RECV | MBCF_CQE_IMM);
	EXPECT_EQ(a.cqes.size(), 1u);
}

TEST_F(Pair, WindowLimitsFramesInFlight)
{
	defer = true;
	for (int i = 0; i < 40; i++)
		post(a, MBCF_OP_WRITE, 8);
	EXPECT_TRUE(a.out.empty());
	mbcf_conn_kick(&a.conn, now);
	EXPECT_EQ(a.out.size(), 16u);	// window
	// ACKREQ at half window and when the window fills
	EXPECT_TRUE(frame(a, 7).flags & MBCF_F_ACKREQ);
	EXPECT_TRUE(frame(a, 15).flags & MBCF_F_ACKREQ);
	EXPECT_FALSE(frame(a, 6).flags & MBCF_F_ACKREQ);
	settle(a, b, now);
	EXPECT_EQ(a.cqes.size(), 40u);
	for (size_t i = 0; i < a.cqes.size(); i++)
		EXPECT_EQ(a.cqes[i].cookie, i + 1);
}

TEST_F(Pair, AckIntervalAsksEveryNFrames)
{
	mbcf_conn_cfg ca = default_cfg(0x11, 0x22, 100, 200);
	ca.ack_interval = 3;
	setup(ca, default_cfg(0x22, 0x11, 200, 100));
	defer = true;
	for (int i = 0; i < 10; i++)
		post(a, MBCF_OP_WRITE, 8);
	mbcf_conn_kick(&a.conn, now);
	ASSERT_EQ(a.out.size(), 10u);
	for (int i = 0; i < 10; i++)
		EXPECT_EQ(!!(frame(a, i).flags & MBCF_F_ACKREQ),
			  i % 3 == 2 || i == 9) << i;
	settle(a, b, now);
	EXPECT_EQ(b.conn.ctr.acks_tx, 4u);
}

// ack_interval 0: half the window, but never fewer than one ACKREQ per
// MBCF_ACK_EVERY_MAX frames (here the window is 166, half of it 83).
TEST_F(Pair, DefaultAckIntervalIsBounded)
{
	setup_window(166);
	defer = true;
	for (int i = 0; i < 60; i++)	// the request ring holds 64
		post(a, MBCF_OP_WRITE, 8);
	mbcf_conn_kick(&a.conn, now);
	ASSERT_EQ(a.out.size(), 60u);
	for (int i = 0; i < 60; i++)
		EXPECT_EQ(!!(frame(a, i).flags & MBCF_F_ACKREQ),
			  i == MBCF_ACK_EVERY_MAX - 1 || i == 59) << i;

	// A small window keeps asking every half window.
	setup_window(16);
	for (int i = 0; i < 12; i++)
		post(a, MBCF_OP_WRITE, 8);
	mbcf_conn_kick(&a.conn, now);
	ASSERT_EQ(a.out.size(), 12u);
	for (int i = 0; i < 12; i++)
		EXPECT_EQ(!!(frame(a, i).flags & MBCF_F_ACKREQ), i == 7 || i == 11)
			<< i;
}

// A window-limited stream whose acknowledgements come a frame at a time
// (here piggy-backed on the peer's own requests, one per frame received,
// as a read requester's next READ_REQ does): each frees one slot and the
// next frame fills the window again.  The sender asks at the window's
// edge only when no earlier ACKREQ is still unanswered.  Asking with every
// frame that refills the window made the receiver acknowledge every frame
// (a 64 KiB ib_read_bw across a veth: 86295 ACKREQs in 90017 response
// frames, 84470 ACKs back).
TEST_F(Pair, RefillingTheWindowAsksOnlyWhenNoRequestIsOut)
{
	defer = true;
	for (int i = 0; i < 60; i++)	// the request ring holds 64
		post(a, MBCF_OP_WRITE, 8);
	mbcf_conn_kick(&a.conn, now);
	ASSERT_EQ(a.out.size(), 16u);		// the window
	defer = false;
	std::vector<uint32_t> asked;
	int b_posted = 0;
	while (!a.out.empty()) {
		auto fr = a.out.front();
		a.out.pop_front();
		mbcf_frame f{};
		ASSERT_TRUE(parse(fr, &f));
		if (f.flags & MBCF_F_ACKREQ)
			asked.push_back(f.psn - 100);
		deliver(b, fr, now);
		if (b_posted < 60) {		// carries ack_psn of that frame
			post(b, MBCF_OP_WRITE, 8);
			b_posted++;
		}
		pump(b, a, now);
	}
	// a's frames answered b's writes at once: a ping-pong to a (6.2),
	// which acknowledges b's last writes late
	EXPECT_NE(a.conn.ack_lazy_at, 0u);
	idle_acks();
	EXPECT_EQ(a.cqes.size(), 60u);
	EXPECT_EQ(b.cqes.size(), 60u);
	// every half window (8 frames) and the end of the burst
	EXPECT_EQ(asked, (std::vector<uint32_t>{7, 15, 23, 31, 39, 47, 55, 59}));
	EXPECT_EQ(a.conn.ctr.acks_req, 8u);
}

// A held ACK (mbcf_conn_rx_hold_ack) is not sent with the frame; a request
// posted before the kick carries it, and the kick then sends nothing.
// Nothing posted: the kick sends the ACK.
TEST_F(Pair, HeldAckIsPiggybackedOrSentOnKick)
{
	mbcf_frame f{};
	post(a, MBCF_OP_WRITE, 8);
	ASSERT_EQ(a.out.size(), 1u);
	ASSERT_TRUE(parse(a.out.front(), &f));
	ASSERT_TRUE(f.flags & MBCF_F_ACKREQ);
	EXPECT_TRUE(mbcf_conn_rx_hold_ack(&b.conn, &f, now));
	EXPECT_EQ(b.target_writes, 1);
	EXPECT_TRUE(b.out.empty());
	post(b, MBCF_OP_WRITE, 8);		// the waiting doorbell
	ASSERT_EQ(b.out.size(), 1u);
	EXPECT_EQ(frame(b, 0).op, MBCF_OP_WRITE);
	EXPECT_EQ(frame(b, 0).ack_psn, 101u);	// a's write acknowledged
	mbcf_conn_kick(&b.conn, now);
	EXPECT_EQ(b.out.size(), 1u);		// no ACK frame
	a.out.clear();
	pump(b, a, now);
	ASSERT_EQ(a.cqes.size(), 1u);
	EXPECT_EQ(a.cqes[0].status, MBCF_WC_SUCCESS);
	EXPECT_EQ(b.conn.ctr.acks_tx, 0u);

	post(a, MBCF_OP_WRITE, 8);
	ASSERT_FALSE(a.out.empty());
	ASSERT_TRUE(parse(a.out.back(), &f));
	EXPECT_TRUE(mbcf_conn_rx_hold_ack(&b.conn, &f, now));
	EXPECT_TRUE(b.out.empty());
	mbcf_conn_kick(&b.conn, now);
	ASSERT_EQ(b.out.size(), 1u);
	EXPECT_EQ(frame(b, 0).op, MBCF_OP_ACK);
	EXPECT_EQ(b.conn.ctr.acks_tx, 1u);
}

// The application may destroy its QP as soon as it sees the receive
// completion, before the held ACK went out: the flush still sends it.
TEST_F(Pair, FlushSendsHeldAck)
{
	mbcf_frame f{};
	b.recvs.push_back({500, 4096});
	post(a, MBCF_OP_SEND, 100);
	ASSERT_EQ(a.out.size(), 1u);
	ASSERT_TRUE(parse(a.out.front(), &f));
	EXPECT_TRUE(mbcf_conn_rx_hold_ack(&b.conn, &f, now));
	ASSERT_EQ(b.rcqes.size(), 1u);		// the application sees it...
	EXPECT_TRUE(b.out.empty());
	mbcf_conn_flush(&b.conn);		// ...and destroys its QP
	ASSERT_EQ(b.out.size(), 1u);
	EXPECT_EQ(frame(b, 0).op, MBCF_OP_ACK);
	EXPECT_EQ(frame(b, 0).ack_psn, 101u);
	a.out.clear();
	pump(b, a, now);
	ASSERT_EQ(a.cqes.size(), 1u);
	EXPECT_EQ(a.cqes[0].status, MBCF_WC_SUCCESS);
}

TEST_F(Pair, PiggybackedAckNeedsNoAckFrame)
{
	post(a, MBCF_OP_READ_REQ, 64);
	pump(a, b, now);		// B queues the response, acking A's request
	ASSERT_EQ(b.out.size(), 1u);
	mbcf_frame r = frame(b, 0);
	EXPECT_EQ(r.op, MBCF_OP_READ_RESP);
	EXPECT_EQ(r.ack_psn, 101u);
	EXPECT_EQ(b.conn.ctr.acks_tx, 0u);
	pump(b, a, now);
	ASSERT_EQ(a.cqes.size(), 1u);
	EXPECT_EQ(a.cqes[0].op, MBCF_OP_READ_REQ);
}

TEST_F(Pair, ReadReturnsTargetMemoryAcrossFrames)
{
	uint8_t *t = b.target(kRkey, kBase);
	for (int i = 0; i < 5000; i++)
		t[i] = (uint8_t)(i * 7);
	uint64_t c = post(a, MBCF_OP_READ_REQ, 5000, kBase);
	settle(a, b, now);
	ASSERT_EQ(a.cqes.size(), 1u);
	EXPECT_EQ(a.cqes[0].status, MBCF_WC_SUCCESS);
	EXPECT_EQ(a.cqes[0].byte_len, 5000u);
	EXPECT_EQ(memcmp(a.local[c].data(), t, 5000), 0);
	EXPECT_EQ(a.conn.rd_out, 0u);
	EXPECT_NE(b.conn.resp.head, b.conn.resp.tail);	// unasked: acked late
	idle_acks();
	EXPECT_EQ(b.conn.resp.head, b.conn.resp.tail);	// released by ack
}

// A payload handed over in pieces (a non-linear skb) lands exactly as a
// contiguous one: WRITE, SEND and READ data, across frame boundaries.
TEST_F(Pair, PayloadInPiecesLandsLikeContiguous)
{
	auto pattern = [](size_t n, int seed) {
		std::vector<uint8_t> v(n);
		for (size_t i = 0; i < n; i++)
			v[i] = (uint8_t)(i * 13 + seed + i / 251);
		return v;
	};
	auto xfer = [&](Env &from, Env &to) {
		while (!from.out.empty()) {
			auto fr = from.out.front();
			from.out.pop_front();
			deliver_split(to, fr, now);
		}
	};
	auto run = [&]() {
		while (!a.out.empty() || !b.out.empty()) {
			xfer(a, b);
			xfer(b, a);
		}
	};
	uint8_t *t = b.target(kRkey, kBase);
	auto rd = pattern(4000, 3);
	memcpy(t + 8192, rd.data(), rd.size());
	b.recvs.push_back({500, 4096});

	mbcf_wr w = make_wr(next_cookie++, MBCF_OP_WRITE, 5000, kBase, kRkey);
	a.local[w.cookie] = pattern(5000, 1);
	ASSERT_EQ(mbcf_conn_post(&a.conn, &w, now), 0);
	mbcf_wr s = make_wr(next_cookie++, MBCF_OP_SEND, 3000, 0, 0);
	a.local[s.cookie] = pattern(3000, 2);
	ASSERT_EQ(mbcf_conn_post(&a.conn, &s, now), 0);
	mbcf_wr r = make_wr(next_cookie++, MBCF_OP_READ_REQ, 4000, kBase + 8192, kRkey);
	a.local[r.cookie] = std::vector<uint8_t>(4000, 0);
	ASSERT_EQ(mbcf_conn_post(&a.conn, &r, now), 0);
	run();

	ASSERT_EQ(a.cqes.size(), 3u);
	for (auto &c : a.cqes)
		EXPECT_EQ(c.status, MBCF_WC_SUCCESS);
	EXPECT_EQ(memcmp(t, a.local[w.cookie].data(), 5000), 0);
	EXPECT_EQ(b.target_writes, 4 * 3);	// 4 frames, 3 pieces each
	ASSERT_EQ(b.rcqes.size(), 1u);
	EXPECT_EQ(b.rcqes[0].byte_len, 3000u);
	EXPECT_EQ(b.recv_buf[500], a.local[s.cookie]);
	EXPECT_EQ(a.local[r.cookie], rd);
}

TEST_F(Pair, RetransmitTimeoutBacksOffThenGivesUp)
{
	post(a, MBCF_OP_WRITE, 10);
	post(a, MBCF_OP_WRITE, 10);
	a.out.clear();		// lost
	uint64_t t0 = now;
	EXPECT_EQ(a.timer_at, t0 + 1 * kMs);
	fire(a);
	EXPECT_EQ(a.out.size(), 1u);	// the oldest, alone until B answers
	EXPECT_EQ(a.conn.ctr.retransmits, 1u);
	EXPECT_EQ(a.timer_at, now + 2 * kMs);
	fire(a);
	EXPECT_EQ(a.timer_at, now + 4 * kMs);
	fire(a);
	EXPECT_EQ(a.timer_at, now + 8 * kMs);
	EXPECT_EQ(a.conn.ctr.timeouts, 3u);
	EXPECT_TRUE(a.cqes.empty());
	fire(a);		// retry_cnt = 3 exhausted
	EXPECT_EQ(a.conn.state, MBCF_CONN_ERROR);
	EXPECT_EQ(a.conn.ctr.retry_exceeded, 1u);
	ASSERT_EQ(a.cqes.size(), 2u);
	EXPECT_EQ(a.cqes[0].status, MBCF_WC_RETRY_EXC_ERR);
	EXPECT_EQ(a.cqes[1].status, MBCF_WC_WR_FLUSH_ERR);
	EXPECT_EQ(a.errors, 1);
	EXPECT_EQ(a.timer_at, 0u);
	mbcf_wr w = make_wr(99, MBCF_OP_WRITE, 1, kBase, kRkey);
	EXPECT_EQ(mbcf_conn_post(&a.conn, &w, now), MBCF_POST_STATE);
}

// Progress resets the retries; the backoff lasts until a frame sent once
// is acknowledged (Karn, docs/protocol.md 7.1): the resend's ack may come
// from a slow link, not a lossy one.
TEST_F(Pair, ProgressResetsRetriesASampleTheBackoff)
{
	post(a, MBCF_OP_WRITE, 10);
	a.out.clear();
	fire(a);
	fire(a);
	EXPECT_EQ(a.conn.retry_left, 1);
	settle(a, b, now);	// the retransmission gets through
	EXPECT_EQ(a.conn.retry_left, 3);
	EXPECT_EQ(a.conn.rto_cur, 4 * kMs);
	EXPECT_EQ(a.cqes.size(), 1u);
	post(a, MBCF_OP_WRITE, 10);
	settle(a, b, now);	// timed: back to the verbs timeout
	EXPECT_EQ(a.conn.rto_cur, 1 * kMs);
	EXPECT_EQ(a.cqes.size(), 2u);
}

// Each frame here is a burst of its own, so each asks for an answer: every
// one that finds the gap is answered with LOST(100); the sender goes back
// once, on the first -- the others came from frames of the same round.
TEST_F(Pair, GapSendsLostAndSenderGoesBackOnce)
{
	for (int i = 0; i < 5; i++)
		post(a, MBCF_OP_WRITE, 10);
	ASSERT_EQ(a.out.size(), 5u);
	a.out.pop_front();	// psn 100 lost
	pump(a, b, now);
	EXPECT_EQ(b.conn.ctr.drop_out_of_seq, 4u);
	EXPECT_EQ(b.conn.ctr.lost_tx, 4u);
	ASSERT_EQ(b.out.size(), 4u);
	mbcf_frame l = frame(b, 0);
	EXPECT_EQ(l.op, MBCF_OP_LOST);
	EXPECT_EQ(l.ack_psn, 100u);
	EXPECT_EQ(l.epoch, 0u);		// found by a frame of round 0
	pump(b, a, now);
	EXPECT_EQ(a.conn.ctr.lost_rx, 4u);
	EXPECT_EQ(a.conn.tx_epoch, 1u);	// one go-back
	EXPECT_EQ(a.out.size(), 5u);	// resent from 100, once
	EXPECT_EQ(frame(a, 0).psn, 100u);
	settle(a, b, now);
	EXPECT_EQ(a.cqes.size(), 5u);
	EXPECT_EQ(b.target_writes, 5);
}

TEST_F(Pair, DuplicateWriteIsReackedNotReapplied)
{
	post(a, MBCF_OP_WRITE, 10);
	auto dup = a.out.front();
	settle(a, b, now);
	ASSERT_EQ(b.target_writes, 1);
	b.target(kRkey, kBase)[0] = 0;	// would be overwritten by a re-apply
	deliver(b, dup, now);
	EXPECT_EQ(b.target_writes, 1);
	EXPECT_EQ(b.target(kRkey, kBase)[0], 0);
	EXPECT_EQ(b.conn.ctr.drop_duplicate, 1u);
	ASSERT_EQ(b.out.size(), 1u);
	EXPECT_EQ(frame(b, 0).op, MBCF_OP_ACK);
	EXPECT_EQ(frame(b, 0).ack_psn, 101u);
}

TEST_F(Pair, DuplicateAtomicReturnsOriginalOnce)
{
	*(uint64_t *)b.target(kRkey, kBase + 8) = 40;
	uint64_t c = post(a, MBCF_OP_FETCH_ADD, 8, kBase + 8);
	auto req = a.out.front();
	pump(a, b, now);
	auto resp = b.out.front();
	b.out.clear();		// the response is lost
	deliver(b, req, now);	// and A's retransmission arrives twice
	deliver(b, req, now);
	EXPECT_EQ(b.atomics, 1);
	EXPECT_EQ(*(uint64_t *)b.target(kRkey, kBase + 8), 45u);
	b.out.clear();
	now += 2 * kMs;
	mbcf_conn_timeout(&b.conn, now);	// B retransmits its response
	ASSERT_GE(b.out.size(), 1u);
	mbcf_frame r = frame(b, 0);
	EXPECT_EQ(r.op, MBCF_OP_ATOMIC_RESP);
	EXPECT_EQ(r.operand[0], 40u);
	EXPECT_EQ(r.epoch, 1u);			// a resend: the next round
	EXPECT_TRUE(r.flags & MBCF_F_ACKREQ);	// the timeout's probe asks
	auto again = b.out.front();
	again[MBCF_OFF_EPOCH + 1] = 0;		// otherwise the same bytes
	again[MBCF_OFF_FLAGS] &= (uint8_t)~MBCF_F_ACKREQ;
	EXPECT_EQ(again, resp);
	settle(a, b, now);
	ASSERT_EQ(a.cqes.size(), 1u);
	EXPECT_EQ(*(uint64_t *)a.local[c].data(), 40u);
	EXPECT_EQ(b.atomics, 1);
}

TEST_F(Pair, CompareAndSwap)
{
	*(uint64_t *)b.target(kRkey, kBase) = 0;
	uint64_t c = post(a, MBCF_OP_CMP_SWAP, 8, kBase);	// compare 0 swap 5
	settle(a, b, now);
	EXPECT_EQ(*(uint64_t *)b.target(kRkey, kBase), 5u);
	EXPECT_EQ(*(uint64_t *)a.local[c].data(), 0u);
	uint64_t d = post(a, MBCF_OP_CMP_SWAP, 8, kBase);	// fails now
	settle(a, b, now);
	EXPECT_EQ(*(uint64_t *)b.target(kRkey, kBase), 5u);
	EXPECT_EQ(*(uint64_t *)a.local[d].data(), 5u);
}

TEST_F(Pair, SendWithoutReceiveStopsThenGoes)
{
	post(a, MBCF_OP_SEND, 3000);
	post(a, MBCF_OP_WRITE, 10);
	pump(a, b, now);
	EXPECT_EQ(b.conn.ctr.stop_tx, 1u);
	EXPECT_EQ(b.conn.ctr.drop_stopped, 1u);
	EXPECT_EQ(b.conn.ctr.lost_tx, 0u);	// no LOST while stopped
	ASSERT_EQ(b.out.size(), 1u);
	EXPECT_EQ(frame(b, 0).op, MBCF_OP_STOP);
	pump(b, a, now);
	EXPECT_TRUE(a.conn.stopped);
	EXPECT_EQ(a.timer_at, now + 100000);
	EXPECT_TRUE(a.out.empty());
	b.recvs.push_back({500, 4096});
	mbcf_conn_recv_posted(&b.conn, now);
	EXPECT_EQ(b.conn.ctr.go_tx, 1u);
	settle(a, b, now);
	EXPECT_FALSE(a.conn.stopped);
	ASSERT_EQ(b.rcqes.size(), 1u);
	EXPECT_EQ(b.rcqes[0].byte_len, 3000u);
	EXPECT_EQ(b.recv_buf[500].size(), 3000u);
	EXPECT_EQ(a.cqes.size(), 2u);
}

TEST_F(Pair, RnrTimerRetriesAndRnrRetryGivesUp)
{
	post(a, MBCF_OP_SEND, 10);
	settle(a, b, now);	// STOP
	for (int i = 0; i < 3; i++) {
		ASSERT_TRUE(a.conn.stopped);
		fire(a);	// min_rnr elapsed: try again
		settle(a, b, now);
	}
	EXPECT_EQ(a.conn.state, MBCF_CONN_ERROR);
	EXPECT_EQ(a.conn.ctr.rnr_exceeded, 1u);
	ASSERT_EQ(a.cqes.size(), 1u);
	EXPECT_EQ(a.cqes[0].status, MBCF_WC_RNR_RETRY_EXC_ERR);
	EXPECT_EQ(b.conn.ctr.stop_tx, 4u);
}

TEST_F(Pair, AccessViolationNaksAndErrorsBothSides)
{
	post(a, MBCF_OP_WRITE, 10);
	uint64_t bad = post(a, MBCF_OP_WRITE, 10, 0x90000, 0x99);	// read-only
	post(a, MBCF_OP_WRITE, 10);
	settle(a, b, now);
	EXPECT_EQ(b.conn.state, MBCF_CONN_ERROR);
	EXPECT_EQ(a.conn.state, MBCF_CONN_ERROR);
	EXPECT_EQ(b.conn.ctr.naks_tx, 1u);
	EXPECT_EQ(a.conn.ctr.naks_rx, 1u);
	EXPECT_EQ(b.target_writes, 1);
	ASSERT_EQ(a.cqes.size(), 3u);
	EXPECT_EQ(a.cqes[0].status, MBCF_WC_SUCCESS);
	EXPECT_EQ(a.cqes[1].cookie, bad);
	EXPECT_EQ(a.cqes[1].status, MBCF_WC_REM_ACCESS_ERR);
	EXPECT_EQ(a.cqes[2].status, MBCF_WC_WR_FLUSH_ERR);
	EXPECT_EQ(a.error_status, MBCF_WC_REM_ACCESS_ERR);
	EXPECT_EQ(b.errors, 1);
}

// A responder that NAKs its peer's request fails none of its own requests:
// they are flushed (8.2); the error is the peer's (found by tests/vm/wire.sh).
TEST_F(Pair, RespondersNakFlushesItsOwnRequests)
{
	uint64_t mine = post(b, MBCF_OP_READ_REQ, 64);	// b's own read
	b.out.clear();		// never answered
	post(a, MBCF_OP_WRITE, 10, 0x90000, 0x99);	// read-only at b: NAKed
	pump(a, b, now);
	EXPECT_EQ(b.conn.state, MBCF_CONN_ERROR);
	EXPECT_EQ(b.conn.ctr.naks_tx, 1u);
	ASSERT_EQ(b.cqes.size(), 1u);
	EXPECT_EQ(b.cqes[0].cookie, mine);
	EXPECT_EQ(b.cqes[0].status, MBCF_WC_WR_FLUSH_ERR);
	EXPECT_EQ(rx_unaccounted(b), 0);
}

// A datagram is for a UD QP: a connection takes none.  It gets its one
// verdict (drop_wrong_qp); its ack_psn (0) neither acknowledges anything nor
// fixes where the stream starts; it owes no ACK (found by tests/vm/wire.sh).
TEST_F(Pair, DatagramAtAConnectionIsDropped)
{
	uint8_t gid[16] = {}, hdr[MBCF_HDR_MAX];
	mbcf_frame f{};

	f.op = MBCF_OP_DGRAM;
	f.flags = MBCF_F_ACKREQ;
	f.dst_qpn = 0x22;
	f.src_qpn = 0x11;
	f.vtf = 6u << 28;
	f.sgid = gid;
	f.dgid = gid;
	uint32_t hl = mbcf_codec_build(&f, hdr);
	ASSERT_EQ(hl, (uint32_t)MBCF_DGRAM_HDR_LEN);
	ASSERT_FALSE(b.conn.snd_fixed);		// RTR: the peer's first frame fixes it
	deliver(b, std::vector<uint8_t>(hdr, hdr + hl), now);
	EXPECT_EQ(b.conn.ctr.drop_wrong_qp, 1u);
	EXPECT_EQ(rx_unaccounted(b), 0);
	EXPECT_FALSE(b.conn.snd_fixed);
	EXPECT_EQ(b.conn.snd_una, 200u);
	EXPECT_TRUE(b.out.empty());
}

// A write frame whose payload comes in pieces (a non-linear skb) is checked
// whole before a byte is written (section 9): one crossing the end of its
// region leaves nothing behind, not its first pieces (tests/vm/wire.sh).
TEST_F(Pair, RejectedWriteInPiecesWritesNothing)
{
	const uint32_t size = 1 << 16;
	uint8_t *t = b.target(kRkey, kBase);
	std::vector<uint8_t> zero(100, 0);

	post(a, MBCF_OP_WRITE, 1000, kBase + size - 100);
	ASSERT_EQ(a.out.size(), 1u);
	deliver_split(b, a.out.front(), now);	// pieces of 1, 499, 500 bytes
	a.out.pop_front();
	EXPECT_EQ(b.conn.state, MBCF_CONN_ERROR);
	EXPECT_EQ(b.conn.ctr.remote_errors, 1u);
	EXPECT_EQ(b.target_writes, 0);
	EXPECT_EQ(memcmp(t + size - 100, zero.data(), 100), 0);
	EXPECT_EQ(rx_unaccounted(b), 0);
}

// A receive buffer the responder may not write fails that receive with
// LOC_PROT_ERR and the requester's send with REM_OP_ERR (verbs); both QPs
// end in error and every frame is accounted for.
TEST_F(Pair, ReceiveBufferFaultIsRemoteOperationalError)
{
	b.recvs.push_back({7, 4000});
	b.recv_write_fail_at = 2000;	// inside the second frame
	uint64_t c = post(a, MBCF_OP_SEND, 3000);
	settle(a, b, now);
	ASSERT_EQ(b.rcqes.size(), 1u);
	EXPECT_EQ(b.rcqes[0].cookie, 7u);
	EXPECT_EQ(b.rcqes[0].status, MBCF_WC_LOC_PROT_ERR);
	EXPECT_EQ(b.conn.state, MBCF_CONN_ERROR);
	EXPECT_EQ(b.conn.ctr.remote_errors, 1u);
	ASSERT_EQ(a.cqes.size(), 1u);
	EXPECT_EQ(a.cqes[0].cookie, c);
	EXPECT_EQ(a.cqes[0].status, MBCF_WC_REM_OP_ERR);
	EXPECT_EQ(a.conn.state, MBCF_CONN_ERROR);
	EXPECT_EQ(rx_unaccounted(a), 0);
	EXPECT_EQ(rx_unaccounted(b), 0);
}

// The same fault while the responder still owes a read response (the drain
// of section 8.3) and has a request of its own in flight, acknowledged by
// the requester during the drain.  The QP's completions, send and receive
// together (one CQ), must not show a success after the error: the
// receive's LOC_PROT_ERR comes when the QP enters ERROR, after the
// request's success -- not when the frame was rejected.
TEST_F(Pair, ReceiveFaultDuringTheDrainComesAfterOwnSuccesses)
{
	uint8_t *t = b.target(kRkey, kBase);
	for (int i = 0; i < 30000; i++)
		t[i] = (uint8_t)(i * 7);
	uint64_t own = post(b, MBCF_OP_WRITE, 10);	// b's own, not yet acknowledged
	b.recvs.push_back({7, 4000});
	b.recv_write_fail_at = 0;
	uint64_t rd = post(a, MBCF_OP_READ_REQ, 30000, kBase);
	uint64_t snd = post(a, MBCF_OP_SEND, 3000);
	pump(a, b, now);
	EXPECT_TRUE(b.conn.nak_drain);
	settle(a, b, now);
	idle_acks();	// the last response asked for no ACK: it comes late
	EXPECT_EQ(b.conn.state, MBCF_CONN_ERROR);
	EXPECT_EQ(a.conn.state, MBCF_CONN_ERROR);
	ASSERT_EQ(b.cqes.size(), 1u);
	EXPECT_EQ(b.cqes[0].cookie, own);
	EXPECT_EQ(b.cqes[0].status, MBCF_WC_SUCCESS);
	ASSERT_EQ(b.rcqes.size(), 1u);
	EXPECT_EQ(b.rcqes[0].cookie, 7u);
	EXPECT_EQ(b.rcqes[0].status, MBCF_WC_LOC_PROT_ERR);
	bool err = false;
	for (const auto &q : b.allcqes) {
		EXPECT_FALSE(err && q.status == MBCF_WC_SUCCESS)
			<< "cookie " << q.cookie << " succeeded after an error completion";
		err |= q.status != MBCF_WC_SUCCESS;
	}
	ASSERT_EQ(a.cqes.size(), 2u);
	EXPECT_EQ(a.cqes[0].cookie, rd);
	EXPECT_EQ(a.cqes[0].status, MBCF_WC_SUCCESS);
	EXPECT_EQ(a.cqes[1].cookie, snd);
	EXPECT_EQ(a.cqes[1].status, MBCF_WC_REM_OP_ERR);
	EXPECT_EQ(rx_unaccounted(a), 0);
	EXPECT_EQ(rx_unaccounted(b), 0);
}

// A receive queue the environment finds malformed is not an RNR condition:
// the message is NAKed (REM_OP_ERR) and no receive completes.
TEST_F(Pair, MalformedReceiveQueueIsRemoteOperationalError)
{
	b.claim_bad = true;
	uint64_t c = post(a, MBCF_OP_SEND, 10);
	settle(a, b, now);
	EXPECT_TRUE(b.rcqes.empty());
	EXPECT_EQ(b.conn.state, MBCF_CONN_ERROR);
	EXPECT_EQ(b.conn.ctr.stop_tx, 0u);
	ASSERT_EQ(a.cqes.size(), 1u);
	EXPECT_EQ(a.cqes[0].cookie, c);
	EXPECT_EQ(a.cqes[0].status, MBCF_WC_REM_OP_ERR);
}

// A completion the environment could not deliver (CQ overrun) leaves the
// connection unreliable: it enters ERROR once, at the end of the call.
TEST_F(Pair, UndeliverableCompletionEntersError)
{
	a.cq_room = 1;
	defer = true;
	for (int i = 0; i < 3; i++)
		post(a, MBCF_OP_WRITE, 10);
	mbcf_conn_kick(&a.conn, now);
	settle(a, b, now);
	EXPECT_EQ(a.conn.state, MBCF_CONN_ERROR);
	EXPECT_EQ(a.errors, 1);
	ASSERT_EQ(a.cqes.size(), 1u);
	EXPECT_EQ(a.cqes[0].status, MBCF_WC_SUCCESS);
	EXPECT_EQ(a.conn.ctr.send_completions, 3u);
}

// docs/protocol.md 8.3: a NAK ends the connection only when it names the
// psn the requester waits on; stale or made-up ones are dropped and counted.
TEST_F(Pair, NakMustNameTheAwaitedPsn)
{
	auto nak = [](uint32_t ack_psn) {
		mbcf_frame f{};
		f.op = MBCF_OP_ACK;
		f.status = MBCF_ST_REMOTE_ACCESS_ERROR;
		f.dst_qpn = 0x11;
		f.src_qpn = 0x22;
		f.psn = 200;
		f.ack_psn = ack_psn;
		std::vector<uint8_t> b(MBCF_HDR_MAX);
		b.resize(mbcf_codec_build(&f, b.data()));
		return b;
	};
	deliver(a, nak(100), now);	// nothing outstanding yet
	uint64_t c = post(a, MBCF_OP_WRITE, 10);	// psn 100
	deliver(a, nak(99), now);	// before it
	deliver(a, nak(0x500000), now);	// far beyond anything sent
	EXPECT_EQ(a.conn.state, MBCF_CONN_RTS);
	EXPECT_EQ(a.conn.ctr.drop_bad_ack, 3u);
	EXPECT_EQ(a.conn.ctr.naks_rx, 0u);
	EXPECT_TRUE(a.cqes.empty());
	deliver(a, nak(100), now);
	EXPECT_EQ(a.conn.state, MBCF_CONN_ERROR);
	EXPECT_EQ(a.conn.ctr.naks_rx, 1u);
	ASSERT_EQ(a.cqes.size(), 1u);
	EXPECT_EQ(a.cqes[0].cookie, c);
	EXPECT_EQ(a.cqes[0].status, MBCF_WC_REM_ACCESS_ERR);
	EXPECT_EQ(rx_unaccounted(a), 0);
}

// Every frame that enters the receive path gets exactly one verdict, also
// for frames the parser rejects, duplicates, gaps and control frames.
TEST_F(Pair, EveryReceivedFrameHasOneVerdict)
{
	post(a, MBCF_OP_WRITE, 3000);	// 3 frames
	ASSERT_EQ(a.out.size(), 3u);
	auto f0 = a.out[0], f1 = a.out[1], f2 = a.out[2];
	a.out.clear();
	deliver(b, f0, now);		// accepted
	deliver(b, f0, now);		// duplicate
	deliver(b, f2, now);		// gap: LOST
	auto bad = f1;
	bad[0] = 9;			// version
	deliver(b, bad, now);
	bad = f1;
	bad.resize(10);			// truncated
	deliver(b, bad, now);
	deliver(b, f1, now);
	deliver(b, f2, now);
	EXPECT_EQ(b.dev_ctr.rx_frames, 7u);
	EXPECT_EQ(b.conn.ctr.rx_accepted, 3u);
	EXPECT_EQ(b.conn.ctr.drop_duplicate, 1u);
	EXPECT_EQ(b.conn.ctr.drop_out_of_seq, 1u);
	EXPECT_EQ(b.dev_ctr.drop_bad_version, 1u);
	EXPECT_EQ(b.dev_ctr.drop_truncated, 1u);
	EXPECT_EQ(rx_unaccounted(b), 0);
	settle(a, b, now);	// the LOST makes a go back: more duplicates
	ASSERT_EQ(a.cqes.size(), 1u);
	EXPECT_EQ(a.cqes[0].status, MBCF_WC_SUCCESS);
	EXPECT_EQ(rx_unaccounted(a), 0);
	EXPECT_EQ(rx_unaccounted(b), 0);
}

TEST_F(Pair, LostNakIsRepeatedOnRetry)
{
	post(a, MBCF_OP_READ_REQ, 10, 0x80000);		// outside every region
	pump(a, b, now);
	ASSERT_EQ(b.conn.state, MBCF_CONN_ERROR);
	b.out.clear();		// NAK lost
	fire(a);
	pump(a, b, now);
	ASSERT_EQ(b.out.size(), 1u);
	EXPECT_EQ(frame(b, 0).status, MBCF_ST_REMOTE_ACCESS_ERROR);
	pump(b, a, now);
	ASSERT_EQ(a.cqes.size(), 1u);
	EXPECT_EQ(a.cqes[0].status, MBCF_WC_REM_ACCESS_ERR);
}

// The write before the rejected one was accepted but its ACK was lost, and
// so was the NAK: the requester's timeout resends only that write (7.1),
// a duplicate to the responder, which answers it with the NAK again
// (before, only a resend of the rejected psn was answered: the requester
// ran out of retries).
TEST_F(Pair, LostNakIsRepeatedToAnAskingDuplicate)
{
	post(a, MBCF_OP_WRITE, 10);
	post(a, MBCF_OP_WRITE, 10, 0x80000);		// outside every region
	pump(a, b, now);
	ASSERT_EQ(b.conn.state, MBCF_CONN_ERROR);
	ASSERT_EQ(b.target_writes, 1);
	b.out.clear();		// the ACK of the first and the NAK lost
	fire(a);
	ASSERT_EQ(a.out.size(), 1u);
	EXPECT_EQ(frame(a, 0).psn, 100u);		// the accepted one
	EXPECT_TRUE(frame(a, 0).flags & MBCF_F_ACKREQ);
	pump(a, b, now);
	ASSERT_EQ(b.out.size(), 1u);
	EXPECT_EQ(frame(b, 0).status, MBCF_ST_REMOTE_ACCESS_ERROR);
	EXPECT_EQ(frame(b, 0).ack_psn, 101u);
	EXPECT_EQ(b.target_writes, 1);			// nothing re-applied
	pump(b, a, now);
	ASSERT_EQ(a.cqes.size(), 2u);
	EXPECT_EQ(a.cqes[0].status, MBCF_WC_SUCCESS);
	EXPECT_EQ(a.cqes[1].status, MBCF_WC_REM_ACCESS_ERR);
	EXPECT_EQ(a.conn.ctr.timeouts, 1u);
}

// A read accepted by the responder whose source memory goes while its
// response is built (verbs: ibv_dereg_mr under way): the responder sends
// no byte more, NAKs the read request with REMOTE_ACCESS_ERROR and enters
// ERROR; the requester completes the read with REM_ACCESS_ERR at once,
// with no timer (docs/protocol.md 8.3).
TEST_F(Pair, ReadSourceGoneUnderWayIsNaked)
{
	defer = true;
	uint64_t w0 = post(a, MBCF_OP_WRITE, 10);		// psn 100
	uint64_t rd = post(a, MBCF_OP_READ_REQ, 5000);	// psn 101, 4 frames back
	uint64_t w2 = post(a, MBCF_OP_WRITE, 10);		// psn 102
	mbcf_conn_kick(&a.conn, now);
	b.target_frames = 2;		// the third response frame faults
	pump(a, b, now);
	EXPECT_EQ(b.conn.state, MBCF_CONN_ERROR);
	EXPECT_EQ(b.errors, 1);
	int resp = 0, naks = 0;
	for (size_t i = 0; i < b.out.size(); i++) {
		mbcf_frame f = frame(b, i);
		if (f.op == MBCF_OP_READ_RESP) {
			EXPECT_EQ(naks, 0) << "response data after the NAK";
			resp++;
		} else if (f.op == MBCF_OP_ACK && f.status) {
			EXPECT_EQ(f.status, MBCF_ST_REMOTE_ACCESS_ERROR);
			EXPECT_EQ(f.ack_psn, 101u);	// the read request
			naks++;
		}
	}
	EXPECT_EQ(resp, 2);		// nothing of the gone memory left
	EXPECT_GE(naks, 1);
	EXPECT_EQ(b.conn.ctr.naks_tx, (uint64_t)naks);
	uint64_t t = now;
	pump(b, a, now);
	EXPECT_EQ(a.conn.state, MBCF_CONN_ERROR);
	EXPECT_EQ(a.conn.ctr.naks_rx, 1u);
	EXPECT_EQ(now, t);		// no retransmission timer involved
	ASSERT_EQ(a.cqes.size(), 3u);
	EXPECT_EQ(a.cqes[0].cookie, w0);
	EXPECT_EQ(a.cqes[0].status, MBCF_WC_SUCCESS);
	EXPECT_EQ(a.cqes[1].cookie, rd);
	EXPECT_EQ(a.cqes[1].status, MBCF_WC_REM_ACCESS_ERR);
	EXPECT_EQ(a.cqes[2].cookie, w2);
	EXPECT_EQ(a.cqes[2].status, MBCF_WC_WR_FLUSH_ERR);
	EXPECT_EQ(a.error_status, MBCF_WC_REM_ACCESS_ERR);
	EXPECT_EQ(rx_unaccounted(a), 0);
	EXPECT_EQ(rx_unaccounted(b), 0);
}

// The same when the source goes before the response's first frame: the
// NAK arrives with every request acknowledged, only the response owed.
TEST_F(Pair, ReadSourceGoneBeforeTheResponseIsNaked)
{
	uint64_t rd = post(a, MBCF_OP_READ_REQ, 100);
	b.target_frames = 0;
	pump(a, b, now);
	ASSERT_EQ(b.out.size(), 1u);
	EXPECT_EQ(frame(b, 0).op, MBCF_OP_ACK);
	EXPECT_EQ(frame(b, 0).status, MBCF_ST_REMOTE_ACCESS_ERROR);
	EXPECT_EQ(frame(b, 0).ack_psn, 100u);
	mbcf_frame k{};			// a's request was acknowledged first
	k.op = MBCF_OP_ACK;
	k.dst_qpn = 0x11;
	k.src_qpn = 0x22;
	k.psn = b.conn.snd_max;		// checked (6.4)
	k.ack_psn = 101;
	mbcf_conn_rx(&a.conn, &k, now);
	ASSERT_EQ(a.conn.snd_una, a.conn.snd_max);
	pump(b, a, now);
	EXPECT_EQ(a.conn.state, MBCF_CONN_ERROR);
	ASSERT_EQ(a.cqes.size(), 1u);
	EXPECT_EQ(a.cqes[0].cookie, rd);
	EXPECT_EQ(a.cqes[0].status, MBCF_WC_REM_ACCESS_ERR);
}

// The NAK for a read under way is repeated when it was lost: to the
// requester's probe for the response, and to a retransmission.
TEST_F(Pair, LostReadNakIsRepeatedToTheProbe)
{
	uint64_t rd = post(a, MBCF_OP_READ_REQ, 5000);
	b.target_frames = 1;
	pump(a, b, now);
	ASSERT_EQ(b.conn.state, MBCF_CONN_ERROR);
	ASSERT_EQ(b.out.size(), 2u);
	b.out.pop_back();		// the NAK is lost
	pump(b, a, now);		// the first response frame acks the read
	ASSERT_EQ(a.conn.snd_una, a.conn.snd_max);
	fire(a);			// a probes: ACK with ACKREQ
	ASSERT_EQ(a.out.size(), 1u);
	EXPECT_TRUE(frame(a, 0).flags & MBCF_F_ACKREQ);
	pump(a, b, now);
	ASSERT_EQ(b.out.size(), 1u);
	EXPECT_EQ(frame(b, 0).status, MBCF_ST_REMOTE_ACCESS_ERROR);
	EXPECT_EQ(frame(b, 0).ack_psn, 100u);
	pump(b, a, now);
	ASSERT_EQ(a.cqes.size(), 1u);
	EXPECT_EQ(a.cqes[0].cookie, rd);
	EXPECT_EQ(a.cqes[0].status, MBCF_WC_REM_ACCESS_ERR);
	EXPECT_EQ(b.conn.ctr.drop_error_state, 1u);
	EXPECT_EQ(rx_unaccounted(a), 0);
	EXPECT_EQ(rx_unaccounted(b), 0);
}

// The source goes while the responder retransmits a response the
// requester already has (its acknowledgement was lost): the NAK names that
// read, which the requester no longer waits on, and is dropped; the
// requester's probe shows how far it got, and the repeated NAK names the
// read it does wait on.
TEST_F(Pair, ReadNakRepeatNamesWhatTheProbeShowsMissing)
{
	uint64_t r1 = post(a, MBCF_OP_READ_REQ, 100);	// psn 100
	uint64_t r2 = post(a, MBCF_OP_READ_REQ, 5000);	// psn 101
	pump(a, b, now);
	ASSERT_GE(b.out.size(), 5u);
	ASSERT_EQ(frame(b, 0).op, MBCF_OP_READ_RESP);
	ASSERT_EQ(frame(b, 0).req_psn, 100u);
	b.out.resize(1);		// r2's response is lost
	pump(b, a, now);
	ASSERT_EQ(a.cqes.size(), 1u);	// r1 done
	EXPECT_EQ(a.cqes[0].cookie, r1);
	ASSERT_TRUE(a.out.empty());	// r1's response asked for no ACK
	fire(a);			// the late one (6.2) ...
	ASSERT_EQ(a.out.size(), 1u);
	a.out.clear();			// ... is lost
	b.target_frames = 0;		// the memory goes
	fire(b);			// b goes back to r1's response: fault
	EXPECT_EQ(b.conn.state, MBCF_CONN_ERROR);
	ASSERT_EQ(b.out.size(), 1u);
	EXPECT_EQ(frame(b, 0).ack_psn, 100u);	// names r1: stale at a
	pump(b, a, now);
	EXPECT_EQ(a.conn.state, MBCF_CONN_RTS);
	EXPECT_EQ(a.conn.ctr.drop_bad_ack, 1u);
	for (int i = 0; i < 4 && a.out.empty(); i++)
		fire(a);		// a probes for r2's response
	ASSERT_EQ(a.out.size(), 1u);
	pump(a, b, now);
	ASSERT_EQ(b.out.size(), 1u);
	EXPECT_EQ(frame(b, 0).status, MBCF_ST_REMOTE_ACCESS_ERROR);
	EXPECT_EQ(frame(b, 0).ack_psn, 101u);	// r2, what a lacks
	pump(b, a, now);
	EXPECT_EQ(a.conn.state, MBCF_CONN_ERROR);
	ASSERT_EQ(a.cqes.size(), 2u);
	EXPECT_EQ(a.cqes[1].cookie, r2);
	EXPECT_EQ(a.cqes[1].status, MBCF_WC_REM_ACCESS_ERR);
	EXPECT_EQ(rx_unaccounted(a), 0);
	EXPECT_EQ(rx_unaccounted(b), 0);
}

// docs/protocol.md 8.3, the attacker's view: besides the psn to be
// acknowledged, a NAK may name only the read or atomic whose response is
// next to come; a later one, or one already answered, is dropped.
TEST_F(Pair, ReadNakMustNameTheAwaitedResponse)
{
	auto ctl = [](uint8_t status, uint32_t ack_psn) {
		mbcf_frame f{};
		f.op = MBCF_OP_ACK;
		f.status = status;
		f.dst_qpn = 0x11;
		f.src_qpn = 0x22;
		f.psn = 201;		// b's snd_max: it sent one response
		f.ack_psn = ack_psn;
		std::vector<uint8_t> v(MBCF_HDR_MAX);
		v.resize(mbcf_codec_build(&f, v.data()));
		return v;
	};
	uint64_t r0 = post(a, MBCF_OP_READ_REQ, 100);	// psn 100
	settle(a, b, now);
	ASSERT_EQ(a.cqes.size(), 1u);			// answered
	EXPECT_EQ(a.cqes[0].status, MBCF_WC_SUCCESS);
	uint64_t r1 = post(a, MBCF_OP_READ_REQ, 100);	// psn 101
	uint64_t r2 = post(a, MBCF_OP_READ_REQ, 100);	// psn 102
	a.out.clear();			// never reach b
	deliver(a, ctl(0, 103), now);	// ...but are acknowledged
	ASSERT_EQ(a.conn.snd_una, a.conn.snd_max);
	ASSERT_EQ(a.conn.rd_out, 2u);
	deliver(a, ctl(MBCF_ST_REMOTE_ACCESS_ERROR, 100), now);	// answered
	deliver(a, ctl(MBCF_ST_REMOTE_ACCESS_ERROR, 102), now);	// not next
	deliver(a, ctl(MBCF_ST_REMOTE_ACCESS_ERROR, 103), now);	// nothing there
	EXPECT_EQ(a.conn.state, MBCF_CONN_RTS);
	EXPECT_EQ(a.conn.ctr.drop_bad_ack, 3u);
	EXPECT_EQ(a.conn.ctr.naks_rx, 0u);
	EXPECT_EQ(a.cqes.size(), 1u);
	deliver(a, ctl(MBCF_ST_REMOTE_ACCESS_ERROR, 101), now);
	EXPECT_EQ(a.conn.state, MBCF_CONN_ERROR);
	EXPECT_EQ(a.conn.ctr.naks_rx, 1u);
	ASSERT_EQ(a.cqes.size(), 3u);
	EXPECT_EQ(a.cqes[1].cookie, r1);
	EXPECT_EQ(a.cqes[1].status, MBCF_WC_REM_ACCESS_ERR);
	EXPECT_EQ(a.cqes[2].cookie, r2);
	EXPECT_EQ(a.cqes[2].status, MBCF_WC_WR_FLUSH_ERR);
	(void)r0;
	EXPECT_EQ(rx_unaccounted(a), 0);
}

TEST_F(Pair, MisalignedAtomicIsInvalidRequest)
{
	post(a, MBCF_OP_FETCH_ADD, 8, kBase + 4);
	settle(a, b, now);
	ASSERT_EQ(a.cqes.size(), 1u);
	EXPECT_EQ(a.cqes[0].status, MBCF_WC_REM_INV_REQ_ERR);
	EXPECT_EQ(b.atomics, 0);
}

TEST_F(Pair, ReceiveTooSmallIsLengthError)
{
	b.recvs.push_back({7, 100});
	post(a, MBCF_OP_SEND, 200);
	settle(a, b, now);
	ASSERT_EQ(b.rcqes.size(), 1u);
	EXPECT_EQ(b.rcqes[0].status, MBCF_WC_LOC_LEN_ERR);
	ASSERT_EQ(a.cqes.size(), 1u);
	EXPECT_EQ(a.cqes[0].status, MBCF_WC_REM_INV_REQ_ERR);
}

TEST_F(Pair, TooManyReadsIsInvalidRequest)
{
	mbcf_conn_cfg ca = default_cfg(0x11, 0x22, 100, 200);
	ca.max_rd_atomic = 8;	// more than B's max_dest_rd_atomic (4)
	setup(ca, default_cfg(0x22, 0x11, 200, 100));
	for (int i = 0; i < 5; i++)
		post(a, MBCF_OP_READ_REQ, 8);
	pump(a, b, now);
	// B took four: it answers them before it rejects the fifth (8.3)
	EXPECT_EQ(b.conn.state, MBCF_CONN_RTS);
	EXPECT_TRUE(b.conn.nak_drain);
	settle(a, b, now);
	idle_acks();	// the last response asked for no ACK: it comes late
	EXPECT_EQ(b.conn.state, MBCF_CONN_ERROR);
	ASSERT_EQ(a.cqes.size(), 5u);
	for (int i = 0; i < 4; i++)
		EXPECT_EQ(a.cqes[i].status, MBCF_WC_SUCCESS) << i;
	EXPECT_EQ(a.cqes[4].status, MBCF_WC_REM_INV_REQ_ERR);
	EXPECT_EQ(b.conn.ctr.remote_errors, 1u);
}

// A write rejected after a read the responder took: as in verbs, the read
// completes with its data before the write's error.  The responder sends
// its responses first and NAKs once they are acknowledged, taking nothing
// from the rejected frame on (docs/protocol.md 8.3).
TEST_F(Pair, ReadBeforeARejectedWriteCompletesFirst)
{
	uint8_t *t = b.target(kRkey, kBase);
	for (int i = 0; i < 30000; i++)
		t[i] = (uint8_t)(i * 13);
	uint64_t rd = post(a, MBCF_OP_READ_REQ, 30000, kBase);
	uint64_t bad = post(a, MBCF_OP_WRITE, 10, 0x90000, 0x99);	// read-only
	uint64_t after = post(a, MBCF_OP_WRITE, 10);
	pump(a, b, now);
	EXPECT_TRUE(b.conn.nak_drain);		// 22 response frames to go
	EXPECT_EQ(b.conn.state, MBCF_CONN_RTS);
	EXPECT_EQ(b.conn.ctr.naks_tx, 0u);
	EXPECT_EQ(b.conn.ctr.drop_error_state, 1u);	// the write after it
	settle(a, b, now);
	EXPECT_EQ(b.conn.state, MBCF_CONN_ERROR);
	EXPECT_EQ(a.conn.state, MBCF_CONN_ERROR);
	EXPECT_EQ(b.conn.ctr.naks_tx, 1u);
	EXPECT_EQ(a.conn.ctr.naks_rx, 1u);
	EXPECT_EQ(b.target_writes, 0);
	ASSERT_EQ(a.cqes.size(), 3u);
	EXPECT_EQ(a.cqes[0].cookie, rd);
	EXPECT_EQ(a.cqes[0].status, MBCF_WC_SUCCESS);
	EXPECT_EQ(memcmp(a.local[rd].data(), t, 30000), 0);
	EXPECT_EQ(a.cqes[1].cookie, bad);
	EXPECT_EQ(a.cqes[1].status, MBCF_WC_REM_ACCESS_ERR);
	EXPECT_EQ(a.cqes[2].cookie, after);
	EXPECT_EQ(a.cqes[2].status, MBCF_WC_WR_FLUSH_ERR);
	EXPECT_EQ(rx_unaccounted(a), 0);
	EXPECT_EQ(rx_unaccounted(b), 0);
}

// The same with frames lost on the way.  The requester's read is
// acknowledged with its first response frames; the rejected write never
// is, and its timeouts use up the retries while the responder waits for
// its acknowledgements (lost) to send the rest.  Each response frame the
// requester takes gives its retries back: the responses still arrive,
// then the NAK.
TEST_F(Pair, ResponsesLostBeforeTheNakAreResentAndKeepTheRequesterAlive)
{
	uint8_t *t = b.target(kRkey, kBase);
	for (int i = 0; i < 30000; i++)
		t[i] = (uint8_t)(i * 5);
	uint64_t rd = post(a, MBCF_OP_READ_REQ, 30000, kBase);
	uint64_t bad = post(a, MBCF_OP_WRITE, 10, 0x90000, 0x99);
	pump(a, b, now);
	ASSERT_TRUE(b.conn.nak_drain);
	pump(b, a, now);			// the first response frames
	a.out.clear();				// their acknowledgement lost
	ASSERT_EQ(a.conn.snd_una, a.conn.snd_max - 1);	// only the write
	for (int i = 0; i < 8 && a.conn.retry_left; i++) {	// use them up
		fire(a);			// a timeout (or a tail probe)
		pump(a, b, now);		// dropped at b: nothing taken
		b.out.clear();
	}
	EXPECT_EQ(a.conn.retry_left, 0u);
	EXPECT_EQ(a.conn.state, MBCF_CONN_RTS);
	uint32_t got = a.conn.ctr.rx_accepted;
	fire(b);				// b resends what a has
	pump(b, a, now);
	pump(a, b, now);			// a's ack opens b's window
	pump(b, a, now);			// new response frames
	EXPECT_GT(a.conn.ctr.rx_accepted, got);
	EXPECT_EQ(a.conn.retry_left, 3u);	// given back by them
	settle(a, b, now);
	ASSERT_EQ(a.cqes.size(), 2u);
	EXPECT_EQ(a.cqes[0].cookie, rd);
	EXPECT_EQ(a.cqes[0].status, MBCF_WC_SUCCESS);
	EXPECT_EQ(memcmp(a.local[rd].data(), t, 30000), 0);
	EXPECT_EQ(a.cqes[1].cookie, bad);
	EXPECT_EQ(a.cqes[1].status, MBCF_WC_REM_ACCESS_ERR);
	EXPECT_EQ(b.conn.state, MBCF_CONN_ERROR);
	EXPECT_EQ(b.conn.ctr.naks_tx, 1u);
	EXPECT_EQ(rx_unaccounted(a), 0);
	EXPECT_EQ(rx_unaccounted(b), 0);
}

TEST_F(Pair, ReadsBeyondMaxRdAtomicWait)
{
	for (int i = 0; i < 6; i++)
		post(a, MBCF_OP_READ_REQ, 8);
	EXPECT_EQ(a.out.size(), 4u);	// max_rd_atomic
	EXPECT_TRUE(frame(a, 3).flags & MBCF_F_ACKREQ);
	settle(a, b, now);
	EXPECT_EQ(a.cqes.size(), 6u);
	EXPECT_EQ(b.conn.state, MBCF_CONN_RTS);
}

TEST_F(Pair, WrongQpIsDropped)
{
	post(a, MBCF_OP_WRITE, 10);
	mbcf_frame f = frame(a, 0);
	f.src_qpn = 0x33;
	mbcf_conn_rx(&b.conn, &f, now);
	EXPECT_EQ(b.conn.ctr.drop_wrong_qp, 1u);
	EXPECT_EQ(b.target_writes, 0);
}

TEST_F(Pair, AckOfUnsentPsnIsDropped)
{
	post(b, MBCF_OP_WRITE, 10);
	post(a, MBCF_OP_WRITE, 10);
	mbcf_frame f = frame(b, 0);
	f.ack_psn = 150;	// A never sent 101..149
	mbcf_conn_rx(&a.conn, &f, now);
	EXPECT_EQ(a.conn.ctr.drop_bad_ack, 1u);
	EXPECT_EQ(a.target_writes, 0);
}

TEST_F(Pair, PeerFixesStreamStartBeforeSetSend)
{
	post(b, MBCF_OP_WRITE, 10);
	mbcf_frame f = frame(b, 0);
	f.ack_psn = 150;	// B expects our stream at 150: we were never told
	mbcf_conn_rx(&a.conn, &f, now);
	EXPECT_EQ(a.conn.ctr.drop_bad_ack, 0u);
	EXPECT_EQ(a.target_writes, 1);
	EXPECT_EQ(a.conn.snd_una, 150u);
	a.out.clear();
	post(a, MBCF_OP_WRITE, 10);
	EXPECT_EQ(frame(a, 0).psn, 150u);
}

TEST_F(Pair, AckBeyondAnythingSentIsHarmlessWhenIdle)
{
	mbcf_conn_cfg ca = default_cfg(0x11, 0x22, 100, 200);
	ASSERT_EQ(mbcf_conn_set_send(&a.conn, &ca), 0);	// start fixed at 100
	post(b, MBCF_OP_WRITE, 10);
	mbcf_frame f = frame(b, 0);
	f.ack_psn = 150;
	mbcf_conn_rx(&a.conn, &f, now);
	EXPECT_EQ(a.conn.ctr.drop_bad_ack, 0u);
	EXPECT_EQ(a.target_writes, 1);
	EXPECT_EQ(a.conn.snd_una, 100u);
}

TEST_F(Pair, BusyTransmitWaitsForKick)
{
	a.busy = 1;
	post(a, MBCF_OP_WRITE, 10);
	EXPECT_TRUE(a.out.empty());
	EXPECT_EQ(a.conn.ctr.tx_busy, 1u);
	EXPECT_NE(a.timer_at, 0u);	// fallback if no kick comes
	mbcf_conn_kick(&a.conn, now);
	EXPECT_EQ(a.out.size(), 1u);
	settle(a, b, now);
	EXPECT_EQ(a.cqes.size(), 1u);
	EXPECT_EQ(a.conn.ctr.retransmits, 0u);
}

TEST_F(Pair, SequenceWrapsMidStream)
{
	setup(default_cfg(0x11, 0x22, 0xFFFFFA, 0xFFFFFD),
	      default_cfg(0x22, 0x11, 0xFFFFFD, 0xFFFFFA));
	for (int i = 0; i < 12; i++) {
		post(a, MBCF_OP_WRITE, 3000);
		post(b, MBCF_OP_READ_REQ, 2000);
	}
	a.out.erase(a.out.begin() + 3);	// a loss right at the wrap
	settle(a, b, now);
	for (int i = 0; i < 10 && (a.cqes.size() < 12 || b.cqes.size() < 12); i++) {
		if (a.timer_at)
			fire(a);
		if (b.timer_at)
			fire(b);
		settle(a, b, now);
	}
	EXPECT_EQ(a.cqes.size(), 12u);
	EXPECT_EQ(b.cqes.size(), 12u);
	EXPECT_LT(a.conn.snd_max, 100u);
	for (auto &c : a.cqes)
		EXPECT_EQ(c.status, MBCF_WC_SUCCESS);
}

TEST_F(Pair, SendSideIsSetAtRts)
{
	mbcf_conn_cfg ca = default_cfg(0x11, 0x22, 0, 200);
	setup(ca, default_cfg(0x22, 0x11, 200, 5000));
	ca.sq_psn = 5000;
	ca.retry_cnt = 1;
	ASSERT_EQ(mbcf_conn_set_send(&a.conn, &ca), 0);
	post(a, MBCF_OP_WRITE, 10);
	EXPECT_EQ(frame(a, 0).psn, 5000u);
	EXPECT_EQ(mbcf_conn_set_send(&a.conn, &ca), MBCF_POST_STATE);	// too late
	settle(a, b, now);
	EXPECT_EQ(a.cqes.size(), 1u);
	ca.retry_cnt = 9;
	EXPECT_EQ(mbcf_conn_set_send(&b.conn, &ca), MBCF_POST_INVAL);
}

TEST_F(Pair, FenceWaitsForEarlierReads)
{
	defer = true;
	post(a, MBCF_OP_READ_REQ, 100);
	mbcf_wr w = make_wr(next_cookie++, MBCF_OP_WRITE, 10, kBase, kRkey);
	w.flags = MBCF_WR_FENCE;
	a.local[w.cookie] = std::vector<uint8_t>(10, 1);
	ASSERT_EQ(mbcf_conn_enqueue(&a.conn, &w), 0);
	post(a, MBCF_OP_WRITE, 10);
	mbcf_conn_kick(&a.conn, now);
	ASSERT_EQ(a.out.size(), 1u);	// the fenced write waits, and so does the rest
	EXPECT_TRUE(frame(a, 0).flags & MBCF_F_ACKREQ);	// burst ends at the fence
	pump(a, b, now);
	pump(b, a, now);		// the read's response completes it
	EXPECT_EQ(a.cqes.size(), 1u);
	ASSERT_EQ(a.out.size(), 2u);
	EXPECT_EQ(frame(a, 0).op, MBCF_OP_WRITE);
	settle(a, b, now);
	EXPECT_EQ(a.cqes.size(), 3u);
}

TEST_F(Pair, LocalProtectionErrorOnResponseData)
{
	uint64_t c = post(a, MBCF_OP_READ_REQ, 100);
	post(a, MBCF_OP_WRITE, 10);
	a.local[c].resize(10);		// the local buffer cannot take the data
	settle(a, b, now);
	EXPECT_EQ(a.conn.state, MBCF_CONN_ERROR);
	ASSERT_EQ(a.cqes.size(), 2u);
	EXPECT_EQ(a.cqes[0].status, MBCF_WC_LOC_PROT_ERR);
	EXPECT_EQ(a.cqes[1].status, MBCF_WC_WR_FLUSH_ERR);
	EXPECT_EQ(a.error_status, MBCF_WC_LOC_PROT_ERR);
}

// The read's response data cannot be placed, and the write after it was
// acknowledged first: verbs completes in order, and nothing after an error
// succeeds -- the write is flushed although the peer executed it.
TEST_F(Pair, LocalProtectionErrorFlushesAcknowledgedLaterRequests)
{
	uint64_t c = post(a, MBCF_OP_READ_REQ, 100);
	post(a, MBCF_OP_WRITE, 10);
	a.local[c].resize(10);		// the local buffer cannot take the data
	pump(a, b, now);
	ASSERT_EQ(b.out.size(), 2u);
	EXPECT_EQ(frame(b, 0).op, MBCF_OP_READ_RESP);
	EXPECT_EQ(frame(b, 1).op, MBCF_OP_ACK);
	b.out.pop_front();		// the response is lost, the write's ack is not
	pump(b, a, now);
	EXPECT_TRUE(a.cqes.empty());	// the write waits for the read
	now += 2 * kMs;
	mbcf_conn_timeout(&b.conn, now);	// B sends its response again
	settle(a, b, now);
	EXPECT_EQ(a.conn.state, MBCF_CONN_ERROR);
	ASSERT_EQ(a.cqes.size(), 2u);
	EXPECT_EQ(a.cqes[0].cookie, c);
	EXPECT_EQ(a.cqes[0].status, MBCF_WC_LOC_PROT_ERR);
	EXPECT_EQ(a.cqes[1].status, MBCF_WC_WR_FLUSH_ERR);
	EXPECT_EQ(b.target_writes, 1);	// it did land
}

// A long read whose local buffer goes away (verbs: its MR deregistered)
// fails at the first response frame that cannot be placed, as rxe does: not
// after the rest of the response has arrived for nothing (64 MiB of it took
// over 30 s under load).  The frame is not accepted (drop_local_error), the
// rest is dropped in ERROR, and nothing of it is acknowledged.
TEST_F(Pair, LocalProtectionErrorFailsALongReadAtOnce)
{
	uint64_t c = post(a, MBCF_OP_READ_REQ, 20000);	// 14 response frames
	uint64_t w = post(a, MBCF_OP_WRITE, 10);
	a.local[c].resize(3000);	// room for two frames of it
	pump(a, b, now);		// the read and the write
	ASSERT_GE(b.out.size(), 4u);
	EXPECT_EQ(frame(b, 0).op, MBCF_OP_READ_RESP);
	b.out.resize(3);		// two frames placed, the third cannot be
	uint32_t failed_psn = frame(b, 2).psn;
	pump(b, a, now);
	EXPECT_EQ(a.conn.state, MBCF_CONN_ERROR);
	EXPECT_EQ(a.conn.ctr.rx_accepted, 2u);
	EXPECT_EQ(a.conn.ctr.drop_local_err, 1u);
	ASSERT_EQ(a.cqes.size(), 2u);
	EXPECT_EQ(a.cqes[0].cookie, c);
	EXPECT_EQ(a.cqes[0].status, MBCF_WC_LOC_PROT_ERR);
	EXPECT_EQ(a.cqes[1].cookie, w);
	EXPECT_EQ(a.cqes[1].status, MBCF_WC_WR_FLUSH_ERR);
	EXPECT_EQ(a.error_status, MBCF_WC_LOC_PROT_ERR);
	EXPECT_EQ(a.conn.rcv_nxt, failed_psn);	// not accepted
	EXPECT_EQ(rx_unaccounted(a), 0);	// one verdict each, the new one too
	size_t sent = a.out.size();
	b.out.clear();
	now += 2 * kMs;
	mbcf_conn_timeout(&b.conn, now);	// B resends: A, in ERROR, drops it all
	pump(b, a, now);
	EXPECT_EQ(a.out.size(), sent);	// and says nothing
	EXPECT_GT(a.conn.ctr.drop_error_state, 0u);
	EXPECT_EQ(a.conn.ctr.drop_local_err, 1u);
	EXPECT_EQ(rx_unaccounted(a), 0);
}

// A request whose local buffer is gone when its frame is built (verbs:
// the MR was deregistered under it) fails with LOC_PROT_ERR; what came
// before completes, what comes after is flushed.
TEST_F(Pair, XmitFaultFailsTheRequestWithLocalProtectionError)
{
	uint64_t c1 = post(a, MBCF_OP_WRITE, 10);
	settle(a, b, now);
	ASSERT_EQ(a.cqes.size(), 1u);
	defer = true;
	uint64_t c2 = post(a, MBCF_OP_WRITE, 3000);
	uint64_t c3 = post(a, MBCF_OP_SEND, 10);
	a.fault_cookie = c2;
	mbcf_conn_kick(&a.conn, now);
	EXPECT_TRUE(a.out.empty());	// no byte of it leaves
	EXPECT_EQ(a.conn.state, MBCF_CONN_ERROR);
	EXPECT_EQ(a.errors, 1);
	ASSERT_EQ(a.cqes.size(), 3u);
	EXPECT_EQ(a.cqes[0].cookie, c1);
	EXPECT_EQ(a.cqes[0].status, MBCF_WC_SUCCESS);
	EXPECT_EQ(a.cqes[1].cookie, c2);
	EXPECT_EQ(a.cqes[1].status, MBCF_WC_LOC_PROT_ERR);
	EXPECT_EQ(a.cqes[2].cookie, c3);
	EXPECT_EQ(a.cqes[2].status, MBCF_WC_WR_FLUSH_ERR);
}

// ... also when it goes mid-message: the frames sent are not taken back.
TEST_F(Pair, XmitFaultMidMessage)
{
	uint64_t c = post(a, MBCF_OP_WRITE, 20000);	// 14 frames, window 16
	ASSERT_GE(a.out.size(), 2u);
	a.out.resize(1);		// all but the first are lost
	a.fault_cookie = c;		// and its memory goes
	pump(a, b, now);
	now += 2 * kMs;
	fire(a);			// the retransmission cannot be built
	EXPECT_EQ(a.conn.state, MBCF_CONN_ERROR);
	ASSERT_EQ(a.cqes.size(), 1u);
	EXPECT_EQ(a.cqes[0].status, MBCF_WC_LOC_PROT_ERR);
}

TEST_F(Pair, ResetConnectionDropsEverything)
{
	post(a, MBCF_OP_WRITE, 10);
	mbcf_conn_flush(&b.conn);
	EXPECT_EQ(b.conn.state, MBCF_CONN_RESET);
	EXPECT_STREQ(mbcf_conn_state_name(b.conn.state), "RESET");
	pump(a, b, now);
	EXPECT_EQ(b.conn.ctr.drop_error_state, 1u);
	EXPECT_EQ(b.target_writes, 0);
	EXPECT_TRUE(b.out.empty());
	mbcf_wr w = make_wr(1, MBCF_OP_WRITE, 1, kBase, kRkey);
	EXPECT_EQ(mbcf_conn_post(&b.conn, &w, now), MBCF_POST_STATE);
	ASSERT_EQ(b.init(default_cfg(0x22, 0x11, 200, 100)), 0);	// RESET -> RTS
	EXPECT_EQ(b.conn.state, MBCF_CONN_RTS);
}

TEST_F(Pair, PostRejectsBadRequests)
{
	mbcf_wr w = make_wr(1, MBCF_OP_READ_RESP, 1, kBase, kRkey);
	EXPECT_EQ(mbcf_conn_post(&a.conn, &w, now), MBCF_POST_INVAL);
	w.op = MBCF_OP_ACK;
	EXPECT_EQ(mbcf_conn_post(&a.conn, &w, now), MBCF_POST_INVAL);
	w.op = MBCF_OP_WRITE;
	w.len = MBCF_MSG_MAX + 1;
	EXPECT_EQ(mbcf_conn_post(&a.conn, &w, now), MBCF_POST_INVAL);
	w.len = 1;
	w.flags = 0x10;	// no such flag
	EXPECT_EQ(mbcf_conn_post(&a.conn, &w, now), MBCF_POST_INVAL);
	w.flags = 0;
	a.local[1] = std::vector<uint8_t>(1);
	for (int i = 0; i < 64; i++)
		EXPECT_EQ(mbcf_conn_enqueue(&a.conn, &w), 0);
	EXPECT_EQ(mbcf_conn_enqueue(&a.conn, &w), MBCF_POST_FULL);
}

TEST_F(Pair, BrokenSegmentationIsInvalidRequest)
{
	post(a, MBCF_OP_WRITE, 10);
	mbcf_frame f = frame(a, 0);
	f.flags &= ~MBCF_F_FIRST;	// a middle frame with no first
	f.run = 1;
	uint8_t hdr[MBCF_HDR_MAX];
	uint32_t hl = mbcf_codec_build(&f, hdr);
	std::vector<uint8_t> b2(hdr, hdr + hl);
	b2.resize(hl + 10, 0);
	deliver(b, b2, now);
	EXPECT_EQ(b.conn.state, MBCF_CONN_ERROR);
	EXPECT_EQ(b.conn.ctr.naks_tx, 1u);
	EXPECT_EQ(frame(b, 0).status, MBCF_ST_REMOTE_INVALID_REQUEST);
}

// A's request is acknowledged but the response is lost: the responder's
// go-back-N owes it; A probes the peer meanwhile (section 7.5).
class Probe : public Pair {
protected:
	void ack_request_lose_response()
	{
		post(a, MBCF_OP_READ_REQ, 100);
		pump(a, b, now);
		b.out.clear();		// READ_RESP lost
		mbcf_frame k{};
		k.op = MBCF_OP_ACK;
		k.dst_qpn = 0x11;
		k.src_qpn = 0x22;
		k.psn = b.conn.snd_max;		// checked (6.4)
		k.ack_psn = 101;
		mbcf_conn_rx(&a.conn, &k, now);	// ...but an ACK got through
		ASSERT_EQ(a.conn.snd_una, a.conn.snd_max);
		ASSERT_EQ(a.conn.rd_out, 1u);
		ASSERT_NE(a.timer_at, 0u);
	}
};

TEST_F(Probe, VanishedResponderIsRetryExceeded)
{
	ack_request_lose_response();
	mbcf_conn_flush(&b.conn);	// the responder is gone
	for (int i = 0; i < 3; i++) {
		fire(a);
		ASSERT_EQ(a.out.size(), 1u);
		mbcf_frame p = frame(a, 0);
		EXPECT_EQ(p.op, MBCF_OP_ACK);
		EXPECT_EQ(p.flags, MBCF_F_ACKREQ);
		pump(a, b, now);
	}
	EXPECT_TRUE(a.cqes.empty());
	fire(a);
	ASSERT_EQ(a.cqes.size(), 1u);
	EXPECT_EQ(a.cqes[0].status, MBCF_WC_RETRY_EXC_ERR);
	EXPECT_EQ(a.conn.ctr.timeouts, 4u);
}

TEST_F(Probe, AnsweredProbeKeepsWaiting)
{
	ack_request_lose_response();
	fire(a);
	fire(a);
	EXPECT_EQ(a.conn.retry_left, 1);
	a.out.pop_front();		// the first probe was lost
	pump(a, b, now);		// B answers the second
	ASSERT_EQ(b.out.size(), 1u);
	EXPECT_EQ(frame(b, 0).op, MBCF_OP_ACK);
	pump(b, a, now);
	EXPECT_EQ(a.conn.retry_left, 3);	// alive: fresh retries
	now += 2 * kMs;
	mbcf_conn_timeout(&b.conn, now);	// B's go-back-N resends the response
	settle(a, b, now);
	ASSERT_EQ(a.cqes.size(), 1u);
	EXPECT_EQ(a.cqes[0].status, MBCF_WC_SUCCESS);
	EXPECT_EQ(a.conn.rd_out, 0u);
}

TEST_F(Pair, FlushCompletesEverythingAndCancelsTimer)
{
	b.recvs.push_back({1, 4096});
	post(a, MBCF_OP_SEND, 3000);	// multi-frame: B claims a receive
	a.out.pop_back();
	pump(a, b, now);
	post(a, MBCF_OP_WRITE, 1);
	mbcf_conn_flush(&a.conn);
	EXPECT_EQ(a.conn.state, MBCF_CONN_RESET);
	EXPECT_EQ(a.cqes.size(), 2u);
	EXPECT_EQ(a.timer_at, 0u);
	mbcf_conn_flush(&b.conn);
	ASSERT_EQ(b.rcqes.size(), 1u);
	EXPECT_EQ(b.rcqes[0].status, MBCF_WC_WR_FLUSH_ERR);
}

}  // namespace
