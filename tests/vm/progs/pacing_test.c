// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * mbcf_pacing_test: per-QP pacing (ibv_modify_qp_rate_limit) end to end.
 *
 *  - packet_pacing_caps of ibv_query_device_ex: min, max, RC and UC;
 *  - bad input: a rate above the maximum or below the minimum is EINVAL,
 *    0 removes the limit, a UD QP is EOPNOTSUPP, a burst size is EINVAL,
 *    IBV_QP_RATE_LIMIT is accepted with the RTS transition too;
 *  - 16 RC QPs paced at different rates (-r BASE: QP i at (i + 1) * BASE
 *    kbit/s) beside one unpaced QP streaming 64 KiB writes, A -> B: each
 *    paced QP's rate, measured at the receiver from the completion times of
 *    its one-frame WRITE_WITH_IMM messages over -t seconds, is within
 *    -p percent of its target (the rate counts whole Ethernet frames);
 *  - 0 removes the limit: the QP then runs far above its old rate;
 *  - bursts (-c IFNAME, the receiver's netdev, opened in the network
 *    namespace -n PATH if given): the paced QPs' sequenced frames are
 *    captured at the receiver with their receive timestamps (an AF_PACKET
 *    socket, SO_TIMESTAMPNS) over the same window, and every run of frames
 *    of one QP that arrive closer together than half the QP's frame time at
 *    its rate is a burst ("back to back").  Burst lengths are reported
 *    ("burst: ..."), never asserted: they measure how late the guest's
 *    timers run.  Asserted: frames of every paced QP were captured, none
 *    longer than the MTU.
 *  -M measures only: the rate checks print "note: ..." and count nothing.
 *
 *   mbcf_pacing_test -a DEV -b DEV [-r BASE_KBPS] [-m MSG_BYTES] [-t SECONDS]
 *                    [-p PERCENT] [-c IFNAME [-n NETNS]] [-M]
 * Prints "ok: ..." per check, "FAIL: ..." per failure, "rate: ..." per QP;
 * the exit status is the number of failures (capped at 100), 2 for setup
 * errors.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <infiniband/verbs.h>
#include <fcntl.h>
#include <linux/filter.h>
#include <linux/if_ether.h>
#include <linux/if_packet.h>
#include <net/if.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

/* vmprog.c (its header's CHECK is not ours): VM_TIME_SCALE, at least 1 */
double vp_time_scale(void);

#define NPACED		16
#define NQP		(NPACED + 1)	/* the last one is unpaced */
/* MBCF headers (docs/protocol.md): WRITE 36 bytes, WRITE_IMM 44, after a
 * 14-byte Ethernet header; a WRITE_IMM message's frames but the last are
 * WRITEs carrying as much as a WRITE_IMM frame (MTU - 44). */
#define ETH		14
#define HDR_WRITE	36
#define HDR_WRITE_IMM	44
static uint32_t msg_len = 1024, mtu = 1500;
#define DEPTH		64		/* sends in flight per paced QP */
#define BULK		65536		/* the unpaced QP's writes */
#define BULK_DEPTH	4

static int failures;
static int measure_only;	/* -M: the rate checks count nothing */

#define CHECK(cond, ...)						\
	do {								\
		if (cond) {						\
			printf("ok: " __VA_ARGS__);			\
		} else {						\
			failures++;					\
			printf("FAIL: " __VA_ARGS__);			\
		}							\
		printf(" [%s]\n", #cond);				\
	} while (0)

/* a rate check, or with -M a note of what it would have said */
#define RATE_CHECK(cond, ...)						\
	do {								\
		if (measure_only) {					\
			printf("note: %s: ", (cond) ? "ok" : "off");	\
			printf(__VA_ARGS__);				\
			printf("\n");					\
		} else {						\
			CHECK(cond, __VA_ARGS__);			\
		}							\
	} while (0)

static void die(const char *what)
{
	fprintf(stderr, "setup: %s: %s\n", what, strerror(errno));
	exit(2);
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

struct side {
	const char *name;
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_qp *qp[NQP];
	union ibv_gid gid;
	struct ibv_mr *mr;
	uint8_t *buf;
};

static struct side A, B;
static size_t buf_len = (size_t)NQP * BULK;

static void open_side(struct side *s, const char *name)
{
	struct ibv_device **list = ibv_get_device_list(NULL);
	int i;

	if (!list)
		die("ibv_get_device_list");
	s->name = name;
	for (i = 0; list[i]; i++)
		if (!strcmp(ibv_get_device_name(list[i]), name))
			s->ctx = ibv_open_device(list[i]);
	ibv_free_device_list(list);
	if (!s->ctx) {
		fprintf(stderr, "setup: cannot open %s\n", name);
		exit(2);
	}
	s->pd = ibv_alloc_pd(s->ctx);
	s->cq = ibv_create_cq(s->ctx, 4096, NULL, NULL, 0);
	s->buf = calloc(1, buf_len);
	if (!s->pd || !s->cq || !s->buf || ibv_query_gid(s->ctx, 1, 0, &s->gid))
		die("pd / cq / gid");
	s->mr = ibv_reg_mr(s->pd, s->buf, buf_len, IBV_ACCESS_LOCAL_WRITE |
			   IBV_ACCESS_REMOTE_WRITE);
	if (!s->mr)
		die("ibv_reg_mr");
}

static struct ibv_qp *make_qp(struct side *s, enum ibv_qp_type type)
{
	struct ibv_qp_init_attr ia = {
		.send_cq = s->cq, .recv_cq = s->cq, .qp_type = type,
		.cap = { .max_send_wr = 128, .max_recv_wr = 256,
			 .max_send_sge = 1, .max_recv_sge = 1 },
		.sq_sig_all = 1,
	};
	struct ibv_qp *qp = ibv_create_qp(s->pd, &ia);

	if (!qp)
		die("ibv_create_qp");
	return qp;
}

static void to_init(struct ibv_qp *qp)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .port_num = 1,
				 .qp_access_flags = IBV_ACCESS_REMOTE_WRITE |
						    IBV_ACCESS_LOCAL_WRITE };
	int m = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT;

	if (qp->qp_type == IBV_QPT_UD) {
		a.qkey = 0x11111111;
		m |= IBV_QP_QKEY;
	} else {
		m |= IBV_QP_ACCESS_FLAGS;
	}
	if (ibv_modify_qp(qp, &a, m))
		die("INIT");
}

/* RTR and RTS against peer; rts_rate != 0 goes in with the RTS transition */
static int connect_qp(struct ibv_qp *qp, struct ibv_qp *peer,
		      const union ibv_gid *dgid, uint32_t rts_rate)
{
	struct ibv_qp_attr a = {};

	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_1024;
	a.dest_qp_num = peer->qp_num;
	a.rq_psn = peer->qp_num;
	a.max_dest_rd_atomic = 1;
	a.min_rnr_timer = 12;
	a.ah_attr.is_global = 1;
	a.ah_attr.grh.dgid = *dgid;
	a.ah_attr.grh.hop_limit = 1;
	a.ah_attr.port_num = 1;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
			  IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
			  IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
		die("RTR");
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = qp->qp_num;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.max_rd_atomic = 1;
	a.rate_limit = rts_rate;
	return ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN |
			     IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
			     IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC |
			     (rts_rate ? IBV_QP_RATE_LIMIT : 0));
}

static int set_rate(struct ibv_qp *qp, uint32_t kbps)
{
	struct ibv_qp_rate_limit_attr r = { .rate_limit = kbps };

	return ibv_modify_qp_rate_limit(qp, &r);
}

static struct ibv_packet_pacing_caps caps;

static void check_caps(struct side *s)
{
	struct ibv_device_attr_ex dx = {};
	struct ibv_port_attr pa;

	CHECK(ibv_query_device_ex(s->ctx, NULL, &dx) == 0, "%s: query_device_ex",
	      s->name);
	caps = dx.packet_pacing_caps;
	printf("caps: %s qp_rate_limit_min %u max %u supported_qpts 0x%x\n",
	       s->name, caps.qp_rate_limit_min, caps.qp_rate_limit_max,
	       caps.supported_qpts);
	CHECK(caps.qp_rate_limit_min == 8, "%s: qp_rate_limit_min 8 kbit/s",
	      s->name);
	CHECK(caps.qp_rate_limit_max >= 1000000 &&
	      caps.qp_rate_limit_max <= 100000000,
	      "%s: qp_rate_limit_max is a link's speed (%u kbit/s)", s->name,
	      caps.qp_rate_limit_max);
	CHECK(caps.supported_qpts == (1u << IBV_QPT_RC | 1u << IBV_QPT_UC),
	      "%s: supported_qpts RC and UC", s->name);
	CHECK(ibv_query_port(s->ctx, 1, &pa) == 0, "%s: query_port", s->name);
}

static void check_bad_input(void)
{
	struct ibv_qp *qp = make_qp(&A, IBV_QPT_RC), *peer = make_qp(&B, IBV_QPT_RC);
	struct ibv_qp *uc = make_qp(&A, IBV_QPT_UC), *ud = make_qp(&A, IBV_QPT_UD);
	struct ibv_qp_rate_limit_attr r = {};
	uint32_t max = caps.qp_rate_limit_max, min = caps.qp_rate_limit_min;

	CHECK(set_rate(qp, 1000) == EINVAL, "RC in RESET: EINVAL");
	to_init(qp);
	to_init(peer);
	CHECK(set_rate(qp, 1000) == 0, "RC in INIT: a rate is accepted");
	CHECK(connect_qp(qp, peer, &B.gid, 0) == 0, "RC: to RTS");
	CHECK(connect_qp(peer, qp, &A.gid, 0) == 0, "peer: to RTS");
	CHECK(set_rate(qp, max + 1) == EINVAL, "above qp_rate_limit_max: EINVAL");
	CHECK(set_rate(qp, UINT32_MAX) == EINVAL, "2^32-1 kbit/s: EINVAL");
	CHECK(set_rate(qp, min - 1) == EINVAL, "below qp_rate_limit_min: EINVAL");
	CHECK(set_rate(qp, 1) == EINVAL, "1 kbit/s: EINVAL");
	CHECK(set_rate(qp, max) == 0, "qp_rate_limit_max itself");
	CHECK(set_rate(qp, min) == 0, "qp_rate_limit_min itself");
	CHECK(set_rate(qp, 0) == 0, "0 removes the limit");
	CHECK(set_rate(qp, 0) == 0, "0 again");
	r.rate_limit = 1000;
	r.max_burst_sz = 3000;
	CHECK(ibv_modify_qp_rate_limit(qp, &r) == EINVAL, "a burst size: EINVAL");
	r.max_burst_sz = 0;
	r.typical_pkt_sz = 1500;
	CHECK(ibv_modify_qp_rate_limit(qp, &r) == EINVAL,
	      "a typical packet size: EINVAL");
	r.typical_pkt_sz = 0;
	r.comp_mask = 1;
	CHECK(ibv_modify_qp_rate_limit(qp, &r) == EINVAL, "a comp_mask: EINVAL");
	to_init(uc);
	CHECK(set_rate(uc, 5000) == 0, "UC: a rate is accepted");
	CHECK(set_rate(uc, max + 1) == EINVAL, "UC above the maximum: EINVAL");
	to_init(ud);
	CHECK(set_rate(ud, 5000) == EOPNOTSUPP, "UD: EOPNOTSUPP (not supported)");
	CHECK(set_rate(ud, 0) == EOPNOTSUPP, "UD, 0: EOPNOTSUPP");
	ibv_destroy_qp(qp);
	ibv_destroy_qp(peer);
	ibv_destroy_qp(uc);
	ibv_destroy_qp(ud);
}

/* ---- the rates ---------------------------------------------------------------- */

struct tally {
	long n;			/* completions inside the window */
	double first, last;	/* their times */
	long total;
};

static struct tally rx[NQP];
static int inflight[NQP];
static double win0, win1;
static volatile int cap_on;	/* the capture thread keeps what it sees */

static void post_send(int i)
{
	size_t len = i < NPACED ? msg_len : BULK;
	struct ibv_sge sge = { (uintptr_t)A.buf + (size_t)i * BULK, len, A.mr->lkey };
	struct ibv_send_wr wr = {
		.wr_id = i, .sg_list = &sge, .num_sge = 1,
		.opcode = i < NPACED ? IBV_WR_RDMA_WRITE_WITH_IMM :
				       IBV_WR_RDMA_WRITE,
		.imm_data = htonl(i),
		.wr.rdma = { (uintptr_t)B.buf + (size_t)i * BULK, B.mr->rkey },
	}, *bad;

	if (ibv_post_send(A.qp[i], &wr, &bad))
		die("ibv_post_send");
	inflight[i]++;
}

static void post_recv(int i)
{
	struct ibv_recv_wr wr = { .wr_id = i }, *bad;

	if (ibv_post_recv(B.qp[i], &wr, &bad))
		die("ibv_post_recv");
}

static void fill(void)
{
	int i;

	for (i = 0; i < NQP; i++)
		while (inflight[i] < (i < NPACED ? DEPTH : BULK_DEPTH))
			post_send(i);
}

/* Run for secs; completions inside [win0, win1) are tallied. */
static void run(double secs)
{
	double end = now_s() + secs, t;
	struct ibv_wc wc[64];
	int n, k, idle;

	while ((t = now_s()) < end) {
		idle = 1;
		n = ibv_poll_cq(A.cq, 64, wc);
		for (k = 0; k < n; k++) {
			if (wc[k].status != IBV_WC_SUCCESS) {
				fprintf(stderr, "send: %s\n",
					ibv_wc_status_str(wc[k].status));
				exit(2);
			}
			inflight[wc[k].wr_id]--;
			idle = 0;
		}
		fill();
		n = ibv_poll_cq(B.cq, 64, wc);
		t = now_s();
		cap_on = t >= win0 && t < win1;
		for (k = 0; k < n; k++) {
			int i = (int)wc[k].wr_id;

			if (wc[k].status != IBV_WC_SUCCESS || i >= NPACED) {
				fprintf(stderr, "recv: %s\n",
					ibv_wc_status_str(wc[k].status));
				exit(2);
			}
			rx[i].total++;
			if (t >= win0 && t < win1) {
				if (!rx[i].n++)
					rx[i].first = t;
				rx[i].last = t;
			}
			post_recv(i);
			idle = 0;
		}
		if (idle)
			usleep(100);
	}
}

/* Bytes one paced message puts on the wire (what the rate counts). */
static double msg_wire_bytes(void)
{
	uint32_t seg = mtu - HDR_WRITE_IMM;
	uint32_t n = (msg_len + seg - 1) / seg;

	return (double)(n - 1) * (ETH + HDR_WRITE + seg) +
	       (ETH + HDR_WRITE_IMM + msg_len - (n - 1) * seg);
}

static double measured_kbps(const struct tally *x)
{
	if (x->n < 2 || x->last <= x->first)
		return 0;
	return (x->n - 1) * msg_wire_bytes() * 8.0 / (x->last - x->first) / 1000.0;
}

/* ---- bursts, from receive timestamps ------------------------------------------ */

#define MBCF_ETHERTYPE	0x88B5
#define MBCF_OP_CONTROL	0x10	/* opcodes from here on are not sequenced */
#define CAP_MAX		(1 << 20)

struct cap_frame {
	uint32_t qpn;		/* dst_qpn */
	uint32_t len;		/* whole Ethernet frame */
	int64_t ns;		/* receive timestamp */
};

static const char *cap_ifname, *cap_netns;
static int cap_fd = -1;
static struct cap_frame *cap;
static long cap_n, cap_lost;
static volatile int cap_stop;
static pthread_t cap_thread;

/*
 * An AF_PACKET socket on the receiver's netdev (opened in its network
 * namespace: sockets keep theirs), MBCF frames only; the filter drops
 * our own outgoing frames (the receiver's ACKs) and the unpaced QP's.
 */
static void cap_open(uint32_t bulk_qpn)
{
	struct sock_filter code[] = {
		BPF_STMT(BPF_LD | BPF_B | BPF_ABS, SKF_AD_OFF + SKF_AD_PKTTYPE),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, PACKET_OUTGOING, 3, 0),
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, ETH + 4),	/* dst_qpn */
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, bulk_qpn, 1, 0),
		BPF_STMT(BPF_RET | BPF_K, 0x40000),
		BPF_STMT(BPF_RET | BPF_K, 0),
	};
	struct sock_fprog prog = { sizeof(code) / sizeof(code[0]), code };
	struct sockaddr_ll sll = { .sll_family = AF_PACKET,
				   .sll_protocol = htons(MBCF_ETHERTYPE) };
	int self = -1, ns, one = 1, rcvbuf = 16 << 20;

	if (cap_netns) {
		self = open("/proc/self/ns/net", O_RDONLY);
		ns = open(cap_netns, O_RDONLY);
		if (self < 0 || ns < 0 || setns(ns, CLONE_NEWNET))
			die("setns (capture)");
		close(ns);
	}
	cap_fd = socket(AF_PACKET, SOCK_RAW, htons(MBCF_ETHERTYPE));
	sll.sll_ifindex = (int)if_nametoindex(cap_ifname);
	if (cap_fd < 0 || !sll.sll_ifindex ||
	    setsockopt(cap_fd, SOL_SOCKET, SO_ATTACH_FILTER, &prog, sizeof(prog)) ||
	    setsockopt(cap_fd, SOL_SOCKET, SO_TIMESTAMPNS, &one, sizeof(one)) ||
	    (setsockopt(cap_fd, SOL_SOCKET, SO_RCVBUFFORCE, &rcvbuf, sizeof(rcvbuf)) &&
	     setsockopt(cap_fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof(rcvbuf))) ||
	    bind(cap_fd, (struct sockaddr *)&sll, sizeof(sll)))
		die("capture socket");
	if (cap_netns && (setns(self, CLONE_NEWNET) || close(self)))
		die("setns back");
	cap = calloc(CAP_MAX, sizeof(*cap));
	if (!cap)
		die("calloc");
}

static void *cap_main(void *arg)
{
	uint8_t frame[64];
	char ctl[256];
	struct iovec iov = { frame, sizeof(frame) };
	struct timeval tv = { 0, 100000 };
	struct msghdr mh;
	struct cmsghdr *cm;
	struct timespec ts;
	ssize_t n;

	(void)arg;
	setsockopt(cap_fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	while (!cap_stop) {
		memset(&mh, 0, sizeof(mh));
		mh.msg_iov = &iov;
		mh.msg_iovlen = 1;
		mh.msg_control = ctl;
		mh.msg_controllen = sizeof(ctl);
		n = recvmsg(cap_fd, &mh, MSG_TRUNC);
		if (n < ETH + 24 || !cap_on)
			continue;
		if (frame[ETH + 1] == 0 || frame[ETH + 1] >= MBCF_OP_CONTROL)
			continue;	/* not sequenced: not paced */
		ts.tv_sec = 0;
		ts.tv_nsec = 0;
		for (cm = CMSG_FIRSTHDR(&mh); cm; cm = CMSG_NXTHDR(&mh, cm))
			if (cm->cmsg_level == SOL_SOCKET &&
			    cm->cmsg_type == SCM_TIMESTAMPNS)
				memcpy(&ts, CMSG_DATA(cm), sizeof(ts));
		if (cap_n >= CAP_MAX) {
			cap_lost++;
			continue;
		}
		cap[cap_n].qpn = (uint32_t)frame[ETH + 5] << 16 |
				 (uint32_t)frame[ETH + 6] << 8 | frame[ETH + 7];
		cap[cap_n].len = (uint32_t)n;
		cap[cap_n].ns = (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
		cap_n++;
	}
	return NULL;
}

static void cap_start(void)
{
	if (cap_fd >= 0 && pthread_create(&cap_thread, NULL, cap_main, NULL))
		die("pthread_create");
}

static void cap_finish(void)
{
	struct tpacket_stats st;
	socklen_t sl = sizeof(st);

	if (cap_fd < 0)
		return;
	cap_stop = 1;
	pthread_join(cap_thread, NULL);
	if (!getsockopt(cap_fd, SOL_PACKET, PACKET_STATISTICS, &st, &sl))
		cap_lost += st.tp_drops;
	close(cap_fd);
	cap_fd = -1;
}

/*
 * Bursts of paced QP i (B's QP qpn, rate kbps): consecutive frames less
 * than half a frame time apart at the QP's rate came back to back.  Adds
 * the run lengths to hist (index: length, the last bucket: longer).
 */
#define HIST	9
static void bursts(uint32_t qpn, uint32_t kbps, long *hist, long *frames,
		   int *longest, double *late_ms)
{
	int64_t prev = 0;
	int run = 0;
	long i;

	for (i = 0; i < cap_n; i++) {
		const struct cap_frame *f = &cap[i];
		/* the frame time of the previous frame at the QP's rate */
		double gap_ns = prev ? (double)(f->ns - prev) : 0;
		double need_ns;

		if (f->qpn != qpn)
			continue;
		(*frames)++;
		need_ns = (double)f->len * 8e6 / kbps;
		if (run && gap_ns < need_ns / 2) {
			run++;
		} else {
			if (run) {
				hist[run < HIST ? run : HIST]++;
				if (run > *longest)
					*longest = run;
			}
			run = 1;
			if (prev && gap_ns - need_ns > *late_ms * 1e6)
				*late_ms = (gap_ns - need_ns) / 1e6;
		}
		prev = f->ns;
	}
	if (run) {
		hist[run < HIST ? run : HIST]++;
		if (run > *longest)
			*longest = run;
	}
}

static void check_bursts(const uint32_t *rate, uint32_t link_kbps)
{
	long hist[HIST + 1] = {}, all[HIST + 1] = {}, frames, total = 0, over;
	long runs_over = 0;
	uint32_t max_len = 0;
	double late;
	int i, k, longest, worst = 0;

	cap_finish();
	if (!cap)
		return;
	for (i = 0; i < cap_n; i++)
		if (cap[i].len > max_len)
			max_len = cap[i].len;
	printf("burst: %ld sequenced frames of paced QPs captured on %s (%ld lost), "
	       "longest %u bytes\n", cap_n, cap_ifname, cap_lost, max_len);
	CHECK(max_len <= ETH + mtu, "captured frames are at most MTU-sized (%u bytes)",
	      max_len);
	for (i = 0; i < NPACED; i++) {
		memset(hist, 0, sizeof(hist));
		frames = 0;
		longest = 0;
		late = 0;
		bursts(B.qp[i]->qp_num, rate[i], hist, &frames, &longest, &late);
		CHECK(frames > 0, "QP %d: its frames were captured at the receiver (%ld)",
		      i, frames);
		printf("burst: QP %2d %6u kbit/s (%.2f %% of the link): %ld frames, "
		       "runs", i, rate[i], 100.0 * rate[i] / link_kbps, frames);
		for (k = 1; k <= HIST; k++) {
			printf(" %s%d:%ld", k == HIST ? ">=" : "", k, hist[k]);
			all[k] += hist[k];
		}
		printf(", longest %d, largest gap beyond the frame time %.2f ms\n",
		       longest, late);
		if (longest > worst)
			worst = longest;
		total += frames;
	}
	over = total - all[1] - 2 * all[2];	/* frames in runs longer than 2 */
	for (k = 3; k <= HIST; k++)
		runs_over += all[k];
	printf("burst: all 16 QPs: %ld frames, %ld runs of 1, %ld of 2, %ld longer; "
	       "%ld frames (%.2f %%) in runs longer than 2; longest run %d "
	       "(goal: <= 2 at rates <= 50 %% of the link)\n",
	       total, all[1], all[2], runs_over, over,
	       total ? 100.0 * over / total : 0.0, worst);
}

static void check_rates(uint32_t base, double secs, double pct)
{
	uint32_t rate[NPACED];
	long bulk0;
	double t, kb, sum = 0;
	int i;

	for (i = 0; i < NQP; i++) {
		A.qp[i] = make_qp(&A, IBV_QPT_RC);
		B.qp[i] = make_qp(&B, IBV_QPT_RC);
		to_init(A.qp[i]);
		to_init(B.qp[i]);
	}
	for (i = 0; i < NQP; i++) {
		rate[i % NPACED] = (uint32_t)(i % NPACED + 1) * base;
		if (connect_qp(B.qp[i], A.qp[i], &A.gid, 0))
			die("RTS B");
		/* half get the rate with RTS, half afterwards */
		if (connect_qp(A.qp[i], B.qp[i], &B.gid,
			       i < NPACED && i % 2 ? rate[i] : 0))
			die("RTS A");
		if (i < NPACED && !(i % 2))
			CHECK(set_rate(A.qp[i], rate[i]) == 0,
			      "QP %d: ibv_modify_qp_rate_limit %u kbit/s", i, rate[i]);
	}
	for (i = 0; i < NPACED; i++)
		for (int k = 0; k < 256; k++)
			post_recv(i);
	if (cap_ifname) {
		cap_open(B.qp[NPACED]->qp_num);
		cap_start();
	}

	t = now_s();
	win0 = t + 0.5;		/* warm up: windows fill, clocks settle */
	win1 = win0 + secs;
	fill();
	run(0.5 + secs);
	/*
	 * The emulated guest stalls whole (the host deschedules its vCPUs),
	 * which every flow loses alike: the pacer is judged by each QP's
	 * measured/target ratio against the median ratio of all 16 (same
	 * run, same stalls): none starved below it by more than pct, none
	 * above its rate by more than pct; the median gets a loose bound (not
	 * starved) and every figure is printed.
	 */
	bulk0 = 0;
	double r[NPACED], med;
	for (i = 0; i < NPACED; i++) {
		kb = measured_kbps(&rx[i]);
		sum += kb;
		r[i] = kb / rate[i];
		printf("rate: QP %2d target %6u kbit/s measured %9.1f kbit/s (%+.2f %%) "
		       "over %ld messages\n", i, rate[i], kb,
		       (kb / rate[i] - 1) * 100, rx[i].n);
	}
	{
		double sorted[NPACED];

		memcpy(sorted, r, sizeof(r));
		for (i = 1; i < NPACED; i++)
			for (int k = i; k > 0 && sorted[k] < sorted[k - 1]; k--) {
				double x = sorted[k];

				sorted[k] = sorted[k - 1];
				sorted[k - 1] = x;
			}
		med = (sorted[NPACED / 2 - 1] + sorted[NPACED / 2]) / 2;
	}
	printf("rate: paced sum %.1f kbit/s, median measured/target %.4f\n", sum, med);
	/*
	 * Below the median by more than pct: that QP was starved.  Above it
	 * is allowed up to the rate itself: when the guest stalls for longer
	 * than the slack covers, a slow QP makes up a larger share of what the
	 * stall took than a fast one (its deficit is smaller), so on a loaded
	 * host the slow ones end nearer their rate (seen: 1 Mbit/s at 1.03
	 * while the median was 0.78).  How closely the rates agree on a quiet
	 * host is a figure for bench/, not a check here.
	 */
	for (i = 0; i < NPACED; i++) {
		RATE_CHECK(r[i] >= med * (1 - pct / 100),
		      "QP %d: measured/target %.4f not below the median %.4f by more than %.0f %%",
		      i, r[i], med, pct);
		RATE_CHECK(r[i] <= 1 + pct / 100, "QP %d: never above its rate + %.0f %% (%.4f)",
		      i, pct, r[i]);
	}
	RATE_CHECK(med >= 0.5, "the median QP got at least half its rate (%.4f)", med);
	if (cap_ifname)
		check_bursts(rate, caps.qp_rate_limit_max);

	/*
	 * 0 removes the limit: QP 0 (the slowest) now runs unhindered.  Its
	 * first frames queue behind the bulk stream's at the receiver: on a
	 * kernel VM_TIME_SCALE times slower (the debug lane) that queue takes
	 * as much longer to drain, so the window does too.
	 */
	CHECK(set_rate(A.qp[0], 0) == 0, "QP 0: rate 0 (unpaced)");
	memset(rx, 0, sizeof(rx));
	win0 = now_s() + 0.1 * vp_time_scale();
	win1 = win0 + 0.4 * vp_time_scale();
	run(0.5 * vp_time_scale());
	kb = measured_kbps(&rx[0]);
	printf("rate: QP  0 unpaced %.1f kbit/s\n", kb);
	RATE_CHECK(kb > 4.0 * rate[0], "QP 0 unpaced runs far above its old %u kbit/s (%.1f)",
	      rate[0], kb);
	(void)bulk0;

	/* drain: no new sends, let what is in flight complete */
	for (i = 0; i < NQP; i++)
		set_rate(A.qp[i], 0);
	for (double end = now_s() + 5; now_s() < end;) {
		struct ibv_wc wc[64];
		int n = ibv_poll_cq(A.cq, 64, wc), busy = 0;

		for (int k = 0; k < n; k++)
			inflight[wc[k].wr_id]--;
		ibv_poll_cq(B.cq, 64, wc);
		for (i = 0; i < NQP; i++)
			busy += inflight[i];
		if (!busy)
			break;
		usleep(1000);
	}
	for (i = 0; i < NQP; i++)
		CHECK(inflight[i] == 0, "QP %d: everything completed", i);
	for (i = 0; i < NQP; i++) {
		ibv_destroy_qp(A.qp[i]);
		ibv_destroy_qp(B.qp[i]);
	}
}

int main(int argc, char **argv)
{
	const char *a = NULL, *b = NULL;
	uint32_t base = 1000;
	double secs = 1.0, pct = 5.0;
	int c;

	while ((c = getopt(argc, argv, "a:b:r:t:p:m:c:n:M")) != -1) {
		switch (c) {
		case 'a': a = optarg; break;
		case 'b': b = optarg; break;
		case 'r': base = (uint32_t)strtoul(optarg, NULL, 0); break;
		case 't': secs = atof(optarg); break;
		case 'p': pct = atof(optarg); break;
		case 'm': msg_len = (uint32_t)strtoul(optarg, NULL, 0); break;
		case 'c': cap_ifname = optarg; break;
		case 'n': cap_netns = optarg; break;
		case 'M': measure_only = 1; break;
		default:
			fprintf(stderr, "usage: %s -a DEV -b DEV [-r KBPS] [-m BYTES] [-t S] [-p PCT] "
				"[-c IFNAME [-n NETNS]] [-M]\n",
				argv[0]);
			return 2;
		}
	}
	if (!a || !b || !base || secs <= 0 || !msg_len || msg_len > BULK)
		return 2;
	setvbuf(stdout, NULL, _IOLBF, 0);
	open_side(&A, a);
	open_side(&B, b);
	check_caps(&A);
	check_bad_input();
	check_rates(base, secs, pct);
	ibv_dereg_mr(A.mr);
	ibv_dereg_mr(B.mr);
	ibv_destroy_cq(A.cq);
	ibv_destroy_cq(B.cq);
	ibv_dealloc_pd(A.pd);
	ibv_dealloc_pd(B.pd);
	ibv_close_device(A.ctx);
	ibv_close_device(B.ctx);
	printf("pacing_test: %d failure(s)\n", failures);
	return failures > 100 ? 100 : failures;
}
