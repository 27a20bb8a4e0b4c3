#pragma once
/// \file runtime.hpp
/// What this build and this run use: backends, threads, versions.

#include <cstddef>
#include <string>
#include <vector>

namespace ksweep::core {

/// Names of the enabled Kokkos execution spaces, e.g. {"Serial", "OpenMP"}.
std::vector<std::string> enabled_backends();
/// Name of Kokkos' default execution space.
std::string default_backend();
/// Kokkos version as "major.minor.patch".
std::string kokkos_version();
/// Concurrency of the default execution space (threads on hosts).
int default_concurrency();
/// Peak memory of this process in bytes (peak resident set, VmHWM); 0 where unknown.
std::size_t peak_memory_bytes();
/// Current memory of this process in bytes (resident set, VmRSS); 0 where unknown.
std::size_t current_memory_bytes();
/// A human-readable description of the build and the Kokkos configuration.
std::string describe_build(bool verbose_kokkos_config = false);

}  // namespace ksweep::core
