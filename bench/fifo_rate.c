// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * mbcf_fifo_rate: the memory-based FIFO against the verbs it replaces
 * (bench/guest-fifo.sh, docs/performance.md "The memory-based FIFO").
 *
 *   rate -m fifo|srq|imm -q QPS -p PROCS -n MSGS [-a SEND_DEV] [-b RECV_DEV]
 *        64 B messages from QPS sender QPs (spread over PROCS processes on
 *        device A) into one receiver (this process, device B):
 *          fifo  mbcfdv_wr_fifo_push into one FIFO (SIGNAL_EMPTY: the
 *                receiver sleeps on its eventfd when the queue is empty)
 *          srq   SEND into receive QPs sharing one SRQ, reposted at once
 *          imm   RDMA WRITE_WITH_IMM into the sender's own slots, one
 *                receive queue per QP, reposted at once
 *        srq and imm sleep on a completion channel when their CQ is empty.
 *   wake -m signal|send -n ITERS [-a DEV] [-b DEV]
 *        ping-pong between two processes that both sleep between messages:
 *          signal  FIFO with MBCFDV_FIFO_SIGNAL, poll() on its eventfd
 *          send    SEND, ibv_get_cq_event on a completion channel
 *
 * Every run checks itself: each sender QP's messages carry (index, seq),
 * the receiver expects seq = 0, 1, ... per index through the right QP,
 * and the totals exactly (RC keeps each QP's order, so "in order" is
 * "every message exactly once").  A wrong message, a failed completion or
 * a short count exits 1.
 *
 * CPU per message (rate): rx_cpu_us, the receiver's vCPU (-r) busy for the
 * run's wall time minus its idle time (exact: nohz idle accounting), so
 * the process, the softirqs placing its messages and ksoftirqd alike;
 * rx_soft_us, that vCPU's softirq time as /proc/stat samples it at the
 * tick; all_cpu_us, every vCPU the same way; rx_proc_us, the receiving
 * process's user + system time (getrusage).  One line on stdout:
 *   RESULT rate mode=... msgs=... secs=... rate=... rx_cpu_us=... ...
 *   RESULT wake mode=... iters=... p50_us=... p90_us=... p99_us=... max_us=...
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <infiniband/verbs.h>
#include "infiniband/mbcfdv.h"

#define MSG	64		/* payload bytes of every message */
#define MAXQ	64		/* sender QPs at most */
#define SQ	128		/* send queue depth per sender QP */
#define BATCH	16		/* WRs per post; the last one signaled */
#define RQ	256		/* imm: receives per QP (srq: RQ * QPs) */
#define SLOTS	(2 * RQ)	/* imm: slots per sender, > RQ: never overwritten unread */
#define FIFO_AREA (1u << 20)

static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void die(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	fprintf(stderr, "mbcf_fifo_rate[%d]: ", getpid());
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(1);
}

/* ---- shared between the processes (mapped before fork) ------------------- */

struct ep {
	uint32_t qpn, psn;
	union ibv_gid gid;
};

struct shm {
	atomic_int senders_ready;	/* sender QPs created (count) */
	atomic_int rx_ready;		/* receiver QPs created and connected */
	atomic_int go;			/* senders may post */
	atomic_int failed;
	uint32_t fifo_key, rkey;
	uint64_t raddr;
	uint32_t wake_key[2];		/* wake: each side's FIFO */
	struct ep snd[MAXQ], rcv[MAXQ];
};

static struct shm *sh;

static void spin_until(atomic_int *v, int want)
{
	for (int i = 0; atomic_load(v) < want; i++) {
		if (atomic_load(&sh->failed))
			exit(1);
		if (i > 100)
			usleep(200);
	}
}

static void pin(int cpu)
{
	cpu_set_t s;

	if (cpu < 0)
		return;
	CPU_ZERO(&s);
	CPU_SET(cpu, &s);
	if (sched_setaffinity(0, sizeof(s), &s))
		die("pin to cpu %d: %s", cpu, strerror(errno));
}

static double now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec * 1e-9;
}

/* ---- devices and QPs -------------------------------------------------------- */

struct dev {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	union ibv_gid gid;
};

static void dev_open(struct dev *d, const char *name)
{
	struct ibv_device **l = ibv_get_device_list(NULL);

	d->ctx = NULL;
	for (int i = 0; l && l[i] && !d->ctx; i++)
		if (!strcmp(ibv_get_device_name(l[i]), name))
			d->ctx = ibv_open_device(l[i]);
	if (l)
		ibv_free_device_list(l);
	if (!d->ctx)
		die("cannot open %s", name);
	d->pd = ibv_alloc_pd(d->ctx);
	if (!d->pd || ibv_query_gid(d->ctx, 1, 0, &d->gid))
		die("%s: pd/gid", name);
}

static struct ibv_qp *qp_new(struct dev *d, struct ibv_cq *scq, struct ibv_cq *rcq,
			     struct ibv_srq *srq, uint32_t sq, uint32_t rq)
{
	struct ibv_qp_init_attr_ex a = {
		.qp_type = IBV_QPT_RC, .send_cq = scq, .recv_cq = rcq, .srq = srq,
		.cap = { .max_send_wr = sq, .max_recv_wr = srq ? 0 : rq,
			 .max_send_sge = 1, .max_recv_sge = 1, .max_inline_data = MSG },
		.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS,
		.pd = d->pd,
		.send_ops_flags = IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM,
	};
	struct ibv_qp *qp = ibv_create_qp_ex(d->ctx, &a);

	if (!qp)
		die("ibv_create_qp_ex: %s", strerror(errno));
	return qp;
}

/* INIT -> RTR -> RTS towards peer; RNR retried forever (rnr_retry 7). */
static void qp_connect(struct ibv_qp *qp, uint32_t my_psn, const struct ep *peer)
{
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_INIT, .port_num = 1,
		.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE,
	};

	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
			  IBV_QP_ACCESS_FLAGS))
		die("qp INIT");
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_1024;
	a.dest_qp_num = peer->qpn;
	a.rq_psn = peer->psn;
	a.max_dest_rd_atomic = 1;
	a.min_rnr_timer = 1;
	a.ah_attr.is_global = 1;
	a.ah_attr.grh.dgid = peer->gid;
	a.ah_attr.grh.hop_limit = 1;
	a.ah_attr.port_num = 1;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
			  IBV_QP_DEST_QPN | IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
			  IBV_QP_MIN_RNR_TIMER))
		die("qp RTR");
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = my_psn;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.max_rd_atomic = 1;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT |
			  IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC))
		die("qp RTS");
}

/* The payload: which sender QP, which of its messages; rest a pattern. */
struct msg {
	uint32_t idx, seq;
	uint8_t pad[MSG - 8];
};

static void msg_fill(struct msg *m, uint32_t idx, uint32_t seq)
{
	m->idx = idx;
	m->seq = seq;
	memset(m->pad, (uint8_t)(idx * 31 + seq), sizeof(m->pad));
}

/* ---- the CPU counters ------------------------------------------------------ */

/*
 * cpu N's (all, N < 0) idle + iowait and softirq time so far, in seconds.
 * Busy time is taken as wall time minus idle: the kernel keeps idle time
 * exactly (nohz idle accounting), while user, system and softirq are
 * sampled at the tick, which a vCPU that sleeps between messages mostly
 * misses.  softirq is reported as /proc/stat has it, for its share.
 */
static void cpu_times(int n, double *idle, double *soft)
{
	char want[16], line[256];
	long long v[8] = { 0 };
	double hz = sysconf(_SC_CLK_TCK);
	FILE *f = fopen("/proc/stat", "r");

	if (n < 0)
		snprintf(want, sizeof(want), "cpu ");
	else
		snprintf(want, sizeof(want), "cpu%d ", n);
	while (f && fgets(line, sizeof(line), f)) {
		if (strncmp(line, want, strlen(want)))
			continue;
		sscanf(line + strlen(want), "%lld %lld %lld %lld %lld %lld %lld %lld",
		       &v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &v[6], &v[7]);
		break;
	}
	if (f)
		fclose(f);
	*idle = (v[3] + v[4]) / hz;
	*soft = v[6] / hz;
}

static double rusage_s(void)
{
	struct rusage r;

	getrusage(RUSAGE_SELF, &r);
	return r.ru_utime.tv_sec + r.ru_utime.tv_usec * 1e-6 +
	       r.ru_stime.tv_sec + r.ru_stime.tv_usec * 1e-6;
}

/* Sleep on fd until readable (1 s at most: the run's deadline counts). */
static void wait_fd(int fd)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };

	poll(&p, 1, 1000);
}

/* Next completion batch from cq, sleeping on ch when it is empty. */
static int cq_wait(struct ibv_cq *cq, struct ibv_comp_channel *ch, struct ibv_wc *wc, int n)
{
	int k = ibv_poll_cq(cq, n, wc);

	while (k == 0) {
		struct ibv_cq *ecq;
		void *ectx;

		if (ibv_req_notify_cq(cq, 0))
			die("req_notify_cq");
		k = ibv_poll_cq(cq, n, wc);	/* what came before arming */
		if (k)
			break;
		wait_fd(ch->fd);
		if (!ibv_get_cq_event(ch, &ecq, &ectx))
			ibv_ack_cq_events(ecq, 1);
		k = ibv_poll_cq(cq, n, wc);
	}
	if (k < 0)
		die("poll cq");
	return k;
}

/* ---- rate: the senders ------------------------------------------------------- */

enum mode { M_FIFO, M_SRQ, M_IMM, M_SIGNAL, M_SEND };

static enum mode mode;
static int nq = 1, nproc = 1, rx_cpu = 0, tx_cpu = 1;
static long nmsg = 10000;
static const char *dev_a = "mbcf1", *dev_b = "mbcf0";

/* Sender process: QPs [first, first + n), nmsg messages each. */
static void sender(int first, int n)
{
	struct dev d;
	struct ibv_comp_channel *ch;
	struct ibv_cq *cq;
	struct ibv_qp *qp[MAXQ];
	struct ibv_qp_ex *qx[MAXQ];
	long sent[MAXQ] = { 0 }, done[MAXQ] = { 0 }, left = (long)n * nmsg;
	struct msg m;

	pin(tx_cpu);
	dev_open(&d, dev_a);
	ch = ibv_create_comp_channel(d.ctx);
	cq = ch ? ibv_create_cq(d.ctx, n * SQ / BATCH + 16, NULL, ch, 0) : NULL;
	if (!cq)
		die("sender cq");
	for (int i = 0; i < n; i++) {
		struct ep *e = &sh->snd[first + i];

		qp[i] = qp_new(&d, cq, cq, NULL, SQ, 1);
		qx[i] = ibv_qp_to_qp_ex(qp[i]);
		e->qpn = qp[i]->qp_num;
		e->psn = (first + i + 1) * 1000;
		e->gid = d.gid;
		atomic_fetch_add(&sh->senders_ready, 1);
	}
	spin_until(&sh->rx_ready, 1);
	for (int i = 0; i < n; i++)
		qp_connect(qp[i], sh->snd[first + i].psn, &sh->rcv[first + i]);
	atomic_fetch_add(&sh->senders_ready, 1000);	/* this process connected */
	spin_until(&sh->go, 1);
	/* Invariant: sent[i] - done[i] <= SQ - BATCH, a multiple of BATCH
	 * (nmsg is one), so the queue never overflows. */
	while (left) {
		struct ibv_wc wc[16];
		int k, posted = 0;

		for (int i = 0; i < n; i++) {
			if (sent[i] == nmsg || sent[i] - done[i] > SQ - 2 * BATCH)
				continue;
			posted = 1;
			ibv_wr_start(qx[i]);
			for (int b = 0; b < BATCH; b++, sent[i]++) {
				uint32_t seq = sent[i];

				msg_fill(&m, first + i, seq);
				qx[i]->wr_id = ((uint64_t)i << 32) | (seq + 1);
				qx[i]->wr_flags = b == BATCH - 1 ? IBV_SEND_SIGNALED : 0;
				if (mode == M_FIFO)
					mbcfdv_wr_fifo_push(qx[i], sh->fifo_key);
				else if (mode == M_SRQ)
					ibv_wr_send(qx[i]);
				else
					ibv_wr_rdma_write_imm(qx[i], sh->rkey, sh->raddr +
						((uint64_t)(first + i) * SLOTS + seq % SLOTS) * MSG,
						htonl(seq));
				qx[i]->wr_flags |= IBV_SEND_INLINE;
				ibv_wr_set_inline_data(qx[i], &m, MSG);
			}
			if (ibv_wr_complete(qx[i]))
				die("post: %s", strerror(errno));
		}
		/* every window full: sleep for a completion rather than spin, so
		 * the sending vCPU's time goes to the kernel's transmit work */
		k = posted ? ibv_poll_cq(cq, 16, wc) : cq_wait(cq, ch, wc, 16);
		if (k < 0)
			die("poll send cq");
		for (int j = 0; j < k; j++) {
			int i = wc[j].wr_id >> 32;

			if (wc[j].status != IBV_WC_SUCCESS) {
				atomic_store(&sh->failed, 1);
				die("sender qp %d: %s", first + i, ibv_wc_status_str(wc[j].status));
			}
			/* a signaled WR completes the BATCH before it */
			done[i] = (uint32_t)wc[j].wr_id;
			left -= BATCH;
		}
	}
	exit(0);
}

/* ---- rate: the receiver ------------------------------------------------------ */

struct rx {
	long next[MAXQ];	/* the seq expected from each sender QP */
	uint32_t qpn[MAXQ];	/* the receiving QP for each */
	long got, bad;
};

static int qp_index(struct rx *r, uint32_t qpn)
{
	for (int i = 0; i < nq; i++)
		if (r->qpn[i] == qpn)
			return i;
	return -1;
}

/* One message: from sender idx, through its receiving QP, the next seq. */
static void rx_check(struct rx *r, const struct msg *m, uint32_t len, uint32_t qpn)
{
	struct msg want;

	if (len != MSG || m->idx >= (uint32_t)nq || r->qpn[m->idx] != qpn ||
	    m->seq != r->next[m->idx]) {
		if (r->bad++ < 5)
			fprintf(stderr, "bad message: len %u idx %u seq %u qpn %u\n",
				len, m->idx, m->seq, qpn);
		return;
	}
	msg_fill(&want, m->idx, m->seq);
	if (memcmp(m, &want, MSG) && r->bad++ < 5)
		fprintf(stderr, "bad payload: idx %u seq %u\n", m->idx, m->seq);
	r->next[m->idx]++;
	r->got++;
}

static void fifo_handler(void *ctx, const void *rec, uint32_t len, uint32_t qpn)
{
	rx_check(ctx, rec, len, qpn);
}

static void rate(void)
{
	struct dev d;
	struct rx r = { .got = 0 };
	struct ibv_comp_channel *ch;
	struct ibv_cq *scq, *rcq;
	struct ibv_srq *srq = NULL;
	struct ibv_qp *qp[MAXQ];
	struct mbcfdv_fifo *fifo = NULL;
	struct ibv_mr *mr;
	uint8_t *buf;
	size_t blen;
	long total = (long)nq * nmsg, nrecv = mode == M_SRQ ? (long)RQ * nq : RQ;
	double i0, i1, s0, s1, ai0, ai1, as0, as1;
	double t0, t1, u0, u1;
	pid_t kids[MAXQ];
	int status, failed = 0, per = nq / nproc;

	if (nq > MAXQ || nq % nproc || nmsg % BATCH)
		die("QPS <= %d, a multiple of PROCS; MSGS a multiple of %d", MAXQ, BATCH);
	sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (sh == MAP_FAILED)
		die("mmap");
	/* fork before any verbs object exists (no fork-safety questions) */
	for (int p = 0; p < nproc; p++) {
		kids[p] = fork();
		if (kids[p] < 0)
			die("fork");
		if (kids[p] == 0)
			sender(p * per, per);
	}
	pin(rx_cpu);
	dev_open(&d, dev_b);
	ch = ibv_create_comp_channel(d.ctx);
	scq = ibv_create_cq(d.ctx, 16, NULL, NULL, 0);
	rcq = ibv_create_cq(d.ctx, RQ * nq + 16, NULL, ch, 0);
	if (!ch || !scq || !rcq)
		die("receiver cq");
	blen = mode == M_FIFO ? MBCFDV_FIFO_CTRL_LEN + FIFO_AREA :
	       mode == M_SRQ ? (size_t)nrecv * MSG : (size_t)nq * SLOTS * MSG;
	if (posix_memalign((void **)&buf, 4096, blen))
		die("alloc");
	memset(buf, 0, blen);
	if (mode == M_FIFO) {
		fifo = mbcfdv_create_fifo(d.pd, buf, blen, MBCFDV_FIFO_SIGNAL_EMPTY);
		if (!fifo)
			die("mbcfdv_create_fifo: %s", strerror(errno));
		sh->fifo_key = fifo->key;
		mr = NULL;
	} else {
		mr = ibv_reg_mr(d.pd, buf, blen, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
		if (!mr)
			die("reg_mr");
		sh->rkey = mr->rkey;
		sh->raddr = (uintptr_t)buf;
	}
	if (mode == M_SRQ) {
		struct ibv_srq_init_attr sa = { .attr = { .max_wr = nrecv, .max_sge = 1 } };

		srq = ibv_create_srq(d.pd, &sa);
		if (!srq)
			die("create_srq: %s", strerror(errno));
	}
	spin_until(&sh->senders_ready, nq);
	for (int i = 0; i < nq; i++) {
		qp[i] = qp_new(&d, scq, rcq, srq, 4, RQ);
		r.qpn[i] = qp[i]->qp_num;
		sh->rcv[i] = (struct ep){ .qpn = qp[i]->qp_num, .psn = 500000 + i, .gid = d.gid };
		qp_connect(qp[i], sh->rcv[i].psn, &sh->snd[i]);
	}
	/* receives: srq slot j for wr_id j; imm: wr_id = QP index */
	for (long j = 0; mode != M_FIFO && j < (mode == M_SRQ ? nrecv : (long)RQ * nq); j++) {
		struct ibv_sge sg = { (uintptr_t)buf + (mode == M_SRQ ? j * MSG : 0), MSG, mr->lkey };
		struct ibv_recv_wr w = { .wr_id = j, .sg_list = &sg, .num_sge = mode == M_SRQ }, *bad;

		if (mode == M_SRQ ? ibv_post_srq_recv(srq, &w, &bad) :
				    ibv_post_recv(qp[j / RQ], &w, &bad))
			die("post recv");
	}
	atomic_store(&sh->rx_ready, 1);
	spin_until(&sh->senders_ready, nq + 1000 * nproc);
	cpu_times(rx_cpu, &i0, &s0);
	cpu_times(-1, &ai0, &as0);
	u0 = rusage_s();
	t0 = now();
	atomic_store(&sh->go, 1);
	if (mode == M_FIFO) {
		static uint8_t rec[256];
		int efd = mbcfdv_fifo_event_fd(fifo);

		while (r.got + r.bad < total && now() - t0 < 120) {
			int k = mbcfdv_fifo_dispatch(fifo, fifo_handler, &r, rec, sizeof(rec), 256);

			if (k < 0)
				die("dispatch: %s", strerror(-k));
			if (k == 0)
				wait_fd(efd);	/* SIGNAL_EMPTY: a push into the empty queue wakes */
		}
	} else {
		struct ibv_wc wc[64];

		while (r.got + r.bad < total && now() - t0 < 120) {
			struct ibv_recv_wr w[64], *bad;
			struct ibv_sge sg[64];
			int k = cq_wait(rcq, ch, wc, 64), nw = 0;

			for (int j = 0; j < k; j++) {
				struct msg *m;
				int i;

				if (wc[j].status != IBV_WC_SUCCESS)
					die("receive: %s", ibv_wc_status_str(wc[j].status));
				if (mode == M_SRQ) {
					m = (struct msg *)(buf + wc[j].wr_id * MSG);
					rx_check(&r, m, wc[j].byte_len, wc[j].qp_num);
				} else {
					/* the imm is the seq; the slot holds the message */
					uint32_t seq = ntohl(wc[j].imm_data);

					i = qp_index(&r, wc[j].qp_num);
					if (wc[j].opcode != IBV_WC_RECV_RDMA_WITH_IMM || i < 0) {
						r.bad++;
						continue;
					}
					m = (struct msg *)(buf + ((uint64_t)i * SLOTS + seq % SLOTS) * MSG);
					rx_check(&r, m, m->seq == seq ? MSG : 0, wc[j].qp_num);
				}
				/* repost the same receive (srq: its slot again) */
				sg[nw] = (struct ibv_sge){ (uintptr_t)buf +
					(mode == M_SRQ ? wc[j].wr_id * MSG : 0), MSG, mr->lkey };
				w[nw] = (struct ibv_recv_wr){ .wr_id = wc[j].wr_id, .sg_list = &sg[nw],
					.num_sge = mode == M_SRQ };
				if (mode == M_IMM) {
					if (ibv_post_recv(qp[wc[j].wr_id / RQ], &w[nw], &bad))
						die("repost");
					continue;
				}
				w[nw].next = NULL;
				if (nw)
					w[nw - 1].next = &w[nw];
				nw++;
			}
			if (nw && ibv_post_srq_recv(srq, w, &bad))
				die("repost srq");
		}
	}
	t1 = now();
	u1 = rusage_s();
	cpu_times(rx_cpu, &i1, &s1);
	cpu_times(-1, &ai1, &as1);
	for (int p = 0; p < nproc; p++) {
		if (r.got + r.bad < total)
			kill(kids[p], SIGKILL);
		if (waitpid(kids[p], &status, 0) < 0 || !WIFEXITED(status) || WEXITSTATUS(status))
			failed = 1;
	}
	for (int i = 0; i < nq; i++)
		if (r.next[i] != nmsg)
			failed = 1;
	{
		double us = 1e6 / (r.got ? r.got : 1), secs = t1 - t0;
		long ncpu = sysconf(_SC_NPROCESSORS_ONLN);

		printf("RESULT rate mode=%s dev=%s->%s qps=%d procs=%d msgs=%ld bad=%ld secs=%.3f "
		       "rate=%.0f rx_cpu_us=%.2f rx_soft_us=%.2f all_cpu_us=%.2f rx_proc_us=%.2f %s\n",
		       mode == M_FIFO ? "fifo" : mode == M_SRQ ? "srq" : "imm", dev_a, dev_b, nq,
		       nproc, r.got, r.bad, secs, r.got / secs, (secs - (i1 - i0)) * us,
		       (s1 - s0) * us, (ncpu * secs - (ai1 - ai0)) * us, (u1 - u0) * us,
		       failed || r.bad || r.got != total ? "FAIL" : "ok");
	}
	if (failed || r.bad || r.got != total)
		exit(1);
	for (int i = 0; i < nq; i++)
		ibv_destroy_qp(qp[i]);
	if (fifo)
		mbcfdv_destroy_fifo(fifo);
	exit(0);
}

/* ---- wake: ping-pong between two sleepers --------------------------------- */

struct waker {
	struct dev d;
	struct ibv_comp_channel *ch;
	struct ibv_cq *scq, *rcq;
	struct ibv_qp *qp;
	struct ibv_qp_ex *qx;
	struct mbcfdv_fifo *fifo;
	struct ibv_mr *mr;
	uint8_t *buf;
	uint32_t expect;	/* the seq the next message carries */
	uint32_t got_seq;
	int got;
};

static void wake_handler(void *ctx, const void *rec, uint32_t len, uint32_t qpn)
{
	struct waker *w = ctx;
	const struct msg *m = rec;

	(void)qpn;
	w->got++;
	w->got_seq = len == MSG ? m->seq : ~0u;
}

static void wake_post(struct waker *w, uint32_t seq, uint32_t peer_key)
{
	struct msg m;
	struct ibv_wc wc[8];

	msg_fill(&m, 0, seq);
	ibv_wr_start(w->qx);
	w->qx->wr_id = seq;
	w->qx->wr_flags = IBV_SEND_SIGNALED | IBV_SEND_INLINE;
	if (mode == M_SIGNAL)
		mbcfdv_wr_fifo_push(w->qx, peer_key);
	else
		ibv_wr_send(w->qx);
	ibv_wr_set_inline_data(w->qx, &m, MSG);
	if (ibv_wr_complete(w->qx))
		die("post: %s", strerror(errno));
	/* send completions: reaped lazily, never waited for */
	for (int k; (k = ibv_poll_cq(w->scq, 8, wc)) > 0;)
		for (int j = 0; j < k; j++)
			if (wc[j].status != IBV_WC_SUCCESS)
				die("send: %s", ibv_wc_status_str(wc[j].status));
}

/* Sleep until the peer's message seq arrives; exits on a wrong one. */
static void wake_wait(struct waker *w, uint32_t seq)
{
	if (mode == M_SIGNAL) {
		int fd = mbcfdv_fifo_event_fd(w->fifo);
		uint8_t rec[128];

		w->got = 0;
		for (double t0 = now(); !w->got; ) {
			struct pollfd p = { .fd = fd, .events = POLLIN };
			int k;

			poll(&p, 1, 1000);
			k = mbcfdv_fifo_dispatch(w->fifo, wake_handler, w, rec, sizeof(rec), 1);
			if (k < 0)
				die("dispatch: %s", strerror(-k));
			if (now() - t0 > 30)
				die("no message %u", seq);
		}
	} else {
		struct ibv_wc wc;
		struct ibv_sge sg = { (uintptr_t)w->buf, MSG, w->mr->lkey };
		struct ibv_recv_wr rw = { .sg_list = &sg, .num_sge = 1 }, *bad;

		cq_wait(w->rcq, w->ch, &wc, 1);
		if (wc.status != IBV_WC_SUCCESS)
			die("recv: %s", ibv_wc_status_str(wc.status));
		w->got_seq = wc.byte_len == MSG ? ((struct msg *)w->buf)->seq : ~0u;
		if (ibv_post_recv(w->qp, &rw, &bad))
			die("repost");
	}
	if (w->got_seq != seq)
		die("wake: got seq %u, want %u", w->got_seq, seq);
}

static void waker_setup(struct waker *w, const char *dev, int side)
{
	size_t blen = MBCFDV_FIFO_CTRL_LEN + 4096;

	dev_open(&w->d, dev);
	w->ch = ibv_create_comp_channel(w->d.ctx);
	w->scq = ibv_create_cq(w->d.ctx, 64, NULL, NULL, 0);
	w->rcq = ibv_create_cq(w->d.ctx, 64, NULL, w->ch, 0);
	if (!w->ch || !w->scq || !w->rcq)
		die("wake cq");
	w->qp = qp_new(&w->d, w->scq, w->rcq, NULL, 32, 32);
	w->qx = ibv_qp_to_qp_ex(w->qp);
	if (posix_memalign((void **)&w->buf, 4096, blen))
		die("alloc");
	memset(w->buf, 0, blen);
	if (mode == M_SIGNAL) {
		w->fifo = mbcfdv_create_fifo(w->d.pd, w->buf, blen, MBCFDV_FIFO_SIGNAL);
		if (!w->fifo)
			die("mbcfdv_create_fifo: %s", strerror(errno));
		sh->wake_key[side] = w->fifo->key;
	} else {
		w->mr = ibv_reg_mr(w->d.pd, w->buf, blen, IBV_ACCESS_LOCAL_WRITE);
		if (!w->mr)
			die("reg_mr");
	}
	sh->snd[side] = (struct ep){ .qpn = w->qp->qp_num, .psn = 7000 + side, .gid = w->d.gid };
	atomic_fetch_add(&sh->senders_ready, 1);
	spin_until(&sh->senders_ready, 2);
	qp_connect(w->qp, 7000 + side, &sh->snd[!side]);
	/* receives once the QP is past RESET; every one lands in buf (one at a
	 * time in flight: the ping-pong never has two) */
	for (int i = 0; mode == M_SEND && i < 16; i++) {
		struct ibv_sge sg = { (uintptr_t)w->buf, MSG, w->mr->lkey };
		struct ibv_recv_wr rw = { .sg_list = &sg, .num_sge = 1 }, *bad;

		if (ibv_post_recv(w->qp, &rw, &bad))
			die("post recv");
	}
	atomic_fetch_add(&sh->rx_ready, 1);
	spin_until(&sh->rx_ready, 2);
}

static int cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static void wake(void)
{
	struct waker w = { .got = 0 };
	int warm = 50, status;
	double *rtt;
	pid_t kid;

	sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (sh == MAP_FAILED)
		die("mmap");
	kid = fork();
	if (kid < 0)
		die("fork");
	if (kid == 0) {	/* the responder, side 1, on device B: echoes seq */
		pin(rx_cpu);
		waker_setup(&w, dev_b, 1);
		for (uint32_t s = 0; s < (uint32_t)(nmsg + warm); s++) {
			wake_wait(&w, s);
			wake_post(&w, s, sh->wake_key[0]);
		}
		sleep(1);	/* the last completion */
		exit(0);
	}
	pin(tx_cpu);
	waker_setup(&w, dev_a, 0);
	rtt = calloc(nmsg, sizeof(*rtt));
	for (uint32_t s = 0; s < (uint32_t)(nmsg + warm); s++) {
		double t = now();

		wake_post(&w, s, sh->wake_key[1]);
		wake_wait(&w, s);
		if (s >= (uint32_t)warm)
			rtt[s - warm] = (now() - t) * 1e6;
	}
	if (waitpid(kid, &status, 0) < 0 || !WIFEXITED(status) || WEXITSTATUS(status))
		die("responder failed");
	qsort(rtt, nmsg, sizeof(*rtt), cmp_d);
	printf("RESULT wake mode=%s dev=%s<->%s iters=%ld p50_us=%.1f p90_us=%.1f p99_us=%.1f "
	       "max_us=%.1f ok\n", mode == M_SIGNAL ? "signal" : "send", dev_a, dev_b, nmsg,
	       rtt[nmsg / 2], rtt[nmsg * 9 / 10], rtt[nmsg * 99 / 100], rtt[nmsg - 1]);
	exit(0);
}

int main(int argc, char **argv)
{
	const char *m = NULL;
	int o, is_rate;

	if (argc < 2 || (strcmp(argv[1], "rate") && strcmp(argv[1], "wake")))
		goto usage;
	is_rate = !strcmp(argv[1], "rate");
	optind = 2;
	while ((o = getopt(argc, argv, "m:q:p:n:a:b:r:c:")) != -1) {
		switch (o) {
		case 'm': m = optarg; break;
		case 'q': nq = atoi(optarg); break;
		case 'p': nproc = atoi(optarg); break;
		case 'n': nmsg = atol(optarg); break;
		case 'a': dev_a = optarg; break;
		case 'b': dev_b = optarg; break;
		case 'r': rx_cpu = atoi(optarg); break;
		case 'c': tx_cpu = atoi(optarg); break;
		default: goto usage;
		}
	}
	if (!m || nq < 1 || nproc < 1 || nmsg < 1)
		goto usage;
	if (is_rate && !strcmp(m, "fifo"))
		mode = M_FIFO;
	else if (is_rate && !strcmp(m, "srq"))
		mode = M_SRQ;
	else if (is_rate && !strcmp(m, "imm"))
		mode = M_IMM;
	else if (!is_rate && !strcmp(m, "signal"))
		mode = M_SIGNAL;
	else if (!is_rate && !strcmp(m, "send"))
		mode = M_SEND;
	else
		goto usage;
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (is_rate)
		rate();
	wake();
	return 0;
usage:
	fprintf(stderr, "usage: %s rate -m fifo|srq|imm [-q QPS] [-p PROCS] [-n MSGS]\n"
		"       %s wake -m signal|send [-n ITERS]\n"
		"  [-a SENDER_DEV] [-b RECEIVER_DEV] [-r RX_CPU] [-c TX_CPU]\n", argv[0], argv[0]);
	return 2;
}
