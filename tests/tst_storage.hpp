#pragma once
// Codecs and step stores: round-trip error bounds, special values, disk failures.

#include <ksweep/storage/codec.hpp>
#include <ksweep/core/gradient.hpp>
#include <ksweep/storage/step_store.hpp>
#include <test_utils.hpp>

#include <ksweep/base/fp_env.hpp>

#include <gtest/gtest.h>

#include <filesystem>
#include <limits>
#include <random>

#include <csignal>
#include <sys/resource.h>

namespace {

using namespace ksweep;
using mem = TEST_EXECSPACE::memory_space;

std::vector<float> roundtrip(storage::Dtype d, std::vector<float> const& in, int* bad = nullptr) {
  Kokkos::View<float*, mem> v("v", in.size()), out("out", in.size());
  Kokkos::View<std::uint8_t*, mem> enc("enc", storage::encoded_bytes(d, in.size(), 4));
  Kokkos::View<int, mem> flag("bad");
  auto h = Kokkos::create_mirror_view(Kokkos::HostSpace(), v);
  for (std::size_t i = 0; i < in.size(); ++i) h(i) = in[i];
  Kokkos::deep_copy(v, h);
  TEST_EXECSPACE space;
  storage::encode(space, d, Kokkos::View<float const*, mem>(v), enc, flag);
  storage::decode(space, d, Kokkos::View<std::uint8_t const*, mem>(enc), out);
  space.fence();
  if (bad) Kokkos::deep_copy(*bad, flag);
  auto o = test::to_host(out);
  return std::vector<float>(o.data(), o.data() + o.span());
}

std::vector<float> random_values(std::size_t n, unsigned seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> u(-1, 1);
  std::uniform_int_distribution<int> e(-30, 5);
  std::vector<float> v(n);
  for (auto& x : v) x = u(gen) * std::ldexp(1.0f, e(gen) / 6);  // blocks with mixed magnitudes
  return v;
}

float block_max(std::vector<float> const& v, std::size_t i) {
  std::size_t const B = storage::block_size, b0 = i / B * B, b1 = std::min(v.size(), b0 + B);
  float m = 0;
  for (std::size_t j = b0; j < b1; ++j) m = std::max(m, std::abs(v[j]));
  return m;
}

KSWEEP_TEST(codec_int8_error_bound) {
  auto v = random_values(1000, 1);  // not a multiple of the block size: a partial last block
  auto r = roundtrip(storage::Dtype::int8, v);
  double worst = 0;
  for (std::size_t i = 0; i < v.size(); ++i) {
    double const bound = block_max(v, i) / 254.0;
    worst = std::max(worst, std::abs(r[i] - v[i]) / bound);
    ASSERT_LE(std::abs(r[i] - v[i]), bound * (1 + 1e-6)) << "cell " << i;
  }
  std::printf("int8: worst error / (block max / 254) = %.4f\n", worst);
  EXPECT_GT(worst, 0.5);  // the bound is tight, not vacuous
}

KSWEEP_TEST(codec_fp16_bf16_error_bound) {
  auto v = random_values(1000, 2);
  auto h = roundtrip(storage::Dtype::fp16, v);
  auto b = roundtrip(storage::Dtype::bf16, v);
  auto f = roundtrip(storage::Dtype::fp32, v);
  for (std::size_t i = 0; i < v.size(); ++i) {
    float const m = block_max(v, i);
    // fp16 of v / max: unit round-off 2^-11 relative to the block scale (subnormals included).
    EXPECT_LE(std::abs(h[i] - v[i]), m * std::ldexp(1.0, -11) * (1 + 1e-6)) << i;
    // bf16: unit round-off 2^-8 relative to the value itself.
    EXPECT_LE(std::abs(b[i] - v[i]), std::abs(v[i]) * std::ldexp(1.0, -8)) << i;
    EXPECT_EQ(f[i], v[i]);
  }
}

KSWEEP_TEST(codec_special_blocks) {
  std::vector<float> v(512, 0.0f);
  for (int i = 256; i < 512; ++i) v[i] = 1e-30f * static_cast<float>(i - 300);  // tiny values
  for (auto d : {storage::Dtype::fp16, storage::Dtype::int8, storage::Dtype::bf16}) {
    auto r = roundtrip(d, v);
    for (int i = 0; i < 256; ++i) EXPECT_EQ(r[i], 0.0f) << "zeros, " << storage::to_string(d);
    for (int i = 256; i < 512; ++i) {
      float const m = block_max(v, static_cast<std::size_t>(i));
      double const tol = d == storage::Dtype::int8 ? m / 254.0
                                                   : (d == storage::Dtype::fp16 ? m * std::ldexp(1.0, -11)
                                                                                : std::abs(v[i]) * std::ldexp(1.0, -8));
      EXPECT_LE(std::abs(r[i] - v[i]), tol * (1 + 1e-6)) << storage::to_string(d) << " cell " << i;
    }
  }
  // A block whose maximum is subnormal (1 / max overflows): still finite and within bounds. With
  // the library's floating-point mode (fp_env.hpp) kernels read subnormal values as zero, on
  // hosts as on GPUs, so the block decodes to zeros; without it, within m / 127.
  std::vector<float> sub(256);
  for (int i = 0; i < 256; ++i) sub[i] = 1e-40f * static_cast<float>(i - 100) / 156.0f;
  constexpr bool on_host = Kokkos::SpaceAccessibility<TEST_EXECSPACE, Kokkos::HostSpace>::accessible;
  bool const flushed = !on_host || (fp::flush_denormals() && fp::can_flush_denormals());
  for (auto d : {storage::Dtype::fp16, storage::Dtype::int8}) {
    auto r = roundtrip(d, sub);
    float const m = block_max(sub, 0);
    for (int i = 0; i < 256; ++i) {
      ASSERT_TRUE(std::isfinite(r[i])) << storage::to_string(d) << " cell " << i;
      if (flushed) {
        EXPECT_EQ(r[i], 0.0f) << storage::to_string(d) << " cell " << i;
      } else {
        EXPECT_LE(std::abs(r[i] - sub[i]), m / 127.0) << storage::to_string(d) << " cell " << i;
      }
    }
  }
  if (on_host) {  // device code keeps its compiled mode
    fp::set_flush_denormals(false);
    for (auto d : {storage::Dtype::fp16, storage::Dtype::int8}) {
      auto r = roundtrip(d, sub);
      float const m = block_max(sub, 0);
      for (int i = 0; i < 256; ++i)
        EXPECT_LE(std::abs(r[i] - sub[i]), m / 127.0) << storage::to_string(d) << " unflushed, cell " << i;
    }
    fp::set_flush_denormals(true);
  }
  // Without the block scale fp16 would flush these to zero: check the scale keeps them.
  auto h = roundtrip(storage::Dtype::fp16, v);
  EXPECT_NE(h[400], 0.0f);
  // Exact half-way cases of the int8 rounding go to even codes.
  std::vector<float> ties = {127.0f, 0.5f, 1.5f, 2.5f, -0.5f, -1.5f};
  auto t = roundtrip(storage::Dtype::int8, ties);
  EXPECT_EQ(t[1], 0.0f);
  EXPECT_EQ(t[2], 2.0f);
  EXPECT_EQ(t[3], 2.0f);
  EXPECT_EQ(t[4], 0.0f);
  EXPECT_EQ(t[5], -2.0f);
}

KSWEEP_TEST(fast_divisor_is_exact) {
  // Ring indexing divides by the cells per shot with a multiply and shift: exact for all
  // 0 <= v < 2^31. Divisors around powers of two, odd ones, and the ring sizes seen in use.
  std::mt19937 gen(7);
  std::uniform_int_distribution<int> any(0, std::numeric_limits<int>::max());
  std::vector<int> divisors = {
      1,    2,     3,     5,     7,     255,     256,           257,
      3304, 99325, 65535, 65536, 65537, 1 << 20, (1 << 30) + 1, std::numeric_limits<int>::max()};
  for (int d : divisors) {
    storage::FastDivisor const f(d);
    std::vector<int> vs = {0, 1, d - 1, d, std::numeric_limits<int>::max(), std::numeric_limits<int>::max() - 1};
    for (int q : {1, 2, 1000, 123457})
      if (static_cast<long long>(q) * d < std::numeric_limits<int>::max()) {
        vs.push_back(q * d - 1);
        vs.push_back(q * d);
      }
    for (int i = 0; i < 20000; ++i) vs.push_back(any(gen));
    for (int v : vs) ASSERT_EQ(f.divide(v), v / d) << v << " / " << d;
  }
  EXPECT_THROW(storage::FastDivisor(0), ksweep::Error);
}

KSWEEP_TEST(codec_rejects_nan) {
  for (auto d : {storage::Dtype::fp32, storage::Dtype::fp16, storage::Dtype::bf16, storage::Dtype::int8}) {
    std::vector<float> v(300, 1.0f);
    v[270] = std::numeric_limits<float>::quiet_NaN();
    int bad = 0;
    roundtrip(d, v, &bad);
    EXPECT_EQ(bad, 1) << storage::to_string(d);
    v[270] = std::numeric_limits<float>::infinity();
    roundtrip(d, v, &bad);
    EXPECT_EQ(bad, 1) << storage::to_string(d);
  }
  // Through a store: a clear error.
  storage::StorageConfig cfg;
  storage::StepStore<float, TEST_EXECSPACE> st(TEST_EXECSPACE(), cfg, 10, 3);
  Kokkos::View<float*, mem> v("v", 10);
  Kokkos::deep_copy(v, std::numeric_limits<float>::quiet_NaN());
  st.put(0, v);
  try {
    st.finish_writes();
    FAIL() << "NaN was stored";
  } catch (Error const& e) {
    EXPECT_NE(std::string(e.what()).find("NaN"), std::string::npos) << e.what();
  }
}

KSWEEP_TEST(store_roundtrip_every_location) {
  for (auto loc : {"device", "host", "disk"}) {
    auto cfg = storage::make_storage_config("boundary", loc, "fp32", 3, "", true);
    int const steps = 10, n = 37;
    storage::StepStore<float, TEST_EXECSPACE> st(TEST_EXECSPACE(), cfg, n, steps);
    Kokkos::View<float*, mem> v("v", n);
    for (int s = 0; s < steps; ++s) {
      Kokkos::deep_copy(v, static_cast<float>(s + 1));
      st.put(s, v);
    }
    st.finish_writes();
    for (int s = steps - 1; s >= 0; --s) {
      st.get(s, v);
      auto h = test::to_host(v);
      for (int i = 0; i < n; ++i) ASSERT_EQ(h(i), static_cast<float>(s + 1)) << loc << " step " << s;
    }
  }
}

KSWEEP_TEST(storage_config_errors) {
  auto expect_error = [](auto f, std::string const& what) {
    try {
      f();
      ADD_FAILURE() << "no error for " << what;
    } catch (Error const& e) {
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
    }
  };
  expect_error([] { storage::make_storage_config("ckpt", "device", "fp32", 4, "", true); }, "ckpt");
  expect_error([] { storage::make_storage_config("full", "gpu", "fp32", 4, "", true); }, "device, host, disk");
  expect_error([] { storage::make_storage_config("full", "device", "fp8", 4, "", true); }, "fp32, fp16, bf16, int8");
  expect_error([] { storage::make_storage_config("full", "device", "fp32", 0, "", true); }, "transfer_interval = 0");
  expect_error([] { storage::make_storage_config("boundary", "disk", "fp32", 4, "/nonexistent/ksweep", true); },
               "/nonexistent/ksweep");
}

std::size_t entries(std::filesystem::path const& dir) {
  std::size_t n = 0;
  for (auto const& e : std::filesystem::directory_iterator(dir)) {
    (void)e;
    ++n;
  }
  return n;
}

KSWEEP_TEST(disk_store_failures_leave_nothing) {
  namespace fs = std::filesystem;
  fs::path const dir =
      fs::temp_directory_path() / ("ksweep-test-" + std::to_string(::getpid()) + "-" + TEST_EXECSPACE::name());
  fs::remove_all(dir);
  fs::create_directories(dir);
  using P = core::Propagator<float, 4, TEST_EXECSPACE>;
  using E = core::GradientEngine<float, 4, TEST_EXECSPACE>;
  int const nz = 20, nx = 30, nt = 200;
  P prop(TEST_EXECSPACE(), core::ModelGrid{nz, nx, 10.0}, core::PmlConfig{}, 1e-3, 2);
  auto v = test::smooth_model(nz, nx);
  prop.set_velocity(v.data());
  prop.set_survey(test::line_survey(2, nz, nx, 2, 3, 5));
  P::wavelet_view w("w", 2, 1, nt);
  test::fill_random(w, 3);
  P::record_view obs("obs", 2, nt, 5), syn("syn", 2, nt, 5);
  E::images_type img(nz, nx);

  // 1. A file-system error part way through the forward pass (an injected full disk).
  {
    auto cfg = storage::make_storage_config("boundary", "disk", "fp32", 8, dir.string(), true);
    E engine(prop, cfg);
    storage::StepStore<float, TEST_EXECSPACE> st(TEST_EXECSPACE(), cfg, 100, 50);
    st.disk()->fail_after(4000);
    EXPECT_TRUE(fs::exists(st.disk()->path()));
    Kokkos::View<float*, mem> r("r", 100);
    try {
      for (int s = 0; s < 50; ++s) st.put(s, r);
      st.finish_writes();
      ADD_FAILURE() << "the injected write failure was not reported";
    } catch (Error const& e) {
      EXPECT_NE(std::string(e.what()).find("No space left on device"), std::string::npos) << e.what();
    }
  }
  EXPECT_EQ(entries(dir), 0u) << "files left behind after an injected failure";

  // 2. A real write failure from the operating system: a file-size limit (EFBIG).
  {
    struct rlimit old {};
    ASSERT_EQ(getrlimit(RLIMIT_FSIZE, &old), 0);
    auto const old_handler = std::signal(SIGXFSZ, SIG_IGN);
    struct rlimit lim = old;
    lim.rlim_cur = 20000;
    ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &lim), 0);
    auto cfg = storage::make_storage_config("boundary", "disk", "fp32", 8, dir.string(), true);
    std::string msg;
    try {
      E engine(prop, cfg);
      engine.loss_and_gradient(w, obs, 1.0, img, syn);
    } catch (Error const& e) {
      msg = e.what();
    }
    setrlimit(RLIMIT_FSIZE, &old);
    std::signal(SIGXFSZ, old_handler);
    EXPECT_NE(msg.find("File too large"), std::string::npos) << "message: " << msg;
  }
  EXPECT_EQ(entries(dir), 0u) << "files left behind after a failed write";

  // 3. Success also removes the files.
  {
    auto cfg = storage::make_storage_config("boundary", "disk", "int8", 8, dir.string(), true);
    E engine(prop, cfg);
    engine.loss_and_gradient(w, obs, 1.0, img, syn);
  }
  EXPECT_EQ(entries(dir), 0u) << "files left behind after a successful run";
  fs::remove_all(dir);
}

}  // namespace
