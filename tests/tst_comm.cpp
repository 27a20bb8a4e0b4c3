// The communicator on real MPI ranks (run by ctest with 1, 2 and 3 ranks): slices, broadcast,
// gather, the rank-order sum that makes FWI results independent of the number of ranks, the
// same bits through host staging as without, and the device each rank takes.

#include <ksweep/comm/communicator.hpp>
#include <ksweep/comm/halo_exchange.hpp>
#include <ksweep/core/runtime.hpp>

#include <Kokkos_Core.hpp>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <stdexcept>
#include <string>
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

// A world communicator constructed on one rank alone (as a member of a set-up built on rank 0,
// or a one-rank reference) is not a collective call: the ranks that do not construct it go on to
// the broadcast below. (Were it one, rank 0's call would pair with the others' broadcast, and
// the run would hang or abort.)
TEST(comm, a_world_communicator_is_constructed_by_any_rank_alone) {
  std::vector<int> got;
  if (world().is_root()) {
    comm::Communicator const w;
    got = {w.rank(), w.size(), w.local_rank(), w.local_size()};
    EXPECT_EQ(got, (std::vector<int>{world().rank(), world().size(), world().local_rank(), world().local_size()}));
  }
  world().broadcast(got);
  EXPECT_EQ(got.size(), 4u);
  EXPECT_GE(world().local_size(), 1);
  EXPECT_LT(world().local_rank(), world().local_size());
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

TEST(comm, gather_collects_every_rank_in_order) {
  auto const& c = world();
  auto const all = c.gather(std::string(static_cast<std::size_t>(c.rank()), 'x') + "rank " + std::to_string(c.rank()));
  if (!c.is_root()) {
    EXPECT_TRUE(all.empty());
    return;
  }
  ASSERT_EQ(static_cast<int>(all.size()), c.size());
  for (int r = 0; r < c.size(); ++r)
    EXPECT_EQ(all[static_cast<std::size_t>(r)],
              std::string(static_cast<std::size_t>(r), 'x') + "rank " + std::to_string(r));
  EXPECT_GE(c.local_rank(), 0);
  EXPECT_LT(c.local_rank(), c.local_size());
}

TEST(comm, each_rank_of_a_node_takes_its_own_device) {
  // One device per rank where there are enough; ranks beyond the count share them in turn.
  for (int devices = 1; devices <= 8; ++devices)
    for (int local = 0; local < 20; ++local) {
      int const d = core::choose_device(local, devices, -1);
      EXPECT_EQ(d, local % devices) << local << " of " << devices;
    }
  EXPECT_EQ(core::choose_device(3, 4, -1), 3);
  EXPECT_EQ(core::choose_device(5, 4, -1), 1);
  EXPECT_EQ(core::choose_device(0, 0, -1), -1);  // no device: the host
  // The override wins over the local rank, and must name a visible device.
  EXPECT_EQ(core::choose_device(3, 4, 0), 0);
  EXPECT_EQ(core::choose_device(0, 2, 1), 1);
  EXPECT_THROW(core::choose_device(0, 2, 2), std::runtime_error);
  EXPECT_THROW(core::choose_device(0, 0, 0), std::runtime_error);
  EXPECT_THROW(core::choose_device(-1, 2, -1), std::runtime_error);
}

// Runs f() with the process-wide staging set to `s`, then back to automatic.
template <class F>
auto with_staging(comm::Staging s, F&& f) {
  comm::set_staging(s);
  auto r = f();
  comm::set_staging(comm::Staging::automatic);
  return r;
}

TEST(comm, host_staging_gives_the_same_bits) {
  auto const& c = world();
  int const n = 4096;
  using space = Kokkos::DefaultHostExecutionSpace;
  EXPECT_FALSE(comm::staged<Kokkos::HostSpace>());
  auto reduce = [&] {
    // The plain all-reduce, the rank-order sum and the halo exchange of a row split over ranks.
    Kokkos::View<double*, Kokkos::HostSpace> a("a", n), b("b", n);
    auto const t = term(c.rank(), n);
    for (int i = 0; i < n; ++i) a(i) = t[static_cast<std::size_t>(i)];
    c.allreduce_sum_view(space(), a);
    c.sum_in_rank_order(
        space(),
        [&] {
          for (int i = 0; i < n; ++i) b(i) += t[static_cast<std::size_t>(i)];
        },
        b);
    comm::HaloGeometry g;
    g.radius = 2, g.NZ = 6, g.NX = 5;
    g.left = c.rank() > 0 ? c.rank() - 1 : -1;
    g.right = c.rank() + 1 < c.size() ? c.rank() + 1 : -1;
    comm::HaloExchange<float, space> halo(c, g, space(), 2);
    typename decltype(halo)::field3 u("u", 2, g.field_rows(), g.row_cells());
    for (std::size_t i = 0; i < u.span(); ++i) u.data()[i] = static_cast<float>(c.rank() * 1000 + i) * 0.37f;
    halo.exchange(u, 2);
    std::vector<double> out(a.data(), a.data() + n);
    out.insert(out.end(), b.data(), b.data() + n);
    out.insert(out.end(), u.data(), u.data() + u.span());
    return out;
  };
  auto const direct = with_staging(comm::Staging::direct, reduce);
  auto const staged = with_staging(comm::Staging::staged, reduce);
  EXPECT_TRUE(with_staging(comm::Staging::staged, [] { return comm::staged<Kokkos::HostSpace>(); }));
  ASSERT_EQ(direct.size(), staged.size());
  long diff = 0;
  for (std::size_t i = 0; i < direct.size(); ++i) diff += std::memcmp(&direct[i], &staged[i], sizeof(double)) != 0;
  EXPECT_EQ(diff, 0) << "on rank " << c.rank() << " of " << c.size();
  if (c.size() > 1 && c.rank() > 0) {  // the halo was filled from the left neighbour
    EXPECT_NE(staged[2 * n], static_cast<double>(static_cast<float>(c.rank() * 1000) * 0.37f));
  }
}

}  // namespace

int main(int argc, char** argv) {
  comm::Environment env(argc, argv);
  Kokkos::ScopeGuard kokkos(argc, argv);
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
