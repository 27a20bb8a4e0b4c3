#!/usr/bin/env bash
# Configures and builds ksweep in build/ (or $KSWEEP_BUILD_DIR) after installing what it needs.
#   scripts/build.sh [extra cmake arguments]
# KSWEEP_CMAKE_ARGS (environment): more cmake arguments, for scripts that call this one.
# KSWEEP_BUILD_TARGETS (environment): the targets to build (default: all), e.g. "ksweep" for
#   the program alone (scripts/demo.sh); the configuration is the same, so that a later full
#   build reuses what this one built.
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${KSWEEP_BUILD_DIR:-$repo/build}
prefix=$(bash "$repo/scripts/setup.sh" | tail -n 1)
jobs=$(nproc 2>/dev/null || echo 2)
cmake -S "$repo" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=${CMAKE_BUILD_TYPE:-Release} \
  -DCMAKE_PREFIX_PATH="$prefix" ${KSWEEP_CMAKE_ARGS:-} "$@" >/dev/null
targets=()
for t in ${KSWEEP_BUILD_TARGETS:-}; do targets+=(--target "$t"); done
cmake --build "$build" -j "$jobs" "${targets[@]}"
