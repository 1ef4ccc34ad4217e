/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * Zero-copy transmit (zc.c): the types the files that compose a frame
 * share.  A frame's payload either is copied into its head or travels as
 * page fragments of one MR, which then waits in dereg_mr until the stack
 * is done with them.
 */
#ifndef MBCF_KMOD_ZC_H
#define MBCF_KMOD_ZC_H

#include <linux/completion.h>
#include <linux/skbuff.h>

struct mbcf_dev;

/*
 * One MR's zero-copy state (embedded in struct mbcf_mr): ubuf.refcnt is 1
 * (the registry's) + one per frame that carries its pages, dropped by the
 * ubuf_info callback when the stack is done with the fragments.
 */
struct mbcf_zc {
	struct ubuf_info ubuf;
	struct completion idle;		/* ubuf.refcnt hit zero: no frame left */
	struct mbcf_dev *dev;
};

/*
 * The pieces of a payload taken as pages (a page reference each) and the
 * MR they belong to (zc, referenced: one MR a frame).  On success they are
 * handed to the skb (mbcf_zc_attach); on any error the caller drops them
 * (mbcf_zc_spans_put).
 */
struct mbcf_span {
	struct page *page;
	u32 off, len;
};

#define MBCF_ZC_SPANS	MAX_SKB_FRAGS

struct mbcf_spans {
	struct mbcf_span v[MBCF_ZC_SPANS];
	u32 n;
	struct mbcf_zc *zc;
};

static inline void mbcf_zc_spans_init(struct mbcf_spans *sp)
{
	sp->n = 0;
	sp->zc = NULL;
}

/* The copy-or-pages policy: is a payload of @len worth sending as pages? */
bool mbcf_zc_worth(struct mbcf_dev *dev, u32 len);
/* Building a frame's spans (mr.c): -E2BIG if they do not fit one frame. */
int mbcf_zc_hold(struct mbcf_spans *sp, struct mbcf_zc *zc);
int mbcf_zc_add(struct mbcf_spans *sp, struct page *page, u32 off, u32 len);
void mbcf_zc_spans_put(struct mbcf_spans *sp);
/* Frames (net.c). */
void mbcf_zc_attach(struct sk_buff *skb, struct mbcf_spans *sp, u32 len);
void mbcf_zc_consume(struct mbcf_dev *dev, struct sk_buff *skb);
void mbcf_zc_unpark_here(void);
void mbcf_zc_unpark_all(void);
/* An MR's life (mr.c). */
void mbcf_zc_init(struct mbcf_zc *zc, struct mbcf_dev *dev);
void mbcf_zc_drain(struct mbcf_zc *zc, u32 key);

#endif /* MBCF_KMOD_ZC_H */
