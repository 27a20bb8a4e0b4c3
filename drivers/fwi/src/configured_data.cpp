// A run from its configuration (configured.hpp): the data modelled, read and checked, the
// starting models and the wavelet's estimate.

#include <ksweep/base/error.hpp>
#include <ksweep/core/profiling.hpp>
#include <ksweep/core/schedule.hpp>
#include <ksweep/core/stencil.hpp>
#include <ksweep/fwi/configured.hpp>
#include <ksweep/fwi/modeling.hpp>
#include <ksweep/fwi/smoothing.hpp>
#include <ksweep/io/atomic_file.hpp>
#include <ksweep/io/resample.hpp>
#include <ksweep/io/segy.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <sstream>
#include <tuple>

namespace ksweep::fwi {

namespace {

template <class Real>
io::RecordsFile model_records(io::Config const& cfg, io::VelocityModel const& vm, core::Survey const& survey,
                              std::vector<double> const& wavelet, std::vector<float> const* density,
                              comm::Communicator const* ranks, AfterBatch const& after_batch) {
  int const nt = cfg.time.nt, nr = survey.n_receivers, n_shots = survey.n_shots;
  ModelingSetup setup = modeling_setup(cfg, vm, survey);
  if (ranks) {  // parallel.domains: every rank of `ranks` models its shot group's shots on its subdomain
    setup.domains = domain_split(cfg, setup.grid);
    setup.ranks = *ranks;
  }
  Modeling<Real> modeling(setup);
  {
    core::ScopedRegion region("ksweep::model::model");
    std::vector<std::vector<Real>> fields{{vm.vp.begin(), vm.vp.end()}};  // one per parameter, vp first
    if (has_parameter(setup.physics, "rho")) {
      auto const rho_model = density ? *density : io::load_density(cfg.model, vm);
      fields.emplace_back(rho_model.begin(), rho_model.end());
    }
    std::vector<Real const*> model;
    for (auto const& f : fields) model.push_back(f.data());
    modeling.set_model(model);
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
  if (after_batch) modeling.set_after_batch(after_batch);
  {
    core::ScopedRegion region("ksweep::model::forward");
    modeling.forward(w.data(), rec.data());
  }
  out.data.resize(rec.size());
  std::transform(rec.begin(), rec.end(), out.data.begin(), [](Real x) { return static_cast<float>(x); });
  return out;
}

}  // namespace

io::RecordsFile model_data(io::Config const& cfg, io::VelocityModel const& vm, core::Survey const& survey,
                           std::vector<double> const& wavelet, std::vector<float> const* density,
                           comm::Communicator const* ranks, AfterBatch const& after_batch) {
  return cfg.propagator.precision == "fp64"
             ? model_records<double>(cfg, vm, survey, wavelet, density, ranks, after_batch)
             : model_records<float>(cfg, vm, survey, wavelet, density, ranks, after_batch);
}

io::RecordsFile read_observed(std::string const& path, io::VelocityModel const& vm, io::Config const& cfg, bool values,
                              std::pair<double, int>* own_axis) {
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

std::vector<float> starting_model(io::VelocityModel const& vm, double sigma, int water_rows,
                                  std::function<void()> const& poll) {
  std::vector<double> slow(vm.vp.size());
  for (std::size_t i = 0; i < slow.size(); ++i) slow[i] = 1.0 / vm.vp[i];
  int const ny = vm.ny > 0 ? vm.ny : 1;
  auto const sm = gaussian_smooth(slow, vm.nz, ny, vm.nx, sigma, poll);
  std::vector<float> v(vm.vp.size());
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(1.0 / sm[i]);
  for (std::size_t i = 0; i < static_cast<std::size_t>(water_rows) * ny * vm.nx; ++i) v[i] = vm.vp[i];
  return v;
}

std::vector<float> starting_density(io::VelocityModel const& vm, std::vector<float> const& rho, double sigma,
                                    int water_rows, std::function<void()> const& poll) {
  int const ny = vm.ny > 0 ? vm.ny : 1;
  std::vector<double> r(rho.begin(), rho.end());
  auto const sm = gaussian_smooth(r, vm.nz, ny, vm.nx, sigma, poll);
  std::vector<float> out(rho.size());
  for (std::size_t i = 0; i < out.size(); ++i) out[i] = static_cast<float>(sm[i]);
  for (std::size_t i = 0; i < static_cast<std::size_t>(water_rows) * ny * vm.nx; ++i) out[i] = rho[i];
  return out;
}

void check_stability(io::Config const& cfg, io::VelocityModel const& truth, std::vector<float> const& v0) {
  int const order = cfg.propagator.order;
  double const vtrue = *std::max_element(truth.vp.begin(), truth.vp.end());
  core::check_cfl(vtrue, cfg.time.dt, truth.dh, order, truth.dim());
  core::check_cfl(*std::max_element(v0.begin(), v0.end()), cfg.time.dt, truth.dh, order, truth.dim());
}

void check_smoothing(io::Config const& cfg, io::VelocityModel const& shape) {
  int const extent = std::max({shape.nz, shape.nx, shape.ny});
  KSWEEP_REQUIRE(cfg.fwi.smooth_sigma <= extent,
                 "fwi.smooth_sigma = " << cfg.fwi.smooth_sigma << " cells is wider than the model's largest extent, "
                                       << extent << " cells (" << shape.shape()
                                       << "): a Gaussian that wide smooths to a constant; use at most " << extent);
}

WaveletEstimate estimate_source(io::Config const& cfg, io::VelocityModel const& start, core::Survey const& survey,
                                std::vector<float> const& observed, std::vector<float> const* density,
                                comm::Communicator const* ranks, AfterBatch const& after_batch) {
  auto const reference = ricker_wavelet(cfg);
  auto const syn = model_data(cfg, start, survey, reference, density, ranks, after_batch);
  return estimate_wavelet(observed, syn.data, reference, survey.n_shots, cfg.time.nt, survey.n_receivers, cfg.time.dt,
                          cfg.wavelet.stabilisation);
}

io::RecordsFile final_data(io::Config const& cfg, io::VelocityModel const& vm, core::Survey const& survey,
                           std::vector<double> const& wavelet, std::vector<float> const* density,
                           std::pair<double, int> own_axis, comm::Communicator const* ranks,
                           AfterBatch const& after_batch) {
  auto syn = model_data(cfg, vm, survey, wavelet, density, ranks, after_batch);
  auto const [dt, nt] = own_axis;
  if (nt > 0 && (nt != syn.nt || std::abs(dt - syn.dt) > 1e-9 * dt)) syn = io::resample_records(syn, nt, dt);
  return syn;
}

}  // namespace ksweep::fwi
