"""ksweep from Python: acoustic finite-difference modelling, its exact adjoint, the velocity
gradient by boundary saving, and full-waveform inversion, with numpy arrays in and out.

Array layouts (as Deepwave's; C order, float32 or float64, one dtype per call):
  v                   [nz, nx] or [nz, ny, nx], m/s
  source_amplitudes   [shot, source, time]
  source_locations    [shot, source, 2 or 3]   cells (or metres with location_units="m"), any
                                               position in the model (between cells: interpolated),
  receiver_locations  [shot, receiver, 2 or 3] in the axis order of v: (z, x) or (z, y, x)
  data                [shot, receiver, time]
  dh                  the cells' size in metres: one number, or one per axis [dz, dx] / [dz, dy, dx]
ksweep's own records are time-major ([shot, time, receiver]); the functions here return the
peers' layout as a transposed *view* of them (no copy), and accept either layout's arrays.

The computation runs in ksweep's library on the build's default Kokkos backend (OpenMP on CPU
builds, CUDA on GPU builds) with the GIL released; Ctrl-C raises KeyboardInterrupt at the end of
the running batch of shots (``batch=``). Errors are ValueError (a value outside its limits, named
with the limit), TypeError (a dtype), MemoryError and FloatingPointError (a non-finite inversion).
"""

from __future__ import annotations

import atexit
import os
from dataclasses import dataclass, field
from typing import Optional

import numpy as np

# Threads may move between cores unless the user binds them (as the program's scripts do);
# set before the OpenMP runtime starts.
os.environ.setdefault("OMP_PROC_BIND", "false")

from . import _ksweep  # noqa: E402

__all__ = [
    "initialize", "info", "ricker", "load_model", "gaussian_smooth", "forward", "adjoint", "born", "rtm", "lsrtm", "Image", "gradient", "Gradient", "Inversion",
    "low_pass", "stage_data", "estimate_wavelet", "scalar",
]
__version__ = _ksweep.__version__

_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))


def initialize(threads: Optional[int] = None, device: Optional[int] = None) -> None:
    """Starts ksweep's runtime (Kokkos) with `threads` host threads and GPU `device`.

    Optional: the first computation starts it with the defaults (OMP_NUM_THREADS, or every core;
    GPU 0). Threads and device can only be chosen before that."""
    if threads is not None and (not isinstance(threads, (int, np.integer)) or threads < 1):
        raise ValueError(f"threads = {threads!r} must be an integer >= 1")
    if device is not None and (not isinstance(device, (int, np.integer)) or device < 0):
        raise ValueError(f"device = {device!r} must be an integer >= 0")
    _ksweep.initialize(int(threads or 0), -1 if device is None else int(device))


def info() -> dict:
    """The build and the runtime: version, Kokkos version, backends, the default backend and its
    concurrency (threads), MPI ranks."""
    return dict(_ksweep.info())


atexit.register(_ksweep.finalize)


def keys() -> list:
    """The configuration's keys, declared once in the library (ksweep/io/keys.hpp): for each a dict
    of 'key' ("fwi.lr"), 'section', 'name', 'type', 'unit', 'default', 'allowed' (limits or
    names), 'note', 'help', and 'python': the keyword of `Inversion` that sets it ('' when none),
    and 'python_default' where the keyword's default differs from the file's.
    `ksweep keys` prints the same table."""
    import json
    out = []
    for k in _ksweep.keys():
        d = dict(k)
        d["default"] = json.loads(d["default"])
        if d["python_default"]:
            d["python_default"] = json.loads(d["python_default"])
        else:
            del d["python_default"]
        out.append(d)
    return out


def ricker(freq: float, nt: int, dt: float, delay: Optional[float] = None) -> np.ndarray:
    """A Ricker wavelet of peak frequency `freq` (Hz), `nt` samples at `dt` (s), peaking at
    `delay` s (default 1.5 / freq): the program's wavelet, as float64."""
    if delay is None:  # the library names a bad freq (a ValueError, not a division by zero here)
        delay = 1.5 / freq if isinstance(freq, (int, float, np.number)) and freq > 0 else 0.0
    return np.asarray(_ksweep.ricker(float(freq), float(delay), float(dt), int(nt)))


def load_model(source: str = "marmousi2", *, decimate: int = 1, crop_z=None, crop_y=None, crop_x=None,
               nz: int = 0, ny: int = 0, nx: int = 0, dh: float = 0.0):
    """A velocity model as the program's [model] section loads it: a named model ("marmousi2",
    "marmousi2_fine", "marmousi", "layered3d", "marmousi2_3d"; the Marmousi files are looked up
    as share/marmousi/README.md says and checked by SHA-256) or a raw .f32/.bin file (nz, nx,
    ny, dh given) or an .h5 file; decimated (v[::d, ::d]) and cropped to half-open cell ranges.
    Returns (v float32 [nz, nx] or [nz, ny, nx], dh in metres)."""
    v, spacing, _ = _ksweep.load_model(str(source), int(decimate), crop_z, crop_y, crop_x, int(nz), int(ny), int(nx),
                                       float(dh))
    return v, spacing


def gaussian_smooth(f, sigma: float) -> np.ndarray:
    """`f` (2D or 3D, float64) smoothed by a Gaussian of `sigma` cells along every axis (edges
    repeated), in the same bits as the program's starting model and gradient smoothing."""
    return _ksweep.gaussian_smooth(np.ascontiguousarray(f, dtype=np.float64), float(sigma))


# ------------------------------------------------------------------------------------------
# Argument checks and conversions
# ------------------------------------------------------------------------------------------

def _dims(shape) -> str:
    """A shape as the library writes it: [nz][nx]."""
    return "".join(f"[{n}]" for n in shape)


def _model(v, name="v") -> np.ndarray:
    a = np.asarray(v)
    if a.dtype not in _FLOATS:
        raise TypeError(f"{name} has dtype {a.dtype}; ksweep computes in float32 or float64")
    if a.ndim not in (2, 3):
        raise ValueError(f"{name} has shape {a.shape}: a model is [nz, nx] or [nz, ny, nx]")
    return np.ascontiguousarray(a)


def _int(value, name: str) -> int:
    """`value` as an int when it is one (an integer, or a float with an integer value): 4.9 or
    True are refused, naming the argument, rather than truncated."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise TypeError(f"{name} = {value!r} must be an integer")
    if not float(value).is_integer():
        raise ValueError(f"{name} = {value!r} must be an integer")
    return int(value)


def _bool(value, name: str) -> bool:
    """`value` when it is a bool (numpy's too): 0, 1 or "yes" are refused, naming the argument."""
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} = {value!r} must be True or False")
    return bool(value)


def _same_dtype(a, dtype, name) -> np.ndarray:
    a = np.asarray(a)
    if a.dtype != dtype:
        raise TypeError(f"{name} has dtype {a.dtype}, v has {dtype}: pass both in the same dtype")
    return np.ascontiguousarray(a)


def _spacing(dh, dim, name="dh") -> np.ndarray:
    """The cells' size along each axis (z, x or z, y, x), from one spacing or one per axis. `name`
    is the caller's argument (`dh`; `grid_spacing` in `ksweep.scalar`), named in the errors."""
    axes = "[dz, dx]" if dim == 2 else "[dz, dy, dx]"
    try:
        d = np.atleast_1d(np.asarray(dh, dtype=np.float64))
    except (TypeError, ValueError):
        raise TypeError(f"{name} = {dh!r} must be a spacing in metres, or one per axis {axes}") from None
    if d.ndim != 1 or d.size not in (1, dim):
        raise ValueError(f"{name} = {dh!r}: give one spacing (m), or one per axis {axes}")
    if not np.all(np.isfinite(d)) or np.any(d <= 0):
        raise ValueError(f"{name} = {dh!r}: grid spacings must be finite and > 0 (m)")
    return np.repeat(d, dim) if d.size == 1 else d


def _locations(a, dim, dh, units, name) -> np.ndarray:
    a = np.asarray(a)
    if a.ndim != 3 or a.shape[2] != dim:
        axes = "(z, x)" if dim == 2 else "(z, y, x)"
        raise ValueError(f"{name} has shape {a.shape}, expected [shot, point, {dim}] with {axes} per point")
    if units not in ("cells", "m"):
        raise ValueError(f'location_units = {units!r} is not one of "cells", "m"')
    if a.dtype.kind not in "iuf":
        raise TypeError(f"{name} has dtype {a.dtype}; positions are integers (cells) or floats")
    cells = a.astype(np.float64) / _spacing(dh, dim) if units == "m" else a.astype(np.float64)
    if not np.all(np.isfinite(cells)):
        raise ValueError(f"{name} holds non-finite positions")
    # Within 1e-9 of a cell: that cell (metres that are whole cells up to rounding); positions
    # between cells are interpolated (Kaiser-windowed sinc, Hicks 2002).
    rounded = np.rint(cells)
    near = np.abs(cells - rounded) <= 1e-9 * np.maximum(1.0, np.abs(cells))
    return np.ascontiguousarray(np.where(near, rounded, cells))


def _data_time_major(d, dtype, shots, receivers, name) -> np.ndarray:
    """[shot, receiver, time] (or a view of ksweep's own time-major records) -> [shot, time, receiver]."""
    d = np.asarray(d)
    if d.dtype != dtype:
        raise TypeError(f"{name} has dtype {d.dtype}, v has {dtype}: pass both in the same dtype")
    if d.ndim != 3 or d.shape[0] != shots or d.shape[1] != receivers:
        raise ValueError(f"{name} has shape {d.shape}, expected [shot, receiver, time] = [{shots}, {receivers}, nt]")
    return np.ascontiguousarray(d.transpose(0, 2, 1))  # no copy for a view of time-major records


def low_pass(data, dt: float, max_freq: float) -> np.ndarray:
    """`data` low-passed with zero phase below `max_freq` (Hz) along its last axis (time):
    gain 1 / (1 + (f / max_freq)^12), the frequency continuation of `ksweep fwi` (fwi.stages).
    A 1D trace (a wavelet) is padded with zeros and comes back as float64; records [shot,
    receiver, time] are continued past their last sample (so that the cut does not ring) and
    come back as float32."""
    d = np.asarray(data)
    if d.ndim == 1:
        return _ksweep.low_pass(np.ascontiguousarray(d, dtype=np.float64), float(dt), float(max_freq))
    if d.ndim != 3:
        raise ValueError(f"data has shape {d.shape}: a trace [time] or records [shot, receiver, time]")
    tm = np.ascontiguousarray(d.astype(np.float32, copy=False).transpose(0, 2, 1))
    return _ksweep.low_pass_records(tm, float(dt), float(max_freq)).transpose(0, 2, 1)


def scalar(*args, **kwargs):
    """Deepwave's `scalar(v, grid_spacing, dt, source_amplitudes=..., ...)` on ksweep, for torch
    tensors (imports torch): see ksweep.torch.scalar."""
    from . import torch as _torch
    return _torch.scalar(*args, **kwargs)


def stage_data(wavelet, observed_data, dt: float, max_freq: float):
    """A frequency stage's wavelet and observed data [shot, receiver, time], as `ksweep fwi`
    makes them for `fwi.stages`: both low-passed below `max_freq` (Hz), or both as they are
    where the low-pass keeps the wavelet to fp32 round-off (its whole band lies below)."""
    w = np.ascontiguousarray(np.asarray(wavelet), dtype=np.float64)
    if w.ndim != 1:
        raise ValueError(f"wavelet has shape {w.shape}: a trace [time]")
    if _ksweep.low_pass_keeps(w, float(dt), float(max_freq)):
        return w, np.asarray(observed_data)
    return low_pass(w, dt, max_freq), low_pass(observed_data, dt, max_freq)


def estimate_wavelet(observed_data, synthetic_data, reference, dt: float, stabilisation: float = 1e-3):
    """The source wavelet that explains `observed_data` [shot, receiver, time], given
    `synthetic_data` of the same survey modelled with the wavelet `reference` (nt samples):
    W = R sum conj(S) D / (sum |S|^2 + eps), eps = stabilisation x the peak of sum |S|^2, sums over
    every trace. Returns (wavelet, residual, residual_reference): the estimate (float64, nt), and
    the part of the data it leaves unexplained, and the reference leaves."""
    obs = np.asarray(observed_data, dtype=np.float32)
    syn = np.asarray(synthetic_data, dtype=np.float32)
    if obs.ndim != 3 or syn.shape != obs.shape:
        raise ValueError(f"observed_data {obs.shape} and synthetic_data {syn.shape} must be the same "
                         "[shot, receiver, time]")
    w, res, res_ref = _ksweep.estimate_wavelet(np.ascontiguousarray(obs.transpose(0, 2, 1)),
                                               np.ascontiguousarray(syn.transpose(0, 2, 1)),
                                               np.ascontiguousarray(reference, dtype=np.float64), float(dt),
                                               float(stabilisation))
    return w, res, res_ref


def _pml_faces(pml_width, free_surface) -> list:
    w = np.atleast_1d(np.asarray(pml_width))
    if w.dtype.kind not in "iu" or w.ndim != 1 or w.size not in (1, 6) or np.any(w < 0):
        raise ValueError(f"pml_width = {pml_width!r} must be one integer >= 0 or six "
                         "(top, bottom, front, back, left, right)")
    return [int(x) for x in w]  # one common width, or the six faces


@dataclass
class _Survey:
    v: np.ndarray
    src: np.ndarray
    rec: np.ndarray


def _survey(v, source_locations, receiver_locations, dh, location_units) -> _Survey:
    v = _model(v)
    src = _locations(source_locations, v.ndim, dh, location_units, "source_locations")
    rec = _locations(receiver_locations, v.ndim, dh, location_units, "receiver_locations")
    if src.shape[0] != rec.shape[0]:
        raise ValueError(f"source_locations has {src.shape[0]} shots, receiver_locations {rec.shape[0]}")
    return _Survey(v, src, rec)


def _pml_velocity(pml_velocity) -> float:
    """The damping profiles' velocity for the library: 0 for None (the model's maximum)."""
    if pml_velocity is None:
        return 0.0
    value = float(pml_velocity)
    if not np.isfinite(value) or value <= 0:
        raise ValueError(f"pml_velocity = {pml_velocity!r} must be a velocity > 0 (m/s), or None: the model's maximum")
    return value


def _modeling(s: _Survey, dh, dt, nt, *, order, pml_width, pml_reflection, pml_freq, free_surface, batch,
              schedule, storage="boundary", storage_location="device", storage_dtype="fp32", disk_dir="",
              physics="acoustic", pml_velocity=None, mpi=False, domains=None):
    if not isinstance(batch, (int, np.integer)) or batch < 0:
        raise ValueError(f"batch = {batch!r} must be an integer >= 0 (0: every shot at once)")
    cls = _ksweep.Modeling32 if s.v.dtype == np.float32 else _ksweep.Modeling64
    return cls(list(s.v.shape), [float(d) for d in _spacing(dh, s.v.ndim)], float(dt), int(nt), _int(order, "order"), _pml_faces(pml_width, free_surface),
               float(pml_reflection), float(pml_freq), bool(free_surface), s.src, s.rec, _int(batch, "batch"), str(schedule),
               str(storage), str(storage_location), str(storage_dtype), str(disk_dir), str(physics),
               _pml_velocity(pml_velocity), _bool(mpi, "mpi"), _domains(domains, s.v.ndim))


def _modeling_with_model(s: _Survey, dh, dt, nt, rho, layer_velocity, layer_density, **kw):
    """`_modeling` of the survey with its model set: constant density, or variable density with
    `rho`; the other keywords are `_modeling`'s."""
    m = _modeling(s, dh, dt, nt, physics="acoustic" if rho is None else "acoustic_vd", **kw)
    _set_model(m, s, rho, layer_velocity, layer_density)
    return m


def _amplitudes(a, s: _Survey) -> np.ndarray:
    a = _same_dtype(a, s.v.dtype, "source_amplitudes")
    if a.ndim != 3 or a.shape[:2] != s.src.shape[:2]:
        raise ValueError(f"source_amplitudes has shape {a.shape}, expected [shot, source, time] = "
                         f"[{s.src.shape[0]}, {s.src.shape[1]}, nt]")
    return a


def _with_placeholders(s: _Survey):
    """A survey without sources or without receivers (a shot of sources alone, receivers
    alone): one placeholder point per shot (at a point of the other kind, or cell 0) where the
    other has none. The caller gives a placeholder source zero amplitudes (it injects nothing)
    and drops a placeholder receiver's data, so that every result is exact. Returns the survey
    and whether sources / receivers were added."""
    no_src, no_rec = s.src.shape[1] == 0, s.rec.shape[1] == 0
    if not (no_src or no_rec):
        return s, False, False
    shots, ndim = s.src.shape[0], s.v.ndim
    cell0 = np.zeros((shots, 1, ndim))
    src = (s.rec[:, :1] if not no_rec else cell0) if no_src else s.src
    rec = (s.src[:, :1] if not no_src else cell0) if no_rec else s.rec
    return _Survey(s.v, np.ascontiguousarray(src), np.ascontiguousarray(rec)), no_src, no_rec


def _layer(layer_velocity, s: _Survey, name="layer_velocity"):
    if layer_velocity is None:
        return None
    return _same_dtype(_model(layer_velocity, name), s.v.dtype, name)


def _set_model(m, s: _Survey, rho, layer_velocity, layer_density):
    """Constant density (rho None: set_velocity) or variable density (set_model with rho)."""
    if rho is None:
        if layer_density is not None:
            raise ValueError("layer_density needs rho (variable density)")
        m.set_velocity(s.v, _layer(layer_velocity, s))
        return
    r = _same_dtype(_model(rho, "rho"), s.v.dtype, "rho")
    if r.shape != s.v.shape:
        raise ValueError(f"rho has shape {r.shape}, v {s.v.shape}")
    m.set_model(s.v, r, _layer(layer_velocity, s), _layer(layer_density, s, "layer_density"))


# ------------------------------------------------------------------------------------------
# Modelling, adjoint, gradient
# ------------------------------------------------------------------------------------------

def _is_tensor(x) -> bool:
    return type(x).__module__.split(".")[0] == "torch"


def _tensors_in_out(f):
    """Lets `f` (numpy in, numpy out) take torch tensors: every tensor argument is read on the
    host (detached; a CPU tensor shares its memory), and when `v` is a tensor the arrays come
    back as tensors on v's device. Gradients through them are ksweep.torch's."""
    import functools

    def host(x):
        return x.detach().cpu().numpy() if _is_tensor(x) else x

    @functools.wraps(f)
    def wrapped(v, *args, **kwargs):
        out = f(host(v), *[host(a) for a in args], **{k: host(a) for k, a in kwargs.items()})
        if not _is_tensor(v):
            return out
        import torch

        def back(a):
            if isinstance(a, np.ndarray):
                return torch.from_numpy(np.ascontiguousarray(a)).to(v.device)
            if isinstance(a, dict):
                return {k: back(x) for k, x in a.items()}
            return a
        if isinstance(out, Image):
            return Image(back(out.image), back(out.correlation), back(out.illumination), back(out.misfit))
        if isinstance(out, Gradient):
            return Gradient(out.loss, back(out.grad), back(out.illum_src), back(out.illum_rec), back(out.data),
                            back(out.shot_losses))
        return back(out)
    return wrapped


@_tensors_in_out
def forward(v, dh: float, dt: float, source_amplitudes, source_locations, receiver_locations, *,
            order: int = 4, pml_width=20, pml_reflection: float = 1e-3, pml_freq: float = 25.0,
            pml_velocity: Optional[float] = None, free_surface: bool = False, batch: int = 0, schedule: str = "auto",
            location_units: str = "cells", layer_velocity=None, rho=None, layer_density=None, mpi: bool = False,
            domains=None) -> np.ndarray:
    """Receiver data [shot, receiver, time] of the sources (a view of ksweep's time-major records).

    `order` is the stencil's spatial order (2, 4, 6, 8); `pml_width` the absorbing layer's cells
    (one number or six, per face: top, bottom, front, back, left, right; 0 on a face: no layer,
    the grid's edge reflects, the wavefield zero beyond it); `pml_velocity` the velocity (m/s) of the layer's damping
    profiles (None: the largest velocity of the model, or of `layer_velocity` when given);
    `batch` the shots run at once (0: all); `layer_velocity` the velocity the absorbing layer
    takes its values from (default: v's edges). With
    `rho` (kg/m^3, the shape of v) the physics is variable-density acoustics.

    `mpi=True` makes the call collective over the process's MPI ranks (a script run with
    `mpirun -n N`: the package starts MPI): the shots are shared over the ranks and every rank
    returns the whole result, the same bits as one process. `domains` ([nx_parts] in 2D,
    [ny_parts, nx_parts] in 3D; constant density) splits the model over the ranks as well, which
    form N / parts shot groups (it implies `mpi`). Every rank makes the same call."""
    s = _survey(v, source_locations, receiver_locations, dh, location_units)
    amp = _amplitudes(source_amplitudes, s)
    s, no_src, no_rec = _with_placeholders(s)
    if no_src:  # a silent placeholder: the records are zero, as the wave equation from rest gives
        amp = np.zeros((s.src.shape[0], 1, amp.shape[2]), s.v.dtype)
    m = _modeling_with_model(s, dh, dt, amp.shape[2], rho, layer_velocity, layer_density, order=order,
                             pml_width=pml_width, pml_reflection=pml_reflection, pml_freq=pml_freq,
                             pml_velocity=pml_velocity, free_surface=free_surface, batch=batch, schedule=schedule,
                             mpi=mpi, domains=domains)
    records = m.forward(amp).transpose(0, 2, 1)
    return records[:, :0] if no_rec else records


@_tensors_in_out
def adjoint(v, dh: float, dt: float, data, source_locations, receiver_locations, *, order: int = 4,
            pml_width=20, pml_reflection: float = 1e-3, pml_freq: float = 25.0,
            pml_velocity: Optional[float] = None, free_surface: bool = False, batch: int = 0,
            schedule: str = "auto", location_units: str = "cells", layer_velocity=None, rho=None,
            layer_density=None, mpi: bool = False,
            domains=None) -> np.ndarray:
    """The transpose of `forward` for the data [shot, receiver, time]: source amplitudes
    [shot, source, time] such that <forward(a), d> = <a, adjoint(d)> to round-off."""
    s = _survey(v, source_locations, receiver_locations, dh, location_units)
    d = _data_time_major(data, s.v.dtype, s.src.shape[0], s.rec.shape[1], "data")
    s, no_src, no_rec = _with_placeholders(s)
    if no_rec:  # a placeholder receiver that injects nothing
        d = np.zeros((d.shape[0], d.shape[1], 1), s.v.dtype)
    m = _modeling_with_model(s, dh, dt, d.shape[1], rho, layer_velocity, layer_density, order=order,
                             pml_width=pml_width, pml_reflection=pml_reflection, pml_freq=pml_freq,
                             pml_velocity=pml_velocity, free_surface=free_surface, batch=batch, schedule=schedule,
                             mpi=mpi, domains=domains)
    a = m.adjoint(d)
    return a[:, :0] if no_src else a


@_tensors_in_out
def born(v, dh: float, dt: float, source_amplitudes, source_locations, receiver_locations, scatter, *,
         order: int = 4, pml_width=20, pml_reflection: float = 1e-3, pml_freq: float = 25.0,
         pml_velocity: Optional[float] = None, free_surface: bool = False, batch: int = 0, schedule: str = "auto",
         location_units: str = "cells", layer_velocity=None, rho=None, layer_density=None, mpi: bool = False,
         domains=None) -> np.ndarray:
    """Born (linearised) modelling: the receiver data [shot, receiver, time] of the wavefield
    scattered by the velocity perturbation `scatter` (m/s, the shape of v) around v, the exact
    derivative of `forward`'s data in the direction `scatter` (density held fixed). Its transpose
    is the velocity gradient of `gradient` (the layer as there: `layer_velocity`, or v's edges).
    The arguments are `forward`'s."""
    s = _survey(v, source_locations, receiver_locations, dh, location_units)
    amp = _amplitudes(source_amplitudes, s)
    dv = _same_dtype(_model(scatter, "scatter"), s.v.dtype, "scatter")
    if dv.shape != s.v.shape:
        raise ValueError(f"Born modelling: the velocity perturbation (scatter) is {_dims(dv.shape)}, the grid "
                         f"{_dims(s.v.shape)}")
    s, no_src, no_rec = _with_placeholders(s)
    if no_src:  # a silent placeholder: nothing scatters
        amp = np.zeros((s.src.shape[0], 1, amp.shape[2]), s.v.dtype)
    m = _modeling_with_model(s, dh, dt, amp.shape[2], rho, layer_velocity, layer_density, order=order,
                             pml_width=pml_width, pml_reflection=pml_reflection, pml_freq=pml_freq,
                             pml_velocity=pml_velocity, free_surface=free_surface, batch=batch, schedule=schedule,
                             mpi=mpi, domains=domains)
    records = m.born(amp, dv).transpose(0, 2, 1)
    return records[:, :0] if no_rec else records


@dataclass
class Image:
    """What `rtm` and `lsrtm` return: `image` ([nz, nx] or [nz, ny, nx], float64); for RTM the
    cross-correlation J^T d it is made from and the source illumination, for LSRTM the relative
    data misfit |J m - d| / |d| after each iteration (else None)."""
    image: np.ndarray
    correlation: Optional[np.ndarray] = None
    illumination: Optional[np.ndarray] = None
    misfit: Optional[np.ndarray] = None


def _imaging(v, dh, dt, source_amplitudes, source_locations, receiver_locations, data, kw):
    s = _survey(v, source_locations, receiver_locations, dh, location_units=kw.pop("location_units"))
    amp = _amplitudes(source_amplitudes, s)
    d = _data_time_major(data, s.v.dtype, s.src.shape[0], s.rec.shape[1], "data")
    if d.shape[1] != amp.shape[2]:
        raise ValueError(f"data has {d.shape[1]} time samples, source_amplitudes {amp.shape[2]}")
    if s.src.shape[1] == 0 or s.rec.shape[1] == 0:
        raise ValueError("imaging needs sources and receivers in every shot")
    m = _modeling_with_model(s, dh, dt, amp.shape[2], kw.pop("rho"), kw.pop("layer_velocity"),
                             kw.pop("layer_density"), **kw)
    return m, amp, d


def _mask(mask, v):
    if mask is None:
        return None
    m = np.ascontiguousarray(np.asarray(mask, dtype=np.float64))
    if m.shape != np.shape(v):
        raise ValueError(f"mask has shape {m.shape}, v {np.shape(v)}")
    return m


@_tensors_in_out
def rtm(v, dh: float, dt: float, source_amplitudes, source_locations, receiver_locations, data, *,
        subtract_background: bool = True, condition: str = "born", normalize: bool = True,
        stabilization: float = 1e-3, laplacian: bool = True, mask=None, storage: str = "boundary",
        storage_location: str = "device",
        storage_dtype: str = "fp32", disk_dir: str = "", order: int = 4, pml_width=20,
        pml_reflection: float = 1e-3, pml_freq: float = 25.0, pml_velocity: Optional[float] = None,
        free_surface: bool = False, batch: int = 0, schedule: str = "auto", location_units: str = "cells",
        layer_velocity=None, rho=None, layer_density=None, mpi: bool = False,
        domains=None) -> Image:
    """Reverse-time migration of `data` [shot, receiver, time] on the smooth model v: the image
    J^T d of the reflected data (the data less v's own records when `subtract_background`), the
    transpose of `born` (`condition="born"`), or with `condition="cross-correlation"` the plain
    zero-lag cross-correlation of the source and receiver wavefields, sum_n u^n lambda^{n+1} (the
    same backward pass); divided by the source illumination plus `stabilization` times its
    maximum when `normalize`, then filtered by a negative Laplacian when `laplacian`; `mask` (the
    shape of v, or None) weights the image per cell (0: muted, e.g. the water). Storage and
    modelling arguments as `gradient`'s."""
    kw = dict(order=order, pml_width=pml_width, pml_reflection=pml_reflection, pml_freq=pml_freq,
              pml_velocity=pml_velocity, free_surface=free_surface, batch=batch, schedule=schedule,
              storage=storage, storage_location=storage_location, storage_dtype=storage_dtype, disk_dir=disk_dir,
              location_units=location_units, layer_velocity=layer_velocity, rho=rho, layer_density=layer_density,
              mpi=mpi, domains=domains)
    m, amp, d = _imaging(v, dh, dt, source_amplitudes, source_locations, receiver_locations, data, kw)
    image, corr, illum = m.rtm(amp, d, _bool(subtract_background, "subtract_background"),
                               _bool(normalize, "normalize"), float(stabilization), _bool(laplacian, "laplacian"),
                               _mask(mask, v), str(condition))
    return Image(image, corr, illum)


@_tensors_in_out
def lsrtm(v, dh: float, dt: float, source_amplitudes, source_locations, receiver_locations, data, *,
          iterations: int = 10, subtract_background: bool = True, precondition: bool = True,
          stabilization: float = 1e-3, mask=None, storage: str = "boundary",
          storage_location: str = "device", storage_dtype: str = "fp32", disk_dir: str = "", order: int = 4,
          pml_width=20, pml_reflection: float = 1e-3, pml_freq: float = 25.0,
          pml_velocity: Optional[float] = None, free_surface: bool = False, batch: int = 0,
          schedule: str = "auto", location_units: str = "cells", layer_velocity=None, rho=None,
          layer_density=None, mpi: bool = False,
          domains=None) -> Image:
    """Least-squares reverse-time migration: the velocity perturbation (m/s) m that minimises
    |born(m) - d|, d the reflected data as in `rtm`, by `iterations` of conjugate gradients on the
    normal equations (one `born` and one transpose each), from m = 0, preconditioned by the
    inverse source illumination (plus `stabilization` times its maximum) when `precondition`;
    `mask` (the shape of v, or None) holds the perturbation at 0 where it is 0 (the water). `misfit` holds |born(m) - d| / |d| after each iteration."""
    kw = dict(order=order, pml_width=pml_width, pml_reflection=pml_reflection, pml_freq=pml_freq,
              pml_velocity=pml_velocity, free_surface=free_surface, batch=batch, schedule=schedule,
              storage=storage, storage_location=storage_location, storage_dtype=storage_dtype, disk_dir=disk_dir,
              location_units=location_units, layer_velocity=layer_velocity, rho=rho, layer_density=layer_density,
              mpi=mpi, domains=domains)
    m, amp, d = _imaging(v, dh, dt, source_amplitudes, source_locations, receiver_locations, data, kw)
    image, misfit = m.lsrtm(amp, d, _int(iterations, "iterations"), _bool(subtract_background, "subtract_background"),
                            _bool(precondition, "precondition"), float(stabilization), _mask(mask, v))
    return Image(image, misfit=misfit)


@dataclass
class Gradient:
    """What `gradient` returns. `grad` maps each parameter to dL/dparameter ([nz, nx] or
    [nz, ny, nx], the dtype of v); `illum_src` and `illum_rec` are the source and receiver
    illuminations (sum over time of the wavefields squared, float64); `data` the synthetic data
    [shot, receiver, time]; `shot_losses` each shot's loss."""
    loss: float
    grad: dict
    illum_src: np.ndarray
    illum_rec: np.ndarray
    data: np.ndarray
    shot_losses: np.ndarray = field(repr=False)


@_tensors_in_out
def gradient(v, dh: float, dt: float, source_amplitudes, source_locations, receiver_locations, observed_data, *,
             loss_scale: float = 1.0, storage: str = "boundary", storage_location: str = "device",
             storage_dtype: str = "fp32", disk_dir: str = "", order: int = 4, pml_width=20,
             pml_reflection: float = 1e-3, pml_freq: float = 25.0, pml_velocity: Optional[float] = None,
             free_surface: bool = False, batch: int = 0,
             schedule: str = "auto", location_units: str = "cells", layer_velocity=None, rho=None,
             layer_density=None, mpi: bool = False,
             domains=None) -> Gradient:
    """The loss L = loss_scale * sum (synthetic - observed)^2 and its gradient with respect to
    the velocity (and, with `rho`, the density: grad["rho"]), by boundary saving (`storage`
    "boundary" or "full"; `storage_location` "device", "host" or "disk"; `storage_dtype` "fp32",
    "fp16", "bf16" or "int8"). `mpi` and `domains` as `forward`'s."""
    s = _survey(v, source_locations, receiver_locations, dh, location_units)
    amp = _amplitudes(source_amplitudes, s)
    obs = _data_time_major(observed_data, s.v.dtype, s.src.shape[0], s.rec.shape[1], "observed_data")
    if obs.shape[1] != amp.shape[2]:
        raise ValueError(f"observed_data has {obs.shape[1]} time samples, source_amplitudes {amp.shape[2]}")
    s, no_src, no_rec = _with_placeholders(s)
    if no_src:  # a silent placeholder source: the synthetic data are zero
        amp = np.zeros((s.src.shape[0], 1, amp.shape[2]), s.v.dtype)
    m = _modeling_with_model(s, dh, dt, amp.shape[2], rho, layer_velocity, layer_density, order=order,
                             pml_width=pml_width, pml_reflection=pml_reflection, pml_freq=pml_freq,
                             pml_velocity=pml_velocity, free_surface=free_surface, batch=batch, schedule=schedule,
                             storage=storage, storage_location=storage_location, storage_dtype=storage_dtype,
                             disk_dir=disk_dir, mpi=mpi, domains=domains)
    if no_rec:  # no data: the loss is 0, its gradient 0; the source illumination is the forward's
        shots, nt = amp.shape[0], amp.shape[2]
        g, isrc, irec, grho, _, _ = m.vjp(amp, np.zeros((shots, nt, 1), s.v.dtype))
        loss, syn, losses = 0.0, np.zeros((shots, nt, 0), s.v.dtype), np.zeros(shots)
    else:
        loss, g, isrc, irec, syn, losses, grho = m.gradient(amp, obs, float(loss_scale))
    grads = {"vp": g.astype(s.v.dtype, copy=False)}
    if grho is not None:
        grads["rho"] = grho.astype(s.v.dtype, copy=False)
    return Gradient(loss, grads, isrc, irec, syn.transpose(0, 2, 1), losses)


def _domains(domains, ndim):
    """The model split of `Inversion(domains=...)`: [] (one domain), [nx] in 2D, [ny, nx] in 3D."""
    if domains is None:
        return []
    want = "[nx_parts]" if ndim == 2 else "[ny_parts, nx_parts]"
    try:
        parts = [int(d) for d in domains]
    except (TypeError, ValueError):
        raise ValueError(f"domains = {domains!r}: a {ndim}D model takes {want} (whole numbers)") from None
    if len(parts) != ndim - 1 or any(p < 1 or p != d for p, d in zip(parts, domains)):
        raise ValueError(f"domains = {list(domains)!r}: a {ndim}D model takes {want}, each >= 1")
    return parts


# The inversion (Options, Problem, Inversion) lives in ksweep/inversion.py, over the helpers above.
from .inversion import Inversion, Options, Problem  # noqa: E402,F401
