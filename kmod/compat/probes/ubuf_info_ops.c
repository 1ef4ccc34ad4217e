// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* Linux 6.10: struct ubuf_info's callback became ops, a const
 * struct ubuf_info_ops with .complete. */
#include <linux/skbuff.h>

static void mbcf_probe_complete(struct sk_buff *skb, struct ubuf_info *uarg,
				bool zerocopy_success)
{
}

static const struct ubuf_info_ops mbcf_probe_ops = {
	.complete = mbcf_probe_complete,
};

void mbcf_probe(struct ubuf_info *uarg);
void mbcf_probe(struct ubuf_info *uarg)
{
	uarg->ops = &mbcf_probe_ops;
}
