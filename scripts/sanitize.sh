#!/usr/bin/env bash
# Builds the unit tests with AddressSanitizer + UndefinedBehaviorSanitizer (Serial backend
# binary) and runs them.
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${KSWEEP_SAN_BUILD_DIR:-$repo/build-asan}
prefix=$(bash "$repo/scripts/setup.sh" | tail -n 1)
# UBSan's arithmetic checks (signed overflow, shifts, division by zero, array bounds, bool and enum
# loads, a missing return, unreachable code) stay on. Its checks on every member access (null,
# alignment, vptr, object-size) and every pointer increment (pointer-overflow) are left to ASan,
# which checks every load and store against its object's bounds and reports a null dereference:
# they took 40 % of these units' compile time (tst_gradient: 162 s against 95 s, AMD EPYC).
flags="-fsanitize=address,undefined -fno-sanitize=null,alignment,vptr,object-size,pointer-overflow"
flags+=" -fno-omit-frame-pointer -fno-sanitize-recover=undefined"
# -O1: what the sanitizers' documentation advises (readable reports), and a quicker compile.
# -g1: line tables (file and line in every frame of a report) without the variables' debug
# information, which takes a third of the compile time of these translation units.
cmake -S "$repo" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG="-O1 -g1" \
  -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_CXX_FLAGS="$flags" -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=address,undefined" \
  -DKSWEEP_ENABLE_BENCHMARKS=OFF -DKSWEEP_ENABLE_DRIVERS=OFF -DKSWEEP_ENABLE_PYTHON=OFF -DKSWEEP_TESTS_ALL_HEADERS=ON \
  -DKSWEEP_TESTS_SMALL=ON >/dev/null
cmake --build "$build" -j "$(nproc)" --target ksweep_tests_serial
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:strict_string_checks=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
# KSWEEP_TESTS_SMALL: the cases on large grids (KSWEEP_LARGE_TEST: the 3D physics, boundary
# against full and lossy codecs in 3D, the 3D and realistic schedule comparisons, the example-size
# case, the variable-density physics) are not built; the small cases (dot products, finite
# differences, schedules, blocks of y) run the same indexing under the sanitizers. The
# dot-product checks run at orders 2 and 8 (the smallest and the largest reach; the release
# build runs every order).
# The Serial program runs on one core: its tests are split into one shard per core (gtest's
# sharding), run side by side; each shard's output is printed whole, and any failing shard fails.
shards=$(nproc)
pids=()
for ((i = 0; i < shards; ++i)); do
  GTEST_TOTAL_SHARDS=$shards GTEST_SHARD_INDEX=$i "$build/tests/ksweep_tests_serial" >"$build/shard-$i.log" 2>&1 &
  pids+=($!)
done
status=0
for ((i = 0; i < shards; ++i)); do
  rc=0
  wait "${pids[$i]}" || rc=$?
  echo "== ksweep_tests_serial shard $((i + 1)) of $shards (exit $rc)"
  cat "$build/shard-$i.log"
  [ "$rc" -eq 0 ] || status=1
done
exit $status
