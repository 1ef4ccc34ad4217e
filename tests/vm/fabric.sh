#!/bin/bash
# Guest test: unmodified libfabric 1.17 (Debian's libfabric-bin) verbs
# provider on mbcf.
#   1. mbcf is a channel adapter (node type 1: CA, transport InfiniBand):
#      libfabric skips a device whose transport is unknown;
#   2. `fi_info -p verbs` lists the MSG domains mbcf0 and mbcf1 (rdma_cm binds
#      to their IP addresses) and the DGRAM (UD) domains mbcf0-dgram and
#      mbcf1-dgram, in the initial namespace and in ns1;
#   3. `fi_pingpong -p verbs` with -e msg (RC through rdma_cm), -e dgram (UD)
#      and -e rdm (ofi_rxm over verbs MSG): server in the initial namespace on
#      mbcf0 (192.0.2.10), client in ns1 on mbcf1, data checked by
#      fi_pingpong itself (-c: every received buffer compared with the
#      expected pattern; a mismatch prints "Error at iteration" and fails the
#      run), every size of its default list; each size must have a result row
#      with all iterations sent and acknowledged ("=N"), and mbcf0's
#      rx_payload_bytes must grow by at least the bytes the client sent.
# rxe0 is removed first: rdma_cm binds 192.0.2.10 to the first device whose
# GID table has it, and rxe0 (also on veth0) would come first.
# -e rdm needs a CQ of (128 + 128) x 1024 = 262144 entries (rxm sizes its
# verbs CQ by FI_UNIVERSE_SIZE, default 1024): mbcf's max_cqe is 1 Mi.
#   tests/vm/run.sh tests/vm/fabric.sh [quick] [rxe]
# `rxe` then also runs the same on rxe0 (mbcf0 removed, rxe0 added back; both
# ends on rxe0 in the initial namespace, rxe cannot cross namespaces in 6.1)
# and only reports what happens: comparison, no verdict.  rxe's max_cqe is
# 32767, so its -e rdm server fails in fi_enable() with -22 (verbs: "Unable
# to create verbs CQ"); it is rerun with FI_UNIVERSE_SIZE=64 (a CQ of 16384)
# to show that this is the only cause.
set -u
# shellcheck source=lib.sh
. "${MBCF_VM_LIB:-$(dirname "$0")/lib.sh}"

QUICK=0
RXE=0
for a in "$@"; do
	case $a in
	quick) QUICK=1 ;;
	rdm) ;;	# -e rdm always runs now (kept for old command lines)
	rxe) RXE=1 ;;
	*) vm_die "unknown argument $a" ;;
	esac
done

vm_require_mbcf

failed=0
runs=0
logs=/var/tmp/fabric
mkdir -p "$logs"
limit=$(vm_scaled 180)	# seconds per fi_pingpong process (deadline)
ITERS=10
[ "$QUICK" = 1 ] && ITERS=5

fail() {
	failed=$((failed + 1))
	echo "FAIL: $*"
}

counter() { vm_dev_ctr "$1" "$2"; }

# 1. node type / transport
nt=$(cat /sys/class/infiniband/mbcf0/node_type)
assert_eq "1: CA" "$nt" "mbcf0 node_type" || failed=$((failed + 1))
tr=$(ibv_devinfo -d mbcf1 | awk '$1 == "transport:" { print $2, $3 }')
assert_eq "InfiniBand (0)" "$tr" "ibv_devinfo -d mbcf1 transport" || failed=$((failed + 1))

rdma link delete rxe0 || vm_die "cannot remove rxe0"

# 2. fi_info
# domains WHERE: "domain type" pairs fi_info -p verbs lists.
domains() {
	"$@" timeout 60 fi_info -p verbs 2>"$logs/fi_info.err" |
		awk '$1 == "domain:" { d = $2 } $1 == "type:" { print d, $2 }' | sort -u
}
for where in init ns1; do
	if [ "$where" = ns1 ]; then list=$(domains in_ns1); else list=$(domains); fi
	printf '%s\n' "$list" >"$logs/fi_info.$where"
	for want in "mbcf0 FI_EP_MSG" "mbcf1 FI_EP_MSG" "mbcf0-dgram FI_EP_DGRAM" \
		"mbcf1-dgram FI_EP_DGRAM" "mbcf0 FI_EP_RDM"; do
		if grep -qx "$want" <<<"$list"; then
			echo "ok: fi_info -p verbs ($where): $want"
		else
			fail "fi_info -p verbs ($where) lists no '$want'"
			printf '%s\n' "$list" | sed 's/^/  | /'
			tail -n 5 "$logs/fi_info.err" | sed 's/^/  err| /'
		fi
	done
done

# 3. fi_pingpong
# pp EP SDOM CDOM SIZES [WHERE] [RXDEV]: server on SDOM, client on CDOM.
pp() {
	local ep=$1 sd=$2 cd=$3 sizes=$4 where=${5:-ns1} rxdev=${6:-mbcf0}
	local tag="$ep-$sd" rc src rx0 rx1 s row want_bytes=0 ok=1 sum=
	local cl=()
	[ "$where" = ns1 ] && cl=(ip netns exec ns1)
	runs=$((runs + 1))
	rx0=$(counter "$rxdev" rx_payload_bytes)
	timeout "$limit" fi_pingpong -p verbs -e "$ep" -d "$sd" -c -I "$ITERS" \
		>"$logs/$tag.srv" 2>&1 &
	local spid=$!
	# the server listens on its control port (47592) for the client
	for ((i = 0; i < 300; i++)); do
		ss -Hltn "sport = :47592" | grep -q . && break
		sleep 0.2
	done
	"${cl[@]}" timeout "$limit" fi_pingpong -p verbs -e "$ep" -d "$cd" -c -I "$ITERS" \
		"$VM_IP0" >"$logs/$tag.cli" 2>&1
	rc=$?
	wait "$spid"
	src=$?
	rx1=$(counter "$rxdev" rx_payload_bytes)
	if [ "$rc" != 0 ] || [ "$src" != 0 ] || grep -q 'Error at iteration' "$logs/$tag.cli" "$logs/$tag.srv"; then
		fail "fi_pingpong -e $ep $cd -> $sd: client rc=$rc server rc=$src"
		tail -n 8 "$logs/$tag.cli" | sed 's/^/  client| /'
		tail -n 8 "$logs/$tag.srv" | sed 's/^/  server| /'
		return 1
	fi
	# rows: "<size> <sent> =<acked> <total> <time>s <MB/s> <usec/xfer> <Mxfers/s>"
	for s in $sizes; do
		row=$(awk -v s="$s" '$1 == s { print; exit }' "$logs/$tag.cli")
		if ! awk -v n="$ITERS" '{ exit !($2 == n && $3 == "=" n && $7 > 0) }' <<<"$row"; then
			fail "fi_pingpong -e $ep: no complete row for size $s: '$row'"
			ok=0
			continue
		fi
		sum="$sum $s:$(awk '{ print $7 }' <<<"$row")us"
		case $s in
		*k) want_bytes=$((want_bytes + ${s%k} * 1024 * ITERS)) ;;
		*m) want_bytes=$((want_bytes + ${s%m} * 1048576 * ITERS)) ;;
		*) want_bytes=$((want_bytes + s * ITERS)) ;;
		esac
	done
	# rows only for the expected sizes, none more
	extra=$(awk -v l=" $sizes " 'f && NF >= 8 && index(l, " " $1 " ") == 0 { print $1 } /^bytes/ { f = 1 }' "$logs/$tag.cli")
	[ -z "$extra" ] || { fail "fi_pingpong -e $ep: unexpected sizes $extra"; ok=0; }
	if [ "$rxdev" = mbcf0 ] && [ $((rx1 - rx0)) -lt "$want_bytes" ]; then
		fail "fi_pingpong -e $ep: mbcf0 rx_payload_bytes grew by $((rx1 - rx0)) < $want_bytes sent by the client"
		ok=0
	fi
	[ "$ok" = 1 ] && echo "ok: fi_pingpong -p verbs -e $ep -c ($cd -> $sd): $ITERS iterations, data verified, usec/xfer$sum; $rxdev +$((rx1 - rx0)) payload bytes"
}

MSG_SIZES="64 256 1k 4k 64k 1m"
DGRAM_SIZES="64 256 1k"	# fi_pingpong's sizes up to the UD MTU (1024)
pp msg mbcf0 mbcf1 "$MSG_SIZES"
pp dgram mbcf0-dgram mbcf1-dgram "$DGRAM_SIZES"
pp rdm mbcf0 mbcf1 "$MSG_SIZES"

if [ "$RXE" = 1 ]; then
	echo "--- rxe0 (comparison, not asserted): both ends on rxe0, initial namespace"
	f0=$failed
	rdma link delete mbcf0 || echo "note: cannot remove mbcf0"
	rdma link add rxe0 type rxe netdev veth0 || echo "note: cannot add rxe0"
	timeout 60 fi_info -p verbs 2>/dev/null | awk '$1 == "domain:" { d = $2 } $1 == "type:" { print "  rxe fi_info:", d, $2 }' | sort -u
	pp msg rxe0 rxe0 "$MSG_SIZES" init rxe0
	pp dgram rxe0-dgram rxe0-dgram "$DGRAM_SIZES" init rxe0
	pp rdm rxe0 rxe0 "$MSG_SIZES" init rxe0
	echo "  (rdm on rxe0 again with FI_UNIVERSE_SIZE=64: a verbs CQ of 16384 <= rxe's max_cqe 32767)"
	FI_UNIVERSE_SIZE=64 pp rdm rxe0 rxe0 "$MSG_SIZES" init rxe0
	echo "rxe: $((failed - f0)) of the rxe runs failed (not counted)"
	failed=$f0
fi

vm_dmesg_check || failed=$((failed + 1))
echo "fabric: $runs runs, $failed failed"
[ "$failed" = 0 ]
