#!/usr/bin/env bash
# One gradient of a Marmousi2 batch (141 x 681 at 25 m, 20-cell CPML, 8 shots, nt 2000,
# order 4) for every storage strategy x location x dtype: time, memory report, and the
# gradient's cosine against boundary/device/fp32. Writes out/marmousi_batch/table.md.
#   scripts/marmousi_batch.sh [extra --set overrides]
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${KSWEEP_BUILD_DIR:-$repo/build}
out=$repo/out/marmousi_batch
ksweep=$build/drivers/ksweep
export OMP_PROC_BIND=${OMP_PROC_BIND:-false} OMP_NUM_THREADS=${OMP_NUM_THREADS:-$(nproc)}
rm -rf "$out" && mkdir -p "$out"
common=(--set propagator.pml_width=20 --set fwi.iterations=1 --set fwi.batch=8 --set fwi.checkpoint_every=0
        --set fwi.save_models=false --set fwi.figures_every=1 "$@")
# Observed data once, then every run reads them.
"$ksweep" model -c "$repo/share/examples/marmousi_25m.toml" -o "$out/observed" "${common[@]}" >/dev/null
runs=("full device fp32")
for loc in device host disk; do for dt in fp32 fp16 bf16 int8; do runs+=("boundary $loc $dt"); done; done
for r in "${runs[@]}"; do
  read -r strategy loc dt <<<"$r"
  name=$strategy-$loc-$dt
  echo "== $name"
  KSWEEP_PYTHON=/bin/true "$ksweep" fwi -c "$repo/share/examples/marmousi_25m.toml" -o "$out/$name" "${common[@]}" \
    --set fwi.observed="\"$out/observed/observed.h5\"" --set storage.strategy="$strategy" \
    --set storage.location="$loc" --set storage.dtype="$dt" | grep -E '^iter|MiB'
done
/usr/bin/python3 - "$out" <<'PY'
import json, os, sys
import h5py, numpy as np
out = sys.argv[1]
ref = h5py.File(os.path.join(out, "boundary-device-fp32", "epochs", "epoch_0001.h5"), "r")["grad"][...].ravel().astype(np.float64)
mib = lambda b: "%.1f" % (b / 2**20)
rows = ["| strategy | location | dtype | s/iteration | saved steps MiB | staging MiB | wavefields+CPML MiB | seeds MiB | images MiB | observed MiB | synthetic MiB | peak RSS MiB | gradient cosine vs boundary/device/fp32 |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
for name in sorted(d for d in os.listdir(out) if d.count("-") == 2):
    s = json.load(open(os.path.join(out, name, "summary.json")))
    m = s["memory"]
    g = h5py.File(os.path.join(out, name, "epochs", "epoch_0001.h5"), "r")["grad"][...].ravel().astype(np.float64)
    cos = float(np.dot(g, ref) / np.sqrt(np.dot(g, g) * np.dot(ref, ref)))
    rows.append("| %s | %s | %s | %.2f | %s | %s | %s | %s | %s | %s | %s | %s | %.8f |" % (
        m["strategy"], m["location"], m["dtype"], s["iterations"][0]["seconds"], mib(m["boundary_bytes"]),
        mib(m["staging_bytes"]), mib(m["wavefield_bytes"]), mib(m["seed_bytes"]), mib(m["image_bytes"]),
        mib(m["observed_bytes"]), mib(m["synthetic_bytes"]), mib(m["peak_device_bytes"]), cos))
open(os.path.join(out, "table.md"), "w").write("\n".join(rows) + "\n")
print("\n".join(rows))
PY
