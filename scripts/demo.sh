#!/usr/bin/env bash
# The main job: install dependencies, build, boot a guest with two mbcf
# devices on a veth pair, and show them to verbs tools.  It builds only what
# the guest installs and runs (the module and the provider: target
# mbcf_runtime); scripts/test.sh builds everything.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
scripts/build.sh mbcf_runtime
exec tests/vm/run.sh --build build tests/vm/demo.sh
