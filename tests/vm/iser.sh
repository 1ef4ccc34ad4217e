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
		"$out" "iscsiadm logout"
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

# Initiator and target QPs (rdma_cm's, "comm [rdma_cm]") live on mbcf0: one
# RC QP each end of the one connection; none on any other device.
qps=$(rdma resource show qp 2>/dev/null)
printf '%s\n' "$qps" | sed 's/^/  | /' | head -n 8
check assert_eq 2 "$(printf '%s\n' "$qps" | grep -cE 'link mbcf0/1 .*type RC .*comm \[rdma_cm\]')" \
	"kernel RC QPs of rdma_cm on mbcf0"
check assert_eq 0 "$(printf '%s\n' "$qps" | grep -F 'comm [rdma_cm]' | grep -vc 'link mbcf0/')" \
	"kernel QPs on other devices"
vm_log "mbcf0 resources while logged in: $(vm_kres mbcf0)"

# ib_iser's fast registration MRs, "mrn N rkey K": ib_iser re-keys one
# (ib_update_fast_reg_key) before each IB_WR_REG_MR it posts
iser_mrs() {
	rdma resource show mr 2>/dev/null | awk '$2 == "mbcf0" && / comm \[ib_iser\]/ {
		for (i = 3; i < NF; i++) if ($i == "mrn") n = $(i + 1); else if ($i == "rkey") k = $(i + 1)
		print n, k }' | LC_ALL=C sort
}
mrs0=$(iser_mrs)
nmrs=$(printf '%s\n' "$mrs0" | grep -c .)
vm_log "ib_iser MRs on mbcf0: $nmrs"
if [ "$nmrs" -ge 1 ]; then
	echo "ok: ib_iser holds $nmrs MRs on mbcf0"
else
	echo "FAIL: ib_iser holds no MR on mbcf0"
	failed=$((failed + 1))
fi

# --- fio with verification -----------------------------------------------------
run_fio() {	# NAME BS OFFSET SIZE
	local out rc
	out=$(timeout 300 fio --name="$1" --filename="$DEV" --direct=1 \
		--ioengine=libaio --iodepth=16 --rw=randwrite --bs="$2" \
		--offset="$3" --size="$4" --verify=crc32c --do_verify=1 \
		--verify_fatal=1 --randrepeat=0 --runtime=120 2>&1)
	rc=$?
	printf '%s\n' "$out" >"$logs/fio.$1"
	if [ "$rc" = 0 ] && printf '%s\n' "$out" | grep -q ' err= 0'; then
		echo "ok: fio $1: $(printf '%s\n' "$out" | grep -E '^ *(WRITE|READ):' | sed 's/(.*//' | tr -s ' ' | tr '\n' ';')"
	else
		echo "FAIL: fio $1 rc=$rc"
		printf '%s\n' "$out" | tail -n 25 | sed 's/^/  | /'
		return 1
	fi
}
tx0=$(vm_dev_ctr mbcf0 tx_payload_bytes)
check run_fio rw4k 4k 0 4M
check run_fio rw128k 128k 8M 8M
tx1=$(vm_dev_ctr mbcf0 tx_payload_bytes)
# 4 MiB + 8 MiB written and read back: at least 24 MiB of payload
if [ "$((tx1 - tx0))" -ge $((24 << 20)) ]; then
	echo "ok: mbcf0 carried $((tx1 - tx0)) payload bytes during fio (>= 24 MiB)"
else
	echo "FAIL: mbcf0 carried $((tx1 - tx0)) payload bytes during fio (< 24 MiB)"
	failed=$((failed + 1))
fi
rekeyed=$(LC_ALL=C join <(printf '%s\n' "$mrs0") <(iser_mrs) | awk '$2 != $3' | wc -l)
if [ "$rekeyed" -ge 1 ]; then
	echo "ok: $rekeyed of ib_iser's $nmrs MRs re-keyed by fast registration during fio"
else
	echo "FAIL: none of ib_iser's $nmrs MRs was re-keyed during fio"
	failed=$((failed + 1))
fi

# --- data reaches the ramdisk and survives a new session ---------------------
dd if=/dev/urandom of="$logs/pattern" bs=1M count=4 status=none
check assert_cmd dd if="$logs/pattern" of="$DEV" bs=64k seek=512 oflag=direct status=none
sync
rm -f "$logs/ram"
dd if=/dev/ram0 of="$logs/ram" bs=64k skip=512 count=64 iflag=direct status=none
if cmp -s "$logs/pattern" "$logs/ram"; then
	echo "ok: the 4 MiB written through iSER are on the target's /dev/ram0"
else
	echo "FAIL: the target's /dev/ram0 does not hold the bytes written"
	failed=$((failed + 1))
fi
check logout
for _ in $(seq 50); do sess_dev >/dev/null || break; sleep 0.2; done
check login
rm -f "$logs/back"
check assert_cmd dd if="$DEV" of="$logs/back" bs=64k skip=512 count=64 iflag=direct status=none
if cmp -s "$logs/pattern" "$logs/back"; then
	echo "ok: 4 MiB written before the logout read back identical after a new login"
else
	echo "FAIL: data read back after the new login differs"
	failed=$((failed + 1))
fi
check logout

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
# target_core_mod loads every backend (file, pscsi, user) itself
for m in ib_iser iscsi_tcp ib_isert iscsi_target_mod target_core_iblock \
	target_core_file target_core_pscsi target_core_user target_core_mod brd; do
	lsmod | grep -q "^$m " || continue
	if ! assert_cmd modprobe -r "$m"; then
		failed=$((failed + 1))
		lsmod | grep -E "^$m " | sed 's/^/  lsmod | /'
		find /sys/kernel/config/target -maxdepth 3 | sed 's/^/  configfs | /'
	fi
done

after=$(vm_kres_wait mbcf0 "$before")
check assert_eq "$before" "$after" "mbcf0 resource summary after teardown"
check assert_eq 0 "$(rdma resource show mr 2>/dev/null | grep -c 'dev mbcf')" "MRs left on mbcf devices"
check assert_eq "$pins0" "$(vm_pins_held)" "pinned pages after teardown"
check assert_cmd rdma link delete mbcf0
check assert_cmd rdma link delete mbcf1
check assert_cmd rmmod mbcf
check vm_dmesg_check

if [ "$failed" != 0 ]; then
	echo "iser: $failed check(s) failed"
	exit 1
fi
echo "iser: all checks passed"
