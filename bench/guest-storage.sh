# shellcheck shell=bash
# bench/guest-storage.sh: the kernel storage consumers' rows of bench/guest.sh
# (bench/run.sh --storage-only); sourced by it, which provides emit,
# kernel_ticks, REPS and $ack, and MBCF_VM_LIB (beside which storage-lib.sh is).
#
# Shape: one device per transport, as in tests/vm/nvmeof.sh and nfsrdma.sh.
# The kernel initiators and targets create their rdma_cm IDs (and nvme-tcp,
# nvmet-tcp and the NFS client and server their sockets) in the initial
# network namespace, where only veth0 is: mbcf1's veth1 lives in ns1, so
# no kernel consumer can reach it.  Target and host therefore both sit on
# 192.0.2.10: over mbcf0 (its frames to its own MAC come straight back in,
# kmod/net.c), over rxe0 (its loopback), and for TCP over lo (a local
# address).  rdma_cm binds 192.0.2.10 to the first device with that GID, so
# the mbcf rows run with rxe0 removed and the rxe rows with mbcf0 removed.
#
# NVMe over Fabrics: a brd ramdisk (64 MiB, every page written first) as
# namespace 1 of one nvmet subsystem, one port at a time (rdma or tcp),
# `nvme connect` with its defaults; fio (libaio, O_DIRECT, iodepth 32, one
# job pinned to vCPU 1) 4 KiB random read and 128 KiB sequential read.
# Kernel CPU per I/O: kernel_ticks() (system + irq + softirq, both vCPUs)
# over the whole fio process, divided by fio's I/O count.
# NFS: one tmpfs export, nfsd listening on TCP 2049 and RDMA 20049, mounted
# vers=4.2 with proto=tcp,port=2049 or proto=rdma,port=20049 and nothing
# else; a 64 MiB file written (dd bs=1M, conv=fsync) and, after the
# client's page cache is dropped, read (dd to /dev/null); dd's own rate.

# shellcheck source=../tests/vm/storage-lib.sh
. "$(dirname "$MBCF_VM_LIB")/storage-lib.sh"

ST_NQN=nqn.2026-12.org.example:mbcf-bench
ST_HOSTNQN=nqn.2014-08.org.nvmexpress:uuid:6d62636f-0000-4000-8000-000000000002
ST_HOSTID=6d62636f-0000-4000-8000-000000000002
ST_LOG=/var/tmp/bench-storage
ST_RUNTIME=${BENCH_ST_RUNTIME:-10}	# seconds per measured fio run
ST_EXPORT=/srv/mbcf-bench
ST_MNT=/mnt/mbcf-bench
ST_MIB=${BENCH_ST_MIB:-64}		# NFS file size, MiB
ST_CPU=${ST_CPU:-1}	# the vCPU fio runs on (bench/storage-icount.sh: 0, its only one)
ST_DEV=
ST_PIDS=	# rpcbind, rpc.mountd

st_nvmet_setup() {
	mkdir -p "$ST_LOG"
	stl_configfs_brd || exit 1
	# every page allocated: reads of a never-written brd page are a memset
	dd if=/dev/zero of=/dev/ram0 bs=1M count=64 oflag=direct status=none || vm_die "fill ram0"
	stl_modprobe nvmet nvmet-rdma nvmet-tcp nvme-fabrics nvme-rdma nvme-tcp
	stl_nvmet_subsys "$ST_NQN" /dev/ram0 || exit 1
}

# st_connect TRTYPE(rdma|tcp): a port of that type on 192.0.2.10:4420, the
# host connected to it; ST_DEV its block device
st_connect() {
	local out
	stl_nvmet_port_add 1 "$1" "$VM_IP0" 4420 "$ST_NQN" || vm_die "nvmet $1 port"
	out=$(vm_retry 5 1 timeout 120 nvme connect -t "$1" -a "$VM_IP0" -s 4420 -n "$ST_NQN" \
		--hostnqn="$ST_HOSTNQN" --hostid="$ST_HOSTID" 2>&1) ||
		{ dmesg | tail -n 20; vm_die "nvme connect -t $1: $out"; }
	ST_DEV=
	for _ in $(seq 300); do
		ST_DEV=$(stl_nvme_dev "$ST_NQN") && break
		sleep 0.2
	done
	[ -b "$ST_DEV" ] || vm_die "no block device for $ST_NQN over $1"
	vm_log "storage: nvme over $1: $ST_DEV; $(dmesg | grep -o 'creating [0-9]* I/O queues' | tail -n 1)"
}

st_disconnect() {
	timeout 120 nvme disconnect -n "$ST_NQN" >/dev/null 2>&1 || vm_log "storage: nvme disconnect failed"
	for _ in $(seq 100); do stl_nvme_dev "$ST_NQN" >/dev/null || break; sleep 0.2; done
	stl_nvmet_port_del 1 "$ST_NQN"
}

# st_fio_once RW BS SECONDS: prints "IOPS MiB/s IOS TICKS" (TICKS: the
# kernel's CPU over the fio process, USER_HZ), or nothing if fio failed
st_fio_once() {
	local t0 t1 out
	t0=$(kernel_ticks)
	out=$(timeout $(($3 + 120)) taskset -c "$ST_CPU" fio --name=st --filename="$ST_DEV" --direct=1 \
		--ioengine=libaio --iodepth=32 --rw="$1" --bs="$2" --runtime="$3" --time_based \
		--norandommap --randrepeat=0 --output-format=json 2>>"$ST_LOG/fio.err")
	t1=$(kernel_ticks)
	python3 -c '
import json, sys
t = sys.stdin.read()
r = json.loads(t[t.index("{"):])["jobs"][0]["read"]	# past any warning lines
if r["total_ios"] > 0:
    print("%.1f %.2f %d %s" % (r["iops"], r["bw_bytes"] / 1048576, r["total_ios"], sys.argv[1]))
' "$((t1 - t0))" <<<"$out" 2>>"$ST_LOG/fio.err"
}

# st_ctrs DEV: the port's nonzero counters, "name value" per line
st_ctrs() {
	rdma statistic show link "$1/1" 2>/dev/null | tr ' ' '\n' |
		awk 'NF { if (k) { if ($0 != "0") print k, $0; k = "" } else k = $0 }'
}

# st_fio_case TRANSPORT RW BS: a 3 s warm-up, REPS runs; rows for IOPS,
# MiB/s and kernel CPU-us per I/O.  For mbcf, mbcf0's counters per I/O over
# the measured runs go to the log.
st_fio_case() {
	local tr=$1 rw=$2 bs=$3 i r iops="" bw="" cpu="" hz ios=0 c0 c1 m=-
	hz=$(getconf CLK_TCK)
	[ "$tr" = mbcf ] && m=$ack
	st_fio_once "$rw" "$bs" 3 >/dev/null
	[ "$tr" = mbcf ] && c0=$(st_ctrs mbcf0)
	for ((i = 0; i < REPS; i++)); do
		r=$(st_fio_once "$rw" "$bs" "$ST_RUNTIME")
		[ -n "$r" ] || r="nan nan 0 0"
		vm_log "storage: $tr fio $rw $bs run $i: $r (IOPS MiB/s IOs kernel-ticks)"
		# shellcheck disable=SC2086 # four words
		set -- $r
		iops="$iops $1"
		bw="$bw $2"
		ios=$((ios + $3))
		cpu="$cpu $(awk -v t="$4" -v n="$3" -v hz="$hz" 'BEGIN { if (n > 0) printf "%.1f", t / hz / n * 1e6; else print "nan" }')"
	done
	if [ "$tr" = mbcf ] && [ "$ios" -gt 0 ]; then
		c1=$(st_ctrs mbcf0)
		vm_log "storage: mbcf0 counters per I/O, fio $rw $bs: $(awk -v n="$ios" '
			NR == FNR { a[$1] = $2; next } ($2 - a[$1]) > 0 { printf "%s %.2f ", $1, ($2 - a[$1]) / n }' \
			<(printf '%s\n' "$c0") <(printf '%s\n' "$c1"))"
	fi
	emit nvme "$tr" "fio $rw qd32" "$bs" - "$m" IOPS $iops
	emit nvme "$tr" "fio $rw qd32" "$bs" - "$m" MiB/s $bw
	emit nvme "$tr" "fio $rw qd32" "$bs" - "$m" kcpu_us/IO $cpu
}

# st_profile TRANSPORT: one 8 s 4 KiB random-read run under perf (cpu-clock:
# no PMU under TCG), its top kernel symbols to the log (not a figure)
st_profile() {
	command -v perf >/dev/null || return 0
	perf record -a -e cpu-clock -F 499 -o "$ST_LOG/perf.$1" -- \
		taskset -c "$ST_CPU" fio --name=p --filename="$ST_DEV" --direct=1 --ioengine=libaio \
		--iodepth=32 --rw=randread --bs=4096 --runtime=8 --time_based --norandommap \
		--randrepeat=0 >/dev/null 2>>"$ST_LOG/perf.err"
	perf report -i "$ST_LOG/perf.$1" --no-children --sort dso,sym --stdio 2>/dev/null |
		grep -v '^#' | sed '/^$/d' | head -n 25 | sed "s/^/PROFILE,$1,/"
}

st_nvme() { # transport(mbcf|tcp|rxe)
	local tt=rdma
	[ "$1" = tcp ] && tt=tcp
	st_connect $tt
	st_fio_case "$1" randread 4096
	st_fio_case "$1" read 131072
	st_profile "$1"
	st_disconnect
}

# --- NFS ---------------------------------------------------------------------
st_nfs_setup() {
	stl_modprobe nfsd rpcrdma
	mountpoint -q /proc/fs/nfsd || mount -t nfsd nfsd /proc/fs/nfsd || vm_die "mount nfsd"
	mkdir -p "$ST_EXPORT" "$ST_MNT"
	mount -t tmpfs -o size=$((ST_MIB * 2))m,mode=0755 mbcf-bench "$ST_EXPORT" || vm_die "tmpfs"
	stl_rpcbind_start
	ST_PIDS="$ST_PIDS $STL_RPCBIND_PID"
	# 8 threads, nfsd's default
	stl_nfsd_start "192.0.2.0/24:$ST_EXPORT" 8 20049 vm_die
	ST_PIDS="$ST_PIDS $STL_MOUNTD_PID"
	vm_wait_listen 20049 && vm_wait_listen tcp:2049 || vm_die "nfsd listeners"
	head -c $((ST_MIB * 1048576)) /dev/urandom >"$ST_LOG/src"
}

# nfsd stopped (its listeners closed) before a device goes away
st_nfs_stop() {
	rpc.nfsd 0
	exportfs -ua
	# shellcheck disable=SC2086 # a list of pids
	kill $ST_PIDS 2>/dev/null
	umount "$ST_EXPORT"
}

# st_dd ARGS...: dd's own rate ("bytes seconds" of its summary line) and the
# kernel's ticks over it: prints "MiB/s TICKS" or nothing
st_dd() {
	local t0 t1 out
	t0=$(kernel_ticks)
	out=$(timeout 300 dd bs=1M "$@" 2>&1)
	t1=$(kernel_ticks)
	awk -v t=$((t1 - t0)) '/bytes .* copied/ { s = $(NF - 3); if ($1 > 0 && s > 0) printf "%.2f %d\n", $1 / s / 1048576, t }' <<<"$out"
}

st_nfs() { # transport(mbcf|tcp)
	local tr=$1 opts i r w="" rd="" wc="" rc="" hz
	hz=$(getconf CLK_TCK)
	opts=vers=4.2,proto=rdma,port=20049
	[ "$tr" = tcp ] && opts=vers=4.2,proto=tcp,port=2049
	timeout 120 mount -t nfs -o "$opts" "$VM_IP0:/" "$ST_MNT" || vm_die "mount -o $opts"
	vm_log "storage: nfs $tr: $(grep " $ST_MNT " /proc/mounts)"
	for ((i = 0; i <= REPS; i++)); do	# run 0: warm-up (and the grace period)
		rm -f "$ST_MNT/f"
		sync
		r=$(st_dd if="$ST_LOG/src" of="$ST_MNT/f" conv=fsync)
		vm_log "storage: nfs $tr write run $i: ${r:-failed} (MiB/s kernel-ticks)"
		if [ "$i" -gt 0 ]; then
			# shellcheck disable=SC2086 # two words
			set -- ${r:-nan 0}
			w="$w $1"
			wc="$wc $(awk -v t="$2" -v hz="$hz" -v m="$ST_MIB" -v ok="$1" 'BEGIN { if (ok > 0) printf "%.2f", t / hz / m * 1000; else print "nan" }')"
		fi
		echo 3 >/proc/sys/vm/drop_caches
		r=$(st_dd if="$ST_MNT/f" of=/dev/null)
		vm_log "storage: nfs $tr read run $i: ${r:-failed} (MiB/s kernel-ticks)"
		if [ "$i" -gt 0 ]; then
			# shellcheck disable=SC2086 # two words
			set -- ${r:-nan 0}
			rd="$rd $1"
			rc="$rc $(awk -v t="$2" -v hz="$hz" -v m="$ST_MIB" -v ok="$1" 'BEGIN { if (ok > 0) printf "%.2f", t / hz / m * 1000; else print "nan" }')"
		fi
	done
	cmp -s "$ST_LOG/src" "$ST_MNT/f" || vm_log "storage: nfs $tr: WARNING: the file read back differs"
	rm -f "$ST_MNT/f"
	timeout 120 umount "$ST_MNT" || vm_log "storage: umount $ST_MNT failed"
	emit nfs "$tr" "dd write" $((ST_MIB * 1048576)) - - MiB/s $w
	emit nfs "$tr" "dd write" $((ST_MIB * 1048576)) - - kcpu_ms/MiB $wc
	emit nfs "$tr" "dd read" $((ST_MIB * 1048576)) - - MiB/s $rd
	emit nfs "$tr" "dd read" $((ST_MIB * 1048576)) - - kcpu_ms/MiB $rc
}

storage_rows() {
	rdma link delete rxe0 || vm_die "cannot remove rxe0"
	st_nvmet_setup
	st_nvme mbcf
	st_nvme tcp
	st_nfs_setup
	st_nfs mbcf
	st_nfs tcp
	st_nfs_stop
	# the rxe rows: rxe0 alone on 192.0.2.10's GID
	rdma link delete mbcf0 || vm_die "cannot remove mbcf0"
	rdma link add rxe0 type rxe netdev veth0 || vm_die "rxe0"
	vm_wait_port rxe0 20 || exit 1
	st_nvme rxe
}
