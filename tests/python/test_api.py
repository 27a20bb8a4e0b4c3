"""The Python package against the library and the program: bits, adjoints, gradients, errors,
threads and signals."""
import json
import os
import signal
import subprocess
import sys
import threading
import time

import h5py
import numpy as np
import pytest

import ksweep
from conftest import MARMOUSI_CROP, SOURCE_DIR, amplitudes, layered, survey

DT, DH = 0.001, 10.0


def run(cmd, **kw):
    env = dict(os.environ, OMP_NUM_THREADS="2", OMP_PROC_BIND="false")
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, **kw)
    assert r.returncode == 0, f"{cmd} failed ({r.returncode}):\n{r.stdout}\n{r.stderr}"
    return r


def test_thread_counts_beyond_the_backend_are_refused():
    """More host threads than the backend runs: a ValueError naming the count, not a crash (the
    program refuses the same through core::HostThreads)."""
    code = ("import ksweep\ntry:\n    ksweep.initialize(threads={})\nexcept ValueError as e:\n"
            "    print('refused:', e)\n")
    r = run([sys.executable, "-c", code.format(1024)])
    assert "refused: ksweep.initialize: threads = 1024" in r.stdout and "at most 512" in r.stdout, r.stdout + r.stderr
    env = dict(os.environ, OMP_NUM_THREADS="4096", OMP_PROC_BIND="false")
    r = subprocess.run([sys.executable, "-c", code.format("None")], capture_output=True, text=True, env=env)
    assert r.returncode == 0 and "refused: OMP_NUM_THREADS = 4096" in r.stdout and "at most 512" in r.stdout, \
        r.stdout + r.stderr


@pytest.mark.parametrize("switch", ["KSWEEP_CUDA_GRAPHS", "KSWEEP_GPU_AWARE_MPI", "KSWEEP_OVERLAP"])
def test_a_wrong_switch_is_refused(switch):
    """The run's switches take 1 or 0 (or nothing): another value is refused when ksweep starts,
    naming it, on every build (as the program refuses it)."""
    code = ("import ksweep\ntry:\n    ksweep.initialize()\nexcept ValueError as e:\n"
            "    print('refused:', e)\n")
    env = dict(os.environ, OMP_NUM_THREADS="2", OMP_PROC_BIND="false")
    env[switch] = "on"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert r.returncode == 0 and f"refused: {switch}='on' is not allowed (allowed: 1, " in r.stdout, \
        r.stdout + r.stderr
    env[switch] = "0"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert r.returncode == 0 and "refused" not in r.stdout, r.stdout + r.stderr


def test_inversion_keywords_are_the_key_table_s(program):
    """Inversion's options are the keys of the library's table that name a Python keyword, with
    the table's defaults (or its stated Python default), checked by the key's limits as the
    program checks the key; Inversion(Problem, Options) is Inversion(v, ..., **keywords)."""
    table = [k for k in ksweep.keys() if k["python"]]
    assert len(table) >= 25
    o = ksweep.Options()
    for k in table:
        name = k["python"].split("[")[0]
        value = getattr(o, name)
        if "[" in k["python"]:
            value = value[int(k["python"][-2])]
        assert value == k.get("python_default", k["default"]), k["key"]
    assert set(vars(o)) == {k["python"].split("[")[0] for k in table}
    assert repr(ksweep.Options(lr=10.0)) == "Options(lr=10.0)"
    with pytest.raises(TypeError, match="unknown option.*learning_rate.*options: .*lr"):
        ksweep.Options(learning_rate=3)
    # The text the program prints is the same table.
    text = subprocess.run([program, "keys"], capture_output=True, text=True, check=True).stdout
    for k in ksweep.keys():
        assert k["key"] in text
    # The key's own limits, as the program words them, with the Python name.
    v = layered((30, 40))
    src, rec = survey((30, 40), 2, 10)
    w = ksweep.ricker(10.0, 120, DT)
    obs = np.zeros((2, rec.shape[1], 120), np.float32)
    for kw, needle in [({"lr": -1.0}, r"lr \(fwi.lr\) = -1 m/s must be > 0"),
                       ({"storage_dtype": "fp8"}, r'storage_dtype \(storage.dtype\) = "fp8" is not allowed'),
                       ({"lbfgs_memory": 500, "optimizer": "lbfgs"}, r"lbfgs_memory \(fwi.lbfgs_memory\) = 500 "
                                                                      r"correction pairs must be in \[1, 100\]"),
                       ({"batch": "two"}, r"batch = 'two' must be an integer \(fwi.batch\)")]:
        with pytest.raises(ValueError, match=needle):
            ksweep.Inversion(v, DH, DT, w, src, rec, obs, pml_width=6, **kw)
    problem = ksweep.Problem(v, DH, DT, w, src, rec, obs)
    a = ksweep.Inversion(problem, ksweep.Options(pml_width=6, batch=2, seed=3)).step()
    b = ksweep.Inversion(v, DH, DT, w, src, rec, obs, pml_width=6, batch=2, seed=3).step()
    assert a["loss"] == b["loss"]


def test_inversion_memory_estimate_is_the_program_s():
    """Inversion.memory_estimate(): the library's estimate (fwi::estimate_inversion) the program's
    --dry-run prints, by component: the optimizer's vectors follow the optimizer, the saved steps
    the storage dtype, and the totals are the items' sums."""
    v, src, rec = layered((30, 40)), *survey((30, 40), 2, 10)
    w = ksweep.ricker(10.0, 150, DT)
    obs = np.zeros((2, rec.shape[1], 150), np.float32)
    n = v.size

    def estimate(**kw):
        e = ksweep.Inversion(v, DH, DT, w, src, rec, obs, pml_width=6, **kw).memory_estimate()
        for place in ("device", "host", "disk"):
            assert e[place] == sum(b for _, p, b in e["items"] if p == place)
        return {what: (place, b) for what, place, b in e["items"]}

    adam = estimate(batch=2)
    assert adam["models and Adam moments"] == ("device", (4 + 2) * n * 4)
    lbfgs = estimate(optimizer="lbfgs", lbfgs_memory=3)
    assert lbfgs["models and L-BFGS's 3 correction pairs"][1] > adam["models and Adam moments"][1]
    fp16 = estimate(batch=2, storage_dtype="fp16")
    steps = [k for k in adam if k.startswith("saved steps")][0]
    steps16 = [k for k in fp16 if k.startswith("saved steps")][0]
    assert steps16 == "saved steps (boundary, fp16, device)"
    assert fp16[steps16][1] < 0.7 * adam[steps][1]  # 2 bytes a value, a scale per 64, the ring's padding
    host = estimate(batch=2, storage_location="host")
    assert [p for k, (p, _) in host.items() if k.startswith("saved steps")] == ["host"]

    # What does not fit the machine is refused before the allocation, with the program's message
    # (KSWEEP_MEMORY_AVAILABLE stands for the machine's memory, as for the program).
    os.environ["KSWEEP_MEMORY_AVAILABLE"] = str(n * 4 * 5)
    try:
        with pytest.raises(ValueError, match=r"the run does not fit in memory: .* needs about .* MiB"):
            ksweep.Inversion(v, DH, DT, w, src, rec, obs, pml_width=6, batch=2)
    finally:
        del os.environ["KSWEEP_MEMORY_AVAILABLE"]
    estimate(batch=2)  # fits again


def test_the_library_s_checks_reach_python():
    """What the program refuses, Python refuses too, by the library's own checks (they were
    accepted: NaN in the data, a NaN loss scale, order 4.9 truncated, lr <= 0, a vmax beyond the
    CFL limit, 10^6 L-BFGS pairs, L-BFGS with grad_smooth or precondition, a batch beyond the
    shots, water rows beyond the model, a transposed set_data, a NaN state, a density in g/cm^3)."""
    v = np.full((30, 40), 2000.0, np.float32)
    src, rec = np.array([[[2, 20]]]), np.array([[[2, r] for r in range(0, 40, 4)]])
    amp = ksweep.ricker(15.0, 200, DT).astype(np.float32)[None, None]
    obs = ksweep.forward(v, DH, DT, amp, src, rec, pml_width=6)
    bad = amp.copy()
    bad[0, 0, 5] = np.nan
    with pytest.raises(ValueError, match="source amplitudes holds 1 sample.*nan at shot 0, source 0, time sample 5"):
        ksweep.forward(v, DH, DT, bad, src, rec, pml_width=6)
    nan_obs = obs.copy()
    nan_obs[0, 3, 7] = np.inf
    with pytest.raises(ValueError, match="observed data holds 1 sample.*inf at shot 0, time sample 7, receiver 3"):
        ksweep.gradient(v, DH, DT, amp, src, rec, nan_obs, pml_width=6)
    with pytest.raises(ValueError, match="observed data holds"):
        ksweep.estimate_wavelet(nan_obs, obs, amp[0, 0].astype(np.float64), DT)
    with pytest.raises(ValueError, match="loss scale = nan"):
        ksweep.gradient(v, DH, DT, amp, src, rec, obs, loss_scale=float("nan"), pml_width=6)
    with pytest.raises(ValueError, match=r"propagator.pml_width = 2000 cells \(Python: pml_width; the absorbing layer's "
                                         r"top face\) exceeds the limit 1000"):
        ksweep.forward(v, DH, DT, amp, src, rec, pml_width=2000)
    with pytest.raises(ValueError, match=r"propagator.pml_right = 2000 cells \(Python: pml_width\[5\]; the absorbing"):
        ksweep.forward(v, DH, DT, amp, src, rec, pml_width=[6, 6, 6, 6, 6, 2000])
    with pytest.raises(ValueError, match="order = 4.9 must be an integer"):
        ksweep.forward(v, DH, DT, amp, src, rec, order=4.9)
    with pytest.raises(TypeError, match="order = True must be an integer"):
        ksweep.forward(v, DH, DT, amp, src, rec, order=True)
    w = amp[0, 0].astype(np.float64)
    for kw, needle in ((dict(lr=0.0), r"lr \(fwi.lr\) = 0 m/s must be > 0"),
                       (dict(lr=-1.0), r"lr \(fwi.lr\) = -1 m/s must be > 0"),
                       (dict(vmax=1e5), "vmax = 100000 m/s lets the model reach velocities"),
                       (dict(optimizer="lbfgs", lbfgs_memory=10**6), r"lbfgs_memory \(fwi.lbfgs_memory\) = 1000000 correction pairs"),
                       (dict(batch=1.5), r"batch = 1.5 must be an integer \(fwi.batch\)"),
                       (dict(optimizer="lbfgs", grad_smooth=2.0), 'optimizer = "lbfgs" needs the gradient of the '
                        'loss as it is .* but grad_smooth = 2 and precondition = false change it'),
                       (dict(optimizer="lbfgs", precondition=True), "grad_smooth = 0 and precondition = true"),
                       (dict(batch=3), r"batch = 3 shots must be in \[1, 1\], the survey's shots"),
                       (dict(water_rows=99), r"water_rows = 99 must be in \[0, nz = "),
                       (dict(vmin=2100.0), r"the starting model has velocities in \[2000, 2000\] m/s outside the "
                        r"water rows, outside the bounds the inversion keeps, \[vmin, vmax\] = \[2100, 5000\]")):
        with pytest.raises(ValueError, match=needle):
            ksweep.Inversion(v, DH, DT, w, src, rec, obs, pml_width=6, **kw)
    inv = ksweep.Inversion(v, DH, DT, w, src, rec, obs, pml_width=6)
    with pytest.raises(ValueError, match=r"observed_data has shape \(1, 200, 10\), expected"):
        inv.set_data(w, np.ascontiguousarray(obs.transpose(0, 2, 1)))
    st = inv.state()
    st["model"] = np.array(st["model"], np.float32)
    st["model"].reshape(-1)[5] = np.nan
    with pytest.raises(ValueError, match="the state's model \\(field 0\\) holds 1 sample.*nan at cell 5"):
        inv.restore(st)
    rho = np.full(v.shape, 2.0, np.float32)  # g/cm^3
    with pytest.raises(ValueError, match="is it in g/cm\\^3"):
        ksweep.Inversion(v, DH, DT, w, src, rec, obs, pml_width=6, density=rho, rho_min=1000.0, rho_max=3000.0)


def test_low_pass_of_a_cut_record_does_not_ring():
    """Records end in the middle of their arrivals. Low-passed, the cut record must match the
    longer record low-passed then cut (zeros past the end rang: 6 % of the peak at 30 Hz); a stage
    whose band holds the wavelet's whole band keeps wavelet and data to the bit."""
    dt, nt, cut = 0.002, 800, 600
    v = np.full((100, 300), 2000.0, np.float32)
    v[50:] = 2800.0
    w = ksweep.ricker(5.0, nt, dt, 0.2)
    rec = ksweep.forward(v, 25.0, dt, w[None, None].astype(np.float32), np.array([[[2, 150]]]),
                         np.array([[[4, r] for r in range(0, 300, 10)]]), order=4, pml_width=20)
    assert np.abs(rec[..., cut - 1]).max() > 0.05 * np.abs(rec).max()  # cut inside the arrivals
    for fc, tol in ((100.0, 2e-4), (30.0, 3e-3), (15.0, 1e-2)):
        want = ksweep.low_pass(rec, dt, fc)[..., :cut]
        got = ksweep.low_pass(rec[..., :cut], dt, fc)
        err = np.abs(got - want).max() / np.abs(want).max()
        assert err < tol, (fc, err)
    assert ksweep._ksweep.low_pass_keeps(w, dt, 100.0) and not ksweep._ksweep.low_pass_keeps(w, dt, 15.0)
    sw, so = ksweep.stage_data(w, rec, dt, 100.0)
    assert np.array_equal(sw, w) and np.array_equal(so, rec)
    sw, so = ksweep.stage_data(w, rec, dt, 15.0)
    assert np.array_equal(sw, ksweep.low_pass(w, dt, 15.0)) and np.array_equal(so, ksweep.low_pass(rec, dt, 15.0))


FORK_CHILD = """
import os, sys, time
import numpy as np
import ksweep
v = np.full((30, 30), 1500, np.float32)
amp = ksweep.ricker(10.0, 50, 0.001, 0.1)[None, None].astype(np.float32)
def run():
    return ksweep.forward(v, 5.0, 0.001, amp, np.array([[[10, 10]]]), np.array([[[12, 12]]]))
if sys.argv[1] == "after":
    first = run()
pid = os.fork()
if pid == 0:
    t = time.time()
    try:
        r = run()
        print("child ran", float(np.abs(r).sum()) > 0, flush=True)
    except RuntimeError as e:
        print("child refused in %.1f s:" % (time.time() - t), e, flush=True)
    os._exit(0)
os.waitpid(pid, 0)
again = run()
if sys.argv[1] == "after":
    assert np.array_equal(first, again)
print("parent ran again", flush=True)
"""


@pytest.mark.parametrize("when", ["before", "after"])
def test_a_forked_child_runs_or_is_refused_at_once(when):
    """os.fork() (multiprocessing's default start method on Linux) after the first computation:
    the child's call raises a RuntimeError naming the remedy at once (it waited forever on a
    worker thread that does not exist in the child); forked before it, the child computes."""
    r = subprocess.run([sys.executable, "-c", FORK_CHILD, when], capture_output=True, text=True, timeout=120,
                       env=dict(os.environ, OMP_NUM_THREADS="2", OMP_PROC_BIND="false"))
    assert r.returncode == 0 and "parent ran again" in r.stdout, r.stdout + r.stderr
    if when == "before":
        assert "child ran True" in r.stdout, r.stdout + r.stderr
    else:
        assert "child refused in 0." in r.stdout and "'spawn'" in r.stdout, r.stdout + r.stderr


def test_bad_smoothing_and_wavelet_arguments_are_value_errors():
    """Arguments the library refuses reach Python as ValueErrors naming them, not as a
    ZeroDivisionError or a std::length_error."""
    with pytest.raises(ValueError, match="must be > 0"):
        ksweep.ricker(0.0, 100, 0.001)
    v = np.full((20, 30), 2000.0, np.float32)
    src = np.array([[[2, 15]]])
    rec = np.array([[[2, r] for r in range(0, 30, 3)]])
    amp = ksweep.ricker(15.0, 200, DT)
    obs = np.zeros((1, 10, 200), np.float32)
    with pytest.raises(ValueError, match="grad_smooth = 1e\\+09 cells is wider than the model's largest extent"):
        ksweep.Inversion(v, DH, DT, amp, src, rec, obs, grad_smooth=1e9, pml_width=4)


def test_info():
    i = ksweep.info()
    assert i["backend"] in i["backends"] and i["concurrency"] >= 1
    assert i["version"] == ksweep.__version__ and i["kokkos"].count(".") == 2
    assert i["device"] and (i["device_id"] >= 0) == (i["backend"] == "Cuda"), i
    assert isinstance(i["gpu_aware_mpi"], bool) and i["mpi_device_data"], i


@pytest.mark.parametrize("precision", ["fp32", "fp64"])
def test_forward_equals_the_program_bit_for_bit(program, tmp_path, precision):
    cfg = tmp_path / "c.toml"
    cfg.write_text(MARMOUSI_CROP.replace("[propagator]", f'[propagator]\nprecision = "{precision}"'))
    run([program, "model", "--config", str(cfg), "--out", str(tmp_path / "m")])
    with h5py.File(tmp_path / "m" / "observed.h5") as f:
        expected = f["data"][...]  # [shot, time, receiver], float32
        src = np.stack([f["src_z"][...], f["src_x"][...]], -1)[:, None, :]
        rec = np.broadcast_to(np.stack([f["rec_z"][...], f["rec_x"][...]], -1), (len(src), f["rec_x"].size, 2))
        dt, freq, delay = f.attrs["dt"], f.attrs["freq"], f.attrs["delay"]
    v, dh = ksweep.load_model("marmousi2", decimate=2, crop_z=[0, 60], crop_x=[250, 370])
    dtype = np.float64 if precision == "fp64" else np.float32
    w = ksweep.ricker(freq, expected.shape[1], dt, delay).astype(dtype)
    d = ksweep.forward(v.astype(dtype), dh, dt, np.broadcast_to(w, (len(src), 1, w.size)), src, rec, order=4,
                       pml_width=16, batch=3)
    assert d.shape == (6, 60, 500) and d.dtype == dtype
    assert np.array_equal(d.transpose(0, 2, 1).astype(np.float32), expected)


def test_batches_and_schedules_give_the_same_bits():
    v = layered((48, 72))
    src, rec = survey(v.shape, shots=5)
    amp = amplitudes(5, 1, 300, DT)
    ref = ksweep.forward(v, DH, DT, amp, src, rec, order=8)
    for kw in [dict(batch=1), dict(batch=2), dict(schedule="batched"), dict(schedule="shots"),
               dict(schedule="cells", batch=3)]:
        assert np.array_equal(ksweep.forward(v, DH, DT, amp, src, rec, order=8, **kw), ref), kw


def dot_error(shape, dtype, order, free_surface, shots=2, sources=2, nt=160, pml=8):
    rng = np.random.default_rng(order)
    v = layered(shape, dtype)
    src, rec = survey(shape, shots=shots, sources=sources, receivers=9)
    a = rng.standard_normal((shots, sources, nt)).astype(dtype)
    d = rng.standard_normal((shots, rec.shape[1], nt)).astype(dtype)
    kw = dict(order=order, pml_width=pml, free_surface=free_surface)
    fa = ksweep.forward(v, DH, DT, a, src, rec, **kw)
    ftd = ksweep.adjoint(v, DH, DT, d, src, rec, **kw)
    lhs, rhs = np.sum(fa.astype(np.float64) * d), np.sum(a.astype(np.float64) * ftd)
    return abs(lhs - rhs) / max(abs(lhs), abs(rhs))


@pytest.mark.parametrize("order", [2, 4, 6, 8])
@pytest.mark.parametrize("free_surface", [False, True])
def test_adjoint_dot_product_2d(order, free_surface):
    assert dot_error((30, 44), np.float64, order, free_surface) <= 1e-12
    assert dot_error((30, 44), np.float32, order, free_surface) <= 1e-5


@pytest.mark.parametrize("free_surface", [False, True])
def test_adjoint_dot_product_3d(free_surface):
    assert dot_error((14, 12, 16), np.float64, 4, free_surface, nt=80, pml=5) <= 1e-12


def test_forward_3d_is_symmetric_about_the_source():
    """A 3D model invariant along y, the source in its middle plane: receivers mirrored about
    that plane record the same trace."""
    v2 = layered((16, 20))
    v3 = np.ascontiguousarray(np.repeat(v2[:, None, :], 11, axis=1))
    src = np.array([[[3, 5, 10]]])
    rec = np.array([[[4, 3, 6], [4, 7, 6]]])  # symmetric about y = 5
    d = ksweep.forward(v3, DH, DT, amplitudes(1, 1, 120, DT), src, rec, pml_width=5)
    assert d.shape == (1, 2, 120) and np.all(np.isfinite(d)) and np.abs(d).max() > 0
    assert np.allclose(d[0, 0], d[0, 1], rtol=1e-5, atol=1e-6 * np.abs(d).max())


def test_gradient_against_finite_differences():
    v = layered((32, 48), np.float64)
    src, rec = survey(v.shape, shots=2)
    amp = amplitudes(2, 1, 260, DT, np.float64)
    obs = ksweep.forward(v, DH, DT, amp, src, rec)
    v0 = (v * 0.97 + 30.0).astype(np.float64)
    kw = dict(layer_velocity=v0, pml_width=10)
    g = ksweep.gradient(v0, DH, DT, amp, src, rec, obs, **kw)
    rng = np.random.default_rng(3)
    dv = rng.standard_normal(v.shape)
    h = 1e-2
    lp = ksweep.gradient(v0 + h * dv, DH, DT, amp, src, rec, obs, **kw).loss
    lm = ksweep.gradient(v0 - h * dv, DH, DT, amp, src, rec, obs, **kw).loss
    fd, an = (lp - lm) / (2 * h), np.sum(g.grad["vp"] * dv)
    assert abs(fd - an) / abs(an) <= 1e-6, (fd, an)
    assert np.isclose(g.loss, np.sum((g.data - obs) ** 2), rtol=1e-12)
    assert np.isclose(g.loss, g.shot_losses.sum(), rtol=1e-14)


def test_gradient_every_storage_agrees():
    v = layered((32, 48))
    src, rec = survey(v.shape, shots=3)
    amp = amplitudes(3, 1, 240, DT)
    obs = ksweep.forward(v, DH, DT, amp, src, rec)
    v0 = v * np.float32(0.98)
    ref = ksweep.gradient(v0, DH, DT, amp, src, rec, obs, storage="full")
    for strategy, location, dtype, tol in [("boundary", "device", "fp32", 1e-4), ("boundary", "host", "fp32", 1e-4),
                                           ("boundary", "disk", "fp16", 5e-3), ("boundary", "device", "bf16", 2e-2),
                                           ("boundary", "host", "int8", 2e-2)]:
        g = ksweep.gradient(v0, DH, DT, amp, src, rec, obs, storage=strategy, storage_location=location,
                            storage_dtype=dtype, batch=2)
        a, b = g.grad["vp"].ravel().astype(np.float64), ref.grad["vp"].ravel().astype(np.float64)
        assert np.linalg.norm(a - b) / np.linalg.norm(b) <= tol, (strategy, location, dtype)
        assert g.loss == ref.loss


def test_non_contiguous_and_transposed_inputs():
    v = layered((30, 40))
    src, rec = survey(v.shape)
    amp = amplitudes(3, 1, 100, DT)
    ref = ksweep.forward(v, DH, DT, amp, src, rec)
    vf = np.asfortranarray(v)
    amp_nc = np.ascontiguousarray(np.concatenate([amp, amp], axis=2))[:, :, ::2]
    amp_nc[...] = amp
    assert not vf.flags.c_contiguous and not amp_nc.flags.c_contiguous
    assert np.array_equal(ksweep.forward(vf, DH, DT, amp_nc, src, rec), ref)
    # the records come back as a view of the time-major array, and go back in without a copy
    assert not ref.flags.c_contiguous and ref.transpose(0, 2, 1).flags.c_contiguous
    d = ksweep.adjoint(v, DH, DT, ref, src, rec)
    assert np.array_equal(d, ksweep.adjoint(v, DH, DT, np.ascontiguousarray(ref), src, rec))


def test_positions_in_metres():
    v = layered((30, 40))
    src, rec = survey(v.shape)
    amp = amplitudes(3, 1, 100, DT)
    ref = ksweep.forward(v, DH, DT, amp, src, rec)
    assert np.array_equal(ksweep.forward(v, DH, DT, amp, src * DH, rec * DH, location_units="m"), ref)
    # Between cells: interpolated, and the adjoint stays the forward's exact transpose.
    off_src, off_rec = src * DH + 3.0, rec * DH + np.array([1.25, -2.5])
    v64, amp64 = v.astype(np.float64), amp.astype(np.float64)
    d = ksweep.forward(v64, DH, DT, amp64, off_src, off_rec, location_units="m")
    assert not np.array_equal(d, ref) and np.all(np.isfinite(d)) and np.abs(d).max() > 0
    y = np.random.default_rng(3).standard_normal(d.shape)
    a = ksweep.adjoint(v64, DH, DT, y, off_src, off_rec, location_units="m")
    lhs, rhs = float(np.sum(d * y)), float(np.sum(amp64 * a))
    assert abs(lhs - rhs) <= 1e-12 * abs(lhs), (lhs, rhs)
    with pytest.raises(ValueError, match=r"source 0 of shot 0 at .* is outside the model grid"):
        ksweep.forward(v, DH, DT, amp, src * DH - 50.0, rec * DH, location_units="m")


def errors_case():
    v = layered((30, 40))
    src, rec = survey(v.shape)
    return v, src, rec, amplitudes(3, 1, 100, DT)


@pytest.mark.parametrize("change, error, match", [
    (dict(v=lambda v: v.astype(np.int32)), TypeError, "v has dtype int32"),
    (dict(v=lambda v: v.astype(np.float16)), TypeError, "float32 or float64"),
    (dict(amp=lambda a: a.astype(np.float64)), TypeError, "source_amplitudes has dtype float64, v has float32"),
    (dict(v=lambda v: v[0]), ValueError, r"shape \(40,\)"),
    (dict(amp=lambda a: a[:2]), ValueError, r"source_amplitudes has shape \(2, 1, 100\), expected"),
    (dict(src=lambda s: s[..., :1]), ValueError, "source_locations has shape"),
    (dict(v=lambda v: np.where(np.arange(40) == 7, np.nan, v).astype(np.float32)), ValueError, "velocity at cell 7 is nan: velocities must be finite"),
    (dict(v=lambda v: -v), ValueError, r"velocity at cell 0 is -\d+.*must be finite and > 0"),
    (dict(src=lambda s: s + np.array([0, 100])), ValueError, r"source 0 of shot 0 at \(z, x\) = \(2, 104\) cells = .* is outside"),
    (dict(rec=lambda r: r - np.array([5, 0])), ValueError, r"receiver 0 of shot 0 at \(z, x\) = \(-2, 2\) cells = .* is outside"),
    (dict(order=5), ValueError, "order"),
    (dict(pml_width=-1), ValueError, "pml_width"),
    (dict(batch=-2), ValueError, "batch = -2"),
    (dict(dt=0.05), ValueError, "CFL|stab"),
])
def test_bad_input_is_a_clear_error(change, error, match):
    v, src, rec, amp = errors_case()
    kw = {}
    dt = DT
    for k, f in change.items():
        if k == "v":
            v = f(v)
        elif k == "amp":
            amp = f(amp)
        elif k == "src":
            src = f(src)
        elif k == "rec":
            rec = f(rec)
        elif k == "dt":
            dt = f
        else:
            kw[k] = f
    with pytest.raises(error, match=match):
        ksweep.forward(v, DH, dt, amp, src, rec, **kw)


def test_bad_storage_names_the_allowed_values():
    v, src, rec, amp = errors_case()
    with pytest.raises(ValueError, match="fp12.*fp32"):
        ksweep.gradient(v, DH, DT, amp, src, rec, ksweep.forward(v, DH, DT, amp, src, rec), storage_dtype="fp12")


def test_the_gil_is_released():
    v = layered((120, 160))
    src, rec = survey(v.shape, shots=8)
    amp = amplitudes(8, 1, 3000, DT)
    done = threading.Event()
    ticks = 0

    def work():
        ksweep.forward(v, DH, DT, amp, src, rec)
        done.set()

    t = threading.Thread(target=work)
    t0 = time.perf_counter()
    t.start()
    while not done.is_set():
        ticks += 1
        time.sleep(0.001)
    t.join()
    elapsed = time.perf_counter() - t0
    # held, the GIL would let this thread wake a few times; released, about every millisecond
    assert elapsed > 0.2 and ticks > 0.3 * elapsed / 0.001, (ticks, elapsed)


def test_ctrl_c_stops_at_the_end_of_a_batch(tmp_path):
    # 400 one-shot batches: 10-20 s on 2 cores uninterrupted, far longer than the second before
    # Ctrl-C on any machine; a batch takes tens of milliseconds.
    script = tmp_path / "long.py"
    script.write_text(
        "import sys, time; sys.path.insert(0, %r)\n" % os.path.dirname(__file__) +
        "import ksweep\nfrom conftest import layered, survey, amplitudes\n"
        "v = layered((120, 200)); src, rec = survey(v.shape, shots=400); amp = amplitudes(400, 1, 1200, 0.001)\n"
        "print('started', flush=True); t0 = time.time()\n"
        "try:\n    ksweep.forward(v, 10.0, 0.001, amp, src, rec, batch=1)\n"
        "except KeyboardInterrupt:\n    print('interrupted after %.1f s' % (time.time() - t0), flush=True); sys.exit(3)\n"
        "print('finished', flush=True)\n")
    env = dict(os.environ, OMP_NUM_THREADS="2")
    p = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True, env=env)
    assert p.stdout.readline().strip() == "started"
    time.sleep(1.0)
    p.send_signal(signal.SIGINT)
    t0 = time.time()
    out, _ = p.communicate(timeout=120)
    assert p.returncode == 3 and "interrupted" in out, out
    assert time.time() - t0 < 10, "the run did not stop at the end of a batch"


STAGES = "stages = [{max_freq = 3.0, iterations = 2}, {max_freq = 6.0, iterations = 2}]\n"


@pytest.mark.parametrize("stages", [False, True])
def test_inversion_gives_the_program_s_loss_history(program, tmp_path, stages):
    """The example's Inversion against the program on the same config: the same losses to the
    bit, with frequency stages too (one workflow in the library for both)."""
    cfg = tmp_path / "c.toml"
    cfg.write_text(MARMOUSI_CROP.replace("iterations = 3\n", STAGES) if stages else MARMOUSI_CROP)
    run([program, "fwi", "--config", str(cfg), "--out", str(tmp_path / "p")])
    hist = json.load(open(tmp_path / "p" / "summary.json"))["iterations"]
    losses = [h["loss"] for h in hist]
    example = os.path.join(SOURCE_DIR, "share", "examples", "python", "marmousi_fwi.py")
    run([sys.executable, example, str(cfg), "--out", str(tmp_path / "py")], cwd=tmp_path)
    py = json.load(open(tmp_path / "py" / "history.json"))
    assert len(losses) == (4 if stages else 3) and [h["loss"] for h in py] == losses, (py, losses)
    assert [h["stage"] for h in py] == [h.get("stage", 0) for h in hist] == ([1, 1, 2, 2] if stages else [0] * 3)
    assert os.path.getsize(tmp_path / "py" / "models.png") > 10000


def test_stages_restore_inside_and_across_a_stage():
    """Inversion(stages=...): a state restored inside a stage or at a stage's first iteration
    takes the uninterrupted run's steps (the stage's data and Adam's count from the stage's
    start), and the stages are those of set_data() and restart_optimizer() by hand."""
    v = layered((32, 48))
    src, rec = survey(v.shape, shots=4)
    w = ksweep.ricker(12.0, 300, DT, 0.12)
    obs = ksweep.forward(v, DH, DT, np.broadcast_to(w.astype(np.float32), (4, 1, 300)), src, rec)
    v0 = (v * 0.97).astype(np.float32)
    kw = dict(true_model=v, batch=2, seed=3, lr=5.0, stages=[(2, 8.0), (2, 14.0)])
    a = ksweep.Inversion(v0, DH, DT, w, src, rec, obs, **kw)
    whole = a.run()
    assert [h["stage"] for h in whole] == [1, 1, 2, 2] and a.iteration == 4
    w1, obs1 = ksweep.stage_data(w, obs, DT, 8.0)
    by_hand = ksweep.Inversion(v0, DH, DT, w1, src, rec, obs1, **{k: x for k, x in kw.items() if k != "stages"})
    hand = by_hand.run(2)
    by_hand.set_data(*ksweep.stage_data(w, obs, DT, 14.0))
    by_hand.restart_optimizer()
    hand += by_hand.run(4)
    assert [h["loss"] for h in hand] == [h["loss"] for h in whole]
    assert np.array_equal(by_hand.model, a.model)
    for at in (1, 2, 3):  # inside stage 1, at stage 2's first iteration, inside stage 2
        b = ksweep.Inversion(v0, DH, DT, w, src, rec, obs, **kw)
        b.run(at)
        s = b.state()
        s.pop("optimizer_steps")  # counted from the stage's start
        c = ksweep.Inversion(v0, DH, DT, w, src, rec, obs, **kw)
        c.restore(s)
        rest = c.run()
        assert [h["loss"] for h in rest] == [h["loss"] for h in whole[at:]], at
        assert np.array_equal(c.model, a.model), at
    with pytest.raises(ValueError, match=r"stages\[1\].max_freq = 0 Hz must be in \(0, 500\) Hz, below the Nyquist"):
        ksweep.Inversion(v0, DH, DT, w, src, rec, obs, stages=[(2, 8.0), (1, 0.0)])
    with pytest.raises(ValueError, match=r"stages\[0\].max_freq = 600 Hz must be in \(0, 500\) Hz"):
        ksweep.Inversion(v0, DH, DT, w, src, rec, obs, stages=[(2, 600.0)])
    with pytest.raises(ValueError, match=r"stages\[0\] = \(2,\) is not an \(iterations, max_freq\) pair"):
        ksweep.Inversion(v0, DH, DT, w, src, rec, obs, stages=[(2,)])


def _small_inversion():
    """A small inversion problem: the true model, the start, the wavelet, the survey and its data."""
    v = layered((32, 48))
    src, rec = survey(v.shape, shots=4)
    w = ksweep.ricker(12.0, 240, DT)
    obs = ksweep.forward(v, DH, DT, np.broadcast_to(w.astype(np.float32), (4, 1, 240)), src, rec)
    return v, (v * 0.97).astype(np.float32), w, src, rec, obs


def test_inversion_sums_the_illuminations_when_asked():
    """An inversion's gradients sum the illuminations only when asked (set_illuminations) or for
    preconditioning: the losses and the model are the same bits either way; images() holds them
    (non-zero) after an iteration that summed them and None after one that did not."""
    v, v0, w, src, rec, obs = _small_inversion()
    kw = dict(true_model=v, batch=2, seed=5, lr=5.0)
    plain = ksweep.Inversion(v0, DH, DT, w, src, rec, obs, **kw)
    assert plain.images()["illum_src"] is None  # no iteration yet
    a = plain.run(3)
    im = plain.images()
    assert im["illum_src"] is None and im["illum_rec"] is None and np.abs(im["grad"]).max() > 0
    assert not plain._inv.images()["illum_src"].any()  # the library did not sum them
    asked = ksweep.Inversion(v0, DH, DT, w, src, rec, obs, **kw)
    asked.set_illuminations(True)
    b = asked.run(2)
    im = asked.images()
    assert im["illum_src"].max() > 0 and im["illum_rec"].max() > 0
    asked.set_illuminations(False)
    b += asked.run(3)
    assert asked.images()["illum_src"] is None
    assert [r["loss"] for r in a] == [r["loss"] for r in b]
    assert np.array_equal(plain.model, asked.model)
    pre = ksweep.Inversion(v0, DH, DT, w, src, rec, obs, precondition=True, **kw)
    pre.step()
    assert pre.images()["illum_src"].max() > 0
    with pytest.raises(TypeError, match="must be a bool"):
        plain.set_illuminations("yes")


def test_inversion_state_restores_the_same_bits():
    v, v0, w, src, rec, obs = _small_inversion()
    kw = dict(true_model=v, batch=2, seed=5, lr=5.0)
    a = ksweep.Inversion(v0, DH, DT, w, src, rec, obs, **kw)
    a.run(2)
    s = a.state()
    third = a.step()
    b = ksweep.Inversion(v0, DH, DT, w, src, rec, obs, **kw)
    b.restore(s)
    r = b.step()
    assert r["loss"] == third["loss"] and r["shots"] == third["shots"] and r["rmse"] == third["rmse"]
    assert np.array_equal(a.model, b.model)
    assert a.iteration == b.iteration == 3
    hist = ksweep.Inversion(v0, DH, DT, w, src, rec, obs, **kw).run(6)
    assert hist[-1]["loss"] < hist[0]["loss"] and hist[-1]["rmse"] < hist[0]["rmse"]
    assert set(a.images()) == {"grad", "illum_src", "illum_rec"}
    # L-BFGS: the state carries its correction pairs, gradient and loss.
    kw = dict(true_model=v, optimizer="lbfgs", lr=5.0)
    a = ksweep.Inversion(v0, DH, DT, w, src, rec, obs, **kw)
    a.run(2)
    s = a.state()
    assert s["lbfgs"]["pairs"] >= 1 and s["lbfgs"]["s"].size == s["lbfgs"]["pairs"] * v.size
    later = a.run(2)
    b = ksweep.Inversion(v0, DH, DT, w, src, rec, obs, **kw)
    b.restore(s)
    again = b.run(2)
    assert [h["loss"] for h in again] == [h["loss"] for h in later]
    assert [h["evaluations"] for h in again] == [h["evaluations"] for h in later]
    assert np.array_equal(a.model, b.model)


def test_estimated_wavelet_and_stages():
    """A non-Ricker wavelet comes back from data modelled with it (ksweep.estimate_wavelet), and an
    inversion in two frequency stages (low_pass, set_data, restart_optimizer) lowers the loss of
    each stage's data."""
    v = layered((32, 48))
    src, rec = survey(v.shape, shots=4)
    nt = 700  # every arrival within the record: a record cut while it carries signal breaks the convolution
    t = np.arange(nt) * DT
    gabor = np.sin(2 * np.pi * 15.0 * (t - 0.15)) * np.exp(-((t - 0.15) / 0.04) ** 2)
    ref = ksweep.ricker(15.0, nt, DT)
    obs = ksweep.forward(v, DH, DT, np.broadcast_to(gabor.astype(np.float32), (4, 1, nt)), src, rec)
    syn = ksweep.forward(v, DH, DT, np.broadcast_to(ref.astype(np.float32), (4, 1, nt)), src, rec)
    w, res, res_ref = ksweep.estimate_wavelet(obs, syn, ref, DT, 1e-6)
    assert np.linalg.norm(w - gabor) < 1e-3 * np.linalg.norm(gabor), np.linalg.norm(w - gabor) / np.linalg.norm(gabor)
    assert res < 1e-5 < 0.5 < res_ref
    low = ksweep.low_pass(obs, DT, 10.0)
    assert low.shape == obs.shape and np.abs(low).max() < np.abs(obs).max()
    inv = ksweep.Inversion((v * 0.97).astype(np.float32), DH, DT, ksweep.low_pass(w, DT, 10.0), src, rec, low,
                           true_model=v, batch=4, lr=5.0)
    first = inv.run(2)
    inv.set_data(w, obs)
    inv.restart_optimizer()
    second = inv.run(4)  # until 4 iterations in all
    assert first[-1]["loss"] < first[0]["loss"] and second[-1]["loss"] < second[0]["loss"]
    assert inv.state()["optimizer_steps"] == 2


def test_inversion_errors():
    v = layered((32, 48))
    src, rec = survey(v.shape, shots=2)
    w = ksweep.ricker(12.0, 100, DT)
    obs = np.zeros((2, rec.shape[1], 100), np.float32)
    with pytest.raises(ValueError, match="one signature"):
        ksweep.Inversion(v, DH, DT, np.stack([w, w]), src, rec, obs)
    with pytest.raises(ValueError, match="observed_data has shape"):
        ksweep.Inversion(v, DH, DT, w, src, rec, obs[:, :5])
    with pytest.raises(ValueError, match="optimizer"):
        ksweep.Inversion(v, DH, DT, w, src, rec, obs, optimizer="sgd")


def test_a_signal_handler_that_frees_ksweep_objects_does_not_deadlock(tmp_path):
    """A Python signal handler runs while the main thread waits for the worker; an object it
    frees is freed at the end of the running call, and the call completes."""
    script = tmp_path / "handler.py"
    script.write_text(
        "import signal, sys, time; sys.path.insert(0, %r)\n" % os.path.dirname(__file__) +
        "import numpy as np, ksweep\nfrom conftest import layered, survey, amplitudes\n"
        "v = layered((120, 200)); src, rec = survey(v.shape, shots=8); amp = amplitudes(8, 1, 1500, 0.001)\n"
        "s = ksweep._survey(v, src, rec, 10.0, 'cells')\n"
        "held = [ksweep._modeling(s, 10.0, 0.001, 1500, order=4, pml_width=20, pml_reflection=1e-3, pml_freq=25.0,"
        " free_surface=False, batch=0, schedule='auto')]\n"
        "signal.signal(signal.SIGINT, lambda *a: held.clear())\n"
        "print('started', flush=True)\n"
        "for i in range(100):  # until the handler has run (almost surely during a forward)\n"
        "    d = ksweep.forward(v, 10.0, 0.001, amp, src, rec, batch=2)\n"
        "    if not held:\n"
        "        break\n"
        "print('finished', len(held), d.shape, flush=True)\n")
    p = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True,
                         env=dict(os.environ, OMP_NUM_THREADS="2"))
    assert p.stdout.readline().strip() == "started"
    time.sleep(0.5)
    p.send_signal(signal.SIGINT)
    out, _ = p.communicate(timeout=120)
    assert p.returncode == 0 and "finished 0 (8, 17, 1500)" in out, out


def test_the_readme_s_first_example_runs_as_written(tmp_path):
    readme = open(os.path.join(SOURCE_DIR, "README.md")).read()
    section = readme[readme.index("## From Python"):]
    code = section[section.index("```python") + len("```python"):]
    code = code[:code.index("```")]
    (tmp_path / "example.py").write_text(code)
    r = run([sys.executable, str(tmp_path / "example.py")], cwd=tmp_path)
    lines = r.stdout.strip().splitlines()
    assert len(lines) == 6 and lines[-1].startswith("5 "), r.stdout


def density_of(v, dtype=np.float32):
    """A density with a step and a lens (kg/m^3): variable density, unlike Gardner's smooth map."""
    rho = (310.0 * np.asarray(v, np.float64) ** 0.25)
    rho[rho.shape[0] // 2:] += 150.0
    return rho.astype(dtype)


@pytest.mark.parametrize("free_surface", [False, True])
def test_variable_density_adjoint_and_gradients(free_surface):
    """With rho: the adjoint's dot product, and the gradients for vp and rho against central
    finite differences (float64, the layer held fixed)."""
    v = layered((30, 44), np.float64)
    rho = density_of(v, np.float64)
    src, rec = survey(v.shape, shots=2, sources=2, receivers=9)
    rng = np.random.default_rng(11)
    a = rng.standard_normal((2, 2, 160))
    d = rng.standard_normal((2, rec.shape[1], 160))
    kw = dict(order=4, pml_width=8, free_surface=free_surface, rho=rho)
    lhs = np.sum(ksweep.forward(v, DH, DT, a, src, rec, **kw) * d)
    rhs = np.sum(a * ksweep.adjoint(v, DH, DT, d, src, rec, **kw))
    assert abs(lhs - rhs) <= 1e-12 * max(abs(lhs), abs(rhs))
    amp = amplitudes(2, 2, 220, DT, np.float64)
    obs = ksweep.forward(v, DH, DT, amp, src, rec, **kw)
    v0, rho0 = v * 0.98 + 20.0, rho * 0.97
    fixed = dict(order=4, pml_width=8, free_surface=free_surface, layer_velocity=v0, layer_density=rho0)
    g = ksweep.gradient(v0, DH, DT, amp, src, rec, obs, rho=rho0, **fixed)
    assert set(g.grad) == {"vp", "rho"}
    h = 1e-2
    for name, dx in (("vp", rng.standard_normal(v.shape)), ("rho", rng.standard_normal(v.shape))):
        def loss(s):
            vv, rr = (v0 + s * dx, rho0) if name == "vp" else (v0, rho0 + s * dx)
            return ksweep.gradient(vv, DH, DT, amp, src, rec, obs, rho=rr, **fixed).loss
        fd, an = (loss(h) - loss(-h)) / (2 * h), np.sum(g.grad[name] * dx)
        assert abs(fd - an) <= 1e-6 * abs(an), (name, fd, an)


def test_variable_density_inversion_and_errors():
    v = layered((32, 48))
    rho = density_of(v)
    src, rec = survey(v.shape, shots=4)
    w = ksweep.ricker(12.0, 240, DT)
    obs = ksweep.forward(v, DH, DT, np.broadcast_to(w.astype(np.float32), (4, 1, 240)), src, rec, rho=rho)
    rho0 = np.full_like(rho, float(rho.mean()))
    kw = dict(true_model=v, batch=4, seed=5, lr=5.0, density=rho0, true_density=rho, invert=("vp", "rho"),
              rho_min=1500.0, rho_max=3000.0, lr_rho=10.0)
    v0 = (v * 0.97).astype(np.float32)
    a = ksweep.Inversion(v0, DH, DT, w, src, rec, obs, **kw)
    first = a.step()
    a.step()
    s = a.state()
    assert s["density"].shape == v.shape and s["first"].size == 2 * v.size
    third = a.step()
    b = ksweep.Inversion(v0, DH, DT, w, src, rec, obs, **kw)
    b.restore(s)
    assert b.step()["loss"] == third["loss"]
    assert np.array_equal(a.density, b.density) and np.array_equal(a.model, b.model)
    last = a.run(8)[-1]
    assert last["loss"] < first["loss"] and np.isfinite(last["rmse_density"])
    assert set(a.images()) == {"grad", "illum_src", "illum_rec", "grad_rho"}
    with pytest.raises(ValueError, match="need a density"):
        ksweep.Inversion(v, DH, DT, w, src, rec, obs, invert=("vp", "rho"))
    with pytest.raises(ValueError, match="eta"):
        ksweep.Inversion(v, DH, DT, w, src, rec, obs, **dict(kw, invert=("vp", "eta")))
    with pytest.raises(ValueError, match="density at cell 5"):
        bad = rho0.copy()
        bad.flat[5] = 0.0
        ksweep.Inversion(v, DH, DT, w, src, rec, obs, **dict(kw, density=bad))
    with pytest.raises(ValueError, match="rho has shape"):
        ksweep.forward(v, DH, DT, np.broadcast_to(w.astype(np.float32), (4, 1, 240)), src, rec, rho=rho[:, :5])
    # A reflecting edge (no layer) is constant density's: the face named as the caller set it.
    amp = np.broadcast_to(w.astype(np.float32), (4, 1, 240))
    with pytest.raises(ValueError, match=r"propagator.pml_width = 0 cells \(Python: pml_width; the absorbing layer's "
                                         r"top face\) is too small for variable density.*constant density only"):
        ksweep.forward(v, DH, DT, amp, src, rec, rho=rho, pml_width=0)
    with pytest.raises(ValueError, match=r"propagator.pml_left = 0 cells \(Python: pml_width\[4\]"):
        ksweep.forward(v, DH, DT, amp, src, rec, rho=rho, pml_width=[8, 8, 8, 8, 0, 8])


def test_pml_velocity_is_the_damping_profiles_velocity():
    # None (the default) is the model's largest velocity; another velocity changes the damping.
    v = layered((40, 56), dtype=np.float64)
    src, rec = survey(v.shape, shots=2)
    amp = amplitudes(2, 1, 240, DT, dtype=np.float64)
    ref = ksweep.forward(v, DH, DT, amp, src, rec, order=4)
    assert np.array_equal(ksweep.forward(v, DH, DT, amp, src, rec, order=4, pml_velocity=float(v.max())), ref)
    other = ksweep.forward(v, DH, DT, amp, src, rec, order=4, pml_velocity=2.0 * float(v.max()))
    assert not np.array_equal(other, ref)
    g = ksweep.gradient(v, DH, DT, amp, src, rec, ref, order=4, pml_velocity=2.0 * float(v.max()))
    assert g.loss > 0
    for bad in (-1.0, 0.0, float("nan")):
        with pytest.raises(ValueError, match="pml_velocity"):
            ksweep.forward(v, DH, DT, amp, src, rec, pml_velocity=bad)


def test_sources_alone_or_receivers_alone():
    """A shot of sources without receivers, or receivers without sources: exact results, not a
    refusal (the wave equation from rest, without a source, stays at rest)."""
    v = np.full((20, 24), 2000.0, np.float32)
    nt = 120
    amp = ksweep.ricker(20.0, nt, DT).astype(np.float32)[None, None]
    src, rec = np.array([[[5, 10]]]), np.array([[[5, 4], [6, 18]]])
    none_rec, none_src = np.zeros((1, 0, 2), int), np.zeros((1, 0, 2), int)
    kw = dict(pml_width=6)
    d = ksweep.forward(v, DH, DT, amp, src, none_rec, **kw)
    assert d.shape == (1, 0, nt)
    silent = ksweep.forward(v, DH, DT, np.zeros((1, 0, nt), np.float32), none_src, rec, **kw)
    assert silent.shape == (1, 2, nt) and not silent.any()
    a = ksweep.adjoint(v, DH, DT, np.zeros((1, 0, nt), np.float32), src, none_rec, **kw)
    assert a.shape == (1, 1, nt) and not a.any()
    obs = ksweep.forward(v, DH, DT, amp, src, rec, **kw)
    assert ksweep.adjoint(v, DH, DT, obs, none_src, rec, **kw).shape == (1, 0, nt)
    # Without receivers: loss 0, gradient 0, the source illumination of the forward wavefield
    # (the run with receivers whose data are its own synthetic data has the same).
    g = ksweep.gradient(v, DH, DT, amp, src, none_rec, np.zeros((1, 0, nt), np.float32), **kw)
    same = ksweep.gradient(v, DH, DT, amp, src, rec, obs, **kw)
    assert g.loss == 0 and not g.grad["vp"].any() and g.data.shape == (1, 0, nt)
    assert np.array_equal(g.illum_src, same.illum_src) and g.illum_src.any() and not g.illum_rec.any()
    # Without sources: the synthetic data are zero, the loss is the observed data's energy, the
    # gradient zero.
    g = ksweep.gradient(v, DH, DT, np.zeros((1, 0, nt), np.float32), none_src, rec, obs, **kw)
    assert not g.data.any() and not g.grad["vp"].any() and not g.illum_src.any() and g.illum_rec.any()
    assert np.isclose(g.loss, float(np.sum(obs.astype(np.float64) ** 2)), rtol=1e-6)


@pytest.mark.parametrize("free_surface", [False, True])
def test_born_is_the_transpose_of_the_velocity_gradient(free_surface):
    """<born(dv), d> = <dv, J^T d>, J^T d from `gradient` (obs = forward - d / 2: dL/dv = J^T d),
    in float64, the perturbation on every cell (the layer a copy of v's edges)."""
    rng = np.random.default_rng(5)
    v = layered((30, 44), np.float64)
    src, rec = survey(v.shape, shots=2, receivers=9)
    amp = amplitudes(2, 1, 200, DT, np.float64)
    kw = dict(order=8, pml_width=8, free_surface=free_surface)
    dv = rng.uniform(-30, 30, v.shape)
    d = rng.standard_normal((2, rec.shape[1], 200))
    b = ksweep.born(v, DH, DT, amp, src, rec, dv, **kw)
    assert b.shape == d.shape and b.dtype == np.float64
    obs = ksweep.forward(v, DH, DT, amp, src, rec, **kw) - 0.5 * d
    g = ksweep.gradient(v, DH, DT, amp, src, rec, obs, **kw).grad["vp"]
    lhs, rhs = np.sum(b * d), np.sum(dv * g)
    assert abs(lhs - rhs) / abs(lhs) <= 1e-10, (lhs, rhs)


def test_born_is_the_derivative_of_forward():
    """The central difference of two forward modellings converges to born at second order."""
    v = layered((32, 40), np.float64)
    src, rec = survey(v.shape, shots=2, receivers=11)
    amp = amplitudes(2, 1, 220, DT, np.float64)
    dv = 20.0 + 10.0 * np.random.default_rng(2).uniform(-1, 1, v.shape)
    kw = dict(layer_velocity=v, pml_width=10)
    b = ksweep.born(v, DH, DT, amp, src, rec, dv, **kw)

    def error(h):
        fd = (ksweep.forward(v + h * dv, DH, DT, amp, src, rec, **kw)
              - ksweep.forward(v - h * dv, DH, DT, amp, src, rec, **kw)) / (2 * h)
        return np.linalg.norm(fd - b) / np.linalg.norm(b)
    e1, e2 = error(0.4), error(0.2)
    assert 3.5 < e1 / e2 < 4.5 and e2 < 1e-3, (e1, e2)


def test_born_checks_its_scatter():
    v = layered((20, 24))
    src, rec = survey(v.shape, shots=1, receivers=3)
    amp = amplitudes(1, 1, 40, DT)
    with pytest.raises(ValueError, match=r"Born modelling: the velocity perturbation \(scatter\) is \[20\]\[23\], the grid \[20\]\[24\]"):
        ksweep.born(v, DH, DT, amp, src, rec, np.zeros((20, 23), np.float32))
    with pytest.raises(TypeError, match="scatter has dtype float64, v has float32"):
        ksweep.born(v, DH, DT, amp, src, rec, np.zeros((20, 24)))
    bad = np.zeros((20, 24), np.float32)
    bad[3, 4] = np.inf
    with pytest.raises(ValueError, match=r"velocity perturbation \(scatter\).*cell 76"):
        ksweep.born(v, DH, DT, amp, src, rec, bad)


def test_rtm_and_lsrtm_image_two_reflectors():
    """A smooth background and two reflectors: RTM's correlation is the transpose of born applied
    to the reflected data; LSRTM's misfit falls each iteration and its image correlates with the
    true perturbation better than RTM's."""
    nz, nx, nt = 36, 56, 420
    v0 = np.repeat((2000.0 + 15.0 * np.arange(nz))[:, None], nx, axis=1)
    dv = np.zeros_like(v0)
    dv[16:18] = 150.0
    dv[26, :] = -120.0
    src, rec = survey(v0.shape, shots=3, receivers=40, z_src=1, z_rec=1)
    amp = amplitudes(3, 1, nt, DT, np.float64, freq=20.0)
    kw = dict(order=8, pml_width=12)
    data = ksweep.forward(v0 + dv, DH, DT, amp, src, rec, **kw)
    r = ksweep.rtm(v0, DH, DT, amp, src, rec, data, layer_velocity=v0, **kw)
    assert r.image.shape == v0.shape and r.illumination.min() > 0
    ls = ksweep.lsrtm(v0, DH, DT, amp, src, rec, data, iterations=6, layer_velocity=v0, **kw)
    assert ls.misfit.shape == (6,) and np.all(np.diff(ls.misfit) < 0) and ls.misfit[-1] < 0.6, ls.misfit
    corr = [np.corrcoef(a.ravel(), dv.ravel())[0, 1] for a in (r.correlation, r.image, ls.image)]
    assert corr[2] > max(corr[:2]) + 0.1, corr
    # The correlation is J^T of the reflected data: <born(p), d_r> = <p, J^T d_r>.
    d_r = data - ksweep.forward(v0, DH, DT, amp, src, rec, layer_velocity=v0, **kw)
    p = np.random.default_rng(1).uniform(-1, 1, v0.shape)
    b = ksweep.born(v0, DH, DT, amp, src, rec, p, layer_velocity=v0, **kw)
    assert abs(np.sum(b * d_r) - np.sum(p * r.correlation)) <= 1e-10 * abs(np.sum(b * d_r))
    with pytest.raises(ValueError, match="iterations = 0 must be >= 1"):
        ksweep.lsrtm(v0, DH, DT, amp, src, rec, data, iterations=0)
    # The plain cross-correlation condition: the same backward pass (the same illumination), and
    # an image of the reflectors as strong as the Born adjoint's, of the opposite polarity (the
    # second time difference of a band-limited wavefield is about -w^2 dt^2 times it).
    cc = ksweep.rtm(v0, DH, DT, amp, src, rec, data, condition="cross-correlation", layer_velocity=v0, **kw)
    assert np.array_equal(cc.illumination, r.illumination) and not np.allclose(cc.correlation, r.correlation)
    corr_cc = np.corrcoef(cc.image.ravel(), dv.ravel())[0, 1]
    assert corr_cc < -0.8 * corr[1], (corr_cc, corr)
    with pytest.raises(ValueError, match=r'condition = "plain" is not allowed \(allowed: born, cross-correlation\)'):
        ksweep.rtm(v0, DH, DT, amp, src, rec, data, condition="plain", **kw)


def test_lsrtm_with_the_fp16_store_follows_fp32():
    """The gradient's lossy fp16 store (the shipped example's kind of setting) under LSRTM: the
    misfit falls at every iteration and stays within 1e-3 of the fp32 store's."""
    nz, nx, nt = 36, 56, 420
    v0 = np.repeat((2000.0 + 15.0 * np.arange(nz))[:, None], nx, axis=1).astype(np.float32)
    dv = np.zeros_like(v0)
    dv[16:18] = 150.0
    src, rec = survey(v0.shape, shots=3, receivers=40, z_src=1, z_rec=1)
    amp = amplitudes(3, 1, nt, DT, np.float32, freq=20.0)
    data = ksweep.forward(v0 + dv, DH, DT, amp, src, rec, order=8, pml_width=12)
    kw = dict(order=8, pml_width=12, layer_velocity=v0, iterations=4)
    m32 = ksweep.lsrtm(v0, DH, DT, amp, src, rec, data, storage_dtype="fp32", **kw).misfit
    m16 = ksweep.lsrtm(v0, DH, DT, amp, src, rec, data, storage_dtype="fp16", **kw).misfit
    assert np.all(np.diff(m16) < 0) and np.max(np.abs(m16 - m32)) < 1e-3, (m16, m32)
