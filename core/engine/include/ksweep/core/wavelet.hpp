#pragma once
/// \file wavelet.hpp
/// Source wavelets.

#include <vector>

namespace ksweep::core {

/// Ricker wavelet (1 - 2 pi^2 f^2 tau^2) exp(-pi^2 f^2 tau^2), tau = t - delay, sampled at
/// t = n dt for n = 0..nt-1. Peak amplitude 1 at t = delay.
std::vector<double> ricker(double freq, double delay, double dt, int nt);

}  // namespace ksweep::core
