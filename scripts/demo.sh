#!/usr/bin/env bash
# The main job: installs what is missing, builds the ksweep program (only it: scripts/test.sh
# builds the rest) and runs a Marmousi2 FWI on the CPU (about a minute of inversion on 2 cores).
# Results: out/demo/ (summary.json, model_final.h5, figures/*.png).
#   scripts/demo.sh [extra ksweep fwi arguments, e.g. --set fwi.iterations=5]
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# The program alone, with the one kernel the demo runs (2D, constant density, every order), in a
# folder of its own: scripts/test.sh builds everything into build/.
build=${KSWEEP_DEMO_BUILD_DIR:-$repo/build-demo}
out=$repo/out/demo
KSWEEP_BUILD_DIR=$build KSWEEP_SETUP_PROFILE=program KSWEEP_BUILD_TARGETS=ksweep \
  KSWEEP_CMAKE_ARGS="-DKSWEEP_ENABLE_TESTS=OFF -DKSWEEP_ENABLE_BENCHMARKS=OFF -DKSWEEP_ENABLE_PYTHON=OFF -DKSWEEP_KERNELS=acoustic_2d" \
  bash "$repo/scripts/build.sh" >/dev/null
rm -rf "$out"
# No thread settings here: the program chooses them (see `ksweep info`).
"$build/drivers/ksweep" fwi --config "$repo/share/examples/fwi_demo.toml" --out "$out" "$@"
/usr/bin/python3 - "$out/summary.json" <<'EOF'
import json, sys
s = json.load(open(sys.argv[1]))
it = s.get("iterations") or []
r0, r1 = s.get("initial", {}).get("rmse"), it[-1]["rmse"] if it else None
t = sum(r.get("seconds", 0) for r in it)
if r0 and r1:
    print(f"\nksweep demo: {len(it)} FWI iterations in {t:.0f} s: model RMSE {r0:.1f} -> {r1:.1f} m/s "
          f"({100 * (r1 - r0) / r0:+.0f} %)")
EOF
cat <<EOF
  figures:  $out/figures/ (loss.png; epoch_*.png: true, starting, inverted, update, error)
  results:  $out/summary.json (loss, RMSE, timings, memory), model_final.h5, synthetic.h5
  settings: share/examples/fwi_demo.toml (every key: README, "The ksweep program")
  program:  ${build#"$repo"/}/drivers/ksweep (this demo's kernel alone: 2D, constant density)
  on a GPU: README, "Building for CUDA" and "Running on GPU nodes"
  Python:   KSWEEP_BUILD_TARGETS=ksweep_python scripts/build.sh, then
            PYTHONPATH=build/python /usr/bin/python3 share/examples/python/marmousi_fwi.py share/examples/fwi_demo.toml
  tests:    scripts/test.sh (builds everything into build/)
EOF
