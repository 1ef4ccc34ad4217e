#!/usr/bin/env bash
# Host test pkg.dkms: the real dkms builds mbcf from the mbcf-dkms package's
# source tree, natively, for every installed kernel with headers (as the
# package's postinst has dkms do on a user's machine, minus the install):
# Debian's default kernel CMake builds the module for (KVER), and others
# such as bookworm-security's 6.12 (the compat probes run for each).
# vm.package does the whole dpkg -i / use / dpkg -r round in a guest, but
# its DKMS build under TCG takes 6-12 minutes: it runs when asked for
# (label dkms: scripts/test.sh -L dkms).  This catches in seconds what
# breaks that build: a source file the staging left out, dkms.conf, Kbuild,
# an API a kernel changed.
#   dkms-build.sh VERSION MBCF_DKMS_DEB KVER KO [REL=KDIR...]
# KVER: the kernel CMake builds the module for (its KVER); KO: that
# CMake-built mbcf.ko, whose vermagic and parameters the DKMS one must share.
# The kernels built for: KVER, every /lib/modules/REL/build, and each
# REL=KDIR given (a kernel build tree elsewhere, e.g. -DMBCF_EXTRA_KDIRS;
# dkms --kernelsourcedir).  Every DKMS-built module has KO's parameters.
# Nothing of the host changes: dkms's tree (and the signing key its first
# build makes) live on a tmpfs in a mount namespace of this test's own.
set -euo pipefail

[ $# -ge 4 ] || { echo "usage: dkms-build.sh VERSION MBCF_DKMS_DEB KVER KO [REL=KDIR...]" >&2; exit 2; }
version=$1
deb=$2
kver=$3
ko=$4
shift 4

if [ "$(id -u)" != 0 ] || ! command -v dkms >/dev/null || ! unshare -m true 2>/dev/null; then
	echo "SKIP: needs root, dkms (scripts/install-deps.sh) and unshare -m"
	exit 77
fi
[ -d "/lib/modules/$kver/build" ] || { echo "SKIP: no headers for $kver (linux-headers-amd64)"; exit 77; }

# The kernels: REL KDIR per line, KVER first, each release once.
kernels=$(
	{
		echo "$kver /lib/modules/$kver/build"
		for b in /lib/modules/*/build; do
			[ -f "$b/Makefile" ] || continue
			r=${b%/build}
			echo "${r##*/} $b"
		done
		for a in "$@"; do
			echo "${a%%=*} ${a#*=}"
		done
	} | awk '!seen[$1]++'
)

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
dpkg-deb -x "$deb" "$work/root"
src=$work/root/usr/src
[ -f "$src/mbcf-$version/dkms.conf" ] || { echo "FAIL: no usr/src/mbcf-$version/dkms.conf in $deb"; exit 1; }

# In the namespace: a private /var/lib/dkms; add, build for each kernel, report.
# shellcheck disable=SC2016
unshare -m --propagation private bash -euo pipefail -c '
	version=$1 src=$2 out=$3 kernels=$4
	mount -t tmpfs dkms-test /var/lib/dkms
	dkms add -m mbcf -v "$version" --sourcetree "$src"
	while read -r rel kdir; do
		opt=()
		[ "$kdir" -ef "/lib/modules/$rel/build" ] || opt=(--kernelsourcedir "$kdir")
		t0=$SECONDS
		dkms build -m mbcf -v "$version" -k "$rel" "${opt[@]}" || {
			tail -n 40 "/var/lib/dkms/mbcf/$version/build/make.log"
			echo "dkms build for $rel failed"
			exit 1
		}
		echo "dkms build for $rel: $((SECONDS - t0)) s"
		dkms status -m mbcf -v "$version" -k "$rel" >"$out/status.$rel"
		# DKMS compresses the module as the kernel does its own (6.12: .ko.xz)
		ko=/var/lib/dkms/mbcf/$version/$rel/$(uname -m)/module/mbcf.ko
		if [ -f "$ko" ]; then
			cp "$ko" "$out/mbcf-$rel.ko"
		elif [ -f "$ko.xz" ]; then
			xz -dc "$ko.xz" >"$out/mbcf-$rel.ko"
		elif [ -f "$ko.zst" ]; then
			zstd -qdc "$ko.zst" >"$out/mbcf-$rel.ko"
		else
			ls -l "${ko%/*}"
			echo "no mbcf.ko(.xz|.zst) from dkms for $rel"
			exit 1
		fi
	done <<<"$kernels"
' dkms-build "$version" "$src" "$work" "$kernels" >"$work/log" 2>&1 || {
	cat "$work/log"
	echo "FAIL: dkms add/build of mbcf $version"
	exit 1
}
sed 's/^/  dkms| /' "$work/log"

failed=0
expect() { # WHAT WANT GOT
	if [ "$2" = "$3" ]; then
		echo "ok: $1 = '$3'"
	else
		echo "FAIL: $1: expected '$2', got '$3'"
		failed=$((failed + 1))
	fi
}
parms=$(modinfo -F parm "$ko" | LC_ALL=C sort)
[ -n "$parms" ] || { echo "FAIL: no parameters in $ko"; failed=$((failed + 1)); }
while read -r rel kdir; do
	m=$work/mbcf-$rel.ko
	echo "-- $rel ($kdir)"
	expect "dkms status" "mbcf/$version, $rel, $(uname -m): built" "$(cat "$work/status.$rel")"
	expect "modinfo -F version of the DKMS-built mbcf.ko" "$version" "$(modinfo -F version "$m")"
	expect "its vermagic's kernel" "$rel" "$(modinfo -F vermagic "$m" | cut -d' ' -f1)"
	if [ "$rel" = "$kver" ]; then
		expect "vermagic of the DKMS-built and the CMake-built module" \
			"$(modinfo -F vermagic "$ko")" "$(modinfo -F vermagic "$m")"
	fi
	expect "module parameters (modinfo -F parm) of the two, as a digest" \
		"$(md5sum <<<"$parms")" "$(modinfo -F parm "$m" | LC_ALL=C sort | md5sum)"
done <<<"$kernels"
[ "$failed" = 0 ] || { echo "pkg.dkms: $failed check(s) failed"; exit 1; }
echo "pkg.dkms: all checks passed for $(wc -l <<<"$kernels") kernel(s)"
