#pragma once
// Shared pieces of the ksweep subcommands: geometry from the config, wavelets, the figure
// scripts, progress output.

#include <ksweep/comm/communicator.hpp>
#include <ksweep/core/geometry.hpp>
#include <ksweep/core/wavelet.hpp>
#include <ksweep/io/config.hpp>
#include <ksweep/io/velocity.hpp>

#include <filesystem>
#include <string>
#include <vector>

namespace ksweep::app {

namespace fs = std::filesystem;

/// Every shot of the config on a model of nz x nx: one source per shot, the same receiver
/// line for all.
core::Survey make_survey(io::Config const& cfg, int nz, int nx);
core::PmlConfig make_pml(io::Config const& cfg);
/// Ricker wavelet of the config.
std::vector<double> make_wavelet(io::Config const& cfg);
/// Runs a figure script of drivers/python with /usr/bin/python3; returns false (and prints a
/// warning) when it fails, since the data it draws is already on disk.
bool run_figure_script(std::string const& script, std::vector<std::string> const& args);
/// Creates `dir` (and parents); errors name the directory.
void make_directory(fs::path const& dir);
/// "1h02m03s" style duration.
std::string format_seconds(double s);
/// Prints the sampling warning, if any, on rank 0.
void warn_sampling(io::Config const& cfg, io::VelocityModel const& vm, comm::Communicator const& comm);

int run_model(io::Config const& cfg, fs::path const& out, comm::Communicator const& comm);
int run_fwi(io::Config const& cfg, fs::path const& out, std::string const& resume, comm::Communicator const& comm);

}  // namespace ksweep::app
