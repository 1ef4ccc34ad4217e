#!/bin/bash
# Guest test: iSCSI over RDMA (iSER) on mbcf0: the LIO target's isert
# transport (ib_isert) and open-iscsi's iser transport (ib_iser), both
# unmodified, target and initiator on one kernel, 192.0.2.10 to itself.
#   - LIO configured through configfs (no targetcli): a brd ramdisk as an
#     iblock backstore, LUN 0 of one target portal group whose network
#     portal 192.0.2.10:3260 also listens for iSER (np/IP:3260/iser = 1),
#     demo-mode ACLs;
#   - rxe0 removed first (rdma_cm binds to the first device with the
#     address's GID); iscsid, discovery and login with the `iser` iface;
#   - the session's transport is iser (iscsiadm, the SCSI host's proc_name
#     iscsi_iser), its two RC QPs (initiator and target) are on mbcf0 and none on any
#     other device, no TCP connection to port 3260 stays up, ib_iser's FRWR
#     MRs live on mbcf0 and are re-keyed by the I/O (fast registration);
#   - fio randwrite + verify at 4 KiB and 128 KiB; a pattern written, read
#     from the target's ramdisk directly, logout, login, read back identical;
#   - teardown: logout, target removed, the mbcf0 resource summary back to
#     what it was before (no kernel PD, QP, CM id or MR left), no page left
#     pinned, the ULP and mbcf modules unload, the kernel log is clean.
#   tests/vm/run.sh --build BUILD tests/vm/iser.sh
set -u
# shellcheck source=lib.sh
. "${MBCF_VM_LIB:-$(dirname "$0")/lib.sh}"
# shellcheck source=storage-lib.sh
. "$(dirname "${MBCF_VM_LIB:-$0}")/storage-lib.sh"
# shellcheck source=lio-ulp.sh
. "$(dirname "${MBCF_VM_LIB:-$0}")/lio-ulp.sh"

vm_require_mbcf

failed=0
check() {
	"$@" || failed=$((failed + 1))
}
IQN=iqn.2026-12.org.example:mbcf-iser
PORTAL=$VM_IP0:3260
CFG=/sys/kernel/config/target
TPG=$CFG/iscsi/$IQN/tpgt_1
logs=/var/tmp/iser
mkdir -p "$logs"

rdma link delete rxe0 || vm_die "cannot remove rxe0"
before=$(vm_kres mbcf0)
pins0=$(vm_pins_held)
vm_log "mbcf0 resources before: $before; pinned pages: $pins0"

# --- target ------------------------------------------------------------------
vm_phase "LIO target"
modprobe configfs 2>/dev/null
mountpoint -q /sys/kernel/config || mount -t configfs none /sys/kernel/config ||
	vm_die "configfs"
modprobe brd rd_nr=1 rd_size=65536 max_part=0 || vm_die "modprobe brd"
for m in target_core_mod target_core_iblock iscsi_target_mod ib_isert sd_mod ib_iser; do
	modprobe "$m" || vm_die "modprobe $m"
done
mkdir -p "$CFG/core/iblock_0/ram0" || vm_die "iblock backstore"
echo udev_path=/dev/ram0 >"$CFG/core/iblock_0/ram0/control"
echo 1 >"$CFG/core/iblock_0/ram0/enable" || vm_die "backstore enable"
mkdir -p "$TPG/lun/lun_0" || vm_die "iscsi target"
ln -s "$CFG/core/iblock_0/ram0" "$TPG/lun/lun_0/ram0" || vm_die "lun 0"
mkdir "$TPG/np/$PORTAL" || vm_die "network portal"
echo 1 >"$TPG/np/$PORTAL/iser" || vm_die "iser on the network portal"
echo 0 >"$TPG/attrib/authentication"
echo 1 >"$TPG/attrib/generate_node_acls"
echo 1 >"$TPG/attrib/cache_dynamic_acls"
echo 0 >"$TPG/attrib/demo_mode_write_protect"
echo 1 >"$TPG/enable" || vm_die "tpg enable"
check assert_eq 1 "$(cat "$TPG/np/$PORTAL/iser")" "np $PORTAL iser"
check vm_wait_listen 3260
vm_log "mbcf0 resources with isert listening: $(vm_kres mbcf0)"

# --- initiator -----------------------------------------------------------------
vm_phase "open-iscsi"
mkdir -p /run/lock/iscsi	# iscsiadm's and iscsid's record locks
# its own session: iscsid ends its whole process group on SIGTERM
setsid iscsid -f >"$logs/iscsid.log" 2>&1 &
iscsid_pid=$!
# iscsiadm reaches iscsid on this abstract socket (else it would try to
# start it through systemd)
for _ in $(seq 150); do
	ss -Hxl | grep -q '@ISCSIADM_ABSTRACT_NAMESPACE' && break
	sleep 0.2
done
out=$(timeout 120 iscsiadm -m discovery -t sendtargets -p "$PORTAL" -I iser 2>&1)
if ! assert_match "^$PORTAL,1 $IQN\$" "$out" "sendtargets discovery"; then
	failed=$((failed + 1))
	iscsiadm -m node -o new -T "$IQN" -p "$PORTAL" -I iser >/dev/null
fi

# sess_dev: the disk of our session (sdX), once the LUN scan made it
sess_dev() {
	local b
	for b in /sys/class/iscsi_session/session*/device/target*/*:0:0:0/block/*; do
		[ -e "$b" ] || continue
		[ "$(cat "${b%/device/target*}/targetname" 2>/dev/null)" = "$IQN" ] || continue
		echo "/dev/${b##*/}"
		return 0
	done
	return 1
}

login() {
	local t0=$EPOCHREALTIME out
	out=$(timeout 120 iscsiadm -m node -T "$IQN" -p "$PORTAL" -I iser --login 2>&1)
	if [ $? != 0 ]; then
		echo "FAIL: iscsiadm login: $out"
		dmesg | tail -n 20 | sed 's/^/  | /'
		return 1
	fi
	DEV=
	for _ in $(seq 300); do
		DEV=$(sess_dev) && [ -b "$DEV" ] && break
		sleep 0.2
	done
	if ! [ -b "$DEV" ]; then
		echo "FAIL: no disk for $IQN"
		iscsiadm -m session -P 3 2>&1 | sed 's/^/  | /'
		dmesg | tail -n 30 | sed 's/^/  | /'
		return 1
	fi
	vm_log "logged in: $DEV in $(vm_elapsed_since "$t0") s"
}

logout() {
	local out
	out=$(timeout 120 iscsiadm -m node -T "$IQN" -p "$PORTAL" -I iser --logout 2>&1)
	assert_match "^Logout of \[sid: [0-9]+, target: $IQN, portal: $VM_IP0,3260\] successful" \
		"$out" "iscsiadm logout" || return 1
	for _ in $(seq 150); do sess_dev >/dev/null || return 0; sleep 0.2; done
	echo "FAIL: the session's disk still there after the logout"
	return 1
}

login || vm_die "first login"

# The session is iSER's: iscsiadm names the transport, the SCSI host is
# ib_iser's, and nothing of it runs over TCP (discovery's connection closed).
out=$(iscsiadm -m session 2>&1)
check assert_match "^iser: \[[0-9]+\] $PORTAL,1 $IQN" "$out" "session transport"
# /sys/class/iscsi_session/sessionN/device is .../hostH/sessionN
host=$(readlink -f /sys/class/iscsi_session/session*/device | head -n 1)
host=$(basename "$(dirname "$host")")
check assert_eq iscsi_iser "$(cat "/sys/class/scsi_host/$host/proc_name" 2>/dev/null)" \
	"proc_name of $host"
check assert_eq 0 "$(ss -Htn state established '( dport = :3260 or sport = :3260 )' | wc -l)" \
	"TCP connections to port 3260"

lio_ulp_qps
lio_ulp_data ib_iser iSER

# --- teardown ----------------------------------------------------------------------
vm_phase "teardown"
iscsiadm -m node -o delete >/dev/null 2>&1
iscsiadm -m discoverydb -t sendtargets -p "$PORTAL" -o delete >/dev/null 2>&1
kill "$iscsid_pid" 2>/dev/null
wait "$iscsid_pid" 2>/dev/null
echo 0 >"$TPG/enable"
echo 0 >"$TPG/np/$PORTAL/iser"
rmdir "$TPG/np/$PORTAL"
rm -f "$TPG/lun/lun_0/ram0"
rmdir "$TPG/lun/lun_0" "$TPG" "$CFG/iscsi/$IQN"
rmdir "$CFG/iscsi"		# the fabric's directory holds iscsi_target_mod
rmdir "$CFG/core/iblock_0/ram0" "$CFG/core/iblock_0"
lio_ulp_finish iser ib_iser iscsi_tcp ib_isert iscsi_target_mod
