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
# shellcheck source=storage-lib.sh
. "$(dirname "${MBCF_VM_LIB:-$0}")/storage-lib.sh"
# shellcheck source=lio-ulp.sh
. "$(dirname "${MBCF_VM_LIB:-$0}")/lio-ulp.sh"

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
	local t0=$EPOCHREALTIME err=
	# ib_srp drops a deleted target from its list only after its SCSI host
	# is gone (srp_remove_work): until then the same target is EEXIST
	for _ in $(seq 150); do
		err=$({ echo "$TARGET" >"$ADD"; } 2>&1) && break
		[[ $err == *"File exists"* ]] || break
		sleep 0.2
	done
	if [ -n "$err" ]; then
		echo "FAIL: add_target $TARGET: $err"
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

lio_ulp_qps
lio_ulp_data ib_srp SRP

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
lio_ulp_finish srp ib_srp ib_srpt
