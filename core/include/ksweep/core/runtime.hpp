#pragma once
/// \file runtime.hpp
/// What this build and this run use: backends, threads, versions.

#include <cstddef>
#include <map>
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
/// Counts kernel launches (parallel_for, parallel_reduce, parallel_scan) through the Kokkos
/// Tools callbacks while it lives; one may be alive at a time. The callbacks cost time: keep
/// counting out of timed runs.
class LaunchCounter {
 public:
  LaunchCounter();
  ~LaunchCounter();
  LaunchCounter(LaunchCounter const&) = delete;
  LaunchCounter& operator=(LaunchCounter const&) = delete;
  /// Launches since construction or the last reset() (fences first).
  long count() const;
  /// Launches per kernel label.
  std::map<std::string, long> by_label() const;
  /// Fences, then starts counting from zero.
  void reset();
};

/// Kokkos for the life of a program: Kokkos::initialize(argc, argv) on construction,
/// Kokkos::finalize on destruction. A failure to start (a CUDA build without a usable GPU, a
/// driver older than the toolkit, a device already taken) throws std::runtime_error whose
/// message is one line: "cannot start Kokkos (<enabled backends>): <the first line of the
/// reason>", for programs to print and exit with, instead of an abort.
class KokkosSession {
 public:
  KokkosSession(int& argc, char* argv[]);
  ~KokkosSession();
  KokkosSession(KokkosSession const&) = delete;
  KokkosSession& operator=(KokkosSession const&) = delete;
};

/// A human-readable description of the build and the Kokkos configuration.
std::string describe_build(bool verbose_kokkos_config = false);

}  // namespace ksweep::core
