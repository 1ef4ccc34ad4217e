/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * 24-bit sequence numbers (psn) with wrap-around: serial arithmetic as in
 * RFC 1982.  Two psns compare correctly as long as they are less than 2^23
 * apart, which the window limit (MBCF_WINDOW_MAX) guarantees.
 * docs/protocol.md section 3.
 */
#ifndef MBCF_SEQ_H
#define MBCF_SEQ_H

#include <mbcf/wire.h>

/* a + n, modulo 2^24. */
static inline u32 mbcf_seq_add(u32 a, u32 n)
{
	return (a + n) & MBCF_PSN_MASK;
}

/* Signed distance a - b in (-2^23, 2^23]: > 0 when a is after b. */
static inline s32 mbcf_seq_diff(u32 a, u32 b)
{
	u32 d = (a - b) & MBCF_PSN_MASK;

	return d & 0x00800000u ? (s32)d - (s32)0x01000000 : (s32)d;
}

static inline bool mbcf_seq_lt(u32 a, u32 b)
{
	return mbcf_seq_diff(a, b) < 0;
}

static inline bool mbcf_seq_le(u32 a, u32 b)
{
	return mbcf_seq_diff(a, b) <= 0;
}

/* first <= p < first + n */
static inline bool mbcf_seq_in(u32 p, u32 first, u32 n)
{
	s32 d = mbcf_seq_diff(p, first);

	return d >= 0 && (u32)d < n;
}

#endif /* MBCF_SEQ_H */
