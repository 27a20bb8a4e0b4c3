// ksweep fwi: the program over the library inversion (ksweep::fwi::Inversion): every check of
// the inputs before the first write, the starting model, then the iterations with progress,
// checkpoints, the summary and figures. Outputs are written by rank 0 only, each file
// atomically; the inversion itself (batch draw, gradients over the ranks, conditioning, the
// optimizer step) is the library's.

#include "fwi_inputs.hpp"
#include "guard.hpp"

#include <ksweep/core/profiling.hpp>
#include <ksweep/core/runtime.hpp>
#include <ksweep/core/stencil.hpp>
#include <ksweep/fwi/inversion.hpp>
#include <ksweep/fwi/workflow.hpp>
#include <ksweep/fwi/smoothing.hpp>
#include <ksweep/fwi/spectral.hpp>
#include <ksweep/io/atomic_file.hpp>
#include <ksweep/io/checkpoint.hpp>
#include <ksweep/io/hdf5_io.hpp>
#include <ksweep/io/resample.hpp>
#include <ksweep/io/segy.hpp>
#include <ksweep/io/json_io.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <memory>
#include <optional>
#include <sstream>
#include <tuple>
#include <utility>

namespace ksweep::app {

namespace {

using Clock = std::chrono::steady_clock;

/// wavelet.h5: the run's source wavelet over the whole band ("wavelet"), the Ricker reference of
/// an estimate ("reference"), and each stage's low-passed wavelet ("stage_1", ...).
void write_wavelet_file(fs::path const& path, io::Config const& cfg, Inputs const& in) {
  std::vector<io::NamedTrace> traces{{"wavelet", in.wavelet}};
  if (cfg.wavelet.source == "estimate") traces.push_back({"reference", ricker_wavelet(cfg)});
  for (std::size_t k = 0; k < in.stages.size(); ++k)
    traces.push_back({"stage_" + std::to_string(k + 1), in.stages.wavelet(static_cast<int>(k))});
  io::write_wavelets(path, traces, cfg.time.dt);
}

/// The parameters of the configuration's physics (vp first).
std::vector<fwi::Parameter> const& parameters_of(io::Config const& cfg) {
  return fwi::physics_parameters(fwi::parse_physics(cfg.propagator.physics));
}

/// Their names, as the model files name their datasets.
std::vector<std::string> names_of(io::Config const& cfg) {
  return fwi::parameter_names(fwi::parse_physics(cfg.propagator.physics));
}

/// summary.json's key of parameter p's RMSE: "rmse" (the velocity), "rmse_rho", ...
std::string rmse_key(std::vector<fwi::Parameter> const& params, std::size_t p) {
  return p == 0 ? std::string("rmse") : "rmse_" + std::string(params[p].name);
}

/// The true model of the inputs, every parameter.
fwi::Fields true_fields(Inputs const& in) {
  fwi::Fields f{in.truth.vp};
  if (!in.rho_true.empty()) f.push_back(in.rho_true);
  return f;
}

/// The outputs of iteration `r` (rank 0): progress line, models, figures' data, summary and
/// checkpoint.
struct Outputs {
  io::Config const& cfg;
  fs::path out;
  Inputs const& in;
  nlohmann::json summary, history;
  fs::path last_checkpoint;
  int last_checkpoint_iteration = 0;
  double seconds_total = 0;

  void write(fwi::Inversion const& inv, fwi::Report const& r, int start) {
    auto const& f = cfg.fwi;
    auto const& truth = in.truth;
    int const t = r.iteration, done = t - start, left = f.iterations - t;
    auto const& params = parameters_of(cfg);
    auto const names = names_of(cfg);
    std::printf("iter %4d/%d  loss %.6e  ", t, f.iterations, r.loss);
    for (std::size_t p = 0; p < params.size(); ++p)
      if (p == 0) std::printf("rmse %8.2f %s  ", r.rmse[p], params[p].unit);
      else std::printf("rmse %s %8.2f %s  ", params[p].name, r.rmse[p], params[p].unit);
    std::printf("%6.2f s/iter  left %s\n", r.seconds, format_seconds(seconds_total / done * left).c_str());
    std::fflush(stdout);
    bool const figures = f.figures_every > 0 && (t % f.figures_every == 0 || t == f.iterations);
    bool const checkpoint = f.checkpoint_every > 0 && (t % f.checkpoint_every == 0 || t == f.iterations);
    bool const wanted = f.save_models || figures || checkpoint;
    fwi::Fields const model = wanted ? inv.model() : fwi::Fields();
    char name[64];
    if (f.save_models) {
      std::snprintf(name, sizeof name, "model_%04d.h5", t);
      make_directory(out / "models");
      io::write_models(out / "models" / name, truth, names, model);
    }
    if (figures) {  // the velocity and its gradient "grad", the illuminations, then each other parameter's
      auto img = inv.images();
      std::snprintf(name, sizeof name, "epoch_%04d.h5", t);
      make_directory(out / "epochs");
      std::vector<io::Dataset> sets{io::model_dataset(truth, names[0], model[0]),
                                    io::model_dataset(truth, "grad", std::move(img.grad[0])),
                                    io::model_dataset(truth, "illum_src", std::move(img.illum_src)),
                                    io::model_dataset(truth, "illum_rec", std::move(img.illum_rec))};
      for (std::size_t p = 1; p < names.size(); ++p) {
        sets.push_back(io::model_dataset(truth, names[p], model[p]));
        sets.push_back(io::model_dataset(truth, "grad_" + names[p], std::move(img.grad[p])));
      }
      io::write_datasets(out / "epochs" / name, sets, truth.dh);
    }
    summary["iterations"] = history;
    summary["memory"] = fwi::to_json(inv.memory());
    io::write_json_atomic(out / "summary.json", summary);
    if (checkpoint) {
      io::Checkpoint c = fwi::to_checkpoint(cfg, inv.state());
      c.run = in.run;
      c.history = history;
      io::write_checkpoint(out / "checkpoint.bin", c);
      last_checkpoint = out / "checkpoint.bin";
      last_checkpoint_iteration = t;
    }
  }
};

/// The final model's data (rank 0, or every rank of `ranks` for a split model): synthetic.h5 (and
/// synthetic.segy beside a SEG-Y fwi.observed) hold them at the observed data's own sampling,
/// with the survey's geometry: what a geophysicist compares with the field data.
io::RecordsFile final_synthetic(io::Config const& cfg, Inputs const& in, fwi::Inversion const& inv,
                                comm::Communicator const* ranks, bool root) {
  if (root) std::printf("modelling the final model's data (%d shots)\n", in.survey.n_shots);
  std::fflush(stdout);
  io::VelocityModel final_model = in.truth;
  auto model = inv.model();
  final_model.vp = std::move(model[0]);
  throw_if_stopped("modelling");
  return fwi::final_data(cfg, final_model, in.survey, in.wavelet, model.size() > 1 ? &model[1] : nullptr, in.obs_axis,
                         ranks, between_batches(false));
}

void write_synthetic(io::Config const& cfg, io::RecordsFile const& syn, fs::path const& out) {
  io::write_records(out / "synthetic.h5", syn);
  if (io::is_segy_path(cfg.fwi.observed)) io::write_records_segy(out / "synthetic.segy", syn);
  std::printf("wrote %s (%d samples of %g s)\n", io::shown_path(out / "synthetic.h5").c_str(), syn.nt, syn.dt);
}

/// One run of ksweep fwi, step by step: the checks, the folder, the data, the first writes, the
/// iterations and the last writes.
class FwiRun {
 public:
  FwiRun(io::Config const& config, RunOptions const& run_options, comm::Communicator const& ranks)
      : cfg(config), f(config.fwi), opt(run_options), comm(ranks), out(run_options.out) {}

  int run(io::VelocityModel const& shape) {
    in = check_inputs(cfg, opt, comm, shape);
    // --dry-run: every check passed (the output folder's on rank 0); nothing is created.
    if (opt.dry_run) {
      if (comm.is_root()) std::printf("ksweep fwi --dry-run: the inputs are valid; nothing was written\n");
      return 0;
    }
    // The output folder: locked against other runs, checked again under the lock, created if
    // needed; nothing written into it yet.
    auto const inputs = run_inputs(cfg, opt);
    collectively(comm, [&] { folder.emplace(out, opt.overwrite, in.in_place, comm.is_root(), inputs); });
    split = domain_split(cfg, model_grid(in.truth)).split();
    prepare_data();
    make_stages();
    first_writes();
    start();
    while (flow->inversion().iteration() < f.iterations) iterate();
    finish();
    return 0;
  }

 private:
  /// Observed data modelled once by rank 0, or by every rank when the model is split (SIGINT /
  /// SIGTERM honoured between shot batches; after the modelling when split), and the wavelet
  /// estimated from them; every rank agrees on a stop or a failure, then holds the wavelet.
  void prepare_data() {
    bool interrupted = false;
    std::string silent;
    comm::Communicator const* const ranks = split ? &comm : nullptr;
    if ((comm.is_root() || split) && f.observed.empty()) {
      if (comm.is_root()) std::printf("modelling observed data (%d shots)\n", in.survey.n_shots);
      std::fflush(stdout);
      try {
        in.obs = model_observed(cfg, in.truth, in.survey, false, in.wavelet, nullptr, ranks);
        silent = silent_data(in.obs.data, "the observed data modelled on the true model", cfg);
      } catch (Interrupted const&) {
        interrupted = true;
      }
    }
    if ((comm.is_root() || split) && cfg.wavelet.source == "estimate" && !interrupted && silent.empty()) try {
        estimate_wavelet(ranks);
      } catch (Interrupted const&) {
        interrupted = true;
      } catch (Error const& e) {
        silent = std::string("wavelet.source = \"estimate\": ") + e.what();
      }
    if (int const sig = agree_stop(comm, interrupted))
      throw Interrupted(
          sig, "stopped by " + signal_name(sig) +
                   (f.observed.empty() ? " while modelling the observed data" : " before the first iteration") +
                   "; nothing was written" +
                   (in.resuming ? "; continue with:\n  " + resume_command(opt.argv, opt.resume, comm.size())
                                : std::string("")));
    settle(comm, silent);
    comm.broadcast(in.wavelet);
  }

  /// The wavelet estimated by rank 0 from the observed data and the starting model's response
  /// to the Ricker reference (the same bits on a resumed run: the same inputs).
  void estimate_wavelet(comm::Communicator const* ranks) {
    if (comm.is_root())
      std::printf("estimating the wavelet: modelling %d shots on the starting model\n", in.survey.n_shots);
    std::fflush(stdout);
    io::VelocityModel start = in.truth;
    start.vp = in.start[0];
    throw_if_stopped("modelling");
    in.estimate = fwi::estimate_source(cfg, start, in.survey, in.obs.data, in.start.size() > 1 ? &in.start[1] : nullptr,
                                       ranks, between_batches(false));
    in.wavelet = in.estimate.wavelet;
    if (comm.is_root())
      std::printf(
          "wavelet estimated: unexplained data %.4f with it, %.4f with the Ricker reference (on the starting "
          "model)\n",
          in.estimate.residual, in.estimate.residual_reference);
  }

  /// Frequency continuation's stages (the library's) from the run's wavelet, with their warnings.
  void make_stages() {
    in.stages = fwi::make_stages(cfg, in.wavelet);
    if (comm.is_root()) warn(fwi::stage_warnings(in.stages));
  }

  /// First writes (the result folders are made when their first file is written); every rank
  /// then holds the observed data.
  void first_writes() {
    if (comm.is_root()) {
      folder->claim();
      if (!in.in_place || !fs::exists(out / "observed.h5")) io::write_records(out / "observed.h5", in.obs);
      // A run resumed in place computes the same wavelet: the file stays as it is.
      if (!in.in_place || !fs::exists(out / "wavelet.h5")) write_wavelet_file(out / "wavelet.h5", cfg, in);
    }
    comm.broadcast(in.obs.data);
  }

  /// The library's workflow (resumed from the checkpoint), the model files, the summary's
  /// header and the run's first lines.
  void start() {
    options = fwi::inversion_options(cfg, model_grid(in.truth), in.water);
    flow = std::make_unique<fwi::Workflow>(inversion_problem(cfg, in), options, in.stages, comm);
    if (in.resuming) flow->restore(fwi::from_checkpoint(in.ck));  // Adam counts its steps from the stage's start
    if (comm.is_root() && !in.in_place) {
      auto const names = names_of(cfg);
      io::write_models(out / "true_model.h5", in.truth, names, true_fields(in));
      io::write_models(out / "initial_model.h5", in.truth, names, in.start);
    }
    o.emplace(Outputs{cfg, out, in, {}, in.resuming ? in.ck.history : nlohmann::json::array(), {}, 0, 0});
    if (in.resuming) {  // where the last good checkpoint is, for the messages of a stopped run
      o->last_checkpoint = fs::path(opt.resume) / "checkpoint.bin";
      o->last_checkpoint_iteration = in.ck.iteration;
    }
    first_iteration = flow->inversion().iteration();
    summarise();
  }

  /// summary.json's header and the run's first lines: the model, the wavelet, the ranks and
  /// their devices, the build, the starting model's errors.
  void summarise() {
    auto const& inv = flow->inversion();
    auto const& truth = in.truth;
    auto const& params = parameters_of(cfg);
    auto const rmse0 = inv.rmse(in.start);
    auto& sm = o->summary;
    sm["config"] = io::config_to_json(cfg);
    sm["model"] = {{"nz", truth.nz},
                   {"nx", truth.nx},
                   {"ny", truth.ny},
                   {"dh", truth.dh},
                   {"description", truth.description},
                   {"water_rows", in.water}};
    sm["wavelet"] = {{"source", cfg.wavelet.source},
                     {"dt", cfg.time.dt},
                     {"freq", cfg.wavelet.freq},
                     {"delay", cfg.wavelet.delay},
                     {"samples", in.wavelet}};
    if (cfg.wavelet.source == "estimate")
      sm["wavelet"]["estimate"] = {{"stabilisation", cfg.wavelet.stabilisation},
                                   {"residual", in.estimate.residual},
                                   {"residual_reference", in.estimate.residual_reference}};
    sm["ranks"] = comm.size();
    sm["devices"] = nlohmann::json::array();
    for (auto const& d : rank_devices(comm))
      sm["devices"].push_back({{"rank", d.rank},
                               {"host", d.host},
                               {"local_rank", d.local_rank},
                               {"device_id", d.device_id},
                               {"device", d.device}});
    sm["mpi"] = {{"gpu_aware", comm::gpu_aware_mpi()}, {"device_data", comm::gpu_aware_mpi_reason()}};
    sm["backend"] = core::default_backend();
    sm["threads"] = core::default_concurrency();
    for (std::size_t p = 0; p < params.size(); ++p) sm["initial"][rmse_key(params, p)] = rmse0[p];
    sm["build"] = core::describe_build(false);
    if (!comm.is_root()) return;
    std::printf(
        "ksweep fwi: %s cells at %g m, %d shots, batch %d over %d rank(s), %d iterations, %s %s %s storage, "
        "backend %s (%d threads)\n",
        truth.shape().c_str(), truth.dh, in.survey.n_shots,
        options.method == fwi::Method::lbfgs ? in.survey.n_shots : f.batch, comm.size(), f.iterations,
        cfg.storage.strategy.c_str(), cfg.storage.location.c_str(), cfg.storage.dtype.c_str(),
        core::default_backend().c_str(), core::default_concurrency());
    if (in.resuming) std::printf("resuming after iteration %d from %s\n", first_iteration, opt.resume.c_str());
    std::printf("initial model RMSE %.2f m/s, water rows kept: %d\n", rmse0[0], in.water);
    if (has_density(cfg)) {
      std::string inverted;
      for (auto const& p : f.invert) inverted += (inverted.empty() ? "" : ", ") + p;
      std::printf("variable density (%s): initial density RMSE %.2f kg/m^3, inverting %s\n",
                  cfg.model.density.empty() ? "gardner" : cfg.model.density.c_str(), rmse0[1], inverted.c_str());
    }
    std::fflush(stdout);
  }

  /// One iteration: the stage's announcement, a stop agreed by every rank, the library's step,
  /// the history, and the outputs of rank 0 (a failure there shared with every rank).
  void iterate() {
    int const it = flow->inversion().iteration();
    auto const stage = flow->stage();  // frequency continuation: the workflow switches the data
    if (stage.index >= 0 && it == stage.first && comm.is_root()) {
      auto const& st = in.stages[static_cast<std::size_t>(stage.index)];
      std::printf(in.stages.keeps(stage.index)
                      ? "stage %d/%zu: data and wavelet as they are (the wavelet's whole band is below %g Hz), "
                        "iterations %d-%d\n"
                      : "stage %d/%zu: data and wavelet low-passed below %g Hz, iterations %d-%d\n",
                  stage.index + 1, in.stages.size(), st.max_freq, it + 1, it + st.iterations);
      std::fflush(stdout);
    }
    // SIGINT / SIGTERM: every rank agrees at the iteration boundary, then unwinds (removing the
    // disk scratch folder) and exits with 128 + the signal.
    if (int const sig = agree_stop(comm))
      throw Interrupted(sig, "stopped by " + signal_name(sig) + " after iteration " + std::to_string(it) + " of " +
                                 std::to_string(f.iterations) +
                                 "; the scratch folder and temporary files were removed; " + where_to_continue());
    // The illuminations only for an iteration whose figures' data show them (Outputs::write).
    int const next = it + 1;
    flow->inversion().set_illuminations(f.figures_every > 0 && (next % f.figures_every == 0 || next == f.iterations));
    fwi::Report r;
    try {
      r = flow->step();
    } catch (fwi::IterationError const& e) {
      throw CollectiveError(std::string(e.what()) + ". Nothing of this iteration was written; " + where_to_continue());
    } catch (Error const& e) {
      throw Error(std::string(e.what()) + "; " + where_to_continue());
    }
    o->seconds_total += r.seconds;
    nlohmann::json entry = {
        {"iteration", r.iteration}, {"loss", r.loss}, {"rmse", r.rmse[0]}, {"seconds", r.seconds}, {"shots", r.shots}};
    if (options.method == fwi::Method::lbfgs) {
      entry["evaluations"] = r.evaluations;
      entry["loss_start"] = r.loss_start;  // the loss of the model before the step (`loss`: after it)
    }
    if (stage.index >= 0) entry["stage"] = stage.index + 1;
    auto const& params = parameters_of(cfg);
    for (std::size_t p = 1; p < params.size(); ++p) entry[rmse_key(params, p)] = r.rmse[p];
    o->history.push_back(entry);
    core::ScopedRegion output_region("ksweep::fwi::output");
    std::string write_error;
    if (comm.is_root()) try {
        o->write(flow->inversion(), r, first_iteration);
      } catch (std::exception const& e) {
        write_error = e.what();
      }
    stop_on_write_error(write_error);
  }

  /// The final model, its data (rank 0, or every rank when the model is split), the summary;
  /// then the folder's old results go and the figures are drawn.
  void finish() {
    auto const& inv = flow->inversion();
    std::string write_error;
    if (comm.is_root()) try {
        core::ScopedRegion region("ksweep::fwi::output");
        io::write_models(out / "model_final.h5", in.truth, names_of(cfg), inv.model());
      } catch (std::exception const& e) {
        write_error = e.what();
      }
    std::optional<io::RecordsFile> syn;
    if (comm.is_root() || split) try {
        syn = final_synthetic(cfg, in, inv, split ? &comm : nullptr, comm.is_root());
      } catch (std::exception const& e) {
        if (write_error.empty()) write_error = e.what();
      }
    if (comm.is_root() && write_error.empty()) try {
        core::ScopedRegion region("ksweep::fwi::output");
        write_synthetic(cfg, *syn, out);
        o->summary["seconds_total"] = std::chrono::duration<double>(Clock::now() - t_start).count();
        o->summary["iterations"] = o->history;
        io::write_json_atomic(out / "summary.json", o->summary);
        std::printf("%s\n", inv.memory().to_string().c_str());
        std::printf("wrote %s and %s\n", io::shown_path(out / "model_final.h5").c_str(),
                    io::shown_path(out / "summary.json").c_str());
      } catch (std::exception const& e) {
        write_error = e.what();
      }
    stop_on_write_error(write_error);
    folder->finish();  // every result is written: the results it replaced (--overwrite) go
    if (comm.is_root() && f.figures_every > 0) {
      make_directory(out / "figures");
      if (!run_figure_script("plot_fwi.py", {out.string()})) remove_if_empty(out / "figures");
    }
  }

  /// A failure to write on rank 0 (a full disk) stops every rank together, so that all unwind
  /// (removing their scratch folders), with where to continue from.
  void stop_on_write_error(std::string const& write_error) const {
    if (comm.allreduce_sum(write_error.empty() ? 0.0 : 1.0) > 0)
      throw CollectiveError((write_error.empty() ? std::string("writing the outputs failed on rank 0") : write_error) +
                            "; " + where_to_continue());
  }

  std::string where_to_continue() const {
    if (!o || o->last_checkpoint.empty())
      return "no checkpoint was written yet (fwi.checkpoint_every = " + std::to_string(f.checkpoint_every) +
             "): start again with --overwrite";
    return "the last checkpoint is " + o->last_checkpoint.string() + " (iteration " +
           std::to_string(o->last_checkpoint_iteration) + "); continue with:\n  " +
           resume_command(opt.argv, o->last_checkpoint.parent_path(), comm.size());
  }

  io::Config const& cfg;
  io::FwiSection const& f;
  RunOptions const& opt;
  comm::Communicator const& comm;
  fs::path const out;
  Clock::time_point const t_start = Clock::now();
  Inputs in;
  std::optional<OutputFolder> folder;
  bool split = false;  ///< the model split into domains: every rank models the data
  fwi::Options options;
  std::unique_ptr<fwi::Workflow> flow;
  std::optional<Outputs> o;
  int first_iteration = 0;  ///< the iteration the run started after (resumed: the checkpoint's)
};

}  // namespace

int run_fwi(io::Config const& cfg, RunOptions const& opt, comm::Communicator const& comm) {
  collectively(comm, [&] {
    KSWEEP_REQUIRE(cfg.propagator.precision == "fp32",
                   "propagator.precision = \"" << cfg.propagator.precision << "\": ksweep fwi computes in fp32 only");
  });
  auto const shape = on_every_rank(comm, [&] { return io::model_shape(cfg.model); });  // no values read yet
  collectively(comm, [&] { io::check_dimension_keys(cfg, shape.dim() == 3); });
  return FwiRun(cfg, opt, comm).run(shape);
}

}  // namespace ksweep::app
