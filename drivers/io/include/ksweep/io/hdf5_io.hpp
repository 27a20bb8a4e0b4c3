#pragma once
/// \file hdf5_io.hpp
/// HDF5 files of ksweep: shot records, velocity models and 2D images. Every write goes to
/// `path + ".tmp"` first and is renamed into place, so no half-written file is left behind.
/// In a build without HDF5 every function throws ksweep::Error.

#include <filesystem>
#include <string>
#include <vector>

#include <ksweep/io/velocity.hpp>

namespace ksweep::io {

/// A position in metres from the model's origin: z down, x along the model, y across (0 in
/// 2D). Cell (iz, ix, iy) of a grid of spacing dh is the position (iz dh, ix dh, iy dh).
struct Position {
  double z = 0;
  double x = 0;
  double y = 0;
  bool operator==(Position const& o) const { return z == o.z && x == o.x && y == o.y; }
  bool operator!=(Position const& o) const { return !(*this == o); }
};

/// Shot records with their acquisition geometry: one source per shot, and each shot's own
/// receivers (a spread shared by all shots, or one that moves from shot to shot), anywhere in the
/// model. A shot with fewer receivers than `receivers` fills its first rec_count[s] slots; the
/// rest are padding (zero samples, positions not read).
struct RecordsFile {
  /// float32 [shots][nt][receivers].
  std::vector<float> data;
  int shots = 0;
  int nt = 0;
  int receivers = 0;  ///< receiver slots per shot: the most any shot has
  double dt = 0;
  double dh = 0;
  int order = 0;
  std::vector<Position> src_pos;  ///< [shot]
  std::vector<Position> rec_pos;  ///< [shot * receivers + i]
  std::vector<int> rec_count;     ///< [shot]: receivers of the shot (<= receivers)
  double freq = 0;
  double delay = 0;
  /// Size of the model grid the records were made on (ny: 0 for 2D records).
  int nz = 0;
  int nx = 0;
  int ny = 0;

  /// Whether every shot records the same receivers (count and positions).
  bool shared_spread() const;
  /// Whether every position lies on a node of spacing dh (within 1e-9 dh).
  bool on_grid() const;
};

/// A position's cell index along one axis when it lies on a node of spacing dh (within 1e-9 of
/// a cell), else -1.
long node_index(double metres, double dh);

/// One named float32 image [n0][n1] (row-major), or a volume [n0][n1][n2] when n2 > 0.
struct Dataset {
  std::string name;
  int n0 = 0;
  int n1 = 0;
  std::vector<float> data;
  int n2 = 0;
};

/// Writes dataset "data" (float32 [shots][nt][receivers]), the geometry as float64 datasets
/// src_pos [shots][3] and rec_pos [shots][receivers][3] (metres: z, x, y) with int32 rec_count
/// [shots], and file attributes dt, dh, order, freq, delay, nz, nx (and ny in 3D). When every shot
/// shares one spread on grid nodes, also int32 cell datasets src_z, src_x, rec_z, rec_x (and
/// src_y, rec_y in 3D), as files before the metre datasets held it.
void write_records(std::filesystem::path const& path, RecordsFile const& records);

/// Reads a file written by write_records (or one with the cell datasets alone), checking ranks
/// and sizes; with `values` false, all but the samples (`data` stays empty): the shape, geometry
/// and attributes, cheaply.
RecordsFile read_records(std::filesystem::path const& path, bool values = true);

/// Writes `vp` as float32 dataset `dataset` [nz][nx] ([nz][ny][nx] when ny > 0) and the file
/// attribute "dh".
void write_model(std::filesystem::path const& path, std::vector<float> const& vp, int nz, int nx, double dh,
                 std::string const& dataset = "vp", int ny = 0);

/// Reads dataset "vp" ([nz][nx], or [nz][ny][nx] for a 3D model) and the file attribute "dh".
VelocityModel read_model(std::filesystem::path const& path, std::string const& dataset = "vp");

/// As read_model, without reading the values: the shape and dh only (`vp` stays empty).
VelocityModel read_model_shape(std::filesystem::path const& path, std::string const& dataset = "vp");

/// Writes each image as a float32 dataset [n0][n1] ([n0][n1][n2]) and the file attribute "dh".
void write_datasets(std::filesystem::path const& path, std::vector<Dataset> const& datasets, double dh);

/// The image `name` of `data` laid out as the model `shape`: [nz][nx], or [nz][ny][nx] in 3D.
Dataset model_dataset(VelocityModel const& shape, std::string name, std::vector<float> data);

/// A model file on the grid of `shape`: one dataset per field, named `names` (the first, "vp",
/// alone is written as write_model writes it).
void write_models(std::filesystem::path const& path, VelocityModel const& shape, std::vector<std::string> const& names,
                  std::vector<std::vector<float>> const& fields);

/// A trace of a wavelet file: its name and samples.
struct NamedTrace {
  std::string name;
  std::vector<double> samples;
};

/// Writes traces of one time axis (nt samples of dt seconds) as float64 datasets [nt] with the
/// file attribute "dt": a wavelet file (the first trace named "wavelet" is what read_wavelet_h5
/// reads).
void write_wavelets(std::filesystem::path const& path, std::vector<NamedTrace> const& traces, double dt);

/// Dataset "wavelet" ([n], float or integer) and the attribute "dt" of a wavelet file.
std::vector<double> read_wavelet_h5(std::filesystem::path const& path, double& dt);

}  // namespace ksweep::io
