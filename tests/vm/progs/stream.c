// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * A checked traffic stream on one RC QP; see stream.h.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "stream.h"

size_t st_side_len(uint32_t size, int window, int rwindow)
{
	return (size_t)size * (size_t)(2 + 2 * window + rwindow);
}

static size_t off_land(uint32_t size) { return size; }
static size_t off_recv(uint32_t size, int w) { return (size_t)size * (1 + w); }
static size_t off_target(uint32_t size, int w, int r) { return (size_t)size * (1 + w + r); }
static size_t off_read(uint32_t size, int w, int r) { return (size_t)size * (1 + 2 * w + r); }

void st_init(struct st_stream *s, const char *name, struct vp_ep *e,
	     struct vp_buf *mine, uint32_t tag, const struct vp_buf *peer,
	     uint32_t peer_tag, uint32_t size, int window, int rwindow, int ops)
{
	memset(s, 0, sizeof(*s));
	snprintf(s->name, sizeof(s->name), "%s", name);
	s->e = e;
	s->size = size;
	s->window = window > ST_MAX_WIN ? ST_MAX_WIN : window;
	s->rwindow = rwindow > ST_MAX_WIN ? ST_MAX_WIN : rwindow;
	s->ops = ops;
	s->src = mine->p;
	s->land = mine->p + off_land(size);
	s->rslot = mine->p + off_recv(size, s->window);
	s->lkey = mine->mr->lkey;
	s->src_tag = tag;
	s->rw_addr = (uintptr_t)peer->p + off_target(size, s->window, s->rwindow);
	s->rr_addr = (uintptr_t)peer->p + off_read(size, s->window, s->rwindow);
	s->rkey = peer->mr->rkey;
	s->rd_tag = peer_tag ^ 0xabcu;
	s->peer_src_tag = peer_tag;
	s->posting = true;
	s->polling = true;
	s->first_err = -1;
	s->hard_err = -1;
	s->rhard_err = -1;
	vp_fill_pat(s->src, size, tag, 0);
	vp_fill_pat(mine->p + off_read(size, s->window, s->rwindow), size,
		    tag ^ 0xabcu, 0);
}

long st_check_target(const struct vp_buf *b, uint32_t size, int window,
		     int rwindow, uint32_t peer_tag)
{
	const uint8_t *t = b->p + off_target(size, window, rwindow);
	size_t i;

	for (i = 0; i < (size_t)size * (size_t)window; i++)
		if (t[i] && t[i] != vp_pat(peer_tag, i % size))
			return (long)i;
	return -1;
}

/* The operation of send sequence number @seq: cycle through the mask. */
static enum ibv_wr_opcode st_op(const struct st_stream *s, uint64_t seq)
{
	static const int order[3] = { ST_WRITE, ST_READ, ST_SEND };
	int n = 0, i, pick[3];

	for (i = 0; i < 3; i++)
		if (s->ops & order[i])
			pick[n++] = order[i];
	switch (pick[seq % (uint64_t)n]) {
	case ST_READ:
		return IBV_WR_RDMA_READ;
	case ST_SEND:
		return IBV_WR_SEND;
	default:
		return IBV_WR_RDMA_WRITE;
	}
}

static int st_post_one(struct st_stream *s)
{
	uint64_t seq = s->next;
	uint32_t slot = (uint32_t)(seq % (uint64_t)s->window);
	enum ibv_wr_opcode op = st_op(s, seq);
	int err;

	if (op == IBV_WR_RDMA_READ)
		err = vp_post_rdma(s->e, op, s->land + (size_t)slot * s->size,
				   s->size, s->lkey, s->rr_addr, s->rkey, seq);
	else if (op == IBV_WR_SEND)
		err = vp_post_send(s->e, s->src, s->size, s->lkey, seq);
	else
		err = vp_post_rdma(s->e, op, s->src, s->size, s->lkey,
				   s->rw_addr + (uint64_t)slot * s->size, s->rkey, seq);
	if (!err)
		s->next++;
	return err;
}

static int st_post_recv_one(struct st_stream *s)
{
	uint32_t slot = (uint32_t)(s->rnext % (uint64_t)s->rwindow);
	int err = vp_post_recv(s->e, s->rslot + (size_t)slot * s->size, s->size,
			       s->lkey, ST_RECV_FLAG | s->rnext);

	if (!err)
		s->rnext++;
	return err;
}

int st_fill(struct st_stream *s)
{
	int err = 0;

	if (!s->posting || s->first_err >= 0 || s->post_err)
		return 0;
	while (!err && s->rwindow && s->rnext - s->rdone < (uint64_t)s->rwindow)
		err = st_post_recv_one(s);
	while (!err && s->next - s->done < (uint64_t)s->window)
		err = st_post_one(s);
	if (err)
		s->post_err = err;
	return err;
}

uint64_t st_outstanding(const struct st_stream *s)
{
	return (s->next - s->done) + (s->rnext - s->rdone);
}

/* Status rules shared by sends and receives. */
static void st_status(struct st_stream *s, const struct ibv_wc *wc, uint64_t seq)
{
	bool recv = wc->wr_id & ST_RECV_FLAG;
	int *hard = recv ? &s->rhard_err : &s->hard_err;

	if (wc->status == IBV_WC_SUCCESS) {
		if (s->first_err >= 0)
			vp_fail("%s: wr %llu SUCCESS after the error of wr %llu",
				s->name, (unsigned long long)seq,
				(unsigned long long)s->first_err_seq);
		return;
	}
	s->wc_errs++;
	/*
	 * One error per work queue, in posting order: flushes may come
	 * before it (earlier requests still unfinished when a later one
	 * failed, where err_ok allows that) and after it, but never a second
	 * error.  Per queue: a QP may fail on both sides at once -- its
	 * receive hit an MR that was gone while the peer NAKed one of its
	 * sends -- and each queue then reports what failed in it (the
	 * receive completes with its own error: docs/protocol.md 8.3).
	 */
	if (wc->status != IBV_WC_WR_FLUSH_ERR && *hard < 0) {
		*hard = wc->status;
		if (s->first_err < 0) {
			s->first_err = wc->status;
			s->first_err_seq = seq;
			s->first_err_at = vp_now();
		}
		vp_check(s->err_ok & (1 << wc->status),
			 "%s: wr %s%llu completed with %s (not expected here)",
			 s->name, recv ? "recv " : "",
			 (unsigned long long)seq, vp_wc_status_str(wc->status));
		return;
	}
	if (wc->status == IBV_WC_WR_FLUSH_ERR) {
		vp_check(s->first_err >= 0 || (s->err_ok & (1 << IBV_WC_WR_FLUSH_ERR)),
			 "%s: wr %llu flushed with no error before", s->name,
			 (unsigned long long)seq);
		if (s->first_err < 0) {
			s->first_err = wc->status;
			s->first_err_seq = seq;
			s->first_err_at = vp_now();
		}
		return;
	}
	vp_fail("%s: wr %s%llu completed with %s after %s", s->name,
		recv ? "recv " : "", (unsigned long long)seq,
		vp_wc_status_str(wc->status), vp_wc_status_str(*hard));
}

/* Count successful bytes holding the marker written after a dereg. */
static void st_late(struct st_stream *s, const uint8_t *p)
{
	uint32_t i;

	if (!s->late_marker)
		return;
	for (i = 0; i < s->size; i++)
		s->late_bytes += p[i] == s->late_marker;
}

static void st_on_send(struct st_stream *s, const struct ibv_wc *wc)
{
	uint64_t seq = wc->wr_id;
	const uint8_t *land;
	long d;

	if (s->post_err && seq == s->next) {
		/* verbs: a request whose post failed never completes */
		vp_fail("%s: completion (%s) for wr %llu, whose ibv_post_send failed with %s",
			s->name, vp_wc_status_str(wc->status), (unsigned long long)seq,
			strerror(s->post_err));
		return;
	}
	if (!vp_check(seq == s->done && s->done < s->next,
		      "%s: completion for wr %llu, expected wr %llu (posted %llu)",
		      s->name, (unsigned long long)seq,
		      (unsigned long long)s->done, (unsigned long long)s->next))
		return;
	s->done++;
	st_status(s, wc, seq);
	if (wc->status != IBV_WC_SUCCESS)
		return;
	s->ok++;
	if (st_op(s, seq) != IBV_WR_RDMA_READ)
		return;
	if (s->land_unchecked)
		return;		/* a read that landed before dereg, polled after */
	land = s->land + (size_t)(seq % (uint64_t)s->window) * s->size;
	st_late(s, land);
	d = vp_diff_pat(land, s->size, s->rd_tag, 0);
	vp_check(d < 0, "%s: read %llu returned %#x at byte %ld, expected %#x",
		 s->name, (unsigned long long)seq, d < 0 ? 0 : land[d], d,
		 vp_pat(s->rd_tag, d < 0 ? 0 : (size_t)d));
}

static void st_on_recv(struct st_stream *s, const struct ibv_wc *wc)
{
	uint64_t seq = wc->wr_id & ~ST_RECV_FLAG;
	const uint8_t *p;
	long d;

	if (s->post_err && seq == s->rnext) {
		vp_fail("%s: completion (%s) for receive %llu, whose ibv_post_recv failed with %s",
			s->name, vp_wc_status_str(wc->status), (unsigned long long)seq,
			strerror(s->post_err));
		return;
	}
	if (!vp_check(seq == s->rdone && s->rdone < s->rnext,
		      "%s: receive completion %llu, expected %llu (posted %llu)",
		      s->name, (unsigned long long)seq,
		      (unsigned long long)s->rdone, (unsigned long long)s->rnext))
		return;
	s->rdone++;
	st_status(s, wc, seq);
	if (wc->status != IBV_WC_SUCCESS)
		return;
	s->rok++;
	p = s->rslot + (size_t)(seq % (uint64_t)s->rwindow) * s->size;
	vp_check(wc->byte_len == s->size, "%s: receive %llu byte_len %u, expected %u",
		 s->name, (unsigned long long)seq, wc->byte_len, s->size);
	st_late(s, p);
	d = vp_diff_pat(p, s->size, s->peer_src_tag, 0);
	vp_check(d < 0, "%s: receive %llu holds %#x at byte %ld", s->name,
		 (unsigned long long)seq, d < 0 ? 0 : p[d], d);
}

int st_poll(struct st_stream *s)
{
	struct ibv_wc wc[16];
	int n, i;

	if (!s->polling)
		return 0;
	n = ibv_poll_cq(s->e->cq, 16, wc);
	if (n < 0) {
		s->poll_err = errno;
		s->polling = false;
		return -1;
	}
	for (i = 0; i < n; i++) {
		if (wc[i].wr_id & ST_RECV_FLAG)
			st_on_recv(s, &wc[i]);
		else
			st_on_send(s, &wc[i]);
	}
	return n;
}

int st_drain(struct st_stream *s, double timeout_s)
{
	double end = vp_now() + timeout_s;

	while (st_outstanding(s)) {
		if (st_poll(s) < 0)
			return -1;
		if (vp_now() > end)
			return -1;
	}
	return 0;
}

int st_drain_sends(struct st_stream *s, double timeout_s)
{
	double end = vp_now() + timeout_s;

	while (s->next != s->done) {
		if (st_poll(s) < 0 || vp_now() > end)
			return -1;
	}
	return 0;
}
