#!/usr/bin/env bash
# A kernel build tree for the newest kernel Debian packages, to compile the
# module against (ctest kmod.build-newest), prepared with the host's
# compiler (Debian 12's gcc-12; the kernel needs gcc >= 8.1 on x86).
#   prepare-newest-kernel.sh [--check]
# Takes from the suite MBCF_NEWEST_SUITE (default unstable) its kernel, the
# one its linux-headers-amd64 names: linux-source-X.Y (an arch-all .deb:
# the source tarball) and linux-headers-<abi>-amd64 (only for its files:
# Debian's .config for the amd64 flavour, Module.symvers and the release
# name), unpacked with
# dpkg -x, never installed: the suite's binaries would replace the host's
# libc and toolchain.  The apt lists for that suite are kept in the cache,
# not in the system's apt configuration.  Then `make olddefconfig
# modules_prepare` (options gcc-12 lacks, such as Rust, drop out).
# Cache: MBCF_KERNEL_CACHE (default /var/tmp/mbcf-kernels); the tree is
# $cache/linux-<release>, $cache/newest links to it.  Idempotent: a tree
# already prepared for the suite's current version is left alone (a few
# seconds for the apt lists: 12-40 s measured); an older one is replaced.
# Measured cold on the 2-core build machine: 90 s alone (download ~3 s,
# unpacking ~25 s, olddefconfig ~8 s, modules_prepare ~45 s), 235 s beside
# other jobs; ~1.9 GB on disk with the apt lists.  Each step is time-boxed
# (MBCF_NEWEST_TIMEOUT seconds, default 1800).
# Also the suite's kernel image and modules for that release (label
# k<MAJOR.MINOR> boots them, tests/vm/CMakeLists.txt): linux-image-<release>
# and the packages of the same release it depends on (unstable splits it
# into linux-binary-, linux-modules- and linux-base-<release>), unpacked
# with dpkg -x into $cache/image-<release> (boot/vmlinuz-<release> or
# usr/lib/modules/<release>/vmlinuz, and the modules): ~125 MB to
# download, ~230 MB on disk, ~40 s.  MBCF_NEWEST_IMAGE=0 skips it.
# --check: print the tree's path and exit 0 if one is prepared, else 1.
# --check-image: print the image dir of the prepared tree's release and
# exit 0 if it is unpacked, else 1.
set -euo pipefail

cache=${MBCF_KERNEL_CACHE:-/var/tmp/mbcf-kernels}
suite=${MBCF_NEWEST_SUITE:-unstable}
tmo=${MBCF_NEWEST_TIMEOUT:-1800}
mirror=${MBCF_DEBIAN_MIRROR:-http://deb.debian.org/debian}

if [ "${1:-}" = --check ]; then
	t=$cache/newest
	if [ -f "$t/.mbcf-prepared" ] && [ -f "$t/Makefile" ]; then
		readlink -f "$t"
		exit 0
	fi
	exit 1
fi
if [ "${1:-}" = --check-image ]; then
	t=$cache/newest
	[ -f "$t/.mbcf-prepared" ] || exit 1
	rel=$(sed -n 's/^#define UTS_RELEASE "\(.*\)"$/\1/p' "$t/include/generated/utsrelease.h")
	i=$cache/image-$rel
	[ -n "$rel" ] && [ -f "$i/.mbcf-unpacked" ] || exit 1
	echo "$i"
	exit 0
fi

say() { echo "prepare-newest-kernel: $*"; }
t0=$(date +%s)

# The suite's package lists, in the cache only (the host's apt sources and
# pins are untouched; this apt sees nothing installed).
aptd=$cache/apt
mkdir -p "$aptd/lists/partial" "$aptd/cache/archives/partial" "$aptd/empty.d" "$cache/debs"
echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $mirror $suite main" \
	>"$aptd/sources.list"
apt_opts=(
	-o "Dir::Etc::SourceList=$aptd/sources.list"
	-o "Dir::Etc::SourceParts=$aptd/empty.d"
	-o "Dir::Etc::Preferences=$aptd/empty.d/none"
	-o "Dir::Etc::PreferencesParts=$aptd/empty.d"
	-o "Dir::State::Lists=$aptd/lists"
	-o "Dir::Cache=$aptd/cache"
	-o "Dir::State::status=/dev/null"
	-o "APT::Sandbox::User=root"
	-o "Acquire::Languages=none"
)
if ! timeout "$tmo" apt-get -qq "${apt_opts[@]}" update; then
	if [ -f "$cache/newest/.mbcf-prepared" ]; then
		say "apt-get update for $suite failed; keeping $(readlink -f "$cache/newest")"
		exit 0
	fi
	say "apt-get update for $suite failed" >&2
	exit 1
fi

# The suite's kernel: the one its linux-headers-amd64 (the metapackage)
# names, linux-headers-<abi>-amd64, and the linux-source-X.Y of that series.
hdr_pkg=$(apt-cache "${apt_opts[@]}" depends linux-headers-amd64 |
	sed -n 's/^ *Depends: \(linux-headers-[0-9][^ ]*-amd64\)$/\1/p' | head -n1)
[ -n "$hdr_pkg" ] || { say "no linux-headers-amd64 in $suite" >&2; exit 1; }
series=$(printf '%s\n' "${hdr_pkg#linux-headers-}" | sed -n 's/^\([0-9]*\.[0-9]*\).*/\1/p')
src_pkg=linux-source-$series
ver=$(apt-cache "${apt_opts[@]}" show "$src_pkg" 2>/dev/null | sed -n 's/^Version: //p' | sort -V | tail -n1)
[ -n "$ver" ] || { say "no $src_pkg in $suite (for $hdr_pkg)" >&2; exit 1; }
hdr_ver=$(apt-cache "${apt_opts[@]}" show "$hdr_pkg" | sed -n 's/^Version: //p' | sort -V | tail -n1)
# One upload of Debian's linux: the config and Module.symvers are the source's.
[ "$hdr_ver" = "$ver" ] || { say "$src_pkg is $ver but $hdr_pkg is $hdr_ver in $suite" >&2; exit 1; }
release=${hdr_pkg#linux-headers-}
tree=$cache/linux-$release
stamp="$src_pkg $ver $hdr_pkg gcc=$(gcc -dumpfullversion)"

# The image and modules of $release: linux-image-$release and what of the
# same release it depends on, each unpacked with dpkg -x into $img.
img=$cache/image-$release
fetch_image() {
	local p v d=$cache/image-debs want=()
	[ "${MBCF_NEWEST_IMAGE:-1}" != 0 ] || return 0
	for p in "linux-image-$release" $(apt-cache "${apt_opts[@]}" depends "linux-image-$release" |
		sed -n "s/^ *Depends: \(linux-[a-z]*-$release\)\$/\1/p" | sort -u); do
		v=$(apt-cache "${apt_opts[@]}" show "$p" | sed -n 's/^Version: //p' | sort -V | tail -n1)
		[ -n "$v" ] || { say "no $p in $suite" >&2; return 1; }
		want+=("$p=$v")
	done
	if [ -f "$img/.mbcf-unpacked" ] && [ "$(cat "$img/.mbcf-unpacked")" = "${want[*]}" ]; then
		say "$img is unpacked (${want[*]})"
		return 0
	fi
	say "unpacking ${want[*]} into $img"
	rm -rf "$d" "$img" "$img.tmp"
	mkdir -p "$d" "$img.tmp"
	(cd "$d" && timeout "$tmo" apt-get -qq "${apt_opts[@]}" download "${want[@]}")
	for p in "$d"/*.deb; do
		timeout "$tmo" dpkg -x "$p" "$img.tmp"
	done
	rm -rf "$d"
	[ -r "$img.tmp/boot/vmlinuz-$release" ] || [ -r "$img.tmp/usr/lib/modules/$release/vmlinuz" ] ||
		{ say "no vmlinuz of $release in ${want[*]}" >&2; return 1; }
	[ -d "$img.tmp/lib/modules/$release/kernel" ] || [ -d "$img.tmp/usr/lib/modules/$release/kernel" ] ||
		{ say "no modules of $release in ${want[*]}" >&2; return 1; }
	echo "${want[*]}" >"$img.tmp/.mbcf-unpacked"
	for p in "$cache"/image-*; do
		[ "$p" = "$img.tmp" ] || [ ! -d "$p" ] || rm -rf "$p"
	done
	mv "$img.tmp" "$img"
}

if [ -f "$tree/.mbcf-prepared" ] && [ "$(cat "$tree/.mbcf-prepared")" = "$stamp" ]; then
	ln -sfn "linux-$release" "$cache/newest"
	say "$tree is prepared ($stamp; $(($(date +%s) - t0)) s)"
	fetch_image
	exit 0
fi

say "preparing $release from $src_pkg $ver ($suite) with gcc $(gcc -dumpfullversion)"
rm -rf "$cache/debs" "$tree" "$tree.tmp"
mkdir -p "$cache/debs"
(cd "$cache/debs" &&
	timeout "$tmo" apt-get -qq "${apt_opts[@]}" download "$src_pkg=$ver" "$hdr_pkg=$ver")
x=$cache/debs/x
dpkg -x "$cache/debs/${src_pkg}_"*.deb "$x"
dpkg -x "$cache/debs/${hdr_pkg}_"*.deb "$x"
mkdir -p "$tree.tmp"
timeout "$tmo" tar -xJf "$x/usr/src/$src_pkg.tar.xz" -C "$tree.tmp" --strip-components=1
h=$x/usr/src/$hdr_pkg
cp "$h/.config" "$tree.tmp/.config"
cp "$h/Module.symvers" "$tree.tmp/Module.symvers"
uts=$(sed -n 's/^#define UTS_RELEASE "\(.*\)"$/\1/p' "$h/include/generated/utsrelease.h")
[ "$uts" = "$release" ] || { say "$hdr_pkg says release '$uts'" >&2; exit 1; }

cd "$tree.tmp"
# Debian signs with keys of its own build (output/...); nothing is signed here.
scripts/config --disable MODULE_SIG_ALL --set-str MODULE_SIG_KEY certs/signing_key.pem \
	--set-str SYSTEM_TRUSTED_KEYS ""
unset MAKEFLAGS MFLAGS MAKELEVEL || true
timeout "$tmo" make -s olddefconfig
timeout "$tmo" make -s -j"$(nproc)" KERNELRELEASE="$release" modules_prepare
got=$(sed -n 's/^#define UTS_RELEASE "\(.*\)"$/\1/p' include/generated/utsrelease.h)
[ "$got" = "$release" ] || { say "prepared tree says release '$got'" >&2; exit 1; }
cd "$cache"
rm -rf "$cache/debs"
echo "$stamp" >"$tree.tmp/.mbcf-prepared"
# Drop trees of older releases, then publish the new one.
for old in "$cache"/linux-*; do
	[ "$old" = "$tree.tmp" ] || [ ! -d "$old" ] || rm -rf "$old"
done
mv "$tree.tmp" "$tree"
ln -sfn "linux-$release" "$cache/newest"
say "$tree prepared in $(($(date +%s) - t0)) s"
fetch_image
