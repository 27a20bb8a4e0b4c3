// Born (linearised) modelling through the library (fwi::Modeling::born), in double precision:
//  - its transpose is the gradient's vector-Jacobian product (an independent code path, itself
//    checked by dot products and finite differences): <born(dv), d> = <dv, vjp(d)> to 1e-12 at
//    every order, in 2D and 3D, with and without a free surface, with the layer given or a copy
//    of the model's edges, constant and variable density, with a perturbation on every cell
//    (the edge cells included) and sources and receivers next to the layer;
//  - it is the derivative of forward modelling: the central difference of two full modellings
//    converges to it at second order in the perturbation's size (measured rate, both layer
//    kinds);
//  - bad input is refused with the value named;
//  - imaging (fwi::rtm, fwi::lsrtm) of two reflectors under a smooth background from the data of
//    the full model: LSRTM's misfit falls at every iteration and its image correlates with the
//    true perturbation better than RTM's.

#include <ksweep/base/error.hpp>
#include <ksweep/fwi/imaging.hpp>
#include <ksweep/fwi/modeling.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

namespace {

using namespace ksweep;

struct Case {
  int dim = 2;
  int order = 4;
  bool free_surface = false;
  bool layer_given = false;  // a separate layer velocity (held fixed), else the model's edges
  bool vd = false;           // variable density
  double profile_velocity = 0;
};

struct Born {
  fwi::ModelingSetup setup;
  std::vector<double> v, rho, wavelets;
  int nt = 0;
};

Born make(Case const& c) {
  Born b;
  int const nz = c.dim == 3 ? 16 : 26, ny = 14, nx = c.dim == 3 ? 17 : 31;
  b.nt = c.dim == 3 ? 90 : 160;
  auto& s = b.setup;
  s.grid = c.dim == 3 ? core::ModelGrid::volume(nz, ny, nx, 10.0) : core::ModelGrid(nz, nx, 10.0);
  s.pml.width = c.vd ? 2 * c.order / 2 + 2 : 6;
  s.pml.free_surface = c.free_surface;
  s.pml.profile_velocity = c.profile_velocity;
  s.order = c.order;
  s.dt = 0.0008;
  s.nt = b.nt;
  s.physics = c.vd ? fwi::Physics::acoustic_vd : fwi::Physics::acoustic;
  s.batch = 1;  // two batches of one shot
  auto& sv = s.survey;
  sv.n_shots = 2;
  sv.n_sources = 1;
  sv.n_receivers = 5;
  int const z0 = c.free_surface ? 1 : 0;
  int const y = c.dim == 3 ? 1 : 0;                                  // y positions in 3D only
  sv.sources = {{z0 + 1, nx / 3, y * ny / 2}, {nz - 1, nx - 1, 0}};  // the second next to the layer
  for (int sh = 0; sh < 2; ++sh)
    for (int r = 0; r < 5; ++r)
      sv.receivers.push_back({z0 + (3 * r + sh) % (nz - z0), (7 * r + 2 * sh) % nx, y * ((5 * r + sh) % ny)});
  long long const cells = s.grid.cells();
  b.v.resize(static_cast<std::size_t>(cells));
  b.rho.resize(b.v.size());
  for (long long i = 0; i < cells; ++i) {
    double const z = static_cast<double>(i / (s.grid.cells() / nz)), x = static_cast<double>(i % nx);
    b.v[static_cast<std::size_t>(i)] = 1800.0 + 25.0 * z + 80.0 * std::sin(0.3 * x + 0.2 * z);
    b.rho[static_cast<std::size_t>(i)] = 2000.0 + 10.0 * z + 150.0 * std::cos(0.25 * x);
  }
  b.wavelets.assign(static_cast<std::size_t>(2 * b.nt), 0.0);
  for (int sh = 0; sh < 2; ++sh)
    for (int t = 0; t < b.nt; ++t) {
      double const a = M_PI * 25.0 * (t * s.dt - 0.04);
      b.wavelets[static_cast<std::size_t>(sh * b.nt + t)] = (1.0 - 2.0 * a * a) * std::exp(-a * a) * (sh + 1);
    }
  return b;
}

void set(fwi::Modeling<double>& m, Born const& b, Case const& c, std::vector<double> const& v) {
  // A given layer: the background model itself, held fixed whatever `v` is.
  double const* layer = c.layer_given ? b.v.data() : nullptr;
  if (c.vd)
    m.set_model({v.data(), b.rho.data()},
                c.layer_given ? std::vector<double const*>{layer, b.rho.data()} : std::vector<double const*>{});
  else m.set_velocity(v.data(), layer);
}

std::vector<double> random_values(std::size_t n, double scale, unsigned seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  std::vector<double> r(n);
  for (auto& x : r) x = scale * u(gen);
  return r;
}

double dot(std::vector<double> const& a, std::vector<double> const& b) {
  double s = 0;
  for (std::size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

std::string describe(Case const& c) {
  return std::to_string(c.dim) + "D order " + std::to_string(c.order) + (c.vd ? ", variable density" : "") +
         (c.free_surface ? ", free surface" : "") + (c.layer_given ? ", layer given" : ", layer = edges");
}

// |<born(dv), d> - <dv, vjp(d)>| / |<born(dv), d>|.
double dot_product_error(Case const& c) {
  Born const b = make(c);
  fwi::Modeling<double> m(b.setup);
  set(m, b, c, b.v);
  auto const& sv = b.setup.survey;
  std::size_t const nrec = static_cast<std::size_t>(sv.n_shots) * b.nt * sv.n_receivers;
  auto const dv = random_values(b.v.size(), 50.0, 7);
  auto const d = random_values(nrec, 1.0, 11);
  std::vector<double> rec(nrec, -1.0), img(b.v.size(), -1.0);
  m.born(b.wavelets.data(), dv.data(), rec.data());
  fwi::ModelingImages out;
  out.grad = {img.data()};
  m.vjp(b.wavelets.data(), d.data(), out);
  double const lhs = dot(rec, d), rhs = dot(dv, img);
  EXPECT_GT(std::abs(lhs), 0.0) << describe(c);
  return std::abs(lhs - rhs) / std::abs(lhs);
}

TEST(born, transpose_is_the_gradient_s_vjp_at_every_order) {
  for (int order : {2, 4, 6, 8})
    for (bool fs : {false, true})
      for (bool layer : {false, true}) {
        Case c;
        c.order = order;
        c.free_surface = fs;
        c.layer_given = layer;
        double const e = dot_product_error(c);
        EXPECT_LE(e, 1e-12) << describe(c);
        std::printf("Born dot product, %s: relative error %.2e\n", describe(c).c_str(), e);
      }
}

TEST(born, transpose_in_3d_and_with_variable_density) {
  std::vector<Case> cases;
  for (int order : {4, 8}) {
    Case c;
    c.dim = 3;
    c.order = order;
    c.free_surface = order == 8;
    cases.push_back(c);
    Case vd;
    vd.vd = true;
    vd.order = order;
    vd.free_surface = order == 4;
    cases.push_back(vd);
    vd.layer_given = true;
    cases.push_back(vd);
  }
  Case vd3;
  vd3.dim = 3;
  vd3.vd = true;
  cases.push_back(vd3);
  for (auto const& c : cases) {
    double const e = dot_product_error(c);
    EXPECT_LE(e, 1e-12) << describe(c);
    std::printf("Born dot product, %s: relative error %.2e\n", describe(c).c_str(), e);
  }
}

// RTM's plain cross-correlation sum_n u^n lambda^{n+1} from the backward pass (vjp with
// Modeling::set_cross_correlation), against the wavefields sampled at a few cells by two other
// calls: forward() with receivers there (u^{n+1} at sample n) and adjoint() with sources there
// (lambda^{n+1} at sample n), for the same residual. The cells include a corner and one next to a
// source.
double cross_correlation_error(Case const& c) {
  Born const b = make(c);
  auto const& sv = b.setup.survey;
  auto const& g = b.setup.grid;
  std::size_t const nrec = static_cast<std::size_t>(sv.n_shots) * b.nt * sv.n_receivers;
  auto const d = random_values(nrec, 1.0, 13);
  fwi::Modeling<double> m(b.setup);
  set(m, b, c, b.v);
  std::vector<double> xc(b.v.size(), -1.0), grad(b.v.size()), grad_plain(b.v.size());
  fwi::ModelingImages out;
  out.grad = {grad.data()};
  out.illum_rec = xc.data();
  m.set_cross_correlation(true);
  m.vjp(b.wavelets.data(), d.data(), out);
  m.set_cross_correlation(false);
  out.illum_rec = nullptr;
  out.grad = {grad_plain.data()};
  m.vjp(b.wavelets.data(), d.data(), out);
  EXPECT_EQ(grad, grad_plain) << describe(c) << ": the cross-correlation changed the gradient";
  int const z0 = c.free_surface ? 1 : 0, y = c.dim == 3 ? g.ny / 2 : 0;
  std::vector<core::Cell> const cells = {
      {z0, 0, 0}, {g.nz / 2, g.nx / 2, y}, {g.nz - 1, g.nx - 1, c.dim == 3 ? g.ny - 1 : 0}, {z0 + 2, g.nx / 3, y}};
  double worst = 0, peak = 0;
  for (auto const& p : cells) {
    fwi::ModelingSetup at = b.setup;  // receivers at p: u^{n+1}(p)
    at.survey.n_receivers = 1;
    at.survey.receivers.assign(static_cast<std::size_t>(sv.n_shots), p);
    fwi::Modeling<double> mu(at);
    set(mu, b, c, b.v);
    std::vector<double> u(static_cast<std::size_t>(sv.n_shots) * b.nt);
    mu.forward(b.wavelets.data(), u.data());
    fwi::ModelingSetup from = b.setup;  // a source at p: lambda^{n+1}(p)
    from.survey.n_sources = 1;
    from.survey.sources.assign(static_cast<std::size_t>(sv.n_shots), p);
    fwi::Modeling<double> ml(from);
    set(ml, b, c, b.v);
    std::vector<double> lambda(static_cast<std::size_t>(sv.n_shots) * b.nt);
    ml.adjoint(d.data(), lambda.data());
    double want = 0;
    for (int s = 0; s < sv.n_shots; ++s)
      for (int n = 1; n < b.nt; ++n)  // u^0 = 0
        want += u[static_cast<std::size_t>(s * b.nt + n - 1)] * lambda[static_cast<std::size_t>(s * b.nt + n)];
    std::size_t const i = (static_cast<std::size_t>(p.z) * (c.dim == 3 ? g.ny : 1) + p.y) * g.nx + p.x;
    worst = std::max(worst, std::abs(xc[i] - want));
    peak = std::max(peak, std::abs(want));
  }
  EXPECT_GT(peak, 0.0) << describe(c);
  return worst / peak;
}

TEST(born, rtm_cross_correlation_is_the_wavefields_product) {
  std::vector<Case> cases(4);
  cases[1].free_surface = true;
  cases[2].dim = 3;
  cases[3].vd = true;
  for (auto const& c : cases) {
    double const e = cross_correlation_error(c);
    EXPECT_LE(e, 1e-11) << describe(c);
    std::printf("RTM cross-correlation, %s: relative error %.2e\n", describe(c).c_str(), e);
  }
}

// The central difference (F(v + h dv) - F(v - h dv)) / 2h against born(dv) for h and h/2: the
// error falls by ~4 (second order), and is small. The damping profiles are held at a fixed
// velocity, so that the layer's copy of the edges is the only way the model reaches the layer.
void check_linearisation(Case c) {
  c.profile_velocity = 3000.0;
  Born const b = make(c);
  fwi::Modeling<double> m(b.setup);
  auto const& sv = b.setup.survey;
  std::size_t const nrec = static_cast<std::size_t>(sv.n_shots) * b.nt * sv.n_receivers;
  auto dv = random_values(b.v.size(), 1.0, 5);
  for (std::size_t i = 0; i < dv.size(); ++i) dv[i] = 40.0 + 20.0 * dv[i];  // one sign: a smooth part too
  set(m, b, c, b.v);
  std::vector<double> born(nrec);
  m.born(b.wavelets.data(), dv.data(), born.data());
  auto difference = [&](double h) {
    std::vector<double> vp(b.v), vm(b.v), rp(nrec), rm(nrec);
    for (std::size_t i = 0; i < b.v.size(); ++i) vp[i] += h * dv[i], vm[i] -= h * dv[i];
    set(m, b, c, vp);
    m.forward(b.wavelets.data(), rp.data());
    set(m, b, c, vm);
    m.forward(b.wavelets.data(), rm.data());
    double num = 0, den = 0;
    for (std::size_t i = 0; i < nrec; ++i) {
      double const fd = (rp[i] - rm[i]) / (2 * h);
      num += (fd - born[i]) * (fd - born[i]);
      den += born[i] * born[i];
    }
    return std::sqrt(num / den);
  };
  double const e1 = difference(0.2), e2 = difference(0.1);
  EXPECT_GT(e1 / e2, 3.5) << describe(c);
  EXPECT_LT(e1 / e2, 4.5) << describe(c);
  EXPECT_LT(e2, 1e-3) << describe(c);
  std::printf("Born vs central difference, %s: relative error %.2e (h), %.2e (h/2), rate %.2f\n", describe(c).c_str(),
              e1, e2, std::log2(e1 / e2));
}

TEST(born, is_the_derivative_of_forward_modelling) {
  for (bool layer : {false, true}) {
    Case c;
    c.order = 8;
    c.layer_given = layer;
    c.free_surface = !layer;
    check_linearisation(c);
  }
  Case vd;
  vd.vd = true;
  check_linearisation(vd);
  Case c3;
  c3.dim = 3;
  check_linearisation(c3);
}

TEST(born, bad_input_is_refused_by_name) {
  Case c;
  Born const b = make(c);
  fwi::Modeling<double> m(b.setup);
  std::size_t const nrec = static_cast<std::size_t>(2) * b.nt * 5;
  std::vector<double> rec(nrec), dv(b.v.size(), 1.0);
  auto message = [&](auto&& f) {
    try {
      f();
    } catch (Error const& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_NE(message([&] { m.born(b.wavelets.data(), dv.data(), rec.data()); }).find("no velocity set"),
            std::string::npos);
  set(m, b, c, b.v);
  dv[17] = std::nan("");
  std::string const e = message([&] { m.born(b.wavelets.data(), dv.data(), rec.data()); });
  EXPECT_NE(e.find("velocity perturbation (scatter)"), std::string::npos) << e;
  EXPECT_NE(e.find("cell 17"), std::string::npos) << e;
  EXPECT_NE(message([&] { m.born(b.wavelets.data(), nullptr, rec.data()); }).find("no velocity perturbation"),
            std::string::npos);
}

TEST(born, lsrtm_fits_the_data_and_images_better_than_rtm) {
  int const nz = 40, nx = 64, nt = 500;
  fwi::ModelingSetup s;
  s.grid = core::ModelGrid(nz, nx, 10.0);
  s.pml.width = 12;
  s.order = 8;
  s.dt = 0.001;
  s.nt = nt;
  auto& sv = s.survey;
  sv.n_shots = 4;
  sv.n_sources = 1;
  sv.n_receivers = nx;
  for (int sh = 0; sh < 4; ++sh) {
    sv.sources.push_back({1, 8 + 16 * sh, 0});
    for (int x = 0; x < nx; ++x) sv.receivers.push_back({1, x, 0});
  }
  std::vector<double> v0(static_cast<std::size_t>(nz * nx)), dv(v0.size(), 0.0);
  for (int z = 0; z < nz; ++z)
    for (int x = 0; x < nx; ++x) {
      std::size_t const i = static_cast<std::size_t>(z * nx + x);
      v0[i] = 2000.0 + 15.0 * z;
      if (z == 18 || z == 19) dv[i] = 150.0;
      if (z == 29 + x / 16) dv[i] = -120.0;  // a stepped reflector
    }
  std::vector<double> v(v0);
  for (std::size_t i = 0; i < v.size(); ++i) v[i] += dv[i];
  std::vector<double> w(static_cast<std::size_t>(4 * nt));
  for (int sh = 0; sh < 4; ++sh)
    for (int t = 0; t < nt; ++t) {
      double const a = M_PI * 20.0 * (t * s.dt - 0.06);
      w[static_cast<std::size_t>(sh * nt + t)] = (1.0 - 2.0 * a * a) * std::exp(-a * a);
    }
  fwi::Modeling<double> m(s);
  std::vector<double> data(static_cast<std::size_t>(4) * nt * nx);
  m.set_velocity(v.data());
  m.forward(w.data(), data.data());
  m.set_velocity(v0.data(), v0.data());  // the smooth background, its layer held
  auto const r = fwi::rtm(m, w.data(), data.data());
  std::vector<int> seen;
  fwi::LsrtmOptions lo;
  lo.iterations = 8;
  auto const ls = fwi::lsrtm(m, w.data(), data.data(), lo, [&](int i, double) { seen.push_back(i); });
  lo.precondition = false;
  auto const plain = fwi::lsrtm(m, w.data(), data.data(), lo);
  EXPECT_EQ(seen, (std::vector<int>{1, 2, 3, 4, 5, 6, 7, 8}));
  ASSERT_EQ(ls.misfit.size(), 8u);
  for (std::size_t i = 1; i < ls.misfit.size(); ++i) EXPECT_LT(ls.misfit[i], ls.misfit[i - 1]) << "iteration " << i;
  for (std::size_t i = 1; i < plain.misfit.size(); ++i) EXPECT_LT(plain.misfit[i], plain.misfit[i - 1]);
  EXPECT_LT(ls.misfit.back(), 0.2);
  EXPECT_LT(ls.misfit.back(), plain.misfit.back());
  double const c_rtm = fwi::correlation(r.correlation, dv), c_filtered = fwi::correlation(r.image, dv);
  double const c_ls = fwi::correlation(ls.image, dv), c_plain = fwi::correlation(plain.image, dv);
  EXPECT_GT(c_ls, c_rtm + 0.1);
  EXPECT_GT(c_ls, c_filtered + 0.1);
  EXPECT_GT(c_ls, c_plain);
  std::printf(
      "imaging two reflectors: correlation with the true perturbation: RTM %.3f (normalised and filtered "
      "%.3f), LSRTM after 8 iterations %.3f (not preconditioned %.3f); LSRTM misfit %.3f -> %.3f (not "
      "preconditioned %.3f -> %.3f)\n",
      c_rtm, c_filtered, c_ls, c_plain, ls.misfit.front(), ls.misfit.back(), plain.misfit.front(), plain.misfit.back());
  // A mask holds the rows above row 10 at zero in both images.
  std::vector<double> mask(v0.size(), 1.0);
  std::fill(mask.begin(), mask.begin() + 10 * nx, 0.0);
  fwi::RtmOptions ro;
  ro.mask = mask;
  lo.mask = mask;
  lo.iterations = 2;
  auto const rm = fwi::rtm(m, w.data(), data.data(), ro);
  auto const lm = fwi::lsrtm(m, w.data(), data.data(), lo);
  for (std::size_t i = 0; i < mask.size(); ++i) {
    ASSERT_EQ(rm.image[i] == 0, mask[i] == 0) << "cell " << i;
    ASSERT_EQ(lm.image[i] == 0, mask[i] == 0) << "cell " << i;
  }
  lo.mask.pop_back();
  EXPECT_THROW(fwi::lsrtm(m, w.data(), data.data(), lo), Error);
  lo.mask.clear();
  lo.iterations = 0;
  EXPECT_THROW(fwi::lsrtm(m, w.data(), data.data(), lo), Error);
  fwi::RtmOptions bad;
  bad.stabilization = 0;
  EXPECT_THROW(fwi::rtm(m, w.data(), data.data(), bad), Error);
}

}  // namespace
