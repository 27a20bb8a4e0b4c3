// Serial against OpenMP, one thread against several: forward records, losses, gradients and
// illuminations are the same bits on both host backends (OpenMP runs with OMP_NUM_THREADS=2 here).

#include <Kokkos_Core.hpp>
#include <gtest/gtest.h>

#include <physics_utils.hpp>
#include <realistic_case.hpp>
#include <test_utils.hpp>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include <unistd.h>

namespace {

using namespace ksweep;

long differing(std::vector<double> const& a, std::vector<double> const& b) {
  if (a.size() != b.size()) return -1;
  long n = 0;
  for (std::size_t i = 0; i < a.size(); ++i) n += std::memcmp(&a[i], &b[i], sizeof(double)) != 0;
  return n;
}

template <class Real>
void check_records_serial_vs_openmp() {
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
  long const d = differing(serial, openmp);
  std::printf("Serial vs OpenMP records (%s, order 4, CPML + free surface, %d OpenMP threads): %ld of %zu differ\n",
              sizeof(Real) == 4 ? "fp32" : "fp64", Kokkos::OpenMP().concurrency(), d, serial.size());
  EXPECT_GT(test::energy(serial), 0.0);
  EXPECT_EQ(d, 0) << "Serial and OpenMP records must be the same bits";
}

TEST(cross_backend, records_serial_vs_openmp_fp32) { check_records_serial_vs_openmp<float>(); }
TEST(cross_backend, records_serial_vs_openmp_fp64) { check_records_serial_vs_openmp<double>(); }

// Loss, gradient, illuminations and records of the realistic case: Serial (one thread) against
// OpenMP (several), each with its automatic schedule, for two dtypes.
template <int Order, int Dim>
void check_gradient_serial_vs_openmp(bool fs) {
  ASSERT_GE(Kokkos::OpenMP().concurrency(), 2) << "run with OMP_NUM_THREADS >= 2: one thread against several";
  test::RealisticCase<Kokkos::Serial, Order, Dim> serial(fs);
  test::RealisticCase<Kokkos::OpenMP, Order, Dim> openmp(fs);
  auto const dir =
      (std::filesystem::temp_directory_path() / ("ksweep_cross_backend_" + std::to_string(::getpid()))).string();
  std::filesystem::create_directories(dir);
  for (char const* dtype : {"fp32", "int8"}) {
    auto const cfg = storage::make_storage_config("boundary", "host", dtype, 16, dir, false);
    auto const a = serial.run(core::Schedule::automatic, cfg, 0, 0);
    auto const b = openmp.run(core::Schedule::automatic, cfg, 0, 0);
    long const d = differing(a, b);
    std::printf(
        "Serial vs OpenMP gradient (order %d, %dD, free surface %d, %s): %ld of %zu values differ (loss %.9e)\n", Order,
        Dim, fs, dtype, d, a.size(), a[0]);
    EXPECT_GT(a[0], 0.0);
    EXPECT_EQ(d, 0) << "loss, records, gradient and illuminations must be the same bits";
  }
  std::filesystem::remove_all(dir);
}

TEST(cross_backend, gradient_serial_vs_openmp_2d) {
  check_gradient_serial_vs_openmp<4, 2>(false);
  check_gradient_serial_vs_openmp<8, 2>(true);
}
TEST(cross_backend, gradient_serial_vs_openmp_3d) { check_gradient_serial_vs_openmp<4, 3>(true); }

}  // namespace
