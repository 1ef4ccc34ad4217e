// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
// The loss-adaptive send-ahead window (docs/protocol.md 4.3): a loss cuts
// it by a quarter once per episode (not below a quarter of cfg.window), a
// timeout halves it every time, and acknowledged frames after the episode
// grow it back by one per quarter window, never past cfg.window.
#include <gtest/gtest.h>

#include <algorithm>

#include "harness.h"
#include "pair.h"

using namespace mbcft;

namespace {

class Window : public Pair {
protected:
	// Move a's frames to b, dropping those whose index is in `drop`.
	void deliver_but(Env &from, Env &to, std::initializer_list<size_t> drop)
	{
		size_t i = 0;

		while (!from.out.empty()) {
			auto fr = from.out.front();
			from.out.pop_front();
			if (std::find(drop.begin(), drop.end(), i++) == drop.end())
				deliver(to, fr, now);
		}
	}

	void post_writes(int n)
	{
		for (int i = 0; i < n; i++)
			post(a, MBCF_OP_WRITE, 8);
	}

	void expect_all_done(size_t n)
	{
		ASSERT_EQ(a.cqes.size(), n);
		for (size_t i = 0; i < n; i++) {
			EXPECT_EQ(a.cqes[i].status, MBCF_WC_SUCCESS) << i;
			EXPECT_EQ(a.cqes[i].cookie, i + 1) << i;
		}
	}
};

TEST_F(Window, StartsAtTheConfiguredWindow)
{
	EXPECT_EQ(a.conn.wnd, 16u);
	defer = true;
	post_writes(40);
	mbcf_conn_kick(&a.conn, now);
	EXPECT_EQ(a.out.size(), 16u);
	settle(a, b, now);
	expect_all_done(40);
	EXPECT_EQ(a.conn.wnd, 16u);	// no loss, no change
	EXPECT_EQ(a.conn.ctr.window_cuts, 0u);
}

// psn 100 is lost: b answers the gap with LOST(100), a cuts its window by
// a quarter and resends 100.. within the new one.  A second loss among the
// resent frames, sent before the cut, belongs to the same episode.
TEST_F(Window, LossCutsItOncePerEpisode)
{
	defer = true;
	post_writes(40);
	mbcf_conn_kick(&a.conn, now);
	ASSERT_EQ(a.out.size(), 16u);		// psn 100..115
	deliver_but(a, b, {0});
	// LOST for the first frame after the gap and the two that ask (7, 15)
	EXPECT_EQ(b.conn.ctr.lost_tx, 3u);
	EXPECT_EQ(b.conn.ctr.drop_out_of_seq, 15u);
	pump(b, a, now);
	EXPECT_EQ(a.conn.ctr.window_cuts, 1u);
	EXPECT_EQ(a.conn.wnd, 12u);
	ASSERT_EQ(a.out.size(), 12u);		// 100..111: the new window
	EXPECT_EQ(frame(a, 0).psn, 100u);
	EXPECT_EQ(frame(a, 11).psn, 111u);
	EXPECT_EQ(a.conn.ctr.retransmits, 12u);

	deliver_but(a, b, {3});			// 103 lost this time
	// 104 (a new round), 105 and 111 (they ask: every 6, window full)
	EXPECT_EQ(b.conn.ctr.lost_tx, 6u);
	pump(b, a, now);			// ACK up to 103, LOST(103) x3
	EXPECT_EQ(a.conn.snd_una, 103u);
	EXPECT_EQ(a.conn.ctr.lost_rx, 6u);
	EXPECT_EQ(a.conn.ctr.window_cuts, 1u);	// same episode: no cut
	EXPECT_EQ(a.conn.wnd, 12u);
	EXPECT_EQ(a.out.size(), 12u);		// 103..114, resent once

	settle(a, b, now);
	expect_all_done(40);
	// After the episode (everything before psn 116 acknowledged) psns
	// 116..139 were acknowledged: 3 each grow it to 13, 14, 15, 16 (12
	// frames); there it stays.
	EXPECT_EQ(a.conn.wnd, 16u);
	EXPECT_EQ(a.conn.ctr.window_cuts, 1u);
}

// A loss after the episode ended is a new one: cut again.
TEST_F(Window, ANewEpisodeCutsAgain)
{
	defer = true;
	post_writes(16);
	mbcf_conn_kick(&a.conn, now);
	deliver_but(a, b, {0});
	pump(b, a, now);
	settle(a, b, now);
	ASSERT_EQ(a.conn.wnd, 12u);
	post_writes(16);			// psn 116..131
	mbcf_conn_kick(&a.conn, now);
	ASSERT_EQ(a.out.size(), 12u);
	deliver_but(a, b, {1});			// 117 lost
	pump(b, a, now);
	EXPECT_EQ(a.conn.ctr.window_cuts, 2u);
	EXPECT_EQ(a.conn.wnd, 9u);
	settle(a, b, now);
	expect_all_done(32);
}

// A LOST cuts no further than a quarter of the configured window: random
// loss says nothing about the link's capacity, and below that go-back-N's
// saving (fewer frames resent per loss) no longer pays for the link left
// idle (one guest, 1 % netem loss, 64 KiB writes: a window halved down to
// 6-14 frames gave 37-45 MB/s, a fixed 32 gave 72-83).  A timeout still
// halves it down to MBCF_WINDOW_MIN, and from below the floor a LOST
// does not raise it.
TEST_F(Window, LossCutsStopAtAQuarterOfTheConfiguredWindow)
{
	setup_window(64);
	defer = true;
	// each burst was sent before its cut: nothing grows it meanwhile
	uint32_t expect[] = {48, 36, 27, 21, 16, 16};
	int posted = 0;
	for (uint32_t want : expect) {
		post_writes(8);
		posted += 8;
		mbcf_conn_kick(&a.conn, now);
		deliver_but(a, b, {0});		// each burst loses its first
		pump(b, a, now);
		EXPECT_EQ(a.conn.wnd, want);
		settle(a, b, now);
	}
	EXPECT_EQ(a.conn.ctr.window_cuts, 5u);
	expect_all_done(posted);
	// the last loss, at the floor, began no episode: its 8 frames grew
	// the window by one per 4
	EXPECT_EQ(a.conn.wnd, 18u);

	post_writes(8);
	mbcf_conn_kick(&a.conn, now);
	a.out.clear();				// all lost
	fire(a);
	EXPECT_EQ(a.conn.wnd, 9u);		// a timeout: below the floor
	ASSERT_EQ(a.out.size(), 1u);		// the oldest frame alone
	pump(a, b, now);
	pump(b, a, now);			// answered: the other 7
	ASSERT_EQ(a.out.size(), 7u);
	deliver_but(a, b, {0});
	pump(b, a, now);
	EXPECT_EQ(a.conn.wnd, 9u);		// a LOST: not raised to it
	settle(a, b, now);
	EXPECT_EQ(a.conn.ctr.window_cuts, 6u);
	expect_all_done(posted + 8);
}

// Timeouts cut every time (the link may be gone), down to MBCF_WINDOW_MIN;
// each resends only the oldest frame (7.1).
TEST_F(Window, TimeoutHalvesItEachTimeDownToTheMinimum)
{
	defer = true;
	post_writes(20);
	mbcf_conn_kick(&a.conn, now);
	ASSERT_EQ(a.out.size(), 16u);
	a.out.clear();				// all lost
	fire(a);
	EXPECT_EQ(a.conn.wnd, 8u);
	EXPECT_EQ(a.out.size(), 1u);
	a.out.clear();
	fire(a);
	EXPECT_EQ(a.conn.wnd, 4u);
	EXPECT_EQ(a.out.size(), 1u);
	a.out.clear();
	fire(a);
	EXPECT_EQ(a.conn.wnd, (uint32_t)MBCF_WINDOW_MIN);
	ASSERT_EQ(a.out.size(), 1u);
	EXPECT_EQ(frame(a, 0).psn, 100u);
	EXPECT_EQ(a.conn.ctr.window_cuts, 3u);
	EXPECT_EQ(a.conn.ctr.timeouts, 3u);
	EXPECT_EQ(a.conn.ctr.retransmits, 3u);
	settle(a, b, now);
	expect_all_done(20);
}

// After a timeout one frame is in flight until the peer answers: what
// timed out on a soft device is mostly still queued at the peer, and a
// window of copies would queue behind it (4096 QPs: 8 copies each, QPs
// out of retries).  The answer reopens the (halved) window at once.
TEST_F(Window, ATimeoutResendsOneFrameUntilThePeerAnswers)
{
	defer = true;
	post_writes(20);
	mbcf_conn_kick(&a.conn, now);
	ASSERT_EQ(a.out.size(), 16u);
	auto queued = a.out;			// delayed, not lost
	a.out.clear();
	fire(a);
	ASSERT_EQ(a.out.size(), 1u);
	mbcf_frame p = frame(a, 0);
	EXPECT_EQ(p.psn, 100u);
	EXPECT_TRUE(p.flags & MBCF_F_ACKREQ);	// it fills the window: it asks
	mbcf_conn_kick(&a.conn, now);
	EXPECT_EQ(a.out.size(), 1u);		// nothing more meanwhile
	auto probe = a.out;
	a.out.clear();
	for (auto &f : queued)			// the first copies arrive
		deliver(b, f, now);
	for (auto &f : probe)			// then the probe: a duplicate
		deliver(b, f, now);
	EXPECT_EQ(b.conn.ctr.drop_duplicate, 1u);
	auto last = b.out.back();		// the duplicate's: ACK 116
	b.out.clear();				// (the earlier ACKs lost)
	deliver(a, last, now);
	EXPECT_EQ(a.conn.snd_una, 116u);
	EXPECT_EQ(a.conn.wnd, 8u);
	ASSERT_EQ(a.out.size(), 4u);		// 116..119: the rest, at once
	EXPECT_EQ(frame(a, 0).psn, 116u);
	EXPECT_EQ(a.conn.ctr.retransmits, 1u);	// the probe alone
	settle(a, b, now);
	expect_all_done(20);
}

// The acknowledgement interval follows the window now in use: after a cut
// to 8, a burst asks every 4 frames and when the window fills.
TEST_F(Window, AckRequestsFollowTheCurrentWindow)
{
	defer = true;
	post_writes(16);
	mbcf_conn_kick(&a.conn, now);
	a.out.clear();
	fire(a);				// wnd 8, resend 100 alone
	ASSERT_EQ(a.conn.wnd, 8u);
	ASSERT_EQ(a.out.size(), 1u);
	pump(a, b, now);
	pump(b, a, now);			// its ACK: 101..108
	ASSERT_EQ(a.out.size(), 8u);
	EXPECT_EQ(frame(a, 0).psn, 101u);
	int asks = 0;
	for (size_t i = 0; i < 8; i++)
		asks += !!(frame(a, i).flags & MBCF_F_ACKREQ);
	EXPECT_TRUE(frame(a, 7).flags & MBCF_F_ACKREQ);	// fills the window
	EXPECT_EQ(asks, 2);
	settle(a, b, now);
	expect_all_done(16);
}

// Regrowth stops at the configured window: 8 -> 16 needs 2+2+2+2 (8..11)
// + 3+3+3+3 (12..15) = 20 frames acknowledged after the episode; 200
// more leave it at 16.
TEST_F(Window, RegrowsToTheConfiguredWindowAndNoFurther)
{
	defer = true;
	post_writes(16);
	mbcf_conn_kick(&a.conn, now);
	a.out.clear();
	fire(a);
	settle(a, b, now);
	ASSERT_EQ(a.conn.wnd, 8u);
	EXPECT_EQ(a.conn.wnd_acked, 0u);	// all 16 were the episode's
	for (int k = 0; k < 5; k++) {
		post_writes(40);
		mbcf_conn_kick(&a.conn, now);
		settle(a, b, now);
	}
	expect_all_done(216);
	EXPECT_EQ(a.conn.wnd, 16u);
	EXPECT_EQ(a.conn.ctr.window_cuts, 1u);
}

// RNR (STOP) is the receiver's state, not loss: the window stays.
TEST_F(Window, ReceiverNotReadyIsNotALoss)
{
	post(a, MBCF_OP_SEND, 100);
	settle(a, b, now);			// no receive posted: STOP
	EXPECT_EQ(a.conn.ctr.stop_rx, 1u);
	EXPECT_EQ(a.conn.wnd, 16u);
	EXPECT_EQ(a.conn.ctr.window_cuts, 0u);
}

// window_fixed (the module's window_adapt=N, for comparisons): no cut.
TEST_F(Window, FixedWindowNeverAdapts)
{
	mbcf_conn_cfg ca = default_cfg(0x11, 0x22, 100, 200);
	ca.window_fixed = true;
	setup(ca, default_cfg(0x22, 0x11, 200, 100));
	defer = true;
	post_writes(20);
	mbcf_conn_kick(&a.conn, now);
	deliver_but(a, b, {0});
	pump(b, a, now);			// LOST(100)
	EXPECT_EQ(a.out.size(), 16u);		// the whole window again
	a.out.clear();
	fire(a);				// and a timeout
	EXPECT_EQ(a.out.size(), 16u);
	EXPECT_EQ(a.conn.wnd, 16u);
	EXPECT_EQ(a.conn.ctr.window_cuts, 0u);
	settle(a, b, now);
	expect_all_done(20);
}

}  // namespace
