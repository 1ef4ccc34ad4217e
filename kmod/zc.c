// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Zero-copy transmit, its whole life cycle: whether a payload goes as
 * pages (the policy), attaching an MR's pages to a frame as fragments, the
 * stack's callback when it is done with them, parking delivered frames for
 * the CPU that built them, and draining an MR's frames at dereg_mr.  Calls
 * nothing else in kmod/: mr.c, net.c and proto.c call in.
 *
 * Each frame that carries an MR's pages holds a reference on the MR's
 * struct ubuf_info, the kernel's zero-copy mechanism (SKBFL_ZEROCOPY_FRAG,
 * as MSG_ZEROCOPY): its callback runs once per skb when the stack is done
 * with the fragments -- the skb freed after transmission or after the
 * receiver read it (veth's peer: SKBFL_DONT_ORPHAN lets the frame cross
 * with the fragments, and our receive hook there reads them in place,
 * net.c), or its fragments copied first by every path that would keep
 * them (skb_orphan_frags_rx: a packet_type handler, a clone for a packet
 * tap).
 */
#include <linux/llist.h>
#include <linux/moduleparam.h>
#include <linux/netdevice.h>
#include <linux/skbuff.h>

#include "mbcf.h"
#include "zc.h"

/* Payloads at least this long travel as page fragments (no copy). */
#define MBCF_ZC_MIN		256

/*
 * The stack copied a zero-copy frame of this device (the callback says
 * so, as MSG_ZEROCOPY's SO_EE_CODE_ZEROCOPY_COPIED does): a packet tap
 * does, and so does the receive path of a veth peer where our rx_handler
 * is not (another driver holds the slot).  Then copying the payload into
 * the skb head we allocate anyway is cheaper than the stack's copy, which
 * allocates a page per frame besides: build frames with copies for
 * MBCF_ZC_RETRY, then try zero-copy again (the tap may be gone).  On veth
 * that costs one burst of zero-copy frames a second.
 */
#define MBCF_ZC_RETRY		HZ

static unsigned int mbcf_zerocopy = 1;
module_param_named(zerocopy, mbcf_zerocopy, uint, 0644);
MODULE_PARM_DESC(zerocopy, "Send payloads as page fragments: 0 never, 1 unless the netdev copies them (default), 2 always");

static void mbcf_zc_copied(struct mbcf_dev *dev)
{
	unsigned long at = jiffies + MBCF_ZC_RETRY;

	this_cpu_inc(dev->rx_ctr->tx_zc_copied);	/* any context */
	if (READ_ONCE(dev->zc_retry_at) != at)
		WRITE_ONCE(dev->zc_retry_at, at);
}

/* Module parameter zerocopy: 0 never, 1 as above, 2 always (tests). */
bool mbcf_zc_worth(struct mbcf_dev *dev, u32 len)
{
	unsigned int zc = READ_ONCE(mbcf_zerocopy);

	if (len < MBCF_ZC_MIN)
		return false;
	if (zc != 1)
		return zc;
	return time_after_eq(jiffies, READ_ONCE(dev->zc_retry_at));
}

/* --- the stack's callback -------------------------------------------------- */

/*
 * The stack is done with one skb's fragments of @uarg's MR (sent, freed,
 * or copied: !zerocopy_success), or (skb NULL) a reference is dropped that
 * no skb took.  Any context.  The last one wakes dereg_mr, which may free
 * the MR as soon as complete() returned.
 */
static void mbcf_zc_complete(struct sk_buff *skb, struct ubuf_info *uarg,
			     bool zerocopy_success)
{
	struct mbcf_zc *zc = container_of(uarg, struct mbcf_zc, ubuf);

	if (!zerocopy_success)
		mbcf_zc_copied(zc->dev);
	if (refcount_dec_and_test(&uarg->refcnt))
		complete(&zc->idle);
}
MBCF_UBUF_OPS(mbcf_zc_complete);

/*
 * The only two places that name the callback's slot in struct ubuf_info
 * (Linux 6.10 moved it to ubuf_info->ops, compat.h): set it, and
 * recognise it.
 */
static void mbcf_zc_set_callback(struct ubuf_info *uarg)
{
	mbcf_ubuf_set_complete(uarg, mbcf_zc_complete);
}

static bool mbcf_zc_ours(const struct ubuf_info *uarg)
{
	return mbcf_ubuf_is(uarg, mbcf_zc_complete);
}

/* --- an MR's life ---------------------------------------------------------- */

/* Before the MR is published (mr.c). */
void mbcf_zc_init(struct mbcf_zc *zc, struct mbcf_dev *dev)
{
	zc->dev = dev;
	mbcf_zc_set_callback(&zc->ubuf);
	/* DONT_ORPHAN: a forward to a receive path (veth) keeps the
	 * fragments instead of copying them; we are called back when the
	 * last holder is done, as for io_uring's zero-copy sends. */
	zc->ubuf.flags = SKBFL_ZEROCOPY_FRAG | SKBFL_DONT_ORPHAN;
	refcount_set(&zc->ubuf.refcnt, 1);	/* the registry's */
	init_completion(&zc->idle);
}

/*
 * Wait until no frame carries the MR's pages.  The stack lets go of them
 * when the netdev has sent the frame, or dropped it, or copied it (veth
 * does at once), so this normally takes microseconds, or as long as a
 * queue discipline holds frames back (netem, a rate limit).  A netdev
 * that holds frames indefinitely (a stuck driver, pause frames without
 * end) keeps us waiting: it lets go when it is brought down (qdiscs and
 * rings are flushed) or its watchdog resets it.  Returning earlier would
 * let the process's later writes to the memory leave in those frames, so
 * we wait -- uninterruptibly: dereg_mr of a dying process must not fail
 * (the RDMA core would retry it until it gives up with a WARN) -- and say
 * every MBCF_ZC_DRAIN_WARN what we wait for, instead of leaving it to the
 * hung task detector.
 */
#define MBCF_ZC_DRAIN_WARN	(30 * HZ)

/*
 * A delivered frame may sit parked for the CPU that built it (below);
 * one a receiver is delivering as we start may be parked after our first
 * look, on a CPU that builds nothing more: look again every
 * MBCF_ZC_DRAIN_PARKED.
 */
#define MBCF_ZC_DRAIN_PARKED	max(1, HZ / 100)

/*
 * dereg_mr, once no new frame can take the MR's pages (that needs a
 * reference on the MR): drop the registry's reference and wait for the
 * frames in flight, before the pages are unpinned.  Process context.
 */
void mbcf_zc_drain(struct mbcf_zc *zc, u32 key)
{
	unsigned long warn = jiffies + MBCF_ZC_DRAIN_WARN;

	mbcf_zc_complete(NULL, &zc->ubuf, true);
	for (;;) {
		mbcf_zc_unpark_all();
		if (wait_for_completion_timeout(&zc->idle, MBCF_ZC_DRAIN_PARKED))
			return;
		if (time_after(jiffies, warn)) {
			netdev_warn(zc->dev->ndev, "mbcf: dereg_mr of key 0x%x waits for %u frames still queued for transmission\n",
				    key, refcount_read(&zc->ubuf.refcnt));
			warn = jiffies + MBCF_ZC_DRAIN_WARN;
		}
	}
}

/* --- a frame's spans ------------------------------------------------------- */

/*
 * The spans' MR, referenced for the frame (its caller's reference on the
 * MR keeps zc's above zero: dereg drops the registry's only once no lookup
 * holds the MR).  One ubuf_info per skb: pages of a second MR are copied.
 */
int mbcf_zc_hold(struct mbcf_spans *sp, struct mbcf_zc *zc)
{
	if (!sp->zc) {
		refcount_inc(&zc->ubuf.refcnt);
		sp->zc = zc;
	} else if (sp->zc != zc) {
		return -E2BIG;
	}
	return 0;
}

/* One piece, with a page reference of its own; -E2BIG past a frame's. */
int mbcf_zc_add(struct mbcf_spans *sp, struct page *page, u32 off, u32 len)
{
	if (sp->n == MBCF_ZC_SPANS)
		return -E2BIG;
	get_page(page);
	sp->v[sp->n++] = (struct mbcf_span){ page, off, len };
	return 0;
}

/* Drop the references taken for a frame not built. */
void mbcf_zc_spans_put(struct mbcf_spans *sp)
{
	u32 i;

	for (i = 0; i < sp->n; i++)
		put_page(sp->v[i].page);
	sp->n = 0;
	if (sp->zc)
		mbcf_zc_complete(NULL, &sp->zc->ubuf, true);
	sp->zc = NULL;
}

/*
 * Attach the spans to @skb (headers only so far) as its @len bytes of
 * payload: each fragment holds its page reference until the frame is
 * freed, and the skb holds the MR's struct ubuf_info (SKBFL_ZEROCOPY_FRAG):
 * the stack calls it back once it is done with the fragments, which is
 * what dereg_mr waits for.  The flags also make every path that would
 * keep the fragments -- a clone for a packet tap, a packet_type receiver
 * -- copy them first (skb_orphan_frags_rx); veth lets them cross
 * (SKBFL_DONT_ORPHAN) to its peer, whose receiver reads and frees them.
 * SKBFL_SHARED_FRAG tells the stack the bytes may change under it (user
 * memory: a checksum over them is taken from a copy).  The references
 * become the skb's.
 */
void mbcf_zc_attach(struct sk_buff *skb, struct mbcf_spans *sp, u32 len)
{
	u32 i;

	for (i = 0; i < sp->n; i++)
		skb_fill_page_desc(skb, i, sp->v[i].page, sp->v[i].off,
				   sp->v[i].len);
	skb->len += len;
	skb->data_len = len;
	skb->truesize += len;
	skb_shinfo(skb)->flags |= SKBFL_SHARED_FRAG;
	skb_zcopy_init(skb, &sp->zc->ubuf);
	this_cpu_inc(sp->zc->dev->rx_ctr->tx_zc_frames);
	sp->n = 0;
	sp->zc = NULL;
}

/* --- parking --------------------------------------------------------------- */

/*
 * A zero-copy frame from a peer on this machine (a veth) is freed here,
 * by its receiver, though its sender's CPU allocated it: the sk_buff goes
 * back to a slab of the other CPU, whose next allocations then take
 * SLUB's slow path (at 64 KiB a fifth of the sender's vCPU, half of it
 * building new slabs), and the frees are half the receiver's kernel time.
 * So such a frame is parked on a lock-free list of the CPU that built it
 * (skb->alloc_cpu), as TCP does with skb_attempt_defer_free() (not
 * exported), and that CPU frees its list the next time it builds or
 * receives a frame of ours -- in a stream, when it takes the ACK that
 * covers the frame -- into its cache of sk_buffs, from which it builds
 * the next frames (net.c, mbcf_net_alloc_head).  A list holds
 * MBCF_ZC_PARKED_MAX frames at most (a CPU that stopped sending holds no
 * more than that); beyond it, and for a CPU gone offline, the receiver
 * frees the frame itself.  dereg_mr empties every list before it waits
 * for the MR's frames (mbcf_zc_drain), and again while it waits.  Only
 * our frames (an MR's ubuf_info): a list holds nothing but frames whose
 * MR dereg_mr drains.
 */
#define MBCF_ZC_PARKED_MAX	256

struct mbcf_zc_parked {
	struct llist_head list;
	atomic_t n;
} ____cacheline_aligned_in_smp;

static DEFINE_PER_CPU(struct mbcf_zc_parked, mbcf_zc_parked);

static void mbcf_zc_unpark(struct mbcf_zc_parked *pk)
{
	struct llist_node *node = llist_del_all(&pk->list);
	int n = 0;

	while (node) {
		struct sk_buff *skb = llist_entry(node, struct sk_buff, ll_node);

		node = node->next;
		napi_consume_skb(skb, 1);	/* BH off: budget 1 */
		n++;
	}
	atomic_sub(n, &pk->n);
}

/* This CPU's parked frames, if any.  With BH off. */
void mbcf_zc_unpark_here(void)
{
	struct mbcf_zc_parked *pk = this_cpu_ptr(&mbcf_zc_parked);

	if (!llist_empty(&pk->list))
		mbcf_zc_unpark(pk);
}

/* Every CPU's (dereg_mr, module unload).  Process context. */
void mbcf_zc_unpark_all(void)
{
	int cpu;

	local_bh_disable();
	for_each_possible_cpu(cpu)
		mbcf_zc_unpark(per_cpu_ptr(&mbcf_zc_parked, cpu));
	local_bh_enable();
}

/* A frame received and read (net.c): parked if ours from another CPU, else freed. */
void mbcf_zc_consume(struct mbcf_dev *dev, struct sk_buff *skb)
{
	struct ubuf_info *uarg = skb_zcopy(skb);
	unsigned int cpu = skb->alloc_cpu;
	struct mbcf_zc_parked *pk;

	if (!uarg || !mbcf_zc_ours(uarg) ||
	    cpu == smp_processor_id() || cpu >= nr_cpu_ids || !cpu_online(cpu))
		goto free;
	pk = per_cpu_ptr(&mbcf_zc_parked, cpu);
	if (atomic_inc_return(&pk->n) > MBCF_ZC_PARKED_MAX) {
		atomic_dec(&pk->n);
		goto free;
	}
	llist_add(&skb->ll_node, &pk->list);
	this_cpu_inc(dev->rx_ctr->rx_zc_parked);
	return;
free:
	consume_skb(skb);
}
