#!/bin/bash
# Guest test: the pacing thread's CPU budget, under a paced load from an
# unprivileged user.  Any user may pace its QPs (ibv_modify_qp_rate_limit);
# the device's pacing thread ("mbcf_pace/<netdev>", kmod/pacer.c) runs
# ahead of ordinary threads, so its CPU time must be bounded: it is a
# SCHED_DEADLINE thread with a reservation of pace_cpu_pct percent of every
# 10 ms.  With pace_cpu_pct=PCT:
#  - the thread's policy and reservation, as chrt reports them, exactly;
#  - Q QPs of ib_write_bw (uid 1001, no capabilities, 8 MiB RLIMIT_MEMLOCK)
#    paced by MBCF_QP_RATE_LIMIT at rates adding up to twice what this
#    guest carries unpaced, so the pacer always has QPs due: over W seconds
#    the thread's own CPU time (/proc/PID/schedstat) is at most PCT + TOL
#    percent of one vCPU (TOL: the scheduler enforces at the tick, 4 ms,
#    and takes an overrun back from the next periods), and a nice-0 busy
#    loop (uid 1002) keeps running;
#  - the paced run ends normally and the kernel log stays clean.
#   tests/vm/run.sh --build BUILD tests/vm/pacer_budget.sh
set -u
# shellcheck source=lib.sh
. "${MBCF_VM_LIB:-$(dirname "$0")/lib.sh}"

failed=0
check() { "$@" || failed=$((failed + 1)); }

vm_require_mbcf
base_pins=$(vm_pins_held)
logs=/var/tmp/pacer_budget
mkdir -p "$logs"
chmod 0777 "$logs"
# Distributions make these 0666 (rdma-core's udev rules); the guest has no udev.
chmod 0666 /dev/infiniband/uverbs*

PCT=20
Q=32
W=6
TOL=5
MEMLOCK=$((8 << 20))
as_user() {	# UID: an ordinary process, as in userlimits.sh
	UCMD=(prlimit --memlock="$MEMLOCK:$MEMLOCK" setpriv --reuid="$1" --regid="$1"
		--clear-groups --inh-caps=-all --bounding-set=-all)
}
param=/sys/module/mbcf/parameters/pace_cpu_pct
if [ -e "$param" ]; then
	echo "$PCT" >"$param"
else
	echo "FAIL: no pace_cpu_pct parameter"
	failed=$((failed + 1))
fi

pacer=$(pgrep -x 'mbcf_pace/veth1')
[ -n "$pacer" ] || vm_die "no pacing thread mbcf_pace/veth1 (mbcf1)"
# oncpu PID: nanoseconds the task has run -- schedstat's, or, where the
# kernel keeps none (the debug lane's: 0), utime + stime in clock ticks; %.0f, as
# mawk's %d stops at 2^31 - 1 (2.1 s in ns)
HZ=$(getconf CLK_TCK)
oncpu() {
	local ns
	ns=$(awk '{ print $1 }' "/proc/$1/schedstat" 2>/dev/null)
	if [ "${ns:-0}" -gt 0 ]; then
		echo "$ns"
	else
		awk -v hz="$HZ" '{ printf "%.0f\n", ($14 + $15) * 1e9 / hz }' "/proc/$1/stat"
	fi
}

# perf ENV... -- ARGS...: vm_perf_pair (lib.sh) as uid 1001
perf() {
	as_user 1001
	local VM_PERF_PREFIX=("${UCMD[@]}")	# seen by vm_perf_pair (dynamic scope)
	vm_perf_pair "$@"
}

vm_phase "unpaced ib_write_bw -s 65536"
# the debug lane's kernel is VM_TIME_SCALE times slower: fewer messages
out=$(perf -- -s 65536 -n $((1500 / $(vm_scaled 1))))
bw0=$(awk '$1 == 65536 && $2 ~ /^[0-9]+$/ { print $4; exit }' <<<"$out")
# whole frames, kbit/s, twice what the guest carries, shared by the Q QPs
cap=$(awk -v b="${bw0:-0}" 'BEGIN { printf "%d", 2 * b * 1048576 * 8 / 1000 * 1514 / 1464 }')
# A floor that only a broken unpaced run misses: 16 Mbit/s, divided by
# VM_TIME_SCALE^2 on the debug lane (whose kernel is that much slower per
# frame and shares a loaded host: 0.67 MB/s seen there)
floor=$(awk -v s="${VM_TIME_SCALE:-1}" 'BEGIN { if (!(s >= 1)) s = 1; printf "%d", 16000 / (s * s) }')
[ "$cap" -ge "$floor" ] || { echo "FAIL: unpaced ib_write_bw carried ${bw0:-nothing} MB/s"; cap=$floor; failed=$((failed + 1)); }
rate=$((cap / Q))
echo "pacer_budget: unpaced ${bw0:-?} MB/s: $Q QPs at $rate kbit/s each ($cap kbit/s)"

vm_phase "paced load: $Q QPs x $rate kbit/s, a busy loop beside it"
as_user 1002
"${UCMD[@]}" bash -c 'while :; do :; done' &
busy=$!
as_user 1001
perf MBCF_QP_RATE_LIMIT="$rate" -- -s 4096 -q "$Q" -D "$(vm_scaled $((W + 10)))" >"$logs/load.log" 2>&1 &
load=$!
# until the QPs send (connection setup takes seconds under TCG)
f0=$(vm_dev_ctr mbcf1 tx_frames)
for _ in $(seq "$(vm_scaled 60)"); do
	sleep 0.5
	[ $(( $(vm_dev_ctr mbcf1 tx_frames) - f0 )) -gt 2000 ] && break
done
sleep 1
t0=$EPOCHREALTIME p0=$(oncpu "$pacer") b0=$(oncpu "$busy") f0=$(vm_dev_ctr mbcf1 tx_frames)
sleep "$W"
el=$(vm_elapsed_since "$t0")
p1=$(oncpu "$pacer") b1=$(oncpu "$busy") f1=$(vm_dev_ctr mbcf1 tx_frames)
policy=$(chrt -p "$pacer")
wait "$load"
lrc=$?
kill "$busy"
wait "$busy" 2>/dev/null

share() { awk -v n="$1" -v t="$el" 'BEGIN { printf "%.3f", n / 1e9 / t }'; }
pc=$(share $((p1 - p0)))
bc=$(share $((b1 - b0)))
pmax=$(awk -v p="$PCT" -v t="$TOL" 'BEGIN { printf "%.3f", (p + t) / 100 }')
echo "pacer_budget: over $el s the pacing thread ran $pc of a vCPU, the busy loop $bc; mbcf1 sent $((f1 - f0)) frames"
sed 's/^/  chrt| /' <<<"$policy"
grep -E '^ *4096 ' "$logs/load.log" | sed 's/^/  load| /'
check assert_eq 0 "$lrc" "paced ib_write_bw as uid 1001 ran to the end"
check assert_eq "SCHED_DEADLINE" "$(sed -n 's/.*scheduling policy: \([A-Z_]*\).*/\1/p' <<<"$policy")" "the pacing thread's policy"
check assert_eq "$((PCT * 100000))/10000000/10000000" \
	"$(sed -n 's/.*runtime\/deadline\/period parameters: //p' <<<"$policy")" "its runtime/deadline/period (ns)"
if awk -v c="$pc" -v m="$pmax" 'BEGIN { exit !(c <= m) }'; then
	echo "ok: the pacing thread used $pc of a vCPU (<= $pmax)"
else
	echo "FAIL: the pacing thread used $pc of a vCPU (> $pmax)"
	failed=$((failed + 1))
fi
if [ $((f1 - f0)) -gt 1000 ] && awk -v c="$bc" 'BEGIN { exit !(c >= 0.2) }'; then
	echo "ok: the paced QPs sent and the busy loop ran"
else
	echo "FAIL: paced frames $((f1 - f0)), busy loop $bc of a vCPU"
	failed=$((failed + 1))
fi

echo 50 >"$param" 2>/dev/null
check vm_assert_clean "the paced load" "$base_pins" 60
check assert_eq 0 "$(vm_res qp)" "QPs left on mbcf0/1"
check vm_dmesg_check

[ "$failed" = 0 ] || { echo "pacer_budget: $failed check(s) failed"; exit 1; }
echo "pacer_budget: all checks passed"
