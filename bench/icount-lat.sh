#!/usr/bin/env bash
# Latency that repeats: ib_send_lat -e (or ib_write_lat, --poll), 4 B, both QPs on one device (loopback),
# for mbcf0 and rxe0, RUNS runs each, inside one guest whose clock counts
# instructions (tests/vm/run.sh --icount: -icount shift=0,sleep=off, one
# vCPU, single-threaded TCG).  A figure is then an instruction count (1 ns
# per guest instruction), whatever the host does.
#   bench/icount-lat.sh [--runs N] [--iters N] [--shift S] [--poll]
# Event mode (ib_send_lat -e; ib_write_lat has no -e) by default: with one
# vCPU, two busy-polling ends only meet when the scheduler switches them,
# and would measure its time slice (--poll: ib_write_lat, polling, to see).
# Prints "ICOUNT,<device>,<run>,<t_typical us>" lines and a spread line per
# device: (max - min) / median.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
src=$(cd "$here/.." && pwd)
runs=3 iters=1000 shift_=0 mode=-e
while [ $# -gt 0 ]; do
	case $1 in
	--runs) runs=$2; shift 2 ;;
	--iters) iters=$2; shift 2 ;;
	--shift) shift_=$2; shift 2 ;;
	--poll) mode=; shift ;;
	--guest) break ;;
	*) echo "usage: $0 [--runs N] [--iters N] [--shift S] [--poll]" >&2; exit 2 ;;
	esac
done

if [ "${1:-}" != --guest ]; then
	MBCF_VM_SLUB_DEBUG= exec "$src/tests/vm/run.sh" --icount="$shift_" \
		--build "${MBCF_BUILD:-$src/build}" --timeout "${ICOUNT_TIMEOUT:-1500}" \
		"$here/icount-lat.sh" --guest "$runs" "$iters" "$mode"
fi

# --- in the guest ---------------------------------------------------------
set -u
. "$MBCF_VM_LIB"
runs=$2 iters=$3 mode=${4:-}
t=ib_send_lat
[ -n "$mode" ] || t=ib_write_lat
devs=(rxe0)
[ "${VM_MBCF:-0}" = 1 ] && devs=(mbcf0 rxe0)

lat_once() { # dev gid
	local out
	# shellcheck disable=SC2086 # mode: -e or nothing
	timeout 600 $t -d "$1" -x "$2" -F -s 4 -n "$iters" $mode >/dev/null 2>&1 &
	# shellcheck disable=SC2086
	out=$(vm_retry 50 0.2 timeout 600 $t -d "$1" -x "$2" -F -s 4 -n "$iters" $mode 127.0.0.1 2>&1)
	wait
	awk '$1 == 4 && $2 ~ /^[0-9]+$/ { print $5; exit }' <<<"$out"
	grep -q '^ *4  *[0-9]' <<<"$out" || tail -n 5 <<<"$out" | sed "s/^/$t: /" >&2
}

for dev in "${devs[@]}"; do
	case $dev in rxe0) gid=1 ;; *) gid=0 ;; esac
	vals=
	for ((i = 1; i <= runs; i++)); do
		t0=$EPOCHREALTIME
		v=$(lat_once "$dev" "$gid")
		echo "ICOUNT,$dev,$t${mode:+ $mode},$i,${v:-nan}"
		vals="$vals ${v:-nan}"
	done
	echo "$vals" | tr ' ' '\n' | grep -v '^$' | sort -g | awk -v d="$dev" '{ v[n++] = $1 }
		END { m = v[int((n - 1) / 2)];
		      printf "SPREAD,%s,min %s,median %s,max %s,spread %.2f%%\n", d, v[0], m, v[n - 1], m ? 100 * (v[n - 1] - v[0]) / m : 0 }'
done
