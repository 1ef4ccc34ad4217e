#!/usr/bin/env bash
# Instructions per operation of the protocol core's microbenchmarks
# (bench/core, mbcf_bench_core), counted by valgrind's callgrind, beside
# their times per operation on this host.
#   bench/callgrind-core.sh [BUILD_DIR] [--filter REGEX] [--iters N] [--no-times]
# Each benchmark runs under callgrind twice, with exactly N and 2N
# iterations (MBCF_BENCH_ITERATIONS), counting only inside the benchmark's
# own function (--toggle-collect); (Ir(2N) - Ir(N)) / N is the count per
# operation, the set-up cancelled out.  The count is a property of the
# binary, not of the host's load: the script prints the same counts on
# every run (the times beside them move with the host).  Prints a markdown
# table on stdout.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
src=$(cd "$here/.." && pwd)
build=$src/build
filter='.'
iters=20000
times=1
while [ $# -gt 0 ]; do
	case $1 in
	--filter) filter=$2; shift 2 ;;
	--iters) iters=$2; shift 2 ;;
	--no-times) times=0; shift ;;
	-*) echo "usage: $0 [BUILD_DIR] [--filter REGEX] [--iters N] [--no-times]" >&2; exit 2 ;;
	*) build=$1; shift ;;
	esac
done
[[ $iters =~ ^[1-9][0-9]*$ ]] || { echo "$0: --iters takes a positive count" >&2; exit 2; }
bin=$build/bench/core/mbcf_bench_core
[ -x "$bin" ] || { echo "$0: $bin missing (cmake --build $build --target mbcf_bench_core)" >&2; exit 1; }
command -v valgrind >/dev/null || { echo "$0: valgrind missing (scripts/install-deps.sh)" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# Times: the ordinary time-based run, median of 3 repetitions, wall-clock
# and CPU ns/op (on a loaded virtual machine the two disagree, and the CPU
# time can read too low: a check of the counts, not a figure to trust).
: >"$tmp/times"
[ "$times" = 0 ] || "$bin" --benchmark_filter="$filter" --benchmark_repetitions=3 \
	--benchmark_report_aggregates_only=true --benchmark_min_time=0.2 \
	--benchmark_format=json 2>/dev/null >"$tmp/times.json"
# "NAME real cpu" (ns) per benchmark, from the medians
[ "$times" = 0 ] || python3 -c '
import json, sys
for b in json.load(open(sys.argv[1]))["benchmarks"]:
    if b.get("aggregate_name") == "median" and b["time_unit"] == "ns":
        print(b["run_name"], b["real_time"], b["cpu_time"])
' "$tmp/times.json" >"$tmp/times"

# Instructions collected inside FUNC (and what it calls) in a run of
# exactly N iterations of the one benchmark NAME.
count() { # name func n
	local f=$tmp/cg.$RANDOM
	MBCF_BENCH_ITERATIONS=$3 valgrind --tool=callgrind --callgrind-out-file="$f" \
		--toggle-collect="$2" --dump-line=no "$bin" \
		--benchmark_filter="^$1(/|\$)" >/dev/null 2>"$f.err" ||
		{ cat "$f.err" >&2; return 1; }
	awk '/^summary:/ { print $2; found = 1 } END { if (!found) exit 1 }' "$f"
}

echo "| benchmark | payload (B) | real ns/op | CPU ns/op | instructions/op |"
echo "|---|---:|---:|---:|---:|"
for b in BM_RxWrite BM_TxWrite BM_Memcpy BM_MemcpyFrame BM_MemcpyRing; do
	for s in 64 1440; do
		name=$b/$s
		[[ $name =~ $filter ]] || continue
		# the function holding the benchmark's loop (copy_loop for the memcpy ones)
		func="*$b(benchmark::State&)"
		case $b in BM_Memcpy*) func='*copy_loop*' ;; esac
		a=$(count "$name" "$func" "$iters")
		c=$(count "$name" "$func" "$((2 * iters))")
		ns=$(awk -v n="$name" '$1 == n { printf "%.1f | %.1f", $2, $3 }' "$tmp/times")
		awk -v s="$s" -v a="$a" -v c="$c" -v i="$iters" -v t="${ns:-? | ?}" -v b="$b" \
			'BEGIN { printf "| %s | %s | %s | %.2f |\n", b, s, t, (c - a) / i }'
	done
done
