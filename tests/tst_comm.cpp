// The communicator on real MPI ranks (run by ctest with 1, 2 and 3 ranks): slices, broadcast,
// and the rank-order sum that makes FWI results independent of the number of ranks.

#include <ksweep/comm/communicator.hpp>

#include <Kokkos_Core.hpp>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

namespace {

using namespace ksweep;

comm::Communicator const& world() {
  static comm::Communicator c;
  return c;
}

TEST(comm, slices_cover_every_item_once_in_order) {
  for (int size = 1; size <= 6; ++size)
    for (int n = 0; n <= 20; ++n) {
      int next = 0;
      for (int r = 0; r < size; ++r) {
        auto const s = comm::slice_of(n, r, size);
        EXPECT_EQ(s.first, next) << "n " << n << " size " << size << " rank " << r;
        EXPECT_GE(s.count, n / size);
        EXPECT_LE(s.count, n / size + 1);
        next += s.count;
      }
      EXPECT_EQ(next, n);
    }
}

TEST(comm, broadcast_from_root) {
  std::vector<int> v;
  if (world().is_root()) v = {3, 1, 4, 1, 5};
  world().broadcast(v);
  EXPECT_EQ(v, (std::vector<int>{3, 1, 4, 1, 5}));
}

// Terms whose floating-point sum depends on the order of the additions: magnitudes from 1e-8
// to 1e16 with both signs.
std::vector<double> term(int k, int n) {
  std::mt19937_64 g(1000 + k);
  std::uniform_real_distribution<double> u(-1.0, 1.0), e(-8.0, 16.0);
  std::vector<double> t(n);
  for (auto& x : t) x = u(g) * std::pow(10.0, e(g));
  return t;
}

TEST(comm, sum_in_rank_order_equals_one_rank_bit_for_bit) {
  int const n_terms = 7, n = 4096;
  std::vector<double> serial(n, 0.0);
  for (int k = 0; k < n_terms; ++k) {
    auto const t = term(k, n);
    for (int i = 0; i < n; ++i) serial[i] += t[i];
  }
  auto const& c = world();
  auto const slice = comm::slice_of(n_terms, c.rank(), c.size());
  Kokkos::View<double*, Kokkos::HostSpace> a("a", n), b("b", n);
  c.sum_in_rank_order(
      Kokkos::DefaultHostExecutionSpace(),
      [&] {
        for (int k = slice.first; k < slice.first + slice.count; ++k) {
          auto const t = term(k, n);
          for (int i = 0; i < n; ++i) {
            a(i) += t[i];
            b(i) += 2 * t[i];
          }
        }
      },
      a, b);
  long diff = 0;
  for (int i = 0; i < n; ++i) {
    diff += std::memcmp(&a(i), &serial[i], sizeof(double)) != 0;
    double const twice = 2 * serial[i];  // exact: doubling commutes with every rounding
    diff += std::memcmp(&b(i), &twice, sizeof(double)) != 0;
  }
  EXPECT_EQ(diff, 0) << "on rank " << c.rank() << " of " << c.size();
  // The plain all-reduce of per-rank partial sums, for contrast (not asserted: it may agree).
  std::vector<double> partial(n, 0.0);
  for (int k = slice.first; k < slice.first + slice.count; ++k) {
    auto const t = term(k, n);
    for (int i = 0; i < n; ++i) partial[i] += t[i];
  }
  c.allreduce_sum(partial.data(), partial.size());
  long plain = 0;
  for (int i = 0; i < n; ++i) plain += partial[i] != serial[i];
  if (c.is_root())
    std::printf("%d rank(s): rank-order sum differs from one rank in %ld of %d values; a plain all-reduce in %ld\n",
                c.size(), diff, n, plain);
}

}  // namespace

int main(int argc, char** argv) {
  comm::Environment env(argc, argv);
  Kokkos::ScopeGuard kokkos(argc, argv);
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
