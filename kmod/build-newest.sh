#!/bin/sh
# The compile lane for the newest kernel Debian packages (ctest
# kmod.build-newest): build-for.sh against the tree
# scripts/prepare-newest-kernel.sh keeps in MBCF_KERNEL_CACHE (default
# /var/tmp/mbcf-kernels/newest), failing on any warning.
#   build-newest.sh SRC_ROOT OUT VERSION_HEADER
# Exit 77 (ctest's skip) when no tree is prepared.
set -eu
[ $# -eq 3 ] || { echo "usage: build-newest.sh SRC_ROOT OUT VERSION_HEADER" >&2; exit 2; }
src=$1
if ! kdir=$("$src/scripts/prepare-newest-kernel.sh" --check); then
	echo "SKIP: no prepared build tree of the newest Debian kernel in" \
		"${MBCF_KERNEL_CACHE:-/var/tmp/mbcf-kernels}/newest:" \
		"run scripts/prepare-newest-kernel.sh (scripts/install-deps.sh does)"
	exit 77
fi
echo "build-newest.sh: $kdir ($(cat "$kdir/.mbcf-prepared"))"
exec "$src/kmod/build-for.sh" "$src" "$kdir" "$2" "$3"
