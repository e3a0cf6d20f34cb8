#!/usr/bin/env bash
# Configure and build libcacheblend, Release by default, into ${BUILD_DIR:-build} (relative paths
# are taken from the repository root). Arguments go to the cmake configure step, e.g.
#   BUILD_DIR=build-asan bash scripts/build.sh -DCBL_SANITIZE=address,undefined
# BUILD_TYPE overrides the configuration. Targets to build (default: all) go after `--`:
#   BUILD_DIR=build-tsan bash scripts/build.sh -DCBL_SANITIZE=thread -- test_capi_threads
# Idempotent: a second run only rebuilds what changed.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

build_dir=${BUILD_DIR:-build}
cmake_args=()
targets=()
while (($#)); do
  if [[ $1 == -- ]]; then shift; targets=("$@"); break; fi
  cmake_args+=("$1")
  shift
done
cmake -S . -B "$build_dir" -DCMAKE_BUILD_TYPE="${BUILD_TYPE:-Release}" "${cmake_args[@]}"
if ((${#targets[@]})); then
  cmake --build "$build_dir" -j "$(nproc)" --target "${targets[@]}"
else
  cmake --build "$build_dir" -j "$(nproc)"
fi
