#!/bin/bash
# Guest test: scale.  One process (progs/scale.c) holds
# 4096 RC QPs (2048 connected pairs mbcf0 <-> mbcf1), 10,000 one-page MRs
# (+ one local MR per device) and 64 CQs; every QP writes, reads back and
# sends checked data, every MR is written and read back; then all QPs keep
# writes in flight and the process is SIGKILLed.  Asserted: the exact
# object and pinned-page counts while it runs; after the kill nothing is
# left (`rdma resource show`), pins are back to the baseline, rx_frames
# equals the sum of the verdict counters on mbcf0 and mbcf1, the links go
# and the module unloads.  Times of setup, traffic and teardown are printed.
#   tests/vm/run.sh --build BUILD tests/vm/scale.sh [PATH/TO/mbcf_scale [SEED]]
set -u
# shellcheck source=lib.sh
. "${MBCF_VM_LIB:-$(dirname "$0")/lib.sh}"

failed=0
check() { "$@" || failed=$((failed + 1)); }

vm_require_mbcf
prog=$(vm_test_prog mbcf_scale "${1:-}") || exit 1
seed_opt=()
[ -n "${2:-}" ] && seed_opt=(-s "$2")
PAIRS=2048
MRS=10000
CQS=32
T0=$SECONDS

# balance DEV: rx_frames equals the sum of the verdict counters.
balance() {
	rdma statistic show link "$1/1" | awk -v dev="$1" '{
		for (i = 1; i < NF; i++) v[$i] = $(i + 1)
		sum = v["rx_accepted"] + v["ack_rx"] + v["nak_rx"] + v["lost_rx"] + \
		      v["stop_rx"] + v["go_rx"] + v["remote_errors"]
		for (k in v) if (k ~ /^drop_/) sum += v[k]
		if (v["rx_frames"] == sum) {
			printf "ok: %s rx_frames %d = sum of verdicts (rx_accepted %d, ack_rx %d, drop_wrong_qp %d)\n",
				dev, v["rx_frames"], v["rx_accepted"], v["ack_rx"], v["drop_wrong_qp"]
			exit 0
		}
		printf "FAIL: %s rx_frames %d != sum of verdicts %d\n", dev, v["rx_frames"], sum
		exit 1
	}'
}

# Room in the backlogs for every first request at once (28 k frames of
# 4096 QPs posted in one go, plus their answers).  At the default 1000 a
# slow host's guest dropped a third of the frames there (veth refuses them
# to the sender: NET_XMIT_DROP); each was repaired by a retransmission
# timeout, and QPs ran out of retries (CI, session 19).  Refused frames
# are now resent after a short hold (docs/protocol.md 7.7; at the default
# backlog here: ~35 k refusals per device, no LOST, passed twice), but the
# frames that do queue still wait past the 67 ms timeout (~9 k timeouts
# either way).  What this test asserts is scale -- objects, pins,
# teardown -- not loss repair (tests/vm/netem.sh, vm.perftest's full
# backlog).
sysctl -qw net.core.netdev_max_backlog=32768

base_pins=$(vm_pins_held)
vm_log "pinned pages at start: $base_pins; MemAvailable $(awk '/MemAvailable/ { print $2 }' /proc/meminfo) kB"

vm_phase "$((2 * PAIRS)) QPs, $MRS MRs in one process"
"$prog" "${seed_opt[@]}" -p "$PAIRS" -m "$MRS" -c "$CQS" >/tmp/scale.log 2>&1 &
pid=$!
end=$((SECONDS + 1500))
until grep -q '^running' /tmp/scale.log; do
	kill -0 "$pid" 2>/dev/null || break
	[ "$SECONDS" -ge "$end" ] && break
	sleep 1
done
cat /tmp/scale.log
check assert_match '^running' "$(grep '^running' /tmp/scale.log | head -n 1)" "every check passed, traffic running"
check assert_eq "$((2 * PAIRS)) $((2 * CQS)) $((MRS + 2)) 2" "$(vm_res qp) $(vm_res cq) $(vm_res mr) $(vm_res pd)" \
	"QPs CQs MRs PDs while running"
# one page per MR, plus the local MRs: PAIRS x 1 KiB per device
check assert_eq "$((MRS + 2 * PAIRS * 1024 / 4096))" "$(($(vm_pins_held) - base_pins))" "pages pinned while running"
vm_log "kernel memory while running: $(awk '/^(Slab|SUnreclaim|VmallocUsed|PageTables|MemAvailable):/ { printf "%s %s kB  ", $1, $2 }' /proc/meminfo)"
n0=$(grep -c '^running:' /tmp/scale.log)
sleep 3
grep '^running:' /tmp/scale.log | tail -n 1
check assert_match '^running: [1-9][0-9]* writes' "$(grep '^running:' /tmp/scale.log | tail -n 1)" "writes completing before the kill"
check assert_eq "" "$(grep '^FAIL' /tmp/scale.log | head -n 3)" "no failed check while running"
# The counters that say how the first burst went (timeouts, refusals,
# retries exceeded): the record a failed CI run leaves.
for d in mbcf0 mbcf1; do
	vm_log "$d: $(rdma statistic show link "$d/1" | tr ' ' '\n' |
		awk 'p != "" && $0 + 0 > 0 { printf "%s %s ", p, $0 } { p = ($0 ~ /^[a-z_]+$/) ? $0 : "" }')"
done

vm_phase "SIGKILL"
t=$EPOCHREALTIME
kill -KILL "$pid"
wait "$pid" 2>/dev/null
tk=$(vm_elapsed_since "$t")
# the teardown runs in the exit path: nothing may be left when wait returns
left=$(($(vm_res qp) + $(vm_res cq) + $(vm_res mr) + $(vm_res pd)))
check assert_eq 0 "$left" "QPs+CQs+MRs+PDs left on mbcf devices when the killed process was reaped"
vm_wait_clean "$base_pins" 300
q=$VM_QP c=$VM_CQ m=$VM_MR p=$VM_PD pins=$VM_PINS
vm_log "teardown: SIGKILL to reaped (every object destroyed) $tk s; pins checked after $(vm_elapsed_since "$t") s"
check assert_eq 0000 "$q$c$m$p" "QP/CQ/MR/PD count on mbcf devices after SIGKILL"
check assert_eq "$base_pins" "$pins" "pinned pages after SIGKILL"
sleep 1		# frames still in flight reach their verdict
check balance mbcf0
check balance mbcf1
check assert_cmd rdma link delete mbcf0
check assert_cmd rdma link delete mbcf1
check assert_cmd rmmod mbcf
check vm_dmesg_check
vm_log "scale: $((SECONDS - T0)) s"
if [ "$failed" != 0 ]; then
	echo "scale: $failed check(s) failed"
	exit 1
fi
echo "scale: all checks passed"
