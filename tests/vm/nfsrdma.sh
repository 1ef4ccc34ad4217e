#!/bin/bash
# Guest test: NFS over RDMA (the kernel's nfsd with its svcrdma listener, the
# NFS client's xprtrdma transport) on mbcf0, NFSv3 and NFSv4.2.
#   - server and client on one kernel, both on mbcf0, 192.0.2.10 to itself
#     (the kernel's rdma_cm IDs live in the initial namespace, as in
#     nvmeof.sh); rxe0 is removed first so rdma_cm takes mbcf0;
#   - the minimal server: a tmpfs exported with an fsid (the guest's root is
#     an overlay), rpcbind (nfsd and lockd register with it; mount.nfs asks
#     it for mountd's port for v3), rpc.mountd (answers the kernel's export
#     cache upcalls, and MNT for v3), rpc.nfsd, then `rdma 20049` written
#     to /proc/fs/nfsd/portlist;
#   - for each version: mount -o proto=rdma,port=20049, files of several sizes
#     (page-aligned or not, up to 3 MiB) written through NFS, their checksums
#     compared on the server's tmpfs; unmount, mount again (an empty page
#     cache), read back through NFS (buffered and O_DIRECT) and compared; a
#     file written on the server read through NFS;
#   - the traffic went over mbcf0: mountstats names the rdma transport, no TCP
#     connection to port 2049 exists, and mbcf0's tx_payload_bytes grew by at
#     least the file bytes moved;
#   - teardown: unmount, nfsd stopped, daemons ended, modules removed; the
#     mbcf0 resource summary is what it was before (no kernel PD, QP, CM id
#     or MR left), no page left pinned, mbcf unloads, the kernel log is clean.
#   tests/vm/run.sh --build BUILD tests/vm/nfsrdma.sh
#   ... --env NFSRDMA_TRACE=1: a step that hangs also shows the rpcrdma and
#   sunrpc trace events
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
EXPORT=/srv/mbcf-nfs
MNT=/mnt/mbcf-nfs
PORT=20049
work=/var/tmp/nfsrdma
mkdir -p "$work" "$EXPORT" "$MNT"

# mbcf0's PDs, QPs, CM ids and MRs ("pd 1 qp 1 cm_id 0 mr 0"), as in
# nvmeof.sh (CQs stay in the device's CQ pool).
txbytes() { vm_dev_ctr mbcf0 tx_payload_bytes; }

rdma link delete rxe0 || vm_die "cannot remove rxe0"
before=$(vm_kres mbcf0)
pins0=$(vm_pins_held)
vm_log "mbcf0 resources before: $before; pinned pages: $pins0"

# --- server ------------------------------------------------------------------
vm_phase "nfs server"
stl_modprobe nfsd rpcrdma
mountpoint -q /proc/fs/nfsd || mount -t nfsd nfsd /proc/fs/nfsd || vm_die "mount nfsd"
mount -t tmpfs -o size=64m,mode=0755 mbcf-nfs "$EXPORT" || vm_die "tmpfs $EXPORT"
stl_rpcbind_start || vm_die "rpcbind did not start"
# v4 mounts "server:/": the export is NFSv4's root (fsid=0)
stl_nfsd_start "192.0.2.0/24:$EXPORT" 4 "$PORT" vm_die
sed 's/^/  portlist | /' /proc/fs/nfsd/portlist
check vm_wait_listen "$PORT"
vm_log "mbcf0 resources with nfsd listening: $(vm_kres mbcf0)"

# NFSRDMA_TRACE=1: the rpcrdma and sunrpc trace events, shown by diag
if [ -n "${NFSRDMA_TRACE:-}" ]; then
	echo 8192 >/sys/kernel/tracing/buffer_size_kb
	echo 1 >/sys/kernel/tracing/events/rpcrdma/enable
	for e in rpc_request rpc_task_end svc_process svc_send svc_drop svc_xdr_recvfrom rpc_xdr_reply_pages; do
		echo 1 >/sys/kernel/tracing/events/sunrpc/$e/enable 2>/dev/null
	done
fi

# --- data ----------------------------------------------------------------------
# sizes: 1 byte, one page, not page-aligned, 1 MiB, 3 MiB + 123
sizes="1 4096 5000 1048576 3145851"
total=0
for s in $sizes; do
	head -c "$s" /dev/urandom >"$work/f$s"
	total=$((total + s))
done
head -c 2000000 /dev/urandom >"$work/server-side"

sum() { sha256sum <"$1" | cut -d' ' -f1; }

# diag WHAT: what the transport was doing when WHAT did not finish
diag() {
	echo "  diagnostics after: $1"
	rdma resource show qp 2>/dev/null | grep mbcf0 | sed 's/^/  qp | /'
	rdma statistic show link mbcf0/1 2>/dev/null | tr ' ' '\n' |
		awk 'NF { if (k) { if ($0 != "0") printf "%s %s\n", k, $0; k = "" } else k = $0 }' |
		tr '\n' ' ' | sed 's/^/  ctr | /'
	echo
	echo w >/proc/sysrq-trigger
	if [ -n "${NFSRDMA_TRACE:-}" ]; then
		tail -n 300 /sys/kernel/tracing/trace | sed 's/^/  trace | /'
	fi
	dmesg | tail -n 80 | sed 's/^/  dmesg | /'
}

# guard SECS CMD...: CMD, given up on after SECS (diag then, and the script
# ends: a hung NFS call leaves nothing to tear down cleanly; stl_bounded)
guard() { stl_bounded "$1" diag "${@:2}"; }

nfs_mount() {	# VERS
	local opts=proto=rdma,port=$PORT,vers=$1 path=/
	[ "$1" = 3 ] && opts=$opts,nolock path=$EXPORT
	if ! guard 120 mount -t nfs -o "$opts" "$VM_IP0:$path" "$MNT"; then
		echo "FAIL: mount -o $opts"
		dmesg | tail -n 20 | sed 's/^/  | /'
		return 1
	fi
	echo "ok: mount -t nfs -o $opts $VM_IP0:$path $MNT"
}

nfs_umount() {
	guard 120 umount "$MNT" && echo "ok: umount $MNT"
}

run_version() {	# VERS
	local v=$1 dir=v$1 t0 tx0 tx1 moved=0 s f out rc=0
	vm_phase "NFS version $v"
	mkdir -p "$EXPORT/$dir"
	cp "$work/server-side" "$EXPORT/$dir/server-side"
	tx0=$(txbytes)
	t0=$EPOCHREALTIME
	nfs_mount "$v" || return 1

	# the mount's transport is rdma, on port 20049
	out=$(awk -v m="$MNT" '$1 == "device" && $5 == m { on = 1; next }
		$1 == "device" { on = 0 } on && $1 == "xprt:" { print $2; exit }' \
		/proc/self/mountstats)
	assert_eq rdma "$out" "vers=$v: transport in mountstats" || rc=1
	out=$(grep -E "^[^ ]+ $MNT nfs4? " /proc/mounts | head -n 1)
	assert_match "[ ,]proto=rdma,(.*,)?port=$PORT[ ,]" "$out" "vers=$v: /proc/mounts options" || rc=1
	assert_match "vers=$v[,.]|vers=$v\$" "$out" "vers=$v: /proc/mounts version" || rc=1

	for s in $sizes; do
		if ! guard 120 cp "$work/f$s" "$MNT/$dir/f$s"; then
			echo "FAIL: vers=$v: writing f$s"
			rc=1
		fi
		moved=$((moved + s))
	done
	guard 120 sync
	# what reached the server's tmpfs
	for s in $sizes; do
		assert_eq "$(sum "$work/f$s")" "$(sum "$EXPORT/$dir/f$s" 2>/dev/null)" \
			"vers=$v: f$s ($s bytes) on the server" || rc=1
	done
	nfs_umount || rc=1
	# an empty page cache: the reads go over the wire
	nfs_mount "$v" || return 1
	for s in $sizes; do
		assert_eq "$(sum "$work/f$s")" "$(sum "$MNT/$dir/f$s" 2>/dev/null)" \
			"vers=$v: f$s read back through NFS" || rc=1
		moved=$((moved + s))
	done
	f=$MNT/$dir/server-side
	assert_eq "$(sum "$work/server-side")" "$(sum "$f" 2>/dev/null)" \
		"vers=$v: a 2000000-byte file written on the server, read through NFS" || rc=1
	out=$(dd if="$f" bs=1M iflag=direct status=none 2>&1 | sha256sum | cut -d' ' -f1)
	assert_eq "$(sum "$work/server-side")" "$out" "vers=$v: the same, O_DIRECT" || rc=1
	moved=$((moved + 2 * 2000000))
	# nothing of it went over TCP to nfsd
	out=$(ss -Htn state established "( dport = :2049 or sport = :2049 )" | wc -l)
	assert_eq 0 "$out" "vers=$v: TCP connections to nfsd's port 2049" || rc=1
	vm_log "vers=$v: mbcf0 resources while mounted: $(vm_kres mbcf0)"
	nfs_umount || rc=1
	tx1=$(txbytes)
	vm_log "vers=$v: $moved file bytes in $(vm_elapsed_since "$t0") s; mbcf0 tx_payload_bytes +$((tx1 - tx0))"
	if [ "$((tx1 - tx0))" -ge "$moved" ]; then
		echo "ok: vers=$v: mbcf0 carried $((tx1 - tx0)) payload bytes >= $moved file bytes"
	else
		echo "FAIL: vers=$v: mbcf0 carried $((tx1 - tx0)) payload bytes < $moved file bytes"
		rc=1
	fi
	return "$rc"
}

check guard 900 run_version 3
check guard 900 run_version 4.2

# --- teardown --------------------------------------------------------------------
vm_phase "teardown"
stl_nfsd_stop "$EXPORT" "$STL_MOUNTD_PID" "$STL_RPCBIND_PID"
failed=$((failed + $?))
for m in rpcrdma nfsv4 nfsv3 nfs nfsd; do
	lsmod | grep -q "^$m " || continue
	check assert_cmd modprobe -r "$m"
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
	echo "nfsrdma: $failed check(s) failed"
	exit 1
fi
echo "nfsrdma: all checks passed"
