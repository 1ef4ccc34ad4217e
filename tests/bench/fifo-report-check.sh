#!/usr/bin/env bash
# bench/fifo-report.py on a fixture: the rate rows (median and range), the
# ratios taken run by run, the 16-sender verdicts against the target, the
# wake-up rows, a failed run (empty value) left out of medians and ratios,
# and the usage errors.  Also bench/guest-fifo.sh's row names.
#   fifo-report-check.sh BENCH_DIR
set -euo pipefail
bench=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
want() { grep -qxF -- "$1" "$tmp/fifo.md" || { cat "$tmp/fifo.md" >&2; fail "missing line: $1"; }; }

cat >"$tmp/fifo.csv" <<'CSV'
group,mode,topology,qps,procs,run,v1,v2,v3,v4,v5
rate,fifo,lo,16,4,1,300,2.0,0.5,4.0,1.0
rate,srq,lo,16,4,1,100,4.0,1.0,8.0,2.0
rate,imm,lo,16,4,1,150,3.0,1.0,6.0,1.5
rate,fifo,lo,16,4,2,200,2.0,0.5,4.0,1.0
rate,srq,lo,16,4,2,100,2.0,1.0,8.0,2.0
rate,imm,lo,16,4,2,100,4.0,1.0,6.0,1.5
rate,fifo,lo,16,4,3,,,,,
rate,srq,lo,16,4,3,100,2.0,1.0,8.0,2.0
rate,imm,lo,16,4,3,100,4.0,1.0,6.0,1.5
rate,fifo,veth,16,4,1,100,2.0,0.5,4.0,1.0
rate,srq,veth,16,4,1,100,1.0,0.5,4.0,1.0
rate,imm,veth,16,4,1,50,4.0,0.5,4.0,1.0
wake,signal,lo,1,1,1,10,20,30,40,
wake,send,lo,1,1,1,20,30,60,80,
CSV
python3 "$bench/fifo-report.py" "$tmp/fifo.csv" "$tmp/fifo.md" "fixture" >/dev/null
want "| lo | 16/4 | fifo | **250** (200-300) | **2.00** (2.00-2.00) | **0.50** (0.50-0.50) | **4.00** (4.00-4.00) | **1.00** (1.00-1.00) |"
want "| lo | 16/4 | srq | **100** (100-100) | **2.00** (2.00-4.00) | **1.00** (1.00-1.00) | **8.00** (8.00-8.00) | **2.00** (2.00-2.00) |"
# run 3's FIFO failed: its ratios are out, runs 1 and 2 remain
want "| lo | 16/4 | **2.50** (2.00-3.00) | **2.00** (2.00-2.00) | **0.75** (0.50-1.00) | **0.58** (0.50-0.67) |"
want "- lo at 16 senders: FIFO/SRQ messages/s 2.50 (target >= 1.5), receiver CPU per message FIFO/SRQ 0.750 (target < 1): met"
want "- veth at 16 senders: FIFO/SRQ messages/s 1.00 (target >= 1.5), receiver CPU per message FIFO/SRQ 2.000 (target < 1): missed"
want "| lo | signal | **10.0** (10.0-10.0) | **20.0** (20.0-20.0) | **30.0** (30.0-30.0) | **40.0** (40.0-40.0) |"
want "| lo | send | **20.0** (20.0-20.0) | **30.0** (30.0-30.0) | **60.0** (60.0-60.0) | **80.0** (80.0-80.0) |"
want "- lo: signal/send p50 round trip, run by run: **0.50** (0.50-0.50)"
want "- lo: signal/send p99 round trip, run by run: **0.50** (0.50-0.50)"

# the rows the guest script emits are the ones the report reads
for n in 'FIFO,rate,$m,$topo,$q,$p,$r' 'FIFO,wake,$m,$topo,1,1,$r'; do
	grep -qF -- "$n" "$bench/guest-fifo.sh" || fail "guest-fifo.sh does not emit: $n"
done

# usage errors
if python3 "$bench/fifo-report.py" "$tmp/fifo.csv" 2>/dev/null; then
	fail "a missing argument was accepted"
fi
if python3 "$bench/fifo-report.py" "$tmp/missing.csv" "$tmp/x.md" how 2>/dev/null; then
	fail "a missing CSV was accepted"
fi
echo "fifo-report-check: ok"
