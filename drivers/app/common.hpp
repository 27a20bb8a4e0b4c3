#pragma once
// Shared pieces of the ksweep subcommands: geometry from the config, wavelets, the figure
// scripts, progress output.

#include <ksweep/comm/communicator.hpp>
#include <ksweep/core/domain.hpp>
#include <ksweep/core/geometry.hpp>
#include <ksweep/core/wavelet.hpp>
#include <ksweep/io/config.hpp>
#include <ksweep/io/hdf5_io.hpp>
#include <ksweep/io/velocity.hpp>

#include <filesystem>
#include <string>
#include <vector>

namespace ksweep::app {

namespace fs = std::filesystem;

/// Every shot of the config on a model of nz x nx (x ny in 3D, ny > 0): one source per shot,
/// the same receivers for all (a line, or in 3D lines along x at receivers.count_y positions
/// in y). 3D shots are shots.count_y lines of shots.count, y-major.
core::Survey make_survey(io::Config const& cfg, int nz, int nx, int ny = 0);
/// The acquisition of a run on model `shape`: the survey of [survey] file when given (checked
/// against the model's extent), else make_survey's layout.
core::Survey acquisition(io::Config const& cfg, io::VelocityModel const& shape);
/// The far corner of a model in metres: ((nz-1) dh, (nx-1) dh, (ny-1) dh).
io::Position model_end(io::VelocityModel const& shape);
/// A survey in cells from a geometry in metres (one source per shot; each shot's receivers, the
/// rest of its slots silent). Positions within 1e-9 of a cell are that cell.
core::Survey survey_of(io::RecordsFile const& geometry, double dh);
/// The geometry of `survey` in metres into `records` (shots, receivers, src_pos, rec_pos, rec_count).
void set_geometry(io::RecordsFile& records, core::Survey const& survey, double dh);
core::PmlConfig make_pml(io::Config const& cfg);
/// The grid of a model: a volume when the model has ny > 0 (the files' convention for 3D), else a
/// plane.
core::ModelGrid model_grid(io::VelocityModel const& vm);

/// The split of parallel.domains of `grid`: [nx_parts] or [ny_parts, nx_parts] ({1, 1}: one
/// domain), its cuts aligned as the storage's codec needs (core::cut_alignment).
core::DomainSplit domain_split(io::Config const& cfg, core::ModelGrid const& grid);
/// The Ricker wavelet of wavelet.freq and wavelet.delay (time.nt samples of time.dt).
std::vector<double> ricker_wavelet(io::Config const& cfg);
/// The source wavelet of wavelet.source: the Ricker wavelet, or a wavelet file's samples on the
/// modelling's time axis; for "estimate", the Ricker wavelet (the estimate's reference).
std::vector<double> make_wavelet(io::Config const& cfg);
/// Whether wavelet.source names a wavelet file.
bool wavelet_from_file(io::Config const& cfg);
/// The records of every shot of `survey` on the model `vm` with the source `wavelet`, in
/// propagator.precision (model.cpp); `density` (variable density) replaces model.density's.
/// With `ranks` and parallel.domains, the modelling is split (collective over `ranks`: each
/// shot group models its shots on its subdomains) and every rank gets every shot's records.
io::RecordsFile model_observed(io::Config const& cfg, io::VelocityModel const& vm, core::Survey const& survey,
                               bool verbose, std::vector<double> const& wavelet,
                               std::vector<float> const* density = nullptr, comm::Communicator const* ranks = nullptr);
/// Runs a figure script of drivers/python with /usr/bin/python3; returns false (and prints a
/// warning) when it fails, since the data it draws is already on disk.
bool run_figure_script(std::string const& script, std::vector<std::string> const& args);
/// Creates `dir` (and parents); errors name the directory.
void make_directory(fs::path const& dir);
/// A split model's checks (collective, the same message on every rank): the split itself
/// (core::check_split), and every shot's points against the cuts (an off-grid point whose taps
/// cross a cut is refused here, before anything is allocated, not when its subdomain is built).
void check_split_run(io::Config const& cfg, core::ModelGrid const& grid, core::DomainSplit const& split,
                     core::Survey const& survey, comm::Communicator const& comm);
/// Records that are zero everywhere (or subnormal: below the smallest normal float) carry no
/// information: the loss would be the synthetic data's energy and an inversion would fit
/// silence; records with a sample that is not finite (a wave that overflowed float32) cannot be
/// inverted or written. Returns the message naming `what` and the likely causes, empty when `d`
/// holds a finite signal.
std::string silent_data(std::vector<float> const& d, std::string const& what, io::Config const& cfg);
/// Removes `dir` when it is an empty folder (a result folder whose only writer failed).
void remove_if_empty(fs::path const& dir);
/// "1h02m03s" style duration.
std::string format_seconds(double s);
/// Prints the sampling warning, if any, on rank 0.
void warn_sampling(io::Config const& cfg, io::VelocityModel const& vm, comm::Communicator const& comm);

/// Command-line options of `model` and `fwi` beyond the configuration.
struct RunOptions {
  fs::path out;
  std::string resume;             ///< fwi: folder whose checkpoint to continue from
  bool overwrite = false;         ///< replace the results of another run in `out`
  bool dry_run = false;           ///< print the memory estimate and exit
  std::vector<std::string> argv;  ///< the program's arguments (for the resume command)
};

/// Warnings a geophysicist expects, on rank 0: wavelet under-sampled in space (the grid) or
/// in time (its peak frequency against the Nyquist frequency of time.dt), more shots than
/// distinct source cells.
void warn_acquisition(io::Config const& cfg, io::VelocityModel const& vm, core::Survey const& survey,
                      comm::Communicator const& comm);

/// Warns (stderr) that the [shots] and [receivers] keys the configuration gives are not used,
/// `what` saying what replaces them ("survey.file replaces").
void warn_unused_layout(io::Config const& cfg, std::string const& what);

/// What one rank computes on: its node, its rank there and its device.
struct RankDevice {
  int rank = 0, local_rank = 0, device_id = -1;  ///< device_id -1: the host
  std::string host, device;                      ///< node name; core::device_description()
};
/// Every rank's RankDevice, in rank order, on rank 0 (collective; empty on the other ranks).
std::vector<RankDevice> rank_devices(comm::Communicator const& comm);

int run_model(io::Config const& cfg, RunOptions const& opt, comm::Communicator const& comm);
int run_fwi(io::Config const& cfg, RunOptions const& opt, comm::Communicator const& comm);

}  // namespace ksweep::app
