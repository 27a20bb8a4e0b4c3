#!/usr/bin/env bash
# The towed-streamer example end to end (share/examples/towed_streamer_*.toml): "field" data
# modelled on Marmousi2 at 12.5 m with a moving streamer and a non-Ricker source, written as
# SEG-Y; then the inversion at 25 m from the SEG-Y alone, with an estimated wavelet and three
# frequency stages. About 1.5 minutes on 2 cores.
#   scripts/towed_streamer.sh [OUT]      # default out/towed_streamer
# Results: OUT/data (observed.segy, observed.h5, figures/shot_gather.png) and OUT/fwi
# (summary.json, wavelet.h5, model_final.h5, figures/*.png).
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${KSWEEP_BUILD_DIR:-$repo/build}
out=$(realpath -m "${1:-$repo/out/towed_streamer}")
bash "$repo/scripts/build.sh" >/dev/null
export OMP_PROC_BIND=${OMP_PROC_BIND:-false}
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-$(nproc)}
python=${KSWEEP_PYTHON:-/usr/bin/python3}
examples="$repo/share/examples"
rm -rf "$out"
mkdir -p "$out"
"$python" "$examples/towed_streamer.py" "$out"
"$build/drivers/ksweep" model --config "$examples/towed_streamer_model.toml" --out "$out/data" \
  --set "survey.file=$out/survey.csv" --set "wavelet.source=$out/source_wavelet.txt"
"$build/drivers/ksweep" fwi --config "$examples/towed_streamer_fwi.toml" --out "$out/fwi" \
  --set "fwi.observed=$out/data/observed.segy"
echo "figures: $out/data/figures/ and $out/fwi/figures/"
