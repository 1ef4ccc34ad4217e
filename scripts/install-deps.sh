#!/usr/bin/env bash
# Install everything mbcf needs on a fresh Debian 12 machine (run as root).
# Idempotent: packages already present are skipped by apt; the rdma-core
# source package is fetched once into the build cache by CMake, not here.
set -euo pipefail

export DEBIAN_FRONTEND=noninteractive

# rdma-core's private provider headers come from Debian's source package,
# so deb-src must be enabled (Debian 12 ships deb822 sources).
src=/etc/apt/sources.list.d/debian.sources
if [ -f "$src" ] && ! grep -q '^Types:.*deb-src' "$src"; then
	sed -i 's/^Types: deb$/Types: deb deb-src/' "$src"
fi
# The provider's builds for newer rdma-core releases (-DMBCF_RDMA_CORE_SUITE=,
# the "abi" test label) take trixie's and unstable's rdma-core source package
# through a private apt state in their build dir (cmake/fetch-rdma-core.sh):
# no suite is added here, and they need no package beyond the ones below.

pkgs=(
	# build
	build-essential cmake ninja-build pkg-config python3 dpkg-dev
	googletest libgtest-dev libbenchmark-dev clang libclang-rt-14-dev
	# kernel module: Debian's kernel and matching headers (guest kernel)
	linux-image-amd64 linux-headers-amd64 kmod dkms
	# BTF of modules built for kernels with vmlinux BTF (6.12's headers)
	pahole
	# the kernel's static checker (test kmod.sparse); systemd-analyze
	# (test tools.unit-verify)
	sparse systemd
	# rdma user space
	rdma-core ibverbs-utils libibverbs-dev ibverbs-providers perftest
	rdmacm-utils iproute2 python3-pyverbs
	# multi-queue veth with NAPI for the ordering test (tests/vm/multiqueue.sh)
	ethtool
	# verbs software the guest tests run unmodified: qperf,
	# UCX, Open MPI over UCX, libfabric's verbs provider
	qperf ucx-utils openmpi-bin libopenmpi-dev libfabric-bin
	# kernel consumers over fast registration (tests/vm/nvmeof.sh,
	# tests/vm/nfsrdma.sh: nfsd's rpc.nfsd/rpc.mountd/exportfs, mount.nfs,
	# rpcbind; tests/vm/iser.sh: open-iscsi's iscsid and iscsiadm)
	nvme-cli fio nfs-kernel-server nfs-common rpcbind open-iscsi
	# Debian packages (cmake --build build --target package): debhelper,
	# dh_dkms (its own package since dkms 3.0.3), lintian for the checks
	debhelper dh-dkms lintian
	# guest rig
	qemu-system-x86 busybox-static cpio
	# debug-kernel lane (tests/vm/debug-kernel.sh): Debian's kernel source
	# and what building it needs
	linux-source-6.1 flex bison bc libelf-dev libssl-dev xz-utils
	# baselines for bench/ (sockperf: TCP's half round trip, also in
	# bench/run.sh --icount); valgrind's callgrind: bench/callgrind-core.sh
	sockperf iperf3 python3-matplotlib valgrind
)

# More kernels to build (and boot) the module for: Debian 12's
# bookworm-security ships Linux 6.12 (linux-headers-6.12-amd64 depends on
# linux-image-6.12...: both are installed).  They are never the default:
# builds and guests take Debian's default kernel (linux-image-amd64's,
# 6.1.0-N; scripts/default-kver.sh) unless asked for (kmod.build-6.12).
#   MBCF_EXTRA_KERNELS="6.12" (default; "" for none)
extra_kernels=${MBCF_EXTRA_KERNELS-6.12}
if [ -n "$extra_kernels" ] &&
	! grep -rqsE '^[^#]*[[:space:]]bookworm-security([[:space:]]|$)' \
		/etc/apt/sources.list /etc/apt/sources.list.d/; then
	# Debian 12's own security suite, in a file of its own, pinned low:
	# only packages bookworm lacks (the 6.12 kernel) come from it, ordinary
	# installs and upgrades still resolve to bookworm.
	cat >/etc/apt/sources.list.d/mbcf-bookworm-security.sources <<'SRC'
Types: deb
URIs: http://deb.debian.org/debian-security
Suites: bookworm-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC
	cat >/etc/apt/preferences.d/mbcf-bookworm-security <<'PIN'
Package: *
Pin: release n=bookworm-security
Pin-Priority: 100
PIN
	apt-get update -qq
fi
for v in $extra_kernels; do
	pkgs+=("linux-headers-$v-amd64")
done

need=()
for p in "${pkgs[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || need+=("$p")
done
if [ "${#need[@]}" -gt 0 ]; then
	apt-get update -qq
	apt-get install -y -qq --no-install-recommends "${need[@]}"
fi

# The newest kernel Debian packages (unstable), compiled for by
# kmod.build-newest and booted by label k<MAJOR.MINOR> (k7.2): its
# linux-source and Debian's config, prepared with gcc-12, and its image
# and modules, all unpacked (never installed) under /var/tmp/mbcf-kernels
# (scripts/prepare-newest-kernel.sh: 1.5-4 min cold, 12-50 s when current).
# A failure (no network) leaves those tests skipped, not the install failed.
#   MBCF_NEWEST_KERNEL=0 skips it; MBCF_NEWEST_IMAGE=0 skips the image.
if [ "${MBCF_NEWEST_KERNEL:-1}" != 0 ]; then
	"$(dirname "${BASH_SOURCE[0]}")/prepare-newest-kernel.sh" ||
		echo "install-deps: the newest kernel is not (all) there; kmod.build-newest or its k<mm> label will be skipped" >&2
fi
