# shellcheck shell=bash
# Helpers for guest test scripts (sourced; runs inside the QEMU guest).
#
#   . "$MBCF_VM_LIB"            # set by the rig; = $MBCF_SRC/tests/vm/lib.sh
#
# Topology (vm_topology, done by the rig before the script unless
# --no-topology): veth0 192.0.2.10/24 in the initial namespace, its peer veth1
# 192.0.2.11/24 in namespace ns1; rxe0 on veth0; mbcf0 on veth0 and mbcf1 on
# veth1 (in ns1) when the mbcf module is installed.

[ -n "${MBCF_VM_LIB_LOADED:-}" ] && return 0
MBCF_VM_LIB_LOADED=1

VM_NS=ns1
VM_IP0=192.0.2.10
VM_IP1=192.0.2.11

# Kernel log lines that fail a test (extended regex).
VM_DMESG_BAD_RE='\bBUG\b|WARNING:|Oops|refcount_t|possible recursive locking|circular locking dependency|inconsistent lock state|general protection fault|Call Trace|kmemleak|soft lockup|hung task|blocked for more than|KASAN|UBSAN|Kernel panic|rcu.*detected stall'

vm_log() {
	echo "mbcf-vm: $*"
}

# vm_phase MSG: log MSG with the guest uptime, e.g. "mbcf-vm: [12.3 s] MSG".
vm_phase() {
	local up _
	read -r up _ </proc/uptime
	echo "mbcf-vm: [$up s] $*"
}

vm_fail() {
	echo "FAIL: $*" >&2
	return 1
}

# vm_die MSG: report and exit the script with status 1.
vm_die() {
	echo "FAIL: $*" >&2
	exit 1
}

# vm_have_mbcf: true when the mbcf kernel module is installed in the guest.
vm_have_mbcf() {
	modinfo mbcf >/dev/null 2>&1
}

# vm_test_prog NAME [PATH]: print PATH, or the build's tests/vm/progs/NAME,
# if it is an executable; else fail (callers: prog=$(...) || exit 1).
vm_test_prog() {
	local p=${2:-${MBCF_BUILD:-}/tests/vm/progs/$1}
	[ -x "$p" ] || vm_die "no test program at $p"
	echo "$p"
}

# vm_pins_held: pages pinned with FOLL_PIN (ib_umem_get's pins), system-wide;
# exact because stat_refresh folds the per-CPU counter deltas first.
vm_pins_held() {
	echo 1 >/proc/sys/vm/stat_refresh
	awk '$1 == "nr_foll_pin_acquired" { a = $2 }
	     $1 == "nr_foll_pin_released" { r = $2 }
	     END { print a - r }' /proc/vmstat
}

# vm_require_mbcf: exit the script unless the topology created mbcf0 and
# mbcf1 and both ports are ACTIVE (every mbcf test starts with this).
vm_require_mbcf() {
	vm_have_mbcf || vm_die "mbcf module is not installed in the guest"
	[ "${VM_MBCF:-0}" = 1 ] || vm_die "topology did not create mbcf0/mbcf1"
	vm_wait_port mbcf0 20 || exit 1
	vm_wait_port mbcf1 20 || exit 1
}

# vm_dmesg_mark: remember the end of the kernel log; a later
# `vm_dmesg_check --since-mark` scans only what was logged after it.
vm_dmesg_mark() {
	VM_DMESG_MARK=$(dmesg | wc -l)
	export VM_DMESG_MARK
}

# vm_kmemleak_scan: have kmemleak (debug kernel only) look for leaks now and
# show what it found; a leak also logs "kmemleak: N new suspected memory
# leaks", which the log scan catches.  Two scans 5 s apart: kmemleak reports
# an unreferenced object only once it is 5 s old and only from the second
# scan that sees it (the first records a checksum of its contents).
vm_kmemleak_scan() {
	local f=/sys/kernel/debug/kmemleak
	echo scan >"$f" 2>/dev/null || return 0
	sleep 5
	echo scan >"$f" 2>/dev/null
	head -n 40 "$f" 2>/dev/null
}

# vm_dmesg_check [--all|--since-mark]: scan the kernel log for bugs, warnings,
# oopses, lockdep/KASAN/UBSAN/kmemleak reports, lockups and hung tasks.
# --all (the default) scans the whole log since boot.
# Prints the offending lines; sets VM_DMESG_BAD to their number; returns 1
# if there is any.
vm_dmesg_check() {
	local from=0 lines
	if [ "${1:-}" = --since-mark ]; then
		from=${VM_DMESG_MARK:-0}
	fi
	[ -e /sys/kernel/debug/kmemleak ] && vm_kmemleak_scan
	lines=$(dmesg | tail -n +"$((from + 1))" | grep -E "$VM_DMESG_BAD_RE")
	if [ -z "$lines" ]; then
		VM_DMESG_BAD=0
		return 0
	fi
	VM_DMESG_BAD=$(printf '%s\n' "$lines" | wc -l)
	echo "FAIL: kernel log has $VM_DMESG_BAD suspicious line(s):" >&2
	printf '%s\n' "$lines" | head -n 60 | sed 's/^/  | /' >&2
	return 1
}

# vm_retry TRIES DELAY CMD...: run CMD until it succeeds, at most TRIES times.
vm_retry() {
	local tries=$1 delay=$2 i
	shift 2
	for ((i = 1; i <= tries; i++)); do
		"$@" && return 0
		[ "$i" -lt "$tries" ] && sleep "$delay"
	done
	return 1
}

# in_ns1 CMD...: run CMD in network namespace ns1 (veth1, mbcf1's netdev).
in_ns1() {
	ip netns exec "$VM_NS" "$@"
}

# vm_port_state DEVICE [PORT]: print the port state, e.g. "4: ACTIVE".
# (bash's read, not cat: every fork+exec costs 0.1-0.5 s under TCG)
vm_port_state() {
	local state=
	read -r state 2>/dev/null <"/sys/class/infiniband/$1/ports/${2:-1}/state"
	printf '%s\n' "$state"
}

# vm_elapsed_since T0: seconds (float) since T0, an $EPOCHREALTIME value.
vm_elapsed_since() {
	awk -v a="$1" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.2f\n", b - a }'
}

# vm_wait_port DEVICE [TIMEOUT_S] [PORT]: wait until the port is ACTIVE.
vm_wait_port() {
	local dev=$1 timeout=${2:-20} port=${3:-1} state end=$((SECONDS + ${2:-20}))
	while :; do
		state=$(vm_port_state "$dev" "$port")
		case "$state" in
		*ACTIVE*) return 0 ;;
		esac
		[ "$SECONDS" -ge "$end" ] && break
		sleep 0.2
	done
	vm_fail "$dev port $port not ACTIVE after ${timeout}s (state: ${state:-no such device})"
}

# assert_eq EXPECTED ACTUAL [WHAT]
assert_eq() {
	if [ "$1" = "$2" ]; then
		echo "ok: ${3:-value} = '$2'"
		return 0
	fi
	vm_fail "${3:-value}: expected '$1', got '$2'"
}

# assert_match REGEX TEXT [WHAT]: TEXT matches the extended REGEX.
assert_match() {
	if printf '%s\n' "$2" | grep -Eq -- "$1"; then
		echo "ok: ${3:-text} matches /$1/"
		return 0
	fi
	vm_fail "${3:-text} does not match /$1/:"$'\n'"$2"
}

# assert_cmd CMD...: CMD succeeds (its output is shown on failure).
assert_cmd() {
	local out
	if out=$("$@" 2>&1); then
		echo "ok: $*"
		return 0
	fi
	vm_fail "command failed: $*"$'\n'"$out"
}

# vm_topology: build the test topology (see the top of this file).
vm_topology() {
	local mbcf_ok=0
	if [ -e /sys/class/net/veth0 ]; then
		vm_log "topology already set up"
		return 0
	fi
	modprobe veth || return 1
	# No IPv6 duplicate address detection: addresses (and GIDs) usable at once.
	echo 0 >/proc/sys/net/ipv6/conf/default/accept_dad
	echo 0 >/proc/sys/net/ipv6/conf/all/accept_dad
	# ip -batch: one process per namespace (each exec is slow under TCG).
	ip netns add "$VM_NS" || return 1
	ip -batch - <<-EOF || return 1
		link add veth0 type veth peer name veth1 netns $VM_NS
		addr add $VM_IP0/24 dev veth0
		link set veth0 up
	EOF
	ip -n "$VM_NS" -batch - <<-EOF || return 1
		link set lo up
		addr add $VM_IP1/24 dev veth1
		link set veth1 up
	EOF
	vm_phase "veth pair up"
	modprobe rdma_rxe || return 1
	rdma link add rxe0 type rxe netdev veth0 || return 1
	vm_phase "rxe0 added"

	if vm_have_mbcf; then
		if ! modprobe mbcf; then
			vm_log "WARNING: mbcf is installed but modprobe mbcf failed"
		elif ! rdma link add mbcf0 type mbcf netdev veth0; then
			vm_log "WARNING: rdma link add mbcf0 failed"
		elif ! in_ns1 rdma link add mbcf1 type mbcf netdev veth1; then
			vm_log "WARNING: rdma link add mbcf1 (ns1) failed"
		else
			mbcf_ok=1
		fi
	fi
	VM_MBCF=$mbcf_ok
	export VM_MBCF
	vm_log "topology: veth0 $VM_IP0 <-> veth1 $VM_IP1 ($VM_NS), rxe0$([ "$mbcf_ok" = 1 ] && echo ", mbcf0, mbcf1")"
}
