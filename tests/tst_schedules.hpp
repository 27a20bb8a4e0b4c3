#pragma once
// The three schedules (batched launches by rows, the device launches cell by cell, and shots over
// host threads) give the same bits: forward records, adjoint, Born records, and the gradient with
// every strategy and storage location.
// Image sums do not depend on how a batch is split into engines.

#include <ksweep/core/gradient.hpp>
#include <ksweep/core/wavelet.hpp>
#include <realistic_case.hpp>
#include <test_utils.hpp>

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <string>

#include <unistd.h>

namespace {

using namespace ksweep;

template <class View>
std::vector<double> host_copy(View const& v) {
  auto h = test::to_host(v);
  return std::vector<double>(h.data(), h.data() + h.span());
}

long differing(std::vector<double> const& a, std::vector<double> const& b) {
  if (a.size() != b.size()) return -1;
  long n = 0;
  for (std::size_t i = 0; i < a.size(); ++i) n += std::memcmp(&a[i], &b[i], sizeof(double)) != 0;
  return n;
}

template <int Order>
struct ScheduleCase {
  using P = core::Propagator<float, Order, TEST_EXECSPACE>;
  using E = core::GradientEngine<float, Order, TEST_EXECSPACE>;
  static constexpr int nz = 40, nx = 56, nt = 150, shots = 3, n_rec = 20;
  bool free_surface;
  P prop;
  typename P::wavelet_view w;
  typename P::record_view observed;

  explicit ScheduleCase(bool fs)
      : free_surface(fs), prop(TEST_EXECSPACE(), core::ModelGrid{nz, nx, 10.0}, pml(fs), 1e-3, shots) {
    auto vp = test::smooth_model(nz, nx);
    prop.set_velocity(vp.data());
    prop.set_survey(test::line_survey(shots, nz, nx, fs ? 1 : 2, 3, n_rec));
    w = typename P::wavelet_view("w", shots, 1, nt);
    test::fill_random(w, 5);
    observed = typename P::record_view("obs", shots, nt, n_rec);
    test::fill_random(observed, 6);
  }
  static core::PmlConfig pml(bool fs) {
    core::PmlConfig p;
    p.width = 7;
    p.free_surface = fs;
    return p;
  }
  std::vector<double> forward(core::Schedule s) {
    prop.set_schedule(s);
    typename P::record_view r("r", shots, nt, n_rec);
    prop.forward(w, r);
    return host_copy(r);
  }
  std::vector<double> adjoint(core::Schedule s) {
    prop.set_schedule(s);
    typename P::wavelet_view g("g", shots, 1, nt);
    prop.adjoint(observed, g);
    return host_copy(g);
  }
  // The Born records of a random perturbation on every cell (its scale k reaches the layer).
  std::vector<double> born(core::Schedule s) {
    prop.set_schedule(s);
    Kokkos::View<float**, Kokkos::LayoutRight, typename P::memory_space> dv("dv", nz, nx);
    test::fill_random(dv, 7);
    typename P::record_view r("born", shots, nt, n_rec);
    prop.born(w, prop.born_scale(dv), r);
    return host_copy(r);
  }
  // Loss, gradient and illuminations, one after the other.
  std::vector<double> gradient(core::Schedule s, storage::StorageConfig const& cfg) {
    prop.set_schedule(s);
    E engine(prop, cfg);
    typename E::images_type img(nz, nx);
    typename P::record_view syn("syn", shots, nt, n_rec);
    double const loss = engine.loss_and_gradient(w, observed, 0.5, img, syn);
    std::vector<double> out{loss};
    for (auto const* v : {&img.grad, &img.illum_src, &img.illum_rec}) {
      auto h = host_copy(*v);
      out.insert(out.end(), h.begin(), h.end());
    }
    return out;
  }
};

template <int Order>
void compare_schedules(bool fs) {
  ScheduleCase<Order> c(fs);
  auto const b = core::Schedule::batched;
  for (auto const other : {core::Schedule::shots, core::Schedule::cells}) {
    auto const name = core::to_string(other);
    auto const f_b = c.forward(b), f_o = c.forward(other);
    EXPECT_EQ(differing(f_b, f_o), 0) << "forward records, batched vs " << name << ", order " << Order
                                      << ", free surface " << fs;
    EXPECT_GT(test::dot(c.observed, c.observed), 0.0);
    auto const a_b = c.adjoint(b), a_o = c.adjoint(other);
    EXPECT_EQ(differing(a_b, a_o), 0) << "adjoint, batched vs " << name << ", order " << Order << ", free surface "
                                      << fs;
    auto const b_b = c.born(b), b_o = c.born(other);
    double e = 0;
    for (double x : b_b) e += x * x;
    EXPECT_GT(e, 0.0) << "no scattered records";
    EXPECT_EQ(differing(b_b, b_o), 0) << "Born records, batched vs " << name << ", order " << Order << ", free surface "
                                      << fs;
  }
  auto const dir =
      (std::filesystem::temp_directory_path() / ("ksweep_schedule_test_" + std::to_string(::getpid()))).string();
  std::filesystem::create_directories(dir);
  for (char const* strategy : {"boundary", "full"})
    for (char const* location : {"device", "host", "disk"})
      for (char const* dtype : {"fp32", "int8"}) {
        if (std::string(strategy) == "full" && std::string(location) != "device") continue;
        auto const cfg = storage::make_storage_config(strategy, location, dtype, 16, dir, false);
        auto const g_b = c.gradient(core::Schedule::batched, cfg), g_s = c.gradient(core::Schedule::shots, cfg),
                   g_c = c.gradient(core::Schedule::cells, cfg);
        long const d = differing(g_b, g_s), dc = differing(g_b, g_c);
        std::printf(
            "order %d fs %d %s %s %s: %ld (shots) and %ld (cells) of %zu values differ from batched (loss %.9e)\n",
            Order, fs, strategy, location, dtype, d, dc, g_b.size(), g_b[0]);
        EXPECT_EQ(d, 0) << "shots, " << strategy << " " << location << " " << dtype << ", order " << Order
                        << ", free surface " << fs;
        EXPECT_EQ(dc, 0) << "cells, " << strategy << " " << location << " " << dtype << ", order " << Order
                         << ", free surface " << fs;
      }
  std::filesystem::remove_all(dir);
}

KSWEEP_TEST(schedules_agree_bitwise) {
  if constexpr (!core::impl::runs_by_rows<TEST_EXECSPACE>) GTEST_SKIP() << "devices run the cells schedule only";
  compare_schedules<4>(false);
  compare_schedules<8>(true);
  compare_schedules<2>(true);
}

// Schedules on realistic inputs (see realistic_case.hpp): loss, gradient, both illuminations
// and the records are compared bit for bit with the batched schedule, with chunks of 1, 3, 5 and
// 32 steps of the `shots` schedule, and automatic and small blocks of y in 3D.
struct StoreCase {
  char const* strategy;
  char const* location;
  char const* dtype;
  bool chunks;  // also the chunks of 1, 3, 5 and 32 steps
};

template <int Order, int Dim>
void compare_schedules_realistic(bool fs, std::vector<StoreCase> const& stores) {
  test::RealisticCase<TEST_EXECSPACE, Order, Dim> c(fs);
  EXPECT_GT(c.subnormal_wavelet, 0) << "the wavelet's tail must reach the subnormal range";
  EXPECT_GT(c.subnormal_observed, 0);
  EXPECT_GT(c.precursor_samples, 0) << "far receivers must still hold only precursors at the last sample";
  auto const dir =
      (std::filesystem::temp_directory_path() / ("ksweep_schedule_real_" + std::to_string(::getpid()))).string();
  std::filesystem::create_directories(dir);
  for (auto const& st : stores) {
    auto const cfg = storage::make_storage_config(st.strategy, st.location, st.dtype, 16, dir, false);
    auto const ref = c.run(core::Schedule::batched, cfg, 0, 0);
    ASSERT_TRUE(std::isfinite(ref[0]) && ref[0] > 0) << "loss " << ref[0];
    struct Variant {
      core::Schedule s;
      int chunk, block_y;
    };
    std::vector<Variant> variants{{core::Schedule::cells, 0, 0}, {core::Schedule::shots, 0, 0}};
    if (st.chunks)
      for (int chunk : {1, 3, 5, 32}) variants.push_back({core::Schedule::shots, chunk, 0});
    if (Dim == 3) variants.push_back({core::Schedule::shots, 5, 3});
    for (auto const& v : variants) {
      auto const got = c.run(v.s, cfg, v.chunk, v.block_y);
      long const d = differing(ref, got);
      std::printf("order %d %dD fs %d %s %s %s: %s chunk %d block_y %d: %ld of %zu values differ from batched\n", Order,
                  Dim, fs, st.strategy, st.location, st.dtype, core::to_string(v.s).c_str(), v.chunk, v.block_y, d,
                  ref.size());
      EXPECT_EQ(d, 0) << core::to_string(v.s) << " chunk " << v.chunk << ", " << st.strategy << " " << st.location
                      << " " << st.dtype << ", order " << Order << ", " << Dim << "D, free surface " << fs;
    }
  }
  std::filesystem::remove_all(dir);
}

KSWEEP_LARGE_TEST(schedules_agree_bitwise_realistic) {
  if constexpr (!core::impl::runs_by_rows<TEST_EXECSPACE>) GTEST_SKIP() << "devices run the cells schedule only";
  compare_schedules_realistic<4, 2>(
      false,
      {{"boundary", "device", "fp32", true}, {"boundary", "disk", "int8", false}, {"full", "device", "fp16", false}});
  compare_schedules_realistic<8, 2>(true, {{"boundary", "host", "bf16", true}});
}

KSWEEP_LARGE_TEST(schedules_agree_bitwise_realistic_3d) {
  if constexpr (!core::impl::runs_by_rows<TEST_EXECSPACE>) GTEST_SKIP() << "devices run the cells schedule only";
  compare_schedules_realistic<8, 3>(true, {{"boundary", "device", "int8", true}, {"full", "host", "fp32", false}});
}

// The images of a batch added shot by shot equal, bit for bit, those of the batch split into two
// engines whose sums are chained (what Communicator::sum_in_rank_order does over ranks), also
// with codecs that scale blocks of values (a block must never mix shots).
void check_split(char const* dtype) {
  using C = ScheduleCase<4>;
  using P = C::P;
  using E = C::E;
  C c(false);
  auto const cfg = storage::make_storage_config("boundary", "device", dtype, 64, "", false);
  E whole(c.prop, cfg);
  E::images_type all(C::nz, C::nx), chained(C::nz, C::nx);
  P::record_view syn("syn", C::shots, C::nt, C::n_rec);
  whole.loss_and_gradient(c.w, c.observed, 1.0, all, syn);
  auto const ref = host_copy(all.grad);
  // Shots {0} then {1, 2}, with propagators of other capacities.
  auto const survey = test::line_survey(C::shots, C::nz, C::nx, 2, 3, C::n_rec);
  auto vp = test::smooth_model(C::nz, C::nx);
  for (auto const& part : {std::vector<int>{0}, std::vector<int>{1, 2}}) {
    int const n = static_cast<int>(part.size());
    P prop(TEST_EXECSPACE(), core::ModelGrid{C::nz, C::nx, 10.0}, C::pml(false), 1e-3, n + 1);
    prop.set_velocity(vp.data());
    prop.set_survey(survey.select(part));
    auto wv = Kokkos::subview(c.w, Kokkos::make_pair(part.front(), part.back() + 1), Kokkos::ALL, Kokkos::ALL);
    P::record_view ob("ob", n, C::nt, C::n_rec), sy("sy", n, C::nt, C::n_rec);
    Kokkos::deep_copy(
        ob, Kokkos::subview(c.observed, Kokkos::make_pair(part.front(), part.back() + 1), Kokkos::ALL, Kokkos::ALL));
    E engine(prop, cfg);
    engine.loss_and_gradient(wv, ob, 1.0, chained, sy);
  }
  long const d = differing(ref, host_copy(chained.grad));
  std::printf("%s: gradient of 3 shots at once vs 1 + 2 chained: %ld cells differ\n", dtype, d);
  EXPECT_EQ(d, 0);
  EXPECT_EQ(differing(host_copy(all.illum_src), host_copy(chained.illum_src)), 0);
  EXPECT_EQ(differing(host_copy(all.illum_rec), host_copy(chained.illum_rec)), 0);
}

KSWEEP_TEST(image_sums_independent_of_split) {
  for (char const* dtype : {"fp32", "fp16", "bf16", "int8"}) check_split(dtype);
}

}  // namespace
