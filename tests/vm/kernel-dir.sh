#!/usr/bin/env bash
# A kernel dir for run.sh --kernel-dir: a stock kernel other than
# the default one, with the mbcf.ko built for it, so guests boot it by version.
#   kernel-dir.sh ROOT REL KO OUT
# ROOT: where boot/vmlinuz-REL and lib/modules/REL are ("/" for an installed
# kernel, e.g. bookworm-security's 6.12 after scripts/install-deps.sh; or a
# dir its linux-image package was unpacked into), or usr/lib/modules/REL
# with the image in it as vmlinuz (unstable's packages:
# scripts/prepare-newest-kernel.sh unpacks them).  KO: mbcf.ko for REL
# (kmod.build-MAJOR.MINOR: build/kmod-REL/mbcf.ko; kmod.build-newest:
# build/kmod-newest/mbcf.ko), whose vermagic must name REL.  OUT gets
#   vmlinux                  the bzImage's ELF payload (PVH entry)
#   lib/modules/REL/         links to ROOT's modules, extra/mbcf.ko, and
#                            depmod's index over both
# Nothing is written into ROOT.  OUT must not be under /tmp (the guest's
# /tmp is its own).
set -euo pipefail
[ $# = 4 ] || { echo "usage: kernel-dir.sh ROOT REL KO OUT" >&2; exit 2; }
root=$1 rel=$2 ko=$3 out=$4
bz=$root/boot/vmlinuz-$rel
mods=$root/lib/modules/$rel
if [ ! -r "$bz" ] && [ -r "$root/usr/lib/modules/$rel/vmlinuz" ]; then
	bz=$root/usr/lib/modules/$rel/vmlinuz
	mods=$root/usr/lib/modules/$rel
fi
[ -r "$bz" ] && [ -d "$mods" ] || { echo "SKIP: no $bz or $mods"; exit 77; }
[ -f "$ko" ] || { echo "FAIL: no $ko (kmod.build for $rel)"; exit 1; }
# The kernel refuses a module whose vermagic names another release (the
# newest tree may have moved on since cmake was run: run it again).
kv=$(modinfo -F vermagic "$ko" | cut -d' ' -f1)
[ "$kv" = "$rel" ] || { echo "FAIL: $ko is for $kv, not $rel (reconfigure)"; exit 1; }
case $(realpath -m "$out") in
/tmp/*) echo "FAIL: $out is under /tmp, which the guest cannot see"; exit 1 ;;
esac

rm -rf "$out.new"
mkdir -p "$out.new/lib/modules/$rel/extra"
# The payload: xz (Debian's 6.1) or zstd (its 6.12), up to the first frame's end.
payload() { # MAGIC DECOMPRESSOR...
	local off
	off=$(LC_ALL=C grep -m 1 -aboP "$1" "$bz" | cut -d: -f1) || return 1
	[ -n "$off" ] || return 1
	shift
	"$@" <(tail -c +"$((off + 1))" "$bz") >"$out.new/vmlinux" 2>/dev/null || true
	[ "$(head -c 4 "$out.new/vmlinux" | od -An -tx1 | tr -d ' ')" = 7f454c46 ]
}
payload '\xfd7zXZ\x00' xz -dc --single-stream ||
	payload '\x28\xb5\x2f\xfd' zstd -dcq ||
	{ echo "FAIL: no xz or zstd ELF payload in $bz"; exit 1; }
m=$out.new/lib/modules/$rel
for f in "$mods"/*; do
	b=${f##*/}
	case $b in
	modules.order | modules.builtin | modules.builtin.modinfo) ;;
	modules.* | extra | updates | vmlinuz | build | source) continue ;;
	esac
	ln -s "$(realpath "$f")" "$m/$b"
done
cp "$ko" "$m/extra/mbcf.ko"
# (No -e -F System.map: Debian's is a placeholder; the symbols mbcf.ko
# needs are checked by modpost against the kernel's Module.symvers.)
depmod -b "$out.new" "$rel" >"$out.depmod.log" 2>&1 || { tail -n 5 "$out.depmod.log"; echo "FAIL: depmod"; exit 1; }
rm -f "$out.depmod.log"
rm -rf "$out"
mv "$out.new" "$out"
echo "kernel-dir.sh: $rel in $out (mbcf.ko for $kv)"
