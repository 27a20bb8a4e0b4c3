#pragma once
/// \file acoustic_kernels.hpp
/// The constant-density acoustic time step (2D and 3D) and its exact discrete adjoint, written
/// once for every Kokkos backend and dimension.
///
/// Discretisation (all on the padded grid; ~ marks quantities scaled by powers of dh so the
/// stencils carry only their dimensionless coefficients):
///   u^{n+1} = 2 u^n - u^{n-1} + c sum_a T_a,     c = v^2 dt^2 / dh^2,
/// over the axes a (z, x in 2D; z, y, x in 3D; below written for x, the same for every axis),
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
/// factor dh and zeta a factor dh^2. Outside the grid u = 0 (Dirichlet behind the layer); with a
/// free surface, row 0 holds u = 0 and rows above mirror it with a sign change (image method).
///
/// The adjoint kernel is the transpose of this linear map of the state (u^n, u^{n-1}, psi, zeta).
/// With g = c lambda^{n+1}, h = g + zetabar and w = g + b h (w = g outside the layer):
///   lambda^n   = 2 lambda^{n+1} - lambda^{n+2} + sum_a (Daa w_a - Da(b psibar_a))
/// The adjoint wavefield is stored as mu = c lambda (c > 0 on the grid, 0 in the halo), so that
/// g is the field itself and the step has the forward's shape:
///   mu^n = 2 mu^{n+1} - mu^{n+2} + c sum_a (Daa w_a - Da(b psibar_a)),
/// which saves a load and a multiply per stencil tap. Residuals enter as c r (InjectPoints with
/// the c weight) and the source gradient reads mu / c (SamplePoints with the c weight).
///   psibar_x'  = mask (a psibar_x - Dx w_x)        (w of every cell the layer's psi reaches)
///   zetabar_x' = mask a h_x
/// (Dxx is symmetric, also with the image rows; Dx is antisymmetric.) The adjoint's layer terms
/// reach M cells from the layer, as before the forward's reach: a transposed stencil reaches
/// into the layer, and the layer's psibar reads w within M of it.

#include <ksweep/base/launch.hpp>
#include <ksweep/core/geometry.hpp>
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

/// Work tags of the kernels.
struct ForwardTag {};
struct AdjointTag {};

namespace impl {

/// Kernels run row by row (a tight, vectorisable loop over x in each region) on host backends
/// and cell by cell on devices.
template <class ExecSpace>
inline constexpr bool runs_by_rows = Kokkos::SpaceAccessibility<ExecSpace, Kokkos::HostSpace>::accessible;

template <class Tag>
struct RowTag {};
template <class Tag>
struct CellTag {};

/// A host launch over `n` rows in chunks (launch_for sets the floating-point mode once per
/// chunk on the thread that runs it, see fp_env.hpp).
template <class Tag, class Functor>
struct HostRowChunks {
  Functor m_f;
  int m_n, m_chunk;
  void operator()(int c) const {
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
  launch_for(label, Kokkos::RangePolicy<ExecSpace>(space, 0, chunks), HostRowChunks<Tag, Functor>{f, n, chunk});
}

}  // namespace impl

/// Region flags of the cell bodies: bit a (axis a: 0 = z, Dim - 1 = x) marks layer terms along
/// that axis, bit Dim the free-surface rows (image method on axis 0). A region of the padded
/// grid is an index space with one set of flags; every schedule hands its cells to the same
/// body instantiated for those flags.
template <int Dim>
struct RegionFlags {
  static constexpr int free_surface = 1 << Dim;
  static constexpr int count = 2 << Dim;
  KOKKOS_INLINE_FUNCTION static constexpr bool layer(int flags, int axis) { return (flags >> axis) & 1; }
  KOKKOS_INLINE_FUNCTION static constexpr bool surface(int flags) { return (flags & free_surface) != 0; }
};

/// One axis of the padded grid: `n` model cells after `lo` layer cells, `N` cells in all.
struct GridAxis {
  int n = 0, lo = 0, N = 0;
  /// The cell is in the absorbing layer (forward layer terms).
  KOKKOS_INLINE_FUNCTION bool in_layer(int i) const { return i < lo || i >= lo + n; }
  /// The cell's stencil of radius m reaches the layer (adjoint layer terms); a side without
  /// layer (a free surface, a cut between subdomains) has none.
  KOKKOS_INLINE_FUNCTION bool near_layer(int i, int m) const {
    return (lo > 0 && i < lo + m) || (lo + n < N && i >= lo + n - m);
  }
  /// The end of the cells before the model that run with layer terms on host schedules (the
  /// layer and m model cells; none without a layer), and the start of those after it.
  KOKKOS_INLINE_FUNCTION int layer_end(int m) const { return lo > 0 ? lo + m : 0; }
  KOKKOS_INLINE_FUNCTION int layer_start(int m) const { return lo + n < N ? lo + n - m : N; }
  /// Strip of the layer memories holding cell i: 0 before the model, 1 after it.
  KOKKOS_INLINE_FUNCTION int side(int i) const { return i < lo + n / 2 ? 0 : 1; }
  /// Index of cell i inside its strip (a strip has 2 m cells of zeros on each side).
  KOKKOS_INLINE_FUNCTION int strip_index(int side, int i, int m) const {
    return side == 0 ? i + 2 * m : i - (lo + n - 2 * m);
  }
};

/// The axes of a padded grid of dimension Dim: z (axis 0), y (3D), then x (the last, fastest).
template <int Dim = 2>
std::array<GridAxis, Dim> grid_axes(Layout const& l) {
  if constexpr (Dim == 3) {
    return {GridAxis{l.nz, l.top, l.NZ}, GridAxis{l.ny, l.front, l.NY}, GridAxis{l.nx, l.left, l.NX}};
  } else {
    return {GridAxis{l.nz, l.top, l.NZ}, GridAxis{l.nx, l.left, l.NX}};
  }
}

/// Rows of the padded grid and of the model grid, as the kernels index them. A field is stored
/// as rows of NX + 2M cells, [shot][field row][NX + 2M], the field row of padded cell (iz, iy)
/// being (iz + M)(NY + 2M) + iy + M in 3D and iz + M in 2D; a model image as [shot][model row][nx]
/// with model row iz ny + iy.
template <int Dim>
struct Rows {
  int NY = 1, M = 0, ny = 1, top = 0, front = 0;
  Rows() = default;
  explicit Rows(Layout const& l) : NY(l.NY), M(l.radius), ny(l.ny), top(l.top), front(l.front) {}
  /// Field row of padded cell (iz, iy).
  KOKKOS_INLINE_FUNCTION int field(int iz, int iy) const {
    if constexpr (Dim == 3) return (iz + M) * (NY + 2 * M) + iy + M;
    else return (void)iy, iz + M;
  }
  /// Field row of model row mr.
  KOKKOS_INLINE_FUNCTION int model_field(int mr) const {
    if constexpr (Dim == 3) return field(mr / ny + top, mr % ny + front);
    else return mr + top + M;
  }
  /// Rows between neighbours along z, in a field.
  KOKKOS_INLINE_FUNCTION int z_rows() const { return Dim == 3 ? NY + 2 * M : 1; }
};

/// The memory a cell body reads and writes, for one run of cells along x (the fastest axis) of
/// one shot: the cell at padded x coordinate ix is u[ix], its neighbour k cells along axis a is
/// u[ix + k su[a]]. With layer terms along axis a, that axis' memories are pin[a][ix + off[a]]
/// (neighbours k ps[a] away) and its CPML profiles pa, pb, pm: indexed by ix + k along x (they
/// vary along the run), by the tap k alone along the other axes (constant along the run). On
/// host schedules a run is a stretch of a row of one region; on devices, a single cell.
template <class Real, int Dim>
struct CellRun {
  Real const* u = nullptr;
  Real* out = nullptr;
  Real const* c = nullptr;
  std::ptrdiff_t su[Dim] = {};
  Real const* pin[Dim] = {};
  Real* pout[Dim] = {};
  Real const* zin[Dim] = {};
  Real* zout[Dim] = {};
  std::ptrdiff_t ps[Dim] = {}, off[Dim] = {};
  Real const* pa[Dim] = {};
  Real const* pb[Dim] = {};
  Real const* pm[Dim] = {};
  int z = 0;  ///< the run's row (padded z), for the free surface's image rows
};

/// The imaging run: u0 = u^n, u1 = u^{n+1} (rebuilt into u^{n-1}), lambda and c at model x
/// coordinate ix of one row; the shot's images (double) at the same ix.
template <class Real, int Dim>
struct ImageRun {
  Real const* u0 = nullptr;
  Real const* lambda = nullptr;
  Real* u1 = nullptr;
  Real const* c = nullptr;
  double* grad = nullptr;
  double* isrc = nullptr;
  double* irec = nullptr;
  std::ptrdiff_t su[Dim] = {};
  int z = 0;  ///< the row (padded z)
};

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
  struct extra {};
  using C = StencilCoefficients<Order>;
  using F = RegionFlags<Dim>;
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
  template <int A, bool Layer, bool FS>
  KOKKOS_FORCEINLINE_FUNCTION static Real forward_axis(run_type const& r, int ix, Real u0, Real& zeta_out) {
    std::ptrdiff_t const s = field_stride<A>(r);
    Real const d2 = second_diff<A, FS>(r.u, s, r.z, ix, u0);
    if constexpr (!Layer) {
      return d2;
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
      // for the gradient (see the file comment).
      r.zout[A][i] = coef<A>(r.pm[A], ix, 0) != Real(0) ? zeta : dpsi;
      zeta_out = zeta;
      return q;
    }
  }

  /// u^{n+1} = 2 u^n - u^{n-1} + c sum_a T_a at cell ix of the run.
  template <int Flags>
  KOKKOS_FORCEINLINE_FUNCTION static void forward(run_type const& r, int ix) {
    Real const u0 = r.u[ix];
    Real zeta[Dim] = {};
    Real t = forward_axis<X, F::layer(Flags, X), false>(r, ix, u0, zeta[X]);
    if constexpr (F::layer(Flags, X)) t += zeta[X];
    if constexpr (Dim == 3) {
      Real const ty = forward_axis<1, F::layer(Flags, 1), false>(r, ix, u0, zeta[1]);
      t += F::layer(Flags, 1) ? ty + zeta[1] : ty;
    }
    Real const qz = forward_axis<0, F::layer(Flags, 0), F::surface(Flags)>(r, ix, u0, zeta[0]);
    // The order of the sums, fixed (every schedule and backend adds in this order): in rows with
    // z layer terms alone, (T_x + Q_z) + zeta_z; elsewhere T_x + T_z with T_z = Q_z + zeta_z.
    if constexpr (F::layer(Flags, 0) && !F::layer(Flags, X)) t = (t + qz) + zeta[0];
    else if constexpr (F::layer(Flags, 0)) t += qz + zeta[0];
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
  template <int A, bool Layer, bool FS>
  KOKKOS_FORCEINLINE_FUNCTION static Real adjoint_axis(run_type const& r, int ix, Real g0, Real& db) {
    if constexpr (!Layer) {
      return second_diff<A, FS>(r.u, field_stride<A>(r), r.z, ix, g0);
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
      return lap;
    }
  }

  /// mu^n = 2 mu^{n+1} - mu^{n+2} + c (sum_a lap_a - sum_a db_a) at cell ix of the run.
  template <int Flags>
  KOKKOS_FORCEINLINE_FUNCTION static void adjoint(run_type const& r, int ix) {
    Real const g0 = r.u[ix];
    Real db[Dim] = {};
    Real t = adjoint_axis<X, F::layer(Flags, X), false>(r, ix, g0, db[X]);
    if constexpr (Dim == 3) t += adjoint_axis<1, F::layer(Flags, 1), false>(r, ix, g0, db[1]);
    t += adjoint_axis<0, F::layer(Flags, 0), F::surface(Flags)>(r, ix, g0, db[0]);
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
  //   grad += lambda L u0,  isrc += u0^2,  irec += lambda^2,
  // and, when rebuilding, u1 <- 2 u0 - u1 + c L u0 (u^{n-1} before the source term).
  // ---------------------------------------------------------------------------------------------
  template <bool FS>
  KOKKOS_FORCEINLINE_FUNCTION static void image(image_run const& r, int ix, bool rebuild) {
    Real const uc = r.u0[ix];
    Real lap = Real(Dim * C::second(0)) * uc;
    KSWEEP_UNROLL_TAPS
    for (int k = 1; k <= M; ++k) {
      Real t = r.u0[ix - k] + r.u0[ix + k];
      if constexpr (Dim == 3) {
        t += r.u0[ix - k * r.su[1]];
        t += r.u0[ix + k * r.su[1]];
      }
      t += at<0, FS>(r.u0, r.su[0], r.z, ix, -k);
      t += r.u0[ix + k * r.su[0]];
      lap += Real(C::second(k)) * t;
    }
    Real const l = r.lambda[ix];
    r.grad[ix] += static_cast<double>(l * lap);
    r.isrc[ix] += static_cast<double>(uc * uc);
    r.irec[ix] += static_cast<double>(l * l);
    if (rebuild) r.u1[ix] = Real(2) * uc - r.u1[ix] + r.c[ix] * lap;
  }
};

namespace impl {
/// Calls f(std::integral_constant<int, Flags>{}) for runtime region flags in [0, N).
template <int N, class F>
KOKKOS_FORCEINLINE_FUNCTION void dispatch_flags(int flags, F const& f) {
  if constexpr (N > 0) {
    if (flags == N - 1) f(std::integral_constant<int, N - 1>{});
    else dispatch_flags<N - 1>(flags, f);
  } else {
    (void)flags, (void)f;
  }
}

/// The `cells` schedule on hosts: the row `r` of a host launch runs the cell operator of each
/// of its `cols` cells, one at a time, as a device thread would.
template <class Tag, class Functor>
struct CellsOfRow {
  Functor m_f;
  int m_cols;
  KOKKOS_INLINE_FUNCTION void operator()(RowTag<Tag>, int r) const {
    for (int ix = 0; ix < m_cols; ++ix) m_f(CellTag<Tag>{}, r, ix);
  }
};
}  // namespace impl

/// Launches a functor with RowTag<Tag>(row) and CellTag<Tag>(row, col) operators over a rows x
/// cols grid: rows (vectorised runs) on host backends, cells (x fastest) on devices and, with
/// `by_cells`, on hosts too (the `cells` schedule). Host launches flush subnormals per chunk of rows.
template <class Tag, class ExecSpace, class Functor>
void launch_grid(ExecSpace const& space, char const* label, Functor const& f, int rows, int cols, bool by_cells) {
  if constexpr (impl::runs_by_rows<ExecSpace>) {
    if (by_cells) impl::launch_host_rows<Tag>(space, label, impl::CellsOfRow<Tag, Functor>{f, cols}, rows);
    else impl::launch_host_rows<Tag>(space, label, f, rows);
  } else {
    (void)by_cells;
    using policy = Kokkos::MDRangePolicy<ExecSpace, Kokkos::Rank<2, Kokkos::Iterate::Right, Kokkos::Iterate::Right>,
                                         impl::CellTag<Tag>>;
    // Tiles of 256 cells, 64 along x unless the launch is narrower (the cells next to a cut).
    int const tx = cols >= 64 ? 64 : (cols >= 16 ? 16 : 4);
    launch_for(label, policy(space, {0, 0}, {rows, cols}, {256 / tx, tx}), f);
  }
}

/// The time step of a physics of the wave-equation family (the cell body `Body`: AcousticCell,
/// AcousticVdCell) for a batch of shots (ForwardTag: u^{n+1}; AdjointTag: mu^n) on the padded
/// grid of dimension Dim. Wavefields carry a halo of R zero cells on every side (R = Body::R,
/// the reach of the body's stencil), stored as rows of NX + 2R cells: [shot][field row][NX + 2R]
/// (see Rows). The layer memories of axis a live only in that axis' layer, in two strips (side 0
/// before the model, 1 after it) with 2R cells of zeros on each side along the axis
/// (Sa = max(layer cells of the two faces) + 4R cells):
///   axis 0 (z) [side][shot][Sz][NY NX], axis 1 (y, 3D) [side][shot][NZ Sy][NX],
///   axis x     [side][shot][NZ NY][Sx].
/// Regions: along each axis, the cells with layer terms (within Body::forward_reach or
/// Body::adjoint_reach of the layer, 0 meaning the layer cells alone) and the others; the
/// free-surface rows 1 .. R-1 (row 0 holds u = 0 and is skipped). A row is (shot, iz, iy) of the
/// padded grid, NZ NY rows per shot. The body's own coefficients (Body::extra) are bound to a
/// run by Body::bind_extra.
template <class Body, class MemorySpace>
struct PhysicsStep {
  using Real = typename Body::real_type;
  static constexpr int Dim = Body::dim, M = Body::M, R = Body::R, X = Dim - 1;
  static_assert(Dim == 2 || Dim == 3, "the step is 2D or 3D");
  using body = Body;
  using flags = RegionFlags<Dim>;
  using run_type = typename body::run_type;
  using field3 = Kokkos::View<Real***, Kokkos::LayoutRight, MemorySpace>;
  using field4 = Kokkos::View<Real****, Kokkos::LayoutRight, MemorySpace>;
  using cfield2 = Kokkos::View<Real const**, Kokkos::LayoutRight, MemorySpace>;
  using cfield1 = Kokkos::View<Real const*, Kokkos::LayoutRight, MemorySpace>;

  // Forward: cur = u^n, out = u^{n-1} on entry and u^{n+1} on exit.
  // Adjoint: cur = mu^{n+1}, out = mu^{n+2} on entry and mu^n on exit.
  field3 m_cur, m_out;
  // Layer memories per axis (forward: psi, zeta; adjoint: psibar, zetabar); *_in read, *_out written.
  field4 m_psi_in[Dim], m_psi_out[Dim], m_zeta_in[Dim], m_zeta_out[Dim];
  cfield2 m_c;                              // v^2 dt^2 / dh^2, [field row][NX + 2M], zero in the halo
  cfield1 m_a[Dim], m_b[Dim], m_mask[Dim];  // CPML profiles per axis, [N + 2R]
  typename Body::template extra<MemorySpace> m_extra;
  GridAxis m_axis[Dim];
  Rows<Dim> m_rows;
  int m_strip_y = 0;  // Sy: rows of a y strip per z (3D)
  int m_block_y = 1;  // 3D: rows of y per block of the launch order (see decode)
  // The launch's window of the padded grid: cells [m_x0, m_x1) of x and rows [m_y0, m_y1) of y
  // (3D; 2D: 0, 1) of every z (see window()).
  int m_x0 = 0, m_x1 = 0, m_y0 = 0, m_y1 = 1;
  bool m_free_surface = false;

  PhysicsStep() = default;
  explicit PhysicsStep(Layout const& l) : m_rows(l), m_free_surface(l.free_surface) {
    auto const axes = grid_axes<Dim>(l);
    for (int a = 0; a < Dim; ++a) m_axis[a] = axes[a];
    m_x1 = m_axis[X].N;
    if constexpr (Dim == 3) {
      m_strip_y = std::max(l.front, l.back) + 4 * R;
      m_block_y = l.NY;
      m_y1 = l.NY;
    }
  }

  /// The same step over the cells [x0, x1) of x and [y0, y1) of y (3D; 2D takes 0, 1) of every
  /// z and shot: launch window_rows() rows of x1 - x0 cells. A model split into domains runs the
  /// cells next to its cut faces and the others in separate launches (to send the first while
  /// the second run); each cell's arithmetic is the same in any window.
  PhysicsStep window(int x0, int x1, int y0, int y1) const {
    PhysicsStep k = *this;
    k.m_x0 = x0, k.m_x1 = x1;
    if constexpr (Dim == 3) k.m_y0 = y0, k.m_y1 = y1;
    else (void)y0, (void)y1;
    return k;
  }
  /// Rows per shot of the window: NZ (y1 - y0).
  int window_rows() const { return m_axis[0].N * (m_y1 - m_y0); }
  int window_cols() const { return m_x1 - m_x0; }

  /// 3D: the launch order of the rows of a shot: blocks of `by` rows of y, each swept over z
  /// (by = NY: plain z planes). A smaller block keeps the 2M + 1 planes of a stencil's window
  /// in a core's L2 when whole planes would not fit. Rows are independent, so the order changes
  /// no result.
  void set_block_y(int by) {
    if constexpr (Dim == 3) m_block_y = by >= 1 && by < m_axis[1].N ? by : m_axis[1].N;
    else (void)by;
  }

  /// Padded rows per shot: NZ NY.
  KOKKOS_INLINE_FUNCTION int rows() const {
    if constexpr (Dim == 3) return m_axis[0].N * m_axis[1].N;
    else return m_axis[0].N;
  }

  template <class Tag>
  KOKKOS_INLINE_FUNCTION bool layer_terms(int axis, int i) const {
    constexpr int reach = std::is_same_v<Tag, ForwardTag> ? Body::forward_reach : Body::adjoint_reach;
    if constexpr (reach == 0) return m_axis[axis].in_layer(i);
    else return m_axis[axis].near_layer(i, reach);
  }

  /// The run of row (iz, iy) of shot s; layer memories of axis a bound where `f` has layer
  /// terms (x: the strip `xside`).
  KOKKOS_INLINE_FUNCTION run_type make_run(int s, int iz, int iy, int xside, int f) const {
    run_type r;
    int const hz = iz + R, fr = m_rows.field(iz, iy);
    r.u = &m_cur(s, fr, R);
    r.out = &m_out(s, fr, R);
    r.c = &m_c(fr, R);
    std::ptrdiff_t const row = static_cast<std::ptrdiff_t>(m_cur.stride(1));
    r.su[0] = row * m_rows.z_rows();
    if constexpr (Dim == 3) r.su[1] = row;
    r.su[X] = 1;
    r.z = iz;
    if (flags::layer(f, 0)) {
      int const side = m_axis[0].side(iz), zr = m_axis[0].strip_index(side, iz, R);
      bind_axis(r, 0, side, s, zr, Dim == 3 ? iy * m_axis[X].N : 0);
      r.ps[0] = static_cast<std::ptrdiff_t>(m_psi_in[0].stride(2));
      r.pa[0] = &m_a[0](hz);
      r.pb[0] = &m_b[0](hz);
      r.pm[0] = &m_mask[0](hz);
    }
    if constexpr (Dim == 3) {
      if (flags::layer(f, 1)) {
        int const side = m_axis[1].side(iy), yr = m_axis[1].strip_index(side, iy, R);
        bind_axis(r, 1, side, s, iz * m_strip_y + yr, 0);
        r.ps[1] = static_cast<std::ptrdiff_t>(m_psi_in[1].stride(2));
        r.pa[1] = &m_a[1](iy + R);
        r.pb[1] = &m_b[1](iy + R);
        r.pm[1] = &m_mask[1](iy + R);
      }
    }
    if (flags::layer(f, X)) {
      bind_axis(r, X, xside, s, Dim == 3 ? iz * m_axis[1].N + iy : iz, 0);
      r.ps[X] = 1;
      r.off[X] = m_axis[X].strip_index(xside, 0, R);
      r.pa[X] = &m_a[X](R);
      r.pb[X] = &m_b[X](R);
      r.pm[X] = &m_mask[X](R);
    }
    Body::bind_extra(r, m_extra, fr, iz, iy, f);
    return r;
  }
  KOKKOS_INLINE_FUNCTION void bind_axis(run_type& r, int a, int side, int s, int i1, int i2) const {
    r.pin[a] = &m_psi_in[a](side, s, i1, i2);
    r.pout[a] = &m_psi_out[a](side, s, i1, i2);
    r.zin[a] = &m_zeta_in[a](side, s, i1, i2);
    r.zout[a] = &m_zeta_out[a](side, s, i1, i2);
  }

  // Cells [x0, x1) of row (iz, iy) with region flags F, as one vectorisable loop.
  template <class Tag, int F>
  KOKKOS_INLINE_FUNCTION void run(int s, int iz, int iy, int xside, int x0, int x1) const {
    run_type const r = make_run(s, iz, iy, xside, F);
#pragma omp simd
    for (int ix = x0; ix < x1; ++ix) body::template step<Tag, F>(r, ix);
  }
  template <class Tag>
  KOKKOS_INLINE_FUNCTION void run_flags(int f, int s, int iz, int iy, int xside, int x0, int x1) const {
    impl::dispatch_flags<flags::count>(f, [&](auto c) { run<Tag, decltype(c)::value>(s, iz, iy, xside, x0, x1); });
  }

  // Flags of row (iz, iy) without the x axis' bit.
  template <class Tag>
  KOKKOS_INLINE_FUNCTION int row_flags(int iz, int iy) const {
    int f = (layer_terms<Tag>(0, iz) ? 1 : 0) | (m_free_surface && iz < R ? flags::free_surface : 0);
    if constexpr (Dim == 3) f |= layer_terms<Tag>(1, iy) ? 2 : 0;
    else (void)iy;
    return f;
  }

  // Shot, z and y of row r of a launch: in 3D, block b of m_block_y rows of y (the last one
  // shorter), then z, then y within the block.
  // Rows of y of the window only (see window()).
  KOKKOS_INLINE_FUNCTION void decode(int r, int& s, int& iz, int& iy) const {
    int const n = m_axis[0].N * (m_y1 - m_y0);
    s = r / n;
    int const q = r - s * n;
    if constexpr (Dim == 3) {
      int const by = m_block_y < m_y1 - m_y0 ? m_block_y : m_y1 - m_y0, NZ = m_axis[0].N, b = q / (NZ * by);
      int const y0 = m_y0 + b * by, ny = m_y1 - y0 < by ? m_y1 - y0 : by, rem = q - b * NZ * by;
      iz = rem / ny;
      iy = y0 + rem - iz * ny;
    } else {
      iz = q;
      iy = 0;
    }
  }

  /// Host schedules: row r = (s NZ + iz) NY + iy, as three runs along x (layer terms, none,
  /// layer terms).
  template <class Tag>
  KOKKOS_INLINE_FUNCTION void operator()(impl::RowTag<Tag>, int r) const {
    int s, iz, iy;
    decode(r, s, iz, iy);
    if (m_free_surface && iz == 0) return;
    int const f = row_flags<Tag>(iz, iy), lx = 1 << X;
    int const m = std::is_same_v<Tag, ForwardTag> ? Body::forward_reach : Body::adjoint_reach;
    GridAxis const& ax = m_axis[X];
    int const w0 = m_x0, w1 = m_x1;
    int const x0 = clamp(ax.layer_end(m), w0, w1), x1 = clamp(ax.layer_start(m), w0, w1);
    if (x0 > w0) run_flags<Tag>(f | lx, s, iz, iy, 0, w0, x0);
    if (x1 > x0) run_flags<Tag>(f, s, iz, iy, 0, x0, x1);
    if (x1 < w1) run_flags<Tag>(f | lx, s, iz, iy, 1, x1, w1);
  }
  KOKKOS_INLINE_FUNCTION static int clamp(int v, int lo, int hi) { return v < lo ? lo : (v > hi ? hi : v); }

  /// Device schedules (and `cells` on hosts): cell m_x0 + col of row r.
  template <class Tag>
  KOKKOS_INLINE_FUNCTION void operator()(impl::CellTag<Tag>, int r, int col) const {
    int const ix = m_x0 + col;
    int s, iz, iy;
    decode(r, s, iz, iy);
    if (m_free_surface && iz == 0) return;
    bool const lx = layer_terms<Tag>(X, ix);
    int const f = row_flags<Tag>(iz, iy) | (lx ? 1 << X : 0), xside = m_axis[X].side(ix);
    impl::dispatch_flags<flags::count>(f, [&](auto c) {
      constexpr int F = decltype(c)::value;
      body::template step<Tag, F>(make_run(s, iz, iy, xside, F), ix);
    });
  }
};

/// The constant-density acoustic step (see PhysicsStep).
template <class Real, int Order, class MemorySpace, int Dimension = 2>
using AcousticStep = PhysicsStep<AcousticCell<Real, Order, Dimension>, MemorySpace>;

/// The frame every physics' imaging functor shares: the forward levels u^n (u0) and u^{n+1}
/// (u1, rebuilt into u^{n-1}), the adjoint level (lambda, the field mu), c, the per-shot images
/// [shot][model row][nx], and the model rows of the padded grid.
template <class Real, class MemorySpace, int Dim>
struct ImagingFrame {
  using field3 = Kokkos::View<Real***, Kokkos::LayoutRight, MemorySpace>;
  using image = Kokkos::View<double***, Kokkos::LayoutRight, MemorySpace>;  // [shot][model row][nx]
  Kokkos::View<Real const***, Kokkos::LayoutRight, MemorySpace> m_u0, m_lambda;
  field3 m_u1;
  Kokkos::View<Real const**, Kokkos::LayoutRight, MemorySpace> m_c;
  image m_grad, m_isrc, m_irec;
  Rows<Dim> m_rows;
  int m_nz = 0, m_nx = 0, m_left = 0;
  bool m_free_surface = false, m_reconstruct = false;

  ImagingFrame() = default;
  ImagingFrame(field3 const& u0, field3 const& lambda, field3 const& u1,
               Kokkos::View<Real**, Kokkos::LayoutRight, MemorySpace> const& c, image const& grad, image const& isrc,
               image const& irec, Layout const& l, bool reconstruct)
      : m_u0(u0),
        m_lambda(lambda),
        m_u1(u1),
        m_c(c),
        m_grad(grad),
        m_isrc(isrc),
        m_irec(irec),
        m_rows(l),
        m_nz(l.nz),
        m_nx(l.nx),
        m_left(l.left),
        m_free_surface(l.free_surface),
        m_reconstruct(reconstruct) {}

  /// Model rows per shot: nz ny.
  KOKKOS_INLINE_FUNCTION int rows() const { return m_nz * m_rows.ny; }
  /// The model row of padded row (iz, iy), or -1 outside the model.
  KOKKOS_INLINE_FUNCTION int model_row(int iz, int iy) const {
    int const mz = iz - m_rows.top, my = Dim == 3 ? iy - m_rows.front : 0;
    return mz >= 0 && mz < m_nz && my >= 0 && my < m_rows.ny ? mz * m_rows.ny + my : -1;
  }
  /// Depth of model row mr.
  KOKKOS_INLINE_FUNCTION int depth(int mr) const { return Dim == 3 ? mr / m_rows.ny : mr; }
};

/// In an imaging functor deriving from ImagingFrame (through an alias `frame`): the frame's
/// constructors and members by name (a dependent base's names need a using-declaration).
#define KSWEEP_IMAGING_FRAME_MEMBERS \
  using frame::frame;                \
  using frame::depth;                \
  using frame::rows;                 \
  using frame::m_c;                  \
  using frame::m_free_surface;       \
  using frame::m_grad;               \
  using frame::m_irec;               \
  using frame::m_isrc;               \
  using frame::m_lambda;             \
  using frame::m_left;               \
  using frame::m_nx;                 \
  using frame::m_reconstruct;        \
  using frame::m_rows;               \
  using frame::m_u0;                 \
  using frame::m_u1;

/// Imaging and backward reconstruction on the model cells (AcousticCell::image) of a batch.
/// Each shot has its own images, accumulated in double over the time steps in a fixed order, so
/// that a shot's image does not depend on the other shots of its batch; shots are summed
/// afterwards in a fixed order (GradientEngine::accumulate), whatever the split.
template <class Real, int Order, class MemorySpace, int Dimension = 2>
struct AcousticImaging : ImagingFrame<Real, MemorySpace, Dimension> {
  static constexpr int Dim = Dimension, M = Order / 2;
  using body = AcousticCell<Real, Order, Dim>;
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
    std::ptrdiff_t const row = static_cast<std::ptrdiff_t>(m_u0.stride(1));
    r.su[0] = row * m_rows.z_rows();
    if constexpr (Dim == 3) r.su[1] = row;
    r.su[Dim - 1] = 1;
    r.z = (Dim == 3 ? mr / m_rows.ny : mr) + m_rows.top;
    return r;
  }
  // Free-surface rows: 1 .. M-1 (row 0 holds zero pressure: no sensitivity, skipped).
  KOKKOS_INLINE_FUNCTION bool surface_row(int iz) const { return m_free_surface && iz < M; }

  /// Model row mr of shot s, as one vectorisable loop (host schedules); rebuilds when `rebuild`.
  KOKKOS_INLINE_FUNCTION void row(int s, int mr, bool rebuild) const {
    int const iz = depth(mr);
    if (m_free_surface && iz == 0) return;
    auto const r = make_run(s, mr);
    if (surface_row(iz)) {
      for (int ix = 0; ix < m_nx; ++ix) body::template image<true>(r, ix, rebuild);
      return;
    }
#pragma omp simd
    for (int ix = 0; ix < m_nx; ++ix) body::template image<false>(r, ix, rebuild);
  }

  KOKKOS_INLINE_FUNCTION void operator()(impl::RowTag<void>, int r) const {
    int const n = rows();
    row(r / n, r % n, m_reconstruct);
  }
  KOKKOS_INLINE_FUNCTION void operator()(impl::CellTag<void>, int r, int ix) const {
    int const n = rows(), s = r / n, mr = r % n, iz = depth(mr);
    if (m_free_surface && iz == 0) return;
    if (surface_row(iz)) body::template image<true>(make_run(s, mr), ix, m_reconstruct);
    else body::template image<false>(make_run(s, mr), ix, m_reconstruct);
  }
};

/// The taps of each shot that fall in the same cell: `first(s, j)` is whether tap j is the first
/// of its cell in shot s, `next(s, j)` the next tap of the same cell (-1 after the last). Empty
/// views mean every tap has a cell of its own.
template <class MemorySpace>
struct PointLinks {
  Kokkos::View<int const**, Kokkos::LayoutRight, MemorySpace> m_next;   // [shot][tap]: next, or -1
  Kokkos::View<int const**, Kokkos::LayoutRight, MemorySpace> m_first;  // [shot][tap]: 1 for the first
  KOKKOS_INLINE_FUNCTION bool first(int s, int j) const { return m_first.extent(0) == 0 || m_first(s, j) != 0; }
  KOKKOS_INLINE_FUNCTION int next(int s, int j) const { return m_next.extent(0) == 0 ? -1 : m_next(s, j); }
};

/// The points of one kind (sources or receivers) of a batch on the device. Point i of a shot
/// reaches the field through its taps j = i * per_point + k, k < per_point: the field row and
/// column of each (halo offset included, see Rows) and its weight. On-grid points have one tap of
/// weight 1 and no weight view; off-grid points have (2 r)^dim interpolation taps (Hicks 2002);
/// a silent point has weights 0.
template <class Real, class MemorySpace>
struct DevicePoints {
  Kokkos::View<int const**, Kokkos::LayoutRight, MemorySpace> z, x;  // [shot][tap]
  Kokkos::View<Real const**, Kokkos::LayoutRight, MemorySpace> w;    // [shot][tap]; empty: every weight 1
  PointLinks<MemorySpace> links;                                     // taps of a shot that share a cell
  int per_shot = 0;                                                  // points per shot
  int per_point = 1;                                                 // taps per point
  KOKKOS_INLINE_FUNCTION int taps() const { return per_shot * per_point; }
};

/// Point injection: field(s, z_j, x_j) += scale * w_j * values(s, i, it) for every shot s, point
/// i and tap j of i. Taps that share a cell are added by the first of them, in tap order
/// (PointLinks), so a cell's sum has one order on every backend, schedule and thread count, with
/// no atomics. `apply` is the body for one shot and tap (launched over shot x taps()), for
/// schedules that run shots one by one.
template <class Real, class MemorySpace>
struct InjectPoints {
  Kokkos::View<Real***, Kokkos::LayoutRight, MemorySpace> m_field;
  Kokkos::View<Real const***, Kokkos::LayoutRight, MemorySpace> m_values;  // [shot][point][time] or [shot][time][point]
  DevicePoints<Real, MemorySpace> m_points;
  int m_it;
  bool m_time_major;  // values indexed [shot][time][point]
  Real m_scale;
  using weight_view = Kokkos::View<Real const**, Kokkos::LayoutRight, MemorySpace>;
  weight_view m_weight;  // optional: values times weight(z, x) (c, for the adjoint's mu = c lambda)
  KOKKOS_INLINE_FUNCTION int count() const { return m_points.taps(); }
  template <class Field>
  KOKKOS_INLINE_FUNCTION void apply(Field const& field, int s, int j, int it) const {
    auto const& p = m_points;
    if (!p.links.first(s, j)) return;  // added with the first tap of its cell
    int const z = p.z(s, j), x = p.x(s, j);
    Real const w = m_weight.extent(0) > 0 ? m_weight(z, x) : Real(1);
    bool const tapped = p.w.extent(0) > 0;
    Real f = field(s, z, x);
    for (int k = j; k >= 0; k = p.links.next(s, k)) {
      int const i = p.per_point == 1 ? k : k / p.per_point;
      Real v = m_time_major ? m_values(s, it, i) : m_values(s, i, it);
      if (tapped) v = p.w(s, k) * v;
      f = f + m_scale * (w * v);
    }
    field(s, z, x) = f;
  }
  KOKKOS_INLINE_FUNCTION void operator()(int r) const { apply(m_field, r / count(), r % count(), m_it); }
};

/// Point sampling: out(s, it, i) or out(s, i, it) = sum over the taps j of point i of
/// w_j field(s, z_j, x_j), in tap order (one tap of weight 1: the field value itself).
template <class Real, class MemorySpace>
struct SamplePoints {
  Kokkos::View<Real const***, Kokkos::LayoutRight, MemorySpace> m_field;
  Kokkos::View<Real***, Kokkos::LayoutRight, MemorySpace> m_out;
  DevicePoints<Real, MemorySpace> m_points;
  int m_it;
  bool m_time_major;
  Kokkos::View<Real const**, Kokkos::LayoutRight, MemorySpace> m_weight;  // optional: samples divided by weight(z, x)
  KOKKOS_INLINE_FUNCTION int count() const { return m_points.per_shot; }
  template <class Field>
  KOKKOS_INLINE_FUNCTION Real tap(Field const& field, int s, int j) const {
    int const z = m_points.z(s, j), x = m_points.x(s, j);
    return m_weight.extent(0) > 0 ? field(s, z, x) / m_weight(z, x) : field(s, z, x);
  }
  template <class Field>
  KOKKOS_INLINE_FUNCTION void apply(Field const& field, int s, int i, int it) const {
    auto const& p = m_points;
    Real v;
    if (p.w.extent(0) == 0) {
      v = tap(field, s, i);  // one tap per point
    } else {
      int const j0 = i * p.per_point;
      v = p.w(s, j0) * tap(field, s, j0);
      for (int j = j0 + 1; j < j0 + p.per_point; ++j) v = v + p.w(s, j) * tap(field, s, j);
    }
    if (m_time_major) m_out(s, it, i) = v;
    else m_out(s, i, it) = v;
  }
  KOKKOS_INLINE_FUNCTION void operator()(int r) const { apply(m_field, r / count(), r % count(), m_it); }
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
/// increasing order (or decreasing, when `reverse`), on one thread (one unit of work for the
/// floating-point mode).
template <class Body>
struct ShotSteps {
  Body m_body;
  int m_n0, m_n1;
  bool m_reverse;
  void operator()(int s) const {
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
  launch_for(label,
             Kokkos::RangePolicy<ExecSpace, Kokkos::Schedule<Kokkos::Dynamic>>(space, 0, n_shots).set_chunk_size(1),
             impl::ShotSteps<Body>{body, n0, n1, reverse});
}

/// Launches `f` over [0, n) on `space` (nothing when n == 0).
template <class ExecSpace, class Functor>
void launch_points(ExecSpace const& space, char const* label, Functor const& f, int n) {
  if (n > 0) launch_for(label, Kokkos::RangePolicy<ExecSpace>(space, 0, n), f);
}

}  // namespace ksweep::core

#if defined(__NVCC__)
#pragma nv_diagnostic pop
#endif
