#!/bin/bash
# Guest test: UD queue pairs, exact values and bad input (docs/protocol.md 15).
#  - progs/ud_test.c, mbcf1 (senders, run in ns1 where its GIDs live) ->
#    mbcf0 (receivers): data of 1, 100 and active_mtu bytes with and without
#    immediate (completions, GRH, payload exact), oversize (LOC_LEN_ERR on the
#    send), wrong Q_Key (lost, drop_bad_qkey + 1), a receive too small
#    (the datagram dropped, the receive kept), an AH to a GID nobody has
#    (sent, lost), another PD's AH (LOC_QP_OP_ERR); see the program's header;
#  - around it, mbcf0's counters grow by exactly what those cases make:
#    drop_bad_qkey 1, drop_bad_length 1 (the receive too small), and mbcf1's
#    tx_ud_oversize by exactly 4; veth0/veth1 have MTU 1500 (the program's
#    size cases depend on it);
#  - afterwards no QP, AH (when `rdma resource` shows them), CQ, PD or MR is
#    left on mbcf0/mbcf1, and the kernel log stays clean.
#   tests/vm/run.sh --build BUILD tests/vm/ud.sh [PATH/TO/mbcf_ud_test]
set -u
# shellcheck source=lib.sh
. "${MBCF_VM_LIB:-$(dirname "$0")/lib.sh}"

failed=0
check() { "$@" || failed=$((failed + 1)); }

vm_require_mbcf
prog=$(vm_test_prog mbcf_ud_test "${1:-}") || exit 1

# ctr DEV NAME: protocol counter NAME of DEV/1; ctr1 NAME: mbcf1's, from ns1
# (in_ns1 runs a program, not a shell function).
ctr() { vm_dev_ctr "$1" "$2" 2>/dev/null; }
ctr1() {
	in_ns1 rdma statistic show link mbcf1/1 2>/dev/null |
		awk -v n="$1" '{ for (i = 1; i < NF; i++) if ($i == n) print $(i + 1) }'
}

# types: the object types `rdma resource show` counts (ah only if listed).
types="qp cq pd mr"
if rdma resource show 2>/dev/null | grep -qw ah; then
	types="qp ah cq pd mr"
else
	vm_log "rdma resource show lists no ah: AH count not checked"
fi
objects_none() {
	local t d
	for t in $types; do
		for d in mbcf0 mbcf1; do
			check assert_eq 0 "$(vm_res "$t" "$d")" "$d $t objects $1"
		done
	done
}

objects_none "at start"
# ud_test's size cases assume MTU 1500 (active_mtu 1024; a frame: MTU - 72)
check assert_eq 1500 "$(cat /sys/class/net/veth0/mtu)" "veth0 MTU"
check assert_eq 1500 "$(in_ns1 cat /sys/class/net/veth1/mtu)" "veth1 MTU"
q0=$(ctr mbcf0 drop_bad_qkey)
e0=$(ctr mbcf0 drop_bad_length)
o0=$(ctr1 tx_ud_oversize)

vm_phase "ud_test mbcf1 -> mbcf0"
vm_dmesg_mark
t0=$EPOCHREALTIME
out=$(in_ns1 timeout 300 "$prog" -a mbcf1 -b mbcf0 2>&1)
rc=$?
printf '%s\n' "$out"
vm_log "ud_test: rc $rc in $(vm_elapsed_since "$t0") s"
check assert_eq 0 "$rc" "ud_test: failed checks"
check assert_match '^ud_test: 0 failure' "$out" "ud_test ran to the end"

check assert_eq 1 "$(($(ctr mbcf0 drop_bad_qkey) - q0))" "mbcf0 drop_bad_qkey delta"
check assert_eq 1 "$(($(ctr mbcf0 drop_bad_length) - e0))" "mbcf0 drop_bad_length delta"
check assert_eq 4 "$(($(ctr1 tx_ud_oversize) - o0))" "mbcf1 tx_ud_oversize delta"
check assert_eq 0 "$(ctr mbcf0 tx_ud_oversize)" "mbcf0 tx_ud_oversize (it sent no datagram)"

objects_none "after ud_test"
check vm_dmesg_check

if [ "$failed" != 0 ]; then
	echo "ud: $failed check(s) failed"
	exit 1
fi
echo "ud: all checks passed"
