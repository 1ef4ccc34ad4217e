// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * The device's pacer: one hrtimer per device, never one per frame or per
 * QP.  A paced QP whose next frame is not due yet (its clock is in the
 * protocol core, core/pace.c) waits here, in a tree ordered by due time;
 * the timer is armed at the earliest due time only.  When it fires, every
 * QP that has come due is served -- highest rate first, as PSPacer's
 * scheduler does -- by kicking its connection, which sends what the clock
 * allows (at most two frames back to back while the pacer is on time; what
 * its lateness owes, up to pace_slack_us, when late) and, if more waits,
 * puts the QP back in the tree.  Unpaced QPs never come here: they send
 * from their own contexts (doorbell, receive softirq, transmit work) and
 * share what the link has left.  The timer (hard irq) only wakes the
 * device's pacing thread, a kthread worker scheduled ahead of ordinary
 * threads, which serves the QPs: a soft timer would run in softirq, and
 * under receive load softirqs move to ksoftirqd, an ordinary thread that
 * busy processes delay by milliseconds.
 *
 * CPU budget: any user may pace its QPs (ibv_modify_qp_rate_limit), and
 * enough paced QPs would keep a real-time thread busy for ever.  So the
 * thread is SCHED_DEADLINE: pace_cpu_pct percent of every 10 ms, which the
 * scheduler enforces on the thread's own CPU time (the softirq work its
 * sends run inline included, unless the kernel accounts irq time apart);
 * beyond it the thread waits for the next period and the QPs for it.  A
 * changed pace_cpu_pct takes effect at the thread's next pass.  Where the
 * scheduler refuses the reservation (deadline admission: every CPU's
 * reservations together stay under the real-time limit, 95 %; a thread
 * confined to some CPUs), the thread is an ordinary one at nice 0.
 *
 * Locking: qp->lock nests outside pacer.lock (mbcf_pacer_wait is called
 * under the QP lock); the thread drops pacer.lock before it takes a QP's.
 * A QP in the tree holds no reference; the thread takes one (qp->ref) under
 * pacer.lock before it lets go of the tree, and destroy removes the QP
 * from the tree (after marking it dying, so it is never put back) before
 * it waits for the references to drain.
 */
#include <linux/hrtimer.h>
#include <linux/kthread.h>
#include <linux/rbtree.h>
#include <linux/sched.h>
#include <linux/sort.h>
#include <uapi/linux/sched/types.h>

#include "mbcf.h"

/* QPs served per run of the pacing thread; the rest in the next run. */
#define MBCF_PACER_BATCH	32

/* The thread's reservation: pace_cpu_pct percent of every period. */
#define MBCF_PACER_PERIOD_NS	(10 * NSEC_PER_MSEC)
#define MBCF_PACER_PCT_MIN	1
#define MBCF_PACER_PCT_MAX	90

static unsigned int mbcf_pace_cpu_pct = 50;
module_param_named(pace_cpu_pct, mbcf_pace_cpu_pct, uint, 0644);
MODULE_PARM_DESC(pace_cpu_pct,
		 "Pacing: percent of every 10 ms the pacing thread may run (SCHED_DEADLINE reservation, 1-90, default 50)");

static bool mbcf_pacer_less(struct rb_node *a, const struct rb_node *b)
{
	const struct mbcf_qp *x = rb_entry(a, struct mbcf_qp, pace_node);
	const struct mbcf_qp *y = rb_entry(b, struct mbcf_qp, pace_node);

	return (s64)(x->pace_due - y->pace_due) < 0;
}

/* Arm the timer for the earliest QP, unless it is armed earlier already. */
static void mbcf_pacer_arm(struct mbcf_pacer *p)
{
	struct rb_node *first = rb_first_cached(&p->due);
	u64 at;

	if (!first)
		return;
	at = rb_entry(first, struct mbcf_qp, pace_node)->pace_due;
	if (p->armed && (s64)(p->armed_at - at) <= 0)
		return;
	p->armed = true;
	p->armed_at = at;
	hrtimer_start(&p->timer, ns_to_ktime(at), HRTIMER_MODE_ABS_HARD);
}

/* Called under qp->lock: kick @qp at @due (ns, CLOCK_MONOTONIC). */
void mbcf_pacer_wait(struct mbcf_qp *qp, u64 due)
{
	struct mbcf_pacer *p = &qp->dev->pacer;

	lockdep_assert_held(&qp->lock);
	if (qp->dying)
		return;
	spin_lock(&p->lock);
	if (qp->pace_queued) {
		if (qp->pace_due == due)
			goto out;
		rb_erase_cached(&qp->pace_node, &p->due);
	}
	qp->pace_due = due;
	qp->pace_queued = true;
	rb_add_cached(&qp->pace_node, &p->due, mbcf_pacer_less);
	mbcf_pacer_arm(p);
out:
	spin_unlock(&p->lock);
}

/* Destroy: after qp->dying is set (under qp->lock), so it is never re-added. */
void mbcf_pacer_remove(struct mbcf_qp *qp)
{
	struct mbcf_pacer *p = &qp->dev->pacer;

	spin_lock_bh(&p->lock);
	if (qp->pace_queued) {
		rb_erase_cached(&qp->pace_node, &p->due);
		qp->pace_queued = false;
	}
	spin_unlock_bh(&p->lock);
}

static int mbcf_pacer_cmp_rate(const void *a, const void *b)
{
	u32 ra = READ_ONCE((*(struct mbcf_qp * const *)a)->rate_kbps);
	u32 rb = READ_ONCE((*(struct mbcf_qp * const *)b)->rate_kbps);

	return ra < rb ? 1 : ra > rb ? -1 : 0;	/* highest first */
}

/*
 * Give the pacing thread its reservation, or nice 0 if the scheduler
 * refuses it.  Process context: at creation, and from the thread itself
 * when pace_cpu_pct has changed.
 */
static void mbcf_pacer_sched(struct mbcf_pacer *p)
{
	u32 want = READ_ONCE(mbcf_pace_cpu_pct);
	u32 pct = clamp_t(u32, want, MBCF_PACER_PCT_MIN, MBCF_PACER_PCT_MAX);
	struct sched_attr attr = {
		.size = sizeof(attr),
		.sched_policy = SCHED_DEADLINE,
		.sched_runtime = MBCF_PACER_PERIOD_NS / 100 * pct,
		.sched_deadline = MBCF_PACER_PERIOD_NS,
		.sched_period = MBCF_PACER_PERIOD_NS,
	};
	int err;

	p->cpu_pct = want;
	err = sched_setattr_nocheck(p->worker->task, &attr);
	if (!err)
		return;
	sched_set_normal(p->worker->task, 0);
	pr_warn_ratelimited("mbcf: %s: no CPU reservation for pacing (%d): an ordinary thread\n",
			    p->worker->task->comm, err);
}

/* Serve every QP that has come due, highest rate first (pacing thread). */
static void mbcf_pacer_work(struct kthread_work *w)
{
	struct mbcf_pacer *p = container_of(w, struct mbcf_pacer, work);
	struct mbcf_qp *batch[MBCF_PACER_BATCH];
	u64 now = mbcf_proto_now();
	struct rb_node *first;
	struct mbcf_qp *qp;
	int n = 0, i;

	if (unlikely(READ_ONCE(mbcf_pace_cpu_pct) != p->cpu_pct))
		mbcf_pacer_sched(p);
	spin_lock_bh(&p->lock);
	p->armed = false;
	while (n < MBCF_PACER_BATCH && (first = rb_first_cached(&p->due))) {
		qp = rb_entry(first, struct mbcf_qp, pace_node);
		if ((s64)(qp->pace_due - now) > 0)
			break;
		rb_erase_cached(first, &p->due);
		qp->pace_queued = false;
		/* destroy removes a QP before its references drain: one in
		 * the tree always has its published reference */
		if (refcount_inc_not_zero(&qp->ref->users))
			batch[n++] = qp;
	}
	spin_unlock_bh(&p->lock);

	sort(batch, n, sizeof(batch[0]), mbcf_pacer_cmp_rate, NULL);
	for (i = 0; i < n; i++)
		mbcf_qp_paced(batch[i]);	/* drops the reference */

	spin_lock_bh(&p->lock);
	mbcf_pacer_arm(p);	/* the earliest left, maybe due already */
	spin_unlock_bh(&p->lock);
}

/* Hard irq: wake the pacing thread. */
static enum hrtimer_restart mbcf_pacer_fire(struct hrtimer *t)
{
	struct mbcf_pacer *p = container_of(t, struct mbcf_pacer, timer);

	kthread_queue_work(p->worker, &p->work);
	return HRTIMER_NORESTART;
}

int mbcf_pacer_init(struct mbcf_pacer *p, const char *name)
{
	spin_lock_init(&p->lock);
	p->due = RB_ROOT_CACHED;
	mbcf_hrtimer_setup(&p->timer, mbcf_pacer_fire, CLOCK_MONOTONIC, HRTIMER_MODE_ABS_HARD);
	kthread_init_work(&p->work, mbcf_pacer_work);
	p->worker = kthread_create_worker(0, "mbcf_pace/%s", name);
	if (IS_ERR(p->worker)) {
		int err = PTR_ERR(p->worker);

		p->worker = NULL;
		return err;
	}
	mbcf_pacer_sched(p);
	return 0;
}

/* Device teardown: every QP is gone, so nothing re-arms the timer. */
void mbcf_pacer_fini(struct mbcf_pacer *p)
{
	hrtimer_cancel(&p->timer);
	if (p->worker)
		kthread_destroy_worker(p->worker);	/* flushes the work */
	p->worker = NULL;
	WARN_ON_ONCE(!RB_EMPTY_ROOT(&p->due.rb_root));
}

/* The rates modify_qp accepts, kbit/s (reported as packet_pacing_caps). */
u32 mbcf_pacer_max_kbps(const struct mbcf_dev *dev)
{
	u32 mbps = READ_ONCE(dev->link_mbps);

	/* unknown link speed: allow up to 100 Gbit/s */
	if (!mbps || mbps > MBCF_PACE_MAX_KBPS / 1000)
		return MBCF_PACE_MAX_KBPS;
	return mbps * 1000;
}
