#!/usr/bin/env bash
# The debug lane's per-build step (ctest's debug.kernel fixture): get the
# debug kernel (debug-kernel.sh: built once, cached), build mbcf.ko from this
# checkout against it, and lay out OUT for `run.sh --debug-kernel OUT`:
#
#   OUT/vmlinux                the cached kernel (symlink)
#   OUT/lib/modules/REL/       modules.builtin*, modules.order, extra/mbcf.ko
#                              and depmod's index; the guest links it to its
#                              /lib/modules/REL, so modprobe veth/rdma_rxe
#                              (built in) and modprobe/rmmod mbcf just work
#   OUT/kmod/                  the staged Kbuild dir (kmod/stage.sh)
#
#   tests/vm/debug-modules.sh OUT VERSION_HEADER
# OUT must be visible to the guest: not under /tmp.  VERSION_HEADER is the
# build's generated mbcf-version.h (<build>/mbcf-version.h).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
src=$(cd "$here/../.." && pwd)

die() {
	echo "debug-modules.sh: $*" >&2
	exit 1
}
[ $# = 2 ] || die "usage: debug-modules.sh OUT VERSION_HEADER"
[ -r "$2" ] || die "no $2 (configure the build first)"
mkdir -p "$1"
out=$(realpath "$1")
case "$out" in
/tmp/*) die "the guest cannot see the host's /tmp: use an OUT elsewhere" ;;
esac

t0=$SECONDS
tree=$("$here/debug-kernel.sh")
rel=$(cat "$tree/include/config/kernel.release")

# Same as kmod/CMakeLists.txt does for the stock kernel, plus -g: the kernel
# has no debug info, but reports in mbcf can then be decoded with
# scripts/faddr2line OUT/kmod/mbcf.ko func+0xoff.
"$src/kmod/stage.sh" "$src" "$out/kmod" "$2"
"$out/kmod/compat/probe.sh" "$tree" "$out/kmod/compat-generated.h"
make -s -C "$tree" M="$out/kmod" KCFLAGS=-g modules

mods=$out/lib/modules/$rel
rm -rf "$out/lib"
mkdir -p "$mods/extra"
cp "$tree"/modules.builtin "$tree"/modules.builtin.modinfo "$tree"/modules.order "$mods/"
cp "$out/kmod/mbcf.ko" "$mods/extra/"
# -e -F: an mbcf symbol the debug kernel does not provide fails here, not in
# every guest test.
err=$(depmod -b "$out" -e -F "$tree/System.map" "$rel" 2>&1) || die "depmod failed: $err"
[ -z "$err" ] || die "mbcf.ko does not resolve against $rel: $err"
ln -sfn "$tree/vmlinux" "$out/vmlinux"
echo "debug-modules.sh: mbcf.ko for $rel in $mods ($((SECONDS - t0)) s; kernel $tree)"
