#!/bin/bash
# Guest test: the mbcf device's life and attributes, seen through the tools
# users run (rdma, ibv_devices, ibv_devinfo, sysfs), with exact values.
#   tests/vm/run.sh tests/vm/device.sh
set -u
# shellcheck source=lib.sh
. "${MBCF_VM_LIB:-$(dirname "$0")/lib.sh}"

failed=0
check() { "$@" || failed=$((failed + 1)); }

vm_have_mbcf || vm_die "mbcf module is not installed in the guest"
[ "${VM_MBCF:-0}" = 1 ] || vm_die "topology did not create mbcf0/mbcf1"

# eui64 IFACE [NS]: the EUI-64 of a netdev's MAC as four colon groups.
eui64() {
	local mac
	mac=$(${2:+ip netns exec "$2"} cat "/sys/class/net/$1/address")
	python3 - "$mac" <<'PY'
import sys
b = bytes.fromhex(sys.argv[1].replace(":", ""))
e = bytes([b[0] ^ 2]) + b[1:3] + b"\xff\xfe" + b[3:]
print(":".join(e[i:i + 2].hex() for i in range(0, 8, 2)))
PY
}

port_attr() { cat "/sys/class/infiniband/$1/ports/1/$2"; }

# --- listing, GUID, GID[0] --------------------------------------------------
devs=$(ibv_devices)
printf '%s\n' "$devs"
e0=$(eui64 veth0)
e1=$(eui64 veth1 "$VM_NS")
check assert_match "^\s+mbcf0\s+${e0//:/}$" "$devs" "mbcf0 node GUID = EUI-64(veth0 MAC)"
check assert_match "^\s+mbcf1\s+${e1//:/}$" "$devs" "mbcf1 node GUID = EUI-64(veth1 MAC)"
check assert_eq "fe80:0000:0000:0000:$e0" "$(port_attr mbcf0 gids/0)" "mbcf0 GID[0]"
check assert_eq "fe80:0000:0000:0000:$e1" "$(port_attr mbcf1 gids/0)" "mbcf1 GID[0]"
check assert_eq "Ethernet" "$(port_attr mbcf0 link_layer)" "mbcf0 link_layer"
check assert_eq "veth0" "$(rdma link show mbcf0/1 | awk '{for (i=1;i<NF;i++) if ($i=="netdev") print $(i+1)}')" "mbcf0 netdev"

# --- ibv_devinfo through the provider -----------------------------------------
check vm_wait_port mbcf0 10
check vm_wait_port mbcf1 10
info=$(ibv_devinfo -v -d mbcf0 2>&1)
printf '%s\n' "$info" | head -n 60
check assert_match 'state:\s+PORT_ACTIVE \(4\)' "$info" "mbcf0 port state"
check assert_match 'link_layer:\s+Ethernet' "$info" "mbcf0 link layer"
check assert_match 'active_mtu:\s+1024 \(3\)' "$info" "mbcf0 active_mtu at MTU 1500"
check assert_match 'max_qp_rd_atom:\s+16$' "$info" "mbcf0 max_qp_rd_atom"
check assert_match 'atomic_cap:\s+ATOMIC_GLOB' "$info" "mbcf0 atomic_cap"
check assert_match "GID\[\s*0\]:\s+fe80:0000:0000:0000:$e0" "$info" "mbcf0 GID[0] via ibv_devinfo"
check assert_match 'state:\s+PORT_ACTIVE' "$(in_ns1 ibv_devinfo -d mbcf1 2>&1)" "mbcf1 from ns1"

# --- the provider also works uninstalled (RDMAV_DRIVERS=<abs path>) ---------
drv=/etc/libibverbs.d/mbcf.driver
if [ -e "$drv" ] && [ -e "$MBCF_BUILD/provider/libmbcf-rdmav34.so" ]; then
	# Out of the directory: libibverbs reads every file in it.
	mv "$drv" /tmp/mbcf.driver
	check assert_eq 255 "$(ibv_devinfo -d mbcf0 >/dev/null 2>&1; echo $?)" \
		"ibv_devinfo -d mbcf0 fails without mbcf.driver"
	check assert_match 'state:\s+PORT_ACTIVE' \
		"$(RDMAV_DRIVERS=$MBCF_BUILD/provider/libmbcf ibv_devinfo -d mbcf0 2>&1)" \
		"RDMAV_DRIVERS=<build>/provider/libmbcf"
	mv /tmp/mbcf.driver "$drv"
fi

# --- port state and MTU follow the netdev -------------------------------------
# With the port events each end's users get: exactly one PORT_ERR and one
# PORT_ACTIVE per flap, although the netdevs see several events each
# (NETDEV_DOWN, NETDEV_CHANGE for the carrier, NETDEV_UP): mbcf's own,
# once per change, or the RDMA core's where it raises them (kmod/compat.h);
# never both.
evd=$(mktemp -d)
wait_for() { local what=$1; shift; vm_retry 300 0.1 "$@" || vm_fail "timed out: $what"; }
stdbuf -oL ibv_asyncwatch -d mbcf0 >"$evd/0" 2>&1 &
w0=$!
in_ns1 stdbuf -oL ibv_asyncwatch -d mbcf1 >"$evd/1" 2>&1 &
w1=$!
check wait_for "ibv_asyncwatch on mbcf0" grep -q '^mbcf0: async event FD' "$evd/0"
check wait_for "ibv_asyncwatch on mbcf1" grep -q '^mbcf1: async event FD' "$evd/1"
check assert_cmd ip link set veth0 down
state_down() { case $(port_attr "$1" state) in *DOWN*) return 0 ;; esac; return 1; }
check wait_for "mbcf0 DOWN" state_down mbcf0
check wait_for "mbcf1 DOWN" state_down mbcf1
check assert_match 'DOWN' "$(port_attr mbcf0 state)" "mbcf0 state with veth0 down"
check assert_match 'DOWN' "$(port_attr mbcf1 state)" "mbcf1 state with peer down (no carrier)"
check assert_cmd ip link set veth0 up
check vm_wait_port mbcf0 10
check vm_wait_port mbcf1 10
check wait_for "mbcf0's PORT_ACTIVE" grep -q 'IBV_EVENT_PORT_ACTIVE' "$evd/0"
check wait_for "mbcf1's PORT_ACTIVE" grep -q 'IBV_EVENT_PORT_ACTIVE' "$evd/1"
# A late duplicate (the carrier's NETDEV_CHANGE comes through linkwatch,
# after NETDEV_UP) would arrive within this.
sleep 2
kill "$w0" "$w1" 2>/dev/null
wait "$w0" "$w1" 2>/dev/null
port_events() { grep -o 'IBV_EVENT_PORT_[A-Z]*' "$1" | xargs; }
cat "$evd/0" "$evd/1"
check assert_eq "IBV_EVENT_PORT_ERR IBV_EVENT_PORT_ACTIVE" "$(port_events "$evd/0")" \
	"mbcf0's port events for veth0 down, up"
check assert_eq "IBV_EVENT_PORT_ERR IBV_EVENT_PORT_ACTIVE" "$(port_events "$evd/1")" \
	"mbcf1's port events for its peer down, up"
rm -rf "$evd"
check assert_cmd ip link set veth0 mtu 9000
check assert_match 'active_mtu:\s+4096 \(5\)' "$(ibv_devinfo -d mbcf0 2>&1)" "mbcf0 active_mtu at MTU 9000"
check assert_cmd ip link set veth0 mtu 1500

# --- bad requests are refused -------------------------------------------------
check assert_eq 1 "$(rdma link add mbcf9 type mbcf netdev veth0 >/dev/null 2>&1; echo $?)" "second device on veth0 refused"
check assert_eq 1 "$(rdma link add mbcf9 type mbcf netdev lo >/dev/null 2>&1; echo $?)" "device on loopback refused"
check assert_eq "" "$(ibv_devices | awk '$1 == "mbcf9"')" "no mbcf9 after refusals"

# --- delete and re-add ---------------------------------------------------------
check assert_cmd rdma link delete mbcf0
check assert_eq "" "$(ibv_devices | awk '$1 == "mbcf0"')" "mbcf0 gone after delete"
check assert_cmd rdma link add mbcf0 type mbcf netdev veth0
check vm_wait_port mbcf0 10

# --- removing the netdev removes the device ---------------------------------
check assert_cmd ip link add vx0 type veth peer name vx1
check assert_cmd ip link set vx0 up
check assert_cmd rdma link add mbcf5 type mbcf netdev vx0
check assert_match '^\s+mbcf5\s' "$(ibv_devices)" "mbcf5 listed"
check assert_cmd ip link del vx0
gone=no
for _ in $(seq 50); do
	[ -e /sys/class/infiniband/mbcf5 ] || { gone=yes; break; }
	sleep 0.1
done
check assert_eq yes "$gone" "mbcf5 removed with its netdev"

# --- module unload with live devices, then autoload by rdma link add ---------
check assert_cmd rmmod mbcf
check assert_eq "" "$(ls /sys/class/infiniband | grep mbcf)" "no mbcf device after rmmod"
check assert_cmd rdma link add mbcf0 type mbcf netdev veth0
check assert_match '^mbcf ' "$(lsmod | grep '^mbcf ')" "mbcf autoloaded by rdma link add"
check vm_wait_port mbcf0 10
check assert_cmd rdma link delete mbcf0
check assert_cmd rmmod mbcf

check vm_dmesg_check

if [ "$failed" != 0 ]; then
	echo "device: $failed check(s) failed"
	exit 1
fi
echo "device: all checks passed"
