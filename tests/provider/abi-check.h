/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
#ifndef MBCF_PROVIDER_ABI_CHECK_H
#define MBCF_PROVIDER_ABI_CHECK_H

#include <stddef.h>

/* Public struct layouts the provider and libibverbs must agree on. */
struct mbcf_abi_layout {
	size_t verbs_context_size, context_offset, ops_offset, ops_size;
	size_t post_send_offset, poll_cq_offset;
	size_t qp_size, cq_size, mr_size, pd_size, wc_size, send_wr_size;
	size_t port_attr_size;
};

void mbcf_abi_sys_layout(struct mbcf_abi_layout *l);

#endif
