#include <ksweep/io/config.hpp>
#include <ksweep/io/keys.hpp>

#include <ksweep/io/segy.hpp>

#include <ksweep/base/error.hpp>
#include <ksweep/base/physics_table.hpp>

#include <toml++/toml.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <map>
#include <sstream>
#include <string_view>

namespace ksweep::io {
namespace {

char const* type_name(toml::node_type type) {
  switch (type) {
    case toml::node_type::none:
      return "nothing";
    case toml::node_type::table:
      return "table";
    case toml::node_type::array:
      return "array";
    case toml::node_type::string:
      return "string";
    case toml::node_type::integer:
      return "integer";
    case toml::node_type::floating_point:
      return "float";
    case toml::node_type::boolean:
      return "boolean";
    case toml::node_type::date:
      return "date";
    case toml::node_type::time:
      return "time";
    case toml::node_type::date_time:
      return "date-time";
  }
  return "unknown";
}

std::string join(std::vector<std::string> const& items) {
  std::string out;
  for (std::size_t i = 0; i < items.size(); ++i) {
    if (i > 0) out += ", ";
    out += items[i];
  }
  return out;
}

/// Where each value came from, for error messages.
class Origins {
 public:
  explicit Origins(std::string source) : m_source(std::move(source)) {}
  void set_override(std::string const& dotted, std::string const& text) { m_overrides[dotted] = text; }
  std::string of(std::string const& dotted) const {
    auto const it = m_overrides.find(dotted);
    if (it != m_overrides.end()) return "--set " + shown(it->second);
    return shown(m_source);
  }
  std::string const& source() const { return m_source; }

 private:
  std::string m_source;
  std::map<std::string, std::string> m_overrides;
};

/// Reads the keys of one section into typed fields and rejects unknown keys.
class SectionReader {
 public:
  SectionReader(toml::table const* table, std::string section, Origins const& origins)
      : m_table(table), m_section(std::move(section)), m_origins(origins) {}

  void get(char const* key, int& out) {
    toml::node const* node = find(key);
    if (node == nullptr) return;
    auto const* v = node->as_integer();
    if (v == nullptr) type_error(key, *node, "integer");
    std::int64_t const x = v->get();
    KSWEEP_REQUIRE(x >= std::numeric_limits<int>::min() && x <= std::numeric_limits<int>::max(),
                   dotted(key) << " = " << x << " in " << where(key) << " does not fit a 32-bit integer (limit "
                               << std::numeric_limits<int>::max() << ")");
    out = static_cast<int>(x);
  }

  void get(char const* key, double& out) {
    toml::node const* node = find(key);
    if (node == nullptr) return;
    if (auto const* f = node->as_floating_point()) {
      out = f->get();
    } else if (auto const* i = node->as_integer()) {
      out = static_cast<double>(i->get());
    } else {
      type_error(key, *node, "float");
    }
  }

  void get(char const* key, bool& out) {
    toml::node const* node = find(key);
    if (node == nullptr) return;
    auto const* v = node->as_boolean();
    if (v == nullptr) type_error(key, *node, "boolean");
    out = v->get();
  }

  void get(char const* key, std::string& out) {
    toml::node const* node = find(key);
    if (node == nullptr) return;
    auto const* v = node->as_string();
    if (v == nullptr) type_error(key, *node, "string");
    out = v->get();
    // The configuration is recorded as JSON (summary.json, checkpoints), which holds UTF-8 text.
    auto const bad = first_bad_text_byte(out);
    if (bad != std::string::npos) {
      char byte[8];
      std::snprintf(byte, sizeof byte, "0x%02x", static_cast<unsigned char>(out[bad]));
      KSWEEP_REQUIRE(false,
                     dotted(key) << " = \"" << shown(out) << "\" in " << where(key) << " holds "
                                 << (out[bad] == '\0' ? std::string("a NUL character")
                                                      : std::string("the byte ") + byte + ", which is not UTF-8 text,")
                                 << " at byte " << bad
                                 << "; ksweep records its configuration as UTF-8 JSON: rename the file or "
                                    "folder, or give a path without it");
    }
  }

  void get(char const* key, std::vector<std::string>& out) {
    toml::node const* node = find(key);
    if (node == nullptr) return;
    auto const* arr = node->as_array();
    if (arr == nullptr) type_error(key, *node, "array of strings");
    std::vector<std::string> v;
    for (std::size_t i = 0; i < arr->size(); ++i) {
      auto const* e = arr->get(i)->as_string();
      KSWEEP_REQUIRE(e != nullptr, "wrong type for element " << i << " of '" << dotted(key) << "' in " << where(key)
                                                             << ": got " << type_name(arr->get(i)->type())
                                                             << ", expected string");
      v.push_back(e->get());
    }
    out = std::move(v);
  }

  void get(char const* key, std::vector<int>& out) {
    toml::node const* node = find(key);
    if (node == nullptr) return;
    auto const* arr = node->as_array();
    if (arr == nullptr) type_error(key, *node, "array of integers");
    std::vector<int> v;
    for (std::size_t i = 0; i < arr->size(); ++i) {
      auto const* e = arr->get(i)->as_integer();
      KSWEEP_REQUIRE(e != nullptr, "wrong type for element " << i << " of '" << dotted(key) << "' in " << where(key)
                                                             << ": got " << type_name(arr->get(i)->type())
                                                             << ", expected integer");
      KSWEEP_REQUIRE(e->get() >= -(1LL << 30) && e->get() <= (1LL << 30),
                     "element " << i << " of '" << dotted(key) << "' = " << e->get() << " in " << where(key)
                                << " is out of range");
      v.push_back(static_cast<int>(e->get()));
    }
    out = std::move(v);
  }

  /// An array of tables {max_freq = Hz, iterations = n} (fwi.stages).
  void get(char const* key, std::vector<FwiSection::Stage>& out) {
    toml::node const* node = find(key);
    if (node == nullptr) return;
    auto const* arr = node->as_array();
    if (arr == nullptr) type_error(key, *node, "array of tables {max_freq = Hz, iterations = n}");
    std::vector<FwiSection::Stage> v;
    for (std::size_t i = 0; i < arr->size(); ++i) {
      std::string const element = dotted(key) + "[" + std::to_string(i) + "]";
      auto const* t = arr->get(i)->as_table();
      KSWEEP_REQUIRE(t != nullptr, "wrong type for " << element << " in " << where(key) << ": got "
                                                     << type_name(arr->get(i)->type())
                                                     << ", expected a table {max_freq = Hz, iterations = n}");
      FwiSection::Stage st;
      bool has_freq = false, has_iterations = false;
      for (auto const& [k, e] : *t) {
        std::string const name(k.str());
        if (name == "max_freq" && (e.is_floating_point() || e.is_integer())) {
          st.max_freq = e.is_integer() ? static_cast<double>(e.as_integer()->get()) : e.as_floating_point()->get();
          has_freq = true;
        } else if (name == "iterations" && e.is_integer()) {
          std::int64_t const n = e.as_integer()->get();
          KSWEEP_REQUIRE(n >= 1 && n <= std::numeric_limits<int>::max(),
                         element << ".iterations = " << n << " in " << where(key) << " must be in [1, "
                                 << std::numeric_limits<int>::max() << "]");
          st.iterations = static_cast<int>(n);
          has_iterations = true;
        } else {
          KSWEEP_REQUIRE(
              false, element << "." << shown(name) << " in " << where(key)
                             << (name == "max_freq" || name == "iterations"
                                     ? std::string(" has the wrong type: got ") + type_name(e.type()) +
                                           (name == "max_freq" ? ", expected a number (Hz)" : ", expected an integer")
                                     : std::string(" is not a key of a stage (allowed: max_freq, "
                                                   "iterations)")));
        }
      }
      KSWEEP_REQUIRE(has_freq && has_iterations, element << " in " << where(key) << " lacks "
                                                         << (has_freq ? "iterations" : "max_freq")
                                                         << ": a stage is {max_freq = Hz, iterations = n}");
      v.push_back(st);
    }
    out = std::move(v);
  }

  /// A string, or a number kept as its text (a key that takes a name, a path or a value).
  void get_text_or_number(char const* key, std::string& out) {
    toml::node const* node = m_table == nullptr ? nullptr : m_table->get(key);
    if (node != nullptr && (node->is_floating_point() || node->is_integer())) {
      find(key);
      double const x =
          node->is_integer() ? static_cast<double>(node->as_integer()->get()) : node->as_floating_point()->get();
      std::ostringstream os;
      os.precision(17);
      os << x;
      out = os.str();
      return;
    }
    get(key, out);
  }

  void get(char const* key, std::array<double, 2>& out) {
    toml::array const* arr = find_pair(key, "array of 2 numbers");
    if (arr == nullptr) return;
    for (std::size_t i = 0; i < 2; ++i) {
      toml::node const& e = *arr->get(i);
      if (auto const* f = e.as_floating_point()) {
        out[i] = f->get();
      } else if (auto const* n = e.as_integer()) {
        out[i] = static_cast<double>(n->get());
      } else {
        KSWEEP_REQUIRE(false, "wrong type for element " << i << " of '" << dotted(key) << "' in " << where(key)
                                                        << ": got " << type_name(e.type()) << ", expected float");
      }
    }
  }

  void get(char const* key, std::optional<std::array<int, 2>>& out) {
    toml::array const* arr = find_pair(key, "array of 2 integers");
    if (arr == nullptr) return;
    std::array<int, 2> v{};
    for (std::size_t i = 0; i < 2; ++i) {
      toml::node const& e = *arr->get(i);
      auto const* n = e.as_integer();
      KSWEEP_REQUIRE(n != nullptr, "wrong type for element " << i << " of '" << dotted(key) << "' in " << where(key)
                                                             << ": got " << type_name(e.type())
                                                             << ", expected integer");
      std::int64_t const x = n->get();
      KSWEEP_REQUIRE(x >= std::numeric_limits<int>::min() && x <= std::numeric_limits<int>::max(),
                     dotted(key) << "[" << i << "] = " << x << " in " << where(key)
                                 << " does not fit a 32-bit integer (limit " << std::numeric_limits<int>::max() << ")");
      v[i] = static_cast<int>(x);
    }
    out = v;
  }

  /// Rejects keys of the section that no get() call asked for.
  void finish() const {
    if (m_table == nullptr) return;
    for (auto const& [k, node] : *m_table) {
      (void)node;
      std::string const key(k.str());
      if (std::find(m_known.begin(), m_known.end(), key) == m_known.end()) {
        KSWEEP_REQUIRE(false, "unknown key '" << shown(dotted(key.c_str())) << "' in " << where(key.c_str())
                                              << " (allowed keys in [" << m_section << "]: " << join(m_known) << ")");
      }
    }
  }

 private:
  std::string dotted(char const* key) const { return m_section + "." + key; }
  std::string where(char const* key) const { return m_origins.of(dotted(key)); }

  toml::node const* find(char const* key) {
    m_known.emplace_back(key);
    if (m_table == nullptr) return nullptr;
    return m_table->get(key);
  }

  toml::array const* find_pair(char const* key, char const* expected) {
    toml::node const* node = find(key);
    if (node == nullptr) return nullptr;
    auto const* arr = node->as_array();
    if (arr == nullptr) type_error(key, *node, expected);
    KSWEEP_REQUIRE(arr->size() == 2, "'" << dotted(key) << "' in " << where(key) << " has " << arr->size()
                                         << " elements, expected " << expected << " ([lo, hi])");
    return arr;
  }

  [[noreturn]] void type_error(char const* key, toml::node const& node, char const* expected) const {
    KSWEEP_REQUIRE(false, "wrong type for '" << dotted(key) << "' in " << where(key) << ": got "
                                             << type_name(node.type()) << ", expected " << expected);
    throw Error("unreachable");
  }

  toml::table const* m_table;
  std::string m_section;
  Origins const& m_origins;
  std::vector<std::string> m_known;
};

/// toml++ recurses once per level of a dotted key: a key nested tens of thousands of levels
/// deep would exhaust the stack. No configuration key has more than two levels.
void check_key_depth(std::string const& text, std::string const& origin) {
  constexpr int limit = 64;
  int line = 1, dots = 0;
  char quote = 0;
  for (char c : text) {
    if (c == '\n') {
      ++line, dots = 0, quote = 0;
    } else if (quote != 0) {
      if (c == quote) quote = 0;
    } else if (c == '"' || c == '\'') {
      quote = c;
    } else if (c == '#' || c == '=') {
      quote = '\n';  // a comment or a value: nothing counts until the end of the line
    } else if (c == '.' && ++dots > limit) {
      KSWEEP_REQUIRE(false, "line " << line << " of " << shown(origin) << " holds a key nested more than " << limit
                                    << " levels; ksweep's keys have the form section.key");
    }
  }
}

toml::table parse_toml(std::string const& text, std::string const& origin) {
  check_key_depth(text, origin);
  try {
    return toml::parse(text, origin);
  } catch (toml::parse_error const& e) {
    auto const& pos = e.source().begin;
    KSWEEP_REQUIRE(false, "TOML syntax error in " << shown(origin) << " at line " << pos.line << ", column "
                                                  << pos.column << ": " << e.description());
  }
  throw Error("unreachable");
}

void apply_override(toml::table& root, std::string const& text, Origins& origins) {
  auto const eq = text.find('=');
  KSWEEP_REQUIRE(eq != std::string::npos && eq > 0,
                 "--set '" << shown(text) << "' must have the form section.key=value");
  std::string dotted = text.substr(0, eq);
  std::string value = text.substr(eq + 1);
  auto const trim = [](std::string& s) {
    auto const b = s.find_first_not_of(" \t");
    auto const e = s.find_last_not_of(" \t");
    s = b == std::string::npos ? std::string() : s.substr(b, e - b + 1);
  };
  trim(dotted);
  trim(value);
  auto const dot = dotted.find('.');
  KSWEEP_REQUIRE(
      dot != std::string::npos && dot > 0 && dot + 1 < dotted.size() && dotted.find('.', dot + 1) == std::string::npos,
      "--set '" << shown(text) << "': key '" << shown(dotted)
                << "' must have the form section.key (sections: " << join(key_sections()) << ")");
  KSWEEP_REQUIRE(!value.empty(), "--set '" << shown(text) << "': empty value for '" << shown(dotted) << "'");
  std::string const section = dotted.substr(0, dot);
  std::string const key = dotted.substr(dot + 1);
  KSWEEP_REQUIRE(std::find(key_sections().begin(), key_sections().end(), section) != key_sections().end(),
                 "unknown section '" << shown(section) << "' in --set " << shown(text)
                                     << " (allowed sections: " << join(key_sections()) << ")");

  if (root.get(section) == nullptr) root.insert(section, toml::table{});
  toml::table* target = root.get(section)->as_table();
  KSWEEP_REQUIRE(target != nullptr, "'" << section << "' in " << shown(origins.source()) << " is not a table, so --set "
                                        << shown(text) << " cannot apply");

  toml::table parsed;
  bool is_toml = true;
  try {
    parsed = toml::parse("v = " + value);
  } catch (toml::parse_error const&) {
    is_toml = false;
  }
  if (is_toml && parsed.size() == 1 && parsed.get("v") != nullptr) {
    parsed.get("v")->visit([&](auto&& v) { target->insert_or_assign(key, v); });
  } else {
    // Text that is not TOML is taken as a string (--set storage.dtype=fp16), but not a number
    // TOML cannot hold: an integer beyond 64 bits would otherwise be "a string".
    char* end = nullptr;
    errno = 0;
    (void)std::strtod(value.c_str(), &end);
    bool const numeric = end != value.c_str() && *end == '\0';
    KSWEEP_REQUIRE(!numeric, "--set " << shown(text) << ": " << shown(value) << " is a number TOML cannot hold (its "
                                      << "integers are 64-bit: at most 9223372036854775807; its floats are "
                                      << "doubles)");
    target->insert_or_assign(key, value);
  }
  origins.set_override(dotted, text);
}

bool is_file_model(std::string const& source) {
  std::string const ext = lower_extension(source);
  return ext == ".h5" || ext == ".hdf5" || is_segy_path(source);
}

bool is_raw_path(std::string const& source) {
  auto const ext = std::filesystem::path(source).extension().string();
  return ext == ".f32" || ext == ".bin";
}

void require_finite(std::string const& key, double value) {
  KSWEEP_REQUIRE(std::isfinite(value), key << " = " << value << " must be a finite number");
}

Config build(toml::table root, std::string const& origin, std::vector<std::string> const& overrides) {
  Origins origins(origin);
  for (auto const& text : overrides) apply_override(root, text, origins);

  for (auto const& [k, node] : root) {
    std::string const name(k.str());
    KSWEEP_REQUIRE(std::find(key_sections().begin(), key_sections().end(), name) != key_sections().end(),
                   "unknown section '" << shown(name) << "' in " << shown(origin)
                                       << " (allowed sections: " << join(key_sections()) << ")");
    KSWEEP_REQUIRE(node.is_table(), "'" << shown(name) << "' in " << shown(origin) << " is a " << type_name(node.type())
                                        << ", expected a table [" << name << "]");
  }
  auto const section = [&](char const* name) -> toml::table const* {
    toml::node const* n = root.get(name);
    return n == nullptr ? nullptr : n->as_table();
  };

  Config c;
  c.source_path = origin;
  for (auto const& name : key_sections()) {
    SectionReader r(section(name.c_str()), name, origins);
    for (auto const& k : keys()) {
      if (k.section != name) continue;
      std::visit(
          [&](auto field) {
            auto& value = field(c);
            if constexpr (std::is_same_v<std::decay_t<decltype(value)>, std::string>) {
              if (k.text_or_number) r.get_text_or_number(k.name.c_str(), value);
              else r.get(k.name.c_str(), value);
              if (k.path) c.input_paths.emplace_back(k.dotted(), value);
            } else {
              r.get(k.name.c_str(), value);
            }
          },
          k.field);
    }
    r.finish();
  }
  for (auto const& [name, node] : root)
    if (auto const* t = node.as_table())
      for (auto const& [k, v] : *t) {
        (void)v;
        c.given.push_back(std::string(name.str()) + "." + std::string(k.str()));
      }
  std::sort(c.given.begin(), c.given.end());
  // With stages, fwi.iterations is their sum (validate() refuses a given one that differs).
  if (!c.fwi.stages.empty() && !c.is_given("fwi.iterations")) {
    long long sum = 0;
    for (auto const& st : c.fwi.stages) sum += st.iterations;
    c.fwi.iterations = static_cast<int>(std::min<long long>(sum, std::numeric_limits<int>::max()));
  }
  validate(c);
  return c;
}

}  // namespace

void validate(Config const& c) {
  // Each key against its own limits and choices (keys.cpp), then what keys mean together.
  for (auto const& k : keys()) check_key(k, c);
  auto const& m = c.model;
  KSWEEP_REQUIRE(!m.source.empty(),
                 "model.source is empty (allowed: marmousi2, marmousi2_fine, marmousi, layered3d, "
                 "marmousi2_3d, or a path to a .f32/.bin/.h5 file)");
  KSWEEP_REQUIRE(m.units == "m/s" || is_raw_path(m.source) || is_file_model(m.source),
                 "model.units = \"" << m.units << "\" applies to model files (.f32, .bin, .h5, .hdf5, .sgy, .segy); "
                                    << "model.source = \"" << shown(m.source) << "\" is in m/s");
  if (is_segy_path(m.source))
    KSWEEP_REQUIRE(m.dh > 0, "model.source = \""
                                 << shown(m.source)
                                 << "\" is a SEG-Y model, whose headers do not state the grid spacing "
                                    "reliably: set model.dh (metres between traces and between samples)");
  if (is_raw_path(m.source)) {
    KSWEEP_REQUIRE(m.nz > 0 && m.nx > 0 && m.dh > 0, "model.source = \""
                                                         << shown(m.source) << "\" is a raw float32 file, so model.nz, "
                                                         << "model.nx and model.dh must all be > 0 (got nz = " << m.nz
                                                         << ", nx = " << m.nx << ", dh = " << m.dh << ")");
  }
  for (auto const& [name, crop] :
       {std::pair<char const*, std::optional<std::array<int, 2>> const*>{"model.crop_z", &m.crop_z},
        {"model.crop_x", &m.crop_x},
        {"model.crop_y", &m.crop_y}}) {
    if (!*crop) continue;
    auto const [lo, hi] = **crop;
    KSWEEP_REQUIRE(lo >= 0 && lo < hi,
                   name << " = [" << lo << ", " << hi << "] must satisfy 0 <= lo < hi (half-open cell range)");
  }

  if (c.output.segy) {  // SEG-Y rev 1 holds 16-bit sample counts and intervals in whole microseconds
    double const us = c.time.dt * 1e6;
    KSWEEP_REQUIRE(c.time.nt <= 32767,
                   "output.segy: time.nt = " << c.time.nt << " exceeds the 32767 samples a SEG-Y trace holds");
    KSWEEP_REQUIRE(std::abs(us - std::round(us)) <= 1e-6 * us && us <= 32767,
                   "output.segy: time.dt = " << c.time.dt << " s is not a whole number of microseconds up to 32767 "
                                             << "(SEG-Y stores the sample interval so)");
  }

  // Above the Nyquist frequency the sampled wavelet is aliased noise (a mild under-sampling below
  // it is a warning of the programs).
  KSWEEP_REQUIRE(c.wavelet.freq < 0.5 / c.time.dt,
                 "wavelet.freq = " << c.wavelet.freq << " Hz is at or above the Nyquist frequency " << 0.5 / c.time.dt
                                   << " Hz of time.dt = " << c.time.dt << " s: the sampled wavelet is aliased; lower "
                                   << "wavelet.freq below " << 0.2 / c.time.dt << " Hz or time.dt below "
                                   << 0.2 / c.wavelet.freq << " s");
  // The record must reach the wavelet's peak, else the data hold (almost) nothing to invert.
  double const record = (c.time.nt - 1) * c.time.dt;
  KSWEEP_REQUIRE(c.wavelet.delay < record,
                 "wavelet.delay = " << c.wavelet.delay << " s is at or beyond the end of the record, (time.nt - 1) x "
                                    << "time.dt = " << c.time.nt - 1 << " x " << c.time.dt << " s = " << record
                                    << " s: the wavelet's peak is never recorded and the data are silent; raise "
                                       "time.nt above "
                                    << c.wavelet.delay / c.time.dt + 1
                                    << " (a record longer than the travel times to the receivers), or lower "
                                       "wavelet.delay");
  KSWEEP_REQUIRE(c.wavelet.freq * record >= 1,
                 "wavelet.freq = " << c.wavelet.freq << " Hz has a period of " << 1 / c.wavelet.freq
                                   << " s, longer than the record ((time.nt - 1) x time.dt = " << record
                                   << " s): the source is almost constant; raise wavelet.freq to at least "
                                   << 1 / record << " Hz or lengthen the record");

  {
    auto const [lo, hi] = c.shots.x_range;
    KSWEEP_REQUIRE(std::isfinite(lo) && std::isfinite(hi) && lo >= 0 && hi <= 1 && lo < hi,
                   "shots.x_range = [" << lo << ", " << hi
                                       << "] must satisfy 0 <= lo < hi <= 1 (fractions of the "
                                          "model width)");
  }

  auto check_y = [](char const* section, int count, std::array<double, 2> const& range) {
    auto const [lo, hi] = range;
    KSWEEP_REQUIRE(std::isfinite(lo) && std::isfinite(hi) && lo >= 0 && hi <= 1 && lo <= hi,
                   section << ".y_range = [" << lo << ", " << hi
                           << "] must satisfy 0 <= lo <= hi <= 1 (fractions of the model's extent along y)");
    KSWEEP_REQUIRE(count == 1 || lo < hi, section << ".count_y = " << count << " lines need y_range with lo < hi (got ["
                                                  << lo << ", " << hi << "])");
  };
  check_y("shots", c.shots.count_y, c.shots.y_range);
  check_y("receivers", c.receivers.count_y, c.receivers.y_range);

  auto const& p = c.propagator;
  KSWEEP_REQUIRE(p.pml_freq <= 0.5 / c.time.dt,
                 "propagator.pml_freq = " << p.pml_freq << " Hz is above the Nyquist frequency " << 0.5 / c.time.dt
                                          << " Hz of time.dt = " << c.time.dt
                                          << " s; set it near the wavelet's peak frequency wavelet.freq = "
                                          << c.wavelet.freq << " Hz");
  // The physics' row (propagator.physics, checked against the table's names by its key).
  int const row = core::physics_row(p.physics);
  bool const splits = row < 0 || core::physics_table[row].splits;
  bool vd = false;  // the physics has a density (parameter "rho", read by model.density)
  if (row >= 0)
    for (auto const& q : core::physics_table[row]) vd = vd || std::string_view(q.name) == "rho";
  auto const& dom = c.parallel.domains;
  if (c.is_given("parallel.domains")) {
    std::string text = "[";
    for (std::size_t i = 0; i < dom.size(); ++i) text += (i ? ", " : "") + std::to_string(dom[i]);
    text += "]";
    KSWEEP_REQUIRE(dom.size() == 1 || dom.size() == 2,
                   "parallel.domains = " << text << " must be [nx_parts] (2D) or [ny_parts, nx_parts] (3D)");
    long long const n = dom.size() == 2 ? 1LL * dom[0] * dom[1] : dom[0];
    KSWEEP_REQUIRE(splits || n == 1, "parallel.domains = " << text << " splits the model, but propagator.physics = \""
                                                           << p.physics << "\" (" << core::physics_table[row].summary
                                                           << ") does not run split yet");
    KSWEEP_REQUIRE(n == 1 || p.schedule != "shots",
                   "parallel.domains = " << text << " splits the model, and propagator.schedule = \"shots\" runs "
                                         << "each shot's time loop alone, with no halo exchange between steps: use "
                                            "\"auto\", \"batched\" or \"cells\"");
  }
  for (char const* key : {"model.density", "fwi.invert", "fwi.rho_min", "fwi.rho_max", "fwi.lr_rho"})
    KSWEEP_REQUIRE(vd || !c.is_given(key), key << " is set, but propagator.physics = \"" << p.physics
                                               << "\" has no density: set propagator.physics = \"acoustic_vd\" "
                                                  "(variable density), or remove "
                                               << key);
  if (vd) {
    auto const& d = c.model.density;
    if (!d.empty() && d != "gardner" && !is_raw_path(d) && std::filesystem::path(d).extension() != ".h5" &&
        !is_segy_path(d)) {
      double rho = 0;
      std::istringstream is(d);
      is >> rho;
      KSWEEP_REQUIRE(!is.fail() && is.eof(),
                     "model.density = \""
                         << shown(d) << "\" is not \"gardner\", a number (kg/m^3) or a .f32/.bin/.h5/.sgy/.segy file");
      KSWEEP_REQUIRE(std::isfinite(rho) && rho > 0,
                     "model.density = " << d << " kg/m^3: a density must be finite and > 0 (water: 1000)");
    }
    auto const& inv = c.fwi.invert;
    KSWEEP_REQUIRE(!inv.empty(), "fwi.invert = [] names no parameter (allowed: \"vp\", \"rho\")");
    for (std::size_t i = 0; i < inv.size(); ++i) {
      for (std::size_t j = 0; j < i; ++j)
        KSWEEP_REQUIRE(inv[j] != inv[i], "fwi.invert names \"" << inv[i] << "\" twice");
    }
    // The library's words (fwi::check_options), so that the program and Python say the same.
    KSWEEP_REQUIRE(c.fwi.rho_min > 0 && std::isfinite(c.fwi.rho_max) && c.fwi.rho_min < c.fwi.rho_max,
                   "the bounds fwi.rho_min = " << c.fwi.rho_min << " and fwi.rho_max = " << c.fwi.rho_max
                                               << " kg/m^3 must be finite, 0 < rho_min < rho_max");
  }

  auto const& f = c.fwi;
  KSWEEP_REQUIRE(f.vmin > 0, "fwi.vmin = " << f.vmin
                                           << " m/s: the inversion keeps every velocity in [fwi.vmin, fwi.vmax], so "
                                              "fwi.vmin must be a velocity > 0 m/s (e.g. 1000, or the slowest "
                                              "velocity the model may take)");
  KSWEEP_REQUIRE(f.vmax == 0 || f.vmin < f.vmax, "fwi.vmin = " << f.vmin << " must be < fwi.vmax = " << f.vmax);
  // Adam moves each velocity by about fwi.lr per step; below the float32 spacing of the
  // velocities every step rounds away.
  KSWEEP_REQUIRE(f.lr >= f.vmin * 0x1p-24, "fwi.lr = " << f.lr << " m/s per step is below the float32 resolution of "
                                                       << "the velocities (fwi.vmin x 2^-24 = " << f.vmin * 0x1p-24
                                                       << " m/s): no step could change the model");
  // An optimizer's own keys set for the other one: refused, as other keys of features a run
  // does not use are.
  for (char const* key : {"fwi.lbfgs_memory", "fwi.beta1", "fwi.beta2"}) {
    bool const lbfgs_key = std::string(key) == "fwi.lbfgs_memory";
    KSWEEP_REQUIRE((f.optimizer == "lbfgs") == lbfgs_key || !c.is_given(key),
                   key << " is set, but fwi.optimizer = \"" << f.optimizer << "\" does not use it (it is "
                       << (lbfgs_key ? "L-BFGS's" : "Adam's") << "): set fwi.optimizer = \""
                       << (lbfgs_key ? "lbfgs" : "adam") << "\", or remove " << key);
  }
  if (!f.stages.empty()) {
    long long sum = 0;
    for (std::size_t i = 0; i < f.stages.size(); ++i) {
      auto const& st = f.stages[i];
      std::string const key = "fwi.stages[" + std::to_string(i) + "]";
      require_finite(key + ".max_freq", st.max_freq);
      double const nyquist = 0.5 / c.time.dt;
      KSWEEP_REQUIRE(st.max_freq > 0 && st.max_freq < nyquist,
                     key << ".max_freq = " << st.max_freq << " Hz must be in (0, " << nyquist
                         << ") Hz, below the Nyquist frequency of time.dt = " << c.time.dt << " s");
      KSWEEP_REQUIRE(st.iterations >= 1, key << ".iterations = " << st.iterations << " must be >= 1");
      sum += st.iterations;
    }
    KSWEEP_REQUIRE(f.iterations <= sum,
                   "fwi.iterations = " << f.iterations << " but fwi.stages add up to " << sum
                                       << " iterations: the stages plan no more; remove fwi.iterations (it is then "
                                          "their sum), or lower it to stop early");
  }
  auto const& w = c.wavelet;
  KSWEEP_REQUIRE(!w.source.empty(),
                 "wavelet.source is empty (allowed: \"ricker\", \"estimate\" or a path to a "
                 "wavelet file: .h5, .sgy/.segy or text)");
  KSWEEP_REQUIRE(w.source == "estimate" || !c.is_given("wavelet.stabilisation"),
                 "wavelet.stabilisation is set, but wavelet.source = \"" << shown(w.source)
                                                                         << "\" estimates nothing: set wavelet.source "
                                                                            "= \"estimate\", or remove it");
}

Config load_config(std::filesystem::path const& file, std::vector<std::string> const& overrides) {
  std::error_code ec;
  std::string const name = file.string();
  KSWEEP_REQUIRE(std::filesystem::is_regular_file(file, ec),
                 "config file " << shown_path(file) << " does not exist or is not a regular file");
  auto const bad = first_bad_text_byte(name);
  KSWEEP_REQUIRE(bad == std::string::npos, "the config file's path " << shown_path(file) << " holds a byte that is not "
                                                                     << "UTF-8 text at byte " << bad
                                                                     << "; ksweep records the path in its JSON "
                                                                        "outputs: rename the file");
  std::ifstream in(file, std::ios::binary);
  KSWEEP_REQUIRE(in.good(), "cannot open config file " << shown_path(file));
  std::ostringstream text;
  text << in.rdbuf();
  KSWEEP_REQUIRE(!in.bad(), "cannot read config file " << shown_path(file));
  return build(parse_toml(text.str(), file.string()), file.string(), overrides);
}

Config config_from_string(std::string const& toml_text, std::vector<std::string> const& overrides) {
  Config c = build(parse_toml(toml_text, "<config string>"), "<config string>", overrides);
  c.source_path.clear();
  return c;
}

nlohmann::json config_to_json(Config const& c) {
  // Keys with a `recorded` rule are written only when it holds (a feature's keys with the
  // feature), so that runs without the feature keep their identity (summary.json, checkpoints).
  nlohmann::json j;
  for (auto const& k : keys())
    if (k.recorded == nullptr || k.recorded(c)) j[k.section][k.name] = key_value(k, c);
  j["source_path"] = c.source_path;
  return j;
}

bool Config::is_given(std::string const& dotted) const {
  return std::binary_search(given.begin(), given.end(), dotted);
}

void check_dimension_keys(Config const& c, bool three_d) {
  if (three_d) return;
  std::vector<std::string> keys{"shots.count_y", "shots.y_range", "receivers.count_y", "receivers.y_range",
                                "model.crop_y"};
  std::string found;
  for (auto const& k : keys)
    if (c.is_given(k)) found += (found.empty() ? "" : ", ") + k;
  if (c.parallel.domains.size() == 2)
    found += (found.empty() ? "" : ", ") + std::string("parallel.domains = [") + std::to_string(c.parallel.domains[0]) +
             ", " + std::to_string(c.parallel.domains[1]) + "] (use [" + std::to_string(c.parallel.domains[1]) +
             "] to split x)";
  if (c.model.ny > 0) found += (found.empty() ? "" : ", ") + std::string("model.ny = ") + std::to_string(c.model.ny);
  KSWEEP_REQUIRE(found.empty(), found << " set, but model.source = \"" << shown(c.model.source)
                                      << "\" is a 2D model: these keys place shots, receivers or cells along y and "
                                         "apply to 3D models only; remove them, or use a 3D model");
}

std::string shown_path(std::filesystem::path const& path) {
  std::string out = "\"" + shown(path.string()) + "\"";
  if (path.is_relative()) {
    std::error_code ec;
    auto const cwd = std::filesystem::current_path(ec);
    out += " (relative to the working directory " + (ec ? std::string("(unknown)") : shown(cwd.string())) + ")";
  }
  return out;
}

std::vector<int> shot_x_positions(Config const& config, int nx) {
  KSWEEP_REQUIRE(nx >= 1, "model width nx = " << nx << " must be >= 1");
  int const n = config.shots.count;
  // Shots beyond one per cell along x repeat cells: cost without information.
  KSWEEP_REQUIRE(n >= 1 && n <= nx,
                 "shots.count = " << n << " must be in [1, nx = " << nx << "] (one shot per cell at most)");
  double const lo = config.shots.x_range[0] * (nx - 1);
  double const hi = config.shots.x_range[1] * (nx - 1);
  std::vector<int> x(static_cast<std::size_t>(n));
  if (n == 1) {
    x[0] = static_cast<int>(std::lround(0.5 * (lo + hi)));
    return x;
  }
  for (int i = 0; i < n; ++i) {
    x[static_cast<std::size_t>(i)] = static_cast<int>(std::lround(lo + (hi - lo) * static_cast<double>(i) / (n - 1)));
  }
  return x;
}

std::vector<int> receiver_x_positions(Config const& config, int nx) {
  KSWEEP_REQUIRE(nx >= 1, "model width nx = " << nx << " must be >= 1");
  int const n = config.receivers.count;
  KSWEEP_REQUIRE(n >= 1 && n <= nx,
                 "receivers.count = " << n << " must be in [1, nx = " << nx << "] (one receiver per cell at most)");
  std::vector<int> x(static_cast<std::size_t>(n), 0);
  if (n == 1) return x;
  for (int i = 0; i < n; ++i) {
    x[static_cast<std::size_t>(i)] =
        static_cast<int>(std::lround(static_cast<double>(nx - 1) * static_cast<double>(i) / (n - 1)));
  }
  return x;
}

namespace {
std::vector<int> y_positions(char const* section, int count, std::array<double, 2> const& range, int ny) {
  KSWEEP_REQUIRE(ny >= 1, "model extent ny = " << ny << " must be >= 1");
  KSWEEP_REQUIRE(count >= 1 && count <= ny,
                 section << ".count_y = " << count << " must be in [1, ny = " << ny << "] (one line per cell at most)");
  double const lo = range[0] * (ny - 1), hi = range[1] * (ny - 1);
  std::vector<int> y(static_cast<std::size_t>(count));
  for (int i = 0; i < count; ++i)
    y[static_cast<std::size_t>(i)] = static_cast<int>(
        std::lround(count == 1 ? 0.5 * (lo + hi) : lo + (hi - lo) * static_cast<double>(i) / (count - 1)));
  return y;
}
}  // namespace

std::vector<int> shot_y_positions(Config const& config, int ny) {
  return y_positions("shots", config.shots.count_y, config.shots.y_range, ny);
}

std::vector<int> receiver_y_positions(Config const& config, int ny) {
  return y_positions("receivers", config.receivers.count_y, config.receivers.y_range, ny);
}

}  // namespace ksweep::io
