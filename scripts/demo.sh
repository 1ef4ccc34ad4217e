#!/usr/bin/env bash
# The main job: install dependencies, build, boot a guest with two mbcf
# devices on a veth pair, and show them to verbs tools.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
scripts/build.sh
exec tests/vm/run.sh --build build tests/vm/demo.sh
