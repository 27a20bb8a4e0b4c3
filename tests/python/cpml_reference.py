"""An independent fp64 implementation of the constant-density acoustic step with the
second-order CPML, written from the equations (docs/ARCHITECTURE.md, "The time step and its
adjoint"), not from ksweep's kernels: numpy arrays over the whole padded grid, every cell
updated by the same expressions, the memories psi and zeta defined everywhere and zero where
the damping is zero.

    u^{n+1} = 2 u^n - u^{n-1} + v^2 dt^2 sum_a T_a / d_a^2 + w[n]   (d_a: the cells' size along a)
    Q_a      = Daa u^n + Da psi_a^{n-1}
    psi_a^n  = a psi_a^{n-1} + b Da u^n
    zeta_a^n = a zeta_a^{n-1} + b Q_a
    T_a      = Q_a + zeta_a^n

with a = exp(-(sigma + alpha) dt), b = sigma / (sigma + alpha) (a - 1), sigma = sigma0 f^2,
sigma0 = -3 vmax ln(R) / (2 L), alpha = pi f_pml (1 - f), f the depth into the layer over its
width (Komatitsch and Martin 2007; Pasalic and McGarry 2010), and u = 0 beyond the layer (beyond
the model where a face has no layer: a reflecting edge).
Records r[n] = u^{n+1} at the receivers (ksweep's convention). Used by test_cpml.py."""
import numpy as np

SECOND = {2: [-2.0, 1.0], 4: [-5 / 2, 4 / 3, -1 / 12], 6: [-49 / 18, 3 / 2, -3 / 20, 1 / 90],
          8: [-205 / 72, 8 / 5, -1 / 5, 8 / 315, -1 / 560]}
FIRST = {2: [0.0, 1 / 2], 4: [0.0, 2 / 3, -1 / 12], 6: [0.0, 3 / 4, -3 / 20, 1 / 60],
         8: [0.0, 4 / 5, -1 / 5, 4 / 105, -1 / 280]}


def profile(n_model, lo, hi, dh, dt, vmax, reflection, freq):
    """a and b along one axis of lo + n_model + hi cells (layers of lo and hi cells before and
    after the model; zero in the model)."""
    n = lo + n_model + hi
    a, b = np.zeros(n), np.zeros(n)
    for i in range(n):
        depth, width = (lo - i, lo) if i < lo else (i - (lo + n_model) + 1, hi)
        if depth <= 0:
            continue
        f = depth / width
        sigma = -3.0 * vmax * np.log(reflection) / (2.0 * width * dh) * f * f
        alpha = np.pi * freq * (1.0 - f)
        a[i] = np.exp(-(sigma + alpha) * dt)
        b[i] = sigma / (sigma + alpha) * (a[i] - 1.0) if sigma + alpha > 0 else 0.0
    return a, b


def forward(v, dh, dt, wavelet, source, receivers, *, order, width, reflection=1e-3, freq=25.0, vmax=None):
    """Records [receiver, time] of one shot: a source of amplitudes `wavelet` [nt] at cell `source`
    and receivers at cells `receivers` [k, dim] (model coordinates), for the velocity v (2D or 3D)
    on cells of `dh` metres (one number, or one per axis) surrounded by layers of `width` cells:
    one number for every face, or a (before, after) pair per axis. A face of 0 cells has no
    layer: the grid ends there (u = 0 beyond it, a reflecting edge)."""
    v = np.asarray(v, dtype=np.float64)
    dim, M = v.ndim, order // 2
    d = [float(dh)] * dim if np.isscalar(dh) else [float(x) for x in dh]
    faces = [(int(width), int(width))] * dim if np.isscalar(width) else [(int(lo), int(hi)) for lo, hi in width]
    vmax = float(v.max()) if vmax is None else vmax
    vp = np.pad(v, faces, mode="edge")
    shape = vp.shape
    c = vp * vp * dt * dt
    prof = []
    for ax in range(dim):
        a, b = profile(v.shape[ax], faces[ax][0], faces[ax][1], d[ax], dt, vmax, reflection, freq)
        view = [1] * dim
        view[ax] = -1
        prof.append((a.reshape(view), b.reshape(view)))
    inner = tuple(slice(M, M + n) for n in shape)

    def taps(f, ax, k):  # f (with a halo of M zeros) shifted by k cells along axis ax, on the grid
        s = list(inner)
        s[ax] = slice(M + k, M + k + shape[ax])
        return f[tuple(s)]

    def padded(f):
        return np.pad(f, M)

    def d2(f, ax):
        fp = padded(f)
        return SECOND[order][0] * f + sum(SECOND[order][k] * (taps(fp, ax, k) + taps(fp, ax, -k))
                                          for k in range(1, M + 1))

    def d1(f, ax):
        fp = padded(f)
        return sum(FIRST[order][k] * (taps(fp, ax, k) - taps(fp, ax, -k)) for k in range(1, M + 1))

    u0, u1 = np.zeros(shape), np.zeros(shape)  # u^{n-1}, u^n
    psi = [np.zeros(shape) for _ in range(dim)]
    zeta = [np.zeros(shape) for _ in range(dim)]
    src = tuple(int(x) + faces[ax][0] for ax, x in enumerate(source))
    rec = tuple(np.asarray(receivers)[:, ax] + faces[ax][0] for ax in range(dim))
    out = np.zeros((len(receivers), len(wavelet)))
    for n in range(len(wavelet)):
        t = np.zeros(shape)
        for ax in range(dim):
            a, b = prof[ax]
            q = d2(u1, ax) + d1(psi[ax], ax)
            psi[ax] = a * psi[ax] + b * d1(u1, ax)
            zeta[ax] = a * zeta[ax] + b * q
            t += (q + zeta[ax]) / (d[ax] * d[ax])
        u2 = 2.0 * u1 - u0 + c * t
        u2[src] += wavelet[n]
        u0, u1 = u1, u2
        out[:, n] = u1[rec]
    return out
