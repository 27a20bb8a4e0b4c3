#pragma once
/// \file wavelet.hpp
/// A source wavelet from a file (the configuration's wavelet.source = PATH), on the modelling's
/// time axis.

#include <filesystem>
#include <string>
#include <vector>

namespace ksweep::io {

/// The wavelet in `path`, resampled (band-limited, resample.hpp) to `nt` samples of `dt` seconds
/// when its own axis differs (samples past its end are 0). A wavelet's samples are the amplitudes
/// added to the source cell once per time step (README, "Conventions"): the same source at
/// another step adds (dt / file_dt)^2 as much per step, and resampled samples are scaled so. The
/// format follows the extension:
///   .h5          dataset "wavelet" [n] and attribute "dt" (s): the wavelet.h5 `ksweep fwi` writes
///   .sgy, .segy  the first trace; the interval from binary header byte 3217 (else trace 1's 117)
///   otherwise    text: one sample per line, "time amplitude" (seconds; separated by spaces, tabs
///                or a comma), times from 0 at a constant interval; '#' starts a comment
/// Errors name the file, the line or header, and the value. `what` names the key that gave the
/// path. Throws ksweep::Error.
std::vector<double> read_wavelet(std::filesystem::path const& path, double dt, int nt,
                                 std::string const& what = "wavelet.source");

}  // namespace ksweep::io
