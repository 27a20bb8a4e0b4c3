#include "checks.hpp"

#include <ksweep/base/error.hpp>
#include <ksweep/fwi/spectral.hpp>

#include <fftw3.h>

#include <algorithm>
#include <cmath>
#include <complex>
#include <cstddef>
#include <mutex>

namespace ksweep::fwi {

namespace {

using cplx = std::complex<double>;
constexpr double kPi = 3.14159265358979323846;

/// The smallest product of 2, 3, 5 and 7 that is >= n (FFTW's fast lengths).
int fast_length(int n) {
  for (int m = std::max(n, 1);; ++m) {
    int r = m;
    for (int p : {2, 3, 5, 7})
      while (r % p == 0) r /= p;
    if (r == 1) return m;
  }
}

/// A record is cut off in the middle of its arrivals, where zeros would make a step whose high
/// frequencies a low-pass removes and rings with. Writes x[nt, 2 nt - 1) (the buffer holds at
/// least 2 nt samples): the odd reflection about the last sample, 2 x[nt-1] - x[nt-1-k],
/// continuous in value and slope, brought to zero by a Hann taper over nt - 1 samples (its own
/// band is below 1 / ((nt - 1) dt)). With `n` (the buffer's length) it writes the same before
/// t = 0 too, at the end of the periodic axis: x[n - k] = 2 x[0] - x[k], tapered (a wavelet
/// judged by its band, not by its cut start).
void continue_past_end(double* x, int nt, int n = 0) {
  int const taper = nt - 1;
  for (int k = 1; k <= taper; ++k) {
    double const w = 0.5 * (1.0 + std::cos(kPi * k / (taper + 1)));
    x[nt - 1 + k] = w * (2.0 * x[nt - 1] - x[nt - 1 - k]);
    if (n > 0) x[n - k] = w * (2.0 * x[0] - x[k]);
  }
}

/// A forward (real to complex) and an inverse (complex to real) transform of length n, over
/// buffers of their own. FFTW's planner is not thread-safe: plans are made under a lock.
class Transform {
 public:
  explicit Transform(int nt) : m_n(fast_length(2 * nt)), m_nf(m_n / 2 + 1) {
    m_time = fftw_alloc_real(static_cast<std::size_t>(m_n));
    m_freq = fftw_alloc_complex(static_cast<std::size_t>(m_nf));
    KSWEEP_REQUIRE(m_time && m_freq, "ksweep::fwi: cannot allocate transforms of " << m_n << " samples");
    std::lock_guard<std::mutex> lock(planner_mutex());
    m_forward = fftw_plan_dft_r2c_1d(m_n, m_time, m_freq, FFTW_ESTIMATE);
    m_inverse = fftw_plan_dft_c2r_1d(m_n, m_freq, m_time, FFTW_ESTIMATE);
  }
  ~Transform() {
    {
      std::lock_guard<std::mutex> lock(planner_mutex());
      fftw_destroy_plan(m_forward);
      fftw_destroy_plan(m_inverse);
    }
    fftw_free(m_time);
    fftw_free(m_freq);
  }
  Transform(Transform const&) = delete;
  Transform& operator=(Transform const&) = delete;

  int size() const { return m_n; }
  int bins() const { return m_nf; }
  /// The frequency of bin k (Hz) for samples of dt seconds.
  double frequency(int k, double dt) const { return k / (m_n * dt); }

  /// The spectrum of the m_n samples `fill(samples, m_n)` writes.
  template <class Fill>
  void forward_filled(Fill fill, std::vector<cplx>& spectrum) {
    fill(m_time, m_n);
    fftw_execute(m_forward);
    spectrum.resize(static_cast<std::size_t>(m_nf));
    for (int k = 0; k < m_nf; ++k) spectrum[static_cast<std::size_t>(k)] = {m_freq[k][0], m_freq[k][1]};
  }
  /// The spectrum of `nt` samples read by `at(t)`, zero-padded; `continued`: a record continued
  /// past its last sample first (continue_past_end).
  template <class At>
  void forward(int nt, At at, std::vector<cplx>& spectrum, bool continued = false) {
    forward_filled(
        [&](double* x, int n) {
          for (int t = 0; t < nt; ++t) x[t] = at(t);
          std::fill(x + nt, x + n, 0.0);
          if (continued) continue_past_end(x, nt);
        },
        spectrum);
  }
  /// The first `nt` samples of the inverse of `spectrum`, scaled by 1/n, passed to `put(t, value)`.
  template <class Put>
  void inverse(std::vector<cplx> const& spectrum, int nt, Put put) {
    for (int k = 0; k < m_nf; ++k) {
      m_freq[k][0] = spectrum[static_cast<std::size_t>(k)].real();
      m_freq[k][1] = spectrum[static_cast<std::size_t>(k)].imag();
    }
    fftw_execute(m_inverse);
    for (int t = 0; t < nt; ++t) put(t, m_time[t] / m_n);
  }
  /// After inverse(): the share of its energy outside the first `nt` samples (before t = 0 or
  /// past nt - 1).
  double outside(int nt) const {
    double inside = 0, out = 0;
    for (int t = 0; t < m_n; ++t) (t < nt ? inside : out) += m_time[t] * m_time[t];
    return inside + out > 0 ? out / (inside + out) : 0.0;
  }

 private:
  static std::mutex& planner_mutex() {
    static std::mutex m;
    return m;
  }
  int m_n, m_nf;
  double* m_time = nullptr;
  fftw_complex* m_freq = nullptr;
  fftw_plan m_forward = nullptr, m_inverse = nullptr;
};

void check_band(double dt, double max_freq) {
  KSWEEP_REQUIRE(dt > 0 && std::isfinite(dt), "ksweep::fwi::low_pass: dt = " << dt << " s must be > 0");
  KSWEEP_REQUIRE(max_freq > 0 && std::isfinite(max_freq),
                 "ksweep::fwi::low_pass: max_freq = " << max_freq << " Hz must be > 0");
}

}  // namespace

double low_pass_gain(double f, double max_freq) {
  return 1.0 / (1.0 + std::pow(std::abs(f) / max_freq, 2 * kLowPassOrder));
}

std::vector<double> low_pass(std::vector<double> const& trace, double dt, double max_freq, double* outside) {
  check_band(dt, max_freq);
  detail::require_finite(trace.data(), trace.size(), "ksweep::fwi::low_pass: the trace", detail::sample_position);
  int const nt = static_cast<int>(trace.size());
  if (nt == 0) return {};
  Transform tr(nt);
  std::vector<cplx> spec;
  tr.forward(
      nt, [&](int t) { return trace[static_cast<std::size_t>(t)]; }, spec);
  for (int k = 0; k < tr.bins(); ++k) spec[static_cast<std::size_t>(k)] *= low_pass_gain(tr.frequency(k, dt), max_freq);
  std::vector<double> out(trace.size());
  tr.inverse(spec, nt, [&](int t, double v) { out[static_cast<std::size_t>(t)] = v; });
  if (outside) *outside = tr.outside(nt);
  return out;
}

bool low_pass_keeps(std::vector<double> const& wavelet, double dt, double max_freq) {
  check_band(dt, max_freq);
  int const nt = static_cast<int>(wavelet.size());
  if (nt == 0) return true;
  // The wavelet's band, not its cut ends': continued past either end as records are (the odd
  // reflection about the end sample, tapered to zero), before t = 0 at the end of the periodic
  // axis.
  Transform tr(2 * nt);  // 4 nt samples at least: both continuations fit
  std::vector<cplx> spec;
  tr.forward_filled(
      [&](double* x, int n) {
        std::fill(x, x + n, 0.0);
        std::copy(wavelet.begin(), wavelet.end(), x);
        continue_past_end(x, nt, n);
      },
      spec);
  double peak = 0, changed = 0;
  for (int k = 0; k < tr.bins(); ++k) {
    double const a = std::abs(spec[static_cast<std::size_t>(k)]);
    peak = std::max(peak, a);
    changed = std::max(changed, a * (1.0 - low_pass_gain(tr.frequency(k, dt), max_freq)));
  }
  return changed <= kLowPassKeeps * peak;
}

void low_pass_records(std::vector<float>& records, int shots, int nt, int receivers, double dt, double max_freq) {
  check_band(dt, max_freq);
  auto const nr = static_cast<std::size_t>(receivers);
  KSWEEP_REQUIRE(shots >= 0 && nt >= 0 && receivers >= 0 &&
                     records.size() == static_cast<std::size_t>(shots) * static_cast<std::size_t>(nt) * nr,
                 "ksweep::fwi::low_pass_records: " << records.size() << " samples for [shots, nt, receivers] = ["
                                                   << shots << ", " << nt << ", " << receivers << "]");
  if (records.empty()) return;
  detail::require_finite(records.data(), records.size(), "ksweep::fwi::low_pass_records: the records",
                         [&](std::size_t i) { return detail::record_position(i, nt, receivers); });
  Transform tr(nt);
  std::vector<double> gain(static_cast<std::size_t>(tr.bins()));
  for (int k = 0; k < tr.bins(); ++k) gain[static_cast<std::size_t>(k)] = low_pass_gain(tr.frequency(k, dt), max_freq);
  std::vector<cplx> spec;
  for (std::size_t s = 0; s < static_cast<std::size_t>(shots); ++s)
    for (std::size_t r = 0; r < nr; ++r) {
      float* const base = records.data() + s * static_cast<std::size_t>(nt) * nr + r;
      auto at = [&](int t) { return static_cast<double>(base[static_cast<std::size_t>(t) * nr]); };
      tr.forward(nt, at, spec, true);
      for (std::size_t k = 0; k < spec.size(); ++k) spec[k] *= gain[k];
      tr.inverse(spec, nt, [&](int t, double v) { base[static_cast<std::size_t>(t) * nr] = static_cast<float>(v); });
    }
}

WaveletEstimate estimate_wavelet(std::vector<float> const& observed, std::vector<float> const& synthetic,
                                 std::vector<double> const& reference, int shots, int nt, int receivers, double dt,
                                 double stabilisation) {
  auto const samples =
      static_cast<std::size_t>(shots) * static_cast<std::size_t>(nt) * static_cast<std::size_t>(receivers);
  KSWEEP_REQUIRE(shots >= 1 && nt >= 1 && receivers >= 1, "ksweep::fwi::estimate_wavelet: [shots, nt, receivers] = ["
                                                              << shots << ", " << nt << ", " << receivers
                                                              << "] must all be >= 1");
  KSWEEP_REQUIRE(observed.size() == samples && synthetic.size() == samples,
                 "ksweep::fwi::estimate_wavelet: " << observed.size() << " observed and " << synthetic.size()
                                                   << " synthetic samples for [shots, nt, receivers] = [" << shots
                                                   << ", " << nt << ", " << receivers << "] (" << samples << ")");
  KSWEEP_REQUIRE(
      reference.size() == static_cast<std::size_t>(nt),
      "ksweep::fwi::estimate_wavelet: a reference wavelet of " << reference.size() << " samples for nt = " << nt);
  KSWEEP_REQUIRE(stabilisation > 0 && std::isfinite(stabilisation),
                 "ksweep::fwi::estimate_wavelet: stabilisation = " << stabilisation << " must be > 0");
  KSWEEP_REQUIRE(dt > 0 && std::isfinite(dt), "ksweep::fwi::estimate_wavelet: dt = " << dt << " s must be > 0");
  auto const at = [&](std::size_t i) { return detail::record_position(i, nt, receivers); };
  detail::require_finite(observed.data(), samples, "ksweep::fwi::estimate_wavelet: the observed data", at);
  detail::require_finite(synthetic.data(), samples, "ksweep::fwi::estimate_wavelet: the synthetic data", at);
  detail::require_finite(reference.data(), reference.size(), "ksweep::fwi::estimate_wavelet: the reference wavelet",
                         detail::sample_position);
  Transform tr(nt);
  auto const nf = static_cast<std::size_t>(tr.bins());
  auto const nr = static_cast<std::size_t>(receivers);
  // Cross-spectrum sum conj(S) D, power sum |S|^2, and sum |D|^2, |S|^2-weighted terms for the
  // residuals: every trace in order.
  std::vector<cplx> cross(nf), d_spec, s_spec;
  std::vector<double> power(nf, 0.0), d_power(nf, 0.0);
  for (std::size_t s = 0; s < static_cast<std::size_t>(shots); ++s)
    for (std::size_t r = 0; r < nr; ++r) {
      std::size_t const base = s * static_cast<std::size_t>(nt) * nr + r;
      tr.forward(
          nt, [&](int t) { return static_cast<double>(observed[base + static_cast<std::size_t>(t) * nr]); }, d_spec);
      tr.forward(
          nt, [&](int t) { return static_cast<double>(synthetic[base + static_cast<std::size_t>(t) * nr]); }, s_spec);
      for (std::size_t k = 0; k < nf; ++k) {
        cross[k] += std::conj(s_spec[k]) * d_spec[k];
        power[k] += std::norm(s_spec[k]);
        d_power[k] += std::norm(d_spec[k]);
      }
    }
  double const peak = *std::max_element(power.begin(), power.end());
  KSWEEP_REQUIRE(peak > 0 && std::isfinite(peak),
                 "ksweep::fwi::estimate_wavelet: the synthetic data are silent (or not finite): no wavelet can be "
                 "estimated from them; check that the reference wavelet and the receivers reach the data");
  double const eps = stabilisation * peak;
  std::vector<cplx> ref;
  tr.forward(
      nt, [&](int t) { return reference[static_cast<std::size_t>(t)]; }, ref);
  std::vector<cplx> w(nf);
  // Residuals by Parseval over the half spectrum (bins other than 0 and n/2 stand for two).
  double res = 0, res_ref = 0, total = 0;
  for (std::size_t k = 0; k < nf; ++k) {
    cplx const filter = cross[k] / (power[k] + eps);
    w[k] = ref[k] * filter;
    double const weight = (k == 0 || (tr.size() % 2 == 0 && k == nf - 1)) ? 1.0 : 2.0;
    // sum |D - F S|^2 = sum |D|^2 - 2 Re(conj(F) cross) + |F|^2 power; likewise with F = 1.
    res += weight * (d_power[k] - 2.0 * std::real(std::conj(filter) * cross[k]) + std::norm(filter) * power[k]);
    res_ref += weight * (d_power[k] - 2.0 * std::real(cross[k]) + power[k]);
    total += weight * d_power[k];
  }
  WaveletEstimate out;
  out.wavelet.resize(static_cast<std::size_t>(nt));
  tr.inverse(w, nt, [&](int t, double v) { out.wavelet[static_cast<std::size_t>(t)] = v; });
  out.residual = total > 0 ? std::max(res, 0.0) / total : 0.0;
  out.residual_reference = total > 0 ? std::max(res_ref, 0.0) / total : 0.0;
  return out;
}

}  // namespace ksweep::fwi
