// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
// The two-connection fixture the connection tests share: a and b connected
// to each other over a perfect link the test drives frame by frame.
#pragma once

#include <gtest/gtest.h>

#include "harness.h"

namespace mbcft {

constexpr uint32_t kRkey = 0x77;
constexpr uint64_t kBase = 0x10000;
constexpr uint64_t kMs = 1000000;

class Pair : public ::testing::Test {
protected:
	Env a, b;
	uint64_t now = 1000;
	uint64_t next_cookie = 1;

	void SetUp() override { setup(default_cfg(0x11, 0x22, 100, 200),
				      default_cfg(0x22, 0x11, 200, 100)); }

	void setup(mbcf_conn_cfg ca, mbcf_conn_cfg cb)
	{
		a = Env();
		b = Env();
		ASSERT_EQ(a.init(ca), 0);
		ASSERT_EQ(b.init(cb), 0);
		a.add_region(kRkey, kBase, 1 << 16, ACC_ALL);
		b.add_region(kRkey, kBase, 1 << 16, ACC_ALL);
		b.add_region(0x99, 0x90000, 4096, ACC_READ);
	}

	// Both ends configured with a window of w frames.
	void setup_window(uint32_t w)
	{
		mbcf_conn_cfg ca = default_cfg(0x11, 0x22, 100, 200);
		mbcf_conn_cfg cb = default_cfg(0x22, 0x11, 200, 100);

		ca.window = cb.window = w;
		setup(ca, cb);
	}

	bool defer = false;	// enqueue only; the test kicks
	uint8_t wr_flags = 0;	// mbcf_wr.flags of what post() posts

	uint64_t post(Env &e, uint8_t op, uint32_t len, uint64_t raddr = kBase,
		      uint32_t rkey = kRkey, uint8_t fill = 0xab)
	{
		mbcf_wr w = make_wr(next_cookie++, op, len, raddr, rkey);
		e.local[w.cookie] = std::vector<uint8_t>(op == MBCF_OP_CMP_SWAP ||
			op == MBCF_OP_FETCH_ADD ? 8 : len, fill);
		w.swap_add = 5;
		w.compare = 0;
		w.imm = 0x1234;
		w.flags = wr_flags;
		if (defer)
			EXPECT_EQ(mbcf_conn_enqueue(&e.conn, &w), 0);
		else
			EXPECT_EQ(mbcf_conn_post(&e.conn, &w, now), 0);
		return w.cookie;
	}

	// One write each way, a quarter ms each way, so that both ends have
	// measured a round trip (srtt 0.5 ms); then the completions and
	// counters are cleared.
	void measure_rtt()
	{
		for (Env *e : {&a, &b}) {
			Env &o = e == &a ? b : a;
			post(*e, MBCF_OP_WRITE, 8);
			now += kMs / 4;
			pump(*e, o, now);
			now += kMs / 4;
			pump(o, *e, now);
			EXPECT_EQ(e->conn.srtt, kMs / 2);
		}
		a.cqes.clear();
		b.cqes.clear();
		a.conn.ctr = mbcf_counters{};
		b.conn.ctr = mbcf_counters{};
	}

	// A receive of cap bytes posted at e.
	void post_recv(Env &e, uint32_t cap)
	{
		e.recvs.push_back({next_cookie++, cap});
		mbcf_conn_recv_posted(&e.conn, now);
	}

	mbcf_frame frame(Env &e, size_t i)
	{
		mbcf_frame f{};
		EXPECT_TRUE(parse(e.out.at(i), &f));
		return f;
	}

	void fire(Env &e)
	{
		ASSERT_NE(e.timer_at, 0u);
		now = e.timer_at;
		e.timer_at = 0;
		mbcf_conn_timeout(&e.conn, now);
	}

	// Neither application posts anything more: the ACKs owed for
	// responses taken unasked (docs/protocol.md 6.2) leave when their
	// timer fires, and are delivered.
	void idle_acks()
	{
		for (Env *e : {&a, &b}) {
			if (!e->conn.ack_lazy_at)
				continue;
			ASSERT_EQ(e->timer_at, e->conn.ack_lazy_at);
			fire(*e);
		}
		settle(a, b, now);
	}
};

}  // namespace mbcft
