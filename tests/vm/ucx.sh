#!/bin/bash
# Guest test: unmodified UCX 1.13 (Debian's ucx-utils) on mbcf.
#   1. `ucx_info -d` lists memory domains mbcf0 and mbcf1 with an open
#      ud_verbs interface (and rc_verbs once the device has SRQs: rc_verbs
#      always creates one), and says which device atomics it sees;
#   2. `ucx_perftest` between the namespaces: server in the initial namespace
#      on mbcf0 (UCX_NET_DEVICES=mbcf0:1), client in ns1 on mbcf1
#      (UCX_NET_DEVICES=mbcf1:1), UCX_TLS=ud_v (and rc_v), tests tag_lat,
#      tag_bw, ucp_put_bw, ucp_get, ucp_add, ucp_fadd, ucp_swap, ucp_cswap.
# Each run must exit 0 on both sides, print a "Final:" row with the asked
# number of iterations and positive latency/bandwidth/rate figures, name the
# transport it used (UCX_LOG_LEVEL=info: "ep_cfg[N]: tag(ud_verbs/mbcf1:1)",
# nothing else), and mbcf's own counters must show the payload crossed the
# wire: rx_payload_bytes of the receiving device grows by at least
# iterations x message size.  ucx_perftest has no data check (it never looks
# at the bytes it moves): data is checked by vm.mpi (mbcf_mpi_check over
# UCX) instead.
#   tests/vm/run.sh tests/vm/ucx.sh [quick] [rxe]
# `rxe` also runs the same ucx_perftest cases on rxe0 (both ends on rxe0 in
# the initial namespace, rxe cannot cross namespaces in 6.1) and only
# reports what happens there: comparison, no verdict.
set -u
# shellcheck source=lib.sh
. "${MBCF_VM_LIB:-$(dirname "$0")/lib.sh}"

vm_require_mbcf

QUICK=0
RXE=0
for a in "$@"; do
	case $a in
	quick) QUICK=1 ;;
	rxe) RXE=1 ;;
	*) vm_die "unknown argument $a" ;;
	esac
done

failed=0
runs=0
logs=/var/tmp/ucx
mkdir -p "$logs"
limit=$(vm_scaled 240)	# seconds per ucx_perftest process (deadline)
port=13337

# UCX wants a hostname and /dev/shm (the guest has neither by default).
echo mbcf-guest >/proc/sys/kernel/hostname
mountpoint -q /dev/shm || mount -t tmpfs tmpfs /dev/shm

fail() {
	failed=$((failed + 1))
	echo "FAIL: $*"
}

# counter DEV NAME: one of mbcf's link counters (rdma statistic).
counter() {
	rdma statistic show link "$1/1" |
		awk -v n="$2" '{ for (i = 1; i < NF; i++) if ($i == n) { print $(i + 1); exit } }'
}

# 1. ucx_info -d
ucx_info -d >"$logs/ucx_info.txt" 2>&1 || fail "ucx_info -d exited $?"
# section DEV TL: the ucx_info block of transport TL on DEV:1.
section() {
	awk -v dev="$1:1" -v tl="$2" '
		/^#      Transport: / { on = ($3 == tl) ; next }
		on && /^#         Device: / { on = ($3 == dev); if (on) print; next }
		on && /^# *(Memory domain|Connection manager):/ { on = 0 }
		on { print }' "$logs/ucx_info.txt"
}
have_srq=0
for d in mbcf0 mbcf1; do
	grep -q "^# Memory domain: $d\$" "$logs/ucx_info.txt" &&
		echo "ok: ucx_info -d: memory domain $d" || fail "ucx_info -d: no memory domain $d"
	s=$(section "$d" ud_verbs)
	if grep -q 'am_bcopy' <<<"$s" && ! grep -q 'failed to open' <<<"$s"; then
		echo "ok: ucx_info -d: ud_verbs on $d:1 ($(grep -o 'am_bcopy: .*' <<<"$s" | head -1))"
	else
		fail "ucx_info -d: no usable ud_verbs on $d:1"
		printf '%s\n' "$s" | sed 's/^/  | /'
	fi
	s=$(section "$d" rc_verbs)
	srq=$(ibv_devinfo -v -d "$d" | awk '$1 == "max_srq:" { print $2 }')
	if grep -q 'am_bcopy' <<<"$s" && ! grep -q 'failed to open' <<<"$s"; then
		echo "ok: ucx_info -d: rc_verbs on $d:1 ($(grep -o 'atomic_fadd: .*' <<<"$s" | head -1 || echo 'no device atomics'))"
		have_srq=1
	elif [ "${srq:-0}" = 0 ]; then
		# rc_verbs creates an SRQ whatever it is asked; expected to fail
		# until mbcf has SRQs.
		echo "note: rc_verbs on $d:1 not usable: device has max_srq 0 ($(grep -o 'ibv_create_srq.*' <<<"$s" | head -1))"
	else
		fail "ucx_info -d: no usable rc_verbs on $d:1 although max_srq=$srq"
		printf '%s\n' "$s" | sed 's/^/  | /'
	fi
done

# 2. ucx_perftest
# perf TLS TEST SIZE ITERS RXDEV: one server/client run.  RXDEV is the device
# whose rx_payload_bytes must grow by ITERS x SIZE (the data's receiver).
perf() {
	local tls=$1 t=$2 size=$3 n=$4 rxdev=$5 sdev=${6:-mbcf0} cdev=${7:-mbcf1} ns=${8:-ns1}
	local tag="$t-$tls-$size-$sdev" rx0 rx1 rc src row tl
	local cl=("env") tlname
	[ "$ns" = ns1 ] && cl=(ip netns exec ns1 env)
	case $tls in ud_v) tlname=ud_verbs ;; rc_v) tlname=rc_verbs ;; *) tlname=$tls ;; esac
	runs=$((runs + 1))
	rx0=$(counter "$rxdev" rx_payload_bytes)
	UCX_TLS=$tls UCX_NET_DEVICES=$sdev:1 timeout "$limit" \
		ucx_perftest -p "$port" >"$logs/$tag.srv" 2>&1 &
	local spid=$!
	# the server listens on TCP $port for the test parameters
	for ((i = 0; i < 300; i++)); do
		ss -Hltn "sport = :$port" | grep -q . && break
		sleep 0.2
	done
	"${cl[@]}" UCX_TLS="$tls" UCX_NET_DEVICES="$cdev:1" UCX_LOG_LEVEL=info \
		timeout "$limit" ucx_perftest -p "$port" -t "$t" -s "$size" -n "$n" -w 20 \
		"$VM_IP0" >"$logs/$tag.cli" 2>&1
	rc=$?
	wait "$spid"
	src=$?
	rx1=$(counter "$rxdev" rx_payload_bytes)
	# "Final:  <iters> <lat 50%> <lat avg> <lat overall> <bw avg> <bw overall> <rate avg> <rate overall>"
	row=$(awk '$1 == "Final:" { print; exit }' "$logs/$tag.cli")
	tl=$(grep -o 'ep_cfg\[[0-9]*\]: .*' "$logs/$tag.cli" | sort -u | tr '\n' ' ')
	if [ "$rc" != 0 ] || [ "$src" != 0 ]; then
		fail "ucx_perftest -t $t -s $size UCX_TLS=$tls ($sdev <- $cdev): client rc=$rc server rc=$src"
		tail -n 6 "$logs/$tag.cli" | sed 's/^/  client| /'
		tail -n 6 "$logs/$tag.srv" | sed 's/^/  server| /'
		return
	fi
	# Bandwidth is printed with two decimals: 8-byte atomics at a few hundred
	# per second on a loaded emulated guest read 0.00 MB/s while every one
	# completed, so the figures that must be positive are latency and rate
	# -- over the whole run: the "avg" columns are the last report
	# interval's, which a guest stalled by its host may end with no
	# iteration in ("inf" us, 0/s; seen once with another guest running).
	if ! awk -v n="$n" '{ exit !($2 == n && $3 > 0 && $5 > 0 && $9 > 0) }' <<<"$row"; then
		fail "ucx_perftest -t $t -s $size UCX_TLS=$tls: no sane Final row: '$row'"
		return
	fi
	# the transport: only $tlname on the client's device (no tcp, no shm)
	if [ -z "$tl" ] || grep -Eo '[a-z0-9_]+/[a-z0-9_:]+' <<<"$tl" | grep -vqx "$tlname/$cdev:1"; then
		fail "ucx_perftest -t $t UCX_TLS=$tls: transports used: '${tl:-none reported}', want only $tlname/$cdev:1"
		return
	fi
	if [ "$sdev" = mbcf0 ] && [ $((rx1 - rx0)) -lt $((n * size)) ]; then
		fail "ucx_perftest -t $t -s $size: $rxdev rx_payload_bytes grew by $((rx1 - rx0)) < $n x $size"
		return
	fi
	printf 'ok: ucx_perftest %-10s %-4s %7s B x %5s: lat %s us, bw %s MB/s, rate %s/s (overall); %s; %s +%s payload bytes\n' \
		"$t" "$tls" "$size" "$n" "$(awk '{ print $5 }' <<<"$row")" \
		"$(awk '{ print $7 }' <<<"$row")" "$(awk '{ print $9 }' <<<"$row")" "$tl" "$rxdev" "$((rx1 - rx0))"
}

if [ "$QUICK" = 1 ]; then
	NLAT=200 NBW=50 NBIG=20
else
	NLAT=1000 NBW=200 NBIG=50
fi

# suite TLS [SDEV CDEV NS]
suite() {
	local tls=$1
	shift
	perf "$tls" tag_lat 8 "$NLAT" mbcf0 "$@"
	perf "$tls" tag_lat 4096 "$NBW" mbcf0 "$@"
	perf "$tls" tag_bw 4096 "$NBW" mbcf0 "$@"
	perf "$tls" tag_bw 65536 "$NBIG" mbcf0 "$@"
	perf "$tls" ucp_put_bw 4096 "$NBW" mbcf0 "$@"
	perf "$tls" ucp_put_bw 65536 "$NBIG" mbcf0 "$@"
	# get: the data comes from the server's memory to the client's
	perf "$tls" ucp_get 4096 "$NBW" mbcf1 "$@"
	perf "$tls" ucp_add 8 "$NLAT" mbcf0 "$@"
	perf "$tls" ucp_fadd 8 "$NBW" mbcf0 "$@"
	perf "$tls" ucp_swap 8 "$NBW" mbcf0 "$@"
	perf "$tls" ucp_cswap 8 "$NBW" mbcf0 "$@"
}

suite ud_v
if [ "$have_srq" = 1 ]; then
	suite rc_v
else
	echo "note: UCX_TLS=rc_v skipped: rc_verbs needs SRQs (max_srq 0 on mbcf)"
fi

if [ "$RXE" = 1 ]; then
	echo "--- rxe0 (comparison, not asserted): both ends on rxe0, initial namespace"
	f0=$failed
	for tls in ud_v rc_v; do
		suite "$tls" rxe0 rxe0 init
	done
	echo "rxe: $((failed - f0)) of the rxe runs failed (not counted)"
	failed=$f0
fi

vm_dmesg_check || failed=$((failed + 1))
echo "ucx: $runs runs, $failed failed"
[ "$failed" = 0 ]
