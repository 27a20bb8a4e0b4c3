// ksweep model: forward modelling of every shot of the config, written to observed.h5.

#include "common.hpp"
#include "guard.hpp"

#include <ksweep/core/profiling.hpp>
#include <ksweep/core/runtime.hpp>
#include <ksweep/io/hdf5_io.hpp>
#include <ksweep/io/segy.hpp>

#include <Kokkos_Core.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <optional>

namespace ksweep::app {

fwi::AfterBatch between_batches(bool verbose) {
  return [verbose](int done, int shots) {
    if (verbose) std::printf("  shots %d of %d modelled\n", done, shots), std::fflush(stdout);
    if (int const sig = stop_signal(); sig && done < shots)
      throw Interrupted(sig, "stopped by " + signal_name(sig) + " while modelling shots " + std::to_string(done + 1) +
                                 "-" + std::to_string(shots) + "; nothing was written");
  };
}

io::RecordsFile model_observed(io::Config const& cfg, io::VelocityModel const& vm, core::Survey const& survey,
                               bool verbose, std::vector<double> const& wavelet, std::vector<float> const* density,
                               comm::Communicator const* ranks) {
  throw_if_stopped("modelling");
  auto const t0 = std::chrono::steady_clock::now();
  auto rec = fwi::model_data(cfg, vm, survey, wavelet, density, ranks, between_batches(verbose));
  double const secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (verbose) {
    core::Layout const l(model_grid(vm), make_pml(cfg), cfg.propagator.order);
    double const cells = static_cast<double>(l.padded_cells()) * cfg.time.nt * survey.n_shots;
    std::string const padded =
        std::to_string(l.NZ) + " x " + (l.dim == 3 ? std::to_string(l.NY) + " x " : "") + std::to_string(l.NX);
    std::printf("modelled %d shots x %d steps on %s cells (padded %s) in %.2f s: %.3g cells/s\n", survey.n_shots,
                cfg.time.nt, vm.shape().c_str(), padded.c_str(), secs, cells / secs);
  }
  return rec;
}

namespace {

/// What the checks of `ksweep model` leave for the modelling.
struct ModelInputs {
  io::VelocityModel vm;
  core::Survey survey;
  std::vector<double> wavelet;
  core::DomainSplit split;
  std::vector<RunInput> files;  ///< what the run reads (for --overwrite)
};

/// Every check first, the cheap ones (sizes from the model's shape, memory, the output folder)
/// before the model is read: nothing is written until they all pass. The same checks on the
/// same inputs on every rank: one message (rank 0's) when they fail.
ModelInputs check_model_inputs(io::Config const& cfg, RunOptions const& opt, comm::Communicator const& comm) {
  ModelInputs in;
  auto const shape = on_every_rank(comm, [&] { return io::model_shape(cfg.model); });
  core::ModelGrid const grid = model_grid(shape);
  collectively(comm, [&] {
    io::check_dimension_keys(cfg, shape.dim() == 3);
    KSWEEP_REQUIRE(cfg.wavelet.source != "estimate",
                   "wavelet.source = \"estimate\" estimates the wavelet from observed data (ksweep fwi with "
                   "fwi.observed); ksweep model makes data and needs a source: set wavelet.source = \"ricker\" or "
                   "a wavelet file (.h5, .sgy/.segy or text)");
  });
  in.wavelet = on_every_rank(comm, [&] { return make_wavelet(cfg); });  // a file's errors before any write
  in.survey = checked_survey(cfg, shape, comm);
  // parallel.domains: every rank models its shot group's shots on its subdomain (the same message
  // on every rank for a split that does not fit).
  in.split = domain_split(cfg, grid);
  check_split_run(cfg, grid, in.split, in.survey, comm);
  auto const est = fwi::estimate_model(cfg, shape, in.survey.n_shots, in.survey.n_receivers,
                                       cfg.propagator.precision == "fp64", cfg.propagator.batch, in.split);
  auto const mm = fwi::machine_memory(cfg);
  if (opt.dry_run && comm.is_root()) std::printf("%s", fwi::memory_table({est}, mm, 1).c_str());
  fwi::check_memory({est}, mm, 1);
  in.files = {{"--config", cfg.source_path}, {"model.source", cfg.model.source}};
  if (!cfg.survey.file.empty()) in.files.push_back({"survey.file", cfg.survey.file});
  if (comm.is_root()) check_output_folder(opt.out, opt.overwrite, false, in.files);
  in.vm = on_every_rank(comm, [&] { return io::load_velocity(cfg.model); });
  auto const& vm = in.vm;
  throw_if_stopped("reading the model");
  core::check_velocity(vm.vp.data(), static_cast<long long>(vm.vp.size()));
  core::check_cfl(*std::max_element(vm.vp.begin(), vm.vp.end()), cfg.time.dt, vm.dh, cfg.propagator.order, vm.dim());
  if (fwi::has_density(cfg)) (void)io::load_density(cfg.model, vm);  // its errors before any write
  if (comm.is_root()) warn(fwi::acquisition_warnings(cfg, vm, in.survey));
  return in;
}

/// observed.h5 (and observed.segy) into the claimed folder, then the shot gather's figure (rank 0).
void write_observed(io::Config const& cfg, io::RecordsFile const& rec, OutputFolder& folder) {
  fs::path const& out = folder.path();
  folder.claim();
  {
    core::ScopedRegion region("ksweep::model::output");
    // SEG-Y first: its fields may not hold the survey (coordinates in millimetres in 32 bits,
    // at most 32767 samples), and a refusal must leave no observed.h5 behind.
    if (cfg.output.segy) io::write_records_segy(out / "observed.segy", rec);
    io::write_records(out / "observed.h5", rec);
  }
  std::printf("wrote %s\n", io::shown_path(out / "observed.h5").c_str());
  if (cfg.output.segy) std::printf("wrote %s\n", io::shown_path(out / "observed.segy").c_str());
  folder.finish();
  make_directory(out / "figures");
  if (run_figure_script("plot_gather.py",
                        {(out / "observed.h5").string(), (out / "figures" / "shot_gather.png").string(), "--shot",
                         std::to_string(rec.shots / 2)}))
    std::printf("wrote %s\n", io::shown_path(out / "figures" / "shot_gather.png").c_str());
  else remove_if_empty(out / "figures");
}

}  // namespace

int run_model(io::Config const& cfg, RunOptions const& opt, comm::Communicator const& comm) {
  auto const in = check_model_inputs(cfg, opt, comm);
  auto const& vm = in.vm;
  auto const& survey = in.survey;
  auto const& wavelet = in.wavelet;
  auto const& split = in.split;
  if (opt.dry_run) {
    if (comm.is_root()) std::printf("ksweep model --dry-run: the inputs are valid; nothing was written\n");
    return 0;
  }
  // The shots over the ranks (shot groups of one rank, or of one rank per subdomain with
  // parallel.domains): every rank gets every shot's records; rank 0 writes them.
  comm::Communicator const* const ranks = comm.size() > 1 ? &comm : nullptr;
  std::optional<OutputFolder> folder;  // locked before the modelling; every rank learns of its failure
  collectively(comm, [&] {
    if (comm.is_root()) folder.emplace(opt.out, opt.overwrite, false, true, in.files);
  });
  if (!comm.is_root()) {
    (void)model_observed(cfg, vm, survey, false, wavelet, nullptr, ranks);
    return 0;
  }
  std::printf("ksweep model: %s, %s cells at %g m, %d shots, %d receivers, nt %d, dt %g s, order %d (%s%s)\n",
              shown(vm.description).c_str(), vm.shape().c_str(), vm.dh, survey.n_shots, survey.n_receivers, cfg.time.nt,
              cfg.time.dt, cfg.propagator.order, cfg.propagator.precision.c_str(),
              cfg.propagator.physics == "acoustic" ? "" : (", " + cfg.propagator.physics).c_str());
  if (ranks)
    std::printf("%d ranks: %d shot group(s) of %d rank(s) (parallel.domains %s)\n", comm.size(),
                comm.size() / split.count(), split.count(), core::describe(split, vm.dim()).c_str());
  auto const rec = model_observed(cfg, vm, survey, true, wavelet, nullptr, ranks);
  if (auto const silent = silent_data(rec.data, "the modelled data", cfg); !silent.empty())
    throw Error(silent + "; nothing was written");
  write_observed(cfg, rec, *folder);
  return 0;
}

}  // namespace ksweep::app
