// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Frames in and out: the only file that touches sk_buff.
 *
 * Receive: a packet_type handler for EtherType 0x88B5 on the device's
 * netdev parses the MBCF header in place and hands the frame to the QP it
 * names (proto.c), which applies it to target memory right here in NET_RX
 * softirq: no receive buffering, no thread hop.
 *
 * Transmit: one skb per frame, built in one pass: Ethernet header, MBCF
 * header, and the payload gathered straight from registered memory.  A
 * frame to our own MAC (both QPs on this device) goes through netif_rx()
 * so it is handled later in softirq, never re-entering a QP lock we hold.
 */
#include <linux/etherdevice.h>
#include <linux/netdevice.h>
#include <linux/skbuff.h>

#include "mbcf.h"

static int mbcf_net_rcv(struct sk_buff *skb, struct net_device *ndev,
			struct packet_type *pt, struct net_device *orig_dev)
{
	struct mbcf_dev *dev = container_of(pt, struct mbcf_dev, ptype);
	struct mbcf_frame f;

	if (skb->pkt_type == PACKET_OTHERHOST || skb->pkt_type == PACKET_OUTGOING)
		goto drop;
	skb = skb_share_check(skb, GFP_ATOMIC);
	if (!skb)
		return NET_RX_DROP;
	if (skb_linearize(skb))
		goto drop;
	if (mbcf_codec_parse(skb->data, skb->len, &f, this_cpu_ptr(dev->rx_ctr)))
		goto drop;
	mbcf_proto_rx(dev, &f, eth_hdr(skb)->h_source);
	consume_skb(skb);
	return NET_RX_SUCCESS;

drop:
	kfree_skb(skb);
	return NET_RX_DROP;
}

int mbcf_net_start(struct mbcf_dev *dev)
{
	dev->ptype.type = htons(MBCF_ETHERTYPE);
	dev->ptype.dev = dev->ndev;
	dev->ptype.func = mbcf_net_rcv;
	dev_add_pack(&dev->ptype);
	return 0;
}

/* After this returns no handler runs on this device (synchronize_net). */
void mbcf_net_stop(struct mbcf_dev *dev)
{
	if (dev->ptype.func)
		dev_remove_pack(&dev->ptype);
	dev->ptype.func = NULL;
}

/* Fill @dst with the frame's payload; see struct mbcf_payload. */
static int mbcf_net_gather(struct mbcf_qp *qp, const struct mbcf_payload *pl,
			   u8 *dst)
{
	struct mbcf_send_wqe *w;

	switch (pl->kind) {
	case MBCF_PL_WR:
		w = mbcf_qp_sq_wqe(qp, pl->cookie);
		if (w->send_flags & IB_SEND_INLINE) {
			if (pl->offset + pl->len > w->inline_len)
				return -EINVAL;
			memcpy(dst, (u8 *)(w + 1) + pl->offset, pl->len);
			return 0;
		}
		return mbcf_mr_gather(qp->dev, qp->ibqp.pd,
				      (struct mbcf_sge *)(w + 1), w->num_sge,
				      pl->offset, dst, pl->len);
	case MBCF_PL_TARGET:
		return mbcf_mr_copy_out(qp->dev, qp->ibqp.pd, pl->rkey, pl->va,
					dst, pl->len, IB_ACCESS_REMOTE_READ);
	default:
		return pl->len ? -EINVAL : 0;
	}
}

int mbcf_net_xmit(struct mbcf_qp *qp, const u8 *hdr, u32 hdr_len,
		  const struct mbcf_payload *pl)
{
	struct net_device *ndev = qp->dev->ndev;
	u32 plen = pl ? pl->len : 0;
	struct sk_buff *skb;
	struct ethhdr *eth;
	u8 *data;

	skb = alloc_skb(LL_RESERVED_SPACE(ndev) + ETH_HLEN + hdr_len + plen +
			ndev->needed_tailroom, GFP_ATOMIC);
	if (!skb)
		return 0;	/* like a lost frame: go-back-N recovers */
	skb_reserve(skb, LL_RESERVED_SPACE(ndev));
	skb_reset_mac_header(skb);
	eth = skb_put(skb, ETH_HLEN);
	ether_addr_copy(eth->h_dest, qp->dmac);
	ether_addr_copy(eth->h_source, ndev->dev_addr);
	eth->h_proto = htons(MBCF_ETHERTYPE);
	skb_set_network_header(skb, ETH_HLEN);
	skb_put_data(skb, hdr, hdr_len);
	if (plen) {
		data = skb_put(skb, plen);
		/* Memory deregistered under us: send zeroes, never stale bytes. */
		if (unlikely(mbcf_net_gather(qp, pl, data))) {
			memset(data, 0, plen);
			qp->conn_failed = IB_WC_LOC_PROT_ERR;
		}
	}
	skb->dev = ndev;
	skb->protocol = htons(MBCF_ETHERTYPE);
	skb->priority = TC_PRIO_INTERACTIVE_BULK;

	if (ether_addr_equal(qp->dmac, ndev->dev_addr)) {
		skb->protocol = eth_type_trans(skb, ndev);
		netif_rx(skb);
	} else {
		dev_queue_xmit(skb);
	}
	return 0;
}
