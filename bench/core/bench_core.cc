// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
// Frames per second per core processed by the protocol core alone, for
// remote-write frames of 64 B and 1440 B payload, against plain memcpy of
// the same payload on the same core.
//
//   BM_RxWrite: parse + in-order acceptance + target write (a memcpy into
//               target memory, as the module's callback does) + an ACK
//               every 64 frames: the responder's receive path per frame.
//   BM_TxWrite: post one single-frame WRITE + build its header + hand it to
//               xmit (which gathers nothing) + ACK processing and completion
//               every window/2 frames: the requester's send path per frame.
//   BM_Memcpy:  memcpy of the payload alone (64-byte aligned source).
//   BM_MemcpyFrame: the same from a frame's payload offset.
//   BM_MemcpyRing: the very copies BM_RxWrite makes (eight frames in turn).
#include <benchmark/benchmark.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

extern "C" {
#include <mbcf/core.h>
}

namespace {

constexpr uint32_t kTarget = 1 << 20;	// rotate through 1 MiB: mostly in L2/L3
alignas(64) uint8_t g_target[kTarget];
alignas(64) uint8_t g_src[9000];
uint8_t g_last_hdr[MBCF_HDR_MAX];
uint64_t g_xmits;

int b_xmit(void *, const u8 *hdr, u32 hl, const mbcf_payload *)
{
	memcpy(g_last_hdr, hdr, hl);
	g_xmits++;
	return 0;
}

int b_write(void *, u32, u64 va, const u8 *src, u32 len)
{
	memcpy(g_target + (va & (kTarget - 1)), src, len);
	return 0;
}

int b_check(void *, u32, u64, u32) { return 0; }
int b_atomic(void *, u8, u32, u64, u64, u64, u64 *o) { *o = 0; return 0; }
int b_claim(void *, u64 *c, u32 *cap) { *c = 1; *cap = 1 << 20; return 0; }
int b_rwrite(void *, u64, u32, const u8 *, u32) { return 0; }
int b_resp(void *, u64, u32, const u8 *, u32) { return 0; }
uint64_t g_completions;
int b_complete(void *, const mbcf_cqe *) { g_completions++; return 0; }
void b_timer(void *, u64) {}
void b_error(void *, u8) {}
int b_local(void *, u64) { return MBCF_WC_SUCCESS; }
int b_inval(void *, u32) { return MBCF_ST_OK; }

const mbcf_ops kOps = {
	.xmit = b_xmit,
	.target_write = b_write,
	.target_check_write = b_check,
	.target_check_read = b_check,
	.target_atomic = b_atomic,
	.recv_claim = b_claim,
	.recv_write = b_rwrite,
	.resp_data = b_resp,
	.complete = b_complete,
	.timer = b_timer,
	.error = b_error,
	.local = b_local,
	.invalidate = b_inval,
};

mbcf_conn_cfg cfg(uint32_t l, uint32_t r)
{
	mbcf_conn_cfg c{};
	c.local_qpn = l;
	c.remote_qpn = r;
	c.mtu = 1500;
	c.window = 256;
	c.retry_cnt = 7;
	c.rnr_retry = 7;
	c.max_rd_atomic = 16;
	c.max_dest_rd_atomic = 16;
	c.rto_ns = 1000000;
	c.min_rnr_ns = 10000;
	return c;
}

// The frames of BM_RxWrite arrive through a ring, as from a NIC: each is
// written kRing / 2 frames before it is parsed.  Written just before, its
// header's psn and va, stored a byte at a time, would stall parsing's
// 4- and 8-byte loads on the store buffer: a cost of the benchmark, not
// of the receive path (a received frame was written long before).  Eight
// frames, so that their payloads stay in L1 like BM_MemcpyFrame's source.
constexpr uint32_t kRing = 8;

// Bytes between the ring's frames: header room and payload, cache-line aligned.
uint32_t rx_ring_stride(uint32_t len)
{
	return (MBCF_HDR_MAX + len + 63) & ~63u;
}

void rx_frame_fill(uint8_t *fr, uint32_t psn)
{
	fr[MBCF_OFF_FLAGS] = MBCF_F_FIRST | MBCF_F_LAST |
			     ((psn & 63) == 63 ? MBCF_F_ACKREQ : 0);
	mbcf_put_be32(fr + MBCF_OFF_PSN, psn);
	mbcf_put_be64(fr + MBCF_OFF_VA, ((uint64_t)psn * 2048) & (kTarget - 1));
}

void BM_RxWrite(benchmark::State &st)
{
	const uint32_t len = (uint32_t)st.range(0);
	static mbcf_msg req[64], resp[16];
	mbcf_conn c;
	mbcf_conn_cfg k = cfg(2, 1);
	mbcf_frame f{};
	uint32_t psn = 0, hl, stride;

	mbcf_conn_init(&c, &k, &kOps, nullptr, req, 64, resp, 16);
	f.op = MBCF_OP_WRITE;
	f.dst_qpn = 2;
	f.src_qpn = 1;
	f.rkey = 5;
	f.paylen = len;
	stride = rx_ring_stride(len);
	std::vector<uint8_t> ring(stride * kRing);
	for (uint32_t i = 0; i < kRing; i++) {
		hl = mbcf_codec_build(&f, &ring[i * stride]);
		memset(&ring[i * stride + hl], 0x5a, len);
	}
	for (uint32_t i = 0; i < kRing / 2; i++)
		rx_frame_fill(&ring[i * stride], i);
	for (auto _ : st) {
		// the environment's part: a frame arrives (only psn/va/flags
		// differ), and a later one is written into the ring
		uint32_t slot = psn % kRing;
		uint32_t ahead = (psn + kRing / 2) & MBCF_PSN_MASK;

		rx_frame_fill(&ring[(ahead % kRing) * stride], ahead);
		// the core's part
		mbcf_frame in;
		if (mbcf_codec_parse(&ring[slot * stride], hl + len, &in, &c.ctr))
			st.SkipWithError("parse");
		mbcf_conn_rx(&c, &in, 0);
		psn = (psn + 1) & MBCF_PSN_MASK;
	}
	if (c.ctr.drop_out_of_seq || c.ctr.drop_duplicate || c.state != MBCF_CONN_RTS)
		st.SkipWithError("frames were dropped");
	st.SetItemsProcessed(st.iterations());
	st.SetBytesProcessed(st.iterations() * (int64_t)len);
	st.counters["acks"] = (double)c.ctr.acks_tx;
}

void BM_TxWrite(benchmark::State &st)
{
	const uint32_t len = (uint32_t)st.range(0);
	static mbcf_msg req[512], resp[16];
	mbcf_conn c;
	mbcf_conn_cfg k = cfg(1, 2);
	mbcf_frame ack{};
	uint8_t ab[MBCF_HDR_MAX];
	mbcf_wr w{};
	uint64_t n = 0;

	mbcf_conn_init(&c, &k, &kOps, nullptr, req, 512, resp, 16);
	w.op = MBCF_OP_WRITE;
	w.len = len;
	w.rkey = 5;
	ack.op = MBCF_OP_ACK;
	ack.dst_qpn = 1;
	ack.src_qpn = 2;
	for (auto _ : st) {
		w.cookie = n;
		w.raddr = (n * 2048) & (kTarget - 1);
		if (mbcf_conn_post(&c, &w, 0))
			st.SkipWithError("post");
		n++;
		// the peer acknowledges every half window, as with ack interval 0
		if ((n & 127) == 0) {
			ack.ack_psn = c.snd_max;
			u32 hl = mbcf_codec_build(&ack, ab);
			mbcf_frame in;
			mbcf_codec_parse(ab, hl, &in, nullptr);
			mbcf_conn_rx(&c, &in, 0);
		}
	}
	st.SetItemsProcessed(st.iterations());
	st.SetBytesProcessed(st.iterations() * (int64_t)len);
	st.counters["completions"] = (double)g_completions;
}

// memcpy of len bytes into the rotating target, per iteration, from n
// sources stride bytes apart, in turn (n = 1: always src).
void copy_loop(benchmark::State &st, const uint8_t *src, uint32_t len,
	       uint32_t stride = 0, uint32_t n = 1)
{
	uint64_t va = 0;
	uint32_t k = 0;

	for (auto _ : st) {
		memcpy(g_target + va, src + (size_t)k * stride, len);
		benchmark::ClobberMemory();
		va = (va + 2048) & (kTarget - 1);
		k = k + 1 == n ? 0 : k + 1;
	}
	st.SetItemsProcessed(st.iterations());
	st.SetBytesProcessed(st.iterations() * (int64_t)len);
}

void BM_Memcpy(benchmark::State &st)
{
	copy_loop(st, g_src, (uint32_t)st.range(0));
}

// The same copy from where a received WRITE's payload sits: behind the
// 36-byte header, so 4 bytes off a 16-byte boundary (as in BM_RxWrite, and
// as in a NIC buffer: 14 + 36 bytes of headers after a 2-byte pad).
void BM_MemcpyFrame(benchmark::State &st)
{
	const uint32_t len = (uint32_t)st.range(0);
	std::vector<uint8_t> fr(MBCF_HDR_MAX + len, 0x5a);

	copy_loop(st, fr.data() + mbcf_codec_hdr_len(MBCF_OP_WRITE), len);
}

// The very copies BM_RxWrite's target writes make: from each of the
// ring's eight frames in turn (behind its header) into the rotating target.
void BM_MemcpyRing(benchmark::State &st)
{
	const uint32_t len = (uint32_t)st.range(0);
	const uint32_t stride = rx_ring_stride(len);
	std::vector<uint8_t> ring(stride * kRing, 0x5a);

	copy_loop(st, ring.data() + mbcf_codec_hdr_len(MBCF_OP_WRITE), len, stride, kRing);
}

}  // namespace

// MBCF_BENCH_ITERATIONS=N: every benchmark runs exactly N iterations
// (instead of as many as fill the minimum time), so that a run under
// callgrind counts the same instructions every time (bench/callgrind-core.sh).
int main(int argc, char **argv)
{
	static const struct {
		const char *name;
		void (*fn)(benchmark::State &);
	} all[] = {
		{"BM_RxWrite", BM_RxWrite},
		{"BM_TxWrite", BM_TxWrite},
		{"BM_Memcpy", BM_Memcpy},
		{"BM_MemcpyFrame", BM_MemcpyFrame},
		{"BM_MemcpyRing", BM_MemcpyRing},
	};
	const char *it = getenv("MBCF_BENCH_ITERATIONS");
	long long n = it ? atoll(it) : 0;

	if (it && n <= 0) {
		fprintf(stderr, "MBCF_BENCH_ITERATIONS: not a positive count: %s\n", it);
		return 2;
	}
	for (const auto &b : all) {
		benchmark::internal::Benchmark *r = benchmark::RegisterBenchmark(b.name, b.fn);
		r->Arg(64)->Arg(1440);
		if (n)
			r->Iterations(n);
	}
	benchmark::Initialize(&argc, argv);
	if (benchmark::ReportUnrecognizedArguments(argc, argv))
		return 1;
	benchmark::RunSpecifiedBenchmarks();
	benchmark::Shutdown();
	return 0;
}
