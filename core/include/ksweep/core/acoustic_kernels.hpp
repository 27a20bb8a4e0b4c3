#pragma once
/// \file acoustic_kernels.hpp
/// The 2D constant-density acoustic time step and its exact discrete adjoint, written once for
/// every Kokkos backend.
///
/// Discretisation (all on the padded grid; ~ marks quantities scaled by powers of dh so the
/// stencils carry only their dimensionless coefficients):
///   u^{n+1} = 2 u^n - u^{n-1} + c (T_x + T_z),     c = v^2 dt^2 / dh^2,
/// and per axis, outside the layer T_x = Dxx u^n; inside it (second-order CPML)
///   Q_x    = Dxx u^n + Dx psi_x^{n-1}
///   psi_x^n  = a psi_x^{n-1} + b Dx u^n
///   zeta_x^n = a zeta_x^{n-1} + b Q_x
///   T_x    = Q_x + zeta_x^n = (1 + b) Q_x + a zeta_x^{n-1}.
/// Dx, Dxx are the centred first and second differences of the order (unscaled), psi carries a
/// factor dh and zeta a factor dh^2. Outside the grid u = 0 (Dirichlet behind the layer); with a
/// free surface, row 0 holds u = 0 and rows above mirror it with a sign change (image method).
///
/// The adjoint kernel is the transpose of this linear map of the state (u^n, u^{n-1}, psi, zeta).
/// With g = c lambda^{n+1}, h = g + zetabar and w = g + b h (w = g outside the layer):
///   lambda^n   = 2 lambda^{n+1} - lambda^{n+2} + Dxx w_x + Dzz w_z - Dx(b psibar_x) - Dz(b psibar_z)
/// The adjoint wavefield is stored as mu = c lambda (c > 0 on the grid, 0 in the halo), so that
/// g is the field itself and the step has the forward's shape:
///   mu^n = 2 mu^{n+1} - mu^{n+2} + c (Dxx w_x + Dzz w_z - Dx(b psibar_x) - Dz(b psibar_z)),
/// which saves a load and a multiply per stencil tap. Residuals enter as c r (InjectPoints with
/// the c weight) and the source gradient reads mu / c (SamplePoints with the c weight).
///   psibar_x'  = a psibar_x - Dx(mask w_x)        (in the layer)
///   zetabar_x' = a h_x                            (in the layer)
/// (Dxx is symmetric, also with the image rows; Dx is antisymmetric.)

#include <ksweep/core/fp_env.hpp>
#include <ksweep/core/geometry.hpp>
#include <ksweep/core/stencil.hpp>

#include <Kokkos_Core.hpp>

// The loops over stencil taps are unrolled completely before vectorisation: left as loops, GCC
// tries to vectorise the large layer runs along the taps (strided) and gives up on them.
#if defined(__CUDACC__) || defined(__clang__)
#define KSWEEP_UNROLL_TAPS _Pragma("unroll")
#elif defined(__GNUC__)
#define KSWEEP_UNROLL_TAPS _Pragma("GCC unroll 16")
#else
#define KSWEEP_UNROLL_TAPS
#endif

namespace ksweep::core {

/// Work tags of the kernels.
struct ForwardTag {};
struct AdjointTag {};

namespace impl {

/// Kernels run row by row (a tight, vectorisable loop over x in each region) on host backends
/// and cell by cell on devices.
template <class ExecSpace>
inline constexpr bool runs_by_rows =
    Kokkos::SpaceAccessibility<ExecSpace, Kokkos::HostSpace>::accessible;

template <class Tag>
struct RowTag {};
template <class Tag>
struct CellTag {};

/// A host launch over `n` rows in chunks: each chunk runs its rows under FlushDenormals, so
/// the mode is set once per chunk on the thread that runs it (see fp_env.hpp).
template <class Tag, class Functor>
struct HostRowChunks {
  Functor m_f;
  int m_n, m_chunk;
  bool m_flush;
  void operator()(int c) const {
    FlushDenormals guard(m_flush);
    int const r1 = (c + 1) * m_chunk < m_n ? (c + 1) * m_chunk : m_n;
    for (int r = c * m_chunk; r < r1; ++r) m_f(RowTag<Tag>{}, r);
  }
};

/// Launches `f(RowTag<Tag>, row)` for rows [0, n) on a host space: about four chunks per
/// thread (the result does not depend on the chunking: rows are independent).
template <class Tag, class ExecSpace, class Functor>
void launch_host_rows(ExecSpace const& space, char const* label, Functor const& f, int n) {
  int const parts = 4 * space.concurrency();
  int const chunk = n / parts + (n % parts != 0);
  int const chunks = chunk > 0 ? (n + chunk - 1) / chunk : 0;
  Kokkos::parallel_for(label, Kokkos::RangePolicy<ExecSpace>(space, 0, chunks),
                       HostRowChunks<Tag, Functor>{f, n, chunk, flush_denormals()});
}

}  // namespace impl

/// Fields of one batch of shots on the padded grid. Wavefields carry a halo of M zero cells on
/// every side, [shot][NZ + 2M][NX + 2M]. Layer memories live only in the layer (plus 2M cells of
/// zeros on each side of a strip): x strips [side][shot][NZ][W + 4M], z strips
/// [side][shot][W + 4M][NX]; side 0 is left/top, 1 is right/bottom.
template <class Real, class MemorySpace>
struct AcousticFields {
  using field3 = Kokkos::View<Real***, Kokkos::LayoutRight, MemorySpace>;
  using field4 = Kokkos::View<Real****, Kokkos::LayoutRight, MemorySpace>;
  using field2 = Kokkos::View<Real**, Kokkos::LayoutRight, MemorySpace>;
  using field1 = Kokkos::View<Real*, Kokkos::LayoutRight, MemorySpace>;
};

/// The acoustic step functor: forward (ForwardTag) and adjoint (AdjointTag) share the stencil
/// coefficients and the layer profiles.
template <class Real, int Order, class MemorySpace>
struct AcousticStep {
  static constexpr int M = Order / 2;
  using C = StencilCoefficients<Order>;
  using F = AcousticFields<Real, MemorySpace>;
  using field3 = typename F::field3;
  using field4 = typename F::field4;
  using cfield2 = Kokkos::View<Real const**, Kokkos::LayoutRight, MemorySpace>;
  using cfield1 = Kokkos::View<Real const*, Kokkos::LayoutRight, MemorySpace>;

  // Forward: cur = u^n, out = u^{n-1} on entry and u^{n+1} on exit.
  // Adjoint: cur = lambda^{n+1}, out = lambda^{n+2} on entry and lambda^n on exit.
  field3 m_cur, m_out;
  // Layer memories (forward: psi, zeta; adjoint: psibar, zetabar); *_in read, *_out written.
  field4 m_psix_in, m_psix_out, m_zetax_in, m_zetax_out;
  field4 m_psiz_in, m_psiz_out, m_zetaz_in, m_zetaz_out;
  cfield2 m_c;  // v^2 dt^2 / dh^2, [NZ + 2M][NX + 2M], zero in the halo
  cfield1 m_ax, m_bx, m_mx;  // [NX + 2M]
  cfield1 m_az, m_bz, m_mz;  // [NZ + 2M]
  int m_nz = 0, m_nx = 0, m_w = 0, m_top = 0, m_NZ = 0, m_NX = 0;
  bool m_free_surface = false;

  AcousticStep() = default;
  AcousticStep(Layout const& l) : m_nz(l.nz), m_nx(l.nx), m_w(l.width), m_top(l.top), m_NZ(l.NZ), m_NX(l.NX),
                                  m_free_surface(l.free_surface) {}

  KOKKOS_INLINE_FUNCTION int x_side(int ix) const { return ix < m_w + m_nx / 2 ? 0 : 1; }
  KOKKOS_INLINE_FUNCTION int z_side(int iz) const { return iz < m_top + m_nz / 2 ? 0 : 1; }
  // Index of padded coordinate ix (iz) inside an x (z) strip of the given side.
  KOKKOS_INLINE_FUNCTION int x_col(int side, int ix) const { return side == 0 ? ix + 2 * M : ix - (m_w + m_nx - 2 * M); }
  KOKKOS_INLINE_FUNCTION int z_row(int side, int iz) const {
    return side == 0 ? iz + 2 * M : iz - (m_top + m_nz - 2 * M);
  }

  // ------------------------------------------------------------------------------------------
  // Forward
  // ------------------------------------------------------------------------------------------
  template <bool XP, bool ZP, bool FS>
  KOKKOS_FORCEINLINE_FUNCTION void forward_cell(int s, int iz, int ix) const {
    int const hz = iz + M, hx = ix + M;
    Real const uc = m_cur(s, hz, hx);
    Real dxx = Real(C::second(0)) * uc, dzz = Real(C::second(0)) * uc;
    KSWEEP_UNROLL_TAPS
    for (int k = 1; k <= M; ++k) {
      Real const ck = Real(C::second(k));
      dxx += ck * (m_cur(s, hz, hx - k) + m_cur(s, hz, hx + k));
      Real up;
      if constexpr (FS) {
        up = iz - k >= 0 ? m_cur(s, hz - k, hx) : -m_cur(s, M + k - iz, hx);
      } else {
        up = m_cur(s, hz - k, hx);
      }
      dzz += ck * (up + m_cur(s, hz + k, hx));
    }
    Real tx = dxx, tz = dzz;
    if constexpr (XP) {
      int const side = x_side(ix), col = x_col(side, ix);
      Real dxu = 0, dxpsi = 0;
      KSWEEP_UNROLL_TAPS
      for (int k = 1; k <= M; ++k) {
        Real const dk = Real(C::first(k));
        dxu += dk * (m_cur(s, hz, hx + k) - m_cur(s, hz, hx - k));
        dxpsi += dk * (m_psix_in(side, s, iz, col + k) - m_psix_in(side, s, iz, col - k));
      }
      Real const q = dxx + dxpsi, a = m_ax(hx), b = m_bx(hx);
      m_psix_out(side, s, iz, col) = a * m_psix_in(side, s, iz, col) + b * dxu;
      Real const zeta = a * m_zetax_in(side, s, iz, col) + b * q;
      m_zetax_out(side, s, iz, col) = zeta;
      tx = q + zeta;
    }
    if constexpr (ZP) {
      int const side = z_side(iz), row = z_row(side, iz);
      Real dzu = 0, dzpsi = 0;
      KSWEEP_UNROLL_TAPS
      for (int k = 1; k <= M; ++k) {
        Real const dk = Real(C::first(k));
        dzu += dk * (m_cur(s, hz + k, hx) - m_cur(s, hz - k, hx));
        dzpsi += dk * (m_psiz_in(side, s, row + k, ix) - m_psiz_in(side, s, row - k, ix));
      }
      Real const q = dzz + dzpsi, a = m_az(hz), b = m_bz(hz);
      m_psiz_out(side, s, row, ix) = a * m_psiz_in(side, s, row, ix) + b * dzu;
      Real const zeta = a * m_zetaz_in(side, s, row, ix) + b * q;
      m_zetaz_out(side, s, row, ix) = zeta;
      tz = q + zeta;
    }
    m_out(s, hz, hx) = Real(2) * uc - m_out(s, hz, hx) + m_c(hz, hx) * (tx + tz);
  }

  // ------------------------------------------------------------------------------------------
  // Adjoint. XN/ZN: the cell's stencil reaches into the layer along x/z, so neighbours carry
  // layer terms; otherwise the transposed stencil is the plain one applied to g = c lambda.
  // ------------------------------------------------------------------------------------------
  // The adjoint wavefield is carried as mu = c lambda, so g = c lambda is the field itself.
  KOKKOS_FORCEINLINE_FUNCTION Real g_at(int s, int hz, int hx) const { return m_cur(s, hz, hx); }

  // w_x at padded x coordinate ixn of row iz (strip side `side`).
  KOKKOS_FORCEINLINE_FUNCTION Real wx_at(int s, int iz, int ixn, int side) const {
    Real const g = g_at(s, iz + M, ixn + M);
    return g + m_bx(ixn + M) * (g + m_zetax_in(side, s, iz, x_col(side, ixn)));
  }
  KOKKOS_FORCEINLINE_FUNCTION Real wz_at(int s, int izn, int ix, int side) const {
    Real const g = g_at(s, izn + M, ix + M);
    return g + m_bz(izn + M) * (g + m_zetaz_in(side, s, z_row(side, izn), ix));
  }

  template <bool XN, bool ZN, bool FS>
  KOKKOS_FORCEINLINE_FUNCTION void adjoint_cell(int s, int iz, int ix) const {
    int const hz = iz + M, hx = ix + M;
    Real lapx = 0, lapz = 0, dbx = 0, dbz = 0;
    if constexpr (!XN) {
      lapx = Real(C::second(0)) * g_at(s, hz, hx);
      KSWEEP_UNROLL_TAPS
      for (int k = 1; k <= M; ++k) lapx += Real(C::second(k)) * (g_at(s, hz, hx - k) + g_at(s, hz, hx + k));
    } else {
      int const side = x_side(ix), col = x_col(side, ix);
      lapx = Real(C::second(0)) * wx_at(s, iz, ix, side);
      Real dq = 0;
      KSWEEP_UNROLL_TAPS
      for (int k = 1; k <= M; ++k) {
        Real const wm = wx_at(s, iz, ix - k, side), wp = wx_at(s, iz, ix + k, side);
        lapx += Real(C::second(k)) * (wm + wp);
        Real const dk = Real(C::first(k));
        dbx += dk * (m_bx(hx + k) * m_psix_in(side, s, iz, col + k) - m_bx(hx - k) * m_psix_in(side, s, iz, col - k));
        dq += dk * (m_mx(hx + k) * wp - m_mx(hx - k) * wm);
      }
      if (m_mx(hx) != Real(0)) {
        Real const a = m_ax(hx);
        m_psix_out(side, s, iz, col) = a * m_psix_in(side, s, iz, col) - dq;
        m_zetax_out(side, s, iz, col) = a * (g_at(s, hz, hx) + m_zetax_in(side, s, iz, col));
      }
    }
    if constexpr (!ZN) {
      Real const g0 = g_at(s, hz, hx);
      lapz = Real(C::second(0)) * g0;
      KSWEEP_UNROLL_TAPS
      for (int k = 1; k <= M; ++k) {
        Real gm;
        if constexpr (FS) {
          gm = iz - k >= 0 ? g_at(s, hz - k, hx) : -g_at(s, M + k - iz, hx);
        } else {
          gm = g_at(s, hz - k, hx);
        }
        lapz += Real(C::second(k)) * (gm + g_at(s, hz + k, hx));
      }
    } else {
      int const side = z_side(iz), row = z_row(side, iz);
      lapz = Real(C::second(0)) * wz_at(s, iz, ix, side);
      Real dq = 0;
      KSWEEP_UNROLL_TAPS
      for (int k = 1; k <= M; ++k) {
        Real const wm = wz_at(s, iz - k, ix, side), wp = wz_at(s, iz + k, ix, side);
        lapz += Real(C::second(k)) * (wm + wp);
        Real const dk = Real(C::first(k));
        dbz += dk * (m_bz(hz + k) * m_psiz_in(side, s, row + k, ix) - m_bz(hz - k) * m_psiz_in(side, s, row - k, ix));
        dq += dk * (m_mz(hz + k) * wp - m_mz(hz - k) * wm);
      }
      if (m_mz(hz) != Real(0)) {
        Real const a = m_az(hz);
        m_psiz_out(side, s, row, ix) = a * m_psiz_in(side, s, row, ix) - dq;
        m_zetaz_out(side, s, row, ix) = a * (g_at(s, hz, hx) + m_zetaz_in(side, s, row, ix));
      }
    }
    m_out(s, hz, hx) = Real(2) * m_cur(s, hz, hx) - m_out(s, hz, hx) + m_c(hz, hx) * (lapx + lapz - dbx - dbz);
  }

  // ------------------------------------------------------------------------------------------
  // Row drivers (host backends): region flags are constant along each run of x.
  // ------------------------------------------------------------------------------------------
  // Interior runs (no layer terms, no image rows) as restrict-pointer loops the compiler
  // vectorises; the same arithmetic as forward_cell / adjoint_cell.
  KOKKOS_INLINE_FUNCTION void forward_interior_run(int s, int iz, int x0, int x1) const {
    int const hz = iz + M;
    std::ptrdiff_t const sz = static_cast<std::ptrdiff_t>(m_cur.stride(1));
    Real const* KOKKOS_RESTRICT u = &m_cur(s, hz, M);
    Real* KOKKOS_RESTRICT out = &m_out(s, hz, M);
    Real const* KOKKOS_RESTRICT c = &m_c(hz, M);
#pragma omp simd
    for (int ix = x0; ix < x1; ++ix) {
      Real dxx = Real(C::second(0)) * u[ix], dzz = Real(C::second(0)) * u[ix];
      KSWEEP_UNROLL_TAPS
      for (int k = 1; k <= M; ++k) {
        dxx += Real(C::second(k)) * (u[ix - k] + u[ix + k]);
        dzz += Real(C::second(k)) * (u[ix - k * sz] + u[ix + k * sz]);
      }
      out[ix] = Real(2) * u[ix] - out[ix] + c[ix] * (dxx + dzz);
    }
  }
  KOKKOS_INLINE_FUNCTION void adjoint_interior_run(int s, int iz, int x0, int x1) const {
    int const hz = iz + M;
    std::ptrdiff_t const sz = static_cast<std::ptrdiff_t>(m_cur.stride(1));
    Real const* KOKKOS_RESTRICT l = &m_cur(s, hz, M);
    Real* KOKKOS_RESTRICT out = &m_out(s, hz, M);
    Real const* KOKKOS_RESTRICT c = &m_c(hz, M);
#pragma omp simd
    for (int ix = x0; ix < x1; ++ix) {
      Real const g0 = l[ix];
      Real lapx = Real(C::second(0)) * g0, lapz = Real(C::second(0)) * g0;
      KSWEEP_UNROLL_TAPS
      for (int k = 1; k <= M; ++k) {
        lapx += Real(C::second(k)) * (l[ix - k] + l[ix + k]);
        lapz += Real(C::second(k)) * (l[ix - k * sz] + l[ix + k * sz]);
      }
      out[ix] = Real(2) * l[ix] - out[ix] + c[ix] * (lapx + lapz);
    }
  }

  // Runs of a row inside the top or bottom layer (z terms only): the z-layer coefficients are
  // constant along the row, so these vectorise too.
  KOKKOS_INLINE_FUNCTION void forward_zlayer_run(int s, int iz, int x0, int x1) const {
    int const hz = iz + M, side = z_side(iz), row = z_row(side, iz);
    std::ptrdiff_t const sz = static_cast<std::ptrdiff_t>(m_cur.stride(1));
    std::ptrdiff_t const ps = static_cast<std::ptrdiff_t>(m_psiz_in.stride(2));
    Real const* KOKKOS_RESTRICT u = &m_cur(s, hz, M);
    Real* KOKKOS_RESTRICT out = &m_out(s, hz, M);
    Real const* KOKKOS_RESTRICT c = &m_c(hz, M);
    Real const* KOKKOS_RESTRICT pin = &m_psiz_in(side, s, row, 0);
    Real* KOKKOS_RESTRICT pout = &m_psiz_out(side, s, row, 0);
    Real const* KOKKOS_RESTRICT zin = &m_zetaz_in(side, s, row, 0);
    Real* KOKKOS_RESTRICT zout = &m_zetaz_out(side, s, row, 0);
    Real const a = m_az(hz), b = m_bz(hz);
#pragma omp simd
    for (int ix = x0; ix < x1; ++ix) {
      Real dxx = Real(C::second(0)) * u[ix], dzz = Real(C::second(0)) * u[ix], dzu = 0, dzpsi = 0;
      KSWEEP_UNROLL_TAPS
      for (int k = 1; k <= M; ++k) {
        dxx += Real(C::second(k)) * (u[ix - k] + u[ix + k]);
        dzz += Real(C::second(k)) * (u[ix - k * sz] + u[ix + k * sz]);
        dzu += Real(C::first(k)) * (u[ix + k * sz] - u[ix - k * sz]);
        dzpsi += Real(C::first(k)) * (pin[ix + k * ps] - pin[ix - k * ps]);
      }
      Real const q = dzz + dzpsi;
      pout[ix] = a * pin[ix] + b * dzu;
      Real const zeta = a * zin[ix] + b * q;
      zout[ix] = zeta;
      out[ix] = Real(2) * u[ix] - out[ix] + c[ix] * (dxx + q + zeta);
    }
  }
  template <bool InLayer>
  KOKKOS_INLINE_FUNCTION void adjoint_zlayer_run(int s, int iz, int x0, int x1) const {
    int const hz = iz + M, side = z_side(iz), row = z_row(side, iz);
    std::ptrdiff_t const sz = static_cast<std::ptrdiff_t>(m_cur.stride(1));
    std::ptrdiff_t const ps = static_cast<std::ptrdiff_t>(m_psiz_in.stride(2));
    Real const* KOKKOS_RESTRICT l = &m_cur(s, hz, M);
    Real* KOKKOS_RESTRICT out = &m_out(s, hz, M);
    Real const* KOKKOS_RESTRICT c = &m_c(hz, M);
    Real const* KOKKOS_RESTRICT pin = &m_psiz_in(side, s, row, 0);
    Real* KOKKOS_RESTRICT pout = &m_psiz_out(side, s, row, 0);
    Real const* KOKKOS_RESTRICT zin = &m_zetaz_in(side, s, row, 0);
    Real* KOKKOS_RESTRICT zout = &m_zetaz_out(side, s, row, 0);
    Real bz[2 * M + 1], mz[2 * M + 1];
    for (int k = -M; k <= M; ++k) {
      bz[k + M] = m_bz(hz + k);
      mz[k + M] = m_mz(hz + k);
    }
    Real const a = m_az(hz);
#pragma omp simd
    for (int ix = x0; ix < x1; ++ix) {
      Real const g0 = l[ix];
      Real lapx = Real(C::second(0)) * g0;
      Real const w0 = g0 + bz[M] * (g0 + zin[ix]);
      Real lapz = Real(C::second(0)) * w0, dbz = 0, dq = 0;
      KSWEEP_UNROLL_TAPS
      for (int k = 1; k <= M; ++k) {
        lapx += Real(C::second(k)) * (l[ix - k] + l[ix + k]);
        Real const gm = l[ix - k * sz], gp = l[ix + k * sz];
        Real const wm = gm + bz[M - k] * (gm + zin[ix - k * ps]), wp = gp + bz[M + k] * (gp + zin[ix + k * ps]);
        lapz += Real(C::second(k)) * (wm + wp);
        dbz += Real(C::first(k)) * (bz[M + k] * pin[ix + k * ps] - bz[M - k] * pin[ix - k * ps]);
        dq += Real(C::first(k)) * (mz[M + k] * wp - mz[M - k] * wm);
      }
      if constexpr (InLayer) {
        pout[ix] = a * pin[ix] - dq;
        zout[ix] = a * (g0 + zin[ix]);
      }
      out[ix] = Real(2) * l[ix] - out[ix] + c[ix] * (lapx + lapz - dbz);
    }
  }

  // Runs inside the left or right layer (x terms; z terms too in the corners). The strip side
  // is constant along a run; the x profiles are read per cell.
  template <bool ZP>
  KOKKOS_INLINE_FUNCTION void forward_xlayer_run(int s, int iz, int x0, int x1) const {
    int const hz = iz + M, side = x_side(x0), off = x_col(side, 0);
    std::ptrdiff_t const sz = static_cast<std::ptrdiff_t>(m_cur.stride(1));
    Real const* KOKKOS_RESTRICT u = &m_cur(s, hz, M);
    Real* KOKKOS_RESTRICT out = &m_out(s, hz, M);
    Real const* KOKKOS_RESTRICT c = &m_c(hz, M);
    Real const* KOKKOS_RESTRICT pxi = &m_psix_in(side, s, iz, 0);
    Real* KOKKOS_RESTRICT pxo = &m_psix_out(side, s, iz, 0);
    Real const* KOKKOS_RESTRICT zxi = &m_zetax_in(side, s, iz, 0);
    Real* KOKKOS_RESTRICT zxo = &m_zetax_out(side, s, iz, 0);
    Real const* KOKKOS_RESTRICT ax = &m_ax(M);
    Real const* KOKKOS_RESTRICT bx = &m_bx(M);
    int zside = 0, row = 0;
    if constexpr (ZP) {
      zside = z_side(iz);
      row = z_row(zside, iz);
    }
    std::ptrdiff_t const ps = static_cast<std::ptrdiff_t>(m_psiz_in.stride(2));
    Real const* KOKKOS_RESTRICT pzi = ZP ? &m_psiz_in(zside, s, row, 0) : nullptr;
    Real* KOKKOS_RESTRICT pzo = ZP ? &m_psiz_out(zside, s, row, 0) : nullptr;
    Real const* KOKKOS_RESTRICT zzi = ZP ? &m_zetaz_in(zside, s, row, 0) : nullptr;
    Real* KOKKOS_RESTRICT zzo = ZP ? &m_zetaz_out(zside, s, row, 0) : nullptr;
    Real const az = ZP ? m_az(hz) : Real(0), bz = ZP ? m_bz(hz) : Real(0);
#pragma omp simd
    for (int ix = x0; ix < x1; ++ix) {
      Real dxx = Real(C::second(0)) * u[ix], dzz = Real(C::second(0)) * u[ix], dxu = 0, dxpsi = 0;
      KSWEEP_UNROLL_TAPS
      for (int k = 1; k <= M; ++k) {
        dxx += Real(C::second(k)) * (u[ix - k] + u[ix + k]);
        dzz += Real(C::second(k)) * (u[ix - k * sz] + u[ix + k * sz]);
        dxu += Real(C::first(k)) * (u[ix + k] - u[ix - k]);
        dxpsi += Real(C::first(k)) * (pxi[ix + off + k] - pxi[ix + off - k]);
      }
      Real const qx = dxx + dxpsi;
      pxo[ix + off] = ax[ix] * pxi[ix + off] + bx[ix] * dxu;
      Real const zx = ax[ix] * zxi[ix + off] + bx[ix] * qx;
      zxo[ix + off] = zx;
      Real tz = dzz;
      if constexpr (ZP) {
        Real dzu = 0, dzpsi = 0;
        KSWEEP_UNROLL_TAPS
        for (int k = 1; k <= M; ++k) {
          dzu += Real(C::first(k)) * (u[ix + k * sz] - u[ix - k * sz]);
          dzpsi += Real(C::first(k)) * (pzi[ix + k * ps] - pzi[ix - k * ps]);
        }
        Real const qz = dzz + dzpsi;
        pzo[ix] = az * pzi[ix] + bz * dzu;
        Real const zz = az * zzi[ix] + bz * qz;
        zzo[ix] = zz;
        tz = qz + zz;
      }
      out[ix] = Real(2) * u[ix] - out[ix] + c[ix] * (qx + zx + tz);
    }
  }
  // Adjoint runs whose stencil reaches the left or right layer. The layer memories are
  // written with the mask as a factor, so cells outside the strip keep its zero padding.
  template <bool ZN, bool ZIn>
  KOKKOS_INLINE_FUNCTION void adjoint_xlayer_run(int s, int iz, int x0, int x1) const {
    int const hz = iz + M, side = x_side(x0), off = x_col(side, 0);
    std::ptrdiff_t const sz = static_cast<std::ptrdiff_t>(m_cur.stride(1));
    Real const* KOKKOS_RESTRICT l = &m_cur(s, hz, M);
    Real* KOKKOS_RESTRICT out = &m_out(s, hz, M);
    Real const* KOKKOS_RESTRICT c = &m_c(hz, M);
    Real const* KOKKOS_RESTRICT pxi = &m_psix_in(side, s, iz, 0);
    Real* KOKKOS_RESTRICT pxo = &m_psix_out(side, s, iz, 0);
    Real const* KOKKOS_RESTRICT zxi = &m_zetax_in(side, s, iz, 0);
    Real* KOKKOS_RESTRICT zxo = &m_zetax_out(side, s, iz, 0);
    Real const* KOKKOS_RESTRICT ax = &m_ax(M);
    Real const* KOKKOS_RESTRICT bx = &m_bx(M);
    Real const* KOKKOS_RESTRICT mx = &m_mx(M);
    int zside = 0, row = 0;
    if constexpr (ZN) {
      zside = z_side(iz);
      row = z_row(zside, iz);
    }
    std::ptrdiff_t const ps = static_cast<std::ptrdiff_t>(m_psiz_in.stride(2));
    Real const* KOKKOS_RESTRICT pzi = ZN ? &m_psiz_in(zside, s, row, 0) : nullptr;
    Real* KOKKOS_RESTRICT pzo = ZN ? &m_psiz_out(zside, s, row, 0) : nullptr;
    Real const* KOKKOS_RESTRICT zzi = ZN ? &m_zetaz_in(zside, s, row, 0) : nullptr;
    Real* KOKKOS_RESTRICT zzo = ZN ? &m_zetaz_out(zside, s, row, 0) : nullptr;
    Real bz[2 * M + 1] = {}, mz[2 * M + 1] = {};
    if constexpr (ZN) {
      for (int k = -M; k <= M; ++k) {
        bz[k + M] = m_bz(hz + k);
        mz[k + M] = m_mz(hz + k);
      }
    }
    Real const az = ZN ? m_az(hz) : Real(0);
#pragma omp simd
    for (int ix = x0; ix < x1; ++ix) {
      Real const g0 = l[ix];
      Real const wx0 = g0 + bx[ix] * (g0 + zxi[ix + off]);
      Real lapx = Real(C::second(0)) * wx0, dbx = 0, dqx = 0;
      Real lapz = 0, dbz = 0, dqz = 0;
      Real const wz0 = ZN ? g0 + bz[M] * (g0 + zzi[ix]) : g0;
      lapz = Real(C::second(0)) * wz0;
      KSWEEP_UNROLL_TAPS
      for (int k = 1; k <= M; ++k) {
        Real const gm = l[ix - k], gp = l[ix + k];
        Real const wm = gm + bx[ix - k] * (gm + zxi[ix + off - k]), wp = gp + bx[ix + k] * (gp + zxi[ix + off + k]);
        lapx += Real(C::second(k)) * (wm + wp);
        dbx += Real(C::first(k)) * (bx[ix + k] * pxi[ix + off + k] - bx[ix - k] * pxi[ix + off - k]);
        dqx += Real(C::first(k)) * (mx[ix + k] * wp - mx[ix - k] * wm);
        Real const hm = l[ix - k * sz], hp = l[ix + k * sz];
        if constexpr (ZN) {
          Real const vm = hm + bz[M - k] * (hm + zzi[ix - k * ps]), vp = hp + bz[M + k] * (hp + zzi[ix + k * ps]);
          lapz += Real(C::second(k)) * (vm + vp);
          dbz += Real(C::first(k)) * (bz[M + k] * pzi[ix + k * ps] - bz[M - k] * pzi[ix - k * ps]);
          dqz += Real(C::first(k)) * (mz[M + k] * vp - mz[M - k] * vm);
        } else {
          lapz += Real(C::second(k)) * (hm + hp);
        }
      }
      pxo[ix + off] = mx[ix] * (ax[ix] * pxi[ix + off] - dqx);
      zxo[ix + off] = ax[ix] * (g0 + zxi[ix + off]);
      if constexpr (ZIn) {
        pzo[ix] = az * pzi[ix] - dqz;
        zzo[ix] = az * (g0 + zzi[ix]);
      }
      out[ix] = Real(2) * l[ix] - out[ix] + c[ix] * (lapx + lapz - dbx - dbz);
    }
  }

  template <bool A, bool B, bool FS, class Tag>
  KOKKOS_INLINE_FUNCTION void run(Tag, int s, int iz, int x0, int x1) const {
    if constexpr (std::is_same_v<Tag, ForwardTag>) {
      if constexpr (!A && !B && !FS) forward_interior_run(s, iz, x0, x1);
      else if constexpr (!A && B && !FS) forward_zlayer_run(s, iz, x0, x1);
      else if constexpr (A && !FS) forward_xlayer_run<B>(s, iz, x0, x1);
      else
        for (int ix = x0; ix < x1; ++ix) forward_cell<A, B, FS>(s, iz, ix);
    } else {
      bool const zin = m_mz(iz + M) != Real(0);
      if constexpr (!A && !B && !FS) adjoint_interior_run(s, iz, x0, x1);
      else if constexpr (!A && B && !FS) {
        if (zin) adjoint_zlayer_run<true>(s, iz, x0, x1);
        else adjoint_zlayer_run<false>(s, iz, x0, x1);
      } else if constexpr (A && !FS) {
        if constexpr (B) {
          if (zin) adjoint_xlayer_run<true, true>(s, iz, x0, x1);
          else adjoint_xlayer_run<true, false>(s, iz, x0, x1);
        } else {
          adjoint_xlayer_run<false, false>(s, iz, x0, x1);
        }
      } else
        for (int ix = x0; ix < x1; ++ix) adjoint_cell<A, B, FS>(s, iz, ix);
    }
  }
  template <bool A, bool FS, class Tag>
  KOKKOS_INLINE_FUNCTION void run(Tag t, bool b, int s, int iz, int x0, int x1) const {
    if (b) run<A, true, FS>(t, s, iz, x0, x1);
    else run<A, false, FS>(t, s, iz, x0, x1);
  }
  template <class Tag>
  KOKKOS_INLINE_FUNCTION void run_row(Tag t, int s, int iz, int x_in0, int x_in1, bool zflag) const {
    // x runs: [0, x_in0) and [x_in1, NX) carry the x flag, [x_in0, x_in1) does not.
    if (m_free_surface && iz < M) {
      run<true, true>(t, zflag, s, iz, 0, x_in0);
      run<false, true>(t, zflag, s, iz, x_in0, x_in1);
      run<true, true>(t, zflag, s, iz, x_in1, m_NX);
    } else {
      run<true, false>(t, zflag, s, iz, 0, x_in0);
      run<false, false>(t, zflag, s, iz, x_in0, x_in1);
      run<true, false>(t, zflag, s, iz, x_in1, m_NX);
    }
  }

  KOKKOS_INLINE_FUNCTION bool z_in_layer(int iz) const { return iz < m_top || iz >= m_top + m_nz; }
  KOKKOS_INLINE_FUNCTION bool z_near_layer(int iz) const {
    return (m_top > 0 && iz < m_top + M) || iz >= m_top + m_nz - M;
  }

  KOKKOS_INLINE_FUNCTION void operator()(impl::RowTag<ForwardTag>, int r) const {
    int const s = r / m_NZ, iz = r % m_NZ;
    if (m_free_surface && iz == 0) return;
    run_row(ForwardTag{}, s, iz, m_w, m_w + m_nx, z_in_layer(iz));
  }
  KOKKOS_INLINE_FUNCTION void operator()(impl::RowTag<AdjointTag>, int r) const {
    int const s = r / m_NZ, iz = r % m_NZ;
    if (m_free_surface && iz == 0) return;
    run_row(AdjointTag{}, s, iz, m_w + M, m_w + m_nx - M, z_near_layer(iz));
  }

  // ------------------------------------------------------------------------------------------
  // Cell drivers (devices).
  // ------------------------------------------------------------------------------------------
  template <bool FS, class Tag>
  KOKKOS_INLINE_FUNCTION void cell(Tag, int s, int iz, int ix, bool xf, bool zf) const {
    if constexpr (std::is_same_v<Tag, ForwardTag>) {
      if (xf) {
        if (zf) forward_cell<true, true, FS>(s, iz, ix);
        else forward_cell<true, false, FS>(s, iz, ix);
      } else {
        if (zf) forward_cell<false, true, FS>(s, iz, ix);
        else forward_cell<false, false, FS>(s, iz, ix);
      }
    } else {
      if (xf) {
        if (zf) adjoint_cell<true, true, FS>(s, iz, ix);
        else adjoint_cell<true, false, FS>(s, iz, ix);
      } else {
        if (zf) adjoint_cell<false, true, FS>(s, iz, ix);
        else adjoint_cell<false, false, FS>(s, iz, ix);
      }
    }
  }
  KOKKOS_INLINE_FUNCTION void operator()(impl::CellTag<ForwardTag>, int s, int iz, int ix) const {
    if (m_free_surface && iz == 0) return;
    bool const xf = ix < m_w || ix >= m_w + m_nx, zf = z_in_layer(iz);
    if (m_free_surface && iz < M) cell<true>(ForwardTag{}, s, iz, ix, xf, zf);
    else cell<false>(ForwardTag{}, s, iz, ix, xf, zf);
  }
  KOKKOS_INLINE_FUNCTION void operator()(impl::CellTag<AdjointTag>, int s, int iz, int ix) const {
    if (m_free_surface && iz == 0) return;
    bool const xf = ix < m_w + M || ix >= m_w + m_nx - M, zf = z_near_layer(iz);
    if (m_free_surface && iz < M) cell<true>(AdjointTag{}, s, iz, ix, xf, zf);
    else cell<false>(AdjointTag{}, s, iz, ix, xf, zf);
  }
};

/// Launches a step functor over `n_shots` shots of the padded grid: rows on host backends,
/// cells (x fastest) on devices.
template <class Tag, class ExecSpace, class Functor>
void launch_step(ExecSpace const& space, char const* label, Functor const& f, int n_shots, int NZ, int NX) {
  if constexpr (impl::runs_by_rows<ExecSpace>) {
    (void)NX;
    impl::launch_host_rows<Tag>(space, label, f, n_shots * NZ);
  } else {
    using policy = Kokkos::MDRangePolicy<ExecSpace, Kokkos::Rank<3, Kokkos::Iterate::Right, Kokkos::Iterate::Right>,
                                         impl::CellTag<Tag>>;
    Kokkos::parallel_for(label, policy(space, {0, 0, 0}, {n_shots, NZ, NX}, {1, 4, 64}), f);
  }
}

/// Imaging and backward reconstruction on the model cells (the region without layer terms).
/// With u0 = u^n, u1 = u^{n+1} and lambda = lambda^{n+1}, per shot s and cell:
///   grad(s)  += lambda * L u0          (d u^{n+1} / d c = L u^n)
///   isrc(s)  += u0^2,  irec(s) += lambda^2
/// and, when reconstructing, u1 <- 2 u0 - u1 + c L u0 (= u^{n-1} before the source term).
/// Each shot has its own images, accumulated in double over the time steps in a fixed order, so
/// that a shot's image does not depend on the other shots of its batch; shots are summed
/// afterwards in a fixed order (GradientEngine::accumulate), whatever the split.
template <class Real, int Order, class MemorySpace>
struct AcousticImaging {
  static constexpr int M = Order / 2;
  using C = StencilCoefficients<Order>;
  using field3 = Kokkos::View<Real***, Kokkos::LayoutRight, MemorySpace>;
  using image = Kokkos::View<double***, Kokkos::LayoutRight, MemorySpace>;  // [shot][nz][nx]
  Kokkos::View<Real const***, Kokkos::LayoutRight, MemorySpace> m_u0, m_lambda;
  field3 m_u1;
  Kokkos::View<Real const**, Kokkos::LayoutRight, MemorySpace> m_c;
  image m_grad, m_isrc, m_irec;
  int m_nz, m_nx, m_top, m_w;
  bool m_free_surface, m_reconstruct;

  template <bool FS>
  KOKKOS_FORCEINLINE_FUNCTION void cell(int s, int iz, int ix, bool rebuild) const {
    int const hz = iz + m_top + M, hx = ix + m_w + M, pz = iz + m_top;
    Real const uc = m_u0(s, hz, hx);
    Real lap = Real(2 * C::second(0)) * uc;
    KSWEEP_UNROLL_TAPS
    for (int k = 1; k <= M; ++k) {
      Real up;
      if constexpr (FS) {
        up = pz - k >= 0 ? m_u0(s, hz - k, hx) : -m_u0(s, M + k - pz, hx);
      } else {
        up = m_u0(s, hz - k, hx);
      }
      lap += Real(C::second(k)) * (m_u0(s, hz, hx - k) + m_u0(s, hz, hx + k) + up + m_u0(s, hz + k, hx));
    }
    Real const l = m_lambda(s, hz, hx);
    m_grad(s, iz, ix) += static_cast<double>(l * lap);
    m_isrc(s, iz, ix) += static_cast<double>(uc * uc);
    m_irec(s, iz, ix) += static_cast<double>(l * l);
    if (rebuild) m_u1(s, hz, hx) = Real(2) * uc - m_u1(s, hz, hx) + m_c(hz, hx) * lap;
  }

  /// Row iz of shot s, as a vectorisable loop (host schedules); reconstructs when `rebuild`.
  KOKKOS_INLINE_FUNCTION void row(int s, int iz, bool rebuild) const {
    if (m_free_surface && iz == 0) return;  // pressure held at zero: no sensitivity
    if (m_free_surface && iz < M) {
      for (int ix = 0; ix < m_nx; ++ix) cell<true>(s, iz, ix, rebuild);
      return;
    }
    int const hz = iz + m_top + M, hx = m_w + M;
    std::ptrdiff_t const sz = static_cast<std::ptrdiff_t>(m_u0.stride(1));
    double* KOKKOS_RESTRICT g = &m_grad(s, iz, 0);
    double* KOKKOS_RESTRICT is = &m_isrc(s, iz, 0);
    double* KOKKOS_RESTRICT ir = &m_irec(s, iz, 0);
    Real const* KOKKOS_RESTRICT c = &m_c(hz, hx);
    Real const* KOKKOS_RESTRICT u0 = &m_u0(s, hz, hx);
    Real const* KOKKOS_RESTRICT l = &m_lambda(s, hz, hx);
    Real* KOKKOS_RESTRICT u1 = &m_u1(s, hz, hx);
#pragma omp simd
    for (int ix = 0; ix < m_nx; ++ix) {
      Real const uc = u0[ix];
      Real lap = Real(2 * C::second(0)) * uc;
      KSWEEP_UNROLL_TAPS
      for (int k = 1; k <= M; ++k)
        lap += Real(C::second(k)) * (u0[ix - k] + u0[ix + k] + u0[ix - k * sz] + u0[ix + k * sz]);
      g[ix] += static_cast<double>(l[ix] * lap);
      is[ix] += static_cast<double>(uc * uc);
      ir[ix] += static_cast<double>(l[ix] * l[ix]);
      if (rebuild) u1[ix] = Real(2) * uc - u1[ix] + c[ix] * lap;
    }
  }

  KOKKOS_INLINE_FUNCTION void operator()(impl::RowTag<void>, int r) const { row(r / m_nz, r % m_nz, m_reconstruct); }
  KOKKOS_INLINE_FUNCTION void operator()(impl::CellTag<void>, int r, int ix) const {
    int const s = r / m_nz, iz = r % m_nz;
    if (m_free_surface && iz == 0) return;
    if (m_free_surface && iz < M) cell<true>(s, iz, ix, m_reconstruct);
    else cell<false>(s, iz, ix, m_reconstruct);
  }
};

/// Launches a functor with RowTag<void>(row) / CellTag<void>(row, col) operators over a
/// rows x cols grid: rows on host backends, cells on devices.
template <class ExecSpace, class Functor>
void launch_cells(ExecSpace const& space, char const* label, Functor const& f, int rows, int cols) {
  if constexpr (impl::runs_by_rows<ExecSpace>) {
    (void)cols;
    impl::launch_host_rows<void>(space, label, f, rows);
  } else {
    using policy = Kokkos::MDRangePolicy<ExecSpace, Kokkos::Rank<2, Kokkos::Iterate::Right, Kokkos::Iterate::Right>,
                                         impl::CellTag<void>>;
    Kokkos::parallel_for(label, policy(space, {0, 0}, {rows, cols}, {4, 64}), f);
  }
}

/// Point injection: field(s, z, x) += scale * values(s, i, it) for every shot s and point i
/// (cells in padded coordinates including the halo offset). Atomic, so several points may
/// share a cell. `apply` is the body for one shot and point, for schedules that run shots
/// one by one.
template <class Real, class MemorySpace>
struct InjectPoints {
  Kokkos::View<Real***, Kokkos::LayoutRight, MemorySpace> m_field;
  Kokkos::View<Real const***, Kokkos::LayoutRight, MemorySpace> m_values;  // [shot][point][time] or [shot][time][point]
  Kokkos::View<int const**, Kokkos::LayoutRight, MemorySpace> m_z, m_x;    // [shot][point]
  int m_it, m_n_points;
  bool m_time_major;  // values indexed [shot][time][point]
  Real m_scale;
  using weight_view = Kokkos::View<Real const**, Kokkos::LayoutRight, MemorySpace>;
  weight_view m_weight;  // optional: values times weight(z, x) (c, for the adjoint's mu = c lambda)
  template <class Field>
  KOKKOS_INLINE_FUNCTION void apply(Field const& field, int s, int i, int it) const {
    Real const v = m_time_major ? m_values(s, it, i) : m_values(s, i, it);
    int const z = m_z(s, i), x = m_x(s, i);
    Real const w = m_weight.extent(0) > 0 ? m_weight(z, x) : Real(1);
    Kokkos::atomic_add(&field(s, z, x), m_scale * (w * v));
  }
  KOKKOS_INLINE_FUNCTION void operator()(int r) const { apply(m_field, r / m_n_points, r % m_n_points, m_it); }
};

/// Point sampling: out(s, it, i) or out(s, i, it) = field(s, z, x).
template <class Real, class MemorySpace>
struct SamplePoints {
  Kokkos::View<Real const***, Kokkos::LayoutRight, MemorySpace> m_field;
  Kokkos::View<Real***, Kokkos::LayoutRight, MemorySpace> m_out;
  Kokkos::View<int const**, Kokkos::LayoutRight, MemorySpace> m_z, m_x;
  int m_it, m_n_points;
  bool m_time_major;
  Kokkos::View<Real const**, Kokkos::LayoutRight, MemorySpace> m_weight;  // optional: samples divided by weight(z, x)
  template <class Field>
  KOKKOS_INLINE_FUNCTION void apply(Field const& field, int s, int i, int it) const {
    int const z = m_z(s, i), x = m_x(s, i);
    Real const v = m_weight.extent(0) > 0 ? field(s, z, x) / m_weight(z, x) : field(s, z, x);
    if (m_time_major) m_out(s, it, i) = v;
    else m_out(s, i, it) = v;
  }
  KOKKOS_INLINE_FUNCTION void operator()(int r) const { apply(m_field, r / m_n_points, r % m_n_points, m_it); }
};

/// Index-range functors fused into one launch: indices [0, n_first) run `first`, the rest run
/// `second` (shifted to start at 0). The two must touch disjoint memory, or only commute
/// (atomic adds).
template <class First, class Second>
struct Concat {
  First m_first;
  Second m_second;
  int m_n_first;
  KOKKOS_INLINE_FUNCTION void operator()(int r) const {
    if (r < m_n_first) m_first(r);
    else m_second(r - m_n_first);
  }
};

/// A functor that does nothing (an empty part of a Concat).
struct NoWork {
  KOKKOS_INLINE_FUNCTION void operator()(int) const {}
};

namespace impl {
/// The `shots` schedule on hosts: shot s runs body(s, n) for its steps n in [n0, n1), in
/// increasing order (or decreasing, when `reverse`), on one thread, under FlushDenormals.
template <class Body>
struct ShotSteps {
  Body m_body;
  int m_n0, m_n1;
  bool m_reverse, m_flush;
  void operator()(int s) const {
    FlushDenormals guard(m_flush);
    if (m_reverse) {
      for (int n = m_n1 - 1; n >= m_n0; --n) m_body(s, n);
    } else {
      for (int n = m_n0; n < m_n1; ++n) m_body(s, n);
    }
  }
};
}  // namespace impl

/// Launches the steps [n0, n1) of `n_shots` shots with the `shots` schedule: each thread takes
/// whole shots (dynamically, one at a time) and runs their steps back to back (host backends).
template <class ExecSpace, class Body>
void launch_shot_steps(ExecSpace const& space, char const* label, Body const& body, int n_shots, int n0, int n1,
                       bool reverse) {
  static_assert(impl::runs_by_rows<ExecSpace>, "the shots schedule runs on host backends");
  if (n_shots <= 0 || n1 <= n0) return;
  Kokkos::parallel_for(label,
                       Kokkos::RangePolicy<ExecSpace, Kokkos::Schedule<Kokkos::Dynamic>>(space, 0, n_shots).set_chunk_size(1),
                       impl::ShotSteps<Body>{body, n0, n1, reverse, flush_denormals()});
}

/// Launches `f` over [0, n) on `space` (nothing when n == 0).
template <class ExecSpace, class Functor>
void launch_points(ExecSpace const& space, char const* label, Functor const& f, int n) {
  if (n > 0) Kokkos::parallel_for(label, Kokkos::RangePolicy<ExecSpace>(space, 0, n), f);
}

}  // namespace ksweep::core
