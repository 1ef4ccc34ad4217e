#!/usr/bin/env bash
# Where a round trip's instructions go: one perftest latency row run under
# `perf record` inside the deterministic guest (tests/vm/run.sh --icount:
# one vCPU, 1 ns of guest time per executed instruction), for mbcf0 and
# rxe0 (both ends on one device).  The sampling clock is the guest's, so a
# sample stands for PERIOD instructions; each device runs ITERS and then
# 5 x ITERS iterations, and the difference of a symbol's samples x PERIOD /
# (4 x ITERS) is what it spends per iteration, start-up cancelled.
# Interrupts are masked in parts of the kernel (the scheduler's switch,
# spin_lock_irqsave): their samples land where interrupts come back on
# (finish_task_switch, _raw_spin_unlock_irqrestore).
#   bench/icount-profile.sh [--test T] [--size S] [--poll] [--iters N] [--period NS] [--top N] [--devs "mbcf0 rxe0"]
# --poll: the client polls its completion queue (ib_read_lat and
# ib_atomic_lat only: their responder is the device, so the server process
# sleeps and one vCPU serves); event mode (-e) otherwise.  --events: only
# the EVENT and CTR lines below (no sampling: quicker, and exact).
# Prints, per device, "PROFILE,<dev>,<test>,<size>,<mode>,<perftest's t_typical us>,
# <instructions per iteration from the samples>" (an iteration is a round
# trip; t_typical is half of one, and here includes perf's own sampling),
# then "SYM,<dev>,<instructions per iteration>,<object> <symbol>" for the
# top symbols, "DSO,..." the same by object, and "FILE,..." by the source
# file of mbcf's functions (the module's debug info), the kernel's other
# work as "(kernel)"; and "EVENT,<dev>,<per iteration>,<tracepoint>": how
# often the round trip queues work, switches or wakes tasks, starts timers,
# raises softirqs, idles (perf stat on tracepoints, the same difference);
# for mbcf, "CTR,<dev>,<per iteration>,<counter>": the device's counters
# (`rdma statistic`) that moved, per round trip.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
src=$(cd "$here/.." && pwd)
t=ib_send_lat size=4 iters=5000 period=20011 top=40 devs="mbcf0 rxe0" mode=ev only=all
while [ $# -gt 0 ]; do
	case $1 in
	--test) t=$2; shift 2 ;;
	--size) size=$2; shift 2 ;;
	--iters) iters=$2; shift 2 ;;
	--period) period=$2; shift 2 ;;
	--top) top=$2; shift 2 ;;
	--devs) devs=$2; shift 2 ;;
	--poll) mode=poll; shift ;;
	--events) only=events; shift ;;
	--guest | --pair) break ;;
	*) echo "usage: $0 [--test T] [--size S] [--iters N] [--period NS] [--top N] [--devs LIST] [--poll]" >&2; exit 2 ;;
	esac
done

if [ "${1:-}" != --guest ] && [ "${1:-}" != --pair ]; then
	MBCF_VM_SLUB_DEBUG= exec "$src/tests/vm/run.sh" --icount \
		--build "${MBCF_BUILD:-$src/build}" --timeout "${ICOUNT_TIMEOUT:-2400}" \
		"$here/icount-profile.sh" --guest "$t" "$size" "$iters" "$period" "$top" "$devs" "$mode" "$only"
fi

# --- in the guest ---------------------------------------------------------
set +e +o pipefail
set -u
. "$MBCF_VM_LIB"
if [ "$1" = --pair ]; then	# --pair DEV TEST ITERS PERFTEST-ARGS...: one ping-pong
	d=$2 t=$3 n=$4
	shift 4
	g=0
	case $d in rxe*) g=1 ;; esac
	timeout 900 "$t" -d "$d" -x "$g" -F "$@" -n "$n" >/var/tmp/prof-server.log 2>&1 &
	vm_retry 50 0.2 timeout 900 "$t" -d "$d" -x "$g" -F "$@" -n "$n" 127.0.0.1 2>&1
	wait
	exit 0
fi
t=$2 size=$3 iters=$4 period=$5 top=$6 devs=$7 mode=$8 only=$9
[ "${VM_MBCF:-0}" = 1 ] || vm_die "mbcf0/mbcf1 missing"
command -v perf >/dev/null || vm_die "no perf in the guest"
echo 0 >/proc/sys/kernel/kptr_restrict
echo -1 >/proc/sys/kernel/perf_event_paranoid

m=(-s "$size")
case $t in ib_atomic_*) m=() ;; esac
case $mode,$t in
ev,ib_send_lat | ev,ib_atomic_lat | ev,ib_read_lat | ev,ib_send_bw) m+=(-e) ;;
poll,ib_atomic_lat | poll,ib_read_lat | poll,ib_atomic_bw) ;;
*) vm_die "$t cannot run in $mode mode on one vCPU" ;;
esac

# counts DATA: "<samples>\t<object> <symbol>" for every symbol of a record
counts() {
	perf report -i "$1" --stdio --sort dso,sym -F sample,dso,sym 2>/dev/null |
		awk '/^ *[0-9]+ / { n = $1; $1 = ""; sub(/^ +/, ""); sub(/ \[[.k]\] /, " "); print n "\t" $0 }'
}

# record DEV N: the pair's N round trips under perf; prints the client's output
record() {
	perf record -q -a -e cpu-clock -c "$period" -o "/var/tmp/perf-$1-$2.data" -- \
		"$0" --pair "$1" "$t" "$2" "${m[@]}" 2>"/var/tmp/perf-$1-$2.log"
}

# events_of DEV N: tracepoint counts of the pair's N round trips, "<count>\t<event>"
events=workqueue:workqueue_queue_work,sched:sched_switch,sched:sched_wakeup,timer:hrtimer_start,timer:hrtimer_expire_entry,timer:timer_start,irq:softirq_raise,irq:irq_handler_entry,power:cpu_idle,raw_syscalls:sys_enter
events_of() {
	case $1 in mbcf*) rdma statistic show link "$1/1" | tr ' ' '\n' |
		awk 'k != "" && $0 ~ /^[0-9]+$/ { print $0 "\tctr:" k } { k = $0 }' >"/var/tmp/ctr-$1-$2.0" ;; esac
	perf stat -a -x, -e "$events" -o "/var/tmp/stat-$1-$2.csv" -- \
		"$0" --pair "$1" "$t" "$2" "${m[@]}" >/dev/null 2>&1
	awk -F, '$1 ~ /^[0-9]+$/ { print $1 "\t" $3 }' "/var/tmp/stat-$1-$2.csv"
	case $1 in mbcf*) rdma statistic show link "$1/1" | tr ' ' '\n' |
		awk 'k != "" && $0 ~ /^[0-9]+$/ { print $0 "\tctr:" k } { k = $0 }' |
		awk -F '\t' 'FNR == NR { a[$2] = $1; next } $1 != a[$2] { print $1 - a[$2] "\t" $2 }' \
			"/var/tmp/ctr-$1-$2.0" - ;; esac
}

# The pair's start-up (perftest's clock calibration, registration,
# connection) costs as much as thousands of round trips: each device is
# recorded at ITERS and at 5 x ITERS round trips, and a symbol's instructions
# per round trip are the difference of its samples x PERIOD / (4 x ITERS).
n1=$iters n2=$((iters * 5))
# mbcf.ko's functions and the source files that define them
nm -l --defined-only "$MBCF_BUILD/kmod/mbcf.ko" |
	awk '$2 ~ /^[tT]$/ && NF >= 4 { f = $4; sub(/:[0-9]+$/, "", f); sub(/.*\/src\//, "", f); print $3 "\t" f }' >/var/tmp/mbcf-syms.tsv
[ -s /var/tmp/mbcf-syms.tsv ] || vm_die "no symbols with source files in $MBCF_BUILD/kmod/mbcf.ko"
# profile DEV: its SYM, DSO and FILE lines
profile() {
	local d=$1 out rtt total
	record "$d" "$n1" >/dev/null
	out=$(record "$d" "$n2")
	rtt=$(awk -v s="$size" '($1 == s || s == 8) && $2 ~ /^[0-9]+$/ { print $5; exit }' <<<"$out")
	case $t in *_bw) rtt=${rtt:--} ;; esac	# a rate test: an iteration is one operation
	[ -n "$rtt" ] || { echo "$out" | tail -n 5 >&2; vm_die "$t on $d printed no result"; }
	counts "/var/tmp/perf-$d-$n1.data" >"/var/tmp/prof-$d-1.tsv"
	counts "/var/tmp/perf-$d-$n2.data" >"/var/tmp/prof-$d-2.tsv"
	# "<instructions per round trip>\t<object> <symbol>", most first
	awk -F '\t' -v p="$period" -v n="$((n2 - n1))" '
		FNR == NR { a[$2] = $1; next }
		{ b[$2] = $1 }
		END { for (k in b) printf "%.0f\t%s\n", (b[k] - a[k]) * p / n, k
		      for (k in a) if (!(k in b)) printf "%.0f\t%s\n", -a[k] * p / n, k }' \
		"/var/tmp/prof-$d-1.tsv" "/var/tmp/prof-$d-2.tsv" | sort -t "$(printf '\t')" -k1,1 -rn >"/var/tmp/prof-$d.tsv"
	total=$(awk -F '\t' '{ n += $1 } END { print n + 0 }' "/var/tmp/prof-$d.tsv")
	echo "PROFILE,$d,$t,$size,$mode,$rtt,$total"
	awk -F '\t' -v d="$d" -v n="$top" 'NR <= n { printf "SYM,%s,%s,%s\n", d, $1, $2 }' "/var/tmp/prof-$d.tsv"
	# by object: the kernel, the module, the provider, libibverbs, the program
	awk -F '\t' -v d="$d" '{ o = $2; sub(/ .*/, "", o); s[o] += $1 }
		END { for (o in s) printf "DSO,%s,%s,%s\n", d, s[o], o }' "/var/tmp/prof-$d.tsv" | sort -t, -k3 -rn
	# by source file: mbcf's symbols by the file that defines them (the
	# module's debug info), the rest by object ("(kernel)": the kernel's
	# own work on the way -- system calls, scheduling, interrupts)
	awk -F '\t' -v d="$d" '
		FNR == NR { f[$1] = $2; next }
		{ o = $2; s = $2; sub(/ .*/, "", o); sub(/^[^ ]* /, "", s)
		  k = (s in f) ? f[s] : (o == "[kernel.kallsyms]" ? "(kernel)" : "(" o ")")
		  sum[k] += $1 }
		END { for (k in sum) printf "FILE,%s,%s,%s\n", d, sum[k], k }' \
		/var/tmp/mbcf-syms.tsv "/var/tmp/prof-$d.tsv" | sort -t, -k3 -rn
}
for d in $devs; do
	"$0" --pair "$d" "$t" 200 "${m[@]}" >/dev/null	# warm-up: programs and libraries in the page cache
	[ "$only" = events ] || profile "$d"
	events_of "$d" "$n1" >"/var/tmp/stat-$d-1.tsv"
	events_of "$d" "$n2" >"/var/tmp/stat-$d-2.tsv"
	awk -F '\t' -v d="$d" -v n="$((n2 - n1))" '
		FNR == NR { a[$2] = $1; next }
		{ k = $2; e = "EVENT"; if (sub(/^ctr:/, "", k)) e = "CTR"
		  printf "%s,%s,%.2f,%s\n", e, d, ($1 - a[$2]) / n, k }' \
		"/var/tmp/stat-$d-1.tsv" "/var/tmp/stat-$d-2.tsv"
done
