// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Frame codec: parse and build the MBCF header (docs/protocol.md section 2).
 * Every field is validated here, before any other code sees the frame.
 */
#include <mbcf/core.h>

enum codec_payload {
	PL_NONE,	/* paylen must be 0 */
	PL_DATA,	/* any paylen */
};

struct codec_op {
	const char *name;
	u8 hdr_len;
	u8 payload;	/* enum codec_payload */
	u8 flags;	/* flags allowed */
	bool epoch;	/* may carry a go-back round: sequenced frames, LOST */
};

#define SEG_FLAGS (MBCF_F_ACKREQ | MBCF_F_FIRST | MBCF_F_LAST)

static const struct codec_op codec_ops[MBCF_OP_MAX] = {
	[MBCF_OP_WRITE]	      = { "WRITE", 36, PL_DATA, SEG_FLAGS, true },
	[MBCF_OP_WRITE_IMM]   = { "WRITE_IMM", 44, PL_DATA,
				  SEG_FLAGS | MBCF_F_SOLICITED, true },
	[MBCF_OP_READ_REQ]    = { "READ_REQ", 40, PL_NONE, MBCF_F_ACKREQ, true },
	[MBCF_OP_READ_RESP]   = { "READ_RESP", 32, PL_DATA, SEG_FLAGS, true },
	[MBCF_OP_CMP_SWAP]    = { "CMP_SWAP", 56, PL_NONE, MBCF_F_ACKREQ, true },
	[MBCF_OP_FETCH_ADD]   = { "FETCH_ADD", 48, PL_NONE, MBCF_F_ACKREQ, true },
	[MBCF_OP_ATOMIC_RESP] = { "ATOMIC_RESP", 40, PL_NONE,
				  MBCF_F_ACKREQ, true },
	[MBCF_OP_SEND]	      = { "SEND", 28, PL_DATA,
				  SEG_FLAGS | MBCF_F_SOLICITED, true },
	[MBCF_OP_SEND_IMM]    = { "SEND_IMM", 32, PL_DATA,
				  SEG_FLAGS | MBCF_F_SOLICITED, true },
	[MBCF_OP_SEND_INV]    = { "SEND_INV", 32, PL_DATA,
				  SEG_FLAGS | MBCF_F_SOLICITED, true },
	[MBCF_OP_FIFO_PUSH]   = { "FIFO_PUSH", 28, PL_DATA, SEG_FLAGS, true },
	[MBCF_OP_ACK]	      = { "ACK", 24, PL_NONE, MBCF_F_ACKREQ, false },
	[MBCF_OP_LOST]	      = { "LOST", MBCF_LOST_HDR_LEN, PL_NONE,
				  MBCF_F_ACKREQ, true },
	[MBCF_OP_STOP]	      = { "STOP", 24, PL_NONE, MBCF_F_ACKREQ, false },
	[MBCF_OP_GO]	      = { "GO", 24, PL_NONE, MBCF_F_ACKREQ, false },
	[MBCF_OP_DGRAM]	      = { "DGRAM", MBCF_DGRAM_HDR_LEN, PL_DATA,
				  MBCF_F_ACKREQ | MBCF_F_SOLICITED | MBCF_F_IMM,
				  false },
};

static const struct codec_op *codec_op(u8 op)
{
	if (op >= MBCF_OP_MAX || !codec_ops[op].name)
		return NULL;
	return &codec_ops[op];
}

u32 mbcf_codec_hdr_len(u8 op)
{
	const struct codec_op *o = codec_op(op);

	return o ? o->hdr_len : 0;
}

const char *mbcf_codec_op_name(u8 op)
{
	const struct codec_op *o = codec_op(op);

	return o ? o->name : "UNKNOWN";
}

/* Largest paylen of one frame of `op` when mtu bytes follow Ethernet. */
u32 mbcf_codec_max_payload(u32 mtu, u8 op)
{
	u32 hl = mbcf_codec_hdr_len(op);
	u32 room;

	if (!hl || mtu <= hl)
		return 0;
	room = mtu - hl;
	return room > MBCF_MAX_PAYLEN ? MBCF_MAX_PAYLEN : room;
}

/*
 * Every field of *f that parsing may leave unset, zeroed one by one: a
 * memset of the whole struct (~130 bytes) compiles to `rep stos`, whose
 * start-up alone cost a quarter of parsing a frame (bench/core).
 */
static void codec_frame_clear(struct mbcf_frame *f)
{
	f->va = 0;
	f->rkey = 0;
	f->imm = 0;
	f->len = 0;
	f->offset = 0;
	f->req_psn = 0;
	f->operand[0] = 0;
	f->operand[1] = 0;
	f->payload = NULL;
	f->iov = NULL;
	f->niov = 0;
	f->vtf = 0;
	f->hop_limit = 0;
	f->sgid = NULL;
	f->dgid = NULL;
	f->seen = 0;
	f->placed = NULL;
	f->run = 0;
}

/*
 * The opcode's own fields, decoded and checked in one pass (the parse of
 * every received frame: bench/core measures it).  Ranges that do not
 * depend on connection state: lengths and offsets within a message,
 * address ranges that do not wrap, psn fields of 24 bits, a datagram's
 * empty sequence fields.
 */
static bool codec_parse_ext(const u8 *b, struct mbcf_frame *f)
{
	switch (f->op) {
	case MBCF_OP_WRITE_IMM:
		f->imm = mbcf_get_be32(b + MBCF_OFF_IMM);
		f->len = mbcf_get_be32(b + MBCF_OFF_TOTAL_LEN);
		if (f->len > MBCF_MSG_MAX || f->paylen > f->len)
			return false;
		mbcf_fallthrough;
	case MBCF_OP_WRITE:
		f->va = mbcf_get_be64(b + MBCF_OFF_VA);
		f->rkey = mbcf_get_be32(b + MBCF_OFF_RKEY);
		return f->va + f->paylen >= f->va;
	case MBCF_OP_READ_REQ:
		f->va = mbcf_get_be64(b + MBCF_OFF_VA);
		f->rkey = mbcf_get_be32(b + MBCF_OFF_RKEY);
		f->len = mbcf_get_be32(b + MBCF_OFF_LENGTH);
		return f->va + f->len >= f->va && f->len <= MBCF_MSG_MAX;
	case MBCF_OP_READ_RESP:
		f->offset = mbcf_get_be32(b + MBCF_OFF_OFFSET);
		f->req_psn = mbcf_get_be32(b + MBCF_OFF_RESP_PSN);
		return !(f->req_psn & ~MBCF_PSN_MASK) &&
		       (u64)f->offset + f->paylen <= MBCF_MSG_MAX;
	case MBCF_OP_CMP_SWAP:
		f->operand[1] = mbcf_get_be64(b + MBCF_OFF_OPERAND1);
		mbcf_fallthrough;
	case MBCF_OP_FETCH_ADD:
		f->va = mbcf_get_be64(b + MBCF_OFF_VA);
		f->rkey = mbcf_get_be32(b + MBCF_OFF_RKEY);
		f->operand[0] = mbcf_get_be64(b + MBCF_OFF_OPERAND0);
		return true;
	case MBCF_OP_ATOMIC_RESP:
		f->req_psn = mbcf_get_be32(b + MBCF_OFF_AT_REQ_PSN);
		f->operand[0] = mbcf_get_be64(b + MBCF_OFF_ORIG);
		return !(f->req_psn & ~MBCF_PSN_MASK);
	case MBCF_OP_SEND_INV:
		f->rkey = mbcf_get_be32(b + MBCF_OFF_INV_RKEY);
		f->offset = mbcf_get_be32(b + MBCF_OFF_OFFSET);
		return (u64)f->offset + f->paylen <= MBCF_MSG_MAX;
	case MBCF_OP_FIFO_PUSH:
		/* a record is one frame (16.3) */
		f->rkey = mbcf_get_be32(b + MBCF_OFF_FKEY);
		return (f->flags & (MBCF_F_FIRST | MBCF_F_LAST)) ==
		       (MBCF_F_FIRST | MBCF_F_LAST);
	case MBCF_OP_LOST:
		f->seen = mbcf_get_be32(b + MBCF_OFF_SEEN);
		f->placed = b + MBCF_OFF_PLACED;
		return !(f->seen & ~MBCF_PSN_MASK);
	case MBCF_OP_DGRAM:
		f->rkey = mbcf_get_be32(b + MBCF_OFF_QKEY);
		f->imm = mbcf_get_be32(b + MBCF_OFF_DG_IMM);
		f->vtf = mbcf_get_be32(b + MBCF_OFF_VTF);
		f->hop_limit = b[MBCF_OFF_HOP_LIMIT];
		f->sgid = b + MBCF_OFF_SGID;
		f->dgid = b + MBCF_OFF_DGID;
		/* unsequenced: nothing in its sequence fields */
		return !f->psn && !f->ack_psn && f->vtf >> 28 == 6;
	case MBCF_OP_SEND_IMM:
		f->imm = mbcf_get_be32(b + MBCF_OFF_SEND_IMM);
		mbcf_fallthrough;
	case MBCF_OP_SEND:
		f->offset = mbcf_get_be32(b + MBCF_OFF_OFFSET);
		return (u64)f->offset + f->paylen <= MBCF_MSG_MAX;
	default:
		return true;
	}
}

/* A verdict, counted (out of line: the frames that pass are the hot path). */
static mbcf_noinline int codec_count(struct mbcf_counters *ctr, int err)
{
	if (!ctr)
		return err;
	switch (err) {
	case MBCF_PARSE_TRUNCATED:
		ctr->drop_truncated++;
		break;
	case MBCF_PARSE_BAD_VERSION:
		ctr->drop_bad_version++;
		break;
	case MBCF_PARSE_BAD_OPCODE:
		ctr->drop_bad_opcode++;
		break;
	case MBCF_PARSE_BAD_LENGTH:
		ctr->drop_bad_length++;
		break;
	default:
		ctr->drop_malformed++;
		break;
	}
	return err;
}

/*
 * Validate and decode one frame (the bytes after the Ethernet header).
 * Returns MBCF_PARSE_OK and fills *f, or a negative verdict, counted in
 * *ctr (may be NULL).  Nothing in *f may be used after a failure.
 */
int mbcf_codec_parse(const u8 *buf, u32 len, struct mbcf_frame *f,
		     struct mbcf_counters *ctr)
{
	return mbcf_codec_parse_split(buf, len, len, f, ctr);
}

int mbcf_codec_parse_split(const u8 *buf, u32 avail, u32 len,
			   struct mbcf_frame *f, struct mbcf_counters *ctr)
{
	const struct codec_op *o;
	u32 want;

	if (avail > len)
		avail = len;
	if (unlikely(avail < MBCF_HDR_LEN))
		return codec_count(ctr, MBCF_PARSE_TRUNCATED);
	if (unlikely(buf[MBCF_OFF_VERSION] != MBCF_WIRE_VERSION))
		return codec_count(ctr, MBCF_PARSE_BAD_VERSION);
	o = codec_op(buf[MBCF_OFF_OPCODE]);
	if (unlikely(!o))
		return codec_count(ctr, MBCF_PARSE_BAD_OPCODE);
	if (unlikely(avail < o->hdr_len))
		return codec_count(ctr, MBCF_PARSE_TRUNCATED);

	codec_frame_clear(f);
	f->op = buf[MBCF_OFF_OPCODE];
	f->flags = buf[MBCF_OFF_FLAGS];
	f->status = buf[MBCF_OFF_STATUS];
	if (f->op == MBCF_OP_WRITE) {
		/* byte 3 of a WRITE is its run (5.1) */
		f->run = f->status;
		f->status = 0;
	}
	f->dst_qpn = mbcf_get_be32(buf + MBCF_OFF_DST_QPN);
	f->src_qpn = mbcf_get_be32(buf + MBCF_OFF_SRC_QPN);
	f->psn = mbcf_get_be32(buf + MBCF_OFF_PSN);
	f->ack_psn = mbcf_get_be32(buf + MBCF_OFF_ACK_PSN);
	f->paylen = mbcf_get_be16(buf + MBCF_OFF_PAYLEN);
	f->epoch = mbcf_get_be16(buf + MBCF_OFF_EPOCH);
	f->hdr_len = o->hdr_len;

	/* Only frames shorter than the Ethernet minimum may carry padding. */
	want = o->hdr_len + f->paylen;
	if (unlikely(len < want))
		return codec_count(ctr, MBCF_PARSE_TRUNCATED);
	if (unlikely((len > want && len > MBCF_ETH_MIN_PAYLOAD) ||
		     (o->payload == PL_NONE && f->paylen)))
		return codec_count(ctr, MBCF_PARSE_BAD_LENGTH);
	/* Fields every opcode has: 24-bit QP and sequence numbers, the
	 * opcode's flags, a go-back round on sequenced frames and LOST only,
	 * a status on ACK only, a run of at least 1 on a WRITE after FIRST. */
	if (unlikely(((f->dst_qpn | f->src_qpn | f->psn | f->ack_psn) &
		      ~MBCF_PSN_MASK) || (f->flags & ~o->flags) ||
		     (f->epoch && !o->epoch) ||
		     (f->status && (f->op != MBCF_OP_ACK ||
				    f->status > MBCF_ST_MAX)) ||
		     (f->op == MBCF_OP_WRITE && !(f->flags & MBCF_F_FIRST) &&
		      !f->run) ||
		     !codec_parse_ext(buf, f)))
		return codec_count(ctr, MBCF_PARSE_MALFORMED);
	/* Not contiguous with the header: the caller supplies it. */
	f->payload = avail >= want ? buf + o->hdr_len : NULL;
	return MBCF_PARSE_OK;
}

static void codec_build_ext(const struct mbcf_frame *f, u8 *b)
{
	switch (f->op) {
	case MBCF_OP_WRITE_IMM:
		mbcf_put_be32(b + MBCF_OFF_IMM, f->imm);
		mbcf_put_be32(b + MBCF_OFF_TOTAL_LEN, f->len);
		mbcf_fallthrough;
	case MBCF_OP_WRITE:
		mbcf_put_be64(b + MBCF_OFF_VA, f->va);
		mbcf_put_be32(b + MBCF_OFF_RKEY, f->rkey);
		break;
	case MBCF_OP_READ_REQ:
		mbcf_put_be64(b + MBCF_OFF_VA, f->va);
		mbcf_put_be32(b + MBCF_OFF_RKEY, f->rkey);
		mbcf_put_be32(b + MBCF_OFF_LENGTH, f->len);
		break;
	case MBCF_OP_READ_RESP:
		mbcf_put_be32(b + MBCF_OFF_OFFSET, f->offset);
		mbcf_put_be32(b + MBCF_OFF_RESP_PSN, f->req_psn);
		break;
	case MBCF_OP_CMP_SWAP:
		mbcf_put_be64(b + MBCF_OFF_OPERAND1, f->operand[1]);
		mbcf_fallthrough;
	case MBCF_OP_FETCH_ADD:
		mbcf_put_be64(b + MBCF_OFF_VA, f->va);
		mbcf_put_be32(b + MBCF_OFF_RKEY, f->rkey);
		mbcf_put_be32(b + MBCF_OFF_RKEY + 4, 0);
		mbcf_put_be64(b + MBCF_OFF_OPERAND0, f->operand[0]);
		break;
	case MBCF_OP_ATOMIC_RESP:
		mbcf_put_be32(b + MBCF_OFF_AT_REQ_PSN, f->req_psn);
		mbcf_put_be32(b + MBCF_OFF_AT_REQ_PSN + 4, 0);
		mbcf_put_be64(b + MBCF_OFF_ORIG, f->operand[0]);
		break;
	case MBCF_OP_SEND_INV:
		mbcf_put_be32(b + MBCF_OFF_INV_RKEY, f->rkey);
		mbcf_put_be32(b + MBCF_OFF_OFFSET, f->offset);
		break;
	case MBCF_OP_FIFO_PUSH:
		mbcf_put_be32(b + MBCF_OFF_FKEY, f->rkey);
		break;
	case MBCF_OP_LOST:
		mbcf_put_be32(b + MBCF_OFF_SEEN, f->seen & MBCF_PSN_MASK);
		mbcf_put_be32(b + MBCF_OFF_SEEN + 4, 0);
		if (f->placed)
			memcpy(b + MBCF_OFF_PLACED, f->placed, MBCF_PLACED_LEN);
		else
			memset(b + MBCF_OFF_PLACED, 0, MBCF_PLACED_LEN);
		break;
	case MBCF_OP_DGRAM:
		mbcf_put_be32(b + MBCF_OFF_QKEY, f->rkey);
		mbcf_put_be32(b + MBCF_OFF_DG_IMM, f->imm);
		mbcf_put_be32(b + MBCF_OFF_VTF, f->vtf);
		b[MBCF_OFF_HOP_LIMIT] = f->hop_limit;
		memset(b + MBCF_OFF_HOP_LIMIT + 1, 0, 3);
		memcpy(b + MBCF_OFF_SGID, f->sgid, 16);
		memcpy(b + MBCF_OFF_DGID, f->dgid, 16);
		break;
	case MBCF_OP_SEND_IMM:
		mbcf_put_be32(b + MBCF_OFF_SEND_IMM, f->imm);
		mbcf_fallthrough;
	case MBCF_OP_SEND:
		mbcf_put_be32(b + MBCF_OFF_OFFSET, f->offset);
		break;
	default:
		break;
	}
}

/*
 * Write the header for *f into hdr (MBCF_HDR_MAX bytes of room); returns its
 * length, 0 for an unknown opcode.  The payload (f->paylen bytes) is the
 * environment's to append; f->payload is not read.
 */
u32 mbcf_codec_build(const struct mbcf_frame *f, u8 *hdr)
{
	const struct codec_op *o = codec_op(f->op);

	if (!o)
		return 0;
	hdr[MBCF_OFF_VERSION] = MBCF_WIRE_VERSION;
	hdr[MBCF_OFF_OPCODE] = f->op;
	hdr[MBCF_OFF_FLAGS] = f->flags;
	hdr[MBCF_OFF_STATUS] = f->op == MBCF_OP_WRITE ? f->run : f->status;
	mbcf_put_be32(hdr + MBCF_OFF_DST_QPN, f->dst_qpn & MBCF_QPN_MASK);
	mbcf_put_be32(hdr + MBCF_OFF_SRC_QPN, f->src_qpn & MBCF_QPN_MASK);
	mbcf_put_be32(hdr + MBCF_OFF_PSN, f->psn & MBCF_PSN_MASK);
	mbcf_put_be32(hdr + MBCF_OFF_ACK_PSN, f->ack_psn & MBCF_PSN_MASK);
	mbcf_put_be16(hdr + MBCF_OFF_PAYLEN, (u16)f->paylen);
	mbcf_put_be16(hdr + MBCF_OFF_EPOCH, f->epoch);
	codec_build_ext(f, hdr);
	return o->hdr_len;
}
