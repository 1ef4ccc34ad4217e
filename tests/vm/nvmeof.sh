#!/bin/bash
# Guest test: NVMe over Fabrics (nvme-rdma host, nvmet-rdma target) on mbcf0,
# the first kernel consumer that needs fast registration (kmod/frmr.c): the
# host registers every I/O's pages with IB_WR_REG_MR, hands the rkey to the
# target, which RDMA-READs/WRITEs them and answers with SEND_WITH_INV (or the
# host invalidates locally).
#   - nvmet configured through configfs (no nvmetcli in bookworm): a brd
#     ramdisk as namespace 1, an rdma port on 192.0.2.10:4420;
#   - rxe0 removed first (rdma_cm binds to the first device with the
#     address's GID); the kernel consumers' QPs are asserted on mbcf0;
#   - nvme connect, fio randwrite + verify at 4 KiB and 128 KiB, a pattern
#     written with dd, nvme disconnect, reconnect, the pattern read back;
#   - teardown: disconnect, nvmet removed, the mbcf resource summary back
#     to what it was before (no kernel PD, QP, CM id or MR left; CQs stay
#     in the device's CQ pool until it goes), the ULP and
#     mbcf modules unload, the kernel log is clean.
#   tests/vm/run.sh --build BUILD tests/vm/nvmeof.sh
set -u
# shellcheck source=lib.sh
. "${MBCF_VM_LIB:-$(dirname "$0")/lib.sh}"
# shellcheck source=storage-lib.sh
. "$(dirname "${MBCF_VM_LIB:-$0}")/storage-lib.sh"

vm_require_mbcf

failed=0
check() {
	"$@" || failed=$((failed + 1))
}
NQN=nqn.2026-12.org.example:mbcf-nvmeof
HOSTNQN=nqn.2014-08.org.nvmexpress:uuid:6d62636f-0000-4000-8000-000000000001
HOSTID=6d62636f-0000-4000-8000-000000000001
logs=/var/tmp/nvmeof
mkdir -p "$logs"

rdma link delete rxe0 || vm_die "cannot remove rxe0"
before=$(vm_kres mbcf0)
vm_log "mbcf0 resources before: $before"

stl_configfs_brd || exit 1
stl_modprobe nvmet nvmet-rdma nvme-fabrics nvme-rdma

# --- target ------------------------------------------------------------------
stl_nvmet_subsys "$NQN" /dev/ram0 || exit 1
stl_nvmet_port_add 1 rdma "$VM_IP0" 4420 "$NQN" || vm_die "nvmet port"

# --- host --------------------------------------------------------------------
connect() {
	local t0=$EPOCHREALTIME out
	out=$(timeout 120 nvme connect -t rdma -a "$VM_IP0" -s 4420 -n "$NQN" \
		--hostnqn="$HOSTNQN" --hostid="$HOSTID" 2>&1)
	if [ $? != 0 ]; then
		echo "FAIL: nvme connect: $out"
		dmesg | tail -n 20 | sed 's/^/  | /'
		return 1
	fi
	DEV=
	for _ in $(seq 300); do
		DEV=$(stl_nvme_dev "$NQN") && [ -b "$DEV" ] && break
		sleep 0.2
	done
	if ! [ -b "$DEV" ]; then
		echo "FAIL: no block device for $NQN"
		ls /sys/block /sys/class/nvme* 2>&1 | sed 's/^/  | /'
		dmesg | tail -n 30 | sed 's/^/  | /'
		return 1
	fi
	vm_log "connected: $DEV in $(vm_elapsed_since "$t0") s"
}

connect || vm_die "first connect"
nvme list 2>/dev/null | sed 's/^/  | /'

# The kernel consumers' QPs (rdma_cm's, "comm [rdma_cm]") live on mbcf0:
# host and target ends of one admin and at least one I/O queue; none on
# any other device.
qps=$(rdma resource show qp 2>/dev/null)
printf '%s\n' "$qps" | sed 's/^/  | /' | head -n 12
nq=$(printf '%s\n' "$qps" | grep -cE 'link mbcf0/1 .*type RC .*comm \[rdma_cm\]')
if [ "$nq" -ge 4 ]; then
	echo "ok: $nq kernel RC QPs of rdma_cm on mbcf0"
else
	echo "FAIL: $nq kernel RC QPs of rdma_cm on mbcf0 (want >= 4)"
	failed=$((failed + 1))
fi
assert_eq 0 "$(printf '%s\n' "$qps" | grep -F 'comm [rdma_cm]' | grep -vc 'link mbcf0/')" \
	"kernel QPs on other devices" || failed=$((failed + 1))
vm_log "mbcf0 resources while connected: $(vm_kres mbcf0)"
mrs=$(rdma resource show mr 2>/dev/null | grep -c 'dev mbcf0 ')
vm_log "nvme MRs on mbcf0: $mrs"

# --- fio with verification -----------------------------------------------------
run_fio() {	# NAME BS OFFSET SIZE
	stl_fio_verify "$DEV" 300 "$logs/fio.$1" "$@" --runtime=120
}
check run_fio rw4k 4k 0 4M
check run_fio rw128k 128k 8M 8M

# --- data survives a reconnect ---------------------------------------------------
dd if=/dev/urandom of="$logs/pattern" bs=1M count=4 status=none
check assert_cmd dd if="$logs/pattern" of="$DEV" bs=64k seek=512 oflag=direct status=none
sync
check stl_nvme_disconnect "$NQN"
for _ in $(seq 50); do stl_nvme_dev "$NQN" >/dev/null || break; sleep 0.2; done
check connect
rm -f "$logs/back"
check assert_cmd dd if="$DEV" of="$logs/back" bs=64k skip=512 count=64 iflag=direct status=none
if cmp -s "$logs/pattern" "$logs/back"; then
	echo "ok: 4 MiB written before the disconnect read back identical after the reconnect"
else
	echo "FAIL: data read back after the reconnect differs"
	failed=$((failed + 1))
fi
check stl_nvme_disconnect "$NQN"

# --- teardown ----------------------------------------------------------------------
stl_nvmet_port_del 1 "$NQN"
stl_nvmet_subsys_del "$NQN"
for m in nvme-rdma nvme-fabrics nvmet-rdma nvmet; do
	check assert_cmd modprobe -r "$m"
done
# --- hostile checks only a kernel consumer can make (FRWR has no user verbs):
# stale keys after LOCAL_INV, re-registration and SEND_WITH_INV, bounds
# (tests/vm/frmr_test/mbcf_frmr_test.c; it unloads itself when done)
frmr_checks() {
	local ko out mark
	# built for the default kernel, and for each extra one by
	# kmod/build-for.sh: the one whose vermagic names this kernel
	for ko in "${MBCF_BUILD:-}"/tests/vm/frmr_test/mbcf_frmr_test.ko \
		"${MBCF_BUILD:-}"/kmod-*/frmr_test/mbcf_frmr_test.ko ""; do
		[ -f "$ko" ] && [ "$(modinfo -F vermagic "$ko" | cut -d' ' -f1)" = "$(uname -r)" ] &&
			break
	done
	[ -n "$ko" ] || { echo "FAIL: no mbcf_frmr_test.ko for $(uname -r) in ${MBCF_BUILD:-}"; return 1; }
	mark=$(dmesg | wc -l)
	insmod "$ko" dev=mbcf0 2>/dev/null	# ECANCELED when it is done
	out=$(dmesg | tail -n +"$((mark + 1))" | grep 'mbcf_frmr_test:')
	printf '%s\n' "$out" | sed 's/^.*mbcf_frmr_test: /  frmr: /'
	printf '%s\n' "$out" | grep -q 'mbcf_frmr_test: 0 check(s) failed' &&
		! printf '%s\n' "$out" | grep -q FAIL
}
check frmr_checks

after=$(vm_kres_wait mbcf0 "$before")
check assert_eq "$before" "$after" "mbcf0 resource summary after teardown"
check assert_eq 0 "$(rdma resource show mr 2>/dev/null | grep -c 'dev mbcf')" "MRs left on mbcf devices"
check assert_cmd rdma link delete mbcf0
check assert_cmd rdma link delete mbcf1
check assert_cmd rmmod mbcf
check vm_dmesg_check

if [ "$failed" != 0 ]; then
	echo "nvmeof: $failed check(s) failed"
	exit 1
fi
echo "nvmeof: all checks passed"
