/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * The sans-I/O MBCF protocol core: public API.  docs/protocol.md is the
 * normative description; section numbers below refer to it.
 *
 * One struct mbcf_conn is one end of a reliable connection (an RC QP).  The
 * core does no I/O and owns no locks, allocators or clocks:
 *   - frames come in as bytes (mbcf_codec_parse + mbcf_conn_rx);
 *   - everything it wants done goes out through struct mbcf_ops;
 *   - the caller provides all memory (the conn and its two message rings)
 *     and serialises every call on one conn (the kernel's per-QP lock);
 *   - time is a u64 in nanoseconds passed in by the caller (`now`).
 * Callbacks are invoked synchronously from inside the API calls, with the
 * caller's lock held; they must not call back into the same conn.
 */
#ifndef MBCF_CORE_H
#define MBCF_CORE_H

#include <mbcf/compat.h>
#include <mbcf/wire.h>
#include <mbcf/counters.h>

struct mbcf_fifo;	/* include/mbcf/fifo.h */

/* Completion status (mapped 1:1 onto enum ib_wc_status by the module). */
enum mbcf_wc_status {
	MBCF_WC_SUCCESS = 0,
	MBCF_WC_REM_ACCESS_ERR,		/* responder: MBCF_ST_REMOTE_ACCESS_ERROR */
	MBCF_WC_REM_INV_REQ_ERR,	/* responder: MBCF_ST_REMOTE_INVALID_REQUEST */
	MBCF_WC_REM_OP_ERR,		/* responder: MBCF_ST_REMOTE_OP_ERROR */
	MBCF_WC_RETRY_EXC_ERR,		/* retry_cnt timeouts without progress */
	MBCF_WC_RNR_RETRY_EXC_ERR,	/* rnr_retry STOPs without progress */
	MBCF_WC_LOC_LEN_ERR,		/* receive: message longer than the buffer */
	MBCF_WC_LOC_PROT_ERR,		/* local buffer rejected read/atomic data */
	MBCF_WC_WR_FLUSH_ERR,		/* connection went to error first */
	MBCF_WC_MW_BIND_ERR,		/* a local memory window bind failed */
	MBCF_WC_LOC_QP_OP_ERR,		/* a local operation failed (invalidate) */
};

/* Connection state (docs/protocol.md section 8). */
enum mbcf_conn_state {
	MBCF_CONN_RESET = 0,	/* not initialised / after mbcf_conn_flush */
	MBCF_CONN_RTS,		/* connected: sends and receives */
	MBCF_CONN_ERROR,	/* fatal error seen: executes nothing more */
};

/* What the environment gathers a frame's data from (no copies in the core). */
enum mbcf_payload_kind {
	MBCF_PL_NONE = 0,	/* header only */
	MBCF_PL_WR,		/* the posted work request's local buffer */
	MBCF_PL_TARGET,		/* registered target memory (read response) */
};

struct mbcf_payload {
	u8 kind;		/* enum mbcf_payload_kind */
	u32 len;		/* bytes to append after the header */
	u32 offset;		/* MBCF_PL_WR: byte offset within the message */
	u64 cookie;		/* MBCF_PL_WR: the wr's cookie */
	u64 va;			/* MBCF_PL_TARGET: address of the first byte */
	u32 rkey;		/* MBCF_PL_TARGET: key it was checked against */
};

/*
 * mbcf_wr.flags: verbs IBV_SEND_FENCE.  The message does not start before
 * every earlier read/atomic has completed: a read response may be rebuilt
 * from target memory on retransmission, so an unfenced later write to the
 * same bytes may show through (as in InfiniBand).
 */
#define MBCF_WR_FENCE		0x80
/* ... and before every earlier request completed (a local invalidate:
 * IBA 10.6.5.1, the local invalidate fence). */
#define MBCF_WR_FENCE_ALL	0x40
/*
 * ... no one waits for its completion (verbs: unsignaled): a WRITE or SEND
 * that ends a burst asks for no acknowledgement of its own (docs/
 * protocol.md 6.1 rule 3): the next frame that asks, or any of the peer's,
 * acknowledges it, and if none comes the tail probe asks (7.6).  An error
 * completes it all the same.
 */
#define MBCF_WR_QUIET		0x20

/*
 * mbcf_wr.op of a request carried out locally, with no frame: a memory
 * window bind or a local invalidate.  Never on the wire.  The core calls
 * ops->local when its turn comes (every earlier request started, or with
 * MBCF_WR_FENCE_ALL completed) and completes it in posting order with the
 * status that returned (docs/protocol.md 4.2).
 */
#define MBCF_OP_LOCAL		0xff

/* A requester operation: one verbs send work request. */
struct mbcf_wr {
	u64 cookie;		/* opaque to the core (the kernel's wqe) */
	u8 op;			/* WRITE, WRITE_IMM, READ_REQ, CMP_SWAP, FETCH_ADD,
				 * SEND, SEND_IMM, SEND_INV, FIFO_PUSH (one
				 * frame at most), MBCF_OP_LOCAL */
	u8 flags;		/* MBCF_F_SOLICITED, MBCF_WR_FENCE(_ALL),
				 * MBCF_WR_QUIET */
	u32 len;		/* data bytes (8 for atomics, ignored) */
	u64 raddr;		/* remote va: WRITE*, READ_REQ, atomics */
	u32 rkey;		/* FIFO_PUSH: the FIFO's key */
	u32 imm;		/* *_IMM: immediate data (opaque, host order);
				 * SEND_INV: the key the responder invalidates */
	u64 swap_add;		/* CMP_SWAP: swap; FETCH_ADD: add */
	u64 compare;		/* CMP_SWAP */
};

#define MBCF_CQE_RECV		0x01	/* receive side (else requester) */
#define MBCF_CQE_IMM		0x02	/* imm is valid */
#define MBCF_CQE_SOLICITED	0x04
#define MBCF_CQE_INV		0x08	/* SEND_INV: imm is the key invalidated */
#define MBCF_CQE_GRH		0x10	/* datagram: a 40-byte GRH leads the data */

struct mbcf_cqe {
	u64 cookie;		/* requester: wr cookie; receive: claimed recv */
	u32 byte_len;		/* message length (receive: bytes received) */
	u32 imm;
	u32 src_qpn;		/* receive, datagram: the sender's QP */
	u8 op;			/* message opcode (SEND, WRITE_IMM, READ_REQ...) */
	u8 status;		/* enum mbcf_wc_status */
	u8 flags;		/* MBCF_CQE_* */
};

/* recv_claim results. */
enum mbcf_claim {
	MBCF_CLAIM_OK = 0,	/* *cookie and *cap are set */
	MBCF_CLAIM_NONE = 1,	/* no receive posted: the core sends STOP */
	MBCF_CLAIM_BAD = 2,	/* the receive queue is unusable (a malformed
				 * receive request): REMOTE_OP_ERROR */
};

/* ops->xmit: the request's local buffer cannot be read (see there). */
#define MBCF_XMIT_FAULT		(-2)

/*
 * Everything the core asks of its environment.  `env` is the pointer given
 * to mbcf_conn_init.  Every callback that can fail returns a status, and the
 * core acts on it.  Target callbacks return an enum mbcf_status and must
 * check key, PD, access flags and bounds BEFORE touching any byte.
 */
struct mbcf_ops {
	/*
	 * Transmit header + payload as one frame: 0 = sent (or dropped, like
	 * a lost frame); MBCF_XMIT_FAULT = the payload could not be read,
	 * nothing sent, and the connection enters ERROR: of a request
	 * (MBCF_PL_WR), its local memory is gone and the request completes
	 * with MBCF_WC_LOC_PROT_ERR; of a read response (MBCF_PL_TARGET),
	 * the target memory is gone and the core NAKs the read request with
	 * REMOTE_ACCESS_ERROR (docs/protocol.md 8.3); any other nonzero =
	 * busy, nothing sent.
	 * Busy holds sequenced frames back until mbcf_conn_kick()
	 * (docs/protocol.md 7.4); a control frame refused as busy is dropped,
	 * so an environment that bounds its bursts should refuse only
	 * sequenced frames.
	 */
	int (*xmit)(void *env, const u8 *hdr, u32 hdr_len,
		    const struct mbcf_payload *pl);
	/* Optional: end of a burst of xmit calls (ring the doorbell). */
	void (*xmit_flush)(void *env);
	/* Write len bytes at (rkey, va); needs REMOTE_WRITE access. */
	int (*target_write)(void *env, u32 rkey, u64 va, const u8 *src, u32 len);
	/* Check that (rkey, va, len) may be written (REMOTE_WRITE); touches
	 * nothing.  Called before a payload in pieces is written piece by
	 * piece, so that a frame that fails leaves no byte behind. */
	int (*target_check_write)(void *env, u32 rkey, u64 va, u32 len);
	/* Check that (rkey, va, len) may be read (REMOTE_READ); touches nothing. */
	int (*target_check_read)(void *env, u32 rkey, u64 va, u32 len);
	/* 8-byte aligned atomic (REMOTE_ATOMIC) with a real atomic instruction;
	 * op is CMP_SWAP or FETCH_ADD; *orig gets the previous value. */
	int (*target_atomic)(void *env, u8 op, u32 rkey, u64 va, u64 swap_add,
			     u64 compare, u64 *orig);
	/* Take the oldest posted receive: an enum mbcf_claim. */
	int (*recv_claim)(void *env, u64 *cookie, u32 *cap);
	/*
	 * Datagrams (docs/protocol.md 15): the cap of the receive recv_claim
	 * would take next, without taking it: an enum mbcf_claim.  A datagram
	 * it cannot hold is dropped and the receive stays posted.  Optional:
	 * without it such a datagram consumes the receive (LOC_LEN_ERR), and
	 * a consumer that does not repost it (the MAD layer) runs dry.
	 */
	int (*recv_peek)(void *env, u32 *cap);
	/* Copy into a claimed receive at byte offset (within cap, checked):
	 * 0, or nonzero = local protection error (the receive completes with
	 * LOC_PROT_ERR and the message is NAKed with REMOTE_OP_ERROR). */
	int (*recv_write)(void *env, u64 cookie, u32 offset, const u8 *src, u32 len);
	/* Deliver read (or atomic: 8 bytes, host order) response data into the
	 * requester's local buffer of wr `cookie`; nonzero = local protection
	 * error. */
	int (*resp_data)(void *env, u64 cookie, u32 offset, const u8 *src, u32 len);
	/* Post a completion (requester or receive side): 0, or nonzero when it
	 * could not be delivered (completion queue overrun): the connection
	 * then enters ERROR. */
	int (*complete)(void *env, const struct mbcf_cqe *cqe);
	/* Arm the connection's single timer at absolute time `at` ns (0 =
	 * cancel).  When it fires, call mbcf_conn_timeout(). */
	void (*timer)(void *env, u64 at);
	/* The connection entered MBCF_CONN_ERROR (verbs: QP error event). */
	void (*error)(void *env, u8 wc_status);
	/* Carry out the MBCF_OP_LOCAL request `cookie` now: an enum
	 * mbcf_wc_status (its completion's). */
	int (*local)(void *env, u64 cookie);
	/* Responder, SEND_INV: invalidate rkey (a memory window bound to this
	 * connection): MBCF_ST_OK, or MBCF_ST_REMOTE_INVALID_REQUEST. */
	int (*invalidate)(void *env, u32 rkey);
	/*
	 * Responder, FIFO_PUSH (docs/protocol.md 16): the FIFO of key fkey
	 * this connection may push to (its PD, push access), into *f, held
	 * until fifo_put: MBCF_FIFO_OK, or MBCF_FIFO_BAD_KEY.  The core then
	 * appends with mbcf_fifo_push(); a FIFO without room STOPs the peer,
	 * and the environment calls mbcf_conn_recv_posted() (which sends the
	 * GO) when the owner rings the FIFO's doorbell.  Optional: without
	 * it no key names a FIFO.
	 */
	int (*fifo_get)(void *env, u32 fkey, struct mbcf_fifo *f);
	void (*fifo_put)(void *env, struct mbcf_fifo *f);
};

struct mbcf_conn_cfg {
	u32 local_qpn, remote_qpn;	/* 24-bit */
	u32 sq_psn;			/* first psn we send */
	u32 rq_psn;			/* first psn we expect */
	u32 mtu;			/* bytes after the Ethernet header (>= 512) */
	u32 window;			/* send-ahead frames; 0 = from link speed */
	bool window_fixed;		/* never adapt it to loss (4.3) */
	u32 link_mbps;			/* for window == 0; 0 = 1000 */
	u32 ack_interval;		/* N: ask for an ACK every N frames; 0 = as
					 * the window needs (half window, at most
					 * MBCF_ACK_EVERY_MAX; burst end) */
	u8 retry_cnt;			/* verbs retry_cnt, 0..7 */
	u8 rnr_retry;			/* verbs rnr_retry, 0..7 (7 = infinite) */
	u32 max_rd_atomic;		/* our outstanding reads/atomics (>= 1) */
	u32 max_dest_rd_atomic;		/* peer's, i.e. response ring slots used */
	u64 rto_ns;			/* first retransmit timeout */
	u64 rto_max_ns;			/* backoff ceiling (0 = 64 * rto_ns) */
	u64 min_rnr_ns;			/* verbs min_rnr_timer, in ns */
	bool uc;			/* unreliable connection (verbs UC): no
					 * acknowledgement, no retransmission;
					 * a lost frame loses its message (10) */
	u32 frame_overhead;		/* bytes each frame carries besides what
					 * the core builds (the Ethernet header):
					 * what pacing counts on the wire */
	u64 timer_slack_ns;		/* how late the environment's timer may
					 * fire: a deadline that must come after
					 * the peer's timer allows for it (6.2) */
	struct mbcf_rtt_share *rtt_share;	/* the device's round trip,
						 * shared by its connections
						 * (7.1); NULL: none */
};

/*
 * The round trip the connections of one device measure (docs/protocol.md
 * 7.1): a connection whose own rto is shorter waits this long before it
 * times out, since its frames wait in the same queues (the device's
 * transmit queue, the peer's receive backlog) as theirs.  Every sample is
 * folded in without a lock; two folded at once may lose one, which an
 * estimate can afford.
 */
struct mbcf_rtt_share {
	u64 srtt, rttvar;	/* ns; srtt 0: no sample yet */
	u64 at;			/* when the last one was folded in */
};

/*
 * A flow's pacing clock (core/pace.c): when its next frame may leave.
 * kbps 0 = unpaced.  The environment owns time; the core only computes.
 */
struct mbcf_pace {
	u64 next;		/* ns (serial, may wrap): next frame's time */
	u32 kbps;		/* rate, 1000 bit/s; 0 = unpaced */
	u32 rem;		/* carried remainder of the last division */
	bool primed;		/* next is valid (a frame was sent at this rate) */
	bool held;		/* a frame waits for the clock: the flow is
				 * backlogged, lateness up to slack_ns is owed */
	u64 slack_ns;		/* the environment's timer lateness made up
				 * for (0: one frame's time) */
};

/* One queued message (requester wr or responder response).  Internal. */
/* Frames after a gap that may be placed early: rcv_nxt + 1 .. + 255 (5.1). */
#define MBCF_EARLY_SPAN		256

struct mbcf_msg {
	u64 cookie;
	u64 raddr;
	u64 operand[2];		/* atomics; ATOMIC_RESP: orig in [0] */
	u32 rkey;
	u32 len;
	u32 imm;
	u32 first_psn;		/* valid once started */
	u32 nframes;
	u32 seg;		/* payload bytes per frame */
	u32 req_psn;		/* responses: psn of the request */
	u32 rcvd;		/* requester read: response bytes received */
	u8 op;
	u8 flags;		/* MBCF_MSG_* (core/internal.h) */
	u8 status;
	u8 run0;		/* WRITE, WRITE_IMM: the run of its first
				 * frame (wire byte 3, 5.1) */
};

struct mbcf_msgq {
	struct mbcf_msg *m;
	u32 mask;		/* size - 1; size is a power of two */
	u32 head;		/* oldest live message (free-running index) */
	u32 next;		/* first message not started */
	u32 tail;		/* first free slot */
};

struct mbcf_conn {
	const struct mbcf_ops *ops;
	void *env;
	struct mbcf_conn_cfg cfg;
	u8 state;		/* enum mbcf_conn_state */

	/* sender: our stream (section 4) */
	struct mbcf_msgq req;	/* our work requests */
	struct mbcf_msgq resp;	/* our read/atomic responses to the peer */
	struct mbcf_msg *cur;	/* message whose frames are first being sent */
	struct mbcf_msg *rtx;	/* last message retransmitted from (a hint) */
	u32 snd_una;		/* oldest unacknowledged psn */
	u32 snd_nxt;		/* next psn to (re)transmit */
	u32 snd_max;		/* next never-sent psn */
	u32 wnd;		/* send-ahead window now, frames: cfg.window
				 * is its ceiling; halved by a loss, regrown
				 * by one per window acknowledged (4.3) */
	u32 wnd_acked;		/* frames acknowledged toward the next +1 */
	u32 wnd_cut_psn;	/* snd_max at the last cut: a loss before it
				 * is the same episode and cuts no further */
	bool wnd_cut_valid;
	u32 since_ackreq;	/* frames since the last ACKREQ flag */
	u32 ackreq_next;	/* psn after the newest frame sent with ACKREQ */
	u32 loud_end;		/* last psn of the newest message sent that
				 * someone waits for (not MBCF_WR_QUIET) */
	bool loud_unacked;	/* ... and it is not acknowledged yet */
	u32 rd_out;		/* started reads/atomics not yet completed */
	u16 tx_epoch;		/* go-back round: +1 at every go-back, on
				 * every sequenced frame sent (4.5) */
	bool sel_skip;		/* selective repeat: resends in (sel_base,
				 * sel_end) skip what the peer placed early
				 * (5.1, 7.2) */
	bool sel_counted;	/* ... and a skip was counted this round */
	u32 sel_base, sel_end;
	u32 sel_rewalk;		/* skips before this psn were counted in
				 * the window already (a refill walks again) */
	u32 sel_bonus;		/* frames skipped since the last progress:
				 * they open the window (7.2) */
	u32 sel_seen;		/* up to this psn the peer said what it placed: */
	u64 sel_placed[MBCF_EARLY_SPAN / 64];	/* bit d: sel_base + d */
	u32 run_rkey;		/* the run our next WRITE frame may extend: */
	u32 run_len;		/* frames of it sent (0: none), at most 255 */
	bool stopped;		/* peer sent STOP: wait for GO or min_rnr */
	bool tx_busy;		/* xmit said busy: wait for kick */
	bool tx_unflushed;	/* xmit called since the last xmit_flush */
	bool cqe_lost;		/* ops->complete failed: enter ERROR */
	bool local_failed;	/* a local request failed: start nothing more */
	bool snd_fixed;		/* our stream's start psn is settled */
	u8 retry_left, rnr_left;
	u64 rto_cur;		/* timeout now: rto_base, doubled per retry */
	u64 rto_base;		/* after progress: max(cfg.rto_ns, srtt + 4 *
				 * rttvar), at most cfg.rto_max_ns (7.1) */
	u64 srtt, rttvar;	/* measured round trip, ns (0: no sample) */
	u64 rtt_at;		/* when rtt_psn left */
	u32 rtt_psn;		/* a first-sent ACKREQ frame being timed */
	bool rtt_timing;	/* ... valid: no go-back since it left */
	bool rto_backoff;	/* timed out since the last sample: keep the
				 * backed-off rto_cur through progress (Karn) */
	bool rto_probe;		/* timed out: one frame in flight until the
				 * peer answers (7.1) */
	u64 rto_share_since;	/* the deadline moved out to the device's
				 * round trip: when this wait began, 0 = not
				 * waiting so (7.1) */
	u64 tlp_at;		/* tail probe deadline, 0 = none (7.6) */
	bool tlp_sent;		/* probed since the last progress */
	u64 rto_at;		/* retransmit deadline, 0 = none */
	u64 rnr_at;		/* resume deadline while stopped, 0 = none */
	u64 hold_at;		/* the link refused a frame: no sequenced
				 * frame leaves before this, 0 = none (7.7) */
	u64 hold_ns;		/* the last such hold; doubles per refusal
				 * until progress, up to rto_cur */
	u64 timer_at;		/* what the environment's timer is armed at */
	u64 alive_at;		/* last frame from the peer while it owed responses */
	struct mbcf_pace pace;	/* our stream's rate (mbcf_conn_set_rate) */
	bool pace_wait;		/* the last push stopped for the clock */
	u64 ackreq_at;		/* when the last ACKREQ frame left (paced) */
	bool tail_lazy;		/* the last frame sent was a response or a
				 * quiet message that asked for nothing: the
				 * peer may acknowledge it late (6.1 rule 3,
				 * 6.2), or answer it: probe a slack later */

	/* receiver: the peer's stream (section 5) */
	u32 rcv_nxt;		/* next psn we accept */
	bool lost_sent;		/* LOST(rcv_nxt) sent for the current gap */
	u16 lost_epoch;		/* ... for a frame of this round */
	bool stop_sent;		/* STOP(rcv_nxt) sent; GO due on recv_posted */
	bool dup_acked;		/* re-ACKed a duplicate since the last accept */
	/* frames placed early, ahead of the gap at rcv_nxt (5.1): bit d of
	 * the map is psn rcv_nxt + d; slot psn % MBCF_EARLY_SPAN holds its
	 * bytes' va and length (all under early_rkey) */
	u64 rx_early[MBCF_EARLY_SPAN / 64];
	u64 early_va[MBCF_EARLY_SPAN];
	u16 early_len[MBCF_EARLY_SPAN];
	u32 early_rkey;
	u32 early_n;		/* bits set in rx_early */
	bool rx_snd_settled;	/* our stream's start was settled before the
				 * frame being taken (not by its ack_psn) */
	bool rx_ack_ours;	/* the frame being taken acknowledges a psn
				 * in snd_una .. snd_max as they stood before
				 * it, our stream's start settled before it:
				 * state a blind spoofer cannot guess, which
				 * a frame placed early must show (5.1) */
	bool ack_due;		/* an ACK is owed (ACKREQ seen) */
	bool ack_hold;		/* mbcf_conn_rx_hold_ack() is running */
	u64 ack_lazy_at;	/* responses accepted unasked, or a request
				 * the application answers: an ACK is owed
				 * then, if no frame carried ack_psn (6.2) */
	u64 pp_rx_at;		/* a message that asked was accepted then and
				 * no frame of ours has left since (6.2) */
	u8 pp_streak;		/* such messages answered in a row, at most
				 * MBCF_PP_STREAK: a ping-pong */
	u8 rx_msg;		/* segmented message in progress: 0 or opcode */
	bool rx_claimed;	/* a receive is claimed for rx_msg */
	u64 rx_cookie;
	u32 rx_cap, rx_off;
	u8 rx_err;		/* RC: the claimed receive failed with this wc
				 * status along with the frame we rejected; it
				 * completes when we enter ERROR (section 8.3) */
	u8 rx_err_op;
	u32 rx_err_len;
	u8 nak_status;		/* we NAKed nak_psn with this status */
	u32 nak_psn;		/* the frame we rejected (rcv_nxt), or a read
				 * we accepted and could not answer */
	bool nak_drain;		/* rejected rcv_nxt; the NAK waits until our
				 * responses to earlier requests are acked
				 * (section 8.3) */
	bool nak_read;		/* the latter: the responses we abandoned are
				 * resp.m[nak_rhead..nak_rend), those before
				 * nak_rnext started (section 8.3) */
	u32 nak_rhead, nak_rnext, nak_rend;
	bool uc_skip;		/* UC: dropping frames up to the next FIRST */

	struct mbcf_counters ctr;
};

/*
 * A datagram endpoint (verbs UD QP): no connection, nothing sequenced or
 * acknowledged; docs/protocol.md 15.  Same ops as a connection (xmit,
 * recv_claim, recv_write, complete); the caller serialises calls.
 */
struct mbcf_dgram {
	const struct mbcf_ops *ops;
	void *env;
	u32 qpn;		/* ours, 24-bit */
	u32 qkey;		/* what datagrams to us must carry */
	u32 mtu;		/* bytes after the Ethernet header */
	struct mbcf_counters ctr;
};

/* Where a datagram goes (verbs: the address handle, remote QPN and Q_Key). */
struct mbcf_ud_dest {
	u32 remote_qpn;
	u32 qkey;
	u32 vtf;		/* 6 << 28 | traffic class << 20 | flow label */
	u8 hop_limit;
	u8 sgid[16];		/* ours, as the receiver's GRH shows it */
	u8 dgid[16];		/* the receiver's */
};

/* Parsed view of a frame; payload points into the caller's buffer. */
/* One piece of a frame's payload (see struct mbcf_frame). */
struct mbcf_iov {
	const u8 *base;
	u32 len;
};

struct mbcf_frame {
	u8 op, flags, status;
	u8 run;			/* WRITE: frames right before it that are
				 * WRITEs under its rkey, at most
				 * MBCF_RUN_MAX (wire byte 3, 5.1) */
	u32 dst_qpn, src_qpn, psn, ack_psn;
	u16 epoch;		/* sequenced: the sender's go-back round when
				 * this copy left; LOST: its trigger's */
	u32 hdr_len, paylen;
	u64 va;
	u32 rkey;
	u32 imm;
	u32 len;		/* READ_REQ length, WRITE_IMM total_len */
	u32 offset;		/* READ_RESP, SEND* */
	u32 req_psn;		/* READ_RESP, ATOMIC_RESP */
	u64 operand[2];		/* CMP_SWAP swap/compare, FETCH_ADD add, orig */
	/*
	 * The paylen payload bytes: contiguous at payload, or (payload NULL)
	 * in niov pieces, in order, that sum to paylen -- a packet buffer
	 * whose data sits in several pages need not be copied together first.
	 */
	const u8 *payload;
	const struct mbcf_iov *iov;
	u32 niov;
	/* DGRAM: rkey is the qkey; the GRH fields (the GIDs point into the
	 * frame, or, when building one, at the caller's 16 bytes each). */
	u32 vtf;
	u8 hop_limit;
	const u8 *sgid, *dgid;
	/* LOST: the frame that found the gap, and what was placed early
	 * (MBCF_PLACED_LEN bytes in the frame; NULL when building: none) */
	u32 seen;
	const u8 *placed;
};

/* Parse verdicts (also which counter the drop went to). */
enum mbcf_parse_err {
	MBCF_PARSE_OK = 0,
	MBCF_PARSE_TRUNCATED = -1,	/* shorter than its header */
	MBCF_PARSE_BAD_VERSION = -2,
	MBCF_PARSE_BAD_OPCODE = -3,
	MBCF_PARSE_BAD_LENGTH = -4,	/* paylen vs frame length vs opcode */
	MBCF_PARSE_MALFORMED = -5,	/* reserved bits, flags, status, ranges */
};

/* mbcf_conn_post results (the module maps them to errno). */
enum mbcf_post_err {
	MBCF_POST_OK = 0,
	MBCF_POST_INVAL = -1,		/* bad opcode, length, alignment */
	MBCF_POST_FULL = -2,		/* requester ring full */
	MBCF_POST_STATE = -3,		/* not in RTS */
};

/* codec.c: docs/protocol.md section 2 */
/* Header length of opcode op, 0 if unassigned. */
u32 mbcf_codec_hdr_len(u8 op);
/* "WRITE", "ACK", ... ("UNKNOWN" for unassigned opcodes). */
const char *mbcf_codec_op_name(u8 op);
/* Validate + decode the bytes after the Ethernet header; drops counted in
 * ctr (may be NULL).  f->payload points into buf. */
int mbcf_codec_parse(const u8 *buf, u32 len, struct mbcf_frame *f,
		     struct mbcf_counters *ctr);
/*
 * The same for a frame of len bytes of which only the first avail are
 * contiguous at buf (a non-linear packet buffer): the header must lie
 * within them; f->payload is NULL unless the payload does too.
 */
int mbcf_codec_parse_split(const u8 *buf, u32 avail, u32 len,
			   struct mbcf_frame *f, struct mbcf_counters *ctr);
/* Encode f's header into hdr (MBCF_HDR_MAX bytes); returns its length. */
u32 mbcf_codec_build(const struct mbcf_frame *f, u8 *hdr);
/* Data bytes one frame of op can carry at this MTU. */
u32 mbcf_codec_max_payload(u32 mtu, u8 op);

/* conn.c: sections 4 to 8, 10 and 13 */
/* RESET -> RTS: the receive side works at once (verbs RTR). */
int mbcf_conn_init(struct mbcf_conn *c, const struct mbcf_conn_cfg *cfg,
		   const struct mbcf_ops *ops, void *env,
		   struct mbcf_msg *req_ring, u32 req_size,
		   struct mbcf_msg *resp_ring, u32 resp_size);
/* The send side (sq_psn, timeout, retries, max_rd_atomic) at verbs RTS. */
int mbcf_conn_set_send(struct mbcf_conn *c, const struct mbcf_conn_cfg *cfg);
/* Queue a work request without sending (then mbcf_conn_kick once). */
int mbcf_conn_enqueue(struct mbcf_conn *c, const struct mbcf_wr *wr);
/* Queue a work request and send what the window allows. */
int mbcf_conn_post(struct mbcf_conn *c, const struct mbcf_wr *wr, u64 now);
/* A parsed frame for this connection (softirq receive path). */
void mbcf_conn_rx(struct mbcf_conn *c, const struct mbcf_frame *f, u64 now);
/*
 * The same, except that an ACK the frame made owed is not sent yet: the
 * environment calls mbcf_conn_kick() once it has let go of the connection
 * for a moment, and a frame sent in between (a doorbell that was waiting
 * to post) carries the acknowledgement instead (docs/protocol.md 6.2).
 * Returns true if the ACK is still owed.
 */
bool mbcf_conn_rx_hold_ack(struct mbcf_conn *c, const struct mbcf_frame *f,
			   u64 now);
/* The timer armed through ops->timer fired. */
void mbcf_conn_timeout(struct mbcf_conn *c, u64 now);
/* A receive was posted (sends GO after a STOP). */
void mbcf_conn_recv_posted(struct mbcf_conn *c, u64 now);
/* Send what is queued; also after xmit returned busy and can take more. */
void mbcf_conn_kick(struct mbcf_conn *c, u64 now);
/*
 * The link refused sequenced frame psn of round epoch (read from the
 * frame's header before it was handed over) after xmit had taken it, and
 * the environment sent no sequenced frame of ours after it (docs/protocol.md
 * 7.7).  Call it with what the first refused frame said; stale reports are
 * harmless.
 */
void mbcf_conn_refused(struct mbcf_conn *c, u32 psn, u16 epoch, u64 now);
/* Complete everything outstanding with WR_FLUSH_ERR, -> RESET. */
void mbcf_conn_flush(struct mbcf_conn *c);
/* dgram.c: docs/protocol.md 15 */
#define MBCF_GRH_LEN		40
/* QP1, the GSI QP, carries management datagrams of MBCF_MAD_LEN bytes. */
#define MBCF_GSI_QPN		1
#define MBCF_MAD_LEN		256
/* The largest datagram at this MTU (after the GRH the receiver adds). */
u32 mbcf_dgram_max_payload(u32 mtu);
/* The largest UD message at this MTU: the largest IB MTU a frame carries. */
u32 mbcf_dgram_max_msg(u32 mtu);
int mbcf_dgram_init(struct mbcf_dgram *d, u32 qpn, u32 qkey, u32 mtu,
		    const struct mbcf_ops *ops, void *env);
/*
 * Send one datagram (wr: SEND or SEND_IMM, len, imm, cookie, SOLICITED)
 * and complete it: MBCF_WC_SUCCESS once handed to xmit; a message larger
 * than mbcf_dgram_max_msg() also completes MBCF_WC_SUCCESS but sends
 * nothing (IBA C10-93.1.1, counted in tx_ud_oversize); another opcode
 * completes MBCF_WC_LOC_LEN_ERR.  Returns that status.
 */
int mbcf_dgram_send(struct mbcf_dgram *d, const struct mbcf_wr *wr,
		    const struct mbcf_ud_dest *to);
/* The netdev MTU changed: frames and the message bound follow it. */
void mbcf_dgram_set_mtu(struct mbcf_dgram *d, u32 mtu);
/* A DGRAM frame for this endpoint (f->dst_qpn selected it). */
void mbcf_dgram_rx(struct mbcf_dgram *d, const struct mbcf_frame *f);
/* Build a GRH (40 bytes) for a received datagram, as verbs shows it. */
void mbcf_dgram_grh(const struct mbcf_frame *f, u8 *grh);

/* pace.c: the pacing clock (docs/design.md, Pacing) */
/* ns a frame of bytes takes at kbps; *rem (if given) carries the fraction
 * from one call to the next, so a stream's clock never drifts. */
u64 mbcf_pace_ns(u32 kbps, u32 bytes, u32 *rem);
/* Change the rate (0 = unpaced); the wait left from the old rate is
 * rescaled to the new one. */
void mbcf_pace_set(struct mbcf_pace *p, u32 kbps, u64 now);
/* May a frame leave at now? */
bool mbcf_pace_ready(const struct mbcf_pace *p, u64 now);
/* The clock after a frame of bytes sent at now (changes nothing). */
u64 mbcf_pace_peek(const struct mbcf_pace *p, u32 bytes, u64 now);
/* A frame of bytes left at now: advance the clock (at most one frame of
 * credit for time an idle flow did not use: <= 2 frames back to back; a
 * held flow served late keeps up to slack_ns). */
void mbcf_pace_sent(struct mbcf_pace *p, u32 bytes, u64 now);
/* The clock held a frame back (mbcf_pace_ready was false for it). */
void mbcf_pace_hold(struct mbcf_pace *p);
/* Frames of bytes the clock counted did not leave after all: give their
 * time back. */
void mbcf_pace_refund(struct mbcf_pace *p, u64 bytes);

/*
 * Pace the connection's sequenced frames (data, requests, read and atomic
 * responses, retransmissions) at kbps (0 = unpaced); control frames are not
 * paced.  Sends what the new rate allows at once.
 */
void mbcf_conn_set_rate(struct mbcf_conn *c, u32 kbps, u64 now);
/* How late the environment's pacing timer may be without costing rate
 * (the clock's slack_ns; 0 = one frame: bursts of at most 2 frames). */
void mbcf_conn_set_pace_slack(struct mbcf_conn *c, u64 slack_ns);
/* Does the connection want a kick (mbcf_conn_kick) at *due for its clock?
 * True when the last send stopped because the next frame was not due yet. */
bool mbcf_conn_pace_due(const struct mbcf_conn *c, u64 *due);

/*
 * A connection's last words (docs/protocol.md 8.4): for a while after a QP
 * is destroyed, a resend from its peer of a frame it had accepted, asking
 * for an answer, is answered with the ACK that was lost.  IB has no
 * closing handshake: without this the peer of a program that exits right
 * after its last receive fails with RETRY_EXC_ERR whenever that final ACK
 * is lost.  A small table per device, shared fairly: a free or expired
 * entry makes room first, else the oldest entry of the owner (the
 * environment's tag for who destroyed the QP: a user context, the kernel)
 * that holds the most -- one user churning QPs evicts its own entries,
 * never the others'.
 */
#define MBCF_LINGER_N		64
#define MBCF_LINGER_NS		2000000000ull	/* 2 s */

struct mbcf_linger_ent {
	u64 until;		/* ns; 0 = free */
	u64 owner;
	u32 qpn, remote_qpn;
	u32 rcv_nxt;		/* what the ACK acknowledges */
	u32 snd_max;		/* its psn field (informational) */
	u8 peer[6];		/* the environment's peer address */
};

struct mbcf_linger {
	struct mbcf_linger_ent e[MBCF_LINGER_N];
};

/* A connected QP of @owner is going away: remember what it would answer. */
void mbcf_linger_add(struct mbcf_linger *l, const struct mbcf_conn *c,
		     const u8 *peer, u64 owner, u64 now);
/* A QP number is in use again: its old entry must not answer for it. */
void mbcf_linger_forget(struct mbcf_linger *l, u32 qpn);
/*
 * A frame for a QP this device does not have, from peer: if an entry says
 * the frame is a resend of one it accepted, asking for an answer, build
 * the ACK into hdr (>= MBCF_HDR_MAX bytes) and return its length; else 0.
 */
u32 mbcf_linger_answer(struct mbcf_linger *l, const struct mbcf_frame *f,
		       const u8 *peer, u64 now, u8 *hdr);

/* Send-ahead window in frames for a link speed (Mbit/s) and MTU. */
u32 mbcf_conn_window_from_link(u32 link_mbps, u32 mtu);
/* Work requests posted and not yet completed. */
u32 mbcf_conn_outstanding(const struct mbcf_conn *c);
/*
 * Requests are outstanding and something is bound to call into the
 * connection again soon without a post (an acknowledgement asked for, a
 * response, GO, a transmit kick): the environment may take later posts
 * from its ring then.  False when only quiet messages wait for a late
 * acknowledgement (docs/protocol.md 6.1 rule 3): a post must wake it.
 */
bool mbcf_conn_progress_due(const struct mbcf_conn *c);
/* "RESET", "RTS", "ERROR". */
const char *mbcf_conn_state_name(u8 state);

/* The sender's state and counters, for the environment's per-QP report. */
struct mbcf_conn_snap {
	u32 wnd, wnd_max;		/* frames */
	u64 srtt, rttvar, rto;		/* ns */
	u64 tx_frames, retransmits, timeouts, tail_probes, window_cuts;
	u64 selective_repeats;
};
void mbcf_conn_snapshot(const struct mbcf_conn *c, struct mbcf_conn_snap *s);

#define MBCF_WINDOW_MIN		4
#define MBCF_WINDOW_MAX		(1u << 16)
/* UC: how far after rcv_nxt a frame is taken unproven (docs/protocol.md 10) */
#define MBCF_UC_REACH		MBCF_WINDOW_MAX
/* ack_interval 0: ask at least this often (docs/protocol.md 6.1). */
#define MBCF_ACK_EVERY_MAX	32
/* The link's window holds at least four such requests (docs/protocol.md 4.3). */
#define MBCF_WINDOW_PIPE	(4 * MBCF_ACK_EVERY_MAX)
/* Tail probe: never sooner than this after the last frame left (7.6). */
#define MBCF_TLP_MIN_NS		100000ull
/* The first hold after the link refused a frame (7.7); at most the rto. */
#define MBCF_HOLD_MIN_NS	50000ull
/* Responses accepted unasked are acknowledged this long after (6.2). */
#define MBCF_ACK_LAZY_NS	(MBCF_TLP_MIN_NS / 4)
/*
 * A ping-pong (6.2): after this many messages in a row that asked for an
 * acknowledgement and were answered by a frame of ours within
 * MBCF_ACK_LAZY_NS, the next one is acknowledged late, by the answer.
 */
#define MBCF_PP_STREAK		2
#define MBCF_MTU_MIN		512
#define MBCF_MSG_MAX		(1u << 31)	/* largest message, bytes */

#endif /* MBCF_CORE_H */
