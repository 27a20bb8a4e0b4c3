#pragma once
/// \file acoustic_kernels.hpp
/// The constant-density acoustic time step (2D and 3D) and its exact discrete adjoint, written
/// once for every Kokkos backend and dimension.
///
/// Discretisation (all on the padded grid; ~ marks quantities scaled by powers of dh so the
/// stencils carry only their dimensionless coefficients):
///   u^{n+1} = 2 u^n - u^{n-1} + c sum_a w_a T_a,     c = v^2 dt^2 / dh^2,  w_a = (dh / d_a)^2,
/// over the axes a (z, x in 2D; z, y, x in 3D; below written for x, the same for every axis),
/// d_a the cells' size along axis a (w_a = 1, exactly, on a grid of cells dh: ModelGrid),
/// and per axis (second-order CPML; the memories psi and zeta live in the layer and are zero
/// outside it, where a = b = 0)
///   Q_x    = Dxx u^n + Dx psi_x^{n-1}
///   psi_x^n  = a psi_x^{n-1} + b Dx u^n         (in the layer)
///   zeta_x^n = a zeta_x^{n-1} + b Q_x           (in the layer)
///   T_x    = Q_x + zeta_x^n = (1 + b) Q_x + a zeta_x^{n-1}.
/// Far from the layer T_x = Dxx u^n. The model cells within M of the layer (the stencil's
/// reach) have the term Dx psi_x^{n-1} too: their stencil reads the memories of the layer cells
/// next to them (forward_reach = M). Their own memories stay zero; their zeta slot holds that
/// term instead (E_x^n = Dx psi_x^{n-1}, the layer's part of T at a model cell), which the
/// gradient saves to image and rebuild those cells (GradientEngine, see layer_term_cells).
/// Dx, Dxx are the centred first and second differences of the order (unscaled), psi carries a
/// factor d_x and zeta a factor d_x^2 (so the memories do not see the weight; the zeta slot of a
/// model cell keeps Dx psi_x unweighted, and the gradient saves w_x Dx psi_x: SaveLayerTerms).
/// Outside the grid u = 0 (Dirichlet behind the layer); with a free surface, row 0 holds u = 0 and
/// rows above mirror it with a sign change (image method).
///
/// The adjoint kernel is the transpose of this linear map of the state (u^n, u^{n-1}, psi, zeta).
/// With g = c lambda^{n+1}, h = g + zetabar and w = g + b h (w = g outside the layer):
///   lambda^n   = 2 lambda^{n+1} - lambda^{n+2} + sum_a (Daa w_a - Da(b psibar_a))
/// The adjoint wavefield is stored as mu = c lambda (c > 0 on the grid, 0 in the halo), so that
/// g is the field itself and the step has the forward's shape:
///   mu^n = 2 mu^{n+1} - mu^{n+2} + c sum_a (Daa w_a - Da(b psibar_a)),
/// which saves a load and a multiply per stencil tap. Residuals enter as c r (InjectPoints with
/// the c weight) and the source gradient reads mu / c (SamplePoints with the c weight). With
/// weights, each axis' adjoint memories are kept divided by w_a (the axis' map is linear, so its
/// transpose applied to w_a g is w_a times the one applied to g): the axis terms are the ones
/// above, and sum_a enters as sum_a w_a (Daa w_a - Da(b psibar_a)).
///   psibar_x'  = mask (a psibar_x - Dx w_x)        (w of every cell the layer's psi reaches)
///   zetabar_x' = mask a h_x
/// (Dxx is symmetric, also with the image rows; Dx is antisymmetric.) The adjoint's layer terms
/// reach M cells from the layer, as before the forward's reach: a transposed stencil reaches
/// into the layer, and the layer's psibar reads w within M of it.

#include <ksweep/core/kernel_grid.hpp>
#include <ksweep/core/physics_step.hpp>
#include <ksweep/core/point_kernels.hpp>
#include <ksweep/core/sizes.hpp>
#include <ksweep/core/stencil.hpp>

#include <Kokkos_Core.hpp>

#include <algorithm>
#include <array>
#include <vector>

// nvcc's front end hands `GCC unroll` on to the host compiler but warns that it does not know it
// (#1675): silenced for this header only.
#if defined(__NVCC__)
#pragma nv_diagnostic push
#pragma nv_diag_suppress 1675
#endif

// The loops over stencil taps are unrolled completely before vectorisation: left as loops, GCC
// tries to vectorise the large layer runs along the taps (strided) and gives up on them. nvcc
// compiles a file twice: the device pass (__CUDA_ARCH__ defined) takes nvcc's pragma, the host
// pass GCC's, as a host-only build does.
#if defined(__CUDA_ARCH__) || defined(__clang__)
#define KSWEEP_UNROLL_TAPS _Pragma("unroll")
#elif defined(__GNUC__)
#define KSWEEP_UNROLL_TAPS _Pragma("GCC unroll 16")
#else
#define KSWEEP_UNROLL_TAPS
#endif

namespace ksweep::core {

/// The cell bodies of the acoustic operators, each written once for every schedule, backend
/// and dimension: forward step, adjoint step, and imaging with the backward reconstruction.
/// `Flags` selects the region (RegionFlags). Axis terms are summed from x (the last axis) to z.
template <class Real, int Order, int Dim>
struct AcousticCell {
  using real_type = Real;
  static constexpr int dim = Dim, M = Order / 2, X = Dim - 1;
  /// The seam (see PhysicsStep): halo radius of the fields, and how far from the layer a cell
  /// has layer terms (forward: M, the cells whose stencil reads the layer's psi; adjoint: M).
  static constexpr int R = M, forward_reach = M, adjoint_reach = M;
  /// No coefficients beyond c and the cell CPML profiles.
  template <class MemorySpace>
  struct extra {
    int m_unused[2] = {0, 0};  // 8 defined bytes (an empty member's byte, and padding, would not be)
  };
  using C = StencilCoefficients<Order>;
  using F = RegionFlags<Dim>;
  /// The host schedules' interior runs of a uniform grid take Flags | F::uniform (see weigh).
  static constexpr bool uniform_runs = true;
  using run_type = CellRun<Real, Dim>;
  using image_run = ImageRun<Real, Dim>;

  // Strides of axis A in the fields and in its layer memories: 1 along x, a compile-time constant
  // (with 2M + 2 runtime strides per axis, the x taps alone would take 2M address registers).
  template <int A>
  KOKKOS_FORCEINLINE_FUNCTION static std::ptrdiff_t field_stride(run_type const& r) {
    if constexpr (A == X) {
      (void)r;
      return 1;
    } else {
      return r.su[A];
    }
  }
  template <int A>
  KOKKOS_FORCEINLINE_FUNCTION static std::ptrdiff_t strip_stride(run_type const& r) {
    if constexpr (A == X) {
      (void)r;
      return 1;
    } else {
      return r.ps[A];
    }
  }

  // x times the axis' weight; on a uniform grid's interior runs (F::uniform) x itself, the same
  // bits as a multiply by 1 without its cost.
  template <int Flags>
  KOKKOS_FORCEINLINE_FUNCTION static Real weigh(Real w, Real x) {
    if constexpr ((Flags & F::uniform) != 0) {
      (void)w;
      return x;
    } else {
      return w * x;
    }
  }

  // A CPML profile of axis A at tap k of the cell at ix.
  template <int A>
  KOKKOS_FORCEINLINE_FUNCTION static Real coef(Real const* p, int ix, int k) {
    if constexpr (A == X) {
      return p[ix + k];
    } else {
      (void)ix;
      return p[k];
    }
  }

  // The field f at k cells from ix along axis A (k < 0: towards the origin); on axis 0 with a
  // free surface, rows above row 0 mirror the rows below it with a sign change.
  template <int A, bool FS>
  KOKKOS_FORCEINLINE_FUNCTION static Real at(Real const* f, std::ptrdiff_t s, int z, int ix, int k) {
    if constexpr (FS && A == 0) {
      if (z + k < 0) return -f[ix + (-k - 2 * z) * s];
    } else {
      (void)z;
    }
    return f[ix + k * s];
  }

  // The centred second difference of f along axis A (unscaled).
  template <int A, bool FS>
  KOKKOS_FORCEINLINE_FUNCTION static Real second_diff(Real const* f, std::ptrdiff_t s, int z, int ix, Real f0) {
    Real d = Real(C::second(0)) * f0;
    KSWEEP_UNROLL_TAPS
    for (int k = 1; k <= M; ++k) d += Real(C::second(k)) * (at<A, FS>(f, s, z, ix, -k) + f[ix + k * s]);
    return d;
  }

  // ---------------------------------------------------------------------------------------------
  // Forward: Dxx u (outside the layer) or Q (in it) of axis A, returned; in the layer also
  // zeta^n (T_a = Q + zeta) and the new psi and zeta of that axis.
  // ---------------------------------------------------------------------------------------------
  // Outside the layer weighted by the axis' w; in it, Q and zeta unweighted (forward weighs them).
  template <int A, bool Layer, bool FS, int Flags = 0>
  KOKKOS_FORCEINLINE_FUNCTION static Real forward_axis(run_type const& r, int ix, Real u0, Real& zeta_out) {
    std::ptrdiff_t const s = field_stride<A>(r);
    Real const d2 = second_diff<A, FS>(r.u, s, r.z, ix, u0);
    if constexpr (!Layer) {
      return weigh<Flags>(r.w[A], d2);
    } else {
      // The free-surface rows never reach the layer (check_grid: nz >= 2M + 2).
      std::ptrdiff_t const ps = strip_stride<A>(r), i = ix + r.off[A];
      Real const* pin = r.pin[A];
      Real du = 0, dpsi = 0;
      KSWEEP_UNROLL_TAPS
      for (int k = 1; k <= M; ++k) {
        Real const dk = Real(C::first(k));
        du += dk * (r.u[ix + k * s] - r.u[ix - k * s]);
        dpsi += dk * (pin[i + k * ps] - pin[i - k * ps]);
      }
      Real const q = d2 + dpsi, a = coef<A>(r.pa[A], ix, 0), b = coef<A>(r.pb[A], ix, 0);
      r.pout[A][i] = a * pin[i] + b * du;  // 0 outside the layer (a = b = 0, pin = 0)
      Real const zeta = a * r.zin[A][i] + b * q;
      // Outside the layer (mask 0) zeta is 0; the slot keeps the layer's term Dx psi instead,
      // for the gradient (see the file comment; SaveLayerTerms weighs it).
      r.zout[A][i] = coef<A>(r.pm[A], ix, 0) != Real(0) ? zeta : dpsi;
      zeta_out = zeta;
      return q;
    }
  }

  /// u^{n+1} = 2 u^n - u^{n-1} + c sum_a w_a T_a at cell ix of the run.
  template <int Flags>
  KOKKOS_FORCEINLINE_FUNCTION static void forward(run_type const& r, int ix) {
    Real const u0 = r.u[ix];
    Real zeta[Dim] = {};
    Real t = forward_axis<X, F::layer(Flags, X), false, Flags>(r, ix, u0, zeta[X]);
    if constexpr (F::layer(Flags, X)) t = r.w[X] * (t + zeta[X]);
    if constexpr (Dim == 3) {
      Real const ty = forward_axis<1, F::layer(Flags, 1), false, Flags>(r, ix, u0, zeta[1]);
      t += F::layer(Flags, 1) ? r.w[1] * (ty + zeta[1]) : ty;
    }
    Real const qz = forward_axis<0, F::layer(Flags, 0), F::surface(Flags), Flags>(r, ix, u0, zeta[0]);
    // The order of the sums, fixed (every schedule and backend adds in this order): in rows with
    // z layer terms alone, (T_x + Q_z) + zeta_z; elsewhere T_x + T_z with T_z = Q_z + zeta_z
    // (each axis' term weighted: w T, or w Q and w zeta).
    if constexpr (F::layer(Flags, 0) && !F::layer(Flags, X)) t = (t + r.w[0] * qz) + r.w[0] * zeta[0];
    else if constexpr (F::layer(Flags, 0)) t += r.w[0] * (qz + zeta[0]);
    else t += qz;
    r.out[ix] = Real(2) * u0 - r.out[ix] + r.c[ix] * t;
  }

  // ---------------------------------------------------------------------------------------------
  // Adjoint (the field is mu = c lambda, so g = mu): the transposed second difference of axis A
  // (returned), the layer divergence term db, and, in the layer, psibar and zetabar. Cells near
  // but outside the layer (mask 0) write zeros, so the strips' padding stays zero.
  // ---------------------------------------------------------------------------------------------
  template <int A>
  KOKKOS_FORCEINLINE_FUNCTION static Real w_at(run_type const& r, int ix, std::ptrdiff_t i, int k) {
    Real const g = r.u[ix + k * field_stride<A>(r)];
    return g + coef<A>(r.pb[A], ix, k) * (g + r.zin[A][i + k * strip_stride<A>(r)]);
  }
  // The two terms weighted by the axis' w (its memories are kept divided by w: file comment).
  template <int A, bool Layer, bool FS, int Flags = 0>
  KOKKOS_FORCEINLINE_FUNCTION static Real adjoint_axis(run_type const& r, int ix, Real g0, Real& db) {
    if constexpr (!Layer) {
      return weigh<Flags>(r.w[A], second_diff<A, FS>(r.u, field_stride<A>(r), r.z, ix, g0));
    } else {
      std::ptrdiff_t const ps = strip_stride<A>(r), i = ix + r.off[A];
      Real const* pin = r.pin[A];
      Real lap = Real(C::second(0)) * w_at<A>(r, ix, i, 0), dq = 0;
      KSWEEP_UNROLL_TAPS
      for (int k = 1; k <= M; ++k) {
        Real const wm = w_at<A>(r, ix, i, -k), wp = w_at<A>(r, ix, i, k);
        lap += Real(C::second(k)) * (wm + wp);
        Real const dk = Real(C::first(k));
        db += dk * (coef<A>(r.pb[A], ix, k) * pin[i + k * ps] - coef<A>(r.pb[A], ix, -k) * pin[i - k * ps]);
        dq += dk * (wp - wm);
      }
      Real const m0 = coef<A>(r.pm[A], ix, 0), a0 = coef<A>(r.pa[A], ix, 0);
      r.pout[A][i] = m0 * (a0 * pin[i] - dq);
      r.zout[A][i] = m0 * (a0 * (g0 + r.zin[A][i]));
      db = r.w[A] * db;
      return r.w[A] * lap;
    }
  }

  /// mu^n = 2 mu^{n+1} - mu^{n+2} + c (sum_a w_a lap_a - sum_a w_a db_a) at cell ix of the run.
  template <int Flags>
  KOKKOS_FORCEINLINE_FUNCTION static void adjoint(run_type const& r, int ix) {
    Real const g0 = r.u[ix];
    Real db[Dim] = {};
    Real t = adjoint_axis<X, F::layer(Flags, X), false, Flags>(r, ix, g0, db[X]);
    if constexpr (Dim == 3) t += adjoint_axis<1, F::layer(Flags, 1), false, Flags>(r, ix, g0, db[1]);
    t += adjoint_axis<0, F::layer(Flags, 0), F::surface(Flags), Flags>(r, ix, g0, db[0]);
    if constexpr (F::layer(Flags, X)) t -= db[X];
    if constexpr (Dim == 3 && F::layer(Flags, 1)) t -= db[1];
    if constexpr (F::layer(Flags, 0)) t -= db[0];
    r.out[ix] = Real(2) * g0 - r.out[ix] + r.c[ix] * t;
  }

  template <class Tag, int Flags>
  KOKKOS_FORCEINLINE_FUNCTION static void step(run_type const& r, int ix) {
    if constexpr (std::is_same_v<Tag, ForwardTag>) forward<Flags>(r, ix);
    else adjoint<Flags>(r, ix);
  }

  /// Nothing to bind beyond the common run.
  template <class Extra>
  KOKKOS_FORCEINLINE_FUNCTION static void bind_extra(run_type&, Extra const&, int, int, int, int) {}

  // ---------------------------------------------------------------------------------------------
  // Imaging on the model cells (no layer terms), with u0 = u^n, u1 = u^{n+1}, lambda = mu^{n+1}:
  //   grad += lambda L u0,  isrc += u0^2,  irec += lambda^2 (or u0 lambda: ImagingFrame::m_xcorr)
  // (the last two with Illum only), and, when rebuilding, u1 <- 2 u0 - u1 + c L u0 (u^{n-1}
  // before the source term).
  // ---------------------------------------------------------------------------------------------
  // L = sum_a w_a Daa, each tap weighted by its axis' w (w0: the centre's coefficient times the
  // weights' sum), so that a uniform grid (every w 1) adds the taps as it always has.
  // (Uniform: a uniform grid's interior rows on the host schedules, without the multiplies by 1.)
  template <bool FS, bool Uniform = false, bool Illum = true>
  KOKKOS_FORCEINLINE_FUNCTION static void image(image_run const& r, int ix, bool rebuild) {
    constexpr int W = Uniform ? F::uniform : 0;
    Real const uc = r.u0[ix];
    Real lap = r.w0 * uc;
    Real const wx = r.w[X], wz = r.w[0];
    KSWEEP_UNROLL_TAPS
    for (int k = 1; k <= M; ++k) {
      Real t = weigh<W>(wx, r.u0[ix - k]) + weigh<W>(wx, r.u0[ix + k]);
      if constexpr (Dim == 3) {
        t += weigh<W>(r.w[1], r.u0[ix - k * r.su[1]]);
        t += weigh<W>(r.w[1], r.u0[ix + k * r.su[1]]);
      }
      t += weigh<W>(wz, at<0, FS>(r.u0, r.su[0], r.z, ix, -k));
      t += weigh<W>(wz, r.u0[ix + k * r.su[0]]);
      lap += Real(C::second(k)) * t;
    }
    Real const l = r.lambda[ix];
    r.grad[ix] += static_cast<double>(l * lap);
    if constexpr (Illum) {
      r.isrc[ix] += static_cast<double>(uc * uc);
      r.irec[ix] += static_cast<double>((r.xcorr ? uc : l) * l);
    }
    if (rebuild) r.u1[ix] = Real(2) * uc - r.u1[ix] + r.c[ix] * lap;
  }
};

/// The constant-density acoustic step (see PhysicsStep).
template <class Real, int Order, class MemorySpace, int Dimension = 2>
using AcousticStep = PhysicsStep<AcousticCell<Real, Order, Dimension>, MemorySpace>;

/// What constant density adds to the propagator's set-up (Physics::coefficients, physics.hpp):
/// nothing beyond c and the cell profiles, which the Propagator holds for every physics.
template <class Real, int Order, class MemorySpace, int Dim>
struct AcousticCoefficients {
  /// The damping starts at the layer's first cell.
  static constexpr double profile_inset = 0.0;
  /// c = v^2 dt^2 / dh^2 is built on the device from a device model (Propagator::set_velocity),
  /// so that an inversion's model never leaves the device.
  static constexpr bool on_device = true;
  /// Nothing beyond the propagator's c (the memory estimate's items).
  static std::vector<CoefficientMemory> memory_items(Layout const&, std::size_t) { return {}; }
  /// Any layer, a reflecting face (0) and domain cuts included.
  static void check_layer(PmlConfig const&) {}
  template <class Space>
  void build_profiles(Space const&, Layout const&, ModelGrid const&, double, double, PmlConfig const&) {}
  template <class Extra>
  void bind(Extra&) const {}
  /// No parameter after vp: no images to bind, no chain rule beyond vp's.
  template <class Imaging, class ShotImages>
  void bind_imaging(Imaging&, ShotImages const*) const {}
  struct Chain {
    KOKKOS_INLINE_FUNCTION void operator()(int, int, int, double) const {}
  };
  template <class ShotImages>
  Chain chain(ShotImages const*) const {
    return {};
  }
};

/// Imaging and backward reconstruction on the model cells (AcousticCell::image) of a batch.
/// Each shot has its own images, accumulated in double over the time steps in a fixed order, so
/// that a shot's image does not depend on the other shots of its batch; shots are summed
/// afterwards in a fixed order (GradientEngine::accumulate), whatever the split.
template <class Real, int Order, class MemorySpace, int Dimension = 2>
struct AcousticImaging : ImagingFrame<Real, MemorySpace, Dimension> {
  static constexpr int Dim = Dimension, M = Order / 2;
  using body = AcousticCell<Real, Order, Dim>;
  using C = typename body::C;
  using frame = ImagingFrame<Real, MemorySpace, Dimension>;
  KSWEEP_IMAGING_FRAME_MEMBERS

  KOKKOS_INLINE_FUNCTION typename body::image_run make_run(int s, int mr) const {
    typename body::image_run r;
    int const fr = m_rows.model_field(mr), hx = m_left + M;
    r.u0 = &m_u0(s, fr, hx);
    r.lambda = &m_lambda(s, fr, hx);
    r.u1 = &m_u1(s, fr, hx);
    r.c = &m_c(fr, hx);
    r.grad = &m_grad(s, mr, 0);
    r.isrc = &m_isrc(s, mr, 0);
    r.irec = &m_irec(s, mr, 0);
    r.xcorr = this->m_xcorr;
    std::ptrdiff_t const row = static_cast<std::ptrdiff_t>(m_u0.stride(1));
    r.su[0] = row * m_rows.z_rows();
    if constexpr (Dim == 3) r.su[1] = row;
    r.su[Dim - 1] = 1;
    r.z = (Dim == 3 ? mr / m_rows.ny : mr) + m_rows.top;
    for (int a = 0; a < Dim; ++a) r.w[a] = m_w[a];
    r.w0 = static_cast<Real>(C::second(0) * m_wsum);
    return r;
  }
  // Free-surface rows: 1 .. M-1 (row 0 holds zero pressure: no sensitivity, skipped).
  KOKKOS_INLINE_FUNCTION bool surface_row(int iz) const { return m_free_surface && iz < M; }

  /// Model row mr of shot s, as one vectorisable loop (host schedules); rebuilds when `rebuild`.
  KOKKOS_INLINE_FUNCTION void row(int s, int mr, bool rebuild) const {
    if (m_illum) row_as<true>(s, mr, rebuild);
    else row_as<false>(s, mr, rebuild);
  }
  template <bool Illum>
  KOKKOS_INLINE_FUNCTION void row_as(int s, int mr, bool rebuild) const {
    int const iz = depth(mr);
    if (m_free_surface && iz == 0) return;
    auto const r = make_run(s, mr);
    if (surface_row(iz)) {
      for (int ix = 0; ix < m_nx; ++ix) body::template image<true, false, Illum>(r, ix, rebuild);
      return;
    }
    if (m_uniform) {
#pragma omp simd
      for (int ix = 0; ix < m_nx; ++ix) body::template image<false, true, Illum>(r, ix, rebuild);
      return;
    }
#pragma omp simd
    for (int ix = 0; ix < m_nx; ++ix) body::template image<false, false, Illum>(r, ix, rebuild);
  }

  KOKKOS_INLINE_FUNCTION void operator()(impl::RowTag<void>, int r) const {
    int const n = rows();
    row(r / n, r % n, m_reconstruct);
  }
  KOKKOS_INLINE_FUNCTION void operator()(impl::CellTag<void>, int r, int ix) const {
    int const n = rows(), s = r / n, mr = r % n, iz = depth(mr);
    if (m_free_surface && iz == 0) return;
    auto const run = make_run(s, mr);
    bool const fs = surface_row(iz);
    if (m_illum) {
      if (fs) body::template image<true, false, true>(run, ix, m_reconstruct);
      else body::template image<false, false, true>(run, ix, m_reconstruct);
    } else {
      if (fs) body::template image<true, false, false>(run, ix, m_reconstruct);
      else body::template image<false, false, false>(run, ix, m_reconstruct);
    }
  }
};

}  // namespace ksweep::core

#if defined(__NVCC__)
#pragma nv_diagnostic pop
#endif
