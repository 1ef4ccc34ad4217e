// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
// include/mbcf/ring.h driven from both ends in one process: the producer
// end as the provider (SQ/RQ) or the kernel (CQ) uses it, the consumer end
// as the other side does.  Layout, FIFO order, full/empty, the wrap of the
// free-running indices at 2^32, rejection of impossible peer indices, and
// the doorbell protocol under a two-thread stress test.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

extern "C" {
#include <mbcf/ring.h>
}

namespace {

// One ring's shared memory plus a producer and a consumer end on it.
struct Ring {
	uint32_t n, stride;
	std::vector<uint64_t> mem;	// 8-byte aligned, zeroed like the kernel's
	mbcf_ring_end prod{}, cons{};

	Ring(uint32_t num_entries, uint32_t entry_stride, uint32_t start = 0)
		: n(num_entries), stride(entry_stride),
		  mem((MBCF_RING_ENTRIES_OFF + uint64_t(num_entries) * entry_stride) / 8)
	{
		mbcf_ring_init(&prod, mem.data(), n, stride, start);
		mbcf_ring_init(&cons, mem.data(), n, stride, start);
		*mbcf_ring_prod(&prod) = start;
		*mbcf_ring_cons(&cons) = start;
	}
	uint8_t *base() { return reinterpret_cast<uint8_t *>(mem.data()); }
	uint32_t &prod_word() { return *mbcf_ring_prod(&prod); }
	uint32_t &cons_word() { return *mbcf_ring_cons(&cons); }
	uint32_t &db_word() { return *mbcf_ring_db(&cons); }

	// Producer side: one entry carrying v, or false if none is free.
	bool push(uint64_t v)
	{
		bool corrupt = true;
		void *slot = mbcf_ring_produce_slot(&prod, &corrupt);
		EXPECT_FALSE(corrupt);
		if (!slot)
			return false;
		memcpy(slot, &v, sizeof(v));
		mbcf_ring_produce(&prod);
		return true;
	}
	// Consumer side: the oldest entry into *v, or false if none.
	bool pop(uint64_t *v)
	{
		bool corrupt = true;
		void *slot = mbcf_ring_consume_slot(&cons, &corrupt);
		EXPECT_FALSE(corrupt);
		if (!slot)
			return false;
		memcpy(v, slot, sizeof(*v));
		mbcf_ring_consume(&cons);
		return true;
	}
};

TEST(Ring, LayoutMatchesTheAbi)
{
	Ring r(8, 48);
	uint8_t *b = r.base();

	EXPECT_EQ(reinterpret_cast<uint8_t *>(mbcf_ring_prod(&r.prod)), b + 0);
	EXPECT_EQ(reinterpret_cast<uint8_t *>(mbcf_ring_cons(&r.prod)), b + 64);
	EXPECT_EQ(reinterpret_cast<uint8_t *>(mbcf_ring_db(&r.prod)), b + 128);
	for (uint32_t i = 0; i < 20; i++)
		EXPECT_EQ(static_cast<uint8_t *>(mbcf_ring_entry(&r.prod, i)),
			  b + 256 + (i % 8) * 48) << i;
	// Indices far apart on the 2^32 circle still land on entry i & mask.
	EXPECT_EQ(static_cast<uint8_t *>(mbcf_ring_entry(&r.prod, 0xffffffffu)),
		  b + 256 + 7 * 48);
	// The same sizes and offsets as the C compilers of both sides see.
	EXPECT_EQ(sizeof(mbcf_send_wqe), 56u);
	EXPECT_EQ(offsetof(mbcf_send_wqe, sge), 56u);
	EXPECT_EQ(offsetof(mbcf_send_wqe, inline_data), 56u);
	EXPECT_EQ(sizeof(mbcf_recv_wqe), 16u);
	EXPECT_EQ(offsetof(mbcf_recv_wqe, sge), 16u);
	EXPECT_EQ(sizeof(mbcf_sge), 16u);
	EXPECT_EQ(sizeof(mbcf_ring_info) % 8, 0u);
}

TEST(Ring, EmptyRingGivesNothing)
{
	Ring r(4, 16);
	bool corrupt = true;

	EXPECT_EQ(mbcf_ring_consume_slot(&r.cons, &corrupt), nullptr);
	EXPECT_FALSE(corrupt);
	corrupt = true;
	EXPECT_NE(mbcf_ring_produce_slot(&r.prod, &corrupt), nullptr);
	EXPECT_FALSE(corrupt);
}

TEST(Ring, FifoAndPublishedIndices)
{
	Ring r(4, 16);
	uint64_t v;

	for (uint64_t i = 0; i < 100; i++) {
		ASSERT_TRUE(r.push(1000 + i));
		EXPECT_EQ(r.prod_word(), uint32_t(i + 1));
		EXPECT_EQ(r.prod.idx, uint32_t(i + 1));
		ASSERT_TRUE(r.pop(&v));
		EXPECT_EQ(v, 1000 + i);
		EXPECT_EQ(r.cons_word(), uint32_t(i + 1));
		EXPECT_FALSE(r.pop(&v));
	}
}

TEST(Ring, FullRingRefusesThenFreesOneSlot)
{
	for (uint32_t n : {1u, 2u, 8u, 256u}) {
		Ring r(n, 16);
		uint64_t v;

		for (uint32_t i = 0; i < n; i++)
			ASSERT_TRUE(r.push(i)) << n;
		bool corrupt = true;
		EXPECT_EQ(mbcf_ring_produce_slot(&r.prod, &corrupt), nullptr) << n;
		EXPECT_FALSE(corrupt) << "full is not corrupt, n=" << n;
		EXPECT_FALSE(r.push(99));
		// Refusing must not have moved anything.
		EXPECT_EQ(r.prod_word(), n);

		ASSERT_TRUE(r.pop(&v));
		EXPECT_EQ(v, 0u);
		ASSERT_TRUE(r.push(n));
		EXPECT_FALSE(r.push(n + 1));
		for (uint32_t i = 1; i <= n; i++) {
			ASSERT_TRUE(r.pop(&v));
			EXPECT_EQ(v, i);
		}
		EXPECT_FALSE(r.pop(&v));
	}
}

TEST(Ring, IndicesWrapAt2Pow32)
{
	// Start 5 short of the wrap; run many laps across it.
	for (uint32_t start : {0xfffffffbu, 0xffffffffu, 0x7ffffffeu}) {
		Ring r(8, 32, start);
		uint64_t v, next_in = 0, next_out = 0;

		for (int round = 0; round < 10; round++) {
			// Fill completely (crossing the wrap with a full ring).
			while (r.push(next_in))
				next_in++;
			EXPECT_EQ(uint32_t(r.prod.idx - r.cons.idx), 8u);
			EXPECT_EQ(r.prod_word(), r.prod.idx);
			// Drain all but three, so the next fill straddles again.
			for (int k = 0; k < 5; k++) {
				ASSERT_TRUE(r.pop(&v));
				EXPECT_EQ(v, next_out++);
			}
		}
		while (r.pop(&v))
			EXPECT_EQ(v, next_out++);
		EXPECT_EQ(next_out, next_in);
		EXPECT_EQ(r.prod.idx, uint32_t(start + next_in));
		EXPECT_EQ(r.cons_word(), uint32_t(start + next_in));
	}
}

TEST(Ring, ConsumerRejectsImpossibleProducerIndex)
{
	Ring r(8, 16, 0xfffffffeu);
	bool corrupt;
	const uint32_t c = r.cons.idx;

	struct {
		uint32_t prod;
		bool corrupt;
		bool entry;
	} cases[] = {
		{c, false, false},		// empty
		{c + 1, false, true},
		{c + 8, false, true},		// exactly full
		{c + 9, true, false},		// more than the ring holds
		{c + 0x80000000u, true, false},
		{c - 1, true, false},		// behind the consumer
	};
	for (auto &t : cases) {
		r.prod_word() = t.prod;
		corrupt = !t.corrupt;
		void *slot = mbcf_ring_consume_slot(&r.cons, &corrupt);
		EXPECT_EQ(corrupt, t.corrupt) << std::hex << t.prod;
		EXPECT_EQ(slot != nullptr, t.entry) << std::hex << t.prod;
		// Whatever the peer wrote, we never point outside the entries.
		if (slot) {
			EXPECT_GE(static_cast<uint8_t *>(slot), r.base() + 256);
			EXPECT_LT(static_cast<uint8_t *>(slot), r.base() + 256 + 8 * 16);
		}
		EXPECT_EQ(r.cons.idx, c) << "a look must not consume";
	}
}

TEST(Ring, ProducerRejectsImpossibleConsumerIndex)
{
	Ring r(8, 16, 0xfffffffcu);
	for (int i = 0; i < 6; i++)
		ASSERT_TRUE(r.push(i));	// prod = start + 6, across the wrap
	const uint32_t p = r.prod.idx;
	bool corrupt;

	struct {
		uint32_t cons;
		bool corrupt;
		bool slot;
	} cases[] = {
		{p, false, true},		// empty
		{p - 6, false, true},		// the truth
		{p - 8, false, false},		// full
		{p - 9, true, false},		// claims more than the ring holds
		{p + 1, true, false},		// consumer ahead of the producer
		{p + 0x80000000u, true, false},
	};
	for (auto &t : cases) {
		r.cons_word() = t.cons;
		corrupt = !t.corrupt;
		void *slot = mbcf_ring_produce_slot(&r.prod, &corrupt);
		EXPECT_EQ(corrupt, t.corrupt) << std::hex << t.cons;
		EXPECT_EQ(slot != nullptr, t.slot) << std::hex << t.cons;
		EXPECT_EQ(r.prod.idx, p);
	}
}

TEST(Ring, DoorbellFlagSingleThreaded)
{
	Ring r(4, 16);
	uint64_t v;

	// Fresh ring: the consumer has not gone idle, no doorbell needed.
	EXPECT_FALSE(mbcf_ring_producer_wants_doorbell(&r.prod));

	// Consumer idles on an empty ring: the producer must ring.
	EXPECT_TRUE(mbcf_ring_consumer_idle(&r.cons));
	EXPECT_EQ(r.db_word(), 1u);
	ASSERT_TRUE(r.push(1));
	EXPECT_TRUE(mbcf_ring_producer_wants_doorbell(&r.prod));

	// The doorbell wakes it: busy again, no further doorbells.
	mbcf_ring_consumer_busy(&r.cons);
	EXPECT_EQ(r.db_word(), 0u);
	ASSERT_TRUE(r.push(2));
	EXPECT_FALSE(mbcf_ring_producer_wants_doorbell(&r.prod));

	// Idling with work pending is refused and leaves the flag clear.
	EXPECT_FALSE(mbcf_ring_consumer_idle(&r.cons));
	EXPECT_EQ(r.db_word(), 0u);
	ASSERT_TRUE(r.pop(&v));
	ASSERT_TRUE(r.pop(&v));
	EXPECT_TRUE(mbcf_ring_consumer_idle(&r.cons));
}

// A counting doorbell: the "system call" the producer makes.
struct Doorbell {
	std::mutex m;
	std::condition_variable cv;
	uint64_t rung = 0, taken = 0;

	void ring()
	{
		std::lock_guard<std::mutex> g(m);
		rung++;
		cv.notify_one();
	}
	// False if nobody rang within the timeout.
	bool wait(std::chrono::seconds timeout)
	{
		std::unique_lock<std::mutex> g(m);
		if (!cv.wait_for(g, timeout, [&] { return rung > taken; }))
			return false;
		taken = rung;	// extra rings while we slept coalesce
		return true;
	}
};

// Both ends on their own thread, as the provider and the kernel run.  The
// consumer sleeps whenever mbcf_ring_consumer_idle() lets it, and only a
// doorbell wakes it: a lost doorbell leaves entries in the ring with the
// consumer asleep, which the timeout turns into a failure.  Every entry
// carries its sequence number over the whole stride, so a torn or
// unpublished entry (a missing release/acquire) fails too.
static void stress(uint32_t n, uint32_t stride, uint32_t start, uint64_t total,
		   unsigned seed)
{
	Ring r(n, stride, start);
	Doorbell db;
	std::atomic<bool> failed{false};
	uint64_t sleeps = 0, doorbells = 0, full_spins = 0;

	std::thread consumer([&] {
		uint64_t expect = 0;

		while (expect < total && !failed) {
			bool corrupt = false;
			void *slot = mbcf_ring_consume_slot(&r.cons, &corrupt);

			if (corrupt) {
				ADD_FAILURE() << "consumer saw a corrupt index";
				failed = true;
				break;
			}
			if (slot) {
				const uint8_t *b = static_cast<const uint8_t *>(slot);
				uint64_t seq;

				memcpy(&seq, b, 8);
				if (seq != expect) {
					ADD_FAILURE() << "entry " << expect << " read as " << seq;
					failed = true;
					break;
				}
				for (uint32_t k = 8; k < stride; k++)
					if (b[k] != uint8_t(seq * 31 + k)) {
						ADD_FAILURE() << "entry " << seq << " torn at byte " << k;
						failed = true;
						break;
					}
				mbcf_ring_consume(&r.cons);
				expect++;
				continue;
			}
			if (!mbcf_ring_consumer_idle(&r.cons))
				continue;	// something arrived meanwhile
			sleeps++;
			if (!db.wait(std::chrono::seconds(20))) {
				ADD_FAILURE() << "lost doorbell: consumer idle at "
					      << r.cons.idx << ", producer at "
					      << mbcf_ring_load_acquire(mbcf_ring_prod(&r.cons))
					      << " after " << expect << " entries";
				failed = true;
				break;
			}
			mbcf_ring_consumer_busy(&r.cons);
		}
	});

	std::mt19937 rng(seed);
	uint64_t seq = 0;
	while (seq < total && !failed) {
		// A random batch, then the doorbell check, as post_send does.
		uint32_t batch = 1 + rng() % (n + 2);
		uint32_t posted = 0;

		for (; posted < batch && seq < total; posted++) {
			bool corrupt = false;
			uint8_t *b = static_cast<uint8_t *>(
				mbcf_ring_produce_slot(&r.prod, &corrupt));

			if (corrupt) {
				ADD_FAILURE() << "producer saw a corrupt index";
				failed = true;
				break;
			}
			if (!b)
				break;	// full: ring what we have, retry later
			memcpy(b, &seq, 8);
			for (uint32_t k = 8; k < stride; k++)
				b[k] = uint8_t(seq * 31 + k);
			mbcf_ring_produce(&r.prod);
			seq++;
		}
		if (posted && mbcf_ring_producer_wants_doorbell(&r.prod)) {
			doorbells++;
			db.ring();
		}
		if (posted < batch) {
			full_spins++;
			std::this_thread::yield();
		} else if (rng() % 8 == 0) {
			std::this_thread::yield();	// let the consumer go idle
		}
	}
	consumer.join();

	EXPECT_FALSE(failed);
	EXPECT_EQ(r.cons.idx, uint32_t(start + total));
	EXPECT_EQ(mbcf_ring_load(mbcf_ring_cons(&r.prod)), uint32_t(start + total));
	// The interesting path (sleep, doorbell, wake) must have been taken.
	EXPECT_GT(sleeps, 0u);
	EXPECT_GT(doorbells, 0u);
	::testing::Test::RecordProperty("sleeps", std::to_string(sleeps));
	::testing::Test::RecordProperty("doorbells", std::to_string(doorbells));
	::testing::Test::RecordProperty("full_spins", std::to_string(full_spins));
}

// The doorbell protocol is Dekker's: each side stores its flag (prod,
// db_needed) and then loads the other's.  Without the full barriers a
// store-buffering CPU (x86 included) lets both loads see the old values:
// the producer skips the doorbell while the consumer goes to sleep.  This
// litmus test races the two halves head-on, many times, and asserts that
// at least one side always sees the other.
TEST(RingStress, DoorbellStoreBufferLitmus)
{
#if defined(__SANITIZE_THREAD__)
	GTEST_SKIP() << "ThreadSanitizer does not model fences; slow here";
#endif
	const uint32_t rounds = 50000;
	Ring r(4, 16);
	std::atomic<uint32_t> go{0}, done{0};
	std::vector<uint8_t> idle(rounds + 1);
	uint32_t lost = 0, both = 0;

	std::thread consumer([&] {
		std::mt19937 rng(7);
		for (uint32_t i = 1; i <= rounds; i++) {
			while (go.load(std::memory_order_acquire) != i)
				;
			for (volatile uint32_t d = rng() % 8; d; d = d - 1)
				;
			idle[i] = mbcf_ring_consumer_idle(&r.cons);
			done.store(i, std::memory_order_release);
		}
	});

	std::mt19937 rng(8);
	uint64_t v;
	for (uint32_t i = 1; i <= rounds; i++) {
		// Reset while the consumer is parked: empty ring, consumer busy.
		while (r.pop(&v))
			;
		mbcf_ring_consumer_busy(&r.cons);
		go.store(i, std::memory_order_release);
		for (volatile uint32_t d = rng() % 8; d; d = d - 1)
			;
		ASSERT_TRUE(r.push(i));
		bool ring = mbcf_ring_producer_wants_doorbell(&r.prod);
		while (done.load(std::memory_order_acquire) != i)
			;
		if (idle[i] && !ring)
			lost++;
		if (idle[i] && ring)
			both++;
	}
	consumer.join();
	EXPECT_EQ(lost, 0u) << "doorbells lost in " << rounds << " rounds";
	::testing::Test::RecordProperty("idle_and_rung", std::to_string(both));
}

TEST(RingStress, DoorbellNeverLostSmallRing)
{
	stress(4, 64, 0, 200000, 1);
}

TEST(RingStress, DoorbellNeverLostAcrossWrap)
{
	// Starts 1000 entries short of 2^32: the wrap happens mid-run.
	stress(16, 48, 0xffffffffu - 1000, 200000, 2);
}

TEST(RingStress, SingleEntryRing)
{
	stress(1, 16, 0x80000000u, 50000, 3);
}

} // namespace
