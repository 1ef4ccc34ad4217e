// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Hostile wire: a raw-socket MBCF frame generator that
 * plays a fake peer against mbcf0, and spoofs an honest mbcf1 <-> mbcf0
 * connection.  Run inside the guest by tests/vm/wire.sh.
 *
 *   mbcf_wire_attack [-s SEED] [-n FRAMES] [-q QPS] [-b BATCH] [-k KINDS]
 *                    [-c CHECK_EVERY] [-F] [-v]
 *
 * Attack QPs on mbcf0 are connected to a MAC nobody owns (PEER_MAC, "F")
 * and QP numbers we choose.  An AF_PACKET socket on veth1 (namespace ns1)
 * sends MBCF frames as that peer to veth0, another one receives mbcf0's
 * replies to F, so the program knows the responder's expected psn exactly
 * and its hostile frames arrive *in sequence*, reaching the operation
 * checks.  Every frame sent is first judged by an oracle written from
 * docs/protocol.md (not from core/: this file shares no code with it):
 * which verdict counter it moves, what it does to the responder's state
 * and memory, which control frame comes back, which completion it makes.
 * After each batch the program checks
 *   - every byte of the arena that holds the MRs (canaries between and
 *     around them, a random background) against the model,
 *   - the NAK/STOP/LOST/GO replies, in order, with status and psn, and the
 *     responder's ack_psn (a probe per QP) against the predicted one,
 *   - read and atomic responses byte for byte,
 *   - every completion of every attack QP (wr_id, status, opcode, length,
 *     immediate),
 * and every CHECK_EVERY batches the device counters (sysfs hw_counters)
 * against the predictions: exact for the counters honest traffic cannot
 * move, lower bounds for the others.
 *
 * Meanwhile an honest QP pair (mbcf1 requester, mbcf0 responder) moves
 * data (writes, reads, fetch-adds, sends, all compared byte for byte), and
 * the program spoofs control and data frames against it: from a third MAC
 * with the psns it is awaiting (swept: must be dropped, drop_wrong_qp), and
 * from the peer's own MAC with psns it is not awaiting (stale or ahead).
 * It must finish with correct data and no error.
 *
 * Frames at least 4080 bytes long leave through a PACKET_VNET_HDR socket
 * with a chosen hdr_len: packet_snd() then builds the skb with only
 * hdr_len bytes linear and the rest in page fragments (alloc_skb_with_frags),
 * so the receiver sees non-linear skbs with the MBCF header, or the
 * payload, split at a point we pick.  Smaller frames are always linear.
 *
 * With -F off (the default is on) a second thread, on the other CPU,
 * floods frames whose verdict does not depend on any QP's state (codec
 * garbage, third-MAC frames, unknown QP numbers) while QPs are being reset
 * (RESET -> INIT -> RTR -> RTS), so those transitions run under fire.
 *
 * The end prints "expect DEV COUNTER exact|min N" and "expect DEV COUNTER
 * range MIN MAX" lines (tests/vm/wire.sh compares them with `rdma
 * statistic`; a range where the program causes frames it cannot count:
 * pred_slack), the frames sent per device and the
 * replies received (for the rx_frames cross-check), and a summary; the exit
 * status is the number of failures (at most 100), 2 for setup errors.
 * The seed is printed; -s SEED reruns the same attack sequence (honest
 * traffic is timing dependent and uses its own random stream).  -k limits
 * the hostile actions to a list (see -h) for a minimal reproduction.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <infiniband/verbs.h>
#include <linux/filter.h>
#include <linux/if_ether.h>
#include <linux/if_packet.h>
#include <linux/virtio_net.h>
#include <net/if.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#ifndef PACKET_VNET_HDR
#define PACKET_VNET_HDR 15
#endif
#ifndef PACKET_IGNORE_OUTGOING
#define PACKET_IGNORE_OUTGOING 23
#endif

#define PAGE		4096
#define NS1_PATH	"/var/run/netns/ns1"

/* ---- options, randomness, failures ------------------------------------------ */

static uint64_t opt_seed;
static uint64_t opt_frames = 1000000;
static int opt_qps = 8;
static int opt_batch = 1000;
static int opt_check_every = 16;
static bool opt_flood = true;
static int opt_verbose;
static char *opt_kinds;

/*
 * Two random streams: the attack sequence must not depend on how the
 * honest traffic happened to be timed, so -s SEED replays it.
 */
static uint64_t rs_attack, rs_honest, rs_flood;
static __thread uint64_t *rs = &rs_attack;	/* the flood thread has its own */

static uint64_t xr(uint64_t *s)
{
	*s ^= *s >> 12;
	*s ^= *s << 25;
	*s ^= *s >> 27;
	return *s * 2685821657736338717ull;
}

static uint64_t rnd(void)
{
	return xr(rs);
}

static uint32_t below(uint32_t n)
{
	return n ? (uint32_t)(rnd() % n) : 0;
}

static bool pct(unsigned int p)
{
	return below(100) < p;
}

/* A random value in [lo, hi]. */
static uint32_t range(uint32_t lo, uint32_t hi)
{
	return hi <= lo ? lo : lo + below(hi - lo + 1);
}

static void fill_rand(uint8_t *p, size_t n)
{
	uint64_t v;
	size_t i;

	for (i = 0; i + 8 <= n; i += 8) {
		v = rnd();
		memcpy(p + i, &v, 8);
	}
	for (v = rnd(); i < n; i++, v >>= 8)
		p[i] = (uint8_t)v;
}

static int failures;
static bool desync;		/* the oracle lost track: stop attacking */

/* Kinds of failure: each prints its first few, so one cannot hide another. */
enum fkind { F_OTHER, F_MEMORY, F_COMPLETION, F_COUNTER, NFKIND };
static int fkind_n[NFKIND];
static const char *const fkind_name[NFKIND] = { "", "memory", "completion", "counter" };

static void vfailk(enum fkind k, const char *fmt, va_list ap)
{
	failures++;
	if (++fkind_n[k] <= 20) {
		printf("FAIL: ");
		vprintf(fmt, ap);
		printf("\n");
	} else if (fkind_n[k] == 21) {
		printf("FAIL: (further %s failures counted, not printed)\n", fkind_name[k]);
	}
}

static void failk(enum fkind k, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vfailk(k, fmt, ap);
	va_end(ap);
}

static void fail(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vfailk(F_OTHER, fmt, ap);
	va_end(ap);
}

static void die(const char *fmt, ...)
{
	va_list ap;

	printf("setup: ");
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf(" (errno %d: %s)\n", errno, strerror(errno));
	exit(2);
}

/* A bug in this program, not in the kernel. */
#define ORACLE_BUG(...) do {						\
	printf("internal error at %s:%d: ", __FILE__, __LINE__);	\
	printf(__VA_ARGS__);						\
	printf("\n");							\
	exit(2);							\
} while (0)

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void put16(uint8_t *p, uint16_t v) { p[0] = v >> 8; p[1] = (uint8_t)v; }
static void put32(uint8_t *p, uint32_t v) { put16(p, v >> 16); put16(p + 2, (uint16_t)v); }
static void put64(uint8_t *p, uint64_t v) { put32(p, v >> 32); put32(p + 4, (uint32_t)v); }
static uint16_t get16(const uint8_t *p) { return (uint16_t)(p[0] << 8 | p[1]); }
static uint32_t get32(const uint8_t *p) { return (uint32_t)get16(p) << 16 | get16(p + 2); }
static uint64_t get64(const uint8_t *p) { return (uint64_t)get32(p) << 32 | get32(p + 4); }

static bool mac_eq(const uint8_t *a, const uint8_t *b)
{
	return !memcmp(a, b, 6);
}

/* ---- the wire format, from docs/protocol.md section 2 ------------------------- */

#define ETH_P_MBCF	0x88B5
#define MB_HDR		24
#define PSN_MASK	0x00ffffffu
#define MSG_MAX		0x80000000u
#define ETH_MIN_PAYLOAD	46

enum {
	OP_WRITE = 0x01, OP_WRITE_IMM, OP_READ_REQ, OP_READ_RESP, OP_CMP_SWAP,
	OP_FETCH_ADD, OP_ATOMIC_RESP, OP_SEND, OP_SEND_IMM, OP_SEND_INV,
	/* parsed as the module parses it (a random opcode byte may make
	 * one), never sent on purpose: its responder side is the core's
	 * FifoRx unit tests */
	OP_FIFO_PUSH = 0x0b,
	OP_ACK = 0x10, OP_LOST, OP_STOP, OP_GO,
	OP_DGRAM = 0x14,	/* UD; not in docs/protocol.md yet: from wire.h */
};

#define FL_ACKREQ	0x01
#define FL_FIRST	0x02
#define FL_LAST		0x04
#define FL_SOL		0x08
#define FL_IMM		0x10	/* DGRAM only: the immediate is valid */
#define FL_SEG		(FL_FIRST | FL_LAST)
/* a WRITE this far after a gap is never placed early (protocol.md 5.1) */
#define EARLY_SPAN	256
/* MBCF_WINDOW_MAX: how far a control frame's psn and ack_psn may lie from
 * the receiver's own state (protocol.md 6.4) */
#define WINDOW_MAX	65536

struct opinfo {
	uint8_t hdr;		/* header bytes: 24 + extension (2.3) */
	bool data;		/* may carry paylen bytes */
	uint8_t flags;		/* allowed besides ACKREQ (2.4 item 4) */
	const char *name;
};

static const struct opinfo opinfo[256] = {
	[OP_WRITE]	 = { 36, true, FL_SEG, "WRITE" },
	[OP_WRITE_IMM]	 = { 44, true, FL_SEG | FL_SOL, "WRITE_IMM" },
	[OP_READ_REQ]	 = { 40, false, 0, "READ_REQ" },
	[OP_READ_RESP]	 = { 32, true, FL_SEG, "READ_RESP" },
	[OP_CMP_SWAP]	 = { 56, false, 0, "CMP_SWAP" },
	[OP_FETCH_ADD]	 = { 48, false, 0, "FETCH_ADD" },
	[OP_ATOMIC_RESP] = { 40, false, 0, "ATOMIC_RESP" },
	[OP_SEND]	 = { 28, true, FL_SEG | FL_SOL, "SEND" },
	[OP_SEND_IMM]	 = { 32, true, FL_SEG | FL_SOL, "SEND_IMM" },
	[OP_SEND_INV]	 = { 32, true, FL_SEG | FL_SOL, "SEND_INV" },
	[OP_FIFO_PUSH]	 = { 28, true, FL_SEG, "FIFO_PUSH" },	/* fkey */
	[OP_ACK]	 = { 24, false, 0, "ACK" },
	[OP_LOST]	 = { 64, false, 0, "LOST" },	/* seen, rsvd, placed map */
	[OP_STOP]	 = { 24, false, 0, "STOP" },
	[OP_GO]		 = { 24, false, 0, "GO" },
	[OP_DGRAM]	 = { 72, true, FL_SOL | FL_IMM, "DGRAM" },
};

static bool op_seq(uint8_t op)
{
	return op >= OP_WRITE && op <= OP_FIFO_PUSH;
}

static const char *op_name(uint8_t op)
{
	return opinfo[op].name ? opinfo[op].name : "?";
}

/* One frame, decoded (or to encode: every field is written as given). */
struct wf {
	uint8_t ver, op, flags, status;
	uint32_t dst, src, psn, ack;
	uint16_t paylen, rsvd;	/* rsvd: the epoch (4.5) */
	uint64_t va;
	uint32_t rkey;
	uint32_t imm;
	uint32_t len;		/* READ_REQ length, WRITE_IMM total_len */
	uint32_t offset;	/* SEND, SEND_IMM, READ_RESP */
	uint32_t req_psn;	/* READ_RESP, ATOMIC_RESP */
	uint32_t xrsvd;		/* reserved word of CMP_SWAP/FETCH_ADD/ATOMIC_RESP */
	uint32_t seen;		/* LOST: the frame that found the gap */
	uint8_t map[32];	/* LOST: placed, bit d = ack_psn + d (2.3) */
	uint64_t op0, op1;	/* swap or add, compare; ATOMIC_RESP: orig */
	uint32_t vtf;		/* DGRAM: 6 << 28 | class << 20 | flow */
	uint8_t hop;		/* DGRAM */
	uint8_t gids[32];	/* DGRAM: sgid, dgid */
	const uint8_t *pay;	/* paylen bytes */
};

static uint32_t hdr_of(uint8_t op)
{
	return opinfo[op].hdr ? opinfo[op].hdr : MB_HDR;
}

/* Header at b, then paylen bytes of f->pay (if given); returns hdr + paylen. */
static size_t wf_encode(uint8_t *b, const struct wf *f)
{
	uint32_t hl = hdr_of(f->op);

	memset(b, 0, hl);
	b[0] = f->ver;
	b[1] = f->op;
	b[2] = f->flags;
	b[3] = f->status;
	/* a WRITE frame after its FIRST has a run of at least 1 (the frame
	 * before it); callers that do not care get that least one */
	if (f->op == OP_WRITE && !(f->flags & FL_FIRST) && !f->status)
		b[3] = 1;
	put32(b + 4, f->dst);
	put32(b + 8, f->src);
	put32(b + 12, f->psn);
	put32(b + 16, f->ack);
	put16(b + 20, f->paylen);
	put16(b + 22, f->rsvd);
	switch (f->op) {
	case OP_WRITE_IMM:
		put32(b + 36, f->imm);
		put32(b + 40, f->len);
		/* fall through */
	case OP_WRITE:
		put64(b + 24, f->va);
		put32(b + 32, f->rkey);
		break;
	case OP_READ_REQ:
		put64(b + 24, f->va);
		put32(b + 32, f->rkey);
		put32(b + 36, f->len);
		break;
	case OP_READ_RESP:
		put32(b + 24, f->offset);
		put32(b + 28, f->req_psn);
		break;
	case OP_CMP_SWAP:
		put64(b + 48, f->op1);
		/* fall through */
	case OP_FETCH_ADD:
		put64(b + 24, f->va);
		put32(b + 32, f->rkey);
		put32(b + 36, f->xrsvd);
		put64(b + 40, f->op0);
		break;
	case OP_ATOMIC_RESP:
		put32(b + 24, f->req_psn);
		put32(b + 28, f->xrsvd);
		put64(b + 32, f->op0);
		break;
	case OP_SEND_INV:
		put32(b + 28, f->rkey);		/* inv_rkey */
		put32(b + 24, f->offset);
		break;
	case OP_LOST:
		put32(b + 24, f->seen);
		memcpy(b + 32, f->map, 32);
		break;
	case OP_DGRAM:
		put32(b + 24, f->rkey);		/* qkey */
		put32(b + 28, f->imm);
		put32(b + 32, f->vtf);
		b[36] = f->hop;
		memcpy(b + 40, f->gids, 32);
		break;
	case OP_SEND_IMM:
		put32(b + 28, f->imm);
		/* fall through */
	case OP_SEND:
		put32(b + 24, f->offset);
		break;
	}
	if (f->paylen && f->pay)
		memcpy(b + hl, f->pay, f->paylen);
	return hl + f->paylen;
}

static void wf_decode_ext(const uint8_t *b, struct wf *f)
{
	switch (f->op) {
	case OP_WRITE_IMM:
		f->imm = get32(b + 36);
		f->len = get32(b + 40);
		/* fall through */
	case OP_WRITE:
		f->va = get64(b + 24);
		f->rkey = get32(b + 32);
		break;
	case OP_READ_REQ:
		f->va = get64(b + 24);
		f->rkey = get32(b + 32);
		f->len = get32(b + 36);
		break;
	case OP_READ_RESP:
		f->offset = get32(b + 24);
		f->req_psn = get32(b + 28);
		break;
	case OP_CMP_SWAP:
		f->op1 = get64(b + 48);
		/* fall through */
	case OP_FETCH_ADD:
		f->va = get64(b + 24);
		f->rkey = get32(b + 32);
		f->xrsvd = get32(b + 36);
		f->op0 = get64(b + 40);
		break;
	case OP_ATOMIC_RESP:
		f->req_psn = get32(b + 24);
		f->xrsvd = get32(b + 28);
		f->op0 = get64(b + 32);
		break;
	case OP_SEND_INV:
		f->rkey = get32(b + 28);
		f->offset = get32(b + 24);
		break;
	case OP_LOST:
		f->seen = get32(b + 24);
		memcpy(f->map, b + 32, 32);
		break;
	case OP_DGRAM:
		f->rkey = get32(b + 24);
		f->imm = get32(b + 28);
		f->vtf = get32(b + 32);
		f->hop = b[36];
		memcpy(f->gids, b + 40, 32);
		break;
	case OP_SEND_IMM:
		f->imm = get32(b + 28);
		/* fall through */
	case OP_SEND:
		f->offset = get32(b + 24);
		break;
	}
}

/* n bytes at va reach or pass 2^64 (2.4 item 4: "wrapping past 2^64"). */
static bool wraps(uint64_t va, uint64_t n)
{
	return n && va > UINT64_MAX - n;
}

/* 2.4 item 4: everything that makes a frame drop_malformed. */
static bool wf_fields_ok(const struct wf *f)
{
	const struct opinfo *o = &opinfo[f->op];

	if ((f->dst | f->src | f->psn | f->ack) & ~PSN_MASK)
		return false;
	if (f->rsvd && !op_seq(f->op) && f->op != OP_LOST)
		return false;	/* an epoch only on sequenced frames and LOST */
	if (f->flags & ~(FL_ACKREQ | o->flags))
		return false;
	/* byte 3: an ACK's status; a WRITE's run, at least 1 after FIRST */
	if (f->op == OP_WRITE) {
		if (!(f->flags & FL_FIRST) && !f->status)
			return false;
	} else if (f->status && (f->op != OP_ACK || f->status > 3)) {
		return false;
	}
	/* a FIFO record is one frame (16.3) */
	if (f->op == OP_FIFO_PUSH && (f->flags & FL_SEG) != FL_SEG)
		return false;
	if ((f->op == OP_READ_RESP || f->op == OP_ATOMIC_RESP) &&
	    (f->req_psn & ~PSN_MASK))
		return false;
	if (f->op == OP_LOST && (f->seen & ~PSN_MASK))
		return false;
	if ((f->op == OP_WRITE || f->op == OP_WRITE_IMM) && wraps(f->va, f->paylen))
		return false;
	if (f->op == OP_READ_REQ && (f->len > MSG_MAX || wraps(f->va, f->len)))
		return false;
	if (f->op == OP_WRITE_IMM && (f->len > MSG_MAX || f->len < f->paylen))
		return false;
	if ((f->op == OP_SEND || f->op == OP_SEND_IMM || f->op == OP_SEND_INV ||
	     f->op == OP_READ_RESP) && (uint64_t)f->offset + f->paylen > MSG_MAX)
		return false;
	/* wire.h: a datagram is unsequenced, its GRH version field is 6 */
	if (f->op == OP_DGRAM && (f->psn || f->ack || f->vtf >> 28 != 6))
		return false;
	return true;
}

/* ---- counters ------------------------------------------------------------------- */

enum ctr {
	C_RX, C_ACC, C_ACK, C_NAK, C_LOST, C_STOP, C_GO, C_REMERR,
	C_NOMEM, C_MALF, C_TRUNC, C_VER, C_OPC, C_LEN, C_WQP, C_OOS, C_DUP,
	C_RNR, C_QPERR, C_BADACK, C_BADRESP, C_NOTUNI,
	NVERDICT,
	/* transmit side, for the reply cross-checks */
	X_NAKTX = NVERDICT, X_STOPTX, X_GOTX, X_LOSTTX, X_TXF,
	NCTR,
	C_NONE = -1,		/* not counted (a frame for another host) */
	C_OK = -2,		/* wf_parse: valid */
	C_AMBIG = -3,		/* the oracle cannot tell: a generator bug */
};

static const char *const ctr_name[NCTR] = {
	"rx_frames", "rx_accepted", "ack_rx", "nak_rx", "lost_rx", "stop_rx",
	"go_rx", "remote_errors", "drop_nomem", "drop_malformed",
	"drop_truncated", "drop_bad_version", "drop_bad_opcode",
	"drop_bad_length", "drop_wrong_qp", "drop_out_of_sequence",
	"drop_duplicate", "drop_rnr_stopped", "drop_qp_error", "drop_bad_ack",
	"drop_bad_response", "drop_not_unicast",
	"nak_tx", "stop_tx", "go_tx", "lost_tx", "tx_frames",
};

/*
 * Counters the honest connection moves too (we know only a lower bound).
 * It never makes a frame malformed, never NAKs, never acks beyond what
 * was sent; on mbcf0 it sends LOSTs and duplicates (our gap spoofs make
 * it go back), so those are shared.  tx_frames is checked by wire.sh.
 */
static const bool ctr_shared[NCTR] = {
	[C_RX] = true, [C_ACC] = true, [C_ACK] = true, [C_LOST] = true,
	[C_OOS] = true, [C_DUP] = true, [X_LOSTTX] = true, [X_TXF] = true,
};

/* Predicted deltas per device (0 = mbcf0, 1 = mbcf1). */
static uint64_t pred[2][NCTR];
/*
 * How far an exact counter may exceed pred, for what the program causes
 * but cannot count: a spoofed frame after a gap in the honest stream
 * makes the receiver send the real peer a LOST (5, at most one per frame)
 * whose seen is the spoofed psn, one the peer never sent: the peer drops
 * it as drop_bad_ack (6.4; protocol.md 5.1, "Spoofing").  Whether the
 * receiver sends one (once per gap and round) depends on the timing.
 */
static uint64_t pred_slack[2][NCTR];
static uint64_t batch_hist[2][NVERDICT];

/*
 * Validate a frame as 2.4 says: C_OK and *f filled, or the drop counter.
 * Several faults in one frame: truncated, then version, opcode, length,
 * malformed (the spec lists the conditions, not an order; the generator
 * makes single-fault frames where it cares).
 */
static int wf_parse(const uint8_t *b, size_t len, struct wf *f)
{
	const struct opinfo *o;
	size_t want;

	memset(f, 0, sizeof(*f));
	if (len < MB_HDR)
		return C_TRUNC;
	f->ver = b[0];
	f->op = b[1];
	if (f->ver != 2)
		return C_VER;
	o = &opinfo[f->op];
	if (!o->hdr)
		return C_OPC;
	if (len < o->hdr)
		return C_TRUNC;
	f->flags = b[2];
	f->status = b[3];
	f->dst = get32(b + 4);
	f->src = get32(b + 8);
	f->psn = get32(b + 12);
	f->ack = get32(b + 16);
	f->paylen = get16(b + 20);
	f->rsvd = get16(b + 22);
	wf_decode_ext(b, f);
	want = o->hdr + (size_t)f->paylen;
	if (len < want)
		return C_TRUNC;
	/* Ethernet pads short frames: only those may be longer (2.4 item 3) */
	if (len > want && len > ETH_MIN_PAYLOAD)
		return C_LEN;
	if (!o->data && f->paylen)
		return C_LEN;
	if (!wf_fields_ok(f))
		return C_MALF;
	f->pay = b + o->hdr;
	return C_OK;
}

/* ---- psn arithmetic (section 3) ------------------------------------------------ */

static uint32_t psn_add(uint32_t a, uint32_t n)
{
	return (a + n) & PSN_MASK;
}

static uint32_t psn_sub(uint32_t a, uint32_t n)
{
	return (a - n) & PSN_MASK;
}

/* a - b as a signed distance; the program keeps live psns far below 2^23 apart. */
static int32_t psn_diff(uint32_t a, uint32_t b)
{
	uint32_t d = (a - b) & PSN_MASK;

	return d & 0x800000u ? (int32_t)d - 0x1000000 : (int32_t)d;
}

/* ---- machine state: addresses, devices -------------------------------------- */

static const uint8_t PEER_MAC[6] = { 0x02, 0x4d, 0x42, 0x43, 0x46, 0x01 };
static const uint8_t OTHER_HOST[6] = { 0x02, 0x4d, 0x42, 0x43, 0x46, 0xfe };
static uint8_t veth0_mac[6], veth1_mac[6];
static const uint8_t *dev_mac[2] = { veth0_mac, veth1_mac };
static uint32_t mtu;		/* bytes after the Ethernet header */

/* A third MAC: locally administered, never F, veth0 or veth1. */
static void third_mac(uint8_t *m)
{
	do {
		m[0] = 0x02;
		m[1] = 0x33;
		put32(m + 2, (uint32_t)rnd());
	} while (mac_eq(m, PEER_MAC) || mac_eq(m, OTHER_HOST) ||
		 mac_eq(m, veth0_mac) || mac_eq(m, veth1_mac));
}

/* Payload bytes of one frame of op at the current MTU (2.6). */
static uint32_t seg_of(uint8_t op)
{
	return mtu - hdr_of(op);
}

/* Frames a message of len bytes takes (at least one). */
static uint32_t nframes(uint32_t len, uint32_t seg)
{
	return len ? (len + seg - 1) / seg : 1;
}

/* ---- target memory: the arena, its model, the MRs in it ------------------------ */

#define LW	IBV_ACCESS_LOCAL_WRITE
#define RW	IBV_ACCESS_REMOTE_WRITE
#define RR	IBV_ACCESS_REMOTE_READ
#define RA	IBV_ACCESS_REMOTE_ATOMIC

enum { PD_ATTACK, PD_OTHER, PD_HONEST };

enum mrid {
	M_W, M_R, M_A, M_N, M_RW, M_ROV, M_ALL, M_TOP, M_AREA, M_DEREG, M_OPD,
	M_HON, NMR
};

/*
 * Regions of the arena (offsets from its start).  Everything between
 * them is canary: random bytes nobody may change.  M_ROV (read only) lies
 * over part of M_RW; M_TOP's target addresses end 1 byte short of 2^64;
 * M_DEREG is deregistered at start (its key is stale); M_OPD belongs to
 * another PD; M_HON is the honest responder's MR (another PD, not in the
 * arena).  M_AREA holds, per attack QP, its receive buffers and the local
 * buffers of the reads and atomics it issues itself.
 */
struct tmr {
	const char *name;
	size_t off, len;
	uint64_t iova;		/* 0: the buffer's address */
	int access;
	int pd;
	struct ibv_mr *mr;
	uint32_t key;
	bool live;
};

static struct tmr mrs[NMR] = {
	[M_W]	  = { "W", 1 * PAGE + 0x123, 3 * PAGE + 100, 0, LW | RW, PD_ATTACK },
	[M_R]	  = { "R", 6 * PAGE + 0x77, 2 * PAGE + 77, 0, RR, PD_ATTACK },
	[M_A]	  = { "A", 10 * PAGE + 0x40, 512, 0, LW | RA, PD_ATTACK },
	[M_N]	  = { "N", 11 * PAGE + 0x200, 1000, 0, LW, PD_ATTACK },
	[M_RW]	  = { "RW", 13 * PAGE + 0x10, 5 * PAGE, 0, LW | RW | RR, PD_ATTACK },
	[M_ROV]	  = { "ROV", 14 * PAGE + 0x10, 2000, 0, RR, PD_ATTACK },
	[M_ALL]	  = { "ALL", 20 * PAGE + 0x8, 3 * PAGE, 0, LW | RW | RR | RA, PD_ATTACK },
	[M_TOP]	  = { "TOP", 25 * PAGE + 0x300, 3326, 0xFFFFFFFFFFFFF300ull, LW | RW | RR, PD_ATTACK },
	[M_AREA]  = { "AREA", 32 * PAGE, 0, 0, LW, PD_ATTACK },
	[M_DEREG] = { "DEREG", 5 * PAGE + 0x100, 500, 0, LW | RW | RR | RA, PD_ATTACK },
	[M_OPD]	  = { "OPD", 9 * PAGE + 0x80, 1000, 0, LW | RW | RR | RA, PD_OTHER },
	[M_HON]	  = { "HON", 0, 0, 0, LW | RW | RR | RA, PD_HONEST },
};

#define QAREA_PAGES	16
#define NRSLOT		4		/* receive buffers per attack QP */
#define RSTRIDE		12544		/* 12 KiB + 256 canary */
#define RCAP_MAX	12288
#define QA_READ		(NRSLOT * RSTRIDE)	/* local buffer of its reads */
#define QA_ATOMIC	(QA_READ + RSTRIDE)	/* 8 bytes for its atomics */

static uint8_t *arena, *model;
static size_t arena_len;

static size_t qarea(int idx)
{
	return mrs[M_AREA].off + (size_t)idx * QAREA_PAGES * PAGE;
}

static uint64_t arena_va(size_t off)
{
	return (uint64_t)(uintptr_t)(arena + off);
}

static uint64_t mr_iova(const struct tmr *m)
{
	return m->iova ? m->iova : arena_va(m->off);
}

static void model_put(size_t off, const uint8_t *p, size_t n)
{
	if (off + n > arena_len)
		ORACLE_BUG("model write at %zu+%zu", off, n);
	memcpy(model + off, p, n);
}

/* The live MR with this key, as the responder would find it. */
static struct tmr *mr_by_key(uint32_t key)
{
	int i;

	for (i = 0; i < NMR; i++)
		if (mrs[i].live && mrs[i].key == key)
			return &mrs[i];
	return NULL;
}

/*
 * Key, PD, access and bounds (section 9): may the attack PD reach
 * [va, va + n) through key with `need`?  Returns the arena offset of va.
 */
static bool mr_reach(uint32_t key, uint64_t va, uint64_t n, int need, size_t *off)
{
	struct tmr *m = mr_by_key(key);
	uint64_t iova;

	if (!m || m->pd != PD_ATTACK || (m->access & need) != need)
		return false;
	iova = mr_iova(m);
	if (va < iova || n > m->len || va - iova > m->len - n)
		return false;
	*off = m->off + (size_t)(va - iova);
	return true;
}

/* ---- the attack QPs and the oracle of their responder ------------------------- */

#define MAXRQ		8
#define MAXCTL		160
#define MAXWC		160
#define MAXRESP		40
#define MAX_RD		16	/* max_dest_rd_atomic of every attack QP */

/* Handler verdicts besides the NAK statuses 1..3 (8.3). */
#define RX_ACCEPT	0
#define RX_RNR		(-1)
#define RX_DROP		(-2)
#define ST_ACCESS	1
#define ST_INV		2
#define ST_OPERR	3

enum qst { Q_RESET, Q_INIT, Q_RTR, Q_RTS, Q_CERR, Q_UERR };
static const char *const qst_name[] = { "RESET", "INIT", "RTR", "RTS", "ERR(core)", "ERR(user)" };

/* Kinds of receive buffer we post. */
enum { RK_OK, RK_RO, RK_BADKEY };

struct posted {
	uint64_t wr_id;
	uint64_t addr;
	uint32_t len, lkey;
	int slot;		/* receive slot it occupies, -1 none */
};

/* A response the responder owes us, from acceptance to ack + receipt. */
struct resp {
	uint8_t op;
	uint32_t first, n;	/* its psns */
	uint32_t req_psn, len;
	uint8_t *data;		/* READ_RESP: the bytes, as the model had them */
	uint64_t orig;		/* ATOMIC_RESP */
	uint32_t got;		/* frames received */
};

struct ctlexp {
	uint8_t op, status;
	uint32_t ack;
};

struct wcexp {
	uint64_t wr_id;
	int status, opcode;
	uint32_t byte_len;
	int imm;		/* -1: not checked (error), 0: none, 1: imm_val */
	uint32_t imm_val;
};

/* A read or atomic the attack QP itself issues to us (requester side). */
struct p2 {
	bool on, started, got_resp, kill;
	uint8_t op, kill_st;
	int status;		/* ibv_wc_status it will complete with */
	uint32_t psn, rkey, len, rcvd;
	uint64_t va, op0, op1, laddr, wr_id;
	uint32_t lkey;
};

struct aqp {
	int idx;
	bool sync;		/* the probe QP: never attacked */
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	uint32_t qpn, fqpn;
	int gen, access;
	enum qst st;
	/* the responder's receive side, as predicted */
	uint32_t exp;		/* rcv_nxt */
	uint8_t nak_st;
	bool drain;		/* rejected exp; NAKs it once its responses
				 * before are acknowledged (8.3) */
	bool lost_sent, stop_sent, dup_acked;
	uint16_t lost_epoch;	/* of the frame our last LOST answered */
	uint8_t rx_msg;		/* 0, OP_WRITE or OP_SEND: inside a message */
	bool rx_claimed;
	uint32_t rx_off, rx_cap;
	int rx_err;		/* the claimed receive failed with the frame we
				 * rejected: this status, once we enter ERROR
				 * (8.3; 0 = none) */
	uint32_t rx_err_len;
	struct posted rx_cur;
	struct posted rq[MAXRQ];
	int rq_n;
	bool slot_busy[NRSLOT];
	/* its own stream (responses, its requests) */
	bool snd_fixed;
	uint32_t una;		/* its snd_una: what our acks told it */
	uint32_t its_next;	/* received in order up to here */
	uint32_t rx_lo;		/* its_next when judging: it sent at least this */
	uint32_t its_end;	/* psn after everything it will have sent */
	uint16_t ep_seen;	/* the newest epoch of its frames we received:
				 * its tx_epoch is that or a little after (4.5) */
	struct resp resp[MAXRESP];
	int resp_n;
	struct p2 req;
	/* expectations */
	struct ctlexp ctl[MAXCTL];
	int ctl_n, ctl_got;
	struct wcexp wc[MAXWC];
	int wc_n;
	uint32_t exp0;		/* exp at the start of the batch */
	uint32_t last_ack;
	bool probed;
	uint64_t wr_seq;
	/* per-QP statistics */
	uint64_t resets, naks;
};

static struct aqp *aqps;	/* opt_qps attack QPs, then the sync QP */
static int naqp;
static struct aqp *syncq;

static struct aqp *aqp_by_qpn(uint32_t qpn)
{
	int i;

	for (i = 0; i < naqp; i++)
		if (aqps[i].qp && aqps[i].qpn == qpn)
			return &aqps[i];
	return NULL;
}

static void ctl_expect(struct aqp *q, uint8_t op, uint8_t status, uint32_t ack)
{
	if (q->ctl_n == MAXCTL)
		ORACLE_BUG("too many expected control frames on QP %d", q->idx);
	q->ctl[q->ctl_n++] = (struct ctlexp){ op, status, ack };
}

static void wc_expect(struct aqp *q, uint64_t wr_id, int status, int opcode,
		      uint32_t byte_len, int imm, uint32_t imm_val)
{
	if (q->wc_n == MAXWC)
		ORACLE_BUG("too many expected completions on QP %d", q->idx);
	q->wc[q->wc_n++] = (struct wcexp){ wr_id, status, opcode, byte_len, imm, imm_val };
}

/* The QP's own access flags allow it too (verbs). */
static bool qp_allows(const struct aqp *q, int access)
{
	return (q->access & access) == access;
}

static bool tgt(const struct aqp *q, int qp_need, uint32_t key, uint64_t va,
		uint64_t n, int mr_need, size_t *off)
{
	return qp_allows(q, qp_need) && mr_reach(key, va, n, mr_need, off);
}

/* A local buffer (receive, read result): LOCAL_WRITE through lkey. */
static bool local_ok(uint32_t lkey, uint64_t addr, uint64_t n, size_t *off)
{
	return mr_reach(lkey, addr, n, LW, off);
}

/* ---- the responder's receive queue ---- */

static void slot_free(struct aqp *q, const struct posted *p)
{
	if (p->slot >= 0)
		q->slot_busy[p->slot] = false;
}

/* A receive completes (recv_complete): the claimed one. */
static void recv_done(struct aqp *q, int status, int opcode, uint32_t byte_len,
		      int imm, uint32_t imm_val)
{
	wc_expect(q, q->rx_cur.wr_id, status, opcode, byte_len,
		  status == IBV_WC_SUCCESS ? imm : -1, imm_val);
	slot_free(q, &q->rx_cur);
	q->rx_claimed = false;
}

/*
 * The claimed receive fails along with the frame rejected: its error
 * completes when the QP enters ERROR, after whatever of its own succeeds
 * during the drain (8.3; core/recv.c recv_fail).
 */
static void recv_fail(struct aqp *q, int status)
{
	q->rx_err = status;
	q->rx_err_len = q->rx_off;
}

/* ... and there it completes. */
static void recv_fail_done(struct aqp *q)
{
	if (q->rx_err && q->rx_claimed)
		recv_done(q, q->rx_err, -1, q->rx_err_len, -1, 0);
	q->rx_err = 0;
}

/* 7.3: the oldest posted receive, for the message starting now. */
static int claim(struct aqp *q)
{
	if (q->rx_claimed)
		return RX_ACCEPT;
	if (!q->rq_n)
		return RX_RNR;
	q->rx_cur = q->rq[0];
	memmove(q->rq, q->rq + 1, --q->rq_n * sizeof(q->rq[0]));
	q->rx_claimed = true;
	q->rx_off = 0;
	q->rx_cap = q->rx_cur.len > MSG_MAX ? MSG_MAX : q->rx_cur.len;
	return RX_ACCEPT;
}

/* Every receive still posted completes with WR_FLUSH_ERR, in order. */
static void flush_rq(struct aqp *q)
{
	int i;

	for (i = 0; i < q->rq_n; i++) {
		wc_expect(q, q->rq[i].wr_id, IBV_WC_WR_FLUSH_ERR, -1, 0, -1, 0);
		slot_free(q, &q->rq[i]);
	}
	q->rq_n = 0;
}

/* ---- the responder's own stream ---- */

static void resp_drop_all(struct aqp *q)
{
	int i;

	for (i = 0; i < q->resp_n; i++)
		free(q->resp[i].data);
	q->resp_n = 0;
}

/* Responses queued and not fully acknowledged (9: max_dest_rd_atomic). */
static int resp_queued(const struct aqp *q)
{
	int i, n = 0;

	for (i = 0; i < q->resp_n; i++)
		if (psn_diff(q->una, psn_add(q->resp[i].first, q->resp[i].n)) < 0)
			n++;
	return n;
}

static void resp_add(struct aqp *q, uint8_t op, uint32_t req_psn, uint32_t len,
		     const uint8_t *data, uint64_t orig)
{
	struct resp *r;

	if (q->resp_n == MAXRESP)
		ORACLE_BUG("too many responses on QP %d", q->idx);
	r = &q->resp[q->resp_n++];
	memset(r, 0, sizeof(*r));
	r->op = op;
	r->first = q->its_end;
	r->n = op == OP_READ_RESP ? nframes(len, seg_of(OP_READ_RESP)) : 1;
	r->req_psn = req_psn;
	r->len = len;
	r->orig = orig;
	if (len) {
		r->data = malloc(len);
		if (!r->data)
			die("malloc");
		memcpy(r->data, data, len);
	}
	q->its_end = psn_add(q->its_end, r->n);
}

/* Forget responses fully received and fully acknowledged. */
static void resp_prune(struct aqp *q)
{
	int i = 0;

	while (i < q->resp_n) {
		struct resp *r = &q->resp[i];
		uint32_t end = psn_add(r->first, r->n);

		if (r->got == r->n && psn_diff(q->una, end) >= 0) {
			free(r->data);
			memmove(r, r + 1, (size_t)(--q->resp_n - i) * sizeof(*r));
		} else {
			i++;
		}
	}
}

/* 6.3: 1 the ack is fine (and applied), 0 drop_bad_ack, -1 cannot tell. */
static int ack_judge(struct aqp *q, uint32_t a)
{
	if (psn_diff(a, q->una) <= 0)
		return 1;
	if (psn_diff(a, q->rx_lo) <= 0) {	/* it sent at least that much */
		q->una = a;
		return 1;
	}
	if (psn_diff(a, q->its_end) > 0) {	/* beyond anything it can have sent */
		if (q->una == q->its_end)
			return 1;		/* nothing outstanding: ignored */
		if (psn_diff(q->rx_lo, q->una) > 0)
			return 0;
	}
	return -1;
}

/* 1 frames of its stream are unacknowledged, 0 none, -1 cannot tell. */
static int outstanding(const struct aqp *q)
{
	if (psn_diff(q->rx_lo, q->una) > 0)
		return 1;
	if (q->una == q->its_end)
		return 0;
	return -1;
}

enum errkind { ERR_WE_NAKED, ERR_NAKED, ERR_LOCAL, ERR_USER };

static int wc_of_status(uint8_t st)
{
	return st == ST_ACCESS ? IBV_WC_REM_ACCESS_ERR :
	       st == ST_INV ? IBV_WC_REM_INV_REQ_ERR : IBV_WC_REM_OP_ERR;
}

static int p2_opcode(uint8_t op)
{
	return op == OP_READ_REQ ? IBV_WC_RDMA_READ :
	       op == OP_CMP_SWAP ? IBV_WC_COMP_SWAP : IBV_WC_FETCH_ADD;
}

/*
 * 8.2: the QP goes to the error state.  Its own request completes with the
 * error only if it is the message that failed (the NAK named its psn);
 * a NAK the responder sent fails none of its own requests: they are
 * flushed.  Then the claimed receive, then every posted receive.
 */
static void enter_error(struct aqp *q, enum errkind kind, uint8_t st, uint32_t psn)
{
	struct p2 *r = &q->req;
	int wcst = IBV_WC_WR_FLUSH_ERR;

	if (r->on) {
		if (kind == ERR_NAKED && r->started && psn == r->psn)
			wcst = wc_of_status(st);
		wc_expect(q, r->wr_id, wcst, -1, 0, -1, 0);
		r->on = false;
	}
	recv_fail_done(q);
	if (q->rx_claimed) {
		wc_expect(q, q->rx_cur.wr_id, IBV_WC_WR_FLUSH_ERR, -1, 0, -1, 0);
		slot_free(q, &q->rx_cur);
		q->rx_claimed = false;
	}
	q->rx_msg = 0;
	flush_rq(q);
	resp_drop_all(q);
	q->drain = false;
	q->st = kind == ERR_USER ? Q_UERR : Q_CERR;
}

/* Its own read or atomic got its whole response: it completes. */
static void p2_complete(struct aqp *q)
{
	struct p2 *r = &q->req;

	if (!r->on || !r->got_resp)
		return;
	wc_expect(q, r->wr_id, r->status, p2_opcode(r->op),
		  r->op == OP_READ_REQ ? r->len : 8, 0, 0);
	r->on = false;
	if (r->status != IBV_WC_SUCCESS)
		enter_error(q, ERR_LOCAL, 0, 0);
}

/* ---- operations at the target (section 9) ---- */

/* FIRST/LAST bracket each segmented message. */
static bool seg_ok(const struct aqp *q, const struct wf *f, uint8_t kind)
{
	bool first = f->flags & FL_FIRST;

	return first == (q->rx_msg == 0) && (first || q->rx_msg == kind);
}

static int op_write(struct aqp *q, const struct wf *f)
{
	bool imm = f->op == OP_WRITE_IMM;
	size_t off;
	int st;

	if (!seg_ok(q, f, OP_WRITE) || (imm && !(f->flags & FL_LAST)))
		return ST_INV;
	if (imm && (st = claim(q)))
		return st;
	/* checked whole before any byte is touched; zero length: unchecked */
	if (f->paylen) {
		if (!tgt(q, RW, f->rkey, f->va, f->paylen, RW | LW, &off))
			return ST_ACCESS;
		model_put(off, f->pay, f->paylen);
	}
	q->rx_msg = f->flags & FL_LAST ? 0 : OP_WRITE;
	if (imm)
		recv_done(q, IBV_WC_SUCCESS, IBV_WC_RECV_RDMA_WITH_IMM, f->len, 1, f->imm);
	return RX_ACCEPT;
}

static int op_send(struct aqp *q, const struct wf *f)
{
	size_t off;
	int st;

	if (!seg_ok(q, f, OP_SEND))
		return ST_INV;
	if ((f->flags & FL_FIRST) && (st = claim(q)))
		return st;
	if (!q->rx_claimed || f->offset != q->rx_off)
		return ST_INV;
	if (f->paylen > q->rx_cap - q->rx_off) {
		recv_fail(q, IBV_WC_LOC_LEN_ERR);
		return ST_INV;
	}
	if (f->paylen) {
		if (!local_ok(q->rx_cur.lkey, q->rx_cur.addr + q->rx_off, f->paylen, &off)) {
			recv_fail(q, IBV_WC_LOC_PROT_ERR);
			return ST_OPERR;
		}
		model_put(off, f->pay, f->paylen);
	}
	q->rx_off += f->paylen;
	if (!(f->flags & FL_LAST)) {
		q->rx_msg = OP_SEND;
		return RX_ACCEPT;
	}
	/* SEND_INV: inv_rkey must name a memory window bound here; this
	 * program binds none (9) */
	if (f->op == OP_SEND_INV) {
		recv_fail(q, IBV_WC_REM_INV_REQ_ERR);
		return ST_INV;
	}
	q->rx_msg = 0;
	recv_done(q, IBV_WC_SUCCESS, IBV_WC_RECV, q->rx_off, f->op == OP_SEND_IMM, f->imm);
	return RX_ACCEPT;
}

static int op_read(struct aqp *q, const struct wf *f)
{
	size_t off = 0;

	if (q->rx_msg || resp_queued(q) >= MAX_RD)
		return ST_INV;
	if (f->len && !tgt(q, RR, f->rkey, f->va, f->len, RR, &off))
		return ST_ACCESS;
	resp_add(q, OP_READ_RESP, f->psn, f->len, model + off, 0);
	return RX_ACCEPT;
}

static int op_atomic(struct aqp *q, const struct wf *f)
{
	uint64_t orig, v;
	size_t off;

	if (q->rx_msg || resp_queued(q) >= MAX_RD || (f->va & 7))
		return ST_INV;
	if (!tgt(q, RA, f->rkey, f->va, 8, RA | LW, &off))
		return ST_ACCESS;
	memcpy(&orig, model + off, 8);		/* host order, as the CPU sees it */
	if (f->op == OP_CMP_SWAP)
		v = orig == f->op1 ? f->op0 : orig;
	else
		v = orig + f->op0;
	model_put(off, (const uint8_t *)&v, 8);
	resp_add(q, OP_ATOMIC_RESP, f->psn, 0, NULL, orig);
	return RX_ACCEPT;
}

/* Responses to its own oldest read/atomic (9, at the requester). */
static int op_resp(struct aqp *q, const struct wf *f)
{
	struct p2 *r = &q->req;
	size_t off;
	bool last;

	if (!r->on || !r->started || r->got_resp)
		return RX_DROP;
	if (f->op == OP_ATOMIC_RESP) {
		if (r->op == OP_READ_REQ || f->req_psn != r->psn)
			return RX_DROP;
		if (local_ok(r->lkey, r->laddr, 8, &off))
			model_put(off, (const uint8_t *)&f->op0, 8);
		else
			r->status = IBV_WC_LOC_PROT_ERR;
		r->got_resp = true;
		return RX_ACCEPT;
	}
	if (r->op != OP_READ_REQ || f->req_psn != r->psn || f->offset != r->rcvd ||
	    f->paylen > r->len - r->rcvd)
		return RX_DROP;
	last = f->offset + f->paylen == r->len;
	if (!(f->flags & FL_FIRST) != !!f->offset || !(f->flags & FL_LAST) != !last)
		return RX_DROP;
	if (f->paylen) {
		if (local_ok(r->lkey, r->laddr + f->offset, f->paylen, &off))
			model_put(off, f->pay, f->paylen);
		else
			r->status = IBV_WC_LOC_PROT_ERR;
	}
	r->rcvd += f->paylen;
	r->got_resp = last;
	return RX_ACCEPT;
}

/* 8.3: the NAK of exp, and the error. */
static void nak_now(struct aqp *q)
{
	recv_fail_done(q);
	q->naks++;
	ctl_expect(q, OP_ACK, q->nak_st, q->exp);
	enter_error(q, ERR_WE_NAKED, q->nak_st, 0);
}

/* Section 5 and the NAK of 8.3. */
static int aqp_seq(struct aqp *q, const struct wf *f)
{
	int st;

	/* 8.3: from the rejected frame on nothing is taken until the NAK */
	if (q->drain && psn_diff(f->psn, q->exp) >= 0)
		return C_QPERR;
	if (f->psn != q->exp) {
		if (psn_diff(f->psn, q->exp) < 0) {
			if ((f->flags & FL_ACKREQ) || !q->dup_acked)
				q->dup_acked = true;	/* an ACK is owed */
			return C_DUP;
		}
		/* once per gap and round, and for every frame that asks */
		if (!q->stop_sent && (!q->lost_sent || f->rsvd != q->lost_epoch ||
				      (f->flags & FL_ACKREQ))) {
			q->lost_sent = true;
			q->lost_epoch = f->rsvd;
			ctl_expect(q, OP_LOST, 0, q->exp);
		}
		return C_OOS;
	}
	switch (f->op) {
	case OP_WRITE:
	case OP_WRITE_IMM:
		st = op_write(q, f);
		break;
	case OP_SEND:
	case OP_SEND_IMM:
	case OP_SEND_INV:
		st = op_send(q, f);
		break;
	case OP_READ_REQ:
		st = op_read(q, f);
		break;
	case OP_CMP_SWAP:
	case OP_FETCH_ADD:
		st = op_atomic(q, f);
		break;
	default:
		st = op_resp(q, f);
		break;
	}
	if (st == RX_ACCEPT) {
		q->exp = psn_add(q->exp, 1);
		q->lost_sent = q->stop_sent = q->dup_acked = false;
		if (f->op == OP_READ_RESP || f->op == OP_ATOMIC_RESP)
			p2_complete(q);
		return C_ACC;
	}
	if (st == RX_RNR) {
		q->stop_sent = true;
		ctl_expect(q, OP_STOP, 0, q->exp);
		return C_RNR;
	}
	if (st == RX_DROP)
		return C_BADRESP;
	q->nak_st = (uint8_t)st;
	/* 8.3: its responses to earlier requests go first */
	if (resp_queued(q))
		q->drain = true;
	else
		nak_now(q);
	return C_REMERR;
}

/* The highest bit set in a LOST's placed map, -1 none. */
static int map_top(const uint8_t *map)
{
	int d;

	for (d = 255; d >= 0; d--)
		if (map[d / 8] >> (d % 8) & 1)
			return d;
	return -1;
}

/* Its read or atomic whose response is next to come: a NAK may name it. */
static bool names_pending_rd(const struct aqp *q, uint32_t k)
{
	return q->req.on && q->req.started && !q->req.got_resp && k == q->req.psn;
}

/*
 * 6.4, first part: every field of a control frame against the responder's
 * own state, before anything is taken from it (its ack_psn neither).  Its
 * rcv_nxt is exp, its snd_una una, its snd_max somewhere in
 * [rx_lo, its_end], its tx_epoch ep_seen or a little after.  1 every field
 * is in state, 0 one is not (drop_bad_ack), -1 cannot tell.
 */
static int ctl_in_state(const struct aqp *q, const struct wf *f)
{
	uint32_t k = f->ack;
	int32_t ahead = psn_diff(f->psn, q->exp);
	int r = 1, top;

	/* psn, the peer's snd_max: within WINDOW_MAX of rcv_nxt either way */
	if (ahead > WINDOW_MAX || ahead < -WINDOW_MAX)
		return 0;
	/* k: not after snd_max, at most WINDOW_MAX before snd_una; a NAK
	 * may name the read or atomic it waits on (8.3) */
	if (!(f->op == OP_ACK && f->status && names_pending_rd(q, k))) {
		if (psn_diff(k, q->its_end) > 0 || psn_diff(k, q->una) < -WINDOW_MAX)
			return 0;
		if (psn_diff(k, q->rx_lo) > 0)
			r = -1;
	}
	if (f->op != OP_LOST)
		return r;
	/* its round has begun: not after tx_epoch (16-bit serial); the
	 * generators keep tx_epoch - ep_seen far below 0x4000 */
	if ((uint16_t)(f->rsvd - q->ep_seen) >= 0x4000 &&
	    (uint16_t)(f->rsvd - q->ep_seen) <= 0x8000)
		return 0;
	if ((uint16_t)(q->ep_seen - f->rsvd) >= 0x4000)
		r = -1;		/* far behind, or too near "after" to tell */
	/* seen in k + 1 .. snd_max - 1 */
	if (psn_diff(f->seen, k) <= 0 || psn_diff(f->seen, q->its_end) >= 0)
		return 0;
	if (psn_diff(f->seen, q->rx_lo) >= 0)
		r = -1;
	/* no map bit for k itself, none for a psn at or after snd_max */
	top = map_top(f->map);
	if (top == 0 || (top > 0 && psn_diff(psn_add(k, (uint32_t)top), q->its_end) >= 0))
		return 0;
	if (top > 0 && psn_diff(psn_add(k, (uint32_t)top), q->rx_lo) >= 0)
		r = -1;
	return r;
}

/* 6.4: control frames at the sender. */
static int aqp_ctl(struct aqp *q, const struct wf *f)
{
	int out;

	switch (f->op) {
	case OP_ACK:
		if (!f->status)
			return C_ACK;
		out = outstanding(q);
		if (f->ack == q->una && out < 0)
			return C_AMBIG;
		/* or the psn of its read/atomic whose response is next to
		 * come (its only one: the responder could not build it) */
		if ((f->ack != q->una || !out) && !names_pending_rd(q, f->ack))
			return C_BADACK;
		enter_error(q, ERR_NAKED, f->status, f->ack);
		return C_NAK;
	case OP_LOST:
		return C_LOST;
	case OP_STOP:
		return C_STOP;
	default:
		return C_GO;
	}
}

/* A valid frame addressed to attack QP q (mbcf_qp_rx, then the core). */
static int aqp_judge(struct aqp *q, const struct wf *f, const uint8_t *src)
{
	int a;

	/* a datagram is for a UD QP: a connection takes none, whatever its
	 * state (the spec has no word on it yet; one verdict, nothing else) */
	if (f->op == OP_DGRAM)
		return C_WQP;
	/* not connected (RESET/INIT, or moved to ERR by us) or not the peer */
	if (q->st == Q_RESET || q->st == Q_INIT || q->st == Q_UERR ||
	    !mac_eq(src, PEER_MAC) || f->src != q->fqpn)
		return C_WQP;
	/* 3: until RTS gives it, the peer's first frame fixes its stream */
	if (!q->snd_fixed && q->st != Q_CERR) {
		q->snd_fixed = true;
		q->una = q->its_next = q->rx_lo = q->its_end = f->ack;
	}
	if (q->st == Q_CERR) {
		/* 8.3: a retransmission of the rejected frame gets the NAK again */
		if (op_seq(f->op) && f->psn == q->exp && q->nak_st)
			ctl_expect(q, OP_ACK, q->nak_st, q->exp);
		return C_QPERR;
	}
	/* 6.4: a control frame with a field out of state changes nothing */
	if (!op_seq(f->op)) {
		a = ctl_in_state(q, f);
		if (a < 0)
			return C_AMBIG;
		if (!a)
			return C_BADACK;
	}
	a = ack_judge(q, f->ack);
	if (a < 0)
		return C_AMBIG;
	if (!a)
		return C_BADACK;
	a = op_seq(f->op) ? aqp_seq(q, f) : aqp_ctl(q, f);
	/* after the frame: its ack may have covered the last response */
	if (q->drain && !resp_queued(q))
		nak_now(q);
	return a;
}

/* ---- the honest connection, as far as the oracle can know it ------------------ */

/*
 * What the program knows of one honest QP: bounds on its stream and on
 * what it expects, from the work requests posted and completed.
 */
struct hq {
	struct ibv_qp *qp;
	uint32_t qpn, peer_qpn;
	const uint8_t *peer_mac;
	uint32_t una_lo, smax_hi;	/* its snd_una >= una_lo, snd_max <= smax_hi */
	uint32_t rcv_lo, rcv_hi;	/* its rcv_nxt in [rcv_lo, rcv_hi] */
};

static struct hq hq0, hq1;		/* the responder on mbcf0, the requester on mbcf1 */

/*
 * Spoofs against the honest pair use psns that are certainly stale or
 * certainly ahead; anything else the oracle cannot judge.
 */
/*
 * 6.4 against the honest QP, from the bounds the program knows: its
 * rcv_nxt in [rcv_lo, rcv_hi], snd_una >= una_lo, snd_max <= smax_hi (a
 * read it waits on is at or after una_lo: no NAK naming one is older).
 * Its tx_epoch is unknown, but far below 0x8000 (its go-backs are few):
 * epoch 0 is a round it has had.  1 in state, 0 not, -1 cannot tell.
 */
#define HQ_DRIFT	64

static int honest_ctl_in_state(const struct hq *h0, const struct wf *f)
{
	struct hq hb = *h0, *h = &hb;
	uint32_t k = f->ack;
	int r = 1, top;

	/*
	 * The bounds were taken before the frame left: frames are queued
	 * (QMAX) and one honest_step() may post H_INFLIGHT requests of a
	 * few frames each before they are flushed.  HQ_DRIFT psns covers
	 * that many times over; rcv_nxt and snd_max may be that far beyond.
	 */
	h->rcv_hi = psn_add(h->rcv_hi, HQ_DRIFT);
	h->smax_hi = psn_add(h->smax_hi, HQ_DRIFT);

	if (psn_diff(f->psn, h->rcv_hi) > WINDOW_MAX || psn_diff(f->psn, h->rcv_lo) < -WINDOW_MAX)
		return 0;
	if (psn_diff(f->psn, h->rcv_lo) > WINDOW_MAX || psn_diff(f->psn, h->rcv_hi) < -WINDOW_MAX)
		r = -1;
	if (psn_diff(k, h->smax_hi) > 0 || psn_diff(k, h->una_lo) < -WINDOW_MAX)
		return 0;
	if (psn_diff(k, h->una_lo) > 0 || psn_diff(k, h->smax_hi) < -WINDOW_MAX)
		r = -1;
	if (f->op != OP_LOST)
		return r;
	if (f->rsvd)
		r = -1;
	if (psn_diff(f->seen, k) <= 0 || psn_diff(f->seen, h->smax_hi) >= 0)
		return 0;
	if (psn_diff(f->seen, h->una_lo) >= 0)
		r = -1;
	top = map_top(f->map);
	if (top == 0 || (top > 0 && psn_diff(psn_add(k, (uint32_t)top), h->smax_hi) >= 0))
		return 0;
	if (top > 0 && psn_diff(psn_add(k, (uint32_t)top), h->una_lo) >= 0)
		r = -1;
	return r;
}

static int honest_judge(const struct hq *h, const struct wf *f, const uint8_t *src)
{
	bool nak = f->op == OP_ACK && f->status;
	int r;

	if (f->op == OP_DGRAM || !mac_eq(src, h->peer_mac) || f->src != h->peer_qpn)
		return C_WQP;
	if (!op_seq(f->op)) {
		r = honest_ctl_in_state(h, f);
		if (r < 0)
			return C_AMBIG;
		if (!r)
			return C_BADACK;
	}
	if (psn_diff(f->ack, h->una_lo) >= 0) {
		/* ahead of all it sent: dropped, or ignored and then a NAK
		 * naming a psn that is not outstanding: drop_bad_ack both */
		if (nak && psn_diff(f->ack, h->smax_hi) > 0)
			return C_BADACK;
		if (nak || psn_diff(f->ack, h->una_lo) > 0)
			return C_AMBIG;
	}
	if (op_seq(f->op)) {
		if (psn_diff(f->psn, h->rcv_lo) < 0)
			return C_DUP;
		if (psn_diff(f->psn, h->rcv_hi) > 0)
			return C_OOS;
		return C_AMBIG;
	}
	switch (f->op) {
	case OP_ACK:
		return f->status ? C_BADACK : C_ACK;
	case OP_LOST:
		return C_LOST;
	case OP_STOP:
		return C_STOP;
	default:
		return C_GO;
	}
}

/* The oracle: the verdict counter of one frame on device dev, in order. */
static int judge(int dev, const uint8_t *dst, const uint8_t *src,
		 const uint8_t *b, size_t len)
{
	struct aqp *q;
	struct wf f;
	int v;

	if (!mac_eq(dst, dev_mac[dev]))
		return C_NONE;		/* PACKET_OTHERHOST: not ours */
	v = wf_parse(b, len, &f);
	if (v != C_OK)
		return v;
	if (dev == 1)
		return f.dst == hq1.qpn ? honest_judge(&hq1, &f, src) : C_WQP;
	if (f.dst == hq0.qpn)
		return honest_judge(&hq0, &f, src);
	q = aqp_by_qpn(f.dst);
	return q ? aqp_judge(q, &f, src) : C_WQP;
}

/* ---- raw sockets ---------------------------------------------------------------- */

#define FMAX		9232	/* vnet header + a frame at MTU 9000 + slack */
#define QMAX		256
/* packet_snd() makes the skb non-linear only when 16 + len >= PAGE_SIZE */
#define NONLINEAR_MIN	(PAGE - 16)

struct txq {
	int fd;
	bool vnet;
	int n;
	struct mmsghdr mh[QMAX];
	struct iovec iov[QMAX][2];
	struct virtio_net_hdr vh[QMAX];
	uint8_t buf[QMAX][FMAX];
	uint64_t frames, nonlinear, calls;
	double busy_s;
};

static struct txq *tq_to0, *tq_to1;	/* frames to mbcf0 (out of veth1), to mbcf1 */
static int rx_fd;			/* mbcf0's frames to PEER_MAC, seen on veth1 */
static int self_ns_fd;

static void enter_ns1(void)
{
	int fd = open(NS1_PATH, O_RDONLY | O_CLOEXEC);

	if (fd < 0 || setns(fd, CLONE_NEWNET))
		die("setns %s", NS1_PATH);
	close(fd);
}

static void leave_ns1(void)
{
	if (setns(self_ns_fd, CLONE_NEWNET))
		die("setns back");
}

/* An AF_PACKET socket on ifname (in the current namespace), bound to proto. */
static int packet_socket(const char *ifname, uint16_t proto, bool vnet,
			 const struct sock_fprog *filter, uint8_t *mac)
{
	struct sockaddr_ll sll = { .sll_family = AF_PACKET };
	struct ifreq ifr;
	int fd, one = 1;

	/* protocol 0 until bound: nothing is queued before the filter is on */
	fd = socket(AF_PACKET, SOCK_RAW | SOCK_CLOEXEC, 0);
	if (fd < 0)
		die("socket(AF_PACKET)");
	memset(&ifr, 0, sizeof(ifr));
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", ifname);
	if (ioctl(fd, SIOCGIFINDEX, &ifr))
		die("SIOCGIFINDEX %s", ifname);
	sll.sll_ifindex = ifr.ifr_ifindex;
	if (ioctl(fd, SIOCGIFHWADDR, &ifr))
		die("SIOCGIFHWADDR %s", ifname);
	if (mac)
		memcpy(mac, ifr.ifr_hwaddr.sa_data, 6);
	if (vnet && setsockopt(fd, SOL_PACKET, PACKET_VNET_HDR, &one, sizeof(one)))
		die("PACKET_VNET_HDR");
	if (filter && setsockopt(fd, SOL_SOCKET, SO_ATTACH_FILTER, filter, sizeof(*filter)))
		die("SO_ATTACH_FILTER");
	sll.sll_protocol = htons(proto);
	if (bind(fd, (struct sockaddr *)&sll, sizeof(sll)))
		die("bind %s", ifname);
	return fd;
}

static struct txq *txq_new(int fd, bool vnet)
{
	struct txq *t = calloc(1, sizeof(*t));
	int i;

	if (!t)
		die("calloc");
	t->fd = fd;
	t->vnet = vnet;
	for (i = 0; i < QMAX; i++) {
		t->mh[i].msg_hdr.msg_iov = t->iov[i];
		t->mh[i].msg_hdr.msg_iovlen = vnet ? 2 : 1;
		if (vnet) {
			t->iov[i][0].iov_base = &t->vh[i];
			t->iov[i][0].iov_len = sizeof(t->vh[i]);
		}
		t->iov[i][vnet].iov_base = t->buf[i];
	}
	return t;
}

static void txq_flush(struct txq *t)
{
	double t0 = now_s();
	int done = 0, r;

	while (done < t->n) {
		r = sendmmsg(t->fd, t->mh + done, (unsigned int)(t->n - done), 0);
		if (r < 0) {
			if (errno == EINTR || errno == EAGAIN || errno == ENOBUFS) {
				usleep(200);
				continue;
			}
			die("sendmmsg (frame %d of %d)", done, t->n);
		}
		done += r;
		t->calls++;
	}
	t->frames += (uint64_t)t->n;
	t->n = 0;
	t->busy_s += now_s() - t0;
}

static uint64_t frames_sent(void)
{
	return tq_to0->frames + tq_to1->frames + tq_to0->n + tq_to1->n;
}

/*
 * The frame bytes of the last emit(), for -v and for failure reports.
 */
static void dump_frame(const char *why, const uint8_t *b, size_t len)
{
	size_t i;

	printf("%s (%zu bytes):", why, len);
	for (i = 0; i < len && i < 64; i++)
		printf(" %02x", b[i]);
	printf("%s\n", len > 64 ? " ..." : "");
}

/*
 * Send one MBCF frame (len bytes after the Ethernet header) to device dev
 * from src to dst.  The oracle judges it right here, in the order the
 * device will see it.  `linear`: bytes of the frame (Ethernet header
 * included) packet_snd puts in the skb's linear part when the frame is
 * long enough to be built with page fragments; 0 leaves the default (14).
 */
static bool vlan_ok;		/* frames may get an 802.1Q tag now */
static uint64_t vlan_frames;
static uint64_t counted;	/* frames the devices count (not other hosts') */

static int emit_split(int dev, const uint8_t *dst, const uint8_t *src,
		      const uint8_t *body, size_t len, unsigned int linear)
{
	struct txq *t = dev ? tq_to1 : tq_to0;
	bool tag = dev == 0 && vlan_ok && pct(3);
	uint16_t vid = tag && pct(30) ? (uint16_t)range(1, 4094) : 0;
	size_t hl = tag ? 18 : 14, flen = hl + len;
	uint8_t *b;
	int v;

	if (len > mtu)
		ORACLE_BUG("frame of %zu bytes over the MTU", len);
	if (t->n == QMAX)
		txq_flush(t);
	b = t->buf[t->n];
	memcpy(b, dst, 6);
	memcpy(b + 6, src, 6);
	/*
	 * An 802.1Q tag, now and then: Linux strips a priority tag (VID 0)
	 * before the frame reaches mbcf (skb_vlan_untag moves the headers),
	 * and makes a frame of another VLAN PACKET_OTHERHOST: never counted;
	 * nor is a tagged frame with less than 2 bytes after the tag
	 * (skb_vlan_untag frees it: it reads the 2 bytes behind the tag).
	 */
	if (tag) {
		put16(b + 12, 0x8100);
		put16(b + 14, (uint16_t)(below(8) << 13 | vid));
		vlan_frames++;
		if (linear)
			linear += 4;
	}
	put16(b + hl - 2, ETH_P_MBCF);
	memcpy(b + hl, body, len);
	v = vid || (tag && len < 2) ? C_NONE : judge(dev, dst, src, b + hl, len);
	if (v == C_AMBIG) {
		dump_frame("ambiguous frame", b + hl, len);
		ORACLE_BUG("the oracle cannot judge this frame");
	}
	if (v != C_NONE) {
		counted++;
		pred[dev][C_RX]++;
		pred[dev][v]++;
		batch_hist[dev][v]++;
	}
	if (opt_verbose > 1) {
		char what[96];

		snprintf(what, sizeof(what), "dev %d %s%s -> %s", dev, tag ? "tagged " : "",
			 len > 1 ? op_name(b[hl + 1]) : "-", v >= 0 ? ctr_name[v] : "not counted");
		dump_frame(what, b + hl, len);
	}
	if (t->vnet) {
		memset(&t->vh[t->n], 0, sizeof(t->vh[t->n]));
		t->vh[t->n].gso_type = VIRTIO_NET_HDR_GSO_NONE;
		if (linear > flen)
			linear = (unsigned int)flen;
		t->vh[t->n].hdr_len = (uint16_t)linear;	/* little endian (x86) */
		if (flen >= NONLINEAR_MIN && linear < flen)
			t->nonlinear++;
	}
	t->iov[t->n][t->vnet].iov_len = flen;
	t->n++;
	return v;
}

/* Frames long enough for fragments get a random split point. */
static unsigned int random_split(size_t len)
{
	size_t flen = 14 + len;

	if (flen < NONLINEAR_MIN)
		return 0;
	switch (below(5)) {
	case 0:
		return 0;				/* Ethernet header only */
	case 1:
		return 14 + range(1, MB_HDR - 1);	/* inside the common header */
	case 2:
		return 14 + range(MB_HDR, 56);		/* inside the extension */
	case 3:
		return (unsigned int)range(14 + 57, (uint32_t)flen - 1);
	default:
		return (unsigned int)flen;		/* all linear */
	}
}

static int emit(int dev, const uint8_t *dst, const uint8_t *src,
		const uint8_t *body, size_t len)
{
	return emit_split(dev, dst, src, body, len, random_split(len));
}

/* ---- verbs: devices, MRs, attack QPs ------------------------------------------- */

static struct ibv_context *ctx0, *ctx1;
static struct ibv_pd *pd_attack, *pd_other;
static union ibv_gid peer_gid;		/* fe80:: + EUI-64 of PEER_MAC */

static struct ibv_context *open_dev(const char *name)
{
	struct ibv_device **list = ibv_get_device_list(NULL);
	struct ibv_context *c = NULL;
	int i;

	if (!list)
		die("ibv_get_device_list");
	for (i = 0; list[i]; i++)
		if (!strcmp(ibv_get_device_name(list[i]), name))
			c = ibv_open_device(list[i]);
	ibv_free_device_list(list);
	if (!c)
		die("cannot open %s", name);
	return c;
}

/* The link-local GID of a MAC: the RDMA core derives the MAC back from it. */
static void gid_of_mac(union ibv_gid *g, const uint8_t *mac)
{
	memset(g, 0, sizeof(*g));
	g->raw[0] = 0xfe;
	g->raw[1] = 0x80;
	g->raw[8] = mac[0] ^ 2;
	g->raw[9] = mac[1];
	g->raw[10] = mac[2];
	g->raw[11] = 0xff;
	g->raw[12] = 0xfe;
	g->raw[13] = mac[3];
	g->raw[14] = mac[4];
	g->raw[15] = mac[5];
}

static void reg(enum mrid id)
{
	struct tmr *m = &mrs[id];
	struct ibv_pd *pd = m->pd == PD_OTHER ? pd_other : pd_attack;

	if (m->iova)
		m->mr = ibv_reg_mr_iova(pd, arena + m->off, m->len, m->iova, m->access);
	else
		m->mr = ibv_reg_mr(pd, arena + m->off, m->len, m->access);
	if (!m->mr)
		die("ibv_reg_mr %s", m->name);
	m->key = m->mr->rkey;
	if (m->mr->lkey != m->key)
		die("MR %s: lkey %#x != rkey %#x", m->name, m->mr->lkey, m->key);
	m->live = true;
}

static void arena_setup(void)
{
	int i;

	mrs[M_AREA].len = (size_t)opt_qps * QAREA_PAGES * PAGE;
	arena_len = mrs[M_AREA].off + mrs[M_AREA].len + PAGE;
	arena = mmap(NULL, arena_len, PROT_READ | PROT_WRITE,
		     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	model = malloc(arena_len);
	if (arena == MAP_FAILED || !model)
		die("arena");
	fill_rand(arena, arena_len);		/* the background: every byte known */
	memcpy(model, arena, arena_len);
	pd_attack = ibv_alloc_pd(ctx0);
	pd_other = ibv_alloc_pd(ctx0);
	if (!pd_attack || !pd_other)
		die("ibv_alloc_pd");
	for (i = 0; i < NMR; i++)
		if (i != M_HON)
			reg(i);
	/* a stale key: registered, then gone */
	if (ibv_dereg_mr(mrs[M_DEREG].mr))
		die("ibv_dereg_mr");
	mrs[M_DEREG].mr = NULL;
	mrs[M_DEREG].live = false;
}

static int modify(struct ibv_qp *qp, struct ibv_qp_attr *a, int mask, const char *what)
{
	if (ibv_modify_qp(qp, a, mask)) {
		fail("ibv_modify_qp(%s) on QP %u: %s", what, qp->qp_num, strerror(errno));
		return -1;
	}
	return 0;
}

static int aqp_to_init(struct aqp *q)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .port_num = 1,
				 .qp_access_flags = q->access };

	return modify(q->qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
		      IBV_QP_ACCESS_FLAGS, "INIT");
}

static int aqp_to_rtr(struct aqp *q)
{
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_RTR, .path_mtu = IBV_MTU_4096,
		.dest_qp_num = q->fqpn, .rq_psn = q->exp,
		.max_dest_rd_atomic = MAX_RD, .min_rnr_timer = 1,
	};

	a.ah_attr.is_global = 1;
	a.ah_attr.grh.dgid = peer_gid;
	a.ah_attr.grh.hop_limit = 1;
	a.ah_attr.port_num = 1;
	return modify(q->qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
		      IBV_QP_DEST_QPN | IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
		      IBV_QP_MIN_RNR_TIMER, "RTR");
}

/* timeout 20: 4.3 s before it retransmits anything we hold back. */
static int aqp_to_rts(struct aqp *q, uint32_t sq_psn)
{
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_RTS, .sq_psn = sq_psn, .timeout = 20,
		.retry_cnt = 7, .rnr_retry = 7, .max_rd_atomic = MAX_RD,
	};

	return modify(q->qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT |
		      IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC,
		      "RTS");
}

static int aqp_to_state(struct aqp *q, enum ibv_qp_state s, const char *what)
{
	struct ibv_qp_attr a = { .qp_state = s };

	return modify(q->qp, &a, IBV_QP_STATE, what);
}

/* A psn to start at, now and then right before the 24-bit wrap. */
static uint32_t start_psn(void)
{
	return pct(30) ? PSN_MASK - below(64) : (uint32_t)rnd() & PSN_MASK;
}

static void aqp_clear_oracle(struct aqp *q)
{
	resp_drop_all(q);
	q->nak_st = 0;
	q->drain = false;
	q->lost_sent = q->stop_sent = q->dup_acked = false;
	q->rx_msg = 0;
	q->rx_claimed = false;
	q->rx_err = 0;
	q->rq_n = 0;
	memset(q->slot_busy, 0, sizeof(q->slot_busy));
	q->snd_fixed = false;
	q->ep_seen = 0;
	memset(&q->req, 0, sizeof(q->req));
	q->probed = false;
}

/* The oracle's side of RTR: the receive side starts at exp. */
static void aqp_rtr_state(struct aqp *q)
{
	q->st = Q_RTR;
	q->exp0 = q->exp;
	q->last_ack = psn_sub(q->exp, 1);
}

/* RTS gives the send side, unless the peer's first frame fixed it (3). */
static void aqp_rts_state(struct aqp *q, uint32_t sq_psn)
{
	q->st = Q_RTS;
	if (!q->snd_fixed) {
		q->snd_fixed = true;
		q->una = q->its_next = q->rx_lo = q->its_end = sq_psn;
	}
}

static void aqp_create(struct aqp *q, int idx, bool sync)
{
	struct ibv_qp_init_attr ia = {
		.qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 16, .max_recv_wr = 16, .max_send_sge = 1,
			 .max_recv_sge = 1 },
	};
	uint32_t sq;

	memset(q, 0, sizeof(*q));
	q->idx = idx;
	q->sync = sync;
	q->cq = ibv_create_cq(ctx0, 512, NULL, NULL, 0);
	if (!q->cq)
		die("ibv_create_cq");
	ia.send_cq = ia.recv_cq = q->cq;
	q->qp = ibv_create_qp(pd_attack, &ia);
	if (!q->qp)
		die("ibv_create_qp");
	q->qpn = q->qp->qp_num;
	/* QP 1 cannot be read or hit by atomics, QP 2 cannot be written */
	q->access = LW | RW | RR | RA;
	if (idx == 1)
		q->access = LW | RW;
	if (idx == 2)
		q->access = LW | RR | RA;
	q->fqpn = 0xF00000u | (uint32_t)idx << 8;
	q->exp = start_psn();
	sq = start_psn();
	if (aqp_to_init(q) || aqp_to_rtr(q))
		die("connect attack QP %d", idx);
	aqp_rtr_state(q);
	if (aqp_to_rts(q, sq))
		die("RTS attack QP %d", idx);
	aqp_rts_state(q, sq);
}

/* ---- completions of the attack QPs ---------------------------------------------- */

static const char *wcs(int st)
{
	return ibv_wc_status_str((enum ibv_wc_status)st);
}

static void wc_mismatch(struct aqp *q, const struct wcexp *e, const struct ibv_wc *wc,
			const char *what)
{
	failk(F_COMPLETION, "QP %d (qpn %u) completion %s: expected wr_id %#llx %s op %d len %u imm %d/%#x, "
	     "got wr_id %#llx %s op %d len %u flags %#x imm %#x", q->idx, q->qpn, what,
	     (unsigned long long)e->wr_id, wcs(e->status), e->opcode, e->byte_len,
	     e->imm, e->imm_val, (unsigned long long)wc->wr_id, wcs(wc->status),
	     wc->opcode, wc->byte_len, wc->wc_flags, ntohl(wc->imm_data));
}

static bool wc_matches(const struct wcexp *e, const struct ibv_wc *wc)
{
	if (wc->wr_id != e->wr_id || (int)wc->status != e->status)
		return false;
	if (e->status != IBV_WC_SUCCESS)
		return true;	/* verbs: opcode and length undefined on errors */
	if ((int)wc->opcode != e->opcode || wc->byte_len != e->byte_len)
		return false;
	if (e->imm >= 0 && !!(wc->wc_flags & IBV_WC_WITH_IMM) != e->imm)
		return false;
	/* the immediate arrives in network order, as it was on the wire */
	return e->imm != 1 || ntohl(wc->imm_data) == e->imm_val;
}

/* Every expected completion, in order, and nothing else. */
static void aqp_check_cq(struct aqp *q)
{
	struct ibv_wc wc[32];
	double end = now_s() + 2;
	int i = 0, n, k;

	while (i < q->wc_n) {
		n = ibv_poll_cq(q->cq, 32, wc);
		if (n < 0) {
			fail("ibv_poll_cq QP %d: %d", q->idx, n);
			break;
		}
		if (!n) {
			if (now_s() > end) {
				fail("QP %d: %d of %d expected completions missing (next wr_id %#llx %s)",
				     q->idx, q->wc_n - i, q->wc_n,
				     (unsigned long long)q->wc[i].wr_id, wcs(q->wc[i].status));
				desync = true;
				break;
			}
			usleep(500);
			continue;
		}
		for (k = 0; k < n; k++, i++) {
			if (i >= q->wc_n) {
				wc_mismatch(q, &(struct wcexp){ 0, -1, -1, 0, -1, 0 }, &wc[k],
					    "not expected");
				desync = true;
				continue;
			}
			if (!wc_matches(&q->wc[i], &wc[k])) {
				wc_mismatch(q, &q->wc[i], &wc[k], "differs");
				/* a wrong status is a finding; a wrong request, lost track */
				if (wc[k].wr_id != q->wc[i].wr_id)
					desync = true;
			}
		}
	}
	n = ibv_poll_cq(q->cq, 32, wc);
	for (k = 0; k < n; k++) {
		wc_mismatch(q, &(struct wcexp){ 0, -1, -1, 0, -1, 0 }, &wc[k], "extra");
		desync = true;
	}
	q->wc_n = 0;
}

/* ---- receives and the attack QP's own requests ------------------------------------ */

static uint64_t next_wr_id(struct aqp *q)
{
	return (uint64_t)q->idx << 48 | (uint64_t)q->gen << 32 | ++q->wr_seq;
}

/*
 * Post one receive: usually a free slot of the QP's area, now and then one
 * the responder may not write (in read-only M_R, or with a made-up lkey).
 * Posting after a STOP makes the responder say GO (7.3).
 */
static bool post_recv_one(struct aqp *q)
{
	struct posted p = { .wr_id = next_wr_id(q), .slot = -1 };
	struct ibv_sge sg;
	struct ibv_recv_wr wr = { .wr_id = p.wr_id, .sg_list = &sg, .num_sge = 1 }, *bad;
	int s, kind = pct(96) ? RK_OK : pct(50) ? RK_RO : RK_BADKEY;
	uint32_t off;

	if (q->rq_n == MAXRQ)
		return false;
	for (s = 0; s < NRSLOT && q->slot_busy[s]; s++)
		;
	if (s == NRSLOT && kind != RK_RO)
		return false;
	p.len = pct(60) ? range(1, 2000) : range(2001, RCAP_MAX);
	if (kind == RK_RO) {
		off = below((uint32_t)mrs[M_R].len - 1);
		p.len = range(1, (uint32_t)mrs[M_R].len - off);
		p.addr = arena_va(mrs[M_R].off + off);
		p.lkey = mrs[M_R].key;
	} else {
		p.slot = s;
		p.addr = arena_va(qarea(q->idx) + (size_t)s * RSTRIDE);
		p.lkey = kind == RK_OK ? mrs[M_AREA].key : (uint32_t)rnd() | 1;
		q->slot_busy[s] = true;
	}
	sg = (struct ibv_sge){ .addr = p.addr, .length = p.len, .lkey = p.lkey };
	if (ibv_post_recv(q->qp, &wr, &bad)) {
		fail("ibv_post_recv QP %d: %s", q->idx, strerror(errno));
		slot_free(q, &p);
		return false;
	}
	q->rq[q->rq_n++] = p;
	if (q->stop_sent) {
		q->stop_sent = false;
		ctl_expect(q, OP_GO, 0, q->exp);
	}
	return true;
}

/*
 * The attack QP reads from us or runs an atomic on us; we answer in the
 * next batch (hostile answers first), or end it with a NAK naming the
 * request (kill: we then never acknowledge the request before the NAK).
 */
static void post_own_request(struct aqp *q)
{
	struct p2 *r = &q->req;
	struct ibv_sge sg;
	struct ibv_send_wr wr = { .sg_list = &sg, .num_sge = 1,
				  .send_flags = IBV_SEND_SIGNALED }, *bad;

	memset(r, 0, sizeof(*r));
	r->wr_id = next_wr_id(q);
	r->op = pct(60) ? OP_READ_REQ : pct(50) ? OP_FETCH_ADD : OP_CMP_SWAP;
	r->va = rnd();
	r->rkey = (uint32_t)rnd();
	r->len = r->op == OP_READ_REQ ? (pct(10) ? 0 : range(1, RCAP_MAX)) : 8;
	r->laddr = arena_va(qarea(q->idx) + (r->op == OP_READ_REQ ? QA_READ : QA_ATOMIC));
	/* (into memory it may not write: refused at post, verbs_errors.c) */
	r->lkey = mrs[M_AREA].key;
	r->status = IBV_WC_SUCCESS;
	r->kill = pct(25);
	r->kill_st = (uint8_t)range(1, 3);
	wr.wr_id = r->wr_id;
	sg = (struct ibv_sge){ .addr = r->laddr, .length = r->len, .lkey = r->lkey };
	if (r->op == OP_READ_REQ) {
		wr.opcode = IBV_WR_RDMA_READ;
		wr.wr.rdma.remote_addr = r->va;
		wr.wr.rdma.rkey = r->rkey;
	} else {
		r->op0 = rnd();
		r->op1 = rnd();
		wr.opcode = r->op == OP_FETCH_ADD ? IBV_WR_ATOMIC_FETCH_AND_ADD :
						    IBV_WR_ATOMIC_CMP_AND_SWP;
		r->va &= ~7ull;
		wr.wr.atomic.remote_addr = r->va;
		wr.wr.atomic.rkey = r->rkey;
		wr.wr.atomic.compare_add = r->op == OP_FETCH_ADD ? r->op0 : r->op1;
		wr.wr.atomic.swap = r->op0;
	}
	if (ibv_post_send(q->qp, &wr, &bad)) {
		fail("ibv_post_send QP %d: %s", q->idx, strerror(errno));
		return;
	}
	r->on = true;
	r->psn = q->its_end;		/* everything before it was received */
	q->its_end = psn_add(q->its_end, 1);
}

/* ---- frame generators: attack QPs --------------------------------------------------- */

static uint8_t scratch[FMAX], pay[FMAX];
static uint32_t locked;		/* MRs read in this batch: no writes to them (the
				 * response is built from memory when sent) */
static int resp_budget[64];	/* response frames asked for per QP in this batch */

/* Hostile actions of this batch, printed when memory differs. */
static char hlog[64][120];
static int hlog_n;

static void hlog_add(const struct aqp *q, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (hlog_n == 64)
		return;
	n = snprintf(hlog[hlog_n], sizeof(hlog[0]), "QP %d psn %#x: ", q->idx, q->exp);
	va_start(ap, fmt);
	vsnprintf(hlog[hlog_n] + n, sizeof(hlog[0]) - (size_t)n, fmt, ap);
	va_end(ap);
	hlog_n++;
}

/* What we acknowledge: all we received, unless a request awaits its kill. */
static uint32_t ack_val(const struct aqp *q)
{
	const struct p2 *r = &q->req;

	if (r->on && r->kill && r->started && psn_diff(q->its_next, r->psn) > 0)
		return r->psn;
	return q->its_next;
}

static struct wf base(const struct aqp *q, uint8_t op)
{
	struct wf f = { .ver = 2, .op = op, .dst = q->qpn, .src = q->fqpn,
			.psn = q->exp, .ack = ack_val(q), .pay = pay };

	return f;
}

static int send_wf_from(struct wf *f, const uint8_t *src)
{
	size_t n = wf_encode(scratch, f);

	return emit(0, veth0_mac, src, scratch, n);
}

/* A frame to attack QP q from its peer (q: for the reader). */
static int send_wf(struct aqp *q, struct wf *f)
{
	(void)q;
	return send_wf_from(f, PEER_MAC);
}

static int send_wf_split(struct wf *f, unsigned int linear)
{
	size_t n = wf_encode(scratch, f);

	return emit_split(0, veth0_mac, PEER_MAC, scratch, n, linear);
}

static bool conn_live(const struct aqp *q)
{
	return q->st == Q_RTS || q->st == Q_RTR;
}

static uint32_t umin(uint32_t a, uint32_t b)
{
	return a < b ? a : b;
}

/* Sizes: none, small, medium, and big (those are built with fragments). */
static uint32_t pick_len(uint32_t max)
{
	uint32_t v;

	switch (below(10)) {
	case 0:
		v = 0;
		break;
	case 1:
	case 2:
	case 3:
		v = range(1, 64);
		break;
	case 4:
	case 5:
	case 6:
		v = range(65, 1500);
		break;
	default:
		v = range(1501, max > 1501 ? max : 1501);
		break;
	}
	return v > max ? max : v;
}

static const int mr_writable[] = { M_W, M_RW, M_ALL, M_TOP };
static const int mr_readable[] = { M_R, M_RW, M_ROV, M_ALL, M_TOP };
static const int mr_atomic[] = { M_A, M_ALL };

static bool is_locked(int m)
{
	return locked & (1u << m);
}

static void lock_mr(int m)
{
	locked |= 1u << m;
	if (m == M_ROV)
		locked |= 1u << M_RW;	/* it lies over M_RW */
}

static int pick_mr(const int *set, int n, bool write)
{
	int m = set[below((uint32_t)n)];

	return write && is_locked(m) ? -1 : m;
}

static uint64_t model_u64_at(const struct tmr *t, uint64_t va)
{
	uint64_t v;

	memcpy(&v, model + t->off + (va - mr_iova(t)), 8);
	return v;
}

/* A valid RDMA write (or write with immediate) message of 1..3 frames. */
static void gen_write(struct aqp *q, bool imm)
{
	int m = pick_mr(mr_writable, 4, true), nf = pct(70) ? 1 : (int)range(2, 3), i;
	uint32_t seg = seg_of(imm ? OP_WRITE_IMM : OP_WRITE), n;
	const struct tmr *t;
	struct wf f;

	if (m < 0 || (!qp_allows(q, RW) && pct(95)))
		return;
	t = &mrs[m];
	for (i = 0; i < nf; i++) {
		f = base(q, imm && i == nf - 1 ? OP_WRITE_IMM : OP_WRITE);
		n = pick_len(umin(seg, (uint32_t)t->len));
		f.flags = (i == 0 ? FL_FIRST : 0) | (i == nf - 1 ? FL_LAST : 0) |
			  (pct(5) ? FL_ACKREQ : 0);
		/* its run: at least its place in its message (less than
		 * the truth only ever keeps a frame from being placed early) */
		f.status = f.op == OP_WRITE ? (uint8_t)i : 0;
		/* each frame carries its own va: not necessarily contiguous */
		f.va = mr_iova(t) + below((uint32_t)t->len - n + 1);
		f.rkey = t->key;
		f.paylen = (uint16_t)n;
		fill_rand(pay, n);
		if (f.op == OP_WRITE_IMM) {
			f.imm = (uint32_t)rnd();
			f.len = range(n, n + 20000);
			f.flags |= pct(20) ? FL_SOL : 0;
		}
		send_wf(q, &f);
	}
}

/* A SEND/SEND_IMM message, usually fitting the next posted receive. */
static void gen_send(struct aqp *q)
{
	bool imm = pct(40);
	uint32_t seg = seg_of(imm ? OP_SEND_IMM : OP_SEND);
	uint32_t cap = q->rq_n ? q->rq[0].len : 3000, total, off = 0, n;
	int nf, i;
	struct wf f;

	total = pct(97) ? pick_len(cap) : cap + range(1, 200);	/* too long: NAK */
	nf = (int)nframes(total, seg);
	if (nf < 3 && pct(30))
		nf = (int)range((uint32_t)nf, 3);
	for (i = 0; i < nf; i++) {
		f = base(q, imm ? OP_SEND_IMM : OP_SEND);
		n = i == nf - 1 ? total - off : umin(seg, (total - off) / (uint32_t)(nf - i) +
						     below(64));
		if (n > seg)
			n = seg;
		if (i < nf - 1 && total - off - n > seg * (uint32_t)(nf - i - 1))
			n = seg;
		f.offset = off;
		f.paylen = (uint16_t)n;
		f.flags = (i == 0 ? FL_FIRST : 0) | (i == nf - 1 ? FL_LAST : 0) |
			  (pct(5) ? FL_ACKREQ : 0) | (i == nf - 1 && pct(20) ? FL_SOL : 0);
		f.imm = (uint32_t)rnd();
		fill_rand(pay, n);
		send_wf(q, &f);
		off += n;
	}
}

static void gen_read(struct aqp *q)
{
	int m = pick_mr(mr_readable, 5, false);
	const struct tmr *t = &mrs[m];
	uint32_t seg = seg_of(OP_READ_RESP), len;
	struct wf f;

	if (resp_queued(q) >= MAX_RD - 1 || (!qp_allows(q, RR) && pct(95)))
		return;
	len = pct(5) ? 0 : range(1, umin((uint32_t)t->len, 3 * seg));
	if (resp_budget[q->idx] + (int)nframes(len, seg) > 24)
		return;
	resp_budget[q->idx] += (int)nframes(len, seg);
	f = base(q, OP_READ_REQ);
	f.va = mr_iova(t) + below((uint32_t)t->len - len + 1);
	f.rkey = t->key;
	f.len = len;
	f.flags = pct(5) ? FL_ACKREQ : 0;
	if (len)
		lock_mr(m);
	send_wf(q, &f);
}

static void gen_atomic(struct aqp *q)
{
	int m = pick_mr(mr_atomic, 2, true);
	const struct tmr *t;
	struct wf f;

	if (m < 0 || resp_queued(q) >= MAX_RD - 1 || resp_budget[q->idx] >= 24 ||
	    (!qp_allows(q, RA) && pct(95)))
		return;
	t = &mrs[m];
	resp_budget[q->idx]++;
	f = base(q, pct(50) ? OP_CMP_SWAP : OP_FETCH_ADD);
	f.va = mr_iova(t) + 8 * (uint64_t)below((uint32_t)t->len / 8);
	f.rkey = t->key;
	f.op0 = pct(50) ? range(1, 100) : rnd();
	/* half the compares match: the swap happens */
	f.op1 = pct(50) ? model_u64_at(t, f.va) : rnd();
	f.xrsvd = pct(10) ? (uint32_t)rnd() : 0;	/* reserved: ignored (2.3) */
	send_wf(q, &f);
}

/* A key that names no MR the attack PD may use. */
static uint32_t bad_key(void)
{
	switch (below(8)) {
	case 0:
		return 0;
	case 1:
		return mrs[M_DEREG].key;		/* stale */
	case 2:
		return mrs[M_OPD].key;			/* another PD */
	case 3:
		return mrs[M_HON].key;			/* the honest QP's PD */
	case 4:
		return mrs[M_W].key ^ 1;		/* another generation */
	case 5:
		return mrs[M_W].key + 0x100;		/* the next index */
	case 6:
		return mrs[M_W].key | 0xff000000u;
	default:
		return (uint32_t)rnd();
	}
}

/*
 * A frame of any opcode whose fields would be taken, so that a fault added
 * to it is the only reason to drop it: writes to M_W (never read by us),
 * reads of M_R (never written), atomics on M_A.  Taken as it is, it may
 * still be refused: no receive posted, or the QP's own access flags.
 */
static bool lost_in_state(const struct aqp *q, struct wf *f);

static struct wf any_frame(const struct aqp *q, uint8_t op)
{
	const struct tmr *t = &mrs[M_W];
	struct wf f = base(q, op);

	f.paylen = opinfo[op].data ? (uint16_t)pick_len(200) : 0;
	fill_rand(pay, f.paylen);
	f.flags = opinfo[op].flags & FL_SEG;
	f.len = op == OP_WRITE_IMM ? f.paylen + below(100) : below(64);
	f.imm = (uint32_t)rnd();
	f.req_psn = (uint32_t)rnd() & PSN_MASK;
	f.op0 = rnd();
	f.op1 = rnd();
	if (op == OP_READ_REQ)
		t = &mrs[M_R];
	if (op == OP_CMP_SWAP || op == OP_FETCH_ADD)
		t = &mrs[M_A];
	f.rkey = t->key;
	f.va = mr_iova(t) + below((uint32_t)t->len - umin(f.paylen + f.len + 8, (uint32_t)t->len) + 1);
	if (op == OP_CMP_SWAP || op == OP_FETCH_ADD)
		f.va &= ~7ull;
	if (op == OP_SEND_INV)
		f.rkey = pct(50) ? mrs[M_W].key : (uint32_t)rnd();	/* no window */
	if (op == OP_DGRAM) {
		f.psn = f.ack = 0;
		f.vtf = 6u << 28 | ((uint32_t)rnd() & 0x0fffffff);
		f.hop = (uint8_t)rnd();
		f.flags = pct(50) ? FL_IMM : 0;
		fill_rand(f.gids, 32);
	}
	/* a LOST in state (6.4) if there is one to make, else seen = k:
	 * drop_bad_ack whatever the rest */
	if (op == OP_LOST && !lost_in_state(q, &f))
		f.seen = f.ack;
	return f;
}

static const uint8_t all_ops[] = {
	OP_WRITE, OP_WRITE_IMM, OP_READ_REQ, OP_READ_RESP, OP_CMP_SWAP,
	OP_FETCH_ADD, OP_ATOMIC_RESP, OP_SEND, OP_SEND_IMM, OP_SEND_INV,
	OP_ACK, OP_LOST, OP_STOP, OP_GO, OP_DGRAM,
};

static uint8_t random_op(void)
{
	return all_ops[below(sizeof(all_ops))];
}

static uint8_t unassigned_op(void)
{
	uint8_t op;

	do
		op = (uint8_t)rnd();
	while (opinfo[op].hdr);
	return op;
}

/*
 * One frame with one fault from 2.4 (or, for the few that are not
 * faults, a frame the spec says must be taken: padding up to 46 bytes,
 * nonzero reserved words in extensions, lengths of exactly 2^31).
 */
static void gen_codec(struct aqp *q)
{
	uint8_t op = random_op(), *b = scratch;
	struct wf f;
	uint32_t hl;
	size_t n;
	int tries;

	/* taken as it is, the base frame must not get the QP NAKed */
	if ((op == OP_READ_REQ && !qp_allows(q, RR)) ||
	    ((op == OP_CMP_SWAP || op == OP_FETCH_ADD) && !qp_allows(q, RA)) ||
	    ((op == OP_WRITE || op == OP_WRITE_IMM) && !qp_allows(q, RW)))
		op = OP_ACK;
	f = any_frame(q, op);
	hl = hdr_of(op);

	if (pct(10))
		f.dst = (uint32_t)range(0x800000, 0xefffff);	/* nobody's QP */
	n = wf_encode(b, &f);
	for (tries = 0; tries < 20; tries++) {
		switch (below(21)) {
		case 0:
			n = below(MB_HDR);
			break;
		case 1:
			if (hl <= MB_HDR)
				continue;
			n = range(MB_HDR, hl - 1);
			break;
		case 2:
			if (!f.paylen)
				continue;
			n = range(hl, hl + f.paylen - 1u);
			break;
		case 3:
			b[0] = pct(10) ? (uint8_t)below(2) : (uint8_t)range(3, 255);
			break;
		case 4:
			b[1] = unassigned_op();
			break;
		case 5: {
			size_t k = range(1, 64);

			if (n + k > mtu)
				continue;
			fill_rand(b + n, k);
			n += k;		/* over-long; still fine if <= 46 */
			break;
		}
		case 6:
			if (opinfo[op].data)
				continue;
			put16(b + 20, (uint16_t)range(1, 8));
			fill_rand(b + n, 8);
			n += get16(b + 20);
			break;
		case 7:
			b[4 + 4 * below(4)] = (uint8_t)range(1, 255);
			break;
		case 8:		/* an epoch: a fault except on sequenced ops and LOST */
			put16(b + 22, (uint16_t)range(1, 0xffff));
			/* a LOST's: a round it has had, or one it has not
			 * begun (6.4: drop_bad_ack) */
			if (op == OP_LOST)
				put16(b + 22, (uint16_t)(pct(50) ? q->ep_seen + range(0x4000, 0x8000) :
							 q->ep_seen - below(0x4000)));
			break;
		case 9:
			b[2] |= (uint8_t)(0x10 << below(4));
			break;
		case 10:
			if (!(opinfo[op].flags & FL_SOL))
				b[2] |= FL_SOL;
			else if (!(opinfo[op].flags & FL_FIRST))
				b[2] |= FL_FIRST;
			else
				continue;
			break;
		case 11:
			b[3] = (uint8_t)(op == OP_ACK ? range(4, 255) : range(1, 255));
			if (op == OP_WRITE && pct(50)) {	/* no run after FIRST */
				b[2] &= (uint8_t)~FL_FIRST;
				b[3] = 0;
			}
			break;
		case 12:
			if (op != OP_READ_RESP && op != OP_ATOMIC_RESP)
				continue;
			b[op == OP_READ_RESP ? 28 : 24] = (uint8_t)range(1, 255);
			break;
		case 13:
			if ((op != OP_WRITE && op != OP_WRITE_IMM) || !f.paylen)
				continue;
			put64(b + 24, UINT64_MAX - f.paylen + 1 + below(f.paylen));
			break;
		case 14:
			if (op != OP_READ_REQ)
				continue;
			if (pct(50))
				put32(b + 36, pct(50) ? MSG_MAX + range(1, 1000) : 0xffffffffu);
			else
				put64(b + 24, UINT64_MAX - get32(b + 36) + 1 + below(64));
			break;
		case 15:
			if (op != OP_WRITE_IMM)
				continue;
			put32(b + 40, pct(50) ? MSG_MAX + 1 : (f.paylen ? below(f.paylen) : MSG_MAX + 7));
			break;
		case 16:
			if (op != OP_SEND && op != OP_SEND_IMM && op != OP_SEND_INV &&
			    op != OP_READ_RESP)
				continue;
			put32(b + 24, MSG_MAX - f.paylen + range(1, 4096));
			break;
		case 17:	/* exactly at the limit: valid for the codec */
			if (op != OP_WRITE_IMM)
				continue;	/* (the others: hostile_limits) */
			put32(b + 40, MSG_MAX);
			break;
		case 18:	/* extension reserved words: ignored on receipt */
			if (op == OP_DGRAM && pct(50)) {	/* psn, ack_psn or vtf */
				if (pct(50))
					put32(b + 12 + 4 * below(2), range(1, PSN_MASK));
				else
					b[32] = (uint8_t)((b[32] & 0x0f) | range(0, 15) << 4);
				break;
			}
			if (op == OP_CMP_SWAP || op == OP_FETCH_ADD)
				put32(b + 36, (uint32_t)rnd() | 1);
			else if (op == OP_ATOMIC_RESP)
				put32(b + 28, (uint32_t)rnd() | 1);
			else if (op == OP_DGRAM)
				b[37 + below(3)] = (uint8_t)range(1, 255);
			else
				continue;
			break;
		case 19:
			n = 0;
			break;
		default:	/* Ethernet padding: frames up to 46 bytes */
			if (n >= ETH_MIN_PAYLOAD)
				continue;
			fill_rand(b + n, ETH_MIN_PAYLOAD - n);
			n = range((uint32_t)n + 1, ETH_MIN_PAYLOAD);
			break;
		}
		break;
	}
	emit(0, veth0_mac, PEER_MAC, b, n);
}

/* Frames the responder must not take from this sender or for this QP. */
static void gen_wrong(struct aqp *q)
{
	const struct tmr *t = &mrs[M_W];
	struct wf f = base(q, OP_WRITE);
	uint8_t mac[6];
	size_t n;

	f.flags = FL_SEG;
	f.paylen = (uint16_t)range(1, 200);
	fill_rand(pay, f.paylen);
	f.va = mr_iova(t) + below((uint32_t)t->len - f.paylen + 1);
	f.rkey = t->key;
	switch (below(7)) {
	case 0:		/* the right everything, from a third MAC */
		third_mac(mac);
		send_wf_from(&f, mac);
		return;
	case 1:
		f.src = (q->fqpn ^ range(1, 0xff)) & PSN_MASK;
		break;
	case 2:
		f.dst = range(0x800000, 0xefffff);
		break;
	case 3:		/* the honest responder, from the wrong MAC */
		f.dst = hq0.qpn;
		break;
	case 4:		/* not addressed to veth0: never counted */
		n = wf_encode(scratch, &f);
		emit(0, OTHER_HOST, PEER_MAC, scratch, n);
		return;
	case 5:		/* the sync QP knows another peer QP */
		f.dst = syncq->qpn;
		break;
	default:	/* a NAK naming what the QP awaits, from a third MAC */
		f = base(q, OP_ACK);
		f.status = (uint8_t)range(1, 3);
		f.ack = q->una;
		third_mac(mac);
		send_wf_from(&f, mac);
		return;
	}
	send_wf(q, &f);
}

/* Duplicates and gaps: never applied; a LOST once per gap (5). */
static void gen_seq(struct aqp *q)
{
	uint8_t op = pct(60) ? OP_WRITE : random_op();
	struct wf f;

	if (!op_seq(op))
		op = OP_WRITE;
	f = any_frame(q, op);
	f.rkey = mrs[M_W].key;
	/* ahead: past the frames that may be placed early (protocol.md 5.1) */
	if (pct(50))
		f.psn = psn_sub(q->exp, range(1, 100000));
	else
		f.psn = psn_add(q->exp, range(EARLY_SPAN, 100000));
	f.flags |= pct(30) ? FL_ACKREQ : 0;
	send_wf(q, &f);
}

/* A control frame's psn, the peer's snd_max: within WINDOW_MAX of exp (6.4). */
static uint32_t ctl_psn(const struct aqp *q)
{
	switch (below(8)) {
	case 0:
		return psn_add(q->exp, WINDOW_MAX);	/* the edges: still in state */
	case 1:
		return psn_sub(q->exp, WINDOW_MAX);
	case 2:
	case 3:
		return psn_add(psn_sub(q->exp, WINDOW_MAX), below(2 * WINDOW_MAX + 1));
	default:
		return q->exp;
	}
}

/* Set bits 1 .. top of a LOST's map, now and then. */
static void map_fill(uint8_t *map, uint32_t top)
{
	uint32_t d;

	memset(map, 0, 32);
	for (d = 1; d <= top && d < EARLY_SPAN; d++)
		if (pct(30))
			map[d / 8] |= (uint8_t)(1u << (d % 8));
}

/*
 * A LOST every field of which is in state (6.4): k from una (what it
 * waits on) or behind it, seen a frame it certainly sent after k, a map
 * only of frames it has had acknowledged (a go-back skips what the map
 * holds, and we must still get every frame it owes), its round one it
 * has had.  false when there is none to make.
 */
static bool lost_in_state(const struct aqp *q, struct wf *f)
{
	uint32_t k;

	if (psn_diff(q->rx_lo, q->una) >= 2 && pct(50))
		k = q->una;		/* frames of its stream we have not acked */
	else
		k = psn_sub(q->una, pct(20) ? WINDOW_MAX : range(1, WINDOW_MAX));
	if (psn_diff(q->rx_lo, k) < 2)
		return false;
	f->ack = k;
	f->seen = psn_add(k, range(1, (uint32_t)psn_diff(q->rx_lo, k) - 1));
	if (psn_diff(q->una, k) > 1 && pct(50))
		map_fill(f->map, umin((uint32_t)psn_diff(q->una, k) - 1, EARLY_SPAN - 1));
	f->rsvd = (uint16_t)(q->ep_seen - (pct(70) ? 0 : below(0x100)));
	return true;
}

/* Control frames from the peer, every field in state (6.4). */
static void gen_ctl_ok(struct aqp *q)
{
	struct wf f;

	switch (below(8)) {
	case 0:
		f = base(q, OP_ACK);
		f.flags = FL_ACKREQ;		/* a probe: answered with an ACK */
		break;
	case 1:
		f = base(q, OP_LOST);
		if (!lost_in_state(q, &f))
			return;
		break;
	case 2:
		f = base(q, OP_STOP);
		break;
	case 3:
		f = base(q, OP_GO);
		break;
	case 4:		/* a NAK naming an old psn */
		f = base(q, OP_ACK);
		f.status = (uint8_t)range(1, 3);
		f.ack = psn_sub(q->una, range(1, 5000));
		break;
	case 5:		/* a NAK naming a psn with nothing outstanding */
		if (outstanding(q) != 0)
			return;
		f = base(q, OP_ACK);
		f.status = (uint8_t)range(1, 3);
		f.ack = q->una;
		break;
	case 6:		/* stale: up to a window behind snd_una, acts on nothing */
		f = base(q, (uint8_t)range(OP_ACK, OP_GO));
		f.ack = psn_sub(q->una, pct(30) ? WINDOW_MAX : range(1, WINDOW_MAX));
		if (f.op == OP_LOST && !lost_in_state(q, &f))
			return;
		break;
	default:
		f = base(q, OP_ACK);
		break;
	}
	f.psn = ctl_psn(q);
	send_wf(q, &f);
}

/*
 * Control frames with one field outside the responder's state (6.4):
 * psn (the peer's snd_max) more than a window from its rcv_nxt, ack_psn
 * after its snd_max or more than a window before its snd_una, a LOST of
 * a round it has not begun, with seen not in k + 1 .. snd_max - 1, with
 * the gap itself or a psn never sent in its map.  Every one is dropped
 * whole (drop_bad_ack), its ack_psn not applied, nothing answered.
 */
static void gen_ctl_bad(struct aqp *q)
{
	static const uint8_t ops[] = { OP_ACK, OP_ACK, OP_LOST, OP_STOP, OP_GO };
	uint8_t op = ops[below(sizeof(ops))];
	struct wf f = base(q, op);
	uint32_t d;

	f.status = op == OP_ACK && pct(50) ? (uint8_t)range(1, 3) : 0;
	f.flags = pct(30) ? FL_ACKREQ : 0;
	if (op == OP_LOST) {
		f.seen = psn_add(f.ack, 1);
		f.rsvd = q->ep_seen;
	}
	switch (below(op == OP_LOST ? 9 : 4)) {
	case 0:
		f.psn = psn_add(q->exp, range(WINDOW_MAX + 1, pct(50) ? WINDOW_MAX + 16 : 1u << 22));
		hlog_add(q, "%s psn %#x ahead", op_name(op), f.psn);
		break;
	case 1:
		f.psn = psn_sub(q->exp, range(WINDOW_MAX + 1, pct(50) ? WINDOW_MAX + 16 : 1u << 22));
		hlog_add(q, "%s psn %#x behind", op_name(op), f.psn);
		break;
	case 2:
		f.ack = psn_add(q->its_end, range(1, pct(50) ? 16 : 1u << 22));
		if (op == OP_LOST)
			f.seen = psn_add(f.ack, 1);
		hlog_add(q, "%s ack_psn %#x never sent", op_name(op), f.ack);
		break;
	case 3:
		f.ack = psn_sub(q->una, range(WINDOW_MAX + 1, pct(50) ? WINDOW_MAX + 16 : 1u << 22));
		if (op == OP_LOST)
			f.seen = psn_add(f.ack, 1);
		hlog_add(q, "%s ack_psn %#x far behind", op_name(op), f.ack);
		break;
	case 4:		/* a round that has not begun */
		f.rsvd = (uint16_t)(q->ep_seen + range(0x4000, 0x8000));
		hlog_add(q, "LOST epoch %#x", f.rsvd);
		break;
	case 5:		/* seen not after k */
		f.seen = psn_sub(f.ack, pct(30) ? 0 : range(1, 1u << 22));
		hlog_add(q, "LOST seen %#x", f.seen);
		break;
	case 6:		/* seen never sent */
		f.seen = psn_add(q->its_end, pct(30) ? 0 : range(1, 1u << 22));
		hlog_add(q, "LOST seen %#x never sent", f.seen);
		break;
	case 7:		/* the gap itself placed */
		map_fill(f.map, EARLY_SPAN - 1);
		f.map[0] |= 1;
		hlog_add(q, "LOST map bit 0");
		break;
	default:	/* a psn never sent placed */
		d = (uint32_t)psn_diff(q->its_end, f.ack);
		if (d >= EARLY_SPAN)
			return;
		d = range(d, EARLY_SPAN - 1);
		f.map[d / 8] |= (uint8_t)(1u << (d % 8));
		hlog_add(q, "LOST map bit %u never sent", d);
		break;
	}
	send_wf(q, &f);
}

static void gen_ctl(struct aqp *q)
{
	if (pct(40))
		gen_ctl_bad(q);
	else
		gen_ctl_ok(q);
}

/*
 * Acknowledgements of psns never sent: on a WRITE ignored while nothing
 * is outstanding (the frame itself is taken), drop_bad_ack otherwise
 * (6.3); on an ACK drop_bad_ack always (6.4), as an ack_psn more than a
 * window before snd_una is (an older one is ignored).
 */
static void gen_ackgarb(struct aqp *q)
{
	int out = outstanding(q);
	struct wf f;

	if (out < 0)
		return;
	if (pct(50)) {
		f = base(q, OP_ACK);
	} else {
		f = base(q, OP_WRITE);
		f.flags = FL_SEG;
		f.paylen = qp_allows(q, RW) ? (uint16_t)range(1, 100) : 0;
		fill_rand(pay, f.paylen);
		f.va = mr_iova(&mrs[M_W]) + below((uint32_t)mrs[M_W].len - f.paylen + 1);
		f.rkey = mrs[M_W].key;
	}
	if (pct(30))
		f.ack = psn_sub(q->una, range(1, 100000));	/* old: ignored */
	else
		f.ack = psn_add(q->its_end, range(1, 1u << 20));
	send_wf(q, &f);
}

/* Responses to a responder with nothing asked: drop_bad_response. */
static void gen_resp(struct aqp *q)
{
	struct wf f = any_frame(q, pct(50) ? OP_READ_RESP : OP_ATOMIC_RESP);

	f.flags = f.op == OP_READ_RESP ? FL_SEG : 0;
	send_wf(q, &f);
}

/* Frames up to 46 bytes carrying Ethernet padding: taken as they are. */
static void gen_pad(struct aqp *q)
{
	uint8_t op = pct(40) ? OP_WRITE : pct(50) ? OP_ACK : OP_GO;
	struct wf f = base(q, op);
	size_t n;

	if (op == OP_WRITE) {
		f.flags = FL_SEG;
		f.paylen = qp_allows(q, RW) ? (uint16_t)below(ETH_MIN_PAYLOAD - 36 + 1) : 0;
		fill_rand(pay, f.paylen);
		f.va = mr_iova(&mrs[M_W]) + below((uint32_t)mrs[M_W].len - f.paylen + 1);
		f.rkey = mrs[M_W].key;
	}
	n = wf_encode(scratch, &f);
	fill_rand(scratch + n, ETH_MIN_PAYLOAD - n);
	emit(0, veth0_mac, PEER_MAC, scratch, range((uint32_t)n, ETH_MIN_PAYLOAD));
}

/* A sequenced frame for a QP in the error state: the NAK comes again. */
static void gen_err_poke(struct aqp *q)
{
	struct wf f = any_frame(q, pct(50) ? OP_WRITE : random_op());

	if (!op_seq(f.op))
		f.op = OP_SEND;
	if (pct(30))
		f.psn = psn_add(q->exp, range(1, 10));
	send_wf(q, &f);
}

/* A write frame of n bytes through MR m at va (any fault the caller chose). */
static void write_at(struct aqp *q, uint32_t key, uint64_t va, uint32_t n)
{
	struct wf f = base(q, OP_WRITE);

	f.flags = FL_SEG;
	f.rkey = key;
	f.va = va;
	f.paylen = (uint16_t)n;
	fill_rand(pay, n);
	send_wf(q, &f);
}

static void hostile_write_bounds(struct aqp *q)
{
	const int set[] = { M_W, M_RW, M_ALL, M_TOP };
	const struct tmr *t = &mrs[set[below(4)]];
	uint64_t s = mr_iova(t), e = s + t->len;
	uint32_t n = range(1, 300), k;

	switch (below(6)) {
	case 0:
		write_at(q, t->key, s - 1, 1);
		hlog_add(q, "WRITE 1 byte before MR %s", t->name);
		break;
	case 1:
		k = range(1, n);
		write_at(q, t->key, s - k, n + 1);
		hlog_add(q, "WRITE straddling the start of MR %s", t->name);
		break;
	case 2:
		write_at(q, t->key, e, n);
		hlog_add(q, "WRITE %u bytes right past MR %s", n, t->name);
		break;
	case 3:
		k = range(1, n);
		write_at(q, t->key, e - k, n + 1);
		hlog_add(q, "WRITE straddling the end of MR %s", t->name);
		break;
	case 4:
		write_at(q, t->key, pct(50) ? 0 : 1ull << 63, n);
		hlog_add(q, "WRITE at a far address, key of MR %s", t->name);
		break;
	default:	/* M_TOP: the last target byte is 2^64 - 3 */
		t = &mrs[M_TOP];
		e = mr_iova(t) + t->len;
		n = range(1, 2);
		write_at(q, t->key, e - n + below(2), n);
		hlog_add(q, "WRITE at the end of MR TOP, below 2^64");
		break;
	}
}

/*
 * A frame built with page fragments whose range crosses the end of its
 * MR, split so that the linear piece lies inside: section 9 says the whole
 * range is checked before a byte is touched.
 */
static void hostile_write_nonlinear(struct aqp *q)
{
	const int set[] = { M_W, M_RW, M_ALL };
	int m = set[below(3)];
	const struct tmr *t = &mrs[m];
	uint32_t lo = NONLINEAR_MIN - 14 - 36, n, k, j;
	struct wf f = base(q, OP_WRITE);

	if (seg_of(OP_WRITE) < lo || is_locked(m))
		return;
	n = range(lo, umin(seg_of(OP_WRITE), (uint32_t)t->len));
	k = range(1, n - 1);			/* bytes inside the MR */
	j = range(1, k);			/* of which the linear piece */
	f.flags = FL_SEG;
	f.rkey = t->key;
	f.va = mr_iova(t) + t->len - k;
	f.paylen = (uint16_t)n;
	fill_rand(pay, n);
	hlog_add(q, "non-linear WRITE of %u bytes over the end of MR %s: %u inside, "
		 "linear %u (arena %#zx..%#zx)", n, t->name, k, j,
		 t->off + t->len - k, t->off + t->len - k + j);
	send_wf_split(&f, 14 + 36 + j);
}

static void hostile_read(struct aqp *q)
{
	const struct tmr *t = &mrs[M_R];
	struct wf f = base(q, OP_READ_REQ);
	const int noread[] = { M_W, M_A, M_N };

	f.rkey = t->key;
	f.len = range(1, 2000);
	f.va = mr_iova(t);
	switch (below(5)) {
	case 0:
		f.rkey = bad_key();
		hlog_add(q, "READ with a bad key");
		break;
	case 1:
		t = &mrs[noread[below(3)]];
		f.rkey = t->key;
		f.va = mr_iova(t);
		f.len = range(1, (uint32_t)t->len);
		hlog_add(q, "READ from MR %s (no remote read)", t->name);
		break;
	case 2:
		f.va = mr_iova(t) + t->len - f.len + range(1, 100);
		hlog_add(q, "READ past the end of MR R");
		break;
	case 3:
		f.len = MSG_MAX;
		hlog_add(q, "READ of 2^31 bytes");
		break;
	default:
		f.va = (1ull << 63) + below(1000);
		hlog_add(q, "READ at 2^63");
		break;
	}
	send_wf(q, &f);
}

static void hostile_atomic(struct aqp *q)
{
	const struct tmr *t = &mrs[M_A];
	struct wf f = base(q, pct(50) ? OP_CMP_SWAP : OP_FETCH_ADD);

	f.rkey = t->key;
	f.va = mr_iova(t) + 8 * (uint64_t)below((uint32_t)t->len / 8);
	f.op0 = rnd();
	switch (below(5)) {
	case 0:
		f.va += range(1, 7);
		hlog_add(q, "%s misaligned", op_name(f.op));
		break;
	case 1:
		f.rkey = bad_key();
		hlog_add(q, "%s with a bad key", op_name(f.op));
		break;
	case 2:
		t = &mrs[pct(50) ? M_RW : M_W];
		f.rkey = t->key;
		f.va = mr_iova(t);
		hlog_add(q, "%s on MR %s (no remote atomic)", op_name(f.op), t->name);
		break;
	case 3:
		f.va = mr_iova(t) + t->len;
		hlog_add(q, "%s right past MR A", op_name(f.op));
		break;
	default:
		f.va = mr_iova(t) - 8;
		hlog_add(q, "%s right before MR A", op_name(f.op));
		break;
	}
	send_wf(q, &f);
}

/* FIRST/LAST broken, or another operation inside a segmented message. */
static void hostile_segments(struct aqp *q)
{
	const struct tmr *t = &mrs[M_W];
	struct wf f = base(q, OP_WRITE);
	uint8_t second;

	f.rkey = t->key;
	f.va = mr_iova(t);
	f.paylen = (uint16_t)range(1, 100);
	fill_rand(pay, f.paylen);
	switch (below(4)) {
	case 0:		/* a middle or last frame with no first */
		f.flags = pct(50) ? 0 : FL_LAST;
		hlog_add(q, "WRITE continuation without FIRST");
		send_wf(q, &f);
		return;
	case 1:		/* WRITE_IMM that is not the last segment */
		f.op = OP_WRITE_IMM;
		f.flags = FL_FIRST;
		f.len = f.paylen;
		hlog_add(q, "WRITE_IMM without LAST");
		send_wf(q, &f);
		return;
	case 2:		/* SEND with the wrong offset */
		f = base(q, pct(50) ? OP_SEND : OP_SEND_IMM);
		f.offset = range(1, 100);
		f.flags = FL_SEG;
		f.paylen = (uint16_t)range(0, 50);
		fill_rand(pay, f.paylen);
		hlog_add(q, "SEND at offset %u", f.offset);
		send_wf(q, &f);
		return;
	default:
		break;
	}
	/* start a WRITE or SEND message, then something that may not follow */
	if (pct(50)) {
		f.flags = FL_FIRST;
		send_wf(q, &f);
	} else {
		f = base(q, OP_SEND);
		f.flags = FL_FIRST;
		f.paylen = (uint16_t)range(0, 20);
		fill_rand(pay, f.paylen);
		send_wf(q, &f);
	}
	second = (uint8_t[]){ OP_READ_REQ, OP_CMP_SWAP, OP_FETCH_ADD, OP_SEND,
			      OP_WRITE }[below(5)];
	f = any_frame(q, second);
	f.flags = second == OP_WRITE || second == OP_SEND ? (pct(50) ? FL_FIRST : FL_LAST) : 0;
	f.rkey = second == OP_READ_REQ ? mrs[M_R].key : mrs[M_A].key;
	f.va = mr_iova(second == OP_READ_REQ ? &mrs[M_R] : &mrs[M_A]);
	f.len = 8;
	hlog_add(q, "%s inside a segmented message", op_name(second));
	send_wf(q, &f);
}

/* A SEND with invalidate of a key that names no window bound here (9). */
static void hostile_send_inv(struct aqp *q)
{
	uint32_t cap = q->rq_n ? q->rq[0].len : 100, n;
	struct wf f = base(q, OP_SEND_INV);

	n = range(0, umin(cap, seg_of(OP_SEND_INV)));
	f.flags = FL_SEG;
	f.paylen = (uint16_t)n;
	f.rkey = pct(50) ? mrs[M_W].key : (uint32_t)rnd();
	fill_rand(pay, n);
	hlog_add(q, "SEND_INV of %u bytes invalidating %#x (no window)", n, f.rkey);
	send_wf(q, &f);
}

/* Lengths exactly at 2^31: valid frames the operation must refuse. */
static void hostile_limits(struct aqp *q)
{
	struct wf f = any_frame(q, pct(50) ? OP_READ_REQ : OP_SEND);

	if (f.op == OP_READ_REQ) {
		f.len = MSG_MAX;
		hlog_add(q, "READ of 2^31 bytes from MR R");
	} else {
		f.offset = MSG_MAX - f.paylen;	/* offset + paylen = 2^31 */
		hlog_add(q, "SEND at offset 2^31 - %u", f.paylen);
	}
	send_wf(q, &f);
}

/* max_dest_rd_atomic zero-length reads queued, then one more. */
static void hostile_read_flood(struct aqp *q)
{
	struct wf f;
	int i = 0;

	if (resp_budget[q->idx] > 4)
		return;
	hlog_add(q, "%d reads outstanding, then one more", MAX_RD);
	while (conn_live(q) && i++ <= MAX_RD + 1) {
		f = base(q, OP_READ_REQ);
		f.rkey = (uint32_t)rnd();
		f.va = rnd();
		f.len = 0;		/* unchecked: the response is empty */
		resp_budget[q->idx]++;
		send_wf(q, &f);
	}
}

static void gen_hostile(struct aqp *q)
{
	struct wf f;

	switch (below(12)) {
	case 0:
	case 1: {
		const struct tmr *t = &mrs[M_W];
		const int nowrite[] = { M_R, M_A, M_N, M_ROV };

		f = base(q, OP_WRITE);
		f.flags = FL_SEG;
		f.paylen = (uint16_t)range(1, 300);
		fill_rand(pay, f.paylen);
		if (pct(50)) {
			f.rkey = bad_key();
			hlog_add(q, "WRITE with bad key %#x", f.rkey);
		} else {
			t = &mrs[nowrite[below(4)]];
			f.rkey = t->key;
			hlog_add(q, "WRITE into MR %s (no remote write)", t->name);
		}
		f.paylen = (uint16_t)umin(f.paylen, (uint32_t)t->len);
		f.va = mr_iova(t) + below((uint32_t)t->len - f.paylen + 1);
		send_wf(q, &f);
		break;
	}
	case 2:
		hostile_write_bounds(q);
		break;
	case 3:
		hostile_write_nonlinear(q);
		break;
	case 4:
		hostile_read(q);
		break;
	case 5:
		hostile_atomic(q);
		break;
	case 6:
	case 7:
		hostile_segments(q);
		break;
	case 8:
		hostile_read_flood(q);
		break;
	case 9:
		hostile_limits(q);
		break;
	case 10:
		hostile_send_inv(q);
		break;
	default:
		gen_send(q);	/* with the receive too small, or a read-only one */
		break;
	}
}

/*
 * The attack QP's own read or atomic: answers that must be dropped
 * (wrong req_psn, offset, FIRST/LAST, length, kind), then the real one;
 * or, in kill mode, spoofed NAKs it must ignore and then the NAK that
 * names its request.
 */
static void own_answer_hostile(struct aqp *q, uint32_t off, uint32_t n, bool last)
{
	struct p2 *r = &q->req;
	struct wf f = base(q, r->op == OP_READ_REQ ? OP_READ_RESP : OP_ATOMIC_RESP);

	f.req_psn = r->psn;
	f.offset = off;
	f.paylen = r->op == OP_READ_REQ ? (uint16_t)n : 0;
	f.flags = r->op == OP_READ_REQ ? (off ? 0 : FL_FIRST) | (last ? FL_LAST : 0) : 0;
	fill_rand(pay, f.paylen);
	switch (below(6)) {
	case 0:
		f.req_psn = psn_add(r->psn, range(1, 5));
		break;
	case 1:
		if (r->op != OP_READ_REQ)
			return;
		f.offset = off + range(1, 64);
		break;
	case 2:
		if (r->op != OP_READ_REQ)
			return;
		f.flags ^= pct(50) ? FL_FIRST : FL_LAST;
		break;
	case 3:
		if (r->op != OP_READ_REQ || r->len - off + 1 > seg_of(OP_READ_RESP))
			return;
		f.paylen = (uint16_t)(r->len - off + 1);	/* more than asked */
		f.flags |= FL_LAST;
		fill_rand(pay, f.paylen);
		break;
	case 4:		/* the other kind of response */
		f.op = r->op == OP_READ_REQ ? OP_ATOMIC_RESP : OP_READ_RESP;
		f.paylen = 0;
		f.flags = f.op == OP_READ_RESP ? FL_SEG : 0;
		break;
	default:	/* from a third MAC */
		{
			uint8_t mac[6];

			third_mac(mac);
			send_wf_from(&f, mac);
			return;
		}
	}
	send_wf(q, &f);
}

static void own_kill(struct aqp *q)
{
	struct p2 *r = &q->req;
	uint8_t mac[6];
	struct wf f;
	int i, n = (int)range(0, 4);

	for (i = 0; i < n; i++) {
		f = base(q, OP_ACK);
		f.status = r->kill_st;
		f.psn = ctl_psn(q);	/* in state (6.4): only the field meant is not */
		switch (below(3)) {
		case 0:		/* the right psn from a third MAC */
			f.ack = r->psn;
			third_mac(mac);
			send_wf_from(&f, mac);
			continue;
		case 1:		/* an older psn */
			f.ack = psn_sub(r->psn, range(1, 1000));
			break;
		default:	/* acknowledging a psn never sent */
			f.status = 0;
			f.ack = psn_add(q->its_end, range(1, 1000));
			break;
		}
		send_wf(q, &f);
	}
	f = base(q, OP_ACK);
	f.status = r->kill_st;
	f.ack = r->psn;
	f.psn = ctl_psn(q);
	hlog_add(q, "NAK %u naming its own %s (psn %#x)", r->kill_st, op_name(r->op), r->psn);
	send_wf(q, &f);
}

static void own_answer(struct aqp *q)
{
	struct p2 *r = &q->req;
	uint32_t seg = seg_of(OP_READ_RESP), off = 0, n;
	struct wf f;

	if (r->kill) {
		own_kill(q);
		return;
	}
	if (r->op != OP_READ_REQ) {
		if (pct(70))
			own_answer_hostile(q, 0, 0, true);
		f = base(q, OP_ATOMIC_RESP);
		f.req_psn = r->psn;
		f.op0 = rnd();
		send_wf(q, &f);
		return;
	}
	do {
		n = r->len - off;
		if (n > seg || (n > 1 && pct(30)))
			n = range(1, umin(n, seg));
		while (conn_live(q) && pct(40))
			own_answer_hostile(q, off, n, off + n == r->len);
		f = base(q, OP_READ_RESP);
		f.req_psn = r->psn;
		f.offset = off;
		f.paylen = (uint16_t)n;
		f.flags = (off ? 0 : FL_FIRST) | (off + n == r->len ? FL_LAST : 0);
		fill_rand(pay, n);
		send_wf(q, &f);
		off += n;
	} while (off < r->len && conn_live(q));
}

/* ---- replies from mbcf0 ------------------------------------------------------------ */

#define RXB	64

static uint8_t (*rxbuf)[FMAX];
static struct mmsghdr rxmh[RXB];
static struct iovec rxiov[RXB];
static uint64_t replies, replies_stale, replies_dup, socket_drops;
static uint64_t sync_expect, sync_got;
static bool draining;		/* QPs destroyed: only count what still comes */

static struct aqp *aqp_by_fqpn(uint32_t fqpn)
{
	int i;

	for (i = 0; i < naqp; i++)
		if (aqps[i].fqpn == fqpn)
			return &aqps[i];
	return NULL;
}

/* An ACK now, as a receiver owes one for a frame with ACKREQ (6.2). */
static void ack_now(struct aqp *q)
{
	struct wf f = base(q, OP_ACK);

	/* no random psn: how many of these there are depends on timing, and
	 * the attack's random stream must not (-s replays it) */
	f.psn = q->exp;
	send_wf(q, &f);
	txq_flush(tq_to0);
}

/* A control frame from the responder: only what the oracle announced. */
static void rx_ctl(struct aqp *q, const struct wf *f)
{
	const struct ctlexp *e;

	if (f->op == OP_ACK && !f->status) {
		if (f->flags & FL_ACKREQ)	/* its probe (7.5) */
			ack_now(q);
		return;
	}
	if (f->op == OP_ACK)
		pred[0][X_NAKTX]++;
	else if (f->op == OP_STOP)
		pred[0][X_STOPTX]++;
	else if (f->op == OP_GO)
		pred[0][X_GOTX]++;
	else if (f->op == OP_LOST)
		pred[0][X_LOSTTX]++;
	if (q->ctl_got == q->ctl_n) {
		fail("QP %d (%s): unexpected %s status %u ack_psn %#x", q->idx,
		     qst_name[q->st], op_name(f->op), f->status, f->ack);
		desync = true;
		return;
	}
	e = &q->ctl[q->ctl_got++];
	if (e->op != f->op || e->status != f->status || e->ack != f->ack) {
		fail("QP %d: expected %s status %u ack_psn %#x, got %s status %u ack_psn %#x",
		     q->idx, op_name(e->op), e->status, e->ack, op_name(f->op),
		     f->status, f->ack);
		desync = true;
	}
}

/* The attack QP's own request arrives: what was posted, at the psn expected. */
static void rx_own_request(struct aqp *q, const struct wf *f)
{
	struct p2 *r = &q->req;
	bool ok = f->op == r->op && f->va == r->va && f->rkey == r->rkey &&
		  !(f->flags & ~FL_ACKREQ);

	if (r->op == OP_READ_REQ)
		ok = ok && f->len == r->len;
	else
		ok = ok && f->op0 == r->op0 && (r->op != OP_CMP_SWAP || f->op1 == r->op1);
	if (!ok)
		fail("QP %d: its %s went out as %s va %#llx rkey %#x len %u op %#llx/%#llx",
		     q->idx, op_name(r->op), op_name(f->op), (unsigned long long)f->va,
		     f->rkey, f->len, (unsigned long long)f->op0,
		     (unsigned long long)f->op1);
	r->started = true;
}

/* A response frame: exactly what the model held when the request came. */
static void rx_response(struct aqp *q, const struct wf *f)
{
	uint32_t seg = seg_of(OP_READ_RESP), i, off, n;
	struct resp *r = NULL;
	int k;

	for (k = 0; k < q->resp_n && !r; k++)
		if (psn_diff(f->psn, q->resp[k].first) >= 0 &&
		    psn_diff(f->psn, q->resp[k].first) < (int32_t)q->resp[k].n)
			r = &q->resp[k];
	if (!r) {
		fail("QP %d: unexpected %s psn %#x in its stream", q->idx, op_name(f->op), f->psn);
		desync = true;
		return;
	}
	i = (uint32_t)psn_diff(f->psn, r->first);
	r->got++;
	if (r->op == OP_ATOMIC_RESP) {
		if (f->op != OP_ATOMIC_RESP || f->req_psn != r->req_psn || f->op0 != r->orig ||
		    (f->flags & ~FL_ACKREQ))
			fail("QP %d: ATOMIC_RESP for psn %#x: got %s req_psn %#x orig %#llx, "
			     "expected orig %#llx", q->idx, r->req_psn, op_name(f->op),
			     f->req_psn, (unsigned long long)f->op0,
			     (unsigned long long)r->orig);
		return;
	}
	off = i * seg;
	n = r->len - off < seg ? r->len - off : seg;
	if (f->op != OP_READ_RESP || f->req_psn != r->req_psn || f->offset != off ||
	    f->paylen != n || (f->flags & ~FL_ACKREQ) !=
	    ((i == 0 ? FL_FIRST : 0) | (i + 1 == r->n ? FL_LAST : 0))) {
		fail("QP %d: READ_RESP %u/%u of psn %#x: got %s req_psn %#x offset %u len %u "
		     "flags %#x", q->idx, i, r->n, r->req_psn, op_name(f->op), f->req_psn,
		     f->offset, f->paylen, f->flags);
		return;
	}
	if (n && memcmp(f->pay, r->data + off, n)) {
		for (k = 0; k < (int)n && f->pay[k] == r->data[off + k]; k++)
			;
		fail("QP %d: READ_RESP of psn %#x: byte %u is %#x, expected %#x",
		     q->idx, r->req_psn, off + k, f->pay[k], r->data[off + k]);
	}
}

static void rx_seq(struct aqp *q, const struct wf *f)
{
	int32_t d = psn_diff(f->psn, q->its_next);

	if (!conn_live(q))
		return;		/* abandoned with the error (8.2) */
	if (d < 0) {
		replies_dup++;	/* a retransmission (we stopped or LOSTed it) */
	} else if (d > 0) {
		fail("QP %d: gap in its stream: psn %#x, expected %#x", q->idx, f->psn,
		     q->its_next);
		desync = true;
		return;
	} else {
		if (q->req.on && !q->req.started && f->psn == q->req.psn)
			rx_own_request(q, f);
		else
			rx_response(q, f);
		q->its_next = q->rx_lo = psn_add(q->its_next, 1);
		resp_prune(q);
	}
	if (f->flags & FL_ACKREQ)
		ack_now(q);
}

static void rx_frame(const uint8_t *b, size_t len)
{
	struct aqp *q;
	struct wf f;
	int v;

	if (len < 14 || !mac_eq(b, PEER_MAC))
		return;
	replies++;
	if (draining)
		return;
	if (!mac_eq(b + 6, veth0_mac)) {
		fail("a frame to the fake peer from a MAC that is not veth0's");
		return;
	}
	v = wf_parse(b + 14, len - 14, &f);
	if (v != C_OK) {
		fail("mbcf0 sent a frame its peer must drop as %s", ctr_name[v]);
		dump_frame("the frame", b + 14, len - 14);
		return;
	}
	q = aqp_by_fqpn(f.dst);
	if (!q) {
		replies_stale++;	/* to a peer QP number of before a reset */
		return;
	}
	if (f.src != q->qpn) {
		fail("QP %d: frame with src_qpn %#x", q->idx, f.src);
		return;
	}
	if (psn_diff(f.ack, q->exp) > 0 || psn_diff(f.ack, q->last_ack) < 0) {
		fail("QP %d (%s): ack_psn %#x, the oracle's rcv_nxt %#x, last %#x (%s)",
		     q->idx, qst_name[q->st], f.ack, q->exp, q->last_ack, op_name(f.op));
		desync = true;
	}
	q->last_ack = f.ack;
	/* 4.5: every sequenced frame carries its round */
	if (op_seq(f.op) && conn_live(q) && (int16_t)(f.rsvd - q->ep_seen) > 0)
		q->ep_seen = f.rsvd;
	if (q == syncq && f.op == OP_ACK && !f.status)
		sync_got++;
	if (op_seq(f.op))
		rx_seq(q, &f);
	else
		rx_ctl(q, &f);
}

static void rx_poll(int timeout_ms)
{
	struct pollfd p = { .fd = rx_fd, .events = POLLIN };
	int n, i;

	if (poll(&p, 1, timeout_ms) <= 0)
		return;
	n = recvmmsg(rx_fd, rxmh, RXB, MSG_DONTWAIT, NULL);
	for (i = 0; i < n; i++)
		rx_frame(rxbuf[i], rxmh[i].msg_len);
}

static void rx_setup(void)
{
	int i;

	rxbuf = calloc(RXB, FMAX);
	if (!rxbuf)
		die("calloc");
	for (i = 0; i < RXB; i++) {
		rxiov[i] = (struct iovec){ rxbuf[i], FMAX };
		rxmh[i].msg_hdr.msg_iov = &rxiov[i];
		rxmh[i].msg_hdr.msg_iovlen = 1;
	}
}

/* Why q has not yet seen everything the oracle announced (NULL: it has). */
static const char *aqp_pending(const struct aqp *q, char *buf, size_t n)
{
	if (q->ctl_got < q->ctl_n)
		snprintf(buf, n, "%s status %u ack_psn %#x not received",
			 op_name(q->ctl[q->ctl_got].op), q->ctl[q->ctl_got].status,
			 q->ctl[q->ctl_got].ack);
	else if (conn_live(q) && q->its_next != q->its_end)
		snprintf(buf, n, "its stream at %#x, frames up to %#x expected",
			 q->its_next, q->its_end);
	else if (q->probed && q->last_ack != q->exp)
		snprintf(buf, n, "ack_psn %#x, the oracle's rcv_nxt %#x", q->last_ack, q->exp);
	else
		return NULL;
	return buf;
}

static bool all_settled(void)
{
	char buf[160];
	int i;

	if (sync_got < sync_expect)
		return false;
	for (i = 0; i < naqp; i++)
		if (aqp_pending(&aqps[i], buf, sizeof(buf)))
			return false;
	return true;
}

/* Receive until every announced reply came; a missing one is a failure. */
static void wait_replies(double timeout_s)
{
	double end = now_s() + timeout_s;
	char buf[160];
	int i;

	while (!all_settled()) {
		if (now_s() > end) {
			if (sync_got < sync_expect)
				fail("no answer to %llu sync probe(s)",
				     (unsigned long long)(sync_expect - sync_got));
			for (i = 0; i < naqp; i++)
				if (aqp_pending(&aqps[i], buf, sizeof(buf)))
					fail("QP %d (qpn %u, %s): %s", aqps[i].idx, aqps[i].qpn,
					     qst_name[aqps[i].st], buf);
			desync = true;
			return;
		}
		rx_poll(20);
	}
	for (i = 0; i < naqp; i++)
		aqps[i].ctl_n = aqps[i].ctl_got = 0;
}

/* A probe to the sync QP last: everything before it has been processed. */
static void sync_probe(void)
{
	struct wf f = base(syncq, OP_ACK);

	f.flags = FL_ACKREQ;
	send_wf(syncq, &f);
	sync_expect++;
}

static void flush_all(void)
{
	txq_flush(tq_to1);	/* these first: the sync probe goes last */
	txq_flush(tq_to0);
}

static void sync_all(void)
{
	sync_probe();
	flush_all();
	wait_replies(30);
}

/* ---- the arena against the model ------------------------------------------------ */

static const char *region_of(size_t off, size_t *rel)
{
	static const int order[] = { M_ROV, M_W, M_R, M_A, M_N, M_RW, M_ALL, M_TOP,
				      M_AREA, M_DEREG, M_OPD };
	size_t i;

	for (i = 0; i < sizeof(order) / sizeof(order[0]); i++) {
		const struct tmr *m = &mrs[order[i]];

		if (off >= m->off && off < m->off + m->len) {
			*rel = off - m->off;
			return m->name;
		}
	}
	*rel = off;
	return NULL;
}

static uint64_t mem_diffs, canary_diffs;

/*
 * Every byte of the arena as the model says.  A difference is reported
 * with the region it is in ("canary": in no MR at all), then the model
 * takes the real bytes so the run goes on finding other differences.
 */
static void check_memory(void)
{
	size_t i = 0, j, rel;
	const char *reg;
	int shown = 0, k;

	if (!memcmp(arena, model, arena_len))
		return;
	while (i < arena_len) {
		if (arena[i] == model[i]) {
			i++;
			continue;
		}
		/* one range, across runs of up to 32 equal bytes (random data
		 * matches the background now and then) */
		for (j = i + 1; j < arena_len; j++) {
			size_t k2;

			if (arena[j] != model[j])
				continue;
			for (k2 = j; k2 < arena_len && k2 < j + 32 && arena[k2] == model[k2]; k2++)
				;
			if (k2 == arena_len || k2 == j + 32)
				break;
			j = k2;
		}
		reg = region_of(i, &rel);
		mem_diffs++;
		if (!reg || !strcmp(reg, "DEREG") || !strcmp(reg, "OPD"))
			canary_diffs++;
		failk(F_MEMORY, "memory: %zu byte(s) from arena %#zx (%s%s+%#zx) differ: expected %02x.., got %02x..",
		     j - i, i, reg ? "MR " : "canary", reg ? reg : "", rel, model[i], arena[i]);
		if (!shown++ && fkind_n[F_MEMORY] <= 20)
			for (k = 0; k < hlog_n; k++)
				printf("  hostile frame this batch: %s\n", hlog[k]);
		memcpy(model + i, arena + i, j - i);
		i = j;
	}
}

/* ---- the honest connection: mbcf1 (requester) -> mbcf0 (responder) ----------------- */

#define H_SLOTS		8
#define H_SLOT		12288
#define H_NRECV		8
#define H_RBUF		10240
#define H_INFLIGHT	6
#define H_RING		64
#define H_COUNTER	(H_SLOTS * H_SLOT)
#define H_RECV0		(H_COUNTER + 64)
#define H_MEM		(H_RECV0 + H_NRECV * H_RBUF)
/* the requester's side: write sources and read results per slot, atomics, sends */
#define L_SRC(s)	((size_t)(s) * H_SLOT)
#define L_DST(s)	((size_t)(H_SLOTS + (s)) * H_SLOT)
#define L_AT(i)		((size_t)2 * H_SLOTS * H_SLOT + (size_t)(i) * 8)
#define L_SEND(i)	(L_AT(H_RING) + (size_t)(i) * H_RBUF)
#define L_MEM		L_SEND(H_INFLIGHT + 2)

enum { HW_WRITE, HW_READ, HW_FA, HW_SEND };
static const char *const hw_name[] = { "WRITE", "READ", "FETCH_ADD", "SEND" };

struct hwr {
	int kind, slot;
	uint32_t len, frames, rframes;
	uint64_t wr_id, gen, orig;
};

static struct {
	struct ibv_pd *pd0, *pd1;
	struct ibv_cq *cq0, *cq1;
	struct ibv_qp *qp0, *qp1;	/* on mbcf0 (responder), on mbcf1 */
	uint8_t *hm, *lm;
	struct ibv_mr *mr0, *mr1;
	uint32_t sq0, sq1;
	uint64_t slot_gen[H_SLOTS];
	int slot_busy[H_SLOTS];		/* WRs in flight on the slot */
	struct hwr ring[H_RING];
	unsigned int head, tail;
	uint32_t posted_f, done_f, posted_rf, done_rf;
	uint64_t counter;		/* value of the next FETCH_ADD's orig */
	uint64_t fa_done;
	uint64_t recv_done;
	struct { uint32_t len; uint64_t gen; } sends[H_RING];
	unsigned int s_head, s_tail;
	uint64_t ops[4], bytes, gen;
	double last_progress;
} H;

static uint8_t pat(uint64_t g, size_t i)
{
	return (uint8_t)(g * 131 + i * 7 + (i >> 9) + (g >> 8));
}

static void pat_fill(uint8_t *p, size_t n, uint64_t g)
{
	size_t i;

	for (i = 0; i < n; i++)
		p[i] = pat(g, i);
}

/* First byte of p that is not pattern g, or -1. */
static long pat_diff(const uint8_t *p, size_t n, uint64_t g)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (p[i] != pat(g, i))
			return (long)i;
	return -1;
}

static void honest_qp(struct ibv_context *c, struct ibv_pd *pd, struct ibv_cq **cq,
		      struct ibv_qp **qp)
{
	struct ibv_qp_init_attr ia = {
		.qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 16, .max_recv_wr = 16, .max_send_sge = 1,
			 .max_recv_sge = 1 },
	};

	*cq = ibv_create_cq(c, 256, NULL, NULL, 0);
	if (!*cq)
		die("ibv_create_cq (honest)");
	ia.send_cq = ia.recv_cq = *cq;
	*qp = ibv_create_qp(pd, &ia);
	if (!*qp)
		die("ibv_create_qp (honest)");
}

static void honest_connect(struct ibv_qp *qp, struct ibv_context *peer_ctx,
			   uint32_t peer_qpn, uint32_t rq_psn, uint32_t sq_psn)
{
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_INIT, .port_num = 1,
		.qp_access_flags = LW | RW | RR | RA,
	};

	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
			  IBV_QP_ACCESS_FLAGS))
		die("honest INIT");
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_4096;
	a.dest_qp_num = peer_qpn;
	a.rq_psn = rq_psn;
	a.max_dest_rd_atomic = 16;
	a.min_rnr_timer = 12;
	a.ah_attr.is_global = 1;
	if (ibv_query_gid(peer_ctx, 1, 0, &a.ah_attr.grh.dgid))
		die("ibv_query_gid");
	a.ah_attr.grh.hop_limit = 1;
	a.ah_attr.port_num = 1;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
			  IBV_QP_DEST_QPN | IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
			  IBV_QP_MIN_RNR_TIMER))
		die("honest RTR");
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = sq_psn;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.max_rd_atomic = 16;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT |
			  IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC))
		die("honest RTS");
}

static void honest_post_recv(unsigned int i)
{
	struct ibv_sge sg = { .addr = (uintptr_t)(H.hm + H_RECV0 + (size_t)i * H_RBUF),
			      .length = H_RBUF, .lkey = H.mr0->lkey };
	struct ibv_recv_wr wr = { .wr_id = i, .sg_list = &sg, .num_sge = 1 }, *bad;

	if (ibv_post_recv(H.qp0, &wr, &bad))
		fail("honest ibv_post_recv: %s", strerror(errno));
}

static void honest_bounds(void)
{
	hq1.una_lo = psn_add(H.sq1, H.done_f);
	hq1.smax_hi = psn_add(H.sq1, H.posted_f);
	hq1.rcv_lo = psn_add(H.sq0, H.done_rf);
	hq1.rcv_hi = psn_add(H.sq0, H.posted_rf);
	hq0.una_lo = H.sq0;
	hq0.smax_hi = psn_add(H.sq0, H.posted_rf);
	hq0.rcv_lo = psn_add(H.sq1, H.done_f);
	hq0.rcv_hi = psn_add(H.sq1, H.posted_f);
}

static void honest_setup(void)
{
	unsigned int s;

	H.pd0 = ibv_alloc_pd(ctx0);
	H.pd1 = ibv_alloc_pd(ctx1);
	H.hm = mmap(NULL, H_MEM, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	H.lm = mmap(NULL, L_MEM, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (!H.pd0 || !H.pd1 || H.hm == MAP_FAILED || H.lm == MAP_FAILED)
		die("honest memory");
	for (s = 0; s < H_SLOTS; s++) {
		H.slot_gen[s] = ++H.gen;
		pat_fill(H.hm + (size_t)s * H_SLOT, H_SLOT, H.slot_gen[s]);
	}
	H.mr0 = ibv_reg_mr(H.pd0, H.hm, H_MEM, LW | RW | RR | RA);
	H.mr1 = ibv_reg_mr(H.pd1, H.lm, L_MEM, LW);
	if (!H.mr0 || !H.mr1)
		die("honest ibv_reg_mr");
	mrs[M_HON].key = H.mr0->rkey;
	mrs[M_HON].live = true;
	honest_qp(ctx0, H.pd0, &H.cq0, &H.qp0);
	honest_qp(ctx1, H.pd1, &H.cq1, &H.qp1);
	H.sq0 = start_psn();
	H.sq1 = start_psn();
	honest_connect(H.qp0, ctx1, H.qp1->qp_num, H.sq1, H.sq0);
	honest_connect(H.qp1, ctx0, H.qp0->qp_num, H.sq0, H.sq1);
	for (s = 0; s < H_NRECV; s++)
		honest_post_recv(s);
	hq0 = (struct hq){ .qp = H.qp0, .qpn = H.qp0->qp_num, .peer_qpn = H.qp1->qp_num,
			   .peer_mac = veth1_mac };
	hq1 = (struct hq){ .qp = H.qp1, .qpn = H.qp1->qp_num, .peer_qpn = H.qp0->qp_num,
			   .peer_mac = veth0_mac };
	honest_bounds();
	H.last_progress = now_s();
}

static unsigned int h_inflight(void)
{
	return H.tail - H.head;
}

/* Post one work request on the honest requester. */
static void honest_post_one(int kind)
{
	struct hwr *w = &H.ring[H.tail % H_RING];
	struct ibv_sge sg = { .lkey = H.mr1->lkey };
	struct ibv_send_wr wr = { .sg_list = &sg, .num_sge = 1,
				  .send_flags = IBV_SEND_SIGNALED }, *bad;
	unsigned int s = 0;

	memset(w, 0, sizeof(*w));
	w->kind = kind;
	w->wr_id = H.tail;
	if (kind == HW_WRITE || kind == HW_READ) {
		s = below(H_SLOTS);
		if (H.slot_busy[s])
			return;
		w->slot = (int)s;
		w->len = H_SLOT;
	}
	switch (kind) {
	case HW_WRITE:
		w->gen = ++H.gen;
		pat_fill(H.lm + L_SRC(s), H_SLOT, w->gen);
		sg.addr = (uintptr_t)(H.lm + L_SRC(s));
		wr.opcode = IBV_WR_RDMA_WRITE;
		wr.wr.rdma.remote_addr = (uintptr_t)(H.hm + (size_t)s * H_SLOT);
		wr.wr.rdma.rkey = H.mr0->rkey;
		w->frames = nframes(H_SLOT, seg_of(OP_WRITE));
		break;
	case HW_READ:
		w->gen = H.slot_gen[s];
		memset(H.lm + L_DST(s), 0, H_SLOT);
		sg.addr = (uintptr_t)(H.lm + L_DST(s));
		wr.opcode = IBV_WR_RDMA_READ;
		wr.wr.rdma.remote_addr = (uintptr_t)(H.hm + (size_t)s * H_SLOT);
		wr.wr.rdma.rkey = H.mr0->rkey;
		w->frames = 1;
		w->rframes = nframes(H_SLOT, seg_of(OP_READ_RESP));
		break;
	case HW_FA:
		w->len = 8;
		w->orig = H.counter++;
		sg.addr = (uintptr_t)(H.lm + L_AT(H.tail % H_RING));
		wr.opcode = IBV_WR_ATOMIC_FETCH_AND_ADD;
		wr.wr.atomic.remote_addr = (uintptr_t)(H.hm + H_COUNTER);
		wr.wr.atomic.rkey = H.mr0->rkey;
		wr.wr.atomic.compare_add = 1;
		w->frames = 1;
		w->rframes = 1;
		break;
	default:
		if (H.s_tail - H.s_head >= H_NRECV - 2)
			return;		/* never an RNR: receives are always there */
		w->len = range(1, H_RBUF);
		w->gen = ++H.gen;
		pat_fill(H.lm + L_SEND(H.tail % (H_INFLIGHT + 2)), w->len, w->gen);
		sg.addr = (uintptr_t)(H.lm + L_SEND(H.tail % (H_INFLIGHT + 2)));
		wr.opcode = IBV_WR_SEND;
		w->frames = nframes(w->len, seg_of(OP_SEND));
		H.sends[H.s_tail % H_RING].len = w->len;
		H.sends[H.s_tail % H_RING].gen = w->gen;
		H.s_tail++;
		break;
	}
	sg.length = w->len;
	wr.wr_id = w->wr_id;
	if (ibv_post_send(H.qp1, &wr, &bad)) {
		fail("honest ibv_post_send %s: %s", hw_name[kind], strerror(errno));
		return;
	}
	if (kind == HW_WRITE || kind == HW_READ)
		H.slot_busy[s]++;
	H.posted_f += w->frames;
	H.posted_rf += w->rframes;
	H.tail++;
}

static void honest_complete(const struct ibv_wc *wc)
{
	struct hwr *w = &H.ring[H.head % H_RING];
	static const int op[] = { IBV_WC_RDMA_WRITE, IBV_WC_RDMA_READ, IBV_WC_FETCH_ADD,
				  IBV_WC_SEND };
	uint64_t orig;
	long d;

	if (H.head == H.tail || wc->wr_id != w->wr_id || wc->status != IBV_WC_SUCCESS ||
	    (int)wc->opcode != op[w->kind]) {
		fail("honest requester: completion wr_id %llu %s opcode %d, expected wr_id %llu "
		     "%s SUCCESS", (unsigned long long)wc->wr_id, wcs(wc->status), wc->opcode,
		     (unsigned long long)w->wr_id, hw_name[w->kind]);
		desync = true;
		return;
	}
	switch (w->kind) {
	case HW_WRITE:
		d = pat_diff(H.hm + (size_t)w->slot * H_SLOT, H_SLOT, w->gen);
		if (d >= 0)
			fail("honest WRITE to slot %d: byte %ld differs", w->slot, d);
		H.slot_gen[w->slot] = w->gen;
		H.slot_busy[w->slot]--;
		break;
	case HW_READ:
		d = pat_diff(H.lm + L_DST(w->slot), H_SLOT, w->gen);
		if (d >= 0 || wc->byte_len != H_SLOT)
			fail("honest READ of slot %d: byte_len %u, byte %ld differs", w->slot,
			     wc->byte_len, d);
		H.slot_busy[w->slot]--;
		break;
	case HW_FA:
		memcpy(&orig, H.lm + L_AT(w->wr_id % H_RING), 8);
		if (orig != w->orig || wc->byte_len != 8)
			fail("honest FETCH_ADD: orig %llu, expected %llu",
			     (unsigned long long)orig, (unsigned long long)w->orig);
		H.fa_done++;
		break;
	}
	H.ops[w->kind]++;
	H.bytes += w->len;
	H.done_f += w->frames;
	H.done_rf += w->rframes;
	H.head++;
	H.last_progress = now_s();
}

static void honest_recv(const struct ibv_wc *wc)
{
	unsigned int i = (unsigned int)(H.recv_done % H_NRECV);
	uint64_t g = H.sends[H.s_head % H_RING].gen;
	uint32_t len = H.sends[H.s_head % H_RING].len;
	long d;

	if (H.s_head == H.s_tail || wc->wr_id != i || wc->status != IBV_WC_SUCCESS ||
	    wc->opcode != IBV_WC_RECV || wc->byte_len != len) {
		fail("honest responder: receive wr_id %llu %s byte_len %u, expected %u SUCCESS %u",
		     (unsigned long long)wc->wr_id, wcs(wc->status), wc->byte_len, i, len);
		desync = true;
		return;
	}
	d = pat_diff(H.hm + H_RECV0 + (size_t)i * H_RBUF, len, g);
	if (d >= 0)
		fail("honest SEND of %u bytes: byte %ld differs", len, d);
	H.s_head++;
	H.recv_done++;
	honest_post_recv(i);
}

static void honest_poll(void)
{
	struct ibv_wc wc[16];
	int n, i;

	while ((n = ibv_poll_cq(H.cq1, 16, wc)) > 0)
		for (i = 0; i < n; i++)
			honest_complete(&wc[i]);
	while ((n = ibv_poll_cq(H.cq0, 16, wc)) > 0)
		for (i = 0; i < n; i++)
			honest_recv(&wc[i]);
}

/* Slots with no write in flight hold exactly their last pattern. */
static void honest_check_idle(void)
{
	uint64_t c;
	long d;
	int s;

	for (s = 0; s < H_SLOTS; s++) {
		if (H.slot_busy[s])
			continue;
		d = pat_diff(H.hm + (size_t)s * H_SLOT, H_SLOT, H.slot_gen[s]);
		if (d >= 0) {
			fail("honest slot %d changed while idle (byte %ld)", s, d);
			pat_fill(H.hm + (size_t)s * H_SLOT, H_SLOT, H.slot_gen[s]);
		}
	}
	memcpy(&c, H.hm + H_COUNTER, 8);
	if (c < H.fa_done || c > H.counter)
		fail("honest counter %llu outside [%llu, %llu]", (unsigned long long)c,
		     (unsigned long long)H.fa_done, (unsigned long long)H.counter);
}

static void honest_step(void)
{
	int tries = 0;

	honest_poll();
	honest_check_idle();
	while (h_inflight() < H_INFLIGHT && tries++ < 12)
		honest_post_one((int)below(4));
	honest_bounds();
	if (h_inflight() && now_s() - H.last_progress > 30) {
		fail("honest connection: no completion for 30 s (%u in flight)", h_inflight());
		desync = true;
	}
}

/* ---- spoofs against the honest connection ------------------------------------------- */

static uint32_t psn_within(uint32_t lo, uint32_t hi)
{
	return psn_add(lo, below((uint32_t)psn_diff(hi, lo) + 1));
}

static int idle_slot(void)
{
	int s = (int)below(H_SLOTS);

	return H.slot_busy[s] ? -1 : s;
}

/* A write of garbage into an idle slot of the honest responder's MR. */
static void hspoof_write(struct wf *f)
{
	int s = idle_slot();

	f->op = OP_WRITE;
	f->flags = FL_SEG;
	f->rkey = H.mr0->rkey;
	f->paylen = (uint16_t)range(1, 256);
	fill_rand(pay, f->paylen);
	f->pay = pay;
	f->va = (uintptr_t)(H.hm + (size_t)(s < 0 ? 0 : s) * H_SLOT) + below(H_SLOT - 256);
	if (s < 0)
		f->rkey = (uint32_t)rnd();	/* no idle slot: a key that fails */
}

static void hspoof_resp(struct wf *f)
{
	f->op = pct(50) ? OP_READ_RESP : OP_ATOMIC_RESP;
	f->flags = f->op == OP_READ_RESP ? FL_SEG : 0;
	f->req_psn = (uint32_t)rnd() & PSN_MASK;
	f->op0 = rnd();
	f->paylen = f->op == OP_READ_RESP ? (uint16_t)range(0, 256) : 0;
	fill_rand(pay, f->paylen);
	f->pay = pay;
}

/*
 * A control frame from the honest peer's MAC that is in the honest QP's
 * state (6.4) but old: its psn where the QP's rcv_nxt may be, an ack_psn
 * behind snd_una by less than a window, a LOST's seen and map behind
 * snd_una, round 0.  false when the bounds leave no such ack_psn.
 */
static bool hspoof_ctl_in_state(const struct hq *h, struct wf *f)
{
	int32_t span = psn_diff(h->smax_hi, h->una_lo) + HQ_DRIFT;
	int32_t pspan = psn_diff(h->rcv_hi, h->rcv_lo) + HQ_DRIFT;
	uint32_t k;

	if (span > WINDOW_MAX - 3 || pspan > WINDOW_MAX)
		return false;
	k = psn_sub(h->una_lo, range(2, (uint32_t)(WINDOW_MAX - span)));
	f->ack = k;
	f->psn = psn_add(psn_sub(h->rcv_hi, WINDOW_MAX - HQ_DRIFT),
			 below((uint32_t)(2 * WINDOW_MAX - pspan) + 1));
	f->rsvd = 0;
	memset(f->map, 0, sizeof(f->map));
	if (f->op == OP_LOST) {
		f->seen = psn_add(k, range(1, (uint32_t)psn_diff(h->una_lo, k) - 1));
		map_fill(f->map, umin((uint32_t)psn_diff(h->una_lo, k) - 1, EARLY_SPAN - 1));
	}
	return true;
}

static void hsend(int dev, struct wf *f, const uint8_t *src)
{
	size_t n = wf_encode(scratch, f);

	emit(dev, dev_mac[dev], src, scratch, n);
}

/*
 * Against the honest QP on dev: from a third MAC with the psns it awaits
 * (swept over everything possible), from the peer's MAC with psns it is
 * certainly not awaiting.  Garbage the honest data check would see.
 */
static void gen_honest(void)
{
	int dev = (int)below(2);
	const struct hq *h = dev ? &hq1 : &hq0;
	struct wf f = { .ver = 2, .dst = h->qpn, .src = h->peer_qpn, .pay = pay };
	uint32_t p, lo, hi;
	uint8_t mac[6];

	f.ack = psn_sub(h->una_lo, range(1, 1u << 20));
	f.psn = (uint32_t)rnd() & PSN_MASK;
	third_mac(mac);
	switch (below(9)) {
	case 8:
		/*
		 * The peer's MAC, a WRITE frame a little after the gap that
		 * could be placed early (5.1 rules 1-4: not LAST, a run of
		 * 255, d < 256, in the responder's MR) but acknowledging an
		 * old psn of the responder's own stream: never placed (rule
		 * 5), drop_out_of_sequence.  Had it been placed, the honest
		 * frame with that psn would be dropped as a duplicate and
		 * acknowledged: the honest data check would fail.  Its LOST
		 * to the real peer names seen = its psn: maybe one it sent.
		 */
		if (dev != 0 || psn_diff(h->rcv_hi, h->rcv_lo) + HQ_DRIFT >= EARLY_SPAN - 2)
			return;
		hspoof_write(&f);
		f.flags = pct(50) ? FL_FIRST : 0;
		f.status = EARLY_SPAN - 1;		/* the run */
		f.psn = psn_add(h->rcv_hi, range(HQ_DRIFT + 1, (uint32_t)(EARLY_SPAN - 1 -
						 psn_diff(h->rcv_hi, h->rcv_lo))));
		f.ack = psn_sub(h->una_lo, range(1, 1000));
		pred_slack[1][C_BADACK]++;
		hsend(dev, &f, h->peer_mac);
		return;
	case 0:		/* NAKs naming every psn it may be waiting on */
		lo = h->una_lo;
		hi = h->smax_hi;
		if (psn_diff(hi, lo) > 24)
			lo = psn_sub(hi, 24);
		for (p = lo; psn_diff(p, hi) <= 0; p = psn_add(p, 1)) {
			f.op = OP_ACK;
			f.status = (uint8_t)range(1, 3);
			f.ack = p;
			hsend(dev, &f, mac);
		}
		return;
	case 1:		/* data with every psn it may expect next */
		lo = h->rcv_lo;
		hi = h->rcv_hi;
		if (psn_diff(hi, lo) > 24)
			lo = psn_sub(hi, 24);
		for (p = lo; psn_diff(p, hi) <= 0; p = psn_add(p, 1)) {
			if (dev == 0)
				hspoof_write(&f);
			else
				hspoof_resp(&f);
			f.psn = p;
			f.ack = psn_within(h->una_lo, h->smax_hi);
			hsend(dev, &f, mac);
		}
		return;
	case 2:		/* STOP, LOST, GO at the psn it may await, third MAC */
		f.op = (uint8_t)range(OP_LOST, OP_GO);
		f.ack = psn_within(h->una_lo, h->smax_hi);
		hsend(dev, &f, mac);
		return;
	case 3:		/* the peer's MAC, an old ack: no effect but a counter */
		f.op = (uint8_t)range(OP_ACK, OP_GO);
		f.status = f.op == OP_ACK && pct(50) ? (uint8_t)range(1, 3) : 0;
		f.flags = pct(30) ? FL_ACKREQ : 0;
		if (pct(50) && hspoof_ctl_in_state(h, &f)) {
			hsend(dev, &f, h->peer_mac);
			return;
		}
		/* one field out of its state (6.4): drop_bad_ack */
		f.psn = psn_within(h->rcv_lo, h->rcv_hi);
		f.seen = psn_add(f.ack, 1);
		switch (below(f.op == OP_LOST ? 6 : 4)) {
		case 0:
			f.psn = psn_add(h->rcv_hi, range(HQ_DRIFT + WINDOW_MAX + 1, 1u << 22));
			break;
		case 1:
			f.psn = psn_sub(h->rcv_lo, range(WINDOW_MAX + 1, 1u << 22));
			break;
		case 2:
			f.ack = psn_sub(h->una_lo, range(WINDOW_MAX + 1, 1u << 22));
			f.seen = psn_add(f.ack, 1);
			break;
		case 3:
			f.ack = psn_add(h->smax_hi, range(HQ_DRIFT + 1, 1u << 22));
			f.seen = psn_add(f.ack, 1);
			break;
		case 4:
			f.seen = psn_sub(f.ack, range(0, 1u << 22));
			break;
		default:
			f.map[0] |= 1;
			break;
		}
		hsend(dev, &f, h->peer_mac);
		return;
	case 4:		/* the peer's MAC, a NAK for a psn never sent */
		f.op = OP_ACK;
		f.status = (uint8_t)range(1, 3);
		f.ack = psn_add(h->smax_hi, range(1, 1u << 20));
		hsend(dev, &f, h->peer_mac);
		return;
	case 5:		/* the peer's MAC, a duplicate: never applied again */
	case 6:		/* the peer's MAC, a gap: dropped, LOST to the real peer */
		if (dev == 0)
			hspoof_write(&f);
		else
			hspoof_resp(&f);
		if (pct(50)) {
			f.psn = psn_sub(h->rcv_lo, range(1, 1u << 20));
		} else {
			f.psn = psn_add(h->rcv_hi, range(EARLY_SPAN, 1u << 20));
			/* the LOST it may make is dropped by the real peer */
			pred_slack[!dev][C_BADACK]++;
		}
		f.flags |= pct(30) ? FL_ACKREQ : 0;
		hsend(dev, &f, h->peer_mac);
		return;
	default:	/* the peer's MAC, the wrong source QP */
		f.op = OP_ACK;
		f.src = (h->peer_qpn ^ range(1, 0xffff)) & PSN_MASK;
		hsend(dev, &f, h->peer_mac);
		return;
	}
}

/* ---- device counters -------------------------------------------------------------- */

static uint64_t ctr_base[2][NCTR], ctr_adj[2][NCTR];
static double ctr_read_at;

static void read_ctrs(int dev, uint64_t *v)
{
	char path[160];
	unsigned long long x;
	FILE *f;
	int i;

	for (i = 0; i < NCTR; i++) {
		snprintf(path, sizeof(path), "/sys/class/infiniband/mbcf%d/ports/1/hw_counters/%s",
			 dev, ctr_name[i]);
		f = fopen(path, "r");
		if (!f || fscanf(f, "%llu", &x) != 1)
			die("read %s", path);
		fclose(f);
		v[i] = x;
	}
}

/* The counters cache for 10 ms (RDMA_HW_STATS_DEFAULT_LIFESPAN): read fresh. */
static void read_all_ctrs(uint64_t v[2][NCTR])
{
	double wait = ctr_read_at + 0.05 - now_s();

	if (wait > 0)
		usleep((useconds_t)(wait * 1e6));
	read_ctrs(0, v[0]);
	read_ctrs(1, v[1]);
	ctr_read_at = now_s();
}

/*
 * Counter deltas against the predictions: exact where only our frames
 * move the counter, at least the prediction where the honest traffic
 * adds to it.  A mismatch is reported once (the baseline moves).
 */
static void check_counters(const char *when)
{
	uint64_t v[2][NCTR], d, want;
	int dev, i, bad = 0;

	read_all_ctrs(v);
	for (dev = 0; dev < 2; dev++) {
		for (i = 0; i < NCTR; i++) {
			if (i == X_TXF)
				continue;	/* wire.sh: against the peer's rx_frames */
			d = v[dev][i] - ctr_base[dev][i];
			want = pred[dev][i] + ctr_adj[dev][i];
			if (ctr_shared[i] ? d >= want :
			    d >= want && d <= want + pred_slack[dev][i])
				continue;
			failk(F_COUNTER, "counter mbcf%d %s %s: expected %s%llu%s, got %llu", dev,
			      ctr_name[i], when, ctr_shared[i] ? ">= " : "", (unsigned long long)want,
			      pred_slack[dev][i] ? " + up to the slack" : "", (unsigned long long)d);
			if (!ctr_shared[i])
				ctr_adj[dev][i] += d < want ? d - want : d - want - pred_slack[dev][i];
			bad++;
		}
	}
	if (bad) {
		printf("  verdicts of the last batch (mbcf0):");
		for (i = 0; i < NVERDICT; i++)
			if (batch_hist[0][i])
				printf(" %s=%llu", ctr_name[i], (unsigned long long)batch_hist[0][i]);
		printf("\n");
	}
}

/* ---- a flood from the other CPU, all the time -------------------------------------- */

/*
 * While the main thread attacks from CPU 0 (and resets QPs), a thread on
 * CPU 1 floods frames whose verdict no QP state can change: codec faults,
 * frames from third MACs to the attack QPs, the sync QP and the honest
 * responder, unknown QP numbers.  So every QP, also one being reset
 * (RESET -> INIT -> RTR -> RTS), takes frames on both CPUs at once.  It
 * pauses for counter checkpoints: a sync probe sent from CPU 1 comes back
 * after every frame it queued there.
 */
#define FLOOD_BURST	32

static struct {
	pthread_t th;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int fd;
	bool run, busy, quit;
	uint32_t qpns[64];	/* QP numbers on mbcf0 it aims at */
	int nqpn;
	uint64_t pred[NCTR];	/* its frames' verdicts on mbcf0, not yet added */
	uint64_t frames;
	uint8_t buf[FLOOD_BURST][256];
	uint8_t pay[256];
	struct mmsghdr mh[FLOOD_BURST];
	struct iovec iov[FLOOD_BURST];
} fl;

/* One state-independent frame at b (Ethernet header included); its verdict. */
static int flood_frame(uint8_t *b, size_t *len)
{
	uint32_t qpn = fl.qpns[below((uint32_t)fl.nqpn)];
	struct wf f = { .ver = 2, .op = OP_WRITE, .flags = FL_SEG, .dst = qpn,
			.src = (uint32_t)rnd() & PSN_MASK, .psn = (uint32_t)rnd() & PSN_MASK,
			.ack = (uint32_t)rnd() & PSN_MASK, .va = arena_va(mrs[M_W].off),
			.rkey = mrs[M_W].key, .pay = fl.pay };
	uint8_t *m = b + 14;
	struct wf g;
	size_t n;
	int v;

	memcpy(b, veth0_mac, 6);
	memcpy(b + 6, PEER_MAC, 6);
	put16(b + 12, ETH_P_MBCF);
	f.op = pct(50) ? OP_WRITE : random_op();
	f.flags = opinfo[f.op].flags & FL_SEG;
	f.paylen = opinfo[f.op].data ? (uint16_t)range(0, 150) : 0;
	n = wf_encode(m, &f);
	switch (below(6)) {
	case 0:
	case 1:		/* a third MAC: wrong_qp whatever the QP's state */
		third_mac(b + 6);
		break;
	case 2:
		put32(m + 4, range(0x800000, 0xefffff));	/* nobody's QP */
		break;
	case 3:
		n = below(MB_HDR);
		break;
	case 4:
		m[pct(50) ? 0 : 1] = pct(50) ? (uint8_t)range(2, 255) : unassigned_op();
		break;
	default:	/* an epoch where none may be, or an unknown flag */
		if (op_seq(f.op) || f.op == OP_LOST)
			m[2] |= (uint8_t)(0x10 << below(4));
		else
			put16(m + 22, (uint16_t)range(1, 0xffff));
		break;
	}
	*len = 14 + n;
	v = wf_parse(m, n, &g);
	/*
	 * To the broadcast or a multicast MAC (2.1: mbcf joins no group):
	 * counted and dropped before anything looks at the frame, whatever
	 * it holds, even a valid frame from the attack QP's own peer.
	 */
	if (pct(4)) {
		if (pct(40))
			memset(b, 0xff, 6);
		else if (pct(50))
			memcpy(b, (const uint8_t[]){ 0x01, 0x00, 0x5e, 0x00, 0x00, 0x01 }, 6);
		else
			b[0] |= 0x01;	/* the group bit of veth0's own MAC */
		if (pct(50))
			memcpy(b + 6, PEER_MAC, 6);
		return C_NOTUNI;
	}
	/* a valid frame here comes from a third MAC or to nobody's QP */
	return v == C_OK ? C_WQP : v;
}

static void flood_burst(void)
{
	size_t len;
	int i, r, v;

	for (i = 0; i < FLOOD_BURST; i++) {
		v = flood_frame(fl.buf[i], &len);
		fl.iov[i] = (struct iovec){ fl.buf[i], len };
		fl.mh[i].msg_hdr.msg_iov = &fl.iov[i];
		fl.mh[i].msg_hdr.msg_iovlen = 1;
		fl.pred[C_RX]++;
		fl.pred[v]++;
	}
	for (i = 0; i < FLOOD_BURST; i += r) {
		r = sendmmsg(fl.fd, fl.mh + i, (unsigned int)(FLOOD_BURST - i), 0);
		if (r < 0) {
			if (errno != EINTR && errno != ENOBUFS && errno != EAGAIN)
				die("flood sendmmsg");
			r = 0;
		}
	}
}

static void *flood_main(void *arg)
{
	cpu_set_t cpus;

	(void)arg;
	CPU_ZERO(&cpus);
	CPU_SET(1, &cpus);
	if (pthread_setaffinity_np(pthread_self(), sizeof(cpus), &cpus))
		die("flood: pin to CPU 1");
	rs = &rs_flood;
	pthread_mutex_lock(&fl.mu);
	for (;;) {
		while (!fl.run && !fl.quit)
			pthread_cond_wait(&fl.cv, &fl.mu);
		if (fl.quit)
			break;
		fl.busy = true;
		pthread_mutex_unlock(&fl.mu);
		flood_burst();
		usleep(200);	/* leave CPU 1 to the honest traffic too */
		pthread_mutex_lock(&fl.mu);
		fl.frames += FLOOD_BURST;
		fl.busy = false;
		pthread_cond_broadcast(&fl.cv);
	}
	pthread_mutex_unlock(&fl.mu);
	return NULL;
}

static void flood_resume(void)
{
	if (!opt_flood)
		return;
	pthread_mutex_lock(&fl.mu);
	fl.run = true;
	pthread_cond_broadcast(&fl.cv);
	pthread_mutex_unlock(&fl.mu);
}

static void pin_cpu(int cpu)
{
	cpu_set_t cpus;

	CPU_ZERO(&cpus);
	CPU_SET(cpu, &cpus);
	if (sched_setaffinity(0, sizeof(cpus), &cpus))
		die("sched_setaffinity %d", cpu);
}

static uint64_t flood_frames(void)
{
	uint64_t n;

	pthread_mutex_lock(&fl.mu);
	n = fl.frames;
	pthread_mutex_unlock(&fl.mu);
	return n;
}

/*
 * Pause the flood and account for it: its frames went through CPU 1's
 * backlog, so a sync probe sent from that CPU comes back after them.
 */
static void flood_pause(void)
{
	int i;

	if (!opt_flood)
		return;
	pthread_mutex_lock(&fl.mu);
	fl.run = false;
	while (fl.busy)
		pthread_cond_wait(&fl.cv, &fl.mu);
	for (i = 0; i < NCTR; i++) {
		pred[0][i] += fl.pred[i];
		fl.pred[i] = 0;
	}
	pthread_mutex_unlock(&fl.mu);
	pin_cpu(1);
	sync_all();
	pin_cpu(0);
}

static void flood_setup(void)
{
	int i;

	pthread_mutex_init(&fl.mu, NULL);
	pthread_cond_init(&fl.cv, NULL);
	for (i = 0; i < naqp; i++)
		fl.qpns[fl.nqpn++] = aqps[i].qpn;
	fl.qpns[fl.nqpn++] = hq0.qpn;
	if (opt_flood && pthread_create(&fl.th, NULL, flood_main, NULL))
		die("pthread_create");
}

static void flood_quit(void)
{
	if (!opt_flood)
		return;
	flood_pause();
	pthread_mutex_lock(&fl.mu);
	fl.quit = true;
	pthread_cond_broadcast(&fl.cv);
	pthread_mutex_unlock(&fl.mu);
	pthread_join(fl.th, NULL);
}

/* ---- resets: all QPs that need one, step by step, frames at every step -------------- */

/* Frames at a QP between the steps of its reconnection. */
static void fire_at(struct aqp *q, int n)
{
	int i;

	for (i = 0; i < n; i++) {
		switch (below(4)) {
		case 0:
			gen_codec(q);
			break;
		case 1:
			gen_wrong(q);
			break;
		case 2:
			gen_write(q, false);
			break;
		default:
			gen_ctl(q);
			break;
		}
	}
}

/*
 * The QP's peer starts talking in RTR: its first frame fixes where the
 * QP's own stream starts (3), whatever sq_psn RTS gives later.
 */
static void fire_rtr(struct aqp *q)
{
	struct wf f = base(q, OP_WRITE);
	const struct tmr *t = &mrs[M_R];

	f.ack = (uint32_t)rnd() & PSN_MASK;
	f.flags = FL_SEG;
	f.rkey = mrs[M_W].key;
	f.va = mr_iova(&mrs[M_W]);
	/* without remote write only an empty write is taken (unchecked) */
	f.paylen = qp_allows(q, RW) ? (uint16_t)range(0, 64) : 0;
	fill_rand(pay, f.paylen);
	send_wf(q, &f);
	if (conn_live(q) && qp_allows(q, RR)) {
		f = base(q, OP_READ_REQ);
		f.rkey = t->key;
		f.va = mr_iova(t);
		f.len = range(0, 3000);
		send_wf(q, &f);
	}
}

static struct aqp *resetting[64];
static int nresetting;
static uint64_t resets_under_fire;

/* One step of the ladder for every QP being reset; false: give up on it. */
static bool ladder_step(struct aqp *q, int step)
{
	uint32_t sq;

	switch (step) {
	case 0:
		if (aqp_to_state(q, IBV_QPS_RESET, "RESET"))
			return false;
		q->st = Q_RESET;
		aqp_clear_oracle(q);
		return true;
	case 1:
		if (pct(20) && q->idx > 2)
			q->access = (int)(LW | ((uint32_t)rnd() & (RW | RR | RA)));
		if (aqp_to_init(q))
			return false;
		q->st = Q_INIT;
		return true;
	case 2:
		q->gen = (q->gen + 1) & 0xff;
		q->fqpn = 0xF00000u | (uint32_t)q->idx << 8 | (uint32_t)q->gen;
		q->exp = start_psn();
		if (aqp_to_rtr(q))
			return false;
		aqp_rtr_state(q);
		return true;
	default:
		if (q->st != Q_RTR)	/* it failed in RTR: the next batch resets it */
			return true;
		sq = start_psn();
		if (aqp_to_rts(q, sq))
			return false;
		aqp_rts_state(q, sq);
		q->resets++;
		return true;
	}
}

/*
 * Error (ours or the core's), then RESET -> INIT -> RTR -> RTS with new
 * psns and a new peer QP number, for every QP in resetting[]: between the
 * steps (under fire) frames to them, then one sync for all.
 */
static void reset_all(bool under_fire)
{
	int i, step;

	for (i = 0; i < nresetting; i++) {
		struct aqp *q = resetting[i];

		if (conn_live(q)) {
			if (aqp_to_state(q, IBV_QPS_ERR, "ERR")) {
				desync = true;
				return;
			}
			enter_error(q, ERR_USER, 0, 0);
		}
		aqp_check_cq(q);
	}
	for (step = 0; step < 4 && !desync; step++) {
		for (i = 0; i < nresetting; i++)
			if (!ladder_step(resetting[i], step))
				desync = true;
		if (!under_fire || step == 3)
			continue;
		for (i = 0; i < nresetting; i++) {
			if (step < 2)
				fire_at(resetting[i], (int)range(2, 12));
			else
				fire_rtr(resetting[i]);
		}
		sync_all();
	}
	if (under_fire)
		resets_under_fire += (uint64_t)nresetting;
	nresetting = 0;
}

/* ---- one batch ------------------------------------------------------------------ */

static uint64_t batches, hostile_ops;
static bool kind_on[16];
static bool hostile_due[64];
static const char *const kind_names[] = {
	"write", "write_imm", "send", "read", "atomic", "codec", "wrong", "seq",
	"ctl", "ackgarb", "resp", "pad", "hostile", "own", "honest", NULL,
};

/* Weights of the actions 0..12 of kind_names (own and honest: elsewhere). */
static const uint8_t weight[13] = { 26, 4, 8, 6, 5, 18, 7, 7, 6, 3, 2, 3, 1 };

static uint32_t weight_of(int k)
{
	return kind_on[k] ? weight[k] : 0;
}

static void act(struct aqp *q)
{
	uint32_t total = 0, x;
	int k;

	if (!conn_live(q)) {
		switch (below(4)) {
		case 0:
			if (kind_on[5])
				gen_codec(q);
			break;
		case 1:
			if (kind_on[6])
				gen_wrong(q);
			break;
		default:
			gen_err_poke(q);
			break;
		}
		return;
	}
	if (q->req.on && q->req.started && kind_on[13] && pct(3)) {
		own_answer(q);
		return;
	}
	for (k = 0; k < 13; k++)
		total += weight_of(k);
	if (!total)
		return;
	x = below(total);
	for (k = 0; x >= weight_of(k); k++)
		x -= weight_of(k);
	switch (k) {
	case 0: gen_write(q, false); break;
	case 1: gen_write(q, true); break;
	case 2: gen_send(q); break;
	case 3: gen_read(q); break;
	case 4: gen_atomic(q); break;
	case 5: gen_codec(q); break;
	case 6: gen_wrong(q); break;
	case 7: gen_seq(q); break;
	case 8: gen_ctl(q); break;
	case 9: gen_ackgarb(q); break;
	case 10: gen_resp(q); break;
	case 11: gen_pad(q); break;
	default:
		hostile_ops++;
		gen_hostile(q);
		break;
	}
}

static void batch_begin(void)
{
	int i;

	locked = 0;
	hlog_n = 0;
	memset(resp_budget, 0, sizeof(resp_budget));
	memset(batch_hist, 0, sizeof(batch_hist));
	for (i = 0; i < naqp; i++) {
		aqps[i].exp0 = aqps[i].exp;
		aqps[i].probed = false;
		/* most QPs end the batch with an operation that must be NAKed */
		hostile_due[i] = !aqps[i].sync && kind_on[12] && pct(50);
	}
}

/* Probe every connected QP, then the sync QP; all replies; all checks. */
static void batch_end(void)
{
	struct wf f;
	int i;

	for (i = 0; i < opt_qps; i++) {
		struct aqp *q = &aqps[i];

		if (!conn_live(q))
			continue;
		f = base(q, OP_ACK);
		f.flags = FL_ACKREQ;
		send_wf(q, &f);
		q->probed = true;
	}
	sync_all();
	for (i = 0; i < naqp; i++)
		aqp_check_cq(&aqps[i]);
	check_memory();
}

/* Between batches: reconnect QPs in error, post receives and requests. */
static void batch_between(void)
{
	struct wf f;
	int i, want;

	for (i = 0; i < opt_qps; i++)
		if (aqps[i].st == Q_CERR || (aqps[i].st == Q_RTS && pct(2)))
			resetting[nresetting++] = &aqps[i];
	if (nresetting)
		reset_all(pct(30));
	for (i = 0; i < opt_qps && !desync; i++) {
		struct aqp *q = &aqps[i];

		if (!conn_live(q))
			continue;
		want = pct(10) ? 0 : (int)range(1, 4);
		while (q->rq_n < want && post_recv_one(q))
			;
		/* (a QP about to NAK starts no request of its own: 8.3) */
		if (q->st == Q_RTS && !q->drain && !q->req.on && kind_on[13] &&
		    pct(25)) {
			post_own_request(q);
			/* a frame makes the QP pull its send queue now */
			f = base(q, OP_ACK);
			f.flags = FL_ACKREQ;
			send_wf(q, &f);
			q->probed = true;
		}
	}
	sync_all();
	for (i = 0; i < naqp; i++)
		aqp_check_cq(&aqps[i]);
}

/* Mostly a connected QP: one in the error state takes few frames. */
static struct aqp *pick_qp(void)
{
	int i = (int)below((uint32_t)opt_qps), k;

	if (conn_live(&aqps[i]) || pct(15))
		return &aqps[i];
	for (k = 1; k < opt_qps; k++)
		if (conn_live(&aqps[(i + k) % opt_qps]))
			return &aqps[(i + k) % opt_qps];
	return &aqps[i];
}

/* The honest pair moves on: completions checked, new requests posted. */
static void honest_turn(void)
{
	rs = &rs_honest;
	honest_step();
	rs = &rs_attack;
}

static void batch(void)
{
	uint64_t start = frames_sent(), n, next_honest = (uint64_t)opt_batch / 3;
	int i;

	batch_begin();
	vlan_ok = true;
	for (;;) {
		n = frames_sent() - start;
		if (desync || n >= (uint64_t)opt_batch)
			break;
		if (n >= next_honest) {
			honest_turn();
			next_honest += (uint64_t)opt_batch / 3;
		}
		if (n >= (uint64_t)opt_batch * 97 / 100) {	/* near the end of the batch */
			for (i = 0; i < opt_qps; i++) {
				if (hostile_due[i] && conn_live(&aqps[i])) {
					hostile_ops++;
					gen_hostile(&aqps[i]);
				}
				hostile_due[i] = false;
			}
		}
		if (kind_on[14] && pct(4)) {
			/* its psn sweeps depend on the honest traffic's timing */
			rs = &rs_honest;
			gen_honest();
			rs = &rs_attack;
			continue;
		}
		act(pick_qp());
	}
	for (i = 0; i < opt_qps; i++)
		if (conn_live(&aqps[i]) && aqps[i].req.on && aqps[i].req.started)
			own_answer(&aqps[i]);
	vlan_ok = false;
	batch_end();
	if (!desync)
		batch_between();
	honest_turn();
	batches++;
	if (batches % (uint64_t)opt_check_every == 0) {
		flood_pause();
		check_counters("at a checkpoint");
		flood_resume();
	}
}

/* ---- setup, teardown, report --------------------------------------------------------- */

static uint32_t read_mtu(void)
{
	unsigned int v = 0;
	FILE *f = fopen("/sys/class/net/veth0/mtu", "r");

	if (!f || fscanf(f, "%u", &v) != 1)
		die("read veth0 mtu");
	fclose(f);
	return v;
}

/* Only mbcf0's frames to the fake peer: dst PEER_MAC, EtherType 0x88B5. */
static void open_sockets(void)
{
	static struct sock_filter code[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, 0),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 0, 0, 5),
		BPF_STMT(BPF_LD | BPF_H | BPF_ABS, 4),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 0, 0, 3),
		BPF_STMT(BPF_LD | BPF_H | BPF_ABS, 12),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, ETH_P_MBCF, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, 0xffff),
		BPF_STMT(BPF_RET | BPF_K, 0),
	};
	struct sock_fprog prog = { sizeof(code) / sizeof(code[0]), code };
	int rcvbuf = 64 << 20, fd0;

	code[1].k = get32(PEER_MAC);
	code[3].k = get16(PEER_MAC + 4);
	self_ns_fd = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
	if (self_ns_fd < 0)
		die("open /proc/self/ns/net");
	fd0 = packet_socket("veth0", 0, false, NULL, veth0_mac);
	tq_to1 = txq_new(fd0, false);
	enter_ns1();
	tq_to0 = txq_new(packet_socket("veth1", 0, true, NULL, veth1_mac), true);
	rx_fd = packet_socket("veth1", ETH_P_MBCF, false, &prog, NULL);
	fl.fd = packet_socket("veth1", 0, false, NULL, NULL);
	leave_ns1();
	if (setsockopt(rx_fd, SOL_SOCKET, SO_RCVBUFFORCE, &rcvbuf, sizeof(rcvbuf)))
		die("SO_RCVBUFFORCE");
	rx_setup();
}

static void socket_stats(void)
{
	struct tpacket_stats st;
	socklen_t len = sizeof(st);

	if (getsockopt(rx_fd, SOL_PACKET, PACKET_STATISTICS, &st, &len))
		die("PACKET_STATISTICS");
	socket_drops += st.tp_drops;
}

static void teardown(void)
{
	int i;

	for (i = 0; i < naqp; i++) {
		if (ibv_destroy_qp(aqps[i].qp) || ibv_destroy_cq(aqps[i].cq))
			fail("destroy attack QP %d: %s", i, strerror(errno));
		aqps[i].qp = NULL;
	}
	if (ibv_destroy_qp(H.qp0) || ibv_destroy_qp(H.qp1) || ibv_destroy_cq(H.cq0) ||
	    ibv_destroy_cq(H.cq1) || ibv_dereg_mr(H.mr0) || ibv_dereg_mr(H.mr1) ||
	    ibv_dealloc_pd(H.pd0) || ibv_dealloc_pd(H.pd1))
		fail("destroy the honest pair: %s", strerror(errno));
	for (i = 0; i < NMR; i++)
		if (mrs[i].mr && ibv_dereg_mr(mrs[i].mr))
			fail("ibv_dereg_mr %s: %s", mrs[i].name, strerror(errno));
	if (ibv_dealloc_pd(pd_attack) || ibv_dealloc_pd(pd_other))
		fail("ibv_dealloc_pd: %s", strerror(errno));
	if (ibv_close_device(ctx0) || ibv_close_device(ctx1))
		fail("ibv_close_device");
}

/* Wait for the honest requests still in flight; the last data checks. */
static void honest_finish(void)
{
	struct ibv_qp_attr a;
	struct ibv_qp_init_attr ia;
	double end = now_s() + 60;

	while (h_inflight() && now_s() < end) {
		honest_poll();
		usleep(1000);
	}
	honest_poll();
	if (h_inflight())
		fail("honest connection: %u requests never completed", h_inflight());
	honest_check_idle();
	{
		uint64_t c;

		memcpy(&c, H.hm + H_COUNTER, 8);
		if (c != H.counter)
			fail("honest counter %llu, expected %llu", (unsigned long long)c,
			     (unsigned long long)H.counter);
	}
	if (ibv_query_qp(H.qp0, &a, IBV_QP_STATE, &ia) || a.qp_state != IBV_QPS_RTS)
		fail("honest responder not in RTS at the end (state %d)", a.qp_state);
	if (ibv_query_qp(H.qp1, &a, IBV_QP_STATE, &ia) || a.qp_state != IBV_QPS_RTS)
		fail("honest requester not in RTS at the end (state %d)", a.qp_state);
	printf("honest: %llu writes, %llu reads, %llu fetch-adds, %llu sends, %llu bytes, "
	       "all compared; both QPs in RTS\n", (unsigned long long)H.ops[HW_WRITE],
	       (unsigned long long)H.ops[HW_READ], (unsigned long long)H.ops[HW_FA],
	       (unsigned long long)H.ops[HW_SEND], (unsigned long long)H.bytes);
}

static void print_expectations(void)
{
	int dev, i;

	for (dev = 0; dev < 2; dev++)
		for (i = 0; i < NCTR; i++)
			if (i != X_TXF && !ctr_shared[i] && pred_slack[dev][i])
				printf("expect mbcf%d %s range %llu %llu\n", dev, ctr_name[i],
				       (unsigned long long)pred[dev][i],
				       (unsigned long long)(pred[dev][i] + pred_slack[dev][i]));
			else if (i != X_TXF)
				printf("expect mbcf%d %s %s %llu\n", dev, ctr_name[i],
				       ctr_shared[i] ? "min" : "exact",
				       (unsigned long long)pred[dev][i]);
	printf("sent mbcf0 %llu\n", (unsigned long long)pred[0][C_RX]);
	printf("sent mbcf1 %llu\n", (unsigned long long)pred[1][C_RX]);
	printf("replies %llu\n", (unsigned long long)replies);
	printf("socket_drops %llu\n", (unsigned long long)socket_drops);
}

static void usage(void)
{
	int i;

	fprintf(stderr, "usage: mbcf_wire_attack [-s SEED] [-n FRAMES] [-q QPS] [-b BATCH] "
		"[-c CHECK_EVERY] [-k KIND,...] [-F] [-v]\n  kinds:");
	for (i = 0; kind_names[i]; i++)
		fprintf(stderr, " %s", kind_names[i]);
	fprintf(stderr, "\n");
	exit(2);
}

static void parse_kinds(void)
{
	char *s, *tok, *save = NULL;
	int i;

	for (i = 0; kind_names[i]; i++)
		kind_on[i] = !opt_kinds;
	if (!opt_kinds)
		return;
	s = strdup(opt_kinds);
	for (tok = strtok_r(s, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		for (i = 0; kind_names[i] && strcmp(kind_names[i], tok); i++)
			;
		if (!kind_names[i])
			usage();
		kind_on[i] = true;
	}
	free(s);
}

static void parse_args(int argc, char **argv)
{
	int opt;

	opt_seed = (uint64_t)time(NULL) ^ (uint64_t)getpid() << 20;
	while ((opt = getopt(argc, argv, "s:n:q:b:c:k:Fvh")) != -1) {
		switch (opt) {
		case 's': opt_seed = strtoull(optarg, NULL, 0); break;
		case 'n': opt_frames = strtoull(optarg, NULL, 0); break;
		case 'q': opt_qps = atoi(optarg); break;
		case 'b': opt_batch = atoi(optarg); break;
		case 'c': opt_check_every = atoi(optarg); break;
		case 'k': opt_kinds = optarg; break;
		case 'F': opt_flood = false; break;
		case 'v': opt_verbose++; break;
		default: usage();
		}
	}
	if (opt_qps < 3 || opt_qps > 60 || opt_batch < 16 || opt_check_every < 1)
		usage();
	parse_kinds();
}

int main(int argc, char **argv)
{
	uint64_t total, resets = 0;
	double t0, t;
	int i;

	setvbuf(stdout, NULL, _IOLBF, 0);
	parse_args(argc, argv);
	printf("seed %#llx (rerun with -s %#llx)\n", (unsigned long long)opt_seed,
	       (unsigned long long)opt_seed);
	rs_attack = opt_seed | 1;
	rs_honest = (opt_seed ^ 0x9e3779b97f4a7c15ull) | 1;
	rs_flood = (opt_seed ^ 0x7f4a7c159e3779b9ull) | 1;
	pin_cpu(0);
	mtu = read_mtu();
	if (mtu < 1024 || mtu > 9000)
		die("veth0 MTU %u", mtu);
	open_sockets();
	ctx0 = open_dev("mbcf0");
	ctx1 = open_dev("mbcf1");
	gid_of_mac(&peer_gid, PEER_MAC);
	arena_setup();
	honest_setup();
	naqp = opt_qps + 1;
	aqps = calloc((size_t)naqp, sizeof(*aqps));
	if (!aqps)
		die("calloc");
	for (i = 0; i < naqp; i++)
		aqp_create(&aqps[i], i, i == opt_qps);
	syncq = &aqps[opt_qps];
	flood_setup();
	printf("mtu %u, %d attack QPs, sync QP %u, honest QPs %u (mbcf0) <- %u (mbcf1), "
	       "veth0 %02x:..:%02x veth1 %02x:..:%02x\n", mtu, opt_qps, syncq->qpn,
	       hq0.qpn, hq1.qpn, veth0_mac[0], veth0_mac[5], veth1_mac[0], veth1_mac[5]);
	read_all_ctrs(ctr_base);
	sync_all();
	batch_between();
	t0 = now_s();
	flood_resume();
	while (!desync && counted + flood_frames() < opt_frames)
		batch();
	flood_quit();
	t = now_s() - t0;
	total = frames_sent() + fl.frames;
	for (i = 0; i < opt_qps; i++)
		resets += aqps[i].resets;
	printf("attack: %llu frames counted by the devices; %llu frames in %.1f s (%.0f frames/s): %llu from the attacker "
	       "(%.0f/s, %llu of them non-linear, %llu 802.1Q-tagged; in sendmmsg %.1f s), %llu from the "
	       "flood thread; %llu batches, %llu hostile operations, %llu QP resets "
	       "(%llu under fire); %llu replies (%llu duplicates, %llu to old peers)\n",
	       (unsigned long long)(counted + fl.frames),
	       (unsigned long long)total, t, total / (t > 0 ? t : 1),
	       (unsigned long long)frames_sent(), frames_sent() / (t > 0 ? t : 1),
	       (unsigned long long)tq_to0->nonlinear, (unsigned long long)vlan_frames,
	       tq_to0->busy_s + tq_to1->busy_s,
	       (unsigned long long)fl.frames, (unsigned long long)batches,
	       (unsigned long long)hostile_ops, (unsigned long long)resets,
	       (unsigned long long)resets_under_fire, (unsigned long long)replies,
	       (unsigned long long)replies_dup, (unsigned long long)replies_stale);
	for (i = 0; i < opt_qps; i++)
		printf("  attack QP %d: %llu resets, %llu NAKs sent\n", i,
		       (unsigned long long)aqps[i].resets, (unsigned long long)aqps[i].naks);
	if (desync)
		printf("the oracle lost track (see the first FAIL): attack stopped early\n");
	rs = &rs_honest;
	honest_finish();
	check_counters("at the end");
	teardown();
	draining = true;
	for (t = now_s(); now_s() - t < 0.5;)
		rx_poll(50);		/* whatever it sent last (flushes) */
	socket_stats();
	if (socket_drops)
		fail("the reply socket dropped %llu frames", (unsigned long long)socket_drops);
	if (mem_diffs)
		printf("memory: %llu differing ranges, %llu outside any MR that grants the access\n",
		       (unsigned long long)mem_diffs, (unsigned long long)canary_diffs);
	print_expectations();
	printf("wire_attack: %d failure(s)\n", failures);
	return failures > 100 ? 100 : failures;
}
