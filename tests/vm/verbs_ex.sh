#!/bin/bash
# Guest test: the extended verbs surface (progs/verbs_ex.c): the
# work-request API, extended CQs, memory windows, UC QPs (also under netem
# loss on veth1), with mbcf1 (ns1) as the requester and mbcf0 the
# responder, then in loopback on mbcf0.  Afterwards: the kernel log clean,
# no mbcf resource left, pinned pages back to the baseline, both links
# deleted and the module unloaded cleanly.
#   tests/vm/run.sh --build BUILD tests/vm/verbs_ex.sh [PATH/TO/mbcf_verbs_ex
#       [--seed N] [--rxe] [CASE|GROUP...]]
# --seed N repeats a run's random choices (each run prints its seed);
# CASEs or groups (wr cq mw uc qp) run only those (default: all); --rxe also
# runs them on rxe0 (loopback), for comparison only (no verdict).
# One case by hand in a guest (minimal reproduction of a failure):
#   mbcf_verbs_ex -a mbcf1 -b mbcf0 -s SEED mw_type2
set -u
# shellcheck source=lib.sh
. "${MBCF_VM_LIB:-$(dirname "$0")/lib.sh}"

failed=0
check() { "$@" || failed=$((failed + 1)); }

vm_require_mbcf
prog=$(vm_test_prog mbcf_verbs_ex "${1:-}") || exit 1
shift
seed=$(date +%s) rxe=0 cases=()
while [ $# -gt 0 ]; do
	case "$1" in
	--seed) seed=$2; shift ;;
	--rxe) rxe=1 ;;
	*) cases+=("$1") ;;
	esac
	shift
done
[ ${#cases[@]} -gt 0 ] || cases=(all)
modprobe sch_netem || vm_die "no sch_netem"

# run_pair A B [REFERENCE]: every case, A the requester; a REFERENCE run
# (rxe) only reports.
run_pair() {
	local a=$1 b=$2 ref=${3:-} out rc line t0=$SECONDS opt=()
	vm_phase "verbs_ex $a -> $b"
	# rxe's extended CQ in rdma-core 44 is broken: compare through ibv_poll_cq
	[ -n "$ref" ] && opt=(-P)
	out=$(timeout 600 "$prog" -a "$a" -b "$b" -s "$seed" "${opt[@]}" "${cases[@]}" 2>&1)
	rc=$?
	printf '%s\n' "$out"
	vm_log "verbs_ex $a -> $b: $((SECONDS - t0)) s"
	if [ -n "$ref" ]; then
		vm_log "reference run on $a: exit status $rc (not a verdict on mbcf)"
		return 0
	fi
	while IFS= read -r line; do
		case "$line" in
		"FAIL "*) line=${line#FAIL }; echo "FAIL: ${line%% *} [$a-$b]" >&2 ;;
		esac
	done <<<"$out"
	[ "$rc" = 124 ] && echo "FAIL: verbs_ex $a-$b timed out (hang)" >&2
	# the netem qdisc must be gone whatever happened
	in_ns1 tc qdisc del dev veth1 root 2>/dev/null
	assert_eq 0 "$rc" "verbs_ex $a-$b exit status (failed cases)"
}

base_pins=$(vm_pins_held)
vm_log "pinned pages at start: $base_pins"

check run_pair mbcf1 mbcf0
check vm_wait_port mbcf0 20
check vm_wait_port mbcf1 20
check run_pair mbcf0 mbcf0
[ "$rxe" = 1 ] && run_pair rxe0 rxe0 reference

# A process killed while windows of both types are bound and writes go
# through them: its teardown must release everything (checked below).
vm_phase "holder of bound windows, SIGKILLed"
"$prog" -a mbcf1 -b mbcf0 hold >/tmp/vx-hold.log 2>&1 &
hpid=$!
end=$((SECONDS + 60))
until grep -q '^ready\|^setup\|failed' /tmp/vx-hold.log; do
	[ "$SECONDS" -ge "$end" ] && break
	kill -0 "$hpid" 2>/dev/null || break
	sleep 0.2
done
sleep 1
cat /tmp/vx-hold.log
check assert_eq ready "$(cat /tmp/vx-hold.log)" "holder of bound windows: ready, writes going on"
check assert_eq 2 "$(vm_res mr)" "MRs while held"
# 3 pages at offset 64 (4 pages) on mbcf0, 16 KiB (4 pages) on mbcf1
check assert_eq 8 "$(($(vm_pins_held) - base_pins))" "pages pinned while held"
kill -KILL "$hpid"
wait "$hpid" 2>/dev/null

# Everything the runs made is gone (the process has exited).
vm_wait_clean "$base_pins" 30
q=$VM_QP c=$VM_CQ m=$VM_MR p=$VM_PD pins=$VM_PINS
check assert_eq 0 "$q" "QPs on mbcf0/1 at the end"
check assert_eq 0 "$c" "CQs on mbcf0/1 at the end"
check assert_eq 0 "$m" "MRs on mbcf0/1 at the end"
check assert_eq 0 "$p" "PDs on mbcf0/1 at the end"
check assert_eq "$base_pins" "$pins" "pinned pages at the end"
check assert_eq 0 "$(vm_res ctx)" "contexts on mbcf0/1 at the end"

vm_log "mbcf0: $(rdma statistic show link mbcf0/1 | cut -c1-600)"
vm_log "mbcf1: $(rdma statistic show link mbcf1/1 | cut -c1-600)"
check assert_cmd rdma link delete mbcf0
check assert_cmd in_ns1 rdma link delete mbcf1
check assert_eq "" "$(rdma link show 2>/dev/null | grep mbcf)" "no mbcf link left"
check assert_cmd rmmod mbcf
check vm_dmesg_check

if [ "$failed" != 0 ]; then
	echo "verbs_ex: $failed check(s) failed"
	exit 1
fi
echo "verbs_ex: all checks passed"
