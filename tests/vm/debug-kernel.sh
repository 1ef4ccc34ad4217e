#!/usr/bin/env bash
# Build, once, the debug-lane guest kernel: Debian's linux-source-6.1 with
# `make allnoconfig` + tests/vm/debug-kernel.config (KASAN, lockdep,
# kmemleak, DEBUG_ATOMIC_SLEEP; everything the rig needs built in).  Prints
# the kernel build tree on stdout; progress goes to stderr.
#
#   tests/vm/debug-kernel.sh            build or reuse, print the tree
#   tests/vm/debug-kernel.sh --key      print only the cache key
#
# The tree lives in ${XDG_CACHE_HOME:-/var/tmp}/mbcf-vm/kernel-debug-KEY,
# outside the source tree and reachable by the guest (not under /tmp).  KEY
# hashes the source tarball, the fragment, this script and the compiler, so
# changing any of them builds a new tree.  The build runs under flock (a
# second caller waits and then reuses it) in KEY.tmp, renamed when complete:
# a tree that exists is whole.  Trees unused for 14 days are removed.
# The tree holds vmlinux (ELF, booted through PVH), System.map,
# Module.symvers and modules.builtin*; build external modules with
# make -C TREE M=DIR (tests/vm/debug-modules.sh does it for mbcf).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
tarball=${MBCF_LINUX_SOURCE:-/usr/src/linux-source-6.1.tar.xz}
fragment=$here/debug-kernel.config
cache=${XDG_CACHE_HOME:-/var/tmp}/mbcf-vm
jobs=${MBCF_KERNEL_JOBS:-$(nproc)}

die() {
	echo "debug-kernel.sh: $*" >&2
	exit 1
}
say() {
	echo "debug-kernel.sh: [$((SECONDS - t0)) s] $*" >&2
}
t0=$SECONDS

[ -r "$tarball" ] || die "no $tarball (scripts/install-deps.sh installs linux-source-6.1)"
case "$cache" in
/tmp/*) die "cache dir $cache must not be under /tmp (the guest cannot see it)" ;;
esac
for tool in gcc make flex bison bc xz; do
	command -v "$tool" >/dev/null || die "$tool missing (scripts/install-deps.sh)"
done
[ -e /usr/include/libelf.h ] || die "libelf-dev missing (scripts/install-deps.sh)"

# The tarball is hashed by content (~1 s): a rebuilt package with the same
# name must not reuse a tree built from the old one.
key=$({
	sha256sum <"$tarball"
	cat "$fragment" "${BASH_SOURCE[0]}"
	gcc --version | head -n 1
	ld --version | head -n 1
} | sha256sum | cut -c1-12)
if [ "${1:-}" = --key ]; then
	echo "$key"
	exit 0
fi
tree=$cache/kernel-debug-$key

# check_config FRAGMENT CONFIG: every line of FRAGMENT holds in CONFIG
# ("# CONFIG_X is not set" also matches an absent CONFIG_X).  merge_config.sh
# only warns when Kconfig drops a requested value (an unmet dependency).
check_config() {
	local line sym bad=0
	while IFS= read -r line; do
		case "$line" in
		CONFIG_*=*)
			grep -qxF -- "$line" "$2" && continue
			;;
		"# CONFIG_"*" is not set")
			sym=${line#\# }
			sym=${sym%% *}
			grep -q "^$sym=" "$2" || continue
			;;
		*) continue ;;
		esac
		echo "debug-kernel.sh: not in the final .config: $line (have: $(grep -E "^(# )?${line#\# }" "$2" | head -n 1 || true))" >&2
		bad=1
	done <"$1"
	return "$bad"
}

# prune_tree DIR: keep what booting and building external modules need
# (vmlinux, System.map, .config, Module.symvers, modules.builtin*, include/,
# arch/x86/include, every Makefile/Kconfig, scripts/, tools/objtool):
# 1.6 GB -> ~0.3 GB.  Gone: objects, sources, other arches, Documentation,
# drivers' and sound's private headers (amdgpu's alone are ~0.4 GB).
prune_tree() {
	local d=$1
	rm -rf "$d/Documentation"
	find "$d/arch" -mindepth 1 -maxdepth 1 -type d ! -name x86 -exec rm -rf {} +
	find "$d" \( -path "$d/scripts" -o -path "$d/tools" \) -prune -o -type f \
		\( -name '*.[coS]' -o -name '.tmp_vmlinux*' -o -name '*.rst' -o -name '*.dts*' \) \
		-print0 | xargs -0r rm -f
	find "$d/drivers" "$d/sound" -name '*.h' -delete
}

build_tree() {
	local tmp=$tree.tmp log=$tree.tmp/build.log rel
	rm -rf "$tmp"
	mkdir -p "$tmp"
	say "unpacking $tarball into $tmp"
	tar -xf "$tarball" -C "$tmp" --strip-components=1
	: >"$log"
	# The PVH entry runs C code (xen_prepare_pvh, and memcmp from it) before
	# KASAN has a shadow: instrumented, it faults at once (a triple fault, no
	# output).  Debian's kernel has no KASAN; this one leaves both files
	# uninstrumented (the kernel itself does so for lib/string.o when
	# AMD_MEM_ENCRYPT needs it early).
	printf '\n# mbcf debug lane: runs before the KASAN shadow exists\nKASAN_SANITIZE := n\n' \
		>>"$tmp/arch/x86/platform/pvh/Makefile"
	printf '\n# mbcf debug lane: memcmp runs before the KASAN shadow exists (PVH)\nKASAN_SANITIZE_string.o := n\n' \
		>>"$tmp/lib/Makefile"
	# The release names the key: a module built for one tree cannot load
	# (vermagic) into a kernel from another.  (Not a file named
	# localversion*: the kernel would append its contents to the release.)
	printf 'CONFIG_LOCALVERSION="-mbcfdbg-%s"\n' "${key:0:8}" >"$tmp/.mbcf-release.config"
	say "config: allnoconfig + $(basename "$fragment")"
	(cd "$tmp" && ARCH=x86_64 scripts/kconfig/merge_config.sh -n \
		"$fragment" .mbcf-release.config) >>"$log" 2>&1 || {
		tail -n 30 "$log" >&2
		die "merge_config.sh failed (log: $log)"
	}
	check_config "$fragment" "$tmp/.config" || die "config fragment not honoured (log: $log)"
	check_config "$tmp/.mbcf-release.config" "$tmp/.config" || die "LOCALVERSION not set"
	say "building vmlinux + modules with -j$jobs (log: $log)"
	if ! make -C "$tmp" ARCH=x86_64 -j"$jobs" vmlinux modules >>"$log" 2>&1; then
		grep -E -m 20 'error|Error' "$log" >&2 || tail -n 30 "$log" >&2
		cp "$log" "$tree.failed.log"
		rm -rf "$tmp"
		die "kernel build failed (log kept in $tree.failed.log)"
	fi
	rel=$(cat "$tmp/include/config/kernel.release")
	say "built $rel: $(du -sh "$tmp" | cut -f1); pruning"
	prune_tree "$tmp"
	say "pruned to $(du -sh "$tmp" | cut -f1)"
	mv "$tmp" "$tree"
}

mkdir -p "$cache"
if [ ! -s "$tree/vmlinux" ]; then
	exec 8>"$cache/kernel-debug.lock"
	if ! flock -n 8; then
		say "another build holds $cache/kernel-debug.lock; waiting"
		flock 8
	fi
	[ -s "$tree/vmlinux" ] || build_tree
	flock -u 8
	exec 8>&-
fi
touch "$tree/last-used"
# Trees of other keys (older fragments, older sources) unused for 14 days.
find "$cache" -maxdepth 2 -path "$cache/kernel-debug-*/last-used" -mtime +14 |
	while read -r f; do rm -rf "${f%/last-used}"; done
say "kernel tree $tree ($(cat "$tree/include/config/kernel.release"))"
echo "$tree"
