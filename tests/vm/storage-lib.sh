# shellcheck shell=bash
# The steps the guest scripts that drive the kernel's storage consumers
# share: the nvmet target in configfs, the nvme host's block device and
# disconnect, fio with verification, a polled runner for commands that may
# hang in the kernel, the NFS server's daemons.  Sourced after lib.sh (its
# vm_* and assert_* are used here) by tests/vm/nvmeof.sh, storage_faults.sh,
# twokernel_storage.sh, nfsrdma.sh, iser.sh and srp.sh (for lio-ulp.sh) as
# "$(dirname "${MBCF_VM_LIB:-$0}")/storage-lib.sh", and by
# bench/guest-storage.sh as "$(dirname "$MBCF_VM_LIB")/storage-lib.sh".
# Every function takes what it needs as arguments and reads no caller's
# variables; the few results are in STL_* variables, named where set.

STL_NVMET=/sys/kernel/config/nvmet

# stl_modprobe MODULE...: each loaded in turn; the script ends at the first
# that does not load.
stl_modprobe() {
	local m
	for m in "$@"; do
		modprobe "$m" || vm_die "modprobe $m"
	done
}

# stl_configfs_brd: configfs mounted (nvmet's tree) and one 64 MiB brd
# ramdisk, /dev/ram0 (a target's backing device).  A FAIL line and 1 if
# either fails.
stl_configfs_brd() {
	modprobe configfs 2>/dev/null
	mountpoint -q /sys/kernel/config || mount -t configfs none /sys/kernel/config ||
		{ vm_fail "configfs"; return 1; }
	modprobe brd rd_nr=1 rd_size=65536 max_part=0 || { vm_fail "modprobe brd"; return 1; }
}

# stl_nvmet_subsys NQN DEVICE: the nvmet subsystem NQN (any host allowed)
# with DEVICE as its namespace 1, enabled.  A FAIL line and 1 if the
# subsystem cannot be made or the namespace not enabled.
stl_nvmet_subsys() {
	local s=$STL_NVMET/subsystems/$1
	mkdir "$s" || { vm_fail "nvmet subsystem"; return 1; }
	echo 1 >"$s/attr_allow_any_host"
	mkdir "$s/namespaces/1"
	echo -n "$2" >"$s/namespaces/1/device_path"
	echo 1 >"$s/namespaces/1/enable" || { vm_fail "namespace enable"; return 1; }
}

# stl_nvmet_subsys_del NQN: namespace 1 disabled and removed, then the
# subsystem (its ports unlinked first: stl_nvmet_port_del).
stl_nvmet_subsys_del() {
	local s=$STL_NVMET/subsystems/$1
	echo 0 >"$s/namespaces/1/enable"
	rmdir "$s/namespaces/1"
	rmdir "$s"
}

# stl_nvmet_port_add PORT TRTYPE ADDR SVCID NQN [TRIES]: nvmet port PORT
# (TRTYPE rdma or tcp, IPv4 ADDR:SVCID) made and NQN linked to it, which
# starts its listener.  The link is tried TRIES times (default 1) 0.3 s
# apart: an rdma listener binds to the device with ADDR's GID, which a
# device made a moment ago may not have yet.  1 if the port cannot be made
# or NQN is not linked (the caller says which failed).
stl_nvmet_port_add() {
	local p=$STL_NVMET/ports/$1 s=$STL_NVMET/subsystems/$5 tries=${6:-1} i
	mkdir "$p" || return 1
	echo "$2" >"$p/addr_trtype"
	echo ipv4 >"$p/addr_adrfam"
	echo "$3" >"$p/addr_traddr"
	echo "$4" >"$p/addr_trsvcid"
	if [ "$tries" = 1 ]; then
		ln -s "$s" "$p/subsystems/$5"
		return
	fi
	for ((i = 0; i < tries; i++)); do
		ln -s "$s" "$p/subsystems/$5" 2>/dev/null && break
		sleep 0.3
	done
	[ -L "$p/subsystems/$5" ]
}

# stl_nvmet_port_del PORT NQN: NQN unlinked from port PORT (its listener
# closes), the port removed.
stl_nvmet_port_del() {
	rm -f "$STL_NVMET/ports/$1/subsystems/$2" && rmdir "$STL_NVMET/ports/$1"
}

# stl_nvme_dev NQN: print the block device of namespace 1 of NQN: with
# native multipath (Debian's default) the subsystem's head,
# nvme<subsystem instance>n1; without, nvme<controller instance>n1.
# 1 if there is none (yet).
stl_nvme_dev() {
	local d
	for d in /sys/class/nvme-subsystem/nvme-subsys* /sys/class/nvme/nvme*; do
		[ "$(cat "$d/subsysnqn" 2>/dev/null)" = "$1" ] || continue
		d=${d##*/}		# nvme-subsysN or nvmeN
		d=${d#nvme-subsys}
		d=/dev/nvme${d#nvme}n1
		[ -b "$d" ] && { echo "$d"; return 0; }
	done
	return 1
}

# stl_nvme_disconnect NQN: the host disconnects from NQN (an assert_match
# line: one controller disconnected).
stl_nvme_disconnect() {
	local out
	out=$(timeout 120 nvme disconnect -n "$1" 2>&1)
	assert_match 'disconnected 1 controller' "$out" "nvme disconnect"
}

# stl_fio_verify DEV SECS LOG NAME BS OFFSET SIZE [FIO-ARG...]: fio job NAME
# writes SIZE bytes from OFFSET of DEV at random in blocks of BS (O_DIRECT,
# libaio, iodepth 16) and reads every block back verified (crc32c), within
# SECS; fio's output to the file LOG ("": none).  An "ok: fio NAME" line
# with its rates, or a FAIL line with the end of fio's output and 1.
stl_fio_verify() {
	local dev=$1 secs=$2 log=$3 out rc
	shift 3
	out=$(timeout "$secs" fio --name="$1" --filename="$dev" --direct=1 \
		--ioengine=libaio --iodepth=16 --rw=randwrite --bs="$2" \
		--offset="$3" --size="$4" --verify=crc32c --do_verify=1 \
		--verify_fatal=1 --randrepeat=0 "${@:5}" 2>&1)
	rc=$?
	[ -z "$log" ] || printf '%s\n' "$out" >"$log"
	if [ "$rc" = 0 ] && printf '%s\n' "$out" | grep -q ' err= 0'; then
		echo "ok: fio $1: $(printf '%s\n' "$out" | grep -E '^ *(WRITE|READ):' | sed 's/(.*//' | tr -s ' ' | tr '\n' ';')"
	else
		echo "FAIL: fio $1 rc=$rc"
		printf '%s\n' "$out" | tail -n 25 | sed 's/^/  | /'
		return 1
	fi
}

# stl_bounded SECS DIAG CMD...: CMD, which must end within SECS; else
# `DIAG "CMD..."` (the caller's diagnostics: what the kernel was doing) and
# the script ends.  Polled, not timeout(1): a task stuck in the kernel
# ignores even SIGKILL.  Returns CMD's status.
stl_bounded() {
	local secs=$1 diag=$2 pid end
	shift 2
	"$@" &
	pid=$!
	end=$((SECONDS + secs))
	while kill -0 "$pid" 2>/dev/null; do
		if [ "$SECONDS" -ge "$end" ]; then
			"$diag" "$*"
			vm_die "not done after $secs s: $*"
		fi
		sleep 0.2
	done
	wait "$pid"
}

# stl_rpcbind_start: rpcbind in the background (STL_RPCBIND_PID), waited
# for up to 10 s (nfsd and lockd register with it; mount.nfs asks it for
# mountd's port for v3).  1 if its socket is not there by then.
stl_rpcbind_start() {
	mkdir -p /run/rpcbind
	rpcbind -f -w &
	STL_RPCBIND_PID=$!
	for _ in $(seq 100); do
		[ -S /run/rpcbind.sock ] && break
		sleep 0.1
	done
	[ -S /run/rpcbind.sock ]
}

# stl_nfsd_start CLIENTS:DIR THREADS PORT FAIL: DIR exported (the only
# export; fsid=0: NFSv4's root, as the guest's root, an overlay, cannot be
# exported), rpc.mountd in the background (STL_MOUNTD_PID; it answers the
# kernel's export cache upcalls, and MNT for v3), nfsd with THREADS threads
# and a short NFSv4 grace period (opens wait it out), its rdma listener on
# PORT.  At the first step that fails: `FAIL STEP` (the caller's vm_die, or
# what else it does then) and 1.
stl_nfsd_start() {
	local fail=$4
	: >/etc/exports
	exportfs -o rw,no_root_squash,insecure,no_subtree_check,fsid=0 "$1" ||
		{ "$fail" exportfs; return 1; }
	rpc.mountd -F &
	STL_MOUNTD_PID=$!
	rpc.nfsd -G 10 -L 10 "$2" || { "$fail" rpc.nfsd; return 1; }
	echo "rdma $3" >/proc/fs/nfsd/portlist || { "$fail" "rdma listener"; return 1; }
}

# stl_nfsd_stop DIR PID...: nfsd stopped and the exports dropped (an
# assert_cmd line each), PIDs (rpcbind, rpc.mountd) ended, the nfsd
# filesystem and DIR (the exported tmpfs) unmounted.  Returns how many of
# the two asserts failed (callers add it to their count).
stl_nfsd_stop() {
	local dir=$1 n=0
	shift
	assert_cmd rpc.nfsd 0 || n=$((n + 1))
	assert_cmd exportfs -ua || n=$((n + 1))
	kill "$@" 2>/dev/null
	wait "$@" 2>/dev/null
	umount /proc/fs/nfsd
	umount "$dir"
	return "$n"
}
