// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* mbcf-needs: SKBFL_DONT_ORPHAN for zero-copy frames (Linux 5.13) */
#include <linux/skbuff.h>

void mbcf_probe(struct ubuf_info *uarg);
void mbcf_probe(struct ubuf_info *uarg)
{
	uarg->flags = SKBFL_ZEROCOPY_FRAG | SKBFL_DONT_ORPHAN;
}
