#!/usr/bin/env bash
# Is an mbcf.ko built here fit for a stock kernel built elsewhere (ctest
# k<MAJOR.MINOR>.abi)?  The newest kernel's module is compiled with
# Debian 12's gcc-12 in a tree prepared from Debian's config, while Debian
# built the kernel with a newer gcc; the module loads only if nothing it
# shares with the kernel is laid out or called differently.  Checked:
#  1. vermagic: mbcf.ko's equals the kernel's own modules' (ib_core's);
#  2. config: every option that differs between the tree the module was
#     built in and the kernel's shipped config is either one mbcf.ko's
#     compilation never looked at (not among the include/config/NAME
#     dependencies kbuild recorded for its objects, nor named by the
#     Makefiles), or on the list below of options judged harmless;
#  3. layouts: every struct and union of the kernel's that mbcf.ko's DWARF
#     knows has the size and member offsets the kernel's BTF (vmlinux,
#     ib_core, ib_uverbs) gives it.
#   kernel-abi.sh KDIR TREE OUT
# KDIR: a kernel dir of kernel-dir.sh (vmlinux, lib/modules/REL/ with
# extra/mbcf.ko and links to the stock modules and config); TREE: the
# build tree mbcf.ko was built against; OUT: that build's dir
# (kmod/build-for.sh's: OUT/src/.*.cmd).
set -euo pipefail
[ $# = 3 ] || { echo "usage: kernel-abi.sh KDIR TREE OUT" >&2; exit 2; }
kd=$1 tree=$2 out=$3
rel=$(find "$kd/lib/modules" -mindepth 1 -maxdepth 1 -printf '%f\n' 2>/dev/null | head -n1)
m=$kd/lib/modules/$rel
ko=$m/extra/mbcf.ko
[ -n "$rel" ] && [ -f "$ko" ] || { echo "SKIP: no kernel dir in $kd (k<mm>.kernel)"; exit 77; }
command -v pahole >/dev/null || { echo "SKIP: no pahole (scripts/install-deps.sh)"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0

unpack() { # MODULE -> path of its plain .ko in $tmp
	local f
	f=$(find -L "$m/kernel" -name "$1.ko*" | head -n1)
	[ -n "$f" ] || return 1
	case $f in
	*.xz) xz -dc "$f" >"$tmp/$1.ko" ;;
	*.zst) zstd -dcq "$f" >"$tmp/$1.ko" ;;
	*) cp "$f" "$tmp/$1.ko" ;;
	esac
	echo "$tmp/$1.ko"
}
core=$(unpack ib_core) || { echo "FAIL: no ib_core module under $m/kernel"; exit 1; }
uverbs=$(unpack ib_uverbs) || { echo "FAIL: no ib_uverbs module under $m/kernel"; exit 1; }

# 1. vermagic
want=$(modinfo -F vermagic "$core")
got=$(modinfo -F vermagic "$ko")
if [ "$got" = "$want" ]; then
	echo "ok: vermagic '$got'"
else
	echo "FAIL: mbcf.ko's vermagic '$got', the kernel's modules' '$want'"
	fail=1
fi

# 2. config.  Options judged harmless when they differ (each checked in
# the sources of the kernels this lane has met):
#  - what the compiler offers, used only for code inside the module:
#    CC_HAS_ASM_GOTO_OUTPUT, CC_HAS_ASM_GOTO_TIED_OUTPUT and
#    GCC_ASM_GOTO_OUTPUT_BROKEN (uaccess.h: asm goto with outputs or not),
#    CC_HAS_ASSUME (an optimizer hint), CC_HAS_COUNTED_BY(_PTR) and
#    CC_HAS_MULTIDIMENSIONAL_NONSTRING (attributes for bounds checking and
#    warnings, no layout), CC_HAS_MIN_FUNCTION_ALIGNMENT and
#    CC_HAS_SANE_FUNCTION_ALIGNMENT (-falign-functions instead of
#    -fmin-function-alignment, and __cold left out: the module's own
#    functions' alignment), CC_OPT_INLINE_MEMSET (an inlining choice),
#    CC_HAS_KASAN_SW_TAGS (arm64 only);
#  - version numbers and texts (the layout check below catches what they
#    might change): *_VERSION, *_VERSION_TEXT;
#  - RUST and RUST_*: flags for rustc and the rust/ build only (Makefile;
#    with kCFI on, RUST would also select CFI_ICALL_NORMALIZE_INTEGERS for
#    C code, an option of its own that this check would see differ);
#  - BUILD_SALT: an ELF note (Debian's shipped config leaves it out);
#  - MODULE_SIG*: signing (the tree signs nothing; the kernel does not
#    force signatures: MODULE_SIG_FORCE is checked below).
harmless='^(CC_HAS_ASM_GOTO_OUTPUT|CC_HAS_ASM_GOTO_TIED_OUTPUT|GCC_ASM_GOTO_OUTPUT_BROKEN|CC_HAS_ASSUME|CC_HAS_COUNTED_BY|CC_HAS_COUNTED_BY_PTR|CC_HAS_MULTIDIMENSIONAL_NONSTRING|CC_HAS_MIN_FUNCTION_ALIGNMENT|CC_HAS_SANE_FUNCTION_ALIGNMENT|CC_OPT_INLINE_MEMSET|CC_HAS_KASAN_SW_TAGS|[A-Z_]*_VERSION|[A-Z_]*_VERSION_TEXT|RUST|RUST_[A-Z_]*|BUILD_SALT|MODULE_SIG_ALL|MODULE_SIG_KEY)$'
shipped=$m/config
[ -e "$shipped" ] || shipped=$(dirname "$(dirname "$(readlink -f "$m/kernel")")")/../boot/config-$rel
[ -r "$shipped" ] || shipped=/boot/config-$rel
[ -r "$shipped" ] || { echo "FAIL: no shipped config of $rel"; exit 1; }
opts() { sed -n 's/^CONFIG_\([A-Za-z0-9_]*\)=\(.*\)$/\1=\2/p' "$1" | LC_ALL=C sort -t= -k1,1; }
opts "$shipped" >"$tmp/shipped"
opts "$tree/.config" >"$tmp/tree"
# Options whose value differs, or that one side lacks.
LC_ALL=C join -t= -a1 -a2 -e '(unset)' -o 0,1.2,2.2 "$tmp/shipped" "$tmp/tree" |
	awk -F= '$2 != $3' >"$tmp/diff"
ndiff=$(wc -l <"$tmp/diff")
ls "$out"/src/.*.o.cmd >/dev/null 2>&1 || { echo "FAIL: no kbuild .cmd files in $out/src"; exit 1; }
cat "$out"/src/.*.o.cmd | grep -o 'include/config/[A-Za-z0-9_]*' | sed 's|.*/||' | sort -u >"$tmp/seen"
nref=0
while IFS='=' read -r name a b; do
	if grep -qx "$name" "$tmp/seen" ||
		grep -qsw "CONFIG_$name" "$tree/Makefile" "$tree/arch/x86/Makefile" "$tree"/scripts/Makefile.*; then
		nref=$((nref + 1))
		if [[ $name =~ $harmless ]]; then
			echo "ok: CONFIG_$name differs (shipped $a, tree $b): judged harmless"
		else
			echo "FAIL: CONFIG_$name differs (shipped $a, tree $b) and mbcf.ko's build uses it: judge it"
			fail=1
		fi
	fi
done <"$tmp/diff"
echo "ok: $ndiff options differ, $nref of them seen by mbcf.ko's build ($(wc -l <"$tmp/seen") options it depends on)"
if grep -qx 'CONFIG_MODULE_SIG_FORCE=y' "$shipped"; then
	echo "FAIL: $rel forces module signatures (mbcf.ko is unsigned)"
	fail=1
fi

# 3. layouts: size and top-level member offsets of every struct/union in
# both the kernel's BTF and mbcf.ko's DWARF.  (pahole 1.24 warns of BTF
# kinds it does not know -- type and decl tags -- and reads the rest.)
pahole -F btf "$kd/vmlinux" >"$tmp/k.lay" 2>/dev/null
for f in "$core" "$uverbs"; do
	pahole -F btf --btf_base "$kd/vmlinux" "$f" >>"$tmp/k.lay" 2>/dev/null
done
pahole -F dwarf "$ko" >"$tmp/m.lay" 2>/dev/null
[ -s "$tmp/m.lay" ] || { echo "FAIL: no DWARF in $ko"; exit 1; }
python3 - "$tmp/k.lay" "$tmp/m.lay" <<'EOF' || fail=1
import re, sys

def parse(fn):
    d, cur = {}, None
    for l in open(fn, errors="replace"):
        m = re.match(r"^(struct|union) (\w+) \{", l)
        if m:
            cur = m.group(2)
            d.setdefault(cur, {})
            continue
        if cur is None:
            continue
        if l.startswith("}"):
            cur = None
            continue
        m = re.search(r"/\* size: (\d+)", l)
        if m:
            d[cur]["(size)"] = m.group(1)
            continue
        if not l.startswith("\t") or l.startswith("\t\t"):
            continue  # top-level members only
        c = re.search(r"/\*\s*([0-9: ]+?)\s+(\d+)\s*\*/", l)
        if not c:
            continue
        decl = re.sub(r"__attribute__\(\(.*?\)\)\)?", "", l.split(";")[0])
        ids = re.findall(r"[A-Za-z_]\w*", decl.split("[")[0].split(":")[0])
        if ids:
            d[cur][ids[-1]] = (c.group(1).replace(" ", ""), c.group(2))
    return d

k, m = parse(sys.argv[1]), parse(sys.argv[2])
common = [s for s in m if s in k]
n = bad = 0
for s in common:
    for f, v in m[s].items():
        if f in k[s]:
            n += 1
            if k[s][f] != v:
                bad += 1
                print(f"FAIL: struct {s}.{f}: kernel {k[s][f]}, mbcf.ko {v}")
if len(common) < 100 or n < 1000:
    print(f"FAIL: only {len(common)} structs, {n} members compared (pahole?)")
    sys.exit(1)
print(f"{'ok' if not bad else 'FAIL'}: {len(common)} kernel structs mbcf.ko uses, "
      f"{n} sizes and member offsets compared with the kernel's BTF, {bad} differ")
sys.exit(1 if bad else 0)
EOF
[ "$fail" = 0 ] && echo "kernel-abi.sh: PASS ($rel)" || echo "kernel-abi.sh: FAIL ($rel)"
exit "$fail"
