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

import ctypes
import inspect
import warnings

import numpy as np
import torch

import ksweep as _ks

__all__ = ["forward", "Forward", "born", "Born", "scalar", "CallbackState"]


def _np(t: torch.Tensor) -> np.ndarray:
    return t.detach().cpu().numpy()


_IN_PLACE = {}


def _in_place(*tensors) -> bool:
    """Whether ksweep computes where these tensors are, and so takes them in place (no copy
    through the host): CUDA tensors on the device a CUDA build computes on, CPU tensors on a host
    build. CUDA tensors on another GPU than the build's are refused by name."""
    if not _IN_PLACE:
        info = _ks._ksweep.info()
        _IN_PLACE.update(kind=info["arrays_in_place"], device=info["device_id"])
    cuda = _IN_PLACE["kind"] == "cuda"
    for t in tensors:
        if t is None:
            continue
        if t.is_cuda != cuda:
            return False
        if cuda and t.device.index != _IN_PLACE["device"]:
            raise ValueError(f"a tensor is on {t.device}; this process computes on cuda:{_IN_PLACE['device']} "
                             "(one GPU per process: move the tensors there, or give this process that GPU)")
    return True


def _arr(t: torch.Tensor):
    """A contiguous tensor as the library's in-place methods take it: itself on CUDA (its
    __cuda_array_interface__), a numpy view of its memory on the CPU."""
    return t if t.is_cuda else t.numpy()


def _ready(*tensors):
    """torch's queued work on CUDA tensors done before the library reads or writes them (the
    library fences its own work before it returns)."""
    for t in tensors:
        if t is not None and t.is_cuda:
            torch.cuda.current_stream(t.device).synchronize()
            return


def _empty(shape, dtype, device) -> torch.Tensor:
    """An uninitialised tensor: torch's on a GPU; on the CPU numpy's memory (the C library's
    allocator hands back memory freed by the call before, where torch's CPU allocator maps fresh
    pages for each large tensor: 36 ms per 12 MiB on a 2-core EPYC VM, 7 % of a scalar call)."""
    if torch.device(device).type == "cuda":
        return torch.empty(shape, dtype=dtype, device=device)
    return torch.from_numpy(np.empty(shape, _np_dtype(torch.empty(0, dtype=dtype))))


def _np_dtype(t: torch.Tensor):
    """The numpy type of a tensor's elements (for the checks that name it)."""
    return torch.empty(0, dtype=t.dtype).numpy().dtype


class Forward(torch.autograd.Function):
    """records = F(v, amplitudes, rho); see forward(). With options["state"] (ksweep.scalar) also the
    end state (u^nt, u^(nt-1), the layer memories), differentiable outputs of their own; the
    backward is one reverse sweep (Modeling.vjp) for v, rho, the amplitudes and the start."""

    @staticmethod
    def forward(ctx, v, amplitudes, rho, dh, dt, source_locations, receiver_locations, layer_velocity, options,
                *start_tensors):
        # In place: everything but a layer of its own and ksweep.scalar's backward_callback (the
        # watch hands host arrays).
        plain = layer_velocity is None and options.get("layer_density") is None and \
            options.get("backward_watch") is None
        ctx.in_place = plain and _in_place(v, amplitudes, rho)
        if ctx.in_place:
            return Forward._forward_in_place(ctx, v, amplitudes, rho, dh, dt, source_locations, receiver_locations,
                                             options, start_tensors)
        vn = _np(v)
        s = _ks._survey(vn, source_locations, receiver_locations, dh, options["location_units"])
        amp = _ks._amplitudes(_np(amplitudes), s)
        m = _forward_modeling(s, vn, dh, dt, amp.shape[2], options, rho, layer_velocity)
        ctx.start = ()
        if options.get("start") is not None:  # ksweep.scalar's initial wavefields and memories
            ctx.start = _start_fields(m, s.src.shape[0], vn.dtype, *options["start"])
        ctx.set_materialize_grads(False)  # an output the loss does not read has no gradient (None)
        end = ()
        if options.get("state") is not None:  # the end state too (ksweep.scalar's wavefields), outputs
            records, now, before, memory = m.forward_state(amp, *ctx.start)
            options["state"]["sizes"] = [m.memory_values(k) for k in range(vn.ndim)]
            end = tuple(torch.from_numpy(x).to(v.device) for x in (now, before, memory))
        else:
            records = m.forward(amp)  # [shot, time, receiver]
        ctx.shifted = options.get("first") is not None
        if ctx.shifted:  # ksweep.scalar's receiver timing: sample t is u^t (u^0 = options["first"])
            records = _later_by_one(records)
            records[:, 0] = options["first"]
        ctx.modeling = m
        ctx.watch = options.get("backward_watch")  # ksweep.scalar's backward_callback
        if ctx.watch is not None:  # the adjoint memories' split per axis
            ctx.watch.sizes = [m.memory_values(k) for k in range(vn.ndim)]
        # ksweep.scalar's start tensors that require grad (`start_tensors`): their gradients
        # come from the reverse sweep's adjoint state where it ends (_StartGradient).
        ctx.start_grad = None
        if start_tensors:
            which, axes = options["start_grad"]
            ctx.start_grad = _StartGradient(which, axes, [m.memory_values(k) for k in range(len(axes))], start_tensors)
        ctx.amplitudes = amp
        ctx.records_shape = records.shape
        ctx.device = v.device
        data = torch.from_numpy(records).to(v.device).transpose(1, 2)
        return (data, *end) if end else data

    @staticmethod
    def _forward_in_place(ctx, v, amplitudes, rho, dh, dt, source_locations, receiver_locations, options,
                          start_tensors):
        """forward() on tensors where the build computes (_in_place): the model, the amplitudes,
        the records and ksweep.scalar's start and end states stay there; the same checks and bits
        as the host path."""
        # The survey from the model's shape and type alone (the library checks its values), and
        # the host path's checks of the amplitudes' and rho's shapes and types.
        s = _ks._survey(np.empty(tuple(v.shape), _np_dtype(v)), source_locations, receiver_locations, dh,
                        options["location_units"])
        _ks._amplitudes(np.empty(tuple(amplitudes.shape), _np_dtype(amplitudes)), s)
        if rho is not None:
            _ks._same_dtype(np.empty(tuple(rho.shape), _np_dtype(rho)), s.v.dtype, "rho")
        m = _forward_modeling(s, None, dh, dt, amplitudes.shape[2], options, rho, None, set_model=False)
        fields = [v.detach().contiguous()] + ([] if rho is None else [rho.detach().contiguous()])
        amp = amplitudes.detach().contiguous()
        shots = amp.shape[0]
        records = _empty((shots, amp.shape[2], s.rec.shape[1]), v.dtype, v.device)
        ctx.start = ()
        if options.get("start") is not None:  # ksweep.scalar's initial wavefields and memories
            ctx.start = _start_fields(m, shots, v.dtype, *options["start"], like=v)
        state = dict(zip(("now", "before", "memory"), (_arr(x) for x in ctx.start)))
        end = ()
        if options.get("state") is not None:  # the end state too (ksweep.scalar's wavefields), outputs
            field = (shots, *m.padded_shape())
            end = (_empty(field, v.dtype, v.device),
                   _empty(field, v.dtype, v.device),
                   _empty((shots, sum(2 * m.memory_values(k) for k in range(v.ndim))), v.dtype, v.device))
            state.update(zip(("end_now", "end_before", "end_memory"), (_arr(x) for x in end)))
            options["state"]["sizes"] = [m.memory_values(k) for k in range(v.ndim)]
        _ready(v, amp, rho, *ctx.start)
        m.set_model_device([_arr(f) for f in fields])
        m.forward_device(_arr(amp), _arr(records), **state)
        ctx.shifted = options.get("first") is not None
        if ctx.shifted:  # ksweep.scalar's receiver timing: sample t is u^t (u^0 = options["first"])
            _later_by_one(records)
            records[:, 0] = torch.as_tensor(options["first"], dtype=v.dtype, device=v.device)
        ctx.start_grad = None
        if start_tensors:  # their gradients from the reverse sweep's adjoint state where it ends
            which, axes = options["start_grad"]
            ctx.start_grad = _StartGradient(which, axes, [m.memory_values(k) for k in range(len(axes))], start_tensors)
        ctx.modeling, ctx.amplitudes_t, ctx.fields = m, amp, fields
        ctx.records_shape = tuple(records.shape)
        ctx.set_materialize_grads(False)
        data = records.transpose(1, 2)
        return (data, *end) if end else data

    @staticmethod
    def _backward_in_place(ctx, grad_output, grad_end):
        """backward() of _forward_in_place: one reverse sweep (vjp) for v, rho, the amplitudes and
        the start, or the adjoint pass for the amplitudes alone, into tensors where the build
        computes; the sweep starts from the gradient of the end state (grad_end; None: zero)."""
        m, amp = ctx.modeling, ctx.amplitudes_t
        v = ctx.fields[0]
        grad_v = grad_amp = grad_rho = None
        wants_v, wants_amp, wants_rho = ctx.needs_input_grad[0], ctx.needs_input_grad[1], ctx.needs_input_grad[2]
        wants_start = ctx.start_grad is not None
        end_t = [None if e is None else e.detach().to(dtype=v.dtype).contiguous() for e in grad_end]
        if grad_output is None and all(e is None for e in end_t):
            return (None,) * 9 + ((None,) * len(ctx.start_grad.tensors) if wants_start else ())
        if grad_output is None:  # the loss reads the end state alone
            g = torch.zeros(ctx.records_shape, dtype=v.dtype, device=v.device)
        else:
            g = grad_output.detach().to(dtype=v.dtype).transpose(1, 2).contiguous()  # [shot, time, receiver]
            if ctx.shifted:  # sample t + 1 came from record t; sample 0 (the start's u^0) is held fixed
                g = _earlier_by_one(g)
        end = dict(zip(("end_now", "end_before", "end_memory"), (None if e is None else _arr(e) for e in end_t)))
        if wants_amp:
            grad_amp = _empty(tuple(amp.shape), amp.dtype, amp.device)
        _ready(g, *end_t)
        if wants_v or wants_rho or wants_start:
            grad = _empty(tuple(v.shape), torch.float64, v.device)
            grho = _empty(tuple(grad.shape), grad.dtype, grad.device) if wants_rho else None
            start = dict(zip(("now", "before", "memory"), (_arr(x) for x in ctx.start)))
            sg = ()
            if wants_start:
                field = (amp.shape[0], *m.padded_shape())
                sg = (_empty(field, v.dtype, v.device),
                      _empty(field, v.dtype, v.device),
                      _empty((amp.shape[0], sum(2 * n for n in ctx.start_grad.sizes)), v.dtype, v.device))
                start.update(zip(("start_now", "start_before", "start_memory"), (_arr(x) for x in sg)))
            m.vjp_device(_arr(amp), _arr(g), _arr(grad), None if grho is None else _arr(grho),
                         None if grad_amp is None else _arr(grad_amp), **start, **end)
            if wants_start:
                ctx.start_grad.take(*sg)
            grad_v = grad.to(v.dtype) if wants_v else None
            grad_rho = grho.to(v.dtype) if wants_rho else None
        elif wants_amp:
            m.adjoint_device(_arr(g), _arr(grad_amp), **end)
        start_grads = ctx.start_grad.gradients() if wants_start else ()
        return (grad_v, grad_amp, grad_rho, None, None, None, None, None, None, *start_grads)

    @staticmethod
    def backward(ctx, grad_output, *grad_end):
        if ctx.in_place:
            return Forward._backward_in_place(ctx, grad_output, grad_end)
        m = ctx.modeling
        dtype = ctx.amplitudes.dtype
        if grad_output is None:  # the loss reads the end state alone
            g = np.zeros(ctx.records_shape, dtype)
        else:
            g = np.ascontiguousarray(_np(grad_output).transpose(0, 2, 1))  # [shot, time, receiver]
            g = g.astype(dtype, copy=False)
            if ctx.shifted:  # sample t + 1 came from record t; sample 0 (the start's u^0) is held fixed
                g = _earlier_by_one(g)
        # The gradient with respect to the end state (u^nt, u^(nt-1), the memories; None: zero):
        # the reverse sweeps start from it.
        end = {k: None if e is None else np.ascontiguousarray(_np(e), dtype=dtype)
               for k, e in zip(("end_now", "end_before", "end_memory"), grad_end)}
        grad_v = grad_amp = grad_rho = None
        watch = ctx.watch
        if ctx.needs_input_grad[0] or ctx.needs_input_grad[2] or watch is not None or ctx.start_grad is not None:
            if watch is not None:
                m.set_reverse_watch(watch, watch.steps)
            try:  # the amplitudes' and the start's gradients from the same sweep, where they need one
                grad, _, _, grho, wgrad, sgrad = m.vjp(ctx.amplitudes, g, *ctx.start, **end,
                                                       wavelet_grad=ctx.needs_input_grad[1],
                                                       start_grad=ctx.start_grad is not None,
                                                       illuminations=False)
            finally:
                if watch is not None:
                    m.set_reverse_watch(None)
            if wgrad is not None:
                grad_amp = torch.from_numpy(wgrad).to(ctx.device)
            if sgrad is not None:
                ctx.start_grad.take(*sgrad)
            if ctx.needs_input_grad[0]:
                grad_v = torch.from_numpy(grad.astype(dtype, copy=False)).to(ctx.device)
                if ctx.watch is not None:
                    grad_v = ctx.watch.gradient(grad_v)
            if ctx.needs_input_grad[2]:
                grad_rho = torch.from_numpy(grho.astype(dtype, copy=False)).to(ctx.device)
        if ctx.needs_input_grad[1] and grad_amp is None:  # the amplitudes alone: the adjoint pass
            grad_amp = torch.from_numpy(m.adjoint(g, **end)).to(ctx.device)
        start = ctx.start_grad.gradients() if ctx.start_grad is not None else ()
        return (grad_v, grad_amp, grad_rho, None, None, None, None, None, None, *start)


def _earlier_by_one(g):
    """The gradient of _later_by_one's records: g [shot, time, receiver] (an array or a tensor)
    one sample earlier, the last sample zero (sample 0 was held fixed). A GPU tensor by torch; on
    the CPU by numpy, whose copy costs a tenth of torch 1.13's at one thread."""
    if torch.is_tensor(g) and g.is_cuda:
        return torch.cat([g[:, 1:], torch.zeros_like(g[:, :1])], dim=1)
    a = g.numpy() if torch.is_tensor(g) else g
    out = np.empty_like(a)
    out[:, :-1] = a[:, 1:]
    out[:, -1] = 0
    return torch.from_numpy(out) if torch.is_tensor(g) else out


def _later_by_one(records):
    """Moves each shot's records [shot, time, receiver] one time sample later (the last sample
    drops out, sample 0 keeps its values): in place, one memmove per shot, for the library's own
    contiguous records; a copy otherwise. A tensor in place too: on a GPU by torch, on the CPU
    through its numpy view (torch 1.13's copy costs 10x more there)."""
    if torch.is_tensor(records):
        if records.is_cuda:
            records[:, 1:] = records[:, :-1].clone()
        else:
            _later_by_one(records.numpy())
        return records
    if not (records.flags.c_contiguous and records.flags.writeable):
        records = np.array(records, order="C")
    shots, nt = records.shape[0], records.shape[1]
    if nt < 2 or shots == 0:
        return records
    row = records[0, 0].nbytes
    for k in range(shots):
        at = records[k].ctypes.data
        ctypes.memmove(at + row, at, row * (nt - 1))
    return records


def _forward_modeling(s, vn, dh, dt, nt, options, rho=None, layer_velocity=None, set_model=True):
    """The modelling Forward runs: the survey `s` of the model `vn` over nt samples, with the
    layer as `layer_velocity` (and options' layer_density) set, or a copy of the model's edges
    (without `set_model`: no model set yet)."""
    m = _ks._modeling(s, dh, dt, nt, order=options["order"], pml_width=options["pml_width"],
                      pml_reflection=options["pml_reflection"], pml_freq=options["pml_freq"],
                      pml_velocity=options["pml_velocity"],
                      free_surface=options["free_surface"], batch=options["batch"],
                      schedule=options["schedule"], storage=options["storage"],
                      storage_location=options["storage_location"], storage_dtype=options["storage_dtype"],
                      disk_dir=options["disk_dir"], physics="acoustic" if rho is None else "acoustic_vd")
    if not set_model:
        return m

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
    return m


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
        grad, _, _, _, _, _ = ctx.modeling.vjp(ctx.amplitudes, g, illuminations=False)  # J^T g: Born's transpose
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


def _wavefield_box(shape, wavefield, origin, faces, points):
    """Deepwave's survey extents from an initial wavefield: per axis [origin, origin + the
    wavefield's length less the layer's two widths), origin 0 (with a warning, as Deepwave's)
    where it is not given; the box must lie in the model and hold every source and receiver
    (`points`, rows of [n, ndim] cells)."""
    ndim = len(shape)
    layer = [(faces[0], faces[1])] + ([(faces[2], faces[3])] if ndim == 3 else []) + [(faces[4], faces[5])]
    w = torch.as_tensor(wavefield) if not isinstance(wavefield, np.ndarray) else wavefield
    if len(w.shape) != ndim + 1:
        raise ValueError(f"the initial wavefield has shape {tuple(w.shape)}: [shot, {ndim} spatial axes]")
    extent = [int(w.shape[1 + a]) - layer[a][0] - layer[a][1] for a in range(ndim)]
    if origin is None:
        start = [0] * ndim
    else:
        start = list(origin) if isinstance(origin, (list, tuple)) else None
        if (start is None or len(start) != ndim or
                any(not isinstance(o, (int, np.integer)) or isinstance(o, bool) for o in start)):
            raise ValueError(f"origin = {origin!r}: a list of {ndim} ints (the first model cell of each axis)")
        if any(o < 0 for o in start):
            raise ValueError(f"origin = {origin!r}: the cells must be >= 0")
        start = [int(o) for o in start]
    for a in range(ndim):
        if extent[a] < 1:
            raise ValueError(f"the initial wavefield has {w.shape[1 + a]} cells along axis {a}, its layer "
                             f"{layer[a][0]} + {layer[a][1]}: no model cell is left (the wavefields cover the "
                             "simulated box and its absorbing layer)")
        if start[a] + extent[a] > shape[a]:
            raise ValueError(f"the initial wavefields cover model cells [{start[a]}, {start[a] + extent[a]}) along "
                             f"axis {a} (origin {start[a]}, {extent[a]} cells), beyond the model's {shape[a]}")
    lo, hi = start, [start[a] + extent[a] for a in range(ndim)]
    if origin is None and hi != list(shape):
        warnings.warn(f"ksweep.scalar: the initial wavefields cover a box of {extent} model cells; with origin "
                      "not given it starts at cell 0 of every axis", stacklevel=3)
    pts = torch.cat([p.reshape(-1, ndim) for p in points]) if points else torch.zeros(0, ndim, dtype=torch.long)
    for a in range(ndim):
        if pts.shape[0] and (int(pts[:, a].min()) < lo[a] or int(pts[:, a].max()) >= hi[a]):
            raise ValueError(f"a source or receiver lies outside the initial wavefields' box: cells "
                             f"[{int(pts[:, a].min())}, {int(pts[:, a].max())}] along axis {a}, the box "
                             f"[{lo[a]}, {hi[a]})")
    return lo, hi


def _per_shot_models(v, args):
    """scalar() with a model per shot, v [shot, *model] (one axis more than a location has):
    each shot runs alone on its model (its own max_vel unless given; its start state, a
    callback per shot) and each element of the tuple joins the shots' in order."""
    rec = torch.as_tensor(args["receiver_locations"])
    if v.shape[0] != rec.shape[0]:
        raise ValueError(f"v has {v.shape[0]} models (v {tuple(v.shape)}: a model per shot), receiver_locations "
                         f"{rec.shape[0]} shots")
    per_shot = {"source_amplitudes", "source_locations", "wavefield_0", "wavefield_m1", "psiz_m1", "psiy_m1",
                "psix_m1", "zetaz_m1", "zetay_m1", "zetax_m1"}
    own = set(inspect.signature(scalar).parameters) - {"v", "receiver_locations"} - per_shot
    kw = {k: args[k] for k in own}
    out = []
    for i in range(v.shape[0]):
        one = {k: (None if args[k] is None else torch.as_tensor(args[k])[i:i + 1]) for k in per_shot}
        out.append(scalar(v[i], receiver_locations=rec[i:i + 1], **one, **kw))
    return tuple(torch.cat(parts) for parts in zip(*out))


class CallbackState:
    """What `forward_callback` and `backward_callback` receive, as Deepwave's CallbackState: `dt`
    (the internal step), `step` (the user's time sample the run is at), get_wavefield(name, view)
    for "wavefield_0" and "wavefield_m1", get_model("v", view) and, in a backward callback,
    get_gradient("v", view). Views: "inner" (the model, the default), "pml" and "full" (the model
    and its absorbing layer: ksweep hands out no padding beyond it).

    Forward: the wavefields are u^step and u at the internal step before. Backward: they are the
    adjoint wavefields lambda = dL/du at the same times (lambda^step, and the internal step
    after it, which the reverse sweep computed first), and the gradient is the velocity's of the
    steps from the end down to `step` (zero in the layer, whose velocity copies the model's
    edges). The wavefields and the gradient are the run's: changing them in place changes the
    run from there on (the gradient returned is then the changed one).

    The layer memories (Deepwave's names: "psiy_m1", "psix_m1", "zetay_m1", "zetax_m1", and
    "psiz_m1", "zetaz_m1" in 3D) are ksweep's own, its CPML's strips of the layer, [shot, values]
    as scalar() returns them (`view` does not apply to them). Forward they are the run's:
    changing them changes the run. Backward they are the adjoint memories (dL/d of the memories
    at that sample), and changing them changes the rest of the sweep, as the wavefields do."""

    def __init__(self, dt, step, wavefields, models, faces, gradients=None, memories=None):
        self.dt = dt
        self.step = step
        self._fields = wavefields  # name: tensor on the padded grid; or a function giving them
        self._models = models
        self._faces = faces  # (low, high) layer cells per axis
        self._gradients = gradients  # backward: a function giving {name: gradient on the padded grid}
        self._held = memories or {}  # name: [shot, values], ksweep's strips; or a function giving them

    @property
    def _wavefields(self):
        if callable(self._fields):
            self._fields = self._fields()
        return self._fields

    @property
    def _memories(self):
        if callable(self._held):
            self._held = self._held()
        return self._held

    def _view(self, x, view, padded):
        if view in ("full", "pml"):
            return x if padded else self._pad(x)
        if view != "inner":
            raise ValueError(f"view = {view!r} must be 'inner', 'pml' or 'full'")
        if not padded:
            return x
        return x[(...,) + tuple(slice(lo, x.shape[-len(self._faces) + a] - hi)
                                for a, (lo, hi) in enumerate(self._faces))]

    def _pad(self, m):
        # The layer's model: the edge cells copied outwards, as ksweep's layer takes them.
        idx = [torch.clamp(torch.arange(-lo, n + hi, device=m.device), 0, n - 1)
               for n, (lo, hi) in zip(m.shape, self._faces)]
        return m[torch.meshgrid(*idx, indexing="ij")]

    def get_wavefield(self, name: str, view: str = "inner") -> torch.Tensor:
        if name in ("wavefield_0", "wavefield_m1"):  # fetched on first use, as the memories are
            return self._view(self._wavefields[name], view, True)
        if name in self._memories:
            if view not in ("inner", "pml", "full"):
                raise ValueError(f"view = {view!r} must be 'inner', 'pml' or 'full'")
            return self._memories[name]
        raise KeyError(f"wavefield {name!r}: the callback has {sorted(self._wavefields) + sorted(self._memories)}")

    def get_model(self, name: str, view: str = "inner") -> torch.Tensor:
        if name not in self._models:
            raise KeyError(f"model {name!r}: the callback has {sorted(self._models)}")
        return self._view(self._models[name], view, False)

    def get_gradient(self, name: str, view: str = "inner") -> torch.Tensor:
        if self._gradients is None:
            raise KeyError(f"gradient {name!r}: a forward callback has no gradients (a backward_callback has)")
        gradients = self._gradients()
        if name not in gradients:
            raise KeyError(f"gradient {name!r}: the callback has {sorted(gradients)}")
        return self._view(gradients[name], view, True)


class _Changed(Exception):
    """_watched's stop at the first step where the callback changed the run."""


def _watched(callback, changed):
    """`callback` that appends to `changed` the step at which it first changed the wavefields or
    the layer memories, and stops the run there (_Changed)."""
    def run(state):
        fields = {**state._wavefields, **state._memories}
        was = {k: w.clone() for k, w in fields.items()}
        callback(state)
        if any(not torch.equal(was[k], w) for k, w in fields.items()):
            changed.append(state.step)
            raise _Changed()
    return run


def _memory_views(memory: torch.Tensor, axes, sizes) -> dict:
    """The layer memories [shot, values] (ksweep's order: per axis z, (y,) x, psi then zeta) as
    views named as Deepwave names them (axes: Deepwave's letters of ksweep's axes)."""
    out, off = {}, 0
    for ax, n in zip(axes, sizes):
        out[f"psi{ax}_m1"] = memory[:, off:off + n]
        out[f"zeta{ax}_m1"] = memory[:, off + n:off + 2 * n]
        off += 2 * n
    return out


class _StartGradient:
    """The gradient with respect to scalar()'s start tensors (`which`: their places in wavefield_0,
    wavefield_m1, psi z, y, x, zeta z, y, x) from the adjoint state where the reverse sweep ends
    (Modeling.vjp(start_grad=True): dL/du^0 = lambda^0, dL/du^{-1} = -lambda^1, the memories' as
    the sweep leaves them, in ksweep's strips, per axis psi then zeta)."""

    def __init__(self, which, axes, sizes, tensors):
        self.which = which
        self.axes = axes
        self.sizes = sizes
        self.tensors = tensors
        self.now = self.before = self.memory = None

    def take(self, now, before, memory):
        self.now, self.before, self.memory = now, before, memory

    def gradients(self):
        have = {"wavefield_0": self.now, "wavefield_m1": self.before}
        off = 0
        for ax, n in zip(self.axes, self.sizes):
            have[f"psi{ax}_m1"] = self.memory[:, off:off + n]
            have[f"zeta{ax}_m1"] = self.memory[:, off + n:off + 2 * n]
            off += 2 * n
        def tensor(x):  # numpy arrays (the host path) or tensors (in place)
            return x.contiguous() if torch.is_tensor(x) else torch.from_numpy(np.ascontiguousarray(x))
        return tuple(tensor(have[_START_NAMES[i]]).to(dtype=t.dtype, device=t.device)
                     for i, t in zip(self.which, self.tensors))


class _BackwardWatch:
    """scalar()'s backward_callback on the modelling's reverse sweep (Modeling.set_reverse_watch):
    called, as Deepwave calls it, after every `frequency` user samples from the end, at samples
    n_user - frequency, n_user - 2 frequency, ... and last at 0, with the adjoint wavefields
    lambda^n and lambda^{n+1} (n the internal step of the sample) and, on request, the adjoint
    layer memories and the velocity's gradient of the steps so far on the padded grid.
    Wavefields and memories the callback changes go back into the sweep; changes to the gradient are kept (Deepwave's accumulator: a change at a sample
    stays in the sum) and gradient() applies them to the sweep's result."""

    def __init__(self, callback, frequency, ratio, n_user, dt, v, faces, axes=("y", "x")):
        self.callback = callback
        self.axes = axes  # Deepwave's letters of ksweep's axes (the memories' names)
        self.sizes = None  # the memories' values per axis (Forward sets them)
        self.ratio = ratio
        # The internal steps of the samples: the binding calls back at these alone.
        self.steps = sorted({t * ratio for t in range(n_user - frequency, 0, -frequency)} | {0})
        self.dt = dt
        self.v = v
        self.faces = faces  # (low, high) layer cells per axis
        self.added = None  # the sum of the callback's changes to the gradient (inner cells)
        self.final = None  # the gradient as the callback left it at sample 0, when it changed one

    def __call__(self, n, first_shot, shots, get, set_, images):
        device = self.v.device
        fetched = {}  # what the callback asked for, copied from the sweep then: the others cost nothing

        def wavefields():
            now, after = get()
            fetched["dtype"] = now.dtype
            fetched["fields"] = {"wavefield_0": torch.from_numpy(now).to(device),
                                 "wavefield_m1": torch.from_numpy(after).to(device)}
            fetched["was"] = {k: w.clone() for k, w in fetched["fields"].items()}
            return fetched["fields"]

        def memories():
            base = get(memories=True)[2]
            fetched["dtype"] = base.dtype
            fetched["base"] = torch.from_numpy(base).to(device)
            fetched["views"] = _memory_views(fetched["base"], self.axes, self.sizes)
            fetched["held"] = fetched["base"].clone()
            return fetched["views"]
        shown = {}

        def gradients():
            if not shown:
                grad = torch.from_numpy(images()[0]).to(device=device, dtype=self.v.dtype)
                if self.added is not None:
                    grad = grad + self.added
                full = torch.zeros([s + lo + hi for s, (lo, hi) in zip(grad.shape, self.faces)], dtype=grad.dtype,
                                   device=device)
                full[self._inner()] = grad
                shown["v"] = full
                shown["was"] = full.clone()
            return {"v": shown["v"]}

        self.callback(CallbackState(self.dt, n // self.ratio, wavefields, {"v": self.v}, self.faces, gradients,
                                    memories))
        fields = fetched.get("fields", {})
        changed = [k in fields and not torch.equal(fetched["was"][k], fields[k]) for k in ("wavefield_0", "wavefield_m1")]
        memory = None  # the adjoint memories as the callback left them, where it changed one
        if "base" in fetched and not torch.equal(fetched["base"], fetched["held"]):
            memory = np.ascontiguousarray(_np(fetched["base"]).astype(fetched["dtype"]))
        if any(changed) or memory is not None:
            put = [np.ascontiguousarray(_np(fields[k]).astype(fetched["dtype"])) if c else None
                   for k, c in zip(("wavefield_0", "wavefield_m1"), changed)]
            set_(*put, memory)
        if shown and not torch.equal(shown["v"], shown["was"]):
            delta = (shown["v"] - shown["was"])[self._inner()]
            self.added = delta if self.added is None else self.added + delta
            if n == 0:
                self.final = shown["v"][self._inner()].clone()

    def _inner(self):
        return tuple(slice(lo, -hi if hi else None) for lo, hi in self.faces)

    def gradient(self, grad):
        """The sweep's gradient with the callback's changes."""
        if self.final is not None:
            return self.final.to(grad.dtype)
        return grad if self.added is None else grad + self.added.to(grad.dtype)


_MEMORY_AXES = {2: ("y", "x"), 3: ("z", "y", "x")}  # Deepwave's names of ksweep's axes (z, (y,) x)


def scalar(v, grid_spacing, dt: float, source_amplitudes=None, source_locations=None, receiver_locations=None,
           accuracy: int = 4, pml_width=20, pml_freq=None, max_vel=None, survey_pad=None, wavefield_0=None,
           wavefield_m1=None, psiz_m1=None, psiy_m1=None, psix_m1=None, zetaz_m1=None, zetay_m1=None, zetax_m1=None,
           origin=None, nt=None, model_gradient_sampling_interval: int = 1, freq_taper_frac: float = 0.0,
           time_pad_frac: float = 0.0, time_taper: bool = False, forward_callback=None, backward_callback=None,
           callback_frequency: int = 1, python_backend=False, storage_mode: str = "device", storage_path: str = ".",
           storage_compression: bool = False):
    """Deepwave's `scalar` on ksweep's propagator: the same arguments (in Deepwave's order),
    units and return.

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

    Wavefields, as Deepwave's, live on the simulated grid: the model (the survey's box with
    `survey_pad`) and its absorbing layer, [shot, nz + pml_z0 + pml_z1, nx + pml_x0 + pml_x1]
    (3D likewise). `wavefield_0` and `wavefield_m1` (None: zero) start the run at u^0 and u^{-1}
    (the internal step before); the run returns u^{nt} and u^{nt-1}. The layer's memories
    (`psiy_m1`, ..., `zetax_nt`) are ksweep's own (its CPML keeps them in strips of the layer,
    [shot, values]): pass back what a call returned to continue a run exactly (a run cut in two
    gives the bits of one run), or None (zero); Deepwave's are refused by their shape.
    `forward_callback(state)` is called before every `callback_frequency` time samples, with a
    CallbackState (the wavefields and the layer memories, which it may change in place, and the
    model). Where a tensor requires grad, the callback runs on a run of its own (one forward
    more): one that only looks leaves the data, end state and gradient the bits of the run without
    it. Where it first changes the wavefields or memories, that run stops and a differentiable one
    goes on, chained through the callback's pieces (each a run from the state the callback left:
    the gradient follows its changes, which are torch operations; the callback is called a second
    time at that sample). Each piece after it holds its start state until the backward pass. A
    changed run takes no backward_callback (NotImplementedError).
    `backward_callback(state)` is called during the backward pass of v's gradient, as Deepwave
    calls it: after every `callback_frequency` samples from the end and last at sample 0, with
    the adjoint wavefields and the adjoint layer memories (which it may change in place: the
    sweep goes on from them) and the gradient of the steps so far (`state.get_gradient("v")`; a change stays in the gradient
    returned, as in Deepwave's accumulator: a custom imaging condition divides it at sample 0).
    It must not call ksweep itself (the sweep waits for it).

    Returns Deepwave's tuple: (wavefield_nt, wavefield_ntm1, psiy_ntm1, psix_ntm1, zetay_nt,
    zetax_nt, receiver data [shot, receiver, time]) in 2D; in 3D psi and zeta of z, y, x. Every
    output is differentiable, as Deepwave's are: the gradient flows from the data and from the
    final wavefields and memories (the reverse sweep starts from their gradient: lambda^{nt} =
    dL/du^{nt}, lambda^{nt+1} = -dL/du^{nt-1}, the adjoint memories) to `v` and
    `source_amplitudes`, and to the initial wavefields and memories where they require grad (the
    reverse sweep's adjoint state where it ends: dL/du^0 = lambda^0, dL/du^{-1} = -lambda^1, the
    memories' in ksweep's strips; u^0 also through sample 0 of the data). So a run cut in two,
    the second call taking the first's end state, has one run's data and gradient. The memories'
    slots that hold no state (cells outside the layer) are zero. Without `survey_pad`, the
    initial wavefields choose the simulated box, as Deepwave's do: their shape less the layer,
    from `origin` (the box's first model cell per axis; default 0, with a warning when the box is
    smaller than the model)."""
    if origin is not None and survey_pad is not None:
        raise ValueError("ksweep.scalar: give survey_pad or origin, not both (each chooses the simulated box)")
    if not isinstance(callback_frequency, (int, np.integer)) or isinstance(callback_frequency, bool):
        raise TypeError(f"callback_frequency = {callback_frequency!r} must be an int")
    if callback_frequency <= 0:
        raise ValueError(f"callback_frequency = {callback_frequency} must be > 0")
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
    # One per axis (the library weighs each axis' stencil); the checks and words of `dh` elsewhere.
    spacing = _ks._spacing(grid_spacing, ndim, "grid_spacing")
    dh = [float(d) for d in spacing]
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
    faces = _deepwave_faces(pml_width, ndim)
    box = None
    if survey_pad is not None:  # the box around the call's sources and receivers (the whole model's vmax)
        box = _survey_box(tuple(v.shape), [src[~src_absent], rec[~rec_absent]], survey_pad)
    elif wavefield_0 is not None or wavefield_m1 is not None:  # the box the initial wavefields cover
        box = _wavefield_box(tuple(v.shape), wavefield_0 if wavefield_0 is not None else wavefield_m1, origin, faces,
                             [src[~src_absent], rec[~rec_absent]])
    elif origin is not None:
        raise ValueError("ksweep.scalar: origin places the initial wavefields in the model: give wavefield_0 or "
                         "wavefield_m1 with it")
    if box is not None and (box[0] != [0] * ndim or box[1] != list(v.shape)):
        lo, hi = box
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
    options = _options(order=_ks._int(accuracy, "accuracy"), pml_width=faces,
                       pml_freq=25.0 if pml_freq is None else float(pml_freq), pml_velocity=vmax,
                       storage_location={"cpu": "host", "disk": "disk"}.get(storage_mode, "device"),
                       storage_dtype="fp16" if storage_compression else "fp32",
                       disk_dir=str(storage_path) if storage_mode == "disk" else "")
    memories = (psiz_m1, psiy_m1, psix_m1, zetaz_m1, zetay_m1, zetax_m1)
    start = [wavefield_0, wavefield_m1, *memories]
    axes = _MEMORY_AXES[ndim]
    if ndim == 2 and (psiz_m1 is not None or zetaz_m1 is not None):
        raise ValueError("psiz_m1 and zetaz_m1 are 3D's (a 2D model's axes are y and x)")
    src_np, rec_np = src_c.cpu().numpy(), rec_c.cpu().numpy()
    low = [faces[0]] + ([faces[2]] if ndim == 3 else []) + [faces[4]]  # the layer before each axis
    ridx = (torch.arange(shots).unsqueeze(1),) + tuple(rec_c[..., d] + low[d] for d in range(ndim))
    # The start tensors that require grad: their gradients come from the adjoint state at the
    # sweep's end (Forward, _StartGradient).
    start_grad = [i for i, x in enumerate(start) if torch.is_tensor(x) and x.requires_grad] \
        if torch.is_grad_enabled() else []
    needs_grad = torch.is_grad_enabled() and (v.requires_grad or amp.requires_grad or bool(start_grad))

    def differentiable():
        options["state"] = {}  # the end state, filled by Forward
        stated = any(x is not None for x in start)
        if stated:  # the run starts from the given state
            options["start"] = (start, axes)
        if start_grad:
            options["start_grad"] = (start_grad, axes)
        # Deepwave's receivers record u^t at sample t (the field before the step that injects
        # f[t]); ksweep's record u^{t+1}, after it: Forward moves its records one sample later in
        # place, sample 0 being u^0 (0 at rest, or the receivers' cells of wavefield_0). The data
        # are the time-major records' transposed view: a copy into [shot, receiver, time] order,
        # or torch's concatenation (40 ms at the Marmousi batch), would cost more than the rest of
        # the call's Python work.
        options["first"] = 0.0
        if wavefield_0 is not None:
            options["first"] = _np(torch.as_tensor(wavefield_0).detach()[ridx])
        if backward_callback is not None:
            per_axis = [(faces[0], faces[1])] + ([(faces[2], faces[3])] if ndim == 3 else []) + [(faces[4], faces[5])]
            options["backward_watch"] = _BackwardWatch(backward_callback, callback_frequency, ratio, n_run // ratio,
                                                       inner_dt, v, per_axis, axes)
        data, now, before, memory = Forward.apply(v, amp * scale.unsqueeze(-1), None, dh, inner_dt, src_np, rec_np,
                                                  None, options, *[start[i] for i in start_grad])
        if 0 in start_grad:  # sample 0 is u^0 at the receivers: differentiable in wavefield_0 too
            data = torch.cat([wavefield_0[ridx].to(dtype=data.dtype, device=data.device).unsqueeze(-1), data[..., 1:]],
                             dim=-1)
        end = options.pop("state")
        end.update(now=now, before=before, memory=memory)  # differentiable: the sweeps start from their gradient
        options.pop("start", None)
        options.pop("start_grad", None)
        options.pop("first")
        options.pop("backward_watch", None)
        return data, end

    if forward_callback is None:
        data, end = differentiable()
    elif not needs_grad:
        data, end = _stateful_run(v, amp * scale.unsqueeze(-1), dh, inner_dt, src_np, rec_np, options, start, axes,
                                  forward_callback, callback_frequency, ratio, faces, lambda u: u[ridx])
    else:
        # A callback with a gradient: the callback's run (pieces, no graph) shows it the
        # wavefields; a callback that only looks leaves the run's bits alone, so the
        # differentiable run that follows returns the same data, end state and gradient bits as
        # the run without it. At the first step where it changes the run, that run stops, and a
        # differentiable run chained through the callback's pieces goes on from there
        # (_chained_run): the callback is called again at that step.
        changed = []
        with torch.no_grad():
            try:
                _stateful_run(v.detach(), (amp * scale.unsqueeze(-1)).detach(), dh, inner_dt, src_np, rec_np, options,
                              start, axes, _watched(forward_callback, changed), callback_frequency, ratio, faces,
                              lambda u: u[ridx])
            except _Changed:
                pass
        if not changed:
            data, end = differentiable()
        elif backward_callback is not None:
            raise NotImplementedError(f"ksweep.scalar: the forward_callback changed the wavefields (at sample "
                                      f"{changed[0]}), and a backward_callback is given: a changed run's reverse "
                                      "sweeps are the pieces between the forward callbacks, which a backward_callback "
                                      "does not follow; call it under torch.no_grad(), or without the backward_callback")
        else:
            data, end = _chained_run(v, amp * scale.unsqueeze(-1), dh, inner_dt, src_np, rec_np, options, start, axes,
                                     forward_callback, callback_frequency, ratio, faces, lambda u: u[ridx], changed[0])
    if ratio > 1:  # the data are band-limited by the source: every ratio-th sample is exact (an FFT
        data = data[..., ::ratio]  # cut of the record's truncated end would ring)
    data = data[..., :nt_user]
    if rec_absent.any():  # absent receivers record zeros (a pass over the data only when there are some)
        data = data * (~rec_absent).to(data.dtype).unsqueeze(-1)
    if n_receivers == 0:
        data = data[:, :0]
    wf = [torch.as_tensor(end[k]).to(v.device) for k in ("now", "before")]
    mem = torch.as_tensor(end["memory"]).to(v.device)
    psi, zeta, off = [], [], 0
    for n in end["sizes"]:
        psi.append(mem[:, off:off + n])
        zeta.append(mem[:, off + n:off + 2 * n])
        off += 2 * n
    return (*wf, *psi, *zeta, data)


def _options(**kw) -> dict:
    """Forward's options: ksweep.torch.forward's defaults, updated by `kw`."""
    o = dict(order=4, pml_width=20, pml_reflection=1e-3, pml_freq=25.0, pml_velocity=None, free_surface=False,
             batch=0, schedule="auto", location_units="cells", storage="boundary", storage_location="device",
             storage_dtype="fp32", disk_dir="", layer_density=None)
    o.update(kw)
    return o


def _start_fields(m, shots: int, dtype, start, axes, like=None):
    """scalar()'s start state (wavefield_0, wavefield_m1, then the memories psi z, y, x and zeta
    z, y, x; None: zero) as the modelling `m` takes it: u^0 and u^{-1} [shot, *padded grid] and
    the memories [shot, values] in ksweep's order (per axis, psi then zeta), arrays of `dtype`, or
    with `like` (a tensor) contiguous tensors of its type on its device."""
    shape = (shots, *m.padded_shape())
    sizes = [m.memory_values(k) for k in range(len(axes))]
    names = ["wavefield_0", "wavefield_m1"] + [f"{kind}{ax}_m1" for kind in ("psi", "zeta") for ax in "zyx"]
    given = dict(zip(names, start))
    for name in names[2:]:
        if given[name] is not None and name[-4] not in axes:
            raise ValueError(f"{name}: a {len(axes)}D model's axes are {', '.join(axes)}")

    def field(name, want):
        x = given[name]
        if x is None:
            return np.zeros(want, dtype) if like is None else torch.zeros(want, dtype=like.dtype, device=like.device)
        x = torch.as_tensor(x).detach()
        if like is None:
            x = _np(x)
        if tuple(x.shape) != tuple(want):
            memory = not name.startswith("wavefield")
            hint = (" ksweep's layer memories are its own (its CPML's strips of the layer, [shot, values]): pass "
                    "back what ksweep.scalar returned, or None (zero)") if memory else ""
            raise ValueError(f"{name} has shape {tuple(x.shape)}, expected {tuple(want)}.{hint}")
        if like is None:
            return np.ascontiguousarray(x, dtype=dtype)
        return x.to(dtype=like.dtype, device=like.device).contiguous()

    parts = []
    for k, ax in enumerate(axes):
        parts += [field(f"psi{ax}_m1", (shots, sizes[k])), field(f"zeta{ax}_m1", (shots, sizes[k]))]
    memory = np.ascontiguousarray(np.concatenate(parts, 1)) if like is None else torch.cat(parts, 1).contiguous()
    return field("wavefield_0", shape), field("wavefield_m1", shape), memory


_START_NAMES = ["wavefield_0", "wavefield_m1"] + [f"{kind}{ax}_m1" for kind in ("psi", "zeta") for ax in "zyx"]


def _segment(v, amp, dh, dt, src, rec, options, start, axes):
    """One differentiable run (Forward) of the amplitudes `amp` from `start` (scalar()'s start
    list: wavefield_0, wavefield_m1, then the memories psi z, y, x and zeta z, y, x; None: zero):
    ksweep's records [shot, receiver, time] (u^1, ..., u^n) and the end state (u^n, u^{n-1}, the
    memories [shot, values], their values per axis), each differentiable with respect to v, `amp`
    and the start's tensors that require grad."""
    opts = dict(options, state={})
    if any(x is not None for x in start):
        opts["start"] = (start, axes)
    which = [i for i, x in enumerate(start) if torch.is_tensor(x) and x.requires_grad]
    if which:
        opts["start_grad"] = (which, axes)
    data, now, before, memory = Forward.apply(v, amp, None, dh, dt, src, rec, None, opts, *[start[i] for i in which])
    return data, now, before, memory, opts["state"]["sizes"]


def _chained_run(v, amp, dh, dt, src, rec, options, start, axes, callback, frequency, ratio, faces, at_receivers,
                 first):
    """scalar()'s run with a forward_callback that changes it, under a gradient: one
    differentiable run up to the user sample `first` (where the callback first changed the run:
    it only looked before), then pieces of `frequency` samples chained through their start and
    end states, the callback before each on the state the piece before ended in. The callback's
    changes are torch operations on those tensors, so the gradient follows them. Returns the data
    [shot, receiver, time] in Deepwave's timing and the end state, as _stateful_run does."""
    n_run = amp.shape[2]
    faces_per_axis = [(faces[0], faces[1])] + ([(faces[2], faces[3])] if len(axes) == 3 else []) + [(faces[4], faces[5])]
    shown = v.detach()
    data = []
    state = list(start)
    t0 = first * ratio
    if t0 > 0:  # the steps before the first change: one run
        d, now, before, memory, sizes = _segment(v, amp[..., :t0], dh, dt, src, rec, options, state, axes)
        u0 = state[0]
        data.append(at_receivers(torch.zeros_like(now) if u0 is None else torch.as_tensor(u0).to(now)).unsqueeze(-1))
        data.append(d[..., :-1])
    else:  # the start as tensors (zero where none is given), for the callback to change
        shots = src.shape[0]
        m = _forward_modeling(_ks._survey(_np(v), src, rec, dh, options["location_units"]), _np(v), dh, dt, 1, options)
        sizes = [m.memory_values(k) for k in range(len(axes))]
        parts = _start_fields(m, shots, _np(v).dtype, start, axes)
        given = dict(zip(_START_NAMES, start))
        now, before = (torch.as_tensor(given[k]).to(v) if given[k] is not None else torch.from_numpy(x).to(v)
                       for k, x in zip(_START_NAMES[:2], parts[:2]))
        memory = torch.from_numpy(parts[2]).to(v)
        if any(given[k] is not None for k in _START_NAMES[2:]):  # the given memories, with their graphs
            per_axis = []
            for ax, n in zip(axes, sizes):
                for kind in ("psi", "zeta"):
                    x = given[f"{kind}{ax}_m1"]
                    per_axis.append(torch.zeros(shots, n, dtype=v.dtype, device=v.device) if x is None
                                    else torch.as_tensor(x).to(v))
            memory = torch.cat(per_axis, dim=1)
    while t0 < n_run:
        n = min(frequency * ratio, n_run - t0)
        now, before, memory = now.clone(), before.clone(), memory.clone()  # the callback changes its own
        views = _memory_views(memory, axes, sizes)
        callback(CallbackState(dt, t0 // ratio, {"wavefield_0": now, "wavefield_m1": before}, {"v": shown},
                               faces_per_axis, memories=views))
        data.append(at_receivers(now).unsqueeze(-1))  # sample t0: u^t0 as the callback left it
        state = [now, before] + [views.get(name) for name in _START_NAMES[2:]]
        d, now, before, memory, sizes = _segment(v, amp[..., t0:t0 + n], dh, dt, src, rec, options, state, axes)
        data.append(d[..., :-1])
        t0 += n
    return torch.cat(data, dim=-1), {"now": now, "before": before, "memory": memory, "sizes": sizes}


def _stateful_run(v, amp, dh, dt, src, rec, options, start, axes, callback, frequency, ratio, faces, at_receivers):
    """scalar()'s forward-only run from a start state (wavefield_0, wavefield_m1, then the
    memories psi z, y, x and zeta z, y, x; None: zero), in pieces of `frequency` user samples
    with `callback` before each (when given): the data [shot, receiver, time] in Deepwave's
    timing (sample t is u^t at the receivers, `at_receivers(u)` [shot, receiver], taken after the
    callback) and the end state."""
    vn = _np(v)
    s = _ks._survey(vn, src, rec, dh, options["location_units"])
    a = np.ascontiguousarray(_ks._amplitudes(_np(amp), s))
    n_run = a.shape[2]
    piece = frequency * ratio if callback is not None else max(n_run, 1)
    runs = {}

    def modeling(n):
        if n not in runs:
            runs[n] = _forward_modeling(s, vn, dh, dt, n, options)
        return runs[n]

    m = modeling(min(piece, max(n_run, 1)))
    shots = s.src.shape[0]
    sizes = [m.memory_values(k) for k in range(len(axes))]
    now, before, memory = _start_fields(m, shots, vn.dtype, start, axes)
    now = torch.from_numpy(now).to(v.device)
    before = torch.from_numpy(before).to(v.device)
    faces_per_axis = [(faces[0], faces[1])] + ([(faces[2], faces[3])] if len(axes) == 3 else []) + [(faces[4], faces[5])]
    data = []
    for t0 in range(0, n_run, piece):
        if callback is not None:
            held = torch.from_numpy(memory).to(v.device)  # the start's own values on the host
            callback(CallbackState(dt, t0 // ratio, {"wavefield_0": now, "wavefield_m1": before}, {"v": v},
                                   faces_per_axis, memories=_memory_views(held, axes, sizes)))
            memory = np.ascontiguousarray(_np(held))
        n = min(piece, n_run - t0)
        r, un, ub, memory = modeling(n).forward_state(np.ascontiguousarray(a[:, :, t0:t0 + n]), _np(now),
                                                      _np(before), memory)
        # Sample t0 is u^t0 (as the callback left it), then ksweep's records u^{t0+1}, ...
        data += [at_receivers(now).unsqueeze(-1), torch.from_numpy(r[:, :-1]).to(v.device).transpose(1, 2)]
        now = torch.from_numpy(un).to(v.device)
        before = torch.from_numpy(ub).to(v.device)
    out = torch.cat(data, dim=-1) if data else torch.zeros(shots, s.rec.shape[1], 0, dtype=v.dtype)
    return out, {"now": _np(now), "before": _np(before), "memory": memory, "sizes": sizes}
