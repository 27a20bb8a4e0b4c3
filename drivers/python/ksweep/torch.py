"""ksweep's forward modelling as a PyTorch autograd function.

    import torch, ksweep.torch
    v = torch.tensor(v0, requires_grad=True)
    data = ksweep.torch.forward(v, dh, dt, amplitudes, src, rec)      # [shot, receiver, time]
    loss = torch.nn.functional.mse_loss(data, observed)
    loss.backward()                                                    # v.grad: dL/dv

Backward runs ksweep's exact discrete adjoint: a forward pass that saves the boundary of the
wavefield (`storage`, `storage_location`, `storage_dtype`), then the reverse pass with imaging;
the gradient with respect to the source amplitudes, when they require it, is the adjoint pass.
The absorbing layer's velocity and damping come from `layer_velocity` (default: v itself, taken
as a constant): with a fixed `layer_velocity` the records are a smooth function of v whose
derivative is exactly what backward returns (torch.autograd.gradcheck passes in float64).
With `rho` (a tensor, kg/m^3) the physics is variable-density acoustics and backward also
returns dL/drho (`layer_density` then fixes the layer's density, as `layer_velocity` does).

Tensors cross to ksweep as numpy arrays on the host (CPU tensors share their memory).
This module imports torch; `import ksweep` does not.
"""

from __future__ import annotations

import numpy as np
import torch

import ksweep as _ks

__all__ = ["forward", "Forward"]


def _np(t: torch.Tensor) -> np.ndarray:
    return t.detach().cpu().numpy()


class Forward(torch.autograd.Function):
    """records = F(v, amplitudes, rho); see forward()."""

    @staticmethod
    def forward(ctx, v, amplitudes, rho, dh, dt, source_locations, receiver_locations, layer_velocity, options):
        vn = _np(v)
        s = _ks._survey(vn, source_locations, receiver_locations, dh, options["location_units"])
        amp = _ks._amplitudes(_np(amplitudes), s)
        m = _ks._modeling(s, dh, dt, amp.shape[2], order=options["order"], pml_width=options["pml_width"],
                          pml_reflection=options["pml_reflection"], pml_freq=options["pml_freq"],
                          pml_velocity=options["pml_velocity"],
                          free_surface=options["free_surface"], batch=options["batch"],
                          schedule=options["schedule"], storage=options["storage"],
                          storage_location=options["storage_location"], storage_dtype=options["storage_dtype"],
                          disk_dir=options["disk_dir"], physics="acoustic" if rho is None else "acoustic_vd")

        def host(a):
            return None if a is None else _np(a) if torch.is_tensor(a) else np.asarray(a)
        layer = vn if layer_velocity is None else host(layer_velocity)
        if rho is None:
            m.set_velocity(s.v, _ks._layer(layer, s))
        else:
            rn = host(rho)
            layer_rho = rn if options["layer_density"] is None else host(options["layer_density"])
            _ks._set_model(m, s, rn, layer, layer_rho)
        records = m.forward(amp)  # [shot, time, receiver]
        ctx.modeling = m
        ctx.amplitudes = amp
        ctx.device = v.device
        return torch.from_numpy(records).to(v.device).transpose(1, 2)

    @staticmethod
    def backward(ctx, grad_output):
        m = ctx.modeling
        g = np.ascontiguousarray(_np(grad_output).transpose(0, 2, 1))  # [shot, time, receiver]
        g = g.astype(ctx.amplitudes.dtype, copy=False)
        grad_v = grad_amp = grad_rho = None
        dtype = ctx.amplitudes.dtype
        if ctx.needs_input_grad[0] or ctx.needs_input_grad[2]:
            grad, _, _, grho = m.vjp(ctx.amplitudes, g)
            if ctx.needs_input_grad[0]:
                grad_v = torch.from_numpy(grad.astype(dtype, copy=False)).to(ctx.device)
            if ctx.needs_input_grad[2]:
                grad_rho = torch.from_numpy(grho.astype(dtype, copy=False)).to(ctx.device)
        if ctx.needs_input_grad[1]:
            grad_amp = torch.from_numpy(m.adjoint(g)).to(ctx.device)
        return grad_v, grad_amp, grad_rho, None, None, None, None, None, None


def forward(v: torch.Tensor, dh: float, dt: float, source_amplitudes: torch.Tensor, source_locations,
            receiver_locations, *, order: int = 4, pml_width=20, pml_reflection: float = 1e-3,
            pml_freq: float = 25.0, pml_velocity=None, free_surface: bool = False, batch: int = 0,
            schedule: str = "auto", location_units: str = "cells", layer_velocity=None, storage: str = "boundary",
            storage_location: str = "device", storage_dtype: str = "fp32", disk_dir: str = "", rho=None,
            layer_density=None) -> torch.Tensor:
    """Receiver data [shot, receiver, time] as a tensor that back-propagates into `v` (and into
    `source_amplitudes` and `rho` when they require grad). Arguments as ksweep.forward."""
    if not torch.is_tensor(v):
        raise TypeError(f"v is a {type(v).__name__}; ksweep.torch.forward takes tensors (ksweep.forward takes arrays)")
    if not torch.is_tensor(source_amplitudes):
        source_amplitudes = torch.as_tensor(source_amplitudes)
    options = dict(order=order, pml_width=pml_width, pml_reflection=pml_reflection, pml_freq=pml_freq,
                   pml_velocity=pml_velocity,
                   free_surface=free_surface, batch=batch, schedule=schedule, location_units=location_units,
                   storage=storage, storage_location=storage_location, storage_dtype=storage_dtype,
                   disk_dir=disk_dir, layer_density=layer_density)
    if rho is not None and not torch.is_tensor(rho):
        rho = torch.as_tensor(rho)
    src = source_locations.cpu().numpy() if torch.is_tensor(source_locations) else source_locations
    rec = receiver_locations.cpu().numpy() if torch.is_tensor(receiver_locations) else receiver_locations
    return Forward.apply(v, source_amplitudes, rho, dh, dt, src, rec, layer_velocity, options)
