#pragma once
/// \file optimizer.hpp
/// Optimizers of the inversion, a family over one interface: a model (a vector of cells on the
/// device) updated in place from the gradient of the loss. Adam takes one step per gradient
/// (stochastic batches); L-BFGS (lbfgs.hpp) runs a line search over full-batch gradients.
///
/// Synchronisation: every call launches on the `space` it is given and returns without a
/// fence, unless it returns a value computed on the device (then it fences `space`).

#include <ksweep/base/error.hpp>
#include <ksweep/base/launch.hpp>
#include <ksweep/base/math.hpp>

#include <Kokkos_Core.hpp>

#include <cmath>
#include <cstddef>
#include <string>

namespace ksweep::fwi {

/// A first-order optimizer of a model of `size()` cells in ExecSpace's memory.
template <class Real, class ExecSpace = Kokkos::DefaultExecutionSpace>
class Optimizer {
 public:
  using real_type = Real;
  using execution_space = ExecSpace;
  using memory_space = typename ExecSpace::memory_space;
  using vector_type = Kokkos::View<Real*, memory_space>;
  using const_vector_type = Kokkos::View<Real const*, memory_space>;

  virtual ~Optimizer() = default;
  /// Cells of the model.
  virtual std::size_t size() const = 0;
  /// Steps taken (restored ones included).
  virtual int steps() const = 0;
  /// One step: `model` updated in place from `gradient` (both of size()). Every launch is on
  /// `space`; nothing is fenced.
  virtual void step(ExecSpace const& space, const_vector_type const& gradient, vector_type const& model) = 0;
};

/// Parameters of Adam (Kingma and Ba 2015, algorithm 1).
struct AdamParameters {
  double lr = 1e-3;      ///< step size alpha (model units)
  double beta1 = 0.9;    ///< decay of the first moment, in [0, 1)
  double beta2 = 0.999;  ///< decay of the second moment, in [0, 1)
  double eps = 1e-8;     ///< added to the square root of the second moment
  double vmin = 0;       ///< lower bound of the model after a step (0: none)
  double vmax = 0;       ///< upper bound of the model after a step (0: none)
};

/// Adam with bias correction, bounds and a fixed part of the model. Step t (1-based) updates,
/// cell by cell, in Real:
///
///     m = (1 - beta1) g + beta1 m,   v = beta2 v + (1 - beta2) g g,
///     x = x - lr (m / c1) / (sqrt(v / c2) + eps),   c1 = 1 - beta1^t, c2 = 1 - beta2^t,
///
/// then x is clamped to [vmin, vmax] (each bound only when > 0). The coefficients are computed
/// in double and rounded to Real once; the moments are formed as KokkosBlas::axpby and
/// KokkosBlas::mult form them (the same operations in the same order). The first
/// `fixed_cells` cells of the model (the water rows of a row-major model) are not changed; the
/// moments are updated in every cell.
template <class Real, class ExecSpace = Kokkos::DefaultExecutionSpace>
class Adam final : public Optimizer<Real, ExecSpace> {
 public:
  using base_type = Optimizer<Real, ExecSpace>;
  using typename base_type::const_vector_type;
  using typename base_type::memory_space;
  using typename base_type::vector_type;

  /// Zero moments for a model of `n` cells, allocated and zeroed on `space`.
  Adam(ExecSpace const& space, std::size_t n, AdamParameters const& p, std::size_t fixed_cells = 0)
      : m_p(p), m_fixed(fixed_cells) {
    KSWEEP_REQUIRE(p.beta1 >= 0 && p.beta1 < 1, "ksweep::core::Adam: beta1 = " << p.beta1 << " must be in [0, 1)");
    KSWEEP_REQUIRE(p.beta2 >= 0 && p.beta2 < 1, "ksweep::core::Adam: beta2 = " << p.beta2 << " must be in [0, 1)");
    KSWEEP_REQUIRE(fixed_cells <= n, "ksweep::core::Adam: " << fixed_cells << " fixed cells in a model of " << n);
    m_m = vector_type(Kokkos::view_alloc(space, Kokkos::WithoutInitializing, std::string("ksweep::core::adam_m")), n);
    m_v = vector_type(Kokkos::view_alloc(space, Kokkos::WithoutInitializing, std::string("ksweep::core::adam_v")), n);
    Kokkos::deep_copy(space, m_m, Real(0));
    Kokkos::deep_copy(space, m_v, Real(0));
  }

  std::size_t size() const override { return m_m.extent(0); }
  int steps() const override { return m_steps; }
  AdamParameters const& parameters() const { return m_p; }
  std::size_t fixed_cells() const { return m_fixed; }
  /// The first moment m (what a checkpoint saves).
  vector_type const& first_moment() const { return m_m; }
  /// The second moment v (what a checkpoint saves).
  vector_type const& second_moment() const { return m_v; }

  /// Continues from a saved state: `steps` steps taken, moments `m` and `v` (copied on `space`).
  void restore(ExecSpace const& space, int steps, const_vector_type const& m, const_vector_type const& v) {
    KSWEEP_REQUIRE(steps >= 0, "ksweep::core::Adam::restore: steps = " << steps << " must be >= 0");
    KSWEEP_REQUIRE(m.extent(0) == size() && v.extent(0) == size(), "ksweep::core::Adam::restore: moments of "
                                                                       << m.extent(0) << " and " << v.extent(0)
                                                                       << " cells for a model of " << size());
    Kokkos::deep_copy(space, m_m, m);
    Kokkos::deep_copy(space, m_v, v);
    m_steps = steps;
  }

  void step(ExecSpace const& space, const_vector_type const& gradient, vector_type const& model) override {
    std::size_t const n = size();
    KSWEEP_REQUIRE(gradient.extent(0) == n && model.extent(0) == n,
                   "ksweep::core::Adam::step: gradient of " << gradient.extent(0) << " and model of " << model.extent(0)
                                                            << " cells for moments of " << n);
    int const t = m_steps + 1;
    Real const a1 = Real(1 - m_p.beta1), b1 = Real(m_p.beta1);
    Real const a2 = Real(1 - m_p.beta2), b2 = Real(m_p.beta2);
    Real const c1 = Real(1 - std::pow(m_p.beta1, t)), c2 = Real(1 - std::pow(m_p.beta2, t));
    Real const lr = Real(m_p.lr), eps = Real(m_p.eps), lo = Real(m_p.vmin), hi = Real(m_p.vmax);
    // KokkosBlas leaves out the term of a zero coefficient (its sign of zero can differ).
    bool const keep_m = b1 != 0, keep_v = b2 != 0;
    std::size_t const fixed = m_fixed;
    auto mm = m_m, vv = m_v;
    auto g = gradient;
    auto x = model;
    launch_for(
        "ksweep::core::adam_step", Kokkos::RangePolicy<ExecSpace>(space, 0, n), KOKKOS_LAMBDA(std::size_t i) {
          Real const gi = g(i);
          Real const mi = keep_m ? a1 * gi + b1 * mm(i) : a1 * gi;
          Real const vi = keep_v ? b2 * vv(i) + a2 * gi * gi : a2 * gi * gi;
          mm(i) = mi;
          vv(i) = vi;
          if (i < fixed) return;
          Real xi = x(i) - lr * (mi / c1) / (math::sqrt(vi / c2) + eps);
          if (lo > 0) xi = xi < lo ? lo : xi;
          if (hi > 0) xi = xi > hi ? hi : xi;
          x(i) = xi;
        });
    m_steps = t;
  }

 private:
  AdamParameters m_p;
  std::size_t m_fixed = 0;
  vector_type m_m, m_v;
  int m_steps = 0;
};

}  // namespace ksweep::fwi
