"""ksweep.torch: the forward modelling as a torch.autograd.Function."""
import numpy as np
import pytest

import ksweep
from conftest import amplitudes, layered, survey

torch = pytest.importorskip("torch")
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


def test_torch_needs_tensors():
    v0 = layered((20, 24))
    src, rec = survey(v0.shape)
    with pytest.raises(TypeError, match="takes tensors"):
        kt.forward(v0, DH, DT, amplitudes(3, 1, 50, DT), src, rec)
