// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Frames in and out: with zc.c, the only file that touches sk_buff.
 *
 * Receive: a packet_type handler for EtherType 0x88B5 on the device's
 * netdev (and on a veth its rx_handler, mbcf_net_rx_handler) parses the
 * MBCF header in place and hands the frame up to the QP it names
 * (mbcf_qp_rx), which applies it to target memory right here in NET_RX
 * softirq: no receive buffering, no thread hop.
 *
 * Transmit: one skb per frame, Ethernet and MBCF headers in its head, and
 * the payload either written in behind them by the caller's fill callback
 * (mbcf_net_xmit_fill) or attached as page fragments of one MR
 * (mbcf_net_xmit_pages, zc.c); proto.c chooses.  The core builds frames
 * under the QP lock, queued on the QP; qp.c hands them to the netdev once
 * the lock is dropped (mbcf_net_send).  A frame to our own MAC (both QPs
 * on this device) is delivered at once (mbcf_net_loop), with no QP lock
 * held.  A frame the link refuses (a full queue: veth says NET_XMIT_DROP
 * when its peer's backlog is full) is reported to the core with its psn,
 * and nothing of the stream behind it is sent (qp.c, docs/protocol.md
 * 7.7).
 *
 * Every frame the handler accepts as ours is counted in rx_frames and then
 * gets exactly one verdict counter (include/mbcf/counters.h).
 */
#include <linux/etherdevice.h>
#include <linux/hash.h>
#include <linux/if_vlan.h>
#include <linux/netdevice.h>
#include <linux/rtnetlink.h>
#include <linux/skbuff.h>

#include "mbcf.h"
#include "zc.h"

/*
 * A frame whose payload is not right behind its header (a zero-copy frame
 * from mbcf_net_xmit_pages(), or a driver's page fragments): describe it to the
 * core in pieces -- the linear rest, then each fragment mapped -- rather
 * than copy it together.  Returns the number of pieces, or 0 if the skb
 * must be linearised (frag list; a multi-page fragment under HIGHMEM).
 */
static u32 mbcf_net_pieces(struct sk_buff *skb, const struct mbcf_frame *f,
			   struct mbcf_iov *iov)
{
	u32 want = f->paylen, n = 0, i, len;
	const skb_frag_t *frag;

	if (skb_has_frag_list(skb))
		return 0;
	for (i = 0; i < skb_shinfo(skb)->nr_frags; i++) {
		frag = &skb_shinfo(skb)->frags[i];
		if (IS_ENABLED(CONFIG_HIGHMEM) &&
		    skb_frag_off(frag) + skb_frag_size(frag) > PAGE_SIZE)
			return 0;
	}
	len = min(skb_headlen(skb) - f->hdr_len, want);
	if (len) {
		iov[n++] = (struct mbcf_iov){ skb->data + f->hdr_len, len };
		want -= len;
	}
	for (i = 0; want && i < skb_shinfo(skb)->nr_frags; i++) {
		frag = &skb_shinfo(skb)->frags[i];
		len = min(skb_frag_size(frag), want);
		iov[n++] = (struct mbcf_iov){
			(u8 *)kmap_local_page(skb_frag_page(frag)) +
				skb_frag_off(frag), len };
		want -= len;
	}
	return n;
}

/* Undo the mappings of mbcf_net_pieces(), newest first. */
static void mbcf_net_unmap(const struct sk_buff *skb,
			   const struct mbcf_frame *f)
{
	u32 i = f->niov;

	while (i-- > (skb_headlen(skb) > f->hdr_len ? 1 : 0))
		kunmap_local(f->iov[i].base);
}

/*
 * One frame of ours, its MBCF header at skb->data: parse, describe the
 * payload, apply it to the QP it names.  Consumes the skb.  In softirq or
 * with bottom halves off.
 */
static int mbcf_net_deliver(struct mbcf_dev *dev, struct sk_buff *skb)
{
	struct mbcf_counters *ctr = this_cpu_ptr(dev->rx_ctr);
	struct mbcf_iov iov[MAX_SKB_FRAGS + 1];
	struct mbcf_frame f;
	u32 hdr_len;

	ctr->rx_frames++;
	/* The header linear (parse judges what is too short), in two steps
	 * so no payload byte is pulled in with it. */
	if (!pskb_may_pull(skb, min_t(u32, skb->len, MBCF_HDR_LEN)))
		goto drop_nomem;
	hdr_len = skb_headlen(skb) >= MBCF_HDR_LEN ?
		  mbcf_codec_hdr_len(skb->data[MBCF_OFF_OPCODE]) : 0;
	if (hdr_len && !pskb_may_pull(skb, min(skb->len, hdr_len)))
		goto drop_nomem;
	if (mbcf_codec_parse_split(skb->data, skb_headlen(skb), skb->len, &f,
				   ctr))
		goto drop;
	if (!f.payload) {
		f.niov = mbcf_net_pieces(skb, &f, iov);
		f.iov = iov;
		if (!f.niov) {
			if (skb_linearize(skb))
				goto drop_nomem;
			f.payload = skb->data + f.hdr_len;
		}
	}
	mbcf_qp_rx(dev, &f, eth_hdr(skb)->h_source);
	if (!f.payload)
		mbcf_net_unmap(skb, &f);
	mbcf_zc_consume(dev, skb);
	mbcf_zc_unpark_here();
	return NET_RX_SUCCESS;

drop_nomem:
	ctr->drop_nomem++;
drop:
	kfree_skb(skb);
	return NET_RX_DROP;
}

/* A frame of our EtherType on our netdev, from either receive hook. */
static int mbcf_net_rcv_one(struct mbcf_dev *dev, struct sk_buff *skb)
{
	/* Not addressed to us (promiscuous netdev, a copy of our own). */
	if (skb->pkt_type == PACKET_OTHERHOST || skb->pkt_type == PACKET_OUTGOING) {
		kfree_skb(skb);
		return NET_RX_DROP;
	}
	/* mbcf joins no group: a frame to a broadcast or multicast MAC is
	 * no one's (it would reach every mbcf host on the segment at once) */
	if (skb->pkt_type == PACKET_BROADCAST || skb->pkt_type == PACKET_MULTICAST) {
		this_cpu_inc(dev->rx_ctr->rx_frames);
		this_cpu_inc(dev->rx_ctr->drop_not_unicast);
		kfree_skb(skb);
		return NET_RX_DROP;
	}
	skb = skb_share_check(skb, GFP_ATOMIC);
	if (!skb) {
		this_cpu_inc(dev->rx_ctr->rx_frames);
		this_cpu_inc(dev->rx_ctr->drop_nomem);
		return NET_RX_DROP;
	}
	return mbcf_net_deliver(dev, skb);
}

static int mbcf_net_rcv(struct sk_buff *skb, struct net_device *ndev,
			struct packet_type *pt, struct net_device *orig_dev)
{
	return mbcf_net_rcv_one(container_of(pt, struct mbcf_dev, ptype), skb);
}

/*
 * The receive hook on a veth.  A packet_type handler is handed a
 * zero-copy frame only after the stack copied its fragments
 * (skb_orphan_frags_rx in __netif_receive_skb_core: the handler might keep
 * them), so on veth -- where the peer's frames arrive with the sender's
 * pages still attached (SKBFL_DONT_ORPHAN, mr.c) -- every payload was
 * copied twice.  An rx_handler sees the skb before that: we read the
 * fragments in place and free the skb, and only then does the sender's
 * dereg_mr stop waiting for it.  The netdev has one rx_handler slot
 * (bridge, bond, macvlan want it too), so we take it only on a veth and
 * only if it is free; else the packet_type handler does all the work.
 */
static rx_handler_result_t mbcf_net_rx_handler(struct sk_buff **pskb)
{
	struct sk_buff *skb = *pskb;
	struct mbcf_dev *dev;
	struct packet_type *pt;

	/*
	 * Taken here only what the packet_type path would give to us alone:
	 * ours, not for another host (a promiscuous tap bound to our
	 * EtherType sees those), untagged (a VLAN tag no VLAN device took is
	 * dropped on that path), and no other handler of our EtherType bound
	 * to this netdev (a packet socket).  ETH_P_ALL taps ran already.
	 */
	if (skb->protocol != htons(MBCF_ETHERTYPE) ||
	    skb->pkt_type == PACKET_OTHERHOST || skb_vlan_tag_present(skb))
		return RX_HANDLER_PASS;
	dev = rcu_dereference(skb->dev->rx_handler_data);
	list_for_each_entry_rcu(pt, &skb->dev->ptype_specific, list)
		if (pt != &dev->ptype && pt->type == htons(MBCF_ETHERTYPE))
			return RX_HANDLER_PASS;
	mbcf_net_rcv_one(dev, skb);
	return RX_HANDLER_CONSUMED;
}

static bool mbcf_net_is_veth(const struct net_device *ndev)
{
	return ndev->rtnl_link_ops &&
	       !strcmp(ndev->rtnl_link_ops->kind, "veth");
}

int mbcf_net_start(struct mbcf_dev *dev)
{
	dev->ptype.type = htons(MBCF_ETHERTYPE);
	dev->ptype.dev = dev->ndev;
	dev->ptype.func = mbcf_net_rcv;
	dev_add_pack(&dev->ptype);
	if (mbcf_net_is_veth(dev->ndev)) {
		rtnl_lock();
		dev->rx_handler = !netdev_rx_handler_register(dev->ndev,
						mbcf_net_rx_handler, dev);
		rtnl_unlock();
	}
	return 0;
}

/* After this returns no handler runs on this device (synchronize_net). */
void mbcf_net_stop(struct mbcf_dev *dev)
{
	if (dev->rx_handler) {
		rtnl_lock();
		netdev_rx_handler_unregister(dev->ndev);
		rtnl_unlock();
		dev->rx_handler = false;
	}
	if (dev->ptype.func)
		dev_remove_pack(&dev->ptype);
	dev->ptype.func = NULL;
}

/*
 * Frame heads come from pages we keep and carve, per CPU, rather than from
 * kmalloc or the stack's page-fragment cache: under init_on_alloc
 * (Debian's default) both zero what they hand out -- a kmalloc'ed head
 * each time, the fragment cache each 32 KiB page it starts, and it starts
 * one whenever a frame of the page it is done with is still alive, which
 * in a stream (a window of frames in flight) is always.  Zeroing those
 * pages was 8 % of the sending vCPU (ib_write_bw 1440 B, perf).  A page
 * of ours is carved again once every frame cut from it is freed (our
 * reference is its last), so each is zeroed once, when first allocated.
 * MBCF_NET_HEAD_PAGES per CPU at most (128 KiB, held until the module
 * unloads); when all are busy, the fragment cache serves.  The pages only
 * ever hold our own headers and copied payload: no byte of the old frame
 * in the head is sent (every frame writes what it sends, from data).
 * Per-CPU state: touched with BH off (mbcf_net_alloc_head takes it off
 * for any caller).
 */
#define MBCF_NET_HEAD_PAGES	32

struct mbcf_net_heads {
	struct page *page[MBCF_NET_HEAD_PAGES];
	u32 n;		/* pages allocated */
	u32 cur;	/* the page being carved */
	u32 off;	/* its next free byte */
	u32 skip;	/* heads to leave to the fragment cache unscanned */
};

static DEFINE_PER_CPU(struct mbcf_net_heads, mbcf_net_heads);

/* A page of ours none of whose frames is alive, made the one carved. */
static bool mbcf_net_heads_next(struct mbcf_net_heads *h)
{
	struct page *p;
	u32 i, k;

	for (i = 1; i <= h->n; i++) {
		k = (h->cur + i) % h->n;
		if (page_ref_count(h->page[k]) == 1) {
			h->cur = k;
			h->off = 0;
			return true;
		}
	}
	if (h->n == MBCF_NET_HEAD_PAGES) {
		/* all busy (a packet tap holding clones): do not scan them
		 * again for every head, only after a page's worth */
		h->skip = PAGE_SIZE / 512;
		return false;
	}
	/* not from the emergency reserves: an skb whose head is such a page
	 * is dropped by the receive path for any protocol but IP's */
	p = alloc_page(GFP_ATOMIC | __GFP_NOWARN | __GFP_NOMEMALLOC);
	if (!p)
		return false;
	h->page[h->n] = p;
	h->cur = h->n++;
	h->off = 0;
	return true;
}

/*
 * @size bytes (at most a page) with a page reference of their own, or
 * NULL.  With BH off (mbcf_net_alloc_head).
 */
static void *mbcf_net_head_frag(u32 size)
{
	struct mbcf_net_heads *h;
	void *data = NULL;
	struct page *p;

	h = this_cpu_ptr(&mbcf_net_heads);
	if (h->n && h->off + size <= PAGE_SIZE) {
		p = h->page[h->cur];
	} else if (h->skip) {
		h->skip--;
		p = NULL;
	} else {
		p = mbcf_net_heads_next(h) ? h->page[h->cur] : NULL;
	}
	if (p) {
		page_ref_inc(p);
		data = page_address(p) + h->off;
		h->off += size;
	}
	return data;
}

/* Module unload: our references go; frames still alive keep theirs. */
void mbcf_net_heads_free(void)
{
	struct mbcf_net_heads *h;
	int cpu;

	for_each_possible_cpu(cpu) {
		h = per_cpu_ptr(&mbcf_net_heads, cpu);
		while (h->n)
			put_page(h->page[--h->n]);
	}
}

/*
 * An skb whose head is carved from a page (mbcf_net_head_frag, else the
 * page-fragment cache), not kmalloc'ed: see above.  netdev_alloc_skb()
 * would kmalloc heads below 1 KiB, and headers-only frames (ACKs,
 * zero-copy data) are smaller.
 */
static struct sk_buff *mbcf_net_alloc_head(struct mbcf_dev *dev, u32 len)
{
	u32 size = SKB_DATA_ALIGN(len + NET_SKB_PAD) +
		   SKB_DATA_ALIGN(sizeof(struct skb_shared_info));
	struct sk_buff *skb;
	void *data;

	if (size > PAGE_SIZE)
		return alloc_skb(len, GFP_ATOMIC);
	local_bh_disable();
	/* first: the parked frames' heads may free a page of ours */
	mbcf_zc_unpark_here();
	data = mbcf_net_head_frag(size);
	if (!data) {
		this_cpu_inc(dev->rx_ctr->tx_head_miss);
		data = netdev_alloc_frag(size);
	}
	/*
	 * The sk_buff from this CPU's cache the stack keeps for NAPI drivers,
	 * where the parked frames this CPU built went back (in a stream, the
	 * last burst's): no slab allocation, no init_on_alloc zeroing.
	 */
	skb = data ? napi_build_skb(data, size) : NULL;
	local_bh_enable();
	if (!skb) {
		if (data)
			skb_free_frag(data);
		return NULL;
	}
	skb_reserve(skb, NET_SKB_PAD);
	return skb;
}

/* An skb holding the Ethernet and MBCF headers, with room for @room more. */
static struct sk_buff *mbcf_net_alloc(struct mbcf_dev *dev, const u8 *dmac,
				      const u8 *hdr, u32 hdr_len, u32 room)
{
	struct net_device *ndev = dev->ndev;
	struct sk_buff *skb;
	struct ethhdr *eth;

	skb = mbcf_net_alloc_head(dev, LL_RESERVED_SPACE(ndev) + ETH_HLEN + hdr_len +
				  room + ndev->needed_tailroom);
	if (!skb)
		return NULL;
	skb_reserve(skb, LL_RESERVED_SPACE(ndev));
	skb_reset_mac_header(skb);
	eth = skb_put(skb, ETH_HLEN);
	ether_addr_copy(eth->h_dest, dmac);
	ether_addr_copy(eth->h_source, ndev->dev_addr);
	eth->h_proto = htons(MBCF_ETHERTYPE);
	skb_set_network_header(skb, ETH_HLEN);
	skb_put_data(skb, hdr, hdr_len);
	skb->dev = ndev;
	skb->protocol = htons(MBCF_ETHERTYPE);
	skb->priority = TC_PRIO_INTERACTIVE_BULK;
	return skb;
}

/* A connection's peer, or where the datagram being built goes. */
static const u8 *mbcf_net_dmac(const struct mbcf_qp *qp)
{
	return qp->ud ? qp->ud_dmac : qp->dmac;
}

/*
 * A QP's frames are one flow: they carry a hash of its number, which the
 * stack would otherwise compute per frame with the flow dissector (it
 * cannot parse our EtherType and hashes the EtherType alone: every QP one
 * flow).  RPS steers by it (on a veth, a dissection per frame on the
 * sending CPU, the busy one), and so does a multi-queue NIC's queue choice
 * when no XPS map is set: one queue per QP, QPs spread over the queues.
 *
 * With an XPS map the stack picks the queue of the CPU that sends, and a
 * QP sends from several: the poster's doorbell, the receive softirq that
 * took an ACK (on another CPU under RSS or RPS), tx_work.  Frames a
 * moment apart on two hardware queues leave in whichever order the NIC
 * serves its queues, and the receiver sees a gap (go-back-N resends the
 * window).  So every frame of a QP names one CPU, the QP's, as its sender
 * for XPS: one queue, the order kept (TCP keeps a socket on one queue
 * while it has data in flight for the same reason).
 */
static void mbcf_net_flow(const struct mbcf_qp *qp, struct sk_buff *skb)
{
	__skb_set_sw_hash(skb, hash_32(qp->ibqp.qp_num, 32) | 1, true);
#ifdef CONFIG_XPS
	skb->sender_cpu = qp->tx_cpu + 1;
#endif
}

/* A frame built under qp->lock, to be sent once it is dropped. */
static void mbcf_net_queue(struct mbcf_qp *qp, struct sk_buff *skb)
{
	mbcf_net_flow(qp, skb);
	__skb_queue_tail(&qp->txq.q, skb);
}

/*
 * A payload too large for a head carved from a page (a jumbo frame; the
 * frames between two QPs of this device, qp.c): written by @fill in
 * pieces into fragments carved from the same per-CPU pages, rather than
 * into a kmalloc'ed head that init_on_alloc would zero whole for every
 * frame.  The page-fragment cache serves when our pages are all busy.
 * 0, -ENOMEM, or @fill's error (the caller frees the skb).
 */
#define MBCF_NET_FILL_PIECE	2048

static int mbcf_net_fill_frags(struct sk_buff *skb, u32 len,
			       mbcf_net_fill_t fill, void *from)
{
	struct page *page;
	u32 off = 0, n, i;
	void *data;
	int err;

	for (i = 0; off < len; i++, off += n) {
		n = min_t(u32, len - off, MBCF_NET_FILL_PIECE);
		if (i == MAX_SKB_FRAGS)
			return -ENOMEM;
		local_bh_disable();
		data = mbcf_net_head_frag(n);
		local_bh_enable();
		if (!data)
			data = netdev_alloc_frag(n);
		if (!data)
			return -ENOMEM;
		page = virt_to_head_page(data);
		skb_add_rx_frag(skb, i, page, (u8 *)data - (u8 *)page_address(page),
				n, n);
		err = fill(from, data, off, n);
		if (unlikely(err))
			return err;
	}
	return 0;
}

/* Would a head holding @len bytes after the link layer's outgrow a page? */
static bool mbcf_net_head_too_big(const struct net_device *ndev, u32 len)
{
	return SKB_DATA_ALIGN(LL_RESERVED_SPACE(ndev) + ETH_HLEN + len +
			      ndev->needed_tailroom + NET_SKB_PAD) +
	       SKB_DATA_ALIGN(sizeof(struct skb_shared_info)) > PAGE_SIZE;
}

/*
 * Build one frame and queue it on the QP (caller holds qp->lock), its
 * payload @len bytes that @fill writes into the frame's head, as
 * ip_append_data's getfrag does (or into fragments, above).  Returns 0,
 * -ENOMEM (nothing queued: like a lost frame, go-back-N recovers) or
 * @fill's error (nothing queued).
 */
int mbcf_net_xmit_fill(struct mbcf_qp *qp, const u8 *hdr, u32 hdr_len,
		       u32 len, mbcf_net_fill_t fill, void *from)
{
	bool frags = len && mbcf_net_head_too_big(qp->dev->ndev, hdr_len + len);
	struct sk_buff *skb;
	int err = 0;

	lockdep_assert_held(&qp->lock);
	skb = mbcf_net_alloc(qp->dev, mbcf_net_dmac(qp), hdr, hdr_len,
			     frags ? 0 : len);
	if (!skb)
		return -ENOMEM;
	if (frags)
		err = mbcf_net_fill_frags(skb, len, fill, from);
	else if (len)
		err = fill(from, skb_put(skb, len), 0, len);
	if (unlikely(err)) {
		kfree_skb(skb);
		return err;
	}
	mbcf_net_queue(qp, skb);
	return 0;
}

/*
 * The same, its payload the @len bytes of @sp's pages, attached as
 * fragments (zc.c): the references become the frame's.  Returns 0, or
 * -ENOMEM with @sp still the caller's.
 */
int mbcf_net_xmit_pages(struct mbcf_qp *qp, const u8 *hdr, u32 hdr_len,
			struct mbcf_spans *sp, u32 len)
{
	struct sk_buff *skb;

	lockdep_assert_held(&qp->lock);
	skb = mbcf_net_alloc(qp->dev, mbcf_net_dmac(qp), hdr, hdr_len, 0);
	if (!skb)
		return -ENOMEM;
	mbcf_zc_attach(skb, sp, len);
	mbcf_net_queue(qp, skb);
	return 0;
}

/* The QP's queue of frames built and not yet sent (qp.c, at create). */
void mbcf_net_init_qp(struct mbcf_qp *qp)
{
	skb_queue_head_init(&qp->txq.q);
}

/* How many frames wait on the QP (qp->lock held). */
u32 mbcf_net_queued(struct mbcf_qp *qp)
{
	lockdep_assert_held(&qp->lock);
	return skb_queue_len(&qp->txq.q);
}

/* Move them to @batch, to be sent with qp->lock dropped (mbcf_net_send). */
void mbcf_net_take(struct mbcf_qp *qp, struct mbcf_frames *batch)
{
	lockdep_assert_held(&qp->lock);
	__skb_queue_head_init(&batch->q);
	skb_queue_splice_init(&qp->txq.q, &batch->q);
}

/* Destroy: frames never sent (none should be left; never leak). */
void mbcf_net_purge(struct mbcf_qp *qp)
{
	__skb_queue_purge(&qp->txq.q);
}

/*
 * Frames a device sends to itself (both QPs on it) are delivered right
 * here, as rxe loops back inside its driver: no backlog queue, no second
 * softirq pass, and a zero-copy frame's payload is copied once, from the
 * sender's pages into the target (the stack's receive path would copy its
 * fragments first).  Not nested: a frame sent while delivering one (the
 * receiver's ACK, a read's response, an answer the settle picked up from
 * the ring) waits on this CPU's list and is delivered when the outer
 * delivery returns, so the stack never grows by more than one delivery --
 * and, unlike the stack's backlog, costs no softirq pass.  Each of those
 * deliveries may send again (an application posting as fast as its ACKs
 * come keeps a chain going), so one outer delivery defers at most
 * MBCF_NET_LOOP_MAX frames; later ones take the backlog, whose softirq
 * has a budget, and whose refusal the sender sees.  Packet taps on the
 * netdev do not see these frames.
 */
#define MBCF_NET_LOOP_MAX	64

struct mbcf_net_loop_q {
	bool delivering;
	u32 budget;		/* frames this delivery may still defer */
	struct sk_buff_head q;	/* each skb's cb holds its device */
};
static DEFINE_PER_CPU(struct mbcf_net_loop_q, mbcf_net_loop_q);

static struct mbcf_dev **mbcf_net_loop_dev(struct sk_buff *skb)
{
	static_assert(sizeof(struct mbcf_dev *) <= sizeof(skb->cb));
	return (struct mbcf_dev **)skb->cb;
}

/* True if the frame was refused (past the budget, the backlog was full). */
static bool mbcf_net_loop(struct mbcf_dev *dev, struct sk_buff *skb)
{
	struct mbcf_net_loop_q *lq;
	bool refused = false;

	skb->protocol = eth_type_trans(skb, dev->ndev);
	local_bh_disable();
	lq = this_cpu_ptr(&mbcf_net_loop_q);
	if (unlikely(!lq->q.next))
		__skb_queue_head_init(&lq->q);	/* first use on this CPU */
	if (!lq->delivering) {
		lq->delivering = true;
		lq->budget = MBCF_NET_LOOP_MAX;
		mbcf_net_deliver(dev, skb);
		while ((skb = __skb_dequeue(&lq->q)))
			mbcf_net_deliver(*mbcf_net_loop_dev(skb), skb);
		lq->delivering = false;
	} else if (lq->budget) {
		lq->budget--;
		this_cpu_inc(dev->rx_ctr->tx_loop_deferred);
		*mbcf_net_loop_dev(skb) = dev;
		__skb_queue_tail(&lq->q, skb);
	} else {
		this_cpu_inc(dev->rx_ctr->tx_loop_backlog);
		refused = netif_rx(skb) == NET_RX_DROP;
	}
	local_bh_enable();
	return refused;
}

/*
 * To the netdev, or straight back in if it is addressed to this device.
 * True if the frame was refused: the stack freed it without sending (a
 * full queue -- NET_XMIT_DROP -- or a device going away); NET_XMIT_CN
 * means it was queued.
 */
static bool mbcf_net_out(struct mbcf_dev *dev, struct sk_buff *skb)
{
	int rc;

	if (ether_addr_equal(eth_hdr(skb)->h_dest, dev->ndev->dev_addr))
		return mbcf_net_loop(dev, skb);
	/* not inside net_xmit_eval(): a macro that evaluates its argument
	 * twice -- the skb would be handed over a second time */
	rc = dev_queue_xmit(skb);
	return net_xmit_eval(rc) != 0;
}

/*
 * A frame of the connection's stream: its psn and go-back round, read from
 * the header we built, while the skb is still ours (once handed over it
 * may be freed, or queued elsewhere).  False for control frames and
 * datagrams.
 */
static bool mbcf_net_frame_seq(const struct mbcf_qp *qp,
			       const struct sk_buff *skb, u32 *psn, u16 *epoch)
{
	const u8 *h = skb_network_header(skb);

	if (qp->ud || !mbcf_wire_op_sequenced(h[MBCF_OFF_OPCODE]))
		return false;
	*psn = mbcf_get_be32(h + MBCF_OFF_PSN);
	*epoch = mbcf_get_be16(h + MBCF_OFF_EPOCH);
	return true;
}

/*
 * Hand @frames to the netdev, in order (qp->lock not held).  Each frame is
 * looked at: a UD QP's go to many places, some maybe to this device.  The
 * first frame of the stream the link refuses goes into @ref; the stream's
 * frames behind it are dropped unsent (they would only open a gap at the
 * receiver: the core goes back to the refused one, docs/protocol.md 7.7);
 * control frames still go.
 */
void mbcf_net_send(struct mbcf_qp *qp, struct mbcf_frames *frames,
		   struct mbcf_net_refused *ref)
{
	struct net_device *ndev = qp->dev->ndev;
	struct sk_buff *skb;
	bool seq;
	u16 epoch;
	u32 psn;

	while ((skb = __skb_dequeue(&frames->q))) {
		/* A netdev that is down (or going away) sends nothing; nor do we
		 * (its queues may already be gone: "selects TX queue 0, but real
		 * number of TX queues is 0").  Like a lost frame. */
		if (unlikely(!netif_running(ndev))) {
			kfree_skb(skb);
			continue;
		}
		seq = mbcf_net_frame_seq(qp, skb, &psn, &epoch);
		if (unlikely(seq && ref->any)) {
			this_cpu_inc(qp->dev->rx_ctr->tx_withdrawn);
			kfree_skb(skb);
			continue;
		}
		/* skb is not ours after this line, whatever it returns */
		if (unlikely(mbcf_net_out(qp->dev, skb)) && seq) {
			ref->any = true;
			ref->psn = psn;
			ref->epoch = epoch;
		}
	}
}

/*
 * After a refusal (qp->lock held): frames of the stream still queued from
 * a round the core has since gone back over are dropped -- the go-back
 * builds them again, in order behind the refused one.
 */
void mbcf_net_drop_stale(struct mbcf_qp *qp)
{
	struct sk_buff *skb, *tmp;
	u16 epoch;
	u32 psn;

	lockdep_assert_held(&qp->lock);
	skb_queue_walk_safe(&qp->txq.q, skb, tmp) {
		if (mbcf_net_frame_seq(qp, skb, &psn, &epoch) &&
		    epoch != qp->conn.tx_epoch) {
			__skb_unlink(skb, &qp->txq.q);
			this_cpu_inc(qp->dev->rx_ctr->tx_withdrawn);
			kfree_skb(skb);
		}
	}
}

/*
 * One header-only frame sent for no QP (a destroyed QP's last ACK, qp.c):
 * to @dmac at once.  0, or -ENOMEM / -ENETDOWN (not sent: like a lost one).
 */
int mbcf_net_send_ctl(struct mbcf_dev *dev, const u8 *dmac, const u8 *hdr,
		      u32 hdr_len)
{
	struct sk_buff *skb;

	if (unlikely(!netif_running(dev->ndev)))
		return -ENETDOWN;
	skb = mbcf_net_alloc(dev, dmac, hdr, hdr_len, 0);
	if (!skb)
		return -ENOMEM;
	mbcf_net_out(dev, skb);		/* refused: like a lost frame */
	return 0;
}
