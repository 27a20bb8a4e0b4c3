"""ksweep.Inversion: full-waveform inversion over ksweep's library, its keyword Options and its
Problem (the package's top level exports all three)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional

import numpy as np

from . import _ksweep
from . import keys, _domains, _int, _survey, _pml_faces, _pml_velocity, _data_time_major, _FLOATS

def _option_keys() -> dict:
    """Inversion's keywords from the key table: name -> (default, keys). Names "x[0]", "x[1]" in
    the table make one keyword x, a tuple (betas: fwi.beta1, fwi.beta2)."""
    out, groups = {}, {}
    for k in keys():
        name = k["python"]
        if not name:
            continue
        default = k.get("python_default", k["default"])
        if "[" in name:
            base, index = name[:-1].split("[")
            groups.setdefault(base, {})[int(index)] = (default, k["key"])
        else:
            out[name] = (default, (k["key"],))
    for base, parts in groups.items():
        items = [parts[i] for i in sorted(parts)]
        out[base] = (tuple(d for d, _ in items), tuple(key for _, key in items))
    return out


class Options:
    """The options of an `Inversion`, by keyword: each keyword sets a key of the program's
    configuration (`keys()` lists them with the keyword, type, limits and meaning), with the
    key's default (or the Python default the table states). `Options(lr=10, optimizer="lbfgs")`;
    an unknown keyword is refused, naming the known ones. The library checks each value against
    the key's limits as the program checks the key."""

    def __init__(self, **keywords):
        known = _option_keys()
        unknown = sorted(set(keywords) - set(known))
        if unknown:
            raise TypeError(f"unknown option(s) {', '.join(unknown)} (options: {', '.join(sorted(known))})")
        for name, (default, _) in known.items():
            setattr(self, name, keywords.get(name, default))

    def keywords(self) -> dict:
        return dict(vars(self))

    def __repr__(self) -> str:
        known = _option_keys()
        changed = [f"{n}={v!r}" for n, v in vars(self).items() if v != known[n][0]]
        return f"Options({', '.join(changed)})"


@dataclass
class Problem:
    """What an `Inversion` inverts: the starting model `v` (m/s), grid spacing `dh` (m), time step
    `dt` (s), one `wavelet` (nt samples) for every shot, `source_locations` [shot, 1, dim] and
    `receiver_locations` [shot, receiver, dim] (in `location_units`: "cells" or "m"), and
    `observed_data` [shot, receiver, time]; optionally `true_model` (for the RMSE), and with
    variable density the starting `density` (kg/m^3) and `true_density`."""
    v: object
    dh: float
    dt: float
    wavelet: object
    source_locations: object
    receiver_locations: object
    observed_data: object
    true_model: object = None
    density: object = None
    true_density: object = None
    location_units: str = "cells"


class Inversion:
    """Full-waveform inversion of the velocity over ksweep's library (float32).

    `wavelet` is one source signature (nt samples) for every shot, with one source per shot;
    `observed_data` is [shot, receiver, time]. Each `step()` runs one iteration (a batch of
    `batch` shots drawn with `seed` for Adam, every shot for L-BFGS) and returns its report;
    `run(iterations, callback)` calls `callback(report)` after each (return False to stop).
    `state()` / `restore(state)` are the whole state between iterations. Every velocity stays
    in [`vmin`, `vmax`] (m/s); `vmax` must propagate stably with `dt` (the library refuses one
    beyond the CFL limit, as the program refuses fwi.vmax), and `vmax=0` is that limit
    (constant density). A starting model outside the bounds (below the water rows) is refused,
    as the program refuses it: its cells would be clipped at the first step. The options get
    the program's checks, by the same library code (L-BFGS takes the gradient as it is: no
    `grad_smooth`, no `precondition`).

    With `density` (kg/m^3, the shape of v) the physics is variable-density acoustics:
    `invert` names the parameters inverted ("vp", "rho"; the others held), `rho_min` and
    `rho_max` bound the density, `lr_rho` is Adam's step for it (0: lr), `true_density` gives
    the density RMSE.

    `domains` splits the model over MPI ranks ([nx_parts] in 2D, [ny_parts, nx_parts] in 3D,
    constant density): run the script with `mpirun -n N`; the ranks form N / parts shot groups,
    each rank propagates its subdomain, and every rank holds the same whole model after each
    step, the same bits as one rank. Without MPI (or with one rank) only one domain fits.

    `layer_chain=True` takes the gradient's chain rule of the absorbing layer's copy of the
    model's edge cells (exact at the edge cells; the layer's cells saved every step: layer cells
    x batch x nt x 4 bytes on the device), as the program's `storage.layer_chain`; the default
    holds the layer fixed for the gradient.

    `stages` runs frequency continuation as the program's `fwi.stages` does: a list of
    `(iterations, max_freq)` pairs; each stage inverts the data and the wavelet low-passed with
    zero phase below `max_freq` (Hz) for its iterations, the optimizer started afresh at its
    first, and the last stage goes on past its iterations. `observed_data` and `wavelet` are the
    whole band; `run()` without a count runs every stage's iterations.

    `Inversion(Problem(...), Options(...))` is the same as `Inversion(v, dh, dt, wavelet,
    source_locations, receiver_locations, observed_data, true_model=..., **options)`: the
    options are the program's configuration keys that `keys()` gives a `python` keyword (see
    `Options`), each checked against the key's limits as the program checks the key."""

    def __init__(self, v, dh: Optional[float] = None, dt: Optional[float] = None, wavelet=None,
                 source_locations=None, receiver_locations=None, observed_data=None, *, true_model=None,
                 density=None, true_density=None, location_units: str = "cells", options: Optional[Options] = None,
                 **keywords):
        if isinstance(dh, Options):  # Inversion(problem, options)
            options, dh = dh, None
        if isinstance(v, Problem):
            if any(x is not None for x in (dh, dt, wavelet, source_locations, receiver_locations, observed_data,
                                           true_model, density, true_density)):
                raise TypeError("Inversion(problem, options): the problem holds the data; give nothing else "
                                "beside it but options")
            p = v
            v, dh, dt, wavelet = p.v, p.dh, p.dt, p.wavelet
            source_locations, receiver_locations, observed_data = (p.source_locations, p.receiver_locations,
                                                                   p.observed_data)
            true_model, density, true_density, location_units = (p.true_model, p.density, p.true_density,
                                                                 p.location_units)
        if any(x is None for x in (dh, dt, wavelet, source_locations, receiver_locations, observed_data)):
            raise TypeError("Inversion takes a Problem, or v, dh, dt, wavelet, source_locations, "
                            "receiver_locations and observed_data")
        if options is not None and keywords:
            raise TypeError("Inversion: give the options as an Options or as keywords, not both")
        o = (options if options is not None else Options(**keywords)).keywords()
        v = np.asarray(v)
        if v.dtype not in _FLOATS:
            raise TypeError(f"v has dtype {v.dtype}; ksweep computes in float32 or float64")
        s = _survey(v.astype(np.float32, copy=False), source_locations, receiver_locations, dh, location_units)
        w = np.ascontiguousarray(np.asarray(wavelet, dtype=np.float64))
        if w.ndim != 1:
            raise ValueError(f"wavelet has shape {w.shape}: the inversion takes one signature (nt samples) "
                             "for every shot")
        if s.src.shape[1] != 1:
            raise ValueError(f"source_locations has {s.src.shape[1]} sources per shot: the inversion takes one")
        obs = np.asarray(observed_data)
        obs = _data_time_major(obs.astype(np.float32, copy=False), np.float32, s.src.shape[0], s.rec.shape[1],
                               "observed_data")
        if obs.shape[1] != w.size:
            raise ValueError(f"observed_data has {obs.shape[1]} time samples, the wavelet {w.size}")
        truth = None
        if true_model is not None:
            truth = np.ascontiguousarray(np.asarray(true_model, dtype=np.float32))
            if truth.shape != s.v.shape:
                raise ValueError(f"true_model has shape {truth.shape}, v {s.v.shape}")
        rho = true_rho = None
        if density is not None:
            rho = np.ascontiguousarray(np.asarray(density, dtype=np.float32))
            if rho.shape != s.v.shape:
                raise ValueError(f"density has shape {rho.shape}, v {s.v.shape}")
            if true_density is not None:
                true_rho = np.ascontiguousarray(np.asarray(true_density, dtype=np.float32))
                if true_rho.shape != s.v.shape:
                    raise ValueError(f"true_density has shape {true_rho.shape}, v {s.v.shape}")
        elif true_density is not None or tuple(o["invert"]) != ("vp",):
            raise ValueError("true_density and invert other than ('vp',) need a density (variable density)")
        split = _domains(o.pop("domains"), s.v.ndim)
        plan = []
        for k, st in enumerate(o.pop("stages") or ()):
            if len(st) != 2:
                raise ValueError(f"stages[{k}] = {st!r} is not an (iterations, max_freq) pair")
            plan.append((_int(st[0], f"stages[{k}] iterations"), float(st[1])))
        self._stage_iterations = sum(n for n, _ in plan)
        self.shape = s.v.shape
        self._data_shape = (s.src.shape[0], s.rec.shape[1], w.size)  # [shot, receiver, time]
        faces = _pml_faces(o.pop("pml_width"), o["free_surface"])
        o["pml_velocity"] = _pml_velocity(o["pml_velocity"])
        beta1, beta2 = o.pop("betas")
        o.update({"betas[0]": beta1, "betas[1]": beta2, "domains": split, "stages": plan})
        o["invert"] = [str(x) for x in o["invert"]]
        self._inv = _ksweep.Inversion(list(s.v.shape), float(dh), float(dt), faces, s.src, s.rec, w, obs, s.v, truth,
                                      rho, true_rho, o)
        self._precondition = bool(o.get("precondition", False))
        self._illuminations = False  # summed when asked for (set_illuminations) or preconditioning
        self._summed = None  # whether the last iteration's evaluations summed them (None: no iteration yet)
        self._inv.set_illuminations(False)

    def step(self) -> dict:
        """One iteration: {'iteration', 'loss', 'loss_start', 'rmse', 'seconds', 'shots', 'evaluations'}
        ('loss': after the step for L-BFGS, before it for Adam; 'loss_start': before it)."""
        report = dict(self._inv.step())
        self._summed = self._illuminations or self._precondition
        return report

    def set_illuminations(self, on: bool = True):
        """Whether the next iterations' gradients also sum the source and receiver illuminations
        that images() returns (off by default: a gradient without them costs about 0.6 of one
        with them on a CPU; `precondition` sums them whatever this says). The model is the same
        bits either way."""
        if not isinstance(on, (bool, np.bool_)):
            raise TypeError(f"set_illuminations: on = {on!r} must be a bool")
        self._illuminations = bool(on)
        self._inv.set_illuminations(self._illuminations)

    def run(self, iterations: Optional[int] = None,
            callback: Optional[Callable[[dict], Optional[bool]]] = None) -> list:
        """Runs until `iterations` are done in all (None: every stage's; or until `callback`
        returns False); the reports."""
        if iterations is None:
            if not self._stage_iterations:
                raise ValueError("run() needs a number of iterations (no stages were given)")
            iterations = self._stage_iterations
        reports = []
        while self._inv.iteration() < iterations:
            r = self.step()
            reports.append(r)
            if callback is not None and callback(r) is False:
                break
        return reports

    @property
    def iteration(self) -> int:
        return self._inv.iteration()

    @property
    def model(self) -> np.ndarray:
        """The current model (float32, the shape of v)."""
        return self._inv.model()

    @property
    def density(self):
        """The current density (float32, the shape of v), or None for constant density."""
        return self._inv.density()

    def rmse_density(self) -> float:
        """RMSE of the current density against true_density (NaN without one)."""
        return self._inv.rmse_density()

    def memory_estimate(self) -> dict:
        """The memory one rank was estimated to need before the inversion allocated it, as the
        program's `--dry-run` prints it: {'phase', 'items': [(what, place, bytes)], 'device',
        'host', 'disk'} (totals in bytes)."""
        return dict(self._inv.memory_estimate())

    def images(self) -> dict:
        """The last evaluation's gradient and illuminations: {'grad', 'illum_src', 'illum_rec'}
        (and 'grad_rho' with variable density); the illuminations are None unless the last
        iteration summed them (set_illuminations(True), or `precondition`)."""
        d = dict(self._inv.images())
        if not self._summed:
            d["illum_src"] = d["illum_rec"] = None
        return d

    def rmse(self) -> float:
        """RMSE of the current model against true_model (NaN without one)."""
        return self._inv.rmse()

    def state(self) -> dict:
        """The whole state between iterations (iteration, generator, model, Adam's moments or
        L-BFGS's memory under 'lbfgs': correction pairs, gradient, loss, counters)."""
        return dict(self._inv.state())

    def restore(self, state: dict) -> None:
        """Continues from `state` (from state()), replacing the model; the next step is the one the
        saved inversion would have taken (L-BFGS without 'lbfgs' in `state` starts afresh)."""
        self._inv.restore(state)
        self._summed = None

    def set_data(self, wavelet, observed_data) -> None:
        """A new stage (frequency continuation): `wavelet` (nt samples) and `observed_data`
        [shot, receiver, time] replace the inversion's from the next step on. The optimizer's
        state is kept; call restart_optimizer() as well when the stage begins. (With `stages`
        the inversion switches the data itself: use one or the other.)"""
        w = np.ascontiguousarray(np.asarray(wavelet, dtype=np.float64))
        obs = np.asarray(observed_data).astype(np.float32, copy=False)
        if obs.shape != self._data_shape:
            raise ValueError(f"observed_data has shape {obs.shape}, expected [shot, receiver, time] = "
                             f"{list(self._data_shape)}")
        if w.shape != (self._data_shape[2],):
            raise ValueError(f"wavelet has shape {w.shape}, expected [time] = [{self._data_shape[2]}]")
        self._inv.set_data(w, np.ascontiguousarray(obs.transpose(0, 2, 1)))

    def restart_optimizer(self) -> None:
        """The optimizer starts afresh: Adam's moments and step count, or L-BFGS's memory."""
        self._inv.restart_optimizer()
