#pragma once
/// \file physics_step.hpp
/// The time step of a physics of the wave-equation family over its cell body (PhysicsStep: the
/// regions with and without layer terms, the blocks, the launches of a batch) and the frame every
/// physics' imaging functor shares (ImagingFrame). A physics brings the cell body
/// (acoustic_kernels.hpp: AcousticCell; physics/acoustic_vd.hpp: AcousticVdCell).

#include <ksweep/core/kernel_grid.hpp>

#include <Kokkos_Core.hpp>

#include <algorithm>
#include <array>

namespace ksweep::core {

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
  // The scalars, without padding between or after them (a launch trace reads every byte of a
  // functor, and padding holds what the stack held): 4 reals, then an even number of ints.
  Real m_w[4] = {Real(1), Real(1), Real(1), Real(1)};  // the axes' weights (Layout::weight)
  GridAxis m_axis[Dim];
  Rows<Dim> m_rows;
  int m_strip_y = 0;  // Sy: rows of a y strip per z (3D)
  int m_block_y = 1;  // 3D: rows of y per block of the launch order (see decode)
  // The launch's window of the padded grid: cells [m_x0, m_x1) of x and rows [m_y0, m_y1) of y
  // (3D; 2D: 0, 1) of every z (see window()).
  int m_x0 = 0, m_x1 = 0, m_y0 = 0, m_y1 = 1;
  int m_free_surface = 0;
  int m_uniform = 1;                    // every weight 1
  int m_unused[Dim == 3 ? 2 : 1] = {};  // 3 Dim + 13 ints before: an even number

  PhysicsStep() = default;
  explicit PhysicsStep(Layout const& l) : m_rows(l), m_free_surface(l.free_surface) {
    auto const axes = grid_axes<Dim>(l);
    for (int a = 0; a < Dim; ++a) m_axis[a] = axes[a];
    for (int a = 0; a < Dim; ++a) {
      m_w[a] = static_cast<Real>(l.weight[a]);
      m_uniform = m_uniform && m_w[a] == Real(1);
    }
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
    for (int a = 0; a < Dim; ++a) r.w[a] = m_w[a];
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
  // The interior (no layer terms, no free surface) of a uniform grid runs the body's form without
  // the axes' weights when it has one (Body::uniform_runs: the same bits, fewer multiplies).
  template <class Tag, int F>
  KOKKOS_INLINE_FUNCTION void run(int s, int iz, int iy, int xside, int x0, int x1) const {
    run_type const r = make_run(s, iz, iy, xside, F);
    if constexpr (F == 0 && Body::uniform_runs) {
      if (m_uniform) {
#pragma omp simd
        for (int ix = x0; ix < x1; ++ix) body::template step<Tag, flags::uniform>(r, ix);
        return;
      }
    }
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

/// The frame every physics' imaging functor shares: the forward levels u^n (u0) and u^{n+1}
/// (u1, rebuilt into u^{n-1}), the adjoint level (lambda, the field mu), c, the per-shot images
/// [shot][model row][nx], and the model rows of the padded grid. The third image is the receiver
/// illumination, sum mu^2, or with m_xcorr the zero-lag cross-correlation sum u^n mu^{n+1}. Without
/// m_illum the second and third images are not read or written (a gradient alone moves 24 of the
/// 48 bytes of images per cell and step fewer).
template <class Real, class MemorySpace, int Dim>
struct ImagingFrame {
  using field3 = Kokkos::View<Real***, Kokkos::LayoutRight, MemorySpace>;
  using image = Kokkos::View<double***, Kokkos::LayoutRight, MemorySpace>;  // [shot][model row][nx]
  Kokkos::View<Real const***, Kokkos::LayoutRight, MemorySpace> m_u0, m_lambda;
  field3 m_u1;
  Kokkos::View<Real const**, Kokkos::LayoutRight, MemorySpace> m_c;
  image m_grad, m_isrc, m_irec;
  // The scalars, without padding between or after them (a launch trace reads every byte of a
  // functor, and padding holds what the stack held): 7 ints after the 5 of m_rows, a double,
  // 4 reals, 2 ints.
  Rows<Dim> m_rows;
  int m_nz = 0, m_nx = 0, m_left = 0;
  int m_free_surface = 0, m_reconstruct = 0, m_xcorr = 0;
  int m_illum = 1;                                     // sum the illuminations (m_isrc, m_irec)
  double m_wsum = Dim;                                 // the sum of the axes' weights, in double
  Real m_w[4] = {Real(1), Real(1), Real(1), Real(1)};  // the axes' weights (Layout::weight)
  int m_uniform = 1;                                   // every weight 1
  int m_unused = 0;

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
        m_reconstruct(reconstruct) {
    m_wsum = 0;
    for (int a = 0; a < Dim; ++a) {
      m_w[a] = static_cast<Real>(l.weight[a]);
      m_wsum += l.weight[a];
      m_uniform = m_uniform && m_w[a] == Real(1);
    }
  }

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
  using frame::m_illum;              \
  using frame::m_irec;               \
  using frame::m_isrc;               \
  using frame::m_lambda;             \
  using frame::m_left;               \
  using frame::m_nx;                 \
  using frame::m_reconstruct;        \
  using frame::m_rows;               \
  using frame::m_u0;                 \
  using frame::m_u1;                 \
  using frame::m_uniform;            \
  using frame::m_w;                  \
  using frame::m_wsum;

}  // namespace ksweep::core
