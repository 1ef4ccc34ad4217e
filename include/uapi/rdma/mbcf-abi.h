/* SPDX-License-Identifier: ((GPL-2.0 WITH Linux-syscall-note) OR BSD-2-Clause) */
/*
 * mbcf kernel <-> rdma-core provider ABI, and nothing else.
 *
 * Two kinds of things cross the boundary:
 *  - the driver-private "udata" of verbs commands (the *_resp structs);
 *  - rings in memory the kernel allocates and the provider mmap()s: the
 *    completion queue (kernel produces), the send and receive queues
 *    (provider produces).  Ring indices and flags are driven by
 *    include/mbcf/ring.h, the one ring implementation both sides compile.
 *
 * All fields are host byte order unless named *_be, naturally aligned, and
 * structs are padded to a multiple of 8 bytes so 32- and 64-bit user space
 * see one layout.  Bump MBCF_ABI_VERSION on any incompatible change; the
 * provider refuses a kernel whose version differs.
 *
 * The kernel never trusts what user space writes into a ring: it copies a
 * work request out of the ring before validating it, keeps its own copy of
 * every index it owns, and treats an impossible index as a fatal QP/CQ
 * error (never as a reason to touch memory outside the ring).
 */
#ifndef MBCF_ABI_H
#define MBCF_ABI_H

#include <linux/types.h>
#include <linux/stddef.h>

/*
 * A flexible array that may share a union.  C++ gets a zero-length array:
 * the uapi __DECLARE_FLEX_ARRAY of Linux 6.1 wraps the array in a struct
 * beside an empty one, which has size 1 in C++ and would shift the layout.
 */
#ifdef __cplusplus
#define MBCF_FLEX_ARRAY(TYPE, NAME)	TYPE NAME[0]
#else
#define MBCF_FLEX_ARRAY(TYPE, NAME)	__DECLARE_FLEX_ARRAY(TYPE, NAME)
#endif

/* ib_device_ops.uverbs_abi_ver; checked by libibverbs against the provider. */
#define MBCF_UVERBS_ABI_VERSION 1

/* Version of everything below; carried in mbcf_alloc_ucontext_resp. */
#define MBCF_ABI_VERSION 6

/* Name prefix the provider matches (the driver id is RDMA_DRIVER_UNKNOWN). */
#define MBCF_DEVICE_NAME_PREFIX "mbcf"

/*
 * Driver data of query_device (behind the extended core response): what
 * libibverbs shows as ibv_device_attr_ex.packet_pacing_caps.  Rates in
 * kbit/s, counting whole Ethernet frames; supported_qpts is a mask of
 * 1 << IBV_QPT_*.  A shorter buffer gets a prefix (none: nothing).
 */
struct mbcf_query_device_resp {
	__u32 qp_rate_limit_min;
	__u32 qp_rate_limit_max;
	__u32 supported_qpts;
	__u32 reserved;
};

/* Response to ibv_open_device() -> alloc_ucontext. */
struct mbcf_alloc_ucontext_resp {
	__u32 abi_version;	/* MBCF_ABI_VERSION of the kernel */
	__u32 max_inline;	/* largest IBV_SEND_INLINE payload, bytes */
};

/*
 * Ring memory layout (one mmap per ring, page aligned, length mmap_len):
 *
 *   offset   0  __u32 prod      producer's index (free-running, wraps at 2^32)
 *   offset  64  __u32 cons      consumer's index
 *   offset 128  __u32 db_needed kernel -> provider: 1 = the kernel is idle on
 *                               this queue, ring the doorbell after posting
 *   offset 192  __u32 flags     kernel -> provider: MBCF_RING_F_*
 *   offset 256  entries[num_entries], each `stride` bytes
 *
 * Entry i lives at 256 + (i & (num_entries - 1)) * stride.  num_entries is
 * a power of two.  Each index sits on its own cache line so the two sides
 * never write the same line.
 */
#define MBCF_RING_PROD_OFF	0
#define MBCF_RING_CONS_OFF	64
#define MBCF_RING_DB_OFF	128
#define MBCF_RING_FLAGS_OFF	192
#define MBCF_RING_ENTRIES_OFF	256

/*
 * Ring flags.  DEAD: the kernel object behind the ring is gone (destroyed,
 * or its device was removed while the process kept the mapping): nothing
 * will be produced or consumed any more.  The provider checks it before
 * publishing a work request: a post on a dead queue fails with EIO and
 * publishes nothing.  (The kernel also leaves db_needed set on a dead
 * send/receive queue, so a provider that does not check rings a doorbell,
 * which fails.)  A doorbell that fails with EIO after entries were
 * published does not fail the post: the kernel may still execute them.
 */
#define MBCF_RING_F_DEAD	0x1

/* Where a ring is and how it is cut; part of the create responses. */
struct mbcf_ring_info {
	__aligned_u64 mmap_offset;	/* pass to mmap() on the context fd */
	__aligned_u64 mmap_len;
	__u32 num_entries;		/* power of two */
	__u32 stride;			/* bytes per entry, multiple of 16 */
};

/*
 * Completion queue entry: exactly struct ib_uverbs_wc (rdma/ib_user_verbs.h),
 * 48 bytes, whose fields libibverbs already knows how to turn into ibv_wc.
 */
#define MBCF_CQE_SIZE		48

struct mbcf_create_cq_resp {
	struct mbcf_ring_info ring;
};

/*
 * ibv_resize_cq: a new ring, holding the completions not yet polled at its
 * start (prod = their number, cons = 0).  The old ring is marked dead.
 */
struct mbcf_resize_cq_resp {
	struct mbcf_ring_info ring;
};

/* A scatter/gather element, as in struct ibv_sge. */
struct mbcf_sge {
	__aligned_u64 addr;
	__u32 length;
	__u32 lkey;
};

/*
 * Send queue entry: a 56-byte header, then num_sge struct mbcf_sge or, with
 * IBV_SEND_INLINE in send_flags, inline_len bytes of data.  The kernel reads
 * each field once, into its own copy, and checks it against the QP's
 * limits before use: num_sge <= max_send_sge, inline_len <= max_inline.
 */
struct mbcf_send_wqe {
	__aligned_u64 wr_id;
	__u32 opcode;		/* enum ibv_wr_opcode (same values as ib_uverbs) */
	__u32 send_flags;	/* IBV_SEND_* */
	union {
		__u32 imm_data_be;	/* *_WITH_IMM: network order as given */
		__u32 invalidate_rkey;	/* LOCAL_INV, SEND_WITH_INV */
		__u32 mw_rkey;		/* BIND_MW: the window's current rkey */
	};
	__u32 num_sge;
	union {
		__aligned_u64 remote_addr;	/* BIND_MW: the window's first byte */
		struct {
			__u32 ah;		/* the address handle's number */
			__u32 remote_qpn;
		} ud;				/* UD QPs */
	};
	union {
		__u32 rkey;		/* BIND_MW: the window's new rkey */
		__u32 remote_qkey;	/* UD QPs */
	};
	__u32 inline_len;
	union {
		struct {
			__aligned_u64 compare_add;	/* CMP_AND_SWP: compare;
							 * FETCH_AND_ADD: add */
			__aligned_u64 swap;		/* CMP_AND_SWP: swap */
		};
		struct {
			__aligned_u64 length;	/* bytes; 0 unbinds (type 1) */
			__u32 mr_lkey;		/* the MR the window lies in */
			__u32 access;		/* IBV_ACCESS_REMOTE_* it grants */
		} bind;				/* BIND_MW */
	};
	union {
		MBCF_FLEX_ARRAY(struct mbcf_sge, sge);
		MBCF_FLEX_ARRAY(__u8, inline_data);
	};
};

/*
 * Send entry opcode of a FIFO push (docs/protocol.md 16.3): one record,
 * its payload by num_sge SGEs or inline, onto the FIFO of key `rkey` at
 * the peer.  An RC or UC QP's; at most one frame (MTU - 28 bytes).  It
 * completes as IBV_WC_SEND.  The value lies in the range uverbs leaves
 * to drivers.
 */
#define MBCF_WR_FIFO_PUSH	0xf0

/* Receive queue entry: a 16-byte header, then num_sge struct mbcf_sge. */
struct mbcf_recv_wqe {
	__aligned_u64 wr_id;
	__u32 num_sge;		/* <= the QP's max_recv_sge */
	__u32 reserved;
	MBCF_FLEX_ARRAY(struct mbcf_sge, sge);
};

/* ibv_create_ah: the number send entries name the handle by. */
struct mbcf_create_ah_resp {
	__u32 ah_num;
	__u32 reserved;
};

/*
 * ibv_reg_mr's driver data (optional; none: a plain MR).  With
 * MBCF_MR_FIFO the region [addr, addr + 128 + fifo_size) becomes a
 * memory-based FIFO (docs/protocol.md 16): addr 64-byte aligned, access
 * exactly IBV_ACCESS_LOCAL_WRITE, fifo_size a power of two from 64 B to
 * 1 GiB.  Its key names the FIFO to FIFO_PUSH only: no RDMA access, lkey
 * or window takes it.  ibv_advise_mr(IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE)
 * with one SGE of that key is the FIFO's doorbell: the QPs that were
 * stopped for lack of room get GO.
 */
#define MBCF_MR_FIFO		0x1

/*
 * The signal (docs/protocol.md 16.5): with MBCF_FIFO_SIGNAL or
 * MBCF_FIFO_SIGNAL_EMPTY (include/mbcf/fifo.h; not both) in fifo_flags,
 * fifo_eventfd is an eventfd of the caller's the kernel adds 1 to per
 * event.  Without either it means nothing and must be 0 (what the field,
 * once `reserved`, always held: an older provider's FIFO has no signal)
 * or -1.  The layout and size are unchanged.
 */
struct mbcf_reg_mr_cmd {
	__u32 flags;		/* MBCF_MR_FIFO */
	__u32 fifo_flags;	/* MBCF_FIFO_FULL_ERROR, _SIGNAL, _SIGNAL_EMPTY */
	__u32 fifo_size;	/* bytes of the record area */
	__s32 fifo_eventfd;	/* with a signal flag: the eventfd; else 0/-1 */
};

struct mbcf_create_qp_resp {
	struct mbcf_ring_info sq;
	struct mbcf_ring_info rq;	/* 0 entries: the QP has an SRQ */
};

/*
 * ibv_create_srq: the SRQ's receive ring, entries struct mbcf_recv_wqe as a
 * QP's receive queue; POST_SRQ_RECV with no work request is its doorbell.
 */
struct mbcf_create_srq_resp {
	struct mbcf_ring_info ring;
};

#endif /* MBCF_ABI_H */
