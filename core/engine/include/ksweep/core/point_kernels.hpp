#pragma once
/// \file point_kernels.hpp
/// The point work of every physics: sources injected and receivers sampled at points between
/// cells through their interpolation taps, for a batch of shots on the device.

#include <ksweep/base/launch.hpp>
#include <ksweep/core/kernel_grid.hpp>

#include <Kokkos_Core.hpp>

#include <cstdint>

namespace ksweep::core {

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
  // Scalars without padding (a launch trace reads every byte of a functor): two ints, a double.
  int m_it;
  int m_time_major;  // values indexed [shot][time][point]
  double m_scale;    // 1 or -1 (exact in Real)
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
      f = f + static_cast<Real>(m_scale) * (w * v);
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
  int m_time_major;  // two ints: no padding (a launch trace reads every byte of a functor)
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
  std::int64_t m_n_first;  // 8 bytes: no padding after it (a launch trace reads every byte)
  KOKKOS_INLINE_FUNCTION void operator()(int r) const {
    if (r < m_n_first) m_first(r);
    else m_second(r - static_cast<int>(m_n_first));
  }
};

/// A functor that does nothing (an empty part of a Concat). Eight defined bytes rather than an
/// empty class's one, which padding would follow (a launch trace reads every byte of a functor).
struct NoWork {
  std::int64_t m_unused = 0;
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
