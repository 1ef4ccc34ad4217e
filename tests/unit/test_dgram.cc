// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
// Datagrams (verbs UD): exact frames, the GRH the receiver writes, Q_Key
// checks, and one verdict per frame.
#include <gtest/gtest.h>

#include "harness.h"

using namespace mbcft;

namespace {

constexpr uint32_t kQkey = 0x11112222;

class Dgram : public ::testing::Test {
protected:
	Env a, b;
	mbcf_dgram da{}, db{};
	mbcf_ud_dest to{};

	void SetUp() override
	{
		ASSERT_EQ(mbcf_dgram_init(&da, 0x101, kQkey, 1500, &kOps, &a), 0);
		ASSERT_EQ(mbcf_dgram_init(&db, 0x202, kQkey, 1500, &kOps, &b), 0);
		to.remote_qpn = 0x202;
		to.qkey = kQkey;
		to.vtf = 0x07u << 20 | 0xabcde;	// traffic class 7, flow label
		to.hop_limit = 1;
		for (int i = 0; i < 16; i++) {
			to.sgid[i] = (uint8_t)(0xa0 + i);
			to.dgid[i] = (uint8_t)(0xb0 + i);
		}
	}

	int send(uint64_t cookie, uint8_t op, uint32_t len, uint8_t fill = 0x5c)
	{
		mbcf_wr w = make_wr(cookie, op, len, 0, 0);

		w.imm = 0xfeedf00d;
		w.flags = MBCF_F_SOLICITED;
		a.local[cookie] = std::vector<uint8_t>(len, fill);
		return mbcf_dgram_send(&da, &w, &to);
	}

	// Deliver a's frames to b's datagram endpoint, as the module does.
	void pump()
	{
		while (!a.out.empty()) {
			auto fr = a.out.front();
			mbcf_frame f;

			a.out.pop_front();
			b.dev_ctr.rx_frames++;
			if (mbcf_codec_parse(fr.data(), (uint32_t)fr.size(), &f,
					     &b.dev_ctr) == MBCF_PARSE_OK)
				mbcf_dgram_rx(&db, &f);
		}
	}

	int64_t unaccounted()
	{
		b.conn.ctr = db.ctr;	// rx_unaccounted sums conn + dev
		return rx_unaccounted(b);
	}
};

// A datagram lands behind the GRH verbs expects, with the sender's QPN.
TEST_F(Dgram, DeliversBehindAGrh)
{
	b.recvs.push_back({9, 40 + 1000});
	EXPECT_EQ(send(1, MBCF_OP_SEND_IMM, 1000), MBCF_WC_SUCCESS);
	ASSERT_EQ(a.cqes.size(), 1u);		// complete when sent
	EXPECT_EQ(a.cqes[0].status, MBCF_WC_SUCCESS);
	ASSERT_EQ(a.out.size(), 1u);
	mbcf_frame f;
	ASSERT_TRUE(parse(a.out[0], &f));
	EXPECT_EQ(f.op, MBCF_OP_DGRAM);
	EXPECT_EQ(f.psn, 0u);
	EXPECT_EQ(f.hdr_len, 72u);
	EXPECT_EQ(f.rkey, kQkey);
	pump();
	ASSERT_EQ(b.rcqes.size(), 1u);
	const mbcf_cqe &c = b.rcqes[0];
	EXPECT_EQ(c.cookie, 9u);
	EXPECT_EQ(c.status, MBCF_WC_SUCCESS);
	EXPECT_EQ(c.byte_len, 1040u);
	EXPECT_EQ(c.src_qpn, 0x101u);
	EXPECT_EQ(c.imm, 0xfeedf00du);
	EXPECT_EQ(c.flags, MBCF_CQE_RECV | MBCF_CQE_GRH | MBCF_CQE_IMM | MBCF_CQE_SOLICITED);
	const auto &buf = b.recv_buf[9];
	ASSERT_EQ(buf.size(), 1040u);
	const uint8_t grh_head[8] = { 0x60, 0x7a, 0xbc, 0xde, 0x03, 0xe8, 0x1b, 1 };
	EXPECT_EQ(std::vector<uint8_t>(buf.begin(), buf.begin() + 8),
		  std::vector<uint8_t>(grh_head, grh_head + 8));
	EXPECT_EQ(std::vector<uint8_t>(buf.begin() + 8, buf.begin() + 24),
		  std::vector<uint8_t>(to.sgid, to.sgid + 16));
	EXPECT_EQ(std::vector<uint8_t>(buf.begin() + 24, buf.begin() + 40),
		  std::vector<uint8_t>(to.dgid, to.dgid + 16));
	EXPECT_EQ(std::vector<uint8_t>(buf.begin() + 40, buf.end()),
		  std::vector<uint8_t>(1000, 0x5c));
	EXPECT_EQ(db.ctr.rx_accepted, 1u);
	EXPECT_EQ(unaccounted(), 0);
}

// One frame per datagram, at most the port's MTU (the largest IB MTU a
// frame carries: 1024 at 1500, 2048 at 2200, 4096 at 9000): exactly that
// goes; one byte more completes SUCCESS, sends nothing and counts
// tx_oversize (IBA C10-93.1.1, as rxe); another opcode is a length error.
TEST_F(Dgram, AtMostThePortMtu)
{
	EXPECT_EQ(mbcf_dgram_max_payload(1500), 1500u - 72);
	EXPECT_EQ(mbcf_dgram_max_msg(1500), 1024u);
	EXPECT_EQ(mbcf_dgram_max_msg(1024 + 72), 1024u);
	EXPECT_EQ(mbcf_dgram_max_msg(1024 + 71), 512u);
	EXPECT_EQ(mbcf_dgram_max_msg(2200), 2048u);
	EXPECT_EQ(mbcf_dgram_max_msg(9000), 4096u);
	EXPECT_EQ(mbcf_dgram_max_msg(300), 228u);	// less room than 256

	EXPECT_EQ(send(1, MBCF_OP_SEND, 1025), MBCF_WC_SUCCESS);
	EXPECT_TRUE(a.out.empty());
	EXPECT_EQ(send(2, MBCF_OP_SEND, 1500 - 72), MBCF_WC_SUCCESS);
	EXPECT_TRUE(a.out.empty());
	EXPECT_EQ(da.ctr.tx_oversize, 2u);
	EXPECT_EQ(da.ctr.tx_frames, 0u);
	EXPECT_EQ(da.ctr.tx_bytes, 0u);
	EXPECT_EQ(send(3, MBCF_OP_SEND, 1024), MBCF_WC_SUCCESS);
	ASSERT_EQ(a.out.size(), 1u);
	EXPECT_EQ(a.out[0].size(), 1024u + 72);
	EXPECT_EQ(send(4, MBCF_OP_SEND, 0), MBCF_WC_SUCCESS);	// zero length
	mbcf_wr w = make_wr(5, MBCF_OP_WRITE, 8, 0, 0);	// not on UD
	EXPECT_EQ(mbcf_dgram_send(&da, &w, &to), MBCF_WC_LOC_LEN_ERR);
	ASSERT_EQ(a.cqes.size(), 5u);
	for (int i = 0; i < 4; i++) {
		EXPECT_EQ(a.cqes[i].cookie, (uint64_t)i + 1);
		EXPECT_EQ(a.cqes[i].status, MBCF_WC_SUCCESS);
	}
	EXPECT_EQ(a.cqes[4].status, MBCF_WC_LOC_LEN_ERR);
	EXPECT_EQ(da.ctr.tx_oversize, 2u);
	EXPECT_EQ(da.ctr.tx_frames, 2u);
	EXPECT_EQ(da.ctr.send_completions, 5u);

	// the MTU follows the netdev: at 9000 a 4096-byte message goes
	mbcf_dgram_set_mtu(&da, 9000);
	EXPECT_EQ(send(6, MBCF_OP_SEND, 4097), MBCF_WC_SUCCESS);
	EXPECT_EQ(send(7, MBCF_OP_SEND, 4096), MBCF_WC_SUCCESS);
	ASSERT_EQ(a.out.size(), 3u);
	EXPECT_EQ(a.out[2].size(), 4096u + 72);
	EXPECT_EQ(da.ctr.tx_oversize, 3u);
}

// A datagram whose buffer is gone (its MR deregistered) does not leave and
// completes with a local protection error.
TEST_F(Dgram, BufferGoneIsALocalProtectionError)
{
	a.fault_cookie = 1;
	EXPECT_EQ(send(1, MBCF_OP_SEND, 600), MBCF_WC_LOC_PROT_ERR);
	EXPECT_TRUE(a.out.empty());
	ASSERT_EQ(a.cqes.size(), 1u);
	EXPECT_EQ(a.cqes[0].status, MBCF_WC_LOC_PROT_ERR);
	EXPECT_EQ(da.ctr.tx_frames, 0u);
	EXPECT_EQ(da.ctr.tx_bytes, 0u);		// nothing left
	a.busy = 1;				// busy loses it: not sent either
	EXPECT_EQ(send(2, MBCF_OP_SEND, 600), MBCF_WC_SUCCESS);
	EXPECT_EQ(da.ctr.tx_busy, 1u);
	EXPECT_EQ(da.ctr.tx_bytes, 0u);
	EXPECT_EQ(send(3, MBCF_OP_SEND, 600), MBCF_WC_SUCCESS);
	EXPECT_EQ(da.ctr.tx_frames, 1u);
	EXPECT_EQ(da.ctr.tx_bytes, 600u);
}

// What the receiver cannot take is lost, counted once, and never touches
// a receive it does not fit.
TEST_F(Dgram, UndeliverableDatagrams)
{
	send(1, MBCF_OP_SEND, 100);		// no receive posted
	pump();
	EXPECT_EQ(db.ctr.drop_stopped, 1u);
	to.qkey = 0x999;
	send(2, MBCF_OP_SEND, 100);		// wrong Q_Key
	to.qkey = kQkey;
	to.remote_qpn = 0x303;
	send(3, MBCF_OP_SEND, 100);		// not this QP
	to.remote_qpn = 0x202;
	b.recvs.push_back({7, 100});		// too small for GRH + 100
	send(4, MBCF_OP_SEND, 100);
	pump();
	EXPECT_EQ(db.ctr.drop_bad_qkey, 1u);
	EXPECT_EQ(db.ctr.drop_wrong_qp, 1u);
	EXPECT_EQ(db.ctr.drop_bad_length, 1u);	// and the receive stays
	EXPECT_TRUE(b.rcqes.empty());
	ASSERT_EQ(b.recvs.size(), 1u);
	EXPECT_TRUE(b.recv_buf[7].empty());
	b.claim_bad = true;
	send(5, MBCF_OP_SEND, 10);
	pump();
	EXPECT_EQ(db.ctr.remote_errors, 1u);
	EXPECT_EQ(unaccounted(), 0);
}

// A datagram longer than the oldest posted receive holds
// (after the GRH) is dropped before it takes the receive (drop_bad_length):
// no completion, the receive stays posted, and the next datagram that fits
// lands in it.
TEST_F(Dgram, ATooLongDatagramLeavesTheReceivePosted)
{
	b.recvs.push_back({7, 40 + 100});
	send(1, MBCF_OP_SEND, 101);
	pump();
	EXPECT_TRUE(b.rcqes.empty());
	ASSERT_EQ(b.recvs.size(), 1u);
	EXPECT_EQ(b.recvs.front().cookie, 7u);
	EXPECT_EQ(db.ctr.drop_bad_length, 1u);
	EXPECT_EQ(db.ctr.remote_errors, 0u);
	send(2, MBCF_OP_SEND, 100, 0x42);
	pump();
	ASSERT_EQ(b.rcqes.size(), 1u);
	EXPECT_EQ(b.rcqes[0].cookie, 7u);
	EXPECT_EQ(b.rcqes[0].status, MBCF_WC_SUCCESS);
	EXPECT_EQ(b.rcqes[0].byte_len, 140u);
	const auto &buf = b.recv_buf[7];
	ASSERT_EQ(buf.size(), 140u);
	EXPECT_EQ(std::vector<uint8_t>(buf.begin() + 40, buf.end()),
		  std::vector<uint8_t>(100, 0x42));
	EXPECT_TRUE(b.recvs.empty());
	EXPECT_EQ(db.ctr.rx_accepted, 1u);
	EXPECT_EQ(db.ctr.recv_completions, 1u);
	EXPECT_EQ(unaccounted(), 0);
}

// QP1 (GSI) takes MADs, 256 bytes after the GRH: 512 datagrams of 257
// bytes (the burst that silenced rdma_cm) are dropped without touching the
// receive, big as it is; a MAD then lands in it.
TEST_F(Dgram, Qp1DropsAnythingLongerThanAMad)
{
	ASSERT_EQ(mbcf_dgram_init(&db, MBCF_GSI_QPN, kQkey, 1500, &kOps, &b), 0);
	to.remote_qpn = MBCF_GSI_QPN;
	b.recvs.push_back({8, 4096});
	for (int i = 0; i < 512; i++) {
		send(100 + i, MBCF_OP_SEND, MBCF_MAD_LEN + 1);
		pump();
	}
	EXPECT_TRUE(b.rcqes.empty());
	ASSERT_EQ(b.recvs.size(), 1u);
	EXPECT_EQ(db.ctr.drop_bad_length, 512u);
	EXPECT_EQ(db.ctr.recv_completions, 0u);
	send(1, MBCF_OP_SEND, MBCF_MAD_LEN, 0x33);
	pump();
	ASSERT_EQ(b.rcqes.size(), 1u);
	EXPECT_EQ(b.rcqes[0].cookie, 8u);
	EXPECT_EQ(b.rcqes[0].status, MBCF_WC_SUCCESS);
	EXPECT_EQ(b.rcqes[0].byte_len, 40u + MBCF_MAD_LEN);
	EXPECT_EQ(db.ctr.rx_accepted, 1u);
	EXPECT_EQ(unaccounted(), 0);
}

// Payload in pieces (a non-linear packet buffer) lands like contiguous.
TEST_F(Dgram, PayloadInPieces)
{
	b.recvs.push_back({5, 2000});
	send(1, MBCF_OP_SEND, 1000, 0x77);
	ASSERT_EQ(a.out.size(), 1u);
	auto fr = a.out.front();
	a.out.clear();
	mbcf_frame f;
	ASSERT_EQ(mbcf_codec_parse_split(fr.data(), 72, (uint32_t)fr.size(), &f, nullptr),
		  MBCF_PARSE_OK);
	ASSERT_EQ(f.payload, nullptr);
	std::vector<uint8_t> p1(fr.begin() + 72, fr.begin() + 73),
		p2(fr.begin() + 73, fr.end());
	mbcf_iov iov[2] = { { p1.data(), 1 }, { p2.data(), (uint32_t)p2.size() } };
	f.iov = iov;
	f.niov = 2;
	mbcf_dgram_rx(&db, &f);
	ASSERT_EQ(b.rcqes.size(), 1u);
	EXPECT_EQ(std::vector<uint8_t>(b.recv_buf[5].begin() + 40, b.recv_buf[5].end()),
		  std::vector<uint8_t>(1000, 0x77));
}

}  // namespace
