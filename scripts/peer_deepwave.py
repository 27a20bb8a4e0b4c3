#!/usr/bin/env python3
"""Times Deepwave's scalar propagator on ksweep's benchmark problem, when Deepwave is importable.

    scripts/peer_deepwave.py [--out docs/benchmarks/<host>-deepwave.json] [--nt 500] [--shots 8]

Problem (the same as ksweep_bench's forward/.../nz:141/nx:681/shots:8 and gradient families):
141 x 681 cells of 25 m, smooth random velocity in [1500, 4500] m/s, accuracy 4 (order 4),
pml_width 20 on every side, dt = 0.4 dh / vmax (below Deepwave's CFL limit, so no time
resampling), 5 Hz Ricker delayed by 1.5 / f, one source per shot at depth 2, 100 receivers at
depth 2, float32. Writes a JSON that scripts/bench_report.py includes ("peer": "deepwave").
Deepwave is never a dependency of ksweep: without it this prints a line and exits 0.
"""
import argparse
import json
import os
import platform
import socket
import sys
import time

try:
    import torch
    import deepwave
except Exception as e:  # ImportError, or a broken torch install
    print("deepwave not importable: skipping (%s)" % e)
    sys.exit(0)

DH, VMIN, VMAX, FREQ, PML = 25.0, 1500.0, 4500.0, 5.0, 20


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def smooth_model(nz, nx, seed=12345):
    g = torch.Generator().manual_seed(seed)
    step = 16
    nodes = torch.rand(nz // step + 2, nx // step + 2, generator=g, dtype=torch.float64)
    r = torch.nn.functional.interpolate(nodes[None, None], size=(nz + 2 * step, nx + 2 * step), mode="bilinear",
                                        align_corners=False)[0, 0, :nz, :nx]
    trend = torch.linspace(0, 1, nz, dtype=torch.float64)[:, None]
    return (VMIN + (VMAX - VMIN) * (0.6 * trend + 0.4 * r)).float()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join("docs", "benchmarks", "%s-deepwave.json" % socket.gethostname()))
    ap.add_argument("--nt", type=int, default=500)
    ap.add_argument("--shots", type=int, default=8)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    nz, nx, S, nt = 141, 681, args.shots, args.nt
    dev = torch.device(args.device)
    dt = 0.4 * DH / VMAX
    v = smooth_model(nz, nx).to(dev)
    t = torch.arange(nt, dtype=torch.float32) * dt - 1.5 / FREQ
    a = (torch.pi * FREQ * t) ** 2
    w = ((1 - 2 * a) * torch.exp(-a)).to(dev)
    src = torch.zeros(S, 1, 2, dtype=torch.long, device=dev)
    src[:, 0, 0] = 2
    src[:, 0, 1] = torch.tensor([(i + 1) * nx // (S + 1) for i in range(S)])
    rec = torch.zeros(S, 100, 2, dtype=torch.long, device=dev)
    rec[:, :, 0] = 2
    rec[:, :, 1] = torch.tensor([r * (nx - 1) // 99 for r in range(100)])
    amps = w.repeat(S, 1, 1)

    def sync():
        if dev.type == "cuda":
            torch.cuda.synchronize()

    def run(backward):
        vv = v.clone().requires_grad_(backward)
        out = deepwave.scalar(vv, DH, dt, source_amplitudes=amps, source_locations=src, receiver_locations=rec,
                              accuracy=4, pml_width=PML, pml_freq=25.0)
        if backward:
            out[-1].pow(2).sum().backward()
        sync()

    padded = (nz + 2 * PML) * (nx + 2 * PML)
    results = []
    for kind, backward in (("forward", False), ("forward+backward", True)):
        run(backward)  # warm-up
        best = float("inf")
        for _ in range(args.repeats):
            t0 = time.perf_counter()
            run(backward)
            best = min(best, time.perf_counter() - t0)
        results.append({"kind": kind, "shots": S, "nt": nt, "seconds": best, "cells_per_second": padded * S * nt / best})
        print("deepwave %s: %.3f s, %.3f Gcells/s" % (kind, best, padded * S * nt / best * 1e-9))
    doc = {"peer": "deepwave",
           "problem": "141x681, dh 25 m, accuracy 4, pml_width 20, %d shots, nt %d, float32" % (S, nt),
           "context": {"version": getattr(deepwave, "__version__", "?"), "torch": torch.__version__,
                       "device": torch.cuda.get_device_name(0) if dev.type == "cuda" else "cpu",
                       "cpu_model": cpu_model(), "threads": torch.get_num_threads(), "hostname": socket.gethostname()},
           "results": results}
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(doc, f, indent=1)
    print("wrote %s" % args.out)


if __name__ == "__main__":
    main()
