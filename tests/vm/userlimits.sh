#!/bin/bash
# Guest test: per-user limits, as unprivileged
# users (uid 1001-1003, no capabilities), since that is the threat.
#
#  1. Ring memory against RLIMIT_MEMLOCK (8 MiB, a distribution's default):
#     a user creates CQs (4096 entries), SRQs (1024) and RC QPs (256 + 256)
#     until refused (progs/limits.c memlock).  Each object must charge the
#     same pages to the process's VmPin, for CQs and SRQs exactly their
#     ring; refusal is ENOMEM after exactly (limit - charged before) / per
#     object; no OOM kill; a second process then gets exactly the same
#     count (everything the first held was uncharged at its exit) and no
#     object is left.  Before the fix: no refusal (the program stops one
#     object past the limit and fails).
#  2. Object caps with a kernel reserve (kmod/limits.c): user A holds every
#     AH it may on mbcf0 (half the device's: 32768), user B the rest of the
#     users' share (65536 less a 1/16 reserve, less A's: 28672), both
#     refused with ENOMEM; then user C's rping (rdma_cm: the kernel CM on
#     mbcf0 answers with AHs of the reserve) connects and checks its data.
#     Then A holds every QP it may (2048), user B's rping still connects,
#     and user C gets exactly the rest of the users' share (3840 - 2048).
#     Before the fix: A takes every AH and QP and rping fails.
#  3. A user's transmit work (a 32 MiB read and write between two of its
#     QPs) is queued on system_wq only, never on system_highpri_wq
#     (tracepoint workqueue_queue_work).
#
#   tests/vm/run.sh --build BUILD tests/vm/userlimits.sh [PATH/TO/mbcf_limits]
set -u
# shellcheck source=lib.sh
. "${MBCF_VM_LIB:-$(dirname "$0")/lib.sh}"

failed=0
check() { "$@" || failed=$((failed + 1)); }

vm_require_mbcf
prog=$(vm_test_prog mbcf_limits "${1:-}") || exit 1
T0=$SECONDS
MEMLOCK=$((8 << 20))
logs=/var/tmp/userlimits
mkdir -p "$logs"
chmod 0777 "$logs"

# Distributions make these 0666 (rdma-core's udev rules); the guest has no udev.
chmod 0666 /dev/infiniband/uverbs* /dev/infiniband/rdma_cm

# as_user UID MEMLOCK: set UCMD to the command prefix that runs a command
# as an ordinary process: uid and gid UID, no supplementary groups, no
# capabilities at all, RLIMIT_MEMLOCK MEMLOCK (bytes or "unlimited").
# Each part execs the next, so "${UCMD[@]}" CMD & leaves CMD's pid in $!.
as_user() {
	UCMD=(prlimit --memlock="$2:$2" setpriv --reuid="$1" --regid="$1"
		--clear-groups --inh-caps=-all --bounding-set=-all)
}

no_oom() {
	check assert_eq "" "$(dmesg | tail -n +"$((VM_DMESG_MARK + 1))" |
		grep -E 'Killed process|invoked oom-killer')" "no OOM kill in the kernel log ($1)"
}

base_pins=$(vm_pins_held)

# ---- 1. ring memory against RLIMIT_MEMLOCK -------------------------------------------
# Pages at 8 MiB: 2048.  CQ: 256 + 4096 x 48 bytes = 49 pages, 41 of them;
# SRQ: 256 + 1024 x 32 = 9 pages, 227 of them; QP: after its CQ (1 page),
# both rings (6 + 3 pages) and the kernel's copies of the requests.
declare -A want=(
	[cq]='^MEMLOCK kind=cq created=41 errno=12 .* pages_each=49 base=0 vmpin=2009 limit=2048 '
	[srq]='^MEMLOCK kind=srq created=227 errno=12 .* pages_each=9 base=0 vmpin=2043 limit=2048 '
	[qp]='^MEMLOCK kind=qp created=[1-9][0-9]* errno=12 .* base=1 vmpin=[0-9]+ limit=2048 rings=9$'
)
for kind in cq srq qp; do
	first=
	for round in 1 2; do
		vm_phase "memlock $kind, round $round: uid 1001, RLIMIT_MEMLOCK 8 MiB"
		vm_dmesg_mark
		as_user 1001 "$MEMLOCK"
		out=$("${UCMD[@]}" timeout 300 "$prog" memlock "$kind" 2>&1)
		rc=$?
		line=$(grep '^MEMLOCK' <<<"$out")
		grep -E '^(FAIL|setup)' <<<"$out" | head -n 5
		vm_log "$line"
		check assert_eq 0 "$rc" "memlock $kind round $round: exit status (its checks passed)"
		check assert_match "${want[$kind]}" "$line" "memlock $kind round $round: refused at the limit"
		no_oom "memlock $kind"
		if [ "$round" = 1 ]; then
			first=$line
		else
			check assert_eq "${first% in *}" "${line% in *}" \
				"memlock $kind: the second process got exactly what the first did"
		fi
		check vm_assert_clean "memlock $kind round $round" "$base_pins" 60
		check assert_eq 0 "$(vm_res srq)" "SRQs left after memlock $kind"
	done
done

# ---- 2. object caps with a kernel reserve --------------------------------------------
# rdma_cm binds to the first device with the address: only mbcf devices.
rdma link delete rxe0 || vm_die "cannot remove rxe0"

# hold UID KIND NAME: as UID, hold every object of KIND it may on mbcf0
# (memlock unlimited: only the object caps count here); waits until it
# holds them, leaves its pid in HOLD_PID and its result line in HOLD_OUT.
hold() {
	as_user "$1" unlimited
	"${UCMD[@]}" "$prog" objs "$2" 1200 >"$logs/$3.log" 2>&1 &
	HOLD_PID=$!
	local end=$((SECONDS + 600))
	until grep -q '^holding' "$logs/$3.log"; do
		kill -0 "$HOLD_PID" 2>/dev/null || break
		[ "$SECONDS" -ge "$end" ] && break
		sleep 0.5
	done
	grep -E '^(FAIL|setup)' "$logs/$3.log"
	HOLD_OUT=$(grep '^OBJS' "$logs/$3.log")
	vm_log "uid $1: $HOLD_OUT"
}

# rping_as UID PORT: server (mbcf0, initial namespace) and client (mbcf1,
# ns1), both as UID; the client checks 5 pings' data.
rping_as() {
	local u=$1 port=$2 spid rc src=0 end=$((SECONDS + 60))
	as_user "$u" "$MEMLOCK"
	"${UCMD[@]}" timeout 90 rping -s -a 0.0.0.0 -p "$port" -V -C 5 >"$logs/rping$port.srv" 2>&1 &
	spid=$!
	until rdma resource show cm_id 2>/dev/null | grep -Eq "state LISTEN .*src-addr [^ ]*[:.]$port( |\$)"; do
		[ "$SECONDS" -ge "$end" ] && break
		sleep 0.2
	done
	in_ns1 "${UCMD[@]}" timeout 90 rping -c -a "$VM_IP0" -p "$port" -v -V -C 5 >"$logs/rping$port.cli" 2>&1
	rc=$?
	wait "$spid" || src=$?
	if ! check assert_eq "0 0 1" "$rc $src $(grep -c 'ping data: rdma-ping-4:' "$logs/rping$port.cli")" \
		"uid $u: rping connects and checks its data (client, server exit status; last ping)"; then
		sed 's/^/  client| /' "$logs/rping$port.cli" | tail -n 5
		sed 's/^/  server| /' "$logs/rping$port.srv" | tail -n 5
	fi
}

# stop PID...: end the holders (SIGTERM: they exit and the kernel tears down)
stop() {
	kill -TERM "$@" 2>/dev/null
	wait "$@" 2>/dev/null
}

USERS_AH=$((65536 - 65536 / 16))
USERS_QP=$((4096 - 4096 / 16))

vm_phase "AHs: uid 1001 then uid 1002 hold every AH they may on mbcf0"
vm_dmesg_mark
t=$SECONDS
hold 1001 ah ah-a
pa=$HOLD_PID
check assert_match "^OBJS kind=ah created=32768 errno=12 " "$HOLD_OUT" "uid 1001: half the device's AHs, then ENOMEM"
hold 1002 ah ah-b
pb=$HOLD_PID
check assert_match "^OBJS kind=ah created=$((USERS_AH - 32768)) errno=12 " "$HOLD_OUT" \
	"uid 1002: the rest of the users' share ($USERS_AH), then ENOMEM"
vm_log "AHs held in $((SECONDS - t)) s"
vm_phase "rping as uid 1003 while every user AH is taken"
rping_as 1003 7174
stop "$pa" "$pb"
check vm_assert_clean "the AH holders exited" "$base_pins" 60

vm_phase "QPs: uid 1001 holds every QP it may on mbcf0"
hold 1001 qp qp-a
pa=$HOLD_PID
check assert_match "^OBJS kind=qp created=2048 errno=12 " "$HOLD_OUT" "uid 1001: half the device's QPs, then ENOMEM"
rping_as 1002 7175
hold 1003 qp qp-c
pc=$HOLD_PID
check assert_match "^OBJS kind=qp created=$((USERS_QP - 2048)) errno=12 " "$HOLD_OUT" \
	"uid 1003: the rest of the users' share ($USERS_QP), then ENOMEM"
stop "$pa" "$pc"
no_oom "object caps"
check vm_assert_clean "object caps" "$base_pins" 60

# ---- 3. a user's transmit work at normal priority -----------------------------------
# 32 MiB read and write between two user QPs (window 4096, as in vm.limits:
# most frames are built by tx_work): every tx_work of theirs is queued on
# system_wq ("events"), none on system_highpri_wq ("events_highpri").
vm_phase "transmit work of a user's QPs: which workqueue"
TR=/sys/kernel/tracing
[ -e "$TR/events" ] || mount -t tracefs none "$TR"
echo 4096 >/sys/module/mbcf/parameters/window
echo >"$TR/trace"
echo 1 >"$TR/events/workqueue/workqueue_queue_work/enable"
as_user 1001 unlimited
out=$("${UCMD[@]}" timeout 600 "$prog" bigio 32 2>&1)
rc=$?
echo 0 >"$TR/events/workqueue/workqueue_queue_work/enable"
echo 0 >/sys/module/mbcf/parameters/window
check assert_eq 0 "$rc" "uid 1001: bigio 32 MiB read + write, every byte checked"
wq=$(grep -o 'function=mbcf_qp_tx_work.* workqueue=[a-z_]*' "$TR/trace" |
	sed 's/.*workqueue=//' | sort | uniq -c | awk '{ printf "%s=%s ", $2, $1 }')
vm_log "tx_work queued: ${wq:-none}"
check assert_match '^events=[1-9][0-9]* $' "$wq" "a user's tx_work: on system_wq only"
echo >"$TR/trace"

check vm_dmesg_check
vm_log "userlimits: $((SECONDS - T0)) s"
if [ "$failed" != 0 ]; then
	echo "userlimits: $failed check(s) failed"
	exit 1
fi
echo "userlimits: all checks passed"
