// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
// The memory-based FIFO's placement (core/fifo.c, docs/protocol.md 16.2):
// records at the tail, a SKIP before the wrap, full, too big, a hostile
// owner's control block (never a byte outside the record area), a failed
// copy, lost compare-and-swaps, and senders on several threads at once;
// the signal (16.5): when mem->signal fires, and that a sleeping consumer
// of a SIGNAL_EMPTY FIFO is never left asleep with records queued.
// The FIFO's memory is a buffer between guard bytes; every access the core
// asks for is checked against the record area.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

extern "C" {
#include <mbcf/fifo.h>
}

namespace {

constexpr uint32_t kGuard = 64;
constexpr uint8_t kGuardByte = 0xa5;

// A FIFO's memory: guard, control block, record area, guard.
struct Mem {
	uint32_t size;
	std::vector<uint64_t> buf;
	std::atomic<int> outside{0};	// accesses the core asked for outside the area
	std::atomic<int> heads{0}, cmpxchgs{0}, waits{0}, writes{0};
	std::atomic<int> mbs{0}, signals{0};
	int fail_write = -1;		// this write call (0-based) fails
	bool scribble = false;		// every compare-and-swap loses
	std::function<void()> on_cmpxchg, on_write, on_wait, on_mb, on_signal;
	std::mutex mu;			// the signal as a counting event (an eventfd)
	std::condition_variable cv;
	uint64_t events = 0;

	explicit Mem(uint32_t sz) : size(sz), buf((2 * kGuard + MBCF_FIFO_CTRL_LEN + sz) / 8)
	{
		memset(bytes(), kGuardByte, kGuard);
		memset(bytes() + kGuard + MBCF_FIFO_CTRL_LEN + sz, kGuardByte, kGuard);
	}
	uint8_t *bytes() { return reinterpret_cast<uint8_t *>(buf.data()); }
	uint8_t *ctrl() { return bytes() + kGuard; }
	uint8_t *area() { return ctrl() + MBCF_FIFO_CTRL_LEN; }
	uint64_t *tailp() { return reinterpret_cast<uint64_t *>(ctrl() + MBCF_FIFO_OFF_TAIL); }
	uint64_t *headp() { return reinterpret_cast<uint64_t *>(ctrl() + MBCF_FIFO_OFF_HEAD); }
	uint32_t *waitp() { return reinterpret_cast<uint32_t *>(ctrl() + MBCF_FIFO_OFF_WAIT); }
	uint32_t word(uint32_t off) { uint32_t w; memcpy(&w, area() + off, 4); return w; }
	uint32_t qpn(uint32_t off) { return word(off + 4); }
	bool guards_intact()
	{
		for (uint32_t i = 0; i < kGuard; i++)
			if (bytes()[i] != kGuardByte ||
			    bytes()[kGuard + MBCF_FIFO_CTRL_LEN + size + i] != kGuardByte)
				return false;
		return true;
	}
	bool area_zero()
	{
		for (uint32_t i = 0; i < size; i++)
			if (area()[i])
				return false;
		return true;
	}
};

Mem *M(void *env) { return static_cast<Mem *>(env); }

u64 mem_head(void *env)
{
	M(env)->heads++;
	/* seq_cst: against set_wait's store, as the consumer's pair (16.2) */
	return __atomic_load_n(M(env)->headp(), __ATOMIC_SEQ_CST);
}

u64 mem_tail(void *env)
{
	return __atomic_load_n(M(env)->tailp(), __ATOMIC_RELAXED);
}

u64 mem_cmpxchg(void *env, u64 old, u64 nt)
{
	Mem *m = M(env);

	m->cmpxchgs++;
	if (m->on_cmpxchg) {
		auto fn = m->on_cmpxchg;	// once, and not for the nested push
		m->on_cmpxchg = nullptr;
		fn();
	}
	if (m->scribble)	// the owner changed the tail meanwhile
		return old + 8;
	__atomic_compare_exchange_n(m->tailp(), &old, nt, false, __ATOMIC_ACQ_REL,
				    __ATOMIC_RELAXED);
	return old;
}

void mem_set_wait(void *env)
{
	Mem *m = M(env);

	m->waits++;
	__atomic_store_n(m->waitp(), 1u, __ATOMIC_SEQ_CST);
	if (m->on_wait) {
		auto fn = m->on_wait;
		m->on_wait = nullptr;
		fn();
	}
}

int mem_write(void *env, u32 off, const u8 *src, u32 len)
{
	Mem *m = M(env);
	int n = m->writes++;

	if ((uint64_t)off + len > m->size) {
		m->outside++;
		return 0;
	}
	if (n == m->fail_write)
		return -14;
	if (m->on_write) {
		auto fn = m->on_write;
		m->on_write = nullptr;
		fn();
	}
	memcpy(m->area() + off, src, len);
	return 0;
}

void mem_publish(void *env, u32 off, u32 word)
{
	Mem *m = M(env);

	if ((uint64_t)off + 4 > m->size || off % 4) {
		m->outside++;
		return;
	}
	__atomic_store_n(reinterpret_cast<uint32_t *>(m->area() + off), word,
			 __ATOMIC_RELEASE);
}

void mem_mb(void *env)
{
	Mem *m = M(env);

	m->mbs++;
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	if (m->on_mb) {
		auto fn = m->on_mb;
		m->on_mb = nullptr;
		fn();
	}
}

void mem_signal(void *env)
{
	Mem *m = M(env);

	m->signals++;
	if (m->on_signal)
		m->on_signal();
	{
		std::lock_guard<std::mutex> l(m->mu);
		m->events++;
	}
	m->cv.notify_one();
}

const mbcf_fifo_mem kMem = {
	mem_head, mem_tail, mem_cmpxchg, mem_set_wait, mem_write, mem_publish,
	mem_mb, mem_signal,
};

struct Rec {
	uint32_t qpn;
	std::vector<uint8_t> data;
};

// The consumer of docs/protocol.md 16.2: false when the next record is not
// whole (or there is none).  SKIP records are stepped over (*skipped).
bool pop(Mem &m, Rec *r, int *skipped = nullptr)
{
	for (;;) {
		uint64_t head = __atomic_load_n(m.headp(), __ATOMIC_RELAXED);
		uint32_t off = (uint32_t)head & (m.size - 1);
		uint32_t w = __atomic_load_n(reinterpret_cast<uint32_t *>(m.area() + off),
					     __ATOMIC_ACQUIRE);
		if (!(w & MBCF_FIFO_READY))
			return false;
		uint32_t len = w & MBCF_FIFO_LEN_MASK, n = mbcf_fifo_rec_size(len);
		EXPECT_LE(off + n, m.size) << "a record split across the wrap";
		if (off + n > m.size)
			return false;
		bool skip = w & MBCF_FIFO_SKIP;
		if (!skip) {
			r->qpn = m.qpn(off);
			r->data.assign(m.area() + off + 8, m.area() + off + 8 + len);
		} else if (skipped) {
			++*skipped;
		}
		memset(m.area() + off, 0, n);
		__atomic_store_n(m.headp(), head + n, __ATOMIC_SEQ_CST);
		if (__atomic_load_n(m.waitp(), __ATOMIC_SEQ_CST))
			__atomic_store_n(m.waitp(), 0u, __ATOMIC_RELAXED);
		if (!skip)
			return true;
	}
}

std::vector<uint8_t> bytes(uint32_t len, uint8_t seed)
{
	std::vector<uint8_t> v(len);
	for (uint32_t i = 0; i < len; i++)
		v[i] = (uint8_t)(seed + i * 7);
	return v;
}

class Fifo : public ::testing::Test {
protected:
	Mem m{256};
	mbcf_fifo f{256, 0, &kMem, &m};

	int push(const std::vector<uint8_t> &d, uint32_t qpn = 0x11)
	{
		mbcf_iov iov = {d.data(), (u32)d.size()};
		return mbcf_fifo_push(&f, qpn, &iov, 1);
	}
	int push(uint32_t len, uint8_t seed = 1) { return push(bytes(len, seed)); }
	void set(uint64_t head, uint64_t tail)
	{
		*m.headp() = head;
		*m.tailp() = tail;
	}
	void TearDown() override
	{
		EXPECT_EQ(m.outside.load(), 0);
		EXPECT_TRUE(m.guards_intact());
	}
};

TEST_F(Fifo, AppendsRecordsWithTheLengthLast)
{
	auto a = bytes(3, 10), c = bytes(21, 30);

	ASSERT_EQ(push(a, 0x7f123456), MBCF_FIFO_OK);
	ASSERT_EQ(push(0), MBCF_FIFO_OK);
	ASSERT_EQ(push(c, 0x22), MBCF_FIFO_OK);
	EXPECT_EQ(*m.tailp(), 16u + 8 + 32);
	EXPECT_EQ(m.word(0), MBCF_FIFO_READY | 3);
	EXPECT_EQ(m.qpn(0), 0x123456u);	/* 24 bits */
	EXPECT_EQ(0, memcmp(m.area() + 8, a.data(), 3));
	for (int i = 11; i < 16; i++)
		EXPECT_EQ(m.area()[i], 0) << "padding written at " << i;
	EXPECT_EQ(m.word(16), MBCF_FIFO_READY | 0);
	EXPECT_EQ(m.qpn(16), 0x11u);
	EXPECT_EQ(m.word(24), MBCF_FIFO_READY | 21);
	EXPECT_EQ(0, memcmp(m.area() + 32, c.data(), 21));
	EXPECT_EQ(m.word(56), 0u);
	EXPECT_EQ(*m.waitp(), 0u);

	Rec r;
	ASSERT_TRUE(pop(m, &r));
	EXPECT_EQ(r.data, a);
	ASSERT_TRUE(pop(m, &r));
	EXPECT_TRUE(r.data.empty());
	ASSERT_TRUE(pop(m, &r));
	EXPECT_EQ(r.data, c);
	EXPECT_EQ(r.qpn, 0x22u);
	EXPECT_FALSE(pop(m, &r));
	EXPECT_EQ(*m.headp(), 56u);
	EXPECT_TRUE(m.area_zero());
}

TEST_F(Fifo, PayloadInPieces)
{
	auto d = bytes(40, 5);
	mbcf_iov iov[3] = {{d.data(), 7}, {d.data() + 7, 0}, {d.data() + 7, 33}};

	ASSERT_EQ(mbcf_fifo_push(&f, 9, iov, 3), MBCF_FIFO_OK);
	EXPECT_EQ(m.word(0), MBCF_FIFO_READY | 40);
	EXPECT_EQ(0, memcmp(m.area() + 8, d.data(), 40));
	EXPECT_EQ(*m.tailp(), 48u);
}

// A record that does not fit before the end: a SKIP over the rest, the
// record at offset 0, never split.
TEST_F(Fifo, WrapsWithASkipNeverSplits)
{
	Rec r;
	auto big = bytes(56, 3);

	set(168, 168);
	ASSERT_EQ(push(40), MBCF_FIFO_OK);	/* 168..216 */
	ASSERT_EQ(push(big), MBCF_FIFO_OK);	/* 216 + 64 > 256 */
	EXPECT_EQ(*m.tailp(), 216u + 40 + 64);
	EXPECT_EQ(m.word(216), MBCF_FIFO_READY | MBCF_FIFO_SKIP | 32);
	EXPECT_EQ(m.qpn(216), 0u);
	EXPECT_EQ(m.word(0), MBCF_FIFO_READY | 56);
	EXPECT_EQ(0, memcmp(m.area() + 8, big.data(), 56));

	int skipped = 0;
	ASSERT_TRUE(pop(m, &r, &skipped));
	EXPECT_EQ(r.data.size(), 40u);
	ASSERT_TRUE(pop(m, &r, &skipped));
	EXPECT_EQ(r.data, big);
	EXPECT_EQ(skipped, 1);
	EXPECT_EQ(*m.headp(), 320u);
	EXPECT_TRUE(m.area_zero());
}

// The smallest pad: 8 bytes, a SKIP of length 0.
TEST_F(Fifo, WrapsWithAHeaderOnlySkip)
{
	set(248, 248);
	ASSERT_EQ(push(40), MBCF_FIFO_OK);
	EXPECT_EQ(m.word(248), MBCF_FIFO_READY | MBCF_FIFO_SKIP | 0);
	EXPECT_EQ(m.word(0), MBCF_FIFO_READY | 40);
	EXPECT_EQ(*m.tailp(), 248u + 8 + 48);
}

// A record ending exactly at the end of the area takes no SKIP; the FIFO
// exactly full takes nothing more, asks for a doorbell, and touches nothing.
TEST_F(Fifo, ExactFitThenFull)
{
	Rec r;

	ASSERT_EQ(push(120, 1), MBCF_FIFO_OK);
	ASSERT_EQ(push(120, 2), MBCF_FIFO_OK);	/* 128..256 */
	EXPECT_EQ(m.word(128), MBCF_FIFO_READY | 120);
	EXPECT_EQ(*m.tailp(), 256u);

	std::vector<uint8_t> before(m.area(), m.area() + 256);
	m.cmpxchgs = 0;
	m.heads = 0;
	EXPECT_EQ(push(0), MBCF_FIFO_FULL);
	EXPECT_EQ(*m.tailp(), 256u);
	EXPECT_EQ(*m.waitp(), 1u);
	EXPECT_EQ(m.cmpxchgs.load(), 0);
	EXPECT_EQ(m.heads.load(), 2);		/* looked again after wait */
	EXPECT_EQ(std::vector<uint8_t>(m.area(), m.area() + 256), before);

	ASSERT_TRUE(pop(m, &r));
	EXPECT_EQ(r.data, bytes(120, 1));
	EXPECT_EQ(*m.waitp(), 0u);		/* the consumer saw it */
	ASSERT_EQ(push(120, 3), MBCF_FIFO_OK);	/* at 256 mod 256 = 0 */
	EXPECT_EQ(m.word(0), MBCF_FIFO_READY | 120);
	EXPECT_EQ(*m.tailp(), 384u);
}

// Room freed between the first look and wait: the second look takes it.
TEST_F(Fifo, RoomFreedWhileSettingWaitIsTaken)
{
	Rec r;

	ASSERT_EQ(push(120, 1), MBCF_FIFO_OK);
	ASSERT_EQ(push(120, 2), MBCF_FIFO_OK);
	m.on_wait = [&] { ASSERT_TRUE(pop(m, &r)); };
	EXPECT_EQ(push(56, 3), MBCF_FIFO_OK);
	EXPECT_EQ(m.waits.load(), 1);
	EXPECT_EQ(m.word(0), MBCF_FIFO_READY | 56);
	EXPECT_EQ(*m.tailp(), 256u + 64);
}

// At most half the area, so it fits once empty wherever the tail is.
TEST_F(Fifo, TooBig)
{
	EXPECT_EQ(push(121), MBCF_FIFO_TOO_BIG);	/* 136 > 128 */
	EXPECT_EQ(push(1000), MBCF_FIFO_TOO_BIG);	/* larger than the FIFO */
	std::vector<uint8_t> one(1);
	mbcf_iov iov[2] = {{one.data(), 0xfffffff0u}, {one.data(), 0x20u}};
	EXPECT_EQ(mbcf_fifo_push(&f, 1, iov, 2), MBCF_FIFO_TOO_BIG);
	iov[0].len = MBCF_FIFO_LEN_MASK + 1;
	EXPECT_EQ(mbcf_fifo_push(&f, 1, iov, 1), MBCF_FIFO_TOO_BIG);
	EXPECT_EQ(*m.tailp(), 0u);
	EXPECT_EQ(m.writes.load(), 0);
	EXPECT_EQ(m.heads.load(), 0);

	set(136, 136);	/* the worst offset for 128 bytes: a 120-byte SKIP */
	ASSERT_EQ(push(120), MBCF_FIFO_OK);
	EXPECT_EQ(m.word(136), MBCF_FIFO_READY | MBCF_FIFO_SKIP | 112);
	EXPECT_EQ(m.word(0), MBCF_FIFO_READY | 120);
	EXPECT_EQ(*m.tailp(), 136u + 120 + 128);
}

TEST_F(Fifo, BadDescriptor)
{
	auto d = bytes(8, 1);
	mbcf_iov iov = {d.data(), 8};

	for (uint32_t size : {0u, 32u, 100u, 384u, 1u << 31}) {
		mbcf_fifo g{size, 0, &kMem, &m};
		EXPECT_EQ(mbcf_fifo_push(&g, 1, &iov, 1), MBCF_FIFO_BAD_KEY) << size;
	}
	mbcf_fifo g{256, 0, nullptr, &m};
	EXPECT_EQ(mbcf_fifo_push(&g, 1, &iov, 1), MBCF_FIFO_BAD_KEY);
	EXPECT_EQ(mbcf_fifo_push(nullptr, 1, &iov, 1), MBCF_FIFO_BAD_KEY);
	EXPECT_EQ(m.heads.load(), 0);
	EXPECT_TRUE(mbcf_fifo_size_ok(64));
	EXPECT_TRUE(mbcf_fifo_size_ok(1u << 30));
	EXPECT_FALSE(mbcf_fifo_size_ok(32));
}

// A hostile owner's control block: refused, or full, and nothing written.
TEST_F(Fifo, HostileControlBlock)
{
	struct {
		uint64_t head, tail;
		int st;
	} cases[] = {
		{4, 0, MBCF_FIFO_BAD_CTRL},		/* unaligned head */
		{0, 12, MBCF_FIFO_BAD_CTRL},		/* unaligned tail */
		{72, 64, MBCF_FIFO_BAD_CTRL},		/* head beyond tail */
		{512, 0, MBCF_FIFO_BAD_CTRL},		/* head beyond the length */
		{1ull << 40, 64, MBCF_FIFO_BAD_CTRL},
		{0, 1024, MBCF_FIFO_FULL},		/* head far behind */
		{8, 8 + 256 + 8, MBCF_FIFO_FULL},
	};

	for (auto &c : cases) {
		set(c.head, c.tail);
		m.writes = 0;
		EXPECT_EQ(push(8), c.st) << c.head << " " << c.tail;
		EXPECT_EQ(*m.tailp(), c.tail);
		EXPECT_EQ(*m.headp(), c.head);
		EXPECT_EQ(m.writes.load(), 0);
		EXPECT_TRUE(m.area_zero());
	}
}

// Head and tail anywhere, even about to wrap 2^64: offsets stay inside.
TEST_F(Fifo, TailAboutToWrap)
{
	uint64_t t = ~0ull - 23;	/* 2^64 - 24: offset 232 */

	set(t, t);
	ASSERT_EQ(push(40), MBCF_FIFO_OK);
	EXPECT_EQ(m.word(232), MBCF_FIFO_READY | MBCF_FIFO_SKIP | 16);
	EXPECT_EQ(m.word(0), MBCF_FIFO_READY | 40);
	EXPECT_EQ(*m.tailp(), 48u);		/* wrapped */
	ASSERT_EQ(push(40), MBCF_FIFO_OK);	/* used 72 across the wrap */
	EXPECT_EQ(m.word(48), MBCF_FIFO_READY | 40);
	EXPECT_EQ(*m.tailp(), 96u);
}

// Random control blocks and lengths: every status is one of the expected,
// nothing is ever asked for outside the area, and an append lands where
// head and tail said.
TEST_F(Fifo, RandomControlBlocksStayInside)
{
	uint32_t seed = std::random_device{}();
	std::mt19937_64 rng(seed);
	int n_ok = 0, n_full = 0, n_bad = 0, n_big = 0;

	printf("seed %u\n", seed);
	for (int i = 0; i < 20000; i++) {
		uint64_t tail = rng(), head;
		switch (rng() % 4) {
		case 0: head = rng(); break;
		case 1: tail &= ~7ull; head = tail - (rng() % 320); break;
		case 2: tail &= ~7ull; head = tail - ((rng() % 40) * 8); break;
		default: tail &= ~7ull; head = tail + (rng() % 64); break;
		}
		uint32_t len = (uint32_t)(rng() % 140);
		set(head, tail);
		memset(m.area(), 0, 256);
		int st = push(len, (uint8_t)i);
		uint32_t n = mbcf_fifo_rec_size(len), off = (uint32_t)tail & 255;
		switch (st) {
		case MBCF_FIFO_OK: {
			n_ok++;
			uint32_t pad = off + n > 256 ? 256 - off : 0;
			uint32_t at = pad ? 0 : off;
			ASSERT_EQ(tail % 8, 0u);
			ASSERT_LE(tail - head + pad + n, 256u);
			ASSERT_EQ(*m.tailp(), tail + pad + n);
			ASSERT_EQ(m.word(at), MBCF_FIFO_READY | len);
			if (pad) {
				ASSERT_EQ(m.word(off), MBCF_FIFO_READY | MBCF_FIFO_SKIP |
							 (pad - 8));
			}
			break;
		}
		case MBCF_FIFO_FULL:
			n_full++;
			ASSERT_EQ(*m.tailp(), tail);
			ASSERT_TRUE(m.area_zero());
			break;
		case MBCF_FIFO_BAD_CTRL:
			n_bad++;
			ASSERT_TRUE(((head | tail) & 7) || (int64_t)(tail - head) < 0);
			ASSERT_TRUE(m.area_zero());
			break;
		case MBCF_FIFO_TOO_BIG:
			n_big++;
			ASSERT_GT(n, 128u);
			break;
		default:
			FAIL() << "status " << st;
		}
		ASSERT_EQ(m.outside.load(), 0) << "seed " << seed << " i " << i;
	}
	printf("ok %d full %d bad %d too big %d\n", n_ok, n_full, n_bad, n_big);
	EXPECT_GT(n_ok, 0);
	EXPECT_GT(n_full, 0);
	EXPECT_GT(n_bad, 0);
	EXPECT_GT(n_big, 0);
}

// The payload cannot be written: the reserved room becomes a SKIP, so the
// queue moves on, and the push fails.
TEST_F(Fifo, FailedCopyPublishesASkip)
{
	Rec r;
	int skipped = 0;

	m.fail_write = 1;	/* 0: the qpn, 1: the payload */
	EXPECT_EQ(push(20, 1), MBCF_FIFO_FAULT);
	EXPECT_EQ(m.word(0), MBCF_FIFO_READY | MBCF_FIFO_SKIP | 20);
	EXPECT_EQ(*m.tailp(), 32u);
	ASSERT_EQ(push(20, 2), MBCF_FIFO_OK);
	ASSERT_TRUE(pop(m, &r, &skipped));
	EXPECT_EQ(r.data, bytes(20, 2));
	EXPECT_EQ(skipped, 1);
	EXPECT_EQ(*m.headp(), 64u);
}

// Every compare-and-swap lost: the loop ends after MBCF_FIFO_TRIES.
TEST_F(Fifo, LostRacesEndBusy)
{
	m.scribble = true;
	EXPECT_EQ(push(8), MBCF_FIFO_BUSY);
	EXPECT_EQ(m.cmpxchgs.load(), MBCF_FIFO_TRIES);
	EXPECT_EQ(m.writes.load(), 0);
	EXPECT_EQ(*m.tailp(), 0u);
	EXPECT_TRUE(m.area_zero());
}

// Another CPU reserves between our look at the tail and our swap: we lose
// the swap, look again and land after it.
TEST_F(Fifo, LostSwapLandsAfterTheWinner)
{
	Rec r;

	m.on_cmpxchg = [&] { ASSERT_EQ(push(bytes(16, 2), 2), MBCF_FIFO_OK); };
	ASSERT_EQ(push(bytes(8, 1), 1), MBCF_FIFO_OK);
	EXPECT_EQ(m.cmpxchgs.load(), 3);
	EXPECT_EQ(m.word(0), MBCF_FIFO_READY | 16);
	EXPECT_EQ(m.qpn(0), 2u);
	EXPECT_EQ(m.word(24), MBCF_FIFO_READY | 8);
	EXPECT_EQ(m.qpn(24), 1u);
	EXPECT_EQ(*m.tailp(), 40u);
	ASSERT_TRUE(pop(m, &r));
	EXPECT_EQ(r.qpn, 2u);
	ASSERT_TRUE(pop(m, &r));
	EXPECT_EQ(r.qpn, 1u);
}

// A later record published first: the consumer waits at the earlier one,
// which shows nothing until it is whole.
TEST_F(Fifo, PublishedOutOfOrderWaitsForTheEarlier)
{
	Rec r;
	bool seen_b = false;

	m.on_write = [&] {
		ASSERT_EQ(push(bytes(16, 2), 2), MBCF_FIFO_OK);
		EXPECT_EQ(m.word(0), 0u);	/* ours: reserved, not whole */
		EXPECT_EQ(m.word(16), MBCF_FIFO_READY | 16);
		EXPECT_FALSE(pop(m, &r));
		seen_b = true;
	};
	ASSERT_EQ(push(bytes(8, 1), 1), MBCF_FIFO_OK);
	EXPECT_TRUE(seen_b);
	ASSERT_TRUE(pop(m, &r));
	EXPECT_EQ(r.qpn, 1u);
	EXPECT_EQ(r.data, bytes(8, 1));
	ASSERT_TRUE(pop(m, &r));
	EXPECT_EQ(r.qpn, 2u);
	EXPECT_EQ(r.data, bytes(16, 2));
}

// Senders on several threads push into one small FIFO while a consumer
// drains it: every record exactly once, each sender's in order, content
// intact.  A sender refused (full, lost races) tries again, as STOP/GO
// makes the peer do.
TEST(FifoThreads, EverySenderInOrderExactlyOnce)
{
	constexpr int kSenders = 4, kPerSender = 5000;
	Mem m(256);
	mbcf_fifo f{256, 0, &kMem, &m};
	std::atomic<int> refused{0};
	std::vector<std::thread> th;

	for (int s = 0; s < kSenders; s++)
		th.emplace_back([&, s] {
			for (uint32_t q = 0; q < kPerSender; q++) {
				uint32_t len = 8 + (q * 13 + s * 5) % 90;
				std::vector<uint8_t> d = bytes(len, (uint8_t)(s * 31 + q));
				memcpy(d.data(), &q, 4);
				mbcf_iov iov = {d.data(), len};
				int st;
				while ((st = mbcf_fifo_push(&f, 100 + s, &iov, 1)) != MBCF_FIFO_OK) {
					ASSERT_TRUE(st == MBCF_FIFO_FULL || st == MBCF_FIFO_BUSY) << st;
					refused++;
					std::this_thread::yield();
				}
			}
		});

	uint32_t next[kSenders] = {};
	int total = 0, switches = 0, last = -1;
	Rec r;
	while (total < kSenders * kPerSender) {
		if (!pop(m, &r)) {
			std::this_thread::yield();
			continue;
		}
		int s = (int)r.qpn - 100;
		ASSERT_TRUE(s >= 0 && s < kSenders) << r.qpn;
		uint32_t q;
		ASSERT_GE(r.data.size(), 8u);
		memcpy(&q, r.data.data(), 4);
		ASSERT_EQ(q, next[s]) << "sender " << s;
		std::vector<uint8_t> want = bytes(8 + (q * 13 + s * 5) % 90, (uint8_t)(s * 31 + q));
		memcpy(want.data(), &q, 4);
		ASSERT_EQ(r.data, want) << "sender " << s << " record " << q;
		next[s]++;
		total++;
		switches += last >= 0 && last != s;
		last = s;
	}
	for (auto &t : th)
		t.join();
	for (int s = 0; s < kSenders; s++)
		EXPECT_EQ(next[s], (uint32_t)kPerSender);
	EXPECT_FALSE(pop(m, &r));
	EXPECT_EQ(*m.headp(), *m.tailp());
	EXPECT_TRUE(m.area_zero());
	EXPECT_EQ(m.outside.load(), 0);
	EXPECT_TRUE(m.guards_intact());
	printf("sender switches %d, refused %d\n", switches, refused.load());
	EXPECT_GT(switches, 0);
}

// ---- the signal (docs/protocol.md 16.5) ------------------------------------

// No signal flag: neither hook is ever called, whatever happens.
TEST_F(Fifo, NoSignalFlagNoSignal)
{
	Rec r;

	ASSERT_EQ(push(40), MBCF_FIFO_OK);
	ASSERT_TRUE(pop(m, &r));
	ASSERT_EQ(push(40), MBCF_FIFO_OK);
	m.fail_write = m.writes.load() + 1;
	EXPECT_EQ(push(8), MBCF_FIFO_FAULT);
	EXPECT_EQ(m.signals.load(), 0);
	EXPECT_EQ(m.mbs.load(), 0);
}

// SIGNAL: one event per record appended, each after its word is READY
// (the record whole, its length visible); no barrier asked for.
TEST_F(Fifo, SignalEveryAppendAfterThePublish)
{
	Rec r;
	uint32_t at = 0;

	f.flags = MBCF_FIFO_SIGNAL;
	m.on_signal = [&] {
		EXPECT_EQ(m.word(at), MBCF_FIFO_READY | 20) << "signalled at " << at;
		at += 32;
	};
	for (int i = 0; i < 5; i++)
		ASSERT_EQ(push(20, (uint8_t)i), MBCF_FIFO_OK);
	EXPECT_EQ(m.signals.load(), 5);
	EXPECT_EQ(at, 160u);
	ASSERT_TRUE(pop(m, &r));
	ASSERT_EQ(push(20), MBCF_FIFO_OK);
	EXPECT_EQ(m.signals.load(), 6);
	EXPECT_EQ(m.mbs.load(), 0);
}

// SIGNAL_EMPTY: only the append into an empty queue; once the consumer has
// taken everything, the next append signals again.
TEST_F(Fifo, SignalEmptyOnlyIntoAnEmptyQueue)
{
	Rec r;

	f.flags = MBCF_FIFO_SIGNAL_EMPTY;
	m.on_signal = [&] { EXPECT_EQ(m.word((uint32_t)*m.headp() & 255) &
				      MBCF_FIFO_READY, MBCF_FIFO_READY); };
	for (int i = 0; i < 4; i++)
		ASSERT_EQ(push(20, (uint8_t)i), MBCF_FIFO_OK);
	EXPECT_EQ(m.signals.load(), 1);
	EXPECT_EQ(m.mbs.load(), 4);	/* a barrier before each look */
	ASSERT_TRUE(pop(m, &r));	/* 3 left: not empty */
	ASSERT_EQ(push(20), MBCF_FIFO_OK);
	EXPECT_EQ(m.signals.load(), 1);
	while (pop(m, &r))
		;
	ASSERT_EQ(push(20), MBCF_FIFO_OK);
	EXPECT_EQ(m.signals.load(), 2);
	ASSERT_EQ(push(20), MBCF_FIFO_OK);
	EXPECT_EQ(m.signals.load(), 2);
}

// An environment without a barrier: SIGNAL_EMPTY sends nothing (its look at
// head could miss a consumer gone to sleep), SIGNAL still does; records
// are appended all the same.
TEST_F(Fifo, SignalEmptyWithoutBarrierSendsNone)
{
	mbcf_fifo_mem nomb = kMem;
	Rec r;

	nomb.mb = nullptr;
	f.mem = &nomb;
	f.flags = MBCF_FIFO_SIGNAL_EMPTY;
	ASSERT_EQ(push(20, 3), MBCF_FIFO_OK);
	ASSERT_EQ(push(20, 4), MBCF_FIFO_OK);
	EXPECT_EQ(m.signals.load(), 0);
	EXPECT_EQ(m.mbs.load(), 0);
	ASSERT_TRUE(pop(m, &r));
	EXPECT_EQ(r.data, bytes(20, 3));
	f.flags = MBCF_FIFO_SIGNAL;
	ASSERT_EQ(push(20, 5), MBCF_FIFO_OK);
	EXPECT_EQ(m.signals.load(), 1);
}

// The wrap: SIGNAL counts the record, never its SKIP; SIGNAL_EMPTY takes a
// queue whose consumer stands at the SKIP, or has already stepped over it
// and waits at the record's offset 0, as empty.
TEST_F(Fifo, SignalAcrossTheWrap)
{
	Rec r;

	f.flags = MBCF_FIFO_SIGNAL;
	set(168, 168);
	ASSERT_EQ(push(40), MBCF_FIFO_OK);
	ASSERT_EQ(push(56), MBCF_FIFO_OK);	/* SKIP at 216, record at 0 */
	EXPECT_EQ(m.word(216), MBCF_FIFO_READY | MBCF_FIFO_SKIP | 32);
	EXPECT_EQ(m.signals.load(), 2);

	Mem m2(256);
	mbcf_fifo f2{256, MBCF_FIFO_SIGNAL_EMPTY, &kMem, &m2};
	auto d = bytes(56, 4);
	mbcf_iov iov = {d.data(), 56};

	*m2.headp() = *m2.tailp() = 216;	/* empty, the consumer at 216 */
	ASSERT_EQ(mbcf_fifo_push(&f2, 1, &iov, 1), MBCF_FIFO_OK);
	EXPECT_EQ(m2.signals.load(), 1);
	ASSERT_TRUE(pop(m2, &r));
	EXPECT_EQ(*m2.headp(), 320u);
	/* again, the consumer steps over the SKIP while the payload is
	 * copied and waits at offset 0 (head = tail + pad) */
	*m2.headp() = *m2.tailp() = 216 + 256;
	m2.on_write = [&] {	/* the SKIP's qpn: not published yet */
		m2.on_write = [&] {	/* the record's qpn: the SKIP is */
			EXPECT_FALSE(pop(m2, &r));
			EXPECT_EQ(*m2.headp(), 512u);
		};
	};
	ASSERT_EQ(mbcf_fifo_push(&f2, 1, &iov, 1), MBCF_FIFO_OK);
	EXPECT_EQ(m2.signals.load(), 2);
	ASSERT_TRUE(pop(m2, &r));
	EXPECT_EQ(r.data, d);
	/* a record behind an unconsumed one across the wrap: no event */
	*m2.headp() = *m2.tailp() = 168 + 512;
	ASSERT_EQ(mbcf_fifo_push(&f2, 1, &iov, 1), MBCF_FIFO_OK);	/* 168..232 */
	ASSERT_EQ(mbcf_fifo_push(&f2, 1, &iov, 1), MBCF_FIFO_OK);	/* SKIP, 0..64 */
	EXPECT_EQ(m2.signals.load(), 3);
	EXPECT_EQ(m2.outside.load(), 0);
	EXPECT_TRUE(m2.guards_intact());
}

// The consumer takes the earlier record between our word and our look at
// head (at the barrier): it may be asleep already, so the record signals.
// And one the consumer has already taken by then signals nothing.
TEST_F(Fifo, SignalEmptyConsumerCatchingUpIsWoken)
{
	Rec r;

	f.flags = MBCF_FIFO_SIGNAL_EMPTY;
	ASSERT_EQ(push(20, 1), MBCF_FIFO_OK);
	EXPECT_EQ(m.signals.load(), 1);
	m.on_mb = [&] {
		ASSERT_TRUE(pop(m, &r));	/* the first; ours is READY */
		EXPECT_EQ(r.data, bytes(20, 1));
	};
	ASSERT_EQ(push(20, 2), MBCF_FIFO_OK);
	EXPECT_EQ(m.signals.load(), 2);
	m.on_mb = [&] {
		ASSERT_TRUE(pop(m, &r));
		EXPECT_EQ(r.data, bytes(20, 2));
		ASSERT_TRUE(pop(m, &r));	/* ours itself */
		EXPECT_EQ(r.data, bytes(20, 3));
	};
	ASSERT_EQ(push(20, 3), MBCF_FIFO_OK);
	EXPECT_EQ(m.signals.load(), 2);
	EXPECT_EQ(*m.headp(), 96u);
	EXPECT_FALSE(pop(m, &r));
}

// A push that is STOPped (full, lost races) publishes nothing and signals
// nothing, in either mode; nor does a malformed one (too big, a malformed
// control block).
TEST_F(Fifo, StoppedOrRefusedPushSignalsNothing)
{
	for (u32 fl : {MBCF_FIFO_SIGNAL, MBCF_FIFO_SIGNAL_EMPTY}) {
		Rec r;

		SCOPED_TRACE(fl);
		*m.headp() = *m.tailp() = 0;
		m.signals = 0;
		f.flags = fl;
		for (int i = 0; i < 4; i++)
			ASSERT_EQ(push(56), MBCF_FIFO_OK);	/* 4 x 64: full */
		EXPECT_EQ(m.signals.load(), fl == MBCF_FIFO_SIGNAL ? 4 : 1);
		EXPECT_EQ(push(8), MBCF_FIFO_FULL);
		EXPECT_EQ(push(129), MBCF_FIFO_TOO_BIG);
		EXPECT_EQ(m.signals.load(), fl == MBCF_FIFO_SIGNAL ? 4 : 1);
		while (pop(m, &r))
			;
		*m.waitp() = 0;
		m.scribble = true;
		EXPECT_EQ(push(8), MBCF_FIFO_BUSY);
		m.scribble = false;
		set(256, 260);	/* odd tail */
		EXPECT_EQ(push(8), MBCF_FIFO_BAD_CTRL);
		set(264, 256);	/* head after tail */
		EXPECT_EQ(push(8), MBCF_FIFO_BAD_CTRL);
		EXPECT_EQ(m.signals.load(), fl == MBCF_FIFO_SIGNAL ? 4 : 1);
		EXPECT_EQ(*m.tailp(), 256u);
		EXPECT_TRUE(m.area_zero());
	}
}

// A payload that cannot be written: its SKIP is nothing for the consumer,
// so SIGNAL sends nothing; SIGNAL_EMPTY signals it if the consumer waits
// at it (the next record, behind the SKIP, would not find the queue empty).
TEST_F(Fifo, FailedCopySignals)
{
	Rec r;

	f.flags = MBCF_FIFO_SIGNAL;
	m.fail_write = 1;
	EXPECT_EQ(push(20, 1), MBCF_FIFO_FAULT);
	EXPECT_EQ(m.signals.load(), 0);
	ASSERT_EQ(push(20, 2), MBCF_FIFO_OK);
	EXPECT_EQ(m.signals.load(), 1);
	while (pop(m, &r))
		;

	f.flags = MBCF_FIFO_SIGNAL_EMPTY;
	m.fail_write = m.writes.load() + 1;
	EXPECT_EQ(push(20, 3), MBCF_FIFO_FAULT);	/* into the empty queue */
	EXPECT_EQ(m.signals.load(), 2);
	ASSERT_EQ(push(20, 4), MBCF_FIFO_OK);	/* behind the SKIP */
	EXPECT_EQ(m.signals.load(), 2);
	int skipped = 0;
	ASSERT_TRUE(pop(m, &r, &skipped));
	EXPECT_EQ(r.data, bytes(20, 4));
	EXPECT_EQ(skipped, 1);
	m.fail_write = m.writes.load() + 3;	/* the second push's payload */
	ASSERT_EQ(push(20, 5), MBCF_FIFO_OK);	/* into the empty queue */
	EXPECT_EQ(push(20, 6), MBCF_FIFO_FAULT);	/* behind a record */
	EXPECT_EQ(m.signals.load(), 3);
}

// A SIGNAL flag but no hooks (an environment without signals): nothing
// is called.
TEST_F(Fifo, SignalWithoutHooks)
{
	const mbcf_fifo_mem bare = {
		mem_head, mem_tail, mem_cmpxchg, mem_set_wait, mem_write,
		mem_publish, nullptr, nullptr,
	};

	f.mem = &bare;
	f.flags = MBCF_FIFO_SIGNAL_EMPTY;
	ASSERT_EQ(push(20), MBCF_FIFO_OK);
	f.flags = MBCF_FIFO_SIGNAL;
	ASSERT_EQ(push(20), MBCF_FIFO_OK);
	EXPECT_EQ(m.mbs.load(), 0);
	EXPECT_EQ(m.signals.load(), 0);
}

// Senders on several threads push into a SIGNAL_EMPTY FIFO; the consumer
// drains it, then sleeps until the next event (as in poll() on an
// eventfd).  It is never left asleep with records in the queue: a lost
// wakeup would show as a timeout with senders done and records unread.
// Then the same with SIGNAL: exactly one event per record.
void SleepingConsumer(u32 flags)
{
	constexpr int kSenders = 3, kPerSender = 3000;
	Mem m(512);
	mbcf_fifo f{512, flags, &kMem, &m};
	std::atomic<int> sent{0};
	std::vector<std::thread> th;
	uint64_t events = 0;
	int got = 0, sleeps = 0;
	bool lost = false;

	for (int s = 0; s < kSenders; s++)
		th.emplace_back([&, s] {
			for (uint32_t q = 0; q < kPerSender; q++) {
				std::vector<uint8_t> d = bytes(8 + q % 40, (uint8_t)q);
				mbcf_iov iov = {d.data(), (u32)d.size()};
				int st;

				while ((st = mbcf_fifo_push(&f, 100 + s, &iov, 1)) != MBCF_FIFO_OK) {
					ASSERT_TRUE(st == MBCF_FIFO_FULL || st == MBCF_FIFO_BUSY) << st;
					std::this_thread::yield();
				}
				sent++;
				if (q % 64 == 0)
					std::this_thread::sleep_for(std::chrono::microseconds(50));
			}
		});
	Rec r;
	while (got < kSenders * kPerSender) {
		while (pop(m, &r))
			got++;
		/* the consumer's half of 16.5: head stored, a full barrier,
		 * then the word at head looked at once more */
		__atomic_thread_fence(__ATOMIC_SEQ_CST);
		if (pop(m, &r)) {
			got++;
			continue;
		}
		if (got == kSenders * kPerSender)
			break;
		if (lost) {	/* failed already: drain, so the senders end */
			std::this_thread::yield();
			continue;
		}
		std::unique_lock<std::mutex> l(m.mu);
		if (!m.cv.wait_for(l, std::chrono::seconds(3), [&] { return m.events > 0; })) {
			ADD_FAILURE() << "lost wakeup: " << got << " popped, " << sent.load()
				      << " sent, tail " << *m.tailp() << " head " << *m.headp();
			lost = true;
			continue;
		}
		events += m.events;
		m.events = 0;
		sleeps++;
	}
	for (auto &t : th)
		t.join();
	{
		std::lock_guard<std::mutex> l(m.mu);
		events += m.events;
	}
	EXPECT_EQ(got, kSenders * kPerSender);
	EXPECT_FALSE(pop(m, &r));
	EXPECT_EQ(m.outside.load(), 0);
	if (flags & MBCF_FIFO_SIGNAL)
		EXPECT_EQ(events, (uint64_t)kSenders * kPerSender);
	else
		EXPECT_LE(events, (uint64_t)kSenders * kPerSender);
	printf("flags %#x: %d records, %llu events, %d sleeps\n", flags, got,
	       (unsigned long long)events, sleeps);
}

TEST(FifoThreads, SignalEmptyNeverLeavesTheConsumerAsleep)
{
	SleepingConsumer(MBCF_FIFO_SIGNAL_EMPTY);
}

TEST(FifoThreads, SignalOneEventPerRecord)
{
	SleepingConsumer(MBCF_FIFO_SIGNAL);
}

}  // namespace
