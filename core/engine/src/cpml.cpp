#include <ksweep/core/cpml.hpp>

#include <cmath>

namespace ksweep::core {

CpmlProfile cpml_profile(int n_model, int before, int after, int radius, double dh, double dt, double vmax,
                         PmlConfig const& pml, bool half_points, double inset) {
  int const n = before + n_model + after;
  CpmlProfile p;
  p.a.assign(n + 2 * radius, 0.0);
  p.b.assign(n + 2 * radius, 0.0);
  p.mask.assign(n + 2 * radius, 0.0);
  double const pi = 3.14159265358979323846;
  auto fill = [&](int i, double depth, double width) {
    double const frac = depth / width;
    double const length = width * dh;
    double const sigma0 = -3.0 * vmax * std::log(pml.reflection) / (2.0 * length);
    double const sigma = sigma0 * frac * frac;
    double const alpha = pi * pml.freq * (1.0 - frac);
    double const a = std::exp(-(sigma + alpha) * dt);
    double const b = (sigma + alpha) > 0 ? sigma / (sigma + alpha) * (a - 1.0) : 0.0;
    p.a[i + radius] = a;
    p.b[i + radius] = b;
    p.mask[i + radius] = 1.0;
  };
  double const h = half_points ? 0.5 : 0.0;
  for (int i = 0; i < n; ++i) {
    bool const low = i < before + n_model / 2;
    double const depth = low ? before - i - h : i - (before + n_model) + 1 + h;
    if (depth - inset > 0) fill(i, depth - inset, (low ? before : after) - inset);
  }
  return p;
}

}  // namespace ksweep::core
