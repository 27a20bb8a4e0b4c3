#include "bench_common.hpp"

#include <ksweep/core/runtime.hpp>

#include <ksweep/core/wavelet.hpp>

#include <Kokkos_Core.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <map>
#include <mutex>
#include <random>
#include <sstream>

namespace ksweep::bench {

std::vector<Backend>& backends() {
  static std::vector<Backend> list;
  return list;
}

namespace {
std::map<std::string, double>& triads() {
  static std::map<std::string, double> t;
  return t;
}
}  // namespace

int& error_count() {
  static int n = 0;
  return n;
}

double triad_best() {
  double best = 0;
  for (auto const& [name, bw] : triads()) best = std::max(best, bw);
  return best;
}
double triad_of(std::string const& backend) {
  auto it = triads().find(backend);
  return it == triads().end() ? 0.0 : it->second;
}
void set_triad(std::string const& backend, double bytes_per_second) { triads()[backend] = bytes_per_second; }

std::vector<float> random_smooth_model(int nz, int nx, unsigned seed) {
  int const step = 16;
  int const gz = nz / step + 2, gx = nx / step + 2;
  std::mt19937 gen(seed);
  std::uniform_real_distribution<double> dist(0.0, 1.0);
  std::vector<double> nodes(static_cast<std::size_t>(gz) * gx);
  for (auto& v : nodes) v = dist(gen);
  std::vector<float> vp(static_cast<std::size_t>(nz) * nx);
  for (int iz = 0; iz < nz; ++iz) {
    double const fz = static_cast<double>(iz) / step;
    int const z0 = static_cast<int>(fz);
    double const tz = fz - z0;
    double const trend = nz > 1 ? static_cast<double>(iz) / (nz - 1) : 0.0;
    for (int ix = 0; ix < nx; ++ix) {
      double const fx = static_cast<double>(ix) / step;
      int const x0 = static_cast<int>(fx);
      double const tx = fx - x0;
      auto node = [&](int z, int x) { return nodes[static_cast<std::size_t>(z) * gx + x]; };
      double const r = (1 - tz) * ((1 - tx) * node(z0, x0) + tx * node(z0, x0 + 1)) +
                       tz * ((1 - tx) * node(z0 + 1, x0) + tx * node(z0 + 1, x0 + 1));
      double const frac = 0.6 * trend + 0.4 * r;  // in [0, 1]
      vp[static_cast<std::size_t>(iz) * nx + ix] = static_cast<float>(vel_min + (vel_max - vel_min) * frac);
    }
  }
  // Pin the extremes so every problem has the same vmax (same dt, same CPML profile).
  vp[0] = static_cast<float>(vel_max);
  vp[vp.size() - 1] = static_cast<float>(vel_min);
  return vp;
}

core::Survey surface_survey(int n_shots, int nz, int nx, int n_rec) {
  core::Survey s;
  s.n_shots = n_shots;
  s.n_sources = 1;
  s.n_receivers = n_rec;
  int const depth = std::min(2, nz - 1);
  for (int i = 0; i < n_shots; ++i) {
    s.sources.push_back({depth, static_cast<int>((static_cast<long long>(i) + 1) * nx / (n_shots + 1))});
    for (int r = 0; r < n_rec; ++r)
      s.receivers.push_back(
          {depth, n_rec > 1 ? static_cast<int>(static_cast<long long>(r) * (nx - 1) / (n_rec - 1)) : nx / 2});
  }
  return s;
}

std::vector<float> bench_wavelet(double dt, int nt) {
  auto const w = core::ricker(peak_freq, 1.5 / peak_freq, dt, nt);
  return std::vector<float>(w.begin(), w.end());
}

int steps_for(double cell_steps, long long cells_per_step, int lo, int hi) {
  double const n = std::round(cell_steps / static_cast<double>(std::max(1LL, cells_per_step)));
  return static_cast<int>(std::clamp(n, static_cast<double>(lo), static_cast<double>(hi)));
}

namespace {
struct SpaceBytes {
  std::int64_t live = 0, peak = 0, base = 0;
};
struct SpaceMemory {
  bool installed = false;
  std::mutex mutex;
  std::map<std::string, SpaceBytes> by_space;
};
SpaceMemory& space_memory() {
  static SpaceMemory m;
  return m;
}
void on_allocate(Kokkos::Profiling::SpaceHandle const space, char const*, void const*, std::uint64_t size) {
  auto& m = space_memory();
  std::lock_guard<std::mutex> lock(m.mutex);
  auto& b = m.by_space[space.name];
  b.live += static_cast<std::int64_t>(size);
  b.peak = std::max(b.peak, b.live);
}
void on_deallocate(Kokkos::Profiling::SpaceHandle const space, char const*, void const*, std::uint64_t size) {
  auto& m = space_memory();
  std::lock_guard<std::mutex> lock(m.mutex);
  m.by_space[space.name].live -= static_cast<std::int64_t>(size);
}
void reset_space_peaks() {
  auto& m = space_memory();
  std::lock_guard<std::mutex> lock(m.mutex);
  for (auto& [name, b] : m.by_space) b.peak = b.base = b.live;
}
}  // namespace

void install_space_memory() {
  Kokkos::Tools::Experimental::set_allocate_data_callback(on_allocate);
  Kokkos::Tools::Experimental::set_deallocate_data_callback(on_deallocate);
  space_memory().installed = true;
}

std::size_t space_peak_increase(std::string const& space) {
  auto& m = space_memory();
  std::lock_guard<std::mutex> lock(m.mutex);
  auto const it = m.by_space.find(space);
  if (!m.installed || it == m.by_space.end()) return 0;
  return static_cast<std::size_t>(std::max<std::int64_t>(0, it->second.peak - it->second.base));
}

bool reset_peak_rss() {
  reset_space_peaks();
  std::ofstream out("/proc/self/clear_refs");
  if (!out) return false;
  out << "5";
  out.flush();
  return static_cast<bool>(out);
}

std::size_t current_rss() { return core::current_memory_bytes(); }

std::string bench_name(std::string const& family, std::string const& backend,
                       std::vector<std::pair<std::string, std::string>> const& params) {
  std::string s = family + "/" + backend;
  for (auto const& [k, v] : params) s += "/" + k + ":" + v;
  return s;
}

}  // namespace ksweep::bench
