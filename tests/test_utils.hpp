#pragma once
// Helpers shared by the test headers: small problems, random fields, norms.

#include <ksweep/core/propagator.hpp>
#include <ksweep/core/wavelet.hpp>

#include <Kokkos_Core.hpp>

#include <cmath>
#include <random>
#include <vector>

#define KSWEEP_TEST_CONCAT_(a, b) a##_##b
#define KSWEEP_TEST_CONCAT(a, b) KSWEEP_TEST_CONCAT_(a, b)
#define KSWEEP_TEST(name) TEST(TEST_CATEGORY, name)
// A case on a large grid. The sanitizer build (KSWEEP_TESTS_SMALL) parses it but builds none of
// it: its body becomes a function template that is never instantiated, so none of the
// propagators it alone uses is compiled; the small cases run the same indexing.
#ifdef KSWEEP_TESTS_SMALL
#define KSWEEP_LARGE_TEST(name) \
  template <class NotBuilt>     \
  [[maybe_unused]] void KSWEEP_TEST_CONCAT(large_case_not_built, name)()
#else
#define KSWEEP_LARGE_TEST(name) KSWEEP_TEST(name)
#endif

namespace ksweep::test {

// The sanitizer build (KSWEEP_TESTS_SMALL) runs the order-parametrised dot-product checks at
// orders 2 and 8 only: the smallest and the largest reach, orders 4 and 6 being the same code
// with other constants. The release build runs every order in fp64 (where the adjoint is exact
// to ~1e-15) and orders 2 and 8 in fp32, the same code with another value type (each order and
// type is an instantiation of the whole propagator: build time).
#ifdef KSWEEP_TESTS_SMALL
inline constexpr bool all_orders = false;
#else
inline constexpr bool all_orders = true;
#endif

template <class View>
auto to_host(View const& v) {
  auto h = Kokkos::create_mirror_view(Kokkos::HostSpace(), v);
  Kokkos::deep_copy(h, v);
  return h;
}

/// A view's values on the host, as doubles (exact for fp32), in memory order.
template <class View>
std::vector<double> host_values(View const& v) {
  auto h = to_host(v);
  return std::vector<double>(h.data(), h.data() + h.span());
}

template <class View>
void fill_random(View const& v, unsigned seed, double lo = -1.0, double hi = 1.0) {
  auto h = Kokkos::create_mirror_view(Kokkos::HostSpace(), v);
  std::mt19937 gen(seed);
  std::uniform_real_distribution<double> dist(lo, hi);
  auto* p = h.data();
  for (std::size_t i = 0; i < h.span(); ++i) p[i] = static_cast<typename View::value_type>(dist(gen));
  Kokkos::deep_copy(v, h);
}

template <class View>
double dot(View const& a, View const& b) {
  auto ha = to_host(a);
  auto hb = to_host(b);
  double s = 0;
  for (std::size_t i = 0; i < ha.span(); ++i)
    s += static_cast<double>(ha.data()[i]) * static_cast<double>(hb.data()[i]);
  return s;
}

/// A smoothly varying velocity model (m/s), [nz][nx].
inline std::vector<float> smooth_model(int nz, int nx, double v0 = 2000.0, double dv = 500.0) {
  std::vector<float> v(static_cast<std::size_t>(nz) * nx);
  for (int iz = 0; iz < nz; ++iz)
    for (int ix = 0; ix < nx; ++ix)
      v[static_cast<std::size_t>(iz) * nx + ix] =
          static_cast<float>(v0 + dv * iz / nz + 0.2 * dv * std::sin(0.3 * ix) * std::cos(0.2 * iz));
  return v;
}

/// Survey with one source per shot and receivers along a row.
inline core::Survey line_survey(int n_shots, int nz, int nx, int src_z, int rec_z, int n_rec) {
  core::Survey s;
  s.n_shots = n_shots;
  s.n_sources = 1;
  s.n_receivers = n_rec;
  for (int i = 0; i < n_shots; ++i) {
    s.sources.push_back({src_z, (i + 1) * nx / (n_shots + 1)});
    for (int r = 0; r < n_rec; ++r) s.receivers.push_back({rec_z, n_rec > 1 ? r * (nx - 1) / (n_rec - 1) : nx / 2});
  }
  (void)nz;
  return s;
}

}  // namespace ksweep::test
