// Subnormal numbers: the host kernels flush them whatever the caller's mode, restore the
// caller's mode, and the results differ from unflushed runs only below the smallest normal.

#include <physics_utils.hpp>
#include <test_utils.hpp>

#include <ksweep/core/fp_env.hpp>

#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <limits>

namespace {

using namespace ksweep;

// The product of two normal numbers that is subnormal, computed in a host row launch.
struct SubnormalProduct {
  Kokkos::View<float*, Kokkos::HostSpace> out;
  float a, b;
  void operator()(core::impl::RowTag<void>, int r) const {
    float volatile x = a;  // not folded at compile time
    out(r) = x * b;
  }
};

float product_in_launch() {
  Kokkos::View<float*, Kokkos::HostSpace> out("out", 64);
  core::impl::launch_host_rows<void>(Kokkos::DefaultHostExecutionSpace(), "ksweep::test::subnormal_product",
                                     SubnormalProduct{out, 1e-30f, 1e-10f}, 64);
  Kokkos::fence();
  float m = 0;
  for (int i = 0; i < 64; ++i) m = std::max(m, out(i));
  return m;
}

KSWEEP_TEST(fp_env_host_launches_flush_and_restore) {
  if (!core::can_flush_denormals()) GTEST_SKIP() << "no floating-point control register on this CPU";
  float volatile a = 1e-30f, b = 1e-10f;
  float const here = a * b;
  ASSERT_GT(here, 0.0f) << "the calling thread must start without flush-to-zero";
  EXPECT_EQ(product_in_launch(), 0.0f) << "a host launch must run with flush-to-zero";
  EXPECT_GT(a * b, 0.0f) << "the caller's mode must be restored after the launch";
  core::set_flush_denormals(false);
  float const off = product_in_launch();
  core::set_flush_denormals(true);
  EXPECT_GT(off, 0.0f) << "set_flush_denormals(false) must leave subnormals alone";
  {
    core::FlushDenormals guard(true);
    float volatile c = 1e-30f;
    EXPECT_EQ(c * b, 0.0f);
  }
  EXPECT_GT(a * b, 0.0f);
}

// Fields ahead of the wavefront hold the stencil's numerical precursors, which decay through
// the subnormal range: a run with flushing has none, a run without has many, and their records
// and wavefields agree to far below any physical amplitude.
template <class Real>
void check_subnormal_run() {
  using P = core::Propagator<Real, 8, TEST_EXECSPACE>;
  int const nz = 90, nx = 120, nt = 60;
  core::ModelGrid grid{nz, nx, 10.0};
  core::PmlConfig pml;
  pml.width = 12;
  auto const vp = test::smooth_model(nz, nx);
  auto const survey = test::one_shot({{5, 6}}, {{5, 100}, {80, 6}, {45, 60}});
  auto const w = core::ricker(20.0, 0.05, 1e-3, nt);
  struct Run {
    std::vector<double> rec;
    std::vector<Real> u;
  };
  auto run = [&](bool flush) {
    core::set_flush_denormals(flush);
    P prop(TEST_EXECSPACE(), grid, pml, 1e-3, 1);
    prop.set_velocity(vp.data());
    Run r;
    r.rec = test::forward_records(prop, survey, w, nt);
    auto const& st = prop.forward_state();
    auto h = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), st.u[st.cur]);
    r.u.assign(h.data(), h.data() + h.span());
    core::set_flush_denormals(true);
    return r;
  };
  Run const on = run(true), off = run(false);
  auto subnormals = [](std::vector<Real> const& u) {
    long n = 0;
    for (Real x : u) n += std::fpclassify(x) == FP_SUBNORMAL;
    return n;
  };
  long const n_off = subnormals(off.u), n_on = subnormals(on.u);
  std::printf("%s: subnormal cells %ld without flushing, %ld with\n", sizeof(Real) == 4 ? "fp32" : "fp64", n_off, n_on);
  double umax = 0, du = 0, rmax = 0, dr = 0;
  for (std::size_t i = 0; i < on.u.size(); ++i) {
    umax = std::max(umax, std::abs(static_cast<double>(off.u[i])));
    du = std::max(du, std::abs(static_cast<double>(on.u[i]) - static_cast<double>(off.u[i])));
  }
  for (std::size_t i = 0; i < on.rec.size(); ++i) {
    rmax = std::max(rmax, std::abs(off.rec[i]));
    dr = std::max(dr, std::abs(on.rec[i] - off.rec[i]));
  }
  std::printf("max |u| %.3e, max |du| %.3e; max |record| %.3e, max |d record| %.3e\n", umax, du, rmax, dr);
  // A flushed precursor value may have grown before the wave arrives, so differences exceed
  // the smallest normal; they stay many orders of magnitude below the field's round-off.
  double const bound = 1e-8 * static_cast<double>(std::numeric_limits<Real>::epsilon()) * umax;
  if (core::can_flush_denormals() && std::is_same_v<TEST_EXECSPACE::memory_space, Kokkos::HostSpace>) {
    if constexpr (sizeof(Real) == 4) {
      EXPECT_GT(n_off, 100) << "the case must reach the subnormal range";
    }
    EXPECT_EQ(n_on, 0) << "flushed host kernels must leave no subnormal value";
  }
  EXPECT_GT(umax, 1e-3);
  EXPECT_LE(du, bound) << "flushing changed the wavefield by more than 1e-8 of its round-off";
  EXPECT_LE(dr, bound);
}

KSWEEP_TEST(fp_env_results_unchanged_fp32) { check_subnormal_run<float>(); }
KSWEEP_TEST(fp_env_results_unchanged_fp64) { check_subnormal_run<double>(); }

}  // namespace
