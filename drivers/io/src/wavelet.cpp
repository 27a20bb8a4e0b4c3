#include <ksweep/base/error.hpp>
#include <ksweep/io/config.hpp>
#include <ksweep/io/hdf5_io.hpp>
#include <ksweep/io/resample.hpp>
#include <ksweep/io/segy.hpp>
#include <ksweep/io/wavelet.hpp>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <sstream>

namespace ksweep::io {

namespace fs = std::filesystem;

namespace {

/// Samples and interval of a text wavelet: "time amplitude" per line.
std::vector<double> read_text(fs::path const& path, double& dt, std::string const& name) {
  std::error_code ec;
  KSWEEP_REQUIRE(fs::is_regular_file(path, ec), name << ": file not found (or not a regular file)");
  std::ifstream in(path);
  KSWEEP_REQUIRE(in, name << ": cannot open");
  std::vector<double> t, v;
  std::string line;
  for (int no = 1; std::getline(in, line); ++no) {
    if (auto const hash = line.find('#'); hash != std::string::npos) line.erase(hash);
    std::replace(line.begin(), line.end(), ',', ' ');
    if (std::all_of(line.begin(), line.end(), [](unsigned char c) { return std::isspace(c); })) continue;
    std::istringstream is(line);
    double a = 0, b = 0;
    std::string rest;
    is >> a >> b;
    KSWEEP_REQUIRE(
        !is.fail() && !(is >> rest) && std::isfinite(a) && std::isfinite(b),
        name << ", line " << no << ": \"" << line << "\" is not two finite numbers (time in seconds, amplitude)");
    t.push_back(a);
    v.push_back(b);
  }
  KSWEEP_REQUIRE(v.size() >= 2, name << " has " << v.size()
                                     << " samples; a wavelet needs at least 2 lines of \"time "
                                        "amplitude\"");
  dt = t[1] - t[0];
  KSWEEP_REQUIRE(
      std::abs(t[0]) <= 1e-9 * std::abs(dt) && dt > 0,
      name << ": the times must start at 0 and increase (line 1: " << t[0] << " s, line 2: " << t[1] << " s)");
  for (std::size_t i = 2; i < t.size(); ++i)
    KSWEEP_REQUIRE(std::abs(t[i] - static_cast<double>(i) * dt) <= 1e-6 * dt,
                   name << ": sample " << i + 1 << " is at " << t[i] << " s, not at " << static_cast<double>(i) * dt
                        << " s: the interval must be constant (" << dt << " s from the first two samples)");
  return v;
}

}  // namespace

std::vector<double> read_wavelet(fs::path const& path, double dt, int nt, std::string const& what) {
  std::string const name = what + " = " + shown_path(path);
  std::string ext = path.extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return std::tolower(c); });
  double file_dt = 0;
  std::vector<double> w;
  if (ext == ".h5" || ext == ".hdf5") w = read_wavelet_h5(path, file_dt);
  else if (is_segy_path(path)) w = read_segy_trace(path, file_dt, what);
  else w = read_text(path, file_dt, name);
  KSWEEP_REQUIRE(!w.empty(), name << " holds no samples");
  KSWEEP_REQUIRE(file_dt > 0 && std::isfinite(file_dt),
                 name << " states a sample interval of " << file_dt << " s; a wavelet needs one > 0");
  // The modelling injects float32 samples: a larger magnitude would become inf there.
  double const most = std::numeric_limits<float>::max();
  for (std::size_t i = 0; i < w.size(); ++i) {
    KSWEEP_REQUIRE(std::isfinite(w[i]), name << ": sample " << i + 1 << " is " << w[i] << " (not finite)");
    KSWEEP_REQUIRE(std::abs(w[i]) <= most, name << ": sample " << i + 1 << " = " << w[i]
                                                << " does not fit float32 (magnitudes up to " << most
                                                << "), the precision the modelling injects it in");
  }
  KSWEEP_REQUIRE(std::any_of(w.begin(), w.end(), [](double x) { return x != 0; }),
                 name << ": every sample is 0; a silent source gives silent data");
  if (static_cast<int>(w.size()) == nt && std::abs(file_dt - dt) <= 1e-9 * dt) return w;
  RecordsFile r;
  r.shots = 1, r.receivers = 1, r.nt = static_cast<int>(w.size()), r.dt = file_dt;
  r.data.assign(w.begin(), w.end());
  r = resample_records(r, nt, dt);
  // Samples are amplitudes added once per time step: the same source at dt adds (dt / file_dt)^2
  // as much per step.
  double const scale = (dt / file_dt) * (dt / file_dt);
  std::vector<double> out(r.data.size());
  for (std::size_t i = 0; i < out.size(); ++i) {
    out[i] = scale * r.data[i];
    KSWEEP_REQUIRE(std::isfinite(r.data[i]) && std::abs(out[i]) <= most,
                   name << ": resampled to time.dt = " << dt << " s (x (time.dt / " << file_dt << " s)^2 = " << scale
                        << " per step), sample " << i + 1 << " = " << out[i] << " does not fit float32");
  }
  return out;
}

}  // namespace ksweep::io
