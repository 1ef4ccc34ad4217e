// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* The examples' shared helpers; see common.h. */
#include "common.h"

#include <endian.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

/* ---- options ---------------------------------------------------------- */

static int ex_parse_long(const char *s, long min, long max, long *out)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 0);
	if (errno || end == s || *end || v < min || v > max)
		return -1;
	*out = v;
	return 0;
}

int ex_parse_opts(int argc, char **argv, struct ex_opts *o, const char *usage)
{
	long v = 0;
	int c, bad = 0;

	while ((c = getopt(argc, argv, "d:p:n:s:c:w:t:m:h")) != -1) {
		switch (c) {
		case 'd':
			o->dev = optarg;
			break;
		case 'p':
			bad = ex_parse_long(optarg, 1, 65535, &v);
			o->port = (int)v;
			break;
		case 'n':
			bad = ex_parse_long(optarg, 1, 1L << 30, &o->iters);
			break;
		case 's':
			bad = ex_parse_long(optarg, 1, 1L << 30, &o->size);
			break;
		case 'c':
			bad = ex_parse_long(optarg, 1, 64, &v);
			o->clients = (int)v;
			break;
		case 'w':
			bad = ex_parse_long(optarg, 1, 1024, &v);
			o->depth = (int)v;
			break;
		case 't':
			bad = ex_parse_long(optarg, 1, 3600, &v);
			o->timeout_s = (int)v;
			break;
		case 'm':
			bad = strlen(optarg) != 1;
			o->mode = optarg[0];
			break;
		default:
			bad = 1;
		}
		if (bad)
			break;
	}
	if (bad || argc - optind > 1) {
		fprintf(stderr, "usage: %s %s\n", argv[0], usage);
		return -1;
	}
	o->host = optind < argc ? argv[optind] : NULL;
	return 0;
}

/* ---- device ----------------------------------------------------------- */

int ex_dev_open(struct ex_dev *d, const char *name, int cqe)
{
	struct ibv_device **list;
	struct ibv_device_attr dattr;
	struct ibv_port_attr pattr;
	int i, n = 0;

	memset(d, 0, sizeof(*d));
	list = ibv_get_device_list(&n);
	if (!list) {
		perror("ibv_get_device_list");
		return -1;
	}
	for (i = 0; i < n; i++)
		if (!strcmp(ibv_get_device_name(list[i]), name))
			break;
	if (i == n) {
		fprintf(stderr, "no RDMA device %s\n", name);
		ibv_free_device_list(list);
		return -1;
	}
	d->ctx = ibv_open_device(list[i]);
	ibv_free_device_list(list);
	if (!d->ctx) {
		fprintf(stderr, "ibv_open_device %s: %s\n", name, strerror(errno));
		return -1;
	}
	if (ibv_query_device(d->ctx, &dattr) || ibv_query_port(d->ctx, 1, &pattr)) {
		fprintf(stderr, "%s: cannot query device or port 1\n", name);
		goto err;
	}
	if (pattr.state != IBV_PORT_ACTIVE) {
		fprintf(stderr, "%s: port 1 is not active (state %d)\n", name, pattr.state);
		goto err;
	}
	d->mtu = pattr.active_mtu;
	d->max_rd_atomic = (uint32_t)dattr.max_qp_rd_atom;
	if (ibv_query_gid(d->ctx, 1, 0, &d->gid)) {
		fprintf(stderr, "%s: cannot read GID index 0\n", name);
		goto err;
	}
	d->pd = ibv_alloc_pd(d->ctx);
	if (!d->pd) {
		fprintf(stderr, "ibv_alloc_pd: %s\n", strerror(errno));
		goto err;
	}
	d->cq = ibv_create_cq(d->ctx, cqe, NULL, NULL, 0);
	if (!d->cq) {
		fprintf(stderr, "ibv_create_cq(%d): %s\n", cqe, strerror(errno));
		goto err;
	}
	return 0;
err:
	ex_dev_close(d);
	return -1;
}

void ex_dev_close(struct ex_dev *d)
{
	if (d->cq && ibv_destroy_cq(d->cq))
		fprintf(stderr, "ibv_destroy_cq failed\n");
	if (d->pd && ibv_dealloc_pd(d->pd))
		fprintf(stderr, "ibv_dealloc_pd failed\n");
	if (d->ctx && ibv_close_device(d->ctx))
		fprintf(stderr, "ibv_close_device failed\n");
	memset(d, 0, sizeof(*d));
}

struct ibv_mr *ex_reg_mr(struct ex_dev *d, void *buf, size_t len, int access)
{
	struct ibv_mr *mr = ibv_reg_mr(d->pd, buf, len, access);

	if (!mr)
		fprintf(stderr, "ibv_reg_mr(%zu bytes): %s\n", len, strerror(errno));
	return mr;
}

/* ---- queue pairs -------------------------------------------------------- */

struct ibv_qp *ex_qp_create(struct ex_dev *d, uint32_t send_wr, uint32_t recv_wr)
{
	struct ibv_qp_init_attr init = {
		.send_cq = d->cq,
		.recv_cq = d->cq,
		.cap = {
			.max_send_wr = send_wr,
			.max_recv_wr = recv_wr,
			.max_send_sge = 1,
			.max_recv_sge = 1,
			.max_inline_data = d->max_inline_data,
		},
		.qp_type = IBV_QPT_RC,
	};
	struct ibv_qp_init_attr_ex ex = {
		.send_cq = d->cq,
		.recv_cq = d->cq,
		.cap = init.cap,
		.qp_type = IBV_QPT_RC,
		.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS,
		.pd = d->pd,
		.send_ops_flags = d->send_ops_flags,
	};
	struct ibv_qp *qp = d->send_ops_flags ? ibv_create_qp_ex(d->ctx, &ex) :
						ibv_create_qp(d->pd, &init);

	if (!qp)
		fprintf(stderr, "ibv_create_qp: %s\n", strerror(errno));
	return qp;
}

void ex_peer_local(struct ex_peer *p, const struct ex_dev *d,
		   const struct ibv_qp *qp)
{
	static int seeded;

	if (!seeded) {
		srand48(getpid() ^ time(NULL));
		seeded = 1;
	}
	p->qpn = qp->qp_num;
	p->psn = (uint32_t)lrand48() & 0xffffff;
	p->gid = d->gid;
}

static int ex_modify(struct ibv_qp *qp, struct ibv_qp_attr *attr, int mask,
		     const char *state)
{
	int err = ibv_modify_qp(qp, attr, mask);

	if (err)
		fprintf(stderr, "ibv_modify_qp to %s: %s\n", state, strerror(err));
	return err ? -1 : 0;
}

int ex_qp_connect(struct ex_dev *d, struct ibv_qp *qp, const struct ex_peer *local,
		  const struct ex_peer *remote, int access)
{
	uint32_t rd_atomic = d->max_rd_atomic < 16 ? d->max_rd_atomic : 16;
	struct ibv_qp_attr init = {
		.qp_state = IBV_QPS_INIT,
		.pkey_index = 0,
		.port_num = 1,
		.qp_access_flags = access,
	};
	struct ibv_qp_attr rtr = {
		.qp_state = IBV_QPS_RTR,
		.path_mtu = d->mtu,
		.dest_qp_num = remote->qpn,
		.rq_psn = remote->psn,
		.max_dest_rd_atomic = (uint8_t)rd_atomic,
		.min_rnr_timer = 12,
		.ah_attr = {
			.is_global = 1,
			.grh = {
				.dgid = remote->gid,
				.sgid_index = 0,
				.hop_limit = 1,
			},
			.port_num = 1,
		},
	};
	struct ibv_qp_attr rts = {
		.qp_state = IBV_QPS_RTS,
		.sq_psn = local->psn,
		.timeout = 14,
		.retry_cnt = 7,
		.rnr_retry = 7,
		.max_rd_atomic = (uint8_t)rd_atomic,
	};

	if (ex_modify(qp, &init, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
		      IBV_QP_ACCESS_FLAGS, "INIT"))
		return -1;
	if (ex_modify(qp, &rtr, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
		      IBV_QP_DEST_QPN | IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
		      IBV_QP_MIN_RNR_TIMER, "RTR"))
		return -1;
	return ex_modify(qp, &rts, IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT |
			 IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC,
			 "RTS");
}

/* ---- TCP exchange --------------------------------------------------------- */

/* Timeouts on every send and receive, and no Nagle delay. */
static int ex_sock_setup(int fd, int timeout_s)
{
	struct timeval tv = { .tv_sec = timeout_s };
	int one = 1;

	if (setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) ||
	    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)) ||
	    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one))) {
		perror("setsockopt");
		return -1;
	}
	return 0;
}

int ex_tcp_listen(int port)
{
	struct sockaddr_in6 sa = {
		.sin6_family = AF_INET6,
		.sin6_port = htons((uint16_t)port),
		.sin6_addr = IN6ADDR_ANY_INIT,
	};
	int one = 1, zero = 0;
	int fd = socket(AF_INET6, SOCK_STREAM, 0);

	if (fd < 0) {
		perror("socket");
		return -1;
	}
	/* Dual stack: IPv4 clients arrive as ::ffff:a.b.c.d. */
	if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) ||
	    setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero)) ||
	    bind(fd, (struct sockaddr *)&sa, sizeof(sa)) || listen(fd, 64)) {
		fprintf(stderr, "listen on port %d: %s\n", port, strerror(errno));
		close(fd);
		return -1;
	}
	return fd;
}

int ex_tcp_accept(int lfd, int timeout_s)
{
	struct pollfd pfd = { .fd = lfd, .events = POLLIN };
	int fd, n;

	n = poll(&pfd, 1, timeout_s * 1000);
	if (n <= 0) {
		fprintf(stderr, "accept: %s\n", n ? strerror(errno) : "no client came");
		return -1;
	}
	fd = accept(lfd, NULL, NULL);
	if (fd < 0) {
		perror("accept");
		return -1;
	}
	if (ex_sock_setup(fd, timeout_s)) {
		close(fd);
		return -1;
	}
	return fd;
}

static int ex_tcp_try_connect(const char *host, int port)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM }, *res, *ai;
	char service[8];
	int fd = -1, err;

	snprintf(service, sizeof(service), "%d", port);
	err = getaddrinfo(host, service, &hints, &res);
	if (err) {
		fprintf(stderr, "%s: %s\n", host, gai_strerror(err));
		return -2;	/* permanent */
	}
	for (ai = res; ai; ai = ai->ai_next) {
		fd = socket(ai->ai_family, ai->ai_socktype, ai->ai_protocol);
		if (fd < 0)
			continue;
		if (!connect(fd, ai->ai_addr, ai->ai_addrlen))
			break;
		close(fd);
		fd = -1;
	}
	freeaddrinfo(res);
	return fd;
}

int ex_tcp_connect(const char *host, int port, int timeout_s)
{
	double deadline = ex_now_us() + timeout_s * 1e6;
	int fd;

	for (;;) {
		fd = ex_tcp_try_connect(host, port);
		if (fd >= 0 || fd == -2)
			break;
		if (ex_now_us() > deadline) {
			fprintf(stderr, "connect to %s port %d: %s\n", host, port,
				strerror(errno));
			return -1;
		}
		usleep(100 * 1000);	/* the server may not listen yet */
	}
	if (fd >= 0 && ex_sock_setup(fd, timeout_s)) {
		close(fd);
		return -1;
	}
	return fd < 0 ? -1 : fd;
}

int ex_send_all(int fd, const void *buf, size_t len)
{
	const char *p = buf;

	while (len) {
		ssize_t n = send(fd, p, len, MSG_NOSIGNAL);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			fprintf(stderr, "send to peer: %s\n",
				errno == EAGAIN ? "timed out" : strerror(errno));
			return -1;
		}
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

int ex_recv_all(int fd, void *buf, size_t len)
{
	char *p = buf;

	while (len) {
		ssize_t n = recv(fd, p, len, 0);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			fprintf(stderr, "receive from peer: %s\n", !n ? "connection closed" :
				errno == EAGAIN ? "timed out" : strerror(errno));
			return -1;
		}
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

int ex_send_u64(int fd, uint64_t v)
{
	v = htobe64(v);
	return ex_send_all(fd, &v, sizeof(v));
}

int ex_recv_u64(int fd, uint64_t *v)
{
	if (ex_recv_all(fd, v, sizeof(*v)))
		return -1;
	*v = be64toh(*v);
	return 0;
}

int ex_send_u64s(int fd, const uint64_t *v, size_t n)
{
	uint64_t *be = malloc(n * sizeof(*be) + 1);
	size_t i;
	int err;

	if (!be) {
		perror("malloc");
		return -1;
	}
	for (i = 0; i < n; i++)
		be[i] = htobe64(v[i]);
	err = ex_send_all(fd, be, n * sizeof(*be));
	free(be);
	return err;
}

int ex_recv_u64s(int fd, uint64_t *v, size_t n)
{
	size_t i;

	if (ex_recv_all(fd, v, n * sizeof(*v)))
		return -1;
	for (i = 0; i < n; i++)
		v[i] = be64toh(v[i]);
	return 0;
}

/* On the wire: qpn, psn (4 each), gid (16), rkey (4), addr (8), arg (4); big endian. */
#define EX_PEER_WIRE 40

int ex_exchange(int fd, const struct ex_peer *local, struct ex_peer *remote)
{
	unsigned char b[EX_PEER_WIRE];
	uint32_t v32;
	uint64_t v64;

	v32 = htobe32(local->qpn);
	memcpy(b, &v32, 4);
	v32 = htobe32(local->psn);
	memcpy(b + 4, &v32, 4);
	memcpy(b + 8, local->gid.raw, 16);
	v32 = htobe32(local->rkey);
	memcpy(b + 24, &v32, 4);
	v64 = htobe64(local->addr);
	memcpy(b + 28, &v64, 8);
	v32 = htobe32(local->arg);
	memcpy(b + 36, &v32, 4);
	if (ex_send_all(fd, b, sizeof(b)) || ex_recv_all(fd, b, sizeof(b)))
		return -1;

	memcpy(&v32, b, 4);
	remote->qpn = be32toh(v32);
	memcpy(&v32, b + 4, 4);
	remote->psn = be32toh(v32);
	memcpy(remote->gid.raw, b + 8, 16);
	memcpy(&v32, b + 24, 4);
	remote->rkey = be32toh(v32);
	memcpy(&v64, b + 28, 8);
	remote->addr = be64toh(v64);
	memcpy(&v32, b + 36, 4);
	remote->arg = be32toh(v32);
	return 0;
}

/* ---- connections ------------------------------------------------------------ */

/* QP, exchange, RESET -> RTS: what both ends do once the socket is there. */
static int ex_conn_setup(struct ex_dev *d, struct ex_conn *c, struct ibv_mr *mr,
			 int access, uint32_t arg, uint32_t send_wr, uint32_t recv_wr)
{
	c->qp = ex_qp_create(d, send_wr, recv_wr);
	if (!c->qp)
		return -1;
	ex_peer_local(&c->local, d, c->qp);
	c->local.rkey = mr ? mr->rkey : 0;
	c->local.addr = mr ? (uintptr_t)mr->addr : 0;
	c->local.arg = arg;
	if (ex_exchange(c->fd, &c->local, &c->remote))
		return -1;
	return ex_qp_connect(d, c->qp, &c->local, &c->remote, access);
}

int ex_serve(struct ex_dev *d, const struct ex_opts *o, struct ex_conn *c, int n,
	     struct ibv_mr *mr, int access, uint32_t send_wr, uint32_t recv_wr)
{
	int i, lfd, err = 0;

	for (i = 0; i < n; i++)
		c[i] = (struct ex_conn){ .fd = -1 };
	lfd = ex_tcp_listen(o->port);
	if (lfd < 0)
		return -1;
	for (i = 0; i < n && !err; i++) {
		c[i].fd = ex_tcp_accept(lfd, o->timeout_s);
		err = c[i].fd < 0 ||
		      ex_conn_setup(d, &c[i], mr, access, (uint32_t)i, send_wr, recv_wr);
	}
	close(lfd);
	return err ? -1 : 0;
}

int ex_join(struct ex_dev *d, const struct ex_opts *o, struct ex_conn *c,
	    struct ibv_mr *mr, int access, uint32_t arg, uint32_t send_wr,
	    uint32_t recv_wr)
{
	*c = (struct ex_conn){ .fd = -1 };
	c->fd = ex_tcp_connect(o->host, o->port, o->timeout_s);
	if (c->fd < 0)
		return -1;
	return ex_conn_setup(d, c, mr, access, arg, send_wr, recv_wr);
}

int ex_conn_close(struct ex_conn *c)
{
	int err = 0;

	if (c->qp && ibv_destroy_qp(c->qp)) {
		fprintf(stderr, "ibv_destroy_qp failed\n");
		err = -1;
	}
	if (c->fd >= 0)
		close(c->fd);
	*c = (struct ex_conn){ .fd = -1 };
	return err;
}

int ex_send_verdicts(struct ex_conn *cl, int n, int err)
{
	int c;

	for (c = 0; c < n; c++)
		if (ex_send_u64(cl[c].fd, err ? 1 : 0))
			err = -1;
	return err;
}

int ex_serve_close(struct ex_conn *cl, int n, struct ibv_mr *mr, int err)
{
	int c;

	for (c = 0; cl && c < n; c++)
		if (ex_conn_close(&cl[c]))
			err = -1;
	if (mr && ibv_dereg_mr(mr)) {
		fprintf(stderr, "ibv_dereg_mr failed\n");
		err = -1;
	}
	return err;
}

/* ---- completions ------------------------------------------------------------- */

double ex_now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

int ex_poll_one(struct ibv_cq *cq, struct ibv_wc *wc, int timeout_s)
{
	double deadline = ex_now_us() + timeout_s * 1e6;
	unsigned int spins = 0;
	int n;

	for (;;) {
		n = ibv_poll_cq(cq, 1, wc);
		if (n < 0) {
			fprintf(stderr, "ibv_poll_cq: %s\n", strerror(errno));
			return -1;
		}
		if (n)
			break;
		/* Several pollers may share few CPUs with the kernel's work. */
		if (++spins % 64 == 0) {
			if (ex_now_us() > deadline) {
				fprintf(stderr, "no completion in %d s\n", timeout_s);
				return -1;
			}
			sched_yield();
		}
	}
	if (wc->status != IBV_WC_SUCCESS) {
		fprintf(stderr, "completion wr_id %llu opcode %d: %s (vendor_err %u)\n",
			(unsigned long long)wc->wr_id, wc->opcode,
			ibv_wc_status_str(wc->status), wc->vendor_err);
		return -1;
	}
	return 0;
}

int ex_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr, void *addr,
		 uint32_t len, uint32_t lkey)
{
	struct ibv_sge sge = {
		.addr = (uintptr_t)addr,
		.length = len,
		.lkey = lkey,
	};
	struct ibv_send_wr *bad;
	int err;

	wr->sg_list = &sge;
	wr->num_sge = 1;
	wr->next = NULL;
	err = ibv_post_send(qp, wr, &bad);
	wr->sg_list = NULL;	/* sge dies here; the provider copied it */
	if (err)
		fprintf(stderr, "ibv_post_send opcode %d: %s\n", wr->opcode, strerror(err));
	return err ? -1 : 0;
}
