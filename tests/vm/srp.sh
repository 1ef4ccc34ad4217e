#!/bin/bash
# Guest test: the SCSI RDMA Protocol on mbcf0: the LIO target's srpt fabric
# (ib_srpt) and the ib_srp initiator, both unmodified, connected through
# rdma_cm (RoCE-style ports have no IB CM), target and initiator on one
# kernel, 192.0.2.10 to itself.
#   - ib_srpt with srpt_service_guid = mbcf0's node GUID (the id_ext and
#     ioc_guid a login must name), listening for rdma_cm on port 5555
#     (configfs srpt/discovery_auth/rdma_cm_port); its target port named by
#     mbcf0's port GUID, a brd ramdisk as an iblock backstore on LUN 0, an
#     ACL for the initiator (ib_srpt names an rdma_cm session by the
#     connection's local address: 192.0.2.10);
#   - rxe0 removed first; ib_srp's add_target on srp-mbcf0-1 with
#     "id_ext=GUID,ioc_guid=GUID,dest=192.0.2.10:5555,ch_count=1";
#   - the SCSI host is ib_srp's, the channel's two RC QPs are on mbcf0 and
#     none on any other device; ib_srp registers every I/O with fast
#     registration (mbcf refuses the unsafe global rkey): its FRWR MRs live
#     on mbcf0 and are re-keyed by the I/O;
#   - fio randwrite + verify at 4 KiB and 128 KiB; a pattern written, read
#     from the target's ramdisk directly, the remote port deleted, logged in
#     again, read back identical;
#   - teardown: the remote port deleted, target removed, the mbcf0 resource
#     summary back to what it was before, no page left pinned, the ULP and
#     mbcf modules unload, the kernel log is clean.
#   tests/vm/run.sh --build BUILD tests/vm/srp.sh
set -u
# shellcheck source=lib.sh
. "${MBCF_VM_LIB:-$(dirname "$0")/lib.sh}"

vm_require_mbcf

failed=0
check() {
	"$@" || failed=$((failed + 1))
}
CMPORT=5555
CFG=/sys/kernel/config/target
logs=/var/tmp/srp
mkdir -p "$logs"

rdma link delete rxe0 || vm_die "cannot remove rxe0"
before=$(vm_kres mbcf0)
pins0=$(vm_pins_held)
vm_log "mbcf0 resources before: $before; pinned pages: $pins0"

# mbcf0's node GUID, 16 hex digits; its port GUID (GID 0's interface ID,
# "xxxx:xxxx:xxxx:xxxx"): ib_srpt's name for the port
read -r GUID </sys/class/infiniband/mbcf0/node_guid
GUID=${GUID//:/}
read -r gid0 </sys/class/infiniband/mbcf0/ports/1/gids/0
PORTID=${gid0#*:*:*:*:}
TPG=$CFG/srpt/$PORTID/tpg_1
vm_log "node GUID $GUID, target port $PORTID"

# --- target ------------------------------------------------------------------
vm_phase "LIO srpt target"
modprobe configfs 2>/dev/null
mountpoint -q /sys/kernel/config || mount -t configfs none /sys/kernel/config ||
	vm_die "configfs"
modprobe brd rd_nr=1 rd_size=65536 max_part=0 || vm_die "modprobe brd"
for m in target_core_mod target_core_iblock sd_mod; do
	modprobe "$m" || vm_die "modprobe $m"
done
modprobe ib_srpt srpt_service_guid="$GUID" || vm_die "modprobe ib_srpt"
check assert_eq "0x$GUID" "$(cat /sys/module/ib_srpt/parameters/srpt_service_guid)" \
	"ib_srpt's srpt_service_guid"
mkdir -p "$CFG/core/iblock_0/ram0" || vm_die "iblock backstore"
echo udev_path=/dev/ram0 >"$CFG/core/iblock_0/ram0/control"
echo 1 >"$CFG/core/iblock_0/ram0/enable" || vm_die "backstore enable"
mkdir -p "$CFG/srpt" || vm_die "srpt fabric"
echo "$CMPORT" >"$CFG/srpt/discovery_auth/rdma_cm_port" || vm_die "rdma_cm_port"
mkdir "$CFG/srpt/$PORTID" || vm_die "srpt target port $PORTID"
mkdir -p "$TPG/lun/lun_0" || vm_die "tpg"
ln -s "$CFG/core/iblock_0/ram0" "$TPG/lun/lun_0/ram0" || vm_die "lun 0"
mkdir -p "$TPG/acls/$VM_IP0/lun_0" || vm_die "acl"
ln -s "$TPG/lun/lun_0" "$TPG/acls/$VM_IP0/lun_0/lun_0" || vm_die "mapped lun 0"
echo 1 >"$TPG/enable" || vm_die "tpg enable"
check vm_wait_listen "$CMPORT"
vm_log "mbcf0 resources with srpt listening: $(vm_kres mbcf0)"

# --- initiator -----------------------------------------------------------------
vm_phase "ib_srp"
modprobe ib_srp || vm_die "modprobe ib_srp"
ADD=/sys/class/infiniband_srp/srp-mbcf0-1/add_target
[ -e "$ADD" ] || vm_die "no $ADD"
TARGET="id_ext=$GUID,ioc_guid=$GUID,dest=$VM_IP0:$CMPORT,ch_count=1"

# srp_host: the SCSI host ib_srp made (hostN); srp_dev: its LUN 0's disk
srp_host() {
	local h n
	for h in /sys/class/scsi_host/host*; do
		read -r n 2>/dev/null <"$h/proc_name" || continue
		[ "$n" = ib_srp ] && { echo "${h##*/}"; return 0; }
	done
	return 1
}
srp_dev() {
	local h b
	h=$(srp_host) || return 1
	for b in /sys/class/scsi_disk/"${h#host}":0:0:0/device/block/*; do
		[ -e "$b" ] && { echo "/dev/${b##*/}"; return 0; }
	done
	return 1
}

login() {
	local t0=$EPOCHREALTIME
	if ! echo "$TARGET" >"$ADD"; then
		echo "FAIL: add_target $TARGET"
		dmesg | tail -n 20 | sed 's/^/  | /'
		return 1
	fi
	DEV=
	for _ in $(seq 300); do
		DEV=$(srp_dev) && [ -b "$DEV" ] && break
		sleep 0.2
	done
	if ! [ -b "$DEV" ]; then
		echo "FAIL: no disk behind ib_srp"
		ls /sys/class/scsi_host /sys/class/srp_remote_ports 2>&1 | sed 's/^/  | /'
		dmesg | tail -n 30 | sed 's/^/  | /'
		return 1
	fi
	vm_log "logged in: $DEV ($(srp_host)) in $(vm_elapsed_since "$t0") s"
}

logout() {
	local p n=0
	for p in /sys/class/srp_remote_ports/port-*; do
		[ -e "$p/delete" ] || continue
		echo 1 >"$p/delete" && n=$((n + 1))
	done
	assert_eq 1 "$n" "SRP remote ports deleted" || return 1
	for _ in $(seq 300); do
		srp_host >/dev/null || return 0
		sleep 0.2
	done
	echo "FAIL: ib_srp's SCSI host still there after the delete"
	return 1
}

login || vm_die "first login"
check assert_eq 1 "$(ls -d /sys/class/srp_remote_ports/port-* 2>/dev/null | wc -l)" \
	"SRP remote ports"

# Initiator and target QPs (both made by rdma_create_qp: "comm [rdma_cm]")
# live on mbcf0: one RC QP each end of the one channel; none elsewhere.
qps=$(rdma resource show qp 2>/dev/null)
printf '%s\n' "$qps" | sed 's/^/  | /' | head -n 8
check assert_eq 2 "$(printf '%s\n' "$qps" | grep -cE 'link mbcf0/1 .*type RC .*comm \[rdma_cm\]')" \
	"kernel RC QPs of rdma_cm on mbcf0"
check assert_eq 0 "$(printf '%s\n' "$qps" | grep -F 'comm [rdma_cm]' | grep -vc 'link mbcf0/')" \
	"kernel QPs on other devices"
vm_log "mbcf0 resources while logged in: $(vm_kres mbcf0)"

# ib_srp's fast registration MRs, "mrn N rkey K": ib_srp re-keys one
# (ib_update_fast_reg_key) before each IB_WR_REG_MR it posts
srp_mrs() {
	rdma resource show mr 2>/dev/null | awk '$2 == "mbcf0" && / comm \[ib_srp\]/ {
		for (i = 3; i < NF; i++) if ($i == "mrn") n = $(i + 1); else if ($i == "rkey") k = $(i + 1)
		print n, k }' | LC_ALL=C sort
}
mrs0=$(srp_mrs)
nmrs=$(printf '%s\n' "$mrs0" | grep -c .)
vm_log "ib_srp MRs on mbcf0: $nmrs"
if [ "$nmrs" -ge 1 ]; then
	echo "ok: ib_srp holds $nmrs MRs on mbcf0"
else
	echo "FAIL: ib_srp holds no MR on mbcf0"
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
rekeyed=$(LC_ALL=C join <(printf '%s\n' "$mrs0") <(srp_mrs) | awk '$2 != $3' | wc -l)
if [ "$rekeyed" -ge 1 ]; then
	echo "ok: $rekeyed of ib_srp's $nmrs MRs re-keyed by fast registration during fio"
else
	echo "FAIL: none of ib_srp's $nmrs MRs was re-keyed during fio"
	failed=$((failed + 1))
fi

# --- data reaches the ramdisk and survives a new login -----------------------
dd if=/dev/urandom of="$logs/pattern" bs=1M count=4 status=none
check assert_cmd dd if="$logs/pattern" of="$DEV" bs=64k seek=512 oflag=direct status=none
sync
rm -f "$logs/ram"
dd if=/dev/ram0 of="$logs/ram" bs=64k skip=512 count=64 iflag=direct status=none
if cmp -s "$logs/pattern" "$logs/ram"; then
	echo "ok: the 4 MiB written through SRP are on the target's /dev/ram0"
else
	echo "FAIL: the target's /dev/ram0 does not hold the bytes written"
	failed=$((failed + 1))
fi
check logout
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
echo 0 >"$TPG/enable"
rm -f "$TPG/acls/$VM_IP0/lun_0/lun_0"
rmdir "$TPG/acls/$VM_IP0/lun_0" "$TPG/acls/$VM_IP0"
rm -f "$TPG/lun/lun_0/ram0"
rmdir "$TPG/lun/lun_0" "$TPG" "$CFG/srpt/$PORTID"
echo 0 >"$CFG/srpt/discovery_auth/rdma_cm_port"
rmdir "$CFG/srpt"		# the fabric's directory holds ib_srpt
rmdir "$CFG/core/iblock_0/ram0" "$CFG/core/iblock_0"
# target_core_mod loads every backend (file, pscsi, user) itself
for m in ib_srp ib_srpt target_core_iblock target_core_file target_core_pscsi \
	target_core_user target_core_mod brd; do
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
	echo "srp: $failed check(s) failed"
	exit 1
fi
echo "srp: all checks passed"
