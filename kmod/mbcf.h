/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * mbcf kernel module: the objects every kmod/ file shares.
 *
 * One struct mbcf_dev per netdev (created by `rdma link add ... type mbcf`),
 * embedding its ib_device.  Files and what they own:
 *   main.c    module init/exit, `rdma link` ops, netdev notifier, parameters
 *   device.c  ib_device creation, registration, port state and attributes,
 *             the registry of live devices
 *   verbs.c   the thin verbs entry points (argument checks, hand-off)
 *   umap.c    kernel buffers user space mmaps (the rings)
 *   cq.c      completion queues: the kernel side of the CQ ring
 *   qp.c      QP verbs and the QP lock: every entry into the protocol core
 *             (verbs, doorbells, frames, timer, transmit work, the stats
 *             snapshot) takes and releases qp->lock here and nowhere else
 *   wr.c      a QP's work requests: pulls the send/receive rings, validates
 *             each request into a private copy, and everything that reads
 *             those copies (payload gather/scatter, completions, flushes)
 *   proto.c   the protocol core's environment (struct mbcf_ops): callbacks
 *             that run under qp->lock and hand off to wr.c, mr.c, net.c, zc.c
 *   net.c     frames in and out (sk_buff): two ways to build one, one way up
 *   zc.c      zero-copy transmit, its whole life cycle (zc.h); calls nothing
 *   stats.c   counters for `rdma statistic`, the per-QP report
 *   mr.c      memory regions: the only file that touches user pages
 *   mw.c      memory windows: rkeys that resolve to a bound MR range
 *   fifo.c    memory-based FIFOs: MRs whose key takes pushes only, and
 *             the doorbell that sends GO to the QPs stopped on one
 *   frmr.c    fast registration (FRWR) of kernel consumers' memory
 *   ah.c      address handles: where UD datagrams go
 *   pacer.c   the device's pacer: one timer that kicks paced QPs when due
 *   srq.c     shared receive queues: the verbs, and waking the QPs that
 *             wait on one
 *   limits.c  object limits: the device's, all users', each user's
 */
#ifndef MBCF_KMOD_H
#define MBCF_KMOD_H

#include <linux/hrtimer.h>
#include <linux/ktime.h>
#include <linux/kthread.h>
#include <linux/list.h>
#include <linux/netdevice.h>
#include <linux/rbtree.h>
#include <linux/skbuff.h>
#include <linux/workqueue.h>
#include <linux/xarray.h>
#include <rdma/ib_verbs.h>
#include <rdma/ib_user_verbs.h>

#include "mbcf/core.h"
#include "mbcf/ring.h"
#include "zc.h"

#include "compat.h"

#define MBCF_DRV_NAME		"mbcf"
#define MBCF_FW_VERSION		MBCF_VERSION	/* mbcf-version.h, see Kbuild */

/* Limits reported by query_device; verbs.c enforces each of them. */
#define MBCF_MAX_QP		4096
/* The first QP number a non-GSI QP may get (0 and 1 are special). */
#define MBCF_QPN_FIRST		2
#define MBCF_MAX_QP_WR		4096
#define MBCF_MAX_SGE		16
#define MBCF_MAX_CQ		4096
/*
 * 1 Mi entries: libfabric's rxm sizes its verbs CQ as (rx + tx queue) x
 * universe size (128 + 128) x 1024 = 262144 (mlx5: 4 Mi, rxe: 32767, on
 * which fi_pingpong -e rdm fails).  The ring is allocated page by page and
 * charged to the creator's memory cgroup and RLIMIT_MEMLOCK (umap.c):
 * 48 MiB at the limit.
 */
#define MBCF_MAX_CQE		(1024 * 1024)
#define MBCF_MAX_MR		(64 * 1024)
#define MBCF_MAX_MW		(64 * 1024)
#define MBCF_MAX_AH		(64 * 1024)
#define MBCF_MAX_SRQ		4096
#define MBCF_MAX_SRQ_WR		(64 * 1024)
/* The GID table: one entry per IP address of the netdev (rdma_cm). */
#define MBCF_GID_TBL_LEN	1024
/*
 * The local DMA lkey: kernel consumers' SGEs hold kernel virtual addresses
 * under it.  Key 0 names no MR (indices start at 1), and mr.c honours it
 * for kernel QPs only, never for a user's.
 */
#define MBCF_DMA_LKEY		0
#define MBCF_MAX_PD		(64 * 1024)
#define MBCF_MAX_RD_ATOMIC	16
#define MBCF_MAX_INLINE		256
#define MBCF_MAX_MSG_SIZE	(1U << 31)
/*
 * Per-QP pacing (ibv_modify_qp_rate_limit), kbit/s: the smallest rate
 * (PSPacer's), and the largest when the link's speed is unknown; otherwise
 * the link's speed is the largest (pacer.c).
 */
#define MBCF_PACE_MIN_KBPS	8
#define MBCF_PACE_MAX_KBPS	100000000u	/* 100 Gbit/s */

/* The device's pacer (pacer.c): paced QPs waiting for their clock. */
struct mbcf_pacer {
	spinlock_t lock;		/* nests inside qp->lock */
	struct rb_root_cached due;	/* mbcf_qp.pace_node, by pace_due */
	struct hrtimer timer;		/* hard: at the earliest pace_due */
	struct kthread_worker *worker;	/* SCHED_DEADLINE: serves the due QPs */
	struct kthread_work work;
	bool armed;
	u64 armed_at;
	u32 cpu_pct;			/* pace_cpu_pct the thread last took */
};

/*
 * Memory a process makes us allocate for the objects it creates (QPs, MRs,
 * ring bookkeeping), which it can repeat until creation fails: charged to
 * its memory cgroup, and at the cgroup's limit the allocation fails (the
 * verb returns ENOMEM) instead of invoking the OOM killer.  Without
 * __GFP_RETRY_MAYFAIL a charge that fails invokes the memcg OOM killer;
 * __GFP_NORETRY would do too, but kvmalloc's vmalloc fallback supports
 * only __GFP_RETRY_MAYFAIL.  NOWARN: a failure user space provokes must
 * not print a stack trace.  (Ring pages use __GFP_NORETRY: umap.c.)
 */
#define MBCF_GFP_OBJ	(GFP_KERNEL_ACCOUNT | __GFP_RETRY_MAYFAIL | __GFP_NOWARN)

/* Objects the device counts (limits.c). */
enum mbcf_res {
	MBCF_RES_PD,
	MBCF_RES_CQ,
	MBCF_RES_QP,
	MBCF_RES_SRQ,
	MBCF_RES_AH,
	MBCF_RES_MR,
	MBCF_RES_MW,
	MBCF_RES_NUM
};

/* 1/this of each device max is kept for kernel consumers (limits.c). */
#define MBCF_RES_RESERVE	16

/* One user's objects on one device, over all its contexts (limits.c). */
struct mbcf_user {
	u32 uid;			/* real uid, in the initial namespace */
	unsigned int contexts;		/* under mbcf_dev.users_lock */
	atomic_t objs[MBCF_RES_NUM];
};

/* Bits of mbcf_dev.flags. */
enum mbcf_dev_flag {
	MBCF_DEV_DYING,		/* unregistration has been queued or done */
};

struct mbcf_dev {
	struct ib_device ibdev;		/* must be first: ib_alloc_device() */
	struct net_device *ndev;	/* held (netdev_hold) while we live */
	netdevice_tracker ndev_tracker;
	struct list_head list;		/* on device.c's registry */
	unsigned long flags;		/* enum mbcf_dev_flag */
	atomic_t pd_count;		/* live objects, for limits + leak checks */
	atomic_t ucontext_count;
	atomic_t cq_count;
	atomic_t qp_count;
	atomic64_t qp_ids;		/* QP ids: device-unique, never reused */
	struct xarray qp_xa;		/* qpn -> struct mbcf_qp, RCU lookups */
	u32 qp_next;			/* cyclic QPN allocation, random start */
	u32 link_mbps;			/* netdev speed, sizes the send window */
	struct work_struct speed_work;	/* reads link_mbps (device.c) */
	enum ib_port_state port_last;	/* last port event's (RTNL) */
	struct packet_type ptype;	/* our EtherType on ndev (net.c) */
	bool rx_handler;		/* net.c: ndev's rx_handler is ours */
	/* zc.c: zero-copy frames were copied by the stack (veth): build
	 * frames with copies until then (jiffies) */
	unsigned long zc_retry_at;
	/* Frames dropped before a QP took them (parser, demux), and
	 * zero-copy frames sent / copied by the stack, per CPU. */
	struct mbcf_counters __percpu *rx_ctr;
	struct mbcf_counters retired;	/* of destroyed QPs (stats.c) */
	spinlock_t retired_lock;
	/* qp.c: destroyed QPs' last words (core/linger.c), under linger_lock */
	struct mbcf_linger linger;
	spinlock_t linger_lock;
	/* mr.c: memory regions; xa index = key >> 8, RCU lookups */
	struct xarray mr_xa;
	/* both start random per device (mr.c, mbcf_mr_dev_init) */
	u32 mr_next;			/* xa_alloc_cyclic cursor (xa_lock) */
	u8 mr_gen;			/* key generation, bumped on wrap (xa_lock) */
	atomic_t mr_count;
	atomic_t mw_count;
	/* ah.c: address handles, RCU lookups by number */
	struct xarray ah_xa;
	u32 ah_next;
	atomic_t ah_count;
	atomic_t srq_count;
	atomic_long_t mr_pinned_pages;	/* pinned by live MRs: leak check */
	struct mbcf_pacer pacer;
	/* limits.c: user objects per type, and each user's (by uid) */
	atomic_t user_objs[MBCF_RES_NUM];
	struct xarray users;
	struct mutex users_lock;
	/* the round trip its QPs measure, which a QP with a shorter rto
	 * waits for (docs/protocol.md 7.1); each sample writes it, no lock */
	struct mbcf_rtt_share rtt_share;
};

struct mbcf_ucontext {
	struct ib_ucontext ibuc;
	struct mbcf_user *user;		/* its objects are charged here */
};

struct mbcf_pd {
	struct ib_pd ibpd;
	struct mbcf_user *owner;	/* charged to (limits.c); NULL: kernel */
};

/* Pages charged to a process's RLIMIT_MEMLOCK (umap.c: mbcf_charge). */
struct mbcf_charge {
	struct mm_struct *mm;		/* its pinned_vm holds npages; NULL: none */
	unsigned long npages;
};

/* A kernel buffer user space maps (umap.c); owned by its mmap entry. */
struct mbcf_umap {
	struct rdma_user_mmap_entry rdma;
	void *buf;			/* the pages, mapped in the kernel */
	struct page **pages;
	unsigned int npages;
	size_t len;
	bool kernel;			/* a kernel consumer's: no mmap entry */
	struct mbcf_charge charge;	/* a user's: the pages, to RLIMIT_MEMLOCK */
};

struct mbcf_cq {
	struct ib_cq ibcq;
	spinlock_t lock;		/* the ring's ends, notify */
	struct mbcf_ring_end ring;	/* we produce, the provider consumes */
	struct mbcf_ring_end poll;	/* kernel CQ: poll_cq consumes */
	struct mbcf_umap *umap;
	u8 notify;			/* armed: IB_CQ_NEXT_COMP / _SOLICITED */
	bool overflowed;
	bool kernel;			/* a kernel consumer's: struct ib_wc */
	struct mbcf_user *owner;	/* charged to (limits.c); NULL: kernel */
};

/*
 * One work queue of a QP (send or receive): the ring user space produces
 * into, and the kernel's private, validated copies of the requests it took
 * out of it (wr.c).  Slot i of `wr` holds the copy of ring entry i while
 * the request is in flight, so a ring slot and its copy are released
 * together when the request completes.
 */
struct mbcf_wq {
	struct mbcf_umap *umap;
	struct mbcf_ring_end ring;	/* consumer end: idx = released, rd = read */
	u8 *wr;				/* private copies, wr_stride bytes each */
	struct mbcf_charge wr_charge;	/* a user's: wr, to RLIMIT_MEMLOCK */
	u32 wr_stride;
	u32 max_sge;			/* the QP's cap: checked per request */
	bool broken;			/* the ring's indices made no sense */
};

/*
 * A shared receive queue (srq.c): one receive ring that the QPs attached to
 * it claim from (wr.c), each under its own lock, so its consumer end has a
 * lock of its own, always taken inside a QP's.  A QP that found it empty
 * sent STOP to its peer; a post (the doorbell) wakes every attached QP.
 */
struct mbcf_srq {
	struct ib_srq ibsrq;
	struct mbcf_dev *dev;
	spinlock_t lock;		/* rq's consumer end, limit */
	struct mbcf_wq rq;
	u32 limit;			/* armed: SRQ_LIMIT_REACHED below it */
	bool kernel;			/* a kernel consumer's (no user ring) */
	struct mbcf_user *owner;	/* charged to (limits.c); NULL: kernel */
	spinlock_t klock;		/* kring: a kernel consumer's posts */
	struct mbcf_ring_end kring;
	struct mutex qps_lock;		/* qps: the QPs attached */
	struct list_head qps;
	struct work_struct wake;	/* a kernel post wakes the QPs */
};

/* Bits of mbcf_qp.pend: what must happen once the core call returns. */
enum mbcf_qp_pend {
	MBCF_QP_PEND_WQE = BIT(0),	/* the send request at sq.rd failed its
					 * checks: it completes with pend_status
					 * after every earlier one, then ERROR */
	MBCF_QP_PEND_ERROR = BIT(1),	/* move the QP to the error state */
	MBCF_QP_PEND_FATAL = BIT(2),	/* ... and raise IB_EVENT_QP_FATAL: user
					 * space broke the ring protocol */
	MBCF_QP_PEND_EVENT = BIT(3),	/* the event is due, after unlock */
	MBCF_QP_PEND_WQE_FATAL = BIT(4), /* PEND_WQE's request was malformed */
	/* events due after unlock, besides QP_FATAL (PEND_EVENT) */
	MBCF_QP_PEND_LAST_WQE = BIT(5),	/* IB_EVENT_QP_LAST_WQE_REACHED */
	MBCF_QP_PEND_SRQ_LIMIT = BIT(6), /* IB_EVENT_SRQ_LIMIT_REACHED */
	MBCF_QP_PEND_SRQ_ERR = BIT(7),	/* IB_EVENT_SRQ_ERR: its ring broke */
};

#define MBCF_QP_PEND_EVENTS	(MBCF_QP_PEND_EVENT | MBCF_QP_PEND_LAST_WQE | \
				 MBCF_QP_PEND_SRQ_LIMIT | MBCF_QP_PEND_SRQ_ERR)

/* Where a datagram goes, from an address handle (ah.c). */
struct mbcf_ud_addr {
	u8 dmac[ETH_ALEN];
	u8 hop_limit;
	u32 vtf;			/* 6 << 28 | traffic class << 20 | flow */
	u8 sgid[16], dgid[16];
};

/* Frames built and not yet sent: only net.c looks inside. */
struct mbcf_frames {
	struct sk_buff_head q;
};

/* A QP number's entry in mbcf_dev.qp_xa: lookups take a reference. */
struct mbcf_qp_ref {
	struct mbcf_qp *qp;
	refcount_t users;		/* 1 while published + one per user */
	struct completion idle;		/* users dropped to zero */
	struct rcu_head rcu;		/* lookups may still read it */
};

struct mbcf_qp {
	struct ib_qp ibqp;
	struct mbcf_dev *dev;
	struct mbcf_qp_ref *ref;
	u64 id;				/* device-unique: names it to windows */
	bool kernel;			/* a kernel consumer's (no user rings) */
	struct mbcf_user *owner;	/* charged to (limits.c); NULL: kernel */
	bool ud;			/* UD or GSI: datagrams, no connection */
	/*
	 * Serialises everything below: every call into the protocol core,
	 * the rings, the state.  Taken and released in qp.c only, from
	 * process context (verbs, doorbells, transmit work) and softirq
	 * (frames, the timer); the core's callbacks assert it.
	 */
	spinlock_t lock;
	enum ib_qp_state state;
	bool sq_sig_all;
	bool dying;			/* destroy started: ignore frames, timer */
	u8 pend;			/* enum mbcf_qp_pend */
	u8 pend_status;			/* ib_wc_status of PEND_WQE */
	u32 max_inline;

	struct mbcf_wq sq, rq;		/* no rq ring with an SRQ */
	struct mbcf_srq *srq;		/* receives come from here, if set */
	void *srq_wr;			/* the receive claimed from it (wr.c) */
	struct list_head srq_node;	/* on srq->qps */

	/*
	 * A kernel consumer's posts (post_send/post_recv may come with
	 * interrupts off) only write entries into the rings, under klock,
	 * through these producer ends; tx_work takes them like a doorbell.
	 */
	spinlock_t klock;
	struct mbcf_ring_end ksq, krq;

	/* The protocol core's connection (RC, UC) and the memory it runs on. */
	struct mbcf_conn conn;
	/* UD, GSI: the datagram endpoint, and the MAC of the datagram being
	 * sent (net.c addresses the frame with it). */
	struct mbcf_dgram dgram;
	u8 ud_dmac[ETH_ALEN];
	struct mbcf_msg *req_msgs, *resp_msgs;
	u32 resp_size;
	struct hrtimer timer;

	/*
	 * Frames the core built under the lock wait here and are handed to
	 * the netdev after it is dropped, so a doorbell or frame for this QP
	 * on another CPU never spins while we transmit.  One context at a
	 * time sends (tx_owner), and also sends what others queue meanwhile:
	 * frames leave in the order the core built them.  At most
	 * MBCF_QP_TX_BURST frames are queued: the core holds the rest back
	 * (its transmit-busy state) and tx_work builds them in process
	 * context, so one frame received in softirq never costs more than a
	 * burst.
	 */
	struct mbcf_frames txq;
	bool tx_owner;
	struct work_struct tx_work;
	/* The most send requests one call took off the ring (wr.c): at most
	 * the ring's size, whatever user space does. */
	u32 sq_pull_max;
	/*
	 * The CPU whose transmit queue (XPS) all of this QP's frames take,
	 * whichever CPU sends them: the one that created the QP (net.c,
	 * mbcf_net_flow).
	 */
	u32 tx_cpu;

	/*
	 * Pacing: the rate modify_qp set (kbit/s, 0 = unpaced; the clock
	 * itself is the connection's), and the QP's place in the device's
	 * pacer while it waits for its clock (under pacer.lock).
	 */
	u32 rate_kbps;
	struct rb_node pace_node;
	u64 pace_due;
	bool pace_queued;

	/*
	 * The MR this lock hold found last, with a reference (mr.c,
	 * mbcf_mr_use): a burst built under one hold -- a send's frames, a
	 * read's responses -- looks its memory up once, not per frame.
	 * Dropped before every release of the lock (mbcf_mr_forget), so
	 * dereg_mr never waits longer than a lock hold for it.
	 */
	struct mbcf_mr *mr_hot;
	/* The FIFO a FIFO_PUSH appends to, from fifo_get to fifo_put
	 * (fifo.c), inside one core call. */
	struct mbcf_mr *fifo_hold;

	/* Peer, from modify_qp(RTR). */
	u8 dmac[ETH_ALEN];
	u32 dest_qpn;
	struct ib_qp_attr attr;		/* what modify_qp set, for query_qp */
};

#define MBCF_QP_TX_BURST	64
/* Batches a softirq sends for a QP before process context takes over. */
#define MBCF_QP_TX_ROUNDS	2

static inline struct mbcf_dev *to_mbcf_dev(struct ib_device *ibdev)
{
	return container_of(ibdev, struct mbcf_dev, ibdev);
}

static inline struct mbcf_dev *mbcf_pd_dev(struct ib_pd *ibpd)
{
	return to_mbcf_dev(ibpd->device);
}

static inline struct mbcf_cq *to_mbcf_cq(struct ib_cq *ibcq)
{
	return container_of(ibcq, struct mbcf_cq, ibcq);
}

static inline struct mbcf_srq *to_mbcf_srq(struct ib_srq *ibsrq)
{
	return container_of(ibsrq, struct mbcf_srq, ibsrq);
}

static inline struct mbcf_qp *to_mbcf_qp(struct ib_qp *ibqp)
{
	return container_of(ibqp, struct mbcf_qp, ibqp);
}

/* main.c: module parameters */
extern unsigned int mbcf_window;
extern unsigned int mbcf_ack_interval;
extern bool mbcf_window_adapt;
extern bool mbcf_quiet_tail;
extern unsigned int mbcf_pace_slack_us;

/* device.c */
int mbcf_device_create(const char *ibdev_name, struct net_device *ndev);
struct mbcf_dev *mbcf_device_get_by_netdev(struct net_device *ndev);
void mbcf_device_unregister_all(void);
void mbcf_device_queue_unregister(struct mbcf_dev *dev);
void mbcf_device_port_event(struct mbcf_dev *dev);
void mbcf_device_update_speed(struct mbcf_dev *dev);
void mbcf_device_queue_speed(struct mbcf_dev *dev);
bool mbcf_device_port_active(const struct mbcf_dev *dev);
enum ib_mtu mbcf_device_active_mtu(const struct mbcf_dev *dev);

/* verbs.c */
extern const struct ib_device_ops mbcf_verbs_ops;

/* umap.c */
struct mbcf_umap *mbcf_umap_create(struct ib_ucontext *uctx, size_t len);
u64 mbcf_umap_offset(const struct mbcf_umap *m);
int mbcf_charge(struct mbcf_charge *c, size_t bytes);
void mbcf_uncharge(struct mbcf_charge *c);
void mbcf_umap_remove(struct mbcf_umap *m);
int mbcf_umap_mmap(struct ib_ucontext *uctx, struct vm_area_struct *vma);
void mbcf_umap_free(struct rdma_user_mmap_entry *e);

/* limits.c */
void mbcf_res_dev_init(struct mbcf_dev *dev);
void mbcf_res_dev_fini(struct mbcf_dev *dev);
int mbcf_res_get(struct mbcf_dev *dev, struct ib_udata *udata,
		 enum mbcf_res r, struct mbcf_user **owner);
void mbcf_res_put(struct mbcf_dev *dev, struct mbcf_user *owner,
		  enum mbcf_res r);
u32 mbcf_res_users_max(enum mbcf_res r);
u32 mbcf_res_user_max(enum mbcf_res r);
struct mbcf_user *mbcf_user_get(struct mbcf_dev *dev);
void mbcf_user_put(struct mbcf_dev *dev, struct mbcf_user *u);

/* cq.c */
int mbcf_cq_create(struct ib_cq *ibcq, const struct ib_cq_init_attr *attr,
		   struct ib_udata *udata);
int mbcf_cq_destroy(struct ib_cq *ibcq, struct ib_udata *udata);
int mbcf_cq_resize(struct ib_cq *ibcq, int cqe, struct ib_udata *udata);
int mbcf_cq_req_notify(struct ib_cq *ibcq, enum ib_cq_notify_flags flags);
int mbcf_cq_poll(struct ib_cq *ibcq, int num_entries, struct ib_wc *wc);
int mbcf_cq_push(struct mbcf_cq *cq, const struct ib_wc *wc, bool solicited);
bool mbcf_cq_in_handler(void);

/* qp.c */
int mbcf_qp_create(struct ib_qp *ibqp, struct ib_qp_init_attr *init,
		   struct ib_udata *udata);
int mbcf_qp_modify(struct ib_qp *ibqp, struct ib_qp_attr *attr, int mask,
		   struct ib_udata *udata);
int mbcf_qp_query(struct ib_qp *ibqp, struct ib_qp_attr *attr, int mask,
		  struct ib_qp_init_attr *init);
int mbcf_qp_destroy(struct ib_qp *ibqp, struct ib_udata *udata);
int mbcf_qp_post_send(struct ib_qp *ibqp, const struct ib_send_wr *wr,
		      const struct ib_send_wr **bad_wr);
int mbcf_qp_post_recv(struct ib_qp *ibqp, const struct ib_recv_wr *wr,
		      const struct ib_recv_wr **bad_wr);
void mbcf_qp_rx(struct mbcf_dev *dev, const struct mbcf_frame *f,
		const u8 *src_mac);
void mbcf_qp_stats_sum(struct mbcf_dev *dev, struct mbcf_counters *sum);
/* A connected QP's sender state (stats.c). */
struct mbcf_qp_snap {
	struct mbcf_conn_snap c;
	u32 sq_pull_max;
};
void mbcf_qp_snapshot(struct mbcf_qp *qp, struct mbcf_qp_snap *s);
void mbcf_qp_recv_posted(struct mbcf_qp *qp, bool srq_broken);
void mbcf_qp_go(struct mbcf_dev *dev, u32 qpn);
void mbcf_qp_fail_all(struct mbcf_dev *dev);
void mbcf_qp_paced(struct mbcf_qp *qp);

/* pacer.c */
int mbcf_pacer_init(struct mbcf_pacer *p, const char *name);
void mbcf_pacer_fini(struct mbcf_pacer *p);
void mbcf_pacer_wait(struct mbcf_qp *qp, u64 due);
void mbcf_pacer_remove(struct mbcf_qp *qp);
u32 mbcf_pacer_max_kbps(const struct mbcf_dev *dev);

/* srq.c */
extern const struct ib_device_ops mbcf_srq_ops;
void mbcf_srq_attach(struct mbcf_srq *srq, struct mbcf_qp *qp);
void mbcf_srq_detach(struct mbcf_srq *srq, struct mbcf_qp *qp);
void mbcf_srq_event(struct mbcf_srq *srq, enum ib_event_type type);
void mbcf_srq_broken(struct mbcf_srq *srq);

/* wr.c: a QP's work requests; everything but _alloc/_free under qp->lock */
int mbcf_wr_alloc(struct mbcf_wq *q, struct ib_ucontext *uctx, bool send,
		  u32 n, u32 stride, u32 max_sge, u32 max_inline);
int mbcf_wr_alloc_srq(struct mbcf_wq *q, struct ib_ucontext *uctx, u32 n,
		      u32 stride, u32 max_sge);
void mbcf_wr_free(struct mbcf_wq *q);
void mbcf_wr_doorbell(struct mbcf_qp *qp, bool send);
int mbcf_wr_pull_sq(struct mbcf_qp *qp, bool *more);
void mbcf_wr_fail_head(struct mbcf_qp *qp);
bool mbcf_wr_flush(struct mbcf_qp *qp);
void mbcf_wr_reset(struct mbcf_qp *qp);
int mbcf_wr_claim_recv(struct mbcf_qp *qp, u64 *cookie, u32 *cap);
int mbcf_wr_peek_recv(struct mbcf_qp *qp, u32 *cap);
int mbcf_wr_scatter_recv(struct mbcf_qp *qp, u64 cookie, u32 offset,
			 const u8 *src, u32 len);
int mbcf_wr_scatter_resp(struct mbcf_qp *qp, u64 cookie, u32 offset,
			 const u8 *src, u32 len);
int mbcf_wr_complete(struct mbcf_qp *qp, const struct mbcf_cqe *c);
int mbcf_wr_local(struct mbcf_qp *qp, u64 cookie);
int mbcf_wr_kpost_send(struct mbcf_qp *qp, const struct ib_send_wr *wr,
		       const struct ib_send_wr **bad_wr);
int mbcf_wr_kpost_recv(struct mbcf_qp *qp, const struct ib_recv_wr *wr,
		       const struct ib_recv_wr **bad_wr);
int mbcf_wr_kpost_srq(struct mbcf_srq *srq, const struct ib_recv_wr *wr,
		      const struct ib_recv_wr **bad_wr);
int mbcf_wr_alloc_srq_slot(struct mbcf_qp *qp);
bool mbcf_wr_srq_posted(struct mbcf_srq *srq, bool *broke);
bool mbcf_wr_payload_in_pages(struct mbcf_qp *qp, const struct mbcf_payload *pl);
int mbcf_wr_payload_copy(struct mbcf_qp *qp, const struct mbcf_payload *pl,
			 u8 *dst);
int mbcf_wr_payload_pages(struct mbcf_qp *qp, const struct mbcf_payload *pl,
			  struct mbcf_spans *sp);

/* proto.c */
extern const struct mbcf_ops mbcf_proto_ops;

/* The protocol core's clock: ns, CLOCK_MONOTONIC (qp.c, pacer.c). */
static inline u64 mbcf_proto_now(void)
{
	return ktime_get_ns();
}

/* stats.c */
extern const struct ib_device_ops mbcf_stats_ops;
void mbcf_stats_init(void);
void mbcf_stats_retire(struct mbcf_dev *dev, const struct mbcf_counters *c);

/* net.c: frames in and out; the caller of _xmit_* holds qp->lock */
int mbcf_net_start(struct mbcf_dev *dev);
void mbcf_net_stop(struct mbcf_dev *dev);
/*
 * Writes @len bytes of a frame's payload, from byte @off of it, at @to
 * (ip_append_data's getfrag); called once per piece, in order.
 */
typedef int (*mbcf_net_fill_t)(void *from, u8 *to, u32 off, u32 len);
int mbcf_net_xmit_fill(struct mbcf_qp *qp, const u8 *hdr, u32 hdr_len,
		       u32 len, mbcf_net_fill_t fill, void *from);
int mbcf_net_xmit_pages(struct mbcf_qp *qp, const u8 *hdr, u32 hdr_len,
			struct mbcf_spans *sp, u32 len);
void mbcf_net_init_qp(struct mbcf_qp *qp);
u32 mbcf_net_queued(struct mbcf_qp *qp);
void mbcf_net_take(struct mbcf_qp *qp, struct mbcf_frames *batch);
void mbcf_net_purge(struct mbcf_qp *qp);
/* The first frame of our stream a batch had refused (docs/protocol.md 7.7). */
struct mbcf_net_refused {
	bool any;
	u16 epoch;
	u32 psn;
};
void mbcf_net_send(struct mbcf_qp *qp, struct mbcf_frames *frames,
		   struct mbcf_net_refused *ref);
void mbcf_net_drop_stale(struct mbcf_qp *qp);
int mbcf_net_send_ctl(struct mbcf_dev *dev, const u8 *dmac, const u8 *hdr,
		      u32 hdr_len);
void mbcf_net_heads_free(void);

/* mr.c */
struct mbcf_sge;

/* A registered user memory region; target addresses [iova, iova + length). */
struct mbcf_mr {
	struct ib_mr ibmr;
	struct ib_pd *pd;		/* ibmr.pd is set only after reg returns */
	struct mbcf_user *owner;	/* charged to (limits.c) */
	struct ib_umem *umem;
	struct page **pages;		/* the pinned pages, in address order */
	unsigned long npages;
	u64 iova;
	u64 length;
	u32 key;			/* lkey == rkey: index << 8 | generation */
	u32 page_offset;		/* of byte 0 (at iova) in pages[0] */
	int access;			/* IB_ACCESS_* granted */
	refcount_t ref;			/* registry + users + bound windows */
	struct completion released;	/* ref hit zero: no new frame uses it */
	struct mbcf_zc zc;		/* frames that carry its pages (zc.c) */
	spinlock_t lock;		/* windows, dead */
	u32 windows;			/* memory windows bound to it */
	bool dead;			/* being deregistered: binds fail */
	struct mbcf_kfifo *fifo;	/* a FIFO's (fifo.c); NULL: an MR */
	struct rcu_head rcu;		/* late lookups may read the struct */
};

/* mr_xa entries of memory windows carry this tag (xa_tag_pointer). */
#define MBCF_MR_TAG_MW		1
/* ... and FIFOs this one (fifo.c): no MR lookup takes them */
#define MBCF_MR_TAG_FIFO	3

/* A BIND_MW request, as wr.c keeps it. */
struct mbcf_mw_bind {
	u32 mw_rkey;			/* the window's current rkey */
	u32 new_rkey;			/* its key byte becomes the window's */
	u32 mr_lkey;
	int access;			/* as posted: the remote bits count */
	u64 addr, length;		/* length 0: unbind (type 1) */
};

extern const struct ib_device_ops mbcf_mr_ops;
void mbcf_mr_dev_init(struct mbcf_dev *dev);
void mbcf_mr_dev_fini(struct mbcf_dev *dev);
int mbcf_mr_alloc_key(struct mbcf_dev *dev, u32 *key);
void mbcf_mr_put(struct mbcf_mr *mr);
void mbcf_mr_forget(struct mbcf_qp *qp);
struct mbcf_mr *mbcf_mr_get_bindable(struct mbcf_qp *qp, u32 lkey, u64 addr,
				     u64 length, int access);
/*
 * Lookups on behalf of @qp (its PD; the QP a type 2 window is bound to):
 * any context, never sleep.  0, or -ENOKEY (no such key, a stale one, an
 * unbound window), -EACCES (access flags or PD), -ERANGE (bounds), -EINVAL
 * (atomic va not 8-byte aligned: an invalid request, not an access error).
 */
int mbcf_mr_copy_in(struct mbcf_qp *qp, u32 key, u64 va, const void *src,
		    u32 len, int access);
int mbcf_mr_copy_out(struct mbcf_qp *qp, u32 key, u64 va, void *dst, u32 len,
		     int access);
int mbcf_mr_check(struct mbcf_qp *qp, u32 key, u64 va, u32 len, int access);
int mbcf_mr_check_local(struct mbcf_qp *qp, u32 lkey, u64 va, u32 len,
			int access);
int mbcf_mr_atomic(struct mbcf_qp *qp, u32 key, u64 va, bool cmp_swap,
		   u64 swap_add, u64 compare, u64 *orig);
int mbcf_mr_gather(struct mbcf_qp *qp, const struct mbcf_sge *sge, u32 num_sge,
		   u32 offset, void *dst, u32 len);
int mbcf_mr_scatter(struct mbcf_qp *qp, struct ib_pd *pd,
		    const struct mbcf_sge *sge, u32 num_sge, u32 offset,
		    const void *src, u32 len);

struct mbcf_mr *mbcf_mr_get_fifo(struct mbcf_dev *dev, struct ib_pd *pd,
				 u32 key);

/* fifo.c: memory-based FIFOs (MRs registered with MBCF_MR_FIFO) */
struct mbcf_kfifo;
struct mbcf_fifo;
struct mbcf_reg_mr_cmd;
extern const struct ib_device_ops mbcf_fifo_ops;
int mbcf_fifo_check(u64 start, u64 length, int access,
		    const struct mbcf_reg_mr_cmd *c);
struct mbcf_kfifo *mbcf_fifo_create(const struct mbcf_reg_mr_cmd *c,
				    struct page **pages, unsigned long npages,
				    u32 page_offset);
void mbcf_fifo_free(struct mbcf_kfifo *k);
int mbcf_fifo_get(struct mbcf_qp *qp, u32 fkey, struct mbcf_fifo *f);
void mbcf_fifo_put(struct mbcf_qp *qp);

/* ah.c */
extern const struct ib_device_ops mbcf_ah_ops;
u32 mbcf_ah_num(struct ib_ah *ibah);
int mbcf_ah_lookup(struct mbcf_dev *dev, u32 num, struct ib_pd *pd,
		   struct mbcf_ud_addr *out);

/* mw.c */
struct mbcf_window;
extern const struct ib_device_ops mbcf_mw_ops;
struct mbcf_mr *mbcf_mw_resolve(struct mbcf_window *win, struct mbcf_qp *qp,
				u32 rkey, u64 va, u64 len, int access);
int mbcf_mw_bind(struct mbcf_qp *qp, const struct mbcf_mw_bind *b);
int mbcf_mw_invalidate(struct mbcf_qp *qp, u32 rkey, bool remote);

/* frmr.c: fast registration (FRWR) for kernel consumers */
#define MBCF_MR_TAG_FRMR	2	/* mr_xa entries of FRWR MRs */
#define MBCF_FRMR_MAX_PAGES	512	/* max_fast_reg_page_list_len */
struct mbcf_frmr;
struct mbcf_send_wqe;
struct mbcf_frmr_reg {			/* a REG_MR request, as wr.c keeps it */
	u32 key;			/* the MR's key with the new key byte */
	int access;
};
extern const struct ib_device_ops mbcf_frmr_ops;
int mbcf_frmr_dereg(struct ib_mr *ibmr);
int mbcf_frmr_kentry(struct mbcf_qp *qp, const struct ib_reg_wr *wr,
		     struct mbcf_send_wqe *e);
int mbcf_frmr_reg(struct mbcf_qp *qp, const struct mbcf_frmr_reg *r);
int mbcf_frmr_invalidate(struct mbcf_qp *qp, u32 key, bool remote);
struct mbcf_mr *mbcf_frmr_resolve(struct mbcf_frmr *f, struct ib_pd *pd,
				  u32 key, u64 va, u64 len, int access);

int mbcf_mr_ref_pages(struct mbcf_qp *qp, u32 key, u64 va, u32 len, int access,
		      struct mbcf_spans *sp);
int mbcf_mr_gather_pages(struct mbcf_qp *qp, const struct mbcf_sge *sge,
			 u32 num_sge, u32 offset, u32 len, struct mbcf_spans *sp);

#endif /* MBCF_KMOD_H */
