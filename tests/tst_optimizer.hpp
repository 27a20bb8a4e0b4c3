#pragma once
// The inversion's library parts: Adam (against a double reference, by hand, bit for bit against
// the same operations on the host; fixed cells, bounds, restore); L-BFGS (a quadratic with a known
// minimum, with and without bounds; the ordered dot product); the device smoothing against the
// host's; the batch draw, and the propagator's velocity set from a device view (the same c() bits
// as from the host). The inversion itself: tst_inversion.hpp.

#include <test_utils.hpp>

#include <ksweep/base/error.hpp>
#include <ksweep/core/batches.hpp>
#include <ksweep/core/wavelet.hpp>
#include <ksweep/fwi/lbfgs.hpp>
#include <ksweep/fwi/optimizer.hpp>
#include <ksweep/fwi/smoothing.hpp>
#include <ksweep/core/profiling.hpp>
#include <ksweep/core/propagator.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <set>
#include <string>
#include <type_traits>
#include <vector>

namespace {

using namespace ksweep;
using Exec = TEST_EXECSPACE;
using vec = Kokkos::View<float*, Exec::memory_space>;

vec upload(std::vector<float> const& h, char const* label = "v") {
  vec d(std::string(label), h.size());
  auto m = Kokkos::create_mirror_view(Kokkos::HostSpace(), d);
  for (std::size_t i = 0; i < h.size(); ++i) m(i) = h[i];
  Kokkos::deep_copy(d, m);
  return d;
}

std::vector<float> download(vec const& d) {
  auto h = test::to_host(d);
  return std::vector<float>(h.data(), h.data() + h.span());
}

/// Gradients of `steps` steps of `n` cells, of mixed signs and magnitudes.
std::vector<std::vector<float>> gradients(int steps, std::size_t n, unsigned seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<double> mant(-1.0, 1.0);
  std::uniform_int_distribution<int> expo(-8, 2);
  std::vector<std::vector<float>> g(steps, std::vector<float>(n));
  for (auto& s : g)
    for (auto& x : s) x = static_cast<float>(mant(gen) * std::pow(10.0, expo(gen)));
  return g;
}

bool same_bits(std::vector<float> const& a, std::vector<float> const& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

fwi::AdamParameters params(double lr = 20.0) {
  fwi::AdamParameters p;
  p.lr = lr;
  p.beta1 = 0.9;
  p.beta2 = 0.999;
  p.eps = 1e-8;
  return p;
}

// The first step by hand: m = (1 - b1) g and v = (1 - b2) g^2, so with the bias correction
// m / c1 = g and v / c2 = g^2, and the step is lr g / (|g| + eps), close to lr sign(g).
KSWEEP_TEST(adam_first_step_by_hand) {
  std::vector<float> const x0{2000.f, 2500.f, 1800.f, 3000.f};
  std::vector<float> const g{3e-3f, -2.f, 5e-6f, -7e2f};
  vec x = upload(x0, "model");
  fwi::Adam<float, Exec> adam(Exec(), x0.size(), params(20.0));
  adam.step(Exec(), upload(g, "gradient"), x);
  EXPECT_EQ(adam.steps(), 1);
  auto const x1 = download(x);
  auto const m = download(adam.first_moment()), v = download(adam.second_moment());
  for (std::size_t i = 0; i < x0.size(); ++i) {
    double const step = 20.0 * g[i] / (std::abs(g[i]) + 1e-8);
    EXPECT_NEAR(std::abs(step), 20.0, 0.05) << "cell " << i;
    EXPECT_NEAR(x1[i], x0[i] - step, 1e-3 * 20) << "cell " << i;
    EXPECT_NEAR(m[i], 0.1 * g[i], 1e-6 * std::abs(g[i])) << "cell " << i;
    EXPECT_NEAR(v[i], 0.001 * g[i] * g[i], 1e-5 * g[i] * g[i]) << "cell " << i;
  }
}

// Five steps against Adam in double on the host (bias correction of each step included).
KSWEEP_TEST(adam_matches_double_reference) {
  std::size_t const n = 64;
  int const steps = 5;
  auto const g = gradients(steps, n, 3);
  std::vector<float> x0(n);
  for (std::size_t i = 0; i < n; ++i) x0[i] = static_cast<float>(1500.0 + 10.0 * i);
  vec x = upload(x0, "model");
  auto const p = params(5.0);
  fwi::Adam<float, Exec> adam(Exec(), n, p);
  std::vector<double> xr(x0.begin(), x0.end()), mr(n, 0.0), vr(n, 0.0);
  for (int t = 1; t <= steps; ++t) {
    adam.step(Exec(), upload(g[t - 1], "gradient"), x);
    for (std::size_t i = 0; i < n; ++i) {
      double const gi = g[t - 1][i];
      mr[i] = p.beta1 * mr[i] + (1 - p.beta1) * gi;
      vr[i] = p.beta2 * vr[i] + (1 - p.beta2) * gi * gi;
      double const mhat = mr[i] / (1 - std::pow(p.beta1, t)), vhat = vr[i] / (1 - std::pow(p.beta2, t));
      xr[i] -= p.lr * mhat / (std::sqrt(vhat) + p.eps);
    }
    auto const xd = download(x), md = download(adam.first_moment()), vd = download(adam.second_moment());
    for (std::size_t i = 0; i < n; ++i) {
      ASSERT_NEAR(xd[i], xr[i], 1e-6 * xr[i]) << "step " << t << " cell " << i;
      ASSERT_NEAR(md[i], mr[i], 1e-5 * std::abs(mr[i]) + 1e-30) << "step " << t << " cell " << i;
      ASSERT_NEAR(vd[i], vr[i], 1e-5 * vr[i] + 1e-30) << "step " << t << " cell " << i;
    }
  }
  EXPECT_EQ(adam.steps(), steps);
}

// Bit for bit against the same float operations in the same order on the host: the arithmetic
// of the inversion's Adam (moments as KokkosBlas::axpby and mult form them, coefficients rounded
// from double once, bounds), which runs on every rank and must give the same bits everywhere.
KSWEEP_TEST(adam_bits_match_host_float_replay) {
  std::size_t const n = 200, fixed = 20;
  int const steps = 4;
  auto const g = gradients(steps, n, 11);
  std::vector<float> x0(n);
  for (std::size_t i = 0; i < n; ++i) x0[i] = static_cast<float>(1600.0 + 7.3 * i);
  for (std::size_t i = 0; i < 5; ++i) x0[fixed + i] = 1000.f, x0[fixed + 5 + i] = 4000.f;  // clamped at every step
  auto p = params(30.0);
  p.vmin = 1650;
  p.vmax = 2800;
  vec x = upload(x0, "model");
  fwi::Adam<float, Exec> adam(Exec(), n, p, fixed);
  std::vector<float> xr = x0, mr(n, 0.f), vr(n, 0.f);
  for (int t = 1; t <= steps; ++t) {
    adam.step(Exec(), upload(g[t - 1], "gradient"), x);
    float const a1 = float(1 - p.beta1), b1 = float(p.beta1), a2 = float(1 - p.beta2), b2 = float(p.beta2);
    float const c1 = float(1 - std::pow(p.beta1, t)), c2 = float(1 - std::pow(p.beta2, t));
    float const lr = float(p.lr), eps = float(p.eps), lo = float(p.vmin), hi = float(p.vmax);
    for (std::size_t i = 0; i < n; ++i) {
      float const gi = g[t - 1][i];
      mr[i] = a1 * gi + b1 * mr[i];
      vr[i] = b2 * vr[i] + a2 * gi * gi;
      if (i < fixed) continue;
      float y = xr[i] - lr * (mr[i] / c1) / (std::sqrt(vr[i] / c2) + eps);
      y = std::min(std::max(y, lo), hi);
      xr[i] = y;
    }
    EXPECT_TRUE(same_bits(download(x), xr)) << "model after step " << t;
    EXPECT_TRUE(same_bits(download(adam.first_moment()), mr)) << "m after step " << t;
    EXPECT_TRUE(same_bits(download(adam.second_moment()), vr)) << "v after step " << t;
  }
  // The fixed cells (the water rows) are untouched; the bounds hold elsewhere and were reached.
  auto const xd = download(x);
  for (std::size_t i = 0; i < fixed; ++i) EXPECT_EQ(xd[i], x0[i]) << "fixed cell " << i;
  EXPECT_EQ(*std::min_element(xd.begin() + fixed, xd.end()), 1650.f);
  EXPECT_EQ(*std::max_element(xd.begin() + fixed, xd.end()), 2800.f);
}

// Two steps, the state saved as a checkpoint saves it (float host vectors), restored into a new
// optimizer, two more steps: the same bits as four steps in one go.
KSWEEP_TEST(adam_restore_continues_bit_for_bit) {
  std::size_t const n = 100;
  auto const g = gradients(4, n, 5);
  std::vector<float> x0(n, 2000.f);
  vec a = upload(x0, "a"), b = upload(x0, "b");
  fwi::Adam<float, Exec> straight(Exec(), n, params(), 10);
  for (int t = 0; t < 4; ++t) straight.step(Exec(), upload(g[t]), a);
  fwi::Adam<float, Exec> first(Exec(), n, params(), 10);
  for (int t = 0; t < 2; ++t) first.step(Exec(), upload(g[t]), b);
  auto const m = download(first.first_moment()), v = download(first.second_moment());
  fwi::Adam<float, Exec> resumed(Exec(), n, params(), 10);
  resumed.restore(Exec(), first.steps(), upload(m), upload(v));
  EXPECT_EQ(resumed.steps(), 2);
  for (int t = 2; t < 4; ++t) resumed.step(Exec(), upload(g[t]), b);
  EXPECT_TRUE(same_bits(download(a), download(b)));
  EXPECT_TRUE(same_bits(download(straight.first_moment()), download(resumed.first_moment())));
  EXPECT_TRUE(same_bits(download(straight.second_moment()), download(resumed.second_moment())));
  EXPECT_THROW(resumed.restore(Exec(), 1, upload(std::vector<float>(3)), upload(v)), ksweep::Error);
  fwi::AdamParameters bad = params();
  bad.beta1 = 1.0;
  EXPECT_THROW((fwi::Adam<float, Exec>(Exec(), n, bad)), ksweep::Error);
}

// The batches of a seed are reproducible: the same seed gives the same batches, and these
// are the batches the inversion has always drawn (seed 7, 6 shots, batches of 4: the first
// three iterations of the end-to-end configuration).
KSWEEP_TEST(draw_batch_reproducible) {
  std::mt19937_64 a(7), b(7);
  std::vector<std::vector<int>> const expected{{4, 5, 2, 1}, {0, 1, 5, 2}, {1, 4, 5, 0}};
  for (auto const& e : expected) {
    auto const x = core::draw_batch(a, 6, 4);
    EXPECT_EQ(x, e);
    EXPECT_EQ(core::draw_batch(b, 6, 4), x);
  }
  EXPECT_TRUE(a == b);
  // No repeats, all in range, whole permutations when batch = shots.
  std::mt19937_64 r(123);
  for (int k = 0; k < 20; ++k) {
    auto const x = core::draw_batch(r, 9, 9);
    EXPECT_EQ(std::set<int>(x.begin(), x.end()).size(), 9u);
    EXPECT_EQ(*std::min_element(x.begin(), x.end()), 0);
    EXPECT_EQ(*std::max_element(x.begin(), x.end()), 8);
  }
  EXPECT_TRUE(core::draw_batch(r, 5, 0).empty());
  EXPECT_THROW(core::draw_batch(r, 3, 4), ksweep::Error);
}

template <class Real>
using velocity_2d = Kokkos::View<Real**, Kokkos::LayoutRight, typename Exec::memory_space>;

template <class Real>
velocity_2d<Real> upload_model(std::vector<float> const& vp, int nz, int nx) {
  velocity_2d<Real> d("model", nz, nx);
  auto h = Kokkos::create_mirror_view(Kokkos::HostSpace(), d);
  for (int iz = 0; iz < nz; ++iz)
    for (int ix = 0; ix < nx; ++ix) h(iz, ix) = static_cast<Real>(vp[static_cast<std::size_t>(iz) * nx + ix]);
  Kokkos::deep_copy(d, h);
  return d;
}

template <class View>
bool same_view_bits(View const& a, View const& b) {
  auto ha = test::to_host(a), hb = test::to_host(b);
  return ha.span() == hb.span() &&
         std::memcmp(ha.data(), hb.data(), ha.span() * sizeof(typename View::value_type)) == 0;
}

// c() from a device model equals c() from the same model on the host bit for bit, with the layer
// rebuilt (update_layer) and with the layer kept; the same velocity range, vp_model() and errors.
template <class Real>
void device_velocity_matches_host(bool free_surface) {
  using P = core::Propagator<Real, 4, Exec>;
  int const nz = 23, nx = 31;
  core::ModelGrid const grid{nz, nx, 10.0};
  core::PmlConfig pml;
  pml.width = 7;
  pml.free_surface = free_surface;
  double const dt = 1e-3;
  auto const v1 = test::smooth_model(nz, nx, 2000.0, 600.0);
  auto v2 = test::smooth_model(nz, nx, 1900.0, 900.0);
  v2[5] = 2900.f;  // a new maximum inside the model: the kept layer must not see it
  P host(Exec(), grid, pml, dt, 1), dev(Exec(), grid, pml, dt, 1);
  host.set_velocity(v1.data());
  dev.set_velocity(upload_model<Real>(v1, nz, nx));
  EXPECT_TRUE(same_view_bits(host.c(), dev.c())) << "layer updated";
  EXPECT_TRUE(same_view_bits(host.vp_model(), dev.vp_model()));
  EXPECT_EQ(host.vmin(), dev.vmin());
  EXPECT_EQ(host.vmax(), dev.vmax());
  auto const c1 = Kokkos::create_mirror(Kokkos::HostSpace(), dev.c());  // a copy, also where c() is on the host
  Kokkos::deep_copy(c1, dev.c());
  // The layer kept: only the model cells change.
  host.set_velocity(v2.data(), false);
  dev.set_velocity(upload_model<Real>(v2, nz, nx), false);
  EXPECT_TRUE(same_view_bits(host.c(), dev.c())) << "layer kept";
  EXPECT_TRUE(same_view_bits(host.vp_model(), dev.vp_model()));
  EXPECT_EQ(host.vmax(), dev.vmax());
  auto const c2 = test::to_host(dev.c());
  auto const& l = dev.layout();
  int const M = P::M;
  int changed = 0;
  for (int iz = 0; iz < l.NZ + 2 * M; ++iz)
    for (int ix = 0; ix < l.NX + 2 * M; ++ix) {
      bool const model_cell = iz >= l.top + M && iz < l.top + M + nz && ix >= l.left + M && ix < l.left + M + nx;
      if (!model_cell) {
        EXPECT_EQ(c1(iz, ix), c2(iz, ix)) << "layer cell " << iz << ", " << ix;
      }
      changed += c1(iz, ix) != c2(iz, ix);
    }
  EXPECT_GT(changed, nz * nx / 2);
  // The layer rebuilt again, after a call that kept it.
  host.set_velocity(v2.data());
  dev.set_velocity(upload_model<Real>(v2, nz, nx));
  EXPECT_TRUE(same_view_bits(host.c(), dev.c())) << "layer updated again";
  EXPECT_EQ(host.vmax(), dev.vmax());
  // A device call that keeps the layer after a host call that built it.
  P mixed(Exec(), grid, pml, dt, 1);
  mixed.set_velocity(v1.data());
  mixed.set_velocity(upload_model<Real>(v2, nz, nx), false);
  P ref(Exec(), grid, pml, dt, 1);
  ref.set_velocity(v1.data());
  ref.set_velocity(v2.data(), false);
  EXPECT_TRUE(same_view_bits(ref.c(), mixed.c())) << "host, then device with the layer kept";
  // Errors as the host's: the first bad cell, and the CFL limit with the new maximum.
  auto bad = v1;
  bad[7] = -1500.f;
  bad[9] = std::nanf("");
  try {
    dev.set_velocity(upload_model<Real>(bad, nz, nx));
    ADD_FAILURE() << "no error for a negative velocity";
  } catch (ksweep::Error const& e) {
    EXPECT_NE(std::string(e.what()).find("velocity at cell 7 is -1500"), std::string::npos) << e.what();
  }
  auto fast = v1;
  fast[100] = 9000.f;
  try {
    dev.set_velocity(upload_model<Real>(fast, nz, nx), false);
    ADD_FAILURE() << "no error for an unstable velocity";
  } catch (ksweep::Error const& e) {
    EXPECT_NE(std::string(e.what()).find("CFL"), std::string::npos) << e.what();
  }
  EXPECT_THROW(dev.set_velocity(upload_model<Real>(v1, nz, nx - 1)), ksweep::Error);
}

KSWEEP_TEST(device_set_velocity_matches_host_float) { device_velocity_matches_host<float>(false); }
KSWEEP_TEST(device_set_velocity_matches_host_free_surface) { device_velocity_matches_host<float>(true); }
KSWEEP_TEST(device_set_velocity_matches_host_double) { device_velocity_matches_host<double>(false); }

// A region is pushed with its name and popped on every way out of its scope, exceptions
// included (Kokkos Tools see balanced regions).
std::vector<std::string> region_events;
void on_push(char const* name) { region_events.push_back(std::string("push ") + name); }
void on_pop() { region_events.push_back("pop"); }

KSWEEP_TEST(scoped_region_balanced) {
  region_events.clear();
  Kokkos::Tools::Experimental::set_push_region_callback(on_push);
  Kokkos::Tools::Experimental::set_pop_region_callback(on_pop);
  {
    core::ScopedRegion outer("ksweep::test::outer");
    try {
      core::ScopedRegion inner("ksweep::test::inner");
      throw ksweep::Error("x");
    } catch (ksweep::Error const&) {
    }
  }
  Kokkos::Tools::Experimental::set_push_region_callback(nullptr);
  Kokkos::Tools::Experimental::set_pop_region_callback(nullptr);
  std::vector<std::string> const expected{"push ksweep::test::outer", "push ksweep::test::inner", "pop", "pop"};
  EXPECT_EQ(region_events, expected);
}

// ordered_dot sums blocks in index order and the blocks in order: the host's sum in that order,
// bit for bit, for sizes around the block.
KSWEEP_TEST(ordered_dot_matches_host_order) {
  for (std::size_t n : {std::size_t(1), std::size_t(4095), std::size_t(4096), std::size_t(4097), std::size_t(10000)}) {
    auto const g = gradients(2, n, 7u + static_cast<unsigned>(n));
    double sum = 0;
    for (std::size_t b = 0; b < n; b += 4096) {
      double acc = 0;
      for (std::size_t i = b; i < std::min(n, b + 4096); ++i)
        acc += static_cast<double>(g[0][i]) * static_cast<double>(g[1][i]);
      sum += acc;
    }
    double const dot = fwi::ordered_dot(Exec(), upload(g[0]), upload(g[1]));
    EXPECT_EQ(std::memcmp(&dot, &sum, sizeof dot), 0) << "n = " << n << ": " << dot << " vs " << sum;
  }
}

// f(x) = 1/2 sum a_i (x_i - c_i)^2 with a_i over three decades: L-BFGS reaches the known
// minimum (projected onto the bounds where a bound cuts it), fixed cells stay, and each
// iteration's line search accepts a Wolfe point.
struct Quadratic {
  std::vector<float> a, c;
  template <class X, class G>
  double operator()(X const& x, G const& g) const {
    auto const xh = test::to_host(x);
    auto gh = Kokkos::create_mirror_view(Kokkos::HostSpace(), g);
    double f = 0;
    for (std::size_t i = 0; i < xh.extent(0); ++i) {
      double const d = static_cast<double>(xh(i)) - c[i];
      f += 0.5 * a[i] * d * d;
      gh(i) = static_cast<float>(a[i] * d);
    }
    Kokkos::deep_copy(g, gh);
    return f;
  }
};

// A quadratic of n cells with curvatures over two decades and minima in [2000, 3000] m/s, and a
// start around 2500 m/s (x0).
Quadratic random_quadratic(std::size_t n, unsigned seed, std::vector<float>& x0) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<double> u(0, 1);
  Quadratic q;
  x0.resize(n);
  for (std::size_t i = 0; i < n; ++i) {
    q.a.push_back(static_cast<float>(std::pow(10.0, 2 * u(gen))));
    q.c.push_back(static_cast<float>(2000 + 1000 * u(gen)));
    x0[i] = static_cast<float>(2500 + 200 * (u(gen) - 0.5));
  }
  return q;
}

void lbfgs_reaches_minimum(double vmax) {
  std::size_t const n = 10000, fixed = 300;
  std::vector<float> x0;
  Quadratic const q = random_quadratic(n, 3, x0);
  fwi::LbfgsParameters p;
  p.first_step = 50;
  p.vmin = 1500;
  p.vmax = vmax;
  fwi::Lbfgs<float, Exec> opt(Exec(), n, p, fixed);
  vec x = upload(x0, "model");
  int accepted = 0;
  for (int it = 0; it < 60; ++it) accepted += opt.step(Exec(), x, q).accepted ? 1 : 0;
  EXPECT_GE(accepted, 50);
  auto const xh = download(x);
  double worst = 0;
  for (std::size_t i = 0; i < n; ++i) {
    if (i < fixed) {
      ASSERT_EQ(xh[i], x0[i]) << "fixed cell " << i << " moved";
      continue;
    }
    double const target = vmax > 0 ? std::min<double>(q.c[i], vmax) : q.c[i];
    worst = std::max(worst, std::abs(xh[i] - target));
    ASSERT_LE(xh[i], vmax > 0 ? vmax : 1e30) << "cell " << i << " above the bound";
  }
  EXPECT_LT(worst, 0.2) << "m/s from the minimum after 60 iterations (" << opt.evaluations() << " evaluations)";
  EXPECT_LT(opt.evaluations(), 90) << "gradient evaluations in 60 iterations";
}

KSWEEP_TEST(lbfgs_quadratic_minimum) { lbfgs_reaches_minimum(0); }
KSWEEP_TEST(lbfgs_quadratic_minimum_with_bound) { lbfgs_reaches_minimum(2600); }

// L-BFGS on this backend against the host backend: the same models, bit for bit, step after
// step (its axpby, scal and ordered dot products run as Kokkos kernels compiled with the
// project's floating-point flags; a Kokkos Kernels that hands axpby to cuBLAS fuses
// multiply-adds, which this test is there to catch on a GPU), with and without the upper bound.
template <class Space>
std::vector<float> lbfgs_models(Quadratic const& q, std::vector<float> const& x0, fwi::LbfgsParameters const& p,
                                std::size_t fixed, int steps) {
  fwi::Lbfgs<float, Space> opt(Space(), x0.size(), p, fixed);
  Kokkos::View<float*, typename Space::memory_space> x("model", x0.size());
  auto xh = Kokkos::create_mirror_view(Kokkos::HostSpace(), x);
  for (std::size_t i = 0; i < x0.size(); ++i) xh(i) = x0[i];
  Kokkos::deep_copy(x, xh);
  std::vector<float> out;
  for (int it = 0; it < steps; ++it) {
    opt.step(Space(), x, q);
    auto const h = test::to_host(x);
    out.insert(out.end(), h.data(), h.data() + h.span());
  }
  return out;
}

KSWEEP_TEST(lbfgs_bits_match_host_backend) {
  std::size_t const n = 4000, fixed = 100;
  std::vector<float> x0;
  Quadratic const q = random_quadratic(n, 5, x0);
  for (double vmax : {0.0, 2600.0}) {
    fwi::LbfgsParameters p;
    p.first_step = 50;
    p.vmin = 1500;
    p.vmax = vmax;
    auto const dev = lbfgs_models<Exec>(q, x0, p, fixed, 12);
    auto const host = lbfgs_models<Kokkos::DefaultHostExecutionSpace>(q, x0, p, fixed, 12);
    EXPECT_TRUE(same_bits(dev, host)) << "L-BFGS models, " << Exec::name() << " against "
                                      << Kokkos::DefaultHostExecutionSpace::name() << ", vmax " << vmax;
    EXPECT_FALSE(same_bits(std::vector<float>(dev.begin(), dev.begin() + n), x0)) << "the model never moved";
  }
}

KSWEEP_TEST(lbfgs_rejects_bad_parameters) {
  fwi::LbfgsParameters p;
  p.c1 = 0.95;  // above c2
  EXPECT_THROW((fwi::Lbfgs<float, Exec>(Exec(), 10, p)), ksweep::Error);
  p = fwi::LbfgsParameters{};
  p.memory = 0;
  EXPECT_THROW((fwi::Lbfgs<float, Exec>(Exec(), 10, p)), ksweep::Error);
}

// The device smoothing of the gradient against the host smoothing of the starting model: the
// same bits, in 2D and 3D, with a kernel wider than an axis (clamped edges everywhere).
KSWEEP_TEST(device_smoothing_matches_host) {
  for (auto const& [nz, ny, nx, sigma] :
       {std::tuple<int, int, int, double>{37, 1, 53, 2.5}, std::tuple<int, int, int, double>{9, 7, 11, 4.0}}) {
    std::size_t const n = static_cast<std::size_t>(nz) * ny * nx;
    auto const f = gradients(1, n, 11u)[0];
    std::vector<double> fd(f.begin(), f.end());
    auto const host = fwi::gaussian_smooth(fd, nz, ny, nx, sigma);
    vec d = upload(f);
    fwi::gaussian_smooth(Exec(), d, nz, ny, nx, sigma);
    auto const dev = download(d);
    std::vector<float> hf(host.begin(), host.end());
    EXPECT_TRUE(same_bits(dev, hf)) << nz << " x " << ny << " x " << nx << ", sigma " << sigma;
  }
}

}  // namespace
