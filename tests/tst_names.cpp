// The registry of allowed names (ksweep/base/names.hpp): the README's configuration table, the
// errors, and the enums and dispatchers that follow its order.

#include <ksweep/base/config.hpp>
#include <ksweep/base/error.hpp>
#include <ksweep/base/names.hpp>
#include <ksweep/core/schedule.hpp>
#include <ksweep/core/stencil.hpp>
#include <ksweep/storage/codec.hpp>
#include <ksweep/storage/step_store.hpp>

#include <gtest/gtest.h>

#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>

namespace {

using namespace ksweep;

std::string read_readme() {
  std::ifstream in(std::string(KSWEEP_SOURCE_DIR) + "/README.md");
  std::ostringstream os;
  os << in.rdbuf();
  return os.str();
}

/// The text between the parentheses after `key` in the README table row of `[section]`
/// ("| `[storage]` | `strategy` ("boundary" or "full"), ..."), or "" if there is none.
std::string table_entry(std::string const& readme, std::string const& dotted) {
  auto const dot = dotted.find('.');
  std::string const row_start = "| `[" + dotted.substr(0, dot) + "]` |";
  auto const row = readme.find(row_start);
  if (row == std::string::npos) return "";
  std::string const line = readme.substr(row, readme.find('\n', row) - row);
  std::string const key = "`" + dotted.substr(dot + 1) + "` (";
  auto const k = line.find(key);
  if (k == std::string::npos) return "";
  std::size_t const open = k + key.size();
  int depth = 1;
  std::size_t i = open;
  for (; i < line.size() && depth > 0; ++i) depth += line[i] == '(' ? 1 : (line[i] == ')' ? -1 : 0);
  return line.substr(open, i - open - 1);
}

/// The names an entry lists: the quoted words of a string option, the numbers of another.
std::set<std::string> listed_names(std::string const& entry, bool quoted) {
  std::regex const word(quoted ? "\"([^\"]*)\"" : "\\b([0-9]+)\\b");
  std::set<std::string> out;
  for (std::sregex_iterator it(entry.begin(), entry.end(), word), end; it != end; ++it) out.insert((*it)[1].str());
  return out;
}

TEST(names, readme_table_agrees_with_registry) {
  std::string const readme = read_readme();
  ASSERT_FALSE(readme.empty()) << "cannot read " << KSWEEP_SOURCE_DIR << "/README.md";
  for (auto const* option : names::options) {
    std::string const key(option->key);
    std::string const entry = table_entry(readme, key);
    ASSERT_FALSE(entry.empty()) << key << ": no `" << key.substr(key.find('.') + 1) << "` (...) in the README's table";
    std::set<std::string> registry;
    for (auto const& c : *option) registry.insert(std::string(c.name));
    EXPECT_EQ(listed_names(entry, option->quoted), registry)
        << key << ": the README lists (" << entry << "), the registry " << option->allowed();
  }
}

TEST(names, readme_entry_parser_sees_a_difference) {
  // The check above on a table that disagrees: a name missing, and one too many.
  std::string const table =
      "| `[storage]` | `dtype` (\"fp32\", \"fp16\" or \"int8\"), `location` (\"device\", \"host\", "
      "\"disk\", \"tape\") |\n| `[propagator]` | `order` (4; 2, 4 or 6), `schedule` (\"auto\": how (see below)) |\n";
  EXPECT_EQ(listed_names(table_entry(table, "storage.dtype"), true), (std::set<std::string>{"fp32", "fp16", "int8"}));
  EXPECT_EQ(listed_names(table_entry(table, "storage.location"), true).size(), 4u);
  EXPECT_EQ(listed_names(table_entry(table, "propagator.order"), false), (std::set<std::string>{"2", "4", "6"}));
  EXPECT_EQ(table_entry(table, "propagator.schedule"), "\"auto\": how (see below)");
  EXPECT_EQ(table_entry(table, "storage.strategy"), "");
}

TEST(names, registry_is_well_formed) {
  std::set<std::string> keys;
  for (auto const* option : names::options) {
    EXPECT_TRUE(keys.insert(std::string(option->key)).second) << option->key;
    ASSERT_GE(option->size(), 2u) << option->key;
    std::set<std::string> seen;
    for (auto const& c : *option) {
      EXPECT_TRUE(seen.insert(std::string(c.name)).second) << option->key << ": " << c.name << " twice";
      EXPECT_FALSE(c.description.empty()) << option->key << ": " << c.name;
      EXPECT_EQ(c.description.find('\n'), std::string_view::npos) << option->key << ": " << c.name;
    }
  }
  EXPECT_EQ(keys.size(), 6u);
}

std::string error_of(names::Option const& option, std::string const& value) {
  try {
    option.parse(value);
  } catch (Error const& e) {
    return e.what();
  }
  return "";
}

TEST(names, parse_errors_name_key_value_and_allowed) {
  EXPECT_NE(
      error_of(names::dtype, "fp8").find("storage.dtype = \"fp8\" is not allowed (allowed: fp32, fp16, bf16, int8)"),
      std::string::npos);
  EXPECT_NE(
      error_of(names::location, "gpu").find("storage.location = \"gpu\" is not allowed (allowed: device, host, disk)"),
      std::string::npos);
  EXPECT_NE(
      error_of(names::strategy, "ckpt").find("storage.strategy = \"ckpt\" is not allowed (allowed: full, boundary)"),
      std::string::npos);
  EXPECT_NE(error_of(names::schedule, "rows")
                .find("propagator.schedule = \"rows\" is not allowed (allowed: auto, batched, shots, cells)"),
            std::string::npos);
  EXPECT_NE(error_of(names::order, "5").find("propagator.order = 5 is not allowed (allowed: 2, 4, 6, 8)"),
            std::string::npos);
  for (auto const* option : names::options) {
    for (std::size_t i = 0; i < option->size(); ++i)
      EXPECT_EQ(option->parse(std::string(option->name(i))), static_cast<int>(i));
    EXPECT_NE(error_of(*option, "").find(std::string(option->key)), std::string::npos);
  }
}

TEST(names, enums_follow_the_registry) {
  for (std::size_t i = 0; i < names::dtype.size(); ++i) {
    std::string const name(names::dtype.name(i));
    auto const d = storage::parse_dtype(name);
    EXPECT_EQ(static_cast<std::size_t>(d), i);
    EXPECT_EQ(storage::to_string(d), name);
    EXPECT_EQ(storage::dispatch_dtype(d, [](auto codec) { return decltype(codec)::dtype; }), d) << name;
  }
  for (std::size_t i = 0; i < names::location.size(); ++i) {
    std::string const name(names::location.name(i));
    EXPECT_EQ(static_cast<std::size_t>(storage::parse_location(name)), i);
    EXPECT_EQ(storage::to_string(storage::parse_location(name)), name);
  }
  EXPECT_EQ(storage::parse_strategy("full"), storage::Strategy::full);
  EXPECT_EQ(storage::parse_strategy("boundary"), storage::Strategy::boundary);
  EXPECT_EQ(storage::to_string(storage::Strategy::full), "full");
  EXPECT_EQ(storage::to_string(storage::Strategy::boundary), "boundary");
  for (auto s : {core::Schedule::automatic, core::Schedule::batched, core::Schedule::shots, core::Schedule::cells})
    EXPECT_EQ(core::parse_schedule(core::to_string(s)), s);
  EXPECT_EQ(core::to_string(core::Schedule::automatic), "auto");
  EXPECT_EQ(core::to_string(core::Schedule::cells), "cells");
  for (std::size_t i = 0; i < names::order.size(); ++i) {
    int const order = std::stoi(std::string(names::order.name(i)));
    EXPECT_EQ(core::dispatch_order(order, [](auto o) { return decltype(o)::value; }), order);
  }
}

}  // namespace
