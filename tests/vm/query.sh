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

check run mbcf1 mbcf0
check run mbcf0 mbcf0
check assert_eq 0 "$(vm_res qp)" "QPs left on mbcf0/1"
check assert_eq 0 "$(vm_res mr)" "MRs left on mbcf0/1"
check assert_eq "$base_pins" "$(vm_pins_held)" "pinned pages after the runs"
check vm_dmesg_check

[ "$failed" = 0 ] || { echo "query: $failed check(s) failed"; exit 1; }
echo "query: all checks passed"
