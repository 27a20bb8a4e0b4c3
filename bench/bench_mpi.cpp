// MPI all-reduce of model-sized gradients (double, as ksweep fwi sums them) through
// ksweep::comm::Communicator. Run with mpirun -n 1..4; rank 0 reports.
//   mpirun -n 4 ksweep_bench_mpi --benchmark_out=allreduce-4.json --benchmark_out_format=json

#include "bench_context.hpp"

#include <ksweep/comm/communicator.hpp>
#include <ksweep/base/config.hpp>

#include <Kokkos_Core.hpp>
#include <benchmark/benchmark.h>

#include <chrono>
#include <cstring>
#include <string>

namespace {

void allreduce(benchmark::State& state) {
  ksweep::comm::Communicator comm;
  int const nz = static_cast<int>(state.range(0)), nx = static_cast<int>(state.range(1));
  Kokkos::View<double**, Kokkos::LayoutRight> grad("grad", nz, nx);
  Kokkos::deep_copy(grad, 1.0);
  Kokkos::DefaultExecutionSpace space;
  for (auto _ : state) {
    comm.barrier();
    auto const t0 = std::chrono::steady_clock::now();
    comm.allreduce_sum_view(space, grad);
    double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    secs = comm.allreduce_sum(secs) / comm.size();  // mean over ranks
    state.SetIterationTime(secs);
  }
  state.counters["ranks"] = comm.size();
  state.counters["bytes"] = static_cast<double>(grad.span() * sizeof(double));
  state.counters["bytes_per_second"] = benchmark::Counter(static_cast<double>(grad.span() * sizeof(double)),
                                                          benchmark::Counter::kIsIterationInvariantRate);
}

class Silent : public benchmark::BenchmarkReporter {
 public:
  bool ReportContext(Context const&) override { return true; }
  void ReportRuns(std::vector<Run> const&) override {}
};

}  // namespace

int main(int argc, char** argv) {
  ksweep::comm::Environment mpi(argc, argv);
  Kokkos::ScopeGuard kokkos(argc, argv);
  ksweep::comm::Communicator comm;
  bool smoke = false;
  for (int i = 1; i < argc; ++i) smoke = smoke || std::strcmp(argv[i], "--smoke") == 0;
  std::string const ranks = std::to_string(comm.size());
  // A fixed iteration count: every rank must run the same number of collectives.
  auto reg = [&](int nz, int nx) {
    benchmark::RegisterBenchmark(("allreduce/" + std::string(Kokkos::DefaultExecutionSpace::name()) +
                                  "/ranks:" + ranks + "/nz:" + std::to_string(nz) + "/nx:" + std::to_string(nx))
                                     .c_str(),
                                 allreduce)
        ->Args({nz, nx})
        ->Iterations(smoke ? 3 : 50)
        ->UseManualTime()
        ->Unit(benchmark::kMicrosecond);
  };
  if (smoke) {
    reg(16, 32);
  } else {
    reg(141, 681);
    reg(281, 1361);
    reg(561, 2721);
  }
  benchmark::AddCustomContext("ksweep_git_revision", KSWEEP_GIT_REVISION);
  benchmark::AddCustomContext("mpi_ranks", ranks);
  benchmark::AddCustomContext("cpu_model", ksweep::bench::cpu_model());
  benchmark::AddCustomContext("hostname", ksweep::bench::host_name());
  benchmark::AddCustomContext("omp_num_threads", std::to_string(Kokkos::DefaultExecutionSpace{}.concurrency()));
  std::vector<char*> args;
  for (int i = 0; i < argc; ++i) {
    if (std::strcmp(argv[i], "--smoke") == 0) continue;
    // Only rank 0 writes the output file.
    if (!comm.is_root() && std::strncmp(argv[i], "--benchmark_out", 15) == 0) continue;
    args.push_back(argv[i]);
  }
  int n = static_cast<int>(args.size());
  benchmark::Initialize(&n, args.data());
  if (comm.is_root()) {
    benchmark::RunSpecifiedBenchmarks();
  } else {
    Silent silent;
    benchmark::RunSpecifiedBenchmarks(&silent);
  }
  benchmark::Shutdown();
  return 0;
}
