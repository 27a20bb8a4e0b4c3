// ksweep_bench: Google Benchmark suite of ksweep on every enabled Kokkos backend.
//
//   ksweep_bench [--smoke] [--benchmark_* flags]
//
// --smoke shrinks every problem to a tiny size (the ctest smoke tests). The STREAM triad of
// every backend is measured once before the benchmarks run; the best one is the bandwidth bound
// of the "roofline_fraction" counters and is reported in the context.

#include "bench_common.hpp"
#include "bench_context.hpp"

#include <ksweep/base/config.hpp>
#include <ksweep/base/revision.hpp>
#include <ksweep/core/runtime.hpp>

#include <Kokkos_Core.hpp>
#include <benchmark/benchmark.h>

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

namespace {

std::string read_first_line(std::string const& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

std::string join(std::vector<std::string> const& v) {
  std::string s;
  for (auto const& x : v) s += (s.empty() ? "" : ",") + x;
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace ksweep;
  bench::Options opts;
  // Our own flags first, so that neither Kokkos nor Google Benchmark sees them.
  std::vector<char*> args;
  for (int i = 0; i < argc; ++i) {
    if (std::strcmp(argv[i], "--smoke") == 0) opts.smoke = true;
    else args.push_back(argv[i]);
  }
  int n_args = static_cast<int>(args.size());
  args.push_back(nullptr);

  std::optional<core::KokkosSession> kokkos;
  try {
    kokkos.emplace(n_args, args.data());
  } catch (std::exception const& e) {
    std::fprintf(stderr, "ksweep_bench: %s\n", e.what());
    return 2;
  }
  bench::install_space_memory();
  benchmark::Initialize(&n_args, args.data());
  if (benchmark::ReportUnrecognizedArguments(n_args, args.data())) return 1;

  char const* omp = std::getenv("OMP_NUM_THREADS");
  benchmark::AddCustomContext("ksweep_git_revision", KSWEEP_GIT_REVISION);
  benchmark::AddCustomContext("ksweep_version", KSWEEP_VERSION_STRING);
  benchmark::AddCustomContext("kokkos_version", core::kokkos_version());
  benchmark::AddCustomContext("kokkos_backends", join(core::enabled_backends()));
  benchmark::AddCustomContext("kokkos_default_backend", core::default_backend());
  benchmark::AddCustomContext("kokkos_concurrency", std::to_string(core::default_concurrency()));
  benchmark::AddCustomContext("omp_num_threads", omp ? omp : "unset");
  benchmark::AddCustomContext("cpu_model", ksweep::bench::cpu_model());
  benchmark::AddCustomContext("l2_cache", read_first_line("/sys/devices/system/cpu/cpu0/cache/index2/size"));
  benchmark::AddCustomContext("l3_cache", read_first_line("/sys/devices/system/cpu/cpu0/cache/index3/size"));
  benchmark::AddCustomContext("hostname", ksweep::bench::host_name());
  benchmark::AddCustomContext("smoke", opts.smoke ? "true" : "false");
#if defined(KOKKOS_ENABLE_CUDA)
  {
    cudaDeviceProp prop;
    int dev = 0;
    if (cudaGetDevice(&dev) == cudaSuccess && cudaGetDeviceProperties(&prop, dev) == cudaSuccess)
      benchmark::AddCustomContext("gpu_model", prop.name);
  }
#endif

  // Bandwidth references, before anything else allocates.
  for (auto const& b : bench::backends()) {
    double const bw = b.measure_triad(opts);
    bench::set_triad(b.name, bw);
    benchmark::AddCustomContext("triad_bytes_per_second_" + b.name, std::to_string(bw));
  }
  benchmark::AddCustomContext("triad_bytes_per_second", std::to_string(bench::triad_best()));
  std::fprintf(stderr, "ksweep_bench: triad %.2f GB/s (best over backends)%s\n", bench::triad_best() * 1e-9,
               opts.smoke ? ", smoke sizes" : "");

  for (auto const& b : bench::backends()) b.register_benchmarks(opts);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  if (bench::error_count() > 0) {
    std::fprintf(stderr, "ksweep_bench: %d benchmark(s) ended in an error (see ERROR OCCURRED above)\n",
                 bench::error_count());
    return 1;
  }
  return 0;
}
