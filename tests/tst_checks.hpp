#pragma once
// Input checks: every bad input throws ksweep::Error whose message names the offending value
// and the limit; the sampling warning fires only for an under-sampled wavelet.

#include <test_utils.hpp>

#include <ksweep/base/error.hpp>
#include <ksweep/core/geometry.hpp>
#include <ksweep/core/propagator.hpp>
#include <ksweep/core/stencil.hpp>
#include <ksweep/core/wavelet.hpp>

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

namespace {

using namespace ksweep;

/// `f` throws ksweep::Error, and its message contains every one of `parts`.
void expect_error(std::function<void()> const& f, std::vector<std::string> const& parts) {
  EXPECT_THROW(f(), ksweep::Error);
  try {
    f();
  } catch (ksweep::Error const& e) {
    std::string const msg = e.what();
    for (auto const& p : parts)
      EXPECT_NE(msg.find(p), std::string::npos) << "message \"" << msg << "\" lacks \"" << p << "\"";
  } catch (...) {
  }
}

/// The value as the checks print it (default ostream formatting).
template <class T>
std::string str(T v) {
  std::ostringstream os;
  os << v;
  return os.str();
}

template <int Order>
using Prop = core::Propagator<double, Order, TEST_EXECSPACE>;

core::ModelGrid const small_grid{20, 30, 10.0};

std::vector<float> uniform(core::ModelGrid const& g, float v = 2000.0f) {
  return std::vector<float>(static_cast<std::size_t>(g.nz) * g.nx, v);
}

KSWEEP_TEST(checks_cfl) {
  core::PmlConfig pml;
  double const limit = core::courant_limit(8, 2);
  double const dt = 1.1 * limit * small_grid.dh / 2000.0;
  Prop<8> p(TEST_EXECSPACE(), small_grid, pml, dt, 1);
  auto vp = uniform(small_grid);
  expect_error([&] { p.set_velocity(vp.data()); },
               {"CFL limit " + str(limit), str(2000.0 * dt / small_grid.dh), "order 8"});
  expect_error([&] { core::check_cfl(2000.0, dt, small_grid.dh, 8); }, {"CFL limit " + str(limit)});
  // Just below the limit is accepted.
  Prop<8> ok(TEST_EXECSPACE(), small_grid, pml, 0.99 * limit * small_grid.dh / 2000.0, 1);
  EXPECT_NO_THROW(ok.set_velocity(vp.data()));
  // With update_layer = false the CFL check covers the new maximum too.
  auto fast = uniform(small_grid, 2500.0f);
  expect_error([&] { ok.set_velocity(fast.data(), false); }, {"CFL limit " + str(limit), "2500"});
}

// Cells of their own size per axis: the leapfrog's bound v^2 dt^2 S (1/dz^2 + 1/dx^2) <= 4 (S the
// order's Nyquist symbol, pinned below), written from the bound, not from the code's h; and a
// spacing that is not > 0 named with its axis.
KSWEEP_TEST(checks_cfl_spacing_per_axis) {
  core::PmlConfig pml;
  core::ModelGrid g{20, 30, 5.0};
  g.set_spacing({10.0, 0.0, 5.0});
  double const symbol = 2048.0 / 315.0, dt_max = 2.0 / (2000.0 * std::sqrt(symbol * (1 / 100.0 + 1 / 25.0)));
  auto vp = uniform(g);
  Prop<8> ok(TEST_EXECSPACE(), g, pml, 0.999 * dt_max, 1);
  EXPECT_NO_THROW(ok.set_velocity(vp.data()));
  Prop<8> fast(TEST_EXECSPACE(), g, pml, 1.001 * dt_max, 1);
  expect_error([&] { fast.set_velocity(vp.data()); }, {"CFL limit", "dz = 10 m, dx = 5 m", "order 8"});
  EXPECT_NEAR(core::cfl_spacing(g), 1.0 / std::sqrt((1 / 100.0 + 1 / 25.0) / 2), 1e-12);
  core::ModelGrid bad = g;
  bad.spacing[0] = -1.0;
  expect_error([&] { core::check_grid(bad, pml, 8); }, {"grid spacing dz = -1 m", "must be > 0"});
}

// The von Neumann limit of leapfrog with the centred second-difference stencil of each order:
// c dt / dh <= 2 / sqrt(ndim s), s = -(a_0 + 2 sum_k a_k (-1)^k) the stencil's symbol at the
// Nyquist wavenumber, pinned from the exact coefficients (not from the code's own tables):
// s = 4, 16/3, 272/45 and 2048/315 for orders 2, 4, 6 and 8.
KSWEEP_TEST(checks_courant_limit_values) {
  struct Pin {
    int order;
    double symbol;
  };
  for (Pin const p : {Pin{2, 4.0}, Pin{4, 16.0 / 3.0}, Pin{6, 272.0 / 45.0}, Pin{8, 2048.0 / 315.0}})
    for (int ndim : {1, 2, 3}) {
      double const expected = 2.0 / std::sqrt(ndim * p.symbol);
      EXPECT_NEAR(core::courant_limit(p.order, ndim), expected, 1e-12 * expected)
          << "order " << p.order << ", " << ndim << "D";
    }
  // The values themselves, rounded: what the documentation and error messages quote.
  EXPECT_NEAR(core::courant_limit(2, 2), 0.70711, 1e-5);
  EXPECT_NEAR(core::courant_limit(4, 2), 0.61237, 1e-5);
  EXPECT_NEAR(core::courant_limit(8, 2), 0.55464, 1e-5);
  EXPECT_NEAR(core::courant_limit(4, 3), 0.5, 1e-12);
  EXPECT_NEAR(core::courant_limit(8, 3), 0.45286, 1e-5);
}

KSWEEP_TEST(checks_order) {
  core::PmlConfig pml;
  expect_error([&] { core::check_grid(small_grid, pml, 3); }, {"order = 3", "2, 4, 6, 8"});
  expect_error([&] { core::dispatch_order(3, [](auto) { return 0; }); }, {"order = 3", "2, 4, 6, 8"});
  expect_error([&] { core::courant_limit(3, 2); }, {"order = 3"});
}

KSWEEP_TEST(checks_grid_too_small) {
  core::PmlConfig pml;
  expect_error(
      [&] {
        Prop<8>(TEST_EXECSPACE(), core::ModelGrid{4, 30, 10.0}, pml, 1e-3, 1);
      },
      {"4 x 30", "order 8", "at least 9"});
  expect_error(
      [&] {
        Prop<8>(TEST_EXECSPACE(), core::ModelGrid{30, 8, 10.0}, pml, 1e-3, 1);
      },
      {"30 x 8", "at least 9"});
  core::PmlConfig fs;
  fs.free_surface = true;
  expect_error(
      [&] {
        Prop<8>(TEST_EXECSPACE(), core::ModelGrid{9, 30, 10.0}, fs, 1e-3, 1);
      },
      {"nz = 9", "free surface", ">= 10"});
  expect_error([&] { Prop<4>(TEST_EXECSPACE(), core::ModelGrid{20, 30, 0.0}, pml, 1e-3, 1); }, {"dh = 0", "> 0"});
}

KSWEEP_TEST(checks_pml_width) {
  core::PmlConfig pml;
  pml.width = 3;
  expect_error([&] { Prop<8>(TEST_EXECSPACE(), small_grid, pml, 1e-3, 1); }, {"pml_width = 3", "order 8", ">= 4"});
  EXPECT_NO_THROW(Prop<6>(TEST_EXECSPACE(), small_grid, pml, 1e-3, 1));  // radius 3
  pml.width = 20;
  pml.reflection = 1.5;
  expect_error([&] { Prop<4>(TEST_EXECSPACE(), small_grid, pml, 1e-3, 1); }, {"pml_reflection = 1.5", "(0, 1)"});
}

KSWEEP_TEST(checks_survey_positions) {
  core::PmlConfig pml;
  Prop<4> p(TEST_EXECSPACE(), small_grid, pml, 1e-3, 2);
  // Source at x = nx.
  auto s = test::line_survey(1, small_grid.nz, small_grid.nx, 5, 5, 3);
  s.sources[0] = {5, small_grid.nx};
  expect_error([&] { p.set_survey(s); }, {"source 0", "(5, 30)", "x in [0, 29]"});
  s.sources[0] = {-1, 3};
  expect_error([&] { p.set_survey(s); }, {"source 0", "(-1, 3)", "z must be in [0, 19]"});
  // Receiver at z = 0 with a free surface.
  core::PmlConfig fs;
  fs.free_surface = true;
  Prop<4> pf(TEST_EXECSPACE(), small_grid, fs, 1e-3, 1);
  auto r = test::line_survey(1, small_grid.nz, small_grid.nx, 5, 0, 3);
  expect_error([&] { pf.set_survey(r); }, {"receiver 0", "(0, 0)", "z must be in (0, 19]", "free surface"});
  r = test::line_survey(1, small_grid.nz, small_grid.nx, 5, 1, 3);
  EXPECT_NO_THROW(pf.set_survey(r));
  // z = 0 is fine without the free surface.
  EXPECT_NO_THROW(p.set_survey(test::line_survey(1, small_grid.nz, small_grid.nx, 0, 0, 3)));
  // Inconsistent counts.
  auto bad = test::line_survey(1, small_grid.nz, small_grid.nx, 5, 5, 3);
  bad.n_receivers = 4;
  expect_error([&] { p.set_survey(bad); }, {"lists 3 receivers", "= 4"});
}

KSWEEP_TEST(checks_velocity) {
  core::PmlConfig pml;
  Prop<4> p(TEST_EXECSPACE(), small_grid, pml, 1e-3, 1);
  auto vp = uniform(small_grid);
  vp[7] = -1500.0f;
  expect_error([&] { p.set_velocity(vp.data()); }, {"cell 7", "-1500", "> 0"});
  vp[7] = 0.0f;
  expect_error([&] { p.set_velocity(vp.data()); }, {"cell 7 is 0", "> 0"});
  vp[7] = 2000.0f;
  vp[42] = std::numeric_limits<float>::quiet_NaN();
  expect_error([&] { p.set_velocity(vp.data()); }, {"cell 42", "nan", "finite"});
  vp[42] = std::numeric_limits<float>::infinity();
  expect_error([&] { p.set_velocity(vp.data()); }, {"cell 42", "inf", "finite"});
}

KSWEEP_TEST(checks_time) {
  core::PmlConfig pml;
  expect_error([] { core::check_time(1e-3, 0); }, {"time.nt = 0", "> 0"});
  expect_error([] { core::check_time(0.0, 100); }, {"time.dt = 0", "> 0"});
  expect_error([] { core::check_time(-1e-3, 100); }, {"time.dt = -0.001", "> 0"});
  expect_error([] { core::ricker(10.0, 0.1, 1e-3, 0); }, {"time.nt = 0", "> 0"});
  expect_error([&] { Prop<4>(TEST_EXECSPACE(), small_grid, pml, 0.0, 1); }, {"time.dt = 0", "> 0"});
  expect_error([&] { Prop<4>(TEST_EXECSPACE(), small_grid, pml, -2e-3, 1); }, {"time.dt = -0.002", "> 0"});
  expect_error([&] { Prop<4>(TEST_EXECSPACE(), small_grid, pml, std::nan(""), 1); }, {"time.dt = nan"});
  // nt = 0 in forward().
  Prop<4> p(TEST_EXECSPACE(), small_grid, pml, 1e-3, 1);
  auto vp = uniform(small_grid);
  p.set_velocity(vp.data());
  p.set_survey(test::line_survey(1, small_grid.nz, small_grid.nx, 5, 5, 3));
  Prop<4>::wavelet_view w("w", 1, 1, 0);
  Prop<4>::record_view r("r", 1, 0, 3);
  expect_error([&] { p.forward(w, r); }, {"time.nt = 0", "> 0"});
}

KSWEEP_TEST(checks_batch_capacity) {
  core::PmlConfig pml;
  expect_error([&] { Prop<4>(TEST_EXECSPACE(), small_grid, pml, 1e-3, 0); }, {"max_shots = 0", ">= 1"});
  Prop<4> p(TEST_EXECSPACE(), small_grid, pml, 1e-3, 2);
  expect_error([&] { p.set_survey(test::line_survey(3, small_grid.nz, small_grid.nx, 5, 5, 3)); },
               {"batch of 3 shots", "capacity of 2 shots"});
  EXPECT_NO_THROW(p.set_survey(test::line_survey(2, small_grid.nz, small_grid.nx, 5, 5, 3)));
}

KSWEEP_TEST(checks_forward_shapes) {
  core::PmlConfig pml;
  Prop<4> p(TEST_EXECSPACE(), small_grid, pml, 1e-3, 2);
  auto vp = uniform(small_grid);
  p.set_velocity(vp.data());
  // No survey yet.
  {
    Prop<4>::wavelet_view w("w", 1, 1, 50);
    Prop<4>::record_view r("r", 1, 50, 3);
    expect_error([&] { p.forward(w, r); }, {"no survey"});
  }
  p.set_survey(test::line_survey(1, small_grid.nz, small_grid.nx, 5, 5, 3));
  Prop<4>::wavelet_view w("w", 1, 1, 50), w_shots("w", 2, 1, 50), w_src("w", 1, 2, 50);
  Prop<4>::record_view r("r", 1, 50, 3), r_nt("r", 1, 40, 3), r_rec("r", 1, 50, 4), r_shots("r", 2, 50, 3);
  EXPECT_NO_THROW(p.forward(w, r));
  expect_error([&] { p.forward(w, r_nt); }, {"records are [1][40][3]", "expected [1][50][3]"});
  expect_error([&] { p.forward(w, r_rec); }, {"records are [1][50][4]", "expected [1][50][3]"});
  expect_error([&] { p.forward(w_shots, r_shots); }, {"wavelets are [2][1]", "expected [1][1]"});
  expect_error([&] { p.forward(w_src, r); }, {"wavelets are [1][2]", "expected [1][1]"});
  // The adjoint checks the same shapes.
  Prop<4>::wavelet_view g("g", 1, 1, 50);
  expect_error([&] { p.adjoint(r_nt, g); }, {"records are [1][40][3]", "expected [1][50][3]"});
}

KSWEEP_TEST(checks_sampling_warning) {
  // vmin 2000 m/s, 25 Hz: lambda_min = 32 m; dh = 20 m gives 1.6 cells (< 5).
  auto const warn = core::sampling_warning(2000.0, 25.0, 20.0);
  EXPECT_FALSE(warn.empty());
  EXPECT_NE(warn.find("1.6"), std::string::npos) << warn;
  EXPECT_NE(warn.find("at least 5"), std::string::npos) << warn;
  // 10 Hz, dh = 10 m: 8 cells per shortest wavelength.
  EXPECT_TRUE(core::sampling_warning(2000.0, 10.0, 10.0).empty());
  // Exactly at the threshold is not a warning; a stricter threshold is.
  EXPECT_TRUE(core::sampling_warning(2000.0, 10.0, 16.0).empty());
  EXPECT_FALSE(core::sampling_warning(2000.0, 10.0, 10.0, 10.0).empty());
}

}  // namespace
