// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Memory region registration through the installed provider, checked with
 * exact values.  Run inside the guest by tests/vm/mr.sh.
 *
 *   mbcf_mr_test [-d DEV] check     registration, refusals, balance
 *   mbcf_mr_test [-d DEV] hold N    register N MRs, print "ready PAGES",
 *                                   then wait to be killed
 *
 * Pinning is measured with VmPin of /proc/self/status, the pages the RDMA
 * core charged to this process (ib_umem_get), in kB.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <infiniband/verbs.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define MAX_MRS 4096

static long page_size;
static int failures;

#define CHECK(cond, ...)                                                  \
	do {                                                              \
		if (!(cond)) {                                            \
			failures++;                                       \
			printf("FAIL %s:%d: ", __func__, __LINE__);       \
			printf(__VA_ARGS__);                              \
			printf("\n");                                     \
		}                                                         \
	} while (0)

static long vm_pin_pages(void)
{
	char line[256];
	long kb = -1;
	FILE *f = fopen("/proc/self/status", "r");

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "VmPin: %ld kB", &kb) == 1)
			break;
	fclose(f);
	return kb < 0 ? -1 : kb * 1024 / page_size;
}

/* Pages spanned by [addr, addr + len). */
static long span_pages(const void *addr, size_t len)
{
	uintptr_t a = (uintptr_t)addr, p = (uintptr_t)page_size;

	return (long)(((a + len + p - 1) / p) - (a / p));
}

static void *map(size_t len, int prot)
{
	void *p = mmap(NULL, len, prot, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED) {
		perror("mmap");
		exit(2);
	}
	return p;
}

/* Expect registration to fail with errno `want`. */
static void expect_refused(struct ibv_pd *pd, void *addr, size_t len,
			   uint64_t iova, int access, int want, const char *what)
{
	struct ibv_mr *mr;

	errno = 0;
	mr = ibv_reg_mr_iova(pd, addr, len, iova, access);
	CHECK(!mr && errno == want, "%s: got %s (errno %d %s), want errno %d",
	      what, mr ? "an MR" : "failure", errno, strerror(errno), want);
	if (mr)
		ibv_dereg_mr(mr);
}

static const int access_sets[] = {
	0,
	IBV_ACCESS_LOCAL_WRITE,
	IBV_ACCESS_REMOTE_READ,
	IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE,
	IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ,
	IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_ATOMIC,
	IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
		IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC,
	IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_RELAXED_ORDERING,
	IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_MW_BIND,
};

/* Many MRs of many sizes, offsets and access sets; exact pin balance. */
static void check_many(struct ibv_pd *pd)
{
	static const size_t sizes[] = { 1, 8, 100, 4095, 4096, 4097,
					3 * 4096 + 5, 65536, 1 << 20,
					(16 << 20) + 3 };
	static const size_t offsets[] = { 0, 1, 8, 4095 };
	static struct ibv_mr *mrs[MAX_MRS];
	size_t big = (17 << 20) + 8192, i, j, k, n = 0;
	long base = vm_pin_pages(), want = 0;
	char *buf = map(big, PROT_READ | PROT_WRITE);

	for (i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++)
		for (j = 0; j < sizeof(offsets) / sizeof(offsets[0]); j++)
			for (k = 0; k < sizeof(access_sets) / sizeof(access_sets[0]); k++) {
				char *a = buf + offsets[j];
				struct ibv_mr *mr;

				mr = ibv_reg_mr(pd, a, sizes[i], access_sets[k]);
				CHECK(mr, "reg_mr size %zu off %zu access %#x: %s",
				      sizes[i], offsets[j], access_sets[k],
				      strerror(errno));
				if (!mr)
					continue;
				CHECK(mr->lkey == mr->rkey && mr->lkey != 0,
				      "lkey %#x rkey %#x", mr->lkey, mr->rkey);
				CHECK(mr->addr == a && mr->length == sizes[i],
				      "mr addr/length");
				want += span_pages(a, sizes[i]);
				mrs[n++] = mr;
			}
	CHECK(vm_pin_pages() - base == want, "VmPin grew by %ld pages, want %ld",
	      vm_pin_pages() - base, want);
	for (i = 0; i < n; i++)
		for (j = i + 1; j < n; j++)
			CHECK(mrs[i]->lkey != mrs[j]->lkey, "duplicate key %#x",
			      mrs[i]->lkey);
	for (i = 0; i < n; i++)
		CHECK(ibv_dereg_mr(mrs[i]) == 0, "dereg_mr: %s", strerror(errno));
	CHECK(vm_pin_pages() == base, "VmPin %ld after dereg, want %ld",
	      vm_pin_pages(), base);
	printf("registered and deregistered %zu MRs, %ld pages\n", n, want);
	munmap(buf, big);
}

static void check_refusals(struct ibv_pd *pd)
{
	long base = vm_pin_pages();
	char *ro = map(2 * page_size, PROT_READ);
	char *gone = map(page_size, PROT_READ | PROT_WRITE);
	char *buf = map(8 * page_size, PROT_READ | PROT_WRITE);
	uint64_t va = (uint64_t)(uintptr_t)buf;
	struct ibv_mr *mr;

	/* Holes nothing else maps into before the checks below. */
	munmap(gone, page_size);
	munmap(buf + 4 * page_size, 4 * page_size);
	/* Refused by the RDMA core's ib_check_mr_access(). */
	expect_refused(pd, buf, 64, va, IBV_ACCESS_REMOTE_WRITE, EINVAL,
		       "remote write without local write");
	expect_refused(pd, buf, 64, va, IBV_ACCESS_REMOTE_ATOMIC, EINVAL,
		       "remote atomic without local write");
	/* The RDMA core refuses it before mbcf sees it: EINVAL on Linux 6.1,
	 * EOPNOTSUPP on 6.12 and later. */
	{
		struct ibv_mr *odp;

		errno = 0;
		odp = ibv_reg_mr_iova(pd, buf, 64, va, IBV_ACCESS_ON_DEMAND);
		CHECK(!odp && (errno == EINVAL || errno == EOPNOTSUPP),
		      "on-demand paging: got %s (errno %d %s), want EINVAL or EOPNOTSUPP",
		      odp ? "an MR" : "failure", errno, strerror(errno));
		if (odp)
			ibv_dereg_mr(odp);
	}
	expect_refused(pd, buf, 64, va + 8, 0, EINVAL,
		       "iova with another page offset");
	/* Refused by mbcf. */
	expect_refused(pd, buf, 64, va, IBV_ACCESS_ZERO_BASED, EINVAL,
		       "zero based");
	expect_refused(pd, buf, 64, va, IBV_ACCESS_HUGETLB, EINVAL, "hugetlb");
	expect_refused(pd, buf, 0, va, IBV_ACCESS_LOCAL_WRITE, EINVAL,
		       "zero length");
	/* Refused when pinning. */
	expect_refused(pd, gone, 64, (uintptr_t)gone, 0, EFAULT,
		       "unmapped memory");
	expect_refused(pd, buf, 8 * page_size, va, 0, EFAULT,
		       "past the end of the mapping");
	expect_refused(pd, ro, 64, (uintptr_t)ro, IBV_ACCESS_LOCAL_WRITE,
		       EFAULT, "local write on read-only memory");
	CHECK(vm_pin_pages() == base, "VmPin %ld after refusals, want %ld",
	      vm_pin_pages(), base);

	/* Read-only memory may be registered for reading. */
	mr = ibv_reg_mr(pd, ro, 2 * page_size, IBV_ACCESS_REMOTE_READ);
	CHECK(mr, "read-only memory for remote read: %s", strerror(errno));
	if (mr)
		ibv_dereg_mr(mr);

	/* A target address space other than the user addresses. */
	mr = ibv_reg_mr_iova(pd, buf + 100, 3 * page_size,
			     0x7000000000ULL + 100, IBV_ACCESS_LOCAL_WRITE |
			     IBV_ACCESS_REMOTE_WRITE);
	CHECK(mr, "reg_mr_iova: %s", strerror(errno));
	if (mr) {
		CHECK(vm_pin_pages() - base == 4, "iova MR pins %ld pages, want 4",
		      vm_pin_pages() - base);
		ibv_dereg_mr(mr);
	}
	CHECK(vm_pin_pages() == base, "VmPin after iova MR");
	munmap(buf, 4 * page_size);
	munmap(ro, 2 * page_size);
}

/* A deregistered key is not handed out again soon (cyclic + generation). */
static void check_key_reuse(struct ibv_pd *pd)
{
	static uint32_t seen[512];
	char *buf = map(page_size, PROT_READ | PROT_WRITE);
	size_t i, j, n = sizeof(seen) / sizeof(seen[0]);

	for (i = 0; i < n; i++) {
		struct ibv_mr *mr = ibv_reg_mr(pd, buf, 64, IBV_ACCESS_LOCAL_WRITE);

		CHECK(mr, "reg_mr #%zu: %s", i, strerror(errno));
		if (!mr)
			return;
		seen[i] = mr->lkey;
		ibv_dereg_mr(mr);
	}
	for (i = 0; i < n; i++)
		for (j = i + 1; j < n; j++)
			CHECK(seen[i] != seen[j], "key %#x reused after %zu MRs",
			      seen[i], j - i);
	printf("%zu reg/dereg cycles, no key reused\n", n);
	munmap(buf, page_size);
}

/* Register n MRs and wait to be killed with them. */
static int hold(struct ibv_pd *pd, int n)
{
	size_t len = 1 << 20;
	char *buf = map(len, PROT_READ | PROT_WRITE);
	long base = vm_pin_pages();
	int i;

	for (i = 0; i < n; i++) {
		size_t sz = 4096 * (size_t)(1 + i % 16);

		if (!ibv_reg_mr(pd, buf + (i * 4096) % (len - sz), sz,
				access_sets[i % 7])) {
			printf("FAIL reg_mr #%d: %s\n", i, strerror(errno));
			return 1;
		}
	}
	printf("ready %ld\n", vm_pin_pages() - base);
	fflush(stdout);
	for (;;)
		pause();
}

static struct ibv_context *open_dev(const char *name)
{
	struct ibv_device **list = ibv_get_device_list(NULL);
	struct ibv_context *ctx = NULL;
	int i;

	for (i = 0; list && list[i]; i++)
		if (!strcmp(ibv_get_device_name(list[i]), name))
			ctx = ibv_open_device(list[i]);
	ibv_free_device_list(list);
	return ctx;
}

int main(int argc, char **argv)
{
	const char *dev = "mbcf0";
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	int opt;

	setvbuf(stdout, NULL, _IOLBF, 0);
	page_size = sysconf(_SC_PAGESIZE);
	while ((opt = getopt(argc, argv, "d:")) != -1) {
		if (opt != 'd')
			return 2;
		dev = optarg;
	}
	if (optind >= argc)
		return 2;
	ctx = open_dev(dev);
	if (!ctx) {
		printf("FAIL cannot open %s\n", dev);
		return 1;
	}
	pd = ibv_alloc_pd(ctx);
	if (!pd) {
		printf("FAIL alloc_pd: %s\n", strerror(errno));
		return 1;
	}
	if (!strcmp(argv[optind], "hold") && optind + 1 < argc)
		return hold(pd, atoi(argv[optind + 1]));
	if (strcmp(argv[optind], "check"))
		return 2;

	check_many(pd);
	check_refusals(pd);
	check_key_reuse(pd);
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	printf("mr_test: %s (%d failure(s))\n", failures ? "FAIL" : "PASS",
	       failures);
	return failures ? 1 : 0;
}
