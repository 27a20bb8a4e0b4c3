#pragma once
/// \file config.hpp
/// The run configuration of the ksweep programs: typed sections with defaults, read from a
/// TOML file plus `--set section.key=value` overrides, and validated. Each key is declared once,
/// in the table of ksweep/io/keys.hpp (type, limits, choices, help, how it is recorded); the
/// structs below are where the values live.

#include <array>
#include <filesystem>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace ksweep::io {

/// [model]: where the velocity model comes from and how it is resampled.
struct ModelSection {
  /// "marmousi2", "marmousi2_fine", "marmousi", the generated 3D models "layered3d" and
  /// "marmousi2_3d", or a path to a raw .f32/.bin or an .h5 file (2D or 3D).
  std::string source = "marmousi2";
  /// Point subsampling of the source grid (v[::d, ::d], dh *= d).
  int decimate = 2;
  /// Grid size and spacing of a raw file (required for raw files only; 0 = unset).
  int nz = 0;
  int nx = 0;
  double dh = 0.0;
  /// Cells along y: a raw file with ny > 0 is 3D [nz][ny][nx]; the size of generated 3D models.
  int ny = 0;
  /// Half-open cell ranges [z0, z1), [y0, y1) (3D) and [x0, x1) after decimation; unset = whole model.
  std::optional<std::array<int, 2>> crop_z;
  std::optional<std::array<int, 2>> crop_x;
  std::optional<std::array<int, 2>> crop_y;
  /// Variable density (propagator.physics = "acoustic_vd"): "gardner" (rho = 310 vp^0.25, SI
  /// units; the default), a constant in kg/m^3 (written as a number in the file, kept here as its
  /// text), or a raw .f32/.bin or .h5 file of the model's shape before decimation and cropping
  /// (decimated and cropped as model.source is); a SEG-Y file too. Files hold kg/m^3 whatever
  /// model.units says (the velocity's unit).
  std::string density = "gardner";
  /// The unit of the values in a model file (raw, HDF5 or SEG-Y): "m/s" (the default) or
  /// "km/s" (multiplied by 1000 in double, rounded once to float32).
  std::string units = "m/s";
};

/// [time]: time stepping.
struct TimeSection {
  double dt = 0.002;
  int nt = 2000;
};

/// [wavelet]: the source wavelet.
struct WaveletSection {
  /// The Ricker wavelet's peak frequency (Hz) and delay (s): the source with source = "ricker",
  /// the reference of the estimate with "estimate".
  double freq = 5.0;
  double delay = 0.2;
  /// "ricker"; "estimate" (ksweep fwi: from the observed data by frequency-domain least squares
  /// against the starting model's Green's functions, ksweep/fwi/spectral.hpp); or a path to a
  /// wavelet file (.h5, .sgy/.segy or text: ksweep/io/wavelet.hpp).
  std::string source = "ricker";
  /// The estimate's stabilisation, relative to the peak power of the synthetic data.
  double stabilisation = 1e-3;
};

/// [shots]: source positions.
struct ShotsSection {
  int count = 20;
  /// Source depth as a cell index.
  int z = 2;
  /// Fractions of the model width; shots are evenly spaced, both ends included.
  std::array<double, 2> x_range{0.1, 0.9};
  /// 3D: shots along y (count_y lines of `count` shots; count x count_y in all), evenly spaced
  /// over y_range (fractions of the model's extent along y; [0.5, 0.5]: the middle line).
  int count_y = 1;
  std::array<double, 2> y_range{0.5, 0.5};
};

/// [receivers]: receiver line, evenly spaced over the full width.
struct ReceiversSection {
  int count = 200;
  /// Receiver depth as a cell index.
  int z = 4;
  /// 3D: receivers along y; count_y lines of `count` receivers (an areal patch when count_y > 1,
  /// a line when 1), evenly spaced over y_range (fractions of the extent along y).
  int count_y = 1;
  std::array<double, 2> y_range{0.5, 0.5};
};

/// [propagator]: discretisation and absorbing boundary.
struct PropagatorSection {
  int order = 4;
  int pml_width = 20;
  double pml_reflection = 1e-3;
  double pml_freq = 25.0;
  /// The velocity (m/s) of the layers' damping profiles; 0: the model's maximum velocity.
  double pml_velocity = 0.0;
  bool free_surface = false;
  /// "fp32" or "fp64".
  std::string precision = "fp32";
  /// Shots per kernel launch for `ksweep model`.
  int batch = 8;
  /// A name of names::schedule (see ksweep/base/names.hpp and ksweep/core/schedule.hpp).
  std::string schedule = "auto";
  /// "acoustic" (constant density: vp) or "acoustic_vd" (variable density: vp and rho).
  std::string physics = "acoustic";
};

/// [storage]: how the forward wavefield is kept for the adjoint pass.
struct StorageSection {
  /// A name of names::strategy (ksweep/base/names.hpp), as are location and dtype.
  std::string strategy = "boundary";
  /// A name of names::location.
  std::string location = "device";
  /// A name of names::dtype.
  std::string dtype = "fp32";
  int transfer_interval = 64;
  /// Directory for location = "disk"; empty = the system temporary directory.
  std::string disk_dir;
  bool pinned = true;
  /// The gradient's chain rule of the absorbing layer's copy of the model's edge cells
  /// (storage::StorageConfig::layer_chain).
  bool layer_chain = false;
};

/// [fwi]: full-waveform inversion.
struct FwiSection {
  int iterations = 30;
  int batch = 8;
  double lr = 25.0;
  /// "adam" (batches of `batch` shots) or "lbfgs" (every shot, a Wolfe line search).
  std::string optimizer = "adam";
  /// L-BFGS: correction pairs kept.
  int lbfgs_memory = 5;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-16;
  int seed = 1234;
  int checkpoint_every = 5;
  /// Velocity bounds in m/s; 0 disables a bound.
  double vmin = 1000.0;
  double vmax = 5000.0;
  /// Rows of the water layer kept fixed; -1 = detect from the true model.
  int water_rows = -1;
  /// Gaussian smoothing (cells) of the true model that gives the starting model.
  double smooth_sigma = 8.0;
  /// "mean" or "sum".
  std::string loss_norm = "mean";
  /// Path to an observed.h5 written by `ksweep model`; empty = model the data.
  std::string observed;
  double grad_smooth = 0.0;
  bool precondition = false;
  int figures_every = 1;
  bool save_models = true;
  /// The parameters inverted: ["vp"], or with variable density ["vp", "rho"] (or ["rho"]).
  std::vector<std::string> invert{"vp"};
  /// Density bounds in kg/m^3 when rho is inverted.
  double rho_min = 1000.0;
  double rho_max = 3000.0;
  /// Adam's step for the density in kg/m^3 per iteration (0: fwi.lr).
  double lr_rho = 0.0;
  /// Frequency continuation: stages of `iterations` iterations each, the observed data and the
  /// wavelet low-passed with zero phase below `max_freq` (Hz; ksweep/fwi/spectral.hpp), the
  /// optimizer restarted at each stage. Empty: one stage of the whole band. With stages,
  /// fwi.iterations is their sum unless given (a smaller value stops the run early; --resume
  /// continues it).
  struct Stage {
    double max_freq = 0;
    int iterations = 0;
    friend bool operator==(Stage const& a, Stage const& b) {
      return a.max_freq == b.max_freq && a.iterations == b.iterations;
    }
    friend bool operator!=(Stage const& a, Stage const& b) { return !(a == b); }
  };
  std::vector<Stage> stages;
};

/// The complete, validated configuration.
/// [survey]: the acquisition from a file (io/survey.hpp): a CSV table of traces or a SEG-Y
/// file's trace headers, positions in metres. Empty: the [shots] and [receivers] keys lay it out
/// (or, for fwi, a SEG-Y fwi.observed's headers).
struct SurveySection {
  std::string file;
};

/// [parallel]: how the ranks share the work.
struct ParallelSection {
  /// The model split into domains (ksweep/core/domain.hpp): [nx_parts] in 2D, [ny_parts,
  /// nx_parts] in 3D; the ranks form shot groups of their product. Empty: one domain.
  std::vector<int> domains;
};

/// [imaging]: `ksweep rtm` (ksweep/fwi/imaging.hpp) on the background model that fwi.smooth_sigma
/// and fwi.water_rows make of the true model.
struct ImagingSection {
  /// RTM's correlation: "born" (the Born adjoint J^T d) or "cross-correlation" (sum u lambda).
  std::string condition = "born";
  /// RTM: the image divided by the source illumination plus `stabilization` times its maximum.
  bool normalize = true;
  double stabilization = 1e-3;
  /// RTM: the negative Laplacian of the image, against low-wavenumber artefacts.
  bool laplacian = true;
  /// Least-squares RTM iterations after the RTM image (0: none).
  int lsrtm_iterations = 0;
  /// LSRTM preconditioned by the inverse source illumination (plus `stabilization` times its maximum).
  bool precondition = true;
};

/// [output]: extra output formats.
struct OutputSection {
  /// `ksweep model` writes observed.segy (SEG-Y rev 1 shot gathers, ksweep/io/segy.hpp) beside
  /// observed.h5.
  bool segy = false;
};

struct Config {
  ModelSection model;
  TimeSection time;
  WaveletSection wavelet;
  ShotsSection shots;
  ReceiversSection receivers;
  SurveySection survey;
  PropagatorSection propagator;
  StorageSection storage;
  FwiSection fwi;
  ParallelSection parallel;
  ImagingSection imaging;
  OutputSection output;
  /// The TOML file this was read from (empty when read from a string).
  std::string source_path;
  /// The keys the file or an override set ("section.key"), sorted; the others hold defaults.
  std::vector<std::string> given;
  /// Every key whose value may name a file the run reads ("section.key", value), declared where
  /// the key is read (load_config), so that the program protects each (--overwrite may not
  /// replace an input) without a list of its own that a new key could miss.
  std::vector<std::pair<std::string, std::string>> input_paths;
  bool is_given(std::string const& dotted) const;
};

/// Keys that only a 3D model uses (shots.count_y, shots.y_range, receivers.count_y,
/// receivers.y_range, model.crop_y, model.ny > 0): given for a 2D model they are refused, naming each. Throws
/// ksweep::Error.
void check_dimension_keys(Config const& config, bool three_d);

/// Reads `file` (TOML), applies `overrides` ("section.key=value", value parsed as TOML, a
/// bare word taken as a string) and validates the result. Throws ksweep::Error.
Config load_config(std::filesystem::path const& file, std::vector<std::string> const& overrides);

/// As load_config, from TOML text (an empty string gives the defaults).
Config config_from_string(std::string const& toml_text, std::vector<std::string> const& overrides);

/// Checks every range and enumeration of `config`. Throws ksweep::Error naming the key,
/// the value and the allowed values.
void validate(Config const& config);

/// The resolved configuration as JSON ({"model": {...}, "time": {...}, ...}).
nlohmann::json config_to_json(Config const& config);

/// A path as messages show it (ksweep::shown: escaped, shortened), with the working directory
/// said when the path is relative.
std::string shown_path(std::filesystem::path const& path);

/// Source x positions (cells): shots.count positions rounded to the nearest cell, evenly
/// spaced over [x_range[0]*(nx-1), x_range[1]*(nx-1)]; one shot sits at the midpoint.
std::vector<int> shot_x_positions(Config const& config, int nx);

/// Receiver x positions (cells): receivers.count positions evenly spaced from 0 to nx-1.
std::vector<int> receiver_x_positions(Config const& config, int nx);

/// 3D: the y positions (cells) of the shot lines (shots.count_y of them over shots.y_range) and
/// of the receiver lines (receivers.count_y over receivers.y_range) on a model of ny cells.
std::vector<int> shot_y_positions(Config const& config, int ny);
std::vector<int> receiver_y_positions(Config const& config, int ny);

}  // namespace ksweep::io
