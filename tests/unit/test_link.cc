// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
// Property test: two connections over a simulated link with seeded loss,
// duplication, reordering, truncation and delay.  Random operation streams
// in both directions must end with target memory, read/atomic results and
// completions exactly as a sequential reference model says; every operation
// completes exactly once, in order.  The seed is printed on failure;
// MBCF_SEED=<n> reruns one stream, MBCF_STREAMS=<n> changes how many run.
#include <gtest/gtest.h>

#include <cstdlib>
#include <queue>
#include <random>

#include "harness.h"

using namespace mbcft;

bool mbcf_op_is_rd_for_test(uint8_t op);

namespace {

// Summed over every stream of a test: proof the impairments were exercised.
mbcf_counters g_total;
long g_access_errors, g_bad_ops;

constexpr uint32_t kRkey = 0x5a5a;
constexpr uint64_t kBase = 0x7f0000100000ull;
constexpr uint32_t kRegion = 32768;
constexpr uint32_t kRecvCap = 8192;

struct Op {
	mbcf_wr wr{};
	std::vector<uint8_t> data;	// WRITE/SEND payload
	std::vector<uint8_t> expect;	// READ data / atomic original (8 bytes)
	bool bad = false;		// violates access: expect REM_ACCESS_ERR
};

struct ExpRecv {
	uint8_t op;
	std::vector<uint8_t> data;	// SEND payload; WRITE_IMM: empty
	uint32_t byte_len;
	uint32_t imm;
	bool has_imm;
};

struct Params {
	double loss, dup, trunc, reorder;
	uint64_t delay, jitter;
	double post_p, recv_p, busy;
};

struct Side {
	Env env;
	std::vector<Op> ops;
	size_t posted = 0;
	std::vector<uint8_t> model;	// this side's target memory as the model sees it
	std::vector<ExpRecv> exp_recv;	// receives the peer's ops will complete here
	size_t recvs_posted = 0;
};

class Gen {
public:
	explicit Gen(std::mt19937_64 &r) : rng(r) {}

	uint64_t u(uint64_t lo, uint64_t hi) { return std::uniform_int_distribution<uint64_t>(lo, hi)(rng); }
	bool p(double x) { return std::uniform_real_distribution<double>(0, 1)(rng) < x; }

	uint32_t length(uint32_t max)
	{
		uint64_t k = u(0, 99);
		uint32_t n = k < 10 ? 0 : k < 55 ? (uint32_t)u(1, 64) : k < 90 ? (uint32_t)u(65, 1600)
									 : (uint32_t)u(1601, 7000);
		return n > max ? max : n;
	}

	std::mt19937_64 &rng;
};

// Fill `me.ops` with n random operations against `peer`'s memory, applying
// them to peer.model in order and recording what every result must be.
void generate(Gen &g, Side &me, Side &peer, int n, uint64_t cookie0, bool with_error)
{
	std::vector<std::pair<uint64_t, uint64_t>> reads;	// since the last fence
	int bad_at = with_error ? (int)g.u(0, n - 1) : -1;

	for (int i = 0; i < n; i++) {
		Op o;
		uint64_t k = g.u(0, 99);
		uint8_t op = k < 30 ? MBCF_OP_WRITE : k < 38 ? MBCF_OP_WRITE_IMM : k < 55 ? MBCF_OP_READ_REQ
			   : k < 65 ? MBCF_OP_CMP_SWAP : k < 75 ? MBCF_OP_FETCH_ADD : k < 90 ? MBCF_OP_SEND
			   : MBCF_OP_SEND_IMM;
		bool atomic = op == MBCF_OP_CMP_SWAP || op == MBCF_OP_FETCH_ADD;
		bool send = op == MBCF_OP_SEND || op == MBCF_OP_SEND_IMM;
		uint32_t len = atomic ? 8 : g.length(send ? kRecvCap : kRegion);
		uint64_t off = atomic ? g.u(0, kRegion / 8 - 1) * 8 : g.u(0, kRegion - len);

		o.wr = make_wr(cookie0 + i, op, len, kBase + off, kRkey);
		o.wr.imm = (uint32_t)g.u(0, 0xffffffff);
		if (g.p(0.1))
			o.wr.flags |= MBCF_F_SOLICITED;
		// zero-length RDMA needs no key check (as in InfiniBand)
		if (i == bad_at && !send && len == 0)
			bad_at++;
		if (i == bad_at && !send) {
			o.bad = true;
			o.wr.rkey = kRkey + 1;
		}
		if (op != MBCF_OP_READ_REQ && !send) {
			for (auto &r : reads)
				if (off < r.second && r.first < off + len)
					o.wr.flags |= MBCF_WR_FENCE;
			if (o.wr.flags & MBCF_WR_FENCE)
				reads.clear();
		}
		uint8_t *mem = peer.model.data() + off;
		if (op == MBCF_OP_WRITE || op == MBCF_OP_WRITE_IMM || send) {
			o.data.resize(len);
			for (auto &b : o.data)
				b = (uint8_t)g.u(0, 255);
		}
		if (o.bad) {
			// a receive is claimed before the write is checked: post one
			if (op == MBCF_OP_WRITE_IMM)
				peer.exp_recv.push_back(ExpRecv{op, {}, len, 0, true});
			me.ops.push_back(std::move(o));
			continue;
		}
		if ((op == MBCF_OP_WRITE || op == MBCF_OP_WRITE_IMM) && len) {
			memcpy(mem, o.data.data(), len);
		} else if (op == MBCF_OP_READ_REQ) {
			o.expect.assign(mem, mem + len);
			reads.emplace_back(off, off + len);
		} else if (atomic) {
			uint64_t cur;
			memcpy(&cur, mem, 8);
			o.wr.compare = g.p(0.5) ? cur : g.u(0, 3);
			o.wr.swap_add = g.u(0, ~0ull);
			uint64_t nv = op == MBCF_OP_FETCH_ADD ? cur + o.wr.swap_add
				    : cur == o.wr.compare ? o.wr.swap_add : cur;
			o.expect.resize(8);
			memcpy(o.expect.data(), &cur, 8);
			memcpy(mem, &nv, 8);
		}
		if (op == MBCF_OP_WRITE_IMM || send) {
			ExpRecv r{op, send ? o.data : std::vector<uint8_t>(), len, o.wr.imm,
				  op != MBCF_OP_SEND};
			peer.exp_recv.push_back(std::move(r));
		}
		me.ops.push_back(std::move(o));
	}
}

struct Frame {
	uint64_t at, seq;
	int to;
	std::vector<uint8_t> bytes;
	bool operator>(const Frame &o) const { return at != o.at ? at > o.at : seq > o.seq; }
};

class Sim {
public:
	Sim(uint64_t seed, bool with_error) : rng(seed), g(rng), with_error(with_error) {}

	void run();

private:
	std::mt19937_64 rng;
	Gen g;
	bool with_error;
	Side s[2];
	Params pr{};
	uint64_t now = 1000000, seq = 0;
	std::priority_queue<Frame, std::vector<Frame>, std::greater<Frame>> link;
	mbcf_rtt_share share{};	// both ends on one device, half the streams
	int bad_side = -1;
	bool trace = getenv("MBCF_TRACE") != nullptr;

	void configure();
	void impair(int from);
	void post_some(int i);
	void post_recvs(int i);
	bool done() const;
	bool step();
	void check_side(int i);
	void check_error_side(int i);
};

void Sim::configure()
{
	static const uint32_t mtus[] = {512, 1024, 1500, 9000};
	mbcf_conn_cfg c[2];
	uint32_t psn0 = g.p(0.3) ? (uint32_t)g.u(0xFFFF00, 0xFFFFFF) : (uint32_t)g.u(0, 0xFFFFFF);
	uint32_t psn1 = (uint32_t)g.u(0, 0xFFFFFF);

	pr.loss = g.p(0.2) ? 0 : g.u(0, 50) / 1000.0;
	pr.dup = g.u(0, 30) / 1000.0;
	pr.trunc = g.u(0, 20) / 1000.0;
	pr.reorder = g.u(0, 200) / 1000.0;
	pr.delay = g.u(1, 50) * 1000;
	pr.jitter = g.u(0, 100) * 1000;
	pr.post_p = g.u(5, 60) / 100.0;
	pr.recv_p = g.u(2, 50) / 100.0;
	pr.busy = g.p(0.5) ? 0 : g.u(0, 50) / 1000.0;
	c[0] = default_cfg(0x100, 0x200, psn0, psn1);
	c[1] = default_cfg(0x200, 0x100, psn1, psn0);
	uint32_t mtu = mtus[g.u(0, 3)];
	for (int i = 0; i < 2; i++) {
		c[i].mtu = mtu;
		c[i].window = (uint32_t)g.u(4, 64);
		c[i].ack_interval = g.p(0.6) ? 0 : (uint32_t)g.u(1, 8);
		c[i].retry_cnt = 7;
		c[i].rnr_retry = 7;
		c[i].max_rd_atomic = (uint32_t)g.u(1, 8);
		c[i].rto_ns = 4 * (pr.delay + pr.jitter) + 100000;
		c[i].min_rnr_ns = g.u(10, 500) * 1000;
		// (from psn0, not the generator: the other draws stay as they were)
		c[i].rtt_share = psn0 & 1 ? &share : nullptr;
	}
	if (psn0 & 1)	// a short verbs timeout: the share's rto is the longer
		c[0].rto_ns = (pr.delay + pr.jitter) + 100000;
	for (int i = 0; i < 2; i++) {
		c[i].max_dest_rd_atomic = c[1 - i].max_rd_atomic;
		ASSERT_EQ(s[i].env.init(c[i], 32, 8), 0);
		s[i].env.add_region(kRkey, kBase, kRegion, ACC_ALL);
		s[i].model.assign(kRegion, 0);
	}
}

void Sim::impair(int from)
{
	auto &out = s[from].env.out;

	while (!out.empty()) {
		Frame f{now + pr.delay, seq++, 1 - from, std::move(out.front())};
		out.pop_front();
		if (g.p(pr.loss))
			continue;
		if (g.p(pr.reorder))
			f.at += g.u(0, pr.jitter + 1);
		if (g.p(pr.trunc) && !f.bytes.empty())
			f.bytes.resize(g.u(0, f.bytes.size() - 1));
		if (g.p(pr.dup)) {
			Frame d = f;
			d.seq = seq++;
			d.at += g.u(0, pr.jitter + 1);
			link.push(std::move(d));
		}
		link.push(std::move(f));
	}
}

void Sim::post_some(int i)
{
	Side &me = s[i];
	int n = (int)g.u(1, 6), k = 0;

	while (k < n && me.posted < me.ops.size()) {
		Op &o = me.ops[me.posted];
		std::vector<uint8_t> buf = o.data;
		if (buf.empty())
			buf.assign(o.wr.len, 0xEE);
		me.env.local[o.wr.cookie] = std::move(buf);
		int err = mbcf_conn_enqueue(&me.env.conn, &o.wr);
		if (err == MBCF_POST_FULL || err == MBCF_POST_STATE)
			break;
		ASSERT_EQ(err, 0);
		me.posted++;
		k++;
	}
	if (k)
		mbcf_conn_kick(&me.env.conn, now);
}

void Sim::post_recvs(int i)
{
	Side &me = s[i];

	if (me.recvs_posted >= me.exp_recv.size())
		return;
	me.env.recvs.push_back({0x1000000 + me.recvs_posted, kRecvCap});
	me.recvs_posted++;
	mbcf_conn_recv_posted(&me.env.conn, now);
}

bool Sim::done() const
{
	for (int i = 0; i < 2; i++) {
		if (s[i].env.cqes.size() < s[i].ops.size())
			return false;
		if (!with_error && s[i].env.rcqes.size() < s[i].exp_recv.size())
			return false;
	}
	return true;
}

// One event: post work, then deliver the next frame or fire a timer.
bool Sim::step()
{
	for (int i = 0; i < 2; i++) {
		// the device queue is sometimes full; it wakes up later
		s[i].env.busy = g.p(pr.busy) ? (int)g.u(1, 3) : 0;
		if (s[i].env.conn.tx_busy && g.p(0.3))
			mbcf_conn_kick(&s[i].env.conn, now);
		if (g.p(pr.post_p))
			post_some(i);
		if (g.p(pr.recv_p))
			post_recvs(i);
		impair(i);
	}
	uint64_t t = UINT64_MAX;
	int who = -1;	// 0/1: timer, 2: frame
	for (int i = 0; i < 2; i++)
		if (s[i].env.timer_at && s[i].env.timer_at < t)
			t = s[i].env.timer_at, who = i;
	if (!link.empty() && link.top().at <= t)
		t = link.top().at, who = 2;
	if (who < 0) {
		// idle: time passes until someone posts more
		now += 10000;
		return true;
	}
	now = std::max(now, t);
	if (who == 2) {
		Frame f = link.top();
		link.pop();
		if (trace) {
			mbcf_frame pf;
			if (parse(f.bytes, &pf))
				printf("%llu ->%d %s psn %u ack %u fl %x st %u len %u\n",
				       (unsigned long long)now, f.to, mbcf_codec_op_name(pf.op),
				       pf.psn, pf.ack_psn, pf.flags, pf.status, pf.paylen);
			else
				printf("%llu ->%d (bad %zu err %d op %u paylen %u)\n", (unsigned long long)now, f.to, f.bytes.size(), mbcf_codec_parse(f.bytes.data(), f.bytes.size(), &pf, nullptr), f.bytes.size() > 1 ? f.bytes[1] : 0, f.bytes.size() > 22 ? f.bytes[20] * 256 + f.bytes[21] : 0);
		}
		deliver(s[f.to].env, f.bytes, now);
	} else {
		if (trace)
			printf("%llu timer %d una %u nxt %u max %u\n", (unsigned long long)now, who,
			       s[who].env.conn.snd_una, s[who].env.conn.snd_nxt, s[who].env.conn.snd_max);
		s[who].env.timer_at = 0;
		mbcf_conn_timeout(&s[who].env.conn, now);
	}
	return true;
}

void Sim::check_side(int i)
{
	Side &me = s[i];
	Side &peer = s[1 - i];

	EXPECT_EQ(me.env.conn.state, MBCF_CONN_RTS) << "side " << i;
	ASSERT_EQ(me.env.cqes.size(), me.ops.size()) << "side " << i;
	for (size_t k = 0; k < me.ops.size(); k++) {
		const Op &o = me.ops[k];
		const mbcf_cqe &c = me.env.cqes[k];
		ASSERT_EQ(c.cookie, o.wr.cookie) << "side " << i << " completion " << k;
		ASSERT_EQ(c.status, MBCF_WC_SUCCESS) << "side " << i << " op " << k;
		ASSERT_EQ(c.op, o.wr.op);
		if (!o.expect.empty()) {
			ASSERT_EQ(me.env.local[o.wr.cookie], o.expect)
				<< "side " << i << " op " << k << " " << mbcf_codec_op_name(o.wr.op);
		}
	}
	ASSERT_EQ(me.env.rcqes.size(), me.exp_recv.size()) << "side " << i;
	for (size_t k = 0; k < me.exp_recv.size(); k++) {
		const ExpRecv &r = me.exp_recv[k];
		const mbcf_cqe &c = me.env.rcqes[k];
		ASSERT_EQ(c.cookie, 0x1000000 + k);
		ASSERT_EQ(c.status, MBCF_WC_SUCCESS);
		ASSERT_EQ(c.op, r.op);
		ASSERT_EQ(c.byte_len, r.byte_len);
		ASSERT_EQ(!!(c.flags & MBCF_CQE_IMM), r.has_imm);
		if (r.has_imm) {
			ASSERT_EQ(c.imm, r.imm);
		}
		if (r.op != MBCF_OP_WRITE_IMM) {
			auto got = me.env.recv_buf[c.cookie];
			got.resize(r.byte_len);
			ASSERT_EQ(got, r.data) << "receive " << k;
		}
	}
	const Region &reg = me.env.regions[0];
	ASSERT_EQ(memcmp(reg.words.data(), me.model.data(), kRegion), 0) << "side " << i << " memory";
	EXPECT_EQ(mbcf_conn_outstanding(&me.env.conn), 0u);
	EXPECT_EQ(me.env.conn.rd_out, 0u);
	(void)peer;
}

// With one access violation: ops before it succeed (reads/atomics may be
// flushed: their responses die with the responder, and then so is
// everything after them, verbs completing in order), it fails with
// REM_ACCESS_ERR, everything after it is flushed; all exactly once, in order.
void Sim::check_error_side(int i)
{
	Side &me = s[i];
	size_t bad = me.ops.size();
	bool failed = false;	// an earlier op completed in error

	for (size_t k = 0; k < me.ops.size(); k++)
		if (me.ops[k].bad)
			bad = std::min(bad, k);
	ASSERT_EQ(me.env.cqes.size(), me.ops.size()) << "side " << i;
	for (size_t k = 0; k < me.ops.size(); k++) {
		const Op &o = me.ops[k];
		const mbcf_cqe &c = me.env.cqes[k];
		ASSERT_EQ(c.cookie, o.wr.cookie);
		if (k == bad) {
			ASSERT_EQ(c.status, MBCF_WC_REM_ACCESS_ERR) << "the bad op " << k;
			continue;
		}
		bool rd = mbcf_op_is_rd_for_test(o.wr.op);
		if (k < bad && c.status == MBCF_WC_SUCCESS) {
			ASSERT_FALSE(failed) << "op " << k << " succeeded after an error";
			if (!o.expect.empty()) {
				ASSERT_EQ(me.env.local[o.wr.cookie], o.expect) << k;
			}
			continue;
		}
		// flushed: after the bad op, a read before it, anything after an
		// op flushed, or anything once the peer went down because of the
		// other direction's violation
		ASSERT_EQ(c.status, MBCF_WC_WR_FLUSH_ERR) << "op " << k << " bad " << bad;
		ASSERT_TRUE(k > bad || rd || failed || bad_side != i) << k;
		failed = true;
	}
}

void Sim::run()
{
	configure();
	if (::testing::Test::HasFatalFailure())
		return;
	int n0 = (int)g.u(5, 40), n1 = (int)g.u(0, 25);
	generate(g, s[0], s[1], n0, 1, with_error);
	generate(g, s[1], s[0], n1, 100001, false);
	if (with_error)
		bad_side = 0;
	for (long it = 0; !done(); it++) {
		if (it == 1999999 && trace) {
			for (int i = 0; i < 2; i++) {
				printf("side %d state %d una %u nxt %u max %u:", i, s[i].env.conn.state,
				       s[i].env.conn.snd_una, s[i].env.conn.snd_nxt, s[i].env.conn.snd_max);
				for (auto &c : s[i].env.cqes)
					printf(" %llu/%d", (unsigned long long)c.cookie, c.status);
				printf("\nops:");
				for (auto &o : s[i].ops)
					printf(" %s%s", mbcf_codec_op_name(o.wr.op), o.bad ? "(bad)" : "");
				printf("\n");
			}
		}
		ASSERT_LT(it, 2000000) << "no progress: posted " << s[0].posted << "/" << s[0].ops.size()
			<< " " << s[1].posted << "/" << s[1].ops.size() << " cqes " << s[0].env.cqes.size()
			<< " " << s[1].env.cqes.size() << " recvs " << s[0].recvs_posted << "/"
			<< s[0].exp_recv.size() << " " << s[1].recvs_posted << "/" << s[1].exp_recv.size()
			<< " rcqes " << s[0].env.rcqes.size() << " " << s[1].env.rcqes.size();
		ASSERT_LT(now, 600ull * 1000000000) << "simulated time ran out";
		if (trace && (s[0].env.conn.state != MBCF_CONN_RTS ||
			      s[1].env.conn.state != MBCF_CONN_RTS)) {
			for (int j = 0; j < 2; j++) {
				printf("side %d state %d stopped %d stop_sent %d rx_msg %d claimed %d rcv_nxt %u:", j,
				       s[j].env.conn.state, s[j].env.conn.stopped, s[j].env.conn.stop_sent,
				       s[j].env.conn.rx_msg, s[j].env.conn.rx_claimed, s[j].env.conn.rcv_nxt);
				for (unsigned k = 0; k < MBCF_CTR_COUNT; k++)
					if (mbcf_counters_get(&s[j].env.conn.ctr, k))
						printf(" %s=%llu", mbcf_counters_name(k),
						       (unsigned long long)mbcf_counters_get(&s[j].env.conn.ctr, k));
				printf("\n");
			}
		}
		for (int i = 0; i < 2 && !with_error; i++) {
			ASSERT_EQ(s[i].env.conn.state, MBCF_CONN_RTS)
				<< "side " << i << " errored: " << (int)s[i].env.error_status
				<< " recvs " << s[1 - i].recvs_posted << "/" << s[1 - i].exp_recv.size()
				<< " rcqes " << s[1 - i].env.rcqes.size() << " ctr stop_tx "
				<< s[1 - i].env.conn.ctr.stop_tx << " busy " << s[1 - i].env.conn.ctr.tx_busy;
		}
		if (with_error && s[0].env.conn.state != MBCF_CONN_RTS &&
		    s[1].env.conn.state != MBCF_CONN_RTS)
			break;
		step();
		if (::testing::Test::HasFatalFailure())
			return;
	}
	if (with_error) {
		// post the rest so that they flush, as verbs would after the error
		for (int i = 0; i < 2; i++) {
			while (s[i].posted < s[i].ops.size()) {
				s[i].env.local[s[i].ops[s[i].posted].wr.cookie].assign(8 + s[i].ops[s[i].posted].wr.len, 0);
				if (mbcf_conn_enqueue(&s[i].env.conn, &s[i].ops[s[i].posted].wr))
					break;
				s[i].posted++;
			}
			mbcf_conn_flush(&s[i].env.conn);
			// unposted ones are rejected with MBCF_POST_STATE: count them flushed
			for (size_t k = s[i].posted; k < s[i].ops.size(); k++) {
				mbcf_cqe c{};
				c.cookie = s[i].ops[k].wr.cookie;
				c.op = s[i].ops[k].wr.op;
				c.status = MBCF_WC_WR_FLUSH_ERR;
				s[i].env.cqes.push_back(c);
			}
		}
		check_error_side(0);
		for (int i = 0; i < 2; i++)
			EXPECT_EQ(rx_unaccounted(s[i].env), 0) << "side " << i;
		for (auto &o : s[0].ops)
			g_bad_ops += o.bad;
		for (auto &c : s[0].env.cqes)
			g_access_errors += c.status == MBCF_WC_REM_ACCESS_ERR;
		return;
	}
	check_side(0);
	if (!::testing::Test::HasFatalFailure())
		check_side(1);
	for (int i = 0; i < 2; i++) {
		EXPECT_EQ(rx_unaccounted(s[i].env), 0) << "side " << i;
		mbcf_counters_add(&g_total, &s[i].env.conn.ctr);
		mbcf_counters_add(&g_total, &s[i].env.dev_ctr);
	}
}

long env_long(const char *name, long dflt)
{
	const char *v = getenv(name);
	return v ? strtol(v, nullptr, 0) : dflt;
}

}  // namespace

bool mbcf_op_is_rd_for_test(uint8_t op)
{
	return op == MBCF_OP_READ_REQ || op == MBCF_OP_CMP_SWAP || op == MBCF_OP_FETCH_ADD;
}

TEST(LossyLink, RandomStreamsMatchTheModel)
{
	long one = env_long("MBCF_SEED", -1);
	long n = env_long("MBCF_STREAMS", 2000);

	g_total = mbcf_counters{};
	for (long i = 0; i < n; i++) {
		uint64_t seed = one >= 0 ? (uint64_t)one : 0x5eed0000 + i;
		SCOPED_TRACE("seed " + std::to_string(seed) + " (rerun: MBCF_SEED=" +
			     std::to_string(seed) + ")");
		Sim sim(seed, false);
		sim.run();
		if (::testing::Test::HasFailure() || one >= 0)
			return;
	}
	for (unsigned i = 0; i < MBCF_CTR_COUNT; i++)
		printf("  %-24s %llu\n", mbcf_counters_name(i),
		       (unsigned long long)mbcf_counters_get(&g_total, i));
	EXPECT_GT(g_total.retransmits, 0u);
	EXPECT_GT(g_total.timeouts, 0u);
	EXPECT_GT(g_total.rto_shared, 0u);	// waited for the device's rto
	EXPECT_GT(g_total.lost_tx, 0u);
	EXPECT_GT(g_total.lost_rx, 0u);
	EXPECT_GT(g_total.stop_rx, 0u);
	EXPECT_GT(g_total.go_rx, 0u);
	EXPECT_GT(g_total.drop_duplicate, 0u);
	EXPECT_GT(g_total.drop_out_of_seq, 0u);
	EXPECT_GT(g_total.rx_early, 0u);		// placed early (5.1) ...
	EXPECT_GT(g_total.selective_repeats, 0u);	// ... and not resent
	EXPECT_GT(g_total.drop_truncated + g_total.drop_bad_length, 0u);
	EXPECT_GT(g_total.tx_busy, 0u);
	EXPECT_EQ(g_total.drop_bad_ack + g_total.drop_bad_resp + g_total.drop_wrong_qp, 0u);
	EXPECT_EQ(g_total.remote_errors + g_total.retry_exceeded, 0u);
}

TEST(LossyLink, AccessViolationFailsExactlyThatOperation)
{
	long one = env_long("MBCF_SEED", -1);
	long n = env_long("MBCF_STREAMS", 2000) / 3;

	g_access_errors = g_bad_ops = 0;
	for (long i = 0; i < n; i++) {
		uint64_t seed = one >= 0 ? (uint64_t)one : 0xbad00000 + i;
		SCOPED_TRACE("seed " + std::to_string(seed) + " (rerun: MBCF_SEED=" +
			     std::to_string(seed) + ")");
		Sim sim(seed, true);
		sim.run();
		if (::testing::Test::HasFailure() || one >= 0)
			return;
	}
	// every violation surfaces as exactly one REM_ACCESS_ERR
	EXPECT_EQ(g_access_errors, g_bad_ops);
	EXPECT_GT(g_bad_ops, n / 2);
}
