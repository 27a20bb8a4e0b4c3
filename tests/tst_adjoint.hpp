#pragma once
// Dot-product test: <F x, y> = <x, F^T y> for the whole operator (source injection,
// propagation with CPML, free surface or reflecting edges, receiver sampling), every order.

#include <harness.hpp>
#include <test_utils.hpp>

#include <gtest/gtest.h>

#include <array>
#include <cstdio>

namespace {

using namespace ksweep;

template <class Real, int Order>
double dot_product_error(bool free_surface, int pml_width, std::array<double, 3> const& spacing = {}) {
  int const nz = 24, nx = 30, nt = 60, n_shots = 2, n_rec = 7;
  core::PmlConfig pml;
  pml.width = pml_width;
  pml.free_surface = free_surface;
  // Sources and receivers spread over the grid, including cells next to the layer.
  core::Survey s;
  s.n_shots = n_shots;
  s.n_sources = 2;
  s.n_receivers = n_rec;
  int const z0 = free_surface ? 1 : 0;
  s.sources = {{z0, 0}, {nz / 2, nx / 3}, {nz - 1, nx - 1}, {3, 5}};
  for (int sh = 0; sh < n_shots; ++sh)
    for (int r = 0; r < n_rec; ++r) s.receivers.push_back({z0 + (r * 5 + sh) % (nz - z0), (r * 7 + 3 * sh) % nx});
  core::ModelGrid grid{nz, nx, 10.0};
  if (spacing[0] > 0) grid.set_spacing(spacing);
  return test::dot_product_error<Real, Order, 2>(grid, pml, test::smooth_model(nz, nx), s, nt);
}

template <class Real>
void check_all_orders(double tol) {
  for (bool fs : {false, true}) {
    for (int w : {0, 4, 10}) {  // 0: no layer, every face (but a free surface) reflects
      double const e2 = dot_product_error<Real, 2>(fs, w), e8 = dot_product_error<Real, 8>(fs, w);
      double e4 = 0, e6 = 0;
      if constexpr (test::all_orders && sizeof(Real) == 8) {  // see test::all_orders
        e4 = dot_product_error<Real, 4>(fs, w);
        e6 = dot_product_error<Real, 6>(fs, w);
      }
      EXPECT_LE(e2, tol) << "order 2, free surface " << fs << ", pml " << w;
      EXPECT_LE(e4, tol) << "order 4, free surface " << fs << ", pml " << w;
      EXPECT_LE(e6, tol) << "order 6, free surface " << fs << ", pml " << w;
      EXPECT_LE(e8, tol) << "order 8, free surface " << fs << ", pml " << w;
      std::printf("dot-product relative error (%s, free surface %d, pml %d): o2 %.2e o4 %.2e o6 %.2e o8 %.2e\n",
                  sizeof(Real) == 8 ? "fp64" : "fp32", fs, w, e2, e4, e6, e8);
    }
  }
}

KSWEEP_TEST(adjoint_dot_product_fp64) { check_all_orders<double>(1e-12); }
KSWEEP_TEST(adjoint_dot_product_fp32) { check_all_orders<float>(1e-5); }

// Cells of their own size per axis (each axis' stencil and layer terms weighted by (dh / d_a)^2,
// its adjoint memories kept divided by the weight): z coarser than x, and the reverse.
KSWEEP_TEST(adjoint_dot_product_spacing_per_axis) {
  for (auto const& d : {std::array<double, 3>{12.5, 0.0, 7.5}, std::array<double, 3>{6.0, 0.0, 10.0}})
    for (bool fs : {false, true})
      for (int w : {0, 10}) {
        double const e2 = dot_product_error<double, 2>(fs, w, d), e8 = dot_product_error<double, 8>(fs, w, d);
        double const f8 = dot_product_error<float, 8>(fs, w, d);
        EXPECT_LE(e2, 1e-12) << "order 2, dz " << d[0] << " dx " << d[2] << ", free surface " << fs << ", pml " << w;
        EXPECT_LE(e8, 1e-12) << "order 8, dz " << d[0] << " dx " << d[2] << ", free surface " << fs << ", pml " << w;
        EXPECT_LE(f8, 1e-5) << "fp32 order 8, dz " << d[0] << " dx " << d[2] << ", free surface " << fs;
        std::printf(
            "dot-product relative error, dz %.1f dx %.1f (free surface %d, pml %d): fp64 o2 %.2e o8 %.2e, "
            "fp32 o8 %.2e\n",
            d[0], d[2], fs, w, e2, e8, f8);
      }
}

}  // namespace
