#pragma once
// The 3D operators, from the same cell bodies as 2D: the dot-product test of the adjoint, the
// analytic 3D Green's function, the CPML reflection, reciprocity and y symmetry, the gradient
// against finite differences, boundary against full storage, lossy storage, and the three
// schedules giving the same bits. Layers of different widths on every face.

#include <ksweep/core/gradient.hpp>
#include <harness.hpp>
#include <physics_utils.hpp>
#include <test_utils.hpp>

#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include <unistd.h>

namespace {

using namespace ksweep;

template <class Real, int Order>
using P3 = core::Propagator<Real, Order, TEST_EXECSPACE, 3>;
template <class Real, int Order>
using E3 = core::GradientEngine<Real, Order, TEST_EXECSPACE, 3>;

/// A smooth 3D velocity model, [nz][ny][nx]; with `invariant_y` it does not depend on y.
std::vector<float> smooth_model3d(int nz, int ny, int nx, bool invariant_y = false) {
  std::vector<float> v(static_cast<std::size_t>(nz) * ny * nx);
  for (int iz = 0; iz < nz; ++iz)
    for (int iy = 0; iy < ny; ++iy)
      for (int ix = 0; ix < nx; ++ix) {
        double const y = invariant_y ? 0.0 : std::sin(0.4 * iy + 0.1 * ix);
        v[(static_cast<std::size_t>(iz) * ny + iy) * nx + ix] =
            static_cast<float>(2000.0 + 500.0 * iz / nz + 100.0 * std::sin(0.3 * ix) * std::cos(0.2 * iz) + 80.0 * y);
      }
  return v;
}

/// Layers of different widths on every face (top, bottom, front, back, left, right).
core::PmlConfig faces(int top, int bottom, int front, int back, int left, int right, bool fs) {
  core::PmlConfig p;
  p.faces = {top, bottom, front, back, left, right};
  p.free_surface = fs;
  return p;
}

template <class Real, int Order>
std::vector<double> records3d(core::ModelGrid const& g, core::PmlConfig const& pml, double dt,
                              std::vector<float> const& vp, core::Survey const& s, std::vector<double> const& w,
                              int nt) {
  P3<Real, Order> prop(TEST_EXECSPACE(), g, pml, dt, s.n_shots);
  prop.set_velocity(vp.data());
  return test::forward_records(prop, s, w, nt);
}

// ---------------------------------------------------------------------------------------------
// Dot product <F x, y> = <x, F^T y>, every order, with and without a free surface.
// ---------------------------------------------------------------------------------------------
template <class Real, int Order>
double dot_product_error_3d(bool fs, std::array<double, 3> const& spacing = {}) {
  int const nz = 14, ny = 12, nx = 16, nt = 50, n_shots = 2, n_rec = 9;
  core::Survey s;
  s.n_shots = n_shots;
  s.n_sources = 2;
  s.n_receivers = n_rec;
  int const z0 = fs ? 1 : 0;
  // Sources and receivers spread over the grid, next to every face too.
  s.sources = {{z0, 0, 0}, {nz / 2, nx / 3, ny - 1}, {nz - 1, nx - 1, ny / 2}, {3, 5, 2}};
  for (int sh = 0; sh < n_shots; ++sh)
    for (int r = 0; r < n_rec; ++r)
      s.receivers.push_back({z0 + (r * 5 + sh) % (nz - z0), (r * 7 + 3 * sh) % nx, (r * 4 + sh) % ny});
  auto grid = core::ModelGrid::volume(nz, ny, nx, 10.0);
  if (spacing[0] > 0) grid.set_spacing(spacing);
  return test::dot_product_error<Real, Order, 3>(grid, faces(5, 4, 6, 4, 5, 7, fs), smooth_model3d(nz, ny, nx), s, nt);
}

template <class Real>
void check_dot_products_3d(double tol) {
  for (bool fs : {false, true}) {
    double e[4] = {dot_product_error_3d<Real, 2>(fs), 0, 0, dot_product_error_3d<Real, 8>(fs)};
    if constexpr (test::all_orders && sizeof(Real) == 8) {  // see test::all_orders
      e[1] = dot_product_error_3d<Real, 4>(fs);
      e[2] = dot_product_error_3d<Real, 6>(fs);
    }
    for (int i = 0; i < 4; ++i) EXPECT_LE(e[i], tol) << "order " << 2 * (i + 1) << ", free surface " << fs;
    std::printf("3D dot-product relative error (%s, free surface %d): o2 %.2e o4 %.2e o6 %.2e o8 %.2e\n",
                sizeof(Real) == 8 ? "fp64" : "fp32", fs, e[0], e[1], e[2], e[3]);
  }
}

KSWEEP_TEST(adjoint_3d_dot_product_fp64) { check_dot_products_3d<double>(1e-12); }
KSWEEP_TEST(adjoint_3d_dot_product_fp32) { check_dot_products_3d<float>(1e-5); }

// Cells of three sizes (dz, dy, dx all different): each axis weighted by its own (dh / d_a)^2.
KSWEEP_TEST(adjoint_3d_dot_product_spacing_per_axis) {
  std::array<double, 3> const d = {12.0, 7.0, 9.0};
  for (bool fs : {false, true}) {
    double const e2 = dot_product_error_3d<double, 2>(fs, d), e8 = dot_product_error_3d<double, 8>(fs, d);
    EXPECT_LE(e2, 1e-12) << "order 2, free surface " << fs;
    EXPECT_LE(e8, 1e-12) << "order 8, free surface " << fs;
    std::printf("3D dot-product relative error, dz 12 dy 7 dx 9 m (fp64, free surface %d): o2 %.2e o8 %.2e\n", fs, e2,
                e8);
  }
}

// ---------------------------------------------------------------------------------------------
// Homogeneous medium, order 8, fp64: a trace against the analytic 3D Green's function,
// u(r, t) = f(t - r / c) / (4 pi c^2 r) for u_tt = c^2 lap u + f(t) delta(x), with
// f(n dt) = w[n] dh^3 / dt^2 (the source spread over one cell of volume dh^3).
// ---------------------------------------------------------------------------------------------
KSWEEP_LARGE_TEST(physics_3d_analytic_green_order8) {
  double const c = 2000.0, dh = 10.0, freq = 10.0, delay = 0.1, dt = 1e-3;  // Courant 0.2, 8 cells per wavelength
  int const nz = 41, ny = 41, nx = 71;
  core::Cell const src{20, 20, 20}, rec{20, 50, 20};  // r = 300 m along x
  double const r = dh * 30;
  // Earliest wave back from a model face: via the left face (source 20 cells from it) or the
  // right face (receiver 20 cells from it), 70 cells; via the z or y faces, 2 hypot(20, 15) = 50
  // cells. Their onset (arrival - delay) comes after the window end.
  int const nt = 340;
  double const t_face = 50 * dh / c;
  EXPECT_LT(nt * dt, t_face + delay - 0.1 + 0.2) << "window";
  auto const grid = core::ModelGrid::volume(nz, ny, nx, dh);
  core::PmlConfig pml;
  pml.width = 12;
  std::vector<float> vp(static_cast<std::size_t>(nz) * ny * nx, static_cast<float>(c));
  auto w = core::ricker(freq, delay, dt, nt);
  auto trace = records3d<double, 8>(grid, pml, dt, vp, test::one_shot({src}, {rec}), w, nt);
  double const scale = dh * dh * dh / (dt * dt), pi = 3.14159265358979323846;
  auto u = [&](double t) { return scale * test::ricker_at(freq, delay, t - r / c) / (4 * pi * c * c * r); };
  std::vector<double> analytic(nt), early(nt), late(nt);
  for (int n = 0; n < nt; ++n) {
    analytic[n] = u((n + 1) * dt);
    early[n] = u((n + 0.5) * dt);
    late[n] = u((n + 1.5) * dt);
  }
  double const err = test::rel_l2(trace, analytic), e_early = test::rel_l2(trace, early),
               e_late = test::rel_l2(trace, late);
  std::printf(
      "analytic 3D Green's function, order 8, Courant 0.20, r = %.0f m, %d samples: relative L2 error %.3e "
      "(analytic at t - dt/2: %.3e, at t + dt/2: %.3e)\n",
      r, nt, err, e_early, e_late);
  EXPECT_LE(err, 1e-2);
  EXPECT_GT(std::min(e_early, e_late), 3 * err);
}

// ---------------------------------------------------------------------------------------------
// CPML reflection: 20-cell layers on a small cube against a larger grid whose faces are too far
// to be seen in the window.
// ---------------------------------------------------------------------------------------------
template <int Order>
double cpml_reflection_db_3d() {
  double const c = 2000.0, dh = 10.0, freq = 10.0, delay = 0.08, dt = 1e-3;
  int const n = 26, nt = 200, pad = 21;
  static_assert(2 * pad * 10.0 / 2000.0 > nt * 1e-3, "reference window sees its own faces");
  core::Cell const src{13, 3, 11};  // 3 cells from the left face
  std::vector<core::Cell> recs;
  for (int z = 3; z < n; z += 7)
    for (int y = 3; y < n; y += 7) recs.push_back({z, 1, y});  // along the left face
  for (int x = 5; x < n; x += 7) {
    recs.push_back({1, x, 13});
    recs.push_back({n - 2, x, 13});
    recs.push_back({13, x, 1});
    recs.push_back({13, x, n - 2});
  }
  auto shift = [&](core::Cell a) { return core::Cell{a.z + pad, a.x + pad, a.y + pad}; };
  std::vector<core::Cell> recs_big;
  for (auto const& a : recs) recs_big.push_back(shift(a));
  core::PmlConfig pml;  // 20 cells, R = 1e-3, 25 Hz
  auto w = core::ricker(freq, delay, dt, nt);
  auto const small = core::ModelGrid::volume(n, n, n, dh),
             big = core::ModelGrid::volume(n + 2 * pad, n + 2 * pad, n + 2 * pad, dh);
  std::vector<float> vs(static_cast<std::size_t>(small.cells()), static_cast<float>(c));
  std::vector<float> vb(static_cast<std::size_t>(big.cells()), static_cast<float>(c));
  auto rs = records3d<float, Order>(small, pml, dt, vs, test::one_shot({src}, recs), w, nt);
  std::vector<core::Cell> const src_big{shift(src)};
  auto rb = records3d<float, Order>(big, pml, dt, vb, test::one_shot(src_big, recs_big), w, nt);
  double e_refl = 0, e_direct = 0;
  for (std::size_t i = 0; i < rs.size(); ++i) {
    e_refl += (rs[i] - rb[i]) * (rs[i] - rb[i]);
    e_direct += rb[i] * rb[i];
  }
  double const db = 10.0 * std::log10(e_refl / e_direct);
  std::printf("3D CPML (20 cells, R = 1e-3, 25 Hz) reflection, order %d, %zu receivers near the faces: %.1f dB\n",
              Order, recs.size(), db);
  return db;
}

KSWEEP_LARGE_TEST(physics_3d_cpml_reflection) {
  EXPECT_LE(cpml_reflection_db_3d<4>(), -40.0);
  EXPECT_LE(cpml_reflection_db_3d<8>(), -40.0);
}

// ---------------------------------------------------------------------------------------------
// Reciprocity (see the 2D test: traces scaled by v^2 at the source) and y symmetry.
// ---------------------------------------------------------------------------------------------
KSWEEP_LARGE_TEST(physics_3d_reciprocity) {
  int const nz = 30, ny = 26, nx = 34, nt = 350;
  double const dt = 1e-3;
  auto const grid = core::ModelGrid::volume(nz, ny, nx, 10.0);
  auto const pml = faces(8, 10, 9, 7, 8, 11, false);
  auto vp = smooth_model3d(nz, ny, nx);
  core::Cell const a{8, 9, 7}, b{22, 26, 18};
  auto w = core::ricker(10.0, 0.12, dt, nt);
  auto ab = records3d<double, 8>(grid, pml, dt, vp, test::one_shot({a}, {b}), w, nt);
  auto ba = records3d<double, 8>(grid, pml, dt, vp, test::one_shot({b}, {a}), w, nt);
  auto v2 = [&](core::Cell q) {
    return std::pow(double(vp[(static_cast<std::size_t>(q.z) * ny + q.y) * nx + q.x]), 2);
  };
  for (auto& x : ab) x *= v2(a);
  for (auto& x : ba) x *= v2(b);
  double const err = test::rel_l2(ab, ba);
  std::printf("3D reciprocity (fp64, order 8, smooth model, CPML of 6 widths): relative L2 %.2e\n", err);
  EXPECT_GT(test::energy(ab), 0.0);
  EXPECT_LE(err, 1e-4);
}

KSWEEP_LARGE_TEST(physics_3d_y_symmetry) {
  int const nz = 24, ny = 21, nx = 28, nt = 300, n_rec = 12;
  double const dt = 1e-3;
  for (bool fs : {false, true}) {
    auto const grid = core::ModelGrid::volume(nz, ny, nx, 10.0);
    auto const pml = faces(7, 9, 8, 8, 6, 10, fs);  // the same width in front and behind
    auto vp = smooth_model3d(nz, ny, nx, true);
    auto mirror = [&](core::Cell q) { return core::Cell{q.z, q.x, ny - 1 - q.y}; };
    std::vector<core::Cell> recs, recs_m;
    for (int r = 0; r < n_rec; ++r) {
      recs.push_back({1 + (r * 5) % (nz - 1), (r * 7) % nx, (r * 3) % ny});
      recs_m.push_back(mirror(recs.back()));
    }
    core::Cell const src{4, 10, 5};
    auto w = core::ricker(10.0, 0.12, dt, nt);
    auto r0 = records3d<double, 6>(grid, pml, dt, vp, test::one_shot({src}, recs), w, nt);
    auto r1 = records3d<double, 6>(grid, pml, dt, vp, test::one_shot({mirror(src)}, recs_m), w, nt);
    double const err = test::rel_max(r1, r0);
    std::printf("3D y symmetry (fp64, order 6, free surface %d): mirrored source and receivers, max relative %.2e\n",
                fs, err);
    EXPECT_GT(test::energy(r0), 0.0);
    EXPECT_LE(err, 1e-12) << "free surface " << fs;
    // Not symmetric unless mirrored: the same receivers with the mirrored source differ.
    auto r2 = records3d<double, 6>(grid, pml, dt, vp, test::one_shot({mirror(src)}, recs), w, nt);
    EXPECT_GT(test::rel_max(r2, r0), 1e-2);
  }
}

// ---------------------------------------------------------------------------------------------
// The gradient.
// ---------------------------------------------------------------------------------------------
/// A layered 3D model with a dipping interface and a slow inclusion, [nz][ny][nx].
std::vector<float> layered_model3d(int nz, int ny, int nx, double shift = 0.0) {
  std::vector<float> v(static_cast<std::size_t>(nz) * ny * nx);
  for (int iz = 0; iz < nz; ++iz)
    for (int iy = 0; iy < ny; ++iy)
      for (int ix = 0; ix < nx; ++ix) {
        double const depth = iz + 0.15 * ix + 0.1 * iy * std::sin(0.2 * ix) + shift;
        double const layer = std::floor(depth / (nz / 4.0));
        double vv = iz < 2 ? 1500.0 : 1700.0 + 220.0 * layer + 40.0 * std::sin(0.5 * layer + 0.1 * iy);
        double const dz = iz - 0.6 * nz, dy = iy - 0.5 * ny, dx = ix - 0.5 * nx;
        if (dz * dz + dy * dy + dx * dx < 9.0 + shift) vv -= 150.0;
        v[(static_cast<std::size_t>(iz) * ny + iy) * nx + ix] = static_cast<float>(vv);
      }
  return v;
}

/// An areal patch of receivers at z = 2, one source per shot at z = 1.
inline core::Survey patch_survey(int ny, int nx) {
  core::Survey s;
  s.n_shots = 2;
  s.n_sources = 1;
  s.n_receivers = (nx / 3) * (ny / 3);
  for (int sh = 0; sh < s.n_shots; ++sh) {
    s.sources.push_back({1, (sh + 1) * nx / 3, (2 - sh) * ny / 3});
    for (int iy = 0; iy < ny / 3; ++iy)
      for (int ix = 0; ix < nx / 3; ++ix) s.receivers.push_back({2, 1 + 3 * ix, 1 + 3 * iy});
  }
  return s;
}

/// The layered 3D model with an inclusion, from a starting model shifted by 1.5 cells in depth;
/// layers of different widths on every face.
template <class Real, int Order>
struct Problem3 : test::GradientProblem<Real, Order, 3> {
  int nz, ny, nx;
  Problem3(int nz_, int ny_, int nx_, int nt_, bool fs, double freq = 15.0)
      : test::GradientProblem<Real, Order, 3>(core::ModelGrid::volume(nz_, ny_, nx_, 10.0), faces(6, 5, 5, 7, 6, 5, fs),
                                              1e-3, patch_survey(ny_, nx_), layered_model3d(nz_, ny_, nx_),
                                              layered_model3d(nz_, ny_, nx_, 1.5), nt_, freq),
        nz(nz_),
        ny(ny_),
        nx(nx_) {}
};

inline storage::StorageConfig storage3d(std::string strategy, std::string location = "device",
                                        std::string dtype = "fp32", int interval = 7) {
  return test::storage_cfg(strategy, location, dtype, interval);
}
using test::cosine;

template <int Order>
void finite_difference_3d(bool fs, std::string const& strategy) {
  Problem3<double, Order> p(14, 12, 16, 160, fs);
  double loss = 0;
  auto g = p.gradient(storage3d(strategy), &loss);
  ASSERT_GT(loss, 0);
  std::mt19937 gen(11);
  test::Direction const dir(gen, g.size());  // v0 + h d exact in float
  double const gd = dir.dot(g);
  auto perturbed = [&](double h) { return dir.step(p.v0, h); };
  double const h = 0.125;
  double const fd = dir.central([&](std::vector<float> const& v) { return p.loss_at(v); }, p.v0, h);
  double const err = std::abs(fd - gd) / std::abs(gd);
  double const l0 = p.loss_at(p.v0);
  double const r1 = std::abs(p.loss_at(perturbed(16 * h)) - l0 - 16 * h * gd);
  double const r2 = std::abs(p.loss_at(perturbed(8 * h)) - l0 - 8 * h * gd);
  double const slope = std::log2(r1 / r2);
  std::printf("3D order %d fs %d %s: <g,d> = %.10e, central FD = %.10e, relative error %.2e, Taylor slope %.3f\n",
              Order, fs, strategy.c_str(), gd, fd, err, slope);
  EXPECT_LE(err, 1e-6) << "order " << Order << " free surface " << fs << " " << strategy;
  EXPECT_NEAR(slope, 2.0, 0.1);
}

KSWEEP_TEST(gradient_3d_finite_difference_fp64) {
  finite_difference_3d<4>(false, "full");
  finite_difference_3d<8>(true, "full");
  finite_difference_3d<2>(true, "boundary");
  finite_difference_3d<6>(false, "boundary");
}

// The layer's chain rule in 3D (see layer_chain_check in tst_gradient.hpp): the layer a copy of
// the edge cells in the loss too, damping of a fixed velocity; the gradient against central
// differences on the cells next to the six faces and on every cell, the batched and shots
// schedules the same bits, and the gradient without the chain rule off on the edge cells.
template <int Order>
void layer_chain_3d(bool fs, std::string const& strategy) {
  Problem3<double, Order> p(14, 12, 16, 160, fs);
  p.follow_layer(4000.0);
  std::vector<double> g[2];
  for (int i = 0; i < 2; ++i) {
    p.prop.set_schedule(i == 0 ? core::Schedule::batched : core::Schedule::shots);
    g[i] = p.gradient(storage3d(strategy));
  }
  p.prop.set_schedule(core::Schedule::automatic);
  EXPECT_TRUE(g[0] == g[1]) << "batched and shots schedules differ";
  int const M = Order / 2;
  auto const near = [&](int i, int n) { return i < M || i >= n - M; };
  std::mt19937 gen(17);
  for (bool const edge_only : {true, false}) {
    test::Direction dir(gen, g[0].size());
    for (int iz = 0; iz < p.nz; ++iz)
      for (int iy = 0; iy < p.ny; ++iy)
        for (int ix = 0; ix < p.nx; ++ix) {
          bool const edge = near(ix, p.nx) || near(iy, p.ny) || iz >= p.nz - M || (!fs && iz < M);
          if (edge_only && !edge) dir.d[(static_cast<std::size_t>(iz) * p.ny + iy) * p.nx + ix] = 0;
        }
    double const gd = dir.dot(g[0]);
    double const fd = dir.central([&](std::vector<float> const& v) { return p.loss_at(v); }, p.v0, 0.125);
    double const err = std::abs(fd - gd) / std::abs(gd);
    std::printf("3D order %d fs %d %s, layer chain, %s: <g,d> = %.10e, central FD = %.10e, relative error %.2e\n",
                Order, fs, strategy.c_str(), edge_only ? "edge cells" : "all cells", gd, fd, err);
    EXPECT_LE(err, 1e-6) << "order " << Order << " free surface " << fs << " " << strategy;
    if (edge_only) {
      p.chain = false;
      double const fixed = dir.dot(p.gradient(storage3d(strategy)));
      p.chain = true;
      std::printf("  without the chain rule: relative error %.2e\n", std::abs(fd - fixed) / std::abs(fd));
      EXPECT_GT(std::abs(fd - fixed) / std::abs(fd), 1e-3);
    }
  }
}

KSWEEP_TEST(gradient_3d_layer_chain_finite_difference_fp64) {
  layer_chain_3d<2>(false, "boundary");
  layer_chain_3d<4>(true, "full");
  layer_chain_3d<8>(false, "boundary");
}

template <int Order>
void boundary_equals_full_3d(bool fs) {
  Problem3<float, Order> p(20, 16, 24, 200, fs);
  auto ref = p.gradient(storage3d("full"));
  for (std::string loc : {"device", "host", "disk"}) {
    auto g = p.gradient(storage3d("boundary", loc));
    double num = 0, den = 0;
    for (std::size_t i = 0; i < g.size(); ++i) {
      num += (g[i] - ref[i]) * (g[i] - ref[i]);
      den += ref[i] * ref[i];
    }
    double const e = std::sqrt(num / den);
    std::printf("3D order %d fs %d boundary/%s vs full: relative L2 %.2e\n", Order, fs, loc.c_str(), e);
    EXPECT_GT(den, 0.0);
    EXPECT_LE(e, 1e-5) << loc;
  }
}

KSWEEP_LARGE_TEST(gradient_3d_boundary_equals_full_fp32) {
  boundary_equals_full_3d<4>(false);
  boundary_equals_full_3d<8>(true);
}

// Lossy storage in 3D: relative L2 difference from fp32 storage bounded at about 10x the measured
// values (fp16 2.1e-6, bf16 1.2e-5, int8 4.6e-5 on this case).
KSWEEP_LARGE_TEST(gradient_3d_lossy_storage_accuracy) {
  Problem3<float, 4> p(24, 20, 30, 300, false, 12.0);
  auto ref = p.gradient(storage3d("boundary", "device", "fp32"));
  struct Case {
    char const* dtype;
    double max_rel_l2;
  };
  for (Case c : {Case{"fp16", 2e-5}, Case{"bf16", 1.2e-4}, Case{"int8", 5e-4}}) {
    for (std::string loc : {"device", "disk"}) {
      auto g = p.gradient(storage3d("boundary", loc, c.dtype, 16));
      double const cs = cosine(g, ref);
      double num = 0, den = 0;
      for (std::size_t i = 0; i < g.size(); ++i) {
        num += (g[i] - ref[i]) * (g[i] - ref[i]);
        den += ref[i] * ref[i];
      }
      std::printf("3D dtype %s (%s): gradient cosine vs fp32 = %.10f (1 - cosine %.2e, relative L2 %.2e)\n", c.dtype,
                  loc.c_str(), cs, 1 - cs, std::sqrt(num / den));
      EXPECT_LE(std::sqrt(num / den), c.max_rel_l2) << c.dtype << " " << loc;
      EXPECT_GT(num, 0.0) << c.dtype << ": the lossy gradient equals the fp32 one (the codec did not run)";
    }
  }
}

// ---------------------------------------------------------------------------------------------
// The schedules give the same bits in 3D: forward, adjoint, gradient (boundary and full).
// ---------------------------------------------------------------------------------------------
// The 3D row sweeps in blocks of y (host schedules) give the bits of plain z-plane sweeps, for
// blocks that divide NY and blocks that leave a shorter last one.
KSWEEP_TEST(schedules_3d_blocks_of_y_bitwise) {
  Problem3<float, 8> p(14, 27, 16, 80, true);
  std::vector<std::vector<double>> runs;
  for (int by : {1000, 1, 5, 16}) {
    p.prop.set_block_y(by);
    typename Problem3<float, 8>::P::record_view r("r", 2, p.nt, p.n_rec);
    p.prop.forward(p.w, r);
    auto out = test::host_values(r);
    typename Problem3<float, 8>::E engine(p.prop, storage3d("boundary"));
    typename Problem3<float, 8>::E::images_type img(p.nz * p.ny, p.nx);
    out.push_back(engine.loss_and_gradient(p.w, p.observed, 0.5, img, p.synthetic));
    auto const g = test::host_values(img.grad);
    out.insert(out.end(), g.begin(), g.end());
    runs.push_back(out);
  }
  p.prop.set_block_y(0);
  EXPECT_GT(test::energy(runs[0]), 0.0);
  for (std::size_t i = 1; i < runs.size(); ++i) EXPECT_EQ(test::differing(runs[0], runs[i]), 0) << "block " << i;
}

KSWEEP_LARGE_TEST(schedules_3d_agree_bitwise) {
  for (bool fs : {false, true}) {
    Problem3<float, 8> p(16, 13, 18, 90, fs);
    p.n_shots = 2;
    auto run = [&](core::Schedule s, std::string const& strategy) {
      p.prop.set_schedule(s);
      std::vector<double> out;
      typename Problem3<float, 8>::P::record_view r("r", 2, p.nt, p.n_rec);
      p.prop.forward(p.w, r);
      out = test::host_values(r);
      typename Problem3<float, 8>::P::wavelet_view g("g", 2, 1, p.nt);
      p.prop.adjoint(p.observed, g);
      auto const a = test::host_values(g);
      out.insert(out.end(), a.begin(), a.end());
      typename Problem3<float, 8>::E engine(p.prop, storage3d(strategy, "host", "fp32"));
      typename Problem3<float, 8>::E::images_type img(p.nz * p.ny, p.nx);
      out.push_back(engine.loss_and_gradient(p.w, p.observed, 0.5, img, p.synthetic));
      for (auto const* v : {&img.grad, &img.illum_src, &img.illum_rec}) {
        auto const h = test::host_values(*v);
        out.insert(out.end(), h.begin(), h.end());
      }
      return out;
    };
    for (std::string strategy : {"boundary", "full"}) {
      auto const b = run(core::Schedule::batched, strategy);
      EXPECT_GT(test::energy(b), 0.0);
      for (auto const other : {core::Schedule::shots, core::Schedule::cells})
        EXPECT_EQ(test::differing(b, run(other, strategy)), 0)
            << "3D batched vs " << core::to_string(other) << ", " << strategy << ", free surface " << fs;
    }
    p.prop.set_schedule(core::default_schedule());
  }
}

}  // namespace
