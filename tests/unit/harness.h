// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
// A fake environment for the protocol core: target memory with keys and
// access flags, posted receives, local buffers per work request, a captured
// transmit queue, a fake clock and timer.  Shared by the unit tests.
#pragma once

#include <cstdint>
#include <cstring>
#include <deque>
#include <map>
#include <vector>

extern "C" {
#include <mbcf/core.h>
#include <mbcf/fifo.h>
#include <mbcf/seq.h>
}

namespace mbcft {

enum Access : uint32_t { ACC_WRITE = 1, ACC_READ = 2, ACC_ATOMIC = 4, ACC_ALL = 7 };

struct Region {
	uint32_t rkey;
	uint64_t base;
	uint32_t access;
	std::vector<uint64_t> words;	// 8-byte aligned backing store
	uint8_t *bytes() { return reinterpret_cast<uint8_t *>(words.data()); }
	uint64_t size() const { return words.size() * 8; }
};

struct Recv {
	uint64_t cookie;
	uint32_t cap;
};

struct Env {
	mbcf_conn conn{};
	std::vector<mbcf_msg> req_ring, resp_ring;
	std::vector<Region> regions;
	std::map<uint64_t, std::vector<uint8_t>> local;	// wr cookie -> buffer
	std::deque<Recv> recvs;
	std::map<uint64_t, std::vector<uint8_t>> recv_buf;	// recv cookie -> data
	std::vector<mbcf_cqe> cqes;	// requester completions
	std::vector<mbcf_cqe> rcqes;	// receive completions
	std::vector<mbcf_cqe> allcqes;	// both, in the order they were made
	std::deque<std::vector<uint8_t>> out;	// frames sent, bytes after Ethernet
	uint64_t timer_at = 0;
	int timer_calls = 0;
	int errors = 0;
	uint8_t error_status = 0;
	int busy = 0;		// xmit returns busy this many times
	uint64_t fault_cookie = 0;	// xmit of this wr's data: MBCF_XMIT_FAULT
	int target_frames = -1;	// read response frames xmit builds before
				// their target memory is gone (-1: no limit)
	bool claim_bad = false;	// recv_claim reports a malformed receive queue
	int64_t recv_write_fail_at = -1;	// recv_write fails past this offset
	int64_t cq_room = -1;	// completions accepted before complete fails
				// (-1: no limit)
	std::map<uint64_t, uint8_t> local_status;	// MBCF_OP_LOCAL cookie -> wc status
	std::vector<uint64_t> locals_run;	// cookies, in the order carried out
	std::vector<uint32_t> inv_keys;		// keys SEND_INV may invalidate
	std::vector<uint32_t> invalidated;	// keys it did
	int target_writes = 0, atomics = 0, flushes = 0;
	mbcf_counters dev_ctr{};	// parse drops
	// one FIFO (docs/protocol.md 16) under fifo_key (0: none): its
	// control block, then the record area, in fifo_mem
	uint32_t fifo_key = 0, fifo_size = 0, fifo_flags = 0;
	std::vector<uint64_t> fifo_mem;
	int fifo_gets = 0, fifo_puts = 0;

	void add_fifo(uint32_t key, uint32_t size, uint32_t flags = 0)
	{
		fifo_key = key;
		fifo_size = size;
		fifo_flags = flags;
		fifo_mem.assign((MBCF_FIFO_CTRL_LEN + size) / 8, 0);
	}
	uint8_t *fifo_ctrl() { return reinterpret_cast<uint8_t *>(fifo_mem.data()); }
	uint8_t *fifo_area() { return fifo_ctrl() + MBCF_FIFO_CTRL_LEN; }
	uint64_t &fifo_u64(uint32_t off) { return *reinterpret_cast<uint64_t *>(fifo_ctrl() + off); }

	void add_region(uint32_t rkey, uint64_t base, uint64_t size, uint32_t access)
	{
		Region r{rkey, base, access, std::vector<uint64_t>((size + 7) / 8)};
		regions.push_back(std::move(r));
	}

	Region *find(uint32_t rkey, uint64_t va, uint64_t len, uint32_t need, int *st)
	{
		for (auto &r : regions) {
			if (r.rkey != rkey)
				continue;
			if (!(r.access & need) || va < r.base ||
			    va - r.base > r.size() || len > r.size() - (va - r.base)) {
				*st = MBCF_ST_REMOTE_ACCESS_ERROR;
				return nullptr;
			}
			*st = MBCF_ST_OK;
			return &r;
		}
		*st = MBCF_ST_REMOTE_ACCESS_ERROR;
		return nullptr;
	}

	uint8_t *target(uint32_t rkey, uint64_t va)
	{
		int st;
		Region *r = find(rkey, va, 0, ACC_ALL, &st);
		return r ? r->bytes() + (va - r->base) : nullptr;
	}

	int init(const mbcf_conn_cfg &cfg, uint32_t req = 64, uint32_t resp = 16);
};

extern const mbcf_ops kOps;

inline int Env::init(const mbcf_conn_cfg &cfg, uint32_t req, uint32_t resp)
{
	req_ring.assign(req, mbcf_msg{});
	resp_ring.assign(resp, mbcf_msg{});
	return mbcf_conn_init(&conn, &cfg, &kOps, this, req_ring.data(), req,
			      resp_ring.data(), resp);
}

inline mbcf_conn_cfg default_cfg(uint32_t lqpn, uint32_t rqpn, uint32_t sq_psn = 100,
				 uint32_t rq_psn = 200)
{
	mbcf_conn_cfg c{};
	c.local_qpn = lqpn;
	c.remote_qpn = rqpn;
	c.sq_psn = sq_psn;
	c.rq_psn = rq_psn;
	c.mtu = 1500;
	c.window = 16;
	c.retry_cnt = 3;
	c.rnr_retry = 3;
	c.max_rd_atomic = 4;
	c.max_dest_rd_atomic = 4;
	c.rto_ns = 1000000;
	c.min_rnr_ns = 100000;
	return c;
}

// Parse a captured frame; the test fails loudly elsewhere if it does not.
inline bool parse(const std::vector<uint8_t> &b, mbcf_frame *f, mbcf_counters *ctr = nullptr)
{
	return mbcf_codec_parse(b.data(), (uint32_t)b.size(), f, ctr) == MBCF_PARSE_OK;
}

// rx_frames minus every receive verdict counter, over e's device and
// connection counters: 0 when each frame that entered the receive path got
// exactly one verdict (include/mbcf/counters.h).  Listed here on purpose,
// not derived from the header: a new verdict must be added to both.
inline int64_t rx_unaccounted(const Env &e)
{
	mbcf_counters s{};

	mbcf_counters_add(&s, &e.conn.ctr);
	mbcf_counters_add(&s, &e.dev_ctr);
	uint64_t v = s.rx_accepted + s.acks_rx + s.naks_rx + s.lost_rx + s.stop_rx +
		     s.go_rx + s.remote_errors + s.drop_nomem + s.drop_malformed +
		     s.drop_truncated + s.drop_bad_version + s.drop_bad_opcode +
		     s.drop_bad_length + s.drop_wrong_qp + s.drop_out_of_seq +
		     s.drop_duplicate + s.drop_stopped + s.drop_error_state +
		     s.drop_bad_ack + s.drop_bad_resp + s.drop_local_err +
		     s.drop_bad_qkey;
	return (int64_t)s.rx_frames - (int64_t)v;
}

// Deliver one frame's bytes to an environment's connection; like the
// module's receive path, count it in before anything else looks at it.
inline int deliver(Env &to, const std::vector<uint8_t> &b, uint64_t now)
{
	mbcf_frame f;
	int err;

	to.dev_ctr.rx_frames++;
	err = mbcf_codec_parse(b.data(), (uint32_t)b.size(), &f, &to.dev_ctr);

	if (err == MBCF_PARSE_OK)
		mbcf_conn_rx(&to.conn, &f, now);
	return err;
}

// Deliver one frame with its payload cut into pieces (1 byte, then the rest
// halved), each in its own allocation, as a non-linear packet buffer hands
// it over: only the header is contiguous (mbcf_codec_parse_split).
inline int deliver_split(Env &to, const std::vector<uint8_t> &b, uint64_t now)
{
	uint32_t hl = b.size() > 1 ? mbcf_codec_hdr_len(b[1]) : 0;
	mbcf_frame f;
	int err = mbcf_codec_parse_split(b.data(), hl, (uint32_t)b.size(), &f,
					 nullptr);

	if (err != MBCF_PARSE_OK || f.payload)
		return deliver(to, b, now);
	to.dev_ctr.rx_frames++;
	std::vector<std::vector<uint8_t>> bufs;
	std::vector<mbcf_iov> iov;
	uint32_t off = f.hdr_len, left = f.paylen;
	for (uint32_t n : {1u, (left - 1) / 2, left - 1 - (left - 1) / 2}) {
		if (!n)
			continue;
		bufs.emplace_back(b.begin() + off, b.begin() + off + n);
		off += n;
	}
	for (auto &v : bufs)
		iov.push_back({v.data(), (uint32_t)v.size()});
	f.iov = iov.data();
	f.niov = (uint32_t)iov.size();
	mbcf_conn_rx(&to.conn, &f, now);
	return err;
}

// Move every frame a has sent to b (in order, no loss); returns the count.
inline int pump(Env &a, Env &b, uint64_t now)
{
	int n = 0;

	while (!a.out.empty()) {
		auto fr = a.out.front();
		a.out.pop_front();
		deliver(b, fr, now);
		n++;
	}
	return n;
}

// Exchange until both sides are quiet.
inline void settle(Env &a, Env &b, uint64_t now)
{
	while (pump(a, b, now) + pump(b, a, now))
		;
}

inline mbcf_wr make_wr(uint64_t cookie, uint8_t op, uint32_t len, uint64_t raddr,
		       uint32_t rkey)
{
	mbcf_wr w{};
	w.cookie = cookie;
	w.op = op;
	w.len = len;
	w.raddr = raddr;
	w.rkey = rkey;
	return w;
}

}  // namespace mbcft
