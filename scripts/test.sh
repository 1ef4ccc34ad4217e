#!/usr/bin/env bash
# The test command: install dependencies, build, and run every test under
# ctest: host unit tests (sanitizers), a bounded fuzz run, and the guest
# (QEMU) end-to-end tests with the real module and real libibverbs.
#   scripts/test.sh [ctest args...]     e.g. scripts/test.sh -L unit
# Three lanes run only when asked for: the debug-kernel lane (label "debug":
# the guest tests again under KASAN, lockdep and kmemleak; a ~30 min kernel
# build on a cold cache, then each test several times slower than on the
# stock kernel: tests/vm/README.md), `scripts/test.sh -L debug`; and
# vm.package (label "dkms": DKMS builds the module in the guest, 6-12 min
# of compiling under TCG; pkg.dkms builds it natively in every run),
# `scripts/test.sh -L dkms`; and the whole guest suite on another stock
# kernel (label all-6.12: bookworm-security's 6.12; its subset k6.12 runs
# by default), `scripts/test.sh -L '^all-6.12$'`.  Without a label option of
# the caller's (-L/-LE/--label-regex/--label-exclude) or a test regex naming
# "debug", "package" or "all-", ctest gets -LE '^(debug|dkms|all-.*)$'.  The "abi" label (the provider
# built against rdma-core 56.1 and 65 from Debian's source packages,
# tests/provider/abi; vm.abi_newest needs it) runs by default.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
scripts/build.sh
cd build

caller_selects=0
prev=
for a in "$@"; do
	case "$a" in
	-L | -LE | --label-regex | --label-exclude | -L?* | --label-regex=* | --label-exclude=*)
		caller_selects=1 ;;
	esac
	case "$prev" in
	-R | --tests-regex) [[ $a == *debug* || $a == *package* || $a == *all-* ]] && caller_selects=1 ;;
	esac
	prev=$a
done
filter=()
[ "$caller_selects" = 1 ] || filter=(-LE '^(debug|dkms|all-.*)$')
ctest --output-on-failure "${filter[@]}" "$@"
