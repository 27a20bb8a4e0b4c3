// Kernel launches per time step, counted through the Kokkos Tools callbacks: small problems are
// launch-bound on devices, so each step's launch count is part of the contract.
//   forward modelling: 2 (point work, stencil)
//   adjoint:           2
//   gradient forward:  3 (point work, stencil, ring encode)
//   gradient backward: 3 (the point work of both wavefields with the decoded ring, imaging
//                      with reconstruction, adjoint stencil)
// The counts are slopes over two run lengths, so set-up launches do not enter.

#include <ksweep/storage/gradient.hpp>
#include <test_utils.hpp>

#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <mutex>
#include <string>

namespace {

using namespace ksweep;

struct LaunchCounter {
  static inline std::atomic<long> count{0};
  static inline std::mutex mutex;
  static inline std::map<std::string, long> by_label;
  static void begin(char const* label, std::uint32_t, std::uint64_t* id) {
    ++count;
    std::lock_guard<std::mutex> lock(mutex);
    ++by_label[label];
    *id = 0;
  }
  static void end(std::uint64_t) {}
  LaunchCounter() {
    Kokkos::fence();
    count = 0;
    by_label.clear();
    namespace T = Kokkos::Tools::Experimental;
    T::set_begin_parallel_for_callback(&begin);
    T::set_begin_parallel_reduce_callback(&begin);
    T::set_begin_parallel_scan_callback(&begin);
    T::set_end_parallel_for_callback(&end);
    T::set_end_parallel_reduce_callback(&end);
    T::set_end_parallel_scan_callback(&end);
  }
  ~LaunchCounter() {
    namespace T = Kokkos::Tools::Experimental;
    T::set_begin_parallel_for_callback(nullptr);
    T::set_begin_parallel_reduce_callback(nullptr);
    T::set_begin_parallel_scan_callback(nullptr);
    T::set_end_parallel_for_callback(nullptr);
    T::set_end_parallel_reduce_callback(nullptr);
    T::set_end_parallel_scan_callback(nullptr);
  }
  static std::string labels() {
    std::string s;
    for (auto const& [k, v] : by_label) s += "  " + k + ": " + std::to_string(v) + "\n";
    return s;
  }
};

struct LaunchProblem {
  using P = core::Propagator<float, 8, TEST_EXECSPACE>;
  using E = storage::GradientEngine<float, 8, TEST_EXECSPACE>;
  static constexpr int nz = 30, nx = 40, shots = 2;
  P prop;
  LaunchProblem() : prop(TEST_EXECSPACE(), core::ModelGrid{nz, nx, 10.0}, pml(), 1e-3, shots) {
    std::vector<float> v(static_cast<std::size_t>(nz) * nx, 2000.0f);
    prop.set_velocity(v.data());
    prop.set_survey(test::line_survey(shots, nz, nx, 2, 3, 12));
  }
  static core::PmlConfig pml() {
    core::PmlConfig p;
    p.width = 6;
    return p;
  }
  P::wavelet_view wavelets(int nt) const { return P::wavelet_view("w", shots, 1, nt); }
  P::record_view records(int nt) const { return P::record_view("r", shots, nt, 12); }
};

// Launches of `run(nt)` per step: (launches(nt2) - launches(nt1)) / (nt2 - nt1).
template <class Run>
double launches_per_step(Run const& run, std::string* labels) {
  int const nt1 = 10, nt2 = 30;
  run(nt1);  // first use allocates (the adjoint fields, for one)
  long counts[2];
  int i = 0;
  for (int nt : {nt1, nt2}) {
    LaunchCounter counter;
    run(nt);
    Kokkos::fence();
    counts[i++] = LaunchCounter::count;
    if (nt == nt2) *labels = LaunchCounter::labels();
  }
  return static_cast<double>(counts[1] - counts[0]) / (nt2 - nt1);
}

KSWEEP_TEST(launches_per_step_forward_and_adjoint) {
  LaunchProblem p;
  std::string labels;
  double const fwd = launches_per_step(
      [&](int nt) {
        auto w = p.wavelets(nt);
        auto r = p.records(nt);
        p.prop.forward(w, r);
      },
      &labels);
  EXPECT_EQ(fwd, 2.0) << labels;
  double const adj = launches_per_step(
      [&](int nt) {
        auto w = p.wavelets(nt);
        auto r = p.records(nt);
        p.prop.adjoint(r, w);
      },
      &labels);
  EXPECT_EQ(adj, 2.0) << labels;
}

KSWEEP_TEST(launches_per_step_gradient) {
  for (char const* strategy : {"boundary", "full"}) {
    LaunchProblem p;
    storage::StorageConfig cfg;
    cfg.strategy = strategy;
    cfg.dtype = storage::Dtype::int8;  // the codec with a block reduction
    LaunchProblem::E engine(p.prop, cfg);
    std::string labels;
    double const fwd = launches_per_step(
        [&](int nt) {
          auto w = p.wavelets(nt);
          auto r = p.records(nt);
          engine.forward(w, r);
        },
        &labels);
    EXPECT_EQ(fwd, 3.0) << strategy << "\n" << labels;
    double const bwd = launches_per_step(
        [&](int nt) {
          auto w = p.wavelets(nt);
          auto r = p.records(nt);
          engine.forward(w, r);
          LaunchCounter::count = 0;  // the backward pass alone
          LaunchCounter::by_label.clear();
          LaunchProblem::E::images_type images(LaunchProblem::nz, LaunchProblem::nx);
          engine.backward(w, r, images);
        },
        &labels);
    EXPECT_EQ(bwd, 3.0) << strategy << "\n" << labels;
  }
}

}  // namespace
