#!/bin/bash
# Guest test: producers racing the kernel's ring consumer
# (progs/ring_race.c), as an unprivileged user (nobody): the most
# requests one send doorbell or one received frame takes off a ring is
# bounded by the ring (a transmit burst for datagrams), whatever a second
# thread does to the producer index meanwhile.  Then no mbcf object is
# left, pinned pages are back to the baseline, the kernel log is clean
# (the rig scans it).
#   tests/vm/run.sh --build BUILD tests/vm/race.sh [PROG [SECONDS [CASE...]]]
set -u
# shellcheck source=lib.sh
. "${MBCF_VM_LIB:-$(dirname "$0")/lib.sh}"

vm_require_mbcf
prog=$(vm_test_prog mbcf_ring_race "${1:-}") || exit 1
secs=${2:-5}
cases=${*:3}
[ -n "$cases" ] || cases="rc_sq uc_sq ud_sq rq_flip srq_flip"
pins0=$(vm_pins_held)

failed=0
out=$(setpriv --reuid=nobody --regid=nogroup --clear-groups \
	"$prog" -a mbcf1 -b mbcf0 -t "$secs" $cases 2>&1) || failed=1
echo "$out"
for c in $cases; do
	grep -q "^PASS $c " <<<"$out" || { echo "FAIL: no PASS line for $c"; failed=1; }
done
left=$(rdma res show qp 2>/dev/null | grep -c "comm mbcf_ring_race")
[ "$left" = 0 ] || { echo "FAIL: $left QPs left"; failed=1; }
pins=$(vm_pins_held)
[ "$pins" = "$pins0" ] || { echo "FAIL: pinned pages $pins0 -> $pins"; failed=1; }
[ $failed = 0 ] && echo "race: all cases passed"
exit $failed
