#!/usr/bin/python3
"""Plot a velocity model (HDF5 dataset 'vp' [nz][nx], file attribute 'dh') as a PNG.

Usage: plot_model.py model.h5 out.png [--dataset vp] [--title TEXT]
"""

import argparse
import os
import sys

import matplotlib

matplotlib.use("Agg")
import h5py  # noqa: E402
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from ksweep_figures import save_atomic  # noqa: E402
from mpl_toolkits.axes_grid1 import make_axes_locatable  # noqa: E402


def main(argv=None):
    parser = argparse.ArgumentParser(description="Plot a velocity model from an HDF5 file.")
    parser.add_argument("model", help="HDF5 file with a 2D dataset [nz][nx] and attribute 'dh'")
    parser.add_argument("out", help="output PNG")
    parser.add_argument("--dataset", default="vp", help="dataset name (default vp)")
    parser.add_argument("--title", default=None, help="plot title (default: file and dataset)")
    args = parser.parse_args(argv)

    try:
        with h5py.File(args.model, "r") as f:
            if args.dataset not in f:
                raise ValueError(f"{args.model} has no dataset '{args.dataset}'")
            vp = np.asarray(f[args.dataset], dtype=np.float64)
            if vp.ndim != 2:
                raise ValueError(f"dataset '{args.dataset}' in {args.model} has rank {vp.ndim}, "
                                 "expected 2 [nz][nx]")
            dh = float(f.attrs["dh"])
    except (OSError, KeyError, ValueError) as e:
        print(f"plot_model.py: error: {e}", file=sys.stderr)
        return 1

    nz, nx = vp.shape
    extent = [-0.5 * dh / 1000, (nx - 0.5) * dh / 1000, (nz - 0.5) * dh / 1000, -0.5 * dh / 1000]
    width = 10.0
    height = max(2.5, min(8.0, 0.85 * width * nz / nx + 1.3))
    fig, ax = plt.subplots(figsize=(width, height))
    im = ax.imshow(vp, cmap="viridis", extent=extent, aspect="equal", interpolation="nearest")
    ax.set_xlabel("x (km)")
    ax.set_ylabel("depth (km)")
    title = args.title or f"{os.path.basename(args.model)}: {args.dataset}"
    ax.set_title(f"{title} ({nz} x {nx}, dh = {dh:g} m)")
    cax = make_axes_locatable(ax).append_axes("right", size="2%", pad=0.15)
    cbar = fig.colorbar(im, cax=cax)
    cbar.set_label("m/s")
    fig.tight_layout()
    save_atomic(fig, args.out, 150)
    plt.close(fig)
    return 0


if __name__ == "__main__":
    sys.exit(main())
