#!/bin/bash
# Guest test: hostile user space against mbcf's mapped rings
# (progs/ring_attack.c).  One pass with the attacked QPs on mbcf1 and
# their peers on mbcf0 (across the veth pair), one in loopback on mbcf0,
# while another process (`good` mode) moves data on its own pair and checks
# every byte.  Then: the other process finished exact and made progress
# during each pass, every frame got one verdict counter and none was
# malformed, no mbcf QP/CQ/MR/PD is left, pinned pages are back to the
# baseline, both links delete, the module unloads, the kernel log is clean.
#   tests/vm/run.sh --build BUILD tests/vm/rings.sh [PROG [SEED [CASE...]]]
# PROG: the mbcf_ring_attack binary (default: the build's); SEED (default:
# $RA_SEED, else random; printed); CASEs (default: $RA_CASES, else all);
# RA_DOORBELLS: doorbells per storm (default 1000000).
# One case by hand in a guest (minimal reproduction of a failure):
#   mbcf_ring_attack -a mbcf1 -b mbcf0 -s SEED storm_broken
set -u
# shellcheck source=lib.sh
. "${MBCF_VM_LIB:-$(dirname "$0")/lib.sh}"

failed=0
check() { "$@" || failed=$((failed + 1)); }

vm_require_mbcf
prog=$(vm_test_prog mbcf_ring_attack "${1:-}") || exit 1
seed=${2:-${RA_SEED:-$(((RANDOM << 15) | RANDOM))}}
cases=${RA_CASES:-all}
[ $# -gt 2 ] && cases=${*:3}
doorbells=${RA_DOORBELLS:-1000000}
keys=/run/ra-keys
status=/run/ra-status
echo "rings: seed $seed (rerun with RA_SEED=$seed, or in a guest:" \
	"$prog -a mbcf1 -b mbcf0 -s $seed CASE)"

# counter DEV NAME: one protocol counter of DEV/1.
counters_of() {
	rdma statistic show link "$1/1" 2>/dev/null
}

# verdicts DEV: "rx_frames sum-of-verdicts malformed-drops" of DEV
# (include/mbcf/counters.h: every received frame gets exactly one verdict).
verdicts() {
	counters_of "$1" | awk '{
		for (i = 1; i < NF; i++) {
			k = $i; v = $(i + 1)
			if (v !~ /^[0-9]+$/) continue
			if (k == "rx_frames") rx = v
			if (k == "rx_accepted" || k == "ack_rx" || k == "nak_rx" ||
			    k == "lost_rx" || k == "stop_rx" || k == "go_rx" ||
			    k == "remote_errors" || k ~ /^drop_/) sum += v
			if (k ~ /^drop_(malformed|truncated|bad_version|bad_opcode|bad_length)$/)
				bad += v
		}
	} END { print rx + 0, sum + 0, bad + 0 }'
}

good_count() {
	local n=0 _
	[ -r "$status" ] && read -r n _ <"$status"
	echo "${n:-0}"
}

base_pins=$(vm_pins_held)
vm_log "pinned pages at start: $base_pins"
check assert_eq 0 "$(vm_res qp)" "mbcf QPs at start"

# --- the other process ------------------------------------------------------------
vm_phase "the other process: an honest pair mbcf1 -> mbcf0"
rm -f "$keys" "$status"
"$prog" -a mbcf1 -b mbcf0 -s "$seed" good "$keys" "$status" >/run/ra-good.log 2>&1 &
gpid=$!
end=$((SECONDS + 60))
until [ -s "$keys" ] && [ "$(good_count)" -gt 0 ]; do
	if [ "$SECONDS" -ge "$end" ] || ! kill -0 "$gpid" 2>/dev/null; then
		cat /run/ra-good.log
		vm_die "the other process did not start moving data"
	fi
	sleep 0.2
done
vm_log "$(head -n 1 /run/ra-good.log); keys: $(tr '\n' ' ' <"$keys")"

# --- the attacks ---------------------------------------------------------------------
# run_pass A B DOORBELLS CASE...: the cases with the attacked QPs on A,
# their peers on B, DOORBELLS per storm.  The program's lines show as they
# come (a hang is visible) and are kept for the verdicts.
run_pass() {
	local a=$1 b=$2 db=$3 rc line before after t0=$SECONDS
	shift 3
	vm_phase "ring_attack $a-$b"
	before=$(good_count)
	timeout 900 "$prog" -a "$a" -b "$b" -s "$seed" -k "$keys" -D "$db" "$@" \
		2>&1 | tee /run/ra-pass.log
	rc=${PIPESTATUS[0]}
	after=$(good_count)
	while IFS= read -r line; do
		case "$line" in
		"FAIL "*) line=${line#FAIL }; echo "FAIL: ${line%% *} [$a-$b]" >&2 ;;
		esac
	done </run/ra-pass.log
	[ "$rc" = 124 ] && echo "FAIL: ring_attack $a-$b timed out (hang)" >&2
	vm_log "ring_attack $a-$b took $((SECONDS - t0)) s; the other process" \
		"did $((after - before)) round trips meanwhile"
	assert_match '^[1-9]' "$((after - before))" \
		"the other process's round trips during the $a-$b pass" || rc=1
	kill -0 "$gpid" 2>/dev/null || { echo "FAIL: the other process died" >&2; rc=1; }
	assert_eq 0 "$rc" "ring_attack $a-$b exit status (failed cases)"
}

# Across the veth pair: everything, storms of $doorbells doorbells.  In
# loopback: the same but the huge-MR cases (local checks only, which the
# first pass covered) and storms of a quarter.
# shellcheck disable=SC2086
check run_pass mbcf1 mbcf0 "$doorbells" $cases
check vm_wait_port mbcf0 20
check vm_wait_port mbcf1 20
[ "$cases" = all ] && cases="sq rq cq scribble storm destroy reset garbage"
# shellcheck disable=SC2086
check run_pass mbcf0 mbcf0 "$((doorbells / 4))" $cases

# --- the other process ends exact ------------------------------------------------------
kill -TERM "$gpid"
end=$((SECONDS + 60))
while kill -0 "$gpid" 2>/dev/null && [ "$SECONDS" -lt "$end" ]; do
	sleep 0.2
done
if kill -0 "$gpid" 2>/dev/null; then
	echo "FAIL: the other process did not stop within 60 s (hang)" >&2
	kill -KILL "$gpid"
	failed=$((failed + 1))
fi
wait "$gpid"
grc=$?
cat /run/ra-good.log
check assert_eq 0 "$grc" "the other process's exit status"
check assert_match 'every byte right' "$(tail -n 1 /run/ra-good.log)" "the other process's verdict"

# --- counters ----------------------------------------------------------------------------
for dev in mbcf0 mbcf1; do
	read -r rx sum bad <<<"$(verdicts "$dev")"
	vm_log "$dev counters: $(counters_of "$dev" | cut -c1-600)"
	check assert_eq "$rx" "$sum" "$dev rx_frames = sum of verdict counters"
	check assert_eq 0 "$bad" "$dev malformed/truncated/bad frames received"
done

# --- nothing left ----------------------------------------------------------------------------
vm_wait_clean "$base_pins" 30
q=$VM_QP c=$VM_CQ m=$VM_MR p=$VM_PD pins=$VM_PINS
check assert_eq 0 "$q" "mbcf QPs left"
check assert_eq 0 "$c" "mbcf CQs left"
check assert_eq 0 "$m" "mbcf MRs left"
check assert_eq 0 "$p" "mbcf PDs left"
check assert_eq "$base_pins" "$pins" "pinned pages after both passes"

check assert_cmd rdma link delete mbcf0
check assert_cmd in_ns1 rdma link delete mbcf1
check assert_eq "" "$(rdma link show 2>/dev/null | grep mbcf)" "no mbcf link left"
check assert_cmd rmmod mbcf
check vm_dmesg_check

if [ "$failed" != 0 ]; then
	echo "rings: $failed check(s) failed (seed $seed)"
	exit 1
fi
echo "rings: all checks passed (seed $seed)"
