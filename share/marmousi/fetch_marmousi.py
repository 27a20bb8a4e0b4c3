#!/usr/bin/python3
"""Download the public Marmousi2 model and write the ksweep velocity grids.

Writes, into ${XDG_CACHE_HOME:-$HOME/.cache}/ksweep/marmousi (or --out-dir):

  marmousi2_vp_nz281_nx1361_dx12.5.f32   v[::10, ::10] of the 1.25 m model (12.5 m)
  marmousi2_vp_nz561_nx2721_dx6.25.f32   v[::5, ::5]   of the 1.25 m model (6.25 m)
  ATTRIBUTION.txt                        the CC BY 4.0 notice that must travel with the data

Each output is checked against the SHA-256 that the ksweep loader expects.

Sources:
  default            the SEG open-data tarball (elastic-marmousi-model.tar.gz, P-wave SEG-Y in m/s)
  --from-tarball P   the same tarball, already downloaded
  --from-segy-gz P   a local vp_marmousi-ii.segy.gz (AGL distribution, km/s)

The original Marmousi (marmousi_vp_nz122_nx384_dx24.f32) is not available from a public
source with a clear licence and is not produced by this script.

Run with /usr/bin/python3 (needs numpy only).
"""

import argparse
import gzip
import hashlib
import io
import os
import sys
import tarfile
import tempfile
import urllib.error
import urllib.request
from pathlib import Path

import numpy as np

SEG_URL = ("https://s3.amazonaws.com/open.source.geoscience/open_data/"
           "elastic-marmousi/elastic-marmousi-model.tar.gz")
# The SHA-256 of the SEG tarball is not pinned: no trusted copy was available to hash.
SEG_TARBALL_SHA256 = None
SEGY_MEMBER = "MODEL_P-WAVE_VELOCITY_1.25m.segy"
SEGY_GZ_SHA256 = "2c7a0c4170c95a15620c2146573711c61a4cef8dc27338ef6c211a81ffa68920"

NS, NTRACES = 2801, 13601  # samples per trace (depth), traces (x); 1.25 m grid

OUTPUTS = [
    # (file name, step, nz, nx, sha256, bytes)
    ("marmousi2_vp_nz281_nx1361_dx12.5.f32", 10, 281, 1361,
     "1c9297cc881d1103ffb52abf452b25bf2b878e6d519edf963a20eca9e9077bee", 1529764),
    ("marmousi2_vp_nz561_nx2721_dx6.25.f32", 5, 561, 2721,
     "f1cf50d53005c6ed04c794d16c8c29401031653b5727b63694f144d863afb44a", 6105924),
]

ATTRIBUTION = """\
Marmousi2 (AGL Elastic Marmousi) P-wave velocity

The AGL Elastic Marmousi model was created at the University of Houston, and was released by its authors Gary S. Martin,
Robert Wiley and Kurt Marfurt with the permission of the program director of the Allied Geophysical Labs consortium in 2019.
This model is provided under CC BY 4.0 license from the SEG. Copyright 2004 Allied Geophysical Laboratory, University of
Houston, TX, USA. Licensed under the Creative Commons Attribution 4.0 International License
(https://creativecommons.org/licenses/by/4.0). Please DO NOT separate the model and data from this license and ALWAYS include
the above statement and link with the data.

Source: https://wiki.seg.org/wiki/AGL_Elastic_Marmousi
Download: https://s3.amazonaws.com/open.source.geoscience/open_data/elastic-marmousi/elastic-marmousi-model.tar.gz

Cite: Martin, G. S., Wiley, R., and Marfurt, K. J., 2006, Marmousi2: An elastic upgrade for Marmousi:
The Leading Edge, 25(2), 156-166.
"""


class FetchError(Exception):
    pass


def default_cache_dir():
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "ksweep" / "marmousi"


def sha256_bytes(data):
    return hashlib.sha256(data).hexdigest()


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def write_atomic(path, data):
    path = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=path.name + ".", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def download(url, dest):
    print(f"downloading {url}", file=sys.stderr)
    try:
        with urllib.request.urlopen(url, timeout=60) as response, open(dest, "wb") as out:
            total = 0
            while True:
                block = response.read(1 << 20)
                if not block:
                    break
                out.write(block)
                total += len(block)
    except (urllib.error.URLError, OSError, TimeoutError) as e:
        raise FetchError(
            f"download of {url} failed: {e}\n"
            "Check the network connection, or download the file elsewhere and pass it with "
            "--from-tarball PATH (or a vp_marmousi-ii.segy.gz with --from-segy-gz PATH).")
    print(f"downloaded {total} bytes", file=sys.stderr)


def segy_from_tarball(path):
    """Returns the bytes of the P-wave SEG-Y inside the SEG tarball (possibly nested)."""
    digest = sha256_file(path)
    if SEG_TARBALL_SHA256 is None:
        print(f"note: the tarball's SHA-256 is not pinned; it is {digest} "
              "(the output grids are still verified below)", file=sys.stderr)
    elif digest != SEG_TARBALL_SHA256:
        raise FetchError(f"{path} has SHA-256 {digest}, expected {SEG_TARBALL_SHA256}")
    try:
        with tarfile.open(path, "r:*") as tar:
            return _find_segy(tar, str(path))
    except tarfile.TarError as e:
        raise FetchError(f"{path} is not a readable tar archive: {e}")


def _find_segy(tar, where):
    names = [m for m in tar.getmembers() if m.isfile() and SEGY_MEMBER in os.path.basename(m.name)]
    if not names:
        raise FetchError(f"{where} holds no member named {SEGY_MEMBER}[.gz|.tar.gz]; "
                         f"members: {', '.join(m.name for m in tar.getmembers()[:20])}")
    member = names[0]
    data = tar.extractfile(member).read()
    base = os.path.basename(member.name)
    if base.endswith((".tar.gz", ".tgz", ".tar")):
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:*") as inner:
            return _find_segy(inner, f"{where}:{member.name}")
    if base.endswith(".gz"):
        return gzip.decompress(data)
    return data


def ibm_to_float64(words):
    """Decodes big-endian IBM System/360 single-precision floats (uint32 array) exactly."""
    words = words.astype(np.uint32)
    sign = np.where(words >> 31, -1.0, 1.0)
    exponent = ((words >> 24) & 0x7F).astype(np.int64)
    mantissa = (words & 0x00FFFFFF).astype(np.float64)
    return sign * np.ldexp(mantissa, 4 * (exponent - 64) - 24)


def decode_segy(raw, step):
    """Returns v[::step, ::step] (float64, [nz][nx]) of the 1.25 m SEG-Y."""
    if len(raw) < 3600:
        raise FetchError(f"SEG-Y is only {len(raw)} bytes, shorter than its 3600-byte headers")
    ns = int.from_bytes(raw[3220:3222], "big")
    fmt = int.from_bytes(raw[3224:3226], "big")
    if fmt != 1:
        raise FetchError(f"SEG-Y sample format code is {fmt}, expected 1 (4-byte IBM float)")
    if ns != NS:
        raise FetchError(f"SEG-Y has {ns} samples per trace, expected {NS}")
    trace_bytes = 240 + 4 * ns
    body = len(raw) - 3600
    if body % trace_bytes != 0 or body // trace_bytes != NTRACES:
        raise FetchError(f"SEG-Y body is {body} bytes, expected {NTRACES} traces of {trace_bytes} "
                         f"bytes = {NTRACES * trace_bytes}")
    traces = np.frombuffer(raw, dtype=np.uint8, offset=3600).reshape(NTRACES, trace_bytes)
    picked = np.ascontiguousarray(traces[::step, 240:])
    words = picked.view(">u4").reshape(picked.shape[0], ns)[:, ::step]
    return ibm_to_float64(words).T  # [nz][nx]


def to_ms(v, declared):
    vmax = float(np.max(v))
    if declared == "auto":
        declared = "km/s" if vmax < 20.0 else "m/s"
    if declared == "km/s":
        v = v * 1000.0
    print(f"source units: {declared} (max {vmax:g})", file=sys.stderr)
    lo, hi = float(np.min(v)), float(np.max(v))
    if not (np.all(np.isfinite(v)) and 300.0 <= lo and hi <= 10000.0):
        raise FetchError(f"velocities span {lo:g}..{hi:g} m/s after conversion from {declared}, "
                         "outside the plausible 300..10000 m/s; check --units")
    return v


def convert(raw, out_dir, units):
    out_dir.mkdir(parents=True, exist_ok=True)
    failures = []
    for name, step, nz, nx, sha, nbytes in OUTPUTS:
        v = to_ms(decode_segy(raw, step), units)
        if v.shape != (nz, nx):
            raise FetchError(f"{name}: decimated grid is {v.shape}, expected ({nz}, {nx})")
        data = v.astype("<f4").tobytes()
        digest = sha256_bytes(data)
        if len(data) == nbytes and digest == sha:
            write_atomic(out_dir / name, data)
            print(f"ok  {out_dir / name} ({nz} x {nx}, {v.min():.1f}..{v.max():.1f} m/s, "
                  f"sha256 {digest})")
        else:
            bad = out_dir / (name + ".mismatch")
            write_atomic(bad, data)
            failures.append(
                f"{name}: produced {len(data)} bytes with SHA-256 {digest}, but the ksweep loader "
                f"expects {nbytes} bytes with SHA-256 {sha}. The result was written to {bad} for "
                f"inspection only (the loader will not use it; it can be used as a raw model with "
                f"model.source = \"{bad}\", nz = {nz}, nx = {nx}).")
    write_atomic(out_dir / "ATTRIBUTION.txt", ATTRIBUTION.encode())
    if failures:
        raise FetchError("\n".join(failures))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    source = parser.add_mutually_exclusive_group()
    source.add_argument("--from-segy-gz", type=Path, metavar="PATH",
                        help="convert a local vp_marmousi-ii.segy.gz (km/s) instead of downloading")
    source.add_argument("--from-tarball", type=Path, metavar="PATH",
                        help="use a local copy of elastic-marmousi-model.tar.gz")
    parser.add_argument("--url", default=SEG_URL, help="tarball URL (default: the SEG open-data copy)")
    parser.add_argument("--out-dir", type=Path, default=default_cache_dir(),
                        help="where to write the grids (default: %(default)s)")
    parser.add_argument("--units", choices=["auto", "m/s", "km/s"], default="auto",
                        help="units of the SEG-Y samples (default: auto, km/s when max < 20)")
    args = parser.parse_args(argv)

    try:
        if args.from_segy_gz is not None:
            if not args.from_segy_gz.is_file():
                raise FetchError(f"{args.from_segy_gz} does not exist")
            digest = sha256_file(args.from_segy_gz)
            if digest != SEGY_GZ_SHA256:
                raise FetchError(f"{args.from_segy_gz} has SHA-256 {digest}, expected "
                                 f"{SEGY_GZ_SHA256} (vp_marmousi-ii.segy.gz)")
            raw = gzip.decompress(args.from_segy_gz.read_bytes())
        elif args.from_tarball is not None:
            if not args.from_tarball.is_file():
                raise FetchError(f"{args.from_tarball} does not exist")
            raw = segy_from_tarball(args.from_tarball)
        else:
            args.out_dir.mkdir(parents=True, exist_ok=True)
            with tempfile.TemporaryDirectory(dir=args.out_dir) as tmp:
                tarball = Path(tmp) / "elastic-marmousi-model.tar.gz"
                download(args.url, tarball)
                raw = segy_from_tarball(tarball)
        convert(raw, args.out_dir, args.units)
    except FetchError as e:
        print(f"fetch_marmousi.py: error: {e}", file=sys.stderr)
        return 1
    print(f"done; point ksweep at it with KSWEEP_MARMOUSI_DIR={args.out_dir} "
          "(this directory is also searched by default when it is the per-user cache)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
