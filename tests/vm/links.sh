#!/bin/bash
# Guest test: boot persistence -- tools/mbcf-links (what mbcf-links.service
# runs) creates, reports and deletes the devices of a links.conf, waits for
# a late netdev, is idempotent, and refuses bad configs before acting.
#   tests/vm/run.sh --no-topology tests/vm/links.sh
set -u
# shellcheck source=lib.sh
. "${MBCF_VM_LIB:-$(dirname "$0")/lib.sh}"

failed=0
check() { "$@" || failed=$((failed + 1)); }

vm_have_mbcf || vm_die "mbcf module is not installed in the guest"
tool=$PWD/tools/mbcf-links
[ -x "$tool" ] || vm_die "no $tool"
work=$(mktemp -d)

# run CONF ARGS...: the tool's status, its output in $out (stdout + stderr)
run() {
	local conf=$1 rc=0
	shift
	out=$("$tool" "$@" "$conf" 2>&1) || rc=$?
	printf '%s\n' "$out" | sed 's/^/  mbcf-links| /'
	return "$rc"
}
# links: "DEVICE NETDEV" of every RDMA link, sorted
links() {
	rdma link show | sed -n 's/^link \([^/]*\)\/1 .* netdev \([^ ]*\).*/\1 \2/p' | sort
}

ip link add vA type veth peer name vB
ip link set vA up
ip link set vB up

vm_phase "start: two netdevs there, one that appears 2 s later"
cat >"$work/links.conf" <<'CONF'
# boot-time devices
mbcf7	vA
mbcfB  vB   # trailing comment

mbcf9 vLate
CONF
(sleep 2; ip link add vLate type dummy) &
rc=0
MBCF_LINKS_WAIT=20 run "$work/links.conf" start || rc=$?
wait
check assert_eq 0 "$rc" "start's status"
check assert_eq $'mbcf7 vA\nmbcf9 vLate\nmbcfB vB' "$(links)" "RDMA links after start"
check assert_eq $'mbcf7\nmbcf9\nmbcfB' \
	"$(ibv_devices | awk 'NR > 2 { print $1 }' | sort)" "ibv_devices (the provider matches each)"
rc=0
run "$work/links.conf" status || rc=$?
check assert_eq 0 "$rc" "status's status"
check assert_eq $'mbcf7 vA present\nmbcfB vB present\nmbcf9 vLate present' "$out" "status lines"

vm_phase "start again: nothing changes"
rc=0
run "$work/links.conf" start || rc=$?
check assert_eq 0 "$rc" "second start's status"
check assert_eq 3 "$(grep -c 'already there' <<<"$out")" "lines left alone"
check assert_eq $'mbcf7 vA\nmbcf9 vLate\nmbcfB vB' "$(links)" "RDMA links after the second start"

vm_phase "a device on another netdev: reported, neither moved nor deleted"
# (one mbcf device per netdev, as one rxe: the other line gets a netdev of its own)
ip link add vC type dummy
printf 'mbcf7 vB\nmbcfC vC\n' >"$work/moved.conf"
rc=0
run "$work/moved.conf" start || rc=$?
check assert_eq 1 "$rc" "start's status with a conflicting line"
check assert_match 'mbcf7 exists on vA, not vB' "$out" "the conflict's message"
check assert_eq $'mbcf7 vA\nmbcf9 vLate\nmbcfB vB\nmbcfC vC' "$(links)" "the other line still created"
rc=0
run "$work/moved.conf" stop || rc=$?
check assert_eq 0 "$rc" "stop's status"
check assert_eq $'mbcf7 vA\nmbcf9 vLate\nmbcfB vB' "$(links)" "stop deleted mbcfC only (mbcf7 is on vA, not vB)"

vm_phase "a second device on a netdev that has one: the kernel refuses, the line fails"
printf 'mbcfD vA\n' >"$work/second.conf"
rc=0
run "$work/second.conf" start || rc=$?
check assert_eq 1 "$rc" "start's status for a second device on vA"
check assert_match 'mbcfD on vA: rdma link add failed' "$out" "its message"
check assert_eq $'mbcf7 vA\nmbcf9 vLate\nmbcfB vB' "$(links)" "RDMA links after it"

vm_phase "a netdev that never appears"
printf 'mbcf5 nosuch0\n' >>"$work/links.conf"
rc=0
MBCF_LINKS_WAIT=1 run "$work/links.conf" start || rc=$?
check assert_eq 1 "$rc" "start's status with a missing netdev"
check assert_match '^mbcf-links: mbcf5: no netdev nosuch0 after 1 s$' "$out" "its message"
rc=0
run "$work/links.conf" status || rc=$?
check assert_eq 1 "$rc" "status's status with one absent"
check assert_eq "mbcf5 nosuch0 absent" "$(tail -n 1 <<<"$out")" "its status line"

vm_phase "bad configs: refused before anything is done"
rdma link delete mbcf9
bad() {	# WHAT LINE MESSAGE-REGEX
	printf 'mbcf9 vLate\n%s\n' "$2" >"$work/bad.conf"
	local rc=0
	run "$work/bad.conf" start || rc=$?
	check assert_eq 2 "$rc" "status for $1"
	check assert_match "$3" "$out" "message for $1"
}
bad "a name libibverbs would not match" "rxe1 vA" 'bad.conf:2: bad device name "rxe1"'
bad "one word" "mbcf1" 'bad.conf:2: expected "DEVICE NETDEV", got 1 words'
bad "three words" "mbcf1 vA vB" 'bad.conf:2: expected "DEVICE NETDEV", got 3 words'
bad "a path as netdev" "mbcf1 ../vA" 'bad.conf:2: bad netdev name "../vA"'
bad "a 16-character netdev" "mbcf1 abcdefghijklmnop" 'bad.conf:2: bad netdev name'
bad "a '%' in the name" "mbcf%d vA" 'bad.conf:2: bad device name'
bad "a device twice" "mbcf9 vA" 'bad.conf:2: device mbcf9 listed twice'
check assert_eq $'mbcf7 vA\nmbcfB vB' "$(links)" "RDMA links after the bad configs (mbcf9 not re-created)"
rc=0
MBCF_LINKS_WAIT=x run "$work/links.conf" start || rc=$?
check assert_eq 2 "$rc" "status for MBCF_LINKS_WAIT=x"
rc=0
run "$work/nonexistent.conf" start || rc=$?
check assert_eq 2 "$rc" "status for a missing config"

vm_phase "stop: every listed device on its netdev goes"
rc=0
run "$work/links.conf" stop || rc=$?
check assert_eq 0 "$rc" "stop's status"
check assert_eq "" "$(links)" "RDMA links after stop"
check assert_eq 0 "$(ls /sys/class/infiniband | grep -c '^mbcf')" "mbcf devices in sysfs after stop"

if [ "$failed" != 0 ]; then
	echo "links: $failed check(s) failed"
	exit 1
fi
echo "links: all checks passed"
