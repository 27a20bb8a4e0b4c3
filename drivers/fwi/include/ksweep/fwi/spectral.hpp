#pragma once
/// \file spectral.hpp
/// Signal processing of traces for the inversion, on the host through FFTW: the zero-phase
/// low-pass of frequency continuation (applied to the observed data and the wavelet alike), and
/// the estimation of the source wavelet from observed data by frequency-domain least squares.
///
/// Every transform is of length nfft >= 2 nt (a product of 2, 3, 5 and 7), so that neither the
/// filter's two-sided response nor the estimate's correlations wrap around: wavelets are padded
/// with zeros, records continued past their cut end (low_pass_records). Plans are made with
/// FFTW_ESTIMATE, which picks the same algorithm on every run (FFTW_MEASURE times candidates and
/// may pick another one, and other bits, next time); sums over traces are in double, in trace
/// order. The results are the same bits for the same inputs whatever the number of ranks or
/// threads.

#include <vector>

namespace ksweep::fwi {

/// The steepness of the low-pass: |H(f)| = 1 / (1 + (f / max_freq)^(2 n)), n = kLowPassOrder,
/// the response of an n-th order Butterworth filter applied forward and backward (zero phase):
/// -6 dB at max_freq, -42 dB at 1.5 max_freq, -72 dB at 2 max_freq.
inline constexpr int kLowPassOrder = 6;

/// The gain of the low-pass at frequency `f` (Hz).
double low_pass_gain(double f, double max_freq);

/// The relative change below which low_pass_keeps() calls a low-pass the identity: 2^-20, a few
/// units of fp32's round-off (the records and the modelling are fp32).
inline constexpr double kLowPassKeeps = 1.0 / (1 << 20);

/// Whether a low-pass below `max_freq` keeps `wavelet` (nt samples of dt s) as it is: the
/// spectrum of the wavelet, continued past both ends as records are (so that a wavelet cut at
/// t = 0 is judged by its band, not by its cut), changes nowhere by more than kLowPassKeeps of
/// its peak. Data modelled with such a
/// wavelet lie in a band the filter passes whole, so a frequency stage that keeps its wavelet
/// uses the wavelet and the data unfiltered (a stage at 100 Hz with a 5 Hz wavelet is the whole
/// band, to the bit), rather than filter the records for what their truncation alone puts there.
bool low_pass_keeps(std::vector<double> const& wavelet, double dt, double max_freq);

/// `trace` (nt samples of dt seconds) low-passed with zero phase below `max_freq` (Hz, > 0; at
/// or above the Nyquist frequency the filter still shapes the top of the band). The filter's
/// response is two-sided: what it spreads before t = 0 or past the last sample is cut off;
/// `outside` (when not null) receives that part's share of the filtered trace's energy (a
/// wavelet that starts within about 1 / max_freq of t = 0 loses its precursor).
std::vector<double> low_pass(std::vector<double> const& trace, double dt, double max_freq, double* outside = nullptr);

/// Every trace of `records` [shot][nt][receiver] low-passed with zero phase, in place. A record
/// ends in the middle of its arrivals: each trace is continued past its last sample (the odd
/// reflection about it, tapered to zero) before it is filtered, so that the cut does not ring
/// (with zeros instead, a low-pass at 100 Hz of a 5 Hz record changed its last samples by 4 %
/// of its peak; continued, by 1e-4).
void low_pass_records(std::vector<float>& records, int shots, int nt, int receivers, double dt, double max_freq);

/// The estimate of estimate_wavelet() and how well it explains the data.
struct WaveletEstimate {
  std::vector<double> wavelet;  ///< nt samples
  /// sum (observed - reference records filtered to the estimate)^2 / sum observed^2: the part of
  /// the data the estimated wavelet leaves unexplained on the model the Green's functions are of.
  double residual = 0;
  /// The same with the reference wavelet itself (how far the reference was).
  double residual_reference = 0;
};

/// The source wavelet that best explains `observed` [shot][nt][receiver], given `synthetic`
/// records of the same survey modelled with the wavelet `reference` (nt samples) on a model:
/// with G the Green's functions of that model, S = G R and D = G W, so
///   W(f) = R(f) sum conj(S) D / (sum |S|^2 + eps),  eps = stabilisation * max_f sum |S|^2,
/// sums over every trace. The estimate carries only the band where the reference has energy
/// (elsewhere the stabilisation takes it to 0): choose a reference whose band covers the data's.
/// `stabilisation` > 0 (1e-3 is typical) keeps the division finite where the synthetic data are
/// weak. Throws ksweep::Error on mismatched sizes or silent synthetic data.
WaveletEstimate estimate_wavelet(std::vector<float> const& observed, std::vector<float> const& synthetic,
                                 std::vector<double> const& reference, int shots, int nt, int receivers, double dt,
                                 double stabilisation);

}  // namespace ksweep::fwi
