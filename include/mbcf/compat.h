/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * Per-environment shim: the only header core/ may include besides its own.
 *
 * The protocol core is compiled twice from the same files: into the kernel
 * module (__KERNEL__, real kernel headers) and into a host static library
 * (libc headers).  Core code uses only what is declared here: kernel-style
 * integer types, memcpy/memset, likely()/unlikely(), bool, a 64-by-32-bit
 * division (mbcf_div_u64_rem).  No floating
 * point, no allocation, no locks, no clocks.
 */
#ifndef MBCF_COMPAT_H
#define MBCF_COMPAT_H

#ifdef __KERNEL__

#include <linux/types.h>
#include <linux/stddef.h>
#include <linux/string.h>
#include <linux/compiler.h>
#include <linux/math64.h>
#include <asm/byteorder.h>

#define mbcf_fallthrough	fallthrough
#define mbcf_noinline		noinline
/* a word other CPUs write without our lock (struct mbcf_rtt_share) */
#define mbcf_read_once(x)	READ_ONCE(x)
#define mbcf_write_once(x, v)	WRITE_ONCE(x, v)

/* a / b, *rem = a % b (32-bit kernels have no 64-bit division operator) */
static inline u64 mbcf_div_u64_rem(u64 a, u32 b, u32 *rem)
{
	return div_u64_rem(a, b, rem);
}

#else /* host */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <endian.h>
#include <linux/types.h>	/* __be16/__be32/__be64, as user-space uapi sees them */

typedef uint8_t u8;
typedef uint16_t u16;
typedef uint32_t u32;
typedef uint64_t u64;
typedef int8_t s8;
typedef int16_t s16;
typedef int32_t s32;
typedef int64_t s64;

#ifndef likely
#define likely(x)	__builtin_expect(!!(x), 1)
#define unlikely(x)	__builtin_expect(!!(x), 0)
#endif

#define mbcf_fallthrough	__attribute__((__fallthrough__))
#define mbcf_noinline		__attribute__((__noinline__))
#define mbcf_read_once(x)	(*(const volatile __typeof__(x) *)&(x))
#define mbcf_write_once(x, v)	(*(volatile __typeof__(x) *)&(x) = (v))

static inline u64 mbcf_div_u64_rem(u64 a, u32 b, u32 *rem)
{
	*rem = (u32)(a % b);
	return a / b;
}

#define cpu_to_be16(x)	((__be16)htobe16(x))
#define cpu_to_be32(x)	((__be32)htobe32(x))
#define cpu_to_be64(x)	((__be64)htobe64(x))
#define be16_to_cpu(x)	be16toh((u16)(x))
#define be32_to_cpu(x)	be32toh((u32)(x))
#define be64_to_cpu(x)	be64toh((u64)(x))

#endif /* __KERNEL__ */

/*
 * Byte-wise big-endian accessors.  Header fields sit at offsets that are not
 * naturally aligned for every opcode, so the codec never casts a frame
 * pointer to a wider type; compilers turn these into single loads + bswap.
 */
static inline u16 mbcf_get_be16(const u8 *p)
{
	return (u16)((u16)p[0] << 8 | p[1]);
}

static inline u32 mbcf_get_be32(const u8 *p)
{
	return (u32)p[0] << 24 | (u32)p[1] << 16 | (u32)p[2] << 8 | p[3];
}

static inline u64 mbcf_get_be64(const u8 *p)
{
	return (u64)mbcf_get_be32(p) << 32 | mbcf_get_be32(p + 4);
}

static inline void mbcf_put_be16(u8 *p, u16 v)
{
	p[0] = (u8)(v >> 8);
	p[1] = (u8)v;
}

static inline void mbcf_put_be32(u8 *p, u32 v)
{
	p[0] = (u8)(v >> 24);
	p[1] = (u8)(v >> 16);
	p[2] = (u8)(v >> 8);
	p[3] = (u8)v;
}

static inline void mbcf_put_be64(u8 *p, u64 v)
{
	mbcf_put_be32(p, (u32)(v >> 32));
	mbcf_put_be32(p + 4, (u32)v);
}

#endif /* MBCF_COMPAT_H */
