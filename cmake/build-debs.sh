#!/usr/bin/env bash
# build-debs.sh SRC OUT VERSION [RDMA_CORE_SOURCE]
#
# The `package` target (cmake/MbcfPackaging.cmake): build the Debian
# packages mbcf-dkms and libmbcf1 from debian/ with dpkg-buildpackage and
# leave them in OUT.
#
# dpkg-buildpackage writes into the tree it builds (debian/tmp, debian/<pkg>,
# its CMake build dir) and puts the .debs in that tree's parent, so it runs
# on a copy staged in OUT, never in the checkout.  The copy holds what the
# packages are built from; examples, tests and benchmarks stay out.
#
# VERSION is CMake's project version: debian/changelog, which gives every
# package its version, is generated from debian/changelog.in with it.
# RDMA_CORE_SOURCE, if given, is the rdma-core tree the calling build already
# fetched (cmake/RdmaCoreProvider.cmake): the package build configures the
# provider against it instead of fetching it again.
set -euo pipefail

[ $# -ge 3 ] || { echo "usage: build-debs.sh SRC OUT VERSION [RDMA_CORE_SOURCE]" >&2; exit 2; }
src=$1
out=$2
version=$3
rdma_core=${4:-}

tree=$out/mbcf-$version
mkdir -p "$out"
# Results of an earlier run, so that OUT holds exactly this run's packages.
rm -rf "$out"/mbcf-*/ "$out"/*.deb "$out"/*.ddeb "$out"/*.buildinfo "$out"/*.changes
mkdir "$tree"
cp -a "$src"/CMakeLists.txt "$src"/README.md "$src"/cmake "$src"/core \
	"$src"/include "$src"/kmod "$src"/provider "$src"/tools "$src"/debian "$tree"/

# The changelog entry records where the packages came from; its date is the
# commit's (or CMakeLists.txt's) so that rebuilding the same tree gives the
# same SOURCE_DATE_EPOCH.
if origin=$(git -C "$src" describe --always --dirty 2>/dev/null); then
	origin="git $origin"
	date=$(git -C "$src" log -1 --format=%cD)
else
	origin="a source tree outside git"
	date=$(date -R -r "$src/CMakeLists.txt")
fi
sed -e "s|@VERSION@|$version|g" -e "s|@ORIGIN@|$origin|g" -e "s|@DATE@|$date|g" \
	"$tree/debian/changelog.in" >"$tree/debian/changelog"
rm "$tree/debian/changelog.in"

log=$out/dpkg-buildpackage.log
echo "build-debs: dpkg-buildpackage in $tree (log: $log)"
if ! (cd "$tree" && MBCF_RDMA_CORE_SOURCE=$rdma_core \
	dpkg-buildpackage --build=binary --no-sign -j"$(nproc)") >"$log" 2>&1; then
	tail -n 40 "$log" >&2
	echo "build-debs: dpkg-buildpackage failed; full log in $log" >&2
	exit 1
fi
(cd "$out" && ls -1 ./*.deb) | sed "s|^\./|build-debs: $out/|"
