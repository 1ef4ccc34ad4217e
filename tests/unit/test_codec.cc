// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
// Sequence arithmetic at the wrap; codec round trips and every rejection.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "harness.h"

using namespace mbcft;

TEST(Seq, AddWraps)
{
	EXPECT_EQ(mbcf_seq_add(0xFFFFFF, 1), 0u);
	EXPECT_EQ(mbcf_seq_add(0xFFFFFE, 5), 3u);
	EXPECT_EQ(mbcf_seq_add(5, 0), 5u);
}

TEST(Seq, DiffAcrossWrap)
{
	EXPECT_EQ(mbcf_seq_diff(0, 0xFFFFFF), 1);
	EXPECT_EQ(mbcf_seq_diff(0xFFFFFF, 0), -1);
	EXPECT_EQ(mbcf_seq_diff(3, 0xFFFFFE), 5);
	EXPECT_EQ(mbcf_seq_diff(0x7FFFFF, 0), 0x7FFFFF);
	EXPECT_EQ(mbcf_seq_diff(0x800000, 0), -0x800000);
	EXPECT_TRUE(mbcf_seq_lt(0xFFFFF0, 0x10));
	EXPECT_FALSE(mbcf_seq_lt(0x10, 0xFFFFF0));
	EXPECT_TRUE(mbcf_seq_le(7, 7));
	EXPECT_TRUE(mbcf_seq_in(1, 0xFFFFFF, 3));
	EXPECT_TRUE(mbcf_seq_in(0xFFFFFF, 0xFFFFFF, 1));
	EXPECT_FALSE(mbcf_seq_in(2, 0xFFFFFF, 3));
	EXPECT_FALSE(mbcf_seq_in(0xFFFFFE, 0xFFFFFF, 3));
}

TEST(Seq, EveryDistanceRoundTrips)
{
	for (uint32_t base : {0u, 1u, 0x7FFFFFu, 0xFFFFF0u, 0xFFFFFFu})
		for (int32_t d = -1000; d <= 1000; d++) {
			uint32_t p = mbcf_seq_add(base, (uint32_t)d);
			ASSERT_EQ(mbcf_seq_diff(p, base), d) << base << " " << d;
		}
}

namespace {

mbcf_frame sample(uint8_t op)
{
	mbcf_frame f{};
	f.op = op;
	f.dst_qpn = 0x123456;
	f.src_qpn = 0x000011;
	f.psn = 0xFFFFFF;
	f.ack_psn = 0xABCDEF;
	f.flags = MBCF_F_ACKREQ;
	switch (op) {
	case MBCF_OP_WRITE_IMM:
		f.imm = 0xdeadbeef;
		f.len = 3000;
		f.flags |= MBCF_F_SOLICITED;
		[[fallthrough]];
	case MBCF_OP_WRITE:
		f.va = 0x0123456789abcd00ull;
		f.rkey = 0x11223344;
		f.paylen = 100;
		f.flags |= MBCF_F_FIRST | MBCF_F_LAST;
		break;
	case MBCF_OP_READ_REQ:
		f.va = 0xffffffffffffe000ull;
		f.rkey = 7;
		f.len = 4096;
		break;
	case MBCF_OP_READ_RESP:
		f.offset = 1440;
		f.req_psn = 0x000042;
		f.paylen = 9;
		f.flags |= MBCF_F_LAST;
		break;
	case MBCF_OP_CMP_SWAP:
		f.operand[1] = 0x5555aaaa5555aaaaull;
		[[fallthrough]];
	case MBCF_OP_FETCH_ADD:
		f.va = 0x1000;
		f.rkey = 9;
		f.operand[0] = 0x8000000000000001ull;
		break;
	case MBCF_OP_ATOMIC_RESP:
		f.req_psn = 0xFFFFFE;
		f.operand[0] = 0xfedcba9876543210ull;
		break;
	case MBCF_OP_SEND_INV:
		f.rkey = 0x00abcd07;
		f.offset = 2880;
		f.paylen = 1;
		f.flags |= MBCF_F_FIRST | MBCF_F_LAST;
		break;
	case MBCF_OP_SEND_IMM:
		f.imm = 0x01020304;
		[[fallthrough]];
	case MBCF_OP_SEND:
		f.offset = 2880;
		f.paylen = 1;
		f.flags |= MBCF_F_FIRST;
		break;
	case MBCF_OP_FIFO_PUSH:
		f.rkey = 0x00c0ffee;
		f.paylen = 3;
		f.flags |= MBCF_F_FIRST | MBCF_F_LAST;
		break;
	case MBCF_OP_ACK:
		f.status = MBCF_ST_REMOTE_OP_ERROR;
		f.flags = 0;
		break;
	case MBCF_OP_DGRAM: {
		static const uint8_t s[16] = { 0xfe, 0x80, 0, 0, 0, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8 };
		static const uint8_t d[16] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 192, 0, 2, 10 };

		f.psn = f.ack_psn = 0;
		f.flags = MBCF_F_SOLICITED | MBCF_F_IMM;
		f.rkey = 0x80010000;
		f.imm = 0xa1b2c3d4;
		f.vtf = 6u << 28 | 0x20u << 20 | 0x12345;
		f.hop_limit = 64;
		f.sgid = s;
		f.dgid = d;
		f.paylen = 256;
		break;
	}
	default:
		f.flags = 0;
		break;
	}
	return f;
}

std::vector<uint8_t> encode(const mbcf_frame &f, uint8_t fill = 0x5a)
{
	std::vector<uint8_t> b(MBCF_HDR_MAX);
	uint32_t hl = mbcf_codec_build(&f, b.data());

	b.resize(hl);
	b.insert(b.end(), f.paylen, fill);
	return b;
}

const uint8_t kAllOps[] = {
	MBCF_OP_WRITE, MBCF_OP_WRITE_IMM, MBCF_OP_READ_REQ, MBCF_OP_READ_RESP,
	MBCF_OP_CMP_SWAP, MBCF_OP_FETCH_ADD, MBCF_OP_ATOMIC_RESP, MBCF_OP_SEND,
	MBCF_OP_SEND_IMM, MBCF_OP_SEND_INV, MBCF_OP_FIFO_PUSH, MBCF_OP_ACK, MBCF_OP_LOST,
	MBCF_OP_STOP, MBCF_OP_GO, MBCF_OP_DGRAM,
};

int parse_bytes(std::vector<uint8_t> b, mbcf_counters *ctr)
{
	mbcf_frame f;
	return mbcf_codec_parse(b.data(), (uint32_t)b.size(), &f, ctr);
}

}  // namespace

TEST(Codec, HeaderSizesFitA1500ByteFrame)
{
	EXPECT_EQ(mbcf_codec_hdr_len(MBCF_OP_WRITE), 36u);
	EXPECT_EQ(mbcf_codec_hdr_len(MBCF_OP_ACK), 24u);
	EXPECT_EQ(mbcf_codec_hdr_len(0), 0u);
	EXPECT_EQ(mbcf_codec_hdr_len(MBCF_OP_SEND_INV), 32u);
	EXPECT_EQ(mbcf_codec_hdr_len(MBCF_OP_FIFO_PUSH), 28u);
	EXPECT_EQ(mbcf_codec_max_payload(1500, MBCF_OP_FIFO_PUSH), 1472u);
	EXPECT_EQ(mbcf_codec_hdr_len(0x0c), 0u);
	for (uint8_t op : kAllOps)
		EXPECT_LE(mbcf_codec_hdr_len(op), (uint32_t)MBCF_HDR_MAX);
	EXPECT_GE(mbcf_codec_max_payload(1500, MBCF_OP_WRITE), 1440u);
	EXPECT_GE(mbcf_codec_max_payload(1500, MBCF_OP_WRITE_IMM), 1440u);
	EXPECT_GE(mbcf_codec_max_payload(1500, MBCF_OP_SEND_IMM), 1440u);
	EXPECT_GE(mbcf_codec_max_payload(1500, MBCF_OP_READ_RESP), 1440u);
	EXPECT_EQ(mbcf_codec_max_payload(9000, MBCF_OP_WRITE), 9000u - 36);
	EXPECT_EQ(mbcf_codec_max_payload(20, MBCF_OP_WRITE), 0u);
}

TEST(Codec, RoundTripEveryOpcode)
{
	for (uint8_t op : kAllOps) {
		SCOPED_TRACE(mbcf_codec_op_name(op));
		mbcf_frame in = sample(op), out;
		auto b = encode(in);
		mbcf_counters ctr{};
		ASSERT_EQ(mbcf_codec_parse(b.data(), (uint32_t)b.size(), &out, &ctr),
			  MBCF_PARSE_OK);
		EXPECT_EQ(out.op, in.op);
		EXPECT_EQ(out.flags, in.flags);
		EXPECT_EQ(out.status, in.status);
		EXPECT_EQ(out.dst_qpn, in.dst_qpn);
		EXPECT_EQ(out.src_qpn, in.src_qpn);
		EXPECT_EQ(out.psn, in.psn);
		EXPECT_EQ(out.ack_psn, in.ack_psn);
		EXPECT_EQ(out.paylen, in.paylen);
		EXPECT_EQ(out.va, in.va);
		EXPECT_EQ(out.rkey, in.rkey);
		EXPECT_EQ(out.imm, in.imm);
		EXPECT_EQ(out.len, in.len);
		EXPECT_EQ(out.offset, in.offset);
		EXPECT_EQ(out.req_psn, in.req_psn);
		EXPECT_EQ(out.operand[0], in.operand[0]);
		EXPECT_EQ(out.operand[1], in.operand[1]);
		EXPECT_EQ(out.hdr_len, mbcf_codec_hdr_len(op));
		EXPECT_EQ(out.payload, b.data() + out.hdr_len);
		EXPECT_EQ(ctr.drop_malformed + ctr.drop_truncated, 0u);
	}
}

TEST(Codec, FieldOffsetsAreBigEndian)
{
	mbcf_frame f = sample(MBCF_OP_WRITE);
	auto b = encode(f);

	EXPECT_EQ(b[0], MBCF_WIRE_VERSION);
	EXPECT_EQ(b[1], MBCF_OP_WRITE);
	EXPECT_EQ(b[4], 0x00);
	EXPECT_EQ(b[5], 0x12);
	EXPECT_EQ(b[7], 0x56);
	EXPECT_EQ(b[13], 0xFF);
	EXPECT_EQ(b[20], 0x00);
	EXPECT_EQ(b[21], 100);
	EXPECT_EQ(b[24], 0x01);
	EXPECT_EQ(b[31], 0x00);
	EXPECT_EQ(b[32], 0x11);
	EXPECT_EQ(b[35], 0x44);
}

// FIFO_PUSH: fkey at 24 (big-endian), the data right after, one frame.
TEST(Codec, FifoPushLayout)
{
	auto b = encode(sample(MBCF_OP_FIFO_PUSH));

	ASSERT_EQ(b.size(), 28u + 3);
	EXPECT_EQ(b[1], 0x0b);
	EXPECT_EQ(b[2], MBCF_F_ACKREQ | MBCF_F_FIRST | MBCF_F_LAST);
	EXPECT_EQ(b[3], 0);
	EXPECT_EQ(b[24], 0x00);
	EXPECT_EQ(b[25], 0xc0);
	EXPECT_EQ(b[26], 0xff);
	EXPECT_EQ(b[27], 0xee);
	EXPECT_EQ(b[28], 0x5a);
}

TEST(Codec, RejectsTruncatedAtEveryLength)
{
	for (uint8_t op : kAllOps) {
		auto b = encode(sample(op));
		for (size_t n = 0; n < b.size(); n++) {
			mbcf_counters ctr{};
			std::vector<uint8_t> t(b.begin(), b.begin() + n);
			// short frames may look padded; a cut one never parses
			int err = parse_bytes(t, &ctr);
			ASSERT_LT(err, 0) << mbcf_codec_op_name(op) << " len " << n;
			ASSERT_EQ(ctr.drop_truncated + ctr.drop_bad_length, 1u);
		}
	}
}

TEST(Codec, RejectsBadVersion)
{
	for (int v : {0, 1, 3, 255}) {	// 1: before WRITE had its index
		auto b = encode(sample(MBCF_OP_WRITE));
		b[0] = (uint8_t)v;
		mbcf_counters ctr{};
		EXPECT_EQ(parse_bytes(b, &ctr), MBCF_PARSE_BAD_VERSION);
		EXPECT_EQ(ctr.drop_bad_version, 1u);
	}
}

TEST(Codec, RejectsEveryUnknownOpcode)
{
	std::set<int> known(std::begin(kAllOps), std::end(kAllOps));

	for (int op = 0; op < 256; op++) {
		if (known.count(op))
			continue;
		auto b = encode(sample(MBCF_OP_ACK));
		b[1] = (uint8_t)op;
		b.resize(60, 0);
		mbcf_counters ctr{};
		EXPECT_EQ(parse_bytes(b, &ctr), MBCF_PARSE_BAD_OPCODE) << op;
		EXPECT_EQ(ctr.drop_bad_opcode, 1u);
	}
}

TEST(Codec, RejectsPayloadLengthMismatch)
{
	mbcf_counters ctr{};
	auto b = encode(sample(MBCF_OP_WRITE));	// 136 bytes, paylen 100

	b.push_back(0);
	EXPECT_EQ(parse_bytes(b, &ctr), MBCF_PARSE_BAD_LENGTH);
	b.pop_back();
	b.pop_back();
	EXPECT_EQ(parse_bytes(b, &ctr), MBCF_PARSE_TRUNCATED);
	// paylen on an opcode that carries none
	auto r = encode(sample(MBCF_OP_READ_REQ));
	r[21] = 4;
	r.resize(r.size() + 4);
	EXPECT_EQ(parse_bytes(r, &ctr), MBCF_PARSE_BAD_LENGTH);
	EXPECT_EQ(ctr.drop_bad_length, 2u);
	EXPECT_EQ(ctr.drop_truncated, 1u);
}

TEST(Codec, AcceptsEthernetPaddingOnlyBelowMinimum)
{
	auto b = encode(sample(MBCF_OP_ACK));	// 24 bytes

	b.resize(MBCF_ETH_MIN_PAYLOAD, 0);
	EXPECT_EQ(parse_bytes(b, nullptr), MBCF_PARSE_OK);
	b.push_back(0);
	EXPECT_EQ(parse_bytes(b, nullptr), MBCF_PARSE_BAD_LENGTH);
}

TEST(Codec, RejectsMalformedFields)
{
	struct Case {
		const char *what;
		uint8_t op;
		size_t off;
		uint8_t val;
	} cases[] = {
		{"dst_qpn top byte", MBCF_OP_WRITE, 4, 1},
		{"src_qpn top byte", MBCF_OP_WRITE, 8, 1},
		{"psn top byte", MBCF_OP_WRITE, 12, 1},
		{"ack_psn top byte", MBCF_OP_ACK, 16, 0x80},
		{"epoch on GO", MBCF_OP_GO, 23, 1},
		{"epoch on ACK", MBCF_OP_ACK, 22, 0x80},
		{"epoch on STOP", MBCF_OP_STOP, 23, 1},
		{"unknown flag", MBCF_OP_WRITE, 2, 0x80},
		{"FIRST on READ_REQ", MBCF_OP_READ_REQ, 2, MBCF_F_FIRST},
		{"SOLICITED on READ_RESP", MBCF_OP_READ_RESP, 2, MBCF_F_SOLICITED},
		{"status on WRITE_IMM", MBCF_OP_WRITE_IMM, 3, 1},
		{"status beyond max", MBCF_OP_ACK, 3, MBCF_ST_MAX + 1},
		{"status on LOST", MBCF_OP_LOST, 3, 1},
		{"req_psn top byte", MBCF_OP_READ_RESP, 28, 1},
		{"atomic req_psn top byte", MBCF_OP_ATOMIC_RESP, 24, 1},
		{"WRITE va wraps", MBCF_OP_WRITE, 24, 0xff},
		{"READ length > 2^31", MBCF_OP_READ_REQ, 36, 0x80},
		{"WRITE_IMM total < paylen", MBCF_OP_WRITE_IMM, 42, 0},
	};
	for (auto &c : cases) {
		mbcf_frame f = sample(c.op);
		if (c.op == MBCF_OP_WRITE && c.off == 24)
			f.va = 0xffffffffffffffd0ull;	// + 100 bytes wraps
		bool imm_len = c.op == MBCF_OP_WRITE_IMM && c.off == 42;
		if (imm_len)
			f.len = 0;
		auto b = encode(f);
		if (!imm_len && !(c.op == MBCF_OP_WRITE && c.off == 24))
			b[c.off] = c.val;
		mbcf_counters ctr{};
		EXPECT_EQ(parse_bytes(b, &ctr), MBCF_PARSE_MALFORMED) << c.what;
		EXPECT_EQ(ctr.drop_malformed, 1u) << c.what;
	}
}

// A WRITE's byte 3 is its run (docs/protocol.md 2.2, 5.1): it round-trips;
// a FIRST frame may have any (the writes before it), a later one at least
// 1 (its own message's frame before it).
TEST(Codec, WriteRunRoundTripsAndFollowsItsMessage)
{
	mbcf_frame f = sample(MBCF_OP_WRITE), g;
	f.flags = 0;		// a middle frame
	f.run = 200;
	auto b = encode(f);
	EXPECT_EQ(b[MBCF_OFF_RUN], 200);
	ASSERT_EQ(mbcf_codec_parse(b.data(), (uint32_t)b.size(), &g, nullptr),
		  MBCF_PARSE_OK);
	EXPECT_EQ(g.run, 200);
	EXPECT_EQ(g.status, 0);
	b[MBCF_OFF_FLAGS] = MBCF_F_FIRST;
	b[MBCF_OFF_RUN] = 7;
	ASSERT_EQ(mbcf_codec_parse(b.data(), (uint32_t)b.size(), &g, nullptr),
		  MBCF_PARSE_OK);
	EXPECT_EQ(g.run, 7);
	for (uint8_t fl : {0, MBCF_F_LAST}) {
		b[MBCF_OFF_FLAGS] = fl;
		b[MBCF_OFF_RUN] = 0;
		mbcf_counters ctr{};
		EXPECT_EQ(parse_bytes(b, &ctr), MBCF_PARSE_MALFORMED) << (int)fl;
		EXPECT_EQ(ctr.drop_malformed, 1u);
	}
}

// LOST says which frame found the gap and what was placed early (5.1, 7.2).
TEST(Codec, LostCarriesSeenAndThePlacedMap)
{
	mbcf_frame f = sample(MBCF_OP_LOST), g;
	uint8_t map[MBCF_PLACED_LEN];
	for (int i = 0; i < MBCF_PLACED_LEN; i++)
		map[i] = (uint8_t)(i * 37 + 1);
	f.seen = 0xabcdef;
	f.placed = map;
	auto b = encode(f);
	ASSERT_EQ(b.size(), (size_t)MBCF_LOST_HDR_LEN);
	EXPECT_EQ(b[MBCF_OFF_SEEN + 1], 0xab);
	ASSERT_EQ(mbcf_codec_parse(b.data(), (uint32_t)b.size(), &g, nullptr),
		  MBCF_PARSE_OK);
	EXPECT_EQ(g.seen, 0xabcdefu);
	ASSERT_NE(g.placed, nullptr);
	EXPECT_EQ(memcmp(g.placed, map, sizeof(map)), 0);
	f.placed = nullptr;				// built without: none placed
	b = encode(f);
	for (int i = 0; i < MBCF_PLACED_LEN; i++)
		EXPECT_EQ(b[MBCF_OFF_PLACED + i], 0) << i;
	b[MBCF_OFF_SEEN] = 1;				// 24 bits
	mbcf_counters ctr{};
	EXPECT_EQ(parse_bytes(b, &ctr), MBCF_PARSE_MALFORMED);
}

// The go-back round (docs/protocol.md 4.5): every sequenced frame and LOST
// carry it, big-endian at offset 22, and it round-trips.
TEST(Codec, EpochOnSequencedFramesAndLost)
{
	for (uint8_t op : {MBCF_OP_WRITE, MBCF_OP_READ_REQ, MBCF_OP_READ_RESP,
			   MBCF_OP_ATOMIC_RESP, MBCF_OP_SEND, MBCF_OP_LOST}) {
		mbcf_frame f = sample(op);
		f.epoch = 0xbeef;
		auto b = encode(f);
		EXPECT_EQ(b[MBCF_OFF_EPOCH], 0xbe) << (int)op;
		EXPECT_EQ(b[MBCF_OFF_EPOCH + 1], 0xef) << (int)op;
		mbcf_frame g;
		ASSERT_EQ(mbcf_codec_parse(b.data(), (uint32_t)b.size(), &g, nullptr),
			  MBCF_PARSE_OK) << (int)op;
		EXPECT_EQ(g.epoch, 0xbeefu) << (int)op;
	}
}

TEST(Codec, BuildRejectsUnknownOpcode)
{
	mbcf_frame f{};
	uint8_t b[MBCF_HDR_MAX];

	f.op = 0x0c;
	EXPECT_EQ(mbcf_codec_build(&f, b), 0u);
	EXPECT_STREQ(mbcf_codec_op_name(0x0c), "UNKNOWN");
	EXPECT_STREQ(mbcf_codec_op_name(MBCF_OP_FIFO_PUSH), "FIFO_PUSH");
}

TEST(Counters, NamesAreUniqueAndWalkable)
{
	std::set<std::string> names;
	mbcf_counters a{}, b{};

	for (unsigned i = 0; i < MBCF_CTR_COUNT; i++) {
		ASSERT_NE(mbcf_counters_name(i), nullptr);
		names.insert(mbcf_counters_name(i));
	}
	EXPECT_EQ(names.size(), (size_t)MBCF_CTR_COUNT);
	EXPECT_EQ(mbcf_counters_name(MBCF_CTR_COUNT), nullptr);
	a.tx_frames = 3;
	b.tx_frames = 4;
	b.drop_duplicate = 1;
	mbcf_counters_add(&a, &b);
	EXPECT_EQ(mbcf_counters_get(&a, MBCF_CTR_tx_frames), 7u);
	EXPECT_EQ(mbcf_counters_get(&a, MBCF_CTR_drop_duplicate), 1u);
}
