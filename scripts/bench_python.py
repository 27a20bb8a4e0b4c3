#!/usr/bin/env python3
"""The Python call against the C++ call, same run: the 8-shot Marmousi2 forward at 25 m
(141 x 681 cells, 200 receivers, nt 2000, order 4, 50-cell layer), in alternating pairs.

    PYTHONPATH=build/python /usr/bin/python3 scripts/bench_python.py [--pairs N] [--json FILE]

`ksweep.forward` (argument checks, the set-up, the velocity, the forward, the records as a
view) against the library's fwi::Modeling doing the same from C++ alone, both on the module's
worker thread. Also: tracemalloc's peak over one Python call against the records' bytes (numpy
reports its allocations to tracemalloc): a wavefield copied to Python would show there.

`--scalar` times Deepwave's convention instead: `ksweep.scalar` on torch tensors (the source
term, the one-sample shift, the final wavefields handed back) against the library doing the same
from C++ alone (the forward and its end state into host arrays), then against `ksweep.forward`,
the same survey, in alternating pairs (torch at one thread).

`--backward` times the backward of `ksweep.scalar` with v requiring grad (whose source term
makes the amplitudes require grad too) both ways on one modelling: the model's and the
amplitudes' gradients from one reverse sweep (`vjp(..., wavelet_grad=True)`) against the
model's sweep and then an adjoint pass for the amplitudes (`vjp` + `adjoint`), and checks that
the amplitudes' gradients are the same bits.

`--callback` times `ksweep.scalar`'s `backward_callback` instead, on a case of its own (4 shots on
120 x 400 cells, nt 1000, a 20-cell layer, from the end state of a 200-sample run): forward and
backward with no callback and with a callback that does nothing at sample 0 alone, every 10
samples and every sample, interleaved, best of `--pairs`; then none and every 10 samples with the
batched schedule forced, best of 3, for the schedule's share.

`--parts` takes a vjp (`Modeling.vjp`: the forward run that saves, then the reverse sweep) of the
Marmousi2 survey apart: for the library's settings and variants of them (the layer's chain rule
off by giving a layer velocity, fp16 storage, a 20-cell layer, the batched schedule), a forward,
the first vjp of a fresh modelling (which touches its buffers for the first time) and the best
of two more (a modelling made after another one has gone takes its layer buffer: the first vjp
of a later variant shows that); then `ksweep.scalar`'s forward and backward (v requiring grad,
Python's 20-cell layer) called three times, a new modelling each.
"""
import argparse
import json
import statistics
import time
import tracemalloc

import numpy as np

import ksweep
from host_info import cpu_model
from ksweep import _ksweep

p = argparse.ArgumentParser()
p.add_argument("--pairs", type=int, default=5)
p.add_argument("--json")
p.add_argument("--scalar", action="store_true", help="ksweep.scalar against ksweep.forward")
p.add_argument("--backward", action="store_true", help="one reverse sweep for both gradients against two passes")
p.add_argument("--callback", action="store_true", help="the cost of a backward_callback")
p.add_argument("--parts", action="store_true", help="a vjp's cost against a forward's, by setting")
a = p.parse_args()


def callback_costs():
    import torch
    import ksweep.torch as kt
    torch.set_num_threads(1)
    nz, nx, nt, shots = 120, 400, 1000, 4
    v0 = torch.full((nz, nx), 2000.0)
    v0[60:] = 2600.0
    amp = torch.from_numpy(ksweep.ricker(15.0, nt, 0.001)).float().reshape(1, 1, nt).repeat(shots, 1, 1)
    src = torch.tensor([[[2, 50 + 100 * s]] for s in range(shots)])
    rec = torch.tensor([[[2, x] for x in range(0, nx, 4)]] * shots)
    kw = dict(source_locations=src, receiver_locations=rec, pml_width=20)
    first = ksweep.scalar(v0, 10.0, 0.001, source_amplitudes=amp[..., :200], **kw)
    names = ("wavefield_0", "wavefield_m1", "psiy_m1", "psix_m1", "zetay_m1", "zetax_m1")

    def run(freq):
        vv = v0.clone().requires_grad_(True)
        st = [x.clone() for x in first[:6]]
        extra = {} if freq is None else dict(backward_callback=lambda state: None, callback_frequency=freq)
        t0 = time.perf_counter()
        out = ksweep.scalar(vv, 10.0, 0.001, source_amplitudes=amp, **dict(zip(names, st)), **kw, **extra)
        out[-1].pow(2).sum().backward()
        return time.perf_counter() - t0

    def best_of(cases, reps):
        for f in cases.values():
            run(f)
        best = {}
        for _ in range(reps):
            for k, f in cases.items():
                best[k] = min(best.get(k, 1e9), run(f))
        return best

    best = best_of({"no callback": None, "callback at sample 0 alone": nt, "callback every 10 samples": 10,
                    "callback every sample": 1}, a.pairs)
    options = kt._options
    kt._options = lambda **o: {**options(**o), "schedule": "batched"}
    try:
        best.update(best_of({"batched: no callback": None, "batched: callback every 10 samples": 10}, 3))
    finally:
        kt._options = options
    for k, t in best.items():
        print(f"{k}: {t:.3f} s  {t / best['no callback']:.3f}x")


if a.callback:
    callback_costs()
    raise SystemExit(0)

v, dh = ksweep.load_model("marmousi2", decimate=2)
nz, nx = v.shape
dt, nt, shots, nr = 0.002, 2000, 8, 200
sx = np.floor(0.1 * (nx - 1) + 0.8 * (nx - 1) * np.arange(shots) / (shots - 1) + 0.5).astype(np.int64)
rx = np.floor((nx - 1) * np.arange(nr) / (nr - 1) + 0.5).astype(np.int64)
src = np.stack([np.full(shots, 2), sx], -1)[:, None, :]
rec = np.ascontiguousarray(np.broadcast_to(np.stack([np.full(nr, 4), rx], -1), (shots, nr, 2)))
amp = np.ascontiguousarray(np.broadcast_to(ksweep.ricker(5.0, nt, dt, 0.2).astype(np.float32), (shots, 1, nt)))
kw = dict(order=4, pml_width=50)


def python_call():
    t0 = time.perf_counter()
    ksweep.forward(v, dh, dt, amp, src, rec, **kw)
    return time.perf_counter() - t0


def cpp_call():
    return _ksweep._cpp_forward_seconds(list(v.shape), dh, dt, 4, 50, src, rec, amp, v)


def alternate(f, g, f_name, g_name):
    """a.pairs timings (f, g) after a warm-up of each, the first of a pair alternating."""
    f(), g()
    pairs = []
    for i in range(a.pairs):
        first, second = (f, g) if i % 2 == 0 else (g, f)
        t1, t2 = first(), second()
        tf, tg = (t1, t2) if first is f else (t2, t1)
        pairs.append((tf, tg))
        print(f"pair {i + 1}: {f_name} {tf:.3f} s  {g_name} {tg:.3f} s  ratio {tf / tg:.4f}", flush=True)
    return pairs


if a.scalar:
    import torch
    torch.set_num_threads(1)
    tensors = [torch.from_numpy(x) for x in (v, amp, src, rec)]

    def scalar_call():
        t0 = time.perf_counter()
        ksweep.scalar(tensors[0], dh, dt, source_amplitudes=tensors[1], source_locations=tensors[2],
                      receiver_locations=tensors[3], accuracy=4, pml_width=50)
        return time.perf_counter() - t0

    def cpp_end_state_call():
        return _ksweep._cpp_forward_seconds(list(v.shape), dh, dt, 4, 50, src, rec, amp, v, end_state=True)

    pairs = alternate(scalar_call, cpp_end_state_call, "scalar", "c++ with the end state")
    ratios = [ts / tc for ts, tc in pairs]
    print(f"scalar / c++ with the end state: median {statistics.median(ratios):.4f}, mean "
          f"{statistics.fmean(ratios):.4f} over {len(ratios)} pairs; fastest / fastest "
          f"{min(t for t, _ in pairs) / min(t for _, t in pairs):.4f}")
    versus_forward = [ts / tf for ts, tf in alternate(scalar_call, python_call, "scalar", "forward")]
    print(f"scalar / forward: median {statistics.median(versus_forward):.4f}, mean "
          f"{statistics.fmean(versus_forward):.4f} over {len(versus_forward)} pairs")
    if a.json:
        out = {"cpu": cpu_model(), "threads": ksweep.info()["concurrency"],
               "backend": ksweep.info()["backend"], "torch_threads": torch.get_num_threads(),
               "case": f"{shots} shots, {nz} x {nx} cells, nt {nt}, order 4, 50-cell layer",
               "pairs": [{"scalar_s": ts, "cpp_end_state_s": tc} for ts, tc in pairs],
               "ratio_median": statistics.median(ratios), "ratio_mean": statistics.fmean(ratios),
               "ratio_of_minima": min(t for t, _ in pairs) / min(t for _, t in pairs),
               "scalar_over_forward_median": statistics.median(versus_forward)}
        json.dump(out, open(a.json, "w"), indent=1)
    raise SystemExit(0)


if a.parts:
    s = ksweep._survey(v, src, rec, dh, "cells")
    g = np.asarray(np.sin(np.arange(shots * nt * nr, dtype=np.float64) * 0.37), np.float32).reshape(shots, nt, nr)

    def timed(f):
        t0 = time.perf_counter()
        f()
        return time.perf_counter() - t0

    variants = {"library settings (fp32, layer chain, 50-cell layer, auto)": {}, "layer chain off": dict(chain=False),
                "fp16 storage": dict(dtype="fp16"), "20-cell layer": dict(width=20),
                "20-cell layer, layer chain off": dict(width=20, chain=False), "batched schedule": dict(sched="batched")}
    for name, o in variants.items():
        m = ksweep._modeling(s, dh, dt, nt, order=4, pml_width=o.get("width", 50), pml_reflection=1e-3, pml_freq=25.0,
                             free_surface=False, batch=0, schedule=o.get("sched", "auto"),
                             storage_dtype=o.get("dtype", "fp32"))
        m.set_velocity(s.v, None if o.get("chain", True) else s.v.copy())  # a layer velocity of its own: no chain
        first = timed(lambda: m.vjp(amp, g))
        fw = min(timed(lambda: m.forward(amp)) for _ in range(2))
        vj = min(timed(lambda: m.vjp(amp, g)) for _ in range(2))
        print(f"{name}: forward {fw:.2f} s; vjp first {first:.2f} s ({first / fw:.1f} forwards), then {vj:.2f} s "
              f"({vj / fw:.1f} forwards)", flush=True)
        del m
    import torch
    torch.set_num_threads(1)
    tv, ta, ts, tr = (torch.from_numpy(np.ascontiguousarray(x)) for x in (v, amp, src, rec))
    for i in range(3):
        vv = tv.clone().requires_grad_(True)
        t0 = time.perf_counter()
        out = ksweep.scalar(vv, dh, dt, source_amplitudes=ta, source_locations=ts, receiver_locations=tr, accuracy=4)
        out[-1].pow(2).sum().backward()
        print(f"ksweep.scalar forward and backward, call {i + 1}: {time.perf_counter() - t0:.2f} s", flush=True)
    raise SystemExit(0)


if a.backward:
    s = ksweep._survey(v, src, rec, dh, "cells")
    m = ksweep._modeling(s, dh, dt, nt, order=4, pml_width=50, pml_reflection=1e-3, pml_freq=25.0,
                         free_surface=False, batch=0, schedule="auto")
    m.set_velocity(s.v, ksweep._layer(None, s))
    g = np.asarray(np.sin(np.arange(shots * nt * nr, dtype=np.float64) * 0.37), np.float32).reshape(shots, nt, nr)
    got = {}

    def one_sweep():
        t0 = time.perf_counter()
        got["one"] = m.vjp(amp, g, wavelet_grad=True)[4]
        return time.perf_counter() - t0

    def two_passes():
        t0 = time.perf_counter()
        m.vjp(amp, g)
        got["two"] = m.adjoint(g)
        return time.perf_counter() - t0

    pairs = alternate(one_sweep, two_passes, "one sweep", "vjp + adjoint")
    ratios = [t1 / t2 for t1, t2 in pairs]
    same = got["one"].tobytes() == got["two"].tobytes()
    print(f"one sweep / (vjp + adjoint): median {statistics.median(ratios):.4f}, mean {statistics.fmean(ratios):.4f} "
          f"over {len(ratios)} pairs; the amplitudes' gradients the same bits: {same}")
    raise SystemExit(0 if same else 1)


pairs = alternate(python_call, cpp_call, "python", "c++")
ratios = [tp / tc for tp, tc in pairs]
tracemalloc.start()
d = ksweep.forward(v, dh, dt, amp, src, rec, **kw)
_, peak = tracemalloc.get_traced_memory()
tracemalloc.stop()
records = d.nbytes
padded = (nz + 50 + 50) * (nx + 100) * shots * 4
out = {"cpu": cpu_model(), "threads": ksweep.info()["concurrency"],
       "backend": ksweep.info()["backend"], "case": f"{shots} shots, {nz} x {nx} cells, nt {nt}, order 4",
       "pairs": [{"python_s": tp, "cpp_s": tc} for tp, tc in pairs],
       "ratio_median": statistics.median(ratios), "ratio_mean": statistics.fmean(ratios),
       "ratio_of_minima": min(tp for tp, _ in pairs) / min(tc for _, tc in pairs),
       "python_peak_bytes": peak, "records_bytes": records, "one_wavefield_level_bytes": padded}
print(f"python / c++: median {out['ratio_median']:.4f}, mean {out['ratio_mean']:.4f} over {len(ratios)} pairs; "
      f"fastest python / fastest c++ {out['ratio_of_minima']:.4f}")
print(f"Python-side allocations during one call: {peak / 2**20:.1f} MiB peak; records {records / 2**20:.1f} MiB; "
      f"one wavefield level {padded / 2**20:.1f} MiB")
if a.json:
    json.dump(out, open(a.json, "w"), indent=1)
