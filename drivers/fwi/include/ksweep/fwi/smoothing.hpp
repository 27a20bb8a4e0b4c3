#pragma once
/// \file smoothing.hpp
/// Separable Gaussian smoothing (sigma in cells, edges clamped) of a field [nz][ny][nx]
/// (ny = 1 in 2D), along x, then y, then z, in double: on the host (the starting model) and on
/// the device (the gradient), the same operations in the same order, so the two give the same
/// bits.

#include <ksweep/base/launch.hpp>

#include <Kokkos_Core.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <functional>
#include <string>
#include <vector>

namespace ksweep::fwi {

/// The normalised weights k[-r..r], r = ceil(3 sigma), of a Gaussian of `sigma` cells.
std::vector<double> gaussian_weights(double sigma);

/// Host smoothing of `f` (sigma <= 0: a copy). `between_blocks`, when given, is called before
/// each block of lines (a plane of the axis above), so that a long smoothing can be stopped.
std::vector<double> gaussian_smooth(std::vector<double> const& f, int nz, int ny, int nx, double sigma,
                                    std::function<void()> const& between_blocks = {});

namespace impl {
/// One pass along an axis of `len` cells with stride `stride`: out = k * in, edges clamped.
template <class ExecSpace, class DView>
void smooth_pass(ExecSpace const& space, DView const& in, DView const& out, DView const& k, int r, int len,
                 std::size_t stride) {
  std::size_t const block = stride * static_cast<std::size_t>(len);
  launch_for(
      "ksweep::fwi::smooth_pass", Kokkos::RangePolicy<ExecSpace>(space, 0, in.extent(0)),
      KOKKOS_LAMBDA(std::size_t idx) {
        std::size_t const base = idx / block * block, within = idx - base;
        int const i = static_cast<int>(within / stride);
        std::size_t const j = within - static_cast<std::size_t>(i) * stride;
        double s = 0;
        for (int d = -r; d <= r; ++d) {
          int const c = i + d < 0 ? 0 : (i + d > len - 1 ? len - 1 : i + d);
          s += k(d + r) * in(base + j + static_cast<std::size_t>(c) * stride);
        }
        out(idx) = s;
      });
}
}  // namespace impl

/// Device smoothing of `field` in place, on `space` (asynchronous; two double fields of its
/// size are allocated on `space` for the passes).
template <class ExecSpace, class View>
void gaussian_smooth(ExecSpace const& space, View const& field, int nz, int ny, int nx, double sigma) {
  if (sigma <= 0) return;
  using Real = typename View::non_const_value_type;
  using memory_space = typename ExecSpace::memory_space;
  using dview = Kokkos::View<double*, memory_space>;
  std::size_t const n = field.extent(0);
  auto const w = gaussian_weights(sigma);
  int const r = static_cast<int>(w.size() / 2);
  dview k(Kokkos::view_alloc(space, Kokkos::WithoutInitializing, std::string("ksweep::fwi::smooth_weights")), w.size());
  Kokkos::deep_copy(space, k,
                    Kokkos::View<double const*, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>(w.data(), w.size()));
  dview a(Kokkos::view_alloc(space, Kokkos::WithoutInitializing, std::string("ksweep::fwi::smooth_a")), n);
  dview b(Kokkos::view_alloc(space, Kokkos::WithoutInitializing, std::string("ksweep::fwi::smooth_b")), n);
  launch_for(
      "ksweep::fwi::smooth_in", Kokkos::RangePolicy<ExecSpace>(space, 0, n),
      KOKKOS_LAMBDA(std::size_t i) { a(i) = static_cast<double>(field(i)); });
  impl::smooth_pass(space, a, b, k, r, nx, 1);
  if (ny > 1) {
    impl::smooth_pass(space, b, a, k, r, ny, static_cast<std::size_t>(nx));
    std::swap(a, b);
  }
  impl::smooth_pass(space, b, a, k, r, nz, static_cast<std::size_t>(ny) * nx);
  launch_for(
      "ksweep::fwi::smooth_out", Kokkos::RangePolicy<ExecSpace>(space, 0, n),
      KOKKOS_LAMBDA(std::size_t i) { field(i) = static_cast<Real>(a(i)); });
}

}  // namespace ksweep::fwi
