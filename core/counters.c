// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* Counter names and walkers, generated from the one list in counters.h. */
#include <mbcf/counters.h>

static const char *const counters_names[MBCF_CTR_COUNT] = {
#define MBCF_X_NAME(f, name) [MBCF_CTR_##f] = name,
	MBCF_COUNTERS(MBCF_X_NAME)
#undef MBCF_X_NAME
};

const char *mbcf_counters_name(unsigned int i)
{
	return i < MBCF_CTR_COUNT ? counters_names[i] : NULL;
}

u64 mbcf_counters_get(const struct mbcf_counters *ctr, unsigned int i)
{
	switch (i) {
#define MBCF_X_GET(f, name) case MBCF_CTR_##f: return ctr->f;
	MBCF_COUNTERS(MBCF_X_GET)
#undef MBCF_X_GET
	default:
		return 0;
	}
}

void mbcf_counters_add(struct mbcf_counters *dst, const struct mbcf_counters *src)
{
#define MBCF_X_ADD(f, name) dst->f += src->f;
	MBCF_COUNTERS(MBCF_X_ADD)
#undef MBCF_X_ADD
}
