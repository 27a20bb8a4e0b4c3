#!/usr/bin/env python3
"""End-to-end tests of the ksweep program with real MPI runs, HDF5 files and processes.

    test_ksweep.py KSWEEP MPIEXEC WORKDIR CASE

CASE is one of: model, ranks, resume, converges, bad_inputs.
"""
import json
import os
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
ENV = dict(os.environ, OMP_NUM_THREADS="1", OMP_PROC_BIND="false", OMPI_ALLOW_RUN_AS_ROOT="1",
           OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", OMPI_MCA_rmaps_base_oversubscribe="1")


def fail(msg):
    print("FAIL:", msg)
    sys.exit(1)


def write_config(name, text=BASE):
    path = os.path.join(WORK, name)
    with open(path, "w") as f:
        f.write(text)
    return path


def ksweep(args, ranks=1, check=True, timeout=600, threads=1, **kw):
    cmd = [KSWEEP] + args
    if ranks > 1:
        cmd = [MPIEXEC, "-n", str(ranks), "--oversubscribe"] + cmd
    env = dict(ENV, OMP_NUM_THREADS=str(threads))
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


def case_resume():
    text = BASE.replace("iterations = 3", "iterations = 6").replace("checkpoint_every = 1", "checkpoint_every = 2")
    cfg = write_config("resume.toml", text)
    ref = fresh("resume_ref")
    ksweep(["fwi", "-c", cfg, "-o", ref])
    out = fresh("resume_run")
    p = subprocess.Popen([KSWEEP, "fwi", "-c", cfg, "-o", out], env=ENV, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    # Kill it part way through iteration 4 (after iteration 3 was reported, checkpoint at 2).
    deadline = time.time() + 300
    killed_at = None
    while time.time() < deadline and p.poll() is None:
        try:
            its = history(out)
        except (OSError, ValueError, KeyError):
            its = []
        if len(its) >= 3:
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
    ksweep(["fwi", "-c", cfg, "-o", out, "--resume", out])
    a, b = final_model(out), final_model(ref)
    if not np.array_equal(a, b):
        fail(f"resumed run differs from the uninterrupted one: max |dv| {np.abs(a - b).max()}")
    ha, hb = history(out), history(ref)
    if [h["loss"] for h in ha] != [h["loss"] for h in hb]:
        fail(f"loss histories differ:\n{[h['loss'] for h in ha]}\n{[h['loss'] for h in hb]}")
    print("resume: bit-identical model and loss history")


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
    ksweep(["model", "-c", cfg, "-o", ok_obs, "--set", "time.nt=400"])
    expect_error(["fwi", "-c", cfg, "-o", out, "--set", f'fwi.observed="{ok_obs}/observed.h5"'], "has shape", out=out)
    expect_error(["fwi", "-c", cfg, "-o", out, "--set", "fwi.batch=10"], "fwi.batch = 10", out=out)
    expect_error(["fwi", "-c", cfg, "-o", out, "--set", "fwi.learning_rate=3"], "learning_rate", out=out)
    expect_error(["fwi", "-c", cfg, "-o", out, "--set", "time.dt=0.01"], "CFL", out=out)
    expect_error(["fwi", "-c", cfg, "-o", out, "--set", "storage.dtype=fp8"], "fp8", out=out)
    # With several ranks a failure on rank 0 ends every rank (no hang).
    t0 = time.time()
    expect_error(["fwi", "-c", cfg, "-o", out, "--set", f'fwi.observed="{corrupt}"'], "corrupt.h5", ranks=2, out=out)
    print(f"2-rank failure ended in {time.time() - t0:.1f} s")
    print("bad_inputs: ok")


if __name__ == "__main__":
    os.makedirs(WORK, exist_ok=True)
    {"model": case_model, "ranks": case_ranks, "resume": case_resume, "converges": case_converges,
     "bad_inputs": case_bad_inputs}[sys.argv[4]]()
