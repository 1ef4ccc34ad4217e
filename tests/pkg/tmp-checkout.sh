#!/usr/bin/env bash
# Host test vm.tmp-checkout: the guest rig run from a checkout under /tmp,
# installing a build dir that is also under /tmp but outside the checkout.
# The guest's /tmp is its own tmpfs, so this works only through the rig's
# shares of both at their own paths.
#   tmp-checkout.sh SRC [CONSOLE_LOG]
# The "checkout" is a copy of SRC's rig (tests/vm, tests/pkg and
# scripts/default-kver.sh: all the rig reads from a checkout) plus a random
# token file; the build dir is a small
# CMake project whose install puts the same token under /usr/local.
set -euo pipefail

src=$1
log=${2:-}
command -v qemu-system-x86_64 >/dev/null || { echo "SKIP: no qemu-system-x86_64"; exit 77; }

top=$(mktemp -d /tmp/mbcf-tmp-checkout.XXXXXX)
trap 'rm -rf "$top"' EXIT
co=$top/checkout
build=$top/build
mkdir -p "$co/tests" "$co/scripts" "$top/project"
cp -a "$src/tests/vm" "$src/tests/pkg" "$co/tests/"
cp -a "$src/scripts/default-kver.sh" "$co/scripts/"
token=$(od -An -tx8 -N8 /dev/urandom | tr -d ' ')
echo "$token" >"$co/token"
cat >"$top/project/CMakeLists.txt" <<'CMAKE'
cmake_minimum_required(VERSION 3.20)
project(mbcf_tmp_checkout NONE)
file(WRITE "${CMAKE_BINARY_DIR}/token" "${TOKEN}\n")
install(FILES "${CMAKE_BINARY_DIR}/token" DESTINATION share/mbcf-tmp-checkout)
CMAKE
cmake -S "$top/project" -B "$build" -DTOKEN="$token" -DCMAKE_INSTALL_PREFIX=/usr/local >/dev/null

rc=0
"$co/tests/vm/run.sh" --build "$build" --no-topology --timeout 600 \
	${log:+--keep-log "$log"} \
	"$co/tests/pkg/guest-tmp-checkout.sh" "$co" "$build" "$token" || rc=$?
# What the guest wrote into the checkout stayed in its overlay.
if [ -e "$co/written-by-guest" ]; then
	echo "FAIL: the guest's write reached the host's checkout"
	rc=1
else
	echo "ok: the guest's write into the checkout did not reach the host"
fi
exit "$rc"
