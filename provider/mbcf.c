// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Device match and context lifetime.  libibverbs dlopen()s this library,
 * the constructor made by PROVIDER_DRIVER() registers mbcf_dev_ops, and
 * libibverbs then offers us every uverbs device it could not give to a
 * provider matching by driver id.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "mbcf.h"

static void mbcf_free_context(struct ibv_context *ibctx)
{
	struct mbcf_context *ctx = to_mctx(ibctx);

	verbs_uninit_context(&ctx->vctx);
	free(ctx);
}

static const struct verbs_context_ops mbcf_ctx_ops = {
	.alloc_mw = mbcf_verbs_alloc_mw,
	.alloc_pd = mbcf_verbs_alloc_pd,
	.bind_mw = mbcf_verbs_bind_mw,
	.create_ah = mbcf_verbs_create_ah,
	.create_cq = mbcf_cq_create,
	.create_cq_ex = mbcf_cq_create_ex,
	.create_qp = mbcf_qp_create,
	.create_qp_ex = mbcf_qp_create_ex,
	.create_srq = mbcf_srq_create,
	.dealloc_mw = mbcf_verbs_dealloc_mw,
	.dealloc_pd = mbcf_verbs_dealloc_pd,
	.dereg_mr = mbcf_verbs_dereg_mr,
	.destroy_ah = mbcf_verbs_destroy_ah,
	.destroy_cq = mbcf_cq_destroy,
	.destroy_qp = mbcf_qp_destroy,
	.destroy_srq = mbcf_srq_destroy,
	.free_context = mbcf_free_context,
	.modify_qp = mbcf_qp_modify,
	.modify_qp_rate_limit = mbcf_qp_modify_rate_limit,
	.modify_srq = mbcf_srq_modify,
	.poll_cq = mbcf_cq_poll,
	.post_recv = mbcf_qp_post_recv,
	.post_send = mbcf_qp_post_send,
	.post_srq_recv = mbcf_srq_post_recv,
	.query_device_ex = mbcf_verbs_query_device_ex,
	.query_port = mbcf_verbs_query_port,
	.query_qp = mbcf_qp_query,
	.query_srq = mbcf_srq_query,
	.reg_mr = mbcf_verbs_reg_mr,
	.req_notify_cq = mbcf_cq_req_notify,
	.resize_cq = mbcf_cq_resize,
};

static struct verbs_context *mbcf_alloc_context(struct ibv_device *ibdev,
						int cmd_fd, void *private_data)
{
	struct mbcf_get_context_resp resp = {};
	struct ibv_get_context cmd = {};
	struct mbcf_context *ctx;
	const char *rate;
	int ret;

	/*
	 * The kernel registers the device with RDMA_DRIVER_UNKNOWN; the id
	 * given here is sent with every ioctl and must be the same.
	 */
	ctx = verbs_init_and_alloc_context(ibdev, cmd_fd, ctx, vctx,
					   RDMA_DRIVER_UNKNOWN);
	if (!ctx)
		return NULL;

	ret = mbcf_cmd_get_context(&ctx->vctx, &cmd, sizeof(cmd),
				   &resp.ibv_resp, sizeof(resp));
	if (ret)
		goto err_uninit;

	if (resp.drv.abi_version != MBCF_ABI_VERSION) {
		fprintf(stderr,
			"mbcf: %s: kernel module speaks ABI %u, this provider ABI %u; install a matching provider and module\n",
			ibdev->name, resp.drv.abi_version, MBCF_ABI_VERSION);
		ret = EPROTO;
		goto err_uninit;
	}
	ctx->kernel_abi = resp.drv.abi_version;
	ctx->max_inline = resp.drv.max_inline;
	rate = getenv("MBCF_QP_RATE_LIMIT");
	if (rate)
		ctx->default_rate = (uint32_t)strtoul(rate, NULL, 0);

	verbs_set_ops(&ctx->vctx, &mbcf_ctx_ops);
	return &ctx->vctx;

err_uninit:
	verbs_uninit_context(&ctx->vctx);
	free(ctx);
	errno = ret;
	return NULL;
}

static struct verbs_device *mbcf_alloc_device(struct verbs_sysfs_dev *sysfs_dev)
{
	struct mbcf_device *dev;

	dev = calloc(1, sizeof(*dev));
	if (!dev)
		return NULL;
	return &dev->vdev;
}

static void mbcf_uninit_device(struct verbs_device *vdev)
{
	free(container_of(vdev, struct mbcf_device, vdev));
}

/*
 * RDMA_DRIVER_UNKNOWN devices are matched by name ("mbcf0", "mbcf1", ...):
 * the device has no parent bus, so its modalias is "rdma_device:N<name>...".
 */
static const struct verbs_match_ent mbcf_match_table[] = {
	VERBS_NAME_MATCH(MBCF_DEVICE_NAME_PREFIX, NULL),
	{},
};

static const struct verbs_device_ops mbcf_dev_ops = {
	.name = "mbcf",
	.match_min_abi_version = MBCF_UVERBS_ABI_VERSION,
	.match_max_abi_version = MBCF_UVERBS_ABI_VERSION,
	.match_table = mbcf_match_table,
	.alloc_device = mbcf_alloc_device,
	.uninit_device = mbcf_uninit_device,
	.alloc_context = mbcf_alloc_context,
};

PROVIDER_DRIVER(mbcf, mbcf_dev_ops);
