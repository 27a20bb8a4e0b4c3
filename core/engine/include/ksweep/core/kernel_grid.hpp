#pragma once
/// \file kernel_grid.hpp
/// The padded grid as the kernels index it: the work tags, the region flags of the cell bodies,
/// the axes and rows of a padded field (the model cells, the absorbing layer and the halo), the
/// runs of cells a body reads and writes, and the launches over rows (host backends) or cells
/// (devices, and the `cells` schedule). Every physics' kernels are written over these.

#include <ksweep/base/error.hpp>
#include <ksweep/base/launch.hpp>
#include <ksweep/core/geometry.hpp>

#include <Kokkos_Core.hpp>

#include <algorithm>
#include <array>
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

namespace ksweep::core {

/// Work tags of the kernels.
struct ForwardTag {};
struct AdjointTag {};

/// Copies host values (a damping profile) into the device field `d`, allocated anew when its
/// length differs.
template <class Space, class Field>
void upload_profile(Space const& space, std::vector<double> const& h, Field& d, char const* label) {
  // Runs after a new velocity then launch on the same buffers, and replay their step graphs
  // (step_graph.hpp); the caller fences before the profile is read.
  if (d.extent(0) != h.size())
    d = Field(Kokkos::view_alloc(space, Kokkos::WithoutInitializing, std::string(label)), h.size());
  auto m = Kokkos::create_mirror_view(Kokkos::HostSpace(), d);
  for (std::size_t i = 0; i < h.size(); ++i) m(i) = static_cast<typename Field::value_type>(h[i]);
  Kokkos::deep_copy(space, d, m);
}

/// Copies a host model ([rows][nx], row-major, any floating type) into the device field `d`
/// ([rows][nx]), allocated on the first call.
template <class Space, class Field, class T>
void upload_model_field(Space const& space, T const* h, int rows, int nx, Field& d, char const* label) {
  if (d.extent(0) == 0) d = Field(Kokkos::view_alloc(space, Kokkos::WithoutInitializing, std::string(label)), rows, nx);
  auto m = Kokkos::create_mirror_view(Kokkos::HostSpace(), d);
  for (int r = 0; r < rows; ++r)
    for (int ix = 0; ix < nx; ++ix)
      m(r, ix) = static_cast<typename Field::value_type>(h[static_cast<std::size_t>(r) * nx + ix]);
  Kokkos::deep_copy(space, d, m);
}

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
  /// Beyond `count`: the axes' weights are all 1 (a uniform grid; the host schedules' interior
  /// runs, where a body with `uniform_runs` skips the multiplies by 1: the same bits).
  static constexpr int uniform = count;
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
  /// The axes' weights (dh / d_a)^2 (Layout::weight; 1 on a uniform grid).
  Real w[3] = {Real(1), Real(1), Real(1)};
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
  bool xcorr = false;  ///< irec takes u0 lambda (the cross-correlation) instead of lambda^2
  std::ptrdiff_t su[Dim] = {};
  /// The axes' weights (dh / d_a)^2 (Layout::weight; 1 on a uniform grid).
  Real w[3] = {Real(1), Real(1), Real(1)};
  Real w0 = Real(0);  ///< the centre tap's coefficient times the sum of the weights
  int z = 0;          ///< the row (padded z)
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

}  // namespace impl

/// The shape of the launches over cells (devices, and the `cells` schedule on hosts): tiles of
/// 256 cells, `cols` cells along x (a power of 2 from 4 to 256; narrower for a narrower launch)
/// by 256 / cols rows. With `x_fastest` (the default) consecutive threads take consecutive cells
/// of a row, so that a warp reads 32 cells of one row; without it, consecutive rows of the tile
/// (at 64 cells, 4 rows of 8 cells a warp: what Kokkos 4.6's MDRange gave these launches), kept
/// for the benchmarks to time against. No result depends on it: each cell runs the same body.
struct DeviceTiles {
  int cols = 64;
  bool x_fastest = true;
};
namespace impl {
inline DeviceTiles& device_tiles_ref() {
  static DeviceTiles t;
  return t;
}
}  // namespace impl
inline DeviceTiles device_tiles() { return impl::device_tiles_ref(); }
/// Sets the shape of later launches over cells; an error names a width that is not a power of
/// 2 in [4, 256].
inline void set_device_tiles(DeviceTiles t) {
  KSWEEP_REQUIRE(t.cols >= 4 && t.cols <= 256 && (t.cols & (t.cols - 1)) == 0,
                 "ksweep::core::set_device_tiles: cols = " << t.cols << " must be a power of 2 from 4 to 256");
  impl::device_tiles_ref() = t;
}

namespace impl {
/// A launch over cells: index i of a 1D range is lane i % 256 of tile i / 256; tiles are
/// 2^m_col_bits cells of x by 2^(8 - m_col_bits) rows, m_tiles_x of them along x; each cell
/// (row, col) of the rows x cols grid runs f(CellTag<Tag>, row, col) once.
template <class Tag, class Functor>
struct CellTiles {
  Functor m_f;
  // 6 ints: no padding after the functor (a launch trace reads every byte).
  int m_rows = 0, m_cols = 0;
  int m_tiles_x = 1;
  int m_col_bits = 6;
  int m_x_fastest = 1;
  int m_unused = 0;

  /// The tiles' grid for a rows x cols launch of shape `t`.
  CellTiles(Functor const& f, int rows, int cols, DeviceTiles const& t) : m_f(f), m_rows(rows), m_cols(cols) {
    int w = t.cols;
    while (w > 4 && w / 2 >= cols) w /= 2;  // the narrowest tile that holds a narrow launch
    m_col_bits = 0;
    while ((1 << m_col_bits) < w) ++m_col_bits;
    m_tiles_x = (cols + w - 1) / w;
    m_x_fastest = t.x_fastest ? 1 : 0;
  }
  CellTiles() = default;
  /// Indices of the launch: 256 a tile.
  std::int64_t size() const {
    int const tall = 1 << (8 - m_col_bits);
    return static_cast<std::int64_t>((m_rows + tall - 1) / tall) * m_tiles_x * 256;
  }
  KOKKOS_INLINE_FUNCTION void operator()(std::int64_t i) const {
    // The tile in 32 bits (2^31 tiles of 256 cells: far beyond any device's memory).
    int const tile = static_cast<int>(i >> 8), lane = static_cast<int>(i & 255), row_bits = 8 - m_col_bits;
    int const ty = tile / m_tiles_x, tx = tile - ty * m_tiles_x;
    int const lr = m_x_fastest ? lane >> m_col_bits : lane & ((1 << row_bits) - 1);
    int const lc = m_x_fastest ? lane & ((1 << m_col_bits) - 1) : lane >> row_bits;
    int const r = (ty << row_bits) + lr, c = (tx << m_col_bits) + lc;
    if (r < m_rows && c < m_cols) m_f(CellTag<Tag>{}, r, c);
  }
};

/// Launches a CellTiles over every cell of a rows x cols grid.
template <class Tag, class ExecSpace, class Functor>
void launch_tiles(ExecSpace const& space, char const* label, Functor const& f, int rows, int cols) {
  // The copy of f uncounted (f's views outlive the launch), as Kokkos copies it for the launch.
  auto const t = [&] {
    ksweep::impl::UncountedViews const uncounted;
    return CellTiles<Tag, Functor>(f, rows, cols, device_tiles());
  }();
  launch_for(label, Kokkos::RangePolicy<ExecSpace, Kokkos::IndexType<std::int64_t>>(space, 0, t.size()), t);
}
}  // namespace impl

/// Launches a functor with RowTag<Tag>(row) and CellTag<Tag>(row, col) operators over a rows x
/// cols grid: rows (vectorised runs) on host backends, cells on devices and, with `by_cells`, on
/// hosts too (the `cells` schedule, in the devices' tiles: see DeviceTiles). Host launches flush
/// subnormals per chunk.
template <class Tag, class ExecSpace, class Functor>
void launch_grid(ExecSpace const& space, char const* label, Functor const& f, int rows, int cols, bool by_cells) {
  if constexpr (impl::runs_by_rows<ExecSpace>) {
    if (by_cells) impl::launch_tiles<Tag>(space, label, f, rows, cols);
    else impl::launch_host_rows<Tag>(space, label, f, rows);
  } else {
    (void)by_cells;
    impl::launch_tiles<Tag>(space, label, f, rows, cols);
  }
}

}  // namespace ksweep::core
