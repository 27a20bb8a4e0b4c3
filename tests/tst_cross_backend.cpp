// Serial against OpenMP: the same survey gives the same records on both host backends.

#include <Kokkos_Core.hpp>
#include <gtest/gtest.h>

#include <physics_utils.hpp>
#include <test_utils.hpp>

#include <cstdio>
#include <vector>

namespace {

using namespace ksweep;

template <class Real>
void check_serial_vs_openmp() {
  int const nz = 50, nx = 70, nt = 400, n_shots = 3, n_rec = 11;
  double const dt = 1e-3;
  core::ModelGrid grid{nz, nx, 10.0};
  core::PmlConfig pml;  // 20 cells
  pml.free_surface = true;
  auto vp = test::smooth_model(nz, nx);
  auto survey = test::line_survey(n_shots, nz, nx, 4, 1, n_rec);
  std::vector<double> w;
  for (int s = 0; s < n_shots; ++s) {
    auto r = core::ricker(10.0 + 2.0 * s, 0.12, dt, nt);
    w.insert(w.end(), r.begin(), r.end());
  }
  auto serial = test::forward_records<Real, 4, Kokkos::Serial>(grid, pml, dt, vp, survey, w, nt);
  auto openmp = test::forward_records<Real, 4, Kokkos::OpenMP>(grid, pml, dt, vp, survey, w, nt);
  bool const bitwise = test::bitwise_equal(serial, openmp);
  double const err = test::rel_max(openmp, serial);
  std::printf(
      "Serial vs OpenMP (%s, order 4, CPML + free surface, %d OpenMP threads): %s, max relative difference %.2e\n",
      sizeof(Real) == 4 ? "fp32" : "fp64", Kokkos::OpenMP().concurrency(),
      bitwise ? "bitwise equal" : "not bitwise equal", err);
  EXPECT_GT(test::energy(serial), 0.0);
  EXPECT_LE(err, 1e-6);
}

TEST(cross_backend, serial_vs_openmp_fp32) { check_serial_vs_openmp<float>(); }
TEST(cross_backend, serial_vs_openmp_fp64) { check_serial_vs_openmp<double>(); }

}  // namespace
