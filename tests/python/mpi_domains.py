"""The package's inversion on a model split over MPI ranks: run by ctest as
`mpirun -n 2 python3 mpi_domains.py` (python_domains). The module starts MPI itself (the process
was launched by mpirun); Inversion(domains=[2]) (one shot group of two subdomains) gives the
models, losses and images of domains=[1] (two shot groups of the whole model) to the bit, in 2D
and 3D; bad splits are refused by name on every rank."""

import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from conftest import layered, survey  # noqa: E402

import ksweep  # noqa: E402

DT, DH = 0.001, 10.0


def inversion(v, domains, nt=200, shots=4):
    src, rec = survey(v.shape, shots=shots, receivers=21)
    w = ksweep.ricker(12.0, nt, DT)
    obs = ksweep.forward(v, DH, DT, np.broadcast_to(w.astype(np.float32), (shots, 1, nt)), src, rec)
    return ksweep.Inversion((v * 0.97).astype(np.float32), DH, DT, w, src, rec, obs, true_model=v, batch=2,
                            seed=3, lr=5.0, order=8, pml_width=8, domains=domains, vmax=0.0)


def check(shape, split):
    v = layered(shape)
    whole, parts = inversion(v, None), inversion(v, split)
    a, b = whole.run(3), parts.run(3)
    assert [r["loss"] for r in a] == [r["loss"] for r in b], (a, b)
    assert np.array_equal(whole.model, parts.model), np.count_nonzero(whole.model != parts.model)
    ia, ib = whole.images(), parts.images()
    for k in ia:
        assert np.array_equal(ia[k], ib[k]), f"{k}: {np.count_nonzero(ia[k] != ib[k])} cells differ"
    assert a[-1]["loss"] < a[0]["loss"]
    print(f"rank {rank}: {len(shape)}D domains {split}: the same bits as one domain "
          f"(losses {[r['loss'] for r in b]})", flush=True)


def refused(v, split, words):
    try:
        inversion(v, split)
    except ValueError as e:
        assert all(w in str(e) for w in words), str(e)
        return
    raise AssertionError(f"domains={split} was not refused")


rank = int(os.environ.get("OMPI_COMM_WORLD_RANK", os.environ.get("PMI_RANK", "0")))
assert ksweep.info()["ranks"] == 2, ksweep.info()
check((30, 72), [2])
check((14, 12, 40), [1, 2])
v = layered((30, 72))
refused(v, [3], ["3"])             # more domains than ranks
refused(v, [2, 1], ["[nx_parts]"])  # a 2D model takes one count
refused(v, [40], ["40"])           # parts thinner than the stencil
print(f"rank {rank}: ok", flush=True)
