// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
// Local requests (memory window bind, invalidate), SEND_INV, and the
// unreliable connection (verbs UC): exact frames, order and completions.
#include <gtest/gtest.h>

#include "harness.h"
#include "pair.h"

using namespace mbcft;

namespace {

class Ops : public Pair {
protected:
	uint64_t local(Env &e, uint8_t flags = 0, uint8_t status = MBCF_WC_SUCCESS)
	{
		mbcf_wr w = make_wr(next_cookie++, MBCF_OP_LOCAL, 0, 0, 0);

		w.flags = flags;
		if (status != MBCF_WC_SUCCESS)
			e.local_status[w.cookie] = status;
		if (defer)
			EXPECT_EQ(mbcf_conn_enqueue(&e.conn, &w), 0);
		else
			EXPECT_EQ(mbcf_conn_post(&e.conn, &w, now), 0);
		return w.cookie;
	}

	uint64_t send_inv(Env &e, uint32_t len, uint32_t rkey)
	{
		mbcf_wr w = make_wr(next_cookie++, MBCF_OP_SEND_INV, len, 0, 0);

		w.imm = rkey;
		e.local[w.cookie] = std::vector<uint8_t>(len, 0x3c);
		EXPECT_EQ(mbcf_conn_post(&e.conn, &w, now), 0);
		return w.cookie;
	}

	std::vector<uint64_t> cookies(const std::vector<mbcf_cqe> &v)
	{
		std::vector<uint64_t> r;

		for (auto &c : v)
			r.push_back(c.cookie);
		return r;
	}
};

// A local request runs when every earlier one has started, takes no psn,
// and completes in posting order between its neighbours.
TEST_F(Ops, LocalRequestRunsInOrderAndCompletesBetween)
{
	defer = true;
	uint64_t w1 = post(a, MBCF_OP_WRITE, 3000);	// 3 frames
	uint64_t l = local(a);
	uint64_t w2 = post(a, MBCF_OP_WRITE, 10);
	mbcf_conn_kick(&a.conn, now);
	ASSERT_EQ(a.locals_run, std::vector<uint64_t>{l});
	ASSERT_EQ(a.out.size(), 4u);
	EXPECT_EQ(frame(a, 3).psn, 103u);	// w2 right after w1: no psn for l
	settle(a, b, now);
	EXPECT_EQ(cookies(a.cqes), (std::vector<uint64_t>{w1, l, w2}));
	EXPECT_EQ(a.cqes[1].op, MBCF_OP_LOCAL);
	EXPECT_EQ(a.cqes[1].status, MBCF_WC_SUCCESS);
	EXPECT_EQ(rx_unaccounted(b), 0);
}

// FENCE_ALL (local invalidate): not before every earlier request completed,
// and everything posted after it waits too.
TEST_F(Ops, FenceAllWaitsForEarlierCompletions)
{
	defer = true;
	uint64_t r = post(a, MBCF_OP_READ_REQ, 100);
	uint64_t l = local(a, MBCF_WR_FENCE_ALL);
	uint64_t w = post(a, MBCF_OP_WRITE, 10);
	mbcf_conn_kick(&a.conn, now);
	ASSERT_EQ(a.out.size(), 1u);		// the read only
	EXPECT_TRUE(a.locals_run.empty());
	EXPECT_TRUE(frame(a, 0).flags & MBCF_F_ACKREQ);	// the burst ends there
	pump(a, b, now);			// READ_REQ
	pump(b, a, now);			// READ_RESP: the read completes
	EXPECT_EQ(a.locals_run, std::vector<uint64_t>{l});
	settle(a, b, now);
	EXPECT_EQ(cookies(a.cqes), (std::vector<uint64_t>{r, l, w}));
}

// A chain of local invalidates (NFS/RDMA's xprtrdma posts one per MR of a
// reply): each waits for the one before it to complete, which it does at
// once, so one kick carries out the whole chain and what follows it, with
// nothing else arriving to push the queue on.
TEST_F(Ops, ChainedFenceAllLocalsRunInOneKick)
{
	defer = true;
	uint64_t w1 = post(a, MBCF_OP_WRITE, 10);
	mbcf_conn_kick(&a.conn, now);
	settle(a, b, now);			// w1 acknowledged and completed
	ASSERT_EQ(cookies(a.cqes), std::vector<uint64_t>{w1});
	uint64_t l1 = local(a, MBCF_WR_FENCE_ALL);
	uint64_t l2 = local(a, MBCF_WR_FENCE_ALL);
	uint64_t l3 = local(a, MBCF_WR_FENCE_ALL);
	uint64_t w2 = post(a, MBCF_OP_WRITE, 10);
	size_t sent = a.out.size();
	mbcf_conn_kick(&a.conn, now);
	EXPECT_EQ(a.locals_run, (std::vector<uint64_t>{l1, l2, l3}));
	EXPECT_EQ(cookies(a.cqes), (std::vector<uint64_t>{w1, l1, l2, l3}));
	EXPECT_EQ(a.out.size(), sent + 1);	// w2 left in the same kick
	settle(a, b, now);
	EXPECT_EQ(cookies(a.cqes), (std::vector<uint64_t>{w1, l1, l2, l3, w2}));
	for (auto &c : a.cqes)
		EXPECT_EQ(c.status, MBCF_WC_SUCCESS);
}

// The same chain behind a request still in flight: the first runs when
// that request completes, and the others right after it.
TEST_F(Ops, ChainedFenceAllLocalsBehindARead)
{
	defer = true;
	uint64_t r = post(a, MBCF_OP_READ_REQ, 100);
	uint64_t l1 = local(a, MBCF_WR_FENCE_ALL);
	uint64_t l2 = local(a, MBCF_WR_FENCE_ALL);
	mbcf_conn_kick(&a.conn, now);
	EXPECT_TRUE(a.locals_run.empty());
	pump(a, b, now);			// READ_REQ
	pump(b, a, now);			// READ_RESP: the read completes
	EXPECT_EQ(a.locals_run, (std::vector<uint64_t>{l1, l2}));
	EXPECT_EQ(cookies(a.cqes), (std::vector<uint64_t>{r, l1, l2}));
}

// A failed local request completes with its status, the rest is flushed,
// and no later request starts.
TEST_F(Ops, FailedLocalRequestFlushesTheRest)
{
	defer = true;
	uint64_t w1 = post(a, MBCF_OP_WRITE, 10);
	uint64_t l = local(a, 0, MBCF_WC_MW_BIND_ERR);
	uint64_t w2 = post(a, MBCF_OP_WRITE, 10);
	mbcf_conn_kick(&a.conn, now);
	settle(a, b, now);
	ASSERT_EQ(cookies(a.cqes), (std::vector<uint64_t>{w1, l, w2}));
	EXPECT_EQ(a.cqes[0].status, MBCF_WC_SUCCESS);
	EXPECT_EQ(a.cqes[1].status, MBCF_WC_MW_BIND_ERR);
	EXPECT_EQ(a.cqes[2].status, MBCF_WC_WR_FLUSH_ERR);
	EXPECT_EQ(a.conn.state, MBCF_CONN_ERROR);
	EXPECT_EQ(b.target_writes, 1);		// w2 never left
}

// SEND_INV: the responder invalidates the key when the message completes
// and reports it in the receive completion.
TEST_F(Ops, SendWithInvalidate)
{
	b.recvs.push_back({7, 4000});
	b.inv_keys = {0x1234507};
	uint64_t c = send_inv(a, 3000, 0x1234507);
	ASSERT_EQ(a.out.size(), 3u);
	for (size_t i = 0; i < 3; i++) {
		EXPECT_EQ(frame(a, i).op, MBCF_OP_SEND_INV);
		EXPECT_EQ(frame(a, i).rkey, 0x1234507u);
	}
	settle(a, b, now);
	EXPECT_EQ(b.invalidated, std::vector<uint32_t>{0x1234507});
	ASSERT_EQ(b.rcqes.size(), 1u);
	EXPECT_EQ(b.rcqes[0].status, MBCF_WC_SUCCESS);
	EXPECT_EQ(b.rcqes[0].flags & (MBCF_CQE_INV | MBCF_CQE_IMM), MBCF_CQE_INV);
	EXPECT_EQ(b.rcqes[0].imm, 0x1234507u);
	EXPECT_EQ(b.rcqes[0].byte_len, 3000u);
	EXPECT_EQ(b.recv_buf[7], std::vector<uint8_t>(3000, 0x3c));
	ASSERT_EQ(a.cqes.size(), 1u);
	EXPECT_EQ(a.cqes[0].cookie, c);
	EXPECT_EQ(a.cqes[0].status, MBCF_WC_SUCCESS);
}

// A key the responder may not invalidate: its receive completes with
// REM_INV_REQ_ERR, the sender gets REM_INV_REQ_ERR, both QPs fail.
TEST_F(Ops, SendWithInvalidateOfAForeignKey)
{
	b.recvs.push_back({7, 100});
	send_inv(a, 10, 0x999);
	settle(a, b, now);
	EXPECT_TRUE(b.invalidated.empty());
	ASSERT_EQ(b.rcqes.size(), 1u);
	EXPECT_EQ(b.rcqes[0].status, MBCF_WC_REM_INV_REQ_ERR);
	ASSERT_EQ(a.cqes.size(), 1u);
	EXPECT_EQ(a.cqes[0].status, MBCF_WC_REM_INV_REQ_ERR);
	EXPECT_EQ(a.conn.state, MBCF_CONN_ERROR);
	EXPECT_EQ(b.conn.state, MBCF_CONN_ERROR);
}

class Uc : public Ops {
protected:
	void SetUp() override
	{
		mbcf_conn_cfg ca = default_cfg(0x11, 0x22, 100, 200);
		mbcf_conn_cfg cb = default_cfg(0x22, 0x11, 200, 100);

		ca.uc = cb.uc = true;
		setup(ca, cb);
	}
};

// Writes and sends complete when their last frame is sent; the receiver
// answers nothing, and no timer runs.
TEST_F(Uc, CompletesWhenSentAndNothingComesBack)
{
	b.recvs.push_back({7, 4000});
	uint64_t w = post(a, MBCF_OP_WRITE, 3000, kBase + 8);
	uint64_t s = post(a, MBCF_OP_SEND_IMM, 100);
	ASSERT_EQ(cookies(a.cqes), (std::vector<uint64_t>{w, s}));
	for (size_t i = 0; i < a.out.size(); i++)
		EXPECT_FALSE(frame(a, i).flags & MBCF_F_ACKREQ);
	EXPECT_EQ(a.timer_at, 0u);
	pump(a, b, now);
	EXPECT_TRUE(b.out.empty());
	EXPECT_EQ(b.conn.ctr.rx_accepted, 4u);
	ASSERT_EQ(b.rcqes.size(), 1u);
	EXPECT_EQ(b.rcqes[0].imm, 0x1234u);
	EXPECT_EQ(std::vector<uint8_t>(b.target(kRkey, kBase + 8),
				       b.target(kRkey, kBase + 8) + 3000),
		  std::vector<uint8_t>(3000, 0xab));
	EXPECT_EQ(rx_unaccounted(b), 0);
}

// A lost frame loses its message -- the receive it claimed serves the next
// one -- and the messages after it arrive intact.
TEST_F(Uc, LostFrameLosesItsMessageOnly)
{
	b.recvs.push_back({7, 4000});
	post(a, MBCF_OP_SEND, 3000, 0, 0, 0x11);	// frames 0..2
	post(a, MBCF_OP_SEND, 2000, 0, 0, 0x22);	// frames 3..4
	ASSERT_EQ(a.out.size(), 5u);
	a.out.erase(a.out.begin() + 1);			// the first send's middle
	pump(a, b, now);
	ASSERT_EQ(b.rcqes.size(), 1u);
	EXPECT_EQ(b.rcqes[0].cookie, 7u);
	EXPECT_EQ(b.rcqes[0].byte_len, 2000u);
	EXPECT_EQ(std::vector<uint8_t>(b.recv_buf[7].begin(),
				       b.recv_buf[7].begin() + 2000),
		  std::vector<uint8_t>(2000, 0x22));
	EXPECT_EQ(b.conn.ctr.drop_out_of_seq, 1u);	// the lost message's tail
	EXPECT_EQ(b.conn.state, MBCF_CONN_RTS);
	EXPECT_EQ(rx_unaccounted(b), 0);
}

// No receive posted, a bad key, a message too long: dropped whole and
// silently; the connection goes on.
TEST_F(Uc, UnacceptableMessagesAreDroppedSilently)
{
	post(a, MBCF_OP_SEND, 3000);			// no receive: dropped
	post(a, MBCF_OP_WRITE, 3000, kBase, 0x5555);	// bad key: dropped
	pump(a, b, now);
	b.recvs.push_back({8, 100});
	post(a, MBCF_OP_SEND, 200);			// too long: dropped
	post(a, MBCF_OP_SEND, 50, 0, 0, 0x44);		// fits: the same receive
	pump(a, b, now);
	EXPECT_TRUE(b.out.empty());
	EXPECT_EQ(b.conn.state, MBCF_CONN_RTS);
	EXPECT_EQ(b.target_writes, 0);
	ASSERT_EQ(b.rcqes.size(), 1u);
	EXPECT_EQ(b.rcqes[0].cookie, 8u);
	EXPECT_EQ(b.rcqes[0].status, MBCF_WC_SUCCESS);
	EXPECT_EQ(b.rcqes[0].byte_len, 50u);
	EXPECT_EQ(b.conn.ctr.drop_stopped, 1u);
	EXPECT_EQ(b.conn.ctr.remote_errors, 2u);	// bad key, too long
	EXPECT_EQ(a.cqes.size(), 4u);
	for (auto &c : a.cqes)
		EXPECT_EQ(c.status, MBCF_WC_SUCCESS);	// UC: the sender never knows
	EXPECT_EQ(rx_unaccounted(b), 0);
}

// A SEND FIRST|LAST frame from a's QP to b's as a blind spoofer (or a's
// stream after a long outage) builds it: psn and ack_psn given.
static std::vector<uint8_t> uc_send(uint32_t psn, uint32_t ack, uint32_t len,
				    uint8_t fill)
{
	mbcf_frame f{};
	uint8_t hdr[MBCF_HDR_MAX];

	f.op = MBCF_OP_SEND;
	f.flags = MBCF_F_FIRST | MBCF_F_LAST;
	f.dst_qpn = 0x22;
	f.src_qpn = 0x11;
	f.psn = psn & MBCF_PSN_MASK;
	f.ack_psn = ack & MBCF_PSN_MASK;
	f.paylen = len;
	uint32_t hl = mbcf_codec_build(&f, hdr);
	std::vector<uint8_t> fr(hdr, hdr + hl);
	fr.resize(hl + len, fill);
	return fr;
}

// UC once took any psn in the 2^23 after rcv_nxt.  Now a frame
// at most MBCF_UC_REACH - 1 after it is taken (frames lost in between); one
// further ahead only if its ack_psn is b's own stream as it stands (b's
// snd_max is 200, nothing sent).  A spoofed SEND beyond the reach with a
// guessed ack takes no receive and moves nothing; a's stream after losing
// more than the reach in a row (its ack_psn 200) resynchronises.
TEST_F(Uc, AFrameBeyondTheReachMustAcknowledgeOurStream)
{
	mbcf_conn_cfg cb = default_cfg(0x22, 0x11, 200, 100);
	cb.uc = true;
	ASSERT_EQ(mbcf_conn_set_send(&b.conn, &cb), 0);	// as at RTS
	b.recvs.push_back({7, 4000});
	ASSERT_EQ(b.conn.rcv_nxt, 100u);
	const uint32_t far = 100 + MBCF_UC_REACH;
	// not in 200 - 65536 .. 200: ahead of b's stream, or further behind
	for (uint32_t ack : {201u, 5000u, 200u + (1u << 23), 0x400000u,
			     (200u - MBCF_UC_REACH - 1) & MBCF_PSN_MASK}) {
		deliver(b, uc_send(far, ack, 10, 0xee), now);
		deliver(b, uc_send(100 + (1u << 23) - 1, ack, 10, 0xee), now);
	}
	EXPECT_EQ(b.conn.rcv_nxt, 100u);
	EXPECT_EQ(b.conn.ctr.drop_out_of_seq, 10u);
	EXPECT_TRUE(b.rcqes.empty());
	ASSERT_EQ(b.recvs.size(), 1u);
	// within the reach: taken, whatever came before
	deliver(b, uc_send(far - 1, 0, 10, 0x11), now);
	EXPECT_EQ(b.conn.rcv_nxt, (uint32_t)(far & MBCF_PSN_MASK));
	ASSERT_EQ(b.rcqes.size(), 1u);
	EXPECT_EQ(b.rcqes[0].byte_len, 10u);
	// beyond it, acknowledging b's stream: resynchronised
	b.recvs.push_back({8, 4000});
	deliver(b, uc_send(far + MBCF_UC_REACH + 5, 200, 20, 0x22), now);
	EXPECT_EQ(b.conn.rcv_nxt, (far + MBCF_UC_REACH + 6) & MBCF_PSN_MASK);
	ASSERT_EQ(b.rcqes.size(), 2u);
	EXPECT_EQ(b.rcqes[1].cookie, 8u);
	EXPECT_EQ(std::vector<uint8_t>(b.recv_buf[8].begin(), b.recv_buf[8].end()),
		  std::vector<uint8_t>(20, 0x22));
	EXPECT_EQ(b.conn.ctr.rx_accepted, 2u);
	EXPECT_EQ(rx_unaccounted(b), 0);
}

// Reads and atomics need a response: not on UC.
TEST_F(Uc, NoReadsOrAtomics)
{
	for (uint8_t op : {MBCF_OP_READ_REQ, MBCF_OP_CMP_SWAP, MBCF_OP_FETCH_ADD}) {
		mbcf_wr w = make_wr(next_cookie++, op, 8, kBase, kRkey);
		EXPECT_EQ(mbcf_conn_post(&a.conn, &w, now), MBCF_POST_INVAL) << (int)op;
	}
}

// Random loss on a UC stream: every message arrives whole or not at all,
// in order, and the receives complete exactly for the whole ones.
TEST_F(Uc, RandomLossKeepsMessagesWhole)
{
	uint64_t seed = 0x0c5eed;
	std::vector<uint8_t> delivered;		// fill byte of each whole message

	SCOPED_TRACE("seed " + std::to_string(seed));
	for (int i = 0; i < 400; i++)
		b.recvs.push_back({1000u + i, 8000});
	for (int m = 0; m < 300; m++) {
		uint32_t len = 1 + (uint32_t)((seed = seed * 6364136223846793005ull + 1) >> 33) % 6000;
		uint8_t fill = (uint8_t)(m + 1);
		bool lost = false;

		post(a, MBCF_OP_SEND, len, 0, 0, fill);
		while (!a.out.empty()) {
			auto fr = a.out.front();
			a.out.pop_front();
			seed = seed * 6364136223846793005ull + 1;
			if ((seed >> 40) % 10 == 0) {	// 10 % loss
				lost = true;
				continue;
			}
			deliver(b, fr, now);
		}
		if (!lost)
			delivered.push_back(fill);
	}
	ASSERT_EQ(b.rcqes.size(), delivered.size());
	for (size_t i = 0; i < delivered.size(); i++) {
		const auto &buf = b.recv_buf[b.rcqes[i].cookie];
		EXPECT_EQ(b.rcqes[i].status, MBCF_WC_SUCCESS);
		ASSERT_GE(buf.size(), b.rcqes[i].byte_len);
		EXPECT_EQ(std::vector<uint8_t>(buf.begin(), buf.begin() + b.rcqes[i].byte_len),
			  std::vector<uint8_t>(b.rcqes[i].byte_len, delivered[i])) << i;
	}
	EXPECT_EQ(b.conn.state, MBCF_CONN_RTS);
	EXPECT_EQ(rx_unaccounted(b), 0);
}

}  // namespace
