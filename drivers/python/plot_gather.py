#!/usr/bin/python3
"""Plot one shot gather of an observed.h5 (written by `ksweep model`) as a PNG.

Usage: plot_gather.py observed.h5 out.png [--shot K]
"""

import argparse
import sys

import matplotlib

matplotlib.use("Agg")
import h5py  # noqa: E402
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from ksweep_figures import records_dataset, save_atomic, shot_geometry  # noqa: E402


def main(argv=None):
    parser = argparse.ArgumentParser(description="Plot one shot gather from an observed.h5.")
    parser.add_argument("records", help="HDF5 file with dataset 'data' [shots][nt][receivers]")
    parser.add_argument("out", help="output PNG")
    parser.add_argument("--shot", type=int, default=0, help="shot index (default 0)")
    args = parser.parse_args(argv)

    try:
        with h5py.File(args.records, "r") as f:
            dset = records_dataset(f, args.records)
            shots, nt, nrec = dset.shape
            if not 0 <= args.shot < shots:
                raise ValueError(f"--shot {args.shot} is out of range [0, {shots - 1}]")
            gather = np.asarray(dset[args.shot], dtype=np.float64)
            dt = float(f.attrs["dt"])
            dh = float(f.attrs["dh"])
            order = int(f.attrs["order"])
            src, rec = shot_geometry(f, args.shot)
            gather, nrec = gather[:, :len(rec)], len(rec)
            rec_x, src_x = rec[:, 1], src[1]
            line = ""
            if "ny" in f.attrs:  # 3D: the receiver line (along x) nearest the source in y
                rec_y = rec[:, 2]
                ly = rec_y[np.argmin(np.abs(rec_y - src[2]))]
                keep = np.flatnonzero(np.abs(rec_y - ly) <= 1e-6 * dh)
                keep = keep[np.argsort(rec_x[keep], kind="stable")]
                gather, rec_x, nrec = gather[:, keep], rec_x[keep], len(keep)
                line = (f"\nreceiver line y = {ly / 1000.0:.3f} km ({nrec} of {len(rec_y)} receivers), "
                        f"source y = {src[2] / 1000.0:.3f} km")
            else:
                order_x = np.argsort(rec_x, kind="stable")
                gather, rec_x = gather[:, order_x], rec_x[order_x]
    except (OSError, KeyError, ValueError) as e:
        print(f"plot_gather.py: error: {e}", file=sys.stderr)
        return 1

    x_km = rec_x / 1000.0
    clip = float(np.percentile(np.abs(gather), 98)) or 1.0
    t_max = (nt - 1) * dt
    if nrec > 1:
        half = 0.5 * (x_km[-1] - x_km[0]) / (nrec - 1)
    else:
        half = 0.5 * dh / 1000.0
    extent = [x_km[0] - half, x_km[-1] + half, t_max + 0.5 * dt, -0.5 * dt]

    fig, ax = plt.subplots(figsize=(8, 6))
    im = ax.imshow(gather, cmap="gray", vmin=-clip, vmax=clip, aspect="auto", extent=extent,
                   interpolation="nearest")
    ax.set_xlabel("receiver position x (km)")
    ax.set_ylabel("time (s)")
    ax.set_title(f"shot {args.shot} of {shots}: source at x = {src_x / 1000.0:.3f} km, "
                 f"order {order}, dt = {dt:g} s{line}", fontsize=10)
    cbar = fig.colorbar(im, ax=ax)
    cbar.set_label("amplitude (clipped at 98th percentile of |data|)")
    fig.tight_layout()
    save_atomic(fig, args.out, 150)
    plt.close(fig)
    return 0


if __name__ == "__main__":
    sys.exit(main())
