// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Datagrams (verbs UD QPs): one DGRAM frame per message, unsequenced and
 * unacknowledged; a lost datagram is lost.  The receiver puts a 40-byte
 * GRH in front of the data, built from what the frame carries, so a verbs
 * consumer (the MAD layer, UCX's ud_verbs) sees exactly what it expects
 * from RoCE.  docs/protocol.md section 15.
 */
#include "internal.h"

/* The GRH's next-header value for what follows it (an IB BTH). */
#define DGRAM_GRH_NEXT_HDR	0x1B

u32 mbcf_dgram_max_payload(u32 mtu)
{
	return mbcf_codec_max_payload(mtu, MBCF_OP_DGRAM);
}

/*
 * The largest UD message: the largest IB MTU (256 .. 4096) one frame
 * carries whole, which verbs sees as the port's active_mtu (1024 at MTU
 * 1500, 4096 at 9000).  Below 256 bytes of room, the room itself.
 */
u32 mbcf_dgram_max_msg(u32 mtu)
{
	u32 room = mbcf_dgram_max_payload(mtu);
	u32 m = 4096;

	while (m > 256 && m > room)
		m >>= 1;
	return m > room ? room : m;
}

void mbcf_dgram_set_mtu(struct mbcf_dgram *d, u32 mtu)
{
	d->mtu = mtu > MBCF_MAX_PAYLEN ? MBCF_MAX_PAYLEN : mtu;
}

int mbcf_dgram_init(struct mbcf_dgram *d, u32 qpn, u32 qkey, u32 mtu,
		    const struct mbcf_ops *ops, void *env)
{
	if (!ops->xmit || !ops->recv_claim || !ops->recv_write || !ops->complete ||
	    mtu < MBCF_MTU_MIN)
		return MBCF_POST_INVAL;
	memset(d, 0, sizeof(*d));
	d->ops = ops;
	d->env = env;
	d->qpn = qpn & MBCF_QPN_MASK;
	d->qkey = qkey;
	mbcf_dgram_set_mtu(d, mtu);
	return MBCF_POST_OK;
}

static int dgram_complete(struct mbcf_dgram *d, struct mbcf_cqe *cqe)
{
	if (cqe->flags & MBCF_CQE_RECV)
		d->ctr.recv_completions++;
	else
		d->ctr.send_completions++;
	return d->ops->complete(d->env, cqe);
}

int mbcf_dgram_send(struct mbcf_dgram *d, const struct mbcf_wr *wr,
		    const struct mbcf_ud_dest *to)
{
	struct mbcf_payload pl;
	struct mbcf_frame f;
	struct mbcf_cqe cqe;
	u8 hdr[MBCF_HDR_MAX];
	u32 hl;

	memset(&cqe, 0, sizeof(cqe));
	cqe.cookie = wr->cookie;
	cqe.op = wr->op;
	cqe.byte_len = wr->len;
	cqe.status = MBCF_WC_SUCCESS;
	if (wr->op != MBCF_OP_SEND && wr->op != MBCF_OP_SEND_IMM) {
		cqe.status = MBCF_WC_LOC_LEN_ERR;
		dgram_complete(d, &cqe);
		return cqe.status;
	}
	if (wr->len > mbcf_dgram_max_msg(d->mtu)) {
		/*
		 * Larger than the port's MTU: no frame and no error
		 * (IBA C10-93.1.1; rxe does the same), only a count.
		 */
		d->ctr.tx_oversize++;
		dgram_complete(d, &cqe);
		return cqe.status;
	}
	memset(&f, 0, sizeof(f));
	f.op = MBCF_OP_DGRAM;
	f.flags = wr->flags & MBCF_F_SOLICITED;
	if (wr->op == MBCF_OP_SEND_IMM) {
		f.flags |= MBCF_F_IMM;
		f.imm = wr->imm;
	}
	f.dst_qpn = to->remote_qpn & MBCF_QPN_MASK;
	f.src_qpn = d->qpn;
	f.paylen = wr->len;
	f.rkey = to->qkey;
	f.vtf = 6u << 28 | (to->vtf & 0x0fffffff);
	f.hop_limit = to->hop_limit;
	f.sgid = to->sgid;
	f.dgid = to->dgid;
	hl = mbcf_codec_build(&f, hdr);
	memset(&pl, 0, sizeof(pl));
	pl.kind = wr->len ? MBCF_PL_WR : MBCF_PL_NONE;
	pl.len = wr->len;
	pl.cookie = wr->cookie;
	/* busy or not, a datagram is sent at most once: busy loses it */
	switch (d->ops->xmit(d->env, hdr, hl, &pl)) {
	case 0:
		d->ctr.tx_frames++;
		d->ctr.tx_bytes += wr->len;	/* only what left */
		break;
	case MBCF_XMIT_FAULT:	/* its buffer is gone */
		cqe.status = MBCF_WC_LOC_PROT_ERR;
		break;
	default:
		d->ctr.tx_busy++;
		break;
	}
	dgram_complete(d, &cqe);
	return cqe.status;
}

/* The GRH a verbs consumer finds in front of a datagram (IBA 8.3.1). */
void mbcf_dgram_grh(const struct mbcf_frame *f, u8 *grh)
{
	mbcf_put_be32(grh, f->vtf);
	mbcf_put_be16(grh + 4, (u16)f->paylen);
	grh[6] = DGRAM_GRH_NEXT_HDR;
	grh[7] = f->hop_limit;
	memcpy(grh + 8, f->sgid, 16);
	memcpy(grh + 24, f->dgid, 16);
}

/*
 * QP1 carries MADs, MBCF_MAD_LEN bytes each after the GRH: anything longer
 * is no MAD, and must not cost the MAD layer a receive -- it never reposts
 * one that completed in error, so a few hundred such datagrams would
 * silence the CM.
 */
static bool dgram_not_a_mad(const struct mbcf_dgram *d,
			    const struct mbcf_frame *f)
{
	return d->qpn == MBCF_GSI_QPN && f->paylen > MBCF_MAD_LEN;
}

/*
 * The receive the datagram would take cannot hold the GRH and the data: it
 * stays posted for one it can.  Only an environment with recv_peek can say
 * so before the claim; the claim checks again (an SRQ's next receive may
 * change in between).
 */
static bool dgram_recv_short(const struct mbcf_dgram *d, u32 need)
{
	u32 cap;

	return d->ops->recv_peek &&
	       d->ops->recv_peek(d->env, &cap) == MBCF_CLAIM_OK && cap < need;
}

/*
 * Deliver a datagram into the oldest posted receive: the GRH, then the
 * data.  Every frame gets one verdict: delivered (rx_accepted), no receive
 * posted (drop_rnr_stopped: no STOP on UD, the datagram is lost), the
 * wrong Q_Key (drop_bad_qkey), longer than a MAD on QP1 or than the
 * receive it would take (drop_bad_length: nothing is claimed, the receive
 * stays posted), or undeliverable (remote_errors: a receive taken that
 * turned out too small completes with LOC_LEN_ERR, a local protection
 * error with LOC_PROT_ERR, a malformed receive queue takes nothing).
 */
void mbcf_dgram_rx(struct mbcf_dgram *d, const struct mbcf_frame *f)
{
	struct mbcf_cqe cqe;
	u8 grh[MBCF_GRH_LEN];
	const u8 *p;
	u32 cap, k, n, off;
	int r;

	if (f->op != MBCF_OP_DGRAM || f->dst_qpn != d->qpn) {
		d->ctr.drop_wrong_qp++;
		return;
	}
	if (f->rkey != d->qkey) {
		d->ctr.drop_bad_qkey++;
		return;
	}
	if (dgram_not_a_mad(d, f) ||
	    dgram_recv_short(d, MBCF_GRH_LEN + f->paylen)) {
		d->ctr.drop_bad_length++;
		return;
	}
	memset(&cqe, 0, sizeof(cqe));
	r = d->ops->recv_claim(d->env, &cqe.cookie, &cap);
	if (r == MBCF_CLAIM_NONE) {
		d->ctr.drop_stopped++;
		return;
	}
	if (r != MBCF_CLAIM_OK) {
		d->ctr.remote_errors++;
		return;
	}
	cqe.flags = MBCF_CQE_RECV | MBCF_CQE_GRH;
	cqe.op = f->flags & MBCF_F_IMM ? MBCF_OP_SEND_IMM : MBCF_OP_SEND;
	cqe.src_qpn = f->src_qpn;
	cqe.byte_len = MBCF_GRH_LEN + f->paylen;
	if (f->flags & MBCF_F_IMM) {
		cqe.imm = f->imm;
		cqe.flags |= MBCF_CQE_IMM;
	}
	if (f->flags & MBCF_F_SOLICITED)
		cqe.flags |= MBCF_CQE_SOLICITED;
	cqe.status = MBCF_WC_SUCCESS;
	if (cap < MBCF_GRH_LEN + f->paylen) {
		cqe.status = MBCF_WC_LOC_LEN_ERR;
	} else {
		mbcf_dgram_grh(f, grh);
		if (d->ops->recv_write(d->env, cqe.cookie, 0, grh, MBCF_GRH_LEN))
			cqe.status = MBCF_WC_LOC_PROT_ERR;
		for (k = 0, off = MBCF_GRH_LEN; cqe.status == MBCF_WC_SUCCESS &&
		     f->paylen && mbcf_frame_piece(f, k, &p, &n); k++, off += n)
			if (d->ops->recv_write(d->env, cqe.cookie, off, p, n))
				cqe.status = MBCF_WC_LOC_PROT_ERR;
	}
	if (cqe.status == MBCF_WC_SUCCESS) {
		d->ctr.rx_accepted++;
		d->ctr.rx_bytes += f->paylen;
	} else {
		d->ctr.remote_errors++;
	}
	dgram_complete(d, &cqe);
}
