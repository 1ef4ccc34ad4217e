#!/bin/bash
# Guest test: what the device reports is what it does (progs/verbs_query.c):
# limits at their boundaries, the port, ibv_query_qp after every transition
# of an RC and a UC QP, and ibv_resize_cq up and down with completions
# waiting and in flight -- across mbcf1 -> mbcf0 and in loopback on mbcf0.
#   tests/vm/run.sh --build BUILD tests/vm/query.sh [PATH/TO/mbcf_verbs_query]
set -u
# shellcheck source=lib.sh
. "${MBCF_VM_LIB:-$(dirname "$0")/lib.sh}"

failed=0
check() { "$@" || failed=$((failed + 1)); }

vm_require_mbcf
prog=$(vm_test_prog mbcf_verbs_query "${1:-}") || exit 1
base_pins=$(vm_pins_held)

run() { # A B: every check, in the namespace of A's netdev
	local out rc
	vm_phase "verbs_query $1 -> $2"
	if [ "$1" = mbcf1 ]; then
		out=$(in_ns1 timeout 400 "$prog" -a "$1" -b "$2" 2>&1)
	else
		out=$(timeout 400 "$prog" -a "$1" -b "$2" 2>&1)
	fi
	rc=$?
	printf '%s\n' "$out"
	assert_eq 0 "$rc" "verbs_query $1 -> $2: failed checks"
}

# The per-QP sender state a connected QP exports (kmod/stats.c), read with
# `rdma -dd res show qp` while ib_write_bw streams from mbcf1 to mbcf0:
# the window within its ceiling, a measured round trip, a timeout no
# shorter than perftest's (timeout 14: 4.096 us << 14 = 67108 us, the
# minimum: docs/protocol.md 7.1), frames sent, at most a ring's worth of
# requests taken by one call (sq_pull_max); the kernel's GSI QP, a
# datagram QP, has only sq_pull_max, at most a transmit burst (64).
qp_details() {
	local srv cli out i
	vm_phase "per-QP sender state (rdma -dd res show qp) during ib_write_bw"
	ib_write_bw -d mbcf0 -x 0 -F -s 65536 -D 2 --run_infinitely >/tmp/qd-srv.log 2>&1 &
	srv=$!
	(vm_retry 50 0.2 in_ns1 ib_write_bw -d mbcf1 -x 0 -F -s 65536 -D 2 --run_infinitely \
		"$VM_IP0" >/tmp/qd-cli.log 2>&1) &
	cli=$!
	for ((i = 0; i < 120; i++)); do
		out=$(rdma -j -dd res show qp link mbcf1/1 2>&1)
		grep -q '"drv_srtt_us":[1-9]' <<<"$out" && break
		sleep 0.5
	done
	printf '%s\n' "$out"
	python3 - "$out" <<'PY'
import json, sys
qps = json.loads(sys.argv[1])
rc = [q for q in qps if q.get("type") == "RC" and q.get("comm") == "ib_write_bw"]
gsi = [q for q in qps if q.get("type") == "GSI"]
bad = []
if len(rc) != 1:
    bad.append(f"{len(rc)} RC QPs of ib_write_bw on mbcf1, expected 1")
for q in rc:
    if not 4 <= q.get("drv_wnd", -1) <= q.get("drv_wnd_max", -1):
        bad.append(f"window {q.get('drv_wnd')} outside 4..{q.get('drv_wnd_max')}")
    if q.get("drv_srtt_us", 0) <= 0:
        bad.append(f"no round trip measured: srtt {q.get('drv_srtt_us')} us")
    if q.get("drv_rto_us", 0) < 67108:
        bad.append(f"rto {q.get('drv_rto_us')} us below the verbs timeout 67108 us")
    if not 0 <= q.get("drv_retransmit_frames", -1) <= q.get("drv_tx_frames", 0) or \
       q.get("drv_tx_frames", 0) <= 0:
        bad.append(f"tx_frames {q.get('drv_tx_frames')}, retransmitted {q.get('drv_retransmit_frames')}")
for q in gsi:
    if any(k.startswith("drv_") and k != "drv_sq_pull_max" for k in q):
        bad.append("the GSI QP has connection details")
    if not 0 <= q.get("drv_sq_pull_max", -1) <= 64:
        bad.append(f"the GSI QP's sq_pull_max {q.get('drv_sq_pull_max')} not in 0..64")
for b in bad:
    print("FAIL: per-QP details:", b)
if not bad:
    print("ok: per-QP details: window %d of %d, srtt %d us, rto %d us, %d frames sent" %
          (rc[0]["drv_wnd"], rc[0]["drv_wnd_max"], rc[0]["drv_srtt_us"], rc[0]["drv_rto_us"],
           rc[0]["drv_tx_frames"]))
sys.exit(1 if bad else 0)
PY
	local rc=$?
	kill "$srv" 2>/dev/null
	pkill -f "ib_write_bw -d mbcf1" 2>/dev/null
	wait "$srv" "$cli" 2>/dev/null
	vm_wait_clean "$base_pins" 30 || true
	return "$rc"
}

check run mbcf1 mbcf0
check run mbcf0 mbcf0
check qp_details
check assert_eq 0 "$(vm_res qp)" "QPs left on mbcf0/1"
check assert_eq 0 "$(vm_res mr)" "MRs left on mbcf0/1"
check assert_eq "$base_pins" "$(vm_pins_held)" "pinned pages after the runs"
check vm_dmesg_check

[ "$failed" = 0 ] || { echo "query: $failed check(s) failed"; exit 1; }
echo "query: all checks passed"
