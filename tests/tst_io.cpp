// The I/O layer of the ksweep program: configuration, Marmousi lookup and checks, HDF5 files.

#include <ksweep/core/config.hpp>
#include <ksweep/core/error.hpp>
#include <ksweep/io/config.hpp>
#include <ksweep/io/hdf5_io.hpp>
#include <ksweep/io/json_io.hpp>
#include <ksweep/io/velocity.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>

#include <unistd.h>

namespace {

using namespace ksweep::io;
namespace fs = std::filesystem;

template <class F>
void expect_error(F&& f, std::string const& needle) {
  try {
    f();
    ADD_FAILURE() << "no error; expected one mentioning '" << needle << "'";
  } catch (ksweep::Error const& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

struct TempDir {
  fs::path path = fs::temp_directory_path() / ("ksweep-io-" + std::to_string(::getpid()));
  TempDir() { fs::create_directories(path); }
  ~TempDir() { fs::remove_all(path); }
};

TEST(io, config_defaults_and_overrides) {
  Config c = config_from_string("[time]\nnt = 100\n",
                                {"time.nt=500", "model.source=marmousi", "shots.x_range=[0.2,0.8]", "propagator.free_surface=true"});
  EXPECT_EQ(c.time.nt, 500);
  EXPECT_EQ(c.model.source, "marmousi");
  EXPECT_DOUBLE_EQ(c.shots.x_range[0], 0.2);
  EXPECT_TRUE(c.propagator.free_surface);
  EXPECT_EQ(c.propagator.order, 4);  // default
  auto const sx = shot_x_positions(config_from_string("", {}), 681);
  ASSERT_EQ(sx.size(), 20u);
  EXPECT_EQ(sx.front(), 68);
  EXPECT_EQ(sx.back(), 612);
  auto const rx = receiver_x_positions(config_from_string("", {}), 681);
  ASSERT_EQ(rx.size(), 200u);
  EXPECT_EQ(rx.front(), 0);
  EXPECT_EQ(rx.back(), 680);
}

TEST(io, config_errors_name_key_and_limit) {
  expect_error([] { config_from_string("[time]\ndtt = 1\n", {}); }, "dtt");
  expect_error([] { config_from_string("[timing]\ndt = 1\n", {}); }, "timing");
  expect_error([] { config_from_string("[time]\nnt = 2.5\n", {}); }, "time.nt");
  expect_error([] { config_from_string("", {"time.dt=-1"}); }, "time.dt");
  expect_error([] { config_from_string("", {"shots.x_range=[0.9,0.1]"}); }, "x_range");
  expect_error([] { config_from_string("", {"propagator.order=5"}); }, "2, 4, 6, 8");
  expect_error([] { config_from_string("", {"storage.dtype=fp8"}); }, "fp8");
  expect_error([] { config_from_string("", {"time.nt"}); }, "time.nt");
  expect_error([] { config_from_string("[time\n", {}); }, "");
  expect_error([] { load_config("/nonexistent/config.toml", {}); }, "/nonexistent/config.toml");
}

TEST(io, marmousi_lookup_and_checks) {
  // Found through the documented lookup order (../shared/marmousi next to the source tree).
  Config c = config_from_string("", {});
  VelocityModel m;
  try {
    m = load_velocity(c.model);
  } catch (ksweep::Error const& e) {
    GTEST_SKIP() << "Marmousi data not available here: " << e.what();
  }
  EXPECT_EQ(m.nz, 141);
  EXPECT_EQ(m.nx, 681);
  EXPECT_DOUBLE_EQ(m.dh, 25.0);
  auto const [lo, hi] = std::minmax_element(m.vp.begin(), m.vp.end());
  EXPECT_NEAR(*lo, 1028.0, 0.01);
  EXPECT_FLOAT_EQ(*hi, 4700.0f);
  EXPECT_FLOAT_EQ(m.vp[0], 1500.0f);  // water
  auto const crop = load_velocity(config_from_string("[model]\ncrop_z=[10,50]\ncrop_x=[100,300]\n", {}).model);
  EXPECT_EQ(crop.nz, 40);
  EXPECT_EQ(crop.nx, 200);
  EXPECT_EQ(crop.vp[0], m.vp[10 * 681 + 100]);
  expect_error([] { load_velocity(config_from_string("", {"model.crop_z=[0,500]"}).model); }, "crop_z");
  // A copy of the file with one value changed fails the checksum.
  TempDir t;
  fs::path const src = find_marmousi_file("marmousi_vp_nz122_nx384_dx24.f32");
  fs::copy_file(src, t.path / "marmousi_vp_nz122_nx384_dx24.f32");
  {
    std::fstream f(t.path / "marmousi_vp_nz122_nx384_dx24.f32", std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(400);
    float const x = 1234.0f;
    f.write(reinterpret_cast<char const*>(&x), 4);
  }
  ::setenv("KSWEEP_MARMOUSI_DIR", t.path.c_str(), 1);
  expect_error([] { load_velocity(config_from_string("", {"model.source=marmousi", "model.decimate=1"}).model); }, "5b0db7c3");
  ::unsetenv("KSWEEP_MARMOUSI_DIR");
}

TEST(io, raw_model_checks) {
  TempDir t;
  std::vector<float> v(12, 2000.f);
  v[7] = -1.f;
  {
    std::ofstream f(t.path / "bad.f32", std::ios::binary);
    f.write(reinterpret_cast<char const*>(v.data()), 48);
  }
  std::string const path = "model.source=\"" + (t.path / "bad.f32").string() + "\"";
  expect_error([&] { load_velocity(config_from_string("", {path, "model.nz=3", "model.nx=4", "model.dh=10", "model.decimate=1"}).model); },
               "-1");
  expect_error([&] { load_velocity(config_from_string("", {path, "model.nz=5", "model.nx=4", "model.dh=10", "model.decimate=1"}).model); },
               "48");
}

TEST(io, hdf5_round_trips_and_errors) {
#if KSWEEP_ENABLE_HDF5
  TempDir t;
  RecordsFile r;
  r.shots = 3;
  r.nt = 50;
  r.receivers = 7;
  r.dt = 0.002;
  r.dh = 25;
  r.order = 4;
  r.freq = 5;
  r.delay = 0.2;
  r.nz = 141;
  r.nx = 681;
  r.data.resize(3 * 50 * 7);
  for (std::size_t i = 0; i < r.data.size(); ++i) r.data[i] = static_cast<float>(i) * 0.5f;
  r.src_z = {2, 2, 2};
  r.src_x = {10, 300, 600};
  r.rec_z.assign(7, 4);
  r.rec_x = {0, 100, 200, 300, 400, 500, 680};
  write_records(t.path / "rec.h5", r);
  auto const rr = read_records(t.path / "rec.h5");
  EXPECT_EQ(rr.data, r.data);
  EXPECT_EQ(rr.src_x, r.src_x);
  EXPECT_EQ(rr.rec_x, r.rec_x);
  EXPECT_EQ(rr.order, 4);
  EXPECT_DOUBLE_EQ(rr.dt, 0.002);
  std::vector<float> vp(6, 1500.f);
  write_model(t.path / "model.h5", vp, 2, 3, 12.5);
  auto const m = read_model(t.path / "model.h5");
  EXPECT_EQ(m.vp, vp);
  EXPECT_DOUBLE_EQ(m.dh, 12.5);
  expect_error([&] { read_records(t.path / "nope.h5"); }, "nope.h5");
  {
    std::ofstream f(t.path / "corrupt.h5", std::ios::binary);
    f << "\x89HDF\r\n\x1a\n garbage";
  }
  expect_error([&] { read_records(t.path / "corrupt.h5"); }, "corrupt.h5");
  expect_error([&] { read_records(t.path / "model.h5"); }, "model.h5");
  expect_error([&] { write_model(t.path / "nodir" / "model.h5", vp, 2, 3, 12.5); }, "nodir");
  // No temporary files are left by failed or successful writes.
  for (auto const& e : fs::directory_iterator(t.path))
    EXPECT_EQ(e.path().string().find(".tmp"), std::string::npos) << e.path();
#else
  GTEST_SKIP() << "built without HDF5";
#endif
}

TEST(io, json_atomic) {
  TempDir t;
  write_json_atomic(t.path / "a.json", config_to_json(config_from_string("", {"fwi.iterations=3"})));
  EXPECT_EQ(read_json(t.path / "a.json")["fwi"]["iterations"], 3);
}

}  // namespace
