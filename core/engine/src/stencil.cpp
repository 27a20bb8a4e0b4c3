#include <ksweep/core/stencil.hpp>

#include <cmath>

namespace ksweep::core {

namespace {
template <int Order>
double nyquist_symbol() {
  using C = StencilCoefficients<Order>;
  double s = C::second(0);
  for (int k = 1; k <= C::radius; ++k) s += 2.0 * C::second(k) * ((k % 2) ? -1.0 : 1.0);
  return std::fabs(s);
}
}  // namespace

double courant_limit(int order, int ndim) {
  double const s = dispatch_order(order, [](auto o) { return nyquist_symbol<decltype(o)::value>(); });
  return 2.0 / std::sqrt(ndim * s);
}

}  // namespace ksweep::core
