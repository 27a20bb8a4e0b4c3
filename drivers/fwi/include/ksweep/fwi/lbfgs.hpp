#pragma once
/// \file lbfgs.hpp
/// L-BFGS with a projected line search satisfying the Wolfe conditions, for full-batch
/// inversion: every gradient is of the whole survey, so the loss is one deterministic function
/// of the model and a quasi-Newton memory of its curvature pays off.
///
/// The vector operations are Kokkos Kernels BLAS-1 calls (axpby, update, scal, nrminf) on the
/// device. The dot products are ordered_dot: blocks of consecutive cells summed in parallel,
/// each in index order, and the blocks added in order, so that every decision of the line
/// search (and hence the model) is the same bits whatever the number of threads; the sum of
/// KokkosBlas::dot depends on how its reduction is split over threads.
///
/// Synchronisation: step() calls the evaluator and reads reductions on the host, so it fences
/// `space` and returns with every launch done. The Kokkos Kernels calls run on the default
/// instance of ExecSpace (Kokkos Kernels 3.4 takes no instance): give step() that instance (the
/// inversion does), or the order between them and the other launches is not kept.

#include <ksweep/base/error.hpp>
#include <ksweep/base/launch.hpp>
#include <ksweep/fwi/optimizer.hpp>

#include <KokkosBlas1_axpby.hpp>
#include <KokkosBlas1_nrminf.hpp>
#include <KokkosBlas1_scal.hpp>
#include <KokkosBlas1_update.hpp>
#include <Kokkos_Core.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <string>
#include <vector>

namespace ksweep::fwi {

/// sum_i x(i) y(i) in double, in an order that depends on the size alone: blocks of
/// `block` consecutive cells summed in index order (in parallel over blocks), then the block
/// sums in block order on the host. Fences `space`.
template <class ExecSpace, class X, class Y>
double ordered_dot(ExecSpace const& space, X const& x, Y const& y, std::size_t block = 4096) {
  std::size_t const n = x.extent(0), blocks = (n + block - 1) / block;
  if (blocks == 0) return 0;
  Kokkos::View<double*, typename ExecSpace::memory_space> partial(
      Kokkos::view_alloc(space, Kokkos::WithoutInitializing, std::string("ksweep::fwi::dot_blocks")), blocks);
  launch_for(
      "ksweep::fwi::ordered_dot", Kokkos::RangePolicy<ExecSpace>(space, 0, blocks), KOKKOS_LAMBDA(std::size_t b) {
        std::size_t const end = (b + 1) * block < n ? (b + 1) * block : n;
        double acc = 0;
        for (std::size_t i = b * block; i < end; ++i) acc += static_cast<double>(x(i)) * static_cast<double>(y(i));
        partial(b) = acc;
      });
  auto const h = Kokkos::create_mirror_view(Kokkos::HostSpace(), partial);
  Kokkos::deep_copy(space, h, partial);
  space.fence();
  double sum = 0;
  for (std::size_t b = 0; b < blocks; ++b) sum += h(b);
  return sum;
}

namespace impl {

/// d = 0 in the cells at a bound of `box` that d would push out.
template <class ExecSpace, class View>
void drop_outward(ExecSpace const& space, View const& d, View const& x, Box const& box) {
  launch_for(
      "ksweep::fwi::lbfgs_active_set", Kokkos::RangePolicy<ExecSpace>(space, 0, d.extent(0)),
      KOKKOS_LAMBDA(std::size_t i) {
        if (box.pushes_out(i, x(i), d(i))) d(i) = 0;
      });
}

/// x clamped into `box`, and x = x0 in its fixed cells.
template <class ExecSpace, class View>
void project(ExecSpace const& space, View const& x, View const& x0, Box const& box) {
  launch_for(
      "ksweep::fwi::lbfgs_project", Kokkos::RangePolicy<ExecSpace>(space, 0, x.extent(0)),
      KOKKOS_LAMBDA(std::size_t i) { x(i) = box.is_fixed(i) ? x0(i) : box.clamp(i, x(i)); });
}

}  // namespace impl

/// Parameters of L-BFGS (Nocedal and Wright 2006, algorithms 7.4 and 7.5) with a bracketing
/// line search for the weak Wolfe conditions (Lewis and Overton 2013): a step that decreases the
/// loss too little is shortened to the minimum of the quadratic through f(0), f'(0) and f(a)
/// (kept within [a/10, a/2]) until a longer step has been accepted by the sufficient decrease,
/// then bisected; a step whose slope is still too steep is doubled until a bracket is found.
struct LbfgsParameters {
  int memory = 5;            ///< correction pairs kept
  double c1 = 1e-4;          ///< sufficient decrease (Armijo), in (0, c2)
  double c2 = 0.9;           ///< curvature, in (c1, 1)
  int max_evaluations = 12;  ///< gradient evaluations per line search
  double first_step = 1.0;   ///< the first iteration's largest change of a cell (model units)
  double vmin = 0;           ///< lower bound of the model (0: none)
  double vmax = 0;           ///< upper bound of the model (0: none)
};

/// What one L-BFGS iteration did.
struct LbfgsStep {
  double loss = 0;         ///< at the accepted model (the first model's loss if none was accepted)
  double start_loss = 0;   ///< at the model the iteration started from
  int evaluations = 0;     ///< gradient evaluations of the iteration (the first one's included)
  bool accepted = false;   ///< a point satisfying the Wolfe conditions was found
  bool restarted = false;  ///< the memory was cleared (no descent direction, or no acceptable point)
  double step = 0;         ///< the accepted step length along the direction
};

/// L-BFGS over a model of `n` cells of which the first `fixed_cells` never change, with trial
/// points projected onto [vmin, vmax] (each bound only when > 0). The evaluator is called as
/// `double f = evaluate(x, g)`: the loss at `x` and its gradient into `g` (both of n cells),
/// the same on every rank. The sufficient decrease is measured along the projected step
/// (g0 . (x - x0)), so that clamped cells count as they moved.
template <class Real, class ExecSpace = Kokkos::DefaultExecutionSpace>
class Lbfgs final : public Optimizer<Real, ExecSpace> {
 public:
  using base_type = Optimizer<Real, ExecSpace>;
  using typename base_type::Evaluate;
  using typename base_type::memory_space;
  using typename base_type::vector_type;

  /// Device vectors it holds for a model of n values: `memory` pairs (s, y) and five of its own
  /// (gradient, direction, start, trial gradient, step).
  static constexpr std::size_t device_vectors(int memory) { return 2 * static_cast<std::size_t>(memory) + 5; }

  Lbfgs(ExecSpace const& space, std::size_t n, LbfgsParameters const& p, std::size_t fixed_cells = 0)
      : Lbfgs(space, n, p, Box::one(p.vmin, p.vmax, fixed_cells)) {}

  /// L-BFGS over a model of `n` values within `box` (its bounds replace vmin and vmax).
  Lbfgs(ExecSpace const& space, std::size_t n, LbfgsParameters const& p, Box const& box) : m_p(p), m_n(n), m_box(box) {
    KSWEEP_REQUIRE(p.memory >= 1, "ksweep::fwi::Lbfgs: memory = " << p.memory << " must be >= 1");
    KSWEEP_REQUIRE(
        p.c1 > 0 && p.c1 < p.c2 && p.c2 < 1,
        "ksweep::fwi::Lbfgs: the Wolfe constants need 0 < c1 < c2 < 1, not c1 = " << p.c1 << ", c2 = " << p.c2);
    KSWEEP_REQUIRE(p.max_evaluations >= 1,
                   "ksweep::fwi::Lbfgs: max_evaluations = " << p.max_evaluations << " must be >= 1");
    KSWEEP_REQUIRE(p.first_step > 0, "ksweep::fwi::Lbfgs: first_step = " << p.first_step << " must be > 0");
    box.check(n, "ksweep::fwi::Lbfgs");
    auto alloc = [&](char const* label) {
      return vector_type(Kokkos::view_alloc(space, std::string("ksweep::fwi::lbfgs_") + label), n);
    };
    for (int i = 0; i < p.memory; ++i) {
      m_s.push_back(alloc("s"));
      m_y.push_back(alloc("y"));
    }
    m_rho.assign(static_cast<std::size_t>(p.memory), 0.0);
    m_g = alloc("g");
    m_d = alloc("d");
    m_x0 = alloc("x0");
    m_gt = alloc("g_trial");
    m_step = alloc("step");
  }

  char const* name() const override { return "L-BFGS"; }
  std::size_t size() const override { return m_n; }
  bool full_batch() const override { return true; }
  std::size_t bytes() const override { return device_vectors(m_p.memory) * m_n * sizeof(Real); }
  int iterations() const { return m_iterations; }
  /// Gradient evaluations so far.
  int evaluations() const { return m_evaluations; }
  /// Correction pairs held.
  int pairs() const { return m_count; }
  LbfgsParameters const& parameters() const { return m_p; }
  /// The gradient at the current model (valid after the first step).
  vector_type const& gradient() const { return m_g; }

  OptimizerState<Real> state(ExecSpace const& space) const override {
    OptimizerState<Real> s;
    s.lbfgs = memory(space);
    return s;
  }
  void restore(ExecSpace const& space, OptimizerState<Real> const& s) override { restore(space, s.lbfgs); }
  OptimizerStep iterate(ExecSpace const& space, vector_type const& model, vector_type const&,
                        Evaluate const& evaluate) override {
    auto const r = step(space, model, evaluate);
    return {r.loss, r.start_loss, r.evaluations};
  }
  /// Its state is checked as it is computed (a non-finite loss rejects a trial point).
  std::size_t non_finite(ExecSpace const&, std::string&) const override { return 0; }

  /// Host copies of what the next iteration reads (fences `space`).
  LbfgsState<Real> memory(ExecSpace const& space) const {
    LbfgsState<Real> st;
    st.pairs = m_count;
    auto append = [&](vector_type const& v, std::vector<Real>& out) {
      auto const h = Kokkos::create_mirror_view(Kokkos::HostSpace(), v);
      Kokkos::deep_copy(space, h, v);
      space.fence();
      out.insert(out.end(), h.data(), h.data() + m_n);
    };
    for (int k = 0; k < m_count; ++k) {
      int const i = slot(k);
      append(m_s[i], st.s);
      append(m_y[i], st.y);
      st.rho.push_back(m_rho[static_cast<std::size_t>(i)]);
    }
    if (m_have_gradient) append(m_g, st.gradient);
    st.loss = m_f;
    st.gamma = m_gamma;
    st.iterations = m_iterations;
    st.evaluations = m_evaluations;
    return st;
  }

  /// Continues from `st` (Lbfgs::state of an optimizer of the same size and memory): the next
  /// step() is the one the saved optimizer would have taken. Errors name what does not fit.
  void restore(ExecSpace const& space, LbfgsState<Real> const& st) {
    char const* const where = "ksweep::fwi::Lbfgs::restore";
    KSWEEP_REQUIRE(st.pairs >= 0 && st.pairs <= m_p.memory,
                   where << ": " << st.pairs << " correction pairs for a memory of " << m_p.memory);
    std::size_t const values = static_cast<std::size_t>(st.pairs) * m_n;
    KSWEEP_REQUIRE(
        st.s.size() == values && st.y.size() == values && st.rho.size() == static_cast<std::size_t>(st.pairs),
        where << ": " << st.pairs << " pairs of " << m_n << " values need " << values << " values of s and y and "
              << st.pairs << " of rho, not " << st.s.size() << ", " << st.y.size() << " and " << st.rho.size());
    KSWEEP_REQUIRE(st.gradient.empty() || st.gradient.size() == m_n,
                   where << ": a gradient of " << st.gradient.size() << " values for " << m_n);
    KSWEEP_REQUIRE(st.gradient.size() == m_n || st.pairs == 0,
                   where << ": " << st.pairs << " pairs without the gradient they were made with");
    for (double r : st.rho)
      KSWEEP_REQUIRE(std::isfinite(r) && r > 0,
                     where << ": a pair with 1 / (s . y) = " << r << " (must be finite, > 0)");
    KSWEEP_REQUIRE(
        std::isfinite(st.loss) && std::isfinite(st.gamma) && st.gamma >= 0,
        where << ": the loss " << st.loss << " and the scaling " << st.gamma << " must be finite (scaling >= 0)");
    KSWEEP_REQUIRE(st.iterations >= 0 && st.evaluations >= 0,
                   where << ": counters " << st.iterations << " and " << st.evaluations << " must be >= 0");
    auto load = [&](Real const* from, vector_type const& to) {
      Kokkos::View<Real const*, Kokkos::HostSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>> const h(from, m_n);
      Kokkos::deep_copy(space, to, h);
      space.fence();  // the host array may go before a later fence
    };
    clear();
    for (int k = 0; k < st.pairs; ++k) {
      load(st.s.data() + static_cast<std::size_t>(k) * m_n, m_s[k]);
      load(st.y.data() + static_cast<std::size_t>(k) * m_n, m_y[k]);
      m_rho[static_cast<std::size_t>(k)] = st.rho[static_cast<std::size_t>(k)];
    }
    m_count = st.pairs;
    m_have_gradient = !st.gradient.empty();
    if (m_have_gradient) load(st.gradient.data(), m_g);
    m_f = st.loss;
    m_gamma = st.gamma;
    m_iterations = st.iterations;
    m_evaluations = st.evaluations;
  }

  /// One iteration from the model `x` (updated in place): the direction from the two-loop
  /// recursion, then the line search. The first call evaluates the gradient at `x` first.
  template <class Evaluate>
  LbfgsStep step(ExecSpace const& space, vector_type const& x, Evaluate&& evaluate) {
    KSWEEP_REQUIRE(x.extent(0) == m_n,
                   "ksweep::fwi::Lbfgs::step: a model of " << x.extent(0) << " cells for a memory of " << m_n);
    LbfgsStep r;
    if (!m_have_gradient) {
      m_f = evaluate(x, m_g);
      fix(space, m_g);
      ++r.evaluations;
      m_have_gradient = true;
    }
    double gd = direction(space, x);
    if (!(gd < 0)) {  // not a descent direction: start again from the scaled gradient
      clear();
      r.restarted = true;
      gd = direction(space, x);
    }
    Kokkos::deep_copy(space, m_x0, x);
    double const f0 = m_f;
    r.start_loss = f0;
    double lo = 0, hi = std::numeric_limits<double>::infinity(), alpha = 1;
    for (int k = 0; k < m_p.max_evaluations && !r.accepted; ++k) {
      trial(space, x, alpha);
      double const f = evaluate(x, m_gt);
      fix(space, m_gt);
      ++r.evaluations;
      KokkosBlas::update(Real(1), x, Real(-1), m_x0, Real(0), m_step);
      double const dec = ordered_dot(space, m_g, m_step);  // g0 . (x - x0)
      if (!(f <= f0 + m_p.c1 * dec) || !std::isfinite(f)) {
        hi = alpha;
        if (lo == 0 && std::isfinite(f)) {  // the minimum of the quadratic through f0, gd and f
          double const curv = (f - f0 - gd * alpha) / (alpha * alpha);
          double const q = curv > 0 ? -gd / (2 * curv) : 0.5 * alpha;
          alpha = std::clamp(q, 0.1 * alpha, 0.5 * alpha);
          continue;
        }
      } else if (ordered_dot(space, m_gt, m_d) < m_p.c2 * gd) {
        lo = alpha;
      } else {
        r.accepted = true;
        r.loss = f;
        r.step = alpha;
        break;
      }
      alpha = std::isfinite(hi) ? 0.5 * (lo + hi) : 2 * alpha;
    }
    if (r.accepted) {
      remember(space);
      m_f = r.loss;
    } else {  // no acceptable point: the model stays, the memory goes
      Kokkos::deep_copy(space, x, m_x0);
      clear();
      r.restarted = true;
      r.loss = f0;
    }
    space.fence();
    m_evaluations += r.evaluations;
    ++m_iterations;
    return r;
  }

 private:
  // The fixed cells take no part: their gradient is zeroed.
  void fix(ExecSpace const& space, vector_type const& g) const {
    if (m_box.fixed == 0) return;
    std::size_t const seg = m_box.cells == 0 ? m_n : m_box.cells;
    for (std::size_t first = 0; first < m_n; first += seg)
      Kokkos::deep_copy(space, Kokkos::subview(g, Kokkos::make_pair(first, first + m_box.fixed)), Real(0));
  }

  // d = -H g by the two-loop recursion; H0 = (s.y / y.y) I from the newest pair, or without
  // pairs the scaling that moves the largest cell by first_step; then the cells at a bound that
  // d would push out are left out (d = 0 there: the projected direction). Returns g . d.
  double direction(ExecSpace const& space, vector_type const& x) {
    Kokkos::deep_copy(space, m_d, m_g);  // q
    std::vector<double> alpha(static_cast<std::size_t>(m_count));
    for (int j = 0; j < m_count; ++j) {  // newest to oldest
      int const i = slot(m_count - 1 - j);
      alpha[static_cast<std::size_t>(j)] = m_rho[static_cast<std::size_t>(i)] * ordered_dot(space, m_s[i], m_d);
      KokkosBlas::axpby(static_cast<Real>(-alpha[static_cast<std::size_t>(j)]), m_y[i], Real(1), m_d);
    }
    double gamma = m_gamma;  // a cleared memory keeps the scaling of its newest pair
    if (m_count > 0) {
      int const i = slot(m_count - 1);
      gamma = m_gamma = 1.0 / (m_rho[static_cast<std::size_t>(i)] * ordered_dot(space, m_y[i], m_y[i]));
    } else if (!(gamma > 0)) {
      double const gmax = static_cast<double>(KokkosBlas::nrminf(m_g));
      gamma = gmax > 0 ? m_p.first_step / gmax : 0;
    }
    KokkosBlas::scal(m_d, static_cast<Real>(gamma), m_d);
    for (int j = m_count - 1; j >= 0; --j) {  // oldest to newest
      int const i = slot(m_count - 1 - j);
      double const beta = m_rho[static_cast<std::size_t>(i)] * ordered_dot(space, m_y[i], m_d);
      KokkosBlas::axpby(static_cast<Real>(alpha[static_cast<std::size_t>(j)] - beta), m_s[i], Real(1), m_d);
    }
    KokkosBlas::scal(m_d, Real(-1), m_d);
    impl::drop_outward(space, m_d, x, m_box);
    return ordered_dot(space, m_g, m_d);
  }

  // x = clamp(x0 + alpha d) outside the fixed cells.
  void trial(ExecSpace const& space, vector_type const& x, double alpha) {
    KokkosBlas::update(Real(1), m_x0, static_cast<Real>(alpha), m_d, Real(0), x);
    impl::project(space, x, m_x0, m_box);
  }

  // The pair of the accepted step: s = x - x0 (in m_step), y = g_trial - g, kept when
  // s . y > 0 (the curvature condition guarantees it without bounds; a clamped step may break
  // it). With the memory full the pair replaces the oldest.
  void remember(ExecSpace const& space) {
    bool const full = m_count == m_p.memory;
    int const next = slot(full ? 0 : m_count);
    Kokkos::deep_copy(space, m_s[next], m_step);
    KokkosBlas::update(Real(1), m_gt, Real(-1), m_g, Real(0), m_y[next]);
    Kokkos::deep_copy(space, m_g, m_gt);
    double const sy = ordered_dot(space, m_s[next], m_y[next]);
    if (full) {  // the oldest pair's slot now holds the new one (or nothing)
      m_head = (m_head + 1) % m_p.memory;
      --m_count;
    }
    if (!(sy > 0) || !std::isfinite(sy)) return;
    m_rho[static_cast<std::size_t>(next)] = 1.0 / sy;
    ++m_count;
  }

  void clear() {
    m_count = 0;
    m_head = 0;
  }

  // The storage slot of the k-th pair held, oldest first.
  int slot(int k) const { return (m_head + k) % m_p.memory; }

  LbfgsParameters m_p;
  std::size_t m_n;
  Box m_box;
  std::vector<vector_type> m_s, m_y;
  std::vector<double> m_rho;
  vector_type m_g, m_d, m_x0, m_gt, m_step;
  double m_f = 0;
  double m_gamma = 0;  // the scaling of H0 from the newest pair (0: none yet)
  bool m_have_gradient = false;
  int m_count = 0, m_head = 0, m_iterations = 0, m_evaluations = 0;
};

}  // namespace ksweep::fwi
