// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
// The module arms the connection's timer lazily (kmod/proto.c): a timer
// queued to expire no later than the core asks is kept, and one no longer
// needed is never cancelled, so the core sees expiries that come early or
// for nothing.  It must take them as spurious: nothing resent, no retry
// used, and every deadline it needs still met.
#include <gtest/gtest.h>

#include "harness.h"
#include "pair.h"

using namespace mbcft;

namespace {

class LazyTimer : public Pair {
protected:
	int fires = 0;

	// The tick: a queued timer whose time has come expires.
	void tick()
	{
		for (Env *e : {&a, &b}) {
			if (e->timer_at && e->timer_at <= now) {
				fires++;
				fire(*e);
			}
		}
		settle(a, b, now);
	}
};

// A ping-pong of signaled writes, 20 us each way, a tick every 200 us: the
// deadlines the messages ask for all lie after the timer already queued,
// which expires (for nothing) and is armed again once per tick.
TEST_F(LazyTimer, APingPongSeesOnlySpuriousExpiries)
{
	a.lazy_timer = b.lazy_timer = true;
	const int n = 200;
	for (int i = 0; i < n; i++) {
		post(a, MBCF_OP_WRITE, 8);
		now += 20000;
		pump(a, b, now);
		post(b, MBCF_OP_WRITE, 8);
		now += 20000;
		pump(b, a, now);
		if (i % 5 == 4)
			tick();
	}
	for (int i = 0; i < 10; i++) {	// quiet: the owed ACKs go, all settles
		now += 50000;
		tick();
	}
	for (Env *e : {&a, &b}) {
		ASSERT_EQ(e->cqes.size(), (size_t)n);
		for (const mbcf_cqe &c : e->cqes)
			ASSERT_EQ(c.status, MBCF_WC_SUCCESS);
		EXPECT_EQ(e->target_writes, n);
		EXPECT_EQ(e->conn.ctr.timeouts, 0u);
		EXPECT_EQ(e->conn.ctr.tail_probes, 0u);
		EXPECT_EQ(e->conn.ctr.retransmits, 0u);
		EXPECT_EQ(e->conn.retry_left, e->conn.cfg.retry_cnt);
		EXPECT_EQ(e->conn.timer_at, 0u);	// nothing is owed now
		// the core asked twice or more per message; the timer was
		// started at most twice per tick (once when it expired, once
		// for an earlier deadline: the late ACK's, 6.2)
		EXPECT_GE(e->timer_calls, 2 * n);
		EXPECT_LE(e->timer_starts, 2 * (n / 5) + 12);
	}
	EXPECT_GT(fires, 0);
}

// A write is lost while the timer is still queued for an earlier message's
// deadline: that expiry is early for the lost one and changes nothing; the
// core asks again, and the tail probe comes exactly when it is due.
TEST_F(LazyTimer, ALostFrameIsProbedWhenDueAfterAnEarlyExpiry)
{
	measure_rtt();				// srtt 0.5 ms: probes 1 ms on
	a.lazy_timer = b.lazy_timer = true;
	const uint64_t t0 = now;
	post(a, MBCF_OP_WRITE, 8);
	pump(a, b, now);
	settle(a, b, now);			// acknowledged: nothing owed
	ASSERT_EQ(a.cqes.size(), 1u);
	const uint64_t first = a.timer_at;	// still queued, not cancelled
	ASSERT_GT(first, t0);
	EXPECT_EQ(a.conn.timer_at, 0u);
	now += kMs / 4;
	const uint64_t t1 = now;
	post(a, MBCF_OP_WRITE, 8);
	a.out.clear();				// lost
	const uint64_t due = a.conn.timer_at;	// what the core needs
	ASSERT_GT(due, first);
	EXPECT_EQ(a.timer_at, first);		// kept: it expires earlier
	fire(a);				// early: changes nothing
	EXPECT_EQ(now, first);
	EXPECT_TRUE(a.out.empty());
	EXPECT_EQ(a.conn.ctr.tail_probes + a.conn.ctr.timeouts, 0u);
	EXPECT_EQ(a.timer_at, due);		// asked again
	fire(a);
	EXPECT_EQ(now, due);
	EXPECT_GT(due, t1);
	EXPECT_EQ(a.conn.ctr.tail_probes + a.conn.ctr.timeouts, 1u);
	ASSERT_EQ(a.out.size(), 1u);		// resent
	settle(a, b, now);
	ASSERT_EQ(a.cqes.size(), 2u);
	EXPECT_EQ(a.cqes[1].status, MBCF_WC_SUCCESS);
	EXPECT_EQ(b.target_writes, 3);		// one of measure_rtt's
	EXPECT_EQ(a.conn.retry_left, a.conn.cfg.retry_cnt);
}

}  // namespace
