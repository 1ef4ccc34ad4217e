// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
// Control frames against the sender's own state (docs/protocol.md 6.4):
// an ACK, NAK, LOST, STOP or GO whose ack_psn, psn,
// round, seen or map no honest peer could have sent is dropped whole
// (drop_bad_ack) and changes nothing; and the selective refill a LOST may
// start looks at no more than the span (MBCF_EARLY_SPAN - 1 psns), whatever
// the LOST says (counted in selective_refill_steps).
#include <gtest/gtest.h>

#include "harness.h"
#include "pair.h"

using namespace mbcft;

namespace {

class CtlState : public Pair {
protected:
	// a's send side settled, as a QP in RTS has it (a peer's first frame
	// would settle it otherwise)
	void SetUp() override
	{
		Pair::SetUp();
		settle_send();
	}

	void settle_send()
	{
		mbcf_conn_cfg ca = default_cfg(0x11, 0x22, 100, 200);
		ASSERT_EQ(mbcf_conn_set_send(&a.conn, &ca), 0);
	}

	// A control frame from b's QP to a's.
	std::vector<uint8_t> ctl(uint8_t op, uint32_t ack, uint32_t psn,
				 uint16_t epoch = 0, uint32_t seen = 0,
				 const uint8_t *placed = nullptr, uint8_t status = 0,
				 uint8_t flags = 0)
	{
		mbcf_frame f{};
		uint8_t hdr[MBCF_HDR_MAX];

		f.op = op;
		f.flags = flags;
		f.status = status;
		f.dst_qpn = 0x11;
		f.src_qpn = 0x22;
		f.ack_psn = ack & MBCF_PSN_MASK;
		f.psn = psn & MBCF_PSN_MASK;
		f.epoch = epoch;
		f.seen = seen & MBCF_PSN_MASK;
		f.placed = placed;
		uint32_t hl = mbcf_codec_build(&f, hdr);
		return std::vector<uint8_t>(hdr, hdr + hl);
	}

	// a's connection without its counters, for "nothing changed".
	static mbcf_conn state_of(const Env &e)
	{
		mbcf_conn c;

		memcpy(&c, &e.conn, sizeof(c));
		memset(&c.ctr, 0, sizeof(c.ctr));
		c.rx_ack_ours = c.rx_snd_settled = false;	/* per frame */
		return c;
	}

	// Deliver fr to a: dropped as drop_bad_ack, no other verdict, no
	// state change, nothing sent.
	void expect_dropped(const std::vector<uint8_t> &fr, const char *what)
	{
		mbcf_counters before = a.conn.ctr;
		mbcf_conn s = state_of(a);
		size_t out = a.out.size();

		ASSERT_EQ(deliver(a, fr, now), MBCF_PARSE_OK) << what;
		EXPECT_EQ(a.conn.ctr.drop_bad_ack, before.drop_bad_ack + 1) << what;
		EXPECT_EQ(a.conn.ctr.acks_rx, before.acks_rx) << what;
		EXPECT_EQ(a.conn.ctr.naks_rx, before.naks_rx) << what;
		EXPECT_EQ(a.conn.ctr.lost_rx, before.lost_rx) << what;
		EXPECT_EQ(a.conn.ctr.stop_rx, before.stop_rx) << what;
		EXPECT_EQ(a.conn.ctr.go_rx, before.go_rx) << what;
		mbcf_conn n = state_of(a);
		EXPECT_EQ(memcmp(&s, &n, sizeof(s)), 0) << what;
		EXPECT_EQ(a.out.size(), out) << what;
		EXPECT_EQ(rx_unaccounted(a), 0) << what;
	}

	// n frames of one WRITE message queued and sent at once.
	void send_frames(uint32_t n)
	{
		defer = true;
		post(a, MBCF_OP_WRITE, n * mbcf_codec_max_payload(1500, MBCF_OP_WRITE));
		mbcf_conn_kick(&a.conn, now);
		ASSERT_EQ(a.out.size(), n);
		a.out.clear();
	}
};

// a has sent 100..115 (snd_una 100, snd_max 116, round 0) and accepted
// nothing of b's (rcv_nxt 200, so b's snd_max is 200 .. 200 + 65536).
TEST_F(CtlState, EveryFieldOutOfStateIsDropped)
{
	defer = true;
	for (int i = 0; i < 16; i++)
		post(a, MBCF_OP_WRITE, 8);
	mbcf_conn_kick(&a.conn, now);
	ASSERT_EQ(a.out.size(), 16u);
	a.out.clear();
	ASSERT_EQ(a.conn.snd_una, 100u);
	ASSERT_EQ(a.conn.snd_max, 116u);
	ASSERT_EQ(a.conn.rcv_nxt, 200u);

	uint8_t map[MBCF_PLACED_LEN] = {};
	const uint32_t far = 100 - (1u << 23) + 1;

	// ack_psn: after snd_max (never sent), or further before snd_una
	// than any window (stale by more than a link could delay it)
	const uint32_t old_ack = 100 - MBCF_WINDOW_MAX - 1;
	expect_dropped(ctl(MBCF_OP_ACK, old_ack, 200), "ACK ack old");
	expect_dropped(ctl(MBCF_OP_ACK, 117, 200), "ACK ack 117");
	expect_dropped(ctl(MBCF_OP_ACK, old_ack, 200, 0, 0, nullptr, 0,
			   MBCF_F_ACKREQ), "ACK probe ack old");
	expect_dropped(ctl(MBCF_OP_ACK, 99, 200, 0, 0, nullptr, 1), "NAK ack 99");
	expect_dropped(ctl(MBCF_OP_STOP, old_ack, 200), "STOP ack old");
	expect_dropped(ctl(MBCF_OP_STOP, 117, 200), "STOP ack 117");
	expect_dropped(ctl(MBCF_OP_GO, 117, 200), "GO ack 117");
	expect_dropped(ctl(MBCF_OP_LOST, old_ack, 200, 0, 110, map),
		       "LOST ack old");
	// psn, the peer's snd_max: further from what we accepted than any
	// window, either way
	const uint32_t old_psn = 200 - MBCF_WINDOW_MAX - 1;
	expect_dropped(ctl(MBCF_OP_ACK, 100, old_psn), "ACK psn old");
	expect_dropped(ctl(MBCF_OP_ACK, 100, 200 + MBCF_WINDOW_MAX + 1),
		       "ACK psn 200 + 65537");
	expect_dropped(ctl(MBCF_OP_STOP, 100, old_psn), "STOP psn old");
	expect_dropped(ctl(MBCF_OP_GO, 100, 200 + (1u << 23)), "GO psn far");
	expect_dropped(ctl(MBCF_OP_LOST, 100, old_psn, 0, 110, map),
		       "LOST psn old");
	// LOST: seen not after the gap, not sent, or far behind
	expect_dropped(ctl(MBCF_OP_LOST, 100, 200, 0, 100, map), "LOST seen 100");
	expect_dropped(ctl(MBCF_OP_LOST, 100, 200, 0, 116, map), "LOST seen 116");
	expect_dropped(ctl(MBCF_OP_LOST, 100, 200, 0, far, map), "LOST seen far");
	// LOST: a round that has not begun
	expect_dropped(ctl(MBCF_OP_LOST, 100, 200, 1, 110, map), "LOST epoch 1");
	expect_dropped(ctl(MBCF_OP_LOST, 100, 200, 0x7fff, 110, map),
		       "LOST epoch 0x7fff");
	// LOST: a map that places the gap itself, or a psn never sent
	map[0] = 0x01;
	expect_dropped(ctl(MBCF_OP_LOST, 100, 200, 0, 110, map), "LOST map bit 0");
	map[0] = 0;
	map[2] = 0x01;			// bit 16: psn 116
	expect_dropped(ctl(MBCF_OP_LOST, 100, 200, 0, 110, map), "LOST map bit 16");
	map[2] = 0;
	EXPECT_EQ(a.conn.ctr.drop_bad_ack, 20u);
	EXPECT_EQ(a.conn.tx_epoch, 0u);

	// stale ones (overtaken on the link) are taken and act on nothing
	mbcf_conn s = state_of(a);
	deliver(a, ctl(MBCF_OP_STOP, 99, 200 - MBCF_WINDOW_MAX), now);
	deliver(a, ctl(MBCF_OP_LOST, 100 - MBCF_WINDOW_MAX, 200, 0, 110, map),
		now);
	mbcf_conn n = state_of(a);
	EXPECT_EQ(memcmp(&s, &n, sizeof(s)), 0);
	EXPECT_EQ(a.conn.ctr.stop_rx, 1u);
	EXPECT_EQ(a.conn.ctr.lost_rx, 1u);
	// the same frames with the fields in state are taken
	map[1] = 0x80;			// bit 15: psn 115
	deliver(a, ctl(MBCF_OP_ACK, 100, 200 + MBCF_WINDOW_MAX), now);
	EXPECT_EQ(a.conn.ctr.acks_rx, 1u);
	deliver(a, ctl(MBCF_OP_LOST, 100, 200, 0, 115, map), now);
	EXPECT_EQ(a.conn.ctr.lost_rx, 2u);
	EXPECT_EQ(a.conn.tx_epoch, 1u);		// went back
	EXPECT_EQ(a.conn.ctr.drop_bad_ack, 20u);
	EXPECT_EQ(rx_unaccounted(a), 0);
}

// Once, a LOST of the current round whose seen lies 2^23 - 1
// behind, then one of an earlier round (after that go-back) with the real
// seen, made the refill walk every psn in between -- 8388570 steps in
// softirq for one 64-byte frame.  The first is now dropped; the second is
// a plain LOST of the current round (nothing went back): no walk at all.
TEST_F(CtlState, AHostileLostMakesNoWalk)
{
	setup_window(64);
	settle_send();
	send_frames(40);				// 100..139
	uint8_t map[MBCF_PLACED_LEN] = {};
	const uint32_t behind = 139 - ((1u << 23) - 1);

	deliver(a, ctl(MBCF_OP_LOST, 100, 200, 0, behind, map), now);
	deliver(a, ctl(MBCF_OP_LOST, 100, 200, 0, 139, map), now);
	EXPECT_EQ(a.conn.ctr.sel_refill_steps, 0u);
	EXPECT_EQ(a.conn.ctr.selective_refills, 0u);
	EXPECT_EQ(a.conn.ctr.drop_bad_ack, 1u);
	EXPECT_EQ(a.conn.ctr.lost_rx, 1u);
	EXPECT_EQ(a.conn.tx_epoch, 1u);
	EXPECT_EQ(rx_unaccounted(a), 0);
}

// The walk is bounded by the span, not by how far the LOST's seen and the
// resends reach: a 600-frame write, a go-back after 101 (round 1), then a
// LOST of round 0 that saw 699 and shows every frame of the span placed.
// The refill looks at 102 .. 355 (d = 2 .. 255): 254 steps, and refills
// nothing.
TEST_F(CtlState, TheRefillWalkIsBoundedByTheSpan)
{
	setup_window(1024);
	settle_send();
	send_frames(600);				// 100..699
	uint8_t map[MBCF_PLACED_LEN];

	memset(map, 0, sizeof(map));
	deliver(a, ctl(MBCF_OP_LOST, 100, 200, 0, 101, map), now);
	ASSERT_EQ(a.conn.tx_epoch, 1u);
	ASSERT_TRUE(a.conn.sel_skip);
	a.out.clear();
	memset(map, 0xff, sizeof(map));
	map[0] = 0xfe;					// never the gap itself
	deliver(a, ctl(MBCF_OP_LOST, 100, 200, 0, 699, map), now);
	EXPECT_EQ(a.conn.ctr.lost_rx, 2u);
	EXPECT_EQ(a.conn.sel_seen, 699u);
	EXPECT_EQ(a.conn.ctr.sel_refill_steps, 254u);
	EXPECT_LE(a.conn.ctr.sel_refill_steps, (uint64_t)MBCF_EARLY_SPAN - 1);
	EXPECT_EQ(a.conn.ctr.selective_refills, 0u);
	EXPECT_EQ(a.conn.tx_epoch, 1u);
}

}  // namespace
