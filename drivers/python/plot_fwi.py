#!/usr/bin/python3
"""Plot the output folder of `ksweep fwi` as PNGs under OUTDIR/figures/.

Usage: plot_fwi.py OUTDIR [--epochs all|last|N,M,...]

Writes (each skipped with a message on stderr when its inputs are missing):
  ricker.png         source wavelet and its amplitude spectrum (summary.json "wavelet")
  observed_data.png  first, middle and last shot gathers of observed.h5
  loss.png           loss (log scale) and model RMSE against the iterations done, from the
                     starting model's (0) on (summary.json)
  epoch_XXXX.png     true, starting and inverted models, the update (inverted - starting), the
                     remaining error (true - inverted), gradient, source and receiver
                     illumination of epochs/epoch_XXXX.h5; for a 3D model each as three
                     orthogonal slices (a depth slice, an inline and a crossline section)
  density_XXXX.png   variable density (epochs holding "rho"; 2D): true, starting and
                     inverted density, its change and its gradient

For 3D records (observed.h5 with rec_y) the gathers show the receiver line nearest each
source in y.

A missing or unreadable summary.json is an error (exit 1).
"""

import argparse
import glob
import json
import os
import re
import sys

import matplotlib

matplotlib.use("Agg")
import h5py  # noqa: E402
import matplotlib.pyplot as plt  # noqa: E402
import matplotlib.ticker as mticker  # noqa: E402
import numpy as np  # noqa: E402
from ksweep_figures import records_dataset, save_atomic, shot_geometry  # noqa: E402
from mpl_toolkits.axes_grid1 import make_axes_locatable  # noqa: E402

PROG = "plot_fwi.py"
DPI = 150
EPOCH_RE = re.compile(r"^epoch_(\d+)\.h5$")


def note(msg):
    print(f"{PROG}: {msg}", file=sys.stderr)


def fmt_num(value, spec):
    """Format a number that may be missing (None / NaN) from the inputs."""
    try:
        v = float(value)
    except (TypeError, ValueError):
        return "n/a"
    if not np.isfinite(v):
        return "n/a"
    return format(v, spec)


def model_extent(nz, nx, dh):
    k = dh / 1000.0
    return [-0.5 * k, (nx - 0.5) * k, (nz - 0.5) * k, -0.5 * k]


# --------------------------------------------------------------------------- ricker

def plot_ricker(summary, out):
    wav = summary.get("wavelet")
    if not isinstance(wav, dict) or "dt" not in wav:
        note("summary.json has no 'wavelet' section with 'dt'; skipping ricker.png")
        return False
    dt = float(wav["dt"])
    freq = wav.get("freq")
    freq = float(freq) if freq is not None else None
    delay = wav.get("delay")
    delay = float(delay) if delay is not None else None
    samples = wav.get("samples")
    if samples:
        w = np.asarray(samples, dtype=np.float64)
    elif freq is not None and freq > 0:
        # No samples stored: synthesise the analytic Ricker wavelet from freq/delay.
        if delay is None:
            delay = 1.0 / freq
        n = int(np.ceil((delay + 3.0 / freq) / dt)) + 1
        t = np.arange(n) * dt - delay
        a = (np.pi * freq * t) ** 2
        w = (1.0 - 2.0 * a) * np.exp(-a)
    else:
        note("summary.json 'wavelet' has neither 'samples' nor 'freq'; skipping ricker.png")
        return False
    n = w.size
    t = np.arange(n) * dt

    # Time window: the wavelet usually sits at the start of a long trace; crop to
    # where it is significant so its shape is visible.
    peak = np.max(np.abs(w)) if n else 0.0
    if peak > 0:
        sig = np.nonzero(np.abs(w) > 1e-3 * peak)[0]
        i1 = min(n - 1, sig[-1] + max(5, (sig[-1] - sig[0]) // 4))
    else:
        i1 = n - 1
    cropped = i1 < n - 1

    nfft = max(4096, 1 << int(np.ceil(np.log2(max(n, 1)))) + 1)
    spec = np.abs(np.fft.rfft(w, nfft)) * dt
    f = np.fft.rfftfreq(nfft, dt)
    ipk = int(np.argmax(spec))
    f_peak = f[ipk]
    if 0 < ipk < spec.size - 1:
        # Parabolic interpolation of the peak between FFT bins.
        y0, y1, y2 = spec[ipk - 1], spec[ipk], spec[ipk + 1]
        den = y0 - 2.0 * y1 + y2
        if den < 0:
            f_peak = f[ipk] + 0.5 * (y0 - y2) / den * (f[1] - f[0])
    if spec[ipk] > 0:
        above = np.nonzero(spec > 1e-3 * spec[ipk])[0]
        f_max = min(f[-1], 1.15 * f[above[-1]])
    else:
        f_max = f[-1]
    if freq is not None:
        f_max = min(f[-1], max(f_max, 1.3 * freq))

    fig, (ax0, ax1) = plt.subplots(1, 2, figsize=(11, 4))
    ax0.plot(t[:i1 + 1], w[:i1 + 1], color="C0", lw=1.5)
    ax0.axhline(0.0, color="0.6", lw=0.8)
    if delay is not None and delay <= t[i1]:
        ax0.axvline(delay, color="C3", ls="--", lw=1.0, label=f"delay = {delay:g} s")
        ax0.legend(loc="upper right", fontsize=9)
    ax0.set_xlim(0.0, t[i1] if i1 > 0 else dt)
    ax0.set_xlabel("time (s)")
    ax0.set_ylabel("amplitude")
    crop_note = f", first {t[i1]:.3g} s of {(n - 1) * dt:.3g} s" if cropped else ""
    ax0.set_title(f"source wavelet ({n} samples, dt = {dt:g} s{crop_note})", fontsize=10)
    ax0.grid(alpha=0.3)

    ax1.plot(f, spec, color="C0", lw=1.5)
    ax1.axvline(f_peak, color="C3", ls="--", lw=1.0, label=f"spectral peak {f_peak:.2f} Hz")
    ax1.plot([f_peak], [spec[ipk]], "o", color="C3", ms=5)
    if freq is not None:
        ax1.axvline(freq, color="C2", ls=":", lw=1.5, label=f"nominal peak {freq:g} Hz")
    ax1.set_xlim(0.0, f_max)
    ax1.set_ylim(0.0, 1.08 * spec[ipk] if spec[ipk] > 0 else 1.0)
    ax1.set_xlabel("frequency (Hz)")
    ax1.set_ylabel("|W(f)| (amplitude x s)")
    ax1.set_title("amplitude spectrum", fontsize=10)
    ax1.legend(loc="upper right", fontsize=9)
    ax1.grid(alpha=0.3)
    title = "Ricker source wavelet"
    if freq is not None:
        title += f": f = {freq:g} Hz"
    fig.suptitle(title)
    fig.tight_layout()
    save_atomic(fig, out, DPI)
    plt.close(fig)
    return True


# --------------------------------------------------------------------------- wavelet.h5

def plot_wavelets(summary, path, out):
    """wavelet.h5 of a run whose wavelet is estimated or read from a file: the source over the
    whole band, the Ricker reference of an estimate, and each frequency stage's low-passed
    wavelet, in time and as amplitude spectra."""
    with h5py.File(path, "r") as f:
        dt = float(f.attrs["dt"])
        names = ["wavelet"] + (["reference"] if "reference" in f else []) + sorted(
            (k for k in f if k.startswith("stage_")), key=lambda k: int(k.split("_")[1]))
        traces = {k: np.asarray(f[k], dtype=np.float64) for k in names}
    wav = summary.get("wavelet") if isinstance(summary.get("wavelet"), dict) else {}
    source = wav.get("source", "?")
    stages = ((summary.get("config") or {}).get("fwi") or {}).get("stages") or []
    w = traces["wavelet"]
    n = w.size
    t = np.arange(n) * dt
    peak = np.max(np.abs(w))
    sig = np.nonzero(np.abs(w) > 1e-2 * peak)[0] if peak > 0 else np.array([0, n - 1])
    i1 = min(n - 1, sig[-1] + max(5, (sig[-1] - sig[0]) // 3))
    nfft = max(4096, 1 << int(np.ceil(np.log2(max(n, 1)))) + 1)
    f = np.fft.rfftfreq(nfft, dt)
    spectra = {k: np.abs(np.fft.rfft(v, nfft)) * dt for k, v in traces.items()}
    top = max(s.max() for s in spectra.values())
    above = np.nonzero(spectra["wavelet"] > 1e-2 * spectra["wavelet"].max())[0]
    f_max = min(f[-1], 1.3 * f[above[-1]]) if above.size else f[-1]

    fig, (ax0, ax1) = plt.subplots(1, 2, figsize=(12, 4.2))
    label = {"wavelet": "estimated" if source == "estimate" else "source (file)",
             "reference": f"Ricker reference ({fmt_num(wav.get('freq'), 'g')} Hz)"}
    for k, st in zip([k for k in names if k.startswith("stage_")], stages):
        label[k] = f"stage {k.split('_')[1]}: below {st.get('max_freq'):g} Hz"
    style = {"wavelet": dict(color="k", lw=1.8), "reference": dict(color="C3", lw=1.2, ls="--")}
    stage_colors = ["C0", "C2", "C1", "C4", "C5", "C6", "C8", "C9"]
    for i, k in enumerate(names):
        kw = style.get(k, dict(color=stage_colors[i % len(stage_colors)], lw=1.0))
        ax0.plot(t[:i1 + 1], traces[k][:i1 + 1], label=label.get(k, k), **kw)
        ax1.plot(f, spectra[k], label=label.get(k, k), **kw)
    ax0.axhline(0.0, color="0.6", lw=0.8)
    ax0.set_xlim(0.0, t[i1])
    ax0.set_xlabel("time (s)")
    ax0.set_ylabel("amplitude")
    ax0.set_title(f"wavelets (dt = {dt:g} s, first {t[i1]:.3g} s of {(n - 1) * dt:.3g} s)", fontsize=10)
    ax0.grid(alpha=0.3)
    ax0.legend(fontsize=8, loc="upper right")
    ax1.set_xlim(0.0, f_max)
    ax1.set_ylim(0.0, 1.08 * top)
    ax1.set_xlabel("frequency (Hz)")
    ax1.set_ylabel("|W(f)| (amplitude x s)")
    ax1.set_title("amplitude spectra", fontsize=10)
    ax1.grid(alpha=0.3)
    est = wav.get("estimate") if isinstance(wav.get("estimate"), dict) else None
    title = "source wavelet " + ("estimated from the observed data" if source == "estimate" else "from " + str(source))
    if est:
        title += (f": unexplained data {fmt_num(est.get('residual'), '.3f')} "
                  f"(Ricker reference {fmt_num(est.get('residual_reference'), '.3f')}) on the starting model")
    fig.suptitle(title, fontsize=11)
    fig.tight_layout()
    save_atomic(fig, out, DPI)
    plt.close(fig)
    return True


# --------------------------------------------------------------------------- observed

def plot_observed(path, out):
    if not os.path.isfile(path):
        note(f"{path} not found; skipping {os.path.basename(out)}")
        return False
    with h5py.File(path, "r") as f:
        dset = records_dataset(f, path)
        shots, nt, nrec = dset.shape
        if shots == 0 or nt == 0 or nrec == 0:
            note(f"{path} holds no data (shape {dset.shape}); skipping {os.path.basename(out)}")
            return False
        idx = sorted(set([0, shots // 2, shots - 1]))
        gathers = [np.asarray(dset[k], dtype=np.float64) for k in idx]
        dt = float(f.attrs["dt"])
        dh = float(f.attrs["dh"])
        three = "ny" in f.attrs
        geometry = [shot_geometry(f, k) for k in idx]
    # Each shot's receivers (their own spread), sorted along x; in 3D the receiver line nearest
    # the middle shot's source in y.
    panels, line_note = [], ""
    ly = None
    if three:
        src, rec = geometry[len(idx) // 2]
        ly = rec[np.argmin(np.abs(rec[:, 2] - src[2])), 2]
        line_note = f"; the line y = {ly / 1000.0:.3f} km of a 3D patch"
    for (src, rec), g in zip(geometry, gathers):
        keep = np.arange(len(rec))
        if three:
            keep = np.flatnonzero(np.abs(rec[:, 2] - ly) <= 1e-6 * dh)
        keep = keep[np.argsort(rec[keep, 1], kind="stable")]
        panels.append((src, rec[keep, 1] / 1000.0, g[:, keep]))
    nrec = max(len(p[1]) for p in panels)
    clip = float(np.percentile(np.abs(np.concatenate([p[2].ravel() for p in panels])), 98)) or 1.0
    t_max = (nt - 1) * dt

    ncol = len(idx)
    fig, axes = plt.subplots(1, ncol, figsize=(3.6 * ncol + 1.6, 6.5), sharey=True,
                             squeeze=False, layout="constrained")
    axes = axes[0]
    im = None
    for ax, k, (src, xs, g) in zip(axes, idx, panels):
        n = len(xs)
        uniform = n == 1 or (np.all(np.diff(xs) > 0)
                             and np.allclose(np.diff(xs), (xs[-1] - xs[0]) / (n - 1), rtol=1e-3, atol=1e-9))
        if uniform:
            half = 0.5 * (xs[-1] - xs[0]) / (n - 1) if n > 1 else 0.5 * dh / 1000.0
            extent = [xs[0] - half, xs[-1] + half, t_max + 0.5 * dt, -0.5 * dt]
            im = ax.imshow(g, cmap="gray", vmin=-clip, vmax=clip, aspect="auto",
                           extent=extent, interpolation="nearest")
        else:
            t = np.arange(nt) * dt
            im = ax.pcolormesh(xs, t, g, cmap="gray", vmin=-clip, vmax=clip,
                               shading="nearest", rasterized=True)
            ax.set_ylim(t_max, 0.0)
        sx = src[1] / 1000.0
        ax.axvline(sx, color="C3", lw=0.8, ls="--", alpha=0.7)
        ax.set_title(f"shot {k + 1}/{shots}: source x = {sx:.3f} km, z = {src[0] / 1000.0:.4f} km", fontsize=9)
        ax.set_xlabel("receiver position x (km)")
    axes[0].set_ylabel("time (s)")
    fig.suptitle(f"observed data ({nrec} receivers{line_note}, {nt} samples, dt = {dt:g} s; "
                 "dashed line: source x)", fontsize=11)
    cbar = fig.colorbar(im, ax=list(axes), fraction=0.03, pad=0.02, aspect=40)
    cbar.set_label("amplitude (clipped at 98th percentile of |data|)")
    save_atomic(fig, out, DPI)
    plt.close(fig)
    return True


# --------------------------------------------------------------------------- loss

def loss_segments(its):
    """The loss against the model it was measured on (x: iterations done, 0 = the starting
    model), one segment per frequency stage (each stage fits other data). L-BFGS rows give the
    loss after their step ('loss') and before it ('loss_start', which starts each segment); Adam
    rows give their batch's loss before the step."""
    segments, cur, stage = [], None, object()
    for r in its:
        try:
            k = int(r["iteration"])
            loss = r.get("loss")
        except (KeyError, TypeError, ValueError):
            continue
        if cur is None or r.get("stage") != stage:
            cur = ([], [])
            segments.append(cur)
            stage = r.get("stage")
            if r.get("loss_start") is not None:
                cur[0].append(k - 1)
                cur[1].append(float(r["loss_start"]))
        if r.get("loss_start") is not None:
            cur[0].append(k)
        else:
            cur[0].append(k - 1)
        cur[1].append(float(loss) if loss is not None else np.nan)
    return [(np.array(x), np.array(y)) for x, y in segments]


def plot_loss(summary, out):
    its = summary.get("iterations") or []
    rows = []
    for r in its:
        try:
            rows.append((int(r["iteration"]), r.get("loss"), r.get("rmse"), r.get("rmse_rho")))
        except (KeyError, TypeError, ValueError):
            continue
    if not rows:
        note("summary.json has no iterations yet; skipping loss.png")
        return False
    init = summary.get("initial")
    if isinstance(init, dict):
        rows.insert(0, (0, init.get("loss"), init.get("rmse"), init.get("rmse_rho")))

    def col(i):
        return np.array([float(r[i]) if r[i] is not None else np.nan for r in rows])

    it = np.array([r[0] for r in rows])
    rmse = col(2)
    have_rmse = np.any(np.isfinite(rmse))
    rmse_rho = col(3)
    have_rho = np.any(np.isfinite(rmse_rho))
    segments = loss_segments(its)
    before = not any(isinstance(r, dict) and r.get("loss_start") is not None for r in its)

    ncol = 2 if have_rmse else 1
    fig, axes = plt.subplots(1, ncol, figsize=(5.5 * ncol, 4.2), squeeze=False)
    axes = axes[0]
    ax = axes[0]
    marker = "o" if it.size <= 60 else None
    for x, y in segments:
        ax.plot(x, y, marker=marker, ms=4, color="C0")
    loss = np.concatenate([y for _, y in segments]) if segments else np.array([])
    good = loss[np.isfinite(loss)]
    if good.size and np.all(good > 0):
        ax.set_yscale("log")
        if good.max() / good.min() < 30.0:
            # Less than ~1.5 decades: default log ticks would leave most of the axis
            # unlabelled, so label 1-2-5 style values in plain notation.
            ax.yaxis.set_major_locator(mticker.LogLocator(subs=(1.0, 2.0, 3.0, 5.0)))
            ax.yaxis.set_major_formatter(mticker.FormatStrFormatter("%g"))
            ax.yaxis.set_minor_formatter(mticker.NullFormatter())
    ax.set_xlabel("iterations done (0: starting model)")
    ax.set_ylabel("loss (misfit)" + (", the iteration's batch" if before else ""))
    ax.set_title("data misfit of the model", fontsize=10)
    ax.grid(alpha=0.3, which="major")
    if have_rmse:
        ax = axes[1]
        ax.plot(it, rmse, marker=marker, ms=4, color="C1")
        ax.set_xlabel("iterations done (0: starting model)")
        ax.set_ylabel("model RMSE (m/s)")
        ax.set_title("model error vs. true model", fontsize=10)
        ax.grid(alpha=0.3)
        if have_rho:  # variable density: the density's error on a second axis
            ax2 = ax.twinx()
            ax2.plot(it, rmse_rho, marker=marker, ms=4, color="C2")
            ax2.set_ylabel("density RMSE (kg/m^3)", color="C2")
            ax.set_ylabel("velocity RMSE (m/s)", color="C1")
    # Frequency stages: a line where each begins (each stage fits other data, so the loss jumps).
    stages = ((summary.get("config") or {}).get("fwi") or {}).get("stages") or []
    starts, prev = [], None
    for r in its:
        if isinstance(r, dict) and r.get("stage") is not None and r.get("stage") != prev:
            starts.append((int(r["iteration"]), int(r["stage"])))
            prev = r.get("stage")
    for first, k in starts:
        freq = stages[k - 1].get("max_freq") if 0 < k <= len(stages) else None
        for i, ax in enumerate(axes):
            ax.axvline(first - 1, color="0.5", ls="--", lw=0.8)
            if i == 0:
                # Alternate heights, so that the labels of short stages do not overlap.
                ax.text(first - 0.8, 0.99 - 0.06 * ((k - 1) % 2), f" stage {k}" + (f": < {freq:g} Hz" if freq is not None else ""),
                        transform=ax.get_xaxis_transform(), va="top", ha="left", fontsize=8, color="0.3")
    for ax in axes:
        ax.xaxis.get_major_locator().set_params(integer=True)
    last = rows[-1]
    final_loss = segments[-1][1][-1] if segments and segments[-1][1].size else None
    fig.suptitle(f"FWI convergence: {len(its)} iterations, last loss {fmt_num(final_loss, '.4g')}, "
                 f"RMSE {fmt_num(last[2], '.1f')} m/s"
                 + (f", density RMSE {fmt_num(last[3], '.1f')} kg/m^3" if have_rho else ""), fontsize=11)
    fig.tight_layout()
    save_atomic(fig, out, DPI)
    plt.close(fig)
    return True


# --------------------------------------------------------------------------- epochs

def read_model(path, name="vp"):
    with h5py.File(path, "r") as f:
        if name not in f:
            raise ValueError(f"{path} has no dataset '{name}'")
        a = np.asarray(f[name], dtype=np.float64)
        if a.ndim not in (2, 3):
            raise ValueError(f"dataset '{name}' in {path} has rank {a.ndim}, expected 2 or 3")
        dh = float(f.attrs["dh"]) if "dh" in f.attrs else None
    return a, dh


def list_epochs(outdir):
    found = {}
    for p in glob.glob(os.path.join(outdir, "epochs", "epoch_*.h5")):
        m = EPOCH_RE.match(os.path.basename(p))
        if m:
            found[int(m.group(1))] = p
    return found


def select_epochs(found, spec):
    its = sorted(found)
    spec = spec.strip().lower()
    if spec == "all":
        return its
    if spec == "last":
        return its[-1:]
    wanted = []
    for tok in spec.split(","):
        tok = tok.strip()
        if tok:
            wanted.append(int(tok))
    chosen = []
    for n in wanted:
        if n in found:
            if n not in chosen:
                chosen.append(n)
        else:
            note(f"epoch {n} not found under epochs/; skipping it")
    return chosen


def add_panel(fig, ax, img, extent, title, cbar_label, **kw):
    im = ax.imshow(img, extent=extent, aspect="equal", interpolation="nearest", **kw)
    ax.set_title(title, fontsize=10, loc="left")
    ax.set_xlabel("x (km)", fontsize=9)
    ax.set_ylabel("depth (km)", fontsize=9)
    ax.tick_params(labelsize=8)
    cax = make_axes_locatable(ax).append_axes("right", size="1.5%", pad=0.1)
    cbar = fig.colorbar(im, cax=cax)
    cbar.set_label(cbar_label, fontsize=8)
    cbar.ax.tick_params(labelsize=7)
    return im


def log_illum(a):
    pos = a[np.isfinite(a) & (a > 0)]
    if pos.size == 0:
        return np.zeros_like(a), (0.0, 1.0)
    hi = float(pos.max())
    lo = max(float(np.percentile(pos, 0.5)), hi * 1e-8)
    out = np.log10(np.clip(np.where(np.isfinite(a), a, lo), lo, None))
    vmin, vmax = np.log10(lo), np.log10(hi)
    if vmax <= vmin:
        vmin = vmax - 1.0
    return out, (vmin, vmax)


def plot_epoch(path, iteration, true_vp, true_dh, start_vp, summary_rows, dh_default, out):
    with h5py.File(path, "r") as f:
        fields = {}
        for name in ("vp", "grad", "illum_src", "illum_rec"):
            if name in f:
                a = np.asarray(f[name], dtype=np.float64)
                if a.ndim not in (2, 3):
                    raise ValueError(f"dataset '{name}' in {path} has rank {a.ndim}, expected 2 or 3")
                fields[name] = a
            else:
                note(f"{path} has no dataset '{name}'; its panel is left empty")
        dh = float(f.attrs["dh"]) if "dh" in f.attrs else dh_default
        loss = f.attrs.get("loss")
        rmse = f.attrs.get("rmse")
        if "iteration" in f.attrs:
            iteration = int(f.attrs["iteration"])
    row = summary_rows.get(iteration, {})
    if loss is None:
        loss = row.get("loss")
    if rmse is None:
        rmse = row.get("rmse")
    if dh is None:
        dh = true_dh
    if dh is None:
        raise ValueError(f"{path} has no 'dh' attribute and summary.json no model.dh")

    shape = next((a.shape for a in fields.values()), true_vp.shape if true_vp is not None
                 else None)
    if shape is None:
        raise ValueError(f"{path} has none of the datasets vp, grad, illum_src, illum_rec")
    if len(shape) == 3:
        return plot_epoch_3d(fields, iteration, true_vp, dh, loss, rmse, out)
    nz, nx = shape
    extent = model_extent(nz, nx, dh)

    # Two columns of four panels: the models on the left (true, starting, inverted, the
    # update), the remaining error, gradient and illuminations on the right.
    width = 18.0
    # Axes take ~40% of the width each; each panel needs its image height plus room for
    # a title, tick labels and the x label.
    panel_h = 0.40 * width * nz / nx + 0.85
    height = min(40.0, 4 * panel_h + 0.6)
    fig, grid = plt.subplots(4, 2, figsize=(width, height))
    axes = grid[:, 0]
    right = grid[:, 1]

    def empty(ax, title):
        ax.set_title(title, fontsize=10, loc="left")
        ax.text(0.5, 0.5, "not available", ha="center", va="center", transform=ax.transAxes,
                color="0.4")
        ax.set_xticks([])
        ax.set_yticks([])
        cax = make_axes_locatable(ax).append_axes("right", size="1.5%", pad=0.1)
        cax.axis("off")

    ref = true_vp if true_vp is not None else start_vp
    if ref is not None:
        vmin, vmax = float(np.nanmin(ref)), float(np.nanmax(ref))
    else:
        vmin = vmax = None
    limits = " (true-model colour limits)" if true_vp is not None else ""
    if true_vp is not None:
        t_ext = model_extent(true_vp.shape[0], true_vp.shape[1], true_dh or dh)
        add_panel(fig, axes[0], true_vp, t_ext, "true model", "vp (m/s)", cmap="viridis",
                  vmin=vmin, vmax=vmax)
    else:
        empty(axes[0], "true model")
    same = lambda a: a is not None and a.shape == (nz, nx)
    if same(start_vp):
        add_panel(fig, axes[1], start_vp, extent, "starting model" + limits, "vp (m/s)",
                  cmap="viridis", vmin=vmin, vmax=vmax)
    else:
        empty(axes[1], "starting model")

    vp = fields.get("vp")
    if vp is not None:
        if vmin is None:
            vmin, vmax = float(np.nanmin(vp)), float(np.nanmax(vp))
        add_panel(fig, axes[2], vp, extent, f"inverted model after iteration {iteration}" + limits,
                  "vp (m/s)", cmap="viridis", vmin=vmin, vmax=vmax)
    else:
        empty(axes[2], f"inverted model after iteration {iteration}")

    # The update and the remaining error on one symmetric scale: that of the starting model's
    # error where known, so that the two compare directly.
    diffs = [d for d in ((true_vp - start_vp) if same(true_vp) and same(start_vp) else None,
                         (vp - start_vp) if vp is not None and same(start_vp) else None)
             if d is not None]
    dlim = None
    if diffs:
        finite = np.abs(diffs[0][np.isfinite(diffs[0])])
        dlim = float(np.percentile(finite, 99)) if finite.size else 0.0
        dlim = dlim if dlim > 0 else 1.0
    if vp is not None and same(start_vp):
        add_panel(fig, axes[3], vp - start_vp, extent, "update: inverted - starting",
                  "vp change (m/s)", cmap="seismic", vmin=-dlim, vmax=dlim)
    else:
        empty(axes[3], "update: inverted - starting")
    if vp is not None and same(true_vp):
        err = true_vp - vp
        rms = float(np.sqrt(np.nanmean(err ** 2)))
        add_panel(fig, right[0], err, extent, f"remaining error: true - inverted (RMSE {rms:.1f} m/s)",
                  "vp error (m/s)", cmap="seismic", vmin=-(dlim or 1.0), vmax=dlim or 1.0)
    else:
        empty(right[0], "remaining error: true - inverted")

    if "grad" in fields:
        g = fields["grad"]
        finite = np.abs(g[np.isfinite(g)])
        glim = float(np.percentile(finite, 99)) if finite.size else 0.0
        if not glim > 0:
            glim = float(finite.max()) if finite.size and finite.max() > 0 else 1.0
        # Put the power of ten into the colour-bar label instead of matplotlib's
        # offset text, which would collide with the panel title.
        exp = int(np.floor(np.log10(glim)))
        if -2 <= exp <= 3:
            exp = 0
        scale = 10.0 ** exp
        unit = "d loss / d vp" + (f" (x 1e{exp})" if exp else "")
        add_panel(fig, right[1], g / scale, extent,
                  "gradient (clipped at 99th percentile of |grad|)", unit, cmap="seismic",
                  vmin=-glim / scale, vmax=glim / scale)
    else:
        empty(right[1], "gradient")

    for ax, name, label in ((right[2], "illum_src", "source illumination"),
                            (right[3], "illum_rec", "receiver illumination")):
        if name in fields:
            img, (lo, hi) = log_illum(fields[name])
            add_panel(fig, ax, img, extent, f"{label} (log10)", "log10(illumination)",
                      cmap="viridis", vmin=lo, vmax=hi)
        else:
            empty(ax, label)

    finish_panels(fig, f"FWI iteration {iteration}: loss = {fmt_num(loss, '.4g')}, "
                  f"model RMSE = {fmt_num(rmse, '.1f')} m/s  ({nz} x {nx}, dh = {dh:g} m)", out)


def finish_panels(fig, title, out):
    """The title over a column of panels, laid out and saved atomically."""
    fig.suptitle(title, fontsize=12)
    # Leave room for the suptitle: tight_layout alone lets it overlap the first panel.
    fig.tight_layout(rect=(0, 0, 1, 1 - 0.5 / fig.get_figheight()), h_pad=0.6)
    save_atomic(fig, out, DPI)
    plt.close(fig)


def plot_density_epoch(path, iteration, true_rho, start_rho, dh_default, summary_rows, out):
    """Variable density, 2D: the true, starting and inverted density, the change made and the
    density gradient of epochs/epoch_XXXX.h5. Returns False (nothing written) for epochs
    without a density."""
    with h5py.File(path, "r") as f:
        if "rho" not in f:
            return False
        rho = np.asarray(f["rho"], dtype=np.float64)
        grad = np.asarray(f["grad_rho"], dtype=np.float64) if "grad_rho" in f else None
        dh = float(f.attrs["dh"]) if "dh" in f.attrs else dh_default
    if rho.ndim != 2:
        note(f"{path}: the density figure is drawn for 2D models only")
        return False
    nz, nx = rho.shape
    extent = model_extent(nz, nx, dh)
    row = summary_rows.get(iteration, {})
    panels = [("true density", true_rho), ("starting density", start_rho),
              (f"inverted density after iteration {iteration}", rho)]
    ref = true_rho if true_rho is not None else rho
    lo, hi = float(np.nanmin(ref)), float(np.nanmax(ref))
    width = 10.0
    panel_h = 0.84 * width * nz / nx + 0.85
    fig, axes = plt.subplots(5, 1, figsize=(width, min(40.0, 5 * panel_h + 0.6)))
    for ax, (title, a) in zip(axes[:3], panels):
        if a is None:
            ax.set_title(title + ": not available", fontsize=10, loc="left")
            ax.axis("off")
            continue
        add_panel(fig, ax, a, extent, title, "rho (kg/m^3)", cmap="cividis", vmin=lo, vmax=hi)
    if start_rho is not None:
        d = rho - start_rho
        lim = float(np.nanmax(np.abs(d))) or 1.0
        add_panel(fig, axes[3], d, extent, "density change (inverted - starting)", "kg/m^3",
                  cmap="seismic", vmin=-lim, vmax=lim)
    else:
        axes[3].axis("off")
    if grad is not None:
        glim, exp = grad_limits(grad)
        scale = 10.0 ** exp
        add_panel(fig, axes[4], grad / scale, extent,
                  "density gradient (clipped at 99th percentile)",
                  "d loss / d rho" + (f" (x 1e{exp})" if exp else ""), cmap="seismic",
                  vmin=-glim / scale, vmax=glim / scale)
    else:
        axes[4].axis("off")
    finish_panels(fig, f"FWI iteration {iteration}: density RMSE = "
                  f"{fmt_num(row.get('rmse_rho'), '.1f')} kg/m^3  ({nz} x {nx}, dh = {dh:g} m)", out)
    return True


def grad_limits(g):
    """Colour limit (99th percentile of |g|) and the power of ten put into the label."""
    finite = np.abs(g[np.isfinite(g)])
    glim = float(np.percentile(finite, 99)) if finite.size else 0.0
    if not glim > 0:
        glim = float(finite.max()) if finite.size and finite.max() > 0 else 1.0
    exp = int(np.floor(np.log10(glim)))
    if -2 <= exp <= 3:
        exp = 0
    return glim, exp


def plot_epoch_3d(fields, iteration, true_vp, dh, loss, rmse, out):
    """Rows: true model, inverted model, gradient, source and receiver illumination; columns:
    the depth slice z = z0 (a y-x map), the inline y = y0 (z-x) and the crossline x = x0 (z-y),
    through the middle of the model in y and x and at 55 % of its depth."""
    shape = next(a.shape for a in fields.values()) if fields else true_vp.shape
    nz, ny, nx = shape
    z0, y0, x0 = int(0.55 * (nz - 1)), (ny - 1) // 2, (nx - 1) // 2
    km = dh / 1000.0
    cuts = [  # (title, slice of a volume, extent, x label, y label)
        (f"depth slice z = {z0 * km:.3f} km", lambda a: a[z0], [-0.5 * km, (nx - 0.5) * km, (ny - 0.5) * km, -0.5 * km],
         "x (km)", "y (km)"),
        (f"inline y = {y0 * km:.3f} km", lambda a: a[:, y0, :], [-0.5 * km, (nx - 0.5) * km, (nz - 0.5) * km, -0.5 * km],
         "x (km)", "depth (km)"),
        (f"crossline x = {x0 * km:.3f} km", lambda a: a[:, :, x0],
         [-0.5 * km, (ny - 0.5) * km, (nz - 0.5) * km, -0.5 * km], "y (km)", "depth (km)"),
    ]
    rows = [("true model", true_vp), (f"inverted, iteration {iteration}", fields.get("vp")),
            ("gradient", fields.get("grad")), ("source illumination (log10)", fields.get("illum_src")),
            ("receiver illumination (log10)", fields.get("illum_rec"))]
    widths = [nx, nx, ny]
    fig, axes = plt.subplots(5, 3, figsize=(13, 14), gridspec_kw={"width_ratios": widths})
    vref = true_vp if true_vp is not None else fields.get("vp")
    vmin = float(np.nanmin(vref)) if vref is not None else None
    vmax = float(np.nanmax(vref)) if vref is not None else None
    for r, (label, vol) in enumerate(rows):
        for c, (ctitle, cut, extent, xl, yl) in enumerate(cuts):
            ax = axes[r, c]
            if vol is None:
                ax.set_title(f"{label}: not available", fontsize=9, loc="left")
                ax.set_xticks([])
                ax.set_yticks([])
                continue
            img = cut(vol)
            kw = {"cmap": "viridis", "vmin": vmin, "vmax": vmax}
            unit = "vp (m/s)"
            if label == "gradient":
                glim, exp = grad_limits(vol)
                scale = 10.0 ** exp
                img = img / scale
                kw = {"cmap": "seismic", "vmin": -glim / scale, "vmax": glim / scale}
                unit = "d loss / d vp" + (f" (x 1e{exp})" if exp else "")
            elif "illumination" in label:
                _, (lo, hi) = log_illum(vol)
                img, _ = log_illum(img)
                kw = {"cmap": "viridis", "vmin": lo, "vmax": hi}
                unit = "log10"
            im = ax.imshow(img, extent=extent, aspect="equal", interpolation="nearest", **kw)
            ax.set_title(f"{label}: {ctitle}", fontsize=9, loc="left")
            ax.set_xlabel(xl, fontsize=8)
            ax.set_ylabel(yl, fontsize=8)
            ax.tick_params(labelsize=7)
            if c == 2:
                cax = make_axes_locatable(ax).append_axes("right", size="4%", pad=0.08)
                cbar = fig.colorbar(im, cax=cax)
                cbar.set_label(unit, fontsize=8)
                cbar.ax.tick_params(labelsize=7)
    fig.suptitle(f"3D FWI iteration {iteration}: loss = {fmt_num(loss, '.4g')}, model RMSE = {fmt_num(rmse, '.1f')} "
                 f"m/s  ({nz} x {ny} x {nx}, dh = {dh:g} m; gradient clipped at the 99th percentile of |grad|)",
                 fontsize=12)
    fig.tight_layout(rect=(0, 0, 1, 0.97), h_pad=0.8)
    save_atomic(fig, out, DPI)
    plt.close(fig)


# --------------------------------------------------------------------------- main

def main(argv=None):
    parser = argparse.ArgumentParser(
        description="Plot the output folder of `ksweep fwi` into OUTDIR/figures/.")
    parser.add_argument("outdir", help="output folder of `ksweep fwi` (holds summary.json)")
    parser.add_argument("--epochs", default="all",
                        help="which epoch files to plot: all, last, or a comma-separated "
                             "list of iteration numbers (default all)")
    args = parser.parse_args(argv)

    spec = args.epochs.strip().lower()
    if spec not in ("all", "last") and not re.fullmatch(r"\s*\d+\s*(,\s*\d+\s*)*,?\s*", spec):
        parser.error(f"--epochs must be all, last or N,M,...; got {args.epochs!r}")

    outdir = args.outdir
    summary_path = os.path.join(outdir, "summary.json")
    try:
        with open(summary_path, "r", encoding="utf-8") as fh:
            summary = json.load(fh)
        if not isinstance(summary, dict):
            raise ValueError(f"{summary_path} does not hold a JSON object")
    except (OSError, ValueError) as e:
        print(f"{PROG}: error: cannot read {summary_path}: {e}", file=sys.stderr)
        return 1

    figdir = os.path.join(outdir, "figures")
    try:
        os.makedirs(figdir, exist_ok=True)
    except OSError as e:
        print(f"{PROG}: error: cannot create {figdir}: {e}", file=sys.stderr)
        return 1

    failed = False
    written = []

    def attempt(name, fn, *fargs):
        nonlocal failed
        out = os.path.join(figdir, name)
        try:
            if fn(*fargs, out) is not False:
                written.append(out)
        except (OSError, KeyError, ValueError, TypeError) as e:
            print(f"{PROG}: error: {name}: {e}", file=sys.stderr)
            failed = True

    wav = summary.get("wavelet") if isinstance(summary.get("wavelet"), dict) else {}
    wavelet_h5 = os.path.join(outdir, "wavelet.h5")
    if wav.get("source", "ricker") != "ricker" and os.path.isfile(wavelet_h5):
        attempt("wavelet.png", plot_wavelets, summary, wavelet_h5)
    else:
        attempt("ricker.png", plot_ricker, summary)
    attempt("observed_data.png", plot_observed, os.path.join(outdir, "observed.h5"))
    attempt("loss.png", plot_loss, summary)

    found = list_epochs(outdir)
    if not found:
        note(f"no epoch files under {os.path.join(outdir, 'epochs')}; skipping epoch figures")
    else:
        chosen = select_epochs(found, spec)
        model = summary.get("model") if isinstance(summary.get("model"), dict) else {}
        dh_default = float(model["dh"]) if model.get("dh") is not None else None
        true_vp, true_dh = None, dh_default
        true_path = os.path.join(outdir, "true_model.h5")
        if os.path.isfile(true_path):
            try:
                true_vp, dh_t = read_model(true_path)
                true_dh = dh_t if dh_t is not None else dh_default
            except (OSError, KeyError, ValueError) as e:
                print(f"{PROG}: error: {e}", file=sys.stderr)
                failed = True
        else:
            note(f"{true_path} not found; epoch figures show no true model")
        rows = {}
        for r in summary.get("iterations") or []:
            if isinstance(r, dict) and "iteration" in r:
                rows[int(r["iteration"])] = r
        start_vp = None
        start_path = os.path.join(outdir, "initial_model.h5")
        if os.path.isfile(start_path):
            try:
                start_vp, _ = read_model(start_path)
            except (OSError, KeyError, ValueError) as e:
                print(f"{PROG}: error: {e}", file=sys.stderr)
                failed = True
        else:
            note(f"{start_path} not found; epoch figures show no starting model")
        true_rho = start_rho = None
        for name, path in (("true", true_path), ("start", os.path.join(outdir, "initial_model.h5"))):
            try:
                with h5py.File(path, "r") as f:
                    if "rho" in f:
                        a = np.asarray(f["rho"], dtype=np.float64)
                        true_rho, start_rho = (a, start_rho) if name == "true" else (true_rho, a)
            except OSError:
                pass
        for n in chosen:
            attempt(f"epoch_{n:04d}.png", plot_epoch, found[n], n, true_vp, true_dh, start_vp, rows,
                    dh_default)
            attempt(f"density_{n:04d}.png", plot_density_epoch, found[n], n, true_rho, start_rho,
                    dh_default, rows)

    for p in written:
        print(p)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
