"""The absorbing layer against an independent implementation of its equations
(cpml_reference.py), and the reflection it leaves, pinned (docs/PERFORMANCE.md, "The absorbing
layer's reflection")."""
import numpy as np
import pytest

import ksweep
from cpml_reference import forward as reference_forward


def model(shape, seed=3):
    """A smooth random velocity (1500-2500 m/s)."""
    rng = np.random.default_rng(seed)
    v = 2000.0 + 300.0 * rng.standard_normal(shape)
    for ax in range(len(shape)):  # smooth along each axis
        v = (np.roll(v, 1, ax) + 2 * v + np.roll(v, -1, ax)) / 4
    return np.clip(v, 1500.0, 2500.0)


def corner_case(dim):
    """A source near a corner and receivers in the model cells next to the layer (within the
    stencil's reach of it) and inside: (v, wavelet, dt, source, receivers, layer width)."""
    shape = (22, 26) if dim == 2 else (12, 11, 13)
    nt, dt, width = (260, 1e-3, 6) if dim == 2 else (90, 1e-3, 5)
    src = (2, 3) if dim == 2 else (2, 3, 2)
    rec = np.array([[0, 0], [1, 5], [shape[0] - 1, 7], [10, shape[1] - 2], [11, 12], [3, 1]]) if dim == 2 else \
        np.array([[0, 0, 0], [1, 5, 2], [shape[0] - 1, 7, 4], [6, shape[1] - 2, 12], [6, 5, 6], [3, 1, 11]])
    return model(shape), ksweep.ricker(25.0, nt, dt, 0.04), dt, src, rec, width


def agrees_to_round_off(got, expected):
    assert np.abs(expected).max() > 0
    err = np.abs(got - expected).max() / np.abs(expected).max()
    assert err < 1e-11, err


@pytest.mark.parametrize("order", [2, 4, 6, 8])
@pytest.mark.parametrize("dim", [2, 3])
def test_layer_matches_its_equations_to_round_off(order, dim):
    # Waves enter the layer, and what comes back is the layer's reflection, computed by both
    # from the same equations.
    v, w, dt, src, rec, width = corner_case(dim)
    dh = 10.0
    expected = reference_forward(v, dh, dt, w, src, rec, order=order, width=width)
    got = ksweep.forward(v, dh, dt, w[None, None], np.array([[src]]), rec[None], order=order, pml_width=width)[0]
    agrees_to_round_off(got, expected)


@pytest.mark.parametrize("order", [2, 8])
@pytest.mark.parametrize("dim", [2, 3])
def test_cells_of_their_own_size_per_axis_match_the_equations_to_round_off(order, dim):
    # Each axis' second difference and layer over its own cell size (the reference divides each
    # axis' term by d_a^2 and damps each layer over its own metres), a reflecting face included.
    v, w, dt, src, rec, width = corner_case(dim)
    dh = [12.5, 7.5] if dim == 2 else [12.0, 7.0, 9.0]
    faces = [(width, width), (0, width)] if dim == 2 else [(width, width), (width, 0), (width, width)]
    six = [width, width, 0, 0, 0, width] if dim == 2 else [width, width, width, 0, width, width]
    expected = reference_forward(v, dh, dt, w, src, rec, order=order, width=faces)
    got = ksweep.forward(v, dh, dt, w[None, None], np.array([[src]]), rec[None], order=order, pml_width=six)[0]
    agrees_to_round_off(got, expected)
    # One spacing for every axis is another problem: the comparison can fail.
    other = reference_forward(v, dh[-1], dt, w, src, rec, order=order, width=faces)
    assert np.abs(got - other).max() / np.abs(expected).max() > 1e-3


@pytest.mark.parametrize("order", [2, 4, 6, 8])
@pytest.mark.parametrize("dim", [2, 3])
def test_reflecting_edges_match_the_equations_to_round_off(order, dim):
    # Faces of 0 cells have no layer: the grid ends there and the wavefield beyond it is zero
    # (Deepwave's pml_width 0). Two such faces in 2D (top, right), three in 3D (top, back,
    # left), the others absorbing; receivers on the edge cells and inside, a source near a
    # reflecting corner.
    shape = (22, 26) if dim == 2 else (12, 11, 13)
    nt, dt, dh, width = (260, 1e-3, 10.0, 6) if dim == 2 else (90, 1e-3, 10.0, 5)
    faces = [(0, width), (width, 0)] if dim == 2 else [(0, width), (width, 0), (0, width)]
    six = [0, width, 0, 0, width, 0] if dim == 2 else [0, width, width, 0, 0, width]
    v = model(shape)
    w = ksweep.ricker(25.0, nt, dt, 0.04)
    src = (2, shape[1] - 3) if dim == 2 else (2, shape[1] - 3, 2)
    rec = np.array([[0, 0], [0, shape[1] - 1], [1, 5], [shape[0] - 1, 7], [10, shape[1] - 1], [11, 12]]) if dim == 2 \
        else np.array([[0, 0, 0], [0, shape[1] - 1, 0], [1, 5, 2], [shape[0] - 1, 7, 4], [6, shape[1] - 1, 12],
                       [6, 5, 6]])
    expected = reference_forward(v, dh, dt, w, src, rec, order=order, width=faces)
    got = ksweep.forward(v, dh, dt, w[None, None], np.array([[src]]), rec[None], order=order, pml_width=six)[0]
    assert np.abs(expected).max() > 0
    err = np.abs(got - expected).max() / np.abs(expected).max()
    assert err < 1e-11, err
    # The edge reflects: the records differ from the all-absorbing run's by far more than round-off.
    absorbed = ksweep.forward(v, dh, dt, w[None, None], np.array([[src]]), rec[None], order=order, pml_width=width)[0]
    assert np.abs(got - absorbed).max() > 0.05 * np.abs(got).max()


def test_reflecting_edges_are_the_method_of_images_at_order_2():
    # At order 2 the zero beyond a reflecting edge is exactly the antisymmetric image about the
    # first cell outside the grid: a reflecting left edge equals, to round-off, a wider model
    # whose source has a negated twin mirrored about column -1 (absorbing layers far away).
    nt, dt, dh = 300, 1e-3, 10.0
    w = ksweep.ricker(25.0, nt, dt, 0.04)
    v = np.full((40, 40), 2000.0)
    src, rec = (20, 4), np.array([[20, 0], [20, 3], [10, 9], [30, 15]])
    got = ksweep.forward(v, dh, dt, w[None, None], np.array([[src]]), rec[None], order=2,
                         pml_width=[40, 40, 0, 0, 0, 40])[0]
    pad = 41  # columns added on the left: column -1 of the small grid is column 40 of the wide one
    wide = np.full((40, 40 + pad), 2000.0)
    twin = (src[0], 2 * (pad - 1) - (src[1] + pad))
    both = ksweep.forward(wide, dh, dt, np.stack([w, -w])[None], np.array([[(src[0], src[1] + pad), twin]]),
                          (rec + [0, pad])[None], order=2, pml_width=40)[0]
    assert np.abs(got).max() > 0
    err = np.abs(got - both).max() / np.abs(got).max()
    assert err < 1e-12, err


# The relative L2 error of three receivers' records in a 50 x 50 model (5 m cells, a 25 Hz Ricker
# source at the top edge, dt 0.1 ms, 5000 steps) against the same source in a model large enough
# that nothing reflected reaches them: the layer's reflection, by order and width (cells).
# pml_reflection = 1e-4 (the theoretical coefficient at normal incidence), pml_freq = 25 Hz.
REFLECTION = {
    (2, 10): 6.833e-3, (2, 20): 1.614e-3, (2, 30): 6.764e-4,
    (4, 10): 2.902e-3, (4, 20): 7.576e-4, (4, 30): 4.269e-4,
    (8, 10): 2.195e-3, (8, 20): 5.383e-4, (8, 30): 3.694e-4,
}
_RECORDS = {}


def records(n, width, offset, order):
    key = (n, width, offset, order)
    if key not in _RECORDS:
        nt, dt = 5000, 1e-4
        amp = ksweep.ricker(25.0, nt, dt, 0.06)[None, None]
        v = np.full((n, n), 1500.0)
        o = offset
        _RECORDS[key] = ksweep.forward(v, 5.0, dt, amp, np.array([[[o, o + 25]]]),
                                       np.array([[[o + 48, o + 25], [o + 25, o], [o + 25, o + 49]]]), order=order,
                                       pml_width=width, pml_reflection=1e-4, pml_freq=25.0)
    return _RECORDS[key]


def reflection(order, width):
    ref = records(250, 20, 100, order)
    r = records(50, width, 0, order)
    return float(np.linalg.norm(r - ref) / np.linalg.norm(ref))


@pytest.mark.parametrize("order,width", sorted(REFLECTION))
def test_reflection_table(order, width):
    assert reflection(order, width) == pytest.approx(REFLECTION[(order, width)], rel=0.02)
