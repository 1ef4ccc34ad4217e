#!/usr/bin/env bash
# Run a test across two QEMU guests ("two kernels") joined by one virtual
# Ethernet link: guest A and guest B, each booted by run.sh with a virtio-net
# NIC whose frames travel as UDP datagrams between two connected sockets on
# 127.0.0.1 (pair-link.py).  See tests/vm/README.md ("Two kernels").
set -euo pipefail

usage() {
	cat <<EOF
usage: ${0##*/} [options] SCRIPT [ARGS...]

Boots guests A and B (run.sh each, in parallel) joined by one Ethernet link,
runs the bash SCRIPT in both (VM_PAIR_ROLE=A or B tells them apart; B runs
--script-b FILE instead if given), scans both kernel logs and exits 0 only if
both scripts passed and neither log has a bug/warning report.

options:
  --script-b FILE  guest B runs FILE (with the same ARGS) instead of SCRIPT
  --build DIR      build dir to install in both (run.sh --build)
  --no-install     install nothing
  --kver VER       kernel version (run.sh --kver)
  --debug-kernel DIR  the debug lane's kernel (run.sh --debug-kernel)
  --mem SIZE       memory per guest (default: 1G)
  --smp N          vCPUs per guest (default: 1; two guests share the host)
  --timeout SEC    each guest's watchdog (default: 900)
  --grace SEC      after one guest failed, the other may run SEC more seconds
                   (to notice, scan its log, power off) before it is killed
                   (default: 90)
  --keep-logs PFX  keep the full consoles in PFX.A.log and PFX.B.log
  --no-topology    no link/device setup in the guests (run.sh --no-topology)
  --quiet          run.sh --quiet
  -h, --help       this help
EOF
}

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)

die() {
	echo "run2.sh: $*" >&2
	exit 2
}

# The link: two connected UDP sockets on fds 10 (A) and 11 (B), made by
# pair-link.py, which then execs this script again with them inherited.
FD_A=10
FD_B=11
if [ -z "${MBCF_PAIR_LINK:-}" ]; then
	case "${1:-}" in -h | --help) usage; exit 0 ;; esac
	py=/usr/bin/python3
	[ -x "$py" ] || py=$(command -v python3) || die "python3 missing"
	exec "$py" "$here/pair-link.py" "$FD_A" "$FD_B" "$0" "$@"
fi
for fd in $FD_A $FD_B; do
	[[ $(readlink "/proc/$$/fd/$fd") == socket:* ]] || die "fd $fd is not the link socket (run without MBCF_PAIR_LINK set)"
done
link=$MBCF_PAIR_LINK
unset MBCF_PAIR_LINK

runopts=()
script_b=
smp=1
mem=1G
timeout=900
grace=90
keep=
while [ $# -gt 0 ]; do
	case "$1" in
	--script-b) script_b=${2:?}; shift 2 ;;
	--build | --kver | --debug-kernel) runopts+=("$1" "${2:?$1 needs a value}"); shift 2 ;;
	--no-install | --no-topology | --quiet) runopts+=("$1"); shift ;;
	--mem) mem=${2:?}; shift 2 ;;
	--smp) smp=${2:?}; shift 2 ;;
	--timeout) timeout=${2:?}; shift 2 ;;
	--grace) grace=${2:?}; shift 2 ;;
	--keep-logs) keep=${2:?}; shift 2 ;;
	-h | --help) usage; exit 0 ;;
	--) shift; break ;;
	-*) usage >&2; die "unknown option $1" ;;
	*) break ;;
	esac
done
[ $# -ge 1 ] || { usage >&2; exit 2; }
script_a=$1
shift
script_b=${script_b:-$script_a}
[ -f "$script_a" ] || die "no such script: $script_a"
[ -f "$script_b" ] || die "no such script: $script_b"
[[ $timeout =~ ^[0-9]+$ ]] || die "--timeout takes seconds"
[[ $grace =~ ^[0-9]+$ ]] || die "--grace takes seconds"

# Locally administered MACs (QEMU's 52:54:00 prefix); the guests derive
# their IPv6 link-local addresses (and mbcf0's GID 0) from them.
MAC_A=52:54:00:6d:62:0a
MAC_B=52:54:00:6d:62:0b

t_start=$EPOCHREALTIME
elapsed() {
	awk -v a="$t_start" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }'
}

cache=${XDG_CACHE_HOME:-/var/tmp}/mbcf-vm
mkdir -p "$cache"
dir=$(mktemp -d "$cache/pair.XXXXXX")

# Every exit path stops both guests: TERM to run.sh runs its own trap, which
# kills its QEMU; a run.sh that does not go within 10 s loses its QEMU (found
# by parent pid) and itself to KILL.
stop_guest() { # ROLE
	local pid q i
	pid=$(cat "$dir/pid.$1" 2>/dev/null) || return 0
	kill -0 "$pid" 2>/dev/null || return 0
	kill -TERM "$pid" 2>/dev/null || true
	for ((i = 0; i < 100; i++)); do
		kill -0 "$pid" 2>/dev/null || return 0
		sleep 0.1
	done
	for q in $(pgrep -P "$pid" -x qemu-system-x86 2>/dev/null; pgrep -P "$pid" -f '^qemu-system' 2>/dev/null); do
		kill -KILL "$q" 2>/dev/null || true
	done
	kill -KILL "$pid" 2>/dev/null || true
}
# shellcheck disable=SC2317 # invoked by the trap
cleanup() {
	stop_guest A
	stop_guest B
	wait 2>/dev/null || true
	rm -rf "$dir"
}
trap cleanup EXIT
trap 'echo "run2.sh: interrupted" >&2; exit 130' INT TERM HUP

common=("${runopts[@]}" --smp "$smp" --mem "$mem" --timeout "$timeout")

# guest ROLE FD MAC SCRIPT ARGS...: run.sh in the background, its output
# prefixed with "[ROLE] ", its pid and status in $dir.
guest() {
	local role=$1 fd=$2 mac=$3 script=$4
	shift 4
	local log=()
	[ -n "$keep" ] && log=(--keep-log "$keep.$role.log")
	{
		"$here/run.sh" "${common[@]}" "${log[@]}" \
			--net "dgram,local.type=fd,local.str=$fd" --mac "$mac" \
			--env VM_PAIR_ROLE="$role" --env VM_PAIR_MAC_A="$MAC_A" \
			--env VM_PAIR_MAC_B="$MAC_B" "$script" "$@" &
		echo $! >"$dir/pid.$role"
		local rc=0
		wait $! || rc=$?
		echo "$rc" >"$dir/rc.$role"
	} 2>&1 | sed -u "s/^/[$role] /"
}

echo "run2.sh: guests A ($MAC_A) and B ($MAC_B), link: UDP $link"
guest A $FD_A "$MAC_A" "$script_a" "$@" 11>&- &
pipe_a=$!
guest B $FD_B "$MAC_B" "$script_b" "$@" 10>&- &
pipe_b=$!
exec 10>&- 11>&- # only the QEMUs hold the link now

# Wait for both; once one failed, the other gets --grace seconds more.  A
# backstop beyond both watchdogs covers a run.sh that hangs itself.
deadline=$((SECONDS + timeout + 60))
fail_at=
while :; do
	rc_a=$(cat "$dir/rc.A" 2>/dev/null) || rc_a=
	rc_b=$(cat "$dir/rc.B" 2>/dev/null) || rc_b=
	[ -n "$rc_a" ] && [ -n "$rc_b" ] && break
	if [ -z "$fail_at" ] && { [ "${rc_a:-0}" != 0 ] || [ "${rc_b:-0}" != 0 ]; }; then
		fail_at=$SECONDS
		echo "run2.sh: [$(elapsed) s] guest $([ "${rc_a:-0}" != 0 ] && echo A || echo B) failed; the other has ${grace}s to finish"
	fi
	if [ -n "$fail_at" ] && [ $((SECONDS - fail_at)) -ge "$grace" ]; then
		echo "run2.sh: [$(elapsed) s] grace over: stopping the other guest" >&2
		stop_guest A
		stop_guest B
	elif [ "$SECONDS" -ge "$deadline" ]; then
		echo "run2.sh: TIMEOUT: a guest runner did not exit; stopping both" >&2
		stop_guest A
		stop_guest B
	fi
	# a runner killed before writing its status
	for r in A B; do
		p=$(cat "$dir/pid.$r" 2>/dev/null) || continue
		if [ ! -e "$dir/rc.$r" ] && ! kill -0 "$p" 2>/dev/null; then
			sleep 0.5
			[ -e "$dir/rc.$r" ] || echo 137 >"$dir/rc.$r"
		fi
	done
	sleep 1
done
wait "$pipe_a" "$pipe_b" 2>/dev/null || true

status=0
[ "$rc_a" != 0 ] && status=$rc_a
[ "$status" = 0 ] && [ "$rc_b" != 0 ] && status=$rc_b
if [ "$status" = 0 ]; then
	echo "run2.sh: PASS: $(basename "$script_a") on two kernels (total $(elapsed) s)"
else
	echo "run2.sh: FAIL: guest A status $rc_a, guest B status $rc_b (total $(elapsed) s)" >&2
fi
[ -n "$keep" ] && echo "run2.sh: consoles in $keep.A.log, $keep.B.log"
exit "$status"
