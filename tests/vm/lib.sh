# shellcheck shell=bash
# Helpers for guest test scripts (sourced; runs inside the QEMU guest).
#
#   . "$MBCF_VM_LIB"            # set by the rig; = $MBCF_SRC/tests/vm/lib.sh
#
# Topology (vm_topology, done by the rig before the script unless
# --no-topology): veth0 192.0.2.10/24 in the initial namespace, its peer veth1
# 192.0.2.11/24 in namespace ns1; rxe0 on veth0; mbcf0 on veth0 and mbcf1 on
# veth1 (in ns1) when the mbcf module is installed.
#
# Under tests/vm/run2.sh (two guests, VM_PAIR_ROLE=A or B) the topology is
# vm_pair_topology instead: the NIC on the link between the guests, mbcf0 and
# rxe0 on it, and the pair helpers (vm_pair_*) below.

[ -n "${MBCF_VM_LIB_LOADED:-}" ] && return 0
MBCF_VM_LIB_LOADED=1

VM_NS=ns1
VM_IP0=192.0.2.10
VM_IP1=192.0.2.11

# Kernel log lines that fail a test (extended regex).  kmemleak: its leak
# reports and the lines saying it stopped looking, not the debug kernel's
# "Kernel memory leak detector initialized" at boot.  The kernel's own
# general protection fault ("general protection fault: 0000 [#1]" or ", probably
# for non-canonical address"), not a user program's ("traps: prog[pid]
# general protection fault ip:..."), which its exit status reports.
VM_DMESG_BAD_RE='\bBUG\b|WARNING:|Oops|refcount_t|possible recursive locking|circular locking dependency|inconsistent lock state|general protection fault[,:]|Call Trace|kmemleak: ([0-9]+ new suspected|Cannot|Memory pool empty|Kernel memory leak detector disabled)|unreferenced object|soft lockup|hung task|blocked for more than|KASAN|UBSAN|Kernel panic|rcu.*detected stall'

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

# vm_res TYPE [DEVS]: objects of TYPE (qp, cq, mr, pd, ctx, srq, ...) that
# processes hold on the devices matching the regex DEVS (default: every
# mbcfN).  The per-device summary of `rdma resource show` counts them all,
# the kernel's own included: the GSI QP1 of every RoCE port, its CQ and PD,
# owned by ib_core for as long as the device lives.  Those are the lines of
# the per-object listing that name no pid; they are subtracted.  (The
# per-object listing alone stops short with thousands of objects; the
# kernel's, created with the device, come first in it.)
vm_res() {
	local d=${2:-mbcf[0-9]+} all kern
	all=$(rdma resource show 2>/dev/null | awk -v t="$1" -v d="$d" '
		$2 ~ ("^" d ":$") { for (i = 3; i < NF; i++) if ($i == t) n += $(i + 1) }
		END { print n + 0 }')
	kern=$(rdma resource show "$1" 2>/dev/null | awk -v d="$d" '
		$0 ~ ("(^|[[:space:]])(dev|link) " d "([/[:space:]]|$)") &&
		$0 !~ /[[:space:]]pid [0-9]+/ { n++ }
		END { print n + 0 }')
	echo $((all - kern))
}

# vm_wait_clean BASE_PINS SECONDS: poll until no process-owned QP, CQ, MR or
# PD is left on the mbcf devices and the pinned-page count is back at
# BASE_PINS, for at most SECONDS (a killed process is torn down
# asynchronously, by uverbs' close).  The last counts are left in VM_QP,
# VM_CQ, VM_MR, VM_PD and VM_PINS for the caller's assertions; returns 0
# when clean.
vm_wait_clean() {
	local end=$((SECONDS + $2))
	while :; do
		VM_QP=$(vm_res qp) VM_CQ=$(vm_res cq) VM_MR=$(vm_res mr) VM_PD=$(vm_res pd)
		VM_PINS=$(vm_pins_held)
		[ "$VM_QP$VM_CQ$VM_MR$VM_PD" = 0000 ] && [ "$VM_PINS" = "$1" ] && return 0
		[ "$SECONDS" -ge "$end" ] && return 1
		sleep 0.5
	done
}

# vm_assert_clean WHAT BASE_PINS SECONDS: vm_wait_clean, then assert (one
# line each) that nothing is left and the pins are back; on failure show
# what is left.  0 when clean.
vm_assert_clean() {
	local rc=0
	vm_wait_clean "$2" "$3"
	assert_eq 0000 "$VM_QP$VM_CQ$VM_MR$VM_PD" "QP/CQ/MR/PD count on mbcf devices after $1" || rc=1
	assert_eq "$2" "$VM_PINS" "pinned pages after $1" || rc=1
	[ "$rc" = 0 ] || rdma resource show 2>&1 | grep mbcf | head -n 10
	return "$rc"
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

# vm_wait_listen PORT: a CM id listens on PORT (tcp:PORT: a TCP socket), so
# a client is never rejected for coming too early (under TCG a server takes
# seconds to start).
vm_wait_listen() {
	local port=$1 end=$((SECONDS + 60))
	# a deadline, not a count: under a loaded TCG host `rdma resource
	# show` alone can take a second
	while ((SECONDS < end)); do
		case $port in
		tcp:*) ss -Hltn "sport = :${port#tcp:}" | grep -q . && return 0 ;;
		*) rdma resource show cm_id 2>/dev/null |
			grep -Eq "state LISTEN .*src-addr [^ ]*[:.]$port( |\$)" && return 0 ;;
		esac
		sleep 0.2
	done
	echo "FAIL: nothing listens on port $port after 60 s"
	rdma resource show cm_id | sed 's/^/  | /'
	return 1
}

# vm_kres DEV: DEV's PDs, QPs, CM ids and MRs as the RDMA core counts them
# ("pd 1 qp 1 cm_id 0 mr 0": the kernel's own GSI objects when idle).  Not
# CQs: kernel ULPs take theirs from the device's CQ pool (ib_cq_pool_get),
# which the core keeps until the device is unregistered.
vm_kres() {
	rdma resource show 2>/dev/null | awk -v d="$1:" '$2 == d {
		for (i = 3; i < NF; i += 2)
			if ($i == "pd" || $i == "qp" || $i == "cm_id" || $i == "mr")
				printf "%s %s ", $i, $(i + 1)
		print "" }'
}

# vm_kres_wait DEV WANT: up to 20 s for vm_kres DEV to read WANT (a ULP
# frees its objects asynchronously); prints the last reading.
vm_kres_wait() {
	local now=
	for _ in $(seq 100); do
		now=$(vm_kres "$1")
		[ "$now" = "$2" ] && break
		sleep 0.2
	done
	printf '%s\n' "$now"
}

# vm_dev_ctr DEVICE NAME: print one of an RDMA device's port-1 counters.
vm_dev_ctr() {
	rdma statistic show link "$1/1" | tr ' ' '\n' | awk -v k="$2" '$0 == k { getline; print; exit }'
}

# vm_port_state DEVICE [PORT]: print the port state, e.g. "4: ACTIVE".
# (bash's read, not cat: every fork+exec costs 0.1-0.5 s under TCG)
vm_port_state() {
	local state=
	read -r state 2>/dev/null <"/sys/class/infiniband/$1/ports/${2:-1}/state"
	printf '%s\n' "$state"
}

# vm_scaled SEC: SEC x VM_TIME_SCALE (run.sh: 1 on the stock kernel, more
# on the debug lane's), whole seconds rounded up: a script's own timeouts
# (deadlines only) scale with the kernel, as the test programs' do.
vm_scaled() {
	local s=${VM_TIME_SCALE:-1}
	if [[ $s =~ ^[0-9]+$ ]]; then
		echo $(($1 * (s < 1 ? 1 : s)))
	else
		awk -v t="$1" -v s="$s" 'BEGIN { if (!(s >= 1)) s = 1; x = t * s; printf "%d\n", x == int(x) ? x : int(x) + 1 }'
	fi
}

# vm_perf_pair ENV... -- ARGS...: ib_write_bw with its server on mbcf0 and
# its client (the sender) in ns1, each behind the command prefix in the
# array VM_PERF_PREFIX (e.g. an unprivileged user; empty: none), the client
# with ENV... and the words of $PERF_CLIENT_EXTRA.  The client is retried
# until the server listens, never rerun once it ran.  Prints the client's
# output; returns its status.
vm_perf_pair() {
	local envs=() out rc spid srv
	while [ "$1" != -- ]; do envs+=("$1"); shift; done
	shift
	srv=$(mktemp)
	"${VM_PERF_PREFIX[@]}" timeout "$(vm_scaled 60)" ib_write_bw -d mbcf0 -x 0 -F "$@" >"$srv" 2>&1 &
	spid=$!
	for _ in $(seq 50); do
		# shellcheck disable=SC2086 # PERF_CLIENT_EXTRA holds words
		out=$(in_ns1 "${VM_PERF_PREFIX[@]}" env "${envs[@]}" timeout "$(vm_scaled 60)" \
			ib_write_bw -d mbcf1 -x 0 -F "$@" ${PERF_CLIENT_EXTRA:-} "$VM_IP0" 2>&1)
		rc=$?
		grep -q "Couldn't connect" <<<"$out" || break
		sleep 0.2
	done
	[ "$rc" = 0 ] || kill "$spid" 2>/dev/null
	wait "$spid" 2>/dev/null
	rm -f "$srv"
	printf '%s\n' "$out"
	return "$rc"
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
	if [ -n "${VM_PAIR_ROLE:-}" ]; then
		vm_pair_topology
		return
	fi
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

# --- two kernels: tests/vm/run2.sh -------------------------------------------
# Guest A and guest B, one kernel each, joined by one Ethernet link (a
# virtio-net NIC each, eth0).  The rig sets VM_PAIR_ROLE and the two MACs;
# the rest follows from the role:
#   VM_PAIR_ROLE, VM_PAIR_PEER_ROLE   A (the server side by convention) or B
#   VM_PAIR_IP, VM_PAIR_PEER_IP       198.51.100.1 (A), 198.51.100.2 (B), /24
#   VM_PAIR_IP6, VM_PAIR_PEER_IP6     IPv6 link-local (fe80::EUI-64 of the MAC)
#   VM_PAIR_NIC                       the NIC (eth0), set by the topology
#   VM_PAIR_HOST, VM_PAIR_PEER_HOST   mbcf-vm-a, mbcf-vm-b (also in /etc/hosts)
#   VM_PAIR_DEV                       mbcf0 (the device on the NIC)
VM_PAIR_IP_A=198.51.100.1
VM_PAIR_IP_B=198.51.100.2
VM_PAIR_PORT=7790 # pair-agent.py (mailbox, rsh) on each guest's link address
VM_PAIR_DIR=/run/mbcf-pair
VM_PAIR_INBOX=$VM_PAIR_DIR/inbox
VM_PAIR_DEV=mbcf0

# vm_ll_from_mac MAC: print the IPv6 link-local address (EUI-64) of MAC.
vm_ll_from_mac() {
	local IFS=: b
	read -r -a b <<<"$1"
	printf 'fe80::%x:%x:%x:%x\n' $(((0x${b[0]} ^ 2) << 8 | 0x${b[1]})) \
		$((0x${b[2]} << 8 | 0xff)) $((0xfe << 8 | 0x${b[3]})) $((0x${b[4]} << 8 | 0x${b[5]}))
}

if [ -n "${VM_PAIR_ROLE:-}" ]; then
	case "$VM_PAIR_ROLE" in
	A) VM_PAIR_PEER_ROLE=B VM_PAIR_IP=$VM_PAIR_IP_A VM_PAIR_PEER_IP=$VM_PAIR_IP_B
	   VM_PAIR_MAC=${VM_PAIR_MAC_A:-} VM_PAIR_PEER_MAC=${VM_PAIR_MAC_B:-} ;;
	B) VM_PAIR_PEER_ROLE=A VM_PAIR_IP=$VM_PAIR_IP_B VM_PAIR_PEER_IP=$VM_PAIR_IP_A
	   VM_PAIR_MAC=${VM_PAIR_MAC_B:-} VM_PAIR_PEER_MAC=${VM_PAIR_MAC_A:-} ;;
	*) echo "mbcf-vm: bad VM_PAIR_ROLE '$VM_PAIR_ROLE'" >&2 ;;
	esac
	VM_PAIR_HOST=mbcf-vm-${VM_PAIR_ROLE,,}
	VM_PAIR_PEER_HOST=mbcf-vm-${VM_PAIR_PEER_ROLE,,}
	VM_PAIR_IP6=$(vm_ll_from_mac "$VM_PAIR_MAC")
	VM_PAIR_PEER_IP6=$(vm_ll_from_mac "$VM_PAIR_PEER_MAC")
	VM_PAIR_NIC=${VM_PAIR_NIC:-eth0}
fi

# vm_is_pair_a: true in guest A (by convention the server side).
vm_is_pair_a() {
	[ "${VM_PAIR_ROLE:-}" = A ]
}

# vm_pair_topology: the pair's setup (run by the rig instead of vm_topology):
# the NIC with the pair's addresses, hostname and /etc/hosts, mbcf0 and then
# rxe0 on the NIC (rdma_cm binds an address to the first device that has its
# GID: mbcf0), and pair-agent.py serving the mailbox and rsh.
vm_pair_topology() {
	local n mac nic= mbcf_ok=0
	[ -n "${VM_PAIR_MAC:-}" ] || { vm_log "VM_PAIR_MAC_A/B not set"; return 1; }
	echo 0 >/proc/sys/net/ipv6/conf/default/accept_dad
	echo 0 >/proc/sys/net/ipv6/conf/all/accept_dad
	# A peer that is not up yet refuses or does not answer: fail fast, retry.
	echo 2 >/proc/sys/net/ipv4/tcp_syn_retries
	modprobe virtio_net || return 1
	for n in /sys/class/net/*; do
		read -r mac 2>/dev/null <"$n/address" || continue
		[ "$mac" = "$VM_PAIR_MAC" ] && nic=${n##*/}
	done
	[ -n "$nic" ] || { vm_log "no NIC with MAC $VM_PAIR_MAC"; return 1; }
	VM_PAIR_NIC=$nic
	export VM_PAIR_NIC
	ip -batch - <<-EOF || return 1
		addr add $VM_PAIR_IP/24 dev $nic
		link set $nic up
	EOF
	echo "$VM_PAIR_HOST" >/proc/sys/kernel/hostname
	printf '%s %s\n' "$VM_PAIR_IP_A" mbcf-vm-a "$VM_PAIR_IP_B" mbcf-vm-b >>/etc/hosts
	vm_phase "$nic up: $VM_PAIR_IP/24, $VM_PAIR_IP6 ($VM_PAIR_HOST)"
	mkdir -p "$VM_PAIR_DIR"
	: >"$VM_PAIR_INBOX"
	setsid python3 "$MBCF_SRC/tests/vm/pair-agent.py" serve "$VM_PAIR_IP" \
		"$VM_PAIR_PEER_IP" "$VM_PAIR_PORT" "$VM_PAIR_INBOX" \
		</dev/null >"$VM_PAIR_DIR/agent.log" 2>&1 &
	if vm_have_mbcf; then
		if ! modprobe mbcf; then
			vm_log "WARNING: mbcf is installed but modprobe mbcf failed"
		elif ! rdma link add mbcf0 type mbcf netdev "$nic"; then
			vm_log "WARNING: rdma link add mbcf0 failed"
		else
			mbcf_ok=1
		fi
	fi
	modprobe rdma_rxe && rdma link add rxe0 type rxe netdev "$nic" ||
		vm_log "WARNING: rxe0 on $nic failed"
	VM_MBCF=$mbcf_ok
	export VM_MBCF
	vm_log "pair topology: guest $VM_PAIR_ROLE, $nic $VM_PAIR_IP <-> $VM_PAIR_PEER_IP (guest $VM_PAIR_PEER_ROLE), $([ "$mbcf_ok" = 1 ] && echo "mbcf0, ")rxe0"
}

# vm_pair_post KEY [TEXT...]: put the line "KEY TEXT" into the peer's inbox
# (retried while the peer is not up yet, for VM_PAIR_POST_TIMEOUT s = 120).
# Bash's /dev/tcp: no process is started.
vm_pair_post() {
	local fd ack end=$((SECONDS + ${VM_PAIR_POST_TIMEOUT:-120}))
	while :; do
		if { exec {fd}<>"/dev/tcp/$VM_PAIR_PEER_IP/$VM_PAIR_PORT"; } 2>/dev/null; then
			ack=
			printf 'POST %s\n' "$*" >&"$fd" && read -r -t 20 ack <&"$fd"
			exec {fd}>&-
			[ "$ack" = OK ] && return 0
		fi
		if [ "$SECONDS" -ge "$end" ]; then
			vm_fail "cannot post '$*' to guest $VM_PAIR_PEER_ROLE ($VM_PAIR_PEER_IP:$VM_PAIR_PORT)"
			return 1
		fi
		sleep 0.5
	done
}

# vm_pair_peek KEY: print the text of the peer's first "KEY ..." line in the
# inbox; fail if there is none yet.
vm_pair_peek() {
	local k v
	while read -r k v; do
		if [ "$k" = "$1" ]; then
			printf '%s\n' "$v"
			return 0
		fi
	done <"$VM_PAIR_INBOX"
	return 1
}

# vm_pair_wait KEY [TIMEOUT_S]: wait (default 300 s) until the peer posted
# KEY; print its text.  Fails at once if the peer posted "abort".
# Keys are used once per run (make them unique, e.g. with a step number).
vm_pair_wait() {
	local key=$1 timeout=${2:-300} end=$((SECONDS + ${2:-300})) why
	while :; do
		vm_pair_peek "$key" && return 0
		if why=$(vm_pair_peek abort); then
			vm_fail "guest $VM_PAIR_PEER_ROLE aborted ($why) while we waited for '$key'"
			return 1
		fi
		if [ "$SECONDS" -ge "$end" ]; then
			vm_fail "guest $VM_PAIR_PEER_ROLE did not post '$key' within ${timeout}s"
			return 1
		fi
		sleep 0.3
	done
}

# vm_pair_barrier NAME [TIMEOUT_S]: both guests reach NAME before either
# goes on.
vm_pair_barrier() {
	vm_pair_post "barrier.$1" "$VM_PAIR_ROLE" && vm_pair_wait "barrier.$1" "${2:-300}" >/dev/null
}

# vm_pair_abort WHY: tell the peer to stop waiting for us (vm_pair_wait
# fails there at once).
vm_pair_abort() {
	VM_PAIR_POST_TIMEOUT=10 vm_pair_post abort "$VM_PAIR_ROLE: $*" || true
}

# vm_pair_rsh CMD [ARGS...]: run CMD on the peer like `ssh -n PEER CMD` does
# (its output, its exit status; stdin is /dev/null there).  The hook for
# launchers: e.g. Open MPI's `mpirun --mca plm_rsh_agent AGENT`, where AGENT
# is a script calling `pair-agent.py rsh PEER_IP PORT` with its arguments
# minus the host name (see tests/vm/README.md).
vm_pair_rsh() {
	python3 "$MBCF_SRC/tests/vm/pair-agent.py" rsh "$VM_PAIR_PEER_IP" "$VM_PAIR_PORT" "$@"
}

# vm_gid_index DEV IP: print the index of DEV port 1's GID for IP (an IPv4
# address as its ::ffff:a.b.c.d mapping, or a full IPv6 address in sysfs
# form); fail if it has none.
vm_gid_index() {
	local dev=$1 want=$2 g i
	if [[ $want =~ ^([0-9]+)\.([0-9]+)\.([0-9]+)\.([0-9]+)$ ]]; then
		want=$(printf '0000:0000:0000:0000:0000:ffff:%02x%02x:%02x%02x' "${BASH_REMATCH[@]:1}")
	fi
	for ((i = 0; i < 16; i++)); do
		read -r g 2>/dev/null <"/sys/class/infiniband/$dev/ports/1/gids/$i" || continue
		if [ "$g" = "$want" ]; then
			echo "$i"
			return 0
		fi
	done
	return 1
}

# vm_pair_require: every pair test starts with this: mbcf0 is up and ACTIVE
# and both guests got here (barrier "start").
vm_pair_require() {
	[ -n "${VM_PAIR_ROLE:-}" ] || vm_die "not a pair guest (run with tests/vm/run2.sh)"
	vm_have_mbcf || vm_die "mbcf module is not installed in the guest"
	[ "${VM_MBCF:-0}" = 1 ] || { vm_pair_abort "no mbcf0"; vm_die "topology did not create mbcf0"; }
	vm_wait_port mbcf0 20 || { vm_pair_abort "mbcf0 not active"; exit 1; }
	vm_pair_barrier start 300 || exit 1
}
