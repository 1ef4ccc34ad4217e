#!/bin/bash
# Guest test: ibv_dealloc_mw racing binds of the same window, as an
# unprivileged user with an ordinary RLIMIT_MEMLOCK --
# the threat model.  progs/mw_race.c runs ITERATIONS rounds (type 1 binds
# with ibv_bind_mw, type 2 with IBV_WR_BIND_MW through ibv_post_send); each
# round's dereg_mr must succeed.  Afterwards: exactly ITERATIONS done,
# both outcomes of the race seen for both types, no mbcf resource left,
# pinned pages back to the baseline, the process gone without a kernel
# warning (the rig scans the log; a window bound after its dealloc made
# uverbs' teardown WARN), and mbcf0 deleted cleanly.
#   tests/vm/run.sh --build BUILD tests/vm/mw_race.sh [PATH/TO/mbcf_mw_race
#       [ITERATIONS [SECONDS]]]
# SECONDS (600, scaled on the debug lane) bounds the rounds: fewer than
# ITERATIONS done by then fails.
set -u
# shellcheck source=lib.sh
. "${MBCF_VM_LIB:-$(dirname "$0")/lib.sh}"

failed=0
check() { "$@" || failed=$((failed + 1)); }

vm_require_mbcf
prog=$(vm_test_prog mbcf_mw_race "${1:-}") || exit 1
# 30000 rounds: ~3 min on the stock kernel; the debug lane's kernel is
# VM_TIME_SCALE times slower, so it runs that many times fewer.
scale=${VM_TIME_SCALE:-1}
[[ $scale =~ ^[0-9]+$ ]] && [ "$scale" -ge 1 ] || scale=1
iters=${2:-$((30000 / scale))}
limit=${3:-600}
user=nobody

base=$(vm_pins_held)
vm_log "pinned pages at start: $base"
check assert_eq 0 "$(vm_res mr mbcf0)" "mbcf0 MRs at start"

# 8 MiB of RLIMIT_MEMLOCK, a distribution's default; no capabilities.
t0=$EPOCHREALTIME
out=$(ulimit -l 8192 && timeout "$(vm_scaled $((limit + 300)))" setpriv --reuid="$user" \
	--regid=nogroup --clear-groups --inh-caps=-all --bounding-set=-all \
	"$prog" -d mbcf0 -n "$iters" -T "$(vm_scaled "$limit")" 2>&1)
rc=$?
printf '%s\n' "$out"
vm_log "mw_race: rc $rc in $(vm_elapsed_since "$t0") s"
check assert_eq 0 "$rc" "mw_race exit status"
check assert_match "uid $(id -u "$user")\$" "$out" "mw_race ran unprivileged"
check assert_match "^done $iters iterations\$" "$out" "iterations completed"
sum=$(printf '%s\n' "$out" | sed -n 's/.*type 1 bound \([0-9]*\) refused \([0-9]*\), type 2 bound \([0-9]*\) refused \([0-9]*\),.*/\1 \2 \3 \4/p')
read -r b1 r1 b2 r2 <<<"${sum:-0 0 0 0}"
check assert_eq "$iters" "$((b1 + r1 + b2 + r2))" "binds completed (bound + refused)"
for v in "type 1 bound:$b1" "type 1 refused:$r1" "type 2 bound:$b2" "type 2 refused:$r2"; do
	check assert_match '^[1-9][0-9]*$' "${v#*:}" "${v%:*} (both sides of the race seen)"
done

check vm_assert_clean "mw_race" "$base" 30
# After a lost window the teardown left objects behind (seen: rdma
# resource show oopsing on them, link delete hanging): stop here.
[ "$rc" = 0 ] || vm_die "mw_race failed; device removal not attempted"
vm_dmesg_mark
check assert_cmd rdma link delete mbcf0
check vm_dmesg_check --since-mark

if [ "$failed" != 0 ]; then
	echo "mw_race: $failed check(s) failed"
	exit 1
fi
echo "mw_race: all checks passed"
