#!/bin/bash
# Guest test: memory regions on mbcf0 through the installed provider.
# Registration, refusals and key reuse (progs/mr_test.c), then balance:
# every pinned page is unpinned, after deregistration and after SIGKILL of
# a process holding MRs, and the device goes away without a warning.
#   tests/vm/run.sh --build BUILD tests/vm/mr.sh [PATH/TO/mbcf_mr_test]
set -u
# shellcheck source=lib.sh
. "${MBCF_VM_LIB:-$(dirname "$0")/lib.sh}"

failed=0
check() { "$@" || failed=$((failed + 1)); }

vm_have_mbcf || vm_die "mbcf module is not installed in the guest"
[ "${VM_MBCF:-0}" = 1 ] || vm_die "topology did not create mbcf0/mbcf1"
prog=$(vm_test_prog mbcf_mr_test "${1:-}") || exit 1

base=$(vm_pins_held)
vm_log "pinned pages at start: $base"
check assert_eq 0 "$(vm_res mr mbcf0)" "mbcf0 MRs at start"

# --- registration, refusals, key reuse -----------------------------------------
t0=$EPOCHREALTIME
out=$("$prog" -d mbcf0 check 2>&1)
rc=$?
printf '%s\n' "$out"
vm_log "mr_test check: rc $rc in $(vm_elapsed_since "$t0") s"
check assert_eq 0 "$rc" "mr_test check exit status"
check assert_eq "$base" "$(vm_pins_held)" "pinned pages after mr_test check"
check assert_eq 0 "$(vm_res mr mbcf0)" "mbcf0 MRs after mr_test check"

# --- a process killed with live MRs releases them all ----------------------------
nmr=1000
log=/var/tmp/mr_hold.log
"$prog" -d mbcf0 hold "$nmr" >"$log" 2>&1 &
pid=$!
for _ in $(seq 300); do
	grep -q '^ready\|^FAIL' "$log" && break
	sleep 0.2
done
cat "$log"
pages=$(awk '$1 == "ready" { print $2 }' "$log")
check assert_match '^[0-9]+$' "$pages" "hold: pages pinned (VmPin)"
check assert_eq "$nmr" "$(vm_res mr mbcf0)" "mbcf0 MRs while held"
check assert_eq "$((base + ${pages:-0}))" "$(vm_pins_held)" "pinned pages while held = VmPin of the holder"
t0=$EPOCHREALTIME
kill -KILL "$pid"
wait "$pid" 2>/dev/null
vm_log "holder with $nmr MRs gone in $(vm_elapsed_since "$t0") s"
check assert_eq 0 "$(vm_res mr mbcf0)" "mbcf0 MRs after SIGKILL"
check assert_eq 0 "$(vm_res pd mbcf0)" "mbcf0 PDs after SIGKILL"
check assert_eq 0 "$(vm_res ctx mbcf0)" "mbcf0 contexts after SIGKILL"
check assert_eq "$base" "$(vm_pins_held)" "pinned pages after SIGKILL"

# --- device removal checks the module's own MR and pinned-page counters ----------
vm_dmesg_mark
check assert_cmd rdma link delete mbcf0
check assert_cmd rmmod mbcf
check vm_dmesg_check

if [ "$failed" != 0 ]; then
	echo "mr: $failed check(s) failed"
	exit 1
fi
echo "mr: all checks passed"
