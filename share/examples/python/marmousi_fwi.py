#!/usr/bin/env python3
"""Marmousi FWI in Python: the inversion of a ksweep config (default: marmousi_25m.toml; its
frequency stages too, e.g. fwi_demo.toml), with the program's inputs built here from the library.

    PYTHONPATH=build/python /usr/bin/python3 share/examples/python/marmousi_fwi.py [CONFIG] [--iterations N]
"""
import argparse, json, os, tomllib
import numpy as np
import ksweep

here = os.path.dirname(os.path.abspath(__file__))
p = argparse.ArgumentParser()
p.add_argument("config", nargs="?", default=os.path.join(here, "..", "marmousi_25m.toml"))
p.add_argument("--iterations", type=int)
p.add_argument("--out", default="marmousi_fwi_python")
a = p.parse_args()
cfg = tomllib.load(open(a.config, "rb"))
m, t, w, sh, rc = (cfg.get(k, {}) for k in ("model", "time", "wavelet", "shots", "receivers"))
pr, f = cfg.get("propagator", {}), cfg.get("fwi", {})

v, dh = ksweep.load_model(m.get("source", "marmousi2"), decimate=m.get("decimate", 2),
                          crop_z=m.get("crop_z"), crop_x=m.get("crop_x"))
nz, nx = v.shape
dt, nt, order, pml = t.get("dt", 0.002), t.get("nt", 2000), pr.get("order", 4), pr.get("pml_width", 20)
lround = lambda x: np.floor(np.asarray(x) + 0.5).astype(np.int64)  # C's lround, for x >= 0
lo, hi = (np.array(sh.get("x_range", [0.1, 0.9])) * (nx - 1))
sx = lround(lo + (hi - lo) * np.arange(sh["count"]) / max(sh["count"] - 1, 1))
rx = lround((nx - 1) * np.arange(rc["count"]) / max(rc["count"] - 1, 1))
src = np.stack([np.full_like(sx, sh["z"]), sx], -1)[:, None, :]                   # [shot, 1, (z, x)]
rec = np.broadcast_to(np.stack([np.full_like(rx, rc["z"]), rx], -1), (len(sx), len(rx), 2))
wavelet = ksweep.ricker(w.get("freq", 5.0), nt, dt, w.get("delay", 0.2))
amp = np.broadcast_to(wavelet.astype(np.float32), (len(sx), 1, nt))

# The observed data, modelled in the true model as `ksweep model` does.
observed = ksweep.forward(v, dh, dt, amp, src, rec, order=order, pml_width=pml, batch=pr.get("batch", 8))
# The starting model: Gaussian-smoothed slowness, water rows kept (the rows equal to the first cell).
water = f.get("water_rows", -1)
if water < 0:
    same = np.all(v == v.flat[0], axis=1)
    water = 0 if same.all() else int(np.argmin(same))
v0 = (1.0 / ksweep.gaussian_smooth(1.0 / v.astype(np.float64), f.get("smooth_sigma", 8.0))).astype(np.float32)
v0[:water] = v[:water]

stages = [(st["iterations"], st["max_freq"]) for st in f.get("stages", [])]  # frequency continuation
inv = ksweep.Inversion(v0, dh, dt, wavelet, src, rec, observed, true_model=v, optimizer=f.get("optimizer", "adam"),
                       batch=f.get("batch", 8), seed=f.get("seed", 1234), lr=f.get("lr", 25.0),
                       eps=f.get("eps", 1e-16), water_rows=water, grad_smooth=f.get("grad_smooth", 0.0),
                       vmin=f.get("vmin", 1000.0), vmax=f.get("vmax", 5000.0), order=order, pml_width=pml,
                       storage_dtype=cfg.get("storage", {}).get("dtype", "fp32"), stages=stages)
print(f"initial RMSE {inv.rmse():.2f} m/s on {nz} x {nx} cells at {dh} m, {len(sx)} shots")
report = lambda r: print(f"iter {r['iteration']:4d}  loss {r['loss']:.6e}  rmse {r['rmse']:8.2f} m/s"
                         + (f"  stage {r['stage']}" if r["stage"] else ""))
history = inv.run(a.iterations or f.get("iterations") or sum(n for n, _ in stages) or 30, report)
os.makedirs(a.out, exist_ok=True)
json.dump(history, open(os.path.join(a.out, "history.json"), "w"), indent=1)
np.save(os.path.join(a.out, "model.npy"), inv.model)
import matplotlib; matplotlib.use("Agg"); import matplotlib.pyplot as plt  # noqa: E402
fig, ax = plt.subplots(3, 1, figsize=(9, 8), sharex=True)
for axis, (title, img) in zip(ax, [("true", v), ("start", v0), (f"after {inv.iteration} iterations", inv.model)]):
    im = axis.imshow(img, extent=(0, nx * dh / 1e3, nz * dh / 1e3, 0), cmap="jet", vmin=v.min(), vmax=v.max())
    axis.set_title(f"vp, {title}"); axis.set_ylabel("depth (km)")
ax[-1].set_xlabel("x (km)"); fig.tight_layout(); fig.colorbar(im, ax=ax, label="vp (m/s)", shrink=0.6)
fig.savefig(os.path.join(a.out, "models.png"), dpi=120)
print(f"wrote {a.out}/history.json, model.npy, models.png")
