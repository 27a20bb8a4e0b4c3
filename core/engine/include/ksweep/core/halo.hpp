#pragma once
/// \file halo.hpp
/// What a subdomain's propagator needs from its neighbours (domain decomposition, domain.hpp):
/// the halo of its fields at the cut faces after every step, and the records of the receivers
/// the other subdomains hold. The propagator calls these; comm::HaloExchange implements them
/// over MPI (the program and the library wire the two together), so that the physics knows
/// nothing of MPI.

#include <Kokkos_Core.hpp>

#include <functional>

namespace ksweep::core {

template <class Real, class MemorySpace>
struct HaloLink {
  using field3 = Kokkos::View<Real***, Kokkos::LayoutRight, MemorySpace>;
  using record_view = Kokkos::View<Real***, Kokkos::LayoutRight, MemorySpace>;
  /// Fills the halo beyond the cut faces of the first `shots` shots of a wavefield level
  /// ([shot][field row][NX + 2R]) with the neighbours' cells, in two halves: begin() once the
  /// cells within R of the cut faces are final (it fences the propagator's instance, then sends
  /// them), finish() after the launches that may run meanwhile, none writing those cells (it
  /// receives, fills the halo, and fences). An exchange without overlap is the two in a row.
  std::function<void(field3 const&, int shots)> begin, finish;
  /// Records [shot][time][receiver] of the first `shots` shots: every subdomain's receivers
  /// into every subdomain's records, bit for bit (each receiver is held by one subdomain).
  std::function<void(record_view const&, int shots)> gather_records;
  explicit operator bool() const { return static_cast<bool>(begin); }
};

/// Zeroes the values of the points held elsewhere: v [shot][time][point] (time_major) or
/// [shot][point][time], live [shot][point] (1: held here).
template <class Real, class MemorySpace>
struct ZeroElsewhere {
  Kokkos::View<Real***, Kokkos::LayoutRight, MemorySpace> v;
  Kokkos::View<unsigned char**, Kokkos::LayoutRight, MemorySpace> live;
  bool time_major;
  KOKKOS_INLINE_FUNCTION void operator()(int s, int i, int j) const {
    if (!live(s, time_major ? j : i)) v(s, i, j) = Real(0);
  }
};

}  // namespace ksweep::core
