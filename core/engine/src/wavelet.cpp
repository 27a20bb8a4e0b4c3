#include <ksweep/base/error.hpp>
#include <ksweep/core/wavelet.hpp>

#include <cmath>

namespace ksweep::core {

std::vector<double> ricker(double freq, double delay, double dt, int nt) {
  KSWEEP_REQUIRE(std::isfinite(freq) && freq > 0, "wavelet.freq = " << freq << " must be > 0");
  KSWEEP_REQUIRE(std::isfinite(delay), "wavelet.delay = " << delay << " must be finite");
  KSWEEP_REQUIRE(nt > 0, "time.nt = " << nt << " must be > 0");
  double const pi = 3.14159265358979323846;
  std::vector<double> w(nt);
  for (int n = 0; n < nt; ++n) {
    double const tau = n * dt - delay;
    double const arg = pi * pi * freq * freq * tau * tau;
    w[n] = (1.0 - 2.0 * arg) * std::exp(-arg);
  }
  return w;
}

}  // namespace ksweep::core
