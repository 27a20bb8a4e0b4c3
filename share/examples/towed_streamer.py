#!/usr/bin/env python3
"""The acquisition of the towed-streamer example (towed_streamer_model.toml): a marine line
whose receivers move with the source, as a CSV survey (one row per trace, metres from the
model's origin), and the source's wavelet (not a Ricker) as a text file.

    towed_streamer.py FOLDER      # writes FOLDER/survey.csv and FOLDER/source_wavelet.txt

Geometry: 72 shots every 37.5 m from x = 2100 m, the source 6 m deep; a streamer of 160
receivers every 12.5 m at 7.5 m depth, trailing the source from 100 m to 2087.5 m behind it.
On the 25 m grid of the inversion, every receiver depth, half of the receivers and half of the
shots lie between cells.

Wavelet: a causal, damped 6 Hz oscillation (an airgun-like signature without its bubble),
sampled at 1 ms for 1 s: w(t) = (t/tau)^2 exp(-t/tau) sin(2 pi f t), tau = 0.04 s, f = 6 Hz,
starting at t = 0.25 s (a recording delay: the zero-phase low-pass of the first frequency stage
spreads the wavelet about 1 / max_freq before its start, which must lie after t = 0).
"""
import os
import sys

import numpy as np

SHOTS, SHOT_DX, FIRST_SHOT = 72, 37.5, 2100.0
SRC_Z, REC_Z = 6.0, 7.5
RECEIVERS, REC_DX, NEAR_OFFSET = 160, 12.5, 100.0


def survey_rows():
    for s in range(SHOTS):
        sx = FIRST_SHOT + s * SHOT_DX
        for r in range(RECEIVERS):
            yield s, sx, SRC_Z, sx - NEAR_OFFSET - r * REC_DX, REC_Z


def source_wavelet(dt=0.001, length=1.0, tau=0.04, freq=6.0, start=0.25):
    t = np.arange(int(round(length / dt))) * dt
    u = np.clip(t - start, 0, None)
    return t, (u / tau) ** 2 * np.exp(-u / tau) * np.sin(2 * np.pi * freq * u)


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    folder = sys.argv[1]
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "survey.csv"), "w") as f:
        f.write("shot,src_x,src_z,rec_x,rec_z\n")
        for row in survey_rows():
            f.write("%d,%.3f,%.3f,%.3f,%.3f\n" % row)
    t, w = source_wavelet()
    with open(os.path.join(folder, "source_wavelet.txt"), "w") as f:
        f.write("# time (s), amplitude: the towed-streamer example's source\n")
        for ti, wi in zip(t, w):
            f.write("%.4f %.9e\n" % (ti, wi))
    print("wrote %s and %s" % (os.path.join(folder, "survey.csv"), os.path.join(folder, "source_wavelet.txt")))


if __name__ == "__main__":
    main()
