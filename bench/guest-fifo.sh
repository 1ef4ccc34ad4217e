#!/bin/bash
# bench/guest-fifo.sh: the memory-based FIFO's rows, in the guest
# (bench/run.sh --fifo-only boots it; ctest vm.bench_fifo runs it short).
#   guest-fifo.sh [REPS [MSGS [ITERS [PROG]]]]
# 64 B message rate into one receiver (vCPU 0) from 1 sender QP and from
# 16 (in 4 processes, all on vCPU 1): FIFO push, SEND into an SRQ, WRITE
# WITH IMM into per-sender slots (bench/fifo_rate.c); both ends on mbcf0
# ("lo"), and senders on mbcf1 into mbcf0 across the veth ("veth", each
# veth's receive steered to its receiver's vCPU as for bench/guest.sh's
# bandwidth rows).  Then the wake-up round trip, both ends asleep: FIFO
# signal (poll on the eventfd) against SEND (completion channel), both
# processes on vCPU 0 and no RPS: a halted TCG vCPU woken from the other
# one waits for its next tick (4 ms), which would measure the emulator.
# Every run checks its messages (bench/fifo_rate.c); a failed run fails
# the script.  The rounds interleave the modes, so a slow stretch of the
# host hits every mode alike.  FIFO_TOPOS, FIFO_SHAPES ("QPS PROCS,..."),
# FIFO_MODES and FIFO_WAKE=0 narrow the run to some rows (default: all).
# Rows on stdout:
#   FIFO,rate,<mode>,<topo>,<qps>,<procs>,<run>,<rate/s>,<rx_cpu_us>,<rx_soft_us>,<all_cpu_us>,<rx_proc_us>
#   FIFO,wake,<mode>,<topo>,1,1,<run>,<p50_us>,<p90_us>,<p99_us>,<max_us>
set -u
# shellcheck source=../tests/vm/lib.sh
. "$MBCF_VM_LIB"

REPS=${1:-3}
MSGS=${2:-100000}	# per run: divided over the sender QPs
ITERS=${3:-2000}
prog=${4:-${MBCF_BUILD:-}/bench/mbcf_fifo_rate}
[ -x "$prog" ] || vm_die "no $prog"
vm_require_mbcf
vm_wait_port mbcf0 20 && vm_wait_port mbcf1 20 || exit 1
failed=0
log=/var/tmp/bench-fifo
mkdir -p "$log"
echo "FIFO_HOST_CPUS $(nproc)"

# One vCPU (the instruction-counting guest, tests/vm/run.sh --icount):
# senders and receiver share it, nothing to steer; a rate is then the
# messages per second of guest time the whole system sustains.
scpu=1
[ "$(nproc)" = 1 ] && scpu=0
steer_rx() { # on|off, as bench/guest.sh
	[ "$scpu" = 0 ] && return 0
	local m0=1 m1=2
	[ "$1" = off ] && m0=0 m1=0
	echo $m0 >/sys/class/net/veth0/queues/rx-0/rps_cpus
	in_ns1 sh -c "echo $m1 >/sys/class/net/veth1/queues/rx-0/rps_cpus"
}

# run SHOW ROW-PREFIX ARGS...: one program run, its RESULT line turned into
# a row (printed when SHOW is 1: not for the warm-up); a failure counted
run() {
	local show=$1 pre=$2 out
	shift 2
	out=$(timeout 300 "$prog" "$@" 2>&1)
	local rc=$?
	printf '%s\n' "$out" >>"$log/runs.log"
	local res
	res=$(grep '^RESULT ' <<<"$out" | tail -n 1)
	if [ "$rc" != 0 ] || ! grep -q ' ok$' <<<"$res"; then
		echo "FAIL: $prog $* (exit $rc): $(tail -n 5 <<<"$out" | tr '\n' ' ')"
		failed=$((failed + 1))
		return
	fi
	[ "$show" = 1 ] || return 0
	case $1 in
	rate) echo "$pre,$(awk '{ for (i = 1; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
		printf "%s,%s,%s,%s,%s", v["rate"], v["rx_cpu_us"], v["rx_soft_us"], v["all_cpu_us"], v["rx_proc_us"] }' <<<"$res")" ;;
	wake) echo "$pre,$(awk '{ for (i = 1; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
		printf "%s,%s,%s,%s", v["p50_us"], v["p90_us"], v["p99_us"], v["max_us"] }' <<<"$res")" ;;
	esac
}

topos=${FIFO_TOPOS:-lo veth}
IFS=, read -r -a shapes <<<"${FIFO_SHAPES:-1 1,16 4}"
modes=${FIFO_MODES:-fifo srq imm}
for topo in $topos; do
	a=mbcf0
	[ "$topo" = veth ] && { a=mbcf1; steer_rx on; }
	for shape in "${shapes[@]}"; do
		read -r q p <<<"$shape"
		n=$((MSGS / q / 16 * 16))
		for ((r = 0; r <= REPS; r++)); do	# run 0: warm-up, not reported
			for m in $modes; do
				run $((r > 0)) "FIFO,rate,$m,$topo,$q,$p,$r" rate -m $m -q "$q" -p "$p" -n "$n" -a $a -b mbcf0 -r 0 -c $scpu
			done
		done
	done
	steer_rx off
done

for topo in $topos; do
	[ "${FIFO_WAKE:-1}" = 0 ] && break
	a=mbcf0
	[ "$topo" = veth ] && a=mbcf1
	for ((r = 0; r <= REPS; r++)); do
		for m in signal send; do
			run $((r > 0)) "FIFO,wake,$m,$topo,1,1,$r" wake -m $m -n "$ITERS" -a $a -b mbcf0 -r 0 -c 0
		done
	done
done

vm_dmesg_check || failed=$((failed + 1))
if [ "$failed" != 0 ]; then
	echo "bench-fifo: $failed run(s) failed"
	exit 1
fi
echo "bench-fifo: all runs checked"
