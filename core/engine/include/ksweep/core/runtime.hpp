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

/// The device (GPU) a rank takes among the `device_count` its node shows it: `requested` where
/// >= 0 (an error when there is no such device), else its node-local rank modulo the count, so
/// that the ranks of a node take one device each and ranks beyond the count share them in turn;
/// -1 when it sees no device.
int choose_device(int local_rank, int device_count, int requested);
/// The rank of this process among those of its node, as the MPI launcher or the batch system
/// says in the environment (Open MPI, MPICH and Intel MPI, MVAPICH2, Slurm, Cray PALS); -1 where
/// none does.
int local_rank_from_environment();
/// The device this process starts Kokkos with, or -1 to leave the choice to Kokkos (host
/// backends; a device already given to Kokkos by --kokkos-device-id or KOKKOS_DEVICE_ID):
/// KSWEEP_DEVICE where set, else choose_device() of `local_rank` (-1: from the environment,
/// else 0) among the devices this process sees.
int device_for_process(int local_rank, int argc = 0, char* argv[] = nullptr);
/// The device this process computes on, once Kokkos runs: its index among the visible devices
/// (-1: the host).
int device_id();
/// Its name for reports, e.g. "Cuda device 0: NVIDIA H100 80GB HBM3" or "OpenMP on the host (16
/// threads)".
std::string device_description();

/// The host threads a process starts Kokkos with, chosen before it starts (HostThreads::choose).
/// - Binding: OMP_PROC_BIND as the environment gives it; unset, it is set to "false" (threads
///   not pinned; the OS places them), since a process cannot know what else runs on its cores
///   (other ranks, concurrent tests), where pinning every process's thread 0 to the same core
///   would serialise them. A user who owns the node sets OMP_PROC_BIND=spread OMP_PLACES=threads.
/// - Count: a --kokkos-num-threads / --kokkos-threads flag, OMP_NUM_THREADS or
///   KOKKOS_NUM_THREADS where given; else the cores this process may run on (its affinity mask),
///   divided among the ranks of its node (the launcher's local size; at least 1) when the mask
///   is the whole machine (a narrower mask is already this process's share: a launcher's binding).
struct HostThreads {
  int threads = 0;          ///< the count chosen (0: left to Kokkos, from the environment or a flag)
  std::string binding;      ///< OMP_PROC_BIND's value in effect
  std::string description;  ///< one line for `ksweep info`: what was chosen and why
  /// Decides, sets OMP_PROC_BIND where unset, and returns the choice (`local_size`: the ranks of
  /// this node, -1: from the environment). Throws ksweep::Error on a count above
  /// max_host_threads().
  static HostThreads choose(int argc, char* argv[], int local_size = -1);
  /// The choice of the last choose() in this process (empty before).
  static HostThreads const& chosen();
};
/// The most host threads the backend runs (Kokkos' OpenMP backend: 512); HostThreads::choose
/// refuses a count above it, naming where it came from.
int max_host_threads();
/// The ranks on this process's node, as the MPI launcher says in the environment (Open MPI,
/// MPICH and Intel MPI, MVAPICH2); -1 where none does.
int local_size_from_environment();
/// The cores this process may run on (its CPU affinity mask; the hardware's where unknown).
int available_cores();

/// Kokkos for the life of a program: Kokkos::initialize(argc, argv) on construction, on the
/// device of device_for_process(local_rank), and Kokkos::finalize on destruction. A failure to
/// start (a CUDA build without a usable GPU, a
/// driver older than the toolkit, a device already taken) throws std::runtime_error whose
/// message is one line: "cannot start Kokkos (<enabled backends>): <the first line of the
/// reason>", for programs to print and exit with, instead of an abort.
class KokkosSession {
 public:
  KokkosSession(int& argc, char* argv[], int local_rank = -1);
  ~KokkosSession();
  KokkosSession(KokkosSession const&) = delete;
  KokkosSession& operator=(KokkosSession const&) = delete;
};

/// A human-readable description of the build and the Kokkos configuration.
std::string describe_build(bool verbose_kokkos_config = false);

}  // namespace ksweep::core
