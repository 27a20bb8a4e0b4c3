#pragma once
/// \file keys.hpp
/// The configuration's keys, declared once: each key's section and name, the Config field it
/// sets, its type, limits, allowed values, unit, help text, when summary.json records it and the
/// keyword of ksweep.Inversion (Python) that sets it. Reading TOML, the per-key checks of
/// validate(), config_to_json, `ksweep keys`, the README's key table (checked by a test) and
/// Python's keyword arguments all walk this one table; what a key means across keys (the record
/// must reach the wavelet's peak, an optimizer's keys set for the other) stays in validate().

#include <ksweep/io/config.hpp>

#include <ksweep/base/names.hpp>

#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace ksweep::io {

/// Where a key's value lives in a Config: a function giving the field.
using Field = std::variant<int& (*)(Config&), double& (*)(Config&), bool& (*)(Config&), std::string& (*)(Config&),
                           std::vector<std::string>& (*)(Config&), std::vector<int>& (*)(Config&),
                           std::array<double, 2>& (*)(Config&), std::optional<std::array<int, 2>>& (*)(Config&),
                           std::vector<FwiSection::Stage>& (*)(Config&)>;

/// One configuration key.
struct Key {
  std::string section;  ///< "fwi"
  std::string name;     ///< "lr"
  Field field;
  std::string help;                ///< what it does (the README's table and `ksweep keys` show it)
  std::string unit;                ///< "m/s", "Hz", "s", "cells", ... (messages and the table), or empty
  std::optional<double> min, max;  ///< numeric limits (of each element for arrays of numbers)
  bool min_open = false, max_open = false;
  std::string note;                           ///< said after a limit's message ("0 = never")
  names::Option const* choices = nullptr;     ///< the allowed values (names.hpp), or none
  bool path = false;                          ///< names a file the run reads (Config::input_paths)
  bool text_or_number = false;                ///< a string, or a number kept as its text
  bool three_d = false;                       ///< places things along y: refused for a 2D model
  bool (*recorded)(Config const&) = nullptr;  ///< summary.json records it when true; null: always
  std::string python;                         ///< the keyword of ksweep.Inversion, or empty
  /// The keyword's default as JSON where Python's differs from the file's (a library call has no
  /// true model to find the water in, and few shots), or empty.
  std::string python_default;

  std::string dotted() const { return section + "." + name; }
  /// "integer", "number", "boolean", "string", "array of strings", ...
  std::string type() const;
  /// The limits and choices as a message or the table says them ("in (0, 1)", "> 0", "one of
  /// ..."), or empty.
  std::string limits() const;
};

/// Every key, section by section in the order of the README's table.
std::vector<Key> const& keys();

/// The key named "section.key", or null.
Key const* find_key(std::string_view dotted);

/// The sections, in the table's order.
std::vector<std::string> const& key_sections();

/// The value of `key` in `config` as JSON (an unset crop: null).
nlohmann::json key_value(Key const& key, Config const& config);

/// Checks `key`'s value in `config` against its own limits and choices (finite numbers, bounds,
/// allowed names). Throws ksweep::Error naming the key (as "`keyword` (section.key)" when a
/// caller's own name for it is given, e.g. Python's), the value and the limit.
void check_key(Key const& key, Config const& config, std::string const& keyword = "");

/// The README's key table (Markdown: key, type, default, allowed values, meaning, the Python
/// keyword and its default where it differs), as
/// `ksweep keys --markdown` prints it.
std::string key_table_markdown();

/// The keys as plain text (`ksweep keys`).
std::string key_table_text();

}  // namespace ksweep::io
