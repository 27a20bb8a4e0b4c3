#pragma once
/// \file resample.hpp
/// Band-limited resampling of shot records to another sampling interval and length: a
/// Kaiser-windowed sinc (Hicks 2002 uses the same window for points in space), with its cutoff
/// at the Nyquist frequency of the coarser of the two intervals, so that a record is low-passed
/// before it is decimated and interpolated exactly between its samples when it is refined.

#include <ksweep/io/hdf5_io.hpp>

#include <string>

namespace ksweep::io {

/// The kernel's half-width in samples of the coarser interval, and the Kaiser window's beta
/// (stop-band about -80 dB).
inline constexpr int kResampleHalfWidth = 8;
inline constexpr double kResampleBeta = 8.0;

/// `records` resampled to `nt` samples of `dt` seconds, both time axes starting at 0. Samples
/// more than half an input interval past the input's last one are 0 (`padded_from` is then the
/// first of them, else -1).
/// Geometry and attributes are kept; dt and nt are replaced. Computed in double, rounded once.
/// Within the kernel's reach (kResampleHalfWidth coarse intervals) of the input's end, where a
/// record is cut off while it still carries signal, the result is approximate.
RecordsFile resample_records(RecordsFile const& records, int nt, double dt, int* padded_from = nullptr);

}  // namespace ksweep::io
