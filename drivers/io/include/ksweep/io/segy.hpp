#pragma once
/// \file segy.hpp
/// SEG-Y files through libsegyio: 2D velocity models (one trace per x position, samples along
/// depth) and shot gathers with their acquisition geometry in trace headers. Reads 4-byte IBM
/// (format code 1) and IEEE (5) floats in either byte order; writes SEG-Y rev 1, big-endian,
/// IEEE floats. Every write goes to `path + ".tmp"` and is renamed into place.
///
/// Trace-header fields of gathers (bytes, 1-based, as SEG-Y rev 1 numbers them):
///   1 tracl  trace sequence number in the file (1, 2, ...)
///   9 fldr   shot number (1-based, in the order of the shots)
///  13 tracf  receiver number within the shot (1-based)
///  37 offset receiver x minus source x, whole metres (informative)
///  41 gelev  receiver elevation = -depth, scaled by scalel
///  49 sdepth source depth below the surface, scaled by scalel
///  69 scalel elevation/depth scalar (-1000 when written: millimetres)
///  71 scalco coordinate scalar (-1000 when written: millimetres)
///  73 sx, 77 sy, 81 gx, 85 gy  source and receiver coordinates, scaled by scalco
/// 115 ns     samples in this trace (must equal the binary header's)
/// 117 dt     sample interval in microseconds
/// Binary header: 3217 sample interval (us), 3221 samples per trace, 3225 format code,
/// 3255 measurement system (1 = metres), 3501 revision (0x0100), 3503 fixed-length flag (1).
/// A scalar s > 0 multiplies, s < 0 divides by |s|, 0 means 1 (SEG-Y rev 1). Coordinates are
/// metres from the model's origin (x = ix dh, z = iz dh, y = iy dh).

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <ksweep/io/hdf5_io.hpp>

namespace ksweep::io {

/// The binary-header facts of a SEG-Y file, checked against the file's size.
struct SegyLayout {
  int traces = 0;
  int samples = 0;
  /// Sample interval in seconds (binary header 3217, else trace 1's byte 117; 0 when neither).
  double dt = 0;
  /// 1 (IBM float) or 5 (IEEE float).
  int format = 0;
  bool little_endian = false;
};

/// Opens `path` and reads its binary header; checks the format code, the sample count and that
/// the file holds a whole number of traces. `what` names the file's role in errors (e.g.
/// "model.source"). Throws ksweep::Error naming the file, the header and the value.
SegyLayout segy_layout(std::filesystem::path const& path, std::string const& what);

/// A velocity model from a SEG-Y file, sample iz at depth z = iz dh. 2D: trace ix is the column
/// x = ix dh. 3D, when the traces span more than one inline (trace header byte 189) and more
/// than one crossline (byte 193): inlines along y and crosslines along x, in increasing order,
/// one trace at every (inline, crossline) (a missing or repeated one is an error naming the
/// trace). Values are decoded exactly (IBM via double) and multiplied by `scale` (1000 for km/s)
/// in double, rounded once to float32. `dh` is the grid spacing (SEG-Y headers do not state it
/// reliably). Throws ksweep::Error.
VelocityModel read_segy_model(std::filesystem::path const& path, double dh, double scale, std::string const& what);

/// The cells of a SEG-Y model (nz samples, ny inlines or 0 for 2D, nx traces or crosslines),
/// from its headers alone.
struct SegyModelShape {
  int nz = 0, ny = 0, nx = 0;
};
SegyModelShape segy_model_shape(std::filesystem::path const& path, std::string const& what);

/// Writes a model [nz][nx] ([nz][ny][nx] when ny > 0) as SEG-Y: one trace per column (cdp x in
/// bytes 181 and gx; in 3D cdp y in 185, inline iy + 1 in 189, crossline ix + 1 in 193, inlines
/// in order), the depth step dh in millimetres in the sample-interval fields (a convention of
/// depth models, informative only). Throws ksweep::Error.
void write_segy_model(std::filesystem::path const& path, std::vector<float> const& values, int nz, int nx, double dh,
                      int ny = 0);

/// Writes shot records as SEG-Y gathers: for each shot, one trace per receiver of the shot
/// (rec_count), the geometry in metres (millimetre precision) in the fields above. `little_endian` writes the
/// byte-swapped variant (SEG-Y rev 2 allows it; for tests of the reader). Throws ksweep::Error.
void write_records_segy(std::filesystem::path const& path, RecordsFile const& records, bool little_endian = false);

/// Reads shot gathers written as by write_records_segy (or by other programs with the same
/// fields): traces grouped into shots by fldr, in file order; each shot has its own receivers
/// (any number, at any position: a spread shared by all shots or one that moves), positions in
/// metres from the scaled coordinates. `ny` is 0 for a 2D model. With `model_end` (the model's
/// far corner in metres, ((nz-1) dh, (nx-1) dh, (ny-1) dh)), a position outside the model is an
/// error naming the trace and the header field. The wavelet and order attributes (freq, delay,
/// order, nz, nx) are read back from ksweep's cards of the textual header when present, else left
/// NaN / 0 (unknown). With `values` false, `data` stays empty. Throws ksweep::Error naming the
/// file, the trace and the header field.
RecordsFile read_records_segy(std::filesystem::path const& path, double dh, int ny, bool values = true,
                              std::optional<Position> const& model_end = std::nullopt);

/// True when `path` ends in .sgy or .segy (any case).
bool is_segy_path(std::filesystem::path const& path);

/// The first trace of a SEG-Y file (a wavelet) decoded exactly, and its sample interval `dt`
/// (seconds; 0 when the headers do not state it). Throws ksweep::Error.
std::vector<double> read_segy_trace(std::filesystem::path const& path, double& dt, std::string const& what);

}  // namespace ksweep::io
