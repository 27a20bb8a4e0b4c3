#pragma once
/// \file velocity.hpp
/// P-wave velocity models: the bundled Marmousi grids (looked up on disk and verified by
/// SHA-256), raw float32 files and HDF5 files, with decimation and cropping.

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include <ksweep/io/config.hpp>

namespace ksweep::io {

/// A 2D or 3D velocity model on a regular grid with spacing dh in every direction.
struct VelocityModel {
  int nz = 0;
  int nx = 0;
  /// Grid spacing in metres.
  double dh = 0;
  /// Row-major P-wave velocity in m/s: [nz][nx] (index iz*nx + ix) in 2D, [nz][ny][nx] (index
  /// (iz*ny + iy)*nx + ix) in 3D; iz = 0 at the surface.
  std::vector<float> vp;
  /// Human-readable provenance (source, decimation, crop).
  std::string description;
  /// Cells along y: 0 for a 2D model.
  int ny = 0;
  int dim() const { return ny > 0 ? 3 : 2; }
  /// Rows of nx cells: nz (2D) or nz ny (3D).
  int rows() const { return nz * (ny > 0 ? ny : 1); }
  /// "nz x nx" or "nz x ny x nx".
  std::string shape() const;
};

/// One of the named Marmousi grids.
struct NamedModel {
  /// The value of model.source that selects it ("marmousi2", "marmousi2_fine", "marmousi").
  std::string name;
  std::string file_name;
  int nz;
  int nx;
  double dh;
  std::string sha256;
  std::uintmax_t bytes;
};

/// The extension of `path` in lower case (".h5", ".sgy", ...): how model and data files are told
/// apart.
std::string lower_extension(std::filesystem::path const& path);

/// The named models known to load_velocity.
std::vector<NamedModel> const& named_models();

/// Finds `file_name` in, in order: $KSWEEP_MARMOUSI_DIR; ../shared/marmousi/ relative to
/// the current directory; KSWEEP_SOURCE_DIR/../shared/marmousi/; and
/// ${XDG_CACHE_HOME:-$HOME/.cache}/ksweep/marmousi/. Throws ksweep::Error listing every
/// place looked and naming share/marmousi/fetch_marmousi.py when it is nowhere.
std::filesystem::path find_marmousi_file(std::string const& file_name);

/// The lower-case hex SHA-256 of the file at `path`. Throws ksweep::Error.
std::string sha256_file(std::filesystem::path const& path);

/// Loads model.source (a named model, a generated 3D model, a raw float32 file or an .h5 file),
/// checks it (size, SHA-256 for named models, every value finite and > 0), then decimates
/// (v[::d, ::d(, ::d)], dh *= d) and crops (model.crop_z, model.crop_y, model.crop_x). The
/// generated 3D models: "layered3d" (dipping layers under a water layer, with a slow spherical
/// inclusion; generated at model.nz, ny, nx, dh, default 48 x 40 x 64 at 20 m, then decimated
/// and cropped like any model: set model.decimate = 1 to keep its size) and "marmousi2_3d" (Marmousi2,
/// decimated and cropped, extruded along y over model.ny cells, default 32, with a lateral
/// variation: each y slice is shifted along x by up to a tenth of the width). Throws
/// ksweep::Error.
/// `dataset`: the HDF5 dataset read from an .h5 file.
VelocityModel load_velocity(ModelSection const& model, std::string const& dataset = "vp");

/// The model load_velocity would give (shape and dh after decimation, cropping and extrusion),
/// with `vp` empty: every check that needs no velocity values (sizes, crops, the HDF5 file's
/// header), at the cost of reading no model. Throws ksweep::Error.
VelocityModel model_shape(ModelSection const& model, std::string const& dataset = "vp");

/// The density (kg/m^3) of variable-density acoustics for the model `vm` (loaded from
/// `model`), from model.density: "gardner" or empty (rho = 310 vp^0.25, Gardner et al. 1974, SI
/// units, in double rounded once), a constant, or a file (dataset "rho" of an .h5 file; a raw
/// file of a named model's raw shape) read, decimated and cropped as model.source is (its shape must then equal the
/// model's; its values finite and > 0). Throws ksweep::Error naming model.density.
std::vector<float> load_density(ModelSection const& model, VelocityModel const& vm);

}  // namespace ksweep::io
