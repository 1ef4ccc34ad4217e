// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * libFuzzer target for the frame parser and the receive path.
 *
 * 1. The whole input is parsed as one frame.  When it parses, building the
 *    header back from the parsed fields must give the same bytes (reserved
 *    fields excepted), and the payload must lie inside the input.
 * 2. The input is then read as records [len_hi len_lo bytes...] and each
 *    record is fed as a frame to a fresh connection (qpn 0 <-> 0, psn 0)
 *    whose environment accepts everything: the state machine must survive
 *    any sequence of frames (ASan/UBSan watch it).
 */
#include <stdlib.h>
#include <mbcf/core.h>

static int fz_xmit(void *env, const u8 *hdr, u32 hdr_len,
		   const struct mbcf_payload *pl)
{
	struct mbcf_frame f;

	/* everything we send must parse (payload bytes are not built here) */
	if (pl->len == 0 && mbcf_codec_parse(hdr, hdr_len, &f, NULL) != 0)
		abort();
	return 0;
}

static int fz_target_write(void *env, u32 rkey, u64 va, const u8 *src, u32 len)
{
	return rkey & 1 ? MBCF_ST_REMOTE_ACCESS_ERROR : MBCF_ST_OK;
}

static int fz_check_write(void *env, u32 rkey, u64 va, u32 len)
{
	return rkey & 1 ? MBCF_ST_REMOTE_ACCESS_ERROR : MBCF_ST_OK;
}

static int fz_check_read(void *env, u32 rkey, u64 va, u32 len)
{
	return rkey & 1 ? MBCF_ST_REMOTE_ACCESS_ERROR : MBCF_ST_OK;
}

static int fz_atomic(void *env, u8 op, u32 rkey, u64 va, u64 sa, u64 cmp, u64 *orig)
{
	*orig = va ^ sa;
	return rkey & 1 ? MBCF_ST_REMOTE_ACCESS_ERROR : MBCF_ST_OK;
}

static int fz_claim(void *env, u64 *cookie, u32 *cap)
{
	static unsigned int n;

	*cookie = ++n;
	*cap = 4096;
	if (n % 13 == 0)
		return MBCF_CLAIM_BAD;	/* sometimes a broken receive queue */
	return n % 5 == 0 ? MBCF_CLAIM_NONE : MBCF_CLAIM_OK;	/* STOP */
}

static int fz_recv_write(void *env, u64 cookie, u32 off, const u8 *src, u32 len)
{
	if (off + len > 4096)
		abort();	/* the core must have checked the capacity */
	return cookie % 7 == 0;	/* sometimes a local protection error */
}

static int fz_resp(void *env, u64 cookie, u32 off, const u8 *src, u32 len)
{
	return 0;
}

static int fz_complete(void *env, const struct mbcf_cqe *cqe)
{
	return cqe->cookie % 11 == 0;	/* sometimes an overrun */
}
static void fz_timer(void *env, u64 at) {}
static int fz_local(void *env, u64 cookie) { return MBCF_WC_SUCCESS; }

static int fz_invalidate(void *env, u32 rkey)
{
	return rkey & 1 ? MBCF_ST_REMOTE_INVALID_REQUEST : MBCF_ST_OK;
}
static void fz_error(void *env, u8 st) {}

static const struct mbcf_ops fz_ops = {
	.xmit = fz_xmit,
	.target_write = fz_target_write,
	.target_check_write = fz_check_write,
	.target_check_read = fz_check_read,
	.target_atomic = fz_atomic,
	.recv_claim = fz_claim,
	.recv_write = fz_recv_write,
	.resp_data = fz_resp,
	.complete = fz_complete,
	.timer = fz_timer,
	.error = fz_error,
	.local = fz_local,
	.invalidate = fz_invalidate,
};

static void fz_roundtrip(const u8 *data, size_t size)
{
	struct mbcf_frame f;
	u8 hdr[MBCF_HDR_MAX];
	u32 hl, i;

	if (mbcf_codec_parse(data, (u32)size, &f, NULL) != MBCF_PARSE_OK)
		return;
	if (f.payload < data || f.payload + f.paylen > data + size)
		abort();
	hl = mbcf_codec_build(&f, hdr);
	if (hl != f.hdr_len)
		abort();
	for (i = 0; i < hl; i++) {
		/* reserved words of the atomic headers are ignored on receive */
		if ((f.op == MBCF_OP_CMP_SWAP || f.op == MBCF_OP_FETCH_ADD) &&
		    i >= 36 && i < 40)
			continue;
		if (f.op == MBCF_OP_ATOMIC_RESP && i >= 28 && i < 32)
			continue;
		if (f.op == MBCF_OP_LOST && i >= 28 && i < 32)
			continue;	/* after seen, reserved */
		if (f.op == MBCF_OP_DGRAM && i >= 37 && i < 40)
			continue;	/* after hop_limit, reserved */
		if (hdr[i] != data[i])
			abort();
	}
}

static void fz_conn(const u8 *data, size_t size)
{
	static struct mbcf_msg req[8], resp[4];
	struct mbcf_conn_cfg cfg = {
		.mtu = 1500, .window = 8, .retry_cnt = 2, .rnr_retry = 2,
		.max_rd_atomic = 2, .max_dest_rd_atomic = 4,
		.rto_ns = 1000, .min_rnr_ns = 100,
	};
	struct mbcf_conn c;
	struct mbcf_wr wr = { .cookie = 1, .op = MBCF_OP_READ_REQ, .len = 3000 };
	struct mbcf_frame f;
	u64 now = 1;

	/* the same frames against a reliable and an unreliable connection */
	cfg.uc = size && (data[0] & 0x80);
	if (mbcf_conn_init(&c, &cfg, &fz_ops, NULL, req, 8, resp, 4))
		abort();
	/* something outstanding, so that ACKs and responses have a target */
	mbcf_conn_post(&c, &wr, now);
	wr.op = MBCF_OP_FETCH_ADD;
	mbcf_conn_post(&c, &wr, now);
	wr.op = MBCF_OP_LOCAL;
	wr.flags = MBCF_WR_FENCE_ALL;
	mbcf_conn_post(&c, &wr, now);
	wr.op = MBCF_OP_SEND_INV;
	wr.flags = 0;
	mbcf_conn_post(&c, &wr, now);
	while (size >= 2) {
		size_t n = (size_t)data[0] << 8 | data[1];

		data += 2;
		size -= 2;
		if (n > size)
			n = size;
		if (mbcf_codec_parse(data, (u32)n, &f, &c.ctr) == MBCF_PARSE_OK)
			mbcf_conn_rx(&c, &f, now);
		now += 500;
		if (n & 1)
			mbcf_conn_timeout(&c, now);
		data += n;
		size -= n;
	}
	mbcf_conn_flush(&c);
	if (mbcf_conn_outstanding(&c))
		abort();
}

int LLVMFuzzerTestOneInput(const u8 *data, size_t size);

int LLVMFuzzerTestOneInput(const u8 *data, size_t size)
{
	fz_roundtrip(data, size);
	fz_conn(data, size);
	return 0;
}
