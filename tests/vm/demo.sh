#!/bin/bash
# The demo, run in the guest by scripts/demo.sh: two mbcf devices on a veth
# pair (mbcf0 on veth0, mbcf1 on veth1 in namespace ns1), shown through the
# tools a verbs user runs.
set -u
# shellcheck source=lib.sh
. "${MBCF_VM_LIB:-$(dirname "$0")/lib.sh}"

[ "${VM_MBCF:-0}" = 1 ] || vm_die "mbcf0/mbcf1 were not created"
vm_wait_port mbcf0 10 || exit 1
vm_wait_port mbcf1 10 || exit 1

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
vm_dmesg_check || exit 1
echo
echo "demo: mbcf0 and mbcf1 are up"
