#!/bin/bash
# Guest test: verbs error paths with exact completion statuses, QP states,
# flushes and target memory (progs/verbs_errors.c), on mbcf0 <-> mbcf1
# across the veth pair and on mbcf0 in loopback; then the kernel log.
#   tests/vm/run.sh --build BUILD tests/vm/errors.sh [PATH/TO/mbcf_verbs_errors]
# One case by hand in a guest (minimal reproduction of a failure):
#   mbcf_verbs_errors -a mbcf0 -b mbcf0 events      (loopback)
#   mbcf_verbs_errors -a mbcf0 -b mbcf1 bad_lkey    (across the veth pair)
set -u
# shellcheck source=lib.sh
. "${MBCF_VM_LIB:-$(dirname "$0")/lib.sh}"

failed=0
check() { "$@" || failed=$((failed + 1)); }

vm_require_mbcf
prog=$(vm_test_prog mbcf_verbs_errors "${1:-}") || exit 1

# counters DEV: the nonzero protocol counters of DEV/1, one line.
counters() {
	rdma statistic show link "$1/1" 2>/dev/null |
		awk '{ for (i = 1; i < NF; i++) if ($(i + 1) ~ /^[0-9]+$/ && $(i + 1) != 0 && $i != "link") printf "%s=%s ", $i, $(i + 1) }'
	echo
}

# run_pair A B: every case on the pair A (requester) - B (responder).
run_pair() {
	local a=$1 b=$2 out rc line name
	vm_phase "verbs_errors $a-$b"
	out=$(timeout 300 "$prog" -a "$a" -b "$b" all 2>&1)
	rc=$?
	printf '%s\n' "$out"
	while IFS= read -r line; do
		case "$line" in
		"FAIL "*)
			name=${line#FAIL }
			echo "FAIL: ${name%% *} [$a-$b]" >&2
			;;
		esac
	done <<<"$out"
	[ "$rc" = 124 ] && echo "FAIL: verbs_errors $a-$b timed out (hang)" >&2
	assert_eq 0 "$rc" "verbs_errors $a-$b exit status (failed cases)"
}

check run_pair mbcf0 mbcf1
check vm_wait_port mbcf0 20
check vm_wait_port mbcf1 20
check run_pair mbcf0 mbcf0

vm_log "mbcf0 counters: $(counters mbcf0)"
vm_log "mbcf1 counters: $(counters mbcf1)"
check vm_dmesg_check

if [ "$failed" != 0 ]; then
	echo "errors: $failed check(s) failed"
	exit 1
fi
echo "errors: all checks passed"
