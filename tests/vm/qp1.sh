#!/bin/bash
# Guest test: QP1 under attack from the wire.  A raw
# socket in ns1 (tests/vm/qp1_flood.py) sends mbcf0 datagrams no MAD can
# be: 600 of 1000 bytes to QP1 (more than QP1's 512 posted receives: before
# the fix each took a receive with a length error, which the MAD layer
# never reposts, and the CM went silent for good), 600 more to the
# broadcast MAC, 200 headers cut short, 200 announcing more payload than
# they carry, then 2000 random 256-byte MADs as fast as it can.  Asserted:
#   - mbcf0 counted every frame (rx_frames) and dropped exactly the 600
#     broadcast ones as drop_not_unicast and the 400 cut ones as
#     drop_truncated;
#   - afterwards rping (100 pings, data verified) and ucmatose (4
#     connections, 50 messages each) connect from ns1 to mbcf0 through the
#     CM, which answers on QP1;
#   - the kernel log is clean (the rig scans it).
#   tests/vm/run.sh --build BUILD tests/vm/qp1.sh
set -u
# shellcheck source=lib.sh
. "${MBCF_VM_LIB:-$(dirname "$0")/lib.sh}"

vm_require_mbcf
failed=0
flood=$(dirname "$0")/qp1_flood.py
mac0=$(cat /sys/class/net/veth0/address)

ctr() { vm_dev_ctr mbcf0 "$1"; }
rx0=$(ctr rx_frames) bc0=$(ctr drop_not_unicast) tr0=$(ctr drop_truncated)
out=$(in_ns1 python3 "$flood" veth1 "$mac0" oversized 600 broadcast 600 \
	truncated 200 shortpay 200 junkmad 2000 2>&1) || failed=1
echo "$out"
sleep 1	# the backlog drains
assert_eq 3600 $(($(ctr rx_frames) - rx0)) "frames counted by mbcf0" || failed=1
assert_eq 600 $(($(ctr drop_not_unicast) - bc0)) "broadcast frames dropped" || failed=1
assert_eq 400 $(($(ctr drop_truncated) - tr0)) "cut frames dropped" || failed=1

# The CM answers on QP1 still.
logs=$(mktemp -d)
timeout 120 rping -s -a 0.0.0.0 -p 7174 -V -C 100 >"$logs/rping.srv" 2>&1 &
spid=$!
if vm_wait_listen 7174 &&
	in_ns1 timeout 120 rping -c -a "$VM_IP0" -p 7174 -v -V -C 100 >"$logs/rping.cli" 2>&1 &&
	wait "$spid" && grep -q "ping data: rdma-ping-99:" "$logs/rping.cli"; then
	echo "ok: rping after the flood"
else
	echo "FAIL: rping after the flood"
	tail -n 5 "$logs/rping.cli" "$logs/rping.srv"
	kill "$spid" 2>/dev/null
	failed=1
fi
timeout 120 ucmatose -p 7471 -c 4 -C 50 >"$logs/uc.srv" 2>&1 &
spid=$!
if vm_wait_listen 7471 &&
	in_ns1 timeout 120 ucmatose -s "$VM_IP0" -p 7471 -c 4 -C 50 >"$logs/uc.cli" 2>&1 &&
	wait "$spid" && grep -q "^return status 0" "$logs/uc.cli" &&
	grep -q "^return status 0" "$logs/uc.srv"; then
	echo "ok: ucmatose after the flood"
else
	echo "FAIL: ucmatose after the flood"
	tail -n 5 "$logs/uc.cli" "$logs/uc.srv"
	kill "$spid" 2>/dev/null
	failed=1
fi
[ $failed = 0 ] && echo "qp1: passed"
exit $failed
