#!/bin/sh
# Compile core/*.c as a kernel module object with the installed kernel
# headers and -Werror: the exact files the module builds, with __KERNEL__.
# Exit 77 (ctest: skipped) when no kernel headers are installed.
set -eu
src=$1
out=$2
kdir=${KDIR:-$(ls -d /usr/src/linux-headers-*-amd64 2>/dev/null | sort -V | tail -n1)}
[ -n "$kdir" ] && [ -f "$kdir/Makefile" ] || { echo "no kernel headers: skipped"; exit 77; }
rm -rf "$out"
mkdir -p "$out"
objs=
for f in "$src"/core/*.c; do
	b=$(basename "$f" .c)
	ln -s "$f" "$out/$b.c"
	objs="$objs $b.o"
done
ln -s "$src/core/internal.h" "$out/internal.h"
cat >"$out/mod.c" <<'EOM'
#include <linux/module.h>
MODULE_LICENSE("Dual BSD/GPL");
EOM
cat >"$out/Kbuild" <<EOM
obj-m := mbcf_core_check.o
mbcf_core_check-y := mod.o $objs
ccflags-y := -I$src/include -Werror -Wframe-larger-than=512
EOM
make -s -C "$kdir" M="$out" modules
echo "core compiles as kernel code against $kdir"
