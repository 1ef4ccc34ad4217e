#!/bin/bash
# The demo, run in the guest by scripts/demo.sh: two mbcf devices on a veth
# pair (mbcf0 on veth0, mbcf1 on veth1 in namespace ns1), shown through the
# tools a verbs user runs.
set -u
# shellcheck source=lib.sh
. "${MBCF_VM_LIB:-$(dirname "$0")/lib.sh}"

vm_require_mbcf

show() {
	echo
	echo "\$ $*"
	"$@"
}

show rdma link show
show ibv_devices
show ibv_devinfo -d mbcf0
show cat /sys/class/infiniband/mbcf0/ports/1/gids/0
show ip netns exec ns1 ibv_devinfo -d mbcf1

# A first perftest run: server on mbcf0, client on mbcf1 in ns1, each on
# its own vCPU (two busy-polling processes sharing one CPU would measure
# the scheduler's time slice, not the device).
perf() {
	echo
	echo "\$ $* -d mbcf0 -x 0 -F   &&   ip netns exec ns1 $* -d mbcf1 -x 0 -F $VM_IP0"
	timeout 60 taskset -c 0 "$@" -d mbcf0 -x 0 -F >/dev/null 2>&1 &
	vm_retry 30 0.2 in_ns1 timeout 60 taskset -c 1 "$@" -d mbcf1 -x 0 -F "$VM_IP0" 2>&1 |
		grep -v -E "Couldn't connect|Unable to (open|init)|inline feature"
	wait
}
perf ib_write_lat -n 1000
perf ib_write_bw -s 65536 -n 1000
perf ib_atomic_lat -n 1000
show rdma statistic show link mbcf0/1
vm_dmesg_check || exit 1
echo
echo "demo: mbcf0 and mbcf1 are up and moving data"
