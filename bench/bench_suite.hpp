#pragma once
/// \file bench_suite.hpp
/// Every benchmark of ksweep, written once against an execution space; bench_<backend>.cpp
/// instantiates it for each enabled Kokkos backend.
///
/// Families (names "family/Backend/key:value/..."):
///  - stream_copy, stream_triad: the bandwidth reference (3 x 64 MiB double arrays);
///  - forward: Propagator::forward_step loops (fp32, 20-cell CPML), grids from in-cache to far
///    out of cache, orders 2/4/8, batches on a 141 x 681 (Marmousi-sized) grid, and nt series;
///  - gradient: GradientEngine::loss_and_gradient, strategy x location x dtype;
///  - marmousi: the peer comparison's cases (8 shots of 141 x 681 at 25 m, 20-cell CPML, 200
///    receivers, nt 2000, dt 2 ms, 5 Hz Ricker), forward and forward + gradient at orders 4 and
///    8, with the schedule and the subnormal flushing as parameters; scripts/peer_deepwave.py
///    times Deepwave on the same cases and the report puts them side by side;
///  - cube3d: 3D forward and forward + gradient on N^3 cubes (N = 48 fits in the last-level cache,
///    128 does not), orders 4 and 8; scripts/peer_deepwave.py --dim 3 times Deepwave on the same
///    cubes; cube3d_memory: a 3D gradient's memory, full against boundary, per dtype;
///  - deepwave: with KSWEEP_DEEPWAVE_LIB (the path of a libdeepwave_C.so a user built), Deepwave's
///    2D scalar propagator called directly (deepwave_direct.hpp) on the marmousi batch, forward
///    and gradient at orders 4 and 8, on the CPU's threads or on the GPU beside ksweep's rows,
///    its records compared with ksweep's;
///  - codec_encode, codec_decode: the boundary codecs;
///  - store_write, store_read: StepStore transfers (host memory and files in the temp dir).
/// Every benchmark times itself (UseManualTime, wall clock around fenced work), so that set-up
/// and resets stay out of the numbers. Bytes-per-cell models are in docs/PERFORMANCE.md.

#include "bench_common.hpp"
#include "deepwave_direct.hpp"

#include <ksweep/base/fp_env.hpp>
#include <ksweep/core/propagator.hpp>
#include <ksweep/core/wavelet.hpp>
#include <ksweep/core/runtime.hpp>
#include <ksweep/storage/codec.hpp>
#include <ksweep/core/gradient.hpp>
#include <ksweep/storage/step_store.hpp>

#include <Kokkos_Core.hpp>
#include <benchmark/benchmark.h>

#include <fcntl.h>
#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <stdexcept>
#include <exception>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace ksweep::bench {

using benchmark::Counter;

/// The benchmark's peak of the bytes Kokkos allocated in ExecSpace's memory space since
/// reset_peak_rss() (`device_peak_bytes`: the GPU's memory on device backends, the host's on
/// host backends) and, on CUDA, in its host-pinned space (`pinned_peak_bytes`).
template <class ExecSpace>
void record_space_memory(benchmark::State& state) {
  using memory_space = typename ExecSpace::memory_space;
  state.counters["device_peak_bytes"] = static_cast<double>(space_peak_increase(memory_space::name()));
#if defined(KOKKOS_ENABLE_CUDA)
  if constexpr (std::is_same_v<memory_space, Kokkos::CudaSpace>)
    state.counters["pinned_peak_bytes"] = static_cast<double>(space_peak_increase(Kokkos::CudaHostPinnedSpace::name()));
#endif
}

// -------------------------------------------------------------------------------------------
// STREAM copy and triad
// -------------------------------------------------------------------------------------------

/// First touch of the STREAM arrays by the backend that uses them. (A free function: nvcc
/// does not allow an extended lambda inside a constructor.)
template <class ExecSpace, class View>
void stream_first_touch(ExecSpace const& space, View const& a, View const& b, View const& c) {
  Kokkos::parallel_for(
      "ksweep::bench::first_touch", Kokkos::RangePolicy<ExecSpace>(space, 0, a.extent(0)),
      KOKKOS_LAMBDA(std::size_t i) {
        a(i) = 0.0;
        b(i) = 1.0;
        c(i) = 2.0;
      });
  space.fence();
}

/// Three double arrays of n elements, first touched by the backend that uses them.
template <class ExecSpace>
struct StreamArrays {
  using view = Kokkos::View<double*, typename ExecSpace::memory_space>;
  view a, b, c;
  explicit StreamArrays(ExecSpace const& space, std::size_t n)
      : a(Kokkos::view_alloc(space, Kokkos::WithoutInitializing, std::string("ksweep::bench::a")), n),
        b(Kokkos::view_alloc(space, Kokkos::WithoutInitializing, std::string("ksweep::bench::b")), n),
        c(Kokkos::view_alloc(space, Kokkos::WithoutInitializing, std::string("ksweep::bench::c")), n) {
    stream_first_touch(space, a, b, c);
  }
};

template <class ExecSpace>
void stream_copy(ExecSpace const& space, StreamArrays<ExecSpace> const& s) {
  auto a = s.a, b = s.b;
  Kokkos::parallel_for(
      "ksweep::bench::stream_copy", Kokkos::RangePolicy<ExecSpace>(space, 0, a.extent(0)),
      KOKKOS_LAMBDA(std::size_t i) { a(i) = b(i); });
}

template <class ExecSpace>
void stream_triad(ExecSpace const& space, StreamArrays<ExecSpace> const& s) {
  auto a = s.a, b = s.b, c = s.c;
  double const q = 3.0;
  Kokkos::parallel_for(
      "ksweep::bench::stream_triad", Kokkos::RangePolicy<ExecSpace>(space, 0, a.extent(0)),
      KOKKOS_LAMBDA(std::size_t i) { a(i) = b(i) + q * c(i); });
}

inline std::size_t stream_elements(Options const& o) {
  return o.smoke ? (std::size_t(1) << 17) : (std::size_t(64) << 20) / sizeof(double);
}

/// Best triad bandwidth (bytes/s, 24 B/element) over `reps` fenced runs.
template <class ExecSpace>
double measure_triad(Options const& o) {
  ExecSpace space;
  StreamArrays<ExecSpace> s(space, stream_elements(o));
  double best = 0;
  int const reps = o.smoke ? 3 : 20;
  for (int r = 0; r < reps; ++r) {
    Timer t;
    stream_triad(space, s);
    space.fence();
    best = std::max(best, 24.0 * static_cast<double>(s.a.extent(0)) / t.seconds());
  }
  return best;
}

template <class ExecSpace>
void bm_stream(benchmark::State& state, Options o, bool triad) {
  ExecSpace space;
  StreamArrays<ExecSpace> s(space, stream_elements(o));
  double const bytes = (triad ? 24.0 : 16.0) * static_cast<double>(s.a.extent(0));
  double best = 0;
  for (auto _ : state) {
    Timer t;
    if (triad) stream_triad(space, s);
    else stream_copy(space, s);
    space.fence();
    double const sec = t.seconds();
    state.SetIterationTime(sec);
    best = std::max(best, bytes / sec);
  }
  state.counters["bytes_per_second"] = Counter(bytes * static_cast<double>(state.iterations()), Counter::kIsRate);
  state.counters["best_bytes_per_second"] = best;
}

// -------------------------------------------------------------------------------------------
// Forward propagation
// -------------------------------------------------------------------------------------------

/// Kernel launches made by f() (outside the timed runs: the counting callbacks cost time).
template <class F>
long count_launches(F const& f) {
  core::LaunchCounter counter;
  f();
  return counter.count();
}

struct ForwardCase {
  int nz, nx, shots, nt;  // nt <= 0: chosen for ~2e8 cell updates per run
};

/// Bytes the forward kernel moves per shot and step when every field streams from memory:
/// 4 reals per padded cell (read u^n, u^{n-1}, c; write u^{n+1}), plus, per axis of the layer,
/// psi and zeta read and written (4 reals) on that axis' strip cells.
/// Cells of the padded grid with layer terms, summed over the axes: along each axis a, the
/// (N_a - n_a + extra) planes across it (extra = 0: forward, 2M: adjoint).
inline double layer_cells(core::Layout const& l, int extra) {
  double const padded = static_cast<double>(l.padded_cells());
  double s = padded / l.NZ * (l.NZ - l.nz + extra) + padded / l.NX * (l.NX - l.nx + extra);
  if (l.dim == 3) s += padded / l.NY * (l.NY - l.ny + extra);
  return s;
}

template <class Real>
double forward_bytes_per_step(core::Layout const& l) {
  return 4.0 * sizeof(Real) * (static_cast<double>(l.padded_cells()) + layer_cells(l, 0));
}

template <class Real, class View>
void fill_wavelets(View const& w, double dt) {
  auto h = Kokkos::create_mirror_view(Kokkos::HostSpace(), w);
  auto const r = bench_wavelet(dt, static_cast<int>(w.extent(2)));
  for (std::size_t s = 0; s < w.extent(0); ++s)
    for (std::size_t i = 0; i < w.extent(1); ++i)
      for (std::size_t t = 0; t < w.extent(2); ++t) h(s, i, t) = static_cast<Real>(r[t]);
  Kokkos::deep_copy(w, h);
}

/// The benchmarks' absorbing layer.
inline core::PmlConfig bench_pml() {
  core::PmlConfig pml;
  pml.width = pml_width;
  return pml;
}

/// Smooth random model and a surface survey on a propagator; returns the receivers per shot.
template <class Prop>
int set_up(Prop& prop, int nz, int nx, int shots) {
  auto const vp = random_smooth_model(nz, nx);
  prop.set_velocity(vp.data());
  int const n_rec = std::min(nx, 100);
  prop.set_survey(surface_survey(shots, nz, nx, n_rec));
  return n_rec;
}

/// A batch of a ForwardCase: the propagator (fp32) with a smooth model and a surface survey, its
/// wavelets and records.
template <class ExecSpace, int Order>
struct BenchBatch {
  using prop_type = core::Propagator<float, Order, ExecSpace>;
  ExecSpace space;
  double dt = bench_dt();
  prop_type prop;
  int n_rec;
  typename prop_type::wavelet_view w;
  typename prop_type::record_view rec;
  explicit BenchBatch(ForwardCase const& c)
      : prop(space, core::ModelGrid{c.nz, c.nx, grid_spacing}, bench_pml(), dt, c.shots),
        n_rec(set_up(prop, c.nz, c.nx, c.shots)),
        w(Kokkos::view_alloc(space, std::string("ksweep::bench::wavelets")), c.shots, 1, c.nt),
        rec(Kokkos::view_alloc(space, std::string("ksweep::bench::records")), c.shots, c.nt, n_rec) {
    fill_wavelets<float>(w, dt);
  }
};

template <class ExecSpace, int Order>
void bm_forward(benchmark::State& state, ForwardCase c, std::string backend) {
  using Real = float;
  BenchBatch<ExecSpace, Order> b(c);
  auto& prop = b.prop;
  auto const& space = b.space;
  auto const& w = b.w;
  auto const& rec = b.rec;
  auto const& l = prop.layout();
  long long const cells = l.padded_cells() * c.shots;
  int const nt = c.nt;
  double total = 0;
  auto const steps = [&] {  // as Propagator::forward does: through the step graphs where they are on
    prop.run_steps([&] {
      for (int n = 0; n < nt; ++n) prop.forward_step(n, w, rec);
    });
  };
  if (core::step_graphs())  // the first run launches, the second captures: the timed runs replay
    for (int i = 0; i < 2; ++i) {
      prop.forward_reset();
      steps();
      space.fence();
    }
  for (auto _ : state) {
    prop.forward_reset();
    space.fence();
    Timer t;
    steps();
    prop.forward_finish(rec);
    space.fence();
    double const sec = t.seconds();
    state.SetIterationTime(sec);
    total += sec;
  }
  double const iters = static_cast<double>(state.iterations());
  double const cell_steps = static_cast<double>(cells) * nt;
  double const bytes16 = 4.0 * sizeof(Real) * cell_steps * iters;  // 16 B/cell-step for fp32
  double const bytes_cpml = forward_bytes_per_step<Real>(l) * c.shots * nt * iters;
  state.counters["cells_per_second"] = Counter(cell_steps * iters, Counter::kIsRate);
  state.counters["padded_cells"] = static_cast<double>(l.padded_cells());
  state.counters["nt"] = nt;
  state.counters["shots"] = c.shots;
  state.counters["state_bytes"] = static_cast<double>(prop.state_bytes() + prop.c().span() * sizeof(Real));
  state.counters["us_per_step"] = total / iters / nt * 1e6;
  if (core::step_graphs()) {
    auto const g = prop.graph_counts();
    state.counters["graph_replays"] = static_cast<double>(g.replays);
    state.counters["graph_captures"] = static_cast<double>(g.captures);
    state.counters["graph_failures"] = static_cast<double>(g.failures);
  }
  prop.forward_reset();
  state.counters["launches_per_step"] = static_cast<double>(count_launches([&] {
                                          for (int n = 0; n < nt; ++n) prop.forward_step(n, w, rec);
                                          prop.forward_finish(rec);
                                        })) /
                                        nt;
  {
    // The host's part of a replayed run: the steps traced, not launched (what a run through the
    // step graphs does on the host before its one graph launch).
    ksweep::impl::LaunchTrace trace;
    trace.make = false;
    Timer t;
    {
      ksweep::impl::ScopedTrace scope(&trace);
      for (int n = 0; n < nt; ++n) prop.forward_step(n, w, rec);
    }
    state.counters["traced_us_per_step"] = t.seconds() / nt * 1e6;
  }
  if (triad_best() > 0 && total > 0) {
    state.counters["roofline_fraction"] = bytes16 / total / triad_best();
    state.counters["roofline_fraction_cpml"] = bytes_cpml / total / triad_best();
  }
  if (triad_of(backend) > 0 && total > 0)
    state.counters["backend_roofline_fraction"] = bytes16 / total / triad_of(backend);
}

// -------------------------------------------------------------------------------------------
// Born modelling against the forward, same run
// -------------------------------------------------------------------------------------------

/// Times `run` (the iteration's time) and the forward of the same batch after it, in each
/// iteration: their sums over the iterations, in seconds (fenced).
template <class ExecSpace, int Order, class Run>
std::pair<double, double> time_against_forward(benchmark::State& state, BenchBatch<ExecSpace, Order>& b, Run&& run) {
  double op = 0, forward = 0;
  for (auto _ : state) {
    b.space.fence();
    Timer t;
    run();
    b.space.fence();
    double const sec = t.seconds();
    state.SetIterationTime(sec);
    op += sec;
    Timer f;
    b.prop.forward(b.w, b.rec);
    forward += f.seconds();
  }
  return {op, forward};
}

/// Born modelling of a batch (Propagator::born) and the forward of the same batch, timed in the
/// same run: us_per_step of each and their ratio (docs/PERFORMANCE.md: the byte model says 3.75
/// forward steps per Born step).
template <class ExecSpace, int Order>
void bm_born(benchmark::State& state, ForwardCase c) {
  using Real = float;
  BenchBatch<ExecSpace, Order> b(c);
  auto& prop = b.prop;
  auto const& space = b.space;
  auto const& w = b.w;
  auto const& rec = b.rec;
  int const nt = c.nt;
  // A perturbation of 2 % of a smooth model's velocity on every cell.
  auto const dv_host = random_smooth_model(c.nz, c.nx);
  Kokkos::View<Real**, Kokkos::LayoutRight, typename ExecSpace::memory_space> dv(
      Kokkos::view_alloc(space, std::string("ksweep::bench::scatter")), c.nz, c.nx);
  auto h = Kokkos::create_mirror_view(Kokkos::HostSpace(), dv);
  for (int z = 0; z < c.nz; ++z)
    for (int x = 0; x < c.nx; ++x) h(z, x) = Real(0.02) * dv_host[static_cast<std::size_t>(z) * c.nx + x];
  Kokkos::deep_copy(space, dv, h);
  auto const k = prop.born_scale(dv);
  auto const [born, forward] = time_against_forward(state, b, [&] { prop.born(w, k, rec); });
  double const iters = static_cast<double>(state.iterations());
  state.counters["us_per_step"] = born / iters / nt * 1e6;
  state.counters["forward_us_per_step"] = forward / iters / nt * 1e6;
  state.counters["born_over_forward"] = forward > 0 ? born / forward : 0.0;
  state.counters["shots"] = c.shots;
  state.counters["nt"] = nt;
  state.counters["launches_per_step"] = static_cast<double>(count_launches([&] { prop.born(w, k, rec); })) / nt;
}

/// One shot (or batch) of RTM as the library runs it (fwi::rtm): the background's records (a
/// forward), then J^T of the reflected data (the forward with boundary saving and the backward
/// with imaging, on the shipped store: boundary, device, fp16), timed with a plain forward of the
/// same batch in the same run: us_per_step of each and their ratio (docs/PERFORMANCE.md).
template <class ExecSpace, int Order>
void bm_rtm(benchmark::State& state, ForwardCase c) {
  using Real = float;
  using engine_type = core::GradientEngine<Real, Order, ExecSpace>;
  BenchBatch<ExecSpace, Order> b(c);
  auto& prop = b.prop;
  auto const& space = b.space;
  auto const& w = b.w;
  auto const& rec = b.rec;
  int const nt = c.nt;
  engine_type engine(prop, storage::make_storage_config("boundary", "device", "fp16", 64, "", true));
  typename engine_type::images_type images(space, c.nz, c.nx);
  typename BenchBatch<ExecSpace, Order>::prop_type::record_view data(
      Kokkos::view_alloc(space, std::string("ksweep::bench::data")), c.shots, nt, b.n_rec),
      synthetic(Kokkos::view_alloc(space, std::string("ksweep::bench::synthetic")), c.shots, nt, b.n_rec);
  prop.forward(w, data);  // the data: the background's own records (their values do not change the cost)
  auto const [rtm, forward] = time_against_forward(state, b, [&] {
    prop.forward(w, rec);
    engine.forward(w, synthetic);
    engine.backward(w, data, images);
  });
  double const iters = static_cast<double>(state.iterations());
  state.counters["us_per_step"] = rtm / iters / nt * 1e6;
  state.counters["forward_us_per_step"] = forward / iters / nt * 1e6;
  state.counters["rtm_over_forward"] = forward > 0 ? rtm / forward : 0.0;
  state.counters["shots"] = c.shots;
  state.counters["nt"] = nt;
}

// -------------------------------------------------------------------------------------------
// Gradient
// -------------------------------------------------------------------------------------------

struct GradientCase {
  int nz, nx, shots, nt;
  std::string strategy, location, dtype;
};

/// Bytes the gradient kernels move per iteration of loss_and_gradient; see docs/PERFORMANCE.md
/// for the derivation.
template <class Real>
double gradient_bytes(core::Layout const& l, int order, int shots, int nt, int ring_cells, bool full,
                      storage::Location loc, storage::Dtype dtype) {
  int const m = order / 2;
  double const R = sizeof(Real);
  double const padded = static_cast<double>(l.padded_cells());
  double const model = static_cast<double>(l.model_rows()) * l.nx;
  double const strip_fwd = layer_cells(l, 0), strip_adj = layer_cells(l, 2 * m);
  double const ring = static_cast<double>(ring_cells);
  double const enc =
      static_cast<double>(storage::encoded_bytes(dtype, static_cast<std::size_t>(ring_cells), sizeof(Real))) /
      std::max(1.0, ring);  // encoded bytes per saved value
  // save: the ring gathered straight into the encoder (read u, write code); restore: decoded
  // straight into the wavefield (read code, write u). Host/disk add one staging copy each way.
  double const transfer = loc == storage::Location::device ? 0.0 : 2.0 * enc;
  double const save = ring * (R + enc + transfer);
  double const restore = ring * (R + enc + transfer);
  double const forward = 4 * R * (padded + strip_fwd) + save;
  // Adjoint step: lambda^{n+1}, lambda^{n+2}, c read, lambda^n written; layer memories as forward.
  double const adjoint = 4 * R * (padded + strip_adj);
  // Imaging on the model cells, per shot: boundary (image_and_rebuild) reads u^n, u^{n+1},
  // lambda, c and writes u^{n-1} (5 reals); full (image) reads u^n and lambda (2 reals). The
  // three double images (read + write, 48 B per model cell and step) are shared by the shots.
  double const imaging = (full ? 2 * R : 5 * R) * model + 48.0 * model / shots;
  double const backward = adjoint + imaging + restore;
  return static_cast<double>(shots) * nt * (forward + backward);
}

template <class ExecSpace>
void bm_gradient(benchmark::State& state, GradientCase c) {
  using Real = float;
  constexpr int Order = 4;
  using prop_type = core::Propagator<Real, Order, ExecSpace>;
  using engine_type = core::GradientEngine<Real, Order, ExecSpace>;
  ExecSpace space;
  reset_peak_rss();
  std::size_t const rss0 = current_rss();
  double const dt = bench_dt();
  prop_type prop(space, core::ModelGrid{c.nz, c.nx, grid_spacing}, bench_pml(), dt, c.shots);
  int const n_rec = set_up(prop, c.nz, c.nx, c.shots);
  auto const cfg = storage::make_storage_config(c.strategy, c.location, c.dtype, 64, "", true);
  engine_type engine(prop, cfg);
  typename engine_type::images_type images(c.nz, c.nx);
  typename prop_type::wavelet_view w(Kokkos::view_alloc(space, std::string("ksweep::bench::wavelets")), c.shots, 1,
                                     c.nt);
  fill_wavelets<Real>(w, dt);
  typename prop_type::record_view observed(Kokkos::view_alloc(space, std::string("ksweep::bench::observed")), c.shots,
                                           c.nt, n_rec);
  typename prop_type::record_view synthetic(Kokkos::view_alloc(space, std::string("ksweep::bench::synthetic")), c.shots,
                                            c.nt, n_rec);
  double total = 0;
  for (auto _ : state) {
    Timer t;
    engine.loss_and_gradient(w, observed, 1.0, images, synthetic);
    space.fence();
    double const sec = t.seconds();
    state.SetIterationTime(sec);
    total += sec;
  }
  auto const& l = prop.layout();
  double const iters = static_cast<double>(state.iterations());
  double const cell_steps = static_cast<double>(l.padded_cells()) * c.shots * c.nt;
  auto const rep = engine.memory_report(observed.span() * sizeof(Real), synthetic.span() * sizeof(Real));
  double const bytes =
      gradient_bytes<Real>(l, Order, c.shots, c.nt, engine.ring_cells(), engine.full(), cfg.location, cfg.dtype);
  state.counters["cells_per_second"] = Counter(cell_steps * iters, Counter::kIsRate);
  state.counters["bytes_per_cell_step"] = bytes / cell_steps;
  if (triad_best() > 0 && total > 0) state.counters["roofline_fraction"] = bytes * iters / total / triad_best();
  state.counters["peak_device_bytes"] = static_cast<double>(rep.peak_device_bytes);
  state.counters["baseline_rss_bytes"] = static_cast<double>(rss0);
  record_space_memory<ExecSpace>(state);
  state.counters["boundary_bytes"] = static_cast<double>(rep.boundary_bytes);
  state.counters["staging_bytes"] = static_cast<double>(rep.staging_bytes);
  state.counters["wavefield_bytes"] = static_cast<double>(rep.wavefield_bytes + rep.seed_bytes);
  state.counters["image_bytes"] = static_cast<double>(rep.image_bytes);
  state.counters["modelled_bytes"] = static_cast<double>(
      (cfg.location == storage::Location::device ? rep.boundary_bytes : 0) + rep.staging_bytes + rep.wavefield_bytes +
      rep.seed_bytes + rep.image_bytes + rep.observed_bytes + rep.synthetic_bytes);
  state.counters["padded_cells"] = static_cast<double>(l.padded_cells());
  state.counters["nt"] = c.nt;
  state.counters["shots"] = c.shots;
  state.counters["us_per_step"] = total / iters / c.nt * 1e6;
  state.counters["launches_per_step"] =
      static_cast<double>(count_launches([&] { engine.loss_and_gradient(w, observed, 1.0, images, synthetic); })) /
      c.nt;
}

// -------------------------------------------------------------------------------------------
// The peer comparison's Marmousi batch
// -------------------------------------------------------------------------------------------

struct MarmousiCase {
  int order = 4;
  bool gradient = false;
  core::Schedule schedule = core::Schedule::automatic;
  bool flush = true;
  bool illuminations = true;  ///< the gradient sums the two illuminations too (false: the gradient alone)
  int nz = 141, nx = 681, shots = 8, receivers = 200, nt = 2000;
  double dt = 0.002;
  /// Its survey: one source per shot at depth 2 over x in [0.1, 0.9] of the width (as ksweep's
  /// shots.x_range), the receivers at depth 4 over the whole width.
  core::Survey survey() const {
    core::Survey sv;
    sv.n_shots = shots;
    sv.n_sources = 1;
    sv.n_receivers = receivers;
    for (int i = 0; i < shots; ++i) {
      sv.sources.push_back({2, static_cast<int>(std::lround((0.1 + 0.8 * i / std::max(1, shots - 1)) * (nx - 1)))});
      for (int r = 0; r < receivers; ++r)
        sv.receivers.push_back({4, static_cast<int>(std::lround(r * (nx - 1.0) / (receivers - 1)))});
    }
    return sv;
  }
  /// The sizes of a smoke run (--smoke).
  void smoke() {
    nz = 12;
    nx = 40;
    shots = 2;
    receivers = 10;
    nt = 20;
  }
};

/// Times `run` (which returns its seconds) as the Marmousi rows are timed: one call first, timed
/// apart (`first_seconds`: allocations and their page faults), as the cube's benchmarks do and as
/// the peer comparison reports Deepwave's later calls, then the benchmark's iterations (manual
/// time, their mean in `seconds`); the memory counters include the first call. Returns the
/// iterations.
template <class Run>
double time_after_first(benchmark::State& state, Run const& run) {
  double const first = run();
  // With step graphs on, the second call captures its runs of steps (core/step_graph.hpp): untimed
  // too, so that the timed calls replay.
  if (core::step_graphs()) state.counters["second_seconds"] = run();
  double total = 0;
  for (auto _ : state) {
    double const sec = run();
    state.SetIterationTime(sec);
    total += sec;
  }
  double const iters = static_cast<double>(state.iterations());
  state.counters["seconds"] = total / iters;
  state.counters["first_seconds"] = first;
  return iters;
}

template <class ExecSpace, int Order>
void bm_marmousi(benchmark::State& state, MarmousiCase c) {
  using Real = float;
  using prop_type = core::Propagator<Real, Order, ExecSpace>;
  using engine_type = core::GradientEngine<Real, Order, ExecSpace>;
  ExecSpace space;
  bool const flush0 = fp::flush_denormals();
  fp::set_flush_denormals(c.flush);
  reset_peak_rss();
  std::size_t const rss0 = current_rss();
  prop_type prop(space, core::ModelGrid{c.nz, c.nx, grid_spacing}, bench_pml(), c.dt, c.shots);
  prop.set_schedule(c.schedule);
  auto const vp = random_smooth_model(c.nz, c.nx);
  prop.set_velocity(vp.data());
  prop.set_survey(c.survey());
  typename prop_type::wavelet_view w(Kokkos::view_alloc(space, std::string("ksweep::bench::wavelets")), c.shots, 1,
                                     c.nt);
  {
    auto h = Kokkos::create_mirror_view(Kokkos::HostSpace(), w);
    auto const r = core::ricker(5.0, 0.2, c.dt, c.nt);
    for (int s = 0; s < c.shots; ++s)
      for (int t = 0; t < c.nt; ++t) h(s, 0, t) = static_cast<Real>(r[t]);
    Kokkos::deep_copy(w, h);
  }
  typename prop_type::record_view observed(Kokkos::view_alloc(space, std::string("ksweep::bench::observed")), c.shots,
                                           c.nt, c.receivers),
      synthetic(Kokkos::view_alloc(space, std::string("ksweep::bench::synthetic")), c.shots, c.nt, c.receivers);
  std::unique_ptr<engine_type> engine;
  std::unique_ptr<typename engine_type::images_type> images;
  if (c.gradient) {
    engine =
        std::make_unique<engine_type>(prop, storage::make_storage_config("boundary", "device", "fp32", 64, "", true));
    engine->set_illuminations(c.illuminations);
    images = std::make_unique<typename engine_type::images_type>(c.nz, c.nx);
  }
  auto const run = [&] {
    Timer t;
    if (c.gradient) engine->loss_and_gradient(w, observed, 1.0, *images, synthetic);
    else prop.forward(w, synthetic);
    space.fence();
    return t.seconds();
  };
  double const iters = time_after_first(state, run);
  double const cell_steps = static_cast<double>(prop.layout().padded_cells()) * c.shots * c.nt;
  state.counters["cells_per_second"] = Counter(cell_steps * iters, Counter::kIsRate);
  state.counters["peak_rss_bytes"] = static_cast<double>(core::peak_memory_bytes());
  state.counters["rss_increase_bytes"] =
      static_cast<double>(core::peak_memory_bytes() - std::min(core::peak_memory_bytes(), rss0));
  record_space_memory<ExecSpace>(state);
  state.counters["shots_schedule"] = prop.runs_shots() ? 1 : 0;
  state.counters["threads"] = space.concurrency();
  fp::set_flush_denormals(flush0);
}

// -------------------------------------------------------------------------------------------
// Deepwave's library called directly on the Marmousi batch (KSWEEP_DEEPWAVE_LIB)
// -------------------------------------------------------------------------------------------

/// out[i] = a[i] - b[i] where the library computes (the residual of Deepwave's gradient).
struct Difference {
  float* out;
  float const* a;
  float const* b;
  KOKKOS_INLINE_FUNCTION void operator()(std::size_t i) const { out[i] = a[i] - b[i]; }
};

/// Deepwave's buffers in ExecSpace's memory: Kokkos allocations (so `device_peak_bytes` counts
/// them as it counts ksweep's), copies and fills on `space`, whose stream Deepwave's CUDA kernels
/// share.
template <class ExecSpace>
deepwave::DeepwaveBuffers deepwave_buffers(ExecSpace const& space) {
  using mem = typename ExecSpace::memory_space;
  using bytes = Kokkos::View<unsigned char*, mem, Kokkos::MemoryUnmanaged>;
  using host_bytes = Kokkos::View<unsigned char*, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>;
  deepwave::DeepwaveBuffers b;
  b.alloc = [](std::size_t n) { return Kokkos::kokkos_malloc<mem>("ksweep::bench::deepwave", n ? n : 1); };
  b.free = [](void* p) { Kokkos::kokkos_free<mem>(p); };
  b.to_device = [space](void* d, void const* h, std::size_t n) {
    Kokkos::deep_copy(space, bytes(static_cast<unsigned char*>(d), n),
                      host_bytes(static_cast<unsigned char*>(const_cast<void*>(h)), n));
    space.fence();  // before the host array goes
  };
  b.to_host = [space](void* h, void const* d, std::size_t n) {
    Kokkos::deep_copy(space, host_bytes(static_cast<unsigned char*>(h), n),
                      bytes(static_cast<unsigned char*>(const_cast<void*>(d)), n));
    space.fence();
  };
  b.zero = [space](void* p, std::size_t n) {
    Kokkos::deep_copy(space, bytes(static_cast<unsigned char*>(p), n), static_cast<unsigned char>(0));
  };
  b.subtract = [space](float* o, float const* x, float const* y, std::size_t n) {
    Kokkos::parallel_for("ksweep::bench::deepwave_residual", Kokkos::RangePolicy<ExecSpace>(space, 0, n),
                         Difference{o, x, y});
  };
  b.sync = [space] { space.fence(); };
  b.threads = space.concurrency();
  b.cuda = !Kokkos::SpaceAccessibility<Kokkos::HostSpace, mem>::accessible;
#if defined(KOKKOS_ENABLE_CUDA)
  if constexpr (std::is_same_v<ExecSpace, Kokkos::Cuda>) {
    b.device = space.cuda_device();
    b.stream = space.cuda_stream();
  }
#endif
  return b;
}

/// Flush-to-zero and denormals-are-zero on or off in this thread and every thread of the OpenMP
/// pool (host backends): Deepwave's build (-Ofast) runs with them on, which its library sets as it
/// loads in a Python process whose threads start after the import.
inline void pool_flush_denormals([[maybe_unused]] bool on, [[maybe_unused]] int threads) {
#if defined(_OPENMP) && !defined(__CUDA_ARCH__) && (defined(__x86_64__) || defined(__SSE__))
  auto const set = [on] {
    unsigned const c = _mm_getcsr();
    _mm_setcsr(on ? (c | 0x8040u) : (c & ~0x8040u));
  };
  set();
#pragma omp parallel num_threads(threads)
  set();
#endif
}

/// Deepwave's forward or gradient (loss 0.5 sum (d - d_obs)^2, d_obs zero as in bm_marmousi) of
/// the Marmousi batch, timed as bm_marmousi times ksweep's: calls after a first one, reported
/// apart. The forward's records are compared with ksweep's forward of the amplitudes Deepwave
/// injects (-v^2 dt^2 w at the source cell), one sample apart (Deepwave records u^t at sample t,
/// ksweep u^(t+1)): `records_misfit` = ||dw - ksweep|| / ||ksweep||, where the two absorbing
/// layers differ.
template <class ExecSpace, int Order>
void bm_deepwave(benchmark::State& state, MarmousiCase c, std::string const& library) {
  ExecSpace space;
  reset_peak_rss();
  std::size_t const rss0 = current_rss();
  auto const vp = random_smooth_model(c.nz, c.nx);
  core::Survey const sv = c.survey();  // bm_marmousi's, in Deepwave's (z, x) cells
  std::vector<std::array<int, 2>> src, rec;
  for (auto const& p : sv.sources) src.push_back({static_cast<int>(p.z), static_cast<int>(p.x)});
  for (auto const& p : sv.receivers) rec.push_back({static_cast<int>(p.z), static_cast<int>(p.x)});
  auto const ricker = core::ricker(5.0, 0.2, c.dt, c.nt);
  std::vector<float> w(static_cast<std::size_t>(c.shots) * c.nt);
  for (int s = 0; s < c.shots; ++s)
    for (int t = 0; t < c.nt; ++t) w[static_cast<std::size_t>(s) * c.nt + t] = static_cast<float>(ricker[t]);
  bool const host = Kokkos::SpaceAccessibility<Kokkos::HostSpace, typename ExecSpace::memory_space>::accessible;
  if (host) pool_flush_denormals(true, space.concurrency());  // as Deepwave runs (its -Ofast build)
  struct Restore {
    bool host;
    int threads;
    ~Restore() {
      if (host) pool_flush_denormals(false, threads);  // ksweep's kernels set the mode they run in
    }
  } const restore{host, space.concurrency()};
  deepwave::DeepwaveScalar2D dw(library, deepwave_buffers(space), Order, c.nz, c.nx, grid_spacing, grid_spacing, c.dt,
                                bench_pml().width, bench_pml().freq, vp, c.shots, src, rec, c.receivers, c.nt);
  if (c.gradient) dw.prepare_gradient(w, std::vector<float>(static_cast<std::size_t>(c.shots) * c.receivers * c.nt));
  else dw.prepare_forward(w);
  auto const run = [&] {
    Timer t;
    if (c.gradient) dw.run_gradient();
    else dw.run_forward();
    return t.seconds();
  };
  double const iters = time_after_first(state, run);
  core::Layout const l(core::ModelGrid{c.nz, c.nx, grid_spacing}, bench_pml(), Order);
  double const cell_steps = static_cast<double>(l.padded_cells()) * c.shots * c.nt;  // as bm_marmousi counts
  state.counters["cells_per_second"] = Counter(cell_steps * iters, Counter::kIsRate);
  state.counters["peak_rss_bytes"] = static_cast<double>(core::peak_memory_bytes());
  state.counters["rss_increase_bytes"] =
      static_cast<double>(core::peak_memory_bytes() - std::min(core::peak_memory_bytes(), rss0));
  record_space_memory<ExecSpace>(state);
  state.counters["deepwave_bytes"] = static_cast<double>(dw.peak_bytes());
  state.counters["threads"] = space.concurrency();
  if (!c.gradient) {  // the records beside ksweep's, one sample apart
    std::vector<float> d;
    dw.fetch_records(d);  // [shot][receiver][nt]
    using prop_type = core::Propagator<float, Order, ExecSpace>;
    prop_type prop(space, core::ModelGrid{c.nz, c.nx, grid_spacing}, bench_pml(), c.dt, c.shots);
    prop.set_velocity(vp.data());
    prop.set_survey(sv);
    typename prop_type::wavelet_view wk(Kokkos::view_alloc(space, std::string("ksweep::bench::wavelets")), c.shots, 1,
                                        c.nt);
    typename prop_type::record_view rk(Kokkos::view_alloc(space, std::string("ksweep::bench::records")), c.shots, c.nt,
                                       c.receivers);
    auto wh = Kokkos::create_mirror_view(wk);
    float const dt2 = static_cast<float>(c.dt * c.dt);
    for (int s = 0; s < c.shots; ++s) {
      float const v = vp[static_cast<std::size_t>(src[s][0]) * c.nx + src[s][1]];
      for (int t = 0; t < c.nt; ++t) wh(s, 0, t) = -w[static_cast<std::size_t>(s) * c.nt + t] * (v * v) * dt2;
    }
    Kokkos::deep_copy(wk, wh);
    prop.forward(wk, rk);
    auto const rh = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), rk);
    double diff = 0, norm = 0;
    for (int s = 0; s < c.shots; ++s)
      for (int r = 0; r < c.receivers; ++r)
        for (int t = 1; t < c.nt; ++t) {
          double const k = rh(s, t - 1, r);
          double const e = d[(static_cast<std::size_t>(s) * c.receivers + r) * c.nt + t] - k;
          diff += e * e;
          norm += k * k;
        }
    state.counters["records_misfit"] = norm > 0 ? std::sqrt(diff / norm) : 0.0;
  }
}

/// The deepwave rows, when KSWEEP_DEEPWAVE_LIB names a library (host backends with threads take
/// its `_cpu` entry points, CUDA its `_cuda` ones).
template <class ExecSpace, int Order>
void register_deepwave(std::string const& b, Options const& o) {
  char const* lib = std::getenv("KSWEEP_DEEPWAVE_LIB");
  if (!lib || !*lib || b == "Serial") return;
  for (bool gradient : {false, true}) {
    MarmousiCase c;
    c.order = Order;
    c.gradient = gradient;
    if (o.smoke) c.smoke();
    add(bench_name("deepwave", b, {{"order", std::to_string(Order)}, {"kind", gradient ? "gradient" : "forward"}}),
        [c, library = std::string(lib)](benchmark::State& st) { bm_deepwave<ExecSpace, Order>(st, c, library); })
        ->Unit(benchmark::kMillisecond);
  }
}

// -------------------------------------------------------------------------------------------
// 3D: the cube of the peer comparison (scripts/peer_deepwave.py --dim 3 times Deepwave on it)
// -------------------------------------------------------------------------------------------

/// N^3 cells of 10 m, vp = 1500 + 2000 z / (N - 1) + 150 sin(0.21 x) cos(0.17 y), a 10-cell CPML
/// on every face, dt 1 ms, nt 200, 10 Hz Ricker peaking at 0.1 s, 2 shots at (2, N/2, N/3) and
/// (2, N/2, 2N/3), receivers on every 4th cell of the surface z = 2; the gradient's observed
/// records are those of the same model with a sphere of +100 m/s (radius N/6) at its centre.
struct CubeCase {
  int n = 48, order = 4, nt = 200, shots = 2;
  bool gradient = false;
  std::string strategy = "boundary", dtype = "fp32";
  bool memory_only = false;  ///< one gradient, memory counters only (cube3d_memory)
};

inline std::vector<float> cube_model(int n, bool sphere) {
  std::vector<float> v(static_cast<std::size_t>(n) * n * n);
  double const r = n / 6.0, c = 0.5 * (n - 1);
  // The sines and cosines per column and row (the same values: 512^3 cells in a second).
  std::vector<double> sx(static_cast<std::size_t>(n)), cy(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) sx[i] = std::sin(0.21 * i), cy[i] = std::cos(0.17 * i);
  for (int z = 0; z < n; ++z)
    for (int y = 0; y < n; ++y)
      for (int x = 0; x < n; ++x) {
        double vv = 1500.0 + 2000.0 * z / (n - 1) + 150.0 * sx[x] * cy[y];
        if (sphere && (z - c) * (z - c) + (y - c) * (y - c) + (x - c) * (x - c) <= r * r) vv += 100.0;
        v[(static_cast<std::size_t>(z) * n + y) * n + x] = static_cast<float>(vv);
      }
  return v;
}

inline core::Survey cube_survey(int n, int shots) {
  core::Survey sv;
  sv.n_shots = shots;
  sv.n_sources = 1;
  for (int y = 0; y < n; y += 4)
    for (int x = 0; x < n; x += 4) ++sv.n_receivers;
  for (int s = 0; s < shots; ++s) {
    sv.sources.push_back({2, (s + 1) * n / (shots + 1), n / 2});
    for (int y = 0; y < n; y += 4)
      for (int x = 0; x < n; x += 4) sv.receivers.push_back({2, x, y});
  }
  return sv;
}

template <class ExecSpace, int Order>
void bm_cube3d(benchmark::State& state, CubeCase c) {
  using Real = float;
  using prop_type = core::Propagator<Real, Order, ExecSpace, 3>;
  using engine_type = core::GradientEngine<Real, Order, ExecSpace, 3>;
  ExecSpace space;
  double const dt = 1e-3;
  core::PmlConfig pml;
  pml.width = 10;
  prop_type prop(space, core::ModelGrid::volume(c.n, c.n, c.n, 10.0), pml, dt, c.shots);
  auto const sv = cube_survey(c.n, c.shots);
  prop.set_survey(sv);
  typename prop_type::wavelet_view w(Kokkos::view_alloc(space, std::string("ksweep::bench::wavelets")), c.shots, 1,
                                     c.nt);
  {
    auto h = Kokkos::create_mirror_view(Kokkos::HostSpace(), w);
    auto const r = core::ricker(10.0, 0.1, dt, c.nt);
    for (int s = 0; s < c.shots; ++s)
      for (int t = 0; t < c.nt; ++t) h(s, 0, t) = static_cast<Real>(r[t]);
    Kokkos::deep_copy(w, h);
  }
  typename prop_type::record_view observed(Kokkos::view_alloc(space, std::string("ksweep::bench::observed")), c.shots,
                                           c.nt, sv.n_receivers),
      synthetic(Kokkos::view_alloc(space, std::string("ksweep::bench::synthetic")), c.shots, c.nt, sv.n_receivers);
  bool const gradient = c.gradient || c.memory_only;
  if (gradient) {
    auto const truth = cube_model(c.n, true);
    prop.set_velocity(truth.data());
    prop.forward(w, observed);
  }
  auto const vp = cube_model(c.n, false);
  prop.set_velocity(vp.data());
  auto const l = prop.layout();
  std::unique_ptr<engine_type> engine;
  std::unique_ptr<typename engine_type::images_type> images;
  auto const cfg = storage::make_storage_config(c.strategy, "device", c.dtype, 64, "", true);
  if (gradient) {
    engine = std::make_unique<engine_type>(prop, cfg);
    images = std::make_unique<typename engine_type::images_type>(l.model_rows(), l.nx);
  }
  space.fence();
  reset_peak_rss();
  std::size_t const rss0 = current_rss();
  // One untimed call first (the step store's first allocation and page faults), as the peer
  // comparison reports Deepwave's later calls; the memory counters include it.
  if (!c.memory_only) {
    if (gradient) engine->loss_and_gradient(w, observed, 0.5, *images, synthetic);
    else prop.forward(w, synthetic);
    space.fence();
  }
  double total = 0;
  for (auto _ : state) {
    Timer t;
    if (gradient) engine->loss_and_gradient(w, observed, 0.5, *images, synthetic);
    else prop.forward(w, synthetic);
    space.fence();
    double const sec = t.seconds();
    state.SetIterationTime(sec);
    total += sec;
  }
  double const iters = static_cast<double>(state.iterations());
  double const cell_steps = static_cast<double>(l.padded_cells()) * c.shots * c.nt;
  std::size_t const peak = core::peak_memory_bytes();
  state.counters["peak_rss_bytes"] = static_cast<double>(peak);
  state.counters["rss_increase_bytes"] = static_cast<double>(peak - std::min(peak, rss0));
  record_space_memory<ExecSpace>(state);
  state.counters["padded_cells"] = static_cast<double>(l.padded_cells());
  state.counters["threads"] = space.concurrency();
  if (c.memory_only || gradient) {
    auto const rep = engine->memory_report(observed.span() * sizeof(Real), synthetic.span() * sizeof(Real));
    state.counters["boundary_bytes"] = static_cast<double>(rep.boundary_bytes);
    state.counters["wavefield_bytes"] = static_cast<double>(rep.wavefield_bytes + rep.seed_bytes);
    state.counters["image_bytes"] = static_cast<double>(rep.image_bytes);
    state.counters["modelled_bytes"] =
        static_cast<double>(rep.boundary_bytes + rep.staging_bytes + rep.wavefield_bytes + rep.seed_bytes +
                            rep.image_bytes + rep.observed_bytes + rep.synthetic_bytes);
    state.counters["saved_cells_per_shot"] = engine->ring_cells();
  }
  if (c.memory_only) return;
  double const bytes = gradient ? gradient_bytes<Real>(l, Order, c.shots, c.nt, engine->ring_cells(), engine->full(),
                                                       cfg.location, cfg.dtype)
                                : forward_bytes_per_step<Real>(l) * c.shots * c.nt;
  state.counters["seconds"] = total / iters;
  state.counters["cells_per_second"] = Counter(cell_steps * iters, Counter::kIsRate);
  state.counters["bytes_per_cell_step"] = bytes / cell_steps;
  if (triad_best() > 0 && total > 0) state.counters["roofline_fraction"] = bytes * iters / total / triad_best();
}

template <class ExecSpace, int Order>
void register_cube3d(std::string const& b, Options const& o) {
  // Production sizes on devices: 256^3 and 512^3 (one shot, nt 100; 512^3 is 0.5 GiB a field).
  std::vector<int> sizes = o.smoke ? std::vector<int>{12} : std::vector<int>{48, 128};
  if (!core::impl::runs_by_rows<ExecSpace> && !o.smoke) sizes.insert(sizes.end(), {256, 512});
  for (int n : sizes)
    for (bool gradient : {false, true}) {
      CubeCase c;
      c.n = n;
      c.order = Order;
      c.gradient = gradient;
      if (n >= 256) c.shots = 1, c.nt = 100;
      if (o.smoke) c.nt = 8;
      add(bench_name("cube3d", b,
                     {{"order", std::to_string(Order)},
                      {"n", std::to_string(n)},
                      {"kind", gradient ? "gradient" : "forward"}}),
          [c](benchmark::State& st) { bm_cube3d<ExecSpace, Order>(st, c); })
          ->Unit(benchmark::kMillisecond);
    }
}

/// Memory of a 3D gradient, full against boundary per dtype (order 4; one iteration each).
template <class ExecSpace>
void register_cube3d_memory(std::string const& b, Options const& o) {
  std::vector<int> const sizes = o.smoke ? std::vector<int>{12} : std::vector<int>{48, 128};
  for (int n : sizes)
    for (std::string strategy : {"full", "boundary"})
      for (std::string dtype : {"fp32", "fp16", "bf16", "int8"}) {
        CubeCase c;
        c.n = n;
        c.strategy = strategy;
        c.dtype = dtype;
        c.memory_only = true;
        if (o.smoke) c.nt = 8;
        add(bench_name("cube3d_memory", b,
                       {{"order", "4"}, {"n", std::to_string(n)}, {"strategy", strategy}, {"dtype", dtype}}),
            [c](benchmark::State& st) { bm_cube3d<ExecSpace, 4>(st, c); })
            ->Unit(benchmark::kMillisecond)
            ->Iterations(1);
      }
}

// -------------------------------------------------------------------------------------------
// Codecs and step stores
// -------------------------------------------------------------------------------------------

/// Smooth, signed test values with a wide dynamic range (as a decaying wavefield has).
template <class ExecSpace>
Kokkos::View<float*, typename ExecSpace::memory_space> codec_input(ExecSpace const& space, std::size_t n) {
  Kokkos::View<float*, typename ExecSpace::memory_space> v(
      Kokkos::view_alloc(space, Kokkos::WithoutInitializing, std::string("ksweep::bench::codec_in")), n);
  auto h = Kokkos::create_mirror_view(Kokkos::HostSpace(), v);
  for (std::size_t i = 0; i < n; ++i) {
    double const x = static_cast<double>(i);
    h(i) = static_cast<float>(std::sin(0.01 * x) * std::exp(-1e-7 * x));
  }
  Kokkos::deep_copy(space, v, h);
  space.fence();
  return v;
}

template <class ExecSpace>
void bm_codec(benchmark::State& state, std::size_t n, std::string dtype_name, bool encoding) {
  using mem = typename ExecSpace::memory_space;
  ExecSpace space;
  auto const dtype = storage::parse_dtype(dtype_name);
  auto in = codec_input(space, n);
  Kokkos::View<std::uint8_t*, mem> code(Kokkos::view_alloc(space, std::string("ksweep::bench::code")),
                                        storage::encoded_bytes(dtype, n, sizeof(float)));
  Kokkos::View<float*, mem> out(Kokkos::view_alloc(space, std::string("ksweep::bench::codec_out")), n);
  Kokkos::View<int, mem> bad(Kokkos::view_alloc(space, std::string("ksweep::bench::bad")));
  Kokkos::View<float const*, mem> cin = in;
  storage::encode(space, dtype, cin, code, bad);
  space.fence();
  for (auto _ : state) {
    Timer t;
    if (encoding) storage::encode(space, dtype, cin, code, bad);
    else storage::decode(space, dtype, Kokkos::View<std::uint8_t const*, mem>(code), out);
    space.fence();
    state.SetIterationTime(t.seconds());
  }
  double const iters = static_cast<double>(state.iterations());
  state.counters["bytes_per_second"] = Counter(4.0 * static_cast<double>(n) * iters, Counter::kIsRate);
  state.counters["encoded_bytes_per_second"] = Counter(static_cast<double>(code.span()) * iters, Counter::kIsRate);
  state.counters["ratio"] = 4.0 * static_cast<double>(n) / static_cast<double>(code.span());
}

/// Drops the page cache of a file (after writing it back), so the next read comes from disk.
inline bool drop_file_cache(std::string const& path) {
  int const fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  bool ok = ::fdatasync(fd) == 0;
  ok = ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED) == 0 && ok;
  ::close(fd);
  return ok;
}

struct StoreCase {
  std::string location, dtype;
  std::size_t values;  // per step
  int steps, interval;
  bool cold;  // disk reads after dropping the file's page cache
};

template <class ExecSpace>
void bm_store(benchmark::State& state, StoreCase c, bool writing) {
  using mem = typename ExecSpace::memory_space;
  using store_type = storage::StepStore<float, ExecSpace>;
  ExecSpace space;
  auto const cfg = storage::make_storage_config("boundary", c.location, c.dtype, c.interval, "", true);
  auto in = codec_input(space, c.values);
  Kokkos::View<float const*, mem> cin = in;
  Kokkos::View<float*, mem> out(Kokkos::view_alloc(space, std::string("ksweep::bench::store_out")), c.values);
  double stored = 0;
  for (auto _ : state) {
    store_type store(space, cfg, c.values, c.steps);
    stored = static_cast<double>(store.stored_bytes());
    Timer tw;
    for (int n = 0; n < c.steps; ++n) store.put(n, cin);
    store.finish_writes();
    double const write_sec = tw.seconds();
    if (writing) {
      state.SetIterationTime(write_sec);
      continue;
    }
    if (c.cold && store.disk() != nullptr) drop_file_cache(store.disk()->path().string());
    Timer tr;
    for (int n = c.steps - 1; n >= 0; --n) store.get(n, out);
    space.fence();
    state.SetIterationTime(tr.seconds());
  }
  double const iters = static_cast<double>(state.iterations());
  state.counters["bytes_per_second"] =
      Counter(4.0 * static_cast<double>(c.values) * c.steps * iters, Counter::kIsRate);  // fp32 values
  state.counters["stored_bytes_per_second"] = Counter(stored * iters, Counter::kIsRate);
  state.counters["stored_bytes"] = stored;
}

// -------------------------------------------------------------------------------------------
// Registration
// -------------------------------------------------------------------------------------------

/// Registers a manually timed benchmark; an exception (a ksweep::Error from a check) skips it
/// with the message instead of ending the run, and is counted (error_count): the program then
/// exits with 1, so that a smoke test of a failing benchmark fails.
/// KSWEEP_BENCH_FAIL=TEXT makes the benchmarks whose name contains TEXT fail (to test that a
/// failing benchmark fails its smoke test).
template <class F>
benchmark::internal::Benchmark* add(std::string const& name, F f) {
  return benchmark::RegisterBenchmark(name.c_str(),
                                      [f, name](benchmark::State& st) {
                                        try {
                                          char const* fail = std::getenv("KSWEEP_BENCH_FAIL");
                                          if (fail != nullptr && *fail != 0 && name.find(fail) != std::string::npos)
                                            throw std::runtime_error("KSWEEP_BENCH_FAIL: " + name + " fails");
                                          f(st);
                                        } catch (std::exception const& e) {
                                          ++error_count();
                                          st.SkipWithError(e.what());
                                        }
                                      })
      ->UseManualTime();
}

template <class ExecSpace, int Order>
void register_forward(std::string const& b, ForwardCase c, double cell_steps, Options const& o) {
  if (c.nt <= 0) {
    long long const per_step = static_cast<long long>(c.nz + 2 * pml_width) * (c.nx + 2 * pml_width) * c.shots;
    c.nt = steps_for(cell_steps, per_step, o.smoke ? 3 : 10, o.smoke ? 20 : 4000);
  }
  add(bench_name("forward", b,
                 {{"order", std::to_string(Order)},
                  {"nz", std::to_string(c.nz)},
                  {"nx", std::to_string(c.nx)},
                  {"shots", std::to_string(c.shots)},
                  {"nt", std::to_string(c.nt)}}),
      [c, b](benchmark::State& st) { bm_forward<ExecSpace, Order>(st, c, b); })
      ->Unit(benchmark::kMillisecond);
}

// The forward and the gradient (with its illuminations) on each schedule and flush mode, and the
// gradient alone (images:gradient, what a peer's gradient computes) on the default ones.
template <class ExecSpace, int Order>
void register_marmousi(std::string const& b, Options const& o) {
  struct Row {
    bool gradient;
    core::Schedule schedule;
    bool flush, illuminations;
  };
  std::vector<Row> rows;
  for (bool gradient : {false, true})
    for (auto [schedule, flush] : {std::pair{core::Schedule::automatic, true}, std::pair{core::Schedule::batched, true},
                                   std::pair{core::Schedule::automatic, false}})
      rows.push_back({gradient, schedule, flush, true});
  rows.push_back({true, core::Schedule::automatic, true, false});
  for (Row const& row : rows) {
    MarmousiCase c;
    c.order = Order;
    c.gradient = row.gradient;
    c.schedule = row.schedule;
    c.flush = row.flush;
    c.illuminations = row.illuminations;
    if (o.smoke) c.smoke();
    std::vector<std::pair<std::string, std::string>> params{{"order", std::to_string(Order)},
                                                            {"kind", row.gradient ? "gradient" : "forward"},
                                                            {"schedule", core::to_string(row.schedule)},
                                                            {"flush", row.flush ? "on" : "off"}};
    if (!row.illuminations) params.emplace_back("images", "gradient");
    add(bench_name("marmousi", b, params), [c](benchmark::State& st) {
      bm_marmousi<ExecSpace, Order>(st, c);
    })->Unit(benchmark::kMillisecond);
  }
}

// Step graphs (core/step_graph.hpp) off and on in one run, for the launch-bound cases: the
// forward of one shot of 141 x 681 and the Marmousi batch's gradient alone, order 4. Where graphs
// can run (CUDA), and in smoke runs everywhere (where they run as plain launches).
template <class ExecSpace>
void register_graphs(std::string const& b, Options const& o, int mz, int mx) {
  if (!core::StepGraphs<ExecSpace>::possible && !o.smoke) return;
  // The setting of a row, put back after it.
  struct Setting {
    bool before = core::step_graphs();
    explicit Setting(bool on) { core::set_step_graphs(on); }
    ~Setting() { core::set_step_graphs(before); }
  };
  for (bool on : {false, true}) {
    std::string const g = on ? "on" : "off";
    ForwardCase const f{mz, mx, 1, o.smoke ? 8 : 1000};
    add(bench_name("graphs", b,
                   {{"graphs", g},
                    {"kind", "forward"},
                    {"order", "4"},
                    {"nz", std::to_string(mz)},
                    {"nx", std::to_string(mx)},
                    {"shots", "1"},
                    {"nt", std::to_string(f.nt)}}),
        [f, b, on](benchmark::State& st) {
          Setting const s(on);
          bm_forward<ExecSpace, 4>(st, f, b);
        })
        ->Unit(benchmark::kMillisecond);
    MarmousiCase c;
    c.order = 4;
    c.gradient = true;
    c.illuminations = false;
    if (o.smoke) c.smoke();
    add(bench_name("graphs", b, {{"graphs", g}, {"kind", "gradient"}, {"order", "4"}, {"case", "marmousi"}}),
        [c, on](benchmark::State& st) {
          Setting const s(on);
          bm_marmousi<ExecSpace, 4>(st, c);
        })
        ->Unit(benchmark::kMillisecond);
  }
}

/// The shape of the launches over cells (core::DeviceTiles), timed side by side in one run: the
/// 4096^2 forward at orders 2, 4 and 8 and the 256^3 cube at order 4, in tiles of 32 to 256
/// cells along x with x fastest, and 64 with the rows first (4 rows of 8 cells a warp). On
/// devices (hosts run rows, not tiles: only the smoke run registers them there).
template <class ExecSpace>
void register_tiles(std::string const& b, Options const& o) {
  if (core::impl::runs_by_rows<ExecSpace> && !o.smoke) return;
  struct Setting {
    core::DeviceTiles before = core::device_tiles();
    explicit Setting(core::DeviceTiles t) { core::set_device_tiles(t); }
    ~Setting() { core::set_device_tiles(before); }
  };
  std::vector<core::DeviceTiles> const shapes = {{64, true}, {64, false}, {32, true}, {128, true}, {256, true}};
  int const n = o.smoke ? 24 : 4096;
  long long const per_step = static_cast<long long>(n + 2 * pml_width) * (n + 2 * pml_width);
  ForwardCase const f{n, n, 1, steps_for(o.smoke ? 2e4 : 2e8, per_step, o.smoke ? 3 : 10, o.smoke ? 20 : 4000)};
  auto params = [&](core::DeviceTiles const& t, char const* kind, int order) {
    return std::vector<std::pair<std::string, std::string>>{{"tiles", std::to_string(t.cols)},
                                                            {"lanes", t.x_fastest ? "x" : "rows"},
                                                            {"kind", kind},
                                                            {"order", std::to_string(order)}};
  };
  for (auto const& t : shapes) {
    auto forward = [&](int order, auto bm) {
      auto p = params(t, "forward", order);
      p.insert(p.end(), {{"nz", std::to_string(n)}, {"nx", std::to_string(n)}, {"nt", std::to_string(f.nt)}});
      add(bench_name("tiles", b, p), [f, b, t, bm](benchmark::State& st) {
        Setting const s(t);
        bm(st, f, b);
      })->Unit(benchmark::kMillisecond);
    };
    forward(2, &bm_forward<ExecSpace, 2>);
    forward(4, &bm_forward<ExecSpace, 4>);
    forward(8, &bm_forward<ExecSpace, 8>);
    if (t.cols == 128) continue;  // the cube: 64 both ways, 32 and 256
    CubeCase c;
    c.n = o.smoke ? 12 : 256;
    c.shots = 1;
    c.nt = o.smoke ? 8 : 100;
    auto p = params(t, "cube3d", 4);
    p.emplace_back("n", std::to_string(c.n));
    add(bench_name("tiles", b, p), [c, t](benchmark::State& st) {
      Setting const s(t);
      bm_cube3d<ExecSpace, 4>(st, c);
    })->Unit(benchmark::kMillisecond);
  }
}

template <class ExecSpace>
void register_benchmarks(Options const& o) {
  std::string const b = ExecSpace::name();
  bool const s = o.smoke;

  // Bandwidth reference.
  std::string const mib = std::to_string(stream_elements(o) * sizeof(double) >> 20);
  add(bench_name("stream_copy", b, {{"mib", mib}}), [o](benchmark::State& st) {
    bm_stream<ExecSpace>(st, o, false);
  })->Unit(benchmark::kMillisecond);
  add(bench_name("stream_triad", b, {{"mib", mib}}), [o](benchmark::State& st) {
    bm_stream<ExecSpace>(st, o, true);
  })->Unit(benchmark::kMillisecond);

  // Forward, one shot: in L2 (128^2), in L3 (512^2), out of cache (2048^2, 4096^2); the order 8
  // series adds 256^2 and 1024^2 for the growth with cells.
  double const target = s ? 2e4 : 2e8;  // cell updates per run: ~0.1-1 s on two cores
  std::vector<int> const sizes = s ? std::vector<int>{10, 16, 24} : std::vector<int>{128, 512, 2048, 4096};
  std::vector<int> const extra = s ? std::vector<int>{12} : std::vector<int>{256, 1024};
  for (int n : sizes) {
    register_forward<ExecSpace, 2>(b, {n, n, 1, 0}, target, o);
    register_forward<ExecSpace, 4>(b, {n, n, 1, 0}, target, o);
    register_forward<ExecSpace, 8>(b, {n, n, 1, 0}, target, o);
  }
  for (int n : extra) register_forward<ExecSpace, 8>(b, {n, n, 1, 0}, target, o);

  // Batches on the Marmousi-sized grid, orders 4 and 8; nt series at order 4.
  int const mz = s ? 12 : 141, mx = s ? 40 : 681;
  for (int shots : {1, 4, 8, 16, 32}) {
    register_forward<ExecSpace, 4>(b, {mz, mx, shots, 0}, target, o);
    register_forward<ExecSpace, 8>(b, {mz, mx, shots, 0}, target, o);
  }
  for (int nt : s ? std::vector<int>{4, 8} : std::vector<int>{125, 250, 500, 1000})
    register_forward<ExecSpace, 4>(b, {mz, mx, 1, nt}, target, o);

  // Born modelling of 8 shots and an RTM shot against the forward (same run): 141 x 681, orders
  // 4 and 8.
  using against = void (*)(benchmark::State&, ForwardCase);
  auto against_forward = [&](char const* family, ForwardCase const& c, against at4, against at8) {
    for (int order : {4, 8}) {
      auto const name = bench_name(family, b,
                                   {{"order", std::to_string(order)},
                                    {"nz", std::to_string(c.nz)},
                                    {"nx", std::to_string(c.nx)},
                                    {"shots", std::to_string(c.shots)},
                                    {"nt", std::to_string(c.nt)}});
      against const f = order == 4 ? at4 : at8;
      add(name, [c, f](benchmark::State& st) { f(st, c); })->Unit(benchmark::kMillisecond);
    }
  };
  against_forward("born", {mz, mx, s ? 2 : 8, s ? 8 : 250}, &bm_born<ExecSpace, 4>, &bm_born<ExecSpace, 8>);
  against_forward("rtm", {mz, mx, 1, s ? 8 : 500}, &bm_rtm<ExecSpace, 4>, &bm_rtm<ExecSpace, 8>);

  // Gradient: 4 shots of 141 x 681, order 4, nt 500.
  int const gs = s ? 2 : 4, gnt = s ? 12 : 500;
  for (std::string strategy : {"full", "boundary"})
    for (std::string location : {"device", "host", "disk"})
      for (std::string dtype : {"fp32", "fp16", "bf16", "int8"}) {
        GradientCase const c{mz, mx, gs, gnt, strategy, location, dtype};
        add(bench_name("gradient", b,
                       {{"order", "4"},
                        {"nz", std::to_string(mz)},
                        {"nx", std::to_string(mx)},
                        {"shots", std::to_string(gs)},
                        {"nt", std::to_string(gnt)},
                        {"strategy", strategy},
                        {"location", location},
                        {"dtype", dtype}}),
            [c](benchmark::State& st) { bm_gradient<ExecSpace>(st, c); })
            ->Unit(benchmark::kMillisecond);
      }

  // Small problem (launch-bound on devices): one shot of 141 x 681, boundary saving on the
  // device; its forward is the shots:1 case of the batch series above.
  for (std::string dtype : {"fp32", "fp16"}) {
    GradientCase const c{mz, mx, 1, gnt, "boundary", "device", dtype};
    add(bench_name("gradient", b,
                   {{"order", "4"},
                    {"nz", std::to_string(mz)},
                    {"nx", std::to_string(mx)},
                    {"shots", "1"},
                    {"nt", std::to_string(gnt)},
                    {"strategy", "boundary"},
                    {"location", "device"},
                    {"dtype", dtype}}),
        [c](benchmark::State& st) { bm_gradient<ExecSpace>(st, c); })
        ->Unit(benchmark::kMillisecond);
  }

  register_graphs<ExecSpace>(b, o, mz, mx);
  register_tiles<ExecSpace>(b, o);

  // The peer comparison's cases.
  register_marmousi<ExecSpace, 4>(b, o);
  register_marmousi<ExecSpace, 8>(b, o);
  register_deepwave<ExecSpace, 4>(b, o);
  register_deepwave<ExecSpace, 8>(b, o);

  // 3D: the cube in and out of cache, orders 4 and 8; gradient memory per strategy and dtype.
  register_cube3d<ExecSpace, 4>(b, o);
  register_cube3d<ExecSpace, 8>(b, o);
  register_cube3d_memory<ExecSpace>(b, o);

  // Codecs on 16 Mi values (64 MiB of fp32).
  std::size_t const nc = s ? (std::size_t(1) << 14) : (std::size_t(1) << 24);
  for (std::string dtype : {"fp32", "fp16", "bf16", "int8"}) {
    add(bench_name("codec_encode", b, {{"dtype", dtype}, {"n", std::to_string(nc)}}), [nc,
                                                                                       dtype](benchmark::State& st) {
      bm_codec<ExecSpace>(st, nc, dtype, true);
    })->Unit(benchmark::kMillisecond);
    add(bench_name("codec_decode", b, {{"dtype", dtype}, {"n", std::to_string(nc)}}), [nc,
                                                                                       dtype](benchmark::State& st) {
      bm_codec<ExecSpace>(st, nc, dtype, false);
    })->Unit(benchmark::kMillisecond);
  }

  // Step stores: 128 steps of 1 MiB (fp32), 16 steps per transfer.
  std::size_t const vs = s ? 4096 : (std::size_t(1) << 18);
  int const steps = s ? 8 : 128, interval = s ? 4 : 16;
  std::string const total_mib = std::to_string(vs * 4 * static_cast<std::size_t>(steps) >> 20);
  std::vector<StoreCase> const cases = {{"host", "fp32", vs, steps, interval, false},
                                        {"disk", "fp32", vs, steps, interval, false},
                                        {"disk", "fp32", vs, steps, interval, true},
                                        {"disk", "int8", vs, steps, interval, false}};
  for (auto const& c : cases) {
    std::vector<std::pair<std::string, std::string>> p = {
        {"location", c.location}, {"dtype", c.dtype}, {"mib", total_mib}};
    if (!c.cold)
      add(bench_name("store_write", b, p), [c](benchmark::State& st) {
        bm_store<ExecSpace>(st, c, true);
      })->Unit(benchmark::kMillisecond);
    if (c.location == "disk") p.emplace_back("cache", c.cold ? "cold" : "warm");
    add(bench_name("store_read", b, p), [c](benchmark::State& st) {
      bm_store<ExecSpace>(st, c, false);
    })->Unit(benchmark::kMillisecond);
  }
}

}  // namespace ksweep::bench
