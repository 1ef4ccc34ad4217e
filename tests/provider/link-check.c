// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * A program linked with -lmbcf, as users of the direct verbs are: it
 * starts only if the dynamic loader finds libmbcf.so.1 and binds every
 * symbol it calls at its version (MBCF_1.0, the signal's MBCF_1.1), then
 * checks the argument checks that need no device.  The library's
 * constructor registers the provider with libibverbs, which must do no
 * harm on a machine without RDMA devices.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <link.h>
#include <stdio.h>
#include <string.h>

#include <infiniband/mbcfdv.h>

static int failed;

static void expect(int ok, const char *what)
{
	printf("%s: %s\n", ok ? "ok" : "FAIL", what);
	failed += !ok;
}

static void handler(void *ctx, const void *rec, uint32_t len, uint32_t qpn)
{
	(void)ctx, (void)rec, (void)len, (void)qpn;
}

int main(void)
{
	struct mbcfdv_fifo none = { .event_fd = -1 };
	char buf[64];
	Dl_info info;
	struct link_map *map = NULL;

	errno = 0;
	expect(!mbcfdv_create_fifo(NULL, buf, 128 + 64, 0) && errno == EINVAL,
	       "mbcfdv_create_fifo(NULL pd): NULL, EINVAL");
	errno = 0;
	expect(mbcfdv_fifo_event_fd(&none) == -1 && errno == EINVAL,
	       "mbcfdv_fifo_event_fd(no signal): -1, EINVAL");
	expect(mbcfdv_fifo_dispatch(&none, handler, NULL, buf, sizeof(buf), 0) == -EINVAL,
	       "mbcfdv_fifo_dispatch(max 0): -EINVAL");
	expect(mbcfdv_fifo_dispatch(&none, NULL, NULL, buf, sizeof(buf), 1) == -EINVAL,
	       "mbcfdv_fifo_dispatch(no handler): -EINVAL");

	/* The functions called are the ones of libmbcf.so.1, at their versions. */
	expect(dladdr1((void *)mbcfdv_create_fifo, &info, (void **)&map, RTLD_DL_LINKMAP) &&
	       map && strstr(map->l_name, "libmbcf.so.1"),
	       "mbcfdv_create_fifo is libmbcf.so.1's");
	if (map)
		printf("libmbcf.so.1: %s\n", map->l_name);
	expect(dlvsym(RTLD_DEFAULT, "mbcfdv_wr_fifo_push", "MBCF_1.0") ==
	       (void *)mbcfdv_wr_fifo_push, "mbcfdv_wr_fifo_push@MBCF_1.0");
	expect(dlvsym(RTLD_DEFAULT, "mbcfdv_fifo_dispatch", "MBCF_1.1") ==
	       (void *)mbcfdv_fifo_dispatch, "mbcfdv_fifo_dispatch@MBCF_1.1");
	printf("link-check: %d failed\n", failed);
	return failed != 0;
}
