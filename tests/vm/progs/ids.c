// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * The first numbers a fresh device hands out: create
 * K RC QPs and register K MRs back to back, print their QP numbers and
 * keys, and release them.  ids.sh compares what several device instances
 * give (they must not start alike) and checks each run's own sequence.
 *
 *   mbcf_ids -d DEV [-k K]
 * Output: "qpn N1 N2 ..." and "key K1 K2 ..." (hex), one line each.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "vmprog.h"

#define K_MAX	16

int main(int argc, char **argv)
{
	struct ibv_qp *qp[K_MAX];
	struct ibv_mr *mr[K_MAX];
	const char *devname = NULL;
	struct vp_dev d;
	struct ibv_cq *cq;
	int k = 4, i, c, err;
	void *buf;

	while ((c = getopt(argc, argv, "d:k:")) != -1) {
		switch (c) {
		case 'd': devname = optarg; break;
		case 'k': k = atoi(optarg); break;
		default: goto usage;
		}
	}
	if (!devname || k < 1 || k > K_MAX)
		goto usage;
	err = vp_dev_open(&d, devname);
	if (err)
		vp_die("open %s: %s", devname, strerror(err));
	cq = ibv_create_cq(d.ctx, 4, NULL, NULL, 0);
	buf = aligned_alloc(VP_PAGE, VP_PAGE);
	if (!cq || !buf)
		vp_die_errno("setup");
	for (i = 0; i < k; i++) {
		struct ibv_qp_init_attr ia = {
			.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
			.cap = { .max_send_wr = 1, .max_recv_wr = 1,
				 .max_send_sge = 1, .max_recv_sge = 1 },
		};

		qp[i] = ibv_create_qp(d.pd, &ia);
		if (!qp[i])
			vp_die_errno("ibv_create_qp");
	}
	for (i = 0; i < k; i++) {
		mr[i] = ibv_reg_mr(d.pd, buf, VP_PAGE, IBV_ACCESS_LOCAL_WRITE);
		if (!mr[i])
			vp_die_errno("ibv_reg_mr");
	}
	printf("qpn");
	for (i = 0; i < k; i++)
		printf(" %u", qp[i]->qp_num);
	printf("\nkey");
	for (i = 0; i < k; i++)
		printf(" 0x%08x", mr[i]->lkey);
	printf("\n");
	for (i = 0; i < k; i++)
		if (ibv_dereg_mr(mr[i]) || ibv_destroy_qp(qp[i]))
			vp_die("release #%d", i);
	ibv_destroy_cq(cq);
	free(buf);
	return vp_dev_close(&d) ? 1 : 0;

usage:
	fprintf(stderr, "usage: mbcf_ids -d DEV [-k 1..%d]\n", K_MAX);
	return 2;
}
