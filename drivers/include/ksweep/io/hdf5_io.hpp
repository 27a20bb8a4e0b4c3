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

/// Shot records with their acquisition geometry (one source per shot, one receiver line
/// shared by all shots).
struct RecordsFile {
  /// float32 [shots][nt][receivers].
  std::vector<float> data;
  int shots = 0;
  int nt = 0;
  int receivers = 0;
  double dt = 0;
  double dh = 0;
  int order = 0;
  /// Source cell per shot (size shots).
  std::vector<int> src_z;
  std::vector<int> src_x;
  /// Receiver cell per receiver (size receivers).
  std::vector<int> rec_z;
  std::vector<int> rec_x;
  double freq = 0;
  double delay = 0;
  /// Size of the model grid the records were made on.
  int nz = 0;
  int nx = 0;
  /// 3D: cells along y (0 for 2D records) and the y cells of the sources and receivers (empty in 2D).
  int ny = 0;
  std::vector<int> src_y;
  std::vector<int> rec_y;
};

/// One named float32 image [n0][n1] (row-major), or a volume [n0][n1][n2] when n2 > 0.
struct Dataset {
  std::string name;
  int n0 = 0;
  int n1 = 0;
  std::vector<float> data;
  int n2 = 0;
};

/// Writes dataset "data" (float32 [shots][nt][receivers]), int32 datasets src_z, src_x,
/// rec_z, rec_x (and src_y, rec_y in 3D) and file attributes dt, dh, order, freq, delay, nz, nx
/// (and ny in 3D).
void write_records(std::filesystem::path const& path, RecordsFile const& records);

/// Reads a file written by write_records, checking ranks and sizes; with `values` false, all
/// but the samples (`data` stays empty): the shape, geometry and attributes, cheaply.
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

}  // namespace ksweep::io
