#!/usr/bin/env bash
# The prepared check of a CUDA build on a GPU machine (about 6 minutes on one H100 or H200), and
# its dry run on the OpenMP backend of a CPU build, which runs the same steps against the same
# reference files.
#
#   scripts/device_check.sh [--dry-run] [--out DIR] [step ...]   # steps: unit fwi domains python bench
#   scripts/device_check.sh --make-reference                     # rewrite the CPU references
#   scripts/device_check.sh --list-targets                       # what to build for it
#   scripts/device_check.sh --pack                               # fill .device/ (below) to carry
#
# Steps (all by default, in this order):
#   unit     the backend's unit tests (ksweep_tests_cuda; in the dry run ksweep_tests_openmp),
#            the modelling's state tests (ksweep_tests_state: states and arrays in the device's
#            memory, which a CUDA build moves through host copies), and the communicator and the
#            domain split's tests on 2 MPI ranks;
#   fwi      share/examples/marmousi_25m.toml, 3 iterations, on 1, 2 and 4 ranks (sharing the one
#            GPU), and on 1 and 2 ranks with the runs of steps replayed as CUDA graphs
#            (KSWEEP_CUDA_GRAPHS=1): each run's loss history and the SHA-256 of its final model
#            equal to each other and to the OpenMP results in tests/reference/device_check.json;
#   domains  the same inversion with parallel.domains=[2] on 2 ranks (the shipped fp16 storage),
#            the halo exchange overlapped with the inner cells (KSWEEP_OVERLAP=1) and not (0):
#            equal to one domain (the fwi step's reference);
#   python   the README's Python example (forward, gradient, a short Inversion) through the
#            package, and ksweep.torch.forward with its gradient and ksweep.scalar cut in two
#            (its states in and out) on CUDA tensors used in place (where the machine's torch has
#            CUDA; every result must stay on the GPU): equal to the references;
#   bench    the GPU benchmarks (ksweep_bench --benchmark_filter=/Cuda/, Deepwave's deepwave/Cuda
#            rows too where KSWEEP_DEEPWAVE_LIB is set) into
#            docs/benchmarks/<gpu>-cuda.json, where scripts/bench_report.py reads them (the dry run:
#            the OpenMP ones at smoke sizes, into the results folder).
# Each step prints one line, "device_check: <step> PASS|FAIL <seconds> s  <detail>"; the results
# go to DIR/results.json and the programs' output to DIR/log.txt (DIR: --out, default
# .out/device_check/cuda or .out/device_check/dry-run). The exit status is 0 when every step
# passed.
#
# --make-reference runs the fwi and python steps on the OpenMP build and
# writes their results to tests/reference/device_check.json: run it after a change that changes
# the bits (storage codecs, the absorbing layer, the stencils) and commit the file.
#
# Environment:
#   KSWEEP_CHECK_BUILD    build folder (default build-cuda; build with --dry-run/--make-reference)
#   KSWEEP_CHECK_PYTHON   Python with numpy and h5py, the one the package was built for
#                         (default /usr/bin/python3 where it has numpy, else python3)
#   KSWEEP_CHECK_MPIRUN   MPI launcher (default mpirun); Open MPI's root and oversubscribe flags
#                         are added
#   KSWEEP_CHECK_UNIT_FILTER  gtest filter of the unit step (default: every test on the GPU; the
#                         dry run: a short selection)
#   KSWEEP_CHECK_THREADS  OMP_NUM_THREADS of each rank (default: the cores / ranks, at least 1)
#   KSWEEP_DEEPWAVE_LIB   a Deepwave libdeepwave_C.so with its CUDA functions (optional): the
#                         bench step then runs the deepwave rows beside ksweep's marmousi rows
#   KSWEEP_MARMOUSI_DIR   where marmousi2_vp_nz281_nx1361_dx12.5.f32 is (default: the loader's
#                         places, then .device/marmousi of the repository)
#   .device/ (optional, git-ignored, made by --pack from KSWEEP_CHECK_BUILD): build.tar.xz (the
#                         programs, stripped, used where the build folder is absent),
#                         runtime.tar.xz (the shared libraries they need and Open MPI, for a
#                         machine that lacks them), marmousi/ (see README, "Running on GPU nodes")
set -uo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
reference=$repo/tests/reference/device_check.json
iterations=3
mode=cuda
out=
steps=()
make_reference=0
pack=0
while [ $# -gt 0 ]; do
  case "$1" in
    --dry-run) mode=dry-run ;;
    --make-reference) mode=dry-run make_reference=1 ;;
    --out) out=$2; shift ;;
    --out=*) out=${1#--out=} ;;
    --pack) pack=1 ;;
    --list-targets)
      echo "ksweep ksweep_tests_cuda ksweep_tests_state ksweep_tests_comm ksweep_tests_domains ksweep_bench ksweep_python ksweep_python_package"
      exit 0 ;;
    -h|--help) sed -n '2,/^set -uo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;;
    unit|fwi|domains|python|bench) steps+=("$1") ;;
    *) echo "device_check: unknown argument '$1' (steps: unit fwi domains python bench; --dry-run, --make-reference, --out DIR, --list-targets)" >&2; exit 2 ;;
  esac
  shift
done
# --pack: .device/marmousi (the Marmousi2 file), .device/lib (the shared libraries of the
# build's programs beyond the C library, the CUDA driver and the C++ runtime) and
# .device/openmpi (Open MPI's launcher, libraries and components), for a GPU machine that has
# none of them. Prints the size.
if [ "$pack" = 1 ]; then
  build=${KSWEEP_CHECK_BUILD:-$repo/build-cuda}
  dev=$repo/.device
  rm -rf "$dev" && mkdir -p "$dev/marmousi" "$dev/lib"
  f=marmousi2_vp_nz281_nx1361_dx12.5.f32
  for d in "${KSWEEP_MARMOUSI_DIR:-}" "$repo/../shared/marmousi" "${XDG_CACHE_HOME:-$HOME/.cache}/ksweep/marmousi"; do
    if [ -n "$d" ] && [ -f "$d/$f" ]; then cp "$d/$f" "$dev/marmousi/" && break; fi
  done
  [ -f "$dev/marmousi/$f" ] || echo "device_check: $f not found (README, Marmousi data)" >&2
  progs=("$build/drivers/ksweep" "$build"/tests/ksweep_tests_* "$build/bench/ksweep_bench" "$build"/python/ksweep/_ksweep*.so)
  mpirun_path=$(command -v mpirun || true)
  [ -n "$mpirun_path" ] && progs+=("$(readlink -f "$mpirun_path")")
  # orted: a process started without mpirun (one rank) starts it from MPI_Init, as a singleton.
  orted_path=$(command -v orted || true)
  [ -n "$orted_path" ] && progs+=("$(readlink -f "$orted_path")")
  ompi_lib=$(dirname "$(ldconfig -p | awk '/libopen-pal.so/ {print $NF; exit}')" 2>/dev/null)
  for p in "${progs[@]}" "$ompi_lib"/openmpi/lib/openmpi3/*.so; do
    [ -f "$p" ] || continue
    ldd "$p" 2>/dev/null | awk '/=> \// {print $3}'
  done | sort -u | grep -vE '/(libc|libm|libdl|libpthread|librt|ld-linux[^/]*|libcuda|libgcc_s|libstdc\+\+|libutil|libresolv)\.so' |
    xargs -r cp -L -t "$dev/lib/"
  if [ -n "$mpirun_path" ] && [ -d "$ompi_lib/openmpi" ]; then
    # Open MPI relocated with OPAL_PREFIX, in Debian's layout under that prefix: bin/,
    # lib/x86_64-linux-gnu/openmpi/lib/openmpi3 (components), share/openmpi (help texts); PMIx's
    # components in pmix/.
    o=$dev/openmpi
    rel=${ompi_lib#/usr/}
    mkdir -p "$o/bin" "$o/$rel/openmpi/lib" "$o/share" "$o/pmix"
    cp -L "$(readlink -f "$mpirun_path")" "$o/bin/mpirun"
    [ -n "$orted_path" ] && cp -L "$(readlink -f "$orted_path")" "$o/bin/orted"
    cp -rL "$ompi_lib/openmpi/lib/openmpi3" "$o/$rel/openmpi/lib/"
    cp -rL /usr/share/openmpi "$o/share/" 2>/dev/null
    pmix=$(dirname "$(readlink -f "$(ldconfig -p | awk '/libpmix.so.2 / {print $NF; exit}')")")/pmix
    [ -d "$pmix" ] && cp -L "$pmix"/*.so "$o/pmix/"
  fi
  # The programs the check runs, stripped and compressed (a CUDA build's programs are larger
  # than what one call may carry): unpacked by the check where the build folder is absent.
  stage=$(mktemp -d)
  for f in drivers/ksweep tests/ksweep_tests_cuda tests/ksweep_tests_openmp tests/ksweep_tests_state \
    tests/ksweep_tests_comm tests/ksweep_tests_domains bench/ksweep_bench python/ksweep; do
    [ -e "$build/$f" ] || continue
    mkdir -p "$stage/$(dirname "$f")" && cp -r "$build/$f" "$stage/$f"
  done
  find "$stage" -type f \( -name 'ksweep*' -o -name '*.so' \) -exec strip --strip-unneeded {} + 2>/dev/null
  tar -C "$stage" -cJf "$dev/build.tar.xz" . && rm -rf "$stage"
  n=$(ls "$dev/lib" | wc -l)
  tar -C "$dev" -cJf "$dev/runtime.tar.xz" lib $([ -d "$dev/openmpi" ] && echo openmpi) && rm -rf "$dev/lib" "$dev/openmpi"
  echo "device_check: .device/ holds $(du -sh "$dev" | cut -f1): build.tar.xz $(du -h "$dev/build.tar.xz" | cut -f1)," \
    "runtime.tar.xz $(du -h "$dev/runtime.tar.xz" | cut -f1) ($n libraries$([ -n "$mpirun_path" ] && echo ", Open MPI"))"
  exit 0
fi
if [ "$make_reference" = 1 ]; then
  [ ${#steps[@]} -eq 0 ] && steps=(fwi domains python)
elif [ ${#steps[@]} -eq 0 ]; then
  steps=(unit fwi domains python bench)
fi
if [ "$mode" = cuda ]; then
  build=${KSWEEP_CHECK_BUILD:-$repo/build-cuda}
  backend=Cuda
else
  build=${KSWEEP_CHECK_BUILD:-$repo/build}
  backend=OpenMP
fi
if [ ! -d "$build" ] && [ -f "$repo/.device/build.tar.xz" ]; then
  # The programs carried by --pack.
  build=${TMPDIR:-/tmp}/ksweep-device-build
  rm -rf "$build" && mkdir -p "$build" && tar -C "$build" -xJf "$repo/.device/build.tar.xz"
fi
build=$(cd "$build" 2>/dev/null && pwd) || { echo "device_check: no build folder $build" >&2; exit 2; }
out=${out:-$repo/.out/device_check/$mode}
mkdir -p "$out"
out=$(cd "$out" && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/ksweep-device-check.XXXXXX")
trap 'rm -rf "$work"' EXIT
log=$out/log.txt
: >"$log"

# Carried libraries and MPI (--pack), for a machine that lacks them.
if [ -f "$repo/.device/runtime.tar.xz" ]; then
  rt=${TMPDIR:-/tmp}/ksweep-device-runtime
  rm -rf "$rt" && mkdir -p "$rt" && tar -C "$rt" -xJf "$repo/.device/runtime.tar.xz"
  export LD_LIBRARY_PATH=$rt/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  if [ -d "$rt/openmpi" ]; then
    export OPAL_PREFIX=$rt/openmpi PATH=$rt/openmpi/bin:$PATH PMIX_MCA_mca_base_component_path=$rt/openmpi/pmix
  fi
fi
if [ -z "${KSWEEP_MARMOUSI_DIR:-}" ] && [ -d "$repo/.device/marmousi" ]; then export KSWEEP_MARMOUSI_DIR=$repo/.device/marmousi; fi
if [ -n "${KSWEEP_CHECK_PYTHON:-}" ]; then
  python=$KSWEEP_CHECK_PYTHON
elif /usr/bin/python3 -c 'import numpy, h5py' 2>/dev/null; then
  python=/usr/bin/python3
else
  python=python3
fi
mpirun=${KSWEEP_CHECK_MPIRUN:-mpirun}
mpi_flags=()
if "$mpirun" --version 2>/dev/null | grep -q "Open MPI"; then
  mpi_flags=(--oversubscribe --bind-to none)
  [ "$(id -u)" = 0 ] && mpi_flags+=(--allow-run-as-root)
fi
cores=$(nproc 2>/dev/null || echo 2)
export OMP_PROC_BIND=false
helper=$repo/scripts/device_check.py
export KSWEEP_GIT=$(git -C "$repo" describe --always --dirty 2>/dev/null || echo unknown)
results=()  # one JSON object per step
# Seconds each program of a step may run (GPU: the whole check stays within about 6 minutes).
declare -A step_limit=([unit]=150 [fwi]=60 [domains]=60 [python]=60 [bench]=150)
if [ "$mode" = dry-run ]; then step_limit=([unit]=600 [fwi]=900 [domains]=900 [python]=600 [bench]=300); fi
limit=60

# run_ranks N CMD...: CMD on N MPI ranks (one process without MPI when N is 1), each with
# KSWEEP_CHECK_THREADS or cores / N threads; output to the log.
run_ranks() {
  local n=$1
  shift
  local threads=${KSWEEP_CHECK_THREADS:-$((cores / n > 0 ? cores / n : 1))}
  echo "+ [$n rank(s), $threads thread(s) each, at most ${limit}s] $*" >>"$log"
  if [ "$n" = 1 ]; then
    OMP_NUM_THREADS=$threads timeout -k 10 "$limit" "$@" >>"$log" 2>&1
  else
    OMP_NUM_THREADS=$threads timeout -k 10 "$limit" "$mpirun" "${mpi_flags[@]}" -x OMP_NUM_THREADS -x OMP_PROC_BIND \
      -x KSWEEP_OVERLAP -x KSWEEP_CUDA_GRAPHS -x KSWEEP_MARMOUSI_DIR -x LD_LIBRARY_PATH -n "$n" "$@" >>"$log" 2>&1
  fi
}

# step NAME: runs step_NAME, which sets `detail` and returns 0 when it passed; prints the line.
step() {
  local name=$1 t0 t1 rc seconds
  detail=""
  limit=${step_limit[$name]}
  echo "=== $name ($(date -u +%FT%TZ))" >>"$log"
  t0=$(date +%s.%N)
  "step_$name"
  rc=$?
  t1=$(date +%s.%N)
  seconds=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }')
  local verdict=PASS
  [ $rc -ne 0 ] && verdict=FAIL
  printf 'device_check: %-8s %s %7s s  %s\n' "$name" "$verdict" "$seconds" "$detail"
  results+=("$("$python" -c 'import json, sys; print(json.dumps({"step": sys.argv[1], "pass": sys.argv[2] == "PASS", "seconds": float(sys.argv[3]), "detail": sys.argv[4]}))' "$name" "$verdict" "$seconds" "$detail")")
  return $rc
}

step_unit() {
  local tests=$build/tests/ksweep_tests_${backend,,} ok=0 total=0 filter
  if [ "$mode" = cuda ]; then filter=${KSWEEP_CHECK_UNIT_FILTER:-*-*.slow_*}
  else filter=${KSWEEP_CHECK_UNIT_FILTER:-*.adjoint_dot_product_*:*.physics_analytic_green_order8:*.fp_env_*:*.points_off_grid_schedules_bitwise:*.codec_*:*.store_roundtrip_every_location:*.device_*}; fi
  if [ -x "$tests" ]; then
    total=$((total + 1))
    run_ranks 1 "$tests" --gtest_filter="$filter" --gtest_brief=1 && ok=$((ok + 1))
  else
    detail="no $tests; "
  fi
  total=$((total + 1))
  run_ranks 1 "$build/tests/ksweep_tests_state" --gtest_brief=1 && ok=$((ok + 1))
  for t in comm domains; do
    total=$((total + 1))
    run_ranks 2 "$build/tests/ksweep_tests_$t" --gtest_brief=1 && ok=$((ok + 1))
  done
  detail+="$ok of $total test programs passed ($(basename "$tests") --gtest_filter='$filter'; state; comm and domains on 2 ranks)"
  [ "$ok" = "$total" ] && [ -x "$tests" ]
}

# fwi_run NAME RANKS [--set ...]: the inversion into $work/NAME, its result to $work/NAME.json.
fwi_run() {
  local name=$1 n=$2
  shift 2
  run_ranks "$n" "$build/drivers/ksweep" fwi -c "$repo/share/examples/marmousi_25m.toml" -o "$work/$name" --overwrite \
    --set fwi.iterations=$iterations --set fwi.checkpoint_every=0 --set fwi.figures_every=0 "$@" &&
    "$python" "$helper" fwi-result "$work/$name" >"$work/$name.json" 2>>"$log"
}

# compare NAME KEY A.json...: each result equal to the reference's KEY; prints what differs.
compare() {
  local key=$1
  shift
  "$python" "$helper" compare "$reference" "$key" "$@" 2>>"$log"
}

step_fwi() {
  local files=() n
  for n in 1 2 4; do
    fwi_run "fwi-$n" "$n" || { detail="the run on $n rank(s) failed (log.txt)"; return 1; }
    files+=("$work/fwi-$n.json")
  done
  if [ "$make_reference" = 1 ]; then
    "$python" "$helper" set-reference "$reference" marmousi_25m "${files[@]}" || return 1
    detail="reference written (1, 2 and 4 ranks agree)"
    return 0
  fi
  # Runs of steps replayed as CUDA graphs (core/step_graph.hpp; launched as they are elsewhere).
  for n in 1 2; do
    KSWEEP_CUDA_GRAPHS=1 fwi_run "fwi-graphs-$n" "$n" ||
      { detail="the run on $n rank(s) with KSWEEP_CUDA_GRAPHS=1 failed (log.txt)"; return 1; }
    files+=("$work/fwi-graphs-$n.json")
  done
  detail=$(compare marmousi_25m "${files[@]}")
}

step_domains() {
  # The shipped storage (fp16): a split gives one domain's bits (the fwi step's reference).
  local files=() o
  [ "$make_reference" = 1 ] && { detail="uses the fwi step's reference"; return 0; }
  for o in 1 0; do
    KSWEEP_OVERLAP=$o fwi_run "domains-overlap-$o" 2 --set 'parallel.domains=[2]' ||
      { detail="the split run with KSWEEP_OVERLAP=$o failed (log.txt)"; return 1; }
    files+=("$work/domains-overlap-$o.json")
  done
  detail=$(compare marmousi_25m "${files[@]}")
}

step_python() {
  echo "+ $python $helper example" >>"$log"
  OMP_NUM_THREADS=${KSWEEP_CHECK_THREADS:-$cores} PYTHONPATH=$build/python${PYTHONPATH:+:$PYTHONPATH} \
    timeout -k 10 "$limit" "$python" "$helper" example "$backend" >"$work/python.json" 2>>"$log" ||
    { detail="the example failed (log.txt)"; return 1; }
  if [ "$make_reference" = 1 ]; then
    "$python" "$helper" set-reference "$reference" python_example "$work/python.json" || return 1
    detail="reference written"
    return 0
  fi
  detail=$(compare python_example "$work/python.json")
}

step_bench() {
  local bench=$build/bench/ksweep_bench json filter min_time smoke=()
  if [ "$mode" = cuda ]; then
    local gpu
    gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -n 1 | grep -oiE 'h100|h200|a100|gh200|b200|l40s?' | head -n 1 | tr '[:upper:]' '[:lower:]')
    json=$repo/docs/benchmarks/${gpu:-gpu}-cuda.json
    filter=/Cuda/
    min_time=${KSWEEP_BENCH_MIN_TIME:-0.1}
  else
    json=$out/bench-openmp.json
    filter=/OpenMP/
    min_time=0.01
    smoke=(--smoke)  # the same benchmarks at tiny sizes
  fi
  run_ranks 1 "$bench" "${smoke[@]}" --benchmark_filter="$filter" --benchmark_min_time="$min_time" --benchmark_out="$json" \
    --benchmark_out_format=json || { detail="ksweep_bench failed (log.txt)"; return 1; }
  [ "$mode" = cuda ] && cp "$json" "$out/"
  detail="$("$python" -c 'import json, sys; print(len(json.load(open(sys.argv[1]))["benchmarks"]))' "$json") benchmarks -> ${json#"$repo"/}"
}

echo "device_check: $mode, build $build, backend $backend, $(uname -n), $cores cores; log $log"
failed=0
for s in "${steps[@]}"; do step "$s" || failed=1; done
{
  printf '{"mode": "%s", "backend": "%s", "host": "%s", "git": "%s", "date": "%s", "steps": [' "$mode" "$backend" \
    "$(uname -n)" "$(git -C "$repo" rev-parse --short HEAD 2>/dev/null)" "$(date -u +%FT%TZ)"
  (IFS=,; printf '%s' "${results[*]}")
  printf ']}\n'
} | "$python" -c 'import json, sys; d = json.load(sys.stdin); d["gpu"] = sys.argv[1]; json.dump(d, open(sys.argv[2], "w"), indent=1)' \
  "$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -n 1)" "$out/results.json"
echo "device_check: $([ $failed = 0 ] && echo "every step passed" || echo "FAILED"); results in $out/results.json"
exit $failed
