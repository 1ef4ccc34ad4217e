// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * provider.abi: the provider is compiled against private headers generated
 * from Debian's rdma-core source package, which may be a newer release than
 * the installed libibverbs (same private ABI 34).  This test proves the two
 * agree where it matters, against the real installed library:
 *
 *  1. public struct layouts seen through the private headers equal those of
 *     the installed public headers (abi-sys.c);
 *  2. struct verbs_context_ops: each op slot is filled with a distinct
 *     sentinel and handed to the installed verbs_set_ops(), which copies
 *     every op into the public mirror of the op *it* finds in that slot.
 *     Every mirror must then hold the sentinel of the op of the same name:
 *     a slot inserted or removed between the two releases shifts the ops
 *     after it and fails here.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <infiniband/driver.h>

#include "abi-check.h"

static int failures;

#define SAME(field, want, have)                                               \
	do {                                                                  \
		if ((want) != (have)) {                                       \
			printf("FAIL %s: installed %zu, provider headers %zu\n", \
			       field, (size_t)(want), (size_t)(have));        \
			failures++;                                           \
		}                                                             \
	} while (0)

static void check_layouts(void)
{
	struct mbcf_abi_layout sys;

	mbcf_abi_sys_layout(&sys);
	SAME("sizeof(verbs_context)", sys.verbs_context_size, sizeof(struct verbs_context));
	SAME("verbs_context.context", sys.context_offset, offsetof(struct verbs_context, context));
	SAME("ibv_context.ops", sys.ops_offset, offsetof(struct ibv_context, ops));
	SAME("sizeof(ibv_context_ops)", sys.ops_size, sizeof(struct ibv_context_ops));
	SAME("ibv_context_ops.post_send", sys.post_send_offset, offsetof(struct ibv_context_ops, post_send));
	SAME("ibv_context_ops.poll_cq", sys.poll_cq_offset, offsetof(struct ibv_context_ops, poll_cq));
	SAME("sizeof(ibv_qp)", sys.qp_size, sizeof(struct ibv_qp));
	SAME("sizeof(ibv_cq)", sys.cq_size, sizeof(struct ibv_cq));
	SAME("sizeof(ibv_mr)", sys.mr_size, sizeof(struct ibv_mr));
	SAME("sizeof(ibv_pd)", sys.pd_size, sizeof(struct ibv_pd));
	SAME("sizeof(ibv_wc)", sys.wc_size, sizeof(struct ibv_wc));
	SAME("sizeof(ibv_send_wr)", sys.send_wr_size, sizeof(struct ibv_send_wr));
	/* Newer releases append fields to ibv_port_attr; the provider only
	 * lets the installed libibverbs fill it, so "not smaller" suffices. */
	if (sizeof(struct ibv_port_attr) < sys.port_attr_size) {
		printf("FAIL sizeof(ibv_port_attr) shrank\n");
		failures++;
	}
}

#define NSLOTS (sizeof(struct verbs_context_ops) / sizeof(void *))
#define SENTINEL(i) ((void *)(uintptr_t)(0x5a5a0000u + (i)))
#define SLOT(name) (offsetof(struct verbs_context_ops, name) / sizeof(void *))

/* Ops whose copy lands in a public field of verbs_context / ibv_context. */
#define V(op, field) { #op, SLOT(op), offsetof(struct verbs_context, field) }
#define C(op, field) { #op, SLOT(op), offsetof(struct verbs_context, context.ops.field) }
static const struct {
	const char *name;
	size_t slot;
	size_t mirror;
} mirrors[] = {
	V(advise_mr, advise_mr), V(alloc_dm, alloc_dm),
	C(alloc_mw, alloc_mw), V(alloc_null_mr, alloc_null_mr),
	V(alloc_parent_domain, alloc_parent_domain),
	C(alloc_pd, _compat_alloc_pd), V(alloc_td, alloc_td),
	C(async_event, _compat_async_event),
	V(attach_counters_point_flow, attach_counters_point_flow),
	C(attach_mcast, _compat_attach_mcast), C(bind_mw, bind_mw),
	V(close_xrcd, close_xrcd), C(cq_event, _compat_cq_event),
	C(create_ah, _compat_create_ah), V(create_counters, create_counters),
	C(create_cq, _compat_create_cq),
	V(create_flow_action_esp, create_flow_action_esp),
	C(create_qp, _compat_create_qp), V(create_qp_ex, create_qp_ex),
	V(create_rwq_ind_table, create_rwq_ind_table),
	C(create_srq, _compat_create_srq), V(create_srq_ex, create_srq_ex),
	V(create_wq, create_wq), C(dealloc_mw, dealloc_mw),
	C(dealloc_pd, _compat_dealloc_pd), V(dealloc_td, dealloc_td),
	C(dereg_mr, _compat_dereg_mr), C(destroy_ah, _compat_destroy_ah),
	V(destroy_counters, destroy_counters), C(destroy_cq, _compat_destroy_cq),
	V(destroy_flow_action, destroy_flow_action),
	C(destroy_qp, _compat_destroy_qp),
	V(destroy_rwq_ind_table, destroy_rwq_ind_table),
	C(destroy_srq, _compat_destroy_srq), V(destroy_wq, destroy_wq),
	C(detach_mcast, _compat_detach_mcast), V(free_dm, free_dm),
	V(get_srq_num, get_srq_num), V(modify_cq, modify_cq),
	V(modify_flow_action_esp, modify_flow_action_esp),
	C(modify_qp, _compat_modify_qp),
	V(modify_qp_rate_limit, modify_qp_rate_limit),
	C(modify_srq, _compat_modify_srq), V(modify_wq, modify_wq),
	V(open_qp, open_qp), V(open_xrcd, open_xrcd), C(poll_cq, poll_cq),
	C(post_recv, post_recv), C(post_send, post_send),
	V(post_srq_ops, post_srq_ops), C(post_srq_recv, post_srq_recv),
	V(query_device_ex, query_device_ex), C(query_qp, _compat_query_qp),
	V(query_rt_values, query_rt_values), C(query_srq, _compat_query_srq),
	V(read_counters, read_counters), V(reg_dm_mr, reg_dm_mr),
	C(reg_mr, _compat_reg_mr), C(req_notify_cq, req_notify_cq),
	C(rereg_mr, _compat_rereg_mr), C(resize_cq, _compat_resize_cq),
};

static void check_ops(void)
{
	void *slots[NSLOTS];
	struct verbs_context *vctx;
	size_t i;

	/* verbs_set_ops() writes into vctx->priv's private copy of the ops,
	 * whose size we do not know: give it far more than it needs. */
	vctx = calloc(1, sizeof(*vctx));
	vctx->priv = calloc(1, 1 << 16);
	for (i = 0; i < NSLOTS; i++)
		slots[i] = SENTINEL(i);
	verbs_set_ops(vctx, (const struct verbs_context_ops *)slots);

	for (i = 0; i < sizeof(mirrors) / sizeof(mirrors[0]); i++) {
		void *got;

		memcpy(&got, (char *)vctx + mirrors[i].mirror, sizeof(got));
		if (got != SENTINEL(mirrors[i].slot)) {
			printf("FAIL verbs_context_ops.%s: slot %zu, libibverbs copied %p\n",
			       mirrors[i].name, mirrors[i].slot, got);
			failures++;
		}
	}
	printf("checked %zu mirrored ops of %zu slots\n",
	       sizeof(mirrors) / sizeof(mirrors[0]), (size_t)NSLOTS);
	free(vctx->priv);
	free(vctx);
}

int main(void)
{
	check_layouts();
	check_ops();
	if (failures) {
		printf("provider.abi: %d mismatch(es)\n", failures);
		return 1;
	}
	printf("provider.abi: the provider headers match the installed libibverbs\n");
	return 0;
}
