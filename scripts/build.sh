#!/usr/bin/env bash
# Install dependencies (Debian 12, root) and build everything into build/.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
scripts/install-deps.sh
cmake -S . -B build
cmake --build build -j"$(nproc)"
