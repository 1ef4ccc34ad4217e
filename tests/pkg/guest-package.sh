#!/bin/bash
# Guest test vm.package: the Debian packages are the only source of mbcf.
# The guest boots with nothing of the build installed (run.sh --no-install
# --no-topology); it has the host's kernel headers and dkms.
#   1. dpkg -i the three packages: DKMS builds and installs the module here
#      (and tries every installed kernel: a second one without headers is
#      skipped); exactly the expected files appear;
#   2. modprobe mbcf, rdma link add (lib.sh's topology), ibv_devices lists
#      mbcf0, a perftest run and ibv_rc_pingpong -c pass; versions agree; a
#      program built with `pkg-config --cflags --libs libmbcf` makes a FIFO
#      on mbcf0, binds the packaged libmbcf.so.1 and maps it once (the
#      provider libibverbs loads is the same file);
#   3. dpkg -r all: the libraries first (ibv_devices no longer loads the
#      provider while mbcf0 still exists), then the module: gone, nothing left behind but
#      the conffile /etc/libibverbs.d/mbcf.driver, which Debian keeps until
#      purge; 4. dpkg -P: not even that.
# "Nothing left behind" is read off the overlay's upper dir, which records
# every path the guest added to or removed from the host's root under
# /usr/lib (= /lib), /etc/libibverbs.d, /usr/src and /var/lib/dkms.
#   tests/vm/run.sh --no-install --no-topology tests/pkg/guest-package.sh \
#       VERSION MBCF_DKMS_DEB LIBMBCF_DEB LIBMBCF_DEV_DEB
set -u
# shellcheck source=../vm/lib.sh
. "$MBCF_VM_LIB"

[ $# = 4 ] || vm_die "usage: guest-package.sh VERSION MBCF_DKMS_DEB LIBMBCF_DEB LIBMBCF_DEV_DEB"
version=$1
dkms_deb=$2
provider_deb=$3
dev_deb=$4
kver=$(uname -r)
multiarch=$(dpkg-architecture -qDEB_HOST_MULTIARCH)
export DEBIAN_FRONTEND=noninteractive
failed=0
check() { "$@" || failed=$((failed + 1)); }

# changes: what the guest added ("A path") to or removed ("D path") from the
# host's root in the watched trees; files changed in place (module index)
# are not listed.  Read from the overlay's upper dir: a full listing of
# /usr/lib takes minutes under TCG.
upper=/run/overlay/upper
changes() {
	local p
	(cd "$upper" && find usr/lib etc/libibverbs.d usr/src var/lib/dkms 2>/dev/null) |
		while IFS= read -r p; do
			if [ -c "$upper/$p" ] && [ ! -e "/$p" ]; then
				echo "D /$p" # whiteout
			elif [ ! -e "/run/host/$p" ] && [ ! -L "/run/host/$p" ]; then
				echo "A /$p"
			fi
		done | LC_ALL=C sort
}
# devices: the verbs devices ibv_devices lists (its stderr, with the rig's
# IBV_SHOW_WARNINGS=1, in $work/ibv.err).
work=$(mktemp -d)
devices() {
	ibv_devices 2>"$work/ibv.err" | awk 'NR > 2 { print $1 }' | LC_ALL=C sort | xargs
}
# dkms_key: dkms's own module signing key, which its first build makes
# (unless the host has one) and keeps for every module: dkms's, not ours.
dkms_key() {
	local f
	for f in /var/lib/dkms/mok.key /var/lib/dkms/mok.pub; do
		[ -e "/run/host$f" ] || echo "A $f"
	done
}
status_of() { dpkg-query -W -f '${db:Status-Abbrev}' "$1" 2>/dev/null | xargs; }

# man-db's trigger re-indexes every manual page over 9p (minutes under TCG)
# for mbcf.7; Debian's switch for that (debconf man-db/auto-update) is this
# file, and the index is not under test.
rm -f /var/lib/man-db/auto-update

# depmod, which DKMS runs at install and again at removal, reads every module
# of the kernel: 4023 files, 391 MiB over 9p, ~100 s each time under TCG.
# This guest loads a handful: a tmpfs over kernel/ holds those and what they
# need (the closure modprobe computes), and the crypto, arch and lib modules
# the kernel loads by name on its own (rxe's "crypto-crc32"), so depmod's
# index differs only in modules no step here loads.  It is not part of the
# overlay's upper dir: changes() below does not see it.
kmods=/lib/modules/$kver/kernel
mkdir -p /run/kmods
{
	{
		cut -d' ' -f1 /proc/modules
		echo veth rdma_rxe ib_uverbs ib_core
	} | xargs modprobe -a --show-depends 2>/dev/null | awk '$1 == "insmod" { print $2 }'
	find "$kmods/crypto" "$kmods/arch" "$kmods/lib" -name '*.ko*'
} | LC_ALL=C sort -u | sed -n "s|^$kmods/||p" >"$work/kept"
# one cp for them all: each exec costs ~0.5 s under TCG
(cd "$kmods" && xargs -d '\n' cp --parents -t /run/kmods <"$work/kept") ||
	vm_die "copying the kept modules"
nkept=$(find /run/kmods -name '*.ko*' | wc -l)
[ "$nkept" -ge 100 ] || vm_die "kept only $nkept modules for the pruned tree"
mount --bind /run/kmods "$kmods" || vm_die "bind mount over $kmods"
vm_log "modules visible to depmod: $nkept (of $(wc -l <"/lib/modules/$kver/modules.dep"))"

[ "$(status_of mbcf-dkms)$(status_of libmbcf1)$(status_of libmbcf-dev)" = "" ] ||
	vm_die "mbcf packages already installed"
# On another stock kernel (VM_EXTRA_KERNEL) the rig's kernel dir brings the
# build's mbcf.ko in extra/ (tests/vm/kernel-dir.sh), in the overlay: this
# test starts from a kernel without it.
if [ -n "${VM_EXTRA_KERNEL:-}" ] && [ -e "/lib/modules/$kver/extra/mbcf.ko" ]; then
	rm -f "/lib/modules/$kver/extra/mbcf.ko" || vm_die "cannot remove the rig's mbcf.ko"
fi
vm_have_mbcf && vm_die "an mbcf module is installed before the packages"
# A second installed kernel, without headers: the postinst must consider it
# (every installed kernel, not dkms's default of the running and the newest).
other_kver=0.0.0-mbcf-test
mkdir "/lib/modules/$other_kver"
changes >"$work/before"
vm_log "changes before install: $(grep -c . "$work/before")"

# --- 1. install -------------------------------------------------------------
vm_phase "dpkg -i $(basename "$dkms_deb") $(basename "$provider_deb") $(basename "$dev_deb")"
t0=$EPOCHREALTIME
dpkg -i "$dkms_deb" "$provider_deb" "$dev_deb" >"$work/dpkg-i.log" 2>&1
rc=$?
t_install=$(vm_elapsed_since "$t0")
sed 's/^/  dpkg| /' "$work/dpkg-i.log" | grep -v 'Reading database'
# dkms keeps the build's log here once the build is done.
make_log=/var/lib/dkms/mbcf/$version/$kver/$(uname -m)/log/make.log
if [ -f "$make_log" ]; then
	t_build=$(($(stat -c %Y "$make_log") - $(date -d "$(sed -n 2p "$make_log")" +%s)))
	vm_log "DKMS build of mbcf.ko under TCG: ${t_build} s (make.log); dpkg -i of the packages: $t_install s"
fi
assert_eq 0 "$rc" "dpkg -i status" || {
	tail -n 30 "$make_log" /var/lib/dkms/mbcf/"$version"/build/make.log 2>/dev/null
	vm_die "installing the packages failed"
}
check assert_eq 1 "$(grep -c "^Module build for kernel $other_kver was skipped since the$" "$work/dpkg-i.log")" \
	"postinst tried the other installed kernel, $other_kver (no headers: skipped)"
check assert_eq "ii" "$(status_of mbcf-dkms)" "mbcf-dkms status"
check assert_eq "ii" "$(status_of libmbcf1)" "libmbcf1 status"
check assert_eq "ii" "$(status_of libmbcf-dev)" "libmbcf-dev status"
check assert_eq "$version $version $version" \
	"$(dpkg-query -W -f '${Version} ' mbcf-dkms libmbcf1 libmbcf-dev | xargs)" "installed versions"
# DKMS builds for every installed kernel with headers (the host's 6.1 and
# 6.12 both have them), each module compressed as that kernel's own are
# (6.12: xz), which DKMS reads from its modules.dep.
with_headers=$(cd /lib/modules && for k in *; do
	[ -f "$k/build/Makefile" ] && echo "$k"
done | LC_ALL=C sort)
ko_ext() { # KVER: the suffix DKMS gives modules built for KVER
	local d=/lib/modules/$1/modules.dep e=
	grep -q '\.gz:' "$d" 2>/dev/null && e=.gz
	grep -q '\.xz:' "$d" 2>/dev/null && e=.xz
	grep -q '\.zst:' "$d" 2>/dev/null && e=.zst
	echo "$e"
}
check assert_eq "$(for k in $with_headers; do echo "mbcf/$version, $k, $(uname -m): installed"; done)" \
	"$(dkms status mbcf | LC_ALL=C sort)" "dkms status (every kernel with headers)"

ko=/lib/modules/$kver/updates/dkms/mbcf.ko$(ko_ext "$kver")
check assert_eq "$ko" "$(modinfo -n mbcf)" "modinfo -n mbcf"
check assert_eq "$version" "$(modinfo -F version mbcf)" "modinfo -F version mbcf"

# Exactly the module for each kernel with headers (with its two new
# directories), the provider, its driver file, the boot unit (mbcf-links),
# and the DKMS source tree as packaged.
{
	cat "$work/before"
	for k in $with_headers; do
		echo "A /usr/lib/modules/$k/updates"
		echo "A /usr/lib/modules/$k/updates/dkms"
		echo "A /usr/lib/modules/$k/updates/dkms/mbcf.ko$(ko_ext "$k")"
	done
	echo "A /usr/lib/systemd/system/mbcf-links.service"
	echo "A /usr/lib/$multiarch/libibverbs/libmbcf-rdmav34.so"
	echo "A /usr/lib/$multiarch/libmbcf.so.1"
	echo "A /usr/lib/$multiarch/libmbcf.so.1.1.0"
	echo "A /usr/lib/$multiarch/libmbcf.so"
	echo "A /usr/lib/$multiarch/pkgconfig/libmbcf.pc"
	echo "A /etc/libibverbs.d/mbcf.driver"
	dpkg -L mbcf-dkms | grep "^/usr/src/mbcf-$version" | sed 's/^/A /'
} | LC_ALL=C sort >"$work/want"
changes | grep -v '^A /var/lib/dkms' >"$work/now"
if diff -u "$work/want" "$work/now" >"$work/diff"; then
	echo "ok: installed exactly the module, libmbcf.so.1 and its provider and .so links, libmbcf.pc, mbcf.driver and /usr/src/mbcf-$version ($(grep -c . "$work/now") changes)"
else
	failed=$((failed + 1))
	echo "FAIL: files after dpkg -i differ (- expected, + found):"
	sed 's/^/    /' "$work/diff"
fi

# --- 2. use it ----------------------------------------------------------------
vm_phase "topology: modprobe mbcf, rdma link add mbcf0/mbcf1"
vm_topology || vm_die "topology"
vm_require_mbcf
check assert_eq "$version" "$(cat /sys/module/mbcf/version)" "/sys/module/mbcf/version"
check assert_eq "$version" "$(cat /sys/class/infiniband/mbcf0/fw_ver)" "mbcf0 fw_ver"
check assert_eq "mbcf0 mbcf1 rxe0" "$(devices)" "ibv_devices"

# ib_write_bw, server on mbcf0, client on mbcf1 in ns1 (as perftest.sh; a run
# whose clock calibration failed on the loaded host reports 0 and is rerun).
perf_ok=0
for attempt in 1 2 3; do
	timeout 60 ib_write_bw -d mbcf0 -x 0 -F -s 65536 -n 200 >"$work/srv" 2>&1 &
	spid=$!
	out=$(vm_retry 30 0.2 in_ns1 timeout 60 ib_write_bw -d mbcf1 -x 0 -F -s 65536 -n 200 "$VM_IP0" 2>&1)
	rc=$?
	wait "$spid" || rc=1
	row=$(awk '$1 == 65536 && $2 == 200 { print; exit }' <<<"$out")
	if [ "$rc" = 0 ] && awk '{ exit !($4 > 0) }' <<<"$row"; then
		perf_ok=1
		echo "ok: ib_write_bw 64 KiB mbcf1 -> mbcf0: $(awk '{ print $4 }' <<<"$row") MB/s"
		break
	fi
	grep -q 'Correlation coefficient r^2' <<<"$out" || break
	echo "note: ib_write_bw could not calibrate its clock (attempt $attempt), rerun"
done
if [ "$perf_ok" = 0 ]; then
	failed=$((failed + 1))
	echo "FAIL: ib_write_bw rc=$rc row='$row'"
	printf '%s\n' "$out" | tail -n 8 | sed 's/^/  client| /'
	tail -n 8 "$work/srv" | sed 's/^/  server| /'
fi
timeout 60 ibv_rc_pingpong -d mbcf0 -g 0 -s 4096 -n 50 -c >"$work/srv" 2>&1 &
spid=$!
out=$(vm_retry 30 0.2 in_ns1 timeout 60 ibv_rc_pingpong -d mbcf1 -g 0 -s 4096 -n 50 -c "$VM_IP0" 2>&1)
rc=$?
wait "$spid" || rc=1
check assert_eq "0 1" "$rc $(grep -c '^50 iters in ' <<<"$out")" \
	"ibv_rc_pingpong -c 4096 B (status, result lines)"

# A program of the direct verbs, built as its users build theirs (libmbcf-dev:
# pkg-config), binds the packaged libmbcf.so.1 (Debian 12 has merged /usr:
# ldconfig's cache may name it under /lib) and finds it mapped once: the
# provider libibverbs opened through libibverbs/libmbcf-rdmav34.so is that
# same file.
cat >"$work/dv.c" <<'EOF'
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <infiniband/mbcfdv.h>

int main(void)
{
	struct ibv_device **l = ibv_get_device_list(NULL);
	struct ibv_context *ctx = NULL;
	struct mbcfdv_fifo *f;
	struct ibv_pd *pd;
	char line[512];
	void *mem;
	FILE *m;

	for (int i = 0; l && l[i] && !ctx; i++)
		if (!strcmp(ibv_get_device_name(l[i]), "mbcf0"))
			ctx = ibv_open_device(l[i]);
	if (!ctx || !(pd = ibv_alloc_pd(ctx)) || posix_memalign(&mem, 64, 128 + 4096))
		return 1;
	f = mbcfdv_create_fifo(pd, mem, 128 + 4096, MBCFDV_FIFO_SIGNAL);
	if (!f || mbcfdv_fifo_event_fd(f) < 0) {
		printf("mbcfdv_create_fifo: %s\n", strerror(errno));
		return 1;
	}
	printf("fifo size %u\n", f->size);
	m = fopen("/proc/self/maps", "r");
	while (m && fgets(line, sizeof(line), m))
		if (strstr(line, "libmbcf"))
			printf("maps %s", strchr(line, '/'));
	return mbcfdv_destroy_fifo(f) || ibv_dealloc_pd(pd) || ibv_close_device(ctx);
}
EOF
# shellcheck disable=SC2046 # pkg-config's words
cc -o "$work/dv" "$work/dv.c" $(pkg-config --cflags --libs libmbcf) 2>&1
check assert_eq "-lmbcf -libverbs" "$(pkg-config --libs libmbcf | xargs)" "pkg-config --libs libmbcf"
lib=$(ldd "$work/dv" | awk '$1 == "libmbcf.so.1" { print $3 }')
case $lib in
"/usr/lib/$multiarch/libmbcf.so.1" | "/lib/$multiarch/libmbcf.so.1")
	echo "ok: the program binds $lib" ;;
*)
	failed=$((failed + 1))
	echo "FAIL: the program binds libmbcf.so.1 at '$lib', not /usr/lib/$multiarch (or /lib/$multiarch)" ;;
esac
out=$("$work/dv" 2>&1)
rc=$?
printf '%s\n' "$out" | sed 's/^/  dv| /'
check assert_eq "0 fifo size 4096" "$rc $(grep '^fifo ' <<<"$out")" "mbcfdv program on mbcf0 (status, FIFO)"
maps=$(sed -n 's/^maps //p' <<<"$out" | LC_ALL=C sort -u | xargs)
case $maps in
"/usr/lib/$multiarch/libmbcf.so.1.1.0" | "/lib/$multiarch/libmbcf.so.1.1.0")
	echo "ok: one libmbcf mapped: $maps" ;;
*)
	failed=$((failed + 1))
	echo "FAIL: libmbcf files mapped: '$maps', expected libmbcf.so.1.1.0 once" ;;
esac

# --- 3. remove: the libraries first, while mbcf0 and mbcf1 still exist ----------
vm_phase "dpkg -r libmbcf-dev libmbcf1"
dpkg -r libmbcf-dev libmbcf1 >"$work/dpkg-r.log" 2>&1
# libmbcf1 keeps its conffile (mbcf.driver) until purge; libmbcf-dev has
# none, so it is gone at once.
check assert_eq "0 rc " "$? $(status_of libmbcf1) $(status_of libmbcf-dev)" \
	"dpkg -r libmbcf-dev libmbcf1 (status, package states: libmbcf1 config-files, libmbcf-dev gone)"
check assert_eq "rxe0" "$(devices)" "ibv_devices without the provider"
check assert_match "couldn't load driver 'libmbcf-rdmav34.so'" "$(cat "$work/ibv.err")" \
	"libibverbs' warning (mbcf.driver is a conffile, kept until purge)"

vm_phase "rdma link delete, modprobe -r mbcf, dpkg -r mbcf-dkms"
rdma link delete mbcf0 && in_ns1 rdma link delete mbcf1 && modprobe -r mbcf
check assert_eq "0 " "$? $(cat /sys/module/mbcf/version 2>/dev/null)" "mbcf unloaded"
dpkg -r mbcf-dkms >>"$work/dpkg-r.log" 2>&1
check assert_eq "0 rc" "$? $(status_of mbcf-dkms)" "dpkg -r mbcf-dkms (status, package state: /etc/mbcf/links.conf is a conffile, kept until purge)"
sed 's/^/  dpkg| /' "$work/dpkg-r.log" | grep -v 'Reading database'
check assert_eq "" "$(dkms status mbcf)" "dkms status after removal"
modprobe mbcf 2>/dev/null
check assert_eq 1 "$?" "modprobe mbcf status after removal"
modinfo mbcf >/dev/null 2>&1
check assert_eq 1 "$?" "modinfo mbcf status after removal"
{
	cat "$work/before"
	echo "A /etc/libibverbs.d/mbcf.driver"
	dkms_key
} | LC_ALL=C sort >"$work/want"
changes >"$work/now"
if diff -u "$work/want" "$work/now" >"$work/diff"; then
	echo "ok: after dpkg -r only the conffile mbcf.driver is left (and dkms's signing key)"
else
	failed=$((failed + 1))
	echo "FAIL: files after dpkg -r differ (- expected, + found):"
	sed 's/^/    /' "$work/diff"
fi

# --- 4. purge -------------------------------------------------------------------
vm_phase "dpkg -P libmbcf-dev libmbcf1 mbcf-dkms"
dpkg -P libmbcf-dev libmbcf1 mbcf-dkms >"$work/dpkg-p.log" 2>&1
check assert_eq "0 " "$? $(status_of libmbcf-dev)$(status_of libmbcf1)$(status_of mbcf-dkms)" \
	"dpkg -P (status, package states)"
{
	cat "$work/before"
	dkms_key
} | LC_ALL=C sort >"$work/want"
changes >"$work/now"
if diff -u "$work/want" "$work/now" >"$work/diff"; then
	echo "ok: after dpkg -P the watched trees are as before the install (but for dkms's signing key)"
else
	failed=$((failed + 1))
	echo "FAIL: files after dpkg -P differ from before the install (- expected, + found):"
	sed 's/^/    /' "$work/diff"
fi
check assert_eq "rxe0" "$(devices)" "ibv_devices after purge"
check assert_eq 0 "$(grep -c mbcf "$work/ibv.err")" "libibverbs lines about mbcf after purge"

vm_dmesg_check || failed=$((failed + 1))
echo "package: $failed failed"
[ "$failed" = 0 ]
