/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * The provider's host check (fastpath-check.c): count a
 * failed condition, print where, and let main() report the total.
 */
#ifndef MBCF_PROVIDER_TEST_CHECK_H
#define MBCF_PROVIDER_TEST_CHECK_H

#include <stdio.h>

static int failures;

#define CHECK(cond)                                                         \
	do {                                                                \
		if (!(cond)) {                                              \
			printf("FAIL %s:%d: %s\n", __FILE__, __LINE__, #cond); \
			failures++;                                         \
		}                                                           \
	} while (0)

#endif
