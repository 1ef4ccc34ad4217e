/* SPDX-License-Identifier: ((GPL-2.0 WITH Linux-syscall-note) OR BSD-2-Clause) */
/*
 * mbcf kernel <-> rdma-core provider ABI, and nothing else.
 *
 * Every structure here crosses the uverbs boundary as the driver-private
 * "udata" of a verbs command.  All fields are host byte order, naturally
 * aligned, and padded to a multiple of 8 bytes so that 32- and 64-bit user
 * space see one layout.  Bump MBCF_ABI_VERSION on any incompatible change;
 * the provider refuses a kernel whose version differs.
 */
#ifndef MBCF_ABI_H
#define MBCF_ABI_H

#ifdef __KERNEL__
#include <linux/types.h>
#else
#include <linux/types.h>
#endif

/* ib_device_ops.uverbs_abi_ver; checked by libibverbs against the provider. */
#define MBCF_UVERBS_ABI_VERSION 1

/* Version of the structures below; carried in mbcf_alloc_ucontext_resp. */
#define MBCF_ABI_VERSION 1

/* Name prefix the provider matches (the driver id is RDMA_DRIVER_UNKNOWN). */
#define MBCF_DEVICE_NAME_PREFIX "mbcf"

/* Response to ibv_open_device() -> alloc_ucontext. */
struct mbcf_alloc_ucontext_resp {
	__u32 abi_version;	/* MBCF_ABI_VERSION of the kernel */
	__u32 reserved;
};

#endif /* MBCF_ABI_H */
