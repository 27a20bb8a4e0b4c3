"""Helpers shared by the ksweep figure scripts."""
import os
import tempfile


def save_atomic(fig, out, dpi):
    """Save a matplotlib figure as PNG under a temporary name, then rename it into place."""
    out = os.path.abspath(out)
    fd, tmp = tempfile.mkstemp(prefix=os.path.basename(out) + ".", suffix=".tmp.png",
                               dir=os.path.dirname(out))
    os.close(fd)
    try:
        fig.savefig(tmp, dpi=dpi, format="png")
        os.chmod(tmp, 0o644)
        os.replace(tmp, out)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def records_dataset(f, path):
    """The [shots][nt][receivers] dataset 'data' of an open ksweep records file, checked."""
    if "data" not in f:
        raise ValueError(f"{path} has no dataset 'data'")
    dset = f["data"]
    if dset.ndim != 3:
        raise ValueError(f"dataset 'data' in {path} has rank {dset.ndim}, expected 3 [shots][nt][receivers]")
    return dset
