// A run from its configuration (configured.hpp): every check of an inversion's inputs before
// its first write, in the order of their cost, as the steps of InputChecks.

#include <ksweep/base/error.hpp>
#include <ksweep/comm/collective.hpp>
#include <ksweep/core/stencil.hpp>
#include <ksweep/fwi/configured.hpp>
#include <ksweep/io/atomic_file.hpp>
#include <ksweep/io/json_io.hpp>
#include <ksweep/io/segy.hpp>

#include <algorithm>
#include <filesystem>
#include <string>
#include <utility>

namespace ksweep::fwi {

namespace {

namespace fs = std::filesystem;
using comm::collectively;
using comm::on_every_rank;

/// The checks of check_inputs, one step each, with what they share.
class InputChecks {
 public:
  InputChecks(io::Config const& config, RunRequest const& run_request, InputHooks const& input_hooks,
              comm::Communicator const& ranks, io::VelocityModel const& model_shape)
      : cfg(config),
        f(config.fwi),
        opt(run_request),
        hooks(input_hooks),
        comm(ranks),
        shape(model_shape),
        grid(model_grid(model_shape)),
        n(static_cast<std::size_t>(model_shape.rows()) * static_cast<std::size_t>(model_shape.nx)) {}

  RunInputs run() {
    layout();
    memory();
    resume_header();
    collectively(comm, [&] {  // the output folder (rank 0's); every rank stops with its error
      if (comm.is_root() && hooks.folder) hooks.folder(in.in_place);
    });
    observed_header();
    models();
    identity();
    observed_data();
    if (in.resuming) checkpoint();
    return std::move(in);
  }

 private:
  /// The survey, time axis, grid, smoothing and the library's checks of the options (the water
  /// rows detected later lie inside the model), the same on every rank: one message (rank 0's)
  /// and one exit code when they fail, not every rank's and an MPI abort.
  void layout() {
    int const order = cfg.propagator.order;
    collectively(comm, [&] {
      in.survey = inversion_survey(cfg, shape);
      core::check_time(cfg.time.dt, cfg.time.nt);
      core::check_grid(grid, make_pml(cfg), order);
      core::check_survey(in.survey, grid, make_pml(cfg));
      check_smoothing(cfg, shape);
      setup.grid = grid;
      setup.order = order;
      setup.dt = cfg.time.dt;
      setup.survey = in.survey;
      setup.physics = parse_physics(cfg.propagator.physics);
      options = inversion_options(cfg, grid, std::max(f.water_rows, 0));
      check_options(setup, options, keys);
    });
    in.wavelet = on_every_rank(comm, [&] { return make_wavelet(cfg); });  // a wavelet file's errors first
  }

  /// Memory, estimated from the layout before anything large is allocated (parallel.domains:
  /// shot groups of one rank per subdomain); a run that does not fit is told the smallest split
  /// of the model that would.
  void memory() {
    auto const& survey = in.survey;
    int const nr = survey.n_receivers;
    auto const split = domain_split(cfg, grid);
    check_split_run(cfg, grid, split, survey, comm);
    // The modelling of the observed data (when modelled) and of the final model's data.
    std::vector<MemoryEstimate> phases{
        estimate_model(cfg, shape, survey.n_shots, nr, false, cfg.propagator.batch, split),
        estimate_fwi(cfg, shape, survey.n_shots, nr, comm.size(), split)};
    auto const mm = machine_memory(cfg);
    if (hooks.memory_table && comm.is_root()) hooks.memory_table(memory_table(phases, mm, comm.local_size()));
    collectively(comm, [&] {
      try {
        check_memory(phases, mm, comm.local_size());
      } catch (Error const& e) {
        throw Error(std::string(e.what()) + smallest_split(cfg, shape, survey.n_shots, nr, mm, split));
      }
    });
  }

  /// --resume: the checkpoint's header (its size against this model's) before it is read whole.
  void resume_header() {
    in.resuming = !opt.resume.empty();
    if (!in.resuming) return;
    ck_path = fs::path(opt.resume) / "checkpoint.bin";
    auto const header = io::read_checkpoint_header(ck_path);
    if (header.n != n) {
      // The file is of another model; its (not yet verified) configuration says how.
      std::string differs;
      if (header.run.is_object() && header.run.contains("config"))
        for (auto const& c :
             io::resume_changes({{"config", header.run["config"]}}, {{"config", io::config_to_json(cfg)}}))
          differs += "\n  " + c.key + ": " + shown(c.before) + " in the checkpoint, " + shown(c.after) + " now";
      KSWEEP_REQUIRE(false, "--resume: the checkpoint " << io::shown_path(ck_path) << " holds a model of " << header.n
                                                        << " cells, this run has " << n << " (" << shape.shape() << ")"
                                                        << (differs.empty() ? "" : "; its configuration differs in:")
                                                        << differs);
    }
    std::error_code ec;
    in.in_place = fs::equivalent(fs::path(opt.resume), opt.out, ec);
    KSWEEP_REQUIRE(!(in.in_place && opt.overwrite),
                   "--overwrite with --resume "
                       << shown(opt.resume) << " into the same folder would remove the results "
                       << "being continued; leave out --overwrite to continue the run in place");
  }

  /// Observed data from a file: everything but the samples (shape, geometry, acquisition), read
  /// by rank 0 before any model-sized work.
  void observed_header() {
    collectively(
        comm,
        [&] {
          if (comm.is_root() && !f.observed.empty())
            check_observed(read_observed(f.observed, shape, cfg, false), cfg, in.survey, shape,
                           io::shown_path(f.observed));
        },
        observed_key());
    KSWEEP_REQUIRE(f.smooth_sigma > 0 || !f.observed.empty(),
                   "fwi.smooth_sigma = 0 makes the starting model the true model, from which the observed data are "
                   "modelled: the inversion would start at its answer (a loss of 0); set fwi.smooth_sigma > 0, or "
                   "give observed data (fwi.observed) to invert from model.source");
  }

  /// The model and the starting models (SIGINT / SIGTERM answered throughout), checked against
  /// the bounds the inversion keeps; a rank that cannot read the model stops every rank.
  void models() {
    in.truth = on_every_rank(comm, [&] { return io::load_velocity(cfg.model); });
    auto const& truth = in.truth;
    stop_point("reading the model");
    core::check_velocity(truth.vp.data(), static_cast<long long>(n));
    in.water = f.water_rows >= 0 ? f.water_rows : detect_water_rows(truth);
    in.start = {starting_model(truth, f.smooth_sigma, in.water, [&] { stop_point("computing the starting model"); })};
    check_stability(cfg, truth, in.start[0]);
    if (has_density(cfg)) {
      in.rho_true = io::load_density(cfg.model, truth);
      in.start.push_back(starting_density(truth, in.rho_true, f.smooth_sigma, in.water,
                                          [&] { stop_point("computing the starting density"); }));
    }
    options.water_rows = in.water;
    check_bounds(setup, options, in.start, "the starting model", keys);
    if (comm.is_root()) warn(acquisition_warnings(cfg, truth, in.survey));
    if (comm.is_root() && cfg.survey.file.empty() && io::is_segy_path(f.observed))
      warn({unused_layout(cfg, "the trace headers of fwi.observed (SEG-Y) replace")});
  }

  /// The run's identity, recorded in every checkpoint and checked on --resume; every rank must
  /// hold the same one (the same configuration and model).
  void identity() {
    auto const& survey = in.survey;
    in.run = {{"config", io::config_to_json(cfg)},
              {"data", {{"model_sha256", io::sha256_hex(in.truth.vp.data(), n * sizeof(float))}}}};
    if (has_density(cfg)) in.run["data"]["density_sha256"] = io::sha256_hex(in.rho_true.data(), n * sizeof(float));
    if (!cfg.survey.file.empty()) {  // the survey file's positions (in cells) and receiver counts
      std::vector<double> g;
      for (auto const* list : {&survey.source_points, &survey.receiver_points})
        for (auto const& p : *list) g.insert(g.end(), {p.z, p.x, p.y});
      for (int c : survey.receiver_count) g.push_back(c);
      in.run["data"]["survey_sha256"] = io::sha256_hex(g.data(), g.size() * sizeof(double));
    }
    if (wavelet_from_file(cfg))  // the samples the run injects, after resampling to time.dt
      in.run["data"]["wavelet_sha256"] = io::sha256_hex(in.wavelet.data(), in.wavelet.size() * sizeof(double));
    agree_on(comm, "the configuration or the model (the run's identity)", in.run.dump());
    in.run["files"] = io::input_files(cfg);  // may differ between ranks' views (paths); not compared
  }

  /// Observed data from a file: read and checked (shape, geometry, acquisition, finite samples,
  /// a signal) by rank 0; its error, if any, stops every rank.
  void observed_data() {
    collectively(
        comm,
        [&] {
          if (!comm.is_root() || f.observed.empty()) return;
          in.obs = read_observed(f.observed, shape, cfg, true, &in.obs_axis);
          check_observed(in.obs, cfg, in.survey, shape, io::shown_path(f.observed));
          if (auto const silent = silent_data(in.obs.data, "the observed data", cfg); !silent.empty())
            throw Error(silent);
        },
        observed_key());
    if (comm.is_root() && !f.observed.empty())
      in.run["data"]["observed_sha256"] = io::sha256_hex(in.obs.data.data(), in.obs.data.size() * sizeof(float));
  }

  /// --resume: the checkpoint (read by every rank: the same file), trusted only once checked.
  void checkpoint() {
    auto& ck = in.ck;
    ck = io::read_checkpoint(ck_path, n);
    auto saved = ck.run;
    if (!comm.is_root() && saved.contains("data")) saved["data"].erase("observed_sha256");  // only rank 0 read the data
    io::require_same_run(saved, in.run, ck_path);
    check_checkpoint(cfg, ck, io::shown_path(ck_path), setup, options, in.start);
  }

  void stop_point(char const* doing) const {
    if (hooks.stop_point) hooks.stop_point(doing);
  }
  void warn(std::vector<std::string> const& warnings) const {
    if (hooks.warn) hooks.warn(warnings);
  }

  std::string observed_key() const { return "fwi.observed = " + io::shown_path(f.observed) + ": "; }

  io::Config const& cfg;
  io::FwiSection const& f;
  RunRequest const& opt;
  InputHooks const& hooks;
  comm::Communicator const& comm;
  io::VelocityModel const& shape;
  core::ModelGrid const grid;
  std::size_t const n;  ///< cells of the model
  RunInputs in;
  Problem setup;  ///< the grid, survey, order, dt and physics: what the library's checks read
  Options options;
  OptionNames const keys{"fwi.", "time.dt"};
  fs::path ck_path;
};

}  // namespace

RunInputs check_run_inputs(io::Config const& cfg, RunRequest const& request, InputHooks const& hooks,
                           comm::Communicator const& comm, io::VelocityModel const& shape) {
  return InputChecks(cfg, request, hooks, comm, shape).run();
}

Problem inversion_problem(io::Config const& cfg, RunInputs& in) {
  Problem pb;
  pb.grid = model_grid(in.truth);
  pb.pml = make_pml(cfg);
  pb.order = cfg.propagator.order;
  pb.dt = cfg.time.dt;
  pb.nt = cfg.time.nt;
  pb.survey = in.survey;
  pb.wavelet = in.wavelet;
  pb.observed = std::move(in.obs.data);  // the workflow holds the one copy
  pb.physics = parse_physics(cfg.propagator.physics);
  pb.start = in.start;
  pb.truth = {in.truth.vp};
  if (has_density(cfg)) pb.truth.push_back(in.rho_true);
  return pb;
}

void check_split_run(io::Config const& cfg, core::ModelGrid const& grid, core::DomainSplit const& split,
                     core::Survey const& survey, comm::Communicator const& comm) {
  if (!split.split()) return;
  collectively(comm, [&] {
    core::check_split(grid, split, cfg.propagator.order / 2, comm.size());
    auto const pml = make_pml(cfg);
    for (int d = 0; d < split.count(); ++d)  // the profile velocity does not move a point
      (void)core::local_survey(survey, grid, split, core::subdomain(grid, pml, split, d, 1.0));
  });
}

}  // namespace ksweep::fwi
