/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * Helpers shared by the guest test programs: results (a running count of
 * failed checks, or named cases each ending in one PASS/FAIL line), and for
 * the stress programs (lifetimes.c, limits.c, scale.c) devices, connected
 * RC QPs, registered buffers, completion bookkeeping, the pinned-page count
 * and a raw-frame flood.
 *
 * Everything here reports failures to the caller (these programs assert
 * what happens when verbs fail); only true setup failures call vp_die().
 */
#ifndef MBCF_VMPROG_H
#define MBCF_VMPROG_H

#include <infiniband/verbs.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define VP_PAGE		4096

/* ---- results ------------------------------------------------------------ */

/* Number of failed checks so far; each one printed as a FAIL line. */
extern int vp_fails;

void vp_die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
/* vp_die("WHAT: strerror(errno)"). */
void vp_die_errno(const char *what) __attribute__((noreturn));
/* Record a failed check: prints "FAIL <what>: ..." and counts it. */
void vp_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Check cond; on failure vp_fail() with the message. Returns cond. */
bool vp_check(bool cond, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/*
 * A check on one line of its own: "ok: MSG", or "FAIL: MSG [COND]" counted
 * in vp_fails (the shell scripts count the FAIL: lines).  Returns ok.
 */
#define CHECK(cond, ...) vp_ok(!!(cond), #cond, __VA_ARGS__)
bool vp_ok(bool ok, const char *cond, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

double vp_now(void);
void vp_sleep_us(long us);

/*
 * What waits for completions and events multiply their limits by:
 * VM_TIME_SCALE, which run.sh exports (1 on the stock kernel, more on the
 * debug lane's, where KASAN, lockdep and kmemleak under TCG make a 16 MiB
 * transfer take minutes).  Limits stay deadlines: nothing is asserted
 * about speed.
 */
double vp_time_scale(void);

/* ---- cases ------------------------------------------------------------------ */

/*
 * The programs that run named cases (verbs_errors.c, verbs_ex.c,
 * ring_attack.c) collect a case's failures and notes and print one line
 * per case.  Thread safe: a case's helper threads may fail it too.
 */
void vc_start(void);
/* Count a failure of the current case and append its message. */
void vc_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Append to the current case's note (printed on its PASS or FAIL line). */
void vc_note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Failures of the current case so far. */
int vc_fails(void);
const char *vc_message(void);
/*
 * Print "PASS name [a-b]: what; notes (T s)" or "FAIL name [a-b]: messages
 * (note: notes)"; the shell scripts key on the first word. 1 if it failed.
 */
int vc_end(const char *name, const char *dev_a, const char *dev_b,
	   const char *what, double t0);

/* A seeded generator (xorshift64*), so a run can be repeated with -s. */
uint64_t vp_rand(uint64_t *state);
/* Uniform in [0, n). */
uint32_t vp_rand_below(uint64_t *state, uint32_t n);

/* ---- the pinned-page count (FOLL_PIN: ib_umem_get's pins) ---------------- */

/* System-wide pages held pinned; exact (folds per-CPU deltas first). */
long vp_pins_held(void);

/* ---- devices --------------------------------------------------------------- */

struct vp_dev {
	const char *name;
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	union ibv_gid gid;
	uint8_t mac[6];		/* from GID 0 (fe80:: + EUI-64 of the MAC) */
};

/* Open the verbs device called @name: its context, or NULL with errno set. */
struct ibv_context *vp_try_open(const char *name);
/* The same, or vp_die() ("setup: cannot open NAME: ..."). */
struct ibv_context *vp_open(const char *name);
/* Open device @name, allocate a PD, read GID 0. 0 or an errno. */
int vp_dev_open(struct vp_dev *d, const char *name);
/* Dealloc the PD and close; returns the first nonzero verbs status. */
int vp_dev_close(struct vp_dev *d);

/* ---- QPs -------------------------------------------------------------------- */

struct vp_conn_opts {
	uint8_t timeout, retry_cnt, rnr_retry, min_rnr_timer;
};

extern const struct vp_conn_opts vp_default_opts;

/*
 * @o on a kernel VM_TIME_SCALE times slower (the debug lane): the local ACK
 * timeout raised by log2 of the scale, so every retry waits that much
 * longer.  The same options on the stock kernel.
 */
struct vp_conn_opts vp_scaled_opts(const struct vp_conn_opts *o);

struct vp_ep {
	struct vp_dev *dev;
	struct ibv_cq *cq;		/* send and receive completions */
	struct ibv_qp *qp;
	uint32_t psn;			/* our first send psn */
	uint32_t peer_psn;		/* the peer's (our rq_psn) */
	uint32_t peer_qpn;
};

/*
 * A QP on @cq with the given depths (1 SGE each way, 64 B inline).
 * 0 or an errno (the QP is left NULL).
 */
int vp_ep_create(struct vp_ep *e, struct vp_dev *d, struct ibv_cq *cq,
		 uint32_t send_wr, uint32_t recv_wr);
/* INIT -> RTR -> RTS towards @peer (which must exist). 0 or an errno. */
int vp_ep_connect(struct vp_ep *e, const struct vp_ep *peer,
		  const struct vp_conn_opts *o);
/* The QP's state from ibv_query_qp, or -errno. */
int vp_qp_state(struct ibv_qp *qp);
int vp_ep_state(const struct vp_ep *e);

/* ---- memory ------------------------------------------------------------------ */

struct vp_buf {
	uint8_t *p;		/* page aligned */
	size_t len;		/* multiple of the page size */
	struct ibv_mr *mr;
};

#define VP_ACCESS_ALL	(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | \
			 IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC)

/* An anonymous page-aligned mapping of @len bytes (rounded up), touched. */
void vp_buf_alloc(struct vp_buf *b, size_t len);
/* Register the whole buffer with @access on @d's PD: 0 or an errno. */
int vp_buf_reg(struct vp_buf *b, struct vp_dev *d, int access);
/* Deregister (if registered) and unmap; returns the dereg status. */
int vp_buf_free(struct vp_buf *b);

/* Byte i of the pattern @tag (never 0x00, 0x5e or 0x77: those mark fills). */
uint8_t vp_pat(uint32_t tag, size_t i);
void vp_fill_pat(uint8_t *p, size_t len, uint32_t tag, size_t start);
/* First index where p differs from the pattern, or -1. */
long vp_diff_pat(const uint8_t *p, size_t len, uint32_t tag, size_t start);

/*
 * Guarded buffers: @len bytes at page offset @off of a fresh mapping, with
 * VP_GUARD bytes in the page either side (what a stray write past an SGE or
 * a target range would hit), registered on @pd with @access unless < 0.
 */
#define VP_GUARD	0xee
struct vp_gbuf {
	uint8_t *p;
	size_t len;
	struct ibv_mr *mr;
};

struct vp_gbuf vp_gbuf_new(struct ibv_pd *pd, size_t len, size_t off, int access);
/* Deregister (a failure is the case's: vc_fail) and unmap. */
void vp_gbuf_free(struct vp_gbuf *b);
/* vc_fail unless the @n bytes either side of b are still VP_GUARD. */
void vp_gbuf_check_guards(const struct vp_gbuf *b, size_t n, const char *what);
/* One SGE over [off, off + len) of b, with its lkey (0 if unregistered). */
struct ibv_sge vp_gbuf_sge(const struct vp_gbuf *b, size_t off, uint32_t len);
/* First index where p is not @v, or -1. */
long vp_diff_byte(const uint8_t *p, size_t len, uint8_t v);
/* A byte pattern keyed by an 8-bit tag (the verbs_errors/verbs_ex one). */
uint8_t vp_tag8(size_t i, uint8_t tag);
void vp_fill_tag8(uint8_t *p, size_t len, uint8_t tag);

const char *vp_qp_state_str(enum ibv_qp_state st);
/* vc_fail unless @qp (named @who) is in @want. */
void vc_expect_qp_state(struct ibv_qp *qp, const char *who, enum ibv_qp_state want,
			const char *what);

/* ---- posting ---------------------------------------------------------------- */

/* One signaled work request with one SGE; returns ibv_post_send's value. */
int vp_post_rdma(struct vp_ep *e, enum ibv_wr_opcode op, void *laddr,
		 uint32_t len, uint32_t lkey, uint64_t raddr, uint32_t rkey,
		 uint64_t wr_id);
int vp_post_send(struct vp_ep *e, void *laddr, uint32_t len, uint32_t lkey,
		 uint64_t wr_id);
int vp_post_recv(struct vp_ep *e, void *laddr, uint32_t len, uint32_t lkey,
		 uint64_t wr_id);

const char *vp_wc_status_str(int status);

/* ---- network namespaces ------------------------------------------------------ */

/* Enter /run/netns/@netns; returns our own namespace for vp_netns_leave().
 * Sockets opened in between stay in @netns.  Dies on failure. */
int vp_netns_enter(const char *netns);
void vp_netns_leave(int self);

/* ---- raw frame flood ------------------------------------------------------- */

/*
 * A background thread that sends MBCF frames from AF_PACKET sockets, at
 * QPs the caller names, built so that they can never change a
 * connection's state (they are all dropped, or counted, by the receiver):
 *  - a WRITE whose psn lies 2^22 behind the QP's receive sequence (a
 *    duplicate: drop_duplicate, and with ACKREQ an ACK of the real state),
 *  - an ACK (status OK) whose ack_psn lies 2^22 behind what the QP sent
 *    (ack_rx, no effect),
 *  - a WRITE naming the wrong source QP (drop_wrong_qp).
 * "2^22 behind" stays behind as long as a connection has moved fewer than
 * 2^22 frames, which every test here respects by far.
 *
 * Frames for a QP on a device go out of the netdev at the other end of
 * the veth pair, with that netdev's MAC as source: the QP's peer MAC.
 */
struct vp_flood_target {
	int sock;		/* index into the flood's sockets */
	uint8_t dst_mac[6], src_mac[6];
	uint32_t qpn, peer_qpn;
	uint32_t rcv_psn;	/* the QP's initial receive psn (peer's sq psn) */
	uint32_t snd_psn;	/* the QP's initial send psn */
};

struct vp_flood {
	pthread_t thread;
	pthread_mutex_t lock;
	int socks[2];
	int nsocks;
	struct vp_flood_target *t;	/* under lock */
	int nt, cap;
	unsigned int rate;		/* frames per second, 0 = unlimited */
	volatile bool stop;
	bool running;
	uint64_t sent, sent_dup, sent_ack, sent_wrong;
	uint64_t seed;
};

/*
 * Open one socket per (network namespace, netdev): @netns is a name under
 * /run/netns or "" for ours.  Returns the socket's index or -1.
 */
int vp_flood_add_socket(struct vp_flood *f, const char *netns, const char *ifname);
void vp_flood_start(struct vp_flood *f, unsigned int rate, uint64_t seed);
/* Aim at @e (on the device reached through socket @sock); its peer is @peer. */
void vp_flood_aim(struct vp_flood *f, int sock, const struct vp_ep *e,
		  const struct vp_ep *peer);
/* Stop aiming at QP number @qpn (0: at everything). */
void vp_flood_unaim(struct vp_flood *f, uint32_t qpn);
void vp_flood_stop(struct vp_flood *f);

/*
 * The default topology (tests/vm/lib.sh): frames for mbcf0 (on veth0)
 * leave veth1 in namespace ns1, frames for mbcf1 leave veth0.
 * Returns the socket index for a device name, -1 if unknown.
 */
int vp_flood_default_sockets(struct vp_flood *f, int *sock_mbcf0, int *sock_mbcf1);

/*
 * A doorbell as the provider rings it: a POST_SEND or POST_RECV command
 * with no work request for QP handle @handle, written to @ctx's command
 * fd.  0 or an errno.
 */
int vp_doorbell(struct ibv_context *ctx, uint32_t handle, uint32_t command);

#endif /* MBCF_VMPROG_H */
