#!/usr/bin/env bash
# Host test pkg.dkms: the real dkms builds mbcf from the mbcf-dkms package's
# source tree, natively, for the kernel CMake builds the module for (KVER):
# what the package's postinst has dkms do on a user's machine, minus the
# install.
# vm.package does the whole dpkg -i / use / dpkg -r round in a guest, but
# its DKMS build under TCG takes 6-12 minutes: it runs when asked for
# (label dkms: scripts/test.sh -L dkms).  This catches in seconds what
# breaks that build: a source file the staging left out, dkms.conf, Kbuild.
#   dkms-build.sh VERSION MBCF_DKMS_DEB KVER KO
# KVER: the kernel CMake builds the module for (its KVER); KO: that
# CMake-built mbcf.ko, whose vermagic and parameters the DKMS one must share.
# Nothing of the host changes: dkms's tree (and the signing key its first
# build makes) live on a tmpfs in a mount namespace of this test's own.
set -euo pipefail

[ $# = 4 ] || { echo "usage: dkms-build.sh VERSION MBCF_DKMS_DEB KVER KO" >&2; exit 2; }
version=$1
deb=$2
kver=$3
ko=$4

if [ "$(id -u)" != 0 ] || ! command -v dkms >/dev/null || ! unshare -m true 2>/dev/null; then
	echo "SKIP: needs root, dkms (scripts/install-deps.sh) and unshare -m"
	exit 77
fi
[ -d "/lib/modules/$kver/build" ] || { echo "SKIP: no headers for $kver (linux-headers-amd64)"; exit 77; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
dpkg-deb -x "$deb" "$work/root"
src=$work/root/usr/src
[ -f "$src/mbcf-$version/dkms.conf" ] || { echo "FAIL: no usr/src/mbcf-$version/dkms.conf in $deb"; exit 1; }

# In the namespace: a private /var/lib/dkms; add, build, report.
# shellcheck disable=SC2016
unshare -m --propagation private bash -euo pipefail -c '
	kver=$1 version=$2 src=$3 out=$4
	mount -t tmpfs dkms-test /var/lib/dkms
	dkms add -m mbcf -v "$version" --sourcetree "$src"
	dkms build -m mbcf -v "$version" -k "$kver" || {
		tail -n 40 "/var/lib/dkms/mbcf/$version/build/make.log"
		exit 1
	}
	dkms status -m mbcf -v "$version" -k "$kver" >"$out/status"
	cp "/var/lib/dkms/mbcf/$version/$kver/$(uname -m)/module/mbcf.ko" "$out/mbcf.ko"
' dkms-build "$kver" "$version" "$src" "$work" >"$work/log" 2>&1 || {
	cat "$work/log"
	echo "FAIL: dkms add/build of mbcf $version for $kver"
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
expect "dkms status" "mbcf/$version, $kver, $(uname -m): built" "$(cat "$work/status")"
expect "modinfo -F version of the DKMS-built mbcf.ko" "$version" "$(modinfo -F version "$work/mbcf.ko")"
expect "its vermagic's kernel" "$kver" "$(modinfo -F vermagic "$work/mbcf.ko" | cut -d' ' -f1)"
expect "vermagic of the DKMS-built and the CMake-built module" \
	"$(modinfo -F vermagic "$ko")" "$(modinfo -F vermagic "$work/mbcf.ko")"
parms=$(modinfo -F parm "$ko" | LC_ALL=C sort)
[ -n "$parms" ] || { echo "FAIL: no parameters in $ko"; failed=$((failed + 1)); }
expect "module parameters (modinfo -F parm) of the two, as a digest" \
	"$(md5sum <<<"$parms")" "$(modinfo -F parm "$work/mbcf.ko" | LC_ALL=C sort | md5sum)"
[ "$failed" = 0 ] || { echo "pkg.dkms: $failed check(s) failed"; exit 1; }
echo "pkg.dkms: all checks passed"
