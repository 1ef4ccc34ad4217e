// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * provider.doorbell: the provider rings a queue's doorbell with
 * ibv_cmd_post_send(qp, NULL, ...) / ibv_cmd_post_recv(qp, NULL, ...),
 * i.e. a POST_SEND / POST_RECV command with zero work requests, which the
 * kernel hands to the driver's post_send/post_recv op as an empty list.
 * This test proves that the *installed* libibverbs (Debian 12: 44.0)
 * really emits such a command: a fake context whose command fd is a pipe,
 * with the private state zeroed so libibverbs takes the write() path,
 * receives the command bytes, which are then checked field by field.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <infiniband/driver.h>
#include <rdma/ib_user_verbs.h>

#include "test-check.h"

/* Both commands share this layout after the header. */
struct zero_wr_cmd {
	struct ib_uverbs_cmd_hdr hdr;
	__aligned_u64 response;
	__u32 qp_handle;
	__u32 wr_count;
	__u32 sge_count;
	__u32 wqe_size;
};

static void check_cmd(int rfd, int ret, __u32 command, __u32 resp_size,
		      __u32 min_wqe, __u32 handle)
{
	unsigned char buf[256];
	struct zero_wr_cmd c;
	ssize_t n;

	CHECK(ret == 0);
	n = read(rfd, buf, sizeof(buf));
	CHECK(n == (ssize_t)sizeof(c));
	if (n < (ssize_t)sizeof(c))
		return;
	memcpy(&c, buf, sizeof(c));
	CHECK(c.hdr.command == command);
	CHECK(c.hdr.in_words * 4u == (size_t)n);
	CHECK(c.hdr.out_words * 4u == resp_size);
	CHECK(c.response != 0);
	CHECK(c.qp_handle == handle);
	CHECK(c.wr_count == 0);
	CHECK(c.sge_count == 0);
	CHECK(c.wqe_size >= min_wqe);
	printf("command %u: %zd bytes, in_words %u, out_words %u, qp %#x, wr_count %u, sge_count %u, wqe_size %u\n",
	       c.hdr.command, n, c.hdr.in_words, c.hdr.out_words, c.qp_handle,
	       c.wr_count, c.sge_count, c.wqe_size);
}

int main(void)
{
	struct verbs_context *vctx;
	struct ibv_send_wr *bad_send = NULL;
	struct ibv_recv_wr *bad_recv = NULL;
	struct ibv_qp qp;
	int fds[2], ret;

	if (pipe(fds)) {
		perror("pipe");
		return 1;
	}
	/* priv all zero: no ioctl write path, nothing imported. */
	vctx = calloc(1, sizeof(*vctx));
	vctx->priv = calloc(1, 1 << 16);
	vctx->context.cmd_fd = fds[1];

	memset(&qp, 0, sizeof(qp));
	qp.context = &vctx->context;
	qp.handle = 0x1234abcd;
	qp.qp_type = IBV_QPT_RC;

	ret = ibv_cmd_post_send(&qp, NULL, &bad_send);
	check_cmd(fds[0], ret, IB_USER_VERBS_CMD_POST_SEND,
		  sizeof(struct ib_uverbs_post_send_resp),
		  sizeof(struct ib_uverbs_send_wr), qp.handle);
	CHECK(bad_send == NULL);

	ret = ibv_cmd_post_recv(&qp, NULL, &bad_recv);
	check_cmd(fds[0], ret, IB_USER_VERBS_CMD_POST_RECV,
		  sizeof(struct ib_uverbs_post_recv_resp),
		  sizeof(struct ib_uverbs_recv_wr), qp.handle);
	CHECK(bad_recv == NULL);

	free(vctx->priv);
	free(vctx);
	if (failures) {
		printf("provider.doorbell: %d failure(s)\n", failures);
		return 1;
	}
	printf("provider.doorbell: the installed libibverbs sends valid zero-WR POST_SEND/POST_RECV\n");
	return 0;
}
