#pragma once
/// \file optimizer.hpp
/// Optimizers of the inversion, a family over one interface (Optimizer): a model (a vector of
/// cells on the device) updated in place from the loss and its gradient, which the optimizer
/// asks for as often as it needs (iterate()), its state between iterations as host copies
/// (state() / restore(), what a checkpoint keeps) and the device bytes it holds (bytes()).
/// Adam takes one step per gradient (stochastic batches); L-BFGS (lbfgs.hpp) runs a line search
/// over full-batch gradients.
///
/// Synchronisation: every call launches on the `space` it is given and returns without a
/// fence, unless it returns a value computed on the device (then it fences `space`).

#include <ksweep/base/error.hpp>
#include <ksweep/base/launch.hpp>
#include <ksweep/base/math.hpp>
#include <ksweep/core/profiling.hpp>

#include <Kokkos_Core.hpp>

#include <cmath>
#include <cstddef>
#include <functional>
#include <string>
#include <vector>

namespace ksweep::fwi {

/// The feasible set of a model of one or two parameters stacked [parameter][cell] (vp, or vp
/// and density), each parameter a segment of `cells` values: parameter p stays in
/// [lo[p], hi[p]] (each bound only when > 0), and the first `fixed` cells of every segment (the
/// water rows) never change. `cells` = 0 makes the whole vector one parameter.
struct Box {
  static constexpr int max_parameters = 2;
  std::size_t cells = 0;  ///< values per parameter (0: one parameter, the whole vector)
  std::size_t fixed = 0;  ///< leading cells of every segment that never change
  double lo[max_parameters] = {0, 0};
  double hi[max_parameters] = {0, 0};
  /// Adam: the step size of each parameter, in its units (0: AdamParameters::lr).
  double lr[max_parameters] = {0, 0};

  /// One parameter in [lo, hi] (each bound only when > 0), its first `fixed` cells fixed.
  static Box one(double lo, double hi, std::size_t fixed) {
    Box b;
    b.fixed = fixed;
    b.lo[0] = lo;
    b.hi[0] = hi;
    return b;
  }
  /// Parameters of a vector of `n` values.
  int parameters(std::size_t n) const { return cells == 0 ? 1 : static_cast<int>(n / cells); }
  /// Checks the box against a vector of `n` values (`who` names the caller in the message).
  void check(std::size_t n, char const* who) const {
    KSWEEP_REQUIRE(cells == 0 || (n % cells == 0 && n / cells >= 1 && n / cells <= max_parameters),
                   who << ": a model of " << n << " values is not 1 or " << max_parameters << " parameters of " << cells
                       << " cells");
    KSWEEP_REQUIRE(fixed <= (cells == 0 ? n : cells),
                   who << ": " << fixed << " fixed cells in a parameter of " << (cells == 0 ? n : cells));
  }
  KOKKOS_INLINE_FUNCTION int parameter(std::size_t i) const { return cells == 0 ? 0 : static_cast<int>(i / cells); }
  KOKKOS_INLINE_FUNCTION bool is_fixed(std::size_t i) const { return (cells == 0 ? i : i % cells) < fixed; }
  /// x, the value of entry i, clamped to its parameter's bounds (in Real, as the bounds round).
  template <class Real>
  KOKKOS_INLINE_FUNCTION Real clamp(std::size_t i, Real x) const {
    int const p = cells == 0 ? 0 : static_cast<int>(i / cells);
    Real const l = Real(lo[p]), h = Real(hi[p]);
    if (l > 0) x = x < l ? l : x;
    if (h > 0) x = x > h ? h : x;
    return x;
  }
  /// Whether a step along d from x (entry i) would leave the box at a bound it sits on.
  template <class Real>
  KOKKOS_INLINE_FUNCTION bool pushes_out(std::size_t i, Real x, Real d) const {
    int const p = cells == 0 ? 0 : static_cast<int>(i / cells);
    Real const l = Real(lo[p]), h = Real(hi[p]);
    return (l > 0 && x <= l && d < 0) || (h > 0 && x >= h && d > 0);
  }
};

/// What L-BFGS's next iteration reads, as host copies (Lbfgs::state, Lbfgs::restore): a
/// checkpoint holds it, so that a resumed run takes the steps of an uninterrupted one.
template <class Real>
struct LbfgsState {
  int pairs = 0;               ///< correction pairs held
  std::vector<Real> s, y;      ///< [pair][value], oldest pair first
  std::vector<double> rho;     ///< 1 / (s . y) of each pair
  std::vector<Real> gradient;  ///< at the current model (empty before the first iteration)
  double loss = 0;             ///< at the current model
  double gamma = 0;            ///< the scaling of H0 from the newest pair (0: none yet)
  int iterations = 0, evaluations = 0;
};

/// An optimizer's state between iterations, as host copies: what the next iteration reads.
template <class Real>
struct OptimizerState {
  int steps = -1;                   ///< Adam: steps since it (re)started (its bias correction); -1: none counted
  std::vector<Real> first, second;  ///< Adam's moments m and v (empty for L-BFGS)
  LbfgsState<Real> lbfgs;           ///< L-BFGS's memory (no pairs for Adam)
};

/// What one iteration of an optimizer did.
struct OptimizerStep {
  double loss = 0;        ///< at the model the iteration ends on (Adam: the one it started from)
  double start_loss = 0;  ///< at the model the iteration started from
  int evaluations = 1;    ///< gradient evaluations
};

/// A first-order optimizer of a model of `size()` values in ExecSpace's memory.
template <class Real, class ExecSpace = Kokkos::DefaultExecutionSpace>
class Optimizer {
 public:
  using real_type = Real;
  using execution_space = ExecSpace;
  using memory_space = typename ExecSpace::memory_space;
  using vector_type = Kokkos::View<Real*, memory_space>;
  using const_vector_type = Kokkos::View<Real const*, memory_space>;
  /// The loss at `x` and its gradient into `g` (both of size()), the same on every rank.
  using Evaluate = std::function<double(vector_type const& x, vector_type const& g)>;

  virtual ~Optimizer() = default;
  /// "Adam", "L-BFGS": for messages.
  virtual char const* name() const = 0;
  /// Values of the model.
  virtual std::size_t size() const = 0;
  /// Whether every evaluation must be of the same loss (every shot: a line search compares
  /// losses), rather than of a batch drawn per iteration.
  virtual bool full_batch() const = 0;
  /// One iteration: `model` updated in place, `evaluate` called as often as the optimizer needs
  /// (`gradient`, of size(), is where an optimizer without buffers of its own has it written).
  virtual OptimizerStep iterate(ExecSpace const& space, vector_type const& model, vector_type const& gradient,
                                Evaluate const& evaluate) = 0;
  /// Non-finite values of the optimizer's own state after an iteration (0: none), and what they mean.
  virtual std::size_t non_finite(ExecSpace const& space, std::string& why) const = 0;
  /// Host copies of the state the next iteration reads (fences `space`).
  virtual OptimizerState<Real> state(ExecSpace const& space) const = 0;
  /// Continues from `s` (state() of an optimizer of the same size and parameters): the next
  /// iteration is the one the saved optimizer would have taken. Errors name what does not fit.
  virtual void restore(ExecSpace const& space, OptimizerState<Real> const& s) = 0;
  /// Bytes it holds in ExecSpace's memory.
  virtual std::size_t bytes() const = 0;
};

/// The non-finite values of `x` (NaN or infinite), counted on `space` (fenced).
template <class ExecSpace, class View>
std::size_t count_non_finite(ExecSpace const& space, View const& x) {
  std::size_t bad = 0;
  launch_reduce(
      "ksweep::fwi::count_non_finite", Kokkos::RangePolicy<ExecSpace>(space, 0, x.extent(0)),
      KOKKOS_LAMBDA(std::size_t i, std::size_t & b) {
        double const v = static_cast<double>(x(i));
        b += (v == v && v - v == 0) ? 0 : 1;  // NaN fails the first test, infinity the second
      },
      Kokkos::Sum<std::size_t>(bad));
  return bad;
}

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
/// then x is clamped to [vmin, vmax] (each bound only when > 0; a Box gives bounds per
/// parameter instead). The coefficients are computed
/// in double and rounded to Real once; the moments are formed as KokkosBlas::axpby and
/// KokkosBlas::mult form them (the same operations in the same order). The first
/// `fixed_cells` cells of the model (the water rows of a row-major model) are not changed; the
/// moments are updated in every cell.
template <class Real, class ExecSpace = Kokkos::DefaultExecutionSpace>
class Adam final : public Optimizer<Real, ExecSpace> {
 public:
  using base_type = Optimizer<Real, ExecSpace>;
  using typename base_type::const_vector_type;
  using typename base_type::Evaluate;
  using typename base_type::memory_space;
  using typename base_type::vector_type;

  /// Device vectors it holds for a model of n values: the moments m and v.
  static constexpr std::size_t device_vectors() { return 2; }

  /// Zero moments for a model of `n` cells, allocated and zeroed on `space`.
  Adam(ExecSpace const& space, std::size_t n, AdamParameters const& p, std::size_t fixed_cells = 0)
      : Adam(space, n, p, Box::one(p.vmin, p.vmax, fixed_cells)) {}

  /// Zero moments for a model of `n` values within `box` (its bounds replace vmin and vmax).
  Adam(ExecSpace const& space, std::size_t n, AdamParameters const& p, Box const& box) : m_p(p), m_box(box) {
    KSWEEP_REQUIRE(p.beta1 >= 0 && p.beta1 < 1, "ksweep::fwi::Adam: beta1 = " << p.beta1 << " must be in [0, 1)");
    KSWEEP_REQUIRE(p.beta2 >= 0 && p.beta2 < 1, "ksweep::fwi::Adam: beta2 = " << p.beta2 << " must be in [0, 1)");
    box.check(n, "ksweep::fwi::Adam");
    m_m = vector_type(Kokkos::view_alloc(space, Kokkos::WithoutInitializing, std::string("ksweep::fwi::adam_m")), n);
    m_v = vector_type(Kokkos::view_alloc(space, Kokkos::WithoutInitializing, std::string("ksweep::fwi::adam_v")), n);
    Kokkos::deep_copy(space, m_m, Real(0));
    Kokkos::deep_copy(space, m_v, Real(0));
  }

  char const* name() const override { return "Adam"; }
  std::size_t size() const override { return m_m.extent(0); }
  bool full_batch() const override { return false; }
  std::size_t bytes() const override { return device_vectors() * size() * sizeof(Real); }
  /// Steps taken since it started (restored ones included).
  int steps() const { return m_steps; }
  AdamParameters const& parameters() const { return m_p; }
  std::size_t fixed_cells() const { return m_box.fixed; }
  Box const& box() const { return m_box; }
  /// The first moment m (what a checkpoint saves).
  vector_type const& first_moment() const { return m_m; }
  /// The second moment v (what a checkpoint saves).
  vector_type const& second_moment() const { return m_v; }

  /// Continues from a saved state: `steps` steps taken, moments `m` and `v` (copied on `space`).
  void restore(ExecSpace const& space, int steps, const_vector_type const& m, const_vector_type const& v) {
    KSWEEP_REQUIRE(steps >= 0, "ksweep::fwi::Adam::restore: steps = " << steps << " must be >= 0");
    KSWEEP_REQUIRE(m.extent(0) == size() && v.extent(0) == size(), "ksweep::fwi::Adam::restore: moments of "
                                                                       << m.extent(0) << " and " << v.extent(0)
                                                                       << " cells for a model of " << size());
    Kokkos::deep_copy(space, m_m, m);
    Kokkos::deep_copy(space, m_v, v);
    m_steps = steps;
  }

  /// The state's steps and moments (host copies; their sizes checked).
  void restore(ExecSpace const& space, OptimizerState<Real> const& s) override {
    KSWEEP_REQUIRE(s.first.size() == size() && s.second.size() == size(),
                   "ksweep::fwi::Adam::restore: moments of " << s.first.size() << " and " << s.second.size()
                                                             << " values for a model of " << size());
    auto const load = [&](std::vector<Real> const& h, char const* label) {
      vector_type d(Kokkos::view_alloc(space, Kokkos::WithoutInitializing, std::string(label)), h.size());
      Kokkos::deep_copy(space, d, Kokkos::View<Real const*, Kokkos::HostSpace>(h.data(), h.size()));
      return d;
    };
    restore(space, s.steps, load(s.first, "ksweep::fwi::adam_m"), load(s.second, "ksweep::fwi::adam_v"));
    space.fence();  // before the host vectors may go
  }

  OptimizerState<Real> state(ExecSpace const& space) const override {
    OptimizerState<Real> s;
    s.steps = m_steps;
    auto const copy = [&](vector_type const& d) {
      std::vector<Real> h(d.extent(0));
      Kokkos::deep_copy(space, Kokkos::View<Real*, Kokkos::HostSpace>(h.data(), h.size()), d);
      return h;
    };
    s.first = copy(m_m);
    s.second = copy(m_v);
    space.fence();
    return s;
  }

  /// One evaluation at `model` into `gradient`, then one step.
  OptimizerStep iterate(ExecSpace const& space, vector_type const& model, vector_type const& gradient,
                        Evaluate const& evaluate) override {
    OptimizerStep r;
    r.loss = r.start_loss = evaluate(model, gradient);
    core::ScopedRegion region("ksweep::fwi::optimizer");
    step(space, gradient, model);
    return r;
  }

  /// The second moment holds the squared gradient: it overflows first, and alone (a step with an
  /// infinite second moment is 0, so the model stays finite).
  std::size_t non_finite(ExecSpace const& space, std::string& why) const override {
    why = "the optimizer's moments overflowed (the squared gradient exceeds the float range)";
    return count_non_finite(space, m_v);
  }

  /// One step: `model` updated in place from `gradient` (both of size()). Every launch is on
  /// `space`; nothing is fenced.
  void step(ExecSpace const& space, const_vector_type const& gradient, vector_type const& model) {
    std::size_t const n = size();
    KSWEEP_REQUIRE(gradient.extent(0) == n && model.extent(0) == n,
                   "ksweep::fwi::Adam::step: gradient of " << gradient.extent(0) << " and model of " << model.extent(0)
                                                           << " cells for moments of " << n);
    int const t = m_steps + 1;
    Real const a1 = Real(1 - m_p.beta1), b1 = Real(m_p.beta1);
    Real const a2 = Real(1 - m_p.beta2), b2 = Real(m_p.beta2);
    Real const c1 = Real(1 - std::pow(m_p.beta1, t)), c2 = Real(1 - std::pow(m_p.beta2, t));
    Real const eps = Real(m_p.eps);
    Real const lr0 = Real(m_box.lr[0] > 0 ? m_box.lr[0] : m_p.lr), lr1 = Real(m_box.lr[1] > 0 ? m_box.lr[1] : m_p.lr);
    // KokkosBlas leaves out the term of a zero coefficient (its sign of zero can differ).
    bool const keep_m = b1 != 0, keep_v = b2 != 0;
    Box const box = m_box;
    auto mm = m_m, vv = m_v;
    auto g = gradient;
    auto x = model;
    launch_for(
        "ksweep::fwi::adam_step", Kokkos::RangePolicy<ExecSpace>(space, 0, n), KOKKOS_LAMBDA(std::size_t i) {
          Real const gi = g(i);
          Real const mi = keep_m ? a1 * gi + b1 * mm(i) : a1 * gi;
          Real const vi = keep_v ? b2 * vv(i) + a2 * gi * gi : a2 * gi * gi;
          mm(i) = mi;
          vv(i) = vi;
          if (box.is_fixed(i)) return;
          Real const a = box.parameter(i) == 0 ? lr0 : lr1;
          x(i) = box.clamp(i, Real(x(i) - a * (mi / c1) / (math::sqrt(vi / c2) + eps)));
        });
    m_steps = t;
  }

 private:
  AdamParameters m_p;
  Box m_box;
  vector_type m_m, m_v;
  int m_steps = 0;
};

}  // namespace ksweep::fwi
