#pragma once
// Subnormal numbers: the host kernels flush them whatever the caller's mode, restore the
// caller's mode, and the results differ from unflushed runs only below the smallest normal.

#include <physics_utils.hpp>
#include <test_utils.hpp>

#include <ksweep/base/config.hpp>
#include <ksweep/base/fp_env.hpp>
#include <ksweep/base/launch.hpp>
#include <ksweep/base/math.hpp>

#include <gtest/gtest.h>

#include <array>
#include <cfloat>
#include <cstring>
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
  if (!fp::can_flush_denormals()) GTEST_SKIP() << "no floating-point control register on this CPU";
  float volatile a = 1e-30f, b = 1e-10f;
  float const here = a * b;
  ASSERT_GT(here, 0.0f) << "the calling thread must start without flush-to-zero";
  EXPECT_EQ(product_in_launch(), 0.0f) << "a host launch must run with flush-to-zero";
  EXPECT_GT(a * b, 0.0f) << "the caller's mode must be restored after the launch";
  fp::set_flush_denormals(false);
  float const off = product_in_launch();
  fp::set_flush_denormals(true);
  EXPECT_GT(off, 0.0f) << "set_flush_denormals(false) must leave subnormals alone";
  {
    fp::FlushDenormals guard(true);
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
  // Two receivers within the wave's reach by the last step, one in the precursor band far ahead.
  auto const survey = test::one_shot({{5, 6}}, {{5, 14}, {12, 9}, {45, 60}});
  auto const w = core::ricker(20.0, 0.05, 1e-3, nt);
  struct Run {
    std::vector<double> rec;
    std::vector<Real> u;
  };
  auto run = [&](bool flush) {
    fp::set_flush_denormals(flush);
    P prop(TEST_EXECSPACE(), grid, pml, 1e-3, 1);
    prop.set_velocity(vp.data());
    Run r;
    r.rec = test::forward_records(prop, survey, w, nt);
    auto const& st = prop.forward_state();
    auto h = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), st.u[st.cur]);
    r.u.assign(h.data(), h.data() + h.span());
    fp::set_flush_denormals(true);
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
  if (fp::can_flush_denormals() && std::is_same_v<TEST_EXECSPACE::memory_space, Kokkos::HostSpace>) {
    if constexpr (sizeof(Real) == 4) {
      EXPECT_GT(n_off, 100) << "the case must reach the subnormal range";
    }
    EXPECT_EQ(n_on, 0) << "flushed host kernels must leave no subnormal value";
  }
  EXPECT_GT(umax, 1e-3);
  EXPECT_GT(rmax, 1e-4) << "the records must hold the wave, not only zeros";
  EXPECT_LE(du, bound) << "flushing changed the wavefield by more than 1e-8 of its round-off";
  EXPECT_LE(dr, bound);
}

// Kernel arithmetic is the host's on every backend: a product below the smallest normal is
// flushed to zero, a subnormal operand counts as zero, a * b + c is rounded twice (no fused
// multiply-add), division and square root are correctly rounded. On host backends this checks
// launch_for's mode; on CUDA it checks the flags device code is compiled with (--ftz=true
// --fmad=false --prec-div=true --prec-sqrt=true, see the top-level CMakeLists.txt).
struct Arithmetic {
  Kokkos::View<float* [3], TEST_EXECSPACE::memory_space> in;
  Kokkos::View<float* [4], TEST_EXECSPACE::memory_space> out;
  KOKKOS_INLINE_FUNCTION void operator()(int i) const {
    float const a = in(i, 0), b = in(i, 1), c = in(i, 2);
    out(i, 0) = a * b;
    out(i, 1) = a * b + c;
    out(i, 2) = a / b;
    out(i, 3) = math::sqrt(a);
  }
};

void check_kernel_arithmetic() {
  float const one_plus = 1.0f + 0x1p-13f;
  std::vector<std::array<float, 3>> const cases{
      {1e-30f, 1e-10f, 0.0f},                    // product below the smallest normal
      {1e-39f, 1e10f, 0.0f},                     // subnormal operand
      {one_plus, one_plus, -(1.0f + 0x1p-12f)},  // a * b + c: 0 rounded twice, 2^-26 fused
      {1.0f, 3.0f, 0.5f},
      {2.0f, 7.0f, -1e-3f},
      {3e-20f, 2e-19f, 1e-38f}};
  int const n = static_cast<int>(cases.size());
  Kokkos::View<float* [3], TEST_EXECSPACE::memory_space> in("in", n);
  Kokkos::View<float* [4], TEST_EXECSPACE::memory_space> out("out", n);
  auto hin = Kokkos::create_mirror_view(in);
  for (int i = 0; i < n; ++i)
    for (int k = 0; k < 3; ++k) hin(i, k) = cases[static_cast<std::size_t>(i)][static_cast<std::size_t>(k)];
  Kokkos::deep_copy(in, hin);
  ksweep::launch_for("ksweep::test::kernel_arithmetic", Kokkos::RangePolicy<TEST_EXECSPACE>(0, n), Arithmetic{in, out});
  auto hout = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), out);
  fp::FlushDenormals guard(true);
  for (int i = 0; i < n; ++i) {
    float const a = hin(i, 0), b = hin(i, 1), c = hin(i, 2);
    float const p = a * b;
    float const ref[4] = {p, p + c, a / b, std::sqrt(a)};
    for (int k = 0; k < 4; ++k) {
      if (KSWEEP_CUDA_FMA && k == 1) continue;
      EXPECT_EQ(std::memcmp(&ref[k], &hout(i, k), sizeof(float)), 0)
          << "case " << i << " operation " << k << ": kernel " << hout(i, k) << ", host " << ref[k];
    }
  }
  EXPECT_EQ(hout(0, 0), 0.0f) << "a product below the smallest normal must be flushed";
  EXPECT_EQ(hout(1, 0), 0.0f) << "a subnormal operand must count as zero";
  if (!KSWEEP_CUDA_FMA) {
    EXPECT_EQ(hout(2, 1), 0.0f) << "a * b + c must not be fused";
  }
}

KSWEEP_TEST(fp_env_kernel_arithmetic_equals_host) {
  if (!fp::can_flush_denormals()) GTEST_SKIP() << "no floating-point control register on this CPU";
  check_kernel_arithmetic();
}

KSWEEP_TEST(fp_env_results_unchanged_fp32) { check_subnormal_run<float>(); }
KSWEEP_TEST(fp_env_results_unchanged_fp64) { check_subnormal_run<double>(); }

}  // namespace
