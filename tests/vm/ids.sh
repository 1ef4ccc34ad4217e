#!/bin/bash
# Guest test: QP numbers and MR keys are not predictable from one device
# to the next.  progs/ids.c prints the first K QP
# numbers and MR keys of a fresh device; it runs on mbcf0 and mbcf1 and on
# mbcf0 re-created four times: six instances.  Each must hand out what it
# always did from its starting point (QPNs consecutive in 2..2^24-1, keys
# index << 8 | generation with consecutive indices); across instances the
# starting points must differ.
#
# Random starts may coincide by chance, so the verdicts allow for it:
# at least 5 of the 6 first QPNs distinct (two coincidences among 6 random
# 24-bit starts: ~4e-13), the same for the key indices, and at least two
# distinct generation bytes (all six alike: 256^-5).  Sequential
# allocation gives 2 and 0x100 every time: one distinct value of each.
#   tests/vm/run.sh --build BUILD tests/vm/ids.sh [PATH/TO/mbcf_ids]
set -u
# shellcheck source=lib.sh
. "${MBCF_VM_LIB:-$(dirname "$0")/lib.sh}"

failed=0
check() { "$@" || failed=$((failed + 1)); }

vm_require_mbcf
prog=$(vm_test_prog mbcf_ids "${1:-}") || exit 1
K=4
QPN_MAX=$((0xffffff)) IDX_MAX=$((0xffffff))
firsts_qpn=() firsts_idx=() firsts_gen=()

# instance NAME CMD...: run the program, check its own sequences, and
# remember its first QPN, key index and generation.
instance() {
	local name=$1 out qpns keys q k prev i idx gen want
	shift
	out=$("$@" -k "$K" 2>&1) || { vm_fail "$name: mbcf_ids failed: $out"; return 1; }
	printf '%s: %s\n' "$name" "$(printf '%s' "$out" | tr '\n' ' ')"
	read -r -a qpns <<<"$(printf '%s\n' "$out" | sed -n 's/^qpn //p')"
	read -r -a keys <<<"$(printf '%s\n' "$out" | sed -n 's/^key //p')"
	check assert_eq "$K $K" "${#qpns[@]} ${#keys[@]}" "$name: QPNs and keys printed"
	[ "${#qpns[@]}" = "$K" ] && [ "${#keys[@]}" = "$K" ] || return 1
	prev=
	for q in "${qpns[@]}"; do
		[ "$q" -ge 2 ] && [ "$q" -le "$QPN_MAX" ] || vm_fail "$name: QPN $q outside 2..$QPN_MAX" || failed=$((failed + 1))
		if [ -n "$prev" ]; then
			want=$((prev == QPN_MAX ? 2 : prev + 1))
			[ "$q" = "$want" ] || vm_fail "$name: QPN $q after $prev, expected $want" || failed=$((failed + 1))
		fi
		prev=$q
	done
	prev=
	for k in "${keys[@]}"; do
		idx=$((k >> 8)) gen=$((k & 0xff))
		[ "$idx" -ge 1 ] || vm_fail "$name: key $k has index 0" || failed=$((failed + 1))
		if [ -n "$prev" ]; then
			if [ $((prev >> 8)) = "$IDX_MAX" ]; then
				want=$((1 << 8 | ((prev & 0xff) + 1) % 256))
			else
				want=$((prev + 256))
			fi
			[ "$((k))" = "$want" ] || vm_fail "$name: key $k after $prev, expected $(printf '0x%08x' "$want")" || failed=$((failed + 1))
		fi
		prev=$((k))
	done
	echo "ok: $name: $K consecutive QPNs from ${qpns[0]}, keys from ${keys[0]}"
	firsts_qpn+=("${qpns[0]}")
	firsts_idx+=("$((keys[0] >> 8))")
	firsts_gen+=("$((keys[0] & 0xff))")
}

distinct() {
	printf '%s\n' "$@" | sort -u | wc -l
}

instance "mbcf0" "$prog" -d mbcf0
instance "mbcf1" in_ns1 "$prog" -d mbcf1
for i in 1 2 3 4; do
	rdma link delete mbcf0 || vm_die "rdma link delete mbcf0 (#$i)"
	rdma link add mbcf0 type mbcf netdev veth0 || vm_die "rdma link add mbcf0 (#$i)"
	vm_wait_port mbcf0 20 || exit 1
	instance "mbcf0 re-created #$i" "$prog" -d mbcf0
done

n=${#firsts_qpn[@]}
check assert_eq 6 "$n" "device instances measured"
vm_log "first QPNs: ${firsts_qpn[*]}; first key indices: ${firsts_idx[*]}; generations: ${firsts_gen[*]}"
d=$(distinct "${firsts_qpn[@]}")
[ "$d" -ge $((n - 1)) ] && echo "ok: $d distinct first QPNs of $n" ||
	vm_fail "only $d distinct first QPNs among $n instances: ${firsts_qpn[*]}" || failed=$((failed + 1))
d=$(distinct "${firsts_idx[@]}")
[ "$d" -ge $((n - 1)) ] && echo "ok: $d distinct first key indices of $n" ||
	vm_fail "only $d distinct first key indices among $n instances: ${firsts_idx[*]}" || failed=$((failed + 1))
d=$(distinct "${firsts_gen[@]}")
[ "$d" -ge 2 ] && echo "ok: $d distinct key generations of $n" ||
	vm_fail "one key generation for all $n instances: ${firsts_gen[*]}" || failed=$((failed + 1))

if [ "$failed" != 0 ]; then
	echo "ids: $failed check(s) failed"
	exit 1
fi
echo "ids: all checks passed"
