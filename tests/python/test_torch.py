"""ksweep.torch: the forward modelling as a torch.autograd.Function."""
import numpy as np
import pytest

import ksweep
from conftest import amplitudes, layered, survey

torch = pytest.importorskip("torch")
# The cores are ksweep's: torch's own thread pool, spinning beside ksweep's between the small
# calls of a gradcheck, makes them several times slower (README, "Python").
torch.set_num_threads(1)
import ksweep.torch as kt  # noqa: E402

DT, DH = 0.001, 10.0


def test_gradcheck_float64():
    """torch.autograd.gradcheck: the Jacobian of records with respect to v and to the source
    amplitudes, by central differences, against backward (the exact adjoint)."""
    v0 = layered((10, 12), np.float64)
    src, rec = survey(v0.shape, shots=1, receivers=3, z_src=4, z_rec=5)
    v = torch.tensor(v0, requires_grad=True)
    amp = torch.tensor(amplitudes(1, 1, 40, DT, np.float64, freq=40.0), requires_grad=True)
    layer = v0.copy()

    def f(v, amp):
        return kt.forward(v, DH, DT, amp, src, rec, pml_width=4, layer_velocity=layer)

    assert torch.autograd.gradcheck(f, (v, amp), eps=1e-3, atol=1e-7, rtol=1e-4)


@pytest.mark.parametrize("shape,order", [((10, 12), 2), ((10, 12), 4), ((10, 12), 6), ((12, 12), 8),
                                         ((6, 7, 8), 2), ((8, 8, 8), 4)])
def test_gradcheck_every_cell_with_the_layer_following_v(shape, order):
    """With the default layer (a copy of v's edge cells) the records' Jacobian with respect to
    every cell of v, the edge cells next to the layer included, against backward (the layer's
    chain rule), at orders 2-8 and in 3D; the damping profile's velocity given. Taking the layer
    as fixed instead misses the edge cells' share of the Jacobian."""
    v0 = layered(shape, np.float64)
    src, rec = survey(v0.shape, shots=1, receivers=3, z_src=2, z_rec=1)
    rec[..., -1] = [0, v0.shape[-1] // 2, v0.shape[-1] - 1]  # receivers on both edge columns
    v = torch.tensor(v0, requires_grad=True)
    amp = torch.tensor(amplitudes(1, 1, 40, DT, np.float64, freq=40.0))
    kw = dict(order=order, pml_width=4, pml_velocity=2500.0)

    def f(v):
        return kt.forward(v, DH, DT, amp, src, rec, **kw)

    assert torch.autograd.gradcheck(f, (v,), eps=1e-3, atol=1e-7, rtol=1e-4)
    out = torch.randn(f(v).shape, dtype=torch.float64, generator=torch.Generator().manual_seed(3))
    g, = torch.autograd.grad((f(v) * out).sum(), v)
    fixed, = torch.autograd.grad((kt.forward(v, DH, DT, amp, src, rec, layer_velocity=v0, **kw) * out).sum(), v)
    edge = torch.zeros(shape, dtype=torch.bool)  # the outermost cells: the ones the layer copies
    edge[0] = edge[-1] = True
    edge[..., 0] = edge[..., -1] = True
    if len(shape) == 3:
        edge[:, 0] = edge[:, -1] = True
    assert not torch.allclose(g[edge], fixed[edge], rtol=1e-2)
    assert torch.equal(g[~edge], fixed[~edge])


@pytest.mark.parametrize("shape,order", [((10, 12), 2), ((10, 12), 4), ((10, 12), 6), ((12, 12), 8),
                                         ((6, 7, 8), 2), ((6, 7, 8), 4)])
def test_gradcheck_with_default_arguments(shape, order):
    """ksweep.torch.forward with its defaults (the layer follows v, the damping profile's
    velocity the largest of v, taken as a constant): gradcheck with its own default tolerances,
    every cell."""
    v0 = layered(shape, np.float64)
    src, rec = survey(v0.shape, shots=1, receivers=3, z_src=2, z_rec=1)
    v = torch.tensor(v0, requires_grad=True)
    amp = torch.tensor(amplitudes(1, 1, 40, DT, np.float64, freq=40.0))
    assert torch.autograd.gradcheck(lambda v: kt.forward(v, DH, DT, amp, src, rec, order=order, pml_width=4), (v,))


@pytest.mark.parametrize("shape,order", [((10, 12), 2), ((12, 12), 8), ((6, 7, 8), 4)])
def test_gradcheck_with_reflecting_edges(shape, order):
    """Faces without a layer (pml_width 0: the grid ends there, a reflecting edge) beside
    absorbing ones, a free surface on top in one case: gradcheck of every cell, the edge cells
    at the reflecting faces included, and boundary saving equal to the stored wavefield."""
    v0 = layered(shape, np.float64)
    src, rec = survey(v0.shape, shots=1, receivers=3, z_src=2, z_rec=1)
    rec[..., -1] = [0, v0.shape[-1] // 2, v0.shape[-1] - 1]
    v = torch.tensor(v0, requires_grad=True)
    amp = torch.tensor(amplitudes(1, 1, 40, DT, np.float64, freq=40.0))
    faces = [0, 4, 4, 0, 0, 4]  # top, bottom, front, back, left, right
    surface = order == 8

    def f(v, storage="boundary"):
        return kt.forward(v, DH, DT, amp, src, rec, order=order, pml_width=faces, free_surface=surface,
                          storage=storage)

    assert torch.autograd.gradcheck(f, (v,), eps=1e-3, atol=1e-7, rtol=1e-4)
    out = torch.randn(f(v).shape, dtype=torch.float64, generator=torch.Generator().manual_seed(5))
    g, = torch.autograd.grad((f(v) * out).sum(), v)
    full, = torch.autograd.grad((f(v, "full") * out).sum(), v)
    assert torch.allclose(g, full, rtol=1e-12, atol=1e-14 * float(full.abs().max()))


def test_gradcheck_variable_density_float64():
    """With rho: the Jacobian with respect to v and rho (both layers fixed) against backward."""
    v0 = layered((10, 12), np.float64)
    rho0 = 310.0 * v0 ** 0.25
    rho0[5:] += 200.0
    src, rec = survey(v0.shape, shots=1, receivers=3, z_src=4, z_rec=5)
    v = torch.tensor(v0, requires_grad=True)
    rho = torch.tensor(rho0, requires_grad=True)
    amp = torch.tensor(amplitudes(1, 1, 40, DT, np.float64, freq=40.0))

    def f(v, rho):
        return kt.forward(v, DH, DT, amp, src, rec, pml_width=4, layer_velocity=v0, rho=rho,
                          layer_density=rho0)

    assert torch.autograd.gradcheck(f, (v, rho), eps=1e-3, atol=1e-7, rtol=1e-4)


def test_loss_backward_equals_ksweep_gradient():
    v0 = layered((32, 48))
    src, rec = survey(v0.shape, shots=3)
    amp = amplitudes(3, 1, 240, DT)
    obs = ksweep.forward(v0, DH, DT, amp, src, rec)
    start = (v0 * 0.98).astype(np.float32)
    v = torch.tensor(start, requires_grad=True)
    d = kt.forward(v, DH, DT, torch.from_numpy(amp), src, rec)
    loss = ((d - torch.from_numpy(np.ascontiguousarray(obs))) ** 2).sum()
    loss.backward()
    g = ksweep.gradient(start, DH, DT, amp, src, rec, obs)
    assert v.grad.dtype == torch.float32 and v.grad.shape == v.shape
    assert np.isclose(loss.item(), g.loss, rtol=1e-5)
    ref = g.grad["vp"]
    assert np.linalg.norm(v.grad.numpy() - ref) <= 1e-5 * np.linalg.norm(ref)


def test_tensors_where_the_build_computes_are_used_in_place(monkeypatch):
    """Tensors on the device the build computes on (CPU tensors on this build; CUDA tensors on a
    CUDA build, which the device check runs) reach the library in place (Modeling's *_device
    methods) and give the host arrays' bits: the records, v's, rho's and the amplitudes' gradients
    from one reverse sweep, and the amplitudes' alone from the adjoint pass."""
    kind = ksweep.info()["arrays_in_place"]
    assert kind in ("cpu", "cuda")
    if kind != "cpu":
        pytest.skip("a CUDA build: scripts/device_check.sh runs the CUDA tensors' case")
    took = []  # what Forward decided: in place or not, call by call
    decide = kt._in_place
    monkeypatch.setattr(kt, "_in_place", lambda *t: took.append(decide(*t)) or took[-1])
    nt = 120
    for vd in (False, True):
        v0 = layered((24, 30), dtype=np.float64)
        rho0 = (1000.0 + 0.5 * v0).astype(np.float64)
        src, rec = survey(v0.shape, shots=2)
        amp = amplitudes(2, 1, nt, DT, dtype=np.float64)
        s = ksweep._survey(v0, src, rec, DH, "cells")
        m = ksweep._modeling(s, DH, DT, nt, order=4, pml_width=20, pml_reflection=1e-3, pml_freq=25.0,
                             free_surface=False, batch=0, schedule="auto",
                             physics="acoustic_vd" if vd else "acoustic")
        ksweep._set_model(m, s, rho0 if vd else None, None, None)
        records = m.forward(amp)
        g = np.sin(np.arange(records.size) * 0.37).reshape(records.shape)
        grad, _, _, grho, wgrad, _ = m.vjp(amp, g, wavelet_grad=True, illuminations=False)
        wadj = m.adjoint(g)
        gt = torch.from_numpy(np.ascontiguousarray(g.transpose(0, 2, 1)))
        v, a = torch.tensor(v0, requires_grad=True), torch.tensor(amp, requires_grad=True)
        rho = torch.tensor(rho0, requires_grad=True) if vd else None
        d = kt.forward(v, DH, DT, a, src, rec, rho=rho)
        assert d.detach().transpose(1, 2).contiguous().numpy().tobytes() == records.tobytes()
        (d * gt).sum().backward()
        assert v.grad.numpy().tobytes() == grad.tobytes()
        assert a.grad.numpy().tobytes() == wgrad.tobytes()
        if vd:
            assert rho.grad.numpy().tobytes() == grho.tobytes()
        a2 = torch.tensor(amp, requires_grad=True)  # the amplitudes alone: the adjoint pass
        (kt.forward(torch.tensor(v0), DH, DT, a2, src, rec, rho=None if rho is None else rho.detach()) * gt).sum().backward()
        assert a2.grad.numpy().tobytes() == wadj.tobytes()
    assert took == [True] * 4  # two forwards per physics, both in place


@pytest.mark.parametrize("reflecting_top", [False, True])
def test_scalar_states_where_the_build_computes_are_used_in_place(monkeypatch, reflecting_top):
    """ksweep.scalar with tensors where the build computes (CPU tensors on this build; CUDA
    tensors on a CUDA build, which the device check runs): the start state, the end state and
    their gradients stay in place (Modeling's *_device methods with states) and give the host
    path's bits: a run cut in two, the second from the first's end state (wavefields and layer
    memories requiring grad), a loss of the data and the end state; the data, every end tensor and
    the gradients of v, the amplitudes and the start; then the amplitudes' alone (the adjoint
    pass from the end's gradient)."""
    if ksweep.info()["arrays_in_place"] != "cpu":
        pytest.skip("a CUDA build: scripts/device_check.sh runs the CUDA tensors' case")
    took = []
    decide = kt._in_place

    def run(in_place, wants_v=True):
        monkeypatch.setattr(kt, "_in_place", lambda *t: took.append(in_place and decide(*t)) or took[-1])
        v0, amp0, src, rec = _scalar_case()
        kw = dict(source_locations=src, receiver_locations=rec,
                  pml_width=[0, 8, 8, 8] if reflecting_top else 8)
        cut = amp0.shape[-1] // 2
        v = v0.clone().requires_grad_(wants_v)
        amp = amp0.clone().requires_grad_(True)
        with torch.no_grad():
            a = ksweep.scalar(v, 10.0, 0.001, source_amplitudes=amp[..., :cut], **kw)
        start = [x.clone().requires_grad_(wants_v) for x in a[:6]]
        names = ("wavefield_0", "wavefield_m1", "psiy_m1", "psix_m1", "zetay_m1", "zetax_m1")
        b = ksweep.scalar(v, 10.0, 0.001, source_amplitudes=amp[..., cut:], **dict(zip(names, start)), **kw)
        weights = [torch.cos(torch.arange(x.numel(), dtype=x.dtype) * (0.1 + 0.01 * k)).reshape(x.shape)
                   for k, x in enumerate(b)]
        sum((x * w).sum() for x, w in zip(b, weights)).backward()
        grads = [v.grad, amp.grad] + [x.grad for x in start]
        return [x.detach() for x in b], grads

    for wants_v in (True, False):
        b_in, g_in = run(True, wants_v)
        b_host, g_host = run(False, wants_v)
        for x, y in zip(b_in, b_host):
            assert torch.equal(x, y)
        for x, y in zip(g_in, g_host):
            assert (x is None) == (y is None)
            if x is not None:
                assert x.numpy().tobytes() == y.numpy().tobytes()
        assert g_in[1].abs().max() > 0
        if wants_v:
            assert all(x.abs().max() > 0 for x in g_in[:4])  # v, the amplitudes, u^0, u^-1
    assert took == [True, True, False, False] * 2  # each run's two calls: in place, then the host path


def test_the_in_place_methods_check_their_arrays():
    """Modeling's *_device methods name the array, what it is and what they expect."""
    if ksweep.info()["arrays_in_place"] != "cpu":
        pytest.skip("a CUDA build takes CUDA arrays")
    nt = 40
    v0 = layered((16, 20))
    src, rec = survey(v0.shape, shots=2)
    amp = amplitudes(2, 1, nt, DT)
    s = ksweep._survey(v0, src, rec, DH, "cells")
    m = ksweep._modeling(s, DH, DT, nt, order=4, pml_width=10, pml_reflection=1e-3, pml_freq=25.0,
                         free_surface=False, batch=0, schedule="auto")
    m.set_model_device([v0])
    records = np.zeros((2, nt, rec.shape[1]), np.float32)
    with pytest.raises(ValueError, match=r"source_amplitudes: float64 \[2, 1, 40\] given, float32 \[2, 1, 40\] "
                                         r"expected"):
        m.forward_device(amp.astype(np.float64), records)
    with pytest.raises(ValueError, match=r"records: float32 \[2, 40, 3\] given, float32 \[2, 40, 17\] expected"):
        m.forward_device(amp, records[:, :, :3].copy())
    with pytest.raises(ValueError, match="source_amplitudes: a C-contiguous array expected"):
        m.forward_device(np.asfortranarray(amp), records)
    records.setflags(write=False)
    with pytest.raises(ValueError, match="records: the array is read-only"):
        m.forward_device(amp, records)
    with pytest.raises(ValueError, match=r"source_amplitudes: a numpy array of float32 \[2, 1, 40\] expected"):
        m.forward_device(amp.tolist(), np.zeros((2, nt, rec.shape[1]), np.float32))
    with pytest.raises(ValueError, match=r"set_model_device: 2 field\(s\) given, 1 expected"):
        m.set_model_device([v0, v0])
    out = np.zeros((2, nt, rec.shape[1]), np.float32)
    m.forward_device(amp, out)
    assert out.tobytes() == m.forward(amp).tobytes()


def test_torch_needs_tensors():
    v0 = layered((20, 24))
    src, rec = survey(v0.shape)
    with pytest.raises(TypeError, match="takes tensors"):
        kt.forward(v0, DH, DT, amplitudes(3, 1, 50, DT), src, rec)


# --- ksweep.scalar: Deepwave's calling convention ----------------------------------------------

def _green_2d(f, dt, r, c, dh):
    """u(t) at distance r of Deepwave's source term -v^2 dt^2 f[t] at one cell of a 2D grid of
    spacing dh: u_tt - c^2 lap u = -c^2 dh^2 f(t) delta(x), by the outgoing Hankel function (a
    cell of dz by dx: dh = sqrt(dz dx), the cell's area dh^2)."""
    from scipy.special import hankel2
    m = 8 * f.size
    spec = np.fft.rfft(f, m)
    w = 2 * np.pi * np.fft.rfftfreq(m, dt)
    u = np.zeros_like(spec)
    u[1:] = 1j * dh**2 / 4 * spec[1:] * hankel2(0, w[1:] * r / c)
    return np.fft.irfft(u, m)[:f.size]


def _green_case(n, centre, **kw):
    """A homogeneous n x n model (5 m, 1500 m/s), a 25 Hz Ricker at `centre`, receivers 20 cells
    below and 15 cells diagonally off it (order 8, 30-cell layer): the records' relative
    misfit to the 2D Green's function at each receiver."""
    dh, c, dt, nt = 5.0, 1500.0, 0.0004, 500
    v = torch.full((n, n), c, dtype=torch.float64)
    f = ksweep.ricker(25.0, nt, dt, 0.05)
    rec = torch.tensor([[[centre, centre + 20], [centre + 15, centre + 15]]])
    d = ksweep.scalar(v, dh, dt, source_amplitudes=torch.from_numpy(f).reshape(1, 1, nt),
                      source_locations=torch.tensor([[[centre, centre]]]), receiver_locations=rec, accuracy=8,
                      pml_width=30, **kw)[-1][0].numpy()
    errors = []
    for k, r in enumerate((20 * dh, np.hypot(15, 15) * dh)):
        want = _green_2d(f, dt, r, c, dh)
        errors.append(np.linalg.norm(d[k] - want) / np.linalg.norm(want))
    return errors


def test_scalar_matches_the_analytic_green_function():
    """ksweep.scalar's source scaling (-v^2 dt^2 f) and receiver timing (u^t at sample t) against
    the 2D Green's function, not against ksweep's other path: within the stencil's dispersion."""
    errors = _green_case(121, 60)
    assert max(errors) < 5e-3, errors  # one sample late would be 6.5e-2


def test_scalar_grid_spacing_per_axis_matches_the_analytic_green_function():
    """Cells of 5 m in depth and 2.5 m along x (Deepwave's grid_spacing=[dz, dx]): receivers 100 m
    below, 100 m beside and 100 m obliquely from the source against the 2D Green's function of a
    source spread over one cell of dz dx. A spacing on the wrong axis, or one spacing for both,
    moves the arrivals by half the distance."""
    dz, dx, c, dt, nt = 5.0, 2.5, 1500.0, 0.0004, 500
    v = torch.full((101, 161), c, dtype=torch.float64)
    f = ksweep.ricker(25.0, nt, dt, 0.05)
    src = [50, 80]
    rec = torch.tensor([[[70, 80], [50, 120], [62, 112]]])  # (100, 0), (0, 100), (60, 80) m away
    d = ksweep.scalar(v, [dz, dx], dt, source_amplitudes=torch.from_numpy(f).reshape(1, 1, nt),
                      source_locations=torch.tensor([[src]]), receiver_locations=rec, accuracy=8,
                      pml_width=30)[-1][0].numpy()
    for k in range(3):
        r = float(np.hypot((int(rec[0, k, 0]) - src[0]) * dz, (int(rec[0, k, 1]) - src[1]) * dx))
        want = _green_2d(f, dt, r, c, np.sqrt(dz * dx))
        error = np.linalg.norm(d[k] - want) / np.linalg.norm(want)
        assert abs(r - 100.0) < 1e-9 and error < 5e-3, (k, error)


def test_grid_spacing_per_axis_is_the_transposed_problem_s():
    """A model of dz by dx cells, transposed (dx by dz cells, the points' axes swapped), gives the
    same records to round-off (float64), and one spacing named per axis gives the bits of one
    spacing: the weights sit on their own axes."""
    v = torch.tensor(layered((30, 44), np.float64))
    v[12:20, 10:30] += 300.0
    amp = torch.tensor(amplitudes(2, 1, 200, DT, np.float64))
    src = np.array([[[3, 7]], [[25, 40]]])
    rec = np.array([[[z, x] for z, x in ((0, 0), (5, 40), (29, 21), (14, 3))]] * 2)
    d = kt.forward(v, [12.5, 7.5], DT, amp, src, rec, order=8, pml_width=[6, 6, 0, 0, 9, 9])
    dt_ = kt.forward(v.T.contiguous(), [7.5, 12.5], DT, amp, src[..., ::-1].copy(), rec[..., ::-1].copy(), order=8,
                     pml_width=[9, 9, 0, 0, 6, 6])
    assert float((d - dt_).abs().max() / d.abs().max()) < 1e-12
    wrong = kt.forward(v.T.contiguous(), [12.5, 7.5], DT, amp, src[..., ::-1].copy(), rec[..., ::-1].copy(), order=8,
                       pml_width=[9, 9, 0, 0, 6, 6])
    assert float((d - wrong).abs().max() / d.abs().max()) > 1e-2  # the comparison can fail
    one = kt.forward(v, 10.0, DT, amp, src, rec, order=8)
    assert torch.equal(one, kt.forward(v, [10.0, 10.0], DT, amp, src, rec, order=8))
    for bad, match in (([10.0, -1.0], "must be finite and > 0"), ([10.0, 5.0, 5.0], "one per axis \\[dz, dx\\]")):
        with pytest.raises(ValueError, match=match):
            ksweep.forward(v.numpy(), bad, DT, amp.numpy(), src, rec)


def test_scalar_gradcheck_grid_spacing_per_axis():
    """gradcheck with cells of their own size per axis: v (every cell, the edges the layer copies
    included) and the amplitudes."""
    v = torch.tensor(layered((10, 12), np.float64), requires_grad=True)
    src = torch.tensor([[[4, 5]]])
    rec = torch.tensor([[[5, 0], [5, 6], [0, 11]]])
    amp = torch.tensor(amplitudes(1, 1, 40, DT, np.float64, freq=40.0), requires_grad=True)

    def f(v, amp):
        return ksweep.scalar(v, [12.5, 8.0], DT, source_amplitudes=amp, source_locations=src, receiver_locations=rec,
                             pml_width=4, max_vel=3000.0)[-1]

    assert torch.autograd.gradcheck(f, (v, amp), eps=1e-3, atol=1e-7, rtol=1e-4)


def _scalar_case(dtype=torch.float64):
    v = torch.full((40, 60), 2000.0, dtype=dtype)
    v[20:] = 2500.0
    amp = torch.from_numpy(ksweep.ricker(15.0, 300, 0.001)).to(dtype).reshape(1, 1, 300).repeat(2, 1, 1)
    src = torch.tensor([[[5, 20]], [[5, 40]]])
    rec = torch.tensor([[[5, x] for x in range(0, 60, 6)]] * 2)
    return v, amp, src, rec


def test_scalar_is_forward_with_deepwave_s_source_term_and_timing():
    """The same propagator: scalar = ksweep.torch.forward of -v^2 dt^2 f, one sample later."""
    v, amp, src, rec = _scalar_case()
    d = ksweep.scalar(v, 10.0, 0.001, source_amplitudes=amp, source_locations=src, receiver_locations=rec,
                      pml_width=10)
    assert len(d) == 7 and d[0].shape == d[1].shape == (2, 60, 80)  # the model and its 10-cell layer
    ref = kt.forward(v, DH, 0.001, amp * (-(2000.0**2) * 0.001**2), src.numpy(), rec.numpy(), order=4, pml_width=10,
                     pml_velocity=2500.0)
    assert torch.equal(d[-1][..., 1:], ref[..., :-1]) and not d[-1][..., 0].any()


@pytest.mark.parametrize("faces", [[0, 6, 6, 0], 0])
def test_scalar_reflecting_edges_against_the_equations(faces):
    """Deepwave's pml_width of 0 (a reflecting edge) in its axis order [z0, z1, x0, x1]: the top
    and right faces, then every face, against the independent implementation of the step
    (cpml_reference.py) with those faces, under the convention's source term and timing."""
    from cpml_reference import forward as reference_forward
    v, amp, src, rec = _scalar_case()
    rec = torch.tensor([[[0, 59], [0, 30], [39, 0], [20, 59], [5, 25]]] * 2)
    d = ksweep.scalar(v, 10.0, 0.001, source_amplitudes=amp, source_locations=src, receiver_locations=rec,
                      pml_width=faces)[-1]
    w = [(0, 6), (6, 0)] if faces else 0
    for s in range(2):
        z, x = (int(c) for c in src[s, 0])
        f = -float(v[z, x]) ** 2 * 0.001 ** 2 * amp[s, 0].numpy()
        ref = reference_forward(v.numpy(), 10.0, 0.001, f, (z, x), rec[s].numpy(), order=4, width=w)
        expected = np.concatenate([np.zeros((ref.shape[0], 1)), ref[:, :-1]], axis=1)
        err = np.abs(d[s].numpy() - expected).max() / np.abs(expected).max()
        assert err < 1e-11, (s, err)


def test_scalar_absent_points_and_ragged_shots():
    """-1 locations: an absent receiver records zeros, an absent source injects nothing; the
    other points are the bits of the run without them."""
    v, amp, src, rec = _scalar_case()
    full = ksweep.scalar(v, 10.0, 0.001, source_amplitudes=amp, source_locations=src, receiver_locations=rec,
                         pml_width=10)[-1]
    rec2 = rec.clone()
    rec2[0, 3] = -1
    src2 = torch.cat([src, torch.full((2, 1, 2), -1)], dim=1)
    d = ksweep.scalar(v, 10.0, 0.001, source_amplitudes=torch.cat([amp, 3 * amp], dim=1), source_locations=src2,
                      receiver_locations=rec2, pml_width=10)[-1]
    assert not d[0, 3].any()
    keep = [i for i in range(10) if i != 3]
    assert torch.equal(d[0, keep], full[0, keep]) and torch.equal(d[1], full[1])
    with pytest.raises(ValueError, match="absent when all its coordinates are -1"):
        ksweep.scalar(v, 10.0, 0.001, source_amplitudes=amp, source_locations=src, receiver_locations=rec * 0 - 2)


def test_scalar_without_sources_or_receivers():
    """Deepwave's odd calls: no receivers gives data [shot, 0, nt] (receiver_locations None too),
    no sources gives zeros (the wavefield never leaves zero), and a model as small as the
    stencil allows runs."""
    v, amp, src, rec = _scalar_case()
    nt = amp.shape[-1]
    kw = dict(pml_width=10)
    d = ksweep.scalar(v, 10.0, 0.001, source_amplitudes=amp, source_locations=src,
                      receiver_locations=rec[:, :0], **kw)[-1]
    assert tuple(d.shape) == (2, 0, nt)
    d = ksweep.scalar(v, 10.0, 0.001, source_amplitudes=amp, source_locations=src, **kw)[-1]
    assert tuple(d.shape) == (2, 0, nt)
    silent = ksweep.scalar(v, 10.0, 0.001, source_amplitudes=amp[:, :0], source_locations=src[:, :0],
                           receiver_locations=rec, **kw)[-1]
    assert tuple(silent.shape) == (2, rec.shape[1], nt) and not silent.any()
    silent_nt = ksweep.scalar(v, 10.0, 0.001, receiver_locations=rec, nt=nt, **kw)[-1]
    assert tuple(silent_nt.shape) == (2, rec.shape[1], nt) and not silent_nt.any()
    # The smallest model order 4 takes, 5 x 5 cells (order + 1 along each axis), with the thinnest
    # layer it allows (the stencil radius, 2); one cell less is refused, naming the limit.
    small = torch.full((5, 5), 1500.0, dtype=v.dtype)
    w = amp[:1, :1]
    d = ksweep.scalar(small, 10.0, 0.001, source_amplitudes=w, source_locations=torch.tensor([[[2, 2]]]),
                      receiver_locations=torch.tensor([[[2, 3]]]), pml_width=2)[-1]
    assert torch.isfinite(d).all() and d.abs().max() > 0
    with pytest.raises(ValueError, match="model grid 4 x 4 is too small for order 4: each dimension needs at least 5"):
        ksweep.scalar(small[:4, :4], 10.0, 0.001, source_amplitudes=w, source_locations=torch.tensor([[[2, 2]]]),
                      receiver_locations=torch.tensor([[[2, 3]]]), pml_width=2)
    with pytest.raises(ValueError, match="give receiver_locations or source_locations"):
        ksweep.scalar(v, 10.0, 0.001, nt=nt, **kw)


def test_scalar_resamples_a_step_above_the_stability_limit():
    """dt = 4 ms exceeds 0.6 / (max_vel sqrt(2) / dh) = 1.7 ms: the run takes 3 steps per sample,
    the source interpolated; the data are those of a run at 4/3 ms, every third sample."""
    v, _, src, rec = _scalar_case()
    coarse = torch.from_numpy(ksweep.ricker(15.0, 75, 0.004)).reshape(1, 1, 75).repeat(2, 1, 1)
    fine = torch.from_numpy(ksweep.ricker(15.0, 225, 0.004 / 3)).reshape(1, 1, 225).repeat(2, 1, 1)
    dc = ksweep.scalar(v, 10.0, 0.004, source_amplitudes=coarse, source_locations=src, receiver_locations=rec,
                       pml_width=10)[-1]
    df = ksweep.scalar(v, 10.0, 0.004 / 3, source_amplitudes=fine, source_locations=src, receiver_locations=rec,
                       pml_width=10)[-1]
    assert dc.shape == (2, 10, 75)
    assert float((dc - df[..., ::3]).abs().max() / df.abs().max()) < 1e-6


def test_scalar_gradcheck_float64():
    """gradcheck through the convention (the source term's -v^2 included), with respect to the
    source amplitudes and to every cell of v, the edge cells the layer copies included (max_vel
    given, as the damping profile's velocity)."""
    v = torch.tensor(layered((10, 12), np.float64), requires_grad=True)
    src = torch.tensor([[[4, 5]]])
    rec = torch.tensor([[[5, 0], [5, 6], [0, 11]]])
    amp = torch.tensor(amplitudes(1, 1, 40, DT, np.float64, freq=40.0), requires_grad=True)

    def f(v, amp):
        return ksweep.scalar(v, DH, DT, source_amplitudes=amp, source_locations=src, receiver_locations=rec,
                             pml_width=4, max_vel=3000.0)[-1]

    assert torch.autograd.gradcheck(f, (v, amp), eps=1e-3, atol=1e-7, rtol=1e-4)


def test_scalar_gradcheck_from_initial_wavefields():
    """A run from the final wavefields and layer memories of an earlier one (waves in the layer):
    gradcheck with respect to v (every cell, the edges included) and the amplitudes, the start
    held fixed; the same data as without grad, and the start changes the gradient."""
    v0 = torch.tensor(layered((10, 12), np.float64))
    src = torch.tensor([[[4, 5]]])
    rec = torch.tensor([[[5, 0], [5, 6], [0, 11]]])
    amp0 = torch.tensor(amplitudes(1, 1, 70, DT, np.float64, freq=40.0))
    kw = dict(source_locations=src, receiver_locations=rec, pml_width=[4, 3, 2, 4], max_vel=3000.0)
    first = ksweep.scalar(v0, DH, DT, source_amplitudes=amp0[..., :40], **kw)
    assert first[2].abs().max() > 0 and first[3].abs().max() > 0  # psi: waves in the layer
    names = ("wavefield_0", "wavefield_m1", "psiy_m1", "psix_m1", "zetay_m1", "zetax_m1")
    start = dict(zip(names, first[:-1]))
    v = v0.clone().requires_grad_(True)
    amp = amp0[..., 40:].clone().requires_grad_(True)

    def f(v, amp):
        return ksweep.scalar(v, DH, DT, source_amplitudes=amp, **start, **kw)[-1]

    assert torch.autograd.gradcheck(f, (v, amp), eps=1e-3, atol=1e-7, rtol=1e-4)
    d = f(v, amp)
    with torch.no_grad():
        assert torch.equal(d, ksweep.scalar(v0, DH, DT, source_amplitudes=amp0[..., 40:], **start, **kw)[-1])
    d.pow(2).sum().backward()
    g_start = v.grad.clone()
    v.grad = None
    ksweep.scalar(v, DH, DT, source_amplitudes=amp, **kw)[-1].pow(2).sum().backward()
    assert not torch.equal(v.grad, g_start)


@pytest.mark.parametrize("reflecting_top", [False, True])
def test_scalar_gradcheck_with_respect_to_the_initial_wavefields_and_memories(reflecting_top):
    """The start state is differentiable too: gradcheck with respect to wavefield_0 (also through
    sample 0 of the data, u^0 at the receivers), wavefield_m1 and the four layer memories, every
    value (those the run does not read get zero: the memories' slots beyond the layer), with v and
    the amplitudes; two shots, and a reflecting top edge (pml_width 0 there)."""
    v0 = torch.tensor(layered((8, 9), np.float64))
    src = torch.tensor([[[3, 4]], [[5, 1]]])
    rec = torch.tensor([[[0, 0], [4, 6], [7, 8]], [[1, 2], [6, 0], [3, 3]]])
    amp0 = torch.tensor(amplitudes(2, 1, 50, DT, np.float64, freq=40.0))
    pml = [3, 2, 3, 4] if not reflecting_top else [0, 2, 3, 4]
    kw = dict(source_locations=src, receiver_locations=rec, pml_width=pml, max_vel=3000.0)
    first = ksweep.scalar(v0, DH, DT, source_amplitudes=amp0[..., :30], **kw)
    assert all(x.abs().max() > 0 for x in first[:6])  # waves in the layer: every memory moves
    names = ("wavefield_0", "wavefield_m1", "psiy_m1", "psix_m1", "zetay_m1", "zetax_m1")
    start = [x.clone().requires_grad_(True) for x in first[:6]]
    v = v0.clone().requires_grad_(True)
    amp = amp0[..., 30:].clone().requires_grad_(True)

    def f(v, amp, *start):
        return ksweep.scalar(v, DH, DT, source_amplitudes=amp, **dict(zip(names, start)), **kw)[-1]

    assert torch.autograd.gradcheck(f, (v, amp, *start), eps=1e-3, atol=1e-8, rtol=1e-5)
    d = f(v, amp, *start)
    d.pow(2).sum().backward()
    assert all(x.grad is not None and x.grad.abs().max() > 0 for x in start)
    with torch.no_grad():  # the same data as without grad
        assert torch.equal(d, f(v0, amp0[..., 30:], *[x.detach() for x in start]))


@pytest.mark.parametrize("reflecting_top", [False, True])
def test_scalar_gradcheck_of_the_final_wavefields_and_memories(reflecting_top):
    """The end state is differentiable: gradcheck of every output (wavefield_nt, wavefield_ntm1,
    the four layer memories at the end, the data) with respect to v, the amplitudes and the start
    state, from a start with waves in the layer; two shots, and a reflecting top edge."""
    v0 = torch.tensor(layered((7, 8), np.float64))
    src = torch.tensor([[[3, 4]], [[5, 1]]])
    rec = torch.tensor([[[0, 0], [4, 6]], [[1, 2], [6, 0]]])
    amp0 = torch.tensor(amplitudes(2, 1, 36, DT, np.float64, freq=40.0))
    pml = [3, 2, 2, 3] if not reflecting_top else [0, 2, 2, 3]
    kw = dict(source_locations=src, receiver_locations=rec, pml_width=pml, max_vel=3000.0)
    first = ksweep.scalar(v0, DH, DT, source_amplitudes=amp0[..., :24], **kw)
    names = ("wavefield_0", "wavefield_m1", "psiy_m1", "psix_m1", "zetay_m1", "zetax_m1")
    start = [x.clone().requires_grad_(True) for x in first[:6]]
    v = v0.clone().requires_grad_(True)
    amp = amp0[..., 24:].clone().requires_grad_(True)

    def f(v, amp, *start):
        return ksweep.scalar(v, DH, DT, source_amplitudes=amp, **dict(zip(names, start)), **kw)

    out = f(v, amp, *start)
    assert all(x.abs().max() > 0 for x in out[:6])  # waves in the layer at the end: every memory moves
    assert torch.autograd.gradcheck(f, (v, amp, *start), eps=1e-3, atol=1e-8, rtol=1e-5)
    # A loss of the end alone reaches v, the amplitudes and the start.
    sum(x.pow(2).sum() for x in out[:6]).backward()
    assert all(x.grad is not None and x.grad.abs().max() > 0 for x in (v, amp, *start))


def test_scalar_a_run_cut_in_two_has_the_gradient_of_one_run():
    """A run cut in two, the second call starting where the first ended (its wavefields and
    memories): the data of both pieces have the gradient of the data of one run, with respect to
    v and the amplitudes, to round-off (an independent path: one reverse sweep against two, joined
    through the end state's gradient)."""
    v0, amp0, src, rec = _scalar_case()
    v0, amp0 = v0.double(), amp0.double()
    kw = dict(source_locations=src, receiver_locations=rec, pml_width=8)
    nt, cut = amp0.shape[-1], amp0.shape[-1] // 2
    weights = torch.sin(torch.arange(rec.shape[0] * rec.shape[1] * nt, dtype=torch.float64)).reshape(
        rec.shape[0], rec.shape[1], nt)
    v = v0.clone().requires_grad_(True)
    amp = amp0.clone().requires_grad_(True)
    whole = ksweep.scalar(v, 10.0, 0.001, source_amplitudes=amp, **kw)[-1]
    (whole * weights).sum().backward()
    v2 = v0.clone().requires_grad_(True)
    amp2 = amp0.clone().requires_grad_(True)
    a = ksweep.scalar(v2, 10.0, 0.001, source_amplitudes=amp2[..., :cut], **kw)
    start = dict(zip(("wavefield_0", "wavefield_m1", "psiy_m1", "psix_m1", "zetay_m1", "zetax_m1"), a[:6]))
    b = ksweep.scalar(v2, 10.0, 0.001, source_amplitudes=amp2[..., cut:], **start, **kw)
    joined = torch.cat([a[-1], b[-1]], dim=-1)
    assert torch.equal(joined, whole.detach())  # the same bits forward
    (joined * weights).sum().backward()
    for g, g2 in ((v.grad, v2.grad), (amp.grad, amp2.grad)):
        assert g.abs().max() > 0
        assert (g - g2).abs().max() <= 1e-10 * g.abs().max(), (g - g2).abs().max() / g.abs().max()


def test_scalar_survey_pad_propagates_the_box_around_the_survey():
    """survey_pad: the records of the call are those of the model cut to the box around every
    source and receiver (Deepwave's extents: pads per side, None to the edge), the same bits;
    v's gradient is the cut model's inside the box and zero outside."""
    v0, amp, src, rec = _scalar_case()
    rec = rec[:, 3:6]  # x 18-30; sources at x 20 and 40, z 5
    v = v0.clone().requires_grad_(True)
    d = ksweep.scalar(v, 10.0, 0.001, source_amplitudes=amp, source_locations=src, receiver_locations=rec,
                      pml_width=10, survey_pad=[None, 6, 4, 5])[-1]
    box = (slice(0, 12), slice(14, 46))  # z: 0 to 5 + 6; x: 18 - 4 to 40 + 5
    vc = v0[box].clone().requires_grad_(True)
    shift = torch.tensor([0, 14])
    dc = ksweep.scalar(vc, 10.0, 0.001, source_amplitudes=amp, source_locations=src - shift,
                       receiver_locations=rec - shift, pml_width=10, max_vel=float(v0.max()))[-1]
    assert torch.equal(d, dc)
    d.sum().backward()
    dc.sum().backward()
    assert torch.equal(v.grad[box], vc.grad)
    outside = torch.ones_like(v.grad, dtype=torch.bool)
    outside[box] = False
    assert not v.grad[outside].any() and vc.grad.abs().sum() > 0
    for bad in (-1, [1, 2, 3], 2.5):
        with pytest.raises(ValueError, match="survey_pad"):
            ksweep.scalar(v0, 10.0, 0.001, source_amplitudes=amp, source_locations=src, receiver_locations=rec,
                          survey_pad=bad)


def test_scalar_survey_pad_matches_the_analytic_green_function():
    """A homogeneous model cut to 8 cells around its source and receivers propagates as the
    whole one: the 2D Green's function, within the stencil's dispersion and the layer's reflection."""
    errors = _green_case(161, 80, survey_pad=8)
    assert max(errors) < 5e-3, errors


def test_scalar_takes_a_model_per_shot():
    """v [shot, nz, nx]: each shot on its own model. Two homogeneous models (1500 and 2000 m/s)
    against the 2D Green's function of each velocity, the shots' bits those of one call per
    model, and the gradient reaching each model from its own shot only."""
    n, dh, dt, nt = 121, 5.0, 0.0004, 400
    speeds = (1500.0, 2000.0)
    v = torch.stack([torch.full((n, n), c, dtype=torch.float64) for c in speeds]).requires_grad_(True)
    f = torch.from_numpy(ksweep.ricker(25.0, nt, dt, 0.05)).reshape(1, 1, nt).repeat(2, 1, 1)
    src = torch.tensor([[[60, 60]]] * 2)
    rec = torch.tensor([[[60, 80]]] * 2)
    d = ksweep.scalar(v, dh, dt, source_amplitudes=f, source_locations=src, receiver_locations=rec, accuracy=8,
                      pml_width=30)[-1]
    for i, c in enumerate(speeds):
        want = _green_2d(f[0, 0].numpy(), dt, 20 * dh, c, dh)
        got = d[i, 0].detach().numpy()
        assert np.linalg.norm(got - want) / np.linalg.norm(want) < 5e-3, (i, c)
        one = ksweep.scalar(v[i].detach(), dh, dt, source_amplitudes=f[i:i + 1], source_locations=src[i:i + 1],
                            receiver_locations=rec[i:i + 1], accuracy=8, pml_width=30)[-1]
        assert torch.equal(d[i:i + 1].detach(), one)
    d[1].sum().backward()
    assert not v.grad[0].any() and v.grad[1].abs().sum() > 0
    with pytest.raises(ValueError, match="a model per shot"):
        ksweep.scalar(v.detach()[:1], dh, dt, source_amplitudes=f, source_locations=src, receiver_locations=rec)


def test_scalar_refuses_what_it_does_not_model():
    v, amp, src, rec = _scalar_case()
    kw = dict(source_amplitudes=amp, source_locations=src, receiver_locations=rec)
    with torch.no_grad():
        with pytest.raises(ValueError, match=r"initial wavefield has shape \(40, 60\): \[shot, 2 spatial axes\]"):
            ksweep.scalar(v, 10.0, 0.001, **kw, wavefield_0=torch.zeros(40, 60))
        with pytest.raises(ValueError, match=r"wavefield_m1 has shape \(2, 80, 100\), expected \(2, 80, 99\)"):
            ksweep.scalar(v, 10.0, 0.001, **kw, wavefield_0=torch.zeros(2, 80, 99), wavefield_m1=torch.zeros(2, 80, 100),
                          origin=[0, 0])
        # Deepwave's memories are fields on the grid; ksweep's are its own strips.
        with pytest.raises(ValueError, match="psix_m1 has shape .* layer memories are its own"):
            ksweep.scalar(v, 10.0, 0.001, **kw, psix_m1=torch.zeros(2, 80, 100))
        with pytest.raises(ValueError, match="psiz_m1 and zetaz_m1 are 3D's"):
            ksweep.scalar(v, 10.0, 0.001, **kw, psiz_m1=torch.zeros(2, 10))
        with pytest.raises(ValueError, match="callback_frequency = 0"):
            ksweep.scalar(v, 10.0, 0.001, **kw, forward_callback=print, callback_frequency=0)
    with pytest.raises(NotImplementedError, match="the forward_callback changed the wavefields .at sample 0., and a "
                                                  "backward_callback is given"):
        ksweep.scalar(v.clone().requires_grad_(True), 10.0, 0.001, **kw,
                      forward_callback=lambda st: st.get_wavefield("wavefield_0").add_(1.0),
                      backward_callback=lambda st: None)
    with pytest.raises(ValueError, match=r"grid_spacing = \[10.0, 0.0\]: grid spacings must be finite and > 0"):
        ksweep.scalar(v, [10.0, 0.0], 0.001, **kw)
    with pytest.raises(ValueError, match=r"grid_spacing = \[10.0, 5.0, 5.0\]: give one spacing \(m\), or one per axis \[dz, dx\]"):
        ksweep.scalar(v, [10.0, 5.0, 5.0], 0.001, **kw)
    with pytest.raises(TypeError, match="grid_spacing = 'ten' must be a spacing in metres"):
        ksweep.scalar(v, "ten", 0.001, **kw)
    with pytest.raises(TypeError, match="same dtype"):
        ksweep.scalar(v.float(), 10.0, 0.001, **kw)


# --- ksweep.scalar: wavefields in and out, callbacks --------------------------------------------

def _at(u, points, layer):
    """u [shot, *padded] at points [shot, n, dim] of the model (the layer `layer` cells wide)."""
    return u[(torch.arange(u.shape[0]).unsqueeze(1),) + tuple(points[..., d] + layer for d in range(points.shape[-1]))]


def test_scalar_returns_the_final_wavefields():
    """wavefield_nt and wavefield_ntm1 cover the model and its layer, [shot, 40 + 20, 60 + 20]: at
    the receivers they are samples nt and nt - 1 of a run one sample longer (Deepwave's u^t at
    sample t), the same bits; the memories are ksweep's strips, [shot, values]."""
    v, amp, src, rec = _scalar_case()
    kw = dict(source_locations=src, receiver_locations=rec, pml_width=10)
    wnt, wntm1, psiy, psix, zetay, zetax, d = ksweep.scalar(v, 10.0, 0.001, source_amplitudes=amp, **kw)
    assert wnt.shape == wntm1.shape == (2, 60, 80) and wnt.dtype == v.dtype
    assert psiy.shape == zetay.shape and psix.shape == zetax.shape and psiy.shape[0] == 2 and psix.shape[1] > 0
    longer = ksweep.scalar(v, 10.0, 0.001, source_amplitudes=torch.cat([amp, amp[..., :1] * 0], -1), **kw)[-1]
    assert torch.equal(longer[..., :300], d)
    assert torch.equal(_at(wnt, rec, 10), longer[..., 300]) and torch.equal(_at(wntm1, rec, 10), longer[..., 299])
    assert longer[..., 300].abs().max() > 0


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_scalar_run_cut_in_two_gives_one_run_s_bits(dtype):
    """Deepwave's way of running in pieces: the second piece starts from the first's final
    wavefields and layer memories; its data and final state are one run's, bit for bit. Waves
    are in the layer at the cut: without the memories the data differ."""
    v, amp, src, rec = _scalar_case(dtype)
    kw = dict(source_locations=src, receiver_locations=rec, pml_width=10)
    whole = ksweep.scalar(v, 10.0, 0.001, source_amplitudes=amp, **kw)
    first = ksweep.scalar(v, 10.0, 0.001, source_amplitudes=amp[..., :120], **kw)
    names = ("wavefield_0", "wavefield_m1", "psiy_m1", "psix_m1", "zetay_m1", "zetax_m1")
    second = ksweep.scalar(v, 10.0, 0.001, source_amplitudes=amp[..., 120:], **dict(zip(names, first[:-1])), **kw)
    assert torch.equal(torch.cat([first[-1], second[-1]], -1), whole[-1])
    assert all(torch.equal(a, b) for a, b in zip(second[:-1], whole[:-1]))
    without = ksweep.scalar(v, 10.0, 0.001, source_amplitudes=amp[..., 120:], wavefield_0=first[0],
                            wavefield_m1=first[1], **kw)[-1]
    assert not torch.equal(without, whole[-1][..., 120:]) and first[2].abs().max() > 0


def test_scalar_3d_run_cut_in_two_gives_one_run_s_bits():
    """3D: the memories of z, y and x (psiz_m1 ... zetax_m1) carry a run on, the same bits."""
    v = torch.full((12, 10, 14), 2000.0, dtype=torch.float64)
    v[6:] = 2400.0
    amp = torch.from_numpy(ksweep.ricker(40.0, 90, 0.001)).reshape(1, 1, 90)
    src = torch.tensor([[[3, 5, 6]]])
    rec = torch.tensor([[[2, 1, 1], [9, 8, 12], [5, 5, 0]]])
    kw = dict(source_locations=src, receiver_locations=rec, pml_width=[4, 4, 3, 5, 4, 4])
    whole = ksweep.scalar(v, 10.0, 0.001, source_amplitudes=amp, **kw)
    assert len(whole) == 9 and whole[0].shape == (1, 20, 18, 22)
    first = ksweep.scalar(v, 10.0, 0.001, source_amplitudes=amp[..., :40], **kw)
    names = ("wavefield_0", "wavefield_m1", "psiz_m1", "psiy_m1", "psix_m1", "zetaz_m1", "zetay_m1", "zetax_m1")
    second = ksweep.scalar(v, 10.0, 0.001, source_amplitudes=amp[..., 40:], **dict(zip(names, first[:-1])), **kw)
    assert torch.equal(torch.cat([first[-1], second[-1]], -1), whole[-1])
    assert all(torch.equal(a, b) for a, b in zip(second[:-1], whole[:-1]))


def test_scalar_initial_wavefield_is_the_source_it_stands_for():
    """wavefield_m1 = v^2 dt^2 a at a cell is Deepwave's source of amplitude a at sample 0 there
    (its term -v^2 dt^2 f enters u^1 as "- u^{-1}" does), and wavefield_0 = -v^2 dt^2 a
    (u^{-1} = 0) is that run one sample on: the data agree to round-off."""
    v, amp, src, rec = _scalar_case()
    kw = dict(source_locations=src, receiver_locations=rec, pml_width=10)
    kick = torch.zeros_like(amp)
    kick[..., 0] = 1.0
    ref = ksweep.scalar(v, 10.0, 0.001, source_amplitudes=kick, **kw)[-1]
    m1 = torch.zeros(2, 60, 80, dtype=v.dtype)
    for s in range(2):
        z, x = (int(c) for c in src[s, 0])
        m1[s, z + 10, x + 10] = v[z, x] ** 2 * 0.001**2
    with torch.no_grad():
        d = ksweep.scalar(v, 10.0, 0.001, source_amplitudes=kick * 0, wavefield_m1=m1, **kw)[-1]
        d0 = ksweep.scalar(v, 10.0, 0.001, source_amplitudes=kick * 0, wavefield_0=-m1, **kw)[-1]
    tol = 1e-12 * float(ref.abs().max())
    assert float(ref.abs().max()) > 0
    assert float((d - ref).abs().max()) <= tol and float((d0[..., :-1] - ref[..., 1:]).abs().max()) <= tol


def test_scalar_origin_places_the_initial_wavefields_in_the_model():
    """origin (Deepwave's): initial wavefields smaller than the model choose the simulated box,
    their shape less the layer from `origin`. The run is the one on the model cut to the box (the
    same bits, final wavefields included), whatever the model holds outside it; without origin
    the box starts at cell 0, with a warning; bad boxes are refused."""
    v, amp, _, _ = _scalar_case()
    src = torch.tensor([[[15, 20]], [[18, 40]]])
    rec = torch.tensor([[[12, x] for x in range(14, 50, 5)]] * 2)
    kw = dict(source_amplitudes=amp[..., :150], pml_width=[10, 6, 4, 10], max_vel=2500.0)
    z = torch.arange(20 + 16, dtype=v.dtype).reshape(1, -1, 1)
    x = torch.arange(40 + 14, dtype=v.dtype).reshape(1, 1, -1)
    u0 = torch.exp(-((z - 18.0) ** 2 + (x - 30.0) ** 2) / 8.0).repeat(2, 1, 1)  # a bump in the box
    with torch.no_grad():
        d = ksweep.scalar(v, 10.0, 0.001, source_locations=src, receiver_locations=rec, wavefield_0=u0,
                          wavefield_m1=0.9 * u0, origin=[10, 12], **kw)
        shift = torch.tensor([10, 12])
        ref = ksweep.scalar(v[10:30, 12:52], 10.0, 0.001, source_locations=src - shift, receiver_locations=rec - shift,
                            wavefield_0=u0, wavefield_m1=0.9 * u0, **kw)
        assert d[0].shape == (2, 36, 54) and all(torch.equal(a, b) for a, b in zip(d, ref))
        assert d[-1].abs().max() > 0
        outside = v.clone()
        outside[:10] = 4000.0
        outside[:, 52:] = 1000.0
        again = ksweep.scalar(outside, 10.0, 0.001, source_locations=src, receiver_locations=rec, wavefield_0=u0,
                              wavefield_m1=0.9 * u0, origin=[10, 12], **kw)
        assert torch.equal(again[-1], d[-1])
        with pytest.warns(UserWarning, match="origin not given"):
            at0 = ksweep.scalar(v, 10.0, 0.001, source_locations=src - shift, receiver_locations=rec - shift,
                                wavefield_0=u0, **kw)
        assert torch.equal(at0[-1], ksweep.scalar(v, 10.0, 0.001, source_locations=src - shift,
                                                  receiver_locations=rec - shift, wavefield_0=u0, origin=[0, 0],
                                                  **kw)[-1])
        one = dict(source_locations=src, receiver_locations=rec, wavefield_0=u0, **kw)
        for bad, needle in (([10], "a list of 2 ints"), ([10, 1.5], "a list of 2 ints"), ([-1, 12], ">= 0"),
                            ([30, 12], r"cells \[30, 50\) along axis 0 .* beyond the model's 40"),
                            ([10, 15], "outside the initial wavefields' box")):
            with pytest.raises(ValueError, match=needle):
                ksweep.scalar(v, 10.0, 0.001, origin=bad, **one)
        with pytest.raises(ValueError, match="survey_pad or origin, not both"):
            ksweep.scalar(v, 10.0, 0.001, origin=[10, 12], survey_pad=4, **one)
        with pytest.raises(ValueError, match="give wavefield_0 or wavefield_m1 with it"):
            ksweep.scalar(v, 10.0, 0.001, source_locations=src, receiver_locations=rec, origin=[10, 12], **kw)
        with pytest.raises(ValueError, match="no model cell is left"):
            ksweep.scalar(v, 10.0, 0.001, source_locations=src, receiver_locations=rec, wavefield_0=u0[:, :16],
                          origin=[0, 0], **kw)


def test_scalar_forward_callback():
    """forward_callback before every callback_frequency samples (0, 50, ..., 250), as Deepwave:
    what it sees at sample k is the final wavefield of a k-sample run (the same bits), through
    the "inner" and "pml" views; the model's "pml" view copies the edges into the layer; a
    callback that only looks leaves the run's bits alone; one that zeroes the wavefields (a
    reflecting box: no layer memories) silences the rest of the run once the source has ended."""
    v, amp, src, rec = _scalar_case()
    kw = dict(source_locations=src, receiver_locations=rec, pml_width=10)
    seen = {}

    def look(state):
        seen[state.step] = (state.get_wavefield("wavefield_0").clone(),
                            state.get_wavefield("wavefield_0", view="pml").clone(), state.get_model("v", "pml"))

    with torch.no_grad():
        out = ksweep.scalar(v, 10.0, 0.001, source_amplitudes=amp, forward_callback=look, callback_frequency=50, **kw)
    whole = ksweep.scalar(v, 10.0, 0.001, source_amplitudes=amp, **kw)
    assert sorted(seen) == [0, 50, 100, 150, 200, 250]
    assert all(torch.equal(a, b) for a, b in zip(out, whole))
    at100 = ksweep.scalar(v, 10.0, 0.001, source_amplitudes=amp[..., :100], **kw)[0]
    inner, pml, model = seen[100]
    assert torch.equal(pml, at100) and torch.equal(inner, at100[:, 10:50, 10:70]) and at100.abs().max() > 0
    assert model.shape == (60, 80) and torch.equal(model[10:50, 10:70], v)
    assert torch.equal(model[0, 10:70], v[0]) and torch.equal(model[59, :10], v[39, :1].expand(10))
    with pytest.raises(KeyError, match="psiz_m1.*the callback has"):  # 2D: no z memories
        ksweep.scalar(v, 10.0, 0.001, source_amplitudes=amp.detach(), **kw,
                      forward_callback=lambda s: s.get_wavefield("psiz_m1"))

    def silence(state):
        if state.step == 200:
            state.get_wavefield("wavefield_0", "pml").zero_()
            state.get_wavefield("wavefield_m1", "pml").zero_()

    quiet = amp.clone()
    quiet[..., 200:] = 0
    box = dict(source_locations=src, receiver_locations=rec, pml_width=0)
    with torch.no_grad():
        d = ksweep.scalar(v, 10.0, 0.001, source_amplitudes=quiet, forward_callback=silence, callback_frequency=50,
                          **box)[-1]
    ref = ksweep.scalar(v, 10.0, 0.001, source_amplitudes=quiet, **box)[-1]
    assert torch.equal(d[..., :200], ref[..., :200]) and not d[..., 200:].any() and ref[..., 200:].abs().max() > 0


def test_scalar_forward_callback_with_a_gradient():
    """A callback that looks, with v and the amplitudes requiring grad: it sees the steps it sees
    without a gradient (the same wavefields, bit for bit), and the data, end state and gradients
    are the same bits as the run without a callback."""
    v, amp, src, rec = _scalar_case()
    kw = dict(source_locations=src, receiver_locations=rec, pml_width=10)
    seen, seen_ng = {}, {}

    def look(into):
        return lambda st: into.__setitem__(st.step, st.get_wavefield("wavefield_0", view="pml").clone())

    with torch.no_grad():
        ksweep.scalar(v, 10.0, 0.001, source_amplitudes=amp, forward_callback=look(seen_ng), callback_frequency=60,
                      **kw)
    outs, grads = [], []
    for callback in (look(seen), None):
        vg, ag = v.clone().requires_grad_(True), amp.clone().requires_grad_(True)
        out = ksweep.scalar(vg, 10.0, 0.001, source_amplitudes=ag, forward_callback=callback, callback_frequency=60,
                            **kw)
        (out[-1] ** 2).sum().backward()
        outs.append([o.detach() for o in out])
        grads.append((vg.grad, ag.grad))
    assert sorted(seen) == [0, 60, 120, 180, 240] and sorted(seen_ng) == sorted(seen)
    assert all(torch.equal(seen[k], seen_ng[k]) for k in seen) and seen[120].abs().max() > 0
    assert all(torch.equal(a, b) for a, b in zip(*outs))
    assert torch.equal(grads[0][0], grads[1][0]) and torch.equal(grads[0][1], grads[1][1])
    assert grads[0][0].abs().max() > 0 and grads[0][1].abs().max() > 0


def test_scalar_a_forward_callback_that_changes_the_run_is_differentiable():
    """A callback that changes the run under a gradient: the run is chained through the
    callback's pieces, so the gradient follows its changes. Zeroing the wavefields at sample 120
    in a reflecting box (no layer memories) makes the data those of two runs, one up to 120 and
    one from rest with the sources after it: the gradient with respect to v and the amplitudes is
    theirs (independent calls, to round-off). With a layer, a callback that scales the wavefields
    and a memory passes gradcheck (v, the amplitudes, the start wavefield), and is called once
    per piece but at its first change (once more there)."""
    v0, amp0, src, rec = _scalar_case()
    box = dict(source_locations=src, receiver_locations=rec, pml_width=0)
    weights = torch.cos(torch.arange(2 * 10 * 300, dtype=torch.float64)).reshape(2, 10, 300)

    def silence(st):
        if st.step == 120:
            st.get_wavefield("wavefield_0", "pml").zero_()
            st.get_wavefield("wavefield_m1", "pml").zero_()

    v, amp = v0.clone().requires_grad_(True), amp0.clone().requires_grad_(True)
    d = ksweep.scalar(v, 10.0, 0.001, source_amplitudes=amp, forward_callback=silence, callback_frequency=60, **box)[-1]
    (d * weights).sum().backward()
    v2, amp2 = v0.clone().requires_grad_(True), amp0.clone().requires_grad_(True)
    a = ksweep.scalar(v2, 10.0, 0.001, source_amplitudes=amp2[..., :120], **box)[-1]
    b = ksweep.scalar(v2, 10.0, 0.001, source_amplitudes=amp2[..., 120:], **box)[-1]
    ((a * weights[..., :120]).sum() + (b * weights[..., 120:]).sum()).backward()
    assert torch.equal(d.detach(), torch.cat([a, b], dim=-1).detach())
    for g, g2 in ((v.grad, v2.grad), (amp.grad, amp2.grad)):
        assert g.abs().max() > 0 and (g - g2).abs().max() <= 1e-10 * g.abs().max()

    v0 = torch.tensor(layered((7, 8), np.float64))
    s1 = torch.tensor([[[3, 4]], [[5, 1]]])
    r1 = torch.tensor([[[0, 0], [4, 6]], [[1, 2], [6, 0]]])
    amp0 = torch.tensor(amplitudes(2, 1, 30, DT, np.float64, freq=40.0))
    kw = dict(source_locations=s1, receiver_locations=r1, pml_width=[3, 2, 2, 3], max_vel=3000.0)
    calls = []

    def scale(st):
        calls.append(st.step)
        if st.step >= 10:
            st.get_wavefield("wavefield_0").mul_(0.5)
            st.get_wavefield("psix_m1").mul_(0.75)

    w0 = torch.sin(torch.arange(2 * 12 * 13, dtype=torch.float64)).reshape(2, 12, 13).requires_grad_(True)

    def f(v, amp, w0):
        return ksweep.scalar(v, DH, DT, source_amplitudes=amp, wavefield_0=w0, forward_callback=scale,
                             callback_frequency=5, **kw)

    args = (v0.clone().requires_grad_(True), amp0.clone().requires_grad_(True), w0)
    out = f(*args)
    assert calls == [0, 5, 10, 10, 15, 20, 25]
    assert torch.autograd.gradcheck(f, args, eps=1e-3, atol=1e-8, rtol=1e-5)
    with torch.no_grad():  # the same run as without a gradient
        assert all(torch.equal(x, y) for x, y in zip(out, f(*[x.detach() for x in args])))


def test_scalar_backward_callback():
    """backward_callback as Deepwave calls it, at samples nt - f, nt - 2f, ..., and 0. Its wavefield
    at sample k is lambda^k = dL/du^k: against the change of the loss when a forward callback adds
    1 to u^k at one cell (the loss is linear in the data: exact to round-off). A callback that
    looks leaves the gradient's bits alone. Zeroing the adjoint wavefields at sample k, with no
    data before it, leaves the gradient of the steps after k, which the callback saw there;
    halving the gradient at sample 0 halves the sweep's part of v's gradient (the rest comes
    from the source term -v^2 dt^2 f)."""
    v, amp, src, rec = _scalar_case()
    kw = dict(source_amplitudes=amp, source_locations=src, receiver_locations=rec, pml_width=10)
    w = torch.from_numpy(np.random.default_rng(3).standard_normal((2, 10, 300)))
    w[..., :130] = 0.0  # no data before sample 130

    def run(callback, **change):
        vg = v.clone().requires_grad_(True)
        out = ksweep.scalar(vg, 10.0, 0.001, **{**kw, **change}, backward_callback=callback, callback_frequency=60)
        (out[-1] * w).sum().backward()
        return vg.grad

    seen = {}

    def look(st):
        seen[st.step] = (st.get_wavefield("wavefield_0").clone(), st.get_wavefield("wavefield_m1", "pml").clone(),
                         st.get_gradient("v").clone(), st.get_gradient("v", "full").clone())

    plain, looked = run(None), run(look)
    assert sorted(seen) == [0, 60, 120, 180, 240]
    assert torch.equal(plain, looked)
    lam, after, grad, full = seen[120]
    assert lam.shape == (2, 40, 60) and after.shape == (2, 60, 80) and full.shape == (60, 80)
    assert torch.equal(full[10:50, 10:70], grad) and not full[:10].any() and not full[:, 70:].any()
    assert grad.abs().max() > 0 and not torch.equal(grad, seen[0][2])

    cell = (0, 25, 30)  # shot 0, an interior cell 20 cells below the receivers

    def loss_with(bump):
        def add(st):
            if st.step == 120:
                st.get_wavefield("wavefield_0")[cell] += bump
        with torch.no_grad():
            d = ksweep.scalar(v, 10.0, 0.001, **kw, forward_callback=add, callback_frequency=60)[-1]
        return float((d * w).sum())

    change = loss_with(1.0) - loss_with(0.0)
    assert abs(float(lam[cell])) > 0 and abs(change - float(lam[cell])) <= 1e-9 * abs(float(lam[cell]))

    source_term = plain - seen[0][2]  # v's gradient through the source's -v^2 dt^2 scaling
    tol = dict(rtol=1e-12, atol=1e-12 * float(plain.abs().max()))

    def halve(st):
        if st.step == 0:
            st.get_gradient("v", "full").mul_(0.5)

    assert torch.allclose(run(halve), 0.5 * seen[0][2] + source_term, **tol)

    # In a reflecting box (no absorbing layer, whose adjoint memories a callback cannot set) zeroing
    # the adjoint wavefields at sample 120 ends the sweep's sum there.
    kept = {}

    def zero(st):
        kept.setdefault("at0", None)
        if st.step == 120:
            kept["grad"] = st.get_gradient("v").clone()
            st.get_wavefield("wavefield_0").zero_()
            st.get_wavefield("wavefield_m1").zero_()
        if st.step == 0:
            kept["at0"] = st.get_gradient("v").clone()

    box = dict(pml_width=0)
    box_plain, zeroed = run(None, **box), run(zero, **box)
    assert kept["grad"].abs().max() > 0 and torch.equal(kept["at0"], kept["grad"])
    assert not torch.allclose(zeroed, box_plain, **tol)


def test_scalar_callbacks_see_the_layer_memories():
    """Forward, get_wavefield("psiy_m1") ... are the run's memories at the sample (the final
    memories of a run that ends there, the same bits), and zeroing them in place is a run whose
    second piece starts without them. Backward, at sample 0 they are the adjoint memories, the
    gradient of the loss with respect to the start's memories (the same bits as their .grad);
    changed, the sweep goes on from them."""
    v, amp, src, rec = _scalar_case()
    kw = dict(source_locations=src, receiver_locations=rec, pml_width=10)
    names = ("psiy_m1", "psix_m1", "zetay_m1", "zetax_m1")
    seen = {}

    def look(st):
        seen[st.step] = {k: st.get_wavefield(k).clone() for k in names}
        assert torch.equal(st.get_wavefield("psiy_m1", "full"), seen[st.step]["psiy_m1"])

    whole = ksweep.scalar(v, 10.0, 0.001, source_amplitudes=amp, **kw, forward_callback=look, callback_frequency=120)
    assert sorted(seen) == [0, 120, 240]
    first = ksweep.scalar(v, 10.0, 0.001, source_amplitudes=amp[..., :120], **kw)
    assert all(torch.equal(seen[120][k], x) for k, x in zip(names, first[2:6]))
    assert seen[120]["psiy_m1"].abs().max() > 0 and not any(x.any() for x in seen[0].values())

    def drop(st):
        if st.step == 120:
            for k in names:
                st.get_wavefield(k).zero_()

    dropped = ksweep.scalar(v, 10.0, 0.001, source_amplitudes=amp, **kw, forward_callback=drop, callback_frequency=120)
    second = ksweep.scalar(v, 10.0, 0.001, source_amplitudes=amp[..., 120:], wavefield_0=first[0], wavefield_m1=first[1],
                           **kw)
    assert torch.equal(dropped[-1][..., 120:], second[-1]) and not torch.equal(dropped[-1], whole[-1])

    start = [x.clone().requires_grad_(True) for x in first[2:6]]
    w = torch.from_numpy(np.random.default_rng(5).standard_normal((2, 10, 180)))
    adjoint = {}

    def back(st):
        if st.step == 0:
            adjoint.update({k: st.get_wavefield(k).clone() for k in names})

    out = ksweep.scalar(v, 10.0, 0.001, source_amplitudes=amp[..., 120:], wavefield_0=first[0], wavefield_m1=first[1],
                        **dict(zip(names, start)), **kw, backward_callback=back, callback_frequency=60)
    (out[-1] * w).sum().backward()
    assert all(torch.equal(adjoint[k], x.grad) for k, x in zip(names, start))
    assert adjoint["psix_m1"].abs().max() > 0

    # Adding d to the adjoint memories at sample 60 adds the gradient of <d, the memories of a
    # 60-sample run> (the same start): against that run's own reverse sweep, which starts from
    # the end state's gradient (an independent path), to round-off; here with respect to u^{-1}.
    d = {k: torch.from_numpy(np.random.default_rng(7).standard_normal(tuple(x.shape))) for k, x in zip(names, start)}

    def add(st):
        if st.step == 60:
            for k in names:
                st.get_wavefield(k).add_(d[k])

    def start_grad(n, callback=None, loss=None):
        u = first[1].clone().requires_grad_(True)
        o = ksweep.scalar(v, 10.0, 0.001, source_amplitudes=amp[..., 120:120 + n], wavefield_0=first[0],
                          wavefield_m1=u, **dict(zip(names, first[2:6])), **kw, backward_callback=callback,
                          callback_frequency=60)
        loss(o).backward()
        return u.grad

    changed = start_grad(180, add, lambda o: (o[-1] * w).sum())
    plain = start_grad(180, None, lambda o: (o[-1] * w).sum())
    part = start_grad(60, None, lambda o: sum((o[2 + i] * d[k]).sum() for i, k in enumerate(names)))
    assert part.abs().max() > 0
    assert (changed - (plain + part)).abs().max() <= 1e-10 * changed.abs().max()


def test_numpy_calls_take_tensors_and_return_tensors():
    """ksweep.forward, adjoint and gradient with torch tensors: the same bits as with arrays,
    tensors back on v's device, of v's dtype."""
    v, amp, src, rec = _scalar_case(torch.float32)
    d = ksweep.forward(v, 10.0, 0.001, amp, src, rec, pml_width=10)
    ref = ksweep.forward(v.numpy(), 10.0, 0.001, amp.numpy(), src.numpy(), rec.numpy(), pml_width=10)
    assert torch.is_tensor(d) and d.dtype == torch.float32 and d.device == v.device
    assert np.array_equal(d.numpy(), ref)
    a = ksweep.adjoint(v, 10.0, 0.001, d, src, rec, pml_width=10)
    assert torch.is_tensor(a) and np.array_equal(a.numpy(), ksweep.adjoint(v.numpy(), 10.0, 0.001, ref, src.numpy(),
                                                                            rec.numpy(), pml_width=10))
    g = ksweep.gradient(v.requires_grad_(True), 10.0, 0.001, amp, src, rec, d * 0.5, pml_width=10)
    assert torch.is_tensor(g.grad["vp"]) and torch.is_tensor(g.data) and g.grad["vp"].shape == v.shape
    assert np.array_equal(g.data.numpy(), ref)


@pytest.mark.parametrize("layer", [False, True])
def test_born_gradcheck_and_lsrtm_by_torch(layer):
    """ksweep.torch.born: gradcheck with respect to scatter in float64 (backward: Born's exact
    transpose), with the layer a copy of v's edges or given; its values are ksweep.born's; a few
    steps of a torch optimizer on |born(m) - d|^2 lower the misfit; v requiring grad is refused."""
    v0 = layered((10, 12), np.float64)
    src, rec = survey(v0.shape, shots=2, receivers=4, z_src=3, z_rec=1)
    amp = torch.tensor(amplitudes(2, 1, 50, DT, np.float64, freq=40.0))
    kw = dict(pml_width=4, order=4, layer_velocity=v0 if layer else None)
    scatter = torch.tensor(np.random.default_rng(4).uniform(-20, 20, v0.shape), requires_grad=True)

    def f(s):
        return kt.born(torch.tensor(v0), DH, DT, amp, src, rec, s, **kw)

    assert torch.autograd.gradcheck(f, (scatter,), eps=1e-3, atol=1e-8, rtol=1e-5)
    assert np.array_equal(f(scatter).detach().numpy(),
                          ksweep.born(v0, DH, DT, amp.numpy(), src, rec, scatter.detach().numpy(), **kw))
    d = f(scatter).detach()
    m = torch.zeros(v0.shape, dtype=torch.float64, requires_grad=True)
    opt = torch.optim.SGD([m], lr=0.0)
    losses = []
    for _ in range(4):
        opt.zero_grad()
        loss = ((f(m) - d) ** 2).sum()
        loss.backward()
        if not losses:  # a step the first gradient's size allows
            opt.param_groups[0]["lr"] = 0.5 * float(loss) / float((m.grad ** 2).sum())
        losses.append(float(loss))
        opt.step()
    assert all(b < a for a, b in zip(losses, losses[1:])), losses
    with pytest.raises(NotImplementedError, match="v requires grad"):
        kt.born(torch.tensor(v0, requires_grad=True), DH, DT, amp, src, rec, scatter, **kw)
