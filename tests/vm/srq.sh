#!/bin/bash
# Guest test: shared receive queues.
#  - ibv_devinfo -v shows the SRQ limits;
#  - progs/srq_test.c `check` (mbcf1 -> mbcf0, and loopback on mbcf0): limits
#    and refusals, several RC QPs on one SRQ, the limit event, RNR when dry,
#    LAST_WQE_REACHED, EBUSY, UD on an SRQ, hostile SRQ rings -- exact
#    completions, data, events (see the program's header);
#  - a process killed holding SRQs with receives posted, QPs attached and a
#    sender held by RNR: every object goes, no page stays pinned; the same
#    with mbcf0 removed (rdma link delete) under the living process first;
#  - unmodified perftest with --use-srq (ib_send_bw with 1 and 4 QPs on one
#    SRQ, and 4 QPs on an SRQ of 8 that keeps running dry; ib_send_lat) and ibv_srq_pingpong -c (4 QPs, every buffer checked),
#    mbcf1 -> mbcf0: exit status 0 on both sides and the exact message counts;
#  - the kernel log stays clean.
#   tests/vm/run.sh --build BUILD tests/vm/srq.sh [PATH/TO/mbcf_srq_test]
set -u
# shellcheck source=lib.sh
. "${MBCF_VM_LIB:-$(dirname "$0")/lib.sh}"

failed=0
check() { "$@" || failed=$((failed + 1)); }

vm_require_mbcf
prog=$(vm_test_prog mbcf_srq_test "${1:-}") || exit 1
base_pins=$(vm_pins_held)

# objects_none WHEN: no process-owned SRQ, QP, CQ, MR or PD on mbcf0/mbcf1.
objects_none() {
	local t d
	for t in srq qp cq mr pd; do
		for d in mbcf0 mbcf1; do
			check assert_eq 0 "$(vm_res "$t" "$d")" "$d $t objects $1"
		done
	done
}

objects_none "at start"

# --- what the device reports ----------------------------------------------------
info=$(ibv_devinfo -v -d mbcf0)
check assert_match 'max_srq:[[:space:]]+4096$' "$info" "ibv_devinfo max_srq"
check assert_match 'max_srq_wr:[[:space:]]+65536$' "$info" "ibv_devinfo max_srq_wr"
check assert_match 'max_srq_sge:[[:space:]]+16$' "$info" "ibv_devinfo max_srq_sge"

# --- srq_test check ---------------------------------------------------------------
run() { # A B
	local out rc t0=$EPOCHREALTIME
	vm_phase "srq_test $1 -> $2"
	vm_dmesg_mark
	if [ "$1" = mbcf1 ]; then
		out=$(in_ns1 timeout 500 "$prog" -a "$1" -b "$2" check 2>&1)
	else
		out=$(timeout 500 "$prog" -a "$1" -b "$2" check 2>&1)
	fi
	rc=$?
	printf '%s\n' "$out"
	vm_log "srq_test $1 -> $2: rc $rc in $(vm_elapsed_since "$t0") s"
	check assert_eq 0 "$rc" "srq_test $1 -> $2: failed checks"
	check assert_match '^srq_test: 0 failure' "$out" "srq_test $1 -> $2 ran to the end"
	# the hostile rings fail QPs: the kernel says nothing about it
	check vm_dmesg_check --since-mark
}
run mbcf1 mbcf0
run mbcf0 mbcf0
objects_none "after srq_test"
check assert_eq "$base_pins" "$(vm_pins_held)" "pinned pages after srq_test"

# --- SIGKILL of a holder ------------------------------------------------------------
log=/var/tmp/srq_hold.log
"$prog" -a mbcf1 -b mbcf0 hold >"$log" 2>&1 &
pid=$!
for _ in $(seq 600); do
	grep -q '^ready\|^FAIL\|^setup' "$log" && break
	sleep 0.2
done
cat "$log"
check assert_match '^ready srq 2 qp 5$' "$(grep '^ready' "$log")" "hold: set up"
check assert_eq 2 "$(vm_res srq mbcf0)" "hold: mbcf0 SRQs"
check assert_eq 5 "$(vm_res qp mbcf0)" "hold: mbcf0 QPs"
check assert_eq 5 "$(vm_res qp mbcf1)" "hold: mbcf1 QPs"
t0=$EPOCHREALTIME
kill -KILL "$pid"
wait "$pid" 2>/dev/null
vm_log "holder gone in $(vm_elapsed_since "$t0") s"
objects_none "after SIGKILL"
check assert_eq "$base_pins" "$(vm_pins_held)" "pinned pages after SIGKILL"

# --- unmodified perftest and ibv_srq_pingpong ------------------------------------------
# pair NAME ITERS_RE SERVER_CMD... -- CLIENT_CMD...: the server on mbcf0 (init
# namespace), the client on mbcf1 in ns1 (retried until the server listens);
# both must exit 0 and both outputs match ITERS_RE (the result row).
pair() {
	local name=$1 re=$2 srv=() cli=() sout cout rc src
	shift 2
	while [ "$1" != -- ]; do srv+=("$1"); shift; done
	shift
	cli=("$@")
	sout=$(mktemp)
	timeout 200 "${srv[@]}" >"$sout" 2>&1 &
	local spid=$!
	cout=$(vm_retry 50 0.3 in_ns1 timeout 200 "${cli[@]}" 2>&1)
	rc=$?
	wait "$spid"
	src=$?
	check assert_eq "0 0" "$rc $src" "$name: client and server exit status" ||
		{ printf '%s\n' "$cout" | tail -n 12 | sed 's/^/  client| /'
		  tail -n 12 "$sout" | sed 's/^/  server| /'; }
	check assert_match "$re" "$cout" "$name: client result"
	check assert_match "$re" "$(cat "$sout")" "$name: server result"
	rm -f "$sout"
}

vm_dmesg_mark
# Result rows: "<bytes> <iterations> <figures...>", iterations exactly -n
# times the QPs for bw, -n for lat; the message rate (bw) and t_min (lat)
# positive.  ibv_srq_pingpong: -n exchanges in all.
S='[[:space:]]+'
F='[0-9.]+'
P='[0-9]*\.?[0-9]*[1-9]'

for q in 1 4; do
	pair "ib_send_bw --use-srq -q $q" "^ 65536$S$((1000 * q))$S$F$S$F$S$P" \
		ib_send_bw -d mbcf0 -x 0 -F --use-srq -q "$q" -n 1000 -- \
		ib_send_bw -d mbcf1 -x 0 -F --use-srq -q "$q" -n 1000 "$VM_IP0"
done
# an SRQ of 8 for 4 QPs streaming: it runs dry again and again (RNR)
pair "ib_send_bw --use-srq -q 4 -r 8" "^ 1440$S$((1000 * 4))$S$F$S$F$S$P" \
	ib_send_bw -d mbcf0 -x 0 -F --use-srq -q 4 -r 8 -s 1440 -n 1000 -- \
	ib_send_bw -d mbcf1 -x 0 -F --use-srq -q 4 -r 8 -s 1440 -n 1000 "$VM_IP0"
pair "ib_send_lat --use-srq" "^ 2${S}200$S$P$S" \
	ib_send_lat -d mbcf0 -x 0 -F --use-srq -s 2 -n 200 -- \
	ib_send_lat -d mbcf1 -x 0 -F --use-srq -s 2 -n 200 "$VM_IP0"
pair "ibv_srq_pingpong -q 4 -c" "^100 iters in " \
	ibv_srq_pingpong -d mbcf0 -g 0 -q 4 -n 100 -s 4096 -c -- \
	ibv_srq_pingpong -d mbcf1 -g 0 -q 4 -n 100 -s 4096 -c "$VM_IP0"
objects_none "after perftest"

# --- the device goes away under a holder ---------------------------------------------
# rdma link delete destroys the process's objects on mbcf0 (QPs on SRQs, the
# SRQs with receives posted) while it lives; then it is killed.
"$prog" -a mbcf1 -b mbcf0 hold >"$log" 2>&1 &
pid=$!
for _ in $(seq 600); do
	grep -q '^ready\|^FAIL\|^setup' "$log" && break
	sleep 0.2
done
check assert_match '^ready srq 2 qp 5$' "$(grep '^ready' "$log")" "hold (device removal): set up"
check assert_eq 2 "$(vm_res srq mbcf0)" "hold (device removal): mbcf0 SRQs"
t0=$EPOCHREALTIME
check assert_cmd rdma link delete mbcf0
vm_log "mbcf0 removed under the holder in $(vm_elapsed_since "$t0") s"
check assert_eq 0 "$(vm_res srq mbcf0)" "SRQs on mbcf0 after its removal"
kill -KILL "$pid"
wait "$pid" 2>/dev/null
objects_none "after device removal and SIGKILL"
check assert_eq "$base_pins" "$(vm_pins_held)" "pinned pages after device removal and SIGKILL"
check vm_dmesg_check

if [ "$failed" != 0 ]; then
	echo "srq: $failed check(s) failed"
	exit 1
fi
echo "srq: all checks passed"
