#!/bin/bash
# bench/icount-fifo-profile.sh: where the FIFO's and SRQ's instructions per
# message go, in the instruction-counting guest (one vCPU: 1 ns of guest
# time per instruction, so a cpu-clock sample stands for PERIOD
# instructions).  Run it as
#   tests/vm/run.sh --icount --build build bench/icount-fifo-profile.sh [QPS PROCS MSGS PERIOD TOP TOPOS MODES]
# For every topology (lo: both ends on mbcf0; veth: senders on mbcf1) and
# mode (bench/fifo_rate.c's rate modes), fifo_rate runs MSGS and 5 x MSGS
# messages under `perf record -a`; a symbol's instructions per message are
# the difference of its samples x PERIOD / (4 x MSGS), start-up cancelled
# (as bench/icount-profile.sh).  Prints per run
#   PROFILE,<topo>,<mode>,<instructions per message>
#   SYM,<topo>,<mode>,<per message>,<object> <symbol>    (top TOP)
#   FILE,<topo>,<mode>,<per message>,<mbcf source file | (kernel) | (object)>
#   EVENT,<topo>,<mode>,<per message>,<tracepoint>       (perf stat, same difference)
set -u
. "$MBCF_VM_LIB"
Q=${1:-16} P=${2:-4} MSGS=${3:-8000} period=${4:-10007} top=${5:-120}
topos=${6:-"veth lo"} modes=${7:-"fifo srq"}
prog=${MBCF_BUILD:-}/bench/mbcf_fifo_rate
[ -x "$prog" ] || vm_die "no $prog"
vm_require_mbcf
vm_wait_port mbcf0 20 && vm_wait_port mbcf1 20 || exit 1
command -v perf >/dev/null || vm_die "no perf in the guest"
echo 0 >/proc/sys/kernel/kptr_restrict
echo -1 >/proc/sys/kernel/perf_event_paranoid
nm -l --defined-only "$MBCF_BUILD/kmod/mbcf.ko" |
	awk '$2 ~ /^[tT]$/ && NF >= 4 { f = $4; sub(/:[0-9]+$/, "", f); sub(/.*\/src\//, "", f); print $3 "\t" f }' >/var/tmp/mbcf-syms.tsv

counts() {
	perf report -i "$1" --stdio --sort dso,sym -F sample,dso,sym 2>/dev/null |
		awk '/^ *[0-9]+ / { n = $1; $1 = ""; sub(/^ +/, ""); sub(/ \[[.k]\] /, " "); print n "\t" $0 }'
}
# one TOPO MODE N: fifo_rate's arguments
args() {
	local a=mbcf0
	[ "$1" = veth ] && a=mbcf1
	echo rate -m "$2" -q "$Q" -p "$P" -n "$(($3 / Q / 16 * 16))" -a $a -b mbcf0 -r 0 -c 0
}
events=sched:sched_switch,sched:sched_wakeup,irq:softirq_raise,irq:softirq_entry,raw_syscalls:sys_enter,workqueue:workqueue_queue_work,timer:hrtimer_start
n1=$MSGS n2=$((MSGS * 5))
for topo in $topos; do
	for m in $modes; do
		# shellcheck disable=SC2046
		"$prog" $(args "$topo" "$m" 1600) >/dev/null 2>&1	# warm-up
		for n in $n1 $n2; do
			# shellcheck disable=SC2046
			perf record -q -a -e cpu-clock -c "$period" -o "/var/tmp/fp-$topo-$m-$n.data" -- \
				"$prog" $(args "$topo" "$m" "$n") >"/var/tmp/fp-$topo-$m-$n.out" 2>&1 ||
				{ tail -n 3 "/var/tmp/fp-$topo-$m-$n.out"; vm_die "$topo $m $n failed"; }
			grep '^RESULT' "/var/tmp/fp-$topo-$m-$n.out"
			counts "/var/tmp/fp-$topo-$m-$n.data" >"/var/tmp/fp-$topo-$m-$n.tsv"
			# shellcheck disable=SC2046
			perf stat -a -x, -e "$events" -o "/var/tmp/fs-$topo-$m-$n.csv" -- \
				"$prog" $(args "$topo" "$m" "$n") >/dev/null 2>&1
			awk -F, '$1 ~ /^[0-9]+$/ { print $1 "\t" $3 }' "/var/tmp/fs-$topo-$m-$n.csv" >"/var/tmp/fs-$topo-$m-$n.tsv"
		done
		d=$((n2 - n1))
		awk -F '\t' -v p="$period" -v n="$d" '
			FNR == NR { a[$2] = $1; next }
			{ b[$2] = $1 }
			END { for (k in b) printf "%.0f\t%s\n", (b[k] - a[k]) * p / n, k
			      for (k in a) if (!(k in b)) printf "%.0f\t%s\n", -a[k] * p / n, k }' \
			"/var/tmp/fp-$topo-$m-$n1.tsv" "/var/tmp/fp-$topo-$m-$n2.tsv" |
			sort -t "$(printf '\t')" -k1,1 -rn >"/var/tmp/fp-$topo-$m.tsv"
		total=$(awk -F '\t' '{ n += $1 } END { print n + 0 }' "/var/tmp/fp-$topo-$m.tsv")
		echo "PROFILE,$topo,$m,$total"
		awk -F '\t' -v t="$topo,$m" -v n="$top" 'NR <= n { printf "SYM,%s,%s,%s\n", t, $1, $2 }' "/var/tmp/fp-$topo-$m.tsv"
		awk -F '\t' -v t="$topo,$m" '
			FNR == NR { f[$1] = $2; next }
			{ o = $2; s = $2; sub(/ .*/, "", o); sub(/^[^ ]* /, "", s)
			  k = (s in f) ? f[s] : (o == "[kernel.kallsyms]" ? "(kernel)" : "(" o ")")
			  sum[k] += $1 }
			END { for (k in sum) printf "FILE,%s,%s,%s\n", t, sum[k], k }' \
			/var/tmp/mbcf-syms.tsv "/var/tmp/fp-$topo-$m.tsv" | sort -t, -k4 -rn
		awk -F '\t' -v t="$topo,$m" -v n="$d" '
			FNR == NR { a[$2] = $1; next }
			{ printf "EVENT,%s,%.3f,%s\n", t, ($1 - a[$2]) / n, $2 }' \
			"/var/tmp/fs-$topo-$m-$n1.tsv" "/var/tmp/fs-$topo-$m-$n2.tsv"
	done
done
vm_dmesg_check || exit 1
echo "fifo-profile: done"
