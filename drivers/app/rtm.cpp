// ksweep rtm: reverse-time migration (and least-squares RTM) of a survey on the smoothed model,
// written to image.h5, summary.json and figures.

#include "common.hpp"
#include "guard.hpp"

#include <ksweep/fwi/configured.hpp>
#include <ksweep/fwi/imaging.hpp>
#include <ksweep/io/json_io.hpp>
#include <ksweep/io/segy.hpp>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <optional>

namespace ksweep::app {

namespace {

/// What the checks of `ksweep rtm` leave for the imaging.
struct RtmInputs {
  io::VelocityModel vm;          ///< the true model (the data's, when they are modelled)
  std::vector<float> v0;         ///< the background (migration) velocity
  std::vector<float> rho, rho0;  ///< variable density: the true density (modelled data), the background's
  std::vector<float> observed;   ///< [shot][nt][receiver]
  int water = 0;                 ///< depth rows of water (muted in the images)
  bool modelled = false;         ///< the data modelled from the true model (its perturbation known)
  core::Survey survey;
  std::vector<double> wavelet;
  std::vector<RunInput> files;
};

/// Every check before the first write, the cheap ones first; then the model and the background.
/// The same checks on the same inputs on every rank: one message (rank 0's) when they fail.
RtmInputs check_rtm_inputs(io::Config const& cfg, RunOptions const& opt, comm::Communicator const& comm) {
  RtmInputs in;
  auto const shape = on_every_rank(comm, [&] { return io::model_shape(cfg.model); });
  core::ModelGrid const grid = model_grid(shape);
  collectively(comm, [&] {
    KSWEEP_REQUIRE(cfg.wavelet.source != "estimate",
                   "wavelet.source = \"estimate\" is for ksweep fwi; ksweep rtm needs the source: set wavelet.source "
                   "= \"ricker\" or a wavelet file (.h5, .sgy/.segy or text)");
    KSWEEP_REQUIRE(cfg.fwi.smooth_sigma > 0 || !cfg.fwi.observed.empty(),
                   "fwi.smooth_sigma = 0 makes the background the true model, from which the data are modelled: "
                   "nothing would be left to image; set fwi.smooth_sigma > 0, or give the data (fwi.observed)");
    io::check_dimension_keys(cfg, shape.dim() == 3);
  });
  in.wavelet = on_every_rank(comm, [&] { return make_wavelet(cfg); });
  in.survey = checked_survey(cfg, shape, comm);
  // parallel.domains: every rank images its shot group's shots on its subdomain.
  auto const split = on_every_rank(comm, [&] {
    auto const d = domain_split(cfg, grid);
    KSWEEP_REQUIRE(!d.split() || fwi::physics_splits(cfg),
                   "parallel.domains = " << core::describe(d, grid.dim()) << ": physics \"" << cfg.propagator.physics
                                         << "\" ("
                                         << fwi::physics_row(fwi::parse_physics(cfg.propagator.physics)).summary
                                         << ") does not run on a split model yet; set parallel.domains = [1]");
    return d;
  });
  check_split_run(cfg, grid, split, in.survey, comm);
  // The memory of one rank (every rank of a node counted), before the model is read.
  auto const est = fwi::estimate_rtm(cfg, shape, in.survey.n_shots, in.survey.n_receivers, comm.size(), split);
  auto const mm = fwi::machine_memory(cfg);
  if (opt.dry_run && comm.is_root()) std::printf("%s", fwi::memory_table({est}, mm, comm.local_size()).c_str());
  collectively(comm, [&] { fwi::check_memory({est}, mm, comm.local_size()); });
  in.files = {{"--config", cfg.source_path}, {"model.source", cfg.model.source}};
  if (!cfg.survey.file.empty()) in.files.push_back({"survey.file", cfg.survey.file});
  if (!cfg.fwi.observed.empty()) {
    in.files.push_back({"fwi.observed", cfg.fwi.observed});
    collectively(comm, [&] {
      fwi::check_observed(fwi::read_observed(cfg.fwi.observed, shape, cfg, false), cfg, in.survey, shape,
                          io::shown_path(cfg.fwi.observed));
    });
  }
  collectively(comm, [&] {
    if (comm.is_root()) check_output_folder(opt.out, opt.overwrite, false, in.files);
  });
  in.vm = on_every_rank(comm, [&] { return io::load_velocity(cfg.model); });
  throw_if_stopped("reading the model");
  collectively(comm, [&] {
    core::check_velocity(in.vm.vp.data(), static_cast<long long>(in.vm.vp.size()));
    in.water = cfg.fwi.water_rows >= 0 ? cfg.fwi.water_rows : fwi::detect_water_rows(in.vm);
  });
  in.v0 = fwi::starting_model(in.vm, cfg.fwi.smooth_sigma, in.water, [] { throw_if_stopped("smoothing the model"); });
  std::vector<float> rho;
  collectively(comm, [&] {
    fwi::check_stability(cfg, in.vm, in.v0);
    if (fwi::has_density(cfg)) rho = io::load_density(cfg.model, in.vm);
  });
  if (!rho.empty())
    in.rho0 = fwi::starting_density(in.vm, rho, cfg.fwi.smooth_sigma, in.water,
                                    [] { throw_if_stopped("smoothing the density"); });
  in.modelled = cfg.fwi.observed.empty();
  if (in.modelled) in.rho = std::move(rho);
  if (comm.is_root()) warn(fwi::acquisition_warnings(cfg, in.vm, in.survey));
  return in;
}

/// The data on every rank: modelled from the true model (the shots over the ranks), or read from
/// fwi.observed.
void read_or_model_data(io::Config const& cfg, RtmInputs& in, comm::Communicator const& comm) {
  comm::Communicator const* const ranks = comm.size() > 1 ? &comm : nullptr;
  if (in.modelled)
    in.observed =
        model_observed(cfg, in.vm, in.survey, comm.is_root(), in.wavelet, in.rho.empty() ? nullptr : &in.rho, ranks)
            .data;
  else in.observed = fwi::read_observed(cfg.fwi.observed, in.vm, cfg, comm.is_root()).data;
  if (auto const silent = silent_data(in.observed, "the data", cfg); !silent.empty())
    throw Error(silent + "; nothing was written");
}

std::vector<float> to_float(std::vector<double> const& v) { return std::vector<float>(v.begin(), v.end()); }

/// image.h5 and summary.json into the claimed folder, then the figures.
void write_images(io::Config const& cfg, RtmInputs const& in, fwi::ImagingResult const& r, double seconds, int ranks,
                  OutputFolder& folder) {
  fs::path const& out = folder.path();
  folder.claim();
  std::vector<io::Dataset> sets{io::model_dataset(in.vm, "background", in.v0),
                                io::model_dataset(in.vm, "rtm", to_float(r.rtm.image)),
                                io::model_dataset(in.vm, "rtm_correlation", to_float(r.rtm.correlation)),
                                io::model_dataset(in.vm, "illumination", to_float(r.rtm.illumination))};
  nlohmann::json summary = {{"command", "rtm"},
                            {"config", io::config_to_json(cfg)},
                            {"model", in.vm.description},
                            {"shape", in.vm.shape()},
                            {"water_rows", in.water},
                            {"seconds", seconds},
                            {"ranks", ranks}};
  std::vector<double> truth;
  if (in.modelled) {  // the perturbation that made the data's reflections
    for (std::size_t i = 0; i < in.v0.size(); ++i) truth.push_back(double(in.vm.vp[i]) - double(in.v0[i]));
    sets.push_back(io::model_dataset(in.vm, "perturbation", to_float(truth)));
    summary["correlation"]["rtm"] = fwi::correlation(r.rtm.image, truth);
    summary["correlation"]["rtm_correlation"] = fwi::correlation(r.rtm.correlation, truth);
  }
  if (!r.lsrtm.image.empty()) {
    sets.push_back(io::model_dataset(in.vm, "lsrtm", to_float(r.lsrtm.image)));
    summary["lsrtm_misfit"] = r.lsrtm.misfit;
    if (in.modelled) summary["correlation"]["lsrtm"] = fwi::correlation(r.lsrtm.image, truth);
  }
  io::write_datasets(out / "image.h5", sets, in.vm.dh);
  io::write_json_atomic(out / "summary.json", summary);
  std::printf("wrote %s and %s\n", io::shown_path(out / "image.h5").c_str(),
              io::shown_path(out / "summary.json").c_str());
  folder.finish();
  make_directory(out / "figures");
  if (run_figure_script("plot_image.py",
                        {(out / "image.h5").string(), (out / "summary.json").string(), (out / "figures").string()}))
    std::printf("wrote %s\n", io::shown_path(out / "figures").c_str());
  else remove_if_empty(out / "figures");
}

}  // namespace

int run_rtm(io::Config const& cfg, RunOptions const& opt, comm::Communicator const& comm) {
  auto in = check_rtm_inputs(cfg, opt, comm);
  if (opt.dry_run) {
    if (comm.is_root()) std::printf("ksweep rtm --dry-run: the inputs are valid; nothing was written\n");
    return 0;
  }
  bool const root = comm.is_root();
  std::optional<OutputFolder> folder;  // rank 0 writes
  collectively(comm, [&] {
    if (root) folder.emplace(opt.out, opt.overwrite, false, true, in.files);
  });
  read_or_model_data(cfg, in, comm);
  if (root) {
    std::printf(
        "ksweep rtm: %s, %s cells at %g m, %d shots, %d receivers, nt %d, order %d; background: fwi.smooth_sigma "
        "= %g cells, %d water rows muted%s\n",
        shown(in.vm.description).c_str(), in.vm.shape().c_str(), in.vm.dh, in.survey.n_shots, in.survey.n_receivers,
        cfg.time.nt, cfg.propagator.order, cfg.fwi.smooth_sigma, in.water,
        in.modelled ? "; data modelled from the true model" : "");
    if (comm.size() > 1) {
      auto const split = domain_split(cfg, model_grid(in.vm));
      std::printf("%d ranks: %d shot group(s) of %d rank(s) (parallel.domains %s)\n", comm.size(),
                  comm.size() / split.count(), split.count(), core::describe(split, in.vm.dim()).c_str());
    }
  }
  auto const t0 = std::chrono::steady_clock::now();
  auto const r = fwi::image_data(
      cfg, in.vm, in.v0, in.survey, in.wavelet, in.observed, in.water, in.rho0.empty() ? nullptr : &in.rho0,
      [&](int i, double misfit) {
        if (root) {
          std::printf("  LSRTM iteration %d: data misfit %.4f\n", i, misfit);
          std::fflush(stdout);
        }
        // SIGINT / SIGTERM: every rank agrees between iterations, then unwinds.
        if (int const sig = agree_stop(comm))
          throw Interrupted(sig, "stopped by " + signal_name(sig) + " during least-squares RTM; nothing was written");
      },
      comm.size() > 1 ? &comm : nullptr);
  double const secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (!root) return 0;
  std::printf("imaged in %.2f s\n", secs);
  write_images(cfg, in, r, secs, comm.size(), *folder);
  return 0;
}

}  // namespace ksweep::app
