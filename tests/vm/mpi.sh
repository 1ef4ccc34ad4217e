#!/bin/bash
# Guest test: Open MPI 4.1 (Debian's openmpi-bin) with pml ucx and osc ucx
# on mbcf: tests/vm/progs/mpi_check.c (mbcf_mpi_check), two ranks, checks
# every byte it moves: ping-pong 1 B .. 1 MiB, allreduce, MPI_Put/MPI_Get
# (fence and lock/unlock) 8 B .. 1 MiB, MPI_Fetch_and_op/Compare_and_swap.
#   tests/vm/run.sh tests/vm/mpi.sh BUILD/tests/vm/progs/mbcf_mpi_check [quick] [rxe]
#
# Traffic over mbcf only, and how that is kept and proven:
#   - Open MPI: `--mca pml ucx --mca osc ucx` (forced: Open MPI 4.1 would
#     pick ob1 for a device whose name is not mlx*), `--mca btl self` (no
#     vader shared memory, no tcp, no openib BTL is even opened);
#   - UCX: UCX_TLS=ud_v,self (no posix/sysv/cma shared memory, no tcp);
#     UCX_NET_DEVICES per rank through a wrapper (rank 0: mbcf0:1, rank 1:
#     mbcf1:1), so rank 0's QPs are on mbcf0 (veth0) and rank 1's on mbcf1
#     (veth1, in ns1): every byte between them crosses the veth pair as
#     MBCF frames.  Both ranks run in the initial namespace: Open MPI's
#     runtime (PMIx) connects each rank to the local orted over TCP on
#     127.0.0.1, which a rank in ns1 cannot reach (MPI_Init fails there);
#     mbcf1's QPs and address handles live on veth1 whatever the process's
#     namespace (the kernel resolves routes in the netdev's namespace).
#   - proof: UCX_LOG_LEVEL=info makes each rank print the transports of each
#     endpoint ("ep_cfg[N]: tag(ud_verbs/mbcf0:1)", "rma_am(...)"): the
#     remote endpoints must use ud_verbs on the rank's own mbcf device and
#     nothing else (self only for a rank's endpoint to itself); mbcf's
#     counters (rdma statistic: rx_payload_bytes of mbcf0 + mbcf1) must grow
#     by at least the bytes the program says it moved; loopback (lo)
#     carries less than a tenth of that (the runtime's own chatter).
# With UCX_TLS=rc_v,self too once mbcf has SRQs (rc_verbs needs one).
# `rxe` also runs the program on rxe0 (both ranks on rxe0, it cannot cross
# namespaces) and only reports what happens: comparison, no verdict.
set -u
# shellcheck source=lib.sh
. "${MBCF_VM_LIB:-$(dirname "$0")/lib.sh}"

prog=$(vm_test_prog mbcf_mpi_check "${1:-}") || exit 1
shift
QUICK=0
RXE=0
for a in "$@"; do
	case $a in
	quick) QUICK=1 ;;
	rxe) RXE=1 ;;
	*) vm_die "unknown argument $a" ;;
	esac
done

vm_require_mbcf

failed=0
runs=0
logs=/var/tmp/mpi
mkdir -p "$logs"

# Open MPI aborts without a hostname; UCX wants /dev/shm.
echo mbcf-guest >/proc/sys/kernel/hostname
mountpoint -q /dev/shm || mount -t tmpfs tmpfs /dev/shm

fail() {
	failed=$((failed + 1))
	echo "FAIL: $*"
}

counter() { vm_dev_ctr "$1" "$2"; }
netbytes() {
	local r t
	read -r r <"/sys/class/net/$1/statistics/rx_bytes"
	read -r t <"/sys/class/net/$1/statistics/tx_bytes"
	echo $((r + t))
}

# The per-rank wrapper: each rank sees only its own device.
wrap=$logs/rank.sh
cat >"$wrap" <<'EOF'
#!/bin/bash
case ${OMPI_COMM_WORLD_RANK:?not started by mpirun} in
0) export UCX_NET_DEVICES=$MPI_DEV0:1 ;;
1) export UCX_NET_DEVICES=$MPI_DEV1:1 ;;
*) echo "rank.sh: only two ranks" >&2; exit 2 ;;
esac
exec "$@"
EOF
chmod +x "$wrap"

pargs=()
[ "$QUICK" = 1 ] && pargs=(-q)

# run TLS DEV0 DEV1: one mpirun; checks as described at the top.
run() {
	local tls=$1 d0=$2 d1=$3 tag="$1-$2-$3" rc rx0 rx1 lo0 lo1 moved sum line tlname
	case $tls in ud_v) tlname=ud_verbs ;; rc_v) tlname=rc_verbs ;; esac
	runs=$((runs + 1))
	rx0=$(($(counter "$d0" rx_payload_bytes) + $(counter "$d1" rx_payload_bytes)))
	lo0=$(netbytes lo)
	MPI_DEV0=$d0 MPI_DEV1=$d1 timeout 900 mpirun --allow-run-as-root \
		--oversubscribe -np 2 --bind-to none \
		--mca pml ucx --mca osc ucx --mca btl self \
		--mca pml_ucx_tls any --mca pml_ucx_devices any \
		-x UCX_TLS="$tls,self" -x UCX_LOG_LEVEL=info -x MPI_DEV0 -x MPI_DEV1 \
		"$wrap" "$prog" "${pargs[@]}" >"$logs/$tag.out" 2>&1
	rc=$?
	rx1=$(($(counter "$d0" rx_payload_bytes) + $(counter "$d1" rx_payload_bytes)))
	lo1=$(netbytes lo)
	grep -E '^(ok|FAIL) rank' "$logs/$tag.out" | sed "s/^/  $tls $d0-$d1| /"
	line=$(grep '^mbcf_mpi_check: ' "$logs/$tag.out")
	if [ "$rc" != 0 ] || ! [[ "$line" =~ ^mbcf_mpi_check:\ ([0-9]+)\ checks,\ 0\ failed,\ ([0-9]+)\ bytes ]]; then
		fail "mbcf_mpi_check UCX_TLS=$tls,self on $d0/$d1: rc=$rc, '${line:-no summary}'"
		grep -v '^ok rank' "$logs/$tag.out" | tail -n 25 | sed 's/^/  | /'
		return 1
	fi
	echo "ok: mbcf_mpi_check UCX_TLS=$tls,self on $d0/$d1: $line"
	moved=${BASH_REMATCH[2]}
	# every remote endpoint on the rank's own device, with $tlname only
	sum=$(grep -o 'ep_cfg\[[0-9]*\]: .*' "$logs/$tag.out" | sort | uniq -c | sed 's/^ */    /')
	printf '  transports chosen (count, endpoint config):\n%s\n' "$sum"
	local tls_seen bad
	tls_seen=$(grep -o 'ep_cfg\[[0-9]*\]: .*' "$logs/$tag.out" | grep -Eo '[a-z0-9_]+/[a-z0-9_:]+' | sort -u)
	bad=$(grep -vxE "self/memory0|$tlname/($d0|$d1):1" <<<"$tls_seen")
	if [ -z "$tls_seen" ] || [ -n "$bad" ] ||
		! grep -qx "$tlname/$d0:1" <<<"$tls_seen" || ! grep -qx "$tlname/$d1:1" <<<"$tls_seen"; then
		fail "UCX used '$(echo $tls_seen)'; want $tlname/$d0:1, $tlname/$d1:1 (and self) only"
	else
		echo "ok: UCX endpoints: $(echo $tls_seen)"
	fi
	case $d0 in mbcf*)
		if [ $((rx1 - rx0)) -ge "$moved" ]; then
			echo "ok: $d0+$d1 rx_payload_bytes +$((rx1 - rx0)) >= $moved bytes moved"
		else
			fail "$d0+$d1 rx_payload_bytes grew by $((rx1 - rx0)) < $moved bytes moved"
		fi
		if [ $((lo1 - lo0)) -lt $((moved / 10)) ]; then
			echo "ok: lo carried $((lo1 - lo0)) bytes (runtime only)"
		else
			fail "lo carried $((lo1 - lo0)) bytes, >= a tenth of the $moved bytes moved"
		fi
		;;
	esac
}

t0=$EPOCHREALTIME
run ud_v mbcf0 mbcf1
echo "time: ud_v $(vm_elapsed_since "$t0") s"
srq=$(ibv_devinfo -v -d mbcf0 | awk '$1 == "max_srq:" { print $2 }')
if [ "${srq:-0}" != 0 ]; then
	t0=$EPOCHREALTIME
	run rc_v mbcf0 mbcf1
	echo "time: rc_v $(vm_elapsed_since "$t0") s"
else
	echo "note: UCX_TLS=rc_v skipped: rc_verbs needs SRQs (max_srq 0 on mbcf)"
fi

if [ "$RXE" = 1 ]; then
	echo "--- rxe0 (comparison, not asserted): both ranks on rxe0"
	f0=$failed
	run ud_v rxe0 rxe0
	run rc_v rxe0 rxe0
	echo "rxe: $((failed - f0)) of the rxe runs failed (not counted)"
	failed=$f0
fi

vm_dmesg_check || failed=$((failed + 1))
echo "mpi: $runs runs, $failed failed"
[ "$failed" = 0 ]
