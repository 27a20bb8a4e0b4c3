#pragma once
/// \file acoustic_vd.hpp
/// Variable-density acoustics (parameters vp and rho): the cell bodies of the time step and its
/// exact discrete adjoint, for PhysicsStep (every schedule, backend and dimension).
///
/// Discretisation: the second-order pressure form with staggered first derivatives and averaged
/// buoyancy,
///   u^{n+1} = 2 u^n - u^{n-1} + c sum_a T_a,     c = rho v^2 dt^2 / dh^2,
/// and per axis a (written for x), outside the layer T_x = D- (bb D+ u) with
///   (D+ u)_j = sum_k s_k (u_{j+k} - u_{j-k+1})      at the half-point j + 1/2,
///   (D- F)_i = sum_k s_k (F_{i+k-1} - F_{i-k})      at the cell i (D- = -(D+)^T),
///   bb_j = (1/rho_j + 1/rho_{j+1}) / 2               (buoyancy averaged onto the half-point),
/// s_k the staggered-grid coefficients of the order (k = 1..M). On cells of their own size per
/// axis, bb holds w_a bb (w_a = (dh / d_a)^2, ModelGrid::weight; exactly bb where d_a = dh): the
/// step, its adjoint and the reconstruction see the weight through bb alone, the density image
/// multiplies each axis' d/dbb by w_a. The stencil of a cell reaches
/// R = 2M - 1 cells along each axis: the fields' halo. Inside the absorbing layer (second-order
/// CPML on both derivatives; profiles at the half-points for the first, at the cells for the
/// second):
///   P_j = (D+ u)_j,  psi_j^n = ah_j psi_j^{n-1} + bh_j P_j,  F_j = bb_j (P_j + psi_j^n),
///   d_i = (D- F)_i,  zeta_i^n = a_i zeta_i^{n-1} + b_i d_i,  T_i = d_i + zeta_i^n.
/// psi of half-point j is stored at cell j (every cell computes the psi of the half-points its
/// stencil reads, cell j alone writes it). The damping starts M + 1/2 cells into the layer (both
/// profiles; cpml_profile's `inset`), so that no stencil that reaches a model cell or one of its
/// half-points reads a layer memory or a damped coefficient: as with constant density, the layer
/// terms live in the layer cells alone (forward_reach 0), the model cells' step is D- (bb D+ u)
/// alone, which the gradient's backward reconstruction and imaging use, the adjoint of a flux at
/// a half-point of a model cell is -(D+ mu) there, and the ring that boundary saving keeps is R
/// cells of the layer. With constant rho, c bb = v^2 dt^2
/// / dh^2 (to round-off) and the operator is the staggered Laplacian D- D+, a different stencil of the same order as
/// the constant-density one: the two agree to the discretisation error, not the bit. With a free surface the pressure
/// is odd about row 0 (image rows) and bb even about it (the halo rows above row 0 hold the mirrored bb).
///
/// Adjoint (the transpose of the step's linear map of (u^n, u^{n-1}, psi, zeta)), on the field
/// mu = c lambda as for constant density, with g = mu, per axis:
///   w_i = g_i + b_i (g_i + zetabar_i)              (w = g outside the layer)
///   Fbar_j = -(D+ w)_j,  Pbar_j = bb_j (1 + bh_j) Fbar_j + bh_j psibar_j,
///   T_i = -(D- Pbar)_i,  psibar_j' = ah_j (bb_j Fbar_j + psibar_j),  zetabar_i' = a_i (g_i + zetabar_i),
///   mu^n = 2 mu^{n+1} - mu^{n+2} + c sum_a T_a.
/// Outside the layer T = D- (bb D+ mu): the forward operator, operation for operation.

#include <ksweep/base/error.hpp>
#include <ksweep/core/acoustic_kernels.hpp>
#include <ksweep/core/cpml.hpp>
#include <ksweep/core/geometry.hpp>
#include <ksweep/core/sizes.hpp>
#include <ksweep/core/stencil.hpp>

#include <Kokkos_Core.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <string>
#include <vector>

// nvcc: `GCC unroll` (KSWEEP_UNROLL_TAPS on the host pass), as in acoustic_kernels.hpp.
#if defined(__NVCC__)
#pragma nv_diagnostic push
#pragma nv_diag_suppress 1675
#endif

namespace ksweep::core {

/// Coefficients of the staggered first derivative of spatial order `Order` (2M = Order):
/// du/dx at i + 1/2 ~ sum_k s[k] (u_{i+k} - u_{i-k+1}) / h, k = 1..M (Fornberg 1988).
template <int Order>
struct StaggeredCoefficients {
  static_assert(Order == 2 || Order == 4 || Order == 6 || Order == 8,
                "ksweep::core::StaggeredCoefficients: Order must be 2, 4, 6 or 8");
  static constexpr int radius = Order / 2;
  KOKKOS_INLINE_FUNCTION static constexpr double first(int k) {
    if constexpr (Order == 2) {
      constexpr double c[] = {0.0, 1.0};
      return c[k];
    } else if constexpr (Order == 4) {
      constexpr double c[] = {0.0, 9.0 / 8.0, -1.0 / 24.0};
      return c[k];
    } else if constexpr (Order == 6) {
      constexpr double c[] = {0.0, 75.0 / 64.0, -25.0 / 384.0, 3.0 / 640.0};
      return c[k];
    } else {
      constexpr double c[] = {0.0, 1225.0 / 1024.0, -245.0 / 3072.0, 49.0 / 5120.0, -5.0 / 7168.0};
      return c[k];
    }
  }
  /// |sum_k 2 s_k (-1)^(k+1)|^2: the largest eigenvalue of -D- D+ (the Nyquist symbol).
  static constexpr double nyquist_symbol() {
    double s = 0;
    for (int k = 1; k <= radius; ++k) s += 2.0 * first(k) * (k % 2 ? 1.0 : -1.0);
    return s * s;
  }
};

/// The variable-density run: the common run (CellRun) and, per axis, the averaged buoyancy of
/// the cell's half-point (a field like c: bb[a][ix + k su[a]] is the half-point k cells on) and
/// the half-point CPML profiles (indexed as the cell profiles pa, pb).
template <class Real, int Dim>
struct VdRun : CellRun<Real, Dim> {
  Real const* bb[Dim] = {};
  Real const* ha[Dim] = {};
  Real const* hb[Dim] = {};
};

/// The cell bodies of variable-density acoustics (see the file comment).
template <class Real, int Order, int Dim>
struct AcousticVdCell {
  using real_type = Real;
  static constexpr int dim = Dim, M = Order / 2, X = Dim - 1;
  static constexpr int R = 2 * M - 1, forward_reach = 0, adjoint_reach = R;
  using S = StaggeredCoefficients<Order>;
  using F = RegionFlags<Dim>;
  using run_type = VdRun<Real, Dim>;
  using base = AcousticCell<Real, Order, Dim>;  // the shared access helpers
  /// The axes' weights live in bb: no interior runs without them (PhysicsStep::run).
  static constexpr bool uniform_runs = false;

  /// The averaged buoyancy per axis ([field row][NX + 2R], like c) and the half-point CPML
  /// profiles per axis ([N + 2R], like the cell profiles).
  template <class MemorySpace>
  struct extra {
    Kokkos::View<Real const**, Kokkos::LayoutRight, MemorySpace> bb[Dim];
    Kokkos::View<Real const*, Kokkos::LayoutRight, MemorySpace> ha[Dim], hb[Dim];
  };

  template <class Extra>
  KOKKOS_FORCEINLINE_FUNCTION static void bind_extra(run_type& r, Extra const& e, int fr, int iz, int iy, int f) {
    for (int a = 0; a < Dim; ++a) r.bb[a] = &e.bb[a](fr, R);
    if (F::layer(f, 0)) {
      r.ha[0] = &e.ha[0](iz + R);
      r.hb[0] = &e.hb[0](iz + R);
    }
    if constexpr (Dim == 3) {
      if (F::layer(f, 1)) {
        r.ha[1] = &e.ha[1](iy + R);
        r.hb[1] = &e.hb[1](iy + R);
      }
    } else {
      (void)iy;
    }
    if (F::layer(f, X)) {
      r.ha[X] = &e.ha[X](R);
      r.hb[X] = &e.hb[X](R);
    }
  }

  template <int A, bool FS>
  KOKKOS_FORCEINLINE_FUNCTION static Real at(Real const* f, std::ptrdiff_t s, int z, int ix, int k) {
    return base::template at<A, FS>(f, s, z, ix, k);
  }

  // The weight of the half-point q (j = i + q, q in [-M, M)) in (D- F)_i.
  KOKKOS_FORCEINLINE_FUNCTION static constexpr double div_weight(int q) {
    return q >= 0 ? S::first(q + 1) : -S::first(-q);
  }

  // ---------------------------------------------------------------------------------------------
  // Forward: T_a of axis A at cell ix; in the layer also psi of the cell's half-point and zeta.
  // ---------------------------------------------------------------------------------------------
  template <int A, bool Layer, bool FS>
  KOKKOS_FORCEINLINE_FUNCTION static Real forward_axis(run_type const& r, int ix) {
    std::ptrdiff_t const s = base::template field_stride<A>(r);
    Real const* bb = r.bb[A];
    Real d = 0;
    KSWEEP_UNROLL_TAPS
    for (int q = -M; q < M; ++q) {
      Real p = 0;
      KSWEEP_UNROLL_TAPS
      for (int k = 1; k <= M; ++k)
        p += Real(S::first(k)) * (at<A, FS>(r.u, s, r.z, ix, q + k) - at<A, FS>(r.u, s, r.z, ix, q - k + 1));
      Real f;
      if constexpr (Layer) {
        std::ptrdiff_t const ps = base::template strip_stride<A>(r), i = ix + r.off[A];
        Real const psi =
            base::template coef<A>(r.ha[A], ix, q) * r.pin[A][i + q * ps] + base::template coef<A>(r.hb[A], ix, q) * p;
        if (q == 0) r.pout[A][i] = psi;
        f = bb[ix + q * s] * (p + psi);
      } else {
        f = bb[ix + q * s] * p;
      }
      d += Real(div_weight(q)) * f;
    }
    if constexpr (Layer) {
      std::ptrdiff_t const i = ix + r.off[A];
      Real const zeta =
          base::template coef<A>(r.pa[A], ix, 0) * r.zin[A][i] + base::template coef<A>(r.pb[A], ix, 0) * d;
      r.zout[A][i] = zeta;
      return d + zeta;
    } else {
      return d;
    }
  }

  /// u^{n+1} = 2 u^n - u^{n-1} + c sum_a T_a at cell ix of the run (axes summed x, (y,) z).
  template <int Flags>
  KOKKOS_FORCEINLINE_FUNCTION static void forward(run_type const& r, int ix) {
    Real t = forward_axis<X, F::layer(Flags, X), false>(r, ix);
    if constexpr (Dim == 3) t += forward_axis<1, F::layer(Flags, 1), false>(r, ix);
    t += forward_axis<0, F::layer(Flags, 0), F::surface(Flags)>(r, ix);
    r.out[ix] = Real(2) * r.u[ix] - r.out[ix] + r.c[ix] * t;
  }

  // ---------------------------------------------------------------------------------------------
  // Adjoint: w = dbar at k cells from ix along axis A (g = mu; in the layer g + b (g + zetabar)).
  // ---------------------------------------------------------------------------------------------
  template <int A, bool Layer, bool FS>
  KOKKOS_FORCEINLINE_FUNCTION static Real w_at(run_type const& r, int ix, int k) {
    Real const g = at<A, FS>(r.u, base::template field_stride<A>(r), r.z, ix, k);
    if constexpr (Layer) {
      std::ptrdiff_t const i = ix + r.off[A] + k * base::template strip_stride<A>(r);
      return g + base::template coef<A>(r.pb[A], ix, k) * (g + r.zin[A][i]);
    } else {
      return g;
    }
  }

  template <int A, bool Layer, bool FS>
  KOKKOS_FORCEINLINE_FUNCTION static Real adjoint_axis(run_type const& r, int ix, Real g0) {
    std::ptrdiff_t const s = base::template field_stride<A>(r);
    Real const* bb = r.bb[A];
    Real t = 0;
    KSWEEP_UNROLL_TAPS
    for (int q = -M; q < M; ++q) {
      Real dw = 0;
      KSWEEP_UNROLL_TAPS
      for (int k = 1; k <= M; ++k)
        dw += Real(S::first(k)) * (w_at<A, Layer, FS>(r, ix, q + k) - w_at<A, Layer, FS>(r, ix, q - k + 1));
      Real const fbar = -dw;
      Real pbar;
      if constexpr (Layer) {
        std::ptrdiff_t const ps = base::template strip_stride<A>(r), i = ix + r.off[A];
        Real const beta = base::template coef<A>(r.hb[A], ix, q), psibar = r.pin[A][i + q * ps];
        Real const bf = bb[ix + q * s] * fbar;
        pbar = (bf + beta * bf) + beta * psibar;
        if (q == 0) r.pout[A][i] = base::template coef<A>(r.ha[A], ix, 0) * (bf + psibar);
      } else {
        pbar = bb[ix + q * s] * fbar;
      }
      t += Real(-div_weight(q)) * pbar;
    }
    if constexpr (Layer) {
      std::ptrdiff_t const i = ix + r.off[A];
      r.zout[A][i] = base::template coef<A>(r.pa[A], ix, 0) * (g0 + r.zin[A][i]);
    } else {
      (void)g0;
    }
    return t;
  }

  /// mu^n = 2 mu^{n+1} - mu^{n+2} + c sum_a T_a at cell ix of the run.
  template <int Flags>
  KOKKOS_FORCEINLINE_FUNCTION static void adjoint(run_type const& r, int ix) {
    Real const g0 = r.u[ix];
    Real t = adjoint_axis<X, F::layer(Flags, X), false>(r, ix, g0);
    if constexpr (Dim == 3) t += adjoint_axis<1, F::layer(Flags, 1), false>(r, ix, g0);
    t += adjoint_axis<0, F::layer(Flags, 0), F::surface(Flags)>(r, ix, g0);
    r.out[ix] = Real(2) * g0 - r.out[ix] + r.c[ix] * t;
  }

  template <class Tag, int Flags>
  KOKKOS_FORCEINLINE_FUNCTION static void step(run_type const& r, int ix) {
    if constexpr (std::is_same_v<Tag, ForwardTag>) forward<Flags>(r, ix);
    else adjoint<Flags>(r, ix);
  }

  // ---------------------------------------------------------------------------------------------
  // Imaging on the model cells (no layer terms there), with u0 = u^n, u1 = u^{n+1}, mu = mu^{n+1}:
  //   grad += mu T(u0)                       (d/dc: sum lambda T; scaled by the engine)
  //   grho += sum_a G_a,i + G_a,i-1,  G_j = -(D+ mu~)_j (D+ u0)_j   (d/dbb_j, the half-points of
  //           the cell; mu~ is mu with zeros above row 0, u0 odd about it; with a free surface
  //           bb_{-1-j} = bb_j adds the mirrored half-point's G to bb_j's)
  //   isrc += u0^2, irec += mu^2 (or u0 mu: ImagingFrame::m_xcorr; both with Illum only), and when rebuilding
  //   u1 <- 2 u0 - u1 + c T(u0) (the
  //   forward step of the cell, operation for operation). Row 0 under a free surface holds u = 0: its density is still
  //   seen through bb_0, the rest is skipped.
  // ---------------------------------------------------------------------------------------------
  struct image_run {
    run_type fw;  // u = u0 with the cell's bb, su and z: the forward step's view of the cell
    Real const* lambda = nullptr;
    Real* u1 = nullptr;
    double* grad = nullptr;
    double* grho = nullptr;
    double* isrc = nullptr;
    double* irec = nullptr;
    bool xcorr = false;
  };

  template <int A, bool Mirror>
  KOKKOS_FORCEINLINE_FUNCTION static Real dplus(Real const* f, std::ptrdiff_t s, int z, int ix, int q) {
    Real p = 0;
    KSWEEP_UNROLL_TAPS
    for (int k = 1; k <= M; ++k)
      p += Real(S::first(k)) * (at<A, Mirror>(f, s, z, ix, q + k) - at<A, Mirror>(f, s, z, ix, q - k + 1));
    return p;
  }

  // sum of G over the cell's two half-points along axis A.
  template <int A, bool FS>
  KOKKOS_FORCEINLINE_FUNCTION static Real density_terms(image_run const& r, int ix) {
    std::ptrdiff_t const s = base::template field_stride<A>(r.fw);
    int const z = r.fw.z;
    Real const* u0 = r.fw.u;
    Real mu_up = dplus<A, false>(r.lambda, s, z, ix, 0), mu_lo = dplus<A, false>(r.lambda, s, z, ix, -1);
    bool lower = true;
    if constexpr (FS && A == 0) {
      // The mirrored half-points -1 - z (of z) and -z (of z - 1) read mu above row 0: nonzero
      // for z <= M - 2 and 1 <= z <= M - 1; at z = 0 the lower half-point is the mirror itself.
      if (z <= M - 2) mu_up += dplus<A, false>(r.lambda, s, z, ix, -1 - 2 * z);
      if (z >= 1 && z <= M - 1) mu_lo += dplus<A, false>(r.lambda, s, z, ix, -2 * z);
      lower = z >= 1;
    }
    constexpr bool mirror = FS && A == 0;
    Real g = -(mu_up * dplus<A, mirror>(u0, s, z, ix, 0));
    if (lower) g -= mu_lo * dplus<A, mirror>(u0, s, z, ix, -1);
    return r.fw.w[A] * g;  // d/dbb of the unweighted buoyancy (bb holds w bb: see Propagator::set_model)
  }

  template <bool FS, bool Illum = true>
  KOKKOS_FORCEINLINE_FUNCTION static void image(image_run const& r, int ix, bool rebuild) {
    Real gb = density_terms<X, false>(r, ix);
    if constexpr (Dim == 3) gb += density_terms<1, false>(r, ix);
    gb += density_terms<0, FS>(r, ix);
    r.grho[ix] += static_cast<double>(gb);
    if (FS && r.fw.z == 0) return;
    Real t = forward_axis<X, false, false>(r.fw, ix);
    if constexpr (Dim == 3) t += forward_axis<1, false, false>(r.fw, ix);
    t += forward_axis<0, false, FS>(r.fw, ix);
    Real const uc = r.fw.u[ix], l = r.lambda[ix];
    r.grad[ix] += static_cast<double>(l * t);
    if constexpr (Illum) {
      r.isrc[ix] += static_cast<double>(uc * uc);
      r.irec[ix] += static_cast<double>((r.xcorr ? uc : l) * l);
    }
    if (rebuild) r.u1[ix] = Real(2) * uc - r.u1[ix] + r.fw.c[ix] * t;
  }
};

/// The largest stable v dt / dh of the order in `dim` dimensions, v being the effective velocity
/// sqrt(c bb) dh / dt (AcousticVdCoefficients::set): 2 / sqrt(dim S), S the Nyquist symbol of
/// the staggered second derivative.
inline double vd_courant_limit(int order, int dim) {
  double const s =
      dispatch_order(order, [](auto o) { return StaggeredCoefficients<decltype(o)::value>::nyquist_symbol(); });
  return 2.0 / std::sqrt(dim * s);
}

/// What variable density adds to the propagator's set-up (Physics::coefficients, physics.hpp):
/// the model on the padded grid (the layer's held values), the averaged buoyancy per axis, the
/// model density and the half-point CPML profiles, with the checks of the layer and of the
/// effective velocity. The Propagator calls check_layer, set, build_profiles and bind; the
/// kernels read it through AcousticVdCell::extra, the imaging through bind_imaging.
template <class Real, int Order, class MemorySpace, int Dim>
class AcousticVdCoefficients {
 public:
  static constexpr int M = Order / 2, R = 2 * M - 1;
  using field2 = Kokkos::View<Real**, Kokkos::LayoutRight, MemorySpace>;
  using field1 = Kokkos::View<Real*, Kokkos::LayoutRight, MemorySpace>;
  /// The damping starts M + 1/2 cells into the layer (see the file comment and cpml_profile).
  static constexpr double profile_inset = M + 0.5;

  /// The layer this physics needs: no cut into domains yet, and every absorbing face (not the free
  /// surface) at least 2M cells wide.
  static void check_layer(PmlConfig const& pml) {
    KSWEEP_REQUIRE(std::none_of(pml.cut.begin(), pml.cut.end(), [](bool c) { return c; }),
                   "variable density does not run on a model split into domains yet (parallel.domains): its "
                   "buoyancy at a cut needs the neighbour's density");
    for (int f = 0; f < 6; ++f) {
      if (((f == PmlConfig::front || f == PmlConfig::back) && Dim == 2) || (f == PmlConfig::top && pml.free_surface))
        continue;
      KSWEEP_REQUIRE(pml.face(f) >= 2 * M,
                     describe_pml_face(pml, f)
                         << " is too small for variable density at order " << Order << ": it must be >= " << 2 * M
                         << " (the damping starts M + 1/2 cells into the layer; a reflecting edge, "
                            "0, is modelled with constant density only)");
    }
  }

  /// Built on the host (set), not from a device model (Propagator::set_model).
  static constexpr bool on_device = false;

  /// What these coefficients hold beyond the propagator's c, for values of `real` bytes (the
  /// memory estimate's items): the buoyancy per axis on the device; on the host the padded vp and
  /// rho that set keeps (double) and the mirrors it builds the coefficients in.
  static std::vector<CoefficientMemory> memory_items(Layout const& l, std::size_t real) {
    std::size_t const coef = coefficient_values(l);
    return {{"buoyancy coefficients (per axis)", true, static_cast<std::size_t>(l.dim) * coef * real},
            {"density model: padded vp and rho, coefficient mirrors", false,
             2 * static_cast<std::size_t>(l.padded_cells()) * sizeof(double) + (1 + l.dim) * coef * real}};
  }

  /// The model vp, rho (`fields`, [model row][nx], checked by the caller) on the padded grid: the layer
  /// repeats the nearest model cell (update_layer, or the first call) or keeps its values. Writes
  /// c = rho v^2 dt^2 / dh^2 into `ch` (the host copy of the propagator's c, [field row][NX + 2R]),
  /// checks the effective velocity against the CFL limit, then uploads the buoyancy and the
  /// model density. Returns whether the layer copies the model's edge.
  template <class Space, class T, class HostField>
  bool set(Space const& space, Layout const& l, ModelGrid const& grid, double dt, std::array<T const*, 2> const& fields,
           bool update_layer, HostField const& ch) {
    T const* vp = fields[0];
    T const* rho = fields[1];
    int const N[3] = {l.NZ, l.NY, l.NX}, lo[3] = {l.top, l.front, l.left}, nm[3] = {l.nz, l.ny, l.nx};
    // Padded-grid values [NZ][NY][NX]: the layer repeats the nearest model cell, or keeps its values.
    std::size_t const np = static_cast<std::size_t>(l.NZ) * l.NY * l.NX;
    bool const fresh = update_layer || m_padded_vp.size() != np;
    if (fresh) {
      m_padded_vp.assign(np, 0.0);
      m_padded_rho.assign(np, 0.0);
    }
    for (int iz = 0; iz < l.NZ; ++iz)
      for (int iy = 0; iy < l.NY; ++iy)
        for (int ix = 0; ix < l.NX; ++ix) {
          int const p[3] = {iz, iy, ix};
          bool model = true;
          std::size_t m = 0;
          for (int a = 0; a < 3; ++a) {
            int const q = p[a] - lo[a];
            model = model && q >= 0 && q < nm[a];
            m = m * nm[a] + static_cast<std::size_t>(std::clamp(q, 0, nm[a] - 1));
          }
          if (!model && !fresh) continue;
          std::size_t const k = (static_cast<std::size_t>(iz) * l.NY + iy) * l.NX + ix;
          m_padded_vp[k] = vp[m];
          m_padded_rho[k] = rho[m];
        }
    // The padded cell of (iz, iy, ix), clamped into the padded grid (the halo repeats its edge).
    auto padded = [&](int iz, int iy, int ix) {
      int const p[3] = {iz, iy, ix};
      std::size_t k = 0;
      for (int a = 0; a < 3; ++a) k = k * N[a] + static_cast<std::size_t>(std::clamp(p[a], 0, N[a] - 1));
      return k;
    };
    double const scale = dt * dt / (grid.dh * grid.dh);
    Kokkos::deep_copy(ch, Real(0));
    std::vector<typename field2::HostMirror> bh(Dim);
    for (int a = 0; a < Dim; ++a) {
      if (m_bb[a].extent(0) == 0)
        m_bb[a] = field2(Kokkos::view_alloc(space, Kokkos::WithoutInitializing, std::string("ksweep::core::bb")),
                         l.field_rows(), l.NX + 2 * R);
      bh[a] = Kokkos::create_mirror_view(Kokkos::HostSpace(), m_bb[a]);
    }
    int const y0 = Dim == 3 ? -R : 0, y1 = Dim == 3 ? l.NY + R : 1;
    for (int iz = -R; iz < l.NZ + R; ++iz)
      for (int iy = y0; iy < y1; ++iy) {
        int const fr = (iz + R) * (Dim == 3 ? l.NY + 2 * R : 1) + (Dim == 3 ? iy + R : 0);
        for (int ix = -R; ix < l.NX + R; ++ix) {
          for (int a = 0; a < Dim; ++a) {
            int const g = Dim == 3 ? a : 2 * a;  // z, (y,) x
            int q[3] = {iz, iy, ix};
            if (g == 0 && l.free_surface && iz < 0) q[0] = -iz - 1;  // bb_z mirrored above row 0
            int q1[3] = {q[0], q[1], q[2]};
            ++q1[g];
            double const r0 = m_padded_rho[padded(q[0], q[1], q[2])], r1 = m_padded_rho[padded(q1[0], q1[1], q1[2])];
            // Weighted by the axis' (dh / d_a)^2 (exactly 1 on a uniform grid; see the file comment).
            bh[a](fr, ix + R) = static_cast<Real>(0.5 * (1.0 / r0 + 1.0 / r1) * l.weight[a]);
          }
          if (iz < 0 || iz >= l.NZ || iy < 0 || iy >= l.NY || ix < 0 || ix >= l.NX) continue;
          std::size_t const k = padded(iz, iy, ix);
          double const v = m_padded_vp[k];
          ch(fr, ix + R) = static_cast<Real>(m_padded_rho[k] * v * v * scale);
        }
      }
    // The effective velocity: c times the largest buoyancy of the 2M half-points of the cell's
    // divergence along each axis.
    double veff2 = 0;
    for (int iz = 0; iz < l.NZ; ++iz)
      for (int iy = 0; iy < l.NY; ++iy) {
        int const fr = l.field_row(iz, iy);
        for (int ix = 0; ix < l.NX; ++ix) {
          double bmax = 0;
          for (int a = 0; a < Dim; ++a) {
            std::ptrdiff_t const zstride = Dim == 3 ? l.NY + 2 * R : 1;
            for (int k = -M; k < M; ++k) {
              bool const along_x = a + 1 == Dim;
              std::ptrdiff_t const rr = along_x ? fr : fr + k * (a == 0 ? zstride : 1);
              bmax = std::max(bmax, static_cast<double>(bh[a](rr, along_x ? ix + R + k : ix + R)));
            }
          }
          veff2 = std::max(veff2, static_cast<double>(ch(fr, ix + R)) * bmax);
        }
      }
    double const veff = std::sqrt(veff2) * grid.dh / dt, limit = vd_courant_limit(Order, Dim);
    KSWEEP_REQUIRE(veff * dt / grid.dh <= limit,
                   "unstable time step: the effective velocity sqrt(c bb) dh / dt is "
                       << veff << " m/s, and " << veff << " * dt / dh = " << veff * dt / grid.dh
                       << " exceeds the CFL limit " << limit << " of order " << Order
                       << " with variable density (dt must be <= " << limit * grid.dh / veff << " s)");
    for (int a = 0; a < Dim; ++a) Kokkos::deep_copy(space, m_bb[a], bh[a]);
    upload_model_field(space, rho, l.model_rows(), l.nx, m_rho_model, "ksweep::core::rho");
    space.fence();  // the host copies go out of scope
    return fresh;
  }

  /// The half-point CPML profiles of each axis (the cell profiles are the propagator's).
  template <class Space>
  void build_profiles(Space const& space, Layout const& l, ModelGrid const& grid, double dt, double vmax,
                      PmlConfig const& pml) {
    int const n[3] = {l.nz, l.ny, l.nx}, lo[3] = {l.top, l.front, l.left}, hi[3] = {l.bottom, l.back, l.right};
    for (int a = 0; a < Dim; ++a) {
      int const g = Dim == 3 ? a : 2 * a;  // z, (y,) x
      auto h = cpml_profile(n[g], lo[g], hi[g], R, grid.step(g), dt, vmax, pml, true, profile_inset);
      upload_profile(space, h.a, m_half_a[a], "ksweep::core::half_a");
      upload_profile(space, h.b, m_half_b[a], "ksweep::core::half_b");
    }
  }

  /// The kernels' coefficients (AcousticVdCell::extra).
  template <class Extra>
  void bind(Extra& e) const {
    for (int a = 0; a < Dim; ++a) {
      e.bb[a] = m_bb[a];
      e.ha[a] = m_half_a[a];
      e.hb[a] = m_half_b[a];
    }
  }
  /// The imaging's coefficients and the density image it sums into (AcousticVdImaging::m_bb,
  /// m_grho); `images` holds the per-shot images of the parameters after vp: rho.
  template <class Imaging, class ShotImages>
  void bind_imaging(Imaging& f, ShotImages const* images) const {
    for (int a = 0; a < Dim; ++a) f.m_bb[a] = m_bb[a];
    f.m_grho = images[0];
  }

  /// The chain rule of the density image, per shot and model cell, after the imaging: from
  /// raw = sum mu T u (the velocity image before its own chain rule) and grho (the sum of d/dbb
  /// over the cell's half-points),
  ///   d/drho = raw / rho - grho / (2 rho^2)
  /// (c = rho v^2 dt^2 / dh^2 gives dc/drho = c / rho; bb_j = (1/rho_j + 1/rho_{j+1}) / 2 gives
  /// -1 / (2 rho^2) for each half-point of the cell).
  template <class ShotImages>
  struct Chain {
    ShotImages grho;
    Kokkos::View<Real const**, Kokkos::LayoutRight, MemorySpace> rho;
    KOKKOS_INLINE_FUNCTION void operator()(int s, int iz, int ix, double raw) const {
      double const r = static_cast<double>(rho(iz, ix));
      grho(s, iz, ix) = raw / r - grho(s, iz, ix) / (2.0 * r * r);
    }
  };
  template <class ShotImages>
  Chain<ShotImages> chain(ShotImages const* images) const {
    return {images[0], m_rho_model};
  }
  /// The model density (set), [model row][nx].
  field2 const& rho_model() const { return m_rho_model; }

 private:
  field2 m_bb[Dim], m_rho_model;
  std::vector<double> m_padded_vp, m_padded_rho;  // [NZ][NY][NX] on the host (the layer's held values)
  field1 m_half_a[Dim], m_half_b[Dim];
};

/// Imaging and backward reconstruction on the model cells of a batch (AcousticVdCell::image), as
/// AcousticImaging does for constant density, with the density image (per shot) and the
/// averaged buoyancy per axis (set by GradientEngine after construction).
template <class Real, int Order, class MemorySpace, int Dimension = 2>
struct AcousticVdImaging : ImagingFrame<Real, MemorySpace, Dimension> {
  static constexpr int Dim = Dimension, M = Order / 2;
  using body = AcousticVdCell<Real, Order, Dim>;
  static constexpr int R = body::R;
  using frame = ImagingFrame<Real, MemorySpace, Dimension>;
  KSWEEP_IMAGING_FRAME_MEMBERS
  using image = typename frame::image;
  Kokkos::View<Real const**, Kokkos::LayoutRight, MemorySpace> m_bb[Dim];
  image m_grho;

  KOKKOS_INLINE_FUNCTION bool surface_row(int iz) const { return m_free_surface && iz < R; }

  KOKKOS_INLINE_FUNCTION typename body::image_run make_run(int s, int mr) const {
    typename body::image_run r;
    int const fr = m_rows.model_field(mr), hx = m_left + R;
    r.fw.u = &m_u0(s, fr, hx);
    r.fw.c = &m_c(fr, hx);
    for (int a = 0; a < Dim; ++a) r.fw.bb[a] = &m_bb[a](fr, hx);
    std::ptrdiff_t const row = static_cast<std::ptrdiff_t>(m_u0.stride(1));
    r.fw.su[0] = row * m_rows.z_rows();
    if constexpr (Dim == 3) r.fw.su[1] = row;
    r.fw.su[Dim - 1] = 1;
    r.fw.z = depth(mr) + m_rows.top;
    for (int a = 0; a < Dim; ++a) r.fw.w[a] = m_w[a];
    r.lambda = &m_lambda(s, fr, hx);
    r.u1 = &m_u1(s, fr, hx);
    r.grad = &m_grad(s, mr, 0);
    r.grho = &m_grho(s, mr, 0);
    r.isrc = &m_isrc(s, mr, 0);
    r.irec = &m_irec(s, mr, 0);
    r.xcorr = this->m_xcorr;
    return r;
  }

  KOKKOS_INLINE_FUNCTION void row(int s, int mr, bool rebuild) const {
    if (m_illum) row_as<true>(s, mr, rebuild);
    else row_as<false>(s, mr, rebuild);
  }
  template <bool Illum>
  KOKKOS_INLINE_FUNCTION void row_as(int s, int mr, bool rebuild) const {
    auto const r = make_run(s, mr);
    if (surface_row(depth(mr))) {
      for (int ix = 0; ix < m_nx; ++ix) body::template image<true, Illum>(r, ix, rebuild);
      return;
    }
#pragma omp simd
    for (int ix = 0; ix < m_nx; ++ix) body::template image<false, Illum>(r, ix, rebuild);
  }
  KOKKOS_INLINE_FUNCTION void operator()(impl::RowTag<void>, int r) const {
    int const n = rows();
    row(r / n, r % n, m_reconstruct);
  }
  KOKKOS_INLINE_FUNCTION void operator()(impl::CellTag<void>, int r, int ix) const {
    int const n = rows(), s = r / n, mr = r % n;
    auto const run = make_run(s, mr);
    bool const fs = surface_row(depth(mr));
    if (m_illum) {
      if (fs) body::template image<true, true>(run, ix, m_reconstruct);
      else body::template image<false, true>(run, ix, m_reconstruct);
    } else {
      if (fs) body::template image<true, false>(run, ix, m_reconstruct);
      else body::template image<false, false>(run, ix, m_reconstruct);
    }
  }
};

}  // namespace ksweep::core

#if defined(__NVCC__)
#pragma nv_diagnostic pop
#endif
