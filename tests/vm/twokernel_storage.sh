#!/bin/bash
# Pair test (two kernels): the kernel storage consumers with their two ends
# in different kernels, over the Ethernet link between guests A and B (the
# kernel initiators live in the initial network namespace, so one guest
# cannot separate them).  Guest A is the server, guest B the client, each
# on its own mbcf0 (rxe0 removed first, as in nvmeof.sh):
#   1. NVMe over Fabrics: nvmet-rdma on A (a brd ramdisk, port
#      198.51.100.1:4420), nvme-rdma on B: fio randwrite + verify at 4 KiB
#      and 128 KiB, then a 4 MiB pattern written by B whose SHA-256 A reads
#      from its own ramdisk, and a pattern A writes into its ramdisk read by
#      B after a reconnect;
#   2. NFS over RDMA: nfsd with its rdma listener on A (a tmpfs exported),
#      NFSv4.2 and NFSv3 mounts with proto=rdma on B: files B writes are
#      checked by SHA-256 on A's tmpfs, a file A writes is read on B
#      (buffered and O_DIRECT); the mount's transport is rdma;
#   each side's own kernel QPs are on its mbcf0, and each mbcf0 carried at
#   least the bytes moved; after teardown each mbcf0 holds exactly what it
#   held before (PDs, QPs, CM ids, MRs), no page is pinned, the modules
#   unload and both kernel logs are clean.
#   tests/vm/run2.sh --build BUILD tests/vm/twokernel_storage.sh [nvme] [nfs]
set -u
# shellcheck source=lib.sh
. "${MBCF_VM_LIB:-$(dirname "$0")/lib.sh}"
# shellcheck source=storage-lib.sh
. "$(dirname "${MBCF_VM_LIB:-$0}")/storage-lib.sh"

vm_pair_require

failed=0
check() {
	"$@" || failed=$((failed + 1))
}
A=$VM_PAIR_IP_A
NQN=nqn.2026-12.org.example:mbcf-pair
HOSTNQN=nqn.2014-08.org.nvmexpress:uuid:6d62636f-0000-4000-8000-000000000003
HOSTID=6d62636f-0000-4000-8000-000000000003
EXPORT=/srv/mbcf-nfs
MNT=/mnt/mbcf-nfs
NFSPORT=20049
work=/var/tmp/twokernel_storage
mkdir -p "$work"
parts=${*:-nvme nfs}

rdma link delete rxe0 || vm_die "cannot remove rxe0"
base=$(vm_kres mbcf0)
pins0=$(vm_pins_held)
vm_log "guest $VM_PAIR_ROLE: mbcf0 resources before: $base; pinned pages $pins0"
txb() { vm_dev_ctr mbcf0 tx_payload_bytes; }
rxb() { vm_dev_ctr mbcf0 rx_payload_bytes; }
sum() { sha256sum | cut -d' ' -f1; }

# guard SECS CMD...: CMD within SECS, else the blocked tasks, the peer told
# and the end of the script (stl_bounded)
guard_diag() {	# CMD
	rdma resource show 2>&1 | sed 's/^/  res | /'
	echo w >/proc/sysrq-trigger
	dmesg | tail -n 60 | sed 's/^/  dmesg | /'
	vm_pair_abort "$1 hung"
}
guard() { stl_bounded "$1" guard_diag "${@:2}"; }

# kernel_qps: the RC QPs of rdma_cm on mbcf0, and on other devices
kernel_qps() {
	local qps
	qps=$(rdma resource show qp 2>/dev/null)
	echo "$(printf '%s\n' "$qps" | grep -cE 'link mbcf0/1 .*type RC .*comm \[rdma_cm\]') $(printf '%s\n' "$qps" | grep -F 'comm [rdma_cm]' | grep -vc 'link mbcf0/')"
}

# ============================== NVMe over Fabrics ==============================
nvme_target() {	# A
	local t0 rx0
	vm_phase "nvme: target"
	stl_configfs_brd || { vm_pair_abort "brd"; return 1; }
	modprobe nvmet-rdma || { vm_pair_abort "nvmet-rdma"; return 1; }
	# unchecked: a subsystem that is not there fails the link below
	stl_nvmet_subsys "$NQN" /dev/ram0
	stl_nvmet_port_add 1 rdma "$A" 4420 "$NQN" || { vm_pair_abort "nvmet port"; return 1; }
	check vm_wait_listen 4420
	rx0=$(rxb)
	vm_pair_post nvme.ready
	# B's pattern, as it reached A's ramdisk
	vm_pair_wait nvme.written 900 >/dev/null || return 1
	vm_pair_post nvme.sum "$(dd if=/dev/ram0 bs=64k skip=512 count=64 status=none | sum)"
	# A's own pattern, for B to read after its reconnect
	head -c 4194304 /dev/urandom >"$work/a-pattern"
	vm_pair_wait nvme.disconnected 300 >/dev/null || return 1
	check assert_cmd dd if="$work/a-pattern" of=/dev/ram0 bs=64k seek=640 conv=notrunc status=none
	sync
	vm_pair_post nvme.apattern "$(sum <"$work/a-pattern")"
	vm_pair_wait nvme.done 900 >/dev/null || return 1
	vm_log "nvme: mbcf0 rx_payload_bytes +$(($(rxb) - rx0)) on the target"
	stl_nvmet_port_del 1 "$NQN"
	stl_nvmet_subsys_del "$NQN"
	check assert_cmd modprobe -r nvmet-rdma nvmet
	check assert_cmd modprobe -r brd
}

nvme_connect() {
	local out end
	out=$(timeout 120 nvme connect -t rdma -a "$A" -s 4420 -n "$NQN" \
		--hostnqn="$HOSTNQN" --hostid="$HOSTID" 2>&1) || { vm_fail "nvme connect: $out"; return 1; }
	end=$((SECONDS + 60))
	until DEV=$(stl_nvme_dev "$NQN"); do
		[ "$SECONDS" -ge "$end" ] && { vm_fail "no block device for $NQN"; return 1; }
		sleep 0.2
	done
	vm_log "nvme: connected to $A: $DEV"
}

run_fio() {	# NAME BS OFFSET SIZE: no runtime cap, no log
	stl_fio_verify "$DEV" 600 "" "$@"
}

nvme_host() {	# B
	local tx0 q got want
	vm_phase "nvme: host"
	modprobe nvme-rdma || { vm_pair_abort "nvme-rdma"; return 1; }
	vm_pair_wait nvme.ready 600 >/dev/null || return 1
	tx0=$(txb)
	nvme_connect || { vm_pair_abort "nvme connect"; return 1; }
	# this kernel holds only the host's ends: admin + >= 1 I/O queue
	read -r q other <<<"$(kernel_qps)"
	if [ "$q" -ge 2 ] && [ "$other" = 0 ]; then
		echo "ok: $q kernel RC QPs of rdma_cm on mbcf0 (the host's), none elsewhere"
	else
		failed=$((failed + 1))
		echo "FAIL: kernel RC QPs: $q on mbcf0 (want >= 2), $other elsewhere"
	fi
	vm_log "nvme: mbcf0 resources while connected: $(vm_kres mbcf0)"
	check run_fio rw4k 4k 0 4M
	check run_fio rw128k 128k 8M 8M
	head -c 4194304 /dev/urandom >"$work/b-pattern"
	check assert_cmd dd if="$work/b-pattern" of="$DEV" bs=64k seek=512 oflag=direct status=none
	sync
	vm_pair_post nvme.written
	got=$(vm_pair_wait nvme.sum 300)
	check assert_eq "$(sum <"$work/b-pattern")" "$got" "4 MiB written by B, SHA-256 of A's ramdisk"
	check stl_nvme_disconnect "$NQN"
	vm_pair_post nvme.disconnected
	want=$(vm_pair_wait nvme.apattern 300)
	check nvme_connect
	got=$(dd if="$DEV" bs=64k skip=640 count=64 iflag=direct status=none | sum)
	check assert_eq "$want" "$got" "4 MiB written by A into its ramdisk, read by B after a reconnect"
	check stl_nvme_disconnect "$NQN"
	# fio moved 4 + 8 MiB each way, the patterns 4 MiB each
	want=$(((4 + 8 + 4) * 1048576))
	got=$(($(txb) - tx0))
	if [ "$got" -ge "$want" ]; then
		echo "ok: B's mbcf0 sent $got payload bytes >= $want written"
	else
		failed=$((failed + 1))
		echo "FAIL: B's mbcf0 sent $got payload bytes < $want written"
	fi
	check assert_cmd modprobe -r nvme-rdma nvme-fabrics
	vm_pair_post nvme.done
}

# ================================ NFS over RDMA ================================
nfs_server() {	# A
	local v got
	vm_phase "nfs: server"
	modprobe nfsd && modprobe rpcrdma || { vm_pair_abort "nfsd/rpcrdma"; return 1; }
	mountpoint -q /proc/fs/nfsd || mount -t nfsd nfsd /proc/fs/nfsd
	mkdir -p "$EXPORT"
	mount -t tmpfs -o size=64m,mode=0755 mbcf-nfs "$EXPORT"
	stl_rpcbind_start
	stl_nfsd_start "198.51.100.0/24:$EXPORT" 4 "$NFSPORT" vm_pair_abort || return 1
	check vm_wait_listen "$NFSPORT"
	for v in 4.2 3; do
		mkdir -p "$EXPORT/v$v"
		head -c 2000000 /dev/urandom >"$EXPORT/v$v/from-a"
		vm_pair_post "nfs.ready.$v" "$(sum <"$EXPORT/v$v/from-a")"
		got=$(vm_pair_wait "nfs.written.$v" 900) || return 1
		# B's files as they reached A's tmpfs: "NAME SUM" pairs
		local name s line=
		for name in f1 f4096 f5000 f1048576 f3145851; do
			s=$(sum <"$EXPORT/v$v/$name" 2>/dev/null)
			line="$line $name=$s"
		done
		vm_pair_post "nfs.sums.$v" "$line"
		vm_pair_wait "nfs.done.$v" 900 >/dev/null || return 1
	done
	stl_nfsd_stop "$EXPORT" "$STL_MOUNTD_PID" "$STL_RPCBIND_PID"
	failed=$((failed + $?))
	check assert_cmd modprobe -r rpcrdma nfsd
}

nfs_client() {	# B
	local v opts path sizes="1 4096 5000 1048576 3145851" s want got tx0 rx0 moved out
	vm_phase "nfs: client"
	modprobe rpcrdma || { vm_pair_abort rpcrdma; return 1; }
	mkdir -p "$MNT"
	for s in $sizes; do
		head -c "$s" /dev/urandom >"$work/f$s"
	done
	for v in 4.2 3; do
		want=$(vm_pair_wait "nfs.ready.$v" 600) || return 1
		opts=proto=rdma,port=$NFSPORT,vers=$v path=/
		[ "$v" = 3 ] && opts=$opts,nolock path=$EXPORT
		tx0=$(txb) rx0=$(rxb) moved=0
		if ! guard 180 mount -t nfs -o "$opts" "$A:$path" "$MNT"; then
			failed=$((failed + 1))
			echo "FAIL: mount -o $opts $A:$path"
			vm_pair_post "nfs.written.$v" failed
			vm_pair_post "nfs.done.$v"
			continue
		fi
		out=$(awk -v m="$MNT" '$1 == "device" && $5 == m { on = 1; next }
			$1 == "device" { on = 0 } on && $1 == "xprt:" { print $2; exit }' /proc/self/mountstats)
		check assert_eq rdma "$out" "vers=$v: transport in mountstats"
		for s in $sizes; do
			guard 180 cp "$work/f$s" "$MNT/v$v/f$s" || { failed=$((failed + 1)); echo "FAIL: vers=$v: writing f$s"; }
			moved=$((moved + s))
		done
		guard 180 sync
		vm_pair_post "nfs.written.$v"
		got=$(vm_pair_wait "nfs.sums.$v" 300)
		for s in $sizes; do
			check assert_match "(^| )f$s=$(sum <"$work/f$s")( |\$)" "$got" "vers=$v: f$s ($s bytes) on A's tmpfs"
		done
		check assert_eq "$want" "$(guard 180 cat "$MNT/v$v/from-a" | sum)" \
			"vers=$v: 2000000 bytes written on A, read on B"
		check assert_eq "$want" "$(guard 180 dd if="$MNT/v$v/from-a" bs=1M iflag=direct status=none | sum)" \
			"vers=$v: the same, O_DIRECT"
		check assert_eq 0 "$(ss -Htn state established "( dport = :2049 )" | wc -l)" \
			"vers=$v: TCP connections to nfsd's port 2049"
		vm_log "vers=$v: mbcf0 resources while mounted: $(vm_kres mbcf0)"
		guard 180 umount "$MNT" && echo "ok: vers=$v: umount" || failed=$((failed + 1))
		got=$(($(txb) - tx0))
		if [ "$got" -ge "$moved" ]; then
			echo "ok: vers=$v: B's mbcf0 sent $got payload bytes >= $moved file bytes written"
		else
			failed=$((failed + 1))
			echo "FAIL: vers=$v: B's mbcf0 sent $got payload bytes < $moved written"
		fi
		got=$(($(rxb) - rx0))
		if [ "$got" -ge 4000000 ]; then
			echo "ok: vers=$v: B's mbcf0 received $got payload bytes >= 4000000 read"
		else
			failed=$((failed + 1))
			echo "FAIL: vers=$v: B's mbcf0 received $got payload bytes < 4000000 read"
		fi
		vm_pair_post "nfs.done.$v"
	done
	check assert_cmd modprobe -r rpcrdma
	for m in nfsv4 nfsv3 nfs; do
		lsmod | grep -q "^$m " || continue
		check assert_cmd modprobe -r "$m"
	done
}

for p in $parts; do
	case $p in
	nvme) if vm_is_pair_a; then nvme_target; else nvme_host; fi || failed=$((failed + 1)) ;;
	nfs) if vm_is_pair_a; then nfs_server; else nfs_client; fi || failed=$((failed + 1)) ;;
	*) vm_die "unknown part $p" ;;
	esac
	vm_pair_barrier "end.$p" 900 || failed=$((failed + 1))
done

# --- each kernel: nothing left -----------------------------------------------
after=$(vm_kres_wait mbcf0 "$base")
check assert_eq "$base" "$after" "guest $VM_PAIR_ROLE: mbcf0 resource summary after teardown"
check assert_eq 0 "$(rdma resource show mr 2>/dev/null | grep -c 'dev mbcf')" "MRs left on mbcf0"
check assert_eq "$pins0" "$(vm_pins_held)" "pinned pages after teardown"
check vm_dmesg_check
echo "twokernel_storage ($VM_PAIR_ROLE): $failed failed"
# Neither guest unloads mbcf or powers off while the other still talks to it.
vm_pair_post end "$failed"
vm_pair_wait end 300 >/dev/null
check assert_cmd rdma link delete mbcf0
check assert_cmd rmmod mbcf
[ "$failed" = 0 ]
