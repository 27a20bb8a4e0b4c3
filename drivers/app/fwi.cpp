// ksweep fwi: the program over the library inversion (ksweep::fwi::Inversion): every check of
// the inputs before the first write, the starting model, then the iterations with progress,
// checkpoints, the summary and figures. Outputs are written by rank 0 only, each file
// atomically; the inversion itself (batch draw, gradients over the ranks, conditioning, the
// optimizer step) is the library's.

#include "common.hpp"
#include "guard.hpp"
#include "memory_estimate.hpp"

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
#include <optional>
#include <sstream>
#include <tuple>
#include <utility>

namespace ksweep::app {

namespace {

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

using Clock = std::chrono::steady_clock;

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

/// The inversion keeps velocities in [fwi.vmin, `vmax`] (velocity_bound); a model
/// (the starting model, a checkpoint's) whose updated cells (past the first `fixed`, the water)
/// lie outside would be clipped wholesale at the first step.
void check_bounds(io::Config const& cfg, std::vector<float> const& v, std::size_t fixed, double vmax,
                  std::string const& what) {
  if (fixed >= v.size()) return;
  auto const [lo, hi] = std::minmax_element(v.begin() + static_cast<std::ptrdiff_t>(fixed), v.end());
  KSWEEP_REQUIRE(*lo >= cfg.fwi.vmin && *hi <= vmax,
                 what << " has velocities in [" << *lo << ", " << *hi << "] m/s outside the water rows, outside the "
                      << "bounds the inversion keeps, [fwi.vmin, fwi.vmax] = [" << cfg.fwi.vmin << ", " << vmax
                      << "] m/s" << (cfg.fwi.vmax > 0 ? "" : " (fwi.vmax = 0: the stability limit of time.dt)")
                      << "; every cell outside would be clipped at the first step: widen the bounds to cover "
                      << "the model, or check its values (units: m/s)");
}

/// Variable density: a density (the starting one, a checkpoint's) outside [fwi.rho_min,
/// fwi.rho_max] past the water rows would be clipped at the first step when inverted.
void check_density_bounds(io::Config const& cfg, std::vector<float> const& rho, std::size_t fixed,
                          std::string const& what) {
  if (fixed >= rho.size()) return;
  auto const [lo, hi] = std::minmax_element(rho.begin() + static_cast<std::ptrdiff_t>(fixed), rho.end());
  KSWEEP_REQUIRE(*lo >= cfg.fwi.rho_min && *hi <= cfg.fwi.rho_max,
                 what << " has densities in [" << *lo << ", " << *hi << "] kg/m^3 outside the water rows, outside "
                      << "the bounds the inversion keeps, [fwi.rho_min, fwi.rho_max] = [" << cfg.fwi.rho_min << ", "
                      << cfg.fwi.rho_max << "] kg/m^3; widen the bounds to cover the density, or check its values "
                      << "(units: kg/m^3)");
}

/// Whether the run inverts with variable density, and whether it inverts the density.
bool variable_density(io::Config const& cfg) { return cfg.propagator.physics == "acoustic_vd"; }
bool inverts(io::Config const& cfg, char const* p) {
  return std::find(cfg.fwi.invert.begin(), cfg.fwi.invert.end(), p) != cfg.fwi.invert.end();
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

/// The files a run reads, by the key that names each (for --overwrite, which may not replace them).
std::vector<RunInput> run_inputs(io::Config const& cfg, RunOptions const& opt) {
  std::vector<RunInput> in{{"--config", cfg.source_path}};
  std::error_code ec;
  // Every path-valued key (as load_config declares them) that names a file.
  for (auto const& [key, value] : cfg.input_paths)
    if (!value.empty() && fs::is_regular_file(value, ec)) in.push_back({key, value});
  if (!opt.resume.empty()) in.push_back({"--resume", fs::path(opt.resume) / "checkpoint.bin"});
  return in;
}

/// The shots of an inversion: [survey] file when given; else the trace headers of a SEG-Y
/// fwi.observed; else the [shots] and [receivers] layout.
core::Survey fwi_survey(io::Config const& cfg, io::VelocityModel const& shape) {
  auto const& obs = cfg.fwi.observed;
  if (!cfg.survey.file.empty() || obs.empty() || !io::is_segy_path(obs)) return acquisition(cfg, shape);
  return survey_of(io::read_records_segy(obs, shape.dh, shape.ny, false, model_end(shape)), shape.dh);
}

/// The library's options from the configuration: `water` rows kept (fwi.water_rows, or the
/// rows detected in the model), fwi.vmax = 0 the stability limit of time.dt.
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
/// model-sized is computed. A 3D model is handled as nz ny rows of nx cells wherever only its
/// size matters.
Inputs check_inputs(io::Config const& cfg, RunOptions const& opt, comm::Communicator const& comm,
                    io::VelocityModel const& shape) {
  auto const& f = cfg.fwi;
  int const order = cfg.propagator.order, dim = shape.dim();
  Inputs in;
  int const nz = shape.nz, nx = shape.nx;
  std::size_t const n = static_cast<std::size_t>(shape.rows()) * nx,
                    plane = static_cast<std::size_t>(shape.rows() / nz) * nx;
  core::ModelGrid const grid = model_grid(shape);
  // The same checks on the same inputs on every rank: one message (rank 0's) and one exit code
  // when they fail, not every rank's and an MPI abort.
  collectively(comm, [&] {
    in.survey = fwi_survey(cfg, shape);
    core::check_time(cfg.time.dt, cfg.time.nt);
    core::check_grid(grid, make_pml(cfg), order);
    core::check_survey(in.survey, grid, make_pml(cfg));
    check_smoothing(cfg, shape);
    // The library's checks of the options (the water rows detected later lie inside the model).
    fwi::Problem pb;
    pb.grid = grid;
    pb.order = order;
    pb.dt = cfg.time.dt;
    pb.survey = in.survey;
    pb.physics = fwi::parse_physics(cfg.propagator.physics);
    fwi::check_options(pb, inversion_options(cfg, grid, std::max(f.water_rows, 0)), {"fwi.", "time.dt"});
  });
  auto const& survey = in.survey;
  in.wavelet = on_every_rank(comm, [&] { return make_wavelet(cfg); });  // a wavelet file's errors first
  int const nr = survey.n_receivers;
  int const batch = f.optimizer == "lbfgs" ? survey.n_shots : f.batch;
  // parallel.domains: shot groups of one rank per subdomain (the same message on every rank).
  auto const split = domain_split(cfg, grid);
  check_split_run(cfg, grid, split, survey, comm);
  int const groups = comm.size() / split.count();
  int const shots_per_rank = (batch + groups - 1) / groups;

  // Memory: estimated from the layout before anything large is allocated; a run that does not
  // fit is told the smallest split of the model that would.
  {
    // The modelling of the observed data (when modelled) and of the final model's data.
    std::vector<MemoryEstimate> phases{
        estimate_model(cfg, shape, survey.n_shots, nr, false, cfg.propagator.batch, split),
        estimate_fwi(cfg, shape, survey.n_shots, nr, shots_per_rank, split)};
    auto const mm = machine_memory(cfg);
    if (opt.dry_run && comm.is_root()) std::printf("%s", memory_table(phases, mm, comm.local_size()).c_str());
    collectively(comm, [&] {
      try {
        check_memory(phases, mm, comm.local_size());
      } catch (Error const& e) {
        throw Error(std::string(e.what()) + smallest_split(cfg, shape, survey.n_shots, nr, batch, mm, split));
      }
    });
  }

  // Resume: the checkpoint's header (its size against this model's) before it is read whole.
  in.resuming = !opt.resume.empty();
  fs::path const ck_path = in.resuming ? fs::path(opt.resume) / "checkpoint.bin" : fs::path();
  if (in.resuming) {
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
  // The output folder: the checks that write nothing.
  auto const inputs = run_inputs(cfg, opt);
  collectively(comm, [&] {  // rank 0 owns the folder; every rank stops with its error
    if (comm.is_root()) check_output_folder(opt.out, opt.overwrite, in.in_place, inputs);
  });

  // Observed data from a file: everything but the samples (shape, geometry, acquisition), read
  // by rank 0 before any model-sized work.
  std::string const observed_key = "fwi.observed = " + io::shown_path(f.observed) + ": ";
  collectively(
      comm,
      [&] {
        if (comm.is_root() && !f.observed.empty())
          check_observed(read_observed(f.observed, shape, cfg, false), cfg, survey, shape, io::shown_path(f.observed));
      },
      observed_key);
  KSWEEP_REQUIRE(f.smooth_sigma > 0 || !f.observed.empty(),
                 "fwi.smooth_sigma = 0 makes the starting model the true model, from which the observed data are "
                 "modelled: the inversion would start at its answer (a loss of 0); set fwi.smooth_sigma > 0, or give "
                 "observed data (fwi.observed) to invert from model.source");

  // The model and the starting model (SIGINT / SIGTERM answered throughout); a rank that cannot
  // read the model stops every rank.
  in.truth = on_every_rank(comm, [&] { return io::load_velocity(cfg.model); });
  auto const& truth = in.truth;
  throw_if_stopped("reading the model");
  core::check_velocity(truth.vp.data(), static_cast<long long>(n));
  in.water = f.water_rows >= 0 ? f.water_rows : detect_water_rows(truth);
  in.v0 = starting_model(truth, f.smooth_sigma, in.water);
  check_stability(cfg, truth, in.v0, order);
  double const vbound = velocity_bound(cfg, truth.dh, order, dim);
  check_bounds(cfg, in.v0, static_cast<std::size_t>(in.water) * plane, vbound, "the starting model");
  if (variable_density(cfg)) {
    in.rho_true = io::load_density(cfg.model, truth);
    in.rho0 = starting_density(truth, in.rho_true, f.smooth_sigma, in.water);
    if (inverts(cfg, "rho"))
      check_density_bounds(cfg, in.rho0, static_cast<std::size_t>(in.water) * plane, "the starting density");
  }
  if (comm.is_root()) warn_acquisition(cfg, truth, survey, comm);
  if (comm.is_root() && cfg.survey.file.empty() && io::is_segy_path(f.observed))
    warn_unused_layout(cfg, "the trace headers of fwi.observed (SEG-Y) replace");

  // The run's identity, recorded in every checkpoint and checked on --resume; every rank must
  // hold the same one (the same configuration and model).
  in.run = {{"config", io::config_to_json(cfg)},
            {"data", {{"model_sha256", io::sha256_hex(truth.vp.data(), n * sizeof(float))}}}};
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

  // Observed data from a file: read and checked (shape, geometry, acquisition, finite samples,
  // a signal) by rank 0; its error, if any, stops every rank.
  collectively(
      comm,
      [&] {
        if (!comm.is_root() || f.observed.empty()) return;
        in.obs = read_observed(f.observed, shape, cfg, true, &in.obs_axis);
        check_observed(in.obs, cfg, survey, shape, io::shown_path(f.observed));
        if (auto const silent = silent_data(in.obs.data, "the observed data", cfg); !silent.empty())
          throw Error(silent);
      },
      observed_key);
  if (comm.is_root() && !f.observed.empty())
    in.run["data"]["observed_sha256"] = io::sha256_hex(in.obs.data.data(), in.obs.data.size() * sizeof(float));

  // Resume state (read by every rank: the same file), trusted only once checked.
  if (in.resuming) {
    auto& ck = in.ck;
    ck = io::read_checkpoint(ck_path, n);
    auto saved = ck.run;
    if (!comm.is_root() && saved.contains("data")) saved["data"].erase("observed_sha256");  // only rank 0 read the data
    require_same_run(saved, in.run, ck_path);
    KSWEEP_REQUIRE(f.iterations > ck.iteration,
                   "--resume: fwi.iterations = "
                       << f.iterations
                       << (f.iterations == ck.iteration ? " iterations are all done" : " is smaller than the ")
                       << (f.iterations == ck.iteration ? std::string(" (") : std::to_string(ck.iteration))
                       << (f.iterations == ck.iteration ? "" : " iterations already done in ")
                       << io::shown_path(ck_path) << (f.iterations == ck.iteration ? ")" : "")
                       << ": nothing is left to run; set fwi.iterations above " << ck.iteration << " to continue");
    KSWEEP_REQUIRE(f.optimizer != "lbfgs" || ck.lbfgs.pairs >= 0,
                   "--resume: the checkpoint " << io::shown_path(ck_path)
                                               << " holds no L-BFGS memory (it was written in checkpoint format 2, "
                                                  "before checkpoints kept L-BFGS's correction pairs): an L-BFGS run "
                                                  "cannot continue from it with the steps it would have taken; start "
                                                  "the run again");
    int const params = variable_density(cfg) ? 2 : 1;
    int const moments = variable_density(cfg) ? static_cast<int>(f.invert.size()) : 1;
    KSWEEP_REQUIRE(ck.parameters == params && ck.moments == moments,
                   "--resume: the checkpoint " << io::shown_path(ck_path) << " holds " << ck.parameters
                                               << " parameter(s) and moments of " << ck.moments << ", this run has "
                                               << params << " and " << moments << " (propagator.physics, fwi.invert)");
    std::vector<float> const vp_ck(ck.model.begin(), ck.model.begin() + static_cast<std::ptrdiff_t>(n));
    check_bounds(cfg, vp_ck, static_cast<std::size_t>(in.water) * plane, vbound,
                 "--resume: the checkpoint " + io::shown_path(ck_path) + "'s model");
    if (params == 2 && inverts(cfg, "rho"))
      check_density_bounds(cfg, std::vector<float>(ck.model.begin() + static_cast<std::ptrdiff_t>(n), ck.model.end()),
                           static_cast<std::size_t>(in.water) * plane,
                           "--resume: the checkpoint " + io::shown_path(ck_path) + "'s density");
    double const vck = *std::max_element(vp_ck.begin(), vp_ck.end());
    double const vstable = stable_velocity(cfg, truth.dh, order, dim);
    KSWEEP_REQUIRE(vck <= vstable, "--resume: the checkpoint "
                                       << io::shown_path(ck_path) << " holds velocities up to " << vck
                                       << " m/s, above the " << vstable
                                       << " m/s that time.dt allows: its contents are out of range");
    // The water rows are never updated: a checkpoint whose water differs from the starting
    // model's was edited (its checksum resealed) or made from another model.
    std::size_t const water_cells = static_cast<std::size_t>(in.water) * plane;
    for (std::size_t p = 0; p < static_cast<std::size_t>(params); ++p) {
      auto const& start = p == 0 ? in.v0 : in.rho0;
      auto const* held = ck.model.data() + p * n;
      for (std::size_t i = 0; i < water_cells && i < start.size(); ++i)
        KSWEEP_REQUIRE(std::memcmp(&held[i], &start[i], sizeof(float)) == 0,
                       "--resume: the checkpoint " << io::shown_path(ck_path) << "'s " << (p == 0 ? "model" : "density")
                                                   << " holds " << held[i] << " at cell " << i << " of the " << in.water
                                                   << " water row(s), which the inversion never changes "
                                                   << "(the starting model has " << start[i]
                                                   << " there): the checkpoint was edited or made from another model");
    }
  }
  return in;
}

/// The library's problem from the checked inputs: the whole band's wavelet and data (the
/// workflow's stages low-pass them).
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

/// The model as written to HDF5: [nz][nx], or [nz][ny][nx] in 3D.
io::Dataset dataset(io::VelocityModel const& truth, std::string name, std::vector<float> data) {
  return truth.ny > 0 ? io::Dataset{std::move(name), truth.nz, truth.ny, std::move(data), truth.nx}
                      : io::Dataset{std::move(name), truth.nz, truth.nx, std::move(data)};
}

/// A model file: vp, and rho when `rho` is not empty.
void write_models(fs::path const& path, io::VelocityModel const& truth, std::vector<float> const& vp,
                  std::vector<float> const& rho) {
  if (rho.empty()) {
    io::write_model(path, vp, truth.nz, truth.nx, truth.dh, "vp", truth.ny);
    return;
  }
  io::write_datasets(path, {dataset(truth, "vp", vp), dataset(truth, "rho", rho)}, truth.dh);
}

/// wavelet.h5: the run's source wavelet over the whole band ("wavelet"), the Ricker reference of
/// an estimate ("reference"), and each stage's low-passed wavelet ("stage_1", ...).
void write_wavelet_file(fs::path const& path, io::Config const& cfg, Inputs const& in) {
  std::vector<io::NamedTrace> traces{{"wavelet", in.wavelet}};
  if (cfg.wavelet.source == "estimate") traces.push_back({"reference", ricker_wavelet(cfg)});
  for (std::size_t k = 0; k < in.stages.size(); ++k)
    traces.push_back({"stage_" + std::to_string(k + 1), in.stages.wavelet(static_cast<int>(k))});
  io::write_wavelets(path, traces, cfg.time.dt);
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
    bool const vd = variable_density(cfg);
    if (vd)
      std::printf("iter %4d/%d  loss %.6e  rmse %8.2f m/s  rmse rho %8.2f kg/m^3  %6.2f s/iter  left %s\n", t,
                  f.iterations, r.loss, r.rmse, r.rmse_density, r.seconds,
                  format_seconds(seconds_total / done * left).c_str());
    else
      std::printf("iter %4d/%d  loss %.6e  rmse %8.2f m/s  %6.2f s/iter  left %s\n", t, f.iterations, r.loss, r.rmse,
                  r.seconds, format_seconds(seconds_total / done * left).c_str());
    std::fflush(stdout);
    bool const figures = f.figures_every > 0 && (t % f.figures_every == 0 || t == f.iterations);
    bool const checkpoint = f.checkpoint_every > 0 && (t % f.checkpoint_every == 0 || t == f.iterations);
    bool const wanted = f.save_models || figures || checkpoint;
    std::vector<float> const vf = wanted ? inv.model() : std::vector<float>();
    std::vector<float> const rf = wanted && vd ? inv.density() : std::vector<float>();
    char name[64];
    if (f.save_models) {
      std::snprintf(name, sizeof name, "model_%04d.h5", t);
      make_directory(out / "models");
      write_models(out / "models" / name, truth, vf, rf);
    }
    if (figures) {
      auto img = inv.images();
      std::snprintf(name, sizeof name, "epoch_%04d.h5", t);
      make_directory(out / "epochs");
      std::vector<io::Dataset> sets{dataset(truth, "vp", vf), dataset(truth, "grad", std::move(img.grad)),
                                    dataset(truth, "illum_src", std::move(img.illum_src)),
                                    dataset(truth, "illum_rec", std::move(img.illum_rec))};
      if (vd) {
        sets.push_back(dataset(truth, "rho", rf));
        sets.push_back(dataset(truth, "grad_rho", std::move(img.grad_density)));
      }
      io::write_datasets(out / "epochs" / name, sets, truth.dh);
    }
    summary["iterations"] = history;
    auto const mem = inv.memory();
    summary["memory"] = {{"strategy", mem.strategy},
                         {"location", mem.location},
                         {"dtype", mem.dtype},
                         {"boundary_bytes", mem.boundary_bytes},
                         {"layer_term_bytes", mem.layer_term_bytes},
                         {"staging_bytes", mem.staging_bytes},
                         {"wavefield_bytes", mem.wavefield_bytes},
                         {"seed_bytes", mem.seed_bytes},
                         {"image_bytes", mem.image_bytes},
                         {"observed_bytes", mem.observed_bytes},
                         {"synthetic_bytes", mem.synthetic_bytes},
                         {"peak_device_bytes", mem.peak_device_bytes}};
    io::write_json_atomic(out / "summary.json", summary);
    if (checkpoint) {
      auto const st = inv.state();
      io::Checkpoint c;
      c.run = in.run;
      c.iteration = t;
      c.rng = st.rng;
      c.history = history;
      c.model = vf;
      c.model.insert(c.model.end(), rf.begin(), rf.end());
      c.parameters = vd ? 2 : 1;
      c.moments = vd ? static_cast<int>(f.invert.size()) : 1;
      // L-BFGS keeps no moments (zeros there) but its memory, so that a resumed run takes the
      // uninterrupted run's steps.
      std::size_t const nm = static_cast<std::size_t>(c.moments) * vf.size();
      c.m = st.first.empty() ? std::vector<float>(nm, 0.f) : st.first;
      c.v = st.second.empty() ? std::vector<float>(nm, 0.f) : st.second;
      if (f.optimizer == "lbfgs") copy_lbfgs(st.lbfgs, c.lbfgs);
      io::write_checkpoint(out / "checkpoint.bin", c);
      last_checkpoint = out / "checkpoint.bin";
      last_checkpoint_iteration = t;
    }
  }
};

/// synthetic.h5 (and synthetic.segy beside a SEG-Y fwi.observed): the data of the final model
/// with the run's wavelet over the whole band, at the observed data's own sampling interval and
/// length (resampled back from time.dt, band-limited), with the survey's geometry: what a
/// geophysicist compares with the field data (rank 0).
/// The final model's data (rank 0, or every rank of `ranks` for a split model).
io::RecordsFile final_synthetic(io::Config const& cfg, Inputs const& in, fwi::Inversion const& inv,
                                comm::Communicator const* ranks, bool root) {
  if (root) std::printf("modelling the final model's data (%d shots)\n", in.survey.n_shots);
  std::fflush(stdout);
  io::VelocityModel final_model = in.truth;
  final_model.vp = inv.model();
  std::vector<float> const rho = inv.density();
  auto syn = model_observed(cfg, final_model, in.survey, false, in.wavelet, rho.empty() ? nullptr : &rho, ranks);
  auto const [dt, nt] = in.obs_axis;
  if (nt > 0 && (nt != syn.nt || std::abs(dt - syn.dt) > 1e-9 * dt)) syn = io::resample_records(syn, nt, dt);
  return syn;
}

void write_synthetic(io::Config const& cfg, io::RecordsFile const& syn, fs::path const& out) {
  io::write_records(out / "synthetic.h5", syn);
  if (io::is_segy_path(cfg.fwi.observed)) io::write_records_segy(out / "synthetic.segy", syn);
  std::printf("wrote %s (%d samples of %g s)\n", io::shown_path(out / "synthetic.h5").c_str(), syn.nt, syn.dt);
}

int fwi(io::Config const& cfg, RunOptions const& opt, comm::Communicator const& comm, io::VelocityModel const& shape) {
  auto const& f = cfg.fwi;
  auto const t_start = std::chrono::steady_clock::now();
  fs::path const out = opt.out;
  Inputs in = check_inputs(cfg, opt, comm, shape);
  // --dry-run: every check passed (the output folder's on rank 0); nothing is created.
  if (opt.dry_run) {
    if (comm.is_root()) std::printf("ksweep fwi --dry-run: the inputs are valid; nothing was written\n");
    return 0;
  }
  // The output folder: locked against other runs, checked again under the lock, created if
  // needed; nothing written into it yet.
  std::optional<OutputFolder> folder;
  auto const inputs = run_inputs(cfg, opt);
  collectively(comm, [&] { folder.emplace(out, opt.overwrite, in.in_place, comm.is_root(), inputs); });

  // Observed data modelled once by rank 0, or by every rank when the model is split (SIGINT /
  // SIGTERM honoured between shot batches; after the modelling when split).
  bool interrupted = false;
  std::string silent;
  bool const split = domain_split(cfg, model_grid(in.truth)).split();
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
  // The wavelet estimated by rank 0 from the observed data and the starting model's response to
  // the Ricker reference (the same bits on a resumed run: the same inputs).
  if ((comm.is_root() || split) && cfg.wavelet.source == "estimate" && !interrupted && silent.empty()) {
    if (comm.is_root())
      std::printf("estimating the wavelet: modelling %d shots on the starting model\n", in.survey.n_shots);
    std::fflush(stdout);
    try {
      io::VelocityModel start = in.truth;
      start.vp = in.v0;
      auto const reference = ricker_wavelet(cfg);
      auto const syn =
          model_observed(cfg, start, in.survey, false, reference, variable_density(cfg) ? &in.rho0 : nullptr, ranks);
      in.estimate = fwi::estimate_wavelet(in.obs.data, syn.data, reference, in.survey.n_shots, cfg.time.nt,
                                          in.survey.n_receivers, cfg.time.dt, cfg.wavelet.stabilisation);
      in.wavelet = in.estimate.wavelet;
      if (comm.is_root())
        std::printf(
            "wavelet estimated: unexplained data %.4f with it, %.4f with the Ricker reference (on the starting "
            "model)\n",
            in.estimate.residual, in.estimate.residual_reference);
    } catch (Interrupted const&) {
      interrupted = true;
    } catch (Error const& e) {
      silent = std::string("wavelet.source = \"estimate\": ") + e.what();
    }
  }
  if (int const sig = agree_stop(comm, interrupted))
    throw Interrupted(sig,
                      "stopped by " + signal_name(sig) +
                          (f.observed.empty() ? " while modelling the observed data" : " before the first iteration") +
                          "; nothing was written" +
                          (in.resuming ? "; continue with:\n  " + resume_command(opt.argv, opt.resume, comm.size())
                                       : std::string("")));
  settle(comm, silent);
  comm.broadcast(in.wavelet);
  {
    std::vector<fwi::Stage> stages;
    for (auto const& st : f.stages) stages.push_back({st.iterations, st.max_freq});
    in.stages = fwi::Stages(std::move(stages), in.wavelet, cfg.time.dt);
  }
  // A stage's low-pass spreads the wavelet before t = 0, where no source acts: the filtered data
  // keep what the filtered wavelet loses.
  if (comm.is_root())
    for (std::size_t k = 0; k < f.stages.size(); ++k) {
      double const outside = in.stages.outside(static_cast<int>(k));
      if (outside > 0.01)
        std::fprintf(stderr,
                     "ksweep: warning: stage %zu's wavelet (low-passed below %g Hz) has %.1f %% of its energy before "
                     "t = 0 or past the record, which the modelling cannot inject while the data low-passed alike "
                     "keep it; a source that starts at least 1 / max_freq = %g s after t = 0 avoids this (or "
                     "raise the stage's max_freq)\n",
                     k + 1, f.stages[k].max_freq, 100 * outside, 1 / f.stages[k].max_freq);
    }

  // First writes (the result folders are made when their first file is written).
  if (comm.is_root()) {
    folder->claim();
    if (!in.in_place || !fs::exists(out / "observed.h5")) io::write_records(out / "observed.h5", in.obs);
    // A run resumed in place computes the same wavelet: the file stays as it is.
    if (!in.in_place || !fs::exists(out / "wavelet.h5")) write_wavelet_file(out / "wavelet.h5", cfg, in);
  }
  comm.broadcast(in.obs.data);

  auto const options = inversion_options(cfg, model_grid(in.truth), in.water);
  fwi::Workflow flow(inversion_problem(cfg, in), options, in.stages, comm);
  auto& inv = flow.inversion();
  if (in.resuming) {
    auto const n = static_cast<std::ptrdiff_t>(in.ck.model.size() / static_cast<std::size_t>(in.ck.parameters));
    std::vector<float> vp(in.ck.model.begin(), in.ck.model.begin() + n),
        rho(in.ck.model.begin() + n, in.ck.model.end());
    fwi::State s{in.ck.iteration, in.ck.rng, std::move(vp), std::move(rho), in.ck.m, in.ck.v, -1, {}};
    if (in.ck.lbfgs.pairs >= 0) copy_lbfgs(in.ck.lbfgs, s.lbfgs);
    flow.restore(std::move(s));  // Adam counts its steps from the start of the stage
  }
  auto const& truth = in.truth;
  if (comm.is_root() && !in.in_place) {
    write_models(out / "true_model.h5", truth, truth.vp, in.rho_true);
    write_models(out / "initial_model.h5", truth, in.v0, in.rho0);
  }
  Outputs o{cfg, out, in, {}, in.resuming ? in.ck.history : nlohmann::json::array(), {}, 0, 0};
  if (in.resuming) {  // where the last good checkpoint is, for the messages of a stopped run
    o.last_checkpoint = fs::path(opt.resume) / "checkpoint.bin";
    o.last_checkpoint_iteration = in.ck.iteration;
  }
  auto where_to_continue = [&]() -> std::string {
    if (o.last_checkpoint.empty())
      return "no checkpoint was written yet (fwi.checkpoint_every = " + std::to_string(f.checkpoint_every) +
             "): start again with --overwrite";
    return "the last checkpoint is " + o.last_checkpoint.string() + " (iteration " +
           std::to_string(o.last_checkpoint_iteration) + "); continue with:\n  " +
           resume_command(opt.argv, o.last_checkpoint.parent_path(), comm.size());
  };
  double const rmse0 = inv.rmse(in.v0);
  double const rmse0_rho = variable_density(cfg) ? inv.rmse_density(in.rho0) : 0.0;
  o.summary["config"] = io::config_to_json(cfg);
  o.summary["model"] = {
      {"nz", truth.nz},        {"nx", truth.nx}, {"ny", truth.ny}, {"dh", truth.dh}, {"description", truth.description},
      {"water_rows", in.water}};
  o.summary["wavelet"] = {{"source", cfg.wavelet.source},
                          {"dt", cfg.time.dt},
                          {"freq", cfg.wavelet.freq},
                          {"delay", cfg.wavelet.delay},
                          {"samples", in.wavelet}};
  if (cfg.wavelet.source == "estimate")
    o.summary["wavelet"]["estimate"] = {{"stabilisation", cfg.wavelet.stabilisation},
                                        {"residual", in.estimate.residual},
                                        {"residual_reference", in.estimate.residual_reference}};
  o.summary["ranks"] = comm.size();
  o.summary["devices"] = nlohmann::json::array();
  for (auto const& d : rank_devices(comm))
    o.summary["devices"].push_back({{"rank", d.rank},
                                    {"host", d.host},
                                    {"local_rank", d.local_rank},
                                    {"device_id", d.device_id},
                                    {"device", d.device}});
  o.summary["mpi"] = {{"gpu_aware", comm::gpu_aware_mpi()}, {"device_data", comm::gpu_aware_mpi_reason()}};
  o.summary["backend"] = core::default_backend();
  o.summary["threads"] = core::default_concurrency();
  o.summary["initial"] = {{"rmse", rmse0}};
  if (variable_density(cfg)) o.summary["initial"]["rmse_rho"] = rmse0_rho;
  o.summary["build"] = core::describe_build(false);
  int const start = inv.iteration();
  if (comm.is_root()) {
    std::printf(
        "ksweep fwi: %s cells at %g m, %d shots, batch %d over %d rank(s), %d iterations, %s %s %s storage, "
        "backend %s (%d threads)\n",
        truth.shape().c_str(), truth.dh, in.survey.n_shots,
        options.method == fwi::Method::lbfgs ? in.survey.n_shots : f.batch, comm.size(), f.iterations,
        cfg.storage.strategy.c_str(), cfg.storage.location.c_str(), cfg.storage.dtype.c_str(),
        core::default_backend().c_str(), core::default_concurrency());
    if (in.resuming) std::printf("resuming after iteration %d from %s\n", start, opt.resume.c_str());
    std::printf("initial model RMSE %.2f m/s, water rows kept: %d\n", rmse0, in.water);
    if (variable_density(cfg)) {
      std::string inverted;
      for (auto const& p : f.invert) inverted += (inverted.empty() ? "" : ", ") + p;
      std::printf("variable density (%s): initial density RMSE %.2f kg/m^3, inverting %s\n",
                  cfg.model.density.empty() ? "gardner" : cfg.model.density.c_str(), rmse0_rho, inverted.c_str());
    }
    std::fflush(stdout);
  }

  while (inv.iteration() < f.iterations) {
    int const it = inv.iteration();
    auto const stage = flow.stage();  // frequency continuation: the workflow switches the data
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
    fwi::Report r;
    try {
      r = flow.step();
    } catch (fwi::IterationError const& e) {
      throw CollectiveError(std::string(e.what()) + ". Nothing of this iteration was written; " + where_to_continue());
    } catch (Error const& e) {
      throw Error(std::string(e.what()) + "; " + where_to_continue());
    }
    o.seconds_total += r.seconds;
    nlohmann::json entry = {
        {"iteration", r.iteration}, {"loss", r.loss}, {"rmse", r.rmse}, {"seconds", r.seconds}, {"shots", r.shots}};
    if (options.method == fwi::Method::lbfgs) {
      entry["evaluations"] = r.evaluations;
      entry["loss_start"] = r.loss_start;  // the loss of the model before the step (`loss`: after it)
    }
    if (stage.index >= 0) entry["stage"] = stage.index + 1;
    if (variable_density(cfg)) entry["rmse_rho"] = r.rmse_density;
    o.history.push_back(entry);

    // Outputs (rank 0), checkpoint. A failure there (a full disk) is shared with every rank
    // below, so that all ranks stop together and unwind (removing their scratch folders).
    core::ScopedRegion output_region("ksweep::fwi::output");
    std::string write_error;
    if (comm.is_root()) try {
        o.write(inv, r, start);
      } catch (std::exception const& e) {
        write_error = e.what();
      }
    if (comm.allreduce_sum(write_error.empty() ? 0.0 : 1.0) > 0)
      throw CollectiveError((write_error.empty() ? std::string("writing the outputs failed on rank 0") : write_error) +
                            "; " + where_to_continue());
  }
  std::string write_error;
  if (comm.is_root()) try {
      core::ScopedRegion region("ksweep::fwi::output");
      write_models(out / "model_final.h5", truth, inv.model(), inv.density());
    } catch (std::exception const& e) {
      write_error = e.what();
    }
  // The final model's data: modelled on rank 0, or on every rank when the model is split.
  std::optional<io::RecordsFile> syn;
  if (comm.is_root() || split) try {
      syn = final_synthetic(cfg, in, inv, split ? &comm : nullptr, comm.is_root());
    } catch (std::exception const& e) {
      if (write_error.empty()) write_error = e.what();
    }
  if (comm.is_root() && write_error.empty()) try {
      core::ScopedRegion region("ksweep::fwi::output");
      write_synthetic(cfg, *syn, out);
      o.summary["seconds_total"] = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_start).count();
      o.summary["iterations"] = o.history;
      io::write_json_atomic(out / "summary.json", o.summary);
      std::printf("%s\n", inv.memory().to_string().c_str());
      std::printf("wrote %s and %s\n", io::shown_path(out / "model_final.h5").c_str(),
                  io::shown_path(out / "summary.json").c_str());
    } catch (std::exception const& e) {
      write_error = e.what();
    }
  if (comm.allreduce_sum(write_error.empty() ? 0.0 : 1.0) > 0)
    throw CollectiveError((write_error.empty() ? std::string("writing the outputs failed on rank 0") : write_error) +
                          "; " + where_to_continue());
  folder->finish();  // every result is written: the results it replaced (--overwrite) go
  if (comm.is_root() && f.figures_every > 0) {
    make_directory(out / "figures");
    if (!run_figure_script("plot_fwi.py", {out.string()})) remove_if_empty(out / "figures");
  }
  return 0;
}

}  // namespace

int run_fwi(io::Config const& cfg, RunOptions const& opt, comm::Communicator const& comm) {
  collectively(comm, [&] {
    KSWEEP_REQUIRE(cfg.propagator.precision == "fp32",
                   "propagator.precision = \"" << cfg.propagator.precision << "\": ksweep fwi computes in fp32 only");
  });
  auto const shape = on_every_rank(comm, [&] { return io::model_shape(cfg.model); });  // no values read yet
  collectively(comm, [&] { io::check_dimension_keys(cfg, shape.dim() == 3); });
  return fwi(cfg, opt, comm, shape);
}

}  // namespace ksweep::app
