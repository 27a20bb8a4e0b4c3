#!/usr/bin/env python3
"""Times Deepwave's scalar propagator on ksweep's Marmousi batch, when Deepwave is importable.

    scripts/peer_deepwave.py [--out docs/benchmarks/<host>-deepwave.json] [--threads 2] [--repeats 3]
                             [--nt 2000] [--shots 8] [--orders 4,8] [--marmousi FILE] [--quick]
    scripts/peer_deepwave.py --physics acoustic_vd [--shots 4] [--nt 1200] [--orders 4,8] [--repeats 3]
                             [--threads 2] --out FILE   (needs the ksweep package importable too)
    scripts/peer_deepwave.py --dim 3 [--cubes 48,128] [--nt 200] [--shots 2] [--orders 4,8]
                             [--threads 2] [--repeats 3] [--max-vel V] [--quick] --out FILE

Problem (the issue's Marmousi batch, as share/examples/marmousi_25m.toml sets it up, with the
20-cell absorbing layer of scripts/marmousi_batch.sh): Marmousi2 (marmousi2_vp_nz281_nx1361_dx12.5.f32,
looked up like ksweep does: $KSWEEP_MARMOUSI_DIR, ../shared/marmousi/, <repo>/../shared/marmousi/,
${XDG_CACHE_HOME:-~/.cache}/ksweep/marmousi/) decimated v[::2, ::2] to 141 x 681 cells of 25 m;
pml_width 20 on every side, pml_freq 25; dt 0.002 s; 5 Hz Ricker delayed by 0.2 s (ksweep's
core::ricker); shots at depth 2, evenly spaced over x_range [0.1, 0.9] of the width (--shots of
them, rounded like io::shot_x_positions); 200 receivers at depth 4 evenly spaced over the full
width (io::receiver_x_positions); float32. Without the Marmousi file it falls back to a smooth
random model in [1500, 4500] m/s and says so in the JSON ("model").

Cases, each order (--orders) in its own child process so that "first" means the first call in a
fresh process: forward (one untimed warm-up call, then --repeats timed calls); gradient =
forward + loss 0.5 * sum((d - d_obs)^2) + backward w.r.t. the velocity, where the velocity is
a smoothed Marmousi and d_obs are the records of the unsmoothed one (computed beforehand in this
parent process and handed over in a temporary file). gradient_first is the first gradient call
of its process (one sample); gradient_later is the 3rd and later calls (--repeats samples; the
2nd call is not reported). Each result has the median ("seconds"), min and max, and the peak
resident memory of the process during the call ("peak_rss_bytes": VmHWM after resetting it
with `echo 5 > /proc/self/clear_refs` before the call; "rss_increase_bytes": that minus VmRSS
just before the call). When clear_refs cannot be written it falls back to ru_maxrss (whole
process so far) and says so in context.rss_method. "cpu_utilization" = process CPU time /
(wall time x threads) per sample, and "loadavg1" the 1-minute load at its end: a check for other
work on the machine. cells_per_second counts the padded grid
(141+40) x (681+40) x shots x nt per call, for the gradient too (as ksweep_bench does).

Threads: torch.set_num_threads(--threads) (Deepwave runs min(shots, torch threads) OpenMP
threads, one shot per thread) and OMP_NUM_THREADS in the children.
Writes a JSON that scripts/bench_report.py includes ("peer": "deepwave").
Deepwave is never a dependency of ksweep: without it this prints a line and exits 0.

--physics acoustic_vd: variable density, ksweep's `acoustic_vd` (through the ksweep Python
package, in this process) against deepwave.acoustic, on the README's Marmousi2 window
(share/examples/marmousi_vd.toml: the 25 m model's columns [220, 460), 141 x 240 cells) with
Gardner's density rho = 310 vp^0.25, pml_width 20, pml_freq 25, dt 0.002 s, the 5 Hz Ricker
delayed by 0.2 s, --shots shots at depth 2 over [0.05, 0.95] of the width, 240 receivers at
depth 4 (every cell). Deepwave's acoustic propagator is the first-order pressure-velocity
system with the source injected as a pressure rate: its pressure records are the time
derivative of ksweep's second-order pressure records, one sample later. The records misfit is
||k - a D|| / ||k|| with k ksweep's records, D Deepwave's records integrated in time (cumulative
sum) and advanced one sample, and a the least-squares scale (one for all shots and receivers);
beside it the same measure of ksweep's variable-density records against its constant-density
ones (the size of the density's effect, which the misfit must be far below). Speed: forward and
gradient (loss 0.5 sum (d - d_obs)^2, gradients for vp and rho; d_obs each code's own records of
the true model, the start the smoothed model) timed alternately in this process, medians of
--repeats calls after one warm-up, and their ratio (Deepwave / ksweep: > 1 means ksweep is
faster).

--dim 3: the cubes of ksweep's cube3d benchmarks (bench/bench_suite.hpp, keep both identical):
N x N x N cells (N in --cubes; 48 fits in a 32 MiB L3 cache, 128 does not) of 10 m, float32,
vp(z, y, x) = 1500 + 2000 z / (N - 1) + 150 sin(0.21 x) cos(0.17 y) on integer cell indices
(array [nz][ny][nx]); pml_width 10 on all 6 faces (no free surface), pml_freq 25 (Deepwave's
R is 1e-3, as ksweep's); dt 1 ms, nt 200; 10 Hz Ricker peaking at 0.1 s
(deepwave.wavelets.ricker); --shots 2 shots, shot s with one source at (2, N/2, (s+1) N/(shots+1))
(integer division: (2, N/2, N/3) and (2, N/2, 2N/3)); receivers at z = 2 on every 4th cell in y
and x from 0, the same for each shot. gradient: velocity = the cube above, d_obs = records of
the cube plus a sphere of +100 m/s, radius N/6, centre ((N-1)/2,)*3. Deepwave's locations are
(z, y, x) cell indices in the order of the model's dimensions, and its pml_width list is
[z begin, z end, y begin, y end, x begin, x end]. Cases as in 2D, each (order, N) in its own child
process; result names "cube3d/order:O/n:N/kind:K" with "dim": 3 and "cube_n": N ("n" stays the
number of samples). cells_per_second counts (N+20)^3 x shots x nt per call; Deepwave resamples
time when dt exceeds its Courant limit 0.6 dh / (sqrt(3) vmax) (0.95 ms at vmax 3650 m/s, so it
runs step_ratio = 2 internal steps per 1 ms step here): each result has "step_ratio" and
"cells_per_second_internal" (= cells_per_second x step_ratio). --max-vel V passes max_vel = V
to deepwave.scalar (V <= 3464 m/s gives step_ratio 1 at dt 1 ms; below the model's maximum,
Deepwave warns and builds its PML for V); the default leaves Deepwave's own choice.
"""
import argparse
import hashlib
import json
import math
import os
import resource
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import warnings

from host_info import cpu_model

try:
    import numpy as np
    import torch
    import deepwave
except Exception as e:  # ImportError, or a broken torch install
    print("deepwave not importable: skipping (%s)" % e)
    sys.exit(0)

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NZ, NX, DH, PML, PML_FREQ = 141, 681, 25.0, 20, 25.0
DT, FREQ, DELAY = 0.002, 5.0, 0.2
SHOT_Z, SHOT_X_RANGE, REC_Z, N_REC = 2, (0.1, 0.9), 4, 200
MARMOUSI_FILE = "marmousi2_vp_nz281_nx1361_dx12.5.f32"
MARMOUSI_SHAPE = (281, 1361)
MARMOUSI_SHA256 = "1c9297cc881d1103ffb52abf452b25bf2b878e6d519edf963a20eca9e9077bee"
VMIN, VMAX = 1500.0, 4500.0  # fallback model



def deepwave_version():
    v = getattr(deepwave, "__version__", None)
    if v is None:
        try:
            from deepwave import _version
            v = _version.__version__
        except Exception:
            try:
                from importlib import metadata
                v = metadata.version("deepwave")
            except Exception:
                v = "?"
    return v


# ---------------------------------------------------------------- problem set-up

def find_marmousi(explicit):
    if explicit:
        return [explicit]
    dirs = []
    if os.environ.get("KSWEEP_MARMOUSI_DIR"):
        dirs.append(os.environ["KSWEEP_MARMOUSI_DIR"])
    dirs += [os.path.join("..", "shared", "marmousi"), os.path.join(REPO, "..", "shared", "marmousi"),
             os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "ksweep", "marmousi")]
    return [os.path.join(d, MARMOUSI_FILE) for d in dirs]


def smooth_random_model(nz, nx, seed=12345):
    g = torch.Generator().manual_seed(seed)
    step = 16
    nodes = torch.rand(nz // step + 2, nx // step + 2, generator=g, dtype=torch.float64)
    r = torch.nn.functional.interpolate(nodes[None, None], size=(nz + 2 * step, nx + 2 * step), mode="bilinear",
                                        align_corners=False)[0, 0, :nz, :nx]
    trend = torch.linspace(0, 1, nz, dtype=torch.float64)[:, None]
    return (VMIN + (VMAX - VMIN) * (0.6 * trend + 0.4 * r)).numpy().astype(np.float32)


def load_model(explicit):
    """(v [NZ][NX] float32, description dict)."""
    tried = []
    for path in find_marmousi(explicit):
        tried.append(os.path.abspath(path))
        if not os.path.isfile(path):
            continue
        raw = open(path, "rb").read()
        if len(raw) != MARMOUSI_SHAPE[0] * MARMOUSI_SHAPE[1] * 4:
            tried[-1] += " (size %d, expected %d)" % (len(raw), MARMOUSI_SHAPE[0] * MARMOUSI_SHAPE[1] * 4)
            continue
        sha = hashlib.sha256(raw).hexdigest()
        v = np.frombuffer(raw, dtype="<f4").reshape(MARMOUSI_SHAPE)[::2, ::2].astype(np.float32)  # model.decimate = 2
        assert v.shape == (NZ, NX), v.shape
        return v, {"source": "marmousi2", "file": os.path.abspath(path), "sha256": sha,
                   "sha256_ok": sha == MARMOUSI_SHA256, "decimate": 2, "dh": DH, "nz": NZ, "nx": NX,
                   "vmin": float(v.min()), "vmax": float(v.max())}
    v = smooth_random_model(NZ, NX)
    print("peer_deepwave: %s not found (tried %s): using the smooth random fallback model" % (MARMOUSI_FILE, ", ".join(tried)))
    return v, {"source": "fallback: smooth random model in [1500, 4500] m/s (Marmousi2 file not found)", "tried": tried,
               "dh": DH, "nz": NZ, "nx": NX, "vmin": float(v.min()), "vmax": float(v.max())}


def smoothed(v, passes=4, k=9):
    """Initial model for the gradient: repeated k x k box blur (edge-replicated)."""
    t = torch.from_numpy(v.astype(np.float64))[None, None]
    for _ in range(passes):
        t = torch.nn.functional.avg_pool2d(torch.nn.functional.pad(t, (k // 2,) * 4, mode="replicate"), k, stride=1)
    return t[0, 0].numpy().astype(np.float32)


def c_round(x):  # std::lround for x >= 0
    return int(math.floor(x + 0.5))


def survey(shots):
    lo, hi = SHOT_X_RANGE[0] * (NX - 1), SHOT_X_RANGE[1] * (NX - 1)
    sx = [c_round(0.5 * (lo + hi))] if shots == 1 else [c_round(lo + (hi - lo) * i / (shots - 1)) for i in range(shots)]
    rx = [c_round((NX - 1) * i / (N_REC - 1)) for i in range(N_REC)]
    src = torch.zeros(shots, 1, 2, dtype=torch.long)
    src[:, 0, 0] = SHOT_Z
    src[:, 0, 1] = torch.tensor(sx)
    rec = torch.zeros(shots, N_REC, 2, dtype=torch.long)
    rec[:, :, 0] = REC_Z
    rec[:, :, 1] = torch.tensor(rx)
    return src, rec, sx


def ricker(nt):  # core::ricker, in double, then float32
    t = torch.arange(nt, dtype=torch.float64) * DT - DELAY
    a = (math.pi * FREQ * t) ** 2
    return ((1 - 2 * a) * torch.exp(-a)).float()


def propagate(v, order, nt, shots, dev):
    src, rec, _ = survey(shots)
    amps = ricker(nt).to(dev).repeat(shots, 1, 1)
    return deepwave.scalar(v, DH, DT, source_amplitudes=amps, source_locations=src.to(dev),
                           receiver_locations=rec.to(dev), accuracy=order, pml_width=PML, pml_freq=PML_FREQ)[-1]


# ---------------------------------------------------------------- 3D problem (ksweep's cube3d benchmarks)

DH3, PML3, DT3, FREQ3, PEAK3, SRC_Z3, REC_Z3, REC_STEP3 = 10.0, 10, 1e-3, 10.0, 0.1, 2, 2, 4


def cube_model(n, sphere=False):
    """vp [n][n][n] float32 (z, y, x), computed in double as ksweep's bench::cube_model."""
    z, y, x = np.meshgrid(np.arange(n, dtype=np.float64), np.arange(n, dtype=np.float64),
                          np.arange(n, dtype=np.float64), indexing="ij")
    v = 1500.0 + 2000.0 * z / (n - 1) + 150.0 * np.sin(0.21 * x) * np.cos(0.17 * y)
    if sphere:
        r, c = n / 6.0, 0.5 * (n - 1)
        v = v + 100.0 * (((z - c) ** 2 + (y - c) ** 2 + (x - c) ** 2) <= r * r)
    return v.astype(np.float32)


def cube_survey(n, shots):
    """(sources [shots][1][3], receivers [shots][R][3]) as (z, y, x) cell indices."""
    src = torch.tensor([[[SRC_Z3, n // 2, (s + 1) * n // (shots + 1)]] for s in range(shots)], dtype=torch.long)
    patch = [(REC_Z3, y, x) for y in range(0, n, REC_STEP3) for x in range(0, n, REC_STEP3)]
    rec = torch.tensor([patch] * shots, dtype=torch.long)
    return src, rec


def propagate3d(v, order, nt, shots, dev, max_vel=None):
    n = v.shape[-1]
    src, rec = cube_survey(n, shots)
    amps = deepwave.wavelets.ricker(FREQ3, nt, DT3, PEAK3).to(dev).repeat(shots, 1, 1)
    return deepwave.scalar(v, DH3, DT3, source_amplitudes=amps, source_locations=src.to(dev),
                           receiver_locations=rec.to(dev), accuracy=order, pml_width=PML3, pml_freq=PML_FREQ,
                           max_vel=max_vel)[-1]


# ---------------------------------------------------------------- memory

def status_bytes(key):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024
    return 0


def reset_hwm():
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def measured(fn, dev):
    """(seconds, peak RSS of the process during fn, peak - RSS before, method, CPU seconds, 1-min load at the end)."""
    ok = reset_hwm()
    before = status_bytes("VmRSS")
    ru0 = resource.getrusage(resource.RUSAGE_SELF)
    t0 = time.perf_counter()
    fn()
    if dev.type == "cuda":
        torch.cuda.synchronize()
    sec = time.perf_counter() - t0
    ru1 = resource.getrusage(resource.RUSAGE_SELF)
    cpu = (ru1.ru_utime + ru1.ru_stime) - (ru0.ru_utime + ru0.ru_stime)
    if ok:
        peak, method = status_bytes("VmHWM"), "VmHWM after echo 5 > /proc/self/clear_refs"
    else:
        peak, method = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024, "ru_maxrss (process lifetime)"
    return sec, peak, max(0, peak - before), method, cpu, os.getloadavg()[0]


# ---------------------------------------------------------------- child: one order, one mode

def child(args):
    torch.set_num_threads(args.threads)
    dev = torch.device(args.device)
    if args.dim == 3:
        v_true = cube_model(args.cube)  # the gradient starts from it too (d_obs: with the sphere)

        def propagate_case(v, order, nt, shots, dev):
            return propagate3d(v, order, nt, shots, dev, args.max_vel)
    else:
        v_true, _ = load_model(args.marmousi)
        propagate_case = propagate
    caught = []
    warnings.simplefilter("always")
    showwarning = warnings.showwarning

    def keep(message, category, filename, lineno, file=None, line=None):
        caught.append("%s: %s" % (category.__name__, message))
        showwarning(message, category, filename, lineno, file, line)

    warnings.showwarning = keep
    samples = []
    if args.child == "forward":
        v = torch.from_numpy(v_true).to(dev)

        def call():
            with torch.no_grad():
                propagate_case(v, args.order, args.nt, args.shots, dev)

        for _ in range(1 + args.repeats):
            samples.append(measured(call, dev))
    else:
        v0 = torch.from_numpy(v_true if args.dim == 3 else smoothed(v_true)).to(dev)
        d_obs = torch.from_numpy(np.load(args.observed)).to(dev)

        def call():
            vv = v0.clone().requires_grad_(True)
            d = propagate_case(vv, args.order, args.nt, args.shots, dev)
            loss = 0.5 * (d - d_obs).pow(2).sum()
            loss.backward()
            assert vv.grad is not None and bool(torch.isfinite(vv.grad).all())

        for _ in range(2 + args.repeats):
            samples.append(measured(call, dev))
    out = {"samples": [{"seconds": s, "peak_rss_bytes": p, "rss_increase_bytes": d, "cpu_seconds": c, "loadavg1": la}
                       for s, p, d, _, c, la in samples],
           "rss_method": samples[0][3], "warnings": sorted(set(caught)), "torch_threads": torch.get_num_threads()}
    with open(args.result, "w") as f:
        json.dump(out, f)


# ---------------------------------------------------------------- parent

def summarize(kind, order, args, samples, padded):
    secs = [s["seconds"] for s in samples]
    med = statistics.median(secs)
    return {"kind": kind, "order": order, "shots": args.shots, "nt": args.nt, "threads": args.threads,
            "seconds": med, "min": min(secs), "max": max(secs), "n": len(secs), "samples": secs,
            "peak_rss_bytes": max(s["peak_rss_bytes"] for s in samples),
            "rss_increase_bytes": max(s["rss_increase_bytes"] for s in samples),
            "cpu_utilization": [round(s["cpu_seconds"] / (s["seconds"] * args.threads), 3) for s in samples],
            "loadavg1": [s["loadavg1"] for s in samples],
            "cells_per_second": padded * args.shots * args.nt / med}


def run_child(args, mode, order, tmp, observed=None, cube=None):
    result = os.path.join(tmp, "%s-%d%s.json" % (mode, order, "-n%d" % cube if cube else ""))
    cmd = [sys.executable, os.path.abspath(__file__), "--child", mode, "--order", str(order), "--result", result,
           "--nt", str(args.nt), "--shots", str(args.shots), "--threads", str(args.threads),
           "--repeats", str(args.repeats), "--device", args.device]
    if args.marmousi:
        cmd += ["--marmousi", args.marmousi]
    if cube:
        cmd += ["--dim", "3", "--cube", str(cube)]
        if args.max_vel is not None:
            cmd += ["--max-vel", repr(args.max_vel)]
    if observed:
        cmd += ["--observed", observed]
    env = dict(os.environ, OMP_NUM_THREADS=str(args.threads))
    rc = subprocess.call(cmd, env=env)
    if rc != 0 or not os.path.exists(result):
        return None, "child %s order %d%s failed with exit status %d" % (mode, order, " n %d" % cube if cube else "", rc)
    with open(result) as f:
        return json.load(f), None


def main3d(args, orders, dev):
    cubes = [int(c) for c in args.cubes.split(",") if c.strip()]
    resampling = {}
    for n in cubes:
        vmax = float(cube_model(n).max())
        vmax_obs = float(cube_model(n, True).max())
        used = args.max_vel if args.max_vel is not None else vmax
        inner_dt, step_ratio = deepwave.common.cfl_condition_n([DH3] * 3, DT3, used)
        resampling[str(n)] = {"dt": DT3, "vmax": vmax, "vmax_observed_model": vmax_obs, "max_vel": args.max_vel,
                              "dh": DH3, "step_ratio": step_ratio, "inner_dt": inner_dt, "resampled": step_ratio > 1,
                              "step_ratio_observed_model": deepwave.common.cfl_condition_n(
                                  [DH3] * 3, DT3, args.max_vel if args.max_vel is not None else vmax_obs)[1]}
        print("peer_deepwave: cube %d^3, vmax %.1f m/s, dt %g: Deepwave step_ratio %d (%s)" % (
            n, vmax, DT3, step_ratio, "time resampling" if step_ratio > 1 else "no resampling"))
    load_start = os.getloadavg()
    results, errors, warns, rss_method, child_threads = [], [], set(), None, None

    def add(kind, order, n, samples, extra=None):
        padded = (n + 2 * PML3) ** 3
        r = summarize(kind, order, args, samples, padded)
        sr = resampling[str(n)]["step_ratio"]
        r = dict({"name": "cube3d/order:%d/n:%d/kind:%s" % (order, n, kind), "dim": 3, "cube_n": n,
                  "padded_cells": padded, "step_ratio": sr}, **r)
        r["cells_per_second_internal"] = r["cells_per_second"] * sr
        r.update(extra or {})
        results.append(r)
        print("deepwave %s: %.3f s (min %.3f, max %.3f, n %d), %.1f Mcells/s (%.1f internal), peak RSS %.0f MiB "
              "(+%.0f MiB in the call)" % (r["name"], r["seconds"], r["min"], r["max"], r["n"],
                                          r["cells_per_second"] * 1e-6, r["cells_per_second_internal"] * 1e-6,
                                          r["peak_rss_bytes"] / 2**20, r["rss_increase_bytes"] / 2**20))
        sys.stdout.flush()

    with tempfile.TemporaryDirectory(prefix="peer_deepwave3d-") as tmp:
        for n in cubes:
            for order in orders:
                res, err = run_child(args, "forward", order, tmp, cube=n)
                if err:
                    errors.append(err)
                    continue
                warns.update(res["warnings"])
                rss_method, child_threads = res["rss_method"], res["torch_threads"]
                add("forward", order, n, res["samples"][1:], {"first_call_seconds": res["samples"][0]["seconds"]})
            if args.no_gradient:
                continue
            for order in orders:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    with torch.no_grad():
                        d_obs = propagate3d(torch.from_numpy(cube_model(n, True)).to(dev), order, args.nt, args.shots,
                                            dev, args.max_vel)
                observed = os.path.join(tmp, "observed-%d-n%d.npy" % (order, n))
                np.save(observed, d_obs.cpu().numpy())
                del d_obs
                res, err = run_child(args, "gradient", order, tmp, observed, cube=n)
                if err:
                    errors.append(err)
                    continue
                warns.update(res["warnings"])
                rss_method, child_threads = res["rss_method"], res["torch_threads"]
                add("gradient_first", order, n, res["samples"][:1])
                add("gradient_later", order, n, res["samples"][2:], {"second_call_seconds": res["samples"][1]["seconds"]})
    doc = {"peer": "deepwave", "dim": 3,
           "problem": "3D cubes N^3 (N %s) of 10 m, vp 1500 + 2000 z/(N-1) + 150 sin(0.21 x) cos(0.17 y), orders %s, "
                      "pml_width %d on 6 faces (pml_freq %g), %d shots x (N/4)^2 receivers, nt %d, dt %g, "
                      "10 Hz Ricker peak %g s, float32" % (
                          "/".join(map(str, cubes)), "/".join(map(str, orders)), PML3, PML_FREQ, args.shots, args.nt,
                          DT3, PEAK3),
           "context": {"version": deepwave_version(), "deepwave_file": os.path.abspath(deepwave.__file__),
                       "torch": torch.__version__,
                       "device": torch.cuda.get_device_name(0) if dev.type == "cuda" else "cpu",
                       "cpu_model": cpu_model(), "threads": args.threads, "torch_threads_in_child": child_threads,
                       "hostname": socket.gethostname(), "python": sys.version.split()[0],
                       "rss_method": rss_method, "time_resampling": resampling,
                       "model": {"cubes": cubes, "dh": DH3, "dtype": "float32", "layout": "[nz][ny][nx]",
                                 "vp": "1500 + 2000 z/(N-1) + 150 sin(0.21 x) cos(0.17 y), z y x integer cell indices",
                                 "observed_model": "vp + 100 m/s inside the sphere of radius N/6 centred at (N-1)/2",
                                 "pml_width": PML3, "pml_freq": PML_FREQ, "free_surface": False},
                       "survey": {"source": "(z, y, x) = (%d, N/2, (s+1) N/(shots+1))" % SRC_Z3,
                                  "receivers": "(z, y, x) = (%d, y, x), y and x in range(0, N, %d), every shot" % (
                                      REC_Z3, REC_STEP3),
                                  "location_order": "Deepwave (z, y, x): the order of the model's dimensions",
                                  "pml_width_order": "[z begin, z end, y begin, y end, x begin, x end]"},
                       "wavelet": {"freq": FREQ3, "peak_time": PEAK3, "dt": DT3,
                                   "function": "deepwave.wavelets.ricker(10, nt, dt, 0.1)"},
                       "gradient_loss": "0.5 * sum((d(v) - d_obs(v + sphere))^2), backward w.r.t. v",
                       "cells_per_second": "(N+2*pml)^3*shots*nt / seconds; cells_per_second_internal: x step_ratio",
                       "repeats": args.repeats, "quick": args.quick,
                       "loadavg_start": load_start, "loadavg_end": os.getloadavg(),
                       "warnings": sorted(warns), "errors": errors},
           "results": results}
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(doc, f, indent=1)
    print("wrote %s" % args.out)
    return 1 if errors else 0


def main_vd(args, orders, dev):
    """Variable density: ksweep's acoustic_vd against deepwave.acoustic (see the module comment)."""
    try:
        import ksweep
    except ImportError as e:
        print("the ksweep package is not importable: skipping (%s)" % e)
        return 0
    ksweep.initialize(threads=args.threads)
    v_full, model = load_model(args.marmousi)
    v = np.ascontiguousarray(v_full[:, 220:460]).astype(np.float32)
    rho = (310.0 * v.astype(np.float64) ** 0.25).astype(np.float32)
    nz, nx = v.shape
    shots, nt = args.shots, args.nt
    sx = [c_round(0.05 * (nx - 1) + 0.9 * (nx - 1) * i / max(shots - 1, 1)) for i in range(shots)]
    src = np.array([[[SHOT_Z, x]] for x in sx])
    rec = np.array([[[REC_Z, x] for x in range(nx)] for _ in range(shots)])
    w = ricker(nt)
    amps = np.ascontiguousarray(np.broadcast_to(w.numpy(), (shots, 1, nt)))
    v_s, rho_s = smoothed(v), smoothed(rho)
    inner_dt, step_ratio = deepwave.common.cfl_condition_n([DH, DH], DT, float(v.max()))

    def deepwave_run(vv, rr, order, grad_of=None):
        vt = torch.from_numpy(np.ascontiguousarray(vv)).to(dev).requires_grad_(grad_of is not None)
        rt = torch.from_numpy(np.ascontiguousarray(rr)).to(dev).requires_grad_(grad_of is not None)
        out = deepwave.acoustic(vt, rt, DH, DT, source_amplitudes_p=torch.from_numpy(amps).to(dev),
                                source_locations_p=torch.from_numpy(src).to(dev),
                                receiver_locations_p=torch.from_numpy(rec).to(dev), accuracy=order, pml_width=PML,
                                pml_freq=PML_FREQ)
        d = out[-3]  # receivers_p (then receivers_z, receivers_x)
        if grad_of is None:
            return d.detach().cpu().numpy()
        loss = 0.5 * ((d - grad_of) ** 2).sum()
        loss.backward()
        return float(loss)

    def timed(fn):
        t0 = time.perf_counter()
        fn()
        return time.perf_counter() - t0

    results = []
    kw = dict(pml_width=PML, pml_freq=PML_FREQ)
    for order in orders:
        k = ksweep.forward(v, DH, DT, amps, src, rec, order=order, rho=rho, **kw).astype(np.float64)
        kc = ksweep.forward(v, DH, DT, amps, src, rec, order=order, **kw).astype(np.float64)
        d = deepwave_run(v, rho, order).astype(np.float64)
        dk = np.roll(np.cumsum(d, axis=-1), -1, axis=-1)
        dk[..., -1] = dk[..., -2]
        a = np.sum(k * dk) / np.sum(dk * dk)
        b = np.sum(k * kc) / np.sum(kc * kc)
        misfit = float(np.linalg.norm(k - a * dk) / np.linalg.norm(k))
        density_effect = float(np.linalg.norm(k - b * kc) / np.linalg.norm(k))
        obs_k = np.ascontiguousarray(k.astype(np.float32))
        obs_d = torch.from_numpy(d.astype(np.float32)).to(dev)
        cases = {
            "forward": (lambda: ksweep.forward(v, DH, DT, amps, src, rec, order=order, rho=rho, **kw),
                        lambda: deepwave_run(v, rho, order)),
            "gradient": (lambda: ksweep.gradient(v_s, DH, DT, amps, src, rec, obs_k, order=order, rho=rho_s,
                                                 loss_scale=0.5, **kw),
                         lambda: deepwave_run(v_s, rho_s, order, grad_of=obs_d)),
        }
        for kind, (kfn, dfn) in cases.items():
            kfn(), dfn()  # warm-up
            ks, ds = [], []
            for _ in range(args.repeats):  # alternating
                ks.append(timed(kfn))
                ds.append(timed(dfn))
            r = {"name": "marmousi_vd/order:%d/kind:%s" % (order, kind), "order": order, "kind": kind,
                 "ksweep_seconds": statistics.median(ks), "deepwave_seconds": statistics.median(ds),
                 "ksweep_samples": ks, "deepwave_samples": ds,
                 "deepwave_over_ksweep": statistics.median(ds) / statistics.median(ks)}
            if kind == "forward":
                r.update({"records_misfit": misfit, "density_effect": density_effect, "scale": float(a)})
            results.append(r)
            print("order %d %-8s ksweep %.3f s  deepwave %.3f s  ratio %.2f%s" % (
                order, kind, r["ksweep_seconds"], r["deepwave_seconds"], r["deepwave_over_ksweep"],
                "  records misfit %.2e (density effect %.2e)" % (misfit, density_effect) if kind == "forward" else ""))
    doc = {"peer": "deepwave", "physics": "acoustic_vd", "results": results,
           "context": {"version": deepwave_version(), "deepwave_file": os.path.abspath(deepwave.__file__),
                       "ksweep": ksweep.__version__, "cpu": cpu_model(), "threads": args.threads,
                       "device": str(dev), "model": model, "window_x": [220, 460], "shape": [nz, nx],
                       "shots": shots, "nt": nt, "dt": DT, "dh": DH, "pml_width": PML, "repeats": args.repeats,
                       "deepwave_step_ratio": step_ratio, "deepwave_inner_dt": inner_dt,
                       "loadavg": os.getloadavg()}}
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(doc, f, indent=1)
    print("wrote", args.out)
    return 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=None,
                    help="JSON to write (default docs/benchmarks/<host>-deepwave.json, -deepwave3d.json with --dim 3)")
    ap.add_argument("--physics", choices=["scalar", "acoustic_vd"], default="scalar",
                    help="acoustic_vd: ksweep's variable density against deepwave.acoustic (see above)")
    ap.add_argument("--dim", type=int, choices=[2, 3], default=2,
                    help="2: the Marmousi batch (default); 3: the cubes of ksweep's cube3d benchmarks")
    ap.add_argument("--cubes", default="48,128", help="--dim 3: comma-separated cube sizes N (N^3 model cells)")
    ap.add_argument("--max-vel", type=float, default=None,
                    help="--dim 3: max_vel handed to deepwave.scalar (default: none, Deepwave's own choice)")
    ap.add_argument("--nt", type=int, default=None, help="time steps (default 2000; 200 with --dim 3)")
    ap.add_argument("--shots", type=int, default=None, help="shots (default 8; 2 with --dim 3)")
    ap.add_argument("--threads", type=int, default=2, help="torch.set_num_threads (Deepwave's OpenMP threads)")
    ap.add_argument("--repeats", type=int, default=3, help="timed calls per case (median, min, max reported)")
    ap.add_argument("--orders", default="4,8", help="comma-separated accuracy orders")
    ap.add_argument("--no-gradient", action="store_true", help="forward cases only")
    ap.add_argument("--marmousi", default=None, help="path of %s (default: looked up like ksweep)" % MARMOUSI_FILE)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--quick", action="store_true",
                    help="smoke test: nt 100, 2 shots, 1 repeat, order 4 (--dim 3: N 24, nt 50)")
    ap.add_argument("--child", choices=["forward", "gradient"], help=argparse.SUPPRESS)
    ap.add_argument("--cube", type=int, default=None, help=argparse.SUPPRESS)
    ap.add_argument("--order", type=int, default=4, help=argparse.SUPPRESS)
    ap.add_argument("--result", help=argparse.SUPPRESS)
    ap.add_argument("--observed", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.nt is None:
        args.nt = 200 if args.dim == 3 else 1200 if args.physics == "acoustic_vd" else 2000
    if args.shots is None:
        args.shots = 2 if args.dim == 3 else 4 if args.physics == "acoustic_vd" else 8
    if args.out is None and args.physics == "acoustic_vd":
        args.out = os.path.join("docs", "benchmarks", "%s-deepwave-vd.json" % socket.gethostname())
    if args.out is None:
        args.out = os.path.join("docs", "benchmarks", "%s-deepwave%s.json" % (socket.gethostname(),
                                                                              "3d" if args.dim == 3 else ""))
    if args.child:
        return child(args)
    if args.quick:
        args.nt, args.shots, args.repeats, args.orders = (50 if args.dim == 3 else 100), 2, 1, "4"
        args.cubes = "24"
    orders = [int(o) for o in args.orders.split(",") if o.strip()]
    torch.set_num_threads(args.threads)
    dev = torch.device(args.device)
    if args.dim == 3:
        return main3d(args, orders, dev)
    if args.physics == "acoustic_vd":
        return main_vd(args, orders, dev)

    v_true, model = load_model(args.marmousi)
    sx = survey(args.shots)[2]
    inner_dt, step_ratio = deepwave.common.cfl_condition_n([DH, DH], DT, float(v_true.max()))
    resampling = {"dt": DT, "vmax": float(v_true.max()), "dh": DH, "step_ratio": step_ratio, "inner_dt": inner_dt,
                  "resampled": step_ratio > 1,
                  "note": "deepwave.common.cfl_condition_n (Courant 0.6); Deepwave only warns when step_ratio >= 20"}
    print("peer_deepwave: %s model %dx%d, vmax %.1f m/s, dt %g: Deepwave step_ratio %d (%s)" % (
        model["source"], NZ, NX, resampling["vmax"], DT, step_ratio, "time resampling" if step_ratio > 1 else "no resampling"))
    padded = (NZ + 2 * PML) * (NX + 2 * PML)
    load_start = os.getloadavg()
    results, errors, warns, rss_method, child_threads = [], [], set(), None, None
    with tempfile.TemporaryDirectory(prefix="peer_deepwave-") as tmp:
        for order in orders:
            res, err = run_child(args, "forward", order, tmp)
            if err:
                errors.append(err)
            else:
                r = summarize("forward", order, args, res["samples"][1:], padded)
                r["first_call_seconds"] = res["samples"][0]["seconds"]
                results.append(r)
                warns.update(res["warnings"])
                rss_method, child_threads = res["rss_method"], res["torch_threads"]
                print("deepwave forward o%d: %.3f s (min %.3f, max %.3f), %.3f Gcells/s, peak RSS %.0f MiB" % (
                    order, r["seconds"], r["min"], r["max"], r["cells_per_second"] * 1e-9, r["peak_rss_bytes"] / 2**20))
        if not args.no_gradient:
            for order in orders:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    with torch.no_grad():
                        d_obs = propagate(torch.from_numpy(v_true).to(dev), order, args.nt, args.shots, dev)
                observed = os.path.join(tmp, "observed-%d.npy" % order)
                np.save(observed, d_obs.cpu().numpy())
                del d_obs
                res, err = run_child(args, "gradient", order, tmp, observed)
                if err:
                    errors.append(err)
                    continue
                warns.update(res["warnings"])
                rss_method, child_threads = res["rss_method"], res["torch_threads"]
                for kind, samples in (("gradient_first", res["samples"][:1]), ("gradient_later", res["samples"][2:])):
                    r = summarize(kind, order, args, samples, padded)
                    if kind == "gradient_later":
                        r["second_call_seconds"] = res["samples"][1]["seconds"]
                    results.append(r)
                    print("deepwave %s o%d: %.3f s (min %.3f, max %.3f, n %d), peak RSS %.0f MiB (+%.0f MiB in the call)" % (
                        kind, order, r["seconds"], r["min"], r["max"], r["n"], r["peak_rss_bytes"] / 2**20,
                        r["rss_increase_bytes"] / 2**20))
    doc = {"peer": "deepwave",
           "problem": "%s %dx%d, dh 25 m, orders %s, pml_width %d (pml_freq %g), %d shots x %d receivers, nt %d, dt %g, "
                      "5 Hz Ricker delay %g s, float32" % (
                          "Marmousi2" if model["source"] == "marmousi2" else "fallback smooth model", NZ, NX,
                          "/".join(map(str, orders)), PML, PML_FREQ, args.shots, N_REC, args.nt, DT, DELAY),
           "context": {"version": deepwave_version(), "deepwave_file": os.path.abspath(deepwave.__file__),
                       "torch": torch.__version__,
                       "device": torch.cuda.get_device_name(0) if dev.type == "cuda" else "cpu",
                       "cpu_model": cpu_model(), "threads": args.threads, "torch_threads_in_child": child_threads,
                       "hostname": socket.gethostname(), "python": sys.version.split()[0],
                       "rss_method": rss_method, "time_resampling": resampling, "model": model,
                       "survey": {"shot_z": SHOT_Z, "shot_x": sx, "receiver_z": REC_Z, "receivers": N_REC,
                                  "receiver_x": "round((nx-1) i / 199)"},
                       "wavelet": {"freq": FREQ, "delay": DELAY, "dt": DT},
                       "gradient_loss": "0.5 * sum((d(v_smooth) - d_obs(v_marmousi))^2), backward w.r.t. v",
                       "cells_per_second": "(nz+2*pml)*(nx+2*pml)*shots*nt / seconds",
                       "repeats": args.repeats, "quick": args.quick,
                       "loadavg_start": load_start, "loadavg_end": os.getloadavg(),
                       "warnings": sorted(warns), "errors": errors},
           "results": results}
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(doc, f, indent=1)
    print("wrote %s" % args.out)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
