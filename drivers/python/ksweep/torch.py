"""ksweep's forward modelling as a PyTorch autograd function.

    import torch, ksweep.torch
    v = torch.tensor(v0, requires_grad=True)
    data = ksweep.torch.forward(v, dh, dt, amplitudes, src, rec)      # [shot, receiver, time]
    loss = torch.nn.functional.mse_loss(data, observed)
    loss.backward()                                                    # v.grad: dL/dv

Backward runs ksweep's exact discrete adjoint: a forward pass that saves the boundary of the
wavefield (`storage`, `storage_location`, `storage_dtype`), then the reverse pass with imaging;
the gradient with respect to the source amplitudes, when they require it, is the adjoint pass.
The absorbing layer is a copy of v's edge cells, and backward takes that copy's chain rule, so
the edge cells' derivative is exact too (at the cost of saving the layer's cells every step);
`layer_velocity` holds the layer at a velocity of its own instead (nothing more saved). The
damping profiles' velocity is `pml_velocity` (default: the largest velocity of the model, a
constant for the derivative: give it for a map that is smooth in every cell). Either way the
records are a smooth function of v whose derivative is what backward returns
(torch.autograd.gradcheck passes in float64). With `rho` (a tensor, kg/m^3) the physics is
variable-density acoustics and backward also returns dL/drho; the layer's density is held at
the edge cells' values for the derivative (`layer_density` fixes it, as `layer_velocity` does
the velocity), the layer velocity's chain rule is taken.

`born` is Born modelling as an autograd function of the velocity perturbation (backward: its
exact transpose), for least-squares RTM with torch's optimizers.

Tensors cross to ksweep as numpy arrays on the host (CPU tensors share their memory).
This module imports torch; `import ksweep` does not.
"""

from __future__ import annotations

import inspect

import numpy as np
import torch

import ksweep as _ks

__all__ = ["forward", "Forward", "born", "Born", "scalar"]


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
        # No layer_velocity: the layer is the propagator's copy of v's edge cells, and backward
        # takes its chain rule (the edge cells' exact derivative).
        layer = None if layer_velocity is None else host(layer_velocity)
        if rho is None:
            m.set_velocity(s.v, _ks._layer(layer, s))
        else:
            rn = host(rho)
            layer_rho = options["layer_density"]
            if (layer is None) != (layer_rho is None):  # one of them fixed: the other one as given now
                layer = vn if layer is None else layer
                layer_rho = rn if layer_rho is None else host(layer_rho)
            _ks._set_model(m, s, rn, layer, None if layer_rho is None else host(layer_rho))
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


class Born(torch.autograd.Function):
    """data = J(v) scatter, linear in scatter; see born()."""

    @staticmethod
    def forward(ctx, scatter, v, amplitudes, dh, dt, source_locations, receiver_locations, options):
        kw = dict(options)
        units = kw.pop("location_units")
        vn = _np(v)
        s = _ks._survey(vn, source_locations, receiver_locations, dh, units)
        amp = _ks._amplitudes(_np(amplitudes), s)
        m = _ks._modeling_with_model(s, dh, dt, amp.shape[2], kw.pop("rho"), kw.pop("layer_velocity"),
                                     kw.pop("layer_density"), **kw)
        dv = _ks._same_dtype(_ks._model(_np(scatter), "scatter"), s.v.dtype, "scatter")
        if dv.shape != s.v.shape:
            raise ValueError(f"Born modelling: the velocity perturbation (scatter) is {_ks._dims(dv.shape)}, the grid "
                             f"{_ks._dims(s.v.shape)}")
        records = m.born(amp, dv)  # [shot, time, receiver]
        ctx.modeling, ctx.amplitudes, ctx.device = m, amp, scatter.device
        return torch.from_numpy(records).to(scatter.device).transpose(1, 2)

    @staticmethod
    def backward(ctx, grad_output):
        g = np.ascontiguousarray(_np(grad_output).transpose(0, 2, 1)).astype(ctx.amplitudes.dtype, copy=False)
        grad, _, _, _ = ctx.modeling.vjp(ctx.amplitudes, g)  # J^T g: Born's exact transpose
        grad_scatter = torch.from_numpy(grad.astype(ctx.amplitudes.dtype, copy=False)).to(ctx.device)
        return grad_scatter, None, None, None, None, None, None, None


def born(v, dh: float, dt: float, source_amplitudes, source_locations, receiver_locations, scatter: torch.Tensor, *,
         order: int = 4, pml_width=20, pml_reflection: float = 1e-3, pml_freq: float = 25.0, pml_velocity=None,
         free_surface: bool = False, batch: int = 0, schedule: str = "auto", location_units: str = "cells",
         layer_velocity=None, storage: str = "boundary", storage_location: str = "device",
         storage_dtype: str = "fp32", disk_dir: str = "", rho=None, layer_density=None) -> torch.Tensor:
    """Born data [shot, receiver, time] of the velocity perturbation `scatter` (a tensor) around
    v, as ksweep.born, differentiable with respect to `scatter` (backward is Born's exact
    transpose, the gradient's vector-Jacobian product: least-squares RTM by torch's optimizers).
    v, the amplitudes and rho are held fixed: a tensor among them that requires grad is refused."""
    if not torch.is_tensor(scatter):
        raise TypeError(f"scatter is a {type(scatter).__name__}; ksweep.torch.born takes a tensor (ksweep.born "
                        "takes arrays)")
    for name, t in (("v", v), ("source_amplitudes", source_amplitudes), ("rho", rho)):
        if torch.is_tensor(t) and t.requires_grad:
            raise NotImplementedError(f"{name} requires grad: ksweep.torch.born differentiates with respect to "
                                      "scatter only (v, the amplitudes and rho are held fixed)")
    v = v if torch.is_tensor(v) else torch.as_tensor(v)
    amplitudes = source_amplitudes if torch.is_tensor(source_amplitudes) else torch.as_tensor(source_amplitudes)

    def host(a):
        return None if a is None else _np(a) if torch.is_tensor(a) else np.asarray(a)
    options = dict(order=order, pml_width=pml_width, pml_reflection=pml_reflection, pml_freq=pml_freq,
                   pml_velocity=pml_velocity, free_surface=free_surface, batch=batch, schedule=schedule,
                   location_units=location_units, storage=storage, storage_location=storage_location,
                   storage_dtype=storage_dtype, disk_dir=disk_dir, rho=host(rho),
                   layer_velocity=host(layer_velocity), layer_density=host(layer_density))
    src = source_locations.cpu().numpy() if torch.is_tensor(source_locations) else source_locations
    rec = receiver_locations.cpu().numpy() if torch.is_tensor(receiver_locations) else receiver_locations
    return Born.apply(scatter, v, amplitudes, dh, dt, src, rec, options)


# --- Deepwave's calling convention -------------------------------------------------------------

def _deepwave_faces(pml_width, ndim: int) -> list:
    """Deepwave's pml_width (one value, or 2 per dimension in its axis order: [z0, z1, x0, x1] in
    2D, [z0, z1, y0, y1, x0, x1] in 3D) as ksweep's six faces (top, bottom, front, back, left,
    right). A 0 is a face without a layer: the grid ends there and the wavefield beyond it is
    zero (Deepwave's reflecting edge, ksweep's too)."""
    w = np.atleast_1d(np.asarray(pml_width.cpu() if torch.is_tensor(pml_width) else pml_width))
    if w.size == 1:
        w = np.repeat(w, 2 * ndim)
    if w.ndim != 1 or w.size != 2 * ndim or w.dtype.kind not in "iu":
        raise ValueError(f"pml_width = {pml_width!r}: one integer or {2 * ndim} (two per dimension)")
    z0, z1 = int(w[0]), int(w[1])
    y0, y1 = (int(w[2]), int(w[3])) if ndim == 3 else (0, 0)
    x0, x1 = int(w[-2]), int(w[-1])
    return [z0, z1, y0, y1, x0, x1]


def _resample(x: torch.Tensor, n: int, taper_frac: float) -> torch.Tensor:
    """`x` [..., t] band-limited to n samples over the same time span (zero-padding or cutting
    its spectrum, the cut's top `taper_frac` tapered by a cosine), differentiable."""
    m = x.shape[-1]
    if n == m:
        return x
    spec = torch.fft.rfft(x, dim=-1)
    keep = min(spec.shape[-1], n // 2 + 1)
    spec = spec[..., :keep]
    if taper_frac > 0:
        k = int(round(taper_frac * keep))
        if k > 0:
            ramp = 0.5 * (1 + torch.cos(torch.linspace(0, np.pi, k, dtype=x.dtype, device=x.device)))
            spec = torch.cat([spec[..., :keep - k], spec[..., keep - k:] * ramp], dim=-1)
    return torch.fft.irfft(spec, n=n, dim=-1) * (n / m)


def _survey_box(shape, points, survey_pad):
    """Deepwave's survey extents: per axis [low, high) around every point (rows of [n, ndim]
    cells), `survey_pad` cells beyond them, clipped to the model; a side whose pad is None goes to
    the model's edge, as does every side when there is no point."""
    ndim = len(shape)
    if isinstance(survey_pad, (list, tuple)):
        pads = list(survey_pad)
    else:
        pads = [survey_pad] * 2 * ndim
    if len(pads) != 2 * ndim:
        raise ValueError(f"survey_pad = {survey_pad!r}: one number of cells, or {2 * ndim} (low and high "
                         f"side of each of the {ndim} axes), None for a side that goes to the model's edge")
    pads = [None if p is None else _ks._int(p, "survey_pad") for p in pads]
    if any(p is not None and p < 0 for p in pads):
        raise ValueError(f"survey_pad = {survey_pad!r}: the pads must be >= 0 cells (None: to the model's edge)")
    pts = torch.cat([p.reshape(-1, ndim) for p in points]) if points else torch.zeros(0, ndim, dtype=torch.long)
    lo, hi = [0] * ndim, list(shape)
    if pts.shape[0] == 0:
        return lo, hi
    for a in range(ndim):
        if pads[2 * a] is not None:
            lo[a] = max(int(pts[:, a].min()) - pads[2 * a], 0)
        if pads[2 * a + 1] is not None:
            hi[a] = min(int(pts[:, a].max()) + pads[2 * a + 1] + 1, shape[a])
    return lo, hi


def _per_shot_models(v, args):
    """scalar() with a model per shot, v [shot, *model] (one axis more than a location has):
    each shot runs alone on its model (its own max_vel unless given) and the tuple's data are
    the shots' data in order."""
    rec = torch.as_tensor(args["receiver_locations"])
    if v.shape[0] != rec.shape[0]:
        raise ValueError(f"v has {v.shape[0]} models (v {tuple(v.shape)}: a model per shot), receiver_locations "
                         f"{rec.shape[0]} shots")
    own = set(inspect.signature(scalar).parameters) - {"v", "source_amplitudes", "source_locations",
                                                         "receiver_locations"}
    kw = {k: args[k] for k in own}
    out = []
    for i in range(v.shape[0]):
        one = {k: (None if x is None else torch.as_tensor(x)[i:i + 1])
               for k, x in (("source_amplitudes", args["source_amplitudes"]),
                            ("source_locations", args["source_locations"]))}
        out.append(scalar(v[i], receiver_locations=rec[i:i + 1], **one, **kw)[-1])
    return (None,) * (6 if v.ndim == 3 else 9) + (torch.cat(out),)


def scalar(v, grid_spacing, dt: float, source_amplitudes=None, source_locations=None, receiver_locations=None,
           accuracy: int = 4, pml_width=20, pml_freq=None, max_vel=None, survey_pad=None, origin=None,
           wavefield_0=None, wavefield_m1=None, psiy_m1=None, psix_m1=None, zetay_m1=None, zetax_m1=None,
           nt=None, model_gradient_sampling_interval: int = 1, freq_taper_frac: float = 0.0,
           time_pad_frac: float = 0.0, time_taper: bool = False, forward_callback=None, backward_callback=None,
           callback_frequency: int = 1, storage_mode: str = "device", storage_compression: bool = False):
    """Deepwave's `scalar` on ksweep's propagator: the same arguments, units and return.

    Sources add -v^2 dt^2 f[t] at their cell (the amplitudes are scaled so; ksweep's own calls
    add f itself) to the step from u^t to u^{t+1}, and receivers record u^t at sample t (ksweep's
    own calls record u^{t+1}, one step later); locations are cells, -1 for an absent source
    or receiver (ragged shots); `accuracy` is the stencil order; `pml_width` one value or two
    per dimension (0: no layer, a reflecting edge: the wavefield is zero beyond the grid); `max_vel` the damping profiles' velocity (default: the model's largest |v|);
    `pml_freq` (default 25 Hz). A `dt` above the stability limit 0.6 / (max_vel sqrt(sum
    dx^-2)) runs on the divided step: the sources are interpolated (band-limited,
    `freq_taper_frac` of the band tapered, `time_pad_frac` of the record's length of zeros
    appended to the sources while resampling, and `time_taper` a Hann taper of the sources)
    and the data come back at `dt`, every step-ratio-th sample. Differentiable with respect to `v` and
    `source_amplitudes`.

    `survey_pad` (one number of cells, or one per side [first axis low, high, second axis low,
    high, ...], None for a side that goes to the model's edge) propagates only the box around
    every source and receiver of the call, padded so, as Deepwave does: the absorbing layer then
    copies the box's edges, and v's gradient is zero outside the box.

    `v` may hold a model per shot, [shot, nz, nx] (3D: [shot, nz, ny, nx]): each shot then runs
    on its own model. Shots without sources (`source_amplitudes` [shot, 0, nt], or None with
    `nt`) record zeros; shots without receivers ([shot, 0, dim], or `receiver_locations` None)
    return data [shot, 0, nt]. A model needs order + 1 cells along each axis (`accuracy` 4: 5).

    Returns Deepwave's 7-tuple (3D: 10) whose last element is the receiver data
    [shot, receiver, time]. The final wavefields and layer memories are not returned (None):
    ksweep does not hand its wavefields out. Arguments that ksweep does not support
    (initial wavefields and their `origin`, callbacks) raise
    NotImplementedError naming them."""
    unsupported = {"origin": origin, "wavefield_0": wavefield_0,
                   "wavefield_m1": wavefield_m1, "psiy_m1": psiy_m1, "psix_m1": psix_m1, "zetay_m1": zetay_m1,
                   "zetax_m1": zetax_m1, "forward_callback": forward_callback,
                   "backward_callback": backward_callback}
    for name, value in unsupported.items():
        if value is not None:
            raise NotImplementedError(f"ksweep.scalar: {name} is not supported (ksweep takes no initial "
                                      "wavefields, which origin places, and calls no callback)")
    if model_gradient_sampling_interval != 1:
        raise NotImplementedError("ksweep.scalar: model_gradient_sampling_interval other than 1 is not supported "
                                  "(ksweep's gradient is exact at every step)")
    if storage_mode not in ("device", "cpu", "disk", "none"):
        raise ValueError(f'storage_mode = {storage_mode!r} is not one of "device", "cpu", "disk", "none"')
    if not torch.is_tensor(v):
        v = torch.as_tensor(np.asarray(v))
    if v.dtype not in (torch.float32, torch.float64):
        raise TypeError(f"v has dtype {v.dtype}; ksweep computes in float32 or float64")
    if receiver_locations is not None and v.ndim == torch.as_tensor(receiver_locations).shape[-1] + 1:
        return _per_shot_models(v, locals())
    if receiver_locations is None and source_locations is not None:  # no receivers: [shot, 0, dim]
        receiver_locations = torch.zeros(torch.as_tensor(source_locations).shape[0], 0, v.ndim, dtype=torch.long)
    ndim = v.ndim
    if ndim not in (2, 3):
        raise ValueError(f"v has shape {tuple(v.shape)}: ksweep.scalar takes a 2D or 3D model")
    spacing = np.atleast_1d(np.asarray(grid_spacing, dtype=np.float64))
    if spacing.size == 1:
        spacing = np.repeat(spacing, ndim)
    if spacing.size != ndim or not np.all(np.isfinite(spacing)) or np.any(spacing <= 0):
        raise ValueError(f"grid_spacing = {grid_spacing!r}: one spacing > 0, or one per dimension")
    if not np.all(spacing == spacing[0]):
        raise NotImplementedError(f"grid_spacing = {list(spacing)}: ksweep's grids have one spacing on every axis")
    dh = float(spacing[0])
    if source_amplitudes is None and nt is None:
        raise ValueError("ksweep.scalar: give source_amplitudes, or nt for a run without sources")
    if receiver_locations is None:
        raise ValueError("ksweep.scalar: give receiver_locations or source_locations (they say how many shots run)")
    rec = torch.as_tensor(receiver_locations).long()
    shots = rec.shape[0]
    if source_amplitudes is None:  # nt steps without sources: one silent source per shot
        source_amplitudes = torch.zeros(shots, 1, int(nt), dtype=v.dtype, device=v.device)
        source_locations = torch.zeros(shots, 1, ndim, dtype=torch.long)
    amp = torch.as_tensor(source_amplitudes)
    src = torch.as_tensor(source_locations).long()
    # No sources, or no receivers, per shot ([shot, 0, ...]): one absent point (-1) stands in, so
    # that the run is the library's (an absent source injects nothing; an absent receiver's
    # records are dropped below), and the data keep v's graph.
    n_receivers = rec.shape[1] if rec.ndim == 3 else -1
    if amp.ndim == 3 and src.ndim == 3 and amp.shape[1] == 0 and src.shape[1] == 0:
        amp = torch.zeros(amp.shape[0], 1, amp.shape[2], dtype=amp.dtype, device=amp.device)
        src = torch.full((src.shape[0], 1, src.shape[2]), -1, dtype=torch.long)
    if n_receivers == 0:
        rec = torch.full((rec.shape[0], 1, rec.shape[2]), -1, dtype=torch.long)
    if amp.dtype != v.dtype:
        raise TypeError(f"source_amplitudes has dtype {amp.dtype}, v has {v.dtype}: pass both in the same dtype")
    if amp.ndim != 3 or src.ndim != 3 or src.shape[:2] != amp.shape[:2] or src.shape[2] != ndim:
        raise ValueError(f"source_amplitudes {tuple(amp.shape)} and source_locations {tuple(src.shape)} must be "
                         f"[shot, source, time] and [shot, source, {ndim}]")
    if rec.ndim != 3 or rec.shape[2] != ndim or rec.shape[0] != src.shape[0]:
        raise ValueError(f"receiver_locations {tuple(rec.shape)} must be [shot, receiver, {ndim}] with the "
                         f"sources' {src.shape[0]} shots")
    nt_user = amp.shape[2] if nt is None else int(nt)
    if nt is not None and int(nt) != amp.shape[2]:
        raise ValueError(f"nt = {nt} but source_amplitudes has {amp.shape[2]} time samples")
    # Absent points (-1): a source injects nothing, a receiver records zeros; both sit at cell 0.
    src_absent = (src < 0).any(dim=2)
    rec_absent = (rec < 0).any(dim=2)
    for name, loc, absent in (("source_locations", src, src_absent), ("receiver_locations", rec, rec_absent)):
        bad = (loc < 0) & ~absent.unsqueeze(-1)
        if bad.any() or ((loc < 0) & (loc != -1)).any():
            raise ValueError(f"{name}: a point is absent when all its coordinates are -1; other negative "
                             "coordinates are outside the model")
    src_c = torch.where(src_absent.unsqueeze(-1), torch.zeros_like(src), src)
    rec_c = torch.where(rec_absent.unsqueeze(-1), torch.zeros_like(rec), rec)
    vmax = float(v.detach().abs().max()) if max_vel is None else float(max_vel)
    if survey_pad is not None:  # the box around the call's sources and receivers (the whole model's vmax)
        lo, hi = _survey_box(tuple(v.shape), [src[~src_absent], rec[~rec_absent]], survey_pad)
        v = v[tuple(slice(a, b) for a, b in zip(lo, hi))]
        shift = torch.tensor(lo, dtype=src_c.dtype)
        src_c = torch.where(src_absent.unsqueeze(-1), src_c, src_c - shift)
        rec_c = torch.where(rec_absent.unsqueeze(-1), rec_c, rec_c - shift)
    # Deepwave's time step limit and its internal step.
    dt_max = 0.6 / (vmax * float(np.sqrt(np.sum(1.0 / spacing**2))))
    ratio = max(1, int(np.ceil(abs(dt) / dt_max - 1e-12)))
    inner_dt = dt / ratio
    if time_taper:
        amp = amp * torch.hann_window(nt_user + 2, periodic=False, dtype=amp.dtype, device=amp.device)[1:-1]
    pad = int(round(time_pad_frac * nt_user))
    if pad > 0:
        amp = torch.cat([amp, torch.zeros(*amp.shape[:2], pad, dtype=amp.dtype, device=amp.device)], dim=-1)
    n_run = amp.shape[-1] * ratio
    amp = _resample(amp, n_run, freq_taper_frac) if ratio > 1 else amp
    # -v^2 dt^2 f at the source cell (differentiable in v through the gather).
    idx = tuple(src_c[..., d] for d in range(ndim))
    scale = -(v[idx] ** 2) * inner_dt**2 * (~src_absent).to(v.dtype)
    data = forward(v, dh, inner_dt, amp * scale.unsqueeze(-1), src_c.cpu().numpy(), rec_c.cpu().numpy(),
                   order=_ks._int(accuracy, "accuracy"), pml_width=_deepwave_faces(pml_width, ndim),
                   pml_freq=25.0 if pml_freq is None else float(pml_freq), pml_velocity=vmax,
                   storage_location={"cpu": "host", "disk": "disk"}.get(storage_mode, "device"),
                   storage_dtype="fp16" if storage_compression else "fp32")
    # Deepwave's receivers record u^t at sample t (the field before the step that injects f[t]);
    # ksweep's record u^{t+1}, after it: one step later.
    data = torch.cat([torch.zeros_like(data[..., :1]), data[..., :-1]], dim=-1)
    if ratio > 1:  # the data are band-limited by the source: every ratio-th sample is exact (an FFT
        data = data[..., ::ratio]  # cut of the record's truncated end would ring)
    data = data[..., :nt_user] * (~rec_absent).to(data.dtype).unsqueeze(-1)
    if n_receivers == 0:
        data = data[:, :0]
    return (None,) * (6 if ndim == 2 else 9) + (data,)
