// ksweep fwi's inputs (fwi_inputs.hpp): the checks before the first write, in the order of
// their cost, as the steps of InputChecks.

#include "fwi_inputs.hpp"

#include "memory_estimate.hpp"

#include <ksweep/core/stencil.hpp>
#include <ksweep/fwi/smoothing.hpp>
#include <ksweep/io/atomic_file.hpp>
#include <ksweep/io/json_io.hpp>
#include <ksweep/io/resample.hpp>
#include <ksweep/io/segy.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <string>

namespace ksweep::app {

namespace {

/// Depth rows at the top of the model equal to the first cell (the water layer); a row is a
/// plane of ny nx cells in 3D.
int detect_water_rows(io::VelocityModel const& vm) {
  std::size_t const plane = static_cast<std::size_t>(vm.ny > 0 ? vm.ny : 1) * vm.nx;
  int rows = 0;
  for (int iz = 0; iz < vm.nz; ++iz) {
    bool same = true;
    for (std::size_t i = 0; i < plane && same; ++i) same = vm.vp[iz * plane + i] == vm.vp[0];
    if (!same) break;
    ++rows;
  }
  return rows == vm.nz ? 0 : rows;
}

/// The starting density: the true density smoothed (sigma cells), water rows kept.
std::vector<float> starting_density(io::VelocityModel const& vm, std::vector<float> const& rho, double sigma,
                                    int water_rows) {
  int const ny = vm.ny > 0 ? vm.ny : 1;
  std::vector<double> r(rho.begin(), rho.end());
  auto const sm =
      fwi::gaussian_smooth(r, vm.nz, ny, vm.nx, sigma, [] { throw_if_stopped("computing the starting density"); });
  std::vector<float> out(rho.size());
  for (std::size_t i = 0; i < out.size(); ++i) out[i] = static_cast<float>(sm[i]);
  for (std::size_t i = 0; i < static_cast<std::size_t>(water_rows) * ny * vm.nx; ++i) out[i] = rho[i];
  return out;
}

/// Starting model: Gaussian-smoothed slowness of the true model, water rows kept.
std::vector<float> starting_model(io::VelocityModel const& vm, double sigma, int water_rows) {
  std::vector<double> slow(vm.vp.size());
  for (std::size_t i = 0; i < slow.size(); ++i) slow[i] = 1.0 / vm.vp[i];
  int const ny = vm.ny > 0 ? vm.ny : 1;
  auto const sm =
      fwi::gaussian_smooth(slow, vm.nz, ny, vm.nx, sigma, [] { throw_if_stopped("computing the starting model"); });
  std::vector<float> v(vm.vp.size());
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(1.0 / sm[i]);
  for (std::size_t i = 0; i < static_cast<std::size_t>(water_rows) * ny * vm.nx; ++i) v[i] = vm.vp[i];
  return v;
}

/// The largest velocity time.dt propagates stably on the model's grid.
double stable_velocity(io::Config const& cfg, double dh, int order, int dim) {
  return core::courant_limit(order, dim) * dh / cfg.time.dt;
}

/// The upper bound the inversion keeps velocities under: fwi.vmax, or the stability limit of
/// time.dt when fwi.vmax = 0.
double velocity_bound(io::Config const& cfg, double dh, int order, int dim) {
  return cfg.fwi.vmax > 0 ? cfg.fwi.vmax : stable_velocity(cfg, dh, order, dim);
}

/// Stability of the models, before anything runs: the true and starting models must be stable
/// with time.dt (every velocity the inversion may reach, up to fwi.vmax, is the library's
/// check_options).
void check_stability(io::Config const& cfg, io::VelocityModel const& truth, std::vector<float> const& v0, int order) {
  double const vtrue = *std::max_element(truth.vp.begin(), truth.vp.end());
  core::check_cfl(vtrue, cfg.time.dt, truth.dh, order, truth.dim());
  core::check_cfl(*std::max_element(v0.begin(), v0.end()), cfg.time.dt, truth.dh, order, truth.dim());
}

/// The starting model's smoothing length (cells) against the model: a Gaussian wider than the
/// model's largest extent is a constant, and its cost grows with its width (fwi.grad_smooth is
/// the library's check_options).
void check_smoothing(io::Config const& cfg, io::VelocityModel const& shape) {
  int const extent = std::max({shape.nz, shape.nx, shape.ny});
  KSWEEP_REQUIRE(cfg.fwi.smooth_sigma <= extent,
                 "fwi.smooth_sigma = " << cfg.fwi.smooth_sigma << " cells is wider than the model's largest extent, "
                                       << extent << " cells (" << shape.shape()
                                       << "): a Gaussian that wide smooths to a constant; use at most " << extent);
}

/// fwi.observed: ksweep's HDF5 records, or SEG-Y shot gathers (.sgy, .segy) on the model's grid,
/// resampled (band-limited, io/resample.hpp) to time.dt and time.nt when theirs differ.
io::RecordsFile read_observed(std::string const& path, io::VelocityModel const& vm, io::Config const& cfg, bool values,
                              std::pair<double, int>* own_axis = nullptr) {
  io::RecordsFile r = io::is_segy_path(path) ? io::read_records_segy(path, vm.dh, vm.ny, values, model_end(vm))
                                             : io::read_records(path, values);
  if (own_axis) *own_axis = {r.dt, r.nt};
  double const dt = cfg.time.dt;
  int const nt = cfg.time.nt;
  if (r.nt == nt && std::abs(r.dt - dt) <= 1e-9 * dt) return r;
  KSWEEP_REQUIRE(r.dt > 0 && std::isfinite(r.dt),
                 "observed data " << io::shown_path(path) << " have dt = " << r.dt << " s, which cannot be resampled");
  if (!values) {  // the shape the resampled data will have
    r.nt = nt, r.dt = dt;
    return r;
  }
  int padded = -1;
  io::RecordsFile out = io::resample_records(r, nt, dt, &padded);
  std::printf("observed data %s: resampled from %d samples of %g s to time.nt = %d samples of time.dt = %g s\n",
              io::shown_path(path).c_str(), r.nt, r.dt, nt, dt);
  if (padded >= 0)
    std::fprintf(stderr,
                 "ksweep: warning: the observed data end at %g s; the modelling runs to %g s: samples from %g s on "
                 "are zeros\n",
                 (r.nt - 1) * r.dt, (nt - 1) * dt, padded * dt);
  return out;
}

/// Checks that observed data read from a file match the configuration's acquisition.
void check_observed(io::RecordsFile const& r, io::Config const& cfg, core::Survey const& s, io::VelocityModel const& vm,
                    std::string const& path) {
  KSWEEP_REQUIRE(r.shots == s.n_shots && r.nt == cfg.time.nt && r.receivers == s.n_receivers,
                 "observed data " << path << " has shape [" << r.shots << ", " << r.nt << ", " << r.receivers
                                  << "], the configuration needs [shots.count, time.nt, receivers.count] = ["
                                  << s.n_shots << ", " << cfg.time.nt << ", " << s.n_receivers << "]");
  KSWEEP_REQUIRE(
      std::abs(r.dt - cfg.time.dt) <= 1e-9 * cfg.time.dt,
      "observed data " << path << " has dt = " << r.dt << " s, the configuration has time.dt = " << cfg.time.dt);
  // A Ricker wavelet must be the one the data were modelled with; an estimated wavelet or one from
  // a file is the user's statement about the data.
  for (auto const& [key, file, now] :
       {std::tuple<char const*, double, double>{"wavelet.freq", r.freq, cfg.wavelet.freq},
        std::tuple<char const*, double, double>{"wavelet.delay", r.delay, cfg.wavelet.delay}})
    KSWEEP_REQUIRE(cfg.wavelet.source != "ricker" || std::isnan(file) ||
                       std::abs(file - now) <= 1e-9 * std::max(std::abs(now), 1e-300),
                   "observed data " << path << " were modelled with " << key << " = " << file
                                    << ", the configuration has " << key << " = " << now
                                    << ": the synthetic data would be made with another wavelet than the observed "
                                       "ones; set "
                                    << key << " = " << file);
  KSWEEP_REQUIRE(std::abs(r.dh - vm.dh) <= 1e-9 * vm.dh,
                 "observed data " << path << " has dh = " << r.dh << " m, the model has dh = " << vm.dh);
  KSWEEP_REQUIRE(r.ny == vm.ny, "observed data " << path << " were made on a "
                                                 << (r.ny > 0 ? "3D model (ny = " + std::to_string(r.ny) + ")"
                                                              : std::string("2D model"))
                                                 << ", the model is " << vm.shape());
  // Positions in metres, to the millimetre a SEG-Y coordinate holds.
  io::RecordsFile want;
  set_geometry(want, s, vm.dh);
  bool const three = vm.ny > 0;
  auto near = [](io::Position const& a, io::Position const& b) {
    auto close = [](double u, double v) { return std::abs(u - v) <= 1e-3 + 1e-9 * std::abs(v); };
    return close(a.z, b.z) && close(a.x, b.x) && close(a.y, b.y);
  };
  auto at = [&](io::Position const& p) {
    std::ostringstream o;
    o << "(z, " << (three ? "y, " : "") << "x) = (" << p.z << ", ";
    if (three) o << p.y << ", ";
    o << p.x << ") m";
    return o.str();
  };
  for (std::size_t i = 0; i < static_cast<std::size_t>(s.n_shots); ++i) {
    KSWEEP_REQUIRE(near(r.src_pos[i], want.src_pos[i]),
                   "observed data " << path << ": the source of shot " << i << " is at " << at(r.src_pos[i])
                                    << ", the survey places it at " << at(want.src_pos[i]));
    KSWEEP_REQUIRE(r.rec_count[i] == want.rec_count[i], "observed data " << path << ": shot " << i << " has "
                                                                         << r.rec_count[i] << " receivers, the survey "
                                                                         << want.rec_count[i]);
    for (int k = 0; k < want.rec_count[i]; ++k) {
      std::size_t const j = i * static_cast<std::size_t>(s.n_receivers) + static_cast<std::size_t>(k);
      KSWEEP_REQUIRE(near(r.rec_pos[j], want.rec_pos[j]),
                     "observed data " << path << ": receiver " << k << " of shot " << i << " is at " << at(r.rec_pos[j])
                                      << ", the survey places it at " << at(want.rec_pos[j]));
    }
  }
}

/// An input whose values the run identity hashes (data.<name>_sha256), the key naming its file
/// and what it holds.
struct HashedInput {
  char const* hash;
  char const* key;
  char const* what;
};
HashedInput const* hashed_input(std::string const& identity_key) {
  static HashedInput const inputs[] = {
      {"data.model_sha256", "model.source", "the model's values (after decimation and cropping)"},
      {"data.density_sha256", "model.density", "the density's values"},
      {"data.observed_sha256", "fwi.observed", "the observed data"},
      {"data.survey_sha256", "survey.file", "the survey's positions"},
      {"data.wavelet_sha256", "wavelet.source", "the wavelet's samples"}};
  for (auto const& i : inputs)
    if (identity_key == i.hash) return &i;
  return nullptr;
}

/// The identity's record of the files a run read ("files": key -> path, bytes, modified), for
/// the --resume message; not compared (io::resume_changes skips "files").
nlohmann::json input_files(io::Config const& cfg) {
  nlohmann::json out = nlohmann::json::object();
  std::error_code ec;
  for (auto const& [key, value] : cfg.input_paths) {
    if (value.empty() || !fs::is_regular_file(value, ec)) continue;
    auto const bytes = fs::file_size(value, ec);
    auto const when = fs::last_write_time(value, ec);
    auto const secs =
        std::chrono::duration_cast<std::chrono::seconds>(when.time_since_epoch()).count() -
        std::chrono::duration_cast<std::chrono::seconds>(fs::file_time_type::clock::now().time_since_epoch()).count() +
        static_cast<long long>(std::time(nullptr));
    char stamp[32] = "";
    std::time_t const t = static_cast<std::time_t>(secs);
    if (std::tm tm{}; gmtime_r(&t, &tm) != nullptr) std::strftime(stamp, sizeof stamp, "%Y-%m-%d %H:%M:%S UTC", &tm);
    out[key] = {{"path", fs::absolute(value, ec).string()}, {"bytes", bytes}, {"modified", stamp}};
  }
  return out;
}

/// ": PATH, N bytes modified T when the checkpoint was made, M bytes modified U now" for the
/// file behind `key`, from the identities' "files" records (empty where neither has one).
std::string file_change(nlohmann::json const& saved, nlohmann::json const& now, std::string const& key) {
  auto const record = [&](nlohmann::json const& id) -> nlohmann::json const* {
    if (!id.contains("files") || !id["files"].contains(key)) return nullptr;
    return &id["files"][key];
  };
  auto const* a = record(saved);
  auto const* b = record(now);
  if (a == nullptr && b == nullptr) return "";
  auto const describe = [](nlohmann::json const& r) {
    return std::to_string(r.value("bytes", std::uint64_t{0})) + " bytes, modified " +
           r.value("modified", std::string("(unknown)"));
  };
  std::string out = ": " + io::shown_path(((b != nullptr) ? *b : *a).value("path", std::string("?")));
  out += a != nullptr ? ", " + describe(*a) + " when the checkpoint was made" : ", not recorded in the checkpoint";
  out += b != nullptr ? "; " + describe(*b) + " now" : "; not a file now";
  return out;
}

/// Throws the --resume message naming every key whose value differs between the checkpoint's
/// run identity `saved` and this run's `now` (keys that may change on --resume excepted).
void require_same_run(nlohmann::json const& saved, nlohmann::json const& now, fs::path const& ck_path) {
  auto const changes = io::resume_changes(saved, now);
  if (changes.empty()) return;
  std::ostringstream os;
  os << "--resume: the configuration differs from the one " << io::shown_path(ck_path)
     << " was made with, in keys that change the run's meaning:";
  for (auto const& c : changes) {
    if (auto const* input = hashed_input(c.key))
      os << "\n  " << input->what << " (" << input->key << ") differ from those the checkpoint was made with"
         << file_change(saved, now, input->key);
    else os << "\n  " << c.key << ": " << shown(c.before) << " in the checkpoint, " << shown(c.after) << " now";
  }
  os << "\nonly these keys may change on --resume:";
  for (auto const& k : io::resume_mutable_keys()) os << " " << k;
  os << "\nrestore the checkpoint's values, or start a new run in a new folder";
  throw Error(os.str());
}

/// The shots of an inversion: [survey] file when given; else the trace headers of a SEG-Y
/// fwi.observed; else the [shots] and [receivers] layout.
core::Survey fwi_survey(io::Config const& cfg, io::VelocityModel const& shape) {
  auto const& obs = cfg.fwi.observed;
  if (!cfg.survey.file.empty() || obs.empty() || !io::is_segy_path(obs)) return acquisition(cfg, shape);
  return survey_of(io::read_records_segy(obs, shape.dh, shape.ny, false, model_end(shape)), shape.dh);
}

/// The checks of check_inputs, one step each, with what they share.
class InputChecks {
 public:
  InputChecks(io::Config const& config, RunOptions const& run_options, comm::Communicator const& ranks,
              io::VelocityModel const& model_shape)
      : cfg(config),
        f(config.fwi),
        opt(run_options),
        comm(ranks),
        shape(model_shape),
        grid(model_grid(model_shape)),
        n(static_cast<std::size_t>(model_shape.rows()) * static_cast<std::size_t>(model_shape.nx)),
        plane(static_cast<std::size_t>(model_shape.rows() / model_shape.nz) *
              static_cast<std::size_t>(model_shape.nx)) {}

  Inputs run() {
    layout();
    memory();
    resume_header();
    auto const inputs = run_inputs(cfg, opt);  // the output folder: the checks that write nothing
    collectively(comm, [&] {                   // rank 0 owns the folder; every rank stops with its error
      if (comm.is_root()) check_output_folder(opt.out, opt.overwrite, in.in_place, inputs);
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
      in.survey = fwi_survey(cfg, shape);
      core::check_time(cfg.time.dt, cfg.time.nt);
      core::check_grid(grid, make_pml(cfg), order);
      core::check_survey(in.survey, grid, make_pml(cfg));
      check_smoothing(cfg, shape);
      setup.grid = grid;
      setup.order = order;
      setup.dt = cfg.time.dt;
      setup.survey = in.survey;
      setup.physics = fwi::parse_physics(cfg.propagator.physics);
      options = inversion_options(cfg, grid, std::max(f.water_rows, 0));
      fwi::check_options(setup, options, keys);
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
    if (opt.dry_run && comm.is_root()) std::printf("%s", memory_table(phases, mm, comm.local_size()).c_str());
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
    throw_if_stopped("reading the model");
    core::check_velocity(truth.vp.data(), static_cast<long long>(n));
    in.water = f.water_rows >= 0 ? f.water_rows : detect_water_rows(truth);
    in.v0 = starting_model(truth, f.smooth_sigma, in.water);
    check_stability(cfg, truth, in.v0, cfg.propagator.order);
    if (variable_density(cfg)) {
      in.rho_true = io::load_density(cfg.model, truth);
      in.rho0 = starting_density(truth, in.rho_true, f.smooth_sigma, in.water);
    }
    options.water_rows = in.water;
    fwi::check_bounds(setup, options, in.v0, in.rho0, "the starting model", keys);
    if (comm.is_root()) warn_acquisition(cfg, truth, in.survey, comm);
    if (comm.is_root() && cfg.survey.file.empty() && io::is_segy_path(f.observed))
      warn_unused_layout(cfg, "the trace headers of fwi.observed (SEG-Y) replace");
  }

  /// The run's identity, recorded in every checkpoint and checked on --resume; every rank must
  /// hold the same one (the same configuration and model).
  void identity() {
    auto const& survey = in.survey;
    in.run = {{"config", io::config_to_json(cfg)},
              {"data", {{"model_sha256", io::sha256_hex(in.truth.vp.data(), n * sizeof(float))}}}};
    if (variable_density(cfg)) in.run["data"]["density_sha256"] = io::sha256_hex(in.rho_true.data(), n * sizeof(float));
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
    in.run["files"] = input_files(cfg);  // may differ between ranks' views (paths); not compared
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
    require_same_run(saved, in.run, ck_path);
    std::string const where = io::shown_path(ck_path);
    KSWEEP_REQUIRE(f.iterations > ck.iteration,
                   "--resume: fwi.iterations = "
                       << f.iterations
                       << (f.iterations == ck.iteration ? " iterations are all done" : " is smaller than the ")
                       << (f.iterations == ck.iteration ? std::string(" (") : std::to_string(ck.iteration))
                       << (f.iterations == ck.iteration ? "" : " iterations already done in ") << where
                       << (f.iterations == ck.iteration ? ")" : "")
                       << ": nothing is left to run; set fwi.iterations above " << ck.iteration << " to continue");
    KSWEEP_REQUIRE(f.optimizer != "lbfgs" || ck.lbfgs.pairs >= 0,
                   "--resume: the checkpoint " << where
                                               << " holds no L-BFGS memory (it was written in checkpoint format 2, "
                                                  "before checkpoints kept L-BFGS's correction pairs): an L-BFGS run "
                                                  "cannot continue from it with the steps it would have taken; start "
                                                  "the run again");
    int const params = variable_density(cfg) ? 2 : 1;
    int const moments = variable_density(cfg) ? static_cast<int>(f.invert.size()) : 1;
    KSWEEP_REQUIRE(ck.parameters == params && ck.moments == moments,
                   "--resume: the checkpoint " << where << " holds " << ck.parameters << " parameter(s) and moments of "
                                               << ck.moments << ", this run has " << params << " and " << moments
                                               << " (propagator.physics, fwi.invert)");
    auto const mid = ck.model.begin() + static_cast<std::ptrdiff_t>(n);
    std::vector<float> const vp_ck(ck.model.begin(), mid);
    fwi::check_bounds(setup, options, vp_ck, std::vector<float>(mid, ck.model.end()),
                      "--resume: the checkpoint " + where, keys);
    double const vck = *std::max_element(vp_ck.begin(), vp_ck.end());
    double const vstable = stable_velocity(cfg, in.truth.dh, cfg.propagator.order, shape.dim());
    KSWEEP_REQUIRE(vck <= vstable, "--resume: the checkpoint "
                                       << where << " holds velocities up to " << vck << " m/s, above the " << vstable
                                       << " m/s that time.dt allows: its contents are out of range");
    // The water rows are never updated: a checkpoint whose water differs from the starting
    // model's was edited (its checksum resealed) or made from another model.
    std::size_t const water_cells = static_cast<std::size_t>(in.water) * plane;
    for (std::size_t p = 0; p < static_cast<std::size_t>(params); ++p) {
      auto const& start = p == 0 ? in.v0 : in.rho0;
      auto const* held = ck.model.data() + p * n;
      for (std::size_t i = 0; i < water_cells && i < start.size(); ++i)
        KSWEEP_REQUIRE(std::memcmp(&held[i], &start[i], sizeof(float)) == 0,
                       "--resume: the checkpoint " << where << "'s " << (p == 0 ? "model" : "density") << " holds "
                                                   << held[i] << " at cell " << i << " of the " << in.water
                                                   << " water row(s), which the inversion never changes "
                                                   << "(the starting model has " << start[i]
                                                   << " there): the checkpoint was edited or made from another model");
    }
  }

  std::string observed_key() const { return "fwi.observed = " + io::shown_path(f.observed) + ": "; }

  io::Config const& cfg;
  io::FwiSection const& f;
  RunOptions const& opt;
  comm::Communicator const& comm;
  io::VelocityModel const& shape;
  core::ModelGrid const grid;
  std::size_t const n, plane;  ///< cells of the model, of a depth row (nx, or ny nx in 3D)
  Inputs in;
  fwi::Problem setup;  ///< the grid, survey, order, dt and physics: what the library's checks read
  fwi::Options options;
  fwi::OptionNames const keys{"fwi.", "time.dt"};
  fs::path ck_path;
};

}  // namespace

Inputs check_inputs(io::Config const& cfg, RunOptions const& opt, comm::Communicator const& comm,
                    io::VelocityModel const& shape) {
  return InputChecks(cfg, opt, comm, shape).run();
}

fwi::Options inversion_options(io::Config const& cfg, core::ModelGrid const& grid, int water) {
  auto const& f = cfg.fwi;
  fwi::Options o;
  o.method = f.optimizer == "lbfgs" ? fwi::Method::lbfgs : fwi::Method::adam;
  o.batch = f.batch;
  o.seed = static_cast<std::uint64_t>(f.seed);
  o.loss_sum = f.loss_norm == "sum";
  o.water_rows = water;
  o.grad_smooth = f.grad_smooth;
  o.precondition = f.precondition;
  o.vmin = f.vmin;
  o.vmax = velocity_bound(cfg, grid.dh, cfg.propagator.order, grid.dim());  // velocities stay physical and stable
  o.adam.lr = f.lr;
  o.adam.beta1 = f.beta1;
  o.adam.beta2 = f.beta2;
  o.adam.eps = f.eps;
  o.lbfgs.first_step = f.lr;
  o.lbfgs.memory = f.lbfgs_memory;
  o.storage = storage::make_storage_config(cfg.storage.strategy, cfg.storage.location, cfg.storage.dtype,
                                           cfg.storage.transfer_interval, cfg.storage.disk_dir, cfg.storage.pinned);
  o.storage.layer_chain = cfg.storage.layer_chain;
  o.schedule = core::parse_schedule(cfg.propagator.schedule);
  o.domains = domain_split(cfg, grid);
  if (variable_density(cfg)) {
    o.invert = f.invert;
    o.rho_min = f.rho_min;
    o.rho_max = f.rho_max;
    o.lr_rho = f.lr_rho;
  }
  if (char const* e = std::getenv("KSWEEP_FAULT_NAN")) o.fault = e;  // test hook (see Options::fault)
  return o;
}

fwi::Problem inversion_problem(io::Config const& cfg, Inputs& in) {
  fwi::Problem pb;
  pb.grid = model_grid(in.truth);
  pb.pml = make_pml(cfg);
  pb.order = cfg.propagator.order;
  pb.dt = cfg.time.dt;
  pb.nt = cfg.time.nt;
  pb.survey = in.survey;
  pb.wavelet = in.wavelet;
  pb.observed = std::move(in.obs.data);  // the workflow holds the one copy
  pb.start = in.v0;
  pb.truth = in.truth.vp;
  pb.physics = fwi::parse_physics(cfg.propagator.physics);
  if (variable_density(cfg)) {
    pb.density = in.rho0;
    pb.truth_density = in.rho_true;
  }
  return pb;
}

std::vector<RunInput> run_inputs(io::Config const& cfg, RunOptions const& opt) {
  std::vector<RunInput> in{{"--config", cfg.source_path}};
  std::error_code ec;
  // Every path-valued key (as load_config declares them) that names a file.
  for (auto const& [key, value] : cfg.input_paths)
    if (!value.empty() && fs::is_regular_file(value, ec)) in.push_back({key, value});
  if (!opt.resume.empty()) in.push_back({"--resume", fs::path(opt.resume) / "checkpoint.bin"});
  return in;
}

}  // namespace ksweep::app
