/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * Differences between the rdma-core private provider ABIs the provider is
 * built for, all in one place.  The private ABI (IBVERBS_PABI_VERSION, from
 * the config.h of the rdma-core tree the provider is compiled against) is a
 * property of the libibverbs that will load it: a provider built here is
 * installed as libmbcf-rdmav<IBVERBS_PABI_VERSION>.so and binds to the
 * symbol version IBVERBS_PRIVATE_<IBVERBS_PABI_VERSION>.
 *
 *   ABI  rdma-core   differences from 34 that reach this provider
 *   34   34 - 56.1   (the base)
 *   57   57 - 58     ibv_cmd_get_context() takes a struct ibv_fd_arr *
 *                    (file descriptors passed to the kernel) before resp
 *   59   59 - 63     ibv_cmd_create_cq_ex() takes a
 *                    struct verbs_create_cq_prov_attr * after cq_attr
 *   64   64          nothing more
 *   65   65.0        nothing more
 *
 * (From libibverbs/driver.h at each release tag.)  The provider passes no
 * file descriptors and no provider CQ attributes: NULL for both, which is
 * what those releases' own providers pass when they have none.
 */
#ifndef MBCF_PROVIDER_COMPAT_H
#define MBCF_PROVIDER_COMPAT_H

#include <config.h>
#include <infiniband/driver.h>

#if !defined(IBVERBS_PABI_VERSION) || IBVERBS_PABI_VERSION < 34
#error "mbcf's provider needs rdma-core's private provider ABI 34 or newer"
#endif

static inline int
mbcf_cmd_get_context(struct verbs_context *vctx, struct ibv_get_context *cmd,
		     size_t cmd_size, struct ib_uverbs_get_context_resp *resp,
		     size_t resp_size)
{
#if IBVERBS_PABI_VERSION >= 57
	return ibv_cmd_get_context(vctx, cmd, cmd_size, NULL, resp, resp_size);
#else
	return ibv_cmd_get_context(vctx, cmd, cmd_size, resp, resp_size);
#endif
}

static inline int
mbcf_cmd_create_cq_ex(struct ibv_context *ibctx,
		      const struct ibv_cq_init_attr_ex *attr,
		      struct verbs_cq *vcq, struct ibv_create_cq_ex *cmd,
		      size_t cmd_size, struct ib_uverbs_ex_create_cq_resp *resp,
		      size_t resp_size, uint32_t cmd_flags)
{
#if IBVERBS_PABI_VERSION >= 59
	return ibv_cmd_create_cq_ex(ibctx, attr, NULL, vcq, cmd, cmd_size,
				    resp, resp_size, cmd_flags);
#else
	return ibv_cmd_create_cq_ex(ibctx, attr, vcq, cmd, cmd_size, resp,
				    resp_size, cmd_flags);
#endif
}

#endif /* MBCF_PROVIDER_COMPAT_H */
