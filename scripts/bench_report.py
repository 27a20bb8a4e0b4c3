#!/usr/bin/python3
"""Turns Google Benchmark JSON outputs of ksweep_bench (and peer timings written by
scripts/peer_deepwave.py) into docs/benchmarks/REPORT.md with PNG plots.

    scripts/bench_report.py RUN1.json [RUN2.json ...] [--peer PEER.json ...] --out docs/benchmarks

Runs may come from different machines and backends (Serial, OpenMP, Cuda); every series is
labelled host/backend. A JSON whose top level has "peer" is taken as a peer timing file; one with
"dim": 3 (peer_deepwave.py --dim 3) is paired with the cube3d / cube3d_memory benchmarks in the
"3D" section, the others (2-D) with the marmousi benchmarks.
Needs only matplotlib (Agg) and json.
"""
import argparse
import json
import os
import sys
from collections import defaultdict

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

REGEN = "scripts/run_benchmarks.sh"


def parse_name(name):
    parts = [p for p in name.split("/") if p not in ("manual_time", "real_time")]
    family = parts[0]
    backend = parts[1] if len(parts) > 1 else "?"
    params = {}
    for p in parts[2:]:
        if ":" in p:
            k, v = p.split(":", 1)
            params[k] = v
    return family, backend, params


def num(v):
    try:
        return int(v)
    except (TypeError, ValueError):
        try:
            return float(v)
        except (TypeError, ValueError):
            return v


def to_seconds(t, unit):
    return t * {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}.get(unit, 1.0)


def load(paths):
    """Google Benchmark runs, peer files, and the Python package's overhead files
    (scripts/bench_python.py --json: a ratio of two timings, no benchmarks)."""
    runs, peers, python = [], [], []
    for path in paths:
        with open(path) as f:
            data = json.load(f)
        if "benchmarks" not in data and "ratio_median" in data:
            data["_path"] = path
            python.append(data)
            continue
        if "peer" in data:
            data["_path"] = path
            peers.append(data)
            continue
        ctx = data.get("context", {})
        rows = []
        for b in data.get("benchmarks", []):
            if b.get("run_type", "iteration") != "iteration" or b.get("error_occurred"):
                continue
            family, backend, params = parse_name(b["name"])
            row = {k: v for k, v in b.items()}
            row.update(family=family, backend=backend, params={k: num(v) for k, v in params.items()},
                       seconds=to_seconds(b.get("real_time", 0.0), b.get("time_unit", "ns")))
            rows.append(row)
        runs.append({"path": path, "context": ctx, "rows": rows,
                     "stem": os.path.splitext(os.path.basename(path))[0]})
    # The backends whose series label two runs share: those runs' series carry their file's name.
    count = defaultdict(int)
    for run in runs:
        for b in {r["backend"] for r in run["rows"]}:
            count[base_label(run, b)] += 1
    for run in runs:
        run["shared"] = {b for b in {r["backend"] for r in run["rows"]} if count[base_label(run, b)] > 1}
    return runs, peers, python


def python_section(python):
    """The Python package's overhead against the C++ library doing the same work, same run."""
    md = ["## The Python package's overhead (same run)", "",
          "`scripts/bench_python.py`: the same propagation called from Python and from C++ in one process, "
          "alternating pairs; a ratio above 1 is Python's share. `vm-python-overhead.json`: `ksweep.forward` "
          "(numpy) against the library's `fwi::Modeling` doing the same from C++; `vm-python-scalar-overhead.json`: `ksweep.scalar` (torch "
          "tensors, Deepwave's convention) against the C++ forward that hands back the end state as it does.", ""]
    rows = []
    for d in sorted(python, key=lambda d: os.path.basename(d["_path"])):
        pairs = d.get("pairs", [])
        rows.append([os.path.basename(d["_path"]), d.get("cpu", "?"), "%s %s" % (d.get("backend", "?"), d.get("threads", "?")),
                     d.get("case", "?"), len(pairs) if isinstance(pairs, list) else pairs,
                     "**%.3f**" % d["ratio_median"], "%.3f" % d.get("ratio_of_minima", float("nan"))])
    md += [table(["file", "CPU", "backend, threads", "case", "pairs", "Python / C++ (median)",
                  "fastest / fastest"], rows), ""]
    return md


def threads_of(ctx, backend):
    if backend == "Serial":
        return "1 thread"
    if backend == "OpenMP":
        return "%s threads" % ctx.get("omp_num_threads", ctx.get("kokkos_concurrency", "?"))
    return ctx.get("gpu_model", backend)


def base_label(run, backend):
    ctx = run["context"]
    return "%s/%s (%s)" % (ctx.get("hostname", "?"), backend, threads_of(ctx, backend))


def label(run, backend):
    """The series a run's rows of `backend` belong to: host, backend and threads, and the run's
    file where another run gives the same (runs of other days are not merged into one series)."""
    base = base_label(run, backend)
    return "%s [%s]" % (base, run["stem"]) if backend in run.get("shared", ()) else base


def series(runs, family):
    """{label: [rows]} for one family over all runs and backends."""
    out = defaultdict(list)
    for run in runs:
        for r in run["rows"]:
            if r["family"] == family:
                out[label(run, r["backend"])].append(r)
    return out


def grouped(rs, key, variant):
    """Rows of one series as {key(params): {variant(params): row}}: the same run in its variants."""
    by = defaultdict(dict)
    for r in rs:
        by[key(r["params"])][variant(r["params"])] = r
    return by


def gb(x):
    return "%.2f" % (x * 1e-9)


def fmt_bytes(x):
    for unit, scale in (("GiB", 2 ** 30), ("MiB", 2 ** 20), ("KiB", 2 ** 10)):
        if x >= scale:
            return "%.1f %s" % (x / scale, unit)
    return "%d B" % x


def run_memory(r):
    """What a ksweep benchmark row used: on host backends the increase of the peak resident set
    (as the peers are measured), on device backends the peak of Kokkos' allocations in the device's
    memory (`device_peak_bytes`; the resident set does not see a GPU's memory)."""
    if r.get("backend") not in ("OpenMP", "Serial", "Threads") and "device_peak_bytes" in r:
        return r["device_peak_bytes"]
    return r.get("rss_increase_bytes", 0)


def save(fig, out, name):
    path = os.path.join(out, name)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return name


def is_single_grid(r):
    p = r["params"]
    return p.get("shots") == 1 and p.get("nz") == p.get("nx")


def plot_forward_backends(runs, out):
    s = series(runs, "forward")
    cases = sorted({(r["params"]["order"], r["params"]["nz"]) for rows in s.values() for r in rows if is_single_grid(r)},
                   key=lambda c: (c[1], c[0]))
    if not cases:
        return None
    fig, ax = plt.subplots(figsize=(max(8, 0.6 * len(cases) * max(1, len(s))), 4.5))
    width = 0.8 / max(1, len(s))
    for i, (lab, rows) in enumerate(sorted(s.items())):
        by = {(r["params"]["order"], r["params"]["nz"]): r.get("cells_per_second", 0) for r in rows if is_single_grid(r)}
        xs = [j + i * width for j in range(len(cases))]
        ax.bar(xs, [by.get(c, 0) * 1e-9 for c in cases], width, label=lab)
    ax.set_xticks([j + 0.4 - width / 2 for j in range(len(cases))])
    ax.set_xticklabels(["o%d\n%d²" % c for c in cases], fontsize=8)
    ax.set_ylabel("Gcells/s (padded cells x steps / s)")
    ax.set_title("Forward throughput, one shot, fp32, 20-cell CPML")
    ax.legend(fontsize=8)
    return save(fig, out, "forward_backends.png")


def plot_roofline(runs, out):
    s = series(runs, "forward")
    fig, ax = plt.subplots(figsize=(8, 4.5))
    any_ = False
    for lab, rows in sorted(s.items()):
        for order in sorted({r["params"]["order"] for r in rows}):
            pts = sorted((r["padded_cells"], r.get("roofline_fraction", 0)) for r in rows
                         if is_single_grid(r) and r["params"]["order"] == order and "roofline_fraction" in r)
            if pts:
                any_ = True
                ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label="%s order %d" % (lab, order))
    if not any_:
        plt.close(fig)
        return None
    ax.axhline(0.6, color="k", ls="--", lw=0.8, label="goal 60 %")
    ax.set_xscale("log")
    ax.set_xlabel("padded cells per shot")
    ax.set_ylabel("fraction of triad bandwidth at 16 B/cell-step")
    ax.set_title("Forward: fraction of the measured roofline")
    ax.legend(fontsize=7, ncol=2)
    return save(fig, out, "roofline.png")


def plot_growth(runs, out, key, title, fname, select, xlabel, yfun=lambda r: r["seconds"], ylabel="seconds per run"):
    s = series(runs, "forward")
    fig, ax = plt.subplots(figsize=(7, 4.5))
    any_ = False
    for lab, rows in sorted(s.items()):
        for order in sorted({r["params"]["order"] for r in rows}):
            pts = sorted((key(r), yfun(r)) for r in rows if select(r) and r["params"]["order"] == order)
            if len(pts) > 1:
                any_ = True
                ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label="%s order %d" % (lab, order))
    if not any_:
        plt.close(fig)
        return None
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.legend(fontsize=7)
    return save(fig, out, fname)


def marmousi(r):
    return r["params"].get("nz") == 141 and r["params"].get("nx") == 681


def peer_dim(p, r=None):
    """Spatial dimension of a peer file (or of one of its results); files before --dim 3 are 2-D."""
    return int((r or {}).get("dim", p.get("dim", 2)))


def fmt_ratio(a, b):
    """a / b as "2.35" or, below 1, as "1/4.2"."""
    if not a or not b or a <= 0 or b <= 0:
        return ""
    q = a / b
    return "%.2f" % q if q >= 1 else "1/%.1f" % (1 / q)


def cube3d_section(runs, peers):
    """Markdown lines of the 3-D section: ksweep's cube3d / cube3d_memory benchmarks against
    scripts/peer_deepwave.py --dim 3 (same thread count); empty-table notes when absent."""
    md = ["## 3D: N^3 cubes, ksweep against Deepwave", "",
          "N^3 cells of 10 m (N = 48 fits in a 32 MiB L3 cache, 128 does not), vp = 1500 + 2000 z/(N-1) + "
          "150 sin(0.21 x) cos(0.17 y), 10-cell CPML on all 6 faces, dt 1 ms, nt 200, 10 Hz Ricker peaking at 0.1 s, "
          "2 shots at (2, N/2, N/3) and (2, N/2, 2N/3), receivers on every 4th cell of the plane z = 2, fp32; "
          "gradient = forward + loss 0.5 sum (d - d_obs)^2 + backward, d_obs from the model plus a +100 m/s sphere "
          "of radius N/6 at the centre. ksweep: `cube3d` benchmarks (boundary saving, fp32; one untimed call first); "
          "Deepwave: `scripts/peer_deepwave.py --dim 3` (gradient: its later calls, first call in parentheses). "
          "Cells/s count the padded grid (N+20)^3 x shots x nt per call for both; Deepwave resamples time when dt "
          "exceeds its Courant limit 0.6 dh / (sqrt(3) vmax) and then runs `step_ratio` internal steps per step "
          "(its per-internal-step rate is cells/s x step_ratio). Speed ratio = Deepwave seconds / ksweep seconds. "
          "Deepwave CPU use = its process CPU time / (wall time x threads), median over the samples: well below "
          "100 % means other work shared the cores.", ""]
    dw = {}
    dw_info = {}
    for p in peers:
        if peer_dim(p) != 3:
            continue
        for r in p.get("results", []):
            if peer_dim(p, r) == 3 and "order" in r and "cube_n" in r:
                dw[(int(r.get("threads", 0)), int(r["order"]), int(r["cube_n"]), r["kind"])] = r
                dw_info[int(r.get("threads", 0))] = p.get("context", {})
    rows, cpus = [], set()
    for run in runs:
        for r in run["rows"]:
            if r["family"] in ("cube3d", "cube3d_memory"):
                cpus.add("ksweep %s: %s" % (run["context"].get("hostname", "?"),
                                            run["context"].get("gpu_model", run["context"].get("cpu_model", "?"))))
    for th, c in sorted(dw_info.items()):
        cpus.add("Deepwave %s, %d thread(s): %s (%s)" % (c.get("hostname", "?"), th, c.get("cpu_model", "?"),
                                                         c.get("device", "?")))
    if cpus:
        md += ["Machines: " + "; ".join(sorted(cpus)) + ".", ""]
    for lab, rs in sorted(series(runs, "cube3d").items()):
        for r in sorted(rs, key=lambda r: (str(r["params"].get("kind")), r["params"].get("order", 0), r["params"].get("n", 0))):
            pr = r["params"]
            kind, order, n = str(pr.get("kind")), int(pr.get("order", 0)), int(pr.get("n", 0))
            th = int(r.get("threads", 0))
            d = dw.get((th, order, n, "forward" if kind == "forward" else "gradient_later"))
            d1 = dw.get((th, order, n, "gradient_first")) if kind == "gradient" else None
            sec = r.get("seconds", 0)
            rows.append([lab, th, kind, order, n, "%.4g" % sec, "%.1f" % (r.get("cells_per_second", 0) * 1e-6),
                         "%.1f" % r.get("bytes_per_cell_step", 0),
                         "%.1f %%" % (100 * r["roofline_fraction"]) if "roofline_fraction" in r else "",
                         fmt_bytes(run_memory(r)),
                         ("%.3f" % d["seconds"]) + (" (first %.2f)" % d1["seconds"] if d1 else "") if d else "",
                         "%.1f" % (d.get("cells_per_second", 0) * 1e-6) if d else "",
                         d.get("step_ratio", "") if d else "",
                         fmt_bytes(d.get("rss_increase_bytes", 0)) if d else "",
                         "%.0f %%" % (100 * sorted(d["cpu_utilization"])[len(d["cpu_utilization"]) // 2])
                         if d and d.get("cpu_utilization") else "",
                         "**%s**" % fmt_ratio(d["seconds"], sec) if d and sec > 0 else ""])
    if rows:
        md += ["### Throughput", "",
               table(["series", "threads", "run", "order", "N", "ksweep s", "ksweep Mcells/s", "B/cell-step (model)",
                      "of triad", "ksweep memory", "Deepwave s", "Deepwave Mcells/s", "Deepwave step_ratio",
                      "Deepwave memory", "Deepwave CPU use", "ksweep speed / Deepwave"], rows), ""]
    else:
        md += ["No `cube3d` benchmark runs given.", ""]
    if not dw:
        md += ["No 3D peer timings given (`scripts/peer_deepwave.py --dim 3`).", ""]

    # memory: full against boundary per dtype, with Deepwave's order-4 gradient on the same cube
    rows = []
    for lab, rs in sorted(series(runs, "cube3d_memory").items()):
        by = {}
        for r in rs:
            pr = r["params"]
            by[(int(pr.get("n", 0)), str(pr.get("dtype")), str(pr.get("strategy")))] = r
        dtypes = ["fp32", "fp16", "bf16", "int8"]
        keys = sorted({(n, dt) for n, dt, _ in by}, key=lambda k: (k[0], dtypes.index(k[1]) if k[1] in dtypes else 9, k[1]))
        for n, dt in keys:
            full, bnd = by.get((n, dt, "full")), by.get((n, dt, "boundary"))
            any_r = bnd or full
            th = int(any_r.get("threads", 0))
            d = dw.get((th, 4, n, "gradient_later")) or next(
                (v for (t, o, nn, k), v in sorted(dw.items()) if o == 4 and nn == n and k == "gradient_later"), None)

            def g(r, key, f=fmt_bytes):
                return f(r.get(key, 0)) if r else ""

            def peak(r):
                return "%s / +%s" % (fmt_bytes(r.get("peak_rss_bytes", 0)), fmt_bytes(r.get("rss_increase_bytes", 0))) if r else ""

            dinc = d.get("rss_increase_bytes", 0) if d else 0
            rows.append([lab, n, dt, g(full, "boundary_bytes"), g(bnd, "boundary_bytes"),
                         fmt_ratio(full.get("boundary_bytes", 0), bnd.get("boundary_bytes", 0)) if full and bnd else "",
                         g(full, "modelled_bytes"), g(bnd, "modelled_bytes"), peak(full), peak(bnd),
                         ("%s (%d thr.)" % (fmt_bytes(dinc), int(d.get("threads", 0)))) if d else "",
                         fmt_ratio(bnd.get("rss_increase_bytes", 0), dinc) if bnd and d else "",
                         fmt_ratio(bnd.get("modelled_bytes", 0), dinc) if bnd and d else ""])
    if rows:
        md += ["### Gradient memory (order 4): full against boundary saving", "",
               "Saved = the stored steps (`boundary_bytes`); modelled = saved + staging + wavefields + images + records "
               "(`modelled_bytes`); measured = peak resident set of the process / its increase during the gradient "
               "(one call per benchmark; the benchmarks share one process, so increases are lower bounds). Deepwave: "
               "the increase of its peak resident set during a later order-4 gradient call on the same cube (it keeps "
               "every step's wavefield, fp32).", "",
               table(["series", "N", "dtype", "saved full", "saved boundary", "full / boundary", "modelled full",
                      "modelled boundary", "measured full (peak / +increase)", "measured boundary (peak / +increase)",
                      "Deepwave memory", "ksweep boundary measured / Deepwave", "ksweep boundary modelled / Deepwave"],
                     rows), ""]
    else:
        md += ["No `cube3d_memory` benchmark runs given.", ""]
    return md


def plot_shots(runs, peers, out):
    s = series(runs, "forward")
    fig, ax = plt.subplots(figsize=(7, 4.5))
    any_ = False
    for lab, rows in sorted(s.items()):
        for order in sorted({r["params"]["order"] for r in rows}):
            nts = defaultdict(list)
            for r in rows:
                if marmousi(r) and r["params"]["order"] == order:
                    nts[r["params"]["shots"]].append(r)
            pts = sorted((k, max(v, key=lambda r: r["params"]["nt"])["cells_per_second"]) for k, v in nts.items())
            if len(pts) > 1:
                any_ = True
                ax.plot([p[0] for p in pts], [p[1] * 1e-9 for p in pts], marker="o", label="%s order %d" % (lab, order))
    for p in peers:
        for r in p.get("results", []):
            if r.get("kind") == "forward" and r.get("cells_per_second") and peer_dim(p, r) == 2:
                any_ = True
                ax.plot([r["shots"]], [r["cells_per_second"] * 1e-9], marker="*", ms=12, ls="none",
                        label="%s %s order %s, %s thread(s) (%s)" % (p["peer"], r["kind"], r.get("order", "?"),
                                                                     r.get("threads", "?"),
                                                                     p.get("context", {}).get("device", "?")))
    if not any_:
        plt.close(fig)
        return None
    ax.set_xscale("log", base=2)
    ax.set_xlabel("shots per batch (141 x 681 model)")
    ax.set_ylabel("Gcells/s")
    ax.set_title("Forward throughput vs batch size\n(ksweep: batched forward_step loop; the shots schedule is in the peer table)", fontsize=10)
    ax.legend(fontsize=7)
    return save(fig, out, "growth_shots.png")


def grad_key(r):
    p = r["params"]
    key = "%s/%s/%s" % (p.get("strategy"), p.get("location"), p.get("dtype"))
    return key if p.get("shots") != 1 else key + " (1 shot)"


def plot_memory(runs, out):
    s = series(runs, "gradient")
    if not s:
        return None, None
    names = []
    fig, axes = plt.subplots(len(s), 1, figsize=(11, 4 * len(s)), squeeze=False)
    fig2, axes2 = plt.subplots(len(s), 1, figsize=(11, 4 * len(s)), squeeze=False)
    for ax, ax2, (lab, rows) in zip(axes[:, 0], axes2[:, 0], sorted(s.items())):
        rows = sorted(rows, key=grad_key)
        xs = range(len(rows))
        ax.bar([x - 0.2 for x in xs], [r.get("boundary_bytes", 0) / 2 ** 20 for r in rows], 0.4, label="saved steps (boundary_bytes)")
        ax.bar([x + 0.2 for x in xs], [r.get("peak_device_bytes", 0) / 2 ** 20 for r in rows], 0.4, label="peak (peak_device_bytes)")
        ax.set_xticks(list(xs))
        ax.set_xticklabels([grad_key(r) for r in rows], rotation=60, ha="right", fontsize=7)
        ax.set_ylabel("MiB")
        ax.set_yscale("log")
        ax.set_title("Gradient memory, %s" % lab)
        ax.legend(fontsize=8)
        ax2.bar(list(xs), [r.get("cells_per_second", 0) * 1e-6 for r in rows])
        ax2.set_xticks(list(xs))
        ax2.set_xticklabels([grad_key(r) for r in rows], rotation=60, ha="right", fontsize=7)
        ax2.set_ylabel("Mcells/s (fwd + bwd)")
        ax2.set_title("Gradient throughput, %s" % lab)
    names.append(save(fig, out, "gradient_memory.png"))
    names.append(save(fig2, out, "gradient_throughput.png"))
    return names


def plot_codec(runs, out):
    fams = ["codec_encode", "codec_decode", "store_write", "store_read"]
    data = {f: series(runs, f) for f in fams}
    if not any(data.values()):
        return None
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.5))
    for ax, group in zip(axes, (fams[:2], fams[2:])):
        bars = []
        for f in group:
            for lab, rows in sorted(data[f].items()):
                for r in rows:
                    p = r["params"]
                    tag = "/".join(str(p[k]) for k in ("location", "dtype", "cache") if k in p)
                    bars.append(("%s %s\n%s" % (f.split("_")[1], tag, lab), r.get("bytes_per_second", 0)))
        ax.barh(range(len(bars)), [b[1] * 1e-9 for b in bars])
        ax.set_yticks(range(len(bars)))
        ax.set_yticklabels([b[0] for b in bars], fontsize=6)
        ax.set_xlabel("GB/s of fp32 values")
    axes[0].set_title("Codecs")
    axes[1].set_title("Step stores")
    return save(fig, out, "codec_store.png")


def plot_allreduce(rows, out):
    fig, ax = plt.subplots(figsize=(6, 4))
    for nz, nx in sorted({(r["params"]["nz"], r["params"]["nx"]) for r in rows}):
        rs = sorted((r for r in rows if (r["params"]["nz"], r["params"]["nx"]) == (nz, nx)), key=lambda r: r["params"]["ranks"])
        ax.plot([r["params"]["ranks"] for r in rs], [r["seconds"] * 1e6 for r in rs], "o-", label="%d x %d" % (nz, nx))
    ax.set_xlabel("MPI ranks")
    ax.set_ylabel("microseconds per all-reduce")
    ax.set_yscale("log")
    ax.set_title("Gradient all-reduce (double, host memory)")
    ax.grid(True, alpha=0.3)
    ax.legend(title="model grid")
    return save(fig, out, "allreduce.png")


def tiles_section(runs):
    """The `tiles` rows: the same forward in launches over cells of other shapes (core::DeviceTiles),
    one run, as Gcells/s, the fraction of the triad bound, and the speed against the rows-first
    lane order (4 rows of 8 cells a warp at 64 cells, the launches' old shape)."""
    md = ["## The shape of the launches over cells", "",
          "`tiles` benchmarks: the 4096^2 forward (orders 2, 4, 8) and the 256^3 cube (order 4) in tiles of 256 "
          "cells, `tiles` cells along x, with consecutive threads along x (`x`) or along the tile's rows (`rows`: "
          "4 rows of 8 cells a warp at 64, the shape Kokkos 4.6's MDRange gave these launches). The same bits in "
          "every shape. Registered on devices.", ""]
    rows = []
    for lab, rs in sorted(series(runs, "tiles").items()):
        by = grouped(rs, lambda p: (p["kind"], p["order"]), lambda p: (p["tiles"], p["lanes"]))
        for (kind, order) in sorted(by):
            shapes = by[(kind, order)]
            base = shapes.get((64, "rows"))
            for (w, lanes) in sorted(shapes, key=lambda k: (k[1] != "x", k[0])):
                r = shapes[(w, lanes)]
                rows.append([lab, kind, order, w, lanes, "%.4f" % r["seconds"],
                             "%.1f" % (r.get("cells_per_second", 0) * 1e-9),
                             "%.1f %%" % (100 * r.get("roofline_fraction", 0)),
                             "**%.2f**" % (base["seconds"] / r["seconds"]) if base and r["seconds"] > 0 else ""])
    if rows:
        md += [table(["series", "run", "order", "tiles", "lanes", "s", "Gcells/s", "of triad",
                      "speed / (64, rows)"], rows), ""]
    else:
        md += ["No `tiles` benchmark runs given (they run on a device build).", ""]
    return md


def table(header, rows):
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("runs", nargs="+", help="Google Benchmark JSON files (or peer JSON files)")
    ap.add_argument("--peer", action="append", default=[], help="peer timing JSON (scripts/peer_deepwave.py)")
    ap.add_argument("--out", default="docs/benchmarks", help="output folder")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    runs, peers, python = load(args.runs + args.peer)
    # Born against Deepwave's scalar_born (scripts/peer_deepwave_born.py): a section of its own.
    born_peers = [p for p in peers if p.get("family") == "born"]
    peers = [p for p in peers if p.get("family") != "born"]
    if not runs:
        sys.exit("bench_report.py: no benchmark runs given")

    md = ["# ksweep benchmark report", "",
          "Generated by `scripts/bench_report.py` from %s. Regenerate everything with `%s` "
          "(see [README.md](README.md)); the cost model behind the roofline numbers is in "
          "[../PERFORMANCE.md](../PERFORMANCE.md)." % (", ".join("`%s`" % os.path.basename(r["path"]) for r in runs), REGEN), ""]
    md += ["## Machines", ""]
    rows = []
    for r in runs:
        c = r["context"]
        backends = sorted({x["backend"] for x in r["rows"]})
        rows.append([os.path.basename(r["path"]), c.get("hostname", "?"), c.get("gpu_model", c.get("cpu_model", "?")),
                     c.get("num_cpus", "?"), c.get("omp_num_threads", "?"), ", ".join(backends), c.get("kokkos_version", "?"),
                     c.get("ksweep_git_revision", "?"), c.get("date", "?"), gb(float(c.get("triad_bytes_per_second", 0))),
                     c.get("load_avg", ""), c.get("library_build_type", "")])
    md += [table(["run", "host", "CPU / GPU", "CPUs", "OMP_NUM_THREADS", "backends", "Kokkos", "git", "date",
                  "triad GB/s (start-up)", "load avg", "gbench build"], rows), ""]

    md += ["## Bandwidth reference (STREAM, 3 x 64 MiB double arrays)", ""]
    rows = []
    for f in ("stream_copy", "stream_triad"):
        for lab, rs in sorted(series(runs, f).items()):
            for r in rs:
                rows.append([f, lab, gb(r.get("bytes_per_second", 0)), gb(r.get("best_bytes_per_second", 0))])
    md += [table(["kernel", "series", "mean GB/s", "best GB/s"], rows), ""]

    md += ["## Forward", ""]
    for name in (plot_forward_backends(runs, args.out), plot_roofline(runs, args.out),
                 plot_growth(runs, args.out, lambda r: r["padded_cells"], "Cost growth with cells (one shot; nt chosen per size, see table)",
                             "growth_cells.png", lambda r: is_single_grid(r), "padded cells",
                             lambda r: r["seconds"] / r["params"]["nt"], "seconds per time step"),
                 plot_growth(runs, args.out, lambda r: r["params"]["nt"], "Cost growth with time steps (141 x 681, one shot)",
                             "growth_nt.png", lambda r: marmousi(r) and r["params"]["shots"] == 1, "time steps"),
                 plot_shots(runs, peers, args.out)):
        if name:
            md += ["![%s](%s)" % (name, name), ""]
    rows = []
    for lab, rs in sorted(series(runs, "forward").items()):
        for r in sorted(rs, key=lambda r: (r["params"]["nz"], r["params"]["nx"], r["params"]["shots"], r["params"]["order"], r["params"]["nt"])):
            p = r["params"]
            steps = p["nt"]
            rows.append([lab, p["order"], "%dx%d" % (p["nz"], p["nx"]), p["shots"], steps, "%.3f" % (r["seconds"] / steps * 1e3),
                         "%.3f" % (r.get("cells_per_second", 0) * 1e-9), "%.1f %%" % (100 * r.get("roofline_fraction", 0)),
                         "%.1f %%" % (100 * r.get("roofline_fraction_cpml", 0))])
    md += [table(["series", "order", "model grid", "shots", "nt", "ms/step", "Gcells/s", "of triad (16 B/cell)",
                  "of triad (with CPML memories)"], rows), ""]

    md += ["## Small problem: one shot of 141 x 681 (launch-bound on GPUs)", "",
           "Time per step and kernel launches per step (counted through the Kokkos Tools callbacks in a separate, "
           "untimed run; gradient launches include the per-run set-up, divided by nt).", ""]
    rows = []
    for fam in ("forward", "gradient"):
        for lab, rs in sorted(series(runs, fam).items()):
            for r in rs:
                pr = r["params"]
                if not (marmousi(r) and pr["shots"] == 1) or "us_per_step" not in r:
                    continue
                if fam == "forward" and pr["nt"] not in (max(x["params"]["nt"] for x in rs if marmousi(x) and x["params"]["shots"] == 1),):
                    continue
                what = "forward" if fam == "forward" else "gradient %s/%s/%s" % (pr["strategy"], pr["location"], pr["dtype"])
                rows.append([lab, what, pr["order"], pr["nt"], "%.1f" % r["us_per_step"], "%.2f" % r.get("launches_per_step", 0)])
    if rows:
        md += [table(["series", "run", "order", "nt", "us per step", "launches per step"], rows), ""]

    md += ["## Born modelling against the forward (same run)", "",
           "`Propagator::born` of a batch and `Propagator::forward` of the same batch, timed one after the other in "
           "each iteration (the byte model: 3.75 forward steps per Born step; see ../PERFORMANCE.md).", ""]
    rows = []
    for lab, rs in sorted(series(runs, "born").items()):
        for r in sorted(rs, key=lambda r: (r["params"]["order"], r["params"]["shots"])):
            pr = r["params"]
            rows.append([lab, pr["order"], "%dx%d" % (pr["nz"], pr["nx"]), pr["shots"], pr["nt"],
                         "%.1f" % r.get("us_per_step", 0), "%.1f" % r.get("forward_us_per_step", 0),
                         "%.2f" % r.get("born_over_forward", 0), "%.1f" % r.get("launches_per_step", 0)])
    if rows:
        md += [table(["series", "order", "model grid", "shots", "nt", "Born us/step", "forward us/step",
                      "Born / forward", "Born launches/step"], rows), ""]
    else:
        md += ["No Born runs in the inputs.", ""]
    for p in born_peers:
        c, k, sec = p.get("context", {}), p.get("case", {}), p.get("seconds", {})
        md += ["Against %s %s `scalar_born` (torch %s), same process, same run (`scripts/peer_deepwave_born.py`): "
               "%s, %s thread(s); Marmousi2 %dx%d, %d shots, nt %d, order %d; medians of %d calls." % (
                   p["peer"], c.get("deepwave", "?"), c.get("torch", "?"), c.get("cpu", "?"), c.get("threads", "?"),
                   k.get("nz", 0), k.get("nx", 0), k.get("shots", 0), k.get("nt", 0), k.get("order", 0),
                   k.get("repeats", 0)), ""]
        md += [table(["call", "ksweep s", "Deepwave s", "Deepwave / ksweep", "records misfit (best shift)"],
                     [["born", "%.3f" % sec.get("ksweep_born", 0), "%.3f" % sec.get("deepwave_born", 0),
                       "%.2f" % p.get("born_ratio_deepwave_over_ksweep", 0),
                       "%.2e (%+d)" % (p.get("records_misfit_best_shift", 0), p.get("best_shift_samples", 0))],
                      ["forward", "%.3f" % sec.get("ksweep_forward", 0), "%.3f" % sec.get("deepwave_forward", 0),
                       "%.2f" % p.get("forward_ratio_deepwave_over_ksweep", 0),
                       "%.2e (%+d)" % (p.get("forward_records_misfit_best_shift", 0),
                                       p.get("forward_best_shift_samples", 0))]]), ""]

    md += ["## An RTM shot against the forward (same run)", "",
           "RTM as `fwi::rtm` runs it (the background's records, then J^T of the reflected data: the forward with "
           "boundary saving on the shipped store, boundary/device/fp16, and the backward with imaging) and "
           "`Propagator::forward` of the same shot, timed one after the other in each iteration.", ""]
    rows = []
    for lab, rs in sorted(series(runs, "rtm").items()):
        for r in sorted(rs, key=lambda r: (r["params"]["order"], r["params"]["shots"])):
            pr = r["params"]
            rows.append([lab, pr["order"], "%dx%d" % (pr["nz"], pr["nx"]), pr["shots"], pr["nt"],
                         "%.1f" % r.get("us_per_step", 0), "%.1f" % r.get("forward_us_per_step", 0),
                         "%.2f" % r.get("rtm_over_forward", 0)])
    if rows:
        md += [table(["series", "order", "model grid", "shots", "nt", "RTM us/step", "forward us/step",
                      "RTM / forward"], rows), ""]
    else:
        md += ["No RTM runs in the inputs.", ""]

    md += ["## Gradient (loss_and_gradient: forward + backward)", ""]
    names = plot_memory(runs, args.out)
    for name in names or []:
        md += ["![%s](%s)" % (name, name), ""]
    rows = []
    for lab, rs in sorted(series(runs, "gradient").items()):
        for r in sorted(rs, key=grad_key):
            rows.append([lab, grad_key(r), "%.1f" % (r["seconds"] * 1e3), "%.1f" % (r.get("cells_per_second", 0) * 1e-6),
                         "%.1f" % r.get("bytes_per_cell_step", 0), "%.1f %%" % (100 * r.get("roofline_fraction", 0)),
                         fmt_bytes(r.get("boundary_bytes", 0)), fmt_bytes(r.get("peak_device_bytes", 0)),
                         fmt_bytes(r.get("modelled_bytes", 0))])
    md += [table(["series", "strategy/location/dtype", "ms", "Mcells/s", "B/cell-step (model)", "of triad",
                  "saved steps", "peak RSS / device", "modelled working set"], rows), ""]

    md += ["## Codecs and step stores", ""]
    name = plot_codec(runs, args.out)
    if name:
        md += ["![%s](%s)" % (name, name), ""]
    rows = []
    for f in ("codec_encode", "codec_decode", "store_write", "store_read"):
        for lab, rs in sorted(series(runs, f).items()):
            for r in rs:
                p = r["params"]
                rows.append([f, lab, ", ".join("%s=%s" % kv for kv in sorted(p.items())),
                             gb(r.get("bytes_per_second", 0)), ("%.2f" % r["ratio"]) if "ratio" in r else ""])
    md += [table(["benchmark", "series", "parameters", "GB/s (fp32 values)", "compression"], rows), ""]

    md += ["## MPI all-reduce of model-sized gradients (double)", ""]
    ar = [r for lab, rs in series(runs, "allreduce").items() for r in rs]
    if ar:
        name = plot_allreduce(ar, args.out)
        if name:
            md += ["![%s](%s)" % (name, name), ""]
        rows = []
        for r in sorted(ar, key=lambda r: (r["params"]["nz"], r["params"]["ranks"])):
            p = r["params"]
            rows.append(["%dx%d" % (p["nz"], p["nx"]), p["ranks"], fmt_bytes(r.get("bytes", 0)),
                         "%.1f" % (r["seconds"] * 1e6), gb(r.get("bytes_per_second", 0))])
        md += [table(["model grid", "ranks", "gradient", "us per all-reduce", "GB/s"], rows), ""]
    else:
        md += ["No all-reduce runs given (`mpirun -n N ksweep_bench_mpi`, see scripts/run_benchmarks.sh).", ""]

    md += ["## A model split into domains (halo exchange and split forward step)", "",
           "`mpirun -n N ksweep_bench_domains` (one thread per rank, one subdomain per rank): `halo_exchange` times "
           "the exchange of a wavefield level alone, `forward_split` a whole forward step with its exchange; "
           "strong scaling keeps the model, weak scaling widens it with the ranks. Times are each step's mean over "
           "the ranks (see ../PERFORMANCE.md, \"A model split into domains\").", ""]
    dom = [r for f in ("halo_exchange_2d", "forward_split_2d_strong", "forward_split_2d_weak", "halo_exchange_3d",
                       "forward_split_3d_strong") for lab, rs in series(runs, f).items() for r in rs]
    if dom:
        rows = []
        for r in sorted(dom, key=lambda r: (r["family"], r["params"].get("ranks", 0))):
            p = r["params"]
            secs = r["seconds"]
            halo = r.get("halo_seconds_per_step", 0.0)
            rows.append([r["family"], p.get("ranks", ""), ", ".join("%s=%s" % kv for kv in sorted(p.items()) if kv[0] != "ranks"),
                         "%.1f" % (secs * 1e6), fmt_bytes(r.get("halo_bytes_per_step_rank0", 0)), "%.1f" % (halo * 1e6),
                         ("%.1f %%" % (100 * halo / secs)) if secs > 0 and "forward" in r["family"] else ""])
        md += [table(["benchmark", "ranks", "parameters", "us per step", "halo per step (rank 0)", "us of exchange",
                      "exchange share"], rows), ""]
    else:
        md += ["No domain runs given (`mpirun -n N ksweep_bench_domains`, see scripts/run_benchmarks.sh).", ""]

    md += ["## Peer comparison: the Marmousi batch, same run", "",
           "8 shots of 141 x 681 at 25 m, 20-cell absorbing layer, 200 receivers, nt 2000, dt 2 ms, 5 Hz Ricker, fp32; "
           "ksweep: `marmousi` benchmarks (forward = `Propagator::forward`, gradient = `loss_and_gradient`, boundary "
           "saving on the device (host memory on CPU backends), fp32; calls after an untimed first one, whose time is in "
           "parentheses where the run recorded it); Deepwave: `scripts/peer_deepwave.py` in the same "
           "run of `scripts/run_benchmarks.sh` (its gradient against its later calls; its first call in a process pays "
           "page faults on its stored wavefields). Speed ratio = Deepwave seconds / ksweep seconds; memory = increase of "
           "the peak resident set during the call (ksweep's benchmarks share one process, which reuses memory freed by "
           "earlier benchmarks: its small figures are lower bounds; the gradient's are dominated by the saved ring); "
           "on GPUs ksweep's memory is the peak of its allocations in the device's memory during the call "
           "(`device_peak_bytes`, counted through Kokkos' allocation callbacks; runs before they existed show 0 B).", ""]
    peer_rows = {}
    for p in peers:
        for r in p.get("results", []):
            if "order" in r and peer_dim(p, r) == 2:
                peer_rows[(int(r.get("threads", 0)), int(r["order"]), r["kind"])] = r
    rows = []
    for lab, rs in sorted(series(runs, "marmousi").items()):
        by = {}
        for r in rs:
            pr = r["params"]
            if pr.get("images"):  # the gradient alone: the next table's
                continue
            by[(pr["order"], pr["kind"], pr["schedule"], pr["flush"])] = r
        for (order, kind, schedule, flush), r in sorted(by.items()):
            if schedule != "auto" or flush != "on":
                continue
            th = int(r.get("threads", 0))
            dw = peer_rows.get((th, order, "forward" if kind == "forward" else "gradient_later"))
            dw1 = peer_rows.get((th, order, "gradient_first")) if kind == "gradient" else None
            batched = by.get((order, kind, "batched", "on"))
            noflush = by.get((order, kind, "auto", "off"))
            fwd = by.get((order, "forward", "auto", "on"))
            rows.append([lab, th if r["backend"] in ("OpenMP", "Serial") else "", order, kind,
                         ("%.3f" % r["seconds"]) + (" (first %.2f)" % r["first_seconds"]
                                                                     if r.get("first_seconds") else ""),
                         "%.3f" % batched["seconds"] if batched else "",
                         "%.3f" % noflush["seconds"] if noflush else "",
                         "%.2f" % (r["seconds"] / fwd["seconds"]) if (kind == "gradient" and fwd) else "",
                         fmt_bytes(run_memory(r)),
                         ("%.3f" % dw["seconds"]) + (" (first %.2f)" % dw1["seconds"] if dw1 else "") if dw else "",
                         fmt_bytes(dw.get("rss_increase_bytes", dw.get("peak_rss_bytes", 0))) if dw else "",
                         "**%.2f**" % (dw["seconds"] / r["seconds"]) if dw else "",
                         "1/%.0f" % (dw.get("rss_increase_bytes", 0) / run_memory(r))
                         if dw and run_memory(r) > 0 and dw.get("rss_increase_bytes", 0) > 0 else ""])
    if rows:
        md += [table(["series", "threads", "order", "run", "ksweep s (auto schedule)", "batched schedule s",
                      "without flushing subnormals s", "gradient / forward", "ksweep memory", "Deepwave s",
                      "Deepwave memory", "ksweep speed / Deepwave", "ksweep memory / Deepwave"], rows), ""]
    else:
        md += ["No `marmousi` benchmark runs given.", ""]

    md += ["## Deepwave's library called directly, same process", "",
           "`deepwave` benchmarks (`bench/deepwave_direct.hpp`, with `KSWEEP_DEEPWAVE_LIB` naming a "
           "`libdeepwave_C.so` built with Deepwave's own flags): Deepwave's scalar forward and backward entry "
           "points on the Marmousi batch of the `marmousi` rows, their arguments prepared as `deepwave.scalar` "
           "prepares them, no torch; on a CPU its `_cpu` functions on the same threads, on a GPU its `_cuda` "
           "functions on ksweep's stream and device memory. Both time the calls after a first one (in "
           "parentheses: the first, where the snapshot store is allocated and touched); ksweep's gradient is the "
           "gradient alone (`images:gradient`), as Deepwave's. Memory: ksweep as in the table above; Deepwave "
           "the peak of its allocations. Records misfit: ||Deepwave - ksweep|| / ||ksweep|| of the forward's "
           "records, one sample apart (Deepwave records u^t, ksweep u^(t+1)), with ksweep injecting Deepwave's "
           "-v^2 dt^2 w: the two absorbing layers differ.", ""]
    rows = []
    marm = series(runs, "marmousi")
    for lab, rs in sorted(series(runs, "deepwave").items()):
        ks = {}
        for r in marm.get(lab, []):
            pr = r["params"]
            if pr["schedule"] == "auto" and pr["flush"] == "on":
                kind = pr["kind"] if pr["kind"] == "forward" else ("gradient" if pr.get("images") == "gradient"
                                                                  else "gradient+illuminations")
                ks[(pr["order"], kind)] = r
        for r in sorted(rs, key=lambda r: (r["params"]["order"], r["params"]["kind"])):
            order, kind = r["params"]["order"], r["params"]["kind"]
            k = ks.get((order, kind))
            dw_mem = r.get("deepwave_bytes", 0)
            rows.append([lab, order, kind,
                         ("%.3f (first %.2f)" % (k["seconds"], k.get("first_seconds", 0))) if k else "",
                         "%.3f (first %.2f)" % (r["seconds"], r.get("first_seconds", 0)),
                         "**%.2f**" % (r["seconds"] / k["seconds"]) if k else "",
                         fmt_bytes(run_memory(k)) if k else "", fmt_bytes(dw_mem),
                         "1/%.0f" % (dw_mem / run_memory(k)) if k and run_memory(k) > 0 and dw_mem > 0 else "",
                         "%.2f %%" % (100 * r["records_misfit"]) if "records_misfit" in r else ""])
    if rows:
        md += [table(["series", "order", "run", "ksweep s", "Deepwave s", "ksweep speed / Deepwave",
                      "ksweep memory", "Deepwave memory", "ksweep memory / Deepwave", "records misfit"], rows), ""]
    else:
        md += ["No `deepwave` benchmark runs given (they run where `KSWEEP_DEEPWAVE_LIB` names Deepwave's library).",
               ""]

    md += ["## Runs of steps replayed as CUDA graphs", "",
           "`graphs` benchmarks: the same run with `KSWEEP_CUDA_GRAPHS` off and on (core/step_graph.hpp: a "
           "run of steps traced, then one `cudaGraphLaunch` of the graph captured from launches with the same "
           "fingerprint), timed after two untimed calls (the first launches, the second captures). Registered on "
           "CUDA; elsewhere, in smoke runs only, where both run as plain launches.", ""]
    rows = []
    for lab, rs in sorted(series(runs, "graphs").items()):
        by = grouped(rs, lambda p: p["kind"], lambda p: p["graphs"])
        for kind in sorted(by):
            off, on = by[kind].get("off"), by[kind].get("on")
            if not off or not on:
                continue
            per_step = lambda r: ("%.1f" % r["us_per_step"]) if "us_per_step" in r else ""
            rows.append([lab, kind, "%.4f" % off["seconds"], "%.4f" % on["seconds"], per_step(off), per_step(on),
                         "**%.2f**" % (off["seconds"] / on["seconds"]) if on["seconds"] > 0 else ""])
    if rows:
        md += [table(["series", "run", "launched s", "replayed s", "launched us/step", "replayed us/step",
                      "speed-up"], rows), ""]
    else:
        md += ["No `graphs` benchmark runs given (they run on a CUDA build).", ""]

    md += tiles_section(runs)

    if any(r["family"] in ("cube3d", "cube3d_memory") for run in runs for r in run["rows"]) or \
            any(peer_dim(p) == 3 for p in peers):
        md += cube3d_section(runs, peers)

    if python:
        md += python_section(python)

    md += ["## Peers", ""]
    if not peers:
        md += ["No peer timings given (scripts/peer_deepwave.py writes them when Deepwave is importable).", ""]
    for p in peers:
        if "family" in p:  # a comparison with a section of its own (Born above)
            continue
        c = p.get("context", {})
        if p.get("physics") == "acoustic_vd":  # variable density, same process (scripts/peer_deepwave.py)
            md += ["%s %s, variable density, threads %s, same process (`scripts/peer_deepwave.py --physics "
                   "acoustic_vd`): ksweep's `acoustic_vd` against `deepwave.acoustic` on the 141 x 240 Marmousi "
                   "window with Gardner's density; records misfit: relative L2 of the forward's records." % (
                       p["peer"], c.get("version", c.get("deepwave", "?")), c.get("threads", "?")), ""]
            md += [table(["case", "order", "kind", "ksweep s", "Deepwave s", "Deepwave / ksweep", "records misfit"],
                         [[r.get("name", ""), r.get("order", ""), r.get("kind", ""),
                           "%.3f" % r.get("ksweep_seconds", 0), "%.3f" % r.get("deepwave_seconds", 0),
                           "%.2f" % r.get("deepwave_over_ksweep", 0),
                           ("%.2e" % r["records_misfit"]) if "records_misfit" in r else ""]
                          for r in p.get("results", [])]), ""]
            continue
        md += ["%s %s on %s (%s), torch %s, threads %s: %s" % (p["peer"], c.get("version", "?"), c.get("device", "?"),
                                                               c.get("cpu_model", ""), c.get("torch", "?"), c.get("threads", "?"),
                                                               p.get("problem", "")), ""]
        if peer_dim(p) == 3:
            md += [table(["kind", "order", "N", "threads", "shots", "nt", "step_ratio", "seconds", "Gcells/s",
                          "peak RSS", "RSS increase"],
                         [[r["kind"], r.get("order", ""), r.get("cube_n", ""), r.get("threads", ""), r["shots"], r["nt"],
                           r.get("step_ratio", ""), "%.3f" % r["seconds"], "%.3f" % (r.get("cells_per_second", 0) * 1e-9),
                           fmt_bytes(r.get("peak_rss_bytes", 0)), fmt_bytes(r.get("rss_increase_bytes", 0))]
                          for r in p.get("results", [])]), ""]
            continue
        md += [table(["kind", "order", "threads", "shots", "nt", "seconds", "Gcells/s", "peak RSS"],
                     [[r["kind"], r.get("order", ""), r.get("threads", ""), r["shots"], r["nt"], "%.3f" % r["seconds"],
                       "%.3f" % (r.get("cells_per_second", 0) * 1e-9), fmt_bytes(r.get("peak_rss_bytes", 0))]
                      for r in p.get("results", [])]), ""]

    with open(os.path.join(args.out, "REPORT.md"), "w") as f:
        f.write("\n".join(md))
    print("wrote %s" % os.path.join(args.out, "REPORT.md"))


if __name__ == "__main__":
    main()
