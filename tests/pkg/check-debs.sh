#!/usr/bin/env bash
# Host test pkg.contents: the packages that `--target package` built hold
# exactly what they should, at the one project version.
#   check-debs.sh SRC DEBDIR VERSION [--ko MBCF_KO] [--dlopen-check PROG]
# SRC: the checkout (the module source the DKMS package must carry, byte for
# byte; the version script libmbcf.so.1 must export exactly); MBCF_KO: the module the CMake build made (its MODULE_VERSION);
# PROG: provider/dlopen-check.c, to load the packaged provider.
set -euo pipefail

src=$1
debdir=$2
version=$3
shift 3
ko=
dlopen_check=
while [ $# -gt 0 ]; do
	case $1 in
	--ko) ko=$2; shift 2 ;;
	--dlopen-check) dlopen_check=$2; shift 2 ;;
	*) echo "check-debs.sh: unknown argument $1" >&2; exit 2 ;;
	esac
done

arch=$(dpkg --print-architecture)
multiarch=$(dpkg-architecture -qDEB_HOST_MULTIARCH)
dkms_deb=$debdir/mbcf-dkms_${version}_all.deb
provider_deb=$debdir/libmbcf1_${version}_$arch.deb
dev_deb=$debdir/libmbcf-dev_${version}_$arch.deb
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

failed=0
ok() { echo "ok: $*"; }
fail() {
	echo "FAIL: $*"
	failed=$((failed + 1))
}
# expect_eq WHAT EXPECTED ACTUAL
expect_eq() {
	if [ "$2" = "$3" ]; then
		ok "$1 = '$3'"
	else
		fail "$1: expected '$2', got '$3'"
	fi
}
# expect_list WHAT EXPECTED_FILE ACTUAL_FILE: same lines (both sorted).
expect_list() {
	if diff -u "$2" "$3" >"$work/diff"; then
		ok "$1: exactly the $(wc -l <"$3") expected entries"
	else
		fail "$1 differs (- expected, + actual):"
		sed 's/^/    /' "$work/diff"
	fi
}
# with_parents: a sorted list of ./paths plus every parent directory (as
# tar lists them: "./dir/").
with_parents() {
	awk '{ print; p = $0; sub(/\/$/, "", p)
	       while (sub(/\/[^\/]*$/, "", p)) print p "/" }' | LC_ALL=C sort -u
}
deb_list() { dpkg-deb --fsys-tarfile "$1" | tar -t | LC_ALL=C sort; }

# --- the packages built, and their control fields ----------------------------
(cd "$debdir" && ls -1 ./*.deb | sed 's|^\./||' | LC_ALL=C sort) >"$work/debs"
printf '%s\n' "libmbcf1-dbgsym_${version}_$arch.deb" "libmbcf1_${version}_$arch.deb" \
	"libmbcf-dev_${version}_$arch.deb" "mbcf-dkms_${version}_all.deb" |
	LC_ALL=C sort >"$work/debs.want"
expect_list "packages in $debdir" "$work/debs.want" "$work/debs"
[ -f "$dkms_deb" ] && [ -f "$provider_deb" ] && [ -f "$dev_deb" ] ||
	{ echo "check-debs: packages missing"; exit 1; }

expect_eq "mbcf-dkms Version" "$version" "$(dpkg-deb -f "$dkms_deb" Version)"
expect_eq "libmbcf1 Version" "$version" "$(dpkg-deb -f "$provider_deb" Version)"
expect_eq "mbcf-dkms Architecture" all "$(dpkg-deb -f "$dkms_deb" Architecture)"
expect_eq "libmbcf1 Architecture" "$arch" "$(dpkg-deb -f "$provider_deb" Architecture)"
expect_eq "libmbcf1 Multi-Arch" same "$(dpkg-deb -f "$provider_deb" Multi-Arch)"
expect_eq "mbcf-dkms Depends" "dkms (>= 2.1.0.0)" "$(dpkg-deb -f "$dkms_deb" Depends)"
expect_eq "mbcf-dkms Recommends" libmbcf1 "$(dpkg-deb -f "$dkms_deb" Recommends)"
expect_eq "libmbcf1 Recommends" mbcf-dkms "$(dpkg-deb -f "$provider_deb" Recommends)"
expect_eq "libmbcf-dev Version" "$version" "$(dpkg-deb -f "$dev_deb" Version)"
expect_eq "libmbcf-dev Architecture" "$arch" "$(dpkg-deb -f "$dev_deb" Architecture)"
expect_eq "libmbcf-dev Multi-Arch" same "$(dpkg-deb -f "$dev_deb" Multi-Arch)"
expect_eq "libmbcf-dev Section" libdevel "$(dpkg-deb -f "$dev_deb" Section)"
expect_eq "libmbcf-dev Depends" "libibverbs-dev, libmbcf1 (= $version)" \
	"$(dpkg-deb -f "$dev_deb" Depends)"

# libmbcf1's Depends: libc6 and libibverbs1 only; libibverbs1 bounded to the
# releases with private ABI 34 (rdma-core 34 ... 56): the lower bound from
# libibverbs1's symbols file, the upper one from the build.
depends=$(dpkg-deb -f "$provider_deb" Depends)
names=$(tr ',' '\n' <<<"$depends" | awk '{ print $1 }' | LC_ALL=C sort -u | xargs)
expect_eq "libmbcf1 Depends packages" "libc6 libibverbs1" "$names"
upper=$(tr ',' '\n' <<<"$depends" | sed -n 's/^ *libibverbs1 (<< \(.*\))$/\1/p')
lower=$(tr ',' '\n' <<<"$depends" | sed -n 's/^ *libibverbs1 (>= \(.*\))$/\1/p')
expect_eq "libmbcf1 Depends libibverbs1 upper bound" "57~" "$upper"
if [ -n "$lower" ] && dpkg --compare-versions "$lower" ge 34 &&
	dpkg --compare-versions "$lower" le "$(dpkg-query -W -f '${Version}' libibverbs1)"; then
	ok "libmbcf1 Depends libibverbs1 (>= $lower): within [34, installed libibverbs1]"
else
	fail "libmbcf1 Depends: libibverbs1 lower bound '$lower' not in [34, installed] ($depends)"
fi

# --- libmbcf1: the library, the provider link to it, its driver file and
# mbcf.7, nothing else ----------------------------------------------------------
deb_list "$provider_deb" >"$work/provider.list"
with_parents >"$work/provider.want" <<EOF
./etc/libibverbs.d/mbcf.driver
./usr/lib/$multiarch/libibverbs/libmbcf-rdmav34.so
./usr/lib/$multiarch/libmbcf.so.1
./usr/lib/$multiarch/libmbcf.so.1.1.0
./usr/share/doc/libmbcf1/changelog.gz
./usr/share/doc/libmbcf1/copyright
./usr/share/man/man7/mbcf.7.gz
EOF
expect_list "libmbcf1 files" "$work/provider.want" "$work/provider.list"
dpkg-deb -x "$provider_deb" "$work/provider"
dpkg-deb -e "$provider_deb" "$work/provider.ctl"
expect_eq "libmbcf1 conffiles" /etc/libibverbs.d/mbcf.driver "$(cat "$work/provider.ctl/conffiles")"
expect_eq "mbcf.driver" "driver mbcf" "$(cat "$work/provider/etc/libibverbs.d/mbcf.driver")"
lib=$work/provider/usr/lib/$multiarch
so=$lib/libibverbs/libmbcf-rdmav34.so
# as rdma-core's providers: libibverbs/lib<name>-rdmav<ABI>.so -> ../lib<name>.so.1
expect_eq "provider link" ../libmbcf.so.1 "$(readlink "$so")"
expect_eq "libmbcf.so.1 link" libmbcf.so.1.1.0 "$(readlink "$lib/libmbcf.so.1")"
expect_eq "libmbcf.so.1.1.0 type" "regular file" "$(stat -c %F "$lib/libmbcf.so.1.1.0")"
expect_eq "provider NEEDED" "libc.so.6 libibverbs.so.1" \
	"$(objdump -p "$so" | awk '$1 == "NEEDED" { print $2 }' | LC_ALL=C sort | xargs)"
expect_eq "libmbcf.so.1 SONAME" libmbcf.so.1 "$(objdump -p "$so" | awk '$1 == "SONAME" { print $2 }')"
# The exports: exactly provider/libmbcf.map's, versioned; the package's
# symbols file lists exactly those (dpkg-gensymbols -c4 at build time too).
if out=$(cmake -DOBJDUMP=objdump -DLIB="$lib/libmbcf.so.1.1.0" -DPABI=34 \
	-DMAP="$src/provider/libmbcf.map" -DSONAME=libmbcf.so.1 \
	-P "$src/provider/check-symbols.cmake" 2>&1); then
	ok "libmbcf.so.1: SONAME and exports exactly provider/libmbcf.map's"
else
	fail "libmbcf.so.1 symbols: $out"
fi
sed -n 's/^ \([^ ]*@[^ ]*\) .*/\1/p' "$work/provider.ctl/symbols" | LC_ALL=C sort >"$work/symbols.deb"
objdump -T "$lib/libmbcf.so.1.1.0" | awk 'NF >= 2 && $(NF-1) ~ /^MBCF_/ { print $NF "@" $(NF-1) }' |
	LC_ALL=C sort >"$work/symbols.lib"
expect_list "libmbcf1 symbols file against the library's exports" "$work/symbols.lib" "$work/symbols.deb"
expect_eq "libmbcf1 symbols file header" "libmbcf.so.1 libmbcf1 #MINVER#" \
	"$(head -n 1 "$work/provider.ctl/symbols")"
expect_eq "libmbcf1 shlibs" "libmbcf 1 libmbcf1 (>= $version)" "$(cat "$work/provider.ctl/shlibs")"
expect_eq "libmbcf1 triggers" "activate-noawait ldconfig" "$(grep -v '^#' "$work/provider.ctl/triggers")"

# --- libmbcf-dev: header, .so link, pkg-config file, mbcfdv.3 -------------------
deb_list "$dev_deb" >"$work/dev.list"
with_parents >"$work/dev.want" <<EOF
./usr/include/infiniband/mbcfdv.h
./usr/lib/$multiarch/libmbcf.so
./usr/lib/$multiarch/pkgconfig/libmbcf.pc
./usr/share/doc/libmbcf-dev/changelog.gz
./usr/share/doc/libmbcf-dev/copyright
./usr/share/man/man3/mbcfdv.3.gz
EOF
expect_list "libmbcf-dev files" "$work/dev.want" "$work/dev.list"
dpkg-deb -x "$dev_deb" "$work/dev"
expect_eq "libmbcf.so link" libmbcf.so.1 "$(readlink "$work/dev/usr/lib/$multiarch/libmbcf.so")"
cmp -s "$src/provider/infiniband/mbcfdv.h" "$work/dev/usr/include/infiniband/mbcfdv.h" &&
	ok "usr/include/infiniband/mbcfdv.h is provider/infiniband/mbcfdv.h" ||
	fail "usr/include/infiniband/mbcfdv.h is not provider/infiniband/mbcfdv.h"
pc() { PKG_CONFIG_PATH=$work/dev/usr/lib/$multiarch/pkgconfig pkg-config "$@" libmbcf; }
expect_eq "libmbcf.pc --modversion" "$version" "$(pc --modversion)"
expect_eq "libmbcf.pc --libs" "-lmbcf -libverbs" "$(pc --libs | xargs)"
expect_eq "libmbcf.pc libdir" "/usr/lib/$multiarch" "$(pc --variable=libdir)"
expect_eq "libmbcf.pc includedir" /usr/include "$(pc --variable=includedir)"
if [ -n "$dlopen_check" ]; then
	if out=$("$dlopen_check" "$so" 2>&1); then
		ok "packaged provider loads with dlopen(RTLD_NOW) after libibverbs"
	else
		fail "packaged provider does not load: $out"
	fi
fi

# --- mbcf-dkms: the module source as the checkout has it, dkms.conf ------------
deb_list "$dkms_deb" >"$work/dkms.list"
{
	(cd "$src/kmod" && ls -1 ./*.c ./*.h ./Kbuild ./compat/probe.sh ./compat/dkms.mk ./compat/probes/*.c ./compat/required/*.c)
	(cd "$src" && ls -1 ./core/*.c ./core/*.h && find ./include -type f)
	echo ./mbcf-version.h
	echo ./dkms.conf
} | sed "s|^\./|./usr/src/mbcf-$version/|" >"$work/dkms.files"
{
	cat "$work/dkms.files"
	echo ./usr/share/doc/mbcf-dkms/changelog.gz
	echo ./usr/share/doc/mbcf-dkms/copyright
	echo ./usr/sbin/mbcf-links
	echo ./lib/systemd/system/mbcf-links.service
	echo ./etc/mbcf/links.conf
	echo ./usr/share/man/man8/mbcf-links.8.gz
} | with_parents >"$work/dkms.want"
expect_list "mbcf-dkms files" "$work/dkms.want" "$work/dkms.list"
dpkg-deb -x "$dkms_deb" "$work/dkms"
dpkg-deb -e "$dkms_deb" "$work/dkms.ctl"
tree=$work/dkms/usr/src/mbcf-$version
differ=0
for f in "$src"/kmod/*.c "$src"/kmod/*.h "$src"/kmod/Kbuild; do
	cmp -s "$f" "$tree/${f##*/}" || { fail "${f#"$src"/} differs in the package"; differ=1; }
done
for f in "$src"/kmod/compat/probe.sh "$src"/kmod/compat/dkms.mk "$src"/kmod/compat/probes/*.c "$src"/kmod/compat/required/*.c; do
	rel=${f#"$src"/kmod/}
	cmp -s "$f" "$tree/$rel" || { fail "${f#"$src"/} differs in the package"; differ=1; }
done
for f in "$src"/core/*.[ch] $(cd "$src" && find include -type f); do
	f=${f#"$src"/}
	cmp -s "$src/$f" "$tree/$f" || { fail "$f differs in the package"; differ=1; }
done
[ "$differ" = 0 ] && ok "module sources in mbcf-dkms are the checkout's, byte for byte"
expect_eq "mbcf-version.h MBCF_VERSION" "\"$version\"" \
	"$(awk '$1 == "#define" && $2 == "MBCF_VERSION" { print $3 }' "$tree/mbcf-version.h")"
dkms_var() { sed -n "s/^$1=\"\(.*\)\"\$/\1/p" "$tree/dkms.conf"; }
expect_eq "dkms.conf PACKAGE_NAME" mbcf "$(dkms_var PACKAGE_NAME)"
expect_eq "dkms.conf PACKAGE_VERSION" "$version" "$(dkms_var PACKAGE_VERSION)"
expect_eq "dkms.conf AUTOINSTALL" yes "$(dkms_var AUTOINSTALL)"
# The maintainer scripts dh_dkms wrote: dkms add/build/install on configure
# (for every kernel with headers), dkms remove on remove.
expect_eq "mbcf-dkms postinst: common.postinst for mbcf $version" 1 \
	"$(grep -c "^DKMS_VERSION=$version\$" "$work/dkms.ctl/postinst")"
expect_eq "mbcf-dkms postinst: all kernels" 1 \
	"$(grep -c '^	autoinstall_all_kernels=yes$' "$work/dkms.ctl/postinst")"
expect_eq "mbcf-dkms prerm: dkms remove" 1 \
	"$(grep -c 'dkms remove -m $DKMS_NAME -v $DKMS_VERSION --all' "$work/dkms.ctl/prerm")"

# Boot persistence: the tool, its unit (enabled and started by the
# maintainer scripts dh_installsystemd wrote) and the config, a conffile.
for f in usr/sbin/mbcf-links lib/systemd/system/mbcf-links.service etc/mbcf/links.conf; do
	cmp -s "$src/tools/${f##*/}" "$work/dkms/$f" || fail "$f is not tools/${f##*/}"
done
expect_eq "mbcf-links mode" "-rwxr-xr-x" "$(stat -c %A "$work/dkms/usr/sbin/mbcf-links")"
expect_eq "mbcf-dkms conffiles" /etc/mbcf/links.conf "$(cat "$work/dkms.ctl/conffiles")"
expect_eq "mbcf-dkms postinst: mbcf-links.service enabled" 1 \
	"$(grep -c "deb-systemd-helper enable 'mbcf-links.service'" "$work/dkms.ctl/postinst")"

# --- the module the CMake build made carries the same version -------------------
if [ -n "$ko" ]; then
	expect_eq "modinfo -F version ${ko##*/}" "$version" "$(modinfo -F version "$ko")"
fi

echo "check-debs: $failed failed"
[ "$failed" = 0 ]
