/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * The boring parts the examples share: options, opening a device, the TCP
 * exchange of connection data (like perftest), bringing an RC QP from RESET
 * to RTS, and polling completions.
 *
 * Only standard libibverbs: no rdma_cm (mbcf has none yet).  The peer is
 * addressed by GID index 0 (fe80:: + EUI-64 of its MAC), from which the
 * kernel derives the destination MAC.
 *
 * Every helper prints what went wrong on stderr and returns -1 (or NULL);
 * the programs then tear down what they built and exit 1.
 */
#ifndef MBCF_EXAMPLES_COMMON_H
#define MBCF_EXAMPLES_COMMON_H

#include <stddef.h>
#include <stdint.h>
#include <infiniband/verbs.h>

/* Options common to all examples; each program uses the ones it needs. */
struct ex_opts {
	const char *dev;	/* -d: RDMA device (mbcf0) */
	int port;		/* -p: TCP port of the exchange */
	const char *host;	/* server if NULL, else the server's address */
	long iters;		/* -n: iterations per process */
	long size;		/* -s: message size in bytes */
	int clients;		/* -c: clients the server waits for */
	int depth;		/* -w: work requests in flight */
	int timeout_s;		/* -t: give up after this many seconds idle */
	int mode;		/* -m: program-specific variant (letter) */
};

/*
 * Parse "[-d DEV] [-p PORT] [-n N] [-s SIZE] [-c CLIENTS] [-w DEPTH]
 * [-t SEC] [-m MODE] [HOST]" into @o, whose fields hold the defaults.
 * @usage is printed on a bad option.  Returns 0, or -1.
 */
int ex_parse_opts(int argc, char **argv, struct ex_opts *o, const char *usage);

/* One device with one PD and one CQ (send and receive completions). */
struct ex_dev {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	enum ibv_mtu mtu;	/* the port's active_mtu */
	union ibv_gid gid;	/* GID index 0 */
	uint32_t max_rd_atomic;	/* the device's max_qp_rd_atom */
	/* Set after ex_dev_open for QPs that post through the work-request
	 * API (ibv_wr_*, mbcfdv_wr_fifo_push): ex_qp_create then makes them
	 * with ibv_create_qp_ex and these send_ops_flags and inline bytes. */
	uint64_t send_ops_flags;
	uint32_t max_inline_data;
};

int ex_dev_open(struct ex_dev *d, const char *name, int cqe);
void ex_dev_close(struct ex_dev *d);	/* safe on a partly opened one */

/* Register @len bytes at @buf with @access; NULL on failure. */
struct ibv_mr *ex_reg_mr(struct ex_dev *d, void *buf, size_t len, int access);

/* An RC QP on d->cq with room for @send_wr and @recv_wr work requests
 * (extended when d->send_ops_flags is set: ibv_qp_to_qp_ex works on it). */
struct ibv_qp *ex_qp_create(struct ex_dev *d, uint32_t send_wr, uint32_t recv_wr);

/* What each side tells the other before the QPs connect. */
struct ex_peer {
	uint32_t qpn;		/* its QP number */
	uint32_t psn;		/* its first packet sequence number */
	union ibv_gid gid;	/* its GID index 0 */
	uint32_t rkey;		/* the MR the peer may access (0: none) */
	uint64_t addr;		/* the address in that MR */
	uint32_t arg;		/* program-specific (e.g. a client id) */
};

/* Fill qpn, gid and a random psn; rkey, addr and arg are the caller's. */
void ex_peer_local(struct ex_peer *p, const struct ex_dev *d,
		   const struct ibv_qp *qp);

/*
 * Move @qp RESET -> INIT -> RTR -> RTS towards @remote: path MTU =
 * active_mtu, ah_attr.is_global with grh.dgid = remote GID, sgid_index 0,
 * hop_limit 1; @access = the remote access the QP grants (IBV_ACCESS_*).
 */
int ex_qp_connect(struct ex_dev *d, struct ibv_qp *qp, const struct ex_peer *local,
		  const struct ex_peer *remote, int access);

/* ---- one connection: a socket to the peer and a QP connected to its QP ---- */

struct ex_conn {
	int fd;			/* TCP socket to the peer (-1: none) */
	struct ibv_qp *qp;
	struct ex_peer local;	/* what we told the peer */
	struct ex_peer remote;	/* what the peer told us */
};

/*
 * Server: accept @n clients on o->port; for each a QP (@send_wr, @recv_wr)
 * connected to the client's, granting @access to @mr (local.rkey/addr;
 * NULL: none).  Client i is told arg = i.  On failure the connections made
 * so far stay in @c for ex_conn_close().
 */
int ex_serve(struct ex_dev *d, const struct ex_opts *o, struct ex_conn *c, int n,
	     struct ibv_mr *mr, int access, uint32_t send_wr, uint32_t recv_wr);
/* Client: the same towards the server at o->host, telling it @arg. */
int ex_join(struct ex_dev *d, const struct ex_opts *o, struct ex_conn *c,
	    struct ibv_mr *mr, int access, uint32_t arg, uint32_t send_wr,
	    uint32_t recv_wr);
/* Destroy the QP and close the socket; 0, or -1 if destroying failed. */
int ex_conn_close(struct ex_conn *c);
/* Server: tell each of the @n clients the verdict (0 = every check passed);
 * returns @err, or -1 if a client could not be told. */
int ex_send_verdicts(struct ex_conn *cl, int n, int err);
/* Server: close all @n client connections and deregister @mr (may be NULL);
 * returns @err, or -1 if a teardown step failed. */
int ex_serve_close(struct ex_conn *cl, int n, struct ibv_mr *mr, int err);

/* ---- TCP exchange (every call gives up after the timeout) ---- */

int ex_tcp_listen(int port);	/* listening socket on all addresses */
int ex_tcp_accept(int lfd, int timeout_s);
/* Connect to @host:@port, retrying while the server is not listening yet. */
int ex_tcp_connect(const char *host, int port, int timeout_s);
int ex_send_all(int fd, const void *buf, size_t len);
int ex_recv_all(int fd, void *buf, size_t len);
/* Send @local, then receive the peer's into @remote. */
int ex_exchange(int fd, const struct ex_peer *local, struct ex_peer *remote);
int ex_send_u64(int fd, uint64_t v);
int ex_recv_u64(int fd, uint64_t *v);
/* @n values in one go (big endian on the wire; @v is left as it was). */
int ex_send_u64s(int fd, const uint64_t *v, size_t n);
int ex_recv_u64s(int fd, uint64_t *v, size_t n);

/* ---- completions ---- */

/*
 * Wait (busy poll, yielding the CPU between empty polls) for one completion
 * on @cq, at most @timeout_s seconds.  Fails unless its status is success.
 */
int ex_poll_one(struct ibv_cq *cq, struct ibv_wc *wc, int timeout_s);

/* Post one work request with one SGE (@len bytes at @addr, key @lkey). */
int ex_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr, void *addr,
		 uint32_t len, uint32_t lkey);

double ex_now_us(void);		/* CLOCK_MONOTONIC in microseconds */

#endif
