// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * RDS over RDMA (the kernel's rds_rdma) between two AF_RDS sockets bound to
 * one address of an RDMA device (tests/vm/rds.sh: mbcf0's):
 *   - both sockets forced onto the IB transport (SO_RDS_TRANSPORT);
 *   - messages A->B of several sizes up to RDS's 1 MiB limit, and B->A,
 *     each received with its exact length, source and every byte;
 *   - RDS's RDMA: B registers a buffer with a message to A
 *     (RDS_CMSG_RDMA_MAP, FRWR under the hood), A finds the cookie in it
 *     (RDS_CMSG_RDMA_DEST); A RDMA-writes into it with a message
 *     (RDS_CMSG_RDMA_ARGS, RDS_RDMA_READWRITE | NOTIFY_ME), gets the
 *     completion notice (RDS_CMSG_RDMA_STATUS, success, its token), and B,
 *     once the message is in, finds exactly those bytes there and the bytes
 *     around the range untouched; then A RDMA-reads a new pattern B wrote;
 *     B frees the MR (RDS_FREE_MR).
 * Prints "ok: ..." per check and "rds_test: N check(s) failed" at the end;
 * exit status 0 only if none failed.
 *   mbcf_rds_test IPV4 PORT_A PORT_B [TIMEOUT_S]
 */
#include <arpa/inet.h>
#include <errno.h>
#include <linux/rds.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#ifndef AF_RDS
#define AF_RDS 21
#endif

static int failed;
static int timeout_ms = 60000;

#define CHECK(cond, ...)                                                       \
	do {                                                                   \
		if (cond) {                                                    \
			printf("ok: ");                                        \
		} else {                                                       \
			printf("FAIL: ");                                      \
			failed++;                                              \
		}                                                              \
		printf(__VA_ARGS__);                                           \
		printf("\n");                                                  \
		fflush(stdout);                                                \
	} while (0)

static void die(const char *what)
{
	printf("FAIL: %s: %s\n", what, strerror(errno));
	printf("rds_test: %d check(s) failed\n", failed + 1);
	exit(1);
}

static void fill(uint8_t *p, size_t n, uint32_t seed)
{
	uint32_t x = seed * 2654435761u + 1;

	for (size_t i = 0; i < n; i++) {
		x = x * 1103515245u + 12345u;
		p[i] = (uint8_t)(x >> 16);
	}
}

static int open_rds(const struct sockaddr_in *sin)
{
	int fd = socket(AF_RDS, SOCK_SEQPACKET, 0);
	int t = RDS_TRANS_IB, got = -1, buf = 8 << 20;
	socklen_t len = sizeof(got);

	if (fd < 0)
		die("socket(AF_RDS)");
	if (setsockopt(fd, SOL_RDS, SO_RDS_TRANSPORT, &t, sizeof(t)))
		die("SO_RDS_TRANSPORT IB");
	/* RDS refuses a message larger than half the send buffer */
	if (setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &buf, sizeof(buf)) ||
	    setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &buf, sizeof(buf)))
		die("SO_SNDBUFFORCE/SO_RCVBUFFORCE");
	if (bind(fd, (const struct sockaddr *)sin, sizeof(*sin)))
		die("bind");
	if (getsockopt(fd, SOL_RDS, SO_RDS_TRANSPORT, &got, &len))
		die("getsockopt SO_RDS_TRANSPORT");
	CHECK(got == RDS_TRANS_IB, "socket on port %u bound over the IB transport (%d)",
	      ntohs(sin->sin_port), got);
	return fd;
}

static int wait_in(int fd)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	int n = poll(&p, 1, timeout_ms);

	if (n < 0)
		die("poll");
	return n;
}

/* Send @len bytes (optionally with one control message) to @to. */
static void send_msg(int fd, const struct sockaddr_in *to, const void *buf,
		     size_t len, const void *cmsg, size_t cmsg_len)
{
	struct iovec iov = { .iov_base = (void *)buf, .iov_len = len };
	struct msghdr m = {
		.msg_name = (void *)to,
		.msg_namelen = sizeof(*to),
		.msg_iov = &iov,
		.msg_iovlen = 1,
		.msg_control = (void *)cmsg,
		.msg_controllen = cmsg_len,
	};
	ssize_t n;

	for (int tries = 0;; tries++) {
		n = sendmsg(fd, &m, 0);
		if (n >= 0 || (errno != ENOBUFS && errno != EAGAIN) || tries > 600)
			break;
		usleep(100000);		/* the connection is still coming up */
	}
	if (n < 0)
		die("sendmsg");
	if ((size_t)n != len) {
		printf("FAIL: sendmsg sent %zd of %zu bytes\n", n, len);
		failed++;
	}
}

/*
 * Receive one message into @buf (@cap bytes): its length, or -1 on timeout.
 * @from gets the source; @cmsg/@cmsg_cap the control messages.
 */
static ssize_t recv_msg(int fd, void *buf, size_t cap, struct sockaddr_in *from,
			void *cmsg, size_t *cmsg_len, int *flags)
{
	struct iovec iov = { .iov_base = buf, .iov_len = cap };
	struct msghdr m = {
		.msg_name = from,
		.msg_namelen = sizeof(*from),
		.msg_iov = &iov,
		.msg_iovlen = 1,
		.msg_control = cmsg,
		.msg_controllen = cmsg_len ? *cmsg_len : 0,
	};
	ssize_t n;

	if (!wait_in(fd))
		return -1;
	n = recvmsg(fd, &m, 0);
	if (n < 0)
		die("recvmsg");
	if (cmsg_len)
		*cmsg_len = m.msg_controllen;
	if (flags)
		*flags = m.msg_flags;
	return n;
}

/* One message @from -> @to, checked byte for byte at the receiver. */
static void one_message(int sfd, int rfd, const struct sockaddr_in *sa,
			const struct sockaddr_in *ra, size_t len, uint32_t seed,
			uint8_t *tx, uint8_t *rx, size_t cap)
{
	struct sockaddr_in from;
	ssize_t n;
	int flags = 0;

	fill(tx, len, seed);
	memset(rx, 0xee, len + 1);
	send_msg(sfd, ra, tx, len, NULL, 0);
	memset(&from, 0, sizeof(from));
	n = recv_msg(rfd, rx, cap, &from, NULL, NULL, &flags);
	if (n < 0) {
		CHECK(0, "%zu-byte message %u -> %u: nothing within %d ms", len,
		      ntohs(sa->sin_port), ntohs(ra->sin_port), timeout_ms);
		return;
	}
	CHECK((size_t)n == len && !(flags & MSG_TRUNC) && !memcmp(tx, rx, len) &&
	      rx[len] == 0xee && from.sin_addr.s_addr == sa->sin_addr.s_addr &&
	      from.sin_port == sa->sin_port,
	      "%zu-byte message %u -> %u: %zd bytes from %s:%u, every byte equal",
	      len, ntohs(sa->sin_port), ntohs(ra->sin_port), n,
	      inet_ntoa(from.sin_addr), ntohs(from.sin_port));
}

/* Wait for the RDMA completion notice of @token on @fd. */
static void rdma_notice(int fd, uint64_t token, const char *what)
{
	char cbuf[256];
	size_t clen = sizeof(cbuf);
	struct sockaddr_in from;
	uint8_t dummy[16];
	struct msghdr m = { .msg_control = cbuf, .msg_controllen = sizeof(cbuf) };
	struct cmsghdr *c;
	ssize_t n;
	int found = 0;

	n = recv_msg(fd, dummy, sizeof(dummy), &from, cbuf, &clen, NULL);
	if (n < 0) {
		CHECK(0, "%s: no completion notice within %d ms", what, timeout_ms);
		return;
	}
	m.msg_controllen = clen;
	for (c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c)) {
		struct rds_rdma_notify nt;

		if (c->cmsg_level != SOL_RDS || c->cmsg_type != RDS_CMSG_RDMA_STATUS)
			continue;
		memcpy(&nt, CMSG_DATA(c), sizeof(nt));
		found = 1;
		CHECK(nt.user_token == token && nt.status == RDS_RDMA_SUCCESS,
		      "%s: completion notice token %#llx status %d", what,
		      (unsigned long long)nt.user_token, nt.status);
	}
	if (!found)
		CHECK(0, "%s: a message without RDS_CMSG_RDMA_STATUS (%zd bytes)", what, n);
}

/* A sends "tag" to B with an RDMA op on B's MR @cookie, @len bytes. */
static void rdma_op(int afd, const struct sockaddr_in *ba, uint64_t cookie,
		    uint8_t *local, size_t len, int write, uint64_t token)
{
	union {
		char buf[CMSG_SPACE(sizeof(struct rds_rdma_args))];
		struct cmsghdr align;
	} u;
	struct rds_iovec lv = { .addr = (uintptr_t)local, .bytes = len };
	struct rds_rdma_args args = {
		.cookie = cookie,
		.remote_vec = { .addr = 0, .bytes = len },
		.local_vec_addr = (uintptr_t)&lv,
		.nr_local = 1,
		.flags = (write ? RDS_RDMA_READWRITE : 0) | RDS_RDMA_NOTIFY_ME,
		.user_token = token,
	};
	struct cmsghdr *c = &u.align;

	memset(&u, 0, sizeof(u));
	c->cmsg_level = SOL_RDS;
	c->cmsg_type = RDS_CMSG_RDMA_ARGS;
	c->cmsg_len = CMSG_LEN(sizeof(args));
	memcpy(CMSG_DATA(c), &args, sizeof(args));
	send_msg(afd, ba, write ? "W" : "R", 1, u.buf, sizeof(u.buf));
}

int main(int argc, char **argv)
{
	static const size_t sizes[] = { 1, 100, 4095, 4096, 5000, 65553, 300007, 1 << 20 };
	const size_t cap = (1 << 20) + 4096, guard = 512, rlen = 256 * 1024 + 123;
	struct sockaddr_in a = { .sin_family = AF_INET }, b = a, from;
	uint8_t *tx, *rx, *mem, *region, *la, *exp;
	uint64_t cookie = 0;
	ssize_t n;
	int afd, bfd;

	if (argc < 4) {
		fprintf(stderr, "usage: %s IPV4 PORT_A PORT_B [TIMEOUT_S]\n", argv[0]);
		return 2;
	}
	if (argc > 4)
		timeout_ms = atoi(argv[4]) * 1000;
	if (inet_pton(AF_INET, argv[1], &a.sin_addr) != 1)
		return 2;
	b.sin_addr = a.sin_addr;
	a.sin_port = htons(atoi(argv[2]));
	b.sin_port = htons(atoi(argv[3]));
	tx = malloc(cap);
	rx = malloc(cap);
	mem = malloc(rlen + 2 * guard + 8192);
	la = malloc(rlen);
	exp = malloc(rlen + 2 * guard);
	if (!tx || !rx || !mem || !la || !exp)
		die("malloc");

	afd = open_rds(&a);
	bfd = open_rds(&b);

	/* --- messages ----------------------------------------------------- */
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++)
		one_message(afd, bfd, &a, &b, sizes[i], (uint32_t)i + 1, tx, rx, cap);
	one_message(bfd, afd, &b, &a, 200003, 77, tx, rx, cap);

	/* --- RDMA --------------------------------------------------------- */
	/* B's region: not page-aligned, a guard before and after it */
	region = mem + 4096 - ((uintptr_t)mem & 4095) + 100 + guard;
	memset(region - guard, 0x5a, rlen + 2 * guard);
	/*
	 * B registers it with RDS_CMSG_RDMA_MAP on a message to A: the key
	 * comes from that message's connection (FRWR on its QP; a plain
	 * RDS_GET_MR setsockopt has no connection, and RDS/IB refuses it
	 * without on-demand paging: net/rds/ib_frmr.c, rds_ib_reg_frmr).  The
	 * cookie is written to cookie_addr and reaches A as RDS_CMSG_RDMA_DEST.
	 */
	{
		union {
			char buf[CMSG_SPACE(sizeof(struct rds_get_mr_args))];
			struct cmsghdr align;
		} u;
		struct rds_get_mr_args ga = {
			.vec = { .addr = (uintptr_t)region, .bytes = rlen },
			.cookie_addr = (uintptr_t)&cookie,
			.flags = 0,
		};
		struct cmsghdr *c = &u.align;
		char cbuf[256];
		size_t clen = sizeof(cbuf);
		struct msghdr m = { .msg_control = cbuf };
		uint64_t got = 0;

		memset(&u, 0, sizeof(u));
		c->cmsg_level = SOL_RDS;
		c->cmsg_type = RDS_CMSG_RDMA_MAP;
		c->cmsg_len = CMSG_LEN(sizeof(ga));
		memcpy(CMSG_DATA(c), &ga, sizeof(ga));
		send_msg(bfd, &a, "map", 3, u.buf, sizeof(u.buf));
		CHECK(cookie != 0, "RDS_CMSG_RDMA_MAP: %zu bytes at a not page-aligned address, cookie %#llx",
		      rlen, (unsigned long long)cookie);
		n = recv_msg(afd, rx, cap, &from, cbuf, &clen, NULL);
		m.msg_controllen = clen;
		for (c = CMSG_FIRSTHDR(&m); n >= 0 && c; c = CMSG_NXTHDR(&m, c))
			if (c->cmsg_level == SOL_RDS && c->cmsg_type == RDS_CMSG_RDMA_DEST)
				memcpy(&got, CMSG_DATA(c), sizeof(got));
		CHECK(n == 3 && got == cookie,
		      "the message reached A (%zd bytes) with the cookie as RDS_CMSG_RDMA_DEST (%#llx)",
		      n, (unsigned long long)got);
	}

	/* A writes into B's region */
	fill(la, rlen, 1001);
	rdma_op(afd, &b, cookie, la, rlen, 1, 0xabc1);
	rdma_notice(afd, 0xabc1, "RDMA write");
	n = recv_msg(bfd, rx, cap, &from, NULL, NULL, NULL);
	CHECK(n == 1 && rx[0] == 'W', "the message of the RDMA write reached B (%zd bytes)", n);
	memset(exp, 0x5a, rlen + 2 * guard);
	memcpy(exp + guard, la, rlen);
	CHECK(!memcmp(region - guard, exp, rlen + 2 * guard),
	      "RDMA write: %zu bytes in B's region equal, %zu guard bytes either side untouched",
	      rlen, guard);

	/* B writes a new pattern; A reads it */
	fill(region, rlen, 2002);
	memset(la, 0, rlen);
	send_msg(bfd, &a, "go", 2, NULL, 0);
	n = recv_msg(afd, rx, cap, &from, NULL, NULL, NULL);
	CHECK(n == 2, "B's go-ahead reached A");
	rdma_op(afd, &b, cookie, la, rlen, 0, 0xabc2);
	rdma_notice(afd, 0xabc2, "RDMA read");
	n = recv_msg(bfd, rx, cap, &from, NULL, NULL, NULL);
	CHECK(n == 1 && rx[0] == 'R', "the message of the RDMA read reached B (%zd bytes)", n);
	CHECK(!memcmp(la, region, rlen), "RDMA read: %zu bytes read equal B's new pattern", rlen);

	{
		struct rds_free_mr_args fa = { .cookie = cookie, .flags = 0 };

		CHECK(setsockopt(bfd, SOL_RDS, RDS_FREE_MR, &fa, sizeof(fa)) == 0,
		      "RDS_FREE_MR");
	}
	close(afd);
	close(bfd);
	/* the pages RDS pinned for the MR (tests/vm/rds.sh: RDS never unpins them) */
	printf("rds_test: MR pages %lu\n",
	       (unsigned long)((((uintptr_t)region + rlen + 4095) >> 12) - ((uintptr_t)region >> 12)));
	printf("rds_test: %d check(s) failed\n", failed);
	return failed ? 1 : 0;
}
