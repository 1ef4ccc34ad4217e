#!/usr/bin/env bash
# Install dependencies (Debian 12, root) and build into build/: everything,
# or only the CMake targets named.
#   scripts/build.sh                 everything (scripts/test.sh)
#   scripts/build.sh mbcf_runtime    the module and the provider (scripts/demo.sh)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
scripts/install-deps.sh
cmake -S . -B build
targets=()
for t in "$@"; do
	targets+=(--target "$t")
done
cmake --build build -j"$(nproc)" "${targets[@]}"
