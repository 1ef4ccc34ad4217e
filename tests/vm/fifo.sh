#!/bin/bash
# Guest test: the memory-based FIFO through the mbcf direct verbs
# (progs/fifo_test.c, docs/protocol.md 16), as an unprivileged user
# (nobody): senders on mbcf1 (ns1's veth) push into FIFOs on mbcf0.  Every
# case must PASS; the owner's device must have sent STOP and GO (the full
# FIFO of case order) and the NAKs of the hostile cases (the signal's
# cases send none); afterwards no
# mbcf object is left, pinned pages are back to the baseline, the kernel
# log is clean.
#   tests/vm/run.sh --build BUILD tests/vm/fifo.sh [PROG [CASE...]]
set -u
# shellcheck source=lib.sh
. "${MBCF_VM_LIB:-$(dirname "$0")/lib.sh}"

failed=0
check() { "$@" || failed=$((failed + 1)); }

vm_require_mbcf
prog=$(vm_test_prog mbcf_fifo_test "${1:-}") || exit 1
shift
cases=${*:-order badkey rdma reg toobig fullerr scribble destroy midpush signal sigempty sigflags}
# linked with -lmbcf: libmbcf.so.1 of the build tree (its RUNPATH), the
# file the provider link there names too
check assert_eq "$MBCF_BUILD/provider/libmbcf.so.1" \
	"$(ldd "$prog" | awk '$1 == "libmbcf.so.1" { print $3 }')" "libmbcf.so.1 of fifo_test"
pins0=$(vm_pins_held)
vm_log "pinned pages at start: $pins0"
stop0=$(vm_dev_ctr mbcf0 stop_tx) go0=$(vm_dev_ctr mbcf0 go_tx)
nak0=$(vm_dev_ctr mbcf0 nak_tx)

vm_phase "fifo_test as nobody: $cases"
out=$(timeout "$(vm_scaled 600)" setpriv --reuid=nobody --regid=nogroup \
	--clear-groups "$prog" -a mbcf1 -b mbcf0 $cases 2>&1)
rc=$?
echo "$out"
check assert_eq 0 "$rc" "fifo_test exit status"
for c in $cases; do
	grep -q "^PASS $c " <<<"$out" || { echo "FAIL: no PASS line for $c"; failed=$((failed + 1)); }
done

stop=$(($(vm_dev_ctr mbcf0 stop_tx) - stop0)) go=$(($(vm_dev_ctr mbcf0 go_tx) - go0))
nak=$(($(vm_dev_ctr mbcf0 nak_tx) - nak0))
vm_log "mbcf0: stop_tx +$stop, go_tx +$go, nak_tx +$nak"
case " $cases " in
*" order "*)
	# the full FIFO stopped the senders; the owner's doorbell sent GO
	check assert_cmd test "$stop" -gt 0
	check assert_cmd test "$go" -gt 0 ;;
esac
# one NAK per refused push of the default cases: badkey 3, rdma 2 (the
# lkey case fails at the sender), toobig 1, fullerr 1, scribble 3, destroy 1,
# midpush 4 (one per sender)
[ -z "${*:-}" ] && check assert_eq 15 "$nak" "NAKs sent by mbcf0"

check vm_assert_clean fifo_test "$pins0" 30
check vm_dmesg_check
if [ "$failed" != 0 ]; then
	echo "fifo: $failed check(s) failed"
	exit 1
fi
echo "fifo: all checks passed"
