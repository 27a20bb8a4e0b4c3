#!/usr/bin/env python3
"""The fault suite's second half: each class of reliability failure, tried as a user would.

    test_reliability.py KSWEEP MPIEXEC WORKDIR CASE

CASE is one of:
  lost_results   two runs into one folder (the folder's lock); --overwrite that keeps the earlier
                 results until the new run has written its own, and never replaces an input
  crashes        input that passed validation must not crash: huge smoothing lengths, empty HDF5
                 models, paths that are not UTF-8, a closed stdout pipe, a tight `ulimit -v`
  cheap_checks   cheap checks before model-sized work: huge 3D models, a 6 GB checkpoint, and
                 SIGTERM answered while the starting model is computed
  ranks_agree    ranks started with different commands, configurations or inputs stop together
  silent_inputs  input that would give a silent, meaningless run: unbounded velocities, records
                 without a signal, observed data of another wavelet, 3D keys on 2D models
  leftovers      no empty result folders after a failure; scratch of killed runs removed
  messages       long, NUL-holding, relative and unknown values in messages
"""
import json
import os
import resource
import signal
import socket
import subprocess
import sys
import time

import h5py
import numpy as np

import test_ksweep as k
from test_ksweep import ENV, KSWEEP, MPIEXEC, WORK, fail, fresh, ksweep, run_error, snapshot, write_config


def popen(args, env=None, **kw):
    return subprocess.Popen([KSWEEP] + args, env=dict(ENV, **(env or {})), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, errors="replace", **kw)


def measured(args, env=None, preexec_fn=None, timeout=120):
    """Runs ksweep; returns (exit code, output, seconds, peak resident set in MiB)."""
    t0 = time.time()
    p = popen(args, env=env, preexec_fn=preexec_fn)
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        p.kill()
        out, err = p.communicate()
        fail(f"{args} did not end within {timeout} s:\n{out}{err}")
    # The child is reaped by communicate(); RUSAGE_CHILDREN holds the largest child so far.
    rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    return p.returncode, out + err, time.time() - t0, rss


def summary(out):
    with open(os.path.join(out, "summary.json")) as f:
        return json.load(f)


def checkpoint_config(path):
    with open(path, "rb") as f:
        head = f.read(16)
        n = int.from_bytes(head[8:16], "little")
        return json.loads(f.read(n))["run"]["config"]


# --- 1. Results lost --------------------------------------------------------------------------

def case_lost_results():
    cfg = write_config("lost.toml")
    slow = ["--set", "fwi.iterations=5", "--set", "time.nt=900", "--set", "fwi.save_models=true"]
    # Two runs started together into one new folder: one runs, the other is refused, and every
    # file in the folder is the one run's.
    for trial in range(3):
        out = fresh(f"lost_pair_{trial}")
        ps = [popen(["fwi", "-c", cfg, "-o", out, "--set", f"fwi.lr={lr}"] + slow) for lr in (20, 21)]
        texts = [("".join(p.communicate(timeout=300))) for p in ps]
        won = [i for i, p in enumerate(ps) if p.returncode == 0]
        if len(won) != 1:
            fail(f"trial {trial}: {len(won)} of two runs into one folder exited 0 (exactly one may):\n"
                 + "\n---\n".join(texts))
        lost = 1 - won[0]
        if not any(s in texts[lost] for s in ("in use by another ksweep run", "holds the results of another run")):
            fail(f"trial {trial}: the refused run does not say why:\n{texts[lost]}")
        lr = (20, 21)[won[0]]
        if summary(out)["config"]["fwi"]["lr"] != lr or checkpoint_config(os.path.join(out, "checkpoint.bin"))[
                "fwi"]["lr"] != lr or len(summary(out)["iterations"]) != 5:
            fail(f"trial {trial}: the folder mixes the two runs' files")
        print(f"  trial {trial}: run {won[0]} ran, the other: {texts[lost].strip().splitlines()[-1][:110]}")
    # A running run holds its folder: a second run, a resume and a dry run into it are refused
    # while it lives, and it goes on undisturbed (stopped by SIGTERM at an iteration boundary).
    out = fresh("lost_running")
    long_run = ["--set", "fwi.iterations=200", "--set", "time.nt=1500"]
    p = popen(["fwi", "-c", cfg, "-o", out] + long_run)
    if not k.wait_for(p, out, 1):
        fail("the first run ended early")
    for extra in (["--overwrite"], ["--resume", out], ["--dry-run", "--overwrite"]):
        run_error(["fwi", "-c", cfg, "-o", out] + long_run + extra, ["in use by another ksweep run"])
    if p.poll() is not None:
        fail(f"the first run ended during the checks (exit {p.returncode}): the case proves nothing")
    p.send_signal(signal.SIGTERM)
    if p.wait(timeout=300) != 143 or not os.path.exists(os.path.join(out, "checkpoint.bin")):
        fail(f"the first run did not stop cleanly: exit {p.returncode}\n{p.stderr.read()}")
    # --overwrite never replaces an input of the run (observed data, model) held in the folder.
    a = fresh("lost_inputs")
    ksweep(["model", "-c", cfg, "-o", a])
    before = snapshot(a)
    run_error(["fwi", "-c", cfg, "-o", a, "--overwrite", "--set", f'fwi.observed="{a}/observed.h5"'],
              ["--overwrite would replace", "fwi.observed", "an input of this run"])
    k.check_clean(a, before, "--overwrite onto its own observed data")
    b = fresh("lost_model_input")
    ksweep(["fwi", "-c", cfg, "-o", b, "--set", "fwi.iterations=1", "--set", "fwi.save_models=true"])
    before = snapshot(b)
    for src in ("model_final.h5", "models/model_0001.h5"):
        run_error(["fwi", "-c", cfg, "-o", b, "--overwrite", "--set", f'model.source="{b}/{src}"',
                   "--set", "model.decimate=1", "--set", "model.crop_x=[0, 120]"],
                  ["--overwrite would replace", "model.source", "an input of this run"])
        k.check_clean(b, before, f"--overwrite onto its own model.source {src}")
    # Every path-valued key is protected, as the configuration declares them (a density file too).
    vd = ["--set", 'propagator.physics="acoustic_vd"', "--set", "fwi.iterations=1"]
    d = fresh("lost_density_input")
    ksweep(["fwi", "-c", cfg, "-o", d] + vd)
    before = snapshot(d)
    run_error(["fwi", "-c", cfg, "-o", d, "--overwrite", "--set", f'model.density="{d}/model_final.h5"'] + vd,
              ["--overwrite would replace", "model.density", "an input of this run"])
    k.check_clean(d, before, "--overwrite onto its own model.density")
    # --overwrite keeps the earlier results until the new run has written its own: a run that
    # fails at its first write leaves the folder as it was; one that fails later leaves the
    # earlier results whole in the folder it names.
    c = fresh("lost_overwrite")
    ksweep(["fwi", "-c", cfg, "-o", c, "--set", "fwi.iterations=2", "--set", "fwi.save_models=true"])
    before = snapshot(c)
    run_error(["fwi", "-c", cfg, "-o", c, "--overwrite", "--set", "fwi.lr=5"], ["No space left on device"],
              env={"KSWEEP_FAULT_WRITES": "0"})
    k.check_clean(c, before, "--overwrite failing at its first write")
    if sorted(os.listdir(c)) != sorted(e for e in os.listdir(c) if not e.startswith(".ksweep-replaced")):
        fail("an empty aside folder was left")
    text = run_error(["fwi", "-c", cfg, "-o", c, "--overwrite", "--set", "fwi.lr=5"],
                     ["the gradient of iteration 2", "the results this run was replacing (--overwrite) are kept in"],
                     env={"KSWEEP_FAULT_NAN": "gradient:2"})
    aside = [e for e in os.listdir(c) if e.startswith(".ksweep-replaced")]
    if len(aside) != 1 or snapshot(os.path.join(c, aside[0])) != before:
        fail(f"the earlier results are not whole beside the failed run's: {os.listdir(c)}")
    if aside[0] not in text:
        fail(f"the message does not name {aside[0]}:\n{text}")
    # A successful --overwrite removes the results it replaced (the failed run's), and keeps and
    # names those the failed run had kept aside.
    r = ksweep(["fwi", "-c", cfg, "-o", c, "--overwrite", "--set", "fwi.iterations=1"])
    left = [e for e in os.listdir(c) if e.startswith(".ksweep-replaced")]
    if left != aside or snapshot(os.path.join(c, aside[0])) != before or len(summary(c)["iterations"]) != 1:
        fail(f"a successful --overwrite left {left} (expected {aside}, whole)")
    if aside[0] not in r.stderr:
        fail(f"the kept results are not named:\n{r.stderr}")
    # A folder named like a result file is a result (the run could not write that file).
    e = fresh("lost_folder_named_file")
    os.makedirs(os.path.join(e, "model_final.h5"))
    run_error(["fwi", "-c", cfg, "-o", e, "--dry-run"], ["holds the results of another run", "model_final.h5/"])
    print("lost_results: ok")


# --- 2. Crashes on input that passed validation -----------------------------------------------

def case_crashes():
    cfg = write_config("crash.toml")
    out = fresh("crash_out")
    for key in ("fwi.smooth_sigma", "fwi.grad_smooth"):
        rc, text, secs, _ = measured(["fwi", "-c", cfg, "-o", out, "--set", f"{key}=1e9"])
        if rc != 1 or f"{key} = 1e+09 cells is wider than the model's largest extent" not in text:
            fail(f"{key} = 1e9: exit {rc}:\n{text}")
        print(f"  {key} = 1e9 refused in {secs:.1f} s")
    # HDF5 models whose vp dataset is empty, on the default decimation path.
    for shape in ((0, 0), (0, 120), (60, 0)):
        path = os.path.join(WORK, f"empty_{shape[0]}x{shape[1]}.h5")
        with h5py.File(path, "w") as f:
            f.create_dataset("vp", shape=shape, dtype="f4")
            f.attrs["dh"] = 12.5
        run_error(["fwi", "-c", cfg, "-o", out, "--set", f'model.source="{path}"', "--set", "model.crop_x=[0, 1]",
                   "--set", "model.crop_z=[0, 1]"], ["dataset 'vp'", "is empty", "at least 1 cell"], errors="replace")
        run_error(["model", "-c", cfg, "-o", out, "--set", f'model.source="{path}"'], ["is empty"], errors="replace")
    if os.path.exists(out):
        fail("a failed run left its output folder")
    # Paths that are not UTF-8: refused at load, naming the byte, instead of dying after
    # iteration 1 while writing summary.json.
    bad = os.path.join(os.fsencode(WORK), b"conf\xff.toml")
    with open(bad, "w") as f:
        f.write(k.BASE)
    run_error(["fwi", "-c", bad, "-o", out], ["not", "UTF-8", "conf\\xff.toml"], errors="replace")
    scratch = os.path.join(os.fsencode(WORK), b"scratch\xfe")
    os.makedirs(scratch, exist_ok=True)
    for sets in ([b"storage.location=disk", b"storage.disk_dir=" + scratch],
                 [b"model.source=" + os.path.join(os.fsencode(WORK), b"model\xfe.h5")]):
        args = ["fwi", "-c", cfg, "-o", out]
        for x in sets:
            args += ["--set", x]
        run_error(args, ["UTF-8", "\\xfe"], errors="replace")
    if os.path.exists(out):
        fail("a failed run left its output folder")
    # An output folder whose name is not UTF-8 is fine: nothing of it goes into JSON as text.
    odd = os.path.join(os.fsencode(WORK), b"out\xfd")
    subprocess.run(["rm", "-rf", odd])
    ksweep(["fwi", "-c", cfg, "-o", odd, "--set", "fwi.iterations=1"], errors="replace")
    with open(os.path.join(odd, b"summary.json")) as f:
        json.load(f)
    # Observed data of extreme (finite) amplitude: the optimizer's state would overflow.
    src = fresh("crash_obs")
    ksweep(["model", "-c", cfg, "-o", src])
    huge = os.path.join(WORK, "observed_1e30.h5")
    k.shutil.copy(os.path.join(src, "observed.h5"), huge)
    with h5py.File(huge, "r+") as f:
        f["data"][...] = f["data"][...] * np.float32(1e30)
    big_out = fresh("crash_huge")
    run_error(["fwi", "-c", cfg, "-o", big_out, "--set", f'fwi.observed="{huge}"'],
              ["moments overflowed (the squared gradient exceeds the float range) at iteration 1", "extreme amplitude"])
    if os.path.exists(os.path.join(big_out, "checkpoint.bin")):
        fail("a checkpoint was written for an overflowed iteration")
    # A key nested 50000 levels deep.
    deep = write_config("deep.toml", "[" + ".".join(["a"] * 50000) + "]\n")
    run_error(["fwi", "-c", deep, "-o", out, "--dry-run"], ["nested more than 64 levels"])
    # stdout into a pipe that closes (`| head -n 1`): the run goes on and writes its results.
    pipe_out = fresh("crash_pipe")
    p = popen(["fwi", "-c", cfg, "-o", pipe_out])
    first = p.stdout.readline()
    p.stdout.close()
    err = p.stderr.read()
    if p.wait(timeout=300) != 0 or not os.path.exists(os.path.join(pipe_out, "model_final.h5")):
        fail(f"a closed stdout pipe ended the run: exit {p.returncode} after {first!r}\n{err}")
    # Start-up under a tight address-space limit: a ksweep line says what failed and why. (Below
    # about 56 MiB the dynamic loader itself cannot map the program and its libraries, before
    # any ksweep code runs.)
    # (A CUDA build's driver library reserves far more address space than any such limit: there
    # the dynamic loader fails first, and the case says nothing about ksweep.)
    # MPI starts as a user's singleton does (with Open MPI's daemon: test_ksweep.ENV leaves it out).
    user = {key: v for key, v in ENV.items() if key != "OMPI_MCA_ess_singleton_isolated"}
    for limit_mib in (() if k.on_device() else (64, 80)):
        def tight(n=limit_mib << 20):
            resource.setrlimit(resource.RLIMIT_AS, (n, n))
        r = subprocess.run([KSWEEP, "info"], env=user, capture_output=True, text=True, errors="replace",
                           preexec_fn=tight, timeout=120)
        if r.returncode == 0:
            fail(f"ksweep info ran in {limit_mib} MiB of address space: the case proves nothing")
        if "ksweep: " not in r.stderr or "ulimit -v" not in r.stderr:
            fail(f"start-up under ulimit -v {limit_mib} MiB ended without a ksweep message:\n{r.stderr}")
    print("crashes: ok")


# --- 3. Cheap checks first --------------------------------------------------------------------

THREE_D = """
[model]
source = "layered3d"
decimate = 1
nz = 40
ny = 200000
nx = 60
dh = 20.0
[time]
dt = 0.002
nt = 500
[shots]
count = 2
[receivers]
count = 20
[propagator]
pml_width = 10
[fwi]
iterations = 1
batch = 2
"""


def case_cheap_checks():
    cfg = write_config("cheap3d.toml", THREE_D)
    out = fresh("cheap_out")
    for extra in ([], ["--dry-run"]):
        rc, text, secs, rss = measured(["fwi", "-c", cfg, "-o", out] + extra)
        if rc != 1 or "out of memory" not in text and "memory" not in text:
            fail(f"a 40 x 200000 x 60 model {extra}: exit {rc}:\n{text[-2000:]}")
        if secs > 10 or rss > 1024:
            fail(f"the memory check came after model-sized work: {secs:.1f} s, {rss:.0f} MiB resident")
        print(f"  huge 3D model {extra} refused in {secs:.2f} s")
    # 10^8 shots on a 120-cell line: refused before the survey is built.
    rc, text, secs, rss = measured(["fwi", "-c", write_config("cheap.toml"), "-o", out, "--set",
                                    "shots.count=100000000"])
    if rc != 1 or "one shot per cell at most" not in text or secs > 10:
        fail(f"10^8 shots: exit {rc} after {secs:.1f} s:\n{text}")
    if os.path.exists(out):
        fail("a refused run left its output folder")
    # A 6 GB checkpoint (sparse) is refused from its header, never read whole.
    cfg2 = write_config("cheap.toml")
    run = fresh("cheap_ck")
    ksweep(["fwi", "-c", cfg2, "-o", run, "--set", "fwi.iterations=1"])
    ck = os.path.join(run, "checkpoint.bin")
    with open(ck, "r+b") as f:
        f.truncate(6 << 30)
    rc, text, secs, rss = measured(["fwi", "-c", cfg2, "-o", run, "--resume", run, "--set", "fwi.iterations=2"])
    if rc != 1 or "truncated or corrupt" not in text or secs > 10:
        fail(f"6 GB checkpoint: exit {rc} after {secs:.1f} s:\n{text}")
    print(f"  6 GB checkpoint refused in {secs:.2f} s")
    # SIGTERM while the starting model is computed (a wide smoothing of the whole Marmousi2 at
    # 6.25 m) is answered at once.
    big = k.BASE.replace("crop_z = [0, 60]\ncrop_x = [250, 370]\n", "").replace(
        'source = "marmousi2"\ndecimate = 2', 'source = "marmousi2_fine"\ndecimate = 1').replace(
        "dt = 0.003\nnt = 500", "dt = 0.0005\nnt = 600")
    cfgb = write_config("cheap_big.toml", big)
    p = popen(["fwi", "-c", cfgb, "-o", fresh("cheap_big"), "--dry-run", "--set", "fwi.smooth_sigma=2000"])
    time.sleep(8)
    if p.poll() is not None:
        fail(f"the starting model was done within 8 s: the case proves nothing\n{p.communicate()}")
    t0 = time.time()
    p.send_signal(signal.SIGTERM)
    try:
        _, err = p.communicate(timeout=10)
    except subprocess.TimeoutExpired:
        p.kill()
        fail("SIGTERM was not answered within 10 s while the starting model was computed")
    if p.returncode != 143 or "stopped by SIGTERM while computing the starting model" not in err:
        fail(f"SIGTERM while computing the starting model: exit {p.returncode}\n{err}")
    print(f"  SIGTERM answered in {time.time() - t0:.2f} s while computing the starting model")
    # Observed data of the wrong shape, and a storage.disk_dir where nothing can be made, are
    # refused before the model is read and smoothed.
    obs_dir = fresh("cheap_obs")
    ksweep(["model", "-c", cfg2, "-o", obs_dir, "--set", "receivers.count=59"])
    for extra, needle in ((["--set", f'fwi.observed="{obs_dir}/observed.h5"'], "has shape"),
                          (["--set", "storage.location=disk", "--set", 'storage.disk_dir="/proc"'],
                           "cannot create a folder there")):
        rc, text, secs, _ = measured(["fwi", "-c", cfgb, "-o", fresh("cheap_big"), "--dry-run",
                                      "--set", "fwi.smooth_sigma=2000"] + extra)
        if rc != 1 or needle not in text or secs > 5:
            fail(f"{extra}: exit {rc} after {secs:.1f} s (the smoothing takes longer):\n{text}")
        print(f"  {needle!r} found in {secs:.2f} s, before the starting model")
    print("cheap_checks: ok")


# --- 4. Ranks that must agree -----------------------------------------------------------------

def mpmd(apps, timeout=120):
    """mpirun with one rank per (working folder, ksweep arguments); returns (exit code, output)."""
    cmd = [MPIEXEC, "--oversubscribe"]
    for i, (wdir, args) in enumerate(apps):
        cmd += ([":"] if i else []) + ["-n", "1", "-wdir", wdir, KSWEEP] + args
    try:
        r = subprocess.run(cmd, env=ENV, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        fail(f"ranks with different arguments hung: {cmd}")
    return r.returncode, r.stdout + r.stderr


def case_ranks_agree():
    if MPIEXEC == "none":
        print("SKIPPED: no MPI")
        sys.exit(k.SKIPPED)
    here = fresh("agree")
    dirs = [os.path.join(here, d) for d in ("a", "b")]
    for d in dirs:
        os.makedirs(d)
    for d in ("a", "b"):
        write_config(f"agree/{d}/run.toml")
    base = ["-c", "run.toml", "-o", "out", "--set", "fwi.iterations=1"]
    cases = (("fwi beside model", [["fwi"] + base, ["model", "-c", "run.toml", "-o", "out"]], "the command line"),
             ("another --set", [["fwi"] + base, ["fwi"] + base + ["--set", "fwi.lr=5"]], "the command line"),
             ("another option", [["fwi"] + base, ["fwi"] + base + ["--dry-run"]], "the command line"))
    for name, args, needle in cases:
        rc, text = mpmd([(dirs[0], args[0]), (dirs[0], args[1])])
        if rc == 0 or f"disagree on {needle}" not in text or "MPI_ERR" in text:
            fail(f"{name}: exit {rc}\n{text}")
        print(f"  {name}: {[l for l in text.splitlines() if 'disagree' in l][0][:120]}")
    # The same command line, another configuration file's contents (a file system that differs
    # between nodes), then another model file.
    with open(os.path.join(dirs[1], "run.toml"), "w") as f:
        f.write(k.BASE.replace("lr = 20.0", "lr = 21.0"))
    rc, text = mpmd([(dirs[0], ["fwi"] + base), (dirs[1], ["fwi"] + base)])
    if rc == 0 or "disagree on the configuration" not in text:
        fail(f"another configuration: exit {rc}\n{text}")
    shutil_model = k.BASE.replace('source = "marmousi2"', 'source = "model.h5"').replace(
        "decimate = 2\ncrop_z = [0, 60]\ncrop_x = [250, 370]", "decimate = 1")
    for i, d in enumerate(dirs):
        with open(os.path.join(d, "run.toml"), "w") as f:
            f.write(shutil_model)
        with h5py.File(os.path.join(d, "model.h5"), "w") as f:
            v = np.full((60, 120), 2000.0, dtype="f4")
            v[30:] = 2500.0 + 100 * i
            f.create_dataset("vp", data=v)
            f.attrs["dh"] = 25.0
    rc, text = mpmd([(dirs[0], ["fwi"] + base), (dirs[1], ["fwi"] + base)])
    if rc == 0 or "disagree on the configuration or the model" not in text:
        fail(f"another model file: exit {rc}\n{text}")
    if os.path.exists(os.path.join(dirs[0], "out")) and os.listdir(os.path.join(dirs[0], "out")):
        fail("ranks that disagree wrote output")
    # A model file missing on one rank: every rank stops, with that rank's message, no MPI abort.
    os.remove(os.path.join(dirs[1], "model.h5"))
    rc, text = mpmd([(dirs[0], ["fwi"] + base), (dirs[1], ["fwi"] + base)])
    if rc == 0 or "error on rank 1" not in text or "file not found" not in text or "MPI_ABORT" in text:
        fail(f"a model missing on rank 1: exit {rc}\n{text}")
    with h5py.File(os.path.join(dirs[1], "model.h5"), "w") as f:
        v = np.full((60, 120), 2000.0, dtype="f4")
        v[30:] = 2500.0
        f.create_dataset("vp", data=v)
        f.attrs["dh"] = 25.0
    # Ranks that agree run.
    rc, text = mpmd([(dirs[0], ["fwi"] + base), (dirs[0], ["fwi"] + base)])
    if rc != 0:
        fail(f"equal ranks failed:\n{text}")
    print("ranks_agree: ok")


# --- 5. Accepted silently ---------------------------------------------------------------------

def case_silent_inputs():
    cfg = write_config("silent.toml")
    out = fresh("silent_out")
    # Velocities are always bounded: vmin must be a velocity, vmax = 0 is the stability limit.
    run_error(["fwi", "-c", cfg, "-o", out, "--set", "fwi.vmin=0", "--set", "fwi.vmax=0"],
              ["fwi.vmin = 0", "must be a velocity > 0"])
    wild = fresh("silent_wild")
    ksweep(["fwi", "-c", cfg, "-o", wild, "--set", "fwi.vmax=0", "--set", "fwi.lr=100000", "--set", "fwi.iterations=2"])
    v = k.final_model(wild)
    vstable = 0.612372 * 25 / 0.003  # CFL limit of order 4 in 2D, dh 25 m, dt 3 ms
    if v.min() < 1000 or v.max() > vstable * 1.0001:
        fail(f"fwi.vmax = 0 with a wild step left velocities in [{v.min()}, {v.max()}], outside [1000, {vstable}]")
    print(f"  wild steps stay in [{v.min():.0f}, {v.max():.0f}] m/s")
    # Bounds that exclude the starting model, a starting model equal to the true one, steps below
    # the float resolution, a wavelet slower than the record.
    for sets, needle in ((["fwi.vmin=4999"], "outside the bounds the inversion keeps"),
                         (["fwi.vmax=1000.5"], "outside the bounds the inversion keeps"),
                         (["fwi.smooth_sigma=0"], "would start at its answer"),
                         (["fwi.lr=1e-300"], "below the float32 resolution"),
                         (["wavelet.freq=0.1"], "the source is almost constant")):
        run_error(["fwi", "-c", cfg, "-o", out, "--set", sets[0]], [sets[0].split("=")[0], needle])
    # Records without a signal.
    for sets, needle in ((["wavelet.delay=2.0"], "wavelet.delay = 2 s is at or beyond the end of the record"),
                         (["time.nt=1"], "is at or beyond the end of the record"),
                         (["time.dt=1e-6"], "is at or beyond the end of the record")):
        for cmd in ("fwi", "model"):
            args = [cmd, "-c", cfg, "-o", out]
            for x in sets:
                args += ["--set", x]
            run_error(args, [needle])
    for sets, needle in ((["wavelet.freq=1e300"], "above the Nyquist frequency"),
                         (["propagator.pml_freq=1e300"], "above the Nyquist frequency")):
        run_error(["fwi", "-c", cfg, "-o", out, "--set", sets[0]], [sets[0].split("=")[0], needle])
    src = fresh("silent_obs")
    ksweep(["model", "-c", cfg, "-o", src])
    for value, label in ((0.0, "zero"), (1e-40, "subnormal")):
        path = os.path.join(WORK, f"observed_{label}.h5")
        k.shutil.copy(os.path.join(src, "observed.h5"), path)
        with h5py.File(path, "r+") as f:
            f["data"][...] = np.float32(value)
        run_error(["fwi", "-c", cfg, "-o", out, "--set", f'fwi.observed="{path}"'],
                  [path, "are zero at every sample", "nothing to invert"])
        if MPIEXEC != "none":
            run_error(["fwi", "-c", cfg, "-o", out, "--set", f'fwi.observed="{path}"'], ["are zero at every sample"],
                      ranks=2)
    # Observed data of another wavelet.
    other = fresh("silent_other")
    ksweep(["model", "-c", cfg, "-o", other, "--set", "wavelet.freq=6", "--set", "wavelet.delay=0.3"])
    run_error(["fwi", "-c", cfg, "-o", out, "--set", f'fwi.observed="{other}/observed.h5"'],
              ["were modelled with wavelet.freq = 6", "the configuration has wavelet.freq = 5"])
    run_error(["fwi", "-c", cfg, "-o", out, "--set", f'fwi.observed="{other}/observed.h5"', "--set", "wavelet.freq=6"],
              ["were modelled with wavelet.delay = 0.3"])
    # 3D keys on a 2D model; --resume ''; a dry run into a folder that cannot be made.
    for sets in (["shots.count_y=2", "shots.y_range=[0.2, 0.8]"], ["receivers.count_y=1"],
                 ["receivers.count_y=2", "receivers.y_range=[0.1, 0.9]"]):
        for cmd in ("fwi", "model"):
            args = [cmd, "-c", cfg, "-o", out]
            for x in sets:
                args += ["--set", x]
            run_error(args, [x.split("=")[0] for x in sets] + ["is a 2D model", "apply to 3D models only"])
    run_error(["fwi", "-c", cfg, "-o", out, "--resume", ""], ["--resume '' names no folder"])
    for cmd in ("fwi", "model"):
        run_error([cmd, "-c", cfg, "-o", "/proc/ksweep-cannot-exist/out", "--dry-run"],
                  ["cannot create the output folder"])
    if os.path.exists(out):
        fail("a refused run left its output folder")
    print("silent_inputs: ok")


# --- 6. Leftovers -----------------------------------------------------------------------------

def case_leftovers():
    cfg = write_config("left.toml")
    # A full disk at the first write leaves no empty result folders (and no folder it made);
    # the next run into the folder is not refused.
    for premade in (False, True):
        out = fresh(f"left_enospc_{premade}")
        if premade:
            os.makedirs(out)
        run_error(["fwi", "-c", cfg, "-o", out, "--set", "fwi.save_models=true", "--set", "fwi.figures_every=1"],
                  ["No space left on device"], env={"KSWEEP_FAULT_WRITES": "0"})
        left = os.listdir(out) if os.path.exists(out) else None
        if left:
            fail(f"a run that failed at its first write left {left}")
        if os.path.exists(out) != premade:
            fail("the output folder was removed though the user made it, or left though the run made it")
        ksweep(["fwi", "-c", cfg, "-o", out, "--set", "fwi.iterations=1"])
    # The scratch folder of a disk-storage run killed by SIGKILL is removed by the next run that
    # uses the same storage.disk_dir; a live run's scratch is left alone.
    scratch = fresh("left_scratch")
    os.makedirs(scratch)
    disk = ["--set", "storage.location=disk", "--set", f'storage.disk_dir="{scratch}"']
    slow = ["--set", "time.nt=1500", "--set", "fwi.iterations=8"]
    killed = fresh("left_killed")
    p = popen(["fwi", "-c", cfg, "-o", killed] + disk + slow)
    # The store's folder lives from a gradient's forward pass to the end of its backward pass:
    # stop the run while it exists (checked again once stopped), then kill it.
    deadline = time.time() + 120
    while True:
        if p.poll() is not None or time.time() > deadline:
            fail("the disk run ended early, or never made its scratch folder")
        if os.listdir(scratch):
            p.send_signal(signal.SIGSTOP)
            if os.listdir(scratch):
                break
            p.send_signal(signal.SIGCONT)
        time.sleep(0.02)
    p.kill()
    p.wait()
    stale = os.listdir(scratch)
    if len(stale) != 1:
        fail(f"expected the killed run's scratch folder in {scratch}: {stale}")
    # Folders of this host named for a live process (this script) are kept, those of a process
    # that has ended are removed; so are those of the killed run.
    host = socket.gethostname().replace("/", "_").replace("-", "_")
    ended = subprocess.Popen(["true"])
    ended.wait()
    alive = os.path.join(scratch, f"ksweep-{os.getpid()}-0-1-{host}")
    gone = os.path.join(scratch, f"ksweep-{ended.pid}-0-2-{host}")
    other_host = os.path.join(scratch, f"ksweep-{ended.pid}-0-3-elsewhere")
    for d in (alive, gone, other_host):
        os.makedirs(d)
        with open(os.path.join(d, "boundary.bin"), "wb") as f:
            f.write(b"\0" * 4096)
    ksweep(["fwi", "-c", cfg, "-o", fresh("left_next"), "--set", "fwi.iterations=1"] + disk)
    now = sorted(os.listdir(scratch))
    expected = sorted(os.path.basename(d) for d in (alive, other_host))
    if now != expected:
        fail(f"scratch after the next run: {now}, expected only the live process's and the other host's: {expected}")
    print("leftovers: ok")


# --- 7. Messages ------------------------------------------------------------------------------

def case_messages():
    cfg = write_config("msg.toml")
    out = fresh("msg_out")
    os.makedirs(os.path.join(WORK, "adir.h5"), exist_ok=True)
    longp = "/nonexistent/" + "a" * 200000 + ".h5"
    longc = write_config("msg_long.toml", k.BASE.replace('source = "marmousi2"', f'source = "{longp}"'))
    text = run_error(["fwi", "-c", longc, "-o", out], ["bytes in all"])
    if max(len(line) for line in text.splitlines()) > 2000:
        fail(f"a 200 k-character path gave a line of {max(len(line) for line in text.splitlines())} characters")
    nul = write_config("msg_nul.toml", k.BASE.replace('source = "marmousi2"', 'source = "ab\\u0000cd.h5"'))
    run_error(["fwi", "-c", nul, "-o", out], ["ab\\x00cd.h5", "a NUL character"])
    run_error(["fwi", "-c", cfg, "-o", out, "--set", 'model.source="no_such_model.h5"'],
              ["no_such_model.h5", "relative to the working directory", "file not found"])
    run_error(["frobnicate", "-c", cfg], ["unknown subcommand 'frobnicate'", "info, model, fwi"])
    run_error(["fwi", "-c", cfg, "-o", out, "--set", 'model.source="marmousi3"'],
              ["marmousi2_fine", "layered3d", "marmousi2_3d"])
    run_error(["fwi", "-c", os.path.join(WORK, "nope.toml"), "-o", out], ["ksweep: error: --config", "nope.toml"])
    run_error(["fwi", "-c", cfg, "-o", out, "--set", f'model.source="{WORK}/adir.h5"'], ["not a regular file"])
    empty = fresh("msg_empty_ck")
    os.makedirs(empty)
    open(os.path.join(empty, "checkpoint.bin"), "w").close()
    text = run_error(["fwi", "-c", cfg, "-o", empty, "--resume", empty], ["is empty (0 bytes)"])
    if "older ksweep" in text:
        fail(f"a 0-byte checkpoint was called an older ksweep's:\n{text}")
    # CSV surveys: bytes that are not text shown escaped (they were printed raw, or cut the
    # message at a NUL); a byte-order mark and a '+' sign read as what they are.
    rows = "shot,src_x,src_z,rec_x,rec_z\n1,{},10,200,20\n1,100,10,300,20\n"
    for label, cell, needle in (("latin1", b"1\xe900", "src_x = '1\\xe900' is not a finite number"),
                                ("nul", b"10\x000", "src_x = '10\\x000' is not a finite number")):
        csv = os.path.join(WORK, f"msg_{label}.csv")
        with open(csv, "wb") as f:
            f.write(rows.encode().replace(b"{}", cell))
        text = run_error(["model", "-c", cfg, "-o", out, "--set", f'survey.file="{csv}"'], [needle])
        if "\x00" in text or "\xe9" in text:
            fail(f"raw bytes in the message:\n{text!r}")
    ok = os.path.join(WORK, "msg_bom_plus.csv")
    with open(ok, "wb") as f:
        f.write(b"\xef\xbb\xbf" + rows.format("+100").encode())
    r = subprocess.run([KSWEEP, "model", "-c", cfg, "-o", out, "--dry-run", "--set", f'survey.file="{ok}"'],
                       env=ENV, capture_output=True, text=True)
    if r.returncode != 0:
        fail(f"a CSV with a byte-order mark and '+100' was refused:\n{r.stderr}")
    # A number TOML cannot hold is not "a string"; a dangling -o link is named.
    run_error(["fwi", "-c", cfg, "-o", out, "--set", "time.nt=99999999999999999999"],
              ["99999999999999999999 is a number TOML cannot hold"])
    link = os.path.join(WORK, "msg_dangling")
    if os.path.lexists(link):
        os.remove(link)
    os.symlink(os.path.join(WORK, "no_such_dir", "deeper"), link)
    run_error(["fwi", "-c", cfg, "-o", link], ["is a symbolic link to", "no_such_dir/deeper", "which does not exist"])
    if os.path.exists(out):
        fail("a refused run left its output folder")
    print("messages: ok")


if __name__ == "__main__":
    os.makedirs(WORK, exist_ok=True)
    {"lost_results": case_lost_results, "crashes": case_crashes, "cheap_checks": case_cheap_checks,
     "ranks_agree": case_ranks_agree, "silent_inputs": case_silent_inputs, "leftovers": case_leftovers,
     "messages": case_messages}[sys.argv[4]]()
