#pragma once
// Helpers of the physics and cross-backend tests: one-call forward modelling with host vectors,
// trace norms, and the analytic 2D Green's function response.

#include <test_utils.hpp>

#include <ksweep/core/propagator.hpp>
#include <ksweep/core/wavelet.hpp>

#include <Kokkos_Core.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <vector>

namespace ksweep::test {

/// Uploads host wavelets (flat [shot][source][nt]) into a propagator's wavelet view.
template <class P>
typename P::wavelet_view make_wavelets(std::vector<double> const& w, int n_shots, int n_sources, int nt) {
  typename P::wavelet_view v("wavelets", n_shots, n_sources, nt);
  auto h = Kokkos::create_mirror_view(Kokkos::HostSpace(), v);
  for (std::size_t i = 0; i < h.span(); ++i) h.data()[i] = static_cast<typename P::real_type>(w[i]);
  Kokkos::deep_copy(v, h);
  return v;
}

/// Forward modelling of `survey` with an existing propagator (velocity already set); wavelets
/// flat [shot][source][nt]; returns the records flat [shot][nt][receiver] (converted exactly
/// to double, so bitwise comparisons of fp32 runs stay meaningful).
template <class P>
std::vector<double> forward_records(P& prop, core::Survey const& survey, std::vector<double> const& wavelets, int nt) {
  prop.set_survey(survey);
  auto w = make_wavelets<P>(wavelets, survey.n_shots, survey.n_sources, nt);
  typename P::record_view r("records", survey.n_shots, nt, survey.n_receivers);
  prop.forward(w, r);
  auto h = to_host(r);
  return std::vector<double>(h.data(), h.data() + h.span());
}

/// The same with a fresh propagator of capacity survey.n_shots.
template <class Real, int Order, class ExecSpace>
std::vector<double> forward_records(core::ModelGrid const& grid, core::PmlConfig const& pml, double dt,
                                    std::vector<float> const& vp, core::Survey const& survey,
                                    std::vector<double> const& wavelets, int nt) {
  core::Propagator<Real, Order, ExecSpace> prop(ExecSpace(), grid, pml, dt, survey.n_shots);
  prop.set_velocity(vp.data());
  return forward_records(prop, survey, wavelets, nt);
}

/// A survey of one shot with the given sources and receivers.
inline core::Survey one_shot(std::vector<core::Cell> const& sources, std::vector<core::Cell> const& receivers) {
  core::Survey s;
  s.n_shots = 1;
  s.n_sources = static_cast<int>(sources.size());
  s.n_receivers = static_cast<int>(receivers.size());
  s.sources = sources;
  s.receivers = receivers;
  return s;
}

/// Sum of squares of a[i0, i1).
inline double energy(std::vector<double> const& a, std::size_t i0 = 0, std::size_t i1 = static_cast<std::size_t>(-1)) {
  double e = 0;
  std::size_t const end = std::min(i1, a.size());
  for (std::size_t i = i0; i < end; ++i) e += a[i] * a[i];
  return e;
}

/// ||a - b|| / ||b|| (L2 over all samples).
inline double rel_l2(std::vector<double> const& a, std::vector<double> const& b) {
  double num = 0, den = 0;
  for (std::size_t i = 0; i < b.size(); ++i) {
    num += (a[i] - b[i]) * (a[i] - b[i]);
    den += b[i] * b[i];
  }
  return std::sqrt(num / den);
}

/// max |a - b| / max |b|.
inline double rel_max(std::vector<double> const& a, std::vector<double> const& b) {
  double num = 0, den = 0;
  for (std::size_t i = 0; i < b.size(); ++i) {
    num = std::max(num, std::abs(a[i] - b[i]));
    den = std::max(den, std::abs(b[i]));
  }
  return num / den;
}

/// True when a and b hold exactly the same values.
inline bool bitwise_equal(std::vector<double> const& a, std::vector<double> const& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (a[i] != b[i]) return false;
  return true;
}

/// Response u(r, t) of u_tt - c^2 lap u = f(t) delta(x) in 2D (f = 0 for t < 0):
///   u = 1/(2 pi c^2) int_0^{acosh(ct/r)} f(t - (r/c) cosh s) ds,
/// the Green's function G(r, tau) = H(c tau - r) / (2 pi c sqrt(c^2 tau^2 - r^2)) convolved with
/// f, after the substitution tau = (r/c) cosh s that removes the square-root singularity:
/// d tau = (r/c) sinh s ds and sqrt(c^2 tau^2 - r^2) = r sinh s, so G d tau = ds / (2 pi c^2)
/// (note c^2, not c). Composite Simpson with `n` (even) intervals.
template <class F>
double green2d_response(F const& f, double r, double c, double t, int n = 4000) {
  double const pi = 3.14159265358979323846;
  if (c * t <= r) return 0.0;
  double const smax = std::acosh(c * t / r);
  double const h = smax / n;
  double sum = 0;
  for (int i = 0; i <= n; ++i) {
    double const wgt = (i == 0 || i == n) ? 1.0 : (i % 2 ? 4.0 : 2.0);
    double const tau = t - (r / c) * std::cosh(i * h);
    if (tau >= 0) sum += wgt * f(tau);
  }
  return sum * h / 3.0 / (2.0 * pi * c * c);
}

/// Ricker (1 - 2 pi^2 f^2 tau^2) exp(-pi^2 f^2 tau^2), tau = t - delay, as a function of t.
inline double ricker_at(double freq, double delay, double t) {
  double const pi = 3.14159265358979323846;
  double const tau = t - delay;
  double const arg = pi * pi * freq * freq * tau * tau;
  return (1.0 - 2.0 * arg) * std::exp(-arg);
}

}  // namespace ksweep::test
