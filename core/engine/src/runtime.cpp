#include <ksweep/base/config.hpp>
#include <ksweep/base/revision.hpp>
#include <ksweep/base/error.hpp>
#include <ksweep/core/runtime.hpp>
#include <ksweep/core/step_graph.hpp>

#include <Kokkos_Core.hpp>

#if defined(KOKKOS_ENABLE_CUDA)
#include <cuda_runtime_api.h>
#endif

#include <sched.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <initializer_list>
#include <mutex>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

namespace ksweep::core {

int choose_device(int local_rank, int device_count, int requested) {
  KSWEEP_REQUIRE(local_rank >= 0, "ksweep::core::choose_device: local rank " << local_rank << " must be >= 0");
  if (requested >= 0) {
    KSWEEP_REQUIRE(requested < device_count, "ksweep::core::choose_device: device "
                                                 << requested << " was asked for (KSWEEP_DEVICE or device=), but "
                                                 << device_count << " device(s) are visible (0 .. " << device_count - 1
                                                 << ")");
    return requested;
  }
  if (device_count <= 0) return -1;
  return local_rank % device_count;
}

namespace {
/// The first of the environment variables `names` that holds an integer in [lo, 2^30); -1 if none.
int integer_from_environment(std::initializer_list<char const*> names, long lo) {
  for (char const* name : names) {
    char const* v = std::getenv(name);
    if (!v || !*v) continue;
    char* end = nullptr;
    long const r = std::strtol(v, &end, 10);
    if (*end == '\0' && r >= lo && r < (1L << 30)) return static_cast<int>(r);
  }
  return -1;
}
}  // namespace

int local_rank_from_environment() {
  return integer_from_environment({"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "MV2_COMM_WORLD_LOCAL_RANK",
                                   "SLURM_LOCALID", "PALS_LOCAL_RANKID"},
                                  0);
}

int local_size_from_environment() {
  return integer_from_environment({"OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS", "MV2_COMM_WORLD_LOCAL_SIZE"}, 1);
}

int available_cores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0) {
    int const n = CPU_COUNT(&set);
    if (n > 0) return n;
  }
  return std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
}

int max_host_threads() {
#if defined(KOKKOS_ENABLE_OPENMP)
  return 512;  // Kokkos' OpenMP backend keeps a pool of 512 thread slots (3.4 through 4.x)
#else
  return 1 << 20;
#endif
}

namespace {
HostThreads& last_host_threads() {
  static HostThreads h;
  return h;
}
}  // namespace

HostThreads HostThreads::choose(int argc, char* argv[], int local_size) {
  HostThreads h;
  std::ostringstream os;
  if (char const* b = std::getenv("OMP_PROC_BIND"); b && *b) {
    h.binding = b;
    os << "OMP_PROC_BIND=" << b << " (from the environment)";
  } else {
    // Before Kokkos starts: it reads the variable (and warns without it). The OpenMP runtime
    // read its environment when it was loaded: unset, its threads are not bound either.
    setenv("OMP_PROC_BIND", "false", 1);
    h.binding = "false";
    os << "threads not bound (OMP_PROC_BIND unset: set to false; set OMP_PROC_BIND=spread OMP_PLACES=threads "
          "on a node this process has alone)";
  }
  char const* given = nullptr;
  std::string value;
  for (int i = 1; i < argc && argv; ++i)
    for (char const* flag : {"--kokkos-num-threads", "--kokkos-threads"})
      if (argv[i] && std::strncmp(argv[i], flag, std::strlen(flag)) == 0) {
        given = flag;
        char const* eq = std::strchr(argv[i], '=');
        value = eq ? eq + 1 : (i + 1 < argc && argv[i + 1] ? argv[i + 1] : "");
      }
  for (char const* name : {"OMP_NUM_THREADS", "KOKKOS_NUM_THREADS"})
    if (char const* v = std::getenv(name); !given && v && *v) given = name, value = v;
  if (given) {
    // The first entry (OMP_NUM_THREADS may list one per nesting level), where it is a number.
    char* end = nullptr;
    long const n = std::strtol(value.c_str(), &end, 10);
    if (end != value.c_str())
      KSWEEP_REQUIRE(n <= max_host_threads(), given << " = " << value
                                                    << ": more host threads than the backend runs (at most "
                                                    << max_host_threads() << ")");
  }
  os << "; threads: ";
  if (given) {
    os << "as " << given << " says";
  } else {
    int const cores = available_cores();
    int const online = std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
    if (local_size < 0) local_size = local_size_from_environment();
    // A mask narrower than the machine is a share the launcher (or the user) gave this process.
    if (local_size > 1 && cores >= online) {
      h.threads = std::max(1, cores / local_size);
      os << h.threads << " (" << cores << " cores / " << local_size << " ranks on this node)";
    } else {
      os << "every core this process may use (" << cores << ")";
    }
  }
  h.description = os.str();
  last_host_threads() = h;
  return h;
}

HostThreads const& HostThreads::chosen() { return last_host_threads(); }

#if defined(KOKKOS_ENABLE_CUDA)
namespace {
/// Devices this process sees (CUDA_VISIBLE_DEVICES applies); 0 where the driver cannot say.
int visible_devices() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return n;
}
}  // namespace
#endif

int device_for_process(int local_rank, int argc, char* argv[]) {
#if defined(KOKKOS_ENABLE_CUDA)
  for (int i = 1; i < argc; ++i)
    for (char const* flag : {"--kokkos-device-id", "--kokkos-device", "--kokkos-map-device-id-by"})
      if (std::strncmp(argv[i], flag, std::strlen(flag)) == 0) return -1;
  if (char const* k = std::getenv("KOKKOS_DEVICE_ID"); k && *k) return -1;
  int requested = -1;
  if (char const* v = std::getenv("KSWEEP_DEVICE"); v && *v) {
    char* end = nullptr;
    long const d = std::strtol(v, &end, 10);
    KSWEEP_REQUIRE(*end == '\0' && d >= 0 && d < (1L << 20),
                   "ksweep: KSWEEP_DEVICE='" << v << "' is not allowed (allowed: a device index, 0 or more)");
    requested = static_cast<int>(d);
  }
  if (local_rank < 0) local_rank = local_rank_from_environment();
  int const count = visible_devices();
  if (count == 0) return -1;  // Kokkos says why it cannot start
  return choose_device(local_rank < 0 ? 0 : local_rank, count, requested);
#else
  (void)local_rank, (void)argc, (void)argv;
  return -1;
#endif
}

int device_id() {
#if defined(KOKKOS_ENABLE_CUDA)
  if constexpr (std::is_same_v<Kokkos::DefaultExecutionSpace, Kokkos::Cuda>) return Kokkos::Cuda().cuda_device();
  else return -1;
#else
  return -1;
#endif
}

std::string device_description() {
  std::ostringstream os;
#if defined(KOKKOS_ENABLE_CUDA)
  if (int const id = device_id(); id >= 0) {
    cudaDeviceProp p{};
    os << "Cuda device " << id;
    if (cudaGetDeviceProperties(&p, id) == cudaSuccess) os << ": " << p.name;
    return os.str();
  }
#endif
  int const threads = default_concurrency();
  os << Kokkos::DefaultExecutionSpace::name() << " on the host (" << threads
     << (threads == 1 ? " thread)" : " threads)");
  return os.str();
}

KokkosSession::KokkosSession(int& argc, char* argv[], int local_rank) {
  (void)step_graphs();  // KSWEEP_CUDA_GRAPHS checked on every build, before anything starts
  try {
    int const device = device_for_process(local_rank, argc, argv);
    HostThreads const host = HostThreads::choose(argc, argv);
    // argv with the flags added; what Kokkos leaves of it goes back into argv.
    std::vector<std::string> flags;
#if KOKKOS_VERSION >= 40000
    if (device >= 0) flags.push_back("--kokkos-device-id=" + std::to_string(device));
    if (host.threads > 0) flags.push_back("--kokkos-num-threads=" + std::to_string(host.threads));
#else
    if (device >= 0) flags.push_back("--kokkos-device=" + std::to_string(device));
    if (host.threads > 0) flags.push_back("--kokkos-threads=" + std::to_string(host.threads));
#endif
    if (flags.empty()) {
      Kokkos::initialize(argc, argv);
    } else {
      std::vector<char*> args(argv, argv + argc);
      for (auto& f : flags) args.push_back(f.data());
      args.push_back(nullptr);
      int n = static_cast<int>(args.size()) - 1;
      Kokkos::initialize(n, args.data());
      int kept = 0;
      for (int i = 0; i < n; ++i) {
        char* const a = args[static_cast<std::size_t>(i)];
        bool const added = std::any_of(flags.begin(), flags.end(), [&](std::string const& f) { return a == f.data(); });
        if (!added) argv[kept++] = a;
      }
      for (int i = kept; i < argc; ++i) argv[i] = nullptr;
      argc = kept;
    }
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
  os << "MPI: " << (KSWEEP_ENABLE_MPI ? "enabled" : "disabled")
     << "; HDF5: " << (KSWEEP_ENABLE_HDF5 ? "enabled" : "disabled") << "\n";
  if (verbose_kokkos_config) Kokkos::print_configuration(os, true);
  return os.str();
}

}  // namespace ksweep::core
