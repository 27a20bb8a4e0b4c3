#pragma once
// Sources and receivers at any position (core::Point, Kaiser-windowed sinc taps) and shots with
// fewer receivers than the batch's slots (silent receivers): positions on cells give the cells'
// bits; injection and sampling stay exact transposes (dot products, 2D and 3D, with a free
// surface and taps in the absorbing layer); the gradient by boundary saving equals full storage
// and finite differences; schedules agree bit for bit; bad positions are refused by name.

#include <harness.hpp>
#include <physics_utils.hpp>
#include <test_utils.hpp>

#include <ksweep/core/gradient.hpp>
#include <ksweep/core/wavelet.hpp>

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <numeric>
#include <string>
#include <vector>

namespace {

using namespace ksweep;

// The 1D weights: a node position gives that node alone; half a cell gives a symmetric window
// whose weights sum to about 1, with the two nearest nodes largest.
KSWEEP_TEST(points_sinc_weights) {
  int const r = core::interpolation_radius;
  auto const on = core::sinc_weights(7.0);
  for (int k = 0; k < 2 * r; ++k) EXPECT_EQ(on[k], k == r - 1 ? 1.0 : 0.0) << k;
  auto const half = core::sinc_weights(7.5);
  for (int k = 0; k < r; ++k) EXPECT_NEAR(half[k], half[2 * r - 1 - k], 1e-15) << k;
  EXPECT_NEAR(std::accumulate(half.begin(), half.end(), 0.0), 1.0, 2e-2);
  EXPECT_GT(half[r - 1], 0.6);
  EXPECT_LT(half[r - 1], 0.64);                    // sinc(1/2) = 2 / pi, times a window near 1
  auto const quarter = core::sinc_weights(-2.25);  // floor -3: nodes -6 ... 1; -2 (k = r) nearest
  EXPECT_GT(quarter[r], 0.85);
  EXPECT_GT(quarter[r - 1], 0.2);
  EXPECT_NEAR(std::accumulate(quarter.begin(), quarter.end(), 0.0), 1.0, 2e-2);
}

// A survey whose positions are given as points: on cells (bit for bit the cells' results) or
// moved off them by `shift` cells.
core::Survey as_points(core::Survey s, double shift_z, double shift_x) {
  for (auto const& c : s.sources) s.source_points.push_back({c.z + shift_z, c.x + shift_x, double(c.y)});
  for (auto const& c : s.receivers) s.receiver_points.push_back({c.z + shift_z, c.x + shift_x, double(c.y)});
  return s;
}

// With `extra` silent receiver slots per shot.
core::Survey with_silent(core::Survey const& s, int extra) {
  core::Survey out = s;
  out.n_receivers = s.n_receivers + extra;
  out.receivers.clear();
  out.receiver_points.clear();
  for (int sh = 0; sh < s.n_shots; ++sh) {
    for (int i = 0; i < s.n_receivers; ++i) {
      std::size_t const k = std::size_t(sh) * s.n_receivers + i;
      if (!s.receivers.empty()) out.receivers.push_back(s.receivers[k]);
      if (!s.receiver_points.empty()) out.receiver_points.push_back(s.receiver_points[k]);
    }
    for (int i = 0; i < extra; ++i) {
      if (!s.receivers.empty()) out.receivers.push_back({-5, -5});  // never read: silent
      if (!s.receiver_points.empty()) out.receiver_points.push_back({-5.5, 1e9});
    }
    out.receiver_count.push_back(s.n_receivers);
  }
  return out;
}

template <class Real, int Order>
struct PointRun {
  using P = core::Propagator<Real, Order, TEST_EXECSPACE>;
  P prop;
  int nt;
  PointRun(core::PmlConfig const& pml, int nz, int nx, int shots, int nt_)
      : prop(TEST_EXECSPACE(), core::ModelGrid{nz, nx, 10.0}, pml, 1e-3, shots), nt(nt_) {
    auto const vp = test::smooth_model(nz, nx);
    prop.set_velocity(vp.data());
  }
  // Records of random wavelets (seed 3), and the adjoint of random residuals (seed 4) on the
  // first `live` receivers of each shot (zeros after them).
  std::pair<std::vector<double>, std::vector<double>> run(core::Survey const& s, int live) {
    prop.set_survey(s);
    typename P::wavelet_view w("w", s.n_shots, s.n_sources, nt), g("g", s.n_shots, s.n_sources, nt);
    test::fill_random(w, 3);
    typename P::record_view r("r", s.n_shots, nt, s.n_receivers), res("res", s.n_shots, nt, s.n_receivers);
    prop.forward(w, r);
    auto rh = test::to_host(r);
    std::vector<double> rec;
    for (int sh = 0; sh < s.n_shots; ++sh)
      for (int t = 0; t < nt; ++t)
        for (int i = 0; i < s.n_receivers; ++i) {
          if (i < live) rec.push_back(rh(sh, t, i));
          else EXPECT_EQ(rh(sh, t, i), Real(0)) << "silent receiver " << i << " of shot " << sh << " recorded";
        }
    auto hh = Kokkos::create_mirror_view(Kokkos::HostSpace(), res);
    Kokkos::deep_copy(hh, res);
    // The same residual values on the live receivers whatever the slot count: seed per value.
    std::mt19937 gen(4);
    std::uniform_real_distribution<double> dist(-1, 1);
    for (int sh = 0; sh < s.n_shots; ++sh)
      for (int t = 0; t < nt; ++t)
        for (int i = 0; i < s.n_receivers; ++i) hh(sh, t, i) = i < live ? Real(dist(gen)) : Real(7);
    Kokkos::deep_copy(res, hh);
    prop.adjoint(res, g);
    return {rec, test::host_values(g)};
  }
};

// Points on cells are the cells, bit for bit (one tap of weight 1); silent receiver slots record
// zeros and inject nothing, whatever their residual, and leave the live receivers' bits alone.
template <int Order>
void on_cells_bitwise(bool free_surface) {
  core::PmlConfig pml;
  pml.width = 6;
  pml.free_surface = free_surface;
  int const nz = 40, nx = 56, n_rec = 20;
  PointRun<float, Order> run(pml, nz, nx, 3, 160);
  auto const cells = test::line_survey(3, nz, nx, free_surface ? 1 : 2, 3, n_rec);
  auto const a = run.run(cells, n_rec);
  for (auto const& s : {as_points(cells, 0, 0), with_silent(cells, 3), with_silent(as_points(cells, 0, 0), 5)}) {
    auto const b = run.run(s, n_rec);
    EXPECT_EQ(test::differing(a.first, b.first), 0) << "records, order " << Order << ", free surface " << free_surface;
    EXPECT_EQ(test::differing(a.second, b.second), 0)
        << "adjoint, order " << Order << ", free surface " << free_surface;
  }
}

KSWEEP_TEST(points_on_cells_and_silent_receivers_bitwise) {
  on_cells_bitwise<8>(false);
  on_cells_bitwise<8>(true);
}

// Off-grid sources and receivers everywhere: at the model's edges and corners (taps in the
// absorbing layer), half a cell under a free surface (mirrored taps), between cells, with
// silent slots. 2D.
core::Survey off_grid_survey_2d(int nz, int nx, bool free_surface) {
  core::Survey s;
  s.n_shots = 2;
  s.n_sources = 2;
  s.n_receivers = 9;
  double const z0 = free_surface ? 0.5 : 0.0;
  s.source_points = {{z0 + 0.3, 0.7}, {nz / 2 + 0.5, nx / 3 + 0.25}, {nz - 1.2, nx - 1.9}, {3.0, 5.5}};
  for (int sh = 0; sh < 2; ++sh)
    for (int r = 0; r < 9; ++r)
      s.receiver_points.push_back(
          {z0 + std::fmod(r * 5.37 + sh, nz - 1 - z0), std::fmod(r * 7.13 + 3 * sh + 0.4, nx - 1.0)});
  s.receiver_points[0] = {z0, 0.0};             // a corner (or half a cell under the surface)
  s.receiver_points[9] = {nz - 1.0, nx - 1.5};  // the far edge
  s.receiver_count = {9, 6};
  return s;
}

template <class Real, int Order>
double off_grid_dot_2d(bool free_surface, int width) {
  int const nz = 24, nx = 30;
  core::PmlConfig pml;
  pml.width = width;
  pml.free_surface = free_surface;
  return test::dot_product_error<Real, Order, 2>(core::ModelGrid{nz, nx, 10.0}, pml, test::smooth_model(nz, nx),
                                                 off_grid_survey_2d(nz, nx, free_surface), 60);
}

template <class Real, int Order>
double off_grid_dot_3d(bool free_surface) {
  int const nz = 14, ny = 12, nx = 16;
  core::PmlConfig pml;
  pml.width = 5;
  pml.free_surface = free_surface;
  core::Survey s;
  s.n_shots = 2;
  s.n_sources = 1;
  s.n_receivers = 5;
  double const z0 = free_surface ? 0.5 : 0.2;
  s.source_points = {{z0, 2.5, 3.25}, {nz - 1.5, ny - 1.0, 0.5}};
  // Point{z, x, y}: x in [0, 15], y in [0, 11].
  s.receiver_points = {{z0, 0.0, 0.0},     {3.5, 4.5, 5.5}, {7.0, 6.25, 8.0}, {1.75, 14.5, 10.5}, {12.0, 15.0, 11.0},
                       {z0 + 1, 1.5, 2.5}, {5.5, 5.5, 5.5}, {9.0, 2.0, 4.0},  {0, 0, 0},          {0, 0, 0}};
  s.receiver_count = {5, 3};
  std::vector<float> vp(static_cast<std::size_t>(nz) * ny * nx);
  for (std::size_t i = 0; i < vp.size(); ++i) vp[i] = static_cast<float>(2000.0 + 300.0 * std::sin(0.37 * i));
  return test::dot_product_error<Real, Order, 3>(core::ModelGrid::volume(nz, ny, nx, 10.0), pml, vp, s, 40);
}

// The interpolation does not depend on the stencil: fp64 at order 4 (2D and 3D) and fp32 at order
// 8 (2D), the orders the other tests of this file instantiate.
KSWEEP_TEST(points_off_grid_adjoint_dot_product) {
  for (bool fs : {false, true})
    for (int w : {4, 9}) {
      double const e4 = off_grid_dot_2d<double, 4>(fs, w), f8 = off_grid_dot_2d<float, 8>(fs, w);
      std::printf("off-grid dot product 2D (free surface %d, layer %d): fp64 o4 %.2e, fp32 o8 %.2e\n", fs, w, e4, f8);
      EXPECT_LE(e4, 1e-12) << "free surface " << fs << ", layer " << w;
      EXPECT_LE(f8, 1e-5) << "free surface " << fs << ", layer " << w;
    }
  for (bool fs : {false, true}) {
    double const e = off_grid_dot_3d<double, 4>(fs);
    std::printf("off-grid dot product 3D (free surface %d): fp64 o4 %.2e\n", fs, e);
    EXPECT_LE(e, 1e-12) << "3D, free surface " << fs;
  }
}

// The gradient with off-grid points, sources near the edges (taps in the layer and on the ring
// that boundary saving restores): boundary saving equals full storage, and finite differences.
template <class Real, int Order>
struct OffGridGradient : test::GradientProblem<Real, Order, 2> {
  static constexpr int nz = 26, nx = 34;
  static core::Survey survey(bool fs) {
    core::Survey s;
    s.n_shots = 2;
    s.n_sources = 1;
    s.n_receivers = 12;
    double const z0 = fs ? 0.5 : 0.3;
    s.source_points = {{z0 + 1.2, 0.6}, {z0 + 0.1, nx - 1.4}};
    for (int sh = 0; sh < 2; ++sh)
      for (int r = 0; r < 12; ++r) s.receiver_points.push_back({z0 + 0.5 * sh, 0.25 + r * 2.7});
    s.receiver_count = {12, 10};
    return s;
  }
  static core::PmlConfig pml(bool fs) {
    core::PmlConfig p;
    p.width = 8;
    p.free_surface = fs;
    return p;
  }
  explicit OffGridGradient(bool fs, int steps = 220)
      : test::GradientProblem<Real, Order, 2>(core::ModelGrid{nz, nx, 10.0}, pml(fs), 1e-3, survey(fs),
                                              test::smooth_model(nz, nx), test::smooth_model(nz, nx, 1900.0, 560.0),
                                              steps, 15.0) {}
};

KSWEEP_TEST(points_off_grid_gradient) {
  for (bool fs : {false, true}) {
    OffGridGradient<double, 4> p(fs);
    double loss = 0;
    auto const full = p.gradient(test::storage_cfg("full"), &loss);
    auto const boundary = p.gradient(test::storage_cfg("boundary"));
    double const e = test::rel_l2(boundary, full);
    std::mt19937 gen(11);
    test::Direction const dir(gen, full.size());
    double const gd = dir.dot(boundary);
    double const fd = dir.central([&](std::vector<float> const& v) { return p.loss_at(v); }, p.v0, 0.125);
    double const efd = std::abs(fd - gd) / std::abs(gd);
    std::printf("off-grid gradient (free surface %d): boundary vs full %.2e, finite differences %.2e (loss %.6e)\n", fs,
                e, efd, loss);
    EXPECT_GT(loss, 0);
    EXPECT_LE(e, 1e-10) << "free surface " << fs;
    EXPECT_LE(efd, 1e-6) << "free surface " << fs;
  }
}

// Schedules (host backends): batched, shots and cells give the same bits with off-grid points.
KSWEEP_TEST(points_off_grid_schedules_bitwise) {
  if constexpr (!core::impl::runs_by_rows<TEST_EXECSPACE>) {
    GTEST_SKIP() << "devices run the cells schedule only";
  } else {
    for (bool fs : {false, true}) {
      OffGridGradient<float, 8> p(fs, 150);
      auto run = [&](core::Schedule sch) {
        p.prop.set_schedule(sch);
        typename decltype(p)::P::record_view r("r", 2, p.nt, 12);
        p.prop.forward(p.w, r);
        typename decltype(p)::P::wavelet_view g("g", 2, 1, p.nt);
        p.prop.adjoint(p.observed, g);
        std::vector<double> out = test::host_values(r), gh = test::host_values(g);
        out.insert(out.end(), gh.begin(), gh.end());
        for (char const* strategy : {"boundary", "full"}) {
          auto const grad = p.gradient(test::storage_cfg(strategy));
          out.insert(out.end(), grad.begin(), grad.end());
        }
        return out;
      };
      auto const b = run(core::Schedule::batched);
      for (auto const other : {core::Schedule::shots, core::Schedule::cells})
        EXPECT_EQ(test::differing(b, run(other)), 0) << core::to_string(other) << ", free surface " << fs;
      p.prop.set_schedule(core::Schedule::automatic);
    }
  }
}

void expect_refused(std::function<void()> const& f, std::vector<std::string> const& parts) {
  try {
    f();
    ADD_FAILURE() << "no error; expected one naming " << parts.front();
  } catch (std::exception const& e) {
    for (auto const& p : parts) EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << e.what();
  }
}

// The checks set_survey runs (core::check_survey), called directly.
KSWEEP_TEST(points_refused_by_name) {
  core::ModelGrid const grid{20, 30, 10.0};
  core::PmlConfig pml;
  pml.width = 4;
  auto check = [&](core::Survey const& s) { core::check_survey(s, grid, pml); };
  core::Survey s = test::one_shot({{5, 5}}, {{5, 6}, {5, 7}});
  s.source_points = {{5.0, -0.25}};
  expect_refused([&] { check(s); }, {"source 0 of shot 0", "-0.25", "-2.5) m", "outside the model grid"});
  s.source_points = {{5.5, 5.5}};
  s.receiver_points = {{5.0, 6.0}, {19.5, 7.0}};
  expect_refused([&] { check(s); }, {"receiver 1 of shot 0", "19.5", "outside the model grid", "[0, 19]"});
  s.receiver_points = {{5.0, 6.0}, {std::nan(""), 7.0}};
  expect_refused([&] { check(s); }, {"receiver 1 of shot 0", "nan"});
  s.receiver_points = {{5.0, 6.0}, {5.0, 7.0}};
  s.receiver_count = {3};
  expect_refused([&] { check(s); }, {"shot 0 has 3 receivers in use", "[0, 2]"});
  s.receiver_count = {1};
  s.receiver_points = {{5.0, 6.0}, {-100.0, 7.0}};  // silent: not read
  check(s);
  // A layer narrower than the interpolation's reach (order 2 allows 1 cell): refused for a point
  // near the edge only.
  pml.width = 2;
  s.receiver_count.clear();
  s.receiver_points = {{5.0, 6.0}, {5.0, 7.0}};
  check(s);
  s.receiver_points = {{5.0, 6.0}, {5.0, 28.5}};
  expect_refused([&] { check(s); },
                 {"receiver 1 of shot 0", "28.5", "interpolation reaches 4 cells", "propagator.pml_width"});
  pml.free_surface = true;
  s.receiver_points = {{0.0, 6.5}, {5.0, 7.0}};
  expect_refused([&] { check(s); }, {"receiver 0 of shot 0", "free surface"});
  s.receiver_points = {{0.25, 6.5}, {5.0, 7.0}};
  check(s);  // a quarter cell below the surface: mirrored taps
  // And through the propagator: set_survey runs these checks.
  core::PmlConfig wide;
  wide.width = 6;
  core::Propagator<float, 8, TEST_EXECSPACE> p(TEST_EXECSPACE(), grid, wide, 1e-3, 1);
  s.receiver_points = {{5.0, 6.0}, {5.0, 30.5}};
  expect_refused([&] { p.set_survey(s); }, {"receiver 1 of shot 0", "30.5", "outside the model grid"});
}

}  // namespace
