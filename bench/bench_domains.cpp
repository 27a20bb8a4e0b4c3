// A model split into domains over MPI ranks (parallel.domains): the halo exchange alone (bytes
// and time per step per rank) and the forward step of a split model, for strong scaling (the
// same model over 1..N domains) and weak scaling (a model N times wider over N domains). One
// domain per rank, one shot group; rank 0 reports the mean over ranks of each step's time.
//   mpirun -n 2 ksweep_bench_domains --benchmark_out=domains-2.json --benchmark_out_format=json

#include "bench_mpi_run.hpp"

#include <ksweep/base/config.hpp>
#include <ksweep/comm/communicator.hpp>
#include <ksweep/core/domain.hpp>
#include <ksweep/core/propagator.hpp>
#include <ksweep/core/wavelet.hpp>
#include <ksweep/fwi/domains.hpp>

#include <Kokkos_Core.hpp>
#include <benchmark/benchmark.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

using namespace ksweep;

namespace {

using Space = Kokkos::DefaultExecutionSpace;
constexpr int Order = 8;

comm::Communicator const& world() {
  static comm::Communicator c;
  return c;
}

// A smooth gradient model with a layer, [nz][ny][nx].
std::vector<float> velocity(core::ModelGrid const& g) {
  std::vector<float> v(static_cast<std::size_t>(g.cells()));
  for (int z = 0; z < g.nz; ++z)
    for (std::size_t k = 0; k < static_cast<std::size_t>(g.ny) * g.nx; ++k)
      v[static_cast<std::size_t>(z) * g.ny * g.nx + k] = static_cast<float>(1500.0 + 2000.0 * z / g.nz);
  return v;
}

struct Split {
  core::ModelGrid grid;
  core::DomainSplit split;
  int shots;
};

// Forward steps of `shots` shots on this rank's subdomain of `s`; with `halo_only`, only the
// exchange of the newest level per step; `overlap`: the steps send their cut faces while their
// inner cells run (else whole step, then exchange). Manual time: each step's mean over ranks;
// halo_seconds_per_step: the time spent in the exchange's calls (what the overlap leaves exposed).
template <int Dim>
void run(benchmark::State& state, Split const& s, bool halo_only, bool overlap = true) {
  using Prop = core::Propagator<float, Order, Space, Dim>;
  Space space;
  auto const dec = fwi::decompose(world(), s.split, s.grid, Order / 2);
  core::PmlConfig pml;
  pml.width = 20;
  auto const v = velocity(s.grid);
  auto const sub = core::subdomain(s.grid, pml, s.split, dec.domain_index, 3500.0);
  Prop prop(space, sub.grid, sub.pml, 1e-3, s.shots);
  auto const halo = fwi::link_halo(prop, dec, sub);
  prop.set_overlap(overlap);
  auto const part = core::extract(v.data(), s.grid, sub);
  prop.set_velocity(part.data());
  core::Survey survey;
  survey.n_shots = s.shots;
  survey.n_sources = 1;
  survey.n_receivers = 1;
  for (int i = 0; i < s.shots; ++i) {
    int const x = (2 * i + 1) * s.grid.nx / (2 * s.shots), y = s.grid.ny / 2;
    survey.sources.push_back({5, x, Dim == 3 ? y : 0});
    survey.receivers.push_back({5, x, Dim == 3 ? y : 0});
  }
  prop.set_survey(core::local_survey(survey, s.grid, s.split, sub));
  int const nt = 4000;
  auto const w = core::ricker(15.0, 0.08, 1e-3, nt);
  typename Prop::wavelet_view wv("w", s.shots, 1, nt);
  auto wh = Kokkos::create_mirror_view(wv);
  for (int i = 0; i < s.shots; ++i)
    for (int t = 0; t < nt; ++t) wh(i, 0, t) = static_cast<float>(w[t]);
  Kokkos::deep_copy(wv, wh);
  typename Prop::record_view rec("r", s.shots, nt, 1);
  prop.forward_reset();
  int n = 0;
  for (int i = 0; i < 20; ++i) prop.forward_step(n++ % nt, wv, rec);  // warm up: a live wavefield
  space.fence();
  double const t_halo0 = halo->seconds();
  long long const x0 = halo->exchanges();
  for (auto _ : state) {
    world().barrier();
    auto const t0 = std::chrono::steady_clock::now();
    if (halo_only) prop.exchange(prop.forward_newest());
    else prop.forward_step(n++ % nt, wv, rec);
    space.fence();
    double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    state.SetIterationTime(world().allreduce_sum(secs) / world().size());
  }
  double const exchanges = static_cast<double>(halo->exchanges() - x0);
  double halo_secs = exchanges > 0 ? (halo->seconds() - t_halo0) / exchanges : 0.0;
  halo_secs = world().allreduce_sum(halo_secs) / world().size();
  core::Layout const l = prop.layout();
  double const cells = static_cast<double>(l.padded_cells()) * s.shots;
  state.counters["ranks"] = world().size();
  state.counters["domains"] = s.split.count();
  state.counters["halo_bytes_per_step_rank0"] = static_cast<double>(halo->bytes_per_exchange(s.shots));
  state.counters["halo_seconds_per_step"] = halo_secs;
  state.counters["cells_per_rank0"] = cells;
  state.counters["cells_per_second_per_rank"] =
      benchmark::Counter(cells, benchmark::Counter::kIsIterationInvariantRate);
}

}  // namespace

int main(int argc, char** argv) {
  comm::Environment mpi(argc, argv);
  Kokkos::ScopeGuard kokkos(argc, argv);
  bool smoke = false;
  for (int i = 1; i < argc; ++i) smoke = smoke || std::strcmp(argv[i], "--smoke") == 0;
  int const ranks = world().size();
  std::string const backend = Space::name();
  int const iterations = smoke ? 3 : 200;
  auto reg = [&](std::string const& name, auto f) {
    benchmark::RegisterBenchmark(name.c_str(), f)
        ->Iterations(iterations)
        ->UseManualTime()
        ->Unit(benchmark::kMicrosecond);
  };
  std::string const tag = "/" + backend + "/ranks:" + std::to_string(ranks);
  // 2D: Marmousi's 12.5 m grid (281 x 1361), 4 shots, split along x into one domain per rank
  // (strong scaling); weak: 281 x 340 cells per domain.
  int const nz = smoke ? 40 : 281, nx = smoke ? 160 : 1361, wx = smoke ? 40 : 340;
  Split const strong2{core::ModelGrid(nz, nx, 12.5), {1, ranks}, 4};
  Split const weak2{core::ModelGrid(nz, wx * ranks, 12.5), {1, ranks}, 4};
  reg("halo_exchange_2d" + tag + "/nz:" + std::to_string(nz) + "/nx:" + std::to_string(nx),
      [=](benchmark::State& st) { run<2>(st, strong2, true); });
  // The split steps with and without overlap, side by side (/overlap:1, /overlap:0).
  auto both = [&](std::string const& name, auto f) {
    for (int o : {1, 0}) reg(name + "/overlap:" + std::to_string(o), [=](benchmark::State& st) { f(st, o == 1); });
  };
  both("forward_split_2d_strong" + tag + "/nz:" + std::to_string(nz) + "/nx:" + std::to_string(nx),
       [=](benchmark::State& st, bool o) { run<2>(st, strong2, false, o); });
  both("forward_split_2d_weak" + tag + "/nz:" + std::to_string(nz) + "/nx_per_domain:" + std::to_string(wx),
       [=](benchmark::State& st, bool o) { run<2>(st, weak2, false, o); });
  // 3D: 96^3 cells, 1 shot, split along x, along y, and (4 ranks) both. A cut along x packs R
  // cells of every row (a cache line per 4 values read), one along y whole rows.
  int const c3 = smoke ? 24 : 96;
  std::vector<core::DomainSplit> s3{{1, ranks}};
  if (ranks > 1) s3.push_back({ranks, 1});
  if (ranks == 4) s3.push_back({2, 2});
  for (auto const& sp : s3) {
    Split const strong3{core::ModelGrid::volume(c3, c3, c3, 10.0), sp, 1};
    std::string const n3 =
        "/n:" + std::to_string(c3) + "/domains:" + std::to_string(sp.ny_parts) + "x" + std::to_string(sp.nx_parts);
    reg("halo_exchange_3d" + tag + n3, [=](benchmark::State& st) { run<3>(st, strong3, true); });
    both("forward_split_3d_strong" + tag + n3, [=](benchmark::State& st, bool o) { run<3>(st, strong3, false, o); });
  }
  bench::run_on_ranks(argc, argv, world().rank(), ranks, Space{}.concurrency());
  return 0;
}
