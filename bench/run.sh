#!/usr/bin/env bash
# One command: mbcf against rxe, TCP and the link's raw frame capacity, all
# measured in one QEMU guest run (bench/guest.sh), then tabulated and
# plotted by bench/report.py into bench/results/.
#   bench/run.sh [--quick] [--reps N]
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
src=$(cd "$here/.." && pwd)
quick=0
reps=5
while [ $# -gt 0 ]; do
	case $1 in
	--quick) quick=1; shift ;;
	--reps) reps=$2; shift 2 ;;
	*) echo "usage: $0 [--quick] [--reps N]" >&2; exit 2 ;;
	esac
done

"$src/scripts/build.sh"
out=$here/results
mkdir -p "$out"
log=$out/guest.log
"$src/tests/vm/run.sh" --build "$src/build" \
	--timeout 5400 "$here/guest.sh" "$quick" "$reps" | tee "$log"
grep '^BENCH,' "$log" | sed 's/^BENCH,//' >"$out/results.csv.new"
{
	echo "group,transport,test,size,mtu,ack_interval,unit,median,runs"
	cat "$out/results.csv.new"
} >"$out/results.csv"
rm -f "$out/results.csv.new"
how="bench/run.sh$([ "$quick" = 1 ] && echo " --quick") --reps $reps, $(date -u +%Y-%m-%d), kernel $(ls /lib/modules | sort -V | tail -n 1)"
/usr/bin/python3 "$here/report.py" "$out/results.csv" "$out" "$how"
