#!/usr/bin/env bash
# Configure and build libcacheblend, Release by default, into ${BUILD_DIR:-build} (relative paths
# are taken from the repository root). Arguments go to the cmake configure step, e.g.
#   BUILD_DIR=build-asan bash scripts/build.sh -DCBL_SANITIZE=address,undefined
# BUILD_TYPE overrides the configuration. Idempotent: a second run only rebuilds what changed.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

build_dir=${BUILD_DIR:-build}
cmake -S . -B "$build_dir" -DCMAKE_BUILD_TYPE="${BUILD_TYPE:-Release}" "$@"
cmake --build "$build_dir" -j "$(nproc)"
