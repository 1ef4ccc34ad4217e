#!/bin/bash
# bench/guest-icount.sh: runs inside the guest that `bench/run.sh --icount`
# boots with a deterministic clock (tests/vm/run.sh --icount: one vCPU,
# single-threaded TCG, 2^SHIFT ns of guest time per executed instruction,
# idle time skipped).  A latency figure is then an instruction count.
#   guest-icount.sh RUNS ITERS [ROWS]
# Prints, per measured run, "ICOUNT,<group>,<transport>,<test>,<size>,<mode>,
# <unit>,<run>,<value>" on stdout; a row that cannot run prints "nan".
#
# One vCPU shapes what can be measured: two busy-polling ends only meet when
# the scheduler switches them (every 4 ms tick), so each row runs in event
# mode (-e: the end that waits sleeps on its completion channel).  Where
# only one end has work -- ib_read_lat, ib_atomic_lat, ib_atomic_bw: the
# responder is the device, its server process waits in a socket read -- the
# client polls as it would on real hardware; the -e rows of those are
# printed too.  ib_write_lat has no event mode (both ends poll the target
# buffer itself; perftest: "Events feature not available on WRITE verb"),
# so on one vCPU it measures the tick: it is run once, printed in group
# "tick" and left out of the ratios.
# rxe across the veth (rxe-veth): rxe1 on veth1 in ns1, added for those
# rows only; rxe's UDP socket lives in the initial namespace (6.1), so
# these rows may fail ("nan").
set -u
# shellcheck source=../tests/vm/lib.sh
. "$MBCF_VM_LIB"
runs=${1:-3} iters=${2:-1000} only=${3:-}
[ "${VM_MBCF:-0}" = 1 ] || vm_die "mbcf0/mbcf1 missing"

want() { [ -z "$only" ] || [[ ",$only," == *",$1,"* ]]; }

# One perftest run: prints t_typical (us) of a *_lat test, or the message
# rate (Mpps) of a *_bw test.
pt_once() { # transport test size mode [extra...]
	local tr=$1 t=$2 s=$3 mode=$4 dev0 dev1 gid out col cl=() srv=127.0.0.1
	shift 4
	case $tr in
	mbcf) dev0=mbcf0 dev1=mbcf1 gid=0 cl=(ip netns exec ns1) srv=$VM_IP0 ;;
	mbcf-lo) dev0=mbcf0 dev1=mbcf0 gid=0 ;;
	rxe) dev0=rxe0 dev1=rxe0 gid=1 ;;
	rxe-veth) dev0=rxe0 dev1=rxe1 gid=1 cl=(ip netns exec ns1) srv=$VM_IP0 ;;
	esac
	col=5	# t_typical (us) of *_lat; MsgRate (Mpps) of *_bw
	local m=(-s "$s")
	case $t in ib_atomic_*) m=() ;; esac	# always 8 B; perftest refuses -s
	[ "$mode" = ev ] && m+=(-e)
	# a run whose client found no server yet (it starts from the host's
	# files: slow) or failed is run again, once
	for _ in 1 2 3; do
		timeout 120 "$t" -d $dev0 -x $gid -F "${m[@]}" "$@" >/var/tmp/icount-server.log 2>&1 &
		out=$(vm_retry 50 0.2 "${cl[@]}" timeout 120 "$t" -d $dev1 -x $gid -F "${m[@]}" "$@" "$srv" 2>&1)
		wait
		awk -v s="$s" '$1 == s && $2 ~ /^[0-9]+$/ { f = 1 } END { exit !f }' <<<"$out" && break
	done
	awk -v s="$s" -v c="$col" '$1 == s && $2 ~ /^[0-9]+$/ { print $c; exit }' <<<"$out" | grep . ||
		{ tail -n 3 <<<"$out" | sed "s/^/$t $tr: /" >&2
		  tail -n 3 /var/tmp/icount-server.log | sed "s/^/$t $tr server: /" >&2; echo nan; }
}

# One row: RUNS runs, after a warm-up run at the first use of each program
# on each transport (a program's first start reads from the host, and the
# guest's clock jumps while it waits; later starts hit the page cache).
declare -A warm
row() { # group transport test size mode unit [extra...]
	local g=$1 tr=$2 t=$3 s=$4 mode=$5 u=$6 i v
	shift 6
	[ -n "${warm[$tr,$t]:-}" ] || pt_once "$tr" "$t" "$s" "$mode" "$@" >/dev/null
	warm[$tr,$t]=1
	for ((i = 1; i <= runs; i++)); do
		v=$(pt_once "$tr" "$t" "$s" "$mode" "$@")
		echo "ICOUNT,$g,$tr,$t,$s,$mode,$u,$i,$v"
	done
}

# TCP's half round trip across the veth: sockperf ping-pong, blocking
# sockets (epoll), server on veth0, client in ns1; 1 s of guest time per
# run (sockperf's shortest), after a warm-up run.  sockperf's
# smallest message is 14 B, used for the 4 B row.
tcp_row() { # size
	local s=$1 m=$1 i v spid
	[ "$m" -lt 14 ] && m=14
	timeout 600 sockperf server --tcp -i "$VM_IP0" -p 11111 >/dev/null 2>&1 &
	spid=$!
	vm_wait_listen tcp:11111 >&2
	for ((i = 0; i <= runs; i++)); do	# run 0: warm-up
		v=$(in_ns1 timeout 300 sockperf ping-pong --tcp -i "$VM_IP0" -p 11111 -m "$m" -t 1 2>&1 |
			awk '/percentile 50.000 =/ { x = $NF } END { print x }')
		[ "$i" = 0 ] || echo "ICOUNT,latency,tcp,rtt_half,$s,ev,us,$i,${v:-nan}"
	done
	kill "$spid" 2>/dev/null
	wait "$spid" 2>/dev/null
	return 0
}

transport() { # tr
	local tr=$1 t s
	want "$tr" || return 0
	if [ "$tr" = rxe-veth ]; then
		in_ns1 rdma link add rxe1 type rxe netdev veth1 ||
			{ echo "ICOUNT,latency,rxe-veth,ib_send_lat,4,ev,us,1,nan"; return 0; }
		if [ "$(pt_once rxe-veth ib_send_lat 4 ev -n 100)" = nan ]; then
			echo "ICOUNT,latency,rxe-veth,ib_send_lat,4,ev,us,1,nan"
			in_ns1 rdma link delete rxe1
			return 0
		fi
	fi
	for t in ib_send_lat ib_read_lat; do
		for s in 4 1440; do
			row latency "$tr" "$t" "$s" ev us -n "$iters"
		done
	done
	row latency "$tr" ib_read_lat 4 poll us -n "$iters"
	row latency "$tr" ib_atomic_lat 8 ev us -n "$iters"
	row latency "$tr" ib_atomic_lat 8 poll us -n "$iters"
	# the tick, to show it (see above): one run, not a figure
	[ "$tr" = mbcf-lo ] &&
		echo "ICOUNT,tick,$tr,ib_write_lat,4,poll,us,1,$(pt_once "$tr" ib_write_lat 4 poll -n 100)"
	row rate "$tr" ib_atomic_bw 8 poll Mpps -n "$((iters * 5))"
	row rate "$tr" ib_send_bw 64 ev Mpps -n "$((iters * 5))"
	[ "$tr" = rxe-veth ] && in_ns1 rdma link delete rxe1
	return 0
}

# the rows of the targets first
transport mbcf-lo
transport rxe
transport mbcf
want tcp && tcp_row 4
transport rxe-veth
want tcp && tcp_row 1440
exit 0
