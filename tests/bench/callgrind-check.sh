#!/usr/bin/env bash
# bench/callgrind-core.sh repeats exactly: two runs over the same benchmarks
# print the same instructions per operation, each a positive count; a
# memcpy of 1440 B costs more instructions than one of 64 B; bad arguments
# are refused.
#   callgrind-check.sh BENCH_DIR BUILD_DIR
set -euo pipefail
bench=$1 build=$2
fail() { echo "FAIL: $*" >&2; exit 1; }
command -v valgrind >/dev/null || { echo "SKIP: valgrind missing (scripts/install-deps.sh)"; exit 77; }
f='^BM_(RxWrite|Memcpy)/'
# the counts column (5th field) of each table row
counts() { "$bench/callgrind-core.sh" "$build" --filter "$f" --iters 2000 --no-times | awk -F'|' '/^\| BM_/ { gsub(/ /, ""); print $2, $3, $6 }'; }
a=$(counts)
b=$(counts)
[ "$(wc -l <<<"$a")" = 4 ] || fail "expected 4 rows, got: $a"
[ "$a" = "$b" ] || fail "counts differ between runs: $a / $b"
awk '!($3 > 0) { exit 1 }' <<<"$a" || fail "a count is not positive: $a"
m64=$(awk '$1 == "BM_Memcpy" && $2 == 64 { print $3 }' <<<"$a")
m1440=$(awk '$1 == "BM_Memcpy" && $2 == 1440 { print $3 }' <<<"$a")
awk -v x="$m64" -v y="$m1440" 'BEGIN { exit !(y > x) }' || fail "memcpy 1440 B ($m1440) not above 64 B ($m64)"
if "$bench/callgrind-core.sh" "$build" --iters 0 >/dev/null 2>&1; then fail "--iters 0 accepted"; fi
if "$bench/callgrind-core.sh" /nonexistent >/dev/null 2>&1; then fail "a build without the benchmark accepted"; fi
if MBCF_BENCH_ITERATIONS=-3 "$build/bench/core/mbcf_bench_core" >/dev/null 2>&1; then
	fail "MBCF_BENCH_ITERATIONS=-3 accepted"
fi
echo "callgrind-check: ok"
printf '%s\n' "$a"
