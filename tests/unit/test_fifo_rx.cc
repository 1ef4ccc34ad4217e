// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
// FIFO_PUSH on the wire (docs/protocol.md 16.3): the frame, the record in
// the receiver's FIFO, per-sender order, STOP/GO on a full FIFO or an error
// when it was created so, and hostile frames: unknown key, a record too big,
// a paylen that lies, flags a push may not carry, a push after a gap, a
// duplicate.  Exact bytes, statuses and counters.
#include <gtest/gtest.h>

#include "harness.h"
#include "pair.h"

using namespace mbcft;

namespace {

constexpr uint32_t kFkey = 0x4401;
constexpr uint8_t kBoth = MBCF_F_FIRST | MBCF_F_LAST;

class FifoRx : public Pair {
protected:
	void SetUp() override
	{
		Pair::SetUp();
		b.add_fifo(kFkey, 256);
	}

	uint64_t push(uint32_t len, uint8_t fill, uint32_t fkey = kFkey)
	{
		return post(a, MBCF_OP_FIFO_PUSH, len, 0, fkey, fill);
	}

	uint32_t word(uint32_t off)
	{
		uint32_t w;
		memcpy(&w, b.fifo_area() + off, 4);
		return w;
	}

	// b's consumer (16.2): the next whole record, zeroed and consumed.
	bool pop(std::vector<uint8_t> *data, uint32_t *qpn = nullptr)
	{
		for (;;) {
			uint64_t &head = b.fifo_u64(MBCF_FIFO_OFF_HEAD);
			uint32_t off = (uint32_t)head & (b.fifo_size - 1), w = word(off);
			if (!(w & MBCF_FIFO_READY))
				return false;
			uint32_t len = w & MBCF_FIFO_LEN_MASK, n = mbcf_fifo_rec_size(len);
			bool skip = w & MBCF_FIFO_SKIP;
			if (!skip) {
				if (qpn)
					memcpy(qpn, b.fifo_area() + off + 4, 4);
				data->assign(b.fifo_area() + off + 8,
					     b.fifo_area() + off + 8 + len);
			}
			memset(b.fifo_area() + off, 0, n);
			head += n;
			if (!skip)
				return true;
		}
	}

	// A FIFO_PUSH for b built by hand, psn rcv_nxt + d.
	std::vector<uint8_t> hand(uint8_t flags, uint32_t fkey, uint32_t len,
				  uint32_t d = 0, uint8_t fill = 0x42)
	{
		mbcf_frame f{};
		std::vector<uint8_t> v(MBCF_HDR_MAX);

		f.op = MBCF_OP_FIFO_PUSH;
		f.flags = flags;
		f.dst_qpn = 0x22;
		f.src_qpn = 0x11;
		f.psn = mbcf_seq_add(b.conn.rcv_nxt, d);
		f.ack_psn = b.conn.snd_max;
		f.paylen = len;
		f.rkey = fkey;
		v.resize(mbcf_codec_build(&f, v.data()));
		v.insert(v.end(), len, fill);
		return v;
	}

	uint64_t tail() { return b.fifo_u64(MBCF_FIFO_OFF_TAIL); }
};

TEST_F(FifoRx, ThePushFrameAndItsRecord)
{
	uint64_t c = push(20, 0x5a);

	ASSERT_EQ(a.out.size(), 1u);
	EXPECT_EQ(a.out[0].size(), 28u + 20);
	mbcf_frame f = frame(a, 0);
	EXPECT_EQ(f.op, MBCF_OP_FIFO_PUSH);
	EXPECT_EQ(f.flags & kBoth, kBoth);
	EXPECT_EQ(f.rkey, kFkey);
	EXPECT_EQ(f.paylen, 20u);
	EXPECT_EQ(f.run, 0u);
	settle(a, b, now);

	EXPECT_EQ(word(0), MBCF_FIFO_READY | 20);
	std::vector<uint8_t> d;
	uint32_t qpn = 0;
	ASSERT_TRUE(pop(&d, &qpn));
	EXPECT_EQ(d, std::vector<uint8_t>(20, 0x5a));
	EXPECT_EQ(qpn, 0x22u);		/* the QP it arrived through */
	EXPECT_EQ(tail(), 32u);
	ASSERT_EQ(a.cqes.size(), 1u);
	EXPECT_EQ(a.cqes[0].cookie, c);
	EXPECT_EQ(a.cqes[0].status, MBCF_WC_SUCCESS);
	EXPECT_EQ(b.conn.ctr.rx_accepted, 1u);
	EXPECT_EQ(b.conn.ctr.rx_bytes, 20u);
	EXPECT_EQ(b.fifo_gets, 1);
	EXPECT_EQ(b.fifo_puts, 1);
	EXPECT_EQ(b.rcqes.size(), 0u);	/* no receive consumed or completed */
	EXPECT_EQ(rx_unaccounted(b), 0);
}

TEST_F(FifoRx, OneSendersRecordsInPostingOrder)
{
	for (uint32_t i = 0; i < 5; i++)
		push(4 + 9 * i, (uint8_t)(0x10 + i));
	settle(a, b, now);
	for (uint32_t i = 0; i < 5; i++) {
		std::vector<uint8_t> d;
		ASSERT_TRUE(pop(&d));
		EXPECT_EQ(d, std::vector<uint8_t>(4 + 9 * i, (uint8_t)(0x10 + i)));
	}
	std::vector<uint8_t> d;
	EXPECT_FALSE(pop(&d));
	EXPECT_EQ(a.cqes.size(), 5u);
}

// The payload in pieces (a non-linear packet buffer) lands whole.
TEST_F(FifoRx, PayloadInPieces)
{
	push(40, 0x33);
	ASSERT_EQ(a.out.size(), 1u);
	deliver_split(b, a.out[0], now);
	a.out.clear();
	EXPECT_EQ(word(0), MBCF_FIFO_READY | 40);
	EXPECT_EQ(std::vector<uint8_t>(b.fifo_area() + 8, b.fifo_area() + 48),
		  std::vector<uint8_t>(40, 0x33));
	EXPECT_EQ(b.conn.ctr.rx_accepted, 1u);
}

TEST_F(FifoRx, LongerThanOneFrameIsRefusedAtPost)
{
	uint32_t max = mbcf_codec_max_payload(1500, MBCF_OP_FIFO_PUSH);
	mbcf_wr w = make_wr(next_cookie++, MBCF_OP_FIFO_PUSH, max + 1, 0, kFkey);

	EXPECT_EQ(max, 1472u);
	EXPECT_EQ(mbcf_conn_post(&a.conn, &w, now), MBCF_POST_INVAL);
	EXPECT_TRUE(a.out.empty());

	b.add_fifo(kFkey, 4096);
	push(max, 0x77);
	settle(a, b, now);
	EXPECT_EQ(word(0), MBCF_FIFO_READY | max);
	ASSERT_EQ(a.cqes.size(), 1u);
	EXPECT_EQ(a.cqes[0].status, MBCF_WC_SUCCESS);
}

TEST_F(FifoRx, UnknownKeyIsARemoteAccessError)
{
	push(8, 1, kFkey + 1);
	settle(a, b, now);
	ASSERT_EQ(a.cqes.size(), 1u);
	EXPECT_EQ(a.cqes[0].status, MBCF_WC_REM_ACCESS_ERR);
	EXPECT_EQ(a.conn.state, MBCF_CONN_ERROR);
	EXPECT_EQ(b.conn.state, MBCF_CONN_ERROR);
	EXPECT_EQ(b.conn.ctr.remote_errors, 1u);
	EXPECT_EQ(b.fifo_gets, 0);
	EXPECT_EQ(b.fifo_puts, 0);
	EXPECT_EQ(tail(), 0u);
}

// An rkey of a memory region is no FIFO key.
TEST_F(FifoRx, AnMrKeyIsNoFifoKey)
{
	push(8, 1, kRkey);
	settle(a, b, now);
	ASSERT_EQ(a.cqes.size(), 1u);
	EXPECT_EQ(a.cqes[0].status, MBCF_WC_REM_ACCESS_ERR);
}

TEST_F(FifoRx, ARecordThatCanNeverFitIsAnInvalidRequest)
{
	push(121, 1);	/* 136 bytes > 256 / 2 */
	settle(a, b, now);
	ASSERT_EQ(a.cqes.size(), 1u);
	EXPECT_EQ(a.cqes[0].status, MBCF_WC_REM_INV_REQ_ERR);
	EXPECT_EQ(b.fifo_gets, 1);
	EXPECT_EQ(b.fifo_puts, 1);
	EXPECT_EQ(tail(), 0u);
}

TEST_F(FifoRx, AMalformedControlBlockIsAnOpError)
{
	b.fifo_u64(MBCF_FIFO_OFF_HEAD) = 4;
	push(8, 1);
	settle(a, b, now);
	ASSERT_EQ(a.cqes.size(), 1u);
	EXPECT_EQ(a.cqes[0].status, MBCF_WC_REM_OP_ERR);
	EXPECT_EQ(tail(), 0u);
}

// Full: STOP, nothing lost; the owner consumes and rings, GO, the push is
// resent and appended once, after the ones before it.
TEST_F(FifoRx, FullStopsThenGoes)
{
	push(120, 1);
	push(120, 2);
	push(56, 3);
	settle(a, b, now);
	EXPECT_EQ(tail(), 256u);
	EXPECT_EQ(b.conn.ctr.drop_stopped, 1u);
	EXPECT_EQ(b.conn.ctr.stop_tx, 1u);
	EXPECT_EQ(a.conn.ctr.stop_rx, 1u);
	ASSERT_EQ(a.cqes.size(), 2u);
	uint32_t w;
	memcpy(&w, b.fifo_ctrl() + MBCF_FIFO_OFF_WAIT, 4);
	EXPECT_EQ(w, 1u);

	std::vector<uint8_t> d;
	ASSERT_TRUE(pop(&d));
	EXPECT_EQ(d, std::vector<uint8_t>(120, 1));
	memset(b.fifo_ctrl() + MBCF_FIFO_OFF_WAIT, 0, 4);	/* the doorbell */
	mbcf_conn_recv_posted(&b.conn, now);
	EXPECT_EQ(b.conn.ctr.go_tx, 1u);
	settle(a, b, now);

	ASSERT_EQ(a.cqes.size(), 3u);
	for (auto &c : a.cqes)
		EXPECT_EQ(c.status, MBCF_WC_SUCCESS);
	EXPECT_EQ(tail(), 320u);
	ASSERT_TRUE(pop(&d));
	EXPECT_EQ(d, std::vector<uint8_t>(120, 2));
	ASSERT_TRUE(pop(&d));
	EXPECT_EQ(d, std::vector<uint8_t>(56, 3));
	EXPECT_FALSE(pop(&d));
	EXPECT_EQ(b.fifo_gets, b.fifo_puts);
	EXPECT_EQ(rx_unaccounted(b), 0);
}

TEST_F(FifoRx, FullIsAnErrorWhenCreatedSo)
{
	b.add_fifo(kFkey, 256, MBCF_FIFO_FULL_ERROR);
	push(120, 1);
	push(120, 2);
	push(56, 3);
	settle(a, b, now);
	ASSERT_EQ(a.cqes.size(), 3u);
	EXPECT_EQ(a.cqes[0].status, MBCF_WC_SUCCESS);
	EXPECT_EQ(a.cqes[1].status, MBCF_WC_SUCCESS);
	EXPECT_EQ(a.cqes[2].status, MBCF_WC_REM_OP_ERR);
	EXPECT_EQ(b.conn.ctr.stop_tx, 0u);
	EXPECT_EQ(tail(), 256u);
}

// Hostile frames the parser drops: a push that is not one whole frame, a
// paylen that lies either way, a status byte.  Nothing reaches the FIFO.
TEST_F(FifoRx, HostileFramesAreDroppedByTheParser)
{
	struct {
		std::vector<uint8_t> fr;
		int err;
	} cases[] = {
		{hand(MBCF_F_FIRST, kFkey, 8), MBCF_PARSE_MALFORMED},
		{hand(MBCF_F_LAST, kFkey, 8), MBCF_PARSE_MALFORMED},
		{hand(0, kFkey, 8), MBCF_PARSE_MALFORMED},
		{hand(kBoth | MBCF_F_SOLICITED, kFkey, 8), MBCF_PARSE_MALFORMED},
		{hand(kBoth, kFkey, 100), MBCF_PARSE_OK},	/* cut below */
		{hand(kBoth, kFkey, 100), MBCF_PARSE_OK},	/* grown below */
		{hand(kBoth, kFkey, 8), MBCF_PARSE_OK},		/* status below */
	};
	cases[4].fr.resize(28 + 50);		/* paylen says 100, 50 follow */
	cases[4].err = MBCF_PARSE_TRUNCATED;
	mbcf_put_be16(cases[5].fr.data() + MBCF_OFF_PAYLEN, 10);	/* 90 extra */
	cases[5].err = MBCF_PARSE_BAD_LENGTH;
	cases[6].fr[MBCF_OFF_STATUS] = 1;
	cases[6].err = MBCF_PARSE_MALFORMED;

	for (auto &c : cases)
		EXPECT_EQ(deliver(b, c.fr, now), c.err);
	EXPECT_EQ(b.dev_ctr.drop_malformed, 5u);
	EXPECT_EQ(b.dev_ctr.drop_truncated, 1u);
	EXPECT_EQ(b.dev_ctr.drop_bad_length, 1u);
	EXPECT_EQ(b.fifo_gets, 0);
	EXPECT_EQ(tail(), 0u);
	EXPECT_EQ(b.conn.ctr.rx_accepted, 0u);
	EXPECT_EQ(rx_unaccounted(b), 0);
}

// A hand-built push with an unknown key at rcv_nxt: NAKed, nothing written.
TEST_F(FifoRx, AHandBuiltPushWithAnUnknownKeyIsNaked)
{
	uint32_t psn = b.conn.rcv_nxt;

	EXPECT_EQ(deliver(b, hand(kBoth | MBCF_F_ACKREQ, 0xdead, 16), now),
		  MBCF_PARSE_OK);
	ASSERT_EQ(b.out.size(), 1u);
	mbcf_frame f = frame(b, 0);
	EXPECT_EQ(f.op, MBCF_OP_ACK);
	EXPECT_EQ(f.status, MBCF_ST_REMOTE_ACCESS_ERROR);
	EXPECT_EQ(f.ack_psn, psn);
	EXPECT_EQ(b.conn.ctr.remote_errors, 1u);
	EXPECT_EQ(tail(), 0u);
}

// Never placed early (16.3): a push after a gap is dropped, and the FIFO
// keeps the order the sender posted.
TEST_F(FifoRx, APushAfterAGapIsNotPlacedEarly)
{
	EXPECT_EQ(deliver(b, hand(kBoth, kFkey, 8, 1, 0x02), now), MBCF_PARSE_OK);
	EXPECT_EQ(b.conn.ctr.drop_out_of_seq, 1u);
	EXPECT_EQ(b.conn.ctr.rx_early, 0u);
	EXPECT_EQ(b.conn.ctr.lost_tx, 1u);
	EXPECT_EQ(tail(), 0u);
	EXPECT_EQ(b.fifo_gets, 0);

	b.out.clear();
	EXPECT_EQ(deliver(b, hand(kBoth, kFkey, 8, 0, 0x01), now), MBCF_PARSE_OK);
	EXPECT_EQ(deliver(b, hand(kBoth, kFkey, 8, 0, 0x02), now), MBCF_PARSE_OK);
	std::vector<uint8_t> d;
	ASSERT_TRUE(pop(&d));
	EXPECT_EQ(d, std::vector<uint8_t>(8, 0x01));
	ASSERT_TRUE(pop(&d));
	EXPECT_EQ(d, std::vector<uint8_t>(8, 0x02));
}

// A resent push that was accepted is acknowledged again, never appended
// twice (an append is not idempotent).
TEST_F(FifoRx, ADuplicateIsNotAppendedTwice)
{
	auto fr = hand(kBoth, kFkey, 8);

	EXPECT_EQ(deliver(b, fr, now), MBCF_PARSE_OK);
	EXPECT_EQ(deliver(b, fr, now), MBCF_PARSE_OK);
	EXPECT_EQ(b.conn.ctr.rx_accepted, 1u);
	EXPECT_EQ(b.conn.ctr.drop_duplicate, 1u);
	EXPECT_EQ(tail(), 16u);
	EXPECT_EQ(b.fifo_gets, 1);
}

// A push inside a segmented WRITE breaks its bracket (9).
TEST_F(FifoRx, APushInsideAWriteIsAnInvalidRequest)
{
	mbcf_frame f{};
	std::vector<uint8_t> w(MBCF_HDR_MAX);

	f.op = MBCF_OP_WRITE;
	f.flags = MBCF_F_FIRST;
	f.dst_qpn = 0x22;
	f.src_qpn = 0x11;
	f.psn = b.conn.rcv_nxt;
	f.ack_psn = b.conn.snd_max;
	f.paylen = 8;
	f.va = kBase;
	f.rkey = kRkey;
	w.resize(mbcf_codec_build(&f, w.data()));
	w.insert(w.end(), 8, 0x55);
	EXPECT_EQ(deliver(b, w, now), MBCF_PARSE_OK);
	EXPECT_EQ(b.conn.ctr.rx_accepted, 1u);

	EXPECT_EQ(deliver(b, hand(kBoth, kFkey, 8), now), MBCF_PARSE_OK);
	EXPECT_EQ(b.conn.ctr.remote_errors, 1u);
	EXPECT_EQ(b.conn.nak_status, MBCF_ST_REMOTE_INVALID_REQUEST);
	EXPECT_EQ(tail(), 0u);
}

}  // namespace

class FifoRxUc : public FifoRx {
protected:
	void SetUp() override
	{
		mbcf_conn_cfg ca = default_cfg(0x11, 0x22, 100, 200);
		mbcf_conn_cfg cb = default_cfg(0x22, 0x11, 200, 100);

		ca.uc = cb.uc = true;
		setup(ca, cb);
		b.add_fifo(kFkey, 256);
	}
};

// Unreliable (10): a push with no room or an unknown key is dropped whole
// and silently; the connection stays up and the next push lands.
TEST_F(FifoRxUc, RefusedPushesAreDroppedSilently)
{
	push(120, 1);
	push(120, 2);
	push(56, 3);		/* no room */
	push(8, 4, kFkey + 1);	/* unknown key */
	settle(a, b, now);
	EXPECT_TRUE(b.out.empty());	/* no STOP, no NAK */
	EXPECT_EQ(b.conn.state, MBCF_CONN_RTS);
	EXPECT_EQ(tail(), 256u);
	ASSERT_EQ(a.cqes.size(), 4u);

	std::vector<uint8_t> d;
	ASSERT_TRUE(pop(&d));
	push(8, 5);
	settle(a, b, now);
	EXPECT_EQ(tail(), 256u + 16);
	ASSERT_TRUE(pop(&d));
	EXPECT_EQ(d, std::vector<uint8_t>(120, 2));
	ASSERT_TRUE(pop(&d));
	EXPECT_EQ(d, std::vector<uint8_t>(8, 5));
	EXPECT_FALSE(pop(&d));
	EXPECT_EQ(rx_unaccounted(b), 0);
}
