#pragma once
// Shared pieces of the ksweep subcommands: geometry from the config, wavelets, the figure
// scripts, progress output.

#include <ksweep/comm/communicator.hpp>
#include <ksweep/core/domain.hpp>
#include <ksweep/core/geometry.hpp>
#include <ksweep/core/wavelet.hpp>
#include <ksweep/fwi/configured.hpp>
#include <ksweep/fwi/devices.hpp>
#include <ksweep/io/config.hpp>
#include <ksweep/io/hdf5_io.hpp>
#include <ksweep/io/velocity.hpp>

#include <filesystem>
#include <string>
#include <vector>

namespace ksweep::app {

namespace fs = std::filesystem;

// The grid, layer, survey, wavelet and modelling of a configuration are the library's
// (ksweep/fwi/configured.hpp), shared with the Python package.
using fwi::acquisition;
using fwi::check_split_run;
using fwi::domain_split;
using fwi::make_pml;
using fwi::make_wavelet;
using fwi::model_end;
using fwi::model_grid;
using fwi::ricker_wavelet;
using fwi::set_geometry;
using fwi::silent_data;
using fwi::survey_of;
using fwi::wavelet_from_file;

/// The survey of a model of `shape` (fwi::acquisition) after the checks of the time axis, the
/// grid and its layer, and the survey against them, on every rank (one message when they fail).
core::Survey checked_survey(io::Config const& cfg, io::VelocityModel const& shape, comm::Communicator const& comm);

/// Between two batches of modelled shots: progress (`verbose`) and SIGINT / SIGTERM (Interrupted).
fwi::AfterBatch between_batches(bool verbose);
/// The records of every shot of `survey` (fwi::model_data) with progress (`verbose`: a line per
/// batch and the speed) and SIGINT / SIGTERM honoured between batches (Interrupted).
io::RecordsFile model_observed(io::Config const& cfg, io::VelocityModel const& vm, core::Survey const& survey,
                               bool verbose, std::vector<double> const& wavelet,
                               std::vector<float> const* density = nullptr, comm::Communicator const* ranks = nullptr);
/// Runs a figure script of drivers/python with /usr/bin/python3; returns false (and prints a
/// warning) when it fails, since the data it draws is already on disk.
bool run_figure_script(std::string const& script, std::vector<std::string> const& args);
/// Creates `dir` (and parents); errors name the directory.
void make_directory(fs::path const& dir);
/// Removes `dir` when it is an empty folder (a result folder whose only writer failed).
void remove_if_empty(fs::path const& dir);
/// "1h02m03s" style duration.
std::string format_seconds(double s);
/// Command-line options of `model`, `fwi` and `rtm` beyond the configuration.
struct RunOptions {
  fs::path out;
  std::string resume;             ///< fwi: folder whose checkpoint to continue from
  bool overwrite = false;         ///< replace the results of another run in `out`
  bool dry_run = false;           ///< print the memory estimate and exit
  std::vector<std::string> argv;  ///< the program's arguments (for the resume command)
};

/// Prints each warning (fwi::acquisition_warnings, ...) on stderr after "ksweep: "; empty ones
/// are skipped.
void warn(std::vector<std::string> const& warnings);

using fwi::rank_devices;

int run_model(io::Config const& cfg, RunOptions const& opt, comm::Communicator const& comm);
int run_fwi(io::Config const& cfg, RunOptions const& opt, comm::Communicator const& comm);
int run_rtm(io::Config const& cfg, RunOptions const& opt, comm::Communicator const& comm);

}  // namespace ksweep::app
