#!/usr/bin/env bash
# Builds ksweep and runs the whole test suite (unit tests on every backend, end-to-end runs of
# the program with mpirun, benchmark smoke tests).
#   scripts/test.sh                 # everything
#   scripts/test.sh -LE bench       # extra ctest arguments, e.g. skip the benchmark smoke tests
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${KSWEEP_BUILD_DIR:-$repo/build}
bash "$repo/scripts/build.sh"
# One test at a time (each OpenMP test uses both cores), then the one-thread end-to-end cases
# labelled `pairs` two at a time.
ctest --test-dir "$build" --output-on-failure --timeout 900 -LE pairs "$@"
ctest --test-dir "$build" --output-on-failure --timeout 900 -L pairs -j 2 "$@"
