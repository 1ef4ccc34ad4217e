#!/usr/bin/env bash
# The NVMe over Fabrics rows of `bench/run.sh --storage-only` in the guest
# whose clock counts instructions (tests/vm/run.sh --icount: one vCPU,
# single-threaded TCG, 1 ns of guest time per executed instruction, idle
# time skipped -- but a wait for a timer still advances the clock to it).
# So a row repeats whatever the host's load: guest time per I/O is the
# instructions the I/O's path executes plus the timer waits it sits out.
#   bench/storage-icount.sh [--reps N] [--ios N] [--seq-ios N] [--trs "mbcf tcp rxe"]
#                           [--profile] [--period NS] [--top N] [--no-report]
# Same setup as bench/guest-storage.sh (tests/vm/storage-lib.sh): a 64 MiB
# brd ramdisk as namespace 1 of one nvmet subsystem, one port at a time on
# 192.0.2.10:4420; nvme-rdma on mbcf0 (rxe0 removed), nvme-tcp over lo, and
# nvme-rdma on rxe0 (mbcf0 removed); fio libaio O_DIRECT iodepth 32 on the
# one vCPU.  Each run moves a fixed number of I/Os (--ios 4 KiB random
# reads, default 20000; --seq-ios 128 KiB sequential reads, default 2000),
# after a warm-up run of a tenth of it; N runs (default 3) of each.
# Per transport and size, after the measured runs (figures, not samples):
#   - one run under `perf stat` of tracepoints (work items queued, context
#     switches, wake-ups, hrtimer and timer starts, softirqs raised), and
#     one under `perf record` of the work items, hrtimers and softirqs by
#     function, each per I/O;
#   - for mbcf, mbcf0's counters per I/O over the measured runs;
#   - --profile: the 4 KiB row under `perf record -e cpu-clock` (the
#     guest's clock: a sample per PERIOD instructions) at IOS and 3 x IOS
#     I/Os; the difference of a symbol's samples x PERIOD / (2 x IOS) is
#     what it costs per I/O, start-up cancelled (as bench/icount-profile.sh),
#     by symbol, object, and mbcf's source file.
# Output: bench/results/storage-icount.csv (every run) and storage-icount.md
# (bench/storage-icount-report.py), the guest's log in
# bench/results/guest-storage-icount.log (not committed).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
src=$(cd "$here/.." && pwd)
reps=3 ios=20000 seq_ios=2000 trs="mbcf tcp rxe" profile=0 period=20011 top=40 report=1
while [ $# -gt 0 ]; do
	case $1 in
	--reps) reps=$2; shift 2 ;;
	--ios) ios=$2; shift 2 ;;
	--seq-ios) seq_ios=$2; shift 2 ;;
	--trs) trs=$2; shift 2 ;;
	--profile) profile=1; shift ;;
	--period) period=$2; shift 2 ;;
	--top) top=$2; shift 2 ;;
	--no-report) report=0; shift ;;
	--guest) break ;;
	*) echo "usage: $0 [--reps N] [--ios N] [--seq-ios N] [--trs LIST] [--profile] [--period NS] [--top N] [--no-report]" >&2; exit 2 ;;
	esac
done

if [ "${1:-}" != --guest ]; then
	for v in "$reps" "$ios" "$seq_ios" "$period" "$top"; do
		[[ $v =~ ^[1-9][0-9]*$ ]] || { echo "$0: counts must be positive" >&2; exit 2; }
	done
	out=$here/results
	mkdir -p "$out"
	log=$out/guest-storage-icount.log
	t0=$EPOCHREALTIME
	MBCF_VM_SLUB_DEBUG= "$src/tests/vm/run.sh" --icount --build "${MBCF_BUILD:-$src/build}" \
		--timeout "${ICOUNT_TIMEOUT:-5400}" "$here/storage-icount.sh" --guest \
		"$reps" "$ios" "$seq_ios" "$trs" "$profile" "$period" "$top" | tee "$log"
	[ "$report" = 1 ] || exit 0
	{
		echo "transport,test,size,unit,run,value"
		grep '^SICOUNT,' "$log" | sed 's/^SICOUNT,//'
	} >"$out/storage-icount.csv"
	how="bench/storage-icount.sh --reps $reps --ios $ios --seq-ios $seq_ios$([ "$profile" = 1 ] && echo " --profile"), host time $(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.0f", b - a }') s"
	exec /usr/bin/python3 "$here/storage-icount-report.py" "$out/storage-icount.csv" "$log" \
		"$out/storage-icount.md" "$how"
fi

# --- in the guest ---------------------------------------------------------
set +e +o pipefail
set -u
shift
reps=$1 ios=$2 seq_ios=$3 trs=$4 profile=$5 period=$6 top=$7
# shellcheck source=../tests/vm/lib.sh
. "$MBCF_VM_LIB"
[ "${VM_MBCF:-0}" = 1 ] || vm_die "mbcf0/mbcf1 missing"
# what bench/guest-storage.sh takes from bench/guest.sh
REPS=$reps
ack=$(cat /sys/module/mbcf/parameters/ack_interval)
emit() { :; }
kernel_ticks() { awk '$1 == "cpu" { print $4 + $7 + $8; exit }' /proc/stat; }
ST_CPU=0
# shellcheck source=guest-storage.sh
. "$here/guest-storage.sh"
echo 0 >/proc/sys/kernel/kptr_restrict
echo -1 >/proc/sys/kernel/perf_event_paranoid
hz=$(getconf CLK_TCK)
vm_log "storage-icount: kernel $(uname -r), $(nproc) vCPU, reps $reps, ios $ios / $seq_ios"

# idle time so far, us: every cpuidle state's residency (the timer waits
# the guest's clock jumped over)
idle_us() {
	cat /sys/devices/system/cpu/cpu*/cpuidle/state*/time 2>/dev/null | awk '{ n += $1 } END { print n + 0 }'
}

# sf_fio RW BS IOS [WRAP...]: one fio run of IOS I/Os (WRAP: a command
# prefix, perf); prints "IOPS MiB/s IOS TICKS IDLE_US RUNTIME_MS" or nothing
sf_fio() {
	local rw=$1 bs=$2 n=$3 t0 t1 i0 i1 out
	shift 3
	t0=$(kernel_ticks)
	i0=$(idle_us)
	out=$("$@" taskset -c "$ST_CPU" fio --name=st --filename="$ST_DEV" --direct=1 \
		--ioengine=libaio --iodepth=32 --rw="$rw" --bs="$bs" --io_size=$((n * bs)) \
		--norandommap --randrepeat=0 --output-format=json 2>>"$ST_LOG/fio.err")
	t1=$(kernel_ticks)
	i1=$(idle_us)
	python3 -c '
import json, sys
t = sys.stdin.read()
r = json.loads(t[t.index("{"):])["jobs"][0]["read"]
if r["total_ios"] > 0:
    print("%.1f %.2f %d %s %s %d" % (r["iops"], r["bw_bytes"] / 1048576, r["total_ios"], sys.argv[1], sys.argv[2], r["runtime"]))
' "$((t1 - t0))" "$((i1 - i0))" <<<"$out" 2>>"$ST_LOG/fio.err"
}

row() { # transport test bs unit run value
	echo "SICOUNT,$1,$2,$3,$4,$5,$6"
}

# counts DATA: "<samples>\t<object> <symbol>" for every symbol of a record
counts() {
	perf report -i "$1" --stdio --sort dso,sym -F sample,dso,sym 2>/dev/null |
		awk '/^ *[0-9]+ / { n = $1; $1 = ""; sub(/^ +/, ""); sub(/ \[[.k]\] /, " "); print n "\t" $0 }'
}

EVENTS=workqueue:workqueue_queue_work,workqueue:workqueue_execute_start,sched:sched_switch,sched:sched_wakeup,timer:hrtimer_start,timer:hrtimer_expire_entry,timer:timer_start,irq:softirq_raise,irq:softirq_entry

# sf_trace TR RW BS IOS: tracepoints per I/O over one run; then which work
# items, hrtimers, timers and softirqs, by function, per I/O
sf_trace() {
	local tr=$1 rw=$2 bs=$3 n=$4 r f=$ST_LOG/stat-$1-$3
	command -v perf >/dev/null || return 0
	r=$(sf_fio "$rw" "$bs" "$n" perf stat -a -x, -o "$f" -e "$EVENTS" --)
	# shellcheck disable=SC2086
	set -- $r
	[ -n "${3:-}" ] || { vm_log "storage-icount: $tr $bs: the perf stat run failed"; return 0; }
	awk -F, -v n="$3" -v tr="$tr" -v bs="$bs" '$3 ~ /:/ && $1 ~ /^[0-9]+$/ {
		printf "TRACE,%s,%s,%s,%.3f\n", tr, bs, $3, $1 / n }' "$f"
	r=$(sf_fio "$rw" "$bs" "$n" perf record -q -a -o "$f.data" \
		-e workqueue:workqueue_queue_work -e timer:hrtimer_start -e timer:timer_start \
		-e irq:softirq_raise -e sched:sched_wakeup --)
	# shellcheck disable=SC2086
	set -- $r
	[ -n "${3:-}" ] || return 0
	perf script -i "$f.data" -F event,trace 2>/dev/null | awk -v n="$3" -v tr="$tr" -v bs="$bs" '
		{ ev = $1; sub(/:$/, "", ev); k = ""
		  for (i = 2; i <= NF; i++) {
			if ($i ~ /^function=/) k = $i
			else if ($i ~ /action=/) { k = $i; gsub(/[][]/, "", k) }
			else if ($i ~ /^comm=/ && ev ~ /wakeup/) k = $i
		  }
		  if (ev ~ /wakeup/) sub(/[0-9\/:]+$/, "", k)	# kworker/0:1H -> kworker/
		  c[ev " " k]++ }
		END { for (x in c) printf "TRACEFN,%s,%s,%s,%.3f\n", tr, bs, x, c[x] / n }' | sort -t, -k5 -rn
}

# sf_profile TR: the 4 KiB row at IOS and 3 x IOS I/Os under perf record
sf_profile() {
	local tr=$1 n1=$ios n2=$((ios * 3)) r d=$ST_LOG/prof-$1 a b
	command -v perf >/dev/null || return 0
	for n in $n1 $n2; do
		r=$(sf_fio randread 4096 "$n" perf record -q -a -e cpu-clock -c "$period" -o "$d-$n.data" --)
		vm_log "storage-icount: profile $tr $n I/Os: $r"
		counts "$d-$n.data" >"$d-$n.tsv"
	done
	# who calls the kernel's generic work (page clearing, copies, work
	# items, context switches): a call-graph record of the short run
	sf_fio randread 4096 "$n1" perf record -q -a -g -e cpu-clock -c "$period" -o "$d-g.data" -- >/dev/null
	for s in clear_page_erms memset_erms memcpy_erms mod_delayed_work_on queue_work_on finish_task_switch.isra.0 _raw_spin_unlock_irqrestore; do
		perf report -i "$d-g.data" --stdio --no-children -S "$s" -G --percent-limit 3 2>/dev/null |
			grep -v '^#' | sed '/^$/d' | head -n 60 | sed "s/^/CALLERS,$tr,$s,/"
	done
	awk -F '\t' -v p="$period" -v n="$((n2 - n1))" '
		FNR == NR { a[$2] = $1; next }
		{ b[$2] = $1 }
		END { for (k in b) printf "%.0f\t%s\n", (b[k] - a[k]) * p / n, k
		      for (k in a) if (!(k in b)) printf "%.0f\t%s\n", -a[k] * p / n, k }' \
		"$d-$n1.tsv" "$d-$n2.tsv" | sort -t "$(printf '\t')" -k1,1 -rn >"$d.tsv"
	echo "PROFILE,$tr,randread,4096,$(awk -F '\t' '{ n += $1 } END { print n + 0 }' "$d.tsv")"
	awk -F '\t' -v d="$tr" -v n="$top" 'NR <= n { printf "SYM,%s,%s,%s\n", d, $1, $2 }' "$d.tsv"
	awk -F '\t' -v d="$tr" '{ o = $2; sub(/ .*/, "", o); s[o] += $1 }
		END { for (o in s) printf "DSO,%s,%s,%s\n", d, s[o], o }' "$d.tsv" | sort -t, -k3 -rn
	awk -F '\t' -v d="$tr" '
		FNR == NR { f[$1] = $2; next }
		{ o = $2; s = $2; sub(/ .*/, "", o); sub(/^[^ ]* /, "", s)
		  k = (s in f) ? f[s] : (o == "[kernel.kallsyms]" ? "(kernel)" : "(" o ")")
		  sum[k] += $1 }
		END { for (k in sum) printf "FILE,%s,%s,%s\n", d, sum[k], k }' \
		/var/tmp/mbcf-syms.tsv "$d.tsv" | sort -t, -k3 -rn
}

# sf_case TR RW BS IOS: a warm-up, REPS runs, the rows; then the traces
sf_case() {
	local tr=$1 rw=$2 bs=$3 n=$4 i r c0 c1 tot=0
	sf_fio "$rw" "$bs" $((n / 10 + 1)) >/dev/null
	[ "$tr" = mbcf ] && c0=$(st_ctrs mbcf0)
	for ((i = 1; i <= reps; i++)); do
		r=$(sf_fio "$rw" "$bs" "$n")
		vm_log "storage-icount: $tr $rw $bs run $i: ${r:-failed} (IOPS MiB/s IOs kernel-ticks idle-us runtime-ms)"
		[ -n "$r" ] || r="nan nan 0 0 0 0"
		# shellcheck disable=SC2086 # six words
		set -- $r
		tot=$((tot + $3))
		row "$tr" "$rw" "$bs" IOPS "$i" "$1"
		row "$tr" "$rw" "$bs" MiB/s "$i" "$2"
		row "$tr" "$rw" "$bs" us/IO "$i" "$(awk -v x="$1" 'BEGIN { if (x > 0) printf "%.3f", 1e6 / x; else print "nan" }')"
		row "$tr" "$rw" "$bs" kcpu_us/IO "$i" "$(awk -v t="$4" -v n="$3" -v hz="$hz" 'BEGIN { if (n > 0) printf "%.3f", t / hz / n * 1e6; else print "nan" }')"
		row "$tr" "$rw" "$bs" idle_us/IO "$i" "$(awk -v t="$5" -v n="$3" 'BEGIN { if (n > 0) printf "%.3f", t / n; else print "nan" }')"
	done
	if [ "$tr" = mbcf ] && [ "$tot" -gt 0 ]; then
		c1=$(st_ctrs mbcf0)
		awk -v n="$tot" -v bs="$bs" 'NR == FNR { a[$1] = $2; next }
			($2 - a[$1]) > 0 { printf "CTR,mbcf,%s,%s,%.3f\n", bs, $1, ($2 - a[$1]) / n }' \
			<(printf '%s\n' "$c0") <(printf '%s\n' "$c1")
		rdma -dd res show qp link mbcf0/1 2>/dev/null | grep -v 'qpn 1 ' | sed 's/^/QPSTATE,/' | head -n 8
	fi
	sf_trace "$tr" "$rw" "$bs" "$n"
}

sf_nvme() { # transport(mbcf|tcp|rxe)
	local tt=rdma
	[ "$1" = tcp ] && tt=tcp
	st_connect $tt
	sf_case "$1" randread 4096 "$ios"
	sf_case "$1" read 131072 "$seq_ios"
	[ "$profile" = 1 ] && sf_profile "$1"
	st_disconnect
}

if [ "$profile" = 1 ]; then
	nm -l --defined-only "$MBCF_BUILD/kmod/mbcf.ko" |
		awk '$2 ~ /^[tT]$/ && NF >= 4 { f = $4; sub(/:[0-9]+$/, "", f); sub(/.*\/src\//, "", f); print $3 "\t" f }' >/var/tmp/mbcf-syms.tsv
fi
vm_wait_port mbcf0 20 && vm_wait_port rxe0 20 || exit 1
rdma link delete rxe0 || vm_die "cannot remove rxe0"
st_nvmet_setup
for tr in $trs; do
	case $tr in
	mbcf | tcp) sf_nvme "$tr" ;;
	esac
done
if [[ " $trs " == *" rxe "* ]]; then
	rdma link delete mbcf0 || vm_die "cannot remove mbcf0"
	rdma link add rxe0 type rxe netdev veth0 || vm_die "rxe0"
	vm_wait_port rxe0 20 || exit 1
	sf_nvme rxe
fi
vm_dmesg_check
