// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* mbcf-needs: get_random_u32_inclusive() (Linux 6.2, in 6.1 stable) */
#include <linux/random.h>

u32 mbcf_probe(void);
u32 mbcf_probe(void)
{
	return get_random_u32_inclusive(1, 100);
}
