#!/usr/bin/env bash
# Fuzzes ksweep's parsers (tests/fuzz: the TOML configuration, CSV surveys, SEG-Y gathers and
# wavelet traces, text wavelets, observed.h5's datasets) with libFuzzer under AddressSanitizer and
# UBSan, for SECONDS per target (default 10; CI runs the default).
#   scripts/fuzz.sh [SECONDS] [TARGET ...]     targets: config survey segy wavelet records_h5
# The corpus grows in build-fuzz/corpus/<target> (kept between runs); an input that crashes a
# parser, or makes it throw anything but ksweep::Error, is kept in build-fuzz/findings/ and the
# script exits 1. Inputs that once did so live in tests/fuzz/regressions/<target> and are run
# first, every time.
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${KSWEEP_FUZZ_BUILD_DIR:-$repo/build-fuzz}
seconds=${1:-10}
shift || true
targets=("$@")
[ "${#targets[@]}" -gt 0 ] || targets=(config survey segy wavelet records_h5)
bash "$repo/scripts/setup.sh" >/dev/null  # the Debian packages (clang-14 and libFuzzer among them)
cmake -S "$repo/tests/fuzz" -B "$build" -G Ninja -DCMAKE_CXX_COMPILER=clang++-14 -DCMAKE_C_COMPILER=clang-14 \
  >/dev/null
cmake --build "$build" -j "$(nproc)"
mkdir -p "$build/findings"
# The SEG-Y seed, written by segyio (Python): three traces of one shot, as ksweep writes them.
mkdir -p "$build/corpus/segy"
/usr/bin/python3 - "$build/corpus/segy/seed.segy" <<'PY'
import sys
import numpy as np
import segyio
spec = segyio.spec()
spec.format, spec.samples, spec.tracecount, spec.sorting = 5, list(range(10)), 3, None
with segyio.create(sys.argv[1], spec) as f:
    f.bin.update(hns=10, hdt=2000)
    for i in range(3):
        f.header[i] = {segyio.su.fldr: 1, segyio.su.tracf: i + 1, segyio.su.sx: 100000, segyio.su.gx: 200000 + 10000 * i,
                       segyio.su.scalco: -1000, segyio.su.scalel: -1000, segyio.su.sdepth: 10000,
                       segyio.su.gelev: -20000}
        f.trace[i] = np.arange(10, dtype=np.float32) * (i + 1)
PY
for t in "${targets[@]}"; do
  [ -x "$build/fuzz_$t" ] || { echo "fuzz: no target '$t' (allowed: config survey segy wavelet records_h5)" >&2; exit 2; }
done
# One target's run: the regressions, then SECONDS of fuzzing; its summary in findings/<target>.out
# and exit status 1 on a finding.
fuzz_one() {
  local t=$1 bin="$build/fuzz_$1" corpus="$build/corpus/$1" log="$build/findings/$1.log" rc=0
  mkdir -p "$corpus"
  if [ -d "$repo/tests/fuzz/regressions/$t" ]; then
    "$bin" "$repo/tests/fuzz/regressions/$t"/* >/dev/null 2>&1 || { echo "fuzz_$t: a regression input fails again"; rc=1; }
  fi
  local seeds=()
  [ -d "$repo/tests/fuzz/seeds/$t" ] && seeds=("$repo/tests/fuzz/seeds/$t")
  if "$bin" -max_total_time="$seconds" -print_final_stats=1 -artifact_prefix="$build/findings/$t-" \
      "$corpus" "${seeds[@]}" >"$log" 2>&1; then
    local runs cov
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
    cov=$(grep -o 'cov: [0-9]*' "$log" | tail -n 1)
    echo "fuzz_$t: ${runs:-?} inputs in ${seconds} s, ${cov:-cov: ?} edges, no finding"
  else
    echo "fuzz_$t: FINDING (see $log and $build/findings/$t-*)"
    tail -n 30 "$log"
    rc=1
  fi
  return $rc
}
# The targets run side by side, one per core (each fuzzer is one process on one core).
status=0
jobs=$(nproc)
for ((i = 0; i < ${#targets[@]}; i += jobs)); do
  pids=()
  for t in "${targets[@]:i:jobs}"; do
    fuzz_one "$t" >"$build/findings/$t.out" 2>&1 &
    pids+=("$!:$t")
  done
  for p in "${pids[@]}"; do
    rc=0
    wait "${p%%:*}" || rc=$?
    t=${p#*:}
    if [ "$rc" -eq 0 ]; then cat "$build/findings/$t.out"; else cat "$build/findings/$t.out" >&2; status=1; fi
  done
done
exit $status
