#!/bin/bash
# Guest smoke test: devices are there and active, a short perftest run over
# rxe works, and deleting a link leaves a clean kernel log.
# Run with: tests/vm/run.sh tests/vm/smoke.sh
set -u
# shellcheck source=lib.sh
. "${MBCF_VM_LIB:-$(dirname "$0")/lib.sh}"

failed=0
check() { "$@" || failed=$((failed + 1)); }

# --- devices ----------------------------------------------------------------
devs=$(ibv_devices 2>&1)
printf '%s\n' "$devs"
check assert_match '^\s+rxe0\s' "$devs" "ibv_devices"
if vm_have_mbcf; then
	check assert_match '^\s+mbcf0\s' "$devs" "ibv_devices"
	check assert_match '^\s+mbcf1\s' "$devs" "ibv_devices"
elif grep -qx 'MBCF_KMOD:BOOL=ON' "${MBCF_BUILD:-/nonexistent}/CMakeCache.txt" 2>/dev/null; then
	# the installed build has a module: the guest's kernel must find it
	vm_fail "the build's mbcf module is not installed for $(uname -r)"
	failed=$((failed + 1))
else
	vm_log "no build with the module installed: checking rxe0 only"
fi

check vm_wait_port rxe0 10
check assert_match 'state:\s+PORT_ACTIVE' "$(ibv_devinfo -d rxe0 2>&1)" "ibv_devinfo -d rxe0"
if vm_have_mbcf; then
	for d in mbcf0 mbcf1; do
		check vm_wait_port "$d" 10
		check assert_match 'state:\s+PORT_ACTIVE' "$(ibv_devinfo -d "$d" 2>&1)" "ibv_devinfo -d $d"
	done
fi

# --- perftest over rxe ---------------------------------------------------------
# rxe cannot cross namespaces in 6.1 (its UDP socket lives in the initial
# one), so both QPs are on rxe0 (loopback) and only perftest's TCP exchange
# goes over the veth: server in the initial namespace, client in ns1.
# GID 1 is veth0's IPv4-mapped address (::ffff:192.0.2.10, RoCE v2).
perf_lat() {
	local dev=$1 gid=$2 srv rc out
	srv=$(mktemp)
	timeout 60 ib_write_lat -d "$dev" -x "$gid" -n 100 >"$srv" 2>&1 &
	local spid=$!
	sleep 0.3
	out=$(vm_retry 20 0.3 in_ns1 timeout 60 ib_write_lat -d "$dev" -x "$gid" -n 100 "$VM_IP0" 2>&1)
	rc=$?
	wait "$spid" || rc=1
	if [ "$rc" != 0 ]; then
		printf 'client:\n%s\nserver:\n%s\n' "$out" "$(cat "$srv")"
		rm -f "$srv"
		vm_fail "ib_write_lat on $dev failed"
		return 1
	fi
	rm -f "$srv"
	# The result row: "<bytes> <iterations> <t_min> ..."
	local row
	row=$(printf '%s\n' "$out" | awk '$1 == 2 && $2 == 100 { print; exit }')
	# the times are "inf" when perftest's CPU-frequency estimate came out 0
	# (a host busy enough to stall the guest while it samples): the 100
	# round trips happened all the same
	assert_match '^ *2 +100 +([0-9.]+|inf) ' "$row" "ib_write_lat $dev result row" || return 1
	vm_log "ib_write_lat $dev 2 B: t_typical $(printf '%s\n' "$row" | awk '{ print $5 }') us"
}
check perf_lat rxe0 1

# --- teardown leaves a clean log --------------------------------------------
vm_dmesg_mark
check assert_cmd rdma link delete rxe0
sleep 0.5
check assert_eq "" "$(ibv_devices 2>/dev/null | awk '$1 == "rxe0"')" "rxe0 after rdma link delete"
check vm_dmesg_check --since-mark

if [ "$failed" != 0 ]; then
	echo "smoke: $failed check(s) failed"
	exit 1
fi
echo "smoke: all checks passed"
