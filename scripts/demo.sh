#!/usr/bin/env bash
# The main job: builds ksweep and runs a Marmousi2 FWI on the CPU (a few minutes on 2 cores).
# Results: out/demo/ (summary.json, model_final.h5, figures/*.png).
#   scripts/demo.sh [extra ksweep fwi arguments, e.g. --set fwi.iterations=5]
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${KSWEEP_BUILD_DIR:-$repo/build}
bash "$repo/scripts/build.sh" >/dev/null
export OMP_PROC_BIND=${OMP_PROC_BIND:-false}
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-$(nproc)}
rm -rf "$repo/out/demo"
"$build/drivers/ksweep" fwi --config "$repo/share/examples/fwi_demo.toml" --out "$repo/out/demo" "$@"
echo "figures: $repo/out/demo/figures/"
