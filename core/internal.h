/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/* Shared between the core sources only; the environment sees include/mbcf/core.h. */
#ifndef MBCF_CORE_INTERNAL_H
#define MBCF_CORE_INTERNAL_H

#include <mbcf/core.h>
#include <mbcf/seq.h>

/* struct mbcf_msg.flags */
#define MBCF_MSG_RD		0x01	/* started read/atomic, counted in rd_out */
#define MBCF_MSG_GOT_RESP	0x02	/* read/atomic response fully received */
#define MBCF_MSG_SOLICITED	0x04
#define MBCF_MSG_ACKED		0x08	/* every frame acknowledged */
#define MBCF_MSG_FENCE		0x10	/* wait for earlier reads/atomics */
#define MBCF_MSG_FENCE_ALL	0x20	/* wait for every earlier request */
#define MBCF_MSG_QUIET		0x40	/* a WRITE/SEND no one waits for */

/* mbcf_recv handler verdicts besides enum mbcf_status (> 0 = NAK). */
#define MBCF_RX_ACCEPT		0
#define MBCF_RX_RNR		(-1)	/* no receive posted: STOP */
#define MBCF_RX_DROP		(-2)	/* not acceptable, not fatal */
#define MBCF_RX_LOCAL_ERR	(-3)	/* response data has nowhere to go */

static inline struct mbcf_msg *mbcf_msgq_at(const struct mbcf_msgq *r, u32 i)
{
	return &r->m[i & r->mask];
}

/* Piece k of f's payload in *p, *n; false past the last one. */
static inline bool mbcf_frame_piece(const struct mbcf_frame *f, u32 k,
				    const u8 **p, u32 *n)
{
	if (f->payload) {
		*p = f->payload;
		*n = f->paylen;
		return k == 0;
	}
	if (k >= f->niov)
		return false;
	*p = f->iov[k].base;
	*n = f->iov[k].len;
	return true;
}

static inline bool mbcf_op_is_rd(u8 op)
{
	return op == MBCF_OP_READ_REQ || op == MBCF_OP_CMP_SWAP ||
	       op == MBCF_OP_FETCH_ADD;
}

/* The message being sent has frames not yet sent once. */
static inline bool mbcf_send_cur_unfinished(const struct mbcf_conn *c)
{
	return c->cur && mbcf_seq_in(c->snd_max, c->cur->first_psn,
				     c->cur->nframes);
}

/*
 * Nothing to send (send_next_msg would find nothing): no resend, the
 * message being sent is whole, no response or request (local ones
 * included) waiting to start.  A responder's state after each frame it
 * takes in: checked without the burst's frame set-up, as the receive
 * path pays for it per frame.
 */
static inline bool mbcf_send_idle(const struct mbcf_conn *c)
{
	return c->snd_nxt == c->snd_max && !mbcf_send_cur_unfinished(c) &&
	       c->resp.next == c->resp.tail && c->req.next == c->req.tail;
}

/* Something the peer still owes us: acknowledgements or a response. */
static inline bool mbcf_send_waiting(const struct mbcf_conn *c)
{
	return c->snd_una != c->snd_max || c->rd_out;
}

/*
 * The last message that asked for its acknowledgement (6.2, pp_rx_at) has
 * gone unanswered for MBCF_ACK_LAZY_NS: whatever this is, no ping-pong.
 */
static inline bool mbcf_pp_unanswered(const struct mbcf_conn *c, u64 now)
{
	return c->pp_rx_at && now - c->pp_rx_at >= MBCF_ACK_LAZY_NS;
}

/* early.c: frames placed ahead of a gap (docs/protocol.md 5.1) */
bool mbcf_early_has(const struct mbcf_conn *c, u32 d);
bool mbcf_early_place(struct mbcf_conn *c, const struct mbcf_frame *f, u32 d);
int mbcf_early_write(struct mbcf_conn *c, const struct mbcf_frame *f, u32 d);
void mbcf_early_join(struct mbcf_conn *c);
void mbcf_early_map_out(const struct mbcf_conn *c, u8 *placed);
void mbcf_early_map_in(const u8 *placed, u64 *map);

/* conn.c */
void mbcf_conn_enter_error(struct mbcf_conn *c, bool psn_valid, u32 psn,
			   u8 wc_status);
u8 mbcf_conn_wc_from_status(u8 status);

/* send.c: the forward path */
int mbcf_send_enqueue(struct mbcf_conn *c, const struct mbcf_wr *wr);
void mbcf_send_push(struct mbcf_conn *c, u64 now);
void mbcf_send_complete(struct mbcf_conn *c);
void mbcf_send_control(struct mbcf_conn *c, u8 op, u8 status);
void mbcf_send_control_lost(struct mbcf_conn *c, u16 epoch, u32 seen);
void mbcf_send_nak(struct mbcf_conn *c, u32 psn, u8 status);
void mbcf_send_flush(struct mbcf_conn *c, bool psn_valid, u32 psn, u8 wc);
struct mbcf_msg *mbcf_send_respond(struct mbcf_conn *c, u8 op, u32 req_psn,
				    u32 len);
struct mbcf_msg *mbcf_send_pending_rd(struct mbcf_conn *c);
/* ... and what rtx.c uses of it */
struct mbcf_msg *mbcf_send_find(struct mbcf_conn *c, u32 psn);
bool mbcf_send_placed_early(const struct mbcf_msg *m, u32 i, u32 d);
bool mbcf_send_was_placed(const struct mbcf_msg *m, u32 i, u32 d, u32 psn,
			  u32 seen, const u64 *map);
u32 mbcf_send_frame_bytes(const struct mbcf_conn *c, const struct mbcf_msg *m,
			  u32 i);
int mbcf_send_frame(struct mbcf_conn *c, const struct mbcf_msg *m, u32 i,
		    u8 flags);
void mbcf_send_fault(struct mbcf_conn *c, const struct mbcf_msg *m, u32 psn);
void mbcf_send_tlp_arm(struct mbcf_conn *c, u64 now);
void mbcf_send_control_flags(struct mbcf_conn *c, u8 op, u8 status, u8 flags,
			     u32 ack_psn, u16 epoch);

/* rtx.c: acknowledgement, loss and retransmission; send.c never calls it */
bool mbcf_send_ack(struct mbcf_conn *c, u32 ack_psn, u64 now);
bool mbcf_send_ack_ours(const struct mbcf_conn *c, u32 ack_psn);
bool mbcf_send_lost_ok(const struct mbcf_conn *c, const struct mbcf_frame *f);
void mbcf_send_alive(struct mbcf_conn *c, u64 now);
void mbcf_send_lost(struct mbcf_conn *c, u32 psn, u16 epoch, u32 seen,
		    const u8 *placed);
void mbcf_send_stop(struct mbcf_conn *c, u32 psn, u64 now);
void mbcf_send_refused(struct mbcf_conn *c, u32 psn, u16 epoch, u64 now);
void mbcf_send_go(struct mbcf_conn *c, u32 psn, u64 now);
void mbcf_send_timeout(struct mbcf_conn *c, u64 now);

/* recv.c */
void mbcf_recv_frame(struct mbcf_conn *c, const struct mbcf_frame *f, u64 now);
void mbcf_recv_posted(struct mbcf_conn *c);
void mbcf_recv_flush(struct mbcf_conn *c);
void mbcf_recv_nak_now(struct mbcf_conn *c);

#endif /* MBCF_CORE_INTERNAL_H */
