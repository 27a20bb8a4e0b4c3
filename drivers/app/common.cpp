#include "common.hpp"
#include "guard.hpp"

#include <ksweep/base/config.hpp>
#include <ksweep/base/error.hpp>
#include <ksweep/core/runtime.hpp>
#include <ksweep/core/sizes.hpp>
#include <ksweep/io/survey.hpp>
#include <ksweep/io/wavelet.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <sstream>

#include <sys/wait.h>
#include <unistd.h>

namespace ksweep::app {

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

core::ModelGrid model_grid(io::VelocityModel const& vm) {
  return vm.ny > 0 ? core::ModelGrid::volume(vm.nz, vm.ny, vm.nx, vm.dh) : core::ModelGrid(vm.nz, vm.nx, vm.dh);
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

core::PmlConfig make_pml(io::Config const& cfg) {
  core::PmlConfig p;
  p.width = cfg.propagator.pml_width;
  p.reflection = cfg.propagator.pml_reflection;
  p.freq = cfg.propagator.pml_freq;
  p.profile_velocity = cfg.propagator.pml_velocity;
  p.free_surface = cfg.propagator.free_surface;
  return p;
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

namespace {
fs::path python_dir() {
  if (char const* e = std::getenv("KSWEEP_PYTHON_DIR")) return e;
  fs::path const src = fs::path(KSWEEP_SOURCE_DIR) / "drivers" / "python";
  if (fs::exists(src / "plot_gather.py")) return src;
  return fs::path(KSWEEP_INSTALL_DATADIR) / "python";
}
std::string quote(std::string const& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}
}  // namespace

bool run_figure_script(std::string const& script, std::vector<std::string> const& args) {
  char const* py = std::getenv("KSWEEP_PYTHON");
  std::string cmd = quote(py ? py : KSWEEP_PYTHON_EXECUTABLE) + " " + quote((python_dir() / script).string());
  for (auto const& a : args) cmd += " " + quote(a);
  int const rc = std::system(cmd.c_str());
  if (rc != 0) {
    std::fprintf(stderr, "ksweep: warning: figure script %s failed (exit %d); the data files are complete\n",
                 script.c_str(), WIFEXITED(rc) ? WEXITSTATUS(rc) : rc);
    return false;
  }
  return true;
}

void make_directory(fs::path const& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  KSWEEP_REQUIRE(!ec && fs::is_directory(dir),
                 "cannot create the output folder " << dir.string() << ": " << ec.message());
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

std::string silent_data(std::vector<float> const& d, std::string const& what, io::Config const& cfg) {
  float peak = 0;
  std::size_t bad = 0, first = 0;
  for (std::size_t i = 0; i < d.size(); ++i) {
    if (!std::isfinite(d[i]) && bad++ == 0) first = i;
    peak = std::max(peak, std::abs(d[i]));
  }
  if (bad > 0) {
    std::ostringstream os;
    os << what << " hold " << bad << " samples that are not finite (the first: " << d[first] << " at sample " << first
       << " of " << d.size() << "): the wave overflowed float32; scale the wavelet's amplitudes down";
    return os.str();
  }
  if (peak >= std::numeric_limits<float>::min()) return {};
  std::ostringstream os;
  os << what << " are zero at every sample (largest |sample| " << peak
     << "): there is nothing to invert. The wave does not reach the receivers within the record of time.nt = "
     << cfg.time.nt << " samples x time.dt = " << cfg.time.dt << " s = " << cfg.time.nt * cfg.time.dt
     << " s, or the wavelet (wavelet.freq = " << cfg.wavelet.freq << " Hz, wavelet.delay = " << cfg.wavelet.delay
     << " s) is silent within it; lengthen the record, or check the observed data";
  return os.str();
}

void remove_if_empty(fs::path const& dir) {
  std::error_code ec;
  if (fs::is_directory(dir, ec) && fs::is_empty(dir, ec) && !ec) fs::remove(dir, ec);
}

std::string format_seconds(double s) {
  long const t = std::lround(std::max(0.0, s));
  char buf[32];
  if (t >= 3600) std::snprintf(buf, sizeof buf, "%ldh%02ldm%02lds", t / 3600, (t / 60) % 60, t % 60);
  else if (t >= 60) std::snprintf(buf, sizeof buf, "%ldm%02lds", t / 60, t % 60);
  else std::snprintf(buf, sizeof buf, "%.1fs", s);
  return buf;
}

void warn_sampling(io::Config const& cfg, io::VelocityModel const& vm, comm::Communicator const& comm) {
  if (!comm.is_root()) return;
  auto const& stages = cfg.fwi.stages;
  for (std::size_t k = 1; k < stages.size(); ++k)
    if (stages[k].max_freq < stages[k - 1].max_freq)
      std::fprintf(stderr,
                   "ksweep: warning: fwi.stages[%zu].max_freq = %g Hz is below the stage before it (%g Hz): frequency "
                   "continuation inverts the low frequencies first and adds higher ones stage by stage\n",
                   k, stages[k].max_freq, stages[k - 1].max_freq);
  float vmin = vm.vp.empty() ? 0.0f : vm.vp[0];
  for (float v : vm.vp) vmin = std::min(vmin, v);
  if (cfg.fwi.stages.empty() || cfg.wavelet.source == "ricker") {
    auto const w = core::sampling_warning(vmin, cfg.wavelet.freq, vm.dh);
    if (!w.empty()) std::fprintf(stderr, "ksweep: %s\n", w.c_str());
    return;
  }
  // An estimated wavelet or one from a file, in frequency stages: the last stage's band is what
  // the inversion propagates.
  double top = 0;
  for (auto const& st : cfg.fwi.stages) top = std::max(top, st.max_freq);
  double const points = vmin / top / vm.dh;
  if (points < 5)
    std::fprintf(stderr,
                 "ksweep: warning: the highest stage (max_freq = %g Hz) is under-sampled: %.3g cells per wavelength "
                 "(vmin %g m/s / %g Hz, dh = %g m); at least 5 are advised\n",
                 top, points, static_cast<double>(vmin), top, vm.dh);
}

void warn_unused_layout(io::Config const& cfg, std::string const& what) {
  std::string keys;
  for (auto const& k : cfg.given)
    if (k.rfind("shots.", 0) == 0 || k.rfind("receivers.", 0) == 0) keys += (keys.empty() ? "" : ", ") + k;
  if (!keys.empty())
    std::fprintf(stderr, "ksweep: warning: %s the [shots] and [receivers] layout (not used: %s)\n", what.c_str(),
                 keys.c_str());
}

/// A receiver at the position of another of its shot (a line or trace given twice) records the
/// same samples, and its residual counts twice in the loss: said, with the first such pair.
static void warn_repeated_receivers(core::Survey const& survey, double dh) {
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
    std::fprintf(stderr,
                 "ksweep: warning: %zu receiver(s) repeat the position of another receiver of their shot (the first: "
                 "shot %d, receivers %d and %d, at z = %g m, x = %g m, y = %g m): each records the same samples and "
                 "its residual counts twice in the loss; remove the repeated lines or traces from the survey\n",
                 repeats, shot, first, second, at.z * dh, at.x * dh, at.y * dh);
}

void warn_acquisition(io::Config const& cfg, io::VelocityModel const& vm, core::Survey const& survey,
                      comm::Communicator const& comm) {
  warn_sampling(cfg, vm, comm);
  if (!comm.is_root()) return;
  // A Ricker wavelet of peak frequency f carries energy up to about 2.5 f.
  double const nyquist = 0.5 / cfg.time.dt, top = 2.5 * cfg.wavelet.freq;
  if (top > nyquist)
    std::fprintf(stderr,
                 "ksweep: warning: the wavelet is under-sampled in time: its peak frequency wavelet.freq = %g Hz "
                 "carries energy up to about %g Hz, above the Nyquist frequency %g Hz of time.dt = %g s; "
                 "lower wavelet.freq below %g Hz or time.dt below %g s\n",
                 cfg.wavelet.freq, top, nyquist, cfg.time.dt, nyquist / 2.5, 0.5 / top);
  if (!cfg.survey.file.empty()) warn_unused_layout(cfg, "survey.file replaces");
  warn_repeated_receivers(survey, vm.dh);
  if (!survey.source_points.empty()) return;  // a survey file's shots: placed as the file says
  std::vector<std::array<int, 3>> cells;
  for (auto const& c : survey.sources) cells.push_back({c.z, c.y, c.x});
  std::sort(cells.begin(), cells.end());
  auto const distinct = static_cast<int>(std::unique(cells.begin(), cells.end()) - cells.begin());
  if (distinct < survey.n_shots)
    std::fprintf(stderr,
                 "ksweep: warning: shots.count = %d shots share only %d distinct source cells on a model %d cells "
                 "wide (shots.x_range = [%g, %g]); repeated shots add cost, not information: use at most %d shots "
                 "or a wider shots.x_range\n",
                 survey.n_shots, distinct, vm.nx, cfg.shots.x_range[0], cfg.shots.x_range[1], distinct);
}

std::vector<RankDevice> rank_devices(comm::Communicator const& comm) {
  char host[256] = {};
  if (::gethostname(host, sizeof host - 1) != 0) std::snprintf(host, sizeof host, "unknown");
  // One line per rank: "local rank\tdevice id\thost\tdevice".
  std::string const mine = std::to_string(comm.local_rank()) + "\t" + std::to_string(core::device_id()) + "\t" + host +
                           "\t" + core::device_description();
  std::vector<RankDevice> out;
  auto const all = comm.gather(mine);
  for (std::size_t r = 0; r < all.size(); ++r) {
    std::istringstream is(all[r]);
    std::string local, id;
    RankDevice d;
    d.rank = static_cast<int>(r);
    std::getline(is, local, '\t');
    std::getline(is, id, '\t');
    std::getline(is, d.host, '\t');
    std::getline(is, d.device);
    d.local_rank = std::atoi(local.c_str());
    d.device_id = std::atoi(id.c_str());
    out.push_back(d);
  }
  return out;
}

}  // namespace ksweep::app
