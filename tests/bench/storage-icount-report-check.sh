#!/usr/bin/env bash
# bench/storage-icount-report.py on a fixture: a row's median and spread per
# transport and its ratios mbcf / NVMe-TCP and mbcf / rxe, a failed run
# ("nan") kept in the runs but out of median and spread, a row with one
# transport only, the tracepoints, work items and mbcf's counters per I/O
# from the guest's log, the profile, and the usage errors.  Also
# bench/storage-icount.sh's CSV header and log lines: the report reads them.
#   storage-icount-report-check.sh BENCH_DIR
set -euo pipefail
bench=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
want() { grep -qxF -- "$1" "$tmp/si.md" || { cat "$tmp/si.md" >&2; fail "missing line: $1"; }; }

# the CSV: bench/storage-icount.sh's header and its SICOUNT lines less the
# tag; runs TRANSPORT TEST SIZE UNIT VALUE...: one line per run
runs() {
	local tr=$1 test=$2 size=$3 unit=$4 i=0 v
	shift 4
	for v; do i=$((i + 1)); echo "$tr,$test,$size,$unit,$i,$v"; done
}
{
	echo "transport,test,size,unit,run,value"
	runs mbcf randread 4096 IOPS 1000.0 1010.0 990.0
	runs tcp randread 4096 IOPS 800.0 800.0 808.0
	runs rxe randread 4096 IOPS nan 500.0 520.0
	runs mbcf read 131072 MiB/s 12.5 12.75
} >"$tmp/si.csv"
# the guest's log: the report takes its TRACE, TRACEFN, CTR, PROFILE, FILE
# and SYM lines and skips the rest
cat >"$tmp/si.log" <<'LOG'
mbcf-vm: storage-icount: mbcf randread 4096 run 1: 1000.0 3.91 20000 12 345 20000 (IOPS MiB/s IOs kernel-ticks idle-us runtime-ms)
CTR,mbcf,4096,tx_pkts,2.000
CTR,mbcf,4096,acks_rx,1.000
QPSTATE,link mbcf0/1 lqpn 17
TRACE,mbcf,4096,workqueue:workqueue_queue_work,3.000
TRACE,tcp,4096,workqueue:workqueue_queue_work,1.000
TRACE,rxe,4096,workqueue:workqueue_queue_work,2.500
TRACEFN,mbcf,4096,workqueue:workqueue_queue_work function=mbcf_qp_work,3.000
TRACEFN,tcp,4096,timer:timer_start function=tcp_delack_timer,0.010
PROFILE,mbcf,randread,4096,52000
SYM,mbcf,20000,[kernel.kallsyms] clear_page_erms
FILE,mbcf,30000,kmod/qp.c
DSO,mbcf,30000,[mbcf]
LOG
python3 "$bench/storage-icount-report.py" "$tmp/si.csv" "$tmp/si.log" "$tmp/si.md" "fixture"
want '`fixture`'
# 1000/800 and 1000/500; spread = (max - min) / median
want "| randread 4096 B | IOPS | 1000 (2.00 %) | 800.0 (1.00 %) | 500.0 (4.00 %) | 1.250 | 2.000 |"
# rxe's nan (first: max and min would take it): listed in the runs, out of
# median and spread (of two values, the lower)
want "Runs: mbcf randread 4096 IOPS: 1000 1010 990.0; tcp randread 4096 IOPS: 800.0 800.0 808.0; rxe randread 4096 IOPS: nan 500.0 520.0"
# mbcf alone: empty cells, no ratios
want "| read 131072 B | MiB/s | 12.5 (2.00 %) |  |  |  |  |"
want "## Per I/O, 4096 B: tracepoints (one run under perf stat)"
want "| workqueue:workqueue_queue_work | 3.000 | 1.000 | 2.500 |"
want "| workqueue:workqueue_queue_work function=mbcf_qp_work | 3.000 |  |  |"
# below 0.05 per I/O: left out
! grep -q tcp_delack_timer "$tmp/si.md" || fail "a work item under 0.05 per I/O is listed"
want "mbcf0's counters per I/O, 4096 B (measured runs): acks_rx 1.000, tx_pkts 2.000"
want "Total 52000 (samples of the longer run less the shorter's, per I/O)."
want "| 30000 | kmod/qp.c |"
want "| 20000 | [kernel.kallsyms] clear_page_erms |"

# what bench/storage-icount.sh writes is what the report reads
for n in 'echo "transport,test,size,unit,run,value"' 'echo "SICOUNT,$1,$2,$3,$4,$5,$6"' \
	'row "$tr" "$rw" "$bs" IOPS "$i" "$1"' 'row "$tr" "$rw" "$bs" MiB/s "$i" "$2"' \
	'sf_case "$1" randread 4096 "$ios"' 'sf_case "$1" read 131072 "$seq_ios"' \
	'mbcf | tcp) sf_nvme "$tr"' 'sf_nvme rxe' \
	'printf "TRACE,%s,%s,%s,%.3f\n", tr, bs, $3, $1 / n' \
	'printf "TRACEFN,%s,%s,%s,%.3f\n", tr, bs, x, c[x] / n' \
	'printf "CTR,mbcf,%s,%s,%.3f\n", bs, $1, ($2 - a[$1]) / n' \
	'echo "PROFILE,$tr,randread,4096,' 'printf "SYM,%s,%s,%s\n", d, $1, $2' \
	'printf "FILE,%s,%s,%s\n", d, sum[k], k'; do
	grep -qF -- "$n" "$bench/storage-icount.sh" || fail "storage-icount.sh does not emit: $n"
done

# usage errors
if python3 "$bench/storage-icount-report.py" "$tmp/si.csv" "$tmp/si.log" 2>"$tmp/err"; then
	fail "a missing OUT.md was accepted"
fi
grep -q '^usage: ' "$tmp/err" || fail "no usage message: $(cat "$tmp/err")"
if python3 "$bench/storage-icount-report.py" "$tmp/missing.csv" "$tmp/si.log" "$tmp/x.md" 2>/dev/null; then
	fail "a missing CSV was accepted"
fi
if python3 "$bench/storage-icount-report.py" "$tmp/si.csv" "$tmp/missing.log" "$tmp/x.md" 2>/dev/null; then
	fail "a missing log was accepted"
fi
printf 'transport,test\nmbcf,randread\n' >"$tmp/bad.csv"
if python3 "$bench/storage-icount-report.py" "$tmp/bad.csv" "$tmp/si.log" "$tmp/x.md" 2>/dev/null; then
	fail "a CSV without the columns was accepted"
fi
echo "storage-icount-report-check: ok"
