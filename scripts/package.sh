#!/usr/bin/env bash
# The packages: install dependencies (Debian 12, root), configure build/ and
# build the Debian packages mbcf-dkms and libmbcf1 into build/deb/ (see
# README.md, "Install").  The package build does not need the rest of the
# build, only its configure (the version, the fetched rdma-core source).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
scripts/install-deps.sh
cmake -S . -B build
cmake --build build --target package
