#!/usr/bin/env bash
# Builds ksweep and runs the whole test suite (unit tests on every backend, end-to-end runs of
# the program with mpirun, benchmark smoke tests).
#   scripts/test.sh                 # everything
#   scripts/test.sh -LE bench       # extra ctest arguments, e.g. skip the benchmark smoke tests
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${KSWEEP_BUILD_DIR:-$repo/build}
bash "$repo/scripts/build.sh"
# Tests that use both cores (the OpenMP unit tests, Python, multi-rank runs) declare PROCESSORS 2
# and run alone; ctest runs two one-thread end-to-end cases side by side.
ctest --test-dir "$build" --output-on-failure --timeout 900 -j "$(nproc)" "$@"
