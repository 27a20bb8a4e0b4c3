#pragma once
// ksweep fwi's inputs: every check of them before the first write (the library's checks of the
// options and models among them), the starting models, and the library's problem and options
// made from the configuration.

#include "common.hpp"
#include "guard.hpp"

#include <ksweep/fwi/inversion.hpp>
#include <ksweep/fwi/spectral.hpp>
#include <ksweep/fwi/workflow.hpp>
#include <ksweep/io/checkpoint.hpp>

#include <nlohmann/json.hpp>

#include <utility>
#include <vector>

namespace ksweep::app {

/// L-BFGS's memory between fwi::LbfgsState and the checkpoint's record of it (the same fields).
template <class From, class To>
void copy_lbfgs(From const& a, To& b) {
  b.pairs = a.pairs;
  b.s = a.s;
  b.y = a.y;
  b.rho = a.rho;
  b.gradient = a.gradient;
  b.loss = a.loss;
  b.gamma = a.gamma;
  b.iterations = a.iterations;
  b.evaluations = a.evaluations;
}

/// Whether the run inverts with variable density.
inline bool variable_density(io::Config const& cfg) { return cfg.propagator.physics == "acoustic_vd"; }

/// What the checks before the first write leave for the run.
struct Inputs {
  core::Survey survey;
  io::VelocityModel truth;
  std::vector<float> v0;                  ///< the starting model
  std::vector<float> rho_true, rho0;      ///< variable density: the true and starting densities
  int water = 0;                          ///< water rows kept
  io::RecordsFile obs;                    ///< observed data read from fwi.observed (rank 0)
  std::pair<double, int> obs_axis{0, 0};  ///< the observed file's own dt and nt (rank 0; 0: modelled)
  std::vector<double> wavelet;            ///< the source (full band): Ricker, a file's, or the estimate
  fwi::Stages stages;                     ///< frequency continuation (each stage's wavelet low-passed once)
  fwi::WaveletEstimate estimate;          ///< wavelet.source = "estimate": the estimate and its residuals
  nlohmann::json run;                     ///< the run's identity
  io::Checkpoint ck;                      ///< --resume: the checkpoint
  bool resuming = false, in_place = false;
};

/// Every check that can fail runs before the first byte is written, the cheap ones first: the
/// sizes (from the model's shape, read without its values), the memory estimate, the
/// checkpoint's header and the output folder come before the model is read or anything
/// model-sized is computed.
Inputs check_inputs(io::Config const& cfg, RunOptions const& opt, comm::Communicator const& comm,
                    io::VelocityModel const& shape);

/// The library's options from the configuration: `water` rows kept (fwi.water_rows, or the
/// rows detected in the model), fwi.vmax = 0 the stability limit of time.dt.
fwi::Options inversion_options(io::Config const& cfg, core::ModelGrid const& grid, int water);

/// The library's problem from the checked inputs: the whole band's wavelet and data (the
/// workflow's stages low-pass them); the observed data move into it.
fwi::Problem inversion_problem(io::Config const& cfg, Inputs& in);

/// The files a run reads, by the key that names each (for --overwrite, which may not replace them).
std::vector<RunInput> run_inputs(io::Config const& cfg, RunOptions const& opt);

}  // namespace ksweep::app
