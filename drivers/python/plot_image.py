#!/usr/bin/python3
"""Figures of `ksweep rtm`: the background model and the images (the true perturbation when the
data were modelled, RTM, least-squares RTM), with depth and distance axes, and LSRTM's data
misfit per iteration. A 3D image is shown in its middle y plane.

Usage: plot_image.py image.h5 summary.json FIGURES_DIR
"""

import argparse
import json
import os
import sys

import matplotlib

matplotlib.use("Agg")
import h5py  # noqa: E402
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from ksweep_figures import save_atomic  # noqa: E402

PANELS = [("background", "background velocity (m/s)", "viridis"),
          ("perturbation", "true perturbation: model - background (m/s)", "seismic"),
          ("rtm", "RTM image", "gray"),
          ("lsrtm", "least-squares RTM image (m/s)", "seismic")]


def plane(a):
    return a[:, a.shape[1] // 2, :] if a.ndim == 3 else a


def main(argv=None):
    parser = argparse.ArgumentParser(description="Plot the images of ksweep rtm.")
    parser.add_argument("images", help="image.h5")
    parser.add_argument("summary", help="summary.json")
    parser.add_argument("out", help="folder for the PNGs")
    args = parser.parse_args(argv)
    try:
        with h5py.File(args.images, "r") as f:
            data = {name: plane(np.asarray(f[name], dtype=np.float64)) for name, _, _ in PANELS if name in f}
            dh = float(f.attrs["dh"])
        with open(args.summary) as s:
            summary = json.load(s)
    except (OSError, KeyError, ValueError) as e:
        print(f"plot_image.py: error: {e}", file=sys.stderr)
        return 1
    corr = summary.get("correlation", {})
    panels = [p for p in PANELS if p[0] in data]
    nz, nx = data["rtm"].shape
    extent = [-0.5 * dh / 1000, (nx - 0.5) * dh / 1000, (nz - 0.5) * dh / 1000, -0.5 * dh / 1000]
    width = 10.0
    row = max(1.8, min(5.0, 0.8 * width * nz / nx + 0.6))
    fig, axes = plt.subplots(len(panels), 1, figsize=(width, row * len(panels)), squeeze=False)
    for ax, (name, title, cmap) in zip(axes[:, 0], panels):
        a = data[name]
        if name == "background":
            im = ax.imshow(a, cmap=cmap, extent=extent, aspect="equal", interpolation="nearest")
        else:
            clip = np.percentile(np.abs(a), 99) or 1.0
            im = ax.imshow(a, cmap=cmap, extent=extent, aspect="equal", interpolation="nearest", vmin=-clip,
                           vmax=clip)
        if name in corr:
            title += f"; correlation with the true perturbation {corr[name]:.3f}"
        ax.set_title(title, fontsize=10)
        ax.set_ylabel("depth (km)")
        fig.colorbar(im, ax=ax, fraction=0.02, pad=0.01)
    axes[-1, 0].set_xlabel("x (km)")
    fig.tight_layout()
    save_atomic(fig, os.path.join(args.out, "images.png"), 120)
    plt.close(fig)
    misfit = summary.get("lsrtm_misfit")
    if misfit:
        fig, ax = plt.subplots(figsize=(6, 4))
        ax.semilogy(np.arange(1, len(misfit) + 1), misfit, "o-")
        ax.set_xlabel("LSRTM iteration")
        ax.set_ylabel("|J m - d| / |d|")
        ax.set_title("least-squares RTM: relative data misfit")
        ax.grid(True, which="both", alpha=0.3)
        fig.tight_layout()
        save_atomic(fig, os.path.join(args.out, "lsrtm_misfit.png"), 120)
        plt.close(fig)
    return 0


if __name__ == "__main__":
    sys.exit(main())
