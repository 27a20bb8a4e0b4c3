#include <ksweep/base/config.hpp>
#include <ksweep/base/error.hpp>
#include <ksweep/core/runtime.hpp>

#include <Kokkos_Core.hpp>

#include <atomic>
#include <cstdint>
#include <fstream>
#include <mutex>
#include <sstream>
#include <stdexcept>
#include <string>

namespace ksweep::core {

KokkosSession::KokkosSession(int& argc, char* argv[]) {
  try {
    Kokkos::initialize(argc, argv);
  } catch (std::exception const& e) {
    std::string reason = e.what();
    auto const nl = reason.find('\n');
    if (nl != std::string::npos) reason.resize(nl);
    std::string backends;
    for (auto const& b : enabled_backends()) backends += (backends.empty() ? "" : ", ") + b;
    throw std::runtime_error("cannot start Kokkos (" + backends + "): " + reason);
  }
}

KokkosSession::~KokkosSession() {
  if (Kokkos::is_initialized()) Kokkos::finalize();
}

namespace {
struct LaunchCounts {
  std::atomic<long> total{0};
  std::atomic<bool> active{false};
  std::mutex mutex;
  std::map<std::string, long> by_label;
};
LaunchCounts& launch_counts() {
  static LaunchCounts c;
  return c;
}
void begin_launch(char const* label, std::uint32_t, std::uint64_t* id) {
  auto& c = launch_counts();
  ++c.total;
  std::lock_guard<std::mutex> lock(c.mutex);
  ++c.by_label[label];
  *id = 0;
}
void end_launch(std::uint64_t) {}
void set_launch_callbacks(bool on) {
  namespace T = Kokkos::Tools::Experimental;
  T::set_begin_parallel_for_callback(on ? &begin_launch : nullptr);
  T::set_begin_parallel_reduce_callback(on ? &begin_launch : nullptr);
  T::set_begin_parallel_scan_callback(on ? &begin_launch : nullptr);
  T::set_end_parallel_for_callback(on ? &end_launch : nullptr);
  T::set_end_parallel_reduce_callback(on ? &end_launch : nullptr);
  T::set_end_parallel_scan_callback(on ? &end_launch : nullptr);
}
}  // namespace

LaunchCounter::LaunchCounter() {
  KSWEEP_REQUIRE(!launch_counts().active.exchange(true), "ksweep::core::LaunchCounter: another counter is alive");
  reset();
  set_launch_callbacks(true);
}
LaunchCounter::~LaunchCounter() {
  Kokkos::fence();
  set_launch_callbacks(false);
  launch_counts().active = false;
}
long LaunchCounter::count() const {
  Kokkos::fence();
  return launch_counts().total;
}
std::map<std::string, long> LaunchCounter::by_label() const {
  Kokkos::fence();
  std::lock_guard<std::mutex> lock(launch_counts().mutex);
  return launch_counts().by_label;
}
void LaunchCounter::reset() {
  Kokkos::fence();
  auto& c = launch_counts();
  c.total = 0;
  std::lock_guard<std::mutex> lock(c.mutex);
  c.by_label.clear();
}

std::vector<std::string> enabled_backends() {
  std::vector<std::string> out;
#if defined(KOKKOS_ENABLE_SERIAL)
  out.emplace_back("Serial");
#endif
#if defined(KOKKOS_ENABLE_OPENMP)
  out.emplace_back("OpenMP");
#endif
#if defined(KOKKOS_ENABLE_THREADS)
  out.emplace_back("Threads");
#endif
#if defined(KOKKOS_ENABLE_CUDA)
  out.emplace_back("Cuda");
#endif
#if defined(KOKKOS_ENABLE_HIP)
  out.emplace_back("HIP");
#endif
  return out;
}

std::string default_backend() { return Kokkos::DefaultExecutionSpace::name(); }

std::string kokkos_version() {
  int const v = KOKKOS_VERSION;
  std::ostringstream os;
  os << v / 10000 << "." << (v / 100) % 100 << "." << v % 100;
  return os.str();
}

int default_concurrency() { return Kokkos::DefaultExecutionSpace{}.concurrency(); }

namespace {
/// A "Vm...:" line of /proc/self/status in bytes (0 where unknown).
std::size_t proc_status_bytes(char const* key) {
  std::ifstream in("/proc/self/status");
  std::string line;
  std::string const k = std::string(key) + ":";
  while (std::getline(in, line)) {
    if (line.rfind(k, 0) == 0) {
      std::istringstream is(line.substr(k.size()));
      std::size_t kb = 0;
      is >> kb;
      return kb * 1024;
    }
  }
  return 0;
}
}  // namespace

std::size_t peak_memory_bytes() { return proc_status_bytes("VmHWM"); }
std::size_t current_memory_bytes() { return proc_status_bytes("VmRSS"); }

std::string describe_build(bool verbose_kokkos_config) {
  std::ostringstream os;
  os << "ksweep " << KSWEEP_VERSION_STRING << " (git " << KSWEEP_GIT_REVISION << ")\n";
  os << "Kokkos " << kokkos_version() << ", backends:";
  for (auto const& b : enabled_backends()) os << " " << b;
  os << "; default " << default_backend() << " with concurrency " << default_concurrency() << "\n";
  os << "MPI: " << (KSWEEP_ENABLE_MPI ? "enabled" : "disabled") << (KSWEEP_ENABLE_GPU_AWARE_MPI ? " (GPU-aware)" : "")
     << "; HDF5: " << (KSWEEP_ENABLE_HDF5 ? "enabled" : "disabled") << "\n";
  if (verbose_kokkos_config) Kokkos::print_configuration(os, true);
  return os.str();
}

}  // namespace ksweep::core
