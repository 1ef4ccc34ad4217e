// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* eventfd_signal(ctx) (Linux 6.8) adds 1 to the counter; before it took
 * the amount, eventfd_signal(ctx, n). */
#include <linux/eventfd.h>

void mbcf_probe(struct eventfd_ctx *ctx);
void mbcf_probe(struct eventfd_ctx *ctx)
{
	eventfd_signal(ctx);
}
