#!/bin/bash
# Guest test: resource hygiene on mbcf0/mbcf1.  After a normal perftest run,
# after SIGKILL of a perftest client and of a server mid-transfer, and after
# SIGKILL of a process holding many connected QPs, CQs and MRs with writes
# in flight: `rdma resource show` lists no QP/CQ/MR/PD of an mbcf device and
# every pinned page is unpinned.  Then both links are deleted, the module
# unloads, and the kernel log is clean.
#   tests/vm/run.sh --build BUILD tests/vm/hygiene.sh [PATH/TO/mbcf_verbs_errors]
set -u
# shellcheck source=lib.sh
. "${MBCF_VM_LIB:-$(dirname "$0")/lib.sh}"

failed=0
check() { "$@" || failed=$((failed + 1)); }

vm_require_mbcf
prog=$(vm_test_prog mbcf_verbs_errors "${1:-}") || exit 1
PORT=18515

# res_summary: the per-device summary lines of mbcf0/mbcf1.
res_summary() {
	rdma resource show 2>/dev/null | awk '$2 ~ /^mbcf[01]:$/' | tr '\n' ' '
}

base_pins=$(vm_pins_held)
vm_log "pinned pages at start: $base_pins; $(res_summary)"

# clean WHAT: nothing left on the mbcf devices, pins back to the baseline.
# Teardown of a killed process is asynchronous (uverbs close): poll a while.
clean() {
	local what=$1 t q c m p pins
	vm_wait_clean "$base_pins" 30
	q=$VM_QP c=$VM_CQ m=$VM_MR p=$VM_PD pins=$VM_PINS
	local rc=0
	assert_eq 0 "$q" "QPs on mbcf0/1 after $what" || rc=1
	assert_eq 0 "$c" "CQs on mbcf0/1 after $what" || rc=1
	assert_eq 0 "$m" "MRs on mbcf0/1 after $what" || rc=1
	assert_eq 0 "$p" "PDs on mbcf0/1 after $what" || rc=1
	assert_eq "$base_pins" "$pins" "pinned pages after $what" || rc=1
	[ "$rc" = 0 ] || { rdma resource show; rdma resource show qp; } | grep mbcf | head -n 20
	return "$rc"
}

listening() {
	local hex sl local_addr rem st _
	printf -v hex '%04X' "$PORT"
	for f in /proc/net/tcp /proc/net/tcp6; do
		while read -r sl local_addr rem st _; do
			[ "${local_addr##*:}" = "$hex" ] && [ "$st" = 0A ] && return 0
		done <"$f"
	done
	return 1
}

wait_listen() {
	local end=$((SECONDS + 30))
	until listening; do
		[ "$SECONDS" -ge "$end" ] && return 1
		kill -0 "$1" 2>/dev/null || return 1
		sleep 0.1
	done
}

# wait_exit PID TIMEOUT: wait for a background job to end; 124 if it did not.
wait_exit() {
	local end=$((SECONDS + $2))
	while kill -0 "$1" 2>/dev/null; do
		[ "$SECONDS" -ge "$end" ] && return 124
		sleep 0.2
	done
	wait "$1"
}

# --- 1. a normal perftest run ---------------------------------------------------
vm_phase "normal ib_write_bw run"
check assert_eq 0 "$(vm_res qp)" "QPs on mbcf0/1 at start"
timeout 120 ib_write_bw -d mbcf0 -x 0 -F -n 200 -s 65536 >/tmp/hy-srv.log 2>&1 &
spid=$!
wait_listen "$spid"
out=$(vm_retry 3 0.5 in_ns1 timeout 120 ib_write_bw -d mbcf1 -x 0 -F -n 200 -s 65536 "$VM_IP0" 2>&1)
crc=$?
wait "$spid"
src=$?
check assert_eq "0 0" "$crc $src" "ib_write_bw client/server exit status"
[ "$crc$src" = 00 ] || printf '%s\n' "$out" | tail -n 5
check clean "a normal ib_write_bw run"

# --- 2. perftest client killed mid-transfer ----------------------------------------
# killmid VICTIM: run a long ib_write_bw, SIGKILL VICTIM (client|server)
# once data moves (~1 s), then the other side must end by itself within the
# retry bounds (client) or be killed too (the server waits on TCP forever).
killmid() {
	local victim=$1 spid cpid t0 rc
	vm_phase "ib_write_bw: SIGKILL the $victim mid-transfer"
	ib_write_bw -d mbcf0 -x 0 -F -n 1000000 -s 65536 >/tmp/hy-srv.log 2>&1 &
	spid=$!
	wait_listen "$spid" || { vm_fail "server did not listen"; kill -KILL "$spid"; return 1; }
	# `ip netns exec` execs the tool: $! is the client itself.
	ip netns exec "$VM_NS" ib_write_bw -d mbcf1 -x 0 -F -n 1000000 -s 65536 "$VM_IP0" >/tmp/hy-cli.log 2>&1 &
	cpid=$!
	# wait until both QPs exist and frames flow, then ~1 s more
	local end=$((SECONDS + 30)) tx0 tx
	until [ "$(vm_res qp)" -ge 2 ]; do
		[ "$SECONDS" -ge "$end" ] && break
		sleep 0.2
	done
	tx0=$(vm_dev_ctr mbcf1 tx_frames)
	sleep 1
	tx=$(vm_dev_ctr mbcf1 tx_frames)
	vm_log "QPs $(vm_res qp), mbcf1 tx_frames $tx0 -> $tx before the kill"
	if [ "$victim" = client ]; then
		kill -KILL "$cpid"
		wait "$cpid" 2>/dev/null
		# the server waits on its TCP socket: kill it too (unless it saw
		# the connection close and left already)
		kill -KILL "$spid" 2>/dev/null
		wait "$spid" 2>/dev/null
	else
		t0=$SECONDS
		kill -KILL "$spid"
		wait "$spid" 2>/dev/null
		# the client must see RETRY_EXC_ERR and exit (timeout 14, retry_cnt 7:
		# 67 ms x (1+2+...+64+64) = 12.8 s), not hang
		wait_exit "$cpid" 60
		rc=$?
		if [ "$rc" = 124 ]; then
			vm_fail "client still running 60 s after its server was killed (hang)"
			kill -KILL "$cpid"
			wait "$cpid" 2>/dev/null
		else
			assert_match '^[1-9]' "$rc" "client exit status after the server died ($((SECONDS - t0)) s)"
			grep -i 'error\|fail' /tmp/hy-cli.log | head -n 3
		fi
	fi
	[ "$tx" -gt "$tx0" ] 2>/dev/null || vm_log "note: no frames moved during the second before the kill"
}
check killmid client
check clean "SIGKILL of a perftest client (and its server)"
check vm_wait_port mbcf0 10
check killmid server
check clean "SIGKILL of a perftest server"

# --- 3. a process holding many QPs, CQs and MRs ------------------------------------
npairs=64
vm_phase "holder of $npairs connected pairs"
"$prog" -a mbcf0 -b mbcf1 hold "$npairs" >/tmp/hy-hold.log 2>&1 &
hpid=$!
end=$((SECONDS + 120))
until grep -q '^ready\|^setup' /tmp/hy-hold.log; do
	[ "$SECONDS" -ge "$end" ] && break
	kill -0 "$hpid" 2>/dev/null || break
	sleep 0.3
done
cat /tmp/hy-hold.log
check assert_eq "$((2 * npairs))" "$(vm_res qp)" "QPs while held"
check assert_eq "$((2 * npairs))" "$(vm_res cq)" "CQs while held"
check assert_eq "$((2 * npairs))" "$(vm_res mr)" "MRs while held"
check assert_eq 2 "$(vm_res pd)" "PDs while held"
# each MR is 64 KiB, page aligned: 16 pages; rings are kernel memory
check assert_eq "$((2 * npairs * 65536 / 4096))" "$(($(vm_pins_held) - base_pins))" "pages pinned while held"
tx_of() { vm_dev_ctr "$1" tx_frames; }
tx0=$(tx_of mbcf0)
sleep 1
tx1=$(tx_of mbcf0)
check assert_match '^[1-9]' "$((tx1 - tx0))" "mbcf0 frames sent in the second before the kill (writes in flight)"
t0=$EPOCHREALTIME
kill -KILL "$hpid"
wait "$hpid" 2>/dev/null
vm_log "holder gone in $(vm_elapsed_since "$t0") s"
check clean "SIGKILL of a holder of $((2 * npairs)) QPs/CQs/MRs"

# --- 4. the devices and the module go away cleanly ---------------------------------
vm_log "counters mbcf0: $(rdma statistic show link mbcf0/1 | cut -c1-400)"
check assert_cmd rdma link delete mbcf0
check assert_cmd in_ns1 rdma link delete mbcf1
check assert_eq "" "$(rdma link show 2>/dev/null | grep mbcf)" "no mbcf link left"
check assert_cmd rmmod mbcf
check vm_dmesg_check

if [ "$failed" != 0 ]; then
	echo "hygiene: $failed check(s) failed"
	exit 1
fi
echo "hygiene: all checks passed"
