// A run from its configuration (configured.hpp): the grid, layer, survey, wavelet and options.

#include <ksweep/base/error.hpp>
#include <ksweep/core/domain.hpp>
#include <ksweep/core/schedule.hpp>
#include <ksweep/core/sizes.hpp>
#include <ksweep/core/stencil.hpp>
#include <ksweep/core/wavelet.hpp>
#include <ksweep/fwi/configured.hpp>
#include <ksweep/io/segy.hpp>
#include <ksweep/io/survey.hpp>
#include <ksweep/io/wavelet.hpp>
#include <ksweep/storage/step_store.hpp>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <cstdlib>

namespace ksweep::fwi {

core::ModelGrid model_grid(io::VelocityModel const& vm) {
  return vm.ny > 0 ? core::ModelGrid::volume(vm.nz, vm.ny, vm.nx, vm.dh) : core::ModelGrid(vm.nz, vm.nx, vm.dh);
}

core::PmlConfig make_pml(io::Config const& cfg) {
  core::PmlConfig p;
  p.width = cfg.propagator.pml_width;
  p.reflection = cfg.propagator.pml_reflection;
  p.freq = cfg.propagator.pml_freq;
  p.profile_velocity = cfg.propagator.pml_velocity;
  p.free_surface = cfg.propagator.free_surface;
  return p;
}

core::DomainSplit domain_split(io::Config const& cfg, core::ModelGrid const& grid) {
  auto const& d = cfg.parallel.domains;
  core::DomainSplit s;
  if (d.size() == 2) s = {d[0], d[1]};
  if (d.size() == 1) s = {1, d[0]};
  if (s.split())
    s.align = core::cut_alignment(core::Layout(grid, make_pml(cfg), cfg.propagator.order),
                                  cfg.storage.strategy == "full", storage::parse_dtype(cfg.storage.dtype));
  return s;
}

core::Survey make_survey(io::Config const& cfg, int nz, int nx, int ny) {
  auto const sx = io::shot_x_positions(cfg, nx);
  auto const rx = io::receiver_x_positions(cfg, nx);
  KSWEEP_REQUIRE(cfg.shots.z >= 0 && cfg.shots.z < nz,
                 "shots.z = " << cfg.shots.z << " is outside the model's depth range [0, " << nz - 1 << "]");
  KSWEEP_REQUIRE(cfg.receivers.z >= 0 && cfg.receivers.z < nz,
                 "receivers.z = " << cfg.receivers.z << " is outside the model's depth range [0, " << nz - 1 << "]");
  // 3D: lines of shots and of receivers along x at the y positions of the config (y-major order).
  std::vector<int> const sy = ny > 0 ? io::shot_y_positions(cfg, ny) : std::vector<int>{0};
  std::vector<int> const ry = ny > 0 ? io::receiver_y_positions(cfg, ny) : std::vector<int>{0};
  core::Survey s;
  s.n_shots = static_cast<int>(sx.size() * sy.size());
  s.n_sources = 1;
  s.n_receivers = static_cast<int>(rx.size() * ry.size());
  for (int y : sy)
    for (int x : sx) {
      s.sources.push_back({cfg.shots.z, x, y});
      for (int yr : ry)
        for (int r : rx) s.receivers.push_back({cfg.receivers.z, r, yr});
    }
  return s;
}

io::Position model_end(io::VelocityModel const& shape) {
  return {(shape.nz - 1) * shape.dh, (shape.nx - 1) * shape.dh, shape.ny > 0 ? (shape.ny - 1) * shape.dh : 0.0};
}

core::Survey acquisition(io::Config const& cfg, io::VelocityModel const& shape) {
  if (cfg.survey.file.empty()) return make_survey(cfg, shape.nz, shape.nx, shape.ny);
  return survey_of(io::read_survey(cfg.survey.file, shape.dh, shape.ny > 0, model_end(shape)), shape.dh);
}

core::Survey inversion_survey(io::Config const& cfg, io::VelocityModel const& shape) {
  auto const& obs = cfg.fwi.observed;
  if (!cfg.survey.file.empty() || obs.empty() || !io::is_segy_path(obs)) return acquisition(cfg, shape);
  return survey_of(io::read_records_segy(obs, shape.dh, shape.ny, false, model_end(shape)), shape.dh);
}

core::Survey survey_of(io::RecordsFile const& g, double dh) {
  auto cell = [&](double metres) {  // a node within 1e-9 of a cell is that cell (io::node_index)
    long const i = io::node_index(metres, dh);
    return i >= 0 ? static_cast<double>(i) : metres / dh;
  };
  auto point = [&](io::Position const& p) { return core::Point{cell(p.z), cell(p.x), cell(p.y)}; };
  core::Survey s;
  s.n_shots = g.shots;
  s.n_sources = 1;
  s.n_receivers = g.receivers;
  bool full = true;
  for (int sh = 0; sh < g.shots; ++sh) {
    s.source_points.push_back(point(g.src_pos[static_cast<std::size_t>(sh)]));
    for (int i = 0; i < g.receivers; ++i)
      s.receiver_points.push_back(point(g.rec_pos[static_cast<std::size_t>(sh) * g.receivers + i]));
    full = full && g.rec_count[static_cast<std::size_t>(sh)] == g.receivers;
  }
  if (!full) s.receiver_count = g.rec_count;
  return s;
}

void set_geometry(io::RecordsFile& r, core::Survey const& s, double dh) {
  r.shots = s.n_shots;
  r.receivers = s.n_receivers;
  r.src_pos.clear();
  r.rec_pos.clear();
  r.rec_count.clear();
  auto metres = [&](core::Point const& p) { return io::Position{p.z * dh, p.x * dh, p.y * dh}; };
  for (int sh = 0; sh < s.n_shots; ++sh) {
    r.src_pos.push_back(metres(s.source_at(static_cast<std::size_t>(sh) * s.n_sources)));
    int live = 0;
    for (int i = 0; i < s.n_receivers; ++i) live += s.live(sh, i) ? 1 : 0;
    r.rec_count.push_back(live);
    for (int i = 0; i < s.n_receivers; ++i)  // silent slots repeat the shot's first receiver
      r.rec_pos.push_back(
          metres(s.receiver_at(static_cast<std::size_t>(sh) * s.n_receivers + (s.live(sh, i) ? i : 0))));
  }
}

std::vector<double> ricker_wavelet(io::Config const& cfg) {
  return core::ricker(cfg.wavelet.freq, cfg.wavelet.delay, cfg.time.dt, cfg.time.nt);
}

bool wavelet_from_file(io::Config const& cfg) {
  return cfg.wavelet.source != "ricker" && cfg.wavelet.source != "estimate";
}

std::vector<double> make_wavelet(io::Config const& cfg) {
  if (!wavelet_from_file(cfg)) return ricker_wavelet(cfg);
  return io::read_wavelet(cfg.wavelet.source, cfg.time.dt, cfg.time.nt);
}

double stable_velocity(io::Config const& cfg, double dh, int dim) {
  return core::courant_limit(cfg.propagator.order, dim) * dh / cfg.time.dt;
}

double velocity_bound(io::Config const& cfg, double dh, int dim) {
  return cfg.fwi.vmax > 0 ? cfg.fwi.vmax : stable_velocity(cfg, dh, dim);
}

Options inversion_options(io::Config const& cfg, core::ModelGrid const& grid, int water_rows) {
  auto const& f = cfg.fwi;
  Options o;
  o.method = f.optimizer == "lbfgs" ? Method::lbfgs : Method::adam;
  o.batch = f.batch;
  o.seed = static_cast<std::uint64_t>(f.seed);
  o.loss_sum = f.loss_norm == "sum";
  o.water_rows = water_rows;
  o.grad_smooth = f.grad_smooth;
  o.precondition = f.precondition;
  // Per parameter (physics_parameters() order): velocities stay physical and stable.
  o.bounds = {{f.vmin, velocity_bound(cfg, grid.dh, grid.dim()), 0.0}};
  if (has_density(cfg)) o.bounds.push_back({f.rho_min, f.rho_max, f.lr_rho});
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
  o.invert = f.invert;
  if (char const* e = std::getenv("KSWEEP_FAULT_NAN")) o.fault = e;  // test hook (see Options::fault)
  return o;
}

namespace {

/// The sizes of a run of the configuration on the model `vm` (its shape is what counts).
RunShape shape_of(io::Config const& cfg, io::VelocityModel const& vm, int n_shots, int n_receivers) {
  RunShape s;
  s.grid = model_grid(vm);
  s.pml = make_pml(cfg);
  s.order = cfg.propagator.order;
  s.physics = parse_physics(cfg.propagator.physics);
  s.nt = cfg.time.nt;
  s.n_shots = n_shots;
  s.n_receivers = n_receivers;
  return s;
}

}  // namespace

MemoryEstimate estimate_fwi(io::Config const& cfg, io::VelocityModel const& vm, int n_shots, int n_receivers, int ranks,
                            core::DomainSplit const& split) {
  Options o = inversion_options(cfg, model_grid(vm), 0);  // the options the run will take
  o.domains = split;
  return estimate_inversion(shape_of(cfg, vm, n_shots, n_receivers), o, ranks);
}

MemoryEstimate estimate_model(io::Config const& cfg, io::VelocityModel const& vm, int n_shots, int n_receivers,
                              bool fp64, int batch, core::DomainSplit const& split) {
  return estimate_modeling(shape_of(cfg, vm, n_shots, n_receivers), fp64, batch, split);
}

MemoryEstimate estimate_rtm(io::Config const& cfg, io::VelocityModel const& vm, int n_shots, int n_receivers, int ranks,
                            core::DomainSplit const& split) {
  auto const storage =
      storage::make_storage_config(cfg.storage.strategy, cfg.storage.location, cfg.storage.dtype,
                                   cfg.storage.transfer_interval, cfg.storage.disk_dir, cfg.storage.pinned);
  return estimate_imaging(shape_of(cfg, vm, n_shots, n_receivers), storage, cfg.propagator.precision == "fp64",
                          cfg.propagator.batch, cfg.imaging.lsrtm_iterations, ranks, split);
}

MachineMemory machine_memory(io::Config const& cfg) {
  return machine_memory(cfg.storage.location == "disk", cfg.storage.disk_dir);
}

std::string smallest_split(io::Config const& cfg, io::VelocityModel const& vm, int n_shots, int n_receivers,
                           MachineMemory const& mm, core::DomainSplit const& tried) {
  core::ModelGrid const grid = model_grid(vm);
  int const radius = cfg.propagator.order / 2, dim = grid.dim();
  auto fits = [&](core::DomainSplit const& s) {
    try {
      core::check_split(grid, s, radius, s.count());
      check_memory({estimate_fwi(cfg, vm, n_shots, n_receivers, s.count(), s)}, mm, s.count());  // one shot group
      return true;
    } catch (Error const&) {
      return false;
    }
  };
  // The fewest subdomains first; in 3D the squarest split of a count first.
  for (int count = std::max(2, tried.count() + 1); count <= 256; ++count) {
    std::vector<core::DomainSplit> candidates;
    if (dim == 2) {
      candidates.push_back({1, count, tried.align});
    } else {
      for (int ny = 1; ny <= count; ++ny)
        if (count % ny == 0) candidates.push_back({ny, count / ny, tried.align});
      std::sort(candidates.begin(), candidates.end(), [](auto const& a, auto const& b) {
        return std::abs(a.ny_parts - a.nx_parts) < std::abs(b.ny_parts - b.nx_parts);
      });
    }
    for (auto const& s : candidates)
      if (fits(s)) {
        std::string const list = dim == 3 ? "[" + std::to_string(s.ny_parts) + ", " + std::to_string(s.nx_parts) + "]"
                                          : "[" + std::to_string(s.nx_parts) + "]";
        return "the smallest split of the model whose inversion fits: parallel.domains = " + list + " on " +
               std::to_string(s.count()) + " ranks (one shot group; with " + std::to_string(s.count()) +
               " ranks per node the node's memory is shared: see the table)\n";
      }
  }
  return "no split of the model into up to 256 domains fits\n";
}

namespace {

/// printf into a string.
template <class... Args>
std::string formatted(char const* format, Args... args) {
  int const n = std::snprintf(nullptr, 0, format, args...);
  std::string out(static_cast<std::size_t>(std::max(n, 0)), '\0');
  std::snprintf(out.data(), out.size() + 1, format, args...);
  return out;
}

/// Stages out of order; the wavelet (or the highest stage) under-sampled on the grid.
void sampling_warnings(io::Config const& cfg, io::VelocityModel const& vm, std::vector<std::string>& out) {
  auto const& stages = cfg.fwi.stages;
  for (std::size_t k = 1; k < stages.size(); ++k)
    if (stages[k].max_freq < stages[k - 1].max_freq)
      out.push_back(
          formatted("warning: fwi.stages[%zu].max_freq = %g Hz is below the stage before it (%g Hz): "
                    "frequency continuation inverts the low frequencies first and adds higher ones stage "
                    "by stage",
                    k, stages[k].max_freq, stages[k - 1].max_freq));
  float vmin = vm.vp.empty() ? 0.0f : vm.vp[0];
  for (float v : vm.vp) vmin = std::min(vmin, v);
  if (cfg.fwi.stages.empty() || cfg.wavelet.source == "ricker") {
    auto const w = core::sampling_warning(vmin, cfg.wavelet.freq, vm.dh);
    if (!w.empty()) out.push_back(w);
    return;
  }
  // An estimated wavelet or one from a file, in frequency stages: the last stage's band is what
  // the inversion propagates.
  double top = 0;
  for (auto const& st : cfg.fwi.stages) top = std::max(top, st.max_freq);
  double const points = vmin / top / vm.dh;
  if (points < 5)
    out.push_back(
        formatted("warning: the highest stage (max_freq = %g Hz) is under-sampled: %.3g cells per "
                  "wavelength (vmin %g m/s / %g Hz, dh = %g m); at least 5 are advised",
                  top, points, static_cast<double>(vmin), top, vm.dh));
}

/// A receiver at the position of another of its shot (a line or trace given twice) records the
/// same samples, and its residual counts twice in the loss: said, with the first such pair.
void repeated_receivers(core::Survey const& survey, double dh, std::vector<std::string>& out) {
  std::size_t repeats = 0;
  int shot = -1, first = -1, second = -1;
  core::Point at{};
  std::vector<std::pair<std::array<double, 3>, int>> seen;
  for (int s = 0; s < survey.n_shots; ++s) {
    seen.clear();
    for (int i = 0; i < survey.n_receivers; ++i) {
      if (!survey.live(s, i)) continue;
      auto const p = survey.receiver_at(static_cast<std::size_t>(s) * survey.n_receivers + i);
      seen.push_back({{p.z, p.y, p.x}, i});
    }
    std::sort(seen.begin(), seen.end());
    for (std::size_t k = 1; k < seen.size(); ++k) {
      if (seen[k].first != seen[k - 1].first) continue;
      if (repeats++ == 0) {
        shot = s, first = std::min(seen[k - 1].second, seen[k].second),
        second = std::max(seen[k - 1].second, seen[k].second);
        at = survey.receiver_at(static_cast<std::size_t>(s) * survey.n_receivers + first);
      }
    }
  }
  if (repeats > 0)
    out.push_back(
        formatted("warning: %zu receiver(s) repeat the position of another receiver of their shot (the "
                  "first: shot %d, receivers %d and %d, at z = %g m, x = %g m, y = %g m): each records the "
                  "same samples and its residual counts twice in the loss; remove the repeated lines or "
                  "traces from the survey",
                  repeats, shot, first, second, at.z * dh, at.x * dh, at.y * dh));
}

}  // namespace

std::string unused_layout(io::Config const& cfg, std::string const& what) {
  std::string keys;
  for (auto const& k : cfg.given)
    if (k.rfind("shots.", 0) == 0 || k.rfind("receivers.", 0) == 0) keys += (keys.empty() ? "" : ", ") + k;
  if (keys.empty()) return {};
  return "warning: " + what + " the [shots] and [receivers] layout (not used: " + keys + ")";
}

std::vector<std::string> acquisition_warnings(io::Config const& cfg, io::VelocityModel const& vm,
                                              core::Survey const& survey) {
  std::vector<std::string> out;
  sampling_warnings(cfg, vm, out);
  // A Ricker wavelet of peak frequency f carries energy up to about 2.5 f.
  double const nyquist = 0.5 / cfg.time.dt, top = 2.5 * cfg.wavelet.freq;
  if (top > nyquist)
    out.push_back(
        formatted("warning: the wavelet is under-sampled in time: its peak frequency wavelet.freq = %g Hz "
                  "carries energy up to about %g Hz, above the Nyquist frequency %g Hz of time.dt = %g s; "
                  "lower wavelet.freq below %g Hz or time.dt below %g s",
                  cfg.wavelet.freq, top, nyquist, cfg.time.dt, nyquist / 2.5, 0.5 / top));
  if (!cfg.survey.file.empty())
    if (auto const w = unused_layout(cfg, "survey.file replaces"); !w.empty()) out.push_back(w);
  repeated_receivers(survey, vm.dh, out);
  if (!survey.source_points.empty()) return out;  // a survey file's shots: placed as the file says
  std::vector<std::array<int, 3>> cells;
  for (auto const& c : survey.sources) cells.push_back({c.z, c.y, c.x});
  std::sort(cells.begin(), cells.end());
  auto const distinct = static_cast<int>(std::unique(cells.begin(), cells.end()) - cells.begin());
  if (distinct < survey.n_shots)
    out.push_back(
        formatted("warning: shots.count = %d shots share only %d distinct source cells on a model %d cells "
                  "wide (shots.x_range = [%g, %g]); repeated shots add cost, not information: use at most "
                  "%d shots or a wider shots.x_range",
                  survey.n_shots, distinct, vm.nx, cfg.shots.x_range[0], cfg.shots.x_range[1], distinct));
  return out;
}

Stages make_stages(io::Config const& cfg, std::vector<double> const& wavelet) {
  std::vector<Stage> stages;
  for (auto const& st : cfg.fwi.stages) stages.push_back({st.iterations, st.max_freq});
  return Stages(std::move(stages), wavelet, cfg.time.dt);
}

std::vector<std::string> stage_warnings(Stages const& stages) {
  std::vector<std::string> out;
  for (std::size_t k = 0; k < stages.size(); ++k) {
    double const outside = stages.outside(static_cast<int>(k)), max_freq = stages[k].max_freq;
    if (outside > 0.01)
      out.push_back(
          formatted("warning: stage %zu's wavelet (low-passed below %g Hz) has %.1f %% of its energy "
                    "before t = 0 or past the record, which the modelling cannot inject while the data "
                    "low-passed alike keep it; a source that starts at least 1 / max_freq = %g s after "
                    "t = 0 avoids this (or raise the stage's max_freq)",
                    k + 1, max_freq, 100 * outside, 1 / max_freq));
  }
  return out;
}

nlohmann::json to_json(core::MemoryReport const& mem) {
  return {{"strategy", mem.strategy},
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
}

}  // namespace ksweep::fwi
