#!/usr/bin/env python3
"""End-to-end tests of the ksweep program with real MPI runs, HDF5 files and processes.

    test_ksweep.py KSWEEP MPIEXEC WORKDIR CASE

CASE is one of: model, ranks, schedules, memory_estimate, resume, converges, bad_inputs, three_d, density, rtm, and the
fault suite:
outputs, resume_checks, numerics, disk_full, disk_full_tmpfs (exits 77, skipped, where mounting
is not permitted), signals, memory.
"""
import hashlib
import json
import os
import re
import resource
import shutil
import signal
import subprocess
import sys
import time

import h5py
import numpy as np

BASE = """
[model]
source = "marmousi2"
decimate = 2
crop_z = [0, 60]
crop_x = [250, 370]
[time]
dt = 0.003
nt = 500
[wavelet]
freq = 5.0
delay = 0.25
[shots]
count = 6
z = 2
x_range = [0.1, 0.9]
[receivers]
count = 60
z = 4
[propagator]
order = 4
pml_width = 16
[storage]
strategy = "boundary"
dtype = "fp32"
[fwi]
iterations = 3
batch = 4
lr = 20.0
seed = 7
checkpoint_every = 1
figures_every = 0
save_models = false
grad_smooth = 1.0
"""

KSWEEP, MPIEXEC, WORK = sys.argv[1], sys.argv[2], sys.argv[3]
# A process started without mpirun initialises MPI as a singleton, which by default forks Open
# MPI's daemon: about 0.3 s of the 0.48 s a refused run takes here (AMD EPYC, 2 cores), over
# the suite's few hundred such runs. `ess_singleton_isolated` leaves the daemon out (the same
# one rank); the start-up case under `ulimit -v` runs without it (test_reliability.py).
ENV = dict(os.environ, OMP_NUM_THREADS="1", OMP_PROC_BIND="false", OMPI_ALLOW_RUN_AS_ROOT="1",
           OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", OMPI_MCA_rmaps_base_oversubscribe="1",
           OMPI_MCA_ess_singleton_isolated="1")


def fail(msg):
    print("FAIL:", msg)
    sys.exit(1)


def write_config(name, text=BASE):
    path = os.path.join(WORK, name)
    with open(path, "w") as f:
        f.write(text)
    return path


def launcher(ranks):
    """mpirun for `ranks` > 1; nothing in a build without MPI, where the program runs one rank
    (the rank-count comparisons then compare one rank with itself)."""
    if ranks <= 1 or MPIEXEC == "none":
        return []
    return [MPIEXEC, "-n", str(ranks), "--oversubscribe"]


_backend = []


def default_backend():
    """Kokkos' default execution space of the program (ksweep info), e.g. OpenMP or Cuda."""
    if not _backend:
        out = subprocess.run([KSWEEP, "info"], env=ENV, capture_output=True, text=True, timeout=120).stdout
        m = re.search(r"default (\w+)", out)
        _backend.append(m.group(1) if m else "?")
    return _backend[0]


def on_device():
    return default_backend() not in ("Serial", "OpenMP", "Threads", "HPX")


def ksweep(args, ranks=1, check=True, timeout=600, threads=1, env=None, **kw):
    cmd = launcher(ranks) + [KSWEEP] + args
    env = dict(ENV, OMP_NUM_THREADS=str(threads), **(env or {}))
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout, **kw)
    if check and r.returncode != 0:
        fail(f"{' '.join(cmd)} exited {r.returncode}\nstdout:\n{r.stdout}\nstderr:\n{r.stderr}")
    return r


def fresh(name):
    path = os.path.join(WORK, name)
    shutil.rmtree(path, ignore_errors=True)
    return path


def final_model(out):
    with h5py.File(os.path.join(out, "model_final.h5"), "r") as f:
        return f["vp"][...]


def history(out):
    with open(os.path.join(out, "summary.json")) as f:
        return json.load(f)["iterations"]


def case_model():
    cfg = write_config("model.toml")
    out = fresh("model_out")
    ksweep(["model", "-c", cfg, "-o", out])
    with h5py.File(os.path.join(out, "observed.h5"), "r") as f:
        d = f["data"]
        if d.shape != (6, 500, 60) or d.dtype != np.float32:
            fail(f"observed.h5 data has shape {d.shape} {d.dtype}, expected (6, 500, 60) float32")
        for a in ("dt", "dh", "order"):
            if a not in f.attrs:
                fail(f"observed.h5 lacks attribute {a}")
        if abs(f.attrs["dt"] - 0.003) > 1e-12 or int(f.attrs["order"]) != 4:
            fail("observed.h5 attributes are wrong")
        if list(f["src_x"][...]) != sorted(f["src_x"][...]) or len(f["rec_x"][...]) != 60:
            fail("source/receiver positions are wrong")
        if not np.all(np.isfinite(d[...])) or np.abs(d[...]).max() <= 0:
            fail("observed data are not finite or all zero")
    if not os.path.getsize(os.path.join(out, "figures", "shot_gather.png")) > 1000:
        fail("no shot gather figure")
    # Run bare, as a user would (no OMP_* settings): no start-up warning of a dependency, and
    # `info` says which thread settings the program chose; ranks of one node share its cores.
    bare = {k: v for k, v in ENV.items() if not k.startswith("OMP_")}
    for ranks in (1, 2):
        if ranks > 1 and MPIEXEC == "none":
            continue
        r = subprocess.run(launcher(ranks) + [KSWEEP, "info"], env=bare, capture_output=True, text=True, timeout=120)
        text = r.stdout + r.stderr
        if r.returncode != 0 or "WARNING" in text.upper():
            fail(f"ksweep info on {ranks} rank(s) without OMP_* settings: exit {r.returncode}, output:\n{text}")
        m = re.search(r"host threads \(rank 0\): (.*)", text)
        if not m or "not bound" not in m.group(1):
            fail(f"ksweep info does not say which thread settings it chose:\n{text}")
        n = re.search(r"threads: (?:every core this process may use \((\d+)\)|(\d+) \()", m.group(1))
        cores = len(os.sched_getaffinity(0))
        threads = int(n.group(1) or n.group(2)) if n else 0
        if not 1 <= threads <= max(1, cores // ranks):
            fail(f"{ranks} rank(s) on {cores} cores: the threads chosen are '{m.group(1)}'")
    # More threads than the backend runs: refused in one line, not a crash.
    if default_backend() == "OpenMP":
        r = subprocess.run([KSWEEP, "info"], env=dict(bare, OMP_NUM_THREADS="4096"), capture_output=True, text=True,
                           timeout=120)
        if r.returncode != 1 or "OMP_NUM_THREADS = 4096" not in r.stderr or "at most 512" not in r.stderr:
            fail(f"OMP_NUM_THREADS=4096: exit {r.returncode}, expected 1 (an error) and the limit named:\n"
                 f"{r.stdout}{r.stderr}")
    # A switch of the run set to a value it does not take: refused before anything starts, on
    # every build (KSWEEP_CUDA_GRAPHS only acts on CUDA, KSWEEP_GPU_AWARE_MPI on CUDA with MPI,
    # KSWEEP_OVERLAP on a split, but a typo must not pass silently). One parser for the three.
    for switch in ("KSWEEP_CUDA_GRAPHS", "KSWEEP_GPU_AWARE_MPI", "KSWEEP_OVERLAP"):
        r = subprocess.run([KSWEEP, "info"], env=dict(ENV, **{switch: "yes"}), capture_output=True, text=True,
                           timeout=120)
        if (r.returncode != 1 or f"{switch}='yes' is not allowed" not in r.stderr or "allowed: 1, " not in r.stderr
                or "; 0, " not in r.stderr or "; unset, " not in r.stderr):
            fail(f"{switch}=yes: exit {r.returncode}, expected 1 (an error naming the value and what is allowed):\n"
                 f"{r.stdout}{r.stderr}")
        for ok in ("0", "1", ""):
            r = subprocess.run([KSWEEP, "info"], env=dict(ENV, **{switch: ok}), capture_output=True, text=True,
                               timeout=120)
            if r.returncode != 0:
                fail(f"{switch}='{ok}': exit {r.returncode}:\n{r.stdout}{r.stderr}")
    print("model: ok")


def case_ranks():
    # The split of the work must not change a single bit: the configuration that showed it
    # (Marmousi at 25 m, 6 shots, batches of 4 split 4 / 2+2 / 2+1+1, Adam with eps 1e-16,
    # which turns any round-off difference in a cell of near-zero gradient into a full step).
    here = os.path.dirname(os.path.abspath(__file__))
    cfg = os.path.join(here, "..", "..", "share", "examples", "marmousi_25m.toml")
    sets = ["time.nt=500", "shots.count=6", "fwi.batch=4", "fwi.iterations=3", "model.crop_x=[200,400]",
            "fwi.figures_every=0", "fwi.save_models=false", "fwi.checkpoint_every=0"]
    args = ["fwi", "-c", cfg]
    for x in sets:
        args += ["--set", x]
    runs = {}
    for ranks, threads in ((1, 1), (1, 2), (2, 1), (3, 1)):
        out = fresh(f"ranks_{ranks}x{threads}")
        ksweep(args + ["-o", out], ranks=ranks, threads=threads)
        runs[(ranks, threads)] = (final_model(out), history(out))
    ref_m, ref_h = runs[(1, 1)]
    if len(ref_h) != 3:
        fail(f"{len(ref_h)} iterations in the history, expected 3")
    for key, (m, h) in runs.items():
        diff = int(np.count_nonzero(m != ref_m))
        print(f"{key[0]} rank(s) x {key[1]} thread(s) vs 1 x 1: {diff} cells differ, "
              f"max |dv| {np.abs(m.astype(np.float64) - ref_m).max():.3e} m/s")
        if diff:
            fail(f"{key[0]} rank(s) x {key[1]} thread(s): the final model differs from 1 rank x 1 thread in {diff} cells")
        for a, b in zip(h, ref_h):
            if a["shots"] != b["shots"]:
                fail(f"{key}: different shots drawn: {a['shots']} vs {b['shots']}")
            if a["loss"] != b["loss"] or a["rmse"] != b["rmse"]:
                fail(f"{key}: loss {a['loss']!r} / rmse {a['rmse']!r} vs {b['loss']!r} / {b['rmse']!r} "
                     f"at iteration {a['iteration']} (must be identical)")
    print("ranks: ok")


def kill_after(cfg, out, reported):
    """Starts `ksweep fwi` into `out` and kills it (SIGKILL) part way through the iteration after
    `reported` iterations were reported."""
    p = subprocess.Popen([KSWEEP, "fwi", "-c", cfg, "-o", out], env=ENV, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 300
    killed_at = None
    while time.time() < deadline and p.poll() is None:
        try:
            its = history(out)
        except (OSError, ValueError, KeyError):
            its = []
        if len(its) >= reported:
            time.sleep(0.5 * its[-1]["seconds"])
            p.send_signal(signal.SIGKILL)
            killed_at = len(its)
            break
        time.sleep(0.02)
    p.wait()
    if killed_at is None:
        fail("the run finished before it could be killed")
    if os.path.exists(os.path.join(out, "model_final.h5")):
        fail("the killed run wrote model_final.h5")
    print(f"killed after {killed_at} reported iterations")


def same_run(out, ref, what):
    a, b = final_model(out), final_model(ref)
    if not np.array_equal(a, b):
        fail(f"{what}: the resumed run differs from the uninterrupted one: max |dv| {np.abs(a - b).max()}")
    ha, hb = history(out), history(ref)
    for key in ("loss", "evaluations"):
        if [h.get(key) for h in ha] != [h.get(key) for h in hb]:
            fail(f"{what}: {key} histories differ:\n{[h.get(key) for h in ha]}\n{[h.get(key) for h in hb]}")
    print(f"{what}: bit-identical model and loss history")


def case_resume():
    text = BASE.replace("iterations = 3", "iterations = 6").replace("checkpoint_every = 1", "checkpoint_every = 2")
    cfg = write_config("resume.toml", text)
    ref = fresh("resume_ref")
    ksweep(["fwi", "-c", cfg, "-o", ref])
    out = fresh("resume_run")
    # Killed part way through iteration 4 (after iteration 3 was reported, checkpoint at 2).
    kill_after(cfg, out, 3)
    ksweep(["fwi", "-c", cfg, "-o", out, "--resume", out])
    same_run(out, ref, "Adam, killed and resumed")
    # L-BFGS: the checkpoint holds its correction pairs, gradient and loss; 6 iterations equal
    # 3 + 3 resumed (killed in the fourth on one rank; stopped after the third on 3 ranks).
    lb = text.replace("grad_smooth = 1.0\n", "").replace("[fwi]\n", '[fwi]\noptimizer = "lbfgs"\nlbfgs_memory = 3\n')
    lb = lb.replace("checkpoint_every = 2", "checkpoint_every = 3")
    cfg = write_config("resume_lbfgs.toml", lb)
    ref = fresh("resume_lbfgs_ref")
    ksweep(["fwi", "-c", cfg, "-o", ref])
    if max(h["evaluations"] for h in history(ref)) < 2 or len(history(ref)) != 6:
        fail(f"L-BFGS: the reference run should take line-search steps: {history(ref)}")
    out = fresh("resume_lbfgs_run")
    kill_after(cfg, out, 4)
    ksweep(["fwi", "-c", cfg, "-o", out, "--resume", out])
    same_run(out, ref, "L-BFGS, killed in iteration 5 and resumed from the checkpoint of iteration 3")
    if MPIEXEC != "none":
        out = fresh("resume_lbfgs_ranks")
        ksweep(["fwi", "-c", cfg, "-o", out, "--set", "fwi.iterations=3"], ranks=3)
        ksweep(["fwi", "-c", cfg, "-o", out, "--resume", out], ranks=3)
        same_run(out, ref, "L-BFGS, 3 + 3 iterations on 3 ranks")


def model_bytes(out, name="model_final.h5"):
    with h5py.File(os.path.join(out, name), "r") as f:
        return f["vp"][...].tobytes()


def case_schedules():
    # The README's promise on the shipped example: losses and models are the same bits with every
    # schedule, thread count and number of ranks, and after a resume that changes the schedule.
    # Marmousi at 25 m with its 50-cell layer, Adam with eps 1e-16 (a round-off difference in a
    # weakly lit cell becomes a full step), fp16 and fp32 storage, `mean` residual scaling, whose
    # residuals and wavelet tails reach the subnormal range.
    here = os.path.dirname(os.path.abspath(__file__))
    cfg = os.path.join(here, "..", "..", "share", "examples", "marmousi_25m.toml")
    base = ["fwi", "-c", cfg]
    for x in ["time.nt=500", "shots.count=6", "fwi.batch=4", "fwi.figures_every=0", "fwi.checkpoint_every=1"]:
        base += ["--set", x]

    def run(name, sets, ranks=1, threads=1, extra=(), env=None):
        out = fresh(name)
        args = list(base)
        for x in sets:
            args += ["--set", x]
        ksweep(args + ["-o", out] + list(extra), ranks=ranks, threads=threads, env=env)
        return out

    def same(a, b, what, models=("model_final.h5",)):
        for m in models:
            if model_bytes(a, m) != model_bytes(b, m):
                x = np.frombuffer(model_bytes(a, m), np.float32)
                y = np.frombuffer(model_bytes(b, m), np.float32)
                fail(f"{what}: {m} differs in {int(np.count_nonzero(x != y))} cells "
                     f"(max |dv| {np.abs(x.astype(np.float64) - y).max():.3e} m/s)")
        la, lb = [h["loss"] for h in history(a)], [h["loss"] for h in history(b)]
        if la != lb:
            fail(f"{what}: loss histories differ: {la} vs {lb}")
        print(f"{what}: the same bits")

    # The one-thread runs go two at a time (the machine's two cores; their bits do not depend on
    # what else runs).
    from concurrent.futures import ThreadPoolExecutor
    one_thread = {("shots" if k == 0 else "batched" if k == 1 else "cells", dtype): None
                  for dtype in ("fp16", "fp32") for k in range(3)}
    with ThreadPoolExecutor(max_workers=2) as pool:
        jobs = {key: pool.submit(run, f"sched_{key[0]}_{key[1]}",
                                 ["fwi.iterations=1", f"storage.dtype={key[1]}", "fwi.save_models=true",
                                  f"propagator.schedule={key[0]}"]) for key in one_thread}
        ref_job = pool.submit(run, "split_1x1", ["fwi.iterations=3"])
        half_job = pool.submit(run, "resume_sched", ["fwi.iterations=2", "propagator.schedule=shots"])
        outs = {key: job.result() for key, job in jobs.items()}
        ref, half = ref_job.result(), half_job.result()
    # 1. The schedules on one thread, one iteration, fp16 and fp32 storage.
    for dtype in ("fp16", "fp32"):
        for s in ("batched", "cells"):
            same(outs[("shots", dtype)], outs[(s, dtype)], f"{dtype}: schedule {s} vs shots",
                 ("models/model_0001.h5", "model_final.h5"))
    # 2. Ranks and threads (automatic schedule): ranks with fewer shots than threads take
    # `batched`, the others `shots`.
    # (More threads than the machine's two cores: the threads wait passively at barriers rather
    # than spinning against each other; the schedule and the bits do not depend on it.)
    for ranks, threads in ((1, 4), (2, 3), (3, 2)):
        same(ref, run(f"split_{ranks}x{threads}", ["fwi.iterations=3"], ranks=ranks, threads=threads,
                      env={"OMP_WAIT_POLICY": "passive"}),
             f"{ranks} rank(s) x {threads} thread(s) vs 1 x 1")
    # 3. A resume that changes the schedule (and the thread count) half way.
    ksweep(base + ["--set", "fwi.iterations=3", "--set", "propagator.schedule=cells", "-o", half, "--resume", half],
           threads=2)
    same(ref, half, "2 iterations with `shots`, resumed with `cells` for the third, vs 3 with `auto`")
    print("schedules: ok")


THREE_D = """
[model]
source = "layered3d"
nz = 24
ny = 18
nx = 30
dh = 20.0
decimate = 1
[time]
dt = 0.002
nt = 250
[wavelet]
freq = 6.0
delay = 0.2
[shots]
count = 3
count_y = 2
z = 1
x_range = [0.2, 0.8]
y_range = [0.3, 0.7]
[receivers]
count = 15
count_y = 4
y_range = [0.1, 0.9]
z = 2
[propagator]
order = 4
pml_width = 8
[storage]
strategy = "boundary"
dtype = "fp16"
[fwi]
iterations = 3
batch = 4
lr = 10.0
seed = 3
checkpoint_every = 1
figures_every = 0
save_models = false
smooth_sigma = 3.0
"""


def case_three_d():
    # 3D end to end: records and models of the right shapes, the same bits on every split of the
    # work and after a resume, the same records from the generated model, its raw float32 copy and
    # its HDF5 copy, the 3D figures.
    cfg = write_config("three_d.toml", THREE_D)
    out = fresh("three_d_model")
    ksweep(["model", "-c", cfg, "-o", out])
    with h5py.File(os.path.join(out, "observed.h5"), "r") as f:
        d = f["data"][...]
        if d.shape != (6, 250, 60):
            fail(f"3D observed.h5 data has shape {d.shape}, expected (6, 250, 60)")
        if int(f.attrs["ny"]) != 18 or len(f["src_y"][...]) != 6 or len(f["rec_y"][...]) != 60:
            fail("3D observed.h5 lacks ny, src_y or rec_y of the right sizes")
        if sorted(set(f["rec_y"][...].tolist())) != [2, 6, 11, 15] or sorted(set(f["src_y"][...].tolist())) != [5, 12]:
            fail(f"receiver / source lines at y = {sorted(set(f['rec_y'][...].tolist()))} / "
                 f"{sorted(set(f['src_y'][...].tolist()))}, expected [2, 6, 11, 15] / [5, 12]")
        if not np.all(np.isfinite(d)) or np.abs(d).max() <= 0:
            fail("3D observed data are not finite or all zero")
    runs = {}
    resumed = fresh("three_d_resume")
    # The one-thread runs go two at a time (the machine's two cores; their bits do not depend on
    # what else runs): 1 x 1 beside the first half of the resumed run, then 1 x 2 and 2 x 1.
    from concurrent.futures import ThreadPoolExecutor
    with ThreadPoolExecutor(max_workers=2) as pool:
        o = fresh("three_d_1x1")
        jobs = [pool.submit(ksweep, ["fwi", "-c", cfg, "-o", o, "--set", "fwi.figures_every=3"]),
                pool.submit(ksweep, ["fwi", "-c", cfg, "-o", resumed, "--set", "fwi.iterations=2"])]
        for j in jobs:
            j.result()
    runs[(1, 1)] = (final_model(o), history(o), o)
    for ranks, threads in ((1, 2), (2, 1)):
        o = fresh(f"three_d_{ranks}x{threads}")
        ksweep(["fwi", "-c", cfg, "-o", o], ranks=ranks, threads=threads)
        runs[(ranks, threads)] = (final_model(o), history(o), o)
    ref_m, ref_h, ref_out = runs[(1, 1)]
    if ref_m.shape != (24, 18, 30):
        fail(f"3D model_final.h5 has shape {ref_m.shape}, expected (24, 18, 30)")
    for key, (m, h, _) in runs.items():
        diff = int(np.count_nonzero(m != ref_m))
        print(f"3D: {key[0]} rank(s) x {key[1]} thread(s) vs 1 x 1: {diff} cells differ")
        if diff or [x["loss"] for x in h] != [x["loss"] for x in ref_h]:
            fail(f"3D: {key[0]} rank(s) x {key[1]} thread(s) differs from 1 rank x 1 thread")
    if not ref_h[-1]["loss"] < ref_h[0]["loss"]:
        fail(f"3D: the loss did not decrease: {[x['loss'] for x in ref_h]}")
    with h5py.File(os.path.join(ref_out, "epochs", "epoch_0003.h5"), "r") as f:
        if f["grad"].shape != (24, 18, 30) or f["illum_src"].shape != (24, 18, 30):
            fail("3D epoch file images are not [nz][ny][nx]")
    for fig in ("epoch_0003.png", "observed_data.png", "loss.png"):
        if not os.path.getsize(os.path.join(ref_out, "figures", fig)) > 10000:
            fail(f"3D figure {fig} missing or empty")
    # Resume: 2 iterations, then continued to 3, equals the 3-iteration run bit for bit.
    o = resumed
    ksweep(["fwi", "-c", cfg, "-o", o, "--resume", o])
    if not np.array_equal(final_model(o), ref_m):
        fail("3D: the resumed run differs from the uninterrupted one")
    # The same model as a raw float32 file and as an HDF5 file gives the same records.
    with h5py.File(os.path.join(ref_out, "true_model.h5"), "r") as f:
        vp = f["vp"][...]
    raw = os.path.join(WORK, "three_d_vp.f32")
    vp.astype("<f4").tofile(raw)
    for source, sets in ((raw, ["model.nz=24", "model.ny=18", "model.nx=30", "model.dh=20.0"]),
                         (os.path.join(ref_out, "true_model.h5"), ["model.nz=0", "model.ny=0", "model.nx=0",
                                                                   "model.dh=0.0"])):
        o2 = fresh("three_d_file")
        args = ["model", "-c", cfg, "-o", o2, "--set", f'model.source="{source}"']
        for x in sets:
            args += ["--set", x]
        ksweep(args)
        with h5py.File(os.path.join(o2, "observed.h5"), "r") as f:
            if not np.array_equal(f["data"][...], d):
                fail(f"3D records from {source} differ from those of the generated model")
    # A raw file whose size does not match nz ny nx is refused with the sizes named.
    r = ksweep(["model", "-c", cfg, "-o", fresh("three_d_bad"), "--set", f'model.source="{raw}"', "--set",
                "model.nz=24", "--set", "model.ny=17", "--set", "model.nx=30", "--set", "model.dh=20.0"], check=False)
    if r.returncode == 0 or "bytes, expected" not in r.stderr:
        fail(f"a raw 3D file of the wrong size was not refused clearly: {r.stderr}")
    print("three_d: ok")


def case_converges():
    text = BASE.replace("iterations = 3", "iterations = 8")
    cfg = write_config("converge.toml", text)
    out = fresh("converge")
    ksweep(["fwi", "-c", cfg, "-o", out, "--set", "fwi.batch=6", "--set", "fwi.grad_smooth=3", "--set", "fwi.lr=10"])
    with open(os.path.join(out, "summary.json")) as f:
        s = json.load(f)
    h = s["iterations"]
    l0, l1 = h[0]["loss"], h[-1]["loss"]
    r0, r1 = s["initial"]["rmse"], h[-1]["rmse"]
    print(f"loss {l0:.4e} -> {l1:.4e}, rmse {r0:.2f} -> {r1:.2f} m/s")
    if not l1 < 0.7 * l0:
        fail(f"loss did not decrease enough: {l0} -> {l1}")
    if not r1 < r0:
        fail(f"rmse did not decrease: {r0} -> {r1}")
    for name in ("model_final.h5", "true_model.h5", "initial_model.h5", "observed.h5", "checkpoint.bin"):
        if not os.path.exists(os.path.join(out, name)):
            fail(f"missing output {name}")
    if "peak_device_bytes" not in s["memory"] or s["memory"]["peak_device_bytes"] <= 0:
        fail("summary.json has no measured peak memory")
    # L-BFGS (every shot per gradient, a Wolfe line search): the loss falls, each iteration
    # reports its gradient evaluations, and 1 and 2 ranks give the same model bytes.
    lb = ["--set", 'fwi.optimizer="lbfgs"', "--set", "fwi.lr=10", "--set", "fwi.iterations=4", "--set", "fwi.grad_smooth=0",
          "--set", "fwi.checkpoint_every=0", "--set", "fwi.figures_every=0"]
    outs = []
    for ranks in (1, 2):
        o = fresh(f"converge_lbfgs_{ranks}")
        ksweep(["fwi", "-c", cfg, "-o", o] + lb, ranks=ranks)
        outs.append(o)
    with open(os.path.join(outs[0], "summary.json")) as f:
        h = json.load(f)["iterations"]
    evals = [e.get("evaluations", 0) for e in h]
    print(f"lbfgs: loss {h[0]['loss']:.4e} -> {h[-1]['loss']:.4e}, evaluations {evals}")
    if not h[-1]["loss"] < 0.7 * h[0]["loss"] or min(evals) < 1:
        fail(f"L-BFGS: loss {h[0]['loss']} -> {h[-1]['loss']}, evaluations {evals}")
    models_equal(outs[0], outs[1], "L-BFGS on 1 and 2 ranks")
    print("converges: ok")


def expect_error(args, needle, ranks=1, out=None):
    r = ksweep(args, ranks=ranks, check=False, timeout=120)
    text = r.stdout + r.stderr
    if r.returncode == 0:
        fail(f"no error for {args}")
    if needle not in text:
        fail(f"error for {args} does not mention {needle!r}:\n{text}")
    if out is not None and os.path.exists(out) and os.listdir(out):
        fail(f"{out} holds output after a failed run: {os.listdir(out)}")
    print(f"error as expected ({needle!r}): {text.strip().splitlines()[-1][:160]}")


def case_bad_inputs():
    cfg = write_config("bad.toml")
    expect_error(["fwi", "-c", cfg, "-o", fresh("bad_lbfgs"), "--set", 'fwi.optimizer="lbfgs"', "--set",
                  "fwi.precondition=true"], "fwi.precondition")
    expect_error(["fwi", "-c", cfg, "-o", fresh("bad_lbfgs"), "--set", 'fwi.optimizer="bfgs"'], "fwi.optimizer")
    # A wavelet file's amplitudes beyond float32, or so large that the wave overflows: refused,
    # nothing written (observed.h5 was written full of inf).
    t = np.arange(500) * 0.003
    for scale, needle in ((1e300, "does not fit float32"), (3e38, "the wave overflowed float32")):
        wfile = os.path.join(WORK, f"loud_{scale:g}.txt")
        np.savetxt(wfile, np.c_[t, scale * gabor(t)], delimiter=", ")
        o = fresh("loud_wavelet")
        run_error(["model", "-c", cfg, "-o", o, "--set", f'wavelet.source="{wfile}"'], [needle])
        if os.path.exists(o) and os.listdir(o):
            fail(f"a wavelet of {scale:g} left files behind: {os.listdir(o)}")
    # Stages of falling frequency: said.
    r = ksweep(["fwi", "-c", cfg, "-o", fresh("falling_stages"), "--dry-run", "--set",
                "fwi.stages=[{max_freq = 8, iterations = 1}, {max_freq = 4, iterations = 1}]", "--set",
                "fwi.iterations=2"])
    if "fwi.stages[1].max_freq = 4 Hz is below the stage before it (8 Hz)" not in r.stderr:
        fail(f"stages of falling frequency without a warning:\n{r.stderr}")
    # One optimizer's keys set for the other: refused, not ignored.
    expect_error(["fwi", "-c", cfg, "-o", fresh("bad_lbfgs"), "--set", "fwi.lbfgs_memory=10"],
                 'fwi.lbfgs_memory is set, but fwi.optimizer = "adam" does not use it')
    expect_error(["fwi", "-c", cfg, "-o", fresh("bad_lbfgs"), "--set", 'fwi.optimizer="lbfgs"', "--set",
                  "fwi.grad_smooth=0", "--set", "fwi.beta1=0.5"], 'fwi.beta1 is set, but fwi.optimizer = "lbfgs"')
    obs_dir = fresh("bad_obs")
    ksweep(["model", "-c", cfg, "-o", obs_dir, "--set", "receivers.count=50"])
    obs = os.path.join(obs_dir, "observed.h5")
    out = fresh("bad_out")
    expect_error(["fwi", "-c", cfg, "-o", out, "--set", f'fwi.observed="{obs}"'], "has shape", out=out)
    expect_error(["fwi", "-c", cfg, "-o", out, "--set", 'fwi.observed="/nonexistent/observed.h5"'],
                 "/nonexistent/observed.h5", out=out)
    corrupt = os.path.join(WORK, "corrupt.h5")
    with open(corrupt, "wb") as f:
        f.write(b"\x89HDF\r\n\x1a\n" + os.urandom(2000))
    expect_error(["fwi", "-c", cfg, "-o", out, "--set", f'fwi.observed="{corrupt}"'], "corrupt.h5", out=out)
    ok_obs = fresh("ok_obs")
    ksweep(["model", "-c", cfg, "-o", ok_obs, "--set", "receivers.count=59"])
    expect_error(["fwi", "-c", cfg, "-o", out, "--set", f'fwi.observed="{ok_obs}/observed.h5"'], "has shape", out=out)
    expect_error(["fwi", "-c", cfg, "-o", out, "--set", "fwi.batch=10"], "fwi.batch = 10", out=out)
    # The survey's two descriptions in observed.h5 (metres and cells) disagreeing: a receiver
    # moved one cell, the sources reversed; refused, naming the shot and the point.
    for edit, needle in (("rec_x", "shot 0's receiver 3 at"), ("src_x", "shot 0's source at")):
        moved = os.path.join(WORK, f"moved_{edit}.h5")
        shutil.copyfile(os.path.join(ok_obs, "observed.h5"), moved)
        with h5py.File(moved, "r+") as f:
            cells = f[edit][...]
            if edit == "rec_x":
                cells[3] += 1
            else:
                cells = cells[::-1].copy()
            f[edit][...] = cells
        expect_error(["fwi", "-c", cfg, "-o", out, "--set", "receivers.count=59", "--set",
                      f'fwi.observed="{moved}"'], needle, out=out)
    expect_error(["fwi", "-c", cfg, "-o", out, "--set", "fwi.learning_rate=3"], "learning_rate", out=out)
    expect_error(["fwi", "-c", cfg, "-o", out, "--set", "time.dt=0.01"], "CFL", out=out)
    expect_error(["fwi", "-c", cfg, "-o", out, "--set", "storage.dtype=fp8"], "fp8", out=out)
    # Wavelets and stages: a missing or malformed wavelet file, an estimate without data to
    # estimate from, stages above the Nyquist frequency or fewer iterations than asked for.
    expect_error(["fwi", "-c", cfg, "-o", out, "--set", 'wavelet.source="/nonexistent/w.txt"'],
                 "wavelet.source = \"/nonexistent/w.txt\"", out=out)
    bad_w = os.path.join(WORK, "bad_wavelet.txt")
    with open(bad_w, "w") as f:
        f.write("0 0.0\n0.001 1.0\n0.003 0.5\n")
    expect_error(["fwi", "-c", cfg, "-o", out, "--set", f'wavelet.source="{bad_w}"'], "sample 3 is at 0.003 s",
                 out=out)
    expect_error(["model", "-c", cfg, "-o", out, "--set", 'wavelet.source="estimate"'], "ksweep model makes data",
                 out=out)
    expect_error(["fwi", "-c", cfg, "-o", out, "--set", "fwi.stages=[{max_freq=200, iterations=2}]"],
                 "fwi.stages[0].max_freq = 200", out=out)
    expect_error(["fwi", "-c", cfg, "-o", out, "--set", "fwi.stages=[{max_freq=4, iterations=2}]", "--set",
                  "fwi.iterations=3"], "fwi.stages add up to 2", out=out)
    expect_error(["fwi", "-c", cfg, "-o", out, "--set", "fwi.stages=[{max_freq=4, iters=2}]"],
                 "allowed: max_freq, iterations", out=out)
    # With several ranks a failure on rank 0 ends every rank (no hang).
    t0 = time.time()
    expect_error(["fwi", "-c", cfg, "-o", out, "--set", f'fwi.observed="{corrupt}"'], "corrupt.h5", ranks=2, out=out)
    print(f"2-rank failure ended in {time.time() - t0:.1f} s")
    # A check every rank makes alike, failing on every rank: one message, no MPI abort.
    if MPIEXEC != "none":
        r = ksweep(["fwi", "-c", cfg, "-o", out, "--set", "model.crop_x=[250, 270]"], ranks=2, check=False)
        text = r.stdout + r.stderr
        if r.returncode == 0 or text.count("receivers.count = 60 must be in") != 1 or "MPI_ABORT" in text:
            fail(f"a check failing on both ranks: exit {r.returncode}, printed "
                 f"{text.count('receivers.count = 60 must be in')} time(s):\n{text}")
        # An off-grid receiver whose taps cross the cut of a split: refused with the checks,
        # before the model is read or anything allocated (it was refused once modelling began).
        cut = os.path.join(WORK, "cut.csv")
        with open(cut, "w") as f:
            f.write("shot,src_x,src_z,rec_x,rec_z\n1,400,50,1487.5,60\n1,400,50,1000,60\n"
                    "2,2000,50,1487.5,60\n2,2000,50,1000,60\n")
        t0 = time.time()
        o = fresh("bad_cut")
        expect_error(["fwi", "-c", cfg, "-o", o, "--set", "parallel.domains=[2]", "--set", f'survey.file="{cut}"',
                      "--set", "fwi.batch=2"], "reach across the cut at x = 60", ranks=2, out=o)
        if time.time() - t0 > 20:
            fail(f"the crossing point was refused only after {time.time() - t0:.0f} s")
    print("bad_inputs: ok")


def marmousi_file(name):
    """The Marmousi data file `name`, looked up as the program looks it up."""
    here = os.path.dirname(os.path.abspath(__file__))
    places = [os.environ.get("KSWEEP_MARMOUSI_DIR", ""), os.path.join(os.getcwd(), "..", "shared", "marmousi"),
              os.path.join(here, "..", "..", "..", "shared", "marmousi"),
              os.path.join(os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache")), "ksweep", "marmousi")]
    for p in places:
        if p and os.path.isfile(os.path.join(p, name)):
            return os.path.join(p, name)
    fail(f"{name} not found in {places}")


def import_segyio():
    """Python's segyio (Debian's python3-segyio, which scripts/setup.sh installs). An interpreter
    without it (a device machine's own Python) skips the case: exit code 77, which ctest reports
    as skipped."""
    try:
        import segyio
    except ImportError as e:
        print(f"SKIP: this Python ({sys.executable}) has no segyio: {e}")
        sys.exit(77)
    return segyio


def case_segy():
    """SEG-Y in and out: `ksweep model` writes observed.segy, which segyio reads with the samples
    and geometry of observed.h5; `ksweep fwi` inverts from it with the same bits as from the HDF5
    file; the Marmousi-II SEG-Y (IBM floats, km/s, 1.25 m) loads as the named 12.5 m model."""
    import gzip
    segyio = import_segyio()
    cfg = write_config("segy.toml")
    out = fresh("segy_model")
    ksweep(["model", "-c", cfg, "-o", out, "--set", "output.segy=true"])
    h5 = os.path.join(out, "observed.h5")
    sgy = os.path.join(out, "observed.segy")
    with h5py.File(h5, "r") as f:
        data = f["data"][...]
        src_x, src_z, rec_x, rec_z = (f[k][...] for k in ("src_x", "src_z", "rec_x", "rec_z"))
        dh, dt = float(f.attrs["dh"]), float(f.attrs["dt"])
    shots, nt, nrec = data.shape
    with segyio.open(sgy, ignore_geometry=True) as s:
        traces = segyio.tools.collect(s.trace[:])
        head = {k: s.attributes(k)[:] for k in (segyio.TraceField.FieldRecord, segyio.TraceField.TraceNumber,
                                                segyio.TraceField.SourceX, segyio.TraceField.GroupX,
                                                segyio.TraceField.SourceDepth,
                                                segyio.TraceField.ReceiverGroupElevation,
                                                segyio.TraceField.SourceGroupScalar)}
        if len(s.samples) != nt or abs(segyio.tools.dt(s) - dt * 1e6) > 1e-6:
            fail(f"observed.segy: {len(s.samples)} samples of {segyio.tools.dt(s)} us, expected {nt} of {dt * 1e6}")
    if not np.array_equal(traces.reshape(shots, nrec, nt).transpose(0, 2, 1), data):
        fail("observed.segy's samples differ from observed.h5's")
    T = segyio.TraceField
    checks = {"fldr": (head[T.FieldRecord], np.repeat(np.arange(1, shots + 1), nrec)),
              "tracf": (head[T.TraceNumber], np.tile(np.arange(1, nrec + 1), shots)),
              "sx": (head[T.SourceX], np.repeat(src_x * dh * 1000, nrec)),
              "gx": (head[T.GroupX], np.tile(rec_x * dh * 1000, shots)),
              "sdepth": (head[T.SourceDepth], np.repeat(src_z * dh * 1000, nrec)),
              "gelev": (head[T.ReceiverGroupElevation], np.tile(-rec_z * dh * 1000, shots)),
              "scalco": (head[T.SourceGroupScalar], np.full(shots * nrec, -1000))}
    for name, (got, want) in checks.items():
        if not np.array_equal(got, np.round(want).astype(got.dtype)):
            fail(f"observed.segy header {name}: {got[:8]} ..., expected {want[:8]} ...")
    # The inversion from the SEG-Y gathers and from the HDF5 records: the same bits.
    runs = []
    for obs in (h5, sgy):
        o = fresh("segy_fwi_" + os.path.basename(obs).replace(".", "_"))
        ksweep(["fwi", "-c", cfg, "-o", o, "--set", f'fwi.observed="{obs}"', "--set", "fwi.iterations=2"])
        runs.append([(it["loss"], it["rmse"]) for it in history(o)])
    if runs[0] != runs[1]:
        fail(f"fwi from observed.segy differs from fwi from observed.h5: {runs[1]} vs {runs[0]}")
    # Gathers at another sampling interval (1.5 ms, modelled finer) are resampled to time.dt; the
    # run's observed.h5 holds them as inverted. Against the data modelled at time.dt itself they
    # differ by the two modellings' time stepping only, once the source convention is allowed
    # for (a wavelet sample is added to the field each step: records scale as 1 / dt^2).
    fine = fresh("segy_fine")
    ksweep(["model", "-c", cfg, "-o", fine, "--set", "output.segy=true", "--set", "time.dt=0.0015",
            "--set", "time.nt=1000"])
    o = fresh("segy_fwi_resampled")
    r = ksweep(["fwi", "-c", cfg, "-o", o, "--set", f'fwi.observed="{os.path.join(fine, "observed.segy")}"',
                "--set", "fwi.iterations=1"])
    if "resampled from 1000 samples of 0.0015 s to time.nt = 500 samples of time.dt = 0.003 s" not in r.stdout:
        fail(f"no resampling line in the output:\n{r.stdout}")
    with h5py.File(os.path.join(o, "observed.h5"), "r") as f:
        resampled = f["data"][...]
    with h5py.File(os.path.join(fine, "observed.h5"), "r") as f:
        every_other = f["data"][:, ::2, :]
    # The data hold nothing near 167 Hz (the Nyquist frequency of 3 ms): low-passing and keeping
    # every other sample must give the fine samples themselves, to the filter's pass-band ripple,
    # but for the last 8 samples of 3 ms, where the kernel reaches past the record's end.
    keep = resampled.shape[1] - 8
    rel_fine = (np.linalg.norm(resampled[:, :keep] - every_other[:, :keep]) /
                np.linalg.norm(every_other[:, :keep]))
    scaled = resampled * (0.0015 / 0.003) ** 2
    rel = np.linalg.norm(scaled - data) / np.linalg.norm(data)
    print(f"gathers modelled at 1.5 ms and resampled to 3 ms: relative L2 {rel_fine:.2e} from every other fine "
          f"sample, {rel:.2e} from the gathers modelled at 3 ms (the modellings' own difference)")
    if resampled.shape != data.shape or rel_fine > 1e-5 or rel > 0.1:
        fail(f"resampled gathers {resampled.shape}: {rel_fine:.2e} from the fine samples, {rel:.2e} from the "
             "data modelled at time.dt")
    # A truncated SEG-Y: refused before any modelling, naming the file.
    cut = os.path.join(WORK, "cut.segy")
    shutil.copyfile(sgy, cut)
    os.truncate(cut, os.path.getsize(cut) - 1000)
    run_error(["fwi", "-c", cfg, "-o", fresh("segy_cut"), "--set", f'fwi.observed="{cut}"'],
              ["cut.segy", "truncated"])
    # Coordinates a SEG-Y field cannot hold (millimetres in 32 bits): refused with nothing
    # written (observed.h5 was written first, then the run failed).
    wide = os.path.join(WORK, "wide.f32")
    np.full((20, 40), 2000.0, np.float32).tofile(wide)
    o = fresh("segy_wide")
    run_error(["model", "-c", cfg, "-o", o, "--set", "output.segy=true", "--set", f'model.source="{wide}"',
               "--set", "model.nz=20", "--set", "model.nx=40", "--set", "model.dh=100000", "--set",
               "model.decimate=1", "--set", "model.crop_z=[0, 20]", "--set", "model.crop_x=[0, 40]", "--set",
               "shots.count=1", "--set", "receivers.count=10", "--set", "propagator.pml_width=5"],
              ["observed.segy", "does not fit a SEG-Y coordinate field in millimetres"])
    if os.path.exists(o) and os.listdir(o):
        fail(f"a survey SEG-Y cannot hold left files behind: {os.listdir(o)}")
    # A sample float32 cannot hold (NaN, inf): refused when read, naming the trace, before any
    # file is written (the run wrote four files, then stopped at a NaN loss).
    for label, value in (("nan", np.nan), ("inf", np.inf)):
        bad = os.path.join(WORK, f"{label}.segy")
        shutil.copyfile(sgy, bad)
        with segyio.open(bad, "r+", ignore_geometry=True) as f:
            tr = f.trace[6].copy()
            tr[40] = value
            f.trace[6] = tr
        o = fresh(f"segy_{label}")
        run_error(["fwi", "-c", cfg, "-o", o, "--set", f'fwi.observed="{bad}"'],
                  [f"{label}.segy", "trace 7 (shot 0, receiver 6)", "not a finite float32", "time sample 40"])
        if os.path.exists(o) and os.listdir(o):
            fail(f"a SEG-Y sample {label} left files behind: {os.listdir(o)}")
    # The Marmousi-II SEG-Y: every 20th node of the 1.25 m grid in both directions is the named
    # 12.5 m model decimated by 2, bit for bit (IBM decoded exactly, x 1000 in double, rounded once).
    raw = os.path.join(WORK, "vp_marmousi-ii.segy")
    with gzip.open(marmousi_file("vp_marmousi-ii.segy.gz")) as g, open(raw, "wb") as f:
        shutil.copyfileobj(g, f, 1 << 24)
    small = ["--set", "time.nt=150", "--set", "fwi.iterations=1", "--set", "shots.count=2", "--set", "fwi.batch=2",
             "--set", "fwi.checkpoint_every=0"]
    from_segy = ["--set", f'model.source="{raw}"', "--set", "model.dh=1.25", "--set", "model.decimate=20"]
    run_error(["fwi", "-c", cfg, "-o", fresh("segy_kms")] + small + from_segy, ["in km/s", 'model.units = "km/s"'])
    models = []
    for extra in ([], from_segy + ["--set", 'model.units="km/s"']):
        o = fresh("segy_marmousi_" + str(len(models)))
        ksweep(["fwi", "-c", cfg, "-o", o] + small + extra)
        with h5py.File(os.path.join(o, "true_model.h5"), "r") as f:
            models.append(f["vp"][...])
    os.remove(raw)
    if models[0].shape != models[1].shape or not np.array_equal(models[0], models[1]):
        fail(f"the Marmousi-II SEG-Y at 25 m differs from the named model: shapes {models[0].shape}, "
             f"{models[1].shape}, max |diff| {np.max(np.abs(models[0] - models[1])) if models[0].shape == models[1].shape else '-'}")
    print("segy: ok")


def case_survey():
    """A survey from a file: a towed streamer (the spread moves with the source, fewer receivers
    in later shots, sources 10 m and receivers 7.5 m deep, off the 25 m grid) from CSV; `ksweep
    model` writes its geometry in metres to observed.h5 and observed.segy; `ksweep fwi` from the
    SEG-Y alone (the survey from its trace headers) and from observed.h5 with the CSV give the same
    bits; a position outside the model is refused naming the file's line."""
    segyio = import_segyio()
    cfg = write_config("survey.toml")
    csv = os.path.join(WORK, "streamer.csv")
    counts = [60 - 4 * k for k in range(6)]
    rows = ["shot,src_x,src_z,rec_x,rec_z"]
    for k, n in enumerate(counts):
        sx = 400.0 + 300.0 * k
        rows += [f"{101 + k},{sx},10,{sx + 100.0 + 12.5 * i},7.5" for i in range(n)]
    with open(csv, "w") as f:
        f.write("\n".join(rows) + "\n")
    out = fresh("survey_model")
    r = ksweep(["model", "-c", cfg, "-o", out, "--set", f'survey.file="{csv}"', "--set", "output.segy=true"])
    if "survey.file replaces" not in r.stderr:
        fail(f"no warning that survey.file replaces [shots] and [receivers]:\n{r.stderr}")
    h5 = os.path.join(out, "observed.h5")
    sgy = os.path.join(out, "observed.segy")
    with h5py.File(h5, "r") as f:
        data, rec_pos, src_pos = f["data"][...], f["rec_pos"][...], f["src_pos"][...]
        rec_count = f["rec_count"][...]
        if "rec_x" in f:
            fail("observed.h5 of a moving spread holds the cell datasets of a shared spread")
    if list(rec_count) != counts or data.shape[2] != max(counts):
        fail(f"observed.h5: rec_count {list(rec_count)}, data {data.shape}; expected {counts}")
    if not np.array_equal(src_pos[:, 0], np.full(6, 10.0)) or rec_pos[5, counts[5] - 1, 1] != 1900 + 100 + 12.5 * 39:
        fail(f"observed.h5 geometry: sources {src_pos[:, :2]}, last receiver {rec_pos[5, counts[5] - 1]}")
    for k, n in enumerate(counts):
        if np.any(data[k, :, n:] != 0) or not np.any(data[k, :, :n]):
            fail(f"shot {k}: its {n} receivers must record and its padding slots stay zero")
    with segyio.open(sgy, ignore_geometry=True) as s:
        if s.tracecount != sum(counts):
            fail(f"observed.segy holds {s.tracecount} traces, expected {sum(counts)}")
        depth = s.attributes(segyio.TraceField.SourceDepth)[:]
        gx = s.attributes(segyio.TraceField.GroupX)[:]
        if not np.all(depth == 10000) or gx[counts[0]] != round((700.0 + 100.0) * 1000):
            fail(f"observed.segy headers: sdepth {depth[:3]}, gx of shot 2's first trace {gx[counts[0]]}")
    runs = []
    for obs, extra in ((sgy, []), (h5, ["--set", f'survey.file="{csv}"'])):
        o = fresh("survey_fwi_" + os.path.basename(obs).replace(".", "_"))
        ksweep(["fwi", "-c", cfg, "-o", o, "--set", f'fwi.observed="{obs}"', "--set", "fwi.iterations=2"] + extra)
        runs.append([(it["loss"], it["rmse"]) for it in history(o)])
    if runs[0] != runs[1]:
        fail(f"fwi from observed.segy's headers differs from fwi from observed.h5 with the CSV: {runs}")
    if not runs[0][1][0] < runs[0][0][0]:
        fail(f"the loss did not decrease: {runs[0]}")
    # A receiver line given twice: said (it was used and weighted twice without a word).
    twice = os.path.join(WORK, "twice.csv")
    with open(twice, "w") as f:
        f.write("\n".join(rows[:5] + [rows[3]] + rows[5:]) + "\n")
    r = ksweep(["model", "-c", cfg, "-o", fresh("survey_twice"), "--set", f'survey.file="{twice}"'])
    if "1 receiver(s) repeat the position of another receiver of their shot (the first: shot 0, receivers 2 and 4" \
            not in r.stderr:
        fail(f"a receiver given twice without a word:\n{r.stderr}")
    bad = os.path.join(WORK, "outside.csv")
    with open(bad, "w") as f:
        f.write("\n".join(rows[:5] + ["106,1900,10,3100,7.5"]) + "\n")
    run_error(["model", "-c", cfg, "-o", fresh("survey_bad"), "--set", f'survey.file="{bad}"'],
              ["outside.csv", "line 6", "rec_x = 3100 m lies outside the model"])
    print(f"survey: ok (losses {runs[0]})")


def case_density():
    """Variable density in the program: a density from Gardner's relation, vp and rho inverted;
    every output carries both; 2 ranks and a resumed run give the same bits; bad densities are
    refused before anything is written."""
    vd = BASE + 'invert = ["vp", "rho"]\nlr_rho = 10.0\nfigures_every = 3\n'
    vd = vd.replace("figures_every = 0\n", "").replace("[propagator]\n", '[propagator]\nphysics = "acoustic_vd"\n')
    cfg = write_config("density.toml", vd)
    ref, part, alone = fresh("density_ref"), fresh("density_part"), fresh("density_vp")
    # The one-thread runs go two at a time (the machine's two cores; their bits do not depend on
    # what else runs): the reference, the first half of the resumed run, vp alone.
    from concurrent.futures import ThreadPoolExecutor
    with ThreadPoolExecutor(max_workers=2) as pool:
        ref_job = pool.submit(ksweep, ["fwi", "-c", cfg, "-o", ref], timeout=900)
        part_job = pool.submit(ksweep, ["fwi", "-c", cfg, "-o", part, "--set", "fwi.iterations=2"])
        alone_job = pool.submit(ksweep, ["fwi", "-c", cfg, "-o", alone, "--set", 'fwi.invert=["vp"]'])
        r = ref_job.result()
        part_job.result()
        alone_job.result()
    if "rmse rho" not in r.stdout:
        fail(f"no density RMSE in the progress lines:\n{r.stdout}")
    with h5py.File(os.path.join(ref, "true_model.h5"), "r") as f:
        vp, rho = f["vp"][...], f["rho"][...]
        gardner = (310.0 * vp.astype(np.float64) ** 0.25).astype(np.float32)
        if not np.array_equal(rho, gardner):
            fail("true_model.h5's rho is not Gardner's 310 vp^0.25")
    for name in ("initial_model.h5", "model_final.h5", "epochs/epoch_0003.h5"):
        with h5py.File(os.path.join(ref, name), "r") as f:
            for d in ("vp", "rho") + (("grad", "grad_rho") if "epoch" in name else ()):
                if d not in f or f[d].shape != vp.shape:
                    fail(f"{name} lacks a {vp.shape} dataset {d}")
    with h5py.File(os.path.join(ref, "initial_model.h5"), "r") as f0, \
            h5py.File(os.path.join(ref, "model_final.h5"), "r") as f1:
        if np.array_equal(f0["rho"][...], f1["rho"][...]):
            fail("the density did not change")
    h = history(ref)
    if not all("rmse_rho" in e for e in h):
        fail(f"summary.json's iterations lack rmse_rho: {h}")
    # Two ranks: the same bits.
    two = fresh("density_two")
    ksweep(["fwi", "-c", cfg, "-o", two], ranks=2, timeout=900)
    with open(os.path.join(two, "summary.json")) as f:
        s = json.load(f)
    if [d["rank"] for d in s["devices"]] != list(range(s["ranks"])) or not all(d["device"] for d in s["devices"]):
        fail(f"summary.json does not name each rank's device: {s['devices']}")
    if not isinstance(s["mpi"]["gpu_aware"], bool):
        fail(f"summary.json's mpi: {s['mpi']}")
    for m in ("vp", "rho"):
        with h5py.File(os.path.join(ref, "model_final.h5"), "r") as a, \
                h5py.File(os.path.join(two, "model_final.h5"), "r") as b:
            if a[m][...].tobytes() != b[m][...].tobytes():
                fail(f"2 ranks give another {m}")
    # Resume from iteration 2's checkpoint: the same bits as the uninterrupted run.
    ksweep(["fwi", "-c", cfg, "-o", part, "--resume", part])
    for m in ("vp", "rho"):
        with h5py.File(os.path.join(ref, "model_final.h5"), "r") as a, \
                h5py.File(os.path.join(part, "model_final.h5"), "r") as b:
            if a[m][...].tobytes() != b[m][...].tobytes():
                fail(f"the resumed run gives another {m}")
    if [e["loss"] for e in history(part)] != [e["loss"] for e in h]:
        fail("the resumed run's losses differ")
    # vp alone, the density held at its starting (smoothed) value.
    with h5py.File(os.path.join(alone, "initial_model.h5"), "r") as f0, \
            h5py.File(os.path.join(alone, "model_final.h5"), "r") as f1:
        if not np.array_equal(f0["rho"][...], f1["rho"][...]):
            fail('fwi.invert = ["vp"] changed the density')
    # Bad densities, each refused before any output.
    out = fresh("density_bad")
    expect_error(["fwi", "-c", cfg, "-o", out, "--set", "model.density=-5"], "model.density = -5", out=out)
    expect_error(["fwi", "-c", cfg, "-o", out, "--set", 'model.density="granite"'], "granite", out=out)
    expect_error(["fwi", "-c", cfg, "-o", out, "--set", 'fwi.invert=["vp","eta"]'], "eta", out=out)
    expect_error(["fwi", "-c", write_config("density_cd.toml"), "-o", out, "--set", "model.density=2000"],
                 "propagator.physics", out=out)
    small = os.path.join(WORK, "density_small.f32")
    np.full((10, 10), 2000, np.float32).tofile(small)
    # A density file's errors speak of a density (they called it a velocity file, model.source, m/s).
    expect_error(["fwi", "-c", cfg, "-o", out, "--set", f'model.density="{small}"'],
                 'model.density = "' + small + '": density file', out=out)
    zero = os.path.join(WORK, "density_zero.f32")
    np.full((281, 1361), 0.0, np.float32).tofile(zero)
    expect_error(["fwi", "-c", cfg, "-o", out, "--set", f'model.density="{zero}"'], "> 0 kg/m^3", out=out)
    expect_error(["fwi", "-c", cfg, "-o", out, "--set", f'model.density="{WORK}/no_density.h5"'],
                 'model.density = "' + WORK + '/no_density.h5": file not found', out=out)
    nan = os.path.join(WORK, "density_nan.h5")
    # A density of the raw model's shape (Marmousi2 at 12.5 m, before decimation and cropping),
    # with a NaN inside the cropped window.
    big = np.full((281, 1361), 2000, np.float32)
    big[6, 520] = np.nan
    with h5py.File(nan, "w") as f:
        f["rho"] = big
        f.attrs["dh"] = 12.5
    expect_error(["fwi", "-c", cfg, "-o", out, "--set", f'model.density="{nan}"'], "density_nan.h5", out=out)
    print("density: ok")


# --- Fault suite: used folders, checkpoints, numbers, full disks, signals, memory -------------

FAST = ["--set", "fwi.iterations=3", "--set", "fwi.checkpoint_every=1"]


def snapshot(folder):
    """{relative path: sha256} of every file under `folder` (empty when it does not exist)."""
    out = {}
    for root, _, files in os.walk(folder):
        for name in files:
            p = os.path.join(root, name)
            with open(p, "rb") as f:
                out[os.path.relpath(p, folder)] = hashlib.sha256(f.read()).hexdigest()
    return out


def check_clean(folder, before=None, what=""):
    """No temporary file under `folder`; with `before`, every file byte-identical to it."""
    snap = snapshot(folder)
    tmp = [p for p in snap if p.endswith(".tmp") or ".tmp." in os.path.basename(p)]
    if tmp:
        fail(f"{what}: temporary files left in {folder}: {tmp}")
    if before is not None and snap != before:
        changed = sorted(set(snap.items()) ^ set(before.items()))
        fail(f"{what}: {folder} changed: {changed[:6]}")


def run_error(args, needles, ranks=1, env=None, timeout=300, **kw):
    """Runs ksweep expecting exit code 1 and every needle in its output; returns the output."""
    cmd = launcher(ranks) + [KSWEEP] + args
    r = subprocess.run(cmd, env=dict(ENV, **(env or {})), capture_output=True, text=True, timeout=timeout, **kw)
    text = r.stdout + r.stderr
    if r.returncode == 0 or r.returncode < 0:
        fail(f"{' '.join(args)}: exit {r.returncode}, expected an error\n{text}")
    for n in needles:
        if n not in text:
            fail(f"{' '.join(args)}: the output does not mention {n!r}:\n{text}")
    for raw in ("[json.exception", "Traceback functionality", "terminate called", "Segmentation"):
        if raw in text:
            fail(f"{' '.join(args)}: raw library text {raw!r} in the output:\n{text}")
    print(f"  error as expected: {[l for l in text.strip().splitlines() if 'error' in l][-1][:170]}")
    return text


def models_equal(a, b, what):
    x, y = final_model(a), final_model(b)
    if not np.array_equal(x, y):
        fail(f"{what}: final models differ, max |dv| {np.abs(x - y).max()}")


def case_outputs():
    """Results are never mixed or half-written: every check runs before the first byte."""
    cfg = write_config("outputs.toml")
    a = fresh("out_a")
    ksweep(["fwi", "-c", cfg, "-o", a, "--set", "fwi.iterations=2", "--set", "fwi.save_models=true"])
    before = snapshot(a)
    # A second run into a used folder is refused; the first run's files stay byte-identical.
    run_error(["fwi", "-c", cfg, "-o", a, "--set", "fwi.lr=5"], ["holds the results of another run", "--overwrite",
                                                                  "--resume"])
    check_clean(a, before, "second run into a used folder")
    run_error(["model", "-c", cfg, "-o", a], ["holds the results of another run"])
    check_clean(a, before, "model into an fwi folder")
    # --dry-run runs the same checks (folder, resume) and writes nothing.
    run_error(["fwi", "-c", cfg, "-o", a, "--dry-run"], ["holds the results of another run"])
    run_error(["model", "-c", cfg, "-o", a, "--dry-run"], ["holds the results of another run"])
    run_error(["fwi", "-c", cfg, "-o", a, "--dry-run", "--resume", a, "--set", "fwi.lr=5"],
              ["fwi.lr: 20.0 in the checkpoint, 5.0 now"])
    r = ksweep(["fwi", "-c", cfg, "-o", a, "--dry-run", "--resume", a, "--set", "fwi.iterations=4"])
    if "the inputs are valid" not in r.stdout:
        fail(f"--dry-run of a valid resume:\n{r.stdout}")
    check_clean(a, before, "--dry-run")
    # A failing run into the same folder leaves it alone too (bad layer width, bad dt).
    run_error(["fwi", "-c", cfg, "-o", a, "--overwrite", "--set", "propagator.pml_width=1"], ["pml_width"])
    check_clean(a, before, "failing run with --overwrite")
    # Resuming into a different folder that holds results is refused as well.
    b = fresh("out_b")
    ksweep(["model", "-c", cfg, "-o", b])
    b_before = snapshot(b)
    run_error(["fwi", "-c", cfg, "-o", b, "--resume", a], ["holds the results of another run"])
    check_clean(b, b_before, "resume into another run's folder")
    # With fwi.observed given, the layer width, CFL, vmax and disk_dir checks run before any
    # output is written (before observed.h5 and the models).
    obs = os.path.join(b, "observed.h5")
    c = fresh("out_c")
    for sets, needle in ((["propagator.pml_width=1"], "pml_width"),
                         (["time.dt=0.01"], "CFL"),
                         (["fwi.vmax=9000"], "fwi.vmax"),
                         (["storage.location=disk", 'storage.disk_dir="/nonexistent/scratch"'], "storage.disk_dir"),
                         (["shots.z=500"], "shots.z")):
        args = ["fwi", "-c", cfg, "-o", c, "--set", f'fwi.observed="{obs}"']
        for x in sets:
            args += ["--set", x]
        run_error(args, [needle])
        if os.path.exists(c):
            fail(f"{sets}: the output folder {c} was created by a failing run: {os.listdir(c)}")
    # ksweep model checks everything before it creates its folder, too.
    run_error(["model", "-c", cfg, "-o", c, "--set", "propagator.pml_width=1"], ["pml_width"])
    run_error(["model", "-c", cfg, "-o", c, "--set", "time.dt=0.01"], ["CFL"])
    if os.path.exists(c):
        fail(f"ksweep model left {c} after a failed check")
    # Files of the user's own in a folder are not results: kept, also by --overwrite.
    d = fresh("out_d")
    os.makedirs(d)
    with open(os.path.join(d, "notes.txt"), "w") as f:
        f.write("mine\n")
    ksweep(["fwi", "-c", cfg, "-o", d, "--set", "fwi.iterations=1"])
    ksweep(["fwi", "-c", cfg, "-o", d, "--set", "fwi.iterations=1", "--overwrite"])
    with open(os.path.join(d, "notes.txt")) as f:
        if f.read() != "mine\n":
            fail("--overwrite touched a file that is not a result")
    # An output folder that cannot be created is found before the modelling.
    t0 = time.time()
    text = run_error(["fwi", "-c", cfg, "-o", "/proc/ksweep-cannot-exist/out"], ["cannot create the output folder"])
    if "modelling observed data" in text:
        fail("the output folder was checked only after the modelling")
    print(f"  uncreatable folder found in {time.time() - t0:.1f} s")
    # --overwrite replaces the earlier results: nothing of them is left beside the new ones.
    ksweep(["fwi", "-c", cfg, "-o", a, "--overwrite", "--set", "fwi.iterations=1", "--set", "fwi.save_models=false"])
    left = sorted(os.listdir(a))
    if "models" in left or len(history(a)) != 1:
        fail(f"--overwrite left the earlier run's results: {left}")
    with open(os.path.join(a, "summary.json")) as f:
        if json.load(f)["config"]["fwi"]["iterations"] != 1:
            fail("--overwrite: summary.json is not the new run's")
    check_clean(a, None, "--overwrite")
    print("outputs: ok")


def case_resume_checks():
    """Resume trusts nothing: configuration, checksum, ranges, iterations."""
    text = BASE.replace("iterations = 3", "iterations = 4")
    cfg = write_config("resume_checks.toml", text)
    ref = fresh("rc_ref")
    ksweep(["fwi", "-c", cfg, "-o", ref])
    out = fresh("rc_run")
    ksweep(["fwi", "-c", cfg, "-o", out, "--set", "fwi.iterations=2"])
    before = snapshot(out)
    ck = os.path.join(out, "checkpoint.bin")
    with open(ck, "rb") as f:
        good = f.read()
    # Changes of meaning are refused, naming each key and both values.
    for sets, needles in (
            (["fwi.lr=10", "fwi.seed=3"], ["fwi.lr: 20.0 in the checkpoint, 10.0 now", "fwi.seed: 7 in the checkpoint, 3 now"]),
            (["fwi.beta1=0.5"], ["fwi.beta1: 0.9 in the checkpoint, 0.5 now"]),
            (["shots.count=5"], ["shots.count: 6 in the checkpoint, 5 now"]),
            (["receivers.count=50"], ["receivers.count: 60 in the checkpoint, 50 now"]),
            (["fwi.batch=3"], ["fwi.batch: 4 in the checkpoint, 3 now"]),
            (["time.nt=400"], ["time.nt: 500 in the checkpoint, 400 now"]),
            (["storage.dtype=fp16"], ['storage.dtype: "fp32" in the checkpoint, "fp16" now']),
            (["model.crop_x=[250, 369]"], ["model.crop_x"]),
            (["fwi.iterations=1"], ["fwi.iterations = 1 is smaller than the 2 iterations"]),
            (["fwi.iterations=3", "--overwrite"], ["--overwrite with --resume"])):
        args = ["fwi", "-c", cfg, "-o", out, "--resume", out]
        for x in sets:
            args += [x] if x.startswith("--") else ["--set", x]
        run_error(args, needles)
        check_clean(out, before, f"resume with {sets}")
    # Corrupted checkpoints: flipped bytes, truncation, garbage, a checksummed edit out of range.
    def damaged(data, needles):
        with open(ck, "wb") as f:
            f.write(data)
        run_error(["fwi", "-c", cfg, "-o", out, "--resume", out], [ck] + needles)
        check_clean(out, dict(before, **{"checkpoint.bin": hashlib.sha256(data).hexdigest()}), "corrupted checkpoint")
    for at in (30, len(good) // 2, len(good) - 90):
        b = bytearray(good)
        b[at] ^= 0x01
        damaged(bytes(b), ["SHA-256"])
    damaged(good[: len(good) // 3], ["corrupt"])
    damaged(b"\0" * 64, ["not a ksweep checkpoint"])
    n = int.from_bytes(good[8:16], "little")
    meta = json.loads(good[16:16 + n])
    arrays = good[16 + n:-71]
    def resealed(meta_obj, arr):
        js = json.dumps(meta_obj).encode()
        body = good[:8] + len(js).to_bytes(8, "little") + js + arr
        return body + b"SHA256:" + hashlib.sha256(body).hexdigest().encode()
    m2 = dict(meta, iteration=7)
    damaged(resealed(m2, arrays), ["history of 2"])
    a = np.frombuffer(arrays, dtype=np.float32).copy()
    a[5] = np.nan
    damaged(resealed(meta, a.tobytes()), ["out-of-range model value"])
    a = np.frombuffer(arrays, dtype=np.float32).copy()
    a[9] = 9000.0
    damaged(resealed(meta, a.tobytes()), ["velocities up to 9000 m/s", "out of range"])
    damaged(resealed({k: v for k, v in meta.items() if k != "rng"}, arrays), ["lacks the field 'rng'"])
    a = np.frombuffer(arrays, dtype=np.float32).copy()
    a[3] += 1.0  # a plausible velocity, but in the water the inversion never changes
    damaged(resealed(meta, a.tobytes()), ["water row", "at cell 3", "edited or made from another model"])
    # The intact checkpoint resumes with the keys that may change, and ends bit-identical.
    with open(ck, "wb") as f:
        f.write(good)
    ksweep(["fwi", "-c", cfg, "-o", out, "--resume", out, "--set", "fwi.iterations=4", "--set", "storage.location=host",
            "--set", "fwi.figures_every=0", "--set", "fwi.checkpoint_every=3"])
    models_equal(out, ref, "resume with allowed changes")
    # Every input file is part of the run: a wavelet file changed before --resume is refused,
    # naming the file and what changed (it resumed with the new wavelet before).
    t = np.arange(1500) * 0.001
    wfile = os.path.join(WORK, "resume_wavelet.txt")
    np.savetxt(wfile, np.c_[t, gabor(t)], delimiter=", ", fmt="%.9e")
    wcfg = write_config("resume_wavelet.toml", text.replace("[wavelet]", f'[wavelet]\nsource = "{wfile}"'))
    out = fresh("rc_wavelet")
    ksweep(["fwi", "-c", wcfg, "-o", out, "--set", "fwi.iterations=2"])
    before = snapshot(out)
    np.savetxt(wfile, np.c_[t, 1.01 * gabor(t)], delimiter=", ", fmt="%.9e")
    run_error(["fwi", "-c", wcfg, "-o", out, "--resume", out],
              ["the wavelet's samples (wavelet.source) differ from those the checkpoint was made with",
               "resume_wavelet.txt", "bytes, modified", "when the checkpoint was made;"])
    check_clean(out, before, "resume with a changed wavelet file")
    print("resume_checks: ok")


def case_numerics():
    """NaN data found when read; non-finite loss/gradient/model stop the run; vmax and sanity warnings."""
    cfg = write_config("numerics.toml")
    src = fresh("num_obs")
    ksweep(["model", "-c", cfg, "-o", src])
    for value, label in ((np.nan, "nan"), (np.inf, "inf")):
        bad = os.path.join(WORK, f"observed_{label}.h5")
        shutil.copy(os.path.join(src, "observed.h5"), bad)
        with h5py.File(bad, "r+") as f:
            d = f["data"][...]
            d[2, 100, 7] = value
            f["data"][...] = d
        out = fresh("num_out")
        run_error(["fwi", "-c", cfg, "-o", out, "--set", f'fwi.observed="{bad}"'],
                  [bad, "shot 2, time sample 100", "receiver 7", label])
        if os.path.exists(out):
            fail("NaN data: an output folder was left")
    # Real overflow: observed data of absurd amplitude (finite float32) with an unnormalised
    # loss overflow the adjoint wavefield at iteration 1.
    huge = os.path.join(WORK, "observed_huge.h5")
    shutil.copy(os.path.join(src, "observed.h5"), huge)
    with h5py.File(huge, "r+") as f:
        f["data"][...] = np.float32(3e38)
    out = fresh("num_huge")
    run_error(["fwi", "-c", cfg, "-o", out, "--set", f'fwi.observed="{huge}"', "--set", "fwi.loss_norm=sum"],
              ["the gradient of iteration 1 is non-finite", "extreme amplitude", "no checkpoint was written yet"])
    check_clean(out, None, "overflow")
    if os.path.exists(os.path.join(out, "summary.json")):
        fail("overflow: summary.json was written for the failed iteration")
    # Injected non-finite loss, gradient, model at iteration 3: the run stops before writing
    # anything of it, the checkpoint of iteration 2 stays and resumes bit-identically.
    ref = fresh("num_ref")
    ksweep(["fwi", "-c", cfg, "-o", ref])
    for what, needle in (("loss", "the loss of iteration 3"), ("gradient", "the gradient of iteration 3"),
                         ("model", "the model after the Adam step of iteration 3")):
        out = fresh(f"num_{what}")
        run_error(["fwi", "-c", cfg, "-o", out], [needle, "checkpoint.bin (iteration 2)", "--resume"],
                  env={"KSWEEP_FAULT_NAN": f"{what}:3"})
        check_clean(out, None, what)
        if len(history(out)) != 2 or os.path.exists(os.path.join(out, "model_final.h5")):
            fail(f"non-finite {what}: outputs of the failed iteration were written")
        if what == "gradient":
            # The same fault on resume: the folder stays byte-identical (nothing is written
            # before the failing iteration), then a clean resume ends bit-identical.
            before = snapshot(out)
            run_error(["fwi", "-c", cfg, "-o", out, "--resume", out], [needle], env={"KSWEEP_FAULT_NAN": "gradient:3"})
            check_clean(out, before, "non-finite gradient on resume")
            ksweep(["fwi", "-c", cfg, "-o", out, "--resume", out])
            models_equal(out, ref, "resume after a non-finite gradient")
    # Two ranks stop together, no MPI abort needed.
    if MPIEXEC != "none":
        out = fresh("num_ranks")
        run_error(["fwi", "-c", cfg, "-o", out], ["the gradient of iteration 2"], ranks=2,
                  env={"KSWEEP_FAULT_NAN": "gradient:2"})
    # Velocity bound against the stability limit of time.dt, at start.
    out = fresh("num_vmax")
    run_error(["fwi", "-c", cfg, "-o", out, "--set", "time.dt=0.0035"],
              ["fwi.vmax = 5000", "allows at most 4374", "lower fwi.vmax to at most", "or time.dt to at most"])
    if os.path.exists(out):
        fail("vmax check: an output folder was left")
    # fwi.vmax = 0 bounds the velocities by the stability limit of time.dt (no run is unbounded).
    ksweep(["fwi", "-c", cfg, "-o", out, "--dry-run", "--set", "fwi.vmax=0"])
    # Sanity warnings: wavelet against Nyquist; more shots than distinct source cells.
    r = ksweep(["fwi", "-c", cfg, "-o", out, "--dry-run", "--set", "wavelet.freq=70", "--set", "fwi.vmin=1500"])
    if "Nyquist frequency" not in r.stderr:
        fail(f"no Nyquist warning:\n{r.stderr}")
    r = ksweep(["fwi", "-c", cfg, "-o", out, "--dry-run", "--set", "shots.count=100", "--set", "shots.x_range=[0.4, 0.6]"])
    if "distinct source cells" not in r.stderr:
        fail(f"no warning for repeated source cells:\n{r.stderr}")
    if os.path.exists(out):
        fail("--dry-run wrote an output folder")
    print("numerics: ok")


def limit_fsize(nbytes):
    def f():
        resource.setrlimit(resource.RLIMIT_FSIZE, (nbytes, nbytes))
    return f


def case_disk_full():
    """A full disk or a file-size limit: the cause named, no temporary file, the last checkpoint valid."""
    cfg = write_config("disk.toml")
    scratch = fresh("disk_scratch")
    os.makedirs(scratch)
    # File-size limit (RLIMIT_FSIZE) on an output file: EFBIG named, no SIGXFSZ death.
    out = fresh("disk_fsize")
    text = run_error(["fwi", "-c", cfg, "-o", out, "--set", "time.nt=4000", "--set", "receivers.count=120"],
                     ["observed.h5", "File too large", "EFBIG", "no space left"], preexec_fn=limit_fsize(10 << 20))
    check_clean(out, None, "file-size limit on observed.h5")
    # ... and on the disk store's scratch file, whose folder is removed.
    out = fresh("disk_fsize_store")
    run_error(["fwi", "-c", cfg, "-o", out, "--set", "time.nt=2000", "--set", "storage.location=disk",
               "--set", f'storage.disk_dir="{scratch}"'], ["File too large", "EFBIG"], preexec_fn=limit_fsize(10 << 20))
    check_clean(out, None, "file-size limit on the disk store")
    if os.listdir(scratch):
        fail(f"the disk store left {os.listdir(scratch)} in {scratch}")
    # Injected ENOSPC part way through: the checkpoint before it stays valid and resumes.
    text5 = BASE.replace("iterations = 3", "iterations = 5")
    cfg5 = write_config("disk5.toml", text5)
    ref = fresh("disk_ref")
    ksweep(["fwi", "-c", cfg5, "-o", ref])
    out = fresh("disk_inject")
    run_error(["fwi", "-c", cfg5, "-o", out], ["No space left on device", "ENOSPC"], env={"KSWEEP_FAULT_WRITES": "9"})
    check_clean(out, None, "injected ENOSPC")
    ksweep(["fwi", "-c", cfg5, "-o", out, "--resume", out])
    models_equal(out, ref, "resume after ENOSPC")
    # On two ranks with disk storage, rank 0's full disk stops both ranks together: no
    # MPI_Abort, every rank's scratch folder removed.
    if MPIEXEC != "none":
        out = fresh("disk_inject_ranks")
        text = run_error(["fwi", "-c", cfg5, "-o", out, "--set", "storage.location=disk",
                          "--set", f'storage.disk_dir="{scratch}"'], ["No space left on device", "--resume"],
                         ranks=2, env={"KSWEEP_FAULT_WRITES": "9"})
        if "MPI_ABORT" in text:
            fail(f"2 ranks: a full disk ended in MPI_Abort:\n{text}")
        if os.listdir(scratch):
            fail(f"2 ranks: scratch left: {os.listdir(scratch)}")
        check_clean(out, None, "2 ranks, injected ENOSPC")
    print("disk_full: ok")


SKIPPED = 77  # ctest's SKIP_RETURN_CODE for the cases that need what a machine may not permit


def case_disk_full_tmpfs():
    """A real full disk, a small tmpfs: reported to ctest as skipped where mounting is not permitted."""
    cfg = write_config("disk.toml")
    mnt = fresh("disk_tmpfs")
    os.makedirs(mnt)
    m = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1100k", "tmpfs", mnt], capture_output=True, text=True)
    if m.returncode != 0:
        print(f"SKIPPED: mounting a tmpfs is not permitted here ({m.stderr.strip()[:80]})")
        sys.exit(SKIPPED)
    try:
        out = os.path.join(mnt, "run")
        text10 = BASE.replace("iterations = 3", "iterations = 12").replace("save_models = false", "save_models = true")
        cfg10 = write_config("disk10.toml", text10)
        run_error(["fwi", "-c", cfg10, "-o", out], ["No space left on device", "ENOSPC"])
        check_clean(out, None, "tmpfs full")
        done = len(history(out))
        print(f"  tmpfs filled after {done} iterations")
        # The last good checkpoint, copied to a roomy disk, resumes to the reference result.
        copy = fresh("disk_tmpfs_copy")
        shutil.copytree(out, copy)
        ref10 = fresh("disk_ref10")
        ksweep(["fwi", "-c", cfg10, "-o", ref10])
        ksweep(["fwi", "-c", cfg10, "-o", copy, "--resume", copy])
        models_equal(copy, ref10, "resume after a full tmpfs")
        # The saved steps of a disk store that cannot fit are refused before anything runs.
        out2 = os.path.join(mnt, "run2")
        run_error(["fwi", "-c", cfg, "-o", out2, "--set", "storage.location=disk", "--set", f'storage.disk_dir="{mnt}"'],
                  ["do not fit on the disk"])
    finally:
        subprocess.run(["umount", mnt])
    print("disk_full_tmpfs: ok")


def children_of(pid):
    kids = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
                if int(fields[1]) == pid:
                    kids.append(int(d))
            except OSError:
                pass
    return kids


def wait_for(p, out, reported, timeout=120):
    """Waits until `reported` iterations appear in out/summary.json (or `reported` = 0: start)."""
    deadline = time.time() + timeout
    while time.time() < deadline and p.poll() is None:
        try:
            if len(history(out)) >= reported:
                return True
        except (OSError, ValueError, KeyError):
            pass
        time.sleep(0.02)
    return False


def case_signals():
    """SIGINT / SIGTERM: clean stop at a safe point, scratch removed, resume command, 130 / 143."""
    text = BASE.replace("iterations = 3", "iterations = 8").replace("nt = 500", "nt = 1200")
    cfg = write_config("signals.toml", text)
    scratch = fresh("sig_scratch")
    os.makedirs(scratch)
    disk = ["--set", "storage.location=disk", "--set", f'storage.disk_dir="{scratch}"']
    ref = fresh("sig_ref")
    ksweep(["fwi", "-c", cfg, "-o", ref] + disk)
    for sig, code, when in ((signal.SIGINT, 130, "start"), (signal.SIGTERM, 143, "start"),
                            (signal.SIGINT, 130, 1), (signal.SIGTERM, 143, 3)):
        out = fresh(f"sig_{code}_{when}")
        p = subprocess.Popen([KSWEEP, "fwi", "-c", cfg, "-o", out] + disk, env=ENV, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
        if when == "start":
            line = p.stdout.readline()  # "modelling observed data": the handlers are installed
            if "modelling" not in line:
                fail(f"unexpected first line {line!r}")
        elif not wait_for(p, out, when):
            fail(f"the run ended before {when} iterations")
        else:
            time.sleep(0.1)
        p.send_signal(sig)
        so, se = p.communicate(timeout=120)
        text = so + se
        if p.returncode != code:
            fail(f"{sig.name} at {when}: exit {p.returncode}, expected {code}\n{text}")
        if f"stopped by {sig.name}" not in text:
            fail(f"{sig.name} at {when}: no stop message\n{text}")
        if os.listdir(scratch):
            fail(f"{sig.name} at {when}: scratch left: {os.listdir(scratch)}")
        check_clean(out, None, f"{sig.name} at {when}")
        print(f"  {sig.name} at {when}: exit {code}: {[l for l in text.splitlines() if 'stopped by' in l][0][:150]}")
        if "--resume" in text and when != "start":
            if when == 3:
                # A signal while the resumed run models its data: the folder stays byte-identical.
                before = snapshot(out)
                q = subprocess.Popen([KSWEEP, "fwi", "-c", cfg, "-o", out, "--resume", out] + disk, env=ENV,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                q.stdout.readline()
                q.send_signal(signal.SIGINT)
                qo, qe = q.communicate(timeout=120)
                if q.returncode != 130 or "--resume" not in qe:
                    fail(f"SIGINT during a resume: exit {q.returncode}\n{qo}{qe}")
                check_clean(out, before, "SIGINT during a resume")
            ksweep(["fwi", "-c", cfg, "-o", out, "--resume", out] + disk)
            models_equal(out, ref, f"resume after {sig.name}")
        elif when == "start" and "while modelling" in text and os.path.exists(out) and os.listdir(out):
            fail(f"stopped while modelling, yet {out} holds {os.listdir(out)}")
    # ksweep model stops too, writing nothing.
    out = fresh("sig_model")
    p = subprocess.Popen([KSWEEP, "model", "-c", cfg, "-o", out, "--set", "time.nt=20000", "--set", "propagator.batch=1"],
                         env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    p.stdout.readline()
    p.send_signal(signal.SIGTERM)
    so, se = p.communicate(timeout=120)
    if p.returncode != 143 or "stopped by SIGTERM while modelling" not in se or os.path.exists(out):
        fail(f"model: exit {p.returncode}, folder {os.path.exists(out)}\n{so}{se}")
    print("  ksweep model: SIGTERM -> 143, nothing written")
    # Several ranks: every rank gets SIGTERM (as a batch system sends it) and stops cleanly.
    if MPIEXEC != "none":
        out = fresh("sig_ranks")
        p = subprocess.Popen([MPIEXEC, "-n", "2", "--oversubscribe", KSWEEP, "fwi", "-c", cfg, "-o", out] + disk, env=ENV,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        if not wait_for(p, out, 2):
            fail("the 2-rank run ended before 2 iterations")
        ranks = children_of(p.pid)
        if len(ranks) != 2:
            fail(f"expected 2 rank processes under mpirun, found {ranks}")
        for r in ranks:
            os.kill(r, signal.SIGTERM)
        so, se = p.communicate(timeout=120)
        text = so + se
        if p.returncode == 0 or "stopped by SIGTERM" not in text or "mpirun -n 2" not in text:
            fail(f"2 ranks: exit {p.returncode}\n{text}")
        if "Exit code:    143" not in text:
            fail(f"2 ranks: the ranks did not exit with 143\n{text}")
        if os.listdir(scratch):
            fail(f"2 ranks: scratch left: {os.listdir(scratch)}")
        check_clean(out, None, "2 ranks SIGTERM")
        print("  2 ranks: both stopped with 143, scratch empty")
        # Only one rank signalled: the ranks agree at the iteration boundary and both stop.
        out = fresh("sig_ranks_one")
        p = subprocess.Popen([MPIEXEC, "-n", "2", "--oversubscribe", KSWEEP, "fwi", "-c", cfg, "-o", out] + disk, env=ENV,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        if not wait_for(p, out, 1):
            fail("the 2-rank run ended before 1 iteration")
        ranks = sorted(children_of(p.pid))
        os.kill(ranks[-1], signal.SIGINT)
        so, se = p.communicate(timeout=120)
        text = so + se
        if "stopped by SIGINT" not in text or "Exit code:    130" not in text or os.listdir(scratch):
            fail(f"2 ranks, one signalled: exit {p.returncode}, scratch {os.listdir(scratch)}\n{text}")
        check_clean(out, None, "2 ranks, one signalled")
        print("  2 ranks, one signalled: both stopped with 130, scratch empty")
    print("signals: ok")


def case_memory():
    """Memory estimated before allocating; too-large problems refused with the table; --dry-run."""
    cfg = write_config("memory.toml")
    out = fresh("mem_out")
    for cmd in ("fwi", "model"):
        r = ksweep([cmd, "-c", cfg, "-o", out, "--dry-run"])
        for needle in ("memory estimate", "wavefields", "available: host memory", "nothing was written"):
            if needle not in r.stdout:
                fail(f"{cmd} --dry-run does not print {needle!r}:\n{r.stdout}")
        if cmd == "fwi" and "saved steps (boundary, fp32, device)" not in r.stdout:
            fail(f"fwi --dry-run has no saved-steps line:\n{r.stdout}")
        if os.path.exists(out):
            fail(f"{cmd} --dry-run wrote {out}")
    # The estimate agrees with what the run allocates (its memory report) for each storage kind.
    scratch = fresh("mem_scratch")
    os.makedirs(scratch)
    for strategy, dtype, location in (("boundary", "fp32", "device"), ("full", "fp16", "host"),
                                      ("boundary", "int8", "disk")):
        sets = ["--set", f"storage.strategy={strategy}", "--set", f"storage.dtype={dtype}",
                "--set", f"storage.location={location}", "--set", f'storage.disk_dir="{scratch}"',
                "--set", "fwi.iterations=1", "--set", "storage.transfer_interval=50"]
        r = ksweep(["fwi", "-c", cfg, "-o", out, "--dry-run"] + sets)
        est = {}
        for line in r.stdout.splitlines():
            parts = line.split()
            if len(parts) >= 3 and parts[-1] == "MiB":
                est[line[:68].strip()] = float(parts[-2])
        run = fresh("mem_run")
        ksweep(["fwi", "-c", cfg, "-o", run] + sets)
        with open(os.path.join(run, "summary.json")) as f:
            rep = json.load(f)["memory"]
        mib = 1 << 20
        # The estimate may round up (codec blocks), never down, and stays within 10 %.
        saved = est[f"saved steps ({strategy}, {dtype}, {location})"]
        if not rep["boundary_bytes"] / mib - 0.06 <= saved <= 1.1 * rep["boundary_bytes"] / mib + 0.06:
            fail(f"{strategy}/{dtype}/{location}: estimated {saved} MiB of saved steps, the run reports "
                 f"{rep['boundary_bytes'] / mib:.2f}")
        fields = est["wavefields, forward + adjoint (2 levels each)"] + est["absorbing-layer fields, forward + adjoint"]
        real = (rep["wavefield_bytes"] + rep["seed_bytes"]) / mib
        if abs(fields - real) > 0.11:
            fail(f"{strategy}: estimated {fields} MiB of wavefields and layer fields, the run reports {real:.2f}")
        print(f"  {strategy}/{dtype}/{location}: saved steps {saved} MiB (run: {rep['boundary_bytes'] / mib:.2f}), "
              f"fields {fields:.1f} MiB (run: {real:.2f})")
    # A genuinely too-large problem (about 500 GB, most of it saved steps: more than the memory of
    # any machine that runs these tests, a 141 GB GPU included; there the message names the
    # device's memory).
    t0 = time.time()
    text = run_error(["fwi", "-c", cfg, "-o", out, "--set", "time.nt=4000000", "--set", "storage.strategy=full"],
                     ["does not fit in", "memory estimate", "saved steps (full, fp32, device)", "total"])
    if "modelling observed data" in text or os.path.exists(out):
        fail("the too-large problem was found only after starting")
    print(f"  refused in {time.time() - t0:.1f} s")
    run_error(["model", "-c", cfg, "-o", out, "--set", "time.nt=200000000", "--set", "receivers.count=120"],
              ["does not fit in"])  # memory, or device memory on a GPU
    run_error(["fwi", "-c", cfg, "-o", out], ["does not fit in"],
              env={"KSWEEP_MEMORY_AVAILABLE": "5000000", "KSWEEP_DEVICE_MEMORY_AVAILABLE": "5000000"})
    if on_device():  # CUDA reserves far more address space than the limits below leave
        print(f"memory: ok (address-space limits not tried: {default_backend()} reserves address space)")
        return
    # An address-space limit counts as what the machine has.
    run_error(["fwi", "-c", cfg, "-o", out, "--set", "time.nt=20000", "--set", "storage.strategy=full"],
              ["does not fit in memory"], preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30)))
    # An allocation that fails anyway (the estimate bypassed) is reported, never raw.
    out2 = fresh("mem_alloc")
    run_error(["fwi", "-c", cfg, "-o", out2, "--set", "time.nt=20000", "--set", "storage.strategy=full"],
              ["out of memory allocating", "--dry-run"], env={"KSWEEP_MEMORY_AVAILABLE": str(1 << 40)},
              preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30)))
    check_clean(out2, None, "allocation failure")
    print("memory: ok")


def estimate_mib(text, phase="inversion"):
    """The totals (device, host) of a phase of the --dry-run memory table, in MiB."""
    totals = {}
    lines = text.splitlines()
    start = next(i for i, l in enumerate(lines) if l.startswith("memory estimate, " + phase))
    for l in lines[start + 1:]:
        if not l.startswith("  "):
            break
        parts = l.split()
        if parts[0] == "total":
            totals[parts[1]] = float(parts[2])
    return totals


def case_memory_estimate():
    # The --dry-run estimate against the memory the run really takes (the peak resident set on a
    # host backend, reported in summary.json), 2D and 3D, with a store large enough to dominate
    # the process's fixed size (libraries, Kokkos, MPI: about 100 MiB here). On a GPU the resident
    # set holds the host part only; the device allocations are checked against the estimate's
    # sizes by the unit tests (gradient_allocations_match_sizes_*).
    if on_device():
        print(f"memory_estimate: skipped on the {default_backend()} backend (device memory is not in the resident set)")
        return
    here = os.path.dirname(os.path.abspath(__file__))
    cases = [("2D", ["-c", os.path.join(here, "..", "..", "share", "examples", "marmousi_25m.toml"),
                     "--set", "time.nt=400", "--set", "shots.count=4", "--set", "fwi.batch=4",
                     "--set", "storage.strategy=full", "--set", "storage.dtype=fp32"]),
             ("3D", ["-c", write_config("mem3d.toml", THREE_D), "--set", "time.nt=800", "--set", "model.nx=60",
                     "--set", "storage.strategy=full", "--set", "storage.dtype=fp32"])]
    for name, args in cases:
        args = ["fwi"] + args + ["--set", "fwi.iterations=1", "--set", "fwi.figures_every=0",
                                 "--set", "fwi.checkpoint_every=0", "--set", "fwi.save_models=false"]
        dry = ksweep(args + ["-o", fresh(f"mem_dry_{name}"), "--dry-run"], threads=2)
        t = estimate_mib(dry.stdout)
        est = t.get("device", 0.0) + t.get("host", 0.0)
        out = fresh(f"mem_run_{name}")
        ksweep(args + ["-o", out], threads=2)
        with open(os.path.join(out, "summary.json")) as f:
            peak = json.load(f)["memory"]["peak_device_bytes"] / 2**20
        print(f"{name}: estimate {est:.1f} MiB (device {t.get('device', 0):.1f} + host {t.get('host', 0):.1f}), "
              f"measured peak resident set {peak:.1f} MiB, ratio {peak / est:.3f}")
        if est < 400:
            fail(f"{name}: the case is too small to compare ({est:.1f} MiB estimated)")
        if not (0.95 * est <= peak <= est + 100):
            fail(f"{name}: measured peak {peak:.1f} MiB is outside [0.95 x estimate, estimate + 100 MiB] "
                 f"for the estimate {est:.1f} MiB")
    print("memory_estimate: ok")


def gabor(t, freq=6.0, delay=0.3, width=0.12):
    """A 90-degree-rotated Gabor pulse: not a Ricker wavelet."""
    tau = t - delay
    return np.sin(2 * np.pi * freq * tau) * np.exp(-(tau / width) ** 2)


def case_wavelet():
    """Data made with a wavelet from a text file (at another interval than the modelling's) give
    the wavelet back when ksweep fwi estimates it from them; frequency stages low-pass the data
    and the wavelet, and a run stopped at a stage's first iteration or inside a stage resumes to
    the bits of the uninterrupted run; a stage above the wavelet's band changes nothing."""
    # The wavelet at 1 ms (the modelling runs at 3 ms: the program resamples it).
    t = np.arange(1500) * 0.001
    wfile = os.path.join(WORK, "gabor.txt")
    with open(wfile, "w") as f:
        f.write("# time (s), amplitude\n")
        for ti, wi in zip(t, gabor(t)):
            f.write(f"{ti:.6f}, {wi:.9e}\n")
    made = fresh("wavelet_data")  # the data at 1.5 ms (the inversion runs at 3 ms)
    ksweep(["model", "-c", write_config("wavelet_model.toml", BASE.replace(
        "[wavelet]", f'[wavelet]\nsource = "{wfile}"').replace("dt = 0.003\nnt = 500", "dt = 0.0015\nnt = 999")),
        "-o", made])
    with h5py.File(os.path.join(made, "observed.h5"), "r") as f:
        if not np.isnan(f.attrs["freq"]):
            fail(f"observed.h5 of a wavelet file records a Ricker frequency {f.attrs['freq']}")
    text = BASE.replace("[wavelet]", '[wavelet]\nsource = "estimate"').replace(
        "iterations = 3", "stages = [{max_freq = 4, iterations = 2}, {max_freq = 8, iterations = 2}]")
    text += f'observed = "{os.path.join(made, "observed.h5")}"\n'
    cfg = write_config("wavelet_fwi.toml", text)
    ref = fresh("wavelet_ref")
    r = ksweep(["fwi", "-c", cfg, "-o", ref])
    for needle in ("wavelet estimated", "stage 1/2: data and wavelet low-passed below 4 Hz, iterations 1-2",
                   "stage 2/2: data and wavelet low-passed below 8 Hz, iterations 3-4"):
        if needle not in r.stdout:
            fail(f"'{needle}' not in the output:\n{r.stdout}")
    with h5py.File(os.path.join(ref, "wavelet.h5"), "r") as f:
        dt = f.attrs["dt"]
        est, reference, st1 = f["wavelet"][...], f["reference"][...], f["stage_1"][...]
    # Samples are amplitudes per time step: the file's 1 ms source is (3 ms / 1 ms)^2 = 9 times as
    # large per step at the inversion's 3 ms (and the data at 1.5 ms were made with 2.25 times it).
    truth = 9.0 * gabor(np.arange(est.size) * dt)
    err = np.linalg.norm(est - truth) / np.linalg.norm(truth)
    err_ref = np.linalg.norm(reference - truth) / np.linalg.norm(truth)
    print(f"wavelet: estimate's relative error {err:.3f} (the Ricker reference's {err_ref:.3f})")
    if not err < 0.1:
        fail(f"the estimated wavelet is {err:.3f} (relative L2) from the one the data were made with")
    # The first stage's wavelet is the estimate through the stated zero-phase gain,
    # 1 / (1 + (f / 4 Hz)^12), on a zero-padded axis.
    n = 2 * est.size
    gain = 1 / (1 + (np.fft.rfftfreq(n, dt) / 4.0) ** 12)
    want = np.fft.irfft(np.fft.rfft(est, n) * gain, n)[:est.size]
    if not np.abs(st1 - want).max() < 1e-6 * np.abs(want).max():
        fail(f"stage 1's wavelet differs from the low-passed estimate by {np.abs(st1 - want).max():.3e}")
    with open(os.path.join(ref, "summary.json")) as f:
        s = json.load(f)
    if [h["stage"] for h in s["iterations"]] != [1, 1, 2, 2]:
        fail(f"stages of the iterations: {[h.get('stage') for h in s['iterations']]}")
    if not s["wavelet"]["estimate"]["residual"] < s["wavelet"]["estimate"]["residual_reference"]:
        fail(f"the estimate explains less of the data than the Ricker reference: {s['wavelet']['estimate']}")
    # The final model's data at the observed data's own interval and length.
    with h5py.File(os.path.join(made, "observed.h5"), "r") as f:
        obs = f["data"][...]
    with h5py.File(os.path.join(ref, "synthetic.h5"), "r") as f:
        syn, syn_dt = f["data"][...], f.attrs["dt"]
    if syn.shape != obs.shape or abs(syn_dt - 0.0015) > 1e-12:
        fail(f"synthetic.h5 has shape {syn.shape} at dt {syn_dt}, the observed data {obs.shape} at 0.0015 s")
    misfit = np.linalg.norm(syn - obs) / np.linalg.norm(obs)
    print(f"wavelet: synthetic data of the final model at 1.5 ms, relative misfit {misfit:.3f}")
    if not misfit < 0.5:
        fail(f"the final model's synthetic data are {misfit:.3f} (relative L2) from the observed data")
    # Stopped after iteration 2 (the end of stage 1) and after 3 (inside stage 2), then resumed.
    for stop in (2, 3):
        out = fresh(f"wavelet_stop{stop}")
        ksweep(["fwi", "-c", cfg, "-o", out, "--set", f"fwi.iterations={stop}"])
        ksweep(["fwi", "-c", cfg, "-o", out, "--resume", out])
        if model_bytes(out) != model_bytes(ref):
            fail(f"stopped after iteration {stop} and resumed: the model differs from the uninterrupted run's")
        if [h["loss"] for h in history(out)] != [h["loss"] for h in history(ref)]:
            fail(f"stopped after {stop}: losses {[h['loss'] for h in history(out)]} vs "
                 f"{[h['loss'] for h in history(ref)]}")
    print("wavelet: estimated, staged, resumed across and inside a stage with the same bits")
    # A stage whose pass band holds the wavelet's whole band is the whole band, to the bit (the
    # records' cut end, low-passed, changed the inversion before).
    whole = fresh("stage_whole")
    ksweep(["fwi", "-c", write_config("stage_whole.toml", BASE), "-o", whole])
    wide = fresh("stage_wide")
    r = ksweep(["fwi", "-c", write_config("stage_wide.toml", BASE.replace(
        "iterations = 3", "stages = [{max_freq = 100, iterations = 3}]")), "-o", wide])
    if "stage 1/1: data and wavelet as they are (the wavelet's whole band is below 100 Hz), iterations 1-3" not in r.stdout:
        fail(f"a 100 Hz stage of a 5 Hz wavelet is not called the whole band:\n{r.stdout}")
    if model_bytes(wide) != model_bytes(whole) or \
            [h["loss"] for h in history(wide)] != [h["loss"] for h in history(whole)]:
        fail(f"a 100 Hz stage changes the inversion: losses {[h['loss'] for h in history(wide)]} vs "
             f"{[h['loss'] for h in history(whole)]}")
    print("wavelet: a stage above the wavelet's band is the whole band, the same bits")


def case_domains():
    """The model split into domains over real ranks (parallel.domains): the same bits as one rank
    for 2, 3 and 4 domains and for 2 domains x 2 shot groups; a resume that changes the split;
    bad splits refused before anything is allocated, with one message."""
    if MPIEXEC == "none":
        print("domains: a build without MPI (one rank): nothing to split")
        return
    here = os.path.dirname(os.path.abspath(__file__))
    cfg = os.path.join(here, "..", "..", "share", "examples", "marmousi_25m.toml")
    base = ["fwi", "-c", cfg]
    # The shipped storage (fp16: a scale per block of saved values), and int8 below.
    for x in ["time.nt=500", "shots.count=6", "fwi.batch=4", "model.crop_x=[200,400]", "fwi.figures_every=0",
              "fwi.save_models=false", "fwi.checkpoint_every=1"]:
        base += ["--set", x]

    def run(name, sets, ranks=1, extra=()):
        out = fresh(name)
        args = list(base)
        for x in sets:
            args += ["--set", x]
        r = ksweep(args + ["-o", out] + list(extra), ranks=ranks)
        return out, r

    def same(a, b, what):
        x, y = np.frombuffer(model_bytes(a), np.float32), np.frombuffer(model_bytes(b), np.float32)
        if x.tobytes() != y.tobytes():
            fail(f"{what}: model_final.h5 differs in {int(np.count_nonzero(x != y))} cells "
                 f"(max |dv| {np.abs(x.astype(np.float64) - y).max():.3e} m/s)")
        ha, hb = history(a), history(b)
        for p, q in zip(ha, hb):
            if (p["loss"], p["rmse"], p["shots"]) != (q["loss"], q["rmse"], q["shots"]):
                fail(f"{what}: iteration {p['iteration']}: loss {p['loss']!r} rmse {p['rmse']!r} shots {p['shots']} "
                     f"vs {q['loss']!r} {q['rmse']!r} {q['shots']}")
        if len(ha) != len(hb):
            fail(f"{what}: {len(ha)} iterations vs {len(hb)}")
        # The final model's data, modelled split too.
        if data_bytes(a, "synthetic.h5") != data_bytes(b, "synthetic.h5"):
            fail(f"{what}: synthetic.h5 differs")
        print(f"{what}: the same bits")

    def data_bytes(out, name):
        with h5py.File(os.path.join(out, name), "r") as f:
            return f["data"][...].tobytes()

    # The two one-rank references side by side (one thread each, the machine's two cores).
    from concurrent.futures import ThreadPoolExecutor
    with ThreadPoolExecutor(max_workers=2) as pool:
        ref_job = pool.submit(run, "dom_ref", ["fwi.iterations=3"])
        ref8_job = pool.submit(run, "dom_ref_int8", ["fwi.iterations=3", "storage.dtype=int8"])
        chain_job = pool.submit(run, "dom_ref_chain", ["fwi.iterations=3", "storage.layer_chain=true"])
        (ref, _), (ref8, _), (refc, _) = ref_job.result(), ref8_job.result(), chain_job.result()
    # The gradient with the layer's chain rule (storage.layer_chain): another model than the
    # layer held fixed, and the same bits on a split model.
    if model_bytes(refc) == model_bytes(ref):
        fail("storage.layer_chain = true: the same model as the layer held fixed")
    out, _ = run("dom_chain", ["fwi.iterations=3", "storage.layer_chain=true", "parallel.domains=[3]"], ranks=3)
    same(refc, out, "storage.layer_chain = true, 3 ranks, parallel.domains = [3] vs 1 rank")
    for ranks, parts in ((2, 2), (3, 3), (4, 2), (4, 4)):
        out, r = run(f"dom_{ranks}_{parts}", ["fwi.iterations=3", f"parallel.domains=[{parts}]"], ranks=ranks)
        same(ref, out, f"{ranks} ranks, parallel.domains = [{parts}] ({ranks // parts} shot group(s)) vs 1 rank")
    out, _ = run("dom_int8", ["fwi.iterations=3", "storage.dtype=int8", "parallel.domains=[3]"], ranks=3)
    same(ref8, out, "int8 storage, 3 ranks, parallel.domains = [3] vs 1 rank")
    # A resume that changes the split: 2 iterations on 2 domains, the third on 3.
    half, _ = run("dom_resume", ["fwi.iterations=2", "parallel.domains=[2]"], ranks=2)
    ksweep(base + ["--set", "fwi.iterations=3", "--set", "parallel.domains=[3]", "-o", half, "--resume", half],
           ranks=3)
    same(ref, half, "2 iterations on 2 domains, resumed on 3 domains for the third, vs 1 rank")
    # ksweep model on a split model: each shot group models its shots on its subdomains; the
    # same observed.h5 as one rank (2 domains x 2 shot groups, and 3 domains with 6 shots on one
    # group).
    model_sets = []
    for x in ["time.nt=500", "shots.count=6", "model.crop_x=[200,400]", "propagator.batch=2"]:
        model_sets += ["--set", x]
    whole = fresh("dom_model_1")
    ksweep(["model", "-c", cfg, "-o", whole] + model_sets)
    for ranks, parts in ((4, 2), (3, 3), (2, 1)):
        out = fresh(f"dom_model_{ranks}_{parts}")
        r = ksweep(["model", "-c", cfg, "-o", out, "--set", f"parallel.domains=[{parts}]"] + model_sets, ranks=ranks)
        if data_bytes(out, "observed.h5") != data_bytes(whole, "observed.h5"):
            fail(f"ksweep model on {ranks} ranks, parallel.domains = [{parts}]: observed.h5 differs from 1 rank's")
        if f"{ranks} ranks: {ranks // parts} shot group(s) of {parts} rank(s) (parallel.domains {parts})" not in r.stdout:
            fail(f"ksweep model on {ranks} ranks: the split is not shown:\n{r.stdout}")
    print("ksweep model, split over 4 ranks (2 x 2) and 3 ranks (3 x 1), and the shots over 2 ranks: the same "
          "observed.h5 as 1 rank")
    # --dry-run shows the split in the memory table.
    out = fresh("dom_dry")
    r = ksweep(base + ["--set", "parallel.domains=[2]", "-o", out, "--dry-run"], ranks=2)
    if "parallel.domains 2: subdomains up to" not in r.stdout:
        fail(f"--dry-run does not show the split:\n{r.stdout}")
    # A 3D run that does not fit one rank under an address-space limit of 1000 MiB (about 807 MiB
    # of inversion besides the program's own) is refused with the smallest split that fits, and
    # passes every check on 4 ranks split 2 x 2 under the same limit (about 274 MiB per rank).
    if not on_device():  # CUDA reserves far more address space than the limit leaves
        limit = lambda: resource.setrlimit(resource.RLIMIT_AS, (1000 << 20, 1000 << 20))  # noqa: E731
        three = os.path.join(here, "..", "..", "share", "examples", "layered3d.toml")
        sets3 = []
        for x in ["storage.dtype=fp32", "fwi.batch=12", "fwi.iterations=1", "time.nt=300"]:
            sets3 += ["--set", x]
        out = fresh("dom_3d")
        r = ksweep(["fwi", "-c", three, "-o", out, "--dry-run"] + sets3, check=False, preexec_fn=limit)
        if r.returncode == 0 or "does not fit in memory" not in r.stderr or \
                "smallest split of the model whose inversion fits: parallel.domains = [1, 2]" not in r.stderr:
            fail(f"3D on one rank under 1000 MiB: exit {r.returncode}, expected the smallest split:\n{r.stderr}")
        r = ksweep(["fwi", "-c", three, "-o", out, "--dry-run", "--set", "parallel.domains=[2,2]"] + sets3, ranks=4,
                   preexec_fn=limit)
        if "parallel.domains 2 x 2" not in r.stdout:
            fail(f"3D on 4 ranks, 2 x 2, under 1000 MiB: no split in the table:\n{r.stdout}")
        print("3D under an address-space limit: refused on 1 rank (naming [1, 2]), passes on 4 ranks split 2 x 2")
    # Bad splits: refused before anything is allocated or written, one message on rank 0.
    for ranks, parts, needle in ((3, 2, "do not divide into shot groups of 2"),
                                 (2, 4, "more than the 2 MPI ranks"),
                                 (2, 60, "each needs at least 5 cells")):
        out = fresh("dom_bad")
        r = ksweep(base + ["--set", f"parallel.domains=[{parts}]", "-o", out], ranks=ranks, check=False)
        if r.returncode == 0 or needle not in r.stderr:
            fail(f"parallel.domains = [{parts}] on {ranks} ranks: exit {r.returncode}, expected {needle!r}:\n"
                 f"{r.stderr}")
        if r.stderr.count("parallel.domains") != 1:
            fail(f"parallel.domains = [{parts}] on {ranks} ranks: not one message:\n{r.stderr}")
        if os.path.exists(out):
            fail(f"a refused split wrote {out}")
    print("domains: ok")


def case_rtm():
    """ksweep rtm: RTM and 3 LSRTM iterations on the smoothed model; image.h5, summary.json and
    figures; the water muted; the data from a file give the bits of the data modelled in the run,
    and so do 2 and 3 ranks and a model split over 2; bad input refused before any write."""
    cfg = write_config("rtm.toml", BASE + "\n[imaging]\nlsrtm_iterations = 3\n")
    out = fresh("rtm_out")
    r = ksweep(["rtm", "-c", cfg, "-o", out], threads=2)
    with h5py.File(os.path.join(out, "image.h5"), "r") as f:
        names = sorted(f.keys())
        if names != ["background", "illumination", "lsrtm", "perturbation", "rtm", "rtm_correlation"]:
            fail(f"image.h5 holds {names}")
        img = {k: f[k][...] for k in names}
    for k, a in img.items():
        if a.shape != (60, 120) or a.dtype != np.float32 or not np.all(np.isfinite(a)):
            fail(f"image.h5 {k}: {a.shape} {a.dtype}, finite {np.all(np.isfinite(a))}")
    with open(os.path.join(out, "summary.json")) as f:
        s = json.load(f)
    water, misfit, corr = s["water_rows"], s["lsrtm_misfit"], s["correlation"]
    if not 0 < water < 60 or np.any(img["rtm"][:water] != 0) or np.any(img["lsrtm"][:water] != 0):
        fail(f"the {water} water rows are not muted in the images")
    if np.count_nonzero(img["rtm"][water:]) < 0.9 * img["rtm"][water:].size:
        fail("the RTM image is zero below the water")
    if len(misfit) != 3 or not all(b < a for a, b in zip(misfit, misfit[1:])):
        fail(f"LSRTM misfit {misfit} does not fall at every iteration")
    if not corr["lsrtm"] > corr["rtm"]:
        fail(f"LSRTM's correlation with the true perturbation {corr['lsrtm']:.3f} is not above RTM's {corr['rtm']:.3f}")
    for png in ("images.png", "lsrtm_misfit.png"):
        if not os.path.getsize(os.path.join(out, "figures", png)) > 10000:
            fail(f"figures/{png} missing or empty")
    print(f"rtm: water rows {water}; LSRTM misfit {misfit[0]:.3f} -> {misfit[-1]:.3f}; correlation RTM "
          f"{corr['rtm']:.3f}, LSRTM {corr['lsrtm']:.3f}")
    # The same data from a file (ksweep model): the same images, bit for bit.
    obs = fresh("rtm_observed")
    ksweep(["model", "-c", cfg, "-o", obs])
    out2 = fresh("rtm_from_file")
    ksweep(["rtm", "-c", cfg, "-o", out2, "--set", f"fwi.observed=\"{os.path.join(obs, 'observed.h5')}\""], threads=2)
    with h5py.File(os.path.join(out2, "image.h5"), "r") as f:
        if "perturbation" in f:
            fail("image.h5 of data from a file holds a true perturbation")
        for k in ("rtm", "lsrtm"):
            if not np.array_equal(f[k][...], img[k]):
                fail(f"image.h5 {k} from observed.h5 differs from the image of the data modelled in the run")
    print("rtm: data from observed.h5 give the same images, bit for bit")
    # The plain cross-correlation condition through the program: the same backward pass (the
    # illumination's bits), another correlation.
    out3 = fresh("rtm_cross")
    ksweep(["rtm", "-c", cfg, "-o", out3, "--set", "imaging.condition=\"cross-correlation\"", "--set",
            "imaging.lsrtm_iterations=0"], threads=2)
    with h5py.File(os.path.join(out3, "image.h5"), "r") as f:
        if not np.array_equal(f["illumination"][...], img["illumination"]):
            fail("imaging.condition = \"cross-correlation\" changed the illumination")
        cc = f["rtm_correlation"][...]
        if not np.any(cc) or np.array_equal(cc, img["rtm_correlation"]):
            fail("imaging.condition = \"cross-correlation\" gave the Born correlation, or zeros")
    print("rtm: imaging.condition = \"cross-correlation\": the same illumination, another correlation")
    # Bad input: refused before any write, naming the key and the limit.
    for sets, needle in ((["--set", "imaging.stabilization=0"], "imaging.stabilization = 0 must be > 0"),
                         (["--set", "imaging.lsrtm_iterations=-1"], "imaging.lsrtm_iterations = -1 must be in [0, 1000]"),
                         (["--set", "wavelet.source=\"estimate\""], "ksweep rtm needs the source"),
                         (["--set", "imaging.condition=\"plain\""],
                          'imaging.condition = "plain" is not allowed (allowed: born, cross-correlation)')):
        bad = fresh("rtm_bad")
        r = ksweep(["rtm", "-c", cfg, "-o", bad] + sets, check=False)
        if r.returncode == 0 or needle not in r.stderr or os.path.exists(bad):
            fail(f"{sets}: exit {r.returncode}, expected {needle!r} and no folder:\n{r.stderr}")
    # The memory: shown by --dry-run, and a run that does not fit is refused before any write.
    r = ksweep(["rtm", "-c", cfg, "-o", fresh("rtm_dry"), "--dry-run"])
    if "memory estimate, RTM and LSRTM (per rank" not in r.stdout or "saved steps" not in r.stdout:
        fail(f"ksweep rtm --dry-run shows no memory estimate:\n{r.stdout}")
    bad = fresh("rtm_bad")
    r = ksweep(["rtm", "-c", cfg, "-o", bad], check=False,
               env={"KSWEEP_MEMORY_AVAILABLE": "5000000", "KSWEEP_DEVICE_MEMORY_AVAILABLE": "5000000"})
    if r.returncode == 0 or "does not fit in" not in r.stderr or os.path.exists(bad):
        fail(f"ksweep rtm with 5 MB available: exit {r.returncode}, no folder expected:\n{r.stderr}")
    r = ksweep(["rtm", "-c", cfg, "-o", out], check=False)
    if r.returncode == 0 or "results" not in r.stderr:
        fail(f"a second run into {out} without --overwrite: exit {r.returncode}\n{r.stderr}")
    # Shots over ranks, and the model split into domains: the images of one rank, bit for bit.
    if MPIEXEC != "none":
        for ranks, sets in ((2, []), (3, []), (2, ["--set", "parallel.domains=[2]"])):
            o = fresh(f"rtm_ranks_{ranks}")
            ksweep(["rtm", "-c", cfg, "-o", o] + sets, ranks=ranks, timeout=900)
            with h5py.File(os.path.join(o, "image.h5"), "r") as f:
                for k in ("rtm", "rtm_correlation", "illumination", "lsrtm"):
                    if not np.array_equal(f[k][...], img[k]):
                        fail(f"image.h5 {k} on {ranks} ranks {sets} differs from one rank's")
            with open(os.path.join(o, "summary.json")) as f:
                s2 = json.load(f)
            if s2["lsrtm_misfit"] != misfit or s2["ranks"] != ranks:
                fail(f"{ranks} ranks {sets}: LSRTM misfit {s2['lsrtm_misfit']} vs {misfit}, ranks {s2['ranks']}")
            print(f"rtm: {ranks} ranks {' '.join(sets)}: the images of one rank, bit for bit")
    print("rtm: ok")


if __name__ == "__main__":
    os.makedirs(WORK, exist_ok=True)
    {"model": case_model, "ranks": case_ranks, "schedules": case_schedules, "resume": case_resume, "converges": case_converges,
     "three_d": case_three_d, "density": case_density, "segy": case_segy, "survey": case_survey,
     "wavelet": case_wavelet,
     "bad_inputs": case_bad_inputs, "outputs": case_outputs, "resume_checks": case_resume_checks,
     "numerics": case_numerics, "disk_full": case_disk_full, "disk_full_tmpfs": case_disk_full_tmpfs, "signals": case_signals,
     "memory": case_memory, "memory_estimate": case_memory_estimate, "domains": case_domains,
     "rtm": case_rtm}[sys.argv[4]]()
