// MPI all-reduce of model-sized gradients (double, as ksweep fwi sums them) through
// ksweep::comm::Communicator. Run with mpirun -n 1..4; rank 0 reports.
//   mpirun -n 4 ksweep_bench_mpi --benchmark_out=allreduce-4.json --benchmark_out_format=json

#include "bench_mpi_run.hpp"

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
  ksweep::bench::run_on_ranks(argc, argv, comm.rank(), comm.size(), Kokkos::DefaultExecutionSpace{}.concurrency());
  return 0;
}
