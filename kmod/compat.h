/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * Kernel API differences, through feature probes.
 *
 * compat-generated.h is written at build time by compat/probe.sh, which
 * compiles each compat/probes/NAME.c against the target kernel's headers
 * and defines MBCF_HAVE_NAME for those that compile (CMake: kmod/
 * CMakeLists.txt; DKMS: dkms.conf's MAKE, for the kernel DKMS builds for).
 * No LINUX_VERSION_CODE comparisons: distribution kernels backport APIs.
 * The APIs mbcf cannot do without (compat/required/, Linux 6.1's) have no
 * wrapper: probe.sh stops the build where one is missing.
 * Only kmod/ includes this (through mbcf.h); core/ knows no kernel versions
 * (its own environment shim is include/mbcf/compat.h, another file).
 *
 * Each wrapper below names the probe it rests on; the kernel versions are
 * where mainline changed, for the reader only.
 */
#ifndef MBCF_KMOD_COMPAT_H
#define MBCF_KMOD_COMPAT_H

#include <linux/build_bug.h>
#include <linux/eventfd.h>
#include <linux/hrtimer.h>
#include <linux/mm.h>
#include <linux/netdevice.h>
#include <linux/skbuff.h>
#include <rdma/ib_umem.h>
#include <rdma/ib_verbs.h>
#include <rdma/uverbs_ioctl.h>

#include "compat-generated.h"

/* vm_flags_set (6.3): vma->vm_flags is read-only; set/clear through helpers. */
static inline void mbcf_vm_flags_set(struct vm_area_struct *vma, vm_flags_t flags)
{
#ifdef MBCF_HAVE_VM_FLAGS_SET
	vm_flags_set(vma, flags);
#else
	vma->vm_flags |= flags;
#endif
}

static inline void mbcf_vm_flags_clear(struct vm_area_struct *vma, vm_flags_t flags)
{
#ifdef MBCF_HAVE_VM_FLAGS_SET
	vm_flags_clear(vma, flags);
#else
	vma->vm_flags &= ~flags;
#endif
}

/*
 * ubuf_info_ops (6.10): struct ubuf_info's completion callback moved from
 * uarg->callback to uarg->ops->complete (same signature).  For a completion
 * function FN:
 *   MBCF_UBUF_OPS(FN);                  at file scope after FN: its ops
 *   mbcf_ubuf_set_complete(uarg, FN)    make FN uarg's completion
 *   mbcf_ubuf_is(uarg, FN)              is FN uarg's completion?
 */
#ifdef MBCF_HAVE_UBUF_INFO_OPS
#define MBCF_UBUF_OPS(fn)						\
	static const struct ubuf_info_ops fn##_ubuf_ops = { .complete = (fn) }
#define mbcf_ubuf_set_complete(uarg, fn)	((uarg)->ops = &fn##_ubuf_ops)
#define mbcf_ubuf_is(uarg, fn)			((uarg)->ops == &fn##_ubuf_ops)
#else
#define MBCF_UBUF_OPS(fn)			static_assert(1, #fn)
#define mbcf_ubuf_set_complete(uarg, fn)	((uarg)->callback = (fn))
#define mbcf_ubuf_is(uarg, fn)			((uarg)->callback == (fn))
#endif

/*
 * create_cq_attr_bundle (6.11): ib_device_ops.create_cq takes the
 * uverbs_attr_bundle (NULL for a kernel CQ) instead of the udata.
 * MBCF_CREATE_CQ_OP(NAME, IMPL) defines the op NAME for ib_device_ops on
 * IMPL(ib_cq, init_attr, udata), udata NULL for a kernel CQ as before.
 */
#ifdef MBCF_HAVE_CREATE_CQ_ATTR_BUNDLE
#define MBCF_CREATE_CQ_OP(name, impl)					\
	static int name(struct ib_cq *ibcq, const struct ib_cq_init_attr *attr, \
			struct uverbs_attr_bundle *attrs)		\
	{								\
		return impl(ibcq, attr, attrs ? &attrs->driver_udata : NULL); \
	}
#else
#define MBCF_CREATE_CQ_OP(name, impl)					\
	static int name(struct ib_cq *ibcq, const struct ib_cq_init_attr *attr, \
			struct ib_udata *udata)				\
	{								\
		return impl(ibcq, attr, udata);				\
	}
#endif

/*
 * eventfd_signal_one_arg (6.8): eventfd_signal(ctx) adds 1; before it,
 * eventfd_signal(ctx, n).  Any context (softirq included).
 */
static inline void mbcf_eventfd_signal(struct eventfd_ctx *ctx)
{
#ifdef MBCF_HAVE_EVENTFD_SIGNAL_ONE_ARG
	eventfd_signal(ctx);
#else
	eventfd_signal(ctx, 1);
#endif
}

/*
 * hrtimer_setup (6.13; hrtimer_init and storing timer->function directly
 * are gone in 6.15): initialize @timer with its callback in one call.
 */
static inline void mbcf_hrtimer_setup(struct hrtimer *timer,
				      enum hrtimer_restart (*function)(struct hrtimer *),
				      clockid_t clock_id, enum hrtimer_mode mode)
{
#ifdef MBCF_HAVE_HRTIMER_SETUP
	hrtimer_setup(timer, function, clock_id, mode);
#else
	hrtimer_init(timer, clock_id, mode);
	timer->function = function;
#endif
}

/*
 * resize_user_cq: ib_device_ops.resize_cq became .resize_user_cq, cqe an
 * unsigned int.  MBCF_RESIZE_CQ_OP(NAME, IMPL) defines NAME on
 * IMPL(ib_cq, int cqe, udata); MBCF_RESIZE_CQ_INIT(NAME) is the member's
 * initializer in ib_device_ops.  The cqe from user space (a u32) is capped
 * at INT_MAX here so IMPL's range check sees it as it was sent.
 */
#ifdef MBCF_HAVE_RESIZE_USER_CQ
#define MBCF_RESIZE_CQ_OP(name, impl)					\
	static int name(struct ib_cq *ibcq, unsigned int cqe,		\
			struct ib_udata *udata)				\
	{								\
		return impl(ibcq, cqe > INT_MAX ? INT_MAX : (int)cqe, udata); \
	}
#define MBCF_RESIZE_CQ_INIT(name)	.resize_user_cq = (name)
#else
#define MBCF_RESIZE_CQ_OP(name, impl)					\
	static int name(struct ib_cq *ibcq, int cqe, struct ib_udata *udata) \
	{								\
		return impl(ibcq, cqe, udata);				\
	}
#define MBCF_RESIZE_CQ_INIT(name)	.resize_cq = (name)
#endif

/*
 * reg_user_mr_dmah (6.17): ib_device_ops.reg_user_mr takes a struct
 * ib_dmah * (a DMA handle, for TPH steering hints) before the udata.  A
 * software device has no DMA to steer: a handle is refused (EOPNOTSUPP, as
 * rxe does).  MBCF_REG_USER_MR_OP(NAME, IMPL) defines NAME on
 * IMPL(pd, start, length, iova, access, udata).
 */
#ifdef MBCF_HAVE_REG_USER_MR_DMAH
#define MBCF_REG_USER_MR_OP(name, impl)					\
	static struct ib_mr *name(struct ib_pd *pd, u64 start, u64 length, \
				  u64 iova, int access, struct ib_dmah *dmah, \
				  struct ib_udata *udata)		\
	{								\
		if (dmah)						\
			return ERR_PTR(-EOPNOTSUPP);			\
		return impl(pd, start, length, iova, access, udata);	\
	}
#else
#define MBCF_REG_USER_MR_OP(name, impl)					\
	static struct ib_mr *name(struct ib_pd *pd, u64 start, u64 length, \
				  u64 iova, int access, struct ib_udata *udata) \
	{								\
		return impl(pd, start, length, iova, access, udata);	\
	}
#endif

/*
 * ib_umem_get_va: ib_umem_get(device, addr, size, access) was renamed
 * ib_umem_get_va (same arguments) when the umem getters for uverbs buffer
 * descriptors came.
 */
static inline struct ib_umem *mbcf_umem_get(struct ib_device *device,
					    unsigned long addr, size_t size,
					    int access)
{
#ifdef MBCF_HAVE_IB_UMEM_GET_VA
	return ib_umem_get_va(device, addr, size, access);
#else
	return ib_umem_get(device, addr, size, access);
#endif
}

/*
 * ib_dispatch_port_state_event: the RDMA core's netdev notifier raises
 * PORT_ACTIVE/PORT_ERR itself for every device bound to the netdev
 * (NETDEV_UP/DOWN/CHANGE), once per change of the port's state (it keeps
 * the last one); drivers raise theirs through the same function.  Where it
 * is, MBCF_CORE_PORT_EVENTS is 1, the driver's notifier raises none, and
 * mbcf_core_port_state_event() raises the event for @ndev's state through
 * the core (so the core's next one is no duplicate) and returns true;
 * elsewhere it returns false and the driver raises and deduplicates its own.
 */
#ifdef MBCF_HAVE_IB_DISPATCH_PORT_STATE_EVENT
#define MBCF_CORE_PORT_EVENTS	1
#else
#define MBCF_CORE_PORT_EVENTS	0
#endif

static inline bool mbcf_core_port_state_event(struct ib_device *ibdev,
					      struct net_device *ndev)
{
#ifdef MBCF_HAVE_IB_DISPATCH_PORT_STATE_EVENT
	ib_dispatch_port_state_event(ibdev, ndev);
	return true;
#else
	return false;
#endif
}

#endif /* MBCF_KMOD_COMPAT_H */
