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
