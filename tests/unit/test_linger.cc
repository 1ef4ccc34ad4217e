// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
// A destroyed connection's last words (docs/protocol.md 8.4): the ACK that
// was lost, given again to its peer's resend -- and to nothing else.
#include <gtest/gtest.h>

#include "harness.h"
#include "pair.h"

using namespace mbcft;

namespace {

const uint8_t kPeer[6] = { 2, 0, 0, 0, 0, 0x11 };
const uint8_t kOther[6] = { 2, 0, 0, 0, 0, 0x99 };
const uint64_t kOwner = 0x1000;

class Linger : public Pair {
protected:
	mbcf_linger l{};
	uint8_t hdr[MBCF_HDR_MAX];
	uint64_t added = 0;	// when b was remembered

	// a writes twice to b; b's ACK of the second is lost; b "is destroyed"
	// and remembered.  Returns a's resend of the last frame (ACKREQ).
	std::vector<uint8_t> last_ack_lost()
	{
		post(a, MBCF_OP_WRITE, 10);
		settle(a, b, now);
		post(a, MBCF_OP_WRITE, 10);		// psn 101
		pump(a, b, now);
		b.out.clear();				// its ACK, lost
		mbcf_linger_add(&l, &b.conn, kPeer, kOwner, now);
		added = now;
		fire(a);				// a resends 101
		EXPECT_EQ(a.out.size(), 1u);
		auto resend = a.out.front();
		a.out.clear();
		return resend;
	}

	uint32_t answer(const std::vector<uint8_t> &b_, const uint8_t *peer)
	{
		mbcf_frame f;

		EXPECT_TRUE(parse(b_, &f));
		return mbcf_linger_answer(&l, &f, peer, now, hdr);
	}
};

TEST_F(Linger, TheLostAckIsGivenAgain)
{
	auto resend = last_ack_lost();
	uint32_t n = answer(resend, kPeer);
	ASSERT_EQ(n, (uint32_t)MBCF_HDR_LEN);
	mbcf_frame ack;
	ASSERT_EQ(mbcf_codec_parse(hdr, n, &ack, nullptr), MBCF_PARSE_OK);
	EXPECT_EQ(ack.op, MBCF_OP_ACK);
	EXPECT_EQ(ack.status, 0);
	EXPECT_EQ(ack.dst_qpn, 0x11u);
	EXPECT_EQ(ack.src_qpn, 0x22u);
	EXPECT_EQ(ack.ack_psn, 102u);
	// the peer takes it: its write completes, nothing is left
	deliver(a, std::vector<uint8_t>(hdr, hdr + n), now);
	ASSERT_EQ(a.cqes.size(), 2u);
	EXPECT_EQ(a.cqes[1].status, MBCF_WC_SUCCESS);
	EXPECT_EQ(mbcf_conn_outstanding(&a.conn), 0u);
}

TEST_F(Linger, NothingButThePeersResendIsAnswered)
{
	auto resend = last_ack_lost();
	mbcf_frame f;
	ASSERT_TRUE(parse(resend, &f));

	EXPECT_EQ(answer(resend, kOther), 0u);		// another MAC
	mbcf_frame g = f;
	g.src_qpn = 0x33;				// another QP
	EXPECT_EQ(mbcf_linger_answer(&l, &g, kPeer, now, hdr), 0u);
	g = f;
	g.dst_qpn = 0x23;				// not the one destroyed
	EXPECT_EQ(mbcf_linger_answer(&l, &g, kPeer, now, hdr), 0u);
	g = f;
	g.flags &= (uint8_t)~MBCF_F_ACKREQ;		// not asking
	EXPECT_EQ(mbcf_linger_answer(&l, &g, kPeer, now, hdr), 0u);
	g = f;
	g.psn = 102;					// never accepted: no ACK for it
	EXPECT_EQ(mbcf_linger_answer(&l, &g, kPeer, now, hdr), 0u);
	g = f;
	g.op = MBCF_OP_ACK;				// control frames: never
	g.flags = MBCF_F_ACKREQ;
	EXPECT_EQ(mbcf_linger_answer(&l, &g, kPeer, now, hdr), 0u);
	EXPECT_EQ(mbcf_linger_answer(&l, &f, kPeer, now, hdr), (uint32_t)MBCF_HDR_LEN);
}

TEST_F(Linger, ItEndsAfterTwoSecondsOrWhenTheNumberIsReused)
{
	auto resend = last_ack_lost();
	now = added + MBCF_LINGER_NS - 1;
	EXPECT_EQ(answer(resend, kPeer), (uint32_t)MBCF_HDR_LEN);
	now += 1;
	EXPECT_EQ(answer(resend, kPeer), 0u);
	EXPECT_EQ(answer(resend, kPeer), 0u);		// and stays gone

	Linger::SetUp();
	l = {};
	resend = last_ack_lost();
	mbcf_linger_forget(&l, 0x22);
	EXPECT_EQ(answer(resend, kPeer), 0u);
}

// Only a connection that could have accepted frames leaves an entry; the
// oldest of MBCF_LINGER_N makes room for a new one.
TEST_F(Linger, ConnectedQpsOnlyAndTheOldestMakesRoom)
{
	mbcf_conn_flush(&b.conn);			// verbs: modify to ERR
	mbcf_linger_add(&l, &b.conn, kPeer, kOwner, now);
	for (auto &e : l.e)
		EXPECT_EQ(e.until, 0u);

	Env c;
	mbcf_conn_cfg cfg = default_cfg(0, 0x11);
	for (uint32_t q = 1; q <= MBCF_LINGER_N + 1; q++) {
		cfg.local_qpn = q;
		ASSERT_EQ(c.init(cfg), 0);
		mbcf_linger_add(&l, &c.conn, kPeer, kOwner, now);
	}
	int live = 0;
	bool first = false, last = false;
	for (auto &e : l.e) {
		live += e.until != 0;
		first |= e.until && e.qpn == 1;
		last |= e.until && e.qpn == MBCF_LINGER_N + 1;
	}
	EXPECT_EQ(live, MBCF_LINGER_N);
	EXPECT_FALSE(first);
	EXPECT_TRUE(last);
}

// Fair sharing: one owner churning QPs takes the free entries, then
// replaces only its own oldest; another owner's entries all stay.  A light
// owner still gets an entry in a full table: the churner's oldest.
TEST_F(Linger, AChurningOwnerEvictsOnlyItsOwn)
{
	Env c;
	mbcf_conn_cfg cfg = default_cfg(0, 0x11);
	auto add = [&](uint32_t qpn, uint64_t owner) {
		cfg.local_qpn = qpn;
		ASSERT_EQ(c.init(cfg), 0);
		mbcf_linger_add(&l, &c.conn, kPeer, owner, now);
		now += 1000;
	};
	auto held = [&](uint64_t owner) {
		int n = 0;
		for (auto &e : l.e)
			n += e.until && e.owner == owner;
		return n;
	};

	for (uint32_t q = 1; q <= 8; q++)
		add(0x100 + q, 7);			// the victim's 8 entries
	for (uint32_t q = 1; q <= 10000; q++)
		add(0x10000 + q, 9);			// the churner
	EXPECT_EQ(held(7), 8);
	EXPECT_EQ(held(9), MBCF_LINGER_N - 8);
	for (auto &e : l.e) {				// its newest are kept
		if (e.owner == 9) {
			EXPECT_GT(e.qpn, 0x10000u + 10000 - (MBCF_LINGER_N - 8));
		}
	}

	add(0x200, 5);					// a third, light owner
	EXPECT_EQ(held(5), 1);
	EXPECT_EQ(held(7), 8);
	EXPECT_EQ(held(9), MBCF_LINGER_N - 9);		// the heaviest gave one

	now += MBCF_LINGER_NS;				// all expired: any slot
	add(0x300, 7);
	int live = 0;
	for (auto &e : l.e)
		live += e.until > now;
	EXPECT_EQ(live, 1);
}

}  // namespace
