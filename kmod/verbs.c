// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * mbcf verbs: the thin layer between the RDMA core and the device.  Each
 * entry point checks its arguments and hands off; no protocol logic here.
 */
#include <linux/module.h>
#include <rdma/ib_mad.h>
#include <rdma/ib_verbs.h>
#include <uapi/rdma/ib_user_verbs.h>

#include "mbcf.h"
#include "rdma/mbcf-abi.h"

#define MBCF_PKEY_DEFAULT	0xffff

static int mbcf_verbs_query_device(struct ib_device *ibdev,
				   struct ib_device_attr *attr,
				   struct ib_udata *udata)
{
	struct mbcf_dev *dev = to_mbcf_dev(ibdev);
	struct mbcf_query_device_resp resp = {
		.qp_rate_limit_min = MBCF_PACE_MIN_KBPS,
		.qp_rate_limit_max = mbcf_pacer_max_kbps(dev),
		.supported_qpts = BIT(IB_QPT_RC) | BIT(IB_QPT_UC),
	};
	int err;

	/* udata: the caller's (uverbs), an empty one (ib_register_device up
	 * to 6.x) or none at all (7.x registers with NULL) */
	if (udata && udata->inlen)
		return -EINVAL;
	/* packet pacing caps: no generic field carries them to user space */
	if (udata && udata->outlen) {
		err = ib_copy_to_udata(udata, &resp,
				       min_t(size_t, udata->outlen, sizeof(resp)));
		if (err)
			return err;
	}

	memset(attr, 0, sizeof(*attr));
	attr->fw_ver = 1;
	attr->sys_image_guid = dev->ibdev.node_guid;
	attr->max_mr_size = U64_MAX;
	attr->page_size_cap = PAGE_SIZE;
	attr->vendor_id = 0xffffff;
	attr->max_qp = MBCF_MAX_QP;
	attr->max_qp_wr = MBCF_MAX_QP_WR;
	attr->max_send_sge = MBCF_MAX_SGE;
	attr->max_recv_sge = MBCF_MAX_SGE;
	attr->max_sge_rd = MBCF_MAX_SGE;
	attr->max_cq = MBCF_MAX_CQ;
	attr->max_cqe = MBCF_MAX_CQE;
	attr->max_mr = MBCF_MAX_MR;
	attr->max_mw = MBCF_MAX_MW;
	attr->max_ah = MBCF_MAX_AH;
	attr->max_srq = MBCF_MAX_SRQ;
	attr->max_srq_wr = MBCF_MAX_SRQ_WR;
	attr->max_srq_sge = MBCF_MAX_SGE;
	attr->max_pd = MBCF_MAX_PD;
	attr->max_qp_rd_atom = MBCF_MAX_RD_ATOMIC;
	attr->max_qp_init_rd_atom = MBCF_MAX_RD_ATOMIC;
	attr->max_res_rd_atom = MBCF_MAX_RD_ATOMIC * MBCF_MAX_QP;
	/* Atomics are CPU atomic instructions on the target memory, so they
	 * are atomic against the target CPU's own accesses too. */
	attr->atomic_cap = IB_ATOMIC_GLOB;
	attr->max_pkeys = 1;
	attr->device_cap_flags = IB_DEVICE_MEM_WINDOW | IB_DEVICE_MEM_WINDOW_TYPE_2B |
				 IB_DEVICE_RC_RNR_NAK_GEN;
	/* fast registration for kernel consumers (frmr.c) */
	attr->device_cap_flags |= IB_DEVICE_MEM_MGT_EXTENSIONS;
	attr->max_fast_reg_page_list_len = MBCF_FRMR_MAX_PAGES;
	attr->local_ca_ack_delay = 15;
	/* The core copies this into ibdev->attrs at registration; nldev
	 * refuses `rdma link delete` without it. */
	attr->kernel_cap_flags = IBK_ALLOW_USER_UNREG | IBK_LOCAL_DMA_LKEY;
	return 0;
}

static int mbcf_verbs_query_port(struct ib_device *ibdev, u32 port_num,
				 struct ib_port_attr *attr)
{
	struct mbcf_dev *dev = to_mbcf_dev(ibdev);
	bool active = mbcf_device_port_active(dev);

	/* The core zeroes *attr before calling us. */
	attr->state = active ? IB_PORT_ACTIVE : IB_PORT_DOWN;
	attr->phys_state = active ? IB_PORT_PHYS_STATE_LINK_UP :
				    IB_PORT_PHYS_STATE_DISABLED;
	attr->max_mtu = IB_MTU_4096;
	attr->active_mtu = mbcf_device_active_mtu(dev);
	attr->phys_mtu = READ_ONCE(dev->ndev->mtu);
	attr->gid_tbl_len = MBCF_GID_TBL_LEN;
	attr->ip_gids = true;
	attr->pkey_tbl_len = 1;
	attr->max_msg_sz = MBCF_MAX_MSG_SIZE;
	attr->max_vl_num = 1;
	/* the CM runs over QP1 (rdma_cm, ib_cm); no subnet manager on RoCE */
	attr->port_cap_flags = IB_PORT_CM_SUP;
	/*
	 * A netdev being unregistered has no speed to tell (ENODEV).  Report
	 * the slowest instead of failing: the core drops an event whose
	 * query_port fails, and the port's PORT_ERR is due exactly then.
	 */
	if (ib_get_eth_speed(ibdev, port_num, &attr->active_speed,
			     &attr->active_width)) {
		attr->active_speed = IB_SPEED_SDR;
		attr->active_width = IB_WIDTH_1X;
	}
	return 0;
}

static int mbcf_verbs_get_port_immutable(struct ib_device *ibdev,
					 u32 port_num,
					 struct ib_port_immutable *immutable)
{
	/*
	 * RoCE v1: GIDs are IP addresses (and the link-local one from the
	 * MAC), MADs travel as datagrams on QP1, so the RDMA core runs its
	 * MAD, CM and rdma_cm clients on the port.
	 */
	immutable->core_cap_flags = RDMA_CORE_PORT_IBA_ROCE;
	immutable->pkey_tbl_len = 1;
	immutable->gid_tbl_len = MBCF_GID_TBL_LEN;
	immutable->max_mad_size = IB_MGMT_MAD_SIZE;
	return 0;
}

static enum rdma_link_layer mbcf_verbs_get_link_layer(struct ib_device *ibdev,
						      u32 port_num)
{
	return IB_LINK_LAYER_ETHERNET;
}

static int mbcf_verbs_query_pkey(struct ib_device *ibdev, u32 port_num,
				 u16 index, u16 *pkey)
{
	if (index > 0)
		return -EINVAL;
	*pkey = MBCF_PKEY_DEFAULT;
	return 0;
}

static void mbcf_verbs_get_dev_fw_str(struct ib_device *ibdev, char *str)
{
	snprintf(str, IB_FW_VERSION_NAME_MAX, "%s", MBCF_FW_VERSION);
}

static int mbcf_verbs_alloc_ucontext(struct ib_ucontext *ibuc,
				     struct ib_udata *udata)
{
	struct mbcf_dev *dev = to_mbcf_dev(ibuc->device);
	struct mbcf_ucontext *uc = container_of(ibuc, struct mbcf_ucontext, ibuc);
	struct mbcf_alloc_ucontext_resp resp = {
		.abi_version = MBCF_ABI_VERSION,
		.max_inline = MBCF_MAX_INLINE,
	};
	int err;

	if (udata->outlen < sizeof(resp))
		return -EINVAL;
	err = ib_copy_to_udata(udata, &resp, sizeof(resp));
	if (err)
		return err;
	uc->user = mbcf_user_get(dev);
	if (IS_ERR(uc->user))
		return PTR_ERR(uc->user);
	atomic_inc(&dev->ucontext_count);
	return 0;
}

/*
 * The device is going away while a process still holds it (`rdma link
 * delete`, its netdev removed, the module unloaded).  The RDMA core has
 * destroyed every object of the context by now (each ring marked dead) and
 * raises IB_EVENT_DEVICE_FATAL; the ring pages stay valid memory as long as
 * the process maps them, and no kernel code reads them any more.  Having
 * this op is what lets removal proceed instead of waiting for the process.
 */
static void mbcf_verbs_disassociate_ucontext(struct ib_ucontext *ibuc)
{
}

static void mbcf_verbs_dealloc_ucontext(struct ib_ucontext *ibuc)
{
	struct mbcf_dev *dev = to_mbcf_dev(ibuc->device);

	mbcf_user_put(dev, container_of(ibuc, struct mbcf_ucontext, ibuc)->user);
	atomic_dec(&dev->ucontext_count);
}

static int mbcf_verbs_alloc_pd(struct ib_pd *ibpd, struct ib_udata *udata)
{
	struct mbcf_pd *pd = container_of(ibpd, struct mbcf_pd, ibpd);

	return mbcf_res_get(mbcf_pd_dev(ibpd), udata, MBCF_RES_PD, &pd->owner);
}

static int mbcf_verbs_dealloc_pd(struct ib_pd *ibpd, struct ib_udata *udata)
{
	mbcf_res_put(mbcf_pd_dev(ibpd), container_of(ibpd, struct mbcf_pd, ibpd)->owner,
		     MBCF_RES_PD);
	return 0;
}

/* create_cq's signature differs by kernel (compat.h); mbcf_cq_create takes the udata. */
MBCF_CREATE_CQ_OP(mbcf_verbs_create_cq, mbcf_cq_create)
/* So do resize_cq's name and cqe type; mbcf_cq_resize takes an int. */
MBCF_RESIZE_CQ_OP(mbcf_verbs_resize_cq, mbcf_cq_resize)

const struct ib_device_ops mbcf_verbs_ops = {
	.uverbs_abi_ver = MBCF_UVERBS_ABI_VERSION,

	.query_device = mbcf_verbs_query_device,
	.query_port = mbcf_verbs_query_port,
	.get_port_immutable = mbcf_verbs_get_port_immutable,
	.get_link_layer = mbcf_verbs_get_link_layer,
	.query_pkey = mbcf_verbs_query_pkey,
	.get_dev_fw_str = mbcf_verbs_get_dev_fw_str,
	.alloc_ucontext = mbcf_verbs_alloc_ucontext,
	.dealloc_ucontext = mbcf_verbs_dealloc_ucontext,
	.disassociate_ucontext = mbcf_verbs_disassociate_ucontext,
	.alloc_pd = mbcf_verbs_alloc_pd,
	.dealloc_pd = mbcf_verbs_dealloc_pd,
	.mmap = mbcf_umap_mmap,
	.mmap_free = mbcf_umap_free,
	.create_cq = mbcf_verbs_create_cq,
	.destroy_cq = mbcf_cq_destroy,
	.req_notify_cq = mbcf_cq_req_notify,
	.poll_cq = mbcf_cq_poll,
	MBCF_RESIZE_CQ_INIT(mbcf_verbs_resize_cq),
	.create_qp = mbcf_qp_create,
	.modify_qp = mbcf_qp_modify,
	.query_qp = mbcf_qp_query,
	.destroy_qp = mbcf_qp_destroy,
	.post_send = mbcf_qp_post_send,
	.post_recv = mbcf_qp_post_recv,

	INIT_RDMA_OBJ_SIZE(ib_ucontext, mbcf_ucontext, ibuc),
	INIT_RDMA_OBJ_SIZE(ib_pd, mbcf_pd, ibpd),
	INIT_RDMA_OBJ_SIZE(ib_cq, mbcf_cq, ibcq),
	INIT_RDMA_OBJ_SIZE(ib_qp, mbcf_qp, ibqp),
};
