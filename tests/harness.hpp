#pragma once
// The harnesses the 2D and 3D tests share: the dot-product test of the whole operator, the
// gradient problem (observed data on a true model, gradient and loss at a starting model), and
// comparisons of host vectors. The dimension is the grid's; the tests choose grids, layers and
// acquisition.

#include <test_utils.hpp>

#include <ksweep/core/gradient.hpp>
#include <ksweep/core/wavelet.hpp>

#include <Kokkos_Core.hpp>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

namespace ksweep::test {

/// Relative error of <F x, y> = <x, F^T y> for random wavelets x (2 sources per shot) and
/// records y of `nt` samples. In fp32, y = F x, so both sides are ||F x||^2 and no cancellation
/// hides the rounding.
template <class Real, int Order, int Dim>
double dot_product_error(core::ModelGrid const& grid, core::PmlConfig const& pml, std::vector<float> const& vp,
                         core::Survey const& s, int nt) {
  using P = core::Propagator<Real, Order, TEST_EXECSPACE, Dim>;
  P prop(TEST_EXECSPACE(), grid, pml, 1e-3, s.n_shots);
  prop.set_velocity(vp.data());
  prop.set_survey(s);
  typename P::wavelet_view x("x", s.n_shots, s.n_sources, nt), xt("xt", s.n_shots, s.n_sources, nt);
  typename P::record_view y("y", s.n_shots, nt, s.n_receivers), fx("fx", s.n_shots, nt, s.n_receivers);
  fill_random(x, 1);
  fill_random(y, 2);
  if (sizeof(Real) == 4) prop.forward(x, y);
  prop.forward(x, fx);
  prop.adjoint(y, xt);
  double const lhs = dot(fx, y), rhs = dot(x, xt);
  EXPECT_GT(std::abs(lhs), 1e-8) << "the forward produced no signal at the receivers";
  return std::abs(lhs - rhs) / std::max(std::abs(lhs), std::abs(rhs));
}

/// Observed data of `survey` on `v_true` (one Ricker source per shot, peak `freq`, delay
/// 1.2 / freq), and the gradient and the loss 0.5 ||syn - obs||^2 at `v0` (the layer held at
/// v0's velocity).
template <class Real, int Order, int Dim>
struct GradientProblem {
  using P = core::Propagator<Real, Order, TEST_EXECSPACE, Dim>;
  using E = core::GradientEngine<Real, Order, TEST_EXECSPACE, Dim>;
  int nt, n_shots, n_rec;
  P prop;
  typename P::wavelet_view w;
  typename P::record_view observed, synthetic;
  std::vector<float> v_true, v0;
  /// The layer's chain rule: the gradient takes it (GradientEngine::set_layer_chain) and the
  /// loss's layer follows the model (update_layer); set by follow_layer().
  bool chain = false;

  GradientProblem(core::ModelGrid const& grid, core::PmlConfig const& pml, double dt, core::Survey const& s,
                  std::vector<float> truth, std::vector<float> start, int nt_, double freq)
      : nt(nt_),
        n_shots(s.n_shots),
        n_rec(s.n_receivers),
        prop(TEST_EXECSPACE(), grid, pml, dt, s.n_shots),
        v_true(std::move(truth)),
        v0(std::move(start)) {
    prop.set_survey(s);
    w = typename P::wavelet_view("w", n_shots, 1, nt);
    auto wh = Kokkos::create_mirror_view(Kokkos::HostSpace(), w);
    auto r = core::ricker(freq, 1.2 / freq, dt, nt);
    for (int sh = 0; sh < n_shots; ++sh)
      for (int t = 0; t < nt; ++t) wh(sh, 0, t) = static_cast<Real>(r[t]);
    Kokkos::deep_copy(w, wh);
    observed = typename P::record_view("obs", n_shots, nt, n_rec);
    synthetic = typename P::record_view("syn", n_shots, nt, n_rec);
    prop.set_velocity(v_true.data());
    prop.forward(w, observed);
    prop.set_velocity(v0.data());
  }
  /// The layer follows the model from now on (its copy of the edge cells), with damping profiles
  /// of the fixed velocity `profile` (m/s), so that the loss is a smooth function of every cell.
  void follow_layer(double profile) {
    chain = true;
    prop.set_profile_velocity(profile);
    prop.set_velocity(v0.data());
  }
  /// Gradient with respect to the model velocity, on the host, and the loss.
  std::vector<double> gradient(storage::StorageConfig const& cfg, double* loss = nullptr) {
    E engine(prop, cfg);
    engine.set_layer_chain(chain);
    typename E::images_type img(prop.layout().model_rows(), prop.layout().nx);
    double const l = engine.loss_and_gradient(w, observed, 0.5, img, synthetic);
    if (loss) *loss = l;
    auto g = to_host(img.grad);
    return std::vector<double>(g.data(), g.data() + g.span());
  }
  double loss_at(std::vector<float> const& v) {
    prop.set_velocity(v.data(), /*update_layer=*/chain);
    prop.forward(w, synthetic);
    double const d = dot(synthetic, synthetic) - 2 * dot(synthetic, observed) + dot(observed, observed);
    prop.set_velocity(v0.data(), chain);
    return 0.5 * d;
  }
};

/// A random direction of multiples of 1/8 in [-1, 1] for finite differences of a loss over the
/// model: v0 + h d stays exact in float for h = 2^-k (v ~ 2000 m/s has an ulp of 2^-13 or
/// 2^-12), so the differences see exactly the intended perturbation.
struct Direction {
  std::vector<double> d;
  Direction(std::mt19937& gen, std::size_t n) : d(n) {
    std::uniform_int_distribution<int> dist(-8, 8);
    for (auto& x : d) x = dist(gen) / 8.0;
  }
  /// <g, d>.
  double dot(std::vector<double> const& g) const {
    double s = 0;
    for (std::size_t i = 0; i < d.size(); ++i) s += g[i] * d[i];
    return s;
  }
  /// v0 + h d in float.
  std::vector<float> step(std::vector<float> const& v0, double h) const {
    std::vector<float> v(v0);
    for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(v0[i] + h * d[i]);
    return v;
  }
  /// The fourth-order central difference of `loss` (a function of a float model) along d.
  template <class Loss>
  double central(Loss&& loss, std::vector<float> const& v0, double h) const {
    return (8 * (loss(step(v0, h)) - loss(step(v0, -h))) - (loss(step(v0, 2 * h)) - loss(step(v0, -2 * h)))) / (12 * h);
  }
};

/// The storage configuration of a test (no disk folder, page-locked host memory).
inline storage::StorageConfig storage_cfg(std::string strategy, std::string location = "device",
                                          std::string dtype = "fp32", int interval = 7) {
  return storage::make_storage_config(strategy, location, dtype, interval, "", true);
}

inline double cosine(std::vector<double> const& a, std::vector<double> const& b) {
  double ab = 0, aa = 0, bb = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    ab += a[i] * b[i];
    aa += a[i] * a[i];
    bb += b[i] * b[i];
  }
  return ab / std::sqrt(aa * bb);
}

/// Values whose bits differ (-1 for different sizes).
inline long differing(std::vector<double> const& a, std::vector<double> const& b) {
  if (a.size() != b.size()) return -1;
  long n = 0;
  for (std::size_t i = 0; i < a.size(); ++i) n += std::memcmp(&a[i], &b[i], sizeof(double)) != 0;
  return n;
}

}  // namespace ksweep::test
