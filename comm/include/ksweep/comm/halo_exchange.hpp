#pragma once
/// \file halo_exchange.hpp
/// The halo exchange of a model split into domains (core/domain.hpp): each subdomain's fields
/// are rows of NX + 2R cells, [shot][field row][NX + 2R] (field rows (NZ + 2R) in 2D,
/// (NZ + 2R)(NY + 2R) in 3D, z slowest); after every step the R cells beyond each cut face are
/// copied from the neighbour's first R cells on its side. Faces are packed and unpacked by
/// kernels on the execution space and travel through MPI, from host mirrors unless the build
/// enables GPU-aware MPI. The x faces go first, then the y faces with their x halo, so that the
/// corners hold the diagonal neighbours' cells too.

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
// Field rows of y index [y0, y0 + R) of every z (whole rows, halo included), to or from
// buf [shot][z * R + k][cell] (3D).
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
    Real* f = &u(s, fr, 0);
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
        m_ybuf[i] = alloc("ksweep::comm::halo_y", (g.NZ + 2 * R) * R, g.row_cells());
        m_yhost[i] = host_side(m_ybuf[i]);
      }
  }

  HaloGeometry const& geometry() const { return m_g; }
  Communicator const& communicator() const { return m_comm; }

  /// Fills the halo beyond the cut faces of the first `shots` shots of `u`; fences `space`
  /// first (the level's cells must be final) and before it returns.
  void exchange(field3 const& u, int shots) {
    auto const t0 = std::chrono::steady_clock::now();
    auto const& g = m_g;
    int const R = g.radius;
    if (g.left >= 0 || g.right >= 0) {
      // [0] to the left: cells [R, 2R); [1] to the right: cells [NX, NX + R); [2] from the left
      // into [0, R); [3] from the right into [NX + R, NX + 2R).
      int const cols[4] = {R, g.NX, 0, g.NX + R};
      for (int i = 0; i < 2; ++i)
        if ((i == 0 ? g.left : g.right) >= 0)
          pack(impl::PackColumns<Real, memory_space>{u, m_xbuf[i], cols[i], R, false}, shots, "ksweep::comm::pack_x");
      swap(m_xbuf, m_xhost, shots, g.left, g.right);
      for (int i = 2; i < 4; ++i)
        if ((i == 2 ? g.left : g.right) >= 0)
          pack(impl::PackColumns<Real, memory_space>{u, m_xbuf[i], cols[i], R, true}, shots, "ksweep::comm::unpack_x");
    }
    if (g.dim == 3 && (g.front >= 0 || g.back >= 0)) {
      int const rows_y = g.NY + 2 * R;
      int const y0[4] = {R, g.NY, 0, g.NY + R};
      for (int i = 0; i < 2; ++i)
        if ((i == 0 ? g.front : g.back) >= 0)
          pack(impl::PackRows<Real, memory_space>{u, m_ybuf[i], y0[i], R, rows_y, false}, shots,
               "ksweep::comm::pack_y");
      swap(m_ybuf, m_yhost, shots, g.front, g.back);
      for (int i = 2; i < 4; ++i)
        if ((i == 2 ? g.front : g.back) >= 0)
          pack(impl::PackRows<Real, memory_space>{u, m_ybuf[i], y0[i], R, rows_y, true}, shots,
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
    with_host(part, true, true, [&](Real* p) { m_comm.allreduce_bor(p, bytes); });
  }

  /// Bytes sent per exchange of `shots` shots (all faces), and the exchanges and seconds so far.
  std::size_t bytes_per_exchange(int shots) const {
    std::size_t b = 0;
    int const R = m_g.radius;
    std::size_t const x = static_cast<std::size_t>(shots) * m_g.field_rows() * R * sizeof(Real);
    std::size_t const y = static_cast<std::size_t>(shots) * (m_g.NZ + 2 * R) * R * m_g.row_cells() * sizeof(Real);
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

  // buf[0] to `low` and buf[1] to `high`; buf[2] from `low` and buf[3] from `high`.
  void swap(field3 (&buf)[4], typename field3::HostMirror (&host)[4], int shots, int low, int high) {
    m_space.fence();
    std::size_t const bytes = static_cast<std::size_t>(shots) * buf[0].extent(1) * buf[0].extent(2) * sizeof(Real);
    auto part = [&](auto const& v) {
      return Kokkos::subview(v, Kokkos::make_pair(0, shots), Kokkos::ALL, Kokkos::ALL);
    };
    // Through the host mirrors made once (the buffers themselves where MPI reads them).
    bool const staged = host[0].data() != buf[0].data();
    if (staged) {
      for (int i = 0; i < 2; ++i) Kokkos::deep_copy(m_space, part(host[i]), part(buf[i]));
      m_space.fence();
    }
    m_comm.sendrecv_bytes(host[0].data(), bytes, low, host[3].data(), bytes, high);  // low-going
    m_comm.sendrecv_bytes(host[1].data(), bytes, high, host[2].data(), bytes, low);  // high-going
    if (staged) {
      for (int i = 2; i < 4; ++i) Kokkos::deep_copy(m_space, part(buf[i]), part(host[i]));
      m_space.fence();
    }
  }

  // What MPI reads and writes for a buffer: the buffer where the host (or GPU-aware MPI) can
  // reach it, else a host mirror.
  static typename field3::HostMirror host_side(field3 const& b) {
    if constexpr (Kokkos::SpaceAccessibility<Kokkos::HostSpace, memory_space>::accessible ||
                  KSWEEP_ENABLE_GPU_AWARE_MPI) {
      return typename field3::HostMirror(b.data(), b.extent(0), b.extent(1), b.extent(2));
    } else {
      return Kokkos::create_mirror_view(Kokkos::HostSpace(), b);
    }
  }

  // f(pointer) on host-accessible data of the contiguous view v (a host mirror of device
  // views without GPU-aware MPI, filled from v when `reads`, copied back when `writes`).
  template <class View, class F>
  void with_host(View const& v, bool reads, bool writes, F&& f) {
    using host_accessible = Kokkos::SpaceAccessibility<Kokkos::HostSpace, typename View::memory_space>;
    if constexpr (host_accessible::accessible || KSWEEP_ENABLE_GPU_AWARE_MPI) {
      (void)reads, (void)writes;
      f(v.data());
    } else {
      auto h = Kokkos::create_mirror_view(Kokkos::HostSpace(), v);
      if (reads) {
        Kokkos::deep_copy(m_space, h, v);
        m_space.fence();
      }
      f(h.data());
      if (writes) {
        Kokkos::deep_copy(m_space, v, h);
        m_space.fence();
      }
    }
  }

  Communicator m_comm;
  HaloGeometry m_g;
  ExecSpace m_space;
  int m_max_shots;
  field3 m_xbuf[4], m_ybuf[4];
  typename field3::HostMirror m_xhost[4], m_yhost[4];  // the buffers themselves unless staged
  long long m_exchanges = 0;
  double m_seconds = 0;
};

}  // namespace ksweep::comm
