#pragma once
// Kernel launches per time step, counted through the Kokkos Tools callbacks: small problems are
// launch-bound on devices, so each step's launch count is part of the contract.
//   forward modelling: 2 (point work, stencil)
//   adjoint:           2
//   gradient forward:  4 (point work, stencil, ring encode, the layer terms of the model cells
//                      next to the layer saved)
//   gradient backward: 4 (the point work of both wavefields with the decoded ring, imaging
//                      with reconstruction, the layer terms added, adjoint stencil)
// The counts are slopes over two run lengths, so set-up launches do not enter.

#include <ksweep/core/gradient.hpp>
#include <test_utils.hpp>

#include <gtest/gtest.h>

#include <ksweep/core/runtime.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

namespace {

using namespace ksweep;

struct LaunchProblem {
  using P = core::Propagator<float, 8, TEST_EXECSPACE>;
  using E = core::GradientEngine<float, 8, TEST_EXECSPACE>;
  static constexpr int nz = 30, nx = 40, shots = 2;
  P prop;
  LaunchProblem() : prop(TEST_EXECSPACE(), core::ModelGrid{nz, nx, 10.0}, pml(), 1e-3, shots) {
    std::vector<float> v(static_cast<std::size_t>(nz) * nx, 2000.0f);
    prop.set_velocity(v.data());
    prop.set_survey(test::line_survey(shots, nz, nx, 2, 3, 12));
    // Launches per step of the device schedule: batched by rows, or by cells (as on devices)
    // when the test program runs with the cells schedule.
    prop.set_schedule(core::default_schedule() == core::Schedule::cells ? core::Schedule::cells
                                                                        : core::Schedule::batched);
  }
  static core::PmlConfig pml() {
    core::PmlConfig p;
    p.width = 6;
    return p;
  }
  P::wavelet_view wavelets(int nt) const { return P::wavelet_view("w", shots, 1, nt); }
  P::record_view records(int nt) const { return P::record_view("r", shots, nt, 12); }
};

// Launches of `run(nt, counter)` per step: (launches(nt2) - launches(nt1)) / (nt2 - nt1), each
// counted on a second run of its size (a first use allocates: the adjoint fields, a gradient's
// step store, which a run of the same size reuses).
template <class Run>
double launches_per_step(Run const& run, std::string* labels) {
  int const nt1 = 10, nt2 = 30;
  long counts[2];
  int i = 0;
  for (int nt : {nt1, nt2}) {
    {
      core::LaunchCounter warm_up;
      run(nt, warm_up);
    }
    core::LaunchCounter counter;
    run(nt, counter);
    counts[i++] = counter.count();
    if (nt == nt2) {
      labels->clear();
      for (auto const& [k, v] : counter.by_label()) *labels += "  " + k + ": " + std::to_string(v) + "\n";
    }
  }
  return static_cast<double>(counts[1] - counts[0]) / (nt2 - nt1);
}

KSWEEP_TEST(launches_per_step_forward_and_adjoint) {
  LaunchProblem p;
  // The schedule the test program asked for is the one that runs (see test_main.cpp).
  EXPECT_EQ(p.prop.runs_cells(),
            core::default_schedule() == core::Schedule::cells || !core::impl::runs_by_rows<TEST_EXECSPACE>);
  for (bool adjoint : {false, true}) {
    std::string labels;
    double const per_step = launches_per_step(
        [&](int nt, core::LaunchCounter&) {
          auto w = p.wavelets(nt);
          auto r = p.records(nt);
          if (adjoint) p.prop.adjoint(r, w);
          else p.prop.forward(w, r);
        },
        &labels);
    EXPECT_EQ(per_step, 2.0) << (adjoint ? "adjoint" : "forward") << "\n" << labels;
  }
}

KSWEEP_TEST(launches_per_step_gradient) {
  for (char const* strategy : {"boundary", "full"}) {
    LaunchProblem p;
    storage::StorageConfig cfg;
    cfg.strategy = storage::parse_strategy(strategy);
    cfg.dtype = storage::Dtype::int8;  // the codec with a block reduction
    LaunchProblem::E engine(p.prop, cfg);
    std::string labels;
    double const fwd = launches_per_step(
        [&](int nt, core::LaunchCounter&) {
          auto w = p.wavelets(nt);
          auto r = p.records(nt);
          engine.forward(w, r);
        },
        &labels);
    EXPECT_EQ(fwd, 4.0) << strategy << "\n" << labels;
    double const bwd = launches_per_step(
        [&](int nt, core::LaunchCounter& counter) {
          auto w = p.wavelets(nt);
          auto r = p.records(nt);
          engine.forward(w, r);
          counter.reset();  // the backward pass alone
          LaunchProblem::E::images_type images(LaunchProblem::nz, LaunchProblem::nx);
          engine.backward(w, r, images);
        },
        &labels);
    EXPECT_EQ(bwd, 4.0) << strategy << "\n" << labels;
  }
}

// Overwrites the stack below the caller with `value`: what a functor's padding would read.
[[gnu::noinline]] inline void scribble_stack(unsigned char value) {
  volatile unsigned char bytes[1 << 16];
  for (std::size_t i = 0; i < sizeof(bytes); ++i) bytes[i] = value;
}

// The bytes of a T that a copy of `v` leaves as they were (copied into memory of 0x00 and of
// 0xff, compared): padding, which a launch trace would read as whatever the stack held.
template <class T>
std::vector<std::size_t> unwritten_bytes(T const& v) {
  alignas(T) unsigned char a[sizeof(T)], b[sizeof(T)];
  std::memset(a, 0x00, sizeof(T));
  std::memset(b, 0xff, sizeof(T));
  T* ca;
  T* cb;
  {
    impl::UncountedViews const uncounted;
    ca = ::new (static_cast<void*>(a)) T(v);
    cb = ::new (static_cast<void*>(b)) T(v);
  }
  std::vector<std::size_t> out;
  for (std::size_t i = 0; i < sizeof(T); ++i)
    if (a[i] != b[i]) out.push_back(i);
  ca->~T();
  cb->~T();
  return out;
}

// Padding in the functors of the runs of steps that step graphs trace: none (each would make a
// fingerprint depend on the stack, and a graph's capture fail). Every functor a forward, adjoint
// or gradient step builds, float and double, 2D and 3D, both physics.
template <class Real, int Order, int Dim, class Physics>
std::vector<std::string> padded_step_functors() {
  using E = core::GradientEngine<Real, Order, TEST_EXECSPACE, Dim, Physics>;
  using P = typename E::propagator_type;
  using mem = typename TEST_EXECSPACE::memory_space;
  using ring = storage::RingValues<Real, mem>;
  using decoder = storage::DecodeValues<storage::Fp16Codec, Real, mem, ring>;
  using encoder = storage::EncodeBlocks<storage::Fp16Codec, Real, mem, ring>;
  using fused = core::Concat<typename P::points_functor, core::Concat<core::NoWork, decoder>>;
  using removal = core::Concat<typename P::points_functor, core::Concat<core::InjectPoints<Real, mem>, decoder>>;
  std::vector<std::string> found;
  auto check = [&](auto const& v, char const* name) {
    auto const bytes = unwritten_bytes(v);
    if (!bytes.empty())
      found.push_back(std::string(name) + " (" + std::to_string(bytes.size()) + " of " + std::to_string(sizeof(v)) +
                      " bytes, the first at " + std::to_string(bytes[0]) + ")");
  };
  check(typename P::kernel_type{}, "the step (PhysicsStep)");
  check(core::impl::CellTiles<core::ForwardTag, typename P::kernel_type>{}, "CellTiles (the step)");
  check(core::impl::CellTiles<void, typename E::imaging_type>{}, "CellTiles (the imaging)");
  check(typename P::points_functor{}, "the point work (Concat<InjectPoints, SamplePoints>)");
  check(core::SamplePoints<Real, mem>{}, "SamplePoints");
  check(typename E::imaging_type{}, "the imaging");
  check(typename E::SaveLayerTerms{}, "SaveLayerTerms");
  check(typename E::ApplyLayerTerms{}, "ApplyLayerTerms");
  check(typename E::LayerSave{}, "LayerSave");
  check(typename E::LayerChain{}, "LayerChain");
  check(ring{}, "RingValues");
  check(encoder{}, "EncodeBlocks");
  check(fused{}, "the fused backward point work (with NoWork)");
  check(removal{}, "the fused backward point work (with the sources' removal)");
  return found;
}

KSWEEP_TEST(launches_step_functors_hold_no_padding) {
  std::vector<std::string> all;
  auto add = [&](std::vector<std::string> const& v, char const* what) {
    for (auto const& f : v) all.push_back(std::string(what) + ": " + f);
  };
  add(padded_step_functors<float, 8, 2, core::Acoustic>(), "float 2D");
  add(padded_step_functors<double, 4, 2, core::Acoustic>(), "double 2D");
  add(padded_step_functors<float, 4, 3, core::Acoustic>(), "float 3D");
  add(padded_step_functors<float, 4, 2, core::AcousticVd>(), "float 2D, variable density");
  add(padded_step_functors<double, 4, 3, core::AcousticVd>(), "double 3D, variable density");
  std::string list;
  for (auto const& f : all) list += "\n  " + f;
  EXPECT_TRUE(all.empty()) << "functors with padding:" << list;
}

// A LaunchTrace (launch.hpp) is the fingerprint step graphs replay by (step_graph.hpp): the same
// launches on the same buffers give the same fingerprint, run after run, whatever the stack held
// (a functor's padding would hold it: the step functors have none); other buffers another; an
// inversion's next batch and velocity of the same sizes the same (the buffers the steps read are
// refilled, not reallocated); traced launches that are not made leave the fields as they were
// with the levels rotated as a run would.
KSWEEP_TEST(launches_traced_fingerprint_what_runs) {
  bool const setting = core::step_graphs();
  core::set_step_graphs(false);  // the test's trace sees every launch (a graph's run traces its own)
  LaunchProblem p;
  int const nt = 10;  // even: every run starts at the same level parity
  auto const w = p.wavelets(nt);
  Kokkos::deep_copy(w, 1.0f);
  auto const r = p.records(nt), r2 = p.records(nt);
  using Log = std::vector<std::pair<std::string, std::uint64_t>>;
  auto trace = [&](auto const& run, bool make, unsigned char stack, Log* log = nullptr) {
    impl::LaunchTrace t;
    t.make = make;
    t.log = log;
    scribble_stack(stack);
    {
      impl::ScopedTrace scope(&t);
      run();
    }
    Kokkos::fence();
    return t;
  };
  auto const forward = [&] { p.prop.forward(w, r); };
  auto const a = trace(forward, true, 0x35), b = trace(forward, true, 0xca);
  EXPECT_EQ(a.fingerprint(), b.fingerprint());
  EXPECT_EQ(a.launches, 2u * nt + 1) << "two a step and the last records";
  EXPECT_TRUE(a.capturable);
  EXPECT_NE(trace([&] { p.prop.forward(w, r2); }, true, 0x35).fingerprint(), a.fingerprint()) << "other records";
  // Not made: the same fingerprint, the records untouched, the levels rotated (forward() starts
  // from level 0: an odd number of steps ends on level 1).
  Kokkos::deep_copy(r, 7.0f);
  auto const odd = p.wavelets(nt - 1);
  auto const odd_records = p.records(nt - 1);
  auto const c = trace([&] { p.prop.forward(odd, odd_records); }, false, 0x5a);
  EXPECT_EQ(c.launches, 2u * (nt - 1) + 1);
  EXPECT_EQ(p.prop.forward_state().cur, 1) << "an odd number of steps traced turns the levels";
  EXPECT_EQ(trace(forward, false, 0xa5).fingerprint(), a.fingerprint()) << "traced, not made";
  auto const now = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), r);
  for (std::size_t i = 0; i < now.size(); ++i) ASSERT_EQ(now.data()[i], 7.0f) << "a traced launch ran";
  // An inversion's next iteration: a new batch of the same sizes and a new velocity.
  p.prop.set_survey(test::line_survey(LaunchProblem::shots, LaunchProblem::nz, LaunchProblem::nx, 4, 5, 12));
  std::vector<float> v2(static_cast<std::size_t>(LaunchProblem::nz) * LaunchProblem::nx, 2100.0f);
  p.prop.set_velocity(v2.data());
  EXPECT_EQ(trace(forward, true, 0x35).fingerprint(), a.fingerprint()) << "a new batch and a new velocity";
  // The gradient's runs of steps, forward and reverse sweep, run after run.
  storage::StorageConfig cfg;
  cfg.dtype = storage::Dtype::int8;
  LaunchProblem::E engine(p.prop, cfg);
  Log logs[2][2];
  for (int i = 0; i < 2; ++i) {
    unsigned char const stack = i == 0 ? 0x35 : 0xca;
    EXPECT_TRUE(trace([&] { engine.forward(w, r); }, true, stack, &logs[i][0]).capturable);
    EXPECT_TRUE(trace([&] { engine.backward(w, r); }, true, stack, &logs[i][1]).capturable);
  }
  for (int k = 0; k < 2; ++k) {
    Log const &one = logs[0][k], &two = logs[1][k];
    ASSERT_EQ(one.size(), two.size()) << (k == 0 ? "gradient forward" : "gradient backward");
    for (std::size_t i = 0; i < one.size(); ++i)
      ASSERT_EQ(one[i], two[i]) << (k == 0 ? "gradient forward" : "gradient backward") << ", launch " << i << " of "
                                << one.size() << ": the runs part there";
  }
  core::set_step_graphs(setting);
}

// A forward, an adjoint and a gradient (fp16 store) of `p`, `runs` times on the same buffers, every
// output kept as doubles (floats exactly): the records, the adjoint's wavelets, the gradient.
std::vector<std::vector<double>> step_outputs(LaunchProblem& p, int runs) {
  int const nt = 12;
  auto const w = p.wavelets(nt);
  auto const wh = Kokkos::create_mirror_view(w);
  for (std::size_t i = 0; i < wh.size(); ++i) wh.data()[i] = std::sin(0.3f * static_cast<float>(i));
  Kokkos::deep_copy(w, wh);
  storage::StorageConfig cfg;
  cfg.dtype = storage::Dtype::fp16;
  LaunchProblem::E engine(p.prop, cfg);
  std::vector<std::vector<double>> out;
  auto keep = [&out](auto const& v) {
    auto const h = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), v);
    out.emplace_back(h.data(), h.data() + h.size());
  };
  auto const r = p.records(nt);
  auto const g = p.wavelets(nt);
  LaunchProblem::E::images_type images(LaunchProblem::nz, LaunchProblem::nx);
  for (int i = 0; i < runs; ++i) {
    p.prop.forward(w, r);
    keep(r);
    p.prop.adjoint(r, g);
    keep(g);
    engine.forward(w, r);
    Kokkos::deep_copy(images.grads, 0.0);
    engine.backward(w, r, images);
    keep(images.grad);
  }
  return out;
}

// Outputs `got` are `want`'s bits.
void expect_same_bits(std::vector<std::vector<double>> const& got, std::vector<std::vector<double>> const& want,
                      std::string const& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (std::size_t i = 0; i < got.size(); ++i) {
    ASSERT_EQ(got[i].size(), want[i].size()) << what << ", output " << i;
    EXPECT_EQ(0, std::memcmp(got[i].data(), want[i].data(), got[i].size() * sizeof(double)))
        << what << ", output " << i;
  }
}

// Runs of steps through step graphs (KSWEEP_CUDA_GRAPHS=1, or set_step_graphs): the bits of
// launches, forward, adjoint and gradient, a first run (launched), a second (captured) and a
// third (replayed); on a CUDA build, the counts show the captures and replays; elsewhere they run
// as they are.
KSWEEP_TEST(launches_replayed_give_the_bits_of_launches) {
  bool const setting = core::step_graphs();
  auto run = [](bool graphs) {
    core::set_step_graphs(graphs);
    LaunchProblem p;
    // The same buffers three times: the second run captures, the third replays.
    auto out = step_outputs(p, 3);
    return std::make_pair(out, p.prop.graph_counts());
  };
  auto const [launched, plain] = run(false);
  auto const [replayed, counts] = run(true);
  bool const graphs_here = core::StepGraphs<TEST_EXECSPACE>::enabled();  // a CUDA build
  core::set_step_graphs(setting);
  expect_same_bits(replayed, launched, "replayed against launched");
  EXPECT_EQ(plain.replays + plain.captures, 0u);
  if (graphs_here) {  // a CUDA build: the counts of the graph runs, and at least one replay
    std::string const how = "replays " + std::to_string(counts.replays) + ", captures " +
                            std::to_string(counts.captures) + ", plain " + std::to_string(counts.plain) +
                            ", failures " + std::to_string(counts.failures);
    RecordProperty("step_graphs", how);
    EXPECT_GT(counts.replays, 0u) << how;
  } else {
    EXPECT_EQ(counts.replays + counts.captures, 0u);
  }
}

// The launches over cells (devices, and the `cells` schedule on hosts) in tiles of 256 cells:
// every cell of the grid once, whatever the tile's width and lane order, narrow launches (the
// strips next to a cut) and ragged edges included; 32 consecutive lanes of a tile at least 32
// cells wide are 32 consecutive cells of one row when x runs fastest.
KSWEEP_TEST(launches_tiles_take_each_cell_once) {
  struct Count {
    std::vector<int>* seen;
    int cols;
    void operator()(core::impl::CellTag<core::ForwardTag>, int r, int c) const {
      ++(*seen)[static_cast<std::size_t>(r) * cols + c];
    }
  };
  struct Where {
    int* r;
    int* c;
    void operator()(core::impl::CellTag<core::ForwardTag>, int row, int col) const { *r = row, *c = col; }
  };
  std::vector<std::pair<int, int>> const grids = {{1, 1}, {3, 2}, {7, 5}, {2, 300}, {300, 3}, {141, 681}, {64, 256}};
  for (int width : {4, 8, 16, 32, 64, 128, 256})
    for (bool x_fastest : {true, false})
      for (auto const& [rows, cols] : grids) {
        core::DeviceTiles const shape{width, x_fastest};
        std::vector<int> seen(static_cast<std::size_t>(rows) * cols, 0);
        core::impl::CellTiles<core::ForwardTag, Count> const t(Count{&seen, cols}, rows, cols, shape);
        ASSERT_EQ(t.size() % 256, 0);
        for (std::int64_t i = 0; i < t.size(); ++i) t(i);
        std::size_t wrong = 0;
        for (int v : seen) wrong += v != 1;
        EXPECT_EQ(wrong, 0u) << rows << " x " << cols << ", tiles " << width
                             << (x_fastest ? " x first" : " rows first");
        if (x_fastest && width >= 32 && cols >= width) {  // a warp: 32 cells of one row
          int r0 = -1, c0 = -1, r = -1, c = -1;
          core::impl::CellTiles<core::ForwardTag, Where> const w(Where{&r, &c}, rows, cols, shape);
          for (std::int64_t i = 0; i < 32; ++i) {
            w(i);
            if (i == 0) r0 = r, c0 = c;
            EXPECT_TRUE(r == r0 && c == c0 + i) << "lane " << i << ": (" << r << ", " << c << ")";
          }
        }
      }
  for (int bad : {0, 2, 48, 512}) EXPECT_THROW(core::set_device_tiles(core::DeviceTiles{bad, true}), Error) << bad;
}

// The shape of the launches over cells changes no bit: a forward, an adjoint and a gradient
// (the step and the imaging run over cells) give the default shape's bits under other widths
// and the rows-first lane order, on the cells schedule (the devices' launches; on hosts the
// test program's `cells` run and this case's own schedule).
KSWEEP_TEST(launches_tile_shapes_give_the_same_bits) {
  struct Restore {
    core::DeviceTiles setting = core::device_tiles();
    ~Restore() { core::set_device_tiles(setting); }
  } const restore;
  auto run = [](core::DeviceTiles shape) {
    core::set_device_tiles(shape);
    LaunchProblem p;
    p.prop.set_schedule(core::Schedule::cells);
    return step_outputs(p, 1);
  };
  auto const reference = run(core::DeviceTiles{});
  for (auto const& shape : {core::DeviceTiles{4, true}, core::DeviceTiles{32, true}, core::DeviceTiles{256, true},
                            core::DeviceTiles{64, false}, core::DeviceTiles{8, false}})
    expect_same_bits(run(shape), reference,
                     "tiles " + std::to_string(shape.cols) + (shape.x_fastest ? " x first" : " rows first"));
}

}  // namespace
