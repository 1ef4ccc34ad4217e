#!/bin/bash
# Guest test: the provider built for the newest rdma-core private ABI (65,
# Debian's unstable suite), loaded by that release's own libibverbs, carries
# real verbs traffic.  TREE (argument 1) is rdma-core 65.0's IN_PLACE build
# tree that provider.abi-build.unstable made (fixture mbcf_abi_newest): its
# lib/ holds libibverbs.so.1 (IBVERBS_PRIVATE_65), libmlx5/libefa (which
# perftest links) and our libmbcf-rdmav65.so, its etc/libibverbs.d
# mbcf.driver; with LD_LIBRARY_PATH=TREE/lib every verbs program (the tree's own
# examples and Debian 12's perftest) runs on that libibverbs.
# TREE may be any rdma-core's IN_PLACE tree with the provider staged (a
# build with -DMBCF_RDMA_CORE_SUITE= or -DMBCF_RDMA_CORE_SOURCE= for another
# private ABI than the installed one); the ABI is read from the staged file.
# Run with: tests/vm/run.sh tests/vm/abi_newest.sh TREE
set -u
# shellcheck source=lib.sh
. "${MBCF_VM_LIB:-$(dirname "$0")/lib.sh}"

tree=${1:?usage: abi_newest.sh RDMA_CORE_65_TREE}
vm_require_mbcf
provs=$(cd "$tree/lib" 2>/dev/null && ls libmbcf-rdmav*.so 2>/dev/null | xargs)
case $provs in
libmbcf-rdmav[0-9]*.so) ;;
*) vm_die "$tree/lib holds '$provs', not one libmbcf-rdmav<ABI>.so (run provider.abi-build.unstable)" ;;
esac
pabi=${provs#libmbcf-rdmav}
pabi=${pabi%.so}
vm_log "provider $provs in $tree/lib"
export LD_LIBRARY_PATH=$tree/lib
bin=$tree/bin

failed=0
check() { "$@" || failed=$((failed + 1)); }

# --- the programs really bind to the tree's libraries -----------------------------
lib_of() {	# PROGRAM LIBNAME: the path ld.so resolves LIBNAME to
	ldd "$1" | awk -v l="$2" '$1 == l { print $3; exit }'
}
check assert_eq "$tree/lib/libibverbs.so.1" "$(lib_of "$bin/ibv_devinfo" libibverbs.so.1)" "ibv_devinfo's libibverbs"
check assert_eq "IBVERBS_PRIVATE_$pabi" \
	"$(objdump -p "$tree/lib/libibverbs.so.1" | grep -oE 'IBVERBS_PRIVATE_[0-9]+' | sort -u | xargs)" \
	"the private ABI of $tree/lib/libibverbs.so.1"
for l in libibverbs.so.1 libmlx5.so.1 libefa.so.1; do
	check assert_eq "$tree/lib/$l" "$(lib_of "$(command -v ib_write_bw)" "$l")" "ib_write_bw's $l"
done

# --- devices ----------------------------------------------------------------
for d in mbcf0 mbcf1; do check vm_wait_port "$d" 10; done
devs=$(IBV_SHOW_WARNINGS=1 "$bin/ibv_devices" 2>&1)
printf '%s\n' "$devs"
check assert_match '^\s+mbcf0\s' "$devs" "the tree's ibv_devices"
check assert_match '^\s+mbcf1\s' "$devs" "the tree's ibv_devices"
# the tree's tree has no rxe provider (only ours is built and staged there): the
# device is there but unclaimed, so the list holds exactly the mbcf devices.
check assert_eq "mbcf0 mbcf1" "$("$bin/ibv_devices" | awk 'NR > 2 { print $1 }' | sort | xargs)" \
	"devices the tree's libibverbs lists"

info=$("$bin/ibv_devinfo" -d mbcf0 2>&1)
printf '%s\n' "$info" | head -n 20
check assert_match '^hca_id:\s+mbcf0$' "$info" "the tree's ibv_devinfo -d mbcf0"
check assert_match 'state:\s+PORT_ACTIVE \(4\)' "$info" "the tree's ibv_devinfo -d mbcf0"
check assert_match 'link_layer:\s+Ethernet' "$info" "the tree's ibv_devinfo -d mbcf0"
# The same device attributes through Debian 12's libibverbs (44, ABI 34, the
# installed provider) and the tree's (its ABI, this provider).
fields() {
	awk '$1 ~ /^(node_guid|sys_image_guid|vendor_id|vendor_part_id|max_qp|max_qp_wr|max_cq|max_cqe|max_mr|max_mr_size|max_pd|max_srq|max_qp_rd_atom|atomic_cap|max_mtu|active_mtu|phys_port_cnt):$/ { print $1, $2 }'
}
want=$(env -u LD_LIBRARY_PATH ibv_devinfo -v -d mbcf0 2>&1 | fields)
got=$("$bin/ibv_devinfo" -v -d mbcf0 2>&1 | fields)
check assert_match '^max_qp: [1-9]' "$want" "44's ibv_devinfo -v fields"
check assert_eq "$want" "$got" "ibv_devinfo -v fields, 44 vs the tree's"

# --- the tree's pingpong examples: server mbcf0, client mbcf1 in ns1 --------------
# pp PROG SIZE ITERS [ARGS...]: both ends print "<SIZE*ITERS*2> bytes in"
# and "<ITERS> iters in"; the server validates the received buffer (-c,
# where the program has it).
pp() {
	local prog=$1 size=$2 iters=$3 srv out rc spid bytes
	shift 3
	bytes=$((size * iters * 2))
	srv=$(mktemp)
	timeout "$(vm_scaled 120)" "$bin/$prog" -d mbcf0 -g 0 -s "$size" -n "$iters" "$@" >"$srv" 2>&1 &
	spid=$!
	for _ in $(seq 50); do
		out=$(in_ns1 timeout "$(vm_scaled 120)" "$bin/$prog" -d mbcf1 -g 0 -s "$size" -n "$iters" "$@" "$VM_IP0" 2>&1)
		rc=$?
		grep -q "Couldn't connect" <<<"$out" || break
		sleep 0.3
	done
	[ "$rc" = 0 ] || kill "$spid" 2>/dev/null
	wait "$spid" || rc=1
	local s
	s=$(cat "$srv")
	rm -f "$srv"
	if [ "$rc" != 0 ]; then
		printf 'client:\n%s\nserver:\n%s\n' "$out" "$s"
		vm_fail "$prog $* failed"
		return 1
	fi
	assert_match "^$bytes bytes in [0-9.]+ seconds = " "$out" "$prog $* client" || return 1
	assert_match "^$iters iters in [0-9.]+ seconds = " "$out" "$prog $* client" || return 1
	assert_match "^$bytes bytes in [0-9.]+ seconds = " "$s" "$prog $* server" || return 1
	assert_eq "" "$(grep -i 'invalid data\|Failed status' <<<"$s$out")" "$prog $* data/status errors"
}
check pp ibv_rc_pingpong 4096 200 -c
check pp ibv_rc_pingpong 65536 20 -c -N -e
check pp ibv_uc_pingpong 1024 200
check pp ibv_ud_pingpong 1024 200
check pp ibv_srq_pingpong 1024 100 -q 4

# --- perftest (Debian 12's binaries) on the tree's libibverbs ----------------------
out=$(vm_perf_pair -- -s 65536 -n 200)
rc=$?
row=$(printf '%s\n' "$out" | awk '$1 == 65536 && $2 == 200 { print; exit }')
check assert_eq 0 "$rc" "ib_write_bw 64 KiB x 200 on the tree's libibverbs (exit status)"
check assert_match '^ *65536 +200 +[0-9.]+ +[0-9.]*[1-9][0-9.]* ' "$row" "ib_write_bw result row"
vm_log "ib_write_bw 64 KiB via libibverbs ABI $pabi: $(awk '{ print $4 }' <<<"$row") MB/s average"

if [ "$failed" != 0 ]; then
	echo "abi_newest: $failed check(s) failed"
	exit 1
fi
echo "abi_newest: all checks passed"
