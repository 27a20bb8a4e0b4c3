#!/usr/bin/env python3
"""The same forward in ksweep and in Deepwave (when Deepwave is installed): the records' misfit
and the speed ratio, same run. Not part of the tests: Deepwave is not a dependency of ksweep.

    PYTHONPATH=build/python /usr/bin/python3 share/examples/python/side_by_side_deepwave.py [--shots 8] [--nt 2000]

The case: Marmousi2 at 25 m (141 x 681), shots at depth 2 over [0.1, 0.9] of the width,
200 receivers at depth 4, 5 Hz Ricker, dt 2 ms, order 4, a 20-cell absorbing layer, float32.
Both propagators take the same wavelet and cells. Deepwave adds -v^2 dt^2 times its amplitudes
at a source; ksweep adds its amplitudes as given, so ksweep gets -v(source)^2 dt^2 times the
wavelet. Their absorbing layers differ (ksweep: CPML with R = 1e-3; Deepwave: its own PML), so
the misfit measures the physics plus the layers; the misfit at the best shift of a few samples
is printed too, to tell a timing convention from a difference of physics.
"""
import argparse
import time

import numpy as np
import torch

import ksweep

try:
    import deepwave
except ImportError:
    print("side_by_side_deepwave: Deepwave is not installed; nothing to compare")
    raise SystemExit(0)

p = argparse.ArgumentParser()
p.add_argument("--shots", type=int, default=8)
p.add_argument("--nt", type=int, default=2000)
p.add_argument("--repeats", type=int, default=3)
a = p.parse_args()

v, dh = ksweep.load_model("marmousi2", decimate=2)
nz, nx = v.shape
dt, nt, shots, nr, pml = 0.002, a.nt, a.shots, 200, 20
sx = np.floor(0.1 * (nx - 1) + 0.8 * (nx - 1) * np.arange(shots) / max(shots - 1, 1) + 0.5).astype(np.int64)
rx = np.floor((nx - 1) * np.arange(nr) / (nr - 1) + 0.5).astype(np.int64)
src = np.stack([np.full(shots, 2), sx], -1)[:, None, :]
rec = np.ascontiguousarray(np.broadcast_to(np.stack([np.full(nr, 4), rx], -1), (shots, nr, 2)))
wavelet = ksweep.ricker(5.0, nt, dt, 0.2)
amp = np.ascontiguousarray(np.broadcast_to(wavelet.astype(np.float32), (shots, 1, nt)))
scale = -(v[src[:, 0, 0], src[:, 0, 1]].astype(np.float64) ** 2) * dt**2  # Deepwave's source term
amp_ks = (scale[:, None, None] * wavelet[None, None, :]).astype(np.float32)

torch.set_num_threads(ksweep.info()["concurrency"])
vt, ampt = torch.from_numpy(v), torch.from_numpy(amp)
srct, rect = torch.from_numpy(src), torch.from_numpy(rec)


def run_ksweep():
    return ksweep.forward(v, dh, dt, amp_ks, src, rec, order=4, pml_width=pml)


def run_deepwave():
    out = deepwave.scalar(vt, dh, dt, source_amplitudes=ampt, source_locations=srct, receiver_locations=rect,
                          accuracy=4, pml_width=pml, pml_freq=25.0)
    return out[-1].numpy()


times = {"ksweep": [], "deepwave": []}
for i in range(a.repeats + 1):
    for name, f in ([("ksweep", run_ksweep), ("deepwave", run_deepwave)] if i % 2 == 0 else
                    [("deepwave", run_deepwave), ("ksweep", run_ksweep)]):
        t0 = time.perf_counter()
        d = f()
        if i > 0:  # the first round warms both up
            times[name].append(time.perf_counter() - t0)
        if name == "ksweep":
            dk = np.asarray(d)
        else:
            dd = np.asarray(d)
misfit = np.linalg.norm(dk - dd) / np.linalg.norm(dd)
shifted = {k: np.linalg.norm(np.roll(dk, k, axis=2)[..., 5:-5] - dd[..., 5:-5]) / np.linalg.norm(dd[..., 5:-5])
           for k in range(-3, 4)}
best = min(shifted, key=shifted.get)
tk, td = np.median(times["ksweep"]), np.median(times["deepwave"])
print(f"{shots} shots, {nz} x {nx} cells, nt {nt}, order 4, {ksweep.info()['concurrency']} threads")
print(f"records' relative misfit ||ksweep - deepwave|| / ||deepwave|| = {misfit:.3e}; "
      f"at ksweep's records shifted by {best} samples: {shifted[best]:.3e}")
print(f"forward: ksweep {tk:.3f} s, deepwave {td:.3f} s (medians of {a.repeats}); deepwave / ksweep = {td / tk:.3f}")
