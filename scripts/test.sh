#!/usr/bin/env bash
# The test command: install dependencies, build, and run every test under
# ctest: host unit tests (sanitizers), a bounded fuzz run, and the guest
# (QEMU) end-to-end tests with the real module and real libibverbs.
#   scripts/test.sh [ctest args...]     e.g. scripts/test.sh -L unit
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
scripts/build.sh
cd build
ctest --output-on-failure "$@"
