#!/bin/bash
# Guest test: the example programs (examples/) between mbcf0 (server,
# initial namespace) and mbcf1 (clients in ns1), on one device (loopback:
# server and clients all on mbcf0) and mixed; fifo_queue and fifo_rpc use
# the direct verbs (libmbcf.so.1 of the build tree).  Each program checks its own
# results; this script asserts their exit codes and the exact final values
# they print, that every QP, MR and PD is gone afterwards, and a clean
# kernel log.
#   tests/vm/run.sh --build BUILD tests/vm/examples.sh
set -u
# shellcheck source=lib.sh
. "${MBCF_VM_LIB:-$(dirname "$0")/lib.sh}"

failed=0
check() { "$@" || failed=$((failed + 1)); }

ex=${MBCF_BUILD:-}/examples
vm_have_mbcf || vm_die "mbcf module is not installed in the guest"
[ "${VM_MBCF:-0}" = 1 ] || vm_die "topology did not create mbcf0/mbcf1"
for p in write_pingpong atomic_counter cas_lock fifo_queue fifo_rpc; do
	[ -x "$ex/$p" ] || vm_die "no example program at $ex/$p"
done
check vm_wait_port mbcf0 10
check vm_wait_port mbcf1 10

logs=/var/tmp/examples
mkdir -p "$logs"
limit=120	# seconds per process: a hang fails the case, not the whole run

# A case: one server, then clients, each a background process with a log.
case_begin() {
	CASE=$1
	PIDS=()
	NAMES=()
	CASE_T0=$EPOCHREALTIME
	vm_log "--- $CASE"
}

# spawn NAME [in_ns1] PROG ARGS...: start one process of the case.
spawn() {
	local name=$1 pre=()
	shift
	if [ "$1" = in_ns1 ]; then
		pre=(ip netns exec "$VM_NS")
		shift
	fi
	local prog=$1
	shift
	"${pre[@]}" timeout "$limit" "$ex/$prog" "$@" >"$logs/$CASE.$name" 2>&1 &
	PIDS+=($!)
	NAMES+=("$name")
}

# case_end: wait for every process (their output is shown); each must exit 0.
case_end() {
	local i rc bad=0
	for i in "${!PIDS[@]}"; do
		wait "${PIDS[$i]}"
		rc=$?
		sed "s/^/  ${NAMES[$i]}| /" "$logs/$CASE.${NAMES[$i]}"
		assert_eq 0 "$rc" "$CASE: ${NAMES[$i]} exit status" || bad=1
	done
	vm_log "$CASE took $(vm_elapsed_since "$CASE_T0") s"
	return "$bad"
}

# line NAME REGEX: the one line of NAME's output that matches REGEX.
line() {
	grep -E -- "$2" "$logs/$CASE.$1" | head -n 1
}

# --- write_pingpong -----------------------------------------------------------
pingpong() {	# NAME CLIENT_NS CLIENT_DEV CLIENT_ADDR MODE SIZE ITERS
	local name=$1 ns=$2 cdev=$3 addr=$4 mode=$5 size=$6 n=$7 mname
	mname=$([ "$mode" = p ] && echo write+poll || echo write_with_imm)
	case_begin "$name"
	spawn server write_pingpong -d mbcf0 -p 18515 -m "$mode" -s "$size" -n "$n"
	# shellcheck disable=SC2086 # $ns is empty or in_ns1
	spawn client $ns write_pingpong -d "$cdev" -p 18515 -m "$mode" -s "$size" -n "$n" "$addr"
	case_end || return 1
	assert_eq "write_pingpong: server verified $n messages of $size bytes (mode $mname)" \
		"$(line server 'verified')" "$name: server" || return 1
	assert_eq "write_pingpong: client verified $n messages of $size bytes (mode $mname)" \
		"$(line client 'verified')" "$name: client" || return 1
	assert_match '^write_pingpong: round trip min [0-9.]+ us median [0-9.]+ us max [0-9.]+ us$' \
		"$(line client 'round trip')" "$name: latency line"
}
check pingpong pp_imm in_ns1 mbcf1 "$VM_IP0" i 64 200
check pingpong pp_poll in_ns1 mbcf1 "$VM_IP0" p 64 200
# 4000 bytes: three frames on a 1500-byte netdev, every byte checked.
check pingpong pp_imm_4000 in_ns1 mbcf1 "$VM_IP0" i 4000 100
check pingpong pp_loop_imm "" mbcf0 127.0.0.1 i 64 100
# Polling the last 8 bytes of a 4000-byte write, then checking the rest:
# fails now and then (November 2026: about one round trip in a few hundred;
# rxe in the same guest: never), as the end of the last frame becomes
# visible before the bytes in front of it.  See docs/porting.md.
check pingpong pp_poll_4000 in_ns1 mbcf1 "$VM_IP0" p 4000 200
check pingpong pp_loop_poll_4000 "" mbcf0 "$VM_IP0" p 4000 200

# --- atomic_counter ---------------------------------------------------------------
# counter CASE K CLIENT...: each CLIENT is "ns1" (mbcf1) or "loop" (mbcf0).
counter() {
	local name=$1 k=$2 c=0 where total
	shift 2
	total=$(($# * k))
	case_begin "$name"
	spawn server atomic_counter -d mbcf0 -p 18516 -c $#
	for where; do
		if [ "$where" = ns1 ]; then
			spawn "client$c" in_ns1 atomic_counter -d mbcf1 -p 18516 -n "$k" "$VM_IP0"
		else
			spawn "client$c" atomic_counter -d mbcf0 -p 18516 -n "$k" 127.0.0.1
		fi
		c=$((c + 1))
	done
	case_end || return 1
	assert_eq "atomic_counter: server: counter $total, expected $total ($# clients)" \
		"$(line server 'counter')" "$name: server counter" || return 1
	assert_eq "atomic_counter: server: fetched values are exactly 0..$((total - 1)), each once" \
		"$(line server 'fetched')" "$name: server union" || return 1
	for ((c = 0; c < $#; c++)); do
		assert_match "^atomic_counter: client [0-9]+: $k fetch-and-add, values strictly increasing" \
			"$(line "client$c" 'fetch-and-add')" "$name: client$c" || return 1
	done
}
check counter ac_ns1_3 100 ns1 ns1 ns1
check counter ac_loop_2 100 loop loop
check counter ac_mixed_3 100 ns1 ns1 loop

# --- cas_lock --------------------------------------------------------------------
# lock CASE K CLIENT...: as above.
lock() {
	local name=$1 k=$2 c=0 where total
	shift 2
	total=$(($# * k))
	case_begin "$name"
	spawn server cas_lock -d mbcf0 -p 18517 -c $#
	for where; do
		if [ "$where" = ns1 ]; then
			spawn "client$c" in_ns1 cas_lock -d mbcf1 -p 18517 -n "$k" "$VM_IP0"
		else
			spawn "client$c" cas_lock -d mbcf0 -p 18517 -n "$k" 127.0.0.1
		fi
		c=$((c + 1))
	done
	case_end || return 1
	assert_match "^cas_lock: server: value $total, expected $total \\($# clients\\); lock 0; [0-9]+ failed acquires$" \
		"$(line server 'value')" "$name: server" || return 1
	for ((c = 0; c < $#; c++)); do
		assert_match "^cas_lock: client [0-9]+: $k critical sections" \
			"$(line "client$c" 'critical sections')" "$name: client$c" || return 1
	done
}
check lock cl_ns1_3 30 ns1 ns1 ns1
check lock cl_loop_2 30 loop loop
check lock cl_mixed_3 30 ns1 loop ns1

# ids CASE PREFIX WHAT N: the ids the N processes PREFIX0.. printed on their
# WHAT line ("prog: PREFIX ID: ..."), sorted; the server hands out 0..N-1.
ids() {
	local c
	for ((c = 0; c < $4; c++)); do
		line "$2$c" "$3" | awk '{ sub(/:$/, "", $3); print $3 }'
	done | sort -n | xargs
}

# --- fifo_queue (direct verbs: the memory-based FIFO) ----------------------------
# queue CASE K AREA PRODUCER...: each PRODUCER is "ns1" (mbcf1) or "loop"
# (mbcf0); AREA: the FIFO's record area, far below the K records each
# producer pushes (16-64 bytes each), so full FIFOs stop the producers.
queue() {
	local name=$1 k=$2 area=$3 c=0 where total s0 g0
	shift 3
	total=$(($# * k))
	s0=$(vm_dev_ctr mbcf0 stop_tx) g0=$(vm_dev_ctr mbcf0 go_tx)
	case_begin "$name"
	spawn consumer fifo_queue -d mbcf0 -p 18518 -c $# -s "$area"
	for where; do
		if [ "$where" = ns1 ]; then
			spawn "producer$c" in_ns1 fifo_queue -d mbcf1 -p 18518 -n "$k" "$VM_IP0"
		else
			spawn "producer$c" fifo_queue -d mbcf0 -p 18518 -n "$k" 127.0.0.1
		fi
		c=$((c + 1))
	done
	case_end || return 1
	vm_log "$name: mbcf0 stop_tx +$(($(vm_dev_ctr mbcf0 stop_tx) - s0)), go_tx +$(($(vm_dev_ctr mbcf0 go_tx) - g0))"
	assert_eq "fifo_queue: consumer: $total records from $# producers, each exactly once, in order per producer" \
		"$(line consumer 'records from')" "$name: consumer" || return 1
	for ((c = 0; c < $#; c++)); do
		assert_match "^fifo_queue: producer [0-9]+: $k records pushed, every push completed$" \
			"$(line "producer$c" 'records pushed')" "$name: producer$c" || return 1
	done
	assert_eq "$(seq -s ' ' 0 $(($# - 1)))" "$(ids "$name" producer 'records pushed' $#)" \
		"$name: producer numbers"
}
check queue fq_ns1_3 300 4096 ns1 ns1 ns1
check queue fq_mixed_3 200 1024 ns1 loop ns1
check queue fq_loop_1 500 256 loop

# --- fifo_rpc (direct verbs: the memory-based signal) ------------------------------
# rpc CASE K CLIENT...: as above; the server sleeps in epoll on its FIFO's
# eventfd, each client in poll on its own.
rpc() {
	local name=$1 k=$2 c=0 where total wake
	shift 2
	total=$(($# * k))
	case_begin "$name"
	spawn server fifo_rpc -d mbcf0 -p 18519 -c $#
	for where; do
		if [ "$where" = ns1 ]; then
			spawn "client$c" in_ns1 fifo_rpc -d mbcf1 -p 18519 -n "$k" "$VM_IP0"
		else
			spawn "client$c" fifo_rpc -d mbcf0 -p 18519 -n "$k" 127.0.0.1
		fi
		c=$((c + 1))
	done
	case_end || return 1
	assert_eq "fifo_rpc: server: $total calls from $# clients answered, each exactly once, in order" \
		"$(line server 'answered')" "$name: server" || return 1
	# at least one wake-up, at most one per call (SIGNAL_EMPTY: one per burst)
	wake=$(line server 'wake-ups' | awk '{ print $3 }')
	assert_match '^[1-9][0-9]*$' "$wake" "$name: server wake-ups" || return 1
	assert_cmd test "$wake" -le "$total" || return 1
	for ((c = 0; c < $#; c++)); do
		assert_match "^fifo_rpc: client [0-9]+: $k calls, every reply checked$" \
			"$(line "client$c" 'every reply')" "$name: client$c" || return 1
	done
	assert_eq "$(seq -s ' ' 0 $(($# - 1)))" "$(ids "$name" client 'every reply' $#)" \
		"$name: client numbers"
}
check rpc rpc_ns1_2 200 ns1 ns1
check rpc rpc_mixed_3 100 ns1 loop ns1

# --- everything was torn down ------------------------------------------------------
for t in qp cq mr pd ctx; do
	check assert_eq 0 "$(vm_res "$t" mbcf0)" "mbcf0 $t objects at the end"
	check assert_eq 0 "$(vm_res "$t" mbcf1)" "mbcf1 $t objects at the end"
done
rdma statistic show link mbcf0/1 2>/dev/null | head -n 3
# the loop clients answer each other on mbcf0 itself: an answer sent while
# delivering waits for the delivery to end (kmod/net.c), not the backlog
check assert_match '^[1-9][0-9]*$' "$(vm_dev_ctr mbcf0 tx_loop_deferred)" "mbcf0 tx_loop_deferred (frames sent to itself while delivering)"

check vm_dmesg_check
if [ "$failed" != 0 ]; then
	echo "examples: $failed check(s) failed"
	exit 1
fi
echo "examples: all checks passed"
