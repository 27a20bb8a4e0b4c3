#pragma once
/// \file profiling.hpp
/// Named regions for Kokkos Tools (profilers show the time of each phase and the kernels in it).

#include <Kokkos_Core.hpp>

#include <string>

namespace ksweep::core {

/// Pushes a Kokkos Tools region on construction and pops it on destruction, so that a region
/// is closed on every path out of a scope, exceptions included. (Kokkos::Profiling::ScopedRegion
/// exists only from Kokkos 4.1.)
class ScopedRegion {
 public:
  explicit ScopedRegion(std::string const& name) { Kokkos::Profiling::pushRegion(name); }
  ~ScopedRegion() { Kokkos::Profiling::popRegion(); }
  ScopedRegion(ScopedRegion const&) = delete;
  ScopedRegion& operator=(ScopedRegion const&) = delete;
  ScopedRegion(ScopedRegion&&) = delete;
  ScopedRegion& operator=(ScopedRegion&&) = delete;
};

}  // namespace ksweep::core
