// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * mbcf_mpi_check: an MPI program for two ranks that checks every byte it
 * moves (tests/vm/mpi.sh runs it with Open MPI's pml ucx over mbcf).
 *
 *   1. ping-pong, sizes 1 B .. 1 MiB: rank 0 sends a pattern that depends on
 *      (size, iteration, direction), rank 1 checks it byte for byte and the
 *      received count, answers with its own pattern, rank 0 checks that;
 *   2. MPI_Allreduce (sum of int64 and of double, and max), 1 .. 131072
 *      elements, every element compared with the exact expected value;
 *   3. one-sided (MPI_Win_create; osc ucx in the test): MPI_Put into the
 *      peer's window and MPI_Get from it, under fences and under passive
 *      target lock/unlock, sizes 8 B .. 1 MiB, checked on both sides; and
 *      MPI_Fetch_and_op / MPI_Compare_and_swap on a counter.
 *
 * Each part prints one line per case, "ok ..." or "FAIL ...", and rank 0
 * ends with
 *   mbcf_mpi_check: N checks, F failed, B bytes moved
 * (B: payload bytes sent between the two ranks, both directions, all parts).
 * The exit status is 0 only if every check on both ranks passed.
 *
 * Options: -q (quick: fewer iterations), -n ITERS (ping-pong iterations for
 * small sizes; default 20), -p SIZE (only a ping-pong of SIZE bytes: 10
 * warm-up rounds, then ITERS rounds, checked as above; for bench/guest.sh).
 */
#include <mpi.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int rank;
static long checks, failures;
static unsigned long long bytes_moved;

static void result(int ok, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void result(int ok, const char *fmt, ...)
{
	va_list ap;

	checks++;
	if (!ok)
		failures++;
	/* Rank 0 reports passes; either rank reports its own failures. */
	if (ok && rank != 0)
		return;
	printf("%s rank %d: ", ok ? "ok" : "FAIL", rank);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
	fflush(stdout);
}

/* A byte pattern no two (size, iteration, direction) cases share. */
static unsigned char pat(size_t i, size_t size, int iter, int dir)
{
	uint64_t x = (uint64_t)i * 0x9e3779b97f4a7c15ull ^
		     (uint64_t)size * 0xbf58476d1ce4e5b9ull ^
		     (uint64_t)iter * 0x94d049bb133111ebull ^ (uint64_t)dir << 7;

	x ^= x >> 31;
	return (unsigned char)(x ^ x >> 17);
}

static void fill(unsigned char *b, size_t size, int iter, int dir)
{
	for (size_t i = 0; i < size; i++)
		b[i] = pat(i, size, iter, dir);
}

/* Index of the first wrong byte, or -1. */
static long verify(const unsigned char *b, size_t size, int iter, int dir)
{
	for (size_t i = 0; i < size; i++)
		if (b[i] != pat(i, size, iter, dir))
			return (long)i;
	return -1;
}

static void pingpong(size_t size, int iters)
{
	unsigned char *buf = malloc(size);
	int peer = 1 - rank, bad = 0, count;
	long where = -1;
	double t0, dt;
	MPI_Status st;

	if (!buf) {
		result(0, "pingpong %zu: malloc", size);
		return;
	}
	MPI_Barrier(MPI_COMM_WORLD);
	t0 = MPI_Wtime();
	for (int it = 0; it < iters; it++) {
		if (rank == 0) {
			fill(buf, size, it, 0);
			MPI_Send(buf, (int)size, MPI_BYTE, peer, it, MPI_COMM_WORLD);
			memset(buf, 0, size);
			MPI_Recv(buf, (int)size, MPI_BYTE, peer, it, MPI_COMM_WORLD, &st);
			MPI_Get_count(&st, MPI_BYTE, &count);
			if (!bad && ((size_t)count != size ||
				     (where = verify(buf, size, it, 1)) >= 0))
				bad++;
		} else {
			memset(buf, 0, size);
			MPI_Recv(buf, (int)size, MPI_BYTE, peer, it, MPI_COMM_WORLD, &st);
			MPI_Get_count(&st, MPI_BYTE, &count);
			if (!bad && ((size_t)count != size ||
				     (where = verify(buf, size, it, 0)) >= 0))
				bad++;
			/* every round runs on either side: a mismatch is
			 * counted, never a reason to leave the peer waiting */
			fill(buf, size, it, 1);
			MPI_Send(buf, (int)size, MPI_BYTE, peer, it, MPI_COMM_WORLD);
		}
	}
	dt = MPI_Wtime() - t0;
	/* both ranks agree on the verdict, so neither waits for the other */
	MPI_Allreduce(MPI_IN_PLACE, &bad, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
	bytes_moved += 2ull * size * (unsigned long long)iters;
	if (bad)
		result(0, "pingpong %8zu B: data mismatch (count %d, first bad byte %ld)",
		       size, count, where);
	else
		result(1, "pingpong %8zu B x %4d: data verified, half round trip %.1f us",
		       size, iters, dt / iters / 2 * 1e6);
	free(buf);
}

static void allreduce(int n)
{
	int64_t *a = malloc(n * sizeof(*a)), *asum = malloc(n * sizeof(*a));
	double *d = malloc(n * sizeof(*d)), *dsum = malloc(n * sizeof(*d));
	int64_t *amax = malloc(n * sizeof(*a));
	long bad = -1;

	if (!a || !asum || !d || !dsum || !amax) {
		result(0, "allreduce %d: malloc", n);
		goto out;
	}
	for (int i = 0; i < n; i++) {
		a[i] = (int64_t)(rank + 1) * 1000003 * (i + 1) - (rank ? 7 : (1ll << 40));
		d[i] = (rank + 1) * 0.5 + i;	/* exact in binary */
	}
	MPI_Allreduce(a, asum, n, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
	MPI_Allreduce(d, dsum, n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
	MPI_Allreduce(a, amax, n, MPI_INT64_T, MPI_MAX, MPI_COMM_WORLD);
	for (int i = 0; i < n && bad < 0; i++) {
		int64_t r0 = 1ll * 1000003 * (i + 1) - (1ll << 40);
		int64_t r1 = 2ll * 1000003 * (i + 1) - 7;

		if (asum[i] != r0 + r1 || amax[i] != (r0 > r1 ? r0 : r1) ||
		    dsum[i] != 0.5 + i + 1.0 + i)
			bad = i;
	}
	/* each rank sends its vector of three reductions at least once */
	bytes_moved += 2ull * 3 * n * 8;
	MPI_Allreduce(MPI_IN_PLACE, &bad, 1, MPI_LONG, MPI_MAX, MPI_COMM_WORLD);
	if (bad >= 0)
		result(0, "allreduce %6d elements: wrong at element %ld", n, bad);
	else
		result(1, "allreduce %6d elements (int64 sum, double sum, int64 max): exact", n);
out:
	free(a);
	free(asum);
	free(d);
	free(dsum);
	free(amax);
}

/*
 * One-sided: a window of WIN bytes on each rank.  Rank 0 puts a pattern into
 * rank 1's window; rank 1 checks its own memory.  Rank 1 gets rank 0's
 * window (filled locally by rank 0) and checks what arrived.  Once with
 * fences (active target), once with lock/unlock (passive target).
 */
#define WIN (1u << 20)

static void onesided(MPI_Win win, unsigned char *mem, size_t size, int it, int passive)
{
	unsigned char *tmp = malloc(size);
	const char *mode = passive ? "lock" : "fence";
	long where = -1;
	int bad = 0;

	if (!tmp) {
		result(0, "rma %zu: malloc", size);
		return;
	}
	/* put: rank 0 -> rank 1's window */
	memset(mem, 0, WIN);
	if (rank == 0)
		fill(tmp, size, it, 2);
	MPI_Barrier(MPI_COMM_WORLD);
	if (passive) {
		if (rank == 0) {
			MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 1, 0, win);
			MPI_Put(tmp, (int)size, MPI_BYTE, 1, 0, (int)size, MPI_BYTE, win);
			MPI_Win_unlock(1, win);
		}
		MPI_Barrier(MPI_COMM_WORLD);
		if (rank == 1) {	/* see the window as a local access epoch */
			MPI_Win_lock(MPI_LOCK_SHARED, 1, 0, win);
			where = verify(mem, size, it, 2);
			MPI_Win_unlock(1, win);
		}
	} else {
		MPI_Win_fence(0, win);
		if (rank == 0)
			MPI_Put(tmp, (int)size, MPI_BYTE, 1, 0, (int)size, MPI_BYTE, win);
		MPI_Win_fence(0, win);
		if (rank == 1)
			where = verify(mem, size, it, 2);
	}
	bad = where >= 0;
	MPI_Allreduce(MPI_IN_PLACE, &bad, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
	bytes_moved += size;
	if (bad)
		result(0, "MPI_Put %7zu B (%s): rank 1's window wrong at byte %ld", size, mode, where);
	else
		result(1, "MPI_Put %7zu B (%s): target memory verified", size, mode);

	/* get: rank 1 <- rank 0's window */
	where = -1;
	if (rank == 0)
		fill(mem, size, it, 3);
	memset(tmp, 0, size);
	MPI_Barrier(MPI_COMM_WORLD);
	if (passive) {
		if (rank == 1) {
			MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, win);
			MPI_Get(tmp, (int)size, MPI_BYTE, 0, 0, (int)size, MPI_BYTE, win);
			MPI_Win_unlock(0, win);
		}
	} else {
		MPI_Win_fence(0, win);
		if (rank == 1)
			MPI_Get(tmp, (int)size, MPI_BYTE, 0, 0, (int)size, MPI_BYTE, win);
		MPI_Win_fence(0, win);
	}
	if (rank == 1)
		where = verify(tmp, size, it, 3);
	bad = where >= 0;
	MPI_Allreduce(MPI_IN_PLACE, &bad, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
	bytes_moved += size;
	if (bad)
		result(0, "MPI_Get %7zu B (%s): wrong at byte %ld", size, mode, where);
	else
		result(1, "MPI_Get %7zu B (%s): data verified", size, mode);
	free(tmp);
}

/* Rank 1 adds 1..K to a counter in rank 0's window with MPI_Fetch_and_op
 * and takes it over with MPI_Compare_and_swap; every fetched value is
 * checked. */
static void atomics(MPI_Win win, unsigned char *mem, int k)
{
	int64_t *ctr = (int64_t *)mem, one, old, expect = 0, cmp, swp;
	int bad = 0;

	if (rank == 0)
		*ctr = 0;
	MPI_Barrier(MPI_COMM_WORLD);
	if (rank == 1) {
		MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, win);
		for (int i = 1; i <= k && !bad; i++) {
			one = i;
			MPI_Fetch_and_op(&one, &old, MPI_INT64_T, 0, 0, MPI_SUM, win);
			MPI_Win_flush(0, win);
			if (old != expect)
				bad = 1;
			expect += i;
		}
		/* wrong compare value: no swap; right one: swap */
		cmp = expect + 1;
		swp = -5;
		MPI_Compare_and_swap(&swp, &cmp, &old, MPI_INT64_T, 0, 0, win);
		MPI_Win_flush(0, win);
		if (old != expect)
			bad = 1;
		cmp = expect;
		MPI_Compare_and_swap(&swp, &cmp, &old, MPI_INT64_T, 0, 0, win);
		MPI_Win_flush(0, win);
		if (old != expect)
			bad = 1;
		MPI_Win_unlock(0, win);
	}
	MPI_Barrier(MPI_COMM_WORLD);
	if (rank == 0) {
		MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, win);
		if (*ctr != -5)
			bad = 1;
		MPI_Win_unlock(0, win);
	}
	MPI_Allreduce(MPI_IN_PLACE, &bad, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
	bytes_moved += 16ull * (k + 2);
	if (bad)
		result(0, "MPI_Fetch_and_op x %d + MPI_Compare_and_swap: wrong value", k);
	else
		result(1, "MPI_Fetch_and_op x %d + MPI_Compare_and_swap x 2: every fetched value and the final counter exact", k);
}

int main(int argc, char **argv)
{
	static const size_t sizes[] = {
		1, 2, 8, 64, 512, 1000, 1024, 1440, 4096, 8192,
		16384, 65536, 262144, 1048576,
	};
	static const size_t rma_sizes[] = { 8, 1440, 4096, 65536, 1048576 };
	int quick = 0, iters = 20, nranks, opt, total_bad;
	size_t only = 0;
	char name[MPI_MAX_PROCESSOR_NAME];
	unsigned char *mem;
	MPI_Win win;
	long sums[2];

	while ((opt = getopt(argc, argv, "qn:p:")) != -1) {
		switch (opt) {
		case 'q': quick = 1; break;
		case 'n': iters = atoi(optarg); break;
		case 'p': only = strtoul(optarg, NULL, 0); break;
		default:
			fprintf(stderr, "usage: %s [-q] [-n iters] [-p size]\n", argv[0]);
			return 2;
		}
	}
	if (quick && iters > 5)
		iters = 5;
	if (iters < 1)
		iters = 1;

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &nranks);
	if (nranks != 2) {
		if (rank == 0)
			fprintf(stderr, "mbcf_mpi_check: needs exactly 2 ranks, got %d\n", nranks);
		MPI_Finalize();
		return 2;
	}
	{
		int len = 0;

		MPI_Get_processor_name(name, &len);
		printf("rank %d of %d on %s (pid %d)\n", rank, nranks, name, (int)getpid());
		fflush(stdout);
	}

	if (only) {
		pingpong(only, 10);	/* warm-up: connections, registrations */
		pingpong(only, iters);
		goto done;
	}
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		/* large messages take long under emulation: fewer rounds */
		int n = sizes[i] >= 262144 ? (iters + 3) / 4 : iters;

		pingpong(sizes[i], n);
	}

	allreduce(1);
	allreduce(1000);
	if (!quick)
		allreduce(131072);

	if (MPI_Alloc_mem(WIN, MPI_INFO_NULL, &mem) != MPI_SUCCESS) {
		result(0, "MPI_Alloc_mem");
	} else {
		MPI_Win_create(mem, WIN, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &win);
		for (int passive = 0; passive <= 1; passive++)
			for (size_t i = 0; i < sizeof(rma_sizes) / sizeof(rma_sizes[0]); i++)
				onesided(win, mem, rma_sizes[i], (int)i, passive);
		atomics(win, mem, quick ? 10 : 50);
		MPI_Win_free(&win);
		MPI_Free_mem(mem);
	}

done:
	sums[0] = checks;
	sums[1] = failures;
	MPI_Allreduce(MPI_IN_PLACE, &sums[1], 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
	total_bad = sums[1] != 0;
	if (rank == 0)
		printf("mbcf_mpi_check: %ld checks, %ld failed, %llu bytes moved\n",
		       sums[0], sums[1], bytes_moved);
	fflush(stdout);
	MPI_Finalize();
	return total_bad;
}
