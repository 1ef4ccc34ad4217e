#!/usr/bin/env bash
# Manual check (docs/packaging.md, "From any checkout"): everything a new user runs
# first, from a fresh clone under /tmp.  Too long for the test suite (a full
# build, the demo guest, the unit tests with the packages, two guest tests);
# vm.tmp-checkout covers the rig's part of it automatically.
#   tests/pkg/clone-check.sh [REPO]     REPO: default this checkout (its HEAD:
#                                       commit first)
# Leaves the clone for inspection if anything fails, removes it otherwise.
set -euo pipefail

repo=${1:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
clone=$(mktemp -d /tmp/mbcf-clone.XXXXXX)
git clone -q "$repo" "$clone"
cd "$clone"
echo "clone-check: $(git log -1 --format='%h %s') in $clone"

step() { # step NAME CMD...: run, time, and stop at the first failure
	local name=$1 t0=$SECONDS
	shift
	echo "clone-check: === $name"
	if ! "$@"; then
		echo "clone-check: FAIL: $name (after $((SECONDS - t0)) s); the clone stays in $clone"
		exit 1
	fi
	echo "clone-check: ok: $name ($((SECONDS - t0)) s)"
}
step "scripts/demo.sh" scripts/demo.sh
step "scripts/test.sh -L unit" scripts/test.sh -L unit
step "guest tests" scripts/test.sh -R '^vm\.(smoke|tmp-checkout)$'
echo "clone-check: all passed from $clone in $SECONDS s"
cd /
rm -rf "$clone"
