// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* hrtimer_setup(timer, function, clock, mode) (Linux 6.13) replaces
 * hrtimer_init() plus the caller storing timer->function (gone in 6.15). */
#include <linux/hrtimer.h>

static enum hrtimer_restart mbcf_probe_fire(struct hrtimer *t)
{
	return HRTIMER_NORESTART;
}

void mbcf_probe(struct hrtimer *t);
void mbcf_probe(struct hrtimer *t)
{
	hrtimer_setup(t, mbcf_probe_fire, CLOCK_MONOTONIC, HRTIMER_MODE_ABS_HARD);
}
