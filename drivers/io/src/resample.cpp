#include <ksweep/io/resample.hpp>

#include <ksweep/base/error.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <vector>

namespace ksweep::io {

namespace {

double sinc(double x) {
  if (std::abs(x) < 1e-12) return 1.0;
  double const px = M_PI * x;
  return std::sin(px) / px;
}

/// Kaiser window on u in [-1, 1].
double kaiser(double u, double beta) {
  if (std::abs(u) >= 1.0) return 0.0;
  return std::cyl_bessel_i(0.0, beta * std::sqrt(1.0 - u * u)) / std::cyl_bessel_i(0.0, beta);
}

}  // namespace

RecordsFile resample_records(RecordsFile const& r, int nt, double dt, int* padded_from) {
  KSWEEP_REQUIRE(nt >= 1 && dt > 0 && std::isfinite(dt),
                 "resampling records to nt = " << nt << " samples of dt = " << dt << " s: both must be > 0");
  KSWEEP_REQUIRE(r.nt >= 1 && r.dt > 0, "resampling records of nt = " << r.nt << ", dt = " << r.dt << " s");
  RecordsFile out = r;
  out.nt = nt;
  out.dt = dt;
  std::size_t const R = static_cast<std::size_t>(r.receivers), S = static_cast<std::size_t>(r.shots);
  out.data.assign(S * static_cast<std::size_t>(nt) * R, 0.0f);
  double const coarse = std::max(r.dt, dt);
  double const reach = kResampleHalfWidth * coarse;  // seconds either side
  double const gain = r.dt / coarse;
  double const end = (r.nt - 1) * r.dt;
  int first_padded = -1;
  // The weights of one output sample are the same for every trace: computed once per sample.
  std::vector<double> w;
  std::vector<double> acc(R);
  for (int k = 0; k < nt; ++k) {
    double const t = k * dt;
    if (t > end + 0.5 * r.dt) {  // past the record: zeros
      if (first_padded < 0) first_padded = k;
      continue;
    }
    // The window's first and last input samples, clamped in double precision before the
    // conversion: a tiny input interval puts them far outside int's range.
    double const lo = std::ceil((t - reach) / r.dt), hi = std::floor((t + reach) / r.dt);
    if (hi < 0.0 || lo > r.nt - 1.0 || hi < lo) continue;
    int const n0 = lo < 0.0 ? 0 : static_cast<int>(lo);
    int const n1 = hi > r.nt - 1.0 ? r.nt - 1 : static_cast<int>(hi);
    w.resize(static_cast<std::size_t>(n1 - n0 + 1));
    for (int n = n0; n <= n1; ++n) {
      double const tau = t - n * r.dt;
      w[static_cast<std::size_t>(n - n0)] = gain * sinc(tau / coarse) * kaiser(tau / reach, kResampleBeta);
    }
    for (std::size_t s = 0; s < S; ++s) {
      std::fill(acc.begin(), acc.end(), 0.0);
      for (int n = n0; n <= n1; ++n) {
        double const wn = w[static_cast<std::size_t>(n - n0)];
        float const* row = r.data.data() + (s * static_cast<std::size_t>(r.nt) + static_cast<std::size_t>(n)) * R;
        for (std::size_t i = 0; i < R; ++i) acc[i] += wn * row[i];
      }
      float* dst = out.data.data() + (s * static_cast<std::size_t>(nt) + static_cast<std::size_t>(k)) * R;
      for (std::size_t i = 0; i < R; ++i) dst[i] = static_cast<float>(acc[i]);
    }
  }
  if (padded_from != nullptr) *padded_from = first_padded;
  return out;
}

}  // namespace ksweep::io
