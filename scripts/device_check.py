#!/usr/bin/env python3
"""Helpers of scripts/device_check.sh (numpy and h5py; the package for `example`).

    device_check.py fwi-result OUT             an fwi run's losses and final model, as JSON
    device_check.py example BACKEND            the README's Python example's results, as JSON
    device_check.py compare REF KEY RES...     each result against the reference's KEY
    device_check.py set-reference REF KEY RES...   the results (equal to each other) into REF

Results are exact: each floating-point number as its hexadecimal form (float.hex), arrays as
the SHA-256 of their bytes (C order, their own dtype), so that equal means the same bits.
"""

import hashlib
import json
import os
import sys


def sha256(a):
    import numpy as np

    a = np.ascontiguousarray(a)
    return f"{a.dtype.str}{list(a.shape)}:" + hashlib.sha256(a.tobytes()).hexdigest()


def fwi_result(out):
    import h5py

    with open(os.path.join(out, "summary.json")) as f:
        summary = json.load(f)
    with h5py.File(os.path.join(out, "model_final.h5"), "r") as f:
        model = f["vp"][...]
    it = summary["iterations"]
    return {
        "losses": [float(r["loss"]).hex() for r in it],
        "rmse": [float(r["rmse"]).hex() for r in it],
        "model_final": sha256(model),
        "ranks": summary.get("ranks"),
        "backend": summary.get("backend"),
        "devices": [d.get("device") for d in summary.get("devices", [])],
    }


def example(backend):
    """The README's example ("From Python"), as written there, its results hashed."""
    import numpy as np

    import ksweep

    info = ksweep.info()
    if info["backend"] != backend:
        raise SystemExit(f"device_check.py: the package runs on {info['backend']}, not {backend}")
    v, dh = ksweep.load_model("marmousi2", decimate=4)  # 71 x 341 cells at 50 m
    dt, nt = 0.004, 750
    src = np.array([[[1, 40]], [[1, 170]], [[1, 300]]])  # [shot, source, (z, x)]
    rec = np.stack([np.stack([np.full(341, 2), np.arange(341)], -1)] * 3)
    amp = np.tile(ksweep.ricker(4.0, nt, dt).astype(np.float32), (3, 1, 1))
    data = ksweep.forward(v, dh, dt, amp, src, rec, pml_width=30)  # [3, 341, 750]

    v0 = (1 / ksweep.gaussian_smooth(1.0 / v, 6)).astype(np.float32)
    g = ksweep.gradient(v0, dh, dt, amp, src, rec, data, pml_width=30, storage_dtype="fp16")

    inv = ksweep.Inversion(v0, dh, dt, amp[0, 0].astype(np.float64), src, rec, data, true_model=v,
                           batch=3, lr=20.0, pml_width=30)
    reports = inv.run(5)
    more = torch_example(info, v0, dh, dt, amp, src, rec, data)
    return {**more,
        "forward": sha256(data),
        "gradient_loss": float(g.loss).hex(),
        "gradient_vp": sha256(g.grad["vp"]),
        "illum_src": sha256(g.illum_src),
        "inversion_losses": [float(r["loss"]).hex() for r in reports],
        "inversion_rmse": [float(r["rmse"]).hex() for r in reports],
        "inversion_model": sha256(inv.model),
        "backend": info["backend"],
        "device": info.get("device"),
    }


def torch_example(info, v0, dh, dt, amp, src, rec, data):
    """ksweep.torch.forward and its gradient on tensors where the build computes (CUDA tensors on
    a CUDA build whose torch has CUDA: used in place, and the results must stay there; CPU tensors
    otherwise), hashed: the bits of the CPU's."""
    try:
        import torch

        import ksweep.torch as kt
    except ImportError:
        return {"torch": "not installed"}
    dev = "cuda" if info["arrays_in_place"] == "cuda" and torch.cuda.is_available() else "cpu"
    if dev == "cuda":
        dev = f"cuda:{info['device_id']}"
    v = torch.tensor(v0, device=dev, requires_grad=True)
    d = kt.forward(v, dh, dt, torch.tensor(amp, device=dev), src, rec, pml_width=30)
    ((d - torch.tensor(data, device=dev)) ** 2).sum().backward()
    if d.device != v.device or v.grad.device != v.device:
        raise SystemExit(f"device_check.py: the tensors left {v.device}: records on {d.device}, gradient on "
                         f"{v.grad.device}")
    # ksweep.scalar (Deepwave's convention) cut in two: the second half from the first's end state
    # (wavefields and layer memories, requiring grad), a loss of its data and end wavefield; every
    # tensor in and out on `dev`.
    import ksweep

    vs = torch.tensor(v0, device=dev, requires_grad=True)
    a = torch.tensor(amp, device=dev)
    kw = dict(source_locations=torch.tensor(src), receiver_locations=torch.tensor(rec), pml_width=30)
    cut = a.shape[-1] // 2
    first = ksweep.scalar(vs, dh, dt, source_amplitudes=a[..., :cut], **kw)
    start = [x.detach().requires_grad_(True) for x in first[:6]]
    names = ("wavefield_0", "wavefield_m1", "psiy_m1", "psix_m1", "zetay_m1", "zetax_m1")
    second = ksweep.scalar(vs, dh, dt, source_amplitudes=a[..., cut:], **dict(zip(names, start)), **kw)
    (second[-1] ** 2).sum().add((second[0] ** 2).sum()).backward()
    left = [x.device for x in (*first, *second, vs.grad, start[0].grad) if x.device != vs.device]
    if left:
        raise SystemExit(f"device_check.py: ksweep.scalar's tensors left {vs.device}: {left}")
    return {"torch_forward": sha256(d.detach().cpu().numpy()), "torch_gradient_vp": sha256(v.grad.cpu().numpy()),
            "scalar_data": sha256(second[-1].detach().cpu().numpy()),
            "scalar_end": sha256(second[0].detach().cpu().numpy()),
            "scalar_gradient_vp": sha256(vs.grad.cpu().numpy()),
            "scalar_gradient_start": sha256(start[0].grad.cpu().numpy()),
            "torch_device": dev, "torch_in_place": dev != "cpu" or info["arrays_in_place"] == "cpu"}


# What must be equal (the rest describes the run).
COMPARED = {"losses", "rmse", "model_final", "forward", "gradient_loss", "gradient_vp", "illum_src",
            "inversion_losses", "inversion_rmse", "inversion_model", "torch_forward", "torch_gradient_vp",
            "scalar_data", "scalar_end", "scalar_gradient_vp", "scalar_gradient_start"}


def load(path):
    with open(path) as f:
        return json.load(f)


def differences(ref, got):
    return [k for k in sorted(COMPARED) if k in ref and ref[k] != got.get(k)]


def compare(ref_path, key, results):
    ref = load(ref_path)[key]
    bad = []
    for r in results:
        d = differences(ref, load(r))
        if d:
            bad.append(f"{os.path.basename(r)}: {', '.join(d)} differ")
    names = ", ".join(os.path.splitext(os.path.basename(r))[0] for r in results)
    if bad:
        print(f"{'; '.join(bad)} (reference {key}, made on {ref.get('made_on', '?')})")
        return 1
    print(f"{names}: the same bits as the reference ({key}, {ref.get('made_on', '?')})")
    return 0


def set_reference(ref_path, key, results):
    got = [load(r) for r in results]
    for r, g in zip(results[1:], got[1:]):
        d = differences(got[0], g)
        if d:
            print(f"device_check.py: {os.path.basename(r)} differs from {os.path.basename(results[0])} in "
                  f"{', '.join(d)}: no reference written", file=sys.stderr)
            return 1
    entry = {k: v for k, v in got[0].items() if k in COMPARED}
    entry["made_on"] = f"{got[0].get('backend')} backend, ksweep git {os.environ.get('KSWEEP_GIT', '?')}"
    doc = load(ref_path) if os.path.exists(ref_path) else {}
    doc["about"] = ("CPU (OpenMP) results that scripts/device_check.sh compares GPU results with, bit for bit; "
                    "regenerate with scripts/device_check.sh --make-reference")
    doc[key] = entry
    os.makedirs(os.path.dirname(ref_path), exist_ok=True)
    with open(ref_path, "w") as f:
        json.dump(doc, f, indent=1, sort_keys=True)
        f.write("\n")
    return 0


def main(argv):
    if len(argv) >= 2 and argv[0] == "fwi-result":
        print(json.dumps(fwi_result(argv[1])))
    elif len(argv) >= 2 and argv[0] == "example":
        print(json.dumps(example(argv[1])))
    elif len(argv) >= 4 and argv[0] == "compare":
        return compare(argv[1], argv[2], argv[3:])
    elif len(argv) >= 4 and argv[0] == "set-reference":
        return set_reference(argv[1], argv[2], argv[3:])
    else:
        print(__doc__, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
