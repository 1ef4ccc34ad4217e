// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Helpers shared by the guest stress programs; see vmprog.h.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/if_ether.h>
#include <linux/if_packet.h>
#include <net/if.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <rdma/ib_user_verbs.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "vmprog.h"

int vp_fails;

/* ---- results ------------------------------------------------------------ */

void vp_die(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "setup: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\n");
	exit(2);
}

static void vp_vfail(const char *fmt, va_list ap)
{
	vp_fails++;
	printf("FAIL ");
	vprintf(fmt, ap);
	printf("\n");
	fflush(stdout);
}

void vp_fail(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vp_vfail(fmt, ap);
	va_end(ap);
}

bool vp_check(bool cond, const char *fmt, ...)
{
	va_list ap;

	if (cond)
		return true;
	va_start(ap, fmt);
	vp_vfail(fmt, ap);
	va_end(ap);
	return false;
}

bool vp_ok(bool ok, const char *cond, const char *fmt, ...)
{
	va_list ap;

	printf(ok ? "ok: " : "FAIL: ");
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	if (ok) {
		printf("\n");
	} else {
		vp_fails++;
		printf(" [%s]\n", cond);
	}
	fflush(stdout);
	return ok;
}

double vp_time_scale(void)
{
	static double scale;
	const char *e;

	if (scale == 0) {
		e = getenv("VM_TIME_SCALE");
		scale = e ? strtod(e, NULL) : 1;
		if (!(scale >= 1))
			scale = 1;
	}
	return scale;
}

/* ---- cases ---------------------------------------------------------------- */

static pthread_mutex_t vc_lock = PTHREAD_MUTEX_INITIALIZER;
static char vc_msg[4096];
static char vc_note_buf[1024];
static int vc_nfails;

static void vc_append(char *buf, size_t size, const char *sep, const char *fmt,
		      va_list ap)
{
	size_t n = strlen(buf);

	if (n + 8 >= size)
		return;
	if (n)
		n += (size_t)snprintf(buf + n, size - n, "%s", sep);
	vsnprintf(buf + n, size - n, fmt, ap);
}

void vc_fail(const char *fmt, ...)
{
	va_list ap;

	pthread_mutex_lock(&vc_lock);
	vc_nfails++;
	va_start(ap, fmt);
	vc_append(vc_msg, sizeof(vc_msg), "; ", fmt, ap);
	va_end(ap);
	pthread_mutex_unlock(&vc_lock);
}

void vc_note(const char *fmt, ...)
{
	va_list ap;

	pthread_mutex_lock(&vc_lock);
	va_start(ap, fmt);
	vc_append(vc_note_buf, sizeof(vc_note_buf), ", ", fmt, ap);
	va_end(ap);
	pthread_mutex_unlock(&vc_lock);
}

int vc_fails(void)
{
	int n;

	pthread_mutex_lock(&vc_lock);
	n = vc_nfails;
	pthread_mutex_unlock(&vc_lock);
	return n;
}

const char *vc_message(void)
{
	return vc_msg;
}

void vc_start(void)
{
	pthread_mutex_lock(&vc_lock);
	vc_msg[0] = 0;
	vc_note_buf[0] = 0;
	vc_nfails = 0;
	pthread_mutex_unlock(&vc_lock);
}

int vc_end(const char *name, const char *dev_a, const char *dev_b,
	   const char *what, double t0)
{
	int failed = vc_fails();

	if (failed)
		printf("FAIL %s [%s-%s]: %s%s%s%s\n", name, dev_a, dev_b, vc_msg,
		       vc_note_buf[0] ? " (note: " : "", vc_note_buf,
		       vc_note_buf[0] ? ")" : "");
	else
		printf("PASS %s [%s-%s]: %s%s%s (%.2f s)\n", name, dev_a, dev_b,
		       what, vc_note_buf[0] ? "; " : "", vc_note_buf, vp_now() - t0);
	fflush(stdout);
	return failed ? 1 : 0;
}

double vp_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

void vp_sleep_us(long us)
{
	struct timespec ts = { us / 1000000, (us % 1000000) * 1000 };

	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

uint64_t vp_rand(uint64_t *s)
{
	uint64_t x = *s ? *s : 0x9e3779b97f4a7c15ull;

	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	*s = x;
	return x * 0x2545f4914f6cdd1dull;
}

uint32_t vp_rand_below(uint64_t *s, uint32_t n)
{
	return n ? (uint32_t)((vp_rand(s) >> 32) % n) : 0;
}

/* ---- pins ---------------------------------------------------------------- */

long vp_pins_held(void)
{
	long acq = -1, rel = -1, v;
	char name[64];
	FILE *f;
	int fd;

	/* stat_refresh folds the per-CPU deltas, so the counts are exact. */
	fd = open("/proc/sys/vm/stat_refresh", O_WRONLY);
	if (fd >= 0) {
		if (write(fd, "1", 1) < 0)
			vp_die("stat_refresh: %s", strerror(errno));
		close(fd);
	}
	f = fopen("/proc/vmstat", "r");
	if (!f)
		vp_die("/proc/vmstat: %s", strerror(errno));
	while (fscanf(f, "%63s %ld", name, &v) == 2) {
		if (!strcmp(name, "nr_foll_pin_acquired"))
			acq = v;
		else if (!strcmp(name, "nr_foll_pin_released"))
			rel = v;
	}
	fclose(f);
	if (acq < 0 || rel < 0)
		vp_die("no nr_foll_pin_* in /proc/vmstat");
	return acq - rel;
}

/* ---- devices ---------------------------------------------------------------- */

void vp_die_errno(const char *what)
{
	vp_die("%s: %s", what, strerror(errno));
}

struct ibv_context *vp_try_open(const char *name)
{
	struct ibv_device **list = ibv_get_device_list(NULL);
	struct ibv_context *ctx = NULL;
	int i;

	if (!list)
		return NULL;
	for (i = 0; list[i] && !ctx; i++)
		if (!strcmp(ibv_get_device_name(list[i]), name))
			ctx = ibv_open_device(list[i]);
	ibv_free_device_list(list);
	if (!ctx && !errno)
		errno = ENODEV;
	return ctx;
}

struct ibv_context *vp_open(const char *name)
{
	struct ibv_context *ctx = vp_try_open(name);

	if (!ctx)
		vp_die("cannot open %s: %s", name, strerror(errno));
	return ctx;
}

int vp_dev_open(struct vp_dev *d, const char *name)
{
	int err;

	memset(d, 0, sizeof(*d));
	d->name = name;
	errno = 0;
	d->ctx = vp_try_open(name);
	if (!d->ctx)
		return errno;
	d->pd = ibv_alloc_pd(d->ctx);
	if (!d->pd) {
		err = errno;
		ibv_close_device(d->ctx);
		d->ctx = NULL;
		return err;
	}
	err = ibv_query_gid(d->ctx, 1, 0, &d->gid);
	if (err)
		return err;
	/* fe80::XXXX:XXff:feXX:XXXX, the U/L bit flipped back. */
	d->mac[0] = d->gid.raw[8] ^ 2;
	d->mac[1] = d->gid.raw[9];
	d->mac[2] = d->gid.raw[10];
	d->mac[3] = d->gid.raw[13];
	d->mac[4] = d->gid.raw[14];
	d->mac[5] = d->gid.raw[15];
	return 0;
}

int vp_dev_close(struct vp_dev *d)
{
	int a = 0, b = 0;

	if (d->pd)
		a = ibv_dealloc_pd(d->pd);
	if (d->ctx)
		b = ibv_close_device(d->ctx);
	d->pd = NULL;
	d->ctx = NULL;
	return a ? a : b;
}

/* ---- QPs ---------------------------------------------------------------------- */

const struct vp_conn_opts vp_default_opts = {
	.timeout = 14,		/* 4.096 us * 2^14 = 67 ms */
	.retry_cnt = 7,
	.rnr_retry = 7,
	.min_rnr_timer = 12,
};

struct vp_conn_opts vp_scaled_opts(const struct vp_conn_opts *o)
{
	struct vp_conn_opts s = *o;
	double k;

	for (k = vp_time_scale(); k > 1 && s.timeout < 31; k /= 2)
		s.timeout++;
	return s;
}

int vp_ep_create(struct vp_ep *e, struct vp_dev *d, struct ibv_cq *cq,
		 uint32_t send_wr, uint32_t recv_wr)
{
	struct ibv_qp_init_attr ia = {
		.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = send_wr, .max_recv_wr = recv_wr,
			 .max_send_sge = 1, .max_recv_sge = 1,
			 .max_inline_data = 64 },
	};

	e->dev = d;
	e->cq = cq;
	e->qp = ibv_create_qp(d->pd, &ia);
	return e->qp ? 0 : errno;
}

int vp_ep_connect(struct vp_ep *e, const struct vp_ep *peer,
		  const struct vp_conn_opts *o)
{
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_INIT, .port_num = 1,
		.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
				   IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC,
	};
	int err;

	e->peer_psn = peer->psn;
	e->peer_qpn = peer->qp->qp_num;
	err = ibv_modify_qp(e->qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX |
			    IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
	if (err)
		return err;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_1024;
	a.dest_qp_num = peer->qp->qp_num;
	a.rq_psn = peer->psn;
	a.max_dest_rd_atomic = 16;
	a.min_rnr_timer = o->min_rnr_timer;
	a.ah_attr.is_global = 1;
	a.ah_attr.grh.dgid = peer->dev->gid;
	a.ah_attr.grh.hop_limit = 1;
	a.ah_attr.port_num = 1;
	err = ibv_modify_qp(e->qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
			    IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
			    IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
	if (err)
		return err;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = e->psn;
	a.timeout = o->timeout;
	a.retry_cnt = o->retry_cnt;
	a.rnr_retry = o->rnr_retry;
	a.max_rd_atomic = 16;
	return ibv_modify_qp(e->qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN |
			     IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
			     IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC);
}

int vp_qp_state(struct ibv_qp *qp)
{
	struct ibv_qp_init_attr ia;
	struct ibv_qp_attr a;
	int err = ibv_query_qp(qp, &a, IBV_QP_STATE, &ia);

	return err ? -err : (int)a.qp_state;
}

int vp_ep_state(const struct vp_ep *e)
{
	return vp_qp_state(e->qp);
}

/* ---- memory -------------------------------------------------------------------- */

void vp_buf_alloc(struct vp_buf *b, size_t len)
{
	memset(b, 0, sizeof(*b));
	b->len = (len + VP_PAGE - 1) & ~(size_t)(VP_PAGE - 1);
	b->p = mmap(NULL, b->len, PROT_READ | PROT_WRITE,
		    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (b->p == MAP_FAILED)
		vp_die("mmap %zu: %s", b->len, strerror(errno));
	memset(b->p, 0, b->len);	/* fault in: pins must not fault later */
}

int vp_buf_reg(struct vp_buf *b, struct vp_dev *d, int access)
{
	b->mr = ibv_reg_mr(d->pd, b->p, b->len, access);
	return b->mr ? 0 : errno;
}

int vp_buf_free(struct vp_buf *b)
{
	int err = 0;

	if (b->mr)
		err = ibv_dereg_mr(b->mr);
	b->mr = NULL;
	if (b->p)
		munmap(b->p, b->len);
	b->p = NULL;
	return err;
}

uint8_t vp_pat(uint32_t tag, size_t i)
{
	uint32_t x = tag * 0x9e3779b1u + (uint32_t)i * 0x85ebca6bu + (uint32_t)(i >> 12);
	uint8_t v = (uint8_t)(x ^ (x >> 13) ^ (x >> 24));

	/* 0x00 (fresh memory), 0x5e and 0x77 (fills after dereg) never occur */
	if (v == 0x00 || v == 0x5e || v == 0x77)
		v ^= 0x81;
	return v;
}

void vp_fill_pat(uint8_t *p, size_t len, uint32_t tag, size_t start)
{
	size_t i;

	for (i = 0; i < len; i++)
		p[i] = vp_pat(tag, start + i);
}

long vp_diff_pat(const uint8_t *p, size_t len, uint32_t tag, size_t start)
{
	size_t i;

	for (i = 0; i < len; i++)
		if (p[i] != vp_pat(tag, start + i))
			return (long)i;
	return -1;
}

/* ---- guarded buffers ------------------------------------------------------------ */

static size_t gbuf_maplen(size_t off, size_t len)
{
	return (off + len + 2 * VP_PAGE + VP_PAGE - 1) & ~(size_t)(VP_PAGE - 1);
}

struct vp_gbuf vp_gbuf_new(struct ibv_pd *pd, size_t len, size_t off, int access)
{
	struct vp_gbuf b = { 0 };
	size_t maplen = gbuf_maplen(off, len);
	uint8_t *m = mmap(NULL, maplen, PROT_READ | PROT_WRITE,
			  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (m == MAP_FAILED)
		vp_die_errno("mmap");
	memset(m, VP_GUARD, maplen);
	b.p = m + VP_PAGE + off;
	b.len = len;
	if (access >= 0) {
		b.mr = ibv_reg_mr(pd, b.p, len, access);
		if (!b.mr)
			vp_die_errno("ibv_reg_mr");
	}
	return b;
}

void vp_gbuf_free(struct vp_gbuf *b)
{
	uint8_t *m = (uint8_t *)((uintptr_t)(b->p - VP_PAGE) & ~(uintptr_t)(VP_PAGE - 1));

	if (b->mr && ibv_dereg_mr(b->mr))
		vc_fail("ibv_dereg_mr: %s", strerror(errno));
	munmap(m, gbuf_maplen((size_t)(b->p - VP_PAGE - m), b->len));
	b->p = NULL;
	b->mr = NULL;
}

long vp_diff_byte(const uint8_t *p, size_t len, uint8_t v)
{
	size_t i;

	for (i = 0; i < len; i++)
		if (p[i] != v)
			return (long)i;
	return -1;
}

void vp_gbuf_check_guards(const struct vp_gbuf *b, size_t n, const char *what)
{
	long i = vp_diff_byte(b->p - n, n, VP_GUARD);
	long j = vp_diff_byte(b->p + b->len, n, VP_GUARD);

	if (i >= 0)
		vc_fail("%s: guard byte at start-%ld changed to %#x", what,
			(long)n - i, b->p[i - (long)n]);
	if (j >= 0)
		vc_fail("%s: guard byte at end+%ld changed to %#x", what, j,
			b->p[b->len + j]);
}

struct ibv_sge vp_gbuf_sge(const struct vp_gbuf *b, size_t off, uint32_t len)
{
	struct ibv_sge sg = {
		.addr = (uintptr_t)(b->p + off), .length = len,
		.lkey = b->mr ? b->mr->lkey : 0,
	};
	return sg;
}

uint8_t vp_tag8(size_t i, uint8_t tag)
{
	return (uint8_t)(tag + i * 7 + (i >> 8));
}

void vp_fill_tag8(uint8_t *p, size_t len, uint8_t tag)
{
	size_t i;

	for (i = 0; i < len; i++)
		p[i] = vp_tag8(i, tag);
}

const char *vp_qp_state_str(enum ibv_qp_state st)
{
	static const char *n[] = { "RESET", "INIT", "RTR", "RTS", "SQD", "SQE",
				   "ERR", "UNKNOWN" };

	return st <= IBV_QPS_UNKNOWN ? n[st] : "?";
}

void vc_expect_qp_state(struct ibv_qp *qp, const char *who, enum ibv_qp_state want,
			const char *what)
{
	struct ibv_qp_attr a;
	struct ibv_qp_init_attr ia;

	if (ibv_query_qp(qp, &a, IBV_QP_STATE, &ia)) {
		vc_fail("%s: ibv_query_qp(%s): %s", what, who, strerror(errno));
		return;
	}
	if (a.qp_state != want)
		vc_fail("%s: %s QP state %s, expected %s", what, who,
			vp_qp_state_str(a.qp_state), vp_qp_state_str(want));
}

/* ---- posting -------------------------------------------------------------------- */

int vp_post_rdma(struct vp_ep *e, enum ibv_wr_opcode op, void *laddr,
		 uint32_t len, uint32_t lkey, uint64_t raddr, uint32_t rkey,
		 uint64_t wr_id)
{
	struct ibv_sge sg = { .addr = (uintptr_t)laddr, .length = len, .lkey = lkey };
	struct ibv_send_wr wr = {
		.wr_id = wr_id, .sg_list = &sg, .num_sge = 1, .opcode = op,
		.send_flags = IBV_SEND_SIGNALED,
	}, *bad;

	wr.wr.rdma.remote_addr = raddr;
	wr.wr.rdma.rkey = rkey;
	return ibv_post_send(e->qp, &wr, &bad);
}

int vp_post_send(struct vp_ep *e, void *laddr, uint32_t len, uint32_t lkey,
		 uint64_t wr_id)
{
	struct ibv_sge sg = { .addr = (uintptr_t)laddr, .length = len, .lkey = lkey };
	struct ibv_send_wr wr = {
		.wr_id = wr_id, .sg_list = &sg, .num_sge = 1,
		.opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED,
	}, *bad;

	return ibv_post_send(e->qp, &wr, &bad);
}

int vp_post_recv(struct vp_ep *e, void *laddr, uint32_t len, uint32_t lkey,
		 uint64_t wr_id)
{
	struct ibv_sge sg = { .addr = (uintptr_t)laddr, .length = len, .lkey = lkey };
	struct ibv_recv_wr wr = { .wr_id = wr_id, .sg_list = &sg, .num_sge = 1 }, *bad;

	return ibv_post_recv(e->qp, &wr, &bad);
}

const char *vp_wc_status_str(int status)
{
	return ibv_wc_status_str((enum ibv_wc_status)status);
}

/* ---- raw frame flood ------------------------------------------------------------ */

#define FL_ETHERTYPE	0x88B5
#define FL_HDR		24
#define FL_WRITE_HDR	36
#define FL_PAYLEN	64
#define FL_PSN_MASK	0x00ffffffu
#define FL_BEHIND	0x400000u	/* 2^22 */
#define FL_BATCH	32
#define FL_FRAME_MAX	(14 + FL_WRITE_HDR + FL_PAYLEN)

int vp_netns_enter(const char *netns)
{
	int self = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
	int ns;
	char path[256];

	snprintf(path, sizeof(path), "/run/netns/%s", netns);
	ns = open(path, O_RDONLY | O_CLOEXEC);
	if (self < 0 || ns < 0 || setns(ns, CLONE_NEWNET))
		vp_die("enter netns %s: %s", netns, strerror(errno));
	close(ns);
	return self;
}

void vp_netns_leave(int self)
{
	if (setns(self, CLONE_NEWNET))
		vp_die("back to our netns: %s", strerror(errno));
	close(self);
}

/* Open an AF_PACKET socket bound to @ifname inside network namespace @netns. */
static int flood_open(const char *netns, const char *ifname)
{
	struct sockaddr_ll sll = { .sll_family = AF_PACKET };
	int self = -1, s;

	if (netns && *netns)
		self = vp_netns_enter(netns);
	/* Protocol 0: we only send, never receive. */
	s = socket(AF_PACKET, SOCK_RAW, 0);
	if (s < 0)
		vp_die("AF_PACKET socket: %s", strerror(errno));
	sll.sll_ifindex = (int)if_nametoindex(ifname);
	if (!sll.sll_ifindex || bind(s, (struct sockaddr *)&sll, sizeof(sll)))
		vp_die("bind to %s (netns '%s'): %s", ifname, netns ? netns : "",
		       strerror(errno));
	if (self >= 0)
		vp_netns_leave(self);
	return s;
}

int vp_flood_add_socket(struct vp_flood *f, const char *netns, const char *ifname)
{
	if (f->nsocks == 2)
		return -1;
	f->socks[f->nsocks] = flood_open(netns, ifname);
	return f->nsocks++;
}

int vp_flood_default_sockets(struct vp_flood *f, int *s0, int *s1)
{
	*s0 = vp_flood_add_socket(f, "ns1", "veth1");
	*s1 = vp_flood_add_socket(f, "", "veth0");
	return 0;
}

static void put32(uint8_t *p, uint32_t v)
{
	v = htonl(v);
	memcpy(p, &v, 4);
}

/* One frame for target @t of kind @kind (0 dup write, 1 ack, 2 wrong src). */
static size_t flood_build(uint8_t *fr, const struct vp_flood_target *t,
			  int kind, bool ackreq)
{
	uint8_t *h = fr + 14;
	uint16_t paylen = kind == 1 ? 0 : FL_PAYLEN;
	size_t hl = kind == 1 ? FL_HDR : FL_WRITE_HDR;

	memcpy(fr, t->dst_mac, 6);
	memcpy(fr + 6, t->src_mac, 6);
	fr[12] = FL_ETHERTYPE >> 8;
	fr[13] = FL_ETHERTYPE & 0xff;
	memset(h, 0, hl);
	h[0] = 2;					/* version */
	h[1] = kind == 1 ? 0x10 : 0x01;			/* ACK / WRITE */
	h[2] = kind == 1 ? 0 : 0x06 | (ackreq ? 1 : 0);	/* FIRST|LAST (+ACKREQ) */
	put32(h + 4, t->qpn);
	put32(h + 8, kind == 2 ? (t->peer_qpn ^ 0x5a5a5) & FL_PSN_MASK : t->peer_qpn);
	put32(h + 12, (t->rcv_psn - FL_BEHIND) & FL_PSN_MASK);
	put32(h + 16, (t->snd_psn - FL_BEHIND) & FL_PSN_MASK);
	h[20] = (uint8_t)(paylen >> 8);
	h[21] = (uint8_t)paylen;
	if (kind != 1) {
		/* va and rkey: never used, the frame is dropped before */
		put32(h + 28, 0x1000);
		put32(h + 32, 0x100);
		memset(h + hl, 0xa5, paylen);
	}
	return 14 + hl + paylen;
}

/* Build and send one batch per socket from a snapshot of the targets. */
static unsigned int flood_batch(struct vp_flood *f)
{
	static uint8_t frames[FL_BATCH][FL_FRAME_MAX];
	struct mmsghdr msg[FL_BATCH];
	struct iovec iov[FL_BATCH];
	unsigned int total = 0;
	int s;

	for (s = 0; s < f->nsocks; s++) {
		int n = 0, i, sent;

		pthread_mutex_lock(&f->lock);
		for (i = 0; i < FL_BATCH && f->nt; i++) {
			const struct vp_flood_target *t =
				&f->t[vp_rand_below(&f->seed, (uint32_t)f->nt)];
			int kind = (int)vp_rand_below(&f->seed, 3);

			if (t->sock != s)
				continue;
			iov[n].iov_base = frames[n];
			iov[n].iov_len = flood_build(frames[n], t, kind,
						     !vp_rand_below(&f->seed, 4));
			memset(&msg[n], 0, sizeof(msg[n]));
			msg[n].msg_hdr.msg_iov = &iov[n];
			msg[n].msg_hdr.msg_iovlen = 1;
			f->sent_dup += kind == 0;
			f->sent_ack += kind == 1;
			f->sent_wrong += kind == 2;
			n++;
		}
		pthread_mutex_unlock(&f->lock);
		if (!n)
			continue;
		sent = sendmmsg(f->socks[s], msg, (unsigned int)n, 0);
		if (sent > 0)
			total += (unsigned int)sent;
	}
	return total;
}

static void *flood_main(void *arg)
{
	struct vp_flood *f = arg;
	double t0 = vp_now();

	while (!f->stop) {
		unsigned int n = flood_batch(f);

		__atomic_add_fetch(&f->sent, n, __ATOMIC_RELAXED);
		if (!n) {
			vp_sleep_us(1000);
			continue;
		}
		/* Pace to the rate: sleep while we are ahead of it. */
		if (f->rate) {
			double ahead = (double)f->sent / f->rate - (vp_now() - t0);

			if (ahead > 0)
				vp_sleep_us((long)(ahead * 1e6));
		}
	}
	return NULL;
}

void vp_flood_start(struct vp_flood *f, unsigned int rate, uint64_t seed)
{
	pthread_mutex_init(&f->lock, NULL);
	f->rate = rate;
	f->seed = seed ? seed : 1;
	f->stop = false;
	if (pthread_create(&f->thread, NULL, flood_main, f))
		vp_die("pthread_create");
	f->running = true;
}

void vp_flood_aim(struct vp_flood *f, int sock, const struct vp_ep *e,
		  const struct vp_ep *peer)
{
	struct vp_flood_target t = {
		.sock = sock, .qpn = e->qp->qp_num, .peer_qpn = peer->qp->qp_num,
		.rcv_psn = e->peer_psn, .snd_psn = e->psn,
	};

	if (!f->running || sock < 0)
		return;
	memcpy(t.dst_mac, e->dev->mac, 6);
	memcpy(t.src_mac, peer->dev->mac, 6);
	pthread_mutex_lock(&f->lock);
	if (f->nt == f->cap) {
		f->cap = f->cap ? 2 * f->cap : 64;
		f->t = realloc(f->t, (size_t)f->cap * sizeof(*f->t));
		if (!f->t)
			vp_die("realloc");
	}
	f->t[f->nt++] = t;
	pthread_mutex_unlock(&f->lock);
}

void vp_flood_unaim(struct vp_flood *f, uint32_t qpn)
{
	int i;

	if (!f->running)
		return;
	pthread_mutex_lock(&f->lock);
	for (i = 0; i < f->nt;) {
		if (!qpn || f->t[i].qpn == qpn)
			f->t[i] = f->t[--f->nt];
		else
			i++;
	}
	pthread_mutex_unlock(&f->lock);
}

void vp_flood_stop(struct vp_flood *f)
{
	int i;

	if (!f->running)
		return;
	f->stop = true;
	pthread_join(f->thread, NULL);
	f->running = false;
	for (i = 0; i < f->nsocks; i++)
		close(f->socks[i]);
	f->nsocks = 0;
	free(f->t);
	f->t = NULL;
	f->nt = f->cap = 0;
}

/* ---- doorbells ---------------------------------------------------------------- */

/*
 * A doorbell as the provider rings it (provider/qp.c mbcf_doorbell): a
 * POST_SEND or POST_RECV with no work request, written to the command fd
 * for QP handle `handle`.  0 or an errno.
 */
int vp_doorbell(struct ibv_context *ctx, uint32_t handle, uint32_t command)
{
	struct ib_uverbs_post_send_resp resp;
	struct {
		struct ib_uverbs_cmd_hdr hdr;
		struct ib_uverbs_post_send cmd;
	} req;
	ssize_t n;

	memset(&req, 0, sizeof(req));
	req.hdr.command = command;
	req.hdr.in_words = sizeof(req) / 4;
	req.hdr.out_words = sizeof(resp) / 4;
	req.cmd.response = (uintptr_t)&resp;
	req.cmd.qp_handle = handle;
	req.cmd.wqe_size = command == IB_USER_VERBS_CMD_POST_SEND ?
			   sizeof(struct ib_uverbs_send_wr) :
			   sizeof(struct ib_uverbs_recv_wr);
	n = write(ctx->cmd_fd, &req, sizeof(req));
	if (n == (ssize_t)sizeof(req))
		return 0;
	return n < 0 ? errno : EIO;
}
