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


def shot_geometry(f, shot):
    """Source and receivers of one shot of an open ksweep records file, in metres.

    Returns (src, rec): src = (z, x, y), rec an array [n][3] of (z, x, y) for the shot's own
    receivers (rec_count of them). Files with the metre datasets (src_pos, rec_pos, rec_count)
    give them as written; older files hold the cells of one shared spread (src_z, rec_x, ...)."""
    import numpy as np
    if "rec_pos" in f:
        count = int(np.asarray(f["rec_count"])[shot])
        return (np.asarray(f["src_pos"][shot], dtype=np.float64),
                np.asarray(f["rec_pos"][shot, :count, :], dtype=np.float64))
    dh = float(f.attrs["dh"])

    def cells(name, n):
        return np.asarray(f[name], dtype=np.float64) if name in f else np.zeros(n)
    nrec = f["rec_x"].shape[0]
    src = np.array([cells("src_z", shot + 1)[shot], cells("src_x", shot + 1)[shot],
                    cells("src_y", shot + 1)[shot]]) * dh
    rec = np.stack([cells("rec_z", nrec), cells("rec_x", nrec), cells("rec_y", nrec)], -1) * dh
    return src, rec
