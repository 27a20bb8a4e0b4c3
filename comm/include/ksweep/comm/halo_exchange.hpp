#pragma once
/// \file halo_exchange.hpp
/// The halo exchange of a model split into domains (core/domain.hpp): each subdomain's fields
/// are rows of NX + 2R cells, [shot][field row][NX + 2R] (field rows (NZ + 2R) in 2D,
/// (NZ + 2R)(NY + 2R) in 3D, z slowest); after every step the R cells beyond each cut face are
/// copied from the neighbour's first R cells on its side. Faces are packed and unpacked by
/// kernels on the execution space and travel through nonblocking MPI, from host copies unless
/// MPI takes device memory (comm::staged(), gpu_aware_mpi()); begin() sends, finish()
/// receives, so that a propagator runs its inner cells in between. Every face travels at once:
/// the corners of the halo (beyond an x and a y cut at once) are not exchanged, and no stencil
/// reads them (the stencils are stars, and off-grid taps across a cut are refused).

#include <ksweep/base/launch.hpp>
#include <ksweep/comm/communicator.hpp>

#include <Kokkos_Core.hpp>

#include <chrono>
#include <cstddef>
#include <type_traits>

namespace ksweep::comm {

/// A subdomain's padded grid (no halo), the reach R of its stencil, and its neighbours' ranks
/// in the domain communicator per cut face (-1: no neighbour, the face is the model's edge).
struct HaloGeometry {
  int dim = 2, radius = 0;
  int NZ = 0, NY = 1, NX = 0;
  int left = -1, right = -1, front = -1, back = -1;
  int field_rows() const { return (NZ + 2 * radius) * (dim == 3 ? NY + 2 * radius : 1); }
  int row_cells() const { return NX + 2 * radius; }
};

namespace impl {
// Faces are packed into and unpacked from contiguous buffers by one flat launch: on hosts one
// index per line of the face (a row's R cells at a cut along x, a whole row at a cut along y),
// looped over inside; on devices one index per value.
template <class MemorySpace>
inline constexpr bool per_line = Kokkos::SpaceAccessibility<Kokkos::HostSpace, MemorySpace>::accessible;

// Columns [c0, c0 + R) of every field row of the first shots, to or from buf [shot][row][R].
template <class Real, class MemorySpace>
struct PackColumns {
  Kokkos::View<Real***, Kokkos::LayoutRight, MemorySpace> u, buf;
  int c0, R;
  bool unpack;
  KOKKOS_INLINE_FUNCTION void line(std::size_t l, int k0, int k1) const {
    std::size_t const rows = buf.extent(1);
    int const s = static_cast<int>(l / rows), r = static_cast<int>(l - static_cast<std::size_t>(s) * rows);
    Real* b = buf.data() + l * static_cast<std::size_t>(R);
    for (int k = k0; k < k1; ++k) {
      if (unpack) u(s, r, c0 + k) = b[k];
      else b[k] = u(s, r, c0 + k);
    }
  }
  KOKKOS_INLINE_FUNCTION void operator()(std::size_t i) const {
    if constexpr (per_line<MemorySpace>) {
      line(i, 0, R);
    } else {
      std::size_t const l = i / static_cast<std::size_t>(R);
      int const k = static_cast<int>(i - l * static_cast<std::size_t>(R));
      line(l, k, k + 1);
    }
  }
  std::size_t range(int shots) const {
    return static_cast<std::size_t>(shots) * buf.extent(1) * (per_line<MemorySpace> ? 1 : static_cast<std::size_t>(R));
  }
};
// Field rows of y index [y0, y0 + R) of every z, cells [R, R + NX) (the subdomain's own x
// range), to or from buf [shot][z * R + k][NX] (3D).
template <class Real, class MemorySpace>
struct PackRows {
  Kokkos::View<Real***, Kokkos::LayoutRight, MemorySpace> u, buf;
  int y0, R, rows_y;  // rows_y = NY + 2R
  bool unpack;
  KOKKOS_INLINE_FUNCTION void line(std::size_t l, int x0, int x1) const {
    std::size_t const zrs = buf.extent(1);
    int const s = static_cast<int>(l / zrs), zr = static_cast<int>(l - static_cast<std::size_t>(s) * zrs);
    int const z = zr / R, k = zr - z * R, fr = z * rows_y + y0 + k;
    Real* b = buf.data() + l * buf.extent(2);
    Real* f = &u(s, fr, R);
    for (int x = x0; x < x1; ++x) {
      if (unpack) f[x] = b[x];
      else b[x] = f[x];
    }
  }
  KOKKOS_INLINE_FUNCTION void operator()(std::size_t i) const {
    if constexpr (per_line<MemorySpace>) {
      line(i, 0, static_cast<int>(buf.extent(2)));
    } else {
      std::size_t const l = i / buf.extent(2);
      int const x = static_cast<int>(i - l * buf.extent(2));
      line(l, x, x + 1);
    }
  }
  std::size_t range(int shots) const {
    return static_cast<std::size_t>(shots) * buf.extent(1) * (per_line<MemorySpace> ? 1 : buf.extent(2));
  }
};
}  // namespace impl

template <class Real, class ExecSpace>
class HaloExchange {
 public:
  using memory_space = typename ExecSpace::memory_space;
  using field3 = Kokkos::View<Real***, Kokkos::LayoutRight, memory_space>;

  HaloExchange(Communicator domain, HaloGeometry const& g, ExecSpace const& space, int max_shots)
      : m_comm(std::move(domain)), m_g(g), m_space(space), m_max_shots(max_shots) {
    int const R = g.radius;
    int const xc[4] = {R, g.NX, 0, g.NX + R}, yr[4] = {R, g.NY, 0, g.NY + R};
    for (int i = 0; i < 4; ++i) m_xcols[i] = xc[i], m_yrows[i] = yr[i];
    auto alloc = [&](char const* label, int a, int b) {
      return field3(Kokkos::view_alloc(space, Kokkos::WithoutInitializing, std::string(label)), max_shots, a, b);
    };
    if (g.left >= 0 || g.right >= 0)
      for (int i = 0; i < 4; ++i) {
        m_xbuf[i] = alloc("ksweep::comm::halo_x", g.field_rows(), R);
        m_xhost[i] = host_side(m_xbuf[i]);
      }
    if (g.dim == 3 && (g.front >= 0 || g.back >= 0))
      for (int i = 0; i < 4; ++i) {
        m_ybuf[i] = alloc("ksweep::comm::halo_y", (g.NZ + 2 * R) * R, g.NX);
        m_yhost[i] = host_side(m_ybuf[i]);
      }
  }

  HaloGeometry const& geometry() const { return m_g; }
  Communicator const& communicator() const { return m_comm; }

  /// Fills the halo beyond the cut faces of the first `shots` shots of `u`: begin() then
  /// finish().
  void exchange(field3 const& u, int shots) {
    begin(u, shots);
    finish(u, shots);
  }

  /// Packs the R cells next to each cut face of the first `shots` shots of `u` (fencing `space`
  /// first: they must be final) and starts sending them and receiving the neighbours'. Launches
  /// on `space` may run until finish(), as long as they write no cell within R of a cut face.
  void begin(field3 const& u, int shots) {
    auto const t0 = std::chrono::steady_clock::now();
    KSWEEP_REQUIRE(m_requests.empty(), "ksweep::comm::HaloExchange::begin: the previous exchange is not finished");
    auto const& g = m_g;
    int const R = g.radius;
    bool const x = g.left >= 0 || g.right >= 0, y = g.dim == 3 && (g.front >= 0 || g.back >= 0);
    // x: [0] to the left: cells [R, 2R); [1] to the right: cells [NX, NX + R); [2] from the left
    // into [0, R); [3] from the right into [NX + R, NX + 2R). y likewise with rows of y.
    if (x)
      for (int i = 0; i < 2; ++i)
        if ((i == 0 ? g.left : g.right) >= 0)
          pack(impl::PackColumns<Real, memory_space>{u, m_xbuf[i], m_xcols[i], R, false}, shots,
               "ksweep::comm::pack_x");
    if (y)
      for (int i = 0; i < 2; ++i)
        if ((i == 0 ? g.front : g.back) >= 0)
          pack(impl::PackRows<Real, memory_space>{u, m_ybuf[i], m_yrows[i], R, g.NY + 2 * R, false}, shots,
               "ksweep::comm::pack_y");
    // Staged: the faces to the host mirrors, ordered after the packing; one fence for all.
    if (x && is_staged(m_xbuf, m_xhost)) copy(m_xbuf, m_xhost, 0, shots, g.left, g.right);
    if (y && is_staged(m_ybuf, m_yhost)) copy(m_ybuf, m_yhost, 0, shots, g.front, g.back);
    m_space.fence();
    if (x) post(m_xhost, m_xbuf[0].extent(1) * m_xbuf[0].extent(2), shots, g.left, g.right, 0);
    if (y) post(m_yhost, m_ybuf[0].extent(1) * m_ybuf[0].extent(2), shots, g.front, g.back, 2);
    m_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }

  /// Completes the exchange begin() started: waits for the neighbours' faces, unpacks them into
  /// the halo of `u`, and fences `space`.
  void finish(field3 const& u, int shots) {
    auto const t0 = std::chrono::steady_clock::now();
    m_requests.wait_all();
    auto const& g = m_g;
    int const R = g.radius;
    if (g.left >= 0 || g.right >= 0) {
      if (is_staged(m_xbuf, m_xhost)) copy(m_xbuf, m_xhost, 2, shots, g.left, g.right);
      for (int i = 2; i < 4; ++i)
        if ((i == 2 ? g.left : g.right) >= 0)
          pack(impl::PackColumns<Real, memory_space>{u, m_xbuf[i], m_xcols[i], R, true}, shots,
               "ksweep::comm::unpack_x");
    }
    if (g.dim == 3 && (g.front >= 0 || g.back >= 0)) {
      if (is_staged(m_ybuf, m_yhost)) copy(m_ybuf, m_yhost, 2, shots, g.front, g.back);
      for (int i = 2; i < 4; ++i)
        if ((i == 2 ? g.front : g.back) >= 0)
          pack(impl::PackRows<Real, memory_space>{u, m_ybuf[i], m_yrows[i], R, g.NY + 2 * R, true}, shots,
               "ksweep::comm::unpack_y");
    }
    m_space.fence();
    m_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    ++m_exchanges;
  }

  /// The first `shots` shots of `v` put together over the domain communicator by bitwise or:
  /// each subdomain holds its own points' values and +0 elsewhere.
  void gather(field3 const& v, int shots) {
    m_space.fence();
    if (m_comm.size() == 1 || shots == 0) return;
    auto part = Kokkos::subview(v, Kokkos::make_pair(0, shots), Kokkos::ALL, Kokkos::ALL);
    std::size_t const bytes = part.span() * sizeof(Real);
    with_mpi_data(m_space, part, true, true, [&](Real* p) { m_comm.allreduce_bor(p, bytes); });
  }

  /// Bytes sent per exchange of `shots` shots (all faces), and the exchanges and seconds so far.
  std::size_t bytes_per_exchange(int shots) const {
    std::size_t b = 0;
    int const R = m_g.radius;
    std::size_t const x = static_cast<std::size_t>(shots) * m_g.field_rows() * R * sizeof(Real);
    std::size_t const y = static_cast<std::size_t>(shots) * (m_g.NZ + 2 * R) * R * m_g.NX * sizeof(Real);
    b += (m_g.left >= 0 ? x : 0) + (m_g.right >= 0 ? x : 0);
    if (m_g.dim == 3) b += (m_g.front >= 0 ? y : 0) + (m_g.back >= 0 ? y : 0);
    return b;
  }
  long long exchanges() const { return m_exchanges; }
  double seconds() const { return m_seconds; }

 private:
  template <class Pack>
  void pack(Pack const& p, int shots, char const* label) {
    launch_for(label, Kokkos::RangePolicy<ExecSpace>(m_space, 0, p.range(shots)), p);
  }

  template <class View>
  static auto part(View const& v, int shots) {
    return Kokkos::subview(v, Kokkos::make_pair(0, shots), Kokkos::ALL, Kokkos::ALL);
  }
  // Whether MPI works on host mirrors of the buffers (else on the buffers themselves).
  static bool is_staged(field3 const (&buf)[4], typename field3::HostMirror const (&host)[4]) {
    return host[0].data() != buf[0].data();
  }

  // Starts host[0] to `low` and host[1] to `high`, host[2] from `low` and host[3] from `high`
  // (`values` per shot each). Tags: tag0 low-going, tag0 + 1 high-going (x faces 0, y faces 2:
  // a rank may be two faces' neighbour).
  void post(typename field3::HostMirror const (&host)[4], std::size_t values, int shots, int low, int high, int tag0) {
    std::size_t const bytes = static_cast<std::size_t>(shots) * values * sizeof(Real);
    m_comm.irecv_bytes(host[2].data(), bytes, low, tag_base + tag0 + 1, m_requests);
    m_comm.irecv_bytes(host[3].data(), bytes, high, tag_base + tag0, m_requests);
    m_comm.isend_bytes(host[0].data(), bytes, low, tag_base + tag0, m_requests);
    m_comm.isend_bytes(host[1].data(), bytes, high, tag_base + tag0 + 1, m_requests);
  }
  // Staged faces between the buffers and their host mirrors, on the instance (no fence): the
  // outgoing pair [0], [1] to the host (first = 0), the incoming pair [2], [3] back (first = 2);
  // those of a side without neighbour are left alone.
  void copy(field3 const (&buf)[4], typename field3::HostMirror const (&host)[4], int first, int shots, int low,
            int high) {
    for (int i = first; i < first + 2; ++i) {
      if ((i == first ? low : high) < 0) continue;
      if (first == 0) Kokkos::deep_copy(m_space, part(host[i], shots), part(buf[i], shots));
      else Kokkos::deep_copy(m_space, part(buf[i], shots), part(host[i], shots));
    }
  }

  // What MPI reads and writes for a buffer: a host copy where staged(), else the buffer itself.
  static typename field3::HostMirror host_side(field3 const& b) {
    if (comm::staged<memory_space>()) return Kokkos::create_mirror(b);
    return typename field3::HostMirror(b.data(), b.extent(0), b.extent(1), b.extent(2));
  }

  Communicator m_comm;
  HaloGeometry m_g;
  ExecSpace m_space;
  int m_max_shots;
  field3 m_xbuf[4], m_ybuf[4];
  typename field3::HostMirror m_xhost[4], m_yhost[4];  // the buffers themselves unless staged
  int m_xcols[4] = {}, m_yrows[4] = {};                // first column / row of y of each buffer's cells
  Requests m_requests;                                 // the transfers begin() started
  static constexpr int tag_base = 40;
  long long m_exchanges = 0;
  double m_seconds = 0;
};

}  // namespace ksweep::comm
