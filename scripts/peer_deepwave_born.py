#!/usr/bin/env python3
"""Born modelling in ksweep and in Deepwave's scalar_born, same process, same run: the scattered
records' misfit and the speed ratio, when Deepwave is importable (it is never a dependency of
ksweep: without it this prints a line and exits 0).

    PYTHONPATH=build/python:<deepwave> /usr/bin/python3 scripts/peer_deepwave_born.py \
        [--shots 8] [--nt 2000] [--order 4] [--repeats 3] [--threads 2] [--out FILE.json]

The case (the Marmousi batch of scripts/peer_deepwave.py): Marmousi2 at 25 m (141 x 681 cells),
`--shots` shots at depth 2 over [0.1, 0.9] of the width, 200 receivers at depth 4 over the width,
5 Hz Ricker delayed by 0.2 s, dt 2 ms, a 20-cell absorbing layer (pml_freq 25), float32. The
background is the model smoothed by a Gaussian of 8 cells (ksweep.gaussian_smooth), the
perturbation the model less its background, zero in the top 10 rows (the sources' cells: there
Deepwave's source term -v^2 dt^2 f depends on v, ksweep's amplitudes do not) and held at zero in
the absorbing layer on both sides (ksweep: `layer_velocity` = the background; Deepwave pads the
perturbation with zeros). ksweep's amplitudes are Deepwave's source term -v(source)^2 dt^2 times
the wavelet. The misfit is ||k - d|| / ||d|| (k ksweep's scattered records, d Deepwave's), also
at the best shift of -3..3 samples (the two codes record a step apart, see
docs/PERFORMANCE.md); the rest is the two absorbing layers. Speed: both timed alternately in
this process, medians of --repeats calls after one warm-up round each; "ratio" = Deepwave /
ksweep (> 1: ksweep faster). The peak resident memory of the process is not separated per code
(both run here); forward() of each is timed beside for the Born / forward ratios.
"""
import argparse
import json
import os
import socket
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
# The Marmousi batch's survey and the context helpers of the forward peer (it exits 0 itself when
# Deepwave or torch is not importable).
import peer_deepwave as pd  # noqa: E402
from peer_deepwave import deepwave, torch  # noqa: E402

try:
    import ksweep
except ImportError as e:  # the package is built with the Python bindings (build/python)
    print("peer_deepwave_born: the ksweep package is not importable (put <build>/python on PYTHONPATH): "
          "skipping (%s)" % e)
    raise SystemExit(0)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--shots", type=int, default=8)
    p.add_argument("--nt", type=int, default=2000)
    p.add_argument("--order", type=int, default=4, choices=(2, 4, 6, 8))
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--out", default="")
    a = p.parse_args()
    torch.set_num_threads(a.threads)

    v, dh = ksweep.load_model("marmousi2", decimate=2)
    nz, nx = v.shape
    dt, nt, shots, nr, pml = pd.DT, a.nt, a.shots, pd.N_REC, pd.PML
    v0 = ksweep.gaussian_smooth(v.astype(np.float64), 8.0).astype(np.float32)
    scatter = (v - v0).astype(np.float32)
    scatter[:10] = 0
    srct, rect, _ = pd.survey(shots)
    src, rec = srct.numpy(), rect.numpy()
    wavelet = ksweep.ricker(pd.FREQ, nt, dt, pd.DELAY)
    amp = np.ascontiguousarray(np.broadcast_to(wavelet.astype(np.float32), (shots, 1, nt)))
    scale = -(v0[src[:, 0, 0], src[:, 0, 1]].astype(np.float64) ** 2) * dt**2  # Deepwave's source term
    amp_ks = (scale[:, None, None] * wavelet[None, None, :]).astype(np.float32)
    v0t, sct, ampt = torch.from_numpy(v0), torch.from_numpy(scatter), torch.from_numpy(amp)
    common = dict(order=a.order, pml_width=pml, pml_freq=25.0)

    def ks_born():
        return np.asarray(ksweep.born(v0, dh, dt, amp_ks, src, rec, scatter, layer_velocity=v0, **common))

    def ks_born_batched():  # the per-step batched launches (the schedule on devices), same process
        return np.asarray(ksweep.born(v0, dh, dt, amp_ks, src, rec, scatter, layer_velocity=v0, schedule="batched",
                                      **common))

    def ks_forward():
        return np.asarray(ksweep.forward(v0, dh, dt, amp_ks, src, rec, layer_velocity=v0, **common))

    def dw_born():
        out = deepwave.scalar_born(v0t, sct, dh, dt, source_amplitudes=ampt, source_locations=srct,
                                   receiver_locations=rect, accuracy=a.order, pml_width=pml, pml_freq=25.0)
        return out[-1].numpy()

    def dw_forward():
        out = deepwave.scalar(v0t, dh, dt, source_amplitudes=ampt, source_locations=srct, receiver_locations=rect,
                              accuracy=a.order, pml_width=pml, pml_freq=25.0)
        return out[-1].numpy()

    runs = [("ksweep_born", ks_born), ("deepwave_born", dw_born), ("ksweep_forward", ks_forward),
            ("deepwave_forward", dw_forward), ("ksweep_born_batched", ks_born_batched)]
    times = {name: [] for name, _ in runs}
    result = {}
    for i in range(a.repeats + 1):
        for name, f in (runs if i % 2 == 0 else runs[::-1]):
            t0 = time.perf_counter()
            d = f()
            if i > 0:  # the first round warms every call up
                times[name].append(time.perf_counter() - t0)
            result[name] = d
    k, d = result["ksweep_born"], result["deepwave_born"]
    misfit = float(np.linalg.norm(k - d) / np.linalg.norm(d))
    shifted = {s: float(np.linalg.norm(np.roll(k, s, axis=2)[..., 5:-5] - d[..., 5:-5]) /
                        np.linalg.norm(d[..., 5:-5])) for s in range(-3, 4)}
    best = min(shifted, key=shifted.get)
    kf, df = result["ksweep_forward"], result["deepwave_forward"]
    fwd_shift = min(range(-3, 4), key=lambda s: np.linalg.norm(np.roll(kf, s, axis=2)[..., 5:-5] - df[..., 5:-5]))
    fwd_misfit = float(np.linalg.norm(np.roll(kf, fwd_shift, axis=2)[..., 5:-5] - df[..., 5:-5]) /
                       np.linalg.norm(df[..., 5:-5]))
    med = {name: float(np.median(t)) for name, t in times.items()}
    out = {
        "context": {"cpu": pd.cpu_model(), "host": socket.gethostname(), "threads": a.threads,
                    "deepwave": pd.deepwave_version(), "torch": torch.__version__,
                    "ksweep_backend": ksweep.info().get("backend", "?")},
        "peer": "deepwave", "family": "born",
        "case": {"nz": nz, "nx": nx, "dh": dh, "shots": shots, "nt": nt, "dt": dt, "order": a.order,
                 "receivers": nr, "pml_width": pml, "repeats": a.repeats},
        "seconds": med, "samples": times,
        "born_ratio_deepwave_over_ksweep": med["deepwave_born"] / med["ksweep_born"],
        "forward_ratio_deepwave_over_ksweep": med["deepwave_forward"] / med["ksweep_forward"],
        "ksweep_born_over_forward": med["ksweep_born"] / med["ksweep_forward"],
        "ksweep_born_batched_over_born": med["ksweep_born_batched"] / med["ksweep_born"],
        "born_batched_records_equal": bool(np.array_equal(result["ksweep_born_batched"], result["ksweep_born"])),
        "deepwave_born_over_forward": med["deepwave_born"] / med["deepwave_forward"],
        "records_misfit": misfit, "records_misfit_best_shift": shifted[best], "best_shift_samples": best,
        "forward_records_misfit_best_shift": fwd_misfit, "forward_best_shift_samples": fwd_shift,
    }
    print(f"{shots} shots, {nz} x {nx} cells, nt {nt}, order {a.order}, {a.threads} threads, {pd.cpu_model()}")
    print(f"scattered records: ||ksweep - deepwave|| / ||deepwave|| = {misfit:.3e}; at ksweep's records shifted by "
          f"{best} samples: {shifted[best]:.3e} (forward records at their best shift {fwd_shift}: {fwd_misfit:.3e})")
    for kind in ("born", "forward"):
        print(f"{kind}: ksweep {med['ksweep_' + kind]:.3f} s, deepwave {med['deepwave_' + kind]:.3f} s "
              f"(medians of {a.repeats}); deepwave / ksweep = {med['deepwave_' + kind] / med['ksweep_' + kind]:.3f}")
    print(f"ksweep's born with the batched launches: {med['ksweep_born_batched']:.3f} s "
          f"({med['ksweep_born_batched'] / med['ksweep_born']:.2f}x its default schedule's time; the same records: "
          f"{out['born_batched_records_equal']})")
    if a.out:
        os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
        with open(a.out, "w") as f:
            json.dump(out, f, indent=1)
        print("wrote", a.out)


if __name__ == "__main__":
    main()
