#!/bin/sh
# Build mbcf.ko for one more kernel, beside the build's own:
#   build-for.sh SRC_ROOT KDIR OUT VERSION_HEADER
# stages the module into OUT/src (kmod/stage.sh), runs the compat probes
# against KDIR (OUT/src/compat-generated.h), builds with Kbuild and copies
# the module to OUT/mbcf.ko.  Fails on any compiler or modpost warning
# (in kmod/, core/, or headers they include), and with MBCF_KBUILD_CHECK=sparse
# on any sparse warning or error (every file checked: C=2):
# the module must build warning-free on every kernel we support.  The ctest
# tests kmod.build-MAJOR.MINOR (label unit) run it; OUT is then the second
# module build dir the guest rig boots that kernel with.
set -eu
[ $# -eq 4 ] || { echo "usage: build-for.sh SRC_ROOT KDIR OUT VERSION_HEADER" >&2; exit 2; }
src=$1
kdir=$2
out=$3
version_h=$4
[ -f "$kdir/Makefile" ] || { echo "build-for.sh: no kernel build tree at $kdir" >&2; exit 1; }
# The release modules get in their vermagic: UTS_RELEASE (Debian's 6.1 trees
# say 6.1.192 in kernel.release and `make kernelrelease`, 6.1.0-N-amd64 here).
rel=$(sed -n 's/^#define UTS_RELEASE "\(.*\)"$/\1/p' "$kdir/include/generated/utsrelease.h")
[ -n "$rel" ] || { echo "build-for.sh: no UTS_RELEASE in $kdir/include/generated/utsrelease.h" >&2; exit 1; }

t0=$(date +%s)
"$src/kmod/stage.sh" "$src" "$out/src" "$version_h"
# The probes again only when one of them, probe.sh or the kernel's .config
# is newer than their last result (stage.sh keeps the sources' times).
# (A stamp of its own: probe.sh keeps an unchanged header's time, so Kbuild
# does not rebuild the module for nothing.)
gen=$out/src/compat-generated.h
stamp=$out/probes.stamp
stale=1
if [ -f "$gen" ] && [ -f "$stamp" ] && [ -f "$kdir/.config" ] && [ "$stamp" -nt "$kdir/.config" ]; then
	stale=0
	for f in "$out/src/compat/probe.sh" "$out/src/compat/probes"/*.c "$out/src/compat/required"/*.c; do
		[ "$f" -nt "$stamp" ] && stale=1
	done
fi
if [ "$stale" = 1 ]; then
	"$out/src/compat/probe.sh" "$kdir" "$gen"
	touch "$stamp"
fi
t1=$(date +%s)
# Our own make: no jobserver of a caller's (ctest runs us from a shell).
unset MAKEFLAGS MFLAGS MAKELEVEL || true
log=$out/build.log
status=0
# KCFLAGS=-Werror: a warning fails the compile, so no object of a file that
# warns stays behind to pass the next run; the grep below catches the rest
# (modpost).
set --
if [ "${MBCF_KBUILD_CHECK:-}" = sparse ]; then
	command -v sparse >/dev/null || { echo "build-for.sh: sparse is not installed (scripts/install-deps.sh)"; exit 1; }
	set -- C=2 CHECK=sparse
fi
make -s -C "$kdir" M="$out/src" -j"$(nproc 2>/dev/null || echo 2)" KCFLAGS=-Werror "$@" modules >"$log" 2>&1 || status=$?
t2=$(date +%s)
cat "$log"
echo "build-for.sh: compat probes for $rel:"
grep '^#define MBCF_HAVE_\|#undef MBCF_HAVE_' "$out/src/compat-generated.h" | sed 's/^/  /'
if [ "$status" != 0 ]; then
	echo "FAIL: mbcf.ko does not build for $rel ($kdir)"
	exit 1
fi
# make -s prints nothing but diagnostics; BTF's "Skipping" notice is none.
if grep -iqE 'warning|error:' "$log"; then
	echo "FAIL: warnings building mbcf.ko for $rel${MBCF_KBUILD_CHECK:+ (checked by $MBCF_KBUILD_CHECK)}:"
	grep -iE 'warning|error:' "$log"
	exit 1
fi
got=$(modinfo -F vermagic "$out/src/mbcf.ko" | cut -d' ' -f1)
[ "$got" = "$rel" ] || { echo "FAIL: vermagic of mbcf.ko is '$got', not $rel"; exit 1; }
cp -p "$out/src/mbcf.ko" "$out/mbcf.ko"
echo "build-for.sh: mbcf.ko for $rel without warnings in $out (probes $((t1 - t0)) s, build $((t2 - t1)) s)"

# The guest test module tests/vm/nvmeof.sh loads (fast registration checks
# only a kernel consumer can make), for this kernel too: OUT/frmr_test.
ft=$out/frmr_test
mkdir -p "$ft"
cp -p "$src/tests/vm/frmr_test/mbcf_frmr_test.c" "$src/tests/vm/frmr_test/Kbuild" "$ft/"
status=0
make -s -C "$kdir" M="$ft" KCFLAGS=-Werror modules >"$ft/build.log" 2>&1 || status=$?
if [ "$status" != 0 ] || grep -iqE 'warning|error:' "$ft/build.log"; then
	cat "$ft/build.log"
	echo "FAIL: mbcf_frmr_test.ko does not build without warnings for $rel"
	exit 1
fi
echo "build-for.sh: mbcf_frmr_test.ko for $rel in $ft"
