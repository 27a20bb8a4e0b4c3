// ksweep fwi: MPI shot-parallel full-waveform inversion with Adam, checkpoints and figures.
//
// Every iteration: rank 0 draws the batch of shots (seeded, no repeats) and broadcasts it; each
// rank computes the gradient of its contiguous slice with the loss normalised by the global
// batch; gradients and losses are summed over ranks; every rank takes the same Adam step, so
// all ranks hold the same model. Outputs are written by rank 0 only, each file atomically.

#include "common.hpp"
#include "guard.hpp"
#include "memory_estimate.hpp"

#include <ksweep/core/batches.hpp>
#include <ksweep/core/optimizer.hpp>
#include <ksweep/core/profiling.hpp>
#include <ksweep/core/propagator.hpp>
#include <ksweep/core/runtime.hpp>
#include <ksweep/io/atomic_file.hpp>
#include <ksweep/io/checkpoint.hpp>
#include <ksweep/io/hdf5_io.hpp>
#include <ksweep/io/json_io.hpp>
#include <ksweep/core/gradient.hpp>

#include <Kokkos_Core.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <optional>
#include <sstream>
#include <tuple>
#include <utility>

#include <unistd.h>

namespace ksweep::app {

io::RecordsFile model_observed(io::Config const& cfg, io::VelocityModel const& vm, core::Survey const& survey,
                               bool verbose);

namespace {

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

/// Separable Gaussian smoothing (sigma in cells, edges clamped) of a [nz][ny][nx] field (ny = 1
/// in 2D): along x, then y, then z. With `doing`, SIGINT / SIGTERM stop it (Interrupted) between
/// planes; without, the signal waits for the caller's next safe point.
std::vector<double> gaussian_smooth(std::vector<double> const& f, int nz, int ny, int nx, double sigma,
                                    char const* doing) {
  if (sigma <= 0) return f;
  int const r = static_cast<int>(std::ceil(3 * sigma));
  std::vector<double> k(2 * r + 1);
  double sum = 0;
  for (int i = -r; i <= r; ++i) sum += k[i + r] = std::exp(-0.5 * i * i / (sigma * sigma));
  for (auto& x : k) x /= sum;
  // One pass along an axis of n cells with stride `stride`, over every line of that axis.
  auto pass = [&](std::vector<double> const& in, int n, std::size_t stride) {
    std::vector<double> out(in.size());
    std::size_t const block = stride * n;  // cells of one step along the axis above it
    for (std::size_t base = 0; base < in.size(); base += block) {
      if (doing != nullptr) throw_if_stopped(doing);  // a wide kernel on a large model takes a while
      for (std::size_t j = 0; j < stride; ++j)
        for (int i = 0; i < n; ++i) {
          double s = 0;
          for (int d = -r; d <= r; ++d) s += k[d + r] * in[base + j + std::clamp(i + d, 0, n - 1) * stride];
          out[base + j + i * stride] = s;
        }
    }
    return out;
  };
  auto out = pass(f, nx, 1);
  if (ny > 1) out = pass(out, ny, static_cast<std::size_t>(nx));
  return pass(out, nz, static_cast<std::size_t>(ny) * nx);
}

/// Starting model: Gaussian-smoothed slowness of the true model, water rows kept.
std::vector<float> starting_model(io::VelocityModel const& vm, double sigma, int water_rows) {
  std::vector<double> slow(vm.vp.size());
  for (std::size_t i = 0; i < slow.size(); ++i) slow[i] = 1.0 / vm.vp[i];
  int const ny = vm.ny > 0 ? vm.ny : 1;
  auto const sm = gaussian_smooth(slow, vm.nz, ny, vm.nx, sigma, "computing the starting model");
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

/// Stability of the inversion, before anything runs: the true and starting models must be
/// stable with time.dt, and so must every velocity the inversion may reach (up to fwi.vmax).
void check_stability(io::Config const& cfg, io::VelocityModel const& truth, std::vector<float> const& v0, int order) {
  double const vtrue = *std::max_element(truth.vp.begin(), truth.vp.end());
  core::check_cfl(vtrue, cfg.time.dt, truth.dh, order, truth.dim());
  core::check_cfl(*std::max_element(v0.begin(), v0.end()), cfg.time.dt, truth.dh, order, truth.dim());
  double const limit = core::courant_limit(order, truth.dim());
  double const vstable = stable_velocity(cfg, truth.dh, order, truth.dim());
  double const vmax = cfg.fwi.vmax;
  KSWEEP_REQUIRE(vmax <= 0 || vmax <= vstable,
                 "fwi.vmax = " << vmax << " m/s lets the inversion reach velocities that time.dt = " << cfg.time.dt
                               << " s cannot propagate stably: the CFL limit " << limit << " of order " << order
                               << " at dh = " << truth.dh << " m allows at most " << vstable
                               << " m/s; lower fwi.vmax to at most " << vstable << " m/s or time.dt to at most "
                               << limit * truth.dh / vmax << " s");
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

/// The smoothing lengths (cells) against the model: a Gaussian wider than the model's largest
/// extent is a constant, and its cost grows with its width.
void check_smoothing(io::Config const& cfg, io::VelocityModel const& shape) {
  int const extent = std::max({shape.nz, shape.nx, shape.ny});
  for (auto const& [key, sigma] : {std::pair<char const*, double>{"fwi.smooth_sigma", cfg.fwi.smooth_sigma},
                                   std::pair<char const*, double>{"fwi.grad_smooth", cfg.fwi.grad_smooth}})
    KSWEEP_REQUIRE(sigma <= extent, key << " = " << sigma << " cells is wider than the model's largest extent, "
                                        << extent << " cells (" << shape.shape()
                                        << "): a Gaussian that wide smooths to a constant; use at most " << extent);
}

/// Test hook: KSWEEP_FAULT_NAN = "loss:IT", "gradient:IT" or "model:IT" makes that quantity
/// non-finite at iteration IT (1-based), as an overflow would.
bool inject_nan(char const* what, int iteration) {
  char const* e = std::getenv("KSWEEP_FAULT_NAN");
  if (e == nullptr) return false;
  std::string const s = e;
  auto const colon = s.find(':');
  return colon != std::string::npos && s.substr(0, colon) == what && std::atoi(s.c_str() + colon + 1) == iteration;
}

template <class ExecSpace, class View>
std::size_t count_non_finite(ExecSpace const& space, View const& x) {
  std::size_t bad = 0;
  ksweep::launch_reduce(
      "ksweep::fwi::count_non_finite", Kokkos::RangePolicy<ExecSpace>(space, 0, x.extent(0)),
      KOKKOS_LAMBDA(std::size_t i, std::size_t & b) {
        double const v = static_cast<double>(x(i));
        b += (v == v && v - v == 0) ? 0 : 1;  // NaN fails the first test, infinity the second
      },
      Kokkos::Sum<std::size_t>(bad));
  return bad;
}

/// A host copy of the device view `v` (copied on `space`, which is fenced).
template <class ExecSpace, class View>
auto to_host(ExecSpace const& space, View const& v) {
  auto h = Kokkos::create_mirror_view(Kokkos::HostSpace(), v);
  Kokkos::deep_copy(space, h, v);
  space.fence();
  return h;
}

/// The device view `v` as floats (models, moments and images are written as float32).
template <class ExecSpace, class View>
std::vector<float> to_host_floats(ExecSpace const& space, View const& v) {
  auto const h = to_host(space, v);
  std::vector<float> out(h.span());
  for (std::size_t i = 0; i < out.size(); ++i) out[i] = static_cast<float>(h.data()[i]);
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
  for (auto const& [key, file, now] :
       {std::tuple<char const*, double, double>{"wavelet.freq", r.freq, cfg.wavelet.freq},
        std::tuple<char const*, double, double>{"wavelet.delay", r.delay, cfg.wavelet.delay}})
    KSWEEP_REQUIRE(std::abs(file - now) <= 1e-9 * std::max(std::abs(now), 1e-300),
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
  auto at = [&](core::Cell const& c) {
    return "(z, " + std::string(vm.ny > 0 ? "y, " : "") + "x) = (" + std::to_string(c.z) + ", " +
           (vm.ny > 0 ? std::to_string(c.y) + ", " : std::string()) + std::to_string(c.x) + ")";
  };
  bool const three = vm.ny > 0;
  for (int i = 0; i < s.n_shots; ++i)
    KSWEEP_REQUIRE(
        static_cast<int>(r.src_z.size()) == s.n_shots && r.src_z[i] == s.sources[i].z && r.src_x[i] == s.sources[i].x &&
            (!three || r.src_y[i] == s.sources[i].y),
        "observed data " << path << ": source " << i << " is not at the configured position " << at(s.sources[i]));
  for (int i = 0; i < s.n_receivers; ++i)
    KSWEEP_REQUIRE(
        static_cast<int>(r.rec_z.size()) == s.n_receivers && r.rec_z[i] == s.receivers[i].z &&
            r.rec_x[i] == s.receivers[i].x && (!three || r.rec_y[i] == s.receivers[i].y),
        "observed data " << path << ": receiver " << i << " is not at the configured position " << at(s.receivers[i]));
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
    if (c.key == "data.model_sha256")
      os << "\n  the model's values (model.source after decimation and cropping) differ from those the "
            "checkpoint was made with (SHA-256 "
         << c.before << " then, " << c.after << " now)";
    else if (c.key == "data.observed_sha256")
      os << "\n  the observed data (fwi.observed) differ from those the checkpoint was made with";
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
  if (fs::is_regular_file(cfg.model.source, ec)) in.push_back({"model.source", cfg.model.source});
  if (!cfg.fwi.observed.empty()) in.push_back({"fwi.observed", cfg.fwi.observed});
  if (!opt.resume.empty()) in.push_back({"--resume", fs::path(opt.resume) / "checkpoint.bin"});
  return in;
}

template <class Real, int Order, int Dim>
int fwi(io::Config const& cfg, RunOptions const& opt, comm::Communicator const& comm, io::VelocityModel const& shape) {
  using ExecSpace = Kokkos::DefaultExecutionSpace;
  using P = core::Propagator<Real, Order, ExecSpace, Dim>;
  using E = core::GradientEngine<Real, Order, ExecSpace, Dim>;
  using vec = Kokkos::View<Real*, ExecSpace::memory_space>;
  using Kokkos::view_alloc;
  using Kokkos::WithoutInitializing;
  ExecSpace const space;  // every launch and copy of the run is on this instance
  auto const& f = cfg.fwi;
  auto const t_start = Clock::now();
  fs::path const out = opt.out;
  std::string const& resume = opt.resume;

  // Every check that can fail runs before the first byte is written, the cheap ones first: the
  // sizes (from the model's shape, read without its values), the memory estimate, the
  // checkpoint's header and the output folder come before the model is read or anything
  // model-sized is computed. A 3D model is handled as nz ny rows of nx cells wherever only its
  // size matters.
  int const nz = shape.nz, nx = shape.nx, ny = shape.ny, rows = shape.rows();
  std::size_t const n = static_cast<std::size_t>(rows) * nx, plane = static_cast<std::size_t>(rows / nz) * nx;
  auto const survey = make_survey(cfg, nz, nx, ny);
  KSWEEP_REQUIRE(f.batch <= survey.n_shots,
                 "fwi.batch = " << f.batch << " exceeds the number of shots shots.count = " << survey.n_shots);
  core::check_time(cfg.time.dt, cfg.time.nt);
  KSWEEP_REQUIRE(f.water_rows < nz, "fwi.water_rows = " << f.water_rows << " must be < nz = " << nz);
  core::ModelGrid const grid{nz, nx, shape.dh, ny};
  core::check_grid(grid, make_pml(cfg), Order);
  core::check_survey(survey, grid, make_pml(cfg));
  check_smoothing(cfg, shape);
  auto const scfg =
      storage::make_storage_config(cfg.storage.strategy, cfg.storage.location, cfg.storage.dtype,
                                   cfg.storage.transfer_interval, cfg.storage.disk_dir, cfg.storage.pinned);
  int const nt = cfg.time.nt, nr = survey.n_receivers;
  int const shots_per_rank = (f.batch + comm.size() - 1) / comm.size();

  // Memory: estimated from the layout before anything large is allocated.
  {
    std::vector<MemoryEstimate> phases{estimate_fwi(cfg, shape, survey.n_shots, nr, shots_per_rank)};
    if (f.observed.empty())
      phases.insert(phases.begin(), estimate_model(cfg, shape, survey.n_shots, nr, false, cfg.propagator.batch));
    auto const mm = machine_memory(cfg);
    if (opt.dry_run && comm.is_root()) std::printf("%s", memory_table(phases, mm, comm.local_size()).c_str());
    check_memory(phases, mm, comm.local_size());
  }

  // Resume: the checkpoint's header (its size against this model's) before it is read whole.
  bool const resuming = !resume.empty();
  bool in_place = false;
  fs::path const ck_path = resuming ? fs::path(resume) / "checkpoint.bin" : fs::path();
  if (resuming) {
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
    in_place = fs::equivalent(fs::path(resume), out, ec);
    KSWEEP_REQUIRE(!(in_place && opt.overwrite),
                   "--overwrite with --resume "
                       << shown(resume) << " into the same folder would remove the results "
                       << "being continued; leave out --overwrite to continue the run in place");
  }
  // The output folder: the checks that write nothing.
  auto const inputs = run_inputs(cfg, opt);
  collectively(comm, [&] {  // rank 0 owns the folder; every rank stops with its error
    if (comm.is_root()) check_output_folder(out, opt.overwrite, in_place, inputs);
  });

  // Observed data from a file: everything but the samples (shape, geometry, acquisition), read
  // by rank 0 before any model-sized work.
  std::string const observed_key = "fwi.observed = " + io::shown_path(f.observed) + ": ";
  collectively(
      comm,
      [&] {
        if (comm.is_root() && !f.observed.empty())
          check_observed(io::read_records(f.observed, false), cfg, survey, shape, io::shown_path(f.observed));
      },
      observed_key);
  KSWEEP_REQUIRE(f.smooth_sigma > 0 || !f.observed.empty(),
                 "fwi.smooth_sigma = 0 makes the starting model the true model, from which the observed data are "
                 "modelled: the inversion would start at its answer (a loss of 0); set fwi.smooth_sigma > 0, or give "
                 "observed data (fwi.observed) to invert from model.source");

  // The model and the starting model (SIGINT / SIGTERM answered throughout); a rank that cannot
  // read the model stops every rank.
  io::VelocityModel const truth = on_every_rank(comm, [&] { return io::load_velocity(cfg.model); });
  throw_if_stopped("reading the model");
  core::check_velocity(truth.vp.data(), static_cast<long long>(n));
  int const water = f.water_rows >= 0 ? f.water_rows : detect_water_rows(truth);
  auto const v0 = starting_model(truth, f.smooth_sigma, water);
  check_stability(cfg, truth, v0, Order);
  check_bounds(cfg, v0, static_cast<std::size_t>(water) * plane, velocity_bound(cfg, truth.dh, Order, Dim),
               "the starting model");
  if (comm.is_root()) warn_acquisition(cfg, truth, survey, comm);

  // The run's identity, recorded in every checkpoint and checked on --resume; every rank must
  // hold the same one (the same configuration and model).
  nlohmann::json run = {{"config", io::config_to_json(cfg)},
                        {"data", {{"model_sha256", io::sha256_hex(truth.vp.data(), n * sizeof(float))}}}};
  agree_on(comm, "the configuration or the model (the run's identity)", run.dump());

  // Observed data from a file: read and checked (shape, geometry, acquisition, finite samples,
  // a signal) by rank 0; its error, if any, stops every rank.
  io::RecordsFile obs;
  collectively(
      comm,
      [&] {
        if (!comm.is_root() || f.observed.empty()) return;
        obs = io::read_records(f.observed);
        check_observed(obs, cfg, survey, shape, io::shown_path(f.observed));
        if (auto const silent = silent_data(obs.data, "the observed data", cfg); !silent.empty()) throw Error(silent);
      },
      observed_key);
  if (comm.is_root() && !f.observed.empty())
    run["data"]["observed_sha256"] = io::sha256_hex(obs.data.data(), obs.data.size() * sizeof(float));

  // Resume state (read by every rank: the same file), trusted only once checked.
  io::Checkpoint ck;
  if (resuming) {
    ck = io::read_checkpoint(ck_path, n);
    auto saved = ck.run;
    if (!comm.is_root() && saved.contains("data")) saved["data"].erase("observed_sha256");  // only rank 0 read the data
    require_same_run(saved, run, ck_path);
    KSWEEP_REQUIRE(f.iterations > ck.iteration,
                   "--resume: fwi.iterations = "
                       << f.iterations
                       << (f.iterations == ck.iteration ? " iterations are all done" : " is smaller than the ")
                       << (f.iterations == ck.iteration ? std::string(" (") : std::to_string(ck.iteration))
                       << (f.iterations == ck.iteration ? "" : " iterations already done in ")
                       << io::shown_path(ck_path) << (f.iterations == ck.iteration ? ")" : "")
                       << ": nothing is left to run; set fwi.iterations above " << ck.iteration << " to continue");
    check_bounds(cfg, ck.model, static_cast<std::size_t>(water) * plane, velocity_bound(cfg, truth.dh, Order, Dim),
                 "--resume: the checkpoint " + io::shown_path(ck_path) + "'s model");
    {
      double const vck = *std::max_element(ck.model.begin(), ck.model.end());
      double const vstable = stable_velocity(cfg, truth.dh, Order, Dim);
      KSWEEP_REQUIRE(vck <= vstable, "--resume: the checkpoint "
                                         << io::shown_path(ck_path) << " holds velocities up to " << vck
                                         << " m/s, above the " << vstable
                                         << " m/s that time.dt allows: its contents are out of range");
    }
  }

  // --dry-run: every check above passed (the output folder's on rank 0); nothing is created.
  if (opt.dry_run) {
    if (comm.is_root()) std::printf("ksweep fwi --dry-run: the inputs are valid; nothing was written\n");
    return 0;
  }

  // The output folder: locked against other runs, checked again under the lock, created if
  // needed; nothing written into it yet.
  std::optional<OutputFolder> folder;
  collectively(comm, [&] { folder.emplace(out, opt.overwrite, in_place, comm.is_root(), inputs); });

  // Observed data modelled once by rank 0 (SIGINT/SIGTERM honoured between shot batches).
  bool interrupted = false;
  std::string silent;
  if (comm.is_root() && f.observed.empty()) {
    std::printf("modelling observed data (%d shots)\n", survey.n_shots);
    std::fflush(stdout);
    try {
      obs = model_observed(cfg, truth, survey, false);
      silent = silent_data(obs.data, "the observed data modelled on the true model", cfg);
    } catch (Interrupted const&) {
      interrupted = true;
    }
  }
  if (int const sig = agree_stop(comm, interrupted))
    throw Interrupted(
        sig, "stopped by " + signal_name(sig) +
                 (f.observed.empty() ? " while modelling the observed data" : " before the first iteration") +
                 "; nothing was written" +
                 (resuming ? "; continue with:\n  " + resume_command(opt.argv, resume, comm.size()) : std::string("")));
  settle(comm, silent);

  // First writes (the result folders are made when their first file is written).
  if (comm.is_root()) {
    folder->claim();
    if (!in_place || !fs::exists(out / "observed.h5")) io::write_records(out / "observed.h5", obs);
  }
  comm.broadcast(obs.data);

  // Models on the device; Adam (the water rows fixed; moments from the checkpoint on --resume).
  auto upload = [&](std::vector<float> const& h, char const* label) {
    vec d(view_alloc(space, WithoutInitializing, std::string(label)), h.size());
    auto mh = Kokkos::create_mirror_view(Kokkos::HostSpace(), d);
    for (std::size_t i = 0; i < h.size(); ++i) mh(i) = static_cast<Real>(h[i]);
    Kokkos::deep_copy(space, d, mh);
    space.fence();  // before the mirror goes
    return d;
  };
  vec const model = upload(resuming ? ck.model : v0, "ksweep::fwi::model");
  vec const vtrue = upload(truth.vp, "ksweep::fwi::true");
  vec const grad(view_alloc(space, WithoutInitializing, std::string("ksweep::fwi::grad")),
                 n);  // written in full each iteration
  core::AdamParameters adam_p;
  adam_p.lr = f.lr;
  adam_p.beta1 = f.beta1;
  adam_p.beta2 = f.beta2;
  adam_p.eps = f.eps;
  adam_p.vmin = f.vmin;
  adam_p.vmax = velocity_bound(cfg, truth.dh, Order, Dim);  // velocities stay physical and stable
  core::Adam<Real, ExecSpace> adam(space, n, adam_p, static_cast<std::size_t>(water) * plane);
  if (resuming)
    adam.restore(space, ck.iteration, upload(ck.m, "ksweep::fwi::adam_m"), upload(ck.v, "ksweep::fwi::adam_v"));
  if (comm.is_root() && !in_place) {
    io::write_model(out / "true_model.h5", truth.vp, nz, nx, truth.dh, "vp", ny);
    io::write_model(out / "initial_model.h5", v0, nz, nx, truth.dh, "vp", ny);
  }
  // Where the last good checkpoint is, for the messages of a stopped run.
  fs::path last_checkpoint = resuming ? fs::path(resume) / "checkpoint.bin" : fs::path();
  int last_checkpoint_iteration = resuming ? ck.iteration : 0;
  auto where_to_continue = [&]() -> std::string {
    if (last_checkpoint.empty())
      return "no checkpoint was written yet (fwi.checkpoint_every = " + std::to_string(f.checkpoint_every) +
             "): start again with --overwrite";
    return "the last checkpoint is " + last_checkpoint.string() + " (iteration " +
           std::to_string(last_checkpoint_iteration) + "); continue with:\n  " +
           resume_command(opt.argv, last_checkpoint.parent_path(), comm.size());
  };

  int const cap = (f.batch + comm.size() - 1) / comm.size();
  P prop(space, grid, make_pml(cfg), cfg.time.dt, cap);
  prop.set_schedule(core::parse_schedule(cfg.propagator.schedule));
  E engine(prop, scfg);
  typename E::images_type img(space, rows, nx);
  auto const wavelet = make_wavelet(cfg);
  typename P::wavelet_view w(view_alloc(space, WithoutInitializing, std::string("ksweep::fwi::wavelets")), cap, 1, nt);
  {
    auto wh = Kokkos::create_mirror_view(Kokkos::HostSpace(), w);
    for (int s = 0; s < cap; ++s)
      for (int t = 0; t < nt; ++t) wh(s, 0, t) = static_cast<Real>(wavelet[t]);
    Kokkos::deep_copy(space, w, wh);
    space.fence();
  }
  double const scale = f.loss_norm == "sum" ? 1.0 : 1.0 / (static_cast<double>(f.batch) * nt * nr);

  std::mt19937_64 rng(static_cast<std::uint64_t>(f.seed));
  if (resuming) {
    std::istringstream is(ck.rng);
    is >> rng;
  }
  nlohmann::json history = resuming ? ck.history : nlohmann::json::array();
  // RMSE against the true model, summed in a fixed order (rows in parallel, each row in order,
  // then the rows in order), so that it does not depend on the number of threads.
  // The difference x - vtrue is formed in Real, as KokkosBlas::update(1, x, -1, vtrue, 0, diff)
  // formed it (Kokkos Kernels 3.4 has no execution-space overload of update).
  Kokkos::View<double*, ExecSpace::memory_space> row_sums(
      view_alloc(space, WithoutInitializing, std::string("ksweep::fwi::row_sums")), rows);
  auto rmse_of = [&](vec const& x) {
    auto vt = vtrue;
    auto rs = row_sums;
    int const ncols = nx;
    ksweep::launch_for(
        "ksweep::fwi::rmse_rows", Kokkos::RangePolicy<ExecSpace>(space, 0, rows), KOKKOS_LAMBDA(int iz) {
          double acc = 0;
          for (int ix = 0; ix < ncols; ++ix) {
            std::size_t const i = static_cast<std::size_t>(iz) * ncols + ix;
            Real const d = x(i) - vt(i);
            double const e = static_cast<double>(d);
            acc += e * e;
          }
          rs(iz) = acc;
        });
    auto h = to_host(space, row_sums);
    double sum = 0;
    for (int iz = 0; iz < rows; ++iz) sum += h(iz);
    return std::sqrt(sum / static_cast<double>(n));
  };
  double const rmse0 = rmse_of(upload(v0, "ksweep::fwi::start"));

  nlohmann::json summary;
  summary["config"] = io::config_to_json(cfg);
  summary["model"] = {
      {"nz", nz}, {"nx", nx}, {"ny", ny}, {"dh", truth.dh}, {"description", truth.description}, {"water_rows", water}};
  summary["wavelet"] = {
      {"dt", cfg.time.dt}, {"freq", cfg.wavelet.freq}, {"delay", cfg.wavelet.delay}, {"samples", wavelet}};
  summary["ranks"] = comm.size();
  summary["backend"] = core::default_backend();
  summary["threads"] = core::default_concurrency();
  summary["initial"] = {{"rmse", rmse0}};
  summary["build"] = core::describe_build(false);

  int const start = resuming ? ck.iteration : 0;
  if (comm.is_root()) {
    std::printf(
        "ksweep fwi: %s cells at %g m, %d shots, batch %d over %d rank(s), %d iterations, %s %s %s storage, "
        "backend %s (%d threads)\n",
        truth.shape().c_str(), truth.dh, survey.n_shots, f.batch, comm.size(), f.iterations,
        storage::to_string(scfg.strategy).c_str(), storage::to_string(scfg.location).c_str(),
        storage::to_string(scfg.dtype).c_str(), core::default_backend().c_str(), core::default_concurrency());
    if (resuming) std::printf("resuming after iteration %d from %s\n", start, resume.c_str());
    std::printf("initial model RMSE %.2f m/s, water rows kept: %d\n", rmse0, water);
    std::fflush(stdout);
  }

  // The model as the propagator takes it, [rows][nx] (a view of `model`).
  typename P::velocity_view const model_2d(model.data(), rows, nx);
  double seconds_total = 0;
  core::MemoryReport mem;
  for (int it = start; it < f.iterations; ++it) {
    // SIGINT / SIGTERM: every rank agrees at the iteration boundary, then unwinds (removing the
    // disk scratch folder) and exits with 128 + the signal.
    if (int const sig = agree_stop(comm))
      throw Interrupted(sig, "stopped by " + signal_name(sig) + " after iteration " + std::to_string(it) + " of " +
                                 std::to_string(f.iterations) +
                                 "; the scratch folder and temporary files were removed; " + where_to_continue());
    auto const t0 = Clock::now();
    // 1. Rank 0 draws the batch; everyone receives it. This rank's slice of it, and the current
    // model (on the device, without a copy to the host), go to the propagator.
    std::vector<int> batch;
    auto const slice = comm::slice_of(f.batch, comm.rank(), comm.size());
    std::vector<double> shot_loss(static_cast<std::size_t>(f.batch), 0.0);  // this rank's slots only
    std::vector<int> mine;
    typename P::record_view ob, syn;
    {
      core::ScopedRegion region("ksweep::fwi::model");
      if (comm.is_root()) batch = core::draw_batch(rng, survey.n_shots, f.batch);
      comm.broadcast(batch);
      Kokkos::deep_copy(space, img.grad, 0.0);
      Kokkos::deep_copy(space, img.illum_src, 0.0);
      Kokkos::deep_copy(space, img.illum_rec, 0.0);
      if (slice.count > 0) {
        mine.assign(batch.begin() + slice.first, batch.begin() + slice.first + slice.count);
        prop.set_survey(survey.select(mine));
        try {
          prop.set_velocity(model_2d);
        } catch (Error const& e) {
          throw Error("the model of iteration " + std::to_string(it + 1) + " cannot be propagated: " + e.what() +
                      "; the velocities are kept in [fwi.vmin, fwi.vmax], so this is a fault of the run, not of the "
                      "inputs; " +
                      where_to_continue());
        }
        ob = typename P::record_view(view_alloc(space, WithoutInitializing, std::string("ksweep::fwi::observed")),
                                     slice.count, nt, nr);  // written in full from the host below
        syn = typename P::record_view(view_alloc(space, WithoutInitializing, std::string("ksweep::fwi::synthetic")),
                                      slice.count, nt, nr);
        Kokkos::deep_copy(space, syn, Real(0));
        auto oh = Kokkos::create_mirror_view(Kokkos::HostSpace(), ob);
        for (int s = 0; s < slice.count; ++s)
          for (int t = 0; t < nt; ++t)
            for (int r = 0; r < nr; ++r)
              oh(s, t, r) = static_cast<Real>(obs.data[(static_cast<std::size_t>(mine[s]) * nt + t) * nr + r]);
        Kokkos::deep_copy(space, ob, oh);
        space.fence();  // before the mirror goes
      }
    }
    // 2. This rank's shots: forward and backward passes (regions of the gradient engine).
    if (slice.count > 0) {
      auto wb = Kokkos::subview(w, Kokkos::make_pair(0, slice.count), Kokkos::ALL, Kokkos::ALL);
      engine.compute(wb, ob, scale, syn);
      for (int s = 0; s < slice.count; ++s)
        shot_loss[static_cast<std::size_t>(slice.first + s)] = engine.shot_losses()[s];
      mem = engine.memory_report(ob.span() * sizeof(Real), syn.span() * sizeof(Real));
    }
    // 3. Sum over ranks, shot by shot in batch order, so that the sums (and hence the model)
    // are the same bits whatever the number of ranks: images along the rank chain, losses
    // gathered (each slot is filled by one rank, so the sum over ranks is exact) and added in
    // order.
    double loss = 0;
    {
      core::ScopedRegion region("ksweep::fwi::reduction");
      comm.sum_in_rank_order(
          space,
          [&] {
            if (slice.count > 0) engine.accumulate(img);
          },
          img.grad, img.illum_src, img.illum_rec);
      comm.allreduce_sum(shot_loss.data(), shot_loss.size());
      for (double x : shot_loss) loss += x;
    }
    // 4. Gradient conditioning: water fixed, optional illumination preconditioning; the Adam
    // step (water rows fixed, velocities kept in [fwi.vmin, fwi.vmax]).
    int const t = it + 1;
    double rmse = 0;
    {
      core::ScopedRegion region("ksweep::fwi::optimizer");
      Kokkos::View<double*, ExecSpace::memory_space, Kokkos::MemoryUnmanaged> g(img.grad.data(), n),
          isrc(img.illum_src.data(), n);
      {
        auto gr = grad;
        ksweep::launch_for(
            "ksweep::fwi::gradient_to_real", Kokkos::RangePolicy<ExecSpace>(space, 0, n),
            KOKKOS_LAMBDA(std::size_t i) { gr(i) = static_cast<Real>(g(i)); });
      }
      // Non-finite numbers stop the run before anything of this iteration is written.
      if (inject_nan("loss", t)) loss = std::nan("");
      if (inject_nan("gradient", t)) Kokkos::deep_copy(space, Kokkos::subview(grad, n / 2), Real(std::nan("")));
      if (!std::isfinite(loss))
        throw CollectiveError(
            "the loss of iteration " + std::to_string(t) + " is " + std::to_string(loss) +
            ": the synthetic data or the residual overflowed; likely causes: observed data of extreme "
            "amplitude (check their scale), or a model that became unstable. Nothing of this iteration "
            "was written; " +
            where_to_continue());
      if (std::size_t const bad = count_non_finite(space, grad))
        throw CollectiveError(
            "the gradient of iteration " + std::to_string(t) + " is non-finite (NaN or infinite) in " +
            std::to_string(bad) + " of " + std::to_string(n) +
            " cells: the adjoint wavefield overflowed; likely causes: observed data of extreme amplitude, "
            "or fwi.loss_norm = \"sum\" on large data. Nothing of this iteration was written; " +
            where_to_continue());
      if (water > 0)
        Kokkos::deep_copy(
            space, Kokkos::subview(grad, Kokkos::make_pair(std::size_t(0), static_cast<std::size_t>(water) * plane)),
            Real(0));
      if (f.grad_smooth > 0) {  // Gaussian smoothing of the gradient (sigma in cells), on the host
        auto gh = to_host(space, grad);
        std::vector<double> gd(gh.data(), gh.data() + n);
        auto const sm = gaussian_smooth(gd, nz, rows / nz, nx, f.grad_smooth, nullptr);
        for (std::size_t i = 0; i < n; ++i) gh(i) = static_cast<Real>(sm[i]);
        Kokkos::deep_copy(space, grad, gh);
        space.fence();  // before the mirror goes
      }
      if (f.precondition) {
        double imax = 0;
        ksweep::launch_reduce(
            "ksweep::fwi::illum_max", Kokkos::RangePolicy<ExecSpace>(space, 0, n),
            KOKKOS_LAMBDA(std::size_t i, double& mx) { mx = isrc(i) > mx ? isrc(i) : mx; }, Kokkos::Max<double>(imax));
        double const damp = 1e-3 * imax;
        auto gr = grad;
        ksweep::launch_for(
            "ksweep::fwi::precondition", Kokkos::RangePolicy<ExecSpace>(space, 0, n),
            KOKKOS_LAMBDA(std::size_t i) { gr(i) = static_cast<Real>(gr(i) / (isrc(i) + damp)); });
      }
      adam.step(space, grad, model);
      // The second moment holds the squared gradient: it overflows first, and alone (a step with
      // an infinite second moment is 0, so the model stays finite).
      if (std::size_t const bad = count_non_finite(space, adam.second_moment()))
        throw CollectiveError(
            "the optimizer's moments overflowed at iteration " + std::to_string(t) + " (" + std::to_string(bad) +
            " non-finite values; the squared gradient exceeds the float range): the gradient's scale is extreme, "
            "likely from observed data of extreme amplitude (check their scale; the loss is " +
            std::to_string(loss) + "). Nothing of this iteration was written; " + where_to_continue());
      if (inject_nan("model", t)) Kokkos::deep_copy(space, Kokkos::subview(model, n / 2), Real(std::nan("")));
      if (std::size_t const bad = count_non_finite(space, model))
        throw CollectiveError("the model after the Adam step of iteration " + std::to_string(t) +
                              " is non-finite (NaN or infinite) in " + std::to_string(bad) + " of " +
                              std::to_string(n) +
                              " cells; likely causes: fwi.eps too small for the gradient's scale, or fwi.lr too large. "
                              "Nothing of this iteration was written; " +
                              where_to_continue());
      rmse = rmse_of(model);
      space.fence();
    }
    double const secs = std::chrono::duration<double>(Clock::now() - t0).count();
    seconds_total += secs;
    history.push_back({{"iteration", t}, {"loss", loss}, {"rmse", rmse}, {"seconds", secs}, {"shots", batch}});

    // 6. Outputs (rank 0), checkpoint. A failure there (a full disk) is shared with every rank
    // below, so that all ranks stop together and unwind (removing their scratch folders).
    core::ScopedRegion output_region("ksweep::fwi::output");
    std::string write_error;
    if (comm.is_root()) try {
        int const done = t - start, left = f.iterations - t;
        std::printf("iter %4d/%d  loss %.6e  rmse %8.2f m/s  %6.2f s/iter  left %s\n", t, f.iterations, loss, rmse,
                    secs, format_seconds(seconds_total / done * left).c_str());
        std::fflush(stdout);
        bool const figures = f.figures_every > 0 && (t % f.figures_every == 0 || t == f.iterations);
        bool const checkpoint = f.checkpoint_every > 0 && (t % f.checkpoint_every == 0 || t == f.iterations);
        std::vector<float> const vf =
            f.save_models || figures || checkpoint ? to_host_floats(space, model) : std::vector<float>();
        char name[64];
        if (f.save_models) {
          std::snprintf(name, sizeof name, "model_%04d.h5", t);
          make_directory(out / "models");
          io::write_model(out / "models" / name, vf, nz, nx, truth.dh, "vp", ny);
        }
        if (figures) {
          // [nz][nx], or [nz][ny][nx] in 3D.
          auto dataset = [&](std::string nm, std::vector<float> data) {
            return ny > 0 ? io::Dataset2D{std::move(nm), nz, ny, std::move(data), nx}
                          : io::Dataset2D{std::move(nm), nz, nx, std::move(data)};
          };
          auto to_ds = [&](std::string nm, auto const& view) {
            return dataset(std::move(nm), to_host_floats(space, view));
          };
          std::snprintf(name, sizeof name, "epoch_%04d.h5", t);
          make_directory(out / "epochs");
          io::write_datasets(out / "epochs" / name,
                             {dataset("vp", vf), to_ds("grad", img.grad), to_ds("illum_src", img.illum_src),
                              to_ds("illum_rec", img.illum_rec)},
                             truth.dh);
        }
        summary["iterations"] = history;
        summary["memory"] = {{"strategy", mem.strategy},
                             {"location", mem.location},
                             {"dtype", mem.dtype},
                             {"boundary_bytes", mem.boundary_bytes},
                             {"staging_bytes", mem.staging_bytes},
                             {"wavefield_bytes", mem.wavefield_bytes},
                             {"seed_bytes", mem.seed_bytes},
                             {"image_bytes", mem.image_bytes},
                             {"observed_bytes", mem.observed_bytes},
                             {"synthetic_bytes", mem.synthetic_bytes},
                             {"peak_device_bytes", mem.peak_device_bytes}};
        io::write_json_atomic(out / "summary.json", summary);
        if (checkpoint) {
          io::Checkpoint c;
          c.run = run;
          c.iteration = t;
          std::ostringstream os;
          os << rng;
          c.rng = os.str();
          c.history = history;
          c.model = vf;
          c.m = to_host_floats(space, adam.first_moment());
          c.v = to_host_floats(space, adam.second_moment());
          io::write_checkpoint(out / "checkpoint.bin", c);
          last_checkpoint = out / "checkpoint.bin";
          last_checkpoint_iteration = t;
        }
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
      io::write_model(out / "model_final.h5", to_host_floats(space, model), nz, nx, truth.dh, "vp", ny);
      summary["seconds_total"] = std::chrono::duration<double>(Clock::now() - t_start).count();
      summary["iterations"] = history;
      io::write_json_atomic(out / "summary.json", summary);
      std::printf("%s\n", mem.to_string().c_str());
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
  KSWEEP_REQUIRE(cfg.propagator.precision == "fp32",
                 "propagator.precision = \"" << cfg.propagator.precision << "\": ksweep fwi computes in fp32 only");
  auto const shape = on_every_rank(comm, [&] { return io::model_shape(cfg.model); });  // no values read yet
  io::check_dimension_keys(cfg, shape.dim() == 3);
  return core::dispatch_order(cfg.propagator.order, [&](auto o) {
    constexpr int order = decltype(o)::value;
    return shape.dim() == 3 ? fwi<float, order, 3>(cfg, opt, comm, shape) : fwi<float, order, 2>(cfg, opt, comm, shape);
  });
}

}  // namespace ksweep::app
