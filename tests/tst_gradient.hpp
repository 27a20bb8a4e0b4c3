#pragma once
// The FWI gradient: finite differences (fp64), boundary reconstruction against full storage on
// every location, the effect of lossy storage on the gradient, and every allocation against the
// sizes the memory estimate computes.

#include <ksweep/core/domain.hpp>
#include <ksweep/core/gradient.hpp>
#include <ksweep/core/sizes.hpp>
#include <harness.hpp>
#include <physics_utils.hpp>
#include <test_utils.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <type_traits>

namespace {

using namespace ksweep;

/// A layered, faulted model (a small Marmousi-like section), [nz][nx].
inline std::vector<float> layered_model(int nz, int nx, double shift = 0.0) {
  std::vector<float> v(static_cast<std::size_t>(nz) * nx);
  for (int iz = 0; iz < nz; ++iz)
    for (int ix = 0; ix < nx; ++ix) {
      double const fault = ix > nx / 2 ? 0.15 * nz : 0.0;
      double const depth = iz + 0.2 * ix * std::sin(0.05 * ix) - fault + shift;
      double const layer = std::floor(depth / (nz / 6.0));
      v[static_cast<std::size_t>(iz) * nx + ix] =
          static_cast<float>(iz < 3 ? 1500.0 : 1700.0 + 250.0 * layer + 60.0 * std::sin(0.7 * layer + 0.1 * ix));
    }
  return v;
}

/// Two shots along a line (sources at z = 2, receivers at z = 3) over the layered model, from a
/// starting model shifted by 1.5 cells in depth.
template <class Real, int Order>
struct Problem : test::GradientProblem<Real, Order, 2> {
  int nz, nx;
  Problem(int nz_, int nx_, int nt_, bool free_surface, double dh = 10.0, double dt = 1e-3, double freq = 15.0,
          std::array<double, 3> const& spacing = {})
      : test::GradientProblem<Real, Order, 2>(grid(nz_, nx_, dh, spacing), pml(free_surface), dt,
                                              test::line_survey(2, nz_, nx_, 2, 3, nx_ / 2), layered_model(nz_, nx_),
                                              layered_model(nz_, nx_, 1.5), nt_, freq),
        nz(nz_),
        nx(nx_) {}
  static core::ModelGrid grid(int nz, int nx, double dh, std::array<double, 3> const& spacing) {
    core::ModelGrid g{nz, nx, dh};
    if (spacing[0] > 0) g.set_spacing(spacing);
    return g;
  }
  static core::PmlConfig pml(bool fs) {
    core::PmlConfig p;
    p.width = 8;
    p.free_surface = fs;
    return p;
  }
};

using test::cosine;
using test::rel_l2;
using test::storage_cfg;

template <int Order>
void finite_difference_check(bool free_surface, std::string const& strategy,
                             std::array<double, 3> const& spacing = {}) {
  Problem<double, Order> p(26, 34, 220, free_surface, 10.0, 1e-3, 15.0, spacing);
  double loss = 0;
  auto g = p.gradient(storage_cfg(strategy), &loss);
  ASSERT_GT(loss, 0);
  std::mt19937 gen(7);
  auto const loss_at = [&](std::vector<float> const& v) { return p.loss_at(v); };
  for (int trial = 0; trial < 2; ++trial) {
    test::Direction const dir(gen, g.size());  // v0 + h d exact in float (test::Direction)
    double const gd = dir.dot(g);
    auto perturbed = [&](double h) { return dir.step(p.v0, h); };
    // Fourth-order central difference, so truncation stays far below the tolerance.
    double const h = 0.125;
    double const fd = dir.central(loss_at, p.v0, h);
    double const err = std::abs(fd - gd) / std::abs(gd);
    std::printf("order %d fs %d %s: <g,d> = %.10e, central FD = %.10e, relative error %.2e\n", Order, free_surface,
                strategy.c_str(), gd, fd, err);
    EXPECT_LE(err, 1e-6) << "order " << Order << " free surface " << free_surface << " " << strategy;
    // Taylor test: the first-order remainder shrinks with slope 2.
    double const l0 = p.loss_at(p.v0);
    double r1 = std::abs(p.loss_at(perturbed(16 * h)) - l0 - 16 * h * gd);
    double r2 = std::abs(p.loss_at(perturbed(8 * h)) - l0 - 8 * h * gd);
    double const slope = std::log2(r1 / r2);
    std::printf("  Taylor remainder slope %.3f\n", slope);
    EXPECT_NEAR(slope, 2.0, 0.1);
  }
}

KSWEEP_TEST(gradient_finite_difference_fp64_full) {
  finite_difference_check<4>(false, "full");
  finite_difference_check<8>(true, "full");
}

KSWEEP_TEST(gradient_finite_difference_fp64_boundary) {
  finite_difference_check<2>(true, "boundary");
  finite_difference_check<6>(false, "boundary");
}

// The model cells within the stencil's reach of the layer, whose step has layer terms (the
// layer's psi next door, AcousticCell::forward_reach): the gradient on them alone against central
// finite differences (the layer held fixed).
template <int Order>
void edge_finite_difference_check(bool free_surface, std::string const& strategy,
                                  std::array<double, 3> const& spacing = {}) {
  Problem<double, Order> p(26, 34, 220, free_surface, 10.0, 1e-3, 15.0, spacing);
  double loss = 0;
  auto g = p.gradient(storage_cfg(strategy), &loss);
  ASSERT_GT(loss, 0);
  std::mt19937 gen(11);
  test::Direction dir(gen, g.size());
  int const M = Order / 2;
  for (int iz = 0; iz < p.nz; ++iz)
    for (int ix = 0; ix < p.nx; ++ix) {
      bool const edge = ix < M || ix >= p.nx - M || iz >= p.nz - M || (!free_surface && iz < M);
      if (!edge) dir.d[static_cast<std::size_t>(iz) * p.nx + ix] = 0;
    }
  double const gd = dir.dot(g);
  double const fd = dir.central([&](std::vector<float> const& v) { return p.loss_at(v); }, p.v0, 0.125);
  double const err = std::abs(fd - gd) / std::abs(gd);
  std::printf("order %d fs %d %s, edge cells: <g,d> = %.10e, central FD = %.10e, relative error %.2e\n", Order,
              free_surface, strategy.c_str(), gd, fd, err);
  EXPECT_LE(err, 1e-6) << "order " << Order << " free surface " << free_surface << " " << strategy;
}

KSWEEP_TEST(gradient_finite_difference_fp64_edge_cells) {
  edge_finite_difference_check<2>(false, "boundary");
  edge_finite_difference_check<4>(true, "full");
  edge_finite_difference_check<8>(false, "full");
  edge_finite_difference_check<6>(false, "boundary");
}

// Cells of their own size per axis (dz 12.5 m, dx 8 m): the weighted stencil's gradient, its
// layer terms at the edge cells and the reconstruction, against central differences.
KSWEEP_TEST(gradient_finite_difference_spacing_per_axis) {
  std::array<double, 3> const d = {12.5, 0.0, 8.0};
  finite_difference_check<4>(false, "boundary", d);
  edge_finite_difference_check<4>(false, "boundary", d);
  edge_finite_difference_check<8>(true, "full", d);
}

// The layer's chain rule (GradientEngine::set_layer_chain): the layer a copy of the model's edge
// cells in the loss as well, damping profiles of a fixed velocity. The gradient against central
// differences along directions on the edge cells alone and on every cell; the batched and shots
// schedules give the same bits. Without the chain rule the edge cells' derivative is off (the
// test's own check that it can fail). A source between cells next to the model's edge has taps
// in the layer (the sources' terms taken out of the saved layer differences).
template <int Order>
void layer_chain_check(bool free_surface, std::string const& strategy, bool source_in_layer_taps) {
  Problem<double, Order> p(26, 34, 220, free_surface);
  if (source_in_layer_taps) {
    core::Survey s = test::line_survey(2, 26, 34, 2, 3, 17);
    // (z, x) in cells: taps on both sides of the left and bottom edges.
    s.source_points = {core::Point{12.5, 0.4}, core::Point{24.6, 20.5}};
    p.prop.set_survey(s);
    p.prop.set_velocity(p.v_true.data());
    p.prop.forward(p.w, p.observed);
  }
  p.follow_layer(3600.0);
  auto const loss_at = [&](std::vector<float> const& v) { return p.loss_at(v); };
  std::vector<double> g[2];
  for (int i = 0; i < 2; ++i) {
    p.prop.set_schedule(i == 0 ? core::Schedule::batched : core::Schedule::shots);
    g[i] = p.gradient(storage_cfg(strategy));
  }
  p.prop.set_schedule(core::Schedule::automatic);
  EXPECT_TRUE(g[0] == g[1]) << "batched and shots schedules differ";
  int const M = Order / 2;
  std::mt19937 gen(13);
  for (bool const edge_only : {true, false}) {
    test::Direction dir(gen, g[0].size());
    for (int iz = 0; iz < p.nz; ++iz)
      for (int ix = 0; ix < p.nx; ++ix) {
        bool const edge = ix < M || ix >= p.nx - M || iz >= p.nz - M || (!free_surface && iz < M);
        if (edge_only && !edge) dir.d[static_cast<std::size_t>(iz) * p.nx + ix] = 0;
      }
    double const gd = dir.dot(g[0]);
    double const fd = dir.central(loss_at, p.v0, 0.125);
    double const err = std::abs(fd - gd) / std::abs(gd);
    std::printf("order %d fs %d %s%s, layer chain, %s: <g,d> = %.10e, central FD = %.10e, relative error %.2e\n", Order,
                free_surface, strategy.c_str(), source_in_layer_taps ? ", source taps in the layer" : "",
                edge_only ? "edge cells" : "all cells", gd, fd, err);
    EXPECT_LE(err, 1e-6) << "order " << Order << " free surface " << free_surface << " " << strategy;
    if (edge_only) {  // the same direction without the chain rule: the layer's share is missing
      p.chain = false;
      double const fixed = dir.dot(p.gradient(storage_cfg(strategy)));
      p.chain = true;
      std::printf("  without the chain rule: relative error %.2e\n", std::abs(fd - fixed) / std::abs(fd));
      EXPECT_GT(std::abs(fd - fixed) / std::abs(fd), 1e-3);
    }
  }
}

KSWEEP_TEST(gradient_layer_chain_finite_difference_fp64) {
  layer_chain_check<2>(false, "boundary", false);
  layer_chain_check<4>(true, "full", false);
  layer_chain_check<6>(false, "full", true);
  layer_chain_check<8>(false, "boundary", true);
}

template <int Order>
void boundary_equals_full(bool free_surface) {
  Problem<float, Order> p(30, 40, 300, free_surface);
  auto ref = p.gradient(storage_cfg("full"));
  for (std::string loc : {"device", "host", "disk"}) {
    auto g = p.gradient(storage_cfg("boundary", loc));
    double const e = rel_l2(g, ref);
    std::printf("order %d fs %d boundary/%s vs full: relative L2 %.2e\n", Order, free_surface, loc.c_str(), e);
    EXPECT_LE(e, 1e-5) << loc;
  }
}

KSWEEP_TEST(gradient_boundary_equals_full_fp32) {
  boundary_equals_full<4>(false);
  boundary_equals_full<8>(true);
}

// Lossy storage of the saved ring: the gradient's relative L2 difference from fp32 storage, which
// sees scale as well as direction, bounded at about 10x the values measured (fp16 1.6e-5, bf16
// 1.3e-4, int8 4.3e-4); the difference must not be zero (the codec ran).
KSWEEP_TEST(gradient_lossy_storage_accuracy) {
  Problem<float, 4> p(60, 120, 500, false, 12.5, 1.2e-3, 12.0);
  auto ref = p.gradient(storage_cfg("boundary", "device", "fp32"));
  struct Case {
    char const* dtype;
    double max_rel_l2;
  };
  for (Case c : {Case{"fp16", 1.6e-4}, Case{"bf16", 1.3e-3}, Case{"int8", 4.3e-3}}) {
    for (std::string loc : {"device", "disk"}) {
      auto g = p.gradient(storage_cfg("boundary", loc, c.dtype, 16));
      double const e = rel_l2(g, ref);
      std::printf("dtype %s (%s): gradient relative L2 vs fp32 = %.3e (cosine %.10f)\n", c.dtype, loc.c_str(), e,
                  cosine(g, ref));
      EXPECT_LE(e, c.max_rel_l2) << c.dtype << " " << loc;
      EXPECT_GT(e, 0.0) << c.dtype << ": the lossy gradient equals the fp32 one (the codec did not run)";
    }
  }
}

// The size of the shipped example (141 x 681 at 25 m, nt 2000, 5 Hz, 340 receivers): `boundary`
// against `full` on every location, and lossy storage against fp32, where long records and a
// large grid reach what small cases do not (many transfer intervals of the host and disk stores,
// many codec blocks per step, a ring of 3.3k cells). Labelled `slow`; it runs in the OpenMP test
// program only (about 20 s on 2 cores, 1.7 GiB for `full`), in CI as well.
KSWEEP_LARGE_TEST(slow_gradient_example_size) {
  if constexpr (!std::is_same_v<TEST_EXECSPACE, Kokkos::DefaultHostExecutionSpace>)
    GTEST_SKIP() << "run with the default host backend only";
  Problem<float, 4> p(141, 681, 2000, false, 25.0, 2e-3, 5.0);
  auto const full = p.gradient(storage_cfg("full"));
  auto const ref = p.gradient(storage_cfg("boundary", "device", "fp32", 64));
  for (std::string loc : {"device", "host", "disk"}) {
    auto const g = loc == "device" ? ref : p.gradient(storage_cfg("boundary", loc, "fp32", 64));
    double const e = rel_l2(g, full);
    std::printf("example size: boundary/%s vs full: relative L2 %.2e\n", loc.c_str(), e);
    EXPECT_LE(e, 1e-5) << loc;
  }
  struct Case {
    char const* dtype;
    double max_rel_l2;
  };
  // Bounds about 10x the measured relative L2 (fp16 9.1e-6, bf16 6.0e-5, int8 2.3e-4); boundary
  // against full measured 6.6e-6.
  for (Case c : {Case{"fp16", 9e-5}, Case{"bf16", 6e-4}, Case{"int8", 2.3e-3}}) {
    auto const g = p.gradient(storage_cfg("boundary", "disk", c.dtype, 64));
    double const e = rel_l2(g, ref);
    std::printf("example size: %s vs fp32: relative L2 %.3e\n", c.dtype, e);
    EXPECT_LE(e, c.max_rel_l2) << c.dtype;
    EXPECT_GT(e, 0.0) << c.dtype;
  }
}

}  // namespace

namespace {

// The saved cells of the gradient (core::ring_layout): in 2D the ring of M cells around the model
// (or the model with it), row by row; in 3D the shell of the model box, as a count and cell by
// cell, with and without a free surface.
KSWEEP_TEST(saved_cells_ring_2d_shell_3d) {
  int const m = 2;
  core::PmlConfig pml;
  pml.width = 5;
  core::Layout const l2(core::ModelGrid(12, 9, 10.0), pml, 2 * m);
  auto const a2 = core::grid_axes<2>(l2);
  for (bool whole : {false, true}) {
    std::vector<int> expected;
    int const P = a2[1].N + 2 * m;
    for (int iz = a2[0].lo - m; iz < a2[0].lo + a2[0].n + m; ++iz)
      for (int ix = a2[1].lo - m; ix < a2[1].lo + a2[1].n + m; ++ix) {
        bool const model = !a2[0].in_layer(iz) && !a2[1].in_layer(ix);
        if (whole || !model) expected.push_back((iz + m) * P + ix + m);
      }
    EXPECT_EQ(core::ring_layout(l2, whole, storage::Dtype::fp32), expected) << "2D, whole " << whole;
  }
  for (bool fs : {false, true}) {
    pml.width = 4;
    pml.free_surface = fs;
    core::Layout const l3(core::ModelGrid::volume(6, 7, 8, 10.0), pml, 2 * m);
    auto const a3 = core::grid_axes<3>(l3);
    auto const ring = core::ring_layout(l3, false, storage::Dtype::bf16),
               box = core::ring_layout(l3, true, storage::Dtype::bf16);
    long const rows = fs ? a3[0].n + m : a3[0].n + 2 * m;
    long const volume = rows * (a3[1].n + 2 * m) * (a3[2].n + 2 * m), model = 6L * 7 * 8;
    EXPECT_EQ(static_cast<long>(box.size()), volume) << "free surface " << fs;
    EXPECT_EQ(static_cast<long>(ring.size()), volume - model) << "free surface " << fs;
    long const sy = a3[2].N + 2 * m, sz = sy * (a3[1].N + 2 * m);
    for (std::size_t k = 0; k < ring.size(); ++k) {
      if (k > 0) {
        ASSERT_LT(ring[k - 1], ring[k]);
      }
      int const i0 = static_cast<int>(ring[k] / sz) - m, i1 = static_cast<int>(ring[k] % sz / sy) - m,
                i2 = static_cast<int>(ring[k] % sy) - m;
      ASSERT_TRUE(a3[0].in_layer(i0) || a3[1].in_layer(i1) || a3[2].in_layer(i2)) << "a model cell in the shell";
      ASSERT_TRUE(i0 >= (fs ? 0 : a3[0].lo - m) && i0 < a3[0].lo + a3[0].n + m && i1 >= a3[1].lo - m &&
                  i1 < a3[1].lo + a3[1].n + m && i2 >= a3[2].lo - m && i2 < a3[2].lo + a3[2].n + m)
          << "a cell farther than " << m << " from the model";
    }
  }
}

// The codec blocks of the saved cells (fp16, int8: a scale per block) hold the same cells of the
// model, however it is split into domains with cuts on multiples of core::cut_alignment: every
// block of the whole model's layout is a block of one subdomain's layout, cell for cell in model
// coordinates. So the saved values code to the same bits on every split. Also: the layout lists
// every saved cell once, and tiles away from the edges need no padding.
KSWEEP_TEST(saved_cells_code_alike_on_every_split) {
  using Block = std::vector<std::array<int, 3>>;  // model (z, y, x) of each cell; {-1, -1, -1}: padding
  auto blocks = [](core::Layout const& l, bool full, int y0, int x0) {
    auto const off = core::ring_layout(l, full, storage::Dtype::fp16);
    int const m = l.radius;
    long const sy = l.NX + 2 * m, sz = sy * (l.dim == 3 ? l.NY + 2 * m : 1);
    std::vector<Block> out;
    for (std::size_t k = 0; k < off.size(); ++k) {
      if (k % storage::block_size == 0) out.emplace_back();
      int const o = off[k];
      if (o < 0) {
        out.back().push_back({-1, -1, -1});
        continue;
      }
      int const z = static_cast<int>(o / sz) - m - l.top, y = static_cast<int>(o % sz / sy) - m - l.front + y0,
                x = static_cast<int>(o % sy) - m - l.left + x0;
      out.back().push_back({z, l.dim == 3 ? y : 0, x});
    }
    return out;
  };
  int compared = 0;
  for (int dim : {2, 3})
    for (int order : {2, 4, 6, 8})
      for (bool fs : {false, true})
        for (bool full : {false, true}) {
          core::PmlConfig pml;
          pml.width = order + 1;
          pml.free_surface = fs;
          core::ModelGrid const grid =
              dim == 3 ? core::ModelGrid::volume(7, 21, 26, 10.0) : core::ModelGrid(9, 283, 10.0);
          core::Layout const whole(grid, pml, order);
          int const g = core::cut_alignment(whole, full, storage::Dtype::fp16);
          std::string const what = std::to_string(dim) + "D, order " + std::to_string(order) +
                                   (fs ? ", free surface" : "") + (full ? ", full" : ", boundary") + ", tiles of " +
                                   std::to_string(g);
          EXPECT_EQ(core::cut_alignment(whole, full, storage::Dtype::fp32), 1) << what;
          auto const ref = blocks(whole, full, 0, 0);
          // Every saved cell once.
          auto plain = core::ring_layout(whole, full, storage::Dtype::fp32);
          auto tiled = core::ring_layout(whole, full, storage::Dtype::int8);
          EXPECT_EQ(tiled.size() % storage::block_size, 0u) << what;
          EXPECT_EQ(static_cast<long long>(tiled.size()), core::ring_stride(whole, full, storage::Dtype::int8)) << what;
          tiled.erase(std::remove_if(tiled.begin(), tiled.end(), [](int o) { return o < 0; }), tiled.end());
          std::sort(tiled.begin(), tiled.end());
          EXPECT_EQ(tiled, plain) << what;
          // Padding only in the edge tiles (and in each tile for the odd columns of a free surface).
          long const columns = (fs ? 1 : 2) * (order / 2) + (full ? grid.nz : 0);
          long const edge = dim == 3 ? 2L * ((grid.ny + g - 1) / g + (grid.nx + g - 1) / g) : 2;
          long const per_tile =
              (storage::block_size - columns * g * (dim == 3 ? g : 1) % storage::block_size) % storage::block_size;
          long const tiles =
              dim == 3 ? static_cast<long>((grid.ny + g - 1) / g) * ((grid.nx + g - 1) / g) : (grid.nx + g - 1) / g;
          EXPECT_LE(static_cast<long>(core::ring_stride(whole, full, storage::Dtype::fp16) - plain.size()),
                    edge * storage::block_size + tiles * per_tile)
              << what;
          for (core::DomainSplit split : {core::DomainSplit{1, 2}, core::DomainSplit{1, 3}, core::DomainSplit{2, 1},
                                          core::DomainSplit{2, 2}, core::DomainSplit{3, 2}}) {
            if (dim == 2 && split.ny_parts > 1) continue;
            split.align = g;
            try {
              core::check_split(grid, split, order / 2, split.count());
            } catch (Error const&) {
              continue;  // parts too thin for these tiles
            }
            std::vector<Block> got;
            for (int i = 0; i < split.count(); ++i) {
              auto const d = core::subdomain(grid, pml, split, i, 1500.0);
              EXPECT_EQ(d.x0 % g, 0) << what;
              EXPECT_EQ(d.y0 % g, 0) << what;
              auto const b = blocks(core::Layout(d.grid, d.pml, order), full, d.y0, d.x0);
              got.insert(got.end(), b.begin(), b.end());
            }
            auto want = ref;
            std::sort(want.begin(), want.end());
            std::sort(got.begin(), got.end());
            EXPECT_TRUE(got == want) << what << ", domains " << core::describe(split, dim);
            ++compared;
          }
        }
  std::printf("saved cells: the same codec blocks on %d splits\n", compared);
  EXPECT_GE(compared, 60);
}

}  // namespace

namespace {

// Every allocation of a gradient computation, measured through the Kokkos Tools allocation
// callbacks, against the sizes the memory estimate computes (core/sizes.hpp): the peak of the
// live bytes of each label, for every strategy, dtype, location and dimension, with both
// schedules of the host backends.
struct Allocations {
  static std::map<std::string, std::pair<std::int64_t, std::int64_t>>& log() {  // label -> {live, peak}
    static std::map<std::string, std::pair<std::int64_t, std::int64_t>> m;
    return m;
  }
  static void on_allocate(Kokkos::Profiling::SpaceHandle const, char const* label, void const*, std::uint64_t size) {
    auto& e = log()[label];
    e.first += static_cast<std::int64_t>(size);
    e.second = std::max(e.second, e.first);
  }
  static void on_deallocate(Kokkos::Profiling::SpaceHandle const, char const* label, void const*, std::uint64_t size) {
    log()[label].first -= static_cast<std::int64_t>(size);
  }
  Allocations() {
    log().clear();
    Kokkos::Tools::Experimental::set_allocate_data_callback(on_allocate);
    Kokkos::Tools::Experimental::set_deallocate_data_callback(on_deallocate);
  }
  ~Allocations() {
    Kokkos::Tools::Experimental::set_allocate_data_callback(nullptr);
    Kokkos::Tools::Experimental::set_deallocate_data_callback(nullptr);
  }
  /// The sum of the peaks of the labels that begin with `prefix`.
  static std::size_t peak(std::string const& prefix) {
    std::int64_t b = 0;
    for (auto const& [label, e] : log())
      if (label.rfind(prefix, 0) == 0) b += e.second;
    return static_cast<std::size_t>(b);
  }
};

template <int Dim>
void allocations_match_sizes(core::Schedule schedule) {
  using Real = float;
  using P = core::Propagator<Real, 4, TEST_EXECSPACE, Dim>;
  using E = core::GradientEngine<Real, 4, TEST_EXECSPACE, Dim>;
  int const nz = 14, nx = 18, ny = Dim == 3 ? 9 : 0, S = 3, nt = 24, nr = 5;
  auto const grid = Dim == 3 ? core::ModelGrid::volume(nz, ny, nx, 10.0) : core::ModelGrid(nz, nx, 10.0);
  core::PmlConfig pml;
  pml.width = 5;
  core::Survey survey;
  survey.n_shots = S;
  survey.n_sources = 1;
  survey.n_receivers = nr;
  for (int s = 0; s < S; ++s) {
    survey.sources.push_back({1, 2 + 5 * s, Dim == 3 ? 4 : 0});
    for (int r = 0; r < nr; ++r) survey.receivers.push_back({2, 1 + 3 * r, Dim == 3 ? 1 + r : 0});
  }
  std::vector<float> v(static_cast<std::size_t>(grid.cells()), 2000.f);
  for (auto strategy : {storage::Strategy::full, storage::Strategy::boundary})
    for (auto dtype : {storage::Dtype::fp32, storage::Dtype::fp16, storage::Dtype::bf16, storage::Dtype::int8})
      for (auto location : {storage::Location::device, storage::Location::host}) {
        storage::StorageConfig cfg;
        cfg.strategy = strategy;
        cfg.dtype = dtype;
        cfg.location = location;
        cfg.transfer_interval = 5;
        std::string const what = std::to_string(Dim) + "D " + storage::to_string(strategy) + " " +
                                 storage::to_string(dtype) + " " + storage::to_string(location) + " " +
                                 core::to_string(schedule);
        Allocations measured;
        {
          P prop(TEST_EXECSPACE(), grid, pml, 1e-3, S);
          prop.set_schedule(schedule);
          prop.set_survey(survey);
          prop.set_velocity(v.data());
          E engine(prop, cfg);
          typename E::images_type img(TEST_EXECSPACE(), prop.layout().model_rows(), nx);
          typename P::wavelet_view w("w", S, 1, nt);
          Kokkos::deep_copy(w, Real(1));
          typename P::record_view obs("obs", S, nt, nr), syn("syn", S, nt, nr);
          engine.loss_and_gradient(w, obs, 1.0, img, syn);
          auto const& l = prop.layout();
          std::size_t const R = sizeof(Real);
          EXPECT_EQ(Allocations::peak("ksweep::core::fwd::"), core::state_values(l, S) * R) << what;
          EXPECT_EQ(Allocations::peak("ksweep::core::adj::"), core::state_values(l, S) * R) << what;
          EXPECT_EQ(Allocations::peak("ksweep::core::c") + Allocations::peak("ksweep::core::vp") -
                        Allocations::peak("ksweep::core::vp_upload"),
                    core::coefficient_values(l) * R)
              << what;
          long long const stride = core::ring_stride(l, strategy == storage::Strategy::full, dtype);
          EXPECT_EQ(static_cast<long long>(engine.ring_cells()),
                    core::ring_cells(l, strategy == storage::Strategy::full))
              << what;
          auto const store = core::store_bytes(cfg, storage::encoded_bytes(dtype, S * stride, R), nt);
          EXPECT_EQ(Allocations::peak(location == storage::Location::device ? "ksweep::storage::device"
                                                                            : "ksweep::storage::host"),
                    store.stored)
              << what;
          EXPECT_EQ(Allocations::peak("ksweep::storage::stage"), store.staging) << what;
          EXPECT_EQ(Allocations::peak("ksweep::core::grad") + Allocations::peak("ksweep::core::isrc") +
                        Allocations::peak("ksweep::core::irec") + Allocations::peak("ksweep::core::illum_"),
                    core::image_bytes(l, S))
              << what;
          // The layer terms of the model cells within M = 2 of the layer, every step.
          EXPECT_EQ(Allocations::peak("ksweep::core::layer_terms"),
                    static_cast<std::size_t>(core::layer_term_cells(l, 2)) * S * nt * R)
              << what;
          EXPECT_GT(core::layer_term_cells(l, 2), 0) << what;
          std::size_t const stage = Allocations::peak("ksweep::core::ring_stage");
          if (prop.runs_shots())
            EXPECT_EQ(stage, static_cast<std::size_t>(S * stride) * R * core::chunk_steps(S, stride, R)) << what;
          else EXPECT_EQ(stage, 0u) << what;
        }
      }
}

KSWEEP_TEST(gradient_allocations_match_sizes_2d) {
  allocations_match_sizes<2>(core::Schedule::batched);
  if constexpr (core::impl::runs_by_rows<TEST_EXECSPACE>) allocations_match_sizes<2>(core::Schedule::shots);
}
KSWEEP_TEST(gradient_allocations_match_sizes_3d) {
  allocations_match_sizes<3>(core::Schedule::batched);
  if constexpr (core::impl::runs_by_rows<TEST_EXECSPACE>) allocations_match_sizes<3>(core::Schedule::shots);
}

}  // namespace
