// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
// Callbacks of the fake environment (see harness.h).
#include "harness.h"

#include <cstdlib>

namespace mbcft {
namespace {

Env *E(void *env) { return static_cast<Env *>(env); }

int xmit(void *env, const u8 *hdr, u32 hdr_len, const mbcf_payload *pl)
{
	Env *e = E(env);
	std::vector<uint8_t> fr(hdr, hdr + hdr_len);

	if (e->busy > 0) {
		e->busy--;
		return 1;
	}
	if (pl->kind == MBCF_PL_WR && e->fault_cookie &&
	    pl->cookie == e->fault_cookie)
		return MBCF_XMIT_FAULT;	// its buffer is gone
	if (pl->kind == MBCF_PL_WR) {
		auto &buf = e->local.at(pl->cookie);
		fr.insert(fr.end(), buf.begin() + pl->offset,
			  buf.begin() + pl->offset + pl->len);
	} else if (pl->kind == MBCF_PL_TARGET) {
		const uint8_t *src = e->target(pl->rkey, pl->va);
		// region deregistered under the response: nothing is sent
		if (!src || e->target_frames == 0)
			return MBCF_XMIT_FAULT;
		if (e->target_frames > 0)
			e->target_frames--;
		fr.insert(fr.end(), src, src + pl->len);
	}
	e->out.push_back(std::move(fr));
	return 0;
}

int target_write(void *env, u32 rkey, u64 va, const u8 *src, u32 len)
{
	int st;
	Region *r = E(env)->find(rkey, va, len, ACC_WRITE, &st);

	if (!r)
		return st;
	E(env)->target_writes++;
	memcpy(r->bytes() + (va - r->base), src, len);
	return MBCF_ST_OK;
}

int target_check_write(void *env, u32 rkey, u64 va, u32 len)
{
	int st;

	E(env)->find(rkey, va, len, ACC_WRITE, &st);
	return st;
}

int target_check_read(void *env, u32 rkey, u64 va, u32 len)
{
	int st;

	E(env)->find(rkey, va, len, ACC_READ, &st);
	return st;
}

int target_atomic(void *env, u8 op, u32 rkey, u64 va, u64 swap_add, u64 compare,
		  u64 *orig)
{
	int st;
	Region *r = E(env)->find(rkey, va, 8, ACC_ATOMIC, &st);

	if (!r)
		return st;
	E(env)->atomics++;
	uint64_t *p = reinterpret_cast<uint64_t *>(r->bytes() + (va - r->base));
	if (op == MBCF_OP_FETCH_ADD) {
		*orig = __atomic_fetch_add(p, swap_add, __ATOMIC_SEQ_CST);
	} else {
		uint64_t exp = compare;
		__atomic_compare_exchange_n(p, &exp, swap_add, false,
					    __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
		*orig = exp;
	}
	return MBCF_ST_OK;
}

int recv_claim(void *env, u64 *cookie, u32 *cap)
{
	Env *e = E(env);

	if (e->claim_bad)
		return MBCF_CLAIM_BAD;
	if (e->recvs.empty())
		return MBCF_CLAIM_NONE;
	*cookie = e->recvs.front().cookie;
	*cap = e->recvs.front().cap;
	e->recvs.pop_front();
	e->recv_buf[*cookie].clear();
	return MBCF_CLAIM_OK;
}

int recv_peek(void *env, u32 *cap)
{
	Env *e = E(env);

	if (e->claim_bad)
		return MBCF_CLAIM_BAD;
	if (e->recvs.empty())
		return MBCF_CLAIM_NONE;
	*cap = e->recvs.front().cap;
	return MBCF_CLAIM_OK;
}

int recv_write(void *env, u64 cookie, u32 offset, const u8 *src, u32 len)
{
	Env *e = E(env);
	auto &b = e->recv_buf[cookie];

	if (e->recv_write_fail_at >= 0 && offset + len > (u32)e->recv_write_fail_at)
		return 1;
	if (b.size() < offset + len)
		b.resize(offset + len);
	memcpy(b.data() + offset, src, len);
	return 0;
}

int resp_data(void *env, u64 cookie, u32 offset, const u8 *src, u32 len)
{
	auto &b = E(env)->local.at(cookie);

	if (offset + len > b.size())
		return 1;
	memcpy(b.data() + offset, src, len);
	return 0;
}

int complete(void *env, const mbcf_cqe *cqe)
{
	Env *e = E(env);

	if (e->cq_room == 0)
		return 1;	// overrun: lost
	if (e->cq_room > 0)
		e->cq_room--;
	if (cqe->flags & MBCF_CQE_RECV)
		e->rcqes.push_back(*cqe);
	else
		e->cqes.push_back(*cqe);
	e->allcqes.push_back(*cqe);
	return 0;
}

void timer(void *env, u64 at)
{
	E(env)->timer_at = at;
	E(env)->timer_calls++;
}

void error(void *env, u8 st)
{
	E(env)->errors++;
	E(env)->error_status = st;
}

void xmit_flush(void *env)
{
	E(env)->flushes++;
}

int local(void *env, u64 cookie)
{
	Env *e = E(env);
	auto it = e->local_status.find(cookie);

	e->locals_run.push_back(cookie);
	return it == e->local_status.end() ? (int)MBCF_WC_SUCCESS : it->second;
}

int invalidate(void *env, u32 rkey)
{
	Env *e = E(env);

	for (auto it = e->inv_keys.begin(); it != e->inv_keys.end(); ++it) {
		if (*it == rkey) {
			e->inv_keys.erase(it);
			e->invalidated.push_back(rkey);
			return MBCF_ST_OK;
		}
	}
	return MBCF_ST_REMOTE_INVALID_REQUEST;
}

// The FIFO's memory: one thread, plain accesses (tests/unit/test_fifo.cc
// has the atomic ones).
u64 fifo_head(void *env) { return E(env)->fifo_u64(MBCF_FIFO_OFF_HEAD); }
u64 fifo_tail(void *env) { return E(env)->fifo_u64(MBCF_FIFO_OFF_TAIL); }

u64 fifo_cmpxchg(void *env, u64 old, u64 nt)
{
	u64 &t = E(env)->fifo_u64(MBCF_FIFO_OFF_TAIL), v = t;

	if (v == old)
		t = nt;
	return v;
}

void fifo_set_wait(void *env)
{
	u32 one = 1;

	memcpy(E(env)->fifo_ctrl() + MBCF_FIFO_OFF_WAIT, &one, 4);
}

int fifo_write(void *env, u32 off, const u8 *src, u32 len)
{
	Env *e = E(env);

	if ((u64)off + len > e->fifo_size)
		abort();	/* the core asked outside the area */
	memcpy(e->fifo_area() + off, src, len);
	return 0;
}

void fifo_publish(void *env, u32 off, u32 word)
{
	Env *e = E(env);

	if ((u64)off + 4 > e->fifo_size)
		abort();
	memcpy(e->fifo_area() + off, &word, 4);
}

const mbcf_fifo_mem kFifoMem = {
	fifo_head, fifo_tail, fifo_cmpxchg, fifo_set_wait, fifo_write, fifo_publish,
};

int fifo_get(void *env, u32 fkey, mbcf_fifo *f)
{
	Env *e = E(env);

	if (!e->fifo_key || fkey != e->fifo_key)
		return MBCF_FIFO_BAD_KEY;
	e->fifo_gets++;
	f->size = e->fifo_size;
	f->flags = e->fifo_flags;
	f->mem = &kFifoMem;
	f->env = e;
	return MBCF_FIFO_OK;
}

void fifo_put(void *env, mbcf_fifo *f)
{
	E(env)->fifo_puts++;
}

}  // namespace

const mbcf_ops kOps = {
	.xmit = xmit,
	.xmit_flush = xmit_flush,
	.target_write = target_write,
	.target_check_write = target_check_write,
	.target_check_read = target_check_read,
	.target_atomic = target_atomic,
	.recv_claim = recv_claim,
	.recv_peek = recv_peek,
	.recv_write = recv_write,
	.resp_data = resp_data,
	.complete = complete,
	.timer = timer,
	.error = error,
	.local = local,
	.invalidate = invalidate,
	.fifo_get = fifo_get,
	.fifo_put = fifo_put,
};

}  // namespace mbcft
