#pragma once
// The run of an MPI benchmark program (ksweep_bench_mpi, ksweep_bench_domains): every rank runs
// the registered benchmarks (each has a fixed iteration count, so that every rank runs the same
// collectives), rank 0 alone reports and writes --benchmark_out; the machine's context is
// recorded.

#include "bench_context.hpp"

#include <ksweep/base/config.hpp>
#include <ksweep/base/revision.hpp>

#include <benchmark/benchmark.h>

#include <cstring>
#include <string>
#include <vector>

namespace ksweep::bench {

/// Runs the registered benchmarks with arguments argv (--smoke left out) on `rank` of `ranks`.
inline void run_on_ranks(int argc, char** argv, int rank, int ranks, int threads) {
  class Silent : public benchmark::BenchmarkReporter {
   public:
    bool ReportContext(Context const&) override { return true; }
    void ReportRuns(std::vector<Run> const&) override {}
  };
  benchmark::AddCustomContext("ksweep_git_revision", KSWEEP_GIT_REVISION);
  benchmark::AddCustomContext("mpi_ranks", std::to_string(ranks));
  benchmark::AddCustomContext("cpu_model", cpu_model());
  benchmark::AddCustomContext("hostname", host_name());
  benchmark::AddCustomContext("omp_num_threads", std::to_string(threads));
  std::vector<char*> args;
  for (int i = 0; i < argc; ++i) {
    if (std::strcmp(argv[i], "--smoke") == 0) continue;
    if (rank != 0 && std::strncmp(argv[i], "--benchmark_out", 15) == 0) continue;  // rank 0 writes
    args.push_back(argv[i]);
  }
  int n = static_cast<int>(args.size());
  benchmark::Initialize(&n, args.data());
  if (rank == 0) {
    benchmark::RunSpecifiedBenchmarks();
  } else {
    Silent silent;
    benchmark::RunSpecifiedBenchmarks(&silent);
  }
  benchmark::Shutdown();
}

}  // namespace ksweep::bench
