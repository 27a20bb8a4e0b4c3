"""The package's modelling and imaging calls over MPI ranks: run by ctest as
`mpirun -n 3 python3 mpi_imaging.py` (python_mpi_calls). With `mpi=True` forward, adjoint,
gradient, born, rtm and lsrtm share the shots over the ranks (5 shots: 2, 2 and 1) and every rank
returns the bits of the same call made by one process alone; with `domains=[N]` the model is split
over the N ranks as well (one shot group), on fp32 and fp16 storage, and with reflecting edges. A split refused by the
library is refused on every rank with the same message; ranks given different models show that
the shots were shared."""

import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from conftest import layered, survey  # noqa: E402

import ksweep  # noqa: E402

DT, DH, NT, SHOTS = 0.001, 10.0, 260, 5


def case():
    v = layered((36, 72))
    src, rec = survey(v.shape, shots=SHOTS, receivers=24)
    w = np.broadcast_to(ksweep.ricker(15.0, NT, DT).astype(np.float32), (SHOTS, 1, NT)).copy()
    return v, ksweep.gaussian_smooth(v, 3.0).astype(np.float32), w, src, rec


def same(a, b, what):
    a, b = np.asarray(a), np.asarray(b)
    assert a.shape == b.shape, f"{what}: shapes {a.shape} and {b.shape}"
    n = int(np.count_nonzero(a != b))
    assert n == 0, f"rank {rank}: {what}: {n} of {a.size} values differ (max {np.abs(a - b).max():.3e})"


def calls(split, storage_dtype, pml_width=10):
    """Every call, alone (mpi=False) and collective (mpi=True, or the split `domains`)."""
    v, v0, w, src, rec = case()
    kw = dict(order=8, pml_width=pml_width, batch=1)
    par = dict(mpi=True) if split is None else dict(domains=split)
    where = "shots over the ranks" if split is None else f"domains {split}"
    d = ksweep.forward(v, DH, DT, w, src, rec, **kw)
    same(ksweep.forward(v, DH, DT, w, src, rec, **kw, **par), d, f"{where}: forward")
    same(ksweep.adjoint(v0, DH, DT, d, src, rec, **kw, **par), ksweep.adjoint(v0, DH, DT, d, src, rec, **kw),
         f"{where}: adjoint")
    g1 = ksweep.gradient(v0, DH, DT, w, src, rec, d, storage_dtype=storage_dtype, **kw)
    gn = ksweep.gradient(v0, DH, DT, w, src, rec, d, storage_dtype=storage_dtype, **kw, **par)
    assert g1.loss == gn.loss, (g1.loss, gn.loss)
    for name, a, b in (("grad", g1.grad["vp"], gn.grad["vp"]), ("illum_src", g1.illum_src, gn.illum_src),
                       ("illum_rec", g1.illum_rec, gn.illum_rec), ("data", g1.data, gn.data),
                       ("shot_losses", g1.shot_losses, gn.shot_losses)):
        same(b, a, f"{where}, {storage_dtype}: gradient's {name}")
    scatter = (v - v0).astype(np.float32)
    same(ksweep.born(v0, DH, DT, w, src, rec, scatter, **kw, **par), ksweep.born(v0, DH, DT, w, src, rec, scatter, **kw),
         f"{where}: born")
    r1 = ksweep.rtm(v0, DH, DT, w, src, rec, d, storage_dtype=storage_dtype, **kw)
    rn = ksweep.rtm(v0, DH, DT, w, src, rec, d, storage_dtype=storage_dtype, **kw, **par)
    for name in ("image", "correlation", "illumination"):
        same(getattr(rn, name), getattr(r1, name), f"{where}, {storage_dtype}: rtm's {name}")
    c1 = ksweep.rtm(v0, DH, DT, w, src, rec, d, condition="cross-correlation", storage_dtype=storage_dtype, **kw)
    cn = ksweep.rtm(v0, DH, DT, w, src, rec, d, condition="cross-correlation", storage_dtype=storage_dtype, **kw,
                    **par)
    same(cn.correlation, c1.correlation, f"{where}, {storage_dtype}: rtm's cross-correlation")
    same(cn.illumination, r1.illumination, f"{where}, {storage_dtype}: the illumination of both conditions")
    l1 = ksweep.lsrtm(v0, DH, DT, w, src, rec, d, iterations=2, storage_dtype=storage_dtype, **kw)
    ln = ksweep.lsrtm(v0, DH, DT, w, src, rec, d, iterations=2, storage_dtype=storage_dtype, **kw, **par)
    same(ln.image, l1.image, f"{where}, {storage_dtype}: lsrtm's image")
    same(ln.misfit, l1.misfit, f"{where}, {storage_dtype}: lsrtm's misfit")
    assert np.abs(rn.image).max() > 0 and ln.misfit[-1] < ln.misfit[0]
    print(f"rank {rank}: {where}, {storage_dtype} storage, pml_width {pml_width}: forward, adjoint, gradient, born, "
          f"rtm, lsrtm the same bits as one process (lsrtm misfit {ln.misfit[0]:.4f} -> {ln.misfit[-1]:.4f})", flush=True)


def shots_really_shared():
    # Ranks given different models (a misuse, for the test alone): with mpi=True each rank's
    # records are its own model's for the shots it ran and another rank's for the others, so the
    # calls above did share the shots (shots 0-1, 2-3 and 4 on 3 ranks).
    v, _, w, src, rec = case()
    vr = (v * (1 + 0.01 * rank)).astype(np.float32)
    kw = dict(order=8, pml_width=10, batch=1)
    a = ksweep.forward(vr, DH, DT, w, src, rec, mpi=True, **kw)
    b = ksweep.forward(vr, DH, DT, w, src, rec, **kw)
    own = [bool(np.array_equal(a[s], b[s])) for s in range(SHOTS)]
    assert 0 < sum(own) < SHOTS, f"rank {rank}: its own model's records for shots {own}"


def refused_everywhere():
    v, v0, w, src, rec = case()
    try:
        ksweep.rtm(v0, DH, DT, w, src, rec, np.zeros((SHOTS, 24, NT), np.float32), rho=np.full(v.shape, 1000.0,
                   np.float32), domains=[size])
    except Exception as e:  # noqa: BLE001
        assert "variable density" in str(e) and "domains" in str(e), str(e)
        print(f"rank {rank}: refused: {str(e).splitlines()[0]}", flush=True)
        return
    raise AssertionError("variable density on a split model was not refused")


rank = int(os.environ.get("OMPI_COMM_WORLD_RANK", os.environ.get("PMI_RANK", "0")))
size = int(os.environ.get("OMPI_COMM_WORLD_SIZE", os.environ.get("PMI_SIZE", "1")))
calls(None, "fp32")
calls(None, "fp16")
calls([size], "fp32")
calls([size], "fp16")
calls([size], "fp16", pml_width=[0, 10, 0, 0, 0, 10])  # reflecting top and left edges
shots_really_shared()
refused_everywhere()
