// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
// Early placement and selective repeat (docs/protocol.md 5.1, 7.2): a WRITE
// frame after a gap is placed at once when its run (the WRITE frames under
// its rkey right before it) reaches back to the gap, never a message's LAST,
// and later bytes win over an earlier frame's resend; the sender resends
// only what the receiver could not place.  Every test checks the target's
// bytes exactly.
#include <gtest/gtest.h>

#include <algorithm>

#include "harness.h"
#include "pair.h"

using namespace mbcft;

namespace {

class Early : public Pair {
protected:
	uint32_t seg = mbcf_codec_max_payload(1500, MBCF_OP_WRITE);

	// b's send side settled, as a QP in RTS has it: a frame placed early
	// must acknowledge b's stream (5.1)
	void SetUp() override
	{
		setup_window(64);
		mbcf_conn_cfg cb = default_cfg(0x22, 0x11, 200, 100);
		ASSERT_EQ(mbcf_conn_set_send(&b.conn, &cb), 0);
	}

	// A WRITE frame for b as a blind spoofer builds it: any psn, a run
	// reaching back over the whole span, a guessed ack_psn, its own bytes.
	std::vector<uint8_t> spoof(uint32_t psn, uint32_t ack, uint64_t va,
				   uint32_t len, uint8_t fill)
	{
		mbcf_frame f{};
		uint8_t hdr[MBCF_HDR_MAX];

		f.op = MBCF_OP_WRITE;
		f.dst_qpn = 0x22;
		f.src_qpn = 0x11;
		f.psn = psn & MBCF_PSN_MASK;
		f.ack_psn = ack & MBCF_PSN_MASK;
		f.run = MBCF_RUN_MAX;
		f.va = va;
		f.rkey = kRkey;
		f.paylen = len;
		uint32_t hl = mbcf_codec_build(&f, hdr);
		std::vector<uint8_t> fr(hdr, hdr + hl);
		fr.resize(hl + len, fill);
		return fr;
	}

	// Queue a write of n full frames to raddr whose bytes say where they
	// belong (byte k of the message: k * 7 + salt); not sent yet.
	std::vector<uint8_t> queue_write(uint32_t n, uint64_t raddr, uint8_t salt,
					 uint8_t op = MBCF_OP_WRITE,
					 uint32_t rkey = kRkey)
	{
		defer = true;
		uint64_t ck = post(a, op, n * mbcf_codec_max_payload(1500, op),
				   raddr, rkey);
		auto &buf = a.local[ck];
		for (size_t k = 0; k < buf.size(); k++)
			buf[k] = (uint8_t)(k * 7 + salt);
		return buf;
	}

	void send_all()
	{
		mbcf_conn_kick(&a.conn, now);
	}

	// Deliver a's frames to b, losing those at the given positions of
	// a.out; the rest in order, each payload in pieces if split.
	void deliver_losing(std::initializer_list<size_t> lose, bool split = false)
	{
		for (size_t i = 0; !a.out.empty(); i++) {
			auto fr = a.out.front();
			a.out.pop_front();
			if (std::find(lose.begin(), lose.end(), i) != lose.end())
				continue;
			if (split)
				deliver_split(b, fr, now);
			else
				deliver(b, fr, now);
		}
	}

	std::vector<uint32_t> psns_sent()
	{
		std::vector<uint32_t> v;
		for (size_t i = 0; i < a.out.size(); i++)
			v.push_back(frame(a, i).psn);
		return v;
	}

	void expect_bytes(uint64_t raddr, const std::vector<uint8_t> &want)
	{
		const uint8_t *t = b.target(kRkey, raddr);
		ASSERT_NE(t, nullptr);
		for (size_t k = 0; k < want.size(); k++)
			ASSERT_EQ(t[k], want[k]) << "byte " << k;
	}

	void expect_clean_finish(size_t cqes)
	{
		settle(a, b, now);
		ASSERT_EQ(a.cqes.size(), cqes);
		for (auto &c : a.cqes)
			EXPECT_EQ(c.status, MBCF_WC_SUCCESS);
		EXPECT_EQ(a.conn.ctr.timeouts, 0u);
		EXPECT_EQ(b.conn.rcv_nxt, a.conn.snd_max);
		EXPECT_EQ(b.conn.early_n, 0u);
		for (uint64_t w : b.conn.rx_early)
			EXPECT_EQ(w, 0u);
		EXPECT_EQ(rx_unaccounted(a), 0);
		EXPECT_EQ(rx_unaccounted(b), 0);
	}
};

// One middle frame lost: the frames after it in its message are placed on
// arrival (in pieces, as a non-linear packet), the LAST is not; the sender
// resends the lost frame and the LAST, nothing else.
TEST_F(Early, ALostMiddleFrameIsResentAlone)
{
	auto want = queue_write(10, kBase, 1);
	send_all();
	ASSERT_EQ(a.out.size(), 10u);
	EXPECT_EQ(frame(a, 0).run, 0);
	EXPECT_EQ(frame(a, 9).run, 9);
	deliver_losing({3}, true);
	EXPECT_EQ(b.conn.rcv_nxt, 103u);		// a's stream starts at 100
	EXPECT_EQ(b.conn.ctr.rx_early, 5u);		// 104..108
	EXPECT_EQ(b.conn.ctr.drop_out_of_seq, 1u);	// 109, the LAST
	EXPECT_EQ(b.conn.ctr.rx_accepted, 8u);
	// placed already: the bytes of frames 4..8, not those of 9
	const uint8_t *t = b.target(kRkey, kBase);
	EXPECT_EQ(t[4 * seg], want[4 * seg]);
	EXPECT_EQ(t[9 * seg - 1], want[9 * seg - 1]);
	EXPECT_EQ(t[9 * seg], 0);
	EXPECT_EQ(b.rcqes.size(), 0u);

	pump(b, a, now);				// LOST(103)
	EXPECT_EQ(a.conn.ctr.selective_repeats, 1u);
	EXPECT_EQ(psns_sent(), (std::vector<uint32_t>{103, 109}));
	pump(a, b, now);
	EXPECT_EQ(b.conn.rcv_nxt, 110u);
	EXPECT_EQ(a.conn.ctr.retransmits, 2u);
	expect_clean_finish(1);
	expect_bytes(kBase, want);
	EXPECT_EQ(b.conn.ctr.rx_accepted, 10u);		// each frame once
}

// A later write over the lost frame's bytes: its frames are placed early
// (same key, the run reaches back), and the lost frame's resend writes
// around them -- the later write wins, as in order.  LASTs are not placed
// early; the sender resends the lost frame and the LASTs only.
TEST_F(Early, ALaterWriteOverTheLostFrameWins)
{
	auto first = queue_write(4, kBase, 1);
	auto second = queue_write(3, kBase, 99);	// over the first's start
	send_all();
	ASSERT_EQ(a.out.size(), 7u);
	EXPECT_EQ(frame(a, 4).run, 4);			// second's FIRST
	deliver_losing({1}, true);
	EXPECT_EQ(b.conn.ctr.rx_early, 3u);		// 102, 104, 105
	EXPECT_EQ(b.conn.ctr.drop_out_of_seq, 2u);	// 103, 106: LASTs
	const uint8_t *t = b.target(kRkey, kBase);
	EXPECT_EQ(t[seg], second[seg]);			// 105 over 101's bytes
	pump(b, a, now);
	EXPECT_EQ(psns_sent(), (std::vector<uint32_t>{101, 103, 106}));
	while (!a.out.empty()) {			// the resends, in pieces
		deliver_split(b, a.out.front(), now);
		a.out.pop_front();
	}
	EXPECT_EQ(b.conn.rcv_nxt, 107u);
	expect_clean_finish(2);
	std::vector<uint8_t> want = first;
	std::copy(second.begin(), second.end(), want.begin());
	expect_bytes(kBase, want);
}

// A run ends at another key (it may alias the same memory) and at any
// other operation (a send may land anywhere): nothing after them is
// placed early, and the loss costs a plain go-back.
TEST_F(Early, ARunEndsAtAnotherKeyOrOperation)
{
	b.add_region(0x55, 0x200000, 1 << 16, ACC_WRITE);
	b.recvs.push_back({77, 4096});
	auto w1 = queue_write(3, kBase, 1);
	auto w2 = queue_write(2, 0x200000, 2, MBCF_OP_WRITE, 0x55);
	post(a, MBCF_OP_SEND, 100);
	auto w3 = queue_write(3, kBase + 3 * seg, 3);
	send_all();
	ASSERT_EQ(a.out.size(), 9u);
	std::vector<int> runs;
	for (size_t i = 0; i < 9; i++)
		runs.push_back(frame(a, i).op == MBCF_OP_WRITE ? frame(a, i).run : -1);
	EXPECT_EQ(runs, (std::vector<int>{0, 1, 2, 0, 1, -1, 0, 1, 2}));
	deliver_losing({1});
	EXPECT_EQ(b.conn.ctr.rx_early, 0u);
	pump(b, a, now);
	EXPECT_EQ(psns_sent(), (std::vector<uint32_t>{101, 102, 103, 104, 105, 106,
						       107, 108}));
	EXPECT_EQ(a.conn.ctr.selective_repeats, 0u);
	expect_clean_finish(4);
	expect_bytes(kBase, w1);
	expect_bytes(kBase + 3 * seg, w3);
	const uint8_t *t = b.target(0x55, 0x200000);
	for (size_t k = 0; k < w2.size(); k++)
		ASSERT_EQ(t[k], w2[k]) << k;
}

// The FIRST frame lost: the rest of its message is placed all the same
// (each frame's index says the message began at or before the gap).
TEST_F(Early, ALostFirstFrameStillPlacesTheRest)
{
	auto want = queue_write(5, kBase, 3);
	send_all();
	deliver_losing({0});
	EXPECT_EQ(b.conn.ctr.rx_early, 3u);		// 101..103 (runs 1..3)
	pump(b, a, now);
	EXPECT_EQ(psns_sent(), (std::vector<uint32_t>{100, 104}));
	expect_clean_finish(1);
	expect_bytes(kBase, want);
}

// A second loss in the same message, which no LOST showed before the
// go-back: the jump stops at it, the next frame finds it, and the sender
// repeats selectively again -- a round trip later, no timeout.
TEST_F(Early, ASecondLossIsFoundAfterTheJump)
{
	auto want = queue_write(12, kBase, 5);
	send_all();
	deliver_losing({2, 6});
	EXPECT_EQ(b.conn.ctr.rx_early, 7u);		// 103..105, 107..110
	ASSERT_EQ(b.out.size(), 2u);			// LOST(102) from 103 and
	EXPECT_EQ(frame(b, 1).seen, 111u);		// from 111, which asked:
	b.out.pop_back();				// that one is lost
	pump(b, a, now);				// LOST(102)
	EXPECT_EQ(psns_sent(), (std::vector<uint32_t>{102, 111}));
	deliver(b, a.out.front(), now);			// 102: up to 106
	a.out.pop_front();
	EXPECT_EQ(b.conn.rcv_nxt, 106u);
	deliver(b, a.out.front(), now);			// 111 finds 106 missing
	a.out.pop_front();
	pump(b, a, now);
	EXPECT_EQ(a.conn.ctr.selective_repeats, 2u);
	EXPECT_EQ(a.conn.ctr.selective_refills, 0u);
	EXPECT_EQ(psns_sent(), (std::vector<uint32_t>{106, 111}));
	expect_clean_finish(1);
	expect_bytes(kBase, want);
}

// The same two losses, and the LOST the LAST asked for arrives too: it was
// found before the go-back (an earlier round), and its map shows 106, which
// the resends skipped on the prediction, missing.  The sender goes back to
// 106 at once, selectively: 106 and the LAST after it (which will find 106
// missing again), not a round trip later.
TEST_F(Early, ASecondLossAnOlderLostShowsIsRefilledAtOnce)
{
	auto want = queue_write(12, kBase, 5);
	send_all();
	deliver_losing({2, 6});
	ASSERT_EQ(b.out.size(), 2u);
	uint16_t round = a.conn.tx_epoch;
	pump(b, a, now);				// both LOSTs
	EXPECT_EQ(a.conn.ctr.selective_repeats, 1u);
	EXPECT_EQ(a.conn.ctr.selective_refills, 1u);
	EXPECT_EQ(a.conn.tx_epoch, (uint16_t)(round + 2));
	EXPECT_EQ(psns_sent(), (std::vector<uint32_t>{102, 111, 106, 111}));
	EXPECT_EQ(frame(a, 1).epoch, (uint16_t)(round + 1));
	EXPECT_EQ(frame(a, 2).epoch, (uint16_t)(round + 2));
	// 102 joins up to 106; the first 111 finds 106 missing (a LOST of
	// the round before the refill: nothing more is resent); 106 joins up
	// to 111, which the second copy fills.
	pump(a, b, now);
	EXPECT_EQ(b.conn.rcv_nxt, 112u);
	EXPECT_EQ(b.conn.ctr.drop_out_of_seq, 2u);	// 111 twice, both before 106
	pump(b, a, now);
	EXPECT_TRUE(a.out.empty());
	EXPECT_EQ(a.conn.ctr.retransmits, 4u);
	expect_clean_finish(1);
	expect_bytes(kBase, want);
	EXPECT_EQ(b.conn.ctr.rx_accepted, 12u);		// each frame once
}

// One loss: the LOST the LAST asked for (an earlier round's) shows every
// frame the resends skipped placed, so it refills nothing, and the same
// LOST delivered again refills nothing either (its stretch of the map was
// looked at once).
TEST_F(Early, AnOlderLostRefillsOnlyWhatItShowsMissing)
{
	auto want = queue_write(12, kBase, 5);
	send_all();
	deliver_losing({2});
	ASSERT_EQ(b.out.size(), 2u);
	auto again = b.out.back();
	pump(b, a, now);				// LOST(102) from 103, 111
	EXPECT_EQ(a.conn.ctr.selective_refills, 0u);
	EXPECT_EQ(psns_sent(), (std::vector<uint32_t>{102, 111}));
	EXPECT_EQ(deliver(a, again, now), 0);		// the same map, once more
	EXPECT_EQ(a.conn.ctr.selective_refills, 0u);
	EXPECT_EQ(a.out.size(), 2u);
	expect_clean_finish(1);
	expect_bytes(kBase, want);
	EXPECT_EQ(a.conn.ctr.retransmits, 2u);
}

// A burst of losses: the LOST says what arrived before it (the frame that
// found the gap, and the map of what was placed), so the sender resends the
// whole burst in one round, not one frame per round trip.
TEST_F(Early, ABurstOfLossesIsResentInOneRound)
{
	auto want = queue_write(20, kBase, 13);
	send_all();
	deliver_losing({2, 3, 4, 5, 6, 7, 8, 9, 10, 11});
	ASSERT_GE(b.out.size(), 1u);
	mbcf_frame l = frame(b, 0);
	EXPECT_EQ(l.op, MBCF_OP_LOST);
	EXPECT_EQ(l.ack_psn, 102u);
	EXPECT_EQ(l.seen, 112u);
	ASSERT_NE(l.placed, nullptr);
	EXPECT_EQ(l.placed[1], 0x04);			// bit 10: psn 112
	EXPECT_EQ(l.placed[0], 0);
	pump(b, a, now);
	std::vector<uint32_t> want_psns;
	for (uint32_t p = 102; p <= 111; p++)
		want_psns.push_back(p);
	want_psns.push_back(119);			// the LAST
	EXPECT_EQ(psns_sent(), want_psns);
	expect_clean_finish(1);
	expect_bytes(kBase, want);
	EXPECT_EQ(a.conn.ctr.retransmits, 11u);
}

// A frame after the gap that fails its checks is not placed: in order it
// is rejected like any other, and nothing was written.
TEST_F(Early, AFrameThatFailsItsChecksIsNotPlacedEarly)
{
	b.add_region(0x55, 0x200000, 3 * seg, ACC_WRITE);	// room for 3 of 5
	auto want = queue_write(5, 0x200000, 7, MBCF_OP_WRITE, 0x55);
	send_all();
	deliver_losing({1});
	EXPECT_EQ(b.conn.ctr.rx_early, 1u);		// 102 fits, 103 does not
	EXPECT_EQ(b.conn.ctr.drop_out_of_seq, 2u);
	const uint8_t *t = b.target(0x55, 0x200000);
	for (uint32_t k = 0; k < seg; k++)
		ASSERT_EQ(t[2 * seg + k], want[2 * seg + k]);
	settle(a, b, now);
	ASSERT_EQ(a.cqes.size(), 1u);
	EXPECT_EQ(a.cqes[0].status, MBCF_WC_REM_ACCESS_ERR);
	EXPECT_EQ(b.conn.ctr.naks_tx, 1u);
	EXPECT_EQ(rx_unaccounted(b), 0);
}

// WRITE_IMM: the middle frames are placed early, the receive completes
// only with the LAST, after the resend filled the gap.
TEST_F(Early, WriteImmCompletesInOrder)
{
	b.recvs.push_back({77, 0});
	auto want = queue_write(6, kBase, 9, MBCF_OP_WRITE_IMM);
	send_all();
	deliver_losing({2});
	EXPECT_EQ(b.conn.ctr.rx_early, 2u);		// 103, 104; 105 is the IMM
	EXPECT_EQ(b.rcqes.size(), 0u);
	expect_clean_finish(1);
	ASSERT_EQ(b.rcqes.size(), 1u);
	EXPECT_EQ(b.rcqes[0].status, MBCF_WC_SUCCESS);
	EXPECT_EQ(b.rcqes[0].imm, 0x1234u);
	EXPECT_EQ(b.rcqes[0].byte_len, want.size());
	expect_bytes(kBase, want);
}

// A copy of a frame placed early (the sender's timeout resent it while the
// gap was still open) is a duplicate; the bytes are written once.
TEST_F(Early, ACopyOfAnEarlyFrameIsADuplicate)
{
	auto want = queue_write(4, kBase, 11);
	send_all();
	auto f2 = a.out.at(2);
	deliver_losing({1});
	int writes = b.target_writes;
	deliver(b, f2, now);
	EXPECT_EQ(b.target_writes, writes);
	EXPECT_EQ(b.conn.ctr.drop_duplicate, 1u);
	EXPECT_EQ(b.conn.ctr.rx_early, 1u);
	b.out.clear();					// every LOST lost
	fire(a);					// timeout: back to 101
	EXPECT_EQ(a.conn.ctr.timeouts, 1u);
	settle(a, b, now);
	ASSERT_EQ(a.cqes.size(), 1u);
	EXPECT_EQ(a.cqes[0].status, MBCF_WC_SUCCESS);
	EXPECT_EQ(b.conn.rcv_nxt, 104u);
	expect_bytes(kBase, want);
}

// While b waits for 103, a blind spoofer sends a WRITE
// for every psn of the span (104 .. 358) over the honest bytes, each with
// an ack_psn that is not b's stream (b has sent nothing: only 200 is).
// None is placed (rx_early_refused), so the honest frames that follow are
// placed and nothing of the spoofer's lands: the write completes intact.
TEST_F(Early, SpoofedWritesWithAGuessedAckAreNeverPlaced)
{
	auto want = queue_write(10, kBase, 1);
	send_all();
	ASSERT_EQ(a.out.size(), 10u);
	for (int i = 0; i < 3; i++) {			// 100..102
		deliver(b, a.out.front(), now);
		a.out.pop_front();
	}
	a.out.pop_front();				// 103 is lost
	ASSERT_EQ(b.conn.rcv_nxt, 103u);
	const uint32_t acks[] = { 199, 201, 200 + (1u << 23), 0, 0xffffff };
	for (uint32_t d = 1; d < MBCF_EARLY_SPAN; d++) {
		uint32_t psn = 103 + d;
		uint32_t ack = acks[d % 5];
		uint64_t va = kBase + (uint64_t)(d % 9) * seg;

		EXPECT_EQ(deliver(b, spoof(psn, ack, va, seg, 0xee), now),
			  MBCF_PARSE_OK);
	}
	EXPECT_EQ(b.conn.ctr.rx_early, 0u);
	EXPECT_EQ(b.conn.ctr.rx_early_refused, 255u);
	EXPECT_EQ(b.conn.early_n, 0u);
	EXPECT_EQ(b.target_writes, 3);			// 100..102 only
	const uint8_t *t = b.target(kRkey, kBase);
	for (uint32_t k = 3 * seg; k < 10 * seg; k++)
		ASSERT_EQ(t[k], 0) << k;
	deliver_losing({});				// 104..109, honest
	EXPECT_EQ(b.conn.ctr.rx_early, 5u);		// 104..108
	expect_clean_finish(1);
	expect_bytes(kBase, want);
	EXPECT_EQ(b.conn.ctr.rx_early_refused, 255u);
}

// Past 255 frames the run stays at 255, enough for the 255 frames after a
// gap the receiver keeps track of; the frames beyond are dropped and sent
// again, once.
TEST_F(Early, LongMessagesAndTheSpan)
{
	setup_window(512);
	b.add_region(0x66, 0x1000000, 400 * seg, ACC_WRITE);
	auto want = queue_write(400, 0x1000000, 1, MBCF_OP_WRITE, 0x66);
	send_all();
	ASSERT_EQ(a.out.size(), 400u);
	EXPECT_EQ(frame(a, 254).run, 254);
	EXPECT_EQ(frame(a, 299).run, 255);
	deliver_losing({10});
	EXPECT_EQ(b.conn.ctr.rx_early, 255u);		// 111..365
	EXPECT_EQ(b.conn.ctr.drop_out_of_seq, 134u);	// 366..499
	pump(b, a, now);
	auto p = psns_sent();
	ASSERT_GE(p.size(), 2u);
	EXPECT_EQ(p[0], 110u);
	EXPECT_EQ(p[1], 366u);
	settle(a, b, now);
	ASSERT_EQ(a.cqes.size(), 1u);
	EXPECT_EQ(a.cqes[0].status, MBCF_WC_SUCCESS);
	EXPECT_EQ(a.conn.ctr.timeouts, 0u);
	EXPECT_EQ(a.conn.ctr.retransmits, 135u);	// 110 and 366..499
	const uint8_t *t = b.target(0x66, 0x1000000);
	for (size_t k = 0; k < want.size(); k++)
		ASSERT_EQ(t[k], want[k]) << k;
	EXPECT_EQ(rx_unaccounted(b), 0);
}

}  // namespace
