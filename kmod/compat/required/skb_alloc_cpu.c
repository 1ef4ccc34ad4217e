// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* mbcf-needs: sk_buff.alloc_cpu (Linux 6.0) */
#include <linux/skbuff.h>

unsigned int mbcf_probe(const struct sk_buff *skb);
unsigned int mbcf_probe(const struct sk_buff *skb)
{
	return skb->alloc_cpu;
}
