#!/bin/sh
# Stage the module sources into a Kbuild directory:
#   stage.sh SRC_ROOT DEST VERSION_HEADER
# VERSION_HEADER is the generated mbcf-version.h (CMake, from the project
# version); Kbuild includes it as DEST/mbcf-version.h.
# Timestamps are preserved (cp -p) so Kbuild rebuilds only what changed.
set -eu
[ $# -eq 3 ] || { echo "usage: stage.sh SRC_ROOT DEST VERSION_HEADER" >&2; exit 2; }
src=$1
dst=$2
version_h=$3
mkdir -p "$dst/core" "$dst/include"
cp -p "$src"/kmod/*.c "$src"/kmod/*.h "$src"/kmod/Kbuild "$dst"/
cp -p "$version_h" "$dst"/mbcf-version.h
cp -p "$src"/core/*.c "$dst"/core/ 2>/dev/null || true
cp -p "$src"/core/*.h "$dst"/core/ 2>/dev/null || true
cp -pR "$src"/include/. "$dst"/include/
# Drop staged files whose source is gone.
for f in "$dst"/*.c "$dst"/*.h "$dst"/core/*.c "$dst"/core/*.h; do
	[ -e "$f" ] || continue
	rel=${f#"$dst"/}
	case $rel in
	mbcf-version.h) ;; # generated, copied above
	core/*) [ -e "$src/$rel" ] || rm -f "$f" ;;
	*) [ -e "$src/kmod/$rel" ] || rm -f "$f" ;;
	esac
done
