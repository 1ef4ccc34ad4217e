/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * Protocol counters, defined once.  X(field, "name") expands to a struct
 * member, an enum index and a name string; the kernel exports them through
 * `rdma statistic` in this order, and tests assert them by field.
 *
 * Counters are plain u64 owned by whoever owns the struct: per connection
 * (updated under the caller's QP lock) or per device/CPU for frames that are
 * dropped before a connection is known (the parser's verdicts).
 * tx_zc_frames/tx_zc_copied are the kernel's alone (kmod/net.c): frames
 * sent with the payload as page fragments, and how many of them the stack
 * copied (a packet tap; a veth peer without our rx_handler); tx_head_miss,
 * frame heads the stack's page-fragment cache gave because every page the
 * CPU keeps for heads still held a live frame (kmod/net.c: each a piece
 * of a freshly zeroed page; in a healthy stream few or none);
 * rx_zc_parked, zero-copy frames of a peer on this machine (a veth) that
 * the receiver left to be freed by the CPU that built them (kmod/net.c).
 * tx_refused counts sequenced frames the link refused after xmit had
 * taken them (docs/protocol.md 7.7): the environment reports them with
 * mbcf_conn_refused(); tx_withdrawn (the kernel's) the frames of the
 * stream it then never handed to the link (behind the refused one, or
 * built in a round the go-back ended), counted in tx_frames all the same.
 * sq_doorbells are the kernel's too: how often a user QP's provider asked
 * it to read the send ring (a system call; the ring protocol spares it
 * while the kernel is bound to look anyway, include/mbcf/ring.h);
 * tx_loop_deferred, frames a device sent to itself while delivering one
 * (kmod/net.c: delivered after it), and tx_loop_backlog, those past the
 * outer delivery's budget, which took the stack's backlog.
 * rto_shared counts deadlines a connection moved out to its device's
 * longer shared round trip instead of timing out (docs/protocol.md 7.1).
 *
 * Every received frame gets exactly one verdict, so over a device
 *   rx_frames = rx_accepted + acks_rx + naks_rx + lost_rx + stop_rx + go_rx
 *               + every drop_* + remote_errors
 * (a datagram delivered counts as rx_accepted; so does a frame placed
 * early, docs/protocol.md 5.1, which rx_early counts besides)
 * rx_frames is counted by the environment as a frame enters its receive
 * path (the core never sees frames that fail before parsing); every other
 * receive-side counter is one frame's verdict (docs/protocol.md 14).
 */
#ifndef MBCF_COUNTERS_H
#define MBCF_COUNTERS_H

#include <mbcf/compat.h>

#define MBCF_COUNTERS(X)						\
	X(tx_frames,		"tx_frames")				\
	X(tx_bytes,		"tx_payload_bytes")			\
	X(tx_busy,		"tx_busy")				\
	X(tx_refused,		"tx_refused")				\
	X(tx_withdrawn,		"tx_withdrawn")				\
	X(tx_zc_frames,		"tx_zerocopy_frames")			\
	X(tx_zc_copied,		"tx_zerocopy_copied")			\
	X(tx_head_miss,		"tx_head_pool_miss")			\
	X(rx_zc_parked,		"rx_zerocopy_parked")			\
	X(tx_oversize,		"tx_ud_oversize")			\
	X(sq_doorbells,		"sq_doorbells")				\
	X(tx_loop_deferred,	"tx_loop_deferred")			\
	X(tx_loop_backlog,	"tx_loop_backlog")			\
	X(rx_frames,		"rx_frames")				\
	X(rx_accepted,		"rx_accepted")				\
	X(rx_bytes,		"rx_payload_bytes")			\
	X(rx_early,		"rx_placed_early")			\
	X(rx_early_refused,	"rx_early_refused")			\
	X(retransmits,		"retransmit_frames")			\
	X(timeouts,		"retransmit_timeouts")			\
	X(rto_shared,		"retransmit_waits_shared")		\
	X(tail_probes,		"tail_probes")				\
	X(window_cuts,		"window_cuts")				\
	X(selective_repeats,	"selective_repeats")			\
	X(selective_refills,	"selective_refills")			\
	X(sel_refill_steps,	"selective_refill_steps")		\
	X(retry_exceeded,	"retry_exceeded")			\
	X(rnr_exceeded,		"rnr_retry_exceeded")			\
	X(acks_tx,		"ack_tx")				\
	X(closed_acks,		"closed_qp_ack_tx")			\
	X(acks_rx,		"ack_rx")				\
	X(acks_req,		"ack_requests_tx")			\
	X(naks_tx,		"nak_tx")				\
	X(naks_rx,		"nak_rx")				\
	X(lost_tx,		"lost_tx")				\
	X(lost_rx,		"lost_rx")				\
	X(stop_tx,		"stop_tx")				\
	X(stop_rx,		"stop_rx")				\
	X(go_tx,		"go_tx")				\
	X(go_rx,		"go_rx")				\
	X(drop_nomem,		"drop_nomem")				\
	X(drop_malformed,	"drop_malformed")			\
	X(drop_truncated,	"drop_truncated")			\
	X(drop_bad_version,	"drop_bad_version")			\
	X(drop_bad_opcode,	"drop_bad_opcode")			\
	X(drop_bad_length,	"drop_bad_length")			\
	X(drop_wrong_qp,	"drop_wrong_qp")			\
	X(drop_out_of_seq,	"drop_out_of_sequence")			\
	X(drop_duplicate,	"drop_duplicate")			\
	X(drop_stopped,		"drop_rnr_stopped")			\
	X(drop_error_state,	"drop_qp_error")			\
	X(drop_bad_ack,		"drop_bad_ack")				\
	X(drop_bad_resp,	"drop_bad_response")			\
	X(drop_local_err,	"drop_local_error")			\
	X(drop_bad_qkey,	"drop_bad_qkey")			\
	X(drop_not_unicast,	"drop_not_unicast")			\
	X(remote_errors,	"remote_errors")			\
	X(recv_completions,	"recv_completions")			\
	X(send_completions,	"send_completions")

struct mbcf_counters {
#define MBCF_X_FIELD(f, name) u64 f;
	MBCF_COUNTERS(MBCF_X_FIELD)
#undef MBCF_X_FIELD
};

enum mbcf_counter_index {
#define MBCF_X_ENUM(f, name) MBCF_CTR_##f,
	MBCF_COUNTERS(MBCF_X_ENUM)
#undef MBCF_X_ENUM
	MBCF_CTR_COUNT
};

/* Name of counter i (0 <= i < MBCF_CTR_COUNT), NULL otherwise. */
const char *mbcf_counters_name(unsigned int i);
/* Value of counter i by index, for exporters that walk the list. */
u64 mbcf_counters_get(const struct mbcf_counters *ctr, unsigned int i);
/* dst += src, field by field (summing per-CPU or per-QP counters). */
void mbcf_counters_add(struct mbcf_counters *dst, const struct mbcf_counters *src);

#endif /* MBCF_COUNTERS_H */
