#pragma once
// ksweep fwi's inputs: every check of them before the first write, the starting models and the
// library's problem (ksweep/fwi/configured.hpp), with the program's output folder and signals.

#include "common.hpp"
#include "guard.hpp"

#include <ksweep/fwi/configured.hpp>

#include <vector>

namespace ksweep::app {

using fwi::has_density;

/// What the checks before the first write leave for the run (the library's).
using Inputs = fwi::RunInputs;
using fwi::inversion_problem;

/// Every check that can fail runs before the first byte is written (fwi::check_run_inputs), the
/// output folder's among them, SIGINT / SIGTERM honoured between the long steps, warnings and
/// the --dry-run memory table printed on rank 0.
Inputs check_inputs(io::Config const& cfg, RunOptions const& opt, comm::Communicator const& comm,
                    io::VelocityModel const& shape);

/// The files a run reads, by the key that names each (for --overwrite, which may not replace them).
std::vector<RunInput> run_inputs(io::Config const& cfg, RunOptions const& opt);

}  // namespace ksweep::app
