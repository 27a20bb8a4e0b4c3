#!/usr/bin/env bash
# Builds ksweep_bench if needed, runs it on every enabled backend with OMP_NUM_THREADS threads
# (default 2), times the Deepwave peer when it is importable (the 2-D Marmousi batch and the 3-D
# cubes, scripts/peer_deepwave.py [--dim 3]), and regenerates
# docs/benchmarks/REPORT.md.
#
#   scripts/run_benchmarks.sh
#
# Environment:
#   KSWEEP_BENCH_BUILD     build folder (default <repo>/build-bench; configured with
#                          -DKSWEEP_ENABLE_BENCHMARKS=ON if it has no ksweep_bench target)
#   CMAKE_PREFIX_PATH      where Kokkos is (default: what scripts/setup.sh prints)
#   OMP_NUM_THREADS        threads of the OpenMP backend (default 2)
#   KSWEEP_BENCH_BACKENDS  backends to run (default: every backend ksweep_bench reports)
#   KSWEEP_BENCH_FILTER    extra regex on benchmark names, e.g. 'forward|stream' (default all)
#   KSWEEP_BENCH_MIN_TIME  --benchmark_min_time in seconds (default 0.1)
#   KSWEEP_BENCH_DEEPWAVE3D  0: skip the 3-D Deepwave peer runs (default 1)
# Run it on a quiet machine: the report records the load average next to each run.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${KSWEEP_BENCH_BUILD:-$repo/build-bench}
out=$repo/docs/benchmarks
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}
export OMP_PROC_BIND=${OMP_PROC_BIND:-false}
min_time=${KSWEEP_BENCH_MIN_TIME:-0.1}
filter=${KSWEEP_BENCH_FILTER:-.*}
python=/usr/bin/python3
host=$(hostname -s 2>/dev/null || hostname)

if [ ! -f "$build/build.ninja" ] && [ ! -f "$build/Makefile" ]; then
  cmake -S "$repo" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_PREFIX_PATH="${CMAKE_PREFIX_PATH:-$(bash "$repo/scripts/setup.sh" | tail -n 1)}" -DKSWEEP_ENABLE_BENCHMARKS=ON
else
  cmake "$build" -DKSWEEP_ENABLE_BENCHMARKS=ON >/dev/null
fi
cmake --build "$build" --target ksweep_bench
bench=$build/bench/ksweep_bench

mkdir -p "$out"
if [ -n "${KSWEEP_BENCH_BACKENDS:-}" ]; then
  read -r -a backends <<<"$KSWEEP_BENCH_BACKENDS"
else
  # Backends that registered benchmarks: the second field of the names.
  mapfile -t backends < <("$bench" --benchmark_list_tests=true --benchmark_filter='^stream_triad/' 2>/dev/null | cut -d/ -f2 | sort -u)
fi

jsons=()
for b in "${backends[@]}"; do
  json=$out/$host-$(echo "$b" | tr '[:upper:]' '[:lower:]').json
  echo "== $b -> $json (OMP_NUM_THREADS=$OMP_NUM_THREADS, load: $(cut -d' ' -f1-3 /proc/loadavg))"
  "$bench" --benchmark_filter="^($filter)/$b/" --benchmark_min_time="$min_time" \
    --benchmark_out="$json" --benchmark_out_format=json
  jsons+=("$json")
done

# The peer comparison's cases on one thread as well (OpenMP backend).
if [[ " ${backends[*]} " == *" OpenMP "* ]] && [ "$OMP_NUM_THREADS" != 1 ]; then
  json=$out/$host-openmp-1thread.json
  echo "== OpenMP, 1 thread, marmousi cases -> $json (load: $(cut -d' ' -f1-3 /proc/loadavg))"
  OMP_NUM_THREADS=1 "$bench" --benchmark_filter="^marmousi/OpenMP/" --benchmark_min_time="$min_time" \
    --benchmark_out="$json" --benchmark_out_format=json
  jsons+=("$json")
fi

# MPI all-reduce of model-sized gradients over 1-4 ranks (one thread per rank).
if [ -x "$build/bench/ksweep_bench_mpi" ] || cmake --build "$build" --target ksweep_bench_mpi >/dev/null 2>&1; then
  for n in 1 2 3 4; do
    json=$out/$host-allreduce-$n.json
    OMP_NUM_THREADS=1 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
      mpirun -n "$n" --oversubscribe "$build/bench/ksweep_bench_mpi" \
      --benchmark_out="$json" --benchmark_out_format=json >/dev/null
    jsons+=("$json")
  done
fi

# A model split into domains: the halo exchange and the split forward step on 1, 2 and 4 ranks
# (one thread per rank; 4 ranks oversubscribe a 2-core machine).
if [ -x "$build/bench/ksweep_bench_domains" ] || cmake --build "$build" --target ksweep_bench_domains >/dev/null 2>&1; then
  for n in 1 2 4; do
    json=$out/$host-domains-$n.json
    OMP_NUM_THREADS=1 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
      mpirun -n "$n" --oversubscribe "$build/bench/ksweep_bench_domains" \
      --benchmark_out="$json" --benchmark_out_format=json >/dev/null
    jsons+=("$json")
  done
fi

# Deepwave on the same cases, in the same run, with the same thread counts (when importable).
for t in $(printf '%s\n' "$OMP_NUM_THREADS" 1 | sort -u); do
  peer=$out/$host-deepwave-${t}thread.json
  "$python" "$repo/scripts/peer_deepwave.py" --threads "$t" --out "$peer" || echo "peer_deepwave.py failed: report without it"
  [ -f "$peer" ] && jsons+=("$peer")
done
# ... and its Born modelling (scalar_born) against ksweep's, same process (needs the ksweep package
# on PYTHONPATH too; about 1 min with 2 threads).
peer=$out/$host-deepwave-born-${OMP_NUM_THREADS}thread.json
PYTHONPATH="$build/python${PYTHONPATH:+:$PYTHONPATH}" "$python" "$repo/scripts/peer_deepwave_born.py" \
  --threads "$OMP_NUM_THREADS" --out "$peer" || echo "peer_deepwave_born.py failed: report without it"
[ -f "$peer" ] && jsons+=("$peer")
# ... and on the 3D cubes of the cube3d benchmarks (N = 48 and 128, orders 4 and 8; about 15 min
# with 2 threads and twice that with 1 on a quiet 2-core machine; KSWEEP_BENCH_DEEPWAVE3D=0 skips it).
for t in $( [ "${KSWEEP_BENCH_DEEPWAVE3D:-1}" = 0 ] || printf '%s\n' "$OMP_NUM_THREADS" 1 | sort -u); do
  peer=$out/$host-deepwave3d-${t}thread.json
  "$python" "$repo/scripts/peer_deepwave.py" --dim 3 --threads "$t" --out "$peer" || echo "peer_deepwave.py --dim 3 failed: report without it"
  [ -f "$peer" ] && jsons+=("$peer")
done

"$python" "$repo/scripts/bench_report.py" "${jsons[@]}" --out "$out"
