// The I/O layer of the ksweep program: configuration, Marmousi lookup and checks, HDF5 files.

#include <ksweep/base/config.hpp>
#include <ksweep/base/error.hpp>
#include <ksweep/io/atomic_file.hpp>
#include <ksweep/io/checkpoint.hpp>
#include <ksweep/io/config.hpp>
#include <ksweep/io/hdf5_io.hpp>
#include <ksweep/io/json_io.hpp>
#include <ksweep/io/keys.hpp>
#include <ksweep/io/resample.hpp>
#include <ksweep/io/segy.hpp>
#include <ksweep/io/survey.hpp>
#include <ksweep/io/velocity.hpp>
#include <ksweep/io/wavelet.hpp>

#include <gtest/gtest.h>
#include <segyio/segy.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <random>
#include <set>
#include <sstream>
#include <string>

#include <unistd.h>

namespace {

using namespace ksweep::io;
namespace fs = std::filesystem;

/// Order-4 records of shots x nt x receivers on an nz x nx grid with data i / 2, sources at
/// depth 2 spread along x, receivers at depth 4 over the whole width.
RecordsFile test_records(int shots, int nt, int receivers, int nz, int nx, double dt, double dh) {
  RecordsFile r;
  r.shots = shots;
  r.nt = nt;
  r.receivers = receivers;
  r.dt = dt;
  r.dh = dh;
  r.order = 4;
  r.nz = nz;
  r.nx = nx;
  r.data.resize(static_cast<std::size_t>(shots) * nt * receivers);
  for (std::size_t i = 0; i < r.data.size(); ++i) r.data[i] = static_cast<float>(i) * 0.5f;
  for (int s = 0; s < shots; ++s) {
    r.src_pos.push_back({2 * dh, (s + 1) * nx / (shots + 1) * dh, 0.0});
    r.rec_count.push_back(receivers);
    for (int i = 0; i < receivers; ++i)
      r.rec_pos.push_back({4 * dh, i * (nx - 1) / std::max(receivers - 1, 1) * dh, 0.0});
  }
  return r;
}

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
  Config c = config_from_string("[time]\nnt = 100\n", {"time.nt=500", "model.source=marmousi",
                                                       "shots.x_range=[0.2,0.8]", "propagator.free_surface=true"});
  EXPECT_EQ(c.time.nt, 500);
  EXPECT_EQ(c.model.source, "marmousi");
  EXPECT_DOUBLE_EQ(c.shots.x_range[0], 0.2);
  EXPECT_TRUE(c.propagator.free_surface);
  EXPECT_EQ(c.propagator.order, 4);  // default
  // The damping profiles' velocity: 0 (the model's maximum) by default, recorded only when set.
  EXPECT_EQ(c.propagator.pml_velocity, 0.0);
  EXPECT_FALSE(config_to_json(c)["propagator"].contains("pml_velocity"));
  Config const pv = config_from_string("[propagator]\npml_velocity = 4500.0\n", {});
  EXPECT_DOUBLE_EQ(pv.propagator.pml_velocity, 4500.0);
  EXPECT_DOUBLE_EQ(config_to_json(pv)["propagator"]["pml_velocity"].get<double>(), 4500.0);
  // The layer's chain rule: off by default, recorded only when on.
  EXPECT_FALSE(c.storage.layer_chain);
  EXPECT_FALSE(config_to_json(c)["storage"].contains("layer_chain"));
  Config const lc = config_from_string("[storage]\nlayer_chain = true\n", {});
  EXPECT_TRUE(lc.storage.layer_chain);
  EXPECT_TRUE(config_to_json(lc)["storage"]["layer_chain"].get<bool>());
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
  expect_error([] { config_from_string("", {"propagator.pml_velocity=-1500"}); }, "propagator.pml_velocity");
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
  expect_error(
      [] {
        load_velocity(config_from_string("", {"model.source=marmousi", "model.decimate=1"}).model);
      },
      "5b0db7c3");
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
  expect_error(
      [&] {
        load_velocity(
            config_from_string("", {path, "model.nz=3", "model.nx=4", "model.dh=10", "model.decimate=1"}).model);
      },
      "-1");
  expect_error(
      [&] {
        load_velocity(
            config_from_string("", {path, "model.nz=5", "model.nx=4", "model.dh=10", "model.decimate=1"}).model);
      },
      "48");
}

TEST(io, hdf5_round_trips_and_errors) {
#if KSWEEP_ENABLE_HDF5
  TempDir t;
  RecordsFile r = test_records(3, 50, 7, 141, 681, 0.002, 25);
  r.freq = 5;
  r.delay = 0.2;
  write_records(t.path / "rec.h5", r);
  auto const rr = read_records(t.path / "rec.h5");
  EXPECT_EQ(rr.data, r.data);
  EXPECT_EQ(rr.src_pos, r.src_pos);
  EXPECT_EQ(rr.rec_pos, r.rec_pos);
  EXPECT_EQ(rr.rec_count, r.rec_count);
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

// --- Reliability: atomic writes, checkpoints, resume rules, non-finite data ----------------

std::string slurp(fs::path const& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream os;
  os << in.rdbuf();
  return os.str();
}

void spit(fs::path const& p, std::string const& bytes) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out << bytes;
}

bool has_tmp(fs::path const& dir) {
  for (auto const& e : fs::recursive_directory_iterator(dir))
    if (e.path().extension() == ".tmp") return true;
  return false;
}

Checkpoint sample_checkpoint(std::size_t n, int iteration = 2) {
  Checkpoint c;
  c.iteration = iteration;
  std::mt19937_64 g(5);
  std::ostringstream os;
  os << g;
  c.rng = os.str();
  for (int i = 1; i <= iteration; ++i) c.history.push_back({{"iteration", i}, {"loss", 1.0 / i}});
  c.run = {{"config", config_to_json(config_from_string("", {}))}, {"data", {{"model_sha256", "abc"}}}};
  for (std::size_t i = 0; i < n; ++i) {
    c.model.push_back(1500.0f + static_cast<float>(i));
    c.m.push_back(-0.5f * static_cast<float>(i));
    c.v.push_back(0.25f * static_cast<float>(i));
  }
  return c;
}

// Rewrites the checkpoint at `p` with its metadata changed by `edit` and a valid checksum, as a
// hand edit by someone who knows the format would.
template <class Edit>
void edit_checkpoint(fs::path const& p, Edit&& edit) {
  std::string b = slurp(p);
  std::uint64_t len = 0;
  std::memcpy(&len, b.data() + 8, 8);
  auto meta = nlohmann::json::parse(b.substr(16, len));
  std::string arrays = b.substr(16 + len, b.size() - 16 - len - 71);
  edit(meta, arrays);
  std::string const js = meta.dump();
  std::uint64_t const nl = js.size();
  std::string out(b.data(), 8);
  out.append(reinterpret_cast<char const*>(&nl), 8);
  out += js;
  out += arrays;
  out += "SHA256:" + sha256_hex(out.data(), out.size());
  spit(p, out);
}

TEST(io, atomic_write_failure_keeps_previous_file) {
  TempDir t;
  auto const p = t.path / "a.json";
  write_file_atomic(p, "first");
  EXPECT_EQ(slurp(p), "first");
  ::setenv("KSWEEP_FAULT_WRITES", "0", 1);
  expect_error([&] { write_file_atomic(p, "second"); }, "ENOSPC");
  expect_error([&] { write_json_atomic(p, {{"x", 1}}); }, "no space left");
  expect_error([&] { write_model(t.path / "m.h5", std::vector<float>(6, 1.0f), 2, 3, 10.0); }, "m.h5");
  ::unsetenv("KSWEEP_FAULT_WRITES");
  EXPECT_EQ(slurp(p), "first");
  EXPECT_FALSE(fs::exists(t.path / "m.h5"));
  EXPECT_FALSE(has_tmp(t.path));
  expect_error([&] { write_file_atomic(t.path / "missing" / "x", "y"); }, "missing");
  EXPECT_NE(describe_errno(EFBIG).find("file-size limit"), std::string::npos);
  EXPECT_NE(describe_errno(ENOSPC).find("no space left"), std::string::npos);
}

TEST(io, checkpoint_round_trip_and_checksum) {
  TempDir t;
  auto const p = t.path / "checkpoint.bin";
  auto const c = sample_checkpoint(12);
  write_checkpoint(p, c);
  auto const r = read_checkpoint(p, 12);
  EXPECT_EQ(r.iteration, 2);
  EXPECT_EQ(r.rng, c.rng);
  EXPECT_EQ(r.history, c.history);
  EXPECT_EQ(r.run, c.run);
  EXPECT_EQ(r.model, c.model);
  EXPECT_EQ(r.m, c.m);
  EXPECT_EQ(r.v, c.v);
  EXPECT_FALSE(has_tmp(t.path));
  std::string const good = slurp(p);
  // Any flipped byte, anywhere, is caught by the checksum.
  for (std::size_t at : {std::size_t(3), std::size_t(20), good.size() / 2, good.size() - 80, good.size() - 5}) {
    std::string b = good;
    b[at] = static_cast<char>(b[at] ^ 0x10);
    spit(p, b);
    try {
      read_checkpoint(p, 12);
      ADD_FAILURE() << "a flipped byte at " << at << " was not detected";
    } catch (ksweep::Error const& e) {
      EXPECT_NE(std::string(e.what()).find(p.string()), std::string::npos) << e.what();
    }
  }
  spit(p, good.substr(0, good.size() - 100));
  expect_error([&] { read_checkpoint(p, 12); }, "corrupt");
  spit(p, good.substr(0, 10));
  expect_error([&] { read_checkpoint(p, 12); }, "not a ksweep checkpoint");
  spit(p, "KSWCKPT1" + good.substr(8));
  expect_error([&] { read_checkpoint(p, 12); }, "older ksweep");
  spit(p, good);
  expect_error([&] { read_checkpoint(p, 13); }, "holds a model of 12 cells");
  expect_error([&] { read_checkpoint(t.path / "none.bin", 12); }, "no checkpoint at");
}

TEST(io, checkpoint_contents_out_of_range) {
  TempDir t;
  auto const p = t.path / "checkpoint.bin";
  auto check = [&](auto edit, std::string const& needle) {
    write_checkpoint(p, sample_checkpoint(12));
    edit_checkpoint(p, edit);
    expect_error([&] { read_checkpoint(p, 12); }, needle);
    try {
      read_checkpoint(p, 12);
    } catch (ksweep::Error const& e) {
      std::string const w = e.what();
      EXPECT_NE(w.find(p.string()), std::string::npos) << w;
      EXPECT_EQ(w.find("[json.exception"), std::string::npos) << "raw library text: " << w;
    }
  };
  check([](nlohmann::json& m, std::string&) { m["iteration"] = -3; }, "outside the valid range");
  check([](nlohmann::json& m, std::string&) { m["iteration"] = 5; }, "history of 2");
  check([](nlohmann::json& m, std::string&) { m["iteration"] = "two"; }, "'iteration' or has one of the wrong type");
  check([](nlohmann::json& m, std::string&) { m.erase("rng"); }, "lacks the field 'rng'");
  check([](nlohmann::json& m, std::string&) { m["rng"] = "not a generator"; }, "random generator");
  check([](nlohmann::json& m, std::string&) { m["history"][1]["loss"] = nullptr; }, "history entry 2");
  check([](nlohmann::json& m, std::string&) { m.erase("run"); }, "lacks the field 'run'");
  check(
      [](nlohmann::json&, std::string& a) {
        float const nan = std::numeric_limits<float>::quiet_NaN();
        std::memcpy(a.data() + 4 * 3, &nan, 4);
      },
      "out-of-range model value nan at cell 3");
  check(
      [](nlohmann::json&, std::string& a) {
        float const neg = -10.0f;
        std::memcpy(a.data(), &neg, 4);
      },
      "velocities must be finite and > 0");
  check(
      [](nlohmann::json&, std::string& a) {
        float const inf = std::numeric_limits<float>::infinity();
        std::memcpy(a.data() + 4 * 12 + 4, &inf, 4);
      },
      "Adam first moment");
  check(
      [](nlohmann::json&, std::string& a) {
        float const neg = -1.0f;
        std::memcpy(a.data() + 4 * 24 + 8, &neg, 4);
      },
      "Adam second moment");
  // Metadata that is not JSON at all (but checksummed): named, without the library's text.
  write_checkpoint(p, sample_checkpoint(12));
  {
    std::string b = slurp(p);
    b[17] = '#';
    std::string body = b.substr(0, b.size() - 71);
    spit(p, body + "SHA256:" + sha256_hex(body.data(), body.size()));
  }
  expect_error([&] { read_checkpoint(p, 12); }, "metadata is not valid JSON");
}

TEST(io, resume_changes_name_keys_and_values) {
  auto const a = config_to_json(config_from_string("", {}));
  nlohmann::json saved = {{"config", a}, {"data", {{"model_sha256", "x"}}}};
  EXPECT_TRUE(resume_changes(saved, saved).empty());
  auto const b = config_to_json(config_from_string(
      "", {"fwi.lr=10", "fwi.beta1=0.5", "shots.count=7", "receivers.count=9", "fwi.seed=3", "fwi.batch=4",
           "model.crop_x=[0, 100]", "time.dt=0.001", "storage.dtype=fp16", "fwi.iterations=99", "fwi.figures_every=0",
           "fwi.save_models=false", "storage.location=disk", "fwi.checkpoint_every=2"}));
  nlohmann::json now = {{"config", b}, {"data", {{"model_sha256", "y"}}}};
  auto const ch = resume_changes(saved, now);
  std::vector<std::string> keys;
  for (auto const& c : ch) keys.push_back(c.key);
  for (char const* k : {"fwi.lr", "fwi.beta1", "shots.count", "receivers.count", "fwi.seed", "fwi.batch",
                        "model.crop_x", "time.dt", "storage.dtype", "data.model_sha256"})
    EXPECT_NE(std::find(keys.begin(), keys.end(), k), keys.end()) << k;
  for (char const* k :
       {"fwi.iterations", "fwi.figures_every", "fwi.save_models", "storage.location", "fwi.checkpoint_every"})
    EXPECT_EQ(std::find(keys.begin(), keys.end(), k), keys.end()) << k;
  auto const lr = std::find_if(ch.begin(), ch.end(), [](auto const& c) { return c.key == "fwi.lr"; });
  EXPECT_EQ(lr->before, "25.0");
  EXPECT_EQ(lr->after, "10.0");
}

TEST(io, non_finite_records_are_found_when_read) {
  TempDir t;
  RecordsFile r = test_records(2, 5, 3, 8, 8, 0.01, 10);
  r.data[(1 * 5 + 3) * 3 + 2] = std::numeric_limits<float>::quiet_NaN();
  write_records(t.path / "obs.h5", r);
  expect_error([&] { read_records(t.path / "obs.h5"); }, "shot 1, time sample 3 (0.03 s), receiver 2");
  r.data[(1 * 5 + 3) * 3 + 2] = 0;
  r.data[4] = -std::numeric_limits<float>::infinity();
  write_records(t.path / "obs.h5", r);
  expect_error([&] { read_records(t.path / "obs.h5"); }, "non-finite sample (-inf) at shot 0, time sample 1");
}

TEST(io, shown_values_are_escaped_and_bounded) {
  using ksweep::shown;
  EXPECT_EQ(shown("plain/path.h5"), "plain/path.h5");
  EXPECT_EQ(shown(std::string("a\0b", 3)), "a\\x00b");
  EXPECT_EQ(shown("tab\there"), "tab\\x09here");
  EXPECT_EQ(shown("bad\xff\xfe"), "bad\\xff\\xfe");
  EXPECT_EQ(shown("caf\xc3\xa9"), "caf\xc3\xa9");       // UTF-8 is kept
  EXPECT_EQ(shown("\xc0\xaf"), "\\xc0\\xaf");           // overlong form
  EXPECT_EQ(shown("\xed\xa0\x80"), "\\xed\\xa0\\x80");  // surrogate
  std::string const long_value(200000, 'a');
  std::string const s = shown(long_value);
  EXPECT_LT(s.size(), 300u);
  EXPECT_NE(s.find("200000 bytes in all"), std::string::npos);
  std::string utf8;
  for (int i = 0; i < 1000; ++i) utf8 += "\xc3\xa9";
  std::string const u = shown(utf8);
  EXPECT_EQ(ksweep::first_bad_text_byte(u), std::string::npos) << "a shortened value is cut inside a character";
  EXPECT_EQ(ksweep::first_bad_text_byte(std::string("ok\0", 3)), 2u);
}

TEST(io, config_strings_must_be_text_and_keys_given_are_recorded) {
  EXPECT_THROW(config_from_string("[model]\nsource = \"a\\u0000b.h5\"\n", {}), ksweep::Error);
  try {
    config_from_string("", {std::string("storage.disk_dir=/tmp/x\xff")});
    ADD_FAILURE() << "a disk_dir that is not UTF-8 was accepted";
  } catch (ksweep::Error const& e) {
    EXPECT_NE(std::string(e.what()).find("not UTF-8"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("\\xff"), std::string::npos) << e.what();
  }
  auto const c = config_from_string("[shots]\ncount_y = 1\n", {"receivers.y_range=[0.2, 0.8]"});
  EXPECT_TRUE(c.is_given("shots.count_y"));
  EXPECT_TRUE(c.is_given("receivers.y_range"));
  EXPECT_FALSE(c.is_given("shots.y_range"));
  EXPECT_THROW(check_dimension_keys(c, false), ksweep::Error);
  EXPECT_NO_THROW(check_dimension_keys(c, true));
  EXPECT_NO_THROW(check_dimension_keys(config_from_string("", {}), false));
  // The record must reach the wavelet's peak.
  EXPECT_THROW(config_from_string("[time]\nnt = 1\n", {}), ksweep::Error);
  EXPECT_THROW(config_from_string("[time]\ndt = 1e-6\nnt = 500\n", {}), ksweep::Error);
  EXPECT_THROW(config_from_string("[fwi]\nvmin = 0\nvmax = 0\n", {}), ksweep::Error);
}

TEST(io, checkpoint_header_is_read_without_the_arrays) {
  fs::path const dir = fs::temp_directory_path() / ("ksweep_ckh_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  Checkpoint c;
  c.iteration = 2;
  c.rng = "1 2 3";
  c.history = nlohmann::json::array({{{"iteration", 1}, {"loss", 1.0}}, {{"iteration", 2}, {"loss", 0.5}}});
  c.model.assign(100, 2000.0f);
  c.m.assign(100, 0.0f);
  c.v.assign(100, 0.0f);
  c.run = {{"config", {{"fwi", {{"lr", 20}}}}}};
  auto const path = dir / "checkpoint.bin";
  write_checkpoint(path, c);
  auto const h = read_checkpoint_header(path);
  EXPECT_EQ(h.n, 100u);
  EXPECT_EQ(h.iteration, 2);
  EXPECT_EQ(h.run["config"]["fwi"]["lr"], 20);
  EXPECT_THROW(read_checkpoint(path, 99), ksweep::Error);
  fs::resize_file(path, fs::file_size(path) + (std::uintmax_t(1) << 32));  // sparse, 4 GiB more
  try {
    read_checkpoint_header(path);
    ADD_FAILURE() << "a padded checkpoint was accepted";
  } catch (ksweep::Error const& e) {
    EXPECT_NE(std::string(e.what()).find("truncated or corrupt"), std::string::npos) << e.what();
  }
  { std::ofstream(path, std::ios::trunc); }
  try {
    read_checkpoint_header(path);
    ADD_FAILURE() << "an empty checkpoint was accepted";
  } catch (ksweep::Error const& e) {
    EXPECT_NE(std::string(e.what()).find("is empty (0 bytes)"), std::string::npos) << e.what();
  }
  fs::remove_all(dir);
}

}  // namespace

namespace {

/// Random records (sign, magnitude, subnormal-free) with `ny` > 0 for 3D geometry.
RecordsFile random_records(int ny) {
  RecordsFile r = test_records(3, 37, 5, 40, 60, 0.002, 12.5);
  std::mt19937 gen(7);
  std::normal_distribution<float> d(0.0f, 3.0f);
  for (auto& v : r.data) v = d(gen);
  r.freq = 6.5;
  r.delay = 0.15;
  r.ny = ny;
  for (int s = 0; s < r.shots && ny > 0; ++s) r.src_pos[s].y = (1 + s) * r.dh;
  for (int s = 0; s < r.shots && ny > 0; ++s)
    for (int k = 0; k < r.receivers; ++k) r.rec_pos[s * r.receivers + k].y = (ny - 1 - k % ny) * r.dh;
  return r;
}

void expect_same_records(RecordsFile const& a, RecordsFile const& b) {
  EXPECT_EQ(a.shots, b.shots);
  EXPECT_EQ(a.nt, b.nt);
  EXPECT_EQ(a.receivers, b.receivers);
  EXPECT_DOUBLE_EQ(a.dt, b.dt);
  EXPECT_EQ(a.src_pos, b.src_pos);
  EXPECT_EQ(a.rec_count, b.rec_count);
  for (int s = 0; s < a.shots; ++s)  // padding slots are not read
    for (int k = 0; k < a.rec_count[s]; ++k)
      EXPECT_EQ(a.rec_pos[s * a.receivers + k], b.rec_pos[s * b.receivers + k]) << s << " " << k;
  EXPECT_EQ(a.data.size(), b.data.size());
  EXPECT_EQ(0, std::memcmp(a.data.data(), b.data.data(), a.data.size() * sizeof(float)));
}

/// Overwrites `n` bytes at `offset` of a file.
void patch(fs::path const& p, std::streamoff offset, std::string const& bytes) {
  std::fstream f(p, std::ios::in | std::ios::out | std::ios::binary);
  f.seekp(offset);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

std::string be16(int v) { return std::string{static_cast<char>((v >> 8) & 0xff), static_cast<char>(v & 0xff)}; }
std::string be32(std::int32_t v) {
  return std::string{static_cast<char>((v >> 24) & 0xff), static_cast<char>((v >> 16) & 0xff),
                     static_cast<char>((v >> 8) & 0xff), static_cast<char>(v & 0xff)};
}

}  // namespace

// A wavelet from a file (wavelet.source = PATH): HDF5 (as ksweep fwi writes wavelet.h5), the
// first trace of a SEG-Y file, or "time amplitude" text; on its own axis the samples come back
// as written; on another they are resampled (band-limited) and scaled by (dt / its dt)^2, the
// per-step amplitude of the same source. Bad files are refused naming the file and the line.
TEST(io, wavelet_files_in_three_formats) {
  TempDir t;
  int const nt = 400;
  double const dt = 0.002;
  auto gabor = [](double time) {
    double const tau = time - 0.3;
    return std::sin(2 * M_PI * 8.0 * tau) * std::exp(-(tau / 0.08) * (tau / 0.08));
  };
  std::vector<double> w(nt);
  for (int i = 0; i < nt; ++i) w[static_cast<std::size_t>(i)] = gabor(i * dt);
  fs::path const h5 = t.path / "wavelet.h5";
  write_wavelets(h5, {{"wavelet", w}, {"reference", std::vector<double>(nt, 1.0)}}, dt);
  EXPECT_EQ(read_wavelet(h5, dt, nt), w);
  fs::path const txt = t.path / "wavelet.txt";
  {
    std::ofstream f(txt);
    f << "# time, amplitude\n";
    f.precision(17);
    for (int i = 0; i < nt; ++i) f << i * dt << ", " << w[static_cast<std::size_t>(i)] << "\n";
  }
  auto const from_text = read_wavelet(txt, dt, nt);
  for (int i = 0; i < nt; ++i) EXPECT_DOUBLE_EQ(from_text[static_cast<std::size_t>(i)], w[static_cast<std::size_t>(i)]);
  RecordsFile r;
  r.shots = 1, r.receivers = 1, r.nt = nt, r.dt = dt, r.dh = 10.0, r.order = 4;
  r.src_pos = {{0.0, 100.0, 0.0}};
  r.rec_pos = {{0.0, 100.0, 0.0}};
  r.rec_count = {1};
  r.data.assign(w.begin(), w.end());
  fs::path const sgy = t.path / "wavelet.sgy";
  write_records_segy(sgy, r);
  auto const from_segy = read_wavelet(sgy, dt, nt);
  for (int i = 0; i < nt; ++i)
    EXPECT_EQ(from_segy[static_cast<std::size_t>(i)],
              static_cast<double>(static_cast<float>(w[static_cast<std::size_t>(i)])));
  // At half the interval: the analytic wavelet, a quarter per step (float rounding and the
  // kernel's stop band: 1e-4 of the peak).
  auto const fine = read_wavelet(h5, dt / 2, 2 * nt - 1);
  for (int i = 100; i < 2 * nt - 100; ++i)
    EXPECT_NEAR(fine[static_cast<std::size_t>(i)], 0.25 * gabor(i * dt / 2), 1e-4) << i;
  // Bad files.
  auto refused = [&](fs::path const& p, std::string const& needle) {
    try {
      (void)read_wavelet(p, dt, nt);
      ADD_FAILURE() << p << " was accepted";
    } catch (ksweep::Error const& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  {
    std::ofstream(t.path / "one.txt") << "0 1.0\n";
    std::ofstream(t.path / "word.txt") << "0 1.0\n0.002 one\n";
    std::ofstream(t.path / "late.txt") << "0.1 1.0\n0.2 0.5\n";
    std::ofstream(t.path / "silent.txt") << "0 0\n0.002 0\n";
  }
  refused(t.path / "one.txt", "has 1 samples");
  refused(t.path / "word.txt", "line 2: \"0.002 one\" is not two finite numbers");
  refused(t.path / "late.txt", "must start at 0");
  refused(t.path / "silent.txt", "every sample is 0");
  refused(t.path / "missing.txt", "file not found");
  write_model(t.path / "model.h5", std::vector<float>(6, 1.f), 2, 3, 10.0);
  refused(t.path / "model.h5", "has no dataset 'wavelet'");
}

// model.density from a file: raw, HDF5 or SEG-Y, always in kg/m^3 (model.units is the
// velocity's: a km/s velocity does not scale the density), a file in g/cm^3 refused.
TEST(io, density_files_are_kg_per_m3_whatever_the_velocity_units) {
  TempDir t;
  int const nz = 4, nx = 5;
  std::vector<float> vp(nz * nx), rho(nz * nx);
  for (int i = 0; i < nz * nx; ++i)
    vp[static_cast<std::size_t>(i)] = 1.5f + 0.01f * i, rho[static_cast<std::size_t>(i)] = 1000.f + i;
  auto raw = [&](fs::path const& p, std::vector<float> const& v) {
    std::ofstream f(p, std::ios::binary);
    f.write(reinterpret_cast<char const*>(v.data()), static_cast<std::streamsize>(v.size() * sizeof(float)));
  };
  raw(t.path / "vp.f32", vp);
  raw(t.path / "rho.f32", rho);
  write_segy_model(t.path / "rho.sgy", rho, nz, nx, 10.0);
  std::vector<float> grams(rho);
  for (auto& g : grams) g /= 1000.f;
  raw(t.path / "rho_g.f32", grams);
  for (char const* file : {"rho.f32", "rho.sgy"}) {
    Config const c = config_from_string(
        "", {"model.source=\"" + (t.path / "vp.f32").string() + "\"", "model.nz=4", "model.nx=5", "model.dh=10.0",
             "model.decimate=1", "model.units=\"km/s\"", "propagator.physics=\"acoustic_vd\"",
             "model.density=\"" + (t.path / file).string() + "\""});
    VelocityModel const v = load_velocity(c.model);
    EXPECT_FLOAT_EQ(v.vp[3], 1000.f * vp[3]);  // km/s
    EXPECT_EQ(load_density(c.model, v), rho) << file;
  }
  Config const c = config_from_string(
      "", {"model.source=\"" + (t.path / "vp.f32").string() + "\"", "model.nz=4", "model.nx=5", "model.dh=10.0",
           "model.decimate=1", "model.units=\"km/s\"", "propagator.physics=\"acoustic_vd\"",
           "model.density=\"" + (t.path / "rho_g.f32").string() + "\""});
  try {
    (void)load_density(c.model, load_velocity(c.model));
    ADD_FAILURE() << "a density in g/cm^3 was accepted";
  } catch (ksweep::Error const& e) {
    EXPECT_NE(std::string(e.what()).find("is the file in g/cm^3?"), std::string::npos) << e.what();
  }
}

// SEG-Y models in 3D: inlines along y, crosslines along x (trace header bytes 189, 193), read
// through model.source as any model (shape from the headers, values exact); a repeated
// (inline, crossline) is refused naming both traces.
TEST(io, segy_models_3d_by_inline_and_crossline) {
  TempDir t;
  int const nz = 3, ny = 4, nx = 5;
  std::vector<float> v(static_cast<std::size_t>(nz * ny * nx));
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = 1500.f + 7.f * static_cast<float>(i);
  fs::path const p = t.path / "model3d.sgy";
  write_segy_model(p, v, nz, nx, 12.5, ny);
  Config const c = config_from_string("", {"model.source=\"" + p.string() + "\"", "model.dh=12.5", "model.decimate=1"});
  VelocityModel const shape = model_shape(c.model);
  EXPECT_EQ(shape.nz, nz);
  EXPECT_EQ(shape.ny, ny);
  EXPECT_EQ(shape.nx, nx);
  VelocityModel const m = load_velocity(c.model);
  EXPECT_EQ(m.vp, v);
  // 2D files stay 2D: one trace per x.
  write_segy_model(t.path / "model2d.sgy", std::vector<float>(v.begin(), v.begin() + nz * nx), nz, nx, 12.5);
  EXPECT_EQ(segy_model_shape(t.path / "model2d.sgy", "test").ny, 0);
  // Trace 2 given trace 1's crossline (bytes 193-196, big-endian).
  {
    std::fstream f(p, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(3600 + (240 + 4 * nz) + 192);
    char const one[4] = {0, 0, 0, 1};
    f.write(one, 4);
  }
  try {
    (void)load_velocity(c.model);
    ADD_FAILURE() << "a repeated (inline, crossline) was accepted";
  } catch (ksweep::Error const& e) {
    EXPECT_NE(std::string(e.what()).find("trace 2 has (inline, crossline) = (1, 1) (bytes 189, 193), as trace 1 has"),
              std::string::npos)
        << e.what();
  }
}

TEST(io, segy_records_round_trip_both_byte_orders_2d_and_3d) {
  TempDir t;
  for (int ny : {0, 6})
    for (bool lsb : {false, true}) {
      RecordsFile const r = random_records(ny);
      fs::path const p = t.path / ("gathers_" + std::to_string(ny) + (lsb ? "_lsb" : "_msb") + ".sgy");
      write_records_segy(p, r, lsb);
      EXPECT_FALSE(fs::exists(p.string() + ".tmp"));
      EXPECT_EQ(fs::file_size(p), 3600u + static_cast<std::uintmax_t>(r.shots * r.receivers) * (240u + 4u * r.nt));
      SegyLayout const l = segy_layout(p, "test");
      EXPECT_EQ(l.little_endian, lsb);
      EXPECT_EQ(l.format, 5);
      RecordsFile const back = read_records_segy(p, r.dh, ny);
      expect_same_records(r, back);
      EXPECT_DOUBLE_EQ(back.freq, r.freq);  // from ksweep's line of the textual header
      EXPECT_DOUBLE_EQ(back.delay, r.delay);
      EXPECT_EQ(back.order, r.order);
      EXPECT_EQ(back.nz, r.nz);
      EXPECT_EQ(back.nx, r.nx);
      RecordsFile const head = read_records_segy(p, r.dh, ny, false);
      EXPECT_TRUE(head.data.empty());
      EXPECT_EQ(head.rec_pos, r.rec_pos);
    }
}

TEST(io, segy_trace_headers_hold_the_geometry_in_metres) {
  TempDir t;
  RecordsFile const r = random_records(0);
  fs::path const p = t.path / "g.segy";
  write_records_segy(p, r);
  // Read back with segyio's own header accessors: shot 2, receiver 4 (trace 2 * 5 + 3).
  segy_file* f = segy_open(p.c_str(), "rb");
  ASSERT_NE(f, nullptr);
  char bin[SEGY_BINARY_HEADER_SIZE], th[SEGY_TRACE_HEADER_SIZE];
  ASSERT_EQ(segy_binheader(f, bin), SEGY_OK);
  EXPECT_EQ(segy_format(bin), SEGY_IEEE_FLOAT_4_BYTE);
  EXPECT_EQ(segy_samples(bin), r.nt);
  int const trace = 1 * r.receivers + 3;
  ASSERT_EQ(segy_traceheader(f, trace, th, segy_trace0(bin), segy_trsize(SEGY_IEEE_FLOAT_4_BYTE, r.nt)), SEGY_OK);
  std::int32_t v = 0;
  auto get = [&](int field) {
    segy_get_field(th, field, &v);
    return v;
  };
  EXPECT_EQ(get(SEGY_TR_FIELD_RECORD), 2);
  EXPECT_EQ(get(SEGY_TR_NUMBER_ORIG_FIELD), 4);
  EXPECT_EQ(get(SEGY_TR_SOURCE_GROUP_SCALAR), -1000);
  EXPECT_EQ(get(SEGY_TR_SOURCE_X), static_cast<std::int32_t>(std::lround(r.src_pos[1].x * 1000)));
  EXPECT_EQ(get(SEGY_TR_GROUP_X), static_cast<std::int32_t>(std::lround(r.rec_pos[r.receivers + 3].x * 1000)));
  EXPECT_EQ(get(SEGY_TR_RECV_GROUP_ELEV), static_cast<std::int32_t>(std::lround(-r.rec_pos[r.receivers + 3].z * 1000)));
  EXPECT_EQ(get(SEGY_TR_SOURCE_DEPTH), static_cast<std::int32_t>(std::lround(r.src_pos[1].z * 1000)));
  EXPECT_EQ(get(SEGY_TR_SAMPLE_INTER), 2000);
  EXPECT_EQ(get(SEGY_TR_SAMPLE_COUNT), r.nt);
  segy_close(f);
}

TEST(io, segy_models_ibm_exact_and_ieee) {
  TempDir t;
  // IBM floats written with segyio, including values that are not binary fractions (the
  // Marmousi-II file stores km/s): decoded exactly, scaled in double and rounded once.
  int const nz = 5, nx = 3;
  std::vector<float> const vals = {1.5f, 4.7f,  1.028f, 2.25f, 3.3f, 1.0f, 4.0f, 0.5f,
                                   2.0f, 1.75f, 3.125f, 1.2f,  2.6f, 3.9f, 4.1f};
  fs::path const p = t.path / "ibm.segy";
  {
    segy_file* f = segy_open(p.c_str(), "w+b");
    ASSERT_NE(f, nullptr);
    std::string text(SEGY_TEXT_HEADER_SIZE, ' ');
    ASSERT_EQ(segy_write_textheader(f, 0, text.c_str()), SEGY_OK);
    char bin[SEGY_BINARY_HEADER_SIZE] = {};
    segy_set_bfield(bin, SEGY_BIN_SAMPLES, nz);
    segy_set_bfield(bin, SEGY_BIN_FORMAT, SEGY_IBM_FLOAT_4_BYTE);
    ASSERT_EQ(segy_write_binheader(f, bin), SEGY_OK);
    segy_set_format(f, SEGY_IBM_FLOAT_4_BYTE);
    for (int ix = 0; ix < nx; ++ix) {
      char th[SEGY_TRACE_HEADER_SIZE] = {};
      segy_set_field(th, SEGY_TR_SAMPLE_COUNT, nz);
      ASSERT_EQ(segy_write_traceheader(f, ix, th, 3600, 4 * nz), SEGY_OK);
      std::vector<float> col(nz);
      for (int iz = 0; iz < nz; ++iz) col[iz] = vals[iz * nx + ix];
      segy_from_native(SEGY_IBM_FLOAT_4_BYTE, nz, col.data());
      ASSERT_EQ(segy_writetrace(f, ix, col.data(), 3600, 4 * nz), SEGY_OK);
    }
    segy_close(f);
  }
  VelocityModel const m = read_segy_model(p, 10.0, 1000.0, "model.source");
  ASSERT_EQ(m.nz, nz);
  ASSERT_EQ(m.nx, nx);
  // segyio's IBM encoding of a float is exact (24-bit fraction, hex exponent) except for the
  // last one to three bits; the reference decodes the same bytes by hand.
  segy_file* f = segy_open(p.c_str(), "rb");
  ASSERT_NE(f, nullptr);
  for (int ix = 0; ix < nx; ++ix) {
    std::vector<unsigned char> raw(4 * nz);
    ASSERT_EQ(segy_readtrace(f, ix, raw.data(), 3600, 4 * nz), SEGY_OK);
    for (int iz = 0; iz < nz; ++iz) {
      unsigned char const* b = raw.data() + 4 * iz;
      double const frac = (b[1] << 16 | b[2] << 8 | b[3]) / 16777216.0;
      double const ref = (b[0] & 0x80 ? -1 : 1) * frac * std::pow(16.0, (b[0] & 0x7f) - 64);
      EXPECT_EQ(m.vp[iz * nx + ix], static_cast<float>(ref * 1000.0)) << iz << " " << ix;
      EXPECT_NEAR(m.vp[iz * nx + ix], vals[iz * nx + ix] * 1000.0, 1e-3 * vals[iz * nx + ix]);
    }
  }
  segy_close(f);
  // A model written by ksweep (IEEE) reads back bit for bit.
  fs::path const q = t.path / "model.sgy";
  write_segy_model(q, vals, nz, nx, 10.0);
  VelocityModel const back = read_segy_model(q, 10.0, 1.0, "model.source");
  EXPECT_EQ(back.vp, vals);
}

namespace {

/// A towed-streamer geometry: the spread moves with the source, shots have 4, 6 and 5 receivers,
/// positions off the grid (dh = 12.5 m; receivers 7.5 m deep every 6.25 m).
RecordsFile streamer_records(int ny) {
  RecordsFile r = random_records(ny);
  r.receivers = 6;
  r.rec_count = {4, 6, 5};
  r.data.assign(static_cast<std::size_t>(r.shots) * r.nt * r.receivers, 0.0f);
  r.rec_pos.clear();
  std::mt19937 gen(3);
  std::normal_distribution<float> d(0.0f, 2.0f);
  for (int s = 0; s < r.shots; ++s) {
    r.src_pos[s] = {5.0 + 0.25 * s, 100.0 + 37.5 * s, ny > 0 ? 20.0 + s : 0.0};
    for (int k = 0; k < r.receivers; ++k) {
      bool const live = k < r.rec_count[s];
      r.rec_pos.push_back({7.5, r.src_pos[s].x + 50.0 + 6.25 * (live ? k : 0), ny > 0 ? 31.25 : 0.0});
      for (int t = 0; t < r.nt && live; ++t)
        r.data[(static_cast<std::size_t>(s) * r.nt + t) * r.receivers + k] = d(gen);
    }
  }
  return r;
}

}  // namespace

TEST(io, moving_spreads_off_the_grid_round_trip_hdf5_and_segy) {
  TempDir t;
  for (int ny : {0, 6}) {
    RecordsFile const r = streamer_records(ny);
    EXPECT_FALSE(r.shared_spread());
    EXPECT_FALSE(r.on_grid());
#if KSWEEP_ENABLE_HDF5
    write_records(t.path / "s.h5", r);
    expect_same_records(r, read_records(t.path / "s.h5"));
#endif
    write_records_segy(t.path / "s.sgy", r);
    EXPECT_EQ(fs::file_size(t.path / "s.sgy"), 3600u + 15u * (240u + 4u * r.nt));  // 4 + 6 + 5 traces
    expect_same_records(r, read_records_segy(t.path / "s.sgy", r.dh, ny));
    // The survey alone, from the SEG-Y headers and from CSV.
    for (char const* name : {"s.sgy", "survey.csv"}) {
      if (std::string(name) == "survey.csv") write_survey_csv(t.path / name, r);
      RecordsFile const g = read_survey(t.path / name, r.dh, ny > 0);
      EXPECT_TRUE(g.data.empty());
      EXPECT_EQ(g.src_pos, r.src_pos) << name;
      EXPECT_EQ(g.rec_count, r.rec_count) << name;
      for (int s = 0; s < r.shots; ++s)
        for (int k = 0; k < r.rec_count[s]; ++k)
          EXPECT_EQ(g.rec_pos[s * r.receivers + k], r.rec_pos[s * r.receivers + k]) << name << " " << s << " " << k;
    }
  }
#if KSWEEP_ENABLE_HDF5
  // A shared spread on the grid also writes the cell datasets of files without metres, which read
  // back alone as the same geometry.
  RecordsFile const r = test_records(3, 20, 4, 30, 40, 0.002, 12.5);
  EXPECT_TRUE(r.shared_spread() && r.on_grid());
  write_records(t.path / "cells.h5", r);
  expect_same_records(r, read_records(t.path / "cells.h5"));
  EXPECT_EQ(node_index(3 * 12.5, 12.5), 3);
  EXPECT_EQ(node_index(3 * 12.5 + 7.5, 12.5), -1);
#endif
}

TEST(io, survey_csv_errors_name_file_line_and_column) {
  TempDir t;
  auto write = [&](std::string const& text) {
    fs::path const p = t.path / "survey.csv";
    std::ofstream(p) << text;
    return p;
  };
  std::string const head = "shot,src_x,src_z,rec_x,rec_z\n";
  // Any column order; comments and blank lines skipped.
  auto g = read_survey(write("# a survey\nrec_z, rec_x, shot, src_z, src_x\n\n7.5,60,1,5,10\n7.5,72.5,1,5,10\n"
                             "7.5,90,2,5,30\n"),
                       12.5, false);
  EXPECT_EQ(g.shots, 2);
  EXPECT_EQ(g.receivers, 2);
  EXPECT_EQ(g.rec_count, (std::vector<int>{2, 1}));
  EXPECT_EQ(g.rec_pos[1], (Position{7.5, 72.5, 0.0}));
  EXPECT_EQ(g.src_pos[1], (Position{5.0, 30.0, 0.0}));
  Position const end{100.0, 200.0, 0.0};
  expect_error([&] { read_survey(write("shot,src_x,src_z,rec_x\n1,2,3,4\n"), 12.5, false); },
               "the header has no column 'rec_z'");
  expect_error([&] { read_survey(write("shot,src_x,src_z,rec_x,rec_z,rec_y\n"), 12.5, false); },
               "unknown column 'rec_y'");
  expect_error([&] { read_survey(write(head + "1,2,3,4\n"), 12.5, false); }, "line 2 has 4 values");
  expect_error([&] { read_survey(write(head + "1,2,3,4,x\n"), 12.5, false); }, "line 2: rec_z = 'x'");
  expect_error([&] { read_survey(write(head + "a,2,3,4,5\n"), 12.5, false); }, "shot = 'a' is not an integer");
  expect_error([&] { read_survey(write(head + "1,2,3,4,5\n2,2,3,4,5\n1,2,3,4,5\n"), 12.5, false); },
               "line 4: shot 1 continues after other shots");
  expect_error([&] { read_survey(write(head + "1,2,3,4,5\n1,2.5,3,4,5\n"), 12.5, false); },
               "line 3: shot 1 has another source position");
  expect_error([&] { read_survey(write(head + "1,2,3,400,5\n"), 12.5, false, end); },
               "line 2: rec_x = 400 m lies outside the model [0, 200");
  expect_error([&] { read_survey(write(head + "1,-2,3,4,5\n"), 12.5, false); }, "src_x = -2 m lies outside");
  expect_error([&] { read_survey(write(head), 12.5, false); }, "lists no trace");
  expect_error([&] { read_survey(write(head + "1,2,3,4,5\n"), 12.5, true); }, "no column 'src_y'");
  expect_error([&] { read_survey(t.path / "none.csv", 12.5, false); }, "cannot open survey file");
  expect_error([] { config_from_string("[survey]\nfiles = \"a.csv\"\n", {}); }, "unknown key");
}

TEST(io, segy_errors_name_file_trace_and_header) {
  TempDir t;
  RecordsFile const r = random_records(0);
  fs::path const good = t.path / "good.sgy";
  write_records_segy(good, r);
  auto copy = [&](char const* name) {
    fs::path const p = t.path / name;
    fs::copy_file(good, p, fs::copy_options::overwrite_existing);
    return p;
  };
  expect_error([&] { segy_layout(t.path / "none.sgy", "fwi.observed"); }, "file not found");
  {
    fs::path const p = copy("short.sgy");
    fs::resize_file(p, 1000);
    expect_error([&] { segy_layout(p, "fwi.observed"); }, "fewer than the 3600 bytes");
  }
  {
    fs::path const p = copy("truncated.sgy");
    fs::resize_file(p, fs::file_size(p) - 100);
    expect_error([&] { read_records_segy(p, r.dh, 0); }, "truncated");
    expect_error([&] { read_records_segy(p, r.dh, 0); }, "truncated.sgy");
  }
  {
    fs::path const p = copy("int16.sgy");
    patch(p, 3224, be16(3));
    expect_error([&] { read_records_segy(p, r.dh, 0); }, "byte 3225 (format code) is 3 (2-byte signed integer)");
  }
  {
    fs::path const p = copy("ns.sgy");
    patch(p, 3600 + 1 * (240 + 4 * r.nt) + 114, be16(r.nt + 1));
    expect_error([&] { read_records_segy(p, r.dh, 0); }, "trace 2 has byte 115 (samples in this trace) = 38");
  }
  {
    fs::path const p = copy("outside.sgy");
    // Trace 3's receiver 4 m beyond the model's far edge in x.
    Position const end{(r.nz - 1) * r.dh, (r.nx - 1) * r.dh, 0.0};
    patch(p, 3600 + 2 * (240 + 4 * r.nt) + 80, be32(static_cast<std::int32_t>((end.x + 4) * 1000)));
    expect_error([&] { read_records_segy(p, r.dh, 0, false, end); }, "trace 3: gx (byte 81) = 741.5 m");
    expect_error([&] { read_records_segy(p, r.dh, 0, false, end); }, "outside the model [0, 737.5");
    EXPECT_NO_THROW(read_records_segy(p, r.dh, 0, false));  // no model to check against
  }
  {
    fs::path const p = copy("spread.sgy");
    // Shot 2's first receiver moved by 3.75 m: a spread of its own, off the grid.
    double const moved = r.rec_pos[0].x + 3.75;
    patch(p, 3600 + 5 * (240 + 4 * r.nt) + 80, be32(static_cast<std::int32_t>(moved * 1000)));
    RecordsFile const back = read_records_segy(p, r.dh, 0);
    EXPECT_EQ(back.rec_pos[static_cast<std::size_t>(r.receivers)].x, moved);
    EXPECT_FALSE(back.shared_spread());
    EXPECT_FALSE(back.on_grid());
    EXPECT_EQ(back.rec_pos[0], r.rec_pos[0]);
  }
  expect_error([] { config_from_string("[model]\nsource = \"m.segy\"\n", {}); }, "set model.dh");
  expect_error([] { config_from_string("[model]\nunits = \"mph\"\n", {}); }, "model.units");
  expect_error([] { config_from_string("[model]\nunits = \"km/s\"\n", {}); }, "applies to model files");
  expect_error([] { config_from_string("[output]\nsegy = true\n[time]\ndt = 0.0012345\n", {}); },
               "not a whole number of microseconds");
  expect_error([] { config_from_string("[output]\nsegy = true\n[time]\nnt = 40000\n", {}); }, "32767 samples");
}

namespace {

double ricker(double t, double f, double delay) {
  double const a = M_PI * f * (t - delay);
  return (1.0 - 2.0 * a * a) * std::exp(-a * a);
}

/// Records of Ricker wavelets (a different frequency and delay per trace) sampled at dt.
RecordsFile ricker_records(int nt, double dt) {
  RecordsFile r = test_records(2, nt, 3, 20, 30, dt, 10.0);
  for (int s = 0; s < r.shots; ++s)
    for (int k = 0; k < nt; ++k)
      for (int i = 0; i < r.receivers; ++i)
        r.data[(static_cast<std::size_t>(s) * nt + k) * r.receivers + i] =
            static_cast<float>(ricker(k * dt, 4.0 + 2.0 * i + s, 0.25 + 0.05 * i));
  return r;
}

}  // namespace

TEST(io, resampling_is_band_limited_and_exact_on_samples) {
  // 1.2 s of Ricker wavelets (4-9 Hz) at 4 ms, to 2 ms and 1 ms (refined), and from 1 ms to
  // 4 ms (low-passed at 125 Hz, far above the wavelets: they come through unchanged).
  double const T = 1.2;
  for (auto [dt_in, dt_out] :
       {std::pair<double, double>{0.004, 0.002}, {0.004, 0.001}, {0.001, 0.004}, {0.003, 0.002}}) {
    int const nt_in = static_cast<int>(std::lround(T / dt_in)) + 1,
              nt_out = static_cast<int>(std::lround(T / dt_out)) + 1;
    RecordsFile const in = ricker_records(nt_in, dt_in);
    int padded = 0;
    RecordsFile const out = resample_records(in, nt_out, dt_out, &padded);
    EXPECT_EQ(padded, -1);
    ASSERT_EQ(out.nt, nt_out);
    EXPECT_DOUBLE_EQ(out.dt, dt_out);
    RecordsFile const ref = ricker_records(nt_out, dt_out);
    double worst = 0;
    // Away from the ends (the kernel's reach), where the record is not cut off.
    int const margin = static_cast<int>(std::ceil(kResampleHalfWidth * std::max(dt_in, dt_out) / dt_out));
    for (int s = 0; s < in.shots; ++s)
      for (int k = margin; k < nt_out - margin; ++k)
        for (int i = 0; i < in.receivers; ++i) {
          std::size_t const j = (static_cast<std::size_t>(s) * nt_out + k) * in.receivers + i;
          worst = std::max(worst, std::abs(static_cast<double>(out.data[j]) - ref.data[j]));
        }
    EXPECT_LT(worst, 2e-4) << dt_in << " -> " << dt_out;  // peak amplitude 1
  }
  // Refining by 2 keeps every input sample (a sinc is 1 at 0 and 0 at the other samples).
  RecordsFile const in = ricker_records(301, 0.004);
  RecordsFile const out = resample_records(in, 601, 0.002);
  for (int k = 0; k < 301; ++k)
    EXPECT_NEAR(out.data[(static_cast<std::size_t>(2 * k)) * in.receivers],
                in.data[static_cast<std::size_t>(k) * in.receivers], 1e-7);
  // A longer record than the data: zeros past their end, reported.
  int padded = -1;
  RecordsFile const longer = resample_records(in, 801, 0.002, &padded);
  EXPECT_EQ(padded, 602);  // 1.202 s is within half an input interval (2 ms) of the last sample
  EXPECT_EQ(longer.data[(static_cast<std::size_t>(700)) * in.receivers], 0.0f);
}

// The key table (ksweep/io/keys.hpp) against what reads, checks and records the keys.
namespace keytable {

using namespace ksweep::io;

/// TOML values that break each of `k`'s limits, or its choices; none when the key has none.
std::vector<std::string> bad_values(Key const& k) {
  if (k.choices != nullptr) {
    std::string const v = k.choices->quoted ? "\"nonsense\"" : "3";
    return {k.type().rfind("array", 0) == 0 ? "[" + v + "]" : v};
  }
  auto const num = [&](double v) {
    std::ostringstream os;
    bool const integer = k.type().find("integer") != std::string::npos;
    if (integer) os << static_cast<long long>(v);
    else os << std::showpoint << v;
    std::string s = os.str();
    return k.type().rfind("array", 0) == 0 ? "[" + s + "]" : s;
  };
  std::vector<std::string> out;
  if (k.min) out.push_back(num(k.min_open ? *k.min : *k.min - 1));
  if (k.max) out.push_back(num(k.max_open ? *k.max : *k.max + 1));
  return out;
}

TEST(io, every_limit_and_choice_of_the_key_table_is_enforced) {
  int checked = 0;
  for (auto const& k : keys())
    for (auto const& bad : bad_values(k)) {
      // Each key's own limits are checked before what keys mean together (a feature's keys
      // without the feature): the error names the key and its limit.
      std::vector<std::string> const sets{k.dotted() + "=" + bad};
      try {
        (void)config_from_string("", sets);
        ADD_FAILURE() << k.dotted() << " = " << bad << " was accepted; the table says " << k.limits();
      } catch (ksweep::Error const& e) {
        std::string const what = e.what();
        EXPECT_NE(what.find(k.dotted()), std::string::npos) << what;
        EXPECT_TRUE(what.find("must be") != std::string::npos || what.find("is not allowed") != std::string::npos)
            << what;
      }
      ++checked;
    }
  EXPECT_GE(checked, 40);
}

TEST(io, the_key_table_reads_and_records_every_key) {
  Config const defaults = config_from_string("", {});
  auto const json = config_to_json(defaults);
  std::set<std::string> dotted;
  for (auto const& k : keys()) {
    EXPECT_TRUE(dotted.insert(k.dotted()).second) << k.dotted() << " twice";
    EXPECT_FALSE(k.help.empty()) << k.dotted();
    // Recorded by default unless its rule says when.
    if (k.recorded == nullptr) {
      ASSERT_TRUE(json.contains(k.section) && json[k.section].contains(k.name)) << k.dotted();
      EXPECT_EQ(json[k.section][k.name], key_value(k, defaults)) << k.dotted();
    } else {
      EXPECT_FALSE(k.recorded(defaults)) << k.dotted() << ": a key recorded only when set is recorded by default";
    }
  }
  EXPECT_EQ(dotted.size(), keys().size());
  // Every key the table names is one the reader takes; a name not in it is refused, listing it.
  for (auto const& k : keys()) EXPECT_NO_THROW(config_from_string("[" + k.section + "]\n", {})) << k.dotted();
  expect_error([] { config_from_string("[fwi]\nlearning_rate = 3\n", {}); }, "lbfgs_memory");
  // A key set is recorded with its value (the rule of a feature's key holds with the feature).
  auto const j = config_to_json(config_from_string(
      "", {"propagator.physics=acoustic_vd", "fwi.rho_max=2800", "storage.layer_chain=true", "output.segy=true"}));
  EXPECT_EQ(config_to_json(config_from_string("", {"parallel.domains=[2]"}))["parallel"]["domains"],
            nlohmann::json::array({2}));
  EXPECT_EQ(j["fwi"]["rho_max"], 2800.0);
  EXPECT_EQ(j["model"]["density"], "gardner");
  EXPECT_EQ(j["storage"]["layer_chain"], true);
  EXPECT_EQ(j["output"]["segy"], true);
  // Path-valued keys are the input paths the program protects.
  std::set<std::string> paths;
  for (auto const& [key, value] : defaults.input_paths) paths.insert(key);
  for (auto const& k : keys()) EXPECT_EQ(paths.count(k.dotted()), k.path ? 1u : 0u) << k.dotted();
}

TEST(io, every_name_registry_is_a_keys_choices) {
  for (auto const* option : ksweep::names::options) {
    Key const* k = find_key(option->key);
    ASSERT_NE(k, nullptr) << option->key;
    EXPECT_EQ(k->choices, option) << option->key;
  }
}

TEST(io, readme_key_table_is_the_key_table) {
  std::ifstream in(std::string(KSWEEP_SOURCE_DIR) + "/README.md");
  std::ostringstream os;
  os << in.rdbuf();
  std::string const readme = os.str();
  std::string const begin = "<!-- keys: `ksweep keys --markdown` -->\n", end = "<!-- /keys -->";
  auto const a = readme.find(begin), b = readme.find(end);
  ASSERT_NE(a, std::string::npos) << "README.md has no " << begin;
  ASSERT_NE(b, std::string::npos) << "README.md has no " << end;
  EXPECT_EQ(readme.substr(a + begin.size(), b - a - begin.size()), key_table_markdown())
      << "the README's key table differs from the keys' table: paste `ksweep keys --markdown` between the markers";
}

}  // namespace keytable
