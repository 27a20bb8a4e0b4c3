// ksweep model: forward modelling of every shot of the config, written to observed.h5.

#include "common.hpp"
#include "guard.hpp"
#include "memory_estimate.hpp"

#include <ksweep/core/profiling.hpp>
#include <ksweep/fwi/modeling.hpp>
#include <ksweep/core/runtime.hpp>
#include <ksweep/io/hdf5_io.hpp>
#include <ksweep/io/segy.hpp>

#include <Kokkos_Core.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <limits>
#include <optional>

namespace ksweep::app {

namespace {

template <class Real>
io::RecordsFile model_records(io::Config const& cfg, io::VelocityModel const& vm, core::Survey const& survey,
                              bool verbose, std::vector<double> const& wavelet, std::vector<float> const* density,
                              comm::Communicator const* ranks) {
  int const nt = cfg.time.nt, nr = survey.n_receivers, n_shots = survey.n_shots;
  fwi::ModelingSetup setup;
  setup.grid = model_grid(vm);
  setup.pml = make_pml(cfg);
  setup.order = cfg.propagator.order;
  setup.dt = cfg.time.dt;
  setup.nt = nt;
  setup.survey = survey;
  setup.batch = std::min(cfg.propagator.batch, n_shots);
  setup.schedule = core::parse_schedule(cfg.propagator.schedule);
  setup.physics = fwi::parse_physics(cfg.propagator.physics);
  if (ranks) {  // parallel.domains: every rank of `ranks` models its shot group's shots on its subdomain
    setup.domains = domain_split(cfg, setup.grid);
    setup.ranks = *ranks;
  }
  fwi::Modeling<Real> modeling(setup);
  {
    core::ScopedRegion region("ksweep::model::model");
    std::vector<Real> const vp(vm.vp.begin(), vm.vp.end());
    if (setup.physics == fwi::Physics::acoustic_vd) {
      auto const rho_model = density ? *density : io::load_density(cfg.model, vm);
      std::vector<Real> const rho(rho_model.begin(), rho_model.end());
      modeling.set_model(vp.data(), rho.data());
    } else {
      modeling.set_velocity(vp.data());
    }
  }
  io::RecordsFile out;
  out.shots = n_shots;
  out.nt = nt;
  out.receivers = nr;
  out.dt = cfg.time.dt;
  out.dh = vm.dh;
  out.order = cfg.propagator.order;
  // The Ricker wavelet's parameters; NaN for another wavelet (what ksweep fwi then checks nothing of).
  bool const ricker = cfg.wavelet.source == "ricker";
  out.freq = ricker ? cfg.wavelet.freq : std::numeric_limits<double>::quiet_NaN();
  out.delay = ricker ? cfg.wavelet.delay : std::numeric_limits<double>::quiet_NaN();
  out.nz = vm.nz;
  out.nx = vm.nx;
  out.ny = vm.ny;
  set_geometry(out, survey, vm.dh);
  std::vector<Real> w(static_cast<std::size_t>(n_shots) * nt), rec(static_cast<std::size_t>(n_shots) * nt * nr);
  for (int s = 0; s < n_shots; ++s)
    for (int t = 0; t < nt; ++t) w[static_cast<std::size_t>(s) * nt + t] = static_cast<Real>(wavelet[t]);
  modeling.set_after_batch([&](int done, int shots) {
    if (verbose) std::printf("  shots %d of %d modelled\n", done, shots), std::fflush(stdout);
    if (int const sig = stop_signal(); sig && done < shots)
      throw Interrupted(sig, "stopped by " + signal_name(sig) + " while modelling shots " + std::to_string(done + 1) +
                                 "-" + std::to_string(shots) + "; nothing was written");
  });
  throw_if_stopped("modelling");
  auto const t0 = std::chrono::steady_clock::now();
  {
    core::ScopedRegion region("ksweep::model::forward");
    modeling.forward(w.data(), rec.data());
  }
  double const secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  out.data.resize(rec.size());
  std::transform(rec.begin(), rec.end(), out.data.begin(), [](Real x) { return static_cast<float>(x); });
  if (verbose) {
    core::Layout const l(setup.grid, setup.pml, setup.order);
    double const cells = static_cast<double>(l.padded_cells()) * nt * n_shots;
    std::string const padded =
        std::to_string(l.NZ) + " x " + (l.dim == 3 ? std::to_string(l.NY) + " x " : "") + std::to_string(l.NX);
    std::printf("modelled %d shots x %d steps on %s cells (padded %s) in %.2f s: %.3g cells/s\n", n_shots, nt,
                vm.shape().c_str(), padded.c_str(), secs, cells / secs);
  }
  return out;
}

}  // namespace

io::RecordsFile model_observed(io::Config const& cfg, io::VelocityModel const& vm, core::Survey const& survey,
                               bool verbose, std::vector<double> const& wavelet, std::vector<float> const* density,
                               comm::Communicator const* ranks) {
  return cfg.propagator.precision == "fp64" ? model_records<double>(cfg, vm, survey, verbose, wavelet, density, ranks)
                                            : model_records<float>(cfg, vm, survey, verbose, wavelet, density, ranks);
}

int run_model(io::Config const& cfg, RunOptions const& opt, comm::Communicator const& comm) {
  // Every check first, the cheap ones (sizes from the model's shape, memory, the output
  // folder) before the model is read: nothing is written until they all pass.
  auto const shape = on_every_rank(comm, [&] { return io::model_shape(cfg.model); });
  core::ModelGrid const grid = model_grid(shape);
  // The same checks on the same inputs on every rank: one message (rank 0's) when they fail.
  collectively(comm, [&] {
    io::check_dimension_keys(cfg, shape.dim() == 3);
    KSWEEP_REQUIRE(cfg.wavelet.source != "estimate",
                   "wavelet.source = \"estimate\" estimates the wavelet from observed data (ksweep fwi with "
                   "fwi.observed); ksweep model makes data and needs a source: set wavelet.source = \"ricker\" or "
                   "a wavelet file (.h5, .sgy/.segy or text)");
  });
  auto const wavelet = on_every_rank(comm, [&] { return make_wavelet(cfg); });  // a file's errors before any write
  auto const survey = on_every_rank(comm, [&] {
    auto s = acquisition(cfg, shape);
    core::check_time(cfg.time.dt, cfg.time.nt);
    core::check_grid(grid, make_pml(cfg), cfg.propagator.order);
    core::check_survey(s, grid, make_pml(cfg));
    return s;
  });
  // parallel.domains: every rank models its shot group's shots on its subdomain (the same message
  // on every rank for a split that does not fit).
  auto const split = domain_split(cfg, grid);
  check_split_run(cfg, grid, split, survey, comm);
  auto const est = estimate_model(cfg, shape, survey.n_shots, survey.n_receivers, cfg.propagator.precision == "fp64",
                                  cfg.propagator.batch, split);
  auto const mm = machine_memory(cfg);
  if (opt.dry_run && comm.is_root()) std::printf("%s", memory_table({est}, mm, 1).c_str());
  check_memory({est}, mm, 1);
  std::vector<RunInput> inputs{{"--config", cfg.source_path}, {"model.source", cfg.model.source}};
  if (!cfg.survey.file.empty()) inputs.push_back({"survey.file", cfg.survey.file});
  if (comm.is_root()) check_output_folder(opt.out, opt.overwrite, false, inputs);
  auto const vm = on_every_rank(comm, [&] { return io::load_velocity(cfg.model); });
  throw_if_stopped("reading the model");
  core::check_velocity(vm.vp.data(), static_cast<long long>(vm.vp.size()));
  core::check_cfl(*std::max_element(vm.vp.begin(), vm.vp.end()), cfg.time.dt, vm.dh, cfg.propagator.order, vm.dim());
  if (cfg.propagator.physics == "acoustic_vd") (void)io::load_density(cfg.model, vm);  // its errors before any write
  warn_acquisition(cfg, vm, survey, comm);
  if (opt.dry_run) {
    if (comm.is_root()) std::printf("ksweep model --dry-run: the inputs are valid; nothing was written\n");
    return 0;
  }
  if (!split.split() && !comm.is_root()) return 0;  // rank 0 models every shot
  // The output folder (rank 0), locked before the modelling; split, every rank learns of its failure.
  fs::path const out = opt.out;
  std::optional<OutputFolder> folder;
  auto const make_folder = [&] {
    if (comm.is_root()) folder.emplace(out, opt.overwrite, false, true, inputs);
  };
  if (split.split()) collectively(comm, make_folder);
  else make_folder();
  if (!comm.is_root()) {  // a split model: this rank's shot group and subdomain
    (void)model_observed(cfg, vm, survey, false, wavelet, nullptr, &comm);
    return 0;
  }
  std::printf("ksweep model: %s, %s cells at %g m, %d shots, %d receivers, nt %d, dt %g s, order %d (%s%s)\n",
              shown(vm.description).c_str(), vm.shape().c_str(), vm.dh, survey.n_shots, survey.n_receivers, cfg.time.nt,
              cfg.time.dt, cfg.propagator.order, cfg.propagator.precision.c_str(),
              cfg.propagator.physics == "acoustic" ? "" : (", " + cfg.propagator.physics).c_str());
  if (split.split())
    std::printf("parallel.domains %s: %d shot group(s) of %d ranks\n", core::describe(split, vm.dim()).c_str(),
                comm.size() / split.count(), split.count());
  auto const rec = model_observed(cfg, vm, survey, true, wavelet, nullptr, split.split() ? &comm : nullptr);
  if (auto const silent = silent_data(rec.data, "the modelled data", cfg); !silent.empty())
    throw Error(silent + "; nothing was written");
  folder->claim();
  {
    core::ScopedRegion region("ksweep::model::output");
    // SEG-Y first: its fields may not hold the survey (coordinates in millimetres in 32 bits,
    // at most 32767 samples), and a refusal must leave no observed.h5 behind.
    if (cfg.output.segy) io::write_records_segy(out / "observed.segy", rec);
    io::write_records(out / "observed.h5", rec);
  }
  std::printf("wrote %s\n", io::shown_path(out / "observed.h5").c_str());
  if (cfg.output.segy) std::printf("wrote %s\n", io::shown_path(out / "observed.segy").c_str());
  folder->finish();
  make_directory(out / "figures");
  int const mid = survey.n_shots / 2;
  if (run_figure_script("plot_gather.py",
                        {(out / "observed.h5").string(), (out / "figures" / "shot_gather.png").string(), "--shot",
                         std::to_string(mid)}))
    std::printf("wrote %s\n", io::shown_path(out / "figures" / "shot_gather.png").c_str());
  else remove_if_empty(out / "figures");
  return 0;
}

}  // namespace ksweep::app
