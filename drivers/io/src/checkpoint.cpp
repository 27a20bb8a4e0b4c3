#include <ksweep/io/checkpoint.hpp>

#include <ksweep/base/error.hpp>
#include <ksweep/io/atomic_file.hpp>
#include <ksweep/io/config.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <system_error>
#include <filesystem>
#include <ctime>
#include <chrono>
#include <fstream>
#include <random>
#include <sstream>
#include <type_traits>

namespace ksweep::io {

namespace {

constexpr char magic[8] = {'K', 'S', 'W', 'C', 'K', 'P', 'T', '2'};
constexpr char magic_v1[8] = {'K', 'S', 'W', 'C', 'K', 'P', 'T', '1'};
constexpr char trailer[] = "SHA256:";
constexpr std::size_t trailer_len = sizeof(trailer) - 1 + 64;

void flatten(nlohmann::json const& j, std::string const& prefix,
             std::vector<std::pair<std::string, nlohmann::json>>& out) {
  if (j.is_object()) {
    for (auto it = j.begin(); it != j.end(); ++it)
      flatten(it.value(), prefix.empty() ? it.key() : prefix + "." + it.key(), out);
  } else {
    out.emplace_back(prefix, j);
  }
}

}  // namespace

void write_checkpoint(std::filesystem::path const& path, Checkpoint const& c) {
  KSWEEP_REQUIRE(c.parameters >= 1 && c.moments >= 1 && c.model.size() % c.parameters == 0,
                 "checkpoint " << path.string() << ": " << c.model.size() << " model values for " << c.parameters
                               << " parameter(s)");
  std::size_t const n = c.model.size() / c.parameters;
  KSWEEP_REQUIRE(c.m.size() == c.moments * n && c.v.size() == c.moments * n,
                 "checkpoint " << path.string() << ": arrays of different sizes");
  std::size_t const nv = c.moments * n;
  bool const lbfgs = c.lbfgs.pairs >= 0;
  KSWEEP_REQUIRE(!lbfgs || (c.lbfgs.s.size() == c.lbfgs.pairs * nv && c.lbfgs.y.size() == c.lbfgs.pairs * nv &&
                            c.lbfgs.rho.size() == static_cast<std::size_t>(c.lbfgs.pairs) &&
                            (c.lbfgs.gradient.empty() || c.lbfgs.gradient.size() == nv)),
                 "checkpoint " << path.string() << ": L-BFGS arrays of other sizes than " << c.lbfgs.pairs
                               << " pairs of " << nv << " values");
  nlohmann::json meta = {{"format", 3}, {"iteration", c.iteration}, {"rng", c.rng}, {"history", c.history}, {"n", n},
                         {"run", c.run}};
  if (c.parameters != 1 || c.moments != 1) {
    meta["parameters"] = c.parameters;
    meta["moments"] = c.moments;
  }
  if (lbfgs)
    meta["lbfgs"] = {{"pairs", c.lbfgs.pairs},
                     {"gradient", !c.lbfgs.gradient.empty()},
                     {"rho", c.lbfgs.rho},
                     {"loss", c.lbfgs.loss},
                     {"gamma", c.lbfgs.gamma},
                     {"iterations", c.lbfgs.iterations},
                     {"evaluations", c.lbfgs.evaluations}};
  std::string const js = meta.dump();
  std::uint64_t const len = js.size();
  std::string bytes;
  bytes.reserve(sizeof magic + sizeof len + js.size() + (c.parameters + 2 * c.moments) * n * sizeof(float) +
                trailer_len);
  bytes.append(magic, sizeof magic);
  bytes.append(reinterpret_cast<char const*>(&len), sizeof len);
  bytes += js;
  for (auto const* a : {&c.model, &c.m, &c.v, &c.lbfgs.s, &c.lbfgs.y, &c.lbfgs.gradient})
    bytes.append(reinterpret_cast<char const*>(a->data()), a->size() * sizeof(float));
  std::string const sum = sha256_hex(bytes.data(), bytes.size());
  bytes += trailer;
  bytes += sum;
  write_file_atomic(path, bytes);
}

namespace {

/// The header of the checkpoint at `path` (its first bytes only) and the file's size, checked
/// against each other.
struct Header {
  nlohmann::json meta;
  std::size_t n = 0;
  int parameters = 1, moments = 1;
  int lbfgs_pairs = -1;  // L-BFGS pairs (< 0: none)
  bool lbfgs_gradient = false;
  std::uintmax_t size = 0;
  // Segments of n float32 values after the metadata.
  std::uintmax_t segments() const {
    std::uintmax_t const lb = lbfgs_pairs < 0 ? 0 : 2 * static_cast<std::uintmax_t>(lbfgs_pairs) + lbfgs_gradient;
    return static_cast<std::uintmax_t>(parameters) + (2 + lb) * static_cast<std::uintmax_t>(moments);
  }
};

Header read_header(std::filesystem::path const& path) {
  std::string const name = shown_path(path);
  std::error_code ec;
  KSWEEP_REQUIRE(std::filesystem::is_regular_file(path, ec), "--resume: no checkpoint at " << name);
  Header h;
  h.size = std::filesystem::file_size(path, ec);
  KSWEEP_REQUIRE(!ec, "--resume: cannot read the size of the checkpoint " << name << ": " << ec.message());
  KSWEEP_REQUIRE(h.size > 0, "--resume: the checkpoint " << name
                                                         << " is empty (0 bytes): it was not written by ksweep (ksweep "
                                                            "writes checkpoints whole or not at all); it cannot be "
                                                            "resumed");
  std::ifstream in(path, std::ios::binary);
  KSWEEP_REQUIRE(in.good(), "--resume: cannot open the checkpoint " << name);
  char head[sizeof magic + 8] = {};
  in.read(head, sizeof head);
  auto const got = static_cast<std::size_t>(in.gcount());
  KSWEEP_REQUIRE(got < sizeof magic || std::memcmp(head, magic_v1, sizeof magic) != 0,
                 "--resume: " << name
                              << " is a checkpoint of an older ksweep without a checksum; it cannot be verified, so "
                                 "it is not resumed (start the run again)");
  KSWEEP_REQUIRE(
      got == sizeof head && h.size >= sizeof head + trailer_len && std::memcmp(head, magic, sizeof magic) == 0,
      "--resume: " << name << " is not a ksweep checkpoint (wrong header or too short: " << h.size << " bytes)");
  std::uint64_t len = 0;
  std::memcpy(&len, head + sizeof magic, sizeof len);
  KSWEEP_REQUIRE(len <= h.size - sizeof head - trailer_len, "--resume: the checkpoint "
                                                                << name << " is corrupt: its metadata length " << len
                                                                << " exceeds the file (" << h.size << " bytes)");
  std::string meta(static_cast<std::size_t>(len), '\0');
  in.read(meta.data(), static_cast<std::streamsize>(len));
  KSWEEP_REQUIRE(static_cast<std::uint64_t>(in.gcount()) == len, "--resume: cannot read the checkpoint " << name);
  try {
    h.meta = nlohmann::json::parse(meta);
  } catch (nlohmann::json::exception const&) {
    KSWEEP_REQUIRE(false, "--resume: the checkpoint " << name << " is corrupt: its metadata is not valid JSON");
  }
  KSWEEP_REQUIRE(h.meta.is_object() && h.meta.contains("n") && h.meta["n"].is_number_unsigned(),
                 "--resume: the checkpoint " << name << " is corrupt: its metadata lacks the model size 'n'");
  h.n = h.meta["n"].get<std::size_t>();
  KSWEEP_REQUIRE(h.n <= (std::uintmax_t(1) << 40), "--resume: the checkpoint " << name << " is corrupt: it records a "
                                                                               << "model of " << h.n << " cells");
  for (auto [key, out] : {std::pair<char const*, int*>{"parameters", &h.parameters}, {"moments", &h.moments}}) {
    auto const it = h.meta.find(key);
    if (it == h.meta.end()) continue;
    KSWEEP_REQUIRE(it->is_number_unsigned() && it->get<std::size_t>() >= 1 && it->get<std::size_t>() <= 2,
                   "--resume: the checkpoint " << name << " is corrupt: its '" << key << "' is not 1 or 2");
    *out = it->get<int>();
  }
  if (auto const lb = h.meta.find("lbfgs"); lb != h.meta.end()) {
    bool const ok = lb->is_object() && lb->contains("pairs") && (*lb)["pairs"].is_number_unsigned() &&
                    (*lb)["pairs"].get<std::size_t>() <= 100 && lb->contains("gradient") &&
                    (*lb)["gradient"].is_boolean();
    KSWEEP_REQUIRE(ok, "--resume: the checkpoint " << name
                                                   << " is corrupt: its 'lbfgs' metadata lacks 'pairs' (0 to 100) or "
                                                      "'gradient'");
    h.lbfgs_pairs = (*lb)["pairs"].get<int>();
    h.lbfgs_gradient = (*lb)["gradient"].get<bool>();
  }
  std::uintmax_t const expected = sizeof head + len + h.segments() * h.n * sizeof(float) + trailer_len;
  KSWEEP_REQUIRE(h.size == expected, "--resume: the checkpoint "
                                         << name << " has " << h.size << " bytes, but its header describes a model of "
                                         << h.n << " cells (" << h.parameters << " parameter(s)), which takes "
                                         << expected << " bytes: it is truncated or corrupt; it cannot be resumed");
  return h;
}

}  // namespace

CheckpointHeader read_checkpoint_header(std::filesystem::path const& path) {
  Header const h = read_header(path);
  CheckpointHeader c;
  c.n = h.n;
  c.parameters = h.parameters;
  c.moments = h.moments;
  c.lbfgs_pairs = h.lbfgs_pairs;
  auto const it = h.meta.find("iteration");
  c.iteration = it != h.meta.end() && it->is_number_integer() ? it->get<int>() : 0;
  auto const run = h.meta.find("run");
  if (run != h.meta.end()) c.run = *run;
  return c;
}

Checkpoint read_checkpoint(std::filesystem::path const& path, std::size_t n) {
  // n == 0: the size recorded in the file (checked against the arrays it holds).
  std::string const name = shown_path(path);
  Header const head = read_header(path);  // sizes checked before the whole file is read
  KSWEEP_REQUIRE(n == 0 || head.n == n, "--resume: the checkpoint " << name << " holds a model of " << head.n
                                                                    << " cells, this configuration has " << n);
  auto const size = head.size;
  std::string bytes(static_cast<std::size_t>(size), '\0');
  {
    std::ifstream in(path, std::ios::binary);
    KSWEEP_REQUIRE(in.good(), "--resume: cannot open the checkpoint " << name);
    in.read(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    KSWEEP_REQUIRE(in.gcount() == static_cast<std::streamsize>(bytes.size()),
                   "--resume: cannot read the checkpoint " << name);
  }
  KSWEEP_REQUIRE(bytes.size() >= sizeof magic && std::memcmp(bytes.data(), magic_v1, sizeof magic) != 0,
                 "--resume: " << name
                              << " is a checkpoint of an older ksweep without a checksum; it cannot be verified, so "
                                 "it is not resumed (start the run again)");
  KSWEEP_REQUIRE(bytes.size() >= sizeof magic + 8 + trailer_len && std::memcmp(bytes.data(), magic, sizeof magic) == 0,
                 "--resume: " << name << " is not a ksweep checkpoint (wrong header or too short)");
  std::size_t const body = bytes.size() - trailer_len;
  KSWEEP_REQUIRE(bytes.compare(body, sizeof(trailer) - 1, trailer) == 0,
                 "--resume: the checkpoint " << name << " is truncated or corrupt (no checksum at its end)");
  std::string const stored = bytes.substr(body + sizeof(trailer) - 1);
  std::string const actual = sha256_hex(bytes.data(), body);
  KSWEEP_REQUIRE(stored == actual, "--resume: the checkpoint " << name
                                                               << " is corrupt: its bytes do not match its SHA-256 "
                                                                  "checksum (stored "
                                                               << stored.substr(0, 16) << "..., computed "
                                                               << actual.substr(0, 16) << "...); it cannot be trusted");
  std::uint64_t len = 0;
  std::memcpy(&len, bytes.data() + sizeof magic, sizeof len);
  KSWEEP_REQUIRE(len <= body - sizeof magic - sizeof len, "--resume: the checkpoint "
                                                              << name << " is corrupt: its metadata length " << len
                                                              << " exceeds the file");
  nlohmann::json meta;
  try {
    meta =
        nlohmann::json::parse(bytes.data() + sizeof magic + sizeof len, bytes.data() + sizeof magic + sizeof len + len);
  } catch (nlohmann::json::exception const&) {
    KSWEEP_REQUIRE(false, "--resume: the checkpoint " << name << " is corrupt: its metadata is not valid JSON");
  }
  // Each field is named in the error when it is missing or of the wrong type.
  auto field = [&](char const* key, auto kind) {
    using T = decltype(kind);
    auto const it = meta.find(key);
    bool ok = it != meta.end();
    if (ok) {
      if constexpr (std::is_same_v<T, int> || std::is_same_v<T, std::size_t>) ok = it->is_number_integer();
      else if constexpr (std::is_same_v<T, std::string>) ok = it->is_string();
    }
    KSWEEP_REQUIRE(ok, "--resume: the checkpoint " << name << " is corrupt: its metadata lacks the field '" << key
                                                   << "' or has one of the wrong type");
    if constexpr (std::is_same_v<T, nlohmann::json>) return *it;
    else return it->template get<T>();
  };
  KSWEEP_REQUIRE(meta.is_object(), "--resume: the checkpoint " << name << " is corrupt: its metadata is not an object");
  int const format = field("format", int{});
  KSWEEP_REQUIRE(format == 2 || format == 3,
                 "--resume: the checkpoint " << name << " has an unknown format " << format);
  KSWEEP_REQUIRE(format == 3 || head.lbfgs_pairs < 0,
                 "--resume: the checkpoint " << name << " is corrupt: format 2 holds no L-BFGS memory");
  Checkpoint c;
  c.iteration = field("iteration", int{});
  c.rng = field("rng", std::string{});
  c.history = field("history", nlohmann::json{});
  c.run = field("run", nlohmann::json{});
  std::size_t const cn = field("n", std::size_t{});
  if (n == 0) n = cn;
  KSWEEP_REQUIRE(cn == n, "--resume: the checkpoint " << name << " holds a model of " << cn
                                                      << " cells, this configuration has " << n);
  c.parameters = head.parameters;
  c.moments = head.moments;
  std::size_t const arrays = static_cast<std::size_t>(head.segments()) * n * sizeof(float);
  KSWEEP_REQUIRE(body - sizeof magic - sizeof len - len == arrays,
                 "--resume: the checkpoint " << name << " is corrupt: it holds "
                                             << body - sizeof magic - sizeof len - len << " bytes of arrays, expected "
                                             << arrays << " for " << n << " cells");
  KSWEEP_REQUIRE(c.iteration >= 1 && c.iteration <= 100000000, "--resume: the checkpoint "
                                                                   << name << " records iteration " << c.iteration
                                                                   << ", outside the valid range [1, 100000000]");
  KSWEEP_REQUIRE(c.history.is_array() && c.history.size() == static_cast<std::size_t>(c.iteration),
                 "--resume: the checkpoint " << name << " records iteration " << c.iteration << " but a history of "
                                             << (c.history.is_array() ? c.history.size() : 0) << " iterations");
  for (std::size_t i = 0; i < c.history.size(); ++i) {
    auto const& h = c.history[i];
    bool const ok = h.is_object() && h.contains("iteration") && h["iteration"].is_number_integer() &&
                    h["iteration"].get<long long>() == static_cast<long long>(i + 1) && h.contains("loss") &&
                    h["loss"].is_number() && std::isfinite(h["loss"].get<double>());
    KSWEEP_REQUIRE(ok, "--resume: the checkpoint " << name << " has an invalid history entry " << i + 1
                                                   << " (iteration number or finite loss missing)");
  }
  KSWEEP_REQUIRE(c.run.is_object() && c.run.contains("config") && c.run["config"].is_object(),
                 "--resume: the checkpoint " << name << " does not record the configuration it was made with");
  {
    std::istringstream is(c.rng);
    std::mt19937_64 g;
    is >> g;
    KSWEEP_REQUIRE(!is.fail(), "--resume: the checkpoint " << name << " holds an invalid random generator state");
  }
  char const* at = bytes.data() + sizeof magic + sizeof len + len;
  char const* names[] = {"model", "Adam first moment", "Adam second moment"};
  int k = 0;
  for (auto* a : {&c.model, &c.m, &c.v}) {
    std::size_t const values = (k == 0 ? c.parameters : c.moments) * n;
    a->resize(values);
    std::memcpy(a->data(), at, values * sizeof(float));
    at += values * sizeof(float);
    for (std::size_t i = 0; i < values; ++i) {
      float const x = (*a)[i];
      bool const ok = std::isfinite(x) && (k == 0 ? x > 0 : k == 2 ? x >= 0 : true);
      KSWEEP_REQUIRE(
          ok, "--resume: the checkpoint "
                  << name << " holds an out-of-range " << names[k] << " value " << x << " at "
                  << (k == 0 && i >= n ? "density cell " : "cell ") << i % n
                  << (k == 0 ? (i >= n ? ": densities must be finite and > 0" : ": velocities must be finite and > 0")
                             : ": values must be finite"));
    }
    ++k;
  }
  if (head.lbfgs_pairs >= 0) {
    auto const lb = meta["lbfgs"];
    std::size_t const nv = c.moments * n;
    c.lbfgs.pairs = head.lbfgs_pairs;
    bool ok = lb.contains("rho") && lb["rho"].is_array() && lb["rho"].size() == static_cast<std::size_t>(c.lbfgs.pairs);
    for (std::size_t i = 0; ok && i < lb["rho"].size(); ++i)
      ok = lb["rho"][i].is_number() && std::isfinite(lb["rho"][i].get<double>()) && lb["rho"][i].get<double>() > 0;
    for (char const* key : {"loss", "gamma"})
      ok = ok && lb.contains(key) && lb[key].is_number() && std::isfinite(lb[key].get<double>());
    for (char const* key : {"iterations", "evaluations"}) ok = ok && lb.contains(key) && lb[key].is_number_unsigned();
    KSWEEP_REQUIRE(ok, "--resume: the checkpoint "
                           << name
                           << " is corrupt: its L-BFGS memory lacks 'rho' (one finite value > 0 "
                              "per pair), 'loss', 'gamma', 'iterations' or 'evaluations'");
    c.lbfgs.rho = lb["rho"].get<std::vector<double>>();
    c.lbfgs.loss = lb["loss"].get<double>();
    c.lbfgs.gamma = lb["gamma"].get<double>();
    c.lbfgs.iterations = lb["iterations"].get<int>();
    c.lbfgs.evaluations = lb["evaluations"].get<int>();
    char const* what[] = {"L-BFGS step", "L-BFGS gradient change", "L-BFGS gradient"};
    int j = 0;
    for (auto* a : {&c.lbfgs.s, &c.lbfgs.y, &c.lbfgs.gradient}) {
      std::size_t const values = j < 2 ? c.lbfgs.pairs * nv : (head.lbfgs_gradient ? nv : 0);
      a->resize(values);
      std::memcpy(a->data(), at, values * sizeof(float));
      at += values * sizeof(float);
      for (std::size_t i = 0; i < values; ++i)
        KSWEEP_REQUIRE(std::isfinite((*a)[i]),
                       "--resume: the checkpoint " << name << " holds a non-finite " << what[j] << " value at " << i);
      ++j;
    }
  }
  return c;
}

std::vector<std::string> const& resume_mutable_keys() {
  static std::vector<std::string> const keys{"fwi.iterations",      "fwi.checkpoint_every", "fwi.figures_every",
                                             "fwi.save_models",     "storage.location",     "storage.transfer_interval",
                                             "storage.disk_dir",    "storage.pinned",       "propagator.batch",
                                             "propagator.schedule", "parallel.domains",     "source_path"};
  return keys;
}

std::vector<RunChange> resume_changes(nlohmann::json const& saved, nlohmann::json const& now) {
  std::vector<std::pair<std::string, nlohmann::json>> a, b;
  flatten(saved, "", a);
  flatten(now, "", b);
  auto const& mut = resume_mutable_keys();
  auto strip = [](std::string const& k) { return k.rfind("config.", 0) == 0 ? k.substr(7) : k; };
  // A key the checkpoint lacks (it was made before the key existed) at its default now is no
  // change.
  std::vector<std::pair<std::string, nlohmann::json>> defaults;
  flatten({{"config", config_to_json(Config{})}}, "", defaults);
  std::vector<RunChange> out;
  auto find = [](auto const& v, std::string const& k) -> nlohmann::json const* {
    for (auto const& [kk, vv] : v)
      if (kk == k) return &vv;
    return nullptr;
  };
  std::vector<std::string> keys;
  for (auto const& [k, v] : a) keys.push_back(k);
  for (auto const& [k, v] : b) keys.push_back(k);
  std::sort(keys.begin(), keys.end());
  keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
  for (auto const& k : keys) {
    std::string const key = strip(k);
    if (std::find(mut.begin(), mut.end(), key) != mut.end()) continue;
    if (key.rfind("files.", 0) == 0) continue;  // where the inputs were and when: for messages only
    auto const* x = find(a, k);
    auto const* y = find(b, k);
    if (x != nullptr && y != nullptr && *x == *y) continue;
    if (x == nullptr && y != nullptr) {
      auto const* d = find(defaults, k);
      if (d != nullptr && *d == *y) continue;
    }
    out.push_back({key, x ? x->dump() : std::string("(absent)"), y ? y->dump() : std::string("(absent)")});
  }
  return out;
}

namespace {

/// An input whose values the run identity hashes (data.<name>_sha256), the key naming its file
/// and what it holds.
struct HashedInput {
  char const* hash;
  char const* key;
  char const* what;
};
HashedInput const* hashed_input(std::string const& identity_key) {
  static HashedInput const inputs[] = {
      {"data.model_sha256", "model.source", "the model's values (after decimation and cropping)"},
      {"data.density_sha256", "model.density", "the density's values"},
      {"data.observed_sha256", "fwi.observed", "the observed data"},
      {"data.survey_sha256", "survey.file", "the survey's positions"},
      {"data.wavelet_sha256", "wavelet.source", "the wavelet's samples"}};
  for (auto const& i : inputs)
    if (identity_key == i.hash) return &i;
  return nullptr;
}

/// ": PATH, N bytes modified T when the checkpoint was made, M bytes modified U now" for the
/// file behind `key`, from the identities' "files" records (empty where neither has one).
std::string file_change(nlohmann::json const& saved, nlohmann::json const& now, std::string const& key) {
  auto const record = [&](nlohmann::json const& id) -> nlohmann::json const* {
    if (!id.contains("files") || !id["files"].contains(key)) return nullptr;
    return &id["files"][key];
  };
  auto const* a = record(saved);
  auto const* b = record(now);
  if (a == nullptr && b == nullptr) return "";
  auto const describe = [](nlohmann::json const& r) {
    return std::to_string(r.value("bytes", std::uint64_t{0})) + " bytes, modified " +
           r.value("modified", std::string("(unknown)"));
  };
  std::string out = ": " + io::shown_path(((b != nullptr) ? *b : *a).value("path", std::string("?")));
  out += a != nullptr ? ", " + describe(*a) + " when the checkpoint was made" : ", not recorded in the checkpoint";
  out += b != nullptr ? "; " + describe(*b) + " now" : "; not a file now";
  return out;
}

}  // namespace

nlohmann::json input_files(io::Config const& cfg) {
  nlohmann::json out = nlohmann::json::object();
  std::error_code ec;
  for (auto const& [key, value] : cfg.input_paths) {
    if (value.empty() || !std::filesystem::is_regular_file(value, ec)) continue;
    auto const bytes = std::filesystem::file_size(value, ec);
    auto const when = std::filesystem::last_write_time(value, ec);
    auto const secs = std::chrono::duration_cast<std::chrono::seconds>(when.time_since_epoch()).count() -
                      std::chrono::duration_cast<std::chrono::seconds>(
                          std::filesystem::file_time_type::clock::now().time_since_epoch())
                          .count() +
                      static_cast<long long>(std::time(nullptr));
    char stamp[32] = "";
    std::time_t const t = static_cast<std::time_t>(secs);
    if (std::tm tm{}; gmtime_r(&t, &tm) != nullptr) std::strftime(stamp, sizeof stamp, "%Y-%m-%d %H:%M:%S UTC", &tm);
    out[key] = {{"path", std::filesystem::absolute(value, ec).string()}, {"bytes", bytes}, {"modified", stamp}};
  }
  return out;
}

void require_same_run(nlohmann::json const& saved, nlohmann::json const& now, std::filesystem::path const& ck_path) {
  auto const changes = io::resume_changes(saved, now);
  if (changes.empty()) return;
  std::ostringstream os;
  os << "--resume: the configuration differs from the one " << io::shown_path(ck_path)
     << " was made with, in keys that change the run's meaning:";
  for (auto const& c : changes) {
    if (auto const* input = hashed_input(c.key))
      os << "\n  " << input->what << " (" << input->key << ") differ from those the checkpoint was made with"
         << file_change(saved, now, input->key);
    else os << "\n  " << c.key << ": " << shown(c.before) << " in the checkpoint, " << shown(c.after) << " now";
  }
  os << "\nonly these keys may change on --resume:";
  for (auto const& k : io::resume_mutable_keys()) os << " " << k;
  os << "\nrestore the checkpoint's values, or start a new run in a new folder";
  throw Error(os.str());
}

}  // namespace ksweep::io
