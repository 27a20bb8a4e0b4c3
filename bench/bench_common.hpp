#pragma once
/// \file bench_common.hpp
/// Shared pieces of the ksweep benchmark suite: options, the bandwidth references measured at
/// start-up, synthetic problems (smooth random velocity, surface survey, Ricker wavelets) and
/// small host utilities (wall clock, resident-set probes).

#include <ksweep/core/geometry.hpp>

#include <benchmark/benchmark.h>

#include <chrono>
#include <cstddef>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace ksweep::bench {

/// Command-line options of ksweep_bench that are not Google Benchmark's.
struct Options {
  bool smoke = false;  ///< --smoke: every problem shrunk to a tiny size (ctest smoke tests)
};

/// One enabled backend: its name, its STREAM triad probe (bytes/s) and its registration.
struct Backend {
  std::string name;
  std::function<double(Options const&)> measure_triad;
  std::function<void(Options const&)> register_benchmarks;
};
/// Backends compiled into this executable (each bench_<backend>.cpp adds itself).
std::vector<Backend>& backends();
struct BackendRegistrar {
  explicit BackendRegistrar(Backend b) { backends().push_back(std::move(b)); }
};

/// Triad bandwidth (bytes/s, STREAM convention 24 B/element) measured at start-up: the best
/// over all backends (the machine's bound used by "roofline_fraction") and per backend.
double triad_best();
/// Benchmarks that ended in an error (skipped with SkipWithError) in this run.
int& error_count();
double triad_of(std::string const& backend);
void set_triad(std::string const& backend, double bytes_per_second);

/// Wall clock in seconds since construction.
class Timer {
 public:
  Timer() : m_t0(std::chrono::steady_clock::now()) {}
  double seconds() const { return std::chrono::duration<double>(std::chrono::steady_clock::now() - m_t0).count(); }

 private:
  std::chrono::steady_clock::time_point m_t0;
};

/// Physical set-up shared by the propagation benchmarks.
inline constexpr double grid_spacing = 25.0;  ///< dh (m): Marmousi at 141 x 681
inline constexpr double vel_min = 1500.0, vel_max = 4500.0;
inline constexpr double peak_freq = 5.0;  ///< Ricker peak frequency (Hz)
inline constexpr int pml_width = 20;      ///< CPML cells per edge
/// Time step: Courant number 0.4, below every order's leapfrog limit and below Deepwave's own
/// CFL criterion (0.6 / sqrt(2) ~ 0.42), so the peer does not resample in time.
inline double bench_dt() { return 0.4 * grid_spacing / vel_max; }

/// A smooth random velocity model (m/s) in [vel_min, vel_max], [nz][nx] row-major: a depth
/// trend plus bilinearly interpolated random nodes every 16 cells.
std::vector<float> random_smooth_model(int nz, int nx, unsigned seed = 12345);
/// n_shots shots, one source each at depth 2 spread along x, n_rec receivers at depth 2.
core::Survey surface_survey(int n_shots, int nz, int nx, int n_rec);
/// Ricker wavelet of peak_freq, delay 1.5 / peak_freq, as float.
std::vector<float> bench_wavelet(double dt, int nt);

/// Time steps so that one forward run does about `cell_steps` padded cell updates.
int steps_for(double cell_steps, long long cells_per_step, int lo, int hi);

/// Resets the process' peak resident set (VmHWM) to its current value (Linux clear_refs 5);
/// false where the kernel refuses.
bool reset_peak_rss();
/// Current resident set (VmRSS) in bytes; 0 where unknown.
std::size_t current_rss();

/// Bytes allocated through Kokkos per memory space, counted by the Kokkos Tools allocation
/// callbacks that install_space_memory() sets (ksweep_bench's main, once Kokkos runs): by the
/// space's name ("Host", "Cuda", "CudaHostPinned", ...), so a GPU's memory is measured where
/// the resident set cannot see it. reset_peak_rss() also starts each space's peak anew.
void install_space_memory();
/// The peak of the bytes live in memory space `space` since the last reset, less those live at
/// the reset (0 before install_space_memory()).
std::size_t space_peak_increase(std::string const& space);

/// "name/Backend/key:value/..." benchmark names.
std::string bench_name(std::string const& family, std::string const& backend,
                       std::vector<std::pair<std::string, std::string>> const& params);

}  // namespace ksweep::bench
