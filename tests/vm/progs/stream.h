/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * A checked traffic stream on one RC QP: RDMA writes, RDMA reads and sends
 * (with receives posted for the peer's sends), a window of each kept full,
 * every completion checked as it arrives:
 *  - completions come in posting order (RC), each wr_id exactly once;
 *  - a successful read returns exactly the peer's read-area pattern, a
 *    successful receive exactly the peer's source pattern;
 *  - statuses: SUCCESS, until an error the caller allowed (err_ok), then
 *    only WR_FLUSH_ERR.  Anything else is a failed check.
 * Used by lifetimes.c, limits.c and scale.c.
 */
#ifndef MBCF_STREAM_H
#define MBCF_STREAM_H

#include "vmprog.h"

enum { ST_WRITE = 1, ST_READ = 2, ST_SEND = 4 };

#define ST_RECV_FLAG	(1ull << 63)
#define ST_MAX_WIN	16

struct st_stream {
	char name[32];
	struct vp_ep *e;
	uint32_t size;		/* bytes per operation */
	int window, rwindow;	/* outstanding sends / posted receives */
	int ops;		/* ST_* mask */

	/* local memory, one MR (lkey) */
	uint8_t *src;		/* size bytes of pattern src_tag */
	uint8_t *land;		/* window read landing slots */
	uint8_t *rslot;		/* rwindow receive slots */
	uint32_t lkey;
	uint32_t src_tag;

	/* the peer's memory */
	uint64_t rw_addr;	/* window write slots */
	uint64_t rr_addr;	/* size bytes of pattern rd_tag */
	uint32_t rkey;
	uint32_t rd_tag;
	uint32_t peer_src_tag;	/* what our receives must hold */

	/* state */
	bool posting;		/* keep the windows full */
	bool polling;		/* the CQ still answers */
	uint64_t next, done;	/* send sequence numbers */
	uint64_t rnext, rdone;	/* receive sequence numbers */
	uint64_t ok, rok;	/* successful sends / receives */
	uint64_t wc_errs;	/* error completions seen */
	int err_ok;		/* bitmask (1 << status) allowed as first error */
	int first_err;		/* -1 none; else its status */
	uint64_t first_err_seq;
	double first_err_at;	/* vp_now() when it was polled; 0 none */
	int hard_err;		/* -1 none; else the first send status other
				 * than WR_FLUSH_ERR */
	int rhard_err;		/* ... receive status */
	int post_err;		/* first ibv_post_* error, 0 none */
	int poll_err;		/* errno of a failed ibv_poll_cq, 0 none */
	uint64_t late_bytes;	/* successful data holding a marker byte */
	uint8_t late_marker;	/* 0 none, else the byte written after dereg */
	bool land_unchecked;	/* our landing memory was overwritten since */
};

/*
 * Lay out one side's MR for streams (units of size bytes):
 *   [src][land x W][recv x R][write target x W][read area]
 * Returns the bytes needed.
 */
size_t st_side_len(uint32_t size, int window, int rwindow);

/*
 * Set up stream @s on @e from the side buffer @mine towards the peer side
 * buffer @peer (both laid out as above, both registered); @tag is ours,
 * @peer_tag the peer's.  Fills our source and read-area patterns.
 */
void st_init(struct st_stream *s, const char *name, struct vp_ep *e,
	     struct vp_buf *mine, uint32_t tag, const struct vp_buf *peer,
	     uint32_t peer_tag, uint32_t size, int window, int rwindow, int ops);

/* Write target area of side buffer @b: every byte 0 or @peer_tag's src pattern. */
long st_check_target(const struct vp_buf *b, uint32_t size, int window,
		     int rwindow, uint32_t peer_tag);

/* Keep the windows full (if posting). Returns the post error or 0. */
int st_fill(struct st_stream *s);
/* Poll the CQ once (up to 16); returns completions handled, -1 on poll error. */
int st_poll(struct st_stream *s);
/* Sends and receives still outstanding. */
uint64_t st_outstanding(const struct st_stream *s);
/* Poll (no new posts) until nothing is outstanding or @timeout_s passed; 0 or -1. */
int st_drain(struct st_stream *s, double timeout_s);
/*
 * The same for the sends only: posted receives wait for the peer's sends,
 * which stop when the peer stops posting.
 */
int st_drain_sends(struct st_stream *s, double timeout_s);

#endif /* MBCF_STREAM_H */
