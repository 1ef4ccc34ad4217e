#!/bin/sh
# The "too old a kernel" path of kmod/compat/probe.sh, on the kernel we
# have: a copy of kmod/compat/ with two required probes added that cannot
# compile (as netdev_hold cannot on 5.15) must stop the DKMS build
# (compat/dkms.mk) at the probes, with exactly
#   mbcf needs Linux 6.1 or newer: KDIR lacks A; B
# on its output, no compat-generated.h and no Kbuild run; and the real
# required probes alone must pass against KDIR.
#   compat-required-check.sh SRC_ROOT KDIR OUT
# Exit 77 (ctest: skipped) without a kernel build tree.
set -u
src=$1
kdir=$2
out=$3
[ -n "$kdir" ] && [ -f "$kdir/Makefile" ] || { echo "SKIP: no kernel build tree ('$kdir')"; exit 77; }
fail=0
ok() { echo "ok: $*"; }
bad() { echo "FAIL: $*"; fail=1; }

rm -rf "$out"
mkdir -p "$out/tree/compat"
cp -R "$src/kmod/compat/." "$out/tree/compat/"
cat >"$out/tree/compat/required/zz_absent_a.c" <<'EOC'
/* mbcf-needs: mbcf_absent_a() (a test) */
#include <linux/kernel.h>
int mbcf_probe(void);
int mbcf_probe(void) { return mbcf_absent_a(); }
EOC
cat >"$out/tree/compat/required/zz_absent_b.c" <<'EOC'
/* mbcf-needs: struct sk_buff.mbcf_absent_b (another) */
#include <linux/skbuff.h>
int mbcf_probe(const struct sk_buff *skb);
int mbcf_probe(const struct sk_buff *skb) { return skb->mbcf_absent_b; }
EOC
unset MAKEFLAGS MFLAGS MAKELEVEL || true
status=0
make -C "$out/tree" -f compat/dkms.mk KDIR="$kdir" >"$out/dkms.log" 2>&1 || status=$?
want="mbcf needs Linux 6.1 or newer: $kdir lacks mbcf_absent_a() (a test); struct sk_buff.mbcf_absent_b (another)"
[ "$status" != 0 ] && ok "dkms.mk fails (status $status)" || bad "dkms.mk succeeded"
n=$(grep -cxF "$want" "$out/dkms.log")
[ "$n" = 1 ] && ok "the message, once: $want" || { bad "message seen $n times, want 1: $want"; cat "$out/dkms.log"; }
[ ! -e "$out/tree/compat-generated.h" ] && ok "no compat-generated.h" || bad "compat-generated.h written"
# dkms.mk's second command (Kbuild on the tree) never ran: make names the
# failing recipe line, the probe's, and nothing after it.
if grep -q "M=$out/tree modules" "$out/dkms.log" || grep -q 'MODPOST\|Kbuild\|No rule to make target' "$out/dkms.log"; then
	bad "the build went on past the probes"; cat "$out/dkms.log"
else
	ok "stopped at the probes"
fi

# The real required probes pass against KDIR (the supported kernel).
rm -f "$out/tree/compat/required/zz_absent_"*.c
if sh "$out/tree/compat/probe.sh" "$kdir" "$out/ok.h" >"$out/ok.log" 2>&1; then
	ok "required probes pass against $kdir"
else
	bad "required probes fail against $kdir:"; cat "$out/ok.log"
fi
np=$(ls "$src"/kmod/compat/probes/*.c | wc -l)
nh=$(grep -c '^#define MBCF_HAVE_\|^/\* #undef MBCF_HAVE_' "$out/ok.h" 2>/dev/null || echo 0)
[ "$nh" = "$np" ] && ok "compat-generated.h: one line per optional probe ($np)" ||
	bad "compat-generated.h has $nh probe lines, want $np"
[ "$fail" = 0 ] && echo "compat-required-check: passed"
exit $fail
