/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * MBCF wire format, version 2.  Normative text: docs/protocol.md section 2.
 *
 * A frame is an Ethernet II frame with EtherType 0x88B5 whose payload is
 * the MBCF header followed by the operation's data.  The Ethernet header is
 * the environment's business; everything below counts from the first byte
 * after it.  All multi-byte fields are big-endian (network order).
 *
 * Common header (24 bytes, every frame):
 *
 *   off size field     meaning
 *     0   1  version   MBCF_WIRE_VERSION; anything else is dropped
 *     1   1  opcode    enum mbcf_op; unknown values are dropped
 *     2   1  flags     MBCF_F_*; unknown bits must be 0
 *     3   1  status    ACK: enum mbcf_status.  WRITE: run, how many
 *                      frames right before this one are WRITE frames
 *                      (WRITE, WRITE_IMM) under the same rkey, at most 255
 *                      (more say 255); at least 1 on a frame after its
 *                      message's FIRST.  A receiver may place the frame
 *                      after a gap that deep (5.1).  0 on other opcodes.
 *     4   4  dst_qpn   destination QP number (24 bits; top byte 0)
 *     8   4  src_qpn   source QP number (24 bits; top byte 0)
 *    12   4  psn       sequence number of this frame in the sender's stream
 *                      (24 bits; top byte 0).  On control frames: the
 *                      sender's next sequence number, checked by the
 *                      receiver against its own state (6.4).
 *    16   4  ack_psn   cumulative acknowledgement of the reverse stream: every
 *                      frame before ack_psn was accepted (24 bits; top byte 0).
 *                      Valid on every frame (piggy-backed acks).
 *    20   2  paylen    bytes of data after the opcode's extension header
 *    22   2  reserved  0
 *
 * Extension header (after the common header, fixed size per opcode):
 *
 *   WRITE       24 va(8) 32 rkey(4)                               = 36
 *   WRITE_IMM   24 va(8) 32 rkey(4) 36 imm(4) 40 total_len(4)     = 44
 *   READ_REQ    24 va(8) 32 rkey(4) 36 length(4)                  = 40
 *   READ_RESP   24 offset(4) 28 req_psn(4)                        = 32
 *   CMP_SWAP    24 va(8) 32 rkey(4) 36 rsvd(4) 40 swap(8) 48 cmp(8) = 56
 *   FETCH_ADD   24 va(8) 32 rkey(4) 36 rsvd(4) 40 add(8)          = 48
 *   ATOMIC_RESP 24 req_psn(4) 28 rsvd(4) 32 orig(8)               = 40
 *   SEND        24 offset(4)                                      = 28
 *   SEND_IMM    24 offset(4) 28 imm(4)                            = 32
 *   SEND_INV    24 offset(4) 28 inv_rkey(4)                       = 32
 *   FIFO_PUSH   24 fkey(4)                                        = 28
 *   LOST        24 seen(4) 28 rsvd(4) 32 placed(32)               = 64
 *   ACK STOP GO (none)                                            = 24
 *   DGRAM       24 qkey(4) 28 imm(4) 32 vtf(4) 36 hop_limit(1)
 *               37 rsvd(3) 40 sgid(16) 56 dgid(16)                = 72
 *
 * va: 64-bit target virtual address of this frame's first data byte.
 * offset: byte offset of this frame's data within its message.
 * imm: immediate data, opaque 32 bits delivered to the receive completion.
 * total_len: length of the whole WRITE_IMM message (for byte_len).
 * req_psn: psn of the READ_REQ / atomic request this frame answers.
 * inv_rkey: the key the responder invalidates when the message completes.
 * fkey: the FIFO a FIFO_PUSH appends its record to (one frame: FIRST|LAST).
 * DGRAM (unsequenced: psn and ack_psn are 0): qkey, the immediate (valid with
 * MBCF_F_IMM), and what the receiver puts in the 40-byte GRH in front of the
 * data -- vtf (6 << 28 | traffic class << 20 | flow label), hop limit, the
 * sender's GID (sgid) and the GID it addressed (dgid).
 * seen (LOST): psn of the frame that found the gap (24 bits).
 * placed (LOST): 256 bits, bit d (bit d % 8 of byte d / 8) set when the
 * frame ack_psn + d was placed early (5.1) by the time seen arrived.
 * rsvd: 0 when sent, ignored when received.
 */
#ifndef MBCF_WIRE_H
#define MBCF_WIRE_H

#include <mbcf/compat.h>

#define MBCF_ETHERTYPE		0x88B5
#define MBCF_WIRE_VERSION	2	/* 2: WRITE carries its run */

#define MBCF_HDR_LEN		24	/* common header */
#define MBCF_HDR_MAX		72	/* largest header (DGRAM) */
#define MBCF_DGRAM_HDR_LEN	72
/* Ethernet minimum payload: shorter frames arrive zero-padded to this. */
#define MBCF_ETH_MIN_PAYLOAD	46
/* Largest paylen the 16-bit field can say; jumbo frames stay below it. */
#define MBCF_MAX_PAYLEN		0xFFFF

#define MBCF_PSN_BITS		24
#define MBCF_PSN_MASK		0x00FFFFFFu
#define MBCF_QPN_MASK		0x00FFFFFFu

/* Common header offsets. */
#define MBCF_OFF_VERSION	0
#define MBCF_OFF_OPCODE		1
#define MBCF_OFF_FLAGS		2
#define MBCF_OFF_STATUS		3
#define MBCF_OFF_RUN		3	/* WRITE */
#define MBCF_RUN_MAX		255
#define MBCF_OFF_DST_QPN	4
#define MBCF_OFF_SRC_QPN	8
#define MBCF_OFF_PSN		12
#define MBCF_OFF_ACK_PSN	16
#define MBCF_OFF_PAYLEN		20
#define MBCF_OFF_EPOCH		22	/* sequenced frames and LOST (4.5) */

/* Extension header offsets (see the table above). */
#define MBCF_OFF_VA		24
#define MBCF_OFF_RKEY		32
#define MBCF_OFF_IMM		36	/* WRITE_IMM */
#define MBCF_OFF_TOTAL_LEN	40	/* WRITE_IMM */
#define MBCF_OFF_LENGTH		36	/* READ_REQ */
#define MBCF_OFF_OFFSET		24	/* READ_RESP, SEND, SEND_IMM */
#define MBCF_OFF_RESP_PSN	28	/* READ_RESP */
#define MBCF_OFF_SEND_IMM	28	/* SEND_IMM */
#define MBCF_OFF_INV_RKEY	28	/* SEND_INV */
#define MBCF_OFF_FKEY		24	/* FIFO_PUSH */
#define MBCF_OFF_OPERAND0	40	/* CMP_SWAP swap, FETCH_ADD add */
#define MBCF_OFF_OPERAND1	48	/* CMP_SWAP compare */
#define MBCF_OFF_AT_REQ_PSN	24	/* ATOMIC_RESP */
#define MBCF_OFF_ORIG		32	/* ATOMIC_RESP */
#define MBCF_OFF_QKEY		24	/* DGRAM */
#define MBCF_OFF_DG_IMM		28	/* DGRAM */
#define MBCF_OFF_VTF		32	/* DGRAM */
#define MBCF_OFF_HOP_LIMIT	36	/* DGRAM */
#define MBCF_OFF_SGID		40	/* DGRAM */
#define MBCF_OFF_DGID		56	/* DGRAM */
#define MBCF_OFF_SEEN		24	/* LOST */
#define MBCF_OFF_PLACED		32	/* LOST */
#define MBCF_LOST_HDR_LEN	64
#define MBCF_PLACED_LEN		32	/* bytes: 256 bits */

/*
 * Opcodes.  1..0x0f are sequenced (they consume a psn in the sender's stream
 * and are delivered in order exactly once); 0x10..0x1f are control frames
 * (not sequenced, may be lost, never retransmitted as such).  DGRAM (0x14)
 * is unsequenced too: a datagram for a UD QP.  Unassigned values are
 * reserved: 0x0c..0x0f for later sequenced operations (memory-based
 * signal), 0x15..0x1f for unsequenced frames.
 */
enum mbcf_op {
	MBCF_OP_WRITE		= 0x01,
	MBCF_OP_WRITE_IMM	= 0x02,
	MBCF_OP_READ_REQ	= 0x03,
	MBCF_OP_READ_RESP	= 0x04,
	MBCF_OP_CMP_SWAP	= 0x05,
	MBCF_OP_FETCH_ADD	= 0x06,
	MBCF_OP_ATOMIC_RESP	= 0x07,
	MBCF_OP_SEND		= 0x08,
	MBCF_OP_SEND_IMM	= 0x09,
	MBCF_OP_SEND_INV	= 0x0a,	/* SEND, then invalidate inv_rkey */
	MBCF_OP_FIFO_PUSH	= 0x0b,	/* one record onto a FIFO (16) */
	MBCF_OP_ACK		= 0x10,
	MBCF_OP_LOST		= 0x11,
	MBCF_OP_STOP		= 0x12,
	MBCF_OP_GO		= 0x13,
	MBCF_OP_DGRAM		= 0x14,	/* a datagram (UD) */
	MBCF_OP_MAX		= 0x20,	/* table size, not an opcode */
};

#define MBCF_OP_CONTROL_MIN	0x10

/* Flags (byte 2). */
#define MBCF_F_ACKREQ		0x01	/* sender asks for an ACK of this frame */
#define MBCF_F_FIRST		0x02	/* first frame of a segmented message */
#define MBCF_F_LAST		0x04	/* last frame of a segmented message */
#define MBCF_F_SOLICITED	0x08	/* SEND(_IMM)/WRITE_IMM: solicited event */
#define MBCF_F_IMM		0x10	/* DGRAM: imm is valid */
#define MBCF_F_ALL		0x1f

/* Status (byte 3 of ACK): the responder's verdict on frame ack_psn. */
enum mbcf_status {
	MBCF_ST_OK			= 0,
	MBCF_ST_REMOTE_ACCESS_ERROR	= 1,	/* key, access flags, bounds */
	MBCF_ST_REMOTE_INVALID_REQUEST	= 2,	/* malformed op, too many reads, overflow */
	MBCF_ST_REMOTE_OP_ERROR		= 3,	/* target failed to carry it out */
	MBCF_ST_MAX			= 3,
};

static inline bool mbcf_wire_op_sequenced(u8 op)
{
	return op != 0 && op < MBCF_OP_CONTROL_MIN;
}

#endif /* MBCF_WIRE_H */
