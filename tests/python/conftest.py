"""Shared cases of the Python package's tests (run by ctest: PYTHONPATH holds the built
package, KSWEEP_PROGRAM the ksweep program, KSWEEP_SOURCE_DIR the source tree)."""
import os

import numpy as np
import pytest

PROGRAM = os.environ.get("KSWEEP_PROGRAM", "")
SOURCE_DIR = os.environ.get("KSWEEP_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))

# The end-to-end tests' Marmousi2 crop (tests/drivers/test_ksweep.py): 60 x 120 cells at 25 m.
MARMOUSI_CROP = """
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
batch = 4
[storage]
strategy = "boundary"
dtype = "fp32"
[fwi]
iterations = 3
batch = 4
lr = 20.0
seed = 7
checkpoint_every = 0
figures_every = 0
save_models = false
smooth_sigma = 4.0
"""


def layered(shape=(40, 64), dtype=np.float32, seed=0):
    """Two layers and a slow lens, with a little noise: every cell differs."""
    rng = np.random.default_rng(seed)
    v = np.full(shape, 1800.0)
    v[shape[0] // 2:] = 2400.0
    z = np.arange(shape[0])[:, None] if len(shape) == 2 else np.arange(shape[0])[:, None, None]
    x = np.arange(shape[-1])
    lens = np.exp(-((z - shape[0] * 0.35) ** 2 + (x - shape[-1] * 0.5) ** 2) / 40.0)
    v = v - 200.0 * lens + rng.uniform(-20, 20, shape)
    return v.astype(dtype)


def survey(shape, shots=3, receivers=17, sources=1, z_src=2, z_rec=3):
    """Shots along x at depth z_src, receivers spread along x at z_rec, in v's axis order."""
    nx = shape[-1]
    dim = len(shape)
    sx = np.linspace(4, nx - 5, shots).astype(np.int64)
    rx = np.linspace(2, nx - 3, receivers).astype(np.int64)
    if dim == 2:
        src = np.stack([np.stack([np.full(sources, z_src), np.minimum(sx[s] + np.arange(sources), nx - 1)], -1)
                        for s in range(shots)])
        rec = np.stack([np.stack([np.full(receivers, z_rec), rx], -1)] * shots)
    else:
        ymid = shape[1] // 2
        src = np.stack([np.stack([np.full(sources, z_src), np.full(sources, ymid),
                                  np.minimum(sx[s] + np.arange(sources), nx - 1)], -1) for s in range(shots)])
        rec = np.stack([np.stack([np.full(receivers, z_rec), (np.arange(receivers) % shape[1]), rx], -1)] * shots)
    return src, rec


def amplitudes(shots, sources, nt, dt, dtype=np.float32, freq=12.0):
    w = np.zeros((shots, sources, nt))
    for s in range(shots):
        for i in range(sources):
            w[s, i] = np.roll(np.asarray(__import__("ksweep").ricker(freq, nt, dt)), 3 * i + s)
    return w.astype(dtype)


@pytest.fixture
def program():
    if not PROGRAM:
        pytest.skip("KSWEEP_PROGRAM is not set (ctest sets it)")
    assert os.path.exists(PROGRAM), f"KSWEEP_PROGRAM = {PROGRAM} does not exist"
    return PROGRAM
