#!/usr/bin/env bash
# bench/icount-report.py on a fixture: each row's runs, min, median, max and
# spread, the ratio lines (mbcf-lo / rxe, mbcf / TCP, message rates), a
# failed run ("nan") kept in the runs but out of min/median/max, and the
# usage errors.  Also bench/guest-icount.sh's row names: the report finds
# rows by them.
#   icount-report-check.sh BENCH_DIR
set -euo pipefail
bench=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
want() { grep -qxF -- "$1" "$tmp/icount.md" || { cat "$tmp/icount.md" >&2; fail "missing line: $1"; }; }

{
	echo "group,transport,test,size,mode,unit,run,value"
	for v in 20.00 20.10 19.90; do echo "latency,mbcf-lo,ib_send_lat,4,ev,us,1,$v"; done
	for v in 40.00 40.00 40.40; do echo "latency,rxe,ib_send_lat,4,ev,us,1,$v"; done
	for v in 25.00 nan 26.00; do echo "latency,mbcf,ib_send_lat,4,ev,us,1,$v"; done
	for v in 50.00 50.00 50.00; do echo "latency,tcp,rtt_half,4,ev,us,1,$v"; done
	for v in 0.0300 0.0310 0.0290; do echo "rate,mbcf-lo,ib_atomic_bw,8,poll,Mpps,1,$v"; done
	for v in 0.0100 0.0100 0.0100; do echo "rate,rxe,ib_atomic_bw,8,poll,Mpps,1,$v"; done
	echo "tick,rxe,ib_write_lat,4,poll,us,1,4000.03"
} >"$tmp/icount.csv"
python3 "$bench/icount-report.py" "$tmp/icount.csv" "$tmp/icount.md" "fixture" >/dev/null
want "| latency | mbcf-lo | ib_send_lat | 4 | ev | us | 20.00 20.10 19.90 | 19.90 | **20.00** | 20.10 | 1.00 % |"
want "| latency | rxe | ib_send_lat | 4 | ev | us | 40.00 40.00 40.40 | 40.00 | **40.00** | 40.40 | 1.00 % |"
# nan: shown, not counted; the median of two is the lower one
want "| latency | mbcf | ib_send_lat | 4 | ev | us | 25.00 nan 26.00 | 25.00 | **25.00** | 26.00 | 4.00 % |"
want "| tick | rxe | ib_write_lat | 4 | poll | us | 4000.0 | 4000.0 | **4000.0** | 4000.0 | 0.00 % |"
want "| ib_send_lat 4 B | ev | 0.500 (20.00 vs 40.00 us) | 0.500 (25.00 vs 50.00 us) |"
want "| ib_atomic_bw 8 B message rate | poll | 3.00x (0.0300 vs 0.0100 Mpps) | mbcf across the veth nan Mpps |"
# the tick row is no latency row: no ratio line for it
! grep -q "ib_write_lat 4 B" "$tmp/icount.md" || fail "the tick row has a ratio line"

# the names the guest script emits are the ones the report looks up
for n in 'ICOUNT,latency,tcp,rtt_half,$s,ev,us' 'row rate "$tr" ib_atomic_bw 8 poll Mpps' \
	'row rate "$tr" ib_send_bw 64 ev Mpps' 'ICOUNT,tick,$tr,ib_write_lat,4,poll'; do
	grep -qF -- "$n" "$bench/guest-icount.sh" || fail "guest-icount.sh does not emit: $n"
done

# usage errors
if python3 "$bench/icount-report.py" "$tmp/missing.csv" "$tmp/x.md" 2>/dev/null; then
	fail "a missing CSV was accepted"
fi
printf 'group,transport\nlatency,mbcf\n' >"$tmp/bad.csv"
if python3 "$bench/icount-report.py" "$tmp/bad.csv" "$tmp/x.md" 2>/dev/null; then
	fail "a CSV without the columns was accepted"
fi
echo "icount-report-check: ok"
